//! The partition driver: the one piece of code that takes a record from
//! its source to its commit, for every source (files, Kafka, quarantine
//! replay). A source plugs in through [`Reader`] (records in batches, as
//! `crate::batch` describes them) and
//! [`Keeper`] (what a durable finished prefix means to it: a checkpoint in
//! the store's write for files, a prefix published for the Kafka commit,
//! entries marked replayed for a replay).
//!
//! Two threads per partition, so that the CPU and the disk never wait on
//! each other:
//!
//! - the front (the caller's thread) reads a batch, runs the plugins and
//!   asks the dedup window (steps 1–2 of the custody order);
//! - the back delivers it, builds its durable write (accepted ids,
//!   quarantine entries, what the keeper adds) and hands the write to the
//!   group committer (`durable`), then goes on with the next batch while
//!   that write is synced (steps 3–5).
//!
//! At most `pipeline.in_flight` batches of a partition are between its
//! source and its commit: the front takes a credit per batch and the back
//! returns it when the batch's write is durable.
//!
//! **The custody rule, as this module enforces it.** A record's position
//! moves only after its sink answer and its store write are both durable:
//! the keeper's `durable` (the Kafka prefix) is called only once the write
//! is synced, and a checkpoint rides inside the very write that makes its
//! batch's doors durable. A write carries the position of the contiguous
//! prefix of records decided in it or in earlier writes of the partition;
//! writes become durable in the order they were handed over, and after a
//! failed write no later one is made (`durable::Committer`), so when a
//! write is durable every record below its position has passed a door
//! durably.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rocksdb::WriteBatch;

use super::durable::{Committer, Durable};
use super::{PipelineError, RaiseOnDrop, now_nanos};
use crate::batch::{Pull, Pulled};
use crate::custody::claims::{Claimed, Claims};
use crate::custody::ids::{DigestSet, IdDigest};
use crate::custody::standing::PartitionState;
use crate::custody::{Fate, OffsetTracker, Plan};
use crate::pipeline::events::{Backpressure, BatchFinished, CommitBlocked, RecordsQuarantined};
use crate::plugin::{Chain, Judged, Record, Verdicts};
use crate::sink::retrying::RetryingSink;
use crate::store::audit::{Context, Origin, Trails};
use crate::store::dedup::DedupWindow;
use crate::store::quarantine::{Entry, Masking, PluginVersion, Quarantine};
use crate::store::{Store, StoreError};
use crate::telemetry::InternalEvent;
use crate::telemetry::stats::{Counts, RunStats};
use crate::telemetry::tap::{Point, Sample, TAPS};
use crate::watchdog::Watchdog;

/// Where a partition's records come from. Runs on the front thread.
pub trait Reader: Send {
    /// The next records, up to `max`. `Ok(None)`: the source ended (or is
    /// stopping). An empty batch: nothing yet; the reader waits a little
    /// of its own accord (a poll interval, a linger) before it returns.
    fn pull(&mut self, max: usize) -> Result<Option<Pull>, PipelineError>;
}

/// What a durable finished prefix means to a source. Runs on the back
/// thread.
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
    /// `pipeline.in_flight`: batches of a partition between its source and
    /// its commit.
    pub in_flight: usize,
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

/// One partition, as the driver runs it.
pub struct Partition<'p> {
    pub name: &'p str,
    /// Where reading (re)starts; `None`: at the first record read (a Kafka
    /// partition starts at the group's committed offset).
    pub start: Option<u64>,
    pub chain: Chain,
    /// Whether the partition must let go (shutdown, revoke): what is not
    /// durable is read again.
    pub stopping: &'p (dyn Fn() -> bool + Sync),
    pub state: Arc<Mutex<PartitionState>>,
}

/// A batch between the front and the back.
pub(crate) struct Prepared {
    pull: Pull,
    plan: Plan,
    /// How many of this partition's writes were durable when the batch was
    /// looked up: ids accepted by later writes were invisible to it.
    saw_writes: u64,
    counts: Counts,
    /// The ids this batch claimed (shared scopes), held until its write
    /// is durable.
    claimed: Option<Claimed>,
}

