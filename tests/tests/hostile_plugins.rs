//! Hostile plugins, each contained: the host keeps running, the poison
//! record is rejected with a reason naming the fault, the other records of
//! the batch get exactly the outcome a clean run gives them, and the rebuilt
//! instance serves the next batch.

use std::time::{Duration, Instant};

use serde_json::json;
use sluice::plugin::chain::build_chain;
use sluice::plugin::engine::Runtime;
use sluice::plugin::error::PluginError;
use sluice::plugin::spec::{PluginLimits, PluginSpec};
use sluice::record::Record;
use sluice::verdict::Verdict;
use sluice_e2e::{plugin_v01, spec_with_limits};

fn limits() -> PluginLimits {
    PluginLimits { memory_bytes: 32 << 20, time_per_batch: Duration::from_millis(300), ..PluginLimits::default() }
}

fn batch() -> Vec<Record> {
    ["alpha", "bravo", "POISON charlie", "delta", "echo"]
        .iter()
        .enumerate()
        .map(|(i, l)| Record::line(*l, "hostile.log", 0, i as u64 * 10))
        .collect()
}

fn clean_verdict(line: &str) -> Verdict {
    Verdict::Emit(vec![sluice::record::Event::new(
        None,
        None,
        serde_json::to_vec(&json!({ "line": line })).unwrap_or_default().into(),
    )])
}

/// Run the attack against the hostile plugin built for 0.2 and for 0.1,
/// and return the poison record's rejection reason: the same for both,
/// but for the plugin's digest.
fn contained(attack: &str) -> String {
    let v02 = contained_in("hostile", attack);
    let spec = PluginSpec { limits: limits(), ..PluginSpec::from_path(plugin_v01("hostile")) };
    let v01 = contained_spec(spec, "hostile", attack);
    assert_eq!(without_digest(&v01), without_digest(&v02), "{attack}: 0.1 and 0.2 plugins are contained alike");
    v02
}

/// `plugin hostile@0123456789ab faulted: …` without the digest.
fn without_digest(reason: &str) -> String {
    match reason.split_once('@') {
        Some((head, tail)) => format!("{head}@…{}", tail.get(12..).unwrap_or_default()),
        None => reason.to_string(),
    }
}

/// [`contained`] for the plugin `plugin` (`hostile`, or `hostile-abi`,
/// which breaks the 0.2 outcome layout below the SDK).
fn contained_in(plugin: &str, attack: &str) -> String {
    contained_spec(spec_with_limits(plugin, json!({ "attack": attack }), limits()), plugin, attack)
}

fn contained_spec(mut spec: PluginSpec, plugin: &str, attack: &str) -> String {
    spec.config = json!({ "attack": attack });
    let runtime = Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
    let mut chain = build_chain(&runtime, &[spec]).unwrap_or_else(|e| panic!("{attack}: {e}"));
    let started = Instant::now();
    let verdicts = chain.run(batch()).unwrap_or_else(|e| panic!("{attack}: {e}"));
    assert_eq!(verdicts.len(), 5, "{attack}: one verdict per record");
    for (i, line) in [(0, "alpha"), (1, "bravo"), (3, "delta"), (4, "echo")] {
        assert_eq!(verdicts[i], clean_verdict(line), "{attack}: record {i} must be untouched");
    }
    let reason = match &verdicts[2] {
        Verdict::Reject { plugin: by, reason } => {
            assert_eq!(by.name, plugin);
            reason.clone()
        }
        other => panic!("{attack}: the poison record must be rejected, got {other:?}"),
    };
    let stats = chain.stages()[0].stats();
    assert_eq!(stats.faulted_records, 1, "{attack}: {stats:?}");
    assert!(stats.rebuilds >= 1, "{attack}: the instance must be rebuilt: {stats:?}");
    // The rebuilt instance is healthy: a clean batch goes through.
    let again = chain.run(vec![Record::line("foxtrot", "hostile.log", 0, 50)]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again, vec![clean_verdict("foxtrot")], "{attack}: after the fault");
    println!("{attack}: contained in {:?}: {reason}", started.elapsed());
    reason
}

/// Run an attack on the output contract: the poison record alone is
/// rejected with the rule (a breach is the record's fault, not a crash, so
/// nothing is rebuilt), and the rest of the batch is untouched.
fn breaks_contract(attack: &str) -> String {
    let v01 = PluginSpec {
        limits: limits(),
        config: json!({ "attack": attack }),
        ..PluginSpec::from_path(plugin_v01("hostile"))
    };
    let r01 = breaks_contract_spec(v01, attack);
    let r02 = breaks_contract_spec(spec_with_limits("hostile", json!({ "attack": attack }), limits()), attack);
    assert_eq!(without_digest(&r01), without_digest(&r02), "{attack}: 0.1 and 0.2 plugins are held to one contract");
    r02
}

