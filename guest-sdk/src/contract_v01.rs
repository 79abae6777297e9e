//! `sluice:plugin@0.1.0` (`wit/v0.1/plugin.wit`): a batch as a list of
//! records. Kept so that the suites can prove the host still runs 0.1
//! plugins, and for hosts older than 0.2; new plugins speak 0.2.

use crate::{Event, Headers, Outcome, Plugin, Position, Record};

#[doc(hidden)]
// The generated host calls take what the WIT function does, however many.
#[allow(clippy::too_many_arguments)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "plugin",
        path: "../wit/v0.1",
        pub_export_macro: true,
        export_macro_name: "__export_plugin_world",
        default_bindings_module: "::sluice_guest::__bindings",
        runtime_path: "::sluice_guest::__wit_bindgen::rt",
    });
}

use bindings::sluice::plugin::types as wit;

pub const WIT_VERSION: &str = "sluice:plugin@0.1.0";

pub type Batch = Vec<wit::Record>;
pub type Outcomes = Vec<wit::Outcome>;

pub fn process<P: Plugin>(plugin: Option<&mut P>, batch: Batch) -> Outcomes {
    // A 0.1 batch is a list of records with their own strings: the views
    // borrow those, and the partition names and header lists built here.
    let partitions: Vec<(&str, String, i64)> = batch.iter().map(|r| position(&r.position)).collect();
    let headers: Vec<Vec<(&str, &[u8])>> =
        batch.iter().map(|r| r.headers.iter().map(|(n, v)| (n.as_str(), v.as_slice())).collect()).collect();
    let records: Vec<Record<'_>> = batch
        .iter()
        .zip(&partitions)
        .zip(&headers)
        .map(|((r, (source, partition, offset)), headers)| Record {
            payload: &r.payload,
            key: r.key.as_deref(),
            headers: Headers::list(headers),
            source_timestamp: r.source_timestamp,
            position: Position { source, partition, offset: *offset },
            event_id: r.event_id.as_deref(),
            timestamp: r.timestamp,
            on_demand: None,
        })
        .collect();
    let outcomes = match plugin {
        Some(plugin) => plugin.process_batch(&records),
        None => records.iter().map(|_| Outcome::reject("plugin used before init")).collect(),
    };
    // Not zipped: a plugin that returns the wrong count must still be seen
    // to (the host turns that into a fault).
    outcomes
        .into_iter()
        .enumerate()
        .map(|(i, o)| {
            outcome(match records.get(i) {
                Some(r) => o.resolve(r),
                None => o,
            })
        })
        .collect()
}

/// (source, partition, offset) of a 0.1 position.
fn position(p: &wit::Position) -> (&'static str, String, i64) {
    match p {
        wit::Position::Kafka(k) => ("kafka", format!("{}/{}", k.topic, k.partition), k.offset),
        wit::Position::File(f) => ("file", format!("{}#{}", f.path, f.generation), f.offset as i64),
    }
}

fn outcome(o: Outcome) -> wit::Outcome {
    match o {
        Outcome::Emit(events) => wit::Outcome::Emit(
            // 0.1 has no routes: its events go where the config's routes
            // send them (`Event::to_sinks` needs 0.2).
            events.into_iter().map(|e: Event| wit::Event { id: e.id, timestamp: e.timestamp, body: e.body }).collect(),
        ),
        // `resolve` spelled it out as an `Emit`: 0.1 has no kept events.
        Outcome::Keep { .. } => wit::Outcome::Emit(Vec::new()),
        Outcome::Drop(r) => wit::Outcome::Drop(r),
        Outcome::Reject(r) => wit::Outcome::Reject(r),
    }
}

guest_imports!();
