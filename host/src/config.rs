//! The pipeline config: one TOML file, every key overridable by an
//! environment variable `SLUICE__SECTION__KEY` (double underscores between
//! levels: `SLUICE__PIPELINE__BATCH_SIZE=500`). Typed with serde, unknown
//! keys refused, validated before anything is read, so a malformed config
//! stops the start with one message naming the key or file at fault.
//! `examples/quickstart/sluice.toml` is the annotated example.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use crate::plugin::{PluginLimits, PluginSpec};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {}: {message}", path.display())]
    Load { path: PathBuf, message: String },
    #[error("config {}: {key}: {message}", path.display())]
    Invalid { path: PathBuf, key: String, message: String },
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub pipeline: PipelineConfig,
    pub source: SourceConfig,
    #[serde(default)]
    pub plugins: Vec<PluginConfig>,
    #[serde(default)]
    pub dedup: DedupConfig,
    pub sink: SinkConfig,
    #[serde(default)]
    pub quarantine: QuarantineConfig,
    #[serde(default)]
    pub shutdown: ShutdownConfig,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    /// Identifies the pipeline; the state store refuses to open for another.
    pub name: String,
    /// Where checkpoints, dedup ids and the quarantine live (RocksDB).
    pub state_dir: PathBuf,
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
}

