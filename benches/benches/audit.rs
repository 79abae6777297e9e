//! What the delivery audit costs: the embedded pipeline (one file of
//! generated ~300-byte JSON lines, 10% repeated ids → json → ts-window →
//! the dedup window → the file sink) run with `dedup.audit = false` (the
//! baseline: ids with empty values) and `true` (each id with its 29-byte
//! trail, each absorbed duplicate with one, in the batch's id blob),
//! alternately, `SLUICE_BENCH_PAIRS` times each (default 4), in the same
//! process. Prints records/s per core
//! and wall, the CPU cost per record, and the state store's bytes per id
//! (its files after the run: the WAL and any flushed SSTs), for each run,
//! then the difference of the fastest run of each (this machine's noise
//! only ever adds time) and of the medians.
//!
//! `cargo bench -p sluice-benches --bench audit`
//! (`SLUICE_BENCH_RECORDS`: unique ids, default 300,000).

use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use sluice::config::Config;
use sluice::pipeline;
use sluice::pipeline::stop::Stop;
use sluice::plugin::engine::Runtime;
use sluice_benches::{cpu_seconds, peak_rss_mib, reset_peak_rss};

fn dir_bytes(path: &Path) -> u64 {
    std::fs::read_dir(path)
        .map(|rd| rd.flatten().filter_map(|e| e.metadata().ok()).filter(|m| m.is_file()).map(|m| m.len()).sum())
        .unwrap_or(0)
}

fn config(dir: &Path, audit: bool) -> std::path::PathBuf {
    let path = dir.join("sluice.toml");
    let extra = format!("[dedup]\naudit = {audit}");
    std::fs::write(&path, sluice_benches::file_pipeline_config("bench-audit", "input.log", &extra))
        .unwrap_or_else(|e| panic!("{e}"));
    path
}

struct Measured {
    per_core: f64,
    wall: f64,
    cpu_us_per_record: f64,
    bytes_per_id: f64,
    rss: f64,
}

fn run(runtime: &Runtime, input: &Path, n: usize, audit: bool) -> Measured {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::copy(input, dir.path().join("input.log")).unwrap_or_else(|e| panic!("{e}"));
    let cfg = Config::load(&config(dir.path(), audit)).unwrap_or_else(|e| panic!("{e}"));
    reset_peak_rss();
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let stats = pipeline::run(&cfg, runtime, &Stop::default()).unwrap_or_else(|e| panic!("{e}"));
    let (cpu, wall) = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());
    assert_eq!(stats.total.delivered as usize, n, "every unique id delivered");
    assert_eq!(stats.total.duplicate as usize, n / 10, "the repeated ids are absorbed");
    let records = stats.total.records as f64;
    Measured {
        per_core: records / cpu,
        wall: records / wall,
        cpu_us_per_record: cpu / records * 1e6,
        bytes_per_id: dir_bytes(&cfg.pipeline.state_dir) as f64 / n as f64,
        rss: peak_rss_mib(),
    }
}

fn main() {
    let n = sluice_benches::env_count("SLUICE_BENCH_RECORDS", 300_000);
    let runtime = Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
    let src = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let input = src.path().join("input.log");
    {
        let mut w = BufWriter::new(std::fs::File::create(&input).unwrap_or_else(|e| panic!("{e}")));
        let now = sluice_benches::now_secs();
        for first in (0..n).step_by(10_000) {
            for line in sluice_benches::json_lines_with_repeats(first, 10_000.min(n - first), now) {
                w.write_all(line.as_bytes()).and_then(|_| w.write_all(b"\n")).unwrap_or_else(|e| panic!("{e}"));
            }
        }
        w.flush().unwrap_or_else(|e| panic!("{e}"));
    }
    println!(
        "audit: {} lines ({n} unique ids, 10% repeated), one file, json → ts-window → dedup → file sink",
        n + n / 10
    );
    println!(
        "  {:<14} {:>14} {:>12} {:>14} {:>12} {:>8}",
        "dedup.audit", "/s per core", "wall /s", "CPU µs/record", "store B/id", "RSS MiB"
    );
    let mut runs: Vec<(bool, Measured)> = Vec::new();
    let pairs = sluice_benches::env_count("SLUICE_BENCH_PAIRS", 4);
    for audit in (0..pairs).flat_map(|_| [false, true]) {
        let m = run(&runtime, &input, n, audit);
        println!(
            "  {:<14} {:>14.0} {:>12.0} {:>14.2} {:>12.1} {:>8.0}",
            audit, m.per_core, m.wall, m.cpu_us_per_record, m.bytes_per_id, m.rss
        );
        runs.push((audit, m));
    }
    let pick = |audit: bool, f: fn(&Measured) -> f64| {
        let mut v: Vec<f64> = runs.iter().filter(|(a, _)| *a == audit).map(|(_, m)| f(m)).collect();
        v.sort_by(f64::total_cmp);
        (v[0], v[v.len() / 2])
    };
    let ((off_min, off_med), (on_min, on_med)) =
        (pick(false, |m| m.cpu_us_per_record), pick(true, |m| m.cpu_us_per_record));
    let (bytes_off, bytes_on) = (pick(false, |m| m.bytes_per_id).1, pick(true, |m| m.bytes_per_id).1);
    println!(
        "  CPU per record, fastest runs: {off_min:.2} → {on_min:.2} µs ({:+.2} µs, ratio {:.3}); medians: {off_med:.2} → \
         {on_med:.2} µs ({:+.2} µs, ratio {:.3})",
        on_min - off_min,
        on_min / off_min,
        on_med - off_med,
        on_med / off_med,
    );
    println!(
        "  store per id: {bytes_off:.1} → {bytes_on:.1} bytes ({:+.1}); the trail itself is 29 bytes per id, and \
         each absorbed duplicate's id and trail ride in its batch's blob",
        bytes_on - bytes_off
    );
}
