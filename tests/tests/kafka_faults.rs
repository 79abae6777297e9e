//! Faults a real broker cannot show on demand, on librdkafka's mock
//! cluster: offset commit errors, a broker down and up, every broker down
//! past the session timeout, partition leaders moving. The pipeline runs in
//! this process (`sluice::pipeline::run`); after each fault, the sink holds
//! every produced id (nothing lost), and a new consumer of the group finds
//! the committed offsets at the end of the contiguous finished prefix,
//! which, with every record finished, is each partition's high watermark.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use sluice::config::Config;
use sluice::pipeline::stop::Stop;
use sluice::plugin::engine::Runtime;
use sluice_e2e::kafka::{committed, produce};

const TOPIC: &str = "faults";
const PARTITIONS: i32 = 4;
const GROUP: &str = "faults-group";

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Setup {
    mock: MockCluster<'static, DefaultProducerContext>,
    dir: tempfile::TempDir,
    good: BTreeSet<String>,
}

fn setup(n: usize) -> Setup {
    let mock = MockCluster::new(3).unwrap_or_else(|e| panic!("{e}"));
    mock.create_topic(TOPIC, PARTITIONS, 3).unwrap_or_else(|e| panic!("{e}"));
    // The mock cannot create topics on request: the dedup changelog too.
    mock.create_topic(&format!("{GROUP}-dedup-changelog"), PARTITIONS, 3).unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let ts = sluice_guest::time::format_rfc3339(now * 1_000_000_000);
    let mut good = BTreeSet::new();
    let records: Vec<(i32, String, String)> = (0..n)
        .map(|i| {
            let id = format!("ev-{i:06}");
            good.insert(id.clone());
            ((i % PARTITIONS as usize) as i32, id.clone(), format!("{{\"event_id\":\"{id}\",\"ts\":\"{ts}\"}}"))
        })
        .collect();
    produce(&mock.bootstrap_servers(), TOPIC, &records);
    Setup { mock, dir, good }
}

impl Setup {
    fn config(&self) -> Config {
        let text = format!(
            r#"
[pipeline]
name = "faults"
state_dir = "state"
batch_size = 100

[source]
type = "kafka"
brokers = "{brokers}"
topics = ["{TOPIC}"]
group_id = "{GROUP}"
commit_interval = "100ms"
properties = {{ "session.timeout.ms" = 6000, "heartbeat.interval.ms" = 500 }}

{plugins}
[dedup]
window = "1h"

[sink]
type = "file"
path = "out.ndjson"
"#,
            brokers = self.mock.bootstrap_servers(),
            plugins = sluice_e2e::json_chain_toml(true, None),
        );
        let path = self.dir.path().join("sluice.toml");
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
        Config::load(&path).unwrap_or_else(|e| panic!("{e}"))
    }

    fn sink(&self) -> PathBuf {
        self.dir.path().join("out.ndjson")
    }

    fn delivered(&self) -> Vec<String> {
        let text = std::fs::read_to_string(self.sink()).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v["id"].as_str().map(str::to_string))
            .collect()
    }

    fn high_watermarks(&self) -> Vec<Option<i64>> {
        let c: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", self.mock.bootstrap_servers())
            .create()
            .unwrap_or_else(|e| panic!("{e}"));
        (0..PARTITIONS).map(|p| c.fetch_watermarks(TOPIC, p, Duration::from_secs(10)).ok().map(|w| w.1)).collect()
    }

    /// Run the pipeline; `fault` is applied once `at` ids are in the sink.
    /// Returns when every id is delivered and the run stopped.
    fn run_with(&self, at: usize, fault: impl FnOnce(&MockCluster<'static, DefaultProducerContext>)) -> usize {
        let cfg = self.config();
        let runtime =
            Runtime::new(Some(std::env::temp_dir().join("sluice-e2e-cache/sluice"))).unwrap_or_else(|e| panic!("{e}"));
        let stop = Stop::default();
        let started = Instant::now();
        std::thread::scope(|s| {
            let run = s.spawn(|| sluice::pipeline::run(&cfg, &runtime, &stop).map(|_| ()).map_err(|e| e.to_string()));
            let mut fault = Some(fault);
            loop {
                let have: BTreeSet<String> = self.delivered().into_iter().collect();
                if have.len() >= at
                    && let Some(f) = fault.take()
                {
                    f(&self.mock);
                }
                if fault.is_none() && self.good.is_subset(&have) {
                    break;
                }
                assert!(!run.is_finished(), "the pipeline ended early: {:?}", run.join().map(|r| r.err()));
                assert!(
                    started.elapsed() < Duration::from_secs(120),
                    "{} ids missing",
                    self.good.difference(&have).count()
                );
                std::thread::sleep(Duration::from_millis(100));
            }
            // Let the committer catch up with the last batches, then stop.
            let expected = self.high_watermarks();
            let deadline = Instant::now() + Duration::from_secs(30);
            while committed(&self.mock.bootstrap_servers(), GROUP, TOPIC, PARTITIONS) != expected {
                assert!(Instant::now() < deadline, "commits did not reach the finished prefix {expected:?}");
                std::thread::sleep(Duration::from_millis(100));
            }
            stop.request();
            let result = run.join().unwrap_or_else(|_| panic!("the pipeline panicked"));
            result.unwrap_or_else(|e| panic!("{e}"));
        });
        // Nothing lost; a new consumer of the group starts at the end of
        // the finished prefix: here, everything.
        let delivered: BTreeSet<String> = self.delivered().into_iter().collect();
        let missing: Vec<_> = self.good.difference(&delivered).take(5).collect();
        assert!(missing.is_empty(), "ids lost: {missing:?}");
        assert_eq!(committed(&self.mock.bootstrap_servers(), GROUP, TOPIC, PARTITIONS), self.high_watermarks());
        self.delivered().len() - self.good.len()
    }
}

