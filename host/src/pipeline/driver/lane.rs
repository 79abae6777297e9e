//! What a source plugs into the driver: a partition as a lane, its
//! reader (records in batches, never waiting) and its keeper (what a
//! durable finished prefix means to it).

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use rocksdb::WriteBatch;

use crate::batch::{Pull, Pulled};
use crate::custody::plan::Disposition;
use crate::custody::standing::PartitionState;
use crate::pipeline::error::PipelineError;

/// Where a partition's records come from. Runs on its worker's front
/// thread, beside the other lanes of that worker.
pub(crate) trait Reader: Send {
    /// The next records, up to `max`, without waiting: the worker waits
    /// for all its lanes at once (`Settings::idle_poll`, or a ring of its
    /// [`Doorbell`]), so a reader that slept would hold up every other
    /// partition of its worker. `Ok(None)`: the source ended (or is
    /// stopping). An empty batch: nothing now.
    fn pull(&mut self, max: usize) -> Result<Option<Pull>, PipelineError>;
    /// The worker's doorbell, once, when the lane joins it: a reader whose
    /// source can say "records came" (a Kafka partition's queue) rings it,
    /// so an idle worker wakes at once instead of at its next poll.
    fn wake_with(&mut self, _bell: &Arc<Doorbell>) {}
    /// Whether the source may have records now. A reader whose source
    /// says when records come (a Kafka partition's queue) answers false
    /// while it knows it has none, and its worker skips it but for one
    /// sweep of every lane per `Settings::idle_poll`: a worker with a
    /// thousand idle partitions and one busy one asks the busy one, not a
    /// thousand queues per batch. True by default: asked every time.
    fn ready(&self) -> bool {
        true
    }
}

impl<R: Reader + ?Sized> Reader for &mut R {
    fn pull(&mut self, max: usize) -> Result<Option<Pull>, PipelineError> {
        (**self).pull(max)
    }
    fn wake_with(&mut self, bell: &Arc<Doorbell>) {
        (**self).wake_with(bell)
    }
    fn ready(&self) -> bool {
        (**self).ready()
    }
}

/// What a durable finished prefix means to a source. Runs on its
/// worker's back thread.
pub(crate) trait Keeper: Send {
    /// Add to `write` what the source keeps with a batch's doors: a file's
    /// checkpoint for `position` (durable together with the doors), a
    /// replay's entry marks. `fates` are the batch's, per record.
    /// Nothing, by default: a Kafka partition's prefix is published by
    /// the driver itself once durable.
    fn with_doors(
        &mut self,
        _position: u64,
        _records: &[Pulled],
        _fates: &[Option<Disposition>],
        _write: &mut WriteBatch,
    ) -> Result<(), PipelineError> {
        Ok(())
    }
    /// The write carrying every door below `position` is durable: the
    /// position may now leave the process (the Kafka commit).
    fn durable(&mut self, _position: u64) {}
    /// Whether `with_doors` keeps the quarantined records itself (a replay
    /// updates their entries) instead of the driver writing new entries.
    fn keeps_quarantine(&self) -> bool {
        false
    }
}

impl<K: Keeper + ?Sized> Keeper for &mut K {
    fn with_doors(
        &mut self,
        position: u64,
        records: &[Pulled],
        fates: &[Option<Disposition>],
        write: &mut WriteBatch,
    ) -> Result<(), PipelineError> {
        (**self).with_doors(position, records, fates, write)
    }
    fn durable(&mut self, position: u64) {
        (**self).durable(position)
    }
    fn keeps_quarantine(&self) -> bool {
        (**self).keeps_quarantine()
    }
}

/// One partition as its worker runs it: what a source hands the pool.
pub(crate) struct Lane<'s> {
    pub name: Arc<str>,
    /// Where reading (re)starts; `None`: at the first record read (a Kafka
    /// partition starts at the group's committed offset).
    pub start: Option<u64>,
    pub reader: Box<dyn Reader + 's>,
    pub keeper: Box<dyn Keeper + 's>,
    /// Whether the partition must let go (shutdown, revoke): what is not
    /// durable is read again.
    pub stopping: Arc<dyn Fn() -> bool + Send + Sync + 's>,
    pub state: Arc<Mutex<PartitionState>>,
}

/// A partition's standing, locked (a poisoned lock still holds it).
pub(super) fn lock(state: &Mutex<PartitionState>) -> std::sync::MutexGuard<'_, PartitionState> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// What wakes an idle worker before its poll interval ends: a lane that
/// joined, a credit that came back, records a source says came.
#[derive(Default)]
pub(crate) struct Doorbell {
    rung: Mutex<bool>,
    cv: Condvar,
}

impl Doorbell {
    pub(crate) fn ring(&self) {
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
