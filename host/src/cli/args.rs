//! The command line's grammar (clap): every subcommand and its arguments.
//! The subcommands' files read their arguments from here; `mod.rs`
//! parses and dispatches.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use super::summary::SummaryForm;

#[derive(Subcommand, Debug)]
pub(crate) enum StoreCommand {
    /// Rebuild a store that `run` refused as damaged: keep every record
    /// RocksDB can still read, and say where each file will be read from.
    /// What could not be read is read again and delivered again.
    Repair(ConfigArgs),
}

/// `sluice --version`: the version and the features this binary has, so a
/// report says whether it can run a Kafka or HTTP config at all.
fn version() -> &'static str {
    static VERSION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    VERSION.get_or_init(|| {
        let built = crate::features::built();
        let features = if built.is_empty() { "none: the embedded default".to_string() } else { built.join(", ") };
        format!("{} (features: {features})", env!("CARGO_PKG_VERSION"))
    })
}

#[derive(Parser, Debug)]
#[command(name = "sluice", version = version(), about = "A stream processor that never loses a record it was handed.")]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Run the pipeline of a config file, or several pipelines in one
    /// process (`-c a.toml -c b.toml`, or a file listing them), each with
    /// its own group id, store and commits, sharing one metrics and API
    /// listener. SIGHUP reloads each.
    Run(PipelineArgs),
    /// Validate a config, load its plugins, print the resolved pipeline.
    /// Every problem is listed, not the first. Exit 2: the config (or a
    /// plugin, a path) is invalid; exit 3: with --connect, a broker or the
    /// sink cannot be reached.
    Check(CheckArgs),
    /// Run a config's unit tests: sample records through its plugins and
    /// dedup, each with the events or the quarantine it must come to; a
    /// verdict per case, exit 1 when any fails (docs/src/testing-configs.md).
    Test(ConfigTestArgs),
    /// List and inspect quarantined records.
    #[command(subcommand)]
    Quarantine(QuarantineCommand),
    /// What became of event ids, from the state store: delivered (when, to
    /// which sink, from which position, through which plugin versions), a
    /// duplicate absorbed, quarantined, or unknown inside the window.
    /// `--summary` counts the doors instead. Read-only: a running pipeline
    /// keeps running.
    Audit(AuditArgs),
    /// Run records through the chain in force and a candidate (another
    /// build of a plugin, or another config for it) side by side, and
    /// report where their verdicts differ. Delivers, records and commits
    /// nothing.
    Shadow(ShadowArgs),
    /// Kafka: per partition, the group's committed offset, the high
    /// watermark and the lag.
    Lag(LagArgs),
    /// A live view of a running pipeline, read from its metrics endpoint
    /// each second: per partition the rates in and out, lag, batches in
    /// flight, back-pressure and stalls; the breakers. `q` quits.
    Top(super::top::TopArgs),
    /// Print a sample of the events passing one point of a running
    /// pipeline (after a plugin, before the sink, into the quarantine) as
    /// NDJSON, rate-limited and masked, from its metrics listener. The
    /// pipeline is not slowed: a reader that falls behind loses samples
    /// and is told how many.
    Tap(super::tap::TapArgs),
    /// Kafka: reset the group's committed offsets so the next run re-reads
    /// from a time, an offset, or the beginning. Refused while the group
    /// has live members. Inside dedup.window nothing is delivered twice.
    Replay(ReplayArgs),
    /// The state store itself: `repair` rebuilds what can still be read of
    /// a damaged one (docs/src/failure-modes.md).
    #[command(subcommand)]
    Store(StoreCommand),
    /// Develop and examine plugins.
    #[command(subcommand)]
    Plugin(PluginCommand),
    /// Examine how a sink reads its backend's answers.
    #[command(subcommand)]
    Sink(SinkCommand),
    /// The config file's format, generated from the config types.
    #[command(subcommand)]
    Config(ConfigCommand),
}

#[derive(Subcommand, Debug)]
pub(crate) enum ConfigCommand {
    /// Print the config's JSON Schema, for editors: taplo and VS Code's
    /// Even Better TOML validate and complete `sluice.toml` with it
    /// (`#:schema ./sluice.schema.json` at the top of the file).
    Schema,
    /// Print the config reference (Markdown): every key with its type,
    /// default and meaning, as docs/src/reference.md holds it.
    Reference,
    /// Print the command-line reference (Markdown): every command and
    /// argument, as docs/src/cli.md holds it.
    CliReference,
}

