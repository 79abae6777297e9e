//! `sluice test -c sluice.toml --cases DIR`: config unit tests, as
//! `vector test` and `rpk connect test` have them. Sample records go
//! through the configured chain and the same per-batch decisions the
//! driver makes (`custody::plan::Plan`: ids, repeats, the dedup window,
//! the source's own refusals), and each record's fate is compared with
//! what the case expects. The format is documented in docs/src/testing-configs.md.
//!
//! What differs from a run is only what is outside the config's logic:
//! the sink accepts every event unless the case scripts its backend's
//! answers (`sink`: read by the sink's response profile or classifier
//! plugin, `case_sink`),
//! the window is in memory and starts empty for each case, and
//! the plugins' clock is pinned to the case's `now` so a case about a
//! timestamp's age passes the same way next year.

use std::collections::HashSet;
use std::sync::Arc;

use bytes::Bytes;
use serde::Deserialize;

use super::case_sink::{CaseSink, Waiting};
use crate::config::Config;
use crate::custody::ids::{IdDigest, scope_of};
use crate::custody::plan::{Disposition, Plan};
use crate::delivery::Delivery;
use crate::delivery::FinalAnswer;
use crate::pipeline::error::PipelineError;
use crate::pipeline::setup::build_stage;
use crate::plugin::chain::Chain;
use crate::plugin::engine::Runtime;
use crate::plugin::expect::show_time;
use crate::record::{Position, Record};
use crate::sink::http::classifier::Reader;
use crate::source::config::SourceConfig;

/// One case file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Case {
    #[serde(default)]
    pub description: String,
    /// The instant the plugins see as now (RFC 3339); default: the real now.
    pub now: Option<String>,
    /// The records, in the order the source hands them over (also
    /// `records`, as plugin cases name them: a line as text, or a message
    /// with its key and headers, the same in both).
    #[serde(alias = "records")]
    pub input: Vec<Input>,
    /// One per input record, in order.
    pub expect: Vec<Expect>,
    /// The backend's answers, one per request the sink sends, in order
    /// (`status`, `headers`, `body` or `json`): read by the sink's
    /// response profile as in a run. Without them the sink accepts all.
    #[serde(default)]
    pub sink: Vec<crate::sink::http::corpus::Recorded>,
    /// With several sinks (`[[sinks]]`): per input record, the sinks its
    /// events go to, by name (`[]` for a record with no event). Not
    /// checked when absent.
    #[serde(default)]
    pub sinks: Option<Vec<Vec<String>>>,
}

/// A record: a line as text, or, for a Kafka source, a message with a key
/// and headers.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum Input {
    Line(String),
    Message(Message),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Message {
    pub payload: String,
    pub key: Option<String>,
    #[serde(default)]
    pub headers: Vec<(String, String)>,
}

/// What one record must become.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub(crate) enum Expect {
    /// Delivered as one event.
    Event(ExpectEvent),
    /// Delivered as these events, in order.
    Events(Vec<ExpectEvent>),
    /// Every event an id already delivered (earlier in the case).
    Duplicate,
    /// Quarantined, with a reason containing this.
    Quarantine(String),
    /// Dropped on purpose, with a reason containing this.
    Drop(String),
    /// Still in the source after a systemic answer (the backend's fault:
    /// late, not lost, not quarantined), its reason containing this.
    Systemic(String),
    /// Still in the source after a retry answer with attempts left.
    Retry(String),
}

/// An event: the shape plugin cases use too (`plugin::expect`).
use crate::plugin::expect::ExpectEvent;

/// What became of one input record.
#[derive(Debug)]
pub(crate) struct Got {
    /// `Err`: it has no door yet; it waits in the source.
    pub fate: Result<Disposition, Waiting>,
    /// The events delivered for it (none for a duplicate), each once
    /// however many sinks it went to.
    pub events: Vec<Delivery>,
    /// The sinks its events were delivered to, in the config's order.
    pub sinks: Vec<String>,
}

