//! Plugins in a row: the events of one stage are the records of the next.
//!
//! Custody is decided per *source record*: whatever the stages split it
//! into, a source record ends in exactly one of
//! - `Emit`: its surviving events, to be delivered;
//! - `Drop`: every event it became was dropped on purpose;
//! - `Reject`: some stage rejected it or one of its events. The whole
//!   original goes to the quarantine and none of its events is delivered, so
//!   a replay after repair re-creates them all and nothing is half-delivered.

use super::engine::Runtime;
use super::error::PluginError;
use super::inputs::{Derived, Inputs};
use super::isolate::Isolated;
use super::spec::PluginSpec;
use crate::record::{Event, EventId, Outcome, Record, json_or_string_bytes};
use crate::telemetry::tap::{Point, Sample, TAPS};
use crate::verdict::PluginId;
use crate::verdict::{Judged, Verdict, Verdicts};

/// One step of a chain. [`Isolated`] is the real one; tests use fakes.
pub trait Stage {
    /// The plugin's name and digest, as verdicts name it.
    fn id(&self) -> &PluginId;
    /// Exactly one outcome per input, in order. The first stage reads the
    /// source's records where they are; a later one reads derived events beside
    /// them. An outcome may be [`Outcome::Keep`] (the input goes on with
    /// its payload as its body). `inputs_checked`: every payload is an
    /// earlier stage's event body, checked by the output contract already.
    fn process(&mut self, batch: Inputs<'_>, inputs_checked: bool) -> Result<Vec<Outcome>, PluginError>;
}

impl Stage for Isolated {
    fn id(&self) -> &PluginId {
        Isolated::id(self)
    }

    fn process(&mut self, batch: Inputs<'_>, inputs_checked: bool) -> Result<Vec<Outcome>, PluginError> {
        Isolated::process_kept(self, batch, inputs_checked)
    }
}

/// The plugin chain: each stage's events are the next one's records, and
/// every source record ends with one verdict naming the stage that decided.
pub struct Chain<S: Stage = Isolated> {
    stages: Vec<S>,
    /// With no stages: the payloads are bodies another chain checked
    /// already (`dedup.repartition`'s back reads what its front wrote), so
    /// they go on as they are instead of being parsed a second time.
    payloads_checked: bool,
    /// The derived events of the stage being run and of the next, empty between
    /// batches: kept for their allocations (a batch's worth each).
    live: Vec<Derived>,
    next: Vec<Derived>,
}

/// Where a source record stands between stages. Its live events are not
/// here but in the chain's one list of derived events, each naming its owner.
#[derive(Clone)]
enum Standing {
    Live,
    Dropped { stage: usize, reason: String },
    Rejected { stage: usize, reason: String },
}

impl<S: Stage> Chain<S> {
    /// A chain of `stages`, run in order.
    pub fn new(stages: Vec<S>) -> Chain<S> {
        Chain { stages, payloads_checked: false, live: Vec::new(), next: Vec::new() }
    }

    /// A chain of no stages whose records' payloads were checked by the
    /// chain that wrote them (the output contract): each is its own event,
    /// its body the payload's bytes, not parsed again.
    pub(crate) fn checked_passthrough() -> Chain<S> {
        Chain { payloads_checked: true, ..Chain::new(Vec::new()) }
    }

    /// The stages, in order.
    pub fn stages(&self) -> &[S] {
        &self.stages
    }

    /// One verdict per record of `batch`, in order.
    pub fn run(&mut self, batch: Vec<Record>) -> Result<Vec<Verdict>, PluginError> {
        let refs: Vec<&Record> = batch.iter().collect();
        self.run_refs(&refs)
    }

    /// One verdict per record of `batch`, in order, without copying the
    /// source records: the first stage reads them where they are.
    pub(crate) fn run_refs(&mut self, batch: &[&Record]) -> Result<Vec<Verdict>, PluginError> {
        Ok(self.judge(batch)?.into_vec())
    }

