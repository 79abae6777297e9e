//! The names the delivery audit numbers once per store (`audit`): which
//! sink and plugin versions delivered (`Context`), and from which topic or
//! file (`Origin`). Plain data, so the store can hold the table of them
//! without importing the audit that fills it.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// What delivered a batch: the sink and the chain, and whether it was a
/// run or a quarantine replay.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Context {
    /// The sink's name.
    pub sink: String,
    /// `name@blake3-hex` of each plugin, in chain order.
    pub plugins: Vec<String>,
    /// `run` or `replay`.
    pub via: String,
}

/// Where records come from: a topic or a file.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct Origin {
    /// `kafka` or `file`.
    pub kind: String,
    pub name: String,
}

/// The interned contexts and origins, loaded from `meta` at first use.
#[derive(Default)]
pub(crate) struct Book {
    pub(crate) loaded: bool,
    pub(crate) contexts: HashMap<Context, u32>,
    pub(crate) origins: HashMap<Origin, u32>,
}
