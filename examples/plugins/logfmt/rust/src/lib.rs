//! logfmt lines in, one JSON object out (see the README beside it).

use serde::Deserialize;
use sluice_guest::{Event, Outcome, Plugin, Record, export_plugin};

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Logfmt {
    #[serde(default)]
    id_field: Option<String>,
}

/// The pairs of a logfmt line, in order; a bare key maps to `true`.
pub fn parse(line: &str) -> serde_json::Map<String, serde_json::Value> {
    let mut out = serde_json::Map::new();
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        while i < chars.len() && chars[i] == ' ' {
            i += 1;
        }
        let start = i;
        while i < chars.len() && chars[i] != '=' && chars[i] != ' ' {
            i += 1;
        }
        let key: String = chars[start..i].iter().collect();
        if i < chars.len() && chars[i] == '=' {
            i += 1;
            let mut value = String::new();
            if i < chars.len() && chars[i] == '"' {
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' && i + 1 < chars.len() && (chars[i + 1] == '"' || chars[i + 1] == '\\') {
                        i += 1;
                    }
                    value.push(chars[i]);
                    i += 1;
                }
                i += 1;
            } else {
                while i < chars.len() && chars[i] != ' ' {
                    value.push(chars[i]);
                    i += 1;
                }
            }
            if !key.is_empty() {
                out.insert(key, value.into());
            }
        } else if !key.is_empty() {
            out.insert(key, true.into());
        }
    }
    out
}

impl Plugin for Logfmt {
    fn process(&mut self, record: &Record) -> Outcome {
        let line = String::from_utf8_lossy(record.payload);
        let line = line.trim_end_matches(['\r', '\n']);
        if line.trim().is_empty() {
            return Outcome::drop("blank line");
        }
        let pairs = parse(line);
        if pairs.is_empty() {
            return Outcome::reject("no key=value pair in the line");
        }
        // An empty value is no id (the host refuses empty ids).
        let id = self
            .id_field
            .as_ref()
            .and_then(|f| pairs.get(f))
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        let mut event = Event::json(&serde_json::Value::Object(pairs));
        event.id = id;
        Outcome::emit(event)
    }
}

export_plugin!(Logfmt);
