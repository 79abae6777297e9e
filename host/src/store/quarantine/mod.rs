//! The quarantine on the embedded default: a column family of the state
//! store, so an entry becomes durable in the same synced write as the
//! checkpoint that moves past its record. Each entry keeps everything needed
//! to repair and replay the record: the original bytes, key and headers,
//! the source position, the stage and reason, the plugin versions, the host
//! version, the time and the attempts.
//!
//! Entries can hold secrets (a token travels with the original bytes): the
//! store is owner-only, and `Masking` replaces them before an entry is
//! written (`quarantine.mask_fields`: JSON names at any depth or dotted
//! paths; `quarantine.mask_patterns`: regexes over text that is not JSON,
//! and over JSON strings). A masked entry does not keep the original, and
//! says what was masked. Since the original is never written, a masked
//! value is in no entry, no export and no file of the store.

pub(crate) mod config;

use base64::Engine as _;
use rocksdb::{IteratorMode, WriteBatch};
use serde::{Deserialize, Serialize};

use super::{CF_QUARANTINE, CF_QUARANTINE_POSITIONS, Store, StoreError};
use crate::record::{Position, Record};
use crate::verdict::PluginId;

use crate::masking::MASK;
use crate::masking::Masking;

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
    pub(crate) fn new(b: &[u8]) -> Bytes {
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
    /// The sink that refused it, when the pipeline has several
    /// (`[[sinks]]`): a replay sends the record there only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sink: Option<String>,
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
pub(crate) struct Rejection<'a> {
    pub record: &'a Record,
    pub stage: &'a str,
    pub plugin: Option<&'a PluginId>,
    /// The sink that refused it, of several.
    pub sink: Option<&'a str>,
    pub reason: String,
    pub attempts: u32,
}

pub(crate) struct Quarantine<'s> {
    store: &'s Store,
    pipeline: String,
    plugins: Vec<PluginVersion>,
    masking: Masking,
}

impl<'s> Quarantine<'s> {
    pub(crate) fn new(store: &'s Store, pipeline: &str, plugins: Vec<PluginVersion>, masking: Masking) -> Self {
        Quarantine { store, pipeline: pipeline.to_string(), plugins, masking }
    }

    /// Build the entry for `r` and add it to `batch`.
    #[cfg(test)]
    pub(crate) fn put(&self, batch: &mut WriteBatch, r: Rejection<'_>, now_nanos: i64) -> Result<Entry, StoreError> {
        let entry = self.entry(r, now_nanos);
        self.write(batch, &entry)?;
        Ok(entry)
    }

    #[cfg(test)]
    /// Add `entry` to `batch`: durable when the batch is committed.
    pub(crate) fn write(&self, batch: &mut WriteBatch, entry: &Entry) -> Result<(), StoreError> {
        self.write_all(batch, &[entry])
    }

    /// Add `entries` (a batch's, each at its own position) to `batch`, with
    /// one look-up of their positions for them all.
    ///
    /// One entry per source position: a record quarantined again at a
    /// position that already has an entry (read again after a crash that
    /// came before its offset's commit, which on Kafka is not in this
    /// store's write) replaces that entry, under its first id, rather than
    /// adding a second for the same record. The entry's own `id` is then
    /// not the one stored: read it back by position.
    pub(crate) fn write_all(&self, batch: &mut WriteBatch, entries: &[&Entry]) -> Result<(), StoreError> {
        if entries.is_empty() {
            return Ok(());
        }
        let cf = self.store.cf(CF_QUARANTINE)?;
        let positions = self.store.cf(CF_QUARANTINE_POSITIONS)?;
        let keys: Vec<Vec<u8>> = entries.iter().map(|e| position_key(&e.position)).collect();
        let firsts = self.store.db().multi_get_cf(keys.iter().map(|k| (&positions, k)));
        for ((entry, at), first) in entries.iter().zip(keys).zip(firsts) {
            let first = first.map_err(|e| self.store.rocks(e))?;
            let raw = match &first {
                Some(id) if id.as_slice() != entry.id.as_bytes() => {
                    let id = String::from_utf8_lossy(id).into_owned();
                    serde_json::to_vec(&Entry { id, ..(*entry).clone() })
                }
                _ => serde_json::to_vec(entry),
            }
            .map_err(|e| self.store.corrupt("quarantine entry", e))?;
            let id = first.unwrap_or_else(|| entry.id.as_bytes().to_vec());
            batch.put_cf(&cf, &id, raw);
            batch.put_cf(&positions, at, id);
        }
        Ok(())
    }

