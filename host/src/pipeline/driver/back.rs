//! A worker's back: it delivers a batch, builds its one durable write
//! (accepted ids, quarantine entries, what each lane's keeper adds) and
//! hands it to the group committer, then finishes what became durable
//! (steps 3–5 of the custody order).
//!
//! Each lane keeps its own offset tracker, so a batch of several
//! partitions moves each partition's position by its own contiguous
//! prefix, and each is published (`Keeper::durable`, the changelog's
//! commit) only once the write that carries it is durable.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rocksdb::WriteBatch;

use super::handoff::{Handover, Joining, LaneId, Prepared, Seg, ToBack};
use super::inbox::{Finished, Inbox, Spent};
use super::lane::{Keeper, lock};
use super::shared::{Commit, SentIds, Shared};
use crate::batch::Pulled;
use crate::custody::ids::{DigestSet, IdDigest};
use crate::custody::offsets::OffsetTracker;
use crate::custody::plan::Disposition;
use crate::custody::standing::PartitionState;
use crate::pipeline::clock::now_nanos;
use crate::pipeline::durable::{Durable, OnDurable};
use crate::pipeline::error::PipelineError;
use crate::pipeline::events::{BatchFinished, CommitBlocked, RecordsQuarantined};
use crate::sink::named::Sinks;
use crate::store::StoreError;
use crate::store::audit::Trails;
use crate::store::interned::{Context, Origin};
use crate::store::quarantine::Quarantine;
use crate::telemetry::InternalEvent;
use crate::telemetry::stats::Counts;
use crate::telemetry::tap::{Point, Sample, TAPS};
use crate::watchdog::Watched;

/// A lane as the back holds it.
struct BackLane<'s> {
    name: Arc<str>,
    keeper: Box<dyn Keeper + 's>,
    tracker: Option<OffsetTracker>,
    stopping: Arc<dyn Fn() -> bool + Send + Sync + 's>,
    state: Arc<Mutex<PartitionState>>,
    /// The changelog's latest answer for it, for the next write to
    /// remember.
    acked: Option<i64>,
    /// A batch's ids never reached the changelog (let go): no later
    /// position of this lane may leave the process.
    unlogged: bool,
    /// The front pulls no more of it.
    ending: bool,
    /// Its batches whose writes are with the committer.
    writing: usize,
    /// Told (dropped) when the lane is finished.
    _finished: Option<Finished>,
    _watched: Watched<'s>,
}

/// One partition's share of a batch whose write is with the committer.
struct WritingPart<'s> {
    lane: LaneId,
    position: u64,
    counts: Counts,
    received: Instant,
    quarantined: Vec<(String, &'static str, String)>,
    records: usize,
    /// Its ids on their way into the changelog.
    sent: Option<Box<dyn SentIds + 's>>,
}

/// A batch whose write is with the committer.
struct Writing<'s> {
    seq: u64,
    parts: Vec<WritingPart<'s>>,
    spent: Box<Spent>,
    _claimed: Option<crate::custody::claims::Claimed>,
}

pub(super) struct Back<'w, 's> {
    shared: &'w Shared<'s>,
    quarantine: &'w Quarantine<'s>,
    /// `name@digest` of each plugin of the worker's chain: what its
    /// trails name.
    plugins: Vec<String>,
    inbox: &'w Inbox<'s>,
    handover: &'w Handover<'s>,
    /// Given to the committer, which answers on it.
    to_self: Arc<dyn OnDurable>,
    writes_durable: &'w AtomicU64,
    lanes: HashMap<LaneId, BackLane<'s>>,
    /// Batches whose writes are with the committer, oldest first.
    writing: VecDeque<Writing<'s>>,
    /// Each delivered id's trail and each absorbed duplicate's, unless
    /// `dedup.audit = false`; made when the first lane joins (a replay's
    /// trails say so).
    trails: Option<Vec<Trails>>,
}

