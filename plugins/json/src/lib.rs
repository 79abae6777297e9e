//! `json`: JSON lines in, the same JSON object out, with its event id and
//! timestamp read from configured fields.
//!
//! ```toml
//! id_field = "event_id"            # optional: dotted path of the producer's id
//! timestamp_field = "ts"           # optional: dotted path of the event time
//! timestamp_format = "rfc3339"     # see sluice_guest::time (default rfc3339)
//! # a local time written without a zone names it in a table:
//! # timestamp_format = { format = "%Y-%m-%d %H:%M:%S", zone = "America/Los_Angeles" }
//! require_id = false               # reject records without an id (default false)
//! ```
//!
//! The body is passed through byte for byte (no re-serialization): the
//! plugin only validates that it is one JSON object.

use serde::Deserialize;
use sluice_guest::{Event, Outcome, Plugin, Record, export_plugin, json, time::Format};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Json {
    #[serde(default)]
    id_field: Option<String>,
    #[serde(default)]
    timestamp_field: Option<String>,
    #[serde(default = "Format::rfc3339")]
    timestamp_format: Format,
    #[serde(default)]
    require_id: bool,
}

impl Plugin for Json {
    fn setup(&mut self) -> Result<(), String> {
        if self.require_id && self.id_field.is_none() {
            return Err("require_id = true needs id_field".into());
        }
        if self.timestamp_field.is_some() {
            let f = &self.timestamp_format;
            for notice in [f.zone_notice(), f.year_notice()].into_iter().flatten() {
                sluice_guest::log(sluice_guest::Level::Warn, &format!("timestamp_format: {notice}"));
            }
        }
        Ok(())
    }

    fn process(&mut self, record: &Record) -> Outcome {
        // Validates the whole object but parses only the fields read below.
        let object = match json::RawObject::parse(trim_line_end(&record.payload)) {
            Ok(o) => o,
            Err(reason) => return Outcome::reject(reason),
        };
        let mut id = None;
        if let Some(field) = &self.id_field {
            // A string id is read without a `Value`; numbers and booleans
            // (rarer) through one.
            id = match object.get_str(field) {
                Some(s) => (!s.is_empty()).then(|| s.into_owned()),
                None => object.get(field).as_ref().and_then(json::as_id),
            };
            if id.is_none() && self.require_id {
                return Outcome::reject(format!("id field {field:?} is missing or not a scalar"));
            }
        }
        let mut timestamp = None;
        if let Some(field) = &self.timestamp_field {
            let now = || if self.timestamp_format.needs_year() { sluice_guest::now() } else { 0 };
            let parsed = match object.get_str(field) {
                Some(text) => Some(self.timestamp_format.parse(&text, now())),
                None => object.get(field).map(|value| self.timestamp_format.parse_json(&value, now())),
            };
            match parsed {
                Some(Ok(ns)) => timestamp = Some(ns),
                Some(Err(e)) => return Outcome::reject(format!("timestamp field {field:?}: {e}")),
                None => {}
            }
        }
        let body = trim_line_end(&record.payload);
        if body.len() == record.payload.len() {
            // The body is the payload: kept, so nothing is copied.
            Outcome::Keep { id, timestamp }
        } else {
            Outcome::emit(Event { id, timestamp, body: body.to_vec() })
        }
    }
}

fn trim_line_end(b: &[u8]) -> &[u8] {
    let mut end = b.len();
    while end > 0 && matches!(b[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    &b[..end]
}

export_plugin!(Json);

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_guest::configure;

    fn run(config: &str, line: &str) -> Outcome {
        let mut p = configure::<Json>(config).unwrap_or_else(|e| panic!("{e}"));
        p.process(&Record::from_line(line))
    }

    #[test]
    fn emits_the_object_with_id_and_timestamp() {
        let cfg = r#"{"id_field":"meta.id","timestamp_field":"ts"}"#;
        match run(cfg, "{\"meta\":{\"id\":7},\"ts\":\"2024-05-01T12:00:00Z\"}\r\n") {
            Outcome::Emit(ev) => {
                assert_eq!(ev[0].id.as_deref(), Some("7"));
                assert_eq!(ev[0].timestamp, Some(1_714_564_800_000_000_000));
                assert_eq!(ev[0].body, br#"{"meta":{"id":7},"ts":"2024-05-01T12:00:00Z"}"#);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_payload_without_a_line_end_is_kept_not_copied() {
        let cfg = r#"{"id_field":"id","timestamp_field":"ts"}"#;
        let out = run(cfg, r#"{"id":"a1","ts":"2024-05-01T12:00:00Z"}"#);
        assert_eq!(out, Outcome::Keep { id: Some("a1".into()), timestamp: Some(1_714_564_800_000_000_000) });
        // Neither field configured, or absent: kept with nothing set.
        assert_eq!(run("{}", r#"{"x":1}"#), Outcome::Keep { id: None, timestamp: None });
        assert_eq!(run(cfg, r#"{"x":1}"#), Outcome::Keep { id: None, timestamp: None });
    }

    #[test]
    fn rejects_what_is_not_an_object_and_bad_timestamps() {
        assert!(matches!(run("{}", "[1,2]"), Outcome::Reject(r) if r.contains("not an object")));
        assert!(matches!(run("{}", "{\"a\":"), Outcome::Reject(r) if r.contains("not valid JSON")));
        let r = run(r#"{"timestamp_field":"ts"}"#, r#"{"ts":"yesterday"}"#);
        assert!(matches!(&r, Outcome::Reject(r) if r.contains("\"ts\"") && r.contains("yesterday")), "{r:?}");
        let r = run(r#"{"id_field":"id","require_id":true}"#, r#"{"x":1}"#);
        assert!(matches!(&r, Outcome::Reject(r) if r.contains("\"id\"")), "{r:?}");
    }

    #[test]
    fn config_errors_name_the_key() {
        let e = configure::<Json>(r#"{"timestamp_format":"dd/mm"}"#).err().unwrap_or_default();
        assert!(e.contains("dd/mm"), "{e}");
        let e = configure::<Json>(r#"{"require_id":true}"#).err().unwrap_or_default();
        assert!(e.contains("id_field"), "{e}");
    }
}
