//! The host's own view of what crosses the plugin boundary. The generated
//! WIT bindings stay private (`bindings.rs`); the rest of sluice speaks these.

use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// Where a record sits in its source. Positions track progress (offsets,
/// checkpoints); event ids identify records. The two stay apart.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum Position {
    /// The topic is shared by every record of a partition: one allocation
    /// per partition, not one per record.
    Kafka {
        /// The topic's name.
        #[serde(with = "shared_str")]
        topic: Arc<str>,
        /// The partition's number.
        partition: i32,
        /// The message's offset; the commit is one past the finished prefix.
        offset: i64,
    },
    /// The path is shared by every line of a file, like the topic.
    File {
        /// The path configured (or matched by a glob), not the rotated name.
        #[serde(with = "shared_str")]
        path: Arc<str>,
        /// Rotations followed before this line's file.
        generation: u64,
        /// The line's first byte in its file.
        offset: u64,
    },
}

/// `Arc<str>` as a plain string (serde's `rc` feature would do it for every
/// crate in the build; these are the only shared strings serialized).
mod shared_str {
    use std::sync::Arc;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(s: &Arc<str>, ser: S) -> Result<S::Ok, S::Error> {
        ser.serialize_str(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(de: D) -> Result<Arc<str>, D::Error> {
        String::deserialize(de).map(Arc::from)
    }
}

impl Position {
    /// The event id derived from the position when no plugin sets one:
    /// stable across replays of the same record, distinct for distinct
    /// records of one deployment.
    /// One `format!` per record (it is on the hot path when plugins set
    /// no id); the test below holds it to `source:partition_name@offset`.
    pub fn default_event_id(&self) -> EventId {
        EventId::from(match self {
            Position::Kafka { topic, partition, offset } => format!("kafka:{topic}/{partition}@{offset}"),
            Position::File { path, generation, offset } => format!("file:{path}#{generation}@{offset}"),
        })
    }

    /// The kind of source, as contract 0.2 names it to plugins.
    pub(crate) fn source(&self) -> &'static str {
        match self {
            Position::Kafka { .. } => "kafka",
            Position::File { .. } => "file",
        }
    }

    /// The partition, as contract 0.2 names it to plugins: `topic/3`,
    /// `path#generation`. With `source` and the offset it is the default
    /// event id, so plugins and the host derive the same one.
    pub(crate) fn partition_name(&self) -> String {
        match self {
            Position::Kafka { topic, partition, .. } => format!("{topic}/{partition}"),
            Position::File { path, generation, .. } => format!("{path}#{generation}"),
        }
    }

    /// The offset as contract 0.2 carries it (s64).
    pub fn offset_i64(&self) -> i64 {
        match self {
            Position::Kafka { offset, .. } => *offset,
            Position::File { offset, .. } => i64::try_from(*offset).unwrap_or(i64::MAX),
        }
    }

    /// Whether two positions lie in one partition, cheaply: the topic and
    /// path are shared `Arc`s, so the pointer usually decides.
    pub(crate) fn same_partition(&self, other: &Position) -> bool {
        match (self, other) {
            (Position::Kafka { topic: t1, partition: p1, .. }, Position::Kafka { topic: t2, partition: p2, .. }) => {
                p1 == p2 && (Arc::ptr_eq(t1, t2) || t1 == t2)
            }
            (Position::File { path: a, generation: g1, .. }, Position::File { path: b, generation: g2, .. }) => {
                g1 == g2 && (Arc::ptr_eq(a, b) || a == b)
            }
            _ => false,
        }
    }
}

impl std::fmt::Display for Position {
    /// `topic/partition@offset`, `path#generation@offset`: for logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Position::Kafka { topic, partition, offset } => write!(f, "{topic}/{partition}@{offset}"),
            Position::File { path, generation, offset } => write!(f, "{path}#{generation}@{offset}"),
        }
    }
}

/// An event id: UTF-8 text held as shared bytes.
///
/// An id a plugin returned is a slice of the buffer its outcomes came back
/// in, as the event's body is: taking it allocates nothing, and handing it
/// on (the next stage, the plan, the sink) takes a reference. Ids made
/// here (a record's position, a test's literal) own their bytes. A slice
/// keeps its whole buffer alive, as a body does: what outlives a batch
/// keeps an id's digest or a copy of its text, never the `EventId`.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct EventId(Bytes);

impl EventId {
    /// `bytes` as an id, when they are UTF-8 (an id names a row, a log
    /// line, a dedup key: text).
    pub fn from_utf8(bytes: Bytes) -> Result<EventId, std::str::Utf8Error> {
        if simdutf8::basic::from_utf8(&bytes).is_err() {
            // The fast check says only "no"; the standard one says where.
            std::str::from_utf8(&bytes)?;
        }
        Ok(EventId(bytes))
    }