/// Run `case` through `cfg`'s chain (instantiated afresh: plugins keep no
/// state from another case) and the batch decisions.
pub(crate) fn run(cfg: &Config, runtime: &Runtime, name: &str, case: &Case) -> Result<Vec<Got>, String> {
    let now = crate::plugin::conformance::parse_now(case.now.as_deref())?;
    let stages = (0..cfg.plugins.len())
        .map(|i| build_stage(runtime, cfg, i, now))
        .collect::<Result<Vec<_>, PipelineError>>()
        .map_err(|e| format!("{:#}", anyhow::Error::new(e)))?;
    let mut chain = Chain::new(stages);
    let records = records(cfg, name, &case.input)?;
    let topic_wide = cfg.dedup.scope == crate::store::dedup::config::DedupScope::Topic;
    let max_line = match &cfg.source {
        SourceConfig::File(f) => Some(f.max_line_bytes),
        SourceConfig::Kafka(_) => None,
    };
    let mut window: HashSet<IdDigest> = HashSet::new();
    let fanout = Some(crate::pipeline::setup::fanout(cfg).map(Arc::new).map_err(|e| format!("routes: {e}"))?);
    let mut sink = match (&case.sink[..], cfg.first_sink().response()) {
        ([], _) => None,
        (_, _) if fanout.as_ref().is_some_and(|f| !f.is_single()) => {
            return Err("`sink` scripts one backend's answers; with several sinks every sink accepts all".into());
        }
        (answers, Some(response)) => {
            let reader = match cfg.first_sink().classifier() {
                Some(c) => Reader::Plugin(Box::new(c.build(runtime).map_err(|e| format!("sink.classifier: {e}"))?)),
                None => Reader::profile(response.profile().map_err(|e| e.to_string())?),
            };
            Some(CaseSink::new(reader, answers, cfg.first_sink().guard().retry.max_attempts))
        }
        (_, None) => return Err("`sink` scripts an HTTP backend's answers; this config's sink is not one".into()),
    };
    let mut got = Vec::with_capacity(records.len());
    for batch in records.chunks(cfg.pipeline.batch_size.max(1)) {
        let how = Batching { max_line, topic_wide, fanout: fanout.as_ref() };
        got.extend(run_batch(&mut chain, batch, &how, &mut window, sink.as_mut())?);
    }
    Ok(got)
}

/// The records of a case as the configured source would hand them over:
/// a file's lines at their byte offsets in a file named after the case,
/// or messages of partition 0 of the first named topic.
fn records(cfg: &Config, name: &str, input: &[Input]) -> Result<Vec<Record>, String> {
    let path: Arc<str> = name.into();
    let topic = match &cfg.source {
        SourceConfig::Kafka(k) => Some(k.topics.iter().find(|t| !t.starts_with('^')).cloned().unwrap_or("case".into())),
        SourceConfig::File(_) => None,
    };
    let mut offset = 0u64;
    let mut out = Vec::with_capacity(input.len());
    for (i, r) in input.iter().enumerate() {
        let (payload, key, headers) = match r {
            Input::Line(s) => (s.as_str(), None, &[][..]),
            Input::Message(m) => (m.payload.as_str(), m.key.as_deref(), m.headers.as_slice()),
        };
        let record = match &topic {
            None if key.is_some() || !headers.is_empty() => {
                return Err(format!("input {i}: a file source's lines have no key or headers"));
            }
            None => Record::line(Bytes::copy_from_slice(payload.as_bytes()), path.clone(), 0, offset),
            Some(topic) => Record {
                payload: Bytes::copy_from_slice(payload.as_bytes()),
                key: key.map(|k| Bytes::copy_from_slice(k.as_bytes())),
                headers: headers.iter().map(|(n, v)| (n.clone(), v.as_bytes().to_vec())).collect(),
                source_timestamp: None,
                position: Position::Kafka { topic: topic.as_str().into(), partition: 0, offset: i as i64 },
                event_id: None,
                timestamp: None,
                sinks: None,
            },
        };
        offset += payload.len() as u64 + 1;
        out.push(record);
    }
    Ok(out)
}

/// What a case's batches are run with, from the config.
struct Batching<'a> {
    max_line: Option<u64>,
    topic_wide: bool,
    /// Several sinks and their routes.
    fanout: Option<&'a Arc<crate::route::Fanout>>,
}

