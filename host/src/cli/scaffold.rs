//! `sluice plugin new --lang rust|python|js|c NAME`: a plugin project that
//! builds and passes its own cases in three commands (new, build, test).
//!
//! Projects are self-contained: the WIT contract and the SDK (Rust crate,
//! Python module or JavaScript module) are copied in from this binary, so a
//! project needs no sluice checkout and no package registry of ours. The
//! language's own tool chain is installed by the project's `build.sh`
//! (Python, JavaScript) or assumed (Rust: rustup, which sluice needs too;
//! C: clang, wasi-libc, wit-bindgen and wasm-tools, named in build.sh).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::args::{Lang, NewArgs};

pub(super) const WIT: &str = include_str!("../../../wit/plugin.wit");
const WIT_V01: &str = include_str!("../../../wit/v0.1/plugin.wit");

const RUST_SDK: [(&str, &str); 16] = [
    ("src/lib.rs", include_str!("../../../guest-sdk/src/lib.rs")),
    ("src/types.rs", include_str!("../../../guest-sdk/src/types.rs")),
    ("src/contract_v02.rs", include_str!("../../../guest-sdk/src/contract_v02.rs")),
    ("src/contract_v01.rs", include_str!("../../../guest-sdk/src/contract_v01.rs")),
    ("src/bytes.rs", include_str!("../../../guest-sdk/src/bytes.rs")),
    ("src/batch_fields.rs", include_str!("../../../guest-sdk/src/batch_fields.rs")),
    ("src/json/mod.rs", include_str!("../../../guest-sdk/src/json/mod.rs")),
    ("src/json/scan.rs", include_str!("../../../guest-sdk/src/json/scan.rs")),
    ("src/shortcuts.rs", include_str!("../../../guest-sdk/src/shortcuts.rs")),
    ("src/time.rs", include_str!("../../../guest-sdk/src/time.rs")),
    ("src/logfmt.rs", include_str!("../../../guest-sdk/src/logfmt.rs")),
    ("src/output_rules.rs", include_str!("../../../guest-sdk/src/output_rules.rs")),
    ("src/registry.rs", include_str!("../../../guest-sdk/src/registry.rs")),
    ("src/testing.rs", include_str!("../../../guest-sdk/src/testing.rs")),
    ("src/duration.rs", include_str!("../../../guest-sdk/src/duration.rs")),
    ("src/schema.rs", include_str!("../../../guest-sdk/src/schema.rs")),
];
const RUST_ABI: &str = include_str!("../../../abi/src/lib.rs");
/// What both Rust SDKs share (`guest-sdk/common`): a classifier project
/// gets it too.
pub(super) const RUST_COMMON: &str = include_str!("../../../guest-sdk/common/src/lib.rs");
/// The C SDK of both kinds: a classifier project gets these too, since
/// `sdk-build.sh` builds either world.
const C_SDK: [(&str, &str); 8] = [
    ("sluice_plugin.h", include_str!("../../../guest-sdk/c/sluice_plugin.h")),
    ("sluice_plugin.c", include_str!("../../../guest-sdk/c/sluice_plugin.c")),
    ("sluice_classifier.h", include_str!("../../../guest-sdk/c/sluice_classifier.h")),
    ("sluice_classifier.c", include_str!("../../../guest-sdk/c/sluice_classifier.c")),
    ("sluice_json_read.h", include_str!("../../../guest-sdk/c/sluice_json_read.h")),
    ("sluice_json_read.c", include_str!("../../../guest-sdk/c/sluice_json_read.c")),
    ("no-wasi.wat", include_str!("../../../guest-sdk/c/no-wasi.wat")),
    ("sdk-build.sh", include_str!("../../../guest-sdk/c/build.sh")),
];
const PY_SDK: &str = include_str!("../../../guest-sdk/python/sluice_plugin.py");
const JS_SDK: &str = include_str!("../../../guest-sdk/js/sluice-plugin.js");
const JS_BUILDER: &str = include_str!("../../../guest-sdk/js/build.mjs");

/// The versions of the tool chains a new project pins.
pub(crate) const COMPONENTIZE_PY: &str = "0.25.1";
pub(crate) const COMPONENTIZE_JS: &str = "0.23.0";

