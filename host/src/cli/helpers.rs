//! `sluice plugin helpers`: the host's helpers (`sluice:plugin/helpers`)
//! for a plugin's unit tests outside the component. The Python SDK (its
//! `TimeFormat` and `Patterns` in plain Python) and the JavaScript SDK
//! (every helper, under `node --import ./sluice-native.mjs`) send their
//! calls here, so a format, a zone or a pattern answers in a unit test
//! exactly as in the host: the same code, not a port kept in step.
//!
//! A native run's outcomes are judged here too (`judge`): the host's own
//! output rules, so a unit test rejects what the pipeline would.
//!
//! One JSON request per line on stdin, one answer per line on stdout,
//! `{"ok": …}` or `{"err": "why"}`, until stdin ends. Nanoseconds travel
//! as decimal strings (JavaScript's numbers hold 53 bits) and bytes as
//! base64. A compiled format or pattern set is kept by its spec, so a
//! test that parses many lines compiles once, as in the host.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::io::{BufRead, Write};

use anyhow::{Context, Result};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::plugin::helpers::{self, Patterns, TimeFormat};

/// One call, as the SDKs write it.
#[derive(Deserialize)]
#[serde(tag = "call", rename_all = "kebab-case", deny_unknown_fields)]
enum Call {
    /// A format's name, pattern or JSON table: `null`, or why not.
    TimeCompile {
        spec: String,
    },
    TimeParse {
        spec: String,
        text: String,
        now: String,
    },
    PatternsCompile {
        patterns: Vec<String>,
    },
    /// `null`, or `{"pattern": i, "captures": [[name, text], …]}`.
    PatternsMatch {
        patterns: Vec<String>,
        line: String,
    },
    /// The pairs as one JSON object's text.
    LogfmtObject {
        line_b64: String,
    },
    /// Each path's JSON text, or `null`.
    JsonGet {
        payload_b64: String,
        paths: Vec<String>,
    },
    /// `null`, or why the payload is not one JSON object.
    JsonObjectCheck {
        payload_b64: String,
    },
    FormatRfc3339 {
        nanos: String,
    },
    /// A native run's outcome judged by the host's output rules
    /// (`plugin/output_rules.rs`, default limits): `null` when the host
    /// would take it, else the reason it would reject its record with.
    Judge {
        payload_b64: String,
        events: Vec<JudgedEvent>,
    },
}

/// One emitted event, as an SDK's native run describes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JudgedEvent {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    timestamp: Option<String>,
    /// The record goes on unchanged: its body is the payload.
    #[serde(default)]
    keep: bool,
    #[serde(default)]
    body_b64: String,
    #[serde(default)]
    sinks: Option<String>,
}

/// The compiled specs of one session. Bounded like an instance's, so that
/// a test that compiles in a loop is told as the host would tell it.
#[derive(Default)]
struct Compiled {
    formats: HashMap<String, TimeFormat>,
    patterns: HashMap<Vec<String>, Patterns>,
}

impl Compiled {
    fn format(&mut self, spec: &str) -> Result<&TimeFormat, String> {
        let full = self.formats.len() >= helpers::MAX_TIME_FORMATS;
        match self.formats.entry(spec.to_string()) {
            Entry::Occupied(e) => Ok(e.into_mut()),
            Entry::Vacant(_) if full => Err(format!("more than {} time formats", helpers::MAX_TIME_FORMATS)),
            Entry::Vacant(e) => Ok(e.insert(helpers::compile_time_format(spec)?)),
        }
    }

    fn patterns(&mut self, patterns: &[String]) -> Result<&Patterns, String> {
        let full = self.patterns.len() >= helpers::MAX_PATTERN_SETS;
        match self.patterns.entry(patterns.to_vec()) {
            Entry::Occupied(e) => Ok(e.into_mut()),
            Entry::Vacant(_) if full => Err(format!("more than {} pattern sets", helpers::MAX_PATTERN_SETS)),
            Entry::Vacant(e) => Ok(e.insert(helpers::compile_patterns(patterns)?)),
        }
    }
}

