//! The dedup window: ids of events the sink accepted, remembered for at
//! least `window` so a replay inside it delivers nothing twice.
//!
//! Ids are keyed as `custody::ids` says (a scope, then a digest), in one
//! column family per time bucket (`ids-<bucket index>`, a bucket spans
//! `window / 8`). Expiry drops whole column families whose bucket ended
//! more than `window` ago: it never scans the store, and runs during long
//! runs too (`maybe_expire`, asked by every partition's driver). Look-ups
//! are batched, newest bucket first, and answered in memory for every id
//! the window does not hold (`filter`: one Bloom filter per bucket, filled
//! at open and by every insert); RocksDB (`batched_multi_get_cf`) is asked
//! only about the filter's positives. Inserts join the batch's
//! `WriteBatch`.
//!
//! The order that makes this safe lives in `pipeline`: an id is recorded
//! only after the sink accepted its event. Recording first and crashing
//! before delivery would turn a replay into silent loss; the other order can
//! only yield a duplicate.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocksdb::WriteBatch;

use super::audit::{ABSORBED, TRAIL_BYTES};
use super::filter::{FilterStats, IdFilter};
use super::{CF_META, Store, StoreError, cf_options};

pub(crate) const CF_PREFIX: &str = "ids-";
const BUCKET_KEY: &[u8] = b"dedup_bucket_secs";

pub use crate::custody::ids::{IdDigest, PIPELINE_SCOPE, Scope, digest, scope};

/// The memtable hashes this many leading key bytes: the scope and half the
/// digest, so ids spread evenly whatever the number of scopes.
pub(crate) const PREFIX_BYTES: usize = 16;

pub struct DedupWindow<'s> {
    store: &'s Store,
    window_secs: u64,
    bucket_secs: u64,
    buckets: Mutex<BTreeSet<u64>>,
    /// When expiry last ran (seconds since the epoch): every partition asks
    /// per batch, one of them does the work.
    last_expiry: AtomicU64,
    /// Every id of every bucket on disk, in memory; `None` for a window that
    /// is only read by key (`sluice audit`), which never asks `seen`.
    filter: Option<IdFilter>,
}

