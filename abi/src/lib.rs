//! The byte layout of `sluice:plugin@0.2` (`wit/plugin.wit` documents it
//! field by field). The host packs batches and unpacks outcomes with this
//! crate, and the Rust SDK does the reverse, so the two cannot drift apart;
//! an SDK in another language implements the same layout from the WIT file
//! and proves it with the conformance kit.
//!
//! Plain Rust with no I/O and no dependencies. Reading never panics and
//! never trusts a length: every descriptor is checked against its buffer,
//! because on the host side the buffers come from a plugin that may be
//! hostile.

use std::fmt;
use std::ops::Range;

/// Bytes per record descriptor in `batch.records`.
pub const RECORD_BYTES: usize = 64;
/// Bytes per header descriptor in `batch.headers`.
pub const HEADER_BYTES: usize = 16;
/// Bytes per outcome descriptor in `outcomes.outcomes`.
pub const OUTCOME_BYTES: usize = 12;
/// Bytes per event descriptor in `outcomes.events`.
pub const EVENT_BYTES: usize = 32;

/// Flag bits of a record descriptor.
pub mod record_flag {
    pub const KEY: u32 = 1;
    pub const SOURCE_TIMESTAMP: u32 = 2;
    pub const EVENT_ID: u32 = 4;
    pub const TIMESTAMP: u32 = 8;
    /// The payload is not in the batch (its slice is `(0, 0)`): the plugin
    /// asked for payloads on demand (`helpers.payloads-on-demand`) and
    /// reads one with `helpers.payload`. Only such a plugin is sent it.
    pub const PAYLOAD_ON_DEMAND: u32 = 16;
}

/// Flag bits of an event descriptor.
pub mod event_flag {
    pub const ID: u32 = 1;
    pub const TIMESTAMP: u32 = 2;
    /// The event's body is its record's payload, unchanged: the body slice
    /// is empty (offset and length 0) and the host uses the bytes it
    /// already holds, neither copying them back nor checking them again.
    /// Additive to 0.2: plugins that never set it are read as before.
    pub const KEEP: u32 = 4;
    /// The plugin names the sinks the event goes to (its route): the
    /// descriptor's last field (at 28) is the offset in `data` of a `u32`
    /// length followed by that many bytes, sink names joined by `,`.
    /// Additive to 0.2: a plugin that never sets it is read as before, and
    /// a host older than this bit refuses it as an unknown flag.
    pub const SINKS: u32 = 8;
    pub const ALL: u32 = ID | TIMESTAMP | KEEP | SINKS;
}

/// The most bytes of sink names one event's route may hold.
pub const MAX_ROUTE_BYTES: usize = 4096;
/// The most sinks one event's route may name.
pub const MAX_ROUTE_SINKS: usize = 64;

/// Why a route's text is not a list of sink names; `None` when it is.
/// The rule the config holds names to: letters, digits, `-` and `_`.
pub fn route_error(route: &[u8]) -> Option<String> {
    if route.is_empty() {
        return Some("names no sink (drop the event instead)".into());
    }
    if route.len() > MAX_ROUTE_BYTES {
        return Some(format!("is {} bytes of sink names, over the limit of {MAX_ROUTE_BYTES}", route.len()));
    }
    let mut count = 0;
    for name in route.split(|b| *b == b',') {
        count += 1;
        if name.is_empty() || !name.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_') {
            return Some(format!(
                "names sink {:?}: a name is letters, digits, - and _, names are joined by ,",
                String::from_utf8_lossy(name)
            ));
        }
    }
    (count > MAX_ROUTE_SINKS).then(|| format!("names {count} sinks, over the limit of {MAX_ROUTE_SINKS}"))
}

/// Outcome kinds.
pub mod kind {
    pub const EMIT: u32 = 0;
    pub const DROP: u32 = 1;
    pub const REJECT: u32 = 2;
}

