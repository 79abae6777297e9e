//! One live instance of a plugin: its own store (memory, limits, WASI
//! context), initialised with its config. A fault leaves the instance in an
//! unknown state, so the caller throws it away and builds another.

use std::sync::Arc;

use wasmtime::{Store, Trap};

use super::contract::Bound;
use super::contract::shared::Returned;
use super::engine::{EPOCH_TICK, LoadedPlugin};
use super::error::{Fault, PluginError};
use super::inputs::Inputs;
use super::output_rules;
use super::sandbox::StoreState;
use crate::record::Outcome;

pub(super) struct Instance {
    store: Store<StoreState>,
    bindings: Bound,
    plugin: Arc<LoadedPlugin>,
}

impl Instance {
    /// Instantiate and call `init` with the plugin's config.
    pub(super) fn new(plugin: Arc<LoadedPlugin>) -> Result<Instance, PluginError> {
        let state = StoreState::new(
            plugin.id.name.as_str().into(),
            plugin.limits.memory_bytes,
            plugin.limits.max_log_lines_per_batch,
            plugin.limits.fixed_now,
        );
        let mut store = Store::new(&plugin.engine, state);
        store.data_mut().helpers.schemas = plugin.schemas.clone();
        store.limiter(|s| &mut s.limiter);
        store.epoch_deadline_trap();
        store.set_epoch_deadline(deadline_ticks(&plugin));
        let bindings = plugin
            .pre
            .instantiate(&mut store)
            .map_err(|e| PluginError::Instantiate { plugin: plugin.id.to_string(), message: format!("{e:#}") })?;
        store.set_epoch_deadline(deadline_ticks(&plugin));
        store.data_mut().helpers.initializing = true;
        let refused = bindings.call_init(&mut store, &plugin.config_json);
        store.data_mut().helpers.initializing = false;
        match refused {
            Ok(Ok(())) => {}
            Ok(Err(message)) => return Err(PluginError::Config { plugin: plugin.id.to_string(), message }),
            Err(e) => {
                let fault = fault_of(&mut store, &plugin, e);
                return Err(PluginError::Init { plugin: plugin.id.to_string(), fault });
            }
        }
        Ok(Instance { store, bindings, plugin })
    }

    /// One call of `process`. The time limit covers this call alone. The
    /// outcomes come back checked against the output contract: a breach
    /// rejects its record with the rule, naming the plugin. A kept body is
    /// checked here only when `inputs_checked` is false (the payload came
    /// from the source, and no rule has seen it yet).
    pub(super) fn process(&mut self, batch: Inputs<'_>, inputs_checked: bool) -> Result<Vec<Outcome>, Fault> {
        self.store.set_epoch_deadline(deadline_ticks(&self.plugin));
        self.store.data_mut().logs.reset();
        let returned = self.bindings.call_process(&mut self.store, batch);
        let suppressed = self.store.data_mut().logs.reset();
        if suppressed > 0 {
            use crate::telemetry::repeats::{Level, REPEATS, Reasons, say};
            let name = &*self.store.data().plugin_name;
            let (said, due) = REPEATS.occurred(
                name,
                Level::Warn,
                &[("plugin log", "lines past max_log_lines_per_batch suppressed")],
                std::time::Instant::now(),
                Reasons::Fixed,
            );
            if said.first().copied().unwrap_or(true) {
                tracing::warn!(plugin = %self.plugin.id, suppressed, limit = self.plugin.limits.max_log_lines_per_batch,
                    "plugin logged more lines in one batch than max_log_lines_per_batch; the rest were suppressed");
            }
            say(&due);
        }
        match returned {
            Ok(Returned::Outcomes(outcomes)) => {
                let limits = &self.plugin.limits.output;
                // Payloads `json-get-batch` found to be one JSON object
                // were parsed once already: not again for a kept body.
                let objects = std::mem::take(&mut self.store.data_mut().helpers.objects);
                let parsed = |i: usize| objects.get(i).copied().unwrap_or(false);
                Ok(outcomes
                    .into_iter()
                    .zip(batch.iter())
                    .enumerate()
                    .map(|(i, (o, record))| {
                        o.and_then(|o| {
                            let payload = record.payload();
                            let unchecked = (!inputs_checked && !parsed(i)).then_some(&payload[..]);
                            output_rules::breach(limits, &o, payload.len(), unchecked).map_or(Ok(o), Err)
                        })
                    })
                    .map(|o| match o {
                        Ok(o) => o,
                        Err(rule) => {
                            Outcome::Reject(format!("plugin {} broke the output contract: {rule}", self.plugin.id))
                        }
                    })
                    .collect())
            }
            Ok(Returned::WrongCount { outcomes }) => Err(Fault::WrongCount { records: batch.len(), outcomes }),
            Ok(Returned::Malformed(rule)) => Err(Fault::Malformed { rule }),
            Err(e) => Err(fault_of(&mut self.store, &self.plugin, e)),
        }
    }
}

impl Instance {
    /// One call of a classifier's `classify`, under the same time limit
    /// and log budget as `process`.
    pub(super) fn classify(
        &mut self,
        asked: &super::classified::Asked<'_>,
        answered: &super::classified::Answered<'_>,
    ) -> Result<super::classified::Reply, Fault> {
        self.store.set_epoch_deadline(deadline_ticks(&self.plugin));
        self.store.data_mut().logs.reset();
        let said = self.bindings.call_classify(&mut self.store, asked, answered);
        let suppressed = self.store.data_mut().logs.reset();
        if suppressed > 0 {
            tracing::warn!(plugin = %self.plugin.id, suppressed, limit = self.plugin.limits.max_log_lines_per_batch,
                "classifier logged more lines for one response than max_log_lines_per_batch; the rest were suppressed");
        }
        said.map_err(|e| fault_of(&mut self.store, &self.plugin, e))
    }
}

fn deadline_ticks(plugin: &LoadedPlugin) -> u64 {
    let ticks = plugin.limits.time_per_batch.as_nanos().div_ceil(EPOCH_TICK.as_nanos());
    // One tick more: the current tick may be almost over.
    u64::try_from(ticks).unwrap_or(u64::MAX).saturating_add(1)
}

/// What a failed call was: memory refused, time run out, or a trap with
/// what the guest wrote to stderr.
fn fault_of(store: &mut Store<StoreState>, plugin: &LoadedPlugin, error: wasmtime::Error) -> Fault {
    if let Some(wanted) = store.data_mut().limiter.refused.take() {
        return Fault::OutOfMemory { wanted, limit: plugin.limits.memory_bytes };
    }
    let stderr = store.data().stderr.take();
    match error.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => Fault::Timeout { limit_ms: plugin.limits.time_per_batch.as_millis() },
        Some(trap) => Fault::Trap { trap: trap.to_string(), stderr },
        None => Fault::Trap { trap: format!("{error:#}"), stderr },
    }
}
