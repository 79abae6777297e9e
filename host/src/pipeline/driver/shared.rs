//! What every partition of a run shares, and what the driver is handed
//! of the run: its settings, the state store and window, the sinks, the
//! group committer, and the logs beyond the store (the dedup changelog,
//! the quarantine topic).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocksdb::WriteBatch;

use crate::custody::claims::Claims;
use crate::custody::ids::IdDigest;
use crate::pipeline::durable::Committer;
use crate::pipeline::error::PipelineError;
use crate::sink::named::Sinks;
use crate::store::Store;
use crate::store::dedup::DedupWindow;
use crate::store::quarantine::Entry;
use crate::telemetry::stats::RunStats;
use crate::watchdog::Watchdog;

/// Where a batch's accepted ids go beyond the local window before its
/// position may leave the process: the dedup changelog of a Kafka
/// pipeline, from which a partition's next owner restores them.
///
/// Pipelined like the store's write: the back sends a batch's ids when it
/// hands its write over, and waits for the log's answer only when that
/// write is durable, before the position is published. So the sync and the
/// produce overlap, and the next batch's delivery waits for neither.
///
/// Only for a source whose position leaves through `Keeper::durable` and
/// the published prefix (Kafka), never one whose checkpoint rides in the
/// write (files): that checkpoint would be durable before the log's answer.
pub(crate) trait IdLog: Sync {
    /// Send `ids`, accepted on `partition` at `now_secs`.
    fn send<'l>(&'l self, partition: &str, now_secs: u64, ids: &[IdDigest]) -> Box<dyn SentIds + 'l>;
    /// Add to `write` that the log has had every id of `partition`
    /// through `acked` (an answer of an earlier batch, whose own write is
    /// durable): where a restart of this store starts restoring.
    fn remember(&self, partition: &str, acked: i64, write: &mut WriteBatch) -> Result<(), PipelineError>;
    /// A batch's write is durable and the log has its ids: its position
    /// may leave the process. The source commits it (the consume loop),
    /// unless the log commits it itself, in a transaction that a newer
    /// owner of the partition fences (`source.transactions`).
    fn commit(&self, _partition: &str, _position: u64, _stopping: &dyn Fn() -> bool) -> Result<Commit, PipelineError> {
        Ok(Commit::BySource)
    }
    /// Whether every write out must be durable and committed before the
    /// next batch reaches the sink: then a member whose commit is fenced
    /// has delivered no batch beyond the one that commit was for.
    fn one_batch_at_a_time(&self) -> bool {
        false
    }
}

/// What became of a durable batch's position (`IdLog::commit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Commit {
    /// Published for the source to commit.
    BySource,
    /// Committed already, by the log.
    Done,
    /// Not committed, and no later position of this partition may be:
    /// the partition was let go (stopping) or taken over (fenced).
    LetGo,
}

/// A batch's ids on their way into the log.
pub(crate) trait SentIds: Send {
    /// Wait (retrying as long as it takes) until the log has them all.
    /// `Ok(Some(at))`: it has, through `at`; `Ok(None)`: let go
    /// (`stopping`) first.
    fn wait(self: Box<Self>, stopping: &dyn Fn() -> bool) -> Result<Option<i64>, PipelineError>;
}

/// What the driver reads of the config, and only that: it is handed its
/// settings (`pipeline::setup::driver_settings` picks them out), never the whole
/// config, so a new key reaches it only by being named here.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// `pipeline.name`, written into every quarantine entry.
    pub pipeline: String,
    /// `pipeline.batch_size`: records per batch.
    pub batch_size: usize,
    /// `pipeline.in_flight`: batches of a worker between its sources and
    /// their commits.
    pub in_flight: usize,
    /// `pipeline.workers`: the most workers a run's partitions share.
    pub workers: usize,
    /// How long an idle worker waits before it asks its lanes again when
    /// nothing rings (a file's `source.poll_interval`; for Kafka the bound
    /// on noticing a revoke while idle).
    pub idle_poll: Duration,
    /// How long a batch that is not full may wait for more records once
    /// its first came (`source.linger`; zero for files): a batch of a few
    /// records costs its syncs as much as a full one.
    pub linger: Duration,
    /// `quarantine.mask_fields` and `quarantine.mask_patterns`.
    pub mask_fields: Vec<String>,
    pub mask_patterns: Vec<String>,
    /// `dedup.audit`: each delivered id's trail is kept.
    pub audit: bool,
    /// The kind of source the partitions come from (`kafka`, `file`), as
    /// the audit names their origins.
    pub source_kind: &'static str,
}

/// Where quarantine entries go beyond the state store, acknowledged
/// before their records' doors are written (Kafka: `quarantine.topic`).
pub(crate) trait QuarantineLog: Sync {
    /// Whether every entry was acknowledged; false when let go first
    /// (`stopping`): the records stay owed and are read again.
    fn publish(&self, entries: &[&Entry], stopping: &dyn Fn() -> bool) -> bool;
}

/// What every partition of a run shares.
#[derive(Clone)]
pub(crate) struct Shared<'a> {
    pub settings: &'a Settings,
    pub store: &'a Store,
    pub dedup: &'a DedupWindow<'a>,
    /// The sinks, and the routes a batch's plan fans events out by.
    pub sinks: &'a Sinks,
    pub committer: &'a Committer,
    /// `quarantine.topic`, when set: entries are published there before
    /// their records' doors are written.
    pub quarantine_topic: Option<&'a dyn QuarantineLog>,
    /// The dedup changelog (Kafka), when on.
    pub changelog: Option<&'a dyn IdLog>,
    /// When partitions share a dedup scope: the ids their batches in
    /// flight hold (`custody::claims`).
    pub claims: Option<Arc<Claims>>,
    /// `[schema_registry]`: the schemas a batch's framed payloads name are
    /// fetched before its plugins run.
    pub registry: Option<Arc<crate::schema_registry::resolver::Resolver>>,
    pub stats: &'a Mutex<RunStats>,
    /// Every partition the driver runs is watched for stalls while it runs.
    pub watchdog: &'a Watchdog,
}
