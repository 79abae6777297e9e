//! `sluice audit`: what became of an event id, from the state store alone
//! (read-only, so a running pipeline may keep running). For each id:
//! delivered (when, to which sink, from which position, through which
//! plugin versions), a duplicate absorbed (when, from where), quarantined
//! (the entries), or unknown inside the window. `--summary` counts the
//! doors over a time range instead.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;

use anyhow::{Context as _, Result};
use serde::Serialize;

use super::args::AuditArgs;
use crate::config::Config;
use crate::custody::ids::{IdDigest, PIPELINE_SCOPE, Scope, digest, scope, topic_scope};
use crate::pipeline::clock::now_nanos;
use crate::source::config::SourceConfig;
use crate::store::Store;
use crate::store::audit::{ABSORBED, Trail};
use crate::store::dedup::DedupWindow;
use crate::store::dedup::config::DedupScope;
use crate::store::interned::{Context, Origin};
use crate::store::quarantine::Entry;

/// One id's answer.
#[derive(Debug, Serialize)]
pub(crate) struct Answer {
    pub id: String,
    /// `delivered`, `duplicate` (absorbed, never delivered by this store's
    /// record: its first delivery is older than the window, or came from
    /// another store), `quarantined`, or `unknown`.
    pub verdict: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered: Option<Passage>,
    /// The latest duplicate of it absorbed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub absorbed: Option<Passage>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quarantined: Vec<Quarantined>,
    /// With several sinks: each sink's delivery and absorbed duplicate,
    /// in the config's order (a sink the event was not routed to, or
    /// still owes, has neither).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sinks: Vec<SinkAnswer>,
}

/// One sink's part of an answer.
#[derive(Debug, Serialize)]
pub(crate) struct SinkAnswer {
    pub sink: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered: Option<Passage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub absorbed: Option<Passage>,
}

/// How an event passed a door, from its trail.
#[derive(Debug, Serialize)]
pub(crate) struct Passage {
    /// `None`: the id is recorded without a trail (restored from the
    /// dedup changelog, or `dedup.audit = false`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sink: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub plugins: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
}

#[derive(Debug, Serialize)]
pub(crate) struct Source {
    pub kind: String,
    /// The partition (`topic/N`) or the file.
    pub name: String,
    /// A file's rotations followed (its generation); absent for Kafka.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<u32>,
    pub offset: u64,
}

#[derive(Debug, Serialize)]
pub(crate) struct Quarantined {
    pub entry: String,
    pub time: String,
    pub stage: String,
    pub reason: String,
    /// How the entry was matched to the id: `position` (the id is the
    /// record's position, as an event without an id of its own gets), or
    /// `payload` (a field or a token of the original payload).
    pub matched: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replayed: Option<String>,
}

pub(crate) fn run(args: &AuditArgs) -> Result<()> {
    let cfg = Config::load(&args.config.config)?;
    super::mask::mask_output_as(&cfg);
    let store = Store::open_read_only(&cfg.pipeline.state_dir).context("open the state store")?;
    if args.summary {
        let since = match &args.since {
            Some(s) => super::quarantine::when(s, "since")?,
            None => 0,
        };
        let summary = summarise(&store, since)?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&summary)?);
        } else {
            print_summary(&summary, args.since.as_deref());
        }
        return Ok(());
    }
    let mut ids: Vec<String> = args.ids.clone();
    if let Some(f) = &args.from_file {
        let text = std::fs::read_to_string(f).with_context(|| format!("read {}", f.display()))?;
        ids.extend(text.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from));
    }
    anyhow::ensure!(!ids.is_empty(), "name at least one event id, or --from-file FILE, or --summary");
    let answers = answer(&cfg, &store, &ids)?;
    let unconfirmed = unconfirmed_sinks(&cfg);
    // A trail names its sink by what it is (`http …`); with one sink that
    // is the one.
    let only = (cfg.sinks.len() == 1).then(|| cfg.sinks[0].name.as_str());
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for a in &answers {
        *counts.entry(a.verdict).or_default() += 1;
        let line = if args.json { serde_json::to_string(a)? } else { describe(a, &unconfirmed, only) };
        match writeln!(out, "{line}") {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            r => r?,
        }
    }
    out.flush()?;
    if !args.json && answers.len() > 1 {
        let total: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
        eprintln!("{} ids: {}", answers.len(), total.join(", "));
    }
    Ok(())
}

