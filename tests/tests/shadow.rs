//! `sluice shadow` over the Loghub quickstart: a candidate pattern config
//! (one syslog pattern changed) must list exactly the lines whose fields
//! change, and exactly the quarantined lines it would now accept, which an
//! independent reading of the input finds too. Another build of a plugin
//! that behaves the same must differ nowhere. Nothing is delivered: the
//! sink and the store are as they were.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use sluice_e2e::{plugin, plugin_v01, sluice_bin, test_data, workspace_root};

struct Quickstart {
    _tmp: tempfile::TempDir,
    state: PathBuf,
    events: PathBuf,
    config: PathBuf,
}

impl Quickstart {
    /// The quickstart's config, its state and sink in a temporary folder,
    /// run once (so its quarantine holds the kernel lines).
    fn run() -> Quickstart {
        let root = workspace_root();
        // Where scripts/quickstart puts the plugins; once per binary, so a
        // test never reads a file another is rewriting.
        static COPIED: std::sync::Once = std::sync::Once::new();
        COPIED.call_once(|| {
            let plugins = root.join("out").join("plugins");
            std::fs::create_dir_all(&plugins).unwrap_or_else(|e| panic!("{e}"));
            for name in ["pattern", "ts-window"] {
                std::fs::copy(plugin(name), plugins.join(format!("{name}.wasm"))).unwrap_or_else(|e| panic!("{e}"));
            }
        });
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let q = Quickstart {
            state: tmp.path().join("state"),
            events: tmp.path().join("events.ndjson"),
            config: root.join("examples").join("quickstart").join("sluice.toml"),
            _tmp: tmp,
        };
        let out = q.sluice(&["run"], &[]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        q
    }

    /// `sluice <command> -c CONFIG <args>`.
    fn sluice(&self, command: &[&str], args: &[&str]) -> std::process::Output {
        Command::new(sluice_bin!())
            .args(command)
            .arg("-c")
            .arg(&self.config)
            .args(args)
            .env("SLUICE__PIPELINE__STATE_DIR", &self.state)
            .env("SLUICE__SINK__PATH", &self.events)
            .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
            .output()
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// `shadow --json` with `args`: the differing records, and the totals.
    fn shadow(&self, args: &[&str]) -> (Vec<serde_json::Value>, serde_json::Value) {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.sluice(&["shadow"], &all);
        assert!(out.status.success(), "shadow: {}", String::from_utf8_lossy(&out.stderr));
        let mut lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
            .collect();
        let totals = lines.pop().unwrap_or_default();
        assert!(totals.get("totals").is_some(), "the last line holds the totals: {totals}");
        (lines, totals)
    }

    /// The store's files and the sink, as bytes: what "nothing written"
    /// is checked against.
    fn footprint(&self) -> (Vec<u8>, BTreeSet<(String, u64)>) {
        let sink = std::fs::read(&self.events).unwrap_or_default();
        let mut files = BTreeSet::new();
        for e in std::fs::read_dir(&self.state).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            // RocksDB's own log of the read-only opens is not state.
            if !name.starts_with("LOG") {
                files.insert((name, e.metadata().map(|m| m.len()).unwrap_or(0)));
            }
        }
        (sink, files)
    }
}

/// The quickstart's pattern config with its syslog pattern changed: the
/// `[pid]` made optional (kernel lines now match), and a failed password
/// captured as `User` instead of `Content`.
fn candidate_config(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(workspace_root().join("examples/quickstart/sluice.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    let cfg: toml::Table = text.parse().unwrap_or_else(|e| panic!("{e}"));
    let pattern = cfg["plugins"][0]["config"].clone();
    let mut pattern: serde_json::Value = serde_json::to_value(pattern).unwrap_or_else(|e| panic!("{e}"));
    let regex = pattern["patterns"][3]["regex"].as_str().unwrap_or_default().to_string();
    let old = r"\[%{INT:Pid}\]: *(?P<Content>.*?)\s*$";
    assert!(regex.contains(old), "the quickstart's syslog pattern changed: {regex}");
    let new =
        r"(?:\[%{INT:Pid}\])?: *(?:Failed password for (?:invalid user )?(?P<User>\S+) from .*?|(?P<Content>.*?))\s*$";
    pattern["patterns"][3]["regex"] = regex.replace(old, new).into();
    let path = dir.join("candidate.json");
    std::fs::write(&path, pattern.to_string()).unwrap_or_else(|e| panic!("{e}"));
    path
}

/// Every line of a Loghub sample as (position id, text), CR stripped.
fn lines(name: &str) -> Vec<(String, String)> {
    // As the config names it, resolved: sluice normalises its paths.
    let path = std::fs::canonicalize(test_data().join("loghub").join(name)).unwrap_or_else(|e| panic!("{e}"));
    let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    let mut offset = 0usize;
    for line in data.split(|b| *b == b'\n') {
        if !line.is_empty() {
            let text = String::from_utf8_lossy(line).trim_end_matches('\r').to_string();
            out.push((format!("file:{}#0@{offset}", path.display()), text));
        }
        offset += line.len() + 1;
    }
    out
}

#[test]
fn a_changed_pattern_lists_exactly_the_lines_whose_fields_change_and_the_quarantine_it_would_accept() {
    let q = Quickstart::run();
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let candidate = candidate_config(tmp.path());
    let before = q.footprint();
    let spec = format!("pattern={}", candidate.display());
    let (differing, totals) = q.shadow(&["--plugin-config", &spec]);

    // Read independently: a syslog line whose message is a failed password
    // for a user (the candidate's new alternative), in the two samples the
    // syslog pattern reads.
    let failed = regex::Regex::new(
        r"^\S+ +\d+ \d{2}:\d{2}:\d{2} \S+ [^\[:]+?\[\d+\]: *Failed password for (?:invalid user )?\S+ from ",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut expected_fields = BTreeSet::new();
    for (position, text) in lines("OpenSSH_2k.log").into_iter().chain(lines("Linux_2k.log")) {
        if failed.is_match(&text) {
            expected_fields.insert(position);
        }
    }
    assert!(expected_fields.len() > 400, "the sample has hundreds of failed passwords: {}", expected_fields.len());
    let with = |kind: &str| -> BTreeSet<String> {
        differing
            .iter()
            .filter(|d| d["differences"].as_array().is_some_and(|ds| ds.iter().any(|x| x["kind"] == kind)))
            .map(|d| d["position"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let fields = with("fields");
    assert_eq!(
        fields.symmetric_difference(&expected_fields).take(5).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "the lines whose fields changed are exactly the failed passwords"
    );
    for d in differing.iter().filter(|d| fields.contains(d["position"].as_str().unwrap_or_default())) {
        let at: BTreeSet<&str> =
            d["differences"].as_array().into_iter().flatten().filter_map(|x| x["at"].as_str()).collect();
        assert_eq!(at, BTreeSet::from(["Content", "User"]), "{d}");
    }

    // The kernel lines have no [pid]: quarantined by the current pattern,
    // accepted by the candidate. The quarantine is the reconciliation.
    let listed = q.sluice(&["quarantine", "list"], &["--json"]);
    let quarantined: BTreeSet<String> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|e| {
            let p = &e["position"];
            format!("file:{}#{}@{}", p["path"].as_str().unwrap_or_default(), p["generation"], p["offset"])
        })
        .collect();
    assert_eq!(quarantined.len(), 151, "the quickstart quarantines its 151 kernel lines");
    let outcome = with("outcome");
    assert_eq!(outcome, quarantined, "the outcome changed exactly for the quarantined lines");
    assert!(
        differing
            .iter()
            .filter(|d| outcome.contains(d["position"].as_str().unwrap_or_default()))
            .all(|d| d["now_accepted"] == true)
    );
    let t = &totals["totals"];
    assert_eq!(t["records"], 10_000);
    assert_eq!(t["differing"].as_u64(), Some((expected_fields.len() + quarantined.len()) as u64), "{totals}");
    assert_eq!(t["now_accepted"], 151, "{totals}");
    assert_eq!(t["now_rejected"], 0, "{totals}");

    // From the quarantine: the entries a replay with the candidate would
    // deliver, listed by entry.
    let (from_quarantine, totals) = q.shadow(&["--plugin-config", &spec, "--quarantine"]);
    assert_eq!(totals["totals"]["records"], 151);
    assert_eq!(totals["now_accepted"].as_array().map(Vec::len), Some(151), "{totals}");
    assert!(from_quarantine.iter().all(|d| d["entry"].is_string() && d["now_accepted"] == true));
    assert_eq!(q.footprint(), before, "nothing delivered, nothing written to the store");
    println!(
        "shadow: 10,000 lines, {} with changed fields (found by the test's own regex too), 151 quarantined now accepted",
        expected_fields.len()
    );
}

#[test]
fn another_build_of_a_plugin_that_behaves_the_same_differs_nowhere() {
    let q = Quickstart::run();
    // ts-window built against contract 0.1: another digest, same verdicts.
    let spec = format!("ts-window={}", plugin_v01("ts-window").display());
    let (differing, totals) = q.shadow(&["--plugin", &spec, "--limit", "3000"]);
    assert!(differing.is_empty(), "{:?}", differing.first());
    assert_eq!(totals["totals"]["records"], 3000, "--limit is kept");
    // A name the config does not have is refused, naming the plugins.
    let out = q.sluice(&["shadow"], &["--plugin", "nope=/dev/null"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no plugin \"nope\"") && stderr.contains("pattern"), "{stderr}");
}
