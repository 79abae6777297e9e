//! `avro`: records in Avro, framed for a schema registry (Confluent's wire
//! format), out as JSON objects, with their event id and time read from
//! configured fields as `json` reads them.
//!
//! ```toml
//! [[plugins]]
//! name = "avro"
//! path = "plugins/avro.wasm"
//! config = { id_field = "event_id", timestamp_field = "ts" }
//! # evolution: decode every version into the shape of this one
//! # config.reader_schema = '{"type": "record", "name": "Click", "fields": [...]}'
//! ```
//!
//! The writer's schema is the one the record names: its id is read from
//! the payload's header and its text comes from the host
//! (`sluice_guest::registry::schema`), parsed once per id and kept, with
//! the named types it takes from other subjects (schema references,
//! `registry::references`). With a `reader_schema`, every record is
//! resolved into it by Avro's rules: a field the writer lacked takes the
//! reader's default, one the reader lacks is left out, a type promotes
//! (`int` to `long`, `float` to `double`). Without one, each record keeps
//! its writer's shape.

use std::collections::HashMap;
use std::sync::Arc;

use apache_avro::headers::HeaderBuilder;
use apache_avro::types::Value as Avro;
use apache_avro::{GenericSingleObjectReader, Schema};
use serde::Deserialize;
use serde_json::Value;
use sluice_guest::registry::{NOT_FRAMED, framed};
use sluice_guest::time::Format;
use sluice_guest::{Event, Outcome, Plugin, Record, export_plugin};

/// Avro records from a schema registry, decoded to JSON.
#[derive(Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AvroDecoder {
    /// The schema every record is resolved into (Avro's JSON, as text),
    /// for topics whose schema evolves: records written with an older or
    /// newer schema come out in this one's shape. Unset: each record in
    /// its writer's shape.
    #[serde(default)]
    reader_schema: Option<String>,
    /// The field (a dotted path, `meta.id`) whose value is the event id:
    /// a string, a number, an enum symbol or a UUID. Unset, or absent from
    /// a record: the id comes from the record's source position.
    #[serde(default)]
    id_field: Option<String>,
    /// The field (a dotted path) holding the event's time. A field of a
    /// timestamp logical type (`timestamp-millis`, `-micros`, `-nanos`,
    /// and their `local-` forms) is read as what it says; any other value
    /// with `timestamp_format`.
    #[serde(default)]
    timestamp_field: Option<String>,
    /// How a `timestamp_field` without a timestamp logical type is
    /// written: `epoch_ms` for a plain `long` of milliseconds, `rfc3339`
    /// (the default) for a string.
    #[cfg_attr(feature = "schema", schemars(default = "default_format_name"))]
    #[serde(default = "Format::rfc3339")]
    timestamp_format: Format,
    /// Reject a record without an id in `id_field` (into the quarantine)
    /// instead of taking its position's.
    #[serde(default)]
    require_id: bool,
    /// Writer schemas by id, parsed once; an id whose schema is not Avro or
    /// does not parse keeps its reason, so its records are rejected with
    /// it without asking again.
    #[serde(skip)]
    writers: HashMap<u32, Result<Arc<Writer>, String>>,
    #[serde(skip)]
    reader: Option<Schema>,
}

#[cfg(feature = "schema")]
fn default_format_name() -> &'static str {
    "rfc3339"
}

/// The config's JSON Schema, from the type itself (the book's reference).
#[cfg(feature = "schema")]
pub fn config_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(AvroDecoder)).unwrap_or_default()
}

impl Plugin for AvroDecoder {
    fn setup(&mut self) -> Result<(), String> {
        if self.require_id && self.id_field.is_none() {
            return Err("require_id = true needs id_field".into());
        }
        if let Some(text) = &self.reader_schema {
            let schema = Schema::parse_str(text).map_err(|e| format!("reader_schema: {e}"))?;
            if !matches!(schema, Schema::Record(_)) {
                return Err("reader_schema: a record schema, whose records become JSON objects".into());
            }
            self.reader = Some(schema);
        }
        Ok(())
    }

