//! The judgement: what a partition's standing says it is (flowing, late,
//! back-pressured, stalled), plain Rust with the clock passed in.

use std::time::{Duration, Instant};

use crate::custody::standing::PartitionState;

/// What the watchdog makes of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Status {
    /// Nothing waits: the source has nothing new and nothing is out.
    Idle,
    /// Records wait and batches finish.
    Flowing,
    /// Batches finish, but every credit is out: the source is not read
    /// until one comes back.
    Backpressured,
    /// The oldest batch waits on the sink's open breaker.
    Late { since: Duration },
    /// Records wait and nothing finished for `since` (at least
    /// `watchdog.stall`); the commit waits at `at` (when known) for a
    /// batch in `stage` ("source": nothing is out, the source holds them).
    Stalled { stage: &'static str, at: Option<i64>, since: Duration },
}

impl Status {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Status::Idle => "idle",
            Status::Flowing => "flowing",
            Status::Backpressured => "backpressured",
            Status::Late { .. } => "late",
            Status::Stalled { .. } => "stalled",
        }
    }
}

/// Judge one partition at `now`. `breaker_open`: the sink's breaker lets
/// nothing through (open, or one probe out).
pub(crate) fn assess(st: &PartitionState, now: Instant, stall: Duration, breaker_open: bool) -> Status {
    let out = st.oldest.is_some();
    let waiting = out || st.source_behind.is_some_and(|n| n > 0);
    if !waiting {
        return Status::Idle;
    }
    let since = st.progress.map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
    // Where the work is held: the stage the back is stuck in, when it is
    // in one, else the stage of the batch the commit waits for.
    let stage = st.busy.or(st.blocking.map(|(_, s)| s));
    if breaker_open && stage == Some("sink") {
        return Status::Late { since };
    }
    if since >= stall {
        return Status::Stalled { stage: stage.unwrap_or("source"), at: st.blocking.map(|(at, _)| at), since };
    }
    if st.backpressured { Status::Backpressured } else { Status::Flowing }
}

/// What a partition holds, sampled with its status.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Load {
    pub in_flight: usize,
    pub behind: Option<u64>,
    pub oldest_age: f64,
}
