//! What a partition costs: the same records over 1 to 1,024 partitions,
//! from files and from Kafka (tansu with SQLite storage, started here: its
//! memory storage reports high watermarks below what it holds), through json →
//! ts-window → dedup → the file sink, in this process. For each count,
//! prints records per CPU-second, wall records/s, the CPU per record as a
//! ratio to the same records on 4 partitions in the same run (the baseline:
//! these machines are noisy), the most threads the process had, peak RSS
//! and p50/p99 latency from a record's arrival to its durable commit.
//!
//! `cargo bench -p sluice-benches --bench partitions`
//! (`SLUICE_BENCH_RECORDS`: records per file run, default 400,000;
//! `SLUICE_BENCH_FILES`: file counts, default `1,4,16,64,256,1024`;
//! `SLUICE_BENCH_KAFKA_RECORDS`: records per Kafka run, default 50,000;
//! `SLUICE_BENCH_PARTITIONS`: Kafka partition counts, default
//! `4,64,256,1024`, `0` for none; any pipeline key from the environment,
//! e.g. `SLUICE__PIPELINE__WORKERS=4`).

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sluice::config::Config;
use sluice::pipeline::{self, Stop};
use sluice_benches::{cpu_seconds, peak_rss_mib, reset_peak_rss};
use sluice_e2e::kafka::{Broker, Storage, create_topic, produce};

/// The process's threads now (`/proc/self/status`).
fn threads() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Threads:").and_then(|n| n.trim().parse().ok())))
        .unwrap_or(0)
}

/// Run `f`, sampling the process's threads every 10 ms; the most seen,
/// less the sampler itself.
fn with_thread_peak<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let peak = AtomicUsize::new(0);
    let done = AtomicBool::new(false);
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                peak.fetch_max(threads(), Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        let r = f();
        done.store(true, Ordering::SeqCst);
        r
    });
    (r, peak.load(Ordering::SeqCst).saturating_sub(1))
}

/// `n` unique lines over `files` files, in equal parts.
fn generate(dir: &Path, n: usize, files: usize) -> Vec<PathBuf> {
    let paths: Vec<PathBuf> = (0..files).map(|f| dir.join(format!("input-{f:04}.log"))).collect();
    let now = sluice_benches::now_secs();
    let per = n.div_ceil(files);
    for (f, p) in paths.iter().enumerate() {
        let mut w = BufWriter::new(std::fs::File::create(p).unwrap_or_else(|e| panic!("{e}")));
        let first = f * per;
        for line in sluice_benches::json_lines_with_repeats(first, per.min(n.saturating_sub(first)), now) {
            w.write_all(line.as_bytes()).and_then(|_| w.write_all(b"\n")).unwrap_or_else(|e| panic!("{e}"));
        }
        w.flush().unwrap_or_else(|e| panic!("{e}"));
    }
    paths
}

struct Row {
    partitions: usize,
    records: f64,
    cpu: f64,
    wall: f64,
    threads: usize,
    rss: f64,
    p50: f64,
    p99: f64,
}

fn print_head(source: &str) {
    println!(
        "  {source:<6} {:>10}  {:>12}  {:>10}  {:>13}  {:>7}  {:>7}  {:>7}  {:>7}",
        "partitions", "/s per core", "/s wall", "CPU/rec vs 4", "threads", "RSS MiB", "p50 ms", "p99 ms"
    );
}

fn print_rows(source: &str, rows: &[Row]) {
    let base = rows.iter().find(|r| r.partitions == 4).map(|r| r.cpu / r.records);
    for r in rows {
        let ratio = base.map_or(f64::NAN, |b| (r.cpu / r.records) / b);
        println!(
            "  {source:<6} {:>10}  {:>12.0}  {:>10.0}  {:>12.2}x  {:>7}  {:>7.0}  {:>7.1}  {:>7.1}",
            r.partitions,
            r.records / r.cpu,
            r.records / r.wall,
            ratio,
            r.threads,
            r.rss,
            r.p50,
            r.p99
        );
    }
}

