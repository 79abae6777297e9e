//! The HTTP sink's requests: chunking, concurrency, splitting a batch to
//! find bad events, and reading each answer with the sink's profile or
//! classifier.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use http::header::{CONTENT_ENCODING, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use super::body::{self, Framing};
use super::classifier::Reader;
use super::config::{Compression, Encoding, HttpSinkConfig, Method, Payload};
use super::response::profile::Profile;
use super::response::profile::Render;
use super::response::{self, Next, Response, Ruling};
use crate::delivery::Delivery;
use crate::plugin::classified::Asked;
use crate::sink::context::SinkContext;
use crate::sink::{Answer, Attempt, Sink, SinkError};

/// The HTTP sink (`http`, and `clickhouse` underneath): one request per
/// batch slice, its answer read per record by the response reader.
pub struct HttpSink {
    client: reqwest::Client,
    /// Requests run here; workers call in from their own threads.
    runtime: tokio::runtime::Runtime,
    url: url::Url,
    method: reqwest::Method,
    headers: HeaderMap,
    payload: Payload,
    /// The body's form, `Render::Lines` resolved from `encoding`.
    render: Render,
    profile: Profile,
    /// The profile's rules, or a classifier plugin (`[sink.classifier]`).
    reader: Reader,
    index: Option<String>,
    labels: Option<super::config::LabelsConfig>,
    max_records: usize,
    /// `batch.max_bytes`, lowered for good when the backend answers 413:
    /// its limit is learnt once, not found again by splitting every batch.
    max_bytes: std::sync::atomic::AtomicU64,
    compression: Compression,
    /// `request.concurrency`, shared by every partition.
    slots: Arc<tokio::sync::Semaphore>,
    name: String,
}

/// What a group of events came to: answers by position in the call's
/// batch, how many requests were answered or failed, how many were split,
/// and the longest `Retry-After` asked for.
#[derive(Default)]
struct Tally {
    answers: Vec<(usize, Answer)>,
    ok: u32,
    failed: u32,
    splits: u32,
    retry_after: Option<std::time::Duration>,
    /// Records the backend dropped unnamed in accepted requests, and why.
    dropped: u64,
    dropped_reason: Option<String>,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.answers.extend(other.answers);
        self.ok += other.ok;
        self.failed += other.failed;
        self.splits += other.splits;
        self.retry_after = self.retry_after.max(other.retry_after);
        self.dropped += other.dropped;
        self.dropped_reason = self.dropped_reason.take().or(other.dropped_reason);
    }
}

/// One answered request: what a reader needs to read it.
struct Answered {
    status: u16,
    headers: HeaderMap,
    body: bytes::Bytes,
    /// Each event's place in the request body, and the body's length.
    spans: Vec<(u32, u32)>,
    body_bytes: u64,
    /// The request body as framed (before compression), kept only for a
    /// profile that matches the records a backend quotes.
    framed: Option<bytes::Bytes>,
}

