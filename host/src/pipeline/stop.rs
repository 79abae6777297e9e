//! How a run is told to stop, and how a failing partition tells the others.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Raises a flag when dropped without being disarmed: a partition that
/// fails or panics must not leave the others running (in follow mode they
/// would never end), nor a driver's front taking batches its back will
/// never take.
pub(crate) struct RaiseOnDrop<'a> {
    pub flag: &'a AtomicBool,
    pub armed: bool,
}

impl Drop for RaiseOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.flag.store(true, Ordering::SeqCst);
        }
    }
}

/// Tells the pipeline to stop reading; in-flight batches finish.
#[derive(Clone, Default)]
pub struct Stop(Arc<AtomicBool>);

impl Stop {
    /// Ask every holder to stop; idempotent.
    pub fn request(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    pub(crate) fn requested(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}
