//! Field access in JSON events by dotted path (`user.id`, `items.0.sku`).

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

mod scan;

/// A JSON object whose top-level values are kept as unparsed slices of the
/// payload: the whole document is validated, but only the fields asked for
/// are turned into values. Several times cheaper than a `Value` when a
/// plugin reads two fields of a large event.
///
/// The fields are a list, not a map: an event has a handful of them, and a
/// look-up by comparing names costs less than hashing each one as it is
/// read. Names without escapes borrow the payload, and up to 16 fields sit
/// in the object itself: parsing a usual record allocates nothing.
pub struct RawObject<'a> {
    fields: scan::Fields<'a>,
}

impl<'a> RawObject<'a> {
    /// Parse `payload` as one JSON object; the error says why it is not.
    #[inline(always)]
    pub fn parse(payload: &'a [u8]) -> Result<RawObject<'a>, String> {
        // The scan settles the usual case; what it is unsure of (invalid
        // input, or the rare shapes it leaves alone) serde_json decides,
        // and words the error.
        match scan::object(payload) {
            Some(fields) => Ok(RawObject { fields }),
            None => Self::parse_with_serde(payload),
        }
    }

    /// An object of no fields, to [`RawObject::reparse`] into.
    pub fn empty() -> RawObject<'a> {
        RawObject { fields: scan::Fields::default() }
    }

    /// [`RawObject::parse`] in place: a batch's payloads parsed one after
    /// another into one object move no field list (sixteen fields inline
    /// are 640 bytes, copied at each return otherwise). After an error the
    /// object holds no fields.
    pub fn reparse(&mut self, payload: &'a [u8]) -> Result<(), String> {
        if scan::object_reusing(payload, &mut self.fields) {
            return Ok(());
        }
        match Self::parse_with_serde(payload) {
            Ok(parsed) => {
                *self = parsed;
                Ok(())
            }
            Err(reason) => {
                *self = RawObject::empty();
                Err(reason)
            }
        }
    }

    #[inline(never)]
    fn parse_with_serde(payload: &'a [u8]) -> Result<RawObject<'a>, String> {
        let text = std::str::from_utf8(payload)
            .map_err(|e| format!("payload is not valid UTF-8 (invalid byte at offset {})", e.valid_up_to()))?;
        match serde_fields(text) {
            // Valid: the scan reads the fields without its depth limit
            // (its tests hold it to accepting every object serde_json
            // accepts, then).
            Ok(_) => match scan::object_accepted(payload) {
                Some(fields) => Ok(RawObject { fields }),
                None => Err("payload is JSON that the SDK's scan cannot read (a bug: please report it)".into()),
            },
            Err(e) => match serde_json::from_str::<Value>(text) {
                Ok(other) => Err(format!("payload is JSON but not an object (it is {})", kind(&other))),
                Err(_) => Err(format!("payload is not valid JSON: {e}")),
            },
        }
    }

    /// The raw value of a top-level field; the last one when the name
    /// repeats (as a map built from the object would keep).
    fn field(&self, name: &str) -> Option<&scan::Field<'a>> {
        self.fields.as_slice().iter().rev().find(|f| f.is_named(name))
    }

    /// The string at a dotted path, or none when the path is absent or
    /// holds something else. A top-level string without escapes is
    /// borrowed from the payload: reading an id or a timestamp this way
    /// builds no `Value` and allocates nothing (in a plugin, each
    /// allocation is the guest's malloc, per record).
    pub fn get_str(&self, path: &str) -> Option<Cow<'a, str>> {
        if !path.bytes().any(|c| c == b'.') {
            let field = self.field(path)?;
            // Validated: a string is `"..."`, and without an escape its
            // text is the bytes between the quotes.
            if let [b'"', text @ .., b'"'] = field.value
                && !field.escaped
            {
                return std::str::from_utf8(text).ok().map(Cow::Borrowed);
            }
        }
        match self.get(path)? {
            Value::String(s) => Some(Cow::Owned(s)),
            _ => None,
        }
    }

    /// The JSON text of the value at a dotted path, as written for a
    /// top-level field (a string keeps its quotes and escapes), written
    /// anew from the parsed value for a nested one; none when the path is
    /// absent.
    pub fn get_raw(&self, path: &str) -> Option<Cow<'a, [u8]>> {
        if !path.bytes().any(|c| c == b'.') {
            return self.field(path).map(|f| Cow::Borrowed(f.value));
        }
        self.get(path).map(|v| Cow::Owned(v.to_string().into_bytes()))
    }

    /// The value at a dotted path, parsed; only that value is parsed.
    pub fn get(&self, path: &str) -> Option<Value> {
        let (first, rest) = match path.split_once('.') {
            Some((f, r)) => (f, Some(r)),
            None => (path, None),
        };
        let value: Value = serde_json::from_slice(self.field(first)?.value).ok()?;
        match rest {
            Some(r) => get(&value, r).cloned(),
            None => Some(value),
        }
    }
}

