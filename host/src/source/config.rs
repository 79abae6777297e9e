//! `[source]`: which source, and the file source's keys (the Kafka
//! source's live in `kafka/config.rs`).

use std::time::Duration;

use serde::Deserialize;

use super::kafka::config::KafkaSourceConfig;
use crate::problem::Problems;
use crate::units::{bytes, duration};

/// Where records come from (`type = "file"` or `"kafka"`).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum SourceConfig {
    /// Lines of local files, each file a partition, with a checkpoint per
    /// file in the state store (the embedded default).
    File(FileSourceConfig),
    /// A consumer group's partitions, offsets committed to the group.
    Kafka(Box<KafkaSourceConfig>),
}

/// `type = "file"`: lines of local files, rotation followed.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileSourceConfig {
    /// Paths or globs; each file found is one partition.
    pub paths: Vec<String>,
    /// Longer lines go to the quarantine whole.
    #[schemars(with = "crate::units::SizeText")]
    #[serde(default = "default_max_line", deserialize_with = "bytes")]
    pub max_line_bytes: u64,
    /// Keep reading as files grow (and follow rotation); otherwise stop at
    /// the end of every file.
    #[serde(default)]
    pub follow: bool,
    /// With `follow`: how often a file at its end is looked at again.
    #[schemars(with = "crate::units::DurationText")]
    #[serde(default = "default_poll", deserialize_with = "duration")]
    pub poll_interval: Duration,
    /// A batch ends at `pipeline.batch_size` lines or at this many bytes,
    /// whichever comes first: what bounds memory when lines are long (a
    /// batch of 1,000 lines of 1 MiB would otherwise be 1 GiB per batch in
    /// flight). Default 8MiB, the same as a Kafka partition's queue.
    #[schemars(with = "crate::units::SizeText")]
    #[serde(default = "default_batch_bytes", deserialize_with = "bytes")]
    pub batch_bytes: u64,
}

fn default_max_line() -> u64 {
    1 << 20
}

fn default_batch_bytes() -> u64 {
    8 << 20
}

fn default_poll() -> Duration {
    Duration::from_millis(250)
}

impl FileSourceConfig {
    pub(crate) fn validate(&self, p: &mut Problems) {
        if self.paths.is_empty() {
            p.add("source.paths", "name at least one path or glob".into());
        }
        for (i, pattern) in self.paths.iter().enumerate() {
            if let Err(e) = glob::Pattern::new(pattern) {
                p.add(&format!("source.paths[{i}]"), format!("{pattern:?}: {e}"));
            }
        }
        if self.max_line_bytes < 16 {
            p.add("source.max_line_bytes", "must be at least 16 bytes".into());
        }
        if self.batch_bytes < 1024 {
            p.add("source.batch_bytes", "must be at least 1KiB".into());
        }
    }
}

impl SourceConfig {
    pub(crate) fn validate(&self, p: &mut Problems) {
        match self {
            SourceConfig::File(f) => f.validate(p),
            SourceConfig::Kafka(k) => {
                if let Some(e) = crate::features::Feature::Kafka.missing("source type \"kafka\"") {
                    p.add("source.type", e.to_string());
                }
                k.validate(p)
            }
        }
    }

    /// The consumer group of a Kafka source.
    pub(crate) fn kafka_group(&self) -> Option<&str> {
        match self {
            SourceConfig::Kafka(k) => Some(&k.group_id),
            SourceConfig::File(_) => None,
        }
    }

    pub(crate) fn is_kafka(&self) -> bool {
        matches!(self, SourceConfig::Kafka(_))
    }
}
