//! NDJSON files and standard output. The file sink syncs before it answers:
//! "accepted" means on disk. Lines are `{"id":…,"timestamp":…,"event":{…}}`.
//!
//! Partitions share the file and its syncs: each appends its batch under
//! the append lock, then waits for a sync that began after its append; one
//! sync serves every batch appended before it began (group sync), so many
//! partitions' batches cost one `fdatasync`, not one each.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Attempt, Delivery, Sink, SinkError};

/// NDJSON appended to a file, synced before a batch counts as delivered.
pub struct FileSink {
    path: PathBuf,
    /// Workers deliver from their own threads; appends are serialized.
    file: Mutex<File>,
    /// Appends so far (under `file`'s lock), and how many of them the last
    /// finished sync covered (under its own lock, held while syncing).
    appended: AtomicU64,
    synced: Mutex<u64>,
    /// The same open file, for syncing while others append.
    sync_handle: File,
}

impl FileSink {
    /// Open `path` for appending, creating it and its folder.
    pub fn open(path: &Path) -> Result<FileSink, SinkError> {
        let io = |source| SinkError::Io { target: path.display().to_string(), source };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let file = OpenOptions::new().create(true).read(true).append(true).open(path).map_err(io)?;
        cut_torn_tail(&file).map_err(io)?;
        let sync_handle = file.try_clone().map_err(io)?;
        Ok(FileSink {
            path: path.to_path_buf(),
            file: Mutex::new(file),
            appended: AtomicU64::new(0),
            synced: Mutex::new(0),
            sync_handle,
        })
    }
}

/// A crash in the middle of a write leaves part of a line at the end of the
/// file. That line was never acknowledged (the sync had not returned), so
/// its record will be read and delivered again: cut it, or the next line
/// would be glued onto it.
fn cut_torn_tail(file: &File) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let len = file.metadata()?.len();
    let mut end = len;
    let mut buf = [0u8; 4096];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        file.read_exact_at(chunk, start)?;
        if let Some(i) = chunk.iter().rposition(|b| *b == b'\n') {
            let keep = start + i as u64 + 1;
            if keep < len {
                tracing::warn!(
                    cut = len - keep,
                    "sink file ended in a torn line (a crash mid-write); cutting it, its record is read again"
                );
                file.set_len(keep)?;
                file.sync_data()?;
            }
            return Ok(());
        }
        end = start;
    }
    if len > 0 {
        file.set_len(0)?;
        file.sync_data()?;
    }
    Ok(())
}

/// Every line of a batch into one buffer, written from each delivery's
/// bytes (no value is built, no line allocated).
pub(crate) fn render(batch: &[Delivery]) -> Vec<u8> {
    let bytes: usize = batch.iter().map(|d| d.event().len() + d.id.len() + 64).sum();
    let mut buf = Vec::with_capacity(bytes);
    for d in batch {
        d.write_envelope(&mut buf);
        buf.push(b'\n');
    }
    buf
}

impl Sink for FileSink {
    fn deliver(&self, batch: &[Delivery]) -> Result<Attempt, SinkError> {
        let io = |source| SinkError::Io { target: self.path.display().to_string(), source };
        let lines = render(batch);
        let mine = {
            let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
            let before = file.metadata().map_err(io)?.len();
            if let Err(e) = file.write_all(&lines) {
                // Nothing of this call is accepted, and it will be sent
                // again: cut what part of it reached the file (a full disk)
                // so the retry does not glue onto a torn line. Nobody
                // appended after it: the lock is still held.
                let _ = file.set_len(before);
                return Err(io(e));
            }
            self.appended.fetch_add(1, Ordering::SeqCst) + 1
        };
        // The custody rule: accepted means durable. A sync that began after
        // this append covers it; otherwise this call syncs, for everyone
        // appended so far. A failed sync leaves the lines where they are
        // (others' may follow): the batch is sent again, and a line that
        // did reach the disk is a duplicate, never a loss.
        let mut synced = self.synced.lock().unwrap_or_else(|p| p.into_inner());
        if *synced < mine {
            let covers = self.appended.load(Ordering::SeqCst);
            self.sync_handle.sync_data().map_err(io)?;
            *synced = covers;
        }
        Ok(Attempt::accepted(batch.len()))
    }

