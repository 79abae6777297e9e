//! Write a sluice classifier plugin in Rust: a plugin that reads how a
//! backend answered one request of the HTTP sink (`wit/classifier.wit`),
//! for a backend no built-in profile covers.
//!
//! ```no_run
//! use sluice_classifier::{export_classifier, Classifier, Fate, Reply, Request, Response};
//!
//! #[derive(serde::Deserialize)]
//! #[serde(deny_unknown_fields)]
//! struct Acks {}
//!
//! impl Classifier for Acks {
//!     fn classify(&mut self, request: &Request, response: &Response) -> Reply {
//!         match response.status {
//!             200..=299 => Reply::All(Fate::Accepted),
//!             400 => Reply::Split(response.excerpt()),
//!             _ => Reply::All(Fate::Systemic(response.excerpt())),
//!         }
//!     }
//! }
//!
//! export_classifier!(Acks);
//! ```
//!
//! The type is the plugin's config (`[sink.classifier] config`). The host
//! applies its fixed rules after the reply: a 404 or a 5xx stays systemic
//! whatever the plugin says, and so does a reply with the wrong number of
//! fates. It is a separate crate from `sluice-guest` because a component
//! is one world: a parse plugin or a classifier, never both.
//!
//! Natively (tests), `Request::new` and `Response::new` build the values
//! the host would pass, and `now`/`log` fall back to the system clock and
//! stderr.

extern crate self as sluice_classifier;

#[doc(hidden)]
// The generated host calls take what the WIT function does, however many.
#[allow(clippy::too_many_arguments)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "classifier",
        path: "../../wit",
        pub_export_macro: true,
        export_macro_name: "__export_classifier_world",
        default_bindings_module: "::sluice_classifier::bindings",
        runtime_path: "::sluice_classifier::__wit_bindgen::rt",
    });
}

#[doc(hidden)]
pub use wit_bindgen as __wit_bindgen;

#[doc(hidden)]
pub use sluice_guest_common as __common;

use bindings::sluice::plugin::answers as wit;

/// Bytes per record in the request's table (`wit/classifier.wit`).
pub const RECORD_BYTES: usize = 32;

/// What one record came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    Accepted,
    Duplicate,
    /// Send again; spends one of the record's attempts.
    Retry(String),
    /// Quarantined with the reason.
    Reject(String),
    /// The backend's fault: the record waits, nothing is spent.
    Systemic(String),
}

/// The reply to one response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// One fate per record of the request, in its order.
    Each(Vec<Fate>),
    /// The same fate for all.
    All(Fate),
    /// Some records are bad, the answer does not say which: the host
    /// sends the halves.
    Split(String),
    /// Nothing was taken because of this row (from 0): it is rejected,
    /// the others sent again.
    BadRow { row: usize, reason: String },
}