/// Why buffers do not hold a well-formed batch or outcome set. The message
/// names the rule broken and where, for the quarantine reason an operator
/// (or an SDK porter) reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayoutError {
    /// A table's length is not a whole number of descriptors.
    Ragged {
        table: &'static str,
        len: usize,
        unit: usize,
    },
    /// The outcome table does not hold one outcome per record.
    Count {
        records: usize,
        outcomes: usize,
    },
    /// A slice reaches past the end of `data`.
    OutOfBounds {
        what: String,
        start: u64,
        end: u64,
        data: usize,
    },
    /// A slice starts before the end of the previous one.
    Overlap {
        what: String,
        start: u32,
        previous_end: u32,
    },
    /// An emit does not start where the previous one ended, or the events
    /// are not all used.
    EventOrder {
        outcome: usize,
        first: u32,
        expected: u32,
    },
    /// Events left over after the last emit.
    UnusedEvents {
        used: usize,
        events: usize,
    },
    /// An index (header, partition) outside its table.
    Index {
        what: String,
        index: u64,
        len: usize,
    },
    UnknownKind {
        outcome: usize,
        kind: u32,
    },
    UnknownFlags {
        what: String,
        flags: u32,
    },
    /// An event that keeps its record's payload also names a body slice.
    KeptBody {
        event: usize,
        start: u32,
        len: u32,
    },
    /// The packed batch would not fit 32-bit offsets.
    TooLarge {
        bytes: usize,
    },
    /// An event's route (flag bit 3) is not a list of sink names.
    Route {
        event: usize,
        why: String,
    },
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::Ragged { table, len, unit } => {
                write!(f, "{table} holds {len} bytes, not a whole number of {unit}-byte descriptors")
            }
            LayoutError::Count { records, outcomes } => {
                write!(f, "wrong number of outcomes: {outcomes} for {records} records")
            }
            LayoutError::OutOfBounds { what, start, end, data } => {
                write!(f, "{what} spans bytes {start}..{end}, outside the data buffer of {data} bytes")
            }
            LayoutError::Overlap { what, start, previous_end } => write!(
                f,
                "{what} starts at byte {start}, before the end of the previous slice ({previous_end}): slices must be in order and must not overlap"
            ),
            LayoutError::EventOrder { outcome, first, expected } => write!(
                f,
                "outcome {outcome} emits from event {first}, expected {expected}: emits must use the events in order, each once"
            ),
            LayoutError::UnusedEvents { used, events } => {
                write!(f, "the emits use {used} events of the {events} in the event table")
            }
            LayoutError::Index { what, index, len } => write!(f, "{what} is {index}, outside a table of {len}"),
            LayoutError::UnknownKind { outcome, kind } => {
                write!(f, "outcome {outcome} has kind {kind} (0 emit, 1 drop, 2 reject)")
            }
            LayoutError::UnknownFlags { what, flags } => write!(f, "{what} has unknown flag bits {flags:#x}"),
            LayoutError::KeptBody { event, start, len } => write!(
                f,
                "event {event} keeps its record's payload (flag bit 2) but names a body slice ({start}, {len}); it must be (0, 0)"
            ),
            LayoutError::TooLarge { bytes } => write!(f, "a batch of {bytes} bytes does not fit 32-bit offsets"),
            LayoutError::Route { event, why } => write!(f, "event {event}'s route (flag bit 3) {why}"),
        }
    }
}

impl std::error::Error for LayoutError {}

fn u32_at(buf: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    if let Some(s) = buf.get(at..at + 4) {
        b.copy_from_slice(s);
    }
    u32::from_le_bytes(b)
}

fn i64_at(buf: &[u8], at: usize) -> i64 {
    let mut b = [0u8; 8];
    if let Some(s) = buf.get(at..at + 8) {
        b.copy_from_slice(s);
    }
    i64::from_le_bytes(b)
}

fn slice_of(data: &[u8], off: u32, len: u32, what: impl FnOnce() -> String) -> Result<&[u8], LayoutError> {
    let (start, end) = (u64::from(off), u64::from(off) + u64::from(len));
    data.get(off as usize..(off as usize).saturating_add(len as usize))
        .filter(|_| end <= data.len() as u64)
        .ok_or_else(|| LayoutError::OutOfBounds { what: what(), start, end, data: data.len() })
}

/// Appends `bytes` to `data` and returns its slice descriptor.
fn append(data: &mut Vec<u8>, bytes: &[u8]) -> Result<(u32, u32), LayoutError> {
    let start = data.len();
    let end = start + bytes.len();
    if end > u32::MAX as usize {
        return Err(LayoutError::TooLarge { bytes: end });
    }
    data.extend_from_slice(bytes);
    Ok((start as u32, bytes.len() as u32))
}

/// The route whose length prefix is at `at` (checked by
/// `Outcomes::check`; empty where it is not there).
fn route_at(data: &[u8], at: u32) -> &[u8] {
    let start = at as usize + 4;
    data.get(start..start.saturating_add(u32_at(data, at as usize) as usize)).unwrap_or_default()
}

