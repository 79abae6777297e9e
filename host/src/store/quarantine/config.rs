//! `[quarantine]`: what is masked before an entry is written, and the
//! Kafka topic every entry is also produced to.

use serde::Deserialize;

use crate::problem::Problems;

#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuarantineConfig {
    /// JSON fields masked before an entry is written: a name
    /// (`password`) wherever it is in the object, or a dotted path from the
    /// root (`auth.key`), in the payload and a Kafka record's key; a Kafka
    /// header of that name (in any case) is masked whole. The unmasked
    /// original is then not kept, and the entry says what was masked.
    #[serde(default)]
    pub mask_fields: Vec<String>,
    /// Regexes masked in payloads that are not JSON (`token=(\S+)`), and in
    /// every string of those that are: the first capture group, or the
    /// whole match when there is none, becomes `***`.
    #[serde(default)]
    pub mask_patterns: Vec<String>,
    /// Kafka pipelines: also produce every quarantined record to this
    /// topic of the source's cluster (the original as the value, the
    /// context in headers). Each entry is acknowledged by the brokers
    /// (`acks=all`) before the record's offset may be committed.
    pub topic: Option<String>,
}

impl QuarantineConfig {
    /// `kafka`: the source is Kafka (a topic is only for it).
    pub(crate) fn validate(&self, kafka: bool, p: &mut Problems) {
        for (i, pattern) in self.mask_patterns.iter().enumerate() {
            if let Err(e) = regex::bytes::Regex::new(pattern) {
                p.add(&format!("quarantine.mask_patterns[{i}]"), format!("{pattern:?}: {e}"));
            }
        }
        if let Some(topic) = &self.topic {
            if !kafka {
                p.add("quarantine.topic", "only for a kafka source (files keep the local quarantine)".into());
            }
            if topic.is_empty() || !topic.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) {
                p.add("quarantine.topic", format!("{topic:?} is not a valid topic name"));
            }
        }
    }
}
