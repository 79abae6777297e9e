//! Where compiled plugins are kept, and how much of them.
//!
//! Compiling is the slow part of loading a plugin (a Python component takes
//! seconds), so the engine keeps each compiled component by the digest of
//! its bytes: in memory for a reload inside one process, and on disk for a
//! restart. Both are bounded, least recently used out first: a long run
//! that reloads new builds of its plugins, or a machine that has seen many
//! versions, must not grow either without end.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Compiled components kept in memory. A reload keeps the stages' current
/// digests and a few before them; every entry holds a component's machine
/// code (a few MiB for the bundled plugins, tens for a Python one).
pub(crate) const MEMORY_ENTRIES: usize = 16;

/// Compiled artifacts kept on disk, and their total size. Past either, the
/// least recently used go (a hit refreshes a file's modification time); the
/// artifact just written always stays.
pub const DISK_ENTRIES: usize = 64;
pub(crate) const DISK_BYTES: u64 = 1 << 30;

/// A small map that forgets its least recently used entry past `cap`.
/// Look-ups happen at load and reload only, so a linear scan for the
/// oldest is cheaper than keeping an order.
pub(crate) struct Recent<K, V> {
    cap: usize,
    clock: u64,
    entries: HashMap<K, (V, u64)>,
}

impl<K: std::hash::Hash + Eq + Clone, V: Clone> Recent<K, V> {
    pub(crate) fn new(cap: usize) -> Recent<K, V> {
        Recent { cap: cap.max(1), clock: 0, entries: HashMap::new() }
    }

    pub(crate) fn get(&mut self, key: &K) -> Option<V> {
        self.clock += 1;
        let now = self.clock;
        self.entries.get_mut(key).map(|(v, used)| {
            *used = now;
            v.clone()
        })
    }

    pub(crate) fn insert(&mut self, key: K, value: V) {
        self.clock += 1;
        self.entries.insert(key, (value, self.clock));
        while self.entries.len() > self.cap {
            let oldest = self.entries.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| k.clone());
            match oldest {
                Some(k) => self.entries.remove(&k),
                None => break,
            };
        }
    }
}

/// Mark a disk artifact as just used, so pruning keeps it. Best effort: a
/// read-only cache still serves its files, it only prunes by write order.
pub(crate) fn touch(file: &Path) {
    if let Ok(f) = std::fs::File::options().append(true).open(file) {
        let _ = f.set_modified(SystemTime::now());
    }
}

/// Write an artifact into the cache directory (owner-only: it holds machine
/// code that is loaded as is), then prune the directory to its bounds.
pub(crate) fn store(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = file.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    // Write then rename, so a concurrent reader never sees half a file.
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        file.file_name().and_then(|n| n.to_str()).unwrap_or("plugin"),
        std::process::id()
    ));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, file)?;
    let removed = prune(dir, file, DISK_ENTRIES, DISK_BYTES)?;
    if !removed.is_empty() {
        tracing::info!(dir = %dir.display(), removed = removed.len(), "pruned the compiled-plugin cache");
    }
    Ok(())
}

/// Remove the least recently used `.cwasm` files of `dir` until at most
/// `max_entries` files of at most `max_bytes` together remain; `keep` stays
/// whatever its size. Returns what was removed.
pub(crate) fn prune(dir: &Path, keep: &Path, max_entries: usize, max_bytes: u64) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let Ok(entry) = entry else { continue };
        let path = entry.path();
        if path.extension().is_none_or(|x| x != "cwasm") || path == keep {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_file() {
            files.push((meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), meta.len(), path));
        }
    }
    // Newest first; `keep` is counted ahead of all of them.
    files.sort_by_key(|f| std::cmp::Reverse(f.0));
    let mut entries = 1;
    let mut bytes = std::fs::metadata(keep).map(|m| m.len()).unwrap_or(0);
    let mut removed = Vec::new();
    for (_, len, path) in files {
        if entries < max_entries && bytes + len <= max_bytes {
            entries += 1;
            bytes += len;
        } else if std::fs::remove_file(&path).is_ok() {
            removed.push(path);
        }
    }
    Ok(removed)
}

/// Keep only the `keep` most recently used `.cwasm` files of `dir`
/// (`sluice plugin cache prune`).
pub(crate) fn prune_to(dir: &Path, keep: usize) -> std::io::Result<Vec<PathBuf>> {
    // `prune` counts a file it must keep ahead of the rest: none here.
    prune(dir, &dir.join(".none"), keep + 1, u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn recent_forgets_the_least_recently_used() {
        let mut r = Recent::new(2);
        r.insert("a", 1);
        r.insert("b", 2);
        assert_eq!(r.get(&"a"), Some(1));
        r.insert("c", 3);
        assert_eq!(r.entries.len(), 2);
        assert_eq!(r.get(&"b"), None, "b was used least recently");
        assert_eq!((r.get(&"a"), r.get(&"c")), (Some(1), Some(3)));
    }

    fn artifact(dir: &Path, name: &str, len: usize, age_secs: u64) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, vec![0u8; len]).unwrap_or_else(|e| panic!("{e}"));
        let f = std::fs::File::options().append(true).open(&p).unwrap_or_else(|e| panic!("{e}"));
        f.set_modified(SystemTime::now() - Duration::from_secs(age_secs)).unwrap_or_else(|e| panic!("{e}"));
        p
    }

    #[test]
    fn prune_keeps_the_newest_within_both_bounds() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let old = artifact(dir.path(), "old.cwasm", 10, 300);
        let mid = artifact(dir.path(), "mid.cwasm", 10, 200);
        let new = artifact(dir.path(), "new.cwasm", 10, 100);
        let other = artifact(dir.path(), "notes.txt", 10, 400);
        let just = artifact(dir.path(), "just.cwasm", 10, 0);

        let removed = prune(dir.path(), &just, 3, 1 << 20).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(removed, vec![old.clone()], "three entries: the one just written and the two newest");
        assert!(mid.exists() && new.exists() && just.exists() && other.exists());

        // A hit refreshes the oldest, which then outlives a newer one.
        touch(&mid);
        let removed = prune(dir.path(), &just, 2, 1 << 20).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(removed, vec![new.clone()]);

        // By size: the one just written stays even over the bound.
        let removed = prune(dir.path(), &just, 64, 5).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(removed, vec![mid]);
        assert!(just.exists(), "the artifact just written is never pruned");
    }
}
