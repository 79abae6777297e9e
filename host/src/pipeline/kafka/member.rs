//! One consumer group member of a Kafka run.
//!
//! Threads: the consume loop (this module: serves the group's callbacks
//! and librdkafka's events, commits), a supervisor that opens each
//! assigned partition in turn (`task`: its restore, then its hand-over),
//! and the member's pool of workers (`driver::Pool`, `pipeline.workers`,
//! each with its own plugin instances), onto which the partitions are
//! multiplexed as lanes. A worker takes from each partition's own
//! librdkafka queue: records never pass through the consume loop, so there
//! is no per-record lock or channel send between the two. Workers are OS
//! threads: a batch is CPU-bound WebAssembly and synchronous RocksDB, and
//! must not stall a shared async executor.
//!
//! The custody rule, for Kafka: a partition's committed offset is the
//! lowest offset that has not passed a door. The driver publishes a
//! partition's finished prefix only after the batch's ids and quarantine
//! entries are synced to the state store; the loop commits those prefixes
//! every `source.commit_interval` (so also when idle), on revoke
//! (`rebalance`) and on shutdown, all from the consume loop's thread; never across a gap (the tracker
//! does not offer one), never backwards (only a prefix beyond the last
//! acknowledged commit is sent). With `source.transactions` each task
//! commits its own batches instead, each in a transaction that fences the
//! partition's last owner (`changelog::transaction`); the loop then finds
//! nothing left to commit.
//!
//! Memory is bounded (docs/src/kafka.md, "Back-pressure"): per worker,
//! `pipeline.in_flight` batches between the queues and the commit; per
//! partition, librdkafka's queue of the partition, which it stops fetching into at
//! `source.queue_records` records (`queued.min.messages`) or
//! `queued.max.messages.kbytes`, overshooting by at most one fetch
//! response (`max.partition.fetch.bytes`). A slow partition is simply not
//! polled: nothing is paused, dropped, or fetched twice.

use std::collections::HashMap;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rdkafka::Message;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;

use super::rebalance::{self, Command, Context, Tp};
use super::task::{self, Tasks};
use super::{changelog, idle_member, quarantine_topic};
use crate::config::Config;
use crate::pipeline::driver::{self, Shared};
use crate::pipeline::error::PipelineError;
use crate::pipeline::setup::driver_settings;
use crate::pipeline::stop::Stop;
use crate::plugin::engine::Runtime;
use crate::sink::named::Sinks;
use crate::source::kafka::config::KafkaSourceConfig;
use crate::source::kafka::{KafkaSourceError, client, partition_name};
use crate::store::Store;
use crate::store::dedup::DedupWindow;
use crate::store::dedup::config::DedupScope;
use crate::telemetry::Health;
use crate::telemetry::stats::RunStats;

/// What the group members of one run share: one process, one store, one
/// window, one health.
pub(super) struct Common<'a> {
    pub runtime: &'a Runtime,
    pub stop: &'a Stop,
    pub store: &'a Store,
    pub dedup: &'a DedupWindow<'a>,
    pub health: &'a Health,
    pub stats: &'a Mutex<RunStats>,
}

/// One group member of a run.
pub(super) struct Serving<'a> {
    pub cfg: &'a Config,
    pub source: &'a KafkaSourceConfig,
    pub sinks: &'a Sinks,
    /// Told whether the member is ready.
    pub ready: &'a (dyn Fn(bool) + Sync),
    /// Where its watchdog reports, when its stalls are the run's health.
    pub watched: Option<&'a Health>,
    /// It reads `dedup.repartition`'s internal topic: events a front
    /// checked, not records for plugins.
    pub reads_events: bool,
}

