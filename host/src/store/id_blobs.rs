//! How a batch's delivered ids reach RocksDB: as one value, not one key
//! each.
//!
//! A key per id made RocksDB sort every id twice (the memtable, then the
//! flush) and rewrite it at every compaction: 3–5 µs of CPU per id, all
//! in, against about 1 µs this way (`benches/dedup_write`). So a batch's ids
//! go into its synced `WriteBatch` as one *blob* (a key per batch, in the
//! bucket's column family), and the window keeps the ids of blobs it has
//! read back in memory ([`Pending`]), exactly. Every [`CONVERT_IDS`] ids,
//! and when a bucket stops being the current one, the pending ids are
//! sorted into one table file that RocksDB ingests as it is, and only then
//! are their blobs deleted. A crash between the two leaves an id in both
//! places, never in neither: the blob is read again at open and converted
//! again, which writes the same key.
//!
//! Keys of a bucket, told apart by length: 24 bytes an id (its value the
//! trail or nothing), 25 an absorbed duplicate's trail (`audit`), 16 a blob
//! (`BLOB_MARK`, then its sequence number, big-endian). A blob's value is
//! one byte saying how long each id's trail is (0 or `TRAIL_BYTES`), then
//! each id followed by its trail. A batch that absorbed duplicates with
//! the audit on writes [`WITH_ABSORBED`] instead of that byte, the number
//! of delivered ids (u32, little-endian), the delivered ids with their
//! trails, then the absorbed duplicates' ids with theirs: their trails
//! ride in the batch's one value too, and become 25-byte keys only when
//! the blob is converted. A key per absorbed duplicate was the last per-id
//! memtable insert of a batch (a few % of `pipeline_file` with 10%
//! repeats). A look-up reads only the delivered part.
//!
//! Pending ids are loaded only from what RocksDB returns, never from the
//! write path: an id in memory is an id on disk. The write path only notes
//! which blobs it issued, so that a look-up reads those it has not loaded
//! yet (`DedupWindow::catch_up`) before it answers.

use std::collections::BTreeMap;

use super::audit::{ABSORBED, TRAIL_BYTES};
use crate::custody::ids::{DigestSet, IdDigest};

/// The first eight bytes of every blob key.
pub(crate) const BLOB_MARK: [u8; 8] = [0xff; 8];
pub(crate) const BLOB_KEY_BYTES: usize = 16;
const ID_BYTES: usize = 24;
/// The first byte of a blob that holds absorbed duplicates' trails after
/// its delivered ids (never a trail length).
pub(crate) const WITH_ABSORBED: u8 = 0xa1;
/// Pending ids of a bucket that are sorted into a table file at once:
/// their set is at most about 6.5 MiB (24 bytes and a control byte per
/// slot, 262,144 slots), and the file of a size RocksDB compacts cheaply.
pub(crate) const CONVERT_IDS: usize = 1 << 17;

pub(crate) type Trail = Option<[u8; TRAIL_BYTES]>;

pub(crate) fn blob_key(seq: u64) -> [u8; BLOB_KEY_BYTES] {
    let mut k = [0u8; BLOB_KEY_BYTES];
    k[..8].copy_from_slice(&BLOB_MARK);
    k[8..].copy_from_slice(&seq.to_be_bytes());
    k
}

/// The sequence number of a blob key; none for any other key.
pub(crate) fn blob_seq(key: &[u8]) -> Option<u64> {
    let (mark, seq) = key.split_first_chunk::<8>()?;
    let seq: [u8; 8] = seq.try_into().ok()?;
    (*mark == BLOB_MARK).then_some(u64::from_be_bytes(seq))
}

