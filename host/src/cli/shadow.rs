//! `sluice shadow`: records through the chain in force and a candidate
//! chain (`--plugin NAME=FILE`: another build of a plugin;
//! `--plugin-config NAME=FILE`: another config for it), side by side. The
//! records are read again from the source (files from their start, Kafka
//! from `--from`, by assignment, no group joined) or taken from the
//! quarantine (`--quarantine`). Nothing is delivered, recorded or
//! committed; the state store is only read.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};
use serde::Serialize;

use super::args::ShadowArgs;
use crate::config::Config;
use crate::pipeline::setup::build_chain;
use crate::pipeline::shadow::{Differing, Shadow};
use crate::plugin::engine::Runtime;
use crate::record::Record;
use crate::source::config::SourceConfig;
use crate::source::file::{FilePartition, discover};
use crate::source::kafka::config::ResetTo;
use crate::store::Store;

/// The config with the candidate's plugins in place of the current ones.
fn candidate(cfg: &Config, args: &ShadowArgs) -> Result<(Config, Vec<String>)> {
    if args.plugins.is_empty() && args.plugin_configs.is_empty() {
        bail!("name what to try: --plugin NAME=FILE (another build) or --plugin-config NAME=FILE (another config)");
    }
    let mut out = cfg.clone();
    let mut changed = Vec::new();
    let index = |out: &Config, spec: &str, flag: &str| -> Result<(usize, PathBuf)> {
        let (name, file) = spec.split_once('=').with_context(|| format!("--{flag} {spec:?}: expected NAME=FILE"))?;
        let i = out.plugins.iter().position(|p| p.name == name).with_context(|| {
            let names: Vec<&str> = out.plugins.iter().map(|p| p.name.as_str()).collect();
            format!("--{flag} {spec:?}: the config has no plugin {name:?} (it has {names:?})")
        })?;
        Ok((i, PathBuf::from(file)))
    };
    for spec in &args.plugins {
        let (i, file) = index(&out, spec, "plugin")?;
        anyhow::ensure!(file.is_file(), "--plugin {spec:?}: {} is not a file", file.display());
        // The candidate is another build: the config's pin is for the
        // current one.
        out.plugins[i].path = file;
        out.plugins[i].digest = None;
        changed.push(format!("{} from {}", out.plugins[i].name, out.plugins[i].path.display()));
    }
    for spec in &args.plugin_configs {
        let (i, file) = index(&out, spec, "plugin-config")?;
        out.plugins[i].config =
            super::plugin::read_config_file(&file).with_context(|| format!("--plugin-config {spec:?}"))?;
        changed.push(format!("{} with the config of {}", out.plugins[i].name, file.display()));
    }
    Ok((out, changed))
}

/// The records to compare, up to `limit`, with the quarantine entry each
/// came from (`--quarantine`).
fn records(cfg: &Config, args: &ShadowArgs, limit: usize) -> Result<Vec<(Record, Option<String>)>> {
    if args.quarantine {
        let store = Store::open_read_only(&cfg.pipeline.state_dir).context("open the state store")?;
        let mut out = Vec::new();
        store.scan_quarantine(|e| {
            if e.replayed.is_none() {
                out.push((e.record(), Some(e.id.clone())));
            }
            Ok::<_, anyhow::Error>(out.len() < limit)
        })?;
        return Ok(out);
    }
    let from = args.from.clone().unwrap_or(ResetTo::Earliest);
    match &cfg.source {
        SourceConfig::File(f) => {
            let start = match from {
                ResetTo::Earliest => 0,
                ResetTo::Offset(n) => n as u64,
                ResetTo::Time(_) => bail!("--from: a file has no record times; use `earliest` or a byte offset"),
            };
            let mut out = Vec::new();
            for file in discover(&f.paths)? {
                let mut part = FilePartition::open(&file, None, f.max_line_bytes, false)?;
                while out.len() < limit {
                    let batch = part.next_batch(cfg.pipeline.batch_size.min(limit - out.len()))?;
                    if batch.is_empty() {
                        break;
                    }
                    // Oversize lines never reach a plugin in a run either.
                    out.extend(batch.into_iter().filter(|r| !r.oversize && r.start >= start).map(|r| (r.record, None)));
                }
            }
            Ok(out)
        }
        #[cfg(feature = "kafka")]
        SourceConfig::Kafka(k) => {
            Ok(crate::source::kafka::admin::read_from(k, &from, limit)?.into_iter().map(|r| (r, None)).collect())
        }
        // Refused when loaded (`crate::features`).
        #[cfg(not(feature = "kafka"))]
        SourceConfig::Kafka(_) => Ok(Vec::new()),
    }
}

