//! The dedup window's clock: the wall clock read once, when the window
//! opens, then advanced by the monotonic clock.
//!
//! Expiry drops whole buckets by their age, so the clock that ages them is
//! what stands between a replay and a duplicate. The wall clock can jump:
//! a bad NTP step, a VM resumed on another host, an operator's `date -s`.
//! Read directly, a jump forward of a day would expire a day of ids at
//! once (every replay inside the window then delivers twice), and a jump
//! back of an hour would file new ids into an hour-old bucket, to expire an
//! hour early. The monotonic clock (`CLOCK_MONOTONIC`, which `Instant`
//! reads on Linux) never jumps, so during a run the window ages at the
//! pace of real time whatever the wall clock says; a jump is reported
//! (`ClockJumped`), not followed.
//!
//! What it cannot guard: a jump while sluice is stopped. A store last
//! written a day ago looks the same whether a day passed or the clock
//! moved, so the start takes the wall clock as it finds it, except that it
//! never starts behind the newest bucket on disk (a clock set back while
//! stopped would otherwise file ids into old buckets), and says how old
//! the store's newest ids are when that is more than the window.
//!
//! The monotonic clock does not advance while the machine is suspended:
//! ids then stay longer than the window, which costs memory, never a
//! duplicate.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A jump smaller than this is clock drift and NTP slewing, not reported.
const REPORT_SKEW_SECS: i64 = 30;

/// The wall clock, in seconds since the epoch (0 before it).
pub(crate) fn wall_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

#[derive(Debug)]
pub(crate) struct WindowClock {
    /// Seconds since the epoch at `started`.
    base_secs: u64,
    started: Instant,
    /// The wall clock's lead over this clock when last reported (0: none).
    reported_skew: AtomicI64,
}

impl WindowClock {
    /// A clock that reads `wall_secs` now, or `floor_secs` if the wall
    /// clock is behind it (the start of the newest bucket on disk).
    pub(crate) fn start(wall_secs: u64, floor_secs: u64) -> WindowClock {
        WindowClock { base_secs: wall_secs.max(floor_secs), started: Instant::now(), reported_skew: AtomicI64::new(0) }
    }

    /// Seconds since the epoch, by this clock.
    pub(crate) fn now_secs(&self) -> u64 {
        self.at(self.started.elapsed())
    }

    /// The reading after `elapsed` of monotonic time (split out so tests
    /// can move time without waiting for it).
    pub(crate) fn at(&self, elapsed: Duration) -> u64 {
        self.base_secs.saturating_add(elapsed.as_secs())
    }

    /// Compare with the wall clock: a lead or lag beyond drift that was not
    /// yet reported is returned (seconds, positive when the wall clock is
    /// ahead), once per jump; back within drift is returned as 0 once, so
    /// the report can be cleared.
    pub(crate) fn jumped(&self, wall_secs: u64, now_secs: u64) -> Option<i64> {
        let skew = wall_secs as i64 - now_secs as i64;
        let skew = if skew.abs() < REPORT_SKEW_SECS { 0 } else { skew };
        let last = self.reported_skew.load(Ordering::Relaxed);
        if (skew - last).abs() < REPORT_SKEW_SECS && (skew == 0) == (last == 0) {
            return None;
        }
        self.reported_skew.compare_exchange(last, skew, Ordering::SeqCst, Ordering::Relaxed).ok().map(|_| skew)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_follows_elapsed_time_not_the_wall_clock() {
        let clock = WindowClock::start(1_000_000, 0);
        assert_eq!(clock.at(Duration::from_secs(10)), 1_000_010);
        // A wall clock a day ahead is reported once, then not again until
        // it moves again; back in step is reported as 0.
        assert_eq!(clock.jumped(1_000_010 + 86_400, 1_000_010), Some(86_400));
        assert_eq!(clock.jumped(1_000_011 + 86_400, 1_000_011), None);
        assert_eq!(clock.jumped(1_000_012 - 3_600, 1_000_012), Some(-3_600));
        assert_eq!(clock.jumped(1_000_013 + 5, 1_000_013), Some(0));
        assert_eq!(clock.jumped(1_000_014, 1_000_014), None);
    }

    #[test]
    fn a_clock_set_back_while_stopped_starts_at_the_newest_bucket() {
        assert_eq!(WindowClock::start(500, 800).at(Duration::ZERO), 800);
        assert_eq!(WindowClock::start(900, 800).at(Duration::ZERO), 900);
    }
}
