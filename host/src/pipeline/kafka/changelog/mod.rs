//! The dedup changelog: the dedup window's ids, kept where the data lives
//! so that they follow a partition to its next owner (as Kafka Streams
//! backs a state store with a changelog topic).
//!
//! - Publish (`IdLog`, on a partition's back thread): a batch's accepted
//!   ids are produced (`acks=all`, idempotent) to the changelog, keyed by
//!   the source partition, when the batch's write is handed over; its
//!   offsets are published for the commit only once both the write is
//!   durable and the changelog has acknowledged. How far the store knows
//!   the changelog rides in a later write.
//! - Restore (`restore`): before a newly assigned partition's first batch,
//!   its ids are read from where the local store stopped to the end. A
//!   restart of the same instance reads only the tail.
//! - Follow (`follow`; where it stands, `progress`; under `dedup.scope = "topic"`): every instance
//!   reads the whole changelog as it grows, the way a global table does; a
//!   partition's first batch waits until what was there at its assignment
//!   is applied.
//!
//! Topic: `<group_id>-dedup-changelog` unless `dedup.changelog.topic`
//! says, created at start when missing (as many partitions as the source
//! topic with the most, retention `retention_factor` times the window).
//! Source partition `p` writes to changelog partition `p % partitions`.
//!
//! A changelog that is gone took the ids with it: a store that has read a
//! changelog and finds it missing, or shorter than what it read, refuses
//! the partition (`dedup.on_missing_state = "fail"`), or runs it and
//! counts its records as unchecked (`"accept-duplicates"`).
//!
//! A member whose session expired but that still runs (a zombie) could
//! deliver and commit after the next owner restored. With
//! `source.transactions` (`transaction`) each batch's offsets commit in a
//! transaction under a transactional id per partition, which the next
//! owner initialises before it restores: the zombie's next commit is
//! refused, and it stops after the batch it was in.

pub(crate) mod follow;
pub(crate) mod message;
pub(crate) mod progress;
pub mod restore;
pub(crate) mod transaction;

use std::time::{Duration, Instant};

use rdkafka::producer::future_producer::DeliveryFuture;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rocksdb::WriteBatch;

use crate::config::Config;
use crate::custody::ids::IdDigest;
use crate::pipeline::driver::{IdLog, SentIds};
use crate::pipeline::error::PipelineError;
use crate::pipeline::kafka::events::{ChangelogPublished, ChangelogRefused};
use crate::sink::retry::RetryConfig;
use crate::source::kafka::config::KafkaSourceConfig;
use crate::source::kafka::{KafkaSourceError, admin};
use crate::store::Store;
use crate::store::dedup::DedupWindow;
use crate::store::dedup::config::{DedupScope, OnMissingState};
use crate::telemetry::InternalEvent;

/// At most this many ids per message (480 KB), under the brokers'
/// default `max.message.bytes` whatever `pipeline.batch_size` is.
const IDS_PER_MESSAGE: usize = 20_000;

#[derive(Debug, thiserror::Error)]
pub(crate) enum ChangelogError {
    #[error(
        "dedup changelog {topic}: {partition}: {why}. Its ids cannot be restored, so records its last owner \
         delivered would be delivered again. Restore the topic, or set dedup.on_missing_state = \
         \"accept-duplicates\" to run anyway and count what cannot be checked"
    )]
    Missing { topic: String, partition: String, why: String },
    #[error(
        "dedup changelog {topic} does not exist, but this state store has read it before ({known}): it was \
         deleted, and the ids in it are lost. Recreate it from a backup, or set dedup.on_missing_state = \
         \"accept-duplicates\" to create an empty one and run"
    )]
    Deleted { topic: String, known: String },
    #[error("dedup changelog {topic}: {what}")]
    Kafka { topic: String, what: String },
}

/// What `sluice check` says of the changelog (and `run` acts on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TopicState {
    Exists {
        partitions: i32,
        retention: Option<Duration>,
    },
    /// Missing: `run` creates it with this many partitions and retention.
    WillCreate {
        partitions: i32,
        retention: Duration,
    },
}

/// The changelog's topic as the brokers have it now.
pub(crate) fn topic_state(
    source: &KafkaSourceConfig,
    topic: &str,
    window: Duration,
    factor: u32,
) -> Result<TopicState, KafkaSourceError> {
    match admin::partition_count(source, topic)? {
        Some(partitions) => {
            // Brokers that cannot describe configs (librdkafka's mock
            // cluster) leave the retention unknown.
            let retention = admin::retentions(source, &[topic.to_string()]).ok().and_then(|r| r.into_iter().next());
            Ok(TopicState::Exists { partitions, retention: retention.flatten() })
        }
        None => Ok(TopicState::WillCreate {
            partitions: admin::source_partition_count(source)?.max(1),
            retention: window.saturating_mul(factor),
        }),
    }
}