/// The driver's steps for one batch, with the case's sink (or one that
/// accepts everything).
fn run_batch(
    chain: &mut Chain,
    batch: &[Record],
    how: &Batching<'_>,
    window: &mut HashSet<IdDigest>,
    sink: Option<&mut CaseSink<'_>>,
) -> Result<Vec<Got>, String> {
    let Batching { max_line, topic_wide, fanout } = *how;
    let mut plan = Plan::routed(batch.len(), fanout);
    let mut to_plugins = Vec::with_capacity(batch.len());
    let mut index_of = Vec::with_capacity(batch.len());
    for (i, r) in batch.iter().enumerate() {
        match max_line {
            Some(max) if r.payload.len() as u64 > max => {
                plan.refuse(i, "source", super::files::oversize(r.payload.len(), max));
            }
            _ => {
                to_plugins.push(r);
                index_of.push(i);
            }
        }
    }
    let verdicts = chain.run_refs(&to_plugins).map_err(|e| format!("the chain failed: {e:#}"))?;
    let Some(first) = batch.first() else { return Ok(Vec::new()) };
    let scope = scope_of(&first.position, topic_wide);
    for (verdict, i) in verdicts.into_iter().zip(index_of) {
        let position = &batch[i].position;
        plan.verdict(i, verdict, &scope, || position.default_event_id());
    }
    let seen: Vec<bool> = plan.digests().iter().map(|d| window.contains(d)).collect();
    plan.seen(&seen);
    let fresh = plan.take_fresh();
    let owners = plan.sent_records();
    // The sink of each delivery, by its share.
    let mut sink_of = vec![0usize; fresh.len()];
    for (s, range) in plan.by_sink() {
        sink_of[range.clone()].fill(*s);
    }
    let answered = match sink {
        None => vec![Ok(FinalAnswer::Accepted); fresh.len()],
        Some(s) => s.deliver(&fresh)?,
    };
    // A record waits while any of its events waits (the driver would not
    // settle it): the last such reason is its.
    let mut waiting: Vec<Option<Waiting>> = vec![None; batch.len()];
    for (a, owner) in answered.iter().zip(&owners) {
        if let Err(w) = a {
            waiting[*owner] = Some(w.clone());
        }
    }
    let settled = plan.settle(answered.into_iter().map(Result::ok).collect());
    window.extend(settled.accepted.iter().copied());
    let mut events: Vec<Vec<Delivery>> = (0..batch.len()).map(|_| Vec::new()).collect();
    let mut sinks: Vec<Vec<usize>> = vec![Vec::new(); batch.len()];
    for ((d, owner), s) in fresh.into_iter().zip(owners).zip(sink_of) {
        // A fan-out's copies: the event once, each sink named.
        if !events[owner].iter().any(|e| e.id == d.id) {
            events[owner].push(d);
        }
        if !sinks[owner].contains(&s) {
            sinks[owner].push(s);
        }
    }
    let several = fanout.filter(|f| !f.is_single());
    let name =
        |s: &usize| several.map_or_else(|| crate::route::config::DEFAULT_SINK.to_string(), |f| f.name(*s).to_string());
    settled
        .fates
        .into_iter()
        .zip(events)
        .zip(waiting)
        .zip(sinks)
        .enumerate()
        .map(|(i, (((fate, events), waits), mut sinks))| match (fate, waits) {
            (Some(fate), _) => {
                sinks.sort_unstable();
                Ok(Got { fate: Ok(fate), events, sinks: sinks.iter().map(name).collect() })
            }
            (None, Some(w)) => Ok(Got { fate: Err(w), events: Vec::new(), sinks: Vec::new() }),
            (None, None) => Err(format!("record {i} was left undecided")),
        })
        .collect()
}

/// Every record whose fate differs from its expectation, each named, one
/// per line.
pub(crate) fn judge(case: &Case, got: &[Got]) -> Result<(), String> {
    let (input, expect) = (&case.input, &case.expect);
    if expect.len() != input.len() {
        return Err(format!("{} inputs but {} expectations: give one per input record", input.len(), expect.len()));
    }
    if let Some(sinks) = &case.sinks
        && sinks.len() != input.len()
    {
        return Err(format!("{} inputs but {} lists of sinks: give one per input record", input.len(), sinks.len()));
    }
    let wrong: Vec<String> = expect
        .iter()
        .zip(got)
        .enumerate()
        .filter_map(|(i, (want, got))| {
            let routed = case
                .sinks
                .as_ref()
                .and_then(|s| s.get(i))
                .filter(|want| **want != got.sinks)
                .map(|want| format!("expected its events at {}, got them at {}", list(want), list(&got.sinks)));
            let why = judge_one(want, got).err().into_iter().chain(routed).collect::<Vec<_>>();
            (!why.is_empty()).then(|| format!("input {i}: {}", why.join("; ")))
        })
        .collect();
    if wrong.is_empty() { Ok(()) } else { Err(wrong.join("\n      ")) }
}

