//! Where events go. A sink answers per event, never per request: see
//! `Answer`. The pipeline records an event's id as delivered only after
//! its sink answered `Accepted`.
//!
//! - `file`: NDJSON files and stdout;
//! - `http`: any HTTP backend, with a response interpretation per backend
//!   (`status`, `openobserve`, `elasticsearch_bulk`, `clickhouse`);
//! - `clickhouse`: the http sink preset for `INSERT … FORMAT JSONEachRow`;
//! - `kafka`: a topic, accepted on the delivery report;
//! - `guarded`: what every sink is driven through: bounded retries with
//!   backoff (`retry`) and the circuit breaker (`breaker`).

pub mod breaker;
pub mod clickhouse;
pub mod file;
pub mod guarded;
pub mod http;
pub mod kafka;
pub mod retry;

use serde::Serialize;

/// One event on its way to a sink.
#[derive(Debug, Clone, Serialize)]
pub struct Delivery {
    pub id: String,
    /// RFC 3339, when the event has a time.
    pub timestamp: Option<String>,
    /// The event body as the plugin wrote it, checked to be JSON but not
    /// rebuilt: sinks copy it through.
    pub event: Box<serde_json::value::RawValue>,
}

impl Delivery {
    /// A delivery for `body`; a body that is not JSON (a plugin broke the
    /// contract) is carried as a JSON string rather than corrupting NDJSON.
    pub fn new(id: String, timestamp: Option<String>, body: &[u8]) -> Delivery {
        let event = serde_json::from_slice::<&serde_json::value::RawValue>(body)
            .map(|raw| raw.to_owned())
            .unwrap_or_else(|_| {
                let text = serde_json::to_string(&String::from_utf8_lossy(body)).unwrap_or_else(|_| "null".into());
                serde_json::value::RawValue::from_string(text).unwrap_or_else(|_| Box::default())
            });
        Delivery { id, timestamp, event }
    }
}

/// A sink's answer about one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Durably accepted: its id may now be recorded as delivered.
    Accepted,
    /// The backend said something about *this* event: try it again later.
    /// Spends one of the event's bounded attempts (`retry.max_attempts`).
    Retry(String),
    /// Never: the event goes to the quarantine with this reason.
    Rejected(String),
    /// The request that carried the event failed as a whole (5xx, 408, 429,
    /// a timeout, a lost connection, 401/403): nothing is known about the
    /// event, the backend is unwell. Counts towards the circuit breaker and
    /// never spends the event's attempts: a sick backend makes sluice late,
    /// it does not fill the quarantine.
    Unavailable(String),
}

/// What one call of [`Sink::deliver`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attempt {
    /// One per delivery, in order.
    pub answers: Vec<Answer>,
    /// Requests the backend answered (whatever it said about the events).
    pub requests_ok: u32,
    /// Requests that failed as a whole: the breaker counts these.
    pub requests_failed: u32,
}

impl Attempt {
    /// Every event of a failed request answered `Unavailable`.
    pub fn unavailable(n: usize, reason: &str) -> Attempt {
        Attempt { answers: vec![Answer::Unavailable(reason.to_string()); n], requests_ok: 0, requests_failed: 1 }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("sink {target}: {source}")]
    Io { target: String, source: std::io::Error },
    #[error("sink {target}: {message}")]
    Setup { target: String, message: String },
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
