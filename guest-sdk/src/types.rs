//! What a plugin author sees: the SDK's own types, the same whichever
//! contract version the component speaks (`contract_v02.rs` packs and
//! unpacks them; `contract_v01.rs` converts them).

use std::fmt;

/// Where a record sits in its source: a partition of a kind of source, and
/// an offset in it. Source-neutral, so that a new source does not change
/// the contract or a plugin. Borrowed from the batch, as the record is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Position<'a> {
    /// The kind of source: `kafka`, `file`.
    pub source: &'a str,
    /// The partition as the source names it: `topic/3`, `path#generation`.
    pub partition: &'a str,
    /// The record's offset in its partition (a Kafka offset, a byte offset).
    pub offset: i64,
}

impl fmt::Display for Position<'_> {
    /// `source:partition@offset`: also the default event id the host
    /// derives when no plugin sets one.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}@{}", self.source, self.partition, self.offset)
    }
}

/// A record's headers (a Kafka message's; none for files), read where the
/// batch holds them. Names are UTF-8 (the SDK checked them when it
/// unpacked the batch); a name may repeat.
#[derive(Clone, Copy)]
pub struct Headers<'a>(HeaderSource<'a>);

#[derive(Clone, Copy)]
enum HeaderSource<'a> {
    /// In a 0.2 batch's header table.
    Packed(sluice_abi::RecordView<'a>),
    /// A list: a 0.1 record's, or a test's.
    Listed(&'a [(&'a str, &'a [u8])]),
}

impl<'a> Headers<'a> {
    /// Headers from a list, for tests and native callers.
    pub fn list(headers: &'a [(&'a str, &'a [u8])]) -> Headers<'a> {
        Headers(HeaderSource::Listed(headers))
    }

    #[cfg_attr(feature = "contract-0-1", allow(dead_code))]
    pub(crate) fn packed(view: sluice_abi::RecordView<'a>) -> Headers<'a> {
        Headers(HeaderSource::Packed(view))
    }

    pub fn len(&self) -> usize {
        match self.0 {
            HeaderSource::Packed(v) => v.header_count(),
            HeaderSource::Listed(l) => l.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Header `i` as (name, value).
    pub fn get(&self, i: usize) -> Option<(&'a str, &'a [u8])> {
        match self.0 {
            HeaderSource::Packed(v) => {
                let (name, value) = v.header(i).ok()?;
                // Checked at unpacking: a name that is not UTF-8 rejects the batch.
                Some((std::str::from_utf8(name).ok()?, value))
            }
            HeaderSource::Listed(l) => l.get(i).copied(),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&'a str, &'a [u8])> + 'a {
        let this = *self;
        (0..this.len()).filter_map(move |i| this.get(i))
    }
}

impl Default for Headers<'_> {
    fn default() -> Self {
        Headers::list(&[])
    }
}

impl fmt::Debug for Headers<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter().map(|(n, v)| (n, String::from_utf8_lossy(v)))).finish()
    }
}

/// One record in, as the source read it or as an earlier plugin in the
/// chain emitted it: a view of the batch's buffers, so unpacking a batch
/// copies no payload, key, header or id. It lives as long as the batch; a
/// plugin that keeps something across batches copies that part out.
#[derive(Debug, Clone, Copy, Default)]
pub struct Record<'a> {
    /// The record's bytes, unmodified; not necessarily UTF-8. Empty when
    /// the plugin takes its payloads on demand: read [`Record::bytes`].
    pub payload: &'a [u8],
    /// The Kafka message key, if any.
    pub key: Option<&'a [u8]>,
    /// Kafka message headers (a name may repeat); empty for files.
    pub headers: Headers<'a>,
    /// When the source says the record was produced, in nanoseconds since
    /// the Unix epoch (the Kafka message timestamp); none for files.
    pub source_timestamp: Option<i64>,
    /// Where the original record came from; an event of an earlier stage
    /// keeps the position of the record it came from.
    pub position: Position<'a>,
    /// The event id an earlier plugin of the chain set, if any.
    pub event_id: Option<&'a str>,
    /// The event time an earlier plugin set, in ns since the epoch.
    pub timestamp: Option<i64>,
    /// Its place in its batch when the host left its payload out
    /// (payloads on demand): the index [`Record::bytes`] asks for.
    #[cfg_attr(feature = "contract-0-1", allow(dead_code))]
    pub(crate) on_demand: Option<u32>,
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
    /// The sinks this event goes to, by their names in the config
    /// (`[[sinks]]`); empty leaves it to the config's `[[routes]]`. A name
    /// the pipeline has no sink for sends the record to the quarantine,
    /// naming it. Set it with [`Event::to_sinks`].
    pub sinks: Vec<String>,
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
