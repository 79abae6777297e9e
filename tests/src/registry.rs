//! A schema registry for the suites: Confluent's REST API (the part
//! producers and consumers use) over a `_schemas` topic on the suite's
//! broker, as Confluent's registry and Karapace keep theirs.
//!
//! Why not Karapace, which the issue names: it is not on PyPI (its
//! project page answers 404), nor on npm or in Debian, and Confluent's
//! and Apicurio's registries come from Maven Central or container images,
//! neither reachable here. So the suites run this one. It is not a dict
//! that answers: every schema is written to the topic (acknowledged by
//! the broker) before its id is answered, and a registry that starts reads
//! the topic from the beginning, so stopping it and starting it again is
//! a real outage and a real recovery from Kafka.
//!
//! Ids are global and one schema text has one id, as in Confluent's: the
//! same text registered under a second subject gets the first id.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use serde_json::{Value, json};

use crate::kafka::{client, create_topic, free_port, read_topic};

/// The topic the schemas live in.
pub const TOPIC: &str = "_schemas";

/// One registered schema, as the topic holds it.
#[derive(Clone, Debug)]
struct Stored {
    id: u32,
    subject: String,
    version: u32,
    schema_type: String,
    schema: String,
    /// Its schema references as the API takes them: `[{"name",
    /// "subject", "version"}]`.
    references: Value,
}

impl Stored {
    fn to_json(&self) -> Value {
        json!({"id": self.id, "subject": self.subject, "version": self.version,
               "schemaType": self.schema_type, "schema": self.schema, "references": self.references})
    }

    fn from_json(v: &Value) -> Option<Stored> {
        Some(Stored {
            id: u32::try_from(v["id"].as_u64()?).ok()?,
            subject: v["subject"].as_str()?.to_string(),
            version: u32::try_from(v["version"].as_u64()?).ok()?,
            schema_type: v["schemaType"].as_str()?.to_string(),
            schema: v["schema"].as_str()?.to_string(),
            references: v.get("references").cloned().unwrap_or_else(|| json!([])),
        })
    }
}

struct State {
    stored: Vec<Stored>,
    producer: ThreadedProducer<DefaultProducerContext>,
    /// `GET /schemas/ids/…` served, for a suite that counts fetches.
    fetches: u64,
}

/// A running registry (or a stopped one, between `stop` and `start`).
pub struct SchemaRegistry {
    brokers: String,
    port: u16,
    runtime: Option<tokio::runtime::Runtime>,
    state: Option<Arc<Mutex<State>>>,
}

impl SchemaRegistry {
    /// A registry on a free loopback port, its topic made on `brokers`.
    pub fn start(brokers: &str) -> SchemaRegistry {
        create_topic(brokers, TOPIC, 1);
        let mut r = SchemaRegistry { brokers: brokers.to_string(), port: free_port(), runtime: None, state: None };
        r.serve();
        r
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Down: the port refuses connections, as a registry whose process
    /// died. What it stored stays in the topic.
    pub fn stop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(5));
        }
        self.state = None;
    }

    /// Up again, on the same port, knowing only what the topic holds.
    pub fn restart(&mut self) {
        self.stop();
        self.serve();
    }

    /// How many schemas it has served by id since it last started.
    pub fn fetches(&self) -> u64 {
        self.state.as_ref().map_or(0, |s| lock(s).fetches)
    }

    /// Register `schema` under `subject` over the API, as a producer's
    /// serializer does; its id.
    pub fn register(&self, subject: &str, schema_type: &str, schema: &str) -> u32 {
        self.register_with_references(subject, schema_type, schema, json!([]))
    }

    /// [`SchemaRegistry::register`] of a schema that references others:
    /// `references` as the API takes them, `[{"name", "subject",
    /// "version"}]`.
    pub fn register_with_references(&self, subject: &str, schema_type: &str, schema: &str, references: Value) -> u32 {
        let body = json!({"schema": schema, "schemaType": schema_type, "references": references});
        let url = format!("{}/subjects/{subject}/versions", self.url());
        let answer = reqwest_blocking_post(&url, &body);
        let id = answer["id"].as_u64().unwrap_or_else(|| panic!("register {subject}: {answer}"));
        u32::try_from(id).unwrap_or_else(|e| panic!("{e}"))
    }

    fn serve(&mut self) {
        let stored = read_all(&self.brokers);
        let producer: ThreadedProducer<DefaultProducerContext> =
            client(&self.brokers).set("acks", "all").create().unwrap_or_else(|e| panic!("registry producer: {e}"));
        let state = Arc::new(Mutex::new(State { stored, producer, fetches: 0 }));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("registry runtime: {e}"));
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        // The port of a registry just stopped may linger a moment.
        let deadline = Instant::now() + Duration::from_secs(10);
        let listener = loop {
            match runtime.block_on(tokio::net::TcpListener::bind(addr)) {
                Ok(l) => break l,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("registry bind {addr}: {e}"),
            }
        };
        let shared = state.clone();
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let state = shared.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| handle(req, state.clone()));
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        self.runtime = Some(runtime);
        self.state = Some(state);
    }
}

