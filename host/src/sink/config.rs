//! `[sink]`: which sink, and the one place that dispatches on its type;
//! `[[sinks]]`: several, each with a name (`NamedSinkConfig`).
//! Each sink's own config lives beside it (`http/config.rs`,
//! `clickhouse.rs`, `kafka.rs`, `postgres.rs`, `file.rs`), checks itself
//! and knows its key names; this enum only routes to them, so a new sink
//! is one variant here and one file there.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::context::SinkContext;
use super::file::{FileSink, StdoutSink};
use super::guard::GuardConfig;
#[cfg(feature = "http")]
use super::http::client::HttpSink;
use super::http::config::ResponseConfig;
#[cfg(feature = "kafka")]
use super::kafka::KafkaSink;
#[cfg(feature = "postgres")]
use super::postgres::PostgresSink;
use super::retrying::RetryingSink;
use super::{Sink, SinkError};
use crate::features::Feature;
use crate::problem::Problems;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum SinkConfig {
    /// NDJSON, synced before a batch counts as delivered. A write that
    /// fails (a full disk) is a sick backend: the breaker opens and the
    /// pipeline waits.
    File {
        /// The NDJSON file events are appended to, relative to the config
        /// file; its folder is created.
        path: PathBuf,
        #[serde(flatten)]
        guard: GuardConfig,
    },
    /// NDJSON on standard output (flushed; not durable).
    Stdout,
    /// Any HTTP backend, answers read per record by a profile (`sink/http`).
    Http(Box<super::http::config::HttpSinkConfig>),
    /// ClickHouse's HTTP interface, `INSERT … FORMAT JSONEachRow`.
    Clickhouse(Box<super::clickhouse::ClickhouseSinkConfig>),
    /// A Kafka topic, accepted on the delivery report.
    Kafka(Box<super::kafka::KafkaSinkConfig>),
    /// A PostgreSQL table keyed by the event id, one transaction per batch.
    Postgres(Box<super::postgres::PostgresSinkConfig>),
}

impl SinkConfig {
    /// [`SinkConfig::build`], labelled with its name when it is one of
    /// several (`[[sinks]]`).
    pub(crate) fn build_named(&self, name: Option<&str>, ctx: SinkContext<'_>) -> Result<RetryingSink, SinkError> {
        // Only the HTTP sinks load a plugin (a classifier).
        #[cfg(not(feature = "http"))]
        let _ = ctx;
        let sink: Box<dyn Sink> = match self {
            SinkConfig::File { path, .. } => Box::new(FileSink::open(path)?),
            SinkConfig::Stdout => Box::new(StdoutSink),
            #[cfg(feature = "http")]
            SinkConfig::Http(h) => Box::new(HttpSink::new(h, None, ctx)?),
            #[cfg(feature = "http")]
            SinkConfig::Clickhouse(c) => Box::new(HttpSink::new(&c.http(), Some(c.name()), ctx)?),
            #[cfg(feature = "kafka")]
            SinkConfig::Kafka(k) => Box::new(KafkaSink::new(k, ctx.registry)?),
            #[cfg(feature = "postgres")]
            SinkConfig::Postgres(p) => Box::new(PostgresSink::new(p)?),
            #[allow(unreachable_patterns)]
            other => {
                let (feature, kind) = other.feature().unwrap_or((Feature::Http, "?"));
                let message = feature.missing(&format!("sink type {kind:?}")).map(|e| e.to_string());
                return Err(SinkError::Setup { target: kind.into(), message: message.unwrap_or_default() });
            }
        };
        let guard = self.guard();
        Ok(RetryingSink::labelled(sink, guard.retry, guard.breaker, name))
    }

    /// The cargo feature this sink needs, with its `type`; `None` for the
    /// sinks every build has.
    pub(crate) fn feature(&self) -> Option<(Feature, &'static str)> {
        match self {
            SinkConfig::File { .. } | SinkConfig::Stdout => None,
            SinkConfig::Http(_) => Some((Feature::Http, "http")),
            SinkConfig::Clickhouse(_) => Some((Feature::Http, "clickhouse")),
            SinkConfig::Kafka(_) => Some((Feature::Kafka, "kafka")),
            SinkConfig::Postgres(_) => Some((Feature::Postgres, "postgres")),
        }
    }

