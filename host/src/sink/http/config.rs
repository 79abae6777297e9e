//! The `http` sink's config. How it sends (`SendingConfig`: `batch`,
//! `request`, `retry`, `breaker`) is the `clickhouse` preset's too.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::response::profile::Render;
use super::response::profile::{Profile, ProfileError};
use crate::problem::Problems;
use crate::sink::guard::GuardConfig;

/// `type = "http"`: events to an HTTP backend, its answers read per
/// record by a response profile or a classifier plugin.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpSinkConfig {
    /// Where requests go (`https://…` for TLS, verified with the system's
    /// CA certificates). No credentials here: `headers_from_env` or
    /// `basic_auth`.
    pub url: String,
    /// The request method.
    #[serde(default)]
    pub method: Method,
    /// Plain headers, shown by `sluice check`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Headers whose values come from environment variables (header name →
    /// variable name): credentials. Sent marked sensitive, never logged or
    /// shown; an unset variable stops the start.
    #[serde(default)]
    pub headers_from_env: BTreeMap<String, String>,
    /// HTTP basic authentication, the password from an environment variable.
    pub basic_auth: Option<BasicAuth>,
    /// How the backend's answer is read: a built-in profile by name, or a
    /// profile of the operator's own as a table (`[sink.response]`).
    #[serde(default)]
    pub response: ResponseConfig,
    /// A classifier plugin that reads the answers in place of the
    /// profile's rules (`response` then only shapes the request body).
    pub classifier: Option<super::classifier::ClassifierConfig>,
    /// How a request's events are laid out (a profile's `render =
    /// "lines"` follows it).
    #[serde(default)]
    pub encoding: Encoding,
    /// What each line or element is: the envelope `{"id", "timestamp",
    /// "event"}`, or the event itself with its id added as a field.
    #[serde(default)]
    pub payload: Payload,
    /// `_bulk` profiles (`elasticsearch_bulk`, `openobserve_bulk`): the
    /// index of the `create` actions.
    pub index: Option<String>,
    /// `response = "loki"`: each stream's labels.
    pub labels: Option<LabelsConfig>,
    /// `[sink.batch]`, `[sink.request]`.
    #[serde(flatten)]
    pub sending: SendingConfig,
    /// `[sink.retry]`, `[sink.breaker]`.
    #[serde(flatten)]
    pub guard: GuardConfig,
}

/// How an HTTP sink (`http`, `clickhouse`) sends: how a batch is cut into
/// requests and how each is sent. Flattened into both sinks' configs
/// (`[sink.batch]`, `[sink.request]`) beside the [`GuardConfig`] every sink
/// has. Neither denies keys itself, the sink that flattens them does; and
/// neither may flatten another (serde's flatten inside a flatten leaves
/// the inner keys unclaimed, and the outer struct would call them
/// unknown).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
pub struct SendingConfig {
    /// How a batch is cut into requests.
    #[serde(default)]
    pub batch: BatchConfig,
    /// How requests are sent: their timeouts, how many at once, compression.
    #[serde(default)]
    pub request: RequestConfig,
}

impl SendingConfig {
    /// Every problem, keyed under `[sink]`.
    pub(crate) fn validate(&self, p: &mut Problems) {
        if self.batch.max_records == 0 {
            p.add("batch.max_records", "must be at least 1".into());
        }
        if self.request.concurrency == 0 {
            p.add("request.concurrency", "must be at least 1".into());
        }
        if self.request.timeout.is_zero() {
            p.add("request.timeout", "must be more than 0".into());
        }
    }
}

/// Loki's stream labels: set ones, and ones read from each event's
/// top-level fields (a field an event lacks leaves its label out). Keep
/// them few and of few values: each distinct set is a stream, and Loki
/// indexes labels, not lines.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LabelsConfig {
    /// `{ job = "sluice", env = "prod" }`.
    #[serde(default, rename = "static")]
    pub fixed: BTreeMap<String, String>,
    /// `["level", "service"]`: the label takes the field's text.
    #[serde(default)]
    pub fields: Vec<String>,
}