    /// The id's text.
    pub fn as_str(&self) -> &str {
        // SAFETY: every constructor checks or is given UTF-8 (`from_utf8`,
        // `From<String>`, `From<&str>`; `Default` is empty), and the bytes
        // are never changed.
        unsafe { std::str::from_utf8_unchecked(&self.0) }
    }

    /// The id's bytes, shared.
    pub fn bytes(&self) -> &Bytes {
        &self.0
    }
}

impl std::ops::Deref for EventId {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

/// Hashed as its text, so that a `str` finds it in a map (`Borrow`).
impl std::hash::Hash for EventId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl std::borrow::Borrow<str> for EventId {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl From<String> for EventId {
    fn from(s: String) -> EventId {
        EventId(Bytes::from(s))
    }
}

impl From<&str> for EventId {
    fn from(s: &str) -> EventId {
        EventId(Bytes::copy_from_slice(s.as_bytes()))
    }
}

impl From<EventId> for String {
    fn from(id: EventId) -> String {
        id.as_str().to_owned()
    }
}

/// An id compared with the text of a literal or a `String` (tests, a
/// sink's own bookkeeping).
impl PartialEq<&str> for EventId {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for EventId {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl std::fmt::Debug for EventId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for EventId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for EventId {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for EventId {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<EventId, D::Error> {
        String::deserialize(de).map(EventId::from)
    }
}

/// A record handed to a plugin.
///
/// Its bytes are [`Bytes`]: a slice of the buffer its batch was read into
/// (the framing writes a batch's lines into one allocation), or of the
/// buffer a plugin's outcomes came back in. Moving a record to the next
/// stage, keeping its payload as an event's body or handing that body to a
/// sink takes a reference, never a copy or an allocation of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The bytes a plugin parses: a line without its newline, or a
    /// Kafka message's value.
    pub payload: Bytes,
    /// The Kafka message's key.
    pub key: Option<Bytes>,
    /// The Kafka message's headers, in order.
    pub headers: Vec<(String, Vec<u8>)>,
    /// Nanoseconds since the Unix epoch (the Kafka message timestamp).
    pub source_timestamp: Option<i64>,
    /// Where it sits, for the commit and the quarantine entry.
    pub position: Position,
    /// Set by an earlier stage of the chain.
    pub event_id: Option<EventId>,
    /// Nanoseconds since the Unix epoch, set by an earlier stage.
    pub timestamp: Option<i64>,
    /// The sinks an earlier stage named for it (its route, names joined
    /// by `,`): a later stage's route replaces it, none keeps it.
    pub sinks: Option<Bytes>,
}

impl Record {
    /// A line of a file, as the file source (and `sluice plugin run`) hands
    /// it over. Pass the path as an `Arc<str>` clone to share one string
    /// among a file's lines; a `&str` is copied.
    pub fn line(payload: impl IntoPayload, path: impl Into<Arc<str>>, generation: u64, offset: u64) -> Record {
        Record {
            payload: payload.into_payload(),
            key: None,
            headers: Vec::new(),
            source_timestamp: None,
            position: Position::File { path: path.into(), generation, offset },
            event_id: None,
            timestamp: None,
            sinks: None,
        }
    }
}

/// What a record's payload is made from: owned bytes move in (a `Vec`, a
/// `String`, a slice of a batch's buffer), borrowed ones are copied.
pub trait IntoPayload {
    /// The bytes, moved where they can be.
    fn into_payload(self) -> Bytes;
}

impl IntoPayload for Bytes {
    fn into_payload(self) -> Bytes {
        self
    }
}

impl IntoPayload for Vec<u8> {
    fn into_payload(self) -> Bytes {
        self.into()
    }
}

impl IntoPayload for String {
    fn into_payload(self) -> Bytes {
        self.into()
    }
}

impl<T: AsRef<[u8]> + ?Sized> IntoPayload for &T {
    fn into_payload(self) -> Bytes {
        Bytes::copy_from_slice(self.as_ref())
    }
}

/// An event a plugin emitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The event id the dedup window keys; `None`: the record's position
    /// stands in (`custody::plan`), which repeats only on a replay.
    pub id: Option<EventId>,
    /// Nanoseconds since the Unix epoch.
    pub timestamp: Option<i64>,
    /// One JSON object, UTF-8: a slice of the buffer the plugin's outcomes
    /// came back in, or the record's payload when the plugin kept it.
    pub body: Bytes,
    /// The sinks the plugin named for it (`event_flag::SINKS`), names
    /// joined by `,`, a slice of the same buffer; `None`: the config's
    /// routes decide.
    pub sinks: Option<Bytes>,
}

impl Event {
    /// An event with no route of its own.
    pub fn new(id: Option<EventId>, timestamp: Option<i64>, body: Bytes) -> Event {
        Event { id, timestamp, body, sinks: None }
    }
}

impl Event {
    /// The body as a JSON value; a body that is not JSON (the contract
    /// forbids it, but a plugin may err) shows as a string, not an error.
    pub fn body_json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|_| String::from_utf8_lossy(&self.body).into_owned().into())
    }
}

/// What one plugin said of one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The events the record became (one for a parser, several for a
    /// splitter, none for a record that only fed state).
    Emit(Vec<Event>),
    /// One event whose body is the record's payload, unchanged (the plugin
    /// set `keep`, `wit/plugin.wit`), with the id and timestamp it set.
    /// Only a chain sees it (it moves the payload on instead of copying it
    /// back); everywhere else it is resolved into an `Emit`.
    Keep {
        /// The event id, as `Event::id`.
        id: Option<EventId>,
        /// Nanoseconds since the Unix epoch.
        timestamp: Option<i64>,
        /// The sinks named, as `Event::sinks`.
        sinks: Option<Bytes>,
    },
    /// Dropped on purpose (a filter), with the reason counted: the record
    /// is finished without delivery.
    Drop(String),
    /// The record is bad: quarantined with this reason.
    Reject(String),
}