fn errs(e: RDKafkaRespErr, n: usize) -> Vec<RDKafkaRespErr> {
    vec![e; n]
}

#[test]
fn offset_commit_errors_are_retried_by_the_next_commit() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let s = setup(4_000);
    // Queued before the first commit: injected at 1,000 delivered ids, the
    // errors could arrive after the last commit had already succeeded, and
    // then no commit would ever meet them.
    let dups = s.run_with(0, |mock| {
        let mut e = errs(RDKafkaRespErr::RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS, 6);
        e.extend(errs(RDKafkaRespErr::RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, 2));
        mock.request_errors(RDKafkaApiKey::OffsetCommit, &e);
    });
    // The injected errors reached sluice's commits, and later ones succeeded.
    let metrics = sluice::telemetry::install().map(|h| h.render()).unwrap_or_default();
    let count = |result: &str| -> f64 {
        metrics
            .lines()
            .filter(|l| l.starts_with("sluice_offset_commits_total{") && l.contains(&format!("result=\"{result}\"")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let (failed, ok) = (count("error"), count("ok"));
    // librdkafka retries REQUEST_TIMED_OUT inside one commit; the six
    // REBALANCE_IN_PROGRESS answers reach sluice as failed commits.
    assert!(failed >= 6.0, "the injected OffsetCommit errors were seen: {failed}\n{metrics}");
    assert!(ok > 0.0, "commits succeeded after them");
    println!(
        "OffsetCommit REBALANCE_IN_PROGRESS x6 + REQUEST_TIMED_OUT x2: {failed} failed commits, {ok} ok; 0 lost, {dups} duplicates"
    );
}

#[test]
fn one_broker_down_and_up() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let s = setup(4_000);
    let dups = s.run_with(1_000, |mock| {
        mock.broker_down(2).unwrap_or_else(|e| panic!("{e}"));
        std::thread::sleep(Duration::from_secs(2));
        mock.broker_up(2).unwrap_or_else(|e| panic!("{e}"));
    });
    println!("broker 2 down for 2 s: 0 lost, {dups} duplicates");
}

#[test]
fn all_brokers_down_past_the_session_timeout() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let s = setup(4_000);
    let dups = s.run_with(1_000, |mock| {
        for b in 1..=3 {
            mock.broker_down(b).unwrap_or_else(|e| panic!("{e}"));
        }
        std::thread::sleep(Duration::from_secs(9));
        for b in 1..=3 {
            mock.broker_up(b).unwrap_or_else(|e| panic!("{e}"));
        }
    });
    println!("all brokers down 9 s (session timeout 6 s): 0 lost, {dups} duplicates");
}

#[test]
fn partition_leaders_move() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let s = setup(4_000);
    let dups = s.run_with(1_000, |mock| {
        for p in 0..PARTITIONS {
            mock.partition_leader(TOPIC, p, Some(1 + (p + 1) % 3)).unwrap_or_else(|e| panic!("{e}"));
        }
    });
    println!("every partition leader moved: 0 lost, {dups} duplicates");
}