#[derive(Subcommand, Debug)]
pub(crate) enum SinkCommand {
    /// Read recorded backend answers (`conformance/responses/` cases) with
    /// a response profile and print the fate of each record; with the
    /// case's expectation, a verdict per case, exit 1 when any differs.
    Classify(super::sink::ClassifyArgs),
}

#[derive(Args, Debug)]
pub(crate) struct ConfigArgs {
    /// The pipeline config (TOML); every key can be overridden by an
    /// environment variable SLUICE__SECTION__KEY. Or a file listing
    /// several (`pipelines = […]`, as `run` takes), with --pipeline.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: PathBuf,
    /// Which pipeline of the list file -c names (its `pipeline.name`);
    /// with a pipeline's own config, its name.
    #[arg(long, value_name = "NAME")]
    pub pipeline: Option<String>,
}

impl ConfigArgs {
    /// One pipeline's config file in place of a list file and
    /// `--pipeline`, so that every command after this reads one config.
    pub(super) fn resolve(&mut self) -> anyhow::Result<()> {
        self.config = super::several::one(&self.config, self.pipeline.as_deref())?;
        Ok(())
    }

    /// The args of one config file, as `run` and a reload read it.
    pub(crate) fn of(config: PathBuf) -> Self {
        Self { config, pipeline: None }
    }
}

impl Command {
    /// The config a command works on, when it takes one pipeline's
    /// (`check` takes a list file whole unless --pipeline names one).
    pub(super) fn one_config(&mut self) -> Option<&mut ConfigArgs> {
        match self {
            Command::Check(args) if args.config.pipeline.is_some() => Some(&mut args.config),
            Command::Test(args) => Some(&mut args.config),
            Command::Audit(args) => Some(&mut args.config),
            Command::Shadow(args) => Some(&mut args.config),
            Command::Lag(args) => Some(&mut args.config),
            Command::Replay(args) => Some(&mut args.config),
            Command::Store(StoreCommand::Repair(args)) => Some(args),
            Command::Quarantine(
                QuarantineCommand::List(QueryArgs { config, .. })
                | QuarantineCommand::Stats(QueryArgs { config, .. })
                | QuarantineCommand::Export { config, .. }
                | QuarantineCommand::Show { config, .. }
                | QuarantineCommand::Replay { config, .. },
            ) => Some(config),
            _ => None,
        }
    }
}

#[derive(Args, Debug)]
pub(crate) struct ConfigTestArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// A folder of `*.json` cases, run in name order.
    #[arg(long, value_name = "DIR")]
    pub cases: PathBuf,
}

#[derive(Args, Debug)]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Also reach the brokers and the sink once (no record is written):
    /// the address answers and the credentials are accepted.
    #[arg(long)]
    pub connect: bool,
}

#[derive(Args, Debug)]
pub(crate) struct PipelineArgs {
    /// The pipeline config (TOML); every key can be overridden by an
    /// environment variable SLUICE__SECTION__KEY (in every config given).
    /// Repeat it to run several pipelines in this process; a file whose
    /// only key is `pipelines = ["a.toml", "b.toml"]` lists them (paths
    /// relative to it).
    #[arg(long = "config", short = 'c', value_name = "FILE", required = true)]
    pub configs: Vec<PathBuf>,
    /// Reload when the config file changes (checked every second), as on
    /// SIGHUP.
    #[arg(long)]
    pub watch_config: bool,
    /// What is printed on standard error when the run ends: a table per
    /// partition with the top quarantine reasons, the JSON line scripts
    /// read (`{"summary": …}`), or nothing.
    #[arg(long, value_enum, default_value_t = SummaryForm::Table, value_name = "FORM")]
    pub summary: SummaryForm,
}

#[derive(Args, Debug)]
pub(crate) struct AuditArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// The event ids to look up.
    #[arg(value_name = "EVENT_ID")]
    pub ids: Vec<String>,
    /// Also every id in this file, one per line (a reconciliation).
    #[arg(long, value_name = "FILE")]
    pub from_file: Option<PathBuf>,
    /// One JSON object per id (with `--summary`: one object).
    #[arg(long)]
    pub json: bool,
    /// Counts per door (delivered, duplicate, quarantined) instead of ids.
    #[arg(long, conflicts_with_all = ["ids", "from_file"])]
    pub summary: bool,
    /// With --summary: since an RFC 3339 time or a duration ago (`1h`);
    /// default: everything the store holds.
    #[arg(long, value_name = "WHEN", requires = "summary")]
    pub since: Option<String>,
}

