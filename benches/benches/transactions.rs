//! What `source.transactions` costs (issue 23): the Kafka pipeline over N
//! records on 4 partitions, with and without transactions, alternating
//! (three of each) in one run on one broker (nisshi, SQLite storage:
//! tansu 0.6 cannot end a transaction). Each run is its own group, so each
//! reads the whole topic.
//!
//! Reported per run: records/s per core and wall, peak RSS, p50/p99
//! latency to commit; then the cost per delivered record and per batch
//! (one transaction per batch of 1,000) from the medians.
//!
//! `cargo bench -p sluice-benches --bench transactions`
//! (`SLUICE_BENCH_RECORDS`, default 100,000; needs nisshi, scripts/setup).

use sluice::plugin::engine::Runtime;
use sluice::source::config::SourceConfig;
use sluice_benches::kafka::Run;
use sluice_benches::median;
use sluice_e2e::kafka::{Broker, Storage};

const PARTITIONS: i32 = 4;
const BATCH: f64 = 1000.0;

fn main() {
    let n = sluice_benches::env_count("SLUICE_BENCH_RECORDS", 100_000);
    let broker = Broker::start_nisshi(Storage::Sqlite);
    let brokers = broker.brokers();
    let runtime = Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
    let topic = "bench-transactions";
    sluice_benches::kafka::fill(&brokers, topic, n, PARTITIONS);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    println!(
        "transactions: {n} records on {PARTITIONS} partitions, kafka (nisshi 0.7, SQLite) → json → ts-window → dedup \
         (changelog on) → file; one transaction per batch of {BATCH}"
    );
    println!("{}", sluice_benches::kafka::head("transactions"));
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for round in 0..6 {
        let transactions = round % 2 == 1;
        let group = format!("bench-{round}-{}", if transactions { "on" } else { "off" });
        let mut cfg = sluice_benches::kafka::config(dir.path(), &brokers, topic, &group, "");
        if let SourceConfig::Kafka(k) = &mut cfg.source {
            k.transactions = transactions;
        }
        let r = Run::measure(&cfg, &runtime, &brokers, topic, PARTITIONS, n);
        println!("{}", r.row(if transactions { "on" } else { "off (baseline)" }, n));
        if transactions { on.push(r) } else { off.push(r) }
    }
    let cpu = |v: &[Run]| median(v.iter().map(|r| r.cpu).collect());
    let wall = |v: &[Run]| median(v.iter().map(|r| r.wall).collect());
    let (batches, n) = (n as f64 / BATCH, n as f64);
    println!(
        "  transactions cost per delivered record: {:+.2} µs of CPU, {:+.2} µs of wall ({:.2}x the baseline's CPU, \
         {:.2}x its wall); per batch: {:+.2} ms of CPU, {:+.2} ms of wall",
        (cpu(&on) - cpu(&off)) / n * 1e6,
        (wall(&on) - wall(&off)) / n * 1e6,
        cpu(&on) / cpu(&off),
        wall(&on) / wall(&off),
        (cpu(&on) - cpu(&off)) / batches * 1e3,
        (wall(&on) - wall(&off)) / batches * 1e3,
    );
    println!("  (wall includes the group join, about 3 s with session.timeout.ms 6000)");
}
