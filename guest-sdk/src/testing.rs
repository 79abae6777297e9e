//! A plugin's unit tests, natively: records through the plugin judged as
//! the host judges them, and a clock that stands still.
//!
//! ```
//! # use sluice_guest::{Outcome, Plugin, Record, testing};
//! # #[derive(serde::Deserialize)] struct Upper {}
//! # impl Plugin for Upper {
//! #     fn process(&mut self, r: &Record<'_>) -> Outcome {
//! #         Outcome::emit_json(&serde_json::json!({"line": String::from_utf8_lossy(r.payload)}))
//! #     }
//! # }
//! testing::pin_now(Some(1_796_126_400_000_000_000)); // 2026-12-01T12:00:00Z
//! let outcomes = testing::run_natively::<Upper>("{}", &[b"a line".as_slice()]).unwrap();
//! assert!(matches!(outcomes[0], Outcome::Emit(_)));
//! ```

use std::cell::Cell;

use crate::output_rules::{Checked, OutputLimits, events_breach};
use crate::{Outcome, Plugin, Record, configure};

thread_local! {
    static PINNED: Cell<Option<i64>> = const { Cell::new(None) };
}

/// Make [`crate::now`] answer `nanos` on this thread (a test's thread) until
/// pinned again; `None` for the system clock. Inside the host a case's
/// `now` pins the clock instead (`sluice plugin test`, `sluice test`).
pub fn pin_now(nanos: Option<i64>) {
    PINNED.with(|p| p.set(nanos));
}

pub(crate) fn pinned_now() -> Option<i64> {
    PINNED.with(Cell::get)
}

/// Each payload through a plugin configured from `config` (JSON, as the
/// host passes it) as the host runs it: the config refused is `Err` with
/// the refusal; a panic rejects its record (in the host it is a trap, and
/// the record is quarantined); and every outcome meets the host's own
/// output rules ([`crate::output_rules`], default limits), so an empty or
/// oversized id, a body that is not one JSON object or too many events
/// reject the record with the host's reason, as they would in a pipeline.
pub fn run_natively<P: Plugin>(config: &str, payloads: &[&[u8]]) -> Result<Vec<Outcome>, String> {
    let mut plugin = configure::<P>(config)?;
    Ok(payloads
        .iter()
        .map(|payload| {
            let record = Record::from_line(*payload);
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| plugin.process(&record)));
            match outcome {
                Ok(outcome) => judged(outcome, payload),
                Err(panic) => {
                    let why = panic
                        .downcast_ref::<String>()
                        .map(String::as_str)
                        .or_else(|| panic.downcast_ref::<&str>().copied())
                        .unwrap_or("a panic");
                    Outcome::Reject(format!("the plugin panicked (a trap in the host): {why}"))
                }
            }
        })
        .collect())
}

/// `outcome` as the host takes it: itself, or a reject naming the rule it
/// breaks.
pub fn judged(outcome: Outcome, payload: &[u8]) -> Outcome {
    let limits = OutputLimits::default();
    let rule = match &outcome {
        Outcome::Emit(events) => events_breach(
            &limits,
            events.iter().map(|e| Checked { id: e.id.as_deref(), body: Some(&e.body), body_len: e.body.len() }),
        ),
        Outcome::Keep { id, .. } => events_breach(
            &limits,
            std::iter::once(Checked { id: id.as_deref(), body: Some(payload), body_len: payload.len() }),
        ),
        Outcome::Drop(_) | Outcome::Reject(_) => None,
    };
    match rule {
        Some(rule) => Outcome::Reject(rule),
        None => outcome,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Event;

    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Careless {}

    impl Plugin for Careless {
        fn process(&mut self, record: &Record<'_>) -> Outcome {
            match record.payload {
                b"empty id" => Outcome::emit(Event::json(&serde_json::json!({"a": 1})).with_id("")),
                b"array" => Outcome::emit(Event::new(b"[1]".to_vec())),
                b"keep" => Outcome::keep(record),
                b"panic" => panic!("a bug"),
                b"now" => Outcome::emit_json(&serde_json::json!({"now": crate::now()})),
                _ => Outcome::emit_json(&serde_json::json!({"ok": true})),
            }
        }
    }

    fn reason(o: &Outcome) -> &str {
        match o {
            Outcome::Reject(r) => r,
            _ => "",
        }
    }

    #[test]
    fn a_native_run_rejects_what_the_host_rejects() {
        let got = run_natively::<Careless>("", &[b"empty id", b"array", b"keep", b"panic", b"fine"])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(reason(&got[0]).starts_with("event 0: the id is empty"), "{got:?}");
        assert!(reason(&got[1]).contains("a JSON array, not an object"), "{got:?}");
        // A kept payload that is not JSON is the host's to refuse too.
        assert!(reason(&got[2]).contains("the body is not JSON"), "{got:?}");
        assert!(reason(&got[3]).contains("panicked") && reason(&got[3]).contains("a bug"), "{got:?}");
        assert!(matches!(got[4], Outcome::Emit(_)), "{got:?}");
        assert!(run_natively::<Careless>(r#"{"nope": 1}"#, &[]).is_err(), "a config the plugin refuses");
    }

    #[test]
    fn the_clock_stands_still_where_pinned() {
        pin_now(Some(42));
        let got = run_natively::<Careless>("{}", &[b"now"]).unwrap_or_else(|e| panic!("{e}"));
        pin_now(None);
        match &got[0] {
            Outcome::Emit(events) => assert_eq!(events[0].body, br#"{"now":42}"#),
            other => panic!("{other:?}"),
        }
        assert!(crate::now() > 42);
    }
}