/// The cases every new project starts with: its plugin's own behaviour.
const CASES: [(&str, &str); 3] = [
    (
        "01-key-values.json",
        r#"{
 "description": "key=value pairs become a JSON object; quoted values keep their spaces",
 "records": [{"payload": "level=info msg=\"user logged in\" user=42"}],
 "expect": [{"event": {"body": {"level": "info", "msg": "user logged in", "user": "42"}}}]
}
"#,
    ),
    (
        "02-blank-lines-are-dropped.json",
        r#"{
 "description": "a blank line is dropped on purpose, with a reason",
 "records": [{"payload": "   "}],
 "expect": [{"drop": "blank line"}]
}
"#,
    ),
    (
        "03-garbage-is-rejected.json",
        r#"{
 "description": "a line without any key=value pair is rejected into the quarantine",
 "records": [{"payload": "no pairs here"}, {"payload": "a=1"}],
 "expect": [{"quarantine": "no key=value pair"}, {"event": {"body": {"a": "1"}}}]
}
"#,
    ),
];

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
}

/// The new project's folder, checked: a valid name, not there yet.
pub(super) fn project_root(args: &NewArgs) -> Result<PathBuf> {
    anyhow::ensure!(
        valid_name(&args.name),
        "plugin name {:?}: letters, digits and -, starting with a letter",
        args.name
    );
    let root = args.dir.join(&args.name);
    anyhow::ensure!(!root.exists(), "{} exists already", root.display());
    Ok(root)
}

/// Write `text` to `rel` under `root`, making its folders.
pub(super) fn write_file(root: &Path, rel: &str, text: &str) -> Result<()> {
    let path = root.join(rel);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    std::fs::write(&path, text).with_context(|| format!("write {}", path.display()))
}

/// `sluice plugin new` of a parse plugin (`--kind classifier`:
/// `scaffold_classifier`).
pub(crate) fn new(args: &NewArgs) -> Result<()> {
    let root = project_root(args)?;
    let write = |rel: &str, text: &str| write_file(&root, rel, text);
    write("wit/plugin.wit", WIT)?;
    write("wit/v0.1/plugin.wit", WIT_V01)?;
    for (file, text) in CASES {
        write(&format!("cases/{file}"), text)?;
    }
    let name = &args.name;
    let snake = name.replace('-', "_");
    let wasm = match args.lang {
        Lang::Rust => {
            for (file, text) in RUST_SDK {
                write(&format!("sluice-guest/{file}"), text)?;
            }
            write("sluice-guest/Cargo.toml", RUST_SDK_MANIFEST)?;
            write("sluice-abi/src/lib.rs", RUST_ABI)?;
            write("sluice-abi/Cargo.toml", RUST_ABI_MANIFEST)?;
            write("sluice-guest-common/src/lib.rs", RUST_COMMON)?;
            write("sluice-guest-common/Cargo.toml", RUST_COMMON_MANIFEST)?;
            write("Cargo.toml", &RUST_MANIFEST.replace("{name}", name).replace("{sdk}", "sluice-guest"))?;
            write("Cargo.lock", &rust_lock(name, &["sluice-guest", "serde", "serde_json"])?)?;
            write("src/lib.rs", &RUST_PLUGIN.replace("{class}", &class_name(name)))?;
            write("build.sh", RUST_BUILD)?;
            format!("target/wasm32-wasip2/release/{snake}.wasm")
        }
        Lang::Python => {
            let class = class_name(name);
            let wasm =
                write_sources(&write, &root, args.lang, "plugin", name, PY_SDK, &PY_PLUGIN.replace("{class}", &class))?;
            write(&format!("test_{snake}.py"), &PY_TEST.replace("{module}", &snake).replace("{class}", &class))?;
            wasm
        }
        Lang::Js => {
            let class = class_name(name);
            let wasm =
                write_sources(&write, &root, args.lang, "plugin", name, JS_SDK, &JS_PLUGIN.replace("{class}", &class))?;
            write("sluice-native.mjs", JS_NATIVE)?;
            write("test.mjs", &JS_TEST.replace("{class}", &class))?;
            wasm
        }
        Lang::C => write_sources(&write, &root, args.lang, "plugin", name, "", C_PLUGIN)?,
    };
    make_executable(&root.join("build.sh"))?;
    write("README.md", &README.replace("{name}", name).replace("{wasm}", &wasm))?;
    let mut then = Vec::new();
    match args.lang {
        Lang::Python => then.push(format!(
            "python3 -m unittest test_{snake}   # its unit tests, in plain Python (sluice on the PATH, or $SLUICE, judges)"
        )),
        Lang::Rust => then.push("cargo test   # its unit tests, natively".to_string()),
        Lang::Js => then.push("node --import ./sluice-native.mjs test.mjs   # its unit tests, in Node".to_string()),
        Lang::C => {}
    }
    then.push(format!("sluice plugin test {wasm} --cases cases"));
    say_steps(args, &root, &then);
    Ok(())
}

