//! `sluice run`: sources → plugins → dedup → sink, for every source through
//! one partition driver.
//!
//! - `driver`: the custody order for one partition, pipelined (the
//!   decisions themselves are `crate::custody`, with no I/O);
//! - `durable`: group commit of the partitions' writes;
//! - `files`, `kafka`, `replay`: the sources, each a `driver::Reader` and
//!   a `driver::Keeper`, and the run around them (threads, the consumer
//!   group, a replay's summary);
//! - `setup`: what every run opens around its partitions (the endpoint,
//!   the store, the dedup window, the watchdog, the group committer);
//! - `shadow`: the chain in force beside a candidate, compared;
//! - `cases`, `case_sink`: `sluice test`'s cases through the same driver.

pub mod case_sink;
pub mod cases;
pub mod driver;
#[cfg(test)]
mod driver_tests;
pub mod durable;
pub mod events;
mod files;
#[cfg(feature = "kafka")]
pub mod kafka;
#[cfg(not(feature = "kafka"))]
#[path = "kafka_absent.rs"]
pub mod kafka;
pub mod replay;
mod setup;
pub mod shadow;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::telemetry::stats::RunStats;

use crate::config::Config;
use crate::plugin::chain::Chain;
use crate::plugin::engine::Runtime;
use crate::sink::context::SinkContext;
use crate::sink::named::Sinks;
use crate::source::config::SourceConfig;
use crate::store::{Identity, Store};
use crate::telemetry::Health;

use crate::custody::plan::Fate;

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Plugin(#[from] crate::plugin::error::PluginError),
    /// A plugin of the config that cannot start, named by its key.
    #[error("{key} ({name}): {error}{hint}")]
    PluginAt { key: String, name: String, hint: String, error: Box<crate::plugin::error::PluginError> },
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Source(#[from] crate::source::file::SourceError),
    #[error(transparent)]
    Sink(#[from] crate::sink::SinkError),
    #[error("offset tracking: {0}")]
    Offsets(#[from] crate::custody::offsets::OffsetError),
    #[error("metrics endpoint: {0}")]
    Metrics(String),
    #[error("{0}")]
    Config(String),
    #[error("source paths {0:?} match no file")]
    NoFiles(Vec<String>),
    #[error(transparent)]
    Kafka(Box<crate::source::kafka::KafkaSourceError>),
    #[cfg(feature = "kafka")]
    #[error(transparent)]
    Changelog(Box<kafka::changelog::ChangelogError>),
    /// A source this binary was built without (`crate::features`).
    #[error(transparent)]
    NotBuilt(#[from] crate::features::NotBuilt),
    /// A pinned plugin whose file is another.
    #[error(
        "{key} ({name}): {path} has digest {found}, but {key}.digest pins {pinned}: the file is not the plugin this \
         config was written for. Put the pinned build back, or pin the new one (`sluice plugin inspect` prints the line)"
    )]
    DigestMismatch { key: String, name: String, path: String, pinned: String, found: String },
    #[error("the task of partition {0} panicked (see the log); its unfinished records are read again next time")]
    Panicked(String),
}

impl From<crate::source::kafka::KafkaSourceError> for PipelineError {
    fn from(e: crate::source::kafka::KafkaSourceError) -> Self {
        PipelineError::Kafka(Box::new(e))
    }
}

/// Raises a flag when dropped without being disarmed: a partition that
/// fails or panics must not leave the others running (in follow mode they
/// would never end), nor a driver's front taking batches its back will
/// never take.
pub(crate) struct RaiseOnDrop<'a> {
    pub flag: &'a AtomicBool,
    pub armed: bool,
}

impl Drop for RaiseOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.flag.store(true, Ordering::SeqCst);
        }
    }
}

/// Tells the pipeline to stop reading; in-flight batches finish.
#[derive(Clone, Default)]
pub struct Stop(Arc<AtomicBool>);