/// The scopes an id may have been recorded under: the pipeline's (files),
/// or each partition's (or topic's) the store has seen; each with its
/// rank: a repartitioned pipeline's back (its sink is the pipeline's)
/// outranks its front (whose sink is the internal topic), so an id's
/// delivery is the back's when there is one, whatever the times.
fn scopes(cfg: &Config, origins: &HashMap<u32, Origin>) -> Vec<(Scope, u8)> {
    match &cfg.source {
        SourceConfig::File(_) => vec![(PIPELINE_SCOPE, 0)],
        SourceConfig::Kafka(k) => {
            let internal = format!("{}/", crate::source::kafka::config::repartition_topic(&k.group_id));
            let mut out: Vec<(Scope, u8)> = origins
                .values()
                .filter(|o| o.kind == "kafka")
                // Repartitioned, both sides decide per partition.
                .map(|o| match cfg.dedup.scope {
                    DedupScope::Topic if !cfg.dedup.repartition => {
                        (topic_scope(o.name.rsplit_once('/').map_or(o.name.as_str(), |(t, _)| t)), 0)
                    }
                    _ => (scope(&o.name), u8::from(cfg.dedup.repartition && o.name.starts_with(&internal))),
                })
                .collect();
            out.sort();
            out.dedup();
            out
        }
    }
}

/// Every id's answer, in the order asked: one multi-get per bucket for all
/// of them, and one pass over the quarantine.
/// Ids looked up in one call to the store.
const LOOKUP_CHUNK: usize = 10_000;

