//! Internal events. Each is emitted in one place and both logs and counts,
//! so that what the log says and what the metrics say are the same facts.
//! Metric names are listed in the README ("Metrics").

use metrics::{counter, gauge, histogram};

use crate::pipeline::stats::Counts;

/// A batch of a partition passed its doors (the store commit is done).
pub struct BatchFinished<'a> {
    pub partition: &'a str,
    pub counts: &'a Counts,
    /// From the batch's first record's arrival to its durable commit.
    pub latency_seconds: f64,
    pub records: usize,
}

impl BatchFinished<'_> {
    pub fn emit(&self) {
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
        tracing::debug!(
            partition = self.partition,
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
pub struct RecordsQuarantined<'a> {
    pub partition: &'a str,
    /// Position, stage and reason of each.
    pub records: &'a [(String, &'static str, String)],
}

impl RecordsQuarantined<'_> {
    pub fn emit(&self) {
        use super::repeats::{Level, REPEATS, Reasons, say};
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
        super::history::HISTORY.quarantined(self.records.iter().map(|(_, stage, reason)| (*stage, reason.as_str())));
        if !tracing::enabled!(tracing::Level::WARN) {
            return;
        }
        let items: Vec<(&str, &str)> =
            self.records.iter().map(|(_, stage, reason)| (*stage, reason.as_str())).collect();
        let (said, due) =
            REPEATS.occurred(self.partition, Level::Warn, &items, std::time::Instant::now(), Reasons::FromData);
        for ((position, stage, reason), _) in self.records.iter().zip(said).filter(|(_, s)| *s) {
            tracing::warn!(partition = self.partition, position, stage, reason, "quarantined");
        }
        say(&due);
    }
}

/// A partition's offsets were committed to the group (or failed to be).
pub struct OffsetsCommitted<'a> {
    pub partitions: &'a [(String, i64)],
    pub seconds: f64,
    pub error: Option<String>,
    /// `periodic`, `revoke` or `shutdown` (the consume loop's), or
    /// `transaction` (a batch's own, with its ids: `source.transactions`).
    pub reason: &'static str,
}

impl OffsetsCommitted<'_> {
    pub fn emit(&self) {
        let result = if self.error.is_some() { "error" } else { "ok" };
        counter!("sluice_offset_commits_total", "result" => result, "reason" => self.reason).increment(1);
        histogram!("sluice_offset_commit_seconds").record(self.seconds);
        match &self.error {
            None => {
                for (p, offset) in self.partitions {
                    gauge!("sluice_committed_offset", "partition" => p.clone()).set(*offset as f64);
                }
                tracing::debug!(reason = self.reason, seconds = self.seconds, partitions = ?self.partitions, "offsets committed");
            }
            Some(e) => tracing::warn!(
                reason = self.reason,
                partitions = ?self.partitions,
                "offset commit failed (the next commit carries the same or a later prefix): {e}"
            ),
        }
    }
}

/// A partition was assigned to this instance, or taken away.
pub struct Rebalanced<'a> {
    pub partition: &'a str,
    /// `assigned`, `revoked` or `lost`.
    pub kind: &'static str,
    /// For a revoke: the finished prefix committed on the way out.
    pub committed: Option<i64>,
}

impl Rebalanced<'_> {
    pub fn emit(&self) {
        counter!("sluice_rebalance_partitions_total", "kind" => self.kind).increment(1);
        if self.kind != "assigned" {
            for name in [
                "sluice_consumer_lag",
                "sluice_partition_backpressured",
                "sluice_oldest_unfinished_age_seconds",
                "sluice_commit_blocked_at",
                "sluice_partition_prefetched_records",
                "sluice_batches_in_flight",
                "sluice_source_behind",
            ] {
                gauge!(name, "partition" => self.partition.to_string()).set(0.0);
            }
        }
        tracing::info!(partition = self.partition, kind = self.kind, committed = ?self.committed, "rebalance");
    }
}

/// A partition's driver has every one of its `pipeline.in_flight` batches
/// out (in the sink, or waiting for its write) and has waited a while for
/// one to finish: it reads nothing more until one does, so the source holds
/// the rest (for Kafka, librdkafka stops fetching at its queue bound).
/// Said when the wait passes `Backpressure::AFTER`, and when it ends.
pub struct Backpressure<'a> {
    pub partition: &'a str,
    pub waiting: bool,
}

