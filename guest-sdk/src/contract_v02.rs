//! `sluice:plugin@0.2.0`: the batch arrives as a few buffers
//! (`wit/plugin.wit` gives the layout, `sluice-abi` reads and writes it).
//!
//! The records handed to the plugin are kept between batches and refilled
//! in place, so unpacking a batch allocates nothing per record once the
//! buffers have grown to the size of the records (headers and keys only
//! when they change length); packing the outcomes allocates three buffers
//! per batch.

use std::cell::RefCell;

use sluice_abi::{BatchView, EventFields, OutcomeBuf, RecordView};

use crate::{Outcome, Plugin, Record};

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "plugin",
        path: "../wit",
        pub_export_macro: true,
        export_macro_name: "__export_plugin_world",
        default_bindings_module: "::sluice_guest::__bindings",
        runtime_path: "::sluice_guest::__wit_bindgen::rt",
    });
}

use bindings::sluice::plugin::types as wit;

pub const WIT_VERSION: &str = "sluice:plugin@0.2.0";

pub type Batch = wit::Batch;
pub type Outcomes = wit::Outcomes;

thread_local! {
    static RECORDS: RefCell<Vec<Record>> = const { RefCell::new(Vec::new()) };
    /// While `process` runs a batch whose payloads were left out: where its
    /// records lie (address, count), so a record's place in it, and so the
    /// payload the host holds for it, is found from the record itself.
    static ON_DEMAND: std::cell::Cell<Option<(usize, usize)>> = const { std::cell::Cell::new(None) };
}

/// The payload of `record` from the host, when it is a record of the
/// batch being processed and its payload was left out.
#[cfg(target_arch = "wasm32")]
pub fn fetch_payload(record: &Record) -> Option<Vec<u8>> {
    let (base, count) = ON_DEMAND.with(std::cell::Cell::get)?;
    let size = std::mem::size_of::<Record>();
    let at = (record as *const Record as usize).checked_sub(base)?;
    let index = at / size;
    (at % size == 0 && index < count).then(|| bindings::sluice::plugin::helpers::payload(index as u32))
}

#[cfg(target_arch = "wasm32")]
pub fn payloads_on_demand() {
    bindings::sluice::plugin::helpers::payloads_on_demand()
}

#[cfg(target_arch = "wasm32")]
pub fn json_get_batch(paths: &[&str]) -> Result<(Vec<u8>, Vec<u8>), String> {
    let paths: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
    bindings::sluice::plugin::helpers::json_get_batch(&paths)
}

/// Unpack, run the plugin, pack. Called by `export_plugin!`.
pub fn process<P: Plugin>(plugin: Option<&mut P>, batch: Batch) -> Outcomes {
    RECORDS.with(|records| {
        let mut records = records.borrow_mut();
        let unpacked = unpack(&batch, &mut records);
        let on_demand = on_demand(&batch);
        let count = unpacked.as_ref().map_or(0, |n| *n);
        ON_DEMAND.with(|c| c.set(on_demand.then(|| (records.as_ptr() as usize, count))));
        let outcomes = match (plugin, unpacked) {
            (Some(plugin), Ok(n)) => plugin.process_batch(&records[..n]),
            (None, Ok(n)) => (0..n).map(|_| Outcome::reject("plugin used before init")).collect(),
            // The host packs well-formed batches; if one is not, every
            // record is rejected with the reason rather than misread.
            (_, Err(reason)) => {
                let n = batch.records.len() / sluice_abi::RECORD_BYTES;
                (0..n).map(|_| Outcome::reject(format!("the SDK cannot read the batch: {reason}"))).collect()
            }
        };
        ON_DEMAND.with(|c| c.set(None));
        let n = records.len().min(batch.records.len() / sluice_abi::RECORD_BYTES);
        // Without its payloads a record cannot tell a body equal to them:
        // nothing is kept but what the plugin keeps itself.
        pack(&outcomes, if on_demand { &[] } else { &records[..n] }, batch.data.len())
    })
}

/// Whether the batch came without its payloads (the host left them out
/// of every record, or of none).
fn on_demand(batch: &Batch) -> bool {
    BatchView::new(&batch.records, &batch.headers, &batch.data, batch.partitions.len())
        .and_then(|view| view.record(0))
        .is_ok_and(|r| r.payload_on_demand)
}

fn unpack(batch: &Batch, records: &mut Vec<Record>) -> Result<usize, String> {
    let view = BatchView::new(&batch.records, &batch.headers, &batch.data, batch.partitions.len())
        .map_err(|e| e.to_string())?;
    if records.len() < view.len() {
        records.resize_with(view.len(), Record::default);
    }
    for (i, record) in records.iter_mut().enumerate().take(view.len()) {
        let v = view.record(i).map_err(|e| e.to_string())?;
        fill(record, &v, &batch.partitions)?;
    }
    Ok(view.len())
}

