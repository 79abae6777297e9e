//! `sluice test -c CONFIG --cases DIR`: every example pipeline config
//! ships cases and passes them (with the plugins built from this tree),
//! and a case that expects the wrong thing fails, naming the record and
//! what it became.

use std::path::{Path, PathBuf};
use std::process::Command;

use sluice_e2e::{build_wasm, plugin, sluice_bin, workspace_root};

/// The credentials the examples and recipes name, set: `test` and plain
/// `check` reach no backend, but a config naming an unset variable does
/// not load.
const CREDENTIALS: &[&str] = &[
    "CLICKHOUSE_PASSWORD",
    "O2_AUTH",
    "O2_AUTHORIZATION",
    "PGPASSWORD_SLUICE",
    "AXIOM_AUTHORIZATION",
    "ELASTIC_PASSWORD",
    "SPLUNK_HEC_AUTHORIZATION",
    "DD_API_KEY",
    "KAFKA_PASSWORD",
];

fn sluice(args: &[&str]) -> Command {
    let mut command = Command::new(sluice_bin!());
    command.args(args).env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"));
    for name in CREDENTIALS {
        command.env(name, "unused");
    }
    command
}

fn sluice_test(config: &Path, cases: &Path) -> (i32, String, String) {
    let out = sluice(&["test", "-c", &config.display().to_string(), "--cases", &cases.display().to_string()])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every `examples/**/*.toml` (two levels down at most) with a
/// `[pipeline]` table: the configs a newcomer copies (the loghub folder
/// holds plugin configs).
fn example_pipelines() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![(workspace_root().join("examples"), 0)];
    while let Some((dir, depth)) = dirs.pop() {
        for file in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = file.path();
            if path.is_dir() {
                if depth < 2 {
                    dirs.push((path, depth + 1));
                }
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if depth > 0
                && path.extension().is_some_and(|e| e == "toml")
                && text.lines().any(|l| l.trim() == "[pipeline]")
            {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// `config` with its plugins pointed at this tree's builds (the examples
/// point at `out/plugins`, where scripts/quickstart copies them).
fn with_built_plugins(config: &Path, dir: &Path) -> PathBuf {
    let mut text = std::fs::read_to_string(config).unwrap_or_else(|e| panic!("{e}"));
    for name in ["json", "pattern", "ts-window", "avro", "protobuf", "json-schema"] {
        for up in ["../../../", "../../"] {
            text = text.replace(&format!("{up}out/plugins/{name}.wasm"), &plugin(name).display().to_string());
        }
    }
    if text.contains("out/classifiers/axiom.wasm") {
        let axiom = build_wasm(&["sluice-classifier-axiom"]).join("sluice_classifier_axiom.wasm");
        text = text.replace("../../../out/classifiers/axiom.wasm", &axiom.display().to_string());
    }
    let copy = dir.join(config.file_name().unwrap_or_default());
    std::fs::write(&copy, text).unwrap_or_else(|e| panic!("{e}"));
    copy
}

#[test]
fn every_example_config_ships_cases_and_passes_them() {
    let configs = example_pipelines();
    assert!(configs.len() >= 6, "quickstart, kafka, clickhouse, http, postgres, classifiers/axiom: {configs:?}");
    for config in &configs {
        let cases = config.with_file_name("cases");
        let n = std::fs::read_dir(&cases)
            .unwrap_or_else(|e| panic!("{}: every example config ships cases beside it ({e})", cases.display()))
            .flatten()
            .filter(|f| f.path().extension().is_some_and(|e| e == "json"))
            .count();
        assert!(n >= 2, "{}: {n} cases", cases.display());
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (code, out, err) = sluice_test(&with_built_plugins(config, tmp.path()), &cases);
        assert_eq!(code, 0, "{}:\n{out}{err}", config.display());
        assert!(out.contains(&format!("{n} cases, {n} passed, 0 failed")), "{out}");
        assert_eq!(out.lines().filter(|l| l.starts_with("ok    ")).count(), n, "{out}");
        println!("{}: {n} cases passed", config.display());
    }
}

/// Every recipe of the book (`examples/recipes/`, shown in
/// `docs/src/recipes/`) is a config `sluice check` accepts as it is, with
/// the plugins built from this tree: the source finds the sample, the
/// plugins load with their configs, the sink's keys are all known, and
/// each recipe's page shows its file.
#[test]
fn every_recipe_passes_check() {
    let dir = workspace_root().join("examples/recipes");
    let mut recipes: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    recipes.sort();
    assert!(recipes.len() >= 9, "{recipes:?}");
    let pages = workspace_root().join("docs/src/recipes");
    let shown: String = std::fs::read_dir(&pages)
        .unwrap_or_else(|e| panic!("{}: {e}", pages.display()))
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .collect();
    for recipe in &recipes {
        let name = recipe.file_name().unwrap_or_default().to_string_lossy().into_owned();
        assert!(shown.contains(&format!("examples/recipes/{name}}}}}")), "no page of docs/src/recipes includes {name}");
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        // The copy lives elsewhere: the sample's path is made absolute, the
        // state folder is the test's own.
        let copy = with_built_plugins(recipe, tmp.path());
        let text = std::fs::read_to_string(&copy)
            .unwrap_or_default()
            .replace("../../data/json/*.ndjson", &workspace_root().join("data/json/*.ndjson").display().to_string());
        std::fs::write(&copy, text).unwrap_or_else(|e| panic!("{e}"));
        let out = sluice(&["check", "-c", &copy.display().to_string()])
            .env("SLUICE__PIPELINE__STATE_DIR", tmp.path().join("state"))
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "sluice check {name}:\n{said}");
        assert!(said.contains("is valid") && said.contains("plugin: json@"), "{name}: {said}");
        println!("recipe {name}: sluice check passes");
    }
}

#[test]
fn a_wrong_expectation_fails_its_case_naming_the_record_and_what_it_became() {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = tmp.path();
    // One record per batch: a repeat in a later batch is caught by the
    // window, not by the batch's own look-up.
    std::fs::write(
        dir.join("sluice.toml"),
        format!(
            "[pipeline]\nname = \"t\"\nstate_dir = \"state\"\nbatch_size = 1\n[source]\ntype = \"file\"\npaths = [\"*.log\"]\n\
             [sink]\ntype = \"stdout\"\n{}",
            sluice_e2e::json_chain_toml(true, Some("1h"))
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let cases = dir.join("cases");
    std::fs::create_dir_all(&cases).unwrap_or_else(|e| panic!("{e}"));
    let line = |id: &str, ts: &str| format!("{{\"event_id\":\"{id}\",\"ts\":\"{ts}\",\"n\":1}}");
    let write = |name: &str, case: serde_json::Value| {
        std::fs::write(cases.join(name), case.to_string()).unwrap_or_else(|e| panic!("{e}"));
    };
    write(
        "01-right.json",
        serde_json::json!({
            "now": "2026-12-01T12:00:00Z",
            "input": [line("a", "2026-12-01T11:30:00Z"), line("a", "2026-12-01T11:30:00Z"), line("b", "2026-12-01T10:00:00Z")],
            "expect": [{"event": {"id": "a", "timestamp": "2026-12-01T11:30:00Z", "fields": {"n": 1}}}, "duplicate",
                       {"quarantine": "older than max_age 1h"}]
        }),
    );
    // The same records, but two expectations wrong: both are named.
    write(
        "02-wrong.json",
        serde_json::json!({
            "now": "2026-12-01T12:00:00Z",
            "input": [line("a", "2026-12-01T11:30:00Z"), line("a", "2026-12-01T11:30:00Z"), line("b", "2026-12-01T10:00:00Z")],
            "expect": [{"event": {"id": "a", "fields": {"n": 2}}}, {"event": {}}, {"quarantine": "older than max_age 1h"}]
        }),
    );
    let (code, out, err) = sluice_test(&dir.join("sluice.toml"), &cases);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("ok    01-right"), "{out}");
    assert!(out.contains("FAIL  02-wrong: input 0: field \"n\" is 1, expected 2"), "{out}");
    assert!(out.contains("\n      input 1: expected one event, got a duplicate"), "{out}");
    assert!(!out.contains("input 2:"), "the right expectation passes: {out}");
    assert!(out.contains("2 cases, 1 passed, 1 failed"), "{out}");
    // A case file with a key the format does not have: exit 2, named.
    write("03-typo.json", serde_json::json!({"input": [], "expect": [], "nwo": "x"}));
    let (code, out, err) = sluice_test(&dir.join("sluice.toml"), &cases);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("03-typo.json") && err.contains("nwo"), "{err}");
}

/// Issue 44: a case says where each record's events go when the config has
/// several sinks; a wrong expectation names both.
#[test]
fn a_case_that_expects_the_wrong_sinks_fails_naming_where_the_events_went() {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = with_built_plugins(&workspace_root().join("examples/fanout/sluice.toml"), tmp.path());
    let cases = tmp.path().join("cases");
    std::fs::create_dir_all(&cases).unwrap_or_else(|e| panic!("{e}"));
    let case = serde_json::json!({
        "input": ["[Sun Dec 04 04:47:44 2005] [error] mod_jk child workerEnv in error state 6"],
        "expect": [{"event": {"fields": {"Level": "error"}}}],
        "sinks": [["archive"]]
    });
    std::fs::write(cases.join("01-wrong-sinks.json"), case.to_string()).unwrap_or_else(|e| panic!("{e}"));
    let (code, out, err) = sluice_test(&config, &cases);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("FAIL  01-wrong-sinks: input 0: expected its events at archive, got them at index, archive"),
        "{out}"
    );
}

/// Issue 44: a plugin names the sinks an event goes to (the conformance
/// plugin's `route:`), over the config's routes; an event that names none
/// follows the routes; one that names a sink the config does not have
/// sends its record to the quarantine, naming the sink, and reaches none.
#[test]
fn a_plugin_route_overrides_the_config_routes_and_an_unknown_sink_is_quarantined() {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let conformance = build_wasm(&["sluice-plugin-conformance"]).join("sluice_plugin_conformance.wasm");
    let config = tmp.path().join("sluice.toml");
    let text = format!(
        r#"
[pipeline]
name = "plugin-routes"
state_dir = "{state}"

[source]
type = "file"
paths = ["{input}"]

[[plugins]]
name = "conformance"
path = "{plugin}"

[[sinks]]
name = "index"
type = "file"
path = "{index}"

[[sinks]]
name = "archive"
type = "file"
path = "{archive}"

# Events no plugin routes: the index alone.
[[routes]]
sinks = ["index"]
"#,
        state = tmp.path().join("state").display(),
        input = tmp.path().join("in.log").display(),
        plugin = conformance.display(),
        index = tmp.path().join("index.ndjson").display(),
        archive = tmp.path().join("archive.ndjson").display(),
    );
    std::fs::write(&config, text).unwrap_or_else(|e| panic!("{e}"));
    let cases = tmp.path().join("cases");
    std::fs::create_dir_all(&cases).unwrap_or_else(|e| panic!("{e}"));
    let case = serde_json::json!({
        "input": ["route:archive", "plain", "route:index,archive", "route:nowhere"],
        "expect": [
            {"event": {"body": {"route": "archive"}}},
            {"event": {"fields": {"len": 5}}},
            {"event": {"body": {"route": "index,archive"}}},
            {"quarantine": "a plugin routed the event to sink \"nowhere\"; the sinks are index, archive"}
        ],
        "sinks": [["archive"], ["index"], ["index", "archive"], []]
    });
    std::fs::write(cases.join("01-plugin-routes.json"), case.to_string()).unwrap_or_else(|e| panic!("{e}"));
    let (code, out, err) = sluice_test(&config, &cases);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("ok    01-plugin-routes"), "{out}");
    // And the same case expecting the rule's sink for a routed event fails.
    let wrong = serde_json::json!({
        "input": ["route:archive"],
        "expect": [{"event": {"body": {"route": "archive"}}}],
        "sinks": [["index"]]
    });
    std::fs::write(cases.join("01-plugin-routes.json"), wrong.to_string()).unwrap_or_else(|e| panic!("{e}"));
    let (code, out, err) = sluice_test(&config, &cases);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("expected its events at index, got them at archive"), "{out}");
}