impl<'w, 's> Back<'w, 's> {
    pub(super) fn new(
        shared: &'w Shared<'s>,
        quarantine: &'w Quarantine<'s>,
        plugins: Vec<String>,
        inbox: &'w Inbox<'s>,
        handover: &'w Handover<'s>,
        to_self: Arc<dyn OnDurable>,
        writes_durable: &'w AtomicU64,
    ) -> Self {
        Back {
            shared,
            quarantine,
            plugins,
            inbox,
            handover,
            to_self,
            writes_durable,
            lanes: HashMap::new(),
            writing: VecDeque::new(),
            trails: None,
        }
    }

    pub(super) fn run(mut self, rx: Receiver<ToBack>) -> Result<(), PipelineError> {
        // Ids each of this worker's writes accepted, by write number, while
        // a batch looked up before that write is still to come.
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
                ToBack::Lane(id) => self.join(id)?,
                ToBack::LaneEnd(id) => self.lane_end(id),
                ToBack::Batch(prepared) => {
                    if one_at_a_time {
                        self.settle_writes(&rx, &mut later)?;
                    }
                    let w = self.deliver(*prepared, seq, &mut recent)?;
                    self.writing.push_back(w);
                    seq += 1;
                }
                ToBack::Durable(done, result) => self.durable(done, result)?,
            }
        }
        // Every write is answered: what lanes are left are finished.
        self.lanes.clear();
        Ok(())
    }

    /// The lane numbered `id` joined the worker.
    fn join(&mut self, id: LaneId) -> Result<(), PipelineError> {
        let joining = {
            let mut handed = self.handover.lock().unwrap_or_else(|p| p.into_inner());
            let at = handed.iter().position(|(i, _)| *i == id);
            at.map(|at| handed.swap_remove(at).1)
        };
        let Some(Joining { name, start, keeper, stopping, state, finished }) = joining else {
            return Err(PipelineError::Panicked(format!("lane {id} joined without its back half")));
        };
        let replay = keeper.keeps_quarantine();
        if self.shared.settings.audit && self.trails.is_none() {
            // One context per sink: a trail says which sink it left by.
            let sinks = self.shared.sinks;
            let trails = (0..sinks.len())
                .map(|i| {
                    let context = Context {
                        sink: sinks.describe(i),
                        plugins: self.plugins.clone(),
                        via: if replay { "replay" } else { "run" }.into(),
                    };
                    Trails::new(self.shared.store, &context)
                })
                .collect::<Result<Vec<_>, _>>()?;
            self.trails = Some(trails);
        }
        // The partition is known to the audit from its start, not from its
        // first delivery: ids restored into it from the changelog are
        // found by the scope its name gives.
        if self.shared.settings.audit && !replay {
            let kind = self.shared.settings.source_kind;
            self.shared.store.intern_origin(&Origin { kind: kind.into(), name: name.to_string() })?;
        }
        let watched = self.shared.watchdog.watch(&name, state.clone());
        self.lanes.insert(
            id,
            BackLane {
                name,
                keeper,
                tracker: start.map(OffsetTracker::new),
                stopping,
                state,
                acked: None,
                unlogged: false,
                ending: false,
                writing: 0,
                _finished: finished,
                _watched: watched,
            },
        );
        Ok(())
    }

    /// The front let the lane go: finished once its writes are.
    fn lane_end(&mut self, id: LaneId) {
        let Some(lane) = self.lanes.get_mut(&id) else { return };
        lane.ending = true;
        if lane.writing == 0 {
            self.lanes.remove(&id);
        }
    }

    fn lane(&mut self, id: LaneId) -> Result<&mut BackLane<'s>, PipelineError> {
        self.lanes.get_mut(&id).ok_or_else(|| PipelineError::Panicked(format!("a batch names lane {id}, gone")))
    }

    /// The write numbered `done` is with the store (or failed).
    fn durable(&mut self, done: u64, result: Result<(), String>) -> Result<(), PipelineError> {
        let w = self
            .writing
            .pop_front()
            .filter(|w| w.seq == done)
            .ok_or_else(|| PipelineError::Panicked("writes acknowledged out of order".into()))?;
        result.map_err(|e| PipelineError::Store(self.shared.store.failed(e)))?;
        self.finished(w)
    }

    /// Wait until every write out is durable and finished (its positions
    /// committed), keeping the front's messages that come meanwhile.
    fn settle_writes(&mut self, rx: &Receiver<ToBack>, later: &mut VecDeque<ToBack>) -> Result<(), PipelineError> {
        while !self.writing.is_empty() {
            match rx.recv() {
                Ok(ToBack::Durable(done, result)) => self.durable(done, result)?,
                Ok(other) => later.push_back(other),
                Err(_) => return Err(PipelineError::Panicked("the committer went away".into())),
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
    ) -> Result<Writing<'s>, PipelineError> {
        let Prepared { records, segs, mut plan, saw_writes, counts, claimed } = prepared;
        for seg in &segs {
            let first = records[seg.range.start].start;
            let lane = self.lane(seg.lane)?;
            let tracker = lane.tracker.get_or_insert_with(|| OffsetTracker::new(first));
            for r in &records[seg.range.clone()] {
                tracker.begin(r.start, r.next)?;
            }
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
        // A batch is let go undecided only when every partition in it must
        // let go: one that goes on must not be left with a hole.
        let stops: Vec<_> = segs.iter().filter_map(|s| self.lanes.get(&s.lane)).map(|l| l.stopping.clone()).collect();
        let stopping = || stops.iter().all(|s| s());
        // 3. Delivery of what is new; retries, backoff and the breaker
        // happen in `RetryingSink`.
        self.stage(&segs, "sink");
        let fresh = plan.take_fresh();
        if TAPS.any() {
            let masking = crate::telemetry::redact::in_force();
            let owners = plan.sent_records();
            TAPS.offer(
                &Point::BeforeSink,
                masking.as_deref(),
                fresh.iter().zip(owners).map(|(d, i)| Sample {
                    partition: self.name_of(&segs, i),
                    position: None,
                    id: Some(&d.id),
                    timestamp: d.timestamp,
                    body: d.event(),
                    reason: None,
                    masked: false,
                }),
            );
        }
        let mut sink_seconds = 0.0;
        let outcomes = if fresh.is_empty() {
            Vec::new()
        } else {
            let t = Instant::now();
            let outcomes = deliver_to_sinks(self.shared.sinks, &fresh, plan.by_sink(), &stopping);
            sink_seconds = t.elapsed().as_secs_f64();
            outcomes
        };
        let mut settled = plan.settle(outcomes);

        // 4. The doors of this batch, in one write: accepted ids first
        // (only what the sink accepted, each with its trail), then the
        // quarantine entries.
        let mut write = WriteBatch::default();
        let now = self.shared.dedup.now_secs();
        self.record_ids(&mut write, &settled, &records, now)?;
        let mut fates = std::mem::take(&mut settled.fates);
        // A reason may quote its record (a plugin's message, a backend's
        // answer): masked here, once, like the record, before it reaches
        // an entry, a replay's update or a log line.
        if !self.quarantine.masking().is_empty() {
            for (r, fate) in records.iter().zip(fates.iter_mut()) {
                if let Some(Disposition::Quarantine { reason, .. }) = fate {
                    *reason = self.quarantine.reason_for(&r.record, reason);
                }
            }
        }
        // 4a. Each partition's accepted ids go to the changelog too: its
        // next owner restores them. Its position waits for the answer
        // (`finished`).
        let mut sent = self.send_ids(&mut write, &segs, &settled, now)?;
        let replay = segs.first().and_then(|s| self.lanes.get(&s.lane)).is_some_and(|l| l.keeper.keeps_quarantine());
        if !replay {
            self.quarantine_entries(&segs, &records, &mut fates, &mut write, &stopping)?;
        }
        // 5. Offsets: each record that passed a door is decided; one whose
        // delivery was let go stays owed, and its partition's position
        // stops before it.
        let total = records.len().max(1) as f64;
        let mut parts = Vec::with_capacity(segs.len());
        for (seg, sent) in segs.iter().zip(sent.drain(..)) {
            let lane = self.lanes.get_mut(&seg.lane).ok_or_else(|| PipelineError::Panicked("a lane left".into()))?;
            let share = seg.range.len() as f64 / total;
            let mut c = Counts {
                plugin_seconds: counts.plugin_seconds * share,
                sink_seconds: sink_seconds * share,
                ..Counts::default()
            };
            let mut quarantined = Vec::new();
            let first = records[seg.range.start].start;
            let tracker = lane.tracker.get_or_insert_with(|| OffsetTracker::new(first));
            for (r, fate) in records[seg.range.clone()].iter().zip(&fates[seg.range.clone()]) {
                let Some(fate) = fate else { continue };
                tracker.finish(r.start, fate.door())?;
                c.count(fate.door());
                if let Disposition::Quarantine { stage, reason, .. } = fate {
                    quarantined.push((r.record.position.to_string(), *stage, reason.clone()));
                }
            }
            c.records += seg.range.len() as u64;
            let position = tracker.committable();
            lane.keeper.with_doors(position, &records[seg.range.clone()], &fates[seg.range.clone()], &mut write)?;
            parts.push(WritingPart {
                lane: seg.lane,
                position,
                counts: c,
                received: seg.received,
                quarantined,
                records: seg.range.len(),
                sent,
            });
        }
        self.stage(&segs, "store");
        for seg in &segs {
            if let Some(lane) = self.lanes.get_mut(&seg.lane) {
                lane.writing += 1;
            }
        }
        if !settled.accepted.is_empty() {
            recent.push_back((seq, settled.accepted.into_iter().collect()));
        }
        self.shared.committer.submit(Durable { write, seq, tell: self.to_self.clone() });
        self.idle(&segs);
        let spent = Box::new(Spent { _records: records, _deliveries: fresh });
        Ok(Writing { seq, parts, spent, _claimed: claimed })
    }

    /// Each partition's accepted ids into the changelog, one send per
    /// partition, and what the log acknowledged before into `write`.
    /// One entry per segment, `None` where nothing was sent.
    #[allow(clippy::type_complexity)]
    fn send_ids(
        &mut self,
        write: &mut WriteBatch,
        segs: &[Seg],
        settled: &crate::custody::plan::Settled,
        now: u64,
    ) -> Result<Vec<Option<Box<dyn SentIds + 's>>>, PipelineError> {
        let Some(log) = self.shared.changelog else { return Ok(segs.iter().map(|_| None).collect()) };
        let mut out = Vec::with_capacity(segs.len());
        // Accepted ids come in record order, as the segments do.
        let mut k = 0;
        for seg in segs {
            let from = k;
            while k < settled.accepted_records.len() && settled.accepted_records[k] < seg.range.end {
                k += 1;
            }
            let ids: &[IdDigest] = &settled.accepted[from..k];
            let lane = self.lanes.get_mut(&seg.lane).ok_or_else(|| PipelineError::Panicked("a lane left".into()))?;
            out.push((!ids.is_empty()).then(|| log.send(&lane.name, now, ids)));
            if let Some(acked) = lane.acked.take() {
                log.remember(&lane.name, acked, write)?;
            }
        }
        Ok(out)
    }

    /// The quarantine entries of the batch's records whose fate is
    /// quarantine, published to `quarantine.topic` first when set (a
    /// record let go before the brokers had it stays owed), then into
    /// `write`.
    fn quarantine_entries(
        &mut self,
        segs: &[Seg],
        records: &[Pulled],
        fates: &mut [Option<Disposition>],
        write: &mut WriteBatch,
        stopping: &dyn Fn() -> bool,
    ) -> Result<(), PipelineError> {
        let entries = self.entries(records, fates);
        if let Some(topic) = self.shared.quarantine_topic.filter(|_| !entries.is_empty()) {
            self.stage(segs, "quarantine");
            let listed: Vec<_> = entries.iter().map(|(_, e)| e).collect();
            if !topic.publish(&listed, stopping) {
                for (i, _) in &entries {
                    fates[*i] = None;
                }
            }
        }
        let kept: Vec<_> = entries.iter().filter(|(i, _)| fates[*i].is_some()).map(|(_, e)| e).collect();
        self.quarantine.write_all(write, &kept)?;
        if TAPS.any() && !entries.is_empty() {
            // Entries are masked already; their payloads as text.
            let payloads: Vec<Vec<u8>> = entries.iter().map(|(_, e)| e.payload.to_vec()).collect();
            TAPS.offer(
                &Point::Quarantined,
                None,
                entries.iter().zip(&payloads).map(|((i, e), body)| Sample {
                    partition: self.name_of(segs, *i),
                    position: Some(&e.position),
                    id: None,
                    timestamp: None,
                    body,
                    reason: Some(&e.reason),
                    masked: true,
                }),
            );
        }
        Ok(())
    }

    /// The name of the partition record `i` of a batch came from.
    fn name_of(&self, segs: &[Seg], i: usize) -> &str {
        segs.iter().find(|s| s.range.contains(&i)).and_then(|s| self.lanes.get(&s.lane)).map_or("", |l| &l.name)
    }

    /// The accepted ids into `write`, with their trails and those of the
    /// duplicates absorbed (one clock read per batch; an origin look-up
    /// per partition of the batch, not per record).
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
        let mut trail = |i: usize, sink: u8| match trails.get_mut(usize::from(sink)) {
            Some(t) => t.trail(store, &records[i].record.position, at),
            None => Err(store.corrupt("audit trails", format!("no sink numbered {sink}"))),
        };
        let delivered = settled
            .accepted_records
            .iter()
            .zip(&settled.accepted_sinks)
            .map(|(i, s)| trail(*i, *s))
            .collect::<Result<Vec<_>, _>>()?;
        let absorbed = settled
            .absorbed
            .iter()
            .map(|(d, i, s)| Ok((*d, trail(*i, *s)?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        dedup.record_with_trails(write, &settled.accepted, &delivered, &absorbed, now)?;
        Ok(())
    }

    /// The quarantine entry of each record whose fate is quarantine, by
    /// the record's index in the batch; nothing is written yet.
    fn entries(
        &self,
        records: &[Pulled],
        fates: &[Option<Disposition>],
    ) -> Vec<(usize, crate::store::quarantine::Entry)> {
        let now = now_nanos();
        let mut out = Vec::new();
        for (i, (r, fate)) in records.iter().zip(fates).enumerate() {
            if let Some(Disposition::Quarantine { stage, plugin, sink, reason }) = fate {
                let rejection = crate::store::quarantine::Rejection {
                    record: &r.record,
                    stage,
                    plugin: plugin.as_ref(),
                    sink: sink.as_deref(),
                    reason: reason.clone(),
                    attempts: 1,
                };
                out.push((i, self.quarantine.entry(rejection, now)));
            }
        }
        out
    }

    /// Wait for the changelog's answers on the newest batch handed over.
    fn await_changelog(&mut self) -> Result<(), PipelineError> {
        let Some(newest) = self.writing.back_mut() else { return Ok(()) };
        let waits: Vec<_> = newest.parts.iter_mut().filter_map(|p| p.sent.take().map(|s| (p.lane, s))).collect();
        for (id, sent) in waits {
            self.heard(id, sent)?;
        }
        Ok(())
    }

    /// Wait for one lane's ids to be in the changelog.
    fn heard(&mut self, id: LaneId, sent: Box<dyn SentIds + 's>) -> Result<(), PipelineError> {
        let Some(lane) = self.lanes.get_mut(&id) else { return Ok(()) };
        {
            let mut st = lock(&lane.state);
            st.busy = Some("changelog");
            if lane.writing == 0
                && let Some(b) = st.blocking.as_mut()
            {
                b.1 = "changelog";
            }
        }
        let stopping = lane.stopping.clone();
        match sent.wait(&|| stopping())? {
            Some(at) => lane.acked = Some(at),
            // Delivered and recorded here, but not in the changelog: the
            // commit stays before them, so that their next owner reads
            // them again (absorbed here, or delivered again).
            None => lane.unlogged = true,
        }
        Ok(())
    }

    /// A batch's write is durable: once the changelog has each
    /// partition's ids too, its position may leave the process.
    fn finished(&mut self, w: Writing<'s>) -> Result<(), PipelineError> {
        self.writes_durable.fetch_add(1, Ordering::SeqCst);
        let Writing { parts, spent, .. } = w;
        for mut part in parts {
            if let Some(sent) = part.sent.take() {
                self.heard(part.lane, sent)?;
            }
            let changelog = self.shared.changelog;
            let stats = self.shared.stats;
            let Some(lane) = self.lanes.get_mut(&part.lane) else { continue };
            let mut committed = false;
            if let Some(log) = changelog.filter(|_| !lane.unlogged) {
                let stopping = lane.stopping.clone();
                match log.commit(&lane.name, part.position, &|| stopping())? {
                    Commit::BySource => {}
                    Commit::Done => committed = true,
                    Commit::LetGo => lane.unlogged = true,
                }
            }
            if !lane.unlogged {
                lane.keeper.durable(part.position);
            }
            lane.writing -= 1;
            let name = &*lane.name;
            RecordsQuarantined { partition: name, records: &part.quarantined }.emit();
            let latency = part.received.elapsed().as_secs_f64();
            BatchFinished { partition: name, counts: &part.counts, latency_seconds: latency }.emit();
            if let Ok(mut s) = stats.lock() {
                s.add(name, &part.counts, part.received);
                s.latency.record(latency, part.records);
                s.quarantined(part.quarantined.iter().map(|(_, stage, reason)| (*stage, reason.as_str())));
            }
            {
                // The commit now waits at this position for the lane's
                // next batch out: its write, when one is pending; else
                // whatever stage it is in (the back says "sink" when it
                // gets it).
                let mut st = lock(&lane.state);
                if !lane.unlogged {
                    st.committable = Some(part.position as i64);
                }
                if committed {
                    st.committed = Some(part.position as i64);
                }
                st.progress = Some(Instant::now());
                st.busy = None;
                st.out.pop_front();
                let stage = if lane.writing == 0 { "plugins" } else { "store" };
                st.oldest = st.out.front().copied();
                st.blocking = st.oldest.map(|_| (part.position as i64, stage));
                CommitBlocked { partition: name, blocking: st.blocking }.emit();
            }
            if lane.ending && lane.writing == 0 {
                self.lanes.remove(&part.lane);
            }
        }
        self.inbox.credit(Some(spent));
        Ok(())
    }

    /// The batch in the back's hands entered `stage`: the "why" of a
    /// commit that waits, for each of its partitions with no older batch
    /// still being written.
    fn stage(&self, segs: &[Seg], stage: &'static str) {
        for lane in segs.iter().filter_map(|s| self.lanes.get(&s.lane)) {
            let mut st = lock(&lane.state);
            st.busy = Some(stage);
            if lane.writing > 0 {
                continue;
            }
            if let Some(b) = st.blocking.as_mut() {
                b.1 = stage;
            }
        }
    }

    /// The back waits for its next message, in no stage.
    fn idle(&self, segs: &[Seg]) {
        for lane in segs.iter().filter_map(|s| self.lanes.get(&s.lane)) {
            lock(&lane.state).busy = None;
        }
    }
}

/// Each sink's share of a batch's deliveries (`by_sink`, in order),
/// answers in the same order. Several sinks deliver at once, each on a
/// thread of its own for the batch: one that waits on its open breaker
/// holds the batch (its partitions are late), not the others' deliveries.
fn deliver_to_sinks(
    sinks: &Sinks,
    fresh: &[crate::delivery::Delivery],
    by_sink: &[(usize, std::ops::Range<usize>)],
    stopping: &(dyn Fn() -> bool + Sync),
) -> Vec<Option<crate::delivery::FinalAnswer>> {
    let undecided = |n: usize| vec![None; n];
    match by_sink {
        [(sink, range)] => match sinks.get(*sink) {
            Some(s) => s.deliver(&fresh[range.clone()], stopping),
            None => undecided(range.len()),
        },
        shares => std::thread::scope(|scope| {
            let running: Vec<_> = shares
                .iter()
                .map(|(sink, range)| {
                    let part = &fresh[range.clone()];
                    let sink = sinks.get(*sink);
                    (
                        range.len(),
                        scope.spawn(crate::telemetry::labels::inherit(move || sink.map(|s| s.deliver(part, stopping)))),
                    )
                })
                .collect();
            let mut out = Vec::with_capacity(fresh.len());
            for (n, handle) in running {
                // A sink that panicked decided nothing: its events stay owed.
                out.extend(handle.join().ok().flatten().unwrap_or_else(|| undecided(n)));
            }
            out
        }),
    }
}
