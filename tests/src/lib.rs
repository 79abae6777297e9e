//! Shared pieces of the end-to-end suites: where the workspace and the
//! test data are, and the plugins built for `wasm32-wasip2`.
//!
//! The suites build the plugins themselves (one `cargo build` per test
//! binary, incremental), so `cargo test` alone is enough on a machine that
//! has the `wasm32-wasip2` target; `scripts/test` installs it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use sluice::plugin::spec::{PluginLimits, PluginSpec};

/// The plugin crates the suites use, by package name.
pub mod backend;
pub mod browser;
pub mod clickhouse;
pub mod kafka;
pub mod languages;
pub mod postgres;
pub mod proxy;
pub mod registry;
pub mod tls;
pub mod watched;

pub const PLUGIN_PACKAGES: &[&str] = &[
    "sluice-plugin-json",
    "sluice-plugin-pattern",
    "sluice-plugin-ts-window",
    "sluice-plugin-hostile",
    "sluice-plugin-hostile-abi",
    "sluice-plugin-avro",
    "sluice-plugin-protobuf",
    "sluice-plugin-json-schema",
];

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."))
}

/// The repository's own test data (`data/`: the Loghub samples with their
/// licence). Nothing outside the clone is read, so a clone with nothing
/// beside it runs every suite.
pub fn test_data() -> PathBuf {
    let dir = workspace_root().join("data");
    assert!(dir.join("loghub").is_dir(), "test data not found at {}", dir.display());
    dir
}

pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| workspace_root().join("target"))
}

/// Build every plugin for `wasm32-wasip2` (once per process) and return the
/// directory holding the `.wasm` files. Panics with cargo's output when the
/// build fails: a suite must never run against stale plugins.
pub fn plugin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| build_wasm(PLUGIN_PACKAGES))
}

/// Build `packages` for `wasm32-wasip2` with the `wasm` profile; returns
/// the directory of the `.wasm` files.
pub fn build_wasm(packages: &[&str]) -> PathBuf {
    build_wasm_in(packages, &target_dir(), &[])
}

/// The plugins that also exist built against `sluice:plugin@0.1.0`.
pub const V01_PACKAGES: &[&str] = &[
    "sluice-plugin-json",
    "sluice-plugin-pattern",
    "sluice-plugin-ts-window",
    "sluice-plugin-hostile",
    "sluice-plugin-conformance",
];

/// The same plugin code built against the 0.1 contract (the Rust SDK's
/// `contract-0-1` feature), to prove the host still runs 0.1 plugins. A
/// target directory of their own: the feature changes the SDK, and the
/// 0.2 builds in the main one must never be overwritten by 0.1 builds.
pub fn plugin_dir_v01() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        build_wasm_in(V01_PACKAGES, &target_dir().join("contract-0.1"), &["--features", "sluice-guest/contract-0-1"])
    })
}

/// A first-party plugin built against 0.1: `plugin_v01("json")`.
pub fn plugin_v01(name: &str) -> PathBuf {
    let path = plugin_dir_v01().join(format!("sluice_plugin_{}.wasm", name.replace('-', "_")));
    assert!(path.is_file(), "{} was not built", path.display());
    path
}