    fn process(&mut self, record: &Record) -> Outcome {
        let payload = record.bytes();
        let Some((id, mut body)) = framed(&payload) else {
            return Outcome::reject(NOT_FRAMED);
        };
        let writer = match self.writer(id) {
            Ok(w) => w,
            Err(reason) => return Outcome::reject(reason),
        };
        let mut bytes = Bytes { left: body, short: false };
        let decoded = match &writer.decoder {
            Some(decoder) => decoder.read_value(&mut bytes),
            None => apache_avro::from_avro_datum_schemata(
                &writer.schema,
                writer.referenced.iter().collect(),
                &mut bytes,
                None,
            ),
        };
        let value = match decoded {
            Ok(v) => v,
            Err(e) => return Outcome::reject(format!("schema id {id}: the record does not decode: {e}")),
        };
        // apache-avro 0.20 reads a string cut short as a null: a record
        // that ran out of bytes did not decode, whatever came of it.
        if bytes.short {
            return Outcome::reject(format!("schema id {id}: the record does not decode: it ends too soon"));
        }
        body = bytes.left;
        if !body.is_empty() {
            return Outcome::reject(format!(
                "schema id {id}: {} bytes follow the record: it was not written with this schema",
                body.len()
            ));
        }
        let value = match &self.reader {
            Some(reader) => match value.resolve(reader) {
                Ok(v) => v,
                Err(e) => {
                    return Outcome::reject(format!("schema id {id}: the record does not fit reader_schema: {e}"));
                }
            },
            None => value,
        };
        self.event(value, id)
    }
}

/// A writer schema, parsed once per id.
struct Writer {
    schema: Schema,
    /// The schemas it references (Confluent's schema references), parsed
    /// in the order the host gave them.
    referenced: Vec<Schema>,
    /// For a schema that references none: a decoder that keeps the
    /// schema's name table, which `from_avro_datum` builds per record.
    decoder: Option<GenericSingleObjectReader>,
}

/// The Confluent header is read before the decoder is called: its
/// single-object header is empty.
struct NoHeader;

impl HeaderBuilder for NoHeader {
    fn build_header(&self) -> Vec<u8> {
        Vec::new()
    }
}

/// A record's bytes as the decoder reads them, noting whether it ever
/// asked for more than were left.
struct Bytes<'a> {
    left: &'a [u8],
    short: bool,
}

impl std::io::Read for Bytes<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.left.len());
        self.short |= n < buf.len();
        buf[..n].copy_from_slice(&self.left[..n]);
        self.left = &self.left[n..];
        Ok(n)
    }
}

impl AvroDecoder {
    /// The writer schema under `id`, parsed at its first record, with the
    /// schemas it references.
    fn writer(&mut self, id: u32) -> Result<Arc<Writer>, String> {
        self.writers
            .entry(id)
            .or_insert_with(|| {
                let text = sluice_guest::registry::schema_text(id, "AVRO")?;
                let references = sluice_guest::registry::references(id)?;
                let unparsed = |e: apache_avro::Error| format!("schema id {id} does not parse: {e}");
                if references.is_empty() {
                    let schema = Schema::parse_str(&text).map_err(unparsed)?;
                    let decoder = GenericSingleObjectReader::new_with_header_builder(schema.clone(), NoHeader)
                        .map_err(unparsed)?;
                    return Ok(Arc::new(Writer { schema, referenced: Vec::new(), decoder: Some(decoder) }));
                }
                let (schema, referenced) =
                    Schema::parse_str_with_list(&text, references.iter().map(|r| r.text.as_str())).map_err(unparsed)?;
                Ok(Arc::new(Writer { schema, referenced, decoder: None }))
            })
            .clone()
    }

    /// The event of one decoded record.
    fn event(&self, value: Avro, schema_id: u32) -> Outcome {
        let mut id = None;
        if let Some(field) = &self.id_field {
            id = lookup(&value, field).and_then(id_of);
            if id.is_none() && self.require_id {
                return Outcome::reject(format!("id field {field:?} is missing or not a scalar"));
            }
        }
        let mut timestamp = None;
        if let Some(field) = &self.timestamp_field
            && let Some(v) = lookup(&value, field)
        {
            match self.time_of(v) {
                Ok(ns) => timestamp = ns,
                Err(e) => return Outcome::reject(format!("timestamp field {field:?}: {e}")),
            }
        }
        if !matches!(peel(&value), Avro::Record(_)) {
            return Outcome::reject(format!("schema id {schema_id}: the top level is not a record"));
        }
        // Written straight from the decoded value, in the schema's field
        // order: no `serde_json::Value` in between.
        let mut body = Vec::with_capacity(256);
        write_json(&value, &mut body);
        Outcome::emit(Event { id, timestamp, body, sinks: Vec::new() })
    }

