//! Plugins in Python, JavaScript and C, built here with the tool chains
//! `scripts/setup` installs (componentize-py from PyPI, componentize-js
//! from npm, wit-bindgen and wasm-tools from crates.io into `$SLUICE_TOOLS`;
//! clang and wasi-libc from Debian). A missing tool chain fails the suite
//! loudly, naming the variable and the setup step; nothing is skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::workspace_root;

/// `$SLUICE_COMPONENTIZE_PY`: the componentize-py program.
pub fn componentize_py() -> PathBuf {
    let p = std::env::var_os("SLUICE_COMPONENTIZE_PY").map(PathBuf::from).unwrap_or_else(|| {
        panic!("SLUICE_COMPONENTIZE_PY is not set: run the suite through scripts/test (scripts/setup installs componentize-py)")
    });
    assert!(p.is_file(), "componentize-py not found at {} (scripts/setup installs it)", p.display());
    p
}

/// `$SLUICE_COMPONENTIZE_JS`: the componentize-js package folder.
pub fn componentize_js() -> PathBuf {
    let p = std::env::var_os("SLUICE_COMPONENTIZE_JS").map(PathBuf::from).unwrap_or_else(|| {
        panic!("SLUICE_COMPONENTIZE_JS is not set: run the suite through scripts/test (scripts/setup installs componentize-js)")
    });
    assert!(
        p.join("package.json").is_file(),
        "componentize-js not found at {} (scripts/setup installs it)",
        p.display()
    );
    p
}

/// `$SLUICE_WIT_BINDGEN` and `$SLUICE_WASM_TOOLS`: the programs the C
/// build needs beside clang.
pub fn c_tools() -> (PathBuf, PathBuf) {
    let tool = |var: &str, what: &str| {
        let p = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
            panic!("{var} is not set: run the suite through scripts/test (scripts/setup installs {what})")
        });
        assert!(p.is_file(), "{what} not found at {} (scripts/setup installs it)", p.display());
        p
    };
    (tool("SLUICE_WIT_BINDGEN", "wit-bindgen"), tool("SLUICE_WASM_TOOLS", "wasm-tools"))
}

/// Build C plugin `source` (with the C SDK) into `out`.
pub fn build_c(source: &Path, out: &Path) {
    build_c_world(source, out, "plugin")
}

/// [`build_c`] for a world of the contract: `plugin` or `classifier`.
pub fn build_c_world(source: &Path, out: &Path, world: &str) {
    let root = workspace_root();
    let (wit_bindgen, wasm_tools) = c_tools();
    let mut cmd = Command::new(root.join("guest-sdk/c/build.sh"));
    cmd.arg(source)
        .arg(out)
        .arg(root.join("wit"))
        .env("WIT_BINDGEN", wit_bindgen)
        .env("WASM_TOOLS", wasm_tools)
        .env("WORLD", world);
    run(cmd, &format!("guest-sdk/c/build.sh {}", source.display()));
}

fn run(mut cmd: Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Build Python module `module` (found in `dirs` or the Python SDK) into
/// `out`.
pub fn build_python(dirs: &[&Path], module: &str, out: &Path) {
    build_python_world(dirs, module, out, "plugin")
}

/// [`build_python`] for a world of the contract: `plugin` or `classifier`.
pub fn build_python_world(dirs: &[&Path], module: &str, out: &Path, world: &str) {
    let root = workspace_root();
    let mut cmd = Command::new(componentize_py());
    cmd.arg("-d").arg(root.join("wit")).args(["-w", world, "componentize"]);
    cmd.arg("-p").arg(root.join("guest-sdk/python"));
    for d in dirs {
        cmd.arg("-p").arg(d);
    }
    cmd.arg(module).arg("-o").arg(out);
    run(cmd, &format!("componentize-py {module}"));
}

/// Build JavaScript module `source` into `out`: copied beside the
/// JavaScript SDK in a scratch folder (a plugin imports it as
/// `./sluice-plugin.js`), then componentized.
pub fn build_js(source: &Path, out: &Path) {
    build_js_with(source, out, None, "plugin")
}

/// [`build_js`] for a world of the contract: `plugin` or `classifier` (a
/// classifier imports `./sluice-classifier.js`).
pub fn build_js_world(source: &Path, out: &Path, world: &str) {
    build_js_with(source, out, None, world)
}

/// [`build_js`] with componentize-js's ahead-of-time mode, through the
/// `weval` program at `weval` (benches/plugin_languages).
pub fn build_js_aot(source: &Path, out: &Path, weval: &Path) {
    build_js_with(source, out, Some(weval), "plugin")
}

fn build_js_with(source: &Path, out: &Path, weval: Option<&Path>, world: &str) {
    let root = workspace_root();
    let scratch = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let name = source.file_name().unwrap_or_default();
    std::fs::copy(source, scratch.path().join(name)).unwrap_or_else(|e| panic!("{e}"));
    for sdk in ["sluice-plugin.js", "sluice-classifier.js"] {
        std::fs::copy(root.join("guest-sdk/js").join(sdk), scratch.path().join(sdk)).unwrap_or_else(|e| panic!("{e}"));
    }
    let mut cmd = Command::new("node");
    cmd.arg(root.join("guest-sdk/js/build.mjs"))
        .arg(scratch.path().join(name))
        .arg(out)
        .arg(root.join("wit"))
        .env("COMPONENTIZE_JS", componentize_js())
        .env("WORLD", world);
    match weval {
        Some(w) => cmd.env("WEVAL", w),
        None => cmd.env_remove("WEVAL"),
    };
    run(cmd, &format!("componentize-js {}", source.display()));
}
