//! Field access in JSON events by dotted path (`user.id`, `items.0.sku`).

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::Value;
use serde_json::value::RawValue;

/// A JSON object whose top-level values are kept as unparsed slices of the
/// payload: the whole document is validated, but only the fields asked for
/// are turned into values. Several times cheaper than a `Value` when a
/// plugin reads two fields of a large event.
pub struct RawObject<'a> {
    fields: HashMap<Cow<'a, str>, &'a RawValue>,
}

impl<'a> RawObject<'a> {
    /// Parse `payload` as one JSON object; the error says why it is not.
    pub fn parse(payload: &'a [u8]) -> Result<RawObject<'a>, String> {
        let text = std::str::from_utf8(payload)
            .map_err(|e| format!("payload is not valid UTF-8 (invalid byte at offset {})", e.valid_up_to()))?;
        match serde_json::from_str::<HashMap<Cow<'a, str>, &'a RawValue>>(text) {
            Ok(fields) => Ok(RawObject { fields }),
            Err(e) => match serde_json::from_str::<Value>(text) {
                Ok(other) => Err(format!("payload is JSON but not an object (it is {})", kind(&other))),
                Err(_) => Err(format!("payload is not valid JSON: {e}")),
            },
        }
    }

    /// The value at a dotted path, parsed; only that value is parsed.
    pub fn get(&self, path: &str) -> Option<Value> {
        let (first, rest) = match path.split_once('.') {
            Some((f, r)) => (f, Some(r)),
            None => (path, None),
        };
        let raw = self.fields.get(first)?;
        let value: Value = serde_json::from_str(raw.get()).ok()?;
        match rest {
            Some(r) => get(&value, r).cloned(),
            None => Some(value),
        }
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
