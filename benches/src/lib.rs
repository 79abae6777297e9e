//! Shared pieces of the benchmarks: generated input with known properties.

pub mod kafka;

// The allocator under measurement (issue 21, item 8). One library every
// bench links, so a feature switches all of them; glibc's malloc otherwise.
#[cfg(all(feature = "mimalloc", feature = "jemalloc"))]
compile_error!("pick one allocator: --features mimalloc or --features jemalloc");
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The allocator this build of the benches runs on, for their reports.
pub const ALLOCATOR_NAME: &str = if cfg!(feature = "mimalloc") {
    "mimalloc"
} else if cfg!(feature = "jemalloc") {
    "jemalloc"
} else {
    "glibc"
};

/// Line `i` of the generated stream: about 300 bytes, `event_id` `ev-{i}`,
/// and a `ts` within the hour before `now_secs` (a 2 h window keeps all).
pub fn json_line(i: usize, now_secs: i64) -> String {
    let ts = sluice_guest::time::format_rfc3339((now_secs - (i as i64 % 3000)) * 1_000_000_000);
    format!(
        r#"{{"event_id":"ev-{i:010}","ts":"{ts}","service":"checkout","level":"info","user":{},"msg":"{}"}}"#,
        i % 9973,
        "x".repeat(189)
    )
}

/// The plugin runtime of the pipeline benches: with a compile cache under
/// the target directory, as `sluice run` keeps one, so that a run's figures
/// are the records' cost and not Cranelift compiling the plugins again
/// (issue 21, item 7; the first run after a plugin changes still pays it).
pub fn runtime() -> sluice::plugin::engine::Runtime {
    let cache = sluice_e2e::target_dir().join("bench-plugin-cache");
    // `SLUICE_BENCH_PERFMAP=1` names the plugins' compiled functions for
    // `perf report` (/tmp/perf-<pid>.map); without it a profile shows them
    // as one `[JIT]` lump.
    let perfmap = std::env::var_os("SLUICE_BENCH_PERFMAP").is_some();
    sluice::plugin::engine::Runtime::tuned(Some(cache), |c| {
        if perfmap {
            c.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

/// sluice's log on standard error as `SLUICE_LOG` filters it
/// (`SLUICE_LOG=info`), for a bench's run that needs explaining; nothing
/// without it.
pub fn log_from_env() {
    if let Ok(filter) = std::env::var("SLUICE_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .try_init();
    }
}

/// Lines `0..n`, every id unique.
pub fn json_lines(n: usize, now_secs: i64) -> Vec<String> {
    (0..n).map(|i| json_line(i, now_secs)).collect()
}

/// Lines `first..first + n`, each tenth followed by a repeat of itself (the
/// same event_id: a producer's duplicate). `n` unique ids in `n + n / 10`
/// lines.
pub fn json_lines_with_repeats(first: usize, n: usize, now_secs: i64) -> Vec<String> {
    let mut out = Vec::with_capacity(n + n / 10);
    for i in first..first + n {
        let line = json_line(i, now_secs);
        if i % 10 == 0 {
            out.push(line.clone());
        }
        out.push(line);
    }
    out
}

/// `n` logfmt lines of about 130 bytes, seven pairs each (one quoted
/// value): what `plugin_languages` and `plugin_ab` feed the logfmt plugins.
pub fn logfmt_lines(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            format!(
                "ts=2026-11-29T21:{:02}:{:02}Z level=info service=checkout req=r-{i} user={} msg=\"order {} placed by user\" latency_ms={}",
                (i / 60) % 60,
                i % 60,
                i % 9973,
                i,
                i % 500
            )
            .into_bytes()
        })
        .collect()
}

/// Seconds since the Unix epoch, now.
pub fn now_secs() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// CPU seconds this process has used (user and system, every thread):
/// records per second per core is records over this.
pub fn cpu_seconds() -> f64 {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: getrusage fills the struct we pass.
    let u = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, u.as_mut_ptr());
        u.assume_init()
    };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// A run's CPU: this process's, less what the bench's own threads spent
/// meanwhile. Those are the threads that existed before the run and are
/// not sluice's (`sluice-*`): the bench's main thread and the clients it
/// watches the run with, the thread sampler. At 1,024 partitions a look
/// at the group's committed offsets (librdkafka's `committed`, a search of
/// a list of 1,024 per partition, on the caller's thread and on the
/// watching client's own) cost a tenth of the process's CPU, and that was
/// counted as sluice's. A thread that ends during the run is sluice's (the
/// bench's live until the end); its CPU stays in the process's.
pub struct RunCpu {
    start: f64,
    /// The bench's threads, by id, with their CPU at the start.
    bench: Vec<(i32, f64)>,
}

impl RunCpu {
    /// From now.
    pub fn start() -> RunCpu {
        let bench = tasks()
            .into_iter()
            .filter(|(_, name)| !name.starts_with("sluice-"))
            .filter_map(|(tid, _)| Some((tid, task_cpu_seconds(tid)?)))
            .collect();
        RunCpu { start: cpu_seconds(), bench }
    }

    /// CPU seconds since `start`, the bench's threads' left out.
    pub fn seconds(&self) -> f64 {
        let bench: f64 = self.bench.iter().filter_map(|(tid, at)| Some(task_cpu_seconds(*tid)? - at)).sum();
        cpu_seconds() - self.start - bench
    }
}

/// This process's threads: id and name.
fn tasks() -> Vec<(i32, String)> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return Vec::new() };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let tid: i32 = e.file_name().to_str()?.parse().ok()?;
        let name = std::fs::read_to_string(e.path().join("comm")).ok()?;
        Some((tid, name.trim().to_string()))
    })
    .collect()
}

