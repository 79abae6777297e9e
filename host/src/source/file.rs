//! The file source: each file (a path, or a glob's match) is a partition.
//!
//! A record's position is (rotation generation, byte offset). For the
//! offset tracker both are packed into one increasing number,
//! `generation << 40 | offset` (files up to 1 TiB), so positions keep
//! increasing across a rotation. The checkpoint also keeps the file's device
//! and inode, so that after a rename rotation the file being read is found
//! again under its new name and finished before the new file starts.

use std::fs::File;
use std::io::{BufReader, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use super::framing::LineReader;
use crate::record::Record;
use crate::store::Checkpoint;

const OFFSET_BITS: u32 = 40;

/// Pack (generation, offset) into one increasing position.
pub(crate) fn pack(generation: u64, offset: u64) -> u64 {
    (generation << OFFSET_BITS) | (offset & ((1 << OFFSET_BITS) - 1))
}

pub(crate) fn unpack(position: u64) -> (u64, u64) {
    (position >> OFFSET_BITS, position & ((1 << OFFSET_BITS) - 1))
}

/// Why the file source cannot read.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// A configured path is not a glob, or a match cannot be read.
    #[error("source path {pattern:?}: {message}")]
    Pattern {
        /// The path as configured.
        pattern: String,
        /// glob's reason.
        message: String,
    },
    /// A file cannot be opened or read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
}

/// Every file matched by `patterns` (paths or globs), sorted, deduplicated.
pub(crate) fn discover(patterns: &[String]) -> Result<Vec<PathBuf>, SourceError> {
    let mut files = Vec::new();
    for pattern in patterns {
        let paths = glob::glob(pattern)
            .map_err(|e| SourceError::Pattern { pattern: pattern.clone(), message: e.to_string() })?;
        for p in paths {
            let p = p.map_err(|e| SourceError::Pattern { pattern: pattern.clone(), message: e.to_string() })?;
            if p.is_file() {
                files.push(p);
            }
        }
    }
    files.sort();
    files.dedup();
    Ok(files)
}

/// A line framed into a batch's buffer: its bytes there, and where it
/// lies in its file.
struct Framed {
    bytes: std::ops::Range<usize>,
    offset: u64,
    generation: u64,
    end: u64,
}

/// A line read from a file, with its byte range and packed positions.
pub struct SourceRecord {
    /// The line, without its newline.
    pub record: Record,
    /// Packed position (generation and offset) of the first byte.
    pub start: u64,
    /// Packed position of the byte after the line's end: the checkpoint
    /// once this line is finished.
    pub next: u64,
    /// Longer than `max_line_bytes`: quarantined whole, never parsed.
    pub oversize: bool,
}

struct Open {
    reader: LineReader<BufReader<File>>,
    generation: u64,
    dev: u64,
    ino: u64,
    /// The file's first bytes (up to HEAD_BYTES) when last looked at: a
    /// copytruncate followed by new writes past our position changes them.
    head: Vec<u8>,
}

const HEAD_BYTES: usize = 256;

/// What a checkpoint needs to find a file again.
#[derive(Debug, Clone)]
struct FileId {
    generation: u64,
    dev: u64,
    ino: u64,
    head: Vec<u8>,
}

impl Open {
    fn id(&self) -> FileId {
        FileId { generation: self.generation, dev: self.dev, ino: self.ino, head: self.head.clone() }
    }
}

/// Whether the file at `path` still begins with the bytes `cp` saw.
fn same_head(path: &Path, cp: &Checkpoint) -> bool {
    if cp.head_len == 0 {
        return true;
    }
    let head = read_head(path);
    head.len() as u64 >= cp.head_len && blake3::hash(&head[..cp.head_len as usize]).to_hex().as_str() == cp.head_hash
}

fn read_head(path: &Path) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let Ok(f) = File::open(path) else { return Vec::new() };
    let mut buf = vec![0u8; HEAD_BYTES];
    let n = f.read_at(&mut buf, 0).unwrap_or(0);
    buf.truncate(n);
    buf
}

