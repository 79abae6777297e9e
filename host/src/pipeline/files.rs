//! The file source on the driver: one partition (a lane) per file, the
//! files shared by the run's pool of workers (`pipeline.workers`), each
//! worker with its own plugin instances. A file's checkpoint rides in the
//! write that makes its batch's doors durable (`FileKeeper`).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use rocksdb::WriteBatch;

use super::driver::{Keeper, Lane, Pool, PoolParts, Reader, Shared};
use crate::batch::{Pull, Pulled};
use crate::config::Config;
use crate::custody::ids::PIPELINE_SCOPE;
use crate::custody::plan::Disposition;
use crate::custody::standing::PartitionState;
use crate::pipeline::error::PipelineError;
use crate::pipeline::setup;
use crate::pipeline::setup::{build_chain, open_sinks};
use crate::pipeline::stop::Stop;
use crate::plugin::chain::Chain;
use crate::plugin::engine::Runtime;
use crate::source::config::FileSourceConfig;
use crate::source::file::{FilePartition, discover};
use crate::store::Store;
use crate::telemetry::stats::RunStats;

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
    let store = setup::open_store(cfg)?;
    health.set_ready(true);
    let files = discover(&source.paths)?;
    if files.is_empty() {
        return Err(PipelineError::NoFiles(source.paths.clone()));
    }
    let dedup = setup::open_window(cfg, &store)?;
    let sinks = open_sinks(cfg, runtime)?;
    let stats = Mutex::new(RunStats::default());
    let started = Instant::now();
    let settings = setup::driver_settings(cfg);
    let parts = setup::Parts {
        settings: &settings,
        registry: setup::open_registry(cfg)?,
        store: &store,
        dedup: &dedup,
        sinks: &sinks,
        stats: &stats,
    };
    setup::with_services(cfg, parts, Some(&health), Some(&health), |shared| {
        // The files share one dedup scope: two of them read at once may
        // hold the same id.
        let shared = Shared { claims: (files.len() > 1).then(std::sync::Arc::default), ..shared };
        let first_error: Mutex<Option<PipelineError>> = Mutex::new(None);
        let on_error = |e: PipelineError| {
            // One worker's failure stops the others: their files let go.
            stop.request();
            first_error.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
        };
        let make_chain = || -> Result<Chain, PipelineError> {
            let chain = build_chain(runtime, cfg)?;
            crate::telemetry::history::HISTORY.set_plugins(chain.stages().iter().map(|s| s.id().to_string()).collect());
            Ok(chain)
        };
        let stopping: Arc<dyn Fn() -> bool + Send + Sync> = {
            let stop = stop.clone();
            Arc::new(move || stop.requested())
        };
        std::thread::scope(|scope| {
            let pool = Pool::new(scope, &shared, PoolParts { make_chain: &make_chain, on_error: &on_error });
            for file in &files {
                match lane(shared.store, source, file, stopping.clone()) {
                    Ok(lane) => drop(pool.add(lane)),
                    Err(e) => {
                        on_error(e);
                        break;
                    }
                }
            }
            // The workers end once their files have.
            pool.close();
        });
        first_error.into_inner().unwrap_or_else(|p| p.into_inner()).map_or(Ok(()), Err)
    })?;
    Ok(setup::finish(stats, started))
}

/// A file as a lane: read from its checkpoint, which rides in the write
/// that makes its batch's doors durable.
fn lane<'s>(
    store: &'s Store,
    source: &'s FileSourceConfig,
    file: &std::path::Path,
    stopping: Arc<dyn Fn() -> bool + Send + Sync>,
) -> Result<Lane<'s>, PipelineError> {
    let checkpoint = store.checkpoint(&file.display().to_string())?;
    let part = FilePartition::open(file, checkpoint.as_ref(), source.max_line_bytes, source.follow)?
        .with_batch_bytes(source.batch_bytes);
    let start = part.position();
    let name: Arc<str> = Arc::from(part.key());
    let part = Arc::new(Mutex::new(part));
    Ok(Lane {
        name,
        start: Some(start),
        reader: Box::new(FileReader { part: part.clone(), source }),
        keeper: Box::new(FileKeeper { part, store }),
        stopping,
        state: Arc::new(Mutex::new(PartitionState::default())),
    })
}

/// Lines in batches; at the end of a file, its rotation (with `follow`).
struct FileReader<'a> {
    part: Arc<Mutex<FilePartition>>,
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
            // Never a sleep here: the worker waits for all its files at
            // once (`source.poll_interval`).
            part.follow_rotation()?;
            let behind = Some(part.unread());
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
    part: Arc<Mutex<FilePartition>>,
    store: &'a Store,
}

impl Keeper for FileKeeper<'_> {
    fn with_doors(
        &mut self,
        position: u64,
        _records: &[Pulled],
        _fates: &[Option<Disposition>],
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
