//! The pipeline config: one TOML file, every key overridable by an
//! environment variable `SLUICE__SECTION__KEY` (double underscores between
//! levels: `SLUICE__PIPELINE__BATCH_SIZE=500`). Typed with serde, unknown
//! keys refused, validated before anything is read, so a malformed config
//! stops the start with one message naming the key or file at fault.
//! `examples/quickstart/sluice.toml` is the annotated example.

//!
//! This module only assembles: each section's type lives beside the
//! component it configures, checks itself there (`validate`), and imports
//! nothing from here. What is left here is reading the file, interpolating
//! `${VAR}`, placing each problem at its line, and the checks that span
//! sections.

mod located;
mod pipeline;
pub mod schema;
mod unknown_keys;

pub(crate) use located::locate_plugin_problem;
use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

pub(crate) use self::pipeline::PipelineConfig;
pub use self::pipeline::ShutdownConfig;
use crate::plugin::config::PluginConfig;
use crate::problem::{ConfigError, Problem, Problems};
use crate::route::config::RouteConfig;
use crate::schema_registry::config::SchemaRegistryConfig;
use crate::sink::config::NamedSinkConfig;
use crate::sink::config::SinkConfig;
use crate::source::config::SourceConfig;
use crate::store::dedup::config::{DedupConfig, DedupScope};
use crate::store::quarantine::config::QuarantineConfig;
use crate::telemetry::config::{ApiConfig, MetricsConfig};
use crate::units::normalize;
use crate::watchdog::config::WatchdogConfig;
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
    #[cfg(test)]
    pub(crate) fn problems(&self) -> Vec<Problem> {
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
    /// `[pipeline]`: the name, the state store, batching.
    pub pipeline: PipelineConfig,
    /// `[source]`: files or Kafka.
    pub source: SourceConfig,
    /// `[[plugins]]`: the chain, in order.
    pub plugins: Vec<PluginConfig>,
    /// `[dedup]`: the window of delivered event ids.
    pub dedup: DedupConfig,
    /// `[[sinks]]`, or the one `[sink]` as a sink named `default`.
    pub sinks: Vec<NamedSinkConfig>,
    /// `[[routes]]`: which sinks an event goes to (none: every sink).
    pub routes: Vec<RouteConfig>,
    /// `[quarantine]`: where refused records are kept, and masking.
    pub quarantine: QuarantineConfig,
    /// `[shutdown]`: how long a stop may drain.
    pub shutdown: ShutdownConfig,
    /// `[metrics]`: the listener for metrics, status and the API.
    pub metrics: MetricsConfig,
    /// Who may read record contents on the metrics listener.
    pub api: ApiConfig,
    /// `[watchdog]`: what counts as stuck.
    pub watchdog: WatchdogConfig,
    /// `[schema_registry]`: where the schemas of framed records (Avro,
    /// Protobuf) come from.
    pub schema_registry: Option<SchemaRegistryConfig>,
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
        for (i, plugin) in cfg.plugins.iter_mut().enumerate() {
            plugin.read_config_file(i, &mut p);
        }
        cfg.validate(&mut p);
        p.into_result()?;
        Ok(cfg)
    }

    /// Each section on its own, so a mistake in `[source]` does not hide
    /// one in `[sink]`: serde stops at a section's first unknown or
    /// mistyped key, and this goes on to the next section. `None` when any
    /// section failed (each failure is in `p`).
    fn from_sections(raw: &config::Config, p: &mut Problems) -> Option<Config> {
        const SECTIONS: [&str; 13] = [
            "pipeline",
            "source",
            "plugins",
            "dedup",
            "sink",
            "sinks",
            "routes",
            "quarantine",
            "shutdown",
            "metrics",
            "api",
            "watchdog",
            "schema_registry",
        ];
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
        // A misspelt source or sink key, named as written (serde would call
        // some of them a missing key instead); those sections are then not
        // read.
        let unknown = unknown_keys::in_sections(raw, p);
        let source = if unknown.source { None } else { section!(source: SourceConfig) };
        let plugins = section!(plugins: Vec<PluginConfig>, default);
        let dedup = section!(dedup: DedupConfig, default);
        let (sink, sinks) = if unknown.sinks {
            (None, None)
        } else {
            (section!(sink: Option<SinkConfig>, default), section!(sinks: Vec<NamedSinkConfig>, default))
        };
        let routes = section!(routes: Vec<RouteConfig>, default);
        let sinks = match (sink, sinks) {
            (Some(Some(_)), Some(list)) if !list.is_empty() => {
                p.add("sinks", "a config has one [sink] or a list of [[sinks]], not both".into());
                None
            }
            (Some(Some(one)), Some(_)) => {
                Some(vec![NamedSinkConfig { name: crate::route::config::DEFAULT_SINK.into(), sink: one }])
            }
            (Some(None), Some(list)) if list.is_empty() => {
                p.add("sink", "missing: every config has a [sink] section (or [[sinks]])".into());
                None
            }
            (_, list) => list,
        };
        let quarantine = section!(quarantine: QuarantineConfig, default);
        let shutdown = section!(shutdown: ShutdownConfig, default);
        let metrics = section!(metrics: MetricsConfig, default);
        let api = section!(api: ApiConfig, default);
        let watchdog = section!(watchdog: WatchdogConfig, default);
        let schema_registry = section!(schema_registry: Option<SchemaRegistryConfig>, default);
        if !p.is_empty() {
            return None;
        }
        Some(Config {
            pipeline: pipeline?,
            source: source?,
            plugins: plugins?,
            dedup: dedup?,
            sinks: sinks?,
            routes: routes?,
            quarantine: quarantine?,
            shutdown: shutdown?,
            metrics: metrics?,
            api: api?,
            watchdog: watchdog?,
            schema_registry: schema_registry?,
        })
    }

    fn resolve_paths(&mut self, base: &Path) {
        let abs = |p: &Path| normalize(&if p.is_absolute() { p.to_path_buf() } else { base.join(p) });
        self.pipeline.state_dir = abs(&self.pipeline.state_dir);
        for p in &mut self.plugins {
            p.path = abs(&p.path);
            p.config_file = p.config_file.as_deref().map(abs);
        }
        match &mut self.source {
            SourceConfig::File(f) => {
                for pattern in &mut f.paths {
                    *pattern = abs(Path::new(pattern.as_str())).to_string_lossy().into_owned();
                }
            }
            SourceConfig::Kafka(k) => {
                k.connection.absolutize(&abs);
            }
        }
        for s in &mut self.sinks {
            s.sink.absolutize(&abs);
        }
        if let Some(r) = &mut self.schema_registry {
            r.absolutize(&abs);
        }
    }

    /// The changelog topic, if the pipeline has one (Kafka, changelog on).
    pub fn changelog_topic(&self) -> Option<String> {
        self.dedup.changelog_topic(self.source.kafka_group())
    }

    /// `[dedup]` against `[source]`: what only a Kafka source has, and the
    /// topics a pipeline writes that it must not also read.
    fn validate_dedup_against_source(&self, p: &mut Problems) {
        let dedup = &self.dedup;
        let kafka = match &self.source {
            SourceConfig::Kafka(k) => Some(k),
            SourceConfig::File(_) => None,
        };
        if kafka.is_none() && dedup.scope == DedupScope::Topic {
            p.add("dedup.scope", "only for a kafka source (a file pipeline's files already share one scope)".into());
        }
        if kafka.is_none() && dedup.changelog.topic.is_some() {
            p.add("dedup.changelog.topic", "only for a kafka source (files never move)".into());
        }
        let Some(k) = kafka else { return };
        if dedup.repartition {
            let internal = crate::source::kafka::config::repartition_topic(&k.group_id);
            if k.matches(&internal) {
                p.add(
                    "source.topics",
                    format!(
                        "{internal:?} is dedup.repartition's internal topic: the front would consume its own output"
                    ),
                );
            }
        }
        if k.transactions && !dedup.changelog.enabled {
            p.add(
                "source.transactions",
                "needs the dedup changelog (dedup.changelog.enabled = true): without it the partition's next \
                 owner knows nothing of what the fenced member delivered"
                    .into(),
            );
        }
        if let Some(t) = self.changelog_topic()
            && k.topics.iter().any(|s| *s == t || (s.starts_with('^') && k.matches(&t)))
        {
            p.add(
                "dedup.changelog.topic",
                format!("{t:?} is one of source.topics: the pipeline would consume its own changelog"),
            );
        }
    }

    /// Each sink's keys (under `sink.` for a single `[sink]`, else
    /// `sinks[i].`), their names, and every route against them.
    fn validate_sinks_and_routes(&self, p: &mut Problems) {
        let single = self.sinks.len() == 1 && self.sinks[0].name == crate::route::config::DEFAULT_SINK;
        for (i, s) in self.sinks.iter().enumerate() {
            let at = if single { "sink".to_string() } else { format!("sinks[{i}]") };
            p.under(&at, |p| if single { s.sink.validate(p) } else { s.validate(p) });
            if self.sinks[..i].iter().any(|o| o.name == s.name) {
                p.add(&format!("{at}.name"), format!("two sinks are named {:?}", s.name));
            }
        }
        if self.sinks.len() > crate::route::config::MAX_SINKS {
            p.add("sinks", format!("{} sinks; at most {}", self.sinks.len(), crate::route::config::MAX_SINKS));
        }
        let names: Vec<String> = self.sinks.iter().map(|s| s.name.clone()).collect();
        for (i, r) in self.routes.iter().enumerate() {
            p.under(&format!("routes[{i}]"), |p| r.validate(&names, p));
        }
    }

    /// The first sink: what a tool that reads one sink's settings (`sluice
    /// sink classify`, test cases' answers) reads.
    pub(crate) fn first_sink(&self) -> &SinkConfig {
        // `from_sections` refuses a config without a sink.
        &self.sinks[0].sink
    }

    /// Every problem, not the first: an operator fixes a config in one
    /// round trip instead of one per mistake.
    fn validate(&self, p: &mut Problems) {
        self.api.validate(self.metrics.listen, p);
        self.pipeline.validate(p);
        self.source.validate(p);
        for (i, plugin) in self.plugins.iter().enumerate() {
            plugin.validate(i, p);
        }
        if let Some(dup) = self
            .plugins
            .iter()
            .enumerate()
            .find_map(|(i, p)| self.plugins[..i].iter().any(|q| q.name == p.name).then_some(&p.name))
        {
            p.add("plugins", format!("two plugins are named {dup:?}: names label metrics and quarantine entries"));
        }
        self.dedup.validate(p);
        self.validate_dedup_against_source(p);
        self.watchdog.validate(p);
        self.validate_sinks_and_routes(p);
        self.quarantine.validate(self.source.is_kafka(), p);
        if let Some(r) = &self.schema_registry {
            p.under("schema_registry", |p| r.validate(p));
        }
        let single = self.sinks.len() == 1 && self.sinks[0].name == crate::route::config::DEFAULT_SINK;
        for (i, s) in self.sinks.iter().enumerate() {
            if let SinkConfig::Kafka(k) = &s.sink
                && k.encoding.is_some()
                && self.schema_registry.is_none()
            {
                let at = if single { "sink.encoding".to_string() } else { format!("sinks[{i}].encoding") };
                p.add(&at, "needs a [schema_registry] section: the registry its schema is registered with".into());
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
    use std::path::PathBuf;

    use super::*;
    use crate::store::dedup::config::OnMissingState;
    use crate::units::parse_size;

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
                    && !path.starts_with(root.join("recipes"))
                {
                    // The plugins are built by scripts/quickstart; stand-ins
                    // here, since only the config is under test.
                    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
                    for p in [
                        "json.wasm",
                        "ts-window.wasm",
                        "pattern.wasm",
                        "avro.wasm",
                        "protobuf.wasm",
                        "json-schema.wasm",
                    ] {
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
    fn named_sinks_and_routes_load_and_their_mistakes_are_named() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let load = |rest: &str| {
            let path = dir.path().join("s.toml");
            let text = format!(
                "[pipeline]\nname = \"s\"\nstate_dir = \"s\"\n[source]\ntype = \"file\"\npaths = [\"x\"]\n{rest}\n"
            );
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
            Config::load(&path)
        };
        let two = "[[sinks]]\nname = \"index\"\ntype = \"file\"\npath = \"i.ndjson\"\n\
                   [[sinks]]\nname = \"archive\"\ntype = \"file\"\npath = \"a.ndjson\"\n[sinks.breaker]\nfailures = 3\n";
        let cfg = load(&format!("{two}[[routes]]\nfield = \"/level\"\nequals = \"debug\"\nsinks = [\"archive\"]"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cfg.sinks.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["index", "archive"]);
        assert_eq!(cfg.sinks[1].sink.guard().breaker.failures, 3, "each sink has its own breaker");
        assert_eq!(cfg.routes.len(), 1);
        // A single [sink] is a sink named `default`.
        let one = load("[sink]\ntype = \"stdout\"").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(one.sinks.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["default"]);
        let e = error_of(load(&format!("{two}[[routes]]\nfield = \"/level\"\nequals = \"x\"\nsinks = [\"nowhere\"]")));
        assert!(e.contains("routes[0].sinks") && e.contains("nowhere") && e.contains("index, archive"), "{e}");
        let e = error_of(load(&format!("{two}[[routes]]\nfield = \"level\"\nequals = \"x\"\nsinks = [\"index\"]")));
        assert!(e.contains("routes[0].field") && e.contains("/level"), "{e}");
        let e = error_of(load(&format!(
            "{two}[[routes]]\nfield = \"/a\"\nequals = \"x\"\nexists = true\nsinks = [\"index\"]"
        )));
        assert!(e.contains("one condition per rule"), "{e}");
        let e = error_of(load(&format!("{two}[sink]\ntype = \"stdout\"")));
        assert!(e.contains("not both"), "{e}");
        let e =
            error_of(load("[[sinks]]\nname = \"a\"\ntype = \"stdout\"\n[[sinks]]\nname = \"a\"\ntype = \"stdout\""));
        assert!(e.contains("sinks[1].name") && e.contains("two sinks"), "{e}");
        let e = error_of(load("[[sinks]]\nname = \"a b\"\ntype = \"stdout\""));
        assert!(e.contains("sinks[0].name"), "{e}");
        let e = error_of(load("[[sinks]]\nname = \"a\"\ntype = \"file\"\npath = \"o\"\nretries = 2"));
        assert!(e.contains("retries"), "an unknown key of a named sink is refused: {e}");
        let e = error_of(load(""));
        assert!(e.contains("[sink]"), "{e}");
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
        let kafka = "type = \"kafka\"\nbrokers = \"b:9092\"\ntopic = \"t\"\n[sink.encoding]\nformat = \"avro\"\n";
        let e = load(&format!("{kafka}schema = '\"long\"'"));
        assert!(e.contains("sink.encoding") && e.contains("[schema_registry]"), "{e}");
        let e = load(&format!("{kafka}schema = '{{\"type\": \"nope\"}}'"));
        assert!(e.contains("sink.encoding.schema"), "a schema that does not parse stops the start: {e}");
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
        assert_eq!(cfg.first_sink().response().map(|r| r.name().to_string()), Some("datadog".into()));
        let table = "[sink.response]\ndescription = \"mine\"\n[[sink.response.status]]\ncodes = [\"2xx\"]\nfate = \"read\"\n\
                     [sink.response.items]\narray = \"/results\"\nstatus = \"/code\"\nid = \"/id\"\n\
                     [[sink.response.items.rules]]\ncodes = [422]\nreason_matches = \"(?i)too old\"\nfate = \"reject\"\n";
        let cfg = load(table).unwrap_or_else(|e| panic!("{e}"));
        let p = cfg.first_sink().response().and_then(|r| r.profile().ok()).unwrap_or_else(|| panic!("a profile"));
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

    /// A plugin's table from a file of its own, relative to the config;
    /// refused, by key, when the file cannot be read, is not one table, or
    /// comes with a `config` table too.
    #[test]
    fn a_plugin_config_can_live_in_its_own_file() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("p.wasm"), b"\0asm").unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(dir.path().join("plugins")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("plugins/json.toml"), "id_field = \"id\"\n[nested]\nx = 1\n")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("plugins/list.json"), "[1, 2]").unwrap_or_else(|e| panic!("{e}"));
        let load = |plugin: &str| {
            let path = dir.path().join("c.toml");
            let text = format!(
                "[pipeline]\nname = \"p\"\nstate_dir = \"s\"\n[source]\ntype = \"file\"\npaths = [\"a\"]\n\
                 [sink]\ntype = \"stdout\"\n[[plugins]]\nname = \"j\"\npath = \"p.wasm\"\n{plugin}\n"
            );
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
            Config::load(&path)
        };
        let cfg = load("config_file = \"plugins/json.toml\"").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cfg.plugins[0].config, serde_json::json!({"id_field": "id", "nested": {"x": 1}}));
        let e = error_of(load("config_file = \"plugins/missing.toml\""));
        assert!(e.contains("plugins[0].config_file") && e.contains("missing.toml"), "{e}");
        let e = error_of(load("config_file = \"plugins/list.json\""));
        assert!(e.contains("plugins[0].config_file") && e.contains("must hold one table"), "{e}");
        let e = error_of(load("config_file = \"plugins/json.toml\"\nconfig = { id_field = \"x\" }"));
        assert!(e.contains("plugins[0].config_file") && e.contains("not both"), "{e}");
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
        assert_eq!(k.connection.properties.get("session.timeout.ms").map(|v| v.to_string()), Some("6000".into()));
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
        assert_eq!(cfg.changelog_topic().as_deref(), Some("g-dedup-changelog"), "on by default");
        let cfg = kafka_config(
            "[dedup]\nscope = \"topic\"\non_missing_state = \"accept-duplicates\"\nchangelog.topic = \"ids\"",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cfg.dedup.scope, DedupScope::Topic);
        assert_eq!(cfg.dedup.on_missing_state, OnMissingState::AcceptDuplicates);
        assert_eq!(cfg.changelog_topic().as_deref(), Some("ids"));
        let cfg = kafka_config("[dedup]\nchangelog.enabled = false").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cfg.changelog_topic(), None);
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