/// One file being read, following its rotations.
pub struct FilePartition {
    path: PathBuf,
    /// Shared by the position of every line read (`Position::File`).
    key: Arc<str>,
    max_line: u64,
    /// Following a file that is being written: a line counts only once its
    /// line end is there (the writer may be in the middle of it).
    follow: bool,
    /// The last line of a file finished by a truncation, emitted next.
    carry: Option<SourceRecord>,
    /// The last batch's bytes and lines: what the next batch's buffers are
    /// allocated with (nothing after an empty batch: a followed file that
    /// is idle costs no allocation per poll).
    batch_bytes: usize,
    batch_lines: usize,
    /// A batch ends at this many bytes (or at its record count): with long
    /// lines, memory is bounded by bytes, not lines.
    max_batch_bytes: usize,
    current: Open,
    /// Files still to read after the current one (after a rotation found at start-up).
    queue: Vec<Open>,
    /// Files finished since: a checkpoint may still point into one of them
    /// until a batch moves past its end.
    retired: Vec<FileId>,
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> SourceError + '_ {
    move |source| SourceError::Io { path: path.to_path_buf(), source }
}

/// Each open file's read buffer. Every file a run reads holds one while it
/// is open, so it is what a run of a thousand files pays per file
/// (`benches/partitions`: 256 KiB made 256 files 214 MiB of RSS); a 64 KiB
/// read is still hundreds of lines a syscall.
const READ_BUFFER: usize = 64 * 1024;

fn open_at(path: &Path, offset: u64, generation: u64) -> Result<Open, SourceError> {
    let mut file = File::open(path).map_err(io(path))?;
    let meta = file.metadata().map_err(io(path))?;
    file.seek(SeekFrom::Start(offset)).map_err(io(path))?;
    Ok(Open {
        reader: LineReader::starting_at(BufReader::with_capacity(READ_BUFFER, file), offset),
        generation,
        dev: meta.dev(),
        ino: meta.ino(),
        head: read_head(path),
    })
}

/// The file with this device and inode in `dir`, if any: where a rename
/// rotation moved the file being read.
fn find_inode(dir: &Path, dev: u64, ino: u64) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| std::fs::metadata(p).map(|m| m.dev() == dev && m.ino() == ino && m.is_file()).unwrap_or(false))
}

impl FilePartition {
    /// Open `path`, resuming from `checkpoint` when there is one.
    pub fn open(
        path: &Path,
        checkpoint: Option<&Checkpoint>,
        max_line: u64,
        follow: bool,
    ) -> Result<FilePartition, SourceError> {
        let key: Arc<str> = path.display().to_string().into();
        let meta = std::fs::metadata(path).map_err(io(path))?;
        let (current, queue) = match checkpoint {
            None => (open_at(path, 0, 0)?, Vec::new()),
            Some(cp) if cp.dev == meta.dev() && cp.ino == meta.ino() => {
                if meta.len() >= cp.offset && same_head(path, cp) {
                    (open_at(path, cp.offset, cp.generation)?, Vec::new())
                } else {
                    tracing::warn!(file = %key, offset = cp.offset, size = meta.len(),
                        "file was truncated since its checkpoint (copytruncate rotation); reading it from the start as a new generation");
                    (open_at(path, 0, cp.generation + 1)?, Vec::new())
                }
            }
            Some(cp) => {
                let dir = path.parent().unwrap_or(Path::new("."));
                match find_inode(dir, cp.dev, cp.ino) {
                    Some(rotated) => {
                        tracing::info!(file = %key, rotated = %rotated.display(), "finishing the rotated file before the new one");
                        (open_at(&rotated, cp.offset, cp.generation)?, vec![open_at(path, 0, cp.generation + 1)?])
                    }
                    None => {
                        tracing::warn!(file = %key, "the file of the checkpoint is gone (rotated away and removed); starting the new file");
                        (open_at(path, 0, cp.generation + 1)?, Vec::new())
                    }
                }
            }
        };
        Ok(FilePartition {
            path: path.to_path_buf(),
            key,
            max_line,
            follow,
            carry: None,
            batch_bytes: 0,
            batch_lines: 0,
            max_batch_bytes: usize::MAX,
            current,
            queue,
            retired: Vec::new(),
        })
    }

    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// The packed position reading resumes from.
    pub(crate) fn position(&self) -> u64 {
        pack(self.current.generation, self.current.reader.position())
    }

