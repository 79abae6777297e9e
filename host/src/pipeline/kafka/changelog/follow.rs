//! `dedup.scope = "topic"`: every instance reads the whole changelog as it
//! grows, so that an id delivered on any partition, by any instance, is
//! in every instance's store. A partition's first batch waits until what
//! the changelog held at its assignment is applied.
//!
//! The bound across instances: an id another instance delivered less than
//! the follower's lag ago (a poll, a write: tens of milliseconds) can still
//! pass once more. On one instance the bound is exact: partitions that
//! share the scope claim their ids in flight (`custody::claims`).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::{Message, Offset, TopicPartitionList};
use rocksdb::WriteBatch;

use super::progress::Progress;
use super::restore::{Ends, IDS_PER_WRITE, Restored, TIMEOUT};
use super::{Changelog, ChangelogError};
use crate::pipeline::error::PipelineError;
use crate::pipeline::kafka::events::RestoreFinished;
use crate::source::kafka::KafkaSourceError;
use crate::source::kafka::watermarks::watermarks;
use crate::telemetry::InternalEvent;
use crate::telemetry::progress::Restoring;

fn key(cp: i32) -> String {
    format!("follow/{cp}")
}

impl Changelog<'_> {
    /// Start following (the topic scope); call before the run's tasks.
    pub(crate) fn with_follower(mut self) -> Self {
        if self.scope == crate::store::dedup::config::DedupScope::Topic {
            self.follow = Some(Progress::default());
        }
        self
    }

    /// Read every changelog partition into the store until `stop`. A
    /// failure is recorded for the waiting partitions and returned.
    pub(crate) fn follow(&self, stop: &dyn Fn() -> bool) -> Result<(), PipelineError> {
        let Some(progress) = &self.follow else { return Ok(()) };
        let result = self.follow_inner(progress, stop);
        if let Err(e) = &result {
            let mut st = progress.state.lock().unwrap_or_else(|p| p.into_inner());
            st.failed = Some(e.to_string());
            progress.changed.notify_all();
        }
        result
    }

    fn follow_inner(&self, progress: &Progress, stop: &dyn Fn() -> bool) -> Result<(), PipelineError> {
        let reader = self.reader()?;
        let mut tpl = TopicPartitionList::new();
        let mut positions = HashMap::new();
        let mut unchecked = false;
        let ends = self.ends(&reader)?;
        for (cp, (low, high)) in (0..self.partitions).zip(ends) {
            let mut at = self.store.changelog_position(&key(cp))?.unwrap_or(0);
            if at > high {
                let why = format!("its partition {cp} ends at offset {high}, but this store read it to {at}");
                if self.missing(&format!("{}/{cp}", self.topic), why, Some((&key(cp), high)))? == Restored::Unchecked {
                    unchecked = true;
                }
                at = high;
            }
            let at = at.max(low);
            positions.insert(cp, at);
            tpl.add_partition_offset(&self.topic, cp, Offset::Offset(at))
                .map_err(KafkaSourceError::client("assign the dedup changelog"))?;
        }
        reader.assign(&tpl).map_err(KafkaSourceError::client("assign the dedup changelog"))?;
        {
            let mut st = progress.state.lock().unwrap_or_else(|p| p.into_inner());
            st.positions = positions.clone();
            st.unchecked = unchecked;
            progress.changed.notify_all();
        }
        let mut last_error = (String::new(), Instant::now());
        while !stop() {
            let mut write = WriteBatch::default();
            let (mut ids, mut messages) = (0usize, 0u64);
            let now = self.dedup.now_secs();
            let until = Instant::now() + Duration::from_millis(50);
            // What has arrived, for at most 50 ms: one store write.
            while ids < IDS_PER_WRITE && Instant::now() < until {
                match reader.poll(Duration::from_millis(20)) {
                    Some(Ok(m)) => {
                        messages += 1;
                        positions.insert(m.partition(), m.offset() + 1);
                        let value = m.payload().unwrap_or_default();
                        match self.apply(&mut write, value, now) {
                            Ok(n) => ids += n,
                            Err(e) => {
                                return Err(ChangelogError::Missing {
                                    topic: self.topic.clone(),
                                    partition: format!("{}/{}", self.topic, m.partition()),
                                    why: format!("offset {}: {e}", m.offset()),
                                }
                                .into());
                            }
                        }
                    }
                    Some(Err(KafkaError::PartitionEOF(_))) | None => break,
                    Some(Err(e)) => {
                        let text = e.to_string();
                        if last_error.0 != text || last_error.1.elapsed() > Duration::from_secs(30) {
                            tracing::warn!(topic = self.topic, "dedup changelog follower: {text}");
                            last_error = (text, Instant::now());
                        }
                        break;
                    }
                }
            }
            if messages == 0 {
                continue;
            }
            for (cp, next) in &positions {
                self.store.put_changelog_position(&mut write, &key(*cp), *next)?;
            }
            self.store.commit(write)?;
            let mut st = progress.state.lock().unwrap_or_else(|p| p.into_inner());
            st.positions = positions.clone();
            progress.changed.notify_all();
            metrics::counter!("sluice_restore_records_total", "partition" => "follower").increment(ids as u64);
        }
        Ok(())
    }

    /// Where each changelog partition begins and ends, in their order: two
    /// requests for all of them.
    fn ends(&self, reader: &rdkafka::consumer::BaseConsumer) -> Result<Vec<(i64, i64)>, KafkaSourceError> {
        let parts: Vec<(&str, i32)> = (0..self.partitions).map(|cp| (self.topic.as_str(), cp)).collect();
        watermarks(reader, &parts, TIMEOUT)
            .map_err(KafkaSourceError::client(format!("offsets of {}'s partitions", self.topic)))
    }

    /// A partition's restore under the topic scope: wait until the
    /// follower has applied every changelog partition up to where it ended
    /// at this moment.
    pub(super) fn wait_followed(
        &self,
        name: &str,
        stopping: &dyn Fn() -> bool,
        ends: &Ends<'_>,
    ) -> Result<Restored, PipelineError> {
        let Some(progress) = &self.follow else { return Ok(Restored::Done) };
        let started = Instant::now();
        let cps: Vec<i32> = (0..self.partitions).collect();
        let targets: HashMap<i32, i64> = match ends(&self.topic, &cps) {
            Ok(ends) => cps.iter().copied().zip(ends.into_iter().map(|(_, high)| high)).collect(),
            Err(e) => return self.missing(name, format!("cannot read {}'s offsets ({e})", self.topic), None),
        };
        let mut st = progress.state.lock().unwrap_or_else(|p| p.into_inner());
        // Offsets read on every changelog partition, up to where each ends.
        let read = |positions: &HashMap<i32, i64>| -> i64 {
            targets.iter().map(|(cp, high)| positions.get(cp).map_or(0, |at| (*at).min(*high))).sum()
        };
        let first = read(&st.positions);
        let bar = Restoring::start(name, (targets.values().sum::<i64>() - first).max(0) as u64);
        loop {
            bar.at((read(&st.positions) - first).max(0) as u64);
            if let Some(why) = &st.failed {
                return self.missing(name, format!("the follower stopped: {why}"), None);
            }
            let behind = targets.iter().any(|(cp, high)| st.positions.get(cp).is_none_or(|at| at < high));
            if !behind {
                break;
            }
            if stopping() {
                return Ok(Restored::Stopped);
            }
            st = progress
                .changed
                .wait_timeout(st, Duration::from_millis(100))
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        let unchecked = st.unchecked;
        drop(st);
        RestoreFinished {
            partition: name,
            topic: &self.topic,
            changelog_partition: -1,
            from: 0,
            to: targets.values().sum(),
            messages: 0,
            ids: 0,
            seconds: started.elapsed().as_secs_f64(),
        }
        .emit();
        Ok(if unchecked { Restored::Unchecked } else { Restored::Done })
    }
}
