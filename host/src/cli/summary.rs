//! What `sluice run` and `sluice quarantine replay` print when they end, on
//! standard error (standard output may be the sink): a table for a person
//! by default, or the JSON line scripts parse (`--summary json`). The form
//! is chosen by the flag, not guessed from the terminal, so that a CI log
//! and a person's terminal read alike and a script gets the JSON it asked
//! for wherever it runs.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::pipeline::replay::ReplaySummary;
use crate::telemetry::repeats::thousands;
use crate::telemetry::stats::RunStats;

/// How a run's end is printed.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum SummaryForm {
    /// A table per partition, the latency and the top quarantine reasons.
    #[default]
    Table,
    /// One line, `{"summary": …}` (`{"replay": …}` for a replay).
    Json,
    /// Nothing.
    None,
}

/// How many quarantine reasons the table lists.
const TOP_REASONS: usize = 5;
/// Partition names longer than this are cut at the front (a file's
/// folders), where they differ least.
const NAME_WIDTH: usize = 44;

pub(crate) fn print_run(stats: &RunStats, pipeline: &str, form: SummaryForm) {
    match form {
        SummaryForm::Table => eprint!("{}", run_table(stats, pipeline)),
        SummaryForm::Json => eprintln!("{}", serde_json::json!({ "summary": stats })),
        SummaryForm::None => {}
    }
}

pub(crate) fn print_replay(summary: &ReplaySummary, form: SummaryForm) {
    match form {
        SummaryForm::Table => eprint!("{}", replay_table(summary)),
        SummaryForm::Json => eprintln!("{}", serde_json::json!({ "replay": summary })),
        SummaryForm::None => {}
    }
}

/// The run's table. Plain text: it is read in terminals and in CI logs.
pub(crate) fn run_table(stats: &RunStats, pipeline: &str) -> String {
    let mut out = String::new();
    let t = &stats.total;
    let _ = writeln!(
        out,
        "\npipeline {pipeline:?}: {} records in {:.1} s ({} records/s)",
        thousands(t.records),
        stats.seconds,
        thousands(rate(t.records, stats.seconds)),
    );
    let header = ["read", "delivered", "duplicate", "quarantined", "dropped", "records/s"];
    let mut rows: Vec<(String, [String; 6])> = stats
        .partitions
        .iter()
        .map(|(name, c)| {
            let per_second = stats.rate(name).map_or("-".to_string(), |r| thousands(r.round() as u64));
            (short(name), cells(c, per_second))
        })
        .collect();
    if rows.len() != 1 {
        let per_second = thousands(rate(t.records, stats.seconds));
        rows.push(("total".into(), cells(t, per_second)));
    }
    let width = rows.iter().map(|(n, _)| n.chars().count()).chain(["partition".len()]).max().unwrap_or(9);
    let mut widths = header.map(str::len);
    for (_, cells) in &rows {
        for (w, c) in widths.iter_mut().zip(cells) {
            *w = (*w).max(c.len());
        }
    }
    let _ = write!(out, "\n  {:<width$}", "partition");
    for (h, w) in header.iter().zip(widths) {
        let _ = write!(out, "  {h:>w$}");
    }
    out.push('\n');
    for (name, cells) in &rows {
        let _ = write!(out, "  {name:<width$}");
        for (c, w) in cells.iter().zip(widths) {
            let _ = write!(out, "  {c:>w$}");
        }
        out.push('\n');
    }
    if t.records > 0 {
        let ms = |q: f64| stats.latency.quantile(q) * 1e3;
        let _ = writeln!(out, "\n  latency to commit: p50 {:.1} ms, p99 {:.1} ms", ms(0.5), ms(0.99));
    }
    reasons(&mut out, &stats.reasons.0, t.quarantined);
    out
}

pub(crate) fn replay_table(s: &ReplaySummary) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\nreplay: {} entries", thousands(s.entries));
    for (what, n) in [
        ("delivered", s.delivered),
        ("duplicate (delivered before)", s.duplicate),
        ("dropped by a plugin", s.dropped),
        ("still quarantined", s.still_quarantined),
        ("skipped: masked (--include-masked)", s.skipped_masked),
        ("skipped: replayed before", s.skipped_replayed),
    ] {
        let _ = writeln!(out, "  {:>10}  {what}", thousands(n));
    }
    reasons(&mut out, &s.reasons, s.still_quarantined);
    out
}

/// The most frequent quarantine reasons, with how many are not shown.
fn reasons(out: &mut String, reasons: &BTreeMap<String, u64>, quarantined: u64) {
    if reasons.is_empty() {
        return;
    }
    let mut top: Vec<(&String, &u64)> = reasons.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let _ = writeln!(out, "\n  top quarantine reasons:");
    let mut shown = 0;
    for (reason, n) in top.iter().take(TOP_REASONS) {
        let _ = writeln!(out, "  {:>10}  {}", thousands(**n), one_line(reason));
        shown += **n;
    }
    if top.len() > TOP_REASONS {
        let _ = writeln!(
            out,
            "  {:>10}  ({} other reasons; `sluice quarantine stats` lists them)",
            thousands(quarantined.saturating_sub(shown)),
            thousands((top.len() - TOP_REASONS) as u64)
        );
    }
}

