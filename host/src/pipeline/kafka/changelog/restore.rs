//! Restore on assignment: a partition's ids, from the changelog into the
//! local store, before its first batch.

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Message, Offset, TopicPartitionList};
use rocksdb::WriteBatch;

use super::{Changelog, ChangelogError, message};
use crate::pipeline::error::PipelineError;
use crate::pipeline::kafka::events::RestoreFinished;
use crate::pipeline::kafka::rebalance::Context;
use crate::source::kafka::KafkaSourceError;
use crate::source::kafka::watermarks::watermarks;
use crate::store::dedup::config::{DedupScope, OnMissingState};
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

/// Why a changelog message's ids did not go into the store: the message
/// is not one sluice wrote, or the store refused the write.
#[derive(Debug, thiserror::Error)]
pub(super) enum ApplyError {
    #[error(transparent)]
    Message(#[from] message::MessageError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

impl Changelog<'_> {
    /// Bring the store up to date with `name`'s ids (`source_partition` of
    /// its topic) before its first batch.
    ///
    /// `member`, the group member's own client, asks where the changelog
    /// ends: a restore reader (a client of its own, threads and buffers) is
    /// lent only when there is something to read, and none is kept once
    /// the member has opened its partitions (`release_readers`).
    pub fn restore<C: ConsumerContext>(
        &self,
        name: &str,
        source_partition: i32,
        stopping: &dyn Fn() -> bool,
        member: Option<&BaseConsumer<C>>,
    ) -> Result<Restored, PipelineError> {
        let ends = |topic: &str, cps: &[i32]| {
            // Each answer serves one restore: a partition opened again
            // later (revoked and assigned back in one burst) asks anew,
            // past what it wrote meanwhile.
            let mut known = self.known_ends.lock().unwrap_or_else(|p| p.into_inner());
            if cps.iter().all(|cp| known.contains_key(cp)) {
                return Ok(cps.iter().filter_map(|cp| known.remove(cp)).collect());
            }
            drop(known);
            let parts: Vec<(&str, i32)> = cps.iter().map(|cp| (topic, *cp)).collect();
            match member.filter(|_| self.member_reads_committed()) {
                Some(m) => watermarks(m, &parts, TIMEOUT),
                None => self.lend_reader().map_err(|e| KafkaError::ClientCreation(e.to_string())).and_then(|r| {
                    let ends = watermarks(&r, &parts, TIMEOUT);
                    self.give_back(r);
                    ends
                }),
            }
        };
        match self.scope {
            DedupScope::Topic => self.wait_followed(name, stopping, &ends),
            DedupScope::Partition => self.restore_partition(name, source_partition, stopping, &ends),
        }
    }

    /// Ask where the changelog partitions of `source_partitions` end, all
    /// at once through `member`, for the restores that follow: each answer
    /// serves one restore, until the next burst or `forget_ends`. Under
    /// the topic scope each restore waits for the follower instead, and
    /// asks itself.
    pub(crate) fn prefetch_ends(&self, member: &BaseConsumer<Context>, source_partitions: &[i32]) {
        if self.scope != DedupScope::Partition || source_partitions.len() < 2 || !self.member_reads_committed() {
            return;
        }
        let mut cps: Vec<i32> = source_partitions.iter().map(|p| self.partition_of(*p)).collect();
        cps.sort_unstable();
        cps.dedup();
        let parts: Vec<(&str, i32)> = cps.iter().map(|cp| (self.topic.as_str(), *cp)).collect();
        let mut known = self.known_ends.lock().unwrap_or_else(|p| p.into_inner());
        known.clear();
        // Not answered: each restore asks for itself, and waits as it would.
        if let Ok(ends) = watermarks(member, &parts, TIMEOUT) {
            known.extend(cps.into_iter().zip(ends));
        }
    }

    /// Whether the member's client sees where the changelog ends as a
    /// restore reader does: the end of what was committed (librdkafka's
    /// default `isolation.level`). One told to read uncommitted records
    /// would count an open transaction's messages, which a reader never
    /// gets, and a restore would wait for them until it gave up.
    fn member_reads_committed(&self) -> bool {
        self.source
            .connection
            .properties
            .get("isolation.level")
            .is_none_or(|level| level.to_string() == "read_committed")
    }

    /// The burst is open, or a revoke ended lanes that wrote past what was
    /// asked: the ends known are old news.
    pub(crate) fn forget_ends(&self) {
        self.known_ends.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Close the restore readers kept: the member has no partition left to
    /// open, and an idle reader is a client's threads for nothing.
    pub(crate) fn release_readers(&self) {
        self.readers.lock().unwrap_or_else(|p| p.into_inner()).clear();
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

    /// A restore reader from those kept, or a new one.
    pub(super) fn lend_reader(&self) -> Result<BaseConsumer, PipelineError> {
        let kept = self.readers.lock().unwrap_or_else(|p| p.into_inner()).pop();
        match kept {
            Some(r) => Ok(r),
            None => self.reader(),
        }
    }

    /// Back among those kept, unassigned: it fetches nothing while it
    /// waits for the next restore of a burst. One is kept (until
    /// `release_readers`); one that cannot be unassigned is not.
    pub(super) fn give_back(&self, reader: BaseConsumer) {
        let mut kept = self.readers.lock().unwrap_or_else(|p| p.into_inner());
        if kept.is_empty() && reader.unassign().is_ok() {
            kept.push(reader);
        }
    }

    /// Add a message's ids to `write`; ids accepted longer than the window
    /// ago are past it and skipped. Returns how many were added.
    pub(super) fn apply(&self, write: &mut WriteBatch, value: &[u8], now: u64) -> Result<usize, ApplyError> {
        let (secs, ids) = message::decode(value)?;
        if secs.saturating_add(self.dedup.window().as_secs()) < now {
            return Ok(0);
        }
        self.dedup.record(write, &ids, secs)?;
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
        ends: &Ends<'_>,
    ) -> Result<Restored, PipelineError> {
        let started = Instant::now();
        let cp = self.partition_of(source_partition);
        let from = self.store.changelog_position(name)?;
        // A broker that is down or a leader that moves (the partition is
        // "unknown" meanwhile) is waited for, as a stalled read is: only
        // after STUCK without an answer is the state called missing.
        let (low, high) = loop {
            let one = ends(&self.topic, &[cp])
                .and_then(|e| e.first().copied().ok_or(KafkaError::OffsetFetch(RDKafkaErrorCode::OffsetNotAvailable)));
            match one {
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
        let mut read = Read { next: start, messages: 0, ids: 0 };
        if start < high {
            let reader = self.lend_reader()?;
            let outcome = self.read_into_store(&reader, (name, cp), (start, high), stopping, &mut read);
            self.give_back(reader);
            match outcome? {
                Some(Restored::Done) => {}
                Some(other) => return Ok(other),
                None => return Ok(Restored::Stopped),
            }
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
            to: read.next.max(high),
            messages: read.messages,
            ids: read.ids,
            seconds: started.elapsed().as_secs_f64(),
        }
        .emit();
        Ok(Restored::Done)
    }

    /// Read changelog partition `cp` from `start` to `high` with `reader`,
    /// applying `name`'s ids to the store. `Some(Done)`: read to the end
    /// and the position stored; `Some(Unchecked)` or an error: the
    /// changelog cannot give them (`missing`); `None`: told to stop.
    fn read_into_store(
        &self,
        reader: &BaseConsumer,
        (name, cp): (&str, i32),
        (start, high): (i64, i64),
        stopping: &dyn Fn() -> bool,
        read: &mut Read,
    ) -> Result<Option<Restored>, PipelineError> {
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
        while read.next < high {
            if stopping() {
                return Ok(None);
            }
            match reader.poll(Duration::from_millis(200)) {
                // A reader lent again may still hold what its last
                // assignment fetched: only this partition counts.
                Some(Ok(m)) if m.partition() != cp || m.topic() != self.topic => {}
                Some(Ok(m)) => {
                    progress_at = Instant::now();
                    read.next = read.next.max(m.offset() + 1);
                    bar.at((read.next - start) as u64);
                    if m.key() != Some(name.as_bytes()) {
                        continue;
                    }
                    read.messages += 1;
                    let value = m.payload().unwrap_or_default();
                    match self.apply(&mut write, value, now) {
                        Ok(n) => {
                            read.ids += n as u64;
                            pending += n;
                        }
                        Err(e) => {
                            let why = format!("partition {cp} offset {}: {e}", m.offset());
                            return self.missing(name, why, Some((name, high))).map(Some);
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
                    "reading partition {cp} from offset {} made no progress for {STUCK:?} ({last_error})",
                    read.next
                );
                return self.missing(name, why, None).map(Some);
            }
        }
        self.store.put_changelog_position(&mut write, name, read.next.max(high))?;
        self.store.commit(write)?;
        Ok(Some(Restored::Done))
    }
}

/// Where changelog partitions begin and end, in their order, asked of
/// some client for all of them at once.
pub(super) type Ends<'a> = dyn Fn(&str, &[i32]) -> rdkafka::error::KafkaResult<Vec<(i64, i64)>> + 'a;

/// How far a restore read, for its report.
struct Read {
    next: i64,
    messages: u64,
    ids: u64,
}
