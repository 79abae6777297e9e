//! `protobuf`: records in Protobuf, framed for a schema registry
//! (Confluent's wire format, with its message indexes), out as JSON
//! objects in Protobuf's JSON mapping, with their event id and time read
//! from configured fields as `json` reads them.
//!
//! ```toml
//! [[plugins]]
//! name = "protobuf"
//! path = "plugins/protobuf.wasm"
//! config = { id_field = "event_id", timestamp_field = "ts" }
//! ```
//!
//! The writer's `.proto` comes from the host
//! (`sluice_guest::registry::schema`), compiled once per schema id and
//! kept; the message is the one the record's message indexes name (the
//! first of the file for the usual single `0`). With a `reader_schema`
//! and `reader_message`, every record is decoded by the reader's
//! descriptor instead: Protobuf's own evolution, by field number. A field
//! the writer lacked reads as its default, one the reader lacks is an
//! unknown field, dropped or kept as `unknown_fields` says.
//!
//! The JSON is Protobuf's canonical mapping with the `.proto`'s field
//! names (`user_id`, not `userId`), every field present (defaults too),
//! 64-bit integers as numbers, enums by name, `bytes` as base64,
//! `google.protobuf.Timestamp` as RFC 3339 text. Imports resolve to the
//! well-known types (`google/protobuf/*.proto`) and to the files the
//! registry's schema references name (`sluice_guest::registry::references`).

use std::collections::HashMap;
use std::sync::Arc;

use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, ReflectMessage, SerializeOptions, Value as Pv};
use protox::file::{ChainFileResolver, File, FileResolver, GoogleFileResolver};
use serde::Deserialize;
use serde_json::Value;
use sluice_guest::registry::{NOT_FRAMED, Reference, framed};
use sluice_guest::time::Format;
use sluice_guest::{Event, Outcome, Plugin, Record, export_plugin, json};

/// What becomes of fields the decoding descriptor does not know.
#[derive(Deserialize, Default, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum UnknownFields {
    /// Left out of the JSON, the default (Protobuf's JSON mapping has no
    /// place for them).
    #[default]
    Drop,
    /// Kept under `"_unknown"`: each field's number, with its encoded
    /// bytes (tag included) in base64, so nothing a producer sent is lost.
    Keep,
}

/// Protobuf records from a schema registry, decoded to JSON.
#[derive(Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ProtobufDecoder {
    /// A `.proto` file's text: every record is decoded by its
    /// `reader_message`, whatever schema version wrote it. Unset: by the
    /// writer's own message.
    #[serde(default)]
    reader_schema: Option<String>,
    /// The message of `reader_schema` records are read as, by its full
    /// name (`shop.Click`). Needed with `reader_schema`.
    #[serde(default)]
    reader_message: Option<String>,
    /// Fields the decoding message does not define (a newer writer's).
    #[serde(default)]
    unknown_fields: UnknownFields,
    /// The field (a dotted path, `meta.id`) whose value is the event id.
    /// Unset, or absent from a record: the id comes from the record's
    /// source position.
    #[serde(default)]
    id_field: Option<String>,
    /// The field (a dotted path) holding the event's time, read with
    /// `timestamp_format` from its JSON mapping: a
    /// `google.protobuf.Timestamp` is RFC 3339 text (the default format),
    /// an `int64` of milliseconds wants `epoch_ms`.
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
    /// Writer files by schema id, compiled once (or why they do not).
    #[serde(skip)]
    writers: HashMap<u32, Result<Arc<DescriptorPool>, String>>,
    #[serde(skip)]
    reader: Option<MessageDescriptor>,
}

#[cfg(feature = "schema")]
fn default_format_name() -> &'static str {
    "rfc3339"
}

/// The config's JSON Schema, from the type itself (the book's reference).
#[cfg(feature = "schema")]
pub fn config_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(ProtobufDecoder)).unwrap_or_default()
}

/// The name the registry's schema is compiled under.
const SCHEMA_FILE: &str = "schema.proto";

/// Answers `schema.proto` with the schema's text, and each import the
/// registry's references name with the referenced schema's; the
/// well-known types come from protox's own copies.
struct Files(HashMap<String, String>);

impl FileResolver for Files {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        match self.0.get(name) {
            Some(text) => File::from_source(name, text),
            None => Err(protox::Error::file_not_found(name)),
        }
    }
}

