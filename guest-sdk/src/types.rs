//! What a plugin author sees: the SDK's own types, the same whichever
//! contract version the component speaks (`contract_v02.rs` packs and
//! unpacks them; `contract_v01.rs` converts them).

use std::fmt;

/// Where a record sits in its source: a partition of a kind of source, and
/// an offset in it. Source-neutral, so that a new source does not change
/// the contract or a plugin.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Position {
    /// The kind of source: `kafka`, `file`.
    pub source: String,
    /// The partition as the source names it: `topic/3`, `path#generation`.
    pub partition: String,
    /// The record's offset in its partition (a Kafka offset, a byte offset).
    pub offset: i64,
}

impl fmt::Display for Position {
    /// `source:partition@offset`: also the default event id the host
    /// derives when no plugin sets one.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}@{}", self.source, self.partition, self.offset)
    }
}

/// One record in, as the source read it or as an earlier plugin in the
/// chain emitted it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    /// The record's bytes, unmodified; not necessarily UTF-8.
    pub payload: Vec<u8>,
    /// The Kafka message key, if any.
    pub key: Option<Vec<u8>>,
    /// Kafka message headers (a name may repeat); empty for files.
    pub headers: Vec<(String, Vec<u8>)>,
    /// When the source says the record was produced, in nanoseconds since
    /// the Unix epoch (the Kafka message timestamp); none for files.
    pub source_timestamp: Option<i64>,
    /// Where the original record came from; an event of an earlier stage
    /// keeps the position of the record it came from.
    pub position: Position,
    /// The event id an earlier plugin of the chain set, if any.
    pub event_id: Option<String>,
    /// The event time an earlier plugin set, in ns since the epoch.
    pub timestamp: Option<i64>,
}

/// One event out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The event's identity, used to drop events already delivered: set it
    /// from a producer's id when the record carries one; leave it none and
    /// the host derives one from the position. Not empty, at most 256 bytes
    /// by default (the host rejects the record otherwise).
    pub id: Option<String>,
    /// The event time, in nanoseconds since the Unix epoch.
    pub timestamp: Option<i64>,
    /// One JSON object in UTF-8 (the host rejects anything else).
    pub body: Vec<u8>,
}

/// What became of one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// These events (none is the same as `Drop("no events")`).
    Emit(Vec<Event>),
    /// One event whose body is the record's payload, unchanged: what
    /// filters, validators and id or timestamp setters return. Nothing is
    /// copied, in the plugin or across the boundary, and the host does not
    /// check the body again. `id` and `timestamp` replace what an earlier
    /// stage set; `None` keeps it.
    Keep { id: Option<String>, timestamp: Option<i64> },
    /// Filtered out on purpose: counted per plugin and reason.
    Drop(String),
    /// Never valid as it is: kept in the quarantine with this reason.
    Reject(String),
}

/// Severity of a log line sent to the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}