impl HttpSink {
    /// `name` labels metrics and logs (`http <url without query>`, or the
    /// preset's own).
    pub fn new(cfg: &HttpSinkConfig, name: Option<String>, ctx: SinkContext<'_>) -> Result<HttpSink, SinkError> {
        let setup = |message: String| SinkError::Setup { target: cfg.url.clone(), message };
        let url = url::Url::parse(&cfg.url).map_err(|e| setup(e.to_string()))?;
        let mut headers = HeaderMap::new();
        for (k, v) in &cfg.headers {
            let name = HeaderName::from_bytes(k.as_bytes()).map_err(|e| setup(format!("header {k}: {e}")))?;
            headers.insert(name, HeaderValue::from_str(v).map_err(|e| setup(format!("header {k}: {e}")))?);
        }
        for (k, var) in &cfg.headers_from_env {
            let name = HeaderName::from_bytes(k.as_bytes()).map_err(|e| setup(format!("header {k}: {e}")))?;
            let value = std::env::var(var).map_err(|_| setup(format!("header {k}: ${var} is not set")))?;
            let mut value = HeaderValue::from_str(&value)
                .map_err(|_| setup(format!("header {k}: ${var} is not a header value")))?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        if let Some(auth) = &cfg.basic_auth {
            use base64::Engine;
            let password = match &auth.password_env {
                Some(var) => std::env::var(var).map_err(|_| setup(format!("basic_auth: ${var} is not set")))?,
                None => String::new(),
            };
            let token = base64::engine::general_purpose::STANDARD.encode(format!("{}:{password}", auth.user));
            let mut value = HeaderValue::from_str(&format!("Basic {token}"))
                .map_err(|_| setup("basic_auth: not a header value".into()))?;
            value.set_sensitive(true);
            headers.insert(http::header::AUTHORIZATION, value);
        }
        let profile = cfg.response.profile().map_err(|e| setup(e.to_string()))?;
        let reader = match &cfg.classifier {
            Some(c) => Reader::Plugin(Box::new(c.build(ctx.plugins).map_err(|e| setup(format!("classifier: {e}")))?)),
            None => Reader::profile(profile.clone()),
        };
        let render = match (profile.render, cfg.encoding) {
            (Render::Lines, Encoding::Ndjson) => Render::Ndjson,
            (Render::Lines, Encoding::JsonArray) => Render::JsonArray,
            (r, _) => r,
        };
        let content_type = match render {
            Render::JsonArray | Render::OtlpJson | Render::SplunkHec | Render::Gelf | Render::LokiPush => {
                "application/json"
            }
            Render::Lines | Render::Ndjson | Render::ElasticsearchBulk => "application/x-ndjson",
        };
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        if cfg.sending.request.compression == Compression::Gzip {
            headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        let client = reqwest::Client::builder()
            // A redirected POST becomes a GET that may well answer 200:
            // "accepted" with the events nowhere. A 3xx is the backend's
            // failure (wrong URL); the operator fixes the config.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(cfg.sending.request.timeout)
            .connect_timeout(cfg.sending.request.connect_timeout)
            .pool_max_idle_per_host(cfg.sending.request.concurrency)
            .build()
            .map_err(|e| setup(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sluice-http")
            .enable_all()
            .build()
            .map_err(|e| setup(format!("start the request runtime: {e}")))?;
        let name = name.unwrap_or_else(|| {
            let mut shown = url.clone();
            shown.set_query(None);
            let _ = shown.set_password(None);
            format!("http {shown}")
        });
        Ok(HttpSink {
            client,
            runtime,
            url,
            method: match cfg.method {
                Method::Post => reqwest::Method::POST,
                Method::Put => reqwest::Method::PUT,
            },
            headers,
            payload: cfg.payload.clone(),
            render,
            profile,
            reader,
            index: cfg.index.clone(),
            labels: cfg.labels.clone(),
            max_records: cfg.sending.batch.max_records.max(1),
            max_bytes: std::sync::atomic::AtomicU64::new(cfg.sending.batch.max_bytes),
            compression: cfg.sending.request.compression,
            slots: Arc::new(tokio::sync::Semaphore::new(cfg.sending.request.concurrency.max(1))),
            name,
        })
    }

    fn framing(&self) -> Framing<'_> {
        Framing {
            render: self.render,
            payload: &self.payload,
            index: self.index.as_deref(),
            labels: self.labels.as_ref(),
        }
    }

    /// A request of `body_bytes` was answered 413: later requests stay
    /// under half of it, the size the split that follows sends (at least
    /// 1 KiB; a single event larger still goes alone). Never raised again:
    /// a backend's limit does not grow during a run.
    fn learn_limit(&self, body_bytes: u64) {
        use std::sync::atomic::Ordering;
        let to = (body_bytes / 2).max(1024);
        let from = self.max_bytes.fetch_min(to, Ordering::Relaxed);
        if to < from {
            crate::telemetry::InternalEvent::emit(&crate::sink::events::BatchBytesLowered {
                sink: &self.name,
                from,
                to,
            });
        }
    }

    /// Requests of at most `max_records` events and about `max_bytes`.
    fn chunks(&self, batch: &[Delivery]) -> Vec<Vec<usize>> {
        let max_bytes = self.max_bytes.load(std::sync::atomic::Ordering::Relaxed);
        let mut chunks = Vec::new();
        let mut current = Vec::new();
        let mut bytes = 0u64;
        for (i, d) in batch.iter().enumerate() {
            let size = (d.event().len() + d.id.len() + 64) as u64;
            if !current.is_empty() && (current.len() >= self.max_records || bytes + size > max_bytes) {
                chunks.push(std::mem::take(&mut current));
                bytes = 0;
            }
            current.push(i);
            bytes += size;
        }
        if !current.is_empty() {
            chunks.push(current);
        }
        chunks
    }

    /// One request; the body is built here so a retry of a subset frames
    /// only that subset.
    async fn send(&self, batch: &[Delivery], items: &[usize]) -> Result<Answered, String> {
        let events: Vec<&Delivery> = items.iter().map(|i| &batch[*i]).collect();
        let mut spans = Vec::new();
        let body = self.framing().body_with_spans(&events, &mut spans);
        let body_bytes = body.len() as u64;
        let quotes =
            matches!(&self.reader, Reader::Profile(p) if p.counts.as_ref().is_some_and(|c| c.documents.is_some()));
        let (body, framed) = if quotes {
            let framed = bytes::Bytes::from(body);
            (body::compress(framed.to_vec(), self.compression), Some(framed))
        } else {
            (body::compress(body, self.compression), None)
        };
        let _slot = self.slots.acquire().await.map_err(|e| e.to_string())?;
        let mut request = self.client.request(self.method.clone(), self.url.clone()).headers(self.headers.clone());
        if body.is_empty() {
            // The probe's empty body: without the header hyper sends none,
            // and ClickHouse refuses the request (411).
            request = request.header(http::header::CONTENT_LENGTH, 0);
        }
        let response = request.body(body).send().await.map_err(|e| describe_error(&e))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.bytes().await.map_err(|e| format!("HTTP {status}, body lost: {}", describe_error(&e)))?;
        Ok(Answered { status, headers, body, spans, body_bytes, framed })
    }

    /// Answers for `items`: one request, then as the reply demands,
    /// halves (to find bad events) or the remaining rows (after a bad row).
    fn resolve<'a>(
        &'a self,
        batch: &'a [Delivery],
        items: Vec<usize>,
        nth: u32,
    ) -> Pin<Box<dyn Future<Output = Tally> + Send + 'a>> {
        Box::pin(async move {
            let mut tally = Tally::default();
            let mut items = items;
            while !items.is_empty() {
                let reply = match self.send(batch, &items).await {
                    Ok(answered) => {
                        let waited = response::retry_after(&answered.headers, std::time::SystemTime::now());
                        tally.retry_after = tally.retry_after.max(waited);
                        let ids: Vec<&str> = items.iter().map(|i| batch[*i].id.as_str()).collect();
                        // Times only for a reader that matches by them.
                        let timestamps: Vec<Option<i64>> = match &self.reader {
                            Reader::Profile(p) if p.timed.is_none() => Vec::new(),
                            _ => items.iter().map(|i| batch[*i].timestamp).collect(),
                        };
                        // Texts only for a reader that matches quotes.
                        let texts: Vec<&[u8]> = answered.framed.as_ref().map_or_else(Vec::new, |framed| {
                            answered
                                .spans
                                .iter()
                                .map(|(start, len)| {
                                    framed.get(*start as usize..(*start + *len) as usize).unwrap_or(&[])
                                })
                                .collect()
                        });
                        if answered.status == 413 {
                            self.learn_limit(answered.body_bytes);
                        }
                        let sent = Asked {
                            ids: &ids,
                            timestamps: &timestamps,
                            spans: &answered.spans,
                            texts: &texts,
                            body_bytes: answered.body_bytes,
                            attempt: nth,
                        };
                        let r = Response { status: answered.status, headers: &answered.headers, body: &answered.body };
                        match &self.reader {
                            Reader::Profile(_) => self.reader.read(&sent, &r),
                            // A plugin's WASI (its stderr) blocks on a
                            // runtime of its own, which tokio refuses on
                            // a worker thread: this worker steps out of
                            // the pool while the plugin runs.
                            Reader::Plugin(_) => tokio::task::block_in_place(|| self.reader.read(&sent, &r)),
                        }
                    }
                    Err(e) => Ruling::Systemic(e),
                };
                // A systemic answer about the request or any item (a full
                // queue, a blocked index) is the backend's ill health: the
                // breaker counts the request as failed.
                let settled = response::settle(std::mem::take(&mut items), reply);
                if settled.failed {
                    tally.failed += 1;
                } else {
                    tally.ok += 1;
                }
                if let Some((dropped, reason)) = settled.dropped {
                    tally.dropped += dropped;
                    tally.dropped_reason.get_or_insert(reason);
                }
                tally.answers.extend(settled.answered);
                match settled.next {
                    Next::Done => break,
                    Next::Resend(rest) => items = rest,
                    Next::Halves(left, right) => {
                        tally.splits += 1;
                        let (a, b) = futures::join!(self.resolve(batch, left, nth), self.resolve(batch, right, nth));
                        tally.merge(a);
                        tally.merge(b);
                        break;
                    }
                }
            }
            tally
        })
    }
}

/// reqwest's errors name the URL (and so possibly a query with secrets):
/// say what happened, not where.
fn describe_error(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out (the backend may have taken it)"
    } else if e.is_connect() {
        "cannot connect"
    } else if e.is_body() || e.is_decode() {
        "connection lost mid-answer (the backend may have taken it)"
    } else if e.is_request() {
        "request failed (the backend may have taken it)"
    } else {
        "failed"
    };
    let mut source = std::error::Error::source(e);
    let mut detail = String::new();
    while let Some(s) = source {
        detail = s.to_string();
        source = s.source();
    }
    if detail.is_empty() { kind.to_string() } else { format!("{kind}: {detail}") }
}

