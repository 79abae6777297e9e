//! The Kafka source's side of `sluice run`: a consumer group member.
//!
//! Threads: the consume loop (this module: polls, dispatches runs of
//! records to their partitions' queues, one send per partition per poll
//! burst, pauses and resumes fetching, commits), a supervisor that starts
//! and joins partition tasks, a sampler of progress for the metrics, and
//! one task per assigned partition (`task`: the partition driver, with its
//! own plugin instances). Tasks are OS threads: a batch is CPU-bound
//! WebAssembly and synchronous RocksDB, and must not stall a shared async
//! executor.
//!
//! The custody rule, for Kafka: a partition's committed offset is the
//! lowest offset that has not passed a door. The driver publishes a
//! partition's finished prefix only after the batch's ids and quarantine
//! entries are synced to the state store; the loop commits those prefixes
//! every `source.commit_interval` (so also when idle), on revoke
//! (`rebalance`) and on shutdown, all from the consume loop's thread; never across a gap (the tracker
//! does not offer one), never backwards (only a prefix beyond the last
//! acknowledged commit is sent).
//!
//! Memory is bounded (README, "Back-pressure"): per partition,
//! `pipeline.in_flight` batches between the queue and the commit,
//! `queue_records` queued (give or take one poll burst), and what was fetched when the queue
//! filled (held, at most one fetch's worth, until the partition resumes);
//! plus librdkafka's prefetch, bounded by `queued.max.messages.kbytes`
//! (and dropped by librdkafka when a partition pauses).

pub mod quarantine_topic;
mod rebalance;
mod task;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::{Message, TopicPartitionList};

use self::rebalance::{Command, Context, Tp};
use super::driver::Shared;
use super::{PipelineError, RunStats, Stop, identity, now_nanos, open_sink, with_committer};
use crate::config::{Config, DEFAULT_WINDOW, KafkaSourceConfig};
use crate::plugin::Runtime;
use crate::source::kafka::record::{KafkaRecord, from_message};
use crate::source::kafka::{KafkaSourceError, admin, client, partition_name};
use crate::store::Store;
use crate::store::dedup::DedupWindow;
use crate::telemetry::Health;
use crate::telemetry::events::{Paused, Progress};

/// What every partition task of a Kafka run shares.
pub(crate) struct Tasks<'a> {
    pub shared: Shared<'a>,
    pub runtime: &'a Runtime,
    /// How long a task waits to fill a batch (`source.linger`).
    pub linger: Duration,
}

/// The dedup window: the configured one, else the topics' retention (a
/// record can be replayed for as long as Kafka keeps it), else 7 days.
pub fn window(cfg: &Config, source: &KafkaSourceConfig) -> Duration {
    if let Some(w) = cfg.dedup.window {
        return w;
    }
    match admin::retention(source) {
        Ok(Some(r)) => r,
        Ok(None) => {
            tracing::warn!(
                "the topics keep records forever (or do not say): dedup window {}; set dedup.window",
                sluice_guest::duration::display(DEFAULT_WINDOW)
            );
            DEFAULT_WINDOW
        }
        Err(e) => {
            tracing::warn!(
                "cannot read the topics' retention ({e}): dedup window {}; set dedup.window",
                sluice_guest::duration::display(DEFAULT_WINDOW)
            );
            DEFAULT_WINDOW
        }
    }
}

/// Run as a member of the group until `stop`.
pub(super) fn run(
    cfg: &Config,
    source: &KafkaSourceConfig,
    runtime: &Runtime,
    stop: &Stop,
) -> Result<RunStats, PipelineError> {
    let health = Arc::new(Health::default());
    if let Some(addr) = cfg.metrics.listen {
        let bound = crate::telemetry::server::serve(addr, health.clone())
            .map_err(|e| KafkaSourceError::Other(e.to_string()))?;
        tracing::info!("metrics on http://{bound}/metrics");
    }
    crate::telemetry::install();
    let store = Store::open(&cfg.pipeline.state_dir, &identity(cfg))?;
    let dedup = DedupWindow::new(&store, window(cfg, source))?;
    dedup.expire((now_nanos() / 1_000_000_000) as u64)?;
    let sink = open_sink(cfg)?;
    let quarantine_topic =
        cfg.quarantine.topic.as_deref().map(|t| quarantine_topic::QuarantineTopic::new(source, t)).transpose()?;
    let stats = Mutex::new(RunStats::default());
    let started = Instant::now();
    with_committer(&store, |committer| {
        let tasks = Tasks {
            shared: Shared {
                cfg,
                store: &store,
                dedup: &dedup,
                sink: &sink,
                committer,
                quarantine_topic: quarantine_topic.as_ref(),
                stats: &stats,
            },
            runtime,
            linger: source.linger,
        };
        member(&tasks, source, stop, &health)
    })?;
    let mut stats = stats.into_inner().unwrap_or_default();
    stats.seconds = started.elapsed().as_secs_f64();
    Ok(stats)
}

