//! Fault containment. A batch normally crosses into the plugin in one call.
//! When that call faults (trap, timeout, memory limit, wrong outcome count)
//! the instance is rebuilt and the batch re-run one record at a time: the
//! records that still fault are rejected with the fault as their reason
//! (they go to the quarantine), and every other record gets its real
//! outcome. One poison record never takes its batch, or the host, down.

use std::sync::Arc;

use super::engine::LoadedPlugin;
use super::error::Fault;
use super::error::PluginError;
use super::inputs::Inputs;
use super::instance::Instance;
use crate::record::{Outcome, Record};
use crate::verdict::PluginId;

/// Counters a stage keeps about its own health.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StageStats {
    /// Batches handed to the plugin.
    pub batches: u64,
    /// Batches on which it faulted, then run again record by record.
    pub faulted_batches: u64,
    /// Records rejected because the plugin faulted on them alone.
    pub faulted_records: u64,
    /// Fresh instances made after a fault (a trap leaves one unusable).
    pub rebuilds: u64,
}

/// A plugin instance that survives its own faults.
pub struct Isolated {
    plugin: Arc<LoadedPlugin>,
    instance: Instance,
    stats: StageStats,
}

impl Isolated {
    /// Instantiate and initialise; a config refusal comes back as
    /// [`PluginError::Config`] with the plugin's own message.
    pub fn new(plugin: Arc<LoadedPlugin>) -> Result<Isolated, PluginError> {
        if plugin.contract() == crate::plugin::contract::Contract::Classifier {
            return Err(PluginError::Link {
                plugin: plugin.id.to_string(),
                message: "it is a classifier (it reads a sink's answers, not records): name it in [sink.classifier], not [[plugins]]".into(),
            });
        }
        let instance = Instance::new(plugin.clone())?;
        Ok(Isolated { plugin, instance, stats: StageStats::default() })
    }

    /// The plugin's name and digest, for verdicts and quarantine entries.
    pub fn id(&self) -> &PluginId {
        &self.plugin.id
    }

    /// The contract version the plugin speaks.
    pub fn contract(&self) -> crate::plugin::contract::Contract {
        self.plugin.contract()
    }

    /// The counters so far.
    pub fn stats(&self) -> StageStats {
        self.stats
    }

    /// Exactly one outcome per record, in order. Errs only when the
    /// instance cannot be rebuilt (which a deterministic plugin that
    /// initialised once does not do).
    pub fn process(&mut self, batch: &[Record]) -> Result<Vec<Outcome>, PluginError> {
        let refs: Vec<&Record> = batch.iter().collect();
        self.process_refs(&refs)
    }

    /// [`Isolated::process`] over borrowed records.
    pub(crate) fn process_refs(&mut self, batch: &[&Record]) -> Result<Vec<Outcome>, PluginError> {
        let outcomes = self.process_kept(Inputs::sources(batch), false)?;
        Ok(outcomes.into_iter().zip(batch).map(|(o, r)| o.resolve(r)).collect())
    }

    /// One outcome per record, where an event that keeps its record's
    /// payload stays [`Outcome::Keep`] (a chain moves the payload on).
    /// `inputs_checked`: every payload of `batch` is an earlier stage's
    /// event body, which the output contract has checked already, so a
    /// kept one is not checked again.
    pub fn process_kept(&mut self, batch: Inputs<'_>, inputs_checked: bool) -> Result<Vec<Outcome>, PluginError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        self.stats.batches += 1;
        let fault = match self.instance.process(batch, inputs_checked) {
            Ok(outcomes) => return Ok(outcomes),
            Err(fault) => fault,
        };
        self.stats.faulted_batches += 1;
        let fault_text = fault.to_string();
        if said_once(&self.plugin.id.name, "fault", &fault_text) {
            tracing::warn!(plugin = %self.plugin.id, records = batch.len(), %fault,
                "plugin faulted on a batch; re-running it record by record to isolate the record at fault");
        }
        self.rebuild()?;
        if batch.len() == 1 {
            return Ok(vec![self.reject(&fault)]);
        }
        let mut outcomes = Vec::with_capacity(batch.len());
        for (i, record) in batch.iter().enumerate() {
            match self.instance.process(batch.one(i), inputs_checked) {
                Ok(mut one) => outcomes.extend(one.pop()),
                Err(fault) => {
                    if said_once(&self.plugin.id.name, "fault on a record", &fault.to_string()) {
                        tracing::warn!(plugin = %self.plugin.id, position = ?record.position(), %fault,
                            "record rejected: the plugin faults on it");
                    }
                    outcomes.push(self.reject(&fault));
                    self.rebuild()?;
                }
            }
        }
        Ok(outcomes)
    }

    fn reject(&mut self, fault: &Fault) -> Outcome {
        self.stats.faulted_records += 1;
        Outcome::Reject(format!("plugin {} faulted: {fault}", self.plugin.id))
    }

    fn rebuild(&mut self) -> Result<(), PluginError> {
        self.stats.rebuilds += 1;
        self.instance = Instance::new(self.plugin.clone())?;
        Ok(())
    }
}

/// Whether a fault line is said in full (`telemetry::repeats`): a plugin
/// that faults on every record is not a line per record.
fn said_once(plugin: &str, stage: &str, fault: &str) -> bool {
    use crate::telemetry::repeats::{Level, REPEATS, Reasons, say};
    if !tracing::enabled!(tracing::Level::WARN) {
        return false;
    }
    let (said, due) =
        REPEATS.occurred(plugin, Level::Warn, &[(stage, fault)], std::time::Instant::now(), Reasons::FromData);
    say(&due);
    said.first().copied().unwrap_or(true)
}