impl Backpressure<'_> {
    /// Shorter waits are the ordinary rhythm of a pipeline whose reading is
    /// faster than its delivery; not worth a metric update per batch.
    pub const AFTER: std::time::Duration = std::time::Duration::from_millis(250);

    pub fn emit(&self) {
        let p = || self.partition.to_string();
        gauge!("sluice_partition_backpressured", "partition" => p()).set(if self.waiting { 1.0 } else { 0.0 });
        if self.waiting {
            counter!("sluice_partition_backpressure_total", "partition" => p()).increment(1);
        }
        tracing::debug!(partition = self.partition, waiting = self.waiting, "back-pressure");
    }
}

/// Where a partition stands, sampled by the consume loop about once a second.
pub struct Progress<'a> {
    pub partition: &'a str,
    pub high_watermark: Option<i64>,
    pub committed: Option<i64>,
    pub oldest_age_seconds: f64,
    /// Records librdkafka holds fetched for the partition (its statistics).
    pub prefetched: Option<i64>,
}

impl Progress<'_> {
    pub fn emit(&self) {
        let p = || self.partition.to_string();
        if let (Some(high), Some(committed)) = (self.high_watermark, self.committed) {
            gauge!("sluice_consumer_lag", "partition" => p()).set((high - committed).max(0) as f64);
        }
        if let Some(high) = self.high_watermark {
            gauge!("sluice_high_watermark", "partition" => p()).set(high as f64);
        }
        gauge!("sluice_oldest_unfinished_age_seconds", "partition" => p()).set(self.oldest_age_seconds);
        if let Some(n) = self.prefetched {
            gauge!("sluice_partition_prefetched_records", "partition" => p()).set(n as f64);
        }
    }
}

/// Where a partition's commit waits, as its driver sees it after each
/// batch: the first position still owed and the stage its batch is in.
pub struct CommitBlocked<'a> {
    pub partition: &'a str,
    pub blocking: Option<(i64, &'static str)>,
}

impl CommitBlocked<'_> {
    pub fn emit(&self) {
        let p = || self.partition.to_string();
        let (at, stage) = match self.blocking {
            Some((offset, stage)) => (offset as f64, Some(stage)),
            // Nothing owed: the commit waits for nothing.
            None => (-1.0, None),
        };
        gauge!("sluice_commit_blocked_at", "partition" => p()).set(at);
        for s in crate::pipeline::driver::STAGES {
            gauge!("sluice_commit_blocked_by", "partition" => p(), "stage" => *s).set(if Some(*s) == stage {
                1.0
            } else {
                0.0
            });
        }
    }
}

/// The state store's volume has less free than `pipeline.state_reserve`:
/// commits wait (`store::room`). Said once when it starts, once when it
/// ends; the gauges and `/health` follow every reading.
pub struct StateVolumeFull<'a> {
    pub path: &'a std::path::Path,
    /// Free bytes now; `None`: room again.
    pub free: Option<u64>,
    pub reserve: u64,
    /// It was already short at the previous reading.
    pub was_short: bool,
}

impl StateVolumeFull<'_> {
    pub fn emit(&self, health: Option<&crate::telemetry::Health>) {
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
            (Some(l), false) => tracing::warn!(path = %self.path.display(), "{l}"),
            (None, true) => {
                tracing::info!(path = %self.path.display(), "state store volume has room again: commits go on")
            }
            _ => {}
        }
        if let Some(h) = health {
            h.set_line("state", line);
        }
    }
}

/// The state store's tables by family (`Store::shape`), read by the
/// store's upkeep every 10 s: whether growth is the dedup window's (it
/// should level off) or the quarantine's (it grows until replayed).
pub struct StoreShape<'a> {
    /// Family, tables, bytes.
    pub families: &'a [(&'a str, u64, u64)],
}

impl StoreShape<'_> {
    pub fn emit(&self) {
        for (family, tables, bytes) in self.families {
            gauge!("sluice_store_tables", "family" => family.to_string()).set(*tables as f64);
            gauge!("sluice_store_table_bytes", "family" => family.to_string()).set(*bytes as f64);
        }
        tracing::trace!(families = ?self.families, "the state store's tables (family, tables, bytes)");
    }
}

/// The committer made one synced write for `writes` batches.
pub struct GroupCommitted {
    pub writes: usize,
    pub ok: bool,
}

impl GroupCommitted {
    pub fn emit(&self) {
        counter!("sluice_store_syncs_total", "result" => if self.ok { "ok" } else { "error" }).increment(1);
        counter!("sluice_store_writes_total").increment(self.writes as u64);
        if !self.ok {
            tracing::error!(writes = self.writes, "a synced state store write failed: no later write is made");
        }
    }
}

