//! `sluice:plugin@0.1.0`: a batch as `list<record>`, lowered and lifted
//! element by element by the canonical ABI.

use wasmtime::Store;
use wasmtime::component::Linker;

use super::shared::Returned;
use crate::plugin::inputs::{Input, Inputs};
use crate::plugin::sandbox::StoreState;
use crate::record::{Event, EventId, Outcome, Position};

mod generated {
    wasmtime::component::bindgen!({
        world: "plugin",
        path: "../wit/v0.1",
    });
}

use generated::sluice::plugin::{clock, log, types as wit};

pub(super) use generated::{Plugin as Bindings, PluginPre as BindingsPre};

pub(super) fn add_to_linker(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    Bindings::add_to_linker::<StoreState, wasmtime::component::HasSelf<StoreState>>(linker, |s| s)
}

super::shared::host_imports!();

pub(super) fn process(b: &Bindings, store: &mut Store<StoreState>, batch: Inputs<'_>) -> wasmtime::Result<Returned> {
    let wit_batch: Vec<_> = batch.iter().map(to_wit).collect();
    let outcomes = b.call_process(store, &wit_batch)?;
    if outcomes.len() != batch.len() {
        return Ok(Returned::WrongCount { outcomes: outcomes.len() });
    }
    Ok(Returned::Outcomes(outcomes.into_iter().map(|o| Ok(from_wit(o))).collect()))
}

fn to_wit(r: Input<'_>) -> wit::Record {
    wit::Record {
        payload: r.payload().to_vec(),
        key: r.key().map(|k| k.to_vec()),
        headers: r.headers().to_vec(),
        source_timestamp: r.source_timestamp(),
        position: match r.position() {
            Position::Kafka { topic, partition, offset } => wit::Position::Kafka(wit::KafkaPosition {
                topic: topic.to_string(),
                partition: *partition,
                offset: *offset,
            }),
            Position::File { path, generation, offset } => wit::Position::File(wit::FilePosition {
                path: path.to_string(),
                generation: *generation,
                offset: *offset,
            }),
        },
        event_id: r.event_id().map(|id| id.as_str().to_owned()),
        timestamp: r.timestamp(),
    }
}

fn from_wit(o: wit::Outcome) -> Outcome {
    match o {
        wit::Outcome::Emit(events) => Outcome::Emit(
            events.into_iter().map(|e| Event::new(e.id.map(EventId::from), e.timestamp, e.body.into())).collect(),
        ),
        wit::Outcome::Drop(reason) => Outcome::Drop(reason),
        wit::Outcome::Reject(reason) => Outcome::Reject(reason),
    }
}
