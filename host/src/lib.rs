//! sluice: a stream processor that never loses a record it was handed.
//!
//! Where things happen, by folder:
//! - `batch/`: what the hot path carries, one buffer per batch with a
//!   descriptor per record (start here, then `pipeline/driver.rs`);
//! - `source/`: records are read (files: framing, partitions, rotation;
//!   Kafka: the client, records, admin questions);
//! - `plugin/`: WebAssembly plugins parse and validate them (sandboxed,
//!   with fault isolation per record);
//! - `store/`: the dedup window, checkpoints and the quarantine (RocksDB);
//! - `sink/`: events are delivered, with an answer per event;
//! - `custody/`: the custody rule's decisions, plain Rust with no I/O:
//!   which door each record of a batch takes (`batch`), event ids as the
//!   window keys them (`ids`), the per-partition finished prefix
//!   (`offsets`);
//! - `pipeline/`: the one partition driver that applies the custody order
//!   for every source (`driver`), group commit (`durable`), and the
//!   sources plugged into it (`files`; `kafka`: the consume loop,
//!   rebalances, partition tasks; `replay`);
//! - `telemetry/`: internal events (log and count), `/metrics`, `/health`;
//!   per-record warnings said once and then counted (`repeats`), every
//!   log line masked (`redact`);
//! - `masking.rs`: what is replaced by `***` wherever record content
//!   leaves the process (quarantine entries, logs, errors);
//! - `config/`: the typed config (and where a key is written, for errors);
//!   `cli/`: the `sluice` command line.
//!
//! The custody rule (`../shared/DESIGN.md`, README) governs every module
//! that moves a record or an offset.

pub mod batch;
pub mod cli;
pub mod config;
pub mod custody;
pub mod delivery;
pub mod masking;
pub mod pipeline;
pub mod plugin;
pub mod problem;
pub mod record;
pub mod sink;
pub mod source;
pub mod store;
pub mod telemetry;
pub mod units;
pub mod verdict;
pub mod watchdog;

/// The host's version, recorded with every quarantined record.
pub const HOST_VERSION: &str = env!("CARGO_PKG_VERSION");
