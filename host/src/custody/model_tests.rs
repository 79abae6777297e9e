//! The custody order over in-memory fakes, crashed between every two
//! steps: plugins, the window's look-up, the sink, the durable write (ids,
//! quarantine entries and the position together), the next batch. Batches
//! are pipelined as the driver pipelines them: a batch is looked up before
//! the batches ahead of it have written their ids.
//!
//! A batch carries records of several partitions, as a worker gathers
//! them from its lanes (`pipeline::driver`): a share of each in turn, each
//! partition with its own offset tracker and its own position in the
//! write, and all in one dedup scope, so an id may repeat across
//! partitions within a batch and across batches.
//!
//! After any number of crashes and a final clean run: every good id is at
//! the sink, every duplicate at the sink is explained by a crash between a
//! sink acceptance and its durable write, every poison record is
//! quarantined exactly once, and each partition's position ends at its
//! end.
//!
//! With the dedup changelog (Kafka), a batch's accepted ids are published
//! before its write is handed over, and a crash may also move the
//! partition to an instance with an empty store, which restores the
//! changelog (a restart restores its tail). Then the only duplicates are
//! those of a batch between its sink and its publish: one batch per crash,
//! never the writes still with the committer. (The driver sends a batch's
//! ids with its write and has the answer before the next batch reaches the
//! sink; "publish" here is that answer.)
//!
//! With two sinks and a route (`route`), each event goes to the sinks its
//! route names with its id keyed per sink: every good id is in each sink
//! it was routed to, in no other, and each sink's duplicates are explained
//! by a crash between that sink's acceptance and the durable write.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use proptest::prelude::*;

use super::ids::{IdDigest, PIPELINE_SCOPE};
use super::offsets::OffsetTracker;
use super::plan::{Disposition, Plan};
use crate::delivery::FinalAnswer;
use crate::record::Event;
use crate::route::Fanout;
use crate::route::config::RouteConfig;
use crate::verdict::{PluginId, Verdict};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Good,
    PluginReject,
    PluginDrop,
    SinkReject,
}

/// What survives a crash.
#[derive(Default)]
struct Durable {
    window: HashSet<IdDigest>,
    /// Per partition.
    positions: Vec<u64>,
    /// By (partition, position).
    quarantined: BTreeMap<(usize, u64), u32>,
    /// The sinks' own storage: the id of each accepted event (with two
    /// sinks, `sink:id`).
    sink: Vec<String>,
    /// The dedup changelog, when on: durable as soon as published, and
    /// outside the instance.
    changelog: Option<HashSet<IdDigest>>,
}

struct World {
    /// Per partition, per position.
    ids: Vec<Vec<String>>,
    kinds: Vec<Vec<Kind>>,
    durable: Durable,
    /// Ids accepted by the sink in a batch that then crashed before its
    /// write: the only allowed cause of a duplicate at the sink.
    at_risk: HashSet<String>,
    step: u32,
    crashes: VecDeque<u32>,
    /// Two sinks and a route; `None`: one sink.
    fanout: Option<Arc<Fanout>>,
}

struct Crash;

impl World {
    /// One step of the order; a scheduled crash hits here.
    fn step(&mut self) -> Result<(), Crash> {
        self.step += 1;
        if self.crashes.front() == Some(&self.step) {
            self.crashes.pop_front();
            return Err(Crash);
        }
        Ok(())
    }

    /// What a sink stores of `id`: with two sinks, which one too.
    fn at(&self, sink: usize, id: &str) -> String {
        if self.fanout.is_some() { format!("{sink}:{id}") } else { id.to_string() }
    }

    /// The sinks an event with `id` is routed to.
    fn routed(&self, id: &str) -> Vec<usize> {
        match &self.fanout {
            None => vec![0],
            Some(f) => {
                let mask = f.sinks_for(body(id).as_bytes());
                (0..f.len()).filter(|s| mask & (1 << s) != 0).collect()
            }
        }
    }