fn nanos(text: &str, key: &str) -> Result<i64, String> {
    text.parse().map_err(|_| format!("{key}: {text:?} is not a whole number of nanoseconds"))
}

fn bytes(b64: &str, key: &str) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD.decode(b64).map_err(|e| format!("{key}: not base64 ({e})"))
}

fn answer(compiled: &mut Compiled, call: Call) -> Result<Value, String> {
    Ok(match call {
        Call::TimeCompile { spec } => {
            compiled.format(&spec)?;
            Value::Null
        }
        Call::TimeParse { spec, text, now } => {
            let now = nanos(&now, "now")?;
            json!(compiled.format(&spec)?.parse(&text, now)?.to_string())
        }
        Call::PatternsCompile { patterns } => {
            compiled.patterns(&patterns)?;
            Value::Null
        }
        Call::PatternsMatch { patterns, line } => match compiled.patterns(&patterns)?.first_match(&line) {
            None => Value::Null,
            Some((pattern, captures)) => json!({ "pattern": pattern, "captures": captures }),
        },
        Call::LogfmtObject { line_b64 } => json!(helpers::logfmt_object(&bytes(&line_b64, "line_b64")?)),
        Call::JsonGet { payload_b64, paths } => json!(helpers::json_get(&bytes(&payload_b64, "payload_b64")?, &paths)?),
        Call::JsonObjectCheck { payload_b64 } => {
            json!(helpers::json_object_check(&bytes(&payload_b64, "payload_b64")?))
        }
        Call::FormatRfc3339 { nanos: n } => json!(sluice_guest::time::format_rfc3339(nanos(&n, "nanos")?)),
        Call::Judge { payload_b64, events } => json!(judge(&bytes(&payload_b64, "payload_b64")?, events)?),
    })
}

/// The rule the host's output check finds broken, as it would run on this
/// record's outcome; a lone kept event is checked as the host checks a
/// `keep` (its payload is the body, checked once).
fn judge(payload: &[u8], events: Vec<JudgedEvent>) -> Result<Option<String>, String> {
    use sluice_guest::output_rules::OutputLimits;

    use crate::plugin::output_rules::breach;
    use crate::record::Outcome;
    let payload = bytes::Bytes::copy_from_slice(payload);
    let sinks = |s: Option<String>| s.map(bytes::Bytes::from);
    let outcome = match <[JudgedEvent; 1]>::try_from(events) {
        Ok([only]) if only.keep => Outcome::Keep {
            id: only.id.map(Into::into),
            timestamp: only.timestamp.as_deref().map(|t| nanos(t, "timestamp")).transpose()?,
            sinks: sinks(only.sinks),
        },
        Ok([one]) => Outcome::Emit(vec![event(one, &payload)?]),
        Err(many) => Outcome::Emit(many.into_iter().map(|e| event(e, &payload)).collect::<Result<_, _>>()?),
    };
    Ok(breach(&OutputLimits::default(), &outcome, payload.len(), Some(&payload)))
}

fn event(e: JudgedEvent, payload: &bytes::Bytes) -> Result<crate::record::Event, String> {
    Ok(crate::record::Event {
        id: e.id.map(Into::into),
        timestamp: e.timestamp.as_deref().map(|t| nanos(t, "timestamp")).transpose()?,
        body: if e.keep { payload.clone() } else { bytes(&e.body_b64, "body_b64")?.into() },
        sinks: e.sinks.map(bytes::Bytes::from),
    })
}

