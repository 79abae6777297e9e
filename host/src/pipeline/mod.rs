//! `sluice run`: sources → plugins → dedup → sink, one task per partition.
//!
//! The order of operations inside a batch is the custody rule
//! (`../shared/DESIGN.md`), in `process_batch` below:
//!
//! 1. plugins: one verdict per source record;
//! 2. dedup look-up: skip events whose id was already delivered;
//! 3. delivery: the sink answers per event;
//! 4. for each event the sink accepted, its id goes into the batch's
//!    `WriteBatch`, with the quarantine entries and the new checkpoint;
//! 5. offsets: each record that passed a door is marked done, and the
//!    checkpoint is the end of the contiguous finished prefix;
//! 6. commit: the `WriteBatch` is written synced. Only now has anything
//!    moved: a crash before this re-reads the batch (the sink may then get
//!    a duplicate, never a loss).

mod files;
pub mod kafka;
pub mod replay;
pub mod stats;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rocksdb::WriteBatch;

pub use stats::RunStats;

use crate::config::{Config, SinkConfig, SourceConfig};
use crate::offsets::Door;
use crate::plugin::{Chain, PluginId, Position, Record, Runtime, Verdict};
use crate::sink::clickhouse::ClickhouseSinkConfig;
use crate::sink::file::{FileSink, StdoutSink};
use crate::sink::guarded::{Guarded, Outcome};
use crate::sink::http::HttpSink;
use crate::sink::kafka::KafkaSink;
use crate::sink::{Delivery, Sink};
use crate::store::Identity;
use crate::store::dedup::{DedupWindow, PIPELINE_SCOPE, Scope, digest, scope};
use crate::store::quarantine::{Entry, Quarantine, Rejection};

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Plugin(#[from] crate::plugin::PluginError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Source(#[from] crate::source::file::SourceError),
    #[error(transparent)]
    Sink(#[from] crate::sink::SinkError),
    #[error("offset tracking: {0}")]
    Offsets(#[from] crate::offsets::OffsetError),
    #[error("metrics endpoint: {0}")]
    Metrics(String),
    #[error("source paths {0:?} match no file")]
    NoFiles(Vec<String>),
    #[error(transparent)]
    Kafka(Box<crate::source::kafka::KafkaSourceError>),
    #[error("the task of partition {0} panicked (see the log); its unfinished records are read again next time")]
    Panicked(String),
}

impl From<crate::source::kafka::KafkaSourceError> for PipelineError {
    fn from(e: crate::source::kafka::KafkaSourceError) -> Self {
        PipelineError::Kafka(Box::new(e))
    }
}

/// Stops every partition when dropped without being disarmed: a partition
/// that fails or panics must not leave the others running (in follow mode
/// they would never end) while the run reports nothing.
struct StopOnExit<'a> {
    stop: &'a Stop,
    armed: bool,
}

impl Drop for StopOnExit<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.stop.request();
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

/// The identity a state store is created for.
pub fn identity(cfg: &Config) -> Identity {
    let sources = match &cfg.source {
        SourceConfig::File(f) => f.paths.clone(),
        SourceConfig::Kafka(k) => k.topics.iter().map(|t| format!("kafka:{}/{t}", k.group_id)).collect(),
    };
    Identity { pipeline: cfg.pipeline.name.clone(), sources }
}

/// Which ids a record's events are deduplicated against: its own
/// partition's for Kafka (ids per partition, DESIGN), the pipeline's for
/// files.
fn dedup_scope(position: &Position) -> Scope {
    match position {
        Position::Kafka { topic, partition, .. } => scope(&format!("{topic}/{partition}")),
        Position::File { .. } => PIPELINE_SCOPE,
    }
}

/// The quarantine entry of each record whose fate is quarantine, by the
/// record's index in the batch; nothing is written yet.
fn quarantine_entries<'r>(
    quarantine: &Quarantine<'_>,
    batch: impl Iterator<Item = (&'r Record, &'r Option<Fate>)>,
) -> Vec<(usize, Entry)> {
    let now = now_nanos();
    let mut out = Vec::new();
    for (i, (record, fate)) in batch.enumerate() {
        if let Some(Fate::Quarantine { stage, plugin, reason }) = fate {
            let rejection = Rejection { record, stage, plugin: plugin.as_ref(), reason: reason.clone(), attempts: 1 };
            out.push((i, quarantine.entry(rejection, now)));
        }
    }
    out
}

