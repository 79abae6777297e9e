//! sluice: a stream processor that never loses a record it was handed.
//!
//! Where things happen, by folder (each imports only those above it in
//! this list; `tests/layering.rs` holds it, docs/src/code-layout.md says
//! more):
//! - `units`, `problem`: durations and sizes as configs write them, and
//!   what is wrong with a config, key by key;
//! - `features`: what this binary was built with (Kafka, HTTP and
//!   PostgreSQL are cargo features; the embedded default has none);
//! - `masking`: what is replaced by `***` wherever record content leaves
//!   the process (quarantine entries, logs, errors);
//! - `record`, `verdict`, `delivery`: what travels — a source record and a
//!   plugin's event, what the plugins said of each record, what a sink is
//!   handed and its final word;
//! - `route/`: which of the sinks an event goes to (`[[routes]]`), and how
//!   each sink's ids are told apart;
//! - `custody/`: the custody rule's decisions, plain Rust with no I/O:
//!   which door each record of a batch takes (`plan`), event ids as the
//!   window keys them (`ids`), the per-partition finished prefix
//!   (`offsets`), where a partition stands (`standing`);
//! - `telemetry/`: the machinery of internal events (`InternalEvent`),
//!   `/metrics`, `/health`, the tap and the operator API; per-record
//!   warnings said once and then counted (`repeats`), every log line
//!   masked (`redact`);
//! - `batch/`: what the hot path carries, one buffer per batch with a
//!   descriptor per record (start here, then `pipeline/driver/`);
//! - `schema_registry/`: the schemas of records framed with a registry's
//!   id (Avro, Protobuf), fetched before a batch reaches the plugins;
//! - `plugin/`: WebAssembly plugins parse and validate records (sandboxed,
//!   with fault isolation per record);
//! - `store/`: the dedup window, checkpoints and the quarantine (RocksDB);
//! - `source/`: records are read (files: framing, partitions, rotation;
//!   Kafka: the client, the connection, admin questions);
//! - `sink/`: events are delivered, with an answer per event;
//! - `watchdog/`: partitions that are stalled, late or back-pressured;
//! - `config/`: assembles each component's section (`*/config.rs`) from
//!   the file, and places errors at their line;
//! - `pipeline/`: the one partition driver that applies the custody order
//!   for every source (`driver`), group commit (`durable`), and the runs
//!   built from a config (`files`; `kafka`: the consume loop, rebalances,
//!   partition tasks; `replay`);
//! - `cli/`: the `sluice` command line.
//!
//! The custody rule (docs/src/design.md) governs every module
//! that moves a record or an offset.

// A build without a backend (the embedded default has none) still reads,
// checks and documents every config, so the code that serves a backend is
// there and, with its feature off, not called: what is unused then is
// unused by the build's features, not by the program.
// What stays public is what the binary, the suites and the benches use:
// each of it says why it is there (wasmtime's `wasi-config` denies the
// same).
#![deny(missing_docs)]
#![cfg_attr(not(all(feature = "kafka", feature = "http", feature = "postgres")), allow(dead_code, unused_imports))]

pub mod batch;
pub mod cli;
pub mod config;
pub mod custody;
pub mod delivery;
pub mod features;
pub mod masking;
pub mod pipeline;
pub mod plugin;
pub mod problem;
pub mod record;
pub mod route;
pub mod schema_registry;
pub mod sink;
pub mod source;
pub mod store;
pub mod telemetry;
pub mod units;
pub mod verdict;
pub mod watchdog;

/// The host's version, recorded with every quarantined record.
pub(crate) const HOST_VERSION: &str = env!("CARGO_PKG_VERSION");
