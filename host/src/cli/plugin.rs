//! `sluice plugin run` and `sluice plugin inspect`.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::json;

use super::args::{CacheAction, CacheArgs, InspectArgs, RunArgs, TestArgs};
use crate::plugin::chain::Chain;
use crate::plugin::engine::Runtime;
use crate::plugin::isolate::Isolated;
use crate::plugin::spec::{PluginLimits, PluginSpec};
use crate::plugin::{self, inspect};
use crate::record::Record;
use crate::source::framing::LineReader;
use crate::verdict::Verdict;

/// A plugin's config table from a file (`plugin::config::read_table`), for
/// `plugin run --config` and `shadow --plugin-config`.
pub(crate) fn read_config_file(path: &Path) -> Result<serde_json::Value> {
    crate::plugin::config::read_table(path).map_err(|e| anyhow::anyhow!("plugin config: {e}"))
}

/// Pair each `--config` with the `--plugin` given before it on the command
/// line, from clap's argument indices.
pub(crate) fn pair_configs(plugin_idx: &[usize], config_idx: &[usize]) -> Result<Vec<Option<usize>>> {
    let mut owner = vec![None; plugin_idx.len()];
    for (c, at) in config_idx.iter().enumerate() {
        let p = plugin_idx
            .iter()
            .rposition(|p| p < at)
            .with_context(|| format!("--config #{} comes before any --plugin", c + 1))?;
        anyhow::ensure!(owner[p].is_none(), "plugin #{} has two --config files", p + 1);
        owner[p] = Some(c);
    }
    Ok(owner)
}

pub(crate) fn run(args: &RunArgs, config_of: &[Option<usize>]) -> Result<()> {
    let limits = PluginLimits {
        memory_bytes: (args.memory_mib as usize) << 20,
        time_per_batch: args.time_limit,
        ..PluginLimits::default()
    };
    let runtime = Runtime::new(args.cache_dir.clone().or_else(Runtime::default_cache_dir))?;
    let mut stages = Vec::with_capacity(args.plugins.len());
    for (i, path) in args.plugins.iter().enumerate() {
        let mut spec = PluginSpec::from_path(path);
        spec.limits = limits.clone();
        let config_file = config_of.get(i).copied().flatten().map(|c| &args.configs[c]);
        if let Some(file) = config_file {
            spec.config = read_config_file(file)?;
        }
        let stage = runtime.load(&spec).and_then(Isolated::new).with_context(|| match config_file {
            Some(file) => format!("--plugin {} with --config {}", path.display(), file.display()),
            None => format!("--plugin {} (no --config)", path.display()),
        })?;
        stages.push(stage);
    }
    let mut chain = Chain::new(stages);

    let (source_name, reader): (String, Box<dyn BufRead>) = match &args.input {
        Some(p) => (
            p.display().to_string(),
            Box::new(BufReader::new(
                std::fs::File::open(p).with_context(|| format!("cannot open input {}", p.display()))?,
            )),
        ),
        None => ("<stdin>".to_string(), Box::new(BufReader::new(std::io::stdin().lock()))),
    };
    let shared: std::sync::Arc<str> = source_name.as_str().into();
    let mut lines = LineReader::new(reader);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut counts = Counts::default();
    let started = Instant::now();
    let mut line_no: u64 = 0;
    loop {
        let mut batch = Vec::with_capacity(args.batch_size as usize);
        while batch.len() < args.batch_size as usize {
            match lines.next_line().with_context(|| format!("cannot read {source_name}"))? {
                Some(line) => batch.push(Record::line(line.bytes, shared.clone(), 0, line.offset)),
                None => break,
            }
        }
        if batch.is_empty() {
            break;
        }
        let offsets: Vec<u64> = batch.iter().map(offset_of).collect();
        for (verdict, offset) in chain.run(batch)?.into_iter().zip(offsets) {
            line_no += 1;
            counts.add(&verdict);
            if !args.quiet {
                write_verdict(&mut out, line_no, offset, &verdict)?;
                out.write_all(b"\n")?;
            }
        }
    }
    out.flush()?;
    let elapsed = started.elapsed().as_secs_f64();
    let stats: Vec<_> = chain
        .stages()
        .iter()
        .map(|s| json!({ "plugin": s.id().to_string(), "faulted_batches": s.stats().faulted_batches, "faulted_records": s.stats().faulted_records, "rebuilds": s.stats().rebuilds }))
        .collect();
    eprintln!(
        "{}",
        json!({
            "summary": { "records": line_no, "emitted": counts.emitted, "events": counts.events, "dropped": counts.dropped, "rejected": counts.rejected,
                         "seconds": (elapsed * 1000.0).round() / 1000.0, "plugins": stats }
        })
    );
    Ok(())
}

