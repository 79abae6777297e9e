//! Shadow runs: the same records through the chain in force and a
//! candidate chain (a plugin's new build, or its new config), side by side,
//! so an operator sees what a change would do before it is deployed or a
//! quarantine replay is run. Nothing is delivered, recorded or committed:
//! the chains' verdicts are compared and nothing else happens.
//!
//! `compare` is the judgement, plain Rust over two verdicts; `Shadow` runs
//! batches through both chains and keeps the totals.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::pipeline::error::PipelineError;
use crate::plugin::chain::Chain;
use crate::record::{Event, EventId, Record};
use crate::route::Fanout;
use crate::verdict::Verdict;

/// One way two verdicts on a record differ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Difference {
    /// `outcome` (emit, drop or reject), `events` (how many), `id`,
    /// `timestamp`, `fields` (the body), `reason` (of a drop or a
    /// rejection), or `sinks` (where the config's routes send an event).
    pub kind: &'static str,
    /// Which field, for `fields`; which event, when a record became several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    pub current: String,
    pub candidate: String,
}

fn outcome(v: &Verdict) -> String {
    match v {
        Verdict::Emit(events) if events.len() == 1 => "emit 1 event".into(),
        Verdict::Emit(events) => format!("emit {} events", events.len()),
        Verdict::Drop { plugin, reason } => format!("drop by {}: {reason}", plugin.name),
        Verdict::Reject { plugin, reason } => format!("reject by {}: {reason}", plugin.name),
    }
}

fn show(v: Option<&serde_json::Value>) -> String {
    v.map_or_else(|| "(absent)".to_string(), |v| v.to_string())
}

fn time(t: Option<i64>) -> String {
    t.map_or_else(|| "(none)".to_string(), sluice_guest::time::format_rfc3339)
}

/// How `candidate` differs from `current`, as a list (empty: the same).
pub(crate) fn compare(current: &Verdict, candidate: &Verdict) -> Vec<Difference> {
    let diff =
        |kind, at: Option<String>, current: String, candidate: String| Difference { kind, at, current, candidate };
    match (current, candidate) {
        (Verdict::Emit(a), Verdict::Emit(b)) => {
            let mut out = Vec::new();
            if a.len() != b.len() {
                out.push(diff("events", None, a.len().to_string(), b.len().to_string()));
            }
            let several = a.len() > 1 || b.len() > 1;
            for (k, (x, y)) in a.iter().zip(b).enumerate() {
                out.extend(compare_events(x, y, several.then(|| format!("event {k}"))));
            }
            out
        }
        (Verdict::Drop { reason: a, .. }, Verdict::Drop { reason: b, .. })
        | (Verdict::Reject { reason: a, .. }, Verdict::Reject { reason: b, .. }) => {
            if a == b {
                Vec::new()
            } else {
                vec![diff("reason", None, a.clone(), b.clone())]
            }
        }
        (a, b) => vec![diff("outcome", None, outcome(a), outcome(b))],
    }
}

fn compare_events(a: &Event, b: &Event, which: Option<String>) -> Vec<Difference> {
    let mut out = Vec::new();
    let at = |field: Option<&str>| match (&which, field) {
        (Some(w), Some(f)) => Some(format!("{w}.{f}")),
        (Some(w), None) => Some(w.clone()),
        (None, f) => f.map(String::from),
    };
    if a.id != b.id {
        let id = |i: &Option<EventId>| i.as_deref().unwrap_or("(none: the record's position)").to_string();
        out.push(Difference { kind: "id", at: at(None), current: id(&a.id), candidate: id(&b.id) });
    }
    if a.timestamp != b.timestamp {
        out.push(Difference {
            kind: "timestamp",
            at: at(None),
            current: time(a.timestamp),
            candidate: time(b.timestamp),
        });
    }
    if a.body == b.body {
        return out;
    }
    let parse = |body: &[u8]| serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(body);
    match (parse(&a.body), parse(&b.body)) {
        (Ok(x), Ok(y)) => {
            let names: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for name in names {
                let (u, v) = (x.get(name), y.get(name));
                if u != v {
                    out.push(Difference { kind: "fields", at: at(Some(name)), current: show(u), candidate: show(v) });
                }
            }
        }
        // The host checks that bodies are JSON objects; compare the bytes
        // of whatever is not.
        _ => out.push(Difference {
            kind: "fields",
            at: at(None),
            current: String::from_utf8_lossy(&a.body).into_owned(),
            candidate: String::from_utf8_lossy(&b.body).into_owned(),
        }),
    }
    out
}