/// Add a quarantine entry to `write` for each record whose fate is
/// quarantine; they become durable with the batch's ids and offsets.
fn quarantine_fates<'r>(
    quarantine: &Quarantine<'_>,
    write: &mut WriteBatch,
    batch: impl Iterator<Item = (&'r Record, &'r Option<Fate>)>,
) -> Result<(), PipelineError> {
    for (_, entry) in quarantine_entries(quarantine, batch) {
        quarantine.write(write, &entry)?;
    }
    Ok(())
}

fn now_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Load every plugin and instantiate one chain; used by `check` and `run`.
pub fn build_chain(runtime: &Runtime, cfg: &Config) -> Result<Chain, PipelineError> {
    let specs: Vec<_> = cfg.plugins.iter().map(|p| p.spec()).collect();
    Ok(crate::plugin::build_chain(runtime, &specs)?)
}

/// The configured sink, driven through retries and its breaker.
pub fn open_sink(cfg: &Config) -> Result<Guarded, PipelineError> {
    let sink: Box<dyn Sink> = match &cfg.sink {
        SinkConfig::File { path, .. } => Box::new(FileSink::open(path)?),
        SinkConfig::Stdout => Box::new(StdoutSink),
        SinkConfig::Http(h) => Box::new(HttpSink::new(h, None)?),
        SinkConfig::Clickhouse(c) => Box::new(HttpSink::new(&ClickhouseSinkConfig::http(c), Some(c.name()))?),
        SinkConfig::Kafka(k) => Box::new(KafkaSink::new(k)?),
    };
    let (retry, breaker) = cfg.sink.guard();
    Ok(Guarded::new(sink, retry, breaker))
}

/// Run the pipeline of `cfg` until its source ends (files without
/// `follow`) or `stop` is requested.
pub fn run(cfg: &Config, runtime: &Runtime, stop: &Stop) -> Result<RunStats, PipelineError> {
    match &cfg.source {
        SourceConfig::File(source) => files::run(cfg, source, runtime, stop),
        SourceConfig::Kafka(source) => kafka::run(cfg, source, runtime, stop),
    }
}

/// What became of one source record in a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    Delivered,
    Duplicate,
    Dropped { reason: String },
    Quarantine { stage: &'static str, plugin: Option<PluginId>, reason: String },
}

impl Fate {
    fn door(&self) -> Door {
        match self {
            Fate::Delivered => Door::Delivered,
            Fate::Duplicate => Door::Duplicate,
            Fate::Dropped { .. } => Door::Dropped,
            Fate::Quarantine { .. } => Door::Quarantined,
        }
    }
}

/// The stages a batch goes through, shared by partitions and replay.
pub struct Stages<'a, 's> {
    pub chain: &'a mut Chain,
    pub dedup: &'a DedupWindow<'s>,
    pub sink: &'a Guarded,
    /// Whether the caller must let go of the batch (shutdown, a revoked
    /// partition): asked while delivery waits on retries or the breaker.
    pub stopping: &'a dyn Fn() -> bool,
    /// Told which stage the batch enters (`plugins`, `dedup`, `sink`):
    /// the "why" of a commit that waits.
    pub on_stage: Option<&'a dyn Fn(&'static str)>,
}

impl Stages<'_, '_> {
    fn enter(&self, stage: &'static str) {
        if let Some(f) = self.on_stage {
            f(stage);
        }
    }
}