fn offset_of(r: &Record) -> u64 {
    match &r.position {
        crate::record::Position::File { offset, .. } => *offset,
        crate::record::Position::Kafka { offset, .. } => u64::try_from(*offset).unwrap_or(0),
    }
}

#[derive(Default)]
struct Counts {
    emitted: u64,
    events: u64,
    dropped: u64,
    rejected: u64,
}

impl Counts {
    fn add(&mut self, v: &Verdict) {
        match v {
            Verdict::Emit(events) => {
                self.emitted += 1;
                self.events += events.len() as u64;
            }
            Verdict::Drop { .. } => self.dropped += 1,
            Verdict::Reject { .. } => self.rejected += 1,
        }
    }
}

/// One output line of `plugin run`. Stable field names: scripts and the
/// test suite read them. An event's body is written as the plugin wrote
/// it, byte for byte (its keys in its order, its numbers as written), as
/// the sinks write it: never parsed and printed again. A body that is not
/// JSON (a plugin breaking the contract) shows as a string.
pub(crate) fn write_verdict(out: &mut impl Write, line: u64, offset: u64, v: &Verdict) -> Result<()> {
    #[derive(serde::Serialize)]
    struct Emit<'a> {
        line: u64,
        offset: u64,
        outcome: &'static str,
        events: Vec<EventLine<'a>>,
    }
    #[derive(serde::Serialize)]
    struct EventLine<'a> {
        id: Option<&'a str>,
        timestamp: Option<String>,
        body: Body<'a>,
    }
    #[derive(serde::Serialize)]
    #[serde(untagged)]
    enum Body<'a> {
        AsWritten(&'a serde_json::value::RawValue),
        NotJson(String),
    }
    match v {
        Verdict::Emit(events) => {
            let events = events
                .iter()
                .map(|e| EventLine {
                    id: e.id.as_deref(),
                    timestamp: e.timestamp.map(sluice_guest::time::format_rfc3339),
                    body: match serde_json::from_slice::<&serde_json::value::RawValue>(&e.body) {
                        Ok(raw) => Body::AsWritten(raw),
                        Err(_) => Body::NotJson(String::from_utf8_lossy(&e.body).into_owned()),
                    },
                })
                .collect();
            serde_json::to_writer(out, &Emit { line, offset, outcome: "emit", events })?;
        }
        Verdict::Drop { plugin, reason } => serde_json::to_writer(
            out,
            &json!({ "line": line, "offset": offset, "outcome": "drop", "plugin": plugin.to_string(), "reason": reason }),
        )?,
        Verdict::Reject { plugin, reason } => serde_json::to_writer(
            out,
            &json!({ "line": line, "offset": offset, "outcome": "reject", "plugin": plugin.to_string(), "reason": reason }),
        )?,
    }
    Ok(())
}

