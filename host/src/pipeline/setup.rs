//! What every run opens around its partitions, written once: the files,
//! a Kafka member and a replay differ in how they read and what their
//! write carries (`driver::Reader`, `driver::Keeper`), not in how the
//! endpoint, the store, the dedup window, the watchdog and the group
//! committer are set up. A change to that order (the store before the
//! window, the window expired before the first look-up, the watchdog
//! around the committer so it sees every partition until the last write
//! is answered) is made here for every source.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::driver::{self, Settings, Shared};
use super::durable;
use super::error::PipelineError;
use crate::config::Config;
use crate::plugin::chain::Chain;
use crate::plugin::engine::Runtime;
use crate::schema_registry::cache::Schemas;
use crate::schema_registry::resolver::Resolver;
use crate::sink::context::SinkContext;
use crate::sink::named::Sinks;
use crate::source::config::SourceConfig;
#[cfg(feature = "kafka")]
use crate::source::kafka::admin;
use crate::source::kafka::config::KafkaSourceConfig;
use crate::store::Identity;
use crate::store::Store;
use crate::store::dedup::DedupWindow;
use crate::store::dedup::config::DEFAULT_WINDOW;
use crate::telemetry::Health;
use crate::telemetry::stats::RunStats;
use crate::units;
use crate::watchdog::with_watchdog;

/// The health `/ready` and `/health` answer from, served on
/// `metrics.listen` when set, with the internal events' recorder
/// installed: before the store opens, so that a slow open is visible.
pub(crate) fn serve_endpoint(cfg: &Config) -> Result<Arc<Health>, PipelineError> {
    let health = Arc::new(Health::default());
    if let Some(addr) = cfg.metrics.listen {
        let access = crate::telemetry::api::Access::from_config(&cfg.api);
        let bound = crate::telemetry::server::serve(addr, health.clone(), access)
            .map_err(|e| PipelineError::Metrics(e.to_string()))?;
        tracing::info!("metrics on http://{bound}/metrics");
    }
    crate::telemetry::install();
    Ok(health)
}

/// How long delivered ids are kept: `dedup.window`, else for Kafka the
/// topics' retention (a record can be replayed for as long as Kafka keeps
/// it), else 7 days.
pub(crate) fn window_of(cfg: &Config) -> Duration {
    match &cfg.source {
        SourceConfig::File(_) => cfg.dedup.window.unwrap_or(DEFAULT_WINDOW),
        SourceConfig::Kafka(k) => kafka_window(cfg, k),
    }
}

/// The dedup window: the configured one, else the topics' retention (a
/// record can be replayed for as long as Kafka keeps it), else 7 days.
fn kafka_window(cfg: &Config, source: &KafkaSourceConfig) -> Duration {
    if let Some(w) = cfg.dedup.window {
        return w;
    }
    #[cfg(not(feature = "kafka"))]
    let retention: Result<Option<Duration>, crate::features::NotBuilt> =
        crate::features::Feature::Kafka.missing(&format!("the retention of {:?}", source.topics)).map_or(Ok(None), Err);
    #[cfg(feature = "kafka")]
    let retention = admin::retention(source);
    match retention {
        Ok(Some(r)) => r,
        Ok(None) => {
            tracing::warn!(
                "the topics keep records forever (or do not say): dedup window {}; set dedup.window",
                units::display(DEFAULT_WINDOW)
            );
            DEFAULT_WINDOW
        }
        Err(e) => {
            tracing::warn!(
                "cannot read the topics' retention ({e}): dedup window {}; set dedup.window",
                units::display(DEFAULT_WINDOW)
            );
            DEFAULT_WINDOW
        }
    }
}

/// The run's dedup window over `store`, with what fell out of it
/// expired before the first look-up.
pub(crate) fn open_window<'a>(cfg: &Config, store: &'a Store) -> Result<DedupWindow<'a>, PipelineError> {
    let dedup = DedupWindow::new(store, window_of(cfg))?;
    dedup.expire(dedup.now_secs())?;
    Ok(dedup)
}

