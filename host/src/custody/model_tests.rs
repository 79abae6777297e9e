//! The custody order over in-memory fakes, crashed between every two
//! steps: plugins, the window's look-up, the sink, the durable write (ids,
//! quarantine entries and the position together), the next batch. Batches
//! are pipelined as the driver pipelines them: a batch is looked up before
//! the batches ahead of it have written their ids.
//!
//! After any number of crashes and a final clean run: every good id is at
//! the sink, every duplicate at the sink is explained by a crash between a
//! sink acceptance and its durable write, every poison record is
//! quarantined exactly once, and the position ends at the end.
//!
//! With the dedup changelog (Kafka), a batch's accepted ids are published
//! before its write is handed over, and a crash may also move the
//! partition to an instance with an empty store, which restores the
//! changelog (a restart restores its tail). Then the only duplicates are
//! those of a batch between its sink and its publish: one batch per crash,
//! never the writes still with the committer. (The driver sends a batch's
//! ids with its write and has the answer before the next batch reaches the
//! sink; "publish" here is that answer.)

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use proptest::prelude::*;

use super::ids::{IdDigest, PIPELINE_SCOPE};
use super::{Fate, OffsetTracker, Plan};
use crate::delivery::FinalAnswer;
use crate::plugin::{Event, PluginId, Verdict};

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
    position: u64,
    quarantined: BTreeMap<u64, u32>,
    /// The sink's own storage: (id, position) per accepted event.
    sink: Vec<(String, u64)>,
    /// The dedup changelog, when on: durable as soon as published, and
    /// outside the instance.
    changelog: Option<HashSet<IdDigest>>,
}

struct World {
    ids: Vec<String>,
    kinds: Vec<Kind>,
    durable: Durable,
    /// Ids accepted by the sink in a batch that then crashed before its
    /// write: the only allowed cause of a duplicate at the sink.
    at_risk: HashSet<String>,
    step: u32,
    crashes: VecDeque<u32>,
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

    fn verdict(&self, i: usize) -> Verdict {
        let plugin = PluginId { name: "fake".into(), digest: blake3::hash(b"fake") };
        match self.kinds[i] {
            Kind::Good | Kind::SinkReject => Verdict::Emit(vec![Event {
                id: Some(self.ids[i].clone()),
                timestamp: None,
                body: b"{}".as_slice().into(),
            }]),
            Kind::PluginReject => Verdict::Reject { plugin, reason: "poison".into() },
            Kind::PluginDrop => Verdict::Drop { plugin, reason: "noise".into() },
        }
    }

