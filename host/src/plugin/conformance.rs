//! The conformance kit: golden records in, expected outcomes out, as plain
//! JSON files (`conformance/README.md` documents the format). `sluice
//! plugin test P.wasm --cases DIR` runs every case of a folder against a
//! plugin and gives a verdict per case.
//!
//! Two uses: an SDK port proves it maps the WIT contract faithfully by
//! building the *conformance plugin* (`conformance/SPEC.md`) and passing
//! `conformance/cases/`; and every plugin keeps cases of its own behaviour
//! beside it (`plugins/json/cases/`).
//!
//! Outcomes are compared on what a plugin decides, in the words a config's
//! cases (`sluice test`) use for the same doors: `{"event": …}` or
//! `{"events": […]}` (the event shape `plugin::expect` gives both: a body
//! as a JSON value, or a subset of its fields; an id; a time as RFC 3339
//! or nanoseconds; what a case leaves out is not checked), and
//! `{"quarantine": …}` or `{"drop": …}` with a part of the reason. One
//! vocabulary: an author writes both kinds of case alike. The words of
//! older plugin cases (`{"outcomes": […]}` with `emit`, `reject`,
//! `reject_contains`, `drop_contains`) are still read, and
//! [`Case::old_words`] names them so `sluice plugin test` can say what
//! to write instead.

use std::path::{Path, PathBuf};

use base64::Engine;
use serde::Deserialize;

use crate::record::{EventId, Outcome, Position, Record};

#[derive(Debug, thiserror::Error)]
pub(crate) enum CaseError {
    #[error("case {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// One case file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Case {
    #[serde(default)]
    pub description: String,
    /// The plugin's config object (what `init` receives as JSON).
    #[serde(default = "empty_object")]
    pub config: serde_json::Value,
    /// The batch, in one call. Written as a config case writes its
    /// `input` (and under that name too): a record is a line as text, or
    /// an object with its payload, key and headers, plus what only a
    /// plugin case needs (bytes, ids, timestamps, positions).
    #[serde(default, alias = "input", deserialize_with = "written_records")]
    pub records: Vec<CaseRecord>,
    /// The instant the plugin sees as now (RFC 3339), as in a config's
    /// cases: a case about a timestamp's age passes the same way next
    /// year. Default: the real now.
    #[serde(default)]
    pub now: Option<String>,
    /// The contract version the case needs (`"0.2.0"`): what an older
    /// contract cannot say (a route) is not asked of a plugin built for
    /// it, and the run says so rather than failing it or passing it.
    #[serde(default)]
    pub contract: Option<String>,
    pub expect: Expect,
}

/// A case's `now` (RFC 3339) as nanoseconds since the epoch: the clock the
/// plugins of a plugin case and of a config case see alike.
pub(crate) fn parse_now(now: Option<&str>) -> Result<Option<i64>, String> {
    now.map(|t| {
        sluice_guest::time::Format::rfc3339().parse(t, 0).map_err(|e| format!("now {t:?} is not an RFC 3339 time: {e}"))
    })
    .transpose()
}

fn empty_object() -> serde_json::Value {
    serde_json::json!({})
}

/// A case's records: a string is a record with that payload; an object is
/// read field by field, its error naming the record.
fn written_records<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<CaseRecord>, D::Error> {
    use serde::de::Error;
    let written: Vec<serde_json::Value> = Deserialize::deserialize(d)?;
    written
        .into_iter()
        .enumerate()
        .map(|(i, v)| match v {
            serde_json::Value::String(line) => Ok(CaseRecord { payload: Some(line), ..CaseRecord::default() }),
            other => serde_json::from_value(other).map_err(|e| D::Error::custom(format!("records[{i}]: {e}"))),
        })
        .collect()
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CaseRecord {
    /// The payload as UTF-8 text …
    pub payload: Option<String>,
    /// … or as base64 (any bytes, invalid UTF-8 included) …
    pub payload_base64: Option<String>,
    /// … or one byte repeated (`{"byte": 97, "count": 1048576}`).
    pub payload_repeat: Option<Repeat>,
    /// The key as UTF-8 text (as config cases write it) …
    pub key: Option<String>,
    /// … or as base64 …
    pub key_base64: Option<String>,
    /// … or a key of one byte repeated.
    pub key_repeat: Option<Repeat>,
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// Headers appended after `headers`: `times` of them named `name`,
    /// each value one byte repeated.
    pub header_repeat: Option<HeaderRepeat>,
    pub source_timestamp: Option<i64>,
    /// `kafka:<topic>/<partition>@<offset>` or `file:<path>#<generation>@<offset>`;
    /// default `file:case#0@<index>`.
    pub position: Option<String>,
    pub event_id: Option<String>,
    pub timestamp: Option<i64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Repeat {
    pub byte: u8,
    pub count: usize,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HeaderRepeat {
    pub name: String,
    pub byte: u8,
    pub count: usize,
    pub times: usize,
}

/// What a case expects: one outcome per record, in order (a list), or
/// `init`'s refusal.
#[derive(Debug, Clone)]
pub(crate) enum Expect {
    Outcomes(Vec<ExpectOutcome>),
    Written(Written),
}

/// Read by its shape, so that a misspelt outcome is named by its index
/// rather than "matched no variant".
impl<'de> Deserialize<'de> for Expect {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Array(items) => items
                .into_iter()
                .enumerate()
                .map(|(i, v)| serde_json::from_value(v).map_err(|e| D::Error::custom(format!("expect[{i}]: {e}"))))
                .collect::<Result<_, _>>()
                .map(Expect::Outcomes),
            other => serde_json::from_value(other).map(Expect::Written).map_err(|e| {
                D::Error::custom(format!("expect: {e} (a list of outcomes, one per record, or {{\"init_error\": …}})"))
            }),
        }
    }
}

/// The object forms of `expect`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub(crate) enum Written {
    /// `init` refuses the config with a message containing this.
    InitError(String),
    /// The older form of the list.
    Outcomes(Vec<ExpectOutcome>),
}

