//! The dedup window's ids in memory, as a filter: a look-up of a new id
//! (nearly every look-up) is answered here, and RocksDB is asked only
//! about the filter's positives (an id delivered before, or a false
//! positive, about 1 in 1,000).
//!
//! One filter per time bucket, so that it is dropped with its bucket's
//! column family and expiry stays free of scans. A bucket's filter is a
//! list of split-block Bloom filters ("segments"): each id sets one bit in
//! each of the eight 64-bit words of one 64-byte block, chosen by its
//! digest, so a look-up reads one cache line per segment. The digests are
//! blake3 already, uniform: their bytes are the hash, nothing is hashed
//! again.
//!
//! A segment is sized for a number of ids at 16 bits each; when the ids a
//! bucket holds pass what its segments were sized for, a segment twice as
//! large is added (a bucket starts at the size of the bucket before it, so
//! a steady stream needs one segment per bucket).
//!
//! **Why a false negative cannot happen.** Every id written to a bucket's
//! column family goes through `DedupWindow`, which adds it here before its
//! write is even submitted; at open, the filter is filled from every
//! bucket on disk. Bits are only ever set (atomically, so look-ups on other threads
//! need no lock) and a segment is only ever dropped with its bucket. An id
//! added for a write that then failed is a false positive: it costs one
//! RocksDB look-up, never a delivery.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use crate::custody::ids::IdDigest;

/// Bits of filter per id a segment is sized for: about 2 bytes per id, and
/// a false positive rate near 0.1% at that fill.
pub(crate) const BITS_PER_ID: usize = 16;
/// The smallest segment, in ids (128 KiB of bits).
pub(crate) const MIN_IDS: usize = 1 << 16;

/// One split-block Bloom filter.
struct Segment {
    blocks: Box<[[AtomicU64; 8]]>,
    /// The ids it was sized for.
    capacity: usize,
}

impl Segment {
    fn new(capacity: usize) -> Segment {
        let n = (capacity * BITS_PER_ID).div_ceil(512).max(1);
        let blocks = (0..n).map(|_| std::array::from_fn(|_| AtomicU64::new(0))).collect();
        Segment { blocks, capacity }
    }

    /// The block and the eight bits of `d`: the block from one half of
    /// the digest (with the scope mixed in, so that one id in two scopes
    /// does not share its bits), the bits from six bits each of the other.
    fn place(&self, d: &IdDigest) -> (&[AtomicU64; 8], [u64; 8]) {
        let word = |at: usize| u64::from_le_bytes(d[at..at + 8].try_into().unwrap_or([0; 8]));
        let (scope, h1, h2) = (word(0), word(8), word(16));
        let h1 = h1 ^ scope.rotate_left(29);
        // Lemire's reduction: a uniform index without a division.
        let block = ((u128::from(h1) * self.blocks.len() as u128) >> 64) as usize;
        let bits = std::array::from_fn(|w| 1u64 << ((h2 >> (6 * w)) & 63));
        (&self.blocks[block], bits)
    }

    fn insert(&self, d: &IdDigest) {
        let (block, bits) = self.place(d);
        for (word, bit) in block.iter().zip(bits) {
            word.fetch_or(bit, Ordering::Relaxed);
        }
    }

    fn may_contain(&self, d: &IdDigest) -> bool {
        let (block, bits) = self.place(d);
        block.iter().zip(bits).all(|(word, bit)| word.load(Ordering::Relaxed) & bit != 0)
    }

    fn bytes(&self) -> usize {
        self.blocks.len() * 64
    }
}

/// The filter of one bucket.
///
/// Segments and the count are shared (`Arc`) with the bucket a growth
/// replaces it by: a thread still holding the old one sets its bits in
/// memory the new one reads too.
struct Bucket {
    segments: Vec<Arc<Segment>>,
    /// Ids added (an id added twice counts twice: it only sizes segments).
    ids: Arc<AtomicUsize>,
}

impl Bucket {
    fn new(capacity: usize) -> Bucket {
        Bucket { segments: vec![Arc::new(Segment::new(capacity.max(MIN_IDS)))], ids: Arc::default() }
    }

    fn capacity(&self) -> usize {
        self.segments.iter().map(|s| s.capacity).sum()
    }

    fn may_contain(&self, d: &IdDigest) -> bool {
        self.segments.iter().any(|s| s.may_contain(d))
    }
}

/// What the filters hold, for the benches and `/health`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FilterStats {
    pub buckets: usize,
    pub segments: usize,
    pub ids: usize,
    pub bytes: usize,
}

/// The filters of every live bucket, shared by every partition's front
/// (look-ups) and back (inserts): one lock taken per batch, not per id.
#[derive(Default)]
pub(crate) struct IdFilter {
    buckets: RwLock<BTreeMap<u64, Arc<Bucket>>>,
}

impl IdFilter {
    pub(crate) fn new() -> IdFilter {
        IdFilter::default()
    }

    /// Add `ids` to `bucket`'s filter, growing it first when they would
    /// pass what it was sized for.
    pub(crate) fn insert(&self, bucket: u64, ids: &[IdDigest]) {
        if ids.is_empty() {
            return;
        }
        let b = self.bucket_for(bucket, ids.len());
        // The newest segment takes new ids; older ones are full.
        if let Some(seg) = b.segments.last() {
            for d in ids {
                seg.insert(d);
            }
        }
        b.ids.fetch_add(ids.len(), Ordering::Relaxed);
    }

