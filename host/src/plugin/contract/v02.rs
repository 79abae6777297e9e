//! `sluice:plugin@0.2.0`: a batch packed into buffers (`sluice-abi`), so
//! that the canonical ABI copies it in bulk. The packing buffers live with
//! the instance and are reused, so packing allocates nothing per record;
//! the outcomes are checked against the layout rules before any is read.

use std::sync::Arc;

use bytes::Bytes;
use sluice_abi::{BatchBuf, BatchView, LayoutError, OutcomeView, Outcomes, RecordFields};
use wasmtime::Store;
use wasmtime::component::Linker;

use super::shared::Returned;
use crate::plugin::inputs::Inputs;
use crate::plugin::sandbox::StoreState;
use crate::record::{Event, EventId, Outcome, Position};

pub(super) mod generated {
    wasmtime::component::bindgen!({
        world: "plugin",
        path: "../wit",
        with: {
            "sluice:plugin/helpers.time-format": crate::plugin::helpers::TimeFormat,
            "sluice:plugin/helpers.patterns": crate::plugin::helpers::Patterns,
        },
    });
}

use generated::sluice::plugin::{clock, log, types as wit};

pub(super) use generated::{Plugin as Bindings, PluginPre as BindingsPre};

pub(super) fn add_to_linker(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    Bindings::add_to_linker::<StoreState, wasmtime::component::HasSelf<StoreState>>(linker, |s| s)
}

super::shared::host_imports!();

/// What an instance keeps between calls to pack its batches.
#[derive(Default)]
pub(in crate::plugin) struct Packer {
    buf: BatchBuf,
    partitions: Vec<wit::Partition>,
}

impl Packer {
    /// `on_demand`: the payloads are left out (`payloads-on-demand`).
    fn pack(&mut self, batch: Inputs<'_>, on_demand: bool) -> Result<(), LayoutError> {
        self.buf.clear();
        self.partitions.clear();
        let mut last: Option<&Position> = None;
        for r in batch.iter() {
            let p = r.position();
            if !last.is_some_and(|prev| prev.same_partition(p)) {
                self.partitions.push(wit::Partition { source: p.source().into(), name: p.partition_name() });
                last = Some(p);
            }
            let fields = RecordFields {
                payload: r.payload(),
                payload_on_demand: on_demand,
                key: r.key().map(|k| &k[..]),
                event_id: r.event_id().map(EventId::as_str),
                source_timestamp: r.source_timestamp(),
                timestamp: r.timestamp(),
                partition: (self.partitions.len() - 1) as u32,
                offset: p.offset_i64(),
            };
            self.buf.push(&fields, r.headers().iter().map(|(n, v)| (n.as_bytes(), v.as_slice())))?;
        }
        Ok(())
    }
}

pub(super) fn process(
    b: &Bindings,
    packer: &mut Packer,
    store: &mut Store<StoreState>,
    batch: Inputs<'_>,
) -> wasmtime::Result<Returned> {
    let on_demand = store.data().helpers.on_demand;
    if let Err(e) = packer.pack(batch, on_demand) {
        return Err(wasmtime::format_err!("cannot pack the batch: {e}"));
    }
    // Lend the buffers to the call, and to the per-batch helpers during
    // it, and take them back, capacity kept: one `Arc` per batch.
    let arg = Arc::new(wit::Batch {
        records: std::mem::take(&mut packer.buf.records),
        headers: std::mem::take(&mut packer.buf.headers),
        data: std::mem::take(&mut packer.buf.data),
        partitions: std::mem::take(&mut packer.partitions),
    });
    // A plugin with payloads on demand reads them where the host holds
    // them: a handle per record, no copy.
    let held: Arc<dyn crate::plugin::helpers::BatchPayloads> = if on_demand {
        Arc::new(crate::plugin::helpers::HeldPayloads(batch.iter().map(|r| r.payload().clone()).collect()))
    } else {
        arg.clone()
    };
    let helpers = &mut store.data_mut().helpers;
    helpers.batch = Some(held);
    helpers.objects.clear();
    let result = b.call_process(&mut *store, &arg);
    store.data_mut().helpers.batch = None;
    if let Ok(arg) = Arc::try_unwrap(arg) {
        packer.buf.records = arg.records;
        packer.buf.headers = arg.headers;
        packer.buf.data = arg.data;
        packer.partitions = arg.partitions;
    }
    let out = result?;
    // The outcomes' bytes, as the canonical ABI copied them out of the
    // guest, become one shared buffer: each new body is a slice of it.
    let data = Bytes::from(out.data);
    let checked = match Outcomes::check(&out.outcomes, &out.events, &data, batch.len()) {
        Ok(c) => c,
        Err(LayoutError::Count { outcomes, .. }) => return Ok(Returned::WrongCount { outcomes }),
        Err(e) => return Ok(Returned::Malformed(e.to_string())),
    };
    Ok(Returned::Outcomes(checked.iter().zip(batch.iter()).map(|(o, r)| lift(o, r.payload(), &data)).collect()))
}

