//! The delivery audit: how each delivered id left, kept in the dedup
//! window's value for that id, and how each absorbed duplicate was met.
//! `sluice audit` reads them back; nothing in a run reads them.
//!
//! The record is small and fixed (`Trail`, 29 bytes): when, which of the
//! store's contexts (the sink and the plugin versions, interned once in
//! `meta`), which origin (a topic or a file, interned the same way), and
//! the position in it. It rides in the same synced write as the id, so an
//! id is never durable without its trail. An absorbed duplicate's trail
//! rides in the same blob as the batch's delivered ids (`id_blobs`), and is
//! stored under the id's key plus `ABSORBED` when the blob becomes a table,
//! in the same bucket: it expires with the window, and a look-up of the id
//! alone never sees it.
//!
//! An interned context or origin is written (synced) before the first
//! trail that names it is handed to the committer, so a trail never
//! outlives what it points at. Ids restored from a changelog, or recorded
//! with `dedup.audit = false`, have an empty value: delivered, detail not
//! kept.

use std::collections::HashMap;
use std::sync::Arc;

use rocksdb::{IteratorMode, WriteOptions};
use serde::Serialize;

use super::interned::{Book, Context, Origin};
use super::{CF_META, Store, StoreError};
use crate::record::Position;

/// The byte after an id's key that marks its absorbed duplicate's trail.
pub(crate) const ABSORBED: u8 = b'd';
const VERSION: u8 = 1;
pub(crate) const TRAIL_BYTES: usize = 29;
const CONTEXT_PREFIX: &str = "audit/context/";
const ORIGIN_PREFIX: &str = "audit/origin/";

/// Where and when one event passed its door.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Trail {
    /// Unix nanoseconds of the write that recorded it.
    pub at_nanos: i64,
    pub context: u32,
    pub origin: u32,
    /// A Kafka partition, or a file's generation (rotations followed).
    pub part: u32,
    /// The record's offset in its partition, or byte offset in its file.
    pub offset: u64,
}

impl Trail {
    pub(crate) fn encode(&self) -> [u8; TRAIL_BYTES] {
        let mut b = [0u8; TRAIL_BYTES];
        b[0] = VERSION;
        b[1..9].copy_from_slice(&self.at_nanos.to_be_bytes());
        b[9..13].copy_from_slice(&self.context.to_be_bytes());
        b[13..17].copy_from_slice(&self.origin.to_be_bytes());
        b[17..21].copy_from_slice(&self.part.to_be_bytes());
        b[21..29].copy_from_slice(&self.offset.to_be_bytes());
        b
    }

    /// `None` for an empty value (no trail kept) or one this version does
    /// not know.
    pub(crate) fn decode(raw: &[u8]) -> Option<Trail> {
        if raw.len() != TRAIL_BYTES || raw[0] != VERSION {
            return None;
        }
        let u32_at = |i: usize| u32::from_be_bytes([raw[i], raw[i + 1], raw[i + 2], raw[i + 3]]);
        let mut at = [0u8; 8];
        at.copy_from_slice(&raw[1..9]);
        let mut offset = [0u8; 8];
        offset.copy_from_slice(&raw[21..29]);
        Some(Trail {
            at_nanos: i64::from_be_bytes(at),
            context: u32_at(9),
            origin: u32_at(13),
            part: u32_at(17),
            offset: u64::from_be_bytes(offset),
        })
    }
}

/// The origin of a record (a topic's partition, or a file) and its
/// position there, as a trail keeps them.
pub(crate) fn origin_of(position: &Position) -> (Origin, u32, u64) {
    match position {
        Position::Kafka { topic, partition, offset } => {
            (Origin { kind: "kafka".into(), name: format!("{topic}/{partition}") }, *partition as u32, *offset as u64)
        }
        Position::File { path, generation, offset } => {
            (Origin { kind: "file".into(), name: path.to_string() }, *generation as u32, *offset)
        }
    }
}

impl Store {
    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.audit.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn load_book(&self, book: &mut Book) -> Result<(), StoreError> {
        if book.loaded {
            return Ok(());
        }
        let (contexts, origins) = self.audit_names()?;
        book.contexts = contexts.into_iter().map(|(id, c)| (c, id)).collect();
        book.origins = origins.into_iter().map(|(id, o)| (o, id)).collect();
        book.loaded = true;
        Ok(())
    }

    /// Every interned context and origin, by number (`sluice audit`).
    #[allow(clippy::type_complexity)]
    pub(crate) fn audit_names(&self) -> Result<(HashMap<u32, Context>, HashMap<u32, Origin>), StoreError> {
        let meta = self.cf(CF_META)?;
        let mut contexts = HashMap::new();
        let mut origins = HashMap::new();
        let from = IteratorMode::From(b"audit/", rocksdb::Direction::Forward);
        for item in self.db().iterator_cf(&meta, from) {
            let (k, v) = item.map_err(|e| self.rocks(e))?;
            let Ok(key) = std::str::from_utf8(&k) else { break };
            let number = |prefix: &str| u32::from_str_radix(&key[prefix.len()..], 16).ok();
            if let Some(id) = key.starts_with(CONTEXT_PREFIX).then(|| number(CONTEXT_PREFIX)).flatten() {
                contexts.insert(id, serde_json::from_slice(&v).map_err(|e| self.corrupt("audit context", e))?);
            } else if let Some(id) = key.starts_with(ORIGIN_PREFIX).then(|| number(ORIGIN_PREFIX)).flatten() {
                origins.insert(id, serde_json::from_slice(&v).map_err(|e| self.corrupt("audit origin", e))?);
            } else if !key.starts_with("audit/") {
                break;
            }
        }
        Ok((contexts, origins))
    }

