//! The partition driver: the one piece of code that takes a record from
//! its source to its commit, for every source (files, Kafka, quarantine
//! replay). A source plugs in through [`Reader`] (records in batches, as
//! `crate::batch` describes them) and [`Keeper`] (what a durable finished
//! prefix means to it: a checkpoint in the store's write for files, a
//! prefix published for the Kafka commit, entries marked replayed for a
//! replay), together a [`Lane`]: one partition.
//!
//! **Workers, not a thread per partition.** A run has a fixed pool of
//! workers (`pipeline.workers`, one per core by default: [`Pool`]), and
//! partitions are lanes multiplexed onto them. A lane is a few KiB of
//! state (its reader, its offset tracker, its place in the worker's
//! rotation); the plugin instances, the threads and the batches belong to
//! the worker. So the cost of a run follows its records, not its
//! partitions: an idle partition costs its lane, and slow partitions share
//! a batch instead of each paying a batch's overhead for a few records.
//!
//! Each worker has two threads, so that the CPU and the disk never wait on
//! each other:
//!
//! - the front (`front.rs`) gathers a batch from its lanes (records of
//!   several partitions when each has few), runs the plugins and asks the
//!   dedup window (steps 1–2 of the custody order);
//! - the back (`back.rs`) delivers it, builds its durable write (accepted
//!   ids, quarantine entries, what each lane's keeper adds) and hands the
//!   write to the group committer (`durable`), then goes on with the next
//!   batch while that write is synced (steps 3–5).
//!
//! At most `pipeline.in_flight` batches of a worker are between its
//! sources and their commits: the front takes a credit per batch and the
//! back returns it when the batch's write is durable.
//!
//! **The custody rule, as this module enforces it.** A record's position
//! moves only after its sink answer and its store write are both durable:
//! the keeper's `durable` (the Kafka prefix) is called only once the write
//! is synced, and a checkpoint rides inside the very write that makes its
//! batch's doors durable. Each lane keeps its own contiguous prefix: a
//! write carries, per partition in its batch, the position of the prefix
//! of that partition's records decided in it or in earlier writes; writes
//! become durable in the order they were handed over, and after a failed
//! write no later one is made (`durable::Committer`), so when a write is
//! durable every record below each of its positions has passed a door
//! durably. A batch of several partitions is let go undecided only when
//! every one of them is stopping: a partition that goes on never has a
//! hole behind records that went out after it.

mod back;
mod front;
mod handoff;
mod inbox;
mod lane;
mod pool;
mod shared;

use std::sync::{Arc, Mutex};

pub(crate) use self::inbox::LaneDone;
pub(crate) use self::lane::Reader;
pub(crate) use self::lane::{Doorbell, Keeper, Lane};
pub(crate) use self::pool::{Pool, PoolParts};
pub(crate) use self::shared::Shared;
pub(crate) use self::shared::{Commit, IdLog, QuarantineLog, SentIds, Settings};
use super::error::PipelineError;
use crate::custody::standing::PartitionState;
use crate::plugin::chain::Chain;

/// One partition on a worker of its own, run on the caller's thread: a
/// replay, a partition whose Kafka transactions are its own, tests.
pub(crate) struct Partition<'p> {
    pub name: &'p str,
    /// As [`Lane::start`].
    pub start: Option<u64>,
    pub chain: Chain,
    /// As [`Lane::stopping`].
    pub stopping: &'p (dyn Fn() -> bool + Sync),
    pub state: Arc<Mutex<PartitionState>>,
}

/// Run one partition until its reader ends, it must let go, or it fails:
/// a worker with one lane, on the same path as a pool's.
pub(crate) fn drive(
    shared: &Shared<'_>,
    part: Partition<'_>,
    reader: &mut dyn Reader,
    keeper: &mut dyn Keeper,
) -> Result<(), PipelineError> {
    let Partition { name, start, chain, stopping, state } = part;
    let lane = Lane {
        name: Arc::from(name),
        start,
        reader: Box::new(reader),
        keeper: Box::new(keeper),
        stopping: Arc::new(stopping),
        state,
    };
    let inbox = inbox::Inbox::default();
    inbox.add(lane, None);
    inbox.close();
    front::run_worker(shared, chain, &inbox, name)
}
