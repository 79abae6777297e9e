//! The pipeline's durable state, in one RocksDB on local disk:
//!
//! | column family | holds |
//! |---|---|
//! | `meta` | what the store was created for (pipeline name, sources), the dedup bucket width |
//! | `checkpoints` | per partition: the committed position (the contiguous finished prefix) |
//! | `quarantine` | quarantined records with their context (see `quarantine`) |
//! | `ids-<bucket>` | dedup ids delivered during one time bucket (see `dedup`), each with its trail: recent batches' as one value each, the rest sorted into tables (see `id_blobs`); and the trails of duplicates absorbed (see `audit`) |
//!
//! One `WriteBatch` per processed batch carries the batch's delivered ids,
//! its quarantine entries and the new checkpoint: they become durable
//! together, after the sink accepted the events. Batches of many partitions
//! share one WAL sync (`commit_group`, driven by `pipeline::durable`).

pub mod audit;
pub(crate) mod clock;
pub mod dedup;
pub mod disk_reserve;
pub(crate) mod filter;
pub(crate) mod folder_check;
pub(crate) mod id_blobs;
pub mod interned;
pub(crate) mod quarantine;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rocksdb::{ColumnFamilyDescriptor, DBWithThreadMode, MultiThreaded, Options, WriteBatch, WriteOptions};
use serde::{Deserialize, Serialize};

pub(crate) type Db = DBWithThreadMode<MultiThreaded>;
/// One atomic write of the store (ids, quarantine entries, a checkpoint).
pub type StoreWrite = rocksdb::WriteBatch;

/// One family's tables (`Store::shape`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FamilyShape {
    pub tables: u64,
    pub bytes: u64,
}

pub(crate) const CF_META: &str = "meta";
pub(crate) const CF_CHECKPOINTS: &str = "checkpoints";
pub(crate) const CF_QUARANTINE: &str = "quarantine";
/// The dedup window's families, one per time bucket: `ids-<bucket>`.
pub(crate) const CF_IDS_PREFIX: &str = "ids-";
/// Source position → quarantine entry id: one entry per position.
pub(crate) const CF_QUARANTINE_POSITIONS: &str = "quarantine-positions";
const IDENTITY_KEY: &[u8] = b"identity";

/// Why the state store could not be opened, read or written. Each names
/// the store's folder (`path`), since one host may run several pipelines,
/// and says what an operator can do; none of them loses a record: custody
/// stops before the offset moves.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// RocksDB refused an operation.
    #[error("state store {}: {source}", path.display())]
    Rocks {
        /// The store's folder.
        path: PathBuf,
        /// RocksDB's own error.
        source: rocksdb::Error,
    },
    /// A file beside the database (lock, marker, reserve) failed.
    #[error("state store {}: {source}", path.display())]
    Io {
        /// The store's folder.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    #[error(
        "state store {path} belongs to pipeline {found:?} (sources {found_sources:?}), not {expected:?} (sources {expected_sources:?}); \
         point pipeline.state_dir at a folder of its own, or fix pipeline.name",
        path = path.display()
    )]
    /// The store was created for another pipeline: its checkpoints and
    /// window would skip or repeat this one's records.
    WrongPipeline {
        /// The store's folder.
        path: PathBuf,
        /// The pipeline name the store was created for.
        found: String,
        /// The sources the store was created for.
        found_sources: Vec<String>,
        /// This config's pipeline name.
        expected: String,
        /// This config's sources.
        expected_sources: Vec<String>,
    },
    /// A value in the store does not decode.
    #[error("state store {}: corrupt {what}: {message}", path.display())]
    Corrupt {
        /// The store's folder.
        path: PathBuf,
        /// Which kind of value (a checkpoint, the identity, an entry).
        what: String,
        /// Why it does not decode.
        message: String,
    },
    /// A write batch did not reach the store.
    #[error("state store {}: a write failed: {message}", path.display())]
    WriteFailed {
        /// The store's folder.
        path: PathBuf,
        /// RocksDB's reason.
        message: String,
    },
    #[error(
        "state store {} is in use by another process (it holds the store's LOCK): one sluice per store; stop the \
         other (a frozen one still holds it), or give this pipeline a pipeline.state_dir of its own",
        path.display()
    )]
    /// Another process holds the store's lock.
    InUse {
        /// The store's folder.
        path: PathBuf,
    },
    #[error(
        "state store {}: its volume is full ({message}); nothing was lost: free space there (or move the store), \
         and start again; pipeline.state_reserve keeps room while it runs",
        path.display()
    )]
    /// The store's volume is full.
    NoSpace {
        /// The store's folder.
        path: PathBuf,
        /// RocksDB's or the system's reason.
        message: String,
    },
    #[error("state store {} is a file, not a folder: point pipeline.state_dir at a folder (sluice creates it)", path.display())]
    /// `pipeline.state_dir` names a file.
    NotAFolder {
        /// The path configured as the store's folder.
        path: PathBuf,
    },
    #[error(
        "state store {} is not a sluice store: it holds {found}; sluice will not write into it. Point \
         pipeline.state_dir at a new or empty folder",
        path.display()
    )]
    /// The folder holds files that are not a sluice store.
    Foreign {
        /// The store's folder.
        path: PathBuf,
        /// What was found there.
        found: String,
    },
    #[error("state store {} cannot be read: {what}. {}", path.display(), folder_check::WAYS_ON)]
    /// The store does not open; `sluice store repair` may bring it back.
    Damaged {
        /// The store's folder.
        path: PathBuf,
        /// What RocksDB could not read.
        what: String,
    },
}

