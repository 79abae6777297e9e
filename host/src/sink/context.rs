//! What a sink is built with beside its own config. A file of its own so
//! that the configs that build sinks and the sinks they build both import
//! it and not each other.

use crate::plugin::engine::Runtime;

/// What a sink is built with beside its own config: what the run owns and
/// shares (as Vector's `SinkContext`), so that a sink makes none of it
/// again.
#[derive(Clone, Copy)]
pub struct SinkContext<'a> {
    /// The run's plugin runtime: a classifier is loaded into it, not into
    /// an engine (and a clock thread) of its own.
    pub plugins: &'a Runtime,
    /// `[schema_registry]`: what a Kafka sink's `[sink.encoding]`
    /// registers its schema with.
    pub registry: Option<&'a crate::schema_registry::config::SchemaRegistryConfig>,
}