fn rate(records: u64, seconds: f64) -> u64 {
    if seconds > 0.0 { (records as f64 / seconds).round() as u64 } else { 0 }
}

/// A name cut at the front to [`NAME_WIDTH`] characters.
fn short(name: &str) -> String {
    let n = name.chars().count();
    if n <= NAME_WIDTH {
        return name.to_string();
    }
    let tail: String = name.chars().skip(n - (NAME_WIDTH - 1)).collect();
    format!("…{tail}")
}

/// A reason on one line of the table, at most 120 characters.
fn one_line(reason: &str) -> String {
    let flat: String = reason.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if flat.chars().count() <= 120 { flat } else { format!("{}…", flat.chars().take(119).collect::<String>()) }
}

/// A row's figures: the doors, then the rate.
fn cells(c: &crate::telemetry::stats::Counts, per_second: String) -> [String; 6] {
    let n = thousands;
    [n(c.records), n(c.delivered), n(c.duplicate), n(c.quarantined), n(c.dropped), per_second]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::stats::Counts;

    fn counts(records: u64, delivered: u64, quarantined: u64) -> Counts {
        Counts { records, delivered, quarantined, ..Counts::default() }
    }

    #[test]
    fn the_table_has_a_row_per_partition_a_total_and_the_top_reasons() {
        let mut stats = RunStats { seconds: 2.0, ..RunStats::default() };
        let long = format!("/var/log/{}/Apache_2k.log#0", "deep/".repeat(10));
        stats.total = counts(12_345, 11_825, 520);
        stats.partitions.insert(long.clone(), counts(10_000, 9_600, 400));
        stats.partitions.insert("b.log#0".into(), counts(2_345, 2_225, 120));
        for i in 0..8u64 {
            stats.reasons.0.insert(format!("plugin: reason {i}"), 100 - i * 10);
        }
        let table = run_table(&stats, "quickstart");
        assert!(table.contains("pipeline \"quickstart\": 12,345 records in 2.0 s (6,173 records/s)"), "{table}");
        let header = table.lines().find(|l| l.trim_start().starts_with("partition")).unwrap_or_default();
        for h in ["read", "delivered", "duplicate", "quarantined", "dropped", "records/s"] {
            assert!(header.contains(h), "{header}");
        }
        let row = |name: &str| table.lines().find(|l| l.trim_start().starts_with(name)).unwrap_or_default().to_string();
        let cells = |name: &str| row(name).split_whitespace().skip(1).map(String::from).collect::<Vec<_>>();
        assert_eq!(cells("b.log#0")[..5], ["2,345", "2,225", "0", "120", "0"]);
        assert_eq!(cells("total")[..5], ["12,345", "11,825", "0", "520", "0"]);
        assert!(row("…").ends_with('-'), "no span known: no rate: {table}");
        assert!(row("…").contains("Apache_2k.log#0") && row("…").chars().count() < long.len() + 60, "{table}");
        // Every row's columns line up under the header's.
        let ends = |l: &str| l.char_indices().filter(|(_, c)| *c != ' ').map(|(i, _)| i).max();
        assert_eq!(ends(&row("total")), ends(header), "{table}");
        let top: Vec<&str> = table.lines().skip_while(|l| !l.contains("top quarantine reasons")).skip(1).collect();
        assert_eq!(top.len(), 6, "five reasons and the rest: {table}");
        assert!(top[0].contains("100  plugin: reason 0") && top[4].contains("60  plugin: reason 4"), "{table}");
        assert!(top[5].contains("120  (3 other reasons"), "520 - 100 - 90 - 80 - 70 - 60: {table}");
    }

    #[test]
    fn one_partition_needs_no_total_and_a_replay_lists_its_doors() {
        let mut stats = RunStats { seconds: 1.0, ..RunStats::default() };
        stats.total = counts(10, 10, 0);
        stats.partitions.insert("a#0".into(), counts(10, 10, 0));
        let table = run_table(&stats, "p");
        assert!(!table.contains("total") && !table.contains("top quarantine"), "{table}");
        let summary = ReplaySummary { entries: 3, delivered: 2, still_quarantined: 1, ..ReplaySummary::default() };
        let mut summary = summary;
        summary.reasons.insert("plugin: still bad".into(), 1);
        let table = replay_table(&summary);
        assert!(table.contains("replay: 3 entries") && table.contains("         2  delivered"), "{table}");
        assert!(table.contains("1  plugin: still bad"), "{table}");
    }
}
