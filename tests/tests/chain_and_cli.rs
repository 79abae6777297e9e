//! Plugins in a chain (json → ts-window), and the `sluice plugin` commands
//! as an author uses them: outputs, exit codes, and errors that name the
//! file or key at fault.

use std::process::Command;

use serde_json::json;
use sluice::plugin::chain::build_chain;
use sluice::plugin::engine::Runtime;
use sluice::record::Record;
use sluice::verdict::Verdict;
use sluice_e2e::{now_rfc3339, plugin, plugin_v01, sluice_bin, spec, workspace_root};

#[test]
fn json_then_ts_window_carries_ids_and_times_and_rejects_with_the_bound() {
    let runtime = Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
    let mut chain = build_chain(
        &runtime,
        &[
            spec("json", json!({ "id_field": "event_id", "timestamp_field": "ts" })),
            spec("ts-window", json!({ "max_age": "1h", "max_future": "1m" })),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let lines = [
        format!(r#"{{"event_id":"a1","ts":"{}","msg":"fresh"}}"#, now_rfc3339(-60)),
        format!(r#"{{"event_id":"a2","ts":"{}","msg":"stale"}}"#, now_rfc3339(-7200)),
        r#"{"event_id":"a3","msg":"no time"}"#.to_string(),
        r#"{"event_id":"a4","#.to_string(),
        format!(r#"{{"ts":"{}","msg":"no id"}}"#, now_rfc3339(0)),
    ];
    let records: Vec<Record> =
        lines.iter().enumerate().map(|(i, l)| Record::line(l.as_bytes(), "in.log", 0, i as u64 * 100)).collect();
    let v = chain.run(records).unwrap_or_else(|e| panic!("{e}"));
    match &v[0] {
        Verdict::Emit(ev) => {
            assert_eq!(ev.len(), 1);
            assert_eq!(ev[0].id.as_deref(), Some("a1"), "the id set by json survives ts-window");
            assert!(ev[0].timestamp.is_some(), "the time set by json survives ts-window");
            assert_eq!(ev[0].body_json()["msg"], "fresh");
        }
        other => panic!("{other:?}"),
    }
    match &v[1] {
        Verdict::Reject { plugin, reason } => {
            assert_eq!(plugin.name, "ts-window");
            assert!(reason.contains("older than max_age 1h"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(&v[2], Verdict::Reject { plugin, reason } if plugin.name == "ts-window" && reason.starts_with("missing timestamp")),
        "{:?}",
        v[2]
    );
    assert!(
        matches!(&v[3], Verdict::Reject { plugin, reason } if plugin.name == "json" && reason.contains("not valid JSON")),
        "{:?}",
        v[3]
    );
    match &v[4] {
        Verdict::Emit(ev) => assert_eq!(ev[0].id, None, "no id: the host derives one from the position"),
        other => panic!("{other:?}"),
    }
}

/// Verdicts with the plugin digests blanked (the same code built for 0.1
/// and 0.2 has two digests, and is otherwise the same plugin) and the
/// clock reading cut from ts-window's reasons (each run reads the clock).
fn blank_digests(v: Vec<Verdict>) -> Vec<Verdict> {
    let blank = |mut p: sluice::verdict::PluginId| {
        p.digest = blake3::Hash::from_bytes([0; 32]);
        p
    };
    let cut = |r: String| r.split(" (oldest accepted").next().unwrap_or_default().to_string();
    v.into_iter()
        .map(|v| match v {
            Verdict::Drop { plugin, reason } => Verdict::Drop { plugin: blank(plugin), reason: cut(reason) },
            Verdict::Reject { plugin, reason } => Verdict::Reject { plugin: blank(plugin), reason: cut(reason) },
            emit => emit,
        })
        .collect()
}

#[test]
fn plugins_of_0_1_and_0_2_run_side_by_side_in_one_chain_with_the_same_verdicts() {
    let runtime = Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
    let json_cfg = json!({ "id_field": "event_id", "timestamp_field": "ts" });
    let window_cfg = json!({ "max_age": "1h", "max_future": "1m" });
    let v01 = |name: &str, config: &serde_json::Value| sluice::plugin::spec::PluginSpec {
        config: config.clone(),
        ..sluice::plugin::spec::PluginSpec::from_path(plugin_v01(name))
    };
    let mut records = Vec::new();
    for i in 0..300u64 {
        let line = match i % 5 {
            0 => format!(r#"{{"event_id":"e{i}","ts":"{}","n":{i}}}"#, now_rfc3339(-60)),
            1 => format!(r#"{{"event_id":"e{i}","ts":"{}"}}"#, now_rfc3339(-7200)),
            2 => format!(r#"{{"ts":"{}","unicode":"é✓"}}"#, now_rfc3339(0)),
            3 => "{\"event_id\":".to_string(),
            _ => format!(r#"{{"event_id":"e{i}"}}"#),
        };
        let mut r = Record::line(line.into_bytes(), "mixed.log", 1, i * 80);
        if i % 7 == 0 {
            r.key = Some(format!("k{i}").into_bytes().into());
            r.headers = vec![("h".into(), vec![i as u8]), (String::new(), Vec::new())];
        }
        records.push(r);
    }
    let mut verdicts = Vec::new();
    for (json_spec, window_spec) in [
        (spec("json", json_cfg.clone()), spec("ts-window", window_cfg.clone())),
        (v01("json", &json_cfg), spec("ts-window", window_cfg.clone())),
        (spec("json", json_cfg.clone()), v01("ts-window", &window_cfg)),
        (v01("json", &json_cfg), v01("ts-window", &window_cfg)),
    ] {
        let mut chain = build_chain(&runtime, &[json_spec, window_spec]).unwrap_or_else(|e| panic!("{e}"));
        let contracts: Vec<String> = chain.stages().iter().map(|s| s.contract().to_string()).collect();
        verdicts.push((contracts, blank_digests(chain.run(records.clone()).unwrap_or_else(|e| panic!("{e}")))));
    }
    let emitted = verdicts[0].1.iter().filter(|v| matches!(v, Verdict::Emit(_))).count();
    assert_eq!(emitted, 120, "the fresh and the id-less records: {:?}", &verdicts[0].1[..5]);
    for (contracts, v) in &verdicts[1..] {
        assert_eq!(v.len(), records.len());
        for (i, (got, want)) in v.iter().zip(&verdicts[0].1).enumerate() {
            assert_eq!(got, want, "{contracts:?} against both 0.2, record {i}");
        }
    }
    assert_eq!(verdicts[1].0, ["sluice:plugin@0.1.0", "sluice:plugin@0.2.0"]);
}

fn sluice(args: &[&str], stdin: &str) -> (i32, String, String) {
    use std::io::Write;
    let mut child = Command::new(sluice_bin!())
        .args(args)
        .current_dir(workspace_root())
        .env("SLUICE_PLUGIN_CACHE", std::env::temp_dir().join("sluice-test-plugin-cache"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    if let Some(mut input) = child.stdin.take() {
        let _ = input.write_all(stdin.as_bytes());
    }
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn plugin_run_prints_one_outcome_per_line_with_configs_paired_in_order() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let json_cfg = dir.path().join("json.toml");
    let window_cfg = dir.path().join("window.toml");
    std::fs::write(&json_cfg, "id_field = \"id\"\ntimestamp_field = \"ts\"\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&window_cfg, "max_age = \"1d\"\n").unwrap_or_else(|e| panic!("{e}"));
    let input = format!(
        "{{\"id\":\"x1\",\"ts\":\"{}\"}}\r\nnot json\r{{\"id\":\"x3\",\"ts\":\"2001-01-01T00:00:00Z\"}}",
        now_rfc3339(0)
    );
    let (code, stdout, stderr) = sluice(
        &[
            "plugin",
            "run",
            "--plugin",
            &plugin("json").display().to_string(),
            "--config",
            &json_cfg.display().to_string(),
            "--plugin",
            &plugin("ts-window").display().to_string(),
            "--config",
            &window_cfg.display().to_string(),
        ],
        &input,
    );
    assert_eq!(code, 0, "{stderr}");
    let out: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_default()).collect();
    assert_eq!(out.len(), 3, "{stdout}");
    assert_eq!(out[0]["outcome"], "emit");
    assert_eq!(out[0]["events"][0]["id"], "x1");
    assert_eq!(out[1]["outcome"], "reject");
    assert_eq!(out[1]["offset"], input.find("not json").unwrap_or(0));
    assert!(out[1]["plugin"].as_str().unwrap_or("").starts_with("json@"));
    assert_eq!(out[2]["outcome"], "reject");
    assert!(out[2]["reason"].as_str().unwrap_or("").contains("2001-01-01T00:00:00Z"), "{}", out[2]);
    assert!(stderr.contains("\"rejected\":2"), "{stderr}");
}

#[test]
fn plugin_run_refuses_bad_configs_with_exit_code_2_naming_the_fault() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let bad_toml = dir.path().join("bad.toml");
    std::fs::write(&bad_toml, "max_age = \n").unwrap_or_else(|e| panic!("{e}"));
    let unknown_key = dir.path().join("unknown.toml");
    std::fs::write(&unknown_key, "max_age = \"1d\"\nmax_agee = \"2d\"\n").unwrap_or_else(|e| panic!("{e}"));
    let bad_value = dir.path().join("value.toml");
    std::fs::write(&bad_value, "max_age = \"forever\"\n").unwrap_or_else(|e| panic!("{e}"));
    let window = plugin("ts-window").display().to_string();
    let cases = [
        (vec!["--plugin", window.as_str(), "--config", bad_toml.to_str().unwrap_or("")], "bad.toml"),
        (vec!["--plugin", window.as_str(), "--config", unknown_key.to_str().unwrap_or("")], "unknown field `max_agee`"),
        (vec!["--plugin", window.as_str(), "--config", unknown_key.to_str().unwrap_or("")], "unknown.toml"),
        (
            vec!["--plugin", window.as_str(), "--config", bad_value.to_str().unwrap_or("")],
            "invalid duration \"forever\"",
        ),
        (vec!["--plugin", "/no/such/plugin.wasm"], "/no/such/plugin.wasm"),
        (vec!["--config", bad_toml.to_str().unwrap_or(""), "--plugin", window.as_str()], "comes before any --plugin"),
    ];
    // The same config as JSON works as the TOML does; a file that is not
    // one table is refused, naming it.
    let as_json = dir.path().join("window.json");
    std::fs::write(&as_json, r#"{"max_age": "forever"}"#).unwrap_or_else(|e| panic!("{e}"));
    let listed = dir.path().join("list.json");
    std::fs::write(&listed, "[1, 2]").unwrap_or_else(|e| panic!("{e}"));
    let bad_json = dir.path().join("bad.json");
    std::fs::write(&bad_json, "{\"max_age\": ").unwrap_or_else(|e| panic!("{e}"));
    let cases: Vec<(Vec<&str>, &str)> = cases
        .into_iter()
        .chain([
            (
                vec!["--plugin", window.as_str(), "--config", as_json.to_str().unwrap_or("")],
                "invalid duration \"forever\"",
            ),
            (
                vec!["--plugin", window.as_str(), "--config", listed.to_str().unwrap_or("")],
                "list.json must hold one table",
            ),
            (vec!["--plugin", window.as_str(), "--config", bad_json.to_str().unwrap_or("")], "invalid JSON in"),
        ])
        .collect();
    for (args, expect) in cases {
        let mut full = vec!["plugin", "run"];
        full.extend(args.iter().copied());
        let (code, stdout, stderr) = sluice(&full, "{}\n");
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(expect), "{args:?}: expected {expect:?} in {stderr}");
        assert!(stdout.is_empty(), "{args:?}: nothing may be processed: {stdout}");
    }
    let good_json = dir.path().join("good.json");
    std::fs::write(&good_json, r#"{"max_age": "30d"}"#).unwrap_or_else(|e| panic!("{e}"));
    let (code, _, stderr) =
        sluice(&["plugin", "run", "--plugin", &window, "--config", good_json.to_str().unwrap_or("")], "");
    assert_eq!(code, 0, "a JSON config: {stderr}");
}

#[test]
fn a_plugin_that_cannot_start_is_named_by_its_config_key_with_what_to_change() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("in.log"), "0 a 1 x\n").unwrap_or_else(|e| panic!("{e}"));
    let patterns: Vec<String> =
        (0..200).map(|i| format!("'^{i} %{{WORD:w{i}}} %{{INT:n}} %{{GREEDYDATA:rest}}$'")).collect();
    let base = format!(
        "[pipeline]\nname = \"t\"\nstate_dir = \"state\"\n[source]\ntype = \"file\"\npaths = [\"in.log\"]\n\
         [sink]\ntype = \"file\"\npath = \"out.ndjson\"\n[[plugins]]\nname = \"pattern\"\npath = \"{}\"\n",
        plugin("pattern").display()
    );
    let run = |extra: &str| {
        std::fs::write(dir.path().join("sluice.toml"), format!("{base}{extra}")).unwrap_or_else(|e| panic!("{e}"));
        let out = Command::new(sluice_bin!())
            .args(["run", "-c", "sluice.toml"])
            .current_dir(dir.path())
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!out.status.success(), "{extra}: must refuse to start");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // 200 patterns do not fit 32 MiB: the message names the key to raise.
    let err = run(&format!("memory = \"32MiB\"\nconfig = {{ patterns = [{}] }}\n", patterns.join(",")));
    assert!(err.contains("plugins[0] (pattern): plugin pattern@") && err.contains("out of memory"), "{err}");
    assert!(err.contains("raise plugins[0].memory (now 32 MiB"), "{err}");
    assert_eq!(err.matches("faulted in init").count(), 1, "said once: {err}");
    // A config of the wrong type names its key, not a position in JSON.
    let err = run("config = { patterns = [\"^%{WORD:w}$\"], id_field = 7 }\n");
    assert!(err.contains("plugins[0] (pattern)") && err.contains("id_field: invalid type: integer `7`"), "{err}");
    assert!(err.contains("its config is the plugins[0].config table") && !err.contains("line 1 column"), "{err}");
}

/// `plugin run` prints each event's body as the plugin wrote it, as the
/// sinks write it: keys in their order, a number beyond 64 bits as
/// written (it was re-serialised: keys sorted, `2**70` as a float).
#[test]
fn plugin_run_prints_each_body_as_the_plugin_wrote_it() {
    let body = r#"{"zeta":1,"alpha":{"b":2,"a":1},"big":1180591620717411303424,"f":1.50}"#;
    let (code, stdout, stderr) =
        sluice(&["plugin", "run", "--plugin", &plugin("json").display().to_string()], &format!("{body}\n"));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains(&format!("\"body\":{body}")), "the body byte for byte: {stdout}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{stdout}: {e}"));
    assert_eq!((v["line"].as_u64(), v["outcome"].as_str()), (Some(1), Some("emit")), "{v}");
}

#[test]
fn plugin_inspect_shows_identity_version_and_imports() {
    let path = plugin("json");
    let (code, stdout, stderr) = sluice(&["plugin", "inspect", "--json", &path.display().to_string()], "");
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_default();
    let bytes = std::fs::read(&path).unwrap_or_default();
    assert_eq!(v["digest"], blake3_hex(&bytes));
    assert_eq!(v["wit_version"], "0.2.0");
    assert_eq!(v["not_runnable"], serde_json::Value::Null);
    assert_eq!(v["size_bytes"], bytes.len());
    assert_eq!(v["exports"], json!(["init", "process"]));
    let imports: Vec<&str> =
        v["imports"].as_array().map(|a| a.iter().filter_map(|x| x.as_str()).collect()).unwrap_or_default();
    assert!(imports.contains(&"sluice:plugin/clock@0.2.0"), "{imports:?}");
    assert!(!imports.iter().any(|i| i.starts_with("wasi:sockets") || i.starts_with("wasi:http")), "{imports:?}");
}

#[test]
fn plugin_inspect_lists_the_timestamp_items_and_pattern_shortcuts() {
    let path = plugin("pattern");
    let (code, stdout, stderr) = sluice(&["plugin", "inspect", "--formats", &path.display().to_string()], "");
    assert_eq!(code, 0, "{stderr}");
    for want in ["%3f, %6f, %9f", "exactly 3, 6, 9 digits", "syslog", "year = 2016", "IPORHOST", "QUOTEDSTRING", "UUID"]
    {
        assert!(stdout.contains(want), "{want} missing from:\n{stdout}");
    }
    let (_, plain, _) = sluice(&["plugin", "inspect", &path.display().to_string()], "");
    assert!(plain.contains("--formats") && !plain.contains("IPORHOST"), "{plain}");
}

#[test]
fn plugin_inspect_tells_a_0_1_plugin_from_a_0_2_one() {
    for (path, version) in [(plugin_v01("json"), "0.1.0"), (plugin("json"), "0.2.0")] {
        let (code, stdout, stderr) = sluice(&["plugin", "inspect", &path.display().to_string()], "");
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.contains(&format!("wit:         sluice:plugin@{version}\n")), "{stdout}");
    }
}

fn blake3_hex(bytes: &[u8]) -> String {
    sluice::plugin::digest_hex(bytes)
}

#[test]
fn a_plugin_pinned_by_digest_starts_only_from_the_pinned_bytes() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("in.log"), "{\"a\":1}\n").unwrap_or_else(|e| panic!("{e}"));
    let json = plugin("json");
    let check = |digest_line: &str| {
        let cfg = format!(
            "[pipeline]\nname = \"t\"\nstate_dir = \"state\"\n[source]\ntype = \"file\"\npaths = [\"in.log\"]\n\
             [sink]\ntype = \"file\"\npath = \"out.ndjson\"\n[[plugins]]\nname = \"json\"\npath = \"{}\"\n{digest_line}\n",
            json.display()
        );
        std::fs::write(dir.path().join("sluice.toml"), cfg).unwrap_or_else(|e| panic!("{e}"));
        let out = Command::new(sluice_bin!())
            .args(["check", "-c", "sluice.toml"])
            .current_dir(dir.path())
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    // The line `plugin inspect` prints, pasted as it is.
    let (code, stdout, stderr) = sluice(&["plugin", "inspect", &json.display().to_string()], "");
    assert_eq!(code, 0, "{stderr}");
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("pin:"))
        .and_then(|l| l.trim().split("   ").next())
        .unwrap_or_else(|| panic!("no pin line: {stdout}"))
        .to_string();
    let bytes = std::fs::read(&json).unwrap_or_default();
    assert_eq!(line, format!("digest = \"blake3:{}\"", blake3_hex(&bytes)));
    assert_eq!(check(&line), (0, String::new()), "the pinned build starts");
    // sha256, as a build pipeline would publish it.
    let sha = Command::new("sha256sum").arg(&json).output().unwrap_or_else(|e| panic!("sha256sum: {e}"));
    let sha = String::from_utf8_lossy(&sha.stdout).split_whitespace().next().unwrap_or_default().to_string();
    assert_eq!(check(&format!("digest = \"sha256:{sha}\"")).0, 0);
    // Another file under the trusted name: refused, naming both digests.
    let other = blake3_hex(&std::fs::read(plugin("ts-window")).unwrap_or_default());
    let (code, err) = check(&format!("digest = \"blake3:{other}\""));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("plugins[0] (json)")
            && err.contains(&format!("has digest blake3:{}", blake3_hex(&bytes)))
            && err.contains(&format!("plugins[0].digest pins blake3:{other}")),
        "{err}"
    );
    let (code, err) = check("digest = \"md5:0123\"");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("plugins[0].digest") && err.contains("blake3 or sha256"), "{err}");
}

#[test]
fn check_and_run_compile_into_the_cache_sluice_plugin_cache_names() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cache = dir.path().join("compiled");
    std::fs::write(dir.path().join("in.log"), "{\"a\":1}\n").unwrap_or_else(|e| panic!("{e}"));
    let json = plugin("json");
    let cfg = format!(
        "[pipeline]\nname = \"t\"\nstate_dir = \"state\"\n[source]\ntype = \"file\"\npaths = [\"in.log\"]\n\
         [sink]\ntype = \"file\"\npath = \"out.ndjson\"\n[[plugins]]\nname = \"json\"\npath = \"{}\"\n",
        json.display()
    );
    std::fs::write(dir.path().join("sluice.toml"), cfg).unwrap_or_else(|e| panic!("{e}"));
    let digest = blake3_hex(&std::fs::read(&json).unwrap_or_default());
    let artifacts = || -> Vec<String> {
        std::fs::read_dir(&cache)
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().into_string().ok()).filter(|n| n.ends_with(".cwasm")).collect()
            })
            .unwrap_or_default()
    };
    // `sluice <command>` with the cache named by the environment; it must succeed.
    let sluice = |command: &str| {
        let out = Command::new(sluice_bin!())
            .args([command, "-c", "sluice.toml"])
            .current_dir(dir.path())
            .env("SLUICE_PLUGIN_CACHE", &cache)
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.status.code(), Some(0), "{command}: {}", String::from_utf8_lossy(&out.stderr));
    };
    sluice("check");
    let after_check = artifacts();
    assert!(
        after_check.len() == 1 && after_check[0].starts_with(&digest),
        "check compiled json into $SLUICE_PLUGIN_CACHE: {after_check:?}"
    );
    // `run` finds it there: the artifact is used (its time of use moves),
    // and no second one is written.
    let path = cache.join(&after_check[0]);
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .append(true)
        .open(&path)
        .and_then(|f| f.set_modified(old))
        .unwrap_or_else(|e| panic!("{e}"));
    sluice("run");
    assert_eq!(artifacts(), after_check);
    let used = std::fs::metadata(&path).and_then(|m| m.modified()).unwrap_or(old);
    assert!(used > old, "run took the compiled plugin from the cache");
    let delivered = std::fs::read_to_string(dir.path().join("out.ndjson")).unwrap_or_default();
    assert!(delivered.contains("\"a\":1"), "{delivered}");
}

