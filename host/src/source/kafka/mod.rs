//! The Kafka source: a consumer group member on rdkafka.
//!
//! - `client`: the librdkafka configuration sluice builds from its config
//!   (the properties the custody rule depends on are sluice's own; secrets
//!   come from the environment and never reach a log);
//! - `record`: a Kafka message as a plugin record;
//! - `watermarks`: where a list of partitions begins and ends, in one
//!   request per broker;
//! - `admin`: what sluice asks the brokers outside the consume loop
//!   (topic retention for the dedup window, `sluice lag`, `sluice replay`).
//!
//! The consume loop itself, with its rebalances, pauses and commits, is in
//! `pipeline/kafka`.

#[cfg(feature = "kafka")]
pub(crate) mod admin;
#[cfg(feature = "kafka")]
pub(crate) mod client;
pub mod config;
pub(crate) mod connection;
#[cfg(feature = "kafka")]
pub(crate) mod record;
#[cfg(feature = "kafka")]
pub(crate) mod watermarks;

#[cfg(feature = "kafka")]
use rdkafka::error::KafkaError;

/// Why the Kafka source, or a command on its group, cannot go on. A run
/// stops before its next commit, so the group's offsets still name the
/// first record not finished.
#[derive(Debug, thiserror::Error)]
pub enum KafkaSourceError {
    /// librdkafka refused a call.
    #[cfg(feature = "kafka")]
    #[error("kafka: {what}: {source}")]
    Client {
        /// The call (subscribe, commit, seek…) and its subject.
        what: String,
        /// librdkafka's error.
        source: KafkaError,
    },
    /// `sluice replay` found the group in use: a
    /// live member would commit over the reset.
    #[error(
        "consumer group {group:?} has {members} live member(s): stop every sluice (and any other consumer) of the \
         group before resetting its offsets"
    )]
    GroupActive {
        /// `group_id`.
        group: String,
        /// Its members at the broker.
        members: usize,
    },
    /// A record on the consumer queue, which every assigned partition's
    /// split queue should have kept it off.
    #[error(
        "kafka: record {at} reached the consumer queue: its partition's queue was not split off; stopping without \
         committing, so that nothing past it is committed"
    )]
    NotSplit {
        /// The record's `topic/partition@offset`.
        at: String,
    },
    /// Anything else the source cannot go on from, in words.
    #[error("kafka: {0}")]
    Other(String),
}

#[cfg(feature = "kafka")]
impl KafkaSourceError {
    pub(crate) fn client(what: impl Into<String>) -> impl FnOnce(KafkaError) -> KafkaSourceError {
        let what = what.into();
        move |source| KafkaSourceError::Client { what, source }
    }
}

/// The name of a partition in keys, labels and messages: `topic/partition`.
pub(crate) fn partition_name(topic: &str, partition: i32) -> String {
    format!("{topic}/{partition}")
}

/// `topic/partition` back into its parts (topics never contain `/`);
/// `-1` for a name that is not one.
pub(crate) fn split_partition_name(name: &str) -> (&str, i32) {
    match name.rsplit_once('/') {
        Some((t, p)) => (t, p.parse().unwrap_or(-1)),
        None => (name, -1),
    }
}
