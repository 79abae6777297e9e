//! Event ids as the dedup window keys them: a fixed-width digest, scoped.
//!
//! Ids identify records; positions track progress (DESIGN, "Event ids").
//! The key is an 8-byte scope followed by 16 bytes of the id's blake3
//! digest (a collision needs about 2^64 ids). The scope keeps a Kafka
//! partition's ids apart from the others', so that its dedup state can
//! follow the partition to another instance (a scope is a contiguous key
//! range); a file pipeline's files share one scope, since files never move.
//! Under `dedup.scope = "topic"` all partitions of a topic share one.

use crate::plugin::Position;

/// The key an id is stored under: its scope, then its digest.
pub type IdDigest = [u8; 24];

/// Which ids see each other: one per Kafka partition, one for a whole file
/// pipeline.
pub type Scope = [u8; 8];
pub const PIPELINE_SCOPE: Scope = [0; 8];

/// The scope of a partition (`topic/partition`).
pub fn scope(partition: &str) -> Scope {
    let h = blake3::hash(partition.as_bytes());
    let mut s = [0u8; 8];
    s.copy_from_slice(&h.as_bytes()[..8]);
    if s == PIPELINE_SCOPE { [1; 8] } else { s }
}

pub fn digest(scope: &Scope, id: &str) -> IdDigest {
    let h = blake3::hash(id.as_bytes());
    let mut d = [0u8; 24];
    d[..8].copy_from_slice(scope);
    d[8..].copy_from_slice(&h.as_bytes()[..16]);
    d
}

/// The scope of every partition of `topic` (`dedup.scope = "topic"`).
/// Never a partition's: a partition's name has a `/`, a topic's never.
pub fn topic_scope(topic: &str) -> Scope {
    scope(topic)
}

/// Which ids a record's events are deduplicated against: its own
/// partition's for Kafka (ids per partition, DESIGN), or its topic's when
/// `topic_wide`; the pipeline's for files and for anything else.
pub fn scope_of(position: &Position, topic_wide: bool) -> Scope {
    match position {
        Position::Kafka { topic, .. } if topic_wide => topic_scope(topic),
        Position::Kafka { topic, partition, .. } => scope(&format!("{topic}/{partition}")),
        Position::File { .. } => PIPELINE_SCOPE,
    }
}