/// Serve `member` with what it needs beside it (its quarantine topic,
/// changelog and follower, watchdog and group committer) until `stop`.
pub(super) fn serve(common: &Common<'_>, member_of: &Serving<'_>) -> Result<(), PipelineError> {
    let Common { runtime, stop, store, dedup, health, stats } = *common;
    let Serving { cfg, source, sinks, ready, watched, reads_events } = *member_of;
    let quarantine_topic =
        cfg.quarantine.topic.as_deref().map(|t| quarantine_topic::QuarantineTopic::new(source, t)).transpose()?;
    let changelog = match changelog::Changelog::open(cfg, source, store, dedup, stop) {
        Ok(c) => c.map(changelog::Changelog::with_follower),
        // Stopped while waiting for the brokers: nothing was read, so
        // nothing is owed; a clean stop.
        Err(_) if stop.requested() => return Ok(()),
        Err(e) => return Err(e),
    };
    std::thread::scope(|scope| {
        // The topic scope's follower runs beside the member, until the
        // run stops.
        let follower = changelog.as_ref().filter(|c| c.follow.is_some()).map(|c| {
            scope.spawn(crate::telemetry::labels::inherit(move || {
                let result = c.follow(&|| stop.requested());
                if let Err(e) = &result {
                    tracing::error!("{e}");
                    // Without it no partition knows the others' ids.
                    stop.request();
                }
                result
            }))
        });
        let settings = driver_settings(cfg);
        let parts = crate::pipeline::setup::Parts {
            settings: &settings,
            registry: crate::pipeline::setup::open_registry(cfg)?,
            store,
            dedup,
            sinks,
            stats,
        };
        let result = crate::pipeline::setup::with_services(cfg, parts, watched, Some(health), |shared| {
            let tasks = Tasks {
                cfg,
                shared: Shared {
                    quarantine_topic: quarantine_topic.as_ref().map(|t| t as &dyn driver::QuarantineLog),
                    changelog: changelog.as_ref().map(|c| c as &dyn driver::IdLog),
                    // A topic's partitions share one scope: their batches
                    // in flight claim their ids.
                    claims: (cfg.dedup.scope == DedupScope::Topic).then(Arc::default),
                    ..shared
                },
                runtime,
                changelog: changelog.as_ref(),
                transactions: source.transactions,
                reads_events,
            };
            member(&tasks, source, stop, health, ready)
        });
        // Every member of the run stops with this one.
        stop.request();
        let followed = follower
            .map(|f| f.join().unwrap_or_else(|_| Err(PipelineError::Panicked("the dedup changelog follower".into()))));
        result.and(followed.unwrap_or(Ok(())))
    })
}