/// `check` in a folder holding `in.log` and `sluice.toml` = `cfg`.
fn check_in(dir: &std::path::Path, cfg: &str, extra: &[&str]) -> (i32, String, String) {
    std::fs::write(dir.join("sluice.toml"), cfg).unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(sluice_bin!())
        .args(["check", "-c", "sluice.toml"])
        .args(extra)
        .current_dir(dir)
        .env("SLUICE_PLUGIN_CACHE", std::env::temp_dir().join("sluice-test-plugin-cache"))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_names_every_problem_in_one_pass() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("in.log"), "{\"a\":1}\n").unwrap_or_else(|e| panic!("{e}"));
    // A mistake in each of three sections of the file.
    let (code, _, err) = check_in(
        dir.path(),
        "[pipeline]\nname = \"t\"\nstate_dir = \"state\"\nbatch_sise = 10\n[source]\ntype = \"file\"\n\
         paths = [\"in.log\"]\nfolow = true\n[sink]\ntype = \"file\"\npaht = \"out.ndjson\"\n",
        &[],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("has 3 problems"), "{err}");
    for (key, line) in [("batch_sise", 4), ("folow", 8), ("paht", 11)] {
        assert!(err.contains(key), "{key} not named: {err}");
        // Where the file writes it, not only its key path.
        let named = err.lines().find(|l| l.contains(key)).unwrap_or_default();
        assert!(named.ends_with(&format!("(line {line}, column 1)")), "{key} not placed at line {line}: {err}");
    }
    // A file that parses, with two plugins that refuse their configs and
    // a source that matches nothing: all three named.
    let (code, _, err) = check_in(
        dir.path(),
        &format!(
            "[pipeline]\nname = \"t\"\nstate_dir = \"state\"\n[source]\ntype = \"file\"\npaths = [\"missing-*.log\"]\n\
             [sink]\ntype = \"file\"\npath = \"out.ndjson\"\n\
             [[plugins]]\nname = \"json\"\npath = \"{}\"\nconfig = {{ id_field = 7 }}\n\
             [[plugins]]\nname = \"ts-window\"\npath = \"{}\"\nconfig = {{ max_agee = \"1h\" }}\n",
            plugin("json").display(),
            plugin("ts-window").display()
        ),
        &[],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("has 3 problems"), "{err}");
    assert!(err.contains("\n  plugins[0] (json)") && err.contains("id_field"), "{err}");
    assert!(err.contains("\n  plugins[1] (ts-window)") && err.contains("max_agee"), "{err}");
    // A plugin's refusal names its key by the plugin's own path; the host
    // places it in the file: `config = { id_field = 7 }` of line 13,
    // `config = { max_agee = "1h" }` of line 17.
    for (plugin, place) in
        [("plugins[0] (json)", "(line 13, column 12)"), ("plugins[1] (ts-window)", "(line 17, column 12)")]
    {
        let said = err.lines().find(|l| l.contains(plugin)).unwrap_or_default();
        assert!(said.ends_with(place), "{plugin} not placed at {place}: {err}");
    }
    assert!(err.contains("\n  source.paths") && err.contains("match no file"), "{err}");
}

