//! The Kafka benches' shared harness: the records they produce, the
//! pipeline they run, and a run measured until the group has committed
//! every record.

use std::path::Path;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use sluice::config::Config;
use sluice::pipeline;
use sluice::pipeline::stop::Stop;
use sluice::plugin::engine::Runtime;
use sluice::telemetry::stats::RunStats;
use sluice_e2e::kafka::high_watermarks;

use crate::reset_peak_rss;

/// `n` records of about 300 bytes over `partitions`, key and `event_id`
/// `ev-{i:08}` (record `i` on partition `i % partitions`), stamped now.
pub fn records(n: usize, partitions: i32) -> Vec<(i32, String, String)> {
    let ts = sluice_guest::time::format_rfc3339(crate::now_secs() * 1_000_000_000);
    (0..n)
        .map(|i| {
            let id = format!("ev-{i:08}");
            let body = format!(
                r#"{{"event_id":"{id}","ts":"{ts}","level":"INFO","service":"checkout","msg":"order {i} placed","pad":"{}"}}"#,
                "x".repeat(170)
            );
            ((i % partitions as usize) as i32, id, body)
        })
        .collect()
}

/// The benched pipeline: `topic` → json → ts-window → dedup (1 h) → a
/// file sink, as group `group`, its state and output in `dir`;
/// `dedup_extra` adds lines to `[dedup]`.
pub fn config(dir: &Path, brokers: &str, topic: &str, group: &str, dedup_extra: &str) -> Config {
    let path = dir.join(format!("{group}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"
[pipeline]
name = "bench"
state_dir = "state-{group}"
batch_size = 1000

[source]
type = "kafka"
brokers = "{brokers}"
topics = ["{topic}"]
group_id = "{group}"
properties = {{ "session.timeout.ms" = 6000 }}

{plugins}
[dedup]
window = "1h"
{dedup_extra}

[sink]
type = "file"
path = "out-{group}.ndjson"
"#,
            plugins = sluice_e2e::json_chain_toml(false, Some("1d")),
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    Config::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// One measured run.
pub struct Measured {
    pub stats: RunStats,
    /// This process's CPU seconds (the broker's are its own).
    pub cpu: f64,
    pub wall: f64,
}

/// Run `cfg` until the group's committed offsets reach the topic's high
/// watermarks (and its back's, repartitioned), then stop it. The plugins are compiled before the clock
/// starts (the runtime keeps them), and the peak RSS is reset.
pub fn run_until_committed(cfg: &Config, runtime: &Runtime, brokers: &str, topic: &str, partitions: i32) -> Measured {
    Watch::new(cfg, brokers, topic, partitions).run(cfg, runtime)
}

/// What a measured run watches to know it is done: the group's commits
/// against the topic's ends, through clients made before the run (so
/// that their threads and CPU are the bench's, not the run's).
pub struct Watch<'a> {
    brokers: &'a str,
    topic: &'a str,
    partitions: i32,
    /// The source topic was filled before the run: its ends are read
    /// once, before the clock starts.
    source_high: Vec<Option<i64>>,
    /// One client per group watched, kept: a new client per look (every
    /// 200 ms, committed offsets and a watermark request per partition)
    /// cost this process more CPU than sluice itself on a slow broker with
    /// hundreds of partitions, and that CPU counted as sluice's.
    watchers: Vec<(BaseConsumer, String)>,
}

impl<'a> Watch<'a> {
    pub fn new(cfg: &Config, brokers: &'a str, topic: &'a str, partitions: i32) -> Watch<'a> {
        let sluice::source::config::SourceConfig::Kafka(k) = &cfg.source else { panic!("a kafka pipeline") };
        // With `dedup.repartition` the records are through once the back's
        // group has committed the internal topic too.
        let mut waits = vec![(k.group_id.clone(), topic.to_string())];
        if cfg.dedup.repartition {
            let internal = sluice::source::kafka::config::repartition_topic(&k.group_id);
            waits.push((internal.clone(), internal));
        }
        let source_high = high_watermarks(brokers, topic, partitions).into_iter().map(Some).collect();
        let watchers = waits
            .into_iter()
            .map(|(group, watched)| {
                let c: BaseConsumer = rdkafka::ClientConfig::new()
                    .set("bootstrap.servers", brokers)
                    .set("group.id", &group)
                    .set("enable.auto.commit", "false")
                    .create()
                    .unwrap_or_else(|e| panic!("{e}"));
                (c, watched)
            })
            .collect();
        Watch { brokers, topic, partitions, source_high, watchers }
    }

    fn done(&self) -> bool {
        self.watchers.iter().all(|(watcher, watched)| {
            let high = if watched == self.topic {
                self.source_high.clone()
            } else {
                high_watermarks(self.brokers, watched, self.partitions).into_iter().map(Some).collect()
            };
            committed_by(watcher, watched, self.partitions) == high
        })
    }

    /// Run `cfg` until done, then stop it. The plugins are compiled before
    /// the clock starts (the runtime keeps them), and the peak RSS is reset.
    pub fn run(&self, cfg: &Config, runtime: &Runtime) -> Measured {
        pipeline::setup::build_chain(runtime, cfg).unwrap_or_else(|e| panic!("{e}"));
        let stop = Stop::default();
        reset_peak_rss();
        let (cpu, t0) = (crate::RunCpu::start(), Instant::now());
        let stats = std::thread::scope(|s| {
            let run = s.spawn(|| pipeline::run(cfg, runtime, &stop).map_err(|e| e.to_string()));
            while !self.done() {
                assert!(!run.is_finished(), "sluice ended early: {:?}", run.join().ok());
                assert!(t0.elapsed() < Duration::from_secs(900), "sluice did not finish");
                std::thread::sleep(Duration::from_millis(500));
            }
            stop.request();
            run.join().unwrap_or_else(|_| panic!("panicked")).unwrap_or_else(|e| panic!("{e}"))
        });
        Measured { stats, cpu: cpu.seconds(), wall: t0.elapsed().as_secs_f64() }
    }
}

/// The offsets `watcher`'s group committed on `topic`'s partitions `0..n`.
fn committed_by(watcher: &BaseConsumer, topic: &str, n: i32) -> Vec<Option<i64>> {
    let mut tpl = TopicPartitionList::new();
    for p in 0..n {
        tpl.add_partition(topic, p);
    }
    let Ok(got) = watcher.committed_offsets(tpl, Duration::from_secs(10)) else { return vec![None; n as usize] };
    // By partition, read once: `find_partition` per partition is a linear
    // search with a string compare each, a million of them at 1,024
    // partitions every look, and that CPU counted as sluice's.
    let mut by_partition = vec![None; n as usize];
    for e in got.elements() {
        if let (Offset::Offset(o), Some(slot)) = (e.offset(), by_partition.get_mut(e.partition() as usize))
            && e.topic() == topic
        {
            *slot = Some(o);
        }
    }
    by_partition
}

/// A measured run as the Kafka benches report it: CPU and wall seconds,
/// peak RSS, and the latency to commit.
pub struct Run {
    pub cpu: f64,
    pub wall: f64,
    pub rss: f64,
    pub p50: f64,
    pub p99: f64,
}

impl Run {
    /// `run_until_committed`, checked to have delivered all `n` records.
    pub fn measure(cfg: &Config, runtime: &Runtime, brokers: &str, topic: &str, partitions: i32, n: usize) -> Run {
        let m = run_until_committed(cfg, runtime, brokers, topic, partitions);
        // Repartitioned, each record is delivered twice: by the front to
        // the internal topic, by the back to the sink.
        let ways = if cfg.dedup.repartition { 2 } else { 1 };
        assert_eq!(m.stats.total.delivered as usize, n * ways, "every record delivered");
        Run {
            cpu: m.cpu,
            wall: m.wall,
            rss: crate::peak_rss_mib(),
            p50: m.stats.latency.quantile(0.5) * 1e3,
            p99: m.stats.latency.quantile(0.99) * 1e3,
        }
    }

    /// One row of the benches' table, named `name`, for `n` records.
    pub fn row(&self, name: &str, n: usize) -> String {
        format!(
            "  {name:<16}  {:>14.0}  {:>10.0}  {:>8.0}  {:>7.1}  {:>7.1}",
            n as f64 / self.cpu,
            n as f64 / self.wall,
            self.rss,
            self.p50,
            self.p99
        )
    }
}

/// The table's head, its first column named `first`.
pub fn head(first: &str) -> String {
    format!(
        "  {first:<16}  {:>14}  {:>10}  {:>8}  {:>7}  {:>7}",
        "/s per core", "/s wall", "RSS MiB", "p50 ms", "p99 ms"
    )
}

/// Create `topic` with `partitions` and fill it with `records(n, …)`.
pub fn fill(brokers: &str, topic: &str, n: usize, partitions: i32) {
    sluice_e2e::kafka::create_topic(brokers, topic, partitions);
    sluice_e2e::kafka::produce(brokers, topic, &records(n, partitions));
}
