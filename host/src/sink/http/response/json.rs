//! A JSON answer parsed without copying it: strings and keys borrow from
//! the body where they hold no escapes, objects are lists of pairs. A
//! bulk answer of 1,000 items is read once per request, and a tree of
//! `serde_json::Value` (a map and an owned string per key of every item)
//! cost more than reading it.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json<'a> {
    Null,
    Bool(bool),
    Unsigned(u64),
    Signed(i64),
    Float(f64),
    Str(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    Object(Vec<(Cow<'a, str>, Json<'a>)>),
}

impl<'a> Json<'a> {
    pub(crate) fn parse(body: &'a [u8]) -> Result<Json<'a>, serde_json::Error> {
        serde_json::from_slice(body)
    }

    pub(crate) fn empty_object() -> Json<'static> {
        Json::Object(Vec::new())
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }

    pub(crate) fn as_array(&self) -> Option<&[Json<'a>]> {
        match self {
            Json::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The member `key` of an object (the first, if a key repeats).
    pub(crate) fn get(&self, key: &str) -> Option<&Json<'a>> {
        match self {
            Json::Object(o) => o.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// A whole number, or a string holding one (ClickHouse's summary and
    /// OTLP's int64 fields quote their counts).
    pub(crate) fn count(&self) -> Option<u64> {
        match self {
            Json::Unsigned(n) => Some(*n),
            Json::Signed(n) => u64::try_from(*n).ok(),
            Json::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    /// For reasons: a string as it is, `null` as nothing, anything else as
    /// its JSON text.
    pub(crate) fn text(&self) -> String {
        match self {
            Json::Str(s) => s.to_string(),
            Json::Null => String::new(),
            other => other.to_string(),
        }
    }
}

impl fmt::Display for Json<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let quoted = |s: &str| serde_json::to_string(s).unwrap_or_default();
        match self {
            Json::Null => f.write_str("null"),
            Json::Bool(b) => write!(f, "{b}"),
            Json::Unsigned(n) => write!(f, "{n}"),
            Json::Signed(n) => write!(f, "{n}"),
            Json::Float(x) => write!(f, "{x}"),
            Json::Str(s) => f.write_str(&quoted(s)),
            Json::Array(a) => {
                f.write_str("[")?;
                for (i, v) in a.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str("]")
            }
            Json::Object(o) => {
                f.write_str("{")?;
                for (i, (k, v)) in o.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{}:{v}", quoted(k))?;
                }
                f.write_str("}")
            }
        }
    }
}

struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Key<'de>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for Json<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Json<'de>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Json<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("JSON")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Json<'de>, E> {
                Ok(Json::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<Json<'de>, E> {
                Ok(Json::Null)
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Json<'de>, E> {
                Ok(Json::Bool(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Json<'de>, E> {
                Ok(Json::Unsigned(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Json<'de>, E> {
                Ok(Json::Signed(v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json<'de>, E> {
                Ok(Json::Float(v))
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Json<'de>, E> {
                Ok(Json::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Json<'de>, E> {
                Ok(Json::Str(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Json<'de>, E> {
                Ok(Json::Str(Cow::Owned(v)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json<'de>, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(v) = seq.next_element()? {
                    out.push(v);
                }
                Ok(Json::Array(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json<'de>, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some((Key(k), v)) = map.next_entry::<Key<'de>, Json<'de>>()? {
                    out.push((k, v));
                }
                Ok(Json::Object(out))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_borrow_unless_escaped_and_the_text_round_trips() {
        let body = br#"{"a":"plain","b":"esc\"aped","n":[1,-2,2.5,"7"],"o":{"x":null,"y":true}}"#;
        let v = Json::parse(body).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(v.get("a"), Some(Json::Str(Cow::Borrowed("plain")))));
        assert!(matches!(v.get("b"), Some(Json::Str(Cow::Owned(s))) if s == "esc\"aped"));
        let n = v.get("n").and_then(Json::as_array).unwrap_or_default();
        assert_eq!(n.iter().map(Json::count).collect::<Vec<_>>(), vec![Some(1), None, None, Some(7)]);
        let again: serde_json::Value = serde_json::from_str(&v.to_string()).unwrap_or_default();
        assert_eq!(again, serde_json::from_slice::<serde_json::Value>(body).unwrap_or_default());
        assert_eq!(v.get("o").map(Json::text), Some(r#"{"x":null,"y":true}"#.to_string()));
    }
}
