//! `sluice tap`: a sample of the events passing one point of a running
//! pipeline (after a plugin, before the sink, into the quarantine), as
//! NDJSON from the metrics listener, like `vector tap`.
//!
//! It never slows or changes the pipeline. With no tap attached, a point
//! costs one atomic load per batch (`Taps::any`). With one attached, each
//! batch at its point takes what the tap's rate allows (a token bucket,
//! 10 a second by default) and hands the lines to a bounded queue without
//! waiting: a reader that does not keep up loses samples, and the next
//! line it gets says how many (`{"dropped":N}`). Bodies are masked as the
//! config in force masks the quarantine (`quarantine.mask_fields`,
//! `mask_patterns`); quarantine entries are masked already.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::record::Position;

/// Where a tap samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Point {
    /// What the plugin of this name emits (what the next stage reads).
    After(String),
    /// What the sink is handed: the events new to the dedup window.
    BeforeSink,
    /// The entries written to the quarantine.
    Quarantined,
}

impl std::fmt::Display for Point {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Point::After(name) => write!(f, "after {name}"),
            Point::BeforeSink => f.write_str("before-sink"),
            Point::Quarantined => f.write_str("quarantined"),
        }
    }
}

/// One item at a point, borrowed from the batch; turned into a line only
/// when a tap samples it.
pub(crate) struct Sample<'a> {
    pub partition: &'a str,
    pub position: Option<&'a Position>,
    pub id: Option<&'a str>,
    /// Nanoseconds since the epoch.
    pub timestamp: Option<i64>,
    /// The event (a JSON object), or a quarantined record's payload.
    pub body: &'a [u8],
    /// Why it was quarantined, masked.
    pub reason: Option<&'a str>,
    /// Whether `body` is masked already (a quarantine entry's payload).
    pub masked: bool,
}

/// Lines waiting for a reader, per tap: a reader this far behind loses
/// samples.
pub(crate) const QUEUE: usize = 1_024;

struct Tap {
    point: Point,
    per_second: f64,
    /// The token bucket: tokens left, and when it was last filled.
    bucket: Mutex<(f64, Instant)>,
    tx: tokio::sync::mpsc::Sender<String>,
    dropped: AtomicU64,
    /// Only this pipeline's items, when the process runs several.
    pipeline: Option<String>,
}

/// The taps attached to this process's pipeline.
pub(crate) struct Taps {
    attached: AtomicUsize,
    list: Mutex<Vec<(u64, Arc<Tap>)>>,
    next: AtomicU64,
    /// The plugins of each pipeline in force, by name: what `--after` may
    /// name (the pipeline `""` when the process runs one).
    stages: Mutex<Vec<(String, Vec<String>)>>,
}

pub(crate) static TAPS: Taps = Taps {
    attached: AtomicUsize::new(0),
    list: Mutex::new(Vec::new()),
    next: AtomicU64::new(0),
    stages: Mutex::new(Vec::new()),
};

/// A tap attached until dropped (its reader went away).
pub(crate) struct Attached {
    id: u64,
    taps: &'static Taps,
}

impl Drop for Attached {
    fn drop(&mut self) {
        let mut list = self.taps.list.lock().unwrap_or_else(|p| p.into_inner());
        list.retain(|(id, _)| *id != self.id);
        self.taps.attached.store(list.len(), Ordering::SeqCst);
    }
}

impl Taps {
    /// Whether any tap is attached: the one check a point makes per batch.
    #[inline]
    pub(crate) fn any(&self) -> bool {
        self.attached.load(Ordering::Relaxed) > 0
    }

    /// The plugins a tap may name, as the pipeline this thread works for
    /// now has them (`labels`).
    pub(crate) fn set_stages(&self, names: Vec<String>) {
        let here = super::labels::current().map(|p| p.to_string()).unwrap_or_default();
        let mut stages = self.stages.lock().unwrap_or_else(|p| p.into_inner());
        match stages.iter_mut().find(|(p, _)| *p == here) {
            Some(entry) => entry.1 = names,
            None => stages.push((here, names)),
        }
    }