/// A descriptor is assembled on the stack at fixed offsets and appended
/// in one copy: a capacity check per descriptor rather than per field,
/// which in a guest (every `Vec` push a call, every store bounds-checked)
/// was the larger part of packing.
#[inline(always)]
fn at4(d: &mut [u8], at: usize, v: u32) {
    d[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// `words` in a row from `at`.
#[inline(always)]
fn words_at(d: &mut [u8], at: usize, words: &[u32]) {
    for (k, w) in words.iter().enumerate() {
        at4(d, at + 4 * k, *w);
    }
}

#[inline(always)]
fn at8(d: &mut [u8], at: usize, v: i64) {
    d[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// One record to pack: what the 64-byte descriptor says, by reference.
#[derive(Debug, Clone, Copy, Default)]
pub struct RecordFields<'a> {
    pub payload: &'a [u8],
    /// Leave the payload out (`record_flag::PAYLOAD_ON_DEMAND`).
    pub payload_on_demand: bool,
    pub key: Option<&'a [u8]>,
    pub event_id: Option<&'a str>,
    pub source_timestamp: Option<i64>,
    pub timestamp: Option<i64>,
    pub partition: u32,
    pub offset: i64,
}

/// A batch being packed. Kept and cleared between batches, so that packing
/// allocates nothing once the buffers have grown to the batch size.
#[derive(Debug, Default, Clone)]
pub struct BatchBuf {
    pub records: Vec<u8>,
    pub headers: Vec<u8>,
    pub data: Vec<u8>,
}

impl BatchBuf {
    pub fn clear(&mut self) {
        self.records.clear();
        self.headers.clear();
        self.data.clear();
    }

    pub fn len(&self) -> usize {
        self.records.len() / RECORD_BYTES
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Append one record and its headers (name, value).
    pub fn push<'h>(
        &mut self,
        r: &RecordFields<'_>,
        headers: impl IntoIterator<Item = (&'h [u8], &'h [u8])>,
    ) -> Result<(), LayoutError> {
        let mut flags = 0;
        let payload = if r.payload_on_demand {
            flags |= record_flag::PAYLOAD_ON_DEMAND;
            (0, 0)
        } else {
            append(&mut self.data, r.payload)?
        };
        let key = match r.key {
            Some(k) => {
                flags |= record_flag::KEY;
                append(&mut self.data, k)?
            }
            None => (0, 0),
        };
        let first_header = (self.headers.len() / HEADER_BYTES) as u32;
        let mut header_count = 0u32;
        for (name, value) in headers {
            let n = append(&mut self.data, name)?;
            let v = append(&mut self.data, value)?;
            let mut d = [0u8; HEADER_BYTES];
            words_at(&mut d, 0, &[n.0, n.1, v.0, v.1]);
            self.headers.extend_from_slice(&d);
            header_count += 1;
        }
        let event_id = match r.event_id {
            Some(id) => {
                flags |= record_flag::EVENT_ID;
                append(&mut self.data, id.as_bytes())?
            }
            None => (0, 0),
        };
        if r.source_timestamp.is_some() {
            flags |= record_flag::SOURCE_TIMESTAMP;
        }
        if r.timestamp.is_some() {
            flags |= record_flag::TIMESTAMP;
        }
        let mut d = [0u8; RECORD_BYTES];
        words_at(&mut d, 0, &[payload.0, payload.1, key.0, key.1, first_header, header_count, event_id.0, event_id.1]);
        at8(&mut d, 32, r.source_timestamp.unwrap_or(0));
        at8(&mut d, 40, r.timestamp.unwrap_or(0));
        at8(&mut d, 48, r.offset);
        at4(&mut d, 56, r.partition);
        at4(&mut d, 60, flags);
        self.records.extend_from_slice(&d);
        Ok(())
    }
}

/// A packed batch, read in place.
#[derive(Debug, Clone, Copy)]
pub struct BatchView<'a> {
    records: &'a [u8],
    headers: &'a [u8],
    data: &'a [u8],
    partitions: usize,
}

/// One record of a [`BatchView`], borrowed from its buffers.
#[derive(Debug, Clone, Copy)]
pub struct RecordView<'a> {
    /// Empty when `payload_on_demand`.
    pub payload: &'a [u8],
    /// The payload was left out: ask the host for it.
    pub payload_on_demand: bool,
    pub key: Option<&'a [u8]>,
    /// UTF-8 by contract; checked by whoever turns it into a string.
    pub event_id: Option<&'a [u8]>,
    pub source_timestamp: Option<i64>,
    pub timestamp: Option<i64>,
    pub partition: u32,
    pub offset: i64,
    headers: &'a [u8],
    data: &'a [u8],
    index: usize,
}

impl<'a> BatchView<'a> {
    pub fn new(
        records: &'a [u8],
        headers: &'a [u8],
        data: &'a [u8],
        partitions: usize,
    ) -> Result<BatchView<'a>, LayoutError> {
        if !records.len().is_multiple_of(RECORD_BYTES) {
            return Err(LayoutError::Ragged { table: "batch.records", len: records.len(), unit: RECORD_BYTES });
        }
        if !headers.len().is_multiple_of(HEADER_BYTES) {
            return Err(LayoutError::Ragged { table: "batch.headers", len: headers.len(), unit: HEADER_BYTES });
        }
        Ok(BatchView { records, headers, data, partitions })
    }

    pub fn len(&self) -> usize {
        self.records.len() / RECORD_BYTES
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Record `i`, every slice and index checked.
    pub fn record(&self, i: usize) -> Result<RecordView<'a>, LayoutError> {
        let d = self.records.get(i * RECORD_BYTES..(i + 1) * RECORD_BYTES).ok_or(LayoutError::Index {
            what: "record".into(),
            index: i as u64,
            len: self.len(),
        })?;
        let w = |at: usize| u32_at(d, at);
        let flags = w(60);
        let what = |field: &'static str| move || format!("record {i} {field}");
        let payload = slice_of(self.data, w(0), w(4), what("payload"))?;
        let key = (flags & record_flag::KEY != 0).then(|| slice_of(self.data, w(8), w(12), what("key"))).transpose()?;
        let event_id = (flags & record_flag::EVENT_ID != 0)
            .then(|| slice_of(self.data, w(24), w(28), what("event id")))
            .transpose()?;
        let (first, count) = (w(16) as usize, w(20) as usize);
        let headers = self.headers.get(first * HEADER_BYTES..(first + count) * HEADER_BYTES).ok_or_else(|| {
            LayoutError::Index {
                what: format!("record {i} headers end"),
                index: (first + count) as u64,
                len: self.headers.len() / HEADER_BYTES,
            }
        })?;
        let partition = w(56);
        if partition as usize >= self.partitions {
            return Err(LayoutError::Index {
                what: format!("record {i} partition"),
                index: partition.into(),
                len: self.partitions,
            });
        }
        Ok(RecordView {
            payload,
            payload_on_demand: flags & record_flag::PAYLOAD_ON_DEMAND != 0,
            key,
            event_id,
            source_timestamp: (flags & record_flag::SOURCE_TIMESTAMP != 0).then(|| i64_at(d, 32)),
            timestamp: (flags & record_flag::TIMESTAMP != 0).then(|| i64_at(d, 40)),
            partition,
            offset: i64_at(d, 48),
            headers,
            data: self.data,
            index: i,
        })
    }
}

