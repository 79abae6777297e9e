//! A worker's front: it gathers a batch from its lanes, runs the plugins
//! over it and asks the dedup window (steps 1–2 of the custody order),
//! then hands the batch to its back (`back.rs`).
//!
//! A batch is one list of records with a segment per partition in it.
//! The front asks each of its lanes in turn, starting after the last one
//! that gave records, for what fills the batch, without waiting; only when
//! no lane has anything does it wait, for all of them at once, until its
//! doorbell rings or `Settings::idle_poll` passes. So a busy partition
//! fills batches of its own, and a hundred slow ones share one.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::back::Back;
use super::handoff::{Handover, Joining, LaneId, Prepared, Seg, ToBack};
use super::inbox::{Finished, Inbox};
use super::lane::{Lane, Reader, lock};
use super::shared::Shared;
use crate::batch::{Pull, Pulled};
use crate::custody::ids::Scope;
use crate::custody::plan::Plan;
use crate::custody::standing::PartitionState;
use crate::masking::Masking;
use crate::pipeline::error::PipelineError;
use crate::pipeline::events::Backpressure;
use crate::pipeline::stop::RaiseOnDrop;
use crate::plugin::chain::Chain;
use crate::record::Record;
use crate::schema_registry::events::{RegistryWaitLetGo, RegistryWaiting};
use crate::schema_registry::resolver::Resolver;
use crate::store::quarantine::{PluginVersion, Quarantine};
use crate::telemetry::InternalEvent;
use crate::telemetry::stats::Counts;
use crate::verdict::{Judged, Verdicts};

/// Run a worker on this thread until its inbox is closed and its lanes
/// have ended, or it fails. Its back runs on a thread of its own.
pub(super) fn run_worker<'s>(
    shared: &Shared<'s>,
    chain: Chain,
    inbox: &Inbox<'s>,
    label: &str,
) -> Result<(), PipelineError> {
    let settings = shared.settings;
    let quarantine = Quarantine::new(
        shared.store,
        &settings.pipeline,
        chain.stages().iter().map(|s| PluginVersion::from(s.id())).collect(),
        Masking::new(&settings.mask_fields, &settings.mask_patterns)?,
    );
    let plugins = chain.stages().iter().map(|s| format!("{}@{}", s.id().name, s.id().digest.to_hex())).collect();
    let (to_back, back_rx) = mpsc::channel::<ToBack>();
    let writes_durable = AtomicU64::new(0);
    let back_failed = AtomicBool::new(false);
    let handover: Handover<'s> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        let back =
            Back::new(shared, &quarantine, plugins, inbox, &handover, Arc::new(to_back.clone()), &writes_durable);
        let back_failed = &back_failed;
        let back = std::thread::Builder::new()
            .name(format!("sluice-back-{label}"))
            .spawn_scoped(
                scope,
                crate::telemetry::labels::inherit(move || {
                    // Raised unless the back ends well (an error or a panic):
                    // the front stops taking batches.
                    let mut failed = RaiseOnDrop { flag: back_failed, armed: true };
                    let result = back.run(back_rx);
                    failed.armed = result.is_err();
                    result
                }),
            )
            .map_err(|e| PipelineError::Panicked(format!("{label}: cannot start its back thread: {e}")))?;
        // The back ends after the front's last batch, even when the front
        // panics.
        let end = EndOnDrop(&to_back);
        let front = Front {
            shared,
            chain,
            inbox,
            handover: &handover,
            lanes: Vec::new(),
            next_id: 0,
            rotation: 0,
            credits: settings.in_flight.max(1),
            swept: Instant::now(),
            closed: false,
            to_back: &to_back,
            writes_durable: &writes_durable,
            back_failed,
        }
        .run();
        drop(end);
        let back = back.join().unwrap_or_else(|_| Err(PipelineError::Panicked(label.to_string())));
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

/// A lane as the front holds it.
struct FrontLane<'s> {
    id: LaneId,
    name: Arc<str>,
    reader: Box<dyn Reader + 's>,
    stopping: Arc<dyn Fn() -> bool + Send + Sync + 's>,
    state: Arc<Mutex<PartitionState>>,
    /// Its reader said the source ended.
    ended: bool,
}

