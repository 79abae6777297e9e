//! One WIT world, four languages. Each plugin is built with its language's
//! own tool chain and run through the host:
//!
//! - the conformance plugin (conformance/SPEC.md) in Rust, Python,
//!   JavaScript and C passes the kit (`conformance/cases`), and so does the
//!   Rust one built against contract 0.1;
//! - every first-party plugin passes its own cases;
//! - the logfmt example in all four languages passes its cases, and the
//!   Python, JavaScript and C ones run in a whole pipeline;
//! - `sluice plugin new` projects build and pass their cases, for all four;
//! - the native helpers (`sluice:plugin/helpers`) answer the same through
//!   the Python, JavaScript and C SDKs (`conformance/helpers`), bounding each
//!   attack, and the logfmt example rebuilt on them passes its cases;
//! - the Axiom classifier (`wit/classifier.wit`) in all four languages
//!   reads `conformance/responses/axiom` as recorded, and a classifier
//!   that reads it wrong fails it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sluice_e2e::languages::{
    build_c, build_c_world, build_js, build_js_world, build_python, build_python_world, c_tools, componentize_js,
    componentize_py,
};
use sluice_e2e::{build_wasm, plugin, plugin_v01, sluice_bin, workspace_root};

fn sluice(args: &[&str], dir: &Path) -> (bool, String) {
    let out = Command::new(sluice_bin!())
        .args(args)
        .current_dir(dir)
        .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// `sluice plugin test`, which must pass every case; prints its verdicts.
/// The kit checks the mapping of the contract, not speed: an interpreted
/// plugin summing a 1 MiB payload takes seconds of the default 5 s on a
/// loaded machine, so the suite gives each batch 30 s.
fn passes(wasm: &Path, cases: &Path) -> String {
    let (ok, text) = sluice(
        &[
            "plugin",
            "test",
            &wasm.display().to_string(),
            "--cases",
            &cases.display().to_string(),
            "--time-limit",
            "30s",
        ],
        &workspace_root(),
    );
    println!("{text}");
    assert!(ok, "{} fails {}:\n{text}", wasm.display(), cases.display());
    assert!(text.contains(" 0 failed"), "{text}");
    text
}

fn root() -> PathBuf {
    workspace_root()
}

#[test]
fn the_conformance_plugin_passes_the_kit_in_rust_python_javascript_and_c() {
    let out = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let rust = build_wasm(&["sluice-plugin-conformance"]).join("sluice_plugin_conformance.wasm");
    let py = out.path().join("conformance-py.wasm");
    build_python(&[], "conformance", &py);
    let js = out.path().join("conformance-js.wasm");
    build_js(&root().join("guest-sdk/js/conformance.js"), &js);
    let c = out.path().join("conformance-c.wasm");
    build_c(&root().join("guest-sdk/c/conformance.c"), &c);
    // The same Rust code built against 0.1: the host still runs it.
    let rust_v01 = plugin_v01("conformance");
    for wasm in [&rust, &py, &js, &c] {
        let text = passes(wasm, &root().join("conformance/cases"));
        // Every 0.2 SDK routes (issue 44): the case is run, not skipped.
        assert!(text.contains("ok    13-route"), "{} did not run the route case:\n{text}", wasm.display());
    }
    // 0.1 cannot say where an event goes: that case is not asked of it,
    // and the run says so.
    let text = passes(&rust_v01, &root().join("conformance/cases"));
    assert!(text.contains("skip  13-route: needs contract 0.2.0, the plugin targets 0.1.0"), "{text}");
}

/// A Python build's first load compiles for seconds: it is said (in the
/// log when stderr is not a terminal), with where the result is kept, and
/// a second load from the cache says nothing. `plugin cache` shows the
/// cache and prunes it.
#[test]
fn a_slow_first_compile_is_said_and_the_cache_can_be_shown_and_pruned() {
    let out = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let py = out.path().join("conformance-py.wasm");
    build_python(&[], "conformance", &py);
    let cache = out.path().join("cache");
    let sluice_here = |args: &[&str]| {
        let o = Command::new(sluice_bin!())
            .args(args)
            .env("SLUICE_PLUGIN_CACHE", &cache)
            .env("SLUICE_LOG", "info")
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let inspect = ["plugin", "run", "--quiet", "--plugin", py.to_str().unwrap_or_default(), "--input", "/dev/null"];
    let (_, first) = sluice_here(&inspect);
    assert!(first.contains("compiling plugin") && first.contains(&format!("cached in {}", cache.display())), "{first}");
    assert!(first.contains("compiled plugin") && first.contains(" s"), "{first}");
    let (_, second) = sluice_here(&inspect);
    assert!(!second.contains("compiling plugin"), "from the cache, silently: {second}");
    let (shown, _) = sluice_here(&["plugin", "cache"]);
    assert!(shown.contains("1 compiled plugins"), "{shown}");
    let (pruned, _) = sluice_here(&["plugin", "cache", "prune"]);
    assert!(pruned.contains("removed 1 compiled plugins") && pruned.contains("0 kept"), "{pruned}");
    let (shown, _) = sluice_here(&["plugin", "cache"]);
    assert!(shown.contains("0 compiled plugins"), "{shown}");
}

#[test]
fn a_python_or_javascript_value_that_is_not_an_outcome_rejects_only_its_record() {
    let out = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = root().join("tests/plugins");
    let py = out.path().join("bad-py.wasm");
    build_python(&[&dir], "bad_returns", &py);
    let js = out.path().join("bad-js.wasm");
    build_js(&dir.join("bad_returns.js"), &js);
    for wasm in [&py, &js] {
        passes(wasm, &dir.join("bad-returns-cases"));
    }
}

#[test]
fn a_wrong_port_fails_the_kit_and_the_verdict_names_the_case() {
    // The kit must be able to fail: the logfmt plugin is not the
    // conformance plugin.
    let wasm = build_wasm(&["sluice-example-logfmt"]).join("sluice_example_logfmt.wasm");
    let (ok, text) = sluice(
        &[
            "plugin",
            "test",
            &wasm.display().to_string(),
            "--cases",
            &root().join("conformance/cases").display().to_string(),
        ],
        &root(),
    );
    assert!(!ok, "{text}");
    assert!(text.contains("FAIL  02-batch-of-one: record 0:"), "{text}");
    assert!(text.contains("ok    01-empty-batch"), "an empty batch is the one thing any plugin gets right: {text}");
}

#[test]
fn every_first_party_plugin_passes_its_own_cases() {
    for name in ["json", "pattern", "ts-window"] {
        passes(&plugin(name), &root().join("plugins").join(name).join("cases"));
        passes(&plugin_v01(name), &root().join("plugins").join(name).join("cases"));
    }
}

#[test]
fn logfmt_in_four_languages_passes_the_same_cases_and_runs_in_a_pipeline() {
    let out = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = root().join("examples/plugins/logfmt");
    let rust = build_wasm(&["sluice-example-logfmt"]).join("sluice_example_logfmt.wasm");
    let py = out.path().join("logfmt-py.wasm");
    build_python(&[&dir.join("python")], "logfmt", &py);
    let js = out.path().join("logfmt-js.wasm");
    build_js(&dir.join("js/logfmt.js"), &js);
    let c = out.path().join("logfmt-c.wasm");
    build_c(&dir.join("c/logfmt.c"), &c);
    for wasm in [&rust, &py, &js, &c] {
        passes(wasm, &dir.join("cases"));
        println!("{}: {} bytes", wasm.display(), std::fs::metadata(wasm).map(|m| m.len()).unwrap_or(0));
    }

    // A whole pipeline: files → logfmt (Python, JavaScript, C) → file sink.
    for (lang, wasm) in [("python", &py), ("js", &js), ("c", &c)] {
        logfmt_pipeline_delivers_every_id(lang, wasm);
    }
}

/// files → a logfmt plugin → file sink: 500 lines in batches as the file
/// source cuts them, two blank lines dropped and one without a pair
/// quarantined; every id delivered once, in order, each with its own
/// line's pairs (a per-batch answer handed to the wrong record would show
/// here as a wrong id).
fn logfmt_pipeline_delivers_every_id(lang: &str, wasm: &Path) {
    let lines: String =
        (0..500).map(|i| format!("req=r-{i} level=info msg=\"hello {i}\"\n")).collect::<String>() + "\n\n=oops\n";
    let work = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(work.path().join("in.log"), &lines).unwrap_or_else(|e| panic!("{e}"));
    let cfg = format!(
        "[pipeline]\nname = \"logfmt-{lang}\"\nstate_dir = \"state\"\n[source]\ntype = \"file\"\npaths = [\"in.log\"]\n\
         [[plugins]]\nname = \"logfmt\"\npath = \"{}\"\nconfig = {{ id_field = \"req\" }}\n[sink]\ntype = \"file\"\npath = \"out.ndjson\"\n",
        wasm.display()
    );
    std::fs::write(work.path().join("sluice.toml"), cfg).unwrap_or_else(|e| panic!("{e}"));
    let (ok, text) = sluice(&["run", "-c", "sluice.toml", "--summary", "json"], work.path());
    assert!(ok, "{lang}: {text}");
    let out = std::fs::read_to_string(work.path().join("out.ndjson")).unwrap_or_default();
    let ids: Vec<String> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| {
            let id = v["id"].as_str().unwrap_or_default().to_string();
            assert_eq!(v["event"]["level"], "info");
            assert_eq!(v["event"]["req"].as_str(), Some(id.as_str()), "{lang}: the event is its own line's");
            assert_eq!(
                v["event"]["msg"].as_str(),
                Some(format!("hello {}", id.strip_prefix("r-").unwrap_or_default()).as_str())
            );
            id
        })
        .collect();
    let want: Vec<String> = (0..500).map(|i| format!("r-{i}")).collect();
    assert_eq!(ids, want, "{lang}: every id, in order, once");
    assert!(
        text.contains("\"dropped\":2") && text.contains("\"quarantined\":1"),
        "{lang}: two blank lines dropped, one line quarantined: {text}"
    );
}

/// A kit's `<name>_demo.py`, `.js` and `.c` built into `out`, in that order.
fn build_demo_in_three(kit: &Path, name: &str, out: &Path) -> [PathBuf; 3] {
    let built =
        [out.join(format!("{name}-py.wasm")), out.join(format!("{name}-js.wasm")), out.join(format!("{name}-c.wasm"))];
    build_python(&[kit], &format!("{name}_demo"), &built[0]);
    build_js(&kit.join(format!("{name}_demo.js")), &built[1]);
    build_c(&kit.join(format!("{name}_demo.c")), &built[2]);
    built
}

/// Issue 24, item 1: the helpers kit in Python, JavaScript and C, each
/// attack of its last case bounded (within the batch's time limit, none a
/// fault), and the idiomatic logfmt on the helpers passing the same cases
/// as the pure one.
#[test]
fn the_native_helpers_answer_alike_in_python_javascript_and_c_and_bound_each_attack() {
    let out = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let kit = root().join("conformance/helpers");
    let [py, js, c] = build_demo_in_three(&kit, "helpers", out.path());
    let logfmt = root().join("examples/plugins/logfmt");
    let logfmt_py = out.path().join("logfmt-helpers-py.wasm");
    build_python(&[&logfmt.join("python")], "logfmt_helpers", &logfmt_py);
    let logfmt_js = out.path().join("logfmt-helpers-js.wasm");
    build_js(&logfmt.join("js/logfmt_helpers.js"), &logfmt_js);
    for wasm in [&py, &js, &c] {
        passes(wasm, &kit.join("cases"));
    }
    for (lang, wasm) in [("python on the helpers", &logfmt_py), ("js on the helpers", &logfmt_js)] {
        passes(wasm, &logfmt.join("cases"));
        // Answered per batch (logfmt-batch): each record its own line's.
        logfmt_pipeline_delivers_every_id(lang, wasm);
    }
    // A plugin that does not import the helpers loads as before: the Rust
    // logfmt does not, the Python one on them does.
    let imports = |wasm: &Path| sluice(&["plugin", "inspect", &wasm.display().to_string()], &root()).1;
    let rust = build_wasm(&["sluice-example-logfmt"]).join("sluice_example_logfmt.wasm");
    assert!(!imports(&rust).contains("sluice:plugin/helpers"), "{}", imports(&rust));
    assert!(imports(&logfmt_py).contains("sluice:plugin/helpers@0.2.0"), "{}", imports(&logfmt_py));
}

/// Issue 42: the helpers run in a plugin's unit tests, outside the
/// component, and answer as the host does: the Python and JavaScript
/// helpers demos, run natively (`conformance/helpers/native_cases.*`),
/// pass the kit's cases through `sluice plugin helpers`, the host's own
/// code; and a case whose expectation is wrong fails there, naming what
/// differs. (Case 04's bounds are a component instance's.)
#[test]
fn the_helpers_run_natively_in_python_and_node_and_answer_as_the_host() {
    let kit = root().join("conformance/helpers");
    let cases: Vec<PathBuf> =
        ["01-every-helper", "02-utc-without-a-zone", "03-unknown-zone", "05-a-batch-split-line-by-line"]
            .iter()
            .map(|c| kit.join("cases").join(format!("{c}.json")))
            .collect();
    let work = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // Case 02 with the wrong hour: the runner must see it.
    let wrong = work.path().join("02-wrong-hour.json");
    let text = std::fs::read_to_string(&cases[1]).unwrap_or_else(|e| panic!("{e}"));
    assert!(text.contains("\"2024-07-01T12:00:00Z\""), "{text}");
    std::fs::write(&wrong, text.replacen("\"2024-07-01T12:00:00Z\"", "\"2024-07-01T13:00:00Z\"", 1))
        .unwrap_or_else(|e| panic!("{e}"));
    let python = componentize_py().with_file_name("python3");
    let native = root().join("guest-sdk/js/sluice-native.mjs");
    let runners: [(&str, Command); 2] = [
        ("python", {
            let mut c = Command::new(&python);
            c.arg(kit.join("native_cases.py"));
            c
        }),
        ("node", {
            let mut c = Command::new("node");
            c.arg("--import").arg(&native).arg(kit.join("native_cases.mjs"));
            c
        }),
    ];
    for (lang, mut runner) in runners {
        let out = runner
            .args(&cases)
            .arg(&wrong)
            .env("SLUICE", sluice_bin!())
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap_or_else(|e| panic!("{lang}: {e}"));
        let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        println!("{lang}:\n{said}");
        for case in ["01-every-helper", "02-utc-without-a-zone", "03-unknown-zone", "05-a-batch-split-line-by-line"] {
            assert!(said.contains(&format!("ok   {case}.json")), "{lang}: {case}\n{said}");
        }
        assert!(
            said.contains("FAIL 02-wrong-hour.json")
                && said.contains("want 2024-07-01T13:00:00Z, got 2024-07-01T12:00:00Z"),
            "{lang}: the wrong case passed\n{said}"
        );
        assert_eq!(out.status.code(), Some(1), "{lang}\n{said}");
    }
    // Without sluice to ask, a time format says what to do, by name.
    let out = Command::new(&python)
        .arg(kit.join("native_cases.py"))
        .arg(&cases[1])
        .env_remove("SLUICE")
        .env("PATH", "/nonexistent")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("put `sluice` on the PATH, or set SLUICE"), "{said}");
}