pub(crate) fn answer(cfg: &Config, store: &Store, ids: &[String]) -> Result<Vec<Answer>> {
    let (contexts, origins) = store.audit_names()?;
    // Every bucket the store holds: what is still there is in the window.
    let dedup = DedupWindow::unfiltered(store, std::time::Duration::from_secs(u64::MAX / 4))?;
    let now = (now_nanos() / 1_000_000_000) as u64;
    // Each scope once per sink: a sink's ids are keyed apart (`route::salt`).
    let scopes: Vec<(Scope, u8, [u8; 8], usize)> = scopes(cfg, &origins)
        .into_iter()
        .flat_map(|(s, rank)| cfg.sinks.iter().enumerate().map(move |(i, k)| (s, rank, crate::route::salt(&k.name), i)))
        .collect();
    // In chunks, for the progress a reconciliation of millions of ids shows
    // on a terminal.
    let bar = super::progress::bar(ids.len() as u64, "audit {bar:40} {pos}/{len} ids ({per_sec}, {eta} left)");
    let mut values = Vec::with_capacity(ids.len() * scopes.len() * 2);
    for chunk in ids.chunks(LOOKUP_CHUNK) {
        let mut keys: Vec<Vec<u8>> = Vec::with_capacity(chunk.len() * scopes.len() * 2);
        for id in chunk {
            for (s, _, salt, _) in &scopes {
                let d: IdDigest = crate::custody::plan::salted(digest(s, id), *salt);
                keys.push(d.to_vec());
                keys.push([&d[..], &[ABSORBED]].concat());
            }
        }
        values.extend(dedup.values(&keys, now)?);
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    let passage = |raw: &[u8]| -> Passage {
        let Some(t) = Trail::decode(raw) else {
            return Passage { at: None, sink: None, plugins: Vec::new(), via: None, source: None };
        };
        let context: Option<&Context> = contexts.get(&t.context);
        let source = origins.get(&t.origin).map(|o| Source {
            kind: o.kind.clone(),
            name: o.name.clone(),
            generation: (o.kind == "file").then_some(t.part),
            offset: t.offset,
        });
        Passage {
            at: Some(sluice_guest::time::format_rfc3339(t.at_nanos)),
            sink: context.map(|c| c.sink.clone()),
            plugins: context.map(|c| c.plugins.clone()).unwrap_or_default(),
            via: context.map(|c| c.via.clone()),
            source,
        }
    };
    let quarantined = quarantine_matches(store, ids)?;
    let per_id = scopes.len() * 2;
    let mut answers = Vec::with_capacity(ids.len());
    for (k, id) in ids.iter().enumerate() {
        let mine = &values[k * per_id..(k + 1) * per_id];
        // The newest trail among the scopes of the highest rank that has
        // one, for each of the two keys.
        // Of one sink, or (`None`) of any.
        let newest = |odd: usize, sink: Option<usize>| {
            mine.iter()
                .skip(odd)
                .step_by(2)
                .zip(&scopes)
                .filter(|(_, (.., i))| sink.is_none_or(|s| s == *i))
                .filter_map(|(v, (_, rank, ..))| Some((v.as_ref()?, *rank)))
                .max_by_key(|(v, rank)| (*rank, Trail::decode(v).map(|t| t.at_nanos).unwrap_or(i64::MIN)))
                .map(|(v, _)| v)
        };
        let delivered = newest(0, None).map(|v| passage(v));
        let absorbed = newest(1, None).map(|v| passage(v));
        let sinks: Vec<SinkAnswer> = if cfg.sinks.len() > 1 {
            cfg.sinks
                .iter()
                .enumerate()
                .map(|(i, k)| SinkAnswer {
                    sink: k.name.clone(),
                    delivered: newest(0, Some(i)).map(|v| passage(v)),
                    absorbed: newest(1, Some(i)).map(|v| passage(v)),
                })
                .collect()
        } else {
            Vec::new()
        };
        let quarantined: Vec<Quarantined> =
            quarantined.get(id.as_str()).map(|v| v.iter().map(to_quarantined).collect()).unwrap_or_default();
        let verdict = match (&delivered, &absorbed, &quarantined) {
            (Some(_), _, _) => "delivered",
            (None, Some(_), _) => "duplicate",
            (None, None, q) if !q.is_empty() => "quarantined",
            _ => "unknown",
        };
        answers.push(Answer { id: id.clone(), verdict, delivered, absorbed, quarantined, sinks });
    }
    Ok(answers)
}

fn to_quarantined((e, matched): &(Entry, &'static str)) -> Quarantined {
    Quarantined {
        entry: e.id.clone(),
        time: e.time.clone(),
        stage: e.stage.clone(),
        reason: e.reason.clone(),
        matched,
        replayed: e.replayed.clone(),
    }
}

/// The entries that hold each asked id: as the record's position (the id
/// an event without one of its own gets), or in its payload (a top-level
/// string field of a JSON object, or a token of a text line). One pass.
fn quarantine_matches<'i>(store: &Store, ids: &'i [String]) -> Result<HashMap<&'i str, Vec<(Entry, &'static str)>>> {
    let wanted: HashSet<&str> = ids.iter().map(String::as_str).collect();
    let mut found: HashMap<&str, Vec<(Entry, &'static str)>> = HashMap::new();
    store.scan_quarantine(|e| {
        let position = e.position.default_event_id();
        let mut hits: Vec<(&str, &'static str)> = Vec::new();
        if let Some(id) = wanted.get(position.as_str()) {
            hits.push((id, "position"));
        }
        let payload = e.payload.to_vec();
        match serde_json::from_slice::<serde_json::Value>(&payload) {
            Ok(serde_json::Value::Object(map)) => {
                for v in map.values() {
                    if let Some(id) = v.as_str().and_then(|s| wanted.get(s)) {
                        hits.push((id, "payload"));
                    }
                }
            }
            _ => {
                let text = String::from_utf8_lossy(&payload);
                for token in text.split(|c: char| c.is_whitespace() || "=,;\"'[]{}()".contains(c)) {
                    if let Some(id) = wanted.get(token) {
                        hits.push((id, "payload"));
                    }
                }
            }
        }
        hits.sort();
        hits.dedup_by_key(|h| h.0);
        for (id, how) in hits {
            found.entry(id).or_default().push((e.clone(), how));
        }
        Ok::<_, anyhow::Error>(true)
    })?;
    Ok(found)
}

fn where_from(p: &Passage) -> String {
    let Some(s) = &p.source else { return String::new() };
    match s.generation {
        Some(g) if g > 0 => format!(" from {} offset {} (generation {g})", s.name, s.offset),
        Some(_) => format!(" from {} offset {}", s.name, s.offset),
        None => format!(" from {} offset {}", s.name, s.offset),
    }
}

/// `name@` and the first 12 hex digits of each digest (`--json` has them
/// whole).
fn short(plugins: &[String]) -> String {
    let one = |p: &String| match p.split_once('@') {
        Some((name, digest)) => format!("{name}@{}", &digest[..digest.len().min(12)]),
        None => p.clone(),
    };
    plugins.iter().map(one).collect::<Vec<_>>().join(",")
}

/// The sinks whose backend's answers cannot prove a record was stored (a
/// profile with `confirms = false`, VictoriaLogs): what they took is
/// "sent, unconfirmed", not delivered.
fn unconfirmed_sinks(cfg: &Config) -> Vec<String> {
    cfg.sinks
        .iter()
        .filter(|s| s.sink.classifier().is_none())
        .filter(|s| s.sink.response().and_then(|r| r.profile().ok()).is_some_and(|p| !p.confirms))
        .map(|s| s.name.clone())
        .collect()
}

/// One line per id, for a person.
fn describe(a: &Answer, unconfirmed: &[String], only: Option<&str>) -> String {
    let taken = |sink: Option<&str>| {
        if sink.is_some_and(|s| unconfirmed.iter().any(|u| u == s)) {
            "sent, unconfirmed (its backend's answers cannot prove it stored it),"
        } else {
            "delivered"
        }
    };
    let mut parts = Vec::new();
    for s in &a.sinks {
        let door = match (&s.delivered, &s.absorbed) {
            (Some(d), _) => format!("{} {}", taken(Some(&s.sink)), d.at.as_deref().unwrap_or("(no trail)")),
            (None, Some(d)) => format!("duplicate absorbed {}", d.at.as_deref().unwrap_or("?")),
            (None, None) => "nothing (not routed there, or still owed)".into(),
        };
        parts.push(format!("sink {}: {door}", s.sink));
    }
    if let Some(d) = &a.delivered {
        parts.push(match &d.at {
            Some(at) => format!(
                "{} {at} to {}{} via {}{}",
                taken(only),
                d.sink.as_deref().unwrap_or("?"),
                where_from(d),
                if d.plugins.is_empty() { "no plugins".to_string() } else { short(&d.plugins) },
                match d.via.as_deref() {
                    Some("replay") => " (a quarantine replay)",
                    _ => "",
                }
            ),
            None => "delivered (no trail kept: restored from the dedup changelog, or dedup.audit = false)".into(),
        });
    }
    if let Some(d) = &a.absorbed {
        parts.push(format!("duplicate absorbed {}{}", d.at.as_deref().unwrap_or("?"), where_from(d)));
    }
    for q in &a.quarantined {
        let replayed = q.replayed.as_deref().map(|t| format!(", replayed {t}")).unwrap_or_default();
        parts.push(format!("quarantined {} entry {} at stage {}: {}{replayed}", q.time, q.entry, q.stage, q.reason));
    }
    if parts.is_empty() {
        parts.push("unknown: not delivered, absorbed or quarantined inside the window".into());
    }
    format!("{}  {}", a.id, parts.join("; "))
}

/// Counts per door since a time.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Summary {
    pub since: String,
    pub delivered: u64,
    /// Ids recorded without a trail in buckets that began after `since`
    /// (restored from the changelog, or `dedup.audit = false`).
    pub delivered_without_trail: u64,
    /// Ids whose latest absorbed duplicate falls in the range (each id
    /// once, however often it came back).
    pub duplicate_ids: u64,
    pub quarantined: u64,
    pub quarantined_by_stage: BTreeMap<String, u64>,
    pub delivered_by_source: BTreeMap<String, u64>,
}

fn summarise(store: &Store, since_nanos: i64) -> Result<Summary> {
    let (_, origins) = store.audit_names()?;
    let dedup = DedupWindow::unfiltered(store, std::time::Duration::from_secs(u64::MAX / 4))?;
    let mut s = Summary { since: sluice_guest::time::format_rfc3339(since_nanos), ..Summary::default() };
    let since_secs = (since_nanos.max(0) / 1_000_000_000) as u64;
    let mut by_origin: HashMap<u32, u64> = HashMap::new();
    dedup.scan_since(since_secs, |key, value| {
        let trail = Trail::decode(value);
        match (key.len(), trail) {
            (24, Some(t)) if t.at_nanos >= since_nanos => {
                s.delivered += 1;
                *by_origin.entry(t.origin).or_default() += 1;
            }
            (24, None) => s.delivered_without_trail += 1,
            (25, Some(t)) if t.at_nanos >= since_nanos => s.duplicate_ids += 1,
            _ => {}
        }
    })?;
    for (o, n) in by_origin {
        let name = origins.get(&o).map(|o| o.name.clone()).unwrap_or_else(|| format!("origin {o}"));
        s.delivered_by_source.insert(name, n);
    }
    store.scan_quarantine(|e| {
        if e.written_nanos() >= since_nanos {
            s.quarantined += 1;
            *s.quarantined_by_stage.entry(e.stage.clone()).or_default() += 1;
        }
        Ok::<_, anyhow::Error>(true)
    })?;
    Ok(s)
}

fn print_summary(s: &Summary, since: Option<&str>) {
    match since {
        Some(a) => println!("since {} ({a}):", s.since),
        None => println!("everything the store holds (the dedup window):"),
    }
    println!("  delivered    {:>10}", s.delivered);
    for (name, n) in &s.delivered_by_source {
        println!("    {n:>10}  {name}");
    }
    if s.delivered_without_trail > 0 {
        println!(
            "  delivered    {:>10}  without a trail (restored from the changelog, or dedup.audit = false)",
            s.delivered_without_trail
        );
    }
    println!("  duplicate    {:>10}  ids absorbed (each once, at its latest)", s.duplicate_ids);
    let stages: Vec<String> = s.quarantined_by_stage.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let stages = if stages.is_empty() { String::new() } else { format!("  ({})", stages.join(", ")) };
    println!("  quarantined  {:>10}{stages}", s.quarantined);
    println!("  dropped      not kept in the store: see sluice_records_out_total{{door=\"dropped\"}}");
}