impl Outcome {
    /// `Keep` as the `Emit` it stands for: the record's payload copied as
    /// the body, the id and timestamp the plugin set. Other outcomes are
    /// returned as they are.
    pub fn resolve(self, record: &Record) -> Outcome {
        match self {
            Outcome::Keep { id, timestamp, sinks } => {
                Outcome::Emit(vec![Event { id, timestamp, body: record.payload.clone(), sinks }])
            }
            other => other,
        }
    }
}

/// [`json_or_string`] over shared bytes: a JSON payload goes on as a
/// slice of itself, not a copy.
pub(crate) fn json_or_string_bytes(payload: &Bytes) -> Bytes {
    match json_text(payload) {
        Some(json) => payload.slice_ref(json),
        None => quoted(payload).into(),
    }
}

/// A payload delivered with no plugin: itself when it is JSON, else its
/// text as a JSON string (lossy where it is not UTF-8).
pub(crate) fn json_or_string(payload: &[u8]) -> Vec<u8> {
    match json_text(payload) {
        Some(json) => json.to_vec(),
        None => quoted(payload),
    }
}

/// The payload without the white space around it (as a row holds it) when
/// it is one JSON value in UTF-8.
fn json_text(payload: &[u8]) -> Option<&[u8]> {
    let json =
        serde_json::from_slice::<serde::de::IgnoredAny>(payload).is_ok() && simdutf8::basic::from_utf8(payload).is_ok();
    json.then(|| payload.trim_ascii())
}

/// The payload's text as a JSON string.
fn quoted(payload: &[u8]) -> Vec<u8> {
    serde_json::to_vec(&String::from_utf8_lossy(payload)).unwrap_or_else(|_| b"null".to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_text_found_by_its_text() {
        let buffer = Bytes::from_static(b"xx\xffabc");
        assert!(EventId::from_utf8(buffer.slice(0..3)).is_err(), "an id that is not UTF-8 is refused");
        let id = EventId::from_utf8(buffer.slice(3..)).expect("UTF-8");
        assert_eq!((id.as_str(), id.bytes().as_ptr()), ("abc", buffer[3..].as_ptr()), "a slice, not a copy");
        // Hashed as its text: a `str` finds it in a set.
        let set: std::collections::HashSet<EventId> = [id.clone(), EventId::from("d")].into();
        assert!(set.contains("abc") && set.contains("d") && !set.contains("ab"));
        assert_eq!(serde_json::to_string(&id).ok().as_deref(), Some("\"abc\""));
        assert_eq!(serde_json::from_str::<EventId>("\"abc\"").ok(), Some(id));
    }

    #[test]
    fn the_default_id_is_what_contract_0_2_tells_plugins() {
        for p in [
            Position::Kafka { topic: "logs".into(), partition: 3, offset: 42 },
            Position::File { path: "/var/log/a.log".into(), generation: 1, offset: 7 },
        ] {
            assert_eq!(p.default_event_id(), format!("{}:{}@{}", p.source(), p.partition_name(), p.offset_i64()));
        }
    }
}
