//! The README's main job: `examples/quickstart/sluice.toml` over the five
//! Loghub samples. Every line of every file must end in the sink (under its
//! position-derived id) or in the quarantine, and nothing else may.

use std::collections::BTreeSet;
use std::process::Command;

use sluice::source::framing::LineReader;
use sluice::store::Store;
use sluice_e2e::{plugin, sluice_bin, test_data, workspace_root};

/// The clone's build shares the suite's target folder, and cargo names a
/// workspace's own crates by their path inside the workspace: the clone's
/// plugins are built where this tree's are. The two tests that build or
/// copy plugins take turns.
static BUILDS: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn quickstart_delivers_or_quarantines_every_loghub_line() {
    let _turn = BUILDS.lock().unwrap_or_else(|p| p.into_inner());
    // The config reads its plugins from out/plugins, where scripts/quickstart
    // puts them; do the same.
    let root = workspace_root();
    let plugins = root.join("out").join("plugins");
    std::fs::create_dir_all(&plugins).unwrap_or_else(|e| panic!("{e}"));
    for name in ["pattern", "ts-window"] {
        std::fs::copy(plugin(name), plugins.join(format!("{name}.wasm"))).unwrap_or_else(|e| panic!("{e}"));
    }
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let state = tmp.path().join("state");
    let events = tmp.path().join("events.ndjson");
    let config = root.join("examples").join("quickstart").join("sluice.toml");
    let run = |args: &[&str]| {
        Command::new(sluice_bin!())
            .args(args)
            .arg("-c")
            .arg(&config)
            // Every key can be overridden from the environment.
            .env("SLUICE__PIPELINE__STATE_DIR", &state)
            .env("SLUICE__SINK__PATH", &events)
            .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
            .output()
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let out = run(&["check"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("plugin: pattern@"));
    let out = run(&["run"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // Every line of the five files, by the id its position gives it.
    let loghub = std::path::absolute(test_data().join("loghub")).unwrap_or_else(|e| panic!("{e}"));
    let loghub = sluice::units::normalize(&loghub);
    let mut all = BTreeSet::new();
    for name in ["Apache", "HDFS", "Linux", "OpenSSH", "Zookeeper"] {
        let path = loghub.join(format!("{name}_2k.log"));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{e}"));
        let mut lines = LineReader::new(&bytes[..]);
        while let Some(line) = lines.next_line().unwrap_or_else(|e| panic!("{e}")) {
            all.insert(format!("file:{}#0@{}", path.display(), line.offset));
        }
    }
    assert_eq!(all.len(), 10_000);

    let delivered: Vec<String> = std::fs::read_to_string(&events)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .ok()
                .and_then(|v| v["id"].as_str().map(String::from))
                .unwrap_or_default()
        })
        .collect();
    let delivered_set: BTreeSet<String> = delivered.iter().cloned().collect();
    assert_eq!(delivered.len(), delivered_set.len(), "no id twice");
    let store = Store::open_read_only(&state).unwrap_or_else(|e| panic!("{e}"));
    let quarantined: BTreeSet<String> = store
        .quarantine_entries()
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|e| {
            assert_eq!(e.reason, "no pattern matched (tried 4)", "only the strict Linux rule quarantines: {e:?}");
            String::from(e.position.default_event_id())
        })
        .collect();
    assert!(delivered_set.is_disjoint(&quarantined));
    let union: BTreeSet<String> = delivered_set.union(&quarantined).cloned().collect();
    assert_eq!(union, all, "every line delivered or quarantined, nothing else");
    assert!(
        !quarantined.is_empty() && quarantined.iter().all(|id| id.contains("Linux_2k.log")),
        "the strict rule fills the quarantine"
    );
    println!(
        "quickstart: {} lines delivered, {} quarantined, of {}",
        delivered_set.len(),
        quarantined.len(),
        all.len()
    );

    // What a person sees: no line per quarantined record, but the first of
    // the reason and a count of the rest, and a table at the end.
    let said = String::from_utf8_lossy(&out.stderr);
    let full: Vec<&str> =
        said.lines().filter(|l| l.contains("WARN") && l.contains(" quarantined partition=")).collect();
    // The quarantine's repeats: a plugin's own log lines are counted the
    // same way (`stage="plugin log"`), and are not records.
    let more: usize = said
        .lines()
        .filter(|l| l.contains("more like this") && !l.contains("stage=\"plugin log\""))
        .filter_map(|l| l.split("… ").nth(1)?.split(' ').next()?.replace(',', "").parse::<usize>().ok())
        .sum();
    assert_eq!(full.len(), 1, "one reason, said once: {said}");
    assert_eq!(full.len() + more, quarantined.len(), "the rest counted, none lost from the count: {said}");
    assert!(said.lines().count() < 30, "a summary, not a stream: {said}");
    let row = |name: &str| said.lines().find(|l| l.trim_start().starts_with(name)).unwrap_or_default().to_string();
    for name in ["Apache_2k.log", "HDFS_2k.log", "Linux_2k.log", "OpenSSH_2k.log", "Zookeeper_2k.log"] {
        assert!(said.lines().any(|l| l.contains(name)), "a row for {name}: {said}");
    }
    let cells = row("total").split_whitespace().map(String::from).collect::<Vec<_>>();
    let (delivered_text, quarantined_text) = (thousands(delivered_set.len()), thousands(quarantined.len()));
    let want = ["10,000", delivered_text.as_str(), "0", quarantined_text.as_str(), "0"];
    assert_eq!(cells.get(1..6), Some(&want.map(String::from)[..]), "{said}");
    assert!(
        said.contains(&format!("{}  plugin: no pattern matched (tried 4)", quarantined.len())),
        "the top reason with its count: {said}"
    );

    // Run again: the checkpoints say everything was read.
    let out = run(&["run"]);
    assert!(out.status.success());
    let again = std::fs::read_to_string(&events).unwrap_or_default().lines().count();
    assert_eq!(again, delivered.len(), "a second run delivers nothing");
}

fn thousands(n: usize) -> String {
    sluice::telemetry::repeats::thousands(n as u64)
}

/// The main job installs only what the embedded default needs: the setup
/// it runs (`scripts/setup build`) never reaches the broker, ClickHouse or
/// the Python and JavaScript tool chains. Traced with `bash -x` against an
/// empty tools folder, where the test mode would start installing tansu.
#[test]
fn the_main_job_installs_only_what_the_embedded_default_needs() {
    let root = workspace_root();
    let quickstart = std::fs::read_to_string(root.join("scripts/quickstart")).unwrap_or_default();
    assert!(
        quickstart.lines().any(|l| l.trim() == "scripts/setup build"),
        "scripts/quickstart runs the build-only setup"
    );
    let tools = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new("bash")
        .arg("-x")
        .arg(root.join("scripts/setup"))
        .arg("build")
        .env("SLUICE_TOOLS", tools.path())
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let trace = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "scripts/setup build: {trace}");
    for test_only in ["tansu", "clickhouse", "componentize", "npm ", "pip ", "venv", "nodejs", "cargo install"] {
        assert!(!trace.contains(test_only), "scripts/setup build touched {test_only}:\n{trace}");
    }
    assert!(trace.contains("libclang-dev"), "it does check what building needs:\n{trace}");
    let usage = Command::new("bash").arg(root.join("scripts/setup")).arg("bogus").output();
    assert_eq!(usage.ok().and_then(|o| o.status.code()), Some(2), "an unknown mode is refused");
}

