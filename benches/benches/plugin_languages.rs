//! The same plugin (examples/plugins/logfmt) written in Rust, Python and
//! JavaScript, run through the host on the same input in one run:
//! per-record cost, records per second per core, and component size. The
//! baseline is the Rust parser called natively.
//!
//! `cargo bench -p sluice-benches --bench plugin_languages`
//! (`SLUICE_BENCH_RECORDS`, default 20,000; needs the tool chains of
//! scripts/setup: componentize-py and componentize-js under $SLUICE_TOOLS,
//! default ~/.cargo).

use std::time::{Duration, Instant};

use sluice::plugin::{Isolated, Outcome, PluginSpec, Record, Runtime};
use sluice_benches::cpu_seconds;

fn lines(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            format!(
                "ts=2026-11-29T21:{:02}:{:02}Z level=info service=checkout req=r-{i} user={} msg=\"order {} placed by user\" latency_ms={}",
                (i / 60) % 60,
                i % 60,
                i % 9973,
                i,
                i % 500
            )
            .into_bytes()
        })
        .collect()
}

/// Best of three rounds over `records` in batches of 1,000: (wall, CPU).
fn measure(stage: &mut Isolated, records: &[Record]) -> (Duration, f64) {
    let mut best = (Duration::MAX, f64::MAX);
    for _ in 0..3 {
        let (t0, c0) = (Instant::now(), cpu_seconds());
        for batch in records.chunks(1000) {
            let out = stage.process(batch).unwrap_or_else(|e| panic!("{e}"));
            assert!(out.iter().all(|o| matches!(o, Outcome::Emit(e) if e.len() == 1)), "every line is one event");
        }
        let (wall, cpu) = (t0.elapsed(), cpu_seconds() - c0);
        if wall < best.0 {
            best = (wall, cpu);
        }
    }
    best
}

fn main() {
    let n: usize = std::env::var("SLUICE_BENCH_RECORDS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let tools = std::env::var_os("SLUICE_TOOLS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(&std::env::var_os("HOME").unwrap_or_default()).join(".cargo"));
    // SAFETY: set before any other thread exists.
    unsafe {
        if std::env::var_os("SLUICE_COMPONENTIZE_PY").is_none() {
            std::env::set_var("SLUICE_COMPONENTIZE_PY", tools.join("py/bin/componentize-py"));
        }
        if std::env::var_os("SLUICE_COMPONENTIZE_JS").is_none() {
            std::env::set_var(
                "SLUICE_COMPONENTIZE_JS",
                tools.join("js/node_modules/@bytecodealliance/componentize-js"),
            );
        }
    }
    let root = sluice_e2e::workspace_root();
    let dir = root.join("examples/plugins/logfmt");
    let out = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let rust = sluice_e2e::build_wasm(&["sluice-example-logfmt"]).join("sluice_example_logfmt.wasm");
    let py = out.path().join("logfmt-py.wasm");
    sluice_e2e::languages::build_python(&[&dir.join("python")], "logfmt", &py);
    let js = out.path().join("logfmt-js.wasm");
    sluice_e2e::languages::build_js(&dir.join("js/logfmt.js"), &js);

    let input = lines(n);
    let records: Vec<Record> =
        input.iter().enumerate().map(|(i, l)| Record::line(l.clone(), "bench.log", 0, i as u64)).collect();

    // Baseline: the Rust parser, natively.
    let mut native = Duration::MAX;
    for _ in 0..3 {
        let t0 = Instant::now();
        let mut fields = 0;
        for l in &input {
            let obj = sluice_example_logfmt::parse(&String::from_utf8_lossy(l));
            fields += obj.len();
            std::hint::black_box(serde_json::to_vec(&obj).unwrap_or_default());
        }
        assert_eq!(fields, n * 7);
        native = native.min(t0.elapsed());
    }
    let per = |d: Duration| d.as_nanos() as f64 / n as f64;
    println!("logfmt, {n} lines of ~130 bytes, batches of 1,000, best of 3 rounds");
    println!("| plugin | component | ns/record | records/s per core | × native Rust |");
    println!("|---|---|---|---|---|");
    println!("| Rust, native (baseline) | – | {:.0} | {:.0} | 1.00× |", per(native), n as f64 / native.as_secs_f64());
    let runtime = Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
    for (name, wasm) in [("Rust", &rust), ("Python", &py), ("JavaScript", &js)] {
        let size = std::fs::metadata(wasm).map(|m| m.len()).unwrap_or(0);
        let mut spec = PluginSpec::from_path(wasm);
        spec.config = serde_json::json!({ "id_field": "req" });
        let t0 = Instant::now();
        let mut stage = runtime.load(&spec).and_then(Isolated::new).unwrap_or_else(|e| panic!("{name}: {e}"));
        let load = t0.elapsed();
        let (wall, cpu) = measure(&mut stage, &records);
        println!(
            "| {name} (wasm) | {:.1} MiB, loaded in {:.1} s | {:.0} | {:.0} | {:.1}× |",
            size as f64 / (1 << 20) as f64,
            load.as_secs_f64(),
            per(wall),
            n as f64 / cpu,
            wall.as_secs_f64() / native.as_secs_f64()
        );
    }
}
