//! Request bodies of backends with a format of their own, written from
//! the batch's events: Splunk HEC's envelopes, OTLP/HTTP's JSON logs,
//! GELF. Each carries the event id where the format has a place for it
//! (an indexed field, an attribute, an additional field), so an operator
//! can find a record by the id sluice audits it under.

use crate::delivery::{Delivery, write_json_string};

/// This machine's name, GELF's `host`: read once.
pub(crate) fn host_name() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "sluice".into())
    })
}

/// `1733322000.123`: seconds with milliseconds, as HEC and GELF take a time.
fn seconds(ns: i64, out: &mut Vec<u8>) {
    let (s, ms) = (ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000) / 1_000_000);
    out.extend_from_slice(format!("{s}.{ms:03}").as_bytes());
}

/// Splunk HEC (`/services/collector/event`): one envelope per event,
/// newline-separated: `{"time":…,"event":{…},"fields":{"event_id":"…"}}`.
pub(crate) fn splunk_hec(batch: &[&Delivery], out: &mut Vec<u8>) {
    for d in batch {
        out.push(b'{');
        if let Some(ns) = d.timestamp {
            out.extend_from_slice(b"\"time\":");
            seconds(ns, out);
            out.push(b',');
        }
        out.extend_from_slice(b"\"event\":");
        out.extend_from_slice(d.event());
        out.extend_from_slice(b",\"fields\":{\"event_id\":");
        write_json_string(&d.id, out);
        out.extend_from_slice(b"}}\n");
    }
}

/// OTLP/HTTP logs in JSON (`/v1/logs`, `Content-Type: application/json`):
/// one resource and scope, a log record per event whose body is the
/// event's JSON text and whose `event.id` attribute is its id. `spans`
/// gets each log record's place in `out`.
pub(crate) fn otlp_json(batch: &[&Delivery], out: &mut Vec<u8>, spans: &mut Vec<(u32, u32)>) {
    out.extend_from_slice(
        br#"{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"sluice"}}]},"scopeLogs":[{"scope":{"name":"sluice"},"logRecords":["#,
    );
    for (i, d) in batch.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let start = out.len();
        out.push(b'{');
        if let Some(ns) = d.timestamp.filter(|ns| *ns >= 0) {
            // proto3's JSON writes a 64-bit integer as a string.
            out.extend_from_slice(format!("\"timeUnixNano\":\"{ns}\",").as_bytes());
        }
        out.extend_from_slice(b"\"body\":{\"stringValue\":");
        write_json_string(&String::from_utf8_lossy(d.event()), out);
        out.extend_from_slice(br#"},"attributes":[{"key":"event.id","value":{"stringValue":"#);
        write_json_string(&d.id, out);
        out.extend_from_slice(b"}}]}");
        spans.push((start as u32, (out.len() - start) as u32));
    }
    out.extend_from_slice(b"]}]}]}");
}

/// GELF 1.1 over HTTP, one message per line (Graylog's GELF HTTP input
/// with bulk receiving; without it, set `batch.max_records = 1`). The
/// event's top-level fields become additional fields (`_level`), nested
/// values as their JSON text; `short_message` is the event's
/// `short_message`, `message` or `msg`, else its whole JSON text.
pub(crate) fn gelf(batch: &[&Delivery], host: &str, out: &mut Vec<u8>) {
    for d in batch {
        let fields = match serde_json::from_slice::<serde_json::Value>(d.event()) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => serde_json::Map::new(),
        };
        let short = ["short_message", "message", "msg"]
            .iter()
            .find_map(|k| fields.get(*k).and_then(|v| v.as_str()).filter(|s| !s.trim().is_empty()))
            .map(str::to_string)
            .unwrap_or_else(|| String::from_utf8_lossy(d.event()).into_owned());
        let mut m = serde_json::Map::new();
        m.insert("version".into(), "1.1".into());
        m.insert("host".into(), host.into());
        m.insert("short_message".into(), short.into());
        if let Some(ns) = d.timestamp {
            let mut t = Vec::new();
            seconds(ns, &mut t);
            if let Ok(n) = serde_json::from_slice::<serde_json::Number>(&t) {
                m.insert("timestamp".into(), n.into());
            }
        }
        m.insert("_event_id".into(), d.id.as_str().into());
        for (k, v) in fields {
            // GELF forbids `_id` and wants names of word characters.
            if matches!(k.as_str(), "short_message" | "id" | "_id")
                || !k.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
            {
                continue;
            }
            let v = match v {
                serde_json::Value::String(_) | serde_json::Value::Number(_) => v,
                other => other.to_string().into(),
            };
            m.insert(format!("_{}", k.trim_start_matches('_')), v);
        }
        let _ = serde_json::to_writer(&mut *out, &m);
        out.push(b'\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(id: &str, body: &str) -> Delivery {
        // 2026-11-29T21:00:00.250Z
        Delivery::new(id, Some(1_795_986_000_250_000_000), body.as_bytes())
    }

    #[test]
    fn each_format_carries_the_event_its_time_and_its_id() {
        let (a, b) = (d("a", r#"{"msg":"disk full","level":"error","ctx":{"n":1}}"#), d("b\"q", "{}"));
        let mut out = Vec::new();
        splunk_hec(&[&a, &b], &mut out);
        let lines: Vec<serde_json::Value> = out
            .split(|c| *c == b'\n')
            .filter(|l| !l.is_empty())
            .filter_map(|l| serde_json::from_slice(l).ok())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["time"], serde_json::json!(1_795_986_000.25));
        assert_eq!(lines[0]["event"]["level"], "error");
        assert_eq!(lines[1]["fields"]["event_id"], "b\"q");

        let mut out = Vec::new();
        otlp_json(&[&a, &b], &mut out, &mut Vec::new());
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap_or_default();
        let records = &v["resourceLogs"][0]["scopeLogs"][0]["logRecords"];
        assert_eq!(records[0]["timeUnixNano"], "1795986000250000000");
        assert_eq!(records[0]["attributes"][0]["value"]["stringValue"], "a");
        let body: serde_json::Value =
            serde_json::from_str(records[0]["body"]["stringValue"].as_str().unwrap_or_default()).unwrap_or_default();
        assert_eq!(body["msg"], "disk full");

        let mut out = Vec::new();
        gelf(&[&a, &b], "node-1", &mut out);
        let lines: Vec<serde_json::Value> = out
            .split(|c| *c == b'\n')
            .filter(|l| !l.is_empty())
            .filter_map(|l| serde_json::from_slice(l).ok())
            .collect();
        assert_eq!(lines[0]["short_message"], "disk full");
        assert_eq!(lines[0]["_level"], "error");
        assert_eq!(lines[0]["_ctx"], r#"{"n":1}"#);
        assert_eq!(lines[0]["_event_id"], "a");
        assert_eq!(lines[0]["host"], "node-1");
        assert_eq!(lines[1]["short_message"], "{}", "no message field: the event's text");
    }
}