/// This tree's own build outputs in the suite's target folder, kept aside
/// while a clone builds there and put back after.
///
/// Cargo names a workspace member's outputs by its path inside the
/// workspace, so the clone's `sluice-abi` is written over this tree's under
/// the same name; a crate built against the one it replaced then no longer
/// finds its dependency (`cargo test`'s doctests, which link after every
/// suite ran, failed so). The dependencies' outputs are shared as they are:
/// that is what keeps the clone's build to its own crates.
struct KeptArtifacts {
    /// (where it lives in the target folder, where it was kept, its length
    /// and time then).
    files: Vec<(std::path::PathBuf, std::path::PathBuf, u64, std::time::SystemTime)>,
    /// Inside the target folder, so that a hard link never crosses file
    /// systems; removed when the outputs are back.
    keep: std::path::PathBuf,
}

impl KeptArtifacts {
    /// Rustc and the linker replace an output (write aside, rename; or
    /// unlink first) rather than write into it, so a hard link keeps the old
    /// contents without copying gigabytes; small files (cargo's
    /// fingerprints, dep-info, which are rewritten in place) are copied.
    fn save(target: &std::path::Path) -> Self {
        let keep = target.join(format!("kept-by-quickstart-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&keep);
        let mut files = Vec::new();
        for profile in ["debug", "wasm32-wasip2/wasm"] {
            for dir in ["", "deps", ".fingerprint", "build"] {
                let from = target.join(profile).join(dir);
                let Ok(entries) = std::fs::read_dir(&from) else { continue };
                for entry in entries.flatten() {
                    if entry.file_name().to_string_lossy().contains("sluice") {
                        collect_files(&entry.path(), &mut |path| files.push(path));
                    }
                }
            }
        }
        // A file that cannot be kept fails the test here, naming it: a
        // silent gap would break the doctests later, far from the cause.
        let files = files
            .into_iter()
            .map(|path| {
                let meta = std::fs::metadata(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let inside = path.strip_prefix(target).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let kept = keep.join(inside);
                let kept_it = std::fs::create_dir_all(kept.parent().unwrap_or(&keep)).and_then(|()| {
                    if meta.len() > 1 << 20 {
                        std::fs::hard_link(&path, &kept)
                    } else {
                        std::fs::copy(&path, &kept).map(|_| ())
                    }
                });
                kept_it.unwrap_or_else(|e| panic!("keep {} aside: {e}", path.display()));
                let time = meta.modified().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                (path, kept, meta.len(), time)
            })
            .collect();
        KeptArtifacts { files, keep }
    }
}

impl Drop for KeptArtifacts {
    fn drop(&mut self) {
        let mut changed = Vec::new();
        for (path, kept, len, time) in &self.files {
            let now = std::fs::metadata(path).ok().map(|m| (m.len(), m.modified().ok()));
            if now == Some((*len, Some(*time))) {
                continue;
            }
            let _ = std::fs::remove_file(path);
            if *len > 1 << 20 {
                let _ = std::fs::hard_link(kept, path);
            } else if std::fs::copy(kept, path).is_ok() {
                // Cargo reads a fingerprint's age from its file's time.
                let _ = std::fs::File::options().write(true).open(path).and_then(|f| f.set_modified(*time));
            }
            // A kept link written through would have lost the old contents.
            let back = std::fs::metadata(path).ok().map(|m| (m.len(), m.modified().ok()));
            if back != Some((*len, Some(*time))) {
                changed.push(path.display().to_string());
            }
        }
        let _ = std::fs::remove_dir_all(&self.keep);
        if !changed.is_empty() && !std::thread::panicking() {
            panic!("the clone's build wrote into this tree's outputs in place: {changed:?}");
        }
    }
}

fn collect_files(path: &std::path::Path, push: &mut dyn FnMut(std::path::PathBuf)) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
            collect_files(&entry.path(), push);
        }
    } else if path.is_file() {
        push(path.to_path_buf());
    }
}