    /// The verdicts on `batch`, flat: what the driver calls. Between the
    /// stages a batch is one list of derived events beside the source records; a
    /// body is never copied (a kept one is the payload's bytes, a new one
    /// a slice of the buffer its plugin returned).
    pub fn judge(&mut self, batch: &[&Record]) -> Result<Verdicts, PluginError> {
        if self.stages.is_empty() {
            // No plugins: each record is its own event; its payload is
            // checked here, once (JSON goes through as it is, anything else
            // as a JSON string, so that no sink writes a malformed row).
            let events = batch
                .iter()
                .map(|r| Event {
                    id: r.event_id.clone(),
                    timestamp: r.timestamp,
                    body: if self.payloads_checked { r.payload.clone() } else { json_or_string_bytes(&r.payload) },
                    sinks: r.sinks.clone(),
                })
                .collect();
            return Ok(Verdicts { judged: vec![Judged::Emit(1); batch.len()], events });
        }
        let mut standing = vec![Standing::Live; batch.len()];
        let (mut live, mut next) = (std::mem::take(&mut self.live), std::mem::take(&mut self.next));
        live.clear();
        next.clear();
        for (stage_idx, stage) in self.stages.iter_mut().enumerate() {
            if stage_idx == 0 {
                let outcomes = stage.process(Inputs::sources(batch), false)?;
                for (owner, (record, outcome)) in batch.iter().zip(outcomes).enumerate() {
                    let owner = owner as u32;
                    apply(&mut standing, &mut next, stage_idx, outcome, owner, || Derived::of(owner, record));
                }
            } else {
                let outcomes = stage.process(Inputs::derived(batch, &live), true)?;
                for (derived, outcome) in live.drain(..).zip(outcomes) {
                    apply(&mut standing, &mut next, stage_idx, outcome, derived.owner, || derived);
                }
            }
            std::mem::swap(&mut live, &mut next);
            next.clear();
            if TAPS.any() {
                let point = Point::After(stage.id().name.clone());
                let masking = crate::telemetry::redact::in_force();
                TAPS.offer(
                    &point,
                    masking.as_deref(),
                    Inputs::derived(batch, &live).iter().map(|input| Sample {
                        partition: "",
                        position: Some(input.position()),
                        id: input.event_id().map(EventId::as_str),
                        timestamp: input.timestamp(),
                        body: input.payload(),
                        reason: None,
                        masked: false,
                    }),
                );
            }
        }
        let id = |stage: usize| self.stages[stage].id().clone();
        let mut judged = Vec::with_capacity(batch.len());
        let mut events = Vec::with_capacity(live.len());
        let mut rest = live.drain(..).peekable();
        for (owner, s) in standing.into_iter().enumerate() {
            judged.push(match s {
                Standing::Live => {
                    let before = events.len();
                    while let Some(derived) = rest.next_if(|derived| derived.owner as usize == owner) {
                        events.push(Event {
                            id: derived.event_id,
                            timestamp: derived.timestamp,
                            body: derived.payload,
                            sinks: derived.sinks,
                        });
                    }
                    Judged::Emit(events.len() - before)
                }
                Standing::Dropped { stage, reason } => Judged::Drop { plugin: id(stage), reason },
                Standing::Rejected { stage, reason } => Judged::Reject { plugin: id(stage), reason },
            });
        }
        drop(rest);
        (self.live, self.next) = (live, next);
        Ok(Verdicts { judged, events })
    }
}

/// One stage's outcome for one of source record `owner`'s live events,
/// made by `input` only when something of it goes on (a first stage's
/// dropped or rejected record is never copied into a `Derived`); what goes
/// on to the next stage is pushed to `next`. Events are pushed in
/// source-record order, so a source record's own are always the last ones
/// when its outcome is applied.
fn apply(
    standing: &mut [Standing],
    next: &mut Vec<Derived>,
    stage: usize,
    outcome: Outcome,
    owner: u32,
    input: impl FnOnce() -> Derived,
) {
    let s = &mut standing[owner as usize];
    match outcome {
        // A rejected source record keeps nothing.
        Outcome::Keep { .. } | Outcome::Emit(_) if matches!(s, Standing::Rejected { .. }) => {}
        Outcome::Keep { id, timestamp, sinks } => {
            revive(s);
            next.push(kept(input(), id, timestamp, sinks));
        }
        Outcome::Emit(events) if !events.is_empty() => {
            revive(s);
            let from = input();
            next.extend(events.into_iter().map(|e| follow(&from, e)));
        }
        Outcome::Emit(_) => drop_part(s, next, owner, stage, "no events".to_string()),
        Outcome::Drop(reason) => drop_part(s, next, owner, stage, reason),
        Outcome::Reject(reason) => {
            if !matches!(s, Standing::Rejected { .. }) {
                *s = Standing::Rejected { stage, reason };
                // What its earlier siblings emitted at this stage goes too.
                while next.last().is_some_and(|l| l.owner == owner) {
                    next.pop();
                }
            }
        }
    }
}

/// An earlier sibling event was dropped: the source record is live again
/// through this one.
fn revive(s: &mut Standing) {
    if matches!(s, Standing::Dropped { .. }) {
        *s = Standing::Live;
    }
}

/// A dropped event removes itself; the source record counts as dropped only
/// when nothing of it is left at this stage (a later `Emit` keeps it live).
fn drop_part(s: &mut Standing, next: &[Derived], owner: u32, stage: usize, reason: String) {
    let has_live = next.last().is_some_and(|l| l.owner == owner);
    if matches!(s, Standing::Live) && !has_live {
        *s = Standing::Dropped { stage, reason };
    }
}

/// The event going on with its payload as the body (moved, no copy), with
/// what the stage set; what it did not set stays as it was.
fn kept(mut derived: Derived, id: Option<EventId>, timestamp: Option<i64>, sinks: Option<bytes::Bytes>) -> Derived {
    if id.is_some() {
        derived.event_id = id;
    }
    derived.timestamp = timestamp.or(derived.timestamp);
    if sinks.is_some() {
        derived.sinks = sinks;
    }
    derived
}

/// What the next stage sees for an event: the event's body, the same
/// source record (its context), and the id, timestamp and route set by
/// this stage or, failing that, by an earlier one.
fn follow(from: &Derived, event: Event) -> Derived {
    Derived {
        owner: from.owner,
        payload: event.body,
        event_id: event.id.or_else(|| from.event_id.clone()),
        timestamp: event.timestamp.or(from.timestamp),
        sinks: event.sinks.or_else(|| from.sinks.clone()),
    }
}

/// Load and initialise a chain of plugins, in order.
pub fn build_chain(runtime: &Runtime, specs: &[PluginSpec]) -> Result<Chain, PluginError> {
    let stages = specs.iter().map(|spec| Isolated::new(runtime.load(spec)?)).collect::<Result<Vec<_>, _>>()?;
    Ok(Chain::new(stages))
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use proptest::prelude::*;

    /// A stage whose outcome is a pure function of (stage, payload):
    /// 0 → emit one event, 1 → emit two (a split), 2 → drop, 3 → reject,
    /// 4 → emit none, 5 → keep (pass the record on unchanged). Emitted bodies extend the payload so that later
    /// stages see different inputs for sibling events.
    struct Fake {
        id: PluginId,
        index: u8,
        salt: u64,
    }

    fn choice(salt: u64, index: u8, payload: &[u8]) -> u64 {
        let h = blake3::hash(&[payload, &salt.to_le_bytes(), &[index]].concat());
        u64::from_le_bytes(h.as_bytes()[..8].try_into().unwrap_or([0; 8])) % 6
    }

    fn decide(salt: u64, index: u8, payload: &[u8]) -> Outcome {
        let event = |suffix: &[u8], id: Option<EventId>| Event {
            id,
            timestamp: index.is_multiple_of(2).then_some(i64::from(index)),
            body: [payload, suffix].concat().into(),
            sinks: None,
        };
        match choice(salt, index, payload) {
            0 => Outcome::Emit(vec![event(b"a", None)]),
            1 => Outcome::Emit(vec![event(b"b", Some(format!("s{index}").into())), event(b"c", None)]),
            2 => Outcome::Drop(format!("drop at {index}")),
            3 => Outcome::Reject(format!("reject at {index}")),
            4 => Outcome::Emit(Vec::new()),
            // Passed on unchanged, with a timestamp on odd stages.
            _ => Outcome::Keep { id: None, timestamp: (index % 2 == 1).then_some(100 + i64::from(index)), sinks: None },
        }
    }

    impl Stage for Fake {
        fn id(&self) -> &PluginId {
            &self.id
        }
        fn process(&mut self, batch: Inputs<'_>, inputs_checked: bool) -> Result<Vec<Outcome>, PluginError> {
            assert_eq!(inputs_checked, self.index > 0, "only the first stage reads unchecked payloads");
            Ok(batch.iter().map(|r| decide(self.salt, self.index, r.payload())).collect())
        }
    }

    /// The obvious recursive meaning of a chain, record by record: the
    /// reference the batched implementation must agree with.
    fn model(salt: u64, stages: u8, r: &Record) -> Verdict {
        let pid = |i: u8| PluginId { name: format!("fake{i}"), digest: blake3::hash(&[i]) };
        let mut live = vec![r.clone()];
        for i in 0..stages {
            let mut next = Vec::new();
            let mut reject = None;
            let mut drop_here = None;
            for rec in &live {
                // The obvious meaning of a kept record: the same record,
                // as an emit of its own payload would make it.
                match decide(salt, i, &rec.payload).resolve(rec) {
                    Outcome::Emit(events) if !events.is_empty() => {
                        next.extend(events.into_iter().map(|e| model_follow(rec, e)))
                    }
                    Outcome::Emit(_) => {
                        drop_here.get_or_insert((i, "no events".to_string()));
                    }
                    Outcome::Drop(reason) => {
                        drop_here.get_or_insert((i, reason));
                    }
                    Outcome::Reject(reason) => {
                        reject.get_or_insert((i, reason));
                    }
                    Outcome::Keep { .. } => unreachable!("resolve turns a keep into an emit"),
                }
            }
            if let Some((i, reason)) = reject {
                return Verdict::Reject { plugin: pid(i), reason };
            }
            if next.is_empty() {
                // Nothing emitted and nothing rejected: every event dropped.
                let (i, reason) = drop_here.unwrap_or((i, String::new()));
                return Verdict::Drop { plugin: pid(i), reason };
            }
            live = next;
        }
        Verdict::Emit(
            live.into_iter()
                .map(|r| Event { id: r.event_id, timestamp: r.timestamp, body: r.payload, sinks: r.sinks })
                .collect(),
        )
    }

    /// The model's own meaning of an event becoming the next stage's
    /// record: the event's fields over its record's.
    fn model_follow(from: &Record, event: Event) -> Record {
        Record {
            payload: event.body,
            event_id: event.id.or_else(|| from.event_id.clone()),
            timestamp: event.timestamp.or(from.timestamp),
            sinks: event.sinks.or_else(|| from.sinks.clone()),
            ..from.clone()
        }
    }

    /// Keeps every record, setting the timestamp to the stage's index.
    struct KeepAll(PluginId, i64);

    impl Stage for KeepAll {
        fn id(&self) -> &PluginId {
            &self.0
        }
        fn process(&mut self, batch: Inputs<'_>, _: bool) -> Result<Vec<Outcome>, PluginError> {
            Ok(batch.iter().map(|_| Outcome::Keep { id: None, timestamp: Some(self.1), sinks: None }).collect())
        }
    }

    #[test]
    fn a_body_kept_through_every_stage_is_the_source_payload_itself() {
        let pid = |i: u8| PluginId { name: format!("keep{i}"), digest: blake3::hash(&[i]) };
        let data = Bytes::from_static(br#"{"a":1}{"b":2}"#);
        let records = [Record::line(data.slice(0..7), "p", 0, 0), Record::line(data.slice(7..14), "p", 0, 7)];
        let mut chain = Chain::new(vec![KeepAll(pid(0), 1), KeepAll(pid(1), 2)]);
        let verdicts = chain.judge(&records.iter().collect::<Vec<_>>()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(verdicts.judged, [Judged::Emit(1), Judged::Emit(1)]);
        for (r, e) in records.iter().zip(&verdicts.events) {
            assert_eq!(e.body.as_ptr(), r.payload.as_ptr(), "no copy: the same bytes");
            assert_eq!((e.body.len(), e.timestamp), (r.payload.len(), Some(2)));
        }
    }

    proptest! {
        #[test]
        fn batched_chain_agrees_with_the_record_by_record_model(
            salt in any::<u64>(),
            stages in 1u8..5,
            payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..6), 0..40),
        ) {
            let records: Vec<Record> = payloads
                .iter()
                .enumerate()
                .map(|(i, p)| Record::line(p.clone(), "p", 0, i as u64))
                .collect();
            let fakes = (0..stages)
                .map(|i| Fake { id: PluginId { name: format!("fake{i}"), digest: blake3::hash(&[i]) }, index: i, salt })
                .collect();
            let mut chain = Chain::new(fakes);
            let verdicts = chain.run(records.clone()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(verdicts.len(), records.len(), "one verdict per source record");
            for (r, v) in records.iter().zip(&verdicts) {
                prop_assert_eq!(v, &model(salt, stages, r), "record {:?}", r.payload);
            }
        }
    }

    /// A route an earlier stage named rides on with its event, as its id
    /// does, until a later stage names another (or keeps it, naming one).
    #[test]
    fn a_route_rides_through_later_stages_until_one_names_another() {
        let r = Record::line(b"{}".to_vec(), "f", 0, 0);
        let route = |s: &str| Some(Bytes::copy_from_slice(s.as_bytes()));
        let source = Derived::of(0, &r);
        let first =
            follow(&source, Event { sinks: route("archive"), ..Event::new(None, None, Bytes::from_static(b"{}")) });
        assert_eq!(first.sinks, route("archive"));
        let unrouted = follow(&first, Event::new(None, None, Bytes::from_static(b"{\"x\":1}")));
        assert_eq!(unrouted.sinks, route("archive"), "a stage that names none keeps it");
        let rerouted = follow(&first, Event { sinks: route("index"), ..Event::new(None, None, Bytes::new()) });
        assert_eq!(rerouted.sinks, route("index"));
        assert_eq!(kept(first.clone(), None, None, None).sinks, route("archive"));
        assert_eq!(kept(first, None, None, route("index")).sinks, route("index"));
    }
}