/// What `logfmt-batch` reads: the payloads exactly as the guest sees them.
/// The host packed these buffers itself, so a record it cannot read back
/// is a bug here, answered as an empty payload rather than a panic.
impl crate::plugin::helpers::BatchPayloads for wit::Batch {
    fn count(&self) -> usize {
        self.records.len() / sluice_abi::RECORD_BYTES
    }

    fn payload(&self, i: usize) -> &[u8] {
        BatchView::new(&self.records, &self.headers, &self.data, self.partitions.len())
            .and_then(|view| view.record(i))
            .map(|record| record.payload)
            .unwrap_or_default()
    }
}

/// One outcome into the host's types. A single event that keeps its
/// record's payload (the common pass-through) stays `Keep`; a kept event
/// among several shares the payload. A new body is a slice of `data`, the
/// buffer the outcomes came back in: no body is copied here.
fn lift(o: OutcomeView<'_>, payload: &Bytes, data: &Bytes) -> Result<Outcome, String> {
    // Checked by `Outcomes::check` (names, bounds): a slice, not a copy.
    let route = |sinks: Option<&[u8]>| sinks.map(|s| data.slice_ref(s));
    // An id is a slice too, checked as UTF-8 once, here.
    let id_of = |k: usize, id: Option<&[u8]>| -> Result<Option<EventId>, String> {
        id.map(|id| EventId::from_utf8(data.slice_ref(id)).map_err(|_| format!("event {k}: the id is not UTF-8")))
            .transpose()
    };
    Ok(match o {
        OutcomeView::Emit(mut events) if events.len() == 1 => match events.next() {
            Some(e) if e.keep => Outcome::Keep { id: id_of(0, e.id)?, timestamp: e.timestamp, sinks: route(e.sinks) },
            Some(e) => Outcome::Emit(vec![Event {
                id: id_of(0, e.id)?,
                timestamp: e.timestamp,
                body: data.slice_ref(e.body),
                sinks: route(e.sinks),
            }]),
            None => Outcome::Emit(Vec::new()),
        },
        OutcomeView::Emit(events) => {
            let mut out = Vec::with_capacity(events.len());
            for (k, e) in events.enumerate() {
                let body = if e.keep { payload.clone() } else { data.slice_ref(e.body) };
                out.push(Event { id: id_of(k, e.id)?, timestamp: e.timestamp, body, sinks: route(e.sinks) });
            }
            Outcome::Emit(out)
        }
        OutcomeView::Drop(reason) => Outcome::Drop(String::from_utf8_lossy(reason).into_owned()),
        OutcomeView::Reject(reason) => Outcome::Reject(String::from_utf8_lossy(reason).into_owned()),
    })
}

/// `sluice:plugin/helpers`: the resources live in the store's table, and
/// are counted against the caps of `plugin::helpers` while they live.
mod helpers_impl {
    use wasmtime::component::Resource;

    use crate::plugin::contract::v02::generated::sluice::plugin::helpers::{self, PatternMatch};
    use crate::plugin::helpers::{self as pure, Patterns, TimeFormat};
    use crate::plugin::sandbox::StoreState;

    fn gone(what: &str) -> String {
        format!("this {what} was dropped")
    }

    impl StoreState {
        /// The schemas the `schema` helpers answer from, or why there are
        /// none: the record's reason, naming its id.
        fn schemas(&self, id: u32) -> Result<&crate::schema_registry::cache::Schemas, String> {
            self.helpers.schemas.as_deref().ok_or_else(|| {
                format!("schema id {id}: this pipeline has no [schema_registry] to fetch schemas from; add one to its config")
            })
        }
    }