/// What a store was created for; a store refuses to open for another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// `pipeline.name`.
    pub pipeline: String,
    /// The file source's paths, or `kafka:<group>/<topic>` per topic.
    pub sources: Vec<String>,
}

/// A partition's committed position. For a file: which file (its device
/// and inode, so a rotated file is found again under another name), how
/// many rotations were followed, and the byte offset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Rotations followed since the path was first read.
    pub generation: u64,
    /// The next byte to read: every record below it is in custody's
    /// finished prefix.
    pub offset: u64,
    /// The file's device number.
    pub dev: u64,
    /// The file's inode.
    pub ino: u64,
    /// How many of the file's first bytes `head_hash` covers, and their
    /// blake3: a file truncated and rewritten while sluice was stopped
    /// keeps its inode, and may have grown past `offset`.
    #[serde(default)]
    pub head_len: u64,
    /// The blake3 of the first `head_len` bytes, in hex.
    #[serde(default)]
    pub head_hash: String,
}

/// How `Store::repair` got the store to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Repaired {
    /// The write-ahead log replayed up to its first damaged record.
    LogReplayed,
    /// Rebuilt by RocksDB's repairer from every file it could read (a
    /// column family that lived only in the log is lost).
    Rebuilt,
}

/// The state store: one RocksDB database per pipeline holding its
/// checkpoints, dedup window, quarantine and audit, so a checkpoint and the
/// window entries of the records below it are written in one batch.
pub struct Store {
    db: Arc<Db>,
    path: PathBuf,
    /// Bytes the committer keeps free on the store's volume (`room`).
    reserve: std::sync::atomic::AtomicU64,
    /// The delivery audit's interned names (`audit`).
    audit: std::sync::Mutex<interned::Book>,
}

impl Store {
    /// Open (creating if needed) the store at `path` for `identity`. A
    /// folder that is not a sluice store, or a store that cannot be read, is
    /// refused (`damage` says why, and what each way on costs).
    pub fn open(path: &Path, identity: &Identity) -> Result<Store, StoreError> {
        Store::open_as(path, identity, false)
    }