    fn verdict(&self, (p, i): (usize, usize)) -> Verdict {
        let plugin = PluginId { name: "fake".into(), digest: blake3::hash(b"fake") };
        match self.kinds[p][i] {
            Kind::Good | Kind::SinkReject => Verdict::Emit(vec![Event {
                id: Some(self.ids[p][i].as_str().into()),
                timestamp: None,
                body: body(&self.ids[p][i]).into_bytes().into(),
                sinks: None,
            }]),
            Kind::PluginReject => Verdict::Reject { plugin, reason: "poison".into() },
            Kind::PluginDrop => Verdict::Drop { plugin, reason: "noise".into() },
        }
    }

    /// The next batch as a worker gathers it: up to `size` records, a
    /// share of each partition in turn from `rotation`, until full or every
    /// partition is drained.
    fn gather(&self, next: &mut [usize], size: usize, rotation: usize) -> Vec<(usize, usize)> {
        let parts = next.len();
        let share = size.div_ceil(parts).max(1);
        let mut batch = Vec::with_capacity(size);
        for q in 0..parts {
            let p = (rotation + q) % parts;
            let take = share.min(size - batch.len()).min(self.ids[p].len() - next[p]);
            batch.extend((next[p]..next[p] + take).map(|i| (p, i)));
            next[p] += take;
        }
        batch
    }

    /// One run from the durable positions: batches of `sizes` (cycled),
    /// `in_flight` of them looked up ahead of the sink, and up to `lag`
    /// written but not yet durable (the group committer behind). Ends at
    /// the end of the input or at a crash.
    fn run(&mut self, sizes: &[usize], in_flight: usize, lag: usize) -> Result<(), Crash> {
        let mut trackers: Vec<OffsetTracker> = self.durable.positions.iter().map(|p| OffsetTracker::new(*p)).collect();
        let mut next: Vec<usize> = self.durable.positions.iter().map(|p| *p as usize).collect();
        // Looked-up batches not yet through the sink: (records, plan, how
        // many writes were durable at the look-up).
        let mut ahead: VecDeque<(Batch, Plan, usize)> = VecDeque::new();
        // Per write handed over in this run, by number: the ids it accepted.
        let mut recent: Vec<HashSet<IdDigest>> = Vec::new();
        // Handed over, not yet durable, oldest first.
        let mut pending: VecDeque<Write> = VecDeque::new();
        let mut durable_writes = 0;
        let mut k = 0;
        loop {
            // Front: gather, plugins, look-up, while the pipeline has room.
            while ahead.len() + pending.len() < in_flight && next.iter().zip(&self.ids).any(|(n, ids)| *n < ids.len()) {
                let batch = self.gather(&mut next, sizes[k % sizes.len()], k);
                k += 1;
                let mut plan = Plan::routed(batch.len(), self.fanout.as_ref());
                for (j, &(p, i)) in batch.iter().enumerate() {
                    trackers[p].begin(i as u64, i as u64 + 1).unwrap_or_else(|e| panic!("{e}"));
                    plan.verdict(j, self.verdict((p, i)), &PIPELINE_SCOPE, || format!("{p}-pos-{i}").into());
                }
                self.step().map_err(|c| self.lose(&pending, &[], c))?;
                let seen: Vec<bool> = plan.digests().iter().map(|d| self.durable.window.contains(d)).collect();
                plan.seen(&seen);
                self.step().map_err(|c| self.lose(&pending, &[], c))?;
                ahead.push_back((batch, plan, durable_writes));
            }
            let Some((batch, mut plan, saw)) = ahead.pop_front() else {
                // Nothing to deliver: the committer catches up (the
                // pipeline is full of pending writes, or the input ended).
                let Some(w) = pending.pop_front() else { return Ok(()) };
                self.apply(w);
                durable_writes += 1;
                self.step().map_err(|c| self.lose(&pending, &[], c))?;
                continue;
            };
            // Back: ids accepted by writes this look-up could not see.
            plan.accepted_earlier(|d| recent[saw..].iter().any(|s| s.contains(d)));
            let fresh = plan.take_fresh();
            let mut outcomes = Vec::new();
            let mut accepted_ids = Vec::new();
            let by_sink = plan.by_sink().to_vec();
            for (k, (d, j)) in fresh.iter().zip(plan.sent_records()).enumerate() {
                let (p, i) = batch[j];
                let sink = by_sink.iter().find(|(_, r)| r.contains(&k)).map_or(usize::MAX, |(s, _)| *s);
                if self.kinds[p][i] == Kind::SinkReject {
                    outcomes.push(Some(FinalAnswer::Rejected("bad row".into())));
                } else {
                    let stored = self.at(sink, &d.id);
                    self.durable.sink.push(stored.clone());
                    accepted_ids.push(stored);
                    outcomes.push(Some(FinalAnswer::Accepted));
                }
            }
            self.step().map_err(|c| self.lose(&pending, &accepted_ids, c))?;
            let settled = plan.settle(outcomes);
            for (j, fate) in settled.fates.iter().enumerate() {
                let (p, i) = batch[j];
                let fate = fate.as_ref().unwrap_or_else(|| panic!("record {p}/{i} has no fate"));
                trackers[p].finish(i as u64, fate.door()).unwrap_or_else(|e| panic!("{e}"));
            }
            self.step().map_err(|c| self.lose(&pending, &accepted_ids, c))?;
            // The changelog has the accepted ids before the write is handed
            // over (so before a position can leave the process).
            if let Some(log) = self.durable.changelog.as_mut() {
                log.extend(settled.accepted.iter().copied());
                self.step().map_err(|c| self.lose(&pending, &[], c))?;
            }
            // The write: ids, quarantine entries, and the position of each
            // partition in the batch, together.
            let quarantined = settled
                .fates
                .iter()
                .zip(&batch)
                .filter(|(f, _)| matches!(f, Some(Disposition::Quarantine { .. })))
                .map(|(_, &(p, i))| (p, i as u64))
                .collect();
            let mut in_batch: Vec<usize> = batch.iter().map(|(p, _)| *p).collect();
            in_batch.sort_unstable();
            in_batch.dedup();
            recent.push(settled.accepted.iter().copied().collect());
            pending.push_back(Write {
                accepted: settled.accepted,
                accepted_ids,
                quarantined,
                positions: in_batch.into_iter().map(|p| (p, trackers[p].committable())).collect(),
            });
            // The committer, `lag` writes behind at most.
            while pending.len() > lag {
                if let Some(w) = pending.pop_front() {
                    self.apply(w);
                    durable_writes += 1;
                }
                self.step().map_err(|c| self.lose(&pending, &[], c))?;
            }
        }
    }