/// A batch's ids, with their trails when the batch has them, and the
/// trails of the duplicates it absorbed (kept only with trails).
pub(crate) fn encode(
    digests: &[IdDigest],
    trails: Option<&[[u8; TRAIL_BYTES]]>,
    absorbed: &[(IdDigest, [u8; TRAIL_BYTES])],
) -> Vec<u8> {
    let trail_len = if trails.is_some() { TRAIL_BYTES } else { 0 };
    let absorbed = if trails.is_some() { absorbed } else { &[] };
    let mut v = Vec::with_capacity(5 + (digests.len() + absorbed.len()) * (ID_BYTES + trail_len));
    if absorbed.is_empty() {
        v.push(trail_len as u8);
    } else {
        v.push(WITH_ABSORBED);
        // `pipeline.batch_size` (at most 100,000 records) and the plugin
        // contract's bound on events per record keep a batch far below 4G ids.
        v.extend_from_slice(&u32::try_from(digests.len()).unwrap_or(u32::MAX).to_le_bytes());
    }
    match trails {
        Some(trails) => {
            for (d, t) in digests.iter().zip(trails) {
                v.extend_from_slice(d);
                v.extend_from_slice(t);
            }
            for (d, t) in absorbed {
                v.extend_from_slice(d);
                v.extend_from_slice(t);
            }
        }
        None => {
            for d in digests {
                v.extend_from_slice(d);
            }
        }
    }
    v
}

/// A blob's two parts, checked: the delivered ids with their trails, and
/// the absorbed duplicates' ids with theirs.
pub(crate) struct Decoded<'v> {
    delivered: &'v [u8],
    absorbed: &'v [u8],
    unit: usize,
}

impl<'v> Decoded<'v> {
    /// Each delivered id with its trail.
    pub(crate) fn delivered(&self) -> impl Iterator<Item = (IdDigest, Trail)> + 'v {
        entries(self.delivered, self.unit)
    }

    /// Each absorbed duplicate's id with its trail.
    pub(crate) fn absorbed(&self) -> impl Iterator<Item = (IdDigest, Trail)> + 'v {
        entries(self.absorbed, self.unit)
    }

    pub(crate) fn absorbed_len(&self) -> usize {
        self.absorbed.len() / self.unit
    }
}

fn entries(bytes: &[u8], unit: usize) -> impl Iterator<Item = (IdDigest, Trail)> + '_ {
    bytes.chunks_exact(unit).map(|c| {
        let (id, trail) = c.split_at(ID_BYTES);
        // `chunks_exact` and the length checks of `decode` make both
        // conversions exact.
        let id: IdDigest = id.try_into().unwrap_or([0; ID_BYTES]);
        (id, trail.try_into().ok())
    })
}

/// Why a stored blob of ids cannot be read: the store is corrupt there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BlobError {
    #[error("an empty blob")]
    Empty,
    #[error("a blob cut inside its count of ids")]
    CutInCount,
    #[error("trails of {0} bytes (expected 0 or {TRAIL_BYTES})")]
    TrailLength(usize),
    #[error("{bytes} bytes of ids, not a multiple of {unit}")]
    Torn { bytes: usize, unit: usize },
    #[error("{said} delivered ids said, {there} there")]
    Count { said: usize, there: usize },
}

/// A blob's parts; the error says what is wrong with it.
pub(crate) fn decode(value: &[u8]) -> Result<Decoded<'_>, BlobError> {
    let (&first, rest) = value.split_first().ok_or(BlobError::Empty)?;
    let (trail_len, delivered_count, rest) = if first == WITH_ABSORBED {
        let (count, rest) = rest.split_first_chunk::<4>().ok_or(BlobError::CutInCount)?;
        (TRAIL_BYTES, Some(u32::from_le_bytes(*count) as usize), rest)
    } else {
        (usize::from(first), None, rest)
    };
    if trail_len != 0 && trail_len != TRAIL_BYTES {
        return Err(BlobError::TrailLength(trail_len));
    }
    let unit = ID_BYTES + trail_len;
    if !rest.len().is_multiple_of(unit) {
        return Err(BlobError::Torn { bytes: rest.len(), unit });
    }
    let split = match delivered_count {
        Some(n) => n
            .checked_mul(unit)
            .filter(|b| *b <= rest.len())
            .ok_or(BlobError::Count { said: n, there: rest.len() / unit })?,
        None => rest.len(),
    };
    let (delivered, absorbed) = rest.split_at(split);
    Ok(Decoded { delivered, absorbed, unit })
}

/// A key of a bucket as a blob holds it: an id delivered, or an absorbed
/// duplicate's trail (the id's key and `ABSORBED`), with its trail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    pub id: IdDigest,
    pub absorbed: bool,
    pub trail: Trail,
}