    /// Bytes the current file has beyond what was read (a partial line
    /// kept back in follow mode counts as read: it is not waiting on
    /// sluice), and every byte of the files queued after it. One `stat`
    /// per file open; asked once per batch.
    pub(crate) fn unread(&self) -> u64 {
        // The open handle, not the path: the file being read may have been
        // renamed away.
        let len = |o: &Open| o.reader.get_ref().get_ref().metadata().map(|m| m.len()).unwrap_or(0);
        let queued: u64 = self.queue.iter().map(len).sum();
        len(&self.current).saturating_sub(self.current.reader.consumed()) + queued
    }

    /// End each batch at `bytes` of lines (after the line that crosses it;
    /// a batch always has at least one line).
    pub(crate) fn with_batch_bytes(mut self, bytes: u64) -> Self {
        self.max_batch_bytes = usize::try_from(bytes).unwrap_or(usize::MAX).max(1);
        self
    }

    /// Up to `max` records, and `max_batch_bytes`; empty at the end of the
    /// input (for now).
    ///
    /// Every line of the batch is framed into one buffer, and each record's
    /// payload is a slice of it: one allocation per batch, not one per
    /// line, and the stages and sinks downstream share those bytes.
    pub fn next_batch(&mut self, max: usize) -> Result<Vec<SourceRecord>, SourceError> {
        let lines = self.batch_lines.min(max);
        let mut out = Vec::with_capacity(lines);
        out.extend(self.carry.take());
        let mut data = Vec::with_capacity(self.batch_bytes);
        let mut framed: Vec<Framed> = Vec::with_capacity(lines);
        while out.len() + framed.len() < max && data.len() < self.max_batch_bytes {
            let begin = data.len();
            let reader = &mut self.current.reader;
            let line =
                if self.follow { reader.next_complete_line_into(&mut data) } else { reader.next_line_into(&mut data) }
                    .map_err(io(&self.path))?;
            let Some(offset) = line else {
                if self.queue.is_empty() {
                    break;
                }
                // This file is finished (rotated away): its unterminated
                // tail, if any, is its last line.
                if let Some(offset) = self.current.reader.take_partial_into(&mut data) {
                    let end = offset + (data.len() - begin) as u64;
                    framed.push(Framed { bytes: begin..data.len(), offset, generation: self.current.generation, end });
                }
                let next = self.queue.remove(0);
                let done = std::mem::replace(&mut self.current, next);
                self.retired.push(done.id());
                continue;
            };
            let end = self.current.reader.position();
            framed.push(Framed { bytes: begin..data.len(), offset, generation: self.current.generation, end });
        }
        // The next batch of this file is likely the same size: its buffer
        // is allocated once at that size (a few MiB at most, so that one
        // batch of huge lines does not size every later one).
        self.batch_bytes = data.len().min(4 << 20);
        self.batch_lines = framed.len().min(4096);
        let data = Bytes::from(data);
        out.extend(framed.into_iter().map(|f| self.record(data.slice(f.bytes), f.offset, f.generation, f.end)));
        Ok(out)
    }

    fn record(&self, payload: Bytes, offset: u64, generation: u64, end: u64) -> SourceRecord {
        let start = pack(generation, offset);
        let next = pack(generation, end);
        let oversize = payload.len() as u64 > self.max_line;
        SourceRecord { record: Record::line(payload, self.key.clone(), generation, offset), start, next, oversize }
    }

    /// The current file's unterminated tail as a record, when it has one.
    fn finish_current(&mut self) -> Option<SourceRecord> {
        let mut bytes = Vec::new();
        let offset = self.current.reader.take_partial_into(&mut bytes)?;
        let end = offset + bytes.len() as u64;
        Some(self.record(bytes.into(), offset, self.current.generation, end))
    }

