//! The quarantine on the embedded default: a column family of the state
//! store, so an entry becomes durable in the same synced write as the
//! checkpoint that moves past its record. Each entry keeps everything needed
//! to repair and replay the record: the original bytes, key and headers,
//! the source position, the stage and reason, the plugin versions, the host
//! version, the time and the attempts.
//!
//! Entries can hold secrets (a token travels with the original bytes): the
//! store is owner-only, and `mask_fields` replaces JSON fields before an
//! entry is written. A masked entry does not keep the original, and says so.

use base64::Engine as _;
use rocksdb::{IteratorMode, WriteBatch};
use serde::{Deserialize, Serialize};

use super::{CF_QUARANTINE, Store, StoreError};
use crate::plugin::{PluginId, Position, Record};

const MASK: &str = "***";

/// Entry keys are (time, counter); the counter is process-wide so that two
/// partitions quarantining in the same nanosecond never share a key.
static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// A plugin as recorded in an entry: name and full digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginVersion {
    pub name: String,
    pub digest: String,
}

impl From<&PluginId> for PluginVersion {
    fn from(id: &PluginId) -> Self {
        PluginVersion { name: id.name.clone(), digest: id.digest.to_hex().to_string() }
    }
}

/// The original bytes: as text when they are UTF-8, else base64.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bytes {
    Utf8(String),
    Base64(String),
}

impl Bytes {
    pub fn new(b: &[u8]) -> Bytes {
        match std::str::from_utf8(b) {
            Ok(s) => Bytes::Utf8(s.to_string()),
            Err(_) => Bytes::Base64(base64::engine::general_purpose::STANDARD.encode(b)),
        }
    }

    pub fn to_vec(&self) -> Vec<u8> {
        match self {
            Bytes::Utf8(s) => s.as_bytes().to_vec(),
            Bytes::Base64(s) => base64::engine::general_purpose::STANDARD.decode(s).unwrap_or_default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The entry's key: sortable by time (hex of nanoseconds and a counter).
    pub id: String,
    pub time: String,
    pub pipeline: String,
    pub host_version: String,
    /// Where custody failed: `source` (e.g. a line too long), `plugin`, `sink`.
    pub stage: String,
    /// The plugin that rejected the record, when `stage` is `plugin`.
    pub plugin: Option<PluginVersion>,
    pub reason: String,
    pub attempts: u32,
    pub position: Position,
    pub payload: Bytes,
    pub key: Option<Bytes>,
    pub headers: Vec<(String, Bytes)>,
    /// The whole chain that processed it: the processing version.
    pub plugins: Vec<PluginVersion>,
    /// JSON fields masked before writing; when not empty, the original
    /// bytes are not kept.
    pub masked: Vec<String>,
    /// When it was replayed through the pipeline, if it was.
    pub replayed: Option<String>,
}

/// What the pipeline knows when it quarantines a record.
pub struct Rejection<'a> {
    pub record: &'a Record,
    pub stage: &'a str,
    pub plugin: Option<&'a PluginId>,
    pub reason: String,
    pub attempts: u32,
}

pub struct Quarantine<'s> {
    store: &'s Store,
    pipeline: String,
    plugins: Vec<PluginVersion>,
    mask_fields: Vec<String>,
}

impl<'s> Quarantine<'s> {
    pub fn new(store: &'s Store, pipeline: &str, plugins: Vec<PluginVersion>, mask_fields: Vec<String>) -> Self {
        Quarantine { store, pipeline: pipeline.to_string(), plugins, mask_fields }
    }

    /// Build the entry for `r` and add it to `batch`.
    pub fn put(&self, batch: &mut WriteBatch, r: Rejection<'_>, now_nanos: i64) -> Result<Entry, StoreError> {
        let entry = self.entry(r, now_nanos);
        self.write(batch, &entry)?;
        Ok(entry)
    }

    /// Add `entry` to `batch`: durable when the batch is committed.
    pub fn write(&self, batch: &mut WriteBatch, entry: &Entry) -> Result<(), StoreError> {
        let cf = self.store.cf(CF_QUARANTINE)?;
        let raw = serde_json::to_vec(entry).map_err(|e| self.store.corrupt("quarantine entry", e))?;
        batch.put_cf(&cf, entry.id.as_bytes(), raw);
        Ok(())
    }

