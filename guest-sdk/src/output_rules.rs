//! The output contract: what an event must be before the host delivers it
//! or hands it to the next stage. The host checks every plugin's outcomes
//! with these functions (`host/src/plugin/output_rules.rs`), and a plugin's
//! native run checks its own with the same ones ([`crate::testing`], and
//! `sluice plugin helpers` for the Python and JavaScript SDKs), so a unit
//! test fails where the host would reject: one rule, not a port of it.
//!
//! Why each rule exists:
//! - the body is one JSON object in UTF-8: sinks write it as a row or a
//!   document, and a string or an array there is a malformed row;
//! - an id is not empty: the dedup window would see every such record as a
//!   duplicate of the first, and distinct records would vanish through the
//!   duplicate door;
//! - an id is bounded: it is stored in the dedup window for the whole
//!   replay interval;
//! - events and bytes per record are bounded: one record must not become
//!   an unbounded amount of work and memory downstream.

use serde::de::IgnoredAny;

/// The limits of the output contract; part of a plugin's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
    pub max_id_bytes: usize,
    pub max_events_per_record: usize,
    pub max_event_bytes_per_record: usize,
}

impl Default for OutputLimits {
    /// 256 bytes holds any UUID, ULID or digest with a prefix; 1,024 events
    /// and 16 MiB hold any split the first-party plugins make.
    fn default() -> Self {
        OutputLimits { max_id_bytes: 256, max_events_per_record: 1024, max_event_bytes_per_record: 16 << 20 }
    }
}

/// One event of a record's outcome as the rules see it.
#[derive(Debug, Clone, Copy)]
pub struct Checked<'a> {
    pub id: Option<&'a str>,
    /// The body to check; `None` when it was checked already (a kept
    /// payload that an earlier stage's rules passed): each body once.
    pub body: Option<&'a [u8]>,
    /// The body's length, counted against `max_event_bytes_per_record`
    /// whether or not it is checked again.
    pub body_len: usize,
}

/// The rule a record's events break, if any: `None` when they may go on.
/// Events are named by their index, as a reason an author can act on.
pub fn events_breach<'a>(limits: &OutputLimits, events: impl ExactSizeIterator<Item = Checked<'a>>) -> Option<String> {
    if events.len() > limits.max_events_per_record {
        return Some(format!(
            "{} events from one record, over the limit of {} (max_events_per_record)",
            events.len(),
            limits.max_events_per_record
        ));
    }
    let mut bytes = 0usize;
    for (k, e) in events.enumerate() {
        if let Some(rule) = id_breach(limits, e.id).or_else(|| e.body.and_then(body_breach)) {
            return Some(format!("event {k}: {rule}"));
        }
        bytes += e.body_len + e.id.map_or(0, str::len);
    }
    (bytes > limits.max_event_bytes_per_record).then(|| {
        format!(
            "{bytes} bytes of events from one record, over the limit of {} (max_event_bytes_per_record)",
            limits.max_event_bytes_per_record
        )
    })
}

fn id_breach(limits: &OutputLimits, id: Option<&str>) -> Option<String> {
    let id = id?;
    if id.is_empty() {
        return Some(
            "the id is empty (every such record would be a duplicate of the first); set none to let the host derive one"
                .into(),
        );
    }
    (id.len() > limits.max_id_bytes)
        .then(|| format!("the id is {} bytes, over the limit of {} (max_id_bytes)", id.len(), limits.max_id_bytes))
}

/// The body must be one JSON object in UTF-8. The first byte decides the
/// common case at once; a full parse (without building a value) proves the
/// rest, which catches a body cut short or two objects back to back. (A
/// hand-written one-pass validator measured slower than serde_json's, which
/// skips string bytes eight at a time: benches/README.md, plugin_chain.)
/// The UTF-8 pass is simdutf8's, which chooses its SIMD at run time: the
/// fastest of the validators measured in `benches/json_check` on a portable
/// build (sonic-rs and simd-json need SIMD chosen at compile time).
pub fn body_breach(body: &[u8]) -> Option<String> {
    let text = match simdutf8::compat::from_utf8(body) {
        Ok(t) => t,
        Err(e) => return Some(format!("the body is not UTF-8 (invalid byte at offset {})", e.valid_up_to())),
    };
    match text.trim_start().as_bytes().first() {
        Some(b'{') => {}
        Some(b'[') => return Some("the body is a JSON array, not an object".into()),
        None => return Some("the body is empty, not a JSON object".into()),
        Some(_) if serde_json::from_str::<IgnoredAny>(text).is_ok() => {
            return Some("the body is a JSON scalar, not an object".into());
        }
        Some(_) => return Some(format!("the body is not JSON: {}", preview(text))),
    }
    match serde_json::from_str::<IgnoredAny>(text) {
        Ok(_) => None,
        Err(e) => Some(format!("the body is not valid JSON ({e}): {}", preview(text))),
    }
}

fn preview(text: &str) -> String {
    let end = text.char_indices().nth(60).map_or(text.len(), |(i, _)| i);
    format!("{:?}{}", &text[..end], if end < text.len() { "…" } else { "" })
}
