//! The file pipeline end to end, through the `sluice` binary: files in,
//! RocksDB for state, an NDJSON file out. Every test reconciles event ids
//! (what went in against what the sink and the quarantine hold), never
//! only counts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sluice::store::Store;
use sluice_e2e::{plugin, sluice_bin};

struct Fixture {
    dir: tempfile::TempDir,
    /// The ids of good lines, and the malformed lines, as written.
    good: BTreeSet<String>,
    malformed: BTreeSet<String>,
    written: usize,
}

impl Fixture {
    fn new(n: usize) -> Fixture {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut f = Fixture { dir, good: BTreeSet::new(), malformed: BTreeSet::new(), written: 0 };
        f.append(n);
        f
    }

    /// Append `n` JSON lines to input.log, with unique `event_id`s and fresh
    /// timestamps; every tenth id repeated as another line (a producer's
    /// duplicate), and every fiftieth line malformed.
    fn append(&mut self, n: usize) {
        use std::io::Write;
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
        let ts = sluice_guest::time::format_rfc3339(now * 1_000_000_000);
        let mut text = String::new();
        for i in self.written..self.written + n {
            if i % 50 == 49 {
                let bad = format!("{{\"event_id\":\"bad-{i}\",\"ts\":");
                text.push_str(&bad);
                self.malformed.insert(bad);
            } else {
                let id = format!("ev-{i:07}");
                let line =
                    format!("{{\"event_id\":\"{id}\",\"ts\":\"{ts}\",\"n\":{i},\"pad\":\"{}\"}}", "x".repeat(120));
                text.push_str(&line);
                if i % 10 == 0 {
                    text.push('\n');
                    text.push_str(&line);
                }
                self.good.insert(id);
            }
            text.push('\n');
        }
        self.written += n;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("input.log"))
            .unwrap_or_else(|e| panic!("{e}"));
        file.write_all(text.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn config(&self, extra: &str) -> PathBuf {
        let cfg = format!(
            r#"
[pipeline]
name = "e2e"
state_dir = "state"
batch_size = 200

[source]
type = "file"
paths = ["input*.log"]

[[plugins]]
name = "json"
path = "{json}"
config = {{ id_field = "event_id", timestamp_field = "ts", require_id = true }}

[[plugins]]
name = "ts-window"
path = "{window}"
config = {{ max_age = "1d" }}

[sink]
type = "file"
path = "out/events.ndjson"
{extra}
"#,
            json = plugin("json").display(),
            window = plugin("ts-window").display(),
        );
        let path = self.path("sluice.toml");
        std::fs::write(&path, cfg).unwrap_or_else(|e| panic!("{e}"));
        path
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(sluice_bin!());
        c.args(args)
            .current_dir(self.dir.path())
            // A compile cache shared by the suite, outside the fixture.
            .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
            .stdin(Stdio::null());
        c
    }

    fn run(&self, config: &Path) -> (i32, String) {
        let out =
            // The JSON summary: what these tests read the doors from.
            self.command(&["run", "-c", &config.display().to_string(), "--summary", "json"])
                .output()
                .unwrap_or_else(|e| panic!("{e}"));
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
    }

    /// Make `config` follow its files, and run it with its log (info) in
    /// run.log: the child and the log's path.
    fn follow(&self, config: &Path) -> (Child, PathBuf) {
        let text = std::fs::read_to_string(config).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(config, text.replace("paths = [\"input*.log\"]", "paths = [\"input*.log\"]\nfollow = true"))
            .unwrap_or_else(|e| panic!("{e}"));
        let log = self.path("run.log");
        let child = self
            .command(&["run", "-c", &config.display().to_string()])
            .env("SLUICE_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap_or_else(|e| panic!("{e}")))
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        (child, log)
    }

    fn spawn(&self, config: &Path) -> Child {
        self.command(&["run", "-c", &config.display().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// The ids in the sink, in order of delivery.
    fn delivered(&self) -> Vec<String> {
        ids_in(&self.path("out/events.ndjson"))
    }

    /// Runs of `config` over 3,000 new lines each, SIGKILLed at a random
    /// moment, until `kills` kills; `at_kill` after each. Returns the
    /// cycles it took.
    fn kill_at_random(
        &mut self,
        config: &Path,
        kills: usize,
        mut rng: u64,
        mut at_kill: impl FnMut(&Fixture),
    ) -> usize {
        let (mut killed, mut cycles) = (0, 0);
        // Each cycle brings new lines, so there is always work to
        // interrupt, whatever the speed of the machine.
        while killed < kills {
            cycles += 1;
            assert!(cycles <= kills * 10, "only {killed} kills in {cycles} cycles");
            self.append(3000);
            let mut child = self.spawn(config);
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            std::thread::sleep(Duration::from_millis(20 + rng % 400));
            match child.try_wait() {
                Ok(Some(status)) => assert!(status.success(), "a run failed: {status}"),
                _ => {
                    let _ = child.kill(); // SIGKILL
                    let _ = child.wait();
                    killed += 1;
                    at_kill(self);
                }
            }
        }
        cycles
    }

    /// The quarantined payloads, with their reasons.
    fn quarantined(&self) -> BTreeMap<String, String> {
        sluice_e2e::quarantine_entries(&self.path("state")).into_iter().collect()
    }

    /// Nothing lost: every good id delivered, every malformed line
    /// quarantined with a reason, nothing else in either.
    fn assert_reconciled(&self) {
        let delivered: BTreeSet<String> = self.delivered().into_iter().collect();
        let missing: Vec<_> = self.good.difference(&delivered).take(5).collect();
        let unexpected: Vec<_> = delivered.difference(&self.good).take(5).collect();
        assert!(missing.is_empty(), "ids lost: {missing:?} (and maybe more)");
        assert!(unexpected.is_empty(), "ids never produced: {unexpected:?}");
        let quarantined = self.quarantined();
        let q: BTreeSet<String> = quarantined.keys().cloned().collect();
        assert_eq!(q, self.malformed, "the quarantine holds exactly the malformed lines");
        for (line, reason) in &quarantined {
            assert!(reason.contains("not valid JSON"), "{line}: {reason}");
        }
    }
}

impl Fixture {
    /// `sluice audit --json` of `ids`, one answer per id, by id.
    fn audit(&self, config: &Path, ids: &[String]) -> BTreeMap<String, serde_json::Value> {
        let list = self.path("audit-ids.txt");
        std::fs::write(&list, ids.join("\n")).unwrap_or_else(|e| panic!("{e}"));
        let out = self
            .command(&[
                "audit",
                "-c",
                &config.display().to_string(),
                "--json",
                "--from-file",
                &list.display().to_string(),
            ])
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.status.code(), Some(0), "audit: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"));
                (v["id"].as_str().unwrap_or_default().to_string(), v)
            })
            .collect()
    }

    /// The audit of every id written (and of ids never written) agrees
    /// with the reconciliation: each delivered id's trail points at a line
    /// of the input that holds it, each repeated id has an absorbed
    /// duplicate that does too, each malformed line's id is quarantined,
    /// and the rest are unknown.
    fn assert_audited(&self, config: &Path) {
        let input = std::fs::read(self.path("input.log")).unwrap_or_else(|e| panic!("{e}"));
        let holds = |passage: &serde_json::Value, id: &str| -> bool {
            let Some(offset) = passage["source"]["offset"].as_u64() else { return false };
            let line = input[offset as usize..].split(|b| *b == b'\n').next().unwrap_or_default();
            passage["source"]["name"].as_str().is_some_and(|n| n.ends_with("input.log"))
                && String::from_utf8_lossy(line).contains(&format!("\"event_id\":\"{id}\""))
        };
        let bad: Vec<String> = self
            .malformed
            .iter()
            .filter_map(|l| l.split('"').find(|t| t.starts_with("bad-")).map(String::from))
            .collect();
        let unknown: Vec<String> = (0..50).map(|i| format!("never-{i}")).collect();
        let ids: Vec<String> = self.good.iter().chain(&bad).chain(&unknown).cloned().collect();
        let started = std::time::Instant::now();
        let answers = self.audit(config, &ids);
        let took = started.elapsed();
        assert_eq!(answers.len(), ids.len(), "one answer per id");
        let mut absorbed = 0;
        for id in &self.good {
            let a = &answers[id];
            assert_eq!(a["verdict"], "delivered", "{a}");
            let d = &a["delivered"];
            assert!(holds(d, id), "the delivered trail points at a line holding {id}: {a}");
            assert!(d["sink"].as_str().is_some_and(|s| s.contains("out/events.ndjson")), "{a}");
            let plugins: Vec<&str> =
                d["plugins"].as_array().map(|p| p.iter().filter_map(|v| v.as_str()).collect()).unwrap_or_default();
            assert!(
                plugins.len() == 2 && plugins[0].starts_with("json@") && plugins[1].starts_with("ts-window@"),
                "{a}"
            );
            let n: usize = id.trim_start_matches("ev-").parse().unwrap_or(1);
            if n.is_multiple_of(10) {
                // The producer's repeat: absorbed, from a line holding it.
                assert!(holds(&a["absorbed"], id), "{id} was repeated: its absorbed duplicate: {a}");
            }
            if !a["absorbed"].is_null() {
                absorbed += 1;
                assert!(holds(&a["absorbed"], id), "{a}");
            }
        }
        for id in &bad {
            let a = &answers[id];
            assert_eq!(a["verdict"], "quarantined", "{a}");
            assert_eq!(a["quarantined"][0]["matched"], "payload", "{a}");
            assert_eq!(a["quarantined"][0]["stage"], "plugin", "{a}");
        }
        for id in &unknown {
            assert_eq!(answers[id]["verdict"], "unknown", "{}", answers[id]);
        }
        // The summary counts the same doors.
        let out = self
            .command(&["audit", "-c", &config.display().to_string(), "--summary", "--json"])
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(summary["delivered"].as_u64(), Some(self.good.len() as u64), "{summary}");
        assert_eq!(summary["duplicate_ids"].as_u64(), Some(absorbed), "{summary}");
        assert_eq!(summary["quarantined"].as_u64(), Some(bad.len() as u64), "{summary}");
        println!(
            "audit: {} ids answered in {:.2} s: {} delivered ({absorbed} with a duplicate absorbed), {} quarantined, {} unknown",
            ids.len(),
            took.as_secs_f64(),
            self.good.len(),
            bad.len(),
            unknown.len()
        );
    }
}

fn counts(ids: &[String]) -> BTreeMap<&str, usize> {
    let mut m = BTreeMap::new();
    for id in ids {
        *m.entry(id.as_str()).or_insert(0) += 1;
    }
    m
}

#[test]
fn known_ids_with_duplicates_and_malformed_lines_reconcile_exactly() {
    let f = Fixture::new(3000);
    let config = f.config("");
    let (code, stderr) = f.run(&config);
    assert_eq!(code, 0, "{stderr}");
    f.assert_reconciled();
    let ids = f.delivered();
    let dups: Vec<_> = counts(&ids).into_iter().filter(|(_, n)| *n > 1).collect();
    assert!(dups.is_empty(), "the producer's repeated ids must be absorbed by dedup: {dups:?}");
    assert!(stderr.contains("\"duplicate\":300"), "300 repeated lines counted as duplicates: {stderr}");
}

#[test]
fn a_clean_restart_redelivers_nothing_and_a_replay_inside_the_window_neither() {
    let f = Fixture::new(1000);
    let config = f.config("");
    assert_eq!(f.run(&config).0, 0);
    let first = f.delivered();
    // Same state: the checkpoint says everything was read.
    let (code, stderr) = f.run(&config);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(f.delivered(), first, "a restart after a clean stop delivers nothing");
    assert!(stderr.contains("\"records\":0"), "{stderr}");
    // The same lines under a new name are a new partition, read from the
    // start; the dedup window keeps every one of them from the sink.
    std::fs::copy(f.path("input.log"), f.path("input-copy.log")).unwrap_or_else(|e| panic!("{e}"));
    let (code, stderr) = f.run(&config);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(f.delivered(), first, "a replay inside the window delivers nothing twice");
    assert!(stderr.contains("\"delivered\":0"), "{stderr}");
    // The audit says where each absorbed copy came from: the other file.
    let answers = f.audit(&config, &first[..10]);
    for id in &first[..10] {
        let a = &answers[id];
        assert!(a["delivered"]["source"]["name"].as_str().is_some_and(|n| n.ends_with("/input.log")), "{a}");
        assert!(a["absorbed"]["source"]["name"].as_str().is_some_and(|n| n.ends_with("/input-copy.log")), "{a}");
    }
}

#[test]
fn sigkill_at_random_moments_loses_nothing_and_every_duplicate_has_a_cause() {
    let mut f = Fixture::new(0);
    let config = f.config("");
    let mut boundaries = Vec::new(); // sink line count when each killed run ended
    let kills = 20;
    let cycles = f.kill_at_random(&config, kills, 0x9e37_79b9_7f4a_7c15, |f| boundaries.push(f.delivered().len()));
    let (code, stderr) = f.run(&config);
    assert_eq!(code, 0, "the final run: {stderr}");
    f.assert_reconciled();
    f.assert_audited(&config);

    // Every duplicate in the sink must be explained by a kill between the
    // sink's sync and the dedup write: its first copy is among the last
    // batches delivered before a kill, its second among the first batches
    // after it. A partition has up to `pipeline.in_flight` (default 4)
    // batches of 200 between its sink and its durable write.
    let ids = f.delivered();
    let duplicates = assert_duplicates_explained("the sink", &ids, &boundaries, 200 * 4);
    println!(
        "kill safety: {kills} SIGKILLs in {cycles} cycles, {} ids delivered, {} quarantined, {duplicates} duplicates, each explained by a kill",
        ids.len() - duplicates,
        f.malformed.len()
    );
}

/// The ids in one sink's file, in order of delivery. A line without its
/// end was torn by a kill mid-write: never acknowledged, cut by the sink
/// when it next opens the file.
fn ids_in(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let complete = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
    complete
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}"));
            v["id"].as_str().unwrap_or_else(|| panic!("a line without id: {l}")).to_string()
        })
        .collect()
}

