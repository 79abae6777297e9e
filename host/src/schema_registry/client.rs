//! The registry's REST API, as much of it as sluice needs:
//! `GET /schemas/ids/{id}` to decode (and `GET /subjects/{s}/versions/{v}`
//! for the schemas it references), `POST /subjects/{subject}/versions`
//! (or `POST /subjects/{subject}`, a look-up) for a Kafka sink's
//! `[sink.encoding]`, and `GET /subjects` for `check --connect`. Its own
//! small runtime, as the HTTP sink's: the driver's front and the sink that
//! ask are plain threads.

use std::time::Duration;

use super::cache::{ReferencedSchema, RegisteredSchema};
use super::config::{RegistryAuth, SchemaRegistryConfig};
use super::resolver::{Fetch, Fetched, RegistryError};

/// Confluent's error code for "schema not found"; a 404 without it is a
/// wrong URL, not a missing schema.
const SCHEMA_NOT_FOUND: u64 = 40403;

/// A client of one registry.
pub(crate) struct RegistryClient {
    client: reqwest::Client,
    runtime: tokio::runtime::Runtime,
    base: url::Url,
    auth: Option<(String, Option<String>)>,
    /// The URL as logs show it: no credentials.
    shown: String,
}

/// Why a client could not be built: the config is at fault.
#[derive(Debug, thiserror::Error)]
#[error("[schema_registry] {key}: {message}")]
pub struct ClientError {
    key: &'static str,
    message: String,
}

impl RegistryClient {
    pub(crate) fn new(cfg: &SchemaRegistryConfig) -> Result<RegistryClient, ClientError> {
        let err = |key, message: String| ClientError { key, message };
        let mut base = url::Url::parse(&cfg.url).map_err(|e| err("url", e.to_string()))?;
        // `<url>/schemas/…` whether or not the URL ends in a slash.
        if !base.path().ends_with('/') {
            base.set_path(&format!("{}/", base.path()));
        }
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::limited(3))
            .timeout(cfg.timeout)
            .connect_timeout(cfg.timeout.min(Duration::from_secs(5)));
        if let Some(path) = &cfg.ca_file {
            let pem = std::fs::read(path).map_err(|e| err("ca_file", format!("{}: {e}", path.display())))?;
            let cert = reqwest::Certificate::from_pem(&pem)
                .map_err(|e| err("ca_file", format!("{}: not a PEM certificate: {e}", path.display())))?;
            builder = builder.add_root_certificate(cert);
        }
        let client = builder.build().map_err(|e| err("url", e.to_string()))?;
        let auth = match &cfg.basic_auth {
            Some(RegistryAuth { user, password_env }) => {
                let password = match password_env {
                    Some(var) => Some(
                        std::env::var(var).map_err(|_| err("basic_auth.password_env", format!("${var} is not set")))?,
                    ),
                    None => None,
                };
                Some((user.clone(), password))
            }
            None => None,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| err("url", format!("start the registry client's runtime: {e}")))?;
        Ok(RegistryClient { client, runtime, base, auth, shown: cfg.shown_url() })
    }

    /// `request` with the config's credentials, if it has them.
    fn authed(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.auth {
            Some((user, password)) => request.basic_auth(user, password.as_ref()),
            None => request,
        }
    }

    async fn get(&self, id: u32) -> Result<Fetched, RegistryError> {
        let unreachable = |message: String| RegistryError::Unreachable { url: self.shown.clone(), message };
        let url = self.base.join(&format!("schemas/ids/{id}")).map_err(|e| unreachable(e.to_string()))?;
        let request = self.authed(self.client.get(url)).header("accept", "application/vnd.schemaregistry.v1+json");
        let response = request.send().await.map_err(|e| unreachable(error_chain(&e)))?;
        let status = response.status().as_u16();
        let body = response.bytes().await.map_err(|e| unreachable(error_chain(&e)))?;
        let answer = |status| RegistryError::Answer {
            url: self.shown.clone(),
            id,
            status,
            body: String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned(),
        };
        match status {
            200 => {
                let answered = serde_json::from_slice::<Answered>(&body).map_err(|_| answer(status))?;
                let references = self.referenced(id, answered.references).await?;
                Ok(Fetched::Found(RegisteredSchema {
                    schema_type: answered.schema_type,
                    schema: answered.schema,
                    references,
                }))
            }
            404 => {
                let code = serde_json::from_slice::<serde_json::Value>(&body)
                    .ok()
                    .and_then(|v| v.get("error_code").and_then(serde_json::Value::as_u64));
                if code == Some(SCHEMA_NOT_FOUND) { Ok(Fetched::Unknown) } else { Err(answer(status)) }
            }
            _ => Err(answer(status)),
        }
    }
}

/// A schema as the API answers it, by id or by subject and version.
#[derive(serde::Deserialize)]
struct Answered {
    #[serde(rename = "schemaType", default = "super::cache::avro")]
    schema_type: String,
    schema: String,
    #[serde(default)]
    references: Vec<Pointer>,
}

/// A schema reference: the name the schema uses for it, and where the
/// registry keeps it.
#[derive(serde::Deserialize)]
struct Pointer {
    name: String,
    subject: String,
    version: i64,
}

/// How many schemas one schema's references may reach (each is fetched
/// and kept with it): more is taken for a mistake. A cycle ends where a
/// name comes round again.
const MAX_REFERENCES: usize = 256;