fn breaks_contract_spec(spec: PluginSpec, attack: &str) -> String {
    let runtime = Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
    let mut chain = build_chain(&runtime, &[spec]).unwrap_or_else(|e| panic!("{attack}: {e}"));
    let verdicts = chain.run(batch()).unwrap_or_else(|e| panic!("{attack}: {e}"));
    assert_eq!(verdicts.len(), 5, "{attack}: one verdict per record");
    for (i, line) in [(0, "alpha"), (1, "bravo"), (3, "delta"), (4, "echo")] {
        assert_eq!(verdicts[i], clean_verdict(line), "{attack}: record {i} must be untouched");
    }
    let reason = match &verdicts[2] {
        Verdict::Reject { plugin, reason } if plugin.name == "hostile" => reason.clone(),
        other => panic!("{attack}: the poison record must be rejected by the host, got {other:?}"),
    };
    assert!(reason.starts_with(&format!("plugin {} broke the output contract: ", chain.stages()[0].id())), "{reason}");
    let stats = chain.stages()[0].stats();
    assert_eq!((stats.faulted_batches, stats.rebuilds), (0, 0), "{attack}: not a fault: {stats:?}");
    println!("{attack}: {reason}");
    reason
}

#[test]
fn a_body_that_is_not_json_is_rejected() {
    assert!(breaks_contract("body-not-json").contains("event 0: the body is not JSON: \"this is not json\""));
}

#[test]
fn a_body_that_is_an_array_is_rejected() {
    assert!(breaks_contract("body-array").ends_with("event 0: the body is a JSON array, not an object"));
}

#[test]
fn a_body_that_is_not_utf8_is_rejected() {
    assert!(breaks_contract("body-not-utf8").contains("the body is not UTF-8 (invalid byte at offset 9)"));
}

#[test]
fn an_empty_event_id_is_rejected_rather_than_deduplicated() {
    assert!(breaks_contract("empty-id").contains("event 0: the id is empty"));
}

#[test]
fn an_event_id_of_a_megabyte_is_rejected() {
    let reason = breaks_contract("huge-id");
    assert!(reason.contains("the id is 1048576 bytes, over the limit of 256 (max_id_bytes)"), "{reason}");
}

#[test]
fn a_flood_of_events_from_one_record_is_rejected() {
    let reason = breaks_contract("event-flood");
    assert!(reason.contains("5000 events from one record, over the limit of 1024"), "{reason}");
}

/// A log line writer for one test thread.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut v) = self.0.lock() {
            v.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_log_flood_is_cut_at_the_batch_budget_and_counted() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
    let (verdicts, seconds) = tracing::subscriber::with_default(subscriber, || {
        let runtime = Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
        let spec = spec_with_limits("hostile", json!({ "attack": "log-flood" }), limits());
        let mut chain = build_chain(&runtime, &[spec]).unwrap_or_else(|e| panic!("{e}"));
        let started = std::time::Instant::now();
        let verdicts = chain.run(batch()).unwrap_or_else(|e| panic!("{e}"));
        let seconds = started.elapsed().as_secs();
        // What the log still counts, said as a run's end says it.
        sluice::telemetry::repeats::say_pending();
        (verdicts, seconds)
    });
    // The flood does not cost the record: it is echoed like the others.
    assert_eq!(verdicts[2], clean_verdict("POISON charlie"));
    let text = String::from_utf8_lossy(&captured.0.lock().map(|v| v.clone()).unwrap_or_default()).into_owned();
    // max_log_lines_per_batch (100 by default) admits 100 lines from the
    // batch; the log says each new one in full within its budget of 20 a
    // second (`telemetry::repeats`) and counts the rest. (Only this test of
    // the binary logs: the others have no subscriber, so none spends the
    // budget.)
    let lines = text.lines().filter(|l| l.contains("flood line")).count();
    let budget = 20 * (seconds as usize + 1);
    assert!((1..=budget).contains(&lines), "{lines} lines in full, {budget} allowed: {text}");
    let counted = text
        .lines()
        .find(|l| l.contains("more like this") && l.contains("other reasons"))
        .and_then(|l| l.split("… ").nth(1))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.replace(',', "").parse::<usize>().ok());
    assert_eq!(counted.unwrap_or(0), 100 - lines, "the admitted lines not said are counted: {text}");
    let summary = text.lines().find(|l| l.contains("suppressed")).unwrap_or_default();
    assert!(summary.contains("suppressed=9900") && summary.contains("limit=100"), "{summary}");
}

