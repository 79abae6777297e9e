//! `[[plugins]]`: one WebAssembly plugin of the chain, with the limits
//! the host holds it to.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use sluice_guest::output_rules::OutputLimits;

use super::spec::{PluginLimits, PluginSpec};
use crate::problem::Problems;
use crate::units::{bytes, duration};

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PluginConfig {
    /// Names the plugin in logs, metrics, quarantine entries and its
    /// version (name and digest).
    pub name: String,
    /// The plugin's WebAssembly component (`.wasm`), relative to this
    /// config file.
    pub path: PathBuf,
    /// `"blake3:<hex>"` or `"sha256:<hex>"`: the file must have this
    /// digest, or the start (and a reload) stops. `sluice plugin inspect`
    /// prints the line.
    #[serde(default)]
    pub digest: Option<String>,
    /// The plugin's own table, handed to its `init` (the first-party
    /// plugins' keys: the book's "First-party plugins").
    #[serde(default = "empty_table")]
    pub config: serde_json::Value,
    /// The plugin's own table from a file of its own instead (TOML, or
    /// JSON when named `*.json`): the file `sluice plugin run --config`
    /// reads, so the table a plugin was developed with is the one the
    /// pipeline runs. Relative to this config file.
    #[serde(default)]
    pub config_file: Option<PathBuf>,
    /// The most memory one instance may grow to; a batch that needs more
    /// traps, and is retried record by record to quarantine the record
    /// that did it.
    #[schemars(with = "crate::units::SizeText")]
    #[serde(default = "default_memory", deserialize_with = "bytes")]
    pub memory: u64,
    /// The longest one batch may run in the plugin; past it the batch is
    /// interrupted and retried record by record, as after a trap.
    #[schemars(with = "crate::units::DurationText")]
    #[serde(default = "default_time_limit", deserialize_with = "duration")]
    pub time_limit: Duration,
    /// The longest event id the plugin may set, in bytes. The output
    /// contract's bounds (this and the next three): a record whose events
    /// exceed one is rejected into the quarantine, naming the plugin and
    /// the rule.
    #[serde(default = "default_max_id_bytes")]
    pub max_id_bytes: usize,
    /// Events one record may become.
    #[serde(default = "default_max_events")]
    pub max_events_per_record: usize,
    /// Bytes of event bodies one record may become.
    #[schemars(with = "crate::units::SizeText")]
    #[serde(default = "default_max_event_bytes", deserialize_with = "bytes")]
    pub max_event_bytes_per_record: u64,
    /// Log lines one batch may send before the rest are only counted.
    #[serde(default = "default_max_log_lines")]
    pub max_log_lines_per_batch: u32,
}

fn default_max_id_bytes() -> usize {
    OutputLimits::default().max_id_bytes
}

fn default_max_events() -> usize {
    OutputLimits::default().max_events_per_record
}

fn default_max_event_bytes() -> u64 {
    OutputLimits::default().max_event_bytes_per_record as u64
}

fn default_max_log_lines() -> u32 {
    PluginLimits::default().max_log_lines_per_batch
}

fn empty_table() -> serde_json::Value {
    serde_json::json!({})
}

fn default_memory() -> u64 {
    PluginLimits::default().memory_bytes as u64
}

fn default_time_limit() -> Duration {
    PluginLimits::default().time_per_batch
}

/// A plugin's config table from a file: JSON when the file is named
/// `*.json`, TOML otherwise (what a `[[plugins]]` `config` table holds).
/// The one reader of `config_file`, `plugin run --config` and `shadow
/// --plugin-config`.
pub(crate) fn read_table(path: &std::path::Path) -> Result<serde_json::Value, TableError> {
    let at = || path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| TableError::Read { path: at(), source })?;
    let value = if path.extension().is_some_and(|e| e == "json") {
        serde_json::from_str::<serde_json::Value>(&text).map_err(|source| TableError::Json { path: at(), source })?
    } else {
        let table: toml::Table = toml::from_str(&text).map_err(|source| TableError::Toml { path: at(), source })?;
        serde_json::to_value(table).map_err(|source| TableError::Convert { path: at(), source })?
    };
    if !value.is_object() {
        return Err(TableError::NotATable { path: at(), kind: sluice_guest::json::kind(&value) });
    }
    Ok(value)
}

/// Why a plugin's config file gives no table, naming the file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TableError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("invalid JSON in {path}: {source}")]
    Json { path: String, source: serde_json::Error },
    #[error("invalid TOML in {path}: {source}")]
    Toml { path: String, source: toml::de::Error },
    #[error("cannot convert {path} to JSON: {source}")]
    Convert { path: String, source: serde_json::Error },
    #[error("{path} must hold one table (an object): the plugin's config, not {kind}")]
    NotATable { path: String, kind: &'static str },
}

impl PluginConfig {
    /// `config_file`'s table into `config`, once the paths are absolute.
    /// `i`: the plugin's place in `[[plugins]]`, for the keys named.
    pub(crate) fn read_config_file(&mut self, i: usize, p: &mut Problems) {
        let Some(file) = &self.config_file else { return };
        if self.config.as_object().is_some_and(|o| !o.is_empty()) {
            p.add(&format!("plugins[{i}].config_file"), "give config or config_file, not both".into());
            return;
        }
        match read_table(file) {
            Ok(table) => self.config = table,
            Err(e) => p.add(&format!("plugins[{i}].config_file"), e.to_string()),
        }
    }

    /// `i`: the plugin's place in `[[plugins]]`, for the keys named.
    pub(crate) fn validate(&self, i: usize, p: &mut Problems) {
        if !self.path.is_file() {
            p.add(&format!("plugins[{i}].path"), format!("{}: no such file", self.path.display()));
        }
        if self.memory < 1 << 20 {
            p.add(&format!("plugins[{i}].memory"), "must be at least 1MiB".into());
        }
        if self.max_id_bytes == 0 || self.max_events_per_record == 0 || self.max_event_bytes_per_record == 0 {
            let key = if self.max_id_bytes == 0 {
                "max_id_bytes"
            } else if self.max_events_per_record == 0 {
                "max_events_per_record"
            } else {
                "max_event_bytes_per_record"
            };
            p.add(&format!("plugins[{i}].{key}"), "must be at least 1".into());
        }
        if !self.config.is_object() {
            p.add(&format!("plugins[{i}].config"), "must be a table".into());
        }
        if let Some(d) = &self.digest
            && let Err(e) = d.parse::<crate::plugin::pin::Pin>()
        {
            p.add(&format!("plugins[{i}].digest"), e);
        }
    }
}

/// What the runtime needs of a `[[plugins]]` entry.
impl PluginConfig {
    pub(crate) fn spec(&self) -> PluginSpec {
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
            schemas: None,
        }
    }
}