/// Issue 44: `check` draws the topology (each sink, each route, where the
/// rest go), probes every sink with `--connect`, and refuses a route to a
/// sink that does not exist.
#[test]
fn check_draws_the_sinks_and_routes_and_refuses_a_route_to_no_sink() {
    use sluice_e2e::backend::{Backend, Reaction};
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("in.log"), "{\"a\":1}\n").unwrap_or_else(|e| panic!("{e}"));
    let up = Backend::start(Reaction::ok);
    let cfg = |route_to: &str| {
        format!(
            "[pipeline]\nname = \"t\"\nstate_dir = \"state\"\n[source]\ntype = \"file\"\npaths = [\"in.log\"]\n\
             [[sinks]]\nname = \"index\"\ntype = \"http\"\nurl = \"{}/ingest\"\n\
             [[sinks]]\nname = \"archive\"\ntype = \"file\"\npath = \"archive.ndjson\"\n\
             [[routes]]\nfield = \"/level\"\nequals = \"debug\"\nsinks = [\"{route_to}\"]\n",
            up.url
        )
    };
    let (code, out, err) = check_in(dir.path(), &cfg("archive"), &["--connect"]);
    assert_eq!(code, 0, "{out}{err}");
    for line in [
        "graph:  sink index: http",
        "graph:  sink archive: file",
        "graph:  route 0: /level = \"debug\" → archive",
        "graph:  events no route matches → index, archive",
        "connect: sink index: http",
        "connect: sink archive: file",
    ] {
        assert!(out.contains(line), "{line:?} not in:\n{out}");
    }
    let (code, out, err) = check_in(dir.path(), &cfg("arkive"), &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("routes[0].sinks") && err.contains("\"arkive\"") && err.contains("index, archive"), "{err}");
}