fn set_bytes(slot: &mut Option<Vec<u8>>, from: Option<&[u8]>) {
    match from {
        Some(b) => {
            let v = slot.get_or_insert_with(Vec::new);
            v.clear();
            v.extend_from_slice(b);
        }
        None => *slot = None,
    }
}

fn utf8<'a>(bytes: &'a [u8], what: &str) -> Result<&'a str, String> {
    std::str::from_utf8(bytes).map_err(|e| format!("{what} is not UTF-8: {e}"))
}

fn set_str(slot: &mut String, from: &str) {
    if !crate::bytes::same(slot.as_bytes(), from.as_bytes()) {
        slot.clear();
        slot.push_str(from);
    }
}

fn fill(r: &mut Record, v: &RecordView<'_>, partitions: &[wit::Partition]) -> Result<(), String> {
    r.payload.clear();
    r.payload.extend_from_slice(v.payload);
    set_bytes(&mut r.key, v.key);
    let n = v.header_count();
    r.headers.truncate(n);
    for h in 0..n {
        let (name, value) = v.header(h).map_err(|e| e.to_string())?;
        let name = utf8(name, "a header name")?;
        match r.headers.get_mut(h) {
            Some((n, v)) => {
                set_str(n, name);
                v.clear();
                v.extend_from_slice(value);
            }
            None => r.headers.push((name.to_string(), value.to_vec())),
        }
    }
    r.source_timestamp = v.source_timestamp;
    r.timestamp = v.timestamp;
    match v.event_id {
        Some(id) => set_str(r.event_id.get_or_insert_with(String::new), utf8(id, "the event id")?),
        None => r.event_id = None,
    }
    // `BatchView::record` checked the index.
    if let Some(p) = partitions.get(v.partition as usize) {
        set_str(&mut r.position.source, &p.source);
        set_str(&mut r.position.partition, &p.name);
    }
    r.position.offset = v.offset;
    Ok(())
}

/// An event whose body is its record's payload crosses as kept (flag bit
/// 2): the host already holds those bytes.
fn pack(outcomes: &[Outcome], records: &[Record], input_bytes: usize) -> Outcomes {
    let mut buf = OutcomeBuf::with_capacity(outcomes.len(), input_bytes + outcomes.len() * 16);
    for (i, o) in outcomes.iter().enumerate() {
        let payload = records.get(i).map(|r| r.payload.as_slice());
        // Packing fails only past 4 GiB of output, which a plugin's memory
        // cannot hold; the outcome is then missing and the host's count
        // check turns the batch into a fault, isolated record by record.
        let _ = match o {
            Outcome::Emit(events) => buf.emit(events.iter().map(|e| EventFields {
                id: e.id.as_deref().map(str::as_bytes),
                timestamp: e.timestamp,
                body: &e.body,
                keep: payload.is_some_and(|p| crate::bytes::same(p, &e.body)),
            })),
            Outcome::Keep { id, timestamp } => buf.emit([EventFields {
                id: id.as_deref().map(str::as_bytes),
                timestamp: *timestamp,
                body: &[],
                keep: true,
            }]),
            Outcome::Drop(reason) => buf.drop(reason.as_bytes()),
            Outcome::Reject(reason) => buf.reject(reason.as_bytes()),
        };
    }
    Outcomes { outcomes: buf.outcomes, events: buf.events, data: buf.data }
}

guest_imports!();

#[cfg(test)]
mod tests {
    use sluice_abi::{BatchBuf, OutcomeView, Outcomes as Checked, RecordFields};

    use super::*;
    use crate::Event;

    /// Echoes what it sees, so a test can check the unpacking.
    #[derive(serde::Deserialize)]
    struct Echo;

    impl Plugin for Echo {
        fn process(&mut self, r: &Record) -> Outcome {
            if r.payload == b"drop" {
                return Outcome::drop("asked to");
            }
            let text = format!(
                "{}|{:?}|{:?}|{:?}|{:?}|{:?}|{}",
                String::from_utf8_lossy(&r.payload),
                r.key,
                r.headers,
                r.event_id,
                r.timestamp,
                r.source_timestamp,
                r.position
            );
            Outcome::Emit(vec![Event::new(text.into_bytes()).with_id("i"), Event::new(b"{}".to_vec())])
        }
    }

    fn batch(records: &[(&[u8], Option<&[u8]>, &[(&[u8], &[u8])], Option<&str>)]) -> Batch {
        let mut buf = BatchBuf::default();
        for (i, (payload, key, headers, event_id)) in records.iter().enumerate() {
            let fields = RecordFields {
                payload,
                payload_on_demand: false,
                key: *key,
                event_id: *event_id,
                source_timestamp: Some(5),
                timestamp: (i == 0).then_some(7),
                partition: 0,
                offset: i as i64 + 40,
            };
            assert!(buf.push(&fields, headers.iter().copied()).is_ok());
        }
        Batch {
            records: buf.records,
            headers: buf.headers,
            data: buf.data,
            partitions: vec![wit::Partition { source: "kafka".into(), name: "logs/3".into() }],
        }
    }

