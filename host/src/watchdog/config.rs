//! `[watchdog]`: when a partition that makes no progress is called stalled.

use std::time::Duration;

use serde::Deserialize;

use crate::problem::Problems;

#[derive(Debug, Clone, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WatchdogConfig {
    /// How long a partition with records waiting may go without finishing
    /// a batch before it is reported as stalled. Longer than the slowest
    /// batch a healthy sink takes (its retries and backoffs included), or
    /// slow partitions are called stalled.
    #[schemars(with = "crate::units::DurationText")]
    #[serde(default = "default_stall", deserialize_with = "crate::units::duration")]
    pub stall: Duration,
}

impl Default for WatchdogConfig {
    fn default() -> Self {
        WatchdogConfig { stall: default_stall() }
    }
}

fn default_stall() -> Duration {
    Duration::from_secs(300)
}

impl WatchdogConfig {
    pub(crate) fn validate(&self, p: &mut Problems) {
        if self.stall < Duration::from_secs(1) {
            p.add(
                "watchdog.stall",
                format!("{:?} is too short to tell a stall from a busy batch: use 1s or more", self.stall),
            );
        }
    }
}
