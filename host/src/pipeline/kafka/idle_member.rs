//! A member left with nothing to do while its topics fall behind.
//!
//! The partition watchdog watches partitions; a member that owns none has
//! nothing for it to watch. With more members than partitions that is a
//! standby, and fine. But a group can also be held by a member that does no
//! work: one the broker keeps after it died (tansu has been seen to keep a
//! SIGKILLed member of a settled group), or another program in the same
//! group that reads and never commits. Then every healthy member sits idle,
//! `/ready` is 503 (no partitions), `/health` is "ok", and the lag grows
//! with nothing saying why.
//!
//! A member is **stranded** when it has owned no partition for
//! `watchdog.stall`, its topics have records the group has not committed
//! (lag above 0), and the group's committed offsets have not moved for
//! `watchdog.stall` either: nobody is making progress. A standby in a group
//! whose other members commit is not stranded, however large the lag.
//!
//! `Stranding` is the judgement, plain Rust with the clock passed in;
//! `Watch`, stepped by the member's supervisor, samples the group (only
//! while the member owns nothing: one committed-offsets request and two
//! watermark requests for all its partitions, every few seconds) and
//! reports what changed: a warning, the `sluice_member_stranded` gauges and
//! a `/health` line.

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use super::rebalance::Context;
use crate::source::kafka::watermarks::watermarks;
use crate::telemetry::Health;
use crate::telemetry::{EVENTS, InternalEvent};
use metrics::gauge;

/// What the group has on the member's topics, sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GroupSample {
    /// Records not yet committed by the group, over every partition.
    pub lag: u64,
    /// The sum of the group's committed offsets: it moves when anyone
    /// commits.
    pub committed: i64,
}

/// The member's judgement, fed by the sampler.
#[derive(Debug, Default)]
pub(crate) struct Stranding {
    idle_since: Option<Instant>,
    /// Since when the group's commits have stood still with lag, and where.
    still: Option<(Instant, i64)>,
    lag: u64,
}

/// A stranded member: idle this long, with this lag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stranded {
    pub idle: Duration,
    pub lag: u64,
}

impl Stranding {
    /// The member owns partitions (or is joining): nothing to judge.
    pub(crate) fn assigned(&mut self) {
        *self = Stranding::default();
    }

    /// The member owns nothing at `now`.
    pub(crate) fn unassigned(&mut self, now: Instant) {
        self.idle_since.get_or_insert(now);
    }

    pub(crate) fn sampled(&mut self, now: Instant, s: GroupSample) {
        self.lag = s.lag;
        if s.lag == 0 {
            self.still = None;
            return;
        }
        match self.still {
            Some((_, committed)) if committed == s.committed => {}
            _ => self.still = Some((now, s.committed)),
        }
    }

    /// Stranded at `now`, or not.
    pub(crate) fn verdict(&self, now: Instant, stall: Duration) -> Option<Stranded> {
        let idle = now.saturating_duration_since(self.idle_since?);
        let (since, _) = self.still?;
        (idle >= stall && self.lag > 0 && now.saturating_duration_since(since) >= stall)
            .then_some(Stranded { idle, lag: self.lag })
    }
}

