//! JSON Schemas of the config values the SDK reads (feature `schema`),
//! for the book's reference of first-party plugins: a plugin derives
//! `schemars::JsonSchema` on its config and names these for the fields the
//! SDK parses. Never in a plugin's wasm build.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

/// A duration as written: `500ms`, `90s`, `15m`, `24h`, `7d`, `1h30m`.
pub struct DurationText;

impl JsonSchema for DurationText {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "pattern": "^([0-9]+(ns|us|ms|s|m|h|d|w))+$" })
    }
}

impl JsonSchema for crate::time::Format {
    fn schema_name() -> Cow<'static, str> {
        "TimestampFormat".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "anyOf": [
                { "type": "string" },
                {
                    "type": "object",
                    "description": "A format with what its text leaves out.",
                    "properties": {
                        "format": { "type": "string", "description": "A named format or a pattern of items." },
                        "year": { "type": "integer", "description": "The year of a format that writes none (otherwise: this year, or last year for a time more than a day ahead)." },
                        "zone": { "type": "string", "description": "The zone of a time written without one: `UTC`, an offset (`+05:30`) or an IANA name (`Europe/Berlin`). Default UTC, with a warning at setup." },
                        "ambiguous": { "enum": ["reject", "earliest", "latest"], "description": "A local time a daylight-saving change skipped or repeated: rejected (the default), or its earliest or latest instant." }
                    },
                    "required": ["format"],
                    "additionalProperties": false
                }
            ]
        })
    }
}