/// The request a response answers: per record its id, timestamp and the
/// place of its bytes in the request body.
#[derive(Debug, Clone, Default)]
pub struct Request {
    records: Vec<u8>,
    ids: Vec<u8>,
    /// The body's length before compression.
    pub body_bytes: u64,
    /// Which send of these records this is, from 1.
    pub attempt: u32,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4).map_or(0, |s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

impl Request {
    /// A request as the host would pack it, for tests: ids, timestamps
    /// (ns) and spans, one each per record.
    pub fn new(ids: &[&str], timestamps: &[Option<i64>], spans: &[(u32, u32)]) -> Request {
        let mut r = Request { attempt: 1, ..Request::default() };
        for (i, id) in ids.iter().enumerate() {
            let ts = timestamps.get(i).copied().flatten();
            let (start, len) = spans.get(i).copied().unwrap_or_default();
            for v in [r.ids.len() as u32, id.len() as u32, start, len] {
                r.records.extend_from_slice(&v.to_le_bytes());
            }
            r.records.extend_from_slice(&ts.unwrap_or(0).to_le_bytes());
            r.records.extend_from_slice(&u32::from(ts.is_some()).to_le_bytes());
            r.records.extend_from_slice(&0u32.to_le_bytes());
            r.ids.extend_from_slice(id.as_bytes());
        }
        r
    }

    /// How many records were sent.
    pub fn len(&self) -> usize {
        self.records.len() / RECORD_BYTES
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Record `i`'s event id ("" past the end or when not UTF-8).
    pub fn id(&self, i: usize) -> &str {
        let at = i * RECORD_BYTES;
        let (start, len) = (u32_at(&self.records, at) as usize, u32_at(&self.records, at + 4) as usize);
        self.ids.get(start..start + len).and_then(|b| std::str::from_utf8(b).ok()).unwrap_or("")
    }

    /// Record `i`'s event time, ns since the epoch, when it has one.
    pub fn timestamp(&self, i: usize) -> Option<i64> {
        let at = i * RECORD_BYTES;
        if u32_at(&self.records, at + 24) & 1 == 0 {
            return None;
        }
        self.records.get(at + 16..at + 24).map(|s| i64::from_le_bytes(s.try_into().unwrap_or([0; 8])))
    }

    /// `(start, length)` of record `i`'s bytes in the request body.
    pub fn span(&self, i: usize) -> (u32, u32) {
        let at = i * RECORD_BYTES;
        (u32_at(&self.records, at + 8), u32_at(&self.records, at + 12))
    }

    /// The record whose bytes hold body position `at`.
    pub fn record_at(&self, at: u64) -> Option<usize> {
        (0..self.len()).find(|i| {
            let (start, len) = self.span(*i);
            (u64::from(start)..u64::from(start) + u64::from(len)).contains(&at)
        })
    }
}

/// The backend's response, as much as the config lets the plugin see.
#[derive(Debug, Clone, Default)]
pub struct Response {
    pub status: u16,
    /// Names in lower case: only those `[sink.classifier] headers` lists.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body was cut at `max_body_bytes`.
    pub truncated: bool,
}

impl Response {
    pub fn new(status: u16, body: impl Into<Vec<u8>>) -> Response {
        Response { status, body: body.into(), ..Response::default() }
    }

    /// A header's value (name in any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The body as JSON, or why it is not.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, String> {
        if self.truncated {
            return Err(format!("the body was cut at {} bytes", self.body.len()));
        }
        serde_json::from_slice(&self.body).map_err(|e| format!("the body is not the JSON expected: {e}"))
    }

    /// `HTTP 400: <the body's start>`, a reason as the built-in profiles
    /// write one.
    pub fn excerpt(&self) -> String {
        let text = String::from_utf8_lossy(&self.body[..self.body.len().min(400)]);
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if text.is_empty() { format!("HTTP {}", self.status) } else { format!("HTTP {}: {text}", self.status) }
    }
}

/// A classifier: its config type, and how it reads one response.
pub trait Classifier: serde::de::DeserializeOwned + 'static {
    /// Check what serde cannot; an error refuses the config (name the key).
    fn setup(&mut self) -> Result<(), String> {
        Ok(())
    }

    fn classify(&mut self, request: &Request, response: &Response) -> Reply;
}

/// Build a classifier from the JSON config the host passes to `init`.
pub fn configure<C: Classifier>(config: &str) -> Result<C, String> {
    let mut c: C = sluice_guest_common::read_config(config, "classifier")?;
    c.setup()?;
    Ok(c)
}

pub use sluice_guest_common::Level;

/// The host's clock: ns since the epoch.
pub fn now() -> i64 {
    #[cfg(target_arch = "wasm32")]
    {
        bindings::sluice::plugin::clock::now()
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        sluice_guest_common::native_now()
    }
}

/// A line in the host's log, within its budget per call.
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    {
        let level = sluice_guest_common::lower_level!(level, bindings::sluice::plugin::types::Level);
        bindings::sluice::plugin::log::log(level, message)
    }
    #[cfg(not(target_arch = "wasm32"))]
    sluice_guest_common::native_log(level, message)
}

