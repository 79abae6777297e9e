//! Where a partition stands: what the driver updates as its batches move
//! and the watchdog, the commit loop and the metrics read. Plain data, so
//! the readers need nothing of the driver.

use std::collections::VecDeque;
use std::time::Instant;

/// Where a partition stands, for the commit loop and the metrics.
#[derive(Debug, Default)]
pub(crate) struct PartitionState {
    /// The finished prefix, durable in the state store.
    pub committable: Option<i64>,
    /// The last offset the group acknowledged (Kafka).
    pub committed: Option<i64>,
    /// The first position still owed and the stage its batch is in.
    pub blocking: Option<(i64, &'static str)>,
    /// When the oldest unfinished record was received.
    pub oldest: Option<Instant>,
    /// When each batch out (taken, not yet durable) was received, oldest
    /// first.
    pub(crate) out: VecDeque<Instant>,
    /// When a batch last became durable (or the partition started): what
    /// the watchdog measures a stall from.
    pub progress: Option<Instant>,
    /// What the source holds that the driver has not read, when it says
    /// (Kafka: librdkafka's consumer lag; a file: its unread bytes).
    pub source_behind: Option<u64>,
    /// The front waits for a credit: every batch it may have out is out.
    pub backpressured: bool,
    /// The stage the back thread is in now, if it is in one. Not always
    /// `blocking`'s: a back held in the sink by a newer batch cannot take
    /// the answer that makes the older batch's write finished, so the
    /// commit waits "in store" for what is really a hung delivery.
    pub busy: Option<&'static str>,
    /// Its dedup ids are in the store (restored from the changelog, or
    /// there is none): until every assigned partition's are, the member
    /// is not ready. False from the assignment on, so no moment between
    /// the assignment and the restore's start reads as ready.
    pub restored: bool,
}

/// The stages a batch can wait in, for `sluice_commit_blocked_by`.
pub(crate) const STAGES: &[&str] = &["plugins", "dedup", "sink", "quarantine", "changelog", "store"];