/// The versions the SDK is built and tested with: sluice's own lock file.
const WORKSPACE_LOCK: &str = include_str!("../../../Cargo.lock");

/// A new Rust project's `Cargo.lock`: sluice's own lock file cut down to
/// what the project's dependencies (`roots`) reach, plus the project. A
/// plugin then builds with the crate versions its SDK was tested with,
/// not whatever crates.io holds on the day; `cargo update` moves on when
/// the author chooses. (Packages only a feature sluice enables reaches
/// stay listed; cargo drops them on the first build.)
pub(super) fn rust_lock(name: &str, roots: &[&str]) -> Result<String> {
    let lock: toml::Table = toml::from_str(WORKSPACE_LOCK).context("sluice's own Cargo.lock")?;
    let packages: Vec<&toml::Table> = lock
        .get("package")
        .and_then(toml::Value::as_array)
        .map(|a| a.iter().filter_map(toml::Value::as_table).collect())
        .unwrap_or_default();
    let field = |p: &toml::Table, k: &str| p.get(k).and_then(toml::Value::as_str).unwrap_or_default().to_string();
    // A dependency is written `name`, or `name version` where several
    // versions are locked (then perhaps with its source in parentheses).
    let find = |spec: &str| -> Option<usize> {
        let mut words = spec.split_whitespace();
        let (dep, version) = (words.next()?, words.next());
        let matching: Vec<usize> = (0..packages.len())
            .filter(|&i| {
                field(packages[i], "name") == dep && version.is_none_or(|v| field(packages[i], "version") == v)
            })
            .collect();
        // A root named without a version where several are locked: the
        // newest (the last in the lock's order).
        matching.last().copied()
    };
    let mut keep = std::collections::BTreeSet::new();
    let mut todo: Vec<usize> = roots
        .iter()
        .map(|r| find(r).with_context(|| format!("{r} is not in sluice's Cargo.lock")))
        .collect::<Result<_>>()?;
    while let Some(i) = todo.pop() {
        if keep.insert(i) {
            let deps = packages[i].get("dependencies").and_then(toml::Value::as_array);
            todo.extend(deps.into_iter().flatten().filter_map(toml::Value::as_str).filter_map(find));
        }
    }
    let mut project = toml::Table::new();
    project.insert("name".into(), name.into());
    project.insert("version".into(), "0.1.0".into());
    let mut direct: Vec<String> = roots.iter().map(|r| r.to_string()).collect();
    direct.sort();
    project.insert("dependencies".into(), direct.into());
    let mut listed: Vec<toml::Value> = keep.into_iter().map(|i| toml::Value::Table(packages[i].clone())).collect();
    listed.push(toml::Value::Table(project));
    listed.sort_by_cached_key(|p| p.as_table().map(|t| (field(t, "name"), field(t, "version"))).unwrap_or_default());
    let mut out = toml::Table::new();
    out.insert("version".into(), lock.get("version").cloned().unwrap_or(toml::Value::Integer(4)));
    out.insert("package".into(), toml::Value::Array(listed));
    Ok(format!(
        "# This file is automatically @generated by Cargo.\n# It is not intended for manual editing.\n{}",
        toml::to_string(&out).context("write the project's Cargo.lock")?
    ))
}

/// The plugin's type, named after the project: `my-parser` → `MyParser`.
fn class_name(name: &str) -> String {
    name.split(['-', '_'])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
        })
        .collect()
}