impl Drop for SchemaRegistry {
    fn drop(&mut self) {
        self.stop();
    }
}

fn lock(s: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

/// Every schema the topic holds, from its beginning to its end now.
fn read_all(brokers: &str) -> Vec<Stored> {
    read_topic(brokers, TOPIC, 1)
        .into_iter()
        .map(|m| {
            let value: Value = serde_json::from_slice(&m.value)
                .unwrap_or_else(|e| panic!("registry: offset {} of {TOPIC} is not JSON: {e}", m.offset));
            Stored::from_json(&value).unwrap_or_else(|| panic!("registry: offset {}: {value}", m.offset))
        })
        .collect()
}

fn answer(status: StatusCode, body: Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r.headers_mut()
        .insert("content-type", hyper::header::HeaderValue::from_static("application/vnd.schemaregistry.v1+json"));
    r
}

fn not_found(code: u32, message: &str) -> Response<Full<Bytes>> {
    answer(StatusCode::NOT_FOUND, json!({"error_code": code, "message": message}))
}

/// The API's shape of a schema by id: `schemaType` left out for Avro,
/// `references` for a schema without any.
fn by_id(s: &Stored) -> Value {
    let mut v = json!({"schema": s.schema});
    if s.schema_type != "AVRO" {
        v["schemaType"] = json!(s.schema_type);
    }
    if s.references.as_array().is_some_and(|r| !r.is_empty()) {
        v["references"] = s.references.clone();
    }
    v
}

async fn handle(req: Request<Incoming>, state: Arc<Mutex<State>>) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let body = req.into_body().collect().await?.to_bytes();
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let response = match (method.as_str(), parts.as_slice()) {
        ("GET", ["schemas", "ids", id]) => {
            let mut st = lock(&state);
            st.fetches += 1;
            match id.parse::<u32>().ok().and_then(|id| st.stored.iter().find(|s| s.id == id)) {
                Some(s) => answer(StatusCode::OK, by_id(s)),
                None => not_found(40403, "Schema not found"),
            }
        }
        ("GET", ["subjects"]) => {
            let st = lock(&state);
            let mut subjects: Vec<&str> = st.stored.iter().map(|s| s.subject.as_str()).collect();
            subjects.dedup();
            answer(StatusCode::OK, json!(subjects))
        }
        ("GET", ["subjects", subject, "versions"]) => {
            let st = lock(&state);
            let versions: Vec<u32> = st.stored.iter().filter(|s| s.subject == *subject).map(|s| s.version).collect();
            if versions.is_empty() {
                not_found(40401, "Subject not found")
            } else {
                answer(StatusCode::OK, json!(versions))
            }
        }
        ("GET", ["subjects", subject, "versions", version]) => {
            let st = lock(&state);
            let of_subject = st.stored.iter().filter(|s| s.subject == *subject);
            let found = if *version == "latest" {
                of_subject.max_by_key(|s| s.version)
            } else {
                let v = version.parse::<u32>().ok();
                of_subject.into_iter().find(|s| Some(s.version) == v)
            };
            match found {
                Some(s) => answer(StatusCode::OK, s.to_json()),
                None => not_found(40402, "Version not found"),
            }
        }
        // Look-up: the version of this subject that holds this text.
        ("POST", ["subjects", subject]) => {
            let asked = serde_json::from_slice::<Value>(&body).unwrap_or_default();
            let schema = asked["schema"].as_str().unwrap_or_default();
            let st = lock(&state);
            match st.stored.iter().find(|s| s.subject == *subject && s.schema == schema) {
                Some(s) => answer(StatusCode::OK, s.to_json()),
                None if st.stored.iter().any(|s| s.subject == *subject) => not_found(40403, "Schema not found"),
                None => not_found(40401, "Subject not found"),
            }
        }
        ("POST", ["subjects", subject, "versions"]) => {
            let Ok(asked) = serde_json::from_slice::<Value>(&body) else {
                return Ok(answer(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    json!({"error_code": 42201, "message": "not JSON"}),
                ));
            };
            let schema = asked["schema"].as_str().unwrap_or_default().to_string();
            let schema_type = asked["schemaType"].as_str().unwrap_or("AVRO").to_string();
            let references = asked.get("references").cloned().unwrap_or_else(|| json!([]));
            let subject = subject.to_string();
            let state = state.clone();
            // The broker's acknowledgement is waited for off the runtime.
            let registered =
                tokio::task::spawn_blocking(move || register(&state, subject, schema_type, schema, references)).await;
            match registered {
                Ok(Ok(id)) => answer(StatusCode::OK, json!({"id": id})),
                Ok(Err(e)) => answer(StatusCode::INTERNAL_SERVER_ERROR, json!({"error_code": 50001, "message": e})),
                Err(e) => {
                    answer(StatusCode::INTERNAL_SERVER_ERROR, json!({"error_code": 50001, "message": e.to_string()}))
                }
            }
        }
        _ => not_found(404, "HTTP 404 Not Found"),
    };
    Ok(response)
}

