//! What recording an id costs RocksDB, all in, for the dedup buckets'
//! column-family settings and a few alternatives (issue 21, item 7).
//!
//! Each candidate gets a fresh store and writes the same 2,000,000 digests
//! in synced batches of 1,000 (a key per id, as the store wrote them before
//! issue 21's fourth part; the blob candidate as `store::dedup` writes them
//! now, with its options), then flushes and waits for compaction. The figure is
//! the process's CPU over all of it, background threads included, per id;
//! beside it the writing thread's share, and what a look-up of a delivered
//! id then costs (the filter's positives are the only look-ups that reach
//! RocksDB). Candidates run in turn, three rounds, best of each kept: the
//! machine is noisy and the best is the least disturbed.
//!
//! `cargo bench -p sluice-benches --bench dedup_write`
//! (`SLUICE_BENCH_IDS` to change the count).

use rocksdb::{DB, Options, SliceTransform, WaitForCompactOptions, WriteBatch, WriteOptions};
use sluice::custody::ids::{PIPELINE_SCOPE, digest};
use sluice_benches::{cpu_seconds, thread_cpu_seconds};

struct Candidate {
    name: &'static str,
    /// The bucket's options.
    options: fn() -> Options,
    /// Each batch's ids sorted before they are written.
    sorted: bool,
}

/// The store's settings while it wrote a key per id (until issue 21's
/// fourth part) but with RocksDB's default memtable, a skiplist (the crate
/// names no factory for it: it is what an unset one gives).
fn skiplist() -> Options {
    let mut o = Options::default();
    let mut table = rocksdb::BlockBasedOptions::default();
    table.set_bloom_filter(10.0, false);
    o.set_block_based_table_factory(&table);
    o.set_memtable_whole_key_filtering(true);
    o.set_memtable_prefix_bloom_ratio(0.1);
    o.set_prefix_extractor(SliceTransform::create_fixed_prefix(16));
    o.set_write_buffer_size(16 << 20);
    o
}

/// Those settings as they were: a hashed memtable, which needs the
/// database to take no concurrent memtable writes (`run` sets that).
fn hashed() -> Options {
    let mut o = skiplist();
    o.set_memtable_factory(rocksdb::MemtableFactory::HashLinkList { bucket_count: 200_000 });
    o
}

fn no_compaction(mut o: Options) -> Options {
    // A bucket is dropped whole when it leaves the window: its level-0
    // files could stay unmerged until then.
    o.set_disable_auto_compactions(true);
    o.set_level_zero_slowdown_writes_trigger(1 << 20);
    o.set_level_zero_stop_writes_trigger(1 << 20);
    o
}

fn universal(mut o: Options) -> Options {
    // Fewer rewrites of each id than levels, at the price of larger merges.
    o.set_compaction_style(rocksdb::DBCompactionStyle::Universal);
    o
}

const CANDIDATES: &[Candidate] = &[
    Candidate { name: "hashed memtable", options: hashed, sorted: false },
    Candidate { name: "hashed, batch sorted", options: hashed, sorted: true },
    Candidate { name: "skiplist", options: skiplist, sorted: false },
    Candidate { name: "skiplist, batch sorted", options: skiplist, sorted: true },
    Candidate { name: "hashed, universal compaction", options: || universal(hashed()), sorted: false },
    Candidate { name: "skiplist, universal compaction", options: || universal(skiplist()), sorted: false },
    Candidate { name: "hashed, no compaction", options: || no_compaction(hashed()), sorted: false },
    Candidate { name: "skiplist, sorted, no compaction", options: || no_compaction(skiplist()), sorted: true },
    Candidate { name: BLOBS, options: sluice::store::dedup_bucket_options, sorted: true },
];

const BLOBS: &str = "blobs, table per 256k (sluice's)";

/// The store's format since issue 21's fourth part, with its bucket
/// options: a batch's ids as one value (a "blob", one key per batch) in
/// the batch's synced write, and every `CONVERT` ids sorted into one table
/// file and ingested, their blobs then deleted (the store converts every
/// 131,072; this candidate kept the 262,144 it was first measured with).
const CONVERT: usize = 1 << 18;

fn run_blobs(ids: &[[u8; 24]]) -> Figures {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut db_opts = Options::default();
    db_opts.create_if_missing(true);
    db_opts.create_missing_column_families(true);
    let cf_opts = sluice::store::dedup_bucket_options();
    let cfs = vec![rocksdb::ColumnFamilyDescriptor::new("ids-0", sluice::store::dedup_bucket_options())];
    let db = DB::open_cf_descriptors(&db_opts, dir.path(), cfs).unwrap_or_else(|e| panic!("{e}"));
    let cf = db.cf_handle("ids-0").unwrap_or_else(|| panic!("no column family"));
    let mut sync = WriteOptions::default();
    sync.set_sync(true);
    let blob_key = |seq: u64| {
        let mut k = [0xffu8; 16];
        k[8..].copy_from_slice(&seq.to_be_bytes());
        k
    };

    let (cpu0, thread0) = (cpu_seconds(), thread_cpu_seconds());
    let mut pending: Vec<[u8; 24]> = Vec::with_capacity(CONVERT + 1000);
    let (mut seq, mut first_unconverted, mut files) = (0u64, 0u64, 0);
    let mut value = Vec::with_capacity(24 * 1000);
    let mut convert = |pending: &mut Vec<[u8; 24]>, upto: u64, from: u64| {
        pending.sort_unstable();
        pending.dedup();
        let path = dir.path().join(format!("convert-{files}.sst"));
        files += 1;
        let mut w = rocksdb::SstFileWriter::create(&cf_opts);
        w.open(&path).unwrap_or_else(|e| panic!("{e}"));
        for k in pending.iter() {
            w.put(k, []).unwrap_or_else(|e| panic!("{e}"));
        }
        w.finish().unwrap_or_else(|e| panic!("{e}"));
        let mut ingest = rocksdb::IngestExternalFileOptions::default();
        ingest.set_move_files(true);
        db.ingest_external_file_cf_opts(&cf, &ingest, vec![&path]).unwrap_or_else(|e| panic!("{e}"));
        db.delete_range_cf(&cf, blob_key(from), blob_key(upto)).unwrap_or_else(|e| panic!("{e}"));
        pending.clear();
    };
    for chunk in ids.chunks(1000) {
        value.clear();
        for d in chunk {
            value.extend_from_slice(d);
        }
        let mut batch = WriteBatch::default();
        batch.put_cf(&cf, blob_key(seq), &value);
        seq += 1;
        db.write_opt(batch, &sync).unwrap_or_else(|e| panic!("{e}"));
        pending.extend_from_slice(chunk);
        if pending.len() >= CONVERT {
            convert(&mut pending, seq, first_unconverted);
            first_unconverted = seq;
        }
    }
    if !pending.is_empty() {
        convert(&mut pending, seq, first_unconverted);
    }
    settle(&db, &cf, ids, cpu0, thread0)
}