    fn read(out: &Outcomes, n: usize) -> Vec<String> {
        let checked = Checked::check(&out.outcomes, &out.events, &out.data, n).unwrap_or_else(|e| panic!("{e}"));
        checked
            .iter()
            .map(|o| match o {
                OutcomeView::Emit(events) => events
                    .map(|e| format!("{:?}:{}", e.id.map(String::from_utf8_lossy), String::from_utf8_lossy(e.body)))
                    .collect::<Vec<_>>()
                    .join(" + "),
                OutcomeView::Drop(r) => format!("drop {}", String::from_utf8_lossy(r)),
                OutcomeView::Reject(r) => format!("reject {}", String::from_utf8_lossy(r)),
            })
            .collect()
    }

    #[test]
    fn a_packed_batch_reaches_the_plugin_whole_and_its_outcomes_come_back_in_order() {
        let mut echo = Echo;
        let first = batch(&[
            (b"a", Some(b"k"), &[(b"h1", b"v1"), (b"h2", b"")], Some("e1")),
            (b"drop", None, &[], None),
            (b"c", Some(b""), &[], None),
        ]);
        let out = read(&process(Some(&mut echo), first), 3);
        assert_eq!(
            out,
            [
                r#"Some("i"):a|Some([107])|[("h1", [118, 49]), ("h2", [])]|Some("e1")|Some(7)|Some(5)|kafka:logs/3@40 + None:{}"#,
                "drop asked to",
                r#"Some("i"):c|Some([])|[]|None|None|Some(5)|kafka:logs/3@42 + None:{}"#,
            ]
        );
        // The records are reused: a second, smaller batch sees none of the
        // first one's keys, headers or ids.
        let second = batch(&[(b"z", None, &[], None)]);
        let out = read(&process(Some(&mut echo), second), 1);
        assert_eq!(out, [r#"Some("i"):z|None|[]|None|Some(7)|Some(5)|kafka:logs/3@40 + None:{}"#]);
    }

    /// Passes records on (kept), or rewrites them, by payload.
    #[derive(serde::Deserialize)]
    struct Passer;

    impl Plugin for Passer {
        fn process(&mut self, r: &Record) -> Outcome {
            match r.payload.as_slice() {
                b"{\"new\":1}" => Outcome::emit(Event::new(b"{\"other\":2}".to_vec())),
                // A body equal to the payload, built by hand: kept as well.
                b"{\"same\":1}" => Outcome::emit(Event::new(b"{\"same\":1}".to_vec()).with_timestamp(9)),
                _ => Outcome::keep(r),
            }
        }
    }

    #[test]
    fn an_unchanged_body_crosses_as_kept_and_is_not_written_again() {
        let b = batch(&[
            (b"{\"a\":1}", None, &[], Some("e1")),
            (b"{\"new\":1}", None, &[], None),
            (b"{\"same\":1}", None, &[], None),
        ]);
        let out = process(Some(&mut Passer), b);
        assert_eq!(out.data, b"{\"other\":2}" as &[u8], "the one new body, no kept body, no id repeated");
        let checked = Checked::check(&out.outcomes, &out.events, &out.data, 3).unwrap_or_else(|e| panic!("{e}"));
        let events: Vec<(bool, Option<i64>, Vec<u8>)> = checked
            .iter()
            .flat_map(|o| match o {
                OutcomeView::Emit(events) => events.map(|e| (e.keep, e.timestamp, e.body.to_vec())).collect(),
                _ => Vec::new(),
            })
            .collect();
        assert_eq!(
            events,
            [(true, None, Vec::new()), (false, None, b"{\"other\":2}".to_vec()), (true, Some(9), Vec::new())]
        );
        // `Outcome::keep` leaves the id an earlier stage set where it is:
        // the host keeps it, the plugin does not send it back.
        let first = checked.iter().next();
        let Some(OutcomeView::Emit(mut e)) = first else { panic!("an emit") };
        assert_eq!(e.next().map(|e| e.id), Some(None));
    }

    #[test]
    fn a_plugin_used_before_init_rejects_every_record() {
        let out = read(&process::<Echo>(None, batch(&[(b"a", None, &[], None), (b"b", None, &[], None)])), 2);
        assert_eq!(out, ["reject plugin used before init", "reject plugin used before init"]);
    }

    #[test]
    fn a_batch_the_sdk_cannot_read_is_rejected_record_by_record() {
        let mut b = batch(&[(b"a", None, &[], None)]);
        b.partitions.clear();
        let out = read(&process(Some(&mut Echo), b), 1);
        assert_eq!(out, ["reject the SDK cannot read the batch: record 0 partition is 0, outside a table of 0"]);
    }
}
