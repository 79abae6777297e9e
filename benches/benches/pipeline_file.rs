//! The embedded pipeline end to end: a file of 1,000,000 generated JSON
//! lines of about 300 bytes (10% of them repeat an earlier event_id) →
//! json → ts-window → the dedup window → the file sink, in this process.
//! Prints records/s per core (records over the CPU time the run used) and
//! peak RSS, beside a baseline measured in the same run: the same file
//! read, parsed and written back as NDJSON with a sync per 1,000 lines.
//!
//! `cargo bench -p sluice-benches --bench pipeline_file`
//! (`SLUICE_BENCH_RECORDS` to change the count).

use std::io::{BufRead, BufWriter, Write};
use std::time::Instant;

use sluice::config::Config;
use sluice::pipeline::{self, Stop};
use sluice::plugin::Runtime;
use sluice_benches::cpu_seconds;

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

fn main() {
    let n: usize = std::env::var("SLUICE_BENCH_RECORDS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let input = dir.path().join("input.log");
    {
        let mut w = BufWriter::new(std::fs::File::create(&input).unwrap_or_else(|e| panic!("{e}")));
        let now = sluice_benches::now_secs();
        for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
            for line in sluice_benches::json_lines_with_repeats(chunk[0], chunk.len(), now) {
                w.write_all(line.as_bytes()).and_then(|_| w.write_all(b"\n")).unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }
    let bytes = std::fs::metadata(&input).map(|m| m.len()).unwrap_or(0);

    // Baseline: read, parse, write NDJSON, sync every 1,000 lines.
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    {
        let reader = std::io::BufReader::new(std::fs::File::open(&input).unwrap_or_else(|e| panic!("{e}")));
        let out = std::fs::File::create(dir.path().join("baseline.ndjson")).unwrap_or_else(|e| panic!("{e}"));
        let mut w = BufWriter::new(&out);
        for (i, line) in reader.lines().enumerate() {
            let line = line.unwrap_or_default();
            let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
            serde_json::to_writer(&mut w, &v).unwrap_or_else(|e| panic!("{e}"));
            w.write_all(b"\n").unwrap_or_else(|e| panic!("{e}"));
            if i % 1000 == 999 {
                w.flush().and_then(|_| out.sync_data()).unwrap_or_else(|e| panic!("{e}"));
            }
        }
        w.flush().and_then(|_| out.sync_data()).unwrap_or_else(|e| panic!("{e}"));
    }
    let (base_cpu, base_wall) = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());

    let config = dir.path().join("sluice.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[pipeline]
name = "bench"
state_dir = "state"
batch_size = 1000
[source]
type = "file"
paths = ["input.log"]
[[plugins]]
name = "json"
path = "{}"
config = {{ id_field = "event_id", timestamp_field = "ts" }}
[[plugins]]
name = "ts-window"
path = "{}"
config = {{ max_age = "2h", max_future = "1m" }}
[sink]
type = "file"
path = "out/events.ndjson"
"#,
            sluice_e2e::plugin("json").display(),
            sluice_e2e::plugin("ts-window").display()
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let cfg = Config::load(&config).unwrap_or_else(|e| panic!("{e}"));
    let runtime = Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let stats = pipeline::run(&cfg, &runtime, &Stop::default()).unwrap_or_else(|e| panic!("{e}"));
    let (cpu, wall) = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());
    assert_eq!(stats.total.records as usize, n + n / 10, "every line read");
    assert_eq!(stats.total.duplicate as usize, n / 10, "the repeated ids are absorbed");

    let records = stats.total.records as f64;
    println!(
        "pipeline_file: {} lines ({:.0} MiB, {} unique ids), file → json → ts-window → dedup → file sink",
        stats.total.records,
        bytes as f64 / 1048576.0,
        n
    );
    println!(
        "  baseline read+parse+write+sync  {:>9.0} records/s per core  ({:>9.0}/s wall)",
        records / base_cpu,
        records / base_wall
    );
    println!(
        "  sluice pipeline                 {:>9.0} records/s per core  ({:>9.0}/s wall)",
        records / cpu,
        records / wall
    );
    println!("  ratio pipeline/baseline (CPU)   {:>9.2}x", cpu / base_cpu);
    println!(
        "  plugins {:.1} s, sink {:.1} s of {:.1} s wall",
        stats.total.plugin_seconds, stats.total.sink_seconds, wall
    );
    println!("  peak RSS                        {:>9.0} MiB", peak_rss_mib());
}
