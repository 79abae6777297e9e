//! The driver with a log that carries the commit itself (a partition's
//! Kafka transactions), over fakes: a file of records, a file sink, and a
//! log that records what the sink held at each commit and can be fenced.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rocksdb::WriteBatch;

use super::driver::{self, Commit, IdLog, Keeper, Partition, Reader, SentIds, Shared};
use crate::batch::{Pull, Pulled};
use crate::custody::ids::{IdDigest, PIPELINE_SCOPE};
use crate::custody::standing::PartitionState;
use crate::pipeline::error::PipelineError;
use crate::record::Record;
use crate::schema_registry::cache::Schemas;
use crate::schema_registry::resolver::{Fetch, Fetched, RegistryError, Resolver};

const RECORDS: u64 = 100;
const BATCH: u64 = 10;

/// Batches of `BATCH` records at positions 0.., then the end.
struct Records {
    next: u64,
}

impl Reader for Records {
    fn pull(&mut self, _max: usize) -> Result<Option<Pull>, PipelineError> {
        if self.next >= RECORDS {
            return Ok(None);
        }
        let records = (self.next..(self.next + BATCH).min(RECORDS))
            .map(|i| {
                let payload = format!("{{\"n\":{i}}}").into_bytes();
                let mut record = Record::line(payload, "records", 0, i);
                record.event_id = Some(format!("ev-{i}").into());
                Pulled { record, start: i, next: i + 1, refused: None }
            })
            .collect::<Vec<_>>();
        self.next += records.len() as u64;
        Ok(Some(Pull { records, scope: PIPELINE_SCOPE, received: Instant::now(), behind: None }))
    }
}

struct Nothing;
impl Keeper for Nothing {}

/// A log whose commits take each position with the batch's ids.
struct Transactions<'a> {
    sink: PathBuf,
    /// (position, lines in the sink then), per commit made.
    commits: Mutex<Vec<(u64, usize)>>,
    /// The commit (by number) the brokers refuse as fenced.
    fence_at: Option<usize>,
    fenced: &'a AtomicBool,
    one_at_a_time: bool,
}

struct Acked;
impl SentIds for Acked {
    fn wait(self: Box<Self>, _stopping: &dyn Fn() -> bool) -> Result<Option<i64>, PipelineError> {
        Ok(Some(0))
    }
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map(|t| t.lines().count()).unwrap_or(0)
}

impl IdLog for Transactions<'_> {
    fn send<'l>(&'l self, _partition: &str, _now_secs: u64, _ids: &[IdDigest]) -> Box<dyn SentIds + 'l> {
        Box::new(Acked)
    }
    fn remember(&self, _partition: &str, _acked: i64, _write: &mut WriteBatch) -> Result<(), PipelineError> {
        Ok(())
    }
    fn commit(&self, _partition: &str, position: u64, _stopping: &dyn Fn() -> bool) -> Result<Commit, PipelineError> {
        let mut commits = self.commits.lock().unwrap_or_else(|p| p.into_inner());
        if self.fence_at == Some(commits.len()) {
            self.fenced.store(true, Ordering::SeqCst);
            return Ok(Commit::LetGo);
        }
        commits.push((position, lines(&self.sink)));
        Ok(Commit::Done)
    }
    fn one_batch_at_a_time(&self) -> bool {
        self.one_at_a_time
    }
}