    /// A write becomes durable, whole.
    fn apply(&mut self, w: Write) {
        for pos in w.quarantined {
            *self.durable.quarantined.entry(pos).or_default() += 1;
        }
        self.durable.window.extend(w.accepted);
        for (p, position) in w.positions {
            self.durable.positions[p] = position;
        }
    }

    /// A crash: what was accepted by the sink but not durably recorded is
    /// at risk of a second delivery. With the changelog, the writes still
    /// with the committer are not: their ids are published.
    fn lose(&mut self, pending: &VecDeque<Write>, current: &[String], crash: Crash) -> Crash {
        if self.durable.changelog.is_none() {
            for w in pending {
                self.at_risk.extend(w.accepted_ids.iter().cloned());
            }
        }
        self.at_risk.extend(current.iter().cloned());
        crash
    }
}

/// An event's body: the route reads its id.
fn body(id: &str) -> String {
    format!("{{\"id\":\"{id}\"}}")
}

/// Two sinks: ids ending in an even digit to `a` alone, the rest to both.
fn two_sinks() -> Arc<Fanout> {
    let even = RouteConfig {
        field: Some("/id".into()),
        equals: None,
        matches: Some("[02468]$".into()),
        exists: None,
        sinks: vec!["a".into()],
    };
    Arc::new(Fanout::new(&["a".to_string(), "b".to_string()], &[even]).unwrap_or_else(|e| panic!("{e}")))
}

/// A batch's records, by (partition, position).
type Batch = Vec<(usize, usize)>;

/// A batch's write, handed to the committer.
struct Write {
    accepted: Vec<IdDigest>,
    accepted_ids: Vec<String>,
    quarantined: Vec<(usize, u64)>,
    /// Each partition of the batch and its position.
    positions: Vec<(usize, u64)>,
}

