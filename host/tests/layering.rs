//! The host's layering, checked on every test run: no import circle
//! between its files, none between its top-level components, the config
//! assembler imported only by what runs a pipeline, and no `unwrap` or
//! `expect` outside tests.
//!
//! It reads `src/` as text: each `use` and each path in the code
//! (`crate::…`, `super::…`, and a module's own child, `child::Item`, in a
//! `use` or a type) is resolved to the file
//! that defines what it names, or to the file that re-exports it: an import
//! through a `pub use` depends on the re-exporting module, so a circle
//! behind a re-export is one. One edge per file pair. Test
//! code (`#[cfg(test)]` items, `*_tests.rs` files) is left out: a test may
//! reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Components in the order they may depend on each other: each may import
/// only those before it. A new top-level module must be placed here.
const LAYERS: &[&str] = &[
    "lib",
    "main",
    "units",
    "problem",
    "features",
    "masking",
    "record",
    "verdict",
    "delivery",
    "route",
    "custody",
    "telemetry",
    "batch",
    "schema_registry",
    "plugin",
    "store",
    "source",
    "sink",
    "watchdog",
    "config",
    "pipeline",
    "cli",
];

/// The only importers of the assembled config (`config/mod.rs` and what it
/// declares): the command line and the code that builds a running
/// pipeline from it. Every component takes its own section instead.
const CONFIG_READERS: &[&str] = &[
    "cli/",
    "pipeline/mod.rs",
    "pipeline/files.rs",
    "pipeline/replay.rs",
    "pipeline/setup.rs",
    "pipeline/cases.rs",
    "pipeline/case_sink.rs",
    "pipeline/shadow.rs",
    "pipeline/kafka/",
    "pipeline/kafka_absent.rs",
];