/// A Python, JavaScript or C project's sources, for `world` (`plugin` or
/// `classifier`): the SDK (`sdk`: Python's or JavaScript's one file; C's
/// folder is the same for both worlds), the plugin's own source, and its
/// `build.sh`. Each file is named after the world (`sluice_plugin.py`,
/// `classifier.js`). Returns the component the build makes.
pub(super) fn write_sources(
    write: &dyn Fn(&str, &str) -> Result<()>,
    root: &Path,
    lang: Lang,
    world: &str,
    name: &str,
    sdk: &str,
    source: &str,
) -> Result<String> {
    let snake = name.replace('-', "_");
    match lang {
        Lang::Rust => anyhow::bail!("a Rust project's sources differ by world: its scaffold writes them"),
        Lang::Python => {
            write(&format!("sluice_{world}.py"), sdk)?;
            write(&format!("{snake}.py"), source)?;
            write("build.sh", &build_script(PY_BUILD, world, &snake, ""))?;
        }
        Lang::Js => {
            let main = format!("{world}.js");
            write(&format!("sluice-{world}.js"), sdk)?;
            write("build.mjs", JS_BUILDER)?;
            write(&main, source)?;
            write("package.json", &JS_PACKAGE.replace("{name}", name).replace("{componentize_js}", COMPONENTIZE_JS))?;
            write("build.sh", &build_script(JS_BUILD, world, &snake, &main))?;
        }
        Lang::C => {
            let main = format!("{world}.c");
            for (file, text) in C_SDK {
                write(&format!("sdk/{file}"), text)?;
            }
            make_executable(&root.join("sdk/sdk-build.sh"))?;
            write(&main, source)?;
            write("build.sh", &build_script(C_BUILD, world, &snake, &main))?;
        }
    }
    Ok(format!("{snake}.wasm"))
}

/// A project's `build.sh` from its template, for `world` (`plugin` or
/// `classifier`), the module `snake` (its `.wasm` named after it) and the
/// source file `source` it builds.
fn build_script(template: &str, world: &str, snake: &str, source: &str) -> String {
    template
        .replace("{world}", world)
        .replace("{source}", source)
        .replace("{module}", snake)
        .replace("{wasm}", &format!("{snake}.wasm"))
        .replace("{version}", COMPONENTIZE_PY)
}

/// What to type next: each line works after the one before it, the paths
/// being the project's own once inside it.
pub(super) fn say_steps(args: &NewArgs, root: &Path, then: &[String]) {
    let shown = if args.dir == Path::new(".") { Path::new(&args.name) } else { root };
    println!("created {}", shown.display());
    println!("  cd {}", shown.display());
    println!("  ./build.sh");
    for line in then {
        println!("  {line}");
    }
}

pub(super) fn make_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut perms = std::fs::metadata(path)?.permissions();
    perms.set_mode(0o755);
    std::fs::set_permissions(path, perms).with_context(|| format!("chmod {}", path.display()))
}

const README: &str = r#"# {name}

A sluice plugin. Build it, then run its cases through the sluice host:

```sh
./build.sh                                   # → {wasm}
sluice plugin test {wasm} --cases cases      # a verdict per case
sluice plugin run --plugin {wasm} < some.log # one outcome per line
```