fn default_batch_size() -> usize {
    1000
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum SourceConfig {
    File(FileSourceConfig),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSourceConfig {
    /// Paths or globs; each file found is one partition.
    pub paths: Vec<String>,
    /// Longer lines go to the quarantine whole.
    #[serde(default = "default_max_line", deserialize_with = "bytes")]
    pub max_line_bytes: u64,
    /// Keep reading as files grow (and follow rotation); otherwise stop at
    /// the end of every file.
    #[serde(default)]
    pub follow: bool,
    #[serde(default = "default_poll", deserialize_with = "duration")]
    pub poll_interval: Duration,
}

fn default_max_line() -> u64 {
    1 << 20
}

fn default_poll() -> Duration {
    Duration::from_millis(250)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginConfig {
    pub name: String,
    pub path: PathBuf,
    /// The plugin's own table, handed to its `init`.
    #[serde(default = "empty_table")]
    pub config: serde_json::Value,
    #[serde(default = "default_memory", deserialize_with = "bytes")]
    pub memory: u64,
    #[serde(default = "default_time_limit", deserialize_with = "duration")]
    pub time_limit: Duration,
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

impl PluginConfig {
    pub fn spec(&self) -> PluginSpec {
        PluginSpec {
            name: self.name.clone(),
            path: self.path.clone(),
            config: self.config.clone(),
            limits: PluginLimits {
                memory_bytes: usize::try_from(self.memory).unwrap_or(usize::MAX),
                time_per_batch: self.time_limit,
            },
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DedupConfig {
    /// How long an id is remembered: at least as long as the source can
    /// replay a record (for files: as long as you might re-run them).
    #[serde(default = "default_window", deserialize_with = "duration")]
    pub window: Duration,
}

impl Default for DedupConfig {
    fn default() -> Self {
        DedupConfig { window: default_window() }
    }
}

fn default_window() -> Duration {
    Duration::from_secs(7 * 86_400)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum SinkConfig {
    /// NDJSON, synced before a batch counts as delivered.
    File { path: PathBuf },
    /// NDJSON on standard output (flushed; not durable).
    Stdout,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuarantineConfig {
    /// JSON fields (dotted paths) masked before an entry is written; the
    /// unmasked original is then not kept, and the entry says so.
    #[serde(default)]
    pub mask_fields: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShutdownConfig {
    /// How long in-flight work may take to finish after SIGTERM/SIGINT.
    #[serde(default = "default_grace", deserialize_with = "duration")]
    pub grace: Duration,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        ShutdownConfig { grace: default_grace() }
    }
}

fn default_grace() -> Duration {
    Duration::from_secs(10)
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    sluice_guest::duration::deserialize(d)
}

/// Sizes: `1048576`, `64KiB`, `1MiB`, `2GiB`, `10MB`.
fn bytes<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        N(u64),
        S(String),
    }
    match Raw::deserialize(d)? {
        Raw::N(n) => Ok(n),
        Raw::S(s) => parse_size(&s).map_err(serde::de::Error::custom),
    }
}

/// Remove `.` and `..` without touching the file system (the path may not
/// exist yet, and symlinks are the operator's to choose).
pub fn normalize(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("invalid size {s:?} (examples: 65536, 64KiB, 256MiB)"))?;
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => return Err(format!("invalid size {s:?}: unknown unit (use B, KiB, MiB, GiB, KB, MB, GB)")),
    };
    n.checked_mul(mult).ok_or_else(|| format!("invalid size {s:?}: too large"))
}

impl Config {
    /// Load `path`, apply `SLUICE__…` environment overrides, resolve
    /// relative paths against the config file's folder, and validate.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let load_err = |message: String| ConfigError::Load { path: path.to_path_buf(), message };
        if !path.is_file() {
            return Err(load_err("no such file".into()));
        }
        let raw = config::Config::builder()
            .add_source(config::File::from(path).format(config::FileFormat::Toml))
            .add_source(
                config::Environment::with_prefix("SLUICE").prefix_separator("__").separator("__").try_parsing(true),
            )
            .build()
            .map_err(|e| load_err(e.to_string()))?;
        let mut cfg: Config = raw.try_deserialize().map_err(|e| load_err(e.to_string()))?;
        // Absolute and normalised: partition keys and the store's identity
        // are paths, and must not depend on the directory sluice runs from.
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let base = std::path::absolute(dir).map_err(|e| load_err(e.to_string()))?;
        cfg.resolve_paths(&base);
        cfg.validate(path)?;
        Ok(cfg)
    }

    fn resolve_paths(&mut self, base: &Path) {
        let abs = |p: &Path| normalize(&if p.is_absolute() { p.to_path_buf() } else { base.join(p) });
        self.pipeline.state_dir = abs(&self.pipeline.state_dir);
        for p in &mut self.plugins {
            p.path = abs(&p.path);
        }
        let SourceConfig::File(f) = &mut self.source;
        for pattern in &mut f.paths {
            *pattern = abs(Path::new(pattern.as_str())).to_string_lossy().into_owned();
        }
        if let SinkConfig::File { path } = &mut self.sink {
            *path = abs(path);
        }
    }

    fn validate(&self, file: &Path) -> Result<(), ConfigError> {
        let invalid =
            |key: &str, message: String| ConfigError::Invalid { path: file.to_path_buf(), key: key.into(), message };
        if self.pipeline.name.trim().is_empty() {
            return Err(invalid("pipeline.name", "must not be empty".into()));
        }
        if !(1..=100_000).contains(&self.pipeline.batch_size) {
            return Err(invalid(
                "pipeline.batch_size",
                format!("{} is not within 1..=100000", self.pipeline.batch_size),
            ));
        }
        let SourceConfig::File(f) = &self.source;
        if f.paths.is_empty() {
            return Err(invalid("source.paths", "name at least one path or glob".into()));
        }
        for (i, pattern) in f.paths.iter().enumerate() {
            glob::Pattern::new(pattern)
                .map_err(|e| invalid(&format!("source.paths[{i}]"), format!("{pattern:?}: {e}")))?;
        }
        if f.max_line_bytes < 16 {
            return Err(invalid("source.max_line_bytes", "must be at least 16 bytes".into()));
        }
        for (i, p) in self.plugins.iter().enumerate() {
            if !p.path.is_file() {
                return Err(invalid(&format!("plugins[{i}].path"), format!("{}: no such file", p.path.display())));
            }
            if p.memory < 1 << 20 {
                return Err(invalid(&format!("plugins[{i}].memory"), "must be at least 1MiB".into()));
            }
            if !p.config.is_object() {
                return Err(invalid(&format!("plugins[{i}].config"), "must be a table".into()));
            }
        }
        if let Some(dup) = self
            .plugins
            .iter()
            .enumerate()
            .find_map(|(i, p)| self.plugins[..i].iter().any(|q| q.name == p.name).then_some(&p.name))
        {
            return Err(invalid(
                "plugins",
                format!("two plugins are named {dup:?}: names label metrics and quarantine entries"),
            ));
        }
        if self.dedup.window.is_zero() {
            return Err(invalid("dedup.window", "must be greater than zero".into()));
        }
        if let SinkConfig::File { path } = &self.sink {
            let dir = path.parent().unwrap_or(Path::new("."));
            if dir.exists() && !dir.is_dir() {
                return Err(invalid("sink.path", format!("{} is not a folder", dir.display())));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_is_lexical() {
        assert_eq!(normalize(Path::new("/a/b/../../c/./d")), PathBuf::from("/c/d"));
        assert_eq!(normalize(Path::new("/a/x/../*.log")), PathBuf::from("/a/*.log"));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64KiB"), Ok(65_536));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("10MB"), Ok(10_000_000));
        assert_eq!(parse_size("12"), Ok(12));
        assert!(parse_size("1 parsec").is_err());
        assert!(parse_size("MiB").is_err());
    }
}