#[derive(Args, Debug)]
pub(crate) struct ShadowArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Try this build of plugin NAME (repeatable).
    #[arg(long = "plugin", value_name = "NAME=FILE")]
    pub plugins: Vec<String>,
    /// Try plugin NAME with this config: a JSON or TOML file holding the
    /// table its `config` key would (repeatable).
    #[arg(long = "plugin-config", value_name = "NAME=FILE")]
    pub plugin_configs: Vec<String>,
    /// Where to read from: `earliest` (the default), an offset (a Kafka
    /// offset in each partition, a byte offset in each file), or an RFC
    /// 3339 time (Kafka).
    #[arg(long, value_name = "WHERE", value_parser = parse_reset)]
    pub from: Option<crate::source::kafka::config::ResetTo>,
    /// Compare at most this many records (default 100,000: they are held
    /// in memory).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Take the records from the quarantine (entries not yet replayed)
    /// instead of the source: which would a replay deliver?
    #[arg(long, conflicts_with = "from")]
    pub quarantine: bool,
    /// One JSON object per differing record, then the totals.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct LagArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct ReplayArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// `earliest`, an offset (`1200`), or an RFC 3339 time
    /// (`2026-11-29T10:00:00Z`: the first record at or after it).
    #[arg(long, value_name = "WHERE", value_parser = parse_reset)]
    pub from: crate::source::kafka::config::ResetTo,
    /// Only these partitions (default: all of the configured topics').
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    pub partitions: Vec<i32>,
    /// Skip the live-member check, for brokers that cannot describe groups:
    /// you vouch that no member of the group runs.
    #[arg(long)]
    pub force: bool,
}

fn parse_reset(s: &str) -> Result<crate::source::kafka::config::ResetTo, String> {
    s.parse()
}

/// Which quarantine entries a command looks at.
#[derive(Args, Debug, Default)]
pub(crate) struct EntryFilter {
    /// Only entries of this stage: source, plugin or sink.
    #[arg(long)]
    pub stage: Option<String>,
    /// Only entries this plugin rejected (by name).
    #[arg(long)]
    pub plugin: Option<String>,
    /// Only entries whose reason contains this.
    #[arg(long)]
    pub reason: Option<String>,
    /// Only entries written at or after: an RFC 3339 time, or a duration
    /// ago (`1h`).
    #[arg(long, value_name = "WHEN")]
    pub since: Option<String>,
    /// Only entries written before: an RFC 3339 time, or a duration ago.
    #[arg(long, value_name = "WHEN")]
    pub until: Option<String>,
    /// Only entries replayed (`true`) or not yet (`false`).
    #[arg(long, value_name = "BOOL")]
    pub replayed: Option<bool>,
}

