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
use sluice::plugin::engine::Runtime;
use sluice_benches::{cpu_seconds, peak_rss_mib};
use sluice_e2e::kafka::{Broker, Storage, create_topic, produce};

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
        let records = sluice_benches::kafka::records(n, partitions);
        let t = Instant::now();
        produce(&brokers, &topic, &records);
        eprintln!("produced {n} records over {partitions} partitions in {:.1} s", t.elapsed().as_secs_f64());
        drop(records);

        let (bare_cpu, bare_wall) = bare_consume(&brokers, &topic, partitions, n);

        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let cfg =
            sluice_benches::kafka::config(dir.path(), &brokers, &topic, &format!("bench-sluice-{partitions}"), "");
        let m = sluice_benches::kafka::run_until_committed(&cfg, &runtime, &brokers, &topic, partitions);
        let (stats, cpu, wall) = (m.stats, m.cpu, m.wall);
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
