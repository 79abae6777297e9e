//! The partition watchdog: a partition with records waiting that makes no
//! progress is worse than one that is visibly down, because nothing else
//! says so (its lag grows, but so does a busy partition's). Every running
//! partition is registered here by the driver, and a thread of its own
//! looks at each about once a second.
//!
//! Three ways a partition can be behind, told apart because they ask
//! different things of an operator:
//!
//! - **late**: its oldest batch waits on the sink's open breaker. The
//!   backend is sick and the pipeline is doing what it should (records stay
//!   in the source, the lag grows); it ends when a probe succeeds.
//! - **back-pressured**: every batch it may have in flight is out, so it
//!   reads nothing more for now; batches still finish.
//! - **stalled**: records wait (read and unfinished, or still in the
//!   source) and nothing finished for `watchdog.stall`, with the breaker
//!   closed: a request that never answers, a source that blocks, a disk
//!   that hangs. Reported with the stage its blocking batch waits in.
//!
//! The watchdog reports; it does not act. Restarting a partition whose
//! request hangs would read its records again (the dedup window absorbs
//! what was delivered), and that is the operator's call.
//!
//! `assess` is the judgement, plain Rust with the clock passed in; the
//! thread around it only samples the partitions and says what changed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(crate) mod config;
pub(crate) mod events;
mod status;

use self::config::WatchdogConfig;
pub(crate) use self::status::Load;
pub(crate) use self::status::{Status, assess};
use crate::custody::standing::PartitionState;
use crate::sink::named::Sinks;
use crate::telemetry::Health;
use crate::telemetry::InternalEvent;
use crate::watchdog::events::{PartitionLoad, PartitionWatched};

/// The partitions being watched, registered by the driver while it runs
/// them.
#[derive(Default)]
pub(crate) struct Watchdog {
    cfg: WatchdogConfig,
    parts: Mutex<Vec<(String, Arc<Mutex<PartitionState>>)>>,
}

/// A partition under watch until dropped.
pub(crate) struct Watched<'w> {
    dog: &'w Watchdog,
    state: Arc<Mutex<PartitionState>>,
}

impl Drop for Watched<'_> {
    fn drop(&mut self) {
        let mut parts = self.dog.parts.lock().unwrap_or_else(|p| p.into_inner());
        parts.retain(|(_, s)| !Arc::ptr_eq(s, &self.state));
    }
}

impl Watchdog {
    pub(crate) fn new(cfg: WatchdogConfig) -> Watchdog {
        Watchdog { cfg, parts: Mutex::default() }
    }

