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
//! at open and by every insert); the filter's positives are answered by
//! the ids of recent batches held in memory, then by RocksDB
//! (`batched_multi_get_cf`). A batch's ids join its `WriteBatch` as one
//! value, and reach RocksDB's tables sorted, many batches at once
//! (`id_blobs` says how, and why a crash loses none).
//!
//! The order that makes this safe lives in `pipeline`: an id is recorded
//! only after the sink accepted its event. Recording first and crashing
//! before delivery would turn a replay into silent loss; the other order can
//! only yield a duplicate.

pub(crate) mod config;
pub(crate) mod events;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rocksdb::WriteBatch;

use super::audit::{ABSORBED, TRAIL_BYTES};
use super::clock::{WindowClock, wall_secs};
use super::filter::{FilterStats, IdFilter};
use super::id_blobs::{self, BLOB_MARK, BlobError, Entry, Pending, blob_key, blob_seq};
use super::{CF_IDS_PREFIX, CF_META, Store, StoreError, cf_options};
use crate::telemetry::InternalEvent;

const BUCKET_KEY: &[u8] = b"dedup_bucket_secs";
/// Where table files of pending ids are written before RocksDB ingests
/// them (inside the store's folder, so that ingesting moves, not copies).
const CONVERT_DIR: &str = "ids-convert";

use crate::custody::ids::IdDigest;

/// The window of delivered event ids, in time buckets of the state store:
/// an id is a duplicate while its bucket is younger than `dedup.window`.
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
    /// Per bucket, the ids of blobs not yet sorted into a table file.
    blobs: Mutex<BTreeMap<u64, Pending>>,
    /// The next blob's sequence number (one more than any on disk).
    next_blob: AtomicU64,
    /// Pending ids of the current bucket converted at once
    /// (`id_blobs::CONVERT_IDS`; smaller in tests).
    convert_ids: usize,
    /// What ages the buckets: monotonic during a run (`clock`).
    clock: WindowClock,
}

