//! How a worker's front hears of work while it runs: lanes that join,
//! credits the back returns, and a doorbell that wakes it when either
//! comes or a source says records came.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use super::lane::{Doorbell, Lane};
use crate::batch::Pulled;

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
    pub(crate) fn add(&self, lane: Lane<'s>, done: Option<SyncSender<()>>) {
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

    pub(crate) fn close(&self) {
        self.mail().closed = true;
        self.bell.ring();
    }

    /// The back returns a batch's credit (and its memory, to be freed on
    /// the front's thread, which allocated it).
    pub(crate) fn credit(&self, credit: Credit) {
        self.mail().credits.push(credit);
        self.bell.ring();
    }

    /// What came since the last look.
    pub(crate) fn take(&self) -> Mail<'s> {
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
    pub(crate) fn fail(&self) {
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
pub(crate) struct LaneDone(pub(super) Receiver<()>);

impl LaneDone {
    pub(crate) fn wait(self) {
        let _ = self.0.recv();
    }
}

/// Room for one more batch, with what is left of the batch that made room:
/// records and deliveries go back to the front to be freed on the thread
/// that allocated them (glibc's malloc makes a free from another thread
/// take the allocating thread's arena lock, per allocation).
pub(super) type Credit = Option<Box<Spent>>;

/// A finished batch's memory.
pub(super) struct Spent {
    pub _records: Vec<Pulled>,
    pub _deliveries: Vec<crate::delivery::Delivery>,
}
