//! The conformance plugin (`conformance/SPEC.md`) in Rust. Every SDK port
//! implements the same plugin and passes `conformance/cases/` with
//! `sluice plugin test`.

use std::fmt::Write;

use serde::Deserialize;
use sluice_guest::{Event, Outcome, Plugin, Record, export_plugin};

#[derive(Deserialize)]
pub struct Conformance {
    #[serde(default)]
    refuse: Option<String>,
    #[serde(default)]
    tag: String,
}

/// Bytes shown (SPEC.md): hex up to 32 bytes, else length and sum.
fn shown(bytes: &[u8]) -> String {
    if bytes.len() <= 32 {
        return hex(bytes);
    }
    let sum = bytes.iter().fold(0u32, |s, b| s.wrapping_add(u32::from(*b)));
    format!("{} bytes, sum {sum}", bytes.len())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

impl Plugin for Conformance {
    fn setup(&mut self) -> Result<(), String> {
        match &self.refuse {
            Some(message) => Err(message.clone()),
            None => Ok(()),
        }
    }

    fn process(&mut self, record: &Record) -> Outcome {
        let p = record.payload;
        if p.starts_with(b"{\"keep\"") {
            return Outcome::keep(record);
        }
        if let Some(rest) = p.strip_prefix(b"drop:") {
            return Outcome::drop(String::from_utf8_lossy(rest));
        }
        if let Some(rest) = p.strip_prefix(b"reject:") {
            return Outcome::reject(String::from_utf8_lossy(rest));
        }
        if let Some(rest) = p.strip_prefix(b"route:") {
            let names = String::from_utf8_lossy(rest);
            return Outcome::emit(Event::json(&serde_json::json!({ "route": names })).to_sinks(names.split(',')));
        }
        if let Some(rest) = p.strip_prefix(b"split:") {
            let n: usize = String::from_utf8_lossy(rest).trim().parse().unwrap_or(0);
            let base = record.event_id.unwrap_or("none");
            return Outcome::Emit(
                (0..n).map(|k| Event::json(&serde_json::json!({ "k": k })).with_id(format!("{base}/{k}"))).collect(),
            );
        }
        let position = record.position.to_string();
        let sum = p.iter().fold(0u32, |s, b| s.wrapping_add(u32::from(*b)));
        let body = serde_json::json!({
            "tag": self.tag,
            "len": p.len(),
            "sum": sum,
            "head": hex(&p[..p.len().min(8)]),
            "key": record.key.map(shown),
            "headers": record.headers.iter().map(|(k, v)| vec![k.to_string(), shown(v)]).collect::<Vec<_>>(),
            "position": position,
        });
        let mut event = Event::json(&body);
        event.id = record.event_id.map(str::to_owned);
        event.timestamp = record.timestamp.or(record.source_timestamp);
        Outcome::emit(event)
    }
}

export_plugin!(Conformance);