#[doc(hidden)]
pub fn __classify<C: Classifier>(c: Option<&mut C>, request: wit::Request, response: wit::Response) -> wit::Reply {
    let request = Request {
        records: request.records,
        ids: request.ids,
        body_bytes: request.body_bytes,
        attempt: request.attempt,
    };
    let response = Response {
        status: response.status,
        headers: response.headers,
        body: response.body,
        truncated: response.truncated,
    };
    let reply = match c {
        Some(c) => c.classify(&request, &response),
        None => Reply::All(Fate::Systemic("classifier used before init".into())),
    };
    lower(reply)
}

fn lower(reply: Reply) -> wit::Reply {
    let fate = |f: Fate| match f {
        Fate::Accepted => wit::Fate::Accepted,
        Fate::Duplicate => wit::Fate::Duplicate,
        Fate::Retry(r) => wit::Fate::Retry(r),
        Fate::Reject(r) => wit::Fate::Reject(r),
        Fate::Systemic(r) => wit::Fate::Systemic(r),
    };
    match reply {
        Reply::Each(fates) => wit::Reply::Each(fates.into_iter().map(fate).collect()),
        Reply::All(f) => wit::Reply::All(fate(f)),
        Reply::Split(r) => wit::Reply::Split(r),
        Reply::BadRow { row, reason } => wit::Reply::BadRow(wit::BadRow { row: row as u32, reason }),
    }
}

#[doc(hidden)]
pub type __WitRequest = wit::Request;
#[doc(hidden)]
pub type __WitResponse = wit::Response;
#[doc(hidden)]
pub type __WitReply = wit::Reply;

/// Export `$classifier` as the component's `init` and `classify`.
#[macro_export]
macro_rules! export_classifier {
    ($classifier:ty) => {
        const _: () = {
            #[allow(dead_code)]
            struct SluiceExport;

            ::std::thread_local! {
                static CLASSIFIER: $crate::__common::Instance<$classifier> =
                    const { $crate::__common::Instance::new() };
            }

            impl $crate::bindings::Guest for SluiceExport {
                fn init(config: ::std::string::String) -> ::std::result::Result<(), ::std::string::String> {
                    CLASSIFIER.with(|one| one.init($crate::configure::<$classifier>(&config)))
                }

                fn classify(request: $crate::__WitRequest, response: $crate::__WitResponse) -> $crate::__WitReply {
                    CLASSIFIER.with(|one| one.with(|c| $crate::__classify(c, request, response)))
                }
            }

            #[cfg(target_arch = "wasm32")]
    $crate::bindings::__export_classifier_world!(SluiceExport with_types_in $crate::bindings);
        };
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_table_reads_back_what_was_packed() {
        let r = Request::new(&["a", "bc", ""], &[Some(5), None, Some(-1)], &[(0, 10), (11, 4), (16, 2)]);
        assert_eq!(r.len(), 3);
        assert_eq!((r.id(0), r.id(1), r.id(2), r.id(3)), ("a", "bc", "", ""));
        assert_eq!((r.timestamp(0), r.timestamp(1), r.timestamp(2)), (Some(5), None, Some(-1)));
        assert_eq!(r.span(1), (11, 4));
        assert_eq!(r.record_at(12), Some(1));
        assert_eq!(r.record_at(10), None, "the newline between records is no record's");
    }

    #[test]
    fn a_cut_body_is_not_read_as_json() {
        let mut r = Response::new(200, br#"{"a":1}"#.to_vec());
        assert!(r.json::<serde_json::Value>().is_ok());
        r.truncated = true;
        assert!(r.json::<serde_json::Value>().is_err());
        assert_eq!(Response::new(503, b"  busy \n now".to_vec()).excerpt(), "HTTP 503: busy now");
    }
}