/// Join the group, run until `stop`, leave the group.
fn member(
    tasks: &Tasks<'_>,
    source: &KafkaSourceConfig,
    stop: &Stop,
    health: &Health,
    ready: &(dyn Fn(bool) + Sync),
) -> Result<(), PipelineError> {
    let cfg = tasks.cfg;

    let (commands, command_rx) = std::sync::mpsc::channel();
    let context = Context {
        registry: Mutex::new(HashMap::new()),
        commands: Mutex::new(commands),
        revoke_wait: cfg.shutdown.grace,
        consumer: OnceLock::new(),
        pipeline: crate::telemetry::labels::current(),
    };
    let consumer: Arc<BaseConsumer<Context>> = Arc::new(
        client::member_config(source, cfg.pipeline.batch_size)?
            .create_with_context(context)
            .map_err(KafkaSourceError::client("create the consumer"))?,
    );
    // Before the first poll, which may assign partitions.
    let _ = consumer.context().consumer.set(Arc::downgrade(&consumer));
    let topics: Vec<&str> = source.topics.iter().map(String::as_str).collect();
    consumer.subscribe(&topics).map_err(KafkaSourceError::client(format!("subscribe to {topics:?}")))?;

    let failure: Mutex<Option<PipelineError>> = Mutex::new(None);
    let fail = |e: PipelineError| {
        tracing::error!("{e}");
        if let Ok(mut f) = failure.lock() {
            f.get_or_insert(e);
        }
        stop.request();
    };
    let make_chain = || task::member_chain(tasks);
    std::thread::scope(|scope| {
        let failure = &failure;
        let fail = &fail;
        let parts = driver::PoolParts { make_chain: &make_chain, on_error: fail };
        let watch = idle_member::Watch::new(&consumer, &source.topics, cfg.watchdog.stall, health, stop);
        std::thread::Builder::new()
            .name("sluice-supervisor".into())
            .spawn_scoped(
                scope,
                crate::telemetry::labels::inherit(move || supervise(scope, tasks, command_rx, parts, fail, watch)),
            )
            .map_err(|e| fail(PipelineError::Panicked(format!("cannot start the member's supervisor: {e}"))))
            .ok();
        let consumer = &*consumer;
        let consumed = consume(consumer, source, stop, health, ready);
        let commit_on_exit = !matches!(consumed, Err(KafkaSourceError::NotSplit { .. }));
        if let Err(e) = consumed
            && let Ok(mut f) = failure.lock()
        {
            f.get_or_insert(e.into());
        }
        // Shutdown: stop every task after its batch, commit, leave the group.
        ready(false);
        let ctx = consumer.context();
        let all: Vec<Tp> = ctx.registry.lock().map(|r| r.keys().cloned().collect()).unwrap_or_default();
        let handles = ctx.stop_tasks(&all);
        if commit_on_exit {
            ctx.commit_sync(consumer, &handles.iter().map(rebalance::Handle::part).collect::<Vec<_>>(), "shutdown");
        }
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

/// Has each assigned partition opened (its restore) and handed to the
/// member's pool of workers as a lane, one after the other on this thread;
/// on a revoke, waits for the revoked partitions' lanes to finish. A task
/// or worker that fails (or panics) records the failure and stops the
/// pipeline (`fail`): its unfinished records are read again by the next
/// owner or the next run.
///
/// Opening is serial, with one restore reader (`Changelog::lend_reader`):
/// a restore is a changelog read of a few round trips, and a member may be
/// assigned a thousand partitions at once; a thread and a client each
/// would be a thousand of them (issue 57: a member's threads do not grow
/// with its partitions). A partition whose transactions are its own
/// (`source.transactions`) runs on a thread of its own, as it always has:
/// its producer is its own too.
fn supervise<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    shared: &'scope Tasks<'env>,
    commands: Receiver<Command>,
    parts: driver::PoolParts<'scope>,
    fail: &'scope (dyn Fn(PipelineError) + Sync),
    mut watch: idle_member::Watch<'_>,
) {
    let pool = driver::Pool::new(scope, &shared.shared, parts);
    let pool = &pool;
    // Open `tp` on this thread; `None`: nothing of it runs any more.
    let open = move |tp: &Tp, handed: task::Handed| -> Option<driver::LaneDone> {
        let name = partition_name(&tp.0, tp.1);
        let run = || task::run(shared, pool, (&tp.0, tp.1, &name), handed);
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
            Ok(Ok(lane)) => lane,
            Ok(Err(e)) => {
                fail(e);
                None
            }
            Err(_) => {
                fail(PipelineError::Panicked(name));
                None
            }
        }
    };
    // A partition with its own transactions runs on a thread of this
    // scope: the pool outlives it.
    std::thread::scope(|own_threads| {
        // Per partition: its lane, once opened (at once; a partition with
        // its own transactions says so when its thread has ended).
        let mut tasks: HashMap<Tp, Receiver<Option<driver::LaneDone>>> = HashMap::new();
        // Wait until a partition is opened, then for its lane to end: nothing
        // of the partition is in flight any more.
        let finish = |opened: Receiver<Option<driver::LaneDone>>| {
            if let Ok(Some(lane)) = opened.recv() {
                lane.wait();
            }
        };
        // Commands waiting now, taken together: a burst of assignments
        // asks where their changelog partitions end once.
        let mut waiting: std::collections::VecDeque<Command> = std::collections::VecDeque::new();
        loop {
            watch.step();
            if waiting.is_empty() {
                match commands.try_recv() {
                    Ok(cmd) => waiting.push_back(cmd),
                    Err(_) => {
                        // Every partition assigned so far is open: no
                        // restore reader is needed until the next
                        // assignment.
                        if let Some(changelog) = shared.changelog {
                            changelog.forget_ends();
                            changelog.release_readers();
                        }
                        match commands.recv_timeout(idle_member::Watch::STEP) {
                            Ok(cmd) => waiting.push_back(cmd),
                            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
                            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                        }
                    }
                }
                waiting.extend(commands.try_iter());
                prefetch_ends(shared, &waiting);
            }
            let Some(cmd) = waiting.pop_front() else { continue };
            match cmd {
                Command::Start { tp, queue, stop: task_stop, state, consumer } => {
                    // A lane of an earlier assignment of the partition ends
                    // first: two lanes must never poll one queue.
                    if let Some(old) = tasks.remove(&tp) {
                        finish(old);
                    }
                    let (opened, lane) = std::sync::mpsc::sync_channel(1);
                    let handed = task::Handed { queue, stop: task_stop, state, consumer };
                    if shared.transactions && shared.changelog.is_some() {
                        let at = tp.clone();
                        let own = std::thread::Builder::new().name(format!("sluice-txn-{}", tp.1)).spawn_scoped(
                            own_threads,
                            crate::telemetry::labels::inherit(move || {
                                let _ = opened.send(open(&at, handed));
                            }),
                        );
                        if let Err(e) = own {
                            fail(PipelineError::Panicked(format!("cannot start a partition's thread: {e}")));
                        }
                    } else {
                        let _ = opened.send(open(&tp, handed));
                    }
                    tasks.insert(tp, lane);
                }
                Command::Stop { tps, done } => {
                    // The revoked lanes wrote to the changelog past any
                    // end asked before they finished.
                    if let Some(changelog) = shared.changelog {
                        changelog.forget_ends();
                    }
                    for tp in tps {
                        if let Some(lane) = tasks.remove(&tp) {
                            finish(lane);
                        }
                    }
                    let _ = done.send(());
                }
                Command::Exit => break,
            }
        }
        for (_, lane) in tasks.drain() {
            finish(lane);
        }
    });
    // Every lane has ended: the workers end too.
    pool.close();
}

/// Ask where the changelog partitions of the partitions about to open
/// end, all at once (`Changelog::prefetch_ends`): those assigned before
/// the first revoke waiting, which forgets what was asked. Not when their
/// transactions are their own: a partition's restore then starts after its
/// transactional id has fenced the last owner, and must ask after that.
fn prefetch_ends(shared: &Tasks<'_>, waiting: &std::collections::VecDeque<Command>) {
    let Some(changelog) = shared.changelog.filter(|_| !shared.transactions) else { return };
    let mut member = None;
    let mut partitions = Vec::new();
    for cmd in waiting {
        let Command::Start { tp, consumer, .. } = cmd else { break };
        partitions.push(tp.1);
        member = member.or_else(|| consumer.upgrade());
    }
    if let Some(member) = member {
        changelog.prefetch_ends(&member, &partitions);
    }
}

/// The consume loop: serve callbacks and events, and every
/// `commit_interval` (so also when idle) commit each owned partition's
/// finished prefix beyond the last acknowledged one. Commits are
/// synchronous and made here, on the thread that serves rebalances: a
/// commit can then never wait on a rebalance that waits on it. (A commit's
/// answer is what `committed` records; rdkafka's callback does not fire for
/// asynchronous commits, rust-rdkafka issue #856.) A failed commit is
/// carried by the next one.
fn consume(
    consumer: &BaseConsumer<Context>,
    source: &KafkaSourceConfig,
    stop: &Stop,
    health: &Health,
    ready: &(dyn Fn(bool) + Sync),
) -> Result<(), KafkaSourceError> {
    let ctx = consumer.context();
    let mut last_commit = Instant::now();
    let mut last_error: Option<(String, Instant)> = None;
    while !stop.requested() {
        health.beat();
        // Ready once the group has given this member partitions and each
        // has its dedup ids (`PartitionState::restored`). The state store
        // opened before the loop started.
        ready(
            ctx.registry.lock().map(|r| !r.is_empty() && r.values().all(rebalance::Handle::restored)).unwrap_or(false),
        );
        match consumer.poll(Duration::from_millis(50)) {
            // Every assigned partition's queue is split off before its
            // assignment takes effect (`rebalance`), so no record should
            // reach this queue. One that does is read by no task, which
            // could commit past it: the run stops and the shutdown commits
            // nothing (`member`); the records are read again.
            Some(Ok(m)) => {
                stop.request();
                return Err(KafkaSourceError::NotSplit {
                    at: format!("{}/{}@{}", m.topic(), m.partition(), m.offset()),
                });
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
        if last_commit.elapsed() >= source.commit_interval {
            let parts: Vec<rebalance::Part> =
                ctx.registry.lock().map(|r| r.values().map(rebalance::Handle::part).collect()).unwrap_or_default();
            ctx.commit_sync(consumer, &parts, "periodic");
            last_commit = Instant::now();
        }
    }
    Ok(())
}