/// A warning when an existing changelog keeps ids for less than the window.
pub(crate) fn retention_warning(retention: Option<Duration>, window: Duration) -> Option<String> {
    match retention {
        Some(r) if r < window => Some(format!(
            "its retention {} is shorter than the dedup window {}: ids older than that are not restored on another \
             instance; raise retention.ms",
            crate::units::display(r),
            crate::units::display(window)
        )),
        _ => None,
    }
}

/// The dedup window's changelog topic: what a member delivered, so the
/// member that takes a partition over restores its window first.
pub struct Changelog<'s> {
    /// The changelog topic's name.
    pub topic: String,
    partitions: i32,
    producer: FutureProducer,
    source: KafkaSourceConfig,
    store: &'s Store,
    dedup: &'s DedupWindow<'s>,
    scope: DedupScope,
    on_missing: OnMissingState,
    retry: RetryConfig,
    /// Under the topic scope: the follower's progress.
    pub(crate) follow: Option<progress::Progress>,
    /// The restore reader, kept between the restores of a burst of
    /// assignments (the supervisor restores one partition at a time) and
    /// closed once every assigned partition is open: a client is a main
    /// thread, a thread per broker and buffers.
    pub(super) readers: std::sync::Mutex<Vec<rdkafka::consumer::BaseConsumer>>,
    /// Where changelog partitions end, asked for a burst of assigned
    /// partitions at once (`restore::prefetch_ends`): their restores, one
    /// after the other, do not each make a round trip to a broker that a
    /// thousand new fetches keep busy.
    pub(super) known_ends: std::sync::Mutex<std::collections::HashMap<i32, (i64, i64)>>,
}

impl<'s> Changelog<'s> {
    /// The changelog of a Kafka pipeline, its topic created when missing;
    /// `None` when `dedup.changelog.enabled = false`.
    pub fn open(
        cfg: &Config,
        source: &KafkaSourceConfig,
        store: &'s Store,
        dedup: &'s DedupWindow<'s>,
        stop: &crate::pipeline::stop::Stop,
    ) -> Result<Option<Changelog<'s>>, PipelineError> {
        let Some(topic) = cfg.changelog_topic() else { return Ok(None) };
        let kafka = |e: KafkaSourceError| ChangelogError::Kafka { topic: topic.clone(), what: e.to_string() };
        let window = dedup.window();
        // Brokers that are down at the start are waited for, as the
        // consumer waits for them: a pod started before its brokers is not
        // ready (and says why), rather than a crash loop.
        let mut backoff = std::time::Duration::from_millis(500);
        let state = loop {
            match topic_state(source, &topic, window, cfg.dedup.changelog.retention_factor) {
                Ok(state) => break state,
                Err(e) if stop.requested() => return Err(kafka(e).into()),
                Err(e) => {
                    tracing::warn!(topic, "cannot look up the dedup changelog yet, retrying in {backoff:?}: {e}");
                    let until = std::time::Instant::now() + backoff;
                    while std::time::Instant::now() < until && !stop.requested() {
                        std::thread::sleep(std::time::Duration::from_millis(50));
                    }
                    backoff = (backoff * 2).min(std::time::Duration::from_secs(10));
                }
            }
        };
        let partitions = match state {
            TopicState::Exists { partitions, retention } => {
                if let Some(w) = retention_warning(retention, window) {
                    tracing::warn!(topic, "dedup changelog: {w}");
                }
                partitions
            }
            TopicState::WillCreate { partitions, retention } => {
                if store.knows_a_changelog()? {
                    let known = "its positions are in the store's checkpoints".to_string();
                    if cfg.dedup.on_missing_state == OnMissingState::Fail {
                        return Err(ChangelogError::Deleted { topic, known }.into());
                    }
                    tracing::warn!(
                        topic,
                        "dedup changelog is gone though this store read it before; creating an empty one \
                             (dedup.on_missing_state = \"accept-duplicates\"): what it held is delivered again"
                    );
                }
                let configs =
                    [("retention.ms", retention.as_millis().to_string()), ("cleanup.policy", "delete".to_string())];
                admin::create_topic(source, &topic, partitions, &configs).map_err(|e| ChangelogError::Kafka {
                    topic: topic.clone(),
                    what: format!(
                        "it does not exist and cannot be created ({e}): create it ({partitions} partitions, \
                             retention.ms {}), or set dedup.changelog.enabled = false",
                        retention.as_millis()
                    ),
                })?;
                tracing::info!(
                    topic,
                    partitions,
                    retention = crate::units::display(retention),
                    "dedup changelog created"
                );
                partitions
            }
        };
        // A batch of a member's partitions sends a message per partition at
        // once. With no linger each send woke the producer's broker thread,
        // which then looked at every partition of the changelog: per batch,
        // partitions × partitions, on a thread that is the member's busiest
        // at a thousand partitions (`benches/README.md`, issue 57). A
        // millisecond let one wake-up take the batch's messages (9.7 µs a
        // record at 1,024 partitions, against 15.8 µs without); five take
        // the next few batches' too (8.0–8.6 µs against 9.2–11.9 at one, in
        // the same session; ten were no better and doubled p50 at 4
        // partitions). A back waits for the previous batch's ids before it
        // delivers the next (`driver/back.rs`), so a batch may wait up to
        // the linger: p50 at 4 partitions went from 12–16 ms to 16–20 ms,
        // and the wall did not move.
        let producer = crate::source::kafka::client::producer_config(&source.connection, &Default::default())?
            .set("linger.ms", "5")
            .create()
            .map_err(KafkaSourceError::client("create the dedup changelog's producer"))?;
        Ok(Some(Changelog {
            topic,
            partitions,
            producer,
            source: source.clone(),
            store,
            dedup,
            scope: cfg.dedup.scope,
            on_missing: cfg.dedup.on_missing_state,
            retry: RetryConfig::default(),
            follow: None,
            readers: Default::default(),
            known_ends: Default::default(),
        }))
    }

    /// The changelog partition of a source partition.
    fn partition_of(&self, source_partition: i32) -> i32 {
        source_partition.rem_euclid(self.partitions.max(1))
    }

    /// Hand the messages to the producer; their delivery reports come later.
    fn send_all(&self, key: &str, partition: i32, values: &[Vec<u8>]) -> Vec<Result<DeliveryFuture, String>> {
        self.send_with(&self.producer, key, partition, values)
    }

    /// The same, by `producer` (a partition's transactional one).
    fn send_with(
        &self,
        producer: &FutureProducer,
        key: &str,
        partition: i32,
        values: &[Vec<u8>],
    ) -> Vec<Result<DeliveryFuture, String>> {
        values
            .iter()
            .map(|v| {
                let record = FutureRecord::<str, [u8]>::to(&self.topic).key(key).payload(v).partition(partition);
                producer.send_result(record).map_err(|(e, _)| e.to_string())
            })
            .collect()
    }
}