/// Dedup buckets older than the window were dropped whole.
pub struct BucketsExpired {
    pub dropped: usize,
    pub live: usize,
}

impl BucketsExpired {
    pub fn emit(&self) {
        counter!("sluice_dedup_buckets_dropped_total").increment(self.dropped as u64);
        gauge!("sluice_dedup_buckets").set(self.live as f64);
        tracing::info!(dropped = self.dropped, live = self.live, "dedup buckets past the window dropped");
    }
}

/// A Kafka member that owns no partition while nobody commits its topics'
/// lag (`pipeline::kafka::stranded`): a warning when it starts, once, and
/// an info line when it ends.
pub struct MemberStranded<'a> {
    pub topics: &'a [String],
    pub now: Option<crate::pipeline::kafka::stranded::Stranded>,
    pub before: Option<crate::pipeline::kafka::stranded::Stranded>,
    pub stall: std::time::Duration,
}

impl MemberStranded<'_> {
    pub fn emit(&self) {
        gauge!("sluice_member_stranded").set(if self.now.is_some() { 1.0 } else { 0.0 });
        gauge!("sluice_member_stranded_group_lag").set(self.now.map_or(0.0, |v| v.lag as f64));
        match (self.now, self.before) {
            (Some(v), None) => tracing::warn!(
                topics = ?self.topics,
                lag = v.lag,
                seconds = v.idle.as_secs(),
                "member stranded: no partitions for {} s while the group's lag on {:?} is {} and its commits have \
                 not moved for {:?} (watchdog.stall): another member holds the partitions and does no work \
                 (a dead member the broker kept, or another program in the group)",
                v.idle.as_secs(),
                self.topics,
                v.lag,
                self.stall
            ),
            (None, Some(_)) => {
                tracing::info!(topics = ?self.topics, "member no longer stranded: it has partitions, or the lag is gone or moving")
            }
            _ => {}
        }
    }
}

/// The wall clock moved away from the dedup window's clock (which follows
/// the monotonic clock during a run: `store::clock`), or came back to it.
/// The window keeps its own time; a warning says so once per jump.
pub struct ClockJumped {
    /// Seconds the wall clock is ahead (negative: behind); 0 when back.
    pub skew_secs: i64,
}

impl ClockJumped {
    pub fn emit(&self) {
        gauge!("sluice_clock_skew_seconds").set(self.skew_secs as f64);
        if self.skew_secs == 0 {
            tracing::info!("the wall clock is back in step with the dedup window's clock");
        } else {
            let (way, by) = if self.skew_secs > 0 { ("forward", self.skew_secs) } else { ("back", -self.skew_secs) };
            tracing::warn!(
                skew_secs = self.skew_secs,
                "the wall clock jumped {way} by {by}s: the dedup window keeps aging ids by elapsed time, \
                 so no id expires early; ts-window and quarantine times follow the wall clock"
            );
        }
    }
}

/// A dedup bucket's recent ids were sorted into a table file of the store
/// (`store::id_blobs`): a debug line, and a count that should grow with
/// the ids delivered (one per 131,072, and one per bucket).
pub struct IdsConverted<'a> {
    pub bucket: &'a str,
    pub ids: usize,
}

impl IdsConverted<'_> {
    pub fn emit(&self) {
        counter!("sluice_dedup_id_tables_total").increment(1);
        tracing::debug!(bucket = self.bucket, ids = self.ids, "recent dedup ids sorted into a table file");
    }
}

/// A sink's circuit breaker changed state.
pub struct BreakerChanged<'a> {
    pub sink: &'a str,
    pub transition: crate::sink::breaker::Transition,
}

impl BreakerChanged<'_> {
    /// A new sink starts closed; the gauge says so from the first scrape.
    pub fn initial(sink: &str) {
        gauge!("sluice_breaker_state", "sink" => sink.to_string()).set(0.0);
    }

    pub fn emit(&self) {
        use crate::sink::breaker::Transition;
        let s = || self.sink.to_string();
        let (to, state) = match self.transition {
            Transition::Opened { .. } | Transition::ProbeFailed { .. } => ("open", 1.0),
            Transition::Probing => ("probing", 2.0),
            Transition::Closed => ("closed", 0.0),
        };
        gauge!("sluice_breaker_state", "sink" => s()).set(state);
        counter!("sluice_breaker_transitions_total", "sink" => s(), "to" => to).increment(1);
        match self.transition {
            Transition::Opened { after_failures, pause } => tracing::warn!(
                sink = self.sink,
                after_failures,
                probe_in_ms = pause.as_millis() as u64,
                "circuit breaker opened: nothing is sent until a probe succeeds; partitions pause and lag grows"
            ),
            Transition::ProbeFailed { pause } => tracing::warn!(
                sink = self.sink,
                next_probe_in_ms = pause.as_millis() as u64,
                "circuit breaker probe failed; staying open"
            ),
            Transition::Probing => tracing::info!(sink = self.sink, "circuit breaker probing"),
            Transition::Closed => tracing::info!(sink = self.sink, "circuit breaker closed: delivering again"),
        }
    }
}

