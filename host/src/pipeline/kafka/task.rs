//! One assigned partition on the driver: its reader polls the partition's
//! own librdkafka queue (split off the consumer queue at assignment) into
//! batches of up to `pipeline.batch_size` within `source.linger`. Its
//! finished prefix is published by the driver
//! (`PartitionState::committable`) once durable, and the consume loop
//! commits it to the group.
//!
//! Back-pressure is not polling: while the driver has no credit for
//! another batch it does not pull, the queue fills to librdkafka's own
//! bound (`queued.min.messages` records, `queued.max.messages.kbytes`,
//! per partition once split) and librdkafka stops fetching the partition
//! until it drains. Nothing is paused, dropped or fetched twice.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use rdkafka::consumer::BaseConsumer;
use rdkafka::consumer::base_consumer::PartitionQueue;

use super::Tasks;
use super::changelog::restore::Restored;
use super::changelog::transaction::PartitionTransactions;
use super::rebalance::Context;
use crate::batch::{Pull, Pulled};
use crate::config::DedupScope;
use crate::custody::ids::{Scope, scope, topic_scope};
use crate::custody::standing::PartitionState;
use crate::pipeline::driver::{self, IdLog, Keeper, Partition, Reader, Shared};
use crate::pipeline::kafka::events::UncheckedRecords;
use crate::pipeline::{PipelineError, build_chain};
use crate::plugin::Chain;
use crate::source::kafka::record::MessageBatch;
use crate::telemetry::InternalEvent;

/// What the consume loop hands a partition's task.
pub(super) struct Handed<'s> {
    pub queue: PartitionQueue<Context>,
    /// Raised on revoke and shutdown.
    pub stop: &'s AtomicBool,
    pub state: &'s Arc<Mutex<PartitionState>>,
    pub consumer: Weak<BaseConsumer<Context>>,
}

pub(super) fn run(
    tasks: &Tasks<'_>,
    (topic, number, name): (&str, i32, &str),
    handed: Handed<'_>,
) -> Result<(), PipelineError> {
    let Handed { queue, stop, state, consumer } = handed;
    let chain = if tasks.reads_events {
        Chain::checked_passthrough()
    } else {
        let chain = build_chain(tasks.runtime, tasks.cfg)?;
        crate::telemetry::history::HISTORY.set_plugins(chain.stages().iter().map(|s| s.id().to_string()).collect());
        chain
    };
    // Raised when the partition's transactions are fenced: it has a new
    // owner, and this task must stop as on a revoke.
    let fenced = AtomicBool::new(false);
    let stopping = || stop.load(Ordering::SeqCst) || fenced.load(Ordering::SeqCst);
    // Before the restore: initialising the partition's transactional id
    // fences its last owner and ends what it left open, so what is
    // restored is settled.
    let transactions = match tasks.changelog.filter(|_| tasks.transactions) {
        Some(changelog) => {
            match PartitionTransactions::start(changelog, (topic, number), consumer, &fenced, &stopping)? {
                Some(t) => Some(t),
                None => return Ok(()),
            }
        }
        None => None,
    };
    let shared = match &transactions {
        Some(t) => Shared { changelog: Some(t as &dyn IdLog), ..tasks.shared.clone() },
        None => tasks.shared.clone(),
    };
    // The partition's ids, from its last owner's changelog, before its
    // first batch: not ready meanwhile. Records queued by librdkafka wait.
    let unchecked = match tasks.changelog {
        Some(changelog) => match changelog.restore(name, number, &stopping)? {
            Restored::Done => false,
            Restored::Unchecked => true,
            Restored::Stopped => return Ok(()),
        },
        None => false,
    };
    state.lock().unwrap_or_else(|p| p.into_inner()).restored = true;
    let scope = match tasks.cfg.dedup.scope {
        DedupScope::Partition => scope(name),
        DedupScope::Topic => topic_scope(topic),
    };
    let mut reader = KafkaReader {
        queue,
        stop,
        linger: tasks.linger,
        scope,
        topic: Arc::from(topic),
        name,
        unchecked,
        events: tasks.reads_events,
        batch_bytes: 0,
    };
    // Starts at the first record received: the group's committed offset,
    // or past a compaction hole.
    let partition = Partition { name, start: None, chain, stopping: &stopping, state: state.clone() };
    driver::drive(&shared, partition, &mut reader, &mut PublishedByTheDriver)
}

