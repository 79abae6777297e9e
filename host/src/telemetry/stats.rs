//! What a run did, per partition and in total: the same counts the
//! metrics endpoint will export (issue 4).

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;

use crate::custody::offsets::Door;

/// One partition's (or the run's) records by the door they left through:
/// `records` is their sum once the run has finished them all, the
/// reconciliation the summary `sluice run` prints at its end shows.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Counts {
    /// Records read from the source.
    pub records: u64,
    /// Records whose events the sink took.
    pub delivered: u64,
    /// Records whose events the dedup window (or the backend) already had.
    pub duplicate: u64,
    /// Records quarantined durably, with a reason.
    pub quarantined: u64,
    /// Records a plugin dropped on purpose.
    pub dropped: u64,
    /// Seconds spent in the plugin chain.
    pub plugin_seconds: f64,
    /// Seconds spent delivering to the sinks.
    pub sink_seconds: f64,
}

impl Counts {
    pub(crate) fn count(&mut self, door: Door) {
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
    /// Every partition's counts summed.
    pub total: Counts,
    /// Counts by partition (`topic/partition`, or the file's path).
    pub partitions: BTreeMap<String, Counts>,
    /// The run's wall time.
    pub seconds: f64,
    /// Quarantined records by `stage: reason` (masked), at most
    /// [`MAX_REASONS`] of them.
    pub reasons: Reasons,
    /// From a record's arrival (its batch's first record's) to its durable
    /// commit, per record.
    #[serde(skip)]
    pub latency: Latency,
    /// Per partition, when its first batch was received and its last one
    /// became durable: what its records per second are measured over.
    #[serde(skip)]
    pub spans: BTreeMap<String, (Instant, Instant)>,
}

/// Reasons kept apart in a run's summary: a reason that names the value at
/// fault would otherwise make one row per record.
pub(crate) const MAX_REASONS: usize = 1_000;

/// Quarantined records counted by `stage: reason`, at most a given number
/// of reasons kept apart; the rest are counted under [`Reasons::OTHER`].
#[derive(Debug, Default, Clone, Serialize)]
#[serde(transparent)]
pub struct Reasons(pub BTreeMap<String, u64>);

impl Reasons {
    pub(crate) const OTHER: &'static str = "(other reasons)";

    pub(crate) fn add<'r>(&mut self, reasons: impl IntoIterator<Item = (&'r str, &'r str)>, max: usize) {
        for (stage, reason) in reasons {
            let key = format!("{stage}: {reason}");
            if let Some(n) = self.0.get_mut(&key) {
                *n += 1;
            } else if self.0.len() < max {
                self.0.insert(key, 1);
            } else {
                *self.0.entry(Self::OTHER.to_string()).or_insert(0) += 1;
            }
        }
    }
}

/// A histogram of latencies with buckets a fourth of an octave wide
/// (about 19% apart), from 1 µs to about 1,000 s: quantiles within 19%.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    counts: Vec<u64>,
}

const LATENCY_BUCKETS: usize = 4 * 30;

impl Default for Latency {
    fn default() -> Self {
        Latency { counts: vec![0; LATENCY_BUCKETS] }
    }
}

impl Latency {
    fn bucket(seconds: f64) -> usize {
        let micros = (seconds * 1e6).max(1.0);
        ((micros.log2() * 4.0) as usize).min(LATENCY_BUCKETS - 1)
    }

    /// `n` records that took `seconds`.
    pub(crate) fn record(&mut self, seconds: f64, n: usize) {
        self.counts[Self::bucket(seconds)] += n as u64;
    }

    /// The upper edge of the bucket holding quantile `q` (0..=1), seconds.
    pub fn quantile(&self, q: f64) -> f64 {
        let total: u64 = self.counts.iter().sum();
        if total == 0 {
            return 0.0;
        }
        let want = ((total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return 2f64.powf((i + 1) as f64 / 4.0) / 1e6;
            }
        }
        f64::INFINITY
    }
}

impl RunStats {
    /// A batch of `partition`, received at `received`, is durable now.
    pub(crate) fn add(&mut self, partition: &str, c: &Counts, received: Instant) {
        self.total.merge(c);
        match self.partitions.get_mut(partition) {
            Some(p) => p.merge(c),
            None => {
                self.partitions.insert(partition.to_string(), c.clone());
            }
        }
        let now = Instant::now();
        match self.spans.get_mut(partition) {
            Some(span) => *span = (span.0.min(received), now),
            None => {
                self.spans.insert(partition.to_string(), (received, now));
            }
        }
    }

    /// A batch's quarantined records, `(stage, reason)` each.
    pub(crate) fn quarantined<'r>(&mut self, reasons: impl IntoIterator<Item = (&'r str, &'r str)>) {
        self.reasons.add(reasons, MAX_REASONS);
    }

    /// Records per second of `partition`, from its first batch's arrival
    /// to its last batch's commit.
    pub(crate) fn rate(&self, partition: &str) -> Option<f64> {
        let (first, last) = self.spans.get(partition)?;
        let seconds = last.saturating_duration_since(*first).as_secs_f64();
        let records = self.partitions.get(partition)?.records;
        (seconds > 0.0).then(|| records as f64 / seconds)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn quantiles_land_within_a_bucket_of_the_truth() {
        let mut l = super::Latency::default();
        l.record(0.001, 90);
        l.record(0.5, 10);
        let p50 = l.quantile(0.5);
        let p99 = l.quantile(0.99);
        assert!((0.001..0.0012).contains(&p50), "p50 {p50}");
        assert!((0.5..0.6).contains(&p99), "p99 {p99}");
        assert_eq!(super::Latency::default().quantile(0.5), 0.0);
    }
}
