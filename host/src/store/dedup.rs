//! The dedup window: ids of events the sink accepted, remembered for at
//! least `window` so a replay inside it delivers nothing twice.
//!
//! Ids are stored as an 8-byte partition scope followed by a 16-byte blake3
//! digest of the id (a collision needs about 2^64 ids), in one column
//! family per time bucket
//! (`ids-<bucket index>`, a bucket spans `window / 8`). Expiry drops whole
//! column families whose bucket ended more than `window` ago: it never scans
//! the store. Look-ups are batched (`batched_multi_get_cf`, bloom filters),
//! newest bucket first; inserts join the batch's `WriteBatch`.
//!
//! The scope keeps a Kafka partition's ids apart from the others' (DESIGN:
//! "ids per partition"), so that its dedup state can follow the partition
//! to another instance: a scope is a contiguous key range. File pipelines
//! share one scope, since files never move between instances.
//!
//! The order that makes this safe lives in `pipeline`: an id is recorded
//! only after the sink accepted its event. Recording first and crashing
//! before delivery would turn a replay into silent loss; the other order can
//! only yield a duplicate.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use rocksdb::WriteBatch;

use super::{CF_META, Store, StoreError, cf_options};

pub(crate) const CF_PREFIX: &str = "ids-";
const BUCKET_KEY: &[u8] = b"dedup_bucket_secs";

/// The key an id is stored under: its scope, then its digest.
pub type IdDigest = [u8; 24];
/// The memtable hashes this many leading key bytes: the scope and half the
/// digest, so ids spread evenly whatever the number of scopes.
pub(crate) const PREFIX_BYTES: usize = 16;

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

pub struct DedupWindow<'s> {
    store: &'s Store,
    window_secs: u64,
    bucket_secs: u64,
    buckets: Mutex<BTreeSet<u64>>,
}

