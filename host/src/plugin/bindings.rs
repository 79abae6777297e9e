//! The generated WIT bindings, kept private: the rest of the host speaks the
//! types in `types.rs`, so a WIT change touches this file and no other.

use super::sandbox::StoreState;
use super::types::{Event, Outcome, Position, Record};

mod generated {
    wasmtime::component::bindgen!({
        world: "plugin",
        path: "../wit",
    });
}

use generated::sluice::plugin::{clock, log, types as wit};

pub(super) use generated::{Plugin as Bindings, PluginPre as BindingsPre};

/// Link the two imports of the contract (log, clock) into `linker`.
pub(super) fn add_to_linker(linker: &mut wasmtime::component::Linker<StoreState>) -> wasmtime::Result<()> {
    Bindings::add_to_linker::<StoreState, wasmtime::component::HasSelf<StoreState>>(linker, |s| s)
}

impl log::Host for StoreState {
    fn log(&mut self, level: wit::Level, message: String) {
        let plugin = &*self.plugin_name;
        match level {
            wit::Level::Trace => tracing::trace!(plugin, "{message}"),
            wit::Level::Debug => tracing::debug!(plugin, "{message}"),
            wit::Level::Info => tracing::info!(plugin, "{message}"),
            wit::Level::Warn => tracing::warn!(plugin, "{message}"),
            wit::Level::Error => tracing::error!(plugin, "{message}"),
        }
    }
}

impl clock::Host for StoreState {
    fn now(&mut self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }
}

impl wit::Host for StoreState {}

pub(super) fn to_wit(r: &Record) -> wit::Record {
    wit::Record {
        payload: r.payload.clone(),
        key: r.key.clone(),
        headers: r.headers.clone(),
        source_timestamp: r.source_timestamp,
        position: match &r.position {
            Position::Kafka { topic, partition, offset } => wit::Position::Kafka(wit::KafkaPosition {
                topic: topic.to_string(),
                partition: *partition,
                offset: *offset,
            }),
            Position::File { path, generation, offset } => {
                wit::Position::File(wit::FilePosition { path: path.clone(), generation: *generation, offset: *offset })
            }
        },
        event_id: r.event_id.clone(),
        timestamp: r.timestamp,
    }
}

pub(super) fn from_wit(o: wit::Outcome) -> Outcome {
    match o {
        wit::Outcome::Emit(events) => Outcome::Emit(
            events.into_iter().map(|e| Event { id: e.id, timestamp: e.timestamp, body: e.body }).collect(),
        ),
        wit::Outcome::Drop(reason) => Outcome::Drop(reason),
        wit::Outcome::Reject(reason) => Outcome::Reject(reason),
    }
}