proptest! {
    #[test]
    fn crashes_between_any_two_steps_lose_nothing_and_explain_every_duplicate(
        lengths in proptest::collection::vec(0usize..60, 1..5),
        distinct in 1usize..120,
        kind_seed in any::<u64>(),
        sizes in proptest::collection::vec(1usize..12, 1..5),
        in_flight in 1usize..5,
        lag in 0usize..3,
        crash_at in proptest::collection::btree_set(1u32..400, 0..12),
        changelog in any::<bool>(),
        moves in any::<u64>(),
        routed in any::<bool>(),
    ) {
        // Ids repeat within and across partitions (one dedup scope).
        let ids: Vec<Vec<String>> = lengths
            .iter()
            .enumerate()
            .map(|(p, n)| (0..*n).map(|i| format!("ev-{}", ((p * 61 + i) * 7919 + kind_seed as usize) % distinct)).collect())
            .collect();
        let kind_of = |id: &str| match blake3::hash(format!("{kind_seed}{id}").as_bytes()).as_bytes()[0] % 8 {
            0 => Kind::PluginReject,
            1 => Kind::PluginDrop,
            2 => Kind::SinkReject,
            _ => Kind::Good,
        };
        let kinds: Vec<Vec<Kind>> = ids.iter().map(|part| part.iter().map(|id| kind_of(id)).collect()).collect();
        let durable = Durable {
            changelog: changelog.then(HashSet::new),
            positions: vec![0; lengths.len()],
            ..Durable::default()
        };
        let mut w = World {
            ids, kinds, durable, at_risk: HashSet::new(), step: 0,
            crashes: crash_at.into_iter().collect(),
            fanout: routed.then(two_sinks),
        };
        let mut runs = 0;
        while w.run(&sizes, in_flight, lag).is_err() {
            runs += 1;
            prop_assert!(runs < 1000, "no progress");
            // The next owner restores from the changelog: a new instance
            // (the partition moved) from nothing, the same one its tail.
            if let Some(log) = &w.durable.changelog {
                if moves >> (runs % 64) & 1 == 1 {
                    w.durable.window = log.clone();
                } else {
                    w.durable.window.extend(log.iter().copied());
                }
            }
        }
        for (p, n) in lengths.iter().enumerate() {
            prop_assert_eq!(w.durable.positions[p], *n as u64, "partition {}'s position ends at its end", p);
        }
        let mut at_sink: HashMap<&str, usize> = HashMap::new();
        for id in &w.durable.sink { *at_sink.entry(id.as_str()).or_default() += 1; }
        let all = || w.ids.iter().enumerate().flat_map(|(p, part)| part.iter().enumerate().map(move |(i, id)| (p, i, id)));
        for (p, i, id) in all() {
            let sinks = w.routed(id);
            match w.kinds[p][i] {
                Kind::Good => {
                    for s in &sinks {
                        prop_assert!(at_sink.contains_key(w.at(*s, id).as_str()), "{} lost at sink {}", id, s);
                    }
                }
                Kind::PluginReject => prop_assert_eq!(w.durable.quarantined.get(&(p, i as u64)), Some(&1), "record {}/{} quarantined once", p, i),
                Kind::SinkReject => {
                    prop_assert!(sinks.iter().all(|s| !at_sink.contains_key(w.at(*s, id).as_str())));
                    let quarantined = all().any(|(q, j, other)| other == id && w.durable.quarantined.contains_key(&(q, j as u64)));
                    prop_assert!(quarantined, "{} neither delivered nor quarantined", id);
                }
                Kind::PluginDrop => prop_assert!(sinks.iter().all(|s| !at_sink.contains_key(w.at(*s, id).as_str()))),
            }
        }
        // Nothing is in a sink it was not routed to.
        for stored in at_sink.keys() {
            let (sink, id) = match stored.split_once(':') {
                Some((s, id)) if w.fanout.is_some() => (s.parse::<usize>().unwrap_or(usize::MAX), id),
                _ => (0, *stored),
            };
            prop_assert!(w.routed(id).contains(&sink), "{} is in sink {}, not routed there", id, sink);
        }
        for (id, count) in at_sink {
            prop_assert!(count == 1 || w.at_risk.contains(id), "{} delivered {} times with no crash to explain it", id, count);
        }
        for (pos, count) in &w.durable.quarantined {
            prop_assert_eq!(*count, 1, "record {:?} quarantined {} times", pos, count);
        }
    }
}
