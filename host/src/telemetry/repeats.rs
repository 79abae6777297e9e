//! Warnings that come per record (a record quarantined, a plugin's log
//! line, a record a plugin faults on) are said once and then counted, so
//! that a bad deploy at 50,000 records a second is a few lines, not 50,000.
//!
//! The first occurrence of a (partition, stage, reason) is said in full;
//! later ones in the same interval (10 s) are counted and said as one line
//! when the interval ends (`… 1,532 more like this in the last 10 s`). At
//! most 20 full lines a second are said, all kinds together; a new reason
//! past that budget is counted with the other new reasons of its partition
//! and stage (a reason that names the value at fault makes every record a
//! kind of its own). At most 256 kinds are kept per interval; more are
//! counted together under `*`. Nothing is lost: the
//! quarantine and the metrics keep every record; this only decides what
//! the log repeats.
//!
//! The summaries fall due when something occurs after the interval, and
//! on the watchdog's tick (about once a second) when nothing does; the end
//! of a run says what is still pending.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

/// How long repeats are counted before their count is said.
pub(crate) const INTERVAL: Duration = Duration::from_secs(10);
/// Full lines a second, every kind together.
pub(crate) const PER_SECOND: u32 = 20;
/// Kinds kept per interval.
pub(crate) const MAX_KINDS: usize = 256;

/// What repeats past the budget are counted as, per partition and stage.
pub(crate) const OTHER: &str = "other reasons (past the log's budget)";

/// The process's repeats: every partition and plugin shares the budget.
pub(crate) static REPEATS: LazyLock<Repeats> = LazyLock::new(|| Repeats::new(INTERVAL, PER_SECOND, MAX_KINDS));

/// How loud a kind is: its summary line is said at the same level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Level {
    Info,
    Warn,
    Error,
}

/// Where a kind's reason comes from, which decides whether its first line
/// spends the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reasons {
    /// Written from the data (a plugin's reason, a log line): any number of
    /// kinds, so their first lines share the budget.
    FromData,
    /// Written by the code (a plugin's log budget spent): few kinds, so the
    /// first of each is said even when the second's budget is spent.
    Fixed,
}

/// One kind of warning. `partition` is whatever the warning is about (a
/// partition, a plugin, a sink).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Kind {
    pub partition: String,
    pub stage: String,
    pub reason: String,
    pub level: Level,
}

/// What the repeats of one kind came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Repeated {
    pub kind: Kind,
    pub count: u64,
    /// The interval they were counted over.
    pub seconds: u64,
}

pub(crate) struct Repeats {
    state: Mutex<State>,
    interval: Duration,
    per_second: u32,
    max_kinds: usize,
}

#[derive(Default)]
struct State {
    /// Where the current interval started.
    since: Option<Instant>,
    /// The kinds of this interval, with the occurrences not said in full.
    counts: HashMap<Kind, u64>,
    /// The current second of the budget, and the full lines said in it.
    second: Option<Instant>,
    said: u32,
}

impl Repeats {
    pub(crate) fn new(interval: Duration, per_second: u32, max_kinds: usize) -> Repeats {
        Repeats { state: Mutex::new(State::default()), interval, per_second, max_kinds }
    }

    /// Occurrences at `now`, `(stage, reason)` each, about `partition`: one
    /// lock for all of them (a batch's quarantined records). Returns which
    /// to say in full, and the summaries now due.
    pub(crate) fn occurred(
        &self,
        partition: &str,
        level: Level,
        items: &[(&str, &str)],
        now: Instant,
        reasons: Reasons,
    ) -> (Vec<bool>, Vec<Repeated>) {
        let budgeted = reasons == Reasons::FromData;
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let due = st.take(now, self.interval, false);
        if st.second.is_none_or(|s| now.saturating_duration_since(s) >= Duration::from_secs(1)) {
            st.second = Some(now);
            st.said = 0;
        }
        let say = items
            .iter()
            .map(|(stage, reason)| {
                let kind = |reason: &str| Kind {
                    partition: partition.to_string(),
                    stage: stage.to_string(),
                    reason: reason.to_string(),
                    level,
                };
                let this = kind(reason);
                if let Some(n) = st.counts.get_mut(&this) {
                    *n += 1;
                    return false;
                }
                let say = !budgeted || st.said < self.per_second;
                // Past the budget, a new reason is counted with the other
                // new reasons of its partition and stage: a reason that
                // names the value at fault makes every record a kind.
                let counted_as = if say { this } else { kind(OTHER) };
                if let Some(n) = st.counts.get_mut(&counted_as) {
                    *n += 1;
                    return false;
                }
                if st.counts.len() >= self.max_kinds {
                    let all =
                        Kind { partition: "*".into(), stage: "*".into(), reason: OTHER.into(), level: Level::Warn };
                    *st.counts.entry(all).or_insert(0) += 1;
                    return false;
                }
                st.said += u32::from(say && budgeted);
                st.counts.insert(counted_as, u64::from(!say));
                say
            })
            .collect();
        (say, due)
    }

    /// The summaries of an interval that has ended, if it has.
    pub(crate) fn due(&self, now: Instant) -> Vec<Repeated> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).take(now, self.interval, false)
    }

    /// Every count still pending: the run ends.
    pub(crate) fn flush(&self, now: Instant) -> Vec<Repeated> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).take(now, self.interval, true)
    }
}

