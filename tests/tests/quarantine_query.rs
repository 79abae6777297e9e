//! The quarantine as something to query: `list --json`, filters, `stats`
//! and `export` over more than 10,000 entries, checked entry by entry
//! against the store; and masking that reaches nested fields and text
//! that is not JSON, so that a masked value is in no entry, no export and
//! no file of the state store.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use sluice::store::Store;
use sluice_e2e::{now_rfc3339, plugin, sluice_bin};

const LINES: usize = 15_000;

fn sluice(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(sluice_bin!())
        .args(args)
        .current_dir(dir)
        .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() { out.extend(files(&p)) } else { out.push(p) }
    }
    out
}

#[test]
fn ten_thousand_entries_query_and_export_one_by_one_with_secrets_masked_everywhere() {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = tmp.path();
    // A third not JSON with a token, a third JSON without an id and a
    // password two levels down, a third good.
    let ts = now_rfc3339(0);
    let mut text = String::new();
    let mut offsets = Vec::new();
    for i in 0..LINES {
        offsets.push(text.len() as u64);
        match i % 3 {
            0 => text.push_str(&format!("GET /login token=S3CRET-{i} user=u{i}\n")),
            1 => text.push_str(&format!(
                "{{\"user\":{{\"name\":\"u{i}\",\"auth\":{{\"password\":\"S3CRET-{i}\"}}}},\"n\":{i}}}\n"
            )),
            _ => text.push_str(&format!("{{\"event_id\":\"ev-{i}\",\"ts\":\"{ts}\",\"n\":{i}}}\n")),
        }
    }
    std::fs::write(dir.join("in.log"), &text).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.join("sluice.toml"),
        format!(
            "[pipeline]\nname = \"q\"\nstate_dir = \"state\"\nbatch_size = 1000\n[source]\ntype = \"file\"\npaths = [\"in.log\"]\n\
             [[plugins]]\nname = \"json\"\npath = \"{}\"\nconfig = {{ id_field = \"event_id\", timestamp_field = \"ts\", require_id = true }}\n\
             [sink]\ntype = \"file\"\npath = \"out.ndjson\"\n\
             [quarantine]\nmask_fields = [\"password\"]\nmask_patterns = ['token=(\\S+)']\n",
            plugin("json").display()
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (code, _, err) = sluice(dir, &["run", "-c", "sluice.toml"]);
    assert_eq!(code, 0, "{err}");

    // The export, timed, then entry by entry against the store.
    let started = Instant::now();
    let (code, _, err) = sluice(dir, &["quarantine", "export", "-c", "sluice.toml", "--to", "export.ndjson"]);
    let took = started.elapsed();
    assert_eq!(code, 0, "{err}");
    let quarantined = LINES * 2 / 3;
    assert!(err.contains(&format!("exported {quarantined} entries")), "{err}");
    let exported: Vec<serde_json::Value> = std::fs::read_to_string(dir.join("export.ndjson"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let store = Store::open_read_only(&dir.join("state")).unwrap_or_else(|e| panic!("{e}"));
    let entries = store.quarantine_entries().unwrap_or_else(|e| panic!("{e}"));
    drop(store);
    assert_eq!(entries.len(), quarantined);
    assert_eq!(exported.len(), entries.len());
    let line_at: BTreeMap<u64, usize> = offsets.iter().enumerate().map(|(i, o)| (*o, i)).collect();
    for (got, want) in exported.iter().zip(&entries) {
        assert_eq!(*got, serde_json::to_value(want).unwrap_or_default(), "entry {}", want.id);
        // Each entry is its line, masked.
        let sluice::record::Position::File { offset, .. } = &want.position else { panic!("{:?}", want.position) };
        let i = line_at[offset];
        let payload = String::from_utf8_lossy(&want.payload.to_vec()).into_owned();
        match i % 3 {
            0 => {
                assert_eq!(payload, format!("GET /login token=*** user=u{i}"));
                assert_eq!(want.masked, ["pattern token=(\\S+)"]);
            }
            1 => {
                let value: serde_json::Value = serde_json::from_str(&payload).unwrap_or_default();
                assert_eq!(
                    value,
                    serde_json::json!({"user": {"name": format!("u{i}"), "auth": {"password": "***"}}, "n": i})
                );
                assert_eq!(want.masked, ["user.auth.password"]);
            }
            _ => panic!("a good line was quarantined: {payload}"),
        }
    }
    // `list --json` is the same entries; the filters keep what they name.
    let (code, listed, err) = sluice(dir, &["quarantine", "list", "--json", "-c", "sluice.toml"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(listed.lines().count(), quarantined);
    let count = |extra: &[&str]| {
        let mut args = vec!["quarantine", "list", "-c", "sluice.toml"];
        args.extend_from_slice(extra);
        let (code, out, err) = sluice(dir, &args);
        assert_eq!(code, 0, "{err}");
        out.lines().count()
    };
    assert_eq!(count(&["--reason", "not valid JSON"]), LINES / 3);
    assert_eq!(count(&["--plugin", "json", "--stage", "plugin"]), quarantined);
    assert_eq!(count(&["--stage", "sink"]), 0);
    assert_eq!(count(&["--since", "1h"]), quarantined);
    assert_eq!(count(&["--until", "1h"]), 0);
    assert_eq!(count(&["--replayed", "true"]), 0);
    let (code, out, err) = sluice(dir, &["quarantine", "list", "--since", "yesterday-ish", "-c", "sluice.toml"]);
    assert_eq!(code, 2, "{out}");
    assert!(err.contains("--since \"yesterday-ish\""), "{err}");
    // Stats: per stage, plugin and reason.
    let (code, stats, err) = sluice(dir, &["quarantine", "stats", "--json", "-c", "sluice.toml"]);
    assert_eq!(code, 0, "{err}");
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap_or_else(|e| panic!("{e}: {stats}"));
    assert_eq!(stats["entries"].as_u64(), Some(quarantined as u64));
    assert_eq!(stats["masked"].as_u64(), Some(quarantined as u64));
    assert_eq!(stats["by_plugin"]["json"].as_u64(), Some(quarantined as u64));
    // Reasons counted by their templates (values taken out): no more rows
    // than the reasons, and every entry counted once.
    let rows =
        |key: &str| stats[key].as_object().map(|m| (m.len(), m.values().filter_map(|v| v.as_u64()).sum::<u64>()));
    let (templates, counted) = rows("by_reason_template").unwrap_or_default();
    assert!(templates <= rows("by_reason").unwrap_or_default().0, "{stats}");
    assert_eq!(counted, quarantined as u64, "{stats}");
    let (_, table, _) = sluice(dir, &["quarantine", "stats", "-c", "sluice.toml"]);
    assert!(table.contains("by reason (values shown as …):"), "{table}");
    println!("{table}");

    // The baseline the export replaces: one `show` per entry, each opening
    // the store.
    let shown = Instant::now();
    for e in entries.iter().take(20) {
        let (code, out, err) = sluice(dir, &["quarantine", "show", "-c", "sluice.toml", &e.id]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains(&e.id));
    }
    let per_show = shown.elapsed().as_secs_f64() / 20.0;

    // No secret anywhere sluice keeps or prints.
    for file in files(&dir.join("state")) {
        let bytes = std::fs::read(&file).unwrap_or_default();
        assert!(!bytes.windows(6).any(|w| w == b"S3CRET"), "a secret in {}", file.display());
    }
    for out in [std::fs::read_to_string(dir.join("export.ndjson")).unwrap_or_default(), listed] {
        assert!(!out.contains("S3CRET"));
    }
    println!(
        "quarantine export: {quarantined} entries in {:.2} s ({:.0} entries/s), each matching the store; one `show` \
         per entry instead: {:.0} ms each, {:.0} s for all ({:.0}x); no secret in the store's {} files",
        took.as_secs_f64(),
        quarantined as f64 / took.as_secs_f64(),
        per_show * 1e3,
        per_show * quarantined as f64,
        per_show * quarantined as f64 / took.as_secs_f64(),
        files(&dir.join("state")).len()
    );
}
