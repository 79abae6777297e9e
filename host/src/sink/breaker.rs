//! The circuit breaker of a sink (DESIGN.md, "Sinks"): after `failures`
//! consecutive failed requests it opens; while open nothing is sent and the
//! partitions wait, so records stay in the source and the symptom is lag;
//! after a pause one caller sends a probe (a real batch), and the pause
//! doubles after each failed probe up to `max_probe`; one success closes it.
//!
//! Plain state with the clock passed in: no I/O, tested exhaustively below.

use std::time::{Duration, Instant};

use serde::Deserialize;

/// The sink's circuit breaker: after `failures` failed requests in a row
/// nothing is sent, the sources pause (lag grows, nothing is lost), and a
/// probe is sent after `initial_probe`, then at doubling pauses up to
/// `max_probe` (or the backend's `Retry-After`); one success closes it.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BreakerConfig {
    /// Consecutive failed requests that open the breaker.
    #[serde(default = "default_failures")]
    pub failures: u32,
    /// The pause before the first probe.
    #[schemars(with = "crate::units::DurationText")]
    #[serde(default = "default_initial_probe", deserialize_with = "crate::units::duration")]
    pub initial_probe: Duration,
    /// The longest pause between probes.
    #[schemars(with = "crate::units::DurationText")]
    #[serde(default = "default_max_probe", deserialize_with = "crate::units::duration")]
    pub max_probe: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            failures: default_failures(),
            initial_probe: default_initial_probe(),
            max_probe: default_max_probe(),
        }
    }
}

fn default_failures() -> u32 {
    5
}
fn default_initial_probe() -> Duration {
    Duration::from_secs(1)
}
fn default_max_probe() -> Duration {
    Duration::from_secs(60)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Closed {
        failures: u32,
    },
    /// Nothing is sent before `until`; `pause` is the pause that led here.
    Open {
        until: Instant,
        pause: Duration,
    },
    /// One probe is in flight; everyone else waits for its answer.
    Probing {
        pause: Duration,
    },
}

/// What a caller may do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Permit {
    /// Send.
    Send,
    /// Send: this request is the probe. Report its result, or `abandon`.
    Probe,
    /// Do not send; ask again at this instant (or earlier, to notice a
    /// probe's success).
    WaitUntil(Instant),
}

/// A change of state, for the log and the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transition {
    Opened { after_failures: u32, pause: Duration },
    Probing,
    ProbeFailed { pause: Duration },
    Closed,
}

#[derive(Debug, Clone)]
pub(crate) struct Breaker {
    cfg: BreakerConfig,
    state: State,
}

/// How long others wait between looks while a probe is in flight.
const PROBE_POLL: Duration = Duration::from_millis(50);

impl Breaker {
    pub(crate) fn new(cfg: BreakerConfig) -> Breaker {
        Breaker { cfg, state: State::Closed { failures: 0 } }
    }

    pub(crate) fn state(&self) -> State {
        self.state
    }

    pub(crate) fn permit(&mut self, now: Instant) -> (Permit, Option<Transition>) {
        match self.state {
            State::Closed { .. } => (Permit::Send, None),
            State::Open { until, pause } if now >= until => {
                self.state = State::Probing { pause };
                (Permit::Probe, Some(Transition::Probing))
            }
            State::Open { until, .. } => (Permit::WaitUntil(until), None),
            State::Probing { .. } => (Permit::WaitUntil(now + PROBE_POLL), None),
        }
    }

    /// A request the backend answered. Closes the breaker from any state:
    /// one success is proof enough (DESIGN.md).
    pub(crate) fn success(&mut self) -> Option<Transition> {
        let was_closed = matches!(self.state, State::Closed { .. });
        self.state = State::Closed { failures: 0 };
        (!was_closed).then_some(Transition::Closed)
    }

    /// A request that failed as a whole. `probe` says whether it was the
    /// probe; a failure of a request sent before the breaker opened (still
    /// in flight then) changes nothing while it is open.
    pub(crate) fn failure(&mut self, now: Instant, probe: bool) -> Option<Transition> {
        match self.state {
            State::Closed { failures } => {
                let failures = failures + 1;
                if failures >= self.cfg.failures.max(1) {
                    let pause = self.cfg.initial_probe.min(self.cfg.max_probe);
                    self.state = State::Open { until: now + pause, pause };
                    Some(Transition::Opened { after_failures: failures, pause })
                } else {
                    self.state = State::Closed { failures };
                    None
                }
            }
            State::Probing { pause } if probe => {
                let pause = pause.saturating_mul(2).min(self.cfg.max_probe);
                self.state = State::Open { until: now + pause, pause };
                Some(Transition::ProbeFailed { pause })
            }
            State::Open { .. } | State::Probing { .. } => None,
        }
    }

    /// The backend asked for a pause (`Retry-After`): an open breaker
    /// probes no sooner than `until`. A closed one is not opened by it: the
    /// caller waits that long before its next request anyway.
    pub(crate) fn hold(&mut self, until: Instant) {
        if let State::Open { until: at, pause } = self.state {
            self.state = State::Open { until: at.max(until), pause };
        }
    }