/// What one record must become, in a config case's words.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub(crate) enum ExpectOutcome {
    /// One event.
    Event(ExpectEvent),
    /// These events, in order (`[]`: none).
    Events(Vec<ExpectEvent>),
    /// Rejected (to the quarantine), its reason containing this.
    Quarantine(String),
    /// Dropped on purpose, its reason containing this.
    Drop(String),
    /// Older words: `events`, `quarantine` with the whole reason, and
    /// `quarantine` and `drop`.
    Emit(Vec<ExpectEvent>),
    Reject(String),
    RejectContains(String),
    DropContains(String),
}

impl Expect {
    /// `Err(want)`: `init` must refuse with a message containing `want`.
    pub(crate) fn outcomes(&self) -> Result<&[ExpectOutcome], &str> {
        match self {
            Expect::Outcomes(o) | Expect::Written(Written::Outcomes(o)) => Ok(o),
            Expect::Written(Written::InitError(want)) => Err(want),
        }
    }
}

impl Case {
    /// The older words this case is written in, each with what to write
    /// instead: empty for a case in the one vocabulary.
    pub(crate) fn old_words(&self) -> Vec<(&'static str, &'static str)> {
        let mut old = Vec::new();
        if let Expect::Written(Written::Outcomes(_)) = &self.expect {
            old.push(("{\"outcomes\": [...]}", "a list, one per record"));
        }
        for o in self.expect.outcomes().unwrap_or_default() {
            let word = match o {
                ExpectOutcome::Emit(_) => ("emit", "event or events"),
                ExpectOutcome::Reject(_) => ("reject", "quarantine"),
                ExpectOutcome::RejectContains(_) => ("reject_contains", "quarantine"),
                ExpectOutcome::DropContains(_) => ("drop_contains", "drop"),
                _ => continue,
            };
            if !old.contains(&word) {
                old.push(word);
            }
        }
        old
    }
}

/// The event shape config cases use too (`plugin::expect`).
use super::expect::ExpectEvent;

/// Every `*.json` of `dir`, sorted by name, as `T` (a conformance case
/// here; a config case for `sluice test`).
pub(crate) fn load_dir<T: serde::de::DeserializeOwned>(dir: &Path) -> Result<Vec<(String, T)>, CaseError> {
    let invalid = |path: &Path, message: String| CaseError::Invalid { path: path.to_path_buf(), message };
    let entries = std::fs::read_dir(dir).map_err(|e| invalid(dir, e.to_string()))?;
    let mut paths: Vec<PathBuf> =
        entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "json")).collect();
    paths.sort();
    if paths.is_empty() {
        return Err(invalid(dir, "no *.json cases".into()));
    }
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).map_err(|e| invalid(&p, e.to_string()))?;
            let case: T = serde_json::from_str(&text).map_err(|e| invalid(&p, e.to_string()))?;
            let name = p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            Ok((name, case))
        })
        .collect()
}

