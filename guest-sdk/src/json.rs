//! Field access in JSON events by dotted path (`user.id`, `items.0.sku`).

use serde_json::Value;

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