/// One call into a sink: its requests and how the backend answered each
/// event.
pub struct SinkRequests<'a> {
    pub sink: &'a str,
    pub attempt: &'a crate::sink::Attempt,
    pub seconds: f64,
}

impl SinkRequests<'_> {
    pub fn emit(&self) {
        use crate::sink::Answer;
        let s = || self.sink.to_string();
        let a = self.attempt;
        counter!("sluice_sink_requests_total", "sink" => s(), "result" => "ok").increment(a.requests_ok.into());
        counter!("sluice_sink_requests_total", "sink" => s(), "result" => "failed").increment(a.requests_failed.into());
        histogram!("sluice_sink_request_seconds", "sink" => s()).record(self.seconds);
        // Fates by class, in the order of `Answer`: accepted, duplicate,
        // retry, reject, systemic.
        let mut n = [0u64; 5];
        let mut last = None;
        for answer in &a.answers {
            let class = match answer {
                Answer::Accepted => 0,
                Answer::Duplicate => 1,
                Answer::Retry(_) => 2,
                Answer::Rejected(_) => 3,
                Answer::Systemic(_) => 4,
            };
            n[class] += 1;
            if matches!(answer, Answer::Retry(_) | Answer::Systemic(_)) {
                last = answer.reason();
            }
        }
        for (fate, count) in ["accepted", "duplicate", "retry", "reject", "systemic"].into_iter().zip(n) {
            if count > 0 {
                counter!("sluice_sink_answers_total", "sink" => s(), "fate" => fate).increment(count);
            }
        }
        if a.splits > 0 {
            counter!("sluice_sink_splits_total", "sink" => s()).increment(a.splits.into());
        }
        let [accepted, duplicate, retry, rejected, systemic] = n;
        if let Some(reason) = last {
            tracing::warn!(
                sink = self.sink,
                accepted,
                duplicate,
                retry,
                rejected,
                systemic,
                retry_after_s = a.retry_after.map(|d| d.as_secs()),
                "sink delivery incomplete: {reason}"
            );
        } else {
            tracing::debug!(sink = self.sink, accepted, duplicate, rejected, seconds = self.seconds, "sink delivered");
        }
    }
}

/// The brokers answered about one entry of the quarantine topic.
pub struct QuarantineTopicAnswered<'a> {
    pub entry: &'a str,
    pub topic: &'a str,
    pub answer: &'a crate::sink::Answer,
}

impl QuarantineTopicAnswered<'_> {
    pub fn emit(&self) {
        use crate::sink::Answer;
        let result = match self.answer {
            Answer::Accepted | Answer::Duplicate => "ok",
            Answer::Rejected(_) => "refused",
            Answer::Retry(_) | Answer::Systemic(_) => "retry",
        };
        counter!("sluice_quarantine_topic_total", "result" => result).increment(1);
        match self.answer {
            Answer::Accepted | Answer::Duplicate => {}
            Answer::Rejected(why) => tracing::error!(
                entry = self.entry,
                topic = self.topic,
                "the quarantine topic refused an entry for good (it stays in the local quarantine): {why}"
            ),
            Answer::Retry(why) | Answer::Systemic(why) => {
                tracing::warn!(entry = self.entry, topic = self.topic, "quarantine topic: {why}; retrying")
            }
        }
    }
}

/// A batch's accepted ids are in the dedup changelog.
pub struct ChangelogPublished<'a> {
    pub partition: &'a str,
    pub ids: usize,
    pub seconds: f64,
}

impl ChangelogPublished<'_> {
    pub fn emit(&self) {
        let p = self.partition.to_string();
        counter!("sluice_changelog_ids_total", "partition" => p.clone()).increment(self.ids as u64);
        histogram!("sluice_changelog_seconds", "partition" => p).record(self.seconds);
    }
}

/// The dedup changelog did not take a batch's ids; the partition waits
/// and retries (its commit stays behind them).
pub struct ChangelogRefused<'a> {
    pub partition: &'a str,
    pub topic: &'a str,
    pub error: &'a str,
    pub round: u32,
}

