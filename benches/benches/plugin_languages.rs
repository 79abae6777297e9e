//! The same plugin (examples/plugins/logfmt) written in Rust, Python,
//! JavaScript and C, and in Python and JavaScript again on the host's
//! native helpers, run through the host on the same input in one run:
//! per-record cost, records per second per core, and component size. The
//! baseline is the Rust parser called natively. Then where the time of
//! Python and JavaScript goes: a plugin that does nothing (benches/plugins)
//! measures the SDK and the boundary per record, and per call at batches
//! of one; the parser is the rest.
//!
//! `cargo bench -p sluice-benches --bench plugin_languages`
//! (`SLUICE_BENCH_RECORDS`, default 20,000; `SLUICE_BENCH_ROUNDS`, default 5, run in turns; needs the tool chains of
//! scripts/setup: componentize-py and componentize-js under $SLUICE_TOOLS,
//! default ~/.cargo).

use std::time::{Duration, Instant};

use sluice::plugin::engine::Runtime;
use sluice::plugin::isolate::Isolated;
use sluice::plugin::spec::PluginSpec;
use sluice::record::{Outcome, Record};
use sluice_benches::cpu_seconds;

/// Best of `rounds` rounds over `records` in batches of `batch`: (wall, CPU).
fn measure(stage: &mut Isolated, records: &[Record], batch: usize, rounds: usize) -> (Duration, f64) {
    let mut best = (Duration::MAX, f64::MAX);
    for _ in 0..rounds {
        let (t0, c0) = (Instant::now(), cpu_seconds());
        for batch in records.chunks(batch) {
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
        if std::env::var_os("SLUICE_WIT_BINDGEN").is_none() {
            std::env::set_var("SLUICE_WIT_BINDGEN", tools.join("bin/wit-bindgen"));
        }
        if std::env::var_os("SLUICE_WASM_TOOLS").is_none() {
            std::env::set_var("SLUICE_WASM_TOOLS", tools.join("bin/wasm-tools"));
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
    let c = out.path().join("logfmt-c.wasm");
    sluice_e2e::languages::build_c(&dir.join("c/logfmt.c"), &c);
    // The same plugin written the idiomatic way on the host's native
    // helpers (`logfmt` of the SDK): one call per record, no loop.
    let py_helpers = out.path().join("logfmt-helpers-py.wasm");
    sluice_e2e::languages::build_python(&[&dir.join("python")], "logfmt_helpers", &py_helpers);
    let js_helpers = out.path().join("logfmt-helpers-js.wasm");
    sluice_e2e::languages::build_js(&dir.join("js/logfmt_helpers.js"), &js_helpers);
    let noop_dir = root.join("benches/plugins");
    let noop_py = out.path().join("noop-py.wasm");
    sluice_e2e::languages::build_python(&[&noop_dir], "noop", &noop_py);
    let noop_js = out.path().join("noop-js.wasm");
    sluice_e2e::languages::build_js(&noop_dir.join("noop.js"), &noop_js);
    // componentize-js's ahead-of-time mode needs weval (`cargo install weval
    // --version 0.5.0 --root $SLUICE_TOOLS/weval`: a long build, so not in
    // scripts/setup); without it the rows say so.
    let weval =
        std::env::var_os("SLUICE_WEVAL").map(std::path::PathBuf::from).unwrap_or_else(|| tools.join("weval/bin/weval"));
    let aot = weval.is_file().then(|| {
        let (js, noop) = (out.path().join("logfmt-js-aot.wasm"), out.path().join("noop-js-aot.wasm"));
        sluice_e2e::languages::build_js_aot(&dir.join("js/logfmt.js"), &js, &weval);
        sluice_e2e::languages::build_js_aot(&noop_dir.join("noop.js"), &noop, &weval);
        (js, noop)
    });
    if aot.is_none() {
        println!("JavaScript ahead of time: not measured, no weval at {} (SLUICE_WEVAL)", weval.display());
    }

    let input = sluice_benches::logfmt_lines(n);
    let records: Vec<Record> =
        input.iter().enumerate().map(|(i, l)| Record::line(l.clone(), "bench.log", 0, i as u64)).collect();

    // Baseline: the Rust parser, natively.
    let native_pass = || {
        let t0 = Instant::now();
        let mut fields = 0;
        for l in &input {
            let obj = sluice_example_logfmt::parse(&String::from_utf8_lossy(l));
            fields += obj.len();
            std::hint::black_box(serde_json::to_vec(&obj).unwrap_or_default());
        }
        assert_eq!(fields, n * 7);
        t0.elapsed()
    };
    let per = |d: Duration| d.as_nanos() as f64 / n as f64;
    let rounds = sluice_benches::env_count("SLUICE_BENCH_ROUNDS", 5);
    let runtime = Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
    let load = |wasm: &std::path::Path, config: serde_json::Value| {
        let mut spec = PluginSpec::from_path(wasm);
        spec.config = config;
        let t0 = Instant::now();
        let stage = runtime.load(&spec).and_then(Isolated::new).unwrap_or_else(|e| panic!("{}: {e}", wasm.display()));
        (stage, t0.elapsed())
    };
    let mut rust_wall = None;
    let mut logfmt_ns = std::collections::HashMap::new();
    let mut langs = vec![
        ("Rust", rust.clone()),
        ("C", c.clone()),
        ("Python", py.clone()),
        ("Python on the helpers", py_helpers.clone()),
        ("JavaScript", js.clone()),
        ("JavaScript on the helpers", js_helpers.clone()),
    ];
    let mut noops = vec![("Python", noop_py.clone()), ("JavaScript", noop_js.clone())];
    if let Some((js, noop)) = &aot {
        langs.push(("JavaScript, ahead of time", js.clone()));
        noops.push(("JavaScript, ahead of time", noop.clone()));
    }
    let mut stages: Vec<_> = langs
        .iter()
        .map(|(name, wasm)| {
            let size = std::fs::metadata(wasm).map(|m| m.len()).unwrap_or(0);
            let (stage, load) = load(wasm, serde_json::json!({ "id_field": "req" }));
            (*name, size, load, stage, (Duration::MAX, f64::MAX))
        })
        .collect();
    // Rounds in turns, every plugin once per round, best of each: these
    // machines change speed by 2x within minutes, and plugins measured one
    // after the other would put that change into their ratios.
    let mut native = Duration::MAX;
    for _ in 0..rounds {
        native = native.min(native_pass());
        for (_, _, _, stage, best) in &mut stages {
            let m = measure(stage, &records, 1000, 1);
            if m.0 < best.0 {
                *best = m;
            }
        }
    }
    println!("logfmt, {n} lines of ~130 bytes, batches of 1,000, best of {rounds} rounds in turns");
    println!("| plugin | component | ns/record | records/s per core | × native Rust | × Rust wasm |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| Rust, native (baseline) | – | {:.0} | {:.0} | 1.00× | – |",
        per(native),
        n as f64 / native.as_secs_f64()
    );
    for (name, size, load, _, (wall, cpu)) in stages {
        let rust = *rust_wall.get_or_insert(wall);
        logfmt_ns.insert(name, per(wall));
        println!(
            "| {name} (wasm) | {:.1} MiB, loaded in {:.1} s | {:.0} | {:.0} | {:.1}× | {:.2}× |",
            size as f64 / (1 << 20) as f64,
            load.as_secs_f64(),
            per(wall),
            n as f64 / cpu,
            wall.as_secs_f64() / native.as_secs_f64(),
            wall.as_secs_f64() / rust.as_secs_f64(),
        );
    }
    // Where the time goes in the interpreted languages.
    let small = &records[..records.len().min(2000)];
    println!();
    println!(
        "| language | SDK + boundary per record (noop, batches of 1,000) | per call (noop, batches of 1) | the parser per record (logfmt − noop) |"
    );
    println!("|---|---|---|---|");
    for (name, wasm) in &noops {
        let (mut stage, _) = load(wasm, serde_json::json!({}));
        let (wall, _) = measure(&mut stage, &records, 1000, 3);
        let (one, _) = measure(&mut stage, small, 1, 3);
        let per_record = per(wall);
        let per_call = one.as_nanos() as f64 / small.len() as f64 - per_record;
        println!(
            "| {name} | {per_record:.0} ns | {:.0} µs | {:.0} ns |",
            per_call / 1e3,
            logfmt_ns.get(name).copied().unwrap_or(0.0) - per_record
        );
    }
}
