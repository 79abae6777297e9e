//! The cost ledger: the CPU each step of the hot path costs per record,
//! each step measured alone on the same records, beside the end-to-end run
//! of the same chain and the budget of docs/src/design.md (Throughput:
//! about 2–3 µs per 300-byte record, all in). Where the sum of the steps and
//! the end-to-end figure differ, the difference is what no step here names
//! (the driver's bookkeeping, threads handing batches over, start-up).
//!
//! `cargo bench -p sluice-benches --bench ledger`
//! (`SLUICE_BENCH_RECORDS`: lines, default 200,000, 10% repeated ids).
//!
//! Steps are timed on this thread (`RUSAGE_THREAD`), except RocksDB's
//! background work, which is the process's CPU beyond this thread's while
//! the ids are written and their memtables flushed.

use std::io::Write;
use std::time::Duration;

use sluice::config::Config;
use sluice::custody::ids::{IdDigest, PIPELINE_SCOPE, digest};
use sluice::delivery::Delivery;
use sluice::pipeline;
use sluice::pipeline::stop::Stop;
use sluice::plugin::chain::Chain;
use sluice::plugin::inputs::Inputs;
use sluice::plugin::isolate::Isolated;
use sluice::record::Record;
use sluice::sink::Sink;
use sluice::sink::file::FileSink;
use sluice::source::file::FilePartition;
use sluice::store::audit::Trails;
use sluice::store::dedup::DedupWindow;
use sluice::store::interned::Context;
use sluice::store::{Identity, Store, StoreWrite};
use sluice::verdict::Verdicts;
use sluice_abi::{BatchBuf, Outcomes, RecordFields};
use sluice_benches::{cpu_seconds, thread_cpu_seconds};

const BATCH: usize = 1000;