impl Entry {
    /// The key it has in a table: 24 bytes, or 25 for an absorbed trail.
    pub(crate) fn key(&self) -> ([u8; ID_BYTES + 1], usize) {
        let mut k = [ABSORBED; ID_BYTES + 1];
        k[..ID_BYTES].copy_from_slice(&self.id);
        (k, if self.absorbed { ID_BYTES + 1 } else { ID_BYTES })
    }
}

/// One bucket's blobs as the window knows them.
#[derive(Default)]
pub(crate) struct Pending {
    /// Whether the blobs on disk were read (at open, or at the first
    /// look-up of a window opened without its filter).
    pub scanned: bool,
    /// Blobs this process wrote and has not read back: sequence number,
    /// ids. Some may not be durable yet (or ever: a failed write).
    pub issued: BTreeMap<u64, usize>,
    /// Blobs read back, whose ids are in `ids` and not yet in a table
    /// file, in the order read.
    pub loaded: Vec<u64>,
    /// Every delivered id of the loaded blobs; their trails stay in the
    /// blobs (read again to convert them, or for `sluice audit`).
    pub ids: DigestSet,
    /// Absorbed duplicates' trails in the loaded blobs (never looked up).
    pub absorbed: usize,
}

impl Pending {
    /// The ids of a blob read back from the store.
    pub(crate) fn load(&mut self, seq: u64, value: &[u8]) -> Result<(), BlobError> {
        let blob = decode(value)?;
        for (id, _) in blob.delivered() {
            self.ids.insert(id);
        }
        self.absorbed += blob.absorbed_len();
        self.issued.remove(&seq);
        self.loaded.push(seq);
        Ok(())
    }

    /// Entries written or about to be, loaded or not.
    pub(crate) fn size(&self) -> usize {
        self.ids.len() + self.absorbed + self.issued.values().sum::<usize>()
    }

    /// Whether loaded blobs wait to be converted.
    pub(crate) fn has_loaded(&self) -> bool {
        !self.loaded.is_empty()
    }

    /// After a table file holds them: forget the ids, return the blobs
    /// that can be deleted.
    pub(crate) fn converted(&mut self) -> Vec<u64> {
        self.ids.clear();
        self.absorbed = 0;
        std::mem::take(&mut self.loaded)
    }
}

/// The entries of blobs (read in order) in key order, each key once with
/// its latest trail, as a table file takes them: an id's delivered entry
/// (24 bytes) before its absorbed one (25), as RocksDB orders the keys.
///
/// Sorted by a key of the digest's three words, big-endian so that their
/// order is the bytes' order, the entry's kind and its position: integers
/// compared in place. Sorting the entries themselves compared 24-byte
/// arrays by a call to `memcmp` (about 2.2 million calls for a table of
/// 131,072 ids) and moved 54-byte entries through a stable sort's scratch
/// buffer, about 3–4% of the front thread in `pipeline_file`; this takes
/// half the time (86–111 ns per id against 163–178, 131,072 ids with their
/// trails).
pub(crate) fn sorted(blobs: &[Vec<u8>]) -> Result<Vec<Entry>, BlobError> {
    let mut keys: Vec<([u64; 3], bool, usize)> = Vec::new();
    let mut trails: Vec<Trail> = Vec::new();
    for b in blobs {
        let blob = decode(b)?;
        for (id, trail) in blob.delivered() {
            keys.push((words(&id), false, trails.len()));
            trails.push(trail);
        }
        for (id, trail) in blob.absorbed() {
            keys.push((words(&id), true, trails.len()));
            trails.push(trail);
        }
    }
    keys.sort_unstable();
    let mut out = Vec::with_capacity(keys.len());
    for (k, (id, absorbed, at)) in keys.iter().enumerate() {
        // Of a key recorded twice, the later entry (the later blob) is the
        // last of its run, and the one kept.
        if keys.get(k + 1).is_none_or(|(next, a, _)| (next, a) != (id, absorbed)) {
            out.push(Entry { id: bytes(id), absorbed: *absorbed, trail: trails[*at] });
        }
    }
    Ok(out)
}

fn bytes(words: &[u64; 3]) -> IdDigest {
    let mut id = [0u8; ID_BYTES];
    for (chunk, w) in id.chunks_exact_mut(8).zip(words) {
        chunk.copy_from_slice(&w.to_be_bytes());
    }
    id
}

