//! The custody core: plain Rust, no I/O, no C dependency.
//!
//! A record leaves sluice's custody through one of four doors (delivered,
//! duplicate, quarantined, dropped), and a partition's position moves past
//! a record only once its door is durable (DESIGN, "The custody rule").
//!
//! - `ids`: what an event id is keyed as in the dedup window;
//! - `plan`: which door each record of a batch takes;
//! - `claims`: ids held by batches in flight, where partitions share a
//!   dedup scope;
//! - `offsets`: the per-partition position: the end of the contiguous
//!   prefix of records that passed a door.
//!
//! The driver that does the I/O between these decisions is
//! `pipeline::driver`; `model_tests` below runs the same decisions over
//! in-memory fakes and crashes between every two steps.

pub(crate) mod claims;
pub mod ids;
pub(crate) mod offsets;
pub(crate) mod plan;
pub(crate) mod standing;

#[cfg(test)]
mod model_tests;