impl LabelsConfig {
    fn first_problem(&self) -> Result<(), (String, String)> {
        let name_ok = |n: &str| {
            n.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        if let Some(n) = self.fixed.keys().find(|n| !name_ok(n)) {
            return Err((format!("labels.static.{n}"), "a label name is letters, digits and _".into()));
        }
        if let Some(n) = self.fields.iter().find(|n| !name_ok(n)) {
            return Err(("labels.fields".into(), format!("{n:?}: a label name is letters, digits and _")));
        }
        if self.fixed.is_empty() && self.fields.is_empty() {
            return Err(("labels".into(), "Loki needs at least one label: static = { job = \"sluice\" }".into()));
        }
        Ok(())
    }
}

/// `[sink.basic_auth]`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BasicAuth {
    /// The user name.
    pub user: String,
    /// The variable holding the password; unset stops the start.
    pub password_env: Option<String>,
}

/// The request's HTTP method.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum Method {
    /// The default.
    #[default]
    Post,
    /// For a backend that takes only `PUT`.
    Put,
}

/// How a response becomes per-record answers: `response = "openobserve"`
/// names a built-in profile (`sink/http/profiles/`), `[sink.response]`
/// describes the backend in the same keys. Either way the host's fixed
/// rules come first (`response::fixed`).
#[derive(Debug, Clone)]
pub enum ResponseConfig {
    /// `response = "name"`: a built-in profile.
    Named(String),
    /// `[sink.response]`: the operator's own.
    Profile(Box<Profile>),
}

impl Default for ResponseConfig {
    fn default() -> Self {
        ResponseConfig::Named("status".into())
    }
}

impl ResponseConfig {
    /// The profile in force; `Err` names an unknown built-in.
    pub(crate) fn profile(&self) -> Result<Profile, ProfileError> {
        match self {
            ResponseConfig::Named(name) => Profile::builtin(name),
            ResponseConfig::Profile(p) => Ok((**p).clone()),
        }
    }

    /// The built-in's name, or `custom`, for `sluice check`.
    pub(crate) fn name(&self) -> &str {
        match self {
            ResponseConfig::Named(n) => n,
            ResponseConfig::Profile(_) => "custom",
        }
    }
}

/// A string or a table, with serde's own errors for the table (an
/// untagged enum would only say "did not match any variant").
impl schemars::JsonSchema for ResponseConfig {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Response".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = super::response::profile::BUILTIN.iter().map(|(name, _)| *name).collect();
        let profile = generator.subschema_for::<Profile>();
        schemars::json_schema!({
            "description": "How the backend's answer is read: a built-in profile's name, or a profile table.",
            "anyOf": [{ "type": "string", "enum": names }, profile]
        })
    }
}

impl<'de> Deserialize<'de> for ResponseConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = ResponseConfig;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a built-in profile's name or a profile table")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ResponseConfig, E> {
                Ok(ResponseConfig::Named(v.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<ResponseConfig, A::Error> {
                Profile::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(|p| ResponseConfig::Profile(Box::new(p)))
            }
        }
        d.deserialize_any(V)
    }
}

/// How a request's events are laid out.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    /// One JSON document per line.
    #[default]
    Ndjson,
    /// One JSON array.
    JsonArray,
}

/// What the sink sends for each event.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Payload {
    /// `{"id": …, "timestamp": …, "event": {…}}`, as the file sink writes.
    #[default]
    Envelope,
    /// The event object itself, with the event id (and the timestamp,
    /// when named) added as top-level fields: a row for a table.
    Event {
        /// The field the event id is written to.
        #[serde(default = "default_id_field")]
        id_field: String,
        /// The field the event's time (RFC 3339) is written to; unset,
        /// none is added.
        timestamp_field: Option<String>,
    },
}

pub(crate) fn default_id_field() -> String {
    "event_id".into()
}

/// How a batch is cut into requests.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchConfig {
    /// Events per request at most. A partition's batch larger than this is
    /// sent as several requests, concurrently up to `request.concurrency`.
    /// Batching by time is the source's `linger`.
    #[serde(default = "default_max_records")]
    pub max_records: usize,
    /// Body bytes per request at most, before compression; one event
    /// larger than this goes alone.
    #[schemars(with = "crate::units::SizeText")]
    #[serde(default = "default_max_bytes", deserialize_with = "crate::units::bytes")]
    pub max_bytes: u64,
}

