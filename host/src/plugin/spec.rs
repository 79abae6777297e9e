//! How to load one plugin, and the limits an instance is held to.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sluice_guest::output_rules::OutputLimits;

use crate::schema_registry::cache::Schemas;

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
    /// The component file (`.wasm`).
    pub path: PathBuf,
    /// The plugin's own config table, handed to `init` as JSON.
    pub config: serde_json::Value,
    /// What one instance may use.
    pub limits: PluginLimits,
    /// The schemas the `schema` helper answers from: the run's, when the
    /// config has a `[schema_registry]`; none answers that it has none.
    pub schemas: Option<Arc<Schemas>>,
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
        PluginSpec { name, path, config: serde_json::json!({}), limits: PluginLimits::default(), schemas: None }
    }
}
