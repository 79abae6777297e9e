//! `[source] type = "kafka"`: a consumer group member's keys. The
//! connection (brokers, TLS, SASL, librdkafka properties) is the type the
//! Kafka sink shares (`connection.rs`).

use std::time::Duration;

use serde::Deserialize;

use super::connection::KafkaConnection;
use crate::problem::Problems;
use crate::units::duration;

/// A Kafka consumer group member (see `source/kafka`).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KafkaSourceConfig {
    /// Brokers, TLS, SASL and librdkafka properties.
    #[serde(flatten)]
    pub connection: KafkaConnection,
    /// Topic names; a name starting with `^` is a regular expression.
    pub topics: Vec<String>,
    /// The consumer group: instances with the same group share the
    /// partitions, and its committed offsets are where a restart reads on.
    pub group_id: String,
    /// How often finished prefixes are committed (also when idle, on
    /// revoke and on shutdown).
    #[schemars(with = "crate::units::DurationText")]
    #[serde(default = "default_commit_interval", deserialize_with = "duration")]
    pub commit_interval: Duration,
    /// Records librdkafka may hold fetched per partition ahead of the
    /// batches in flight (`queued.min.messages`): at this many it stops
    /// fetching the partition until the driver has taken some. Default:
    /// four batches.
    pub queue_records: Option<usize>,
    /// How long a partition's task waits to fill a batch once it has its
    /// first record. Each batch pays two syncs (sink, state store): a batch
    /// of a few records costs as much as a full one.
    #[schemars(with = "crate::units::DurationText")]
    #[serde(default = "default_linger", deserialize_with = "duration")]
    pub linger: Duration,
    /// Fence members that lost their partitions: each batch's offsets
    /// commit in a Kafka transaction under a transactional id of its
    /// partition's own (`<group_id>-txn-<topic>-<partition>`), which the
    /// partition's next owner initialises first, so a member whose session
    /// expired commits nothing more and stops after the batch it was in.
    /// Needs the dedup changelog.
    #[serde(default)]
    pub transactions: bool,
}

fn default_linger() -> Duration {
    Duration::from_millis(100)
}

fn default_commit_interval() -> Duration {
    Duration::from_secs(1)
}

/// librdkafka properties sluice sets itself: the custody rule depends on
/// them (offsets are committed by sluice, only for finished prefixes).
const OWNED_PROPERTIES: [(&str, &str); 6] = [
    ("bootstrap.servers", "use source.brokers"),
    ("group.id", "use source.group_id"),
    ("enable.auto.commit", "use nothing: sluice commits finished prefixes itself"),
    ("enable.auto.offset.store", "use nothing: sluice commits finished prefixes itself"),
    ("enable.partition.eof", "use nothing"),
    ("transactional.id", "use source.transactions (one transactional id per partition)"),
];

impl KafkaSourceConfig {
    pub(crate) fn validate(&self, p: &mut Problems) {
        p.under("source", |p| self.connection.validate("source", &OWNED_PROPERTIES, p));
        if self.group_id.trim().is_empty() {
            p.add("source.group_id", "must not be empty".into());
        }
        if self.topics.is_empty() {
            p.add("source.topics", "name at least one topic (or a ^regex)".into());
        }
        for (i, t) in self.topics.iter().enumerate() {
            if let Some(re) = t.strip_prefix('^') {
                if let Err(e) = regex::Regex::new(&format!("^{re}")) {
                    p.add(&format!("source.topics[{i}]"), format!("{t:?}: {e}"));
                }
            } else if t.is_empty() || !t.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) {
                p.add(&format!("source.topics[{i}]"), format!("{t:?} is not a valid topic name"));
            }
        }
        if self.commit_interval < Duration::from_millis(10) {
            p.add("source.commit_interval", "must be at least 10ms".into());
        }
        if self.linger > Duration::from_secs(10) {
            p.add("source.linger", "must be at most 10s".into());
        }
        if self.queue_records == Some(0) {
            p.add("source.queue_records", "must be at least 1".into());
        }
    }
}

/// The internal topic `dedup.repartition` writes for the group `group`
/// (and the back's group).
pub fn repartition_topic(group: &str) -> String {
    format!("{group}-by-id")
}

impl KafkaSourceConfig {
    /// Whether `topic` is one of the configured topics (a name, or a
    /// `^regex`).
    pub(crate) fn matches(&self, topic: &str) -> bool {
        self.topics.iter().any(|t| match t.strip_prefix('^') {
            Some(re) => regex::Regex::new(&format!("^{re}")).is_ok_and(|r| r.is_match(topic)),
            None => t == topic,
        })
    }
}

/// Where `sluice replay` resets the group to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ResetTo {
    Earliest,
    Offset(i64),
    /// Milliseconds since the epoch: the first record at or after it.
    Time(i64),
}

impl std::str::FromStr for ResetTo {
    type Err = String;
    fn from_str(s: &str) -> Result<ResetTo, String> {
        if s == "earliest" {
            return Ok(ResetTo::Earliest);
        }
        if let Ok(n) = s.parse::<i64>() {
            return if n >= 0 { Ok(ResetTo::Offset(n)) } else { Err(format!("offset {n} is negative")) };
        }
        sluice_guest::time::Format::rfc3339()
            .parse(s, 0)
            .map(|ns| ResetTo::Time(ns.div_euclid(1_000_000)))
            .map_err(|e| format!("{s:?} is neither `earliest`, an offset, nor an RFC 3339 time: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_targets_parse() {
        assert_eq!("earliest".parse::<ResetTo>(), Ok(ResetTo::Earliest));
        assert_eq!("42".parse::<ResetTo>(), Ok(ResetTo::Offset(42)));
        assert_eq!("2026-11-29T10:00:00Z".parse::<ResetTo>(), Ok(ResetTo::Time(1_795_946_400_000)));
        assert!("-3".parse::<ResetTo>().is_err());
        assert!("yesterday".parse::<ResetTo>().is_err());
    }
}
