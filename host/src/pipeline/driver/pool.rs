//! The workers a run's partitions share, and how a lane reaches one.
//!
//! A pool starts a worker only when every worker it has already runs a
//! lane and it may start more (`pipeline.workers`); otherwise a new lane
//! goes to the worker with the fewest. So one partition runs on one
//! worker, as many partitions as cores run one per core, and any number
//! beyond that share them: threads and plugin instances stay bounded by
//! the pool, whatever the assignment.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::front::{self, Credit};
use super::{Lane, Shared};
use crate::pipeline::PipelineError;
use crate::plugin::Chain;

/// What wakes an idle worker before its poll interval ends: a lane that
/// joined, a credit that came back, records a source says came.
#[derive(Default)]
pub struct Doorbell {
    rung: Mutex<bool>,
    cv: Condvar,
}

impl Doorbell {
    pub fn ring(&self) {
        *self.rung.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.cv.notify_one();
    }

    /// Wait at most `timeout` unless rung since the last wait.
    pub(super) fn wait(&self, timeout: Duration) {
        let mut rung = self.rung.lock().unwrap_or_else(|p| p.into_inner());
        if !*rung {
            rung = self.cv.wait_timeout(rung, timeout).map(|(g, _)| g).unwrap_or_else(|p| p.into_inner().0);
        }
        *rung = false;
    }
}

/// What a worker's front is handed while it runs.
#[derive(Default)]
pub(super) struct Inbox<'s> {
    pub bell: Arc<Doorbell>,
    mail: Mutex<Mail<'s>>,
    /// Lanes given to this worker and not yet finished: where the pool
    /// places the next one.
    pub lanes: Arc<AtomicUsize>,
}

#[derive(Default)]
pub(super) struct Mail<'s> {
    pub lanes: Vec<(Lane<'s>, Option<Finished>)>,
    pub credits: Vec<Credit>,
    /// No lane follows: the worker ends once its lanes have.
    pub closed: bool,
    /// The worker failed: a lane given to it now is finished at once.
    pub dead: bool,
}

impl<'s> Inbox<'s> {
    pub fn add(&self, lane: Lane<'s>, done: Option<SyncSender<()>>) {
        self.lanes.fetch_add(1, Ordering::SeqCst);
        let finished = Finished { count: self.lanes.clone(), done };
        let mut mail = self.mail();
        if mail.dead {
            return;
        }
        mail.lanes.push((lane, Some(finished)));
        drop(mail);
        self.bell.ring();
    }

    pub fn close(&self) {
        self.mail().closed = true;
        self.bell.ring();
    }

    /// The back returns a batch's credit (and its memory, to be freed on
    /// the front's thread, which allocated it).
    pub fn credit(&self, credit: Credit) {
        self.mail().credits.push(credit);
        self.bell.ring();
    }

    /// What came since the last look.
    pub fn take(&self) -> Mail<'s> {
        let mut mail = self.mail();
        Mail {
            lanes: std::mem::take(&mut mail.lanes),
            credits: std::mem::take(&mut mail.credits),
            closed: mail.closed,
            dead: mail.dead,
        }
    }

    /// The worker is gone: what waits in its mail is finished now, and so
    /// is every lane given to it later.
    pub fn fail(&self) {
        let mut mail = self.mail();
        mail.dead = true;
        let left = std::mem::take(&mut mail.lanes);
        drop(mail);
        drop(left);
    }

    fn mail(&self) -> std::sync::MutexGuard<'_, Mail<'s>> {
        self.mail.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Told when its lane is finished, when dropped: the pool's count goes
/// down and whoever waits on the lane ([`LaneDone`]) goes on. Dropped by
/// a worker that fails too, so no one waits on a lane nobody runs.
pub(super) struct Finished {
    count: Arc<AtomicUsize>,
    done: Option<SyncSender<()>>,
}

impl Drop for Finished {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::SeqCst);
        if let Some(done) = self.done.take() {
            let _ = done.try_send(());
        }
    }
}

/// A lane handed to a pool: [`LaneDone::wait`] returns once nothing of it
/// is in flight any more (its last write durable and its prefix
/// published), or its worker failed.
pub struct LaneDone(Receiver<()>);

impl LaneDone {
    pub fn wait(self) {
        let _ = self.0.recv();
    }
}

/// How a pool makes each worker's plugin chain, and whom it tells when a
/// worker fails.
pub struct PoolParts<'scope> {
    pub make_chain: &'scope (dyn Fn() -> Result<Chain, PipelineError> + Sync),
    pub on_error: &'scope (dyn Fn(PipelineError) + Sync),
}

/// The workers of one run (or one Kafka member), started in `scope` as
/// lanes come.
pub struct Pool<'scope, 'env> {
    scope: &'scope std::thread::Scope<'scope, 'env>,
    shared: &'scope Shared<'scope>,
    parts: PoolParts<'scope>,
    max: usize,
    workers: Mutex<Vec<Arc<Inbox<'scope>>>>,
}

impl<'scope, 'env> Pool<'scope, 'env> {
    pub fn new(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        shared: &'scope Shared<'scope>,
        parts: PoolParts<'scope>,
    ) -> Self {
        let max = shared.settings.workers.max(1);
        Pool { scope, shared, parts, max, workers: Mutex::new(Vec::new()) }
    }

    /// Run `lane` on a worker until it ends or lets go.
    pub fn add(&self, lane: Lane<'scope>) -> LaneDone {
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
    pub fn close(&self) {
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
            .spawn_scoped(self.scope, move || {
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
            })
            .map_err(|e| PipelineError::Panicked(format!("cannot start a worker: {e}")))?;
        Ok(inbox)
    }
}
