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

/// What became of one source record after the whole chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Emit(Vec<Event>),
    Drop { plugin: PluginId, reason: String },
    Reject { plugin: PluginId, reason: String },
}

pub struct Chain {
    stages: Vec<Isolated>,
}

enum Progress {
    Live(Vec<Record>),
    Dropped { stage: usize, reason: String },
    Rejected { stage: usize, reason: String },
}

impl Chain {
    pub fn new(stages: Vec<Isolated>) -> Chain {
        Chain { stages }
    }

    pub fn stages(&self) -> &[Isolated] {
        &self.stages
    }

    /// One verdict per record of `batch`, in order.
    pub fn run(&mut self, batch: Vec<Record>) -> Result<Vec<Verdict>, PluginError> {
        let mut progress: Vec<Progress> = batch.into_iter().map(|r| Progress::Live(vec![r])).collect();
        for (stage_idx, stage) in self.stages.iter_mut().enumerate() {
            // Flatten the live records of every source record into one batch,
            // remembering which source record each came from.
            let mut owners = Vec::new();
            let mut input = Vec::new();
            for (owner, p) in progress.iter_mut().enumerate() {
                if let Progress::Live(records) = p {
                    for r in std::mem::take(records) {
                        owners.push(owner);
                        input.push(r);
                    }
                }
            }
            let outcomes = stage.process(&input)?;
            for ((owner, record), outcome) in owners.into_iter().zip(input).zip(outcomes) {
                let p = &mut progress[owner];
                match outcome {
                    Outcome::Emit(events) if !events.is_empty() => {
                        let events = events.into_iter().map(|e| follow(&record, e));
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
    if let Progress::Live(records) = p {
        if records.is_empty() {
            *p = Progress::Dropped { stage, reason };
        }
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