impl Default for BatchConfig {
    fn default() -> Self {
        BatchConfig { max_records: default_max_records(), max_bytes: default_max_bytes() }
    }
}

fn default_max_records() -> usize {
    1000
}
fn default_max_bytes() -> u64 {
    4 << 20
}

/// How requests are sent: their timeouts, how many at once, compression.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestConfig {
    /// The whole request, body and answer: past it the answer is lost and
    /// the events are sent again (the backend may have taken them).
    #[schemars(with = "crate::units::DurationText")]
    #[serde(default = "default_timeout", deserialize_with = "crate::units::duration")]
    pub timeout: Duration,
    /// Establishing the connection (TCP and TLS); past it the request
    /// failed, a systemic fault.
    #[schemars(with = "crate::units::DurationText")]
    #[serde(default = "default_connect_timeout", deserialize_with = "crate::units::duration")]
    pub connect_timeout: Duration,
    /// Requests in flight at once, over all partitions.
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
    /// The request body's compression (`Content-Encoding: gzip`).
    #[serde(default)]
    pub compression: Compression,
}

impl Default for RequestConfig {
    fn default() -> Self {
        RequestConfig {
            timeout: default_timeout(),
            connect_timeout: default_connect_timeout(),
            concurrency: default_concurrency(),
            compression: Compression::None,
        }
    }
}

fn default_timeout() -> Duration {
    Duration::from_secs(30)
}
fn default_connect_timeout() -> Duration {
    Duration::from_secs(5)
}
fn default_concurrency() -> usize {
    4
}

/// How a request body is compressed.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Compression {
    /// Uncompressed.
    #[default]
    None,
    /// Fewer bytes on the wire, for some CPU.
    Gzip,
}

impl HttpSinkConfig {
    /// Every problem beyond the types, keyed under `[sink]`.
    pub(crate) fn validate(&self, p: &mut Problems) {
        p.add_first(self.first_problem());
        self.sending.validate(p);
        self.guard.validate(p);
    }

    /// What the URL, headers, classifier and profile say, up to the first
    /// problem: the checks after a profile's depend on which it is.
    fn first_problem(&self) -> Result<(), (String, String)> {
        let url = url::Url::parse(&self.url).map_err(|e| ("url".to_string(), format!("{:?}: {e}", self.url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(("url".into(), format!("{:?}: only http and https", self.url)));
        }
        for (name, value) in &self.headers {
            http::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| (format!("headers.{name}"), e.to_string()))?;
            http::header::HeaderValue::from_str(value).map_err(|e| (format!("headers.{name}"), e.to_string()))?;
        }
        for (name, var) in &self.headers_from_env {
            http::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| (format!("headers_from_env.{name}"), e.to_string()))?;
            match std::env::var(var) {
                Ok(v) if http::header::HeaderValue::from_str(&v).is_ok() => {}
                Ok(_) => {
                    return Err((format!("headers_from_env.{name}"), format!("${var} is not a valid header value")));
                }
                Err(_) => return Err((format!("headers_from_env.{name}"), format!("${var} is not set"))),
            }
        }
        if let Some(BasicAuth { password_env: Some(var), .. }) = &self.basic_auth
            && std::env::var(var).is_err()
        {
            return Err(("basic_auth.password_env".into(), format!("${var} is not set")));
        }
        if let Some(c) = &self.classifier {
            c.first_problem().map_err(|(key, message)| (format!("classifier.{key}"), message))?;
        }
        let profile = self.response.profile().map_err(|e| ("response".to_string(), e.to_string()))?;
        profile.first_problem().map_err(|(key, message)| (format!("response.{key}"), message))?;
        if profile.render == Render::LokiPush {
            match &self.labels {
                Some(l) => l.first_problem()?,
                None => {
                    return Err((
                        "labels".into(),
                        "required with response = \"loki\": [sink.labels] static = { job = \"sluice\" }, fields = [\"level\"]".into(),
                    ));
                }
            }
        }
        if profile.render == Render::ElasticsearchBulk && self.index.is_none() {
            return Err((
                "index".into(),
                format!("required with response = {:?} (the _bulk index)", self.response.name()),
            ));
        }
        Ok(())
    }
}
