//! `/metrics`, `/health`, `/ready` over HTTP, on a thread of its own so
//! that a busy pipeline never delays a scrape or a probe; and, behind
//! `[api]` (`api.rs`), `/tap`, `/status.json` and the status page.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use futures::StreamExt as _;

use super::Health;
use super::api::{Access, Refusal};

#[derive(Debug, thiserror::Error)]
pub(crate) enum ServerError {
    #[error("metrics.listen {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("metrics: another metrics recorder is installed in this process")]
    Recorder,
}

/// The pipelines whose health an endpoint answers for, each by its name
/// when the process runs several (`labels`): a reload runs a new pipeline
/// behind the same endpoint, in its predecessor's place.
type Current = Arc<RwLock<Vec<(Option<Arc<str>>, Arc<Health>)>>>;

/// Who may read the closed endpoints: a reload may change it.
type Gate = Arc<RwLock<Access>>;

/// Endpoints already serving in this process, by the address asked for.
static SERVING: Mutex<Vec<(SocketAddr, SocketAddr, Current, Gate)>> = Mutex::new(Vec::new());

fn current(slot: &Current) -> Vec<(Option<Arc<str>>, Arc<Health>)> {
    slot.read().map(|h| h.clone()).unwrap_or_else(|p| p.into_inner().clone())
}

/// The process is healthy (ready) when every pipeline in it is.
fn all(slot: &Current, test: impl Fn(&Health) -> bool) -> bool {
    current(slot).iter().all(|(_, h)| test(h))
}

/// Bind `addr` and serve until the process ends. Returns the bound address
/// (port 0 picks a free one). Asked again for the same address (a reload),
/// the endpoint stays and answers for `health` from then on.
///
/// With several pipelines in one process each serves its health here, by
/// the name its thread carries (`labels::current`); they share the
/// endpoint, which is healthy and ready when all of them are.
pub(crate) fn serve(addr: SocketAddr, health: Arc<Health>, access: Access) -> Result<SocketAddr, ServerError> {
    let who = super::labels::current();
    let mut serving = SERVING.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, bound, slot, gate)) = serving.iter().find(|(asked, ..)| *asked == addr) {
        let mut list = slot.write().unwrap_or_else(|p| p.into_inner());
        match list.iter_mut().find(|(name, _)| *name == who) {
            Some(entry) => entry.1 = health,
            None => list.push((who, health)),
        }
        *gate.write().unwrap_or_else(|p| p.into_inner()) = access;
        return Ok(*bound);
    }
    let handle = super::install().ok_or(ServerError::Recorder)?;
    // The config in force was said before this recorder existed (the
    // first one is, at start): say it again so `/metrics` has it.
    let digests = super::history::HISTORY.config_digests();
    if digests.len() > 1 {
        for (pipeline, digest) in digests {
            super::labels::within(Some(pipeline.into()), || {
                metrics::gauge!("sluice_config_info", "digest" => digest).set(1.0)
            });
        }
    } else if let Some(digest) = super::history::HISTORY.config_digest() {
        metrics::gauge!("sluice_config_info", "digest" => digest).set(1.0);
    }
    let listener = std::net::TcpListener::bind(addr).map_err(|source| ServerError::Bind { addr, source })?;
    listener.set_nonblocking(true).map_err(|source| ServerError::Bind { addr, source })?;
    let bound = listener.local_addr().map_err(|source| ServerError::Bind { addr, source })?;
    let slot: Current = Arc::new(RwLock::new(vec![(who, health)]));
    let gate: Gate = Arc::new(RwLock::new(access));
    serving.push((addr, bound, slot.clone(), gate.clone()));
    let (h1, h2) = (slot.clone(), slot);
    let (g1, g2, g3) = (gate.clone(), gate.clone(), gate);
    let app = Router::new()
        .route("/metrics", get(move || async move { handle.render() }))
        .route(
            "/health",
            // A stalled partition is detail, not a failed probe: restarting
            // the process would read its records again and fix nothing a
            // sick backend causes (the watchdog's module says why).
            get(move || async move {
                let healthy = all(&h1, Health::is_healthy);
                let mut body = String::from(if healthy { "ok\n" } else { "stalled\n" });
                for (name, health) in current(&h1) {
                    for line in health.detail() {
                        if let Some(name) = &name {
                            body.push_str(name);
                            body.push_str(": ");
                        }
                        body.push_str(&line);
                        body.push('\n');
                    }
                }
                let code = if healthy { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
                (code, body)
            }),
        )
        .route(
            "/tap",
            get(move |headers: axum::http::HeaderMap, uri: axum::http::Uri| async move {
                match refused(&g1, &headers, "/tap") {
                    None => tap(uri).await,
                    Some(refusal) => refusal,
                }
            }),
        )
        // The status page: no record in it, but it is the API's (its data
        // needs the token), so it is there only when the API is on.
        .route(
            "/",
            get(move || async move {
                use axum::response::IntoResponse;
                let on = g2.read().map(|a| a.enabled).unwrap_or_else(|p| p.into_inner().enabled);
                if on { axum::response::Html(include_str!("status.html")).into_response() } else { off() }
            }),
        )
        // The samples the page draws (`history`), quarantine reasons among
        // them.
        .route(
            "/status.json",
            get(move |headers: axum::http::HeaderMap| async move {
                use axum::response::IntoResponse;
                match refused(&g3, &headers, "/status.json") {
                    None => ([(axum::http::header::CONTENT_TYPE, "application/json")], super::history::HISTORY.json())
                        .into_response(),
                    Some(refusal) => refusal,
                }
            }),
        )
        .route(
            "/ready",
            get(move || async move {
                if all(&h2, Health::is_ready) {
                    (StatusCode::OK, "ready\n")
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
                }
            }),
        );
    std::thread::Builder::new()
        .name("sluice-metrics".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => return tracing::error!("metrics endpoint: {e}"),
            };
            rt.block_on(async move {
                // A sample a second for the status page, read from the
                // same text `/metrics` serves.
                tokio::spawn(async move {
                    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
                    loop {
                        tick.tick().await;
                        let now = std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.as_secs());
                        super::history::HISTORY.sampled(now, &super::scrape::parse(&handle.render()));
                    }
                });
                let listener = match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => return tracing::error!("metrics endpoint: {e}"),
                };
                if let Err(e) = axum::serve(listener, app).await {
                    tracing::error!("metrics endpoint: {e}");
                }
            });
        })
        .map_err(|source| ServerError::Bind { addr, source })?;
    Ok(bound)
}

