//! One assigned partition on the driver: its reader takes runs of records
//! from the queue the consume loop fills, into batches of up to
//! `pipeline.batch_size` within `source.linger`. Its finished prefix is
//! published by the driver (`PartitionState::committable`) once durable,
//! and the consume loop commits it to the group.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::custody::ids::{Scope, scope};
use crate::pipeline::driver::{self, Keeper, Partition, PartitionState, Pull, Pulled, Reader, Shared};
use crate::pipeline::{PipelineError, build_chain};
use crate::plugin::Runtime;
use crate::source::kafka::record::KafkaRecord;

pub(super) fn run(
    shared: &Shared<'_>,
    runtime: &Runtime,
    linger: Duration,
    name: &str,
    (rx, queued): (Receiver<Vec<KafkaRecord>>, &AtomicUsize),
    stop: &AtomicBool,
    state: &Arc<Mutex<PartitionState>>,
) -> Result<(), PipelineError> {
    let chain = build_chain(runtime, shared.cfg)?;
    let mut reader = KafkaReader { rx, queued, stop, linger, scope: scope(name), left: VecDeque::new() };
    let stopping = || stop.load(Ordering::SeqCst);
    // Starts at the first record received: the group's committed offset,
    // or past a compaction hole.
    let partition = Partition { name, start: None, chain, stopping: &stopping, state: state.clone() };
    driver::drive(shared, partition, &mut reader, &mut PublishedByTheDriver)
}

struct KafkaReader<'a> {
    rx: Receiver<Vec<KafkaRecord>>,
    queued: &'a AtomicUsize,
    stop: &'a AtomicBool,
    linger: Duration,
    /// The partition's dedup scope, computed once.
    scope: Scope,
    /// Records of a run longer than the batch had room for.
    left: VecDeque<KafkaRecord>,
}

impl KafkaReader<'_> {
    /// The next run of records, waiting at most `wait`.
    fn next_run(&mut self, wait: Duration) -> Result<Option<Vec<KafkaRecord>>, ()> {
        let run = if wait.is_zero() {
            self.rx.try_recv().map_err(|e| matches!(e, std::sync::mpsc::TryRecvError::Disconnected))
        } else {
            self.rx.recv_timeout(wait).map_err(|e| matches!(e, RecvTimeoutError::Disconnected))
        };
        match run {
            Ok(run) => {
                self.queued.fetch_sub(run.len(), Ordering::SeqCst);
                Ok(Some(run))
            }
            Err(true) => Err(()),
            Err(false) => Ok(None),
        }
    }
}

impl Reader for KafkaReader<'_> {
    fn pull(&mut self, max: usize) -> Result<Option<Pull>, PipelineError> {
        let mut batch: Vec<KafkaRecord> = Vec::with_capacity(max.min(4096));
        while batch.len() < max {
            match self.left.pop_front() {
                Some(r) => batch.push(r),
                None => break,
            }
        }
        if batch.is_empty() {
            match self.next_run(Duration::from_millis(100)) {
                Ok(Some(run)) => self.left.extend(run),
                Ok(None) => return Ok(Some(Pull { records: Vec::new(), scope: self.scope, received: Instant::now() })),
                Err(()) => return Ok(None),
            }
            while batch.len() < max {
                match self.left.pop_front() {
                    Some(r) => batch.push(r),
                    None => break,
                }
            }
        }
        // Fill the batch for at most `linger`: a batch of a few records
        // costs its syncs as much as a full one.
        let deadline = batch[0].received + self.linger;
        while batch.len() < max && !self.stop.load(Ordering::SeqCst) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_run(left) {
                Ok(Some(run)) => {
                    let room = max - batch.len();
                    let mut run = run.into_iter();
                    batch.extend(run.by_ref().take(room));
                    self.left.extend(run);
                }
                Ok(None) if left.is_zero() => break,
                Ok(None) => continue,
                Err(()) => break,
            }
        }
        let received = batch[0].received;
        let records = batch
            .into_iter()
            .map(|r| Pulled { start: r.offset as u64, next: r.offset as u64 + 1, record: r.record, refused: None })
            .collect();
        Ok(Some(Pull { records, scope: self.scope, received }))
    }
}

/// A Kafka partition keeps nothing in the store's write: the driver
/// publishes its durable prefix, and the consume loop commits it.
struct PublishedByTheDriver;

impl Keeper for PublishedByTheDriver {}