/// A run's shared parts over a fresh store in `dir`, a file sink at
/// `dir/out.ndjson`, `pipeline` and `source` lines added to the config's
/// sections, and `changelog` as its id log: what `f` drives partitions with.
fn with_shared<R>(
    dir: &Path,
    pipeline: &str,
    source: &str,
    changelog: Option<&dyn IdLog>,
    registry: Option<Arc<Resolver>>,
    f: impl FnOnce(&Shared<'_>) -> R,
) -> R {
    let path = dir.join("t.toml");
    std::fs::write(
        &path,
        format!(
            "[pipeline]\nname = \"t\"\nstate_dir = \"state\"\n{pipeline}\n[source]\ntype = \"file\"\npaths = \
             [\"x.log\"]\n{source}\n[sink]\ntype = \"file\"\npath = {:?}\n",
            dir.join("out.ndjson").display().to_string()
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let cfg = crate::config::Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let store = crate::store::Store::open(&cfg.pipeline.state_dir, &crate::pipeline::setup::identity(&cfg))
        .unwrap_or_else(|e| panic!("{e}"));
    let dedup =
        crate::store::dedup::DedupWindow::new(&store, Duration::from_secs(3600)).unwrap_or_else(|e| panic!("{e}"));
    let plugins = crate::plugin::engine::Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
    let guarded = crate::pipeline::setup::open_sinks(&cfg, &plugins).unwrap_or_else(|e| panic!("{e}"));
    let stats = Mutex::new(crate::telemetry::stats::RunStats::default());
    crate::watchdog::with_watchdog(&cfg.watchdog, &guarded, None, |dog| {
        crate::pipeline::setup::with_committer(&store, None, |committer| {
            let settings = crate::pipeline::setup::driver_settings(&cfg);
            f(&Shared {
                settings: &settings,
                store: &store,
                dedup: &dedup,
                sinks: &guarded,
                committer,
                quarantine_topic: None,
                changelog,
                claims: None,
                registry: registry.clone(),
                stats: &stats,
                watchdog: dog,
            })
        })
    })
}

/// Run the records through the driver with `log`'s settings: the commits,
/// the partition's state at the end, and the sink's lines.
fn run(fence_at: Option<usize>, one_at_a_time: bool) -> (Vec<(u64, usize)>, PartitionState, usize) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let sink = dir.path().join("out.ndjson");
    let fenced = AtomicBool::new(false);
    let log = Transactions { sink: sink.clone(), commits: Mutex::default(), fence_at, fenced: &fenced, one_at_a_time };
    let state = Arc::new(Mutex::new(PartitionState::default()));
    let pipeline = format!("in_flight = 4\nbatch_size = {BATCH}");
    with_shared(dir.path(), &pipeline, "", Some(&log), None, |shared| {
        let stopping = || fenced.load(Ordering::SeqCst);
        let part = Partition {
            name: "records",
            start: Some(0),
            chain: crate::plugin::chain::Chain::new(Vec::new()),
            stopping: &stopping,
            state: state.clone(),
        };
        driver::drive(shared, part, &mut Records { next: 0 }, &mut Nothing)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let commits = log.commits.into_inner().unwrap_or_else(|p| p.into_inner());
    let state = std::mem::take(&mut *state.lock().unwrap_or_else(|p| p.into_inner()));
    (commits, state, lines(&sink))
}

#[test]
fn a_transaction_commits_each_batch_before_the_next_reaches_the_sink() {
    let (commits, state, delivered) = run(None, true);
    let expected: Vec<(u64, usize)> = (1..=RECORDS / BATCH).map(|k| (k * BATCH, (k * BATCH) as usize)).collect();
    // At each commit the sink held exactly the records below its position:
    // no later batch was delivered while the transaction was open.
    assert_eq!(commits, expected);
    assert_eq!(delivered, RECORDS as usize);
    assert_eq!((state.committable, state.committed), (Some(RECORDS as i64), Some(RECORDS as i64)));
}

#[test]
fn a_fenced_partition_delivers_nothing_after_the_batch_in_its_sink_and_commits_nothing_more() {
    let (commits, state, delivered) = run(Some(3), true);
    assert_eq!(commits, vec![(10, 10), (20, 20), (30, 30)]);
    // The fourth batch was in the sink when its commit was fenced; no
    // fifth was delivered, and nothing past 30 is published or committed.
    assert_eq!(delivered, 40);
    assert_eq!((state.committable, state.committed), (Some(30), Some(30)));
}

/// Three records per pull of partition `part`, `total` in all, then the end.
struct Trickle {
    part: usize,
    next: u64,
    total: u64,
}

impl Reader for Trickle {
    fn pull(&mut self, _max: usize) -> Result<Option<Pull>, PipelineError> {
        if self.next >= self.total {
            return Ok(None);
        }
        let end = (self.next + 3).min(self.total);
        let records = (self.next..end)
            .map(|i| {
                let mut record = Record::line(format!("{{\"n\":{i}}}").into_bytes(), "records", self.part as u64, i);
                // Every partition repeats partition 0's ids: one scope, so
                // each id reaches the sink once.
                record.event_id = Some(format!("ev-{i}").into());
                Pulled { record, start: i, next: i + 1, refused: None }
            })
            .collect();
        self.next = end;
        Ok(Some(Pull { records, scope: PIPELINE_SCOPE, received: Instant::now(), behind: None }))
    }
}

/// Each durable position the driver published, per partition; and, for
/// all partitions, where each segment it was handed lay in memory.
struct Positions(Arc<Mutex<Vec<u64>>>, Arc<Mutex<Vec<(usize, usize)>>>);

impl Keeper for Positions {
    fn with_doors(
        &mut self,
        _position: u64,
        records: &[Pulled],
        _fates: &[Option<crate::custody::plan::Disposition>],
        _write: &mut WriteBatch,
    ) -> Result<(), PipelineError> {
        self.1.lock().unwrap_or_else(|p| p.into_inner()).push((records.as_ptr() as usize, records.len()));
        Ok(())
    }
    fn durable(&mut self, position: u64) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(position);
    }
}

#[test]
fn partitions_sharing_one_worker_share_batches_and_each_commits_its_own_prefix() {
    const PARTS: usize = 8;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let sink = dir.path().join("out.ndjson");
    let positions: Vec<Arc<Mutex<Vec<u64>>>> = (0..PARTS).map(|_| Arc::default()).collect();
    let segments: Arc<Mutex<Vec<(usize, usize)>>> = Arc::default();
    with_shared(dir.path(), "workers = 1\nbatch_size = 16", "poll_interval = \"10ms\"", None, None, |shared| {
        let make_chain = || Ok(crate::plugin::chain::Chain::new(Vec::new()));
        let failed = Mutex::new(None);
        let on_error = |e: PipelineError| {
            failed.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e.to_string());
        };
        std::thread::scope(|scope| {
            let pool =
                driver::Pool::new(scope, shared, driver::PoolParts { make_chain: &make_chain, on_error: &on_error });
            let done: Vec<_> = positions
                .iter()
                .enumerate()
                .map(|(part, seen)| {
                    pool.add(driver::Lane {
                        name: Arc::from(format!("p{part}")),
                        start: Some(0),
                        // Partition k holds 10 + k records.
                        reader: Box::new(Trickle { part, next: 0, total: 10 + part as u64 }),
                        keeper: Box::new(Positions(seen.clone(), segments.clone())),
                        stopping: Arc::new(|| false),
                        state: Arc::default(),
                    })
                })
                .collect();
            pool.close();
            for d in done {
                d.wait();
            }
        });
        assert_eq!(failed.into_inner().unwrap_or_else(|p| p.into_inner()), None);
    });
    for (part, seen) in positions.iter().enumerate() {
        let seen = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert!(seen.windows(2).all(|w| w[0] <= w[1]), "partition {part}'s position never moves back: {seen:?}");
        assert_eq!(seen.last(), Some(&(10 + part as u64)), "partition {part} is committed to its end: {seen:?}");
    }
    // A batch is one list: the segments of one batch follow each other in
    // memory. Three records per pull, 16 per batch: 108 records in about 7
    // batches, not one per pull (39).
    let segments = segments.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let size = std::mem::size_of::<Pulled>();
    let batches = 1 + segments.windows(2).filter(|w| w[1].0 != w[0].0 + w[0].1 * size).count();
    assert_eq!(segments.len(), 39, "one segment per pull: {segments:?}");
    assert!(batches <= 12, "{batches} batches for 108 records of 8 partitions, 16 a batch");
    // Every id once: partition 0's ten, and each longer partition's extra.
    let text = std::fs::read_to_string(&sink).unwrap_or_default();
    let mut ids: Vec<String> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .map(|v| v["id"].as_str().map(String::from).unwrap_or_default())
        .collect();
    ids.sort();
    let mut expected: Vec<String> = (0..(10 + PARTS as u64 - 1)).map(|i| format!("ev-{i}")).collect();
    expected.sort();
    assert_eq!(ids, expected);
}

/// A registry that never answers.
struct Down;

impl Fetch for Down {
    fn fetch(&self, _id: u32) -> Result<Fetched, RegistryError> {
        Err(RegistryError::Unreachable { url: "http://registry.invalid".into(), message: "refused".into() })
    }
}

/// Records framed with schema id 7, ten per pull, forever.
struct Framed {
    next: u64,
}

impl Reader for Framed {
    fn pull(&mut self, _max: usize) -> Result<Option<Pull>, PipelineError> {
        let records = (self.next..self.next + BATCH)
            .map(|i| {
                let mut payload = vec![0, 0, 0, 0, 7];
                payload.extend_from_slice(format!("{i}").as_bytes());
                let mut record = Record::line(payload, "records", 0, i);
                record.event_id = Some(format!("ev-{i}").into());
                Pulled { record, start: i, next: i + 1, refused: None }
            })
            .collect::<Vec<_>>();
        self.next += BATCH;
        Ok(Some(Pull { records, scope: PIPELINE_SCOPE, received: Instant::now(), behind: None }))
    }
}

/// A stop while the registry is down is a let-go like any other: the run
/// ends well (it used to end with the registry's error), nothing reaches
/// the sink, and the partition's position stays where it started, so the
/// next owner reads the waiting batch again.
#[test]
fn a_stop_while_the_registry_is_down_lets_the_waiting_batch_go_undecided() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let sink = dir.path().join("out.ndjson");
    let schemas = Arc::new(Schemas::open(None).unwrap_or_else(|e| panic!("{e}")));
    let registry = Arc::new(Resolver::new(schemas, Box::new(Down)));
    let stop = Arc::new(AtomicBool::new(false));
    let positions: Arc<Mutex<Vec<u64>>> = Arc::default();
    let result = with_shared(dir.path(), "batch_size = 10", "", None, Some(registry), |shared| {
        std::thread::scope(|scope| {
            let flip = stop.clone();
            // Past the first retries (100 ms, then 200 ms).
            scope.spawn(move || {
                std::thread::sleep(Duration::from_millis(500));
                flip.store(true, Ordering::SeqCst);
            });
            let stopping = || stop.load(Ordering::SeqCst);
            let part = Partition {
                name: "records",
                start: Some(0),
                chain: crate::plugin::chain::Chain::new(Vec::new()),
                stopping: &stopping,
                state: Arc::default(),
            };
            driver::drive(shared, part, &mut Framed { next: 0 }, &mut Positions(positions.clone(), Arc::default()))
        })
    });
    assert!(result.is_ok(), "the run ends well: {:?}", result.err().map(|e| e.to_string()));
    assert!(stop.load(Ordering::SeqCst), "the run ended before the stop");
    assert_eq!(lines(&sink), 0, "nothing reaches the sink without its schema");
    let positions = positions.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert!(positions.iter().all(|p| *p == 0), "the position stays at the waiting batch: {positions:?}");
}

/// A registry that is down until `up` is set, then holds schema 7.
struct DownUntil(Arc<AtomicBool>);

impl Fetch for DownUntil {
    fn fetch(&self, id: u32) -> Result<Fetched, RegistryError> {
        if !self.0.load(Ordering::SeqCst) {
            return Down.fetch(id);
        }
        let schema = crate::schema_registry::cache::RegisteredSchema::new("AVRO", "\"long\"");
        Ok(if id == 7 { Fetched::Found(schema) } else { Fetched::Unknown })
    }
}

/// Records of partition `part` framed with schema id 7, three per pull,
/// `total` in all (forever when none).
struct FramedPart {
    part: usize,
    next: u64,
    total: Option<u64>,
}

impl Reader for FramedPart {
    fn pull(&mut self, _max: usize) -> Result<Option<Pull>, PipelineError> {
        let end = match self.total {
            Some(total) if self.next >= total => return Ok(None),
            Some(total) => (self.next + 3).min(total),
            None => self.next + 3,
        };
        let records = (self.next..end)
            .map(|i| {
                let mut payload = vec![0, 0, 0, 0, 7];
                payload.extend_from_slice(format!("p{}-{i}", self.part).as_bytes());
                let mut record = Record::line(payload, "records", self.part as u64, i);
                record.event_id = Some(format!("p{}-ev-{i}", self.part).into());
                Pulled { record, start: i, next: i + 1, refused: None }
            })
            .collect();
        self.next = end;
        Ok(Some(Pull { records, scope: PIPELINE_SCOPE, received: Instant::now(), behind: None }))
    }
}

/// A batch of two partitions waits for the registry while one of them
/// stops: it is not let go, because the other goes on and must not be
/// left with a hole. When the registry answers, every record of the one
/// that goes on is delivered once and its position reaches its end.
#[test]
fn a_batch_waiting_for_the_registry_is_let_go_only_when_all_its_partitions_stop() {
    const TOTAL: u64 = 20;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let sink = dir.path().join("out.ndjson");
    let up = Arc::new(AtomicBool::new(false));
    let schemas = Arc::new(Schemas::open(None).unwrap_or_else(|e| panic!("{e}")));
    let registry = Arc::new(Resolver::new(schemas, Box::new(DownUntil(up.clone()))));
    let a_stops = Arc::new(AtomicBool::new(false));
    let b_positions: Arc<Mutex<Vec<u64>>> = Arc::default();
    let pipeline = "workers = 1\nbatch_size = 16";
    with_shared(dir.path(), pipeline, "poll_interval = \"10ms\"", None, Some(registry), |shared| {
        let make_chain = || Ok(crate::plugin::chain::Chain::new(Vec::new()));
        let failed = Mutex::new(None);
        let on_error = |e: PipelineError| {
            failed.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e.to_string());
        };
        std::thread::scope(|scope| {
            let (stops, comes_up) = (a_stops.clone(), up.clone());
            scope.spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                stops.store(true, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(500));
                comes_up.store(true, Ordering::SeqCst);
            });
            let pool =
                driver::Pool::new(scope, shared, driver::PoolParts { make_chain: &make_chain, on_error: &on_error });
            let a_stopping = a_stops.clone();
            let lanes = [
                driver::Lane {
                    name: Arc::from("a"),
                    start: Some(0),
                    reader: Box::new(FramedPart { part: 0, next: 0, total: None }),
                    keeper: Box::new(Positions(Arc::default(), Arc::default())),
                    stopping: Arc::new(move || a_stopping.load(Ordering::SeqCst)),
                    state: Arc::default(),
                },
                driver::Lane {
                    name: Arc::from("b"),
                    start: Some(0),
                    reader: Box::new(FramedPart { part: 1, next: 0, total: Some(TOTAL) }),
                    keeper: Box::new(Positions(b_positions.clone(), Arc::default())),
                    stopping: Arc::new(|| false),
                    state: Arc::default(),
                },
            ];
            let done: Vec<_> = lanes.into_iter().map(|lane| pool.add(lane)).collect();
            pool.close();
            for d in done {
                d.wait();
            }
        });
        assert_eq!(failed.into_inner().unwrap_or_else(|p| p.into_inner()), None);
    });
    assert!(up.load(Ordering::SeqCst), "b finished before the registry came back");
    let positions = b_positions.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert_eq!(positions.last(), Some(&TOTAL), "b is committed to its end: {positions:?}");
    let text = std::fs::read_to_string(&sink).unwrap_or_default();
    let mut b_ids: Vec<String> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .filter_map(|v| v["id"].as_str().filter(|id| id.starts_with("p1-")).map(String::from))
        .collect();
    b_ids.sort();
    let mut expected: Vec<String> = (0..TOTAL).map(|i| format!("p1-ev-{i}")).collect();
    expected.sort();
    assert_eq!(b_ids, expected, "every record of b once");
}
