//! Where events go. A sink answers per event, never per request: see
//! `Answer`. The pipeline records an event's id as delivered only after
//! its sink answered `Accepted`.

pub mod file;

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
    /// Try again later (the backend was not able to take it now).
    Retry(String),
    /// Never: the event goes to the quarantine with this reason.
    Rejected(String),
}

#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("sink {target}: {source}")]
    Io { target: String, source: std::io::Error },
}

pub trait Sink: Send {
    /// One answer per delivery, in order. An `Err` means nothing in the
    /// call can be assumed accepted.
    fn deliver(&mut self, batch: &[Delivery]) -> Result<Vec<Answer>, SinkError>;
    fn describe(&self) -> String;
}
