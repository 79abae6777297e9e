//! What the driver and the group commit say: a batch through its doors,
//! its quarantined records, a commit held up, the state volume filling.

use metrics::{counter, gauge, histogram};

use crate::telemetry::stats::Counts;
use crate::telemetry::{EVENTS, InternalEvent};

/// A batch of a partition passed its doors (the store commit is done).
pub(crate) struct BatchFinished<'a> {
    pub partition: &'a str,
    pub counts: &'a Counts,
    /// From the batch's first record's arrival to its durable commit.
    pub latency_seconds: f64,
}

impl InternalEvent for BatchFinished<'_> {
    fn emit(&self) {
        let c = self.counts;
        let p = self.partition.to_string();
        counter!("sluice_records_in_total", "partition" => p.clone()).increment(c.records);
        for (door, n) in [
            ("delivered", c.delivered),
            ("duplicate", c.duplicate),
            ("quarantined", c.quarantined),
            ("dropped", c.dropped),
        ] {
            if n > 0 {
                counter!("sluice_records_out_total", "partition" => p.clone(), "door" => door).increment(n);
            }
        }
        histogram!("sluice_plugin_seconds", "partition" => p.clone()).record(c.plugin_seconds);
        histogram!("sluice_sink_seconds", "partition" => p.clone()).record(c.sink_seconds);
        histogram!("sluice_commit_latency_seconds", "partition" => p).record(self.latency_seconds);
        tracing::debug!(target: EVENTS, partition = self.partition,
            records = c.records,
            delivered = c.delivered,
            duplicate = c.duplicate,
            quarantined = c.quarantined,
            dropped = c.dropped,
            latency_seconds = self.latency_seconds,
            "batch finished"
        );
    }
}

/// A batch's records went to the quarantine (their entries are durable).
/// Counted one by one; logged as `telemetry::repeats` says: the first of a
/// reason in full, then a count per interval. Each reason is masked
/// already (`Quarantine::reason_for`).
pub(crate) struct RecordsQuarantined<'a> {
    pub partition: &'a str,
    /// Position, stage and reason of each.
    pub records: &'a [(String, &'static str, String)],
}

impl InternalEvent for RecordsQuarantined<'_> {
    fn emit(&self) {
        use crate::telemetry::repeats::{Level, REPEATS, Reasons, say};
        if self.records.is_empty() {
            return;
        }
        let mut by_stage: Vec<(&str, u64)> = Vec::new();
        for (_, stage, _) in self.records {
            match by_stage.iter_mut().find(|(s, _)| s == stage) {
                Some((_, n)) => *n += 1,
                None => by_stage.push((stage, 1)),
            }
        }
        for (stage, n) in by_stage {
            counter!("sluice_quarantined_total", "partition" => self.partition.to_string(), "stage" => stage.to_string())
                .increment(n);
        }
        crate::telemetry::history::HISTORY
            .quarantined(self.records.iter().map(|(_, stage, reason)| (*stage, reason.as_str())));
        if !tracing::enabled!(tracing::Level::WARN) {
            return;
        }
        let items: Vec<(&str, &str)> =
            self.records.iter().map(|(_, stage, reason)| (*stage, reason.as_str())).collect();
        let (said, due) =
            REPEATS.occurred(self.partition, Level::Warn, &items, std::time::Instant::now(), Reasons::FromData);
        for ((position, stage, reason), _) in self.records.iter().zip(said).filter(|(_, s)| *s) {
            tracing::warn!(target: EVENTS, partition = self.partition, position, stage, reason, "quarantined");
        }
        say(&due);
    }
}

/// A partition's driver has every one of its `pipeline.in_flight` batches
/// out (in the sink, or waiting for its write) and has waited a while for
/// one to finish: it reads nothing more until one does, so the source holds
/// the rest (for Kafka, librdkafka stops fetching at its queue bound).
/// Said when the wait passes `Backpressure::AFTER`, and when it ends.
pub(crate) struct Backpressure<'a> {
    pub partition: &'a str,
    pub waiting: bool,
}

impl Backpressure<'_> {
    /// Shorter waits are the ordinary rhythm of a pipeline whose reading is
    /// faster than its delivery; not worth a metric update per batch.
    pub(crate) const AFTER: std::time::Duration = std::time::Duration::from_millis(250);
}