impl CaseRecord {
    pub(crate) fn record(&self, index: usize) -> Result<Record, String> {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.decode(s).map_err(|e| format!("base64: {e}"));
        let payload = match (&self.payload, &self.payload_base64, &self.payload_repeat) {
            (Some(t), None, None) => t.as_bytes().to_vec(),
            (None, Some(b), None) => b64(b)?,
            (None, None, Some(r)) => vec![r.byte; r.count],
            (None, None, None) => Vec::new(),
            _ => return Err(format!("record {index}: give one of payload, payload_base64, payload_repeat")),
        };
        let position = match &self.position {
            None => Position::File { path: "case".into(), generation: 0, offset: index as u64 },
            Some(p) => parse_position(p).ok_or_else(|| format!("record {index}: position {p:?}"))?,
        };
        let key = match (&self.key, &self.key_base64, &self.key_repeat) {
            (Some(t), None, None) => Some(t.as_bytes().to_vec()),
            (None, Some(b), None) => Some(b64(b)?),
            (None, None, Some(r)) => Some(vec![r.byte; r.count]),
            (None, None, None) => None,
            _ => return Err(format!("record {index}: give one of key, key_base64, key_repeat")),
        };
        let mut headers: Vec<(String, Vec<u8>)> =
            self.headers.iter().map(|(k, v)| (k.clone(), v.as_bytes().to_vec())).collect();
        if let Some(h) = &self.header_repeat {
            headers.extend((0..h.times).map(|_| (h.name.clone(), vec![h.byte; h.count])));
        }
        Ok(Record {
            payload: payload.into(),
            key: key.map(Into::into),
            headers,
            source_timestamp: self.source_timestamp,
            position,
            event_id: self.event_id.as_deref().map(EventId::from),
            timestamp: self.timestamp,
            sinks: None,
        })
    }
}

fn parse_position(s: &str) -> Option<Position> {
    if let Some(rest) = s.strip_prefix("kafka:") {
        let (topic, rest) = rest.rsplit_once('/')?;
        let (partition, offset) = rest.split_once('@')?;
        return Some(Position::Kafka {
            topic: topic.into(),
            partition: partition.parse().ok()?,
            offset: offset.parse().ok()?,
        });
    }
    let rest = s.strip_prefix("file:")?;
    let (path, rest) = rest.rsplit_once('#')?;
    let (generation, offset) = rest.split_once('@')?;
    Some(Position::File { path: path.into(), generation: generation.parse().ok()?, offset: offset.parse().ok()? })
}

/// Where an outcome differs from what the case expects; `None` when it
/// matches.
pub(crate) fn compare(expected: &[ExpectOutcome], got: &[Outcome]) -> Option<String> {
    if expected.len() != got.len() {
        return Some(format!("{} outcomes for {} expected", got.len(), expected.len()));
    }
    for (i, (e, g)) in expected.iter().zip(got).enumerate() {
        let shown = || show(g);
        let bad = match (e, g) {
            (ExpectOutcome::Reject(want), Outcome::Reject(r)) => {
                (want != r).then(|| format!("reason {r:?}, expected {want:?}"))
            }
            (ExpectOutcome::Drop(want) | ExpectOutcome::DropContains(want), Outcome::Drop(r))
            | (ExpectOutcome::Quarantine(want) | ExpectOutcome::RejectContains(want), Outcome::Reject(r)) => {
                (!r.contains(want.as_str())).then(|| format!("reason {r:?} does not contain {want:?}"))
            }
            (ExpectOutcome::Event(want), Outcome::Emit(events)) => match events.as_slice() {
                [ev] => want
                    .check(ev.id.as_deref(), ev.timestamp, &ev.body)
                    .and_then(|()| want.check_route(ev.sinks.as_deref()))
                    .err(),
                _ => Some(format!("{} events, expected 1", events.len())),
            },
            (ExpectOutcome::Events(want) | ExpectOutcome::Emit(want), Outcome::Emit(events)) => {
                if want.len() != events.len() {
                    Some(format!("{} events, expected {}", events.len(), want.len()))
                } else {
                    want.iter().zip(events).enumerate().find_map(|(k, (w, ev))| {
                        w.check(ev.id.as_deref(), ev.timestamp, &ev.body)
                            .and_then(|()| w.check_route(ev.sinks.as_deref()))
                            .err()
                            .map(|why| format!("event {k}: {why}"))
                    })
                }
            }
            _ => Some(format!("got {}", shown())),
        };
        if let Some(why) = bad {
            return Some(format!("record {i}: {why}"));
        }
    }
    None
}

