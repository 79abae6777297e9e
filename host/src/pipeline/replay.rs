//! `sluice quarantine replay`: quarantined records through the current
//! pipeline, on the same partition driver as every source. What differs is
//! what the write carries (`ReplayKeeper`): instead of a checkpoint, each
//! entry that passed is marked replayed, and each that failed again keeps
//! its entry with the new reason and one more attempt. Ids, marks and
//! updates are durable together, so a crash mid-replay leaves every entry
//! either replayed with its events delivered, or not replayed (then a
//! second replay delivers nothing twice: the dedup window holds what the
//! first one delivered).
//!
//! On Kafka with the dedup changelog on, the ids a replay delivers go to
//! the changelog as well, under the name of the partition each entry came
//! from, so that the partition's owner, now or after a move, absorbs a
//! later copy of them as the replaying store does. Each scope's entries
//! run as a partition of that name. One window stays: an entry is marked
//! replayed in its batch's write, which can be durable before the
//! changelog has the batch's ids; a replay killed between the two leaves
//! those ids (at most the batches in flight) out of the changelog, so the
//! next owner of their partition would deliver a later copy once more.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use rocksdb::WriteBatch;
use serde::Serialize;

use super::driver::{self, IdLog, Keeper, Partition, Reader, SentIds, Shared};
use super::kafka::changelog::Changelog;
use crate::batch::{Pull, Pulled};
use crate::config::Config;
use crate::custody::ids::{IdDigest, Scope, scope_of};
use crate::custody::plan::Disposition;
use crate::custody::standing::PartitionState;
use crate::pipeline::clock::now_nanos;
use crate::pipeline::error::PipelineError;
use crate::pipeline::setup::{build_chain, open_sinks};
use crate::plugin::chain::Chain;
use crate::plugin::engine::Runtime;
use crate::record::Position;
use crate::source::config::SourceConfig;
use crate::store::Store;
use crate::store::dedup::DedupWindow;
use crate::store::quarantine::Entry;
use crate::telemetry::stats::RunStats;

/// How long a replay on Kafka waits for the brokers to open the dedup
/// changelog.
const BROKER_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

#[derive(Debug, Default, Serialize)]
pub(crate) struct ReplaySummary {
    pub entries: u64,
    pub delivered: u64,
    pub duplicate: u64,
    pub dropped: u64,
    pub still_quarantined: u64,
    pub skipped_masked: u64,
    pub skipped_replayed: u64,
    /// Why the entries still quarantined are, by `stage: reason`.
    pub reasons: std::collections::BTreeMap<String, u64>,
}

pub(crate) fn replay(
    cfg: &Config,
    runtime: &Runtime,
    ids: &[String],
    include_masked: bool,
) -> Result<ReplaySummary, PipelineError> {
    let store = crate::pipeline::setup::open_store(cfg)?;
    // Not expired first: a replay looks up what the run left.
    let dedup = DedupWindow::new(&store, super::setup::window_of(cfg))?;
    // Repartitioned: each entry replays through the side that quarantined
    // it; only the back keeps a changelog.
    let sides = super::kafka::repartition::Sides::of(cfg)?;
    let changelog_cfg = sides.as_ref().map_or(cfg, |s| &s.back);
    let changelog = match &cfg.source {
        SourceConfig::Kafka(k) => {
            // An interactive command waits a while for brokers that are
            // down, then says so (`run` waits for as long as it takes).
            let give_up = crate::pipeline::stop::Stop::default();
            let timer = give_up.clone();
            std::thread::spawn(move || {
                std::thread::sleep(BROKER_WAIT);
                timer.request();
            });
            Changelog::open(changelog_cfg, k, &store, &dedup, &give_up)?
        }
        SourceConfig::File(_) => None,
    };
    let replayed_ids = changelog.as_ref().map(ReplayedIds);
    let sinks = open_sinks(cfg, runtime)?;
    let chain = build_chain(runtime, cfg)?;
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
    // A batch shares one dedup scope: entries of one partition (or topic,
    // under `dedup.scope = "topic"`) together. A repartitioned pipeline's
    // sides decide each partition's ids apart. Entries a sink of several
    // refused go to that sink alone: they run apart, by sink.
    let topic_wide = cfg.dedup.scope == crate::store::dedup::config::DedupScope::Topic && sides.is_none();
    entries.sort_by(|a, b| {
        (scope_of(&a.position, topic_wide), &a.sink).cmp(&(scope_of(&b.position, topic_wide), &b.sink))
    });
    let bar = ProgressBar::new(entries.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("replay {bar:40} {pos}/{len} entries ({per_sec}, {eta} left)")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );

    let stats = Mutex::new(RunStats::default());
    let summary = Mutex::new(summary);
    let mut chain = Some(chain);
    let settings = crate::pipeline::setup::driver_settings(cfg);
    let front_settings = sides.as_ref().map(|s| crate::pipeline::setup::driver_settings(&s.front));
    let back_settings = sides.as_ref().map(|s| crate::pipeline::setup::driver_settings(&s.back));
    let parts = super::setup::Parts {
        settings: &settings,
        registry: super::setup::open_registry(cfg)?,
        store: &store,
        dedup: &dedup,
        sinks: &sinks,
        stats: &stats,
    };
    super::setup::with_services(cfg, parts, None, None, |shared| {
        let shared = Shared { changelog: replayed_ids.as_ref().map(|l| l as &dyn IdLog), ..shared };
        let front = sides.as_ref().zip(front_settings.as_ref()).map(|(s, settings)| Shared {
            settings,
            sinks: &s.front_sink,
            changelog: None,
            ..shared.clone()
        });
        let back = back_settings.as_ref().map(|settings| Shared { settings, ..shared.clone() });
        let together = |a: &Entry, b: &Entry| {
            scope_of(&a.position, topic_wide) == scope_of(&b.position, topic_wide) && a.sink == b.sink
        };
        for entries in entries.chunk_by(together) {
            let name = partition_of(&entries[0].position, topic_wide);
            let events = sides.as_ref().is_some_and(|s| s.is_back(&entries[0].position));
            let shared = match (&front, &back) {
                (_, Some(back)) if events => back,
                (Some(front), _) => front,
                _ => &shared,
            };
            // Refused by one sink of several: replayed to it alone (a sink
            // no longer configured: to the sinks its route names now).
            let only = entries[0].sink.as_deref().and_then(|s| shared.sinks.only(s));
            let narrowed = only.as_ref().map(|sinks| Shared { sinks, ..shared.clone() });
            let shared = narrowed.as_ref().unwrap_or(shared);
            let chain = if events {
                Chain::checked_passthrough()
            } else {
                match chain.take() {
                    Some(c) => c,
                    None => build_chain(runtime, cfg)?,
                }
            };
            let scope = scope_of(&entries[0].position, topic_wide);
            let mut reader = ReplayReader { entries, next: 0, scope, events };
            let mut keeper = ReplayKeeper { entries, store: &store, summary: &summary, bar: &bar };
            // An interactive command: Ctrl-C ends it; an entry whose
            // delivery did not finish stays in the quarantine as it was.
            let never = || false;
            let partition = Partition {
                name: &name,
                start: Some(0),
                chain,
                stopping: &never,
                state: Arc::new(Mutex::new(PartitionState::default())),
            };
            driver::drive(shared, partition, &mut reader, &mut keeper)?;
        }
        Ok::<(), PipelineError>(())
    })?;
    bar.finish_and_clear();
    let mut summary = summary.into_inner().unwrap_or_default();
    summary.reasons = stats.into_inner().map(|s| s.reasons.0).unwrap_or_default();
    Ok(summary)
}

