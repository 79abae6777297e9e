//! What both Rust guest SDKs share. A component is one world, a parse
//! plugin (`sluice-guest`) or a classifier (`sluice-classifier`), so each
//! SDK generates its own bindings; this crate holds none. It holds what
//! both do the same way around their bindings: reading the config `init`
//! receives, the one instance `init` makes, the log levels, and what the
//! host's clock and log are when a plugin runs natively (unit tests,
//! benchmarks).

use std::cell::RefCell;

/// Severity of a log line sent to the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// `level` as a world's generated `level` enum: `lower_level!(level,
/// bindings::sluice::plugin::types::Level)`. Each world generates its own
/// type for the same WIT enum.
#[macro_export]
macro_rules! lower_level {
    ($level:expr, $($wit:ident)::+) => {
        match $level {
            $crate::Level::Trace => $($wit)::+::Trace,
            $crate::Level::Debug => $($wit)::+::Debug,
            $crate::Level::Info => $($wit)::+::Info,
            $crate::Level::Warn => $($wit)::+::Warn,
            $crate::Level::Error => $($wit)::+::Error,
        }
    };
}

/// A config from the JSON text the host passes to `init` (empty reads as
/// `{}`), or the refusal an operator sees: `invalid <what> config:
/// <key>: <why>`, naming the key at fault through serde_path_to_error.
pub fn read_config<T: serde::de::DeserializeOwned>(config: &str, what: &str) -> Result<T, String> {
    let config = if config.trim().is_empty() { "{}" } else { config };
    let de = &mut serde_json::Deserializer::from_str(config);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let why = without_position(e.inner());
        match e.path().to_string().as_str() {
            "." => format!("invalid {what} config: {why}"),
            key => format!("invalid {what} config: {key}: {why}"),
        }
    })
}

/// serde_json's message without its "at line 1 column 83": the position
/// is in the one-line JSON copy the host made of the operator's table, so
/// it points nowhere the operator can look; the key path does.
pub fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(at) if e.line() > 0 => text[..at].to_string(),
        _ => text,
    }
}

/// The one instance of a plugin or classifier a component holds: made by
/// `init`, used by every later call. Each SDK's export macro keeps one in
/// a `thread_local!` (a component has one thread).
pub struct Instance<T>(RefCell<Option<T>>);

impl<T> Instance<T> {
    pub const fn new() -> Instance<T> {
        Instance(RefCell::new(None))
    }

    /// Keep what `init` made, or pass its refusal on.
    pub fn init(&self, made: Result<T, String>) -> Result<(), String> {
        *self.0.borrow_mut() = Some(made?);
        Ok(())
    }

    /// `call` with the instance, `None` before a successful `init`.
    pub fn with<R>(&self, call: impl FnOnce(Option<&mut T>) -> R) -> R {
        call(self.0.borrow_mut().as_mut())
    }
}

impl<T> Default for Instance<T> {
    fn default() -> Self {
        Instance::new()
    }
}

/// The system clock, ns since the epoch: the host's clock natively.
pub fn native_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

/// A log line on stderr: the host's log natively.
pub fn native_log(level: Level, message: &str) {
    eprintln!("[{level:?}] {message}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Cfg {
        #[serde(default)]
        #[allow(dead_code)]
        limit: u32,
    }

    #[test]
    fn a_config_refusal_names_the_key_and_no_json_position() {
        assert!(read_config::<Cfg>("", "plugin").is_ok(), "empty is {{}}");
        let e = read_config::<Cfg>(r#"{"limt": 1}"#, "plugin").err().unwrap_or_default();
        assert!(e.starts_with("invalid plugin config: ") && e.contains("unknown field `limt`"), "{e}");
        assert!(!e.contains("line 1"), "{e}");
        let e = read_config::<Cfg>(r#"{"limit": "x"}"#, "classifier").err().unwrap_or_default();
        assert!(e.starts_with("invalid classifier config: limit: invalid type"), "{e}");
    }

    #[test]
    fn an_instance_is_there_only_after_a_good_init() {
        let one: Instance<u32> = Instance::new();
        assert_eq!(one.with(|v| v.copied()), None);
        assert_eq!(one.init(Err("refused".into())), Err("refused".into()));
        assert_eq!(one.with(|v| v.copied()), None);
        assert_eq!(one.init(Ok(7)), Ok(()));
        assert_eq!(one.with(|v| v.map(|n| *n + 1)), Some(8));
    }
}
