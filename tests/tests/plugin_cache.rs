//! Plugins are compiled once per digest: in memory within a process, and on
//! disk across processes. A damaged cache file costs a recompile, never a
//! failure. The disk cache is bounded: the least recently used artifacts go
//! first.

use serde_json::json;
use sluice::plugin::engine::{CacheStats, Runtime};
use sluice_e2e::spec;

fn cwasm_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "cwasm")).collect()
        })
        .unwrap_or_default()
}

#[test]
fn compiled_once_then_served_from_memory_then_from_disk() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cache = dir.path().join("plugins");
    let json_spec = spec("json", json!({}));
    let digest = sluice::plugin::digest_hex(&std::fs::read(&json_spec.path).unwrap_or_default());

    let first = Runtime::new(Some(cache.clone())).unwrap_or_else(|e| panic!("{e}"));
    first.load(&json_spec).unwrap_or_else(|e| panic!("{e}"));
    first.load(&json_spec).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(first.cache_stats(), CacheStats { compiled: 1, from_disk: 0, from_memory: 1 });
    let files = cwasm_files(&cache);
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0].file_name().and_then(|n| n.to_str()).unwrap_or("");
    assert!(name.starts_with(&digest), "cache files are keyed by the plugin's digest: {name}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&cache).map(|m| m.permissions().mode() & 0o777).unwrap_or(0);
        assert_eq!(mode, 0o700, "the cache holds machine code: owner only");
    }

    let second = Runtime::new(Some(cache.clone())).unwrap_or_else(|e| panic!("{e}"));
    let loaded = second.load(&json_spec).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(second.cache_stats(), CacheStats { compiled: 0, from_disk: 1, from_memory: 0 });
    assert_eq!(loaded.id().digest.to_hex().as_str(), digest);

    std::fs::write(&files[0], b"damaged").unwrap_or_else(|e| panic!("{e}"));
    let third = Runtime::new(Some(cache)).unwrap_or_else(|e| panic!("{e}"));
    third.load(&json_spec).unwrap_or_else(|e| panic!("a damaged cache file must not fail the load: {e}"));
    assert_eq!(third.cache_stats(), CacheStats { compiled: 1, from_disk: 0, from_memory: 0 });
}

#[test]
fn the_disk_cache_keeps_the_most_recently_used_within_its_bound() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cache = dir.path().join("plugins");
    let json_spec = spec("json", json!({}));
    let first = Runtime::new(Some(cache.clone())).unwrap_or_else(|e| panic!("{e}"));
    first.load(&json_spec).unwrap_or_else(|e| panic!("{e}"));
    let json_file = cwasm_files(&cache).pop().unwrap_or_default();

    // Artifacts of plugins long gone, each older than the last: more than
    // the bound together.
    let now = std::time::SystemTime::now();
    let stale = sluice::plugin::cache::DISK_ENTRIES + 6;
    for i in 0..stale {
        let p = cache.join(format!("{i:064x}-0000000000000000.cwasm"));
        std::fs::write(&p, b"old").unwrap_or_else(|e| panic!("{e}"));
        let f = std::fs::File::options().append(true).open(&p).unwrap_or_else(|e| panic!("{e}"));
        f.set_modified(now - std::time::Duration::from_secs(3600 + i as u64)).unwrap_or_else(|e| panic!("{e}"));
    }

    // Compiling another plugin writes its artifact and prunes.
    let second = Runtime::new(Some(cache.clone())).unwrap_or_else(|e| panic!("{e}"));
    second.load(&spec("ts-window", json!({ "max_age": "1h", "max_future": "1m" }))).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(second.cache_stats().compiled, 1);
    let left = cwasm_files(&cache);
    assert_eq!(left.len(), sluice::plugin::cache::DISK_ENTRIES, "{} files left", left.len());
    assert!(left.contains(&json_file), "the recently used json artifact stays");
    // Kept: ts-window (just written), json (used last) and the 62 newest
    // stale ones; the 8 oldest go.
    let kept = sluice::plugin::cache::DISK_ENTRIES - 2;
    for i in 0..stale {
        let file = cache.join(format!("{i:064x}-0000000000000000.cwasm"));
        assert_eq!(left.contains(&file), i < kept, "stale artifact {i} of {stale}: the oldest go first");
    }
    // What stayed still serves: json comes from disk.
    let third = Runtime::new(Some(cache)).unwrap_or_else(|e| panic!("{e}"));
    third.load(&json_spec).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(third.cache_stats(), CacheStats { compiled: 0, from_disk: 1, from_memory: 0 });
}
