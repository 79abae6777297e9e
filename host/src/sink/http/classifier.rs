//! `[sink.classifier]`: a classifier plugin reads the backend's answers
//! instead of a profile's rules (`wit/classifier.wit`). The profile named
//! by `response` still shapes the request body; the plugin reads what
//! comes back; the fixed rules (`response::fixed`) come after both.
//!
//! The plugin sees what the operator lets it: the headers listed here,
//! the body up to `max_body_bytes`. Its fault (a trap, a timeout, a
//! malformed reply) is never a record's: the answer is systemic, the
//! records wait behind the breaker, and the next response gets a fresh
//! instance.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::response::fixed::{self, Evidence};
use super::response::profile::Profile;
use super::response::{self, Response, Ruling};
use crate::plugin::classified::{Answered, Asked, Fate, Reply};
use crate::plugin::classifier::Classifier;
use crate::plugin::engine::Runtime;
use crate::plugin::pin::{self, Pin, Refused};
use crate::plugin::spec::{PluginLimits, PluginSpec};
use crate::sink::Answer;

/// `[sink.classifier]`: a plugin that reads the backend's answers.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClassifierConfig {
    /// The component (`.wasm`), relative to the config file's folder.
    pub path: PathBuf,
    /// Its name in logs and reasons; the file's stem by default.
    pub name: Option<String>,
    /// `"blake3:<hex>"` or `"sha256:<hex>"`: the file must have this
    /// digest or the start stops, as for `[[plugins]]` (`sluice plugin
    /// inspect` prints the line).
    pub digest: Option<String>,
    /// The plugin's own table, handed to its `init` as JSON.
    #[serde(default = "empty_table")]
    pub config: serde_json::Value,
    /// Response headers the plugin sees (case-insensitive). None by
    /// default: a header can carry what the plugin has no need of.
    #[serde(default)]
    pub headers: Vec<String>,
    /// The most of a body the plugin sees; the rest is cut and the
    /// response marked truncated.
    #[schemars(with = "crate::units::SizeText")]
    #[serde(default = "default_max_body", deserialize_with = "crate::units::bytes")]
    pub max_body_bytes: u64,
    /// Memory cap of one instance.
    #[schemars(with = "crate::units::SizeText")]
    #[serde(default = "default_memory", deserialize_with = "crate::units::bytes")]
    pub memory: u64,
    /// Wall time one `classify` may take; past it the answer is systemic.
    #[schemars(with = "crate::units::DurationText")]
    #[serde(default = "default_time_limit", deserialize_with = "crate::units::duration")]
    pub time_limit: Duration,
}

impl Default for ClassifierConfig {
    fn default() -> Self {
        ClassifierConfig {
            path: PathBuf::new(),
            name: None,
            digest: None,
            config: empty_table(),
            headers: Vec::new(),
            max_body_bytes: default_max_body(),
            memory: default_memory(),
            time_limit: default_time_limit(),
        }
    }
}

fn empty_table() -> serde_json::Value {
    serde_json::json!({})
}

fn default_max_body() -> u64 {
    1 << 20
}

fn default_memory() -> u64 {
    64 << 20
}

fn default_time_limit() -> Duration {
    Duration::from_secs(1)
}

impl ClassifierConfig {
    /// The first problem, as `(key under [sink.classifier], message)`.
    pub(crate) fn first_problem(&self) -> Result<(), (String, String)> {
        if !self.path.is_file() {
            return Err(("path".into(), format!("{} is not a file", self.path.display())));
        }
        for h in &self.headers {
            http::header::HeaderName::from_bytes(h.as_bytes())
                .map_err(|e| ("headers".to_string(), format!("{h:?}: {e}")))?;
        }
        if !self.config.is_object() {
            return Err(("config".into(), "must be a table".into()));
        }
        if self.time_limit.is_zero() {
            return Err(("time_limit".into(), "must be more than 0".into()));
        }
        if let Some(d) = &self.digest {
            d.parse::<Pin>().map_err(|e| ("digest".to_string(), e))?;
        }
        Ok(())
    }

    pub(crate) fn absolutize(&mut self, abs: &dyn Fn(&Path) -> PathBuf) {
        self.path = abs(&self.path);
    }

