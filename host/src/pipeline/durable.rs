//! Group commit: every partition's finished batches share synced writes.
//!
//! A worker's back thread hands its batch's `WriteBatch` over and goes on
//! delivering the next batch. One committer thread takes every write
//! waiting, applies each (each stays atomic on its own), and syncs the WAL
//! once for all of them; then it answers each worker. On a busy
//! pipeline one sync serves many batches of many partitions instead of one
//! sync each.
//!
//! Two promises the custody rule leans on (`driver`): writes become durable
//! in the order they were handed over, and after a write fails no later
//! write is made: every later one is answered with the failure. So a
//! durable write implies every earlier write of its worker is durable.

use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender};
use std::time::Duration;

use rocksdb::WriteBatch;

use crate::pipeline::events::StateVolumeFull;
use crate::store::Store;
use crate::store::disk_reserve::Room;
use crate::telemetry::Health;
use crate::telemetry::InternalEvent;

/// One batch's write and where to say it is durable.
pub(crate) struct Durable {
    pub write: WriteBatch,
    /// The partition's sequence number of this batch.
    pub seq: u64,
    pub tell: std::sync::Arc<dyn OnDurable>,
}

/// Who is told a write is durable (or failed): the partition's back
/// thread, behind a trait so the committer knows nothing of the driver.
pub(crate) trait OnDurable: Send + Sync {
    fn durable(&self, seq: u64, result: Result<(), String>);
}

/// The handle partitions submit writes through.
pub(crate) struct Committer {
    tx: Mutex<Option<Sender<Durable>>>,
    /// Set by `close`: a committer waiting for room on the state volume
    /// gives up, failing what waits, so the run can end.
    closed: std::sync::atomic::AtomicBool,
    /// What `upkeep` sleeps on between its rounds: `close` wakes it, so
    /// that a run ends as soon as its last write is answered, not on the
    /// upkeep's next tick (which added up to 200 ms to every run's end).
    wake: (Mutex<()>, std::sync::Condvar),
}

impl Committer {
    /// The handle and the receiving end for [`Committer::run`], which a
    /// thread of the run's scope drives until every handle is dropped.
    pub(crate) fn new() -> (Committer, Receiver<Durable>) {
        let (tx, rx) = std::sync::mpsc::channel();
        (Committer { tx: Mutex::new(Some(tx)), closed: Default::default(), wake: Default::default() }, rx)
    }

    pub(crate) fn submit(&self, job: Durable) {
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        match tx.as_ref() {
            Some(tx) => {
                if let Err(e) = tx.send(job) {
                    let job = e.0;
                    job.tell.durable(job.seq, Err("the committer has stopped".into()));
                }
            }
            None => {
                job.tell.durable(job.seq, Err("the committer has stopped".into()));
            }
        }
    }

    /// No more writes: the committer thread ends once it has answered
    /// every write handed over.
    pub(crate) fn close(&self) {
        {
            // Under the lock `upkeep` checks `closed` with: it cannot miss it.
            let _held = self.wake.0.lock().unwrap_or_else(|p| p.into_inner());
            self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        self.wake.1.notify_all();
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// The committer thread: take what is waiting, write it, sync once.
    /// Before each group it makes sure the state volume has room
    /// (`store::disk_reserve`), waiting for it if not; `health` hears about it.
    pub(crate) fn run(&self, store: &Store, rx: Receiver<Durable>, health: Option<&Health>) {
        let mut failed: Option<String> = None;
        let room = Room { path: store.path(), reserve: store.reserve(), poll: Duration::from_millis(500) };
        let closed = || self.closed.load(std::sync::atomic::Ordering::SeqCst);
        let mut short = false;
        while let Ok(first) = rx.recv() {
            let mut group = vec![first];
            room.wait(&closed, &mut |free| {
                StateVolumeFull { path: store.path(), free, reserve: room.reserve, was_short: short, health }.emit();
                short = free.is_some();
            });
            group.extend(rx.try_iter());
            let result = match &failed {
                Some(e) => Err(format!("an earlier write failed: {e}")),
                None if short => Err(format!(
                    "the state volume of {} has less than pipeline.state_reserve free; nothing written",
                    store.path().display()
                )),
                None => {
                    let writes = group.iter_mut().map(|j| std::mem::take(&mut j.write));
                    store.commit_group(writes).map_err(|e| e.to_string())
                }
            };
            if let Err(e) = &result {
                failed.get_or_insert_with(|| e.clone());
            }
            crate::pipeline::events::GroupCommitted { writes: group.len(), ok: result.is_ok() }.emit();
            for job in group {
                job.tell.durable(job.seq, result.clone());
            }
        }
    }
}

/// How often the store's upkeep runs (`Committer::upkeep`).
const UPKEEP_EVERY: Duration = Duration::from_secs(10);

impl Committer {
    /// The store's upkeep, a thread beside the committer's until it
    /// closes: every `UPKEEP_EVERY` it merges the small tables that
    /// RocksDB leaves unmerged (`Store::merge_small_tables`; a merge can
    /// take a second, which is why not on the committer's thread; none
    /// while the volume has less than twice `state_reserve` free) and
    /// reports the store's tables by family.
    pub(crate) fn upkeep(&self, store: &Store) {
        let closed = || self.closed.load(std::sync::atomic::Ordering::SeqCst);
        let mut next = std::time::Instant::now();
        while !closed() {
            if std::time::Instant::now() >= next {
                next = std::time::Instant::now() + UPKEEP_EVERY;
                // A merge writes its tables before it deletes the old ones:
                // not while the volume is near `state_reserve`, where the
                // committer waits for room and a merge would eat into it.
                let free = crate::store::disk_reserve::free_bytes(store.path()).unwrap_or(u64::MAX);
                let merged =
                    if free < store.reserve().saturating_mul(2) { Ok(Vec::new()) } else { store.merge_small_tables() };
                match merged {
                    Ok(merged) if !merged.is_empty() => {
                        tracing::debug!(?merged, "the store's small tables merged");
                    }
                    Ok(_) => {}
                    Err(e) => tracing::debug!(error = %e, "the store's small tables could not be merged"),
                }
                report_shape(store);
            }
            let held = self.wake.0.lock().unwrap_or_else(|p| p.into_inner());
            let _ = self.wake.1.wait_timeout_while(held, Duration::from_millis(200), |_| !closed());
        }
    }
}

fn report_shape(store: &Store) {
    match store.shape() {
        Ok(shape) => {
            let families: Vec<(&str, u64, u64)> = shape.iter().map(|(f, s)| (*f, s.tables, s.bytes)).collect();
            crate::pipeline::events::StoreShape { families: &families }.emit();
        }
        Err(e) => tracing::debug!(error = %e, "the store's table list could not be read"),
    }
}