impl<'a> RecordView<'a> {
    pub fn header_count(&self) -> usize {
        self.headers.len() / HEADER_BYTES
    }

    /// Header `h` of this record as (name, value).
    pub fn header(&self, h: usize) -> Result<(&'a [u8], &'a [u8]), LayoutError> {
        let d = self.headers.get(h * HEADER_BYTES..(h + 1) * HEADER_BYTES).ok_or(LayoutError::Index {
            what: format!("record {} header", self.index),
            index: h as u64,
            len: self.header_count(),
        })?;
        let i = self.index;
        let name = slice_of(self.data, u32_at(d, 0), u32_at(d, 4), || format!("record {i} header {h} name"))?;
        let value = slice_of(self.data, u32_at(d, 8), u32_at(d, 12), || format!("record {i} header {h} value"))?;
        Ok((name, value))
    }
}

/// One event to pack.
#[derive(Debug, Clone, Copy, Default)]
pub struct EventFields<'a> {
    pub id: Option<&'a [u8]>,
    pub timestamp: Option<i64>,
    pub body: &'a [u8],
    /// The body is the record's payload (`event_flag::KEEP`): `body` is
    /// not written.
    pub keep: bool,
    /// The sinks the event goes to, names joined by `,`
    /// (`event_flag::SINKS`); `None` leaves it to the config's routes.
    pub sinks: Option<&'a [u8]>,
}

/// Outcomes being packed, in record order.
#[derive(Debug, Default, Clone)]
pub struct OutcomeBuf {
    pub outcomes: Vec<u8>,
    pub events: Vec<u8>,
    pub data: Vec<u8>,
}

impl OutcomeBuf {
    pub fn with_capacity(records: usize, data: usize) -> OutcomeBuf {
        OutcomeBuf {
            outcomes: Vec::with_capacity(records * OUTCOME_BYTES),
            events: Vec::with_capacity(records * EVENT_BYTES),
            data: Vec::with_capacity(data),
        }
    }

    pub fn len(&self) -> usize {
        self.outcomes.len() / OUTCOME_BYTES
    }

    pub fn is_empty(&self) -> bool {
        self.outcomes.is_empty()
    }

    pub fn emit<'e>(&mut self, events: impl IntoIterator<Item = EventFields<'e>>) -> Result<(), LayoutError> {
        let first = (self.events.len() / EVENT_BYTES) as u32;
        let mut count = 0u32;
        for e in events {
            let mut flags = 0;
            let id = match e.id {
                Some(id) => {
                    flags |= event_flag::ID;
                    append(&mut self.data, id)?
                }
                None => (0, 0),
            };
            let body = if e.keep {
                flags |= event_flag::KEEP;
                (0, 0)
            } else {
                append(&mut self.data, e.body)?
            };
            if e.timestamp.is_some() {
                flags |= event_flag::TIMESTAMP;
            }
            let route = match e.sinks {
                Some(names) => {
                    flags |= event_flag::SINKS;
                    let len = u32::try_from(names.len()).map_err(|_| LayoutError::TooLarge { bytes: names.len() })?;
                    let (at, _) = append(&mut self.data, &len.to_le_bytes())?;
                    append(&mut self.data, names)?;
                    at
                }
                None => 0,
            };
            let mut d = [0u8; EVENT_BYTES];
            words_at(&mut d, 0, &[id.0, id.1, body.0, body.1]);
            at8(&mut d, 16, e.timestamp.unwrap_or(0));
            words_at(&mut d, 24, &[flags, route]);
            self.events.extend_from_slice(&d);
            count += 1;
        }
        self.outcome(kind::EMIT, first, count);
        Ok(())
    }

    pub fn drop(&mut self, reason: &[u8]) -> Result<(), LayoutError> {
        self.reason(kind::DROP, reason)
    }

    pub fn reject(&mut self, reason: &[u8]) -> Result<(), LayoutError> {
        self.reason(kind::REJECT, reason)
    }

    fn reason(&mut self, kind: u32, reason: &[u8]) -> Result<(), LayoutError> {
        let (off, len) = append(&mut self.data, reason)?;
        self.outcome(kind, off, len);
        Ok(())
    }

    fn outcome(&mut self, kind: u32, a: u32, b: u32) {
        let mut d = [0u8; OUTCOME_BYTES];
        words_at(&mut d, 0, &[kind, a, b]);
        self.outcomes.extend_from_slice(&d);
    }
}