/// Under `subject`: the id it already has for this text, else the id
/// another subject has for it, else a new one; written to the topic and
/// acknowledged before it is answered.
fn register(
    state: &Mutex<State>,
    subject: String,
    schema_type: String,
    schema: String,
    references: Value,
) -> Result<u32, String> {
    let mut st = lock(state);
    if let Some(s) = st.stored.iter().find(|s| s.subject == subject && s.schema == schema) {
        return Ok(s.id);
    }
    let id = match st.stored.iter().find(|s| s.schema == schema) {
        Some(s) => s.id,
        None => st.stored.iter().map(|s| s.id).max().unwrap_or(0) + 1,
    };
    let version = st.stored.iter().filter(|s| s.subject == subject).map(|s| s.version).max().unwrap_or(0) + 1;
    let stored = Stored { id, subject, version, schema_type, schema, references };
    let key = json!({"subject": stored.subject, "version": version}).to_string();
    let value = stored.to_json().to_string();
    st.producer
        .send(BaseRecord::to(TOPIC).key(&key).payload(&value))
        .map_err(|(e, _)| format!("write {TOPIC}: {e}"))?;
    st.producer.flush(Duration::from_secs(30)).map_err(|e| format!("flush {TOPIC}: {e}"))?;
    if st.producer.in_flight_count() != 0 {
        return Err(format!("{TOPIC}: the broker did not acknowledge the schema"));
    }
    st.stored.push(stored);
    Ok(id)
}

/// A POST from the suite's thread (the registry's own runtime serves it).
fn reqwest_blocking_post(url: &str, body: &Value) -> Value {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(async {
        let r = reqwest::Client::new()
            .post(url)
            .header("content-type", "application/vnd.schemaregistry.v1+json")
            .body(body.to_string())
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {url}: {e}"));
        let bytes = r.bytes().await.unwrap_or_else(|e| panic!("POST {url}: {e}"));
        serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("POST {url}: {e}"))
    })
}
