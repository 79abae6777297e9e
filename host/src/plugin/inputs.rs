//! What a stage of a chain reads: the source's records, or what an earlier
//! stage made of them.
//!
//! A stage after the first does not get a [`Record`] per event: an event
//! keeps its source record's context (key, headers, position, source
//! time), so a [`Derived`] event holds only what a stage changes (the
//! body, the id, the time, the route) and the index of its source record,
//! whose context is read where the source left it. Between stages a batch
//! is one list of derived events beside the borrowed source records, with
//! no context copied.

use bytes::Bytes;

use crate::record::{EventId, Position, Record};

/// One event between two stages: what the stages so far made of source
/// record `owner`.
#[derive(Debug, Clone)]
pub(crate) struct Derived {
    /// The index of its source record in the batch.
    pub owner: u32,
    /// The event's body, the next stage's payload.
    pub payload: Bytes,
    /// The id a stage set, if any.
    pub event_id: Option<EventId>,
    /// Nanoseconds since the Unix epoch.
    pub timestamp: Option<i64>,
    /// The sinks a stage named (names joined by `,`).
    pub sinks: Option<Bytes>,
}

impl Derived {
    /// Source record `owner` as it enters the chain: its payload shared,
    /// not copied.
    pub(crate) fn of(owner: u32, record: &Record) -> Derived {
        Derived {
            owner,
            payload: record.payload.clone(),
            event_id: record.event_id.clone(),
            timestamp: record.timestamp,
            sinks: record.sinks.clone(),
        }
    }
}

/// A stage's batch: the source records, and for a stage after the first
/// the derived events that index them.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    sources: &'a [&'a Record],
    derived: Option<&'a [Derived]>,
}

impl<'a> Inputs<'a> {
    /// The source's records, each its own input.
    pub fn sources(sources: &'a [&'a Record]) -> Inputs<'a> {
        Inputs { sources, derived: None }
    }

    /// Events of an earlier stage: each one's owner indexes `sources`.
    pub(crate) fn derived(sources: &'a [&'a Record], derived: &'a [Derived]) -> Inputs<'a> {
        Inputs { sources, derived: Some(derived) }
    }

    pub(crate) fn len(&self) -> usize {
        self.derived.map_or(self.sources.len(), <[Derived]>::len)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Input `i`; `None` past the end, or for an event whose owner is not a
    /// source record (which the chain never builds).
    pub(crate) fn get(&self, i: usize) -> Option<Input<'a>> {
        match self.derived {
            None => self.sources.get(i).map(|source| Input { source, derived: None }),
            Some(derived) => {
                let derived = derived.get(i)?;
                self.sources.get(derived.owner as usize).map(|source| Input { source, derived: Some(derived) })
            }
        }
    }

    /// The inputs in order (an event whose owner is not a source record,
    /// which the chain never builds, is left out).
    pub(crate) fn iter(&self) -> impl Iterator<Item = Input<'a>> + 'a {
        let this = *self;
        (0..this.len()).filter_map(move |i| this.get(i))
    }

    /// Input `i` alone, as a batch of one (a fault isolated record by
    /// record); empty past the end.
    pub(crate) fn one(&self, i: usize) -> Inputs<'a> {
        match self.derived {
            None => Inputs { sources: self.sources.get(i..i + 1).unwrap_or_default(), derived: None },
            Some(derived) => Inputs { sources: self.sources, derived: Some(derived.get(i..i + 1).unwrap_or_default()) },
        }
    }
}

/// One record as a stage sees it: its own fields from its derived event, its
/// context from its source record.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Input<'a> {
    source: &'a Record,
    derived: Option<&'a Derived>,
}

impl<'a> Input<'a> {
    pub(crate) fn payload(&self) -> &'a Bytes {
        self.derived.map_or(&self.source.payload, |d| &d.payload)
    }

    pub(crate) fn event_id(&self) -> Option<&'a EventId> {
        self.derived.map_or(self.source.event_id.as_ref(), |d| d.event_id.as_ref())
    }

    pub(crate) fn timestamp(&self) -> Option<i64> {
        self.derived.map_or(self.source.timestamp, |d| d.timestamp)
    }

    pub(crate) fn key(&self) -> Option<&'a Bytes> {
        self.source.key.as_ref()
    }

    pub(crate) fn headers(&self) -> &'a [(String, Vec<u8>)] {
        &self.source.headers
    }

    pub(crate) fn source_timestamp(&self) -> Option<i64> {
        self.source.source_timestamp
    }

    pub(crate) fn position(&self) -> &'a Position {
        &self.source.position
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(payload: &'static str, offset: u64) -> Record {
        let mut r = Record::line(Bytes::from_static(payload.as_bytes()), "f", 0, offset);
        r.key = Some(Bytes::from_static(b"k"));
        r.event_id = Some(format!("source-{offset}").into());
        r
    }

    #[test]
    fn a_derived_reads_its_own_fields_and_its_owners_context() {
        let (a, b) = (record("a", 1), record("b", 2));
        let sources = [&a, &b];
        let derived = [
            Derived { owner: 1, payload: Bytes::from_static(b"b1"), event_id: None, timestamp: Some(5), sinks: None },
            Derived {
                owner: 1,
                payload: Bytes::from_static(b"b2"),
                event_id: Some("e".into()),
                timestamp: None,
                sinks: None,
            },
            Derived::of(0, &a),
        ];
        let inputs = Inputs::derived(&sources, &derived);
        assert_eq!(inputs.len(), 3);
        type Seen<'a> = (&'a [u8], Option<&'a str>, Option<i64>, i64);
        let seen: Vec<Seen<'_>> = inputs
            .iter()
            .map(|i| (&i.payload()[..], i.event_id().map(EventId::as_str), i.timestamp(), i.position().offset_i64()))
            .collect();
        assert_eq!(
            seen,
            [(&b"b1"[..], None, Some(5), 2), (b"b2", Some("e"), None, 2), (b"a", Some("source-1"), None, 1)]
        );
        assert!(inputs.iter().all(|i| i.key().is_some_and(|k| &k[..] == b"k")));
        let one = inputs.one(1);
        assert_eq!((one.len(), one.get(0).map(|i| &i.payload()[..])), (1, Some(&b"b2"[..])));
        assert!(inputs.one(3).is_empty());
    }

    #[test]
    fn source_inputs_are_the_records_themselves() {
        let (a, b) = (record("a", 1), record("b", 2));
        let sources = [&a, &b];
        let inputs = Inputs::sources(&sources);
        assert_eq!(
            inputs.iter().map(|i| i.event_id().map(EventId::as_str)).collect::<Vec<_>>(),
            [Some("source-1"), Some("source-2")]
        );
        assert_eq!(inputs.one(1).get(0).map(|i| i.position().offset_i64()), Some(2));
        assert!(inputs.get(2).is_none());
    }
}
