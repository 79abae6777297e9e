//! Request bodies: events copied through as the plugins wrote them, framed
//! as the backend wants.

use std::io::Write;

use super::config::{Compression, Encoding, Interpretation, Payload};
use crate::sink::Delivery;

pub struct Framing<'a> {
    pub encoding: Encoding,
    pub payload: &'a Payload,
    pub interpretation: Interpretation,
    pub index: Option<&'a str>,
}

impl Framing<'_> {
    /// The bytes of one event, without framing (what `batch.max_bytes`
    /// counts).
    pub fn event(&self, d: &Delivery, out: &mut Vec<u8>) {
        match self.payload {
            Payload::Envelope => {
                // Owned strings and checked JSON: cannot fail.
                let _ = serde_json::to_writer(&mut *out, d);
            }
            Payload::Event { id_field, timestamp_field } => {
                let mut extra = vec![(id_field.as_str(), d.id.as_str())];
                if let (Some(f), Some(ts)) = (timestamp_field, &d.timestamp) {
                    extra.push((f.as_str(), ts.as_str()));
                }
                row(d.event.get(), &extra, out);
            }
        }
    }

    pub fn body(&self, batch: &[&Delivery]) -> Vec<u8> {
        let mut out = Vec::with_capacity(batch.len() * 320);
        if self.interpretation == Interpretation::ElasticsearchBulk {
            for d in batch {
                let action = serde_json::json!({ "create": { "_index": self.index, "_id": d.id } });
                let _ = serde_json::to_writer(&mut out, &action);
                out.push(b'\n');
                self.event(d, &mut out);
                out.push(b'\n');
            }
            return out;
        }
        match self.encoding {
            Encoding::Ndjson => {
                for d in batch {
                    self.event(d, &mut out);
                    out.push(b'\n');
                }
            }
            Encoding::JsonArray => {
                out.push(b'[');
                for (i, d) in batch.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    self.event(d, &mut out);
                }
                out.push(b']');
            }
        }
        out
    }
}

/// `event` with `extra` fields set at its top level. The common cases are
/// spliced as text, so the event's bytes are copied, not re-serialized: an
/// object without those fields, or one that already holds the same value
/// (a plugin that took its id from that very field).
fn row(event: &str, extra: &[(&str, &str)], out: &mut Vec<u8>) {
    let mut missing = Vec::with_capacity(extra.len());
    let mut conflict = false;
    for (k, v) in extra {
        match field_at(event, k) {
            None => missing.push((*k, *v)),
            // Same value already there (compared as JSON text).
            Some(rest) if rest.starts_with('"') && rest[1..].starts_with(v) && rest[1 + v.len()..].starts_with('"') => {
            }
            Some(_) => conflict = true,
        }
    }
    let trimmed = event.trim_start();
    if let Some(rest) = trimmed.strip_prefix('{').filter(|_| !conflict) {
        out.push(b'{');
        for (i, (k, v)) in missing.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let _ = serde_json::to_writer(&mut *out, k);
            out.push(b':');
            let _ = serde_json::to_writer(&mut *out, v);
        }
        if !missing.is_empty() && !rest.trim_start().starts_with('}') {
            out.push(b',');
        }
        out.extend_from_slice(rest.as_bytes());
        return;
    }
    let mut map = match serde_json::from_str::<serde_json::Value>(event) {
        Ok(serde_json::Value::Object(m)) => m,
        Ok(other) => serde_json::Map::from_iter([("event".to_string(), other)]),
        Err(_) => serde_json::Map::from_iter([("event".to_string(), serde_json::Value::String(event.into()))]),
    };
    for (k, v) in extra {
        map.insert((*k).to_string(), serde_json::Value::String((*v).to_string()));
    }
    let _ = serde_json::to_writer(&mut *out, &map);
}