/// Join the group, run until `stop`, leave the group.
fn member(tasks: &Tasks<'_>, source: &KafkaSourceConfig, stop: &Stop, health: &Health) -> Result<(), PipelineError> {
    let cfg = tasks.shared.cfg;

    let (commands, command_rx) = std::sync::mpsc::channel();
    let context = Context {
        registry: Mutex::new(HashMap::new()),
        commands: Mutex::new(commands),
        queue_records: source.queue_records.unwrap_or(4 * cfg.pipeline.batch_size),
        revoke_wait: cfg.shutdown.grace,
        generation: std::sync::atomic::AtomicU64::new(0),
    };
    let consumer: BaseConsumer<Context> = client::client_config(source)?
        .create_with_context(context)
        .map_err(KafkaSourceError::client("create the consumer"))?;
    let topics: Vec<&str> = source.topics.iter().map(String::as_str).collect();
    consumer.subscribe(&topics).map_err(KafkaSourceError::client(format!("subscribe to {topics:?}")))?;
    health.set_ready(true);

    let failure: Mutex<Option<PipelineError>> = Mutex::new(None);
    std::thread::scope(|scope| {
        let failure = &failure;
        scope.spawn(move || supervise(scope, tasks, command_rx, failure, stop));
        let consumer = &consumer;
        scope.spawn(move || sample_progress(consumer, stop));
        if let Err(e) = consume(consumer, source, stop, health)
            && let Ok(mut f) = failure.lock()
        {
            f.get_or_insert(e.into());
        }
        // Shutdown: stop every task after its batch, commit, leave the group.
        health.set_ready(false);
        let ctx = consumer.context();
        let all: Vec<Tp> = ctx.registry.lock().map(|r| r.keys().cloned().collect()).unwrap_or_default();
        let handles = ctx.stop_tasks(&all);
        ctx.commit_sync(consumer, &handles.iter().map(rebalance::Handle::part).collect::<Vec<_>>(), "shutdown");
        if let Ok(c) = ctx.commands.lock() {
            let _ = c.send(Command::Exit);
        }
    });
    consumer.unsubscribe();
    drop(consumer);
    match failure.into_inner().unwrap_or(None) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Starts a task per assigned partition and joins the tasks of revoked ones.
/// A task that fails (or panics) records the failure and stops the pipeline:
/// its unfinished records are read again by the next owner or the next run.
fn supervise<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    shared: &'scope Tasks<'env>,
    commands: Receiver<Command>,
    failure: &'scope Mutex<Option<PipelineError>>,
    stop: &'scope Stop,
) {
    let mut tasks: HashMap<Tp, std::thread::ScopedJoinHandle<'scope, ()>> = HashMap::new();
    let fail = move |e: PipelineError| {
        tracing::error!("{e}");
        if let Ok(mut f) = failure.lock() {
            f.get_or_insert(e);
        }
        stop.request();
    };
    while let Ok(cmd) = commands.recv() {
        match cmd {
            Command::Start { tp, rx, queued, stop: task_stop, state } => {
                let name = partition_name(&tp.0, tp.1);
                let spawned =
                    std::thread::Builder::new().name(format!("sluice-{name}")).spawn_scoped(scope, move || {
                        let (runtime, linger, shared) = (shared.runtime, shared.linger, &shared.shared);
                        if let Err(e) = task::run(shared, runtime, linger, &name, (rx, &queued), &task_stop, &state) {
                            fail(e);
                        }
                    });
                match spawned {
                    Ok(h) => {
                        if let Some(old) = tasks.insert(tp, h) {
                            let _ = old.join();
                        }
                    }
                    Err(e) => fail(PipelineError::Panicked(format!("cannot start a task: {e}"))),
                }
            }
            Command::Stop { tps, done } => {
                for tp in tps {
                    if let Some(h) = tasks.remove(&tp)
                        && h.join().is_err()
                    {
                        fail(PipelineError::Panicked(partition_name(&tp.0, tp.1)));
                    }
                }
                let _ = done.send(());
            }
            Command::Exit => break,
        }
    }
    for (tp, h) in tasks {
        if h.join().is_err() {
            fail(PipelineError::Panicked(partition_name(&tp.0, tp.1)));
        }
    }
}