impl ChangelogRefused<'_> {
    pub fn emit(&self) {
        counter!("sluice_changelog_retries_total", "partition" => self.partition.to_string()).increment(1);
        // The first refusal and then one in eight: a broker down for an
        // hour is not thousands of lines.
        if self.round.is_multiple_of(8) {
            tracing::warn!(
                partition = self.partition,
                topic = self.topic,
                round = self.round,
                "dedup changelog: {}; the partition waits and retries",
                self.error
            );
        }
    }
}

/// A partition's transaction was fenced (`source.transactions`): another
/// member owns the partition now and initialised its transactional id, so
/// this one stops the partition without delivering or committing again.
pub struct PartitionFenced<'a> {
    pub partition: &'a str,
    pub transactional_id: &'a str,
    pub error: &'a str,
}

impl PartitionFenced<'_> {
    pub fn emit(&self) {
        counter!("sluice_partitions_fenced_total", "partition" => self.partition.to_string()).increment(1);
        tracing::warn!(
            partition = self.partition,
            transactional_id = self.transactional_id,
            "fenced: another member took this partition over ({}); its open transaction is aborted, and this member \
             stops the partition without delivering or committing again until the group assigns it anew",
            self.error
        );
    }
}

/// A newly assigned partition's ids are restored from the changelog.
pub struct RestoreFinished<'a> {
    pub partition: &'a str,
    pub topic: &'a str,
    /// `-1`: the topic scope's follower, every partition.
    pub changelog_partition: i32,
    pub from: i64,
    pub to: i64,
    pub messages: u64,
    pub ids: u64,
    pub seconds: f64,
}

impl RestoreFinished<'_> {
    pub fn emit(&self) {
        let p = self.partition.to_string();
        counter!("sluice_restore_records_total", "partition" => p.clone()).increment(self.ids);
        gauge!("sluice_restore_seconds", "partition" => p).set(self.seconds);
        tracing::info!(
            partition = self.partition,
            changelog = self.topic,
            changelog_partition = self.changelog_partition,
            from = self.from,
            to = self.to,
            messages = self.messages,
            ids = self.ids,
            seconds = self.seconds,
            "dedup state restored"
        );
    }
}

/// Records of a partition whose ids could not be restored
/// (`dedup.on_missing_state = "accept-duplicates"`): looked up against an
/// incomplete window.
pub struct UncheckedRecords<'a> {
    pub partition: &'a str,
    pub records: usize,
}

impl UncheckedRecords<'_> {
    pub fn emit(&self) {
        counter!("sluice_dedup_unchecked_records_total", "partition" => self.partition.to_string())
            .increment(self.records as u64);
    }
}

/// What a partition holds, sampled by the watchdog each tick: batches in
/// flight, what its source holds unread, the age of its oldest unfinished
/// record (on every source; Kafka's consume loop also sets the age).
pub struct PartitionLoad<'a> {
    pub partition: &'a str,
    pub load: &'a crate::pipeline::watchdog::Load,
}

impl PartitionLoad<'_> {
    pub fn emit(&self) {
        let p = || self.partition.to_string();
        gauge!("sluice_batches_in_flight", "partition" => p()).set(self.load.in_flight as f64);
        if let Some(behind) = self.load.behind {
            gauge!("sluice_source_behind", "partition" => p()).set(behind as f64);
        }
        gauge!("sluice_oldest_unfinished_age_seconds", "partition" => p()).set(self.load.oldest_age);
    }
}

/// The watchdog's judgement of a partition (`pipeline::watchdog`), said
/// each time it samples: the gauges always, the log only when it changes.
pub struct PartitionWatched<'a> {
    pub partition: &'a str,
    pub status: &'a crate::pipeline::watchdog::Status,
    /// What it was at the previous sample (`None`: first seen).
    pub before: Option<&'a crate::pipeline::watchdog::Status>,
    pub stall: std::time::Duration,
}

impl PartitionWatched<'_> {
    pub fn emit(&self) {
        use crate::pipeline::watchdog::Status;
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
                tracing::warn!(
                    partition = self.partition,
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
            Status::Late { since } => tracing::info!(
                partition = self.partition,
                seconds = since.as_secs(),
                "partition late: its batch waits on the sink's open breaker (not a stall; the lag grows until a \
                 probe succeeds)"
            ),
            _ if was == Some("stalled") => {
                tracing::info!(partition = self.partition, now = self.status.name(), "partition no longer stalled")
            }
            _ => {}
        }
    }
}