    /// `open`; `adopt`: a store without an identity but with keys is taken
    /// as this pipeline's (after `repair`, whose rebuild may lose the meta
    /// family and keep the checkpoints), not refused as foreign.
    fn open_as(path: &Path, identity: &Identity, adopt: bool) -> Result<Store, StoreError> {
        let io = |source| StoreError::Io { path: path.to_path_buf(), source };
        let torn = match folder_check::inspect(path).map_err(io)? {
            folder_check::Folder::New => Vec::new(),
            folder_check::Folder::Store => folder_check::torn_tails(path),
            folder_check::Folder::NotAFolder => return Err(StoreError::NotAFolder { path: path.to_path_buf() }),
            folder_check::Folder::Foreign(names) => {
                return Err(StoreError::Foreign { path: path.to_path_buf(), found: format!("{names:?}") });
            }
            folder_check::Folder::Headless(names) => {
                return Err(StoreError::Damaged {
                    path: path.to_path_buf(),
                    what: format!(
                        "it holds a store's files ({names:?}) but no CURRENT, the file naming the MANIFEST that \
                         says which of them make the store"
                    ),
                });
            }
        };
        if let Some(warning) = open_to_others(path) {
            tracing::warn!("{warning}; sluice sets it to 0700");
        }
        #[cfg(unix)]
        {
            // Quarantined records may hold secrets: the state is owner-only,
            // from its creation on (no moment with the umask's mode).
            use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(path).map_err(io)?;
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700));
        }
        #[cfg(not(unix))]
        std::fs::create_dir_all(path).map_err(io)?;
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        // A torn last record is dropped; damage anywhere else stops the start.
        opts.set_wal_recovery_mode(rocksdb::DBRecoveryMode::TolerateCorruptedTailRecords);
        opts.set_max_total_wal_size(MAX_WAL_BYTES);
        let mut names: Vec<String> = Db::list_cf(&opts, path).unwrap_or_default();
        for fixed in [CF_META, CF_CHECKPOINTS, CF_QUARANTINE, CF_QUARANTINE_POSITIONS] {
            if !names.iter().any(|n| n == fixed) {
                names.push(fixed.to_string());
            }
        }
        let descriptors = names.iter().map(|n| ColumnFamilyDescriptor::new(n, cf_options(n)));
        let db = Db::open_cf_descriptors(&opts, path, descriptors).map_err(|source| {
            // Held by another process is not damage.
            if source.to_string().contains("While lock file") {
                StoreError::InUse { path: path.to_path_buf() }
            } else if is_no_space(&source) {
                StoreError::NoSpace { path: path.to_path_buf(), message: source.to_string() }
            } else {
                StoreError::Damaged { path: path.to_path_buf(), what: source.to_string() }
            }
        })?;
        for t in &torn {
            tracing::warn!(
                store = %path.display(),
                "the write-ahead log {} ends inside a record: its last {} bytes (from byte {}) were a write cut \
                 short, by a crash or a copy that stopped early, and are dropped; the batches they held are read \
                 again, and delivered again if their writes had been acknowledged (duplicates, never loss)",
                t.file.display(),
                t.size - t.whole,
                t.whole
            );
        }
        let store = Store {
            db: Arc::new(db),
            path: path.to_path_buf(),
            reserve: Default::default(),
            audit: Default::default(),
        };
        store.check_identity(identity, adopt)?;
        Ok(store)
    }

    /// Rebuild what can still be read of a damaged store, then open it as
    /// `open` does. First the write-ahead log is replayed up to its first
    /// damaged record (RocksDB's point-in-time recovery: every column
    /// family kept, what followed the damage dropped) and every table is
    /// read through its checksums; when that is not enough (a table that
    /// fails them, a MANIFEST or CURRENT lost), RocksDB's repairer rebuilds
    /// the store from every table and log it can read. What either drops is
    /// gone, checkpoints and ids with it, so those records are read and
    /// delivered again. Refused for a folder that holds no store.
    pub(crate) fn repair(path: &Path, identity: &Identity) -> Result<(Store, Repaired), StoreError> {
        let path_buf = || path.to_path_buf();
        match folder_check::inspect(path).map_err(|source| StoreError::Io { path: path_buf(), source })? {
            folder_check::Folder::Store => {}
            // CURRENT names the newest MANIFEST: written again, exactly.
            folder_check::Folder::Headless(_) => {
                if let Some(manifest) = folder_check::newest_manifest(path) {
                    std::fs::write(path.join("CURRENT"), format!("{manifest}\n"))
                        .map_err(|source| StoreError::Io { path: path_buf(), source })?;
                }
            }
            folder_check::Folder::New => {
                return Err(StoreError::Foreign { path: path_buf(), found: "no store to repair".into() });
            }
            folder_check::Folder::NotAFolder => return Err(StoreError::NotAFolder { path: path_buf() }),
            folder_check::Folder::Foreign(names) => {
                return Err(StoreError::Foreign { path: path_buf(), found: format!("{names:?}") });
            }
        }
        let replayed = (|| -> Result<(), StoreError> {
            let mut opts = Options::default();
            opts.set_wal_recovery_mode(rocksdb::DBRecoveryMode::PointInTime);
            let names = Db::list_cf(&opts, path).map_err(|source| StoreError::Rocks { path: path_buf(), source })?;
            let db = Db::open_cf_descriptors(
                &opts,
                path,
                names.iter().map(|n| ColumnFamilyDescriptor::new(n, cf_options(n))),
            )
            .map_err(|source| StoreError::Rocks { path: path_buf(), source })?;
            // Every key of every family, through the tables' checksums.
            for name in &names {
                let Some(cf) = db.cf_handle(name) else { continue };
                for item in db.iterator_cf(&cf, rocksdb::IteratorMode::Start) {
                    item.map_err(|source| StoreError::Rocks { path: path_buf(), source })?;
                }
            }
            db.flush_wal(true).map_err(|source| StoreError::Rocks { path: path_buf(), source })?;
            Ok(())
        })();
        let how = match replayed {
            Ok(()) => Repaired::LogReplayed,
            Err(e) => {
                tracing::info!("{e}; rebuilding the store from the files it can read");
                Db::repair(&Options::default(), path)
                    .map_err(|source| StoreError::Rocks { path: path_buf(), source })?;
                Repaired::Rebuilt
            }
        };
        Ok((Store::open_as(path, identity, true)?, how))
    }

    /// Every file checkpoint the store holds, by partition name.
    pub(crate) fn checkpoints(&self) -> Result<Vec<(String, Checkpoint)>, StoreError> {
        let cf = self.cf(CF_CHECKPOINTS)?;
        let mut out = Vec::new();
        for item in self.db.iterator_cf(&cf, rocksdb::IteratorMode::Start) {
            let (k, v) = item.map_err(|e| self.rocks(e))?;
            if k.starts_with(CHANGELOG_PREFIX) {
                continue;
            }
            let cp: Checkpoint = serde_json::from_slice(&v).map_err(|e| self.corrupt("checkpoint", e))?;
            out.push((String::from_utf8_lossy(&k).into_owned(), cp));
        }
        Ok(out)
    }

    /// Open an existing store read-only (for `sluice quarantine list` while
    /// a pipeline may be running).
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        let rocks = |source| StoreError::Rocks { path: path.to_path_buf(), source };
        let opts = Options::default();
        let names = Db::list_cf(&opts, path).map_err(rocks)?;
        let db = Db::open_cf_for_read_only(&opts, path, names, false).map_err(rocks)?;
        Ok(Store { db: Arc::new(db), path: path.to_path_buf(), reserve: Default::default(), audit: Default::default() })
    }

    fn check_identity(&self, expected: &Identity, adopt: bool) -> Result<(), StoreError> {
        let meta = self.cf(CF_META)?;
        match self.db.get_cf(&meta, IDENTITY_KEY).map_err(|e| self.rocks(e))? {
            Some(raw) => {
                let found: Identity = serde_json::from_slice(&raw).map_err(|e| self.corrupt("identity", e))?;
                if found.pipeline != expected.pipeline || found.sources != expected.sources {
                    return Err(StoreError::WrongPipeline {
                        path: self.path.clone(),
                        found: found.pipeline,
                        found_sources: found.sources,
                        expected: expected.pipeline.clone(),
                        expected_sources: expected.sources.clone(),
                    });
                }
            }
            None => {
                // A new store has nothing else either. Keys without an
                // identity are another program's RocksDB (sluice never writes
                // the default column family) or a store that lost its meta.
                for name in [rocksdb::DEFAULT_COLUMN_FAMILY_NAME, CF_CHECKPOINTS].into_iter().filter(|_| !adopt) {
                    let cf = self.cf(name)?;
                    if self.db.iterator_cf(&cf, rocksdb::IteratorMode::Start).next().is_some() {
                        return Err(StoreError::Foreign {
                            path: self.path.clone(),
                            found: format!("a RocksDB with keys in column family {name:?} and no sluice identity"),
                        });
                    }
                }
                let raw = serde_json::to_vec(expected).map_err(|e| self.corrupt("identity", e))?;
                let mut wo = WriteOptions::default();
                wo.set_sync(true);
                self.db.put_cf_opt(&meta, IDENTITY_KEY, raw, &wo).map_err(|e| self.rocks(e))?;
            }
        }
        Ok(())
    }

    /// The committed position of a file partition, `None` before its first
    /// commit (it is then read from the start, or the end per `start_at`).
    pub fn checkpoint(&self, partition: &str) -> Result<Option<Checkpoint>, StoreError> {
        let cf = self.cf(CF_CHECKPOINTS)?;
        match self.db.get_cf(&cf, partition.as_bytes()).map_err(|e| self.rocks(e))? {
            Some(raw) => serde_json::from_slice(&raw).map(Some).map_err(|e| self.corrupt("checkpoint", e)),
            None => Ok(None),
        }
    }

    /// Add a checkpoint to `batch`; it becomes durable with the batch.
    pub(crate) fn put_checkpoint(
        &self,
        batch: &mut WriteBatch,
        partition: &str,
        cp: &Checkpoint,
    ) -> Result<(), StoreError> {
        let cf = self.cf(CF_CHECKPOINTS)?;
        let raw = serde_json::to_vec(cp).map_err(|e| self.corrupt("checkpoint", e))?;
        batch.put_cf(&cf, partition.as_bytes(), raw);
        Ok(())
    }

    /// How far the dedup changelog has been read into this store, for
    /// `key` (a partition's name, or `follow/<changelog partition>`): the
    /// next changelog offset to read. Kept beside the checkpoints, under a
    /// prefix no file path has.
    pub(crate) fn changelog_position(&self, key: &str) -> Result<Option<i64>, StoreError> {
        let cf = self.cf(CF_CHECKPOINTS)?;
        match self.db.get_cf(&cf, changelog_key(key)).map_err(|e| self.rocks(e))? {
            Some(raw) => {
                let bytes: [u8; 8] =
                    raw.as_slice().try_into().map_err(|_| self.corrupt("changelog position", "not 8 bytes"))?;
                Ok(Some(i64::from_be_bytes(bytes)))
            }
            None => Ok(None),
        }
    }

    /// Add a changelog position to `batch`, durable with the ids it covers.
    pub(crate) fn put_changelog_position(
        &self,
        batch: &mut WriteBatch,
        key: &str,
        next: i64,
    ) -> Result<(), StoreError> {
        let cf = self.cf(CF_CHECKPOINTS)?;
        batch.put_cf(&cf, changelog_key(key), next.to_be_bytes());
        Ok(())
    }

    /// Whether this store ever read or wrote a dedup changelog: if so, a
    /// changelog that is gone took ids with it.
    pub(crate) fn knows_a_changelog(&self) -> Result<bool, StoreError> {
        let cf = self.cf(CF_CHECKPOINTS)?;
        let mut it = self.db.prefix_iterator_cf(&cf, CHANGELOG_PREFIX);
        match it.next() {
            Some(Ok((k, _))) => Ok(k.starts_with(CHANGELOG_PREFIX)),
            Some(Err(e)) => Err(self.rocks(e)),
            None => Ok(false),
        }
    }

    /// Write `batch` synced: when this returns, everything in it survives a
    /// crash of the process or the machine.
    pub(crate) fn commit(&self, batch: WriteBatch) -> Result<(), StoreError> {
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        self.db.write_opt(batch, &wo).map_err(|e| self.rocks(e))
    }

    /// Apply `batches` in order, each atomic, then sync the WAL once for
    /// all of them (group commit): when this returns, all of them survive
    /// a crash of the process or the machine. On an error, any of them may
    /// or may not have been applied; the caller makes no later write.
    pub fn commit_group(&self, batches: impl IntoIterator<Item = WriteBatch>) -> Result<(), StoreError> {
        let unsynced = WriteOptions::default();
        for batch in batches {
            self.db.write_opt(batch, &unsynced).map_err(|e| self.rocks(e))?;
        }
        self.db.flush_wal(true).map_err(|e| self.rocks(e))
    }

    /// A write that failed elsewhere (the committer thread), as an error.
    pub(crate) fn failed(&self, message: String) -> StoreError {
        StoreError::WriteFailed { path: self.path.clone(), message }
    }

    pub(crate) fn cf(&self, name: &str) -> Result<Arc<rocksdb::BoundColumnFamily<'_>>, StoreError> {
        self.db.cf_handle(name).ok_or_else(|| StoreError::Corrupt {
            path: self.path.clone(),
            what: "column family".into(),
            message: format!("{name} is missing"),
        })
    }

    pub(crate) fn db(&self) -> &Db {
        &self.db
    }

    /// Flush every memtable to disk and wait: what the writes so far leave
    /// RocksDB's background threads to do, done now (benches measure it).
    pub fn flush(&self) -> Result<(), StoreError> {
        let names = Db::list_cf(&Options::default(), self.path()).map_err(|e| self.rocks(e))?;
        for name in names {
            if let Some(cf) = self.db().cf_handle(&name) {
                self.db().flush_cf(&cf).map_err(|e| self.rocks(e))?;
            }
        }
        Ok(())
    }

    /// Keep `bytes` free on the store's volume: the committer waits for
    /// room below that (`room`). 0, the default, never waits.
    pub(crate) fn keep_free(&self, bytes: u64) {
        self.reserve.store(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn reserve(&self) -> u64 {
        self.reserve.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The store's tables by family: how many and how many bytes, the dedup
    /// buckets summed as `dedup` (one family per time bucket, dropped whole,
    /// so their names are not worth a label each). An operator asks this
    /// when the store or its open files grow: is it the window or the
    /// quarantine. Read from RocksDB's list of live tables, metadata only.
    pub(crate) fn shape(&self) -> Result<BTreeMap<&'static str, FamilyShape>, StoreError> {
        // Every family, tables or not: a gauge that went to zero says so.
        let mut out: BTreeMap<&'static str, FamilyShape> =
            ["dedup", CF_META, CF_CHECKPOINTS, CF_QUARANTINE, CF_QUARANTINE_POSITIONS]
                .into_iter()
                .map(|f| (f, FamilyShape::default()))
                .collect();
        for file in self.db.live_files().map_err(|e| self.rocks(e))? {
            let shape: &mut FamilyShape = out.entry(family_kind(&file.column_family_name)).or_default();
            shape.tables += 1;
            shape.bytes += file.size as u64;
        }
        Ok(out)
    }

    /// Merge the small tables of each family but the dedup buckets, where
    /// more than `MAX_SMALL_TABLES` have gathered; returns the families
    /// merged and how many tables each had.
    ///
    /// Why by hand: those families' flushes (at each restart's recovery,
    /// at each turn of the write-ahead log) write small tables whose keys
    /// rarely overlap what is already there (a new input file's checkpoint,
    /// new positions, quarantine ids that begin with the time). RocksDB
    /// moves such a table down a level without merging it, so they
    /// gathered at the last level for good, each an open file: the soak's
    /// open files and tables grew with every restart and every minute
    /// (benches/README.md, "Soak"). The merge covers only the key range of
    /// the small tables (the quarantine's recent tail, not its bulk).
    pub(crate) fn merge_small_tables(&self) -> Result<Vec<(&'static str, usize)>, StoreError> {
        let mut small: BTreeMap<String, (usize, Vec<u8>, Vec<u8>)> = BTreeMap::new();
        for file in self.db.live_files().map_err(|e| self.rocks(e))? {
            let name = file.column_family_name;
            if name.starts_with(CF_IDS_PREFIX) || file.size as u64 >= SMALL_TABLE_BYTES {
                continue;
            }
            let (Some(start), Some(end)) = (file.start_key, file.end_key) else { continue };
            match small.get_mut(&name) {
                Some((n, lo, hi)) => {
                    *n += 1;
                    if start < *lo {
                        *lo = start;
                    }
                    if end > *hi {
                        *hi = end;
                    }
                }
                None => {
                    small.insert(name, (1, start, end));
                }
            }
        }
        let mut merged = Vec::new();
        let mut opts = rocksdb::CompactOptions::default();
        // The last level too: that is where the unmerged tables sit.
        opts.set_bottommost_level_compaction(rocksdb::BottommostLevelCompaction::Force);
        for (name, (n, start, end)) in small {
            if n <= MAX_SMALL_TABLES {
                continue;
            }
            let Some(cf) = self.db.cf_handle(&name) else { continue };
            self.db.compact_range_cf_opt(&cf, Some(start), Some(end), &opts);
            merged.push((family_kind(&name), n));
        }
        Ok(merged)
    }

    /// A RocksDB error; damage found by a read (a table failing its
    /// checksum) says what the operator can do, as at open.
    pub(crate) fn rocks(&self, source: rocksdb::Error) -> StoreError {
        if is_no_space(&source) {
            return StoreError::NoSpace { path: self.path.clone(), message: source.to_string() };
        }
        if source.kind() == rocksdb::ErrorKind::Corruption {
            return StoreError::Damaged { path: self.path.clone(), what: source.to_string() };
        }
        StoreError::Rocks { path: self.path.clone(), source }
    }

    pub(crate) fn corrupt(&self, what: &str, e: impl std::fmt::Display) -> StoreError {
        StoreError::Corrupt { path: self.path.clone(), what: what.into(), message: e.to_string() }
    }
}

/// RocksDB says ENOSPC in its message only.
fn is_no_space(e: &rocksdb::Error) -> bool {
    e.to_string().contains("No space left on device")
}

const CHANGELOG_PREFIX: &[u8] = b"\0changelog/";

fn changelog_key(key: &str) -> Vec<u8> {
    [CHANGELOG_PREFIX, key.as_bytes()].concat()
}

/// A dedup bucket's memtable size. RocksDB's 64 MiB default was most of a
/// 1M-line run's peak RSS (157 MiB) when it held a key per id; it holds a
/// key per batch now, and the bound still keeps a burst of them small.
const DEDUP_WRITE_BUFFER: usize = 16 << 20;

/// The write-ahead logs' total before RocksDB flushes the families that
/// hold the oldest one. A log can only be deleted once every family with
/// writes in it has flushed them, and the small families (checkpoints, the
/// quarantine) written by every batch fill their memtables slowly: with
/// RocksDB's default (four times every family's write buffers, about 3 GiB
/// here) a 30-minute soak's store grew by 100 MiB a minute whatever the
/// dedup window, its memory with it, and a restart replayed it all. At
/// 128 MiB those families flush every minute or two (small tables), the
/// logs go, and a restart replays at most this much.
const MAX_WAL_BYTES: u64 = 128 << 20;

/// A table under this size counts as small (`Store::merge_small_tables`):
/// a flush of a small family, or of the quarantine between two turns of
/// the write-ahead log (10 to 20 MiB in the soak).
const SMALL_TABLE_BYTES: u64 = 48 << 20;

/// Small tables a family may hold before they are merged: the merge is
/// cheap, but not worth doing for every flush.
const MAX_SMALL_TABLES: usize = 3;

/// Which family `name` is, as `Store::shape` names it.
fn family_kind(name: &str) -> &'static str {
    match name {
        n if n.starts_with(CF_IDS_PREFIX) => "dedup",
        CF_META => CF_META,
        CF_CHECKPOINTS => CF_CHECKPOINTS,
        CF_QUARANTINE => CF_QUARANTINE,
        CF_QUARANTINE_POSITIONS => CF_QUARANTINE_POSITIONS,
        _ => "other",
    }
}

