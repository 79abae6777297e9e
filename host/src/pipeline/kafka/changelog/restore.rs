//! Restore on assignment: a partition's ids, from the changelog into the
//! local store, before its first batch.

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::{Message, Offset, TopicPartitionList};
use rocksdb::WriteBatch;

use super::{Changelog, ChangelogError, message};
use crate::config::{DedupScope, OnMissingState};
use crate::pipeline::PipelineError;
use crate::pipeline::kafka::events::RestoreFinished;
use crate::source::kafka::KafkaSourceError;
use crate::telemetry::InternalEvent;
use crate::telemetry::progress::Restoring;

pub(super) const TIMEOUT: Duration = Duration::from_secs(10);
/// A read that makes no progress for this long cannot finish.
pub(super) const STUCK: Duration = Duration::from_secs(30);
/// Ids applied per store write while restoring.
pub(super) const IDS_PER_WRITE: usize = 100_000;

/// How a partition's restore ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restored {
    /// Every id the changelog holds for it is in the store.
    Done,
    /// The changelog could not be read (`accept-duplicates`): the
    /// partition runs, and counts its records as unchecked.
    Unchecked,
    /// Told to stop first.
    Stopped,
}

impl Changelog<'_> {
    /// Bring the store up to date with `name`'s ids (`source_partition` of
    /// its topic) before its first batch.
    pub fn restore(
        &self,
        name: &str,
        source_partition: i32,
        stopping: &dyn Fn() -> bool,
    ) -> Result<Restored, PipelineError> {
        match self.scope {
            DedupScope::Topic => self.wait_followed(name, stopping),
            DedupScope::Partition => self.restore_partition(name, source_partition, stopping),
        }
    }

    /// A consumer of the changelog that joins no group and commits nothing.
    pub(super) fn reader(&self) -> Result<BaseConsumer, PipelineError> {
        let mut c = crate::source::kafka::client::client_config(&self.source)?;
        // librdkafka assigns only with a group id; this one is never
        // joined and never committed to.
        c.set("group.id", format!("{}-changelog-reader", self.source.group_id));
        c.set("enable.partition.eof", "true");
        c.set("auto.offset.reset", "earliest");
        // Only what was committed: librdkafka's default, pinned so that no
        // `source.properties` makes a restore read an aborted transaction.
        c.set("isolation.level", "read_committed");
        Ok(c.create().map_err(KafkaSourceError::client("create the dedup changelog's reader"))?)
    }

    /// Add a message's ids to `write`; ids accepted longer than the window
    /// ago are past it and skipped. Returns how many were added.
    /// A restore reader from those kept, or a new one.
    fn lend_reader(&self) -> Result<BaseConsumer, PipelineError> {
        let kept = self.readers.lock().unwrap_or_else(|p| p.into_inner()).pop();
        match kept {
            Some(r) => Ok(r),
            None => self.reader(),
        }
    }

    /// Back among those kept, unassigned: it fetches nothing while it
    /// waits for the next restore. One is kept: the others a burst of
    /// restores made (one per opener at most) are closed, their threads
    /// with them. One that cannot be unassigned is not kept.
    fn give_back(&self, reader: BaseConsumer) {
        let mut kept = self.readers.lock().unwrap_or_else(|p| p.into_inner());
        if kept.is_empty() && reader.unassign().is_ok() {
            kept.push(reader);
        }
    }

    pub(super) fn apply(&self, write: &mut WriteBatch, value: &[u8], now: u64) -> Result<usize, String> {
        let (secs, ids) = message::decode(value).map_err(|e| e.to_string())?;
        if secs.saturating_add(self.dedup.window().as_secs()) < now {
            return Ok(0);
        }
        self.dedup.record(write, &ids, secs).map_err(|e| e.to_string())?;
        Ok(ids.len())
    }

    /// The changelog cannot give `name` its ids: fail, or (accept-
    /// duplicates) say so and run unchecked, the store's position moved to
    /// `reset_to` so that the next start does not stop at the same gap.
    pub(super) fn missing(
        &self,
        name: &str,
        why: String,
        reset_to: Option<(&str, i64)>,
    ) -> Result<Restored, PipelineError> {
        let err = ChangelogError::Missing { topic: self.topic.clone(), partition: name.to_string(), why };
        match self.on_missing {
            OnMissingState::Fail => Err(err.into()),
            OnMissingState::AcceptDuplicates => {
                tracing::error!(
                    partition = name,
                    "{err}; running anyway (dedup.on_missing_state = \"accept-duplicates\")"
                );
                if let Some((key, next)) = reset_to {
                    let mut w = WriteBatch::default();
                    self.store.put_changelog_position(&mut w, key, next)?;
                    self.store.commit(w)?;
                }
                Ok(Restored::Unchecked)
            }
        }
    }

    fn restore_partition(
        &self,
        name: &str,
        source_partition: i32,
        stopping: &dyn Fn() -> bool,
    ) -> Result<Restored, PipelineError> {
        let reader = self.lend_reader()?;
        let restored = self.restore_with(&reader, name, source_partition, stopping);
        self.give_back(reader);
        restored
    }

    fn restore_with(
        &self,
        reader: &BaseConsumer,
        name: &str,
        source_partition: i32,
        stopping: &dyn Fn() -> bool,
    ) -> Result<Restored, PipelineError> {
        let started = Instant::now();
        let cp = self.partition_of(source_partition);
        let from = self.store.changelog_position(name)?;
        // A broker that is down or a leader that moves (the partition is
        // "unknown" meanwhile) is waited for, as a stalled read is: only
        // after STUCK without an answer is the state called missing.
        let (low, high) = loop {
            match reader.fetch_watermarks(&self.topic, cp, TIMEOUT) {
                Ok(w) => break w,
                Err(_) if stopping() => return Ok(Restored::Stopped),
                Err(e) if started.elapsed() > STUCK => {
                    return self.missing(name, format!("cannot read partition {cp}'s offsets ({e})"), None);
                }
                Err(e) => {
                    tracing::debug!(topic = self.topic, partition = cp, "changelog offsets not readable yet: {e}");
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        };
        if let Some(f) = from.filter(|f| *f > high) {
            let why = format!(
                "its partition {cp} ends at offset {high}, but this store read it to {f}: it was deleted or recreated"
            );
            return self.missing(name, why, Some((name, high)));
        }
        let start = from.unwrap_or(0).max(low);
        let (mut ids, mut messages) = (0u64, 0u64);
        let mut next = start;
        if start < high {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(&self.topic, cp, Offset::Offset(start))
                .and_then(|_| reader.assign(&tpl))
                .map_err(KafkaSourceError::client("assign the dedup changelog"))?;
            let now = self.dedup.now_secs();
            let mut write = WriteBatch::default();
            let mut pending = 0usize;
            let mut progress_at = Instant::now();
            let mut last_error = String::new();
            let bar = Restoring::start(name, (high - start) as u64);
            while next < high {
                if stopping() {
                    return Ok(Restored::Stopped);
                }
                match reader.poll(Duration::from_millis(200)) {
                    // A reader lent again may still hold what its last
                    // assignment fetched: only this partition counts.
                    Some(Ok(m)) if m.partition() != cp || m.topic() != self.topic => {}
                    Some(Ok(m)) => {
                        progress_at = Instant::now();
                        next = next.max(m.offset() + 1);
                        bar.at((next - start) as u64);
                        if m.key() != Some(name.as_bytes()) {
                            continue;
                        }
                        messages += 1;
                        let value = m.payload().unwrap_or_default();
                        match self.apply(&mut write, value, now) {
                            Ok(n) => {
                                ids += n as u64;
                                pending += n;
                            }
                            Err(e) => {
                                let why = format!("partition {cp} offset {}: {e}", m.offset());
                                return self.missing(name, why, Some((name, high)));
                            }
                        }
                        if pending >= IDS_PER_WRITE {
                            self.store.commit(std::mem::take(&mut write))?;
                            pending = 0;
                        }
                    }
                    Some(Err(KafkaError::PartitionEOF(_))) => break,
                    Some(Err(e)) => last_error = e.to_string(),
                    None => {}
                }
                if progress_at.elapsed() > STUCK {
                    let why = format!(
                        "reading partition {cp} from offset {next} made no progress for {STUCK:?} ({last_error})"
                    );
                    return self.missing(name, why, None);
                }
            }
            self.store.put_changelog_position(&mut write, name, next.max(high))?;
            self.store.commit(write)?;
        } else if from != Some(high) {
            let mut w = WriteBatch::default();
            self.store.put_changelog_position(&mut w, name, high)?;
            self.store.commit(w)?;
        }
        RestoreFinished {
            partition: name,
            topic: &self.topic,
            changelog_partition: cp,
            from: start,
            to: next.max(high),
            messages,
            ids,
            seconds: started.elapsed().as_secs_f64(),
        }
        .emit();
        Ok(Restored::Done)
    }
}
