//! JSON pointers (RFC 6901) with one addition, `*`: every element of an
//! array, or every member of an object. A profile names where a backend
//! puts its per-item answers with them (`/items`, `/*/status` for
//! Elasticsearch's `{"create": {"status": 201}}`, `/status/*/failed` for
//! OpenObserve's per-stream counts) instead of code per backend.

use std::fmt;

use serde::{Deserialize, Deserializer};

use super::json::Json;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Each,
}

#[derive(Clone, PartialEq, Eq)]
pub struct Pointer {
    text: String,
    steps: Vec<Step>,
}

impl fmt::Debug for Pointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.text)
    }
}

impl fmt::Display for Pointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for Pointer {
    type Err = String;

    fn from_str(text: &str) -> Result<Pointer, String> {
        if text.is_empty() {
            return Ok(Pointer { text: String::new(), steps: Vec::new() });
        }
        let Some(rest) = text.strip_prefix('/') else {
            return Err(format!("{text:?}: a JSON pointer starts with / (\"/items\"; \"\" is the whole body)"));
        };
        let steps = rest
            .split('/')
            .map(|s| if s == "*" { Step::Each } else { Step::Key(s.replace("~1", "/").replace("~0", "~")) })
            .collect();
        Ok(Pointer { text: text.to_string(), steps })
    }
}

impl<'de> Deserialize<'de> for Pointer {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Pointer, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl Pointer {
    /// Every value the pointer reaches, in document order; none when a
    /// step is missing.
    pub(crate) fn all<'v, 'a>(&self, v: &'v Json<'a>) -> Vec<&'v Json<'a>> {
        let mut out = Vec::new();
        all_from(&self.steps, v, &mut out);
        out
    }

    /// The first value reached, found without collecting the others: the
    /// per-item look-ups of a bulk answer run this a few times per record.
    pub(crate) fn first<'v, 'a>(&self, v: &'v Json<'a>) -> Option<&'v Json<'a>> {
        first_from(&self.steps, v)
    }

    /// The sum of the numbers reached (a number written as a string
    /// counts: ClickHouse's summary quotes its counts); `None` when nothing
    /// is reached or something reached is not a count.
    pub(crate) fn sum(&self, v: &Json<'_>) -> Option<u64> {
        let found = self.all(v);
        if found.is_empty() {
            return None;
        }
        found.into_iter().try_fold(0u64, |acc, v| Some(acc.saturating_add(v.count()?)))
    }
}

/// The values below `v` in each element of an array or member of an
/// object (`*`), or in the member or element a key names.
fn children<'v, 'a>(step: &Step, v: &'v Json<'a>) -> Box<dyn Iterator<Item = &'v Json<'a>> + 'v> {
    match (step, v) {
        (Step::Each, Json::Array(a)) => Box::new(a.iter()),
        (Step::Each, Json::Object(o)) => Box::new(o.iter().map(|(_, v)| v)),
        (Step::Key(k), Json::Object(_)) => Box::new(v.get(k).into_iter()),
        (Step::Key(k), Json::Array(a)) => Box::new(k.parse::<usize>().ok().and_then(|i| a.get(i)).into_iter()),
        _ => Box::new(std::iter::empty()),
    }
}

fn first_from<'v, 'a>(steps: &[Step], v: &'v Json<'a>) -> Option<&'v Json<'a>> {
    let Some((step, rest)) = steps.split_first() else { return Some(v) };
    match (step, v) {
        (Step::Key(k), Json::Object(_)) => v.get(k).and_then(|x| first_from(rest, x)),
        _ => children(step, v).find_map(|x| first_from(rest, x)),
    }
}

fn all_from<'v, 'a>(steps: &[Step], v: &'v Json<'a>, out: &mut Vec<&'v Json<'a>>) {
    let Some((step, rest)) = steps.split_first() else {
        out.push(v);
        return;
    };
    for x in children(step, v) {
        all_from(rest, x, out);
    }
}

impl schemars::JsonSchema for Pointer {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "JsonPointer".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^(/.*)?$",
            "description": "A JSON pointer into the answer (`/items`), `*` for each element of an array."
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Pointer {
        s.parse().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn wildcards_reach_every_element_and_member() {
        let body = br#"{"items": [{"create": {"status": 201}}, {"index": {"status": 429}}],
                        "status": [{"successful": 2, "failed": 1}, {"successful": "3", "failed": 0}],
                        "a/b": {"~x": 7}}"#;
        let v = Json::parse(body).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p("/items").all(&v).len(), 1);
        assert_eq!(p("/items/*/*/status").all(&v), vec![&Json::Unsigned(201), &Json::Unsigned(429)]);
        assert_eq!(p("/items/1/index/status").first(&v), Some(&Json::Unsigned(429)));
        assert_eq!(p("/items/*/*/status").first(&v), Some(&Json::Unsigned(201)));
        assert_eq!(p("/status/*/successful").sum(&v), Some(5));
        assert_eq!(p("/status/*/failed").sum(&v), Some(1));
        assert_eq!(p("/a~1b/~0x").first(&v), Some(&Json::Unsigned(7)));
        assert_eq!(p("/nope").sum(&v), None, "nothing reached is not zero");
        assert_eq!(p("/items").sum(&v), None, "an array is not a count");
        assert_eq!(p("").first(&v), Some(&v));
        assert!("items".parse::<Pointer>().is_err());
    }
}
