//! The embedded pipeline end to end: generated JSON lines of about 300
//! bytes (10% of them repeat an earlier event_id), split over 1, 4 and 16
//! files → json → ts-window → the dedup window → the file sink, in this
//! process. For each, prints records/s per core (records over the CPU time
//! the run used), wall records/s, peak RSS, and p50/p99 latency from a
//! record's arrival to its durable commit, beside a baseline measured in
//! the same run: the same files read, parsed and written back as NDJSON
//! with a sync per 1,000 lines, on one thread; and the Python loop of
//! `benches/python/json_loop.py` (`json.loads`, `json.dumps`, write, an
//! `fsync` per 1,000 lines) over the same files, in the same run.
//!
//! `cargo bench -p sluice-benches --bench pipeline_file`
//! (`SLUICE_BENCH_RECORDS`: unique ids per run, default 1,000,000;
//! `SLUICE_BENCH_FILES`: the file counts, default `1,4,16`; any pipeline
//! key from the environment, e.g. `SLUICE__PIPELINE__IN_FLIGHT=1`;
//! `SLUICE_BENCH_ONLY=sluice` skips the baselines, for `perf record`;
//! `SLUICE_BENCH_SINKS=2` fans every event out to two file sinks).

use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use sluice::config::Config;
use sluice::pipeline;
use sluice::pipeline::stop::Stop;
use sluice_benches::{cpu_seconds, peak_rss_mib, reset_peak_rss};

