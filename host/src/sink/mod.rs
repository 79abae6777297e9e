//! Where events go. A sink answers per event, never per request: see
//! `Answer`. The pipeline records an event's id as delivered only after
//! its sink answered `Accepted`.
//!
//! - `file`: NDJSON files and stdout;
//! - `http`: any HTTP backend, its answers read by a response profile
//!   (built-in ones as data in `http/profiles/`, or the operator's own);
//! - `clickhouse`: the http sink preset for `INSERT … FORMAT JSONEachRow`;
//! - `kafka`: a topic, accepted on the delivery report;
//! - `postgres`: a table keyed by the event id, one transaction per batch;
//! - `config`: `[sink]`, the one place that dispatches on the sink's type;
//! - `named`: `[[sinks]]`, several named sinks, and the set a run uses;
//! - `guard`: the `retry` and `breaker` tables every sink's config
//!   flattens; `retrying` drives every sink through them: bounded retries
//!   with backoff (`retry`) and the circuit breaker (`breaker`).

pub(crate) mod breaker;
pub mod clickhouse;
pub(crate) mod config;
pub mod context;
pub(crate) mod encoding;
pub(crate) mod events;
pub mod file;
pub(crate) mod guard;
pub mod http;
pub(crate) mod kafka;
pub(crate) mod named;
pub(crate) mod postgres;
pub(crate) mod retry;
pub mod retrying;

use crate::delivery::Delivery;

/// A sink's answer about one event: its fate (DESIGN.md, "Sinks"). Who
/// may say which is fixed by the host, not by a backend's profile: see
/// `sink::http::response::fixed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Durably accepted: its id may now be recorded as delivered.
    Accepted,
    /// The backend has it already (an Elasticsearch `create` of an id that
    /// is there): as good as accepted, counted apart so that an operator
    /// can tell a replay's echo from new data.
    Duplicate,
    /// The backend said something about *this* event that may pass later:
    /// spends one of the event's bounded attempts (`retry.max_attempts`),
    /// then the event is quarantined with the last answer.
    Retry(String),
    /// A fault of this event that will not pass: it goes to the quarantine
    /// with this reason.
    Rejected(String),
    /// A fault of the backend, the credentials, the address or the network
    /// (a 404, a 5xx, a bulk item's 429, a timeout): nothing is known
    /// against the event. Counts towards the circuit breaker and never
    /// spends the event's attempts: a sick backend makes sluice late, it
    /// does not fill the quarantine.
    Systemic(String),
}

impl Answer {
    /// The fate's name, for metrics labels and `sluice sink classify`.
    pub fn fate(&self) -> &'static str {
        match self {
            Answer::Accepted => "accepted",
            Answer::Duplicate => "duplicate",
            Answer::Retry(_) => "retry",
            Answer::Rejected(_) => "reject",
            Answer::Systemic(_) => "systemic",
        }
    }

    pub(crate) fn reason(&self) -> Option<&str> {
        match self {
            Answer::Accepted | Answer::Duplicate => None,
            Answer::Retry(r) | Answer::Rejected(r) | Answer::Systemic(r) => Some(r),
        }
    }
}

/// What one call of [`Sink::deliver`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attempt {
    /// One per delivery, in order.
    pub answers: Vec<Answer>,
    /// Requests the backend answered (whatever it said about the events).
    pub requests_ok: u32,
    /// Requests that failed as a whole, or carried a systemic answer about
    /// any of their events: the breaker counts these.
    pub requests_failed: u32,
    /// The longest `Retry-After` a backend asked for: no request goes out
    /// before it has passed, and an open breaker probes no sooner.
    pub retry_after: Option<std::time::Duration>,
    /// Requests sent again in halves to find the bad events among them.
    pub splits: u32,
    /// Records the backend dropped without naming them in requests it
    /// otherwise took, by its contract never to be sent again (OTLP's
    /// partial success), and what it said of them.
    pub dropped_by_backend: u64,
    /// What the backend said of the first such drop, for the log.
    pub dropped_reason: Option<String>,
}

impl Attempt {
    /// Every event of a failed request answered `Systemic`.
    pub(crate) fn systemic(n: usize, reason: &str) -> Attempt {
        Attempt { answers: vec![Answer::Systemic(reason.to_string()); n], requests_failed: 1, ..Attempt::default() }
    }

    /// Every event accepted by one request.
    pub(crate) fn accepted(n: usize) -> Attempt {
        Attempt { answers: vec![Answer::Accepted; n], requests_ok: 1, ..Attempt::default() }
    }
}

/// Why a sink could not be built or opened; a failure to deliver is an
/// [`Answer`], not this.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The sink's file (or stdout) cannot be opened or written.
    #[error("sink {target}: {source}")]
    Io {
        /// The file's path, or `stdout`.
        target: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The sink cannot be set up (a client, a credential, a route).
    #[error("sink {target}: {message}")]
    Setup {
        /// What was being set up: the URL, the topic, `routes`.
        target: String,
        /// Why.
        message: String,
    },
}

/// One attempt at delivering a batch. Sinks do no retrying or waiting of
/// their own beyond what identifies per-event answers (splitting a batch,
/// re-sending the rows an all-or-nothing insert did not take): the
/// `guarded` driver owns backoff, attempt budgets and the breaker, so
/// every sink behaves the same under failure.
pub trait Sink: Send + Sync {
    /// One answer per delivery, in order. An `Err` means nothing in the
    /// call can be assumed accepted, and counts as a failed request.
    fn deliver(&self, batch: &[Delivery]) -> Result<Attempt, SinkError>;
    /// `deliver`, told which send of these records this is (from 1: one
    /// more than the attempts the most-tried of them has spent), for
    /// readers that weigh it (a classifier plugin sees it).
    fn deliver_nth(&self, batch: &[Delivery], _nth: u32) -> Result<Attempt, SinkError> {
        self.deliver(batch)
    }
    /// For logs and metrics labels; never holds a secret.
    fn describe(&self) -> String;
    /// `sluice check --connect`: reach the backend once, without writing a
    /// record, and say what answered; `Err` names what failed (unreachable,
    /// credentials refused, the target missing). A sink with nothing to
    /// reach (a file it has already opened) says so.
    fn probe(&self) -> Result<String, String> {
        Ok("nothing to reach".into())
    }
}
