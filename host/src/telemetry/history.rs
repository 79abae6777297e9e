//! The last 15 minutes of a running pipeline, one sample a second, for the
//! status page (`GET /`, `status.html`) and its JSON (`GET /status.json`).
//!
//! Each second the metrics endpoint's own thread reads the metrics text (as
//! `sluice top` does, `telemetry::scrape`) and keeps per partition the
//! counters by door, lag, what the source holds unread, the oldest age and
//! whether it is stalled, and each sink's breaker state. Nothing is added to
//! the hot path: the counters are the ones `/metrics` serves. The page
//! derives rates, breaker episodes and stalls from consecutive samples.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use serde::Serialize;

use super::scrape::{Reading, Scrape};
use crate::telemetry::stats::Reasons;

/// Samples kept: 15 minutes at one a second.
pub(crate) const SAMPLES: usize = 900;
/// Quarantine reasons kept apart; more are counted under one.
const MAX_REASONS: usize = 100;

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub(crate) struct Sample {
    /// Unix seconds.
    pub t: u64,
    pub partitions: BTreeMap<String, Reading>,
    /// Per sink: 0 closed, 1 open, 2 probing.
    pub breakers: BTreeMap<String, u8>,
}

impl Sample {
    pub(crate) fn from_scrape(t: u64, s: &Scrape) -> Sample {
        Sample { t, partitions: super::scrape::readings(s), breakers: super::scrape::breaker_states(s) }
    }
}

/// What the page shows beside the samples.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct About {
    pub pipeline: String,
    /// `name@digest` of each plugin, in chain order.
    pub plugins: Vec<String>,
    /// With several sinks: each sink's name, in the config's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sinks: Vec<String>,
    /// With several sinks: the routes as `sluice check` draws them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<String>,
    /// The digest of this pipeline's config in force.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_digest: Option<String>,
}

#[derive(Default)]
struct State {
    samples: VecDeque<Sample>,
    /// One per pipeline of the process, in the order `run` was given them.
    abouts: Vec<About>,
    /// Quarantined records of this process by `stage: reason` (masked).
    reasons: Reasons,
    config_digest: Option<String>,
}

/// The process's history: what `/status.json` serves.
pub(crate) struct History {
    state: Mutex<Option<State>>,
}

pub(crate) static HISTORY: History = History { state: Mutex::new(None) };

/// `/status.json`.
#[derive(Serialize)]
pub(crate) struct Status<'a> {
    /// The first pipeline (the only one, unless the process runs several).
    pub about: &'a About,
    /// Every pipeline, when the process runs several: their partitions and
    /// sinks are named `pipeline:name` in the samples.
    #[serde(skip_serializing_if = "<[About]>::is_empty")]
    pub pipelines: &'a [About],
    /// The digest of the config in force (`sluice_config_info`).
    pub config_digest: Option<String>,
    pub reasons: &'a Reasons,
    pub samples: &'a VecDeque<Sample>,
}