/// The committer's word reaches the back thread as one more message.
impl super::durable::Answer for Sender<ToBack> {
    fn durable(&self, seq: u64, result: Result<(), String>) {
        let _ = self.send(ToBack::Durable(seq, result));
    }
}

pub(crate) enum ToBack {
    Batch(Box<Prepared>),
    /// The write of this partition's `seq`th batch is durable (or failed).
    Durable(u64, Result<(), String>),
    /// The front read its last batch.
    End,
}

/// Room for one more batch, with what is left of the batch that made room:
/// records and deliveries go back to the front to be freed on the thread
/// that allocated them (glibc's malloc makes a free from another thread
/// take the allocating thread's arena lock, per allocation).
type Credit = Option<Box<Spent>>;

/// A finished batch's memory.
struct Spent {
    _records: Vec<Pulled>,
    _deliveries: Vec<crate::sink::Delivery>,
}

/// A batch whose write is with the committer.
struct Writing<'l> {
    seq: u64,
    position: u64,
    counts: Counts,
    received: Instant,
    quarantined: Vec<(String, &'static str, String)>,
    records: usize,
    spent: Box<Spent>,
    _claimed: Option<Claimed>,
    /// Its ids on their way into the changelog.
    sent: Option<Box<dyn SentIds + 'l>>,
}

fn lock(state: &Mutex<PartitionState>) -> std::sync::MutexGuard<'_, PartitionState> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// Run one partition until its reader ends, it must let go, or it fails.
pub fn drive(
    shared: &Shared<'_>,
    mut part: Partition<'_>,
    reader: &mut dyn Reader,
    keeper: &mut dyn Keeper,
) -> Result<(), PipelineError> {
    let in_flight = shared.settings.in_flight;
    let (credit_tx, credits) = mpsc::sync_channel::<Credit>(in_flight);
    for _ in 0..in_flight {
        let _ = credit_tx.try_send(None);
    }
    let (to_back, back_rx) = mpsc::channel::<ToBack>();
    let writes_durable = AtomicU64::new(0);
    let back_failed = AtomicBool::new(false);
    let quarantine = Quarantine::new(
        shared.store,
        &shared.settings.pipeline,
        part.chain.stages().iter().map(|s| PluginVersion::from(s.id())).collect(),
        Masking::new(&shared.settings.mask_fields, &shared.settings.mask_patterns)
            .map_err(|e| PipelineError::Config(format!("quarantine.mask_patterns: {e}")))?,
    );
    // What this partition's trails name: the sink, and the chain that
    // judged its records (a reload starts a new partition, a new context).
    let trails = if shared.settings.audit {
        let context = Context {
            sink: shared.sink.describe().to_string(),
            plugins: part
                .chain
                .stages()
                .iter()
                .map(|s| format!("{}@{}", s.id().name, s.id().digest.to_hex()))
                .collect(),
            via: if keeper.keeps_quarantine() { "replay" } else { "run" }.into(),
        };
        // The partition is known to the audit from its start, not from its
        // first delivery: ids restored into it from the changelog are
        // found by the scope its name gives.
        if !keeper.keeps_quarantine() {
            let kind = shared.settings.source_kind;
            shared.store.intern_origin(&Origin { kind: kind.into(), name: part.name.to_string() })?;
        }
        Some(Trails::new(shared.store, &context)?)
    } else {
        None
    };
    let name = part.name;
    let state = part.state.clone();
    let _watched = shared.watchdog.watch(name, state.clone());
    std::thread::scope(|scope| {
        let back = Back {
            shared,
            name,
            state: &state,
            stopping: part.stopping,
            quarantine: &quarantine,
            to_self: std::sync::Arc::new(to_back.clone()),
            credits: credit_tx,
            writes_durable: &writes_durable,
            tracker: part.start.map(OffsetTracker::new),
            writing: VecDeque::new(),
            acked: None,
            unlogged: false,
            trails,
        };
        let back_failed = &back_failed;
        let back = std::thread::Builder::new()
            .name(format!("sluice-back-{name}"))
            .spawn_scoped(scope, move || {
                // Raised unless the back ends well (an error or a panic):
                // the front stops taking batches.
                let mut failed = RaiseOnDrop { flag: back_failed, armed: true };
                let result = back.run(back_rx, keeper);
                failed.armed = result.is_err();
                result
            })
            .map_err(|e| PipelineError::Panicked(format!("{name}: cannot start its back thread: {e}")))?;
        // The back ends after the front's last batch, even when the front
        // panics.
        let end = EndOnDrop(&to_back);
        let front = front(shared, &mut part, reader, &credits, &to_back, &writes_durable, back_failed);
        drop(end);
        let back = back.join().unwrap_or_else(|_| Err(PipelineError::Panicked(name.to_string())));
        // The back's error is the cause when both failed: a front that
        // stopped because the back did has nothing to add.
        back.and(front)
    })
}

