//! The output contract, for 0.1 and 0.2 plugins alike: what an event must
//! be before the host delivers it or hands it to the next stage. A plugin
//! that breaks it gets its record rejected into the quarantine with the
//! rule as the reason; nothing a plugin returns reaches a sink unchecked.
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

use crate::record::{Event, Outcome};

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

/// The rule `outcome` breaks, if any: `None` when it may go on.
///
/// A [`Outcome::Keep`] event's body is its record's payload, of
/// `payload_len` bytes; `unchecked` holds that payload when no rule has
/// checked it yet (it came from the source), `None` when it is an earlier
/// stage's event body and was checked there: each body is checked once.
pub fn breach(
    limits: &OutputLimits,
    outcome: &Outcome,
    payload_len: usize,
    unchecked: Option<&[u8]>,
) -> Option<String> {
    if let Outcome::Keep { id, .. } = outcome {
        let rule = id_breach(limits, id.as_deref()).or_else(|| unchecked.and_then(body_breach));
        if let Some(rule) = rule {
            return Some(format!("event 0: {rule}"));
        }
        let bytes = payload_len + id.as_ref().map_or(0, String::len);
        return (bytes > limits.max_event_bytes_per_record).then(|| over_bytes(bytes, limits));
    }
    let Outcome::Emit(events) = outcome else { return None };
    if events.len() > limits.max_events_per_record {
        return Some(format!(
            "{} events from one record, over the limit of {} (max_events_per_record)",
            events.len(),
            limits.max_events_per_record
        ));
    }
    let mut bytes = 0usize;
    for (k, e) in events.iter().enumerate() {
        if let Some(rule) = event_breach(limits, e) {
            return Some(format!("event {k}: {rule}"));
        }
        bytes += e.body.len() + e.id.as_ref().map_or(0, String::len);
    }
    if bytes > limits.max_event_bytes_per_record {
        return Some(over_bytes(bytes, limits));
    }
    None
}

fn over_bytes(bytes: usize, limits: &OutputLimits) -> String {
    format!(
        "{bytes} bytes of events from one record, over the limit of {} (max_event_bytes_per_record)",
        limits.max_event_bytes_per_record
    )
}

fn event_breach(limits: &OutputLimits, e: &Event) -> Option<String> {
    id_breach(limits, e.id.as_deref()).or_else(|| body_breach(&e.body))
}

fn id_breach(limits: &OutputLimits, id: Option<&str>) -> Option<String> {
    if let Some(id) = id {
        if id.is_empty() {
            return Some(
                "the id is empty (every such record would be a duplicate of the first); set none to let the host derive one"
                    .into(),
            );
        }
        if id.len() > limits.max_id_bytes {
            return Some(format!(
                "the id is {} bytes, over the limit of {} (max_id_bytes)",
                id.len(),
                limits.max_id_bytes
            ));
        }
    }
    None
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

#[cfg(test)]
mod tests {
    use super::*;

    fn emit(id: Option<&str>, body: &[u8]) -> Outcome {
        Outcome::Emit(vec![Event {
            id: id.map(str::to_string),
            timestamp: None,
            body: bytes::Bytes::copy_from_slice(body),
            sinks: None,
        }])
    }

    fn rule(o: &Outcome) -> String {
        breach(&OutputLimits::default(), o, 0, None).unwrap_or_default()
    }

    #[test]
    fn an_object_passes_and_drops_and_rejects_are_not_checked() {
        assert_eq!(breach(&OutputLimits::default(), &emit(Some("a"), br#" {"a":[1,{"b":null}]}"#), 0, None), None);
        assert_eq!(breach(&OutputLimits::default(), &Outcome::Drop(String::new()), 0, None), None);
        assert_eq!(breach(&OutputLimits::default(), &Outcome::Emit(Vec::new()), 0, None), None);
    }

    #[test]
    fn each_malformed_body_is_named() {
        assert!(rule(&emit(None, b"[1,2]")).contains("a JSON array, not an object"), "{}", rule(&emit(None, b"[1]")));
        assert!(rule(&emit(None, br#""text""#)).contains("a JSON scalar"));
        assert!(rule(&emit(None, b"hello")).contains("not JSON"));
        assert!(rule(&emit(None, b"")).contains("empty"));
        assert!(rule(&emit(None, b"{\"a\":\"\xff\"}")).contains("not UTF-8 (invalid byte at offset 6)"));
        assert!(rule(&emit(None, br#"{"a":1"#)).contains("not valid JSON"));
        assert!(rule(&emit(None, br#"{"a":1}{"b":2}"#)).contains("not valid JSON"));
    }

    #[test]
    fn ids_must_be_set_and_bounded() {
        assert!(rule(&emit(Some(""), b"{}")).starts_with("event 0: the id is empty"));
        let long = "x".repeat(257);
        assert_eq!(
            rule(&emit(Some(&long), b"{}")),
            "event 0: the id is 257 bytes, over the limit of 256 (max_id_bytes)"
        );
        assert_eq!(rule(&emit(Some(&long[..256]), b"{}")), "");
    }

    #[test]
    fn a_kept_body_is_checked_once_where_nothing_checked_it_and_its_id_always() {
        let keep = |id: Option<&str>| Outcome::Keep { id: id.map(str::to_string), timestamp: None, sinks: None };
        let l = OutputLimits::default();
        // From the source, unchecked: the body rule applies.
        assert!(
            breach(&l, &keep(None), 5, Some(b"hello")).unwrap_or_default().contains("event 0: the body is not JSON")
        );
        assert_eq!(breach(&l, &keep(None), 2, Some(b"{}")), None);
        // An earlier stage's body: not parsed again (a non-object here would
        // have been rejected there already).
        assert_eq!(breach(&l, &keep(None), 5, None), None);
        assert!(breach(&l, &keep(Some("")), 2, None).unwrap_or_default().starts_with("event 0: the id is empty"));
        let small = OutputLimits { max_event_bytes_per_record: 10, ..l };
        assert!(breach(&small, &keep(Some("id")), 9, None).unwrap_or_default().contains("11 bytes of events"));
    }

    #[test]
    fn events_and_bytes_per_record_are_bounded() {
        let limits =
            OutputLimits { max_events_per_record: 2, max_event_bytes_per_record: 10, ..OutputLimits::default() };
        let e = Event::new(None, None, b"{}".as_slice().into());
        assert_eq!(breach(&limits, &Outcome::Emit(vec![e.clone(); 2]), 0, None), None);
        assert!(breach(&limits, &Outcome::Emit(vec![e.clone(); 3]), 0, None).unwrap_or_default().contains("3 events"));
        let big = Event { body: br#"{"a":"0123456789"}"#.as_slice().into(), ..e };
        assert!(
            breach(&limits, &Outcome::Emit(vec![big]), 0, None)
                .unwrap_or_default()
                .contains("max_event_bytes_per_record")
        );
    }
}
