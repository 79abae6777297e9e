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
//!   the store, the dedup window, the watchdog, the group committer), and
//!   the openers `check` shares (the chain, the sinks);
//! - `error`, `stop`: what can stop a run, and how it is told to;
//! - `shadow`: the chain in force beside a candidate, compared;
//! - `cases`, `case_sink`: `sluice test`'s cases through the same driver.

pub(crate) mod case_sink;
pub(crate) mod cases;
pub(crate) mod clock;
pub(crate) mod driver;
#[cfg(test)]
mod driver_tests;
pub(crate) mod durable;
pub(crate) mod error;
pub(crate) mod events;
mod files;
#[cfg(feature = "kafka")]
pub mod kafka;
#[cfg(not(feature = "kafka"))]
#[path = "kafka_absent.rs"]
pub(crate) mod kafka;
pub(crate) mod replay;
pub mod setup;
pub(crate) mod shadow;
pub mod stop;

use crate::config::Config;
use crate::plugin::engine::Runtime;
use crate::source::config::SourceConfig;
use crate::telemetry::stats::RunStats;
use error::PipelineError;
use stop::Stop;

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
