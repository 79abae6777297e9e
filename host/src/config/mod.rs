//! The pipeline config: one TOML file, every key overridable by an
//! environment variable `SLUICE__SECTION__KEY` (double underscores between
//! levels: `SLUICE__PIPELINE__BATCH_SIZE=500`). Typed with serde, unknown
//! keys refused, validated before anything is read, so a malformed config
//! stops the start with one message naming the key or file at fault.
//! `examples/quickstart/sluice.toml` is the annotated example.

mod located;
pub use located::locate_plugin_problem;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use crate::plugin::{OutputLimits, PluginLimits, PluginSpec};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {}: {message}", path.display())]
    Load { path: PathBuf, message: String },
    #[error("config {}: {key}: {message}", path.display())]
    Invalid { path: PathBuf, key: String, message: String },
    /// More than one thing is wrong: each on its own line, key first.
    #[error("config {} has {} problems:{}", path.display(), problems.len(), problems.iter().map(|p| format!("\n  {}: {}", p.key, p.message)).collect::<String>())]
    Many { path: PathBuf, problems: Vec<Problem> },
}

/// One thing wrong with a config: the key at fault and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub key: String,
    pub message: String,
}

/// Everything wrong with one config file, gathered before anything
/// refuses it: an operator fixes a config in one round trip, not one per
/// mistake.
pub struct Problems {
    path: PathBuf,
    list: Vec<Problem>,
}

impl Problems {
    pub fn new(path: &Path) -> Problems {
        Problems { path: path.to_path_buf(), list: Vec::new() }
    }

    pub fn add(&mut self, key: &str, message: String) {
        self.list.push(Problem { key: key.to_string(), message });
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Nothing wrong, one thing (its key in the message, as ever), or a list.
    pub fn into_result(mut self) -> Result<(), ConfigError> {
        match self.list.len() {
            0 => Ok(()),
            1 => {
                let Problem { key, message } = self.list.remove(0);
                Err(ConfigError::Invalid { path: self.path, key, message })
            }
            _ => Err(ConfigError::Many { path: self.path, problems: self.list }),
        }
    }
}

impl ConfigError {
    /// The same error with each problem's place in the file the operator
    /// wrote, `(line 12, column 1)`, where `text` (the file) writes its key.
    fn located(self, text: &str) -> ConfigError {
        let place = |key: &str, message: String| match located::locate_problem(text, key, &message) {
            Some((line, column)) => format!("{message} (line {line}, column {column})"),
            None => message,
        };
        match self {
            ConfigError::Invalid { path, key, message } => {
                let message = place(&key, message);
                ConfigError::Invalid { path, key, message }
            }
            ConfigError::Many { path, problems } => ConfigError::Many {
                path,
                problems: problems
                    .into_iter()
                    .map(|Problem { key, message }| Problem { message: place(&key, message), key })
                    .collect(),
            },
            other => other,
        }
    }

