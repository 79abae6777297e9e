//! What a state folder holds before RocksDB is let at it, and what a store
//! that cannot be read costs.
//!
//! The store is the only record of what was delivered: started empty over
//! a store it cannot read, sluice would deliver again every record it can no
//! longer tell it delivered (a file pipeline re-reads its files from the
//! start). So a folder that is not a sluice store, or a store RocksDB
//! cannot open, stops the start with a message naming the store, what is
//! wrong, and the three ways on, with what each costs. RocksDB is never
//! asked to create a store in a folder that holds one it cannot find (a
//! missing `CURRENT`), which it would otherwise start empty beside.
//!
//! One damage is recovered by itself: a write-ahead log that ends in the
//! middle of a record. That is what a crash during a write leaves (power
//! lost, or SIGKILL between the pages of a large write(2)), and the torn
//! write was never acknowledged, so its batch's checkpoint never moved:
//! dropping it is exactly right, and refusing would turn every such crash
//! into a page for an operator. RocksDB recovers every whole record before
//! it (`TolerateCorruptedTailRecords`; a record damaged anywhere else stops
//! the start) and `torn_tails` finds it first so that it is said, naming
//! the file and the bytes dropped. A log cut short by anything else (a copy
//! that stopped early) looks the same; what it costs then is said too: the
//! batches whose writes were cut are read again and, their ids gone with
//! them, delivered again. Duplicates, never loss.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// What each way on costs, said with every refusal.
pub(crate) const WAYS_ON: &str = "sluice will not start over a store it cannot read: starting empty would deliver again \
     every record it could no longer tell it had delivered. Either (1) restore the folder from a backup: records \
     committed since the backup are read again, and those delivered since are delivered again; or (2) run `sluice \
     store repair -c <config>`: RocksDB keeps every record it can still read, and what it cannot is read again and \
     delivered again (the damaged files' batches); or (3) move the folder away and start over: a file pipeline \
     reads its files from the start, a Kafka pipeline restores its ids from the dedup changelog if it has one; \
     without one, everything in the dedup window is delivered again";

/// What the folder at `pipeline.state_dir` is.
#[derive(Debug, PartialEq, Eq)]
#[allow(clippy::enum_variant_names)] // NotAFolder: a file stands where a folder should.
pub(crate) enum Folder {
    /// Nothing there yet, or an empty folder: a new store.
    New,
    /// A RocksDB store (it has `CURRENT`).
    Store,
    /// A file where the folder should be.
    NotAFolder,
    /// Store files without `CURRENT`: a store whose root is lost.
    Headless(Vec<String>),
    /// Files, none of them a store's.
    Foreign(Vec<String>),
}

/// Look at `path` without changing it.
pub(crate) fn inspect(path: &Path) -> std::io::Result<Folder> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Folder::New),
        Err(e) => return Err(e),
    };
    if !meta.is_dir() {
        return Ok(Folder::NotAFolder);
    }
    // A file system's own `lost+found` is there in a new volume mounted as
    // the state folder.
    let mut names: Vec<String> = std::fs::read_dir(path)?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "lost+found")
        .collect();
    names.sort();
    if names.is_empty() {
        return Ok(Folder::New);
    }
    if names.iter().any(|n| n == "CURRENT") {
        return Ok(Folder::Store);
    }
    let is_store_file =
        |n: &String| n.starts_with("MANIFEST-") || n.ends_with(".sst") || n.ends_with(".log") || n == "IDENTITY";
    let store_files: Vec<String> = names.iter().filter(|n| is_store_file(n)).cloned().collect();
    if store_files.is_empty() {
        Ok(Folder::Foreign(names.into_iter().take(5).collect()))
    } else {
        Ok(Folder::Headless(store_files.into_iter().take(5).collect()))
    }
}

/// The MANIFEST with the highest number in `path`: the one a lost
/// CURRENT named (RocksDB writes a new one and then points CURRENT at it).
pub(crate) fn newest_manifest(path: &Path) -> Option<String> {
    std::fs::read_dir(path)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let n: u64 = name.strip_prefix("MANIFEST-")?.parse().ok()?;
            Some((n, name))
        })
        .max()
        .map(|(_, name)| name)
}

/// A write-ahead log that ends inside a record.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TornTail {
    pub file: PathBuf,
    /// Where the last whole record ends: what RocksDB keeps.
    pub whole: u64,
    pub size: u64,
}

/// RocksDB's log format: 32 KiB blocks of records, each a 7-byte header
/// (checksum, length, type) and its bytes; a record too long for its block
/// is split into FIRST, MIDDLE… and LAST fragments. A block's last six bytes
/// or fewer are padding.
const BLOCK: u64 = 32 * 1024;
const HEADER: u64 = 7;
/// The recyclable kinds' header carries the log number too.
const RECYCLABLE_HEADER: u64 = 11;

/// Each write-ahead log of the store at `path` that ends inside a record
/// (checksums are RocksDB's to check; this reads only the framing: a
/// header per record, skipping the bodies, so a large log costs little).
pub(crate) fn torn_tails(path: &Path) -> Vec<TornTail> {
    let Ok(entries) = std::fs::read_dir(path) else { return Vec::new() };
    let mut logs: Vec<PathBuf> =
        entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "log")).collect();
    logs.sort();
    logs.into_iter()
        .filter_map(|file| {
            let mut f = std::fs::File::open(&file).ok()?;
            let size = f.metadata().ok()?.len();
            let whole = whole_prefix(&mut f, size).ok()?;
            (whole < size).then_some(TornTail { file, whole, size })
        })
        .collect()
}