    /// Nanoseconds since the epoch, from a timestamp logical type or by
    /// `timestamp_format`; none for a null (an optional time not set).
    fn time_of(&self, v: &Avro) -> Result<Option<i64>, String> {
        let scaled = |n: i64, by: i64| n.checked_mul(by).ok_or_else(|| format!("{n} is out of range"));
        Ok(Some(match v {
            Avro::Null => return Ok(None),
            Avro::TimestampMillis(ms) | Avro::LocalTimestampMillis(ms) => scaled(*ms, 1_000_000)?,
            Avro::TimestampMicros(us) | Avro::LocalTimestampMicros(us) => scaled(*us, 1_000)?,
            Avro::TimestampNanos(ns) | Avro::LocalTimestampNanos(ns) => *ns,
            Avro::Union(_, inner) => return self.time_of(inner),
            other => {
                let now = if self.timestamp_format.needs_year() { sluice_guest::now() } else { 0 };
                let format = &self.timestamp_format;
                match other {
                    Avro::String(s) | Avro::Enum(_, s) => format.parse(s, now),
                    Avro::Int(n) => format.parse_json(&Value::from(*n), now),
                    Avro::Long(n) => format.parse_json(&Value::from(*n), now),
                    // Anything else is refused by `parse_json`, which
                    // names what it found.
                    other => {
                        let mut text = Vec::new();
                        write_json(other, &mut text);
                        format.parse_json(&serde_json::from_slice(&text).unwrap_or(Value::Null), now)
                    }
                }
                .map_err(|e| e.to_string())?
            }
        }))
    }
}

/// The value at a dotted path: record fields and map keys, through
/// unions.
fn lookup<'v>(value: &'v Avro, path: &str) -> Option<&'v Avro> {
    path.split('.').try_fold(value, |v, key| {
        let v = match v {
            Avro::Union(_, inner) => inner,
            v => v,
        };
        match v {
            Avro::Record(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            Avro::Map(m) => m.get(key),
            _ => None,
        }
    })
}

/// An id from a scalar: a non-empty string, an enum's symbol, a UUID, a
/// number as written; none for anything else.
fn id_of(v: &Avro) -> Option<String> {
    match v {
        Avro::String(s) | Avro::Enum(_, s) => (!s.is_empty()).then(|| s.clone()),
        Avro::Int(n) => Some(n.to_string()),
        Avro::Long(n) => Some(n.to_string()),
        Avro::Uuid(u) => Some(u.to_string()),
        Avro::Union(_, inner) => id_of(inner),
        _ => None,
    }
}

/// A value through its unions.
fn peel(v: &Avro) -> &Avro {
    match v {
        Avro::Union(_, inner) => peel(inner),
        v => v,
    }
}

/// Write `v` as JSON, as Avro's own JSON encoding reads, except that a
/// union is its value alone (not `{"type": value}`) and bytes are their
/// base64. A record's fields keep the schema's order; a map's keys are
/// sorted, so one record always gives the same body. Logical types are
/// their underlying number or text.
fn write_json(v: &Avro, out: &mut Vec<u8>) {
    use base64::Engine as _;
    match v {
        Avro::Null => out.extend_from_slice(b"null"),
        Avro::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Avro::Int(n) | Avro::Date(n) | Avro::TimeMillis(n) => put(out, n),
        Avro::Long(n)
        | Avro::TimeMicros(n)
        | Avro::TimestampMillis(n)
        | Avro::TimestampMicros(n)
        | Avro::TimestampNanos(n)
        | Avro::LocalTimestampMillis(n)
        | Avro::LocalTimestampMicros(n)
        | Avro::LocalTimestampNanos(n) => put(out, n),
        // Not finite: `null`, as serde_json writes it.
        Avro::Float(f) => put(out, &f64::from(*f)),
        Avro::Double(f) => put(out, f),
        Avro::Bytes(b) | Avro::Fixed(_, b) => put(out, &base64::engine::general_purpose::STANDARD.encode(b)),
        Avro::String(s) | Avro::Enum(_, s) => put(out, s.as_str()),
        Avro::Uuid(u) => put(out, &u.to_string()),
        Avro::Union(_, inner) => write_json(inner, out),
        Avro::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json(item, out);
            }
            out.push(b']');
        }
        Avro::Map(m) => {
            let mut entries: Vec<_> = m.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            write_object(entries.into_iter().map(|(k, v)| (k.as_str(), v)), out);
        }
        Avro::Record(fields) => write_object(fields.iter().map(|(k, v)| (k.as_str(), v)), out),
        // Decimals and durations: what the crate's own conversion gives.
        other => put(out, &Value::try_from(other.clone()).unwrap_or(Value::Null)),
    }
}

fn write_object<'v>(entries: impl Iterator<Item = (&'v str, &'v Avro)>, out: &mut Vec<u8>) {
    out.push(b'{');
    for (i, (k, v)) in entries.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        put(out, k);
        out.push(b':');
        write_json(v, out);
    }
    out.push(b'}');
}