/// Issue 42: `Patterns.match` takes a record's payload as it comes (bytes in
/// Python, a Uint8Array in JavaScript) and reads it as UTF-8; in Python any
/// other value rejects its record with a reason naming the plugin's line,
/// instead of trapping the instance on every record.
#[test]
fn patterns_match_a_payload_as_it_comes_and_refuse_a_wrong_type_by_its_line() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.path().join("bytes_patterns.py"),
        "from sluice_plugin import Patterns, Plugin, emit, export\n\n\n\
         class P(Plugin):\n    config_keys = set()\n\n\
         \x20   def setup(self, config):\n        self.p = Patterns([\"^%{INT:pid} %{GREEDYDATA:msg}$\"])\n\n\
         \x20   def process(self, record):\n        if bytes(record.payload) == b\"int\":\n\
         \x20           return emit({\"m\": self.p.match({})})\n\
         \x20       m = self.p.match(record.payload)\n\
         \x20       return emit({\"m\": None if m is None else m[1]})\n\n\n\
         WitWorld = export(P)\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.path().join("bytes_patterns.js"),
        "import { Patterns, Plugin, emit, exportPlugin } from \"./sluice-plugin.js\";\n\
         class P extends Plugin {\n\
         \x20 setup() { this.p = new Patterns([\"^%{INT:pid} %{GREEDYDATA:msg}$\"]); }\n\
         \x20 process(record) {\n    const m = this.p.match(record.payload);\n\
         \x20   return emit({ m: m === null ? null : m.captures });\n  }\n}\n\
         export const { init, process } = exportPlugin(P);\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let py = dir.path().join("py.wasm");
    build_python(&[dir.path()], "bytes_patterns", &py);
    let js = dir.path().join("js.wasm");
    build_js(&dir.path().join("bytes_patterns.js"), &js);
    let run = plugin_run_text;
    for (lang, wasm) in [("python", &py), ("js", &js)] {
        let said = run(wasm, "12 hello world\n");
        assert!(
            said.contains(r#""outcome":"emit""#) && said.contains(r#""12""#) && said.contains("hello world"),
            "{lang}: {said}"
        );
    }
    let said = run(&py, "int\n12 after\n");
    let lines: Vec<&str> = said.lines().filter(|l| l.starts_with("{\"line\"")).collect();
    assert_eq!(lines.len(), 2, "{said}");
    assert!(said.contains(r#""rebuilds":0"#), "no trap, no instance rebuilt: {said}");
    assert!(
        lines[0].contains(r#""outcome":"reject""#)
            && lines[0].contains("TypeError: Patterns.match takes str or bytes")
            && lines[0].contains("(line 12 of bytes_patterns.py)"),
        "{said}"
    );
    assert!(lines[1].contains(r#""pid":"12""#), "the next record is matched by the same instance: {said}");
}

/// A new project's own `build.sh`, with the suite's tool chains instead
/// of installs of its own; the Rust build shares `target`.
fn build_project(lang: &str, project: &Path, target: &Path) {
    let out = Command::new(project.join("build.sh"))
        .current_dir(project)
        .env("CARGO_TARGET_DIR", target)
        .env("COMPONENTIZE_PY", componentize_py())
        .env("COMPONENTIZE_JS", componentize_js())
        .env("WIT_BINDGEN", c_tools().0)
        .env("WASM_TOOLS", c_tools().1)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success(), "{lang} build.sh:\n{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn new_projects_build_and_pass_their_cases_in_three_commands() {
    let work = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // Tool chains from scripts/setup, shared instead of installed per project;
    // the Rust build shares the suite's (persistent) target folder.
    let target = sluice_e2e::target_dir().join("scaffold");
    for (lang, wasm) in [
        ("rust", target.join("wasm32-wasip2/release/demo_rust.wasm")),
        ("python", work.path().join("demo-python/demo_python.wasm")),
        ("js", work.path().join("demo-js/demo_js.wasm")),
        ("c", work.path().join("demo-c/demo_c.wasm")),
    ] {
        let name = format!("demo-{lang}");
        // 1. new
        let (ok, text) = sluice(&["plugin", "new", "--lang", lang, &name], work.path());
        assert!(ok, "{text}");
        // The steps it prints work in order: after the cd, the project's
        // own paths.
        assert!(text.contains(&format!("  cd {name}\n  ./build.sh\n")), "{text}");
        let wasm_name = wasm.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        let wasm_in_project =
            if lang == "rust" { format!("target/wasm32-wasip2/release/{wasm_name}") } else { wasm_name };
        assert!(text.contains(&format!("  sluice plugin test {wasm_in_project} --cases cases")), "{text}");
        // 2. build
        let project = work.path().join(&name);
        if lang == "c" {
            // Without its tools, the build names each and how to get it.
            let out = Command::new(project.join("build.sh"))
                .current_dir(&project)
                .env("WIT_BINDGEN", work.path().join("no-such-wit-bindgen"))
                .env("WASM_TOOLS", c_tools().1)
                .output()
                .unwrap_or_else(|e| panic!("{e}"));
            let said = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success() && said.contains("cargo install --locked wit-bindgen-cli@"), "{said}");
        }
        build_project(lang, &project, &target);
        // 3. test
        passes(&wasm, &project.join("cases"));
        // A key the plugin does not read stops the start, named (Python
        // and JavaScript list theirs in the template, as Rust's serde does).
        if lang == "python" || lang == "js" {
            let config = work.path().join(format!("{name}-typo.toml"));
            std::fs::write(&config, "feild = \"x\"\n").unwrap_or_else(|e| panic!("{e}"));
            let out = Command::new(sluice_bin!())
                .args(["plugin", "run", "--plugin", &wasm.display().to_string(), "--config"])
                .arg(&config)
                .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
                .stdin(Stdio::null())
                .output()
                .unwrap_or_else(|e| panic!("{e}"));
            let said = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success() && said.contains("unknown config key 'feild'"), "{lang}: {said}");
        }
        // A Python project's unit tests run in plain Python, without the
        // component's bindings.
        if lang == "python" {
            let python = componentize_py().with_file_name("python3");
            let out = Command::new(&python)
                .args(["-m", "unittest", "-v", "test_demo_python"])
                .current_dir(&project)
                // The host's own rules judge each outcome.
                .env("SLUICE", sluice_bin!())
                .output()
                .unwrap_or_else(|e| panic!("{}: {e}", python.display()));
            let said = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success() && said.contains("Ran 3 tests"), "python unit tests:\n{said}");
        }
        // A JavaScript project's unit tests run in Node, the host's
        // helpers answered by sluice itself.
        if lang == "js" {
            assert!(text.contains("node --import ./sluice-native.mjs test.mjs"), "{text}");
            let out = Command::new("node")
                .args(["--import", "./sluice-native.mjs", "test.mjs"])
                .current_dir(&project)
                .env("SLUICE", sluice_bin!())
                .output()
                .unwrap_or_else(|e| panic!("node: {e}"));
            let said = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && said.contains("# pass 3") && said.contains("# fail 0"),
                "js unit tests:\n{said}{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // A Rust project's unit tests run natively, as its steps say.
        if lang == "rust" {
            // It came locked, and built with the versions sluice locks:
            // every package of its lock after the build is one of sluice's.
            let packages = |lock: &str| -> Vec<(String, String)> {
                lock.split("[[package]]")
                    .skip(1)
                    .map(|p| {
                        let field = |k: &str| {
                            p.lines()
                                .find_map(|l| l.strip_prefix(&format!("{k} = \"")))
                                .unwrap_or("")
                                .trim_end_matches('"')
                        };
                        (field("name").to_string(), field("version").to_string())
                    })
                    .collect()
            };
            let built = std::fs::read_to_string(project.join("Cargo.lock")).unwrap_or_else(|e| panic!("{e}"));
            let ours = packages(&std::fs::read_to_string(root().join("Cargo.lock")).unwrap_or_else(|e| panic!("{e}")));
            let theirs = packages(&built);
            assert!(theirs.iter().any(|(n, _)| n == "wit-bindgen"), "{built}");
            for p in theirs.iter().filter(|(n, _)| n != &name) {
                assert!(ours.contains(p), "{p:?} in the project's lock is not what sluice locks");
            }
            assert!(text.contains("cargo test"), "{text}");
            let out = Command::new("cargo")
                .args(["test", "--quiet"])
                .current_dir(&project)
                .env("CARGO_TARGET_DIR", target.join("native"))
                .output()
                .unwrap_or_else(|e| panic!("cargo: {e}"));
            let said = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && said.contains("2 passed"),
                "rust unit tests:\n{said}{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// `sluice sink classify --plugin`: the reading of each case, and whether
/// all came as recorded.
fn classify(wasm: &Path, config: Option<&str>, cases: &Path) -> (bool, String) {
    let (w, c) = (wasm.display().to_string(), cases.display().to_string());
    let mut args = vec!["sink", "classify", "--plugin", &w];
    if let Some(config) = config {
        args.extend(["--plugin-config", config]);
    }
    args.push(&c);
    sluice(&args, &root())
}

#[test]
fn the_axiom_classifier_reads_its_corpus_alike_in_rust_python_javascript_and_c() {
    let work = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let example = root().join("examples/classifiers/axiom");
    let corpus = root().join("conformance/responses/axiom");
    let rust = build_wasm(&["sluice-classifier-axiom"]).join("sluice_classifier_axiom.wasm");
    let python = work.path().join("axiom-py.wasm");
    build_python_world(&[&example.join("python")], "axiom", &python, "classifier");
    let js = work.path().join("axiom-js.wasm");
    build_js_world(&example.join("js/axiom.js"), &js, "classifier");
    let c = work.path().join("axiom-c.wasm");
    build_c_world(&example.join("c/axiom.c"), &c, "classifier");
    let cases = std::fs::read_dir(&corpus).map(|d| d.count()).unwrap_or(0);
    assert!(cases >= 10, "the axiom corpus has {cases} cases");
    for (lang, wasm) in [("rust", &rust), ("python", &python), ("js", &js), ("c", &c)] {
        let (ok, text) = classify(wasm, None, &corpus);
        println!("{lang}:\n{text}");
        assert!(ok && text.contains("every case as expected"), "{lang}:\n{text}");
        assert_eq!(text.lines().filter(|l| l.starts_with("ok ")).count(), cases, "{lang}: every case read");
        // `plugin inspect` says which world the file is.
        let (ok, inspected) = sluice(&["plugin", "inspect", &wasm.display().to_string()], &root());
        assert!(ok && inspected.contains("classifier"), "{lang}: {inspected}");
    }
    // The corpus can fail: a classifier that blames every record is
    // caught by the cases that expect acceptance, and the run fails.
    let hostile = build_wasm(&["sluice-classifier-hostile"]).join("sluice_classifier_hostile.wasm");
    let (ok, text) = classify(&hostile, Some(r#"{"mode":"reject-all"}"#), &corpus);
    assert!(!ok && text.contains("FAIL") && text.contains("01-all-ingested"), "{text}");
    // A classifier is not a parse plugin: named under [[plugins]] it is
    // refused at load, saying where it belongs.
    let logfmt_cases = root().join("examples/plugins/logfmt/cases");
    let (ok, text) = sluice(
        &["plugin", "test", &rust.display().to_string(), "--cases", &logfmt_cases.display().to_string()],
        &root(),
    );
    assert!(!ok && text.contains("[sink.classifier]"), "{text}");
}

#[test]
fn new_classifier_projects_build_and_pass_their_answer_cases_in_three_commands() {
    let work = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let target = sluice_e2e::target_dir().join("scaffold");
    for (lang, wasm) in [
        ("rust", target.join("wasm32-wasip2/release/answers_rust.wasm")),
        ("python", work.path().join("answers-python/answers_python.wasm")),
        ("js", work.path().join("answers-js/answers_js.wasm")),
        ("c", work.path().join("answers-c/answers_c.wasm")),
    ] {
        let name = format!("answers-{lang}");
        // 1. new
        let (ok, text) = sluice(&["plugin", "new", "--kind", "classifier", "--lang", lang, &name], work.path());
        assert!(ok, "{text}");
        assert!(text.contains(&format!("  cd {name}\n  ./build.sh\n")), "{text}");
        let project = work.path().join(&name);
        assert!(project.join("wit/classifier.wit").is_file() && project.join("cases").is_dir());
        // 2. build
        build_project(lang, &project, &target);
        // 3. its answer cases, through the host
        let (ok, text) = classify(&wasm, None, &project.join("cases"));
        println!("{lang}:\n{text}");
        assert!(ok && text.contains("every case as expected"), "{lang}:\n{text}");
        assert_eq!(text.lines().filter(|l| l.starts_with("ok ")).count(), 3, "{lang}");
    }
}

/// What `sluice plugin run` of `wasm` says over `input`: the records'
/// answers (stdout), then the summary and log (stderr).
fn plugin_run_text(wasm: &Path, input: &str) -> String {
    let mut child = Command::new(sluice_bin!())
        .args(["plugin", "run", "--plugin", &wasm.display().to_string()])
        .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    if let Some(mut stdin) = child.stdin.take() {
        std::io::Write::write_all(&mut stdin, input.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    }
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// [`plugin_run_text`] of `lines`: each line's JSON answer, and the run's
/// summary.
fn plugin_run(wasm: &Path, lines: &[&str]) -> (Vec<serde_json::Value>, serde_json::Value) {
    let text = plugin_run_text(wasm, &(lines.join("\n") + "\n"));
    let answers: Vec<serde_json::Value> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let summary = answers.iter().find(|a| a.get("summary").is_some()).cloned().unwrap_or_default();
    let records = answers.into_iter().filter(|a| a.get("line").is_some()).collect();
    (records, summary)
}

/// Issue 56, item 1: every helper of every SDK, given what an author is
/// likely to pass by mistake (`conformance/mistakes/`), either takes it
/// (bytes where text is natural, a number where digits are) or rejects
/// that one record with the language's own error, named at the author's
/// line in Python and JavaScript; none traps the instance (no rebuild, no
/// faulted record), so the next record is served by the same instance.
/// Before, Python's `TimeFormat.parse(record.payload)` trapped on every
/// record.
#[test]
fn every_helper_given_a_likely_mistake_rejects_only_its_record_and_never_traps_in_four_languages() {
    let out = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let kit = root().join("conformance/mistakes");
    let [py, js, c] = build_demo_in_three(&kit, "mistakes", out.path());
    let rust = build_wasm(&["sluice-mistakes-demo"]).join("sluice_mistakes_demo.wasm");

    // Each language's mistakes (`ok-…` are natural types, taken), and
    // what its rejections must say: the error's kind and the author's line
    // where the language has lines to name.
    let python = [
        "time-format-int",
        "time-parse-none",
        "time-parse-float",
        "time-parse-list",
        "patterns-int",
        "patterns-item-int",
        "match-none",
        "match-dict",
        "logfmt-int",
        "logfmt-none",
        "json-get-int",
        "json-get-path-int",
        "json-check-none",
        "rfc3339-text",
        "rfc3339-huge",
        "rfc3339-none",
        "emit-int-body",
        "emit-float-timestamp",
        "schema-none",
        "schema-text",
        "schema-negative",
        "schema-unfetched",
        "framed-none",
        "schema-references-text",
        "ok-time-parse-bytes",
        "ok-time-parse-payload 2017-05-16",
        "ok-match-payload",
        "ok-json-get-list",
        "ok-rfc3339-digits",
        "ok-info-int",
        "ok-now",
        "ok-emit-int-id",
        "ok-framed-payload",
        "ok-framed-bytes",
    ];
    let javascript = [
        "time-format-int",
        "time-parse-null",
        "time-parse-object",
        "time-parse-array",
        "patterns-int",
        "patterns-item-int",
        "match-null",
        "match-object",
        "logfmt-int",
        "logfmt-null",
        "json-get-int",
        "json-get-path-int",
        "json-check-null",
        "rfc3339-text",
        "rfc3339-huge",
        "rfc3339-fraction",
        "rfc3339-null",
        "emit-fraction-timestamp",
        "schema-null",
        "schema-string",
        "schema-fraction",
        "schema-negative",
        "framed-null",
        "schema-references-string",
        "ok-time-parse-bytes",
        "ok-time-parse-payload 2017-05-16",
        "ok-match-payload",
        "ok-json-get-array",
        "ok-rfc3339-number",
        "ok-info-number",
        "ok-now",
        "ok-emit-number-id",
        "ok-framed-payload",
        "ok-framed-bytes",
    ];
    let c_mistakes = [
        "parse-never-compiled",
        "parse-freed",
        "parse-null-text",
        "parse-null-nanos",
        "compile-null",
        "patterns-null",
        "patterns-item-null",
        "json-get-null-path",
        "reject-null",
        "emit-null",
        "schema-null-text",
        "schema-references-null-each",
        "schema-unfetched",
        "ok-parse-not-utf8",
        "ok-compile-not-utf8",
        "ok-match-not-utf8",
        "ok-match-never-compiled",
        "ok-logfmt-null-callback",
        "ok-logfmt-null-line",
        "ok-log-not-utf8",
        "ok-rfc3339-extreme",
        "ok-framed-null-body",
        "ok-framed-payload",
        "ok-framed-bytes",
    ];
    let rust_mistakes = [
        "parse-not-utf8",
        "format-nonsense",
        "year-zero",
        "zone-nonsense",
        "duration-negative",
        "text-not-utf8",
        "object-not-object",
        "id-empty",
        "ok-parse-now-extreme",
        "ok-rfc3339-extreme",
        "ok-parse-epoch-huge",
        "ok-path-odd",
    ];
    /// A language, its plugin, the mistakes it demonstrates, and what its
    /// reasons look like.
    type Run<'a> = (&'a str, &'a Path, &'a [&'a str], &'a dyn Fn(&str) -> bool);
    let runs: [Run<'_>; 4] = [
        ("python", &py, &python, &|r| {
            (r.starts_with("TypeError: ") || r.starts_with("ValueError: ")) && r.contains("of mistakes_demo.py)")
                || r.contains("timestamp is a float")
        }),
        ("javascript", &js, &javascript, &|r| {
            (r.starts_with("TypeError: ") || r.starts_with("RangeError: ")) && r.contains("(line ")
        }),
        ("c", &c, &c_mistakes, &|r| {
            r.contains("must not be NULL")
                || r.contains("never compiled")
                || r.contains("NULL")
                || r.contains("schema id 7: this pipeline has no [schema_registry]")
        }),
        ("rust", &rust, &rust_mistakes, &|r| !r.contains("trap") && !r.contains("panic")),
    ];
    for (lang, wasm, mistakes, says) in runs {
        let (answers, summary) = plugin_run(wasm, mistakes);
        println!("{lang}:");
        for a in &answers {
            println!("  {}", a["reason"].as_str().map_or_else(|| a["events"][0]["body"].to_string(), String::from));
        }
        assert_eq!(answers.len(), mistakes.len(), "{lang}: one answer per record: {answers:?}");
        let plugin = &summary["summary"]["plugins"][0];
        assert_eq!(
            (plugin["rebuilds"].as_u64(), plugin["faulted_records"].as_u64(), plugin["faulted_batches"].as_u64()),
            (Some(0), Some(0), Some(0)),
            "{lang}: no trap, no instance rebuilt: {summary}"
        );
        for (mistake, answer) in mistakes.iter().zip(&answers) {
            let outcome = answer["outcome"].as_str().unwrap_or_default();
            if mistake.starts_with("ok-") {
                assert_eq!(outcome, "emit", "{lang}: {mistake} is a natural type, taken: {answer}");
            } else {
                let reason = answer["reason"].as_str().unwrap_or_default();
                assert_eq!(outcome, "reject", "{lang}: {mistake}: {answer}");
                assert!(says(reason), "{lang}: {mistake}: the reason names the mistake: {reason}");
            }
        }
    }
}

/// Issue 56, items 2 and 3: a plugin's unit test, run natively in Python
/// and JavaScript, judges its outcomes with the host's own output rules
/// (`sluice plugin helpers`): an empty id, `None`/`null` instead of an
/// outcome, an array body and an oversized id reject their records with
/// the host's words, as `sluice plugin run` of the same plugin does; and
/// `now` pins the clock a yearless format and `now_nanos` read.
#[test]
fn a_native_run_rejects_what_the_host_rejects_and_pins_now_in_python_and_node() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let sdk = root().join("guest-sdk");
    std::fs::write(
        dir.path().join("careless.py"),
        "import sys\nsys.path.insert(0, sys.argv[1])\n\
         from sluice_plugin import Plugin, TimeFormat, emit, now_nanos, run_natively\n\n\
         class Careless(Plugin):\n\
         \x20   def setup(self, config):\n        self.syslog = TimeFormat(\"%b %d %H:%M:%S\")\n\n\
         \x20   def process(self, record):\n        p = bytes(record.payload)\n\
         \x20       if p == b\"none\":\n            return None\n\
         \x20       if p == b\"empty-id\":\n            return emit({\"a\": 1}, id=\"\")\n\
         \x20       if p == b\"long-id\":\n            return emit({\"a\": 1}, id=\"x\" * 300)\n\
         \x20       if p == b\"array\":\n            return emit(b\"[1]\")\n\
         \x20       if p == b\"yearless\":\n            return emit({\"t\": self.syslog.parse(\"Dec 31 23:00:00\"), \"now\": now_nanos()})\n\
         \x20       return emit({\"ok\": True})\n\n\
         for o in run_natively(Careless, {}, [\"none\", \"empty-id\", \"long-id\", \"array\", \"fine\", \"yearless\"], now=\"2027-01-02T00:00:00Z\"):\n\
         \x20   print(o.verdict, o.reason if o.reason is not None else o.events[0].json())\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::copy(sdk.join("js/sluice-plugin.js"), dir.path().join("sluice-plugin.js"))
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.path().join("careless.mjs"),
        "import { Plugin, TimeFormat, emit, nowNanos, runNatively } from \"./sluice-plugin.js\";\n\
         class Careless extends Plugin {\n\
         \x20 setup() { this.syslog = new TimeFormat(\"%b %d %H:%M:%S\"); }\n\
         \x20 process(record) {\n    const p = new TextDecoder().decode(record.payload);\n\
         \x20   if (p === \"none\") return null;\n\
         \x20   if (p === \"empty-id\") return emit({ a: 1 }, \"\");\n\
         \x20   if (p === \"long-id\") return emit({ a: 1 }, \"x\".repeat(300));\n\
         \x20   if (p === \"array\") return emit(\"[1]\");\n\
         \x20   if (p === \"yearless\") return emit({ t: String(this.syslog.parse(\"Dec 31 23:00:00\")), now: String(nowNanos()) });\n\
         \x20   return emit({ ok: true });\n  }\n}\n\
         for (const o of runNatively(Careless, {}, [\"none\", \"empty-id\", \"long-id\", \"array\", \"fine\", \"yearless\"], { now: \"2027-01-02T00:00:00Z\" })) {\n\
         \x20 console.log(o.verdict, o.reason ?? o.events[0].body);\n}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for (lang, said) in run_natively_in_python_and_node(dir.path(), "careless") {
        let lines: Vec<&str> = said.lines().collect();
        assert_eq!(lines.len(), 6, "{lang}: {said}");
        assert!(lines[0].starts_with("reject process returned"), "{lang}: {}", lines[0]);
        assert!(lines[1].starts_with("reject event 0: the id is empty"), "{lang}: {}", lines[1]);
        assert!(lines[2].contains("the id is 300 bytes, over the limit of 256 (max_id_bytes)"), "{lang}: {}", lines[2]);
        assert!(
            lines[3].starts_with("reject event 0: the body is a JSON array, not an object"),
            "{lang}: {}",
            lines[3]
        );
        assert!(lines[4].starts_with("emit"), "{lang}: {}", lines[4]);
        // Pinned at 2027-01-02: "Dec 31 23:00" is the last day of 2026.
        assert!(
            lines[5].contains("1798758000000000000") && lines[5].contains("1798848000000000000"),
            "{lang}: the pinned clock: {}",
            lines[5]
        );
    }
}

/// The schema registry's helpers in a Python and a JavaScript plugin's
/// unit test, outside the component: `framed` reads the header,
/// `schema` answers what the test registered, and an id nobody
/// registered or a payload that is not framed rejects its record with the
/// reason the host would give.
#[test]
fn a_native_decoder_reads_the_schemas_its_test_registered_in_python_and_node() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let sdk = root().join("guest-sdk");
    std::fs::write(
        dir.path().join("decoder.py"),
        "import json, sys\nsys.path.insert(0, sys.argv[1])\n\
         from sluice_plugin import NOT_FRAMED, Plugin, emit, framed, register_schema, reject, run_natively, schema, schema_references\n\n\
         class Decoder(Plugin):\n\
         \x20   def process(self, record):\n\
         \x20       header = framed(record.payload)\n\
         \x20       if header is None:\n            return reject(NOT_FRAMED)\n\
         \x20       schema_id, body = header\n\
         \x20       found = schema(schema_id)\n\
         \x20       refs = [name for name, _ in schema_references(schema_id)]\n\
         \x20       return emit({\"id\": schema_id, \"type\": found.schema_type, \"text\": found.text, \"body\": body.decode(), \"refs\": refs})\n\n\
         register_schema(7, \"AVRO\", '\"long\"', [(\"shop.Money\", \"{}\")])\n\
         payloads = [b\"\\x00\\x00\\x00\\x00\\x07abc\", b\"\\x00\\x00\\x00\\x00\\x08abc\", b\"{}\"]\n\
         for o in run_natively(Decoder, {}, payloads):\n\
         \x20   print(o.verdict, o.reason if o.reason is not None else json.dumps(o.events[0].json()))\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::copy(sdk.join("js/sluice-plugin.js"), dir.path().join("sluice-plugin.js"))
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.path().join("decoder.mjs"),
        "import { NOT_FRAMED, Plugin, emit, framed, registerSchema, reject, runNatively, schema, schemaReferences } from \"./sluice-plugin.js\";\n\
         class Decoder extends Plugin {\n\
         \x20 process(record) {\n\
         \x20   const header = framed(record.payload);\n\
         \x20   if (header === null) return reject(NOT_FRAMED);\n\
         \x20   const found = schema(header.id);\n\
         \x20   const refs = schemaReferences(header.id).map((r) => r.name);\n\
         \x20   return emit({ id: header.id, type: found.schemaType, text: found.text, body: new TextDecoder().decode(header.body), refs });\n\
         \x20 }\n}\n\
         registerSchema(7, \"AVRO\", '\"long\"', [[\"shop.Money\", \"{}\"]]);\n\
         const payloads = [new Uint8Array([0, 0, 0, 0, 7, 97, 98, 99]), new Uint8Array([0, 0, 0, 0, 8, 97, 98, 99]), \"{}\"];\n\
         for (const o of runNatively(Decoder, {}, payloads)) {\n\
         \x20 console.log(o.verdict, o.reason ?? o.events[0].body);\n}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for (lang, said) in run_natively_in_python_and_node(dir.path(), "decoder") {
        let lines: Vec<&str> = said.lines().collect();
        assert_eq!(lines.len(), 3, "{lang}: {said}");
        let first: serde_json::Value = serde_json::from_str(lines[0].trim_start_matches("emit "))
            .unwrap_or_else(|e| panic!("{lang}: {e}: {}", lines[0]));
        assert_eq!(
            first,
            serde_json::json!({"id": 7, "type": "AVRO", "text": "\"long\"", "body": "abc", "refs": ["shop.Money"]}),
            "{lang}"
        );
        assert!(
            lines[1].starts_with("reject") && lines[1].contains("schema id 8 is not in the schema registry"),
            "{lang}: {}",
            lines[1]
        );
        assert!(lines[2].starts_with("reject not in the schema registry's wire format"), "{lang}: {}", lines[2]);
    }
}

/// Run `NAME.py` (with the Python SDK's folder as its argument) and
/// `NAME.mjs` (under `sluice-native.mjs`) of `dir`, natively: what each
/// printed, once it exited well.
fn run_natively_in_python_and_node(dir: &Path, name: &str) -> Vec<(&'static str, String)> {
    let sdk = root().join("guest-sdk");
    let mut py = Command::new(componentize_py().with_file_name("python3"));
    py.arg(dir.join(format!("{name}.py"))).arg(sdk.join("python"));
    let mut node = Command::new("node");
    node.arg("--import").arg(sdk.join("js/sluice-native.mjs")).arg(dir.join(format!("{name}.mjs")));
    [("python", py), ("node", node)]
        .into_iter()
        .map(|(lang, mut cmd)| {
            let out = cmd.env("SLUICE", sluice_bin!()).output().unwrap_or_else(|e| panic!("{lang}: {e}"));
            let said = String::from_utf8_lossy(&out.stdout).into_owned();
            println!("{lang}:\n{said}{}", String::from_utf8_lossy(&out.stderr));
            assert!(out.status.success(), "{lang}: {}", String::from_utf8_lossy(&out.stderr));
            (lang, said)
        })
        .collect()
}