    /// The bucket's filter with room for `more` ids.
    fn bucket_for(&self, bucket: u64, more: usize) -> Arc<Bucket> {
        {
            let buckets = self.buckets.read().unwrap_or_else(|p| p.into_inner());
            if let Some(b) = buckets.get(&bucket)
                && b.ids.load(Ordering::Relaxed) + more <= b.capacity()
            {
                return b.clone();
            }
        }
        let mut buckets = self.buckets.write().unwrap_or_else(|p| p.into_inner());
        // A new bucket starts at the size of the newest one before it.
        let start = buckets.range(..bucket).next_back().map_or(MIN_IDS, |(_, b)| b.ids.load(Ordering::Relaxed));
        let entry = buckets.entry(bucket).or_insert_with(|| Arc::new(Bucket::new(start.max(more))));
        let filled = entry.ids.load(Ordering::Relaxed);
        if filled + more > entry.capacity() {
            // The old segments are shared, not copied: a thread that still
            // holds the old bucket may be setting bits in them now.
            let mut segments = entry.segments.clone();
            segments.push(Arc::new(Segment::new(entry.capacity().max(more))));
            *entry = Arc::new(Bucket { segments, ids: entry.ids.clone() });
        }
        entry.clone()
    }

    /// For each digest, whether `bucket` may hold it (`false`: it does
    /// not). A bucket without a filter may hold anything.
    pub(crate) fn may_contain(&self, bucket: u64, digests: &[IdDigest], out: &mut Vec<bool>) {
        out.clear();
        let b = self.buckets.read().unwrap_or_else(|p| p.into_inner()).get(&bucket).cloned();
        match b {
            Some(b) => out.extend(digests.iter().map(|d| b.may_contain(d))),
            None => out.resize(digests.len(), false),
        }
    }

    /// Start `bucket`'s filter sized for `ids` (what the store holds for it
    /// at open), before filling it.
    pub(crate) fn reserve(&self, bucket: u64, ids: usize) {
        let mut buckets = self.buckets.write().unwrap_or_else(|p| p.into_inner());
        buckets.entry(bucket).or_insert_with(|| Arc::new(Bucket::new(ids)));
    }

    /// Drop `bucket`'s filter with its column family.
    pub(crate) fn drop_bucket(&self, bucket: u64) {
        self.buckets.write().unwrap_or_else(|p| p.into_inner()).remove(&bucket);
    }

    pub(crate) fn stats(&self) -> FilterStats {
        let buckets = self.buckets.read().unwrap_or_else(|p| p.into_inner());
        let mut s = FilterStats { buckets: buckets.len(), ..FilterStats::default() };
        for b in buckets.values() {
            s.segments += b.segments.len();
            s.ids += b.ids.load(Ordering::Relaxed);
            s.bytes += b.segments.iter().map(|s| s.bytes()).sum::<usize>();
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(i: u64, scope: u8) -> IdDigest {
        let h = blake3::hash(&i.to_le_bytes());
        let mut d = [scope; 24];
        d[8..].copy_from_slice(&h.as_bytes()[..16]);
        d
    }

    #[test]
    fn every_id_added_is_found_through_growth_and_false_positives_are_rare() {
        let f = IdFilter::new();
        let n = 300_000u64;
        let ids: Vec<IdDigest> = (0..n).map(|i| id(i, 0)).collect();
        for chunk in ids.chunks(1000) {
            f.insert(7, chunk);
        }
        let s = f.stats();
        assert!(s.segments >= 2, "300,000 ids outgrow the first segment of {MIN_IDS}: {s:?}");
        let mut out = Vec::new();
        f.may_contain(7, &ids, &mut out);
        assert!(out.iter().all(|m| *m), "no false negative");
        let absent: Vec<IdDigest> = (n..n + 200_000).map(|i| id(i, 0)).collect();
        f.may_contain(7, &absent, &mut out);
        let fp = out.iter().filter(|m| **m).count();
        assert!(fp < 200_000 / 100, "{fp} false positives in 200,000 (want under 1%)");
        assert!(s.bytes <= 2 * BITS_PER_ID / 8 * n as usize + 64 * 1024, "{s:?}");
        // Another bucket, and another scope of the same ids, hold none of them.
        f.may_contain(8, &ids[..1000], &mut out);
        assert!(out.iter().all(|m| !*m));
        let other: Vec<IdDigest> = (0..1000).map(|i| id(i, 9)).collect();
        f.may_contain(7, &other, &mut out);
        assert!(out.iter().filter(|m| **m).count() < 20);
        f.drop_bucket(7);
        f.may_contain(7, &ids[..10], &mut out);
        assert!(out.iter().all(|m| !*m), "a dropped bucket holds nothing");
    }

    #[test]
    fn a_new_bucket_starts_at_the_size_of_the_one_before() {
        let f = IdFilter::new();
        let ids: Vec<IdDigest> = (0..200_000).map(|i| id(i, 0)).collect();
        f.insert(1, &ids);
        f.insert(2, &ids[..10]);
        let s = f.stats();
        assert_eq!(s.segments, 2, "one segment each: {s:?}");
        assert!(s.bytes >= 2 * 200_000 * BITS_PER_ID / 8, "{s:?}");
    }

    #[test]
    fn inserts_on_other_threads_while_it_grows_are_all_found() {
        let f = Arc::new(IdFilter::new());
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let f = f.clone();
                std::thread::spawn(move || {
                    let ids: Vec<IdDigest> = (0..60_000).map(|i| id(t * 1_000_000 + i, 0)).collect();
                    for c in ids.chunks(500) {
                        f.insert(3, c);
                    }
                    ids
                })
            })
            .collect();
        let mut out = Vec::new();
        for t in threads {
            let ids = t.join().unwrap_or_default();
            assert_eq!(ids.len(), 60_000);
            f.may_contain(3, &ids, &mut out);
            assert!(out.iter().all(|m| *m), "no id lost while segments were added");
        }
    }
}
