//! What a run did, per partition and in total: the same counts the
//! metrics endpoint will export (issue 4).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::offsets::Door;

#[derive(Debug, Default, Clone, Serialize)]
pub struct Counts {
    pub records: u64,
    pub delivered: u64,
    pub duplicate: u64,
    pub quarantined: u64,
    pub dropped: u64,
    pub plugin_seconds: f64,
    pub sink_seconds: f64,
}

impl Counts {
    pub(super) fn count(&mut self, door: Door) {
        match door {
            Door::Delivered => self.delivered += 1,
            Door::Duplicate => self.duplicate += 1,
            Door::Quarantined => self.quarantined += 1,
            Door::Dropped => self.dropped += 1,
        }
    }

    fn merge(&mut self, o: &Counts) {
        self.records += o.records;
        self.delivered += o.delivered;
        self.duplicate += o.duplicate;
        self.quarantined += o.quarantined;
        self.dropped += o.dropped;
        self.plugin_seconds += o.plugin_seconds;
        self.sink_seconds += o.sink_seconds;
    }
}

/// Records counted per door: `delivered` counts records (not events) whose
/// events all reached the sink or were duplicates with at least one new.
#[derive(Debug, Default, Clone, Serialize)]
pub struct RunStats {
    pub total: Counts,
    pub partitions: BTreeMap<String, Counts>,
    pub seconds: f64,
}

impl RunStats {
    pub(super) fn add(&mut self, partition: &str, c: &Counts) {
        self.total.merge(c);
        self.partitions.entry(partition.to_string()).or_default().merge(c);
    }
}
