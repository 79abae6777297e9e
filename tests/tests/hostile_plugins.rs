//! Hostile plugins, each contained: the host keeps running, the poison
//! record is rejected with a reason naming the fault, the other records of
//! the batch get exactly the outcome a clean run gives them, and the rebuilt
//! instance serves the next batch.

use std::time::{Duration, Instant};

use serde_json::json;
use sluice::plugin::{PluginError, PluginLimits, PluginSpec, Record, Runtime, Verdict, build_chain};
use sluice_e2e::spec_with_limits;

fn limits() -> PluginLimits {
    PluginLimits { memory_bytes: 32 << 20, time_per_batch: Duration::from_millis(300) }
}

fn batch() -> Vec<Record> {
    ["alpha", "bravo", "POISON charlie", "delta", "echo"]
        .iter()
        .enumerate()
        .map(|(i, l)| Record::line(*l, "hostile.log", 0, i as u64 * 10))
        .collect()
}

fn clean_verdict(line: &str) -> Verdict {
    Verdict::Emit(vec![sluice::plugin::Event {
        id: None,
        timestamp: None,
        body: serde_json::to_vec(&json!({ "line": line })).unwrap_or_default(),
    }])
}

/// Run the attack and return the poison record's rejection reason.
fn contained(attack: &str) -> String {
    let runtime = Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
    let spec = spec_with_limits("hostile", json!({ "attack": attack }), limits());
    let mut chain = build_chain(&runtime, &[spec]).unwrap_or_else(|e| panic!("{attack}: {e}"));
    let started = Instant::now();
    let verdicts = chain.run(batch()).unwrap_or_else(|e| panic!("{attack}: {e}"));
    assert_eq!(verdicts.len(), 5, "{attack}: one verdict per record");
    for (i, line) in [(0, "alpha"), (1, "bravo"), (3, "delta"), (4, "echo")] {
        assert_eq!(verdicts[i], clean_verdict(line), "{attack}: record {i} must be untouched");
    }
    let reason = match &verdicts[2] {
        Verdict::Reject { plugin, reason } => {
            assert_eq!(plugin.name, "hostile");
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
