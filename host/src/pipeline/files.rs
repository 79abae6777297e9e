//! The file source on the driver: one partition per file, each on its own
//! thread with its own plugin instances. A file's checkpoint rides in the
//! write that makes its batch's doors durable (`FileKeeper`).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use rocksdb::WriteBatch;

use super::driver::{self, Keeper, Partition, Reader, Shared};
use super::{PipelineError, RaiseOnDrop, RunStats, Stop, build_chain, open_sink, setup};
use crate::batch::{Pull, Pulled};
use crate::config::{Config, FileSourceConfig};
use crate::custody::Fate;
use crate::custody::ids::PIPELINE_SCOPE;
use crate::custody::standing::PartitionState;
use crate::plugin::Runtime;
use crate::source::file::{FilePartition, discover};
use crate::store::Store;

/// Run the pipeline until every file is read (or, with `follow`, until
/// `stop`). The sink, the store and its committer are shared.
pub(super) fn run(
    cfg: &Config,
    source: &FileSourceConfig,
    runtime: &Runtime,
    stop: &Stop,
) -> Result<RunStats, PipelineError> {
    // Files have no group to join: ready once the state store is open. No
    // heartbeat: a partition waiting on an open breaker is late, not sick,
    // and must not be restarted for it.
    let health = setup::serve_endpoint(cfg)?;
    let store = super::open_store(cfg)?;
    health.set_ready(true);
    let files = discover(&source.paths)?;
    if files.is_empty() {
        return Err(PipelineError::NoFiles(source.paths.clone()));
    }
    let dedup = setup::open_window(cfg, &store)?;
    let sink = open_sink(cfg)?;
    let stats = Mutex::new(RunStats::default());
    let started = Instant::now();
    let settings = super::driver_settings(cfg);
    let parts = setup::Parts { settings: &settings, store: &store, dedup: &dedup, sink: &sink, stats: &stats };
    setup::with_services(cfg, parts, Some(&health), Some(&health), |shared| {
        // The files share one dedup scope: two of them read at once may
        // hold the same id.
        let shared = Shared { claims: (files.len() > 1).then(std::sync::Arc::default), ..shared };
        std::thread::scope(|scope| {
            let handles: Vec<_> = files
                .iter()
                .map(|file| {
                    let shared = &shared;
                    // Named like the driver's back thread, so that a
                    // profile tells the two apart.
                    let handle = std::thread::Builder::new()
                        .name(format!("sluice-front-{}", file.display()))
                        .spawn_scoped(scope, move || -> Result<(), PipelineError> {
                            let mut guard = RaiseOnDrop { flag: stop.flag(), armed: true };
                            let result = run_file(cfg, shared, runtime, source, file, stop);
                            guard.armed = result.is_err();
                            result
                        });
                    (file, handle)
                })
                .collect();
            // A file that got no thread stops the others before any join
            // waits on them.
            if handles.iter().any(|(_, h)| h.is_err()) {
                stop.request();
            }
            let mut first_error = None;
            for (file, h) in handles {
                let result = match h {
                    Ok(h) => h.join().unwrap_or_else(|_| Err(PipelineError::Panicked(file.display().to_string()))),
                    Err(e) => {
                        Err(PipelineError::Panicked(format!("cannot start the thread of {}: {e}", file.display())))
                    }
                };
                if let Err(e) = result {
                    first_error.get_or_insert(e);
                }
            }
            first_error.map_or(Ok(()), Err)
        })
    })?;
    Ok(setup::finish(stats, started))
}

fn run_file(
    cfg: &Config,
    shared: &Shared<'_>,
    runtime: &Runtime,
    source: &FileSourceConfig,
    file: &std::path::Path,
    stop: &Stop,
) -> Result<(), PipelineError> {
    let chain = build_chain(runtime, cfg)?;
    crate::telemetry::history::HISTORY.set_plugins(chain.stages().iter().map(|s| s.id().to_string()).collect());
    let checkpoint = shared.store.checkpoint(&file.display().to_string())?;
    let part = FilePartition::open(file, checkpoint.as_ref(), source.max_line_bytes, source.follow)?
        .with_batch_bytes(source.batch_bytes);
    let start = part.position();
    let name = part.key().to_string();
    let part = Mutex::new(part);
    let mut reader = FileReader { part: &part, source };
    let mut keeper = FileKeeper { part: &part, store: shared.store };
    let stopping = || stop.requested();
    let partition = Partition {
        name: &name,
        start: Some(start),
        chain,
        stopping: &stopping,
        state: Arc::new(Mutex::new(PartitionState::default())),
    };
    driver::drive(shared, partition, &mut reader, &mut keeper)
}

/// Lines in batches; at the end of a file, its rotation (with `follow`).
struct FileReader<'a> {
    part: &'a Mutex<FilePartition>,
    source: &'a FileSourceConfig,
}

impl Reader for FileReader<'_> {
    fn pull(&mut self, max: usize) -> Result<Option<Pull>, PipelineError> {
        let mut part = self.part.lock().unwrap_or_else(|p| p.into_inner());
        let batch = part.next_batch(max)?;
        let received = Instant::now();
        if batch.is_empty() {
            if !self.source.follow {
                return Ok(None);
            }
            let rotated = part.follow_rotation()?;
            let behind = Some(part.unread());
            if !rotated {
                drop(part);
                std::thread::sleep(self.source.poll_interval);
            }
            return Ok(Some(Pull { records: Vec::new(), scope: PIPELINE_SCOPE, received, behind }));
        }
        let max_line = self.source.max_line_bytes;
        let records = batch
            .into_iter()
            .map(|r| Pulled {
                refused: r.oversize.then(|| oversize(r.record.payload.len(), max_line)),
                record: r.record,
                start: r.start,
                next: r.next,
            })
            .collect();
        Ok(Some(Pull { records, scope: PIPELINE_SCOPE, received, behind: Some(part.unread()) }))
    }
}

/// A file's finished prefix is its checkpoint, written with the doors.
struct FileKeeper<'a> {
    part: &'a Mutex<FilePartition>,
    store: &'a Store,
}

impl Keeper for FileKeeper<'_> {
    fn with_doors(
        &mut self,
        position: u64,
        _records: &[Pulled],
        _fates: &[Option<Fate>],
        write: &mut WriteBatch,
    ) -> Result<(), PipelineError> {
        let mut part = self.part.lock().unwrap_or_else(|p| p.into_inner());
        let cp = part.checkpoint_for(position);
        self.store.put_checkpoint(write, part.key(), &cp)?;
        Ok(())
    }
}

/// Why a line longer than `source.max_line_bytes` is quarantined whole
/// (also what `sluice test` says of one).
pub(crate) fn oversize(len: usize, max_line: u64) -> String {
    format!("line of {len} bytes exceeds source.max_line_bytes {max_line}")
}
