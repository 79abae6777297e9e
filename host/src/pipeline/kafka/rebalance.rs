//! The consumer's context: what happens when the group moves partitions,
//! when a commit is acknowledged, and when librdkafka reports statistics.
//! Every callback runs on the consume loop's thread, inside `poll`.
//!
//! - Assign: each new partition gets a bounded queue and a task (started by
//!   the supervisor, see `mod.rs`); fetching starts at the group's
//!   committed offset.
//! - Revoke: the partition's task stops after the batch in progress; its
//!   finished prefix is committed synchronously before the callback returns
//!   (so the next owner starts exactly there); whatever it held beyond that
//!   is dropped, and the next owner reads it again.
//!
//! Eager and cooperative assignment look the same from here: the callbacks
//! name only the partitions that move.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Sender, SyncSender};

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use crate::pipeline::driver::PartitionState;
use crate::source::kafka::partition_name;
use crate::source::kafka::record::KafkaRecord;
use crate::telemetry::events::{OffsetsCommitted, Rebalanced};

pub(crate) type Tp = (String, i32);

/// A partition's name and the state its task publishes.
pub(crate) type Part = (String, Arc<Mutex<PartitionState>>);

impl Handle {
    pub fn part(&self) -> Part {
        (self.name.clone(), self.state.clone())
    }
}

/// A partition this instance owns, as the consume loop sees it.
pub(crate) struct Handle {
    pub name: String,
    /// The task's queue, of runs of records (one send per poll burst, not
    /// per record). Bounded in records by `queued` against
    /// `queue_records`: a slow task fills it and the loop pauses the
    /// partition's fetching.
    pub tx: Sender<Vec<KafkaRecord>>,
    /// How many records the queue holds now (the task counts down).
    pub queued: Arc<AtomicUsize>,
    /// Records received while the queue was full, in order.
    pub held: VecDeque<KafkaRecord>,
    pub paused: bool,
    pub stop: Arc<AtomicBool>,
    pub state: Arc<Mutex<PartitionState>>,
    /// The rebalance generation that assigned it: records polled before
    /// (for an earlier owner of the same partition, this instance
    /// included) are not this task's; librdkafka fetches them again from
    /// the committed offset for it.
    pub since: u64,
}

/// What the consume loop asks of the supervisor, which owns the tasks.
pub(crate) enum Command {
    Start {
        tp: Tp,
        rx: std::sync::mpsc::Receiver<Vec<KafkaRecord>>,
        queued: Arc<AtomicUsize>,
        stop: Arc<AtomicBool>,
        state: Arc<Mutex<PartitionState>>,
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
    pub queue_records: usize,
    /// How long a revoke waits for a task to finish its batch.
    pub revoke_wait: Duration,
    /// Bumped by every rebalance: a poll burst's records belong to the
    /// assignment of the generation they were polled in (`Handle::since`).
    pub generation: AtomicU64,
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
                let (topic, partition) = split(name);
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

/// `topic/partition` back into its parts (topics never contain `/`).
fn split(name: &str) -> (&str, i32) {
    match name.rsplit_once('/') {
        Some((t, p)) => (t, p.parse().unwrap_or(-1)),
        None => (name, -1),
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
}

impl ConsumerContext for Context {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Revoke(tpl) => {
                self.generation.fetch_add(1, Ordering::SeqCst);
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
            Rebalance::Assign(_) => {}
            Rebalance::Error(e) => tracing::error!("rebalance error: {e}"),
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Assign(tpl) = rebalance else { return };
        let since = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let mut reg = self.lock_registry();
        for tp in tps(tpl) {
            if reg.contains_key(&tp) {
                continue;
            }
            let name = partition_name(&tp.0, tp.1);
            let (tx, rx) = std::sync::mpsc::channel();
            let stop = Arc::new(AtomicBool::new(false));
            let state = Arc::new(Mutex::new(PartitionState::default()));
            let queued = Arc::new(AtomicUsize::new(0));
            let start =
                Command::Start { tp: tp.clone(), rx, queued: queued.clone(), stop: stop.clone(), state: state.clone() };
            if self.commands.lock().map(|c| c.send(start).is_err()).unwrap_or(true) {
                continue;
            }
            Rebalanced { partition: &name, kind: "assigned", committed: None }.emit();
            reg.insert(tp, Handle { name, tx, queued, held: VecDeque::new(), paused: false, stop, state, since });
        }
        drop(reg);
        // A partition paused by its previous task starts afresh.
        if let Err(e) = consumer.resume(tpl) {
            tracing::debug!("resume after assign: {e}");
        }
    }
}