fn show(o: &Outcome) -> String {
    match o {
        Outcome::Emit(evs) => format!("emit of {} events", evs.len()),
        Outcome::Keep { .. } => "emit of 1 event (the record kept)".into(),
        Outcome::Drop(r) => format!("drop ({r})"),
        Outcome::Reject(r) => format!("reject ({r})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Event;

    /// One way to write records for plugin and config cases: a line as
    /// text, or a message with its key and headers, under `records` or
    /// `input`; a misspelt key names its record.
    #[test]
    fn a_plugin_case_takes_records_as_a_config_case_writes_them() {
        let short: Case = serde_json::from_str(
            r#"{"now": "2026-12-01T12:00:00Z", "input": ["a", {"payload": "b", "key": "k", "headers": [["h", "v"]]}],
                "expect": {"outcomes": []}}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let long: Case = serde_json::from_str(
            r#"{"records": [{"payload": "a"}, {"payload": "b", "key_base64": "aw==", "headers": [["h", "v"]]}],
                "expect": {"outcomes": []}}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let records = |c: &Case| -> Vec<Record> {
            c.records.iter().enumerate().map(|(i, r)| r.record(i).unwrap_or_else(|e| panic!("{e}"))).collect()
        };
        assert_eq!(records(&short), records(&long));
        assert_eq!(records(&short)[1].key.as_deref(), Some(b"k".as_slice()));
        assert_eq!(parse_now(short.now.as_deref()), Ok(Some(1_796_126_400_000_000_000)));
        let typo = serde_json::from_str::<Case>(r#"{"input": ["a", {"paylod": "b"}], "expect": {"outcomes": []}}"#)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(typo.contains("records[1]") && typo.contains("paylod"), "{typo}");
        let both = CaseRecord { key: Some("k".into()), key_base64: Some("aw==".into()), ..CaseRecord::default() };
        assert!(both.record(0).is_err_and(|e| e.contains("give one of key, key_base64, key_repeat")));
    }

    #[test]
    fn cases_parse_and_compare() {
        let case: Case = serde_json::from_str(
            r#"{"records":[{"payload":"a"},{"payload_base64":"/w=="},{"payload_repeat":{"byte":97,"count":3},"position":"kafka:t/2@9"}],
                "expect":{"outcomes":[{"emit":[{"id":"x","body":{"a":1,"b":2}}]},{"reject_contains":"UTF-8"},{"drop":"d"}]}}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let records: Vec<Record> =
            case.records.iter().enumerate().map(|(i, r)| r.record(i).unwrap_or_else(|e| panic!("{e}"))).collect();
        assert_eq!(records[1].payload, [0xffu8].as_slice());
        assert_eq!(records[2].payload, b"aaa".as_slice());
        assert_eq!(records[2].position, Position::Kafka { topic: "t".into(), partition: 2, offset: 9 });
        let want = case.expect.outcomes().unwrap_or_else(|e| panic!("{e}"));
        let good = vec![
            Outcome::Emit(vec![Event {
                id: Some("x".into()),
                timestamp: None,
                body: br#"{"b": 2, "a": 1}"#.as_slice().into(),
                sinks: None,
            }]),
            Outcome::Reject("not valid UTF-8".into()),
            Outcome::Drop("d".into()),
        ];
        assert_eq!(compare(want, &good), None);
        let mut bad = good.clone();
        bad[0] = Outcome::Emit(vec![Event::new(Some("x".into()), None, br#"{"a":1}"#.as_slice().into())]);
        assert!(compare(want, &bad).is_some_and(|w| w.starts_with("record 0: event 0: body")));
        bad[0] = Outcome::Drop("x".into());
        assert_eq!(compare(want, &bad).as_deref(), Some("record 0: got drop (x)"));
        assert!(compare(want, &good[..2]).is_some());

        // The same case in the words of config cases: the same verdicts,
        // and no older word to name.
        let same: Case = serde_json::from_str(
            r#"{"input":["a"],"expect":[{"event":{"id":"x","body":{"a":1,"b":2}}},{"quarantine":"UTF-8"},{"drop":"d"}]}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let same_want = same.expect.outcomes().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(compare(same_want, &good), None);
        assert!(same.old_words().is_empty());
        assert_eq!(
            case.old_words(),
            [
                ("{\"outcomes\": [...]}", "a list, one per record"),
                ("emit", "event or events"),
                ("reject_contains", "quarantine")
            ]
        );
        // `event` is exactly one; `drop` is a part of the reason.
        assert!(compare(same_want, &[good[0].clone(), good[1].clone(), Outcome::Drop("a d b".into())]).is_none());
        let two = Outcome::Emit(vec![Event::new(None, None, b"{}".as_slice().into()); 2]);
        assert_eq!(compare(&same_want[..1], &[two]).as_deref(), Some("record 0: 2 events, expected 1"));
        // A misspelt outcome is named by its place.
        let typo = serde_json::from_str::<Case>(r#"{"expect":[{"event":{}},{"quarantin":"x"}]}"#)
            .map(|_| ())
            .map_err(|e| e.to_string());
        assert!(typo.as_ref().is_err_and(|e| e.contains("expect[1]") && e.contains("quarantin")), "{typo:?}");
        let refused: Case = serde_json::from_str(r#"{"expect":{"init_error":"no"}}"#).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(refused.expect.outcomes().err(), Some("no"));
    }
}