impl Sink for HttpSink {
    fn deliver(&self, batch: &[Delivery]) -> Result<Attempt, SinkError> {
        self.deliver_nth(batch, 1)
    }

    fn deliver_nth(&self, batch: &[Delivery], nth: u32) -> Result<Attempt, SinkError> {
        let chunks = self.chunks(batch);
        let tallies = self
            .runtime
            .block_on(futures::future::join_all(chunks.into_iter().map(|items| self.resolve(batch, items, nth))));
        let mut answers: Vec<Option<Answer>> = vec![None; batch.len()];
        let mut attempt = Attempt::default();
        for t in tallies {
            attempt.requests_ok += t.ok;
            attempt.requests_failed += t.failed;
            attempt.splits += t.splits;
            attempt.retry_after = attempt.retry_after.max(t.retry_after);
            attempt.dropped_by_backend += t.dropped;
            if attempt.dropped_reason.is_none() {
                attempt.dropped_reason = t.dropped_reason;
            }
            for (i, a) in t.answers {
                answers[i] = Some(a);
            }
        }
        attempt.answers =
            answers.into_iter().map(|a| a.unwrap_or_else(|| Answer::Systemic("no answer".into()))).collect();
        Ok(attempt)
    }

    fn describe(&self) -> String {
        self.name.clone()
    }

