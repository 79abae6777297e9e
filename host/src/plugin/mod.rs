//! The plugin runtime: WebAssembly components that turn records into events.
//!
//! - `engine`: compile once per digest, the time-limit clock;
//! - `cache`: compiled plugins kept by digest, in memory and on disk, bounded;
//! - `sandbox`: what an instance may touch (nothing) and its memory cap;
//! - `instance`: one store, one call, and what a fault was;
//! - `isolate`: a batch call that falls back to record by record on a fault;
//! - `chain`: stages in a row, and the per-source-record verdict;
//! - `inputs`: what a stage reads (source records, or lanes beside them);
//! - `classifier`: plugins that read a sink's answers (`wit/classifier.wit`);
//! - `inspect`: what a component file is, without running it;
//! - `contract`: the 0.1 and 0.2 versions of the WIT contract, detected
//!   at load, and the generated bindings, private to this module;
//! - `output_rules`: what an event must be, whichever the version.

pub mod cache;
mod chain;
mod classified;
pub mod classifier;
pub mod config;
pub mod conformance;
mod contract;
mod engine;
pub mod expect;
pub mod helpers;
pub mod inputs;
pub mod inspect;
mod instance;
mod isolate;
pub mod output_rules;
pub mod pin;
mod sandbox;

use std::path::PathBuf;
use std::time::Duration;

use sluice_guest::output_rules::OutputLimits;

pub use crate::record::{Event, IntoPayload, Outcome, Position, Record};
pub use crate::record::{json_or_string, json_or_string_bytes};
pub use cache::{DISK_BYTES, DISK_ENTRIES, MEMORY_ENTRIES};
pub use chain::{Chain, Judged, Judgement, Verdict, Verdicts};
pub use contract::Contract;
pub use engine::{CacheStats, LoadedPlugin, Runtime};
pub use instance::Fault;
pub use isolate::{Isolated, StageStats};

pub use crate::verdict::PluginId;

/// Resource limits of one plugin instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginLimits {
    /// Linear memory cap, bytes.
    pub memory_bytes: usize,
    /// Wall time one `process` (or `init`) call may take.
    pub time_per_batch: Duration,
    /// What one record may become (`output_rules`).
    pub output: OutputLimits,
    /// Log lines one `process` call may send; the rest are counted and
    /// reported as one line, so a plugin cannot flood the operator's log.
    pub max_log_lines_per_batch: u32,
    /// `sluice test`: the plugin's clock stands still at this instant (ns
    /// since the epoch), so a case about a timestamp's age passes the
    /// same way next year. `None`, always in a pipeline: the host's clock.
    pub fixed_now: Option<i64>,
}

impl Default for PluginLimits {
    /// 256 MiB holds an interpreted-language plugin (a componentize-py
    /// component needs tens of MiB) with room for large batches; 5 s is
    /// generous for 1,000 records yet stops a spinning plugin quickly.
    fn default() -> Self {
        PluginLimits {
            memory_bytes: 256 << 20,
            time_per_batch: Duration::from_secs(5),
            output: OutputLimits::default(),
            max_log_lines_per_batch: 100,
            fixed_now: None,
        }
    }
}

/// How to load one plugin.
#[derive(Debug, Clone)]
pub struct PluginSpec {
    /// Name used in logs, metrics and quarantine entries.
    pub name: String,
    pub path: PathBuf,
    /// The plugin's own config table, handed to `init` as JSON.
    pub config: serde_json::Value,
    pub limits: PluginLimits,
}

impl PluginSpec {
    /// A spec named after the file (`json.wasm` → `json`), empty config.
    pub fn from_path(path: impl Into<PathBuf>) -> PluginSpec {
        let path = path.into();
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .map(|s| s.strip_prefix("sluice_plugin_").unwrap_or(s).replace('_', "-"))
            .unwrap_or_else(|| "plugin".to_string());
        PluginSpec { name, path, config: serde_json::json!({}), limits: PluginLimits::default() }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("cannot set up the WebAssembly engine: {0}")]
    Engine(String),
    #[error("cannot read plugin {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("plugin {} is not a valid WebAssembly component: {message}", path.display())]
    Compile { path: PathBuf, message: String },
    #[error("plugin {plugin} cannot be linked: {message}")]
    Link { plugin: String, message: String },
    #[error("plugin {plugin} cannot be instantiated: {message}")]
    Instantiate { plugin: String, message: String },
    #[error("plugin {plugin} refused its config: {message}")]
    Config { plugin: String, message: String },
    #[error("plugin {plugin} faulted in init: {fault}")]
    Init { plugin: String, fault: Fault },
}

/// Load and initialise a chain of plugins, in order.
pub fn build_chain(runtime: &Runtime, specs: &[PluginSpec]) -> Result<Chain, PluginError> {
    let stages = specs.iter().map(|spec| Isolated::new(runtime.load(spec)?)).collect::<Result<Vec<_>, _>>()?;
    Ok(Chain::new(stages))
}

/// The hex blake3 digest of a plugin's bytes: its version.
pub fn digest_hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// What the runtime needs of a `[[plugins]]` entry.
impl config::PluginConfig {
    pub fn spec(&self) -> PluginSpec {
        PluginSpec {
            name: self.name.clone(),
            path: self.path.clone(),
            config: self.config.clone(),
            limits: PluginLimits {
                memory_bytes: usize::try_from(self.memory).unwrap_or(usize::MAX),
                time_per_batch: self.time_limit,
                output: OutputLimits {
                    max_id_bytes: self.max_id_bytes,
                    max_events_per_record: self.max_events_per_record,
                    max_event_bytes_per_record: usize::try_from(self.max_event_bytes_per_record).unwrap_or(usize::MAX),
                },
                max_log_lines_per_batch: self.max_log_lines_per_batch,
                fixed_now: None,
            },
        }
    }
}