/// The partition a scope's entries run as: the source partition (or, for
/// the topic scope, the topic) they came from, whose name keys their ids
/// in the changelog; `replay` for files, which have no changelog.
fn partition_of(position: &Position, topic_wide: bool) -> String {
    match position {
        Position::Kafka { topic, .. } if topic_wide => topic.to_string(),
        Position::Kafka { topic, partition, .. } => crate::source::kafka::partition_name(topic, *partition),
        Position::File { .. } => "replay".to_string(),
    }
}

/// The changelog as a replay writes it: the ids, and never a position.
/// The replaying store does not own the partition: its owners may have
/// written the changelog since this store last read it, so where this
/// store's next restore starts stays where its last one ended.
struct ReplayedIds<'c>(&'c Changelog<'c>);

impl IdLog for ReplayedIds<'_> {
    fn send<'l>(&'l self, partition: &str, now_secs: u64, ids: &[IdDigest]) -> Box<dyn SentIds + 'l> {
        self.0.send(partition, now_secs, ids)
    }

    fn remember(&self, _partition: &str, _acked: i64, _write: &mut WriteBatch) -> Result<(), PipelineError> {
        Ok(())
    }
}

/// One scope's entries as records, in batches. A record's position in the
/// driver's sense is its entry's index.
struct ReplayReader<'a> {
    entries: &'a [Entry],
    next: usize,
    scope: Scope,
    /// The entries are events a repartitioned back quarantined
    /// (`repartition::decode`).
    events: bool,
}

impl Reader for ReplayReader<'_> {
    fn pull(&mut self, max: usize) -> Result<Option<Pull>, PipelineError> {
        if self.next >= self.entries.len() {
            return Ok(None);
        }
        let end = (self.next + max).min(self.entries.len());
        let records = (self.next..end)
            .map(|i| {
                let mut record = self.entries[i].record();
                let refused = if self.events { super::kafka::by_id_value::decode(&mut record).err() } else { None };
                Pulled { record, start: i as u64, next: i as u64 + 1, refused }
            })
            .collect();
        self.next = end;
        let behind = Some((self.entries.len() - self.next) as u64);
        Ok(Some(Pull { records, scope: self.scope, received: Instant::now(), behind }))
    }
}

/// What a replayed entry becomes: marked replayed, or updated with the
/// new reason; in the write that makes its events' ids durable.
struct ReplayKeeper<'a> {
    entries: &'a [Entry],
    store: &'a Store,
    summary: &'a Mutex<ReplaySummary>,
    bar: &'a ProgressBar,
}

impl Keeper for ReplayKeeper<'_> {
    fn with_doors(
        &mut self,
        _position: u64,
        records: &[Pulled],
        fates: &[Option<Disposition>],
        write: &mut WriteBatch,
    ) -> Result<(), PipelineError> {
        let when = sluice_guest::time::format_rfc3339(now_nanos());
        let mut summary = self.summary.lock().unwrap_or_else(|p| p.into_inner());
        for (r, fate) in records.iter().zip(fates) {
            let entry = &self.entries[r.start as usize];
            summary.entries += 1;
            let Some(fate) = fate else { continue };
            match fate {
                Disposition::Quarantine { reason, .. } => {
                    summary.still_quarantined += 1;
                    self.store.update_quarantined(write, entry, reason)?;
                }
                other => {
                    match other {
                        Disposition::Delivered => summary.delivered += 1,
                        Disposition::Duplicate => summary.duplicate += 1,
                        _ => summary.dropped += 1,
                    }
                    self.store.mark_replayed(write, entry, &when)?;
                }
            }
        }
        self.bar.inc(records.len() as u64);
        Ok(())
    }

    fn keeps_quarantine(&self) -> bool {
        true
    }
}