/// How many of a log's first bytes (`len` in all) hold whole records
/// (fragments up to a LAST); a zero-filled end (preallocated space) counts
/// as whole.
pub(crate) fn whole_prefix<R: Read + Seek>(log: &mut R, len: u64) -> std::io::Result<u64> {
    let (mut at, mut whole) = (0u64, 0u64);
    let mut header = [0u8; HEADER as usize];
    while at < len {
        let left_in_block = BLOCK - at % BLOCK;
        if left_in_block < HEADER {
            // Padding to the block's end.
            at += left_in_block;
            if at >= len {
                return Ok(len);
            }
            continue;
        }
        if at + HEADER > len {
            return Ok(if zeros_from(log, at, len)? { len } else { whole });
        }
        log.seek(SeekFrom::Start(at))?;
        log.read_exact(&mut header)?;
        let length = u16::from_le_bytes([header[4], header[5]]) as u64;
        let kind = header[6];
        if kind == 0 && length == 0 {
            // Zeroes: preallocated, never written. What follows must be
            // zeroes too, or the file is damaged (RocksDB says how).
            return Ok(if zeros_from(log, at, len)? { len } else { whole });
        }
        let header_len = if (5..=8).contains(&kind) { RECYCLABLE_HEADER } else { HEADER };
        let end = at + header_len + length;
        if end > len || length > left_in_block {
            return Ok(whole);
        }
        at = end;
        // FULL or LAST (and their recyclable kinds) end a record.
        if matches!(kind, 1 | 4 | 5 | 8) {
            whole = at;
        }
    }
    // Ended on a LAST (whole == len) or inside a FIRST…MIDDLE run (torn).
    Ok(whole)
}

/// Whether the bytes from `at` to `len` are all zero.
fn zeros_from<R: Read + Seek>(log: &mut R, at: u64, len: u64) -> std::io::Result<bool> {
    log.seek(SeekFrom::Start(at))?;
    let mut left = len - at;
    let mut buf = vec![0u8; 64 * 1024];
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        log.read_exact(&mut buf[..n])?;
        if buf[..n].iter().any(|b| *b != 0) {
            return Ok(false);
        }
        left -= n as u64;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole_prefix(log: &[u8]) -> u64 {
        super::whole_prefix(&mut std::io::Cursor::new(log), log.len() as u64).unwrap_or_else(|e| panic!("{e}"))
    }

    fn record(kind: u8, body: &[u8]) -> Vec<u8> {
        // A checksum's bytes (not checked here; never all zero in a test).
        let mut r = vec![0x5a, 0x17, 0x3c, 0x99];
        r.extend_from_slice(&(body.len() as u16).to_le_bytes());
        r.push(kind);
        r.extend_from_slice(body);
        r
    }

    #[test]
    fn whole_records_are_whole_and_a_cut_one_is_found() {
        let mut log = record(1, b"first batch");
        log.extend(record(1, b"second batch"));
        let whole = log.len() as u64;
        assert_eq!(whole_prefix(&log), whole);
        // Cut inside the third record's body, and inside its header.
        let third = record(1, b"third batch, torn");
        for cut in [3, 9] {
            let mut torn = log.clone();
            torn.extend_from_slice(&third[..cut]);
            assert_eq!(whole_prefix(&torn), whole, "cut after {cut} bytes of the record");
        }
        // A FIRST fragment with no LAST: torn too.
        let mut torn = log.clone();
        torn.extend(record(2, b"the start of a long record"));
        assert_eq!(whole_prefix(&torn), whole);
        torn.extend(record(4, b"its end"));
        assert_eq!(whole_prefix(&torn), torn.len() as u64);
        // Preallocated zeroes after the records are not a tear.
        let mut padded = log.clone();
        padded.extend(vec![0u8; 4096]);
        assert_eq!(whole_prefix(&padded), padded.len() as u64);
    }

    #[test]
    fn a_folder_is_told_apart_before_rocksdb_touches_it() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(inspect(&dir.path().join("nope")).ok(), Some(Folder::New));
        assert_eq!(inspect(dir.path()).ok(), Some(Folder::New));
        std::fs::create_dir(dir.path().join("lost+found")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(inspect(dir.path()).ok(), Some(Folder::New), "a new volume's lost+found");
        let file = dir.path().join("a-file");
        std::fs::write(&file, "x").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(inspect(&file).ok(), Some(Folder::NotAFolder));
        assert_eq!(inspect(dir.path()).ok(), Some(Folder::Foreign(vec!["a-file".into()])));
        std::fs::write(dir.path().join("000009.log"), "x").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("LOG"), "x").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(inspect(dir.path()).ok(), Some(Folder::Headless(vec!["000009.log".into()])));
        std::fs::write(dir.path().join("CURRENT"), "MANIFEST-000010\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(inspect(dir.path()).ok(), Some(Folder::Store));
    }
}
