//! JSON pointers (RFC 6901) with one addition, `*`: every element of an
//! array, or every member of an object. A profile names where a backend
//! puts its per-item answers with them (`/items`, `/*/status` for
//! Elasticsearch's `{"create": {"status": 201}}`, `/status/*/failed` for
//! OpenObserve's per-stream counts) instead of code per backend.

use std::fmt;

use serde::{Deserialize, Deserializer};

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
    pub fn all<'v>(&self, v: &'v serde_json::Value) -> Vec<&'v serde_json::Value> {
        let mut at = vec![v];
        for step in &self.steps {
            at = at
                .into_iter()
                .flat_map(|v| -> Vec<&serde_json::Value> {
                    match (step, v) {
                        (Step::Each, serde_json::Value::Array(a)) => a.iter().collect(),
                        (Step::Each, serde_json::Value::Object(o)) => o.values().collect(),
                        (Step::Key(k), serde_json::Value::Object(o)) => o.get(k).into_iter().collect(),
                        (Step::Key(k), serde_json::Value::Array(a)) => {
                            k.parse::<usize>().ok().and_then(|i| a.get(i)).into_iter().collect()
                        }
                        _ => Vec::new(),
                    }
                })
                .collect();
        }
        at
    }

    /// The first value reached.
    pub fn first<'v>(&self, v: &'v serde_json::Value) -> Option<&'v serde_json::Value> {
        self.all(v).into_iter().next()
    }

    /// The sum of the numbers reached (a number written as a string
    /// counts: ClickHouse's summary quotes its counts); `None` when nothing
    /// is reached or something reached is not a count.
    pub fn sum(&self, v: &serde_json::Value) -> Option<u64> {
        let found = self.all(v);
        if found.is_empty() {
            return None;
        }
        found.into_iter().try_fold(0u64, |acc, v| Some(acc.saturating_add(count(v)?)))
    }
}

/// A whole number, or a string holding one.
pub fn count(v: &serde_json::Value) -> Option<u64> {
    match v {
        serde_json::Value::Number(n) => n.as_u64(),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(s: &str) -> Pointer {
        s.parse().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn wildcards_reach_every_element_and_member() {
        let v = json!({"items": [{"create": {"status": 201}}, {"index": {"status": 429}}],
                       "status": [{"successful": 2, "failed": 1}, {"successful": "3", "failed": 0}],
                       "a/b": {"~x": 7}});
        assert_eq!(p("/items").all(&v).len(), 1);
        assert_eq!(p("/items/*/*/status").all(&v), vec![&json!(201), &json!(429)]);
        assert_eq!(p("/items/1/index/status").first(&v), Some(&json!(429)));
        assert_eq!(p("/status/*/successful").sum(&v), Some(5));
        assert_eq!(p("/status/*/failed").sum(&v), Some(1));
        assert_eq!(p("/a~1b/~0x").first(&v), Some(&json!(7)));
        assert_eq!(p("/nope").sum(&v), None, "nothing reached is not zero");
        assert_eq!(p("/items").sum(&v), None, "an array is not a count");
        assert_eq!(p("").first(&v), Some(&v));
        assert!("items".parse::<Pointer>().is_err());
    }
}
