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
//! `SLUICE_BENCH_FILES`: file counts, default `1,4,16,64,256,1024`, `0`
//! for none;
//! `SLUICE_BENCH_KAFKA_RECORDS`: records per Kafka run (and four times
//! as many in its second run), default 25,000;
//! `SLUICE_BENCH_PARTITIONS`: Kafka partition counts, default
//! `4,64,256,1024`, `0` for none; any pipeline key from the environment,
//! e.g. `SLUICE__PIPELINE__WORKERS=4`, or
//! `SLUICE__DEDUP__CHANGELOG__ENABLED=false` for Kafka without the work
//! files never do).
//!
//! The Kafka rows run first, so that their peak RSS (an aim) does not
//! count what the many-file runs left in the heap.

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sluice::config::Config;
use sluice::pipeline;
use sluice::pipeline::stop::Stop;
use sluice_benches::{cpu_seconds, peak_rss_mib, reset_peak_rss};
use sluice_e2e::kafka::{Broker, Storage, create_topic, produce};

/// The process's threads now (`/proc/self/status`).
fn threads() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Threads:").and_then(|n| n.trim().parse().ok())))
        .unwrap_or(0)
}

/// The names of the process's threads now, by count (`/proc/self/task`).
fn thread_names() -> BTreeMap<String, usize> {
    let mut names = BTreeMap::new();
    for task in std::fs::read_dir("/proc/self/task").into_iter().flatten().flatten() {
        if let Ok(comm) = std::fs::read_to_string(task.path().join("comm")) {
            // librdkafka numbers its broker threads: one name per kind.
            let kind = comm.trim().trim_end_matches(|c: char| c.is_ascii_digit() || c == '-').to_string();
            *names.entry(kind).or_default() += 1;
        }
    }
    names
}

/// The threads a run added to the process at its peak.
struct Threads {
    peak: usize,
    /// By name, at the peak: `rdk:broker ×6, sluice-worker ×2`.
    names: String,
}

