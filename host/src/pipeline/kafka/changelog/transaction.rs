//! `source.transactions = true`: each batch's offset commit is a Kafka
//! transaction (`send_offsets_to_transaction` with the consumer's group
//! metadata, KIP-447) under a transactional id of the partition's own
//! (`<group_id>-txn-<topic>-<partition>`), not the member's.
//!
//! Fencing: a newly assigned partition's task initialises that id before it
//! restores the changelog. The broker bumps the id's epoch and aborts what
//! the last owner left open; a last owner that still runs (a zombie: its
//! session expired in a pause or a cut) is refused its next offset commit
//! (`ProducerFenced` / `InvalidProducerEpoch`), stops the partition
//! (`PartitionFenced`) without delivering again, and takes what the group
//! assigns when it rejoins.
//!
//! The changelog ids stay outside the transaction, produced and
//! acknowledged before it as without transactions. Inside it they would
//! be lost with it when it aborts although the sink has their batch, and
//! the next owner would deliver that batch again; outside, a zombie's last
//! batch is known to the next owner once acknowledged. (A Kafka sink whose
//! records joined the transaction would need them inside: that is not
//! built.)
//!
//! What a fence cannot take back: the batch a zombie was delivering when it
//! paused reaches the sink. It commits nothing after that batch, and a
//! transaction never spans a delivery (`IdLog::one_batch_at_a_time`): each
//! batch's write is durable and its offsets committed before the next
//! batch reaches the sink, so that batch is the only one.

use std::sync::Weak;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, Producer};
use rdkafka::{Offset, TopicPartitionList};
use rocksdb::WriteBatch;

use super::{Changelog, ChangelogError};
use crate::custody::ids::IdDigest;
use crate::pipeline::driver::{Commit, IdLog, SentIds};
use crate::pipeline::error::PipelineError;
use crate::pipeline::kafka::events::{OffsetsCommitted, PartitionFenced};
use crate::pipeline::kafka::rebalance::Context;
use crate::source::kafka::KafkaSourceError;
use crate::telemetry::InternalEvent;

/// How long one transactional call may wait for the brokers.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The transactional id of a source partition.
pub(crate) fn transactional_id(group_id: &str, topic: &str, partition: impl std::fmt::Display) -> String {
    format!("{group_id}-txn-{topic}-{partition}")
}

/// Whether the brokers refused because another producer holds the
/// transactional id now.
fn is_fence(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::Fenced
            | RDKafkaErrorCode::ProducerFenced
            | RDKafkaErrorCode::InvalidProducerEpoch
            | RDKafkaErrorCode::TransactionCoordinatorFenced
    )
}

/// Worth asking again. librdkafka calls a request the brokers do not
/// implement retriable too (tansu 0.6 routes no EndTxn): that never heals.
fn is_retriable(e: &KafkaError) -> bool {
    matches!(e, KafkaError::Transaction(t) if t.is_retriable() && t.code() != RDKafkaErrorCode::UnsupportedFeature)
}

/// One partition's transactions: an `IdLog` for its driver that sends the
/// ids by the shared changelog and commits the offsets itself.
pub(crate) struct PartitionTransactions<'c> {
    changelog: &'c Changelog<'c>,
    producer: FutureProducer,
    id: String,
    topic: String,
    partition: i32,
    /// The member's consumer, for its group metadata at each commit.
    group: Weak<BaseConsumer<Context>>,
    /// Raised when fenced: the partition's task stops on it.
    fenced: &'c AtomicBool,
}

impl<'c> PartitionTransactions<'c> {
    /// Initialise the partition's transactional id, fencing its last owner
    /// and ending what it left open. `Ok(None)`: let go (`stopping`) first.
    pub(crate) fn start(
        changelog: &'c Changelog<'c>,
        (topic, partition): (&str, i32),
        group: Weak<BaseConsumer<Context>>,
        fenced: &'c AtomicBool,
        stopping: &dyn Fn() -> bool,
    ) -> Result<Option<PartitionTransactions<'c>>, PipelineError> {
        let source = &changelog.source;
        let id = transactional_id(&source.group_id, topic, partition);
        let producer: FutureProducer =
            crate::source::kafka::client::producer_config(&source.connection, &Default::default())?
                .set("transactional.id", &id)
                .set("linger.ms", "0")
                .create()
                .map_err(KafkaSourceError::client(format!("create the transactional producer {id}")))?;
        let mut backoff = Duration::from_millis(200);
        loop {
            match producer.init_transactions(CALL_TIMEOUT) {
                Ok(()) => break,
                Err(_) if stopping() => return Ok(None),
                Err(e)
                    if is_retriable(&e)
                        || matches!(e.rdkafka_error_code(), Some(RDKafkaErrorCode::OperationTimedOut)) =>
                {
                    tracing::warn!(transactional_id = id, "cannot initialise the partition's transactions yet: {e}");
                    sleep_unless(backoff, stopping);
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
                Err(e) => {
                    return Err(ChangelogError::Kafka {
                        topic: changelog.topic.clone(),
                        what: format!("initialise the transactional id {id}: {e}"),
                    }
                    .into());
                }
            }
        }
        tracing::debug!(transactional_id = id, "transactions initialised");
        Ok(Some(PartitionTransactions { changelog, producer, id, topic: topic.to_string(), partition, group, fenced }))
    }

