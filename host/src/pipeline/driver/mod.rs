//! The partition driver: the one piece of code that takes a record from
//! its source to its commit, for every source (files, Kafka, quarantine
//! replay). A source plugs in through [`Reader`] (records in batches, as
//! `crate::batch` describes them) and [`Keeper`] (what a durable finished
//! prefix means to it: a checkpoint in the store's write for files, a
//! prefix published for the Kafka commit, entries marked replayed for a
//! replay), together a [`Lane`]: one partition.
//!
//! **Workers, not a thread per partition.** A run has a fixed pool of
//! workers (`pipeline.workers`, one per core by default: [`Pool`]), and
//! partitions are lanes multiplexed onto them. A lane is a few KiB of
//! state (its reader, its offset tracker, its place in the worker's
//! rotation); the plugin instances, the threads and the batches belong to
//! the worker. So the cost of a run follows its records, not its
//! partitions: an idle partition costs its lane, and slow partitions share
//! a batch instead of each paying a batch's overhead for a few records.
//!
//! Each worker has two threads, so that the CPU and the disk never wait on
//! each other:
//!
//! - the front (`front.rs`) gathers a batch from its lanes (records of
//!   several partitions when each has few), runs the plugins and asks the
//!   dedup window (steps 1–2 of the custody order);
//! - the back (`back.rs`) delivers it, builds its durable write (accepted
//!   ids, quarantine entries, what each lane's keeper adds) and hands the
//!   write to the group committer (`durable`), then goes on with the next
//!   batch while that write is synced (steps 3–5).
//!
//! At most `pipeline.in_flight` batches of a worker are between its
//! sources and their commits: the front takes a credit per batch and the
//! back returns it when the batch's write is durable.
//!
//! **The custody rule, as this module enforces it.** A record's position
//! moves only after its sink answer and its store write are both durable:
//! the keeper's `durable` (the Kafka prefix) is called only once the write
//! is synced, and a checkpoint rides inside the very write that makes its
//! batch's doors durable. Each lane keeps its own contiguous prefix: a
//! write carries, per partition in its batch, the position of the prefix
//! of that partition's records decided in it or in earlier writes; writes
//! become durable in the order they were handed over, and after a failed
//! write no later one is made (`durable::Committer`), so when a write is
//! durable every record below each of its positions has passed a door
//! durably. A batch of several partitions is let go undecided only when
//! every one of them is stopping: a partition that goes on never has a
//! hole behind records that went out after it.

mod back;
mod front;
mod pool;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocksdb::WriteBatch;

pub use self::pool::{Doorbell, LaneDone, Pool, PoolParts};
use super::PipelineError;
use super::durable::Committer;
use crate::batch::{Pull, Pulled};
use crate::custody::Fate;
use crate::custody::claims::Claims;
use crate::custody::ids::IdDigest;
use crate::custody::standing::PartitionState;
use crate::plugin::Chain;
use crate::sink::retrying::RetryingSink;
use crate::store::Store;
use crate::store::dedup::DedupWindow;
use crate::store::quarantine::Entry;
use crate::telemetry::stats::RunStats;
use crate::watchdog::Watchdog;

/// Where a partition's records come from. Runs on its worker's front
/// thread, beside the other lanes of that worker.
pub trait Reader: Send {
    /// The next records, up to `max`, without waiting: the worker waits
    /// for all its lanes at once (`Settings::idle_poll`, or a ring of its
    /// [`Doorbell`]), so a reader that slept would hold up every other
    /// partition of its worker. `Ok(None)`: the source ended (or is
    /// stopping). An empty batch: nothing now.
    fn pull(&mut self, max: usize) -> Result<Option<Pull>, PipelineError>;
    /// The worker's doorbell, once, when the lane joins it: a reader whose
    /// source can say "records came" (a Kafka partition's queue) rings it,
    /// so an idle worker wakes at once instead of at its next poll.
    fn wake_with(&mut self, _bell: &Arc<Doorbell>) {}
    /// Whether the source may have records now. A reader whose source
    /// says when records come (a Kafka partition's queue) answers false
    /// while it knows it has none, and its worker skips it but for one
    /// sweep of every lane per `Settings::idle_poll`: a worker with a
    /// thousand idle partitions and one busy one asks the busy one, not a
    /// thousand queues per batch. True by default: asked every time.
    fn ready(&self) -> bool {
        true
    }
}

impl<R: Reader + ?Sized> Reader for &mut R {
    fn pull(&mut self, max: usize) -> Result<Option<Pull>, PipelineError> {
        (**self).pull(max)
    }
    fn wake_with(&mut self, bell: &Arc<Doorbell>) {
        (**self).wake_with(bell)
    }
    fn ready(&self) -> bool {
        (**self).ready()
    }
}