/// Sample the group's lag and commits on `topics`; `None` when the brokers
/// do not answer (the verdict then stands as it was).
fn sample(consumer: &BaseConsumer<Context>, topics: &[String], timeout: Duration) -> Option<GroupSample> {
    let mut tpl = TopicPartitionList::new();
    // A pattern (`^…`) names no topic to ask about: only named topics are
    // sampled, and a member of patterns alone is never judged stranded.
    for topic in topics.iter().filter(|t| !t.starts_with('^')) {
        let meta = consumer.fetch_metadata(Some(topic), timeout).ok()?;
        for t in meta.topics() {
            for p in t.partitions() {
                tpl.add_partition(topic, p.id());
            }
        }
    }
    if tpl.count() == 0 {
        return None;
    }
    let committed = consumer.committed_offsets(tpl.clone(), timeout).ok()?;
    let elements = tpl.elements();
    let parts: Vec<(&str, i32)> = elements.iter().map(|e| (e.topic(), e.partition())).collect();
    let ends = watermarks(consumer, &parts, timeout).ok()?;
    // Once into a map: `find_partition` per partition is a linear search each.
    let answered = committed.elements();
    let committed: std::collections::HashMap<(&str, i32), Offset> =
        answered.iter().map(|e| ((e.topic(), e.partition()), e.offset())).collect();
    let (mut lag, mut sum) = (0u64, 0i64);
    for ((topic, partition), (low, high)) in parts.iter().zip(ends) {
        let at = match committed.get(&(*topic, *partition)) {
            Some(Offset::Offset(o)) => (*o).max(low),
            _ => low,
        };
        lag += high.saturating_sub(at).max(0) as u64;
        sum += at;
    }
    Some(GroupSample { lag, committed: sum })
}

/// The watch on a member: while it owns no partition, it samples its
/// group every quarter of `stall` (1–30 s) and reports a stranding once
/// per episode. Stepped by the member's supervisor, which is idle when the
/// member owns nothing: a thread of its own would be one more per member.
pub(super) struct Watch<'a> {
    consumer: &'a BaseConsumer<Context>,
    topics: &'a [String],
    stall: Duration,
    health: &'a Health,
    /// The run stopping: its member owns nothing because it is leaving,
    /// and is not sampled.
    stop: &'a crate::pipeline::stop::Stop,
    every: Duration,
    judge: Stranding,
    sampled_at: Option<Instant>,
    reported: Option<Stranded>,
    stepped: Option<Instant>,
}

impl<'a> Watch<'a> {
    pub(crate) fn new(
        consumer: &'a BaseConsumer<Context>,
        topics: &'a [String],
        stall: Duration,
        health: &'a Health,
        stop: &'a crate::pipeline::stop::Stop,
    ) -> Self {
        let every = (stall / 4).clamp(Duration::from_secs(1), Duration::from_secs(30));
        Watch {
            consumer,
            topics,
            stall,
            health,
            stop,
            every,
            judge: Stranding::default(),
            sampled_at: None,
            reported: None,
            stepped: None,
        }
    }

    /// How long the supervisor may wait for a command before the next
    /// step is due.
    pub(crate) const STEP: Duration = Duration::from_millis(500);

    /// One look, if `STEP` has passed since the last.
    pub(crate) fn step(&mut self) {
        let now = Instant::now();
        if self.stop.requested() || self.stepped.is_some_and(|t| now.duration_since(t) < Self::STEP) {
            return;
        }
        self.stepped = Some(now);
        let owns_nothing = self.consumer.context().registry.lock().map(|r| r.is_empty()).unwrap_or(false);
        if owns_nothing {
            self.judge.unassigned(now);
            if self.sampled_at.is_none_or(|t| now.duration_since(t) >= self.every) {
                if let Some(s) = sample(self.consumer, self.topics, Duration::from_secs(5)) {
                    self.judge.sampled(now, s);
                }
                self.sampled_at = Some(now);
            }
        } else {
            self.judge.assigned();
            self.sampled_at = None;
        }
        let verdict = self.judge.verdict(Instant::now(), self.stall);
        if verdict.is_some() || self.reported.is_some() {
            MemberStranded { topics: self.topics, now: verdict, before: self.reported, stall: self.stall }.emit();
            self.health.set_line("member", verdict.map(|v| describe(self.topics, v, self.stall)));
        }
        self.reported = verdict;
    }
}

impl Drop for Watch<'_> {
    /// The member ends: it is stranded no more.
    fn drop(&mut self) {
        self.health.set_line("member", None);
    }
}