    /// In follow mode, at the end of input: has the file been rotated?
    ///
    /// - A new inode at the path (rename-and-create): the new file is queued
    ///   and the renamed one is read to its end first, since lines may have
    ///   reached it between our last read and the rename.
    /// - The same inode, shorter than our position (copytruncate): read it
    ///   from the start as the next generation. Lines written between our
    ///   last read and the truncation exist only in the copy: the same
    ///   window every tailer has with copytruncate; prefer rename rotation.
    pub(crate) fn follow_rotation(&mut self) -> Result<bool, SourceError> {
        if !self.queue.is_empty() {
            return Ok(false);
        }
        let Ok(meta) = std::fs::metadata(&self.path) else { return Ok(false) };
        let generation = self.current.generation + 1;
        if meta.dev() != self.current.dev || meta.ino() != self.current.ino {
            tracing::info!(file = %self.key, generation, "file rotated (renamed): finishing the old file, then reading the new one");
            self.queue.push(open_at(&self.path, 0, generation)?);
            return Ok(true);
        }
        let head = read_head(&self.path);
        let known = self.current.head.len().min(head.len());
        let rewritten = head[..known] != self.current.head[..known];
        if meta.len() < self.current.reader.position() || rewritten {
            tracing::info!(file = %self.key, generation, "file truncated (copytruncate); reading it from the start");
            self.carry = self.finish_current();
            let done = std::mem::replace(&mut self.current, open_at(&self.path, 0, generation)?);
            self.retired.push(done.id());
            return Ok(true);
        }
        if head.len() > self.current.head.len() {
            // The file was shorter than HEAD_BYTES when opened: remember more.
            self.current.head = head;
        }
        Ok(false)
    }