    /// The probe was never sent (its caller was stopped): let the next
    /// caller probe at once.
    pub(crate) fn abandon_probe(&mut self, now: Instant) {
        if let State::Probing { pause } = self.state {
            self.state = State::Open { until: now, pause };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cfg() -> BreakerConfig {
        BreakerConfig { failures: 5, initial_probe: Duration::from_secs(1), max_probe: Duration::from_secs(60) }
    }

    #[test]
    fn opens_after_exactly_five_consecutive_failures() {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg());
        for i in 1..5 {
            assert_eq!(b.failure(t0, false), None, "failure {i} must not open it");
            assert_eq!(b.permit(t0).0, Permit::Send);
        }
        assert_eq!(b.failure(t0, false), Some(Transition::Opened { after_failures: 5, pause: Duration::from_secs(1) }));
        assert_eq!(b.permit(t0).0, Permit::WaitUntil(t0 + Duration::from_secs(1)));
    }

    #[test]
    fn a_success_resets_the_count() {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg());
        for _ in 0..4 {
            b.failure(t0, false);
        }
        assert_eq!(b.success(), None);
        for _ in 0..4 {
            assert_eq!(b.failure(t0, false), None);
        }
        assert!(matches!(b.state(), State::Closed { failures: 4 }));
    }

    #[test]
    fn probes_double_up_to_the_cap_and_one_success_closes() {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg());
        for _ in 0..5 {
            b.failure(t0, false);
        }
        let mut now = t0;
        let mut pauses = Vec::new();
        for _ in 0..9 {
            let State::Open { until, pause } = b.state() else { panic!("open expected") };
            pauses.push(pause.as_secs());
            assert!(matches!(b.permit(until - Duration::from_millis(1)).0, Permit::WaitUntil(_)));
            now = until;
            assert_eq!(b.permit(now), (Permit::Probe, Some(Transition::Probing)));
            // Everyone else waits while the probe is out.
            assert!(matches!(b.permit(now).0, Permit::WaitUntil(_)));
            assert!(matches!(b.failure(now, true), Some(Transition::ProbeFailed { .. })));
        }
        assert_eq!(pauses, vec![1, 2, 4, 8, 16, 32, 60, 60, 60]);
        let State::Open { until, .. } = b.state() else { panic!() };
        assert_eq!(b.permit(until).0, Permit::Probe);
        assert_eq!(b.success(), Some(Transition::Closed));
        assert_eq!(b.permit(until).0, Permit::Send);
        let _ = now;
    }

    #[test]
    fn late_failures_of_requests_sent_before_opening_do_not_extend_the_pause() {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg());
        for _ in 0..5 {
            b.failure(t0, false);
        }
        let before = b.state();
        assert_eq!(b.failure(t0 + Duration::from_millis(500), false), None);
        assert_eq!(b.state(), before);
    }

    #[test]
    fn retry_after_holds_an_open_breaker_past_its_own_pause_never_shorter() {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg());
        for _ in 0..5 {
            b.failure(t0, false);
        }
        b.hold(t0 + Duration::from_secs(30));
        assert_eq!(b.permit(t0 + Duration::from_secs(1)).0, Permit::WaitUntil(t0 + Duration::from_secs(30)));
        // A shorter Retry-After does not cut the breaker's own pause.
        b.hold(t0 + Duration::from_millis(10));
        assert_eq!(b.permit(t0 + Duration::from_secs(29)).0, Permit::WaitUntil(t0 + Duration::from_secs(30)));
        assert_eq!(b.permit(t0 + Duration::from_secs(30)).0, Permit::Probe);
        // Closed: nothing to hold.
        let mut c = Breaker::new(cfg());
        c.hold(t0 + Duration::from_secs(30));
        assert_eq!(c.permit(t0).0, Permit::Send);
    }

    #[test]
    fn an_abandoned_probe_lets_the_next_caller_probe() {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg());
        for _ in 0..5 {
            b.failure(t0, false);
        }
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(b.permit(t1).0, Permit::Probe);
        b.abandon_probe(t1);
        assert_eq!(b.permit(t1).0, Permit::Probe);
    }

    proptest! {
        /// Whatever happens, the breaker is open exactly when the last
        /// `failures` requests all failed and nothing succeeded since, and
        /// a pause never exceeds the cap.
        #[test]
        fn open_iff_enough_consecutive_failures(events in proptest::collection::vec(any::<bool>(), 0..200)) {
            let mut b = Breaker::new(cfg());
            let mut now = Instant::now();
            let mut run = 0u32;
            for ok in events {
                now += Duration::from_millis(700);
                let (permit, _) = b.permit(now);
                if matches!(permit, Permit::WaitUntil(_)) {
                    continue;
                }
                if ok {
                    b.success();
                    run = 0;
                } else {
                    b.failure(now, permit == Permit::Probe);
                    run += 1;
                }
                match b.state() {
                    State::Closed { failures } => prop_assert!(run < 5 && failures == run),
                    State::Open { pause, .. } => prop_assert!(run >= 5 && pause <= Duration::from_secs(60)),
                    State::Probing { .. } => prop_assert!(false, "probing after an answer"),
                }
            }
        }
    }
}