/// Steps 1 to 4 of the custody order for `records` (each with whether it
/// is oversize, i.e. never to reach a plugin): plugins, dedup look-up,
/// delivery, and the accepted ids added to `write`. Returns each record's
/// fate; `None` for a record still owed because delivery was stopped
/// (`Stages::stopping`): it must stay unfinished and be read again.
/// Nothing is durable until the caller commits `write`, after adding what
/// it owes for the fates (quarantine entries, a checkpoint).
pub fn deliver_batch(
    stages: &mut Stages<'_, '_>,
    records: &[(&Record, bool)],
    max_line: u64,
    write: &mut WriteBatch,
    counts: &mut stats::Counts,
) -> Result<Vec<Option<Fate>>, PipelineError> {
    let now_secs = (now_nanos() / 1_000_000_000) as u64;
    let mut fates: Vec<Option<Fate>> = vec![None; records.len()];

    // Oversize lines never reach a plugin: quarantined whole.
    let mut to_plugins = Vec::with_capacity(records.len());
    let mut index_of = Vec::with_capacity(records.len());
    for (i, (r, oversize)) in records.iter().enumerate() {
        if *oversize {
            let reason = format!("line of {} bytes exceeds source.max_line_bytes {max_line}", r.payload.len());
            fates[i] = Some(Fate::Quarantine { stage: "source", plugin: None, reason });
        } else {
            to_plugins.push((*r).clone());
            index_of.push(i);
        }
    }

    // 1. Plugins.
    stages.enter("plugins");
    let t = Instant::now();
    let verdicts = stages.chain.run(to_plugins)?;
    counts.plugin_seconds += t.elapsed().as_secs_f64();

    // 2. Dedup look-up, for every event of every emitted record.
    let mut events = Vec::new(); // (record index, delivery, digest)
    for (verdict, &i) in verdicts.into_iter().zip(&index_of) {
        match verdict {
            Verdict::Emit(evs) => {
                let n = evs.len();
                for (k, e) in evs.into_iter().enumerate() {
                    let id = e.id.clone().unwrap_or_else(|| {
                        let base = records[i].0.position.default_event_id();
                        if n == 1 { base } else { format!("{base}/{k}") }
                    });
                    let d = digest(&dedup_scope(&records[i].0.position), &id);
                    let delivery = Delivery::new(id, e.timestamp.map(sluice_guest::time::format_rfc3339), &e.body);
                    events.push((i, delivery, d));
                }
            }
            Verdict::Drop { reason, .. } => fates[i] = Some(Fate::Dropped { reason }),
            Verdict::Reject { plugin, reason } => {
                fates[i] = Some(Fate::Quarantine { stage: "plugin", plugin: Some(plugin), reason })
            }
        }
    }
    stages.enter("dedup");
    let digests: Vec<_> = events.iter().map(|(_, _, d)| *d).collect();
    let mut seen = stages.dedup.seen(&digests, now_secs)?;
    // An id twice in one batch: the second is a duplicate of the first.
    let mut in_batch = std::collections::HashSet::with_capacity(digests.len());
    for (s, d) in seen.iter_mut().zip(&digests) {
        if !*s && !in_batch.insert(*d) {
            *s = true;
        }
    }

    // 3. Delivery of what is new.
    let fresh: Vec<usize> = (0..events.len()).filter(|j| !seen[*j]).collect();
    let deliveries: Vec<Delivery> = fresh.iter().map(|j| events[*j].1.clone()).collect();
    stages.enter("sink");
    let outcomes = if deliveries.is_empty() {
        Vec::new()
    } else {
        let t = Instant::now();
        // Retries, backoff and the breaker happen in here (`sink::guarded`).
        let outcomes = stages.sink.deliver(&deliveries, stages.stopping);
        counts.sink_seconds += t.elapsed().as_secs_f64();
        outcomes
    };

    // 4. Ids of accepted events into the WriteBatch.
    let mut accepted = Vec::with_capacity(fresh.len());
    let mut event_fate: Vec<Option<Fate>> = seen.iter().map(|s| s.then_some(Fate::Duplicate)).collect();
    for (j, outcome) in fresh.iter().zip(outcomes) {
        event_fate[*j] = outcome.map(|o| match o {
            Outcome::Accepted => {
                accepted.push(events[*j].2);
                Fate::Delivered
            }
            // Rejected, or out of attempts: the sink's answer is the reason.
            Outcome::Rejected(reason) => Fate::Quarantine { stage: "sink", plugin: None, reason },
        });
    }
    stages.dedup.record(write, &accepted, now_secs)?;

    // A record's fate from its events': quarantined if any event was (the
    // whole original is kept; its delivered siblings are deduplicated on
    // replay), else delivered if any was, else duplicate. An event without
    // a fate leaves its record owed.
    let mut per_record: Vec<Vec<Option<Fate>>> = vec![Vec::new(); records.len()];
    for ((i, _, _), f) in events.iter().zip(event_fate) {
        per_record[*i].push(f);
    }
    for (i, evs) in per_record.into_iter().enumerate() {
        if evs.is_empty() || fates[i].is_some() {
            continue;
        }
        if evs.iter().any(Option::is_none) {
            continue;
        }
        let evs: Vec<Fate> = evs.into_iter().flatten().collect();
        fates[i] = Some(
            evs.iter()
                .find(|f| matches!(f, Fate::Quarantine { .. }))
                .cloned()
                .or_else(|| evs.iter().find(|f| **f == Fate::Delivered).cloned())
                .unwrap_or(Fate::Duplicate),
        );
    }
    Ok(fates)
}
