//! Write a sluice plugin in Rust.
//!
//! A complete plugin is one type, one method and one macro:
//!
//! ```no_run
//! use sluice_guest::{export_plugin, Event, Outcome, Plugin, Record};
//!
//! #[derive(serde::Deserialize)]
//! #[serde(deny_unknown_fields)]
//! struct Upper {}
//!
//! impl Plugin for Upper {
//!     fn process(&mut self, record: &Record) -> Outcome {
//!         match record.text() {
//!             Ok(line) => Outcome::emit_json(&serde_json::json!({ "line": line.to_uppercase() })),
//!             Err(rejected) => rejected,
//!         }
//!     }
//! }
//!
//! export_plugin!(Upper);
//! ```
//!
//! The type *is* the plugin's config: the host passes the plugin's table from
//! its config file, and serde's error (which names the key at fault) becomes
//! the refusal an operator sees. See `guest-sdk/README.md` for a walk-through.
//!
//! The SDK also compiles natively (the host imports fall back to the system
//! clock and stderr), so plugin logic can be unit-tested with `cargo test`
//! and benchmarked against its WebAssembly build.

// Lets the generated bindings name this crate by the same absolute path
// inside it as from a plugin.
extern crate self as sluice_guest;

pub mod batch_fields;
mod bytes;
pub mod duration;
pub mod json;
pub mod logfmt;
pub mod output_rules;
pub mod registry;
#[cfg(feature = "schema")]
pub mod schema;
pub mod shortcuts;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;
pub mod time;

mod types;
pub use batch_fields::{JsonFields, json_get_batch, pack_json_fields, payloads_on_demand, trim_line_end};
pub use sluice_guest_common::Level;
pub use types::{Event, Headers, Outcome, Position, Record};

/// The clock and log imports of one contract version, over its generated
/// bindings (`bindings`, `wit` in scope where it is invoked).
macro_rules! guest_imports {
    () => {
        #[cfg(target_arch = "wasm32")]
        pub fn now() -> i64 {
            bindings::sluice::plugin::clock::now()
        }

        #[cfg(target_arch = "wasm32")]
        pub fn log(level: crate::Level, message: &str) {
            bindings::sluice::plugin::log::log(sluice_guest_common::lower_level!(level, wit::Level), message)
        }
    };
}

/// The contract this build speaks: 0.2 by default, 0.1 with the
/// `contract-0-1` feature (for a host older than 0.2, and for the suites
/// that prove the host still runs 0.1 plugins). The author's code is the
/// same for both.
#[cfg(not(feature = "contract-0-1"))]
#[path = "contract_v02.rs"]
#[doc(hidden)]
pub mod __contract;
#[cfg(feature = "contract-0-1")]
#[path = "contract_v01.rs"]
#[doc(hidden)]
pub mod __contract;

#[doc(hidden)]
pub use __contract::bindings as __bindings;

#[doc(hidden)]
pub use wit_bindgen as __wit_bindgen;

#[doc(hidden)]
pub use sluice_guest_common as __common;

/// The WIT package version this build targets; `sluice plugin inspect` shows it.
pub const WIT_VERSION: &str = __contract::WIT_VERSION;