    /// `reason` (about `record`) as it may leave the process: in an entry,
    /// a log line, an error. The values masked in the record's payload,
    /// key and headers are masked wherever the reason quotes them, then
    /// the patterns and masked field names.
    pub(crate) fn reason_for(&self, record: &Record, reason: &str) -> String {
        if self.masking.is_empty() {
            return reason.to_string();
        }
        let mut secrets = self.masking.secrets(&record.payload);
        if let Some(key) = &record.key {
            secrets.extend(self.masking.secrets(key));
        }
        for (name, value) in &record.headers {
            if self.masking.names(name) {
                secrets.push(value.clone());
            } else {
                secrets.extend(self.masking.secrets(value));
            }
        }
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        self.masking.text(reason, &secrets).into_owned()
    }

    pub(crate) fn masking(&self) -> &Masking {
        &self.masking
    }

    /// The entry for `r`, not yet written anywhere.
    pub(crate) fn entry(&self, r: Rejection<'_>, now_nanos: i64) -> Entry {
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("{:016x}{:08x}", now_nanos.max(0) as u64, seq);
        let (payload, mut masked) = self.masking.apply(&r.record.payload);
        // A Kafka record's key and headers can hold secrets too (a token
        // in an `authorization` header): the same names and patterns.
        let key = r.record.key.as_deref().map(|k| {
            let (kept, m) = self.masking.apply(k);
            masked.extend(m.into_iter().map(|x| format!("key: {x}")));
            Bytes::new(&kept)
        });
        let headers = r
            .record
            .headers
            .iter()
            .map(|(name, v)| {
                if self.masking.names(name) {
                    masked.push(format!("header {name}"));
                    return (name.clone(), Bytes::new(MASK.as_bytes()));
                }
                let (kept, m) = self.masking.apply(v);
                masked.extend(m.into_iter().map(|x| format!("header {name}: {x}")));
                (name.clone(), Bytes::new(&kept))
            })
            .collect();
        // A reason may quote the record (a plugin's own message, a
        // backend's answer): what is masked in the record is masked in it.
        let reason = self.reason_for(r.record, &r.reason);
        Entry {
            id,
            time: sluice_guest::time::format_rfc3339(now_nanos),
            pipeline: self.pipeline.clone(),
            host_version: crate::HOST_VERSION.to_string(),
            stage: r.stage.to_string(),
            plugin: r.plugin.map(PluginVersion::from),
            sink: r.sink.map(str::to_string),
            reason,
            attempts: r.attempts,
            position: r.record.position.clone(),
            payload: Bytes::new(&payload),
            key,
            headers,
            plugins: self.plugins.clone(),
            masked,
            replayed: None,
        }
    }
}

/// Which entries a query (`quarantine list|stats|export`) keeps.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filter {
    pub stage: Option<String>,
    /// The rejecting plugin's name.
    pub plugin: Option<String>,
    /// A part of the reason.
    pub reason: Option<String>,
    /// Written at or after, nanoseconds since the epoch.
    pub since: Option<i64>,
    /// Written before.
    pub until: Option<i64>,
    pub replayed: Option<bool>,
}

impl Filter {
    pub(crate) fn keeps(&self, e: &Entry) -> bool {
        let written = e.written_nanos();
        self.stage.as_ref().is_none_or(|s| *s == e.stage)
            && self.plugin.as_ref().is_none_or(|p| e.plugin.as_ref().is_some_and(|q| q.name == *p))
            && self.reason.as_ref().is_none_or(|r| e.reason.contains(r.as_str()))
            && self.since.is_none_or(|t| written >= t)
            && self.until.is_none_or(|t| written < t)
            && self.replayed.is_none_or(|r| r == e.replayed.is_some())
    }
}

impl Entry {
    /// The record again, as its source handed it over (a replay, a shadow
    /// run): what the plugins set on it is not kept.
    pub(crate) fn record(&self) -> crate::record::Record {
        crate::record::Record {
            payload: self.payload.to_vec().into(),
            key: self.key.as_ref().map(|k| k.to_vec().into()),
            headers: self.headers.iter().map(|(k, v)| (k.clone(), v.to_vec())).collect(),
            source_timestamp: None,
            position: self.position.clone(),
            event_id: None,
            timestamp: None,
            sinks: None,
        }
    }