pub(crate) fn inspect(args: &InspectArgs) -> Result<()> {
    let runtime = Runtime::new(Runtime::default_cache_dir())?;
    let name = PluginSpec::from_path(&args.path).name;
    let i = inspect::inspect(&runtime, &args.path, &name)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&i)?);
        return Ok(());
    }
    println!("name:        {}", i.name);
    println!("path:        {}", i.path.display());
    println!("digest:      blake3:{}", i.digest);
    let table =
        if i.world.as_deref() == Some("classifier") { "[sink.classifier]" } else { "the plugin's [[plugins]] table" };
    println!("pin:         digest = \"blake3:{}\"   (in {table})", i.digest);
    println!("size:        {} bytes", i.size_bytes);
    match (&i.wit_version, &i.not_runnable) {
        (Some(v), None) if i.world.as_deref() == Some("classifier") => println!(
            "wit:         {}@{v}, world classifier (reads an HTTP sink's answers: name it in [sink.classifier])",
            inspect::WIT_PACKAGE
        ),
        (Some(v), None) => println!("wit:         {}@{v}", inspect::WIT_PACKAGE),
        (Some(v), Some(why)) => {
            println!("wit:         {}@{v}, which this host cannot run: {why}", inspect::WIT_PACKAGE)
        }
        (None, why) => println!("wit:         none: {}", why.as_deref().unwrap_or("not a sluice plugin")),
    }
    println!("exports:     {}", i.exports.join(", "));
    println!("imports:");
    for imp in &i.imports {
        println!("  {imp}");
    }
    if args.formats {
        print_formats();
    } else {
        println!("(timestamp formats and items, pattern shortcuts: --formats)");
    }
    Ok(())
}

/// The timestamp formats and items, and the pattern shortcuts, of the SDK
/// (`sluice_guest::time`, `sluice_guest::shortcuts`).
fn print_formats() {
    use sluice_guest::{shortcuts::SHORTCUTS, time};
    println!("timestamp formats (timestamp_format, timestamp.format):");
    for (name, example) in time::NAMED {
        println!("  {name:<38} {example}");
    }
    println!("  or a pattern of these items:");
    for (item, reads) in time::ITEMS {
        println!("  {item:<38} {reads}");
    }
    println!("  a format without a year may name it: {{ format = \"syslog\", year = 2016 }}");
    println!("pattern shortcuts (%{{NAME}}, %{{NAME:field}}, %{{NAME:field:int|float}}):");
    for (name, regex) in SHORTCUTS {
        println!("  {name:<18} {regex}");
    }
}

