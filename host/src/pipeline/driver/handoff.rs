//! What a worker's front hands its back: a batch (one list of records,
//! a segment per partition in it, and its plan), a lane's back half, and
//! the messages between them.

use std::ops::Range;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::inbox::Finished;
use super::lane::Keeper;
use crate::batch::Pulled;
use crate::custody::claims::Claimed;
use crate::custody::plan::Plan;
use crate::custody::standing::PartitionState;
use crate::telemetry::stats::Counts;

/// A lane's number within its worker.
pub(super) type LaneId = u64;

/// One partition's records in a batch.
pub(super) struct Seg {
    pub lane: LaneId,
    pub range: Range<usize>,
    /// When its source received its first record.
    pub received: Instant,
}

/// A batch between the front and the back.
pub(super) struct Prepared {
    pub records: Vec<Pulled>,
    pub segs: Vec<Seg>,
    pub plan: Plan,
    /// How many of this worker's writes were durable when the batch was
    /// looked up: ids accepted by later writes were invisible to it.
    pub saw_writes: u64,
    pub counts: Counts,
    /// The ids this batch claimed (shared scopes), held until its write
    /// is durable.
    pub claimed: Option<Claimed>,
}

pub(super) enum ToBack {
    /// A lane joined: its back half waits in the hand-over.
    Lane(LaneId),
    Batch(Box<Prepared>),
    /// The front pulls no more of this lane: it is finished once its
    /// batches out are.
    LaneEnd(LaneId),
    /// The write of this worker's `seq`th batch is durable (or failed).
    Durable(u64, Result<(), String>),
    /// The front read its last batch.
    End,
}

/// The committer's word reaches the back thread as one more message.
impl crate::pipeline::durable::OnDurable for Sender<ToBack> {
    fn durable(&self, seq: u64, result: Result<(), String>) {
        let _ = self.send(ToBack::Durable(seq, result));
    }
}

/// A lane's back half, handed over beside the channel (it borrows what
/// the run lends, so it is not a message the committer could carry).
pub(super) type Handover<'s> = Mutex<Vec<(LaneId, Joining<'s>)>>;

/// A lane's back half, as the front hands it over.
pub(super) struct Joining<'s> {
    pub name: Arc<str>,
    pub start: Option<u64>,
    pub keeper: Box<dyn Keeper + 's>,
    pub stopping: Arc<dyn Fn() -> bool + Send + Sync + 's>,
    pub state: Arc<Mutex<PartitionState>>,
    pub finished: Option<Finished>,
}
