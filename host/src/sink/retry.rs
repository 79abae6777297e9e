//! The retry policy: how many times an event the backend answered "retry"
//! about may be sent, and how long to wait between rounds.
//!
//! Backoff is exponential with "equal jitter": round `n` waits a random
//! time in `[d/2, d]` with `d = min(max_backoff, initial_backoff · 2ⁿ)`.
//! The jitter keeps partitions that failed together from retrying
//! together; the lower half keeps a floor, so a retry never comes at once.

use std::time::Duration;

use serde::Deserialize;

/// Retries of events the backend answered "retry" about (a record's
/// passing fault), with exponential backoff and jitter.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryConfig {
    /// Sends of one event the backend answered "retry" about, the first
    /// included; then it is quarantined with the backend's last answer.
    /// Requests that failed as a whole (5xx, timeouts) do not count: they
    /// go through the breaker and wait, however long that takes.
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    /// The pause before the second send; doubled each round, with jitter.
    #[schemars(with = "crate::units::DurationText")]
    #[serde(default = "default_initial", deserialize_with = "crate::units::duration")]
    pub initial_backoff: Duration,
    /// The longest pause between sends.
    #[schemars(with = "crate::units::DurationText")]
    #[serde(default = "default_max", deserialize_with = "crate::units::duration")]
    pub max_backoff: Duration,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_attempts: default_max_attempts(),
            initial_backoff: default_initial(),
            max_backoff: default_max(),
        }
    }
}

fn default_max_attempts() -> u32 {
    5
}
fn default_initial() -> Duration {
    Duration::from_millis(100)
}
fn default_max() -> Duration {
    Duration::from_secs(30)
}

impl RetryConfig {
    /// The ceiling of round `round`'s wait (0 = after the first failure).
    pub(crate) fn ceiling(&self, round: u32) -> Duration {
        let factor = 1u32.checked_shl(round.min(31)).unwrap_or(u32::MAX);
        self.initial_backoff.saturating_mul(factor).min(self.max_backoff)
    }

    /// The wait before round `round + 1`, given a uniform sample in [0, 1).
    pub(crate) fn backoff_with(&self, round: u32, unit: f64) -> Duration {
        let d = self.ceiling(round);
        d / 2 + (d / 2).mul_f64(unit.clamp(0.0, 1.0))
    }

    pub(crate) fn backoff(&self, round: u32) -> Duration {
        self.backoff_with(round, fastrand::f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn doubles_from_the_initial_backoff_up_to_the_cap() {
        let r = RetryConfig {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
        };
        let ceilings: Vec<u128> = (0..7).map(|n| r.ceiling(n).as_millis()).collect();
        assert_eq!(ceilings, vec![100, 200, 400, 800, 1000, 1000, 1000]);
        assert_eq!(r.ceiling(u32::MAX), Duration::from_secs(1));
    }

    proptest! {
        #[test]
        fn jitter_stays_in_the_upper_half(round in 0u32..64, unit in 0.0f64..1.0) {
            let r = RetryConfig::default();
            let d = r.backoff_with(round, unit);
            prop_assert!(d >= r.ceiling(round) / 2 && d <= r.ceiling(round));
        }
    }
}
