//! A scripted HTTP backend for the sink suites: what a real server cannot
//! be made to do on demand (answer 200 with failed counts, drop the
//! connection after storing, never answer). Built on hyper's server
//! directly: a scenario must be able to close a connection without a
//! response, which a framework's handlers do not allow.
//!
//! The backend keeps what it stored (the ids, in order, duplicates
//! included) and a log of every request, so a suite can explain every
//! duplicate by the request that caused it.

use std::io::Read;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

/// One request as the script sees it.
pub struct Req {
    /// 0 for the first request.
    pub n: usize,
    /// Since the backend started.
    pub at: Duration,
    pub ids: Vec<String>,
    /// The events (the `event` of an envelope, or the row itself).
    pub events: Vec<serde_json::Value>,
    /// Loki: each entry's time (ns) and its stream's labels, by position.
    pub loki: Vec<(i64, serde_json::Value)>,
    /// The body as sent (decompressed): what a backend quotes back.
    pub body: Vec<u8>,
    pub headers: hyper::HeaderMap,
}

/// What the backend does with a request.
pub struct Reaction {
    pub status: u16,
    pub body: String,
    /// Which events it keeps (by position), before answering.
    pub store: Vec<bool>,
    pub how: How,
    /// Headers of the answer (`Retry-After`).
    pub headers: Vec<(&'static str, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    Answer,
    /// Store, then close the connection without a response.
    Drop,
    /// Store, then never answer.
    Hang,
    /// Store, then answer after this long.
    Delay(Duration),
}

impl Reaction {
    pub fn ok(r: &Req) -> Reaction {
        Reaction {
            status: 200,
            body: String::new(),
            store: vec![true; r.ids.len()],
            how: How::Answer,
            headers: Vec::new(),
        }
    }
    pub fn fail(status: u16, body: &str, r: &Req) -> Reaction {
        Reaction { status, body: body.into(), store: vec![false; r.ids.len()], how: How::Answer, headers: Vec::new() }
    }

