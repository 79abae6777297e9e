//! `sluice quarantine list|show|stats|export|replay`: the quarantine as
//! something to query. Each command opens the store once and reads it in
//! one pass; `export` streams, so its memory does not grow with the
//! quarantine.

use std::io::Write;
use std::time::Instant;

use anyhow::{Context, Result};

use super::args::{EntryFilter, QuarantineCommand};
use crate::config::Config;
use crate::pipeline;
use crate::store::Store;
use crate::store::quarantine::{Entry, Filter, Stats};

pub(crate) fn run(cmd: &QuarantineCommand) -> Result<()> {
    match cmd {
        QuarantineCommand::List(super::args::QueryArgs { config, filter, json }) => {
            let filter = to_filter(filter)?;
            let store = open(&config.config)?;
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            let written = store.scan_quarantine(|e| {
                if !filter.keeps(&e) {
                    return Ok(true);
                }
                let line = if *json { serde_json::to_string(&e)? } else { summary(&e) };
                // A reader that stopped (`| head`) is not an error.
                match writeln!(out, "{line}") {
                    Ok(()) => Ok(true),
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
                    Err(e) => Err(anyhow::Error::from(e)),
                }
            });
            written?;
            match out.flush() {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e.into()),
                _ => {}
            }
        }
        QuarantineCommand::Show { config, id } => {
            let store = open(&config.config)?;
            let entry = store.quarantine_entry(id)?.with_context(|| format!("no quarantine entry {id}"))?;
            println!("{}", serde_json::to_string_pretty(&entry)?);
        }
        QuarantineCommand::Stats(super::args::QueryArgs { config, filter, json }) => {
            let filter = to_filter(filter)?;
            let store = open(&config.config)?;
            let mut stats = Stats::default();
            store.scan_quarantine(|e| {
                if filter.keeps(&e) {
                    stats.add(&e);
                }
                Ok::<_, anyhow::Error>(true)
            })?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&stats)?);
            } else {
                print_stats(&stats);
            }
        }
        QuarantineCommand::Export { config, filter, to } => {
            let filter = to_filter(filter)?;
            let store = open(&config.config)?;
            let started = Instant::now();
            // Raw records, secrets and all: readable by the owner alone,
            // whatever the umask (an existing file is narrowed too).
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let file = options.open(to).with_context(|| format!("create {}", to.display()))?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                file.set_permissions(std::fs::Permissions::from_mode(0o600))
                    .with_context(|| format!("chmod 600 {}", to.display()))?;
            }
            let mut out = std::io::BufWriter::new(file);
            // Drawn only on a terminal: a spinner with the count.
            let bar = indicatif::ProgressBar::new_spinner();
            bar.set_style(
                indicatif::ProgressStyle::with_template("export {spinner} {pos} entries ({per_sec})")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            let mut n = 0u64;
            store.scan_quarantine(|e| {
                if filter.keeps(&e) {
                    serde_json::to_writer(&mut out, &e)?;
                    out.write_all(b"\n")?;
                    n += 1;
                    if n.is_multiple_of(1024) {
                        bar.set_position(n);
                    }
                }
                Ok::<_, anyhow::Error>(true)
            })?;
            out.flush().with_context(|| format!("write {}", to.display()))?;
            bar.finish_and_clear();
            eprintln!("exported {n} entries to {} in {:.2} s", to.display(), started.elapsed().as_secs_f64());
        }
        QuarantineCommand::Replay { config, ids, include_masked, summary } => {
            let (cfg, runtime, _) = super::validate::load(config).map_err(|super::validate::BadInput(e)| e)?;
            let replayed = pipeline::replay::replay(&cfg, &runtime, ids, *include_masked)?;
            super::summary::print_replay(&replayed, *summary);
        }
    }
    Ok(())
}

fn open(config: &std::path::Path) -> Result<Store> {
    let cfg = Config::load(config)?;
    super::mask::mask_output_as(&cfg);
    Store::open_read_only(&cfg.pipeline.state_dir).context("open the state store")
}

fn summary(e: &Entry) -> String {
    let plugin =
        e.plugin.as_ref().map(|p| format!("{}@{}", p.name, &p.digest[..12.min(p.digest.len())])).unwrap_or_default();
    let replayed = e.replayed.as_deref().map(|t| format!(" replayed {t}")).unwrap_or_default();
    format!("{}  {}  {:<7} {:<24} {}{}", e.id, e.time, e.stage, plugin, e.reason, replayed)
}

fn print_stats(s: &Stats) {
    println!("{} entries ({} replayed, {} masked)", s.entries, s.replayed, s.masked);
    let table = |title: &str, counts: &std::collections::BTreeMap<String, u64>, limit: usize| {
        let mut rows: Vec<(&String, &u64)> = counts.iter().collect();
        rows.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        println!("by {title}:");
        for (k, n) in rows.iter().take(limit) {
            println!("  {n:>8}  {k}");
        }
        if rows.len() > limit {
            println!("  ({} more)", rows.len() - limit);
        }
    };
    table("stage", &s.by_stage, usize::MAX);
    table("plugin", &s.by_plugin, usize::MAX);
    // Reasons that name their values (as the guides advise) would be one
    // row per record: counted by their template instead.
    table("reason (values shown as …)", &s.by_reason_template, 20);
}

/// `--since 1h` is an hour ago; `--since 2026-12-01T10:00:00Z` that
/// instant (Unix nanoseconds). `flag` names the option in the error.
pub(super) fn when(s: &str, flag: &str) -> Result<i64> {
    let now = pipeline::clock::now_nanos();
    if let Ok(t) = sluice_guest::time::Format::rfc3339().parse(s, now) {
        return Ok(t);
    }
    let ago = sluice_guest::duration::parse(s)
        .map_err(|e| anyhow::anyhow!("--{flag} {s:?}: neither an RFC 3339 time nor a duration ({e})"))?;
    Ok(now.saturating_sub(i64::try_from(ago.as_nanos()).unwrap_or(i64::MAX)))
}

fn to_filter(f: &EntryFilter) -> Result<Filter> {
    let when = |s: &Option<String>, flag: &str| s.as_deref().map(|s| when(s, flag)).transpose();
    Ok(Filter {
        stage: f.stage.clone(),
        plugin: f.plugin.clone(),
        reason: f.reason.clone(),
        since: when(&f.since, "since")?,
        until: when(&f.until, "until")?,
        replayed: f.replayed,
    })
}