/// Tells the back that no batch follows, when dropped.
struct EndOnDrop<'a>(&'a Sender<ToBack>);

impl Drop for EndOnDrop<'_> {
    fn drop(&mut self) {
        let _ = self.0.send(ToBack::End);
    }
}

/// Steps 1–2: read, plugins, dedup look-up. Waits for a credit first, so
/// that at most `in_flight` batches are out.
fn front(
    shared: &Shared<'_>,
    part: &mut Partition<'_>,
    reader: &mut dyn Reader,
    credits: &Receiver<Credit>,
    to_back: &Sender<ToBack>,
    writes_durable: &AtomicU64,
    back_failed: &AtomicBool,
) -> Result<(), PipelineError> {
    let batch_size = shared.settings.batch_size;
    loop {
        // A credit: room for one more batch in flight. Waiting here is
        // the back-pressure: the source is not read meanwhile.
        let waiting = Instant::now();
        let mut said = false;
        loop {
            if (part.stopping)() || back_failed.load(Ordering::SeqCst) {
                return Ok(());
            }
            match credits.recv_timeout(Duration::from_millis(50)) {
                // The spent batch that came back with the credit is freed
                // here, on the thread that allocated it.
                Ok(spent) => {
                    drop(spent);
                    break;
                }
                Err(RecvTimeoutError::Timeout) => {
                    if !said && waiting.elapsed() >= Backpressure::AFTER {
                        Backpressure { partition: part.name, waiting: true }.emit();
                        lock(&part.state).backpressured = true;
                        said = true;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            }
        }
        if said {
            Backpressure { partition: part.name, waiting: false }.emit();
            lock(&part.state).backpressured = false;
        }
        let pull = loop {
            if (part.stopping)() || back_failed.load(Ordering::SeqCst) {
                return Ok(());
            }
            // Long runs forget old ids as they go, busy or idle (at most
            // once a quarter bucket, for every partition together); never
            // a scan.
            shared.dedup.maybe_expire(shared.dedup.now_secs())?;
            match reader.pull(batch_size)? {
                None => return Ok(()),
                Some(p) if p.records.is_empty() => {
                    // Caught up (or not yet told): once per poll, not per
                    // record.
                    if let Some(behind) = p.behind {
                        lock(&part.state).source_behind = Some(behind);
                    }
                    continue;
                }
                Some(p) => break p,
            }
        };
        {
            // The oldest batch not yet durable decides what the commit
            // waits for; this one is it when nothing else is out.
            let mut st = lock(&part.state);
            if let Some(behind) = pull.behind {
                st.source_behind = Some(behind);
            }
            st.out.push_back(pull.received);
            if st.blocking.is_none() {
                st.blocking = Some((pull.records[0].start as i64, "plugins"));
                st.oldest = Some(pull.received);
            }
        }
        let prepared = prepare(shared, part, pull, writes_durable)?;
        if to_back.send(ToBack::Batch(Box::new(prepared))).is_err() {
            return Ok(());
        }
    }
}

/// The plugins' verdicts and the window's answers for one batch.
fn prepare(
    shared: &Shared<'_>,
    part: &mut Partition<'_>,
    pull: Pull,
    writes_durable: &AtomicU64,
) -> Result<Prepared, PipelineError> {
    let mut counts = Counts::default();
    let mut plan = Plan::new(pull.records.len());
    // Refused records never reach a plugin.
    let mut to_plugins: Vec<&Record> = Vec::with_capacity(pull.records.len());
    let mut index_of = Vec::with_capacity(pull.records.len());
    for (i, r) in pull.records.iter().enumerate() {
        match &r.refused {
            Some(reason) => plan.refuse(i, "source", reason.clone()),
            None => {
                to_plugins.push(&r.record);
                index_of.push(i);
            }
        }
    }
    // 1. Plugins.
    let t = Instant::now();
    let Verdicts { judged, events } = part.chain.judge(&to_plugins)?;
    counts.plugin_seconds += t.elapsed().as_secs_f64();
    let mut events = events.into_iter();
    for (judged, i) in judged.into_iter().zip(index_of) {
        match judged {
            Judged::Emit(n) => {
                let position = &pull.records[i].record.position;
                plan.emit(i, events.by_ref().take(n), &pull.scope, || position.default_event_id());
            }
            Judged::Drop { reason, .. } => plan.dropped(i, reason),
            Judged::Reject { plugin, reason } => plan.rejected(i, plugin, reason),
        }
    }
    // 2. Dedup look-up: what was durable before this moment is visible.
    // Where partitions share a scope, the batch first claims its ids: one
    // another batch in flight holds is that batch's duplicate.
    let saw_writes = writes_durable.load(Ordering::SeqCst);
    let digests = plan.digests();
    let (claimed, elsewhere) = match &shared.claims {
        Some(c) => {
            let (claimed, elsewhere) = c.claim(&digests);
            (Some(claimed), elsewhere)
        }
        None => (None, Vec::new()),
    };
    let mut seen = shared.dedup.seen(&digests, shared.dedup.now_secs())?;
    for (s, e) in seen.iter_mut().zip(&elsewhere) {
        *s |= *e;
    }
    plan.seen(&seen);
    Ok(Prepared { pull, plan, saw_writes, counts, claimed })
}

/// Steps 3–5: deliver, write, and finish what became durable.
struct Back<'a, 's> {
    shared: &'a Shared<'s>,
    name: &'a str,
    state: &'a Mutex<PartitionState>,
    stopping: &'a (dyn Fn() -> bool + Sync),
    quarantine: &'a Quarantine<'s>,
    /// Given to the committer, which answers on it.
    to_self: std::sync::Arc<dyn super::durable::Answer>,
    credits: SyncSender<Credit>,
    writes_durable: &'a AtomicU64,
    tracker: Option<OffsetTracker>,
    /// Batches whose writes are with the committer, oldest first.
    writing: VecDeque<Writing<'a>>,
    /// The changelog's latest answer, for the next write to remember.
    acked: Option<i64>,
    /// A batch's ids never reached the changelog (let go): no later
    /// position of this run may leave the process.
    unlogged: bool,
    /// Each delivered id's trail and each absorbed duplicate's, unless
    /// `dedup.audit = false`.
    trails: Option<Trails>,
}

impl<'a> Back<'a, '_> {
    fn run(mut self, rx: Receiver<ToBack>, keeper: &mut dyn Keeper) -> Result<(), PipelineError> {
        // Ids each of this run's writes accepted, by write number, while a
        // batch looked up before that write is still to come.
        let mut recent: VecDeque<(u64, DigestSet)> = VecDeque::new();
        let mut seq = 0u64;
        let mut ended = false;
        let one_at_a_time = self.shared.changelog.is_some_and(|l| l.one_batch_at_a_time());
        // What arrived while the back waited for a write to be durable.
        let mut later: VecDeque<ToBack> = VecDeque::new();
        while !(ended && self.writing.is_empty()) {
            let Some(msg) = later.pop_front().or_else(|| rx.recv().ok()) else { break };
            match msg {
                ToBack::End => ended = true,
                ToBack::Batch(prepared) => {
                    if one_at_a_time {
                        self.settle_writes(&rx, &mut later, keeper)?;
                    }
                    let w = self.deliver(*prepared, seq, &mut recent, keeper)?;
                    self.writing.push_back(w);
                    seq += 1;
                }
                ToBack::Durable(done, result) => self.durable(done, result, keeper)?,
            }
        }
        Ok(())
    }

    /// The write numbered `done` is with the store (or failed).
    fn durable(&mut self, done: u64, result: Result<(), String>, keeper: &mut dyn Keeper) -> Result<(), PipelineError> {
        let w = self
            .writing
            .pop_front()
            .filter(|w| w.seq == done)
            .ok_or_else(|| PipelineError::Panicked(format!("{}: writes acknowledged out of order", self.name)))?;
        result.map_err(|e| PipelineError::Store(self.shared.store.failed(e)))?;
        self.finished(w, keeper)
    }

    /// Wait until every write out is durable and finished (its position
    /// committed), keeping the front's messages that come meanwhile.
    fn settle_writes(
        &mut self,
        rx: &Receiver<ToBack>,
        later: &mut VecDeque<ToBack>,
        keeper: &mut dyn Keeper,
    ) -> Result<(), PipelineError> {
        while !self.writing.is_empty() {
            match rx.recv() {
                Ok(ToBack::Durable(done, result)) => self.durable(done, result, keeper)?,
                Ok(other) => later.push_back(other),
                Err(_) => return Err(PipelineError::Panicked(format!("{}: the committer went away", self.name))),
            }
        }
        Ok(())
    }

    /// Deliver one batch and hand its write to the committer.
    fn deliver(
        &mut self,
        prepared: Prepared,
        seq: u64,
        recent: &mut VecDeque<(u64, DigestSet)>,
        keeper: &mut dyn Keeper,
    ) -> Result<Writing<'a>, PipelineError> {
        let Prepared { pull, mut plan, saw_writes, mut counts, claimed } = prepared;
        let first = pull.records[0].start;
        for r in &pull.records {
            self.tracker(first).begin(r.start, r.next)?;
        }
        // Ids accepted by writes this batch's look-up could not see.
        while recent.front().is_some_and(|(s, _)| *s < saw_writes) {
            recent.pop_front();
        }
        plan.accepted_earlier(|d| recent.iter().any(|(_, ids)| ids.contains(d)));

        // The changelog has the previous batch's ids before this one reaches
        // the sink: a kill repeats at most one batch per partition (what its
        // next owner cannot restore), while the sync of the previous write
        // and the produce of its ids overlap.
        self.await_changelog()?;
        // 3. Delivery of what is new; retries, backoff and the breaker
        // happen in `RetryingSink`.
        self.stage("sink");
        let fresh = plan.take_fresh();
        if TAPS.any() {
            let masking = crate::telemetry::redact::in_force();
            TAPS.offer(
                &Point::BeforeSink,
                masking.as_deref(),
                fresh.iter().map(|d| Sample {
                    partition: self.name,
                    position: None,
                    id: Some(&d.id),
                    timestamp: d.timestamp,
                    body: d.event(),
                    reason: None,
                    masked: false,
                }),
            );
        }
        let outcomes = if fresh.is_empty() {
            Vec::new()
        } else {
            let t = Instant::now();
            let outcomes = self.shared.sink.deliver(&fresh, self.stopping);
            counts.sink_seconds += t.elapsed().as_secs_f64();
            outcomes
        };
        let mut settled = plan.settle(outcomes);

        // 4. The doors of this batch, in one write: accepted ids first
        // (only what the sink accepted, each with its trail), then the
        // quarantine entries.
        let mut write = WriteBatch::default();
        let now = self.shared.dedup.now_secs();
        self.record_ids(&mut write, &settled, &pull.records, now)?;
        let mut fates = std::mem::take(&mut settled.fates);
        // A reason may quote its record (a plugin's message, a backend's
        // answer): masked here, once, like the record, before it reaches
        // an entry, a replay's update or a log line.
        if !self.quarantine.masking().is_empty() {
            for (r, fate) in pull.records.iter().zip(fates.iter_mut()) {
                if let Some(Fate::Quarantine { reason, .. }) = fate {
                    *reason = self.quarantine.reason_for(&r.record, reason);
                }
            }
        }
        // 4a. The accepted ids go to the changelog too: the partition's
        // next owner restores them. The position waits for its answer
        // (`finished`).
        let changelog = self.shared.changelog;
        let sent =
            changelog.filter(|_| !settled.accepted.is_empty()).map(|log| log.send(self.name, now, &settled.accepted));
        if let (Some(log), Some(acked)) = (changelog, self.acked.take()) {
            log.remember(self.name, acked, &mut write)?;
        }
        let mut quarantined = Vec::new();
        if !keeper.keeps_quarantine() {
            let entries = self.entries(&pull.records, &fates);
            if let Some(topic) = self.shared.quarantine_topic.filter(|_| !entries.is_empty()) {
                self.stage("quarantine");
                let listed: Vec<_> = entries.iter().map(|(_, e)| e).collect();
                if !topic.publish(&listed, self.stopping) {
                    // Let go before the brokers had them: not quarantined
                    // yet; they stay owed and are read again.
                    for (i, _) in &entries {
                        fates[*i] = None;
                    }
                }
            }
            let kept: Vec<_> = entries.iter().filter(|(i, _)| fates[*i].is_some()).map(|(_, e)| e).collect();
            self.quarantine.write_all(&mut write, &kept)?;
            if TAPS.any() && !entries.is_empty() {
                // Entries are masked already; their payloads as text.
                let payloads: Vec<Vec<u8>> = entries.iter().map(|(_, e)| e.payload.to_vec()).collect();
                TAPS.offer(
                    &Point::Quarantined,
                    None,
                    entries.iter().zip(&payloads).map(|((_, e), body)| Sample {
                        partition: self.name,
                        position: Some(&e.position),
                        id: None,
                        timestamp: None,
                        body,
                        reason: Some(&e.reason),
                        masked: true,
                    }),
                );
            }
        }
        // 5. Offsets: each record that passed a door is decided; one whose
        // delivery was let go stays owed, and the position stops before it.
        let tracker = self.tracker(first);
        for (r, fate) in pull.records.iter().zip(&fates) {
            let Some(fate) = fate else { continue };
            tracker.finish(r.start, fate.door())?;
            counts.count(fate.door());
            if let Fate::Quarantine { stage, reason, .. } = fate {
                quarantined.push((r.record.position.to_string(), *stage, reason.clone()));
            }
        }
        counts.records += pull.records.len() as u64;
        let position = tracker.committable();
        keeper.with_doors(position, &pull.records, &fates, &mut write)?;
        self.stage("store");
        if !settled.accepted.is_empty() {
            recent.push_back((seq, settled.accepted.into_iter().collect()));
        }
        self.shared.committer.submit(Durable { write, seq, answer: self.to_self.clone() });
        self.idle();
        let records = pull.records.len();
        let spent = Box::new(Spent { _records: pull.records, _deliveries: fresh });
        Ok(Writing {
            seq,
            position,
            counts,
            received: pull.received,
            quarantined,
            records,
            spent,
            _claimed: claimed,
            sent,
        })
    }

    /// The accepted ids into `write`, with their trails and those of the
    /// duplicates absorbed (one clock read and one origin look-up per
    /// batch of one partition, not per record).
    fn record_ids(
        &mut self,
        write: &mut WriteBatch,
        settled: &crate::custody::plan::Settled,
        records: &[Pulled],
        now: u64,
    ) -> Result<(), PipelineError> {
        let (dedup, store) = (self.shared.dedup, self.shared.store);
        let Some(trails) = self.trails.as_mut() else {
            dedup.record(write, &settled.accepted, now)?;
            return Ok(());
        };
        let at = now_nanos();
        let mut trail = |i: usize| trails.trail(store, &records[i].record.position, at);
        let delivered = settled.accepted_records.iter().map(|i| trail(*i)).collect::<Result<Vec<_>, _>>()?;
        dedup.record_with_trails(write, &settled.accepted, &delivered, now)?;
        let absorbed =
            settled.absorbed.iter().map(|(d, i)| Ok((*d, trail(*i)?))).collect::<Result<Vec<_>, StoreError>>()?;
        dedup.record_absorbed(write, &absorbed, now)?;
        Ok(())
    }

    /// The partition's tracker, started at its first record when the
    /// source did not say where reading starts.
    fn tracker(&mut self, first: u64) -> &mut OffsetTracker {
        self.tracker.get_or_insert_with(|| OffsetTracker::new(first))
    }

    /// The quarantine entry of each record whose fate is quarantine, by
    /// the record's index in the batch; nothing is written yet.
    fn entries(&self, records: &[Pulled], fates: &[Option<Fate>]) -> Vec<(usize, crate::store::quarantine::Entry)> {
        let now = now_nanos();
        let mut out = Vec::new();
        for (i, (r, fate)) in records.iter().zip(fates).enumerate() {
            if let Some(Fate::Quarantine { stage, plugin, reason }) = fate {
                let rejection = crate::store::quarantine::Rejection {
                    record: &r.record,
                    stage,
                    plugin: plugin.as_ref(),
                    reason: reason.clone(),
                    attempts: 1,
                };
                out.push((i, self.quarantine.entry(rejection, now)));
            }
        }
        out
    }

    /// Wait for the changelog's answer on the newest batch handed over.
    fn await_changelog(&mut self) -> Result<(), PipelineError> {
        let Some(sent) = self.writing.back_mut().and_then(|w| w.sent.take()) else { return Ok(()) };
        self.stage("changelog");
        match sent.wait(self.stopping)? {
            Some(at) => self.acked = Some(at),
            // Delivered and recorded here, but not in the changelog: the
            // commit stays before them, so that their next owner reads
            // them again (absorbed here, or delivered again).
            None => self.unlogged = true,
        }
        Ok(())
    }

    /// A batch's write is durable: once the changelog has its ids too,
    /// its position may leave the process.
    fn finished(&mut self, mut w: Writing<'a>, keeper: &mut dyn Keeper) -> Result<(), PipelineError> {
        self.writes_durable.fetch_add(1, Ordering::SeqCst);
        if let Some(sent) = w.sent.take() {
            self.stage("changelog");
            match sent.wait(self.stopping)? {
                Some(at) => self.acked = Some(at),
                None => self.unlogged = true,
            }
        }
        let mut committed = false;
        if let Some(log) = self.shared.changelog.filter(|_| !self.unlogged) {
            match log.commit(self.name, w.position, self.stopping)? {
                Commit::BySource => {}
                Commit::Done => committed = true,
                Commit::LetGo => self.unlogged = true,
            }
        }
        if !self.unlogged {
            keeper.durable(w.position);
        }
        RecordsQuarantined { partition: self.name, records: &w.quarantined }.emit();
        let latency = w.received.elapsed().as_secs_f64();
        BatchFinished { partition: self.name, counts: &w.counts, latency_seconds: latency, records: w.records }.emit();
        if let Ok(mut s) = self.shared.stats.lock() {
            s.add(self.name, &w.counts, w.received);
            s.latency.record(latency, w.records);
            s.quarantined(w.quarantined.iter().map(|(_, stage, reason)| (*stage, reason.as_str())));
        }
        {
            // The commit now waits at this position for the next batch out:
            // its write, when one is pending; else whatever stage it is in
            // (the back says "sink" when it gets it).
            let mut st = lock(self.state);
            if !self.unlogged {
                st.committable = Some(w.position as i64);
            }
            if committed {
                st.committed = Some(w.position as i64);
            }
            st.progress = Some(Instant::now());
            st.busy = None;
            st.out.pop_front();
            let stage = if self.writing.is_empty() { "plugins" } else { "store" };
            st.oldest = st.out.front().copied();
            st.blocking = st.oldest.map(|_| (w.position as i64, stage));
            CommitBlocked { partition: self.name, blocking: st.blocking }.emit();
        }
        let _ = self.credits.try_send(Some(w.spent));
        Ok(())
    }

    /// The batch in the back's hands entered `stage`: the "why" of a
    /// commit that waits, when no older batch is still being written.
    fn stage(&self, stage: &'static str) {
        let mut st = lock(self.state);
        st.busy = Some(stage);
        if !self.writing.is_empty() {
            return;
        }
        if let Some(b) = st.blocking.as_mut() {
            b.1 = stage;
        }
    }

    /// The back waits for its next message, in no stage.
    fn idle(&self) {
        lock(self.state).busy = None;
    }
}
