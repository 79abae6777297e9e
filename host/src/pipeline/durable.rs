//! Group commit: every partition's finished batches share synced writes.
//!
//! A partition's back thread hands its batch's `WriteBatch` over and goes
//! on delivering the next batch. One committer thread takes every write
//! waiting, applies each (each stays atomic on its own), and syncs the WAL
//! once for all of them; then it answers each partition. On a busy
//! pipeline one sync serves many batches of many partitions instead of one
//! sync each.
//!
//! Two promises the custody rule leans on (`driver`): writes become durable
//! in the order they were handed over, and after a write fails no later
//! write is made: every later one is answered with the failure. So a
//! durable write implies every earlier write of its partition is durable.

use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender};

use rocksdb::WriteBatch;

use super::driver::ToBack;
use crate::store::Store;

/// One batch's write and where to say it is durable.
pub(crate) struct Durable {
    pub write: WriteBatch,
    /// The partition's sequence number of this batch.
    pub seq: u64,
    pub answer: Sender<ToBack>,
}

/// The handle partitions submit writes through.
pub struct Committer {
    tx: Mutex<Option<Sender<Durable>>>,
}

impl Committer {
    /// The handle and the receiving end for [`Committer::run`], which a
    /// thread of the run's scope drives until every handle is dropped.
    pub(crate) fn new() -> (Committer, Receiver<Durable>) {
        let (tx, rx) = std::sync::mpsc::channel();
        (Committer { tx: Mutex::new(Some(tx)) }, rx)
    }

    pub(crate) fn submit(&self, job: Durable) {
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        match tx.as_ref() {
            Some(tx) => {
                if let Err(e) = tx.send(job) {
                    let job = e.0;
                    let _ = job.answer.send(ToBack::Durable(job.seq, Err("the committer has stopped".into())));
                }
            }
            None => {
                let _ = job.answer.send(ToBack::Durable(job.seq, Err("the committer has stopped".into())));
            }
        }
    }

    /// No more writes: the committer thread ends once it has answered
    /// every write handed over.
    pub fn close(&self) {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// The committer thread: take what is waiting, write it, sync once.
    pub(crate) fn run(store: &Store, rx: Receiver<Durable>) {
        let mut failed: Option<String> = None;
        while let Ok(first) = rx.recv() {
            let mut group = vec![first];
            group.extend(rx.try_iter());
            let result = match &failed {
                Some(e) => Err(format!("an earlier write failed: {e}")),
                None => {
                    let writes = group.iter_mut().map(|j| std::mem::take(&mut j.write));
                    store.commit_group(writes).map_err(|e| e.to_string())
                }
            };
            if let Err(e) = &result {
                failed.get_or_insert_with(|| e.clone());
            }
            crate::telemetry::events::GroupCommitted { writes: group.len(), ok: result.is_ok() }.emit();
            for job in group {
                let _ = job.answer.send(ToBack::Durable(job.seq, result.clone()));
            }
        }
    }
}