    /// A request that carries no event: the backend's answer says whether
    /// it is there and takes the credentials. ClickHouse runs the insert of
    /// no rows, so a missing table or a refused user fails here too.
    fn probe(&self) -> Result<String, String> {
        let Answered { status, body, .. } = self.runtime.block_on(self.send(&[], &[]))?;
        let said = || {
            let text = String::from_utf8_lossy(&body);
            let first = text.lines().next().unwrap_or("").trim();
            if first.is_empty() { String::new() } else { format!(": {}", first.chars().take(200).collect::<String>()) }
        };
        match status {
            200..=299 => Ok(format!("HTTP {status} to a request with no event")),
            401 | 403 | 407 => Err(format!("HTTP {status}: the credentials are refused{}", said())),
            500..=599 => Err(format!("HTTP {status}: the backend fails{}", said())),
            // Nothing would be delivered: say what the backend means.
            300..=399 | 404 | 405 | 415 => {
                let what = match status {
                    404 => "not found: the URL's path, or the table, index or stream it names, is missing",
                    405 => "method not allowed",
                    415 => "content type refused",
                    _ => "a redirect, which sluice does not follow: point url at its target",
                };
                Err(format!("HTTP {status}: {what}{}", said()))
            }
            _ if self.profile.strict_probe || response::fixed::systemic_status(status) => {
                Err(format!("HTTP {status}{}", said()))
            }
            // Backends that refuse an empty body (a bulk API) are still
            // there and took the credentials.
            _ => Ok(format!("HTTP {status} to a request with no event (reachable; credentials not refused)")),
        }
    }
}