    /// Each problem on its own, for a caller that adds its own (`check`).
    pub fn problems(&self) -> Vec<Problem> {
        match self {
            ConfigError::Load { message, .. } => vec![Problem { key: String::new(), message: message.clone() }],
            ConfigError::Invalid { key, message, .. } => vec![Problem { key: key.clone(), message: message.clone() }],
            ConfigError::Many { problems, .. } => problems.clone(),
        }
    }
}

/// The sections of a config file, each deserialised on its own (see
/// `Config::load`): every section's mistake is reported, not the first.
#[derive(Debug, Clone)]
pub struct Config {
    pub pipeline: PipelineConfig,
    pub source: SourceConfig,
    pub plugins: Vec<PluginConfig>,
    pub dedup: DedupConfig,
    pub sink: SinkConfig,
    pub quarantine: QuarantineConfig,
    pub shutdown: ShutdownConfig,
    pub metrics: MetricsConfig,
    /// Who may read record contents on the metrics listener.
    pub api: crate::telemetry::api::ApiConfig,
    pub watchdog: crate::pipeline::watchdog::WatchdogConfig,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Serve `/metrics` (Prometheus), `/health` and `/ready` here, e.g.
    /// `127.0.0.1:9898`. Unset: no endpoint.
    pub listen: Option<std::net::SocketAddr>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    /// Identifies the pipeline; the state store refuses to open for another.
    pub name: String,
    /// Where checkpoints, dedup ids and the quarantine live (RocksDB).
    pub state_dir: PathBuf,
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
    /// Batches of one partition that may be between its source and its
    /// commit at once: while one is in the sink or being synced, the next
    /// is read and run through the plugins. Commits stay contiguous; more
    /// costs memory (up to this many batches per partition) and re-reading
    /// after a crash, not safety. Default 2: on the 2-core machines one
    /// file ran 1.3–1.5× faster (wall) with 2 or 4 than with 1, and four
    /// files spent about 25% more CPU per record with 4 than with 1 or 2
    /// (`benches/README.md`, pipeline_file).
    #[serde(default = "default_in_flight")]
    pub in_flight: usize,
    /// Free space the state store's volume keeps: below it, commits wait
    /// (and say so) until space is freed, instead of RocksDB running out
    /// mid-write (`store::room`). `0` turns the guard off. Default 64MiB,
    /// room for RocksDB's flushes of the dedup window's buffers.
    #[serde(default = "default_state_reserve", deserialize_with = "bytes")]
    pub state_reserve: u64,
}

fn default_state_reserve() -> u64 {
    64 << 20
}

fn default_batch_size() -> usize {
    1000
}

fn default_in_flight() -> usize {
    2
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum SourceConfig {
    File(FileSourceConfig),
    Kafka(Box<KafkaSourceConfig>),
}

/// A Kafka consumer group member (see `source/kafka`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaSourceConfig {
    /// `host:port[,host:port…]`.
    pub brokers: String,
    /// Topic names; a name starting with `^` is a regular expression.
    pub topics: Vec<String>,
    pub group_id: String,
    /// How often finished prefixes are committed (also when idle, on
    /// revoke and on shutdown).
    #[serde(default = "default_commit_interval", deserialize_with = "duration")]
    pub commit_interval: Duration,
    /// Records librdkafka may hold fetched per partition ahead of the
    /// batches in flight (`queued.min.messages`): at this many it stops
    /// fetching the partition until the driver has taken some. Default:
    /// four batches.
    pub queue_records: Option<usize>,
    /// How long a partition's task waits to fill a batch once it has its
    /// first record. Each batch pays two syncs (sink, state store): a batch
    /// of a few records costs as much as a full one.
    #[serde(default = "default_linger", deserialize_with = "duration")]
    pub linger: Duration,
    /// Any librdkafka property (`session.timeout.ms = 6000`). In
    /// environment overrides write `_` for `.`:
    /// `SLUICE__SOURCE__PROPERTIES__SESSION_TIMEOUT_MS=6000`.
    #[serde(default)]
    pub properties: BTreeMap<String, PropertyValue>,
    pub tls: Option<TlsConfig>,
    pub sasl: Option<SaslConfig>,
    /// Fence members that lost their partitions: each batch's offsets
    /// commit in a Kafka transaction under a transactional id of its
    /// partition's own (`<group_id>-txn-<topic>-<partition>`), which the
    /// partition's next owner initialises first, so a member whose session
    /// expired commits nothing more and stops after the batch it was in.
    /// Needs the dedup changelog.
    #[serde(default)]
    pub transactions: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum PropertyValue {
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
}

impl std::fmt::Display for PropertyValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PropertyValue::Bool(b) => write!(f, "{b}"),
            PropertyValue::Int(n) => write!(f, "{n}"),
            PropertyValue::Float(x) => write!(f, "{x}"),
            PropertyValue::Text(t) => f.write_str(t),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// CA bundle (PEM) to verify the brokers; default: the system's.
    pub ca: Option<PathBuf>,
    /// Client certificate and key (PEM) for mutual TLS.
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    /// The environment variable holding the key's password.
    pub key_password_env: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SaslConfig {
    /// `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    pub mechanism: String,
    pub username: String,
    /// The environment variable holding the password: secrets never sit
    /// in the config file.
    pub password_env: String,
}

fn default_linger() -> Duration {
    Duration::from_millis(100)
}

fn default_commit_interval() -> Duration {
    Duration::from_secs(1)
}

/// librdkafka properties sluice sets itself: the custody rule depends on
/// them (offsets are committed by sluice, only for finished prefixes).
const OWNED_PROPERTIES: [(&str, &str); 6] = [
    ("bootstrap.servers", "source.brokers"),
    ("group.id", "source.group_id"),
    ("enable.auto.commit", "nothing: sluice commits finished prefixes itself"),
    ("enable.auto.offset.store", "nothing: sluice commits finished prefixes itself"),
    ("enable.partition.eof", "nothing"),
    ("transactional.id", "source.transactions (one transactional id per partition)"),
];

/// Property names that hold secrets; they come from the environment only.
pub fn is_secret_property(key: &str) -> bool {
    ["password", "secret", "ssl.key.pem", "ssl_key", "sasl.oauthbearer.config", "sasl.jaas"]
        .iter()
        .any(|s| key.contains(s))
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSourceConfig {
    /// Paths or globs; each file found is one partition.
    pub paths: Vec<String>,
    /// Longer lines go to the quarantine whole.
    #[serde(default = "default_max_line", deserialize_with = "bytes")]
    pub max_line_bytes: u64,
    /// Keep reading as files grow (and follow rotation); otherwise stop at
    /// the end of every file.
    #[serde(default)]
    pub follow: bool,
    #[serde(default = "default_poll", deserialize_with = "duration")]
    pub poll_interval: Duration,
    /// A batch ends at `pipeline.batch_size` lines or at this many bytes,
    /// whichever comes first: what bounds memory when lines are long (a
    /// batch of 1,000 lines of 1 MiB would otherwise be 1 GiB per batch in
    /// flight). Default 8MiB, the same as a Kafka partition's queue.
    #[serde(default = "default_batch_bytes", deserialize_with = "bytes")]
    pub batch_bytes: u64,
}

fn default_max_line() -> u64 {
    1 << 20
}

fn default_batch_bytes() -> u64 {
    8 << 20
}

fn default_poll() -> Duration {
    Duration::from_millis(250)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginConfig {
    pub name: String,
    pub path: PathBuf,
    /// `"blake3:<hex>"` or `"sha256:<hex>"`: the file must have this
    /// digest, or the start (and a reload) stops. `sluice plugin inspect`
    /// prints the line.
    #[serde(default)]
    pub digest: Option<String>,
    /// The plugin's own table, handed to its `init`.
    #[serde(default = "empty_table")]
    pub config: serde_json::Value,
    #[serde(default = "default_memory", deserialize_with = "bytes")]
    pub memory: u64,
    #[serde(default = "default_time_limit", deserialize_with = "duration")]
    pub time_limit: Duration,
    /// The output contract's bounds (`plugin::output_rules`): a record whose
    /// events pass them is rejected into the quarantine, naming the rule.
    #[serde(default = "default_max_id_bytes")]
    pub max_id_bytes: usize,
    #[serde(default = "default_max_events")]
    pub max_events_per_record: usize,
    #[serde(default = "default_max_event_bytes", deserialize_with = "bytes")]
    pub max_event_bytes_per_record: u64,
    /// Log lines one batch may send before the rest are only counted.
    #[serde(default = "default_max_log_lines")]
    pub max_log_lines_per_batch: u32,
}

fn default_max_id_bytes() -> usize {
    OutputLimits::default().max_id_bytes
}

fn default_max_events() -> usize {
    OutputLimits::default().max_events_per_record
}

fn default_max_event_bytes() -> u64 {
    OutputLimits::default().max_event_bytes_per_record as u64
}

fn default_max_log_lines() -> u32 {
    PluginLimits::default().max_log_lines_per_batch
}

fn empty_table() -> serde_json::Value {
    serde_json::json!({})
}

fn default_memory() -> u64 {
    PluginLimits::default().memory_bytes as u64
}

fn default_time_limit() -> Duration {
    PluginLimits::default().time_per_batch
}

impl PluginConfig {
    pub fn spec(&self) -> PluginSpec {
        PluginSpec {
            name: self.name.clone(),
            path: self.path.clone(),
            config: self.config.clone(),
            limits: PluginLimits {
                memory_bytes: usize::try_from(self.memory).unwrap_or(usize::MAX),
                time_per_batch: self.time_limit,
                output: OutputLimits {
                    max_id_bytes: self.max_id_bytes,
                    max_events_per_record: self.max_events_per_record,
                    max_event_bytes_per_record: usize::try_from(self.max_event_bytes_per_record).unwrap_or(usize::MAX),
                },
                max_log_lines_per_batch: self.max_log_lines_per_batch,
                fixed_now: None,
            },
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DedupConfig {
    /// How long an id is remembered: at least as long as the source can
    /// replay a record. Default for files: 7 days; for Kafka: the longest
    /// retention of the topics (read from the brokers), else 7 days.
    #[serde(default, deserialize_with = "optional_duration")]
    pub window: Option<Duration>,
    /// Which ids see each other (Kafka): each partition's own (the
    /// default), or the whole topic's, so that a producer's re-send that
    /// lands on another partition is caught too.
    #[serde(default)]
    pub scope: DedupScope,
    /// Exact topic-wide dedup across instances (Kafka, with `scope =
    /// "topic"`): each event is produced, keyed by its id, to the internal
    /// topic `<group_id>-by-id`, so that every copy of an id lands on one
    /// partition there, owned by one member, whose partition-scoped window
    /// and changelog decide it (`pipeline::kafka::repartition`). Costs a
    /// produce and a consume per event; without it the topic scope is
    /// only as exact across instances as the changelog follower's lag.
    #[serde(default)]
    pub repartition: bool,
    /// The dedup changelog (Kafka): every recorded id is also produced to
    /// a topic of the source's cluster before its batch's offsets may be
    /// committed, and a partition's next owner restores them from there.
    #[serde(default)]
    pub changelog: ChangelogConfig,
    /// What a partition does when its changelog cannot be read to its
    /// end (deleted, recreated, unreachable): refuse to start (`fail`, the
    /// default) or run without the ids it could not restore and count
    /// what it could not check (`accept-duplicates`).
    #[serde(default)]
    pub on_missing_state: OnMissingState,
    /// Keep each delivered id's trail (when, from which position, through
    /// which sink and plugin versions) and each absorbed duplicate's, for
    /// `sluice audit`: 29 bytes beside each id, in the same write.
    #[serde(default = "default_audit")]
    pub audit: bool,
}

impl Default for DedupConfig {
    fn default() -> Self {
        DedupConfig {
            window: None,
            scope: DedupScope::default(),
            repartition: false,
            changelog: ChangelogConfig::default(),
            on_missing_state: OnMissingState::default(),
            audit: default_audit(),
        }
    }
}

fn default_audit() -> bool {
    true
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum DedupScope {
    /// An id is a duplicate only on the partition that delivered it: each
    /// instance keeps and restores the ids of the partitions it owns.
    #[default]
    Partition,
    /// An id delivered on any partition of a topic is a duplicate on all
    /// of them: every instance follows the whole changelog (memory and
    /// restore time grow with the topic, not with what it owns).
    Topic,
}

impl DedupScope {
    pub fn name(self) -> &'static str {
        match self {
            DedupScope::Partition => "partition",
            DedupScope::Topic => "topic",
        }
    }
}

impl TryFrom<String> for DedupScope {
    type Error = String;
    fn try_from(s: String) -> Result<DedupScope, String> {
        match s.as_str() {
            "partition" => Ok(DedupScope::Partition),
            "topic" => Ok(DedupScope::Topic),
            _ => Err(format!("{s:?} is not a scope: \"partition\" or \"topic\"")),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum OnMissingState {
    #[default]
    Fail,
    AcceptDuplicates,
}

impl TryFrom<String> for OnMissingState {
    type Error = String;
    fn try_from(s: String) -> Result<OnMissingState, String> {
        match s.as_str() {
            "fail" => Ok(OnMissingState::Fail),
            "accept-duplicates" => Ok(OnMissingState::AcceptDuplicates),
            _ => Err(format!("{s:?} is neither \"fail\" nor \"accept-duplicates\"")),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChangelogConfig {
    /// On by default for a Kafka source; files never move, and have none.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Default `<group_id>-dedup-changelog`. Created by sluice when
    /// missing (as many partitions as the source topics, retention at
    /// least the window, `cleanup.policy=delete`).
    #[serde(default)]
    pub topic: Option<String>,
    /// How many times the window the changelog keeps its messages (at
    /// least 1): a message older than the window restores nothing.
    #[serde(default = "default_retention_factor")]
    pub retention_factor: u32,
}

fn yes() -> bool {
    true
}

fn default_retention_factor() -> u32 {
    2
}

impl Default for ChangelogConfig {
    fn default() -> ChangelogConfig {
        ChangelogConfig { enabled: true, topic: None, retention_factor: default_retention_factor() }
    }
}

impl DedupConfig {
    /// The changelog topic of a Kafka pipeline, if it has one.
    pub fn changelog_topic(&self, source: &SourceConfig) -> Option<String> {
        let SourceConfig::Kafka(k) = source else { return None };
        if !self.changelog.enabled {
            return None;
        }
        Some(self.changelog.topic.clone().unwrap_or_else(|| format!("{}-dedup-changelog", k.group_id)))
    }

    fn validate(&self, source: &SourceConfig, p: &mut Problems) {
        if self.window.is_some_and(|w| w.is_zero()) {
            p.add("dedup.window", "must be greater than zero".into());
        }
        let kafka = matches!(source, SourceConfig::Kafka(_));
        if !kafka && self.scope == DedupScope::Topic {
            p.add("dedup.scope", "only for a kafka source (a file pipeline's files already share one scope)".into());
        }
        if self.repartition && self.scope != DedupScope::Topic {
            p.add(
                "dedup.repartition",
                "repartitions ids for the topic scope: set dedup.scope = \"topic\" as well (the partition scope \
                 needs no repartitioning)"
                    .into(),
            );
        }
        if let SourceConfig::Kafka(k) = source
            && self.repartition
        {
            let internal = crate::pipeline::kafka::repartition::topic(&k.group_id);
            if crate::source::kafka::client::matches(k, &internal) {
                p.add(
                    "source.topics",
                    format!(
                        "{internal:?} is dedup.repartition's internal topic: the front would consume its own output"
                    ),
                );
            }
        }
        if !kafka && self.changelog.topic.is_some() {
            p.add("dedup.changelog.topic", "only for a kafka source (files never move)".into());
        }
        if let Some(t) = &self.changelog.topic
            && (t.is_empty() || !t.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)))
        {
            p.add("dedup.changelog.topic", format!("{t:?} is not a valid topic name"));
        }
        if self.changelog.retention_factor == 0 {
            p.add("dedup.changelog.retention_factor", "must be at least 1".into());
        }
        if let SourceConfig::Kafka(k) = source
            && k.transactions
            && !self.changelog.enabled
        {
            p.add(
                "source.transactions",
                "needs the dedup changelog (dedup.changelog.enabled = true): without it the partition's next \
                 owner knows nothing of what the fenced member delivered"
                    .into(),
            );
        }
        if let (SourceConfig::Kafka(k), Some(t)) = (source, self.changelog_topic(source))
            && k.topics.iter().any(|s| *s == t || (s.starts_with('^') && crate::source::kafka::client::matches(k, &t)))
        {
            p.add(
                "dedup.changelog.topic",
                format!("{t:?} is one of source.topics: the pipeline would consume its own changelog"),
            );
        }
    }
}

pub const DEFAULT_WINDOW: Duration = Duration::from_secs(7 * 86_400);

fn optional_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    sluice_guest::duration::deserialize(d).map(Some)
}

pub use crate::sink::config::SinkConfig;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuarantineConfig {
    /// JSON fields masked before an entry is written: a name
    /// (`password`) wherever it is in the object, or a dotted path from the
    /// root (`auth.key`), in the payload and a Kafka record's key; a Kafka
    /// header of that name (in any case) is masked whole. The unmasked
    /// original is then not kept, and the entry says what was masked.
    #[serde(default)]
    pub mask_fields: Vec<String>,
    /// Regexes masked in payloads that are not JSON (`token=(\S+)`), and in
    /// every string of those that are: the first capture group, or the
    /// whole match when there is none, becomes `***`.
    #[serde(default)]
    pub mask_patterns: Vec<String>,
    /// Kafka pipelines: also produce every quarantined record to this
    /// topic of the source's cluster (the original as the value, the
    /// context in headers). Each entry is acknowledged by the brokers
    /// (`acks=all`) before the record's offset may be committed.
    pub topic: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShutdownConfig {
    /// How long in-flight work may take to finish after SIGTERM/SIGINT.
    #[serde(default = "default_grace", deserialize_with = "duration")]
    pub grace: Duration,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        ShutdownConfig { grace: default_grace() }
    }
}

fn default_grace() -> Duration {
    Duration::from_secs(10)
}

pub(crate) fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    sluice_guest::duration::deserialize(d)
}

/// Sizes: `1048576`, `64KiB`, `1MiB`, `2GiB`, `10MB`.
pub(crate) fn bytes<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        N(u64),
        S(String),
    }
    match Raw::deserialize(d)? {
        Raw::N(n) => Ok(n),
        Raw::S(s) => parse_size(&s).map_err(serde::de::Error::custom),
    }
}

/// Remove `.` and `..` without touching the file system (the path may not
/// exist yet, and symlinks are the operator's to choose).
pub fn normalize(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("invalid size {s:?} (examples: 65536, 64KiB, 256MiB)"))?;
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => return Err(format!("invalid size {s:?}: unknown unit (use B, KiB, MiB, GiB, KB, MB, GB)")),
    };
    n.checked_mul(mult).ok_or_else(|| format!("invalid size {s:?}: too large"))
}

impl Config {
    /// Load `path`, apply `SLUICE__…` environment overrides, resolve
    /// relative paths against the config file's folder, and validate.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let load_err = |message: String| ConfigError::Load { path: path.to_path_buf(), message };
        if !path.is_file() {
            return Err(load_err("no such file".into()));
        }
        let written = std::fs::read_to_string(path).map_err(|e| load_err(e.to_string()))?;
        Config::load_text(path, &written).map_err(|e| e.located(&written))
    }

    /// `load` of `written`, the text of the file at `path`.
    fn load_text(path: &Path, written: &str) -> Result<Config, ConfigError> {
        let load_err = |message: String| ConfigError::Load { path: path.to_path_buf(), message };
        let text = interpolate_file(written, &|name| std::env::var(name).ok()).map_err(|list| {
            let mut p = Problems::new(path);
            for (key, message) in list {
                p.add(&key, message);
            }
            p.into_result().err().unwrap_or_else(|| load_err("interpolation failed".into()))
        })?;
        let raw = config::Config::builder()
            .add_source(config::File::from_str(&text, config::FileFormat::Toml))
            .add_source(
                config::Environment::with_prefix("SLUICE").prefix_separator("__").separator("__").try_parsing(true),
            )
            .build()
            .map_err(|e| load_err(e.to_string()))?;
        let mut p = Problems::new(path);
        let mut cfg = Config::from_sections(&raw, &mut p).ok_or_else(|| {
            match std::mem::replace(&mut p, Problems::new(path)).into_result() {
                Err(e) => e,
                Ok(()) => load_err("a section is missing".into()),
            }
        })?;
        // Absolute and normalised: partition keys and the store's identity
        // are paths, and must not depend on the directory sluice runs from.
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let base = std::path::absolute(dir).map_err(|e| load_err(e.to_string()))?;
        cfg.resolve_paths(&base);
        cfg.validate(&mut p);
        p.into_result()?;
        Ok(cfg)
    }

    /// Each section on its own, so a mistake in `[source]` does not hide
    /// one in `[sink]`: serde stops at a section's first unknown or
    /// mistyped key, and this goes on to the next section. `None` when any
    /// section failed (each failure is in `p`).
    fn from_sections(raw: &config::Config, p: &mut Problems) -> Option<Config> {
        const SECTIONS: [&str; 10] =
            ["pipeline", "source", "plugins", "dedup", "sink", "quarantine", "shutdown", "metrics", "api", "watchdog"];
        match raw.clone().try_deserialize::<BTreeMap<String, config::Value>>() {
            Ok(table) => {
                for key in table.keys().filter(|k| !SECTIONS.contains(&k.as_str())) {
                    p.add(key, format!("unknown section; the sections are {}", SECTIONS.join(", ")));
                }
            }
            Err(e) => p.add("", e.to_string()),
        }
        // One struct per section, deserialised from the root: the config
        // crate then names the full key at fault (`dedup.scope`), which it
        // does not when handed a section on its own.
        macro_rules! section {
            ($field:ident: $ty:ty $(, $default:ident)?) => {{
                #[derive(Deserialize)]
                struct Only {
                    $(#[serde($default)])?
                    $field: $ty,
                }
                match raw.clone().try_deserialize::<Only>() {
                    Ok(only) => Some(only.$field),
                    Err(e) => {
                        let message = e.to_string();
                        if message == concat!("missing configuration field \"", stringify!($field), "\"") {
                            p.add(stringify!($field), format!("missing: every config has a [{}] section", stringify!($field)));
                        } else {
                            p.add(stringify!($field), message);
                        }
                        None
                    }
                }
            }};
        }
        let pipeline = section!(pipeline: PipelineConfig);
        let source = section!(source: SourceConfig);
        let plugins = section!(plugins: Vec<PluginConfig>, default);
        let dedup = section!(dedup: DedupConfig, default);
        let sink = section!(sink: SinkConfig);
        let quarantine = section!(quarantine: QuarantineConfig, default);
        let shutdown = section!(shutdown: ShutdownConfig, default);
        let metrics = section!(metrics: MetricsConfig, default);
        let api = section!(api: crate::telemetry::api::ApiConfig, default);
        let watchdog = section!(watchdog: crate::pipeline::watchdog::WatchdogConfig, default);
        if !p.is_empty() {
            return None;
        }
        Some(Config {
            pipeline: pipeline?,
            source: source?,
            plugins: plugins?,
            dedup: dedup?,
            sink: sink?,
            quarantine: quarantine?,
            shutdown: shutdown?,
            metrics: metrics?,
            api: api?,
            watchdog: watchdog?,
        })
    }

    fn resolve_paths(&mut self, base: &Path) {
        let abs = |p: &Path| normalize(&if p.is_absolute() { p.to_path_buf() } else { base.join(p) });
        self.pipeline.state_dir = abs(&self.pipeline.state_dir);
        for p in &mut self.plugins {
            p.path = abs(&p.path);
        }
        match &mut self.source {
            SourceConfig::File(f) => {
                for pattern in &mut f.paths {
                    *pattern = abs(Path::new(pattern.as_str())).to_string_lossy().into_owned();
                }
            }
            SourceConfig::Kafka(k) => {
                if let Some(tls) = &mut k.tls {
                    for p in [&mut tls.ca, &mut tls.cert, &mut tls.key].into_iter().flatten() {
                        *p = abs(p);
                    }
                }
                // Environment overrides cannot hold dots: `_` stands for `.`.
                k.properties =
                    std::mem::take(&mut k.properties).into_iter().map(|(key, v)| (key.replace('_', "."), v)).collect();
            }
        }
        self.sink.absolutize(&abs);
    }

    /// Every problem, not the first: an operator fixes a config in one
    /// round trip instead of one per mistake.
    fn validate(&self, p: &mut Problems) {
        for (key, message) in self.api.validate(self.metrics.listen) {
            p.add(&key, message);
        }
        if self.pipeline.name.trim().is_empty() {
            p.add("pipeline.name", "must not be empty".into());
        }
        if !(1..=64).contains(&self.pipeline.in_flight) {
            p.add("pipeline.in_flight", format!("{} is not within 1..=64", self.pipeline.in_flight));
        }
        if !(1..=100_000).contains(&self.pipeline.batch_size) {
            p.add("pipeline.batch_size", format!("{} is not within 1..=100000", self.pipeline.batch_size));
        }
        match &self.source {
            SourceConfig::File(f) => {
                if f.paths.is_empty() {
                    p.add("source.paths", "name at least one path or glob".into());
                }
                for (i, pattern) in f.paths.iter().enumerate() {
                    if let Err(e) = glob::Pattern::new(pattern) {
                        p.add(&format!("source.paths[{i}]"), format!("{pattern:?}: {e}"));
                    }
                }
                if f.max_line_bytes < 16 {
                    p.add("source.max_line_bytes", "must be at least 16 bytes".into());
                }
                if f.batch_bytes < 1024 {
                    p.add("source.batch_bytes", "must be at least 1KiB".into());
                }
            }
            SourceConfig::Kafka(k) => k.validate(p),
        }
        for (i, plugin) in self.plugins.iter().enumerate() {
            if !plugin.path.is_file() {
                p.add(&format!("plugins[{i}].path"), format!("{}: no such file", plugin.path.display()));
            }
            if plugin.memory < 1 << 20 {
                p.add(&format!("plugins[{i}].memory"), "must be at least 1MiB".into());
            }
            if plugin.max_id_bytes == 0 || plugin.max_events_per_record == 0 || plugin.max_event_bytes_per_record == 0 {
                let key = if plugin.max_id_bytes == 0 {
                    "max_id_bytes"
                } else if plugin.max_events_per_record == 0 {
                    "max_events_per_record"
                } else {
                    "max_event_bytes_per_record"
                };
                p.add(&format!("plugins[{i}].{key}"), "must be at least 1".into());
            }
            if !plugin.config.is_object() {
                p.add(&format!("plugins[{i}].config"), "must be a table".into());
            }
            if let Some(d) = &plugin.digest
                && let Err(e) = d.parse::<crate::plugin::pin::Pin>()
            {
                p.add(&format!("plugins[{i}].digest"), e);
            }
        }
        if let Some(dup) = self
            .plugins
            .iter()
            .enumerate()
            .find_map(|(i, p)| self.plugins[..i].iter().any(|q| q.name == p.name).then_some(&p.name))
        {
            p.add("plugins", format!("two plugins are named {dup:?}: names label metrics and quarantine entries"));
        }
        self.dedup.validate(&self.source, p);
        self.watchdog.validate(p);
        for (key, message) in self.sink.validate() {
            p.add(&format!("sink.{key}"), message);
        }
        for (i, pattern) in self.quarantine.mask_patterns.iter().enumerate() {
            if let Err(e) = regex::bytes::Regex::new(pattern) {
                p.add(&format!("quarantine.mask_patterns[{i}]"), format!("{pattern:?}: {e}"));
            }
        }
        if let Some(topic) = &self.quarantine.topic {
            if !matches!(self.source, SourceConfig::Kafka(_)) {
                p.add("quarantine.topic", "only for a kafka source (files keep the local quarantine)".into());
            }
            if topic.is_empty() || !topic.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) {
                p.add("quarantine.topic", format!("{topic:?} is not a valid topic name"));
            }
        }
    }
}

impl KafkaSourceConfig {
    fn validate(&self, p: &mut Problems) {
        if self.brokers.trim().is_empty() {
            p.add("source.brokers", "name at least one host:port".into());
        }
        if self.group_id.trim().is_empty() {
            p.add("source.group_id", "must not be empty".into());
        }
        if self.topics.is_empty() {
            p.add("source.topics", "name at least one topic (or a ^regex)".into());
        }
        for (i, t) in self.topics.iter().enumerate() {
            if let Some(re) = t.strip_prefix('^') {
                if let Err(e) = regex::Regex::new(&format!("^{re}")) {
                    p.add(&format!("source.topics[{i}]"), format!("{t:?}: {e}"));
                }
            } else if t.is_empty() || !t.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) {
                p.add(&format!("source.topics[{i}]"), format!("{t:?} is not a valid topic name"));
            }
        }
        if self.commit_interval < Duration::from_millis(10) {
            p.add("source.commit_interval", "must be at least 10ms".into());
        }
        if self.linger > Duration::from_secs(10) {
            p.add("source.linger", "must be at most 10s".into());
        }
        if self.queue_records == Some(0) {
            p.add("source.queue_records", "must be at least 1".into());
        }
        for key in self.properties.keys() {
            let at = format!("source.properties.{key:?}");
            if let Some((_, instead)) = OWNED_PROPERTIES.iter().find(|(k, _)| k == key) {
                p.add(&at, format!("set by sluice; use {instead}"));
            }
            if is_secret_property(key) {
                p.add(
                    &at,
                    "secrets come from the environment only: use source.sasl.password_env or \
                     source.tls.key_password_env"
                        .into(),
                );
            }
        }
        if let Some(sasl) = &self.sasl {
            let mechanisms = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];
            if !mechanisms.contains(&sasl.mechanism.as_str()) {
                p.add("source.sasl.mechanism", format!("{:?} is not one of {mechanisms:?}", sasl.mechanism));
            }
            if std::env::var_os(&sasl.password_env).is_none() {
                p.add("source.sasl.password_env", format!("the environment variable {} is not set", sasl.password_env));
            }
        }
        if let Some(tls) = &self.tls {
            for (key, file) in
                [("source.tls.ca", &tls.ca), ("source.tls.cert", &tls.cert), ("source.tls.key", &tls.key)]
            {
                if let Some(file) = file.as_ref().filter(|f| !f.is_file()) {
                    p.add(key, format!("{}: no such file", file.display()));
                }
            }
            if tls.cert.is_some() != tls.key.is_some() {
                p.add("source.tls", "cert and key go together".into());
            }
            if let Some(var) = tls.key_password_env.as_ref().filter(|v| std::env::var_os(v).is_none()) {
                p.add("source.tls.key_password_env", format!("the environment variable {var} is not set"));
            }
        }
    }
}

/// `${VAR}`, `${VAR:-default}` (unset or empty: the default) and
/// `${VAR:?message}` in every string of the file, before anything else
/// reads it; `$${` is a literal `${`. An unset variable without a default
/// is an error naming the key and the variable: never an empty string
/// that surfaces at run time.
fn interpolate_file(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, Vec<(String, String)>> {
    if !text.contains("${") {
        return Ok(text.to_string());
    }
    let mut table: toml::Table = text.parse().map_err(|e: toml::de::Error| vec![(String::new(), e.to_string())])?;
    let mut missing = Vec::new();
    for (k, v) in table.iter_mut() {
        interpolate_value(v, k, env, &mut missing);
    }
    if !missing.is_empty() {
        return Err(missing);
    }
    toml::to_string(&table).map_err(|e| vec![(String::new(), e.to_string())])
}

/// Every string under `v`, each failure kept with its key.
fn interpolate_value(
    v: &mut toml::Value,
    key: &str,
    env: &dyn Fn(&str) -> Option<String>,
    failed: &mut Vec<(String, String)>,
) {
    match v {
        toml::Value::String(s) => match interpolate(s, env) {
            Ok(done) => *s = done,
            Err(m) => failed.push((key.to_string(), m)),
        },
        toml::Value::Array(a) => {
            for (i, x) in a.iter_mut().enumerate() {
                interpolate_value(x, &format!("{key}[{i}]"), env, failed);
            }
        }
        toml::Value::Table(t) => {
            for (k, x) in t.iter_mut() {
                interpolate_value(x, &format!("{key}.{k}"), env, failed);
            }
        }
        _ => {}
    }
}

fn interpolate(s: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
            continue;
        }
        let Some(body) = tail.strip_prefix("${") else {
            out.push('$');
            rest = &tail[1..];
            continue;
        };
        let end = body.find('}').ok_or_else(|| format!("{tail:?}: a ${{ without its }}"))?;
        let (expr, after) = (&body[..end], &body[end + 1..]);
        let (name, op) = match expr.find(':') {
            Some(i) => (&expr[..i], Some(&expr[i..])),
            None => (expr, None),
        };
        if name.is_empty()
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            || name.starts_with(|c: char| c.is_ascii_digit())
        {
            return Err(format!("${{{expr}}}: {name:?} is not a variable name"));
        }
        let value = env(name);
        match op {
            None => out.push_str(&value.ok_or_else(|| {
                format!("${{{name}}}: the environment variable {name} is not set (give a default with ${{{name}:-…}})")
            })?),
            Some(op) if op.starts_with(":-") => match value.filter(|v| !v.is_empty()) {
                Some(v) => out.push_str(&v),
                None => out.push_str(&op[2..]),
            },
            Some(op) if op.starts_with(":?") => match value.filter(|v| !v.is_empty()) {
                Some(v) => out.push_str(&v),
                None => return Err(format!("${{{name}}}: {} (the environment variable {name} is not set)", &op[2..])),
            },
            Some(op) => return Err(format!("${{{expr}}}: {op:?} is not :-default or :?message")),
        }
        rest = after;
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_variables_are_interpolated_or_named_when_missing() {
        let env = |name: &str| match name {
            "BROKERS" => Some("k1:9092,k2:9092".to_string()),
            "EMPTY" => Some(String::new()),
            _ => None,
        };
        assert_eq!(interpolate("${BROKERS}", &env).as_deref(), Ok("k1:9092,k2:9092"));
        assert_eq!(interpolate("a-${UNSET:-b}-${EMPTY:-c}", &env).as_deref(), Ok("a-b-c"));
        assert_eq!(interpolate("cost $5, $${HOME} kept", &env).as_deref(), Ok("cost $5, ${HOME} kept"));
        assert!(interpolate("${UNSET}", &env).is_err_and(|e| e.contains("UNSET is not set")));
        assert!(interpolate("${UNSET:?set it to the group}", &env).is_err_and(|e| e.contains("set it to the group")));
        assert!(interpolate("${BROKERS", &env).is_err_and(|e| e.contains("without its }")));
        assert!(interpolate("${1X}", &env).is_err_and(|e| e.contains("not a variable name")));
        let text = "[pipeline]\nname = \"p-${UNSET:-x}\"\n[[plugins]]\nname = \"j\"\npath = \"${PLUGINS}/j.wasm\"\n";
        assert_eq!(
            interpolate_file(text, &env).err(),
            Some(vec![(
                "plugins[0].path".to_string(),
                "${PLUGINS}: the environment variable PLUGINS is not set (give a default with ${PLUGINS:-…})"
                    .to_string()
            )])
        );
        let ok =
            interpolate_file("[source]\nbrokers = \"${BROKERS}\"\nn = 3\n", &env).unwrap_or_else(|e| panic!("{e:?}"));
        assert!(ok.contains("brokers = \"k1:9092,k2:9092\"") && ok.contains("n = 3"), "{ok}");
        // Through `Config::load`: before anything starts.
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("s.toml");
        std::fs::write(
            &path,
            "[pipeline]\nname = \"p\"\nstate_dir = \"s\"\n[source]\ntype = \"file\"\n\
             paths = [\"${SLUICE_TEST_UNSET_LOG_DIR}/a.log\"]\n[sink]\ntype = \"stdout\"\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let e = error_of(Config::load(&path));
        assert!(e.contains("source.paths[0]") && e.contains("SLUICE_TEST_UNSET_LOG_DIR is not set"), "{e}");
    }

    /// The annotated examples are configs a newcomer copies: each must load.
    #[test]
    fn every_example_config_loads() {
        // SAFETY: set before any thread of this test reads the environment;
        // these names are used by no other test.
        unsafe {
            std::env::set_var("CLICKHOUSE_PASSWORD", "x");
            std::env::set_var("O2_AUTH", "Basic eA==");
            std::env::set_var("PGPASSWORD_SLUICE", "x");
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
        let mut loaded = 0;
        for dir in std::fs::read_dir(&root).into_iter().flatten().flatten() {
            for file in std::fs::read_dir(dir.path()).into_iter().flatten().flatten() {
                let path = file.path();
                if path.extension().is_some_and(|e| e == "toml")
                    && path.file_name().is_some_and(|n| n == "sluice.toml" || n == "openobserve.toml")
                {
                    // The plugins are built by scripts/quickstart; stand-ins
                    // here, since only the config is under test.
                    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
                    for p in ["json.wasm", "ts-window.wasm", "pattern.wasm"] {
                        std::fs::write(tmp.path().join(p), b"").unwrap_or_else(|e| panic!("{e}"));
                    }
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    let text = text.replace("../../out/plugins/", &format!("{}/", tmp.path().display()));
                    let copy = tmp.path().join("sluice.toml");
                    std::fs::write(&copy, text).unwrap_or_else(|e| panic!("{e}"));
                    Config::load(&copy).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                    loaded += 1;
                }
            }
        }
        assert!(loaded >= 5, "examples found: {loaded}");
    }

    #[test]
    fn sink_configs_name_the_key_at_fault() {
        let load = |sink: &str| {
            let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
            let path = dir.path().join("s.toml");
            let text = format!(
                "[pipeline]\nname = \"s\"\nstate_dir = \"s\"\n[source]\ntype = \"file\"\npaths = [\"x\"]\n[sink]\n{sink}\n"
            );
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
            error_of(Config::load(&path))
        };
        let e = load("type = \"http\"\nurl = \"ftp://x\"");
        assert!(e.contains("sink.url"), "{e}");
        let e = load(
            "type = \"http\"\nurl = \"http://x\"\n[sink.headers_from_env]\nAuthorization = \"SLUICE_UNSET_TOKEN_Q\"",
        );
        assert!(e.contains("sink.headers_from_env.Authorization") && e.contains("SLUICE_UNSET_TOKEN_Q"), "{e}");
        let e = load("type = \"http\"\nurl = \"http://x\"\nresponse = \"elasticsearch_bulk\"");
        assert!(e.contains("sink.index"), "{e}");
        let e = load("type = \"http\"\nurl = \"http://x\"\nretries = 3");
        assert!(e.contains("retries"), "an unknown key is named: {e}");
        let e = load("type = \"clickhouse\"\nurl = \"http://x\"\ntable = \"a b\"");
        assert!(e.contains("sink.table"), "{e}");
        let e = load("type = \"kafka\"\nbrokers = \"b:9092\"\ntopic = \"t\"\nproperties = { acks = \"1\" }");
        assert!(e.contains("sink.properties.\"acks\""), "{e}");
        let e = load("type = \"file\"\npath = \"out.ndjson\"\n[sink.breaker]\nfailures = 0");
        assert!(e.contains("sink.breaker.failures") || e.contains("breaker"), "{e}");
    }

    /// `response` is a built-in's name or a profile table; both are read,
    /// and a profile's mistakes name their key.
    #[test]
    fn a_response_profile_is_a_name_or_a_table() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let load = |sink: &str| {
            let path = dir.path().join("s.toml");
            let text = format!(
                "[pipeline]\nname = \"s\"\nstate_dir = \"s\"\n[source]\ntype = \"file\"\npaths = [\"x\"]\n[sink]\ntype = \"http\"\nurl = \"http://x\"\n{sink}\n"
            );
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
            Config::load(&path)
        };
        let cfg = load("response = \"datadog\"").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cfg.sink.response().map(|r| r.name().to_string()), Some("datadog".into()));
        let table = "[sink.response]\ndescription = \"mine\"\n[[sink.response.status]]\ncodes = [\"2xx\"]\nfate = \"read\"\n\
                     [sink.response.items]\narray = \"/results\"\nstatus = \"/code\"\nid = \"/id\"\n\
                     [[sink.response.items.rules]]\ncodes = [422]\nreason_matches = \"(?i)too old\"\nfate = \"reject\"\n";
        let cfg = load(table).unwrap_or_else(|e| panic!("{e}"));
        let p = cfg.sink.response().and_then(|r| r.profile().ok()).unwrap_or_else(|| panic!("a profile"));
        assert_eq!(p.description, "mine");
        assert!(p.items.is_some_and(|i| i.id.is_some() && i.rules.len() == 1));
        let e = error_of(load("response = \"splunk\""));
        assert!(e.contains("sink.response") && e.contains("elasticsearch_bulk"), "{e}");
        let e = error_of(load("[sink.response]\n[[sink.response.status]]\ncodes = [404]\nfate = \"split\"\n"));
        assert!(e.contains("sink.response.status[0].codes") && e.contains("always systemic"), "{e}");
        let e = error_of(load("[sink.response]\nrows = 1\n"));
        assert!(e.contains("rows"), "an unknown key is named: {e}");
        let e = error_of(load("[sink.response]\n[sink.response.items]\narray = \"items\"\nstatus = \"/s\"\n"));
        assert!(e.contains("a JSON pointer starts with /"), "{e}");
    }

    #[test]
    fn normalize_is_lexical() {
        assert_eq!(normalize(Path::new("/a/b/../../c/./d")), PathBuf::from("/c/d"));
        assert_eq!(normalize(Path::new("/a/x/../*.log")), PathBuf::from("/a/*.log"));
    }

    /// A config with a mistake in each of three sections, and two
    /// variables unset: every one is named, not the first.
    #[test]
    fn every_problem_is_reported_in_one_pass() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("s.toml");
        let write = |text: &str| std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
        write(
            "[pipeline]\nname = \"p\"\nstate_dir = \"s\"\nbatch_sise = 5\n[source]\ntype = \"file\"\n\
             paths = [\"a.log\"]\n[sink]\ntype = \"stdout\"\n[dedup]\nwindow = \"forever\"\n[extra]\nx = 1\n",
        );
        let problems = Config::load(&path).err().map(|e| e.problems()).unwrap_or_default();
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["extra", "pipeline", "dedup"], "{problems:?}");
        assert!(problems[1].message.contains("batch_sise"), "{problems:?}");
        // Past deserialisation, every check runs too.
        write(
            "[pipeline]\nname = \" \"\nstate_dir = \"s\"\nbatch_size = 0\n[source]\ntype = \"file\"\n\
             paths = [\"a.log\"]\nmax_line_bytes = 1\n[sink]\ntype = \"stdout\"\n[dedup]\nscope = \"topic\"\n",
        );
        let e = Config::load(&path).err().map(|e| e.to_string()).unwrap_or_default();
        for key in ["pipeline.name", "pipeline.batch_size", "source.max_line_bytes", "dedup.scope"] {
            assert!(e.contains(&format!("\n  {key}: ")), "{key} missing from: {e}");
        }
        assert!(e.contains("has 4 problems"), "{e}");
        write("[pipeline]\nstate_dir = \"s\"\n[sink]\ntype = \"stdout\"\n");
        let e = Config::load(&path).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            e.contains("pipeline: missing configuration field \"pipeline.name\"")
                && e.contains("source: missing: every config"),
            "{e}"
        );
        // Every unset variable, each with its key.
        write(
            "[pipeline]\nname = \"${SLUICE_TEST_UNSET_A}\"\nstate_dir = \"${SLUICE_TEST_UNSET_B}\"\n\
             [source]\ntype = \"file\"\npaths = [\"a.log\"]\n[sink]\ntype = \"stdout\"\n",
        );
        let problems = Config::load(&path).err().map(|e| e.problems()).unwrap_or_default();
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["pipeline.name", "pipeline.state_dir"], "{problems:?}");
    }

    #[test]
    fn a_mask_pattern_that_does_not_compile_is_named() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("s.toml");
        std::fs::write(
            &path,
            "[pipeline]\nname = \"p\"\nstate_dir = \"s\"\n[source]\ntype = \"file\"\npaths = [\"a.log\"]\n\
             [sink]\ntype = \"stdout\"\n[quarantine]\nmask_patterns = ['token=(\\S+)', '(unclosed']\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let e = error_of(Config::load(&path));
        assert!(e.contains("quarantine.mask_patterns[1]") && e.contains("(unclosed"), "{e}");
        assert!(!e.contains("mask_patterns[0]"), "{e}");
    }

    fn kafka_config(source_extra: &str) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("k.toml");
        let topics = if source_extra.contains("topics") { "" } else { "topics = [\"logs\"]" };
        let text = format!(
            "[pipeline]\nname = \"k\"\nstate_dir = \"s\"\n[source]\ntype = \"kafka\"\nbrokers = \"127.0.0.1:9092\"\n\
             {topics}\ngroup_id = \"g\"\n{source_extra}\n[sink]\ntype = \"stdout\"\n"
        );
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
        Config::load(&path)
    }

    fn error_of(r: Result<Config, ConfigError>) -> String {
        r.err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn kafka_configs_are_validated_before_anything_starts() {
        assert!(kafka_config("").is_ok());
        let e = error_of(kafka_config("properties = { \"sasl.password\" = \"hunter2\" }"));
        assert!(e.contains("source.properties.\"sasl.password\"") && e.contains("environment"), "{e}");
        assert!(!e.contains("hunter2"), "the secret is never repeated: {e}");
        let e = error_of(kafka_config("properties = { \"enable.auto.commit\" = true }"));
        assert!(e.contains("enable.auto.commit") && e.contains("set by sluice"), "{e}");
        let e = error_of(kafka_config("topics = [\"^(unclosed\"]"));
        assert!(e.contains("source.topics[0]"), "{e}");
        let e = error_of(kafka_config(
            "sasl = { mechanism = \"PLAIN\", username = \"u\", password_env = \"SLUICE_UNSET_VAR_XYZ\" }",
        ));
        assert!(e.contains("source.sasl.password_env") && e.contains("SLUICE_UNSET_VAR_XYZ"), "{e}");
        let e = error_of(kafka_config("commit_interval = \"1ms\""));
        assert!(e.contains("source.commit_interval"), "{e}");
        let e = error_of(kafka_config("colour = \"blue\""));
        assert!(e.contains("colour"), "{e}");
    }

    #[test]
    fn kafka_property_overrides_use_underscores_for_dots() {
        let cfg = kafka_config("properties = { session_timeout_ms = 6000 }").unwrap_or_else(|e| panic!("{e}"));
        let SourceConfig::Kafka(k) = &cfg.source else { panic!("not kafka") };
        assert_eq!(k.properties.get("session.timeout.ms").map(|v| v.to_string()), Some("6000".into()));
    }

    #[test]
    fn repartition_is_for_the_topic_scope_and_never_consumes_its_own_topic() {
        let cfg = kafka_config("[dedup]\nscope = \"topic\"\nrepartition = true").unwrap_or_else(|e| panic!("{e}"));
        assert!(cfg.dedup.repartition);
        let e = error_of(kafka_config("[dedup]\nrepartition = true"));
        assert!(e.contains("dedup.repartition") && e.contains("scope = \"topic\""), "{e}");
        let e = error_of(kafka_config("topics = [\"^g-by.*\"]\n[dedup]\nscope = \"topic\"\nrepartition = true"));
        assert!(e.contains("source.topics") && e.contains("g-by-id"), "{e}");
        assert!(kafka_config("topics = [\"^g-by.*\"]\n[dedup]\nscope = \"topic\"").is_ok());
    }

    #[test]
    fn transactions_need_the_changelog_and_own_the_transactional_id() {
        let cfg = kafka_config("transactions = true").unwrap_or_else(|e| panic!("{e}"));
        let SourceConfig::Kafka(k) = &cfg.source else { panic!("not kafka") };
        assert!(k.transactions);
        let e = error_of(kafka_config("transactions = true\n[dedup]\nchangelog.enabled = false"));
        assert!(e.contains("source.transactions") && e.contains("dedup.changelog.enabled"), "{e}");
        assert!(kafka_config("transactions = false\n[dedup]\nchangelog.enabled = false").is_ok());
        let e = error_of(kafka_config("properties = { \"transactional.id\" = \"mine\" }"));
        assert!(e.contains("transactional.id") && e.contains("source.transactions"), "{e}");
    }

    #[test]
    fn dedup_scope_and_changelog_are_checked_where_they_are_defined() {
        let cfg = kafka_config("").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cfg.dedup.scope, DedupScope::Partition);
        assert_eq!(cfg.dedup.changelog_topic(&cfg.source).as_deref(), Some("g-dedup-changelog"), "on by default");
        let cfg = kafka_config(
            "[dedup]\nscope = \"topic\"\non_missing_state = \"accept-duplicates\"\nchangelog.topic = \"ids\"",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cfg.dedup.scope, DedupScope::Topic);
        assert_eq!(cfg.dedup.on_missing_state, OnMissingState::AcceptDuplicates);
        assert_eq!(cfg.dedup.changelog_topic(&cfg.source).as_deref(), Some("ids"));
        let cfg = kafka_config("[dedup]\nchangelog.enabled = false").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cfg.dedup.changelog_topic(&cfg.source), None);
        let e = error_of(kafka_config("[dedup]\nscope = \"global\""));
        assert!(e.contains("dedup.scope") && e.contains("partition") && e.contains("topic"), "{e}");
        let e = error_of(kafka_config("[dedup]\nchangelog.topic = \"logs\""));
        assert!(e.contains("dedup.changelog.topic") && e.contains("consume its own changelog"), "{e}");
        let e = error_of(kafka_config("[dedup]\nchangelog.retention_factor = 0"));
        assert!(e.contains("dedup.changelog.retention_factor"), "{e}");
        let e = error_of(kafka_config("[dedup]\nchangelog.partitions = 3"));
        assert!(e.contains("partitions"), "unknown keys are refused: {e}");
        let e = error_of(kafka_config("[dedup]\non_missing_state = \"ignore\""));
        assert!(e.contains("on_missing_state") && e.contains("accept-duplicates"), "{e}");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64KiB"), Ok(65_536));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("10MB"), Ok(10_000_000));
        assert_eq!(parse_size("12"), Ok(12));
        assert!(parse_size("1 parsec").is_err());
        assert!(parse_size("MiB").is_err());
    }
}
