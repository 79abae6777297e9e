//! The dedup window at scale: 10,000,000 ids recorded (one `WriteBatch` of
//! 1,000 per delivered batch, group-committed ten at a time as a busy
//! pipeline's committer would), then looked up in batches of 1,000: half
//! of them present, half never seen (the common case of a new record).
//! Prints look-ups and inserts per second per core, peak RSS and disk use,
//! beside a baseline in the same run: the same digests into and out of a
//! `HashSet` in memory (what a window without durability would cost).
//!
//! `cargo bench -p sluice-benches --bench dedup_scale`
//! (`SLUICE_BENCH_IDS` to change the count).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use sluice::custody::ids::{PIPELINE_SCOPE, digest};
use sluice::store::dedup::DedupWindow;
use sluice::store::{Identity, Store, StoreWrite as WriteBatch};
use sluice_benches::{cpu_seconds, peak_rss_mib, reset_peak_rss};

fn dir_bytes(path: &std::path::Path) -> u64 {
    std::fs::read_dir(path)
        .map(|rd| rd.flatten().filter_map(|e| e.metadata().ok()).filter(|m| m.is_file()).map(|m| m.len()).sum())
        .unwrap_or(0)
}

fn main() {
    let n = sluice_benches::env_count("SLUICE_BENCH_IDS", 10_000_000);
    let batch = 1000;
    let ids = |range: std::ops::Range<usize>| -> Vec<[u8; 24]> {
        range.map(|i| digest(&PIPELINE_SCOPE, &format!("ev-{i:012}"))).collect()
    };

    // Baseline: a HashSet of the same digests.
    reset_peak_rss();
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let mut set = HashSet::with_capacity(n);
    for start in (0..n).step_by(batch) {
        set.extend(ids(start..(start + batch).min(n)));
    }
    let base_insert = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let mut hits = 0usize;
    let lookups = n.min(2_000_000);
    for start in (0..lookups).step_by(batch) {
        // Half present (the first n ids), half never recorded.
        let half = ids(start / 2..start / 2 + batch / 2);
        let absent = ids(n + start / 2..n + start / 2 + batch / 2);
        hits += half.iter().chain(&absent).filter(|d| set.contains(*d)).count();
    }
    let base_lookup = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());
    assert_eq!(hits, lookups / 2, "half of the look-ups find their id");
    let base_rss = peak_rss_mib();
    drop(set);

    // The window.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    reset_peak_rss();
    let store = Store::open(dir.path(), &Identity { pipeline: "bench".into(), sources: vec![] })
        .unwrap_or_else(|e| panic!("{e}"));
    let window = DedupWindow::new(&store, Duration::from_secs(7 * 86400)).unwrap_or_else(|e| panic!("{e}"));
    let now = sluice_benches::now_secs() as u64;
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let mut group = Vec::new();
    for start in (0..n).step_by(batch) {
        let mut write = WriteBatch::default();
        window.record(&mut write, &ids(start..(start + batch).min(n)), now).unwrap_or_else(|e| panic!("{e}"));
        group.push(write);
        if group.len() == 10 {
            store.commit_group(group.drain(..)).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    store.commit_group(group.drain(..)).unwrap_or_else(|e| panic!("{e}"));
    let insert = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let mut hits = 0usize;
    for start in (0..lookups).step_by(batch) {
        let mut digests = ids(start / 2..start / 2 + batch / 2);
        digests.extend(ids(n + start / 2..n + start / 2 + batch / 2));
        hits += window.seen(&digests, now).unwrap_or_else(|e| panic!("{e}")).iter().filter(|s| **s).count();
    }
    let lookup = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());
    assert_eq!(hits, lookups / 2, "half of the look-ups find their id");
    // The window's peak, before the digests below (48 MB of the bench's
    // own) are made.
    let rss = peak_rss_mib();
    // New ids alone and delivered ids alone, digests made beforehand: the
    // look-up itself (the filter answers the first, RocksDB the second).
    let fresh: Vec<[u8; 24]> = ids(2 * n..2 * n + lookups / 2);
    let old: Vec<[u8; 24]> = ids(0..lookups / 2);
    let per_id = |set: &[[u8; 24]], want: bool| {
        let cpu0 = cpu_seconds();
        for c in set.chunks(batch) {
            let seen = window.seen(c, now).unwrap_or_else(|e| panic!("{e}"));
            assert!(seen.iter().all(|s| *s == want));
        }
        (cpu_seconds() - cpu0) * 1e6 / set.len() as f64
    };
    let (new_us, old_us) = (per_id(&fresh, false), per_id(&old, true));
    let filter = window.filter_stats();
    let disk = dir_bytes(dir.path()) as f64 / 1048576.0;
    drop(window);
    // A restart: the filter is filled again from the store.
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let reopened = DedupWindow::new(&store, Duration::from_secs(7 * 86400)).unwrap_or_else(|e| panic!("{e}"));
    let reopen = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());
    assert_eq!(reopened.filter_stats().ids, n, "every id is in the filter after a reopen");

    println!("dedup_scale: {n} ids recorded, {lookups} looked up (half present), batches of {batch}");
    let row = |what: &str, count: usize, (cpu, wall): (f64, f64)| {
        println!("  {what:<28} {:>11.0}/s per core  {:>11.0}/s wall", count as f64 / cpu, count as f64 / wall);
    };
    row("HashSet insert (baseline)", n, base_insert);
    row("window insert (synced)", n, insert);
    row("HashSet look-up (baseline)", lookups, base_lookup);
    row("window look-up", lookups, lookup);
    println!("  ratio insert window/baseline (CPU)   {:>6.2}x", insert.0 / base_insert.0);
    println!("  ratio look-up window/baseline (CPU)  {:>6.2}x", lookup.0 / base_lookup.0);
    println!("  look-up of a new id        {new_us:>8.3} µs CPU (answered by the filter)");
    println!("  look-up of a delivered id  {old_us:>8.3} µs CPU (the filter's positive, then RocksDB)");
    println!(
        "  filter: {} ids in {} bucket(s), {} segment(s), {:.1} MiB, {:.2} bytes per id",
        filter.ids,
        filter.buckets,
        filter.segments,
        filter.bytes as f64 / 1048576.0,
        filter.bytes as f64 / filter.ids.max(1) as f64
    );
    println!("  reopen (filter filled from the store): {:.2} s CPU, {:.2} s wall", reopen.0, reopen.1);
    println!("  peak RSS: baseline {base_rss:.0} MiB, window {rss:.0} MiB; window on disk {disk:.0} MiB");
}
