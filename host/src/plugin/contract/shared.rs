//! What every version of the plugin contract shares on the host's side:
//! the log and clock imports (one macro over each version's generated
//! traits) and the shape of a `process` call's result before the output
//! rules. A leaf of `contract/`: the versions import it, it imports none
//! of them.

use super::super::sandbox::StoreState;
use crate::record::Outcome;
use crate::telemetry::repeats::{self, REPEATS, Reasons, say};

/// What a `process` call returned before the output rules: one outcome per
/// record (or the rule its outcome broke while being read, such as an id
/// that is not UTF-8), or why the value is not a set of outcomes for this
/// batch at all.
pub(crate) enum Returned {
    Outcomes(Vec<Result<Outcome, String>>),
    WrongCount { outcomes: usize },
    Malformed(String),
}

/// Severity of a plugin's log line, the same in every version.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// One log line from a plugin, within the batch's budget
/// (`max_log_lines_per_batch`); past it, the line is only counted, and the
/// instance reports the count once the call returns.
pub(crate) fn log(state: &mut StoreState, level: Level, message: &str) {
    if !state.logs.admit() {
        return;
    }
    let plugin = &*state.plugin_name;
    // What a plugin says while it sets up is said again by every instance
    // of it (a worker's, a case's, a rebuild after a trap) with the same
    // words: said once per process, and not counted as repeats either, or
    // the count's line would say it a second time.
    if state.helpers.initializing && !said_first_at_init(plugin, message) {
        return;
    }
    // Lines a person reads (info and up) are said once per message and
    // then counted (`telemetry::repeats`): a plugin that logs each record
    // is not a line per record. Trace and debug, asked for, are said all.
    let repeated = |level| {
        let (said, due) =
            REPEATS.occurred(plugin, level, &[("plugin log", message)], std::time::Instant::now(), Reasons::FromData);
        say(&due);
        said.first().copied().unwrap_or(true)
    };
    match level {
        Level::Trace => tracing::trace!(plugin, "{message}"),
        Level::Debug => tracing::debug!(plugin, "{message}"),
        Level::Info if tracing::enabled!(tracing::Level::INFO) && repeated(repeats::Level::Info) => {
            tracing::info!(plugin, "{message}")
        }
        Level::Warn if tracing::enabled!(tracing::Level::WARN) && repeated(repeats::Level::Warn) => {
            tracing::warn!(plugin, "{message}")
        }
        Level::Error if tracing::enabled!(tracing::Level::ERROR) && repeated(repeats::Level::Error) => {
            tracing::error!(plugin, "{message}")
        }
        Level::Info | Level::Warn | Level::Error => {}
    }
}

/// Whether this is the first time `plugin` says `message` while it sets
/// up, in this process. Bounded: past 4,096 distinct lines (a plugin that
/// puts a counter in its setup message), each is said.
fn said_first_at_init(plugin: &str, message: &str) -> bool {
    use std::collections::HashSet;
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    static SAID: std::sync::Mutex<Option<HashSet<u64>>> = std::sync::Mutex::new(None);
    let key = BuildHasherDefault::<DefaultHasher>::default().hash_one((plugin, message));
    let mut said = SAID.lock().unwrap_or_else(|p| p.into_inner());
    let said = said.get_or_insert_with(HashSet::new);
    said.len() >= 4096 || said.insert(key)
}

/// The log and clock imports of one version, over its generated traits
/// (`log`, `clock`, `wit` in scope where it is invoked): the same in every
/// version, while the traits are each version's own.
macro_rules! host_imports {
    () => {
        impl log::Host for StoreState {
            fn log(&mut self, level: wit::Level, message: String) {
                let level = match level {
                    wit::Level::Trace => crate::plugin::contract::shared::Level::Trace,
                    wit::Level::Debug => crate::plugin::contract::shared::Level::Debug,
                    wit::Level::Info => crate::plugin::contract::shared::Level::Info,
                    wit::Level::Warn => crate::plugin::contract::shared::Level::Warn,
                    wit::Level::Error => crate::plugin::contract::shared::Level::Error,
                };
                crate::plugin::contract::shared::log(self, level, &message)
            }
        }

        impl clock::Host for StoreState {
            fn now(&mut self) -> i64 {
                self.fixed_now.unwrap_or_else(crate::plugin::contract::shared::now)
            }
        }

        impl wit::Host for StoreState {}
    };
}
pub(super) use host_imports;

/// The host's clock, for both versions.
pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
