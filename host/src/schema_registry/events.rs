//! What the schema registry does that an operator sees.

use crate::telemetry::InternalEvent;

/// The registry could not give a batch its schemas: the batch waits.
/// Every try is counted; `said` is set when the wait starts and each time
/// it doubles, so a long outage is a handful of lines.
pub(crate) struct RegistryWaiting<'a> {
    pub error: &'a str,
    pub retry_in: std::time::Duration,
    pub said: bool,
}

impl InternalEvent for RegistryWaiting<'_> {
    fn emit(&self) {
        metrics::counter!("sluice_schema_registry_errors_total").increment(1);
        if !self.said {
            return;
        }
        tracing::warn!(
            target: crate::telemetry::EVENTS,
            error = self.error,
            retry_in_ms = self.retry_in.as_millis() as u64,
            "the schema registry cannot answer: the batch waits for it (lag, not quarantine)"
        );
    }
}

/// The batch that waited for the registry was let go undecided: every
/// partition in it is stopping (a shutdown, a rebalance), and its records
/// are read again by whoever consumes them next.
pub(crate) struct RegistryWaitLetGo<'a> {
    pub error: &'a str,
    pub records: usize,
}

impl InternalEvent for RegistryWaitLetGo<'_> {
    fn emit(&self) {
        tracing::warn!(
            target: crate::telemetry::EVENTS,
            error = self.error,
            records = self.records,
            "stopping while the schema registry cannot answer: the batch waiting for it is let go undecided, and \
             its records are read again"
        );
    }
}

/// A schema was fetched and kept.
pub(crate) struct SchemaFetched {
    pub id: u32,
    pub schema_type: String,
}

impl InternalEvent for SchemaFetched {
    fn emit(&self) {
        tracing::info!(
            target: crate::telemetry::EVENTS,
            id = self.id,
            schema_type = %self.schema_type,
            "fetched a schema from the registry"
        );
        metrics::counter!("sluice_schema_registry_fetches_total").increment(1);
    }
}