fn judge_one(want: &Expect, got: &Got) -> Result<(), String> {
    match (want, &got.fate) {
        (Expect::Event(e), Ok(Disposition::Delivered)) => judge_events(std::slice::from_ref(e), &got.events),
        (Expect::Events(es), Ok(Disposition::Delivered)) => judge_events(es, &got.events),
        (Expect::Duplicate, Ok(Disposition::Duplicate)) => Ok(()),
        (Expect::Quarantine(part), Ok(Disposition::Quarantine { reason, .. })) if reason.contains(part.as_str()) => {
            Ok(())
        }
        (Expect::Drop(part), Ok(Disposition::Dropped { reason })) if reason.contains(part.as_str()) => Ok(()),
        (Expect::Systemic(part), Err(Waiting::Systemic(reason))) if reason.contains(part.as_str()) => Ok(()),
        (Expect::Retry(part), Err(Waiting::Retry(reason))) if reason.contains(part.as_str()) => Ok(()),
        (want, _) => Err(format!("expected {}, got {}", show_expect(want), show(got))),
    }
}

fn judge_events(want: &[ExpectEvent], got: &[Delivery]) -> Result<(), String> {
    if want.len() != got.len() {
        return Err(format!("expected {} events, got {}: {}", want.len(), got.len(), show_events(got)));
    }
    for (k, (w, d)) in want.iter().zip(got).enumerate() {
        let at = if want.len() == 1 { String::new() } else { format!("event {k}: ") };
        if w.sinks.is_some() {
            return Err(format!(
                "{at}an event's `sinks` is for plugin cases: a config case lists where each input's events went in its own `sinks`"
            ));
        }
        w.check(Some(&d.id), d.timestamp, d.event()).map_err(|why| format!("{at}{why}"))?;
    }
    Ok(())
}

fn show_expect(e: &Expect) -> String {
    match e {
        Expect::Event(_) => "one event".into(),
        Expect::Events(es) => format!("{} events", es.len()),
        Expect::Duplicate => "a duplicate".into(),
        Expect::Quarantine(part) => format!("quarantine with a reason containing {part:?}"),
        Expect::Drop(part) => format!("a drop with a reason containing {part:?}"),
        Expect::Systemic(part) => format!("waiting on a systemic answer containing {part:?}"),
        Expect::Retry(part) => format!("waiting on a retry answer containing {part:?}"),
    }
}