fn files(runtime: &sluice::plugin::Runtime, n: usize, counts: &[usize]) -> Vec<Row> {
    let mut rows = Vec::new();
    for &files in counts {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        generate(dir.path(), n, files);
        let path = dir.path().join("sluice.toml");
        std::fs::write(&path, sluice_benches::file_pipeline_config(&format!("parts-{files}"), "input-*.log", ""))
            .unwrap_or_else(|e| panic!("{e}"));
        let cfg = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
        pipeline::build_chain(runtime, &cfg).unwrap_or_else(|e| panic!("{e}"));
        reset_peak_rss();
        let (cpu0, t0) = (cpu_seconds(), Instant::now());
        let (stats, threads) =
            with_thread_peak(|| pipeline::run(&cfg, runtime, &Stop::default()).map_err(|e| e.to_string()));
        let stats = stats.unwrap_or_else(|e| panic!("{e}"));
        let (cpu, wall) = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());
        assert_eq!(stats.total.records as usize, n + n / 10, "every line read");
        assert_eq!(stats.total.delivered as usize, n, "every unique id delivered");
        rows.push(Row {
            partitions: files,
            records: stats.total.records as f64,
            cpu,
            wall,
            threads,
            rss: peak_rss_mib(),
            p50: stats.latency.quantile(0.5) * 1e3,
            p99: stats.latency.quantile(0.99) * 1e3,
        });
        eprintln!("files: {files} done");
    }
    rows
}

fn kafka(runtime: &sluice::plugin::Runtime, n: usize, counts: &[usize]) -> Vec<Row> {
    let broker = Broker::start(Storage::Sqlite);
    let brokers = broker.brokers();
    let mut rows = Vec::new();
    for &partitions in counts {
        let p = partitions as i32;
        let topic = format!("parts-{partitions}");
        create_topic(&brokers, &topic, p);
        produce(&brokers, &topic, &sluice_benches::kafka::records(n, p));
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let cfg = sluice_benches::kafka::config(dir.path(), &brokers, &topic, &format!("parts-{partitions}"), "");
        let (m, threads) =
            with_thread_peak(|| sluice_benches::kafka::run_until_committed(&cfg, runtime, &brokers, &topic, p));
        assert_eq!(m.stats.total.delivered as usize, n, "every record delivered");
        rows.push(Row {
            partitions,
            records: n as f64,
            cpu: m.cpu,
            wall: m.wall,
            threads,
            rss: peak_rss_mib(),
            p50: m.stats.latency.quantile(0.5) * 1e3,
            p99: m.stats.latency.quantile(0.99) * 1e3,
        });
        eprintln!("kafka: {partitions} done");
    }
    rows
}

fn main() {
    let n = sluice_benches::env_count("SLUICE_BENCH_RECORDS", 400_000);
    let file_counts = sluice_benches::env_counts("SLUICE_BENCH_FILES", "1,4,16,64,256,1024");
    let kafka_n = sluice_benches::env_count("SLUICE_BENCH_KAFKA_RECORDS", 50_000);
    let kafka_counts: Vec<usize> =
        sluice_benches::env_counts("SLUICE_BENCH_PARTITIONS", "4,64,256,1024").into_iter().filter(|c| *c > 0).collect();
    let runtime = sluice_benches::runtime();
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    println!(
        "partitions: json → ts-window → dedup → file sink; files {} lines per run, kafka {kafka_n} records per run; {cores} cores (threads aim: at most {})",
        n + n / 10,
        2 * cores + 16
    );
    print_head("source");
    let rows = files(&runtime, n, &file_counts);
    print_rows("files", &rows);
    if !kafka_counts.is_empty() {
        let rows = kafka(&runtime, kafka_n, &kafka_counts);
        print_rows("kafka", &rows);
        println!("  (Kafka's wall includes the group join, about 3 s with session.timeout.ms 6000)");
    }
}