    /// The plugins of `pipeline` (every pipeline's, for `None`).
    pub(crate) fn stages(&self, pipeline: Option<&str>) -> Vec<String> {
        let stages = self.stages.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<String> = stages
            .iter()
            .filter(|(p, _)| pipeline.is_none_or(|want| p == want))
            .flat_map(|(_, names)| names.iter().cloned())
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The pipelines of the process by name, when it runs several; sorted,
    /// since each pipeline's thread says its stages when it happens to start.
    pub(crate) fn pipelines(&self) -> Vec<String> {
        let stages = self.stages.lock().unwrap_or_else(|p| p.into_inner());
        let mut names: Vec<String> = stages.iter().map(|(p, _)| p.clone()).filter(|p| !p.is_empty()).collect();
        names.sort();
        names
    }

    /// Attach a tap at `point`, `per_second` samples at most, with a queue
    /// of `queue` lines; the lines come out of the receiver.
    pub(crate) fn attach(
        &'static self,
        point: Point,
        per_second: u32,
        queue: usize,
        pipeline: Option<String>,
    ) -> (Attached, tokio::sync::mpsc::Receiver<String>) {
        let (tx, rx) = tokio::sync::mpsc::channel(queue.max(1));
        let per_second = f64::from(per_second.max(1));
        let tap = Tap {
            point,
            per_second,
            bucket: Mutex::new((per_second, Instant::now())),
            tx,
            dropped: AtomicU64::new(0),
            pipeline,
        };
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let mut list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        list.push((id, Arc::new(tap)));
        self.attached.store(list.len(), Ordering::SeqCst);
        (Attached { id, taps: self }, rx)
    }

    /// A batch's items at `point`: each tap there takes what its rate
    /// allows, masked by `masking`. Never waits.
    pub(crate) fn offer<'a>(
        &self,
        point: &Point,
        masking: Option<&crate::masking::Masking>,
        items: impl IntoIterator<Item = Sample<'a>>,
    ) {
        let here = super::labels::current();
        let taps: Vec<Arc<Tap>> = {
            let list = self.list.lock().unwrap_or_else(|p| p.into_inner());
            list.iter()
                .filter(|(_, t)| t.point == *point)
                .filter(|(_, t)| t.pipeline.as_deref().is_none_or(|want| here.as_deref() == Some(want)))
                .map(|(_, t)| t.clone())
                .collect()
        };
        if taps.is_empty() {
            return;
        }
        let mut items = items.into_iter();
        for tap in taps {
            tap.sample(Instant::now(), &mut items, |item| line(point, here.as_deref(), item, masking));
        }
    }
}

impl Tap {
    /// Send as many of `items` as the bucket allows now, a token each;
    /// the tokens not used stay for the next batch.
    fn sample<'a>(
        &self,
        now: Instant,
        items: &mut impl Iterator<Item = Sample<'a>>,
        line: impl Fn(&Sample<'a>) -> String,
    ) {
        let mut b = self.bucket.lock().unwrap_or_else(|p| p.into_inner());
        let mut tokens =
            (b.0 + now.saturating_duration_since(b.1).as_secs_f64() * self.per_second).min(self.per_second);
        while tokens >= 1.0 {
            let Some(item) = items.next() else { break };
            tokens -= 1.0;
            self.send(line(&item));
        }
        *b = (tokens, now);
    }

