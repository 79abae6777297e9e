//! The decisions inside one batch, with no I/O: which door each record
//! takes, from the plugins' verdicts, the dedup window's answers and the
//! sink's answers. The driver (`pipeline::driver`) does the I/O between
//! the steps, in this order (DESIGN, "The custody rule"):
//!
//! 1. [`Plan::verdict`]: what the plugins said; events get their ids;
//! 2. [`Plan::seen`]: the dedup window's answer per event, and repeats
//!    inside the batch; [`Plan::accepted_earlier`]: ids that batches still
//!    in flight had accepted after this batch's look-up;
//! 3. [`Plan::take_fresh`]: what goes to the sink;
//! 4. [`Plan::settle`]: the sink's answers give each record its fate, and
//!    the accepted ids to record. Only what `settle` returns may be made
//!    durable, and only after that write is durable may a position move.
//!
//! A record whose event was not decided (delivery let go: shutdown, a
//! revoked partition) has no fate: it stays owed and is read again.
//!
//! With several sinks (`route`), an event is planned once per sink its
//! route names, each with the id keyed for that sink: the window answers
//! per sink, so an event that reached A and not B before a crash goes to B
//! again and only to B. A record passes its door only when every sink it
//! was routed to gave each of its events one.

use std::ops::Range;
use std::sync::Arc;

use super::ids::{DigestSet, IdDigest, Scope, digest};
use super::offsets::Door;
use crate::delivery::Delivery;
use crate::delivery::FinalAnswer;
use crate::record::{Event, EventId};
use crate::route::Fanout;
use crate::route::config::SinkMask;
use crate::verdict::{PluginId, Verdict};

/// What became of one source record: the door it left by (delivered,
/// duplicate, dropped, quarantined; `offsets::Door` is the same door
/// without the details) and why. Not `Fate`, which is a classifier's word
/// for a sink's answer about one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Disposition {
    Delivered,
    Duplicate,
    Dropped {
        reason: String,
    },
    /// `sink`: which of several sinks refused it (its name).
    Quarantine {
        stage: &'static str,
        plugin: Option<PluginId>,
        sink: Option<Arc<str>>,
        reason: String,
    },
}

impl Disposition {
    pub(crate) fn door(&self) -> Door {
        match self {
            Disposition::Delivered => Door::Delivered,
            Disposition::Duplicate => Door::Duplicate,
            Disposition::Dropped { .. } => Door::Dropped,
            Disposition::Quarantine { .. } => Door::Quarantined,
        }
    }
}

#[derive(Debug)]
enum State {
    /// Not known to be delivered: to be sent.
    Fresh(Option<Delivery>),
    /// In the window, earlier in this batch, or accepted by an earlier batch.
    Duplicate,
}

#[derive(Debug)]
struct PlannedEvent {
    record: usize,
    digest: IdDigest,
    /// The sink it goes to, by index (0 with one sink).
    sink: u8,
    state: State,
}

/// One batch's records on their way through the doors.
#[derive(Debug)]
pub(crate) struct Plan {
    fates: Vec<Option<Disposition>>,
    events: Vec<PlannedEvent>,
    /// Per record: how many events it has (0: its fate is already known).
    event_count: Vec<u32>,
    /// The events handed to the sinks, by index into `events`, grouped by
    /// sink in the sinks' order.
    sent: Vec<usize>,
    /// Per sink given deliveries: its index and its share of `sent`.
    by_sink: Vec<(usize, Range<usize>)>,
    /// The sinks by name and their routes: what a plugin's route is
    /// checked against, and (with several) what events fan out by.
    sinks: Option<Arc<Fanout>>,
}

impl Plan {
    pub(crate) fn new(records: usize) -> Plan {
        Plan {
            fates: vec![None; records],
            events: Vec::new(),
            event_count: vec![0; records],
            sent: Vec::new(),
            by_sink: Vec::new(),
            sinks: None,
        }
    }

    /// A plan over the sinks of `fanout`: one event per sink its route
    /// names. With one sink it is [`Plan::new`].
    pub(crate) fn routed(records: usize, fanout: Option<&Arc<Fanout>>) -> Plan {
        Plan { sinks: fanout.cloned(), ..Plan::new(records) }
    }