impl<'s> DedupWindow<'s> {
    /// A window without the in-memory filter: for reading values by key
    /// (`sluice audit`), where filling it would cost a pass over the store.
    /// Its `seen` asks RocksDB about every id.
    ///
    /// The bucket width is fixed when the store is created (window / 8, at
    /// least a second) and kept if the window is later changed, so existing
    /// buckets keep their meaning.
    pub(crate) fn unfiltered(store: &'s Store, window: Duration) -> Result<DedupWindow<'s>, StoreError> {
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
        let buckets: BTreeSet<u64> = names.iter().filter_map(|n| n.strip_prefix(CF_IDS_PREFIX)?.parse().ok()).collect();
        // Blob numbers go on from the highest on disk, in any bucket.
        let mut next_blob = 0;
        for bucket in &buckets {
            let Some(cf) = store.db().cf_handle(&format!("{CF_IDS_PREFIX}{bucket}")) else { continue };
            let mut it = store.db().raw_iterator_cf(&cf);
            it.seek_for_prev(blob_key(u64::MAX));
            // Past any id that happens to start with the mark.
            while let Some(key) = it.key().filter(|k| k.starts_with(&BLOB_MARK)) {
                if let Some(seq) = blob_seq(key) {
                    next_blob = next_blob.max(seq + 1);
                    break;
                }
                it.prev();
            }
            it.status().map_err(|e| store.rocks(e))?;
        }
        let wall = wall_secs();
        let newest = buckets.last().map(|b| b * bucket_secs);
        if let Some(newest) = newest.filter(|n| wall.saturating_sub(*n) > window_secs + bucket_secs) {
            tracing::info!(
                store = %store.path().display(),
                "the store's newest dedup ids are {}s old, more than the window ({window_secs}s): they expire now \
                 (a clock set forward while sluice was stopped cannot be told from the time passing)",
                wall - newest
            );
        }
        Ok(DedupWindow {
            store,
            window_secs,
            bucket_secs,
            buckets: Mutex::new(buckets),
            last_expiry: AtomicU64::new(0),
            filter: None,
            blobs: Mutex::new(BTreeMap::new()),
            next_blob: AtomicU64::new(next_blob),
            convert_ids: id_blobs::CONVERT_IDS,
            clock: WindowClock::start(wall, newest.unwrap_or(0)),
        })
    }

    /// The window a pipeline runs with: [`DedupWindow::unfiltered`], then
    /// the in-memory filter filled from every bucket on disk (one pass over
    /// the ids the store holds, at open only).
    pub fn new(store: &'s Store, window: Duration) -> Result<DedupWindow<'s>, StoreError> {
        let mut w = DedupWindow::unfiltered(store, window)?;
        // A table file left by a crash before RocksDB ingested it: its ids
        // are still in their blobs, which this open reads.
        let leftovers = store.path().join(CONVERT_DIR);
        if leftovers.exists() {
            std::fs::remove_dir_all(&leftovers).map_err(|source| StoreError::Io { path: leftovers, source })?;
        }
        let filter = IdFilter::new();
        let mut blobs = BTreeMap::new();
        // Every bucket on disk, live or not yet expired: a look-up's clock
        // decides which it reads, never what the filter holds.
        let all: Vec<u64> = w.buckets.lock().map(|b| b.iter().copied().collect()).unwrap_or_default();
        for bucket in all {
            let name = format!("{CF_IDS_PREFIX}{bucket}");
            let Some(cf) = store.db().cf_handle(&name) else { continue };
            let estimate = store.db().property_int_value_cf(&cf, "rocksdb.estimate-num-keys").ok().flatten();
            filter.reserve(bucket, estimate.unwrap_or(0) as usize);
            let mut ro = rocksdb::ReadOptions::default();
            // Stores made before blobs hashed their keys by prefix; a full
            // pass needs them all.
            ro.set_total_order_seek(true);
            // Read once, never again from here: kept out of the cache that
            // look-ups share.
            ro.fill_cache(false);
            let mut it = store.db().raw_iterator_cf_opt(&cf, ro);
            it.seek_to_first();
            let mut chunk: Vec<IdDigest> = Vec::with_capacity(4096);
            let mut pending = Pending { scanned: true, ..Pending::default() };
            while let Some(key) = it.key() {
                // Absorbed duplicates' trails (25-byte keys) are not ids.
                if let Ok(d) = <IdDigest>::try_from(key) {
                    chunk.push(d);
                    if chunk.len() == chunk.capacity() {
                        filter.insert(bucket, &chunk);
                        chunk.clear();
                    }
                } else if let (Some(seq), Some(value)) = (blob_seq(key), it.value()) {
                    pending
                        .load(seq, value)
                        .map_err(|m| store.corrupt(&format!("dedup id blob {seq} of {name}"), m))?;
                }
                it.next();
            }
            it.status().map_err(|e| store.rocks(e))?;
            filter.insert(bucket, &chunk);
            let in_blobs: Vec<IdDigest> = pending.ids.iter().copied().collect();
            filter.insert(bucket, &in_blobs);
            blobs.insert(bucket, pending);
        }
        w.filter = Some(filter);
        w.blobs = Mutex::new(blobs);
        Ok(w)
    }

    fn blobs(&self) -> MutexGuard<'_, BTreeMap<u64, Pending>> {
        self.blobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Read the blobs of `cf` that `p` does not hold yet: all of them the
    /// first time, then those this process wrote since (which are durable
    /// once RocksDB returns them). What a look-up finds in `p` afterwards
    /// is every id written to the bucket before it, not yet in a table.
    fn catch_up(&self, cf: &impl rocksdb::AsColumnFamilyRef, p: &mut Pending) -> Result<(), StoreError> {
        let corrupt = |seq: u64, e: BlobError| self.store.corrupt(&format!("dedup id blob {seq}"), e);
        if !p.scanned {
            let mut it = self.store.db().raw_iterator_cf(cf);
            it.seek(BLOB_MARK);
            while let (Some(key), Some(value)) = (it.key(), it.value()) {
                if !key.starts_with(&BLOB_MARK) {
                    break;
                }
                if let Some(seq) = blob_seq(key) {
                    p.load(seq, value).map_err(|m| corrupt(seq, m))?;
                }
                it.next();
            }
            it.status().map_err(|e| self.store.rocks(e))?;
            p.scanned = true;
        }
        if p.issued.is_empty() {
            return Ok(());
        }
        let seqs: Vec<u64> = p.issued.keys().copied().collect();
        let keys: Vec<[u8; id_blobs::BLOB_KEY_BYTES]> = seqs.iter().map(|s| blob_key(*s)).collect();
        let found = self.store.db().batched_multi_get_cf(cf, keys.iter().map(|k| &k[..]), true);
        for (seq, r) in seqs.into_iter().zip(found) {
            // Not there: a write still on its way (or one that failed).
            if let Some(value) = r.map_err(|e| self.store.rocks(e))? {
                p.load(seq, &value).map_err(|m| corrupt(seq, m))?;
            }
        }
        Ok(())
    }

    /// Sort pending ids into table files where it is due: a bucket's
    /// every `convert_ids` ids read back, and with `settle`, whatever a
    /// bucket two or more widths old still holds (late writes to the
    /// bucket before the current one, a partition lagging by seconds, stay
    /// in memory a while; a restore writing into old buckets asks without
    /// `settle`, or each of its batches would make a table file).
    fn convert_due(&self, now_secs: u64, settle: bool) -> Result<(), StoreError> {
        let current = now_secs / self.bucket_secs;
        let mut blobs = self.blobs();
        for (bucket, p) in blobs.iter_mut() {
            let settled = settle && bucket + 1 < current;
            if !(settled && p.size() > 0 || p.size() >= self.convert_ids) {
                continue;
            }
            let name = format!("{CF_IDS_PREFIX}{bucket}");
            let Some(cf) = self.store.db().cf_handle(&name) else { continue };
            // Converted are only ids read back: those of writes still on
            // their way wait for a later call.
            self.catch_up(&cf, p)?;
            if settled && p.has_loaded() || p.ids.len() + p.absorbed >= self.convert_ids {
                self.convert(&name, &cf, p)?;
            }
        }
        Ok(())
    }

    /// The loaded ids of `p` into one sorted table file that RocksDB
    /// ingests, then their blobs deleted: in that order, so that a crash
    /// in between leaves the ids twice (the blob is converted again),
    /// never nowhere.
    fn convert(&self, name: &str, cf: &impl rocksdb::AsColumnFamilyRef, p: &mut Pending) -> Result<(), StoreError> {
        let io = |path: &std::path::Path| {
            let path = path.to_path_buf();
            move |source| StoreError::Io { path, source }
        };
        let dir = self.store.path().join(CONVERT_DIR);
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let file = dir.join(format!("{name}-{}.sst", p.loaded.first().copied().unwrap_or_default()));
        let options = cf_options(name);
        let mut writer = rocksdb::SstFileWriter::create(&options);
        writer.open(&file).map_err(|e| self.store.rocks(e))?;
        let blobs = self.read_blobs(cf, &p.loaded)?;
        let sorted =
            id_blobs::sorted(&blobs).map_err(|m| self.store.corrupt(&format!("dedup id blobs of {name}"), m))?;
        drop(blobs);
        for e in &sorted {
            let (key, len) = e.key();
            writer.put(&key[..len], e.trail.as_ref().map_or(&[][..], |t| &t[..])).map_err(|e| self.store.rocks(e))?;
        }
        writer.finish().map_err(|e| self.store.rocks(e))?;
        let mut ingest = rocksdb::IngestExternalFileOptions::default();
        ingest.set_move_files(true);
        self.store.db().ingest_external_file_cf_opts(cf, &ingest, vec![&file]).map_err(|e| self.store.rocks(e))?;
        if file.exists() {
            std::fs::remove_file(&file).map_err(io(&file))?;
        }
        // Not synced: a deletion lost to a crash only converts a blob again.
        let mut delete = WriteBatch::default();
        for seq in p.converted() {
            delete.delete_cf(cf, blob_key(seq));
        }
        self.store.db().write(delete).map_err(|e| self.store.rocks(e))?;
        crate::store::dedup::events::IdsConverted { bucket: name, ids: sorted.len() }.emit();
        Ok(())
    }

    /// The values of blobs `seqs`, in that order; each must be there.
    fn read_blobs(&self, cf: &impl rocksdb::AsColumnFamilyRef, seqs: &[u64]) -> Result<Vec<Vec<u8>>, StoreError> {
        let keys: Vec<[u8; id_blobs::BLOB_KEY_BYTES]> = seqs.iter().map(|s| blob_key(*s)).collect();
        let found = self.store.db().batched_multi_get_cf(cf, keys.iter().map(|k| &k[..]), false);
        seqs.iter()
            .zip(found)
            .map(|(seq, r)| match r.map_err(|e| self.store.rocks(e))? {
                Some(v) => Ok(v.to_vec()),
                None => Err(self.store.corrupt(&format!("dedup id blob {seq}"), "read once, now missing")),
            })
            .collect()
    }

    /// `f` over a bucket's pending blobs, after reading those written
    /// since the last look-up.
    fn with_pending<R>(
        &self,
        cf: &impl rocksdb::AsColumnFamilyRef,
        bucket: u64,
        f: impl FnOnce(&Pending) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        let mut blobs = self.blobs();
        let p = blobs.entry(bucket).or_default();
        self.catch_up(cf, p)?;
        f(p)
    }

    /// The entries of a bucket's blobs not yet in a table (delivered ids
    /// and absorbed duplicates), each with its latest trail, in key order
    /// (`sluice audit`: reads the blobs again).
    fn pending_trails(&self, cf: &impl rocksdb::AsColumnFamilyRef, bucket: u64) -> Result<Vec<Entry>, StoreError> {
        self.with_pending(cf, bucket, |p| {
            let blobs = self.read_blobs(cf, &p.loaded)?;
            id_blobs::sorted(&blobs).map_err(|m| self.store.corrupt("dedup id blobs", m))
        })
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
            let Some(cf) = self.store.db().cf_handle(&format!("{CF_IDS_PREFIX}{bucket}")) else { continue };
            let mut pending = pending;
            self.with_pending(&cf, bucket, |p| {
                pending.retain(|i| {
                    seen[*i] = p.ids.contains(&digests[*i]);
                    !seen[*i]
                });
                Ok(())
            })?;
            if pending.is_empty() {
                continue;
            }
            let keys: Vec<&[u8]> = pending.iter().map(|i| &digests[*i][..]).collect();
            let found = self.store.db().batched_multi_get_cf(&cf, keys, false);
            for (i, r) in pending.into_iter().zip(found) {
                seen[i] = r.map_err(|e| self.store.rocks(e))?.is_some();
            }
        }
        // A pipeline's window keeps its pending ids bounded; one opened
        // to read (`sluice audit`) writes nothing.
        if self.filter.is_some() {
            self.convert_due(now_secs, true)?;
        }
        Ok(seen)
    }

    /// Add delivered ids to `batch`, in the current bucket, without a
    /// trail (ids restored from a changelog, or `dedup.audit = false`).
    pub fn record(&self, batch: &mut WriteBatch, digests: &[IdDigest], now_secs: u64) -> Result<(), StoreError> {
        if digests.is_empty() {
            return Ok(());
        }
        self.record_blob(batch, digests, None, &[], now_secs)
    }

    /// Add delivered ids to `batch` with each one's trail, and the trails
    /// of the duplicates the batch absorbed (`audit`): all in the batch's
    /// one blob. An absorbed trail is stored under the id's key and
    /// `ABSORBED` once converted, and a look-up never reads it.
    pub(crate) fn record_with_trails(
        &self,
        batch: &mut WriteBatch,
        digests: &[IdDigest],
        trails: &[[u8; TRAIL_BYTES]],
        absorbed: &[(IdDigest, [u8; TRAIL_BYTES])],
        now_secs: u64,
    ) -> Result<(), StoreError> {
        if digests.is_empty() && absorbed.is_empty() {
            return Ok(());
        }
        self.record_blob(batch, digests, Some(trails), absorbed, now_secs)
    }

    /// The ids as one blob in `batch`, noted as issued so that look-ups
    /// read it back once it is durable.
    fn record_blob(
        &self,
        batch: &mut WriteBatch,
        digests: &[IdDigest],
        trails: Option<&[[u8; TRAIL_BYTES]]>,
        absorbed: &[(IdDigest, [u8; TRAIL_BYTES])],
        now_secs: u64,
    ) -> Result<(), StoreError> {
        let cf = self.bucket(now_secs)?;
        self.remember(now_secs, digests);
        let seq = self.next_blob.fetch_add(1, Ordering::Relaxed);
        batch.put_cf(&cf, blob_key(seq), id_blobs::encode(digests, trails, absorbed));
        let entries = digests.len() + if trails.is_some() { absorbed.len() } else { 0 };
        self.blobs().entry(now_secs / self.bucket_secs).or_default().issued.insert(seq, entries);
        // Writes without look-ups between them (a changelog's restore, a
        // bench) keep the pending ids bounded too.
        if self.filter.is_some() {
            self.convert_due(now_secs, false)?;
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

    /// For each key, its value in the newest live bucket that has it
    /// (`sluice audit`).
    pub(crate) fn values(&self, keys: &[Vec<u8>], now_secs: u64) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let mut out: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
        for bucket in self.live_buckets(now_secs) {
            let pending: Vec<usize> = (0..keys.len()).filter(|i| out[*i].is_none()).collect();
            if pending.is_empty() {
                break;
            }
            let Some(cf) = self.store.db().cf_handle(&format!("{CF_IDS_PREFIX}{bucket}")) else { continue };
            let mut pending = pending;
            let in_blobs = self.pending_trails(&cf, bucket)?;
            pending.retain(|i| {
                let at = in_blobs
                    .binary_search_by(|e| {
                        let (k, len) = e.key();
                        k[..len].cmp(&keys[*i][..])
                    })
                    .ok();
                out[*i] = at.map(|at| in_blobs[at].trail.map_or_else(Vec::new, |t| t.to_vec()));
                out[*i].is_none()
            });
            let found = self.store.db().batched_multi_get_cf(&cf, pending.iter().map(|i| &keys[*i][..]), false);
            for (i, r) in pending.into_iter().zip(found) {
                out[i] = r.map_err(|e| self.store.rocks(e))?.map(|v| v.to_vec());
            }
        }
        Ok(out)
    }

    /// Every id and absorbed duplicate of the buckets that overlap
    /// `since_secs..`, with their values, one bucket at a time.
    pub(crate) fn scan_since(&self, since_secs: u64, mut f: impl FnMut(&[u8], &[u8])) -> Result<(), StoreError> {
        let first = since_secs / self.bucket_secs;
        let buckets: Vec<u64> = self.buckets.lock().map(|b| b.range(first..).copied().collect()).unwrap_or_default();
        for bucket in buckets {
            let Some(cf) = self.store.db().cf_handle(&format!("{CF_IDS_PREFIX}{bucket}")) else { continue };
            // Ids still in blobs first; an id also in a table (a crash
            // during its conversion) is reported once.
            let entries = self.pending_trails(&cf, bucket)?;
            let mut in_blobs: HashSet<(IdDigest, bool)> = HashSet::with_capacity(entries.len());
            for e in &entries {
                let (key, len) = e.key();
                f(&key[..len], e.trail.as_ref().map_or(&[][..], |t| &t[..]));
                in_blobs.insert((e.id, e.absorbed));
            }
            let mut ro = rocksdb::ReadOptions::default();
            // Stores made before blobs hashed their keys by prefix; a scan
            // needs them all.
            ro.set_total_order_seek(true);
            ro.fill_cache(false);
            for item in self.store.db().iterator_cf_opt(&cf, ro, rocksdb::IteratorMode::Start) {
                let (k, v) = item.map_err(|e| self.store.rocks(e))?;
                let in_blob = match (<IdDigest>::try_from(&k[..k.len().min(24)]), k.get(24..)) {
                    (Ok(id), Some([])) => in_blobs.contains(&(id, false)),
                    (Ok(id), Some([ABSORBED])) => in_blobs.contains(&(id, true)),
                    _ => false,
                };
                if blob_seq(&k).is_none() && !in_blob {
                    f(&k, &v);
                }
            }
        }
        Ok(())
    }

    /// The current bucket's column family, created when it is new.
    fn bucket(&self, now_secs: u64) -> Result<Arc<rocksdb::BoundColumnFamily<'_>>, StoreError> {
        let bucket = now_secs / self.bucket_secs;
        let name = format!("{CF_IDS_PREFIX}{bucket}");
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
    pub(crate) fn expire(&self, now_secs: u64) -> Result<usize, StoreError> {
        let oldest = self.oldest_live(now_secs);
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let old: Vec<u64> = buckets.range(..oldest).copied().collect();
        for bucket in &old {
            self.store.db().drop_cf(&format!("{CF_IDS_PREFIX}{bucket}")).map_err(|e| self.store.rocks(e))?;
            buckets.remove(bucket);
            self.blobs().remove(bucket);
            if let Some(f) = &self.filter {
                f.drop_bucket(*bucket);
            }
        }
        Ok(old.len())
    }

    /// Expire if it has not run for a quarter of a bucket (at most a
    /// minute): cheap to ask per batch, from every partition.
    pub(crate) fn maybe_expire(&self, now_secs: u64) -> Result<usize, StoreError> {
        let every = (self.bucket_secs / 4).clamp(1, 60);
        let last = self.last_expiry.load(Ordering::Relaxed);
        if now_secs < last.saturating_add(every)
            || self.last_expiry.compare_exchange(last, now_secs, Ordering::SeqCst, Ordering::Relaxed).is_err()
        {
            return Ok(0);
        }
        let dropped = self.expire(now_secs)?;
        if dropped > 0 {
            crate::store::dedup::events::BucketsExpired { dropped, live: self.live_bucket_count() }.emit();
        }
        Ok(dropped)
    }

    fn live_bucket_count(&self) -> usize {
        self.buckets.lock().map(|b| b.len()).unwrap_or(0)
    }

    /// The window's time (seconds since the epoch): what `seen`, `record`
    /// and expiry should be given. A wall clock that has jumped away from
    /// it is reported once per jump.
    pub(crate) fn now_secs(&self) -> u64 {
        let now = self.clock.now_secs();
        if let Some(skew_secs) = self.clock.jumped(wall_secs(), now) {
            crate::store::dedup::events::ClockJumped { skew_secs }.emit();
        }
        now
    }

    pub(crate) fn window(&self) -> Duration {
        Duration::from_secs(self.window_secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::custody::ids::{PIPELINE_SCOPE, digest, scope};
    use crate::store::Identity;
    use crate::store::clock::WindowClock;

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

    /// Issue 25, clocks: the wall clock jumps a day forward, then an hour
    /// back, during a run. Read directly (the control), the jump expires
    /// every id at once and a replay would deliver them all again, and ids
    /// recorded after the step back land in an hour-old bucket; by the
    /// window's clock (wall time at open, then elapsed time) neither.
    #[test]
    fn a_wall_clock_jump_expires_nothing_early_by_the_window_clock() {
        let ids: Vec<IdDigest> = (0..100).map(|i| digest(&PIPELINE_SCOPE, &format!("id-{i}"))).collect();
        let window = Duration::from_secs(3600);
        let (day, hour) = (86_400, 3_600);
        let t0 = super::wall_secs();
        let open = |dir: &std::path::Path| {
            let store =
                Store::open(dir, &Identity { pipeline: "p".into(), sources: vec![] }).unwrap_or_else(|e| panic!("{e}"));
            (store, WindowClock::start(t0, 0))
        };
        let record = |store: &Store, w: &DedupWindow, ids: &[IdDigest], now: u64| {
            let mut batch = WriteBatch::default();
            w.record(&mut batch, ids, now).unwrap_or_else(|e| panic!("{e}"));
            store.commit(batch).unwrap_or_else(|e| panic!("{e}"));
        };
        // Ten seconds of real time pass, while the wall clock reads a day on.
        let elapsed = Duration::from_secs(10);
        for guarded in [false, true] {
            let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
            let (store, clock) = open(dir.path());
            let w = DedupWindow::new(&store, window).unwrap_or_else(|e| panic!("{e}"));
            record(&store, &w, &ids[..50], t0);
            let now = if guarded { clock.at(elapsed) } else { t0 + 10 + day };
            w.expire(now).unwrap_or_else(|e| panic!("{e}"));
            let seen = w.seen(&ids[..50], now).unwrap_or_else(|e| panic!("{e}"));
            let passing = seen.iter().filter(|s| !**s).count();
            if guarded {
                assert_eq!(passing, 0, "by the window's clock, no id delivered a second ago expires");
            } else {
                assert_eq!(passing, 50, "the control: read from the wall clock, a day's jump expires every id");
            }
            // Then the wall clock steps back an hour: read directly, new
            // ids go into the bucket of the hour before.
            let now = if guarded { clock.at(elapsed + Duration::from_secs(1)) } else { t0 + 11 - hour };
            record(&store, &w, &ids[50..], now);
            // Then it is set right, and real time moves on to a minute short
            // of the window after that record: every id must still be held.
            let now =
                if guarded { clock.at(elapsed + Duration::from_secs(1 + hour - 60)) } else { t0 + 11 + hour - 60 };
            w.expire(now).unwrap_or_else(|e| panic!("{e}"));
            let seen = w.seen(&ids[50..], now).unwrap_or_else(|e| panic!("{e}"));
            let passing = seen.iter().filter(|s| !**s).count();
            if guarded {
                assert_eq!(passing, 0, "ids recorded after the step back are held for the whole window");
            } else {
                assert_eq!(passing, 50, "the control: filed an hour back, they expire an hour early");
            }
        }
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
                // in the blobs, which are not ids: one of an id never
                // delivered.
                let now = t0 + (k as u64 % 2) * 3600;
                let absorbed = [(digest(&PIPELINE_SCOPE, &format!("absorbed-{k}")), [1; TRAIL_BYTES])];
                w.record_with_trails(&mut batch, chunk, &vec![[0; TRAIL_BYTES]; chunk.len()], &absorbed, now)
                    .unwrap_or_else(|e| panic!("{e}"));
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
        let only_absorbed: Vec<IdDigest> = (0..5).map(|k| digest(&PIPELINE_SCOPE, &format!("absorbed-{k}"))).collect();
        assert_eq!(w.seen(&only_absorbed, t0 + 3600).ok(), Some(vec![false; 5]), "an absorbed trail is not a delivery");
        let filter = w.filter.as_ref().unwrap_or_else(|| panic!("a pipeline's window has a filter"));
        let mut maybe = Vec::new();
        let mut positives = 0;
        for bucket in w.live_buckets(t0 + 3600) {
            filter.may_contain(bucket, &fresh, &mut maybe);
            positives += maybe.iter().filter(|m| **m).count();
        }
        assert!(positives < 50, "{positives} of 10,000 bucket probes for new ids reached RocksDB");
    }

    /// The fill at open reads every bucket once; through the block cache
    /// that look-ups share, each restart's RSS rose by the tables' size
    /// (the soak of issue 25). The cache is the process's, shared with
    /// tests running beside this one: they hold kilobytes, the tables here
    /// are megabytes.
    #[test]
    fn the_filter_fill_at_open_leaves_the_shared_block_cache_alone() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store = open(dir.path());
        let t0 = 1_000_000_000;
        let ids: Vec<IdDigest> = (0..200_000).map(|i| digest(&PIPELINE_SCOPE, &format!("id-{i}"))).collect();
        {
            let mut w = DedupWindow::new(&store, Duration::from_secs(3600)).unwrap_or_else(|e| panic!("{e}"));
            w.convert_ids = 20_000;
            for chunk in ids.chunks(1000) {
                let mut batch = WriteBatch::default();
                w.record(&mut batch, chunk, t0).unwrap_or_else(|e| panic!("{e}"));
                store.commit(batch).unwrap_or_else(|e| panic!("{e}"));
            }
        }
        // Asked of a family that has the shared cache (the default family,
        // which sluice never writes, keeps RocksDB's own).
        let meta = store.cf(CF_META).unwrap_or_else(|e| panic!("{e}"));
        let usage = || store.db().property_int_value_cf(&meta, "rocksdb.block-cache-usage").ok().flatten().unwrap_or(0);
        let on_disk: u64 = std::fs::read_dir(dir.path())
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "sst"))
            .filter_map(|e| e.metadata().ok().map(|m| m.len()))
            .sum();
        assert!(on_disk > 4 << 20, "the ids are in tables ({on_disk} bytes), which the fill must read");
        let before = usage();
        let w = DedupWindow::new(&store, Duration::from_secs(3600)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(w.filter_stats().ids, 200_000);
        let grown = usage().saturating_sub(before);
        assert!(grown < 1 << 20, "the fill at open put {grown} bytes into the block cache (tables: {on_disk})");
    }

    fn open(dir: &std::path::Path) -> Store {
        Store::open(dir, &Identity { pipeline: "p".into(), sources: vec![] }).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Keys of each length in a bucket: (ids, absorbed trails, blobs).
    fn key_kinds(store: &Store, bucket: u64) -> (usize, usize, usize) {
        let Some(cf) = store.db().cf_handle(&format!("{CF_IDS_PREFIX}{bucket}")) else { return (0, 0, 0) };
        let mut n = (0, 0, 0);
        for item in store.db().iterator_cf(&cf, rocksdb::IteratorMode::Start) {
            match item.map(|(k, _)| k.len()) {
                Ok(24) => n.0 += 1,
                Ok(25) => n.1 += 1,
                Ok(16) => n.2 += 1,
                other => panic!("unexpected key {other:?}"),
            }
        }
        n
    }

    fn trail(i: usize) -> [u8; TRAIL_BYTES] {
        let mut t = [0u8; TRAIL_BYTES];
        t[..8].copy_from_slice(&(i as u64).to_le_bytes());
        t
    }

    /// The custody rule for the store's ids: every id recorded is seen,
    /// with its trail, whether it is still in its batch's blob, already in
    /// a table, or in both (a crash between the two steps of a
    /// conversion), and after a reopen; every id is reported once. So is
    /// each absorbed duplicate's trail, which rides in the same blob.
    #[test]
    fn ids_are_seen_from_blobs_from_tables_and_from_both_after_a_reopen() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store = open(dir.path());
        let t0 = 1_000_000_000;
        let bucket = t0 / 3600;
        let ids: Vec<IdDigest> = (0..5500).map(|i| digest(&PIPELINE_SCOPE, &format!("id-{i}"))).collect();
        let trails: Vec<[u8; TRAIL_BYTES]> = (0..ids.len()).map(trail).collect();
        let mut w = DedupWindow::new(&store, Duration::from_secs(8 * 3600)).unwrap_or_else(|e| panic!("{e}"));
        w.convert_ids = 2600;
        let mut blob_values = Vec::new();
        // Each batch absorbed a duplicate of its first id.
        let absorbed_trail = |n: usize| trail(100_000 + n);
        for (n, (chunk, t)) in ids.chunks(1000).zip(trails.chunks(1000)).enumerate() {
            let mut batch = WriteBatch::default();
            let absorbed = [(chunk[0], absorbed_trail(n))];
            w.record_with_trails(&mut batch, chunk, t, &absorbed, t0).unwrap_or_else(|e| panic!("{e}"));
            blob_values.push(id_blobs::encode(chunk, Some(t), &absorbed));
            store.commit(batch).unwrap_or_else(|e| panic!("{e}"));
            // Every id recorded so far is seen, before any conversion and
            // after each (a look-up is what converts).
            let seen = w.seen(&ids, t0).unwrap_or_else(|e| panic!("{e}"));
            let recorded = ((blob_values.len()) * 1000).min(ids.len());
            assert!(seen[..recorded].iter().all(|s| *s), "after {} batches", blob_values.len());
            assert!(seen[recorded..].iter().all(|s| !*s), "nothing not recorded is seen");
        }
        // 5,500 ids: the first 3,000 converted (past 2,600), the next
        // 2,500 in their three blobs still.
        assert_eq!(key_kinds(&store, bucket), (3000, 3, 3), "ids and absorbed trails in tables, blobs left");
        let keys: Vec<Vec<u8>> = ids.iter().map(|d| d.to_vec()).collect();
        let values = w.values(&keys, t0).unwrap_or_else(|e| panic!("{e}"));
        for (i, v) in values.iter().enumerate() {
            assert_eq!(v.as_deref(), Some(&trails[i][..]), "the trail of id {i}, from a table or a blob");
        }
        let absorbed_key = |i: usize| [&ids[i][..], &[ABSORBED]].concat();
        let firsts: Vec<Vec<u8>> = (0..6).map(|n| absorbed_key(n * 1000)).chain([absorbed_key(1)]).collect();
        let values = w.values(&firsts, t0).unwrap_or_else(|e| panic!("{e}"));
        for (n, v) in values.iter().take(6).enumerate() {
            assert_eq!(v.as_deref(), Some(&absorbed_trail(n)[..]), "batch {n}'s absorbed trail");
        }
        assert_eq!(values[6], None, "no duplicate of id 1 was absorbed");
        drop(w);

        // A crash after a table was ingested and before its blobs were
        // deleted: the first blob is back beside its ids' table entries.
        let cf = store.cf(&format!("{CF_IDS_PREFIX}{bucket}")).unwrap_or_else(|e| panic!("{e}"));
        store.db().put_cf(&cf, blob_key(0), &blob_values[0]).unwrap_or_else(|e| panic!("{e}"));
        // And a table file written but never ingested.
        std::fs::create_dir_all(dir.path().join(CONVERT_DIR)).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join(CONVERT_DIR).join("ids-1-9.sst"), b"torn").unwrap_or_else(|e| panic!("{e}"));
        drop(cf);

        let w = DedupWindow::new(&store, Duration::from_secs(8 * 3600)).unwrap_or_else(|e| panic!("{e}"));
        assert!(!dir.path().join(CONVERT_DIR).exists(), "a table file never ingested is removed at open");
        assert_eq!(w.filter_stats().ids, 5500 + 1000, "the blob's ids twice in the filter: harmless");
        let seen = w.seen(&ids, t0 + 60).unwrap_or_else(|e| panic!("{e}"));
        assert!(seen.iter().all(|s| *s), "every id recorded before the reopen is seen");
        let mut scanned: std::collections::HashMap<Vec<u8>, Vec<u8>> = std::collections::HashMap::new();
        w.scan_since(0, |k, v| assert!(scanned.insert(k.to_vec(), v.to_vec()).is_none(), "an id reported twice"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(scanned.len(), 5500 + 6);
        assert!(ids.iter().zip(&trails).all(|(d, t)| scanned.get(&d[..]).map(Vec::as_slice) == Some(&t[..])));
        assert!(
            (0..6).all(|n| scanned.get(&absorbed_key(n * 1000)).map(Vec::as_slice) == Some(&absorbed_trail(n)[..]))
        );

        // The next bucket may still take late writes: its blobs wait.
        let fresh = [digest(&PIPELINE_SCOPE, "fresh")];
        assert_eq!(w.seen(&fresh, t0 + 3600).ok(), Some(vec![false]));
        assert_eq!(key_kinds(&store, bucket).2, 4, "the restored blob and the last three");
        // Two buckets on, a look-up converts what the old one holds: the
        // restored blob (again) and the last 2,500.
        let next = t0 + 2 * 3600;
        assert_eq!(w.seen(&fresh, next).ok(), Some(vec![false]));
        assert_eq!(key_kinds(&store, bucket), (5500, 6, 0), "all in tables, no blob left");
        assert!(w.seen(&ids, next).unwrap_or_default().iter().all(|s| *s));
    }

    /// A window opened only to read (`sluice audit`) finds ids in blobs
    /// too, and stores written before blobs (a key per id) still answer.
    #[test]
    fn a_read_only_window_reads_blobs_and_ids_stored_a_key_each() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store = open(dir.path());
        let t0 = 1_000_000_000;
        let (a, b) = (digest(&PIPELINE_SCOPE, "a"), digest(&PIPELINE_SCOPE, "b"));
        {
            let w = DedupWindow::new(&store, Duration::from_secs(3600)).unwrap_or_else(|e| panic!("{e}"));
            let mut batch = WriteBatch::default();
            w.record_with_trails(&mut batch, &[a], &[trail(7)], &[], t0).unwrap_or_else(|e| panic!("{e}"));
            store.commit(batch).unwrap_or_else(|e| panic!("{e}"));
            // An id as the format before blobs stored it.
            let cf = store.cf(&format!("{CF_IDS_PREFIX}{}", t0 / 450)).unwrap_or_else(|e| panic!("{e}"));
            store.db().put_cf(&cf, b, trail(8)).unwrap_or_else(|e| panic!("{e}"));
        }
        let r = DedupWindow::unfiltered(&store, Duration::from_secs(3600)).unwrap_or_else(|e| panic!("{e}"));
        let values = r
            .values(&[a.to_vec(), b.to_vec(), digest(&PIPELINE_SCOPE, "c").to_vec()], t0)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(values, vec![Some(trail(7).to_vec()), Some(trail(8).to_vec()), None]);
        assert_eq!(r.seen(&[a, b], t0).ok(), Some(vec![true, true]));
        // The next blob number follows the one on disk.
        assert_eq!(r.next_blob.load(Ordering::Relaxed), 1);
        let w = DedupWindow::new(&store, Duration::from_secs(3600)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(w.seen(&[a, b], t0).ok(), Some(vec![true, true]));
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