/// How long one wait for the first record of a batch lasts: the bound on
/// noticing `stop` while the partition is idle.
const IDLE_POLL: Duration = Duration::from_millis(50);

struct KafkaReader<'a> {
    queue: PartitionQueue<Context>,
    stop: &'a AtomicBool,
    linger: Duration,
    /// The partition's dedup scope, computed once.
    scope: Scope,
    /// Shared by every record's position: no topic name allocated per record.
    topic: Arc<str>,
    name: &'a str,
    /// The partition's ids could not be restored (accept-duplicates): its
    /// records are counted as looked up against an incomplete window.
    unchecked: bool,
    /// Its records are events a front wrote (`repartition::decode`).
    events: bool,
    /// The last batch's bytes: the next batch's buffer starts this large.
    batch_bytes: usize,
}

impl KafkaReader<'_> {
    /// Copy the next message into `batch`, waiting at most `wait`; false
    /// when none came. Never polls once the task is told to stop: after a
    /// revoke, what the queue holds belongs to the partition's next
    /// assignment.
    fn next(&mut self, wait: Duration, batch: &mut MessageBatch) -> bool {
        if self.stop.load(Ordering::SeqCst) {
            return false;
        }
        match self.queue.poll(wait) {
            Some(Ok(m)) => {
                batch.push(&m);
                true
            }
            // Fetch errors are retried by librdkafka, and the consume loop
            // reports the client's own: this batch ends here.
            Some(Err(e)) => {
                tracing::debug!(partition = self.name, "kafka: {e}");
                false
            }
            None => false,
        }
    }
}

impl Reader for KafkaReader<'_> {
    fn pull(&mut self, max: usize) -> Result<Option<Pull>, PipelineError> {
        if self.stop.load(Ordering::SeqCst) {
            return Ok(None);
        }
        let mut batch = MessageBatch::default();
        if !self.next(IDLE_POLL, &mut batch) {
            // What the partition still holds comes from librdkafka's
            // statistics (`Context::stats`), not from here.
            return Ok(Some(Pull { records: Vec::new(), scope: self.scope, received: Instant::now(), behind: None }));
        }
        // One clock read per batch: the arrival of its first record.
        let received = Instant::now();
        // Every message of the batch is copied into one buffer, sized like
        // the last batch's once a message came (an idle poll allocates
        // nothing).
        batch.reserve(max.min(4096), self.batch_bytes);
        // What librdkafka already holds, without waiting; then fill the
        // batch for at most `linger`: a batch of a few records costs its
        // syncs as much as a full one. Every record polled joins the batch:
        // one taken from the queue and not kept would be skipped by the
        // commit.
        let deadline = received + self.linger;
        while batch.len() < max {
            if self.next(Duration::ZERO, &mut batch) {
                continue;
            }
            let wait = deadline.saturating_duration_since(Instant::now());
            if wait.is_zero() || !self.next(wait, &mut batch) {
                break;
            }
        }
        self.batch_bytes = batch.bytes().min(4 << 20);
        let events = self.events;
        let records: Vec<Pulled> = batch
            .finish(&self.topic)
            .map(|r| {
                let mut record = r.record;
                // Refused (and quarantined) when no front wrote it.
                let refused = if events { super::repartition::decode(&mut record).err() } else { None };
                Pulled { start: r.offset as u64, next: r.offset as u64 + 1, record, refused }
            })
            .collect();
        if self.unchecked {
            UncheckedRecords { partition: self.name, records: records.len() }.emit();
        }
        Ok(Some(Pull { records, scope: self.scope, received, behind: None }))
    }
}

/// A Kafka partition keeps nothing in the store's write: the driver
/// publishes its durable prefix, and the consume loop commits it.
struct PublishedByTheDriver;

impl Keeper for PublishedByTheDriver {}