    fn fanout(&self) -> Option<&Arc<Fanout>> {
        several(&self.sinks)
    }

    /// A record refused before any plugin saw it (an oversize line).
    pub(crate) fn refuse(&mut self, record: usize, stage: &'static str, reason: String) {
        self.fates[record] = Some(Disposition::Quarantine { stage, plugin: None, sink: None, reason });
    }

    /// The chain's verdict on `record`, as one value (tests, models).
    /// Records are given in order, each once.
    pub(crate) fn verdict(
        &mut self,
        record: usize,
        verdict: Verdict,
        scope: &Scope,
        default_id: impl FnOnce() -> EventId,
    ) {
        match verdict {
            Verdict::Emit(events) => self.emit(record, events, scope, default_id),
            Verdict::Drop { reason, .. } => self.dropped(record, reason),
            Verdict::Reject { plugin, reason } => self.rejected(record, plugin, reason),
        }
    }

    /// `record` became `events`. An event without an id of its own gets
    /// `default_id` (the record's position), suffixed `/k` when the record
    /// became several events. Records are given in order, each once.
    pub(crate) fn emit(
        &mut self,
        record: usize,
        events: impl IntoIterator<Item = Event, IntoIter: ExactSizeIterator>,
        scope: &Scope,
        default_id: impl FnOnce() -> EventId,
    ) {
        debug_assert!(self.events.last().is_none_or(|e| e.record < record), "verdicts out of record order");
        let events = events.into_iter();
        let n = events.len();
        let mut default_id = Some(default_id);
        let mut base = EventId::default();
        let mut planned = 0u32;
        let first = self.events.len();
        for (k, e) in events.enumerate() {
            let id = match e.id {
                Some(id) => id,
                None => {
                    if let Some(make) = default_id.take() {
                        base = make();
                    }
                    if n == 1 { std::mem::take(&mut base) } else { format!("{base}/{k}").into() }
                }
            };
            let d = digest(scope, &id);
            // A route a plugin named, checked against the sinks there are:
            // an unknown name quarantines the record, whole.
            let named = match (e.sinks.as_deref(), self.sinks.as_ref()) {
                (Some(names), Some(f)) => match f.mask_of(names) {
                    Ok(mask) => Some(mask),
                    Err(e) => {
                        self.events.truncate(first);
                        let reason = e.to_string();
                        self.fates[record] =
                            Some(Disposition::Quarantine { stage: "route", plugin: None, sink: None, reason });
                        self.event_count[record] = 0;
                        return;
                    }
                },
                _ => None,
            };
            // The chain checked the body: moved, not parsed again.
            let delivery = Delivery::checked(id, e.timestamp, e.body).routed(e.sinks);
            match several(&self.sinks) {
                None => {
                    self.events.push(PlannedEvent { record, digest: d, sink: 0, state: State::Fresh(Some(delivery)) })
                }
                Some(f) => planned += route(&mut self.events, f, record, d, delivery, named),
            }
        }
        self.event_count[record] = if self.fanout().is_some() { planned } else { n as u32 };
    }

    /// A plugin dropped `record` on purpose.
    pub(crate) fn dropped(&mut self, record: usize, reason: String) {
        self.fates[record] = Some(Disposition::Dropped { reason });
    }

    /// A plugin rejected `record`: it goes to the quarantine.
    pub(crate) fn rejected(&mut self, record: usize, plugin: PluginId, reason: String) {
        self.fates[record] =
            Some(Disposition::Quarantine { stage: "plugin", plugin: Some(plugin), sink: None, reason });
    }

    /// Every event's digest, in order: what the dedup window is asked.
    pub(crate) fn digests(&self) -> Vec<IdDigest> {
        self.events.iter().map(|e| e.digest).collect()
    }

    /// The window's answer per event (as [`Plan::digests`] listed them).
    /// An id twice in the batch: the second is a duplicate of the first.
    pub(crate) fn seen(&mut self, in_window: &[bool]) {
        let mut in_batch = DigestSet::with_capacity_and_hasher(self.events.len(), Default::default());
        for (e, seen) in self.events.iter_mut().zip(in_window) {
            if *seen || !in_batch.insert(e.digest) {
                e.state = State::Duplicate;
            }
        }
    }