impl<'s> DedupWindow<'s> {
    /// The bucket width is fixed when the store is created (window / 8, at
    /// least a minute) and kept if the window is later changed, so existing
    /// buckets keep their meaning.
    pub fn new(store: &'s Store, window: Duration) -> Result<DedupWindow<'s>, StoreError> {
        let window_secs = window.as_secs().max(1);
        let meta = store.cf(CF_META)?;
        let bucket_secs = match store.db().get_cf(&meta, BUCKET_KEY).map_err(|e| store.rocks(e))? {
            Some(raw) => {
                let bytes: [u8; 8] =
                    raw.as_slice().try_into().map_err(|_| store.corrupt("dedup bucket width", "not 8 bytes"))?;
                u64::from_be_bytes(bytes).max(1)
            }
            None => {
                let secs = (window_secs / 8).max(60);
                store.db().put_cf(&meta, BUCKET_KEY, secs.to_be_bytes()).map_err(|e| store.rocks(e))?;
                secs
            }
        };
        let names =
            rocksdb::DBWithThreadMode::<rocksdb::MultiThreaded>::list_cf(&rocksdb::Options::default(), store.path())
                .map_err(|e| store.rocks(e))?;
        let buckets = names.iter().filter_map(|n| n.strip_prefix(CF_PREFIX)?.parse().ok()).collect();
        Ok(DedupWindow { store, window_secs, bucket_secs, buckets: Mutex::new(buckets) })
    }

    fn oldest_live(&self, now_secs: u64) -> u64 {
        now_secs.saturating_sub(self.window_secs) / self.bucket_secs
    }

    fn live_buckets(&self, now_secs: u64) -> Vec<u64> {
        let oldest = self.oldest_live(now_secs);
        let buckets = self.buckets.lock().map(|b| b.clone()).unwrap_or_default();
        buckets.into_iter().rev().filter(|b| *b >= oldest).collect()
    }

    /// For each digest, whether it was delivered inside the window.
    pub fn seen(&self, digests: &[IdDigest], now_secs: u64) -> Result<Vec<bool>, StoreError> {
        let mut seen = vec![false; digests.len()];
        for bucket in self.live_buckets(now_secs) {
            let pending: Vec<usize> = (0..digests.len()).filter(|i| !seen[*i]).collect();
            if pending.is_empty() {
                break;
            }
            let Some(cf) = self.store.db().cf_handle(&format!("{CF_PREFIX}{bucket}")) else { continue };
            let keys: Vec<&[u8]> = pending.iter().map(|i| &digests[*i][..]).collect();
            let found = self.store.db().batched_multi_get_cf(&cf, keys, false);
            for (i, r) in pending.into_iter().zip(found) {
                seen[i] = r.map_err(|e| self.store.rocks(e))?.is_some();
            }
        }
        Ok(seen)
    }

    /// Add delivered ids to `batch`, in the current bucket.
    pub fn record(&self, batch: &mut WriteBatch, digests: &[IdDigest], now_secs: u64) -> Result<(), StoreError> {
        if digests.is_empty() {
            return Ok(());
        }
        let bucket = now_secs / self.bucket_secs;
        let name = format!("{CF_PREFIX}{bucket}");
        {
            // Partitions share the window: creating a bucket (and dropping
            // one, below) happens under the lock, or two threads would race
            // to create the same column family.
            let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
            if !buckets.contains(&bucket) {
                if self.store.db().cf_handle(&name).is_none() {
                    self.store.db().create_cf(&name, &cf_options(&name)).map_err(|e| self.store.rocks(e))?;
                }
                buckets.insert(bucket);
            }
        }
        let cf = self.store.cf(&name)?;
        for d in digests {
            batch.put_cf(&cf, d, []);
        }
        Ok(())
    }

    /// Drop the buckets that ended more than `window` ago. Returns how many.
    pub fn expire(&self, now_secs: u64) -> Result<usize, StoreError> {
        let oldest = self.oldest_live(now_secs);
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let old: Vec<u64> = buckets.range(..oldest).copied().collect();
        for bucket in &old {
            self.store.db().drop_cf(&format!("{CF_PREFIX}{bucket}")).map_err(|e| self.store.rocks(e))?;
            buckets.remove(bucket);
        }
        Ok(old.len())
    }

    pub fn window(&self) -> Duration {
        Duration::from_secs(self.window_secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Identity;

    #[test]
    fn partitions_may_record_into_a_new_bucket_at_the_same_time() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store = Store::open(dir.path(), &Identity { pipeline: "p".into(), sources: vec![] })
            .unwrap_or_else(|e| panic!("{e}"));
        let w = DedupWindow::new(&store, Duration::from_secs(3600)).unwrap_or_else(|e| panic!("{e}"));
        for round in 0..20u64 {
            std::thread::scope(|s| {
                for t in 0..8u8 {
                    let (w, store) = (&w, &store);
                    s.spawn(move || {
                        let mut batch = WriteBatch::default();
                        let now = 1_000_000 + round * 3600;
                        w.record(&mut batch, &[digest(&PIPELINE_SCOPE, &format!("{round}-{t}"))], now)
                            .unwrap_or_else(|e| panic!("{e}"));
                        store.commit(batch).unwrap_or_else(|e| panic!("{e}"));
                    });
                }
            });
        }
        assert_eq!(w.seen(&[digest(&PIPELINE_SCOPE, "19-7")], 1_000_000 + 19 * 3600).ok(), Some(vec![true]));
    }

    #[test]
    fn remembers_inside_the_window_and_forgets_by_dropping_buckets() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store = Store::open(dir.path(), &Identity { pipeline: "p".into(), sources: vec![] })
            .unwrap_or_else(|e| panic!("{e}"));
        let w = DedupWindow::new(&store, Duration::from_secs(8 * 3600)).unwrap_or_else(|e| panic!("{e}"));
        let t0 = 1_000_000_000;
        let d = |id: &str| digest(&PIPELINE_SCOPE, id);
        let (a, b, c) = (d("a"), d("b"), d("c"));
        let mut batch = WriteBatch::default();
        w.record(&mut batch, &[a, b], t0).unwrap_or_else(|e| panic!("{e}"));
        store.commit(batch).unwrap_or_else(|e| panic!("{e}"));
        let mut batch = WriteBatch::default();
        w.record(&mut batch, &[c], t0 + 4 * 3600).unwrap_or_else(|e| panic!("{e}"));
        store.commit(batch).unwrap_or_else(|e| panic!("{e}"));

        assert_eq!(w.seen(&[a, b, c, d("d")], t0 + 4 * 3600).ok(), Some(vec![true, true, true, false]));
        // Another partition's scope does not see them.
        assert_eq!(w.seen(&[digest(&scope("logs/1"), "a")], t0 + 4 * 3600).ok(), Some(vec![false]));
        // Nine hours on, a and b (first bucket) are gone; c is not.
        assert_eq!(w.expire(t0 + 9 * 3600 + 3600).ok(), Some(1));
        assert_eq!(w.seen(&[a, b, c], t0 + 10 * 3600).ok(), Some(vec![false, false, true]));
        drop(w);
        // The width and the buckets survive a reopen.
        let w = DedupWindow::new(&store, Duration::from_secs(3600)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(w.bucket_secs, 3600);
        assert_eq!(w.seen(&[c], t0 + 4 * 3600 + 10).ok(), Some(vec![true]));
    }
}