    /// Watch `state` until the guard is dropped. Its progress clock starts
    /// now: a partition that never finished a batch is stalled `stall`
    /// after it started, not at once.
    pub(crate) fn watch(&self, name: &str, state: Arc<Mutex<PartitionState>>) -> Watched<'_> {
        state.lock().unwrap_or_else(|p| p.into_inner()).progress.get_or_insert_with(Instant::now);
        self.parts.lock().unwrap_or_else(|p| p.into_inner()).push((name.to_string(), state.clone()));
        Watched { dog: self, state }
    }

    /// What each watched partition holds at `now`: its batches in flight,
    /// what its source holds unread, and the age of its oldest unfinished
    /// record (for `/metrics`, and so `sluice top`).
    pub(crate) fn loads(&self, now: Instant) -> Vec<(String, Load)> {
        let parts = self.parts.lock().unwrap_or_else(|p| p.into_inner());
        parts
            .iter()
            .map(|(name, st)| {
                let st = st.lock().unwrap_or_else(|p| p.into_inner());
                let oldest_age = st.oldest.map_or(0.0, |t| now.saturating_duration_since(t).as_secs_f64());
                (name.clone(), Load { in_flight: st.out.len(), behind: st.source_behind, oldest_age })
            })
            .collect()
    }

    /// Every watched partition, judged at `now`.
    pub(crate) fn sample(&self, now: Instant, breaker_open: bool) -> Vec<(String, Status)> {
        let parts = self.parts.lock().unwrap_or_else(|p| p.into_inner());
        parts
            .iter()
            .map(|(name, st)| {
                let st = st.lock().unwrap_or_else(|p| p.into_inner());
                (name.clone(), assess(&st, now, self.cfg.stall, breaker_open))
            })
            .collect()
    }

    /// Sample until `done()`, saying what changed (a log line and the
    /// metrics, `PartitionWatched`) and keeping `/health`'s detail current.
    fn run(&self, sinks: &Sinks, health: Option<&Health>, done: &dyn Fn() -> bool) {
        let tick = (self.cfg.stall / 4).clamp(Duration::from_millis(100), Duration::from_secs(1));
        let mut last: BTreeMap<String, Status> = BTreeMap::new();
        while !done() {
            let now = Instant::now();
            let statuses = self.sample(now, sinks.breaker_open());
            for (name, load) in self.loads(now) {
                PartitionLoad { partition: &name, load: &load }.emit();
            }
            let mut detail = Vec::new();
            for (name, status) in &statuses {
                let before = last.get(name);
                PartitionWatched { partition: name, status, before, stall: self.cfg.stall }.emit();
                if !matches!(status, Status::Idle | Status::Flowing) {
                    detail.push(describe(name, status));
                }
            }
            // A partition no longer run (revoked, its file finished) is
            // no longer stalled.
            for (name, before) in &last {
                if !statuses.iter().any(|(n, _)| n == name) {
                    PartitionWatched {
                        partition: name,
                        status: &Status::Idle,
                        before: Some(before),
                        stall: self.cfg.stall,
                    }
                    .emit();
                }
            }
            if let Some(h) = health {
                h.set_detail(detail);
            }
            // Repeated warnings counted this interval are said even when no
            // batch comes to say them.
            crate::telemetry::repeats::say_due();
            last = statuses.into_iter().collect();
            let slept = Instant::now();
            while !done() && slept.elapsed() < tick {
                std::thread::sleep(Duration::from_millis(50).min(tick));
            }
        }
        if let Some(h) = health {
            h.set_detail(Vec::new());
        }
    }
}

/// One line of `/health` for a partition that is not simply flowing.
pub(crate) fn describe(name: &str, status: &Status) -> String {
    match status {
        Status::Stalled { stage, at, since } => {
            let at = at.map(|a| format!(" at {a}")).unwrap_or_default();
            format!(
                "partition {name}: stalled: records wait and nothing finished for {} s; its commit waits{at} in stage {stage}",
                since.as_secs()
            )
        }
        Status::Late { since } => format!(
            "partition {name}: late: waiting on the sink's open breaker ({} s without progress; the lag grows until a probe succeeds)",
            since.as_secs()
        ),
        Status::Backpressured => format!("partition {name}: back-pressured: every batch in flight is out"),
        other => format!("partition {name}: {}", other.name()),
    }
}

