//! The plugin runtime's engine settings, measured: json → ts-window over
//! 300-byte JSON lines in batches of 1,000 (the plugin_chain workload)
//! through one engine per candidate setting, in the same run, rounds
//! interleaved so that the machine's drift falls on every candidate alike.
//! Prints records/s on one core and each candidate's ratio to sluice's
//! settings. A setting is kept only if it is faster beyond the spread of
//! the rounds.
//!
//! `cargo bench -p sluice-benches --bench plugin_runtime`
//! (`SLUICE_BENCH_RECORDS`, default 100,000; `SLUICE_BENCH_ROUNDS`, default 7).

use std::time::{Duration, Instant};

use serde_json::json;
use sluice::plugin::chain::{Chain, build_chain};
use sluice::plugin::engine::Runtime;
use sluice::record::Record;
use sluice::verdict::Verdict;
use wasmtime::{Config, OptLevel};

type Tune = fn(&mut Config);

/// sluice's settings first: the baseline every other row is divided by.
const CANDIDATES: [(&str, Tune); 6] = [
    ("sluice's settings (epoch interruption, 1 MiB wasm stack)", |_| {}),
    ("+ concurrency_support(false)", |c| {
        c.concurrency_support(false);
    }),
    ("+ no wasm backtraces", |c| {
        c.wasm_backtrace_max_frames(None);
    }),
    ("+ cranelift opt level speed_and_size", |c| {
        c.cranelift_opt_level(OptLevel::SpeedAndSize);
    }),
    ("+ explicit bounds checks (no signals)", |c| {
        c.signals_based_traps(false);
    }),
    ("- epoch interruption (no time limits: the cost of them)", |c| {
        c.epoch_interruption(false);
    }),
];

fn chain(runtime: &Runtime) -> Chain {
    build_chain(
        runtime,
        &[
            sluice_e2e::spec("json", json!({ "id_field": "event_id", "timestamp_field": "ts" })),
            sluice_e2e::spec("ts-window", json!({ "max_age": "2h", "max_future": "1m" })),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn round(chain: &mut Chain, lines: &[String]) -> (Duration, usize) {
    let t = Instant::now();
    let mut emitted = 0;
    for (b, chunk) in lines.chunks(1000).enumerate() {
        let batch: Vec<Record> = chunk
            .iter()
            .enumerate()
            .map(|(i, l)| Record::line(l.as_bytes(), "bench.log", 0, ((b * 1000 + i) * 300) as u64))
            .collect();
        let verdicts = chain.run(batch).unwrap_or_else(|e| panic!("{e}"));
        emitted += verdicts.iter().filter(|v| matches!(v, Verdict::Emit(_))).count();
    }
    (t.elapsed(), emitted)
}

fn main() {
    let n = sluice_benches::env_count("SLUICE_BENCH_RECORDS", 100_000);
    let rounds = sluice_benches::env_count("SLUICE_BENCH_ROUNDS", 7);
    let lines = sluice_benches::json_lines(n, sluice_benches::now_secs());
    // One runtime and chain per candidate, compiled before any clock runs.
    let mut chains: Vec<(&str, Runtime, Chain)> = CANDIDATES
        .iter()
        .map(|(name, tune)| {
            let runtime = Runtime::tuned(None, tune).unwrap_or_else(|e| panic!("{name}: {e}"));
            let chain = chain(&runtime);
            (*name, runtime, chain)
        })
        .collect();
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); chains.len()];
    for _ in 0..rounds {
        for (i, (name, _, chain)) in chains.iter_mut().enumerate() {
            let (t, emitted) = round(chain, &lines);
            assert_eq!(emitted, n, "{name}: every record lies inside the window");
            times[i].push(t);
        }
    }
    let rate = |d: Duration| n as f64 / d.as_secs_f64();
    let median = |ts: &mut Vec<Duration>| {
        ts.sort();
        ts[ts.len() / 2]
    };
    let base = median(&mut times[0].clone());
    println!("plugin_runtime: json -> ts-window, {n} records, batches of 1000, median and spread of {rounds} rounds");
    println!("  {:<58} {:>12} {:>22} {:>10}", "engine", "records/s", "min..max records/s", "× sluice's");
    for (i, (name, _, _)) in chains.iter().enumerate() {
        let mut ts = times[i].clone();
        let m = median(&mut ts);
        let (fast, slow) = (ts[0], ts[ts.len() - 1]);
        println!(
            "  {name:<58} {:>12.0} {:>10.0}..{:<11.0} {:>9.3}",
            rate(m),
            rate(slow),
            rate(fast),
            base.as_secs_f64() / m.as_secs_f64()
        );
    }
}