struct Source {
    files: BTreeMap<String, String>,
    modules: BTreeMap<Vec<String>, String>,
    defs: BTreeMap<String, BTreeSet<String>>,
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

fn module_path(rel: &str) -> Vec<String> {
    let stem = rel.trim_end_matches(".rs");
    let mut parts: Vec<String> = stem.split('/').map(String::from).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts == ["lib"] || parts == ["main"] {
        parts.clear();
    }
    parts
}

/// The text without comments, strings and char literals, so neither a
/// doc example nor a message reads as an import.
fn code_only(t: &str) -> String {
    let b = t.as_bytes();
    let mut out = String::with_capacity(t.len());
    let mut i = 0;
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    while i < b.len() {
        let c = b[i];
        if t[i..].starts_with("//") {
            i = t[i..].find('\n').map_or(b.len(), |n| i + n);
        } else if t[i..].starts_with("/*") {
            i = t[i..].find("*/").map_or(b.len(), |n| i + n + 2);
        } else if (c == b'r' || (c == b'b' && b.get(i + 1) == Some(&b'r'))) && (i == 0 || !ident(b[i - 1])) && {
            let s = if c == b'b' { i + 2 } else { i + 1 };
            let hashes = b[s..].iter().take_while(|&&h| h == b'#').count();
            b.get(s + hashes) == Some(&b'"')
        } {
            let s = if c == b'b' { i + 2 } else { i + 1 };
            let hashes = b[s..].iter().take_while(|&&h| h == b'#').count();
            let close = format!("\"{}", "#".repeat(hashes));
            let from = s + hashes + 1;
            i = t[from..].find(&close).map_or(b.len(), |n| from + n + close.len());
            out.push_str("\"\"");
        } else if c == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            i = j + 1;
            out.push_str("\"\"");
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\''); a lifetime has no closing quote.
            let end = if b.get(i + 1) == Some(&b'\\') {
                t[i + 2..].find('\'').map(|n| i + 2 + n)
            } else {
                t[i + 1..].char_indices().nth(1).filter(|(_, ch)| *ch == '\'').map(|(n, _)| i + 1 + n)
            };
            match end {
                Some(e) => {
                    out.push_str("' '");
                    i = e + 1;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let ch = t[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// The text without the items under `#[cfg(test)]`.
fn without_tests(t: &str) -> String {
    let mut out = String::new();
    let mut rest = t;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let semi = after.find(';');
        let brace = after.find('{');
        match (semi, brace) {
            (Some(s), b) if b.is_none_or(|b| s < b) => rest = &after[s + 1..],
            (_, Some(b)) => {
                let mut depth = 0;
                let mut end = after.len();
                for (k, ch) in after[b..].char_indices() {
                    match ch {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = b + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                rest = &after[end..];
            }
            _ => rest = "",
        }
    }
    out.push_str(rest);
    out
}

/// A `use` tree (`a::{b, c::{d, e as f}}`) as its paths.
fn expand(prefix: &[String], tree: &str) -> Vec<Vec<String>> {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open]
            .trim_end_matches(':')
            .split("::")
            .filter(|s| !s.trim().is_empty())
            .map(|s| s.trim().to_string())
            .collect();
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let base: Vec<String> = prefix.iter().cloned().chain(head).collect();
        let mut out = Vec::new();
        let mut depth = 0;
        let mut cur = String::new();
        for ch in inner.chars() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            if ch == ',' && depth == 0 {
                if !cur.trim().is_empty() {
                    out.extend(expand(&base, &cur));
                }
                cur.clear();
            } else {
                cur.push(ch);
            }
        }
        if !cur.trim().is_empty() {
            out.extend(expand(&base, &cur));
        }
        return out;
    }
    let path = tree.split(" as ").next().unwrap_or(tree);
    vec![
        prefix
            .iter()
            .cloned()
            .chain(path.split("::").map(|s| s.trim().to_string()).filter(|s| !s.is_empty()))
            .collect(),
    ]
}

fn absolute(me: &[String], path: &[String]) -> Option<Vec<String>> {
    match path.first().map(String::as_str) {
        Some("crate") => Some(path[1..].to_vec()),
        Some("self") => Some(me.iter().cloned().chain(path[1..].iter().cloned()).collect()),
        Some("super") => {
            let mut base = me.to_vec();
            let mut rest = path;
            while rest.first().is_some_and(|p| p == "super") {
                base.pop();
                rest = &rest[1..];
            }
            Some(base.into_iter().chain(rest.iter().cloned()).collect())
        }
        _ => None,
    }
}

fn words(t: &str) -> impl Iterator<Item = (usize, &str)> {
    t.match_indices(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .scan(0, |start, (at, sep)| {
            let w = (*start, &t[*start..at]);
            *start = at + sep.len();
            Some(w)
        })
        .filter(|(_, w)| !w.is_empty())
}

fn uses(t: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = t;
    while let Some(at) = rest.find("use ") {
        let before = if at == 0 { b' ' } else { rest.as_bytes()[at - 1] };
        let tail = &rest[at + 4..];
        if before.is_ascii_alphanumeric() || before == b'_' {
            rest = tail;
            continue;
        }
        match tail.find(';') {
            Some(end) => {
                out.push(tail[..end].to_string());
                rest = &tail[end + 1..];
            }
            None => break,
        }
    }
    out
}

impl Source {
    fn read() -> Source {
        let root = src();
        let mut paths = Vec::new();
        walk(&root, &mut paths);
        Source::of(paths.iter().map(|p| {
            let rel = p.strip_prefix(&root).unwrap_or(p).to_string_lossy().replace('\\', "/");
            let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (rel, text)
        }))
    }

    /// The crate made of these files (path under `src/`, text).
    fn of(files: impl IntoIterator<Item = (String, String)>) -> Source {
        let mut s = Source { files: BTreeMap::new(), modules: BTreeMap::new(), defs: BTreeMap::new() };
        for (rel, text) in files {
            s.modules.insert(module_path(&rel), rel.clone());
            if !rel.ends_with("_tests.rs") {
                s.files.insert(rel, without_tests(&code_only(&text)));
            }
        }
        for (rel, text) in &s.files {
            let mut defs = BTreeSet::new();
            for kw in ["struct ", "enum ", "fn ", "trait ", "type ", "const ", "static ", "mod ", "macro_rules! "] {
                for (at, _) in text.match_indices(kw) {
                    let ok = at == 0 || !text.as_bytes()[at - 1].is_ascii_alphanumeric();
                    let name: String =
                        text[at + kw.len()..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                    if ok && !name.is_empty() {
                        defs.insert(name);
                    }
                }
            }
            s.defs.insert(rel.clone(), defs);
        }
        s
    }

    /// The file that defines what `path` (from the crate root) names.
    fn resolve(&self, path: &[String], depth: usize) -> Option<String> {
        if depth > 12 {
            return None;
        }
        for n in (1..=path.len()).rev() {
            let Some(file) = self.modules.get(&path[..n]) else { continue };
            let rest = &path[n..];
            let Some(name) = rest.first() else { return Some(file.clone()) };
            let mut sub = path[..n].to_vec();
            sub.push(name.clone());
            if let Some(f) = self.modules.get(&sub) {
                return Some(f.clone());
            }
            if self.defs.get(file).is_some_and(|d| d.contains(name)) {
                return Some(file.clone());
            }
            // A name this file re-exports (`pub use`) resolves to this
            // file, not to where it is defined: the importer depends on the
            // re-exporting module, which depends on the definition, so a
            // circle hidden behind a re-export is a circle here.
            return Some(file.clone());
        }
        None
    }

    /// Each file's imports, resolved to files.
    fn edges(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (rel, text) in &self.files {
            let me = module_path(rel);
            let mut paths: Vec<Vec<String>> = Vec::new();
            for tree in uses(text) {
                paths.extend(expand(&[], &tree));
            }
            for (_, w) in words(text) {
                // A path in the code: from the crate root, or a child
                // module's item (`audit::Book`), resolved below as a `use`.
                // (`super::` alone opens a `use` group, expanded above.)
                if w.contains("::") && !w.ends_with("::") {
                    paths.push(w.split("::").filter(|s| !s.is_empty()).map(String::from).collect());
                }
            }
            let out = edges.entry(rel.clone()).or_default();
            for mut p in paths {
                if p.last().is_some_and(|l| l == "*" || l == "self") {
                    p.pop();
                }
                // `use child::X` in a module names its own child (2018
                // paths); any other bare path is an outside crate.
                let child = || {
                    let mut sub = me.clone();
                    sub.push(p.first()?.clone());
                    self.modules.contains_key(&sub).then(|| me.iter().cloned().chain(p.iter().cloned()).collect())
                };
                let Some(abs) = absolute(&me, &p).or_else(child) else { continue };
                if let Some(f) = self.resolve(&abs, 0)
                    && f != *rel
                    && self.files.contains_key(&f)
                {
                    out.insert(f);
                }
            }
        }
        edges
    }
}

fn component(file: &str) -> &str {
    let first = file.split('/').next().unwrap_or(file);
    first.strip_suffix(".rs").unwrap_or(first)
}

/// Every strongly connected set of more than one node.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on.insert(v);
            if let Some(ws) = self.edges.get(v) {
                for w in ws {
                    if !self.index.contains_key(w.as_str()) {
                        self.visit(w);
                        let lw = self.low[w.as_str()];
                        let lv = self.low[v];
                        self.low.insert(v, lv.min(lw));
                    } else if self.on.contains(w.as_str()) {
                        let iw = self.index[w.as_str()];
                        let lv = self.low[v];
                        self.low.insert(v, lv.min(iw));
                    }
                }
            }
            if self.low[v] == self.index[v] {
                let mut set = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    set.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if set.len() > 1 {
                    set.sort();
                    self.found.push(set);
                }
            }
        }
    }
    let mut t = Tarjan {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.found
}

#[test]
fn no_two_files_import_each_other_even_through_others() {
    let s = Source::read();
    let found = circles(&s.edges());
    assert!(found.is_empty(), "import circles between files (each set imports itself through the others): {found:#?}");
}

#[test]
fn each_component_imports_only_the_layers_below_it() {
    let s = Source::read();
    let mut wrong = Vec::new();
    for (from, tos) in s.edges() {
        let a = component(&from);
        let Some(la) = LAYERS.iter().position(|l| *l == a) else {
            wrong.push(format!("{from}: component {a:?} is not placed in LAYERS"));
            continue;
        };
        for to in tos {
            let b = component(&to);
            let lb = LAYERS.iter().position(|l| *l == b).unwrap_or(usize::MAX);
            if a != b && lb > la {
                wrong.push(format!("{from} imports {to}: {a} may not depend on {b}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn components_take_their_own_section_and_not_the_assembled_config() {
    let s = Source::read();
    let mut wrong = Vec::new();
    for (from, tos) in s.edges() {
        if from.starts_with("config/") || CONFIG_READERS.iter().any(|r| from.starts_with(r)) {
            continue;
        }
        for to in tos.iter().filter(|t| t.starts_with("config/")) {
            wrong.push(format!("{from} imports {to}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "only the pipeline's setup and the command line read the assembled config:\n{}",
        wrong.join("\n")
    );
    // And the assembler reads only sections: no component's runtime.
    let edges = s.edges();
    let mut reached = Vec::new();
    for (from, tos) in edges.iter().filter(|(f, _)| f.starts_with("config/")) {
        for to in tos.iter().filter(|t| !t.starts_with("config/")) {
            let leaf = ["units.rs", "problem.rs"].contains(&to.as_str());
            if !leaf && !to.ends_with("/config.rs") {
                reached.push(format!("{from} imports {to}"));
            }
        }
    }
    assert!(
        reached.is_empty(),
        "config/ imports only sections (`*/config.rs`) and the leaves:\n{}",
        reached.join("\n")
    );
}

#[test]
fn no_unwrap_or_expect_outside_tests() {
    let s = Source::read();
    let mut found = Vec::new();
    for (rel, text) in &s.files {
        for needle in [".unwrap()", ".expect("] {
            for (at, _) in text.match_indices(needle) {
                let line = text[..at].matches('\n').count() + 1;
                found.push(format!("{rel}: {needle} (about line {line} of the code without its tests)"));
            }
        }
    }
    assert!(found.is_empty(), "a user or a network may control what these unwrap:\n{}", found.join("\n"));
}

/// The checks themselves, on a crate made up for the purpose: a circle
/// and a layer skipped are found, so a green run means something.
#[test]
fn the_checks_find_a_circle_and_an_inverted_layer() {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    edges.entry("a.rs".into()).or_default().insert("b/x.rs".into());
    edges.entry("b/x.rs".into()).or_default().insert("b/y.rs".into());
    edges.entry("b/y.rs".into()).or_default().insert("a.rs".into());
    edges.entry("c.rs".into()).or_default().insert("a.rs".into());
    assert_eq!(circles(&edges), vec![vec!["a.rs".to_string(), "b/x.rs".into(), "b/y.rs".into()]]);
    assert_eq!(
        expand(&[], "crate::{a::B, c::{D, e as F}}"),
        vec![
            vec!["crate".to_string(), "a".into(), "B".into()],
            vec!["crate".to_string(), "c".into(), "D".into()],
            vec!["crate".to_string(), "c".into(), "e".into()],
        ]
    );
    assert_eq!(code_only("let s = \"crate::x\"; // crate::y\nuse crate::z;"), "let s = \"\"; \nuse crate::z;");
    assert_eq!(absolute(&["a".into(), "b".into()], &["super".into(), "c".into()]), Some(vec!["a".into(), "c".into()]));
}

/// A circle hidden behind a re-export: `t` imports `P` through `p`, which
/// re-exports it from `r` and also re-exports its child `ch`, which
/// imports `t`. Following the re-export to `r` would see no circle.
#[test]
fn an_import_through_a_re_export_is_an_edge_to_the_re_exporter() {
    let files = [
        ("lib.rs", "mod p; mod r; mod t;"),
        ("p/mod.rs", "mod ch;\npub use crate::r::P;\npub use ch::C;\n"),
        ("p/ch.rs", "use crate::t::T;\npub struct C(T);\n"),
        ("t.rs", "use crate::p::P;\npub struct T(P);\n"),
        ("r.rs", "pub struct P;\n"),
    ];
    let s = Source::of(files.iter().map(|(r, t)| (r.to_string(), t.to_string())));
    let edges = s.edges();
    assert!(edges["t.rs"].contains("p/mod.rs"), "{edges:?}");
    assert_eq!(circles(&edges), vec![vec!["p/ch.rs".to_string(), "p/mod.rs".into(), "t.rs".into()]]);
}

/// A parent that names its child's item in a type (`audit::Book`), not in
/// a `use`, while the child imports the parent, is a circle; a `use` group
/// of siblings (`use super::{a, b}`) is no edge to the parent.
#[test]
fn a_child_named_in_the_code_is_an_edge_and_a_use_group_is_not() {
    let files = [
        ("lib.rs", "mod s; mod k;"),
        ("s/mod.rs", "pub mod audit;\npub struct Store { book: audit::Book }\n"),
        ("s/audit.rs", "use super::Store;\npub struct Book;\nimpl Store {}\n"),
        ("k/mod.rs", "mod a; mod b;\n"),
        ("k/a.rs", "use super::{b};\npub struct A(b::B);\n"),
        ("k/b.rs", "pub struct B;\n"),
    ];
    let s = Source::of(files.iter().map(|(r, t)| (r.to_string(), t.to_string())));
    let edges = s.edges();
    assert!(edges["s/mod.rs"].contains("s/audit.rs"), "{edges:?}");
    assert!(!edges["k/a.rs"].contains("k/mod.rs"), "{edges:?}");
    assert_eq!(circles(&edges), vec![vec!["s/audit.rs".to_string(), "s/mod.rs".into()]]);
}