/// Run `f` with a watchdog sampling beside it (a thread of its own, ended
/// when `f` returns).
pub(crate) fn with_watchdog<R>(
    cfg: &WatchdogConfig,
    sinks: &Sinks,
    health: Option<&Health>,
    f: impl FnOnce(&Watchdog) -> R,
) -> R {
    let dog = Watchdog::new(cfg.clone());
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let watching = std::thread::Builder::new().name("sluice-watchdog".into()).spawn_scoped(
            s,
            crate::telemetry::labels::inherit(|| {
                dog.run(sinks, health, &|| done.load(std::sync::atomic::Ordering::SeqCst))
            }),
        );
        if let Err(e) = &watching {
            tracing::error!("cannot start the partition watchdog: {e}; stalls go unreported");
        }
        let result = f(&dog);
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        // The run is over: what repeated since the last summary is said now.
        crate::telemetry::repeats::say_pending();
        result
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::Problems;

    const STALL: Duration = Duration::from_secs(60);

    fn state(progress_ago: u64, out: Option<(i64, &'static str)>, behind: Option<u64>) -> (PartitionState, Instant) {
        let now = Instant::now() + Duration::from_secs(1_000);
        let st = PartitionState {
            progress: Some(now - Duration::from_secs(progress_ago)),
            blocking: out,
            oldest: out.map(|_| now - Duration::from_secs(progress_ago + 1)),
            source_behind: behind,
            ..PartitionState::default()
        };
        (st, now)
    }

    #[test]
    fn nothing_waiting_is_idle_however_long_ago_the_last_batch() {
        let (st, now) = state(10_000, None, Some(0));
        assert_eq!(assess(&st, now, STALL, false), Status::Idle);
        let (st, now) = state(10_000, None, None);
        assert_eq!(assess(&st, now, STALL, true), Status::Idle);
    }

    #[test]
    fn a_batch_stuck_in_the_sink_with_the_breaker_closed_is_stalled_there() {
        let (st, now) = state(61, Some((4_200, "sink")), None);
        assert_eq!(
            assess(&st, now, STALL, false),
            Status::Stalled { stage: "sink", at: Some(4_200), since: Duration::from_secs(61) }
        );
        // Not before `stall`.
        let (st, now) = state(59, Some((4_200, "sink")), None);
        assert_eq!(assess(&st, now, STALL, false), Status::Flowing);
    }

    #[test]
    fn the_same_batch_behind_an_open_breaker_is_late_not_stalled() {
        let (st, now) = state(3_600, Some((4_200, "sink")), Some(10_000));
        assert_eq!(assess(&st, now, STALL, true), Status::Late { since: Duration::from_secs(3_600) });
    }

    #[test]
    fn a_back_held_in_the_sink_names_the_sink_though_the_commit_waits_on_an_older_write() {
        // Batch 1's write is durable, but its answer waits for the back,
        // which a hung request of batch 2 holds.
        let (mut st, now) = state(61, Some((4_200, "store")), None);
        st.busy = Some("sink");
        assert!(matches!(assess(&st, now, STALL, false), Status::Stalled { stage: "sink", at: Some(4_200), .. }));
        assert!(matches!(assess(&st, now, STALL, true), Status::Late { .. }));
    }

    #[test]
    fn an_open_breaker_does_not_excuse_a_write_that_hangs() {
        let (st, now) = state(61, Some((4_200, "store")), None);
        assert!(matches!(assess(&st, now, STALL, true), Status::Stalled { stage: "store", .. }));
    }

    #[test]
    fn a_source_that_holds_records_and_hands_over_none_is_stalled_at_the_source() {
        let (st, now) = state(61, None, Some(500));
        assert_eq!(
            assess(&st, now, STALL, false),
            Status::Stalled { stage: "source", at: None, since: Duration::from_secs(61) }
        );
    }

    #[test]
    fn back_pressure_with_batches_finishing_is_not_a_stall() {
        let (mut st, now) = state(1, Some((10, "sink")), Some(1_000_000));
        st.backpressured = true;
        assert_eq!(assess(&st, now, STALL, false), Status::Backpressured);
        // Back-pressure that lasts with nothing finishing is the stall of
        // whatever holds the batches.
        let (mut st, now) = state(61, Some((10, "changelog")), Some(1_000_000));
        st.backpressured = true;
        assert!(matches!(assess(&st, now, STALL, false), Status::Stalled { stage: "changelog", .. }));
    }

    #[test]
    fn a_partition_is_watched_until_its_guard_drops_and_starts_its_clock_then() {
        let dog = Watchdog::new(WatchdogConfig { stall: STALL });
        let st = Arc::new(Mutex::new(PartitionState { source_behind: Some(3), ..PartitionState::default() }));
        {
            let _w = dog.watch("p0", st.clone());
            let now = Instant::now();
            assert_eq!(dog.sample(now, false), vec![("p0".to_string(), Status::Flowing)]);
            let later = now + STALL + Duration::from_secs(1);
            assert!(matches!(&dog.sample(later, false)[0].1, Status::Stalled { stage: "source", .. }));
        }
        assert!(dog.sample(Instant::now(), false).is_empty());
    }

    /// Through the driver: a source that says it holds records, then
    /// blocks in `pull` and hands over none (a hung mount, a fetch that
    /// never returns). Nothing is out, so only the source can be at fault.
    #[test]
    fn a_source_that_blocks_while_holding_records_is_stalled_at_the_source() {
        use std::sync::atomic::{AtomicBool, Ordering};

        use crate::batch::Pull;
        use crate::custody::ids::PIPELINE_SCOPE;
        use crate::pipeline::driver::{self, Keeper, Partition, Reader, Shared};

        struct Blocking<'a> {
            told: bool,
            stop: &'a AtomicBool,
        }
        impl Reader for Blocking<'_> {
            fn pull(&mut self, _max: usize) -> Result<Option<Pull>, crate::pipeline::error::PipelineError> {
                if !std::mem::replace(&mut self.told, true) {
                    let received = Instant::now();
                    return Ok(Some(Pull { records: Vec::new(), scope: PIPELINE_SCOPE, received, behind: Some(4096) }));
                }
                while !self.stop.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(None)
            }
        }
        struct Nothing;
        impl Keeper for Nothing {}

        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("s.toml");
        std::fs::write(
            &path,
            "[pipeline]\nname = \"w\"\nstate_dir = \"state\"\n[source]\ntype = \"file\"\npaths = [\"x.log\"]\n\
             [sink]\ntype = \"stdout\"\n[watchdog]\nstall = \"1s\"\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let cfg = crate::config::Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let store = crate::store::Store::open(&cfg.pipeline.state_dir, &crate::pipeline::setup::identity(&cfg))
            .unwrap_or_else(|e| panic!("{e}"));
        let dedup =
            crate::store::dedup::DedupWindow::new(&store, Duration::from_secs(3600)).unwrap_or_else(|e| panic!("{e}"));
        let plugins = crate::plugin::engine::Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
        let sinks = crate::pipeline::setup::open_sinks(&cfg, &plugins).unwrap_or_else(|e| panic!("{e}"));
        let stats = Mutex::new(crate::telemetry::stats::RunStats::default());
        let stop = AtomicBool::new(false);
        let seen = with_watchdog(&cfg.watchdog, &sinks, None, |dog| {
            crate::pipeline::setup::with_committer(&store, None, |committer| {
                let settings = crate::pipeline::setup::driver_settings(&cfg);
                let shared = Shared {
                    settings: &settings,
                    store: &store,
                    dedup: &dedup,
                    sinks: &sinks,
                    committer,
                    quarantine_topic: None,
                    changelog: None,
                    claims: None,
                    registry: None,
                    stats: &stats,
                    watchdog: dog,
                };
                let stopping = || stop.load(Ordering::SeqCst);
                std::thread::scope(|s| {
                    let run = s.spawn(|| {
                        let part = Partition {
                            name: "blocked",
                            start: Some(0),
                            chain: crate::plugin::chain::Chain::new(Vec::new()),
                            stopping: &stopping,
                            state: Arc::default(),
                        };
                        driver::drive(&shared, part, &mut Blocking { told: false, stop: &stop }, &mut Nothing)
                    });
                    let started = Instant::now();
                    let mut seen = Vec::new();
                    while started.elapsed() < Duration::from_secs(10) {
                        seen = dog.sample(Instant::now(), sinks.breaker_open());
                        if seen.iter().any(|(_, s)| matches!(s, Status::Stalled { .. })) {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    stop.store(true, Ordering::SeqCst);
                    let ended = run.join().map_err(|_| "the driver panicked".to_string());
                    assert!(matches!(ended, Ok(Ok(()))), "{:?}", ended.map(|r| r.map_err(|e| e.to_string())));
                    (seen, started.elapsed())
                })
            })
        });
        let (seen, after) = seen;
        assert!(
            matches!(seen.as_slice(), [(name, Status::Stalled { stage: "source", at: None, .. })] if name == "blocked"),
            "{seen:?}"
        );
        assert!(after >= Duration::from_secs(1), "not before watchdog.stall: {after:?}");
    }

    #[test]
    fn a_stall_shorter_than_a_second_is_refused_by_key() {
        let mut p = Problems::new(std::path::Path::new("s.toml"));
        WatchdogConfig { stall: Duration::from_millis(10) }.validate(&mut p);
        let e = p.into_result().expect_err("refused");
        assert!(e.to_string().contains("watchdog.stall"), "{e}");
    }
}