`cases/*.json` are golden records and the outcomes they must give (format:
the conformance kit's README in the sluice repository). Add a case for each
behaviour you rely on. `wit/plugin.wit` is the contract, documented type
by type.
"#;

const RUST_SDK_MANIFEST: &str = r#"[package]
name = "sluice-guest"
version = "0.1.0"
edition = "2024"

[lib]
name = "sluice_guest"

[dependencies]
wit-bindgen = { version = "0.61", default-features = false, features = ["macros", "realloc"] }
serde = { version = "1", features = ["derive"] }
serde_json = { version = "1", features = ["raw_value"] }
simdutf8 = "0.1.5"
jiff = { version = "0.2", default-features = false, features = ["std", "tzdb-bundle-always"] }
sluice-abi = { path = "../sluice-abi" }
sluice-guest-common = { path = "../sluice-guest-common" }
schemars = { version = "1", optional = true }

[features]
# Build against sluice:plugin@0.1.0 (for a host older than 0.2).
contract-0-1 = []
# JSON Schemas of the config values the SDK reads (for a plugin's docs).
schema = ["dep:schemars"]
"#;

pub(super) const RUST_COMMON_MANIFEST: &str = r#"[package]
name = "sluice-guest-common"
version = "0.1.0"
edition = "2024"

[lib]
name = "sluice_guest_common"

[dependencies]
serde = { version = "1", features = ["derive"] }
serde_json = "1"
serde_path_to_error = "0.1"
"#;

const RUST_ABI_MANIFEST: &str = r#"[package]
name = "sluice-abi"
version = "0.1.0"
edition = "2024"

[lib]
name = "sluice_abi"
"#;

pub(super) const RUST_MANIFEST: &str = r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
# The Rust sluice and its SDK are built and tested with.
rust-version = "1.95"

[lib]
crate-type = ["cdylib"]

[dependencies]
{sdk} = { path = "{sdk}" }
serde = { version = "1", features = ["derive"] }
serde_json = "1"

[profile.release]
opt-level = 3
lto = true
codegen-units = 1
strip = true

[workspace]
"#;

pub(super) const RUST_BUILD: &str = r#"#!/usr/bin/env bash
# Needs Rust (rustup); adds the wasm32-wasip2 target once.
set -euo pipefail
cd "$(dirname "$0")"
rustup target list --installed | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2
cargo build --release --target wasm32-wasip2
"#;

const RUST_PLUGIN: &str = r#"//! key=value lines in, one JSON object out.

use serde::Deserialize;
use sluice_guest::{Event, Outcome, Plugin, Record, export_plugin};

/// The plugin is its own config (the `config` table in sluice.toml).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct {class} {}

impl Plugin for {class} {
    fn process(&mut self, record: &Record) -> Outcome {
        let line = String::from_utf8_lossy(record.payload);
        if line.trim().is_empty() {
            return Outcome::drop("blank line");
        }
        let mut object = serde_json::Map::new();
        let mut rest = line.trim();
        while let Some(eq) = rest.find('=') {
            let key = rest[..eq].trim();
            let after = &rest[eq + 1..];
            let (value, next) = match after.strip_prefix('"') {
                Some(quoted) => match quoted.find('"') {
                    Some(end) => (&quoted[..end], &quoted[end + 1..]),
                    None => (quoted, ""),
                },
                None => after.split_once(' ').unwrap_or((after, "")),
            };
            if !key.is_empty() && !key.contains(' ') {
                object.insert(key.to_string(), value.into());
            }
            rest = next.trim_start();
        }
        if object.is_empty() {
            return Outcome::reject("no key=value pair in the line");
        }
        Outcome::emit(Event::new(serde_json::Value::Object(object).to_string().into_bytes()))
    }
}

export_plugin!({class});

/// Unit tests, natively (`cargo test`): the plugin is plain Rust, so no
/// build and no host are needed; `sluice plugin test` runs the cases
/// through the built component.
#[cfg(test)]
mod tests {
    use super::*;

    fn run(line: &str) -> Outcome {
        {class}::default().process(&Record::from_line(line))
    }

    #[test]
    fn pairs_become_one_object() {
        let Outcome::Emit(events) = run("a=1 b=\"two words\"") else { panic!("not emitted") };
        let body: serde_json::Value = serde_json::from_slice(&events[0].body).unwrap_or_default();
        assert_eq!(body, serde_json::json!({"a": "1", "b": "two words"}));
    }

    #[test]
    fn a_blank_line_is_dropped_and_a_line_without_pairs_rejected() {
        assert!(matches!(run("   "), Outcome::Drop(_)));
        assert!(matches!(run("no pairs here"), Outcome::Reject(_)));
    }
}
"#;

const PY_PLUGIN: &str = r#""""key=value lines in, one JSON object out."""

import shlex

from sluice_plugin import Plugin, drop, emit, export, reject


class {class}(Plugin):
    # The config keys it reads: any other is refused at start, by name.
    config_keys = set()

    def process(self, record):
        line = bytes(record.payload).decode("utf-8", "replace")
        if not line.strip():
            return drop("blank line")
        pairs = {}
        for token in shlex.split(line, posix=True):
            key, eq, value = token.partition("=")
            if eq and key:
                pairs[key] = value
        if not pairs:
            return reject("no key=value pair in the line")
        return emit(pairs)


WitWorld = export({class})
"#;

const PY_TEST: &str = r#""""The plugin's unit tests, in plain Python (no build): each outcome is
judged by the host's own rules, asked of `sluice` (on the PATH, or $SLUICE):
python3 -m unittest test_{module}"""

import unittest

from sluice_plugin import run_natively
from {module} import {class}


class {class}Test(unittest.TestCase):
    def test_pairs_become_one_object(self):
        [out] = run_natively({class}, {}, ['a=1 b="two words"'])
        self.assertEqual(out.verdict, "emit")
        self.assertEqual(out.events[0].json(), {"a": "1", "b": "two words"})

    def test_blank_lines_drop_and_others_reject(self):
        blank, plain = run_natively({class}, {}, ["   ", "no pairs here"])
        self.assertEqual((blank.verdict, blank.reason), ("drop", "blank line"))
        self.assertEqual(plain.verdict, "reject")

    def test_an_unknown_config_key_is_refused(self):
        with self.assertRaisesRegex(ValueError, "unknown config key 'field'"):
            run_natively({class}, {"field": "x"}, [])


if __name__ == "__main__":
    unittest.main()
"#;

const PY_BUILD: &str = r#"#!/usr/bin/env bash
# Needs Python 3.10+; installs componentize-py {version} into .venv once (or
# uses the one $COMPONENTIZE_PY names).
set -euo pipefail
cd "$(dirname "$0")"
CPY="${COMPONENTIZE_PY:-.venv/bin/componentize-py}"
if [ ! -x "$CPY" ]; then
  python3 -m venv .venv
  .venv/bin/pip install --quiet "componentize-py=={version}"
fi
"$CPY" -d wit -w {world} componentize {module} -o {module}.wasm
"#;

const JS_PLUGIN: &str = r#"// key=value lines in, one JSON object out.
import { Plugin, drop, emit, exportPlugin, reject, text } from "./sluice-plugin.js";

export class {class} extends Plugin {
  // The config keys it reads: any other is refused at start, by name.
  static configKeys = [];

  process(record) {
    const line = text(record.payload);
    if (line.trim() === "") return drop("blank line");
    const pairs = {};
    for (const m of line.matchAll(/([^\s=]+)=("([^"]*)"|\S*)/g)) {
      pairs[m[1]] = m[3] !== undefined ? m[3] : m[2];
    }
    if (Object.keys(pairs).length === 0) return reject("no key=value pair in the line");
    return emit(pairs);
  }
}

export const { init, process } = exportPlugin({class});
"#;

/// What stands in for the host when a JavaScript plugin's unit tests run
/// in Node (its helpers are the host's code, through `sluice plugin
/// helpers`).
const JS_NATIVE: &str = include_str!("../../../guest-sdk/js/sluice-native.mjs");

const JS_TEST: &str = r#"// The plugin's unit tests, in Node (no build; the host's helpers answer
// through `sluice plugin helpers`, so sluice must be on the PATH or in
// $SLUICE): node --import ./sluice-native.mjs test.mjs
import assert from "node:assert/strict";
import test from "node:test";

import { runNatively } from "./sluice-plugin.js";
import { {class} } from "./plugin.js";

test("pairs become one object", () => {
  const [out] = runNatively({class}, {}, ['a=1 b="two words"']);
  assert.equal(out.verdict, "emit");
  assert.deepEqual(out.events[0].json(), { a: "1", b: "two words" });
});

test("blank lines drop and others reject", () => {
  const [blank, plain] = runNatively({class}, {}, ["   ", "no pairs here"]);
  assert.deepEqual([blank.verdict, blank.reason], ["drop", "blank line"]);
  assert.equal(plain.verdict, "reject");
});

test("an unknown config key is refused", () => {
  assert.throws(() => runNatively({class}, { field: "x" }, []), /unknown config key 'field'/);
});
"#;

const JS_PACKAGE: &str = r#"{
  "name": "{name}",
  "private": true,
  "type": "module",
  "devDependencies": {
    "@bytecodealliance/componentize-js": "{componentize_js}"
  }
}
"#;

const JS_BUILD: &str = r#"#!/usr/bin/env bash
# Needs Node.js 18+ and npm; installs componentize-js into node_modules once
# (or uses the install $COMPONENTIZE_JS names).
set -euo pipefail
cd "$(dirname "$0")"
if [ -z "${COMPONENTIZE_JS:-}" ] && [ ! -d node_modules/@bytecodealliance/componentize-js ]; then
  npm install --no-audit --no-fund --silent
fi
WORLD={world} node build.mjs {source} {wasm} wit
"#;

const C_PLUGIN: &str = r#"/* key=value lines in, one JSON object out. */
#include <string.h>

#include "sluice_plugin.h"

static void process(const sluice_record *r, sluice_out *out) {
    const char *line = (const char *)r->payload.ptr;
    size_t n = r->payload.len, i = 0, pairs = 0;
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ')) n--;
    while (i < n && line[i] == ' ') i++;
    if (i == n) {
        sluice_drop(out, "blank line");
        return;
    }
    sluice_buf body = {0};
    sluice_json_open(&body);
    while (i < n) {
        size_t key = i;
        while (i < n && line[i] != '=' && line[i] != ' ') i++;
        if (i == n || line[i] != '=' || i == key) { /* not a pair: skip the word */
            while (i < n && line[i] != ' ') i++;
            while (i < n && line[i] == ' ') i++;
            continue;
        }
        size_t key_len = i - key, value;
        i++;
        if (i < n && line[i] == '"') {
            value = ++i;
            while (i < n && line[i] != '"') i++;
        } else {
            value = i;
            while (i < n && line[i] != ' ') i++;
        }
        sluice_json_key_n(&body, line + key, key_len);
        sluice_json_string(&body, line + value, i - value);
        if (i < n && line[i] == '"') i++;
        while (i < n && line[i] == ' ') i++;
        pairs++;
    }
    sluice_json_close(&body);
    if (pairs == 0) sluice_reject(out, "no key=value pair in the line");
    else sluice_emit(out, &(sluice_event){.body = body.ptr, .body_len = body.len});
    sluice_buf_free(&body);
}

/* No config: setup is NULL. */
SLUICE_PLUGIN(NULL, process)
"#;

const C_BUILD: &str = r#"#!/usr/bin/env bash
# Needs clang, lld, wasi-libc and libclang-rt-14-dev-wasm32 (Debian), and
# wit-bindgen and wasm-tools (cargo install wit-bindgen-cli wasm-tools), on
# PATH or named by $WIT_BINDGEN and $WASM_TOOLS.
set -euo pipefail
cd "$(dirname "$0")"
WORLD={world} sdk/sdk-build.sh {source} {wasm} wit
"#;

#[cfg(test)]
mod tests {
    use super::{RUST_SDK, WORKSPACE_LOCK, class_name, rust_lock};

    /// The template's lock pins what sluice's lock pins, for exactly what
    /// the project reaches: the SDK, wit-bindgen, serde, and nothing of
    /// the host.
    #[test]
    fn a_new_rust_project_is_locked_to_the_versions_sluice_is_tested_with() {
        let text = rust_lock("demo", &["sluice-guest", "serde", "serde_json"]).unwrap_or_else(|e| panic!("{e}"));
        let lock: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let ours: toml::Table = toml::from_str(WORKSPACE_LOCK).unwrap_or_else(|e| panic!("{e}"));
        let list = |t: &toml::Table| -> Vec<(String, String)> {
            t["package"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| {
                    (p["name"].as_str().unwrap_or("").to_string(), p["version"].as_str().unwrap_or("").to_string())
                })
                .collect()
        };
        let (locked, all) = (list(&lock), list(&ours));
        for name in ["sluice-guest", "sluice-guest-common", "sluice-abi", "wit-bindgen", "serde_json", "jiff", "demo"] {
            assert!(locked.iter().any(|(n, _)| n == name), "{name} not in\n{text}");
        }
        for name in ["sluice-host", "wasmtime", "rocksdb", "rdkafka", "tokio"] {
            assert!(!locked.iter().any(|(n, _)| n == name), "{name} in\n{text}");
        }
        for p in locked.iter().filter(|(n, _)| n != "demo") {
            assert!(all.contains(p), "{p:?} is not what sluice locks");
        }
        assert!(text.starts_with("# This file is automatically @generated by Cargo."), "{text}");
        assert_eq!(lock["version"].as_integer(), Some(4));
    }

    #[test]
    fn the_plugin_type_is_named_after_the_project() {
        assert_eq!(class_name("my-parser"), "MyParser");
        assert_eq!(class_name("kv"), "Kv");
        assert_eq!(class_name("a_b-c"), "ABC");
    }

    /// A new Rust project gets the whole SDK: a module added to the crate
    /// and not to `RUST_SDK` would build here and fail in every project.
    #[test]
    fn the_rust_sdk_copied_into_a_project_is_every_source_file_of_the_crate() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk");
        let mut on_disk = Vec::new();
        let mut dirs = vec![root.join("src")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let rel = path.strip_prefix(&root).unwrap_or(&path).to_string_lossy().replace('\\', "/");
                    on_disk.push(rel);
                }
            }
        }
        on_disk.sort();
        let mut listed: Vec<String> = RUST_SDK.iter().map(|(f, _)| f.to_string()).collect();
        listed.sort();
        assert_eq!(listed, on_disk);
    }
}