fn words(id: &IdDigest) -> [u64; 3] {
    std::array::from_fn(|w| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&id[w * 8..w * 8 + 8]);
        u64::from_be_bytes(b)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::custody::ids::{PIPELINE_SCOPE, digest};

    #[test]
    fn blob_keys_are_told_from_ids_and_trails_by_their_length_and_mark() {
        assert_eq!(blob_seq(&blob_key(0)), Some(0));
        assert_eq!(blob_seq(&blob_key(u64::MAX - 1)), Some(u64::MAX - 1));
        let id = digest(&PIPELINE_SCOPE, "a");
        assert_eq!(blob_seq(&id), None, "a 24-byte id");
        assert_eq!(blob_seq(&[0xff; 24]), None, "an id of all ones is still 24 bytes");
        assert_eq!(blob_seq(&[0xfe; 16]), None, "16 bytes without the mark");
        // Blob keys sort by sequence number.
        assert!(blob_key(9) < blob_key(10) && blob_key(255) < blob_key(256));
    }

    #[test]
    fn blobs_round_trip_with_and_without_trails_and_reject_what_is_torn() {
        let ids: Vec<IdDigest> = (0..5).map(|i| digest(&PIPELINE_SCOPE, &format!("id-{i}"))).collect();
        let plain: Vec<(IdDigest, Trail)> =
            decode(&encode(&ids, None, &[])).map(|b| b.delivered().collect()).unwrap_or_default();
        assert_eq!(plain, ids.iter().map(|d| (*d, None)).collect::<Vec<_>>());
        let trails: Vec<[u8; TRAIL_BYTES]> = (0..5u8).map(|i| [i; TRAIL_BYTES]).collect();
        let with: Vec<(IdDigest, Trail)> =
            decode(&encode(&ids, Some(&trails), &[])).map(|b| b.delivered().collect()).unwrap_or_default();
        assert_eq!(with, ids.iter().zip(&trails).map(|(d, t)| (*d, Some(*t))).collect::<Vec<_>>());
        let torn = &encode(&ids, None, &[])[..50];
        assert!(decode(torn).err().is_some_and(|e| e.to_string().contains("not a multiple of 24")));
        assert!(decode(&[]).err().is_some_and(|e| e.to_string().contains("empty")));
        assert!(decode(&[7, 0, 0]).err().is_some_and(|e| e.to_string().contains("trails of 7 bytes")));
    }

    #[test]
    fn sorted_keeps_each_id_once_with_the_trail_of_its_latest_blob() {
        let ids: Vec<IdDigest> = (0..50).map(|i| digest(&PIPELINE_SCOPE, &format!("s-{i}"))).collect();
        let first = encode(&ids[..30], Some(&vec![[1; TRAIL_BYTES]; 30]), &[]);
        let second = encode(&ids[20..], Some(&vec![[2; TRAIL_BYTES]; 30]), &[]);
        let v = sorted(&[first, second]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v.len(), 50);
        assert!(v.windows(2).all(|w| w[0].id < w[1].id), "strictly in key order");
        for e in &v {
            let i = ids.iter().position(|d| *d == e.id).unwrap_or(usize::MAX);
            let want = if i >= 20 { [2; TRAIL_BYTES] } else { [1; TRAIL_BYTES] };
            assert_eq!((e.trail, e.absorbed), (Some(want), false), "id {i}");
        }
        assert!(sorted(&[vec![0, 1, 2]]).is_err(), "a torn blob is an error");
    }

    /// The integer keys order ids as their bytes do, and ties go to the
    /// later blob: held against a stable sort of the entries themselves.
    #[test]
    fn sorted_agrees_with_a_stable_sort_of_the_entries() {
        // Ids that share their first 8 or 16 bytes, and repeats across blobs.
        let ids: Vec<IdDigest> = (0..400u32)
            .map(|i| {
                let mut d = digest(&PIPELINE_SCOPE, &format!("k-{}", i % 150));
                if i % 7 == 0 {
                    d[..16].copy_from_slice(&[0xab; 16]);
                } else if i % 5 == 0 {
                    d[..8].copy_from_slice(&[0x01; 8]);
                }
                d
            })
            .collect();
        let blobs: Vec<Vec<u8>> = ids
            .chunks(64)
            .enumerate()
            .map(|(b, c)| {
                // Every third blob absorbed a duplicate of some of its ids.
                let absorbed: Vec<(IdDigest, [u8; TRAIL_BYTES])> = if b % 3 == 0 {
                    c.iter().step_by(4).map(|d| (*d, [100 + b as u8; TRAIL_BYTES])).collect()
                } else {
                    vec![]
                };
                encode(c, Some(&vec![[b as u8; TRAIL_BYTES]; c.len()]), &absorbed)
            })
            .collect();
        let mut expected: Vec<Entry> = Vec::new();
        for b in &blobs {
            let blob = decode(b).unwrap_or_else(|e| panic!("{e}"));
            expected.extend(blob.delivered().map(|(id, trail)| Entry { id, absorbed: false, trail }));
            expected.extend(blob.absorbed().map(|(id, trail)| Entry { id, absorbed: true, trail }));
        }
        // By the keys' bytes, as RocksDB orders them.
        expected.sort_by(|a, b| {
            let (ka, la) = a.key();
            let (kb, lb) = b.key();
            ka[..la].cmp(&kb[..lb])
        });
        expected.reverse();
        expected.dedup_by(|later, earlier| later.key() == earlier.key());
        expected.reverse();
        assert!(expected.iter().any(|e| e.absorbed), "the blobs hold absorbed trails");
        assert_eq!(sorted(&blobs).unwrap_or_else(|e| panic!("{e}")), expected);
    }

    #[test]
    fn pending_counts_issued_blobs_until_they_are_loaded_and_forgets_them_once_converted() {
        let ids: Vec<IdDigest> = (0..3).map(|i| digest(&PIPELINE_SCOPE, &format!("p-{i}"))).collect();
        let mut p = Pending::default();
        p.issued.insert(4, 3);
        p.issued.insert(5, 7);
        assert_eq!(p.size(), 10);
        p.load(4, &encode(&ids, None, &[])).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((p.size(), p.ids.len(), p.loaded.clone()), (10, 3, vec![4]));
        assert_eq!(p.converted(), vec![4]);
        assert_eq!((p.ids.len(), p.size()), (0, 7), "blob 5 is still issued");
    }

    /// Absorbed trails ride after the delivered ids, are never taken for
    /// delivered ones, and a blob that lies about its count is refused.
    #[test]
    fn a_blob_keeps_absorbed_trails_apart_from_its_delivered_ids() {
        let ids: Vec<IdDigest> = (0..4).map(|i| digest(&PIPELINE_SCOPE, &format!("a-{i}"))).collect();
        let trails = [[1; TRAIL_BYTES], [2; TRAIL_BYTES]];
        let absorbed = [(ids[2], [3; TRAIL_BYTES]), (ids[3], [4; TRAIL_BYTES])];
        let v = encode(&ids[..2], Some(&trails), &absorbed);
        assert_eq!(v[0], WITH_ABSORBED);
        let blob = decode(&v).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(blob.delivered().collect::<Vec<_>>(), vec![(ids[0], Some(trails[0])), (ids[1], Some(trails[1]))]);
        assert_eq!(blob.absorbed().collect::<Vec<_>>(), absorbed.map(|(d, t)| (d, Some(t))).to_vec());
        let mut p = Pending::default();
        p.load(1, &v).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((p.ids.len(), p.absorbed, p.size()), (2, 2, 4));
        assert!(!p.ids.contains(&ids[2]) && !p.ids.contains(&ids[3]), "an absorbed duplicate is not a delivered id");
        // Without trails (audit off) there is nothing to keep of them.
        assert_eq!(encode(&ids[..2], None, &absorbed), encode(&ids[..2], None, &[]));
        // Only absorbed duplicates: a blob all the same.
        let only = encode(&[], Some(&[]), &absorbed);
        let only = decode(&only).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((only.delivered().count(), only.absorbed().count()), (0, 2));
        // A count beyond what the blob holds, and one cut short.
        let mut lying = v.clone();
        lying[1..5].copy_from_slice(&9u32.to_le_bytes());
        assert!(decode(&lying).err().is_some_and(|e| e.to_string().contains("9 delivered ids said, 4 there")));
        assert!(decode(&v[..3]).err().is_some_and(|e| e.to_string().contains("cut inside its count")));
    }
}