    fn send(&self, line: String) {
        let dropped = self.dropped.load(Ordering::Relaxed);
        if dropped > 0 {
            let notice = serde_json::json!({ "dropped": dropped, "why": "the reader did not keep up" }).to_string();
            if self.tx.try_send(notice).is_err() {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            self.dropped.fetch_sub(dropped, Ordering::Relaxed);
        }
        if self.tx.try_send(line).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One sample as its NDJSON line.
fn line(point: &Point, pipeline: Option<&str>, s: &Sample<'_>, masking: Option<&crate::masking::Masking>) -> String {
    let body: std::borrow::Cow<'_, [u8]> = match masking {
        Some(m) if !s.masked => std::borrow::Cow::Owned(m.apply(s.body).0),
        _ => std::borrow::Cow::Borrowed(s.body),
    };
    let event = serde_json::from_slice::<serde_json::Value>(&body)
        .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(&body).into_owned()));
    let mut out = serde_json::Map::new();
    out.insert("point".into(), point.to_string().into());
    if let Some(p) = pipeline {
        out.insert("pipeline".into(), p.into());
    }
    // The chain knows a record's position, not its partition's name.
    if !s.partition.is_empty() {
        out.insert("partition".into(), s.partition.into());
    }
    if let Some(p) = s.position {
        out.insert("position".into(), p.to_string().into());
    }
    if let Some(id) = s.id {
        out.insert("id".into(), id.into());
    }
    if let Some(ns) = s.timestamp {
        out.insert("timestamp".into(), sluice_guest::time::format_rfc3339(ns).into());
    }
    if let Some(reason) = s.reason {
        out.insert("reason".into(), reason.into());
    }
    out.insert(if point == &Point::Quarantined { "payload" } else { "event" }.into(), event);
    serde_json::Value::Object(out).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(body: &[u8]) -> Sample<'_> {
        Sample { partition: "p", position: None, id: Some("e-1"), timestamp: None, body, reason: None, masked: false }
    }

    // One registry per test: `TAPS` is the process's.
    fn taps() -> &'static Taps {
        Box::leak(Box::new(Taps {
            attached: AtomicUsize::new(0),
            list: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
            stages: Mutex::new(Vec::new()),
        }))
    }

    #[test]
    fn a_tap_takes_its_rate_is_masked_and_detaches_when_dropped() {
        let taps = taps();
        assert!(!taps.any());
        let (attached, mut rx) = taps.attach(Point::BeforeSink, 3, QUEUE, None);
        assert!(taps.any());
        let masking = crate::masking::masking(&["password"], &[]);
        let body = br#"{"user":"u","password":"S3CRET"}"#;
        taps.offer(&Point::BeforeSink, Some(&masking), (0..100).map(|_| sample(body)));
        taps.offer(&Point::After("json".into()), None, (0..100).map(|_| sample(body)));
        let mut lines = Vec::new();
        while let Ok(l) = rx.try_recv() {
            lines.push(l);
        }
        assert_eq!(lines.len(), 3, "the bucket holds a second's worth: {lines:?}");
        let v: serde_json::Value = serde_json::from_str(&lines[0]).unwrap_or_default();
        assert_eq!((v["point"].as_str(), v["id"].as_str()), (Some("before-sink"), Some("e-1")));
        assert_eq!(v["event"]["password"], "***");
        drop(attached);
        assert!(!taps.any(), "a reader gone is a tap gone");
    }

    #[test]
    fn a_reader_that_falls_behind_loses_samples_and_is_told_how_many() {
        let taps = taps();
        let (_attached, mut rx) = taps.attach(Point::Quarantined, 1_000, 2, None);
        let item = || Sample { masked: true, reason: Some("bad"), ..sample(b"not json") };
        taps.offer(&Point::Quarantined, None, (0..10).map(|_| item()));
        assert_eq!(rx.try_recv().map(|l| l.contains("\"payload\":\"not json\"")), Ok(true));
        assert!(rx.try_recv().is_ok());
        assert!(rx.try_recv().is_err(), "two fit; eight were dropped");
        taps.offer(&Point::Quarantined, None, std::iter::once(item()));
        let notice: serde_json::Value =
            rx.try_recv().ok().and_then(|l| serde_json::from_str(&l).ok()).unwrap_or_default();
        assert_eq!(notice["dropped"], 8, "{notice}");
        assert!(rx.try_recv().is_ok_and(|l| l.contains("\"reason\":\"bad\"")), "then the sample itself");
    }
}
