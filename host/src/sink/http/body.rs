//! Request bodies: events copied through as the plugins wrote them, framed
//! as the backend wants.

use std::io::Write;

use super::config::{Compression, LabelsConfig, Payload};
use super::response::profile::Render;
use crate::delivery::Delivery;

/// How a batch of events becomes one request body: a sink's render,
/// payload shape and the keys some renders need.
pub struct Framing<'a> {
    /// `Render::Lines` writes NDJSON; the sink resolves it from its
    /// `encoding` before framing.
    pub render: Render,
    /// The envelope, or the event with its id as a field.
    pub payload: &'a Payload,
    /// `_bulk`: the index of the `create` actions.
    pub index: Option<&'a str>,
    /// Loki: the streams' labels.
    pub labels: Option<&'a LabelsConfig>,
}

impl Framing<'_> {
    /// The bytes of one event, without framing (what `batch.max_bytes`
    /// counts).
    pub(crate) fn event(&self, d: &Delivery, out: &mut Vec<u8>) {
        match self.payload {
            Payload::Envelope => d.write_envelope(out),
            Payload::Event { id_field, timestamp_field } => {
                // The time formatted on the stack: no allocation per row.
                let mut buf = [0u8; sluice_guest::time::RFC3339_MAX];
                let mut extra = [(id_field.as_str(), d.id.as_str()), ("", "")];
                let mut n = 1;
                if let (Some(f), Some(ns)) = (timestamp_field, d.timestamp) {
                    let ts = sluice_guest::time::rfc3339_into(ns, &mut buf);
                    extra[1] = (f.as_str(), std::str::from_utf8(ts).unwrap_or_default());
                    n = 2;
                }
                row(d.event(), &extra[..n], out);
            }
        }
    }

    /// The request body of `batch`, uncompressed.
    pub fn body(&self, batch: &[&Delivery]) -> Vec<u8> {
        self.body_with_spans(batch, &mut Vec::new())
    }

    /// The body, and into `spans` each event's `(start, length)` in it (a
    /// classifier plugin matches a backend's "at byte …" to its record
    /// with them; a bulk action line is not part of its event's span).
    pub(crate) fn body_with_spans(&self, batch: &[&Delivery], spans: &mut Vec<(u32, u32)>) -> Vec<u8> {
        let mut out = Vec::with_capacity(batch.len() * 320);
        spans.clear();
        spans.reserve(batch.len());
        let mut span = |out: &Vec<u8>, start: usize| spans.push((start as u32, (out.len() - start) as u32));
        match self.render {
            Render::ElasticsearchBulk => {
                for d in batch {
                    let action = serde_json::json!({ "create": { "_index": self.index, "_id": d.id } });
                    let _ = serde_json::to_writer(&mut out, &action);
                    out.push(b'\n');
                    let start = out.len();
                    self.event(d, &mut out);
                    span(&out, start);
                    out.push(b'\n');
                }
            }
            Render::SplunkHec | Render::Gelf => {
                for d in batch {
                    let start = out.len();
                    if self.render == Render::SplunkHec {
                        super::formats::splunk_hec(&[d], &mut out);
                    } else {
                        super::formats::gelf(&[d], super::formats::host_name(), &mut out);
                    }
                    span(&out, start);
                }
            }
            Render::OtlpJson => super::formats::otlp_json(batch, &mut out, spans),
            Render::LokiPush => self.loki_push(batch, &mut out, spans),
            Render::Lines | Render::Ndjson => {
                for d in batch {
                    let start = out.len();
                    self.event(d, &mut out);
                    span(&out, start);
                    out.push(b'\n');
                }
            }
            Render::JsonArray => {
                out.push(b'[');
                for (i, d) in batch.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    let start = out.len();
                    self.event(d, &mut out);
                    span(&out, start);
                }
                out.push(b']');
            }
        }
        out
    }
}