/// A closed endpoint while the API is off: the key that turns it on.
fn off() -> axum::response::Response {
    use axum::response::IntoResponse;
    (StatusCode::NOT_FOUND, "the API is off: [api] enabled = true serves /tap, /status.json and the status page\n")
        .into_response()
}

/// `None` when the request may read a closed endpoint; else the whole
/// answer: 404 naming the key while the API is off, 401 and nothing else
/// (counted) for a missing or wrong token.
fn refused(gate: &Gate, headers: &axum::http::HeaderMap, endpoint: &'static str) -> Option<axum::response::Response> {
    use axum::response::IntoResponse;
    let access = gate.read().map(|a| a.clone()).unwrap_or_else(|p| p.into_inner().clone());
    let given = headers.get(axum::http::header::AUTHORIZATION).map(|v| v.as_bytes());
    match access.admit(given) {
        Ok(()) => None,
        Err(Refusal::Off) => Some(off()),
        Err(Refusal::Unauthorized) => {
            metrics::counter!("sluice_api_unauthorized_total", "endpoint" => endpoint).increment(1);
            Some(
                (
                    StatusCode::UNAUTHORIZED,
                    [(axum::http::header::WWW_AUTHENTICATE, "Bearer realm=\"sluice\"")],
                    "unauthorized\n",
                )
                    .into_response(),
            )
        }
    }
}

/// `GET /tap?before_sink`, `?after=PLUGIN`, `?quarantined`, with `&rate=N`
/// (samples a second, default 10): NDJSON until the reader goes away. The
/// first line says what is tapped; a plugin the pipeline in force does not
/// have is refused with the ones it has.
async fn tap(uri: axum::http::Uri) -> axum::response::Response {
    use axum::response::IntoResponse;

    use super::tap::{Point, QUEUE, TAPS};
    let mut point = None;
    let mut rate: u32 = 10;
    let mut pipeline = None;
    for pair in uri.query().unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_decoded(value);
        match key {
            "after" => point = Some(Point::After(value)),
            "before_sink" => point = Some(Point::BeforeSink),
            "quarantined" => point = Some(Point::Quarantined),
            "pipeline" => pipeline = Some(value),
            "rate" => match value.parse::<u32>() {
                Ok(n) if (1..=10_000).contains(&n) => rate = n,
                _ => {
                    return (StatusCode::BAD_REQUEST, format!("rate {value:?}: a whole number, 1 to 10000\n"))
                        .into_response();
                }
            },
            other => return (StatusCode::BAD_REQUEST, format!("unknown parameter {other:?}\n")).into_response(),
        }
    }
    let Some(point) = point else {
        return (StatusCode::BAD_REQUEST, "name a point: ?after=PLUGIN, ?before_sink or ?quarantined\n")
            .into_response();
    };
    if let Some(name) = &pipeline {
        let pipelines = TAPS.pipelines();
        if !pipelines.contains(name) {
            let why = if pipelines.is_empty() {
                format!("no pipeline {name:?}: this process runs one pipeline; tap it without --pipeline\n")
            } else {
                format!("no pipeline {name:?} in this process; its pipelines: {}\n", pipelines.join(", "))
            };
            return (StatusCode::NOT_FOUND, why).into_response();
        }
    }
    if let Point::After(name) = &point {
        let stages = TAPS.stages(pipeline.as_deref());
        if !stages.contains(name) {
            let why = format!("no plugin {name:?} in the running pipeline; its plugins: {}\n", stages.join(", "));
            return (StatusCode::NOT_FOUND, why).into_response();
        }
    }
    let mut hello = serde_json::json!({ "tapping": point.to_string(), "per_second": rate });
    if let Some(p) = &pipeline {
        hello["pipeline"] = p.as_str().into();
    }
    let hello = hello.to_string();
    let (attached, rx) = TAPS.attach(point, rate, QUEUE, pipeline);
    let lines = futures::stream::once(async move { Ok::<_, std::convert::Infallible>(hello + "\n") }).chain(
        futures::stream::unfold((rx, attached), |(mut rx, attached)| async move {
            rx.recv().await.map(|line| (Ok(line + "\n"), (rx, attached)))
        }),
    );
    ([(axum::http::header::CONTENT_TYPE, "application/x-ndjson")], axum::body::Body::from_stream(lines)).into_response()
}

/// `%2F` → `/`, `+` → space: a plugin name as a query carries it.
fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
