//! The Kafka source's side of `sluice run`: one or two consumer group
//! members per process.
//!
//! - `member`: a group member (its consume loop, commits, supervisor of
//!   partition tasks; the custody rule for Kafka is stated there);
//! - `task`: one assigned partition on the driver;
//! - `rebalance`: the group's callbacks, assignment and revocation;
//! - `changelog`: the dedup window's changelog topic, its restore, its
//!   follower and the partitions' transactions;
//! - `repartition`, `by_id_value`: `dedup.repartition`'s two halves and
//!   the value of the topic between them;
//! - `quarantine_topic`, `idle_member`, `events`: the quarantine topic, a
//!   member with nothing assigned, what the run tells the operator.

pub(crate) mod by_id_value;
pub mod changelog;
pub(crate) mod events;
pub(crate) mod idle_member;
mod member;
pub(crate) mod quarantine_topic;
mod rebalance;
pub(crate) mod repartition;
mod task;

use std::sync::Mutex;
use std::time::Instant;

use super::error::PipelineError;
use super::setup::{finish, open_sinks, open_store, open_window, serve_endpoint};
use super::stop::Stop;
use crate::config::Config;
use crate::plugin::engine::Runtime;
use crate::source::kafka::config::KafkaSourceConfig;
use crate::telemetry::stats::RunStats;
use member::{Common, Serving, serve};

/// Run as a member of the group until `stop` (two members with
/// `dedup.repartition`: `repartition`).
pub(super) fn run(
    cfg: &Config,
    source: &KafkaSourceConfig,
    runtime: &Runtime,
    stop: &Stop,
) -> Result<RunStats, PipelineError> {
    let health = serve_endpoint(cfg)?;
    let store = open_store(cfg)?;
    let dedup = open_window(cfg, &store)?;
    let stats = Mutex::new(RunStats::default());
    let started = Instant::now();
    let common = Common { runtime, stop, store: &store, dedup: &dedup, health: &health, stats: &stats };
    if cfg.dedup.repartition {
        repartition::run(&common, cfg, source)?;
    } else {
        let sinks = open_sinks(cfg, runtime)?;
        let ready = |ready| health.set_ready(ready);
        let serving =
            Serving { cfg, source, sinks: &sinks, ready: &ready, watched: Some(&health), reads_events: false };
        serve(&common, &serving)?;
    }
    Ok(finish(stats, started))
}
