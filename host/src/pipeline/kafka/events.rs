//! What a Kafka member says: commits, rebalances, restores, the
//! changelog, fencing, and the quarantine topic's answers.

use metrics::{counter, gauge, histogram};

use crate::telemetry::{EVENTS, InternalEvent};

/// A partition's offsets were committed to the group (or failed to be).
pub(crate) struct OffsetsCommitted<'a> {
    pub partitions: &'a [(String, i64)],
    pub seconds: f64,
    pub error: Option<String>,
    /// `periodic`, `revoke` or `shutdown` (the consume loop's), or
    /// `transaction` (a batch's own, with its ids: `source.transactions`).
    pub reason: &'static str,
}

impl InternalEvent for OffsetsCommitted<'_> {
    fn emit(&self) {
        let result = if self.error.is_some() { "error" } else { "ok" };
        counter!("sluice_offset_commits_total", "result" => result, "reason" => self.reason).increment(1);
        histogram!("sluice_offset_commit_seconds").record(self.seconds);
        match &self.error {
            None => {
                for (p, offset) in self.partitions {
                    gauge!("sluice_committed_offset", "partition" => p.clone()).set(*offset as f64);
                }
                tracing::debug!(target: EVENTS, reason = self.reason, seconds = self.seconds, partitions = ?self.partitions, "offsets committed");
            }
            Some(e) => tracing::warn!(target: EVENTS, reason = self.reason,
                partitions = ?self.partitions,
                "offset commit failed (the next commit carries the same or a later prefix): {e}"
            ),
        }
    }
}

/// A partition was assigned to this instance, or taken away.
pub(crate) struct Rebalanced<'a> {
    pub partition: &'a str,
    /// `assigned`, `revoked` or `lost`.
    pub kind: &'static str,
    /// For a revoke: the finished prefix committed on the way out.
    pub committed: Option<i64>,
}

impl InternalEvent for Rebalanced<'_> {
    fn emit(&self) {
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
        tracing::info!(target: EVENTS, partition = self.partition, kind = self.kind, committed = ?self.committed, "rebalance");
    }
}

/// Where a partition stands, sampled by the consume loop about once a second.
pub(crate) struct Progress<'a> {
    pub partition: &'a str,
    pub high_watermark: Option<i64>,
    pub committed: Option<i64>,
    pub oldest_age_seconds: f64,
    /// Records librdkafka holds fetched for the partition (its statistics).
    pub prefetched: Option<i64>,
}

impl InternalEvent for Progress<'_> {
    fn emit(&self) {
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

/// The brokers answered about one entry of the quarantine topic.
pub(crate) struct QuarantineTopicAnswered<'a> {
    pub entry: &'a str,
    pub topic: &'a str,
    pub answer: &'a crate::sink::Answer,
}

impl InternalEvent for QuarantineTopicAnswered<'_> {
    fn emit(&self) {
        use crate::sink::Answer;
        let result = match self.answer {
            Answer::Accepted | Answer::Duplicate => "ok",
            Answer::Rejected(_) => "refused",
            Answer::Retry(_) | Answer::Systemic(_) => "retry",
        };
        counter!("sluice_quarantine_topic_total", "result" => result).increment(1);
        match self.answer {
            Answer::Accepted | Answer::Duplicate => {}
            Answer::Rejected(why) => tracing::error!(target: EVENTS, entry = self.entry,
                topic = self.topic,
                "the quarantine topic refused an entry for good (it stays in the local quarantine): {why}"
            ),
            Answer::Retry(why) | Answer::Systemic(why) => {
                tracing::warn!(target: EVENTS, entry = self.entry, topic = self.topic, "quarantine topic: {why}; retrying")
            }
        }
    }
}

/// A newly assigned partition's ids are restored from the changelog.
pub(crate) struct RestoreFinished<'a> {
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

impl InternalEvent for RestoreFinished<'_> {
    fn emit(&self) {
        let p = self.partition.to_string();
        counter!("sluice_restore_records_total", "partition" => p.clone()).increment(self.ids);
        gauge!("sluice_restore_seconds", "partition" => p).set(self.seconds);
        tracing::info!(target: EVENTS, partition = self.partition,
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

/// A batch's accepted ids are in the dedup changelog.
pub(crate) struct ChangelogPublished<'a> {
    pub partition: &'a str,
    pub ids: usize,
    pub seconds: f64,
}

impl InternalEvent for ChangelogPublished<'_> {
    fn emit(&self) {
        let p = self.partition.to_string();
        counter!("sluice_changelog_ids_total", "partition" => p.clone()).increment(self.ids as u64);
        histogram!("sluice_changelog_seconds", "partition" => p).record(self.seconds);
    }
}

/// The dedup changelog did not take a batch's ids; the partition waits
/// and retries (its commit stays behind them).
pub(crate) struct ChangelogRefused<'a> {
    pub partition: &'a str,
    pub topic: &'a str,
    pub error: &'a str,
    pub round: u32,
}

impl InternalEvent for ChangelogRefused<'_> {
    fn emit(&self) {
        counter!("sluice_changelog_retries_total", "partition" => self.partition.to_string()).increment(1);
        // The first refusal and then one in eight: a broker down for an
        // hour is not thousands of lines.
        if self.round.is_multiple_of(8) {
            tracing::warn!(target: EVENTS, partition = self.partition,
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
pub(crate) struct PartitionFenced<'a> {
    pub partition: &'a str,
    pub transactional_id: &'a str,
    pub error: &'a str,
}

impl InternalEvent for PartitionFenced<'_> {
    fn emit(&self) {
        counter!("sluice_partitions_fenced_total", "partition" => self.partition.to_string()).increment(1);
        tracing::warn!(target: EVENTS, partition = self.partition,
            transactional_id = self.transactional_id,
            "fenced: another member took this partition over ({}); its open transaction is aborted, and this member \
             stops the partition without delivering or committing again until the group assigns it anew",
            self.error
        );
    }
}

/// Records of a partition whose ids could not be restored
/// (`dedup.on_missing_state = "accept-duplicates"`): looked up against an
/// incomplete window.
pub(crate) struct UncheckedRecords<'a> {
    pub partition: &'a str,
    pub records: usize,
}

impl InternalEvent for UncheckedRecords<'_> {
    fn emit(&self) {
        counter!("sluice_dedup_unchecked_records_total", "partition" => self.partition.to_string())
            .increment(self.records as u64);
    }
}