impl<'s> DedupWindow<'s> {
    /// A window without the in-memory filter: for reading values by key
    /// (`sluice audit`), where filling it would cost a pass over the store.
    /// Its `seen` asks RocksDB about every id.
    ///
    /// The bucket width is fixed when the store is created (window / 8, at
    /// least a second) and kept if the window is later changed, so existing
    /// buckets keep their meaning.
    pub fn unfiltered(store: &'s Store, window: Duration) -> Result<DedupWindow<'s>, StoreError> {
        let window_secs = window.as_secs().max(1);
        let meta = store.cf(CF_META)?;
        let bucket_secs = match store.db().get_cf(&meta, BUCKET_KEY).map_err(|e| store.rocks(e))? {
            Some(raw) => {
                let bytes: [u8; 8] =
                    raw.as_slice().try_into().map_err(|_| store.corrupt("dedup bucket width", "not 8 bytes"))?;
                u64::from_be_bytes(bytes).max(1)
            }
            None => {
                let secs = (window_secs / 8).max(1);
                store.db().put_cf(&meta, BUCKET_KEY, secs.to_be_bytes()).map_err(|e| store.rocks(e))?;
                secs
            }
        };
        let names =
            rocksdb::DBWithThreadMode::<rocksdb::MultiThreaded>::list_cf(&rocksdb::Options::default(), store.path())
                .map_err(|e| store.rocks(e))?;
        let buckets = names.iter().filter_map(|n| n.strip_prefix(CF_PREFIX)?.parse().ok()).collect();
        Ok(DedupWindow {
            store,
            window_secs,
            bucket_secs,
            buckets: Mutex::new(buckets),
            last_expiry: AtomicU64::new(0),
            filter: None,
        })
    }

    /// The window a pipeline runs with: [`DedupWindow::unfiltered`], then
    /// the in-memory filter filled from every bucket on disk (one pass over
    /// the ids the store holds, at open only).
    pub fn new(store: &'s Store, window: Duration) -> Result<DedupWindow<'s>, StoreError> {
        let mut w = DedupWindow::unfiltered(store, window)?;
        let filter = IdFilter::new();
        // Every bucket on disk, live or not yet expired: a look-up's clock
        // decides which it reads, never what the filter holds.
        let all: Vec<u64> = w.buckets.lock().map(|b| b.iter().copied().collect()).unwrap_or_default();
        for bucket in all {
            let name = format!("{CF_PREFIX}{bucket}");
            let Some(cf) = store.db().cf_handle(&name) else { continue };
            let estimate = store.db().property_int_value_cf(&cf, "rocksdb.estimate-num-keys").ok().flatten();
            filter.reserve(bucket, estimate.unwrap_or(0) as usize);
            let mut ro = rocksdb::ReadOptions::default();
            // The keys are hashed by prefix; a full pass needs them all.
            ro.set_total_order_seek(true);
            let mut it = store.db().raw_iterator_cf_opt(&cf, ro);
            it.seek_to_first();
            let mut chunk: Vec<IdDigest> = Vec::with_capacity(4096);
            while let Some(key) = it.key() {
                // Absorbed duplicates' trails (25-byte keys) are not ids.
                if let Ok(d) = <IdDigest>::try_from(key) {
                    chunk.push(d);
                    if chunk.len() == chunk.capacity() {
                        filter.insert(bucket, &chunk);
                        chunk.clear();
                    }
                }
                it.next();
            }
            it.status().map_err(|e| store.rocks(e))?;
            filter.insert(bucket, &chunk);
        }
        w.filter = Some(filter);
        Ok(w)
    }

    /// What the in-memory filter holds (zero without one).
    pub fn filter_stats(&self) -> FilterStats {
        self.filter.as_ref().map(IdFilter::stats).unwrap_or_default()
    }

    fn oldest_live(&self, now_secs: u64) -> u64 {
        now_secs.saturating_sub(self.window_secs) / self.bucket_secs
    }

    fn live_buckets(&self, now_secs: u64) -> Vec<u64> {
        let oldest = self.oldest_live(now_secs);
        let buckets = self.buckets.lock().map(|b| b.clone()).unwrap_or_default();
        buckets.into_iter().rev().filter(|b| *b >= oldest).collect()
    }

    /// For each digest, whether it was delivered inside the window. The
    /// filter rules out what a bucket does not hold; RocksDB is asked
    /// about the rest, one batched look-up per bucket.
    pub fn seen(&self, digests: &[IdDigest], now_secs: u64) -> Result<Vec<bool>, StoreError> {
        let mut seen = vec![false; digests.len()];
        let mut maybe = Vec::with_capacity(digests.len());
        for bucket in self.live_buckets(now_secs) {
            if seen.iter().all(|s| *s) {
                break;
            }
            let pending: Vec<usize> = match &self.filter {
                Some(f) => {
                    f.may_contain(bucket, digests, &mut maybe);
                    (0..digests.len()).filter(|i| !seen[*i] && maybe[*i]).collect()
                }
                None => (0..digests.len()).filter(|i| !seen[*i]).collect(),
            };
            // Nothing this bucket may hold: it is not asked.
            if pending.is_empty() {
                continue;
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

    /// Add delivered ids to `batch`, in the current bucket, without a
    /// trail (ids restored from a changelog, or `dedup.audit = false`).
    pub fn record(&self, batch: &mut WriteBatch, digests: &[IdDigest], now_secs: u64) -> Result<(), StoreError> {
        if digests.is_empty() {
            return Ok(());
        }
        let cf = self.bucket(now_secs)?;
        self.remember(now_secs, digests);
        for d in digests {
            batch.put_cf(&cf, d, []);
        }
        Ok(())
    }

    /// Add delivered ids to `batch` with each one's trail (`audit`).
    pub fn record_with_trails(
        &self,
        batch: &mut WriteBatch,
        digests: &[IdDigest],
        trails: &[[u8; TRAIL_BYTES]],
        now_secs: u64,
    ) -> Result<(), StoreError> {
        if digests.is_empty() {
            return Ok(());
        }
        let cf = self.bucket(now_secs)?;
        self.remember(now_secs, digests);
        for (d, t) in digests.iter().zip(trails) {
            batch.put_cf(&cf, d, t);
        }
        Ok(())
    }

    /// Ids about to be written into the bucket of `now_secs`: into its
    /// filter first, so that no look-up after the write can miss them.
    fn remember(&self, now_secs: u64, digests: &[IdDigest]) {
        if let Some(f) = &self.filter {
            f.insert(now_secs / self.bucket_secs, digests);
        }
    }

    /// Add the trails of duplicates absorbed to `batch`: under each id's
    /// key and `ABSORBED`, which a look-up of the id never reads.
    pub fn record_absorbed(
        &self,
        batch: &mut WriteBatch,
        absorbed: &[(IdDigest, [u8; TRAIL_BYTES])],
        now_secs: u64,
    ) -> Result<(), StoreError> {
        if absorbed.is_empty() {
            return Ok(());
        }
        let cf = self.bucket(now_secs)?;
        for (d, t) in absorbed {
            let mut key = [0u8; 25];
            key[..24].copy_from_slice(d);
            key[24] = ABSORBED;
            batch.put_cf(&cf, key, t);
        }
        Ok(())
    }

    /// For each key, its value in the newest live bucket that has it
    /// (`sluice audit`).
    pub fn values(&self, keys: &[Vec<u8>], now_secs: u64) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let mut out: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
        for bucket in self.live_buckets(now_secs) {
            let pending: Vec<usize> = (0..keys.len()).filter(|i| out[*i].is_none()).collect();
            if pending.is_empty() {
                break;
            }
            let Some(cf) = self.store.db().cf_handle(&format!("{CF_PREFIX}{bucket}")) else { continue };
            let found = self.store.db().batched_multi_get_cf(&cf, pending.iter().map(|i| &keys[*i][..]), false);
            for (i, r) in pending.into_iter().zip(found) {
                out[i] = r.map_err(|e| self.store.rocks(e))?.map(|v| v.to_vec());
            }
        }
        Ok(out)
    }

    /// Every id and absorbed duplicate of the buckets that overlap
    /// `since_secs..`, with their values, one bucket at a time.
    pub fn scan_since(&self, since_secs: u64, mut f: impl FnMut(&[u8], &[u8])) -> Result<(), StoreError> {
        let first = since_secs / self.bucket_secs;
        let buckets: Vec<u64> = self.buckets.lock().map(|b| b.range(first..).copied().collect()).unwrap_or_default();
        for bucket in buckets {
            let Some(cf) = self.store.db().cf_handle(&format!("{CF_PREFIX}{bucket}")) else { continue };
            let mut ro = rocksdb::ReadOptions::default();
            // The keys are hashed by prefix; a scan needs them all.
            ro.set_total_order_seek(true);
            for item in self.store.db().iterator_cf_opt(&cf, ro, rocksdb::IteratorMode::Start) {
                let (k, v) = item.map_err(|e| self.store.rocks(e))?;
                f(&k, &v);
            }
        }
        Ok(())
    }

    /// The current bucket's column family, created when it is new.
    fn bucket(&self, now_secs: u64) -> Result<Arc<rocksdb::BoundColumnFamily<'_>>, StoreError> {
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
        self.store.cf(&name)
    }

    /// Drop the buckets that ended more than `window` ago. Returns how many.
    pub fn expire(&self, now_secs: u64) -> Result<usize, StoreError> {
        let oldest = self.oldest_live(now_secs);
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let old: Vec<u64> = buckets.range(..oldest).copied().collect();
        for bucket in &old {
            self.store.db().drop_cf(&format!("{CF_PREFIX}{bucket}")).map_err(|e| self.store.rocks(e))?;
            buckets.remove(bucket);
            if let Some(f) = &self.filter {
                f.drop_bucket(*bucket);
            }
        }
        Ok(old.len())
    }

    /// Expire if it has not run for a quarter of a bucket (at most a
    /// minute): cheap to ask per batch, from every partition.
    pub fn maybe_expire(&self, now_secs: u64) -> Result<usize, StoreError> {
        let every = (self.bucket_secs / 4).clamp(1, 60);
        let last = self.last_expiry.load(Ordering::Relaxed);
        if now_secs < last.saturating_add(every)
            || self.last_expiry.compare_exchange(last, now_secs, Ordering::SeqCst, Ordering::Relaxed).is_err()
        {
            return Ok(0);
        }
        let dropped = self.expire(now_secs)?;
        if dropped > 0 {
            crate::telemetry::events::BucketsExpired { dropped, live: self.live_bucket_count() }.emit();
        }
        Ok(dropped)
    }

    fn live_bucket_count(&self) -> usize {
        self.buckets.lock().map(|b| b.len()).unwrap_or(0)
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
    fn a_long_run_expires_as_it_goes_at_most_once_per_quarter_bucket() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store = Store::open(dir.path(), &Identity { pipeline: "p".into(), sources: vec![] })
            .unwrap_or_else(|e| panic!("{e}"));
        // 80 s window: 10 s buckets, asked every 2 s.
        let w = DedupWindow::new(&store, Duration::from_secs(80)).unwrap_or_else(|e| panic!("{e}"));
        let t0 = 1_000_000;
        let mut batch = WriteBatch::default();
        w.record(&mut batch, &[digest(&PIPELINE_SCOPE, "old")], t0).unwrap_or_else(|e| panic!("{e}"));
        store.commit(batch).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(w.maybe_expire(t0).ok(), Some(0));
        // Past the window and the bucket's end: the first ask drops it...
        let later = t0 + 80 + 10 + 1;
        assert_eq!(w.maybe_expire(later).ok(), Some(1));
        assert_eq!(w.seen(&[digest(&PIPELINE_SCOPE, "old")], later).ok(), Some(vec![false]));
        // ...and asking again within 2 s does not even look.
        let mut batch = WriteBatch::default();
        w.record(&mut batch, &[digest(&PIPELINE_SCOPE, "new")], t0).unwrap_or_else(|e| panic!("{e}"));
        store.commit(batch).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(w.maybe_expire(later + 1).ok(), Some(0));
        assert_eq!(w.maybe_expire(later + 2).ok(), Some(1));
    }

    /// The filter is what keeps a new id's look-up out of RocksDB; a
    /// false negative would deliver a duplicate. Ids recorded before a
    /// reopen (and ids from a write that never landed) must be found.
    #[test]
    fn the_filter_is_filled_at_open_and_every_recorded_id_is_seen_through_it() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store = Store::open(dir.path(), &Identity { pipeline: "p".into(), sources: vec![] })
            .unwrap_or_else(|e| panic!("{e}"));
        let t0 = 1_000_000_000;
        let ids: Vec<IdDigest> = (0..5000).map(|i| digest(&PIPELINE_SCOPE, &format!("id-{i}"))).collect();
        {
            let w = DedupWindow::new(&store, Duration::from_secs(8 * 3600)).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(w.filter_stats().ids, 0);
            for (k, chunk) in ids.chunks(1000).enumerate() {
                let mut batch = WriteBatch::default();
                // Over two buckets (an hour apart), with absorbed trails
                // beside them, which are not ids.
                let now = t0 + (k as u64 % 2) * 3600;
                w.record(&mut batch, chunk, now).unwrap_or_else(|e| panic!("{e}"));
                w.record_absorbed(&mut batch, &[(chunk[0], [0; TRAIL_BYTES])], now).unwrap_or_else(|e| panic!("{e}"));
                store.commit(batch).unwrap_or_else(|e| panic!("{e}"));
            }
            let mut lost = WriteBatch::default();
            w.record(&mut lost, &[digest(&PIPELINE_SCOPE, "never-written")], t0).unwrap_or_else(|e| panic!("{e}"));
            drop(lost);
            // The filter has it (a positive), RocksDB answers no.
            assert_eq!(w.seen(&[digest(&PIPELINE_SCOPE, "never-written")], t0).ok(), Some(vec![false]));
        }
        let w = DedupWindow::new(&store, Duration::from_secs(8 * 3600)).unwrap_or_else(|e| panic!("{e}"));
        let stats = w.filter_stats();
        assert_eq!((stats.buckets, stats.ids), (2, 5000), "{stats:?}");
        let seen = w.seen(&ids, t0 + 3600).unwrap_or_else(|e| panic!("{e}"));
        assert!(seen.iter().all(|s| *s), "every id recorded before the reopen is seen");
        // New ids: the filter rules nearly all of them out.
        let fresh: Vec<IdDigest> = (0..5000).map(|i| digest(&PIPELINE_SCOPE, &format!("new-{i}"))).collect();
        assert!(w.seen(&fresh, t0 + 3600).unwrap_or_default().iter().all(|s| !*s));
        let filter = w.filter.as_ref().unwrap_or_else(|| panic!("a pipeline's window has a filter"));
        let mut maybe = Vec::new();
        let mut positives = 0;
        for bucket in w.live_buckets(t0 + 3600) {
            filter.may_contain(bucket, &fresh, &mut maybe);
            positives += maybe.iter().filter(|m| **m).count();
        }
        assert!(positives < 50, "{positives} of 10,000 bucket probes for new ids reached RocksDB");
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