/// A scalar as serde_json writes it (escaping, numbers, `null` for a
/// float that is not finite). Into a `Vec` it cannot fail.
fn put<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
    let _ = serde_json::to_writer(out, v);
}

export_plugin!(AvroDecoder);

#[cfg(test)]
mod tests {
    use apache_avro::types::Record as AvroRecord;
    use sluice_guest::registry::native;
    use sluice_guest::testing::run_natively;

    use super::*;

    const V1: &str = r#"{"type":"record","name":"Click","fields":[
        {"name":"event_id","type":"string"},
        {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
        {"name":"page","type":"string"}]}"#;
    const V2: &str = r#"{"type":"record","name":"Click","fields":[
        {"name":"event_id","type":"string"},
        {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
        {"name":"page","type":"string"},
        {"name":"referrer","type":["null","string"],"default":null}]}"#;

    fn encode(schema_id: u32, schema: &str, fill: impl FnOnce(&mut AvroRecord)) -> Vec<u8> {
        let schema = Schema::parse_str(schema).unwrap();
        let mut r = AvroRecord::new(&schema).unwrap();
        fill(&mut r);
        let mut out = vec![0];
        out.extend_from_slice(&schema_id.to_be_bytes());
        out.extend(apache_avro::to_avro_datum(&schema, r).unwrap());
        out
    }

    fn v1(id: &str) -> Vec<u8> {
        encode(1, V1, |r| {
            r.put("event_id", id);
            r.put("ts", Avro::TimestampMillis(1_700_000_000_123));
            r.put("page", "/home");
        })
    }

    fn v2(id: &str, referrer: Option<&str>) -> Vec<u8> {
        encode(2, V2, |r| {
            r.put("event_id", id);
            r.put("ts", Avro::TimestampMillis(1_700_000_000_456));
            r.put("page", "/cart");
            r.put(
                "referrer",
                Avro::Union(
                    u32::from(referrer.is_some()),
                    Box::new(referrer.map_or(Avro::Null, |s| Avro::String(s.into()))),
                ),
            );
        })
    }

    fn registered() {
        native::register(1, "AVRO", V1);
        native::register(2, "AVRO", V2);
        native::register(3, "PROTOBUF", "syntax = \"proto3\";");
    }

    fn body(o: &Outcome) -> (Option<String>, Option<i64>, Value) {
        match o {
            Outcome::Emit(events) => {
                let e = &events[0];
                (e.id.clone(), e.timestamp, serde_json::from_slice(&e.body).unwrap())
            }
            other => panic!("not emitted: {other:?}"),
        }
    }

    #[test]
    fn each_record_decodes_with_its_writers_schema() {
        registered();
        let config = r#"{"id_field":"event_id","timestamp_field":"ts"}"#;
        let out = run_natively::<AvroDecoder>(config, &[&v1("a"), &v2("b", Some("/x"))]).unwrap();
        let (id, ts, b) = body(&out[0]);
        assert_eq!((id.as_deref(), ts), (Some("a"), Some(1_700_000_000_123_000_000)));
        assert_eq!(b, serde_json::json!({"event_id":"a","ts":1_700_000_000_123i64,"page":"/home"}));
        let (id, _, b) = body(&out[1]);
        assert_eq!(id.as_deref(), Some("b"));
        assert_eq!(b["referrer"], "/x");
    }

    #[test]
    fn the_body_keeps_the_schemas_field_order() {
        const ODD: &str = r#"{"type":"record","name":"Odd","fields":[
            {"name":"zeta","type":"string"},
            {"name":"alpha","type":{"type":"map","values":"long"}},
            {"name":"mid","type":"bytes"},
            {"name":"list","type":{"type":"array","items":["null","double"]}},
            {"name":"inner","type":{"type":"record","name":"In","fields":[
                {"name":"y","type":"boolean"},{"name":"x","type":"int"}]}}]}"#;
        native::register(11, "AVRO", ODD);
        let payload = encode(11, ODD, |r| {
            r.put("zeta", "q\"uote");
            r.put("alpha", Avro::Map([("b".to_string(), Avro::Long(2)), ("a".to_string(), Avro::Long(1))].into()));
            r.put("mid", Avro::Bytes(vec![0, 1, 2]));
            let items = vec![
                Avro::Union(1, Box::new(Avro::Double(1.5))),
                Avro::Union(0, Box::new(Avro::Null)),
                Avro::Union(1, Box::new(Avro::Double(f64::NAN))),
            ];
            r.put("list", Avro::Array(items));
            r.put("inner", Avro::Record(vec![("y".into(), Avro::Boolean(true)), ("x".into(), Avro::Int(-3))]));
        });
        let out = run_natively::<AvroDecoder>("{}", &[&payload]).unwrap();
        let Outcome::Emit(events) = &out[0] else { panic!("not emitted: {:?}", out[0]) };
        assert_eq!(
            String::from_utf8_lossy(&events[0].body),
            r#"{"zeta":"q\"uote","alpha":{"a":1,"b":2},"mid":"AAEC","list":[1.5,null,null],"inner":{"y":true,"x":-3}}"#
        );
    }

    #[test]
    fn a_schema_that_references_another_subjects_type_decodes() {
        const MONEY: &str = r#"{"type":"record","name":"Money","namespace":"shop","fields":[
            {"name":"cents","type":"long"},{"name":"currency","type":"string"}]}"#;
        const ORDER: &str = r#"{"type":"record","name":"Order","namespace":"shop","fields":[
            {"name":"event_id","type":"string"},{"name":"total","type":"shop.Money"}]}"#;
        native::register_with_references(21, "AVRO", ORDER, &[("shop.Money", MONEY)]);
        native::register(22, "AVRO", ORDER);
        // Encoded with the reference inlined: the bytes are the same.
        let whole = ORDER.replace("\"shop.Money\"", MONEY);
        let payload = |id: u32| {
            encode(id, &whole, |r| {
                r.put("event_id", "o-1");
                r.put(
                    "total",
                    Avro::Record(vec![("cents".into(), Avro::Long(1250)), ("currency".into(), "EUR".into())]),
                );
            })
        };
        let out = run_natively::<AvroDecoder>(r#"{"id_field":"event_id"}"#, &[&payload(21), &payload(22)]).unwrap();
        let (id, _, b) = body(&out[0]);
        assert_eq!(id.as_deref(), Some("o-1"));
        assert_eq!(b, serde_json::json!({"event_id":"o-1","total":{"cents":1250,"currency":"EUR"}}));
        // Without its reference the schema names a type it does not have.
        let Outcome::Reject(reason) = &out[1] else { panic!("{:?}", out[1]) };
        assert!(reason.contains("schema id 22 does not parse"), "{reason}");
    }

    #[test]
    fn a_reader_schema_gives_old_records_the_new_shape() {
        registered();
        let config = serde_json::json!({"id_field": "event_id", "reader_schema": V2}).to_string();
        let out = run_natively::<AvroDecoder>(&config, &[&v1("a"), &v2("b", None)]).unwrap();
        let (_, _, old) = body(&out[0]);
        assert_eq!(old, serde_json::json!({"event_id":"a","ts":1_700_000_000_123i64,"page":"/home","referrer":null}));
        let (_, _, new) = body(&out[1]);
        assert_eq!(new["referrer"], Value::Null);
        // A reader without the new field drops it from new records.
        let config = serde_json::json!({"reader_schema": V1}).to_string();
        let out = run_natively::<AvroDecoder>(&config, &[&v2("c", Some("/y"))]).unwrap();
        let (_, _, b) = body(&out[0]);
        assert!(b.get("referrer").is_none(), "{b}");
    }

    #[test]
    fn what_cannot_decode_is_rejected_with_the_schema_id() {
        registered();
        let reject = |o: &Outcome| match o {
            Outcome::Reject(r) => r.clone(),
            other => panic!("not rejected: {other:?}"),
        };
        let mut unknown = v1("a");
        unknown[4] = 9;
        let mut truncated = v1("a");
        truncated.truncate(truncated.len() - 3);
        let mut trailing = v1("a");
        trailing.push(7);
        let mut protobuf = v1("a");
        protobuf[4] = 3;
        let out =
            run_natively::<AvroDecoder>("{}", &[b"{\"a\":1}", &unknown, &truncated, &trailing, &protobuf]).unwrap();
        assert!(reject(&out[0]).contains("wire format"));
        assert!(reject(&out[1]).contains("schema id 9"), "{}", reject(&out[1]));
        assert!(reject(&out[2]).contains("does not decode"), "{}", reject(&out[2]));
        assert!(reject(&out[3]).contains("1 bytes follow"), "{}", reject(&out[3]));
        assert!(reject(&out[4]).contains("PROTOBUF"), "{}", reject(&out[4]));
    }

    #[test]
    fn a_bad_reader_schema_refuses_the_config() {
        let e = sluice_guest::configure::<AvroDecoder>(r#"{"reader_schema":"{\"type\":\"nope\"}"}"#).err().unwrap();
        assert!(e.contains("reader_schema"), "{e}");
        let e = sluice_guest::configure::<AvroDecoder>(r#"{"reader_schema":"\"long\""}"#).err().unwrap();
        assert!(e.contains("record"), "{e}");
    }
}