impl InternalEvent for Backpressure<'_> {
    fn emit(&self) {
        let p = || self.partition.to_string();
        gauge!("sluice_partition_backpressured", "partition" => p()).set(if self.waiting { 1.0 } else { 0.0 });
        if self.waiting {
            counter!("sluice_partition_backpressure_total", "partition" => p()).increment(1);
        }
        tracing::debug!(target: EVENTS, partition = self.partition, waiting = self.waiting, "back-pressure");
    }
}

/// Where a partition's commit waits, as its driver sees it after each
/// batch: the first position still owed and the stage its batch is in.
pub(crate) struct CommitBlocked<'a> {
    pub partition: &'a str,
    pub blocking: Option<(i64, &'static str)>,
}

impl InternalEvent for CommitBlocked<'_> {
    fn emit(&self) {
        let p = || self.partition.to_string();
        let (at, stage) = match self.blocking {
            Some((offset, stage)) => (offset as f64, Some(stage)),
            // Nothing owed: the commit waits for nothing.
            None => (-1.0, None),
        };
        gauge!("sluice_commit_blocked_at", "partition" => p()).set(at);
        for s in crate::custody::standing::STAGES {
            gauge!("sluice_commit_blocked_by", "partition" => p(), "stage" => *s).set(if Some(*s) == stage {
                1.0
            } else {
                0.0
            });
        }
    }
}

/// The state store's volume has less free than `pipeline.state_reserve`:
/// commits wait (`store::disk_reserve`). Said once when it starts, once when it
/// ends; the gauges and `/health` follow every reading.
pub(crate) struct StateVolumeFull<'a> {
    pub path: &'a std::path::Path,
    /// Free bytes now; `None`: room again.
    pub free: Option<u64>,
    pub reserve: u64,
    /// It was already short at the previous reading.
    pub was_short: bool,
    /// Where `/health` reads the line from, when a listener serves it.
    pub health: Option<&'a crate::telemetry::Health>,
}

impl InternalEvent for StateVolumeFull<'_> {
    fn emit(&self) {
        gauge!("sluice_state_disk_full").set(if self.free.is_some() { 1.0 } else { 0.0 });
        if let Some(free) = self.free {
            gauge!("sluice_state_free_bytes").set(free as f64);
        }
        let line = self.free.map(|free| {
            format!(
                "state store {}: its volume has {free} bytes free, less than pipeline.state_reserve ({} bytes): \
                 commits wait until {} more bytes are freed",
                self.path.display(),
                self.reserve,
                self.reserve - free
            )
        });
        match (&line, self.was_short) {
            (Some(l), false) => tracing::warn!(target: EVENTS, path = %self.path.display(), "{l}"),
            (None, true) => {
                tracing::info!(target: EVENTS, path = %self.path.display(), "state store volume has room again: commits go on")
            }
            _ => {}
        }
        if let Some(h) = self.health {
            h.set_line("state", line);
        }
    }
}

/// The committer made one synced write for `writes` batches.
pub(crate) struct GroupCommitted {
    pub writes: usize,
    pub ok: bool,
}

impl InternalEvent for GroupCommitted {
    fn emit(&self) {
        counter!("sluice_store_syncs_total", "result" => if self.ok { "ok" } else { "error" }).increment(1);
        counter!("sluice_store_writes_total").increment(self.writes as u64);
        if !self.ok {
            tracing::error!(target: EVENTS, writes = self.writes, "a synced state store write failed: no later write is made");
        }
    }
}

/// The state store's tables by family (`Store::shape`), read by the
/// store's upkeep every 10 s: whether growth is the dedup window's (it
/// should level off) or the quarantine's (it grows until replayed).
pub(crate) struct StoreShape<'a> {
    /// Family, tables, bytes.
    pub families: &'a [(&'a str, u64, u64)],
}

impl InternalEvent for StoreShape<'_> {
    fn emit(&self) {
        for (family, tables, bytes) in self.families {
            gauge!("sluice_store_tables", "family" => family.to_string()).set(*tables as f64);
            gauge!("sluice_store_table_bytes", "family" => family.to_string()).set(*bytes as f64);
        }
        tracing::trace!(target: EVENTS, families = ?self.families, "the state store's tables (family, tables, bytes)");
    }
}