/// An object's fields in order as serde_json reads them (names decoded,
/// values as written): the judge of what the scan leaves to it, and its
/// reference in the scan's tests.
fn serde_fields(text: &str) -> Result<Vec<(Cow<'_, str>, &RawValue)>, serde_json::Error> {
    serde_json::from_str::<Fields<'_>>(text).map(|Fields(fields)| fields)
}

/// An object's fields in order, read by serde_json.
struct Fields<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Fields<'a> {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct Object<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for Object<'a> {
            type Value = Fields<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Fields<'a>, M::Error> {
                let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some((Name(name), value)) = map.next_entry::<Name<'a>, &'a RawValue>()? {
                    fields.push((name, value));
                }
                Ok(Fields(fields))
            }
        }
        de.deserialize_map(Object(PhantomData))
    }
}

/// A field name: borrowed from the payload unless it has escapes (serde's
/// own `Cow<str>` always copies).
struct Name<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Name<'a> {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct Text<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for Text<'a> {
            type Value = Name<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Name<'a>, E> {
                Ok(Name(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Name<'a>, E> {
                Ok(Name(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Name<'a>, E> {
                Ok(Name(Cow::Owned(v)))
            }
        }
        de.deserialize_str(Text(PhantomData))
    }
}

/// The value at `path` (dot-separated keys; a number indexes an array).
pub fn get<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(value, |v, key| match v {
        Value::Object(map) => map.get(key),
        Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

/// The value at `path` of an object (the usual root of an event).
pub fn get_in<'a>(map: &'a serde_json::Map<String, Value>, path: &str) -> Option<&'a Value> {
    let (first, rest) = match path.split_once('.') {
        Some((f, r)) => (f, Some(r)),
        None => (path, None),
    };
    let v = map.get(first)?;
    match rest {
        Some(r) => get(v, r),
        None => Some(v),
    }
}

/// A scalar as an id: strings as they are, numbers and booleans as written.
pub fn as_id(value: &Value) -> Option<String> {
    match value {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Where a decoded record's event id and time are, as the first-party
/// decoders' configs name them (`id_field`, `timestamp_field`,
/// `timestamp_format`, `require_id`).
pub struct IdAndTime<'a> {
    pub id_field: Option<&'a str>,
    pub timestamp_field: Option<&'a str>,
    pub timestamp_format: &'a crate::time::Format,
    pub require_id: bool,
}

impl IdAndTime<'_> {
    /// The id and the time (ns) of `value`: an id a scalar at `id_field`
    /// ([`as_id`]), a time read with the format (a string as text, a number
    /// as itself; a null as none). The error is the record's reason:
    /// `require_id` and no id, or a time that does not parse.
    pub fn read(&self, value: &Value) -> Result<(Option<String>, Option<i64>), String> {
        let at = |path: Option<&str>| path.and_then(|p| get(value, p));
        self.read_fields(at(self.id_field), at(self.timestamp_field))
    }

    /// [`IdAndTime::read`] of values a decoder found itself: what is at
    /// `id_field` and at `timestamp_field` (none where nothing is), so a
    /// decoder that writes its body straight from its record need not
    /// build a JSON value of all of it.
    pub fn read_fields(
        &self,
        id_value: Option<&Value>,
        timestamp_value: Option<&Value>,
    ) -> Result<(Option<String>, Option<i64>), String> {
        let mut id = None;
        if let Some(field) = self.id_field {
            id = id_value.and_then(as_id);
            if id.is_none() && self.require_id {
                return Err(format!("id field {field:?} is missing or not a scalar"));
            }
        }
        let mut timestamp = None;
        if let Some(field) = self.timestamp_field
            && let Some(v) = timestamp_value.filter(|v| !v.is_null())
        {
            let format = self.timestamp_format;
            let now = if format.needs_year() { crate::now() } else { 0 };
            let parsed = match v {
                Value::String(s) => format.parse(s, now),
                v => format.parse_json(v, now),
            };
            timestamp = Some(parsed.map_err(|e| format!("timestamp field {field:?}: {e}"))?);
        }
        Ok((id, timestamp))
    }
}

/// What kind of JSON value this is, for messages.
pub fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_object_reparsed_holds_only_the_last_payload() {
        let many: String = (0..20).map(|k| format!(r#""f{k}":{k},"#)).collect();
        let wide = format!("{{{many}\"id\":\"wide\"}}");
        let mut o = RawObject::empty();
        assert_eq!(o.reparse(wide.as_bytes()), Ok(()));
        assert_eq!(o.get_str("id").as_deref(), Some("wide"));
        assert_eq!(o.get("f19"), Some(json!(19)));
        // Fewer fields than the one before, which spilled past the inline ones.
        assert_eq!(o.reparse(br#"{"id":"narrow"}"#), Ok(()));
        assert_eq!(o.get_str("id").as_deref(), Some("narrow"));
        assert_eq!(o.get("f19"), None);
        assert!(o.reparse(br#"{"id":"#).is_err_and(|e| e.contains("not valid JSON")));
        assert_eq!(o.get_str("id"), None, "a failed parse leaves no fields behind");
        // What the scan leaves to serde_json still reparses.
        assert_eq!(o.reparse(br#"{"id":"\u00e9"}"#), Ok(()));
        assert_eq!(o.get_str("id").as_deref(), Some("é"));
    }

    #[test]
    fn raw_objects_validate_everything_and_parse_what_is_asked() {
        let o = RawObject::parse(br#"{"id":7,"user":{"name":"ann"},"esc\"aped":1,"big":[1,2,{"x":null}]}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(o.get("id"), Some(json!(7)));
        assert_eq!(o.get("user.name"), Some(json!("ann")));
        assert_eq!(o.get("esc\"aped"), Some(json!(1)));
        assert_eq!(o.get("nope"), None);
        assert!(RawObject::parse(b"[1]").err().unwrap_or_default().contains("not an object"));
        assert!(RawObject::parse(br#"{"a":[1,}"#).err().unwrap_or_default().contains("not valid JSON"));
        assert!(RawObject::parse(&[b'{', 0xff, b'}']).err().unwrap_or_default().contains("UTF-8"));
        assert!(RawObject::parse(br#"{"a":1}{"b":2}"#).err().unwrap_or_default().contains("not valid JSON"));
        assert!(RawObject::parse(br#""text""#).err().unwrap_or_default().contains("it is a string"));
    }

    /// Past the scan's depth limit serde_json judges, and the fields are
    /// still read, at any depth serde_json accepts inside a value (it has
    /// no limit there): without recursion, so no stack runs out.
    #[test]
    fn deep_documents_are_judged_by_serde_and_still_read() {
        let nested = |n: usize| format!("{{\"id\":\"x\",\"a\":{}1{}}}", "[{\"b\":".repeat(n), "}]".repeat(n));
        for depth in [scan::MAX_DEPTH + 10, 100_000] {
            let doc = nested(depth);
            let o = RawObject::parse(doc.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(o.get_str("id").as_deref(), Some("x"), "depth {depth}");
        }
        let broken = nested(300).replacen("1", "1,", 1);
        let e = RawObject::parse(broken.as_bytes()).err().unwrap_or_default();
        assert!(e.contains("not valid JSON"), "{e}");
    }

    #[test]
    fn a_repeated_name_reads_its_last_value_and_escaped_names_are_found() {
        let o = RawObject::parse(br#"{"a":1,"\u0062":2,"a":3}"#).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(o.get("a"), Some(json!(3)), "the last of a repeated name, as a map would keep");
        assert_eq!(o.get("b"), Some(json!(2)), "an escaped name is read by its text");
    }

    #[test]
    fn strings_are_borrowed_unless_escaped_and_other_kinds_are_not_strings() {
        let o = RawObject::parse(br#"{"ts":"2024-05-01T12:00:00Z","e":"a\"b\u00e9","n":5,"o":{"s":"in"},"z":""}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(o.get_str("ts"), Some(Cow::Borrowed("2024-05-01T12:00:00Z"))));
        assert_eq!(o.get_str("e").as_deref(), Some("a\"b\u{e9}"), "escapes decoded");
        assert!(matches!(o.get_str("e"), Some(Cow::Owned(_))));
        assert_eq!(o.get_str("z").as_deref(), Some(""));
        assert_eq!(o.get_str("o.s").as_deref(), Some("in"), "a dotted path");
        assert_eq!(o.get_str("n"), None, "a number is not a string");
        assert_eq!(o.get_str("o"), None);
        assert_eq!(o.get_str("missing"), None);
        assert_eq!(o.get_str("o.missing"), None);
    }

    #[test]
    fn dotted_paths_walk_objects_and_arrays() {
        let v = json!({"a": {"b": [10, {"c": "x"}]}, "n": 5});
        assert_eq!(get(&v, "a.b.1.c"), Some(&json!("x")));
        assert_eq!(get(&v, "a.b.0"), Some(&json!(10)));
        assert_eq!(get(&v, "a.z"), None);
        assert_eq!(get(&v, "n.x"), None);
        let Value::Object(map) = &v else { panic!("object") };
        assert_eq!(get_in(map, "a.b.1.c"), Some(&json!("x")));
        assert_eq!(as_id(&json!(42)), Some("42".into()));
        assert_eq!(as_id(&json!("")), None);
        assert_eq!(as_id(&json!(null)), None);
    }
}
