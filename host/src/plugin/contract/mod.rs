//! The two versions of the plugin contract the host speaks, told apart at
//! load by type-checking the component's exports:
//!
//! - `v01`: `sluice:plugin@0.1.0` (`wit/v0.1/plugin.wit`), a batch as
//!   `list<record>`;
//! - `v02`: `sluice:plugin@0.2.0` (`wit/plugin.wit`), a batch as a few
//!   buffers (`sluice-abi`).
//!
//! - `classifier`: the second world of 0.2 (`wit/classifier.wit`), a
//!   plugin that reads an HTTP sink's responses instead of records.
//!
//! Both parse versions lift into the host's own `Outcome`s; the output contract that
//! applies to both is `output_rules`. The generated bindings stay private:
//! the rest of the host speaks `types.rs`.

use std::fmt;

use wasmtime::Store;
use wasmtime::component::{InstancePre, Linker};

use super::sandbox::StoreState;
use crate::plugin::inputs::Inputs;
use crate::record::Outcome;
use crate::telemetry::repeats::{self, REPEATS, Reasons, say};

/// A contract version, as `sluice plugin inspect` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contract {
    V01,
    V02,
    /// `world classifier` of 0.2: reads a sink's answers, never records.
    Classifier,
}

impl Contract {
    /// The package version alone: `0.2.0`.
    pub(crate) fn version(&self) -> &'static str {
        match self {
            Contract::V01 => "0.1.0",
            Contract::V02 | Contract::Classifier => "0.2.0",
        }
    }

    /// The world within the package: `plugin` or `classifier`.
    pub(crate) fn world(&self) -> &'static str {
        match self {
            Contract::V01 | Contract::V02 => "plugin",
            Contract::Classifier => "classifier",
        }
    }
}

impl fmt::Display for Contract {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Contract::Classifier => write!(f, "sluice:plugin@{} (classifier)", self.version()),
            _ => write!(f, "sluice:plugin@{}", self.version()),
        }
    }
}

/// Link the imports of both versions (log, clock) into `linker`.
pub(super) fn add_to_linker(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    v01::add_to_linker(linker)?;
    v02::add_to_linker(linker)
}

/// A component linked and type-checked against one version.
#[derive(Clone)]
pub(super) enum Pre {
    V01(v01::BindingsPre<StoreState>),
    V02(v02::BindingsPre<StoreState>),
    Classifier(classifier::BindingsPre<StoreState>),
}

impl Pre {
    /// Which contract the component's exports match: 0.2 first, then 0.1,
    /// then the classifier world; none is an error naming what each check
    /// said.
    pub(super) fn detect(instance_pre: InstancePre<StoreState>) -> Result<Pre, String> {
        let e02 = match v02::BindingsPre::new(instance_pre.clone()) {
            Ok(pre) => return Ok(Pre::V02(pre)),
            Err(e) => e,
        };
        let e01 = match v01::BindingsPre::new(instance_pre.clone()) {
            Ok(pre) => return Ok(Pre::V01(pre)),
            Err(e) => e,
        };
        match classifier::BindingsPre::new(instance_pre) {
            Ok(pre) => Ok(Pre::Classifier(pre)),
            Err(ec) => Err(format!(
                "not a sluice plugin: its exports match neither sluice:plugin@0.2.0 ({e02:#}) nor sluice:plugin@0.1.0 ({e01:#}) nor a classifier ({ec:#})"
            )),
        }
    }

    pub(super) fn contract(&self) -> Contract {
        match self {
            Pre::V01(_) => Contract::V01,
            Pre::V02(_) => Contract::V02,
            Pre::Classifier(_) => Contract::Classifier,
        }
    }

    pub(super) fn instantiate(&self, store: &mut Store<StoreState>) -> wasmtime::Result<Bound> {
        Ok(match self {
            Pre::V01(pre) => Bound::V01(pre.instantiate(store)?),
            Pre::V02(pre) => Bound::V02(pre.instantiate(store)?, v02::Packer::default()),
            Pre::Classifier(pre) => Bound::Classifier(pre.instantiate(store)?),
        })
    }
}

/// An instantiated plugin, with what its version keeps between calls.
pub(super) enum Bound {
    V01(v01::Bindings),
    V02(v02::Bindings, v02::Packer),
    Classifier(classifier::Bindings),
}

/// What a `process` call returned before the output rules: one outcome per
/// record (or the rule its outcome broke while being read, such as an id
/// that is not UTF-8), or why the value is not a set of outcomes for this
/// batch at all.
pub(super) enum Returned {
    Outcomes(Vec<Result<Outcome, String>>),
    WrongCount { outcomes: usize },
    Malformed(String),
}

impl Bound {
    pub(super) fn call_init(
        &self,
        store: &mut Store<StoreState>,
        config: &str,
    ) -> wasmtime::Result<Result<(), String>> {
        match self {
            Bound::V01(b) => b.call_init(store, config),
            Bound::V02(b, _) => b.call_init(store, config),
            Bound::Classifier(b) => b.call_init(store, config),
        }
    }

    pub(super) fn call_process(
        &mut self,
        store: &mut Store<StoreState>,
        batch: Inputs<'_>,
    ) -> wasmtime::Result<Returned> {
        match self {
            Bound::V01(b) => v01::process(b, store, batch),
            Bound::V02(b, packer) => v02::process(b, packer, store, batch),
            // The chain refuses a classifier at load (`build_chain`); this
            // is only a guard.
            Bound::Classifier(_) => Err(wasmtime::format_err!("a classifier plugin has no process")),
        }
    }

    pub(super) fn call_classify(
        &self,
        store: &mut Store<StoreState>,
        request: &crate::plugin::classified::Asked<'_>,
        response: &crate::plugin::classified::Answered<'_>,
    ) -> wasmtime::Result<crate::plugin::classified::Reply> {
        match self {
            Bound::Classifier(b) => classifier::classify(b, store, request, response),
            Bound::V01(_) | Bound::V02(..) => Err(wasmtime::format_err!("a parse plugin has no classify")),
        }
    }
}

/// Severity of a plugin's log line, the same in every version.
#[derive(Debug, Clone, Copy)]
pub(super) enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// One log line from a plugin, within the batch's budget
/// (`max_log_lines_per_batch`); past it, the line is only counted, and the
/// instance reports the count once the call returns.
pub(super) fn log(state: &mut StoreState, level: Level, message: &str) {
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
                    wit::Level::Trace => super::Level::Trace,
                    wit::Level::Debug => super::Level::Debug,
                    wit::Level::Info => super::Level::Info,
                    wit::Level::Warn => super::Level::Warn,
                    wit::Level::Error => super::Level::Error,
                };
                super::log(self, level, &message)
            }
        }

        impl clock::Host for StoreState {
            fn now(&mut self) -> i64 {
                self.fixed_now.unwrap_or_else(super::now)
            }
        }

        impl wit::Host for StoreState {}
    };
}
use host_imports;

mod classifier;
mod v01;
mod v02;

/// The host's clock, for both versions.
pub(super) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
