//! The plugin runtime: WebAssembly components that turn records into events.
//!
//! - `engine`: compile once per digest, the time-limit clock;
//! - `cache`: compiled plugins kept by digest, in memory and on disk, bounded;
//! - `sandbox`: what an instance may touch (nothing) and its memory cap;
//! - `spec`: how to load a plugin, and the limits it is held to;
//! - `error`: what loading a plugin, or one call into it, can fail with;
//! - `instance`: one store, one call;
//! - `isolate`: a batch call that falls back to record by record on a fault;
//! - `chain`: stages in a row, and the per-source-record verdict;
//! - `inputs`: what a stage reads (source records, or derived events beside them);
//! - `classifier`: plugins that read a sink's answers (`wit/classifier.wit`);
//! - `inspect`: what a component file is, without running it;
//! - `contract`: the 0.1 and 0.2 versions of the WIT contract, detected
//!   at load, and the generated bindings, private to this module;
//! - `output_rules`: what an event must be, whichever the version.
//!
//! Each item is imported from the module that defines it: this module
//! re-exports nothing, so no child imports its parent's re-export of a
//! sibling (`tests/layering.rs` counts that as the circle it is).

pub mod cache;
pub mod chain;
pub mod classified;
pub(crate) mod classifier;
pub(crate) mod config;
pub(crate) mod conformance;
pub(crate) mod contract;
pub mod engine;
pub mod error;
pub(crate) mod expect;
pub(crate) mod helpers;
pub mod inputs;
pub(crate) mod inspect;
mod instance;
pub mod isolate;
pub mod output_rules;
pub(crate) mod pin;
mod sandbox;
pub mod spec;

/// The hex blake3 digest of a plugin's bytes: its version.
pub fn digest_hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}
