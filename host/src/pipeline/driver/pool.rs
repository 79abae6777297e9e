//! The workers a run's partitions share, and how a lane reaches one.
//!
//! A pool starts a worker only when every worker it has already runs a
//! lane and it may start more (`pipeline.workers`); otherwise a new lane
//! goes to the worker with the fewest. So one partition runs on one
//! worker, as many partitions as cores run one per core, and any number
//! beyond that share them: threads and plugin instances stay bounded by
//! the pool, whatever the assignment.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::front;
use super::inbox::{Inbox, LaneDone};
use super::lane::Lane;
use super::shared::Shared;
use crate::pipeline::error::PipelineError;
use crate::plugin::chain::Chain;

/// How a pool makes each worker's plugin chain, and whom it tells when a
/// worker fails.
pub(crate) struct PoolParts<'scope> {
    pub make_chain: &'scope (dyn Fn() -> Result<Chain, PipelineError> + Sync),
    pub on_error: &'scope (dyn Fn(PipelineError) + Sync),
}

/// The workers of one run (or one Kafka member), started in `scope` as
/// lanes come.
pub(crate) struct Pool<'scope, 'env> {
    scope: &'scope std::thread::Scope<'scope, 'env>,
    shared: &'scope Shared<'scope>,
    parts: PoolParts<'scope>,
    max: usize,
    workers: Mutex<Vec<Arc<Inbox<'scope>>>>,
}

impl<'scope, 'env> Pool<'scope, 'env> {
    pub(crate) fn new(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        shared: &'scope Shared<'scope>,
        parts: PoolParts<'scope>,
    ) -> Self {
        let max = shared.settings.workers.max(1);
        Pool { scope, shared, parts, max, workers: Mutex::new(Vec::new()) }
    }

    /// Run `lane` on a worker until it ends or lets go.
    pub(crate) fn add(&self, lane: Lane<'scope>) -> LaneDone {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let mut workers = self.workers.lock().unwrap_or_else(|p| p.into_inner());
        let least = workers.iter().min_by_key(|w| w.lanes.load(Ordering::SeqCst)).cloned();
        let inbox = match least {
            Some(w) if w.lanes.load(Ordering::SeqCst) == 0 || workers.len() >= self.max => w,
            _ => match self.start(workers.len()) {
                Ok(w) => {
                    workers.push(w.clone());
                    w
                }
                Err(e) => {
                    (self.parts.on_error)(e);
                    // The lane is dropped: its done is told at once.
                    return LaneDone(rx);
                }
            },
        };
        inbox.add(lane, Some(tx));
        LaneDone(rx)
    }

    /// No more lanes: each worker ends once its lanes have.
    pub(crate) fn close(&self) {
        for w in self.workers.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            w.close();
        }
    }

    fn start(&self, number: usize) -> Result<Arc<Inbox<'scope>>, PipelineError> {
        let inbox: Arc<Inbox<'scope>> = Arc::default();
        let mine = inbox.clone();
        let (shared, make_chain, on_error) = (self.shared, self.parts.make_chain, self.parts.on_error);
        std::thread::Builder::new()
            .name(format!("sluice-worker-{number}"))
            .spawn_scoped(
                self.scope,
                crate::telemetry::labels::inherit(move || {
                    let label = format!("worker-{number}");
                    let run = || make_chain().and_then(|chain| front::run_worker(shared, chain, &mine, &label));
                    // A panic is this worker's failure, told like an error: the
                    // run stops instead of waiting on lanes nobody runs.
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
                        .unwrap_or_else(|_| Err(PipelineError::Panicked(format!("sluice-worker-{number}"))));
                    if let Err(e) = result {
                        // No lane waits on a worker that is gone.
                        mine.fail();
                        on_error(e);
                    }
                }),
            )
            .map_err(|e| PipelineError::Panicked(format!("cannot start a worker: {e}")))?;
        Ok(inbox)
    }
}