    /// Ids that an earlier batch of the same partition had the sink accept
    /// after this batch was looked up (batches in flight): duplicates too,
    /// or the sink would get them twice.
    pub(crate) fn accepted_earlier(&mut self, accepted: impl Fn(&IdDigest) -> bool) {
        for e in &mut self.events {
            if matches!(e.state, State::Fresh(_)) && accepted(&e.digest) {
                e.state = State::Duplicate;
            }
        }
    }

    /// The deliveries for the sinks, grouped by sink ([`Plan::by_sink`]
    /// says which share is whose), each sink's in event order. Call once.
    pub(crate) fn take_fresh(&mut self) -> Vec<Delivery> {
        let mut out = Vec::new();
        let sinks = self.fanout().map_or(1, |f| f.len());
        for sink in 0..sinks {
            let from = out.len();
            for (j, e) in self.events.iter_mut().enumerate() {
                if usize::from(e.sink) == sink
                    && let State::Fresh(d) = &mut e.state
                    && let Some(d) = d.take()
                {
                    self.sent.push(j);
                    out.push(d);
                }
            }
            if out.len() > from {
                self.by_sink.push((sink, from..out.len()));
            }
        }
        out
    }

    /// Which sink each share of [`Plan::take_fresh`]'s deliveries goes to:
    /// its index and range, in order.
    pub(crate) fn by_sink(&self) -> &[(usize, Range<usize>)] {
        &self.by_sink
    }

    /// The record of each delivery [`Plan::take_fresh`] gave out, in the
    /// same order (`sluice test` shows a record's events beside it).
    pub(crate) fn sent_records(&self) -> Vec<usize> {
        self.sent.iter().map(|j| self.events[*j].record).collect()
    }

    /// The sink's final word per delivery that [`Plan::take_fresh`] gave
    /// out (`None`: let go undecided). Returns each record's fate and the
    /// ids to record as delivered: exactly those the sink accepted.
    pub(crate) fn settle(self, outcomes: Vec<Option<FinalAnswer>>) -> Settled {
        let Plan { mut fates, events, event_count, sent, sinks, .. } = self;
        let fanout = several(&sinks);
        // Per event: its fate, `None` while undecided.
        let mut event_fate: Vec<Option<Disposition>> =
            events.iter().map(|e| matches!(e.state, State::Duplicate).then_some(Disposition::Duplicate)).collect();
        let mut accepted = Vec::with_capacity(sent.len());
        let mut accepted_records = Vec::with_capacity(sent.len());
        let mut accepted_sinks = Vec::with_capacity(sent.len());
        for (j, outcome) in sent.into_iter().zip(outcomes) {
            event_fate[j] = outcome.map(|o| match o {
                FinalAnswer::Accepted => {
                    accepted.push(events[j].digest);
                    accepted_records.push(events[j].record);
                    accepted_sinks.push(events[j].sink);
                    Disposition::Delivered
                }
                // Rejected, or out of attempts: the sink's answer is the
                // reason, naming the sink when there are several.
                FinalAnswer::Rejected(reason) => {
                    let sink = fanout.as_ref().map(|f| f.name_arc(usize::from(events[j].sink)));
                    let reason = match &sink {
                        Some(name) => format!("sink {name}: {reason}"),
                        None => reason,
                    };
                    Disposition::Quarantine { stage: "sink", plugin: None, sink, reason }
                }
            });
        }
        // Sent grouped by sink; handed on in record order, which the
        // driver's split of a batch's ids by partition (the changelog's
        // sends) relies on. Stable: a record's ids keep their sinks' order.
        if fanout.is_some() {
            let mut order: Vec<usize> = (0..accepted.len()).collect();
            order.sort_by_key(|k| accepted_records[*k]);
            accepted = order.iter().map(|k| accepted[*k]).collect();
            accepted_records = order.iter().map(|k| accepted_records[*k]).collect();
            accepted_sinks = order.iter().map(|k| accepted_sinks[*k]).collect();
        }
        // A record's fate from its events': quarantined if any event was
        // (the whole original is kept; its delivered siblings are absorbed
        // by the window on replay), else delivered if any was, else
        // duplicate. An undecided event leaves its record owed.
        let mut cursor = 0;
        for (i, n) in event_count.into_iter().enumerate() {
            let evs = &event_fate[cursor..cursor + n as usize];
            cursor += n as usize;
            if n == 0 || fates[i].is_some() || evs.iter().any(Option::is_none) {
                continue;
            }
            let evs = evs.iter().flatten();
            fates[i] = Some(
                evs.clone()
                    .find(|f| matches!(f, Disposition::Quarantine { .. }))
                    .or_else(|| evs.clone().find(|f| **f == Disposition::Delivered))
                    .cloned()
                    .unwrap_or(Disposition::Duplicate),
            );
        }
        // Duplicates of records that passed a door: what the audit says
        // was absorbed. Those of an owed record are met again next time.
        let absorbed = events
            .iter()
            .filter(|e| matches!(e.state, State::Duplicate) && fates[e.record].is_some())
            .map(|e| (e.digest, e.record, e.sink))
            .collect();
        Settled { fates, accepted, accepted_records, accepted_sinks, absorbed }
    }
}

