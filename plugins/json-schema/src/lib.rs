//! `json-schema`: JSON records framed for a schema registry (Confluent's
//! wire format: a zero byte, the schema id, then the JSON text), checked
//! against the JSON Schema the registry holds under that id, out as the
//! same JSON objects, with their event id and time read from configured
//! fields as `json` reads them.
//!
//! ```toml
//! [[plugins]]
//! name = "json-schema"
//! path = "plugins/json-schema.wasm"
//! config = { id_field = "event_id", timestamp_field = "ts" }
//! ```
//!
//! The schema comes from the host (`sluice_guest::registry::schema`),
//! compiled once per id and kept. A record that is not valid against its
//! own schema is rejected with the first violations and where they are
//! (`/user/id: "x" is not of type "integer"`). A schema's `$ref` to
//! anything outside itself (another subject, a URL) is not followed: such
//! a schema's records are rejected with the reason.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use sluice_guest::registry::{NOT_FRAMED, framed};
use sluice_guest::time::Format;
use sluice_guest::{Event, Outcome, Plugin, Record, export_plugin, json};

/// The violations a reason names, at most.
const REASONS: usize = 3;

/// JSON records from a schema registry, validated against their schema.
#[derive(Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct JsonSchemaDecoder {
    /// The field (a dotted path, `meta.id`) whose value is the event id.
    /// Unset, or absent from a record: the id comes from the record's
    /// source position.
    #[serde(default)]
    id_field: Option<String>,
    /// The field (a dotted path) holding the event's time, read with
    /// `timestamp_format`.
    #[serde(default)]
    timestamp_field: Option<String>,
    /// How `timestamp_field` is written (`rfc3339`, `epoch_ms`, …).
    #[cfg_attr(feature = "schema", schemars(default = "default_format_name"))]
    #[serde(default = "Format::rfc3339")]
    timestamp_format: Format,
    /// Reject a record without an id in `id_field` instead of taking its
    /// position's.
    #[serde(default)]
    require_id: bool,
    /// Validators by schema id, compiled once (or why they do not).
    #[serde(skip)]
    validators: HashMap<u32, Result<Arc<jsonschema::Validator>, String>>,
}

#[cfg(feature = "schema")]
fn default_format_name() -> &'static str {
    "rfc3339"
}

/// The config's JSON Schema, from the type itself (the book's reference).
#[cfg(feature = "schema")]
pub fn config_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(JsonSchemaDecoder)).unwrap_or_default()
}

impl Plugin for JsonSchemaDecoder {
    fn setup(&mut self) -> Result<(), String> {
        if self.require_id && self.id_field.is_none() {
            return Err("require_id = true needs id_field".into());
        }
        Ok(())
    }

    fn process(&mut self, record: &Record) -> Outcome {
        let payload = record.bytes();
        let Some((id, text)) = framed(&payload) else {
            return Outcome::reject(NOT_FRAMED);
        };
        let validator = match self.validator(id) {
            Ok(v) => v,
            Err(reason) => return Outcome::reject(reason),
        };
        let value: Value = match serde_json::from_slice(text) {
            Ok(v @ Value::Object(_)) => v,
            Ok(other) => {
                return Outcome::reject(format!("schema id {id}: {} is not a JSON object", json::kind(&other)));
            }
            Err(e) => return Outcome::reject(format!("schema id {id}: not valid JSON: {e}")),
        };
        let broken: Vec<String> = validator
            .iter_errors(&value)
            .take(REASONS)
            .map(|e| {
                let at = e.instance_path().to_string();
                format!("{}: {e}", if at.is_empty() { "/" } else { &at })
            })
            .collect();
        if !broken.is_empty() {
            return Outcome::reject(format!("schema id {id}: {}", broken.join("; ")));
        }
        self.event(value, text, id)
    }
}

/// The schemas a registry's references give, for the `$ref`s the
/// validator follows: a reference's name is the whole URI, or its last
/// part (a relative `$ref` is resolved against the schema's base URI
/// first). Nothing is fetched: a plugin has no network.
struct Referenced(Vec<(String, Value)>);

impl jsonschema::Retrieve for Referenced {
    fn retrieve(&self, uri: &jsonschema::Uri<String>) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        let uri = uri.as_str();
        self.0
            .iter()
            .find(|(name, _)| uri == name || uri.strip_suffix(name.as_str()).is_some_and(|rest| rest.ends_with('/')))
            .map(|(_, value)| value.clone())
            .ok_or_else(|| format!("{uri} is not among the schema's references").into())
    }
}

impl JsonSchemaDecoder {
    /// The validator of schema `id`, compiled at its first record.
    fn validator(&mut self, id: u32) -> Result<Arc<jsonschema::Validator>, String> {
        self.validators
            .entry(id)
            .or_insert_with(|| {
                let text = sluice_guest::registry::schema_text(id, "JSON")?;
                let schema: Value =
                    serde_json::from_str(&text).map_err(|e| format!("schema id {id} is not JSON: {e}"))?;
                let mut referenced = Vec::new();
                for r in sluice_guest::registry::references(id)? {
                    let value = serde_json::from_str(&r.text)
                        .map_err(|e| format!("schema id {id}: its reference {:?} is not JSON: {e}", r.name))?;
                    referenced.push((r.name, value));
                }
                jsonschema::options()
                    .with_retriever(Referenced(referenced))
                    .build(&schema)
                    .map(Arc::new)
                    .map_err(|e| format!("schema id {id} does not compile: {e}"))
            })
            .clone()
    }

