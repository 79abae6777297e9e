//! `[dedup]`: how long ids are remembered, which ids see each other, and
//! the Kafka changelog that carries them to a partition's next owner.

use std::time::Duration;

use serde::Deserialize;

use crate::problem::Problems;
use crate::units::optional_duration;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DedupConfig {
    /// How long an id is remembered: at least as long as the source can
    /// replay a record. Default for files: 7 days; for Kafka: the longest
    /// retention of the topics (read from the brokers), else 7 days.
    #[schemars(with = "Option<crate::units::DurationText>")]
    #[serde(default, deserialize_with = "optional_duration")]
    pub window: Option<Duration>,
    /// Which ids see each other (Kafka): each partition's own (the
    /// default), or the whole topic's, so that a producer's re-send that
    /// lands on another partition is caught too.
    #[serde(default)]
    pub scope: DedupScope,
    /// Exact topic-wide dedup across instances (Kafka, with `scope =
    /// "topic"`): each event is produced, keyed by its id, to the internal
    /// topic `<group_id>-by-id`, so that every copy of an id lands on one
    /// partition there, owned by one member, whose partition-scoped window
    /// and changelog decide it (`pipeline::kafka::repartition`). Costs a
    /// produce and a consume per event; without it the topic scope is
    /// only as exact across instances as the changelog follower's lag.
    #[serde(default)]
    pub repartition: bool,
    /// The dedup changelog (Kafka): every recorded id is also produced to
    /// a topic of the source's cluster before its batch's offsets may be
    /// committed, and a partition's next owner restores them from there.
    #[serde(default)]
    pub changelog: ChangelogConfig,
    /// What a partition does when its changelog cannot be read to its
    /// end (deleted, recreated, unreachable): refuse to start (`fail`, the
    /// default) or run without the ids it could not restore and count
    /// what it could not check (`accept-duplicates`).
    #[serde(default)]
    pub on_missing_state: OnMissingState,
    /// Keep each delivered id's trail (when, from which position, through
    /// which sink and plugin versions) and each absorbed duplicate's, for
    /// `sluice audit`: 29 bytes beside each id, in the same write.
    #[serde(default = "default_audit")]
    pub audit: bool,
}

impl Default for DedupConfig {
    fn default() -> Self {
        DedupConfig {
            window: None,
            scope: DedupScope::default(),
            repartition: false,
            changelog: ChangelogConfig::default(),
            on_missing_state: OnMissingState::default(),
            audit: default_audit(),
        }
    }
}

fn default_audit() -> bool {
    true
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum DedupScope {
    /// An id is a duplicate only on the partition that delivered it: each
    /// instance keeps and restores the ids of the partitions it owns.
    #[default]
    Partition,
    /// An id delivered on any partition of a topic is a duplicate on all
    /// of them: every instance follows the whole changelog (memory and
    /// restore time grow with the topic, not with what it owns).
    Topic,
}

impl DedupScope {}

impl TryFrom<String> for DedupScope {
    type Error = String;
    fn try_from(s: String) -> Result<DedupScope, String> {
        match s.as_str() {
            "partition" => Ok(DedupScope::Partition),
            "topic" => Ok(DedupScope::Topic),
            _ => Err(format!("{s:?} is not a scope: \"partition\" or \"topic\"")),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum OnMissingState {
    #[default]
    Fail,
    AcceptDuplicates,
}

impl TryFrom<String> for OnMissingState {
    type Error = String;
    fn try_from(s: String) -> Result<OnMissingState, String> {
        match s.as_str() {
            "fail" => Ok(OnMissingState::Fail),
            "accept-duplicates" => Ok(OnMissingState::AcceptDuplicates),
            _ => Err(format!("{s:?} is neither \"fail\" nor \"accept-duplicates\"")),
        }
    }
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangelogConfig {
    /// On by default for a Kafka source; files never move, and have none.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Default `<group_id>-dedup-changelog`. Created by sluice when
    /// missing (as many partitions as the source topics, retention at
    /// least the window, `cleanup.policy=delete`).
    #[serde(default)]
    pub topic: Option<String>,
    /// How many times the window the changelog keeps its messages (at
    /// least 1): a message older than the window restores nothing.
    #[serde(default = "default_retention_factor")]
    pub retention_factor: u32,
}

fn yes() -> bool {
    true
}

fn default_retention_factor() -> u32 {
    2
}

impl Default for ChangelogConfig {
    fn default() -> ChangelogConfig {
        ChangelogConfig { enabled: true, topic: None, retention_factor: default_retention_factor() }
    }
}

impl DedupConfig {
    /// The changelog topic of a Kafka pipeline whose group is
    /// `kafka_group`, if it has one (a file pipeline has none).
    pub(crate) fn changelog_topic(&self, kafka_group: Option<&str>) -> Option<String> {
        let group = kafka_group?;
        if !self.changelog.enabled {
            return None;
        }
        Some(self.changelog.topic.clone().unwrap_or_else(|| format!("{group}-dedup-changelog")))
    }

    /// The section's own checks; those against `[source]` are the
    /// assembler's (`config::Config::validate`).
    pub(crate) fn validate(&self, p: &mut Problems) {
        if self.window.is_some_and(|w| w.is_zero()) {
            p.add("dedup.window", "must be greater than zero".into());
        }
        if self.repartition && self.scope != DedupScope::Topic {
            p.add(
                "dedup.repartition",
                "repartitions ids for the topic scope: set dedup.scope = \"topic\" as well (the partition scope \
                 needs no repartitioning)"
                    .into(),
            );
        }
        if let Some(t) = &self.changelog.topic
            && (t.is_empty() || !t.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)))
        {
            p.add("dedup.changelog.topic", format!("{t:?} is not a valid topic name"));
        }
        if self.changelog.retention_factor == 0 {
            p.add("dedup.changelog.retention_factor", "must be at least 1".into());
        }
    }
}

pub(crate) const DEFAULT_WINDOW: Duration = Duration::from_secs(7 * 86_400);

/// The names `DedupScope` and `OnMissingState` read, for the config's
/// JSON Schema (serde reads them through `TryFrom<String>`).
macro_rules! schema_of_names {
    ($ty:ty, $name:literal, [$($value:literal),+]) => {
        impl schemars::JsonSchema for $ty {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                $name.into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({ "type": "string", "enum": [$($value),+] })
            }
        }
    };
}

schema_of_names!(DedupScope, "DedupScope", ["partition", "topic"]);
schema_of_names!(OnMissingState, "OnMissingState", ["fail", "accept-duplicates"]);
