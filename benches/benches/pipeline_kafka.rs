//! The Kafka pipeline end to end: a real broker (tansu, SQLite storage,
//! started here) holding N generated JSON records of about 300 bytes over
//! 1, 4 and 16 partitions → sluice (a group member in this process) → json
//! → ts-window → dedup → the file sink. Beside each, in the same run, the
//! baseline: a bare rdkafka consume loop over the same records that copies
//! each payload. Prints records/s per core (records over this process's CPU
//! seconds; the broker's CPU is its own), wall-clock records/s, the ratio,
//! peak RSS and p50/p99 latency from a record's arrival in sluice to its
//! durable commit.
//!
//! `cargo bench -p sluice-benches --bench pipeline_kafka`
//! (`SLUICE_BENCH_RECORDS`, default 200,000; `SLUICE_BENCH_PARTITIONS`,
//! default `1,4,16`; the plugins are compiled before the clock starts;
//! needs tansu, see scripts/setup).

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use sluice::config::Config;
use sluice::pipeline::{self, Stop};
use sluice::plugin::Runtime;
use sluice_benches::{cpu_seconds, peak_rss_mib, reset_peak_rss};
use sluice_e2e::kafka::{Broker, Storage, committed, create_topic, high_watermarks, produce};

/// The baseline: read every record of the topic once, copying its payload.
fn bare_consume(brokers: &str, topic: &str, partitions: i32, n: usize) -> (f64, f64) {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", format!("bench-bare-{topic}"))
        .set("enable.auto.commit", "false")
        .create()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
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
    let n = sluice_benches::env_count("SLUICE_BENCH_RECORDS", 200_000);
    let counts: Vec<i32> =
        sluice_benches::env_counts("SLUICE_BENCH_PARTITIONS", "1,4,16").into_iter().map(|c| c as i32).collect();
    let broker = Broker::start(Storage::Sqlite);
    let brokers = broker.brokers();
    let runtime = Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
    println!(
        "pipeline_kafka: {n} records per run, kafka (tansu, SQLite storage) → json → ts-window → dedup → file sink"
    );
    println!(
        "  {:>10}  {:>26}  {:>26}  {:>14}  {:>7}  {:>7}  {:>7}",
        "partitions",
        "bare rdkafka /s per core (wall)",
        "sluice /s per core (wall)",
        "ratio core/wall",
        "RSS MiB",
        "p50 ms",
        "p99 ms"
    );
    for partitions in counts {
        let topic = format!("bench-{partitions}");
        create_topic(&brokers, &topic, partitions);
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
                ((i % partitions as usize) as i32, id, body)
            })
            .collect();
        let t = Instant::now();
        produce(&brokers, &topic, &records);
        eprintln!("produced {n} records over {partitions} partitions in {:.1} s", t.elapsed().as_secs_f64());
        drop(records);

        let (bare_cpu, bare_wall) = bare_consume(&brokers, &topic, partitions, n);

        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let cfg_path = dir.path().join("sluice.toml");
        let group = format!("bench-sluice-{partitions}");
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
group_id = "{group}"
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
        // Compile the plugins before the clock starts (the runtime keeps them).
        pipeline::build_chain(&runtime, &cfg).unwrap_or_else(|e| panic!("{e}"));
        let high: Vec<Option<i64>> = high_watermarks(&brokers, &topic, partitions).into_iter().map(Some).collect();
        let stop = Stop::default();
        reset_peak_rss();
        let (cpu0, t0) = (cpu_seconds(), Instant::now());
        let stats = std::thread::scope(|s| {
            let run = s.spawn(|| pipeline::run(&cfg, &runtime, &stop).map_err(|e| e.to_string()));
            while committed(&brokers, &group, &topic, partitions) != high {
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
            "  {partitions:>10}  {:>14.0} ({:>9.0})  {:>14.0} ({:>9.0})  {:>6.2}x/{:>5.2}x  {:>7.0}  {:>7.1}  {:>7.1}",
            per_core(bare_cpu),
            n as f64 / bare_wall,
            per_core(cpu),
            n as f64 / wall,
            per_core(bare_cpu) / per_core(cpu),
            (n as f64 / bare_wall) / (n as f64 / wall),
            peak_rss_mib(),
            stats.latency.quantile(0.5) * 1e3,
            stats.latency.quantile(0.99) * 1e3,
        );
        println!("              (wall includes the group join, about 3 s with session.timeout.ms 6000)");
    }
}