/// Run `f`, sampling the process's threads every 10 ms: the most seen
/// beyond those before `f` (the bench's own clients) and the sampler.
fn with_thread_peak<R>(f: impl FnOnce() -> R) -> (R, Threads) {
    let before = threads();
    let baseline = thread_names();
    let peak = Mutex::new((0usize, BTreeMap::new()));
    let done = AtomicBool::new(false);
    let r = std::thread::scope(|s| {
        let sampler = std::thread::Builder::new().name("bench-sampler".into()).spawn_scoped(s, || {
            while !done.load(Ordering::SeqCst) {
                let now = threads();
                let mut p = peak.lock().unwrap_or_else(|p| p.into_inner());
                if now > p.0 {
                    *p = (now, thread_names());
                }
                drop(p);
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        sampler.unwrap_or_else(|e| panic!("{e}"));
        let r = f();
        done.store(true, Ordering::SeqCst);
        r
    });
    let (count, mut names) = peak.into_inner().unwrap_or_else(|p| p.into_inner());
    for (name, n) in &baseline {
        if let Some(m) = names.get_mut(name) {
            *m = m.saturating_sub(*n);
        }
    }
    names.remove("bench-sampler");
    let names = names.iter().filter(|(_, n)| **n > 0).map(|(k, n)| format!("{k} x{n}")).collect::<Vec<_>>().join(", ");
    (r, Threads { peak: count.saturating_sub(before + 1), names })
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

fn files(runtime: &sluice::plugin::engine::Runtime, n: usize, counts: &[usize]) -> Vec<Row> {
    let mut rows = Vec::new();
    for &files in counts {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        generate(dir.path(), n, files);
        let path = dir.path().join("sluice.toml");
        std::fs::write(&path, sluice_benches::file_pipeline_config(&format!("parts-{files}"), "input-*.log", ""))
            .unwrap_or_else(|e| panic!("{e}"));
        let cfg = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
        pipeline::setup::build_chain(runtime, &cfg).unwrap_or_else(|e| panic!("{e}"));
        reset_peak_rss();
        let ((stats, cpu, wall), threads) = with_thread_peak(|| {
            let (cpu, t0) = (sluice_benches::RunCpu::start(), Instant::now());
            let stats = pipeline::run(&cfg, runtime, &Stop::default()).map_err(|e| e.to_string());
            (stats, cpu.seconds(), t0.elapsed().as_secs_f64())
        });
        let stats = stats.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(stats.total.records as usize, n + n / 10, "every line read");
        assert_eq!(stats.total.delivered as usize, n, "every unique id delivered");
        rows.push(Row {
            partitions: files,
            records: stats.total.records as f64,
            cpu,
            wall,
            threads: threads.peak,
            rss: peak_rss_mib(),
            p50: stats.latency.quantile(0.5) * 1e3,
            p99: stats.latency.quantile(0.99) * 1e3,
        });
        eprintln!("files: {files} done");
    }
    rows
}

/// One measured Kafka run: this process's CPU and the broker's, wall,
/// the threads sluice added, peak RSS and latency.
struct KafkaRun {
    records: usize,
    cpu: f64,
    broker_cpu: f64,
    wall: f64,
    threads: Threads,
    rss: f64,
    p50: f64,
    p99: f64,
}

/// `records` fresh records over `partitions`, run until committed.
fn kafka_run(
    runtime: &sluice::plugin::engine::Runtime,
    broker: &Broker,
    partitions: usize,
    records: usize,
) -> KafkaRun {
    let brokers = broker.brokers();
    let p = partitions as i32;
    let name = format!("parts-{partitions}-{records}");
    create_topic(&brokers, &name, p);
    produce(&brokers, &name, &sluice_benches::kafka::records(records, p));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cfg = sluice_benches::kafka::config(dir.path(), &brokers, &name, &name, "");
    let broker_cpu = || broker.pid().map_or(0.0, sluice_benches::process_cpu_seconds);
    let broker0 = broker_cpu();
    let watch = sluice_benches::kafka::Watch::new(&cfg, &brokers, &name, p);
    let (m, threads) = with_thread_peak(|| watch.run(&cfg, runtime));
    assert_eq!(m.stats.total.delivered as usize, records, "every record delivered");
    KafkaRun {
        records,
        cpu: m.cpu,
        broker_cpu: broker_cpu() - broker0,
        wall: m.wall,
        threads,
        rss: peak_rss_mib(),
        p50: m.stats.latency.quantile(0.5) * 1e3,
        p99: m.stats.latency.quantile(0.99) * 1e3,
    }
}

/// A partition count's two runs, of `n` and `4n` records: what the
/// second cost beyond the first is what a record costs, without the
/// start, the group join and the stop, which both paid once.
struct KafkaRow {
    partitions: usize,
    small: KafkaRun,
    big: KafkaRun,
}

impl KafkaRow {
    /// Marginal CPU seconds per record: sluice's, and the broker's.
    fn marginal(&self) -> (f64, f64) {
        let extra = (self.big.records - self.small.records) as f64;
        ((self.big.cpu - self.small.cpu) / extra, (self.big.broker_cpu - self.small.broker_cpu) / extra)
    }
}

fn kafka(runtime: &sluice::plugin::engine::Runtime, broker: &Broker, n: usize, counts: &[usize]) -> Vec<KafkaRow> {
    let mut rows = Vec::new();
    for &partitions in counts {
        let small = kafka_run(runtime, broker, partitions, n);
        let big = kafka_run(runtime, broker, partitions, 4 * n);
        rows.push(KafkaRow { partitions, small, big });
        eprintln!("kafka: {partitions} done");
    }
    rows
}

fn print_kafka(rows: &[KafkaRow]) {
    println!(
        "  {:>10}  {:>11}  {:>9}  {:>11}  {:>11}  {:>10}  {:>8}  {:>7}  {:>7}  {:>7}",
        "partitions",
        "µs/rec marg",
        "vs 4",
        "µs/rec all",
        "broker µs",
        "/s per core",
        "wall s",
        "RSS MiB",
        "p50 ms",
        "p99 ms"
    );
    let base = rows.iter().find(|r| r.partitions == 4).map(|r| r.marginal().0);
    for r in rows {
        let (marginal, broker) = r.marginal();
        let all = r.big.cpu / r.big.records as f64;
        println!(
            "  {:>10}  {:>11.2}  {:>8.2}x  {:>11.2}  {:>11.2}  {:>10.0}  {:>8.1}  {:>7.0}  {:>7.1}  {:>7.1}",
            r.partitions,
            marginal * 1e6,
            base.map_or(f64::NAN, |b| marginal / b),
            all * 1e6,
            broker * 1e6,
            1.0 / marginal,
            r.big.wall,
            r.big.rss,
            r.big.p50,
            r.big.p99
        );
    }
    for r in rows {
        let t = if r.big.threads.peak >= r.small.threads.peak { &r.big.threads } else { &r.small.threads };
        println!("  threads, {} partitions: {} ({})", r.partitions, t.peak, t.names);
    }
}

/// The Kafka records of `kafka_run`, as 4 files of JSON lines, run as
/// Kafka's are (`n` and `4n`): what the same records cost from files.
fn files_of_kafka_records(runtime: &sluice::plugin::engine::Runtime, n: usize) -> f64 {
    let mut cpu = Vec::new();
    for records in [n, 4 * n] {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let parts = 4;
        let mut files: Vec<BufWriter<std::fs::File>> = (0..parts)
            .map(|f| {
                BufWriter::new(
                    std::fs::File::create(dir.path().join(format!("input-{f}.log"))).unwrap_or_else(|e| panic!("{e}")),
                )
            })
            .collect();
        for (partition, _, body) in sluice_benches::kafka::records(records, parts) {
            let w = &mut files[partition as usize];
            w.write_all(body.as_bytes()).and_then(|_| w.write_all(b"\n")).unwrap_or_else(|e| panic!("{e}"));
        }
        for mut w in files {
            w.flush().unwrap_or_else(|e| panic!("{e}"));
        }
        let path = dir.path().join("sluice.toml");
        let toml = sluice_benches::file_pipeline_config(&format!("same-{records}"), "input-*.log", "")
            .replace("max_age = \"2h\"", "max_age = \"1d\"");
        std::fs::write(&path, toml).unwrap_or_else(|e| panic!("{e}"));
        let cfg = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
        pipeline::setup::build_chain(runtime, &cfg).unwrap_or_else(|e| panic!("{e}"));
        let cpu0 = cpu_seconds();
        let stats = pipeline::run(&cfg, runtime, &Stop::default()).unwrap_or_else(|e| panic!("{e}"));
        cpu.push(cpu_seconds() - cpu0);
        assert_eq!(stats.total.delivered as usize, records, "every record delivered");
    }
    (cpu[1] - cpu[0]) / (3 * n) as f64
}

fn main() {
    let n = sluice_benches::env_count("SLUICE_BENCH_RECORDS", 400_000);
    let file_counts: Vec<usize> =
        sluice_benches::env_counts("SLUICE_BENCH_FILES", "1,4,16,64,256,1024").into_iter().filter(|c| *c > 0).collect();
    let kafka_n = sluice_benches::env_count("SLUICE_BENCH_KAFKA_RECORDS", 25_000);
    let kafka_counts: Vec<usize> =
        sluice_benches::env_counts("SLUICE_BENCH_PARTITIONS", "4,64,256,1024").into_iter().filter(|c| *c > 0).collect();
    sluice_benches::log_from_env();
    let runtime = sluice_benches::runtime();
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    println!(
        "partitions: json → ts-window → dedup → file sink; files {} lines per run, kafka {kafka_n} and {} records per count; {cores} cores (threads aim: at most {})",
        n + n / 10,
        4 * kafka_n,
        2 * cores + 16
    );
    if !kafka_counts.is_empty() {
        let broker = Broker::start(Storage::Sqlite);
        println!(
            "kafka (tansu, SQLite storage): µs/rec marg is sluice's CPU per record of the {}-record run beyond the {kafka_n}-record one; broker µs the same for tansu's CPU",
            4 * kafka_n
        );
        let rows = kafka(&runtime, &broker, kafka_n, &kafka_counts);
        print_kafka(&rows);
        if let Some(k) = rows.iter().find(|r| r.partitions == 4) {
            let files = files_of_kafka_records(&runtime, kafka_n);
            let kafka = k.marginal().0;
            println!(
                "  the same records from 4 files: {:.2} µs/rec marg ({:.0}/s per core); Kafka costs {:.2}x files per record",
                files * 1e6,
                1.0 / files,
                kafka / files
            );
        }
    }
    // After Kafka: what the runs of many files leave in the heap (glibc
    // keeps freed arenas) would otherwise count in the Kafka runs' peak RSS,
    // the figure with an aim (160 MiB at 1,024 partitions): 190 MiB
    // measured after them against 130–144 MiB alone. The file rows' RSS
    // then counts what the Kafka runs left (`SLUICE_BENCH_PARTITIONS=0`
    // for theirs alone).
    if !file_counts.is_empty() {
        print_head("source");
        let rows = files(&runtime, n, &file_counts);
        print_rows("files", &rows);
    }
}