/// The consume loop: poll, dispatch, unpause, and every `commit_interval`
/// (so also when idle) commit each owned partition's finished prefix
/// beyond the last acknowledged one. Commits are synchronous and made
/// here, on the thread that serves rebalances: a commit can then never
/// wait on a rebalance that waits on it. (A commit's answer is what
/// `committed` records; rdkafka's callback does not fire for asynchronous
/// commits, rust-rdkafka issue #856.) A failed commit is carried by the
/// next one.
fn consume(
    consumer: &BaseConsumer<Context>,
    source: &KafkaSourceConfig,
    stop: &Stop,
    health: &Health,
) -> Result<(), KafkaSourceError> {
    let ctx = consumer.context();
    let mut last_commit = Instant::now();
    let mut last_error: Option<(String, Instant)> = None;
    while !stop.requested() {
        health.beat();
        match consumer.poll(Duration::from_millis(50)) {
            Some(Ok(m)) => {
                let mut burst = Burst::new(ctx.generation.load(Ordering::SeqCst));
                burst.add(&m);
                drop(m);
                // What else librdkafka already has: taken without waiting,
                // then handed over one run per partition. A rebalance
                // inside a poll ends the burst before the message it
                // returns: the runs so far belong to the old assignment.
                // No more than a queue's worth: what does not fit is held,
                // and held records are bounded by one burst.
                while burst.records < BURST_RECORDS.min(ctx.queue_records) {
                    match consumer.poll(Duration::ZERO) {
                        Some(Ok(m)) => {
                            let now = ctx.generation.load(Ordering::SeqCst);
                            if now != burst.generation {
                                std::mem::replace(&mut burst, Burst::new(now)).dispatch(consumer);
                            }
                            burst.add(&m);
                        }
                        Some(Err(e)) => {
                            tracing::debug!("kafka: {e}");
                            break;
                        }
                        None => break,
                    }
                }
                burst.dispatch(consumer);
            }
            Some(Err(e)) => {
                // Broker and fetch errors are retried by librdkafka; say
                // each distinct one, not each repetition.
                let text = e.to_string();
                if last_error.as_ref().is_none_or(|(t, at)| *t != text || at.elapsed() > Duration::from_secs(30)) {
                    tracing::warn!("kafka: {text}");
                    last_error = Some((text, Instant::now()));
                }
                // A subscription the brokers refuse cannot heal by waiting.
                if matches!(e, KafkaError::Subscription(_)) {
                    stop.request();
                    return Err(KafkaSourceError::Client { what: "subscribe".into(), source: e });
                }
            }
            None => {}
        }
        unpause(consumer);
        if last_commit.elapsed() >= source.commit_interval {
            let parts: Vec<rebalance::Part> =
                ctx.registry.lock().map(|r| r.values().map(rebalance::Handle::part).collect()).unwrap_or_default();
            ctx.commit_sync(consumer, &parts, "periodic");
            last_commit = Instant::now();
        }
    }
    Ok(())
}

/// The most records one poll burst takes before handing them over.
const BURST_RECORDS: usize = 4096;

/// Records taken in one poll burst, grouped by partition in arrival order.
struct Burst {
    runs: Vec<(Tp, Vec<KafkaRecord>)>,
    records: usize,
    now: Option<Instant>,
    /// The rebalance generation they were polled in.
    generation: u64,
}

impl Burst {
    fn new(generation: u64) -> Burst {
        Burst { runs: Vec::new(), records: 0, now: None, generation }
    }

    fn dispatch(self, consumer: &BaseConsumer<Context>) {
        for (tp, run) in self.runs {
            dispatch(consumer, tp, run, self.generation);
        }
    }

    fn add(&mut self, m: &rdkafka::message::BorrowedMessage<'_>) {
        let received = *self.now.get_or_insert_with(Instant::now);
        let rec = from_message(m, received);
        self.records += 1;
        // Almost always the partition of the message before.
        match self.runs.iter_mut().rev().find(|(tp, _)| tp.1 == m.partition() && tp.0 == m.topic()) {
            Some((_, run)) => run.push(rec),
            None => self.runs.push(((m.topic().to_string(), m.partition()), vec![rec])),
        }
    }
}