/// Each duplicate in `ids` (a sink's lines in order) is explained by a
/// kill: its first copy among the last `batch` lines before a kill, its
/// second among the first `batch` after it. Returns how many there were.
fn assert_duplicates_explained(sink: &str, ids: &[String], boundaries: &[usize], batch: usize) -> usize {
    let mut first_seen: BTreeMap<&str, usize> = BTreeMap::new();
    let mut duplicates = 0;
    for (pos, id) in ids.iter().enumerate() {
        if let Some(&first) = first_seen.get(id.as_str()) {
            duplicates += 1;
            let explained = boundaries.iter().any(|&b| first < b && first + batch >= b && pos >= b && pos < b + batch);
            assert!(
                explained,
                "{sink}: duplicate {id} at lines {first} and {pos} is not explained by a kill ({boundaries:?})"
            );
        } else {
            first_seen.insert(id, pos);
        }
    }
    duplicates
}

/// Issue 44: one stream to two sinks through routes, killed at random.
/// Each sink is reconciled by id: every id routed to it is in it, none it
/// was not routed to is, and its duplicates are explained by kills.
#[test]
fn two_sinks_and_routes_under_sigkill_reconcile_each_sink_by_id() {
    let mut f = Fixture::new(0);
    let config = f.config("");
    let text = std::fs::read_to_string(&config).unwrap_or_else(|e| panic!("{e}"));
    let single = "[sink]\ntype = \"file\"\npath = \"out/events.ndjson\"\n";
    assert!(text.contains(single));
    let routed = "[[sinks]]\nname = \"all\"\ntype = \"file\"\npath = \"out/all.ndjson\"\n\
                  [[sinks]]\nname = \"fives\"\ntype = \"file\"\npath = \"out/fives.ndjson\"\n\
                  [[routes]]\nfield = \"/event_id\"\nmatches = \"[05]$\"\nsinks = [\"all\", \"fives\"]\n\
                  [[routes]]\nfield = \"/event_id\"\nmatches = \"7$\"\nsinks = [\"fives\"]\n\
                  [[routes]]\nsinks = [\"all\"]\n";
    std::fs::write(&config, text.replace(single, routed)).unwrap_or_else(|e| panic!("{e}"));
    let (all_path, fives_path) = (f.path("out/all.ndjson"), f.path("out/fives.ndjson"));
    let mut boundaries: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let kills = 10;
    let cycles = f.kill_at_random(&config, kills, 0x2545_f491_4f6c_dd1d, |_| {
        boundaries.entry("all").or_default().push(ids_in(&all_path).len());
        boundaries.entry("fives").or_default().push(ids_in(&fives_path).len());
    });
    let (code, stderr) = f.run(&config);
    assert_eq!(code, 0, "the final run: {stderr}");
    let to_fives = |id: &String| id.ends_with('0') || id.ends_with('5') || id.ends_with('7');
    let to_all = |id: &String| !id.ends_with('7');
    let batch = 200 * 4;
    let mut duplicates = Vec::new();
    for (sink, path, routed) in
        [("all", &all_path, &to_all as &dyn Fn(&String) -> bool), ("fives", &fives_path, &to_fives)]
    {
        let ids = ids_in(path);
        let got: BTreeSet<String> = ids.iter().cloned().collect();
        let want: BTreeSet<String> = f.good.iter().filter(|id| routed(id)).cloned().collect();
        let missing: Vec<_> = want.difference(&got).take(5).collect();
        let stray: Vec<_> = got.difference(&want).take(5).collect();
        assert!(missing.is_empty(), "{sink}: ids routed to it and lost: {missing:?}");
        assert!(stray.is_empty(), "{sink}: ids it was not routed to: {stray:?}");
        assert!(!want.is_empty());
        duplicates.push(assert_duplicates_explained(sink, &ids, &boundaries[sink], batch));
    }
    let quarantined: BTreeSet<String> = f.quarantined().keys().cloned().collect();
    assert_eq!(quarantined, f.malformed, "the quarantine holds exactly the malformed lines");
    // The audit shows each sink's delivery, and only where it was routed.
    let sample: Vec<String> =
        f.good.iter().filter(|id| ["0", "1", "7"].iter().any(|d| id.ends_with(d))).take(60).cloned().collect();
    let answers = f.audit(&config, &sample);
    for id in &sample {
        let a = &answers[id];
        assert_eq!(a["verdict"], "delivered", "{a}");
        let per_sink: BTreeMap<&str, &serde_json::Value> =
            a["sinks"].as_array().into_iter().flatten().filter_map(|s| Some((s["sink"].as_str()?, s))).collect();
        for (sink, routed) in [("all", to_all(id)), ("fives", to_fives(id))] {
            let delivered = &per_sink.get(sink).unwrap_or_else(|| panic!("no {sink} in {a}"))["delivered"];
            assert_eq!(delivered.is_object(), routed, "{id} at {sink}: {a}");
            if routed {
                let named = delivered["sink"].as_str().unwrap_or_default();
                assert!(named.starts_with(&format!("{sink}: ")) && named.contains(&format!("{sink}.ndjson")), "{a}");
            }
        }
    }
    println!(
        "two sinks: {kills} SIGKILLs in {cycles} cycles, {} ids produced, duplicates all {} / fives {}, each explained by a kill",
        f.good.len(),
        duplicates[0],
        duplicates[1]
    );
}