/// What a durable finished prefix means to a source. Runs on its
/// worker's back thread.
pub trait Keeper: Send {
    /// Add to `write` what the source keeps with a batch's doors: a file's
    /// checkpoint for `position` (durable together with the doors), a
    /// replay's entry marks. `fates` are the batch's, per record.
    /// Nothing, by default: a Kafka partition's prefix is published by
    /// the driver itself once durable.
    fn with_doors(
        &mut self,
        _position: u64,
        _records: &[Pulled],
        _fates: &[Option<Fate>],
        _write: &mut WriteBatch,
    ) -> Result<(), PipelineError> {
        Ok(())
    }
    /// The write carrying every door below `position` is durable: the
    /// position may now leave the process (the Kafka commit).
    fn durable(&mut self, _position: u64) {}
    /// Whether `with_doors` keeps the quarantined records itself (a replay
    /// updates their entries) instead of the driver writing new entries.
    fn keeps_quarantine(&self) -> bool {
        false
    }
}

impl<K: Keeper + ?Sized> Keeper for &mut K {
    fn with_doors(
        &mut self,
        position: u64,
        records: &[Pulled],
        fates: &[Option<Fate>],
        write: &mut WriteBatch,
    ) -> Result<(), PipelineError> {
        (**self).with_doors(position, records, fates, write)
    }
    fn durable(&mut self, position: u64) {
        (**self).durable(position)
    }
    fn keeps_quarantine(&self) -> bool {
        (**self).keeps_quarantine()
    }
}

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
pub trait IdLog: Sync {
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
pub enum Commit {
    /// Published for the source to commit.
    BySource,
    /// Committed already, by the log.
    Done,
    /// Not committed, and no later position of this partition may be:
    /// the partition was let go (stopping) or taken over (fenced).
    LetGo,
}

/// A batch's ids on their way into the log.
pub trait SentIds: Send {
    /// Wait (retrying as long as it takes) until the log has them all.
    /// `Ok(Some(at))`: it has, through `at`; `Ok(None)`: let go
    /// (`stopping`) first.
    fn wait(self: Box<Self>, stopping: &dyn Fn() -> bool) -> Result<Option<i64>, PipelineError>;
}

/// What the driver reads of the config, and only that: it is handed its
/// settings (`pipeline::driver_settings` picks them out), never the whole
/// config, so a new key reaches it only by being named here.
#[derive(Debug, Clone)]
pub struct Settings {
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
pub trait QuarantineLog: Sync {
    /// Whether every entry was acknowledged; false when let go first
    /// (`stopping`): the records stay owed and are read again.
    fn publish(&self, entries: &[&Entry], stopping: &dyn Fn() -> bool) -> bool;
}

/// What every partition of a run shares.
#[derive(Clone)]
pub struct Shared<'a> {
    pub settings: &'a Settings,
    pub store: &'a Store,
    pub dedup: &'a DedupWindow<'a>,
    pub sink: &'a RetryingSink,
    pub committer: &'a Committer,
    /// `quarantine.topic`, when set: entries are published there before
    /// their records' doors are written.
    pub quarantine_topic: Option<&'a dyn QuarantineLog>,
    /// The dedup changelog (Kafka), when on.
    pub changelog: Option<&'a dyn IdLog>,
    /// When partitions share a dedup scope: the ids their batches in
    /// flight hold (`custody::claims`).
    pub claims: Option<Arc<Claims>>,
    pub stats: &'a Mutex<RunStats>,
    /// Every partition the driver runs is watched for stalls while it runs.
    pub watchdog: &'a Watchdog,
}

/// One partition as its worker runs it: what a source hands the pool.
pub struct Lane<'s> {
    pub name: Arc<str>,
    /// Where reading (re)starts; `None`: at the first record read (a Kafka
    /// partition starts at the group's committed offset).
    pub start: Option<u64>,
    pub reader: Box<dyn Reader + 's>,
    pub keeper: Box<dyn Keeper + 's>,
    /// Whether the partition must let go (shutdown, revoke): what is not
    /// durable is read again.
    pub stopping: Arc<dyn Fn() -> bool + Send + Sync + 's>,
    pub state: Arc<Mutex<PartitionState>>,
}

/// One partition on a worker of its own, run on the caller's thread: a
/// replay, a partition whose Kafka transactions are its own, tests.
pub struct Partition<'p> {
    pub name: &'p str,
    /// As [`Lane::start`].
    pub start: Option<u64>,
    pub chain: Chain,
    /// As [`Lane::stopping`].
    pub stopping: &'p (dyn Fn() -> bool + Sync),
    pub state: Arc<Mutex<PartitionState>>,
}

/// Run one partition until its reader ends, it must let go, or it fails:
/// a worker with one lane, on the same path as a pool's.
pub fn drive(
    shared: &Shared<'_>,
    part: Partition<'_>,
    reader: &mut dyn Reader,
    keeper: &mut dyn Keeper,
) -> Result<(), PipelineError> {
    let Partition { name, start, chain, stopping, state } = part;
    let lane = Lane {
        name: Arc::from(name),
        start,
        reader: Box::new(reader),
        keeper: Box::new(keeper),
        stopping: Arc::new(stopping),
        state,
    };
    let inbox = pool::Inbox::default();
    inbox.add(lane, None);
    inbox.close();
    front::run_worker(shared, chain, &inbox, name)
}

fn lock(state: &Mutex<PartitionState>) -> std::sync::MutexGuard<'_, PartitionState> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}