/// One outcome of a checked [`Outcomes`].
#[derive(Debug, Clone)]
pub enum OutcomeView<'a> {
    Emit(Events<'a>),
    Drop(&'a [u8]),
    Reject(&'a [u8]),
}

/// One event of an emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventView<'a> {
    pub id: Option<&'a [u8]>,
    pub timestamp: Option<i64>,
    /// Empty when `keep`.
    pub body: &'a [u8],
    /// The body is the record's payload (`event_flag::KEEP`).
    pub keep: bool,
    /// The sinks the plugin named, joined by `,` (`event_flag::SINKS`).
    pub sinks: Option<&'a [u8]>,
}

/// The events of one emit, in order.
#[derive(Debug, Clone)]
pub struct Events<'a> {
    table: &'a [u8],
    data: &'a [u8],
    range: Range<usize>,
}

impl<'a> Events<'a> {
    pub fn len(&self) -> usize {
        self.range.len()
    }

    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }
}

impl<'a> Iterator for Events<'a> {
    type Item = EventView<'a>;

    fn next(&mut self) -> Option<EventView<'a>> {
        let e = self.range.next()?;
        let d = self.table.get(e * EVENT_BYTES..(e + 1) * EVENT_BYTES)?;
        let flags = u32_at(d, 24);
        // Checked by `Outcomes::check`: these slices are inside `data`.
        let get = |off: usize| self.data.get(u32_at(d, off) as usize..(u32_at(d, off) + u32_at(d, off + 4)) as usize);
        Some(EventView {
            id: if flags & event_flag::ID != 0 { Some(get(0).unwrap_or_default()) } else { None },
            timestamp: (flags & event_flag::TIMESTAMP != 0).then(|| i64_at(d, 16)),
            body: if flags & event_flag::KEEP != 0 { &[] } else { get(8).unwrap_or_default() },
            keep: flags & event_flag::KEEP != 0,
            sinks: if flags & event_flag::SINKS != 0 { Some(route_at(self.data, u32_at(d, 28))) } else { None },
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.range.size_hint()
    }
}

/// Outcomes checked against every rule of the contract: safe to read.
#[derive(Debug, Clone, Copy)]
pub struct Outcomes<'a> {
    outcomes: &'a [u8],
    events: &'a [u8],
    data: &'a [u8],
}