    fn put_synced(&self, key: String, value: &impl Serialize) -> Result<(), StoreError> {
        let raw = serde_json::to_vec(value).map_err(|e| self.corrupt("audit name", e))?;
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        self.db().put_cf_opt(&self.cf(CF_META)?, key, raw, &wo).map_err(|e| self.rocks(e))
    }

    /// The number of `context`, written (synced) the first time it is seen.
    pub(crate) fn intern_context(&self, context: &Context) -> Result<u32, StoreError> {
        self.intern(context, CONTEXT_PREFIX, |b| &mut b.contexts)
    }

    /// The number of `origin`, written (synced) the first time it is seen.
    pub(crate) fn intern_origin(&self, origin: &Origin) -> Result<u32, StoreError> {
        self.intern(origin, ORIGIN_PREFIX, |b| &mut b.origins)
    }

    fn intern<T: Clone + Eq + std::hash::Hash + Serialize>(
        &self,
        value: &T,
        prefix: &str,
        table: fn(&mut Book) -> &mut HashMap<T, u32>,
    ) -> Result<u32, StoreError> {
        let mut book = self.book();
        self.load_book(&mut book)?;
        let names = table(&mut book);
        if let Some(id) = names.get(value) {
            return Ok(*id);
        }
        let id = names.len() as u32;
        self.put_synced(format!("{prefix}{id:08x}"), value)?;
        names.insert(value.clone(), id);
        Ok(id)
    }
}

/// A partition's trail writer: its context, and the last origin it
/// interned, so a batch of one partition asks the book once, not per record.
pub struct Trails {
    context: u32,
    /// The shared name (topic or path), the Kafka partition (`u32::MAX`
    /// for a file), and the origin's number.
    last: Option<(Arc<str>, u32, u32)>,
}

impl Trails {
    /// Trails written under `context`, interned once in the store.
    pub fn new(store: &Store, context: &Context) -> Result<Trails, StoreError> {
        Ok(Trails { context: store.intern_context(context)?, last: None })
    }

    /// The trail of a record at `position`, recorded at `at_nanos`.
    pub fn trail(
        &mut self,
        store: &Store,
        position: &Position,
        at_nanos: i64,
    ) -> Result<[u8; TRAIL_BYTES], StoreError> {
        let (shared, which, part, offset) = match position {
            Position::Kafka { topic, partition, offset } => {
                (topic, *partition as u32, *partition as u32, *offset as u64)
            }
            Position::File { path, generation, offset } => (path, u32::MAX, *generation as u32, *offset),
        };
        let origin = match &self.last {
            Some((name, w, id)) if *w == which && (Arc::ptr_eq(name, shared) || **name == **shared) => *id,
            _ => {
                let id = store.intern_origin(&origin_of(position).0)?;
                self.last = Some((shared.clone(), which, id));
                id
            }
        };
        Ok(Trail { at_nanos, context: self.context, origin, part, offset }.encode())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Identity;

    #[test]
    fn a_trail_is_29_bytes_and_reads_back() {
        let t =
            Trail { at_nanos: 1_764_633_600_123_456_789, context: 3, origin: 70_000, part: 11, offset: u64::MAX - 1 };
        let raw = t.encode();
        assert_eq!(raw.len(), 29);
        assert_eq!(Trail::decode(&raw), Some(t));
        assert_eq!(Trail::decode(&[]), None, "an id recorded without a trail");
        assert_eq!(Trail::decode(&raw[..28]), None);
    }

    #[test]
    fn names_are_interned_once_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ident = Identity { pipeline: "p".into(), sources: vec![] };
        let c = Context { sink: "http://x".into(), plugins: vec!["json@ab".into()], via: "run".into() };
        let o = Origin { kind: "kafka".into(), name: "logs/4".into() };
        {
            let store = Store::open(dir.path(), &ident).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(store.intern_context(&c).ok(), Some(0));
            let other = Context { via: "replay".into(), ..c.clone() };
            assert_eq!(store.intern_context(&other).ok(), Some(1));
            assert_eq!(store.intern_context(&c).ok(), Some(0));
            assert_eq!(store.intern_origin(&o).ok(), Some(0));
            let mut trails = Trails::new(&store, &c).unwrap_or_else(|e| panic!("{e}"));
            let topic: Arc<str> = "logs".into();
            let raw = trails
                .trail(&store, &Position::Kafka { topic: topic.clone(), partition: 4, offset: 99 }, 7)
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(Trail::decode(&raw), Some(Trail { at_nanos: 7, context: 0, origin: 0, part: 4, offset: 99 }));
        }
        let store = Store::open_read_only(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let (contexts, origins) = store.audit_names().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(contexts.get(&0), Some(&c));
        assert_eq!(contexts.len(), 2);
        assert_eq!(origins.get(&0), Some(&o));
    }
}