    /// When it was written: the entry id begins with it, in hex.
    pub(crate) fn written_nanos(&self) -> i64 {
        self.id.get(..16).and_then(|h| u64::from_str_radix(h, 16).ok()).map_or(0, |n| n as i64)
    }
}

/// Counts of entries per door detail, for `quarantine stats`.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Stats {
    pub entries: u64,
    pub replayed: u64,
    pub masked: u64,
    pub by_stage: std::collections::BTreeMap<String, u64>,
    pub by_plugin: std::collections::BTreeMap<String, u64>,
    pub by_reason: std::collections::BTreeMap<String, u64>,
    /// The reasons with their values taken out (`reason_template`): a
    /// reason that names the value at fault, as the guides advise, is one
    /// row per kind of fault here, not one per record.
    pub by_reason_template: std::collections::BTreeMap<String, u64>,
}

/// `reason` with the values in it replaced by `…`: what is quoted, and
/// every word with a digit in it (times, numbers, offsets, digests), so
/// that `field n: "999" is not an int` and `field n: "x1" is not an int`
/// count as one kind of fault.
pub(crate) fn reason_template(reason: &str) -> String {
    let mut out = String::with_capacity(reason.len());
    let mut chars = reason.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c == '"' || c == '\'' {
            // A quoted value, to its closing quote (escapes skipped).
            let mut closed = false;
            while let Some((_, d)) = chars.next() {
                if d == '\\' {
                    chars.next();
                } else if d == c {
                    closed = true;
                    break;
                }
            }
            if closed {
                out.push(c);
                out.push('…');
                out.push(c);
            } else {
                out.push_str(&reason[at..]);
            }
            continue;
        }
        if c.is_whitespace() {
            out.push(c);
            continue;
        }
        // A word: up to white space or a quote.
        let mut end = at + c.len_utf8();
        while let Some(&(i, d)) = chars.peek() {
            if d.is_whitespace() || d == '"' || d == '\'' {
                break;
            }
            end = i + d.len_utf8();
            chars.next();
        }
        let word = &reason[at..end];
        if word.chars().any(|d| d.is_ascii_digit()) {
            // Punctuation around the value stays: `(tried 3)` → `(tried …)`.
            let core = word.trim_matches(|d: char| matches!(d, '(' | ')' | '[' | ']' | ',' | ';' | ':' | '.'));
            let lead = word.find(core).unwrap_or(0);
            out.push_str(&word[..lead]);
            out.push('…');
            out.push_str(&word[lead + core.len()..]);
        } else {
            out.push_str(word);
        }
    }
    out
}

impl Stats {
    pub(crate) fn add(&mut self, e: &Entry) {
        self.entries += 1;
        self.replayed += u64::from(e.replayed.is_some());
        self.masked += u64::from(!e.masked.is_empty());
        *self.by_stage.entry(e.stage.clone()).or_default() += 1;
        let plugin = e.plugin.as_ref().map_or_else(|| "-".to_string(), |p| p.name.clone());
        *self.by_plugin.entry(plugin).or_default() += 1;
        *self.by_reason.entry(e.reason.clone()).or_default() += 1;
        *self.by_reason_template.entry(reason_template(&e.reason)).or_default() += 1;
    }
}

/// `kafka:logs/3@42`, `file:/var/log/app.log#0@1024`: a record's place in
/// its source, the key of its one entry.
fn position_key(p: &Position) -> Vec<u8> {
    format!("{}:{p}", p.source()).into_bytes()
}

impl Store {
    /// The entry of the record at `position`, if one was quarantined there.
    #[cfg(test)]
    fn quarantined_at(&self, position: &Position) -> Result<Option<Entry>, StoreError> {
        let Ok(positions) = self.cf(CF_QUARANTINE_POSITIONS) else { return Ok(None) };
        match self.db().get_cf(&positions, position_key(position)).map_err(|e| self.rocks(e))? {
            Some(id) => self.quarantine_entry(&String::from_utf8_lossy(&id)),
            None => Ok(None),
        }
    }

    /// Each entry, oldest first, handed to `f` as it is read: one pass,
    /// without holding them all (an export of millions). `f` returns
    /// `false` to stop.
    pub(crate) fn scan_quarantine<E: From<StoreError>>(
        &self,
        mut f: impl FnMut(Entry) -> Result<bool, E>,
    ) -> Result<(), E> {
        let cf = self.cf(CF_QUARANTINE)?;
        for item in self.db().iterator_cf(&cf, IteratorMode::Start) {
            let (_, v) = item.map_err(|e| self.rocks(e))?;
            let entry = serde_json::from_slice(&v).map_err(|e| self.corrupt("quarantine entry", e))?;
            if !f(entry)? {
                break;
            }
        }
        Ok(())
    }

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

