//! Event ids as the dedup window keys them: a fixed-width digest, scoped.
//!
//! Ids identify records; positions track progress (DESIGN, "Event ids").
//! The key is an 8-byte scope followed by 16 bytes of the id's blake3
//! digest (a collision needs about 2^64 ids). The scope keeps a Kafka
//! partition's ids apart from the others', so that its dedup state can
//! follow the partition to another instance (a scope is a contiguous key
//! range); a file pipeline's files share one scope, since files never move.
//! Under `dedup.scope = "topic"` all partitions of a topic share one.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use crate::record::Position;

/// The key an id is stored under: its scope, then its digest.
pub type IdDigest = [u8; 24];

/// Which ids see each other: one per Kafka partition, one for a whole file
/// pipeline.
pub(crate) type Scope = [u8; 8];
/// The scope of a file pipeline: all its files share one window.
pub const PIPELINE_SCOPE: Scope = [0; 8];

/// The scope of a partition (`topic/partition`).
pub fn scope(partition: &str) -> Scope {
    let h = blake3::hash(partition.as_bytes());
    let mut s = [0u8; 8];
    s.copy_from_slice(&h.as_bytes()[..8]);
    if s == PIPELINE_SCOPE { [1; 8] } else { s }
}

/// The window's key for `id` in `scope`: the scope, then 16 bytes of the
/// id's blake3, so one scope's ids sort together.
pub fn digest(scope: &Scope, id: &str) -> IdDigest {
    let h = blake3::hash(id.as_bytes());
    let mut d = [0u8; 24];
    d[..8].copy_from_slice(scope);
    d[8..].copy_from_slice(&h.as_bytes()[..16]);
    d
}

/// The scope of every partition of `topic` (`dedup.scope = "topic"`).
/// Never a partition's: a partition's name has a `/`, a topic's never.
pub(crate) fn topic_scope(topic: &str) -> Scope {
    scope(topic)
}

/// Which ids a record's events are deduplicated against: its own
/// partition's for Kafka (ids per partition, DESIGN), or its topic's when
/// `topic_wide`; the pipeline's for files and for anything else.
pub(crate) fn scope_of(position: &Position, topic_wide: bool) -> Scope {
    match position {
        Position::Kafka { topic, .. } if topic_wide => topic_scope(topic),
        Position::Kafka { topic, partition, .. } => scope(&format!("{topic}/{partition}")),
        Position::File { .. } => PIPELINE_SCOPE,
    }
}

/// A set of digests, hashed by eight of their digest bytes: a blake3
/// output is uniform already, so SipHash over all 24 bytes (the default)
/// would be per-record work for nothing. The batch's repeat check and the
/// ids of batches in flight use it.
pub(crate) type DigestSet = HashSet<IdDigest, BuildHasherDefault<DigestHasher>>;

/// The hasher of [`DigestSet`]: folds what it is given eight bytes at a
/// time (a digest's scope, its digest bytes, and the slice length the
/// `Hash` of an array writes first).
#[derive(Default)]
pub(crate) struct DigestHasher(u64);

impl Hasher for DigestHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = self.0.rotate_left(5) ^ u64::from_le_bytes(word);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_set_tells_digests_apart_within_one_scope_and_across_scopes() {
        let mut set = DigestSet::default();
        let a = scope("logs/0");
        for i in 0..10_000 {
            assert!(set.insert(digest(&a, &format!("ev-{i}"))));
            assert!(set.insert(digest(&PIPELINE_SCOPE, &format!("ev-{i}"))), "another scope, another key");
        }
        assert!(!set.insert(digest(&a, "ev-7")), "a repeat is found");
        assert_eq!(set.len(), 20_000);
    }
}