    /// A call the brokers refused: fenced (the partition is let go), or an
    /// error that stops the run (librdkafka retried what could be retried;
    /// the offsets were not committed, so a restart reads their records
    /// again and the dedup window absorbs them).
    fn refused(&self, what: &str, e: KafkaError, open: bool) -> Result<Commit, PipelineError> {
        // A message queued behind the fenced one reports its purge, not
        // the fence: the producer's fatal error says what happened.
        let fatal = self.producer.client().fatal_error();
        if e.rdkafka_error_code().is_some_and(is_fence) || fatal.as_ref().is_some_and(|(code, _)| is_fence(*code)) {
            self.fence(&fatal.map_or_else(|| e.to_string(), |(_, text)| text));
            return Ok(Commit::LetGo);
        }
        if open {
            let _ = self.producer.abort_transaction(CALL_TIMEOUT);
        }
        let hint = if e.rdkafka_error_code() == Some(RDKafkaErrorCode::UnsupportedFeature) {
            "; these brokers do not implement Kafka transactions fully: set source.transactions = false"
        } else {
            ""
        };
        Err(ChangelogError::Kafka {
            topic: self.changelog.topic.clone(),
            what: format!("transaction {} could not {what}: {e}; nothing of it was committed{hint}", self.id),
        }
        .into())
    }

    fn fence(&self, error: &str) {
        if !self.fenced.swap(true, Ordering::SeqCst) {
            let partition = crate::source::kafka::partition_name(&self.topic, self.partition);
            PartitionFenced { partition: &partition, transactional_id: &self.id, error }.emit();
        }
    }
}

fn sleep_unless(wait: Duration, stopping: &dyn Fn() -> bool) {
    let until = Instant::now() + wait;
    while Instant::now() < until && !stopping() {
        std::thread::sleep(until.saturating_duration_since(Instant::now()).min(Duration::from_millis(50)));
    }
}

impl IdLog for PartitionTransactions<'_> {
    /// The ids go to the changelog as without transactions: acknowledged
    /// before the commit, and visible at once. In the transaction they
    /// would be lost with it when it aborts, though the sink has the
    /// batch: the next owner would deliver it again.
    fn send<'l>(&'l self, partition: &str, now_secs: u64, ids: &[IdDigest]) -> Box<dyn SentIds + 'l> {
        self.changelog.send(partition, now_secs, ids)
    }

    fn remember(&self, partition: &str, acked: i64, write: &mut WriteBatch) -> Result<(), PipelineError> {
        self.changelog.remember(partition, acked, write)
    }

    /// The batch's offset, in a transaction of its own. A commit the
    /// brokers could not answer in time is asked again: librdkafka makes a
    /// repeated commit idempotent.
    fn commit(&self, partition: &str, position: u64, stopping: &dyn Fn() -> bool) -> Result<Commit, PipelineError> {
        if self.fenced.load(Ordering::SeqCst) {
            return Ok(Commit::LetGo);
        }
        let Some(group) = self.group.upgrade().and_then(|c| c.group_metadata()) else {
            return Ok(Commit::LetGo);
        };
        let mut offsets = TopicPartitionList::new();
        offsets
            .add_partition_offset(&self.topic, self.partition, Offset::Offset(position as i64))
            .map_err(KafkaSourceError::client("name the offset to commit"))?;
        let started = Instant::now();
        if let Err(e) = self.producer.begin_transaction() {
            return self.refused("begin", e, false);
        }
        if let Err(e) = self.producer.send_offsets_to_transaction(&offsets, &group, CALL_TIMEOUT) {
            return self.refused("add its offsets", e, true);
        }
        let mut backoff = Duration::from_millis(100);
        loop {
            match self.producer.commit_transaction(CALL_TIMEOUT) {
                Ok(()) => break,
                // Let go unanswered (a revoke, a shutdown): not committed,
                // so the next owner reads the batch again, and its ids,
                // already in the changelog, absorb it.
                Err(e) if is_retriable(&e) && stopping() => {
                    tracing::warn!(transactional_id = self.id, "commit not answered before letting go: {e}");
                    let _ = self.producer.abort_transaction(CALL_TIMEOUT);
                    return Ok(Commit::LetGo);
                }
                Err(e) if is_retriable(&e) => {
                    tracing::warn!(transactional_id = self.id, "commit not answered yet, asking again: {e}");
                    sleep_unless(backoff, stopping);
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
                Err(e) => return self.refused("commit", e, true),
            }
        }
        OffsetsCommitted {
            partitions: &[(partition.to_string(), position as i64)],
            seconds: started.elapsed().as_secs_f64(),
            error: None,
            reason: "transaction",
        }
        .emit();
        Ok(Commit::Done)
    }

    fn one_batch_at_a_time(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_has_its_own_transactional_id() {
        assert_eq!(transactional_id("g", "logs", 3), "g-txn-logs-3");
        assert_ne!(transactional_id("g", "logs", 3), transactional_id("g", "logs", 4));
        assert_ne!(transactional_id("g", "logs", 3), transactional_id("h", "logs", 3));
    }

    #[test]
    fn the_fencing_codes_are_told_from_other_refusals() {
        for code in [
            RDKafkaErrorCode::Fenced,
            RDKafkaErrorCode::ProducerFenced,
            RDKafkaErrorCode::InvalidProducerEpoch,
            RDKafkaErrorCode::TransactionCoordinatorFenced,
        ] {
            assert!(is_fence(code), "{code:?}");
        }
        for code in
            [RDKafkaErrorCode::MessageTimedOut, RDKafkaErrorCode::NotCoordinator, RDKafkaErrorCode::UnknownMemberId]
        {
            assert!(!is_fence(code), "{code:?}");
        }
    }
}