    fn describe(&self) -> String {
        format!("file {}", self.path.display())
    }
}

/// Standard output: flushed, not durable (for trying things out).
pub(crate) struct StdoutSink;

impl Sink for StdoutSink {
    fn deliver(&self, batch: &[Delivery]) -> Result<Attempt, SinkError> {
        let io = |source| SinkError::Io { target: "stdout".into(), source };
        let mut out = std::io::stdout().lock();
        out.write_all(&render(batch)).map_err(io)?;
        out.flush().map_err(io)?;
        Ok(Attempt::accepted(batch.len()))
    }

    fn describe(&self) -> String {
        "stdout".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::Answer;

    #[test]
    fn a_torn_last_line_is_cut_on_open() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("out.ndjson");
        std::fs::write(&path, "{\"id\":\"a\"}\n{\"id\":\"b\"}\n{\"id\":\"c").unwrap_or_else(|e| panic!("{e}"));
        let sink = FileSink::open(&path).unwrap_or_else(|e| panic!("{e}"));
        let d = Delivery::new("d", None, b"{}");
        assert_eq!(sink.deliver(&[d]).ok().map(|a| a.answers), Some(vec![Answer::Accepted]));
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(text.ends_with("{\"id\":\"d\",\"timestamp\":null,\"event\":{}}\n"), "{text}");
        std::fs::write(&path, "no newline at all").unwrap_or_else(|e| panic!("{e}"));
        drop(FileSink::open(&path));
        assert_eq!(std::fs::read_to_string(&path).unwrap_or_default(), "");
    }

    #[test]
    fn partitions_appending_at_once_share_syncs_and_every_line_lands_whole() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("out.ndjson");
        let sink = FileSink::open(&path).unwrap_or_else(|e| panic!("{e}"));
        std::thread::scope(|s| {
            for t in 0..8 {
                let sink = &sink;
                s.spawn(move || {
                    for b in 0..50 {
                        let batch: Vec<Delivery> =
                            (0..10).map(|i| Delivery::new(format!("{t}-{b}-{i}"), None, b"{}")).collect();
                        let answers = sink.deliver(&batch).ok().map(|a| a.answers);
                        assert_eq!(answers, Some(vec![Answer::Accepted; 10]));
                    }
                });
            }
        });
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let ids: std::collections::HashSet<String> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).map(|v| v["id"].to_string()).unwrap_or_default())
            .collect();
        assert_eq!(ids.len(), 8 * 50 * 10, "every line whole and once");
        assert_eq!(*sink.synced.lock().unwrap_or_else(|p| p.into_inner()), 8 * 50, "the last sync covers every append");
    }

    #[test]
    fn bodies_pass_through_and_a_broken_body_stays_valid_ndjson() {
        let good = render(&[Delivery::new("a", None, br#"{"k": [1, 2]}"#)]);
        assert_eq!(good, b"{\"id\":\"a\",\"timestamp\":null,\"event\":{\"k\": [1, 2]}}\n");
        let broken = render(&[Delivery::new("b", None, b"not \"json")]);
        let v: serde_json::Value = serde_json::from_slice(&broken).unwrap_or_default();
        assert_eq!(v["event"], "not \"json");
    }

    /// A checked body is moved in as it is, but the white space JSON
    /// allows around it must not reach the line: a trailing line feed
    /// would split it in two.
    #[test]
    fn a_checked_body_with_white_space_around_it_stays_one_line() {
        let d = Delivery::checked("i\"d".into(), Some(1_500_000_000), b" \t{\"a\":\"x\\ny\"}\r\n".to_vec().into());
        let line = render(&[d]);
        assert_eq!(
            String::from_utf8_lossy(&line),
            "{\"id\":\"i\\\"d\",\"timestamp\":\"1970-01-01T00:00:01.5Z\",\"event\":{\"a\":\"x\\ny\"}}\n"
        );
        assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
    }
}