/// The quarantine's table size (RocksDB's default is 64 MiB), for what
/// RocksDB's own compaction writes. `merge_small_tables` writes its tail
/// in tables of what it merged (about 60 MiB in the soak).
const QUARANTINE_TABLE_BYTES: u64 = 256 << 20;

/// The block cache every column family of every store in the process
/// shares. Without one, RocksDB gives each family's table factory a cache
/// of its own (32 MiB each): with a dedup window's eight-odd buckets that
/// is a bound of about 300 MiB nobody chose, and the steady soak (issue 25)
/// showed each restart reaching it, its RSS stepping from 190 to 360 MiB as
/// the open-time filter fill read every bucket through its cache. Look-ups
/// that reach RocksDB are the filter's positives (mostly a replay's
/// delivered ids); 32 MiB is what one bucket had before, so `dedup_scale`
/// (one bucket) measures the same look-ups as it did (`benches/README.md`,
/// "soak").
const BLOCK_CACHE_BYTES: usize = 32 << 20;

fn block_cache() -> &'static rocksdb::Cache {
    static CACHE: std::sync::OnceLock<rocksdb::Cache> = std::sync::OnceLock::new();
    CACHE.get_or_init(|| rocksdb::Cache::new_lru_cache(BLOCK_CACHE_BYTES))
}