/// A step's cost, µs per record, best of `runs` (the machine is noisy; the
/// best run is the one least disturbed).
fn best(runs: usize, records: usize, mut f: impl FnMut()) -> f64 {
    (0..runs)
        .map(|_| {
            let t = thread_cpu_seconds();
            f();
            (thread_cpu_seconds() - t) * 1e6 / records as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn ok<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

fn main() {
    let n = sluice_benches::env_count("SLUICE_BENCH_RECORDS", 200_000);
    let now = sluice_benches::now_secs();
    let lines = sluice_benches::json_lines_with_repeats(0, n, now);
    let records_n = lines.len();
    let dir = ok(tempfile::tempdir());
    let input = dir.path().join("input.log");
    {
        let mut w = std::io::BufWriter::new(ok(std::fs::File::create(&input)));
        for l in &lines {
            ok(w.write_all(l.as_bytes()).and_then(|_| w.write_all(b"\n")));
        }
        ok(w.flush());
    }
    let mut rows: Vec<(&str, f64)> = Vec::new();

    // Framing: the file source itself, a batch of lines into one buffer
    // and the records the chain reads as slices of it.
    let mut records: Vec<Record> = Vec::new();
    rows.push((
        "framing (lines into records)",
        best(3, records_n, || {
            let mut part = ok(FilePartition::open(&input, None, 1 << 20, false));
            records.clear();
            loop {
                let batch = ok(part.next_batch(BATCH));
                if batch.is_empty() {
                    break;
                }
                records.extend(batch.into_iter().map(|r| r.record));
            }
        }),
    ));
    assert_eq!(records.len(), records_n);
    let batches: Vec<Vec<&Record>> = records.chunks(BATCH).map(|c| c.iter().collect()).collect();

    // Packing one batch into the 0.2 buffers (what the host does before
    // each stage).
    let mut buf = BatchBuf::default();
    rows.push((
        "packing a batch (0.2 buffers)",
        best(3, records_n, || {
            for b in &batches {
                buf.clear();
                for r in b {
                    let f = RecordFields { payload: &r.payload, offset: r.position.offset_i64(), ..Default::default() };
                    ok(buf.push(&f, std::iter::empty()));
                }
            }
        }),
    ));

    // Each plugin through the host, all in (packing, the boundary, the
    // guest's SDK and code, unpacking, the output contract).
    let runtime = sluice_benches::runtime();
    let json_spec = sluice_e2e::spec("json", serde_json::json!({"id_field": "event_id", "timestamp_field": "ts"}));
    let window_spec = sluice_e2e::spec("ts-window", serde_json::json!({"max_age": "2h", "max_future": "1m"}));
    let mut json = ok(Isolated::new(ok(runtime.load(&json_spec))));
    let mut window = ok(Isolated::new(ok(runtime.load(&window_spec))));
    let mut json_out: Vec<Vec<sluice::record::Outcome>> = Vec::new();
    rows.push((
        "plugin json (wasm, all in)",
        best(3, records_n, || {
            json_out = batches.iter().map(|b| ok(json.process_kept(Inputs::sources(b), false))).collect();
        }),
    ));
    // ts-window reads what json made of each record.
    let after_json: Vec<Vec<Record>> = batches
        .iter()
        .zip(&json_out)
        .map(|(b, outs)| {
            b.iter()
                .zip(outs)
                .filter_map(|(r, o)| match o.clone().resolve(r) {
                    sluice::record::Outcome::Emit(mut e) if e.len() == 1 => {
                        let e = e.remove(0);
                        Some(Record { payload: e.body, event_id: e.id, timestamp: e.timestamp, ..(*r).clone() })
                    }
                    _ => None,
                })
                .collect()
        })
        .collect();
    let after_refs: Vec<Vec<&Record>> = after_json.iter().map(|b| b.iter().collect()).collect();
    let kept = json_out.iter().flatten().filter(|o| matches!(o, sluice::record::Outcome::Keep { .. })).count();
    rows.push((
        "plugin ts-window (wasm, all in)",
        best(3, records_n, || {
            for b in &after_refs {
                std::hint::black_box(ok(window.process_kept(Inputs::sources(b), true)));
            }
        }),
    ));

    // The output contract's JSON check, once per body.
    rows.push((
        "JSON check (one body)",
        best(3, records_n, || {
            for r in &records {
                assert!(std::hint::black_box(sluice_guest::output_rules::body_breach(&r.payload)).is_none());
            }
        }),
    ));
    // Unpacking: the layout check of a batch's outcome buffers.
    let mut outs = sluice_abi::OutcomeBuf::default();
    for r in batches[0].iter() {
        ok(outs.emit([sluice_abi::EventFields { id: Some(b"ev-0000000001"), body: &r.payload, ..Default::default() }]));
    }
    let first_len = batches[0].len();
    rows.push((
        "unpacking (layout check + body copy)",
        best(3, first_len * 200, || {
            for _ in 0..200 {
                let c = ok(Outcomes::check(&outs.outcomes, &outs.events, &outs.data, first_len));
                for o in c.iter() {
                    if let sluice_abi::OutcomeView::Emit(evs) = o {
                        for e in evs {
                            std::hint::black_box(e.body.to_vec());
                        }
                    }
                }
            }
        }),
    ));

    // The whole chain as the driver runs it.
    let mut chain = Chain::new(vec![
        ok(Isolated::new(ok(runtime.load(&json_spec)))),
        ok(Isolated::new(ok(runtime.load(&window_spec)))),
    ]);
    let mut verdicts: Vec<Verdicts> = Vec::new();
    rows.push((
        "chain json → ts-window (judge)",
        best(3, records_n, || {
            verdicts.clear();
            for b in &batches {
                verdicts.push(ok(chain.judge(b)));
            }
        }),
    ));

    // Ids: the digest of each, then the window.
    let mut digests: Vec<IdDigest> = Vec::new();
    rows.push((
        "id digest (blake3)",
        best(3, records_n, || {
            digests = (0..records_n).map(|i| digest(&PIPELINE_SCOPE, &format!("ev-{i:010}"))).collect();
        }),
    ));
    let store_dir = ok(tempfile::tempdir());
    let store = ok(Store::open(store_dir.path(), &Identity { pipeline: "ledger".into(), sources: vec![] }));
    let dedup = ok(DedupWindow::new(&store, Duration::from_secs(7 * 86400)));
    let secs = now as u64;
    // Writing the ids (one WriteBatch per batch, ten batches a sync), then
    // the flush they leave to RocksDB's threads.
    let (proc0, thread0) = (cpu_seconds(), thread_cpu_seconds());
    let mut group = Vec::new();
    for chunk in digests.chunks(BATCH) {
        let mut w = StoreWrite::default();
        ok(dedup.record(&mut w, chunk, secs));
        group.push(w);
        if group.len() == 10 {
            ok(store.commit_group(group.drain(..)));
        }
    }
    ok(store.commit_group(group.drain(..)));
    let write_thread = thread_cpu_seconds() - thread0;
    ok(store.flush());
    let (proc1, thread1) = (cpu_seconds(), thread_cpu_seconds());
    let background = (proc1 - proc0) - (thread1 - thread0);
    rows.push(("dedup write (WriteBatch + synced commit)", write_thread * 1e6 / records_n as f64));
    rows.push(("  RocksDB background (flush, compaction)", background.max(0.0) * 1e6 / records_n as f64));
    let fresh: Vec<IdDigest> = (0..records_n).map(|i| digest(&PIPELINE_SCOPE, &format!("new-{i:010}"))).collect();
    rows.push((
        "dedup look-up, new id (miss)",
        best(3, records_n, || {
            for c in fresh.chunks(BATCH) {
                assert!(ok(dedup.seen(c, secs)).iter().all(|s| !*s));
            }
        }),
    ));
    rows.push((
        "dedup look-up, delivered id (hit)",
        best(3, records_n, || {
            for c in digests.chunks(BATCH) {
                assert!(ok(dedup.seen(c, secs)).iter().all(|s| *s));
            }
        }),
    ));
    let context = Context { sink: "file".into(), plugins: vec![], via: "run".into() };
    let mut trails = ok(Trails::new(&store, &context));
    let at = now * 1_000_000_000;
    rows.push((
        "audit trail (per delivered id)",
        best(3, records_n, || {
            for r in &records {
                std::hint::black_box(ok(trails.trail(&store, &r.position, at)));
            }
        }),
    ));

    // Rendering the sink's lines, then writing and syncing them.
    let deliveries: Vec<Vec<Delivery>> = verdicts
        .iter()
        .map(|v| {
            v.events.iter().cloned().map(|e| Delivery::checked(e.id.unwrap_or_default(), e.timestamp, e.body)).collect()
        })
        .collect();
    let delivered: usize = deliveries.iter().map(Vec::len).sum();
    let mut out = Vec::new();
    rows.push((
        "render (NDJSON envelope)",
        best(3, delivered, || {
            for b in &deliveries {
                out.clear();
                for d in b {
                    d.write_envelope(&mut out);
                    out.push(b'\n');
                }
            }
        }),
    ));
    let sink = ok(FileSink::open(&dir.path().join("out.ndjson")));
    rows.push((
        "file sink (render + write + fdatasync)",
        best(1, delivered, || {
            for b in &deliveries {
                ok(sink.deliver(b));
            }
        }),
    ));

    // End to end: the same lines through `sluice run`'s pipeline.
    let e2e_dir = ok(tempfile::tempdir());
    ok(std::fs::copy(&input, e2e_dir.path().join("input-00.log")));
    let cfg_path = e2e_dir.path().join("sluice.toml");
    ok(std::fs::write(&cfg_path, sluice_benches::file_pipeline_config("ledger", "input-*.log", "")));
    let cfg = ok(Config::load(&cfg_path));
    let (c0, w0) = (cpu_seconds(), std::time::Instant::now());
    let stats = ok(pipeline::run(&cfg, &runtime, &Stop::default()));
    let (e2e_cpu, e2e_wall) = (cpu_seconds() - c0, w0.elapsed().as_secs_f64());
    assert_eq!(stats.total.records as usize, records_n, "every line read");
    assert_eq!(stats.total.delivered as usize, n, "every unique id delivered");
    let e2e = e2e_cpu * 1e6 / records_n as f64;

    println!(
        "ledger: {records_n} lines ({n} unique ids), batches of {BATCH}; CPU µs per record, each step alone; allocator {}",
        sluice_benches::ALLOCATOR_NAME
    );
    println!("  (json kept {kept} of {} bodies: its outcomes crossed without their bytes)", records_n);
    for (what, us) in &rows {
        println!("  {what:<42} {us:>7.3} µs");
    }
    let counted: f64 = rows
        .iter()
        .filter(|(w, _)| {
            // The chain already holds the two plugins and what they pack,
            // unpack and check; the file sink holds its render.
            !matches!(
                *w,
                "plugin json (wasm, all in)"
                    | "plugin ts-window (wasm, all in)"
                    | "packing a batch (0.2 buffers)"
                    | "JSON check (one body)"
                    | "unpacking (layout check + body copy)"
                    | "render (NDJSON envelope)"
                    | "dedup look-up, delivered id (hit)"
            )
        })
        .map(|(_, us)| us)
        .sum();
    println!("  {:<42} {counted:>7.3} µs", "sum of the steps a record takes");
    println!(
        "  {:<42} {e2e:>7.3} µs  ({:.0} records/s per core, {:.0}/s wall)",
        "end to end (pipeline::run, 1 file)",
        records_n as f64 / e2e_cpu,
        records_n as f64 / e2e_wall
    );
    println!("  {:<42} {:>7.3} µs", "not named by a step (driver, hand-over, start)", e2e - counted);
    println!("  {:<42} 2.0–3.0 µs", "budget (DESIGN.md, Throughput)");
}