/// Compile a `.proto` text with its imports: the files `references`
/// gives by path (a registry's schema references) and the well-known
/// types.
fn compile(text: &str, references: &[Reference]) -> Result<DescriptorPool, String> {
    let mut named: HashMap<String, String> = references.iter().map(|r| (r.name.clone(), r.text.clone())).collect();
    named.insert(SCHEMA_FILE.to_string(), text.to_string());
    let mut files = ChainFileResolver::new();
    files.add(Files(named));
    files.add(GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(files);
    compiler.include_imports(true);
    compiler.open_file(SCHEMA_FILE).map_err(|e| e.to_string())?;
    Ok(compiler.descriptor_pool())
}

/// The message indexes after the header: a count, then that many
/// indexes, each a zigzag varint; a lone `0` byte is `[0]`, the file's
/// first message. Returns them and the bytes after.
fn message_indexes(mut bytes: &[u8]) -> Result<(Vec<usize>, &[u8]), String> {
    let mut next = || -> Result<i64, String> {
        let n = prost::encoding::decode_varint(&mut bytes).map_err(|e| format!("message indexes: {e}"))?;
        Ok(((n >> 1) as i64) ^ -((n & 1) as i64))
    };
    let count = next()?;
    if count == 0 {
        return Ok((vec![0], bytes));
    }
    if !(1..=32).contains(&count) {
        return Err(format!("message indexes: a count of {count}"));
    }
    let indexes = (0..count)
        .map(|_| next().and_then(|i| usize::try_from(i).map_err(|_| format!("message indexes: {i}"))))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((indexes, bytes))
}

impl Plugin for ProtobufDecoder {
    fn setup(&mut self) -> Result<(), String> {
        if self.require_id && self.id_field.is_none() {
            return Err("require_id = true needs id_field".into());
        }
        match (&self.reader_schema, &self.reader_message) {
            (Some(text), Some(name)) => {
                let pool = compile(text, &[]).map_err(|e| format!("reader_schema: {e}"))?;
                let message = pool
                    .get_message_by_name(name)
                    .ok_or_else(|| format!("reader_message: reader_schema has no message {name:?}"))?;
                self.reader = Some(message);
            }
            (Some(_), None) => return Err("reader_schema needs reader_message, the message records are read as".into()),
            (None, Some(_)) => return Err("reader_message needs reader_schema".into()),
            (None, None) => {}
        }
        Ok(())
    }

    fn process(&mut self, record: &Record) -> Outcome {
        let payload = record.bytes();
        let Some((id, rest)) = framed(&payload) else {
            return Outcome::reject(NOT_FRAMED);
        };
        let (indexes, body) = match message_indexes(rest) {
            Ok(x) => x,
            Err(e) => return Outcome::reject(format!("schema id {id}: {e}")),
        };
        // The writer's message even with a reader: the id must be one the
        // registry has, of a Protobuf schema with that message.
        let writer = match self.writer_message(id, &indexes) {
            Ok(d) => d,
            Err(reason) => return Outcome::reject(reason),
        };
        let descriptor = self.reader.clone().unwrap_or(writer);
        let message = match DynamicMessage::decode(descriptor, body) {
            Ok(m) => m,
            Err(e) => return Outcome::reject(format!("schema id {id}: the record does not decode: {e}")),
        };
        self.event(&message, id)
    }
}

impl ProtobufDecoder {
    /// The writer's message the indexes name, its file compiled at the
    /// id's first record.
    fn writer_message(&mut self, id: u32, indexes: &[usize]) -> Result<MessageDescriptor, String> {
        let pool = self
            .writers
            .entry(id)
            .or_insert_with(|| {
                let text = sluice_guest::registry::schema_text(id, "PROTOBUF")?;
                let references = sluice_guest::registry::references(id)?;
                compile(&text, &references).map(Arc::new).map_err(|e| format!("schema id {id} does not compile: {e}"))
            })
            .clone()?;
        let file = pool.get_file_by_name(SCHEMA_FILE).ok_or_else(|| format!("schema id {id}: no file"))?;
        let missing = || format!("schema id {id} has no message at indexes {indexes:?}");
        let (first, nested) = indexes.split_first().ok_or_else(missing)?;
        let mut message = file.messages().nth(*first).ok_or_else(missing)?;
        for i in nested {
            let child = message.child_messages().nth(*i);
            message = child.ok_or_else(missing)?;
        }
        Ok(message)
    }

    fn event(&self, message: &DynamicMessage, schema_id: u32) -> Outcome {
        // The id and the time straight from the message, and the body
        // written straight from it: no `serde_json::Value` of the record.
        let fields = json::IdAndTime {
            id_field: self.id_field.as_deref(),
            timestamp_field: self.timestamp_field.as_deref(),
            timestamp_format: &self.timestamp_format,
            require_id: self.require_id,
        };
        let at = |path: Option<&str>| path.and_then(|p| field_json(message, p));
        let (id, timestamp) =
            match fields.read_fields(at(fields.id_field).as_ref(), at(fields.timestamp_field).as_ref()) {
                Ok(x) => x,
                Err(reason) => return Outcome::reject(reason),
            };
        let mut body = Vec::with_capacity(256);
        if let Err(e) = message.serialize_with_options(&mut serde_json::Serializer::new(&mut body), &OPTIONS) {
            return Outcome::reject(format!("schema id {schema_id}: {e}"));
        }
        if self.unknown_fields == UnknownFields::Keep {
            keep_unknown(message, &mut body);
        }
        Outcome::emit(Event { id, timestamp, body, sinks: Vec::new() })
    }
}

/// Protobuf's JSON mapping as the events are written: the `.proto`'s
/// field names, defaults present, 64-bit integers as numbers.
const OPTIONS: SerializeOptions =
    SerializeOptions::new().use_proto_field_name(true).skip_default_fields(false).stringify_64_bit_integers(false);

/// The value at a dotted path of proto field names, as the event's JSON
/// holds it; none where the body has nothing (an unset field with
/// presence, a path through something that is not a message).
fn field_json(message: &DynamicMessage, path: &str) -> Option<Value> {
    let (name, rest) = match path.split_once('.') {
        Some((name, rest)) => (name, Some(rest)),
        None => (path, None),
    };
    let field = message.descriptor().get_field_by_name(name)?;
    if field.supports_presence() && !message.has_field(&field) {
        return None;
    }
    let value = message.get_field(&field);
    match (rest, value.as_ref()) {
        (Some(rest), Pv::Message(inner)) => field_json(inner, rest),
        (Some(_), _) => None,
        (None, Pv::Message(inner)) => inner.serialize_with_options(serde_json::value::Serializer, &OPTIONS).ok(),
        (None, v) => Some(scalar_json(&field, v)),
    }
}

/// A field's scalar as the JSON mapping writes it. A list or a map is
/// never an id or a time: an empty one of its kind stands for it, so the
/// reason names what was found.
fn scalar_json(field: &prost_reflect::FieldDescriptor, v: &Pv) -> Value {
    use base64::Engine as _;
    match v {
        Pv::Bool(b) => Value::Bool(*b),
        Pv::I32(n) => Value::from(*n),
        Pv::I64(n) => Value::from(*n),
        Pv::U32(n) => Value::from(*n),
        Pv::U64(n) => Value::from(*n),
        Pv::F32(f) => serde_json::Number::from_f64(f64::from(*f)).map_or(Value::Null, Value::Number),
        Pv::F64(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
        Pv::String(s) => Value::String(s.clone()),
        Pv::Bytes(b) => Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
        Pv::EnumNumber(n) => match field.kind().as_enum().and_then(|e| e.get_value(*n)) {
            Some(value) => Value::String(value.name().to_string()),
            None => Value::from(*n),
        },
        Pv::List(_) => Value::Array(Vec::new()),
        Pv::Map(_) | Pv::Message(_) => Value::Object(serde_json::Map::new()),
    }
}

/// The top-level message's unknown fields under `"_unknown"`, appended to
/// the object `body` holds: number to the base64 of each occurrence's
/// encoding.
fn keep_unknown(message: &DynamicMessage, body: &mut Vec<u8>) {
    use base64::Engine as _;
    let mut kept = serde_json::Map::new();
    for field in message.unknown_fields() {
        let mut bytes = Vec::new();
        field.encode(&mut bytes);
        let encoded = Value::String(base64::engine::general_purpose::STANDARD.encode(&bytes));
        if let Value::Array(list) = kept.entry(field.number().to_string()).or_insert_with(|| Value::Array(Vec::new())) {
            list.push(encoded);
        }
    }
    if kept.is_empty() || body.last() != Some(&b'}') {
        return;
    }
    body.pop();
    if body.len() > 1 {
        body.push(b',');
    }
    body.extend_from_slice(b"\"_unknown\":");
    let _ = serde_json::to_writer(&mut *body, &kept);
    body.push(b'}');
}

export_plugin!(ProtobufDecoder);

#[cfg(test)]
mod tests {
    use sluice_guest::registry::native;
    use sluice_guest::testing::run_natively;

    use super::*;

    const V1: &str = r#"syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Click {
  string event_id = 1;
  google.protobuf.Timestamp ts = 2;
  string page = 3;
}"#;
    const V2: &str = r#"syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Click {
  string event_id = 1;
  google.protobuf.Timestamp ts = 2;
  string page = 3;
  string referrer = 4;
  message Inner { int64 n = 1; }
}"#;

    fn encode(schema_id: u32, text: &str, indexes: &[u8], fill: &[(&str, Pv)]) -> Vec<u8> {
        let pool = compile(text, &[]).unwrap();
        let desc = pool.get_message_by_name("shop.Click").unwrap();
        let mut m = DynamicMessage::new(desc);
        for (k, v) in fill {
            m.set_field_by_name(k, v.clone());
        }
        let mut out = vec![0];
        out.extend_from_slice(&schema_id.to_be_bytes());
        out.extend_from_slice(indexes);
        out.extend(prost::Message::encode_to_vec(&m));
        out
    }

    fn ts(seconds: i64) -> Pv {
        let pool = compile(V1, &[]).unwrap();
        let t = pool.get_message_by_name("google.protobuf.Timestamp").unwrap();
        let mut m = DynamicMessage::new(t);
        m.set_field_by_name("seconds", Pv::I64(seconds));
        m.set_field_by_name("nanos", Pv::I32(5_000_000));
        Pv::Message(m)
    }

    fn registered() {
        native::register(11, "PROTOBUF", V1);
        native::register(12, "PROTOBUF", V2);
        native::register(13, "AVRO", "\"long\"");
    }

    fn emitted(o: &Outcome) -> (Option<String>, Option<i64>, Value) {
        match o {
            Outcome::Emit(e) => (e[0].id.clone(), e[0].timestamp, serde_json::from_slice(&e[0].body).unwrap()),
            other => panic!("not emitted: {other:?}"),
        }
    }

    fn rejected(o: &Outcome) -> String {
        match o {
            Outcome::Reject(r) => r.clone(),
            other => panic!("not rejected: {other:?}"),
        }
    }

    fn v2(id: &str) -> Vec<u8> {
        let f = [
            ("event_id", Pv::String(id.into())),
            ("ts", ts(1_700_000_000)),
            ("page", Pv::String("/cart".into())),
            ("referrer", Pv::String("/x".into())),
        ];
        encode(12, V2, &[0], &f)
    }

    #[test]
    fn each_record_decodes_with_its_writers_message() {
        registered();
        let v1 = encode(11, V1, &[0], &[("event_id", Pv::String("a".into())), ("ts", ts(1_700_000_000))]);
        let config = r#"{"id_field":"event_id","timestamp_field":"ts"}"#;
        let out = run_natively::<ProtobufDecoder>(config, &[&v1, &v2("b")]).unwrap();
        let (id, t, body) = emitted(&out[0]);
        assert_eq!((id.as_deref(), t), (Some("a"), Some(1_700_000_000_005_000_000)));
        assert_eq!(body["page"], "", "a default is present");
        assert_eq!(body["ts"], "2023-11-14T22:13:20.005Z");
        let (_, _, body) = emitted(&out[1]);
        assert_eq!(body["referrer"], "/x");
    }

    #[test]
    fn a_reader_reads_every_version_and_keeps_what_it_does_not_know_if_asked() {
        registered();
        let v1 = encode(11, V1, &[0], &[("event_id", Pv::String("a".into()))]);
        let config = serde_json::json!({"reader_schema": V2, "reader_message": "shop.Click"}).to_string();
        let out = run_natively::<ProtobufDecoder>(&config, &[&v1]).unwrap();
        assert_eq!(emitted(&out[0]).2["referrer"], "", "the old record has the new field's default");
        let config = serde_json::json!({"reader_schema": V1, "reader_message": "shop.Click"}).to_string();
        let out = run_natively::<ProtobufDecoder>(&config, &[&v2("b")]).unwrap();
        assert!(emitted(&out[0]).2.get("referrer").is_none());
        let keep = serde_json::json!({"reader_schema": V1, "reader_message": "shop.Click", "unknown_fields": "keep"});
        let out = run_natively::<ProtobufDecoder>(&keep.to_string(), &[&v2("b")]).unwrap();
        // Field 4, "/x": tag 0x22, length 2.
        assert_eq!(emitted(&out[0]).2["_unknown"], serde_json::json!({"4": ["IgIveA=="]}));
    }

    /// What the decoder reads from the message itself is what the body it
    /// writes holds at the same path, for every kind of field; the body
    /// keeps the fields in field-number order.
    #[test]
    fn fields_read_from_the_message_are_those_of_its_body() {
        const WIDE: &str = r#"syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
enum Level { LOW = 0; HIGH = 1; }
message Meta { string id = 1; int64 n = 2; google.protobuf.Timestamp at = 3; }
message Click {
  string zeta = 1;
  Level level = 2;
  Meta meta = 3;
  bytes raw = 4;
  repeated int32 many = 5;
  google.protobuf.Timestamp unset = 6;
  optional string maybe = 7;
  uint64 big = 8;
  double ratio = 9;
  bool on = 10;
}"#;
        let pool = compile(WIDE, &[]).unwrap();
        let mut meta = DynamicMessage::new(pool.get_message_by_name("shop.Meta").unwrap());
        meta.set_field_by_name("id", Pv::String("m-1".into()));
        meta.set_field_by_name("n", Pv::I64(-5));
        meta.set_field_by_name("at", ts(1_700_000_000));
        let mut m = DynamicMessage::new(pool.get_message_by_name("shop.Click").unwrap());
        m.set_field_by_name("zeta", Pv::String("z\"q".into()));
        m.set_field_by_name("level", Pv::EnumNumber(1));
        m.set_field_by_name("meta", Pv::Message(meta));
        m.set_field_by_name("raw", Pv::Bytes(vec![0, 1, 2].into()));
        m.set_field_by_name("many", Pv::List(vec![Pv::I32(1), Pv::I32(2)]));
        m.set_field_by_name("big", Pv::U64(u64::MAX));
        m.set_field_by_name("ratio", Pv::F64(0.25));
        m.set_field_by_name("on", Pv::Bool(true));
        let mut body = Vec::new();
        m.serialize_with_options(&mut serde_json::Serializer::new(&mut body), &OPTIONS).unwrap();
        let text = String::from_utf8(body).unwrap();
        assert!(text.starts_with(r#"{"zeta":"z\"q","level":"HIGH","meta":{"#), "{text}");
        let value: Value = serde_json::from_str(&text).unwrap();
        let paths = [
            "zeta",
            "level",
            "meta",
            "meta.id",
            "meta.n",
            "meta.at",
            "raw",
            "many",
            "unset",
            "maybe",
            "big",
            "ratio",
            "on",
            "nope",
            "zeta.x",
            "meta.nope",
        ];
        for path in paths {
            let mut want = json::get(&value, path).cloned();
            // A list stands for itself by its kind only.
            if let Some(Value::Array(_)) = want {
                want = Some(Value::Array(Vec::new()));
            }
            assert_eq!(field_json(&m, path), want, "{path} in {text}");
        }
        assert!(field_json(&m, "unset").is_none() && field_json(&m, "maybe").is_none());
    }

    #[test]
    fn kept_unknown_fields_join_the_body_as_one_more_key() {
        registered();
        let keep = serde_json::json!({"reader_schema": "syntax = \"proto3\"; package shop; message Click {}",
            "reader_message": "shop.Click", "unknown_fields": "keep"});
        let out = run_natively::<ProtobufDecoder>(&keep.to_string(), &[&v2("b")]).unwrap();
        let Outcome::Emit(events) = &out[0] else { panic!("{:?}", out[0]) };
        let body = String::from_utf8_lossy(&events[0].body);
        assert!(body.starts_with(r#"{"_unknown":{"1":["#), "an empty message and the kept fields: {body}");
        let (_, _, value) = emitted(&out[0]);
        assert_eq!(value["_unknown"].as_object().map(|o| o.len()), Some(4), "{body}");
    }

    #[test]
    fn a_schema_that_imports_another_subjects_file_decodes() {
        const MONEY: &str =
            "syntax = \"proto3\";\npackage shop;\nmessage Money { int64 cents = 1; string currency = 2; }\n";
        const ORDER: &str = "syntax = \"proto3\";\npackage shop;\nimport \"shop/money.proto\";\n\
                             message Click { string event_id = 1; shop.Money total = 2; }\n";
        native::register_with_references(31, "PROTOBUF", ORDER, &[("shop/money.proto", MONEY)]);
        native::register(32, "PROTOBUF", ORDER);
        let refs = [Reference { name: "shop/money.proto".into(), text: MONEY.into() }];
        let pool = compile(ORDER, &refs).unwrap();
        let mut money = DynamicMessage::new(pool.get_message_by_name("shop.Money").unwrap());
        money.set_field_by_name("cents", Pv::I64(1250));
        money.set_field_by_name("currency", Pv::String("EUR".into()));
        let mut m = DynamicMessage::new(pool.get_message_by_name("shop.Click").unwrap());
        m.set_field_by_name("event_id", Pv::String("o-1".into()));
        m.set_field_by_name("total", Pv::Message(money));
        let payload = |id: u32| {
            let mut out = vec![0];
            out.extend_from_slice(&id.to_be_bytes());
            out.push(0);
            out.extend(prost::Message::encode_to_vec(&m));
            out
        };
        let out =
            run_natively::<ProtobufDecoder>(r#"{"id_field":"total.currency"}"#, &[&payload(31), &payload(32)]).unwrap();
        let (id, _, b) = emitted(&out[0]);
        assert_eq!(id.as_deref(), Some("EUR"));
        assert_eq!(b, serde_json::json!({"event_id":"o-1","total":{"cents":1250,"currency":"EUR"}}));
        // Without its reference the import is not found.
        assert!(rejected(&out[1]).contains("schema id 32 does not compile"), "{}", rejected(&out[1]));
    }

    #[test]
    fn message_indexes_pick_a_nested_message() {
        registered();
        // [0, 0]: count 2 (zigzag 4), 0, 0: Click.Inner; n = 7.
        let pool = compile(V2, &[]).unwrap();
        let mut m = DynamicMessage::new(pool.get_message_by_name("shop.Click.Inner").unwrap());
        m.set_field_by_name("n", Pv::I64(7));
        let mut rec = vec![0, 0, 0, 0, 12, 4, 0, 0];
        rec.extend(prost::Message::encode_to_vec(&m));
        let out = run_natively::<ProtobufDecoder>("{}", &[&rec]).unwrap();
        assert_eq!(emitted(&out[0]).2, serde_json::json!({"n": 7}));
        assert_eq!(message_indexes(&[2, 2, 7]).map(|(i, _)| i), Ok(vec![1]));
    }

    #[test]
    fn what_cannot_decode_is_rejected_with_the_schema_id() {
        registered();
        let mut unknown = v2("a");
        unknown[4] = 99;
        let mut garbage = v2("a");
        garbage.truncate(12);
        garbage.push(0xff);
        let mut avro = v2("a");
        avro[4] = 13;
        let mut no_message = v2("a");
        no_message[5] = 2 * 2; // count 2: [index 0, then past the file]
        no_message.splice(6..6, [0, 8]);
        let out = run_natively::<ProtobufDecoder>("{}", &[b"{}", &unknown, &garbage, &avro, &no_message]).unwrap();
        assert!(rejected(&out[0]).contains("wire format"));
        assert!(rejected(&out[1]).contains("schema id 99"), "{}", rejected(&out[1]));
        assert!(rejected(&out[2]).contains("does not decode"), "{}", rejected(&out[2]));
        assert!(rejected(&out[3]).contains("AVRO"), "{}", rejected(&out[3]));
        assert!(rejected(&out[4]).contains("no message"), "{}", rejected(&out[4]));
    }

    #[test]
    fn a_reader_without_its_message_refuses_the_config() {
        let e = sluice_guest::configure::<ProtobufDecoder>(&serde_json::json!({"reader_schema": V1}).to_string());
        assert!(e.err().unwrap().contains("reader_message"));
        let e = sluice_guest::configure::<ProtobufDecoder>(
            &serde_json::json!({"reader_schema": V1, "reader_message": "shop.Nope"}).to_string(),
        );
        assert!(e.err().unwrap().contains("shop.Nope"));
        let e = sluice_guest::configure::<ProtobufDecoder>(
            &serde_json::json!({"reader_schema": "message {", "reader_message": "x"}).to_string(),
        );
        assert!(e.err().unwrap().contains("reader_schema"));
    }
}
