//! `sluice quarantine replay`: quarantined records through the current
//! pipeline. The batch order is the one of `deliver_batch`; what differs is
//! what the write carries: instead of a checkpoint, each entry that passed
//! is marked replayed, and each that failed again keeps its entry with the
//! new reason and one more attempt. Ids, marks and updates are durable
//! together, so a crash mid-replay leaves every entry either replayed with
//! its events delivered, or not replayed (then a second replay delivers
//! nothing twice: the dedup window holds what the first one delivered).

use indicatif::{ProgressBar, ProgressStyle};
use rocksdb::WriteBatch;
use serde::Serialize;

use super::{Fate, PipelineError, Stages, build_chain, deliver_batch, identity, now_nanos, open_sink, stats};
use crate::config::{Config, SourceConfig};
use crate::plugin::{Record, Runtime};
use crate::store::Store;
use crate::store::dedup::DedupWindow;
use crate::store::quarantine::Entry;

#[derive(Debug, Default, Serialize)]
pub struct ReplaySummary {
    pub entries: u64,
    pub delivered: u64,
    pub duplicate: u64,
    pub dropped: u64,
    pub still_quarantined: u64,
    pub skipped_masked: u64,
    pub skipped_replayed: u64,
}

pub fn replay(
    cfg: &Config,
    runtime: &Runtime,
    ids: &[String],
    include_masked: bool,
) -> Result<ReplaySummary, PipelineError> {
    let store = Store::open(&cfg.pipeline.state_dir, &identity(cfg))?;
    let window = match &cfg.source {
        SourceConfig::File(_) => cfg.dedup.window.unwrap_or(crate::config::DEFAULT_WINDOW),
        SourceConfig::Kafka(k) => super::kafka::window(cfg, k),
    };
    let dedup = DedupWindow::new(&store, window)?;
    let sink = open_sink(cfg)?;
    let mut chain = build_chain(runtime, cfg)?;
    let max_line = match &cfg.source {
        SourceConfig::File(f) => f.max_line_bytes,
        SourceConfig::Kafka(_) => u64::MAX,
    };
    let mut summary = ReplaySummary::default();

    let mut entries: Vec<Entry> = Vec::new();
    for e in store.quarantine_entries()? {
        if !ids.is_empty() && !ids.contains(&e.id) {
            continue;
        }
        if e.replayed.is_some() && ids.is_empty() {
            summary.skipped_replayed += 1;
        } else if !e.masked.is_empty() && !include_masked {
            summary.skipped_masked += 1;
        } else {
            entries.push(e);
        }
    }
    let bar = ProgressBar::new(entries.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("replay {bar:40} {pos}/{len} entries ({per_sec}, {eta} left)")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );

    for chunk in entries.chunks(cfg.pipeline.batch_size) {
        let records: Vec<Record> = chunk
            .iter()
            .map(|e| Record {
                payload: e.payload.to_vec(),
                key: e.key.as_ref().map(|k| k.to_vec()),
                headers: e.headers.iter().map(|(k, v)| (k.clone(), v.to_vec())).collect(),
                source_timestamp: None,
                position: e.position.clone(),
                event_id: None,
                timestamp: None,
            })
            .collect();
        let mut write = WriteBatch::default();
        let mut counts = stats::Counts::default();
        // An interactive command: Ctrl-C ends it; an entry whose delivery did
        // not finish stays in the quarantine as it was.
        let mut stages = Stages { chain: &mut chain, dedup: &dedup, sink: &sink, stopping: &|| false, on_stage: None };
        let input: Vec<(&Record, bool)> = records.iter().map(|r| (r, false)).collect();
        let fates = deliver_batch(&mut stages, &input, max_line, &mut write, &mut counts)?;
        let when = sluice_guest::time::format_rfc3339(now_nanos());
        for (entry, fate) in chunk.iter().zip(fates) {
            summary.entries += 1;
            let Some(fate) = fate else { continue };
            match fate {
                Fate::Quarantine { reason, .. } => {
                    summary.still_quarantined += 1;
                    store.update_quarantined(&mut write, entry, &reason)?;
                }
                other => {
                    match other {
                        Fate::Delivered => summary.delivered += 1,
                        Fate::Duplicate => summary.duplicate += 1,
                        _ => summary.dropped += 1,
                    }
                    store.mark_replayed(&mut write, entry, &when)?;
                }
            }
        }
        store.commit(write)?;
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    Ok(summary)
}