    /// One run from the durable position: batches of `sizes` (cycled),
    /// `in_flight` of them looked up ahead of the sink, and up to `lag`
    /// written but not yet durable (the group committer behind). Ends at
    /// the end of the input or at a crash.
    fn run(&mut self, sizes: &[usize], in_flight: usize, lag: usize) -> Result<(), Crash> {
        let mut tracker = OffsetTracker::new(self.durable.position);
        let mut next = self.durable.position as usize;
        // Looked-up batches not yet through the sink: (records, plan, how
        // many writes were durable at the look-up).
        let mut ahead: VecDeque<(std::ops::Range<usize>, Plan, usize)> = VecDeque::new();
        // Per write handed over in this run, by number: the ids it accepted.
        let mut recent: Vec<HashSet<IdDigest>> = Vec::new();
        // Handed over, not yet durable, oldest first.
        let mut pending: VecDeque<Write> = VecDeque::new();
        let mut durable_writes = 0;
        let mut k = 0;
        loop {
            // Front: read, plugins, look-up, while the pipeline has room.
            while ahead.len() + pending.len() < in_flight && next < self.ids.len() {
                let n = sizes[k % sizes.len()].min(self.ids.len() - next);
                k += 1;
                let range = next..next + n;
                next += n;
                let mut plan = Plan::new(n);
                for (j, i) in range.clone().enumerate() {
                    tracker.begin(i as u64, i as u64 + 1).unwrap_or_else(|e| panic!("{e}"));
                    plan.verdict(j, self.verdict(i), &PIPELINE_SCOPE, || format!("pos-{i}"));
                }
                self.step().map_err(|c| self.lose(&pending, &[], c))?;
                let seen: Vec<bool> = plan.digests().iter().map(|d| self.durable.window.contains(d)).collect();
                plan.seen(&seen);
                self.step().map_err(|c| self.lose(&pending, &[], c))?;
                ahead.push_back((range, plan, durable_writes));
            }
            let Some((range, mut plan, saw)) = ahead.pop_front() else {
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
            for d in &fresh {
                let i: usize = range.clone().find(|i| self.ids[*i] == d.id).unwrap_or(range.start);
                if self.kinds[i] == Kind::SinkReject {
                    outcomes.push(Some(FinalAnswer::Rejected("bad row".into())));
                } else {
                    self.durable.sink.push((d.id.clone(), i as u64));
                    accepted_ids.push(d.id.clone());
                    outcomes.push(Some(FinalAnswer::Accepted));
                }
            }
            self.step().map_err(|c| self.lose(&pending, &accepted_ids, c))?;
            let settled = plan.settle(outcomes);
            for (j, fate) in settled.fates.iter().enumerate() {
                let fate = fate.as_ref().unwrap_or_else(|| panic!("record {} has no fate", range.start + j));
                tracker.finish((range.start + j) as u64, fate.door()).unwrap_or_else(|e| panic!("{e}"));
            }
            self.step().map_err(|c| self.lose(&pending, &accepted_ids, c))?;
            // The changelog has the accepted ids before the write is handed
            // over (so before the position can leave the process).
            if let Some(log) = self.durable.changelog.as_mut() {
                log.extend(settled.accepted.iter().copied());
                self.step().map_err(|c| self.lose(&pending, &[], c))?;
            }
            // The write: ids, quarantine entries, position, together.
            let quarantined = settled
                .fates
                .iter()
                .enumerate()
                .filter(|(_, f)| matches!(f, Some(Fate::Quarantine { .. })))
                .map(|(j, _)| (range.start + j) as u64)
                .collect();
            recent.push(settled.accepted.iter().copied().collect());
            pending.push_back(Write {
                accepted: settled.accepted,
                accepted_ids,
                quarantined,
                position: tracker.committable(),
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
        self.durable.position = w.position;
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

/// A batch's write, handed to the committer.
struct Write {
    accepted: Vec<IdDigest>,
    accepted_ids: Vec<String>,
    quarantined: Vec<u64>,
    position: u64,
}

proptest! {
    #[test]
    fn crashes_between_any_two_steps_lose_nothing_and_explain_every_duplicate(
        n in 1usize..120,
        distinct in 1usize..120,
        kind_seed in any::<u64>(),
        sizes in proptest::collection::vec(1usize..9, 1..5),
        in_flight in 1usize..5,
        lag in 0usize..3,
        crash_at in proptest::collection::btree_set(1u32..400, 0..12),
        changelog in any::<bool>(),
        moves in any::<u64>(),
    ) {
        let ids: Vec<String> = (0..n).map(|i| format!("ev-{}", (i * 7919 + kind_seed as usize) % distinct)).collect();
        let kind_of = |id: &str| match blake3::hash(format!("{kind_seed}{id}").as_bytes()).as_bytes()[0] % 8 {
            0 => Kind::PluginReject,
            1 => Kind::PluginDrop,
            2 => Kind::SinkReject,
            _ => Kind::Good,
        };
        let kinds: Vec<Kind> = ids.iter().map(|id| kind_of(id)).collect();
        let durable = Durable { changelog: changelog.then(HashSet::new), ..Durable::default() };
        let mut w = World {
            ids, kinds, durable, at_risk: HashSet::new(), step: 0,
            crashes: crash_at.into_iter().collect(),
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
        prop_assert_eq!(w.durable.position, n as u64, "the position ends at the end");
        let mut at_sink: HashMap<&str, usize> = HashMap::new();
        for (id, _) in &w.durable.sink { *at_sink.entry(id.as_str()).or_default() += 1; }
        for (i, id) in w.ids.iter().enumerate() {
            match w.kinds[i] {
                Kind::Good => prop_assert!(at_sink.contains_key(id.as_str()), "{} lost", id),
                Kind::PluginReject => prop_assert_eq!(w.durable.quarantined.get(&(i as u64)), Some(&1), "record {} quarantined once", i),
                Kind::SinkReject => {
                    prop_assert!(!at_sink.contains_key(id.as_str()));
                    let quarantined = w.ids.iter().enumerate().any(|(j, other)| other == id && w.durable.quarantined.contains_key(&(j as u64)));
                    prop_assert!(quarantined, "{} neither delivered nor quarantined", id);
                }
                Kind::PluginDrop => prop_assert!(!at_sink.contains_key(id.as_str())),
            }
        }
        for (id, count) in at_sink {
            prop_assert!(count == 1 || w.at_risk.contains(id), "{} delivered {} times with no crash to explain it", id, count);
        }
        for (pos, count) in &w.durable.quarantined {
            prop_assert_eq!(*count, 1, "record {} quarantined {} times", pos, count);
        }
    }
}
