//! `sluice plugin helpers`: the host's helpers (`sluice:plugin/helpers`)
//! for a plugin's unit tests outside the component. The Python SDK (its
//! `TimeFormat` and `Patterns` in plain Python) and the JavaScript SDK
//! (every helper, under `node --import ./sluice-native.mjs`) send their
//! calls here, so a format, a zone or a pattern answers in a unit test
//! exactly as in the host: the same code, not a port kept in step.
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
    })
}

/// Answer the lines of `input` on `output` until `input` ends.
pub fn serve(input: impl BufRead, mut output: impl Write) -> Result<()> {
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
}