#[test]
fn bad_configs_stop_the_start_with_exit_code_2_naming_the_key() {
    let f = Fixture::new(10);
    let cases: &[(&str, &str)] = &[
        ("[dedup]\nwindow = \"a week\"", "invalid duration \"a week\""),
        ("[dedup]\nwindwo = \"7d\"", "windwo"),
        ("[quarantine]\nmask_fields = 3", "mask_fields"),
        ("[shutdown]\ngrace = \"-1s\"", "invalid duration"),
    ];
    for (extra, expect) in cases {
        let config = f.config(extra);
        let (code, stderr) = f.run(&config);
        assert_eq!(code, 2, "{extra}: {stderr}");
        assert!(stderr.contains(expect), "{extra}: expected {expect:?} in {stderr}");
        assert!(!f.path("out/events.ndjson").exists(), "{extra}: nothing may be delivered");
    }
    // A plugin that refuses its config, and one that is missing.
    let config = f.config("");
    let text = std::fs::read_to_string(&config).unwrap_or_default();
    std::fs::write(&config, text.replace("max_age = \"1d\"", "max_age = \"1d\", max_agee = 1"))
        .unwrap_or_else(|e| panic!("{e}"));
    let (code, stderr) = f.run(&config);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("ts-window") && stderr.contains("unknown field `max_agee`"), "{stderr}");
    std::fs::write(&config, text.replace(&plugin("json").display().to_string(), "/no/such/json.wasm"))
        .unwrap_or_else(|e| panic!("{e}"));
    let (code, stderr) = f.run(&config);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("plugins[0].path") && stderr.contains("/no/such/json.wasm"), "{stderr}");
    // A bad size, and a plugin file that is not a component.
    std::fs::write(
        &config,
        text.replace("paths = [\"input*.log\"]", "paths = [\"input*.log\"]\nmax_line_bytes = \"lots\""),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (code, stderr) = f.run(&config);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("invalid size \"lots\""), "{stderr}");
    std::fs::write(f.path("fake.wasm"), b"MZ not wasm").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&config, text.replace(&plugin("json").display().to_string(), "fake.wasm"))
        .unwrap_or_else(|e| panic!("{e}"));
    let (code, stderr) = f.run(&config);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("fake.wasm") && stderr.contains("not a valid WebAssembly component"), "{stderr}");
    // Sources that match nothing, a sink that cannot be created.
    std::fs::write(&config, text.replace("paths = [\"input*.log\"]", "paths = [\"nothing-*.log\"]"))
        .unwrap_or_else(|e| panic!("{e}"));
    let (code, stderr) = f.run(&config);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("match no file") && stderr.contains("nothing-*.log"), "{stderr}");
    std::fs::write(&config, text.replace("path = \"out/events.ndjson\"", "path = \"input.log/events.ndjson\""))
        .unwrap_or_else(|e| panic!("{e}"));
    let (code, stderr) = f.run(&config);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("sink.path") && stderr.contains("input.log is not a folder"), "{stderr}");
    // Another pipeline's state store.
    std::fs::write(&config, &text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f.run(&config).0, 0);
    std::fs::write(&config, text.replace("name = \"e2e\"", "name = \"other\"")).unwrap_or_else(|e| panic!("{e}"));
    let (code, stderr) = f.run(&config);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("belongs to pipeline \"e2e\""), "{stderr}");
    // A config file that does not exist.
    let (code, stderr) = f.run(&f.path("nope.toml"));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("nope.toml"), "{stderr}");
}