/// A query of the quarantine: which store, which entries, what form.
#[derive(Args, Debug)]
pub(crate) struct QueryArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    #[command(flatten)]
    pub filter: EntryFilter,
    /// JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub(crate) enum QuarantineCommand {
    /// One line per entry: id, time, stage, plugin, reason; `--json`: each
    /// entry whole, one per line (position, original payload, versions).
    List(QueryArgs),
    /// Counts per stage, plugin and reason.
    Stats(QueryArgs),
    /// Every entry (or those the filters keep) to an NDJSON file, whole,
    /// in one pass over the store; masked fields stay masked.
    Export {
        #[command(flatten)]
        config: ConfigArgs,
        #[command(flatten)]
        filter: EntryFilter,
        /// The file to write (replaced if it exists).
        #[arg(long, value_name = "FILE")]
        to: PathBuf,
    },
    /// One entry in full (original bytes, position, versions).
    Show {
        #[command(flatten)]
        config: ConfigArgs,
        /// The entry id, from `list`.
        id: String,
    },
    /// Run entries through the current pipeline (plugins, dedup, sink).
    /// Those that now pass are marked replayed; the dedup window keeps a
    /// replay from delivering anything twice. The pipeline must not be
    /// running (the state store is locked while it does).
    Replay {
        #[command(flatten)]
        config: ConfigArgs,
        /// Only these entries (default: every entry not yet replayed).
        #[arg(long = "id", value_name = "ID")]
        ids: Vec<String>,
        /// Also replay masked entries (their masked fields are delivered as `***`).
        #[arg(long)]
        include_masked: bool,
        /// What is printed on standard error when the replay ends: a
        /// table, the JSON line (`{"replay": …}`), or nothing.
        #[arg(long, value_enum, default_value_t = SummaryForm::Table, value_name = "FORM")]
        summary: SummaryForm,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum PluginCommand {
    /// Run a chain of plugins over lines from a file or stdin and print one
    /// JSON outcome per input line: the plugin author's loop.
    ///
    /// Each `--config` applies to the `--plugin` before it:
    /// `--plugin pattern.wasm --config hdfs.toml --plugin ts-window.wasm --config window.toml`
    Run(RunArgs),
    /// Show a plugin's name, digest, WIT version, size and imports.
    Inspect(InspectArgs),
    /// Run the conformance cases of a folder (`conformance/cases/`, or a
    /// plugin's own `cases/`) against a plugin: a verdict per case; exit 1
    /// when any case fails.
    Test(TestArgs),
    /// Create a plugin project that builds and passes its own cases.
    New(NewArgs),
    /// The compiled-plugin cache: what it holds, or prune it.
    ///
    /// Every command compiles a plugin once per digest and keeps the result
    /// here (the 64 most recently used, 1 GiB at most); `prune` removes all
    /// but the `--keep` most recently used now.
    Cache(CacheArgs),
    /// Answer the host's helpers (time formats, patterns, logfmt, JSON
    /// paths) one JSON request per line on stdin: what the Python and
    /// JavaScript SDKs call when a plugin's unit tests run outside the
    /// component (the protocol is in `host/src/cli/helpers.rs`).
    Helpers,
}

#[derive(Args, Debug)]
pub(crate) struct CacheArgs {
    /// `show` (the default) or `prune`.
    #[arg(value_enum, default_value = "show")]
    pub action: CacheAction,
    /// With `prune`: how many of the most recently used to keep.
    #[arg(long, default_value_t = 0)]
    pub keep: usize,
    /// The cache directory (default: $SLUICE_PLUGIN_CACHE, else the user
    /// cache directory).
    #[arg(long, env = "SLUICE_PLUGIN_CACHE", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CacheAction {
    Show,
    Prune,
}

#[derive(Args, Debug)]
pub(crate) struct TestArgs {
    /// The plugin component (.wasm).
    pub path: PathBuf,
    /// A folder of `*.json` cases (format: conformance/README.md).
    #[arg(long, value_name = "DIR")]
    pub cases: PathBuf,
    /// Memory limit per plugin instance, MiB.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub memory_mib: u32,
    /// Time limit per batch call, e.g. 5s, 500ms.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub time_limit: std::time::Duration,
    /// Directory for compiled plugins (default: the user cache directory).
    #[arg(long, env = "SLUICE_PLUGIN_CACHE", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub(crate) struct NewArgs {
    /// The plugin's language.
    #[arg(long, value_enum)]
    pub lang: Lang,
    /// What it is: a parse plugin (records into events, `[[plugins]]`) or
    /// a classifier (an HTTP backend's answers, `[sink.classifier]`).
    #[arg(long, value_enum, default_value = "plugin")]
    pub kind: Kind,
    /// The plugin's name (letters, digits, `-`): also the project folder.
    pub name: String,
    /// Where to create the project folder (default: the current one).
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Plugin,
    Classifier,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lang {
    Rust,
    Python,
    Js,
    C,
}

#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    /// A plugin component (.wasm); repeat for a chain, in order.
    #[arg(long = "plugin", short = 'p', required = true, value_name = "PATH")]
    pub plugins: Vec<PathBuf>,
    /// A file holding the config table of the `--plugin` before it: TOML,
    /// or JSON when named `*.json`.
    #[arg(long = "config", short = 'c', value_name = "FILE")]
    pub configs: Vec<PathBuf>,
    /// Read lines from this file instead of stdin.
    #[arg(long, short = 'i', value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// Records per call into the plugin.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub batch_size: u32,
    /// Memory limit per plugin instance, MiB.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub memory_mib: u32,
    /// Time limit per batch call, e.g. 5s, 500ms.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub time_limit: std::time::Duration,
    /// Print only the summary, not one line per record.
    #[arg(long)]
    pub quiet: bool,
    /// Directory for compiled plugins (default: the user cache directory).
    #[arg(long, env = "SLUICE_PLUGIN_CACHE", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub(crate) struct InspectArgs {
    /// The plugin component (.wasm).
    pub path: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also list the timestamp formats and items, and the pattern
    /// shortcuts, that plugins built with the SDK accept.
    #[arg(long)]
    pub formats: bool,
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    sluice_guest::duration::parse(s)
}