    fn spec(&self) -> PluginSpec {
        let mut spec = PluginSpec::from_path(&self.path);
        if let Some(name) = &self.name {
            spec.name = name.clone();
        }
        spec.config = self.config.clone();
        spec.limits = PluginLimits {
            memory_bytes: usize::try_from(self.memory).unwrap_or(usize::MAX),
            time_per_batch: self.time_limit,
            ..PluginLimits::default()
        };
        spec
    }

    /// Load into the run's plugin runtime (its cache, its clock), compile
    /// or take from the cache, and initialise.
    pub fn build(&self, runtime: &Runtime) -> Result<PluginReader, ClassifierError> {
        let pin = self.digest.as_deref().map(str::parse::<Pin>).transpose().map_err(ClassifierError::Digest)?;
        let load = || runtime.load(&self.spec());
        let loaded =
            pin::verify(pin.as_ref(), &self.path, load, |loaded| loaded.id().digest).map_err(
                |refused| match refused {
                    Refused::Mismatch { pinned, found } => {
                        ClassifierError::Mismatch { path: self.path.display().to_string(), pinned, found }
                    }
                    Refused::Load(e) => ClassifierError::Plugin(e),
                },
            )?;
        let classifier = Classifier::new(loaded)?;
        Ok(PluginReader {
            classifier,
            headers: self.headers.iter().map(|h| h.to_ascii_lowercase()).collect(),
            max_body: usize::try_from(self.max_body_bytes).unwrap_or(usize::MAX),
        })
    }
}

/// Why a sink's classifier does not start.
#[derive(Debug, thiserror::Error)]
pub enum ClassifierError {
    /// `digest` is not a pin (`blake3:<hex>` or `sha256:<hex>`).
    #[error("digest: {0}")]
    Digest(String),
    /// The file is not the one pinned.
    #[error("{path} has digest {found}, not the {pinned} that digest pins: the file changed since it was pinned")]
    Mismatch {
        /// The component's path.
        path: String,
        /// The configured digest.
        pinned: Pin,
        /// The file's digest, in the same algorithm.
        found: Pin,
    },
    /// The component does not load.
    #[error(transparent)]
    Plugin(#[from] crate::plugin::error::PluginError),
}

/// A classifier ready to read responses.
pub struct PluginReader {
    classifier: Classifier,
    headers: Vec<String>,
    max_body: usize,
}

/// Who reads a sink's answers: a profile's rules or a plugin.
pub(crate) enum Reader {
    Profile(Box<Profile>),
    Plugin(Box<PluginReader>),
}

impl Reader {
    pub(crate) fn profile(p: Profile) -> Reader {
        Reader::Profile(Box::new(p))
    }

    /// The reply to `sent`, held to the fixed rules.
    pub(crate) fn read(&self, sent: &Asked<'_>, r: &Response<'_>) -> Ruling {
        match self {
            Reader::Profile(p) => {
                let request = response::classify::Request { ids: sent.ids, times: sent.timestamps, texts: sent.texts };
                response::classify::classify_request(p, &request, r)
            }
            Reader::Plugin(p) => p.read(sent, r),
        }
    }
}

impl PluginReader {
    pub(crate) fn name(&self) -> String {
        self.classifier.id().to_string()
    }

