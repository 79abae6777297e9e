//! The dedup changelog's cost and its restore rate (issue 13), on a real
//! broker (tansu, SQLite storage, started here):
//!
//! 1. the Kafka pipeline over N records on 4 partitions twice in the same
//!    run, with `dedup.changelog.enabled = false` (the baseline) and with
//!    it: records/s per core, wall, peak RSS, p50/p99 latency, and the
//!    changelog's cost per delivered record (the CPU and wall difference);
//! 2. a new instance's restore of those N ids from the changelog into an
//!    empty store: ids/s, and the changelog's bytes per id.
//!
//! `cargo bench -p sluice-benches --bench dedup_changelog`
//! (`SLUICE_BENCH_RECORDS`, default 200,000; needs tansu, scripts/setup).

use std::time::{Duration, Instant};

use sluice::pipeline;
use sluice::pipeline::kafka::changelog::Changelog;
use sluice::pipeline::kafka::changelog::restore::Restored;
use sluice::plugin::engine::Runtime;
use sluice::source::config::SourceConfig;
use sluice::store::Store;
use sluice::store::dedup::DedupWindow;
use sluice_benches::kafka::Run;
use sluice_benches::{cpu_seconds, peak_rss_mib, reset_peak_rss};
use sluice_e2e::kafka::{Broker, Storage, high_watermarks};

const PARTITIONS: i32 = 4;

fn main() {
    let n = sluice_benches::env_count("SLUICE_BENCH_RECORDS", 200_000);
    let broker = Broker::start(Storage::Sqlite);
    let brokers = broker.brokers();
    let runtime = Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
    let topic = "bench-changelog";
    sluice_benches::kafka::fill(&brokers, topic, n, PARTITIONS);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));

    println!(
        "dedup_changelog: {n} records on {PARTITIONS} partitions, kafka (tansu, SQLite) → json → ts-window → dedup → file"
    );
    println!("{}", sluice_benches::kafka::head("changelog"));
    let config = |group: &str, on: bool| {
        sluice_benches::kafka::config(dir.path(), &brokers, topic, group, &format!("changelog.enabled = {on}"))
    };
    let (off_cfg, on_cfg) = (config("bench-off", false), config("bench-on", true));
    let off = Run::measure(&off_cfg, &runtime, &brokers, topic, PARTITIONS, n);
    let on = Run::measure(&on_cfg, &runtime, &brokers, topic, PARTITIONS, n);
    for (name, r) in [("off (baseline)", &off), ("on", &on)] {
        println!("{}", r.row(name, n));
    }
    println!(
        "  changelog cost per delivered record: {:+.2} µs of CPU, {:+.2} µs of wall ({:.2}x the baseline's CPU)",
        (on.cpu - off.cpu) / n as f64 * 1e6,
        (on.wall - off.wall) / n as f64 * 1e6,
        on.cpu / off.cpu
    );
    println!("  (wall includes the group join, about 3 s with session.timeout.ms 6000)");

    // 2. A new instance restores the ids `on` wrote.
    let SourceConfig::Kafka(k) = &on_cfg.source else { panic!("kafka") };
    let changelog_topic = on_cfg.changelog_topic().unwrap_or_default();
    let messages: i64 = high_watermarks(&brokers, &changelog_topic, PARTITIONS).iter().sum();
    let store_dir = dir.path().join("restored");
    let store = Store::open(&store_dir, &pipeline::setup::identity(&on_cfg)).unwrap_or_else(|e| panic!("{e}"));
    let window = DedupWindow::new(&store, Duration::from_secs(3600)).unwrap_or_else(|e| panic!("{e}"));
    let changelog = Changelog::open(&on_cfg, k, &store, &window, &pipeline::stop::Stop::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("the changelog is on"));
    reset_peak_rss();
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    for p in 0..PARTITIONS {
        let restored = changelog
            .restore(&format!("{topic}/{p}"), p, &|| false, None::<&rdkafka::consumer::BaseConsumer>)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(restored, Restored::Done);
    }
    let (cpu, wall) = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());
    // Every id is in the new store, under its partition's scope.
    let digests: Vec<_> = (0..n)
        .map(|i| {
            let p = i % PARTITIONS as usize;
            sluice::custody::ids::digest(&sluice::custody::ids::scope(&format!("{topic}/{p}")), &format!("ev-{i:08}"))
        })
        .collect();
    let seen = window.seen(&digests, sluice_benches::now_secs() as u64).unwrap_or_else(|e| panic!("{e}"));
    assert!(seen.iter().all(|s| *s), "{} of {n} ids restored", seen.iter().filter(|s| **s).count());
    println!(
        "  restore into an empty store: {n} ids from {messages} messages in {wall:.2} s: {:.0} ids/s wall, {:.0} ids/s \
         per core, peak RSS {:.0} MiB; 24 bytes per id in the changelog, plus a 9-byte head per batch",
        n as f64 / wall,
        n as f64 / cpu,
        peak_rss_mib(),
    );
}