impl Framing<'_> {
    /// Loki's push body: the events grouped into streams by their labels
    /// (set ones, then those read from fields), each a `[time, line]`
    /// value whose line is the event as the sink's `payload` writes it.
    /// An event without a time gets the time of sending. `spans` stays in
    /// the batch's order, whatever stream each event went to.
    fn loki_push(&self, batch: &[&Delivery], out: &mut Vec<u8>, spans: &mut Vec<(u32, u32)>) {
        let empty = LabelsConfig::default();
        let labels = self.labels.unwrap_or(&empty);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0);
        // Each distinct set of field values is a stream, in order of first
        // appearance.
        let mut streams: Vec<(Vec<Option<String>>, Vec<usize>)> = Vec::new();
        let mut index: std::collections::HashMap<Vec<Option<String>>, usize> = std::collections::HashMap::new();
        for (i, d) in batch.iter().enumerate() {
            let values = if labels.fields.is_empty() {
                Vec::new()
            } else {
                let fields: serde_json::Map<String, serde_json::Value> =
                    serde_json::from_slice(d.event()).unwrap_or_default();
                labels
                    .fields
                    .iter()
                    .map(|f| match fields.get(f) {
                        Some(serde_json::Value::String(s)) => Some(s.clone()),
                        Some(serde_json::Value::Null) | None => None,
                        Some(other) => Some(other.to_string()),
                    })
                    .collect()
            };
            match index.get(&values) {
                Some(k) => streams[*k].1.push(i),
                None => {
                    index.insert(values.clone(), streams.len());
                    streams.push((values, vec![i]));
                }
            }
        }
        spans.resize(batch.len(), (0, 0));
        let mut line = Vec::with_capacity(512);
        out.extend_from_slice(b"{\"streams\":[");
        for (k, (values, members)) in streams.iter().enumerate() {
            if k > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"stream\":{");
            let mut first = true;
            let named = labels.fields.iter().zip(values).filter_map(|(f, v)| v.as_deref().map(|v| (f.as_str(), v)));
            for (name, value) in labels.fixed.iter().map(|(k, v)| (k.as_str(), v.as_str())).chain(named) {
                if !first {
                    out.push(b',');
                }
                first = false;
                crate::delivery::write_json_string(name, out);
                out.push(b':');
                crate::delivery::write_json_string(value, out);
            }
            out.extend_from_slice(b"},\"values\":[");
            for (j, i) in members.iter().enumerate() {
                if j > 0 {
                    out.push(b',');
                }
                let d = batch[*i];
                let start = out.len();
                out.extend_from_slice(format!("[\"{}\",", d.timestamp.unwrap_or(now)).as_bytes());
                line.clear();
                self.event(d, &mut line);
                crate::delivery::write_json_string(&String::from_utf8_lossy(&line), out);
                out.push(b']');
                spans[*i] = (start as u32, (out.len() - start) as u32);
            }
            out.extend_from_slice(b"]}");
        }
        out.extend_from_slice(b"]}");
    }
}

/// `event` with `extra` fields set at its top level. The common cases are
/// spliced as bytes, so the event is copied, not re-serialized: an object
/// without those fields, or one that already holds the same value (a plugin
/// that took its id from that very field).
fn row(event: &[u8], extra: &[(&str, &str)], out: &mut Vec<u8>) {
    let mut missing: [(&str, &str); 2] = [("", ""); 2];
    let mut n_missing = 0;
    let mut conflict = false;
    for (k, v) in extra {
        match field_at(event, k) {
            None if n_missing < missing.len() => {
                missing[n_missing] = (*k, *v);
                n_missing += 1;
            }
            None => conflict = true,
            // Same value already there (compared as JSON text).
            Some(rest)
                if rest.first() == Some(&b'"')
                    && rest[1..].starts_with(v.as_bytes())
                    && rest.get(1 + v.len()) == Some(&b'"') => {}
            Some(_) => conflict = true,
        }
    }
    let missing = &missing[..n_missing];
    if let Some(rest) = event.trim_ascii_start().strip_prefix(b"{").filter(|_| !conflict) {
        out.push(b'{');
        for (i, (k, v)) in missing.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            crate::delivery::write_json_string(k, out);
            out.push(b':');
            crate::delivery::write_json_string(v, out);
        }
        if !missing.is_empty() && !rest.trim_ascii_start().starts_with(b"}") {
            out.push(b',');
        }
        out.extend_from_slice(rest);
        return;
    }
    let mut map = match serde_json::from_slice::<serde_json::Value>(event) {
        Ok(serde_json::Value::Object(m)) => m,
        Ok(other) => serde_json::Map::from_iter([("event".to_string(), other)]),
        Err(_) => serde_json::Map::from_iter([(
            "event".to_string(),
            serde_json::Value::String(String::from_utf8_lossy(event).into_owned()),
        )]),
    };
    for (k, v) in extra {
        map.insert((*k).to_string(), serde_json::Value::String((*v).to_string()));
    }
    let _ = serde_json::to_writer(&mut *out, &map);
}

