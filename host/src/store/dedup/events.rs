//! What the dedup window says of itself: buckets converted and expired,
//! and the clock going back.

use metrics::{counter, gauge};

use crate::telemetry::{EVENTS, InternalEvent};

/// A dedup bucket's recent ids were sorted into a table file of the store
/// (`store::id_blobs`): a debug line, and a count that should grow with
/// the ids delivered (one per 131,072, and one per bucket).
pub(crate) struct IdsConverted<'a> {
    pub bucket: &'a str,
    pub ids: usize,
}

impl InternalEvent for IdsConverted<'_> {
    fn emit(&self) {
        counter!("sluice_dedup_id_tables_total").increment(1);
        tracing::debug!(target: EVENTS, bucket = self.bucket, ids = self.ids, "recent dedup ids sorted into a table file");
    }
}

/// Dedup buckets older than the window were dropped whole.
pub(crate) struct BucketsExpired {
    pub dropped: usize,
    pub live: usize,
}

impl InternalEvent for BucketsExpired {
    fn emit(&self) {
        counter!("sluice_dedup_buckets_dropped_total").increment(self.dropped as u64);
        gauge!("sluice_dedup_buckets").set(self.live as f64);
        tracing::info!(target: EVENTS, dropped = self.dropped, live = self.live, "dedup buckets past the window dropped");
    }
}

/// The wall clock moved away from the dedup window's clock (which follows
/// the monotonic clock during a run: `store::clock`), or came back to it.
/// The window keeps its own time; a warning says so once per jump.
pub(crate) struct ClockJumped {
    /// Seconds the wall clock is ahead (negative: behind); 0 when back.
    pub skew_secs: i64,
}

impl InternalEvent for ClockJumped {
    fn emit(&self) {
        gauge!("sluice_clock_skew_seconds").set(self.skew_secs as f64);
        if self.skew_secs == 0 {
            tracing::info!(target: EVENTS, "the wall clock is back in step with the dedup window's clock");
        } else {
            let (way, by) = if self.skew_secs > 0 { ("forward", self.skew_secs) } else { ("back", -self.skew_secs) };
            tracing::warn!(target: EVENTS, skew_secs = self.skew_secs,
                "the wall clock jumped {way} by {by}s: the dedup window keeps aging ids by elapsed time, \
                 so no id expires early; ts-window and quarantine times follow the wall clock"
            );
        }
    }
}