/// What a shadow run found.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Totals {
    pub records: u64,
    pub differing: u64,
    /// Records with at least one difference of each kind.
    pub by_kind: BTreeMap<&'static str, u64>,
    /// Records the chain in force rejects and the candidate accepts: what
    /// a `quarantine replay` with the candidate would deliver.
    pub now_accepted: u64,
    /// And the other way: accepted now, rejected by the candidate.
    pub now_rejected: u64,
}

/// One record whose verdicts differ.
#[derive(Debug, Serialize)]
pub(crate) struct Differing {
    pub position: String,
    /// The candidate emits what the chain in force rejects.
    pub now_accepted: bool,
    pub differences: Vec<Difference>,
    /// The record's index in the batch.
    #[serde(skip)]
    pub index: usize,
}

/// Where the routes of `f` send each event of two verdicts that both
/// emit, where that differs: a change of a field a route reads moves an
/// event between sinks.
pub(crate) fn compare_sinks(current: &Verdict, candidate: &Verdict, f: &Fanout) -> Vec<Difference> {
    let (Verdict::Emit(a), Verdict::Emit(b)) = (current, candidate) else { return Vec::new() };
    let names = |mask: crate::route::config::SinkMask| {
        let n: Vec<&str> = (0..f.len()).filter(|s| mask & (1 << s) != 0).map(|s| f.name(s)).collect();
        n.join(", ")
    };
    let several = a.len() > 1 || b.len() > 1;
    a.iter()
        .zip(b)
        .enumerate()
        .filter_map(|(k, (x, y))| {
            // A route naming a sink there is not quarantines the record.
            let shown = |r: Result<crate::route::config::SinkMask, crate::route::error::RouteError>| {
                r.map_or_else(|e| format!("quarantine: {e}"), names)
            };
            let (now, then) = (shown(f.sinks_of(x)), shown(f.sinks_of(y)));
            (now != then).then(|| Difference {
                kind: "sinks",
                at: several.then(|| format!("event {k}")),
                current: now,
                candidate: then,
            })
        })
        .collect()
}

/// The two chains, run side by side.
pub(crate) struct Shadow {
    pub current: Chain,
    pub candidate: Chain,
    pub totals: Totals,
    /// The config's sinks and routes, when it has several sinks: where
    /// each event goes is compared too.
    pub fanout: Option<Fanout>,
}