/// The bytes after `"key":` when `key` is the object's first member (what
/// a plugin that copies its input and took the id from that field
/// produces), else `Some(b"")` when the key appears anywhere (the caller
/// then takes the slow path, which is always right), else `None`.
fn field_at<'e>(event: &'e [u8], key: &str) -> Option<&'e [u8]> {
    let first = event.trim_ascii_start().strip_prefix(b"{").map(<[u8]>::trim_ascii_start);
    if let Some(after) = first.and_then(|f| f.strip_prefix(b"\"")).and_then(|f| f.strip_prefix(key.as_bytes()))
        && let Some(value) = after.strip_prefix(b"\"").map(<[u8]>::trim_ascii_start).and_then(|a| a.strip_prefix(b":"))
    {
        return Some(value.trim_ascii_start());
    }
    // `"key"` anywhere, without building the needle.
    let k = key.as_bytes();
    let found = event.windows(k.len() + 2).any(|w| w[0] == b'"' && w[w.len() - 1] == b'"' && &w[1..w.len() - 1] == k);
    found.then_some(&[][..])
}

pub(crate) fn compress(body: Vec<u8>, c: Compression) -> Vec<u8> {
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
        // 2026-11-29T21:00:00Z
        Delivery::new(id, Some(1_795_986_000 * 1_000_000_000), body.as_bytes())
    }

    #[test]
    fn rows_get_the_id_and_timestamp_spliced_in() {
        let p = Payload::Event { id_field: "event_id".into(), timestamp_field: Some("ts".into()) };
        let f = Framing { render: Render::Ndjson, payload: &p, index: None, labels: None };
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
        let f = Framing { render: Render::JsonArray, payload: &p, index: None, labels: None };
        let v: serde_json::Value = serde_json::from_slice(&f.body(&[&d("a", "{}"), &d("b", "{}")])).unwrap_or_default();
        assert_eq!(v[1]["id"], "b");
        let f = Framing { render: Render::ElasticsearchBulk, payload: &p, index: Some("logs"), labels: None };
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

    #[test]
    fn loki_groups_events_into_streams_by_their_labels_and_spans_stay_in_batch_order() {
        let p = Payload::Envelope;
        let labels = LabelsConfig {
            fixed: [("job".to_string(), "sluice".to_string())].into(),
            fields: vec!["level".into(), "app".into()],
        };
        let f = Framing { render: Render::LokiPush, payload: &p, index: None, labels: Some(&labels) };
        let batch =
            [d("a", r#"{"level":"info","m":1}"#), d("b", r#"{"level":"warn"}"#), d("c", r#"{"level":"info","app":3}"#)];
        let refs: Vec<&Delivery> = batch.iter().collect();
        let mut spans = Vec::new();
        let body = f.body_with_spans(&refs, &mut spans);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let streams = v["streams"].as_array().cloned().unwrap_or_default();
        assert_eq!(streams.len(), 3, "{v}");
        assert_eq!(streams[0]["stream"], serde_json::json!({"job":"sluice","level":"info"}));
        assert_eq!(streams[2]["stream"], serde_json::json!({"job":"sluice","level":"info","app":"3"}));
        assert_eq!(streams[0]["values"][0][0], "1795986000000000000", "the time in ns, as text");
        let line: serde_json::Value =
            serde_json::from_str(streams[1]["values"][0][1].as_str().unwrap_or_default()).unwrap_or_default();
        assert_eq!(line["id"], "b", "the line is the event as the payload writes it");
        // Each span is its own record's value, whichever stream it is in.
        for (i, id) in ["a", "b", "c"].iter().enumerate() {
            let (start, len) = spans[i];
            let value: serde_json::Value =
                serde_json::from_slice(&body[start as usize..(start + len) as usize]).unwrap_or_default();
            assert!(value[1].as_str().is_some_and(|l| l.contains(&format!("\"id\":\"{id}\""))), "{i}: {value}");
        }
    }
}