    /// The event: the record's JSON text as it came (no re-serialization).
    fn event(&self, value: Value, text: &[u8], schema_id: u32) -> Outcome {
        let fields = json::IdAndTime {
            id_field: self.id_field.as_deref(),
            timestamp_field: self.timestamp_field.as_deref(),
            timestamp_format: &self.timestamp_format,
            require_id: self.require_id,
        };
        let (id, timestamp) = match fields.read(&value) {
            Ok(x) => x,
            Err(reason) => return Outcome::reject(reason),
        };
        let body = sluice_guest::trim_line_end(text).to_vec();
        if body.is_empty() {
            return Outcome::reject(format!("schema id {schema_id}: empty"));
        }
        Outcome::emit(Event { id, timestamp, body, sinks: Vec::new() })
    }
}

export_plugin!(JsonSchemaDecoder);

#[cfg(test)]
mod tests {
    use sluice_guest::registry::native;
    use sluice_guest::testing::run_natively;

    use super::*;

    const SCHEMA: &str = r#"{"type":"object","required":["event_id","ts"],
      "properties":{"event_id":{"type":"string","minLength":1},"ts":{"type":"string","format":"date-time"},
                    "n":{"type":"integer"}}}"#;

    fn framed_json(id: u32, text: &str) -> Vec<u8> {
        let mut v = vec![0];
        v.extend_from_slice(&id.to_be_bytes());
        v.extend_from_slice(text.as_bytes());
        v
    }

    fn registered() {
        native::register(21, "JSON", SCHEMA);
        native::register(22, "AVRO", "\"long\"");
        native::register(23, "JSON", "{\"type\": 12}");
    }

    fn rejected(o: &Outcome) -> String {
        match o {
            Outcome::Reject(r) => r.clone(),
            other => panic!("not rejected: {other:?}"),
        }
    }

    #[test]
    fn a_valid_record_is_its_own_text_with_its_id_and_time() {
        registered();
        let text = r#"{"event_id":"a","ts":"2026-01-01T00:00:00Z","n":3}"#;
        let config = r#"{"id_field":"event_id","timestamp_field":"ts"}"#;
        let out = run_natively::<JsonSchemaDecoder>(config, &[&framed_json(21, text)]).unwrap();
        match &out[0] {
            Outcome::Emit(e) => {
                assert_eq!(e[0].id.as_deref(), Some("a"));
                assert_eq!(e[0].timestamp, Some(1_767_225_600_000_000_000));
                assert_eq!(e[0].body, text.as_bytes());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_ref_to_another_subjects_schema_is_followed() {
        const MONEY: &str = r#"{"type":"object","required":["cents"],"properties":{"cents":{"type":"integer"}}}"#;
        const ORDER: &str =
            r#"{"type":"object","properties":{"event_id":{"type":"string"},"total":{"$ref":"money.json"}}}"#;
        native::register_with_references(24, "JSON", ORDER, &[("money.json", MONEY)]);
        native::register(25, "JSON", ORDER);
        let good = r#"{"event_id":"o-1","total":{"cents":1250}}"#;
        let bad = r#"{"event_id":"o-2","total":{"cents":"a lot"}}"#;
        let out = run_natively::<JsonSchemaDecoder>(
            "{}",
            &[&framed_json(24, good), &framed_json(24, bad), &framed_json(25, good)],
        )
        .unwrap();
        assert!(matches!(&out[0], Outcome::Emit(e) if e[0].body == good.as_bytes()), "{:?}", out[0]);
        assert!(rejected(&out[1]).contains("/total/cents"), "{}", rejected(&out[1]));
        // Without its reference the `$ref` leads nowhere.
        assert!(rejected(&out[2]).contains("schema id 25 does not compile"), "{}", rejected(&out[2]));
    }

    #[test]
    fn what_breaks_its_schema_is_rejected_saying_where() {
        registered();
        let out = run_natively::<JsonSchemaDecoder>(
            "{}",
            &[
                &framed_json(21, r#"{"event_id":"a","ts":"2026-01-01T00:00:00Z","n":"three"}"#),
                &framed_json(21, r#"{"ts":"2026-01-01T00:00:00Z"}"#),
                &framed_json(21, r#"[1]"#),
                &framed_json(21, r#"{"event_id":"#),
                &framed_json(99, r#"{}"#),
                &framed_json(22, r#"{}"#),
                &framed_json(23, r#"{}"#),
                b"{\"plain\":1}",
            ],
        )
        .unwrap();
        assert!(rejected(&out[0]).contains("/n"), "{}", rejected(&out[0]));
        assert!(rejected(&out[1]).contains("event_id"), "{}", rejected(&out[1]));
        assert!(rejected(&out[2]).contains("not a JSON object"), "{}", rejected(&out[2]));
        assert!(rejected(&out[3]).contains("not valid JSON"), "{}", rejected(&out[3]));
        assert!(rejected(&out[4]).contains("schema id 99"), "{}", rejected(&out[4]));
        assert!(rejected(&out[5]).contains("AVRO"), "{}", rejected(&out[5]));
        assert!(rejected(&out[6]).contains("does not compile"), "{}", rejected(&out[6]));
        assert!(rejected(&out[7]).contains("wire format"), "{}", rejected(&out[7]));
    }
}
