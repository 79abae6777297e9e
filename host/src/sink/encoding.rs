//! `[sink.encoding]` of the Kafka sink: each record value written in Avro
//! or Protobuf (or JSON checked against a JSON Schema) with a schema from
//! the config, registered with the run's
//! `[schema_registry]` under a subject, and framed with its id in
//! Confluent's wire format, as a Confluent serializer writes it; a
//! consumer with the registry's deserializer reads it as any other.
//!
//! ```toml
//! [sink.encoding]
//! format = "avro"              # or "protobuf", "json"
//! schema = '''{"type": "record", "name": "Click", "fields": [...]}'''
//! subject = "topic"            # <topic>-value; or "record", "topic_record"
//! ```
//!
//! The id is asked once, at the first batch (register, or look up with
//! `register = false`), and kept: a registry that cannot answer makes the
//! batch fail as a whole, which the breaker counts and retries (lag);
//! an event that does not fit the schema is rejected into the quarantine
//! with the reason.

use serde::Deserialize;

use crate::problem::Problems;

/// What the record values are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EncodingFormat {
    /// Avro's binary encoding; `schema` is Avro's JSON.
    Avro,
    /// Protobuf; `schema` is a `.proto` file's text.
    Protobuf,
    /// The event's JSON as it is, checked against `schema`, a JSON Schema.
    Json,
}

impl EncodingFormat {
    /// The registry's name for it.
    pub(crate) fn schema_type(self) -> &'static str {
        match self {
            EncodingFormat::Avro => "AVRO",
            EncodingFormat::Protobuf => "PROTOBUF",
            EncodingFormat::Json => "JSON",
        }
    }
}

/// The subject the schema is registered under (Confluent's subject name
/// strategies).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SubjectStrategy {
    /// `<topic>-value`: one schema (and its versions) per topic.
    #[default]
    Topic,
    /// The record's full name (`shop.Click`): one per record type, across
    /// topics.
    Record,
    /// `<topic>-<full name>`: per topic and record type.
    TopicRecord,
}

/// `[sink.encoding]`.
#[derive(Debug, Clone, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EncodingConfig {
    /// `avro`, `protobuf` or `json`.
    pub format: EncodingFormat,
    /// The schema each record value is written with: Avro's JSON, a
    /// `.proto` file (it may import the well-known types), or a JSON
    /// Schema (its `title` names the record for the `record` strategies).
    pub schema: String,
    /// Protobuf: the message events are written as, by its full name
    /// (`shop.Click`). Unset: the file's first message.
    #[serde(default)]
    pub message: Option<String>,
    /// How the subject is named.
    #[serde(default)]
    pub subject: SubjectStrategy,
    /// Register the schema under the subject (an identical schema gets its
    /// existing id); `false` only looks it up, for a registry where
    /// producers may not register.
    #[serde(default = "yes")]
    pub register: bool,
}

fn yes() -> bool {
    true
}

impl EncodingConfig {
    /// Every problem, keyed under `encoding`: the schema is compiled here,
    /// so a schema that does not parse stops the start.
    pub(crate) fn validate(&self, p: &mut Problems) {
        // Without the `kafka` feature the sink itself is refused.
        #[cfg(feature = "kafka")]
        if let Err(e) = Schema::compile(self) {
            p.add(e.0, e.1);
        }
        #[cfg(not(feature = "kafka"))]
        let _ = p;
    }
}

/// A compiled writer schema.
#[cfg(feature = "kafka")]
pub(crate) enum Schema {
    Avro(apache_avro::Schema),
    /// The message, and its indexes in the file as the wire format
    /// writes them.
    Protobuf(prost_reflect::MessageDescriptor, Vec<u8>),
    /// The validator, and the schema's `title` (the record's name).
    Json(Box<jsonschema::Validator>, String),
}

#[cfg(feature = "kafka")]
impl Schema {
    /// The schema of `cfg`, or the key at fault and why.
    pub(crate) fn compile(cfg: &EncodingConfig) -> Result<Schema, (&'static str, String)> {
        match cfg.format {
            EncodingFormat::Avro => {
                if cfg.message.is_some() {
                    return Err(("message", "only for format = \"protobuf\"".into()));
                }
                apache_avro::Schema::parse_str(&cfg.schema).map(Schema::Avro).map_err(|e| ("schema", e.to_string()))
            }
            EncodingFormat::Json => {
                if cfg.message.is_some() {
                    return Err(("message", "only for format = \"protobuf\"".into()));
                }
                let schema: serde_json::Value =
                    serde_json::from_str(&cfg.schema).map_err(|e| ("schema", format!("not JSON: {e}")))?;
                let title = schema.get("title").and_then(|t| t.as_str()).unwrap_or("record").to_string();
                let validator = jsonschema::validator_for(&schema).map_err(|e| ("schema", e.to_string()))?;
                Ok(Schema::Json(Box::new(validator), title))
            }
            EncodingFormat::Protobuf => {
                let pool = proto::compile(&cfg.schema).map_err(|e| ("schema", e))?;
                let file = pool.get_file_by_name(proto::FILE).ok_or(("schema", "no file".to_string()))?;
                let message = match &cfg.message {
                    Some(name) => pool
                        .get_message_by_name(name)
                        .ok_or_else(|| ("message", format!("the schema has no message {name:?}")))?,
                    None => file.messages().next().ok_or(("schema", "the file has no message".to_string()))?,
                };
                let indexes = proto::indexes(&message);
                Ok(Schema::Protobuf(message, indexes))
            }
        }
    }