    /// The entry for `r`, not yet written anywhere.
    pub fn entry(&self, r: Rejection<'_>, now_nanos: i64) -> Entry {
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("{:016x}{:08x}", now_nanos.max(0) as u64, seq);
        let (payload, masked) = mask(&r.record.payload, &self.mask_fields);
        Entry {
            id,
            time: sluice_guest::time::format_rfc3339(now_nanos),
            pipeline: self.pipeline.clone(),
            host_version: crate::HOST_VERSION.to_string(),
            stage: r.stage.to_string(),
            plugin: r.plugin.map(PluginVersion::from),
            reason: r.reason,
            attempts: r.attempts,
            position: r.record.position.clone(),
            payload: Bytes::new(&payload),
            key: r.record.key.as_deref().map(Bytes::new),
            headers: r.record.headers.iter().map(|(k, v)| (k.clone(), Bytes::new(v))).collect(),
            plugins: self.plugins.clone(),
            masked,
            replayed: None,
        }
    }
}

/// Replace the configured JSON fields (dotted paths) of a JSON object
/// payload. Returns the bytes to keep and the paths that were masked.
pub fn mask(payload: &[u8], fields: &[String]) -> (Vec<u8>, Vec<String>) {
    if fields.is_empty() {
        return (payload.to_vec(), Vec::new());
    }
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(payload) else {
        return (payload.to_vec(), Vec::new());
    };
    let mut masked = Vec::new();
    for path in fields {
        let mut cur = Some(&mut value);
        for key in path.split('.') {
            cur = cur.and_then(|v| v.get_mut(key));
        }
        if let Some(v) = cur {
            *v = serde_json::Value::String(MASK.into());
            masked.push(path.clone());
        }
    }
    if masked.is_empty() {
        return (payload.to_vec(), masked);
    }
    (serde_json::to_vec(&value).unwrap_or_else(|_| payload.to_vec()), masked)
}

impl Store {
    /// Every entry, oldest first.
    pub fn quarantine_entries(&self) -> Result<Vec<Entry>, StoreError> {
        let cf = self.cf(CF_QUARANTINE)?;
        let mut out = Vec::new();
        for item in self.db().iterator_cf(&cf, IteratorMode::Start) {
            let (_, v) = item.map_err(|e| self.rocks(e))?;
            out.push(serde_json::from_slice(&v).map_err(|e| self.corrupt("quarantine entry", e))?);
        }
        Ok(out)
    }

    pub fn quarantine_entry(&self, id: &str) -> Result<Option<Entry>, StoreError> {
        let cf = self.cf(CF_QUARANTINE)?;
        match self.db().get_cf(&cf, id.as_bytes()).map_err(|e| self.rocks(e))? {
            Some(v) => serde_json::from_slice(&v).map(Some).map_err(|e| self.corrupt("quarantine entry", e)),
            None => Ok(None),
        }
    }

    /// A replay failed again: keep the entry, with the new reason and one
    /// more attempt.
    pub fn update_quarantined(&self, batch: &mut WriteBatch, entry: &Entry, reason: &str) -> Result<(), StoreError> {
        let cf = self.cf(CF_QUARANTINE)?;
        let updated = Entry { reason: reason.to_string(), attempts: entry.attempts + 1, ..entry.clone() };
        let raw = serde_json::to_vec(&updated).map_err(|e| self.corrupt("quarantine entry", e))?;
        batch.put_cf(&cf, entry.id.as_bytes(), raw);
        Ok(())
    }

    /// Record that `entry` was replayed (in `batch`, with the replay's ids).
    pub fn mark_replayed(&self, batch: &mut WriteBatch, entry: &Entry, when: &str) -> Result<(), StoreError> {
        let cf = self.cf(CF_QUARANTINE)?;
        let updated = Entry { replayed: Some(when.to_string()), ..entry.clone() };
        let raw = serde_json::to_vec(&updated).map_err(|e| self.corrupt("quarantine entry", e))?;
        batch.put_cf(&cf, entry.id.as_bytes(), raw);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_json_fields_and_says_so() {
        let fields = vec!["token".to_string(), "auth.key".to_string(), "absent".to_string()];
        let (kept, masked) = mask(br#"{"token":"s3cret","auth":{"key":"k","user":"u"},"n":1}"#, &fields);
        let text = String::from_utf8_lossy(&kept);
        assert!(!text.contains("s3cret") && !text.contains("\"k\""), "{text}");
        assert!(text.contains("\"user\":\"u\""));
        assert_eq!(masked, vec!["token".to_string(), "auth.key".to_string()]);
        let (kept, masked) = mask(b"not json token=1", &fields);
        assert_eq!(kept, b"not json token=1");
        assert!(masked.is_empty());
    }

    #[test]
    fn bytes_round_trip_text_and_binary() {
        assert_eq!(Bytes::new(b"abc"), Bytes::Utf8("abc".into()));
        let bin = vec![0xff, 0x00, 0x80];
        assert!(matches!(Bytes::new(&bin), Bytes::Base64(_)));
        assert_eq!(Bytes::new(&bin).to_vec(), bin);
    }
}
