//! One assigned partition's task: batches from its queue through the
//! custody order, then the finished prefix published for the consume loop
//! to commit.
//!
//! Per batch: plugins, dedup look-up, delivery (`deliver_batch`, steps 1–4);
//! then the accepted ids and the quarantine entries are written synced in
//! one RocksDB batch (the doors are durable); only then does each record's
//! offset finish in the tracker, and only the contiguous finished prefix is
//! offered for the Kafka commit. A crash anywhere before the Kafka commit
//! re-reads the batch: duplicates at worst, absorbed by the dedup window.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rocksdb::WriteBatch;

use super::{PartitionState, Shared};
use crate::offsets::OffsetTracker;
use crate::pipeline::{Fate, PipelineError, Stages, build_chain, deliver_batch, quarantine_entries, stats};
use crate::plugin::Record;
use crate::source::kafka::record::KafkaRecord;
use crate::store::quarantine::{PluginVersion, Quarantine};
use crate::telemetry::events::{BatchFinished, RecordQuarantined};

fn lock(state: &Mutex<PartitionState>) -> MutexGuard<'_, PartitionState> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

pub(super) fn run(
    sh: &Shared<'_>,
    name: &str,
    (rx, queued): (Receiver<KafkaRecord>, &AtomicUsize),
    stop: &AtomicBool,
    state: &Mutex<PartitionState>,
) -> Result<(), PipelineError> {
    let mut chain = build_chain(sh.runtime, sh.cfg)?;
    let quarantine = Quarantine::new(
        sh.store,
        &sh.cfg.pipeline.name,
        chain.stages().iter().map(|s| PluginVersion::from(s.id())).collect(),
        sh.cfg.quarantine.mask_fields.clone(),
    );
    // Starts at the first record received: the group's committed offset,
    // or past a compaction hole.
    let mut tracker: Option<OffsetTracker> = None;
    let batch_size = sh.cfg.pipeline.batch_size;
    while !stop.load(Ordering::SeqCst) {
        let first = match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(r) => {
                queued.fetch_sub(1, Ordering::SeqCst);
                r
            }
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        // Fill the batch for at most `linger`: a batch of a few records
        // costs its two syncs as much as a full one.
        let mut batch = Vec::with_capacity(batch_size.min(1024));
        batch.push(first);
        let deadline = std::time::Instant::now() + sh.linger;
        while batch.len() < batch_size && !stop.load(Ordering::SeqCst) {
            match rx.try_recv() {
                Ok(r) => {
                    queued.fetch_sub(1, Ordering::SeqCst);
                    batch.push(r);
                }
                Err(_) => {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    match rx.recv_timeout(left) {
                        Ok(r) => {
                            queued.fetch_sub(1, Ordering::SeqCst);
                            batch.push(r);
                        }
                        Err(_) => break,
                    }
                }
            }
        }
        let tracker = tracker.get_or_insert_with(|| OffsetTracker::new(batch[0].offset as u64));
        for r in &batch {
            tracker.begin(r.offset as u64, r.offset as u64 + 1)?;
        }
        {
            let mut st = lock(state);
            st.blocking = Some((batch[0].offset, "plugins"));
            st.oldest = Some(batch[0].received);
        }

        let mut write = WriteBatch::default();
        let mut counts = stats::Counts::default();
        let records: Vec<(&Record, bool)> = batch.iter().map(|r| (&r.record, false)).collect();
        let on_stage = |stage: &'static str| {
            if let Some(b) = lock(state).blocking.as_mut() {
                b.1 = stage;
            }
        };
        let stopping = || stop.load(Ordering::SeqCst);
        let mut stages = Stages {
            chain: &mut chain,
            dedup: sh.dedup,
            sink: sh.sink,
            stopping: &stopping,
            on_stage: Some(&on_stage),
        };
        let fates = deliver_batch(&mut stages, &records, u64::MAX, &mut write, &mut counts)?;
        let mut fates = fates;
        let entries = quarantine_entries(&quarantine, batch.iter().map(|r| &r.record).zip(&fates));
        if let Some(topic) = sh.quarantine_topic.filter(|_| !entries.is_empty()) {
            on_stage("quarantine");
            let listed: Vec<_> = entries.iter().map(|(_, e)| e).collect();
            if !topic.publish(&listed, &stopping) {
                // Stopped before the brokers had them: these records are
                // not quarantined yet; they stay owed and are read again.
                for (i, _) in &entries {
                    fates[*i] = None;
                }
            }
        }
        for (i, entry) in &entries {
            if fates[*i].is_some() {
                quarantine.write(&mut write, entry)?;
            }
        }
        on_stage("store");
        // The doors become durable: ids and quarantine entries, synced.
        sh.store.commit(write)?;

        // Only now may the offsets move; a record whose delivery was
        // stopped (revoke, shutdown) stays owed and is read again.
        for (r, fate) in batch.iter().zip(&fates) {
            let Some(fate) = fate else { continue };
            tracker.finish(r.offset as u64, fate.door())?;
            counts.count(fate.door());
            if let Fate::Quarantine { stage, reason, .. } = fate {
                let position = r.offset.to_string();
                RecordQuarantined { partition: name, position: &position, stage, reason }.emit();
            }
        }
        counts.records += batch.len() as u64;
        {
            let mut st = lock(state);
            st.committable = Some(tracker.committable() as i64);
            st.blocking = None;
            st.oldest = None;
        }
        BatchFinished { partition: name, counts: &counts }.emit();
        if let Ok(mut s) = sh.stats.lock() {
            s.add(name, &counts);
        }
    }
    Ok(())
}
