//! Room on the state store's volume, kept before RocksDB runs out of it.
//!
//! A write RocksDB cannot make for want of space puts the whole store into
//! read-only mode, which only a reopen clears; and it may come in the middle
//! of a flush or a compaction. So the committer asks first: before each
//! group of writes it reads the volume's free space (one `statvfs`, per
//! group, not per record) and, below `pipeline.state_reserve`, it waits
//! instead of writing. Nothing is committed past what is durable, the
//! partitions stop at their in-flight bound behind it (their sources keep
//! the rest), and once space is freed the group is written and everything
//! goes on by itself. Until then it is said once (a warning naming the
//! path, the free and the needed bytes), `sluice_state_disk_full` is 1 and
//! `/health` says so.
//!
//! What waits was delivered to the sink and not yet recorded: killed
//! during the wait, sluice reads those batches again and delivers them
//! again (the same as a kill before any commit: duplicates, never loss).

use std::path::Path;
use std::time::Duration;

/// Free bytes for an unprivileged writer on the volume holding `path`.
pub fn free_bytes(path: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `c` is a valid NUL-terminated path and `stat` a plain struct
    // statvfs(3) fills; its result is checked before `stat` is read.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut stat) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((stat.f_bavail as u64).saturating_mul(stat.f_frsize as u64))
}

/// How the committer waits for room.
pub(crate) struct Room<'a> {
    pub path: &'a Path,
    pub reserve: u64,
    /// How often free space is read again while waiting.
    pub poll: Duration,
}

impl Room<'_> {
    /// Return once the volume has `reserve` bytes free (`told(None)` if it
    /// had been short), or on `stop()` while still short; `told(free)`
    /// hears each reading below it (the caller reports).
    pub(crate) fn wait(&self, stop: &dyn Fn() -> bool, told: &mut dyn FnMut(Option<u64>)) {
        if self.reserve == 0 {
            return;
        }
        let mut short = false;
        loop {
            // A volume that cannot be read is not waited on: RocksDB's
            // write says what is wrong with it.
            let free = free_bytes(self.path).unwrap_or(u64::MAX);
            if free >= self.reserve {
                if short {
                    told(None);
                }
                return;
            }
            // Stopped while short: still short (the caller writes nothing).
            if stop() {
                return;
            }
            short = true;
            told(Some(free));
            std::thread::sleep(self.poll);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_space_is_read_and_a_reserve_beyond_it_waits_until_stopped() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let free = free_bytes(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        assert!(free > 0);
        let mut heard = Vec::new();
        Room { path: dir.path(), reserve: 1, poll: Duration::from_millis(1) }.wait(&|| false, &mut |f| heard.push(f));
        assert!(heard.is_empty(), "room enough: nothing said");
        let asked = std::cell::Cell::new(0);
        let stop = || {
            asked.set(asked.get() + 1);
            asked.get() > 3
        };
        Room { path: dir.path(), reserve: u64::MAX, poll: Duration::from_millis(1) }
            .wait(&stop, &mut |f| heard.push(f));
        assert_eq!(heard.len(), 3, "three waits, then stopped while still short: {heard:?}");
        assert!(heard.iter().all(|f| f.is_some()), "stopped short is never told as room: {heard:?}");
    }
}