impl History {
    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f(st.get_or_insert_with(State::default))
    }

    /// A second's reading of the metrics text.
    pub(crate) fn sampled(&self, t: u64, s: &Scrape) {
        let sample = Sample::from_scrape(t, s);
        // With several pipelines each digest is said with its name.
        if let Some(digest) = config_digest(s).filter(|_| self.with(|st| st.abouts.len() <= 1)) {
            self.set_config_digest(None, digest);
        }
        self.record(sample);
    }

    pub(crate) fn record(&self, sample: Sample) {
        self.with(|st| {
            if st.samples.len() == SAMPLES {
                st.samples.pop_front();
            }
            st.samples.push_back(sample);
        });
    }

    /// A pipeline now in force (a start, a reload), by its name: the one
    /// of that name is replaced, a new name is added.
    pub(crate) fn set_about(&self, about: About) {
        self.with(|st| match st.abouts.iter_mut().find(|a| a.pipeline == about.pipeline) {
            Some(a) => {
                let digest = a.config_digest.take();
                *a = About { config_digest: about.config_digest.clone().or(digest), ..about };
            }
            None => st.abouts.push(about),
        });
    }

    /// The digest of a config in force: `pipeline`'s, or (`None`) the only
    /// pipeline's. Said here as well as in `sluice_config_info`: the first
    /// one is set before the metrics endpoint (and its recorder) exists.
    pub(crate) fn set_config_digest(&self, pipeline: Option<&str>, digest: String) {
        self.with(|st| {
            if let Some(a) = st.abouts.iter_mut().find(|a| pipeline.is_none_or(|p| a.pipeline == p)) {
                a.config_digest = Some(digest.clone());
            }
            if pipeline.is_none() || st.abouts.first().is_some_and(|a| Some(a.pipeline.as_str()) == pipeline) {
                st.config_digest = Some(digest);
            }
        });
    }

    /// Each pipeline's config digest, by name (`sluice_config_info`).
    pub(crate) fn config_digests(&self) -> Vec<(String, String)> {
        self.with(|st| st.abouts.iter().filter_map(|a| Some((a.pipeline.clone(), a.config_digest.clone()?))).collect())
    }

    pub(crate) fn config_digest(&self) -> Option<String> {
        self.with(|st| st.config_digest.clone())
    }

    /// The plugins (`name@digest`) of the pipeline this thread works for.
    pub(crate) fn set_plugins(&self, plugins: Vec<String>) {
        let here = super::labels::current();
        self.with(|st| {
            if let Some(a) = st.abouts.iter_mut().find(|a| here.as_deref().is_none_or(|p| a.pipeline == p)) {
                a.plugins = plugins;
            } else if st.abouts.is_empty() {
                st.abouts.push(About { plugins, ..About::default() });
            }
        });
    }

    /// A batch's quarantined records, `(stage, reason)` each: one lock per
    /// batch, and only for batches that quarantined something. With
    /// several pipelines the stage is named `pipeline:stage`.
    pub(crate) fn quarantined<'r>(&self, reasons: impl IntoIterator<Item = (&'r str, &'r str)>) {
        match super::labels::current() {
            None => self.with(|st| st.reasons.add(reasons, MAX_REASONS)),
            Some(p) => {
                let named: Vec<(String, &str)> = reasons.into_iter().map(|(s, r)| (format!("{p}:{s}"), r)).collect();
                self.with(|st| st.reasons.add(named.iter().map(|(s, r)| (s.as_str(), *r)), MAX_REASONS));
            }
        }
    }

    /// `/status.json`'s body.
    pub(crate) fn json(&self) -> String {
        self.with(|st| {
            let first = st.abouts.first().cloned().unwrap_or_default();
            let status = Status {
                about: &first,
                pipelines: if st.abouts.len() > 1 { &st.abouts } else { &[] },
                config_digest: st.config_digest.clone(),
                reasons: &st.reasons,
                samples: &st.samples,
            };
            serde_json::to_string(&status).unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()))
        })
    }
}

/// The digest of the config in force, as `sluice_config_info` says it.
pub(crate) fn config_digest(s: &Scrape) -> Option<String> {
    s.label_values("sluice_config_info", "digest")
        .into_iter()
        .find(|d| s.get("sluice_config_info", &[("digest", d.as_str())]).is_some_and(|v| v > 0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_reads_the_doors_and_gauges_and_the_ring_keeps_fifteen_minutes() {
        let text = "sluice_records_in_total{partition=\"a.log\"} 10\n\
                    sluice_records_out_total{partition=\"a.log\",door=\"delivered\"} 8\n\
                    sluice_records_out_total{partition=\"a.log\",door=\"quarantined\"} 2\n\
                    sluice_source_behind{partition=\"a.log\"} 512\n\
                    sluice_partition_stalled{partition=\"a.log\"} 1\n\
                    sluice_breaker_state{sink=\"http://x\"} 1\n\
                    sluice_config_info{digest=\"old\"} 0\n\
                    sluice_config_info{digest=\"new\"} 1\n";
        let scrape = super::super::scrape::parse(text);
        let s = Sample::from_scrape(7, &scrape);
        let a = &s.partitions["a.log"];
        assert_eq!(
            (a.read, a.delivered, a.quarantined, a.gauges.behind, a.gauges.stalled),
            (10.0, 8.0, 2.0, Some(512.0), true)
        );
        assert_eq!(s.breakers["http://x"], 1);
        assert_eq!(config_digest(&scrape).as_deref(), Some("new"));
        let h = History { state: Mutex::new(None) };
        for t in 0..(SAMPLES as u64 + 5) {
            h.record(Sample { t, ..Sample::default() });
        }
        h.quarantined([("plugin", "bad"), ("plugin", "bad"), ("source", "too long")]);
        h.sampled(SAMPLES as u64 + 5, &scrape);
        let json: serde_json::Value = serde_json::from_str(&h.json()).unwrap_or_default();
        let samples = json["samples"].as_array().map(Vec::len);
        assert_eq!((samples, json["samples"][0]["t"].as_u64()), (Some(SAMPLES), Some(6)), "the oldest six are gone");
        assert_eq!(json["samples"][SAMPLES - 1]["partitions"]["a.log"]["read"], 10.0);
        assert_eq!(json["reasons"]["plugin: bad"], 2);
        assert_eq!(json["config_digest"], "new");
    }
}
