//! `world classifier` of `sluice:plugin@0.2.0` (`wit/classifier.wit`): a
//! plugin that reads an HTTP sink's answers. Its `log` and `clock` imports
//! are 0.2's own (the same interfaces, linked once), so only its exports
//! are generated here.

use wasmtime::Store;

use crate::plugin::classified::{Answered, Asked, Fate, RECORD_BYTES, Reply};
use crate::plugin::sandbox::StoreState;

mod generated {
    wasmtime::component::bindgen!({
        world: "classifier",
        path: "../wit",
        with: {
            "sluice:plugin/types": super::super::v02::generated::sluice::plugin::types,
            "sluice:plugin/log": super::super::v02::generated::sluice::plugin::log,
            "sluice:plugin/clock": super::super::v02::generated::sluice::plugin::clock,
        },
    });
}

use generated::sluice::plugin::answers as wit;

pub(super) use generated::{Classifier as Bindings, ClassifierPre as BindingsPre};

/// Pack `asked` (the layout in `wit/classifier.wit`), call, lift the reply.
pub(super) fn classify(
    b: &Bindings,
    store: &mut Store<StoreState>,
    asked: &Asked<'_>,
    answered: &Answered<'_>,
) -> wasmtime::Result<Reply> {
    let n = asked.ids.len();
    let mut records = Vec::with_capacity(n * RECORD_BYTES);
    let mut ids = Vec::with_capacity(asked.ids.iter().map(|i| i.len()).sum());
    for i in 0..n {
        let id = asked.ids[i].as_bytes();
        let (start, len) = asked.spans.get(i).copied().unwrap_or_default();
        let ts = asked.timestamps.get(i).copied().flatten();
        records.extend_from_slice(&(ids.len() as u32).to_le_bytes());
        records.extend_from_slice(&(id.len() as u32).to_le_bytes());
        records.extend_from_slice(&start.to_le_bytes());
        records.extend_from_slice(&len.to_le_bytes());
        records.extend_from_slice(&ts.unwrap_or(0).to_le_bytes());
        records.extend_from_slice(&u32::from(ts.is_some()).to_le_bytes());
        records.extend_from_slice(&0u32.to_le_bytes());
        ids.extend_from_slice(id);
    }
    let request = wit::Request { records, ids, body_bytes: asked.body_bytes, attempt: asked.attempt };
    let response = wit::Response {
        status: answered.status,
        headers: answered.headers.to_vec(),
        body: answered.body.to_vec(),
        truncated: answered.truncated,
    };
    let reply = b.call_classify(store, &request, &response)?;
    Ok(match reply {
        wit::Reply::Each(fates) => Reply::Each(fates.into_iter().map(lift).collect()),
        wit::Reply::All(fate) => Reply::All(lift(fate)),
        wit::Reply::Split(reason) => Reply::Split(reason),
        wit::Reply::BadRow(bad) => Reply::BadRow { row: bad.row as usize, reason: bad.reason },
    })
}

fn lift(fate: wit::Fate) -> Fate {
    match fate {
        wit::Fate::Accepted => Fate::Accepted,
        wit::Fate::Duplicate => Fate::Duplicate,
        wit::Fate::Retry(r) => Fate::Retry(r),
        wit::Fate::Reject(r) => Fate::Reject(r),
        wit::Fate::Systemic(r) => Fate::Systemic(r),
    }
}
