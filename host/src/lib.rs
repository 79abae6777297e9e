//! sluice: a stream processor that never loses a record it was handed.
//!
//! Where things happen, by folder:
//! - `plugin/`: WebAssembly plugins parse and validate records (sandboxed,
//!   with fault isolation per record);
//! - `cli/`: the `sluice` command line.
//!
//! The custody rule (`../shared/DESIGN.md`, README) governs every module
//! that moves a record or an offset.

pub mod cli;
pub mod config;
pub mod store;
pub mod offsets;
pub mod pipeline;
pub mod sink;
pub mod source;
pub mod plugin;

/// The host's version, recorded with every quarantined record.
pub const HOST_VERSION: &str = env!("CARGO_PKG_VERSION");
