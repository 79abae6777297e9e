//! What an event must be, in a case file: the one shape that plugin cases
//! (`sluice plugin test --cases`, the conformance kit) and config cases
//! (`sluice test --cases`) share, so that an author who writes one kind
//! can write the other. Each key checks only what it names.

use serde::{Deserialize, Deserializer};

/// An expected event. A key left out is not checked; `null` says the
/// event has none (no id, no time).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExpectEvent {
    /// The event id, exactly.
    #[serde(default, deserialize_with = "present")]
    pub id: Option<Option<String>>,
    /// The event time: RFC 3339 text (`"2024-05-01T12:00:00.5Z"`, as sinks
    /// write it) or integer nanoseconds since the epoch, the same instant.
    #[serde(default, deserialize_with = "instant")]
    pub timestamp: Option<Option<i64>>,
    /// The whole body, compared as JSON (key order and spacing aside).
    #[serde(default)]
    pub body: Option<serde_json::Value>,
    /// Fields the body must hold with these values; others may be there.
    #[serde(default)]
    pub fields: serde_json::Map<String, serde_json::Value>,
    /// Plugin cases: the sinks the plugin named for the event (its route,
    /// `Event::to_sinks` and the like), in order; `[]` when it names none.
    /// A config case says where each input's events went with its own
    /// `sinks` instead.
    #[serde(default)]
    pub sinks: Option<Vec<String>>,
}

/// `"id": null` is `Some(None)`, an absent key `None`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

fn instant<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<i64>>, D::Error> {
    use serde::de::Error;
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::Null => Ok(Some(None)),
        serde_json::Value::Number(n) if n.as_i64().is_some() => Ok(Some(n.as_i64())),
        serde_json::Value::String(text) => sluice_guest::time::Format::rfc3339()
            .parse(&text, 0)
            .map(|ns| Some(Some(ns)))
            .map_err(|e| D::Error::custom(format!("timestamp: {e}"))),
        other => Err(D::Error::custom(format!(
            "timestamp: RFC 3339 text (\"2024-05-01T12:00:00Z\"), integer nanoseconds since the epoch, or null \
             (no time); found {other}"
        ))),
    }
}

impl ExpectEvent {
    /// Where the route a plugin named (names joined by `,`) differs from
    /// `sinks`, when the case names them.
    pub(crate) fn check_route(&self, route: Option<&[u8]>) -> Result<(), String> {
        let Some(want) = &self.sinks else { return Ok(()) };
        let got: Vec<String> = route
            .map(|r| r.split(|b| *b == b',').map(|n| String::from_utf8_lossy(n).into_owned()).collect())
            .unwrap_or_default();
        if got == *want {
            return Ok(());
        }
        let shown = |names: &[String]| if names.is_empty() { "none".to_string() } else { names.join(", ") };
        Err(format!("routed to {}, expected {}", shown(&got), shown(want)))
    }

    /// Where the event differs from this expectation, named; the first
    /// difference only.
    pub(crate) fn check(&self, id: Option<&str>, timestamp: Option<i64>, body: &[u8]) -> Result<(), String> {
        if let Some(want) = &self.id
            && want.as_deref() != id
        {
            return Err(format!("id {}, expected {}", show_id(id), show_id(want.as_deref())));
        }
        if let Some(want) = self.timestamp
            && want != timestamp
        {
            return Err(format!("timestamp {}, expected {}", show_time(timestamp), show_time(want)));
        }
        if self.body.is_none() && self.fields.is_empty() {
            return Ok(());
        }
        let parsed: serde_json::Value = serde_json::from_slice(body)
            .map_err(|e| format!("body is not JSON ({e}): {}", String::from_utf8_lossy(body)))?;
        if let Some(want) = &self.body
            && *want != parsed
        {
            return Err(format!("body {parsed}, expected {want}"));
        }
        for (field, value) in &self.fields {
            match parsed.get(field) {
                Some(v) if v == value => {}
                Some(v) => return Err(format!("field {field:?} is {v}, expected {value}")),
                None => return Err(format!("no field {field:?} in {parsed}")),
            }
        }
        Ok(())
    }
}

fn show_id(id: Option<&str>) -> String {
    id.map_or("none".into(), |id| format!("{id:?}"))
}

/// RFC 3339, whichever way the case wrote it: one way to read both sides.
pub(crate) fn show_time(ns: Option<i64>) -> String {
    ns.map_or("none".into(), |ns| format!("{:?}", sluice_guest::time::format_rfc3339(ns)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expect(json: &str) -> ExpectEvent {
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_time_is_one_instant_however_the_case_writes_it() {
        let ns = 1_714_564_800_500_000_000;
        for json in [r#"{"timestamp":"2024-05-01T12:00:00.5Z"}"#, r#"{"timestamp":1714564800500000000}"#] {
            assert_eq!(expect(json).check(None, Some(ns), b"{}"), Ok(()), "{json}");
            let e = expect(json).check(None, Some(ns + 1), b"{}").unwrap_err();
            assert_eq!(e, "timestamp \"2024-05-01T12:00:00.500000001Z\", expected \"2024-05-01T12:00:00.5Z\"");
        }
        assert!(expect(r#"{"timestamp":null}"#).check(None, Some(ns), b"{}").is_err());
        assert_eq!(expect(r#"{"timestamp":null}"#).check(None, None, b"{}"), Ok(()));
        let e = serde_json::from_str::<ExpectEvent>(r#"{"timestamp":"yesterday"}"#).unwrap_err().to_string();
        assert!(e.starts_with("timestamp: cannot read \"yesterday\""), "{e}");
        let e = serde_json::from_str::<ExpectEvent>(r#"{"timestamp":1.5}"#).unwrap_err().to_string();
        assert!(e.contains("integer nanoseconds"), "{e}");
    }

    #[test]
    fn what_is_left_out_is_not_checked_and_null_means_none() {
        let body = br#"{"a":1,"b":{"c":2}}"#;
        assert_eq!(expect("{}").check(Some("x"), Some(1), body), Ok(()));
        assert_eq!(expect(r#"{"id":"x","fields":{"a":1}}"#).check(Some("x"), None, body), Ok(()));
        assert_eq!(expect(r#"{"id":null}"#).check(Some("x"), None, body), Err("id \"x\", expected none".into()));
        assert_eq!(expect(r#"{"body":{"b":{"c":2},"a":1}}"#).check(None, None, body), Ok(()));
        let e = expect(r#"{"body":{"a":1}}"#).check(None, None, body).unwrap_err();
        assert!(e.starts_with("body {\"a\":1,\"b\":{\"c\":2}}, expected {\"a\":1}"), "{e}");
        let e = expect(r#"{"fields":{"a":2}}"#).check(None, None, body).unwrap_err();
        assert_eq!(e, "field \"a\" is 1, expected 2");
        let e = expect(r#"{"fields":{"z":2}}"#).check(None, None, body).unwrap_err();
        assert!(e.starts_with("no field \"z\""), "{e}");
        assert!(serde_json::from_str::<ExpectEvent>(r#"{"bdy":{}}"#).is_err());
    }
}