    /// With this header on the answer.
    pub fn header(mut self, name: &'static str, value: &str) -> Reaction {
        self.headers.push((name, value.to_string()));
        self
    }
}

#[derive(Debug, Clone)]
pub struct Logged {
    pub n: usize,
    pub at: Duration,
    pub ids: Vec<String>,
    pub status: u16,
    pub stored: Vec<String>,
    pub how: How,
}

#[derive(Default)]
pub struct Seen {
    pub requests: Vec<Logged>,
    /// Every stored id, in order; an id twice is a duplicate at the sink.
    pub stored: Vec<String>,
}

type Script = dyn Fn(&Req) -> Reaction + Send + Sync;

pub struct Backend {
    pub url: String,
    pub addr: SocketAddr,
    seen: Arc<Mutex<Seen>>,
    _runtime: tokio::runtime::Runtime,
}

impl Backend {
    pub fn start(script: impl Fn(&Req) -> Reaction + Send + Sync + 'static) -> Backend {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("backend runtime: {e}"));
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap_or_else(|e| panic!("backend bind: {e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let script: Arc<Script> = Arc::new(script);
        let started = Instant::now();
        let shared = seen.clone();
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let (seen, script) = (shared.clone(), script.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |req| handle(req, seen.clone(), script.clone(), started));
                    // A dropped connection ends here with an error: wanted.
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        Backend { url: format!("http://{addr}"), addr, seen, _runtime: runtime }
    }

    pub fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[derive(Debug)]
struct Dropped;
impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped by the script")
    }
}
impl std::error::Error for Dropped {}

async fn handle(
    req: Request<Incoming>,
    seen: Arc<Mutex<Seen>>,
    script: Arc<Script>,
    started: Instant,
) -> Result<Response<Full<Bytes>>, Dropped> {
    let headers = req.headers().clone();
    let gzip = headers.get("content-encoding").is_some_and(|v| v.as_bytes() == b"gzip");
    let raw = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let body = if gzip {
        let mut out = Vec::new();
        let _ = flate2::read::GzDecoder::new(&raw[..]).read_to_end(&mut out);
        out
    } else {
        raw.to_vec()
    };
    let (ids, events, loki) = parse_loki(&body).unwrap_or_else(|| {
        let (ids, events) = parse(&body);
        (ids, events, Vec::new())
    });
    let (r, reaction) = {
        let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
        let r = Req { n: s.requests.len(), at: started.elapsed(), ids, events, loki, headers, body };
        let reaction = script(&r);
        let stored: Vec<String> =
            r.ids.iter().zip(&reaction.store).filter(|(_, keep)| **keep).map(|(id, _)| id.clone()).collect();
        s.stored.extend(stored.iter().cloned());
        s.requests.push(Logged {
            n: r.n,
            at: r.at,
            ids: r.ids.clone(),
            status: reaction.status,
            stored,
            how: reaction.how,
        });
        (r, reaction)
    };
    drop(r);
    match reaction.how {
        How::Drop => return Err(Dropped),
        How::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        How::Delay(d) => tokio::time::sleep(d).await,
        How::Answer => {}
    }
    let mut response = Response::new(Full::new(Bytes::from(reaction.body)));
    *response.status_mut() = hyper::StatusCode::from_u16(reaction.status).unwrap_or(hyper::StatusCode::OK);
    for (name, value) in reaction.headers {
        if let Ok(v) = hyper::header::HeaderValue::from_str(&value) {
            response.headers_mut().insert(name, v);
        }
    }
    Ok(response)
}

/// A Loki push body: per entry its id, event (the line's JSON), time and
/// stream labels, in body order.
#[allow(clippy::type_complexity)]
fn parse_loki(body: &[u8]) -> Option<(Vec<String>, Vec<serde_json::Value>, Vec<(i64, serde_json::Value)>)> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let streams = v.get("streams")?.as_array()?;
    let (mut ids, mut events, mut loki) = (Vec::new(), Vec::new(), Vec::new());
    for stream in streams {
        for value in stream["values"].as_array()? {
            let ns: i64 = value[0].as_str()?.parse().ok()?;
            let line: serde_json::Value = serde_json::from_str(value[1].as_str()?).unwrap_or_default();
            let id = line.get("id").or_else(|| line.get("event_id")).and_then(|v| v.as_str()).unwrap_or_default();
            ids.push(id.to_string());
            events.push(line.get("event").cloned().unwrap_or(line.clone()));
            loki.push((ns, stream["stream"].clone()));
        }
    }
    Some((ids, events, loki))
}

/// Ids and events of a body: NDJSON or a JSON array of envelopes
/// (`{"id", "event"}`) or rows (`event_id`), an Elasticsearch bulk body,
/// Splunk HEC envelopes (`fields.event_id`) or OTLP/HTTP JSON logs (the
/// `event.id` attribute, the body's text).
fn parse(body: &[u8]) -> (Vec<String>, Vec<serde_json::Value>) {
    let docs: Vec<serde_json::Value> = match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(serde_json::Value::Array(a)) => a,
        Ok(v) if v.get("resourceLogs").is_some() => {
            let records = v["resourceLogs"][0]["scopeLogs"][0]["logRecords"].as_array().cloned().unwrap_or_default();
            return records
                .iter()
                .map(|r| {
                    let id = r["attributes"][0]["value"]["stringValue"].as_str().unwrap_or_default().to_string();
                    let text = r["body"]["stringValue"].as_str().unwrap_or_default();
                    (id, serde_json::from_str(text).unwrap_or_default())
                })
                .unzip();
        }
        _ => body
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap_or(serde_json::Value::Null))
            .collect(),
    };
    let mut ids = Vec::new();
    let mut events = Vec::new();
    let mut bulk_id: Option<String> = None;
    for d in docs {
        if let Some(action) = d.get("create") {
            bulk_id = action.get("_id").and_then(|v| v.as_str()).map(str::to_string);
            continue;
        }
        if let Some(id) = bulk_id.take() {
            ids.push(id);
            events.push(d.get("event").cloned().unwrap_or(d));
        } else if let Some(id) = d.pointer("/fields/event_id").and_then(|v| v.as_str()) {
            ids.push(id.to_string());
            events.push(d.get("event").cloned().unwrap_or_default());
        } else if let Some(id) = d.get("id").and_then(|v| v.as_str()) {
            ids.push(id.to_string());
            events.push(d.get("event").cloned().unwrap_or_default());
        } else {
            ids.push(d.get("event_id").and_then(|v| v.as_str()).unwrap_or_default().to_string());
            events.push(d);
        }
    }
    (ids, events)
}