/// The options of a dedup bucket, for `benches/dedup_write`, which measures
/// alternatives against them.
#[doc(hidden)]
pub fn dedup_bucket_options() -> Options {
    cf_options(&format!("{}0", CF_IDS_PREFIX))
}

/// Options per column family: bloom filters where look-ups dominate.
pub(crate) fn cf_options(name: &str) -> Options {
    let mut o = Options::default();
    let mut table = rocksdb::BlockBasedOptions::default();
    table.set_block_cache(block_cache());
    if name.starts_with(CF_IDS_PREFIX) {
        // Ids reach the tables sorted, in files RocksDB ingests
        // (`id_blobs`); the memtable holds a key per batch, not per id, so
        // RocksDB's default skiplist serves (the hashed memtable it had
        // while it held a key per id was measured against it in
        // `benches/dedup_write`). The look-ups that reach RocksDB are the
        // in-memory filter's positives, mostly delivered ids: a bloom
        // filter per table keeps each to the one file that holds it.
        table.set_bloom_filter(10.0, false);
        o.set_write_buffer_size(DEDUP_WRITE_BUFFER);
        // Compaction when 16 files wait, not RocksDB's 4. A bucket only
        // gains keys and leaves whole (its column family is dropped when it
        // expires), and with random ids every id table overlaps every
        // other, so each compaction into level 1 rewrote all the ids there:
        // 12% of a `pipeline_file` run's CPU, and 7.4× a `HashSet`'s CPU
        // per insert at 10M ids (2.6× with 16). No compaction at all was
        // cheaper still (1.7×) but let a delivered id's look-up probe every
        // table's bloom filter (19.5 µs at 10M ids, against 7.7 with 16);
        // a look-up is what a replay does per record (`benches/README.md`,
        // issue 21, fifth part). The stall triggers move with it.
        o.set_level_zero_file_num_compaction_trigger(16);
        o.set_level_zero_slowdown_writes_trigger(48);
        o.set_level_zero_stop_writes_trigger(64);
    } else if name == CF_QUARANTINE {
        // Grows with the bad records until they are replayed, and is read
        // whole (list, stats, replay): fewer, larger tables.
        o.set_target_file_size_base(QUARANTINE_TABLE_BYTES);
    }
    o.set_block_based_table_factory(&table);
    o
}

