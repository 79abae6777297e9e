//! Secrets masked in every output (issue 22): records carrying a masked
//! field (`password`) and a masked pattern (`token=…`) go through every
//! door that can quote a record: a plugin's reject reason, its log line and
//! its panic, the output contract, a timestamp error, an oversize line and
//! a sink's per-record rejection. At `SLUICE_LOG=debug`, no secret may be in
//! stdout, stderr, the store (entries and raw files) or any export; the
//! same run without masking shows that every door did carry its secret.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use sluice_e2e::backend::{Backend, Reaction, Req};
use sluice_e2e::{plugin, sluice_bin};

/// Every secret of the input contains it; nothing else does.
const MARK: &str = "S3CRET";

/// `(id, line)`: one record per door, each with its own secrets.
fn records() -> Vec<(&'static str, String)> {
    // The password first: the output contract quotes a body's first 60
    // characters.
    let line = |id: &str, ts: &str, msg: &str| {
        format!(
            r#"{{"id":"{id}","password":"PW-{id}-{MARK}","ts":"{ts}","user":"ann","msg":"{msg} token=TK-{id}-{MARK}"}}"#
        )
    };
    let now = "2026-12-03T07:00:00Z";
    vec![
        ("good", line("good", now, "all fine")),
        // The hostile plugin's `tattle`: it logs each poison record whole.
        ("reject", line("reject", now, "POISON REJECT")),
        ("notjson", line("notjson", now, "POISON NOTJSON")),
        ("trap", line("trap", now, "POISON TRAP")),
        // json reads `ts`: a time it cannot parse, quoted in its reason.
        ("ts", line("ts", &format!("yesterday password=PWTS-{MARK} token=TKTS-{MARK}"), "late")),
        // Over source.max_line_bytes (400): quarantined whole by the source.
        ("oversize", line("oversize", now, &"x".repeat(500))),
        // The backend refuses this row and quotes it in its answer.
        ("sink", line("sink", now, "SINKBAD")),
    ]
}

struct Run {
    dir: tempfile::TempDir,
    /// Every stdout and stderr of every command, every entry and export.
    said: String,
    /// The run's stderr alone.
    logs: String,
    /// Per quarantined record's id: its entry's reason and payload.
    entries: std::collections::BTreeMap<String, (String, String)>,
}