impl Shadow {
    /// Run `batch` through both chains; `each` sees every record whose
    /// verdicts differ.
    pub(crate) fn run(&mut self, batch: &[Record], mut each: impl FnMut(Differing)) -> Result<(), PipelineError> {
        let refs: Vec<&Record> = batch.iter().collect();
        let now = self.current.run_refs(&refs)?;
        let then = self.candidate.run_refs(&refs)?;
        for (index, ((record, a), b)) in batch.iter().zip(&now).zip(&then).enumerate() {
            self.totals.records += 1;
            let mut differences = compare(a, b);
            if let Some(f) = &self.fanout {
                differences.extend(compare_sinks(a, b, f));
            }
            if differences.is_empty() {
                continue;
            }
            self.totals.differing += 1;
            let mut kinds: Vec<&'static str> = differences.iter().map(|d| d.kind).collect();
            kinds.dedup();
            for k in kinds {
                *self.totals.by_kind.entry(k).or_default() += 1;
            }
            let rejected = |v: &Verdict| matches!(v, Verdict::Reject { .. });
            let now_accepted = rejected(a) && matches!(b, Verdict::Emit(_));
            self.totals.now_accepted += now_accepted as u64;
            self.totals.now_rejected += (matches!(a, Verdict::Emit(_)) && rejected(b)) as u64;
            each(Differing { position: record.position.default_event_id().into(), now_accepted, differences, index });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::PluginId;

    fn event(id: Option<&str>, ts: Option<i64>, body: &str) -> Event {
        Event::new(id.map(EventId::from), ts, bytes::Bytes::copy_from_slice(body.as_bytes()))
    }

    fn plugin() -> PluginId {
        PluginId { name: "pattern".into(), digest: blake3::hash(b"p") }
    }

    #[test]
    fn the_same_verdicts_do_not_differ() {
        let v = Verdict::Emit(vec![event(Some("a"), Some(1), r#"{"x":1,"y":"z"}"#)]);
        let w = Verdict::Emit(vec![event(Some("a"), Some(1), r#"{"y":"z","x":1}"#)]);
        assert!(compare(&v, &w).is_empty(), "field order is not a difference");
        let r = Verdict::Reject { plugin: plugin(), reason: "no".into() };
        assert!(compare(&r, &r).is_empty());
    }

    #[test]
    fn each_field_id_and_timestamp_that_changed_is_named() {
        let v = Verdict::Emit(vec![event(Some("a"), Some(0), r#"{"Content":"x","Level":"INFO"}"#)]);
        let w =
            Verdict::Emit(vec![event(Some("b"), Some(1_000_000_000), r#"{"Content":"y","Level":"INFO","Pid":"7"}"#)]);
        let d = compare(&v, &w);
        let kinds: Vec<(&str, Option<&str>)> = d.iter().map(|d| (d.kind, d.at.as_deref())).collect();
        assert_eq!(
            kinds,
            [("id", None), ("timestamp", None), ("fields", Some("Content")), ("fields", Some("Pid"))],
            "{d:?}"
        );
        assert_eq!(d[3].current, "(absent)");
        assert_eq!(d[3].candidate, "\"7\"");
        assert_eq!(d[1].candidate, "1970-01-01T00:00:01Z");
    }

    #[test]
    fn an_outcome_that_changed_is_one_difference_and_says_both() {
        let r = Verdict::Reject { plugin: plugin(), reason: "no pattern matched (tried 4)".into() };
        let e = Verdict::Emit(vec![event(None, None, "{}")]);
        let d = compare(&r, &e);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].kind, "outcome");
        assert_eq!(d[0].current, "reject by pattern: no pattern matched (tried 4)");
        assert_eq!(d[0].candidate, "emit 1 event");
        let other = Verdict::Reject { plugin: plugin(), reason: "timestamp field \"Stamp\" did not match".into() };
        assert_eq!(compare(&r, &other)[0].kind, "reason");
    }

    #[test]
    fn a_split_names_the_event_and_its_count() {
        let v = Verdict::Emit(vec![event(None, None, r#"{"a":1}"#)]);
        let w = Verdict::Emit(vec![event(None, None, r#"{"a":2}"#), event(None, None, r#"{"b":1}"#)]);
        let d = compare(&v, &w);
        assert_eq!(d[0].kind, "events");
        assert_eq!(d[1].at.as_deref(), Some("event 0.a"));
    }

    #[test]
    fn with_several_sinks_an_event_the_routes_send_elsewhere_is_named() {
        let level = crate::route::config::RouteConfig {
            field: Some("/level".into()),
            equals: Some("debug".into()),
            matches: None,
            exists: None,
            sinks: vec!["archive".into()],
        };
        let f = Fanout::new(&["index".to_string(), "archive".to_string()], &[level]).unwrap_or_else(|e| panic!("{e}"));
        let v = Verdict::Emit(vec![event(Some("a"), None, r#"{"level":"debug"}"#)]);
        let w = Verdict::Emit(vec![event(Some("a"), None, r#"{"level":"warn"}"#)]);
        let d = compare_sinks(&v, &w, &f);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!((d[0].kind, d[0].current.as_str(), d[0].candidate.as_str()), ("sinks", "archive", "index, archive"));
        assert!(compare_sinks(&v, &v, &f).is_empty());
    }
}