/// `n` unique ids (and their repeats) in `files` files of about equal size.
fn generate(dir: &Path, n: usize, files: usize) -> Vec<PathBuf> {
    let paths: Vec<PathBuf> = (0..files).map(|f| dir.join(format!("input-{f:02}.log"))).collect();
    let mut writers: Vec<_> =
        paths.iter().map(|p| BufWriter::new(std::fs::File::create(p).unwrap_or_else(|e| panic!("{e}")))).collect();
    let now = sluice_benches::now_secs();
    for (c, first) in (0..n).step_by(10_000).enumerate() {
        let w = &mut writers[c % files];
        for line in sluice_benches::json_lines_with_repeats(first, 10_000.min(n - first), now) {
            w.write_all(line.as_bytes()).and_then(|_| w.write_all(b"\n")).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    for mut w in writers {
        w.flush().unwrap_or_else(|e| panic!("{e}"));
    }
    paths
}

/// Read, parse, write NDJSON, sync every 1,000 lines: the work any durable
/// JSON pipeline does, with nothing else.
fn baseline(inputs: &[PathBuf], out: &Path) -> (f64, f64) {
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let file = std::fs::File::create(out).unwrap_or_else(|e| panic!("{e}"));
    let mut w = BufWriter::new(&file);
    let mut i = 0u64;
    for input in inputs {
        let reader = std::io::BufReader::new(std::fs::File::open(input).unwrap_or_else(|e| panic!("{e}")));
        for line in reader.lines() {
            let line = line.unwrap_or_default();
            let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
            serde_json::to_writer(&mut w, &v).unwrap_or_else(|e| panic!("{e}"));
            w.write_all(b"\n").unwrap_or_else(|e| panic!("{e}"));
            i += 1;
            if i.is_multiple_of(1000) {
                w.flush().and_then(|_| file.sync_data()).unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }
    w.flush().and_then(|_| file.sync_data()).unwrap_or_else(|e| panic!("{e}"));
    (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64())
}

/// The Python loop (`benches/python/json_loop.py`) over the same files:
/// its CPU seconds and wall seconds, or `None` where there is no python3.
fn python(inputs: &[PathBuf], out: &Path) -> Option<(f64, f64)> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/json_loop.py");
    let t0 = Instant::now();
    let run = std::process::Command::new("python3").arg(script).arg(out).args(inputs).output().ok()?;
    let wall = t0.elapsed().as_secs_f64();
    let text = String::from_utf8_lossy(&run.stdout);
    let cpu: f64 = text.split_whitespace().next()?.parse().ok()?;
    run.status.success().then_some((cpu, wall))
}

fn config(dir: &Path, files: usize) -> PathBuf {
    let path = dir.join("sluice.toml");
    let mut text = sluice_benches::file_pipeline_config(&format!("bench-{files}"), "input-*.log", "");
    // `SLUICE_BENCH_SINKS=2`: every event to two file sinks (a fan-out,
    // each sink with its own ids), to price the topology.
    if std::env::var("SLUICE_BENCH_SINKS").is_ok_and(|v| v == "2") {
        let one = "[sink]\ntype = \"file\"\npath = \"out/events.ndjson\"\n";
        let two = "[[sinks]]\nname = \"a\"\ntype = \"file\"\npath = \"out/events.ndjson\"\n\
                   [[sinks]]\nname = \"b\"\ntype = \"file\"\npath = \"out/archive.ndjson\"\n";
        assert!(text.contains(one), "the bench config has one [sink]");
        text = text.replace(one, two);
    }
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    path
}

fn main() {
    let n = sluice_benches::env_count("SLUICE_BENCH_RECORDS", 1_000_000);
    let counts = sluice_benches::env_counts("SLUICE_BENCH_FILES", "1,4,16");
    // `SLUICE_BENCH_ONLY=sluice`: no baselines, for `perf record`.
    let sluice_only = std::env::var("SLUICE_BENCH_ONLY").is_ok_and(|v| v == "sluice");
    let runtime = sluice_benches::runtime();
    println!(
        "pipeline_file: {} lines per run ({n} unique ids, 10% repeated), json → ts-window → dedup → file sink; allocator {}",
        n + n / 10,
        sluice_benches::ALLOCATOR_NAME
    );
    println!(
        "  {:>5}  {:>22}  {:>22}  {:>22}  {:>7}  {:>8}  {:>8}  {:>9}  {:>9}",
        "files",
        "baseline /s per core (wall)",
        "python /s per core (wall)",
        "sluice /s per core (wall)",
        "ratio",
        "×python",
        "RSS MiB",
        "p50 ms",
        "p99 ms"
    );
    for files in counts {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let inputs = generate(dir.path(), n, files);
        let (base_cpu, base_wall, py_cpu, py_wall) = if sluice_only {
            (f64::NAN, f64::NAN, f64::NAN, f64::NAN)
        } else {
            let (base_cpu, base_wall) = baseline(&inputs, &dir.path().join("baseline.ndjson"));
            let (py_cpu, py_wall) = python(&inputs, &dir.path().join("python.ndjson")).unwrap_or((f64::NAN, f64::NAN));
            (base_cpu, base_wall, py_cpu, py_wall)
        };
        let cfg = Config::load(&config(dir.path(), files)).unwrap_or_else(|e| panic!("{e}"));
        reset_peak_rss();
        let (cpu0, t0) = (cpu_seconds(), Instant::now());
        let stats = pipeline::run(&cfg, &runtime, &Stop::default()).unwrap_or_else(|e| panic!("{e}"));
        let (cpu, wall) = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());
        assert_eq!(stats.total.records as usize, n + n / 10, "every line read");
        assert_eq!(stats.total.duplicate as usize, n / 10, "the repeated ids are absorbed");
        assert_eq!(stats.total.delivered as usize, n, "every unique id delivered");
        let records = stats.total.records as f64;
        // ratio: sluice's CPU over the Rust baseline's (lower is better);
        // ×python: sluice's records per CPU-second over Python's (higher).
        println!(
            "  {files:>5}  {:>12.0} ({:>8.0})  {:>12.0} ({:>8.0})  {:>12.0} ({:>8.0})  {:>6.2}x  {:>7.2}x  {:>8.0}  {:>9.1}  {:>9.1}",
            records / base_cpu,
            records / base_wall,
            records / py_cpu,
            records / py_wall,
            records / cpu,
            records / wall,
            cpu / base_cpu,
            py_cpu / cpu,
            peak_rss_mib(),
            stats.latency.quantile(0.5) * 1e3,
            stats.latency.quantile(0.99) * 1e3,
        );
        println!(
            "         plugins {:.1} s, sink {:.1} s (thread time, all partitions) of {:.1} s wall, in_flight {}",
            stats.total.plugin_seconds, stats.total.sink_seconds, wall, cfg.pipeline.in_flight
        );
    }
}