    pub(crate) fn quarantine_entry(&self, id: &str) -> Result<Option<Entry>, StoreError> {
        let cf = self.cf(CF_QUARANTINE)?;
        match self.db().get_cf(&cf, id.as_bytes()).map_err(|e| self.rocks(e))? {
            Some(v) => serde_json::from_slice(&v).map(Some).map_err(|e| self.corrupt("quarantine entry", e)),
            None => Ok(None),
        }
    }

    /// A replay failed again: keep the entry, with the new reason and one
    /// more attempt.
    pub(crate) fn update_quarantined(
        &self,
        batch: &mut WriteBatch,
        entry: &Entry,
        reason: &str,
    ) -> Result<(), StoreError> {
        let cf = self.cf(CF_QUARANTINE)?;
        let updated = Entry { reason: reason.to_string(), attempts: entry.attempts + 1, ..entry.clone() };
        let raw = serde_json::to_vec(&updated).map_err(|e| self.corrupt("quarantine entry", e))?;
        batch.put_cf(&cf, entry.id.as_bytes(), raw);
        Ok(())
    }

    /// Record that `entry` was replayed (in `batch`, with the replay's ids).
    pub(crate) fn mark_replayed(&self, batch: &mut WriteBatch, entry: &Entry, when: &str) -> Result<(), StoreError> {
        let cf = self.cf(CF_QUARANTINE)?;
        let updated = Entry { replayed: Some(when.to_string()), ..entry.clone() };
        let raw = serde_json::to_vec(&updated).map_err(|e| self.corrupt("quarantine entry", e))?;
        batch.put_cf(&cf, entry.id.as_bytes(), raw);
        Ok(())
    }
}

#[cfg(test)]
mod template_tests {
    use super::reason_template;

