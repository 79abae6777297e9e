//! The sections that belong to the whole pipeline rather than to one
//! component: `[pipeline]` (its name, its state, its batches) and
//! `[shutdown]`.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::problem::Problems;
use crate::units::{bytes, duration};

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    /// Identifies the pipeline; the state store refuses to open for another.
    pub name: String,
    /// Where checkpoints, dedup ids and the quarantine live (RocksDB).
    pub state_dir: PathBuf,
    /// Records per batch (1 to 100,000): each batch pays two syncs (the
    /// sink's, the state store's), so larger batches cost less per record
    /// and hold more in memory.
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
    /// Batches of one worker that may be between their sources and their
    /// commits at once: while one is in the sink or being synced, the next
    /// is read and run through the plugins. Commits stay contiguous; more
    /// costs memory (up to this many batches per worker) and re-reading
    /// after a crash, not safety. 2 overlaps the sink with the plugins;
    /// more rarely helps (`benches/pipeline_file` measures it).
    #[serde(default = "default_in_flight")]
    pub in_flight: usize,
    /// Workers the run's partitions share (1 to 1024; default: one per
    /// core). Each worker is two threads (plugins and dedup look-up; sink
    /// and store write) with its own plugin instances, and runs any number
    /// of partitions: a partition is a lane of a few KiB, not threads, and
    /// slow partitions share batches. A run with fewer partitions than
    /// workers starts one worker per partition.
    #[serde(default)]
    pub workers: Option<usize>,
    /// Free space the state store's volume keeps: below it, commits wait
    /// (and say so) until space is freed, instead of RocksDB running out
    /// mid-write (`store::disk_reserve`). `0` turns the guard off. Default 64MiB,
    /// room for RocksDB's flushes of the dedup window's buffers.
    #[schemars(with = "crate::units::SizeText")]
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

/// How a stop (SIGTERM, SIGINT) drains what is in flight.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShutdownConfig {
    /// How long in-flight work may take to finish after SIGTERM/SIGINT.
    #[schemars(with = "crate::units::DurationText")]
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

impl PipelineConfig {
    /// `workers`, else one per core.
    pub(crate) fn workers(&self) -> usize {
        self.workers.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
    }

    pub(crate) fn validate(&self, p: &mut Problems) {
        if self.name.trim().is_empty() {
            p.add("pipeline.name", "must not be empty".into());
        }
        if !(1..=64).contains(&self.in_flight) {
            p.add("pipeline.in_flight", format!("{} is not within 1..=64", self.in_flight));
        }
        if let Some(w) = self.workers
            && !(1..=1024).contains(&w)
        {
            p.add("pipeline.workers", format!("{w} is not within 1..=1024"));
        }
        if !(1..=100_000).contains(&self.batch_size) {
            p.add("pipeline.batch_size", format!("{} is not within 1..=100000", self.batch_size));
        }
    }
}
