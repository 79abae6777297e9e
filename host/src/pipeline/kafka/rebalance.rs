//! The consumer's context: what happens when the group moves partitions,
//! when a commit is acknowledged, and when librdkafka reports statistics.
//! Every callback runs on the consume loop's thread, inside `poll`.
//!
//! - Assign: each new partition's fetch queue is split off librdkafka's
//!   consumer queue (before the assignment takes effect, so that no record
//!   of it reaches the consumer queue) and handed to a new task (started by
//!   the supervisor, see `mod.rs`), which polls it itself; fetching starts
//!   at the group's committed offset.
//! - Revoke: the partition's task stops after the batch in progress; its
//!   finished prefix is committed synchronously before the callback returns
//!   (so the next owner starts exactly there); whatever it held beyond that
//!   is dropped, and the next owner reads it again.
//!
//! Eager and cooperative assignment look the same from here: the callbacks
//! name only the partitions that move.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Sender, SyncSender};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::base_consumer::PartitionQueue;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::statistics::Statistics;
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use crate::custody::standing::PartitionState;
use crate::pipeline::kafka::events::{OffsetsCommitted, Progress, Rebalanced};
use crate::source::kafka::partition_name;
use crate::telemetry::InternalEvent;

pub(crate) type Tp = (String, i32);

/// A partition's name and the state its task publishes.
pub(crate) type Part = (String, Arc<Mutex<PartitionState>>);

impl Handle {
    /// Its dedup ids are in the store: it may count as ready.
    pub(crate) fn restored(&self) -> bool {
        self.state.lock().map(|s| s.restored).unwrap_or(false)
    }

    pub(crate) fn part(&self) -> Part {
        (self.name.clone(), self.state.clone())
    }
}

/// A partition this instance owns, as the consume loop sees it. Its
/// records never pass through here: its task polls the partition's own
/// librdkafka queue.
pub(crate) struct Handle {
    pub name: String,
    pub stop: Arc<AtomicBool>,
    pub state: Arc<Mutex<PartitionState>>,
}

/// What the consume loop asks of the supervisor, which owns the tasks.
pub(crate) enum Command {
    Start {
        tp: Tp,
        /// The partition's fetch queue, split off the consumer queue.
        queue: PartitionQueue<Context>,
        stop: Arc<AtomicBool>,
        state: Arc<Mutex<PartitionState>>,
        /// The member's consumer, for a transaction's group metadata.
        consumer: Weak<BaseConsumer<Context>>,
    },
    /// Join these partitions' tasks, then answer.
    Stop {
        tps: Vec<Tp>,
        done: SyncSender<()>,
    },
    Exit,
}

pub(crate) struct Context {
    pub registry: Mutex<HashMap<Tp, Handle>>,
    pub commands: Mutex<Sender<Command>>,
    /// How long a revoke waits for a task to finish its batch.
    pub revoke_wait: Duration,
    /// The consumer itself, to split partition queues from inside the
    /// rebalance callback (which only lends it). Weak: the consumer owns
    /// this context.
    pub consumer: OnceLock<Weak<BaseConsumer<Context>>>,
    /// The pipeline the member works for (`telemetry::labels`): the
    /// statistics arrive on a thread of librdkafka's.
    pub pipeline: Option<std::sync::Arc<str>>,
}

impl Context {
    fn lock_registry(&self) -> std::sync::MutexGuard<'_, HashMap<Tp, Handle>> {
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stop the tasks of `tps` (after their batch in progress) and wait for
    /// them, at most `revoke_wait`. Returns the handles, whose states hold
    /// the finished prefixes.
    pub(crate) fn stop_tasks(&self, tps: &[Tp]) -> Vec<Handle> {
        let handles: Vec<Handle> = {
            let mut reg = self.lock_registry();
            tps.iter().filter_map(|tp| reg.remove(tp)).collect()
        };
        for h in &handles {
            h.stop.store(true, Ordering::SeqCst);
        }
        let (done, wait) = std::sync::mpsc::sync_channel(1);
        let sent =
            self.commands.lock().map(|c| c.send(Command::Stop { tps: tps.to_vec(), done }).is_ok()).unwrap_or(false);
        if sent && wait.recv_timeout(self.revoke_wait).is_err() {
            tracing::warn!(
                "a task did not finish its batch within {:?}; committing the prefix finished so far",
                self.revoke_wait
            );
        }
        handles
    }

    /// Commit the finished prefixes of `handles` synchronously.
    /// `parts` are (name, state) pairs of partitions this instance owns.
    /// Every commit is made on the consume loop's thread (periodic, revoke,
    /// shutdown), so commits never overlap: a later one can never carry an
    /// older prefix over a newer one, and a revoked partition is out of the
    /// registry before the next periodic commit reads it.
    pub(crate) fn commit_sync(&self, consumer: &BaseConsumer<Context>, parts: &[Part], reason: &'static str) {
        let mut tpl = TopicPartitionList::new();
        let mut committing = Vec::new();
        for (name, state) in parts {
            let st = state.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(offset) = st.committable.filter(|c| Some(*c) > st.committed) {
                let (topic, partition) = crate::source::kafka::split_partition_name(name);
                if tpl.add_partition_offset(topic, partition, Offset::Offset(offset)).is_ok() {
                    committing.push((name.clone(), offset));
                }
            }
        }
        if committing.is_empty() {
            return;
        }
        let t = Instant::now();
        let result = consumer.commit(&tpl, CommitMode::Sync);
        if result.is_ok() {
            for (name, state) in parts {
                let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
                let sent = committing.iter().find(|(n, _)| n == name).map(|(_, o)| *o);
                st.committed = st.committed.max(sent);
            }
        }
        OffsetsCommitted {
            partitions: &committing,
            seconds: t.elapsed().as_secs_f64(),
            error: result.err().map(|e| e.to_string()),
            reason,
        }
        .emit();
    }
}