/// The text after `"key":` when `key` is the object's first member (what
/// a plugin that copies its input and took the id from that field
/// produces), else `Some("")` when the key appears anywhere (the caller
/// then takes the slow path, which is always right), else `None`.
fn field_at<'e>(event: &'e str, key: &str) -> Option<&'e str> {
    let first = event.trim_start().strip_prefix('{').map(str::trim_start);
    if let Some(after) = first.and_then(|f| f.strip_prefix('"')).and_then(|f| f.strip_prefix(key))
        && let Some(value) = after.strip_prefix('"').map(str::trim_start).and_then(|a| a.strip_prefix(':'))
    {
        return Some(value.trim_start());
    }
    event.contains(&format!("\"{key}\"")).then_some("")
}

pub fn compress(body: Vec<u8>, c: Compression) -> Vec<u8> {
    match c {
        Compression::None => body,
        Compression::Gzip => {
            let mut enc =
                flate2::write::GzEncoder::new(Vec::with_capacity(body.len() / 4), flate2::Compression::fast());
            // Writing into a Vec cannot fail.
            let _ = enc.write_all(&body);
            enc.finish().unwrap_or(body)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(id: &str, body: &str) -> Delivery {
        Delivery::new(id.into(), Some("2026-11-29T21:00:00Z".into()), body.as_bytes())
    }

    #[test]
    fn rows_get_the_id_and_timestamp_spliced_in() {
        let p = Payload::Event { id_field: "event_id".into(), timestamp_field: Some("ts".into()) };
        let f =
            Framing { encoding: Encoding::Ndjson, payload: &p, interpretation: Interpretation::Status, index: None };
        let body = f.body(&[
            &d("a", r#"{"msg":"x"}"#),
            &d("b", "{}"),
            &d("c", r#"{"event_id":"old","n":1}"#),
            &d("d", "[1]"),
            &d("e", r#"{"event_id":"e","n":2}"#),
            &d("f", r#"{"a":{"event_id":"f"}}"#),
        ]);
        let rows: Vec<serde_json::Value> = body
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .filter_map(|l| serde_json::from_slice(l).ok())
            .collect();
        assert_eq!(rows.len(), 6, "{}", String::from_utf8_lossy(&body));
        assert_eq!(rows[0], serde_json::json!({"event_id":"a","ts":"2026-11-29T21:00:00Z","msg":"x"}));
        assert_eq!(rows[1], serde_json::json!({"event_id":"b","ts":"2026-11-29T21:00:00Z"}));
        assert_eq!(rows[2]["event_id"], "c", "the sink's id wins over a field of the same name");
        assert_eq!(rows[3]["event"], serde_json::json!([1]));
        assert_eq!(
            rows[4],
            serde_json::json!({"event_id":"e","ts":"2026-11-29T21:00:00Z","n":2}),
            "the id is there already"
        );
    }

    #[test]
    fn arrays_and_bulk_actions() {
        let p = Payload::Envelope;
        let f = Framing {
            encoding: Encoding::JsonArray,
            payload: &p,
            interpretation: Interpretation::Openobserve,
            index: None,
        };
        let v: serde_json::Value = serde_json::from_slice(&f.body(&[&d("a", "{}"), &d("b", "{}")])).unwrap_or_default();
        assert_eq!(v[1]["id"], "b");
        let f = Framing {
            encoding: Encoding::Ndjson,
            payload: &p,
            interpretation: Interpretation::ElasticsearchBulk,
            index: Some("logs"),
        };
        let text = String::from_utf8(f.body(&[&d("a", "{}")])).unwrap_or_default();
        assert!(text.starts_with(r#"{"create":{"_id":"a","_index":"logs"}}"#), "{text}");
        assert_eq!(text.lines().count(), 2);
    }

    #[test]
    fn gzip_round_trips() {
        use std::io::Read;
        let z = compress(b"hello hello hello".to_vec(), Compression::Gzip);
        let mut s = String::new();
        let _ = flate2::read::GzDecoder::new(&z[..]).read_to_string(&mut s);
        assert_eq!(s, "hello hello hello");
    }
}