/// Poll the sink until it holds every id in `want`, or fail after 30 s.
fn wait_for(f: &Fixture, want: &BTreeSet<String>, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let have: BTreeSet<String> = f.delivered().into_iter().collect();
        if want.is_subset(&have) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: {} ids still missing after 30 s",
            want.difference(&have).count()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn lines(from: usize, n: usize, ts: &str) -> (String, BTreeSet<String>) {
    let mut text = String::new();
    let mut ids = BTreeSet::new();
    for i in from..from + n {
        let id = format!("rot-{i:06}");
        text.push_str(&format!("{{\"event_id\":\"{id}\",\"ts\":\"{ts}\"}}\n"));
        ids.insert(id);
    }
    (text, ids)
}

fn append(path: &Path, text: &str) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap_or_else(|e| panic!("{e}"));
    file.write_all(text.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn rotation_by_rename_and_by_copytruncate_during_a_run_loses_nothing() {
    let f = Fixture::new(0);
    let config = f.config("");
    let text = std::fs::read_to_string(&config).unwrap_or_default();
    let text = text
        .replace("paths = [\"input*.log\"]", "paths = [\"app.log\"]\nfollow = true\npoll_interval = \"20ms\"")
        .replace("[sink]", "[shutdown]\ngrace = \"5s\"\n\n[sink]");
    std::fs::write(&config, text).unwrap_or_else(|e| panic!("{e}"));
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let ts = sluice_guest::time::format_rfc3339(now * 1_000_000_000);
    let log = f.path("app.log");
    let mut all = BTreeSet::new();
    let mut next = 0;
    let mut write = |path: &Path, n: usize, all: &mut BTreeSet<String>| {
        let (text, ids) = lines(next, n, &ts);
        next += n;
        append(path, &text);
        all.extend(ids);
    };

    write(&log, 1000, &mut all);
    let mut child = f.spawn(&config);
    wait_for(&f, &all, "before any rotation");

    // Rename-and-create, with a writer that still appends to the renamed
    // file after the rename (it holds the old descriptor).
    write(&log, 500, &mut all);
    let rotated = f.path("app.log.1");
    std::fs::rename(&log, &rotated).unwrap_or_else(|e| panic!("{e}"));
    write(&rotated, 200, &mut all);
    write(&log, 700, &mut all);
    wait_for(&f, &all, "after the rename rotation");

    // Copytruncate, then writes that soon pass the old position.
    std::fs::copy(&log, f.path("app.log.2")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .and_then(|file| file.set_len(0))
        .unwrap_or_else(|e| panic!("{e}"));
    write(&log, 2000, &mut all);
    wait_for(&f, &all, "after the copytruncate rotation");

    // SIGTERM: a clean stop, exit 0.
    let pid = child.id().to_string();
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let status = child.wait().unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success(), "SIGTERM must stop cleanly: {status}");

    let delivered = f.delivered();
    let dups: Vec<_> = counts(&delivered).into_iter().filter(|(_, n)| *n > 1).map(|(id, _)| id.to_string()).collect();
    assert!(dups.is_empty(), "no crash, so no duplicate: {dups:?}");
    assert_eq!(delivered.into_iter().collect::<BTreeSet<_>>(), all, "every id exactly once");

    // A restart after the clean stop re-delivers nothing.
    let text = std::fs::read_to_string(&config).unwrap_or_default().replace("follow = true", "follow = false");
    std::fs::write(&config, text).unwrap_or_else(|e| panic!("{e}"));
    let before = f.delivered().len();
    let (code, stderr) = f.run(&config);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(f.delivered().len(), before, "{stderr}");
}

#[test]
fn quarantine_replay_after_a_repair_delivers_once_and_marks_entries() {
    let mut f = Fixture::new(100);
    // Twenty events older than the window: ts-window rejects them.
    let mut old_ids = BTreeSet::new();
    let mut text = String::new();
    for i in 0..20 {
        let id = format!("old-{i:03}");
        text.push_str(&format!("{{\"event_id\":\"{id}\",\"ts\":\"2001-01-01T00:00:00Z\",\"token\":\"s3cret-{i}\"}}\n"));
        old_ids.insert(id);
    }
    append(&f.path("input.log"), &text);
    let config = f.config("[quarantine]\nmask_fields = []");
    assert_eq!(f.run(&config).0, 0);
    let q = f.quarantined();
    assert_eq!(q.len(), 20 + f.malformed.len(), "{q:?}");
    assert!(q.values().filter(|r| r.contains("older than max_age 1d")).count() == 20);

    // The repair: a window wide enough. Replay through the current pipeline.
    let text = std::fs::read_to_string(&config).unwrap_or_default().replace("max_age = \"1d\"", "max_age = \"10000d\"");
    std::fs::write(&config, text).unwrap_or_else(|e| panic!("{e}"));
    let replay = |f: &Fixture| {
        let out = f
            .command(&["quarantine", "replay", "-c", &config.display().to_string(), "--summary", "json"])
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let first = replay(&f);
    assert!(
        first.contains("\"delivered\":20") && first.contains(&format!("\"still_quarantined\":{}", f.malformed.len())),
        "{first}"
    );
    // Everything reconciles: the good ids once, the old ids once now.
    f.good.extend(old_ids.iter().cloned());
    let delivered = f.delivered();
    assert_eq!(delivered.iter().cloned().collect::<BTreeSet<_>>(), f.good);
    assert_eq!(delivered.len(), f.good.len(), "each id exactly once");

    // Replaying again: replayed entries are skipped; the malformed ones
    // fail again, one more attempt each; nothing is delivered twice.
    let second = replay(&f);
    assert!(second.contains("\"skipped_replayed\":20") && second.contains("\"delivered\":0"), "{second}");
    let store = Store::open_read_only(&f.path("state")).unwrap_or_else(|e| panic!("{e}"));
    for e in store.quarantine_entries().unwrap_or_else(|e| panic!("{e}")) {
        if old_ids.iter().any(|id| e.payload.to_vec().windows(id.len()).any(|w| w == id.as_bytes())) {
            assert!(e.replayed.is_some(), "{e:?}");
        } else {
            assert_eq!((e.attempts, e.replayed.is_none()), (3, true), "{e:?}");
        }
    }
    // Forcing a replayed entry again (--id): dedup absorbs it.
    let id = store
        .quarantine_entries()
        .ok()
        .and_then(|v| v.into_iter().find(|e| e.replayed.is_some()))
        .map(|e| e.id)
        .unwrap_or_default();
    drop(store);
    let out = f
        .command(&["quarantine", "replay", "-c", &config.display().to_string(), "--id", &id, "--summary", "json"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let third = String::from_utf8_lossy(&out.stderr);
    assert!(third.contains("\"duplicate\":1") && third.contains("\"delivered\":0"), "{third}");
    assert_eq!(f.delivered().len(), f.good.len());
}

#[test]
fn masked_fields_never_reach_the_quarantine() {
    let f = Fixture::new(0);
    append(
        &f.path("input.log"),
        "{\"event_id\":\"m1\",\"ts\":\"2001-01-01T00:00:00Z\",\"auth\":{\"token\":\"s3cret\"},\"user\":\"ann\"}\n",
    );
    let config = f.config("[quarantine]\nmask_fields = [\"auth.token\"]");
    assert_eq!(f.run(&config).0, 0);
    let store = Store::open_read_only(&f.path("state")).unwrap_or_else(|e| panic!("{e}"));
    let entries = store.quarantine_entries().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(entries.len(), 1);
    let payload = String::from_utf8_lossy(&entries[0].payload.to_vec()).into_owned();
    assert!(!payload.contains("s3cret") && payload.contains("\"user\":\"ann\""), "{payload}");
    assert_eq!(entries[0].masked, vec!["auth.token".to_string()]);
    // The state directory is the owner's alone.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(f.path("state")).map(|m| m.permissions().mode() & 0o777).unwrap_or(0);
    assert_eq!(mode, 0o700);
}

#[test]
fn a_line_longer_than_the_limit_is_quarantined_whole() {
    let mut f = Fixture::new(0);
    let long = format!("{{\"event_id\":\"long\",\"blob\":\"{}\"}}", "y".repeat(100_000));
    append(&f.path("input.log"), &format!("{long}\n"));
    f.append(10);
    let config = f.config("");
    let text = std::fs::read_to_string(&config)
        .unwrap_or_default()
        .replace("paths = [\"input*.log\"]", "paths = [\"input*.log\"]\nmax_line_bytes = \"64KiB\"");
    std::fs::write(&config, text).unwrap_or_else(|e| panic!("{e}"));
    let (code, stderr) = f.run(&config);
    assert_eq!(code, 0, "{stderr}");
    let store = Store::open_read_only(&f.path("state")).unwrap_or_else(|e| panic!("{e}"));
    let entries = store.quarantine_entries().unwrap_or_else(|e| panic!("{e}"));
    let entry = entries.iter().find(|e| e.stage == "source").unwrap_or_else(|| panic!("no source entry: {entries:?}"));
    assert_eq!(entry.payload.to_vec(), long.as_bytes(), "kept whole");
    let expect = format!("line of {} bytes exceeds source.max_line_bytes 65536", long.len());
    assert_eq!(entry.reason, expect);
    // The lines after it were delivered.
    let delivered: BTreeSet<String> = f.delivered().into_iter().collect();
    assert_eq!(delivered, f.good);
}

#[test]
fn a_failing_partition_stops_the_others_and_the_run_fails() {
    let mut f = Fixture::new(0);
    f.append(10);
    let config = f.config("");
    // Reading /proc/self/mem at offset 0 fails (EIO): a source that breaks
    // mid-run. The other file is followed and would be tailed forever; the
    // failure must stop it.
    let text = std::fs::read_to_string(&config).unwrap_or_default().replace(
        "paths = [\"input*.log\"]",
        "paths = [\"input*.log\", \"/proc/self/mem\"]\nfollow = true\npoll_interval = \"20ms\"",
    );
    std::fs::write(&config, text).unwrap_or_else(|e| panic!("{e}"));
    let mut child = f
        .command(&["run", "-c", &config.display().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the run did not end: a failed partition must stop the others");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut stderr);
    }
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("/proc/self/mem"), "the error names the failing source: {stderr}");
}

/// A sink that cannot write (every write to /dev/full fails with ENOSPC)
/// is a sick backend, not a bad record: the breaker opens, nothing moves,
/// and SIGTERM ends the run cleanly; the records are read again next time.
#[test]
fn a_full_disk_under_the_file_sink_waits_behind_the_breaker_and_loses_nothing() {
    let mut f = Fixture::new(0);
    f.append(10);
    let config = f.config("");
    let text = std::fs::read_to_string(&config)
        .unwrap_or_default()
        .replace("path = \"out/events.ndjson\"", "path = \"/dev/full\"\n[sink.breaker]\ninitial_probe = \"100ms\"");
    std::fs::write(&config, &text).unwrap_or_else(|e| panic!("{e}"));
    let mut child = f
        .command(&["run", "-c", &config.display().to_string()])
        .env("SLUICE_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    std::thread::sleep(Duration::from_secs(2));
    assert!(child.try_wait().ok().flatten().is_none(), "the run waits for the sink");
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("circuit breaker opened") && stderr.contains("No space left on device"), "{stderr}");
    {
        let store = Store::open_read_only(&f.path("state")).unwrap_or_else(|e| panic!("{e}"));
        let cp = store.checkpoint(&f.path("input.log").display().to_string()).unwrap_or_else(|e| panic!("{e}"));
        assert!(cp.as_ref().is_none_or(|c| c.offset == 0), "nothing was delivered, so no checkpoint moved: {cp:?}");
    }
    // Space again: the same records arrive, each once.
    std::fs::write(&config, text.replace("path = \"/dev/full\"", "path = \"out/events.ndjson\""))
        .unwrap_or_else(|e| panic!("{e}"));
    let (code, stderr) = f.run(&config);
    assert_eq!(code, 0, "{stderr}");
    f.assert_reconciled();
}

/// A run stuck in a batch (a plugin spinning on a poison record, with a
/// generous time limit): the first SIGTERM waits for it within the grace
/// period, a second one exits at once, and so does the end of the grace.
#[test]
fn a_second_signal_or_the_end_of_the_grace_period_exits_at_once() {
    let f = Fixture::new(0);
    append(&f.path("input.log"), "POISON\n");
    let config = f.path("stuck.toml");
    let write = |grace: &str| {
        let text = format!(
            "[pipeline]\nname = \"stuck\"\nstate_dir = \"state\"\n[source]\ntype = \"file\"\npaths = [\"input.log\"]\n\
             [[plugins]]\nname = \"hostile\"\npath = \"{}\"\ntime_limit = \"60s\"\nconfig = {{ attack = \"infinite-loop\" }}\n\
             [sink]\ntype = \"file\"\npath = \"out/events.ndjson\"\n[shutdown]\ngrace = \"{grace}\"\n",
            plugin("hostile").display()
        );
        std::fs::write(&config, text).unwrap_or_else(|e| panic!("{e}"));
    };
    let term = |child: &Child| {
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    };
    // Start-up is done once the process catches SIGTERM (its handler is
    // installed: bit 15 of `SigCgt` in /proc), not merely once the state
    // store exists: on a loaded machine the two can be seconds apart, and a
    // signal in between ends the process the default way. The batch is
    // stuck soon after.
    let catches_term = |child: &Child| {
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .is_some_and(|mask| mask & (1 << (15 - 1)) != 0)
    };
    let wait_stuck = |child: &Child| {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !(f.path("state").join("CURRENT").exists() && catches_term(child)) {
            assert!(std::time::Instant::now() < deadline, "the run never started");
            std::thread::sleep(Duration::from_millis(20));
        }
        // Generous: on a loaded machine the batch must be reached first, or
        // the signal would find nothing in flight.
        std::thread::sleep(Duration::from_millis(2000));
    };
    let wait_exit = |child: &mut Child, within: Duration| -> Option<i32> {
        let deadline = std::time::Instant::now() + within;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status.code().unwrap_or(-1));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    };

    // Second signal.
    write("60s");
    let mut child = f.spawn(&config);
    wait_stuck(&child);
    term(&child);
    assert_eq!(wait_exit(&mut child, Duration::from_millis(800)), None, "the first signal waits for the batch");
    term(&child);
    let code = wait_exit(&mut child, Duration::from_secs(3));
    if code.is_none() {
        let _ = child.kill();
    }
    assert_eq!(code, Some(130), "the second signal exits at once");

    // The grace period running out (a fresh state, so start-up is seen).
    std::fs::remove_dir_all(f.path("state")).unwrap_or_else(|e| panic!("{e}"));
    write("1s");
    let mut child = f.spawn(&config);
    wait_stuck(&child);
    term(&child);
    let code = wait_exit(&mut child, Duration::from_secs(5));
    if code.is_none() {
        let _ = child.kill();
    }
    assert_eq!(code, Some(130), "the end of the grace period exits");
    // Nothing passed a door, so nothing was committed: the record is read again next time.
    let store = Store::open_read_only(&f.path("state")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(store.checkpoint(&f.path("input.log").display().to_string()).ok().flatten(), None);
}

#[test]
fn a_line_written_in_two_parts_while_followed_is_one_record() {
    let f = Fixture::new(0);
    let config = f.config("");
    let text = std::fs::read_to_string(&config)
        .unwrap_or_default()
        .replace("paths = [\"input*.log\"]", "paths = [\"app.log\"]\nfollow = true\npoll_interval = \"20ms\"");
    std::fs::write(&config, text).unwrap_or_else(|e| panic!("{e}"));
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let ts = sluice_guest::time::format_rfc3339(now * 1_000_000_000);
    let log = f.path("app.log");
    let (first, _) = lines(0, 1, &ts);
    append(&log, &first);
    let mut child = f.spawn(&config);
    wait_for(&f, &["rot-000000".to_string()].into_iter().collect(), "the first line");
    // The writer is in the middle of a line for several polls.
    let (second, _) = lines(1, 1, &ts);
    let (head, tail) = second.split_at(second.len() / 2);
    append(&log, head);
    std::thread::sleep(Duration::from_millis(300));
    append(&log, tail);
    wait_for(&f, &["rot-000001".to_string()].into_iter().collect(), "the line written in two parts");
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let status = child.wait().unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success(), "{status}");
    assert_eq!(f.delivered(), vec!["rot-000000".to_string(), "rot-000001".to_string()]);
    assert!(f.quarantined().is_empty(), "no fragment of it is quarantined: {:?}", f.quarantined());
}

/// The config with json no longer setting the time, and no ts-window:
/// every event delivered after the swap has `"timestamp": null`.
fn without_timestamps(text: &str) -> String {
    let cut = text.find("[[plugins]]\nname = \"ts-window\"").and_then(|at| {
        let end = text[at..].find("[sink]")?;
        Some((at, at + end))
    });
    let text = match cut {
        Some((a, b)) => format!("{}{}", &text[..a], &text[b..]),
        None => text.to_string(),
    };
    text.replace("timestamp_field = \"ts\", ", "")
}

fn signal(child: &Child, sig: &str) {
    let _ = Command::new("kill").args([sig, &child.id().to_string()]).status();
}

/// SIGTERM a followed run: it exits 0, everything reconciles, and no id
/// was delivered twice. Returns its log and the ids delivered.
fn stop_and_reconcile_once(f: &Fixture, mut child: Child, log: &Path, when: &str) -> (String, Vec<String>) {
    signal(&child, "-TERM");
    let status = child.wait().unwrap_or_else(|e| panic!("{e}"));
    let logs = std::fs::read_to_string(log).unwrap_or_default();
    assert_eq!(status.code(), Some(0), "{logs}");
    f.assert_reconciled();
    let ids = f.delivered();
    let twice: Vec<_> = counts(&ids).into_iter().filter(|(_, n)| *n > 1).take(5).collect();
    assert!(twice.is_empty(), "delivered twice {when}: {twice:?}");
    (logs, ids)
}

fn wait_log(log: &Path, needle: &str, count: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.matches(needle).count() >= count {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{needle:?} never logged {count} times: {text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_reload_under_load_swaps_the_chain_between_batches_and_loses_nothing() {
    let mut f = Fixture::new(2_000);
    let port = sluice_e2e::kafka::free_port();
    let config = f.config(&format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n"));
    let (child, log) = f.follow(&config);
    let text = std::fs::read_to_string(&config).unwrap_or_else(|e| panic!("{e}"));
    let reloads = |result: &str| -> f64 {
        sluice_e2e::scrape(port)
            .lines()
            .filter(|l| l.starts_with("sluice_config_reloads_total{") && l.contains(&format!("result=\"{result}\"")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    for k in 0..12 {
        f.append(1_000);
        std::thread::sleep(Duration::from_millis(150));
        match k {
            // A typo: refused, the running config stays.
            3 => {
                std::fs::write(&config, text.replace("batch_size = 200", "batch_sise = 200"))
                    .unwrap_or_else(|e| panic!("{e}"));
                signal(&child, "-HUP");
                wait_log(&log, "config reload refused", 1);
            }
            // What cannot change live: refused too.
            4 => {
                std::fs::write(&config, text.replace("name = \"e2e\"", "name = \"other\""))
                    .unwrap_or_else(|e| panic!("{e}"));
                signal(&child, "-HUP");
                wait_log(&log, "config reload refused", 2);
            }
            // The real change, while lines keep coming.
            6 => {
                std::fs::write(&config, without_timestamps(&text)).unwrap_or_else(|e| panic!("{e}"));
                signal(&child, "-HUP");
                wait_log(&log, "config reloaded", 1);
            }
            _ => {}
        }
    }
    wait_for(&f, &f.good.clone(), "after the reload");
    let (ok, invalid) = (reloads("ok"), reloads("invalid") + reloads("refused"));
    let (logs, _) = stop_and_reconcile_once(&f, child, &log, "across the reload");
    // The sink's lines in order: timestamps set by the old chain, then
    // none from the new one's first batch on; never mixed.
    let sink = std::fs::read_to_string(f.path("out/events.ndjson")).unwrap_or_default();
    let stamped = sluice_e2e::timestamped_lines(&sink);
    let swap = stamped.iter().position(|s| !s).unwrap_or(stamped.len());
    println!(
        "reload under load: {} lines, {swap} by the old chain and {} by the new, 0 lost, 0 twice; reloads ok {ok}, \
         refused {invalid}",
        stamped.len(),
        stamped.len() - swap
    );
    assert!(swap > 0 && swap < stamped.len(), "both chains delivered: {swap} of {}", stamped.len());
    assert!(stamped[swap..].iter().all(|s| !s), "after the swap only the new chain's events");
    assert_eq!((ok, invalid), (1.0, 2.0), "{logs}");
    assert!(logs.contains("batch_sise") && logs.contains("pipeline.name cannot change while sluice runs"), "{logs}");
    // Quarantine entries carry the chain that judged them: json and
    // ts-window before the reload, json alone after it. Entry ids sort by
    // the time they were written, and the reload drains every file before
    // the new chain starts, so the old chain's entries all come first.
    let store = Store::open_read_only(&f.path("state")).unwrap_or_else(|e| panic!("{e}"));
    let mut entries = store.quarantine_entries().unwrap_or_else(|e| panic!("{e}"));
    entries.sort_by(|a, b| a.id.cmp(&b.id));
    let chains: Vec<Vec<String>> = entries.iter().map(|e| e.plugins.iter().map(|p| p.name.clone()).collect()).collect();
    let first_new = chains.iter().position(|c| c.len() == 1).unwrap_or(chains.len());
    assert!(first_new > 0 && first_new < chains.len(), "entries from both chains: {chains:?}");
    assert!(chains[..first_new].iter().all(|c| c == &["json", "ts-window"]), "{chains:?}");
    assert!(chains[first_new..].iter().all(|c| c == &["json"]), "after the reload, the new chain: {chains:?}");
}

/// `audit --from-file` over thousands of ids draws a progress bar on a
/// terminal (script(1) gives it one) and nothing when stderr is a pipe.
#[test]
fn a_long_audit_shows_progress_on_a_terminal_and_nothing_in_a_pipe() {
    let f = Fixture::new(3000);
    let config = f.config("");
    assert_eq!(f.run(&config).0, 0);
    let list = f.path("ids.txt");
    std::fs::write(&list, f.delivered().join("\n")).unwrap_or_else(|e| panic!("{e}"));
    let args = ["audit", "-c", &config.display().to_string(), "--from-file", &list.display().to_string()];
    let piped = f.command(&args).output().unwrap_or_else(|e| panic!("{e}"));
    assert!(piped.status.success());
    let stderr = String::from_utf8_lossy(&piped.stderr);
    assert!(!stderr.contains("ids (") && !stderr.contains('\r'), "no bar in a pipe: {stderr}");
    assert!(stderr.contains("ids: "), "the count line stays: {stderr}");
    // On a terminal: the same command under a pseudo-terminal, its answers
    // (stdout) aside; what the terminal shows is script's output.
    let line = format!("{} {} > /dev/null", sluice_bin!().display(), args.join(" "));
    let tty = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .current_dir(f.dir.path())
        .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let shown = String::from_utf8_lossy(&tty.stdout);
    assert!(tty.status.success(), "{shown}");
    assert!(shown.contains("audit ") && shown.contains("ids ("), "a bar on the terminal: {shown:?}");
}

/// libfaketime (Debian's `faketime`), which moves the wall clock of the
/// process it is preloaded into, read from a file at every call; the
/// monotonic clock stays real, as a real clock jump leaves it.
const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

/// Issue 25, clocks: the wall clock jumps a day forward, then an hour back,
/// under a running pipeline whose dedup window is an hour. Every id
/// delivered before a jump is written again after it: the window, aged by
/// elapsed time, absorbs them all (the control, reading the wall clock,
/// is `store::dedup`'s `a_wall_clock_jump_expires_nothing_early_by_the_window_clock`:
/// there the day's jump lets every one of them through). The jump is
/// reported once, as a warning and as `sluice_clock_skew_seconds`.
#[test]
fn a_wall_clock_jump_under_a_run_expires_no_dedup_id_and_is_reported() {
    assert!(Path::new(FAKETIME).exists(), "{FAKETIME} is missing: scripts/setup installs Debian's faketime");
    let mut f = Fixture::new(1_000);
    let port = sluice_e2e::kafka::free_port();
    let config = f.config(&format!("[dedup]\nwindow = \"1h\"\n\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n"));
    let text = std::fs::read_to_string(&config).unwrap_or_else(|e| panic!("{e}"));
    // Without ts-window: its verdicts follow the wall clock by design.
    let text = without_timestamps(&text).replace("paths = [\"input*.log\"]", "paths = [\"input*.log\"]\nfollow = true");
    std::fs::write(&config, &text).unwrap_or_else(|e| panic!("{e}"));
    let clock = f.path("faketime");
    std::fs::write(&clock, "+0\n").unwrap_or_else(|e| panic!("{e}"));
    let log = f.path("run.log");
    let child = f
        .command(&["run", "-c", &config.display().to_string()])
        .env("SLUICE_LOG", "info")
        .env("LD_PRELOAD", FAKETIME)
        .env("FAKETIME_TIMESTAMP_FILE", &clock)
        .env("FAKETIME_NO_CACHE", "1")
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap_or_else(|e| panic!("{e}")))
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let skew = || -> Option<f64> {
        sluice_e2e::scrape(port)
            .lines()
            .find(|l| l.starts_with("sluice_clock_skew_seconds "))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    };
    let input = f.path("input.log");
    wait_for(&f, &f.good.clone(), "before the jumps");
    for (k, (offset, needle, want_skew)) in
        [("+1d", "the wall clock jumped forward by", 86_400.0), ("-1h", "the wall clock jumped back by", -3_600.0)]
            .into_iter()
            .enumerate()
    {
        std::fs::write(&clock, format!("{offset}\n")).unwrap_or_else(|e| panic!("{e}"));
        wait_log(&log, needle, 1);
        let reported = skew().unwrap_or(0.0);
        assert!((reported - want_skew).abs() < 30.0, "sluice_clock_skew_seconds {reported}, want about {want_skew}");
        // Every line so far again (each id delivered before the jump),
        // then new ones.
        let before = std::fs::read_to_string(&input).unwrap_or_else(|e| panic!("{e}"));
        append(&input, &before);
        f.append(500);
        wait_for(&f, &f.good.clone(), &format!("after the jump {offset}"));
        // The repeats are read after the new lines' ids arrive only if the
        // pipeline is slow; wait until the file is read to its end.
        let size = std::fs::metadata(&input).map(|m| m.len()).unwrap_or(0);
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let store_at = Store::open_read_only(&f.path("state"))
                .ok()
                .and_then(|s| s.checkpoint(&input.display().to_string()).ok().flatten())
                .map(|c| c.offset);
            if store_at == Some(size) {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "jump {k}: committed {store_at:?} of {size} bytes");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let (logs, ids) = stop_and_reconcile_once(&f, child, &log, "after a clock jump");
    assert_eq!(logs.matches("the wall clock jumped forward").count(), 1, "one warning per jump: {logs}");
    println!(
        "clock jumps (+1 d, then -1 h) under a 1 h dedup window: {} ids delivered once each, every one written again \
         after a jump and absorbed, 0 lost, 0 twice",
        ids.len()
    );
}

/// Copy every file of `from` into `to` (a store folder holds no folders
/// that matter here).
fn copy_folder(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("{e}"));
    for e in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{e}")).flatten() {
        if e.path().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

/// The store's files whose names end with `ext`, largest first.
fn store_files(state: &Path, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(state)
        .unwrap_or_else(|e| panic!("{e}"))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().ends_with(ext)))
        .collect();
    files.sort_by_key(|p| std::cmp::Reverse(std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)));
    files
}

fn garble(file: &Path, at_fraction: f64) {
    use std::io::{Seek, SeekFrom, Write};
    let len = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
    let mut f = std::fs::OpenOptions::new().write(true).open(file).unwrap_or_else(|e| panic!("{e}"));
    f.seek(SeekFrom::Start((len as f64 * at_fraction) as u64)).unwrap_or_else(|e| panic!("{e}"));
    f.write_all(&[0xA5; 64]).unwrap_or_else(|e| panic!("{e}"));
}

/// Issue 25, item 2: a store damaged while sluice was stopped. Each damage
/// but one stops the start (exit 2) with a message naming the store, what
/// is wrong and the ways on, and the sink is not touched: sluice never
/// starts empty over a store it cannot read. `sluice store repair` then
/// keeps what can be read, and the run after it reconciles: every id
/// delivered, the duplicates only those whose state the damage took. The
/// one damage recovered by itself is a log that ends inside a record (what
/// a crash mid-write leaves): said, and the run goes on.
#[test]
fn a_damaged_store_is_refused_repaired_on_request_and_nothing_is_lost() {
    let f = Fixture::new(6_000);
    let config = f.config("");
    let (code, stderr) = f.run(&config);
    assert_eq!(code, 0, "{stderr}");
    f.assert_reconciled();
    let (state, sink) = (f.path("state"), f.path("out/events.ndjson"));
    let (good_state, good_sink) = (f.path("state.good"), f.path("events.good"));
    copy_folder(&state, &good_state);
    std::fs::copy(&sink, &good_sink).unwrap_or_else(|e| panic!("{e}"));
    let lines = || std::fs::read_to_string(&sink).unwrap_or_default().lines().count();
    let delivered_once = lines();
    type Damage = fn(&Path);
    let cases: [(&str, Damage, &str, bool); 5] = [
        ("a log record garbled mid-file", |s| garble(&store_files(s, ".log")[0], 0.5), "Corruption", true),
        ("a table garbled", |s| garble(&store_files(s, ".sst")[0], 0.3), "checksum mismatch", true),
        (
            "the MANIFEST deleted",
            |s| {
                for m in store_files(s, "") {
                    if m.file_name().is_some_and(|n| n.to_string_lossy().starts_with("MANIFEST-")) {
                        let _ = std::fs::remove_file(m);
                    }
                }
            },
            "MANIFEST",
            true,
        ),
        ("CURRENT deleted", |s| drop(std::fs::remove_file(s.join("CURRENT"))), "no CURRENT", true),
        (
            "the log cut inside its last record",
            |s| {
                let log = &store_files(s, ".log")[0];
                let len = std::fs::metadata(log).map(|m| m.len()).unwrap_or(0);
                let file = std::fs::OpenOptions::new().write(true).open(log).unwrap_or_else(|e| panic!("{e}"));
                file.set_len(len - 3_000).unwrap_or_else(|e| panic!("{e}"));
            },
            "ends inside a record",
            false,
        ),
    ];
    let mut figures = Vec::new();
    for (what, damage, says, refused) in cases {
        copy_folder(&good_state, &state);
        std::fs::copy(&good_sink, &sink).unwrap_or_else(|e| panic!("{e}"));
        damage(&state);
        let (code, stderr) = f.run(&config);
        if refused {
            assert_eq!(code, 2, "{what}: {stderr}");
            for part in
                [&*state.display().to_string(), "cannot be read", says, "sluice store repair", "restore the folder"]
            {
                assert!(stderr.contains(part), "{what}: the refusal names {part:?}: {stderr}");
            }
            assert_eq!(lines(), delivered_once, "{what}: refused before anything reached the sink");
            let out = f
                .command(&["store", "repair", "-c", &config.display().to_string()])
                .output()
                .unwrap_or_else(|e| panic!("{e}"));
            let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert_eq!(out.status.code(), Some(0), "{what}: repair: {said}");
            assert!(said.contains("repaired"), "{what}: {said}");
            let (code, stderr) = f.run(&config);
            assert_eq!(code, 0, "{what}: after the repair: {stderr}");
        } else {
            assert_eq!(code, 0, "{what}: {stderr}");
            assert!(stderr.contains(says), "{what}: said: {stderr}");
        }
        // Nothing lost; what came twice is what the damage took.
        f.assert_reconciled();
        let twice = lines() - delivered_once;
        if what == "CURRENT deleted" {
            assert_eq!(twice, 0, "a lost CURRENT is rewritten exactly");
        }
        figures
            .push(format!("{what}: {} ({twice} delivered again)", if refused { "refused, repaired" } else { "said" }));
    }
    // Not a store at all: a file, and a folder of something else.
    for (what, make, says) in [
        (
            "a file",
            (|s: &Path| std::fs::write(s, "x").unwrap_or_else(|e| panic!("{e}"))) as fn(&Path),
            "is a file, not a folder",
        ),
        (
            "another program's folder",
            |s: &Path| {
                std::fs::create_dir_all(s).unwrap_or_else(|e| panic!("{e}"));
                std::fs::write(s.join("notes.txt"), "x").unwrap_or_else(|e| panic!("{e}"));
            },
            "is not a sluice store",
        ),
    ] {
        let _ = std::fs::remove_dir_all(&state);
        make(&state);
        let (code, stderr) = f.run(&config);
        assert_eq!(code, 2, "{what}: {stderr}");
        assert!(stderr.contains(says), "{what}: {stderr}");
        assert!(std::fs::metadata(&state).is_ok_and(|m| m.is_file() || m.is_dir()), "{what}: left as it was");
        let _ = std::fs::remove_file(&state);
        figures.push(format!("{what}: refused"));
    }
    println!("a damaged store, {} records delivered first: {}", delivered_once, figures.join("; "));
}

/// Issue 25, item 5, on files: the process is frozen (SIGSTOP) for 20 s
/// under load while lines keep coming. A second sluice started on the same
/// config meanwhile is refused (the frozen one holds the store's lock: two
/// processes never commit one file's position), and once continued the
/// first delivers everything once.
#[test]
fn a_frozen_run_holds_its_store_and_once_continued_loses_nothing() {
    let mut f = Fixture::new(3_000);
    let config = f.config("");
    let (child, log) = f.follow(&config);
    let first: BTreeSet<String> = f.good.clone();
    // Frozen while it is busy: once its first lines are out.
    let started = std::time::Instant::now();
    while f.delivered().len() < 200 {
        assert!(started.elapsed() < Duration::from_secs(60), "nothing delivered");
        std::thread::sleep(Duration::from_millis(5));
    }
    signal(&child, "-STOP");
    // kill(1) returns before the process is stopped: a write in progress
    // lands first.
    std::thread::sleep(Duration::from_millis(500));
    let frozen_at = f.delivered().len();
    f.append(3_000);
    std::thread::sleep(Duration::from_secs(10));
    let (code, stderr) = f.run(&config);
    assert_eq!(code, 1, "a second sluice on the store of a frozen one: {stderr}");
    assert!(stderr.contains("is in use by another process"), "{stderr}");
    std::thread::sleep(Duration::from_secs(10));
    assert_eq!(f.delivered().len(), frozen_at, "nothing moved while it was frozen");
    signal(&child, "-CONT");
    wait_for(&f, &first, "after it was continued");
    wait_for(&f, &f.good.clone(), "the lines written while it was frozen");
    let (_, ids) = stop_and_reconcile_once(&f, child, &log, "after a freeze");
    println!(
        "frozen 20 s under load: {frozen_at} lines out when stopped, 3,000 more written meanwhile; a second sluice \
         refused; {} ids delivered once each after SIGCONT, 0 lost",
        ids.len()
    );
}

/// A tmpfs of `size` mounted at `at`, unmounted when dropped. The suite
/// runs as root (CI does): a mount that fails is a failure, not a skip.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(at).unwrap_or_else(|e| panic!("{e}"));
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "mount a {size} tmpfs at {}: the disk-full tests need root, as CI has", at.display());
        Tmpfs(at.to_path_buf())
    }

    /// Leave about `left` bytes free, in a file of its own; returns it.
    fn fill_leaving(&self, left: u64) -> PathBuf {
        let free = sluice::store::disk_reserve::free_bytes(&self.0).unwrap_or_else(|e| panic!("{e}"));
        let filler = self.0.join("filler");
        let file = std::fs::File::create(&filler).unwrap_or_else(|e| panic!("{e}"));
        // tmpfs allocates on write, not on set_len: write the bytes.
        use std::io::Write;
        let mut w = std::io::BufWriter::new(file);
        let chunk = vec![0u8; 64 * 1024];
        let mut n = free.saturating_sub(left);
        while n > 0 {
            let k = n.min(chunk.len() as u64) as usize;
            w.write_all(&chunk[..k]).unwrap_or_else(|e| panic!("{e}"));
            n -= k as u64;
        }
        w.flush().unwrap_or_else(|e| panic!("{e}"));
        filler
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Issue 25, item 1, the state store's volume: it fills during a run.
/// Commits wait below `pipeline.state_reserve` instead of RocksDB failing
/// mid-write (one warning naming the path and the bytes needed,
/// `sluice_state_disk_full`, a `/health` line); nothing is committed while
/// it waits; freed, everything goes on by itself. Then it fills again and
/// sluice is SIGKILLed while it waits: the store opens afterwards, and the
/// batches that waited are read again, every id reconciled.
#[test]
fn a_full_state_volume_holds_commits_and_goes_on_once_freed() {
    let mut f = Fixture::new(2_000);
    let vol = Tmpfs::mount(&f.path("vol"), "24m");
    let port = sluice_e2e::kafka::free_port();
    let config = f.config(&format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n"));
    let text = std::fs::read_to_string(&config).unwrap_or_else(|e| panic!("{e}"));
    let text = text
        .replace("state_dir = \"state\"", "state_dir = \"vol/state\"\nstate_reserve = \"4MiB\"")
        .replace("paths = [\"input*.log\"]", "paths = [\"input*.log\"]\nfollow = true");
    std::fs::write(&config, &text).unwrap_or_else(|e| panic!("{e}"));
    let log = f.path("run.log");
    let spawn = |f: &Fixture| {
        f.command(&["run", "-c", &config.display().to_string()])
            .env("SLUICE_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::OpenOptions::new().create(true).append(true).open(&log).unwrap_or_else(|e| panic!("{e}")))
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let child = spawn(&f);
    wait_for(&f, &f.good.clone(), "before the volume filled");
    let (state, input) = (f.path("vol/state"), f.path("input.log").display().to_string());
    let checkpoint =
        || Store::open_read_only(&state).ok().and_then(|s| s.checkpoint(&input).ok().flatten()).map_or(0, |c| c.offset);
    let filler = vol.fill_leaving(3 << 20);
    let committed = checkpoint();
    f.append(3_000);
    wait_log(&log, "less than pipeline.state_reserve", 1);
    let health = sluice_e2e::get(port, "/health");
    assert!(health.contains("vol/state: its volume has") && health.contains("commits wait"), "{health}");
    assert!(sluice_e2e::scrape(port).contains("sluice_state_disk_full 1"), "the gauge says so");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(checkpoint(), committed, "nothing committed while the volume is short");
    std::fs::remove_file(&filler).unwrap_or_else(|e| panic!("{e}"));
    wait_log(&log, "has room again", 1);
    wait_for(&f, &f.good.clone(), "once the volume was freed");
    // Again, and killed while it waits.
    let filler = vol.fill_leaving(3 << 20);
    f.append(3_000);
    wait_log(&log, "less than pipeline.state_reserve", 2);
    let mut child = child;
    child.kill().unwrap_or_else(|e| panic!("{e}"));
    let _ = child.wait();
    std::fs::remove_file(&filler).unwrap_or_else(|e| panic!("{e}"));
    let child = spawn(&f);
    wait_for(&f, &f.good.clone(), "after the kill");
    signal(&child, "-TERM");
    let mut child = child;
    assert_eq!(
        child.wait().ok().and_then(|s| s.code()),
        Some(0),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    // The fixture reads its quarantine from `state`.
    std::os::unix::fs::symlink("vol/state", f.path("state")).unwrap_or_else(|e| panic!("{e}"));
    f.assert_reconciled();
    let ids = f.delivered();
    let twice = counts(&ids).values().filter(|n| **n > 1).count();
    // What waited when it was killed: at most the in-flight batches.
    assert!(twice <= 2 * 200, "{twice} ids twice; at most pipeline.in_flight batches of 200 waited");
    println!(
        "a full state volume: commits waited twice (freed once, killed once while waiting); {} ids, {twice} delivered \
         twice (the batches that waited when it was killed), 0 lost",
        f.good.len()
    );
}

/// Issue 25, item 1, the file sink's volume: it fills during a run. The
/// write that fails is cut back (no torn line) and is a sink failure: the
/// breaker opens, nothing is committed past it; freed, the breaker's probe
/// goes through and everything arrives once.
#[test]
fn a_full_sink_volume_opens_the_breaker_tears_no_line_and_goes_on_once_freed() {
    let mut f = Fixture::new(1_000);
    let out = Tmpfs::mount(&f.path("out"), "4m");
    let config = f.config("[sink.breaker]\ninitial_probe = \"100ms\"\nmax_probe = \"500ms\"\n");
    let (child, log) = f.follow(&config);
    wait_for(&f, &f.good.clone(), "before the volume filled");
    // Room for a few hundred lines of the next 6,000.
    let filler = out.fill_leaving(100 << 10);
    f.append(6_000);
    wait_log(&log, "circuit breaker opened", 1);
    wait_log(&log, "No space left on device", 1);
    let sink = std::fs::read(f.path("out/events.ndjson")).unwrap_or_default();
    assert!(sink.ends_with(b"\n"), "a failed write was cut back: no torn line");
    std::fs::remove_file(&filler).unwrap_or_else(|e| panic!("{e}"));
    wait_log(&log, "circuit breaker closed", 1);
    wait_for(&f, &f.good.clone(), "once the volume was freed");
    let (_, ids) = stop_and_reconcile_once(&f, child, &log, "after the sink's volume filled");
    println!(
        "a full sink volume: the breaker opened and closed by itself; {} ids delivered once each, 0 lost",
        ids.len()
    );
}

/// The control for the state volume's guard: with `state_reserve = "0"`
/// the volume fills under RocksDB itself. The write fails, the run stops
/// with a message that says the volume is full (not damaged) and that
/// nothing was lost, and once space is freed the next start reconciles.
#[test]
fn without_the_reserve_a_full_state_volume_stops_the_run_and_loses_nothing() {
    let mut f = Fixture::new(1_000);
    let vol = Tmpfs::mount(&f.path("vol"), "24m");
    let config = f.config("");
    let text = std::fs::read_to_string(&config).unwrap_or_else(|e| panic!("{e}"));
    let text = text.replace("state_dir = \"state\"", "state_dir = \"vol/state\"\nstate_reserve = \"0\"");
    std::fs::write(&config, &text).unwrap_or_else(|e| panic!("{e}"));
    let (code, stderr) = f.run(&config);
    assert_eq!(code, 0, "{stderr}");
    let filler = vol.fill_leaving(16 << 10);
    f.append(20_000);
    let (code, stderr) = f.run(&config);
    assert_eq!(code, 1, "a passing condition, not bad input (2): a supervisor retries it: {stderr}");
    assert!(stderr.contains("its volume is full") && stderr.contains("nothing was lost"), "{stderr}");
    assert!(!stderr.contains("cannot be read"), "a full volume is not a damaged store: {stderr}");
    let said = stderr.lines().find(|l| l.contains("its volume is full")).unwrap_or_default().to_string();
    std::fs::remove_file(&filler).unwrap_or_else(|e| panic!("{e}"));
    let (code, stderr) = f.run(&config);
    assert_eq!(code, 0, "once freed: {stderr}");
    std::os::unix::fs::symlink("vol/state", f.path("state")).unwrap_or_else(|e| panic!("{e}"));
    f.assert_reconciled();
    let ids = f.delivered();
    let twice = counts(&ids).values().filter(|n| **n > 1).count();
    println!(
        "without the reserve: the run stopped on a full state volume ({said}), then {} ids reconciled ({twice} \
         twice), 0 lost",
        f.good.len()
    );
}

/// Peak resident memory (VmHWM) of a live process, KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:")?.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Issue 25, item 6: a burst of 100 MiB of ~1 MiB lines, then 20 MiB of
/// short lines, each written at once, against a slow sink (every request
/// answered after 200 ms). A file's batch ends at `source.batch_bytes`
/// (8 MiB) as well as at `pipeline.batch_size` lines, so what is held is
/// `pipeline.in_flight` batches of at most that: the peak RSS grows by less
/// than the documented 256 MiB over the run's own. The control, with
/// `batch_bytes` out of the way (1 GiB), holds the whole burst as one batch.
/// Every id is delivered either way.
#[test]
fn a_burst_of_long_and_short_lines_against_a_slow_sink_stays_within_the_memory_bound() {
    let mut grown = Vec::new();
    for batch_bytes in ["8MiB", "1GiB"] {
        let f = Fixture::new(0);
        let backend = sluice_e2e::backend::Backend::start(|r: &sluice_e2e::backend::Req| {
            let mut re = sluice_e2e::backend::Reaction::ok(r);
            re.how = sluice_e2e::backend::How::Delay(Duration::from_millis(200));
            re
        });
        let config = f.config("");
        let text = std::fs::read_to_string(&config).unwrap_or_else(|e| panic!("{e}"));
        let text = text
            .replace(
                "type = \"file\"\npath = \"out/events.ndjson\"",
                &format!(
                    "type = \"http\"\nurl = \"{}/ingest\"\nresponse = \"status\"\n[sink.batch]\nmax_records = 1000",
                    backend.url
                ),
            )
            .replace("paths = [\"input*.log\"]", &format!("paths = [\"input*.log\"]\nbatch_bytes = \"{batch_bytes}\""))
            .replace("batch_size = 200", "batch_size = 1000");
        std::fs::write(&config, &text).unwrap_or_else(|e| panic!("{e}"));
        let ts = sluice_e2e::now_rfc3339(0);
        let mut ids = BTreeSet::new();
        // A warm-up line, to read the run's own peak before the burst.
        append(&f.path("input.log"), &format!("{{\"event_id\":\"warm\",\"ts\":\"{ts}\"}}\n"));
        ids.insert("warm".to_string());
        let (child, log) = f.follow(&config);
        let started = std::time::Instant::now();
        while !backend.seen().stored.iter().any(|id| id == "warm") {
            assert!(started.elapsed() < Duration::from_secs(60), "the warm-up line never arrived");
            std::thread::sleep(Duration::from_millis(20));
        }
        let before = peak_rss_kib(child.id());
        let pad = "x".repeat(1_000_000);
        let mut burst = String::with_capacity(101 << 20);
        for i in 0..100 {
            let id = format!("long-{i:03}");
            burst.push_str(&format!("{{\"event_id\":\"{id}\",\"ts\":\"{ts}\",\"pad\":\"{pad}\"}}\n"));
            ids.insert(id);
        }
        for i in 0..200_000 {
            let id = format!("short-{i:06}");
            burst.push_str(&format!("{{\"event_id\":\"{id}\",\"ts\":\"{ts}\",\"n\":{i},\"msg\":\"a short line\"}}\n"));
            ids.insert(id);
        }
        append(&f.path("input.log"), &burst);
        drop(burst);
        let deadline = std::time::Instant::now() + Duration::from_secs(300);
        loop {
            let stored: BTreeSet<String> = backend.seen().stored.iter().cloned().collect();
            if stored.is_superset(&ids) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "batch_bytes {batch_bytes}: {} ids missing after 300 s",
                ids.len() - stored.intersection(&ids).count()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let after = peak_rss_kib(child.id());
        signal(&child, "-TERM");
        let mut child = child;
        let status = child.wait().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(status.code(), Some(0), "{}", std::fs::read_to_string(&log).unwrap_or_default());
        let stored = backend.seen().stored.clone();
        let once: BTreeSet<&String> = stored.iter().collect();
        assert_eq!(once.len(), ids.len(), "batch_bytes {batch_bytes}: every id, nothing else");
        assert_eq!(stored.len(), ids.len(), "batch_bytes {batch_bytes}: each once");
        grown.push((batch_bytes, before / 1024, after.saturating_sub(before) / 1024));
    }
    println!(
        "a 120 MiB burst (100 lines of 1 MB, 200,000 short) against a 200 ms sink: peak RSS {grown:?} (MiB before, MiB grown)"
    );
    let (_, _, bounded) = grown[0];
    let (_, _, unbounded) = grown[1];
    assert!(bounded < 256, "peak RSS grew by {bounded} MiB with batch_bytes = 8MiB; the bound is 256 MiB");
    assert!(unbounded > bounded, "the control holds more: {unbounded} MiB against {bounded} MiB");
}