    /// The plugin's reply to `sent`, held to the fixed rules; a fault is
    /// systemic (the backend's answer is unread, so nothing may be
    /// concluded of a record).
    pub fn read(&self, sent: &Asked<'_>, r: &Response<'_>) -> Ruling {
        let n = sent.ids.len();
        let headers: Vec<(String, String)> = self
            .headers
            .iter()
            .filter_map(|h| {
                r.headers.get(h.as_str()).map(|v| (h.clone(), String::from_utf8_lossy(v.as_bytes()).into()))
            })
            .collect();
        let truncated = r.body.len() > self.max_body;
        let answered = Answered {
            status: r.status,
            headers: &headers,
            body: &r.body[..r.body.len().min(self.max_body)],
            truncated,
        };
        let (reply, evidence) = match self.classifier.classify(sent, &answered) {
            Ok(said) => lift(said, n),
            Err(fault) => (
                Ruling::Systemic(format!(
                    "HTTP {}: classifier {} faulted, so the answer is unread: {fault}",
                    r.status,
                    self.classifier.id()
                )),
                Evidence::Request,
            ),
        };
        fixed::enforce(r.status, n, reply, evidence)
    }
}

/// A plugin's reply as the sink's: one fate for all is the request's
/// evidence; fates per record, a split or a named row are the body's
/// (the plugin read it).
fn lift(said: Reply, n: usize) -> (Ruling, Evidence) {
    let answer = |f: Fate| match f {
        Fate::Accepted => Answer::Accepted,
        Fate::Duplicate => Answer::Duplicate,
        Fate::Retry(r) => Answer::Retry(r),
        Fate::Reject(r) => Answer::Rejected(r),
        Fate::Systemic(r) => Answer::Systemic(r),
    };
    match said {
        Reply::Each(fates) => (Ruling::Answers(fates.into_iter().map(answer).collect()), Evidence::PerRecord),
        Reply::All(Fate::Systemic(r)) => (Ruling::Systemic(r), Evidence::Request),
        Reply::All(f) => (Ruling::Answers(vec![answer(f); n]), Evidence::Request),
        Reply::Split(r) => (Ruling::Split(r), Evidence::PerRecord),
        Reply::BadRow { row, reason } => (Ruling::BadRow { row, reason, taken_before: false }, Evidence::PerRecord),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(said: Reply, status: u16, n: usize) -> Ruling {
        let (reply, evidence) = lift(said, n);
        fixed::enforce(status, n, reply, evidence)
    }

    #[test]
    fn a_plugins_reply_is_held_to_the_fixed_rules() {
        let each = || Reply::Each(vec![Fate::Accepted, Fate::Reject("bad".into())]);
        // Per-record fates on a 200 stand; on a 404 or 503 nothing a
        // plugin says makes a record bad.
        assert_eq!(held(each(), 200, 2), Ruling::Answers(vec![Answer::Accepted, Answer::Rejected("bad".into())]));
        for status in [301, 401, 403, 404, 405, 415, 429, 500, 503] {
            assert!(matches!(held(each(), status, 2), Ruling::Systemic(_)), "{status}");
            assert!(matches!(held(Reply::All(Fate::Reject("x".into())), status, 2), Ruling::Systemic(_)), "{status}");
            assert!(matches!(held(Reply::Split("x".into()), status, 2), Ruling::Systemic(_)), "{status}");
        }
        // A wrong count, or a row never sent, is the plugin's fault.
        assert!(
            matches!(held(Reply::Each(vec![Fate::Accepted]), 200, 2), Ruling::Systemic(r) if r.contains("accounts for 1"))
        );
        assert!(matches!(held(Reply::BadRow { row: 2, reason: "r".into() }, 400, 2), Ruling::Systemic(_)));
        // A split the plugin read from a 200's body is evidence; so is a row.
        assert_eq!(held(Reply::Split("2 failed".into()), 200, 4), Ruling::Split("2 failed".into()));
        assert_eq!(
            held(Reply::BadRow { row: 1, reason: "r".into() }, 400, 2),
            Ruling::BadRow { row: 1, reason: "r".into(), taken_before: false }
        );
        // One fate for all: the systemic one is a systemic reply.
        assert_eq!(held(Reply::All(Fate::Systemic("busy".into())), 200, 3), Ruling::Systemic("busy".into()));
        assert_eq!(held(Reply::All(Fate::Duplicate), 200, 2), Ruling::Answers(vec![Answer::Duplicate; 2]));
    }

    #[test]
    fn the_config_refuses_what_cannot_work_naming_the_key() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let wasm = dir.path().join("c.wasm");
        std::fs::write(&wasm, b"\0asm").unwrap_or_else(|e| panic!("{e}"));
        let with = |f: &dyn Fn(&mut ClassifierConfig)| {
            let mut c = ClassifierConfig { path: wasm.clone(), ..ClassifierConfig::default() };
            f(&mut c);
            c.first_problem().err().map(|(key, _)| key)
        };
        assert_eq!(with(&|_| {}), None);
        assert_eq!(with(&|c| c.path = dir.path().join("missing.wasm")), Some("path".into()));
        assert_eq!(with(&|c| c.headers = vec!["bad header".into()]), Some("headers".into()));
        assert_eq!(with(&|c| c.config = serde_json::json!([1])), Some("config".into()));
        assert_eq!(with(&|c| c.time_limit = Duration::ZERO), Some("time_limit".into()));
        assert_eq!(with(&|c| c.digest = Some("md5:00".into())), Some("digest".into()));
        let unknown = toml::from_str::<ClassifierConfig>("path = \"x.wasm\"\nheader = [\"a\"]\n");
        assert!(unknown.is_err_and(|e| e.to_string().contains("unknown field `header`")));
    }
}
