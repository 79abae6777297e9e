//! What can go wrong with a plugin: loading it ([`PluginError`]), and one
//! call into it ([`Fault`]), which a record answers for rather than the run.

use std::fmt;
use std::path::PathBuf;

/// Why a call into a plugin did not return a usable answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Ran past the per-batch time limit.
    Timeout { limit_ms: u128 },
    /// Tried to grow its memory past the limit.
    OutOfMemory { wanted: usize, limit: usize },
    /// Any other trap (a panic, an out-of-bounds access, stack exhaustion);
    /// with what the guest wrote to stderr just before, when anything.
    Trap { trap: String, stderr: String },
    /// Returned a number of outcomes different from the number of records.
    WrongCount { records: usize, outcomes: usize },
    /// Returned 0.2 outcome buffers that break the layout rules
    /// (`wit/plugin.wit`): a slice outside its buffer, overlapping slices,
    /// events out of order, an unknown kind or flag.
    Malformed { rule: String },
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

#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("cannot set up the WebAssembly engine: {0}")]
    Engine(String),
    #[error("cannot read plugin {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("plugin {} is not a valid WebAssembly component: {message}", path.display())]
    Compile { path: PathBuf, message: String },
    #[error("plugin {plugin} cannot be linked: {message}")]
    Link { plugin: String, message: String },
    #[error("plugin {plugin} cannot be instantiated: {message}")]
    Instantiate { plugin: String, message: String },
    #[error("plugin {plugin} refused its config: {message}")]
    Config { plugin: String, message: String },
    #[error("plugin {plugin} faulted in init: {fault}")]
    Init { plugin: String, fault: Fault },
}