impl State {
    fn take(&mut self, now: Instant, interval: Duration, all: bool) -> Vec<Repeated> {
        let since = *self.since.get_or_insert(now);
        let elapsed = now.saturating_duration_since(since);
        if !all && elapsed < interval {
            return Vec::new();
        }
        let seconds = elapsed.as_secs().max(1);
        let mut out = Vec::new();
        // A kind that repeated stays known (its next repeats are counted,
        // not said in full); one that did not is forgotten, so the map
        // holds only what is happening now.
        self.counts.retain(|kind, n| {
            if *n == 0 {
                return false;
            }
            out.push(Repeated { kind: kind.clone(), count: std::mem::take(n), seconds });
            true
        });
        out.sort_by(|a, b| a.kind.cmp(&b.kind));
        self.since = Some(now);
        out
    }
}

/// Say `due`, one line per kind.
pub(crate) fn say(due: &[Repeated]) {
    for r in due {
        let Kind { partition, stage, reason, level } = &r.kind;
        let count = thousands(r.count);
        let seconds = r.seconds;
        match level {
            Level::Info => tracing::info!(partition, stage, reason, "… {count} more like this in the last {seconds} s"),
            Level::Warn => tracing::warn!(partition, stage, reason, "… {count} more like this in the last {seconds} s"),
            Level::Error => {
                tracing::error!(partition, stage, reason, "… {count} more like this in the last {seconds} s")
            }
        }
    }
}

/// The summaries due now, said: for a loop that ticks (the watchdog).
pub(crate) fn say_due() {
    say(&REPEATS.due(Instant::now()));
}

/// Every pending count, said: at the end of a run.
pub fn say_pending() {
    say(&REPEATS.flush(Instant::now()));
}

/// `1532` as `1,532`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn the_first_of_a_kind_is_said_and_the_rest_counted_per_interval() {
        let r = Repeats::new(10 * S, 100, 16);
        let t0 = Instant::now();
        let bad = ("plugin", "no pattern matched");
        let (say, due) =
            r.occurred("app.log", Level::Warn, &[bad, bad, bad, ("plugin", "other")], t0, Reasons::FromData);
        assert_eq!(say, [true, false, false, true]);
        assert!(due.is_empty());
        let (say, _) = r.occurred("app.log", Level::Warn, &[bad; 1000], t0 + 5 * S, Reasons::FromData);
        assert!(say.iter().all(|s| !s), "known in this interval: counted");
        assert!(r.due(t0 + 9 * S).is_empty(), "the interval is not over");
        let due = r.due(t0 + 11 * S);
        assert_eq!(due.len(), 1, "a kind with no repeats has no summary: {due:?}");
        assert_eq!((due[0].count, due[0].seconds, due[0].kind.reason.as_str()), (1002, 11, "no pattern matched"));
        // It repeated, so it stays known: counted, not said again.
        let (say, _) = r.occurred("app.log", Level::Warn, &[bad], t0 + 12 * S, Reasons::FromData);
        assert_eq!(say, [false]);
        // "other" did not repeat: forgotten, so said in full again.
        let (say, _) = r.occurred("app.log", Level::Warn, &[("plugin", "other")], t0 + 12 * S, Reasons::FromData);
        assert_eq!(say, [true]);
        // Another partition is another kind.
        let (say, _) = r.occurred("b.log", Level::Warn, &[bad], t0 + 12 * S, Reasons::FromData);
        assert_eq!(say, [true]);
        let pending = r.flush(t0 + 13 * S);
        assert_eq!(pending.iter().map(|p| p.count).sum::<u64>(), 1, "{pending:?}");
        assert!(r.flush(t0 + 14 * S).is_empty());
    }

    #[test]
    fn full_lines_are_bounded_per_second_and_kinds_per_interval() {
        let t0 = Instant::now();
        // A reason that names the value at fault: every record its own kind.
        let reasons: Vec<String> = (0..200).map(|i| format!("bad value {i}")).collect();
        let items: Vec<(&str, &str)> = reasons.iter().map(|r| ("plugin", r.as_str())).collect();

        let r = Repeats::new(10 * S, 5, 1_000);
        let (say, _) = r.occurred("p", Level::Warn, &items, t0, Reasons::FromData);
        assert_eq!(say.iter().filter(|s| **s).count(), 5, "5 lines a second");
        let (say, _) = r.occurred("p", Level::Warn, &[("plugin", "new one")], t0 + S / 2, Reasons::FromData);
        assert_eq!(say, [false], "the second's budget is spent");
        let (say, _) = r.occurred("p", Level::Warn, &[("plugin", "budget spent")], t0 + S / 2, Reasons::Fixed);
        assert_eq!(say, [true], "a reason the code writes is said all the same");
        let (say, _) = r.occurred("p", Level::Warn, &[("plugin", "newer")], t0 + 3 * S / 2, Reasons::FromData);
        assert_eq!(say, [true], "a new second, a new budget");
        let due = r.flush(t0 + 2 * S);
        // One summary for the unsaid reasons, and nothing lost from the
        // counts: 202 occurrences, 6 said.
        assert_eq!(due.len(), 1, "{due:?}");
        assert_eq!((due[0].kind.reason.as_str(), due[0].count), (OTHER, 202 - 6));

        let r = Repeats::new(10 * S, 1_000, 50);
        let (say, _) = r.occurred("p", Level::Warn, &items, t0, Reasons::FromData);
        assert_eq!(say.iter().filter(|s| **s).count(), 50);
        let due = r.flush(t0 + S);
        assert_eq!(due.len(), 1, "one line for the kinds past the bound: {due:?}");
        assert!(due[0].kind.partition == "*" && due[0].count == 150, "{due:?}");
    }

    #[test]
    fn counts_read_with_thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_532), "1,532");
        assert_eq!(thousands(12_345_678), "12,345,678");
    }
}