/// What a clone holds: the files git tracks, and the new ones it does not
/// ignore (so a change under test counts before it is committed).
fn cloned_files(root: &std::path::Path) -> Vec<String> {
    let out = Command::new("git")
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .current_dir(root)
        .output()
        .unwrap_or_else(|e| panic!("git: {e}"));
    assert!(out.status.success(), "git ls-files: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .split('\0')
        .filter(|f| !f.is_empty() && root.join(f).is_file())
        .map(String::from)
        .collect()
}

/// No file of the repository names a place outside it: what the README,
/// the examples and the suites need lives in the clone.
#[test]
fn no_file_names_a_path_outside_the_repository() {
    let root = workspace_root();
    let mut outside = Vec::new();
    for file in cloned_files(&root) {
        let Ok(text) = std::fs::read_to_string(root.join(&file)) else { continue };
        for (n, line) in text.lines().enumerate() {
            if ["../shared", "shared/data", "shared/DESIGN", "/work/"].iter().any(|p| line.contains(p))
                && file != "tests/tests/quickstart.rs"
            {
                outside.push(format!("{file}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(outside.is_empty(), "paths outside the repository:\n{}", outside.join("\n"));
}

/// The README's main job from a clone with nothing beside it: the files a
/// clone holds, copied into an empty folder, and `scripts/quickstart` run
/// there. It builds the embedded default (no Kafka, HTTP or PostgreSQL
/// client) into the suite's target folder, so only the clone's own crates
/// are compiled again.
#[test]
fn a_clone_with_nothing_beside_it_runs_the_main_job() {
    let _turn = BUILDS.lock().unwrap_or_else(|p| p.into_inner());
    let root = workspace_root();
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let clone = tmp.path().join("sluice");
    for file in cloned_files(&root) {
        let to = clone.join(&file);
        std::fs::create_dir_all(to.parent().unwrap_or(&clone)).unwrap_or_else(|e| panic!("{e}"));
        std::fs::copy(root.join(&file), &to).unwrap_or_else(|e| panic!("{file}: {e}"));
    }
    assert_eq!(std::fs::read_dir(tmp.path()).map(|d| d.count()).unwrap_or(0), 1, "nothing beside the clone");
    // Put back what the clone's build writes over when the test ends, even
    // by a panic: later suites and the doctests link this tree's crates.
    let _kept = KeptArtifacts::save(&sluice_e2e::target_dir());
    let out = Command::new("bash")
        .arg(clone.join("scripts/quickstart"))
        .current_dir(&clone)
        .env("CARGO_TARGET_DIR", sluice_e2e::target_dir())
        .env("XDG_CACHE_HOME", tmp.path().join("cache"))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "scripts/quickstart in a clone alone failed:\n{said}");
    let events = std::fs::read_to_string(clone.join("out/quickstart/events.ndjson")).unwrap_or_default();
    let ids: BTreeSet<String> = events
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?["id"].as_str().map(String::from))
        .collect();
    assert_eq!(ids.len(), events.lines().count(), "each event once");
    // Every id is a line of the clone's own copy of the samples.
    let data = clone.join("data/loghub");
    assert!(
        ids.len() > 9_000 && ids.iter().all(|id| id.contains(&*data.to_string_lossy())),
        "{} events, from the clone's data/loghub: {:?}",
        ids.len(),
        ids.iter().next()
    );
    assert!(said.contains("quickstart: events"), "{said}");

    // What it built is the embedded default: it says so, and a config that
    // needs Kafka or an HTTP client is refused at start, naming the key and
    // the feature, not half-run.
    let minimal = sluice_e2e::target_dir().join("debug").join("sluice");
    let version = Command::new(&minimal).arg("--version").output().unwrap_or_else(|e| panic!("{e}"));
    assert!(String::from_utf8_lossy(&version.stdout).contains("features: none"), "{version:?}");
    for (recipe, feature) in [("kafka.toml", "kafka"), ("loki.toml", "http"), ("postgres.toml", "postgres")] {
        let out = Command::new(&minimal)
            .args(["check", "-c"])
            .arg(clone.join("examples/recipes").join(recipe))
            .env("KAFKA_PASSWORD", "unused")
            .env("PGPASSWORD_SLUICE", "unused")
            .env("SLUICE__PIPELINE__STATE_DIR", tmp.path().join("state").join(recipe))
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{recipe}: {said}");
        assert!(said.contains("sink.type") && said.contains(&format!("needs the `{feature}` feature")), "{said}");
    }
}
