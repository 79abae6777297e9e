//! The output contract applied to the host's outcomes: every plugin's, 0.1
//! and 0.2 alike. A plugin that breaks it gets its record rejected into the
//! quarantine with the rule as the reason; nothing a plugin returns reaches
//! a sink unchecked. The rules themselves (and why each exists) are
//! `sluice_guest::output_rules`, which a plugin's native run checks with
//! too.

use sluice_guest::output_rules::{Checked, OutputLimits, events_breach};

use crate::record::Outcome;

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
    match outcome {
        Outcome::Keep { id, .. } => events_breach(
            limits,
            std::iter::once(Checked { id: id.as_deref(), body: unchecked, body_len: payload_len }),
        ),
        Outcome::Emit(events) => events_breach(
            limits,
            events.iter().map(|e| Checked { id: e.id.as_deref(), body: Some(&e.body), body_len: e.body.len() }),
        ),
        Outcome::Drop(_) | Outcome::Reject(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Event;

    fn emit(id: Option<&str>, body: &[u8]) -> Outcome {
        Outcome::Emit(vec![Event {
            id: id.map(Into::into),
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
        let keep = |id: Option<&str>| Outcome::Keep { id: id.map(Into::into), timestamp: None, sinks: None };
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