/// Several sinks: each event is planned once per sink its route names.
/// With one, every event goes to it, keyed as before sinks had names.
fn several(sinks: &Option<Arc<Fanout>>) -> Option<&Arc<Fanout>> {
    sinks.as_ref().filter(|f| !f.is_single())
}

/// A batch's decisions: what the driver makes durable.
#[derive(Debug)]
pub(crate) struct Settled {
    /// Per record; `None`: owed, read again.
    pub fates: Vec<Option<Disposition>>,
    /// Ids of the events the sinks accepted, to record in the window, in
    /// record order.
    pub accepted: Vec<IdDigest>,
    /// The record of each accepted id, in the same order (its trail).
    pub accepted_records: Vec<usize>,
    /// The sink that accepted each id, in the same order (its trail).
    pub accepted_sinks: Vec<u8>,
    /// Duplicates absorbed, with their records and sinks: each id's
    /// duplicate trail.
    pub absorbed: Vec<(IdDigest, usize, u8)>,
}

/// The event as one planned event per sink its route names (`named`, a
/// plugin's, else the config's), each with the id keyed for that sink;
/// returns how many.
fn route(
    events: &mut Vec<PlannedEvent>,
    f: &Fanout,
    record: usize,
    d: IdDigest,
    delivery: Delivery,
    named: Option<SinkMask>,
) -> u32 {
    let mask = named.unwrap_or_else(|| f.sinks_for(delivery.event()));
    let mut n = 0;
    let last = (0..f.len()).rev().find(|s| mask & (1 << s) != 0);
    let mut delivery = Some(delivery);
    for sink in 0..f.len() {
        if mask & (1 << sink) == 0 {
            continue;
        }
        // The body is shared (`Bytes`), never copied: the last sink takes it.
        let d_sink = if Some(sink) == last { delivery.take() } else { delivery.clone() };
        let Some(d_sink) = d_sink else { break };
        events.push(PlannedEvent {
            record,
            digest: salted(d, f.salt(sink)),
            sink: sink as u8,
            state: State::Fresh(Some(d_sink)),
        });
        n += 1;
    }
    n
}