fn sluice(dir: &Path, args: &[&str]) -> Output {
    Command::new(sluice_bin!())
        .args(args)
        .current_dir(dir)
        .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
        .env("SLUICE_LOG", "debug")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The pipeline over [`records`], then every command that shows the
/// quarantine; `masking` is the `[quarantine]` table (empty: none).
fn run(masking: &str) -> Run {
    let backend = Backend::start(|r: &Req| {
        if r.events.iter().any(|e| e.to_string().contains("SINKBAD")) {
            // Like ClickHouse: the bad row quoted in the error.
            Reaction::fail(400, &format!("Cannot parse input: row {}", r.events[0]), r)
        } else {
            Reaction::ok(r)
        }
    });
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let input: String = records().iter().map(|(_, l)| format!("{l}\n")).collect();
    std::fs::write(dir.path().join("in.log"), input).unwrap_or_else(|e| panic!("{e}"));
    let cfg = format!(
        "[pipeline]\nname = \"secrets\"\nstate_dir = \"state\"\n\
         [source]\ntype = \"file\"\npaths = [\"in.log\"]\nmax_line_bytes = 400\n\
         [[plugins]]\nname = \"json\"\npath = \"{}\"\nconfig = {{ id_field = \"id\", timestamp_field = \"ts\" }}\n\
         [[plugins]]\nname = \"hostile\"\npath = \"{}\"\nconfig = {{ attack = \"tattle\" }}\n\
         [sink]\ntype = \"http\"\nurl = \"{}/ingest\"\n\
         [sink.retry]\nmax_attempts = 2\ninitial_backoff = \"10ms\"\nmax_backoff = \"20ms\"\n{masking}\n",
        plugin("json").display(),
        plugin("hostile").display(),
        backend.url
    );
    std::fs::write(dir.path().join("sluice.toml"), cfg).unwrap_or_else(|e| panic!("{e}"));
    let mut said = String::new();
    let keep = |said: &mut String, what: &str, out: &Output| {
        said.push_str(&format!(
            "\n=== {what}: stdout\n{}\n=== {what}: stderr\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    };
    let c = ["-c", "sluice.toml"];
    for args in [&["check"][..], &["run"], &["run", "--summary", "json"]] {
        let out = sluice(dir.path(), &[args, &c].concat());
        assert!(out.status.success(), "sluice {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        keep(&mut said, &format!("{args:?}"), &out);
    }
    let logs = said.clone();
    // Every record passed a door: the good one at the backend, the rest
    // in the quarantine, each by its id.
    let stored: Vec<String> = backend.seen().stored.clone();
    assert_eq!(stored, ["good"], "{said}");
    let list = sluice::store::Store::open_read_only(&dir.path().join("state"))
        .and_then(|s| s.quarantine_entries())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut entries = std::collections::BTreeMap::new();
    for e in &list {
        let payload = String::from_utf8_lossy(&e.payload.to_vec()).into_owned();
        let id =
            serde_json::from_str::<serde_json::Value>(&payload).ok().and_then(|v| v["id"].as_str().map(String::from));
        entries.insert(id.unwrap_or_default(), (e.reason.clone(), payload));
        said.push_str(&format!("\n=== entry\n{}", serde_json::to_string(e).unwrap_or_default()));
    }
    let ids: Vec<&str> = entries.keys().map(String::as_str).collect();
    assert_eq!(ids, ["notjson", "oversize", "reject", "sink", "trap", "ts"], "{list:#?}");
    for args in [&["quarantine", "list"][..], &["quarantine", "list", "--json"], &["quarantine", "stats"]] {
        let out = sluice(dir.path(), &[args, &c].concat());
        keep(&mut said, &format!("{args:?}"), &out);
    }
    for e in &list {
        let out = sluice(dir.path(), &["quarantine", "show", &e.id, "-c", "sluice.toml"]);
        keep(&mut said, "quarantine show", &out);
    }
    let out = sluice(dir.path(), &["quarantine", "export", "--to", "export.ndjson", "-c", "sluice.toml"]);
    keep(&mut said, "quarantine export", &out);
    said.push_str(&std::fs::read_to_string(dir.path().join("export.ndjson")).unwrap_or_default());
    let out = sluice(dir.path(), &["audit", "--summary", "-c", "sluice.toml"]);
    keep(&mut said, "audit --summary", &out);
    Run { dir, said, logs, entries }
}

/// Every file of the state store, as bytes (the WAL, tables, logs).
fn store_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                out.push((path.display().to_string(), bytes));
            }
        }
    }
    out
}

/// Where a secret shows: the lines of `text` that hold one.
fn leaks(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.contains(MARK)).collect()
}

fn holds(bytes: &[u8]) -> bool {
    bytes.windows(MARK.len()).any(|w| w == MARK.as_bytes())
}

#[test]
fn no_door_lets_a_masked_secret_out_and_each_would_without_masking() {
    // Without masking, the doors carry the secrets out: the masked run
    // below proves something only because of that.
    let open = run("");
    for (id, (reason, payload)) in &open.entries {
        assert!(payload.contains(MARK), "{id}: the original is kept unmasked: {payload}");
        // The plugin's own reason, the contract's preview of the body, the
        // panic message, the backend's answer: each quotes its record.
        if ["reject", "notjson", "trap", "sink"].contains(&id.as_str()) {
            assert!(reason.contains(MARK), "{id}: the reason quotes the record: {reason}");
        }
    }
    assert!(
        open.logs.lines().any(|l| l.contains("tattle: ") && l.contains(MARK)),
        "the plugin's log line quotes the record:\n{}",
        open.logs
    );
    assert!(store_files(&open.dir.path().join("state")).iter().any(|(_, b)| holds(b)), "the store keeps the originals");

    let masked = run("[quarantine]\nmask_fields = [\"password\"]\nmask_patterns = ['token=(\\S+)']\n");
    let lines = leaks(&masked.said);
    assert!(lines.is_empty(), "{} lines show a secret:\n{}", lines.len(), lines.join("\n"));
    for (file, bytes) in store_files(&masked.dir.path().join("state")) {
        assert!(!holds(&bytes), "a secret in the store file {file}");
    }
    // The doors were taken and said so, masked.
    for (id, (reason, _)) in &masked.entries {
        if ["reject", "notjson", "trap", "sink"].contains(&id.as_str()) {
            assert!(reason.contains("***"), "{id}: {reason}");
        }
    }
    assert!(masked.logs.lines().any(|l| l.contains("tattle: ") && l.contains("***")), "{}", masked.logs);
    assert!(masked.logs.contains("top quarantine reasons"), "the run's table: {}", masked.logs);
    println!(
        "secrets: {} records through 7 doors and 9 commands at debug level; none of their secrets shown",
        records().len()
    );
}