    /// How an HTTP backend's answers are read; `None` for sinks whose
    /// answers are not HTTP responses (files, Kafka, PostgreSQL).
    pub(crate) fn response(&self) -> Option<ResponseConfig> {
        match self {
            SinkConfig::Http(h) => Some(h.response.clone()),
            SinkConfig::Clickhouse(c) => Some(c.http().response),
            SinkConfig::File { .. } | SinkConfig::Stdout | SinkConfig::Kafka(_) | SinkConfig::Postgres(_) => None,
        }
    }

    /// The classifier plugin that reads an HTTP backend's answers, if any.
    pub(crate) fn classifier(&self) -> Option<super::http::classifier::ClassifierConfig> {
        match self {
            SinkConfig::Http(h) => h.classifier.clone(),
            _ => None,
        }
    }

    /// The retry policy and breaker the sink is driven with; standard
    /// output uses the defaults.
    pub(crate) fn guard(&self) -> GuardConfig {
        match self {
            SinkConfig::File { guard, .. } => guard.clone(),
            SinkConfig::Stdout => GuardConfig::default(),
            SinkConfig::Http(h) => h.guard.clone(),
            SinkConfig::Clickhouse(c) => c.guard.clone(),
            SinkConfig::Kafka(k) => k.guard.clone(),
            SinkConfig::Postgres(p) => p.guard.clone(),
        }
    }

    /// Every problem, keyed under `[sink]`.
    pub(crate) fn validate(&self, p: &mut Problems) {
        match self {
            SinkConfig::File { path, guard } => {
                let dir = path.parent().unwrap_or(Path::new("."));
                if dir.exists() && !dir.is_dir() {
                    p.add("path", format!("{} is not a folder", dir.display()));
                }
                guard.validate(p);
            }
            SinkConfig::Stdout => {}
            SinkConfig::Http(h) => h.validate(p),
            SinkConfig::Clickhouse(c) => c.validate(p),
            SinkConfig::Kafka(k) => k.validate(p),
            SinkConfig::Postgres(pg) => pg.validate(p),
        }
        if let Some(e) = self.feature().and_then(|(f, kind)| f.missing(&format!("sink type {kind:?}"))) {
            p.add("type", e.to_string());
        }
    }

    /// Relative paths made absolute against the config file's folder, and
    /// environment overrides' `_` read as `.` in Kafka property names.
    pub(crate) fn absolutize(&mut self, abs: &dyn Fn(&Path) -> PathBuf) {
        match self {
            SinkConfig::File { path, .. } => *path = abs(path),
            SinkConfig::Kafka(k) => k.absolutize(abs),
            SinkConfig::Postgres(p) => {
                if let Some(tls) = &mut p.tls {
                    for f in [&mut tls.ca, &mut tls.cert, &mut tls.key].into_iter().flatten() {
                        *f = abs(f);
                    }
                }
            }
            SinkConfig::Http(h) => {
                if let Some(c) = &mut h.classifier {
                    c.absolutize(abs);
                }
            }
            SinkConfig::Stdout | SinkConfig::Clickhouse(_) => {}
        }
    }
}

/// One of a pipeline's sinks: its name, then the keys `[sink]` takes.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
pub struct NamedSinkConfig {
    /// How routes, metrics labels, quarantine entries and the audit name
    /// it: letters, digits, `-` and `_`. Its delivered ids are kept apart
    /// from the other sinks' (`default` keeps those of a pipeline that had
    /// one `[sink]`).
    pub name: String,
    /// The keys of `[sink]` (`type` first); an unknown one is refused.
    #[serde(flatten)]
    pub sink: SinkConfig,
}

impl NamedSinkConfig {
    /// Every problem, keyed under `sinks[i]`.
    pub(crate) fn validate(&self, p: &mut Problems) {
        self.sink.validate(p);
        let ok = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        if self.name.is_empty() || !self.name.chars().all(ok) {
            p.add("name", format!("{:?}: letters, digits, - and _ only", self.name));
        }
    }
}