/// What every partition of a run shares before the watchdog and the
/// committer exist.
pub(crate) struct Parts<'a> {
    pub settings: &'a Settings,
    /// `open_registry`'s.
    pub registry: Option<Arc<Resolver>>,
    pub store: &'a Store,
    pub dedup: &'a DedupWindow<'a>,
    pub sinks: &'a Sinks,
    pub stats: &'a Mutex<RunStats>,
}

/// Run `f` with the partition watchdog watching `parts.sinks` and a group
/// committer for `parts.store`; both end when `f` returns and the last
/// write it handed over is answered. `f` gets what the partitions share
/// with no quarantine topic, changelog or claims: a source that has them
/// sets them (`Shared { changelog, ..shared }`).
pub(crate) fn with_services<R>(
    cfg: &Config,
    parts: Parts<'_>,
    watched: Option<&Health>,
    committed: Option<&Health>,
    f: impl FnOnce(Shared<'_>) -> R,
) -> R {
    let Parts { settings, registry, store, dedup, sinks, stats } = parts;
    with_watchdog(&cfg.watchdog, sinks, watched, |watchdog| {
        with_committer(store, committed, |committer| {
            f(Shared {
                settings,
                store,
                dedup,
                sinks,
                committer,
                quarantine_topic: None,
                changelog: None,
                claims: None,
                registry,
                stats,
                watchdog,
            })
        })
    })
}

/// A run's stats, timed from `started`.
pub(crate) fn finish(stats: Mutex<RunStats>, started: Instant) -> RunStats {
    let mut stats = stats.into_inner().unwrap_or_else(|p| p.into_inner());
    stats.seconds = started.elapsed().as_secs_f64();
    stats
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

/// What the driver reads of `cfg` (`driver::Settings`).
pub(crate) fn driver_settings(cfg: &Config) -> driver::Settings {
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

/// The run's state store, keeping `pipeline.state_reserve` free.
pub(crate) fn open_store(cfg: &Config) -> Result<Store, PipelineError> {
    let store = Store::open(&cfg.pipeline.state_dir, &identity(cfg))?;
    store.keep_free(cfg.pipeline.state_reserve);
    Ok(store)
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
pub(crate) fn build_stage(
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
    spec.schemas = cfg.schema_registry.as_ref().map(|_| Schemas::of_state(&cfg.pipeline.state_dir)).transpose()?;
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

/// The run's schema registry, when the config has one: the client that
/// fetches, over the schemas every plugin instance of the run reads.
pub(crate) fn open_registry(cfg: &Config) -> Result<Option<Arc<Resolver>>, PipelineError> {
    let Some(r) = &cfg.schema_registry else { return Ok(None) };
    let schemas = Schemas::of_state(&cfg.pipeline.state_dir)?;
    #[cfg(feature = "http")]
    {
        let client =
            crate::schema_registry::client::RegistryClient::new(r).map_err(|e| PipelineError::Config(e.to_string()))?;
        let mut resolver = Resolver::new(schemas, Box::new(client));
        resolver.retry_max = r.retry_max;
        Ok(Some(Arc::new(resolver)))
    }
    #[cfg(not(feature = "http"))]
    {
        let _ = (r, schemas);
        Err(crate::features::Feature::Http
            .missing("[schema_registry]")
            .map_or_else(|| PipelineError::Config("[schema_registry]: no HTTP client".into()), PipelineError::from))
    }
}

/// The configured sinks, each driven through its retries and breaker, and
/// the routes over them.
pub(crate) fn open_sinks(cfg: &Config, runtime: &Runtime) -> Result<Sinks, PipelineError> {
    Ok(Sinks::build(&cfg.sinks, &cfg.routes, SinkContext { plugins: runtime, registry: cfg.schema_registry.as_ref() })?)
}

/// The sinks' names and the routes over them, as `check` draws them.
pub(crate) fn fanout(cfg: &Config) -> Result<crate::route::Fanout, PipelineError> {
    let names: Vec<String> = cfg.sinks.iter().map(|s| s.name.clone()).collect();
    Ok(crate::route::Fanout::new(&names, &cfg.routes)?)
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