    #[test]
    fn reasons_that_name_their_values_share_a_template() {
        let cases = [
            (r#"field n: "99999999999999999999" is not an int"#, r#"field n: "…" is not an int"#),
            (r#"field n: "x1" is not an int"#, r#"field n: "…" is not an int"#),
            (
                "timestamp 2026-11-30T15:55:11Z is older than max_age 1d (oldest accepted 2026-12-02T15:55:13.9Z)",
                "timestamp … is older than max_age … (oldest accepted …)",
            ),
            ("no pattern matched (tried 3)", "no pattern matched (tried …)"),
            ("a comment is not an event", "a comment is not an event"),
            (r#"unclosed "quote and 42"#, r#"unclosed "quote and 42"#),
            (r#"escaped "a \" b" here"#, r#"escaped "…" here"#),
        ];
        for (reason, template) in cases {
            assert_eq!(reason_template(reason), template, "{reason}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::masking::masking;

    #[test]
    fn a_kafka_records_key_and_headers_are_masked_like_its_payload() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store = Store::open(dir.path(), &crate::store::Identity { pipeline: "p".into(), sources: vec![] })
            .unwrap_or_else(|e| panic!("{e}"));
        let q = Quarantine::new(&store, "p", Vec::new(), masking(&["password", "Authorization"], &[r"token=(\S+)"]));
        let record = crate::record::Record {
            payload: b"not json".to_vec().into(),
            key: Some(br#"{"user":"u","password":"K3Y-S3CRET"}"#.to_vec().into()),
            headers: vec![
                ("authorization".into(), b"Bearer H3ADER-S3CRET".to_vec()),
                ("trace".into(), b"id=7 token=TRAC3-S3CRET".to_vec()),
                ("plain".into(), b"kept".to_vec()),
            ],
            source_timestamp: None,
            position: crate::record::Position::Kafka { topic: "t".into(), partition: 0, offset: 1 },
            event_id: None,
            timestamp: None,
            sinks: None,
        };
        let rejection =
            Rejection { record: &record, stage: "plugin", plugin: None, sink: None, reason: "bad".into(), attempts: 1 };
        let e = q.entry(rejection, 1);
        let text = serde_json::to_string(&e).unwrap_or_default();
        assert!(!text.contains("S3CRET"), "{text}");
        assert_eq!(e.masked, ["key: password", "header authorization", "header trace: pattern token=(\\S+)"]);
        assert_eq!(e.headers[2].1, Bytes::new(b"kept"));
        assert_eq!(e.key.map(|k| k.to_vec()), Some(br#"{"password":"***","user":"u"}"#.to_vec()));
    }

    /// Issue 25, item 7: a record read again after a crash (its offset
    /// not yet committed) and quarantined again is one entry, under its
    /// first id, not two; another position is another entry.
    #[test]
    fn a_position_quarantined_again_replaces_its_entry() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store = Store::open(dir.path(), &crate::store::Identity { pipeline: "p".into(), sources: vec![] })
            .unwrap_or_else(|e| panic!("{e}"));
        let q = Quarantine::new(&store, "p", Vec::new(), Masking::default());
        let at = |offset: i64| crate::record::Position::Kafka { topic: "t".into(), partition: 3, offset };
        let quarantine = |offset: i64, reason: &str, now: i64| {
            let record =
                crate::record::Record { position: at(offset), ..crate::record::Record::line("bad", "x", 0, 0) };
            let mut batch = WriteBatch::default();
            let r = Rejection {
                record: &record,
                stage: "plugin",
                plugin: None,
                sink: None,
                reason: reason.into(),
                attempts: 1,
            };
            let entry = q.put(&mut batch, r, now).unwrap_or_else(|e| panic!("{e}"));
            store.commit(batch).unwrap_or_else(|e| panic!("{e}"));
            entry
        };
        let first = quarantine(42, "before the kill", 1_000);
        quarantine(42, "read again", 2_000);
        quarantine(43, "another record", 3_000);
        let entries = store.quarantine_entries().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(entries.len(), 2, "{entries:?}");
        assert_eq!(entries[0].id, first.id, "the first id is kept");
        assert_eq!(entries[0].reason, "read again");
        assert_eq!(entries[1].position, at(43));
        let found = store.quarantined_at(&at(42)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(found.map(|e| e.id), Some(first.id));
        assert_eq!(store.quarantined_at(&at(44)).unwrap_or_else(|e| panic!("{e}")), None);
    }

    #[test]
    fn filters_keep_what_they_name_and_stats_count_it() {
        let entry = |id: &str, stage: &str, plugin: Option<&str>, reason: &str, replayed: bool| Entry {
            id: id.into(),
            time: String::new(),
            pipeline: "p".into(),
            host_version: "0".into(),
            stage: stage.into(),
            plugin: plugin.map(|n| PluginVersion { name: n.into(), digest: "d".into() }),
            sink: None,
            reason: reason.into(),
            attempts: 0,
            position: Position::File { path: "f".into(), generation: 0, offset: 0 },
            payload: Bytes::new(b"x"),
            key: None,
            headers: Vec::new(),
            plugins: Vec::new(),
            masked: Vec::new(),
            replayed: replayed.then(|| "t".to_string()),
        };
        let a = entry("00000000000000640000000a", "plugin", Some("json"), "not valid JSON", false);
        let b = entry("00000000000000c80000000b", "source", None, "line too long", true);
        assert_eq!(a.written_nanos(), 100);
        let keeps = |f: Filter| [&a, &b].iter().filter(|e| f.keeps(e)).count();
        assert_eq!(keeps(Filter::default()), 2);
        assert_eq!(keeps(Filter { plugin: Some("json".into()), ..Filter::default() }), 1);
        assert_eq!(keeps(Filter { stage: Some("sink".into()), ..Filter::default() }), 0);
        assert_eq!(keeps(Filter { reason: Some("too long".into()), ..Filter::default() }), 1);
        assert_eq!(keeps(Filter { since: Some(150), ..Filter::default() }), 1);
        assert_eq!(keeps(Filter { until: Some(150), ..Filter::default() }), 1);
        assert_eq!(keeps(Filter { replayed: Some(false), ..Filter::default() }), 1);
        let mut stats = Stats::default();
        stats.add(&a);
        stats.add(&b);
        assert_eq!((stats.entries, stats.replayed), (2, 1));
        assert_eq!(stats.by_plugin.get("-"), Some(&1));
        assert_eq!(stats.by_stage.get("plugin"), Some(&1));
    }

    #[test]
    fn bytes_round_trip_text_and_binary() {
        assert_eq!(Bytes::new(b"abc"), Bytes::Utf8("abc".into()));
        let bin = vec![0xff, 0x00, 0x80];
        assert!(matches!(Bytes::new(&bin), Bytes::Base64(_)));
        assert_eq!(Bytes::new(&bin).to_vec(), bin);
    }
}