/// Hand a run of records to its partition's task; when the task's queue
/// is full, hold them and pause the partition, so that fetching stops
/// (back-pressure reaches the broker) and memory stays bounded.
fn dispatch(consumer: &BaseConsumer<Context>, tp: Tp, run: Vec<KafkaRecord>, generation: u64) {
    let ctx = consumer.context();
    let mut reg = ctx.registry.lock().unwrap_or_else(|p| p.into_inner());
    // Not ours (any more), or polled for an earlier assignment of it: the
    // partition's (new) owner reads it from the committed offset.
    let Some(h) = reg.get_mut(&tp).filter(|h| h.since <= generation) else { return };
    if h.held.is_empty() && h.queued.load(Ordering::SeqCst) < ctx.queue_records {
        h.queued.fetch_add(run.len(), Ordering::SeqCst);
        if h.tx.send(run).is_err() {
            // The task has ended (revoked): its records are read again.
            h.queued.store(0, Ordering::SeqCst);
        }
        return;
    }
    h.held.extend(run);
    if !h.paused {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(&tp.0, tp.1);
        match consumer.pause(&tpl) {
            Ok(()) => {
                h.paused = true;
                Paused { partition: &h.name, paused: true, held: h.held.len() }.emit();
            }
            Err(e) => tracing::warn!(partition = h.name, "cannot pause: {e}"),
        }
    }
}

/// Move held records into queues that drained to half; resume a partition
/// whose held records are all queued. The hysteresis matters: librdkafka
/// drops a paused partition's prefetched records and fetches them again on
/// resume, so pausing once per batch would fetch everything twice.
fn unpause(consumer: &BaseConsumer<Context>) {
    let ctx = consumer.context();
    let half = ctx.queue_records / 2;
    let mut reg = ctx.registry.lock().unwrap_or_else(|p| p.into_inner());
    for (tp, h) in reg.iter_mut().filter(|(_, h)| h.paused) {
        let queued = h.queued.load(Ordering::SeqCst);
        if queued > half {
            continue;
        }
        let room = ctx.queue_records - queued;
        let run: Vec<KafkaRecord> = h.held.drain(..room.min(h.held.len())).collect();
        if !run.is_empty() {
            h.queued.fetch_add(run.len(), Ordering::SeqCst);
            if h.tx.send(run).is_err() {
                h.held.clear();
            }
        }
        if h.held.is_empty() {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition(&tp.0, tp.1);
            match consumer.resume(&tpl) {
                Ok(()) => {
                    h.paused = false;
                    Paused { partition: &h.name, paused: false, held: 0 }.emit();
                }
                Err(e) => tracing::warn!(partition = h.name, "cannot resume: {e}"),
            }
        }
    }
}

/// About once a second, sample each partition's progress for the metrics
/// (high watermarks are asked of the brokers: on a thread of its own, so
/// that a slow answer never delays polling).
fn sample_progress(consumer: &BaseConsumer<Context>, stop: &Stop) {
    let ctx = consumer.context();
    let mut watermarks: HashMap<Tp, i64> = HashMap::new();
    while !stop.requested() {
        std::thread::sleep(Duration::from_secs(1));
        let owned: Vec<Tp> = ctx.registry.lock().map(|r| r.keys().cloned().collect()).unwrap_or_default();
        for tp in owned {
            if let Ok((_, high)) = consumer.fetch_watermarks(&tp.0, tp.1, Duration::from_secs(1)) {
                watermarks.insert(tp, high);
            }
        }
        progress(ctx, &watermarks);
    }
}

fn progress(ctx: &Context, watermarks: &HashMap<Tp, i64>) {
    let reg = ctx.registry.lock().unwrap_or_else(|p| p.into_inner());
    for (tp, h) in reg.iter() {
        let st = h.state.lock().unwrap_or_else(|p| p.into_inner());
        // Held records are older than any batch in progress.
        let oldest = h.held.front().map(|r| r.received).or(st.oldest);
        Progress {
            partition: &h.name,
            high_watermark: watermarks.get(tp).copied().filter(|h| *h >= 0),
            committed: st.committed,
            oldest_age_seconds: oldest.map(|t| t.elapsed().as_secs_f64()).unwrap_or(0.0),
            held: h.held.len(),
        }
        .emit();
    }
}
