//! The Kafka pipeline end to end: a real broker (tansu, SQLite storage,
//! started here) holding N generated JSON records of about 300 bytes over 4
//! partitions → sluice (a group member in this process) → json → ts-window
//! → dedup → the file sink. Beside it, in the same run, the baseline: a
//! bare rdkafka consume loop over the same records that copies each
//! payload. Prints records/s per core (records over this process's CPU
//! seconds; the broker's CPU is its own) and wall-clock records/s, and the
//! ratio.
//!
//! `cargo bench -p sluice-benches --bench pipeline_kafka`
//! (`SLUICE_BENCH_RECORDS`, default 200,000; the plugins are compiled before
//! the clock starts; needs tansu, see scripts/setup).

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use sluice::config::Config;
use sluice::pipeline::{self, Stop};
use sluice::plugin::Runtime;
use sluice_benches::cpu_seconds;
use sluice_e2e::kafka::{Broker, Storage, committed, create_topic, high_watermarks, produce};

const PARTITIONS: i32 = 4;

/// The baseline: read every record of the topic once, copying its payload.
fn bare_consume(brokers: &str, topic: &str, n: usize) -> (f64, f64) {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "bench-bare")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(topic, p, Offset::Beginning).unwrap_or_else(|e| panic!("{e}"));
    }
    c.assign(&tpl).unwrap_or_else(|e| panic!("{e}"));
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let mut got = 0usize;
    let mut bytes = 0usize;
    while got < n {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
            let copy = m.payload().map(<[u8]>::to_vec).unwrap_or_default();
            bytes += copy.len();
            got += 1;
        }
        assert!(t0.elapsed() < Duration::from_secs(600), "baseline stuck at {got}");
    }
    assert!(bytes > 0);
    (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64())
}

fn main() {
    let n: usize = std::env::var("SLUICE_BENCH_RECORDS").ok().and_then(|v| v.parse().ok()).unwrap_or(200_000);
    let broker = Broker::start(Storage::Sqlite);
    let brokers = broker.brokers();
    let topic = "bench";
    create_topic(&brokers, topic, PARTITIONS);
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let ts = sluice_guest::time::format_rfc3339(now * 1_000_000_000);
    let records: Vec<(i32, String, String)> = (0..n)
        .map(|i| {
            let id = format!("ev-{i:08}");
            let body = format!(
                r#"{{"event_id":"{id}","ts":"{ts}","level":"INFO","service":"checkout","msg":"order {i} placed","pad":"{}"}}"#,
                "x".repeat(170)
            );
            ((i % PARTITIONS as usize) as i32, id, body)
        })
        .collect();
    let t = Instant::now();
    produce(&brokers, topic, &records);
    eprintln!("produced {n} records in {:.1} s", t.elapsed().as_secs_f64());

    let (bare_cpu, bare_wall) = bare_consume(&brokers, topic, n);

    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cfg_path = dir.path().join("sluice.toml");
    std::fs::write(
        &cfg_path,
        format!(
            r#"
[pipeline]
name = "bench"
state_dir = "state"
batch_size = 1000

[source]
type = "kafka"
brokers = "{brokers}"
topics = ["{topic}"]
group_id = "bench-sluice"
properties = {{ "session.timeout.ms" = 6000 }}

{plugins}
[dedup]
window = "1h"

[sink]
type = "file"
path = "out.ndjson"
"#,
            plugins = sluice_e2e::json_chain_toml(false, Some("1d")),
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let cfg = Config::load(&cfg_path).unwrap_or_else(|e| panic!("{e}"));
    let runtime = Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
    // Compile the plugins before the clock starts (the runtime keeps them).
    pipeline::build_chain(&runtime, &cfg).unwrap_or_else(|e| panic!("{e}"));
    let high: Vec<Option<i64>> = high_watermarks(&brokers, topic, PARTITIONS).into_iter().map(Some).collect();
    let stop = Stop::default();
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let stats = std::thread::scope(|s| {
        let run = s.spawn(|| pipeline::run(&cfg, &runtime, &stop).map_err(|e| e.to_string()));
        while committed(&brokers, "bench-sluice", topic, PARTITIONS) != high {
            assert!(!run.is_finished(), "sluice ended early");
            assert!(t0.elapsed() < Duration::from_secs(900), "sluice did not finish");
            std::thread::sleep(Duration::from_millis(200));
        }
        stop.request();
        run.join().unwrap_or_else(|_| panic!("panicked")).unwrap_or_else(|e| panic!("{e}"))
    });
    let (cpu, wall) = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());
    assert_eq!(stats.total.delivered as usize, n, "every record delivered");
    let per_core = |cpu: f64| n as f64 / cpu;
    println!(
        "kafka → json → ts-window → dedup → file sink, {n} records over {PARTITIONS} partitions (tansu, SQLite storage)\n\
         bare rdkafka consume loop: {:>9.0} records/s per core, {:>9.0} records/s wall\n\
         sluice:                    {:>9.0} records/s per core, {:>9.0} records/s wall\n\
         ratio (bare / sluice):     {:.2}x per core, {:.2}x wall",
        per_core(bare_cpu),
        n as f64 / bare_wall,
        per_core(cpu),
        n as f64 / wall,
        per_core(bare_cpu) / per_core(cpu),
        (n as f64 / bare_wall) / (n as f64 / wall),
    );
}