/// CPU seconds thread `tid` of this process has used, to the nanosecond
/// (its CPU clock, which Linux numbers from the thread id); `None` once
/// it has ended.
fn task_cpu_seconds(tid: i32) -> Option<f64> {
    // The kernel's per-thread scheduler clock: (~tid << 3) | CPUCLOCK_PERTHREAD | CPUCLOCK_SCHED.
    let clock = ((!tid) << 3) | 4 | 2;
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime fills the struct we pass; a bad clock id is an error.
    let ok = unsafe { libc::clock_gettime(clock, &mut ts) } == 0;
    ok.then(|| ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9)
}

/// CPU seconds process `pid` has used (user and system, from
/// `/proc/<pid>/stat`): a broker's beside sluice's. 0 when unreadable.
pub fn process_cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0.0 };
    // Fields after the command name, which is in parentheses and may hold
    // spaces: utime and stime are the 14th and 15th fields of the line.
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else { return 0.0 };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf reads a constant of the system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) / hz.max(1.0)
}

/// CPU seconds the calling thread has used: a step measured on this
/// thread alone, without what background threads did meanwhile. The
/// thread's clock, not `getrusage(RUSAGE_THREAD)`, which counts in
/// scheduler ticks on this kernel (a 5 ns step read as 0).
pub fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime fills the struct we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// The median of `v` (of its two middle values when even); runs of one
/// kind interleaved with another's are compared by theirs.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.is_empty() {
        return f64::NAN;
    }
    if v.len().is_multiple_of(2) { (v[m - 1] + v[m]) / 2.0 } else { v[m] }
}

/// A count from the environment (`SLUICE_BENCH_RECORDS=200000`), or `default`.
pub fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A comma-separated list of counts from the environment
/// (`SLUICE_BENCH_FILES=1,4,16`), or `default`.
pub fn env_counts(name: &str, default: &str) -> Vec<usize> {
    std::env::var(name).unwrap_or_else(|_| default.into()).split(',').filter_map(|s| s.trim().parse().ok()).collect()
}

/// The peak resident set size of this process since start, or since the
/// last [`reset_peak_rss`], MiB.
pub fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

/// Start measuring the peak RSS afresh (Linux: `clear_refs` 5), so that
/// each configuration of a benchmark reports its own peak.
pub fn reset_peak_rss() {
    // What an earlier step freed (a bench's input, produced) goes back to
    // the system first: glibc keeps it otherwise, and the peak would count
    // it as the run's.
    // SAFETY: malloc_trim only releases free memory of glibc's heap.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::malloc_trim(0);
    }
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The embedded pipeline the file benches run: `paths` → json → ts-window
/// → the dedup window → a file sink, with `extra` sections appended.
pub fn file_pipeline_config(name: &str, paths: &str, extra: &str) -> String {
    format!(
        r#"
[pipeline]
name = "{name}"
state_dir = "state"
batch_size = 1000
[source]
type = "file"
paths = ["{paths}"]
[[plugins]]
name = "json"
path = "{}"
config = {{ id_field = "event_id", timestamp_field = "ts" }}
[[plugins]]
name = "ts-window"
path = "{}"
config = {{ max_age = "2h", max_future = "1m" }}
[sink]
type = "file"
path = "out/events.ndjson"
{extra}
"#,
        sluice_e2e::plugin("json").display(),
        sluice_e2e::plugin("ts-window").display()
    )
}

#[cfg(test)]
mod tests {
    /// `RunCpu` reads other threads' clocks by id: the clock id it makes
    /// from a thread id is that thread's, not another's or none.
    #[test]
    fn a_threads_clock_by_its_id_is_its_own() {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let spin_until = super::thread_cpu_seconds() + 0.02;
        while super::thread_cpu_seconds() < spin_until {
            std::hint::black_box(0u64);
        }
        let by_id = super::task_cpu_seconds(tid).unwrap_or_else(|| panic!("no clock for thread {tid}"));
        let own = super::thread_cpu_seconds();
        assert!(by_id >= 0.02 && (own - by_id).abs() < 0.005, "by id {by_id} s, own clock {own} s");
        assert!(super::tasks().iter().any(|(t, _)| *t == tid), "this thread among the process's");
    }

    #[test]
    fn lines_are_about_300_bytes_and_ids_unique() {
        let lines = super::json_lines(1000, 1_700_000_000);
        let avg = lines.iter().map(String::len).sum::<usize>() / lines.len();
        assert!((280..=320).contains(&avg), "average {avg} bytes");
        let ids: std::collections::HashSet<&str> = lines.iter().map(|l| &l[13..27]).collect();
        assert_eq!(ids.len(), 1000);
        let with = super::json_lines_with_repeats(0, 1000, 1_700_000_000);
        assert_eq!(with.len(), 1100);
        let ids: std::collections::HashSet<&str> = with.iter().map(|l| &l[13..27]).collect();
        assert_eq!(ids.len(), 1000);
    }
}
