//! One assigned partition on the driver, a lane of the member's pool of
//! workers: its reader takes what the partition's own librdkafka queue
//! (split off the consumer queue at assignment) holds, without waiting,
//! and its worker fills batches of up to `pipeline.batch_size` from its
//! lanes within `source.linger`. Its
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

use super::changelog::Changelog;
use super::changelog::restore::Restored;
use super::changelog::transaction::PartitionTransactions;
use super::rebalance::Context;
use crate::batch::{Pull, Pulled};
use crate::config::Config;
use crate::custody::ids::{Scope, scope, topic_scope};
use crate::custody::standing::PartitionState;
use crate::pipeline::driver::{self, Doorbell, IdLog, Keeper, Lane, LaneDone, Partition, Pool, Reader, Shared};
use crate::pipeline::error::PipelineError;
use crate::pipeline::kafka::events::UncheckedRecords;
use crate::pipeline::setup::build_chain;
use crate::plugin::chain::Chain;
use crate::plugin::engine::Runtime;
use crate::source::kafka::record::MessageBatch;
use crate::store::dedup::config::DedupScope;
use crate::telemetry::InternalEvent;

/// What every partition task of a Kafka run shares.
pub(crate) struct Tasks<'a> {
    /// The config the run was built from: the member's own settings and
    /// each task's chain come from it.
    pub cfg: &'a Config,
    pub shared: Shared<'a>,
    pub runtime: &'a Runtime,
    /// The dedup changelog, when on: a task restores from it first.
    pub changelog: Option<&'a Changelog<'a>>,
    /// `source.transactions`: each task commits through its partition's
    /// transactions (`changelog::transaction`).
    pub transactions: bool,
    /// The partitions are `dedup.repartition`'s internal topic's: each
    /// record is an event (`repartition::decode`), with no plugin to run.
    pub reads_events: bool,
}

/// What the consume loop hands a partition's task.
pub(super) struct Handed {
    pub queue: PartitionQueue<Context>,
    /// Raised on revoke and shutdown.
    pub stop: Arc<AtomicBool>,
    pub state: Arc<Mutex<PartitionState>>,
    pub consumer: Weak<BaseConsumer<Context>>,
}

/// Open an assigned partition (its transactions, its restore) on this
/// thread, then run it: as a lane of the member's pool, returning at once
/// with the lane's handle; or, when its transactions are its own (each
/// partition has its own transactional producer and commits through it),
/// on a worker of its own, returning when it has ended. `None`: nothing
/// of it runs any more.
pub(super) fn run<'scope>(
    tasks: &'scope Tasks<'_>,
    pool: &Pool<'scope, '_>,
    (topic, number, name): (&str, i32, &str),
    handed: Handed,
) -> Result<Option<LaneDone>, PipelineError> {
    let Handed { queue, stop, state, consumer } = handed;
    // Raised when the partition's transactions are fenced: it has a new
    // owner, and this task must stop as on a revoke.
    let fenced = AtomicBool::new(false);
    let stopping = || stop.load(Ordering::SeqCst) || fenced.load(Ordering::SeqCst);
    // Before the restore: initialising the partition's transactional id
    // fences its last owner and ends what it left open, so what is
    // restored is settled.
    let transactions = match tasks.changelog.filter(|_| tasks.transactions) {
        Some(changelog) => {
            match PartitionTransactions::start(changelog, (topic, number), consumer.clone(), &fenced, &stopping)? {
                Some(t) => Some(t),
                None => return Ok(None),
            }
        }
        None => None,
    };
    // The partition's ids, from its last owner's changelog, before its
    // first batch: not ready meanwhile. Records queued by librdkafka wait.
    let unchecked = match tasks.changelog {
        Some(changelog) => match changelog.restore(name, number, &stopping, consumer.upgrade().as_deref())? {
            Restored::Done => false,
            Restored::Unchecked => true,
            Restored::Stopped => return Ok(None),
        },
        None => false,
    };
    state.lock().unwrap_or_else(|p| p.into_inner()).restored = true;
    let scope = match tasks.cfg.dedup.scope {
        DedupScope::Partition => scope(name),
        DedupScope::Topic => topic_scope(topic),
    };
    let name: Arc<str> = Arc::from(name);
    let reader = KafkaReader {
        queue,
        stop: stop.clone(),
        scope,
        topic: Arc::from(topic),
        name: name.clone(),
        unchecked,
        events: tasks.reads_events,
        batch_bytes: 0,
        hot: Arc::new(AtomicBool::new(true)),
    };
    let Some(transactions) = transactions else {
        // Starts at the first record received: the group's committed
        // offset, or past a compaction hole.
        let lane = Lane {
            name,
            start: None,
            reader: Box::new(reader),
            keeper: Box::new(PublishedByTheDriver),
            stopping: {
                let stop = stop.clone();
                Arc::new(move || stop.load(Ordering::SeqCst))
            },
            state,
        };
        return Ok(Some(pool.add(lane)));
    };
    let shared = Shared { changelog: Some(&transactions as &dyn IdLog), ..tasks.shared.clone() };
    let mut reader = reader;
    let partition = Partition { name: &name, start: None, chain: member_chain(tasks)?, stopping: &stopping, state };
    driver::drive(&shared, partition, &mut reader, &mut PublishedByTheDriver)?;
    Ok(None)
}

