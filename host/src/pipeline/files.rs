//! The file source's side of `sluice run`: one thread per file, each with
//! its own plugin instances; the checkpoint lives in the state store and
//! moves in the same synced write as the batch's ids and quarantine entries.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rocksdb::WriteBatch;

use super::{
    PipelineError, RunStats, Stages, Stop, StopOnExit, build_chain, deliver_batch, identity, now_nanos, open_sink,
    quarantine_fates, stats,
};
use crate::config::{Config, DEFAULT_WINDOW, FileSourceConfig};
use crate::offsets::OffsetTracker;
use crate::plugin::{Chain, Record, Runtime};
use crate::sink::guarded::Guarded;
use crate::source::file::{FilePartition, SourceRecord, discover};
use crate::store::Store;
use crate::store::dedup::DedupWindow;
use crate::store::quarantine::{PluginVersion, Quarantine};

/// Run the pipeline until every file is read (or, with `follow`, until
/// `stop`). Partitions run on their own threads, each with its own plugin
/// instances; the sink and the store are shared.
pub(super) fn run(
    cfg: &Config,
    source: &FileSourceConfig,
    runtime: &Runtime,
    stop: &Stop,
) -> Result<RunStats, PipelineError> {
    if let Some(addr) = cfg.metrics.listen {
        // Files have no group to join: ready once the pipeline runs. No
        // heartbeat: a partition waiting on an open breaker is late, not
        // sick, and must not be restarted for it.
        let health = std::sync::Arc::new(crate::telemetry::Health::default());
        health.set_ready(true);
        let bound = crate::telemetry::server::serve(addr, health).map_err(|e| PipelineError::Metrics(e.to_string()))?;
        tracing::info!("metrics on http://{bound}/metrics");
    }
    crate::telemetry::install();
    let store = Store::open(&cfg.pipeline.state_dir, &identity(cfg))?;
    let files = discover(&source.paths)?;
    if files.is_empty() {
        return Err(PipelineError::NoFiles(source.paths.clone()));
    }
    let dedup = DedupWindow::new(&store, cfg.dedup.window.unwrap_or(DEFAULT_WINDOW))?;
    dedup.expire((now_nanos() / 1_000_000_000) as u64)?;
    let sink = open_sink(cfg)?;
    let stats = Mutex::new(RunStats::default());
    let started = Instant::now();
    std::thread::scope(|scope| {
        let handles: Vec<_> = files
            .iter()
            .map(|file| {
                let (store, dedup, sink, stats) = (&store, &dedup, &sink, &stats);
                let handle = scope.spawn(move || -> Result<(), PipelineError> {
                    let mut guard = StopOnExit { stop, armed: true };
                    let chain = build_chain(runtime, cfg)?;
                    let checkpoint = store.checkpoint(&file.display().to_string())?;
                    let part = FilePartition::open(file, checkpoint.as_ref(), source.max_line_bytes, source.follow)?;
                    let mut task = PartitionTask { cfg, source, store, dedup, sink, chain, part, stats, stop };
                    let result = task.run(source.follow, source.poll_interval);
                    guard.armed = result.is_err();
                    result
                });
                (file, handle)
            })
            .collect();
        let mut first_error = None;
        for (file, h) in handles {
            let result = h.join().unwrap_or_else(|_| Err(PipelineError::Panicked(file.display().to_string())));
            if let Err(e) = result {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    })?;
    let mut stats = stats.into_inner().unwrap_or_default();
    stats.seconds = started.elapsed().as_secs_f64();
    Ok(stats)
}

struct PartitionTask<'a> {
    cfg: &'a Config,
    source: &'a FileSourceConfig,
    store: &'a Store,
    dedup: &'a DedupWindow<'a>,
    sink: &'a Guarded,
    chain: Chain,
    part: FilePartition,
    stats: &'a Mutex<RunStats>,
    stop: &'a Stop,
}

impl PartitionTask<'_> {
    fn run(&mut self, follow: bool, poll: Duration) -> Result<(), PipelineError> {
        let mut tracker = OffsetTracker::new(self.part.position());
        let quarantine = Quarantine::new(
            self.store,
            &self.cfg.pipeline.name,
            self.chain.stages().iter().map(|s| PluginVersion::from(s.id())).collect(),
            self.cfg.quarantine.mask_fields.clone(),
        );
        let mut last_expiry = Instant::now();
        while !self.stop.requested() {
            if last_expiry.elapsed() > Duration::from_secs(60) {
                // Long runs forget old ids as they go; never a scan.
                self.dedup.expire((now_nanos() / 1_000_000_000) as u64)?;
                last_expiry = Instant::now();
            }
            let batch = self.part.next_batch(self.cfg.pipeline.batch_size)?;
            if batch.is_empty() {
                if !follow {
                    break;
                }
                if !self.part.follow_rotation()? {
                    std::thread::sleep(poll);
                }
                continue;
            }
            self.process_batch(batch, &mut tracker, &quarantine)?;
        }
        Ok(())
    }

    /// The custody order (see the module doc): steps 1 to 4 in
    /// `deliver_batch`, then quarantine entries, offsets and the commit.
    fn process_batch(
        &mut self,
        batch: Vec<SourceRecord>,
        tracker: &mut OffsetTracker,
        quarantine: &Quarantine<'_>,
    ) -> Result<(), PipelineError> {
        for r in &batch {
            tracker.begin(r.start, r.next)?;
        }
        let mut write = WriteBatch::default();
        let mut counts = stats::Counts::default();
        let records: Vec<(&Record, bool)> = batch.iter().map(|r| (&r.record, r.oversize)).collect();
        let stop = self.stop;
        let stopping = || stop.requested();
        let mut stages =
            Stages { chain: &mut self.chain, dedup: self.dedup, sink: self.sink, stopping: &stopping, on_stage: None };
        let fates = deliver_batch(&mut stages, &records, self.source.max_line_bytes, &mut write, &mut counts)?;

        // The quarantine entries join the same write.
        quarantine_fates(quarantine, &mut write, batch.iter().map(|r| &r.record).zip(&fates))?;
        // 5. Offsets: each record that passed a door finishes; one whose
        // delivery was stopped stays owed, and the checkpoint (the end of
        // the contiguous finished prefix) stops before it.
        for (r, fate) in batch.iter().zip(&fates) {
            if let Some(fate) = fate {
                tracker.finish(r.start, fate.door())?;
                counts.count(fate.door());
            }
        }
        let cp = self.part.checkpoint_for(tracker.committable());
        self.store.put_checkpoint(&mut write, self.part.key(), &cp)?;

        // 6. Commit: ids, quarantine entries and checkpoint, durable together.
        self.store.commit(write)?;
        counts.records += batch.len() as u64;
        crate::telemetry::events::BatchFinished { partition: self.part.key(), counts: &counts }.emit();
        if let Ok(mut s) = self.stats.lock() {
            s.add(self.part.key(), &counts);
        }
        Ok(())
    }
}