/// An id's key for one sink: the digest's hash part XORed with the sink's
/// salt (a bijection, so ids stay apart; the scope, and with it a
/// partition's key range, is kept).
pub(crate) fn salted(mut d: IdDigest, salt: [u8; 8]) -> IdDigest {
    for (b, s) in d[8..16].iter_mut().zip(salt) {
        *b ^= s;
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::custody::ids::PIPELINE_SCOPE;

    fn emit(ids: &[Option<&str>]) -> Verdict {
        Verdict::Emit(ids.iter().map(|id| Event::new(id.map(EventId::from), None, b"{}".as_slice().into())).collect())
    }

    fn plugin() -> PluginId {
        PluginId { name: "p".into(), digest: blake3::hash(b"p") }
    }

    #[test]
    fn each_record_takes_one_door_from_its_events() {
        let mut plan = Plan::new(5);
        plan.verdict(0, emit(&[Some("a")]), &PIPELINE_SCOPE, || "pos-0".into());
        plan.verdict(1, emit(&[Some("a")]), &PIPELINE_SCOPE, || "pos-1".into()); // repeat in the batch
        plan.verdict(2, emit(&[None, None]), &PIPELINE_SCOPE, || "pos-2".into()); // a split
        plan.verdict(3, Verdict::Drop { plugin: plugin(), reason: "noise".into() }, &PIPELINE_SCOPE, EventId::default);
        plan.refuse(4, "source", "too long".into());
        plan.seen(&[false, false, false, false]);
        let fresh = plan.take_fresh();
        let ids: Vec<&str> = fresh.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, ["a", "pos-2/0", "pos-2/1"], "the repeat is not sent; a split's ids are suffixed");
        let settled = plan.settle(vec![
            Some(FinalAnswer::Accepted),
            Some(FinalAnswer::Accepted),
            Some(FinalAnswer::Rejected("bad row".into())),
        ]);
        assert_eq!(settled.fates[0], Some(Disposition::Delivered));
        assert_eq!(settled.fates[1], Some(Disposition::Duplicate));
        assert!(
            matches!(&settled.fates[2], Some(Disposition::Quarantine { stage: "sink", reason, .. }) if reason == "bad row"),
            "one rejected event quarantines its whole record: {:?}",
            settled.fates[2]
        );
        assert_eq!(settled.fates[3], Some(Disposition::Dropped { reason: "noise".into() }));
        assert!(matches!(&settled.fates[4], Some(Disposition::Quarantine { stage: "source", .. })));
        // Only what the sink accepted is recorded; the rejected split's
        // accepted sibling too (a replay's delivery of it is a duplicate).
        assert_eq!(settled.accepted.len(), 2);
        assert_eq!(settled.accepted_records, [0, 2], "each accepted id names its record");
        assert_eq!(settled.absorbed, [(digest(&PIPELINE_SCOPE, "a"), 1, 0)], "the repeat was absorbed");
    }

    #[test]
    fn an_undecided_event_leaves_its_record_owed_and_unrecorded() {
        let mut plan = Plan::new(2);
        plan.verdict(0, emit(&[Some("a")]), &PIPELINE_SCOPE, EventId::default);
        plan.verdict(1, emit(&[Some("b")]), &PIPELINE_SCOPE, EventId::default);
        plan.seen(&[false, true]);
        assert_eq!(plan.take_fresh().len(), 1);
        let settled = plan.settle(vec![None]);
        assert_eq!(settled.fates, vec![None, Some(Disposition::Duplicate)]);
        assert!(settled.accepted.is_empty());
    }

    #[test]
    fn ids_an_earlier_batch_in_flight_accepted_are_not_sent_again() {
        let mut plan = Plan::new(2);
        plan.verdict(0, emit(&[Some("a")]), &PIPELINE_SCOPE, EventId::default);
        plan.verdict(1, emit(&[Some("b")]), &PIPELINE_SCOPE, EventId::default);
        plan.seen(&[false, false]);
        let a = digest(&PIPELINE_SCOPE, "a");
        plan.accepted_earlier(|d| *d == a);
        let fresh = plan.take_fresh();
        assert_eq!(fresh.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(), ["b"]);
        let settled = plan.settle(vec![Some(FinalAnswer::Accepted)]);
        assert_eq!(settled.fates, vec![Some(Disposition::Duplicate), Some(Disposition::Delivered)]);
    }

    fn body_event(id: &str, body: &str) -> Event {
        Event::new(Some(id.into()), None, body.as_bytes().to_vec().into())
    }

    /// Two sinks and a route: an event goes to the sinks its route names,
    /// keyed per sink; a record passes its door only when every sink it
    /// was routed to gave one; a crash that left an id in A and not B
    /// sends it to B again and only to B.
    #[test]
    fn with_two_sinks_each_sink_has_its_own_ids_and_a_record_waits_for_both() {
        let routes = [crate::route::config::RouteConfig {
            field: Some("/level".into()),
            equals: Some("debug".into()),
            matches: None,
            exists: None,
            sinks: vec!["archive".into()],
        }];
        let fanout = Arc::new(
            Fanout::new(&["index".to_string(), "archive".to_string()], &routes).unwrap_or_else(|e| panic!("{e}")),
        );
        let plan_of = |bodies: &[(&str, &str)]| {
            let mut plan = Plan::routed(bodies.len(), Some(&fanout));
            for (i, (id, body)) in bodies.iter().enumerate() {
                plan.emit(i, [body_event(id, body)], &PIPELINE_SCOPE, EventId::default);
            }
            plan
        };
        let batch = [("a", r#"{"level":"info"}"#), ("b", r#"{"level":"debug"}"#), ("c", r#"{"level":"warn"}"#)];
        let mut plan = plan_of(&batch);
        let digests = plan.digests();
        assert_eq!(digests.len(), 5, "a and c to both sinks, b to the archive only");
        let (a_index, a_archive) = (digests[0], digests[1]);
        assert_ne!(a_index, a_archive, "one id, a key per sink");
        assert_eq!(a_index[..8], a_archive[..8], "the scope is kept");
        assert_eq!(salted(digest(&PIPELINE_SCOPE, "a"), crate::route::salt("archive")), a_archive);
        plan.seen(&[false; 5]);
        let fresh = plan.take_fresh();
        let ids: Vec<&str> = fresh.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, ["a", "c", "a", "b", "c"], "grouped by sink, each in event order");
        assert_eq!(plan.by_sink(), [(0, 0..2), (1, 2..5)]);
        // The index took a; c's answer there is not in (let go); the
        // archive took all three.
        let settled = plan.settle(vec![
            Some(FinalAnswer::Accepted),
            None,
            Some(FinalAnswer::Accepted),
            Some(FinalAnswer::Accepted),
            Some(FinalAnswer::Accepted),
        ]);
        assert_eq!(
            settled.fates,
            vec![Some(Disposition::Delivered), Some(Disposition::Delivered), None],
            "c waits for the index"
        );
        // In record order (a, a, b, c), whatever the sinks' order.
        assert_eq!(settled.accepted_records, [0, 0, 1, 2], "the driver splits ids by partition in record order");
        assert_eq!(settled.accepted_sinks, [0, 1, 1, 1]);
        // c is read again: the archive has it (a duplicate there), the
        // index gets it, and only the index.
        let recorded: DigestSet = settled.accepted.iter().copied().collect();
        let mut again = plan_of(&batch[2..]);
        let seen: Vec<bool> = again.digests().iter().map(|d| recorded.contains(d)).collect();
        assert_eq!(seen, [false, true]);
        again.seen(&seen);
        let fresh = again.take_fresh();
        assert_eq!(fresh.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(), ["c"]);
        assert_eq!(again.by_sink(), [(0, 0..1)]);
        let settled = again.settle(vec![Some(FinalAnswer::Rejected("too big".into()))]);
        assert!(
            matches!(&settled.fates[0], Some(Disposition::Quarantine { stage: "sink", reason, .. }) if reason == "sink index: too big"),
            "the entry names the sink that refused it: {:?}",
            settled.fates[0]
        );
        assert_eq!(
            settled.absorbed.iter().map(|(_, r, s)| (*r, *s)).collect::<Vec<_>>(),
            [(0, 1)],
            "absorbed by the archive"
        );
    }

    /// The driver splits a batch's accepted ids by partition walking them
    /// in record order (the changelog's sends): a fan-out, sent grouped by
    /// sink, must hand them on in record order.
    #[test]
    fn a_fan_out_hands_its_accepted_ids_on_in_record_order() {
        let fanout = Arc::new(Fanout::new(&["a".to_string(), "b".to_string()], &[]).unwrap_or_else(|e| panic!("{e}")));
        let mut plan = Plan::routed(3, Some(&fanout));
        for (i, id) in ["x", "y", "z"].iter().enumerate() {
            plan.emit(i, [body_event(id, "{}")], &PIPELINE_SCOPE, EventId::default);
        }
        plan.seen(&[false; 6]);
        let fresh = plan.take_fresh();
        assert_eq!(fresh.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(), ["x", "y", "z", "x", "y", "z"]);
        let settled = plan.settle(vec![Some(FinalAnswer::Accepted); 6]);
        assert_eq!(settled.accepted_records, [0, 0, 1, 1, 2, 2]);
        assert_eq!(settled.accepted_sinks, [0, 1, 0, 1, 0, 1]);
        let x = digest(&PIPELINE_SCOPE, "x");
        let key = |sink: &str| salted(x, crate::route::salt(sink));
        assert_eq!(settled.accepted[..2], [key("a"), key("b")], "each id with its own sink's key");
    }

    /// A plugin's route (issue 44) wins over the config's: the event goes
    /// to the sinks it names, and only there. A name no sink has sends the
    /// record, whole, to the quarantine naming it; so does one the single
    /// sink of a one-sink pipeline does not have.
    #[test]
    fn a_plugin_route_names_the_sinks_and_an_unknown_sink_quarantines_the_record() {
        let routes = [crate::route::config::RouteConfig {
            field: None,
            equals: None,
            matches: None,
            exists: None,
            sinks: vec!["index".into()],
        }];
        let two = Arc::new(
            Fanout::new(&["index".to_string(), "archive".to_string()], &routes).unwrap_or_else(|e| panic!("{e}")),
        );
        let routed = |id: &str, sinks: Option<&str>| Event {
            sinks: sinks.map(|s| bytes::Bytes::copy_from_slice(s.as_bytes())),
            ..body_event(id, "{}")
        };
        let mut plan = Plan::routed(4, Some(&two));
        plan.emit(0, [routed("a", None)], &PIPELINE_SCOPE, EventId::default);
        plan.emit(1, [routed("b", Some("archive"))], &PIPELINE_SCOPE, EventId::default);
        plan.emit(2, [routed("c", Some("archive,index"))], &PIPELINE_SCOPE, EventId::default);
        // The second event names a sink there is not: the first goes too.
        plan.emit(3, [routed("d1", Some("index")), routed("d2", Some("nowhere"))], &PIPELINE_SCOPE, EventId::default);
        plan.seen(&[false; 4]);
        let fresh = plan.take_fresh();
        assert_eq!(fresh.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(), ["a", "c", "b", "c"]);
        assert_eq!(plan.by_sink(), [(0, 0..2), (1, 2..4)], "a by the config's rule, b and c where their plugin said");
        let settled = plan.settle(vec![Some(FinalAnswer::Accepted); 4]);
        assert_eq!(
            settled.fates[..3],
            [Some(Disposition::Delivered), Some(Disposition::Delivered), Some(Disposition::Delivered)]
        );
        assert!(
            matches!(&settled.fates[3], Some(Disposition::Quarantine { stage: "route", reason, .. })
                if reason == "a plugin routed the event to sink \"nowhere\"; the sinks are index, archive"),
            "{:?}",
            settled.fates[3]
        );

        let one = Arc::new(
            Fanout::new(&[crate::route::config::DEFAULT_SINK.to_string()], &[]).unwrap_or_else(|e| panic!("{e}")),
        );
        let mut plan = Plan::routed(2, Some(&one));
        plan.emit(0, [routed("e", Some("default"))], &PIPELINE_SCOPE, EventId::default);
        plan.emit(1, [routed("f", Some("archive"))], &PIPELINE_SCOPE, EventId::default);
        plan.seen(&[false; 1]);
        assert_eq!(plan.take_fresh().iter().map(|d| d.id.as_str()).collect::<Vec<_>>(), ["e"]);
        let settled = plan.settle(vec![Some(FinalAnswer::Accepted)]);
        assert_eq!(settled.fates[0], Some(Disposition::Delivered));
        assert!(
            matches!(&settled.fates[1], Some(Disposition::Quarantine { stage: "route", .. })),
            "{:?}",
            settled.fates[1]
        );
    }
}
