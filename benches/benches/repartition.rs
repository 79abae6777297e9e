//! What `dedup.repartition` costs (issue 23): the Kafka pipeline over N
//! records on 4 partitions under the three dedup scopes, alternating (two
//! runs of each) in one run on one broker (tansu, SQLite storage): the
//! partition scope (the baseline), the topic scope followed through the
//! changelog, and the topic scope repartitioned through `<group>-by-id`
//! (a produce, a consume and a second dedup decision per record). Each run
//! is its own group, so each reads the whole topic; a repartitioned run is
//! through when its back's group has committed the internal topic too.
//!
//! Reported per run: records/s per core and wall, peak RSS, p50/p99
//! latency to commit (repartitioned: the front's and the back's latencies
//! together, each to its own commit); then each scope's cost per record
//! against the baseline, from the medians.
//!
//! `cargo bench -p sluice-benches --bench repartition`
//! (`SLUICE_BENCH_RECORDS`, default 100,000; `SLUICE_BENCH_SCOPE=byid` runs
//! that scope alone, to profile it; needs tansu, scripts/setup).

use sluice::plugin::engine::Runtime;
use sluice_benches::kafka::Run;
use sluice_benches::median;
use sluice_e2e::kafka::{Broker, Storage};

const PARTITIONS: i32 = 4;

fn main() {
    let n = sluice_benches::env_count("SLUICE_BENCH_RECORDS", 100_000);
    let broker = Broker::start(Storage::Sqlite);
    let brokers = broker.brokers();
    let runtime = Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
    let topic = "bench-repartition";
    sluice_benches::kafka::fill(&brokers, topic, n, PARTITIONS);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    println!(
        "repartition: {n} records on {PARTITIONS} partitions, kafka (tansu, SQLite) → json → ts-window → dedup \
         (changelog on) → file, under each dedup scope"
    );
    println!("{}", sluice_benches::kafka::head("scope"));
    let scopes = [
        ("partition", "partition (baseline)", ""),
        ("topic", "topic", "scope = \"topic\""),
        ("byid", "topic, by id", "scope = \"topic\"\nrepartition = true"),
    ];
    let only = std::env::var("SLUICE_BENCH_SCOPE").ok();
    let mut runs: Vec<Vec<Run>> = scopes.iter().map(|_| Vec::new()).collect();
    for round in 0..2 {
        for (i, (short, name, extra)) in scopes.iter().enumerate() {
            if only.as_deref().is_some_and(|o| o != *short) {
                continue;
            }
            let group = format!("bench-{round}-{short}");
            let cfg = sluice_benches::kafka::config(dir.path(), &brokers, topic, &group, extra);
            let r = Run::measure(&cfg, &runtime, &brokers, topic, PARTITIONS, n);
            println!("{}", r.row(name, n));
            runs[i].push(r);
        }
    }
    let cpu = |v: &[Run]| median(v.iter().map(|r| r.cpu).collect());
    let wall = |v: &[Run]| median(v.iter().map(|r| r.wall).collect());
    if only.is_some() {
        return;
    }
    let n = n as f64;
    for (i, (_, name, _)) in scopes.iter().enumerate().skip(1) {
        println!(
            "  {name} against the partition scope, per record: {:+.2} µs of CPU, {:+.2} µs of wall ({:.2}x the \
             baseline's CPU, {:.2}x its wall)",
            (cpu(&runs[i]) - cpu(&runs[0])) / n * 1e6,
            (wall(&runs[i]) - wall(&runs[0])) / n * 1e6,
            cpu(&runs[i]) / cpu(&runs[0]),
            wall(&runs[i]) / wall(&runs[0]),
        );
    }
    println!(
        "  (wall includes the group join, about 3 s with session.timeout.ms 6000; repartitioned, two groups join)"
    );
}