    /// The checkpoint for a committed packed position. The position may be
    /// the end of a file already finished (a rotation whose new file was
    /// still empty): the checkpoint must then name *that* file, or a restart
    /// would seek the new file to the old file's offset and skip its start.
    pub(crate) fn checkpoint_for(&mut self, committed: u64) -> Checkpoint {
        let (generation, offset) = unpack(committed);
        self.retired.retain(|f| f.generation >= generation);
        let file = std::iter::once(&self.current)
            .chain(&self.queue)
            .find(|o| o.generation == generation)
            .map(Open::id)
            .or_else(|| self.retired.iter().find(|f| f.generation == generation).cloned())
            // Unreachable: positions only come from files this partition read.
            .unwrap_or_else(|| self.current.id());
        // Only bytes below the checkpoint are known to be this file's.
        let head = &file.head[..file.head.len().min(offset as usize)];
        Checkpoint {
            generation,
            offset,
            dev: file.dev,
            ino: file.ino,
            head_len: head.len() as u64,
            head_hash: blake3::hash(head).to_hex().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_at_the_end_of_a_rotated_file_names_that_file() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let log = dir.path().join("app.log");
        std::fs::write(&log, "a\nb\n").unwrap_or_else(|e| panic!("{e}"));
        let old_ino = std::fs::metadata(&log).map(|m| m.ino()).unwrap_or(0);
        let mut part = FilePartition::open(&log, None, 1024, false).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(part.next_batch(10).map(|b| b.len()).ok(), Some(2));
        // Rename rotation; the new file is still empty when we switch.
        std::fs::rename(&log, dir.path().join("app.log.1")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&log, "").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(part.follow_rotation().ok(), Some(true));
        assert_eq!(part.next_batch(10).map(|b| b.len()).ok(), Some(0), "old file drained, new one empty");
        let cp = part.checkpoint_for(pack(0, 4));
        assert_eq!((cp.generation, cp.offset, cp.ino), (0, 4, old_ino), "the checkpoint names the old file");
        // A restart from it finishes the old file (nothing left) and reads
        // the new one from its start.
        std::fs::write(&log, "c\n").unwrap_or_else(|e| panic!("{e}"));
        let mut part = FilePartition::open(&log, Some(&cp), 1024, false).unwrap_or_else(|e| panic!("{e}"));
        let lines: Vec<Bytes> = part.next_batch(10).unwrap_or_default().into_iter().map(|r| r.record.payload).collect();
        assert_eq!(lines, vec![Bytes::from_static(b"c")]);
    }

    #[test]
    fn a_file_truncated_and_regrown_while_stopped_is_read_from_its_start() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let log = dir.path().join("app.log");
        std::fs::write(&log, "first\nsecond\n").unwrap_or_else(|e| panic!("{e}"));
        let mut part = FilePartition::open(&log, None, 1024, false).unwrap_or_else(|e| panic!("{e}"));
        let batch = part.next_batch(10).unwrap_or_default();
        let cp = part.checkpoint_for(batch[1].next);
        drop(part);
        // copytruncate while stopped, then more than before is written.
        let file = std::fs::OpenOptions::new().write(true).open(&log).unwrap_or_else(|e| panic!("{e}"));
        file.set_len(0).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&log, "third line, longer than before\nfourth\n").unwrap_or_else(|e| panic!("{e}"));
        let mut part = FilePartition::open(&log, Some(&cp), 1024, false).unwrap_or_else(|e| panic!("{e}"));
        let lines: Vec<(u64, Bytes)> = part
            .next_batch(10)
            .unwrap_or_default()
            .into_iter()
            .map(|r| (unpack(r.start).0, r.record.payload))
            .collect();
        assert_eq!(
            lines,
            vec![(1, Bytes::from_static(b"third line, longer than before")), (1, Bytes::from_static(b"fourth"))]
        );
    }

    /// The records of a batch are slices of one buffer, line after line,
    /// across a rename rotation inside the batch too: one allocation per
    /// batch, not one per line.
    #[test]
    fn a_batch_ends_at_its_bytes_as_well_as_its_lines() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let log = dir.path().join("app.log");
        let line = format!("{}\n", "x".repeat(99));
        std::fs::write(&log, line.repeat(10)).unwrap_or_else(|e| panic!("{e}"));
        let mut part =
            FilePartition::open(&log, None, 1024, false).unwrap_or_else(|e| panic!("{e}")).with_batch_bytes(250);
        // 0, 100 and 200 bytes are under 250: the third line crosses it.
        let sizes: Vec<usize> = (0..5).map(|_| part.next_batch(1000).map(|b| b.len()).unwrap_or(0)).collect();
        assert_eq!(sizes, [3, 3, 3, 1, 0]);
        // A line longer than the bound is a batch of its own.
        let mut part =
            FilePartition::open(&log, None, 1024, false).unwrap_or_else(|e| panic!("{e}")).with_batch_bytes(1);
        assert_eq!(part.next_batch(1000).map(|b| b.len()).ok(), Some(1));
    }

    #[test]
    fn a_batchs_payloads_are_slices_of_one_buffer() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let log = dir.path().join("app.log");
        std::fs::write(&log, "alpha\r\nbeta\ngam").unwrap_or_else(|e| panic!("{e}"));
        let mut part = FilePartition::open(&log, None, 1024, true).unwrap_or_else(|e| panic!("{e}"));
        let first = part.next_batch(10).unwrap_or_default();
        let texts: Vec<&[u8]> = first.iter().map(|r| &r.record.payload[..]).collect();
        assert_eq!(texts, [b"alpha" as &[u8], b"beta"], "following: \"gam\" waits for its line end");
        std::fs::rename(&log, dir.path().join("app.log.1")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&log, "delta\nepsilon\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(part.follow_rotation().ok(), Some(true));
        let batch = part.next_batch(10).unwrap_or_default();
        let texts: Vec<(u64, &[u8])> = batch.iter().map(|r| (unpack(r.start).0, &r.record.payload[..])).collect();
        assert_eq!(
            texts,
            [(0, b"gam" as &[u8]), (1, b"delta"), (1, b"epsilon")],
            "the old file's tail, then the new one"
        );
        for pair in batch.windows(2) {
            let (a, b) = (&pair[0].record.payload, &pair[1].record.payload);
            assert_eq!(a.as_ptr().wrapping_add(a.len()), b.as_ptr(), "each line follows the last in one buffer");
        }
    }

    #[test]
    fn packing_keeps_order_across_generations() {
        assert!(pack(0, (1 << 40) - 1) < pack(1, 0));
        assert_eq!(unpack(pack(3, 12345)), (3, 12345));
    }

    #[test]
    fn resumes_after_a_rename_rotation_from_the_old_inode() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let log = dir.path().join("app.log");
        std::fs::write(&log, "a\nb\nc\n").unwrap_or_else(|e| panic!("{e}"));
        let mut part = FilePartition::open(&log, None, 1024, false).unwrap_or_else(|e| panic!("{e}"));
        let first = part.next_batch(1).unwrap_or_else(|e| panic!("{e}"));
        let cp = part.checkpoint_for(first[0].next);
        // Rotate: rename away, create anew.
        std::fs::rename(&log, dir.path().join("app.log.1")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&log, "d\n").unwrap_or_else(|e| panic!("{e}"));
        let mut part = FilePartition::open(&log, Some(&cp), 1024, false).unwrap_or_else(|e| panic!("{e}"));
        let rest: Vec<(String, u64)> = part
            .next_batch(10)
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .map(|r| (String::from_utf8_lossy(&r.record.payload).into_owned(), unpack(r.start).0))
            .collect();
        assert_eq!(rest, vec![("b".into(), 0), ("c".into(), 0), ("d".into(), 1)]);
    }
}