/// Wait for every report: the highest offset written, or the first error.
fn reports(sent: Vec<Result<DeliveryFuture, String>>) -> Result<i64, String> {
    let mut last = -1;
    for r in sent {
        let delivery = futures::executor::block_on(r?).map_err(|_| "the producer closed".to_string())?;
        let delivered = delivery.map_err(|(e, _)| e.to_string())?;
        last = last.max(delivered.offset);
    }
    Ok(last)
}

/// One batch's ids, sent, their reports not yet read.
struct Sent<'l> {
    changelog: &'l Changelog<'l>,
    key: String,
    partition: i32,
    values: Vec<Vec<u8>>,
    ids: usize,
    reports: Vec<Result<DeliveryFuture, String>>,
    started: Instant,
}

impl SentIds for Sent<'_> {
    /// A broker that does not take the ids makes the partition wait and
    /// retry, as a sick sink does (late, visible as lag; never lost). A
    /// retry sends the batch's messages again: a restore applies an id
    /// twice as once.
    fn wait(self: Box<Self>, stopping: &dyn Fn() -> bool) -> Result<Option<i64>, PipelineError> {
        let Sent { changelog, key, partition, values, ids, reports: mut pending, started } = *self;
        let mut round = 0;
        loop {
            match reports(std::mem::take(&mut pending)) {
                Ok(offset) => {
                    ChangelogPublished { partition: &key, ids, seconds: started.elapsed().as_secs_f64() }.emit();
                    return Ok(Some(offset));
                }
                Err(e) => {
                    ChangelogRefused { partition: &key, topic: &changelog.topic, error: &e, round }.emit();
                    let until = Instant::now() + changelog.retry.backoff(round);
                    round = round.saturating_add(1);
                    while Instant::now() < until {
                        if stopping() {
                            return Ok(None);
                        }
                        std::thread::sleep(
                            until.saturating_duration_since(Instant::now()).min(Duration::from_millis(50)),
                        );
                    }
                    pending = changelog.send_all(&key, partition, &values);
                }
            }
        }
    }
}

impl IdLog for Changelog<'_> {
    fn send<'l>(&'l self, partition: &str, now_secs: u64, ids: &[IdDigest]) -> Box<dyn SentIds + 'l> {
        let target = self.partition_of(crate::source::kafka::split_partition_name(partition).1.max(0));
        let values: Vec<Vec<u8>> = ids.chunks(IDS_PER_MESSAGE).map(|c| message::encode(now_secs, c)).collect();
        let reports = self.send_all(partition, target, &values);
        Box::new(Sent {
            changelog: self,
            key: partition.to_string(),
            partition: target,
            values,
            ids: ids.len(),
            reports,
            started: Instant::now(),
        })
    }

    /// Under the partition scope this partition's owner is the only writer
    /// of its key: the store knows the changelog through `acked`. (The
    /// topic scope's follower keeps its own positions.)
    fn remember(&self, partition: &str, acked: i64, write: &mut WriteBatch) -> Result<(), PipelineError> {
        if self.scope == DedupScope::Partition {
            self.store.put_changelog_position(write, partition, acked + 1)?;
        }
        Ok(())
    }
}

impl From<ChangelogError> for PipelineError {
    fn from(e: ChangelogError) -> Self {
        PipelineError::Changelog(Box::new(e))
    }
}
