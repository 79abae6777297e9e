//! The `http` sink: events as NDJSON or a JSON array, posted to a backend
//! whose answer is read per event (`response`).
//!
//! Split the way Vector splits a sink: `config` (what an operator writes),
//! `body` (framing), `response` (reading answers with a profile, pure), and
//! `client` (requests: chunking, concurrency, splitting a batch to find
//! bad events), the one part that needs the `http` feature's client: a
//! build without it still reads, checks and documents these configs.
//! Retries, backoff and the breaker are not here: `sink::retrying` drives
//! every sink through them.

pub mod body;
pub mod classifier;
#[cfg(feature = "http")]
pub mod client;
pub mod config;
pub(crate) mod corpus;
pub(crate) mod formats;
pub mod response;
