//! Records framed for a schema registry (Confluent's wire format: a zero
//! byte, the schema id in 4 bytes big-endian, then the encoded record),
//! and the schemas the host fetched for them.
//!
//! A decoder reads the id with [`framed`], asks [`schema`] once per new
//! id and keeps what it parsed: ids never change what they mean, and the
//! host answers from memory, having fetched every id of the batch before
//! the plugin was called (`wit/plugin.wit`, `schema`).

/// A schema as the registry holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredSchema {
    /// `AVRO`, `PROTOBUF` or `JSON`.
    pub schema_type: String,
    /// Its text: Avro's JSON, a `.proto` file, a JSON Schema.
    pub text: String,
}

/// The reason a record that [`framed`] finds no header in is rejected.
pub const NOT_FRAMED: &str =
    "not in the schema registry's wire format: a record starts with a zero byte and a 4-byte schema id";

/// The text of the schema under `id` when it is of `schema_type` (`AVRO`,
/// `PROTOBUF`, `JSON`); else the record's reason, naming the id.
pub fn schema_text(id: u32, schema_type: &str) -> Result<String, String> {
    let RegisteredSchema { schema_type: found, text } = schema(id)?;
    if found == schema_type { Ok(text) } else { Err(format!("schema id {id} is a {found} schema, not {schema_type}")) }
}

/// The schema id a payload is framed with, and the bytes after the
/// header; none when the payload is not framed (it does not start with a
/// zero byte, or is shorter than the header).
pub fn framed(payload: &[u8]) -> Option<(u32, &[u8])> {
    match payload {
        [0, a, b, c, d, rest @ ..] => Some((u32::from_be_bytes([*a, *b, *c, *d]), rest)),
        _ => None,
    }
}

/// The schema the registry holds under `id`. The error is the record's
/// fault and says why (the registry has no such id, or the pipeline has
/// no `[schema_registry]`): reject the record with it.
pub fn schema(id: u32) -> Result<RegisteredSchema, String> {
    #[cfg(all(target_arch = "wasm32", not(feature = "contract-0-1")))]
    {
        let (schema_type, text) = crate::__contract::schema(id)?;
        Ok(RegisteredSchema { schema_type, text })
    }
    #[cfg(all(target_arch = "wasm32", feature = "contract-0-1"))]
    {
        Err(format!("schema id {id}: schemas from a registry need the 0.2 contract"))
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        native::get(id)
    }
}

/// A schema another one references (Confluent's schema references).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The name the referencing schema uses: an Avro type's full name, a
    /// Protobuf import's path, a JSON Schema `$ref`.
    pub name: String,
    /// Its text.
    pub text: String,
}

/// Every schema the one under `id` references, directly or through
/// another, each before any that needs it: the order to parse them in.
/// Empty for a schema with no references. The errors are [`schema`]'s.
pub fn references(id: u32) -> Result<Vec<Reference>, String> {
    #[cfg(all(target_arch = "wasm32", not(feature = "contract-0-1")))]
    {
        let listed = crate::__contract::schema_references(id)?;
        Ok(listed.into_iter().map(|(name, text)| Reference { name, text }).collect())
    }
    #[cfg(all(target_arch = "wasm32", feature = "contract-0-1"))]
    {
        Err(format!("schema id {id}: schemas from a registry need the 0.2 contract"))
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        native::references(id)
    }
}

/// Natively (unit tests, benches) the host is not there: schemas are
/// registered here instead, per thread.
#[cfg(not(target_arch = "wasm32"))]
pub mod native {
    use std::cell::RefCell;
    use std::collections::HashMap;

    use super::{Reference, RegisteredSchema};

    thread_local! {
        static SCHEMAS: RefCell<HashMap<u32, RegisteredSchema>> = RefCell::new(HashMap::new());
        static REFERENCES: RefCell<HashMap<u32, Vec<Reference>>> = RefCell::new(HashMap::new());
    }

    /// What [`super::schema`] answers for `id` on this thread from now on.
    pub fn register(id: u32, schema_type: &str, text: &str) {
        let schema = RegisteredSchema { schema_type: schema_type.into(), text: text.into() };
        SCHEMAS.with(|s| s.borrow_mut().insert(id, schema));
        REFERENCES.with(|r| r.borrow_mut().remove(&id));
    }

    /// [`register`], with the schemas it references as `(name, text)`,
    /// each before any that needs it.
    pub fn register_with_references(id: u32, schema_type: &str, text: &str, references: &[(&str, &str)]) {
        register(id, schema_type, text);
        let listed = references.iter().map(|(name, text)| Reference { name: name.to_string(), text: text.to_string() });
        REFERENCES.with(|r| r.borrow_mut().insert(id, listed.collect()));
    }

    pub(super) fn references(id: u32) -> Result<Vec<Reference>, String> {
        get(id)?;
        Ok(REFERENCES.with(|r| r.borrow().get(&id).cloned()).unwrap_or_default())
    }

    pub(super) fn get(id: u32) -> Result<RegisteredSchema, String> {
        SCHEMAS
            .with(|s| s.borrow().get(&id).cloned())
            .ok_or_else(|| format!("schema id {id} is not in the schema registry"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_framed_payload_gives_its_id_and_body() {
        assert_eq!(framed(&[0, 0, 0, 1, 0, 9, 8]), Some((256, &[9u8, 8][..])));
        assert_eq!(framed(&[0, 0, 0, 0, 3]), Some((3, &[][..])));
        assert_eq!(framed(&[1, 0, 0, 0, 3]), None);
        assert_eq!(framed(&[0, 0, 0]), None);
    }

    #[test]
    fn natively_a_schema_is_what_the_test_registered() {
        native::register(41, "AVRO", "\"long\"");
        assert_eq!(schema(41).map(|s| s.text).as_deref(), Ok("\"long\""));
        assert!(schema(42).unwrap_err().contains("42"));
    }
}
