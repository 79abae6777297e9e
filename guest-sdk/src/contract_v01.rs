//! `sluice:plugin@0.1.0` (`wit/v0.1/plugin.wit`): a batch as a list of
//! records. Kept so that the suites can prove the host still runs 0.1
//! plugins, and for hosts older than 0.2; new plugins speak 0.2.

use crate::{Event, Outcome, Plugin, Position, Record};

#[doc(hidden)]
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
    let records: Vec<Record> = batch.into_iter().map(record).collect();
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

fn record(r: wit::Record) -> Record {
    let position = match r.position {
        wit::Position::Kafka(k) => {
            Position { source: "kafka".into(), partition: format!("{}/{}", k.topic, k.partition), offset: k.offset }
        }
        wit::Position::File(f) => Position {
            source: "file".into(),
            partition: format!("{}#{}", f.path, f.generation),
            offset: f.offset as i64,
        },
    };
    Record {
        payload: r.payload,
        key: r.key,
        headers: r.headers,
        source_timestamp: r.source_timestamp,
        position,
        event_id: r.event_id,
        timestamp: r.timestamp,
    }
}

fn outcome(o: Outcome) -> wit::Outcome {
    match o {
        Outcome::Emit(events) => wit::Outcome::Emit(
            events.into_iter().map(|e: Event| wit::Event { id: e.id, timestamp: e.timestamp, body: e.body }).collect(),
        ),
        // `resolve` spelled it out as an `Emit`: 0.1 has no kept events.
        Outcome::Keep { .. } => wit::Outcome::Emit(Vec::new()),
        Outcome::Drop(r) => wit::Outcome::Drop(r),
        Outcome::Reject(r) => wit::Outcome::Reject(r),
    }
}

guest_imports!();