    /// The full name of what is written (`shop.Click`), for the `record`
    /// subject strategies.
    pub(crate) fn full_name(&self) -> String {
        match self {
            // A named type (record, enum, fixed) by its full name; a
            // primitive has none, and takes its type's name.
            Schema::Avro(s) => s.name().map_or_else(|| s.canonical_form(), |n| n.fullname(None)),
            Schema::Protobuf(m, _) => m.full_name().to_string(),
            Schema::Json(_, title) => title.clone(),
        }
    }

    /// The subject under `topic` by `strategy`.
    pub(crate) fn subject(&self, strategy: SubjectStrategy, topic: &str) -> String {
        match strategy {
            SubjectStrategy::Topic => format!("{topic}-value"),
            SubjectStrategy::Record => self.full_name(),
            SubjectStrategy::TopicRecord => format!("{topic}-{}", self.full_name()),
        }
    }

    /// One event's JSON `value` as a record value framed with `id`,
    /// appended to `out`; or why the event does not fit the schema.
    pub(crate) fn encode(&self, id: u32, value: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        out.push(0);
        out.extend_from_slice(&id.to_be_bytes());
        match self {
            Schema::Avro(schema) => {
                let json: serde_json::Value = serde_json::from_slice(value).map_err(|e| e.to_string())?;
                let avro = apache_avro::types::Value::from(json)
                    .resolve(schema)
                    .map_err(|e| format!("does not fit the Avro schema: {e}"))?;
                let bytes = apache_avro::to_avro_datum(schema, avro).map_err(|e| e.to_string())?;
                out.extend(bytes);
            }
            Schema::Protobuf(message, indexes) => {
                let mut de = serde_json::Deserializer::from_slice(value);
                let m = prost_reflect::DynamicMessage::deserialize(message.clone(), &mut de)
                    .map_err(|e| format!("does not fit the Protobuf message {}: {e}", message.full_name()))?;
                out.extend_from_slice(indexes);
                out.extend(prost::Message::encode_to_vec(&m));
            }
            Schema::Json(validator, _) => {
                let json: serde_json::Value = serde_json::from_slice(value).map_err(|e| e.to_string())?;
                let broken: Vec<String> = validator
                    .iter_errors(&json)
                    .take(3)
                    .map(|e| {
                        let at = e.instance_path().to_string();
                        format!("{}: {e}", if at.is_empty() { "/" } else { &at })
                    })
                    .collect();
                if !broken.is_empty() {
                    return Err(format!("does not fit the JSON Schema: {}", broken.join("; ")));
                }
                // The text as the sink rendered it: no re-serialization.
                out.extend_from_slice(value.trim_ascii_end());
            }
        }
        Ok(())
    }
}

/// Protobuf's side: a `.proto` text compiled with the well-known types.
#[cfg(feature = "kafka")]
pub(crate) mod proto {
    use prost_reflect::{DescriptorPool, MessageDescriptor};
    use protox::file::{ChainFileResolver, File, FileResolver, GoogleFileResolver};

    /// The name the config's schema is compiled under.
    pub(crate) const FILE: &str = "schema.proto";

    struct OneFile(String);

    impl FileResolver for OneFile {
        fn open_file(&self, name: &str) -> Result<File, protox::Error> {
            if name == FILE { File::from_source(name, &self.0) } else { Err(protox::Error::file_not_found(name)) }
        }
    }

    pub(crate) fn compile(text: &str) -> Result<DescriptorPool, String> {
        let mut files = ChainFileResolver::new();
        files.add(OneFile(text.to_string()));
        files.add(GoogleFileResolver::new());
        let mut compiler = protox::Compiler::with_file_resolver(files);
        compiler.include_imports(true);
        compiler.open_file(FILE).map_err(|e| e.to_string())?;
        Ok(compiler.descriptor_pool())
    }

    /// The message's path of indexes from the file down, written as the
    /// wire format wants: a lone `0` byte for the file's first message,
    /// else the count and each index as zigzag varints.
    pub(crate) fn indexes(message: &MessageDescriptor) -> Vec<u8> {
        let mut path = Vec::new();
        let mut at = message.clone();
        loop {
            let parent = at.parent_message();
            let siblings: Vec<MessageDescriptor> = match &parent {
                Some(p) => p.child_messages().collect(),
                None => at.parent_file().messages().collect(),
            };
            path.push(siblings.iter().position(|s| s.full_name() == at.full_name()).unwrap_or(0) as u64);
            match parent {
                Some(p) => at = p,
                None => break,
            }
        }
        path.reverse();
        if path == [0] {
            return vec![0];
        }
        let mut out = Vec::new();
        for n in std::iter::once(path.len() as u64).chain(path) {
            prost::encoding::encode_varint(n << 1, &mut out);
        }
        out
    }
}

