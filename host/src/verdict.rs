//! What the plugins said of each source record: its events, or why it has
//! none and which plugin said so. Plain data between the plugin chain and
//! the custody decisions, so neither depends on the other.

use std::fmt;

use crate::record::Event;

/// A plugin's identity: its name and the blake3 digest of its bytes. Stored
/// with every quarantined record as the version that processed it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PluginId {
    /// Its name in the chain.
    pub name: String,
    /// The blake3 of the component's bytes.
    pub digest: blake3::Hash,
}

impl fmt::Display for PluginId {
    /// `name@` and the first 12 hex digits of the digest; the full digest
    /// is in quarantine entries and `sluice plugin inspect`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hex = self.digest.to_hex();
        write!(f, "{}@{}", self.name, &hex[..12])
    }
}

/// What became of one source record after the whole chain: its events
/// (`E`: the events themselves in a [`Verdict`], their count in a
/// [`Judged`]), or why it has none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement<E> {
    /// Every body here is one checked JSON value (the output contract's
    /// object, or with no plugins the source's JSON, or its text quoted as
    /// a JSON string): a sink copies it through without parsing it again.
    Emit(E),
    /// A plugin dropped the record on purpose: finished, not delivered.
    Drop {
        /// The plugin that said so.
        plugin: PluginId,
        /// Its reason, counted.
        reason: String,
    },
    /// A plugin (or the host, for a broken contract) refused the record:
    /// it is quarantined.
    Reject {
        /// The plugin that said so.
        plugin: PluginId,
        /// Its reason, stored with the entry.
        reason: String,
    },
}

/// One record's judgement owning its events: for the views that compare
/// or show verdicts (`shadow`, `sluice test`).
pub type Verdict = Judgement<Vec<Event>>;

/// One record's judgement in a [`Verdicts`]: `Emit(n)` is the next `n`
/// events of [`Verdicts::events`].
pub(crate) type Judged = Judgement<usize>;

/// What the chain said of a batch: one [`Judged`] per source record, and
/// the events of every emitting record in one list, in record order. One
/// allocation per batch where a `Vec<Verdict>` would make one per record.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Verdicts {
    /// One per source record, in order.
    pub judged: Vec<Judged>,
    /// The events of `Judged::Emit(n)` records, `n` each, in record order.
    pub events: Vec<Event>,
}

impl Verdicts {
    /// One [`Verdict`] per record, each owning its events: for the views
    /// that compare or show verdicts (`shadow`, `sluice test`), not the
    /// hot path.
    pub(crate) fn into_vec(self) -> Vec<Verdict> {
        let mut events = self.events.into_iter();
        self.judged
            .into_iter()
            .map(|j| match j {
                Judged::Emit(n) => Verdict::Emit(events.by_ref().take(n).collect()),
                Judged::Drop { plugin, reason } => Verdict::Drop { plugin, reason },
                Judged::Reject { plugin, reason } => Verdict::Reject { plugin, reason },
            })
            .collect()
    }
}