struct Figures {
    all_in_us: f64,
    writer_us: f64,
    positive_us: f64,
    l0_files: u64,
}

fn run(c: &Candidate, ids: &[[u8; 24]]) -> Figures {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut db_opts = Options::default();
    db_opts.create_if_missing(true);
    db_opts.create_missing_column_families(true);
    // The hashed memtable cannot take concurrent writes.
    db_opts.set_allow_concurrent_memtable_write(false);
    let cfs = vec![rocksdb::ColumnFamilyDescriptor::new("ids-0", (c.options)())];
    let db = DB::open_cf_descriptors(&db_opts, dir.path(), cfs).unwrap_or_else(|e| panic!("{e}"));
    let cf = db.cf_handle("ids-0").unwrap_or_else(|| panic!("no column family"));
    let mut sync = WriteOptions::default();
    sync.set_sync(true);

    let (cpu0, thread0) = (cpu_seconds(), thread_cpu_seconds());
    let mut keys: Vec<[u8; 24]> = Vec::with_capacity(1000);
    for chunk in ids.chunks(1000) {
        keys.clear();
        keys.extend_from_slice(chunk);
        if c.sorted {
            keys.sort_unstable();
        }
        let mut batch = WriteBatch::default();
        for k in &keys {
            batch.put_cf(&cf, k, []);
        }
        db.write_opt(batch, &sync).unwrap_or_else(|e| panic!("{e}"));
    }
    settle(&db, &cf, ids, cpu0, thread0)
}

/// After the writes: flush, wait for compaction, and take the figures
/// (the CPU since `cpu0`, the writer's since `thread0`), then look up
/// delivered ids as the window does (batched, sorted by RocksDB).
fn settle(db: &DB, cf: &impl rocksdb::AsColumnFamilyRef, ids: &[[u8; 24]], cpu0: f64, thread0: f64) -> Figures {
    let writer = thread_cpu_seconds() - thread0;
    db.flush_cf(cf).unwrap_or_else(|e| panic!("{e}"));
    let mut wait = WaitForCompactOptions::default();
    wait.set_flush(true);
    db.wait_for_compact(&wait).unwrap_or_else(|e| panic!("{e}"));
    let all_in = cpu_seconds() - cpu0;
    let l0_files = db.property_int_value_cf(cf, "rocksdb.num-files-at-level0").ok().flatten().unwrap_or(0);
    let present: Vec<&[u8]> = ids.iter().step_by(97).take(20_000).map(|d| &d[..]).collect();
    let cpu0 = cpu_seconds();
    let mut found = 0;
    for chunk in present.chunks(100) {
        found += db.batched_multi_get_cf(cf, chunk.iter().copied(), false).into_iter().flatten().flatten().count();
    }
    let positive = cpu_seconds() - cpu0;
    assert_eq!(found, present.len(), "every delivered id is found");
    let n = ids.len() as f64;
    Figures {
        all_in_us: all_in * 1e6 / n,
        writer_us: writer * 1e6 / n,
        positive_us: positive * 1e6 / present.len() as f64,
        l0_files,
    }
}

fn main() {
    let n = sluice_benches::env_count("SLUICE_BENCH_IDS", 2_000_000);
    let ids: Vec<[u8; 24]> = (0..n).map(|i| digest(&PIPELINE_SCOPE, &format!("ev-{i:012}"))).collect();
    let mut best: Vec<Option<Figures>> = CANDIDATES.iter().map(|_| None).collect();
    for _round in 0..3 {
        for (c, slot) in CANDIDATES.iter().zip(best.iter_mut()) {
            let f = if c.name == BLOBS { run_blobs(&ids) } else { run(c, &ids) };
            if slot.as_ref().is_none_or(|b| f.all_in_us < b.all_in_us) {
                *slot = Some(f);
            }
        }
    }
    println!("dedup_write: {n} ids in synced batches of 1,000, then flush and compaction; CPU µs per id, best of 3");
    println!("  {:<34} {:>8} {:>8} {:>12} {:>8}", "candidate", "all in", "writer", "positive", "L0 files");
    for (c, f) in CANDIDATES.iter().zip(best.iter().flatten()) {
        println!(
            "  {:<34} {:>8.3} {:>8.3} {:>12.3} {:>8}",
            c.name, f.all_in_us, f.writer_us, f.positive_us, f.l0_files
        );
    }
}