#[cfg(test)]
#[cfg(feature = "kafka")]
mod tests {
    use super::*;

    fn cfg(format: EncodingFormat, schema: &str, message: Option<&str>) -> EncodingConfig {
        EncodingConfig {
            format,
            schema: schema.into(),
            message: message.map(Into::into),
            subject: SubjectStrategy::Topic,
            register: true,
        }
    }

    const AVRO: &str = r#"{"type":"record","name":"Click","namespace":"shop","fields":[
        {"name":"id","type":"string"},{"name":"n","type":"int"},
        {"name":"referrer","type":["null","string"],"default":null}]}"#;
    const PROTO: &str = "syntax = \"proto3\";\npackage shop;\nmessage Click { string id = 1; int64 n = 2; message Inner { int32 x = 1; } }\nmessage Other { string y = 1; }\n";

    #[test]
    fn avro_is_written_as_its_schema_reads_and_framed_with_the_id() {
        let s = Schema::compile(&cfg(EncodingFormat::Avro, AVRO, None)).unwrap();
        let mut out = Vec::new();
        s.encode(7, br#"{"id":"a","n":3,"referrer":"/x"}"#, &mut out).unwrap();
        assert_eq!(&out[..5], &[0, 0, 0, 0, 7]);
        let Schema::Avro(schema) = &s else { panic!() };
        let back = apache_avro::from_avro_datum(schema, &mut &out[5..], None).unwrap();
        let fields = match back {
            apache_avro::types::Value::Record(f) => f,
            other => panic!("{other:?}"),
        };
        assert_eq!(fields[1], ("n".to_string(), apache_avro::types::Value::Int(3)));
        assert_eq!(s.subject(SubjectStrategy::Record, "t"), "shop.Click");
        assert_eq!(s.subject(SubjectStrategy::TopicRecord, "t"), "t-shop.Click");
        assert_eq!(s.subject(SubjectStrategy::Topic, "t"), "t-value");
        let e = s.encode(7, br#"{"id":"a","n":"three"}"#, &mut Vec::new()).unwrap_err();
        assert!(e.contains("Avro schema"), "{e}");
    }

    #[test]
    fn protobuf_names_its_message_by_indexes() {
        let s = Schema::compile(&cfg(EncodingFormat::Protobuf, PROTO, None)).unwrap();
        let mut out = Vec::new();
        s.encode(9, br#"{"id":"a","n":3}"#, &mut out).unwrap();
        assert_eq!(&out[..6], &[0, 0, 0, 0, 9, 0], "the first message: a lone 0");
        let other = Schema::compile(&cfg(EncodingFormat::Protobuf, PROTO, Some("shop.Other"))).unwrap();
        let Schema::Protobuf(_, ix) = &other else { panic!() };
        assert_eq!(ix, &vec![2, 2], "count 1, index 1, zigzag");
        let inner = Schema::compile(&cfg(EncodingFormat::Protobuf, PROTO, Some("shop.Click.Inner"))).unwrap();
        let Schema::Protobuf(_, ix) = &inner else { panic!() };
        assert_eq!(ix, &vec![4, 0, 0], "count 2: Click (0), Inner (0)");
        let e = s.encode(9, br#"{"id":"a","nope":1}"#, &mut Vec::new()).unwrap_err();
        assert!(e.contains("shop.Click"), "{e}");
    }

    #[test]
    fn json_is_checked_against_its_schema_and_written_as_it_is() {
        let schema = r#"{"title":"Click","type":"object","required":["id"],"properties":{"n":{"type":"integer"}}}"#;
        let s = Schema::compile(&cfg(EncodingFormat::Json, schema, None)).unwrap();
        let mut out = Vec::new();
        s.encode(5, b"{\"id\":\"a\",\"n\":1}\n", &mut out).unwrap();
        assert_eq!(out, b"\0\0\0\0\x05{\"id\":\"a\",\"n\":1}");
        assert_eq!(s.subject(SubjectStrategy::Record, "t"), "Click");
        let e = s.encode(5, br#"{"n":"x"}"#, &mut Vec::new()).unwrap_err();
        assert!(e.contains("/n") && e.contains("id"), "{e}");
    }

    #[test]
    fn a_schema_that_does_not_compile_is_named_by_its_key() {
        for (c, key) in [
            (cfg(EncodingFormat::Avro, "{\"type\":\"nope\"}", None), "schema"),
            (cfg(EncodingFormat::Avro, AVRO, Some("x")), "message"),
            (cfg(EncodingFormat::Protobuf, "message {", None), "schema"),
            (cfg(EncodingFormat::Protobuf, PROTO, Some("shop.Nope")), "message"),
            (cfg(EncodingFormat::Json, "{\"type\": 12}", None), "schema"),
            (cfg(EncodingFormat::Json, "nope", None), "schema"),
        ] {
            let (k, _) = Schema::compile(&c).err().unwrap();
            assert_eq!(k, key);
        }
    }
}
