//! Which batch shape crosses the component boundary faster: a list of
//! records (what `sluice:plugin` uses) or one buffer of payloads plus their
//! ends and offsets. Both guest functions do the same trivial work, so the
//! difference is the boundary. Prints ns per record for each shape.
//!
//! `cargo bench -p sluice-benches --bench batch_shape`

use std::time::{Duration, Instant};

use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

wasmtime::component::bindgen!({ world: "boundary", path: "boundary/wit" });

struct State {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

const BATCH: usize = 1000;
const CALLS: usize = 300;

fn main() {
    let dir = sluice_e2e::build_wasm(&["sluice-bench-boundary"]);
    let engine = Engine::default();
    let component =
        Component::from_file(&engine, dir.join("sluice_bench_boundary.wasm")).unwrap_or_else(|e| panic!("{e}"));
    let mut linker = Linker::new(&engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker).unwrap_or_else(|e| panic!("{e}"));
    let mut store = Store::new(&engine, State { wasi: WasiCtx::builder().build(), table: ResourceTable::new() });
    let b = Boundary::instantiate(&mut store, &component, &linker).unwrap_or_else(|e| panic!("{e}"));

    let lines = sluice_benches::json_lines(BATCH, sluice_benches::now_secs());
    let path = "/var/log/app/bench.log".to_string();

    let mut list_time = Duration::MAX;
    let mut buffer_time = Duration::MAX;
    let mut checks = (Vec::new(), Vec::new());
    for _ in 0..5 {
        // By list: built per call, as the host builds its batch per call.
        let t = Instant::now();
        for _ in 0..CALLS {
            let recs: Vec<Rec> = lines
                .iter()
                .enumerate()
                .map(|(i, l)| Rec {
                    payload: l.as_bytes().to_vec(),
                    key: None,
                    headers: Vec::new(),
                    source_timestamp: None,
                    position: Position::File(FilePosition {
                        path: path.clone(),
                        generation: 0,
                        offset: i as u64 * 300,
                    }),
                    event_id: None,
                    timestamp: None,
                })
                .collect();
            checks.0 = b.call_by_list(&mut store, &recs).unwrap_or_else(|e| panic!("{e}"));
        }
        list_time = list_time.min(t.elapsed());

        let t = Instant::now();
        for _ in 0..CALLS {
            let mut payloads = Vec::with_capacity(BATCH * 300);
            let mut ends = Vec::with_capacity(BATCH);
            let mut offsets = Vec::with_capacity(BATCH);
            for (i, l) in lines.iter().enumerate() {
                payloads.extend_from_slice(l.as_bytes());
                ends.push(payloads.len() as u32);
                offsets.push(i as u64 * 300);
            }
            checks.1 =
                b.call_by_buffer(&mut store, &path, &payloads, &ends, &offsets).unwrap_or_else(|e| panic!("{e}"));
        }
        buffer_time = buffer_time.min(t.elapsed());
    }
    assert_eq!(checks.0, checks.1, "both shapes must compute the same thing");
    let per_record = |d: Duration| d.as_nanos() as f64 / (CALLS * BATCH) as f64;
    println!("batch_shape: {BATCH} records of ~300 bytes per call, {CALLS} calls, best of 5");
    println!("  list<record>             {:>8.1} ns per record", per_record(list_time));
    println!("  buffer + ends + offsets  {:>8.1} ns per record", per_record(buffer_time));
    println!("  ratio list/buffer        {:>8.2}x", list_time.as_secs_f64() / buffer_time.as_secs_f64());
}