impl RegistryClient {
    /// Every schema `pointers` reach, through their own references too,
    /// each before any that needs it (depth first, a schema after what it
    /// references), each name once. A reference the registry cannot
    /// answer for is systemic, like the schema's own fetch: the batch
    /// waits. (Confluent's registry refuses to delete a schema another
    /// references.)
    async fn referenced(&self, id: u32, pointers: Vec<Pointer>) -> Result<Vec<ReferencedSchema>, RegistryError> {
        enum Step {
            Visit(Pointer),
            Keep(String, String),
        }
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut steps: Vec<Step> = pointers.into_iter().rev().map(Step::Visit).collect();
        while let Some(step) = steps.pop() {
            match step {
                Step::Visit(p) => {
                    if !seen.insert(p.name.clone()) {
                        continue;
                    }
                    if seen.len() > MAX_REFERENCES {
                        return Err(RegistryError::Answer {
                            url: self.shown.clone(),
                            id,
                            status: 200,
                            body: format!("its references reach more than {MAX_REFERENCES} schemas"),
                        });
                    }
                    let answered = self.version(&p.subject, p.version).await?;
                    steps.push(Step::Keep(p.name, answered.schema));
                    steps.extend(answered.references.into_iter().rev().map(Step::Visit));
                }
                Step::Keep(name, schema) => out.push(ReferencedSchema { name, schema }),
            }
        }
        Ok(out)
    }

    /// The registry's URL with `segments` after it, each one path segment
    /// (a subject's `/` and the like escaped).
    fn url_of(&self, segments: &[&str]) -> Result<url::Url, RegistryError> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|_| RegistryError::Unreachable { url: self.shown.clone(), message: "not a base URL".into() })?
            .pop_if_empty()
            .extend(segments);
        Ok(url)
    }

    /// `GET /subjects/{subject}/versions/{version}`.
    async fn version(&self, subject: &str, version: i64) -> Result<Answered, RegistryError> {
        let unreachable = |message: String| RegistryError::Unreachable { url: self.shown.clone(), message };
        let url = self.url_of(&["subjects", subject, "versions", &version.to_string()])?;
        let request = self.authed(self.client.get(url)).header("accept", "application/vnd.schemaregistry.v1+json");
        let response = request.send().await.map_err(|e| unreachable(error_chain(&e)))?;
        let status = response.status().as_u16();
        let body = response.bytes().await.map_err(|e| unreachable(error_chain(&e)))?;
        let refused = || RegistryError::Subject {
            url: self.shown.clone(),
            subject: format!("{subject} (version {version}, a schema reference)"),
            status,
            body: String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned(),
        };
        if status != 200 {
            return Err(refused());
        }
        serde_json::from_slice::<Answered>(&body).map_err(|_| refused())
    }

    /// The id of `schema` under `subject`: registered there (the registry
    /// answers the existing id for a schema it has), or with `register`
    /// false only looked up. For a producer: a Kafka sink's
    /// `[sink.encoding]`. Every failure is the registry's, or the
    /// config's (a schema the subject's compatibility rule refuses, 409):
    /// never an event's.
    pub(crate) fn subject_id(
        &self,
        subject: &str,
        schema_type: &str,
        schema: &str,
        register: bool,
    ) -> Result<u32, RegistryError> {
        self.runtime.block_on(async {
            let unreachable = |message: String| RegistryError::Unreachable { url: self.shown.clone(), message };
            let url = if register {
                self.url_of(&["subjects", subject, "versions"])?
            } else {
                self.url_of(&["subjects", subject])?
            };
            let mut body = serde_json::json!({ "schema": schema });
            if schema_type != "AVRO" {
                body["schemaType"] = schema_type.into();
            }
            let request = self
                .authed(self.client.post(url))
                .header("content-type", "application/vnd.schemaregistry.v1+json")
                .body(body.to_string());
            let response = request.send().await.map_err(|e| unreachable(error_chain(&e)))?;
            let status = response.status().as_u16();
            let bytes = response.bytes().await.map_err(|e| unreachable(error_chain(&e)))?;
            let answer = || RegistryError::Subject {
                url: self.shown.clone(),
                subject: subject.to_string(),
                status,
                body: String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into_owned(),
            };
            if status != 200 {
                return Err(answer());
            }
            serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .and_then(|v| v.get("id").and_then(serde_json::Value::as_u64))
                .and_then(|id| u32::try_from(id).ok())
                .ok_or_else(answer)
        })
    }

    /// `sluice check --connect`: the registry answers `GET /subjects`
    /// with these credentials; how many subjects it holds.
    pub(crate) fn probe(&self) -> Result<String, String> {
        self.runtime.block_on(async {
            let url = self.base.join("subjects").map_err(|e| e.to_string())?;
            let request = self.authed(self.client.get(url));
            let response = request.send().await.map_err(|e| error_chain(&e))?;
            let status = response.status();
            let body = response.bytes().await.map_err(|e| error_chain(&e))?;
            if !status.is_success() {
                return Err(format!("answered {status}: {}", String::from_utf8_lossy(&body[..body.len().min(200)])));
            }
            match serde_json::from_slice::<Vec<String>>(&body) {
                Ok(subjects) => Ok(format!("{} subjects", subjects.len())),
                Err(_) => Err("answered 200, but not with a list of subjects: is this a schema registry?".into()),
            }
        })
    }
}

/// An error with its causes: reqwest's own text is "error sending
/// request", the cause says "connection refused".
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

impl Fetch for RegistryClient {
    fn fetch(&self, id: u32) -> Result<Fetched, RegistryError> {
        self.runtime.block_on(self.get(id))
    }
}
