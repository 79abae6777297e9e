//! `sluice:plugin@0.2.0`: the batch arrives as a few buffers
//! (`wit/plugin.wit` gives the layout, `sluice-abi` reads and writes it).
//!
//! The records handed to the plugin are views of the batch's buffers:
//! unpacking copies no payload, key, header or id, and the list of them
//! keeps its allocation from batch to batch. Packing the outcomes
//! allocates three buffers per batch.

use std::cell::Cell;

use sluice_abi::{BatchView, EventFields, OutcomeBuf, RecordView};

use crate::{Headers, Outcome, Plugin, Position, Record};

#[doc(hidden)]
// The generated host calls take what the WIT function does, however many.
#[allow(clippy::too_many_arguments)]
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
    /// The list of the last batch's records, empty, for its allocation.
    static SPARE: Cell<Vec<Record<'static>>> = const { Cell::new(Vec::new()) };
}

/// The payload of record `index` of the batch being processed, from the
/// host (payloads on demand).
#[cfg(target_arch = "wasm32")]
pub fn fetch_payload(index: u32) -> Vec<u8> {
    bindings::sluice::plugin::helpers::payload(index)
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

#[cfg(target_arch = "wasm32")]
pub fn schema(id: u32) -> Result<(String, String), String> {
    bindings::sluice::plugin::helpers::schema(id)
}

#[cfg(target_arch = "wasm32")]
pub fn schema_references(id: u32) -> Result<Vec<(String, String)>, String> {
    bindings::sluice::plugin::helpers::schema_references(id)
}

/// An empty list of records, of any lifetime, in `list`'s allocation: the
/// records of one batch cannot outlive it, but their list can be kept.
/// Collecting an emptied `Vec` through `filter_map` reuses its buffer
/// (the two types have one layout), and allocates anew if it ever did not.
// `filter(|_| false)` cannot change the lifetime; `filter_map` can.
#[allow(clippy::unnecessary_filter_map)]
fn recycle<'b>(mut list: Vec<Record<'_>>) -> Vec<Record<'b>> {
    list.clear();
    list.into_iter().filter_map(|_| None).collect()
}

/// Unpack, run the plugin, pack. Called by `export_plugin!`.
pub fn process<P: Plugin>(plugin: Option<&mut P>, batch: Batch) -> Outcomes {
    let mut records = recycle(SPARE.take());
    let unpacked = unpack(&batch, &mut records);
    let outcomes = match (plugin, &unpacked) {
        (Some(plugin), Ok(())) => plugin.process_batch(&records),
        (None, Ok(())) => records.iter().map(|_| Outcome::reject("plugin used before init")).collect(),
        // The host packs well-formed batches; if one is not, every
        // record is rejected with the reason rather than misread.
        (_, Err(reason)) => {
            let n = batch.records.len() / sluice_abi::RECORD_BYTES;
            (0..n).map(|_| Outcome::reject(format!("the SDK cannot read the batch: {reason}"))).collect()
        }
    };
    let out = pack(&outcomes, &records, batch.data.len());
    SPARE.set(recycle(records));
    out
}

fn unpack<'a>(batch: &'a Batch, records: &mut Vec<Record<'a>>) -> Result<(), String> {
    let view = BatchView::new(&batch.records, &batch.headers, &batch.data, batch.partitions.len())
        .map_err(|e| e.to_string())?;
    records.reserve(view.len());
    for i in 0..view.len() {
        let v = view.record(i).map_err(|e| e.to_string())?;
        records.push(record(v, i, &batch.partitions)?);
    }
    Ok(())
}

fn utf8<'a>(bytes: &'a [u8], what: &str) -> Result<&'a str, String> {
    std::str::from_utf8(bytes).map_err(|e| format!("{what} is not UTF-8: {e}"))
}

fn record<'a>(v: RecordView<'a>, index: usize, partitions: &'a [wit::Partition]) -> Result<Record<'a>, String> {
    // Header names are strings to the plugin: checked once, here.
    for h in 0..v.header_count() {
        utf8(v.header(h).map_err(|e| e.to_string())?.0, "a header name")?;
    }
    // `BatchView::record` checked the index.
    let (source, partition) = partitions.get(v.partition as usize).map_or(("", ""), |p| (&p.source, &p.name));
    Ok(Record {
        payload: v.payload,
        key: v.key,
        headers: Headers::packed(v),
        source_timestamp: v.source_timestamp,
        position: Position { source, partition, offset: v.offset },
        event_id: v.event_id.map(|id| utf8(id, "the event id")).transpose()?,
        timestamp: v.timestamp,
        on_demand: v.payload_on_demand.then_some(index as u32),
    })
}

/// An event whose body is its record's payload crosses as kept (flag bit
/// 2): the host already holds those bytes. A record whose payload was left
/// out has nothing to compare, so only what the plugin keeps itself is.
fn pack(outcomes: &[Outcome], records: &[Record<'_>], input_bytes: usize) -> Outcomes {
    let mut buf = OutcomeBuf::with_capacity(outcomes.len(), input_bytes + outcomes.len() * 16);
    for (i, o) in outcomes.iter().enumerate() {
        let payload = records.get(i).filter(|r| r.on_demand.is_none()).map(|r| r.payload);
        // Packing fails only past 4 GiB of output, which a plugin's memory
        // cannot hold; the outcome is then missing and the host's count
        // check turns the batch into a fault, isolated record by record.
        let _ = match o {
            Outcome::Emit(events) => {
                // Routes joined once per emit, and only when one names sinks.
                let routes: Vec<Option<String>> = if events.iter().any(|e| !e.sinks.is_empty()) {
                    events.iter().map(|e| (!e.sinks.is_empty()).then(|| e.sinks.join(","))).collect()
                } else {
                    Vec::new()
                };
                buf.emit(events.iter().enumerate().map(|(k, e)| EventFields {
                    id: e.id.as_deref().map(str::as_bytes),
                    timestamp: e.timestamp,
                    body: &e.body,
                    keep: payload.is_some_and(|p| crate::bytes::same(p, &e.body)),
                    sinks: routes.get(k).and_then(|r| r.as_deref()).map(str::as_bytes),
                }))
            }
            Outcome::Keep { id, timestamp } => buf.emit([EventFields {
                id: id.as_deref().map(str::as_bytes),
                timestamp: *timestamp,
                body: &[],
                keep: true,
                sinks: None,
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
                String::from_utf8_lossy(r.payload),
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

    /// A record as the tests write it: payload, key, headers, event id.
    type In<'a> = (&'a [u8], Option<&'a [u8]>, &'a [(&'a [u8], &'a [u8])], Option<&'a str>);

    fn batch(records: &[In<'_>]) -> Batch {
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
                r#"Some("i"):a|Some([107])|[("h1", "v1"), ("h2", "")]|Some("e1")|Some(7)|Some(5)|kafka:logs/3@40 + None:{}"#,
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
            match r.payload {
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
    fn the_list_of_records_keeps_its_allocation_from_batch_to_batch() {
        let three = batch(&[(b"a", None, &[], None), (b"b", None, &[], None), (b"c", None, &[], None)]);
        process(Some(&mut Echo), three);
        let (at, capacity) = SPARE.with(|s| {
            let list = s.take();
            let seen = (list.as_ptr() as usize, list.capacity());
            s.set(list);
            seen
        });
        assert!(capacity >= 3, "the list is kept, empty, with its room");
        process(Some(&mut Echo), batch(&[(b"z", None, &[], None)]));
        let list = SPARE.take();
        assert_eq!((list.as_ptr() as usize, list.capacity()), (at, capacity), "the same buffer, not a new one");
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