fn show_events(events: &[Delivery]) -> String {
    events
        .iter()
        .map(|d| {
            let (time, body) = (show_time(d.timestamp), String::from_utf8_lossy(d.event()));
            format!("{{id {:?}, timestamp {time}, body {body}}}", d.id)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Sinks as a case's verdict names them.
fn list(sinks: &[String]) -> String {
    if sinks.is_empty() { "no sink".into() } else { sinks.join(", ") }
}

/// A record's fate as the verdict line shows it.
pub(crate) fn show(got: &Got) -> String {
    let fate = show_fate(got);
    match &got.sinks[..] {
        [] => fate,
        [one] if one == crate::route::config::DEFAULT_SINK => fate,
        sinks => format!("{fate} (at {})", sinks.join(", ")),
    }
}

fn show_fate(got: &Got) -> String {
    match &got.fate {
        Err(Waiting::Systemic(reason)) => format!("waiting (systemic: {reason})"),
        Err(Waiting::Retry(reason)) => format!("waiting (retry: {reason})"),
        Ok(Disposition::Delivered) => format!("delivered {}", show_events(&got.events)),
        Ok(Disposition::Duplicate) => "a duplicate".into(),
        Ok(Disposition::Dropped { reason }) => format!("dropped: {reason}"),
        Ok(Disposition::Quarantine { stage, plugin, reason, .. }) => match plugin {
            Some(p) => format!("quarantined by plugin {}: {reason}", p.name),
            None => format!("quarantined at the {stage}: {reason}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn got(fate: Disposition, events: &[(&str, Option<&str>, &str)]) -> Got {
        let events = events
            .iter()
            .map(|(id, ts, body)| {
                let ns =
                    ts.map(|t| sluice_guest::time::Format::rfc3339().parse(t, 0).unwrap_or_else(|e| panic!("{e}")));
                Delivery::new(*id, ns, body.as_bytes())
            })
            .collect();
        Got { fate: Ok(fate), events, sinks: Vec::new() }
    }

    fn case(json: &str) -> Case {
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn expectations_parse_and_judge_each_record() {
        let c = case(
            r#"{"input": ["a", "b", "c", {"payload": "d", "key": "k"}],
                "expect": [
                  {"event": {"id": "a1", "timestamp": "2026-01-01T00:00:00Z", "fields": {"level": "INFO"}}},
                  "duplicate",
                  {"quarantine": "too old"},
                  {"events": [{"timestamp": null}, {"fields": {"n": 2}}]}
                ]}"#,
        );
        let right = || {
            vec![
                got(Disposition::Delivered, &[("a1", Some("2026-01-01T00:00:00Z"), r#"{"level":"INFO","msg":"x"}"#)]),
                got(Disposition::Duplicate, &[]),
                got(
                    Disposition::Quarantine {
                        stage: "plugin",
                        plugin: None,
                        sink: None,
                        reason: "ts 2001 is too old".into(),
                    },
                    &[],
                ),
                got(Disposition::Delivered, &[("d1", None, "{}"), ("d2", None, r#"{"n":2}"#)]),
            ]
        };
        let good = right();
        assert_eq!(judge(&c, &good), Ok(()));
        let mut bad = good;
        bad[3] = got(Disposition::Delivered, &[("d1", Some("2026-01-01T00:00:00Z"), "{}"), ("d2", None, r#"{"n":3}"#)]);
        let e = judge(&c, &bad).err().unwrap_or_default();
        assert_eq!(e, "input 3: event 0: timestamp \"2026-01-01T00:00:00Z\", expected none");
        bad[3] = got(Disposition::Delivered, &[("d1", None, "{}"), ("d2", None, r#"{"n":3}"#)]);
        let e = judge(&c, &bad).err().unwrap_or_default();
        assert_eq!(e, "input 3: event 1: field \"n\" is 3, expected 2");
        bad[1] = got(Disposition::Dropped { reason: "debug".into() }, &[]);
        let e = judge(&c, &bad).err().unwrap_or_default();
        assert_eq!(
            e,
            "input 1: expected a duplicate, got dropped: debug\n      input 3: event 1: field \"n\" is 3, expected 2",
            "every wrong record, each named"
        );
        let short = Case { expect: c.expect[..3].to_vec(), ..c.clone() };
        let e = judge(&short, &bad).err().unwrap_or_default();
        assert!(e.contains("4 inputs but 3 expectations"), "{e}");
        // With several sinks, where each record's events went.
        let routed =
            Case { sinks: Some(vec![vec!["a".into()], vec![], vec![], vec!["a".into(), "b".into()]]), ..c.clone() };
        let mut at = right();
        at[0].sinks = vec!["a".into()];
        at[3].sinks = vec!["a".into(), "b".into()];
        assert_eq!(judge(&routed, &at), Ok(()));
        at[3].sinks = vec!["b".into()];
        assert_eq!(
            judge(&routed, &at).err().unwrap_or_default(),
            "input 3: expected its events at a, b, got them at b"
        );
    }

    #[test]
    fn unknown_keys_in_a_case_are_refused() {
        let e = serde_json::from_str::<Case>(r#"{"input": [], "expect": [{"event": {"ids": "x"}}]}"#);
        assert!(e.is_err_and(|e| e.to_string().contains("ids")));
    }

    /// `records`, as a plugin case names them, reads as `input`.
    #[test]
    fn records_is_input_as_plugin_cases_write_it() {
        let c: Case = serde_json::from_str(
            r#"{"records": ["a", {"payload": "b", "key": "k"}], "expect": ["duplicate", "duplicate"]}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            matches!(&c.input[..], [Input::Line(a), Input::Message(m)] if a == "a" && m.key.as_deref() == Some("k"))
        );
    }
}
