//! Two builds of one plugin, run in turns in one process: the A/B test an
//! SDK or plugin change needs on a machine whose speed swings 2× within
//! minutes, where two separate runs of `ledger` cannot tell a 10% change
//! from the noise. Each round runs A over every batch, then B; the figures
//! are the best and the median round of each, and B's median over A's.
//!
//! ```sh
//! SLUICE_AB_A=old/sluice_plugin_json.wasm SLUICE_AB_B=new/sluice_plugin_json.wasm \
//!   cargo bench -p sluice-benches --bench plugin_ab
//! ```
//!
//! `SLUICE_AB_CONFIG`: the plugin's config as JSON (default: the `json`
//! plugin reading `event_id` and `ts`); `SLUICE_BENCH_RECORDS`: lines
//! (default 100,000); `SLUICE_AB_ROUNDS` (default 15); `SLUICE_AB_INPUT=logfmt`
//! feeds the logfmt lines of `plugin_languages` instead of JSON. Build the two
//! components with `cargo build --profile wasm --target wasm32-wasip2 -p
//! <plugin>`, once from each tree.

use sluice::plugin::inputs::Inputs;
use sluice::plugin::isolate::Isolated;
use sluice::plugin::spec::PluginSpec;
use sluice::record::Record;
use sluice_benches::thread_cpu_seconds;

const BATCH: usize = 1000;

fn ok<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

fn main() {
    let (Some(a), Some(b)) = (std::env::var_os("SLUICE_AB_A"), std::env::var_os("SLUICE_AB_B")) else {
        println!("plugin_ab: set SLUICE_AB_A and SLUICE_AB_B to two builds of a plugin (see the file's header)");
        return;
    };
    let config: serde_json::Value = match std::env::var("SLUICE_AB_CONFIG") {
        Ok(text) => ok(serde_json::from_str(&text)),
        Err(_) => serde_json::json!({"id_field": "event_id", "timestamp_field": "ts"}),
    };
    let n = sluice_benches::env_count("SLUICE_BENCH_RECORDS", 100_000);
    let rounds = sluice_benches::env_count("SLUICE_AB_ROUNDS", 15);
    let lines: Vec<Vec<u8>> = match std::env::var("SLUICE_AB_INPUT").as_deref() {
        Ok("logfmt") => sluice_benches::logfmt_lines(n),
        _ => sluice_benches::json_lines_with_repeats(0, n, sluice_benches::now_secs())
            .into_iter()
            .map(String::into_bytes)
            .collect(),
    };
    let records: Vec<Record> =
        lines.iter().enumerate().map(|(i, l)| Record::line(l.as_slice(), "bench.log", 0, (i * 300) as u64)).collect();
    let batches: Vec<Vec<&Record>> = records.chunks(BATCH).map(|c| c.iter().collect()).collect();

    let runtime = sluice_benches::runtime();
    let load = |path: &std::ffi::OsStr| {
        let spec = PluginSpec { config: config.clone(), ..PluginSpec::from_path(std::path::PathBuf::from(path)) };
        ok(Isolated::new(ok(runtime.load(&spec))))
    };
    let mut plugins = [load(&a), load(&b)];
    let mut times: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for _ in 0..rounds {
        for (plugin, times) in plugins.iter_mut().zip(times.iter_mut()) {
            let t = thread_cpu_seconds();
            for batch in &batches {
                std::hint::black_box(ok(plugin.process_kept(Inputs::sources(batch), false)));
            }
            times.push((thread_cpu_seconds() - t) * 1e6 / records.len() as f64);
        }
    }
    let summary = |t: &mut Vec<f64>| {
        t.sort_by(f64::total_cmp);
        (t[0], t[t.len() / 2])
    };
    let (a_best, a_median) = summary(&mut times[0]);
    let (b_best, b_median) = summary(&mut times[1]);
    println!("plugin_ab: {} records, batches of {BATCH}, {rounds} rounds in turns; CPU µs per record", records.len());
    println!("  A {:<60} best {a_best:.3}  median {a_median:.3}", a.to_string_lossy());
    println!("  B {:<60} best {b_best:.3}  median {b_median:.3}", b.to_string_lossy());
    println!("  B/A: best {:.3}, median {:.3}", b_best / a_best, b_median / a_median);
}