impl<'a> Outcomes<'a> {
    /// Check the three buffers a plugin returned for a batch of `records`.
    pub fn check(
        outcomes: &'a [u8],
        events: &'a [u8],
        data: &'a [u8],
        records: usize,
    ) -> Result<Outcomes<'a>, LayoutError> {
        if !outcomes.len().is_multiple_of(OUTCOME_BYTES) {
            return Err(LayoutError::Ragged { table: "outcomes.outcomes", len: outcomes.len(), unit: OUTCOME_BYTES });
        }
        if !events.len().is_multiple_of(EVENT_BYTES) {
            return Err(LayoutError::Ragged { table: "outcomes.events", len: events.len(), unit: EVENT_BYTES });
        }
        if outcomes.len() / OUTCOME_BYTES != records {
            return Err(LayoutError::Count { records, outcomes: outcomes.len() / OUTCOME_BYTES });
        }
        let event_count = events.len() / EVENT_BYTES;
        // The end of the last slice seen: every slice starts at or after it.
        let mut cursor = 0u32;
        let mut next_event = 0u32;
        let mut take = |what: &dyn Fn() -> String, off: u32, len: u32| -> Result<(), LayoutError> {
            slice_of(data, off, len, what)?;
            if off < cursor {
                return Err(LayoutError::Overlap { what: what(), start: off, previous_end: cursor });
            }
            cursor = off + len;
            Ok(())
        };
        for (o, d) in outcomes.chunks_exact(OUTCOME_BYTES).enumerate() {
            let (k, a, b) = (u32_at(d, 0), u32_at(d, 4), u32_at(d, 8));
            match k {
                kind::EMIT => {
                    if a != next_event {
                        return Err(LayoutError::EventOrder { outcome: o, first: a, expected: next_event });
                    }
                    let end = u64::from(a) + u64::from(b);
                    if end > event_count as u64 {
                        return Err(LayoutError::Index {
                            what: format!("outcome {o} last event"),
                            index: end.saturating_sub(1),
                            len: event_count,
                        });
                    }
                    for e in a as usize..end as usize {
                        let ed = &events[e * EVENT_BYTES..(e + 1) * EVENT_BYTES];
                        let flags = u32_at(ed, 24);
                        if flags & !event_flag::ALL != 0 {
                            return Err(LayoutError::UnknownFlags { what: format!("event {e}"), flags });
                        }
                        if flags & event_flag::ID != 0 {
                            take(&|| format!("event {e} id"), u32_at(ed, 0), u32_at(ed, 4))?;
                        }
                        if flags & event_flag::KEEP == 0 {
                            take(&|| format!("event {e} body"), u32_at(ed, 8), u32_at(ed, 12))?;
                        } else if u32_at(ed, 8) != 0 || u32_at(ed, 12) != 0 {
                            // A kept body reads no bytes of `data`: a slice
                            // there would be output nobody bounds.
                            return Err(LayoutError::KeptBody { event: e, start: u32_at(ed, 8), len: u32_at(ed, 12) });
                        }
                        if flags & event_flag::SINKS != 0 {
                            let at = u32_at(ed, 28);
                            take(&|| format!("event {e} route length"), at, 4)?;
                            let len = u32_at(data, at as usize);
                            take(&|| format!("event {e} route"), at + 4, len)?;
                            if let Some(why) = route_error(route_at(data, at)) {
                                return Err(LayoutError::Route { event: e, why });
                            }
                        }
                    }
                    next_event = end as u32;
                }
                kind::DROP | kind::REJECT => take(&|| format!("outcome {o} reason"), a, b)?,
                other => return Err(LayoutError::UnknownKind { outcome: o, kind: other }),
            }
        }
        if next_event as usize != event_count {
            return Err(LayoutError::UnusedEvents { used: next_event as usize, events: event_count });
        }
        Ok(Outcomes { outcomes, events, data })
    }

    pub fn len(&self) -> usize {
        self.outcomes.len() / OUTCOME_BYTES
    }

    pub fn is_empty(&self) -> bool {
        self.outcomes.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = OutcomeView<'a>> + 'a {
        let (events, data) = (self.events, self.data);
        self.outcomes.chunks_exact(OUTCOME_BYTES).map(move |d| {
            let (a, b) = (u32_at(d, 4) as usize, u32_at(d, 8) as usize);
            match u32_at(d, 0) {
                kind::EMIT => OutcomeView::Emit(Events { table: events, data, range: a..a + b }),
                kind::DROP => OutcomeView::Drop(data.get(a..a + b).unwrap_or_default()),
                _ => OutcomeView::Reject(data.get(a..a + b).unwrap_or_default()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone, PartialEq)]
    struct Rec {
        payload: Vec<u8>,
        key: Option<Vec<u8>>,
        headers: Vec<(Vec<u8>, Vec<u8>)>,
        event_id: Option<String>,
        source_timestamp: Option<i64>,
        timestamp: Option<i64>,
        offset: i64,
    }

    fn rec() -> impl Strategy<Value = Rec> {
        let bytes = || proptest::collection::vec(any::<u8>(), 0..20);
        (
            bytes(),
            proptest::option::of(bytes()),
            proptest::collection::vec((bytes(), bytes()), 0..3),
            proptest::option::of("[a-z]{0,8}"),
            proptest::option::of(any::<i64>()),
            proptest::option::of(any::<i64>()),
            any::<i64>(),
        )
            .prop_map(|(payload, key, headers, event_id, source_timestamp, timestamp, offset)| Rec {
                payload,
                key,
                headers,
                event_id,
                source_timestamp,
                timestamp,
                offset,
            })
    }

    /// An event as the tests compare it: id, timestamp, body.
    type OutEvent = (Option<Vec<u8>>, Option<i64>, Vec<u8>);

    #[derive(Debug, Clone, PartialEq)]
    enum Out {
        Emit(Vec<OutEvent>),
        Drop(Vec<u8>),
        Reject(Vec<u8>),
    }

    fn out() -> impl Strategy<Value = Out> {
        let bytes = || proptest::collection::vec(any::<u8>(), 0..20);
        prop_oneof![
            proptest::collection::vec(
                (proptest::option::of(bytes()), proptest::option::of(any::<i64>()), bytes()),
                0..4
            )
            .prop_map(Out::Emit),
            bytes().prop_map(Out::Drop),
            bytes().prop_map(Out::Reject),
        ]
    }

    fn pack_outcomes(outs: &[Out]) -> OutcomeBuf {
        let mut buf = OutcomeBuf::default();
        for o in outs {
            let r = match o {
                Out::Emit(events) => buf.emit(events.iter().map(|(id, timestamp, body)| EventFields {
                    id: id.as_deref(),
                    timestamp: *timestamp,
                    body,
                    keep: false,
                    sinks: None,
                })),
                Out::Drop(r) => buf.drop(r),
                Out::Reject(r) => buf.reject(r),
            };
            assert!(r.is_ok());
        }
        buf
    }

    fn read_outcomes(o: &Outcomes<'_>) -> Vec<Out> {
        o.iter()
            .map(|v| match v {
                OutcomeView::Emit(events) => {
                    Out::Emit(events.map(|e| (e.id.map(<[u8]>::to_vec), e.timestamp, e.body.to_vec())).collect())
                }
                OutcomeView::Drop(r) => Out::Drop(r.to_vec()),
                OutcomeView::Reject(r) => Out::Reject(r.to_vec()),
            })
            .collect()
    }

    proptest! {
        #[test]
        fn a_packed_batch_reads_back_as_it_was(recs in proptest::collection::vec(rec(), 0..12)) {
            let mut buf = BatchBuf::default();
            for r in &recs {
                let fields = RecordFields {
                    payload: &r.payload,
                    payload_on_demand: false,
                    key: r.key.as_deref(),
                    event_id: r.event_id.as_deref(),
                    source_timestamp: r.source_timestamp,
                    timestamp: r.timestamp,
                    partition: 0,
                    offset: r.offset,
                };
                prop_assert!(buf.push(&fields, r.headers.iter().map(|(n, v)| (&n[..], &v[..]))).is_ok());
            }
            let view = BatchView::new(&buf.records, &buf.headers, &buf.data, 1).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(view.len(), recs.len());
            for (i, r) in recs.iter().enumerate() {
                let v = view.record(i).map_err(|e| TestCaseError::fail(e.to_string()))?;
                let headers: Vec<_> = (0..v.header_count())
                    .map(|h| v.header(h).map(|(n, x)| (n.to_vec(), x.to_vec())))
                    .collect::<Result<_, _>>()
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                let back = Rec {
                    payload: v.payload.to_vec(),
                    key: v.key.map(<[u8]>::to_vec),
                    headers,
                    event_id: v.event_id.map(|b| String::from_utf8_lossy(b).into_owned()),
                    source_timestamp: v.source_timestamp,
                    timestamp: v.timestamp,
                    offset: v.offset,
                };
                prop_assert_eq!(&back, r);
            }
        }

        #[test]
        fn packed_outcomes_pass_the_check_and_read_back(outs in proptest::collection::vec(out(), 0..12)) {
            let buf = pack_outcomes(&outs);
            let checked = Outcomes::check(&buf.outcomes, &buf.events, &buf.data, outs.len())
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(read_outcomes(&checked), outs);
        }

        /// Any corruption of valid outcome buffers is refused or reads as
        /// something inside the buffers: never a panic, never a slice past
        /// the data, never more bytes out than the data holds.
        #[test]
        fn corrupted_outcomes_never_escape_their_buffers(
            outs in proptest::collection::vec(out(), 1..8),
            table in 0usize..3,
            at in any::<prop::sample::Index>(),
            value in any::<u32>(),
        ) {
            let mut buf = pack_outcomes(&outs);
            let target = match table { 0 => &mut buf.outcomes, 1 => &mut buf.events, _ => &mut buf.data };
            if !target.is_empty() {
                let i = at.index(target.len()) & !3;
                let end = (i + 4).min(target.len());
                let len = end - i;
                target[i..end].copy_from_slice(&value.to_le_bytes()[..len]);
            }
            if let Ok(checked) = Outcomes::check(&buf.outcomes, &buf.events, &buf.data, outs.len()) {
                let mut total = 0usize;
                for o in checked.iter() {
                    match o {
                        OutcomeView::Emit(events) => {
                            for e in events {
                                total += e.body.len() + e.id.map_or(0, <[u8]>::len);
                            }
                        }
                        OutcomeView::Drop(r) | OutcomeView::Reject(r) => total += r.len(),
                    }
                }
                prop_assert!(total <= buf.data.len(), "{} bytes out of {}", total, buf.data.len());
            }
        }
    }

    fn one_event(id: &[u8], body: &[u8]) -> OutcomeBuf {
        let mut buf = OutcomeBuf::default();
        assert!(buf.emit([EventFields { id: Some(id), body, ..EventFields::default() }]).is_ok());
        buf
    }

    #[test]
    fn a_kept_body_reads_no_data_and_one_that_names_a_slice_is_refused() {
        let mut buf = OutcomeBuf::default();
        let kept = EventFields { id: Some(b"i"), timestamp: Some(3), body: b"ignored", keep: true, sinks: None };
        assert!(buf.emit([kept, EventFields { id: None, body: b"{}", keep: false, ..kept }]).is_ok());
        assert_eq!(buf.data, b"i{}" as &[u8], "the kept body is not written, the id is, in order");
        let checked = Outcomes::check(&buf.outcomes, &buf.events, &buf.data, 1).unwrap_or_else(|e| panic!("{e}"));
        let Some(OutcomeView::Emit(events)) = checked.iter().next() else { panic!("an emit") };
        let events: Vec<EventView<'_>> = events.collect();
        assert_eq!(events[0], EventView { id: Some(b"i"), timestamp: Some(3), body: b"", keep: true, sinks: None });
        assert_eq!(events[1], EventView { id: None, timestamp: Some(3), body: b"{}", keep: false, sinks: None });
        // A kept event that also points into `data` is refused by name.
        buf.events[12..16].copy_from_slice(&1u32.to_le_bytes());
        let err = Outcomes::check(&buf.outcomes, &buf.events, &buf.data, 1).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("event 0 keeps its record's payload (flag bit 2) but names a body slice (0, 1); it must be (0, 0)")
        );
    }

    /// A route crosses as a length and the names after the body; a route
    /// that names no sink, a bad name, or bytes past the data is refused
    /// by name, and one plugin that never routes reads as before.
    #[test]
    fn a_route_names_sinks_after_the_body_and_a_bad_one_is_refused() {
        let mut buf = OutcomeBuf::default();
        let routed =
            EventFields { id: Some(b"i"), body: b"{}", sinks: Some(b"archive,errors"), ..EventFields::default() };
        assert!(buf.emit([routed, EventFields { body: b"{}", ..EventFields::default() }]).is_ok());
        assert_eq!(buf.data, b"i{}\x0e\0\0\0archive,errors{}" as &[u8]);
        let checked = Outcomes::check(&buf.outcomes, &buf.events, &buf.data, 1).unwrap_or_else(|e| panic!("{e}"));
        let Some(OutcomeView::Emit(events)) = checked.iter().next() else { panic!("an emit") };
        let routes: Vec<Option<&[u8]>> = events.map(|e| e.sinks).collect();
        assert_eq!(routes, [Some(b"archive,errors".as_slice()), None]);

        let refused = |names: &[u8]| {
            let mut buf = OutcomeBuf::default();
            let e = EventFields { body: b"{}", sinks: Some(names), ..EventFields::default() };
            assert!(buf.emit([e]).is_ok());
            Outcomes::check(&buf.outcomes, &buf.events, &buf.data, 1).err().map(|e| e.to_string())
        };
        assert_eq!(
            refused(b"").as_deref(),
            Some("event 0's route (flag bit 3) names no sink (drop the event instead)")
        );
        assert!(refused(b"a,,b").is_some_and(|e| e.contains("names sink \"\"")));
        assert!(refused(b"a b").is_some_and(|e| e.contains("names sink \"a b\"")));
        let many = vec!["s"; MAX_ROUTE_SINKS + 1].join(",");
        assert!(refused(many.as_bytes()).is_some_and(|e| e.contains("65 sinks")));
        let long = vec![b'a'; MAX_ROUTE_BYTES + 1];
        assert!(refused(&long).is_some_and(|e| e.contains("over the limit of 4096")));
        // A length that reaches past the data.
        let mut buf = OutcomeBuf::default();
        let e = EventFields { body: b"{}", sinks: Some(b"a"), ..EventFields::default() };
        assert!(buf.emit([e]).is_ok());
        buf.data[2..6].copy_from_slice(&100u32.to_le_bytes());
        let err = Outcomes::check(&buf.outcomes, &buf.events, &buf.data, 1).err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("event 0 route spans bytes 6..106, outside the data buffer of 7 bytes"));
    }

    #[test]
    fn a_body_outside_the_data_is_refused_by_name() {
        let mut buf = one_event(b"id", b"{}");
        buf.events[12..16].copy_from_slice(&1000u32.to_le_bytes());
        let err = Outcomes::check(&buf.outcomes, &buf.events, &buf.data, 1).err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("event 0 body spans bytes 2..1002, outside the data buffer of 4 bytes"));
    }

    #[test]
    fn overlapping_slices_are_refused() {
        // Two events whose bodies are the same bytes: an amplification.
        let mut buf = OutcomeBuf::default();
        let body = EventFields { body: b"{}", ..EventFields::default() };
        assert!(buf.emit([body, body]).is_ok());
        buf.events[EVENT_BYTES + 8..EVENT_BYTES + 12].copy_from_slice(&0u32.to_le_bytes());
        let err = Outcomes::check(&buf.outcomes, &buf.events, &buf.data, 1).err();
        assert!(matches!(err, Some(LayoutError::Overlap { start: 0, previous_end: 2, .. })), "{err:?}");
    }

    #[test]
    fn emits_out_of_order_and_unused_events_are_refused() {
        let mut buf = one_event(b"a", b"{}");
        assert!(buf.emit([EventFields { body: b"{}", ..EventFields::default() }]).is_ok());
        // Outcome 1 claims event 0 again.
        buf.outcomes[OUTCOME_BYTES + 4..OUTCOME_BYTES + 8].copy_from_slice(&0u32.to_le_bytes());
        let err = Outcomes::check(&buf.outcomes, &buf.events, &buf.data, 2).err();
        assert!(matches!(err, Some(LayoutError::EventOrder { outcome: 1, first: 0, expected: 1 })), "{err:?}");

        let mut spare = one_event(b"a", b"{}");
        spare.events.extend_from_slice(&[0; EVENT_BYTES]);
        let err = Outcomes::check(&spare.outcomes, &spare.events, &spare.data, 1).err();
        assert_eq!(err, Some(LayoutError::UnusedEvents { used: 1, events: 2 }));
    }

    #[test]
    fn a_count_that_disagrees_with_the_batch_is_refused() {
        let buf = one_event(b"a", b"{}");
        assert_eq!(
            Outcomes::check(&buf.outcomes, &buf.events, &buf.data, 2).err(),
            Some(LayoutError::Count { records: 2, outcomes: 1 })
        );
        let err = Outcomes::check(&buf.outcomes[..7], &buf.events, &buf.data, 1).err();
        assert!(matches!(err, Some(LayoutError::Ragged { table: "outcomes.outcomes", .. })), "{err:?}");
    }

    #[test]
    fn unknown_kinds_and_flags_are_refused() {
        // Bit 3 is the route; bit 4 is the first the contract leaves undefined.
        let mut buf = one_event(b"a", b"{}");
        buf.events[24..28].copy_from_slice(&16u32.to_le_bytes());
        assert!(matches!(
            Outcomes::check(&buf.outcomes, &buf.events, &buf.data, 1),
            Err(LayoutError::UnknownFlags { flags: 16, .. })
        ));
        let mut buf = OutcomeBuf::default();
        assert!(buf.drop(b"x").is_ok());
        buf.outcomes[0..4].copy_from_slice(&7u32.to_le_bytes());
        assert!(matches!(
            Outcomes::check(&buf.outcomes, &buf.events, &buf.data, 1),
            Err(LayoutError::UnknownKind { kind: 7, .. })
        ));
    }

    #[test]
    fn a_record_naming_a_missing_partition_or_header_is_refused() {
        let mut buf = BatchBuf::default();
        let fields = RecordFields { payload: b"x", partition: 3, ..RecordFields::default() };
        assert!(buf.push(&fields, []).is_ok());
        let view = BatchView::new(&buf.records, &buf.headers, &buf.data, 1);
        let err = view.and_then(|v| v.record(0)).err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("record 0 partition is 3, outside a table of 1"));
    }
}
