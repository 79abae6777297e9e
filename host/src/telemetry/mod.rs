//! What an operator sees: Prometheus metrics, `/health` and `/ready`, and
//! the log.
//!
//! - `InternalEvent` (below): the trait of the internal events (a batch
//!   finished, offsets committed, a partition paused…). Each is one struct
//!   that both logs and counts, so logs and metrics never disagree; each
//!   lives beside the code that emits it (`pipeline/events.rs`, …).
//! - `stats`: a run's counts per door and partition, for the summary, the
//!   status page and `sluice top`; `config`: `[metrics]` and `[api]`.
//! - `server`: the HTTP endpoint; `api`: who may read its record-bearing
//!   endpoints (`[api]`: off by default, a bearer token off loopback).
//! - `repeats`: per-record warnings said once, then counted per interval,
//!   within a budget of lines per second.
//! - `scrape`: the `/metrics` text read back, and the rates two readings
//!   give (`sluice top`).
//! - `labels`: the pipeline a thread works for, as a `pipeline` label on
//!   what it records, when one process runs several.
//! - `history`: a sample a second of the last 15 minutes, for the status
//!   page (`GET /`, `status.html`) and `/status.json`.
//! - `tap`: samples of the events passing a point of the pipeline, for
//!   `sluice tap` (one atomic load per batch when nobody taps).
//! - `redact`: the log's writer, which masks every line as the config in
//!   force says (`masking`).
//! - `progress`: a bar per partition on a terminal while its dedup ids are
//!   restored from the changelog; the log writes between its draws.
//!
//! Metrics go through the `metrics` facade to `metrics-exporter-prometheus`
//! (the maintained exporter of that facade), installed once per process.

pub(crate) mod api;
pub(crate) mod config;
pub(crate) mod history;
pub(crate) mod labels;
pub(crate) mod progress;
pub(crate) mod redact;
pub mod repeats;
pub(crate) mod scrape;
pub(crate) mod server;
pub mod stats;
pub(crate) mod tap;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Install the Prometheus recorder (once per process; later calls return
/// the same handle). `None` when another recorder was installed first.
pub fn install() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let buckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];
            let recorder = PrometheusBuilder::new().set_buckets(&buckets).ok()?.build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(labels::Labelled(recorder)).ok()?;
            Some(handle)
        })
        .as_ref()
}

/// Liveness and readiness, as the pipeline reports them.
#[derive(Debug, Default)]
pub(crate) struct Health {
    ready: AtomicBool,
    /// Unix milliseconds of the consume loop's last turn.
    heartbeat: AtomicU64,
    /// The watchdog's word on each partition that is not simply flowing
    /// (stalled, late, back-pressured): `/health`'s detail.
    detail: std::sync::Mutex<Vec<String>>,
    /// Lines of the run's own, after the partitions', by what says them: a
    /// Kafka member stranded with no partitions (`pipeline::kafka::idle_member`),
    /// a state volume out of room (`store::disk_reserve`).
    lines: std::sync::Mutex<std::collections::BTreeMap<&'static str, String>>,
}

/// A consume loop that has not turned for this long is not healthy.
pub(crate) const STALL_MS: u64 = 30_000;

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

impl Health {
    /// Ready: the source is set up (the files found; the consumer has
    /// partitions, each with its dedup ids restored) and the pipeline is
    /// not stopping.
    pub(crate) fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }
    pub(crate) fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }
    pub(crate) fn beat(&self) {
        self.heartbeat.store(now_ms(), Ordering::Relaxed);
    }
    pub(crate) fn set_detail(&self, lines: Vec<String>) {
        *self.detail.lock().unwrap_or_else(|p| p.into_inner()) = lines;
    }
    /// Set (or clear, with `None`) the line `key` adds to the detail.
    pub(crate) fn set_line(&self, key: &'static str, line: Option<String>) {
        let mut lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        match line {
            Some(l) => lines.insert(key, l),
            None => lines.remove(key),
        };
    }
    pub(crate) fn detail(&self) -> Vec<String> {
        let mut lines = self.detail.lock().unwrap_or_else(|p| p.into_inner()).clone();
        lines.extend(self.lines.lock().unwrap_or_else(|p| p.into_inner()).values().cloned());
        lines
    }
    /// Healthy: the loop turned within `STALL_MS` (or has not started).
    pub(crate) fn is_healthy(&self) -> bool {
        let last = self.heartbeat.load(Ordering::Relaxed);
        last == 0 || now_ms().saturating_sub(last) < STALL_MS
    }
}

/// An internal event: one fact, said in one place, both logged and
/// counted, so that what the log says and what the metrics say agree.
/// Each event lives beside the code that emits it (`pipeline/events.rs`,
/// `sink/events.rs`, …) and holds plain values; telemetry keeps only this
/// machinery. Metric names are listed in the book's metrics chapter.
pub(crate) trait InternalEvent {
    fn emit(&self);
}

/// The log target every internal event is said under, wherever it lives:
/// an operator's filter (`SLUICE_LOG=info,sluice::telemetry::events=debug`)
/// keeps working when an event moves.
pub(crate) const EVENTS: &str = "sluice::telemetry::events";
