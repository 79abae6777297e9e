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

use sluice::config::{Config, SourceConfig};
use sluice::pipeline::kafka::changelog::Changelog;
use sluice::pipeline::kafka::changelog::restore::Restored;
use sluice::pipeline::{self, Stop};
use sluice::plugin::Runtime;
use sluice::store::Store;
use sluice::store::dedup::DedupWindow;
use sluice_benches::{cpu_seconds, peak_rss_mib, reset_peak_rss};
use sluice_e2e::kafka::{Broker, Storage, committed, create_topic, high_watermarks, produce};

const PARTITIONS: i32 = 4;

struct Run {
    cpu: f64,
    wall: f64,
    rss: f64,
    p50: f64,
    p99: f64,
}

fn config(dir: &std::path::Path, brokers: &str, topic: &str, group: &str, changelog: bool) -> Config {
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
changelog.enabled = {changelog}

[sink]
type = "file"
path = "out-{group}.ndjson"
"#,
            plugins = sluice_e2e::json_chain_toml(false, Some("1d")),
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut cfg = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    cfg.pipeline.state_dir = dir.join(&cfg.pipeline.state_dir);
    if let sluice::config::SinkConfig::File { path, .. } = &mut cfg.sink {
        *path = dir.join(&*path);
    }
    cfg
}

fn run(cfg: &Config, runtime: &Runtime, brokers: &str, topic: &str, n: usize) -> Run {
    pipeline::build_chain(runtime, cfg).unwrap_or_else(|e| panic!("{e}"));
    let SourceConfig::Kafka(k) = &cfg.source else { panic!("kafka") };
    let high: Vec<Option<i64>> = high_watermarks(brokers, topic, PARTITIONS).into_iter().map(Some).collect();
    let stop = Stop::default();
    reset_peak_rss();
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let stats = std::thread::scope(|s| {
        let run = s.spawn(|| pipeline::run(cfg, runtime, &stop).map_err(|e| e.to_string()));
        while committed(brokers, &k.group_id, topic, PARTITIONS) != high {
            assert!(!run.is_finished(), "sluice ended early: {:?}", run.join().ok());
            assert!(t0.elapsed() < Duration::from_secs(900), "sluice did not finish");
            std::thread::sleep(Duration::from_millis(200));
        }
        stop.request();
        run.join().unwrap_or_else(|_| panic!("panicked")).unwrap_or_else(|e| panic!("{e}"))
    });
    assert_eq!(stats.total.delivered as usize, n, "every record delivered");
    Run {
        cpu: cpu_seconds() - cpu0,
        wall: t0.elapsed().as_secs_f64(),
        rss: peak_rss_mib(),
        p50: stats.latency.quantile(0.5) * 1e3,
        p99: stats.latency.quantile(0.99) * 1e3,
    }
}

fn main() {
    let n = sluice_benches::env_count("SLUICE_BENCH_RECORDS", 200_000);
    let broker = Broker::start(Storage::Sqlite);
    let brokers = broker.brokers();
    let runtime = Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
    let topic = "bench-changelog";
    create_topic(&brokers, topic, PARTITIONS);
    let ts = sluice_guest::time::format_rfc3339(sluice_benches::now_secs() * 1_000_000_000);
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
    produce(&brokers, topic, &records);
    drop(records);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));

    println!(
        "dedup_changelog: {n} records on {PARTITIONS} partitions, kafka (tansu, SQLite) → json → ts-window → dedup → file"
    );
    println!(
        "  {:<16}  {:>14}  {:>10}  {:>8}  {:>7}  {:>7}",
        "changelog", "/s per core", "/s wall", "RSS MiB", "p50 ms", "p99 ms"
    );
    let off_cfg = config(dir.path(), &brokers, topic, "bench-off", false);
    let on_cfg = config(dir.path(), &brokers, topic, "bench-on", true);
    let off = run(&off_cfg, &runtime, &brokers, topic, n);
    let on = run(&on_cfg, &runtime, &brokers, topic, n);
    for (name, r) in [("off (baseline)", &off), ("on", &on)] {
        println!(
            "  {name:<16}  {:>14.0}  {:>10.0}  {:>8.0}  {:>7.1}  {:>7.1}",
            n as f64 / r.cpu,
            n as f64 / r.wall,
            r.rss,
            r.p50,
            r.p99
        );
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
    let changelog_topic = on_cfg.dedup.changelog_topic(&on_cfg.source).unwrap_or_default();
    let messages: i64 = high_watermarks(&brokers, &changelog_topic, PARTITIONS).iter().sum();
    let store_dir = dir.path().join("restored");
    let store = Store::open(&store_dir, &pipeline::identity(&on_cfg)).unwrap_or_else(|e| panic!("{e}"));
    let window = DedupWindow::new(&store, Duration::from_secs(3600)).unwrap_or_else(|e| panic!("{e}"));
    let changelog = Changelog::open(&on_cfg, k, &store, &window, &sluice::pipeline::Stop::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("the changelog is on"));
    reset_peak_rss();
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    for p in 0..PARTITIONS {
        let restored = changelog.restore(&format!("{topic}/{p}"), p, &|| false).unwrap_or_else(|e| panic!("{e}"));
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