struct Front<'w, 's> {
    shared: &'w Shared<'s>,
    chain: Chain,
    inbox: &'w Inbox<'s>,
    handover: &'w Handover<'s>,
    lanes: Vec<FrontLane<'s>>,
    next_id: LaneId,
    /// Where the next gathering starts: after the last lane that gave.
    rotation: usize,
    /// Batches the front may still hand over before one is durable.
    credits: usize,
    /// When every lane was last asked, ready or not.
    swept: Instant,
    closed: bool,
    to_back: &'w Sender<ToBack>,
    writes_durable: &'w AtomicU64,
    back_failed: &'w AtomicBool,
}

impl<'s> Front<'_, 's> {
    /// Steps 1–2, batch after batch; waits for a credit first, so that at
    /// most `in_flight` batches are out.
    fn run(mut self) -> Result<(), PipelineError> {
        let settings = self.shared.settings;
        let mut waiting: Option<Instant> = None;
        let mut said = false;
        loop {
            self.open_mail();
            self.let_go();
            if self.back_failed.load(Ordering::SeqCst) {
                return Ok(());
            }
            if self.lanes.is_empty() {
                if self.closed {
                    return Ok(());
                }
                self.inbox.bell.wait(settings.idle_poll);
                continue;
            }
            // No credit: every batch the worker may have out is out.
            // Waiting here is the back-pressure: no lane is read meanwhile.
            if self.credits == 0 {
                let since = *waiting.get_or_insert_with(Instant::now);
                if !said && since.elapsed() >= Backpressure::AFTER {
                    self.backpressure(true);
                    said = true;
                }
                self.inbox.bell.wait(Duration::from_millis(50));
                continue;
            }
            waiting = None;
            if std::mem::take(&mut said) {
                self.backpressure(false);
            }
            // Long runs forget old ids as they go, busy or idle (at most
            // once a quarter bucket, for every partition together); never
            // a scan.
            self.shared.dedup.maybe_expire(self.shared.dedup.now_secs())?;
            match self.gather()? {
                Some((records, segs, scopes)) => {
                    let prepared = self.prepare(records, segs, &scopes)?;
                    self.credits -= 1;
                    if self.to_back.send(ToBack::Batch(Box::new(prepared))).is_err() {
                        return Ok(());
                    }
                }
                // Caught up: wait for all lanes at once.
                None => self.inbox.bell.wait(settings.idle_poll),
            }
        }
    }

    /// Lanes that joined, credits that came back (their memory freed
    /// here, on the thread that allocated it).
    fn open_mail(&mut self) {
        let mail = self.inbox.take();
        self.closed = mail.closed;
        self.credits += mail.credits.len();
        drop(mail.credits);
        for (lane, finished) in mail.lanes {
            self.join(lane, finished);
        }
    }

    fn join(&mut self, lane: Lane<'s>, finished: Option<Finished>) {
        let Lane { name, start, mut reader, keeper, stopping, state } = lane;
        let id = self.next_id;
        self.next_id += 1;
        reader.wake_with(&self.inbox.bell);
        let joining =
            Joining { name: name.clone(), start, keeper, stopping: stopping.clone(), state: state.clone(), finished };
        self.handover.lock().unwrap_or_else(|p| p.into_inner()).push((id, joining));
        let _ = self.to_back.send(ToBack::Lane(id));
        self.lanes.push(FrontLane { id, name, reader, stopping, state, ended: false });
    }

    /// Lanes whose source ended or that must let go leave the rotation;
    /// the back finishes each once its batches out are durable.
    fn let_go(&mut self) {
        let to_back = self.to_back;
        self.lanes.retain(|l| {
            let keep = !l.ended && !(l.stopping)();
            if !keep {
                let _ = to_back.send(ToBack::LaneEnd(l.id));
            }
            keep
        });
        if self.rotation >= self.lanes.len() {
            self.rotation = 0;
        }
    }

    fn backpressure(&self, waiting: bool) {
        for l in &self.lanes {
            Backpressure { partition: &l.name, waiting }.emit();
            lock(&l.state).backpressured = waiting;
        }
    }

    /// Up to a batch of records from the lanes, in turn; within
    /// `Settings::linger` of the first record when that is not zero.
    /// `None`: no lane has any now.
    #[allow(clippy::type_complexity)]
    fn gather(&mut self) -> Result<Option<(Vec<Pulled>, Vec<Seg>, Vec<Scope>)>, PipelineError> {
        let settings = self.shared.settings;
        let max = settings.batch_size.max(1);
        // By lane index: what it gave.
        let mut got: Vec<(usize, Pull)> = Vec::new();
        let mut total = 0;
        let mut first: Option<Instant> = None;
        loop {
            let sweep = self.swept.elapsed() >= settings.idle_poll;
            if sweep {
                self.swept = Instant::now();
            }
            let n = self.lanes.len();
            let mut last = None;
            for k in 0..n {
                if total >= max {
                    break;
                }
                let idx = (self.rotation + k) % n;
                let lane = &mut self.lanes[idx];
                if lane.ended || (lane.stopping)() || !(sweep || lane.reader.ready()) {
                    continue;
                }
                let Some(pull) = lane.reader.pull(max - total)? else {
                    lane.ended = true;
                    continue;
                };
                if let Some(behind) = pull.behind {
                    lock(&lane.state).source_behind = Some(behind);
                }
                if pull.records.is_empty() {
                    continue;
                }
                total += pull.records.len();
                first.get_or_insert(pull.received);
                last = Some(idx);
                match got.iter_mut().find(|(i, _)| *i == idx) {
                    Some((_, p)) => p.records.extend(pull.records),
                    None => got.push((idx, pull)),
                }
            }
            if let Some(last) = last {
                self.rotation = (last + 1) % n;
            }
            let Some(first) = first else { return Ok(None) };
            if total >= max || settings.linger.is_zero() {
                break;
            }
            let left = (first + settings.linger).saturating_duration_since(Instant::now());
            if left.is_zero() || self.back_failed.load(Ordering::SeqCst) {
                break;
            }
            self.inbox.bell.wait(left);
        }
        let mut segs = Vec::with_capacity(got.len());
        let mut scopes = Vec::with_capacity(got.len());
        let records = if got.len() == 1
            && let Some((idx, pull)) = got.pop()
        {
            segs.push(Seg { lane: self.lanes[idx].id, range: 0..pull.records.len(), received: pull.received });
            scopes.push(pull.scope);
            pull.records
        } else {
            let mut records = Vec::with_capacity(total);
            for (idx, pull) in got {
                let at = records.len();
                segs.push(Seg {
                    lane: self.lanes[idx].id,
                    range: at..at + pull.records.len(),
                    received: pull.received,
                });
                scopes.push(pull.scope);
                records.extend(pull.records);
            }
            records
        };
        for seg in &segs {
            let Some(lane) = self.lanes.iter().find(|l| l.id == seg.lane) else { continue };
            // The oldest batch not yet durable decides what the commit
            // waits for; this one is it when nothing else is out.
            let mut st = lock(&lane.state);
            st.out.push_back(seg.received);
            if st.blocking.is_none() {
                st.blocking = Some((records[seg.range.start].start as i64, "plugins"));
                st.oldest = Some(seg.received);
            }
        }
        Ok(Some((records, segs, scopes)))
    }

    /// Until the registry has answered for every schema id `batch` frames
    /// (`true`), or every partition of the batch must let go (`false`).
    /// A registry that cannot answer is nobody's record's fault: the batch
    /// waits (its partitions' oldest batch says `schema registry` to the
    /// watchdog, their lag grows) and asks again, 100 ms after the first
    /// failure and twice as long each time up to `retry_max`. A stop or a
    /// rebalance ends the wait like any other let-go: the batch passes no
    /// door, so its records are read again by the partitions' next owner.
    fn wait_for_schemas(&self, registry: &Resolver, batch: &[&Record], segs: &[Seg], records: &[Pulled]) -> bool {
        let mut wait = Duration::from_millis(100);
        let mut waiting = false;
        loop {
            let error = match registry.prepare(batch.iter().map(|r| &r.payload[..])) {
                Ok(()) => break,
                Err(e) => e,
            };
            if self.must_let_go(segs) {
                RegistryWaitLetGo { error: &error.to_string(), records: records.len() }.emit();
                return false;
            }
            let said = wait < registry.retry_max || !waiting;
            RegistryWaiting { error: &error.to_string(), retry_in: wait, said }.emit();
            if !waiting {
                waiting = true;
                self.blocked_by(segs, records, "schema registry");
            }
            self.sleep_unless_stopping(wait, segs);
            wait = (wait * 2).min(registry.retry_max);
        }
        if waiting {
            self.blocked_by(segs, records, "plugins");
        }
        true
    }

    /// Whether a batch of `segs` that waits must be let go undecided: its
    /// back failed, or every one of its partitions is stopping (one that
    /// goes on must not be left with a hole).
    fn must_let_go(&self, segs: &[Seg]) -> bool {
        self.back_failed.load(Ordering::SeqCst)
            || segs.iter().all(|s| self.lanes.iter().any(|l| l.id == s.lane && (l.stopping)()))
    }

    /// Sleep `wait`, waking early when the batch of `segs` must let go: a
    /// stop need not wait out a 30 s backoff.
    fn sleep_unless_stopping(&self, wait: Duration, segs: &[Seg]) {
        let until = Instant::now() + wait;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || self.must_let_go(segs) {
                return;
            }
            std::thread::sleep(left.min(Duration::from_millis(100)));
        }
    }

    /// What the oldest batch of each of `segs`' partitions waits for, as
    /// the watchdog and the status page show it.
    fn blocked_by(&self, segs: &[Seg], records: &[Pulled], what: &'static str) {
        for seg in segs {
            let Some(lane) = self.lanes.iter().find(|l| l.id == seg.lane) else { continue };
            let mut st = lock(&lane.state);
            if let Some((at, _)) = st.blocking
                && at == records[seg.range.start].start as i64
            {
                st.blocking = Some((at, what));
            }
        }
    }

    /// The plugins' verdicts and the window's answers for one batch.
    fn prepare(&mut self, records: Vec<Pulled>, segs: Vec<Seg>, scopes: &[Scope]) -> Result<Prepared, PipelineError> {
        let shared = self.shared;
        let mut counts = Counts::default();
        let mut plan = Plan::routed(records.len(), shared.sinks.fanout());
        // Refused records never reach a plugin.
        let mut to_plugins: Vec<&Record> = Vec::with_capacity(records.len());
        let mut index_of = Vec::with_capacity(records.len());
        for (i, r) in records.iter().enumerate() {
            match &r.refused {
                Some(reason) => plan.refuse(i, "source", reason.clone()),
                None => {
                    to_plugins.push(&r.record);
                    index_of.push(i);
                }
            }
        }
        // 0. The schemas the batch's framed payloads name, before any
        // plugin reads one: fetched here, where waiting is lag.
        if let Some(registry) = &shared.registry
            && !self.wait_for_schemas(registry, &to_plugins, &segs, &records)
        {
            // Let go: a plan that decides nothing leaves every record
            // owed, refused ones too (they are refused again when read).
            let plan = Plan::routed(records.len(), shared.sinks.fanout());
            let saw_writes = self.writes_durable.load(Ordering::SeqCst);
            return Ok(Prepared { records, segs, plan, saw_writes, counts, claimed: None });
        }
        // 1. Plugins, over every partition's records at once.
        let t = Instant::now();
        let Verdicts { judged, events } = self.chain.judge(&to_plugins)?;
        counts.plugin_seconds += t.elapsed().as_secs_f64();
        let mut events = events.into_iter();
        // Records come in segment order: a cursor finds each one's scope.
        let mut seg = 0;
        for (judged, i) in judged.into_iter().zip(index_of) {
            while segs[seg].range.end <= i {
                seg += 1;
            }
            match judged {
                Judged::Emit(n) => {
                    let position = &records[i].record.position;
                    plan.emit(i, events.by_ref().take(n), &scopes[seg], || position.default_event_id());
                }
                Judged::Drop { reason, .. } => plan.dropped(i, reason),
                Judged::Reject { plugin, reason } => plan.rejected(i, plugin, reason),
            }
        }
        // 2. Dedup look-up: what was durable before this moment is visible.
        // Where partitions share a scope, the batch first claims its ids:
        // one another batch in flight holds is that batch's duplicate.
        let saw_writes = self.writes_durable.load(Ordering::SeqCst);
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
        Ok(Prepared { records, segs, plan, saw_writes, counts, claimed })
    }
}