    impl helpers::HostTimeFormat for StoreState {
        fn compile(&mut self, spec: String) -> Result<Resource<TimeFormat>, String> {
            if self.helpers.time_formats >= pure::MAX_TIME_FORMATS {
                return Err(format!(
                    "{} time formats are live, the limit per instance: compile each once, in init",
                    pure::MAX_TIME_FORMATS
                ));
            }
            let format = pure::compile_time_format(&spec)?;
            let handle = self.table.push(format).map_err(|e| e.to_string())?;
            self.helpers.time_formats += 1;
            Ok(handle)
        }

        fn parse(&mut self, this: Resource<TimeFormat>, text: String, now: i64) -> Result<i64, String> {
            self.table.get(&this).map_err(|_| gone("time format"))?.parse(&text, now)
        }

        fn drop(&mut self, this: Resource<TimeFormat>) -> wasmtime::Result<()> {
            self.table.delete(this)?;
            self.helpers.time_formats = self.helpers.time_formats.saturating_sub(1);
            Ok(())
        }
    }

    impl helpers::HostPatterns for StoreState {
        fn compile(&mut self, patterns: Vec<String>) -> Result<Resource<Patterns>, String> {
            if self.helpers.pattern_sets >= pure::MAX_PATTERN_SETS {
                return Err(format!(
                    "{} pattern sets are live, the limit per instance: compile each once, in init",
                    pure::MAX_PATTERN_SETS
                ));
            }
            let set = pure::compile_patterns(&patterns)?;
            let handle = self.table.push(set).map_err(|e| e.to_string())?;
            self.helpers.pattern_sets += 1;
            Ok(handle)
        }

        fn first_match(&mut self, this: Resource<Patterns>, line: String) -> Option<PatternMatch> {
            let set = self.table.get(&this).ok()?;
            set.first_match(&line).map(|(pattern, captures)| PatternMatch { pattern, captures })
        }

        fn drop(&mut self, this: Resource<Patterns>) -> wasmtime::Result<()> {
            self.table.delete(this)?;
            self.helpers.pattern_sets = self.helpers.pattern_sets.saturating_sub(1);
            Ok(())
        }
    }

    impl helpers::Host for StoreState {
        fn format_rfc3339(&mut self, nanos: i64) -> String {
            sluice_guest::time::format_rfc3339(nanos)
        }

        fn json_object_check(&mut self, payload: Vec<u8>) -> Option<String> {
            pure::json_object_check(&payload)
        }

        fn json_get(&mut self, payload: Vec<u8>, paths: Vec<String>) -> Result<Vec<Option<String>>, String> {
            pure::json_get(&payload, &paths)
        }

        fn logfmt(&mut self, line: Vec<u8>) -> Vec<(String, Option<String>)> {
            pure::logfmt(&line)
        }

        fn logfmt_object(&mut self, line: Vec<u8>) -> String {
            pure::logfmt_object(&line)
        }

        fn logfmt_batch(&mut self) -> Result<String, String> {
            pure::logfmt_batch(self.helpers.batch.as_deref(), self.limiter.limit)
        }

        fn payloads_on_demand(&mut self) {
            if self.helpers.initializing {
                self.helpers.on_demand = true;
            }
        }

        fn payload(&mut self, index: u32) -> Vec<u8> {
            self.helpers.batch.as_deref().map(|b| b.payload(index as usize).to_vec()).unwrap_or_default()
        }

        fn json_get_batch(&mut self, paths: Vec<String>) -> Result<(Vec<u8>, Vec<u8>), String> {
            let (fields, objects) = pure::json_get_batch(self.helpers.batch.as_deref(), &paths, self.limiter.limit)?;
            self.helpers.objects = objects;
            Ok((fields.table, fields.data))
        }

        fn schema(&mut self, id: u32) -> Result<(String, String), String> {
            self.schemas(id)?.answer(id)
        }

        fn schema_references(&mut self, id: u32) -> Result<Vec<(String, String)>, String> {
            self.schemas(id)?.references(id)
        }
    }
}