/// A plugin: a config type that knows how to process one record.
///
/// The host calls [`Plugin::process_batch`] with a whole batch; its default
/// calls [`Plugin::process`] once per record, which is all most plugins need.
pub trait Plugin: serde::de::DeserializeOwned + 'static {
    /// Finish setting up after the config was deserialized: compile patterns,
    /// check values that serde cannot. An error refuses the config; name the
    /// key at fault.
    fn setup(&mut self) -> Result<(), String> {
        Ok(())
    }

    /// Turn one record into its outcome.
    fn process(&mut self, record: &Record<'_>) -> Outcome;

    /// Turn a batch into one outcome per record, in order. Override only to
    /// share work across a batch.
    fn process_batch(&mut self, batch: &[Record<'_>]) -> Vec<Outcome> {
        batch.iter().map(|r| self.process(r)).collect()
    }
}

/// Build a plugin from the JSON config the host passes to `init`. Public so
/// that native tests and benchmarks construct plugins the way the host does.
pub fn configure<P: Plugin>(config: &str) -> Result<P, String> {
    let mut plugin: P = sluice_guest_common::read_config(config, "plugin")?;
    plugin.setup()?;
    Ok(plugin)
}

/// Export a [`Plugin`] type as the component's `init` and `process`.
#[macro_export]
#[rustfmt::skip] // rustfmt does not settle on this body (it re-indents it every run)
macro_rules! export_plugin {
    ($plugin:ty) => {
        const _: () = {
            #[allow(dead_code)]
            struct SluiceExport;

            ::std::thread_local! {
                static PLUGIN: $crate::__common::Instance<$plugin> = const { $crate::__common::Instance::new() };
            }

            impl $crate::__bindings::Guest for SluiceExport {
                fn init(config: ::std::string::String) -> ::std::result::Result<(), ::std::string::String> {
                    PLUGIN.with(|one| one.init($crate::configure::<$plugin>(&config)))
                }

                fn process(batch: $crate::__contract::Batch) -> $crate::__contract::Outcomes {
                    PLUGIN.with(|one| one.with(|plugin| $crate::__contract::process(plugin, batch)))
                }
            }

            // Exports exist only in the component: natively (tests,
            // benchmarks) several plugins link into one binary.
            #[cfg(target_arch = "wasm32")]
            $crate::__bindings::__export_plugin_world!(SluiceExport with_types_in $crate::__bindings);
        };
    };
}

impl Outcome {
    /// One event.
    pub fn emit(event: Event) -> Outcome {
        Outcome::Emit(vec![event])
    }

    /// One event whose body is `value` (which should be a JSON object).
    pub fn emit_json(value: &serde_json::Value) -> Outcome {
        Outcome::emit(Event::json(value))
    }

    /// `record` goes on unchanged, with the id and timestamp an earlier
    /// stage set: [`Outcome::Keep`]. To set them, build the variant:
    /// `Outcome::Keep { id: Some(id), timestamp: Some(ns) }`.
    pub fn keep(record: &Record<'_>) -> Outcome {
        // The record is named for the reader; the payload stays where it is.
        let _ = record;
        Outcome::Keep { id: None, timestamp: None }
    }

    /// This outcome with [`Outcome::Keep`] spelled out as the event it
    /// stands for (`record`'s payload copied as the body): for code that
    /// runs plugins natively and for the 0.1 contract, which has no kept
    /// events.
    pub fn resolve(self, record: &Record<'_>) -> Outcome {
        match self {
            Outcome::Keep { id, timestamp } => Outcome::emit(Event {
                id: id.or_else(|| record.event_id.map(str::to_owned)),
                timestamp: timestamp.or(record.timestamp),
                body: record.bytes().into_owned(),
                sinks: Vec::new(),
            }),
            other => other,
        }
    }

    /// Filter the record out on purpose. Keep `reason` short and stable: it
    /// labels a metric.
    pub fn drop(reason: impl Into<String>) -> Outcome {
        Outcome::Drop(reason.into())
    }

    /// Send the record to the quarantine. Name the field and value at fault.
    pub fn reject(reason: impl Into<String>) -> Outcome {
        Outcome::Reject(reason.into())
    }
}

impl Event {
    /// An event with `body` as its JSON bytes, no id and no timestamp.
    pub fn new(body: Vec<u8>) -> Event {
        Event { id: None, timestamp: None, body, sinks: Vec::new() }
    }

    /// An event whose body is a copy of `record`'s payload, with the id and
    /// timestamp an earlier stage set: for a record that becomes several
    /// events, one of them itself. An event whose body is byte for byte its
    /// record's payload crosses back to the host as *kept* (`wit/plugin.wit`,
    /// flag bit 2): its bytes are not copied out of the plugin nor checked
    /// by the host again. A record that becomes one event, itself, should
    /// return [`Outcome::Keep`] instead, which copies nothing at all
    /// (or, to route it, `Outcome::emit(Event::keep(record).to_sinks(…))`:
    /// still kept across the boundary).
    pub fn keep(record: &Record<'_>) -> Event {
        Event {
            id: record.event_id.map(str::to_owned),
            timestamp: record.timestamp,
            body: record.bytes().into_owned(),
            sinks: Vec::new(),
        }
    }

    /// An event whose body is `value` serialized.
    pub fn json(value: &serde_json::Value) -> Event {
        // Serializing a `Value` to a Vec cannot fail.
        Event::new(serde_json::to_vec(value).unwrap_or_default())
    }

    pub fn with_id(mut self, id: impl Into<String>) -> Event {
        self.id = Some(id.into());
        self
    }

    pub fn with_timestamp(mut self, nanos: i64) -> Event {
        self.timestamp = Some(nanos);
        self
    }

    /// This event goes to these sinks only (their `[[sinks]]` names), not
    /// where the config's `[[routes]]` would send it: for a plugin that
    /// knows more than a field test (a lookup, a parse). A later stage of
    /// a chain may name others; when none does, these stand.
    pub fn to_sinks<S: Into<String>>(mut self, sinks: impl IntoIterator<Item = S>) -> Event {
        self.sinks = sinks.into_iter().map(Into::into).collect();
        self
    }
}

impl<'a> Record<'a> {
    /// A record as a file source would hand it over, borrowing `line`: for
    /// tests and native callers. The `with_` methods set the rest.
    pub fn from_line(line: &'a (impl AsRef<[u8]> + ?Sized)) -> Record<'a> {
        Record {
            payload: line.as_ref(),
            position: Position { source: "file", partition: "<test>#0", offset: 0 },
            ..Record::default()
        }
    }

    /// This record with the event id an earlier stage set.
    pub fn with_event_id(self, id: &'a str) -> Record<'a> {
        Record { event_id: Some(id), ..self }
    }

    /// This record with the event time an earlier stage set.
    pub fn with_timestamp(self, nanos: i64) -> Record<'a> {
        Record { timestamp: Some(nanos), ..self }
    }

    /// This record with a Kafka key.
    pub fn with_key(self, key: &'a [u8]) -> Record<'a> {
        Record { key: Some(key), ..self }
    }

    /// This record with headers ([`Headers::list`]).
    pub fn with_headers(self, headers: Headers<'a>) -> Record<'a> {
        Record { headers, ..self }
    }

    /// This record at `position`.
    pub fn at(self, position: Position<'a>) -> Record<'a> {
        Record { position, ..self }
    }

    /// This record with another payload (what an earlier stage emitted),
    /// the rest kept: for native code that chains plugins by hand.
    pub fn with_payload(self, payload: &'a [u8]) -> Record<'a> {
        Record { payload, on_demand: None, ..self }
    }

    /// The payload as UTF-8 text without its line end, or a rejection that
    /// names the first invalid byte.
    pub fn text(&self) -> Result<&'a str, Outcome> {
        match std::str::from_utf8(self.payload) {
            Ok(s) => Ok(s.trim_end_matches(['\r', '\n'])),
            Err(e) => {
                Err(Outcome::reject(format!("payload is not valid UTF-8 (invalid byte at offset {})", e.valid_up_to())))
            }
        }
    }

    /// The payload parsed as a JSON object, or a rejection saying why not.
    pub fn json_object(&self) -> Result<serde_json::Map<String, serde_json::Value>, Outcome> {
        match serde_json::from_slice::<serde_json::Value>(self.payload) {
            Ok(serde_json::Value::Object(map)) => Ok(map),
            Ok(other) => {
                Err(Outcome::reject(format!("payload is JSON but not an object (it is {})", json::kind(&other))))
            }
            Err(e) => Err(Outcome::reject(format!("payload is not valid JSON: {e}"))),
        }
    }

    /// The header named `name`, if present (the first one, when repeated).
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        self.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }
}

/// Wall-clock time from the host, in nanoseconds since the Unix epoch;
/// natively, the system's, or what [`testing::pin_now`] pinned.
pub fn now() -> i64 {
    #[cfg(target_arch = "wasm32")]
    {
        __contract::now()
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        testing::pinned_now().unwrap_or_else(sluice_guest_common::native_now)
    }
}

/// Log through the host, which tags the line with the plugin's name.
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    {
        __contract::log(level, message)
    }
    #[cfg(not(target_arch = "wasm32"))]
    sluice_guest_common::native_log(level, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Echo {
        #[serde(default)]
        prefix: String,
    }

    impl Plugin for Echo {
        fn setup(&mut self) -> Result<(), String> {
            if self.prefix.len() > 3 {
                return Err(format!("prefix: at most 3 characters, got {:?}", self.prefix));
            }
            Ok(())
        }
        fn process(&mut self, record: &Record) -> Outcome {
            match record.text() {
                Ok(t) => Outcome::emit_json(&serde_json::json!({ "line": format!("{}{t}", self.prefix) })),
                Err(r) => r,
            }
        }
    }

    #[test]
    fn configure_names_the_unknown_key() {
        let err = configure::<Echo>(r#"{"prefx":"a"}"#).err().unwrap_or_default();
        assert!(err.contains("unknown field `prefx`"), "{err}");
    }

    #[test]
    fn configure_names_the_key_of_a_wrong_type_and_no_json_position() {
        let err = configure::<Echo>(r#"{"prefix":7}"#).err().unwrap_or_default();
        assert!(err.starts_with("invalid plugin config: prefix: invalid type: integer `7`"), "{err}");
        assert!(!err.contains("line 1 column"), "{err}");
    }

    #[test]
    fn configure_runs_setup_and_reports_its_refusal() {
        let err = configure::<Echo>(r#"{"prefix":"abcd"}"#).err().unwrap_or_default();
        assert!(err.starts_with("prefix:"), "{err}");
        assert!(configure::<Echo>("").is_ok(), "an empty config means defaults");
    }

    #[test]
    fn text_strips_line_ends_and_rejects_invalid_utf8() {
        assert_eq!(Record::from_line("a\r\n").text().ok(), Some("a"));
        match Record::from_line(&[b'o', b'k', 0xff]).text() {
            Err(Outcome::Reject(reason)) => assert!(reason.contains("offset 2"), "{reason}"),
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    #[test]
    fn process_batch_gives_one_outcome_per_record() {
        let mut p = configure::<Echo>(r#"{"prefix":">"}"#).unwrap_or_else(|e| panic!("{e}"));
        let out = p.process_batch(&[Record::from_line("x"), Record::from_line(&[0xc3])]);
        assert_eq!(out.len(), 2);
        match &out[0] {
            Outcome::Emit(events) => assert_eq!(events[0].body, br#"{"line":">x"}"#),
            other => panic!("{other:?}"),
        }
        assert!(matches!(out[1], Outcome::Reject(_)));
    }
}