/// Why the state folder at `path` is open to other users, naming it and
/// its mode, when it is: it holds the quarantine's raw records, secrets
/// and all. `None` for an owner-only folder or one not made yet.
pub(crate) fn open_to_others(path: &Path) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
        (mode & 0o077 != 0).then(|| {
            format!(
                "state folder {} is open to other users (mode {mode:04o}): it holds the quarantine's raw records",
                path.display()
            )
        })
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ident(p: &str) -> Identity {
        Identity { pipeline: p.into(), sources: vec!["/var/log/a.log".into()] }
    }

    #[test]
    fn refuses_another_pipeline_and_keeps_checkpoints() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        {
            let s = Store::open(dir.path(), &ident("orders")).unwrap_or_else(|e| panic!("{e}"));
            let mut b = WriteBatch::default();
            let cp = Checkpoint { generation: 2, offset: 4096, dev: 1, ino: 7, head_len: 0, head_hash: String::new() };
            s.put_checkpoint(&mut b, "a.log", &cp).unwrap_or_else(|e| panic!("{e}"));
            s.commit(b).unwrap_or_else(|e| panic!("{e}"));
        }
        let err = Store::open(dir.path(), &ident("payments")).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("belongs to pipeline \"orders\"") && err.contains("\"payments\""), "{err}");
        let s = Store::open(dir.path(), &ident("orders")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.checkpoint("a.log").ok().flatten().map(|c| c.offset), Some(4096));
        assert_eq!(s.checkpoint("b.log").ok().flatten(), None);
    }

    #[test]
    fn small_tables_that_rocksdb_only_moves_down_are_merged() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let s = Store::open(dir.path(), &ident("orders")).unwrap_or_else(|e| panic!("{e}"));
        // Six flushes of checkpoints for six files, as a rotated input
        // makes: keys that do not overlap, so RocksDB's own compaction
        // (at four tables) moves them down a level and merges nothing.
        for n in 0..6u64 {
            let mut b = WriteBatch::default();
            let cp = Checkpoint { generation: n, offset: n, dev: 1, ino: n, head_len: 0, head_hash: String::new() };
            s.put_checkpoint(&mut b, &format!("input.log.{n}"), &cp).unwrap_or_else(|e| panic!("{e}"));
            s.commit(b).unwrap_or_else(|e| panic!("{e}"));
            let cf = s.cf(CF_CHECKPOINTS).unwrap_or_else(|e| panic!("{e}"));
            s.db().flush_cf(&cf).unwrap_or_else(|e| panic!("{e}"));
        }
        s.db().wait_for_compact(&rocksdb::WaitForCompactOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        let before = s.shape().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(before[CF_CHECKPOINTS].tables, 6, "the control: RocksDB alone keeps every table: {before:?}");
        assert_eq!(before["dedup"], FamilyShape::default(), "no id written, no dedup table: {before:?}");
        assert!(before.contains_key(CF_QUARANTINE) && before.contains_key(CF_QUARANTINE_POSITIONS), "{before:?}");
        let merged = s.merge_small_tables().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(merged, vec![(CF_CHECKPOINTS, 6)]);
        let after = s.shape().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(after[CF_CHECKPOINTS].tables, 1, "{after:?}");
        for n in 0..6u64 {
            let got = s.checkpoint(&format!("input.log.{n}")).ok().flatten().map(|c| c.offset);
            assert_eq!(got, Some(n), "input.log.{n}'s checkpoint survives the merge");
        }
        assert!(s.merge_small_tables().unwrap_or_else(|e| panic!("{e}")).is_empty(), "one table: nothing to merge");
    }
}