#[test]
fn a_body_slice_outside_the_buffer_is_refused() {
    let reason = contained_in("hostile-abi", "out-of-bounds");
    assert!(
        reason.contains("malformed outcomes: event 0 body spans bytes") && reason.contains("outside the data buffer"),
        "{reason}"
    );
}

#[test]
fn overlapping_slices_are_refused() {
    let reason = contained_in("hostile-abi", "overlap");
    assert!(
        reason.contains("malformed outcomes: event 1 body starts at byte 0, before the end of the previous slice"),
        "{reason}"
    );
}

#[test]
fn events_out_of_order_are_refused() {
    let reason = contained_in("hostile-abi", "events-out-of-order");
    assert!(reason.contains("malformed outcomes: outcome 0 emits from event 1, expected 0"), "{reason}");
}

#[test]
fn an_outcome_count_that_disagrees_with_the_batch_is_refused() {
    let reason = contained_in("hostile-abi", "count-mismatch");
    assert!(reason.contains("wrong number of outcomes: 0 for 1 records"), "{reason}");
}

#[test]
fn a_ragged_outcome_table_is_refused() {
    let reason = contained_in("hostile-abi", "ragged");
    assert!(reason.contains("outcomes.outcomes holds 17 bytes, not a whole number of 12-byte descriptors"), "{reason}");
}

#[test]
fn unknown_kinds_and_flags_are_refused() {
    let reason = contained_in("hostile-abi", "unknown-kind");
    assert!(reason.contains("outcome 0 has kind 9"), "{reason}");
    let reason = contained_in("hostile-abi", "unknown-flag");
    assert!(reason.contains("event 0 has unknown flag bits 0x80"), "{reason}");
    let reason = contained_in("hostile-abi", "kept-with-body");
    assert!(reason.contains("event 0 keeps its record's payload (flag bit 2) but names a body slice"), "{reason}");
    let reason = contained_in("hostile-abi", "unused-event");
    assert!(reason.contains("the emits use 1 events of the 2"), "{reason}");
}

#[test]
fn an_outcome_buffer_past_the_memory_limit_is_refused() {
    let reason = contained_in("hostile-abi", "huge-outcome");
    assert!(reason.contains("out of memory") && reason.contains(&format!("limit {}", 32 << 20)), "{reason}");
}

