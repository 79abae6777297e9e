//! Plugins in a row: the events of one stage are the records of the next.
//!
//! Custody is decided per *source record*: whatever the stages split it
//! into, a source record ends in exactly one of
//! - `Emit`: its surviving events, to be delivered;
//! - `Drop`: every event it became was dropped on purpose;
//! - `Reject`: some stage rejected it or one of its events. The whole
//!   original goes to the quarantine and none of its events is delivered, so
//!   a replay after repair re-creates them all and nothing is half-delivered.

use super::isolate::Isolated;
use super::types::{Event, Outcome, Record};
use super::{PluginError, PluginId};

/// One step of a chain. [`Isolated`] is the real one; tests use fakes.
pub trait Stage {
    fn id(&self) -> &PluginId;
    /// Exactly one outcome per record, in order. Records are borrowed: the
    /// first stage reads the source's records where they are.
    fn process(&mut self, batch: &[&Record]) -> Result<Vec<Outcome>, PluginError>;
}

impl Stage for Isolated {
    fn id(&self) -> &PluginId {
        Isolated::id(self)
    }

    fn process(&mut self, batch: &[&Record]) -> Result<Vec<Outcome>, PluginError> {
        Isolated::process_refs(self, batch)
    }
}

/// What became of one source record after the whole chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Emit(Vec<Event>),
    Drop { plugin: PluginId, reason: String },
    Reject { plugin: PluginId, reason: String },
}

pub struct Chain<S: Stage = Isolated> {
    stages: Vec<S>,
}

enum Progress {
    Live(Vec<Record>),
    Dropped { stage: usize, reason: String },
    Rejected { stage: usize, reason: String },
}

impl<S: Stage> Chain<S> {
    pub fn new(stages: Vec<S>) -> Chain<S> {
        Chain { stages }
    }

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
    pub fn run_refs(&mut self, batch: &[&Record]) -> Result<Vec<Verdict>, PluginError> {
        if self.stages.is_empty() {
            // No plugins: each record is its own event.
            let event = |r: &Record| Event { id: r.event_id.clone(), timestamp: r.timestamp, body: r.payload.clone() };
            return Ok(batch.iter().map(|r| Verdict::Emit(vec![event(r)])).collect());
        }
        let mut progress: Vec<Progress> = (0..batch.len()).map(|_| Progress::Live(Vec::new())).collect();
        for (stage_idx, stage) in self.stages.iter_mut().enumerate() {
            // Flatten the live records of every source record into one batch,
            // remembering which source record each came from.
            let mut owners = Vec::new();
            let mut owned = Vec::new();
            if stage_idx == 0 {
                owners.extend(0..batch.len());
            } else {
                for (owner, p) in progress.iter_mut().enumerate() {
                    if let Progress::Live(records) = p {
                        for r in std::mem::take(records) {
                            owners.push(owner);
                            owned.push(r);
                        }
                    }
                }
            }
            let input: Vec<&Record> = if stage_idx == 0 { batch.to_vec() } else { owned.iter().collect() };
            let outcomes = stage.process(&input)?;
            for ((owner, record), outcome) in owners.into_iter().zip(input).zip(outcomes) {
                let p = &mut progress[owner];
                match outcome {
                    Outcome::Emit(events) if !events.is_empty() => {
                        let events = events.into_iter().map(|e| follow(record, e));
                        match p {
                            Progress::Live(next) => next.extend(events),
                            // An earlier sibling event was dropped: the source
                            // record is live again through this one.
                            Progress::Dropped { .. } => *p = Progress::Live(events.collect()),
                            Progress::Rejected { .. } => {}
                        }
                    }
                    Outcome::Emit(_) => drop_part(p, stage_idx, "no events".to_string()),
                    Outcome::Drop(reason) => drop_part(p, stage_idx, reason),
                    Outcome::Reject(reason) => {
                        if !matches!(p, Progress::Rejected { .. }) {
                            *p = Progress::Rejected { stage: stage_idx, reason };
                        }
                    }
                }
            }
        }
        let id = |stage: usize| self.stages[stage].id().clone();
        Ok(progress
            .into_iter()
            .map(|p| match p {
                Progress::Live(records) => Verdict::Emit(
                    records
                        .into_iter()
                        .map(|r| Event { id: r.event_id, timestamp: r.timestamp, body: r.payload })
                        .collect(),
                ),
                Progress::Dropped { stage, reason } => Verdict::Drop { plugin: id(stage), reason },
                Progress::Rejected { stage, reason } => Verdict::Reject { plugin: id(stage), reason },
            })
            .collect())
    }
}

/// A dropped event removes itself; the source record counts as dropped only
/// when nothing of it is left (a later `Emit` keeps it live).
fn drop_part(p: &mut Progress, stage: usize, reason: String) {
    if let Progress::Live(records) = p
        && records.is_empty()
    {
        *p = Progress::Dropped { stage, reason };
    }
}

/// The record the next stage sees for an event: the event's body, with the
/// source context of the record it came from, and the id and timestamp set
/// by this stage or, failing that, by an earlier one.
fn follow(from: &Record, event: Event) -> Record {
    Record {
        payload: event.body,
        key: from.key.clone(),
        headers: from.headers.clone(),
        source_timestamp: from.source_timestamp,
        position: from.position.clone(),
        event_id: event.id.or_else(|| from.event_id.clone()),
        timestamp: event.timestamp.or(from.timestamp),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A stage whose outcome is a pure function of (stage, payload):
    /// 0 → emit one event, 1 → emit two (a split), 2 → drop, 3 → reject,
    /// 4 → emit none. Emitted bodies extend the payload so that later
    /// stages see different inputs for sibling events.
    struct Fake {
        id: PluginId,
        index: u8,
        salt: u64,
    }

    fn choice(salt: u64, index: u8, payload: &[u8]) -> u64 {
        let h = blake3::hash(&[payload, &salt.to_le_bytes(), &[index]].concat());
        u64::from_le_bytes(h.as_bytes()[..8].try_into().unwrap_or([0; 8])) % 5
    }

    fn decide(salt: u64, index: u8, r: &Record) -> Outcome {
        let event = |suffix: &[u8], id: Option<String>| Event {
            id,
            timestamp: index.is_multiple_of(2).then_some(i64::from(index)),
            body: [&r.payload[..], suffix].concat(),
        };
        match choice(salt, index, &r.payload) {
            0 => Outcome::Emit(vec![event(b"a", None)]),
            1 => Outcome::Emit(vec![event(b"b", Some(format!("s{index}"))), event(b"c", None)]),
            2 => Outcome::Drop(format!("drop at {index}")),
            3 => Outcome::Reject(format!("reject at {index}")),
            _ => Outcome::Emit(Vec::new()),
        }
    }

    impl Stage for Fake {
        fn id(&self) -> &PluginId {
            &self.id
        }
        fn process(&mut self, batch: &[&Record]) -> Result<Vec<Outcome>, PluginError> {
            Ok(batch.iter().map(|r| decide(self.salt, self.index, r)).collect())
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
                match decide(salt, i, rec) {
                    Outcome::Emit(events) if !events.is_empty() => {
                        next.extend(events.into_iter().map(|e| follow(rec, e)))
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
            live.into_iter().map(|r| Event { id: r.event_id, timestamp: r.timestamp, body: r.payload }).collect(),
        )
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
}