/// The records of one shadow run are held in memory: a bound by default.
const DEFAULT_LIMIT: usize = 100_000;

#[derive(Serialize)]
struct Line<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    entry: Option<&'a str>,
    #[serde(flatten)]
    differing: &'a Differing,
}

pub(crate) fn run(args: &ShadowArgs) -> Result<()> {
    let runtime = Runtime::new(Runtime::default_cache_dir())?;
    let cfg = Config::load(&args.config.config)?;
    super::mask::mask_output_as(&cfg);
    let (candidate_cfg, changed) = candidate(&cfg, args)?;
    let current = build_chain(&runtime, &cfg)?;
    let candidate = build_chain(&runtime, &candidate_cfg).context("the candidate chain")?;
    let versions = |c: &crate::plugin::chain::Chain| -> String {
        c.stages().iter().map(|s| s.id().to_string()).collect::<Vec<_>>().join(" → ")
    };
    eprintln!("shadow: current   {}", versions(&current));
    eprintln!("shadow: candidate {} ({})", versions(&candidate), changed.join("; "));
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
    let records = records(&cfg, args, limit)?;
    if args.limit.is_none() && records.len() == limit {
        eprintln!("shadow: stopped at {limit} records (the default --limit; pass --limit N to compare more)");
    }
    let fanout = (cfg.sinks.len() > 1).then(|| crate::pipeline::setup::fanout(&cfg)).transpose()?;
    let mut shadow = Shadow { current, candidate, totals: Default::default(), fanout };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut accepted: Vec<String> = Vec::new();
    let mut failed: Option<std::io::Error> = None;
    let bar = super::progress::bar(records.len() as u64, "shadow {bar:40} {pos}/{len} records ({per_sec}, {eta} left)");
    for chunk in records.chunks(cfg.pipeline.batch_size.max(1)) {
        bar.inc(chunk.len() as u64);
        let batch: Vec<Record> = chunk.iter().map(|(r, _)| r.clone()).collect();
        shadow.run(&batch, |d| {
            let entry = chunk[d.index].1.as_deref();
            if d.now_accepted {
                accepted.push(entry.map_or_else(|| d.position.clone(), |e| format!("entry {e} ({})", d.position)));
            }
            let line = if args.json {
                serde_json::to_string(&Line { entry, differing: &d }).unwrap_or_default()
            } else {
                let what: Vec<String> = d
                    .differences
                    .iter()
                    .map(|x| {
                        let at = x.at.as_deref().map(|a| format!(" {a}")).unwrap_or_default();
                        format!("{}{at}: {} → {}", x.kind, x.current, x.candidate)
                    })
                    .collect();
                let entry = entry.map(|e| format!(" (entry {e})")).unwrap_or_default();
                format!("{}{entry}  {}", d.position, what.join("; "))
            };
            if failed.is_none()
                && let Err(e) = writeln!(out, "{line}")
            {
                failed = Some(e);
            }
        })?;
        if failed.as_ref().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) {
            return Ok(());
        }
    }
    bar.finish_and_clear();
    if let Some(e) = failed {
        return Err(e.into());
    }
    let t = &shadow.totals;
    if args.json {
        writeln!(out, "{}", serde_json::json!({ "totals": t, "now_accepted": accepted }))?;
    } else {
        let kinds: Vec<String> = t.by_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
        writeln!(
            out,
            "shadow: {} records compared, {} differ{}; {} rejected now would be accepted, {} accepted now would be rejected",
            t.records,
            t.differing,
            if kinds.is_empty() { String::new() } else { format!(" ({})", kinds.join(", ")) },
            t.now_accepted,
            t.now_rejected
        )?;
        if !accepted.is_empty() {
            let what = if args.quarantine { "a quarantine replay would deliver" } else { "now accepted" };
            writeln!(out, "{what}:")?;
            for a in &accepted {
                writeln!(out, "  {a}")?;
            }
        }
    }
    out.flush()?;
    Ok(())
}