#[test]
fn an_id_that_is_not_utf8_breaks_the_contract() {
    // Read below the SDK: a record rejection, the rest of the batch kept.
    let runtime = Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
    let spec = spec_with_limits("hostile-abi", json!({ "attack": "id-not-utf8" }), limits());
    let mut chain = build_chain(&runtime, &[spec]).unwrap_or_else(|e| panic!("{e}"));
    let verdicts = chain.run(batch()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(verdicts[0], clean_verdict("alpha"));
    match &verdicts[2] {
        Verdict::Reject { reason, .. } => {
            assert!(reason.contains("broke the output contract: event 0: the id is not UTF-8"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn infinite_loop_is_stopped_by_the_time_limit() {
    let reason = contained("infinite-loop");
    assert!(reason.contains("timeout: ran past the time limit of 300 ms"), "{reason}");
}

#[test]
fn memory_bomb_hits_the_memory_limit() {
    let reason = contained("memory-bomb");
    assert!(reason.contains("out of memory") && reason.contains(&format!("limit {}", 32 << 20)), "{reason}");
}

#[test]
fn deep_recursion_traps() {
    let reason = contained("deep-recursion");
    assert!(reason.contains("trap:"), "{reason}");
}

#[test]
fn a_trap_mid_batch_names_the_panic() {
    let reason = contained("trap");
    // The guest's panic message reaches the reason through its stderr.
    assert!(reason.contains("trap: wasm `unreachable`") || reason.contains("trap:"), "{reason}");
    assert!(reason.contains("hostile plugin: poison record"), "{reason}");
}

#[test]
fn fewer_outcomes_than_records() {
    let reason = contained("fewer-outcomes");
    assert!(reason.contains("wrong number of outcomes: 0 for 1 records"), "{reason}");
}

#[test]
fn more_outcomes_than_records() {
    let reason = contained("more-outcomes");
    assert!(reason.contains("wrong number of outcomes: 2 for 1 records"), "{reason}");
}

#[test]
fn reading_a_host_file_is_denied() {
    let reason = contained("read-file");
    assert!(reason.contains("read /etc/passwd denied"), "{reason}");
}

#[test]
fn opening_a_socket_is_denied() {
    let reason = contained("connect");
    assert!(reason.contains("connect 127.0.0.1:1 denied"), "{reason}");
}

#[test]
fn the_environment_is_empty() {
    let reason = contained("read-env");
    assert!(reason.contains("env HOME denied"), "{reason}");
}

#[test]
fn an_init_refusal_stops_the_start_with_the_plugins_message() {
    let runtime = Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
    let spec = spec_with_limits("hostile", json!({ "attack": "refuse-init" }), limits());
    match build_chain(&runtime, &[spec]) {
        Err(PluginError::Config { plugin, message }) => {
            assert!(plugin.starts_with("hostile@"), "{plugin}");
            assert!(message.contains("refuse-init refuses every config"), "{message}");
        }
        Err(other) => panic!("wrong error: {other}"),
        Ok(_) => panic!("init refusal must stop the chain"),
    }
    let spec = spec_with_limits("hostile", json!({ "attack": "no-such-attack" }), limits());
    let err = build_chain(&runtime, &[spec]).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("unknown variant `no-such-attack`"), "{err}");
}

#[test]
fn a_component_importing_an_ungranted_capability_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("evil.wat");
    // A component that imports an interface the host does not provide.
    std::fs::write(
        &path,
        r#"(component (import "wasi:http/outgoing-handler@0.2.0" (instance (export "handle" (func)))))"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let runtime = Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
    let err = build_chain(&runtime, &[PluginSpec::from_path(&path)]).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("cannot be linked") && err.contains("wasi:http/outgoing-handler"), "{err}");
    // A component that links but does not export the contract's functions.
    std::fs::write(&path, "(component)").unwrap_or_else(|e| panic!("{e}"));
    let err = build_chain(&runtime, &[PluginSpec::from_path(&path)]).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("not a sluice plugin") && err.contains("init"), "{err}");
}

#[test]
fn a_file_that_is_not_a_component_is_refused_with_its_path() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("garbage.wasm");
    std::fs::write(&path, b"not wasm at all").unwrap_or_else(|e| panic!("{e}"));
    let runtime = Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
    let err = build_chain(&runtime, &[PluginSpec::from_path(&path)]).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("garbage.wasm") && err.contains("not a valid WebAssembly component"), "{err}");
}

/// Issue 24, item 1: the host's native helpers under attack, each bounded
/// with no fault and no rebuild, through the C build of the helpers kit's
/// plugin (`conformance/helpers`) in a small sandbox (128 MiB, the default
/// 5 s): a
/// pattern that sends a backtracking engine exponential, a path of 10,000
/// segments, a flood of compiled formats, and a 64 MiB payload. Each
/// record's answer is the host's, and the whole batch stays within its
/// time limit, measured here.
#[test]
fn attacks_on_the_native_helpers_are_bounded_without_a_fault() {
    let out = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let wasm = out.path().join("helpers-c.wasm");
    sluice_e2e::languages::build_c(&sluice_e2e::workspace_root().join("conformance/helpers/helpers_demo.c"), &wasm);
    let limits =
        PluginLimits { memory_bytes: 128 << 20, time_per_batch: Duration::from_secs(5), ..PluginLimits::default() };
    let spec = PluginSpec { limits, ..PluginSpec::from_path(&wasm) };
    let runtime = Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
    let mut chain = build_chain(&runtime, &[spec]).unwrap_or_else(|e| panic!("{e}"));
    for (attack, want) in [
        ("attack=pattern", "emit {\"matched\":false}"),
        ("attack=path", "reject path 0 has 10001 segments, over the limit of 32"),
        ("attack=flood", "reject after 63: 64 time formats are live, the limit per instance"),
        ("attack=payload mib=64", "emit {\"bytes\":67108872,\"found\":false}"),
    ] {
        let started = Instant::now();
        let verdicts = chain.run(vec![Record::line(attack, "helpers.log", 0, 0)]).unwrap_or_else(|e| panic!("{e}"));
        let took = started.elapsed();
        let said = match &verdicts[..] {
            [Verdict::Emit(events)] => format!("emit {}", String::from_utf8_lossy(&events[0].body)),
            [Verdict::Reject { reason, .. }] => format!("reject {reason}"),
            other => panic!("{attack}: {other:?}"),
        };
        println!("{attack}: {said} in {took:?}");
        assert!(said.starts_with(want), "{attack}: {said}");
        assert!(took < Duration::from_secs(5), "{attack}: bounded by the batch's limit, took {took:?}");
        let stats = chain.stages()[0].stats();
        assert_eq!((stats.faulted_records, stats.rebuilds), (0, 0), "{attack}: no fault, no rebuild: {stats:?}");
    }
}