impl Stop {
    pub fn request(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    pub fn requested(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// How long an idle worker waits for its Kafka partitions before it asks
/// them again: the bound on noticing a revoke while idle (records that
/// come wake it at once, `kafka::task::KafkaReader::wake_with`).
const KAFKA_IDLE_POLL: Duration = Duration::from_millis(50);

/// The identity a state store is created for.
pub fn identity(cfg: &Config) -> Identity {
    let sources = match &cfg.source {
        SourceConfig::File(f) => f.paths.clone(),
        SourceConfig::Kafka(k) => k.topics.iter().map(|t| format!("kafka:{}/{t}", k.group_id)).collect(),
    };
    Identity { pipeline: cfg.pipeline.name.clone(), sources }
}

/// The run's state store, keeping `pipeline.state_reserve` free.
/// What the driver reads of `cfg` (`driver::Settings`).
pub fn driver_settings(cfg: &Config) -> driver::Settings {
    driver::Settings {
        pipeline: cfg.pipeline.name.clone(),
        batch_size: cfg.pipeline.batch_size,
        in_flight: cfg.pipeline.in_flight,
        workers: cfg.pipeline.workers(),
        idle_poll: match &cfg.source {
            SourceConfig::File(f) => f.poll_interval,
            SourceConfig::Kafka(_) => KAFKA_IDLE_POLL,
        },
        linger: match &cfg.source {
            SourceConfig::File(_) => Duration::ZERO,
            SourceConfig::Kafka(k) => k.linger,
        },
        mask_fields: cfg.quarantine.mask_fields.clone(),
        mask_patterns: cfg.quarantine.mask_patterns.clone(),
        audit: cfg.dedup.audit,
        source_kind: if cfg.source.is_kafka() { "kafka" } else { "file" },
    }
}

pub(crate) fn open_store(cfg: &Config) -> Result<Store, PipelineError> {
    let store = Store::open(&cfg.pipeline.state_dir, &identity(cfg))?;
    store.keep_free(cfg.pipeline.state_reserve);
    Ok(store)
}

pub(crate) fn now_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Load every plugin and instantiate one chain; used by `check` and `run`.
/// A plugin that cannot start is named by its key in the config, with what
/// to change when the cause is one the operator controls.
pub fn build_chain(runtime: &Runtime, cfg: &Config) -> Result<Chain, PipelineError> {
    let stages = (0..cfg.plugins.len()).map(|i| build_stage(runtime, cfg, i, None)).collect::<Result<Vec<_>, _>>()?;
    Ok(Chain::new(stages))
}

/// `plugins[i]`, loaded, pinned and initialised; on its own so `check` can
/// name every plugin that fails, not the first. `fixed_now` pins the
/// plugin's clock (`sluice test`); a pipeline passes `None`.
pub fn build_stage(
    runtime: &Runtime,
    cfg: &Config,
    i: usize,
    fixed_now: Option<i64>,
) -> Result<crate::plugin::isolate::Isolated, PipelineError> {
    use crate::plugin::error::{Fault, PluginError};
    use crate::plugin::isolate::Isolated;
    use crate::plugin::pin::{self, Pin, Refused};
    let Some(p) = cfg.plugins.get(i) else {
        return Err(PipelineError::Config(format!("plugins[{i}]: no such plugin")));
    };
    let pin = p
        .digest
        .as_deref()
        .map(str::parse::<Pin>)
        .transpose()
        .map_err(|e| PipelineError::Config(format!("plugins[{i}].digest: {e}")))?;
    let mut spec = p.spec();
    spec.limits.fixed_now = fixed_now;
    let load = || runtime.load(&spec).and_then(Isolated::new);
    pin::verify(pin.as_ref(), &p.path, load, |stage| stage.id().digest).map_err(|refused| match refused {
        Refused::Mismatch { pinned, found } => PipelineError::DigestMismatch {
            key: format!("plugins[{i}]"),
            name: p.name.clone(),
            path: p.path.display().to_string(),
            pinned: pinned.to_string(),
            found: found.to_string(),
        },
        Refused::Load(source) => {
            let hint = match &source {
                PluginError::Config { .. } => format!("; its config is the plugins[{i}].config table"),
                PluginError::Init { fault: Fault::OutOfMemory { .. }, .. } => format!(
                    "; it ran out of memory while setting up: raise plugins[{i}].memory (now {} MiB; a compiled \
                     pattern takes about 0.3 MiB, so hundreds of patterns need more than the default)",
                    p.memory >> 20
                ),
                _ => String::new(),
            };
            PipelineError::PluginAt {
                key: format!("plugins[{i}]"),
                name: p.name.clone(),
                hint,
                error: Box::new(source),
            }
        }
    })
}

/// The configured sinks, each driven through its retries and breaker, and
/// the routes over them.
pub fn open_sinks(cfg: &Config, runtime: &Runtime) -> Result<Sinks, PipelineError> {
    Ok(Sinks::build(&cfg.sinks, &cfg.routes, SinkContext { plugins: runtime })?)
}

/// The sinks' names and the routes over them, as `check` draws them.
pub fn fanout(cfg: &Config) -> Result<crate::route::Fanout, PipelineError> {
    let names: Vec<String> = cfg.sinks.iter().map(|s| s.name.clone()).collect();
    crate::route::Fanout::new(&names, &cfg.routes).map_err(PipelineError::Config)
}

/// Run the pipeline of `cfg` until its source ends (files without
/// `follow`) or `stop` is requested.
pub fn run(cfg: &Config, runtime: &Runtime, stop: &Stop) -> Result<RunStats, PipelineError> {
    match &cfg.source {
        SourceConfig::File(source) => files::run(cfg, source, runtime, stop),
        #[cfg(feature = "kafka")]
        SourceConfig::Kafka(source) => kafka::run(cfg, source, runtime, stop),
        #[cfg(not(feature = "kafka"))]
        SourceConfig::Kafka(_) => Err(crate::features::Feature::Kafka
            .missing("source type \"kafka\"")
            .map_or_else(|| PipelineError::Config("kafka".into()), PipelineError::NotBuilt)),
    }
}

/// Run `f` with a group committer for `store` (a thread of its own, ended
/// when `f` returns and every write handed over is answered), and the
/// store's upkeep beside it.
pub(crate) fn with_committer<R>(store: &Store, health: Option<&Health>, f: impl FnOnce(&durable::Committer) -> R) -> R {
    let (committer, rx) = durable::Committer::new();
    std::thread::scope(|s| {
        // Named, as every long-lived thread of a run is: `top -H` and the
        // partitions bench say which is which.
        let named = |name: &str| std::thread::Builder::new().name(name.into());
        if let Err(e) = named("sluice-committer")
            .spawn_scoped(s, crate::telemetry::labels::inherit(|| committer.run(store, rx, health)))
        {
            tracing::error!("cannot start the committer: {e}");
        }
        if let Err(e) =
            named("sluice-upkeep").spawn_scoped(s, crate::telemetry::labels::inherit(|| committer.upkeep(store)))
        {
            tracing::error!("cannot start the store's upkeep: {e}");
        }
        let result = f(&committer);
        committer.close();
        result
    })
}
