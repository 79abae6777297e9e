//! What can go wrong with a plugin: loading it ([`PluginError`]), and one
//! call into it ([`Fault`]), which a record answers for rather than the run.

use std::fmt;
use std::path::PathBuf;

/// Why a call into a plugin did not return a usable answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Ran past the per-batch time limit.
    Timeout {
        /// The plugin's `time_limit`, in milliseconds.
        limit_ms: u128,
    },
    /// Tried to grow its memory past the limit.
    OutOfMemory {
        /// The size it asked for, in bytes.
        wanted: usize,
        /// The plugin's `memory` limit, in bytes.
        limit: usize,
    },
    /// Any other trap (a panic, an out-of-bounds access, stack exhaustion);
    /// with what the guest wrote to stderr just before, when anything.
    Trap {
        /// wasmtime's description of the trap.
        trap: String,
        /// The guest's last stderr lines, bounded; empty when it wrote none.
        stderr: String,
    },
    /// Returned a number of outcomes different from the number of records.
    WrongCount {
        /// Records in the batch.
        records: usize,
        /// Outcomes returned.
        outcomes: usize,
    },
    /// Returned 0.2 outcome buffers that break the layout rules
    /// (`wit/plugin.wit`): a slice outside its buffer, overlapping slices,
    /// events out of order, an unknown kind or flag.
    Malformed {
        /// The rule broken, with the outcome's index.
        rule: String,
    },
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Timeout { limit_ms } => write!(f, "timeout: ran past the time limit of {limit_ms} ms"),
            Fault::OutOfMemory { wanted, limit } => {
                write!(f, "out of memory: tried to grow memory to {wanted} bytes, limit {limit} bytes")
            }
            Fault::Trap { trap, stderr } if stderr.is_empty() => write!(f, "trap: {trap}"),
            Fault::Trap { trap, stderr } => write!(f, "trap: {trap}; plugin stderr: {stderr}"),
            Fault::WrongCount { records, outcomes } => {
                write!(f, "wrong number of outcomes: {outcomes} for {records} records")
            }
            Fault::Malformed { rule } => write!(f, "malformed outcomes: {rule}"),
        }
    }
}

/// Why a plugin could not be loaded or instantiated. At the start (or a
/// reload) it stops before a record is read; during a run (a fresh
/// instance after a trap) it stops the run before that batch is
/// committed, so the batch is read again. Neither costs a record.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// wasmtime's engine or its epoch thread could not be set up.
    #[error("cannot set up the WebAssembly engine: {0}")]
    Engine(String),
    /// The plugin's file cannot be read.
    #[error("cannot read plugin {}: {source}", path.display())]
    Read {
        /// The configured `path`.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The file is not a component wasmtime can compile.
    #[error("plugin {} is not a valid WebAssembly component: {message}", path.display())]
    Compile {
        /// The configured `path`.
        path: PathBuf,
        /// wasmtime's reason.
        message: String,
    },
    /// The component imports something the host does not offer (another
    /// WIT version, a WASI interface sluice withholds).
    #[error("plugin {plugin} cannot be linked: {message}")]
    Link {
        /// The plugin's name in the chain.
        plugin: String,
        /// wasmtime's reason.
        message: String,
    },
    /// Instantiation failed (a start function trapped, a limit was hit).
    #[error("plugin {plugin} cannot be instantiated: {message}")]
    Instantiate {
        /// The plugin's name in the chain.
        plugin: String,
        /// wasmtime's reason.
        message: String,
    },
    /// The plugin's `init` returned an error for its `[plugins.config]`.
    #[error("plugin {plugin} refused its config: {message}")]
    Config {
        /// The plugin's name in the chain.
        plugin: String,
        /// The plugin's own words.
        message: String,
    },
    /// The plugin's `init` trapped or ran past a limit.
    #[error("plugin {plugin} faulted in init: {fault}")]
    Init {
        /// The plugin's name in the chain.
        plugin: String,
        /// What went wrong.
        fault: Fault,
    },
}
