//! The Kafka source's side of `sluice run`: a consumer group member.
//!
//! Threads: the consume loop (this module: polls, dispatches each record to
//! its partition's queue, pauses and resumes fetching, commits), a
//! supervisor that starts and joins partition tasks, a sampler of progress
//! for the metrics, and one task per
//! assigned partition (`task`), each with its own plugin instances. Tasks
//! are OS threads: a batch is CPU-bound WebAssembly and synchronous
//! RocksDB, and must not stall a shared async executor.
//!
//! The custody rule, for Kafka: a partition's committed offset is the
//! lowest offset that has not passed a door. Each task publishes its
//! tracker's finished prefix only after the batch's ids and quarantine
//! entries are synced to the state store; the loop commits those prefixes
//! every `source.commit_interval` (so also when idle), on revoke
//! (`rebalance`) and on shutdown, all from the consume loop's thread; never across a gap (the tracker
//! does not offer one), never backwards (only a prefix beyond the last
//! acknowledged commit is sent).
//!
//! Memory is bounded (README, "Back-pressure"): per partition, one batch in
//! progress, `queue_records` queued, and what was fetched when the queue
//! filled (held, at most one fetch's worth, until the partition resumes);
//! plus librdkafka's prefetch, bounded by `queued.max.messages.kbytes`
//! (and dropped by librdkafka when a partition pauses).

pub mod quarantine_topic;
mod rebalance;
mod task;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::{Message, TopicPartitionList};

use self::rebalance::{Command, Context, Tp};
use super::{PipelineError, RunStats, Stop, identity, now_nanos, open_sink};
use crate::config::{Config, DEFAULT_WINDOW, KafkaSourceConfig};
use crate::plugin::Runtime;
use crate::sink::guarded::Guarded;
use crate::source::kafka::record::{KafkaRecord, from_message};
use crate::source::kafka::{KafkaSourceError, admin, client, partition_name};
use crate::store::Store;
use crate::store::dedup::DedupWindow;
use crate::telemetry::Health;
use crate::telemetry::events::{Paused, Progress};

/// The stages a batch can wait in, for `sluice_commit_blocked_by`.
pub const STAGES: &[&str] = &["plugins", "dedup", "sink", "quarantine", "store"];

/// What a partition's task publishes to the consume loop.
#[derive(Debug, Default)]
pub(crate) struct PartitionState {
    /// The tracker's finished prefix, durable in the state store.
    pub committable: Option<i64>,
    /// The last offset the group acknowledged.
    pub committed: Option<i64>,
    /// The first offset still owed and the stage its batch is in.
    pub blocking: Option<(i64, &'static str)>,
    /// When the oldest record of the batch in progress was received.
    pub oldest: Option<Instant>,
}

/// What every partition task shares.
pub(crate) struct Shared<'a> {
    pub cfg: &'a Config,
    pub runtime: &'a Runtime,
    pub store: &'a Store,
    pub dedup: &'a DedupWindow<'a>,
    pub sink: &'a Guarded,
    /// `quarantine.topic`, when set.
    pub quarantine_topic: Option<&'a quarantine_topic::QuarantineTopic>,
    pub stats: &'a Mutex<RunStats>,
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
    let shared = Shared {
        cfg,
        runtime,
        store: &store,
        dedup: &dedup,
        sink: &sink,
        quarantine_topic: quarantine_topic.as_ref(),
        stats: &stats,
        linger: source.linger,
    };

    let (commands, command_rx) = std::sync::mpsc::channel();
    let context = Context {
        registry: Mutex::new(HashMap::new()),
        commands: Mutex::new(commands),
        queue_records: source.queue_records.unwrap_or(4 * cfg.pipeline.batch_size),
        revoke_wait: cfg.shutdown.grace,
    };
    let consumer: BaseConsumer<Context> = client::client_config(source)?
        .create_with_context(context)
        .map_err(KafkaSourceError::client("create the consumer"))?;
    let topics: Vec<&str> = source.topics.iter().map(String::as_str).collect();
    consumer.subscribe(&topics).map_err(KafkaSourceError::client(format!("subscribe to {topics:?}")))?;
    health.set_ready(true);

    let failure: Mutex<Option<PipelineError>> = Mutex::new(None);
    std::thread::scope(|scope| {
        let (shared, failure) = (&shared, &failure);
        scope.spawn(move || supervise(scope, shared, command_rx, failure, stop));
        let consumer = &consumer;
        scope.spawn(move || sample_progress(consumer, stop));
        if let Err(e) = consume(consumer, source, stop, &health)
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
    if let Some(e) = failure.into_inner().unwrap_or(None) {
        return Err(e);
    }
    let mut stats = stats.into_inner().unwrap_or_default();
    stats.seconds = started.elapsed().as_secs_f64();
    Ok(stats)
}

/// Starts a task per assigned partition and joins the tasks of revoked ones.
/// A task that fails (or panics) records the failure and stops the pipeline:
/// its unfinished records are read again by the next owner or the next run.
fn supervise<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    shared: &'scope Shared<'env>,
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
                        if let Err(e) = task::run(shared, &name, (rx, &queued), &task_stop, &state) {
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
            Some(Ok(m)) => dispatch(consumer, (m.topic().to_string(), m.partition()), from_message(&m)),
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

/// Hand a record to its partition's task; when the task's queue is full,
/// hold it and pause the partition, so that fetching stops (back-pressure
/// reaches the broker) and memory stays bounded.
fn dispatch(consumer: &BaseConsumer<Context>, tp: Tp, rec: KafkaRecord) {
    let ctx = consumer.context();
    let mut reg = ctx.registry.lock().unwrap_or_else(|p| p.into_inner());
    // Not ours (any more): the partition's owner reads it.
    let Some(h) = reg.get_mut(&tp) else { return };
    if h.held.is_empty() {
        match h.tx.try_send(rec) {
            Ok(()) => {
                h.queued.fetch_add(1, Ordering::SeqCst);
                return;
            }
            Err(TrySendError::Full(rec)) => h.held.push_back(rec),
            Err(TrySendError::Disconnected(_)) => return,
        }
    } else {
        h.held.push_back(rec);
    }
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
        if h.queued.load(Ordering::SeqCst) > half {
            continue;
        }
        while let Some(rec) = h.held.pop_front() {
            match h.tx.try_send(rec) {
                Ok(()) => {
                    h.queued.fetch_add(1, Ordering::SeqCst);
                }
                Err(TrySendError::Full(rec)) => {
                    h.held.push_front(rec);
                    break;
                }
                Err(TrySendError::Disconnected(_)) => h.held.clear(),
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
            blocking: st.blocking,
            oldest_age_seconds: oldest.map(|t| t.elapsed().as_secs_f64()).unwrap_or(0.0),
            held: h.held.len(),
        }
        .emit();
    }
}