fn build_wasm_in(packages: &[&str], target: &Path, extra: &[&str]) -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root()).args(["build", "--quiet", "--profile", "wasm", "--target", "wasm32-wasip2"]);
    cmd.arg("--target-dir").arg(target).args(extra);
    for p in packages {
        cmd.args(["-p", p]);
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run cargo to build {packages:?}: {e}"));
    assert!(
        out.status.success(),
        "building {packages:?} for wasm32-wasip2 failed (is the target installed? scripts/setup installs it):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.join("wasm32-wasip2").join("wasm")
}

/// The built component of a first-party plugin: `plugin("ts-window")`.
pub fn plugin(name: &str) -> PathBuf {
    let path = plugin_dir().join(format!("sluice_plugin_{}.wasm", name.replace('-', "_")));
    assert!(path.is_file(), "{} was not built", path.display());
    path
}

/// A spec for a first-party plugin with a JSON config.
pub fn spec(name: &str, config: serde_json::Value) -> PluginSpec {
    PluginSpec { config, ..PluginSpec::from_path(plugin(name)) }
}

/// A spec with tight limits, so hostile tests finish quickly.
pub fn spec_with_limits(name: &str, config: serde_json::Value, limits: PluginLimits) -> PluginSpec {
    PluginSpec { limits, ..spec(name, config) }
}

/// A plugin config from a TOML file of `examples/`.
pub fn example_config(relative: &str) -> serde_json::Value {
    let path = workspace_root().join("examples").join(relative);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let table: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::to_value(table).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `sluice` program of this build (`src/bin/sluice.rs`, the same
/// `sluice::cli::main` as the real binary). Cargo builds it with the suites
/// and tells its path to integration tests only, hence a macro.
#[macro_export]
macro_rules! sluice_bin {
    () => {
        ::std::path::Path::new(env!("CARGO_BIN_EXE_sluice-test-bin"))
    };
}

/// The `[[plugins]]` tables of the suites' usual chain: `json` (id from
/// `event_id`, time from `ts`), then `ts-window` with `max_age` if given.
pub fn json_chain_toml(require_id: bool, max_age: Option<&str>) -> String {
    let mut out = format!(
        "[[plugins]]\nname = \"json\"\npath = \"{}\"\nconfig = {{ id_field = \"event_id\", timestamp_field = \"ts\", require_id = {require_id} }}\n",
        plugin("json").display()
    );
    if let Some(age) = max_age {
        out.push_str(&format!(
            "\n[[plugins]]\nname = \"ts-window\"\npath = \"{}\"\nconfig = {{ max_age = \"{age}\" }}\n",
            plugin("ts-window").display()
        ));
    }
    out
}

/// Now, in RFC 3339, shifted by `offset_secs`.
pub fn now_rfc3339(offset_secs: i64) -> String {
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    sluice_guest::time::format_rfc3339((now + offset_secs) * 1_000_000_000)
}

/// `n` JSON lines for the table sinks' suites: unique ids (`ev-0000000`),
/// every 10th line repeated (a producer's duplicate), every 97th with an
/// `n` a numeric column cannot take, every 50th not JSON at all, and with
/// `without_n`, every 89th lacking `n` (a NOT NULL column refuses it).
/// Returns the text, the ids that must arrive, the ids the table must
/// refuse, and the malformed lines.
pub fn table_lines(n: usize, without_n: bool) -> (String, BTreeSet<String>, BTreeSet<String>, BTreeSet<String>) {
    let ts = now_rfc3339(0);
    let (mut text, mut good, mut bad_row, mut malformed) =
        (String::new(), BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for i in 0..n {
        let id = format!("ev-{i:07}");
        if i % 50 == 49 {
            let line = format!("{{\"event_id\":\"{id}\",\"ts\":");
            text.push_str(&line);
            malformed.insert(line);
        } else if i % 97 == 13 {
            text.push_str(&format!("{{\"event_id\":\"{id}\",\"ts\":\"{ts}\",\"n\":\"zz\",\"msg\":\"bad {i}\"}}"));
            bad_row.insert(id);
        } else if without_n && i % 89 == 5 {
            text.push_str(&format!("{{\"event_id\":\"{id}\",\"ts\":\"{ts}\",\"msg\":\"no n {i}\"}}"));
            bad_row.insert(id);
        } else {
            let line =
                format!("{{\"event_id\":\"{id}\",\"ts\":\"{ts}\",\"n\":{i},\"msg\":\"line {i}\",\"level\":\"warn\"}}");
            text.push_str(&line);
            if i % 10 == 0 {
                text.push('\n');
                text.push_str(&line);
            }
            good.insert(id);
        }
        text.push('\n');
    }
    (text, good, bad_row, malformed)
}

/// Every entry of the quarantine of the state store at `state`, as
/// (payload as text, reason).
pub fn quarantine_entries(state: &Path) -> Vec<(String, String)> {
    let store = sluice::store::Store::open_read_only(state).unwrap_or_else(|e| panic!("{}: {e}", state.display()));
    store
        .quarantine_entries()
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|e| (String::from_utf8_lossy(&e.payload.to_vec()).into_owned(), e.reason))
        .collect()
}

/// The `/metrics` text of a sluice on `port` (empty when it does not answer).
pub fn scrape(port: u16) -> String {
    get(port, "/metrics")
}

/// `<sluice> run -c sluice.toml` in `dir` (`sluice` is [`sluice_bin!`]'s
/// path, which only a suite knows), quiet, once its metrics on `port` have
/// counted a record (within a minute): a pipeline for the tools that watch
/// one (`top`, `tap`).
pub fn running_pipeline(sluice: &Path, dir: &Path, port: u16) -> std::process::Child {
    let child = std::process::Command::new(sluice)
        .args(["run", "-c", "sluice.toml"])
        .current_dir(dir)
        .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let started = std::time::Instant::now();
    while !scrape(port).contains("sluice_records_in_total") {
        assert!(started.elapsed() < std::time::Duration::from_secs(60), "the pipeline never counted a record");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    child
}

/// The whole HTTP/1.0 answer of `GET path` on loopback (empty when nothing
/// listens).
pub fn get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return String::new() };
    let _ = s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes());
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// Per line of an NDJSON sink file, whether the event has a timestamp: a
/// reload test's way to tell the old chain's events from the new one's.
pub fn timestamped_lines(sink: &str) -> Vec<bool> {
    sink.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).map(|v| !v["timestamp"].is_null()).unwrap_or(false))
        .collect()
}
