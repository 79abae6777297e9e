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

use super::driver::{Settings, Shared};
use super::{PipelineError, RunStats, with_committer};
use crate::config::Config;
use crate::sink::named::Sinks;
use crate::source::config::SourceConfig;
#[cfg(feature = "kafka")]
use crate::source::kafka::admin;
use crate::source::kafka::config::KafkaSourceConfig;
use crate::store::Store;
use crate::store::dedup::DedupWindow;
use crate::store::dedup::config::DEFAULT_WINDOW;
use crate::telemetry::Health;
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
    let Parts { settings, store, dedup, sinks, stats } = parts;
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