fn tps(tpl: &TopicPartitionList) -> Vec<Tp> {
    tpl.elements().iter().map(|e| (e.topic().to_string(), e.partition())).collect()
}

impl ClientContext for Context {
    /// librdkafka's own log, into sluice's (`SLUICE_LOG=rdkafka=debug`;
    /// the `debug` property chooses what librdkafka says).
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        use RDKafkaLogLevel::*;
        match level {
            Emerg | Alert | Critical | Error => tracing::error!(target: "rdkafka", fac, "{message}"),
            Warning => tracing::warn!(target: "rdkafka", fac, "{message}"),
            Notice | Info => tracing::info!(target: "rdkafka", fac, "{message}"),
            Debug => tracing::debug!(target: "rdkafka", fac, "{message}"),
        }
    }

    /// Each partition's progress for the metrics, from librdkafka's
    /// statistics (`statistics.interval.ms`, 1 s in sluice): the high
    /// watermark the last fetch response carried, and how many records its
    /// queue holds. Never a request of its own: a watermark query that
    /// times out on a slow broker makes librdkafka drop the connection
    /// (`socket.max.fails` = 1), fetches in flight included, and queries
    /// once a second kept a loaded tansu from ever answering a fetch.
    fn stats(&self, statistics: Statistics) {
        crate::telemetry::labels::within(self.pipeline.clone(), || self.progress(&statistics));
    }
}

impl Context {
    fn progress(&self, statistics: &Statistics) {
        let reg = self.lock_registry();
        for (tp, h) in reg.iter() {
            let part = statistics.topics.get(&tp.0).and_then(|t| t.partitions.get(&tp.1));
            let mut st = h.state.lock().unwrap_or_else(|p| p.into_inner());
            // What the partition holds beyond what was read: the
            // watchdog's "records wait" when nothing is out.
            if let Some(lag) = part.map(|p| p.consumer_lag).filter(|l| *l >= 0) {
                st.source_behind = Some(lag as u64);
            }
            Progress {
                partition: &h.name,
                high_watermark: part.map(|p| p.hi_offset).filter(|h| *h >= 0),
                committed: st.committed,
                oldest_age_seconds: st.oldest.map(|t| t.elapsed().as_secs_f64()).unwrap_or(0.0),
                prefetched: part.map(|p| p.fetchq_cnt),
            }
            .emit();
        }
    }
}

impl ConsumerContext for Context {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Revoke(tpl) => {
                let lost = consumer.assignment_lost();
                let handles = self.stop_tasks(&tps(tpl));
                // A lost assignment (session timed out) cannot commit: the
                // group has moved on. The next owner re-reads what was
                // unfinished, and the dedup window absorbs what was not.
                if !lost {
                    self.commit_sync(consumer, &handles.iter().map(Handle::part).collect::<Vec<_>>(), "revoke");
                }
                for h in &handles {
                    let committed = h.state.lock().ok().and_then(|s| s.committed);
                    Rebalanced { partition: &h.name, kind: if lost { "lost" } else { "revoked" }, committed }.emit();
                }
            }
            // Before librdkafka assigns: a queue split afterwards could
            // miss the first fetch, which would go to the consumer queue.
            Rebalance::Assign(tpl) => self.start_tasks(tpl),
            Rebalance::Error(e) => tracing::error!("rebalance error: {e}"),
        }
    }
}

impl Context {
    /// Split each newly assigned partition's queue and start its task.
    fn start_tasks(&self, tpl: &TopicPartitionList) {
        let Some(consumer) = self.consumer.get().and_then(Weak::upgrade) else { return };
        let mut reg = self.lock_registry();
        for tp in tps(tpl) {
            if reg.contains_key(&tp) {
                continue;
            }
            let name = partition_name(&tp.0, tp.1);
            // Only an invalid topic name (an interior NUL) fails here; the
            // group could not have assigned it.
            let Some(queue) = consumer.split_partition_queue(&tp.0, tp.1) else {
                tracing::error!(partition = name, "cannot split the partition's queue; not consuming it");
                continue;
            };
            let stop = Arc::new(AtomicBool::new(false));
            let state = Arc::new(Mutex::new(PartitionState::default()));
            let start = Command::Start {
                tp: tp.clone(),
                queue,
                stop: stop.clone(),
                state: state.clone(),
                consumer: Arc::downgrade(&consumer),
            };
            if self.commands.lock().map(|c| c.send(start).is_err()).unwrap_or(true) {
                continue;
            }
            Rebalanced { partition: &name, kind: "assigned", committed: None }.emit();
            reg.insert(tp, Handle { name, stop, state });
        }
    }
}
