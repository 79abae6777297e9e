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
//!
//! One JSON pass per record, in the host: the plugin asks for its payloads
//! on demand and, per batch, for the two fields of every record at once
//! (`sluice_guest::json_get_batch`); the host validates each payload as it
//! reads them and does not parse a kept payload again. The plugin itself
//! takes in only the fields' text, and parses the timestamps.

use std::borrow::Cow;

use serde::Deserialize;
use sluice_guest::{Event, JsonFields, Outcome, Plugin, Record, export_plugin, json, time::Format, trim_line_end};

/// JSON lines in, the same JSON object out, with its event id and time
/// read from the fields named here.
#[derive(Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Json {
    /// The field (a dotted path, `meta.id`) whose value is the event id: a
    /// producer's id, the one that survives a re-send as a new message.
    /// A string, or a number or boolean as written. Unset, or absent from
    /// a record: the id comes from the record's source position.
    #[serde(default)]
    id_field: Option<String>,
    /// The field (a dotted path) holding the event's time, read with
    /// `timestamp_format`. A record whose time does not parse is rejected,
    /// naming the field.
    #[serde(default)]
    timestamp_field: Option<String>,
    /// How `timestamp_field` is written: a named format (`rfc3339`,
    /// `epoch_ms`, …), a pattern of items, or a table with its zone and
    /// year (the formats and items: below).
    #[cfg_attr(feature = "schema", schemars(default = "default_format_name"))]
    #[serde(default = "Format::rfc3339")]
    timestamp_format: Format,
    /// Reject a record without an id in `id_field` (into the quarantine)
    /// instead of taking its position's.
    #[serde(default)]
    require_id: bool,
}

#[cfg(feature = "schema")]
fn default_format_name() -> &'static str {
    "rfc3339"
}

/// The config's JSON Schema, from the type itself (the book's reference).
#[cfg(feature = "schema")]
pub fn config_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Json)).unwrap_or_default()
}

/// What one record holds of what the plugin reads.
struct Read<'a> {
    id: Option<Cow<'a, [u8]>>,
    timestamp: Option<Cow<'a, [u8]>>,
}

impl Json {
    /// The fields this plugin reads, in the order `Read` takes them.
    fn paths(&self) -> Vec<&str> {
        self.id_field.iter().chain(&self.timestamp_field).map(String::as_str).collect()
    }

    /// A record's outcome from its fields' JSON text. `trimmed`: line-end
    /// bytes after the object, which the body leaves out.
    fn decide(&self, record: &Record, read: Read<'_>, trimmed: usize) -> Outcome {
        let mut id = None;
        if let Some(field) = &self.id_field {
            id = read.id.as_deref().and_then(id_of);
            if id.is_none() && self.require_id {
                return Outcome::reject(format!("id field {field:?} is missing or not a scalar"));
            }
        }
        let mut timestamp = None;
        if let (Some(field), Some(text)) = (&self.timestamp_field, read.timestamp.as_deref()) {
            let now = if self.timestamp_format.needs_year() { sluice_guest::now() } else { 0 };
            let parsed = match plain_string(text) {
                Some(s) => self.timestamp_format.parse(s, now).map_err(|e| e.to_string()),
                None => match serde_json::from_slice::<serde_json::Value>(text) {
                    Ok(serde_json::Value::String(s)) => self.timestamp_format.parse(&s, now).map_err(|e| e.to_string()),
                    Ok(value) => self.timestamp_format.parse_json(&value, now).map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                },
            };
            match parsed {
                Ok(ns) => timestamp = Some(ns),
                Err(e) => return Outcome::reject(format!("timestamp field {field:?}: {e}")),
            }
        }
        if trimmed == 0 {
            // The body is the payload: kept, so nothing is copied.
            Outcome::Keep { id, timestamp }
        } else {
            let payload = record.bytes();
            let body = &payload[..payload.len().saturating_sub(trimmed)];
            Outcome::emit(Event { id, timestamp, body: body.to_vec(), sinks: Vec::new() })
        }
    }

    /// Record `i` of a batch whose fields the host read.
    fn outcome_from(&self, record: &Record, fields: &JsonFields, i: usize) -> Outcome {
        let trimmed = match fields.object(i) {
            Ok(t) => t,
            Err(reason) => return Outcome::reject(reason),
        };
        let mut at = 0..;
        let mut next = |wanted: bool| wanted.then(|| at.next().and_then(|k| fields.value(i, k))).flatten();
        let read = Read {
            id: next(self.id_field.is_some()).map(Cow::Borrowed),
            timestamp: next(self.timestamp_field.is_some()).map(Cow::Borrowed),
        };
        self.decide(record, read, trimmed)
    }
}

/// A string's text when it is written with no escape: read in place.
fn plain_string(text: &[u8]) -> Option<&str> {
    match text {
        [b'"', inner @ .., b'"'] if !inner.contains(&b'\\') => std::str::from_utf8(inner).ok(),
        _ => None,
    }
}

/// An id from its JSON text: a non-empty string, or a number or boolean
/// as written; none for anything else.
fn id_of(text: &[u8]) -> Option<String> {
    if let Some(s) = plain_string(text) {
        return (!s.is_empty()).then(|| s.to_string());
    }
    let value = serde_json::from_slice::<serde_json::Value>(text).ok()?;
    match &value {
        serde_json::Value::String(s) => (!s.is_empty()).then(|| s.clone()),
        other => json::as_id(other),
    }
}

impl Plugin for Json {
    fn setup(&mut self) -> Result<(), String> {
        // Its fields come from the host, which reads the payloads where
        // they are: none is copied into the plugin.
        sluice_guest::payloads_on_demand();
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

    /// One record alone, natively (unit tests, the native side of
    /// `benches/plugin_chain`): the same reading, over its own payload. In
    /// a component the host calls `process_batch`, a fault's re-run with a
    /// batch of one.
    fn process(&mut self, record: &Record) -> Outcome {
        match sluice_guest::json_get_batch(std::slice::from_ref(record), &self.paths()) {
            Ok(fields) => self.outcome_from(record, &fields, 0),
            Err(_) => self.parse_here(record),
        }
    }

    /// Every record's fields from the host in one call per batch.
    fn process_batch(&mut self, batch: &[Record]) -> Vec<Outcome> {
        match sluice_guest::json_get_batch(batch, &self.paths()) {
            Ok(fields) => batch.iter().enumerate().map(|(i, r)| self.outcome_from(r, &fields, i)).collect(),
            // Past the memory limit (a batch of huge records): each record
            // parsed here instead.
            Err(_) => batch.iter().map(|r| self.parse_here(r)).collect(),
        }
    }
}

impl Json {
    /// A record parsed in the plugin, as before the host read fields:
    /// what is left when a batch's answer would not fit.
    fn parse_here(&self, record: &Record) -> Outcome {
        let payload = record.bytes();
        let body = trim_line_end(&payload);
        let object = match json::RawObject::parse(body) {
            Ok(o) => o,
            Err(reason) => return Outcome::reject(reason),
        };
        let read = Read {
            id: self.id_field.as_deref().and_then(|f| object.get_raw(f)),
            timestamp: self.timestamp_field.as_deref().and_then(|f| object.get_raw(f)),
        };
        let trimmed = payload.len() - body.len();
        self.decide(record, read, trimmed)
    }
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