/// `sluice plugin test`: every case of `--cases` against the plugin, one
/// verdict line per case. `Ok(false)` when a case failed.
pub(crate) fn test(args: &TestArgs) -> Result<bool> {
    use crate::plugin::conformance::{compare, load_dir, parse_now};
    let cases = load_dir::<crate::plugin::conformance::Case>(&args.cases)?;
    let limits = PluginLimits {
        memory_bytes: (args.memory_mib as usize) << 20,
        time_per_batch: args.time_limit,
        ..PluginLimits::default()
    };
    let runtime = Runtime::new(args.cache_dir.clone().or_else(Runtime::default_cache_dir))?;
    let (mut failed, mut skipped) = (0, 0);
    // Each older word once, with the first case that uses it.
    let mut old_words = std::collections::BTreeMap::new();
    for (name, case) in &cases {
        let mut spec = PluginSpec::from_path(&args.path);
        spec.limits = limits.clone();
        spec.config = case.config.clone();
        let started = Instant::now();
        spec.limits.fixed_now = match parse_now(case.now.as_deref()) {
            Ok(now) => now,
            Err(e) => {
                failed += 1;
                println!("FAIL  {name}: bad case: {e}{}", describe(&case.description));
                continue;
            }
        };
        let loaded = runtime.load(&spec).and_then(Isolated::new);
        if let (Some(needs), Ok(stage)) = (&case.contract, &loaded)
            && version_key(stage.contract().version()) < version_key(needs)
        {
            skipped += 1;
            println!(
                "skip  {name}: needs contract {needs}, the plugin targets {}{}",
                stage.contract().version(),
                describe(&case.description)
            );
            continue;
        }
        for (old, new) in case.old_words() {
            old_words.entry(old).or_insert((new, name.as_str()));
        }
        let verdict = match (case.expect.outcomes(), loaded) {
            (Err(want), Err(e)) => {
                let got = format!("{e:#}");
                if got.contains(want) { Ok(()) } else { Err(format!("init refused with {got:?}, expected {want:?}")) }
            }
            (Err(want), Ok(_)) => Err(format!("init accepted the config; expected a refusal containing {want:?}")),
            (Ok(_), Err(e)) => Err(format!("cannot load: {e:#}")),
            (Ok(want), Ok(mut stage)) => {
                let records: Result<Vec<Record>, String> =
                    case.records.iter().enumerate().map(|(i, r)| r.record(i)).collect();
                match records {
                    Err(e) => Err(format!("bad case: {e}")),
                    Ok(records) => match stage.process(&records) {
                        Err(e) => Err(format!("process failed: {e:#}")),
                        Ok(got) => compare(want, &got).map_or(Ok(()), Err),
                    },
                }
            }
        };
        let ms = started.elapsed().as_secs_f64() * 1e3;
        match verdict {
            Ok(()) => println!("ok    {name} ({ms:.0} ms){}", describe(&case.description)),
            Err(why) => {
                failed += 1;
                println!("FAIL  {name}: {why}{}", describe(&case.description));
            }
        }
    }
    println!(
        "{} cases, {} passed, {failed} failed{}: {} against {}",
        cases.len(),
        cases.len() - failed - skipped,
        if skipped > 0 { format!(", {skipped} for a newer contract") } else { String::new() },
        args.path.display(),
        args.cases.display()
    );
    for (old, (new, first)) in old_words {
        println!(
            "note  {old} is an older word of plugin cases (first in {first}): write {new}, as config cases do \
             (docs/src/upgrading.md)"
        );
    }
    Ok(failed == 0)
}

/// `0.2.0` as numbers, so that 0.10 comes after 0.9.
fn version_key(v: &str) -> Vec<u64> {
    v.split('.').map(|p| p.parse().unwrap_or(0)).collect()
}

fn describe(d: &str) -> String {
    if d.is_empty() { String::new() } else { format!(" — {d}") }
}

/// `sluice plugin cache [show|prune]`.
pub(crate) fn cache(args: &CacheArgs) -> Result<()> {
    let dir = args
        .cache_dir
        .clone()
        .or_else(Runtime::default_cache_dir)
        .context("no cache directory: set SLUICE_PLUGIN_CACHE or --cache-dir")?;
    let listed = |dir: &Path| -> Result<(usize, u64)> {
        let mut n = 0;
        let mut bytes = 0;
        match std::fs::read_dir(dir) {
            Ok(entries) => {
                for e in entries.flatten() {
                    if e.path().extension().is_some_and(|x| x == "cwasm") {
                        n += 1;
                        bytes += e.metadata().map(|m| m.len()).unwrap_or(0);
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", dir.display())),
        }
        Ok((n, bytes))
    };
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    match args.action {
        CacheAction::Show => {
            let (n, bytes) = listed(&dir)?;
            println!(
                "{}: {n} compiled plugins, {:.1} MiB (kept: the {} most recently used, {} MiB at most)",
                dir.display(),
                mib(bytes),
                plugin::cache::DISK_ENTRIES,
                plugin::cache::DISK_BYTES >> 20
            );
        }
        CacheAction::Prune => {
            let (before, bytes_before) = listed(&dir)?;
            if before > 0 {
                plugin::cache::prune_to(&dir, args.keep).with_context(|| format!("cannot prune {}", dir.display()))?;
            }
            let (after, bytes_after) = listed(&dir)?;
            println!(
                "{}: removed {} compiled plugins ({:.1} MiB); {after} kept ({:.1} MiB)",
                dir.display(),
                before - after,
                mib(bytes_before - bytes_after),
                mib(bytes_after)
            );
        }
    }
    Ok(())
}
