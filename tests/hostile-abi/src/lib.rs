//! A 0.2 plugin written below the SDK, against the raw bindings, so that it
//! can return outcome buffers no SDK would write. Its config is one word
//! (`{"attack":"overlap"}`); the attack fires only on batches holding a
//! record whose payload contains `POISON`, on that record's outcome, and
//! every record is otherwise echoed as `{"line": ...}` like the hostile
//! plugin's, so a test checks the other records come through untouched.

use std::cell::Cell;

use sluice_abi::{BatchView, EVENT_BYTES, EventFields, OUTCOME_BYTES, OutcomeBuf};
use sluice_guest::__bindings::Guest;
use sluice_guest::__bindings::sluice::plugin::types::{Batch, Outcomes};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Attack {
    /// A body slice that reaches a megabyte past the data buffer.
    OutOfBounds,
    /// Two events whose bodies are the same bytes: an amplification.
    Overlap,
    /// An emit that starts one event past where the previous ended.
    EventsOutOfOrder,
    /// One outcome fewer than records.
    CountMismatch,
    /// An outcome table that is not a whole number of descriptors.
    Ragged,
    /// Outcome kind 9.
    UnknownKind,
    /// An event that keeps its record's payload (flag bit 2) and still
    /// names a body slice: bytes nobody bounds.
    KeptWithBody,
    /// An event flag bit the contract does not define.
    UnknownFlag,
    /// An event in the table that no emit uses.
    UnusedEvent,
    /// An id that is not UTF-8.
    IdNotUtf8,
    /// An outcome buffer larger than the memory limit allows.
    HugeOutcome,
}

thread_local! {
    static ATTACK: Cell<Option<Attack>> = const { Cell::new(None) };
}

struct Export;

fn parse(config: &str) -> Result<Attack, String> {
    let word = config.split('"').nth(3).unwrap_or_default();
    Ok(match word {
        "out-of-bounds" => Attack::OutOfBounds,
        "overlap" => Attack::Overlap,
        "events-out-of-order" => Attack::EventsOutOfOrder,
        "count-mismatch" => Attack::CountMismatch,
        "ragged" => Attack::Ragged,
        "unknown-kind" => Attack::UnknownKind,
        "unknown-flag" => Attack::UnknownFlag,
        "kept-with-body" => Attack::KeptWithBody,
        "unused-event" => Attack::UnusedEvent,
        "id-not-utf8" => Attack::IdNotUtf8,
        "huge-outcome" => Attack::HugeOutcome,
        other => return Err(format!("attack: unknown attack {other:?} in {config}")),
    })
}

fn put(buf: &mut [u8], at: usize, v: u32) {
    if let Some(s) = buf.get_mut(at..at + 4) {
        s.copy_from_slice(&v.to_le_bytes());
    }
}

fn echo_body(payload: &[u8]) -> Vec<u8> {
    let mut body = b"{\"line\":\"".to_vec();
    body.extend(payload.iter().copied().filter(|b| b.is_ascii_alphanumeric() || *b == b' '));
    body.extend_from_slice(b"\"}");
    body
}

impl Guest for Export {
    fn init(config: String) -> Result<(), String> {
        let attack = parse(&config)?;
        ATTACK.with(|a| a.set(Some(attack)));
        Ok(())
    }

    fn process(batch: Batch) -> Outcomes {
        let attack = ATTACK.with(Cell::get);
        let view = BatchView::new(&batch.records, &batch.headers, &batch.data, batch.partitions.len());
        let mut buf = OutcomeBuf::default();
        let mut poison = None;
        let n = view.as_ref().map_or(0, |v| v.len());
        for i in 0..n {
            let payload = view.as_ref().ok().and_then(|v| v.record(i).ok()).map(|r| r.payload).unwrap_or_default();
            let body = echo_body(payload);
            let is_poison = payload.windows(6).any(|w| w == b"POISON");
            if is_poison {
                poison = Some((i, buf.events.len() / EVENT_BYTES));
            }
            let event = EventFields { body: &body, ..EventFields::default() };
            let _ = match (is_poison, attack) {
                (true, Some(Attack::Overlap)) => buf.emit([event, event]),
                (true, Some(Attack::IdNotUtf8)) => buf.emit([EventFields { id: Some(&[0xff, 0xfe]), ..event }]),
                _ => buf.emit([event]),
            };
        }
        let Some((record, event)) = poison else {
            return Outcomes { outcomes: buf.outcomes, events: buf.events, data: buf.data };
        };
        let (o, e) = (record * OUTCOME_BYTES, event * EVENT_BYTES);
        match attack {
            Some(Attack::OutOfBounds) => put(&mut buf.events, e + 12, 1 << 20),
            Some(Attack::Overlap) => {
                let first_body =
                    u32::from_le_bytes([buf.events[e + 8], buf.events[e + 9], buf.events[e + 10], buf.events[e + 11]]);
                put(&mut buf.events, e + EVENT_BYTES + 8, first_body);
            }
            Some(Attack::EventsOutOfOrder) => put(&mut buf.outcomes, o + 4, event as u32 + 1),
            Some(Attack::CountMismatch) => {
                buf.outcomes.drain(o..o + OUTCOME_BYTES);
            }
            Some(Attack::Ragged) => buf.outcomes.extend_from_slice(&[0; 5]),
            Some(Attack::UnknownKind) => put(&mut buf.outcomes, o, 9),
            Some(Attack::UnknownFlag) => put(&mut buf.events, e + 24, 0x80),
            // The body slice stays as packed (its bytes are in `data`).
            Some(Attack::KeptWithBody) => put(&mut buf.events, e + 24, sluice_abi::event_flag::KEEP),
            Some(Attack::UnusedEvent) => buf.events.extend_from_slice(&[0; EVENT_BYTES]),
            Some(Attack::HugeOutcome) => {
                // Four times what the suite's memory limit allows.
                buf.data.resize(128 << 20, b' ');
            }
            Some(Attack::IdNotUtf8) | None => {}
        }
        Outcomes { outcomes: buf.outcomes, events: buf.events, data: buf.data }
    }
}

sluice_guest::__bindings::__export_plugin_world!(Export with_types_in sluice_guest::__bindings);