/// Answer the lines of `input` on `output` until `input` ends.
pub(crate) fn serve(input: impl BufRead, mut output: impl Write) -> Result<()> {
    let mut compiled = Compiled::default();
    for (n, line) in input.lines().enumerate() {
        let line = line.context("read a request from stdin")?;
        if line.trim().is_empty() {
            continue;
        }
        let result = serde_json::from_str::<Call>(&line)
            .map_err(|e| format!("request {}: {e}", n + 1))
            .and_then(|call| answer(&mut compiled, call));
        let reply = match result {
            Ok(v) => json!({ "ok": v }),
            Err(why) => json!({ "err": why }),
        };
        writeln!(output, "{reply}").context("write an answer to stdout")?;
        output.flush().context("write an answer to stdout")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(requests: &[Value]) -> Vec<Value> {
        let input: String = requests.iter().map(|r| format!("{r}\n")).collect();
        let mut out = Vec::new();
        serve(input.as_bytes(), &mut out).unwrap_or_else(|e| panic!("{e}"));
        String::from_utf8_lossy(&out)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}")))
            .collect()
    }

    #[test]
    fn answers_as_the_host_answers_a_plugin() {
        let got = session(&[
            json!({"call": "time-parse", "spec": r#"{"format": "%Y-%m-%d %H:%M:%S", "zone": "Europe/Berlin"}"#,
                   "text": "2026-12-01 13:00:00", "now": "0"}),
            json!({"call": "time-parse", "spec": "rfc3339", "text": "yesterday", "now": "0"}),
            json!({"call": "patterns-match", "patterns": ["^%{INT:pid} %{LOGLEVEL:level}"], "line": "42 WARN x"}),
            json!({"call": "patterns-match", "patterns": ["^%{INT:pid} %{LOGLEVEL:level}"], "line": "no"}),
            json!({"call": "patterns-compile", "patterns": ["%{NOPE:x}"]}),
            json!({"call": "json-get", "payload_b64": "eyJhIjp7ImIiOjF9fQ==", "paths": ["a.b", "c"]}),
            json!({"call": "format-rfc3339", "nanos": "1796126400000000001"}),
            json!({"call": "time-parse", "spec": "rfc3339"}),
        ]);
        // 13:00 in Berlin in December is 12:00 UTC.
        assert_eq!(got[0], json!({"ok": "1796126400000000000"}));
        assert!(got[1]["err"].as_str().is_some_and(|e| e.contains("yesterday")), "{}", got[1]);
        assert_eq!(got[2], json!({"ok": {"pattern": 0, "captures": [["pid", "42"], ["level", "WARN"]]}}));
        assert_eq!(got[3], json!({"ok": null}));
        assert!(got[4]["err"].as_str().is_some_and(|e| e.contains("NOPE")), "{}", got[4]);
        assert_eq!(got[5], json!({"ok": ["1", null]}));
        assert_eq!(got[6], json!({"ok": "2026-12-01T12:00:00.000000001Z"}));
        assert!(got[7]["err"].as_str().is_some_and(|e| e.contains("request 8") && e.contains("text")), "{}", got[7]);
    }

    /// A native run's outcomes meet the rules the host applies to a
    /// plugin's: the same function, not a port.
    #[test]
    fn judges_an_outcome_as_the_host_judges_a_plugins() {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let got = session(&[
            json!({"call": "judge", "payload_b64": b64("x"), "events": [{"id": "a", "body_b64": b64("{\"a\":1}")}]}),
            json!({"call": "judge", "payload_b64": b64("x"), "events": [{"id": "", "body_b64": b64("{}")}]}),
            json!({"call": "judge", "payload_b64": b64("x"), "events": [{"body_b64": b64("[1]")}]}),
            json!({"call": "judge", "payload_b64": b64("not json"), "events": [{"keep": true}]}),
            json!({"call": "judge", "payload_b64": b64("{}"), "events": [{"keep": true, "id": "k"}]}),
            json!({"call": "judge", "payload_b64": b64("x"), "events": [{"id": "y".repeat(300), "body_b64": b64("{}")}]}),
            json!({"call": "judge", "payload_b64": b64("x"), "events": []}),
        ]);
        assert_eq!(got[0], json!({"ok": null}));
        assert!(got[1]["ok"].as_str().is_some_and(|r| r.starts_with("event 0: the id is empty")), "{}", got[1]);
        assert!(got[2]["ok"].as_str().is_some_and(|r| r.contains("JSON array")), "{}", got[2]);
        assert!(got[3]["ok"].as_str().is_some_and(|r| r.contains("not JSON")), "{}", got[3]);
        assert_eq!(got[4], json!({"ok": null}));
        assert!(got[5]["ok"].as_str().is_some_and(|r| r.contains("max_id_bytes")), "{}", got[5]);
        assert_eq!(got[6], json!({"ok": null}));
    }
}
