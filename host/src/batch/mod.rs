//! A batch: the unit every stage of the hot path works on, from the
//! source's read to the commit. Read this and `pipeline/driver/` to know
//! the hot path.
//!
//! **One buffer, slices, no copy per stage.** A source frames a batch's
//! lines (or Kafka messages) into one buffer (`source::file`'s
//! `next_batch`, `source::kafka`'s records), and each record's payload is
//! a [`bytes::Bytes`] slice of it: one allocation per batch. The chain
//! (`plugin::chain`) sends the batch to a plugin as one 0.2 data buffer
//! with fixed-size descriptors, and lifts what comes back without copying
//! the bodies: a new body is a slice of the one buffer the plugin returned;
//! a kept body (contract 0.2's flag, the SDKs' `keep`) is the payload's
//! own slice, neither copied nor checked again. Between stages the live
//! events travel in one flat list (`plugin::inputs::Derived`: what a stage
//! changed, beside the index of the source record that holds the rest),
//! and the verdicts come back as one event list per batch (`Verdicts`). The dedup window reads the events' ids as
//! digests, the sink is handed each body as that same slice
//! (`sink::Delivery`), and the quarantine copies only the records it keeps.
//! What is per record is one struct in the batch's `Vec` ([`Pulled`], a
//! `plugin::Record` of slices and its span), not a heap object of its own;
//! the id a plugin sets is the one `String` a record may carry. When a batch's write is durable,
//! its memory goes back to the thread that made it (`driver`'s `Spent`).
//!
//! **Positions.** `start..next` is a record's span in its source's
//! position space (a Kafka offset and the next; a line's first byte and the
//! byte after its end). The driver's `OffsetTracker` commits the end of the
//! contiguous prefix of records that passed a door (`custody`), which is
//! why a batch keeps every record, refused ones included, in order.

use std::time::Instant;

use crate::custody::ids::Scope;
use crate::record::Record;

/// A record as a source hands it over.
pub(crate) struct Pulled {
    pub record: Record,
    /// The record's span in the source's position space (a Kafka record is
    /// `offset..offset + 1`; a line, its first byte to the byte after its end).
    pub start: u64,
    pub next: u64,
    /// Refused before any plugin sees it (a line over `max_line_bytes`).
    pub refused: Option<String>,
}

/// A batch as a source hands it over.
pub(crate) struct Pull {
    pub records: Vec<Pulled>,
    /// The dedup scope of every record of the batch (per partition).
    pub scope: Scope,
    /// When the source received the batch's first record: the age of the
    /// oldest unfinished record, and the latency to its commit.
    pub received: Instant,
    /// What the source still holds beyond this batch, when it knows (a
    /// file's unread bytes): the watchdog's "records wait".
    pub behind: Option<u64>,
}