#[test]
fn check_connect_reaches_the_sink_and_exits_3_when_it_cannot() {
    use sluice_e2e::backend::{Backend, Reaction};
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("in.log"), "{\"a\":1}\n").unwrap_or_else(|e| panic!("{e}"));
    let cfg = |url: &str| {
        format!(
            "[pipeline]\nname = \"t\"\nstate_dir = \"state\"\n[source]\ntype = \"file\"\npaths = [\"in.log\"]\n\
             [sink]\ntype = \"http\"\nurl = \"{url}/ingest\"\n"
        )
    };
    let up = Backend::start(Reaction::ok);
    let (code, out, err) = check_in(dir.path(), &cfg(&up.url), &["--connect"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("connect: sink http") && out.contains(": ok (HTTP 200"), "{out}");
    assert!(up.seen().stored.is_empty(), "the probe writes no record");
    let refusing = Backend::start(|r| Reaction::fail(401, "who are you", r));
    let (code, out, err) = check_in(dir.path(), &cfg(&refusing.url), &["--connect"]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(out.contains("FAILED (HTTP 401: the credentials are refused: who are you)"), "{out}");
    assert!(err.contains("is valid, but 1 of its dependencies cannot be reached"), "{err}");
    // Nothing listens: unreachable with --connect; without it, only the
    // config is judged (the pipeline would wait for the backend).
    let closed = format!("http://127.0.0.1:{}", sluice_e2e::kafka::free_port());
    let (code, out, err) = check_in(dir.path(), &cfg(&closed), &["--connect"]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(out.contains("FAILED (cannot connect"), "{out}");
    let (code, out, err) = check_in(dir.path(), &cfg(&closed), &[]);
    assert_eq!(code, 0, "{out}{err}");
}

/// Issue 42: a format without a year (syslog) takes the year of now, and
/// `check` says so as it says a missing zone, until the rule names one.
#[test]
fn check_says_which_timestamp_rules_guess_their_year() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("in.log"), "Jun 14 15:16:01 x\n").unwrap_or_else(|e| panic!("{e}"));
    let config = |format: &str| {
        format!(
            "[pipeline]\nname = \"t\"\nstate_dir = \"state\"\n[source]\ntype = \"file\"\npaths = [\"in.log\"]\n\
             [sink]\ntype = \"file\"\npath = \"out.ndjson\"\n\
             [[plugins]]\nname = \"pattern\"\npath = \"{}\"\n[plugins.config]\n\
             patterns = ['^(?P<t>%{{SYSLOGTIMESTAMP}}) %{{GREEDYDATA:m}}$']\n\
             timestamp = {{ fields = [\"t\"], format = {format}, zone = \"UTC\" }}\n",
            plugin("pattern").display()
        )
    };
    let (code, out, err) = check_in(dir.path(), &config("\"syslog\""), &[]);
    assert_eq!(code, 0, "{out}{err}");
    let said: Vec<&str> = err.lines().filter(|l| l.contains("writes no year")).collect();
    assert_eq!(said.len(), 1, "one warning for the year-less rule: {err}");
    assert!(said[0].contains("timestamp: the timestamp format \"syslog\"") && said[0].contains("year = 2016"), "{err}");
    let (code, out, err) = check_in(dir.path(), &config("{ format = \"syslog\", year = 2005 }"), &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!err.contains("writes no year"), "a rule that names its year says nothing: {err}");

    // Issue 56: a run starts an instance per worker, and each sets up with
    // the same words: the warning is said once, not once and again as
    // "… 2 more like this" with its text.
    let many: Vec<String> = (0..4).map(|i| format!("in{i}.log")).collect();
    for name in &many {
        std::fs::write(dir.path().join(name), "Jun 14 15:16:01 x\n").unwrap_or_else(|e| panic!("{e}"));
    }
    let list = many.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", ");
    std::fs::write(
        dir.path().join("sluice.toml"),
        config("\"syslog\"")
            .replace("paths = [\"in.log\"]", &format!("paths = [{list}]"))
            .replace("state_dir = \"state\"", "state_dir = \"state4\"\nworkers = 4"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let run = Command::new(sluice_bin!())
        .args(["run", "-c", "sluice.toml"])
        .current_dir(dir.path())
        .env("SLUICE_PLUGIN_CACHE", std::env::temp_dir().join("sluice-test-plugin-cache"))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{err}");
    assert_eq!(err.matches("writes no year").count(), 1, "said once by four instances: {err}");
}

/// Issue 24, item 2, through the built plugin: a rule that reads zone-less
/// times as UTC is named by `check` (each such rule, by its place), a rule
/// with a zone is not; in `plugin run` an IANA zone applies daylight
/// saving, and a local time the clocks skipped or repeated is a rejection
/// naming it, unless the rule picks one.
#[test]
fn timestamp_rules_name_their_zone_and_check_says_which_read_utc() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("in.log"), "2024-01-15 12:00:00 x\n").unwrap_or_else(|e| panic!("{e}"));
    let config = |top_zone: &str, own_zone: &str| {
        format!(
            "[pipeline]\nname = \"t\"\nstate_dir = \"state\"\n[source]\ntype = \"file\"\npaths = [\"in.log\"]\n\
             [sink]\ntype = \"file\"\npath = \"out.ndjson\"\n\
             [[plugins]]\nname = \"pattern\"\npath = \"{}\"\n[plugins.config]\n\
             patterns = ['^%{{TIMESTAMP_ISO8601:t}} %{{GREEDYDATA:m}}$', \
             {{ regex = '^@(?P<u>\\S+ \\S+) %{{GREEDYDATA:m}}$', timestamp = {{ fields = [\"u\"], \
             format = \"%Y-%m-%d %H:%M:%S\"{own_zone} }} }}]\n\
             timestamp = {{ fields = [\"t\"], format = \"%Y-%m-%d %H:%M:%S\"{top_zone} }}\n",
            plugin("pattern").display()
        )
    };
    let (code, out, err) = check_in(dir.path(), &config("", ""), &[]);
    assert_eq!(code, 0, "{out}{err}");
    let said: Vec<&str> = err.lines().filter(|l| l.contains("writes no zone: its times are read as UTC")).collect();
    assert_eq!(said.len(), 2, "one warning per zone-less rule: {err}");
    assert!(said.iter().any(|l| l.contains("timestamp: the timestamp format")), "{err}");
    assert!(said.iter().any(|l| l.contains("patterns[1].timestamp: the timestamp format")), "{err}");
    let (code, out, err) = check_in(dir.path(), &config(", zone = \"UTC\"", ", zone = \"-07:00\""), &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!err.contains("read as UTC"), "a rule with a zone says nothing: {err}");
    let (code, _, err) = check_in(dir.path(), &config(", zone = \"America/Los_Angles\"", ""), &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("timestamp.zone: unknown time zone \"America/Los_Angles\""), "{err}");

    let cfg = dir.path().join("la.toml");
    let run = |rule: &str, input: &str| -> Vec<serde_json::Value> {
        std::fs::write(
            &cfg,
            format!(
                "patterns = ['^%{{TIMESTAMP_ISO8601:t}} %{{GREEDYDATA:m}}$']\n\
                 timestamp = {{ fields = [\"t\"], format = \"%Y-%m-%d %H:%M:%S\", zone = \"America/Los_Angeles\"{rule} }}\n"
            ),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let (code, stdout, stderr) = sluice(
            &[
                "plugin",
                "run",
                "--plugin",
                &plugin("pattern").display().to_string(),
                "--config",
                &cfg.display().to_string(),
            ],
            input,
        );
        assert_eq!(code, 0, "{stderr}");
        stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_default()).collect()
    };
    let lines = "2024-01-15 12:00:00 winter\n2024-07-01 12:00:00 summer\n2024-03-10 02:30:00 skipped\n\
                 2024-11-03 01:30:00 twice\n";
    let out = run("", lines);
    assert_eq!(out.len(), 4, "{out:?}");
    assert_eq!(out[0]["events"][0]["timestamp"], "2024-01-15T20:00:00Z", "{}", out[0]);
    assert_eq!(out[1]["events"][0]["timestamp"], "2024-07-01T19:00:00Z", "{}", out[1]);
    for (i, said) in
        [(2, "2024-03-10 02:30:00 does not exist in America/Los_Angeles"), (3, "2024-11-03 01:30:00 happened twice")]
    {
        assert_eq!(out[i]["outcome"], "reject", "{}", out[i]);
        assert!(out[i]["reason"].as_str().unwrap_or("").contains(said), "{}", out[i]);
    }
    let out = run(", ambiguous = \"earliest\"", lines);
    assert_eq!(out[2]["events"][0]["timestamp"], "2024-03-10T09:30:00Z", "{}", out[2]);
    assert_eq!(out[3]["events"][0]["timestamp"], "2024-11-03T08:30:00Z", "{}", out[3]);
    let out = run(", ambiguous = \"latest\"", lines);
    assert_eq!(out[2]["events"][0]["timestamp"], "2024-03-10T10:30:00Z", "{}", out[2]);
    assert_eq!(out[3]["events"][0]["timestamp"], "2024-11-03T09:30:00Z", "{}", out[3]);
}