/// `/health`'s line for a stranded member.
pub(crate) fn describe(topics: &[String], v: Stranded, stall: Duration) -> String {
    format!(
        "member: stranded: no partitions for {} s while the group's lag on {} is {} and its commits have not moved \
         for {} s (watchdog.stall); another member holds the partitions and does not commit",
        v.idle.as_secs(),
        topics.join(", "),
        v.lag,
        stall.as_secs()
    )
}

/// A Kafka member that owns no partition while nobody commits its topics'
/// lag (`pipeline::kafka::idle_member`): a warning when it starts, once, and
/// an info line when it ends.
pub(crate) struct MemberStranded<'a> {
    pub topics: &'a [String],
    pub now: Option<Stranded>,
    pub before: Option<Stranded>,
    pub stall: std::time::Duration,
}

impl InternalEvent for MemberStranded<'_> {
    fn emit(&self) {
        gauge!("sluice_member_stranded").set(if self.now.is_some() { 1.0 } else { 0.0 });
        gauge!("sluice_member_stranded_group_lag").set(self.now.map_or(0.0, |v| v.lag as f64));
        match (self.now, self.before) {
            (Some(v), None) => tracing::warn!(target: EVENTS, topics = ?self.topics,
                lag = v.lag,
                seconds = v.idle.as_secs(),
                "member stranded: no partitions for {} s while the group's lag on {:?} is {} and its commits have \
                 not moved for {:?} (watchdog.stall): another member holds the partitions and does no work \
                 (a dead member the broker kept, or another program in the group)",
                v.idle.as_secs(),
                self.topics,
                v.lag,
                self.stall
            ),
            (None, Some(_)) => {
                tracing::info!(target: EVENTS, topics = ?self.topics, "member no longer stranded: it has partitions, or the lag is gone or moving")
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STALL: Duration = Duration::from_secs(60);

    fn at(t0: Instant, secs: u64) -> Instant {
        t0 + Duration::from_secs(secs)
    }

    #[test]
    fn idle_with_a_lag_no_one_commits_is_stranded_after_the_stall() {
        let t0 = Instant::now();
        let mut j = Stranding::default();
        for s in (0..=70).step_by(10) {
            j.unassigned(at(t0, s));
            j.sampled(at(t0, s), GroupSample { lag: 5_000 + s, committed: 100 });
        }
        assert_eq!(j.verdict(at(t0, 59), STALL), None, "not before the stall");
        assert_eq!(j.verdict(at(t0, 70), STALL), Some(Stranded { idle: Duration::from_secs(70), lag: 5_070 }));
    }

    #[test]
    fn a_standby_beside_members_that_commit_is_not_stranded() {
        let t0 = Instant::now();
        let mut j = Stranding::default();
        for s in (0..=300).step_by(10) {
            j.unassigned(at(t0, s));
            // A large lag, but the group's commits move.
            j.sampled(at(t0, s), GroupSample { lag: 50_000, committed: 100 + s as i64 });
        }
        assert_eq!(j.verdict(at(t0, 300), STALL), None);
    }

    #[test]
    fn no_lag_or_partitions_again_ends_it() {
        let t0 = Instant::now();
        let mut j = Stranding::default();
        j.unassigned(t0);
        j.sampled(t0, GroupSample { lag: 10, committed: 0 });
        assert!(j.verdict(at(t0, 61), STALL).is_some());
        j.sampled(at(t0, 62), GroupSample { lag: 0, committed: 10 });
        assert_eq!(j.verdict(at(t0, 62), STALL), None, "caught up: nothing is owed");
        j.sampled(at(t0, 63), GroupSample { lag: 10, committed: 10 });
        assert_eq!(j.verdict(at(t0, 100), STALL), None, "a new lag waits its own stall");
        assert!(j.verdict(at(t0, 123), STALL).is_some());
        j.assigned();
        assert_eq!(j.verdict(at(t0, 200), STALL), None, "owning partitions, the watchdog watches them");
    }
}
