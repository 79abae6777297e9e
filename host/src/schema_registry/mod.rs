//! Schemas from a schema registry that speaks Confluent's REST API
//! (Confluent, Karapace, Redpanda, Apicurio's `ccompat`), for records in
//! its wire format: byte 0, the schema's id in 4 bytes big-endian, then
//! the Avro, Protobuf or JSON payload (read by the plugins' own SDK,
//! `sluice_guest::registry::framed`, which the front uses too).
//!
//! Plugins have no network, so the host fetches. Before a batch reaches
//! the plugins, the driver's front asks `Resolver::prepare` for every
//! schema id framed in its payloads: an id already held costs a lookup,
//! a new one one request (`client.rs`), kept in memory and in the state
//! folder (`cache.rs`) so that a restart while the registry is down still
//! decodes what it saw. A decoder plugin then reads a schema through the
//! `schema` helper, answered from that cache with no I/O inside the call.
//!
//! What a failure means follows the custody rule: a registry that cannot
//! be reached, or answers anything but a schema or "no such schema", is
//! systemic, and the batch waits for it (lag, never quarantine). Only an
//! id the registry itself says it does not have (`40403`) is the record's
//! fault: the plugin rejects it with the id in the reason.

pub mod cache;
#[cfg(feature = "http")]
pub(crate) mod client;
pub mod config;
pub(crate) mod events;
pub(crate) mod resolver;
