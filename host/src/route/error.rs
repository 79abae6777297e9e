//! What can be wrong with routes: a rule the config cannot build, sinks
//! the fan-out cannot hold, and an event a plugin routed to a sink there
//! is not (that record is quarantined with this as its reason).

/// One rule's key at fault and why (`field: needs one of equals, matches
/// or exists`): `validate` keys it under `routes[i]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {why}")]
pub struct RuleProblem {
    pub key: &'static str,
    pub why: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error("{count} sinks (1 to {max})")]
    SinkCount { count: usize, max: usize },
    #[error("routes[{rule}]: no sink named {name:?}")]
    NoSuchSink { rule: usize, name: String },
    #[error("routes[{rule}].{problem}")]
    Rule { rule: usize, problem: RuleProblem },
    /// The plugin's route names a sink the pipeline does not have.
    #[error("a plugin routed the event to sink {name:?}; the sinks are {sinks}")]
    UnknownSink { name: String, sinks: String },
    #[error("a plugin routed the event to no sink")]
    NoSink,
}
