//! The docs: a README that stays one page, a book (`docs/`) that builds,
//! lists every chapter, and whose links — to files and to headings — all
//! lead somewhere.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every page of the book, in its folders too (`recipes/`).
fn chapters() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![root().join("docs/src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// GitHub's and mdBook's anchor of a heading.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings, outside code blocks.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(slug(line.trim_start_matches('#')));
        }
    }
    out
}

/// `(text, target)` of each inline link outside code blocks.
fn links(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Code spans are text, not links (a regex's `](?:…)` is not one).
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let tail = &rest[at + 2..];
            let Some(end) = tail.find(')') else { break };
            out.push(tail[..end].to_string());
            rest = &tail[end..];
        }
    }
    out
}

fn broken_links(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let dir = file.parent().unwrap_or(Path::new("."));
    let mut broken = Vec::new();
    for target in links(&text) {
        if target.starts_with("http://") || target.starts_with("https://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target.as_str(), None),
        };
        let dest = if path.is_empty() { file.to_path_buf() } else { dir.join(path) };
        if !dest.exists() {
            broken.push(format!("{}: {target}: no such file", file.display()));
            continue;
        }
        if let Some(a) = anchor
            && dest.extension().is_some_and(|x| x == "md")
        {
            let there = std::fs::read_to_string(&dest).unwrap_or_default();
            if !anchors(&there).contains(a) {
                broken.push(format!("{}: {target}: no heading #{a} there", file.display()));
            }
        }
    }
    broken
}

#[test]
fn the_readme_is_one_page_and_points_into_the_book() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap_or_else(|e| panic!("{e}"));
    let lines = readme.lines().count();
    assert!(lines <= 300, "README.md has {lines} lines: what is not the two commands and a tour goes in docs/");
    assert!(readme.contains("docs/src/SUMMARY.md"), "the README links the book");
    assert!(readme.contains("scripts/quickstart") && readme.contains("scripts/test"), "the two commands");
}

#[test]
fn every_chapter_is_in_the_summary_and_every_entry_is_a_chapter() {
    let summary = std::fs::read_to_string(root().join("docs/src/SUMMARY.md")).unwrap_or_else(|e| panic!("{e}"));
    let listed: BTreeSet<String> = links(&summary).into_iter().collect();
    let src = root().join("docs/src");
    let files: BTreeSet<String> = chapters()
        .iter()
        .filter_map(|p| p.strip_prefix(&src).ok().map(|n| n.to_string_lossy().into_owned()))
        .filter(|n| n != "SUMMARY.md")
        .collect();
    assert_eq!(listed, files, "docs/src/SUMMARY.md against the files in docs/src");
}

#[test]
fn every_link_in_the_readme_and_the_book_leads_somewhere() {
    let mut broken = broken_links(&root().join("README.md"));
    for chapter in chapters() {
        broken.extend(broken_links(&chapter));
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// The check above, shown to fail: a link to a missing file and one to a
/// missing heading are both reported.
#[test]
fn the_link_check_finds_a_missing_file_and_a_missing_heading() {
    let dir = std::env::temp_dir().join(format!("sluice-docs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let page = dir.join("a.md");
    std::fs::write(
        &page,
        "# A page\n\n## Its part\n\n[ok](#its-part) [gone](b.md) [no](a.md#nowhere)\n```\n[x](in-code.md)\n```\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let broken = broken_links(&page);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(broken.len(), 2, "{broken:?}");
    assert!(broken[0].contains("b.md: no such file") && broken[1].contains("no heading #nowhere"), "{broken:?}");
}

/// mdBook itself (installed by `scripts/setup test`; `SLUICE_MDBOOK`
/// names it): the book builds with no warning of a missing file.
#[test]
fn the_book_builds() {
    let mdbook = std::env::var("SLUICE_MDBOOK").unwrap_or_else(|_| "mdbook".into());
    let out_dir = std::env::temp_dir().join(format!("sluice-book-{}", std::process::id()));
    let out = std::process::Command::new(&mdbook)
        .arg("build")
        .arg(root().join("docs"))
        .arg("--dest-dir")
        .arg(&out_dir)
        .output()
        .unwrap_or_else(|e| panic!("{mdbook}: {e} (scripts/setup test installs mdbook; SLUICE_MDBOOK names it)"));
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    let built = out_dir.join("index.html").is_file() && out_dir.join("design.html").is_file();
    let _ = std::fs::remove_dir_all(&out_dir);
    assert!(out.status.success(), "mdbook build failed:\n{log}");
    assert!(!log.contains("WARN") && !log.contains("ERROR"), "{log}");
    assert!(built, "the book has its pages:\n{log}");
}