/// The plugin chain of one of the member's workers: none for events a
/// front checked (`dedup.repartition`'s back).
pub(super) fn member_chain(tasks: &Tasks<'_>) -> Result<Chain, PipelineError> {
    if tasks.reads_events {
        return Ok(Chain::checked_passthrough());
    }
    let chain = build_chain(tasks.runtime, tasks.cfg)?;
    crate::telemetry::history::HISTORY.set_plugins(chain.stages().iter().map(|s| s.id().to_string()).collect());
    Ok(chain)
}

struct KafkaReader {
    queue: PartitionQueue<Context>,
    stop: Arc<AtomicBool>,
    /// The partition's dedup scope, computed once.
    scope: Scope,
    /// Shared by every record's position: no topic name allocated per record.
    topic: Arc<str>,
    name: Arc<str>,
    /// The partition's ids could not be restored (accept-duplicates): its
    /// records are counted as looked up against an incomplete window.
    unchecked: bool,
    /// Its records are events a front wrote (`repartition::decode`).
    events: bool,
    /// The last batch's bytes: the next batch's buffer starts this large.
    batch_bytes: usize,
    /// Records may be queued: librdkafka said the queue went from empty to
    /// not, or the last pull stopped at its `max` rather than at the end.
    hot: Arc<AtomicBool>,
}

impl KafkaReader {
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
                tracing::debug!(partition = &*self.name, "kafka: {e}");
                false
            }
            None => false,
        }
    }
}

impl Reader for KafkaReader {
    fn pull(&mut self, max: usize) -> Result<Option<Pull>, PipelineError> {
        if self.stop.load(Ordering::SeqCst) {
            return Ok(None);
        }
        // Cleared before the queue is read: a record queued from here on
        // rings and sets it again.
        self.hot.store(false, Ordering::SeqCst);
        let mut batch = MessageBatch::default();
        if !self.next(Duration::ZERO, &mut batch) {
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
        // What librdkafka already holds, without waiting: the worker
        // lingers for all its partitions at once (`source.linger`). Every
        // record polled joins the batch: one taken from the queue and not
        // kept would be skipped by the commit.
        while batch.len() < max && self.next(Duration::ZERO, &mut batch) {}
        if batch.len() >= max {
            // Stopped at `max`, not at the end: more may be queued, and
            // librdkafka rings only when an empty queue fills.
            self.hot.store(true, Ordering::SeqCst);
        }
        self.batch_bytes = batch.bytes().min(4 << 20);
        let events = self.events;
        let records: Vec<Pulled> = batch
            .finish(&self.topic)
            .map(|r| {
                let mut record = r.record;
                // Refused (and quarantined) when no front wrote it.
                let refused = if events { super::by_id_value::decode(&mut record).err() } else { None };
                Pulled { start: r.offset as u64, next: r.offset as u64 + 1, record, refused }
            })
            .collect();
        if self.unchecked {
            UncheckedRecords { partition: &self.name, records: records.len() }.emit();
        }
        Ok(Some(Pull { records, scope: self.scope, received, behind: None }))
    }

    /// librdkafka rings the worker when the partition's queue goes from
    /// empty to not: an idle worker reads it at once, not at its next poll.
    fn wake_with(&mut self, bell: &Arc<Doorbell>) {
        let (bell, hot) = (bell.clone(), self.hot.clone());
        self.queue.set_nonempty_callback(move || {
            hot.store(true, Ordering::SeqCst);
            bell.ring();
        });
    }

    fn ready(&self) -> bool {
        self.hot.load(Ordering::SeqCst)
    }
}

/// A Kafka partition keeps nothing in the store's write: the driver
/// publishes its durable prefix, and the consume loop commits it.
struct PublishedByTheDriver;

impl Keeper for PublishedByTheDriver {}
