//! What the watchdog says of a partition: its status when it changes,
//! and its load every round.

use metrics::{counter, gauge};

use crate::telemetry::{EVENTS, InternalEvent};

/// What a partition holds, sampled by the watchdog each tick: batches in
/// flight, what its source holds unread, the age of its oldest unfinished
/// record (on every source; Kafka's consume loop also sets the age).
pub(crate) struct PartitionLoad<'a> {
    pub partition: &'a str,
    pub load: &'a super::status::Load,
}

impl InternalEvent for PartitionLoad<'_> {
    fn emit(&self) {
        let p = || self.partition.to_string();
        gauge!("sluice_batches_in_flight", "partition" => p()).set(self.load.in_flight as f64);
        if let Some(behind) = self.load.behind {
            gauge!("sluice_source_behind", "partition" => p()).set(behind as f64);
        }
        gauge!("sluice_oldest_unfinished_age_seconds", "partition" => p()).set(self.load.oldest_age);
    }
}

/// The watchdog's judgement of a partition (`watchdog::assess`), said
/// each time it samples: the gauges always, the log only when it changes.
pub(crate) struct PartitionWatched<'a> {
    pub partition: &'a str,
    pub status: &'a super::status::Status,
    /// What it was at the previous sample (`None`: first seen).
    pub before: Option<&'a super::status::Status>,
    pub stall: std::time::Duration,
}

impl InternalEvent for PartitionWatched<'_> {
    fn emit(&self) {
        use super::status::Status;
        let p = || self.partition.to_string();
        let (stalled, seconds) = match self.status {
            Status::Stalled { since, .. } => (1.0, since.as_secs_f64()),
            _ => (0.0, 0.0),
        };
        gauge!("sluice_partition_stalled", "partition" => p()).set(stalled);
        gauge!("sluice_partition_stalled_seconds", "partition" => p()).set(seconds);
        gauge!("sluice_partition_late", "partition" => p()).set(if matches!(self.status, Status::Late { .. }) {
            1.0
        } else {
            0.0
        });
        let was = self.before.map(Status::name);
        if was == Some(self.status.name()) {
            return;
        }
        match self.status {
            Status::Stalled { stage, at, since } => {
                counter!("sluice_partition_stalls_total", "partition" => p()).increment(1);
                tracing::warn!(target: EVENTS, partition = self.partition,
                    stage,
                    at,
                    seconds = since.as_secs(),
                    stall = ?self.stall,
                    "partition stalled: records wait and no batch finished for {} s (watchdog.stall {:?}); its \
                     commit waits in stage {stage}",
                    since.as_secs(),
                    self.stall,
                );
            }
            Status::Late { since } => tracing::info!(target: EVENTS, partition = self.partition,
                seconds = since.as_secs(),
                "partition late: its batch waits on the sink's open breaker (not a stall; the lag grows until a \
                 probe succeeds)"
            ),
            _ if was == Some("stalled") => {
                tracing::info!(target: EVENTS, partition = self.partition, now = self.status.name(), "partition no longer stalled")
            }
            _ => {}
        }
    }
}
