//! `/metrics`, `/health`, `/ready` over HTTP, on a thread of its own so
//! that a busy pipeline never delays a scrape or a probe.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;

use super::Health;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("metrics.listen {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("metrics: another metrics recorder is installed in this process")]
    Recorder,
}

/// The pipeline whose health an endpoint answers for: a reload runs a new
/// pipeline behind the same endpoint.
type Current = Arc<RwLock<Arc<Health>>>;

/// Endpoints already serving in this process, by the address asked for.
static SERVING: Mutex<Vec<(SocketAddr, SocketAddr, Current)>> = Mutex::new(Vec::new());

fn current(slot: &Current) -> Arc<Health> {
    slot.read().map(|h| h.clone()).unwrap_or_else(|p| p.into_inner().clone())
}

/// Bind `addr` and serve until the process ends. Returns the bound address
/// (port 0 picks a free one). Asked again for the same address (a reload),
/// the endpoint stays and answers for `health` from then on.
pub fn serve(addr: SocketAddr, health: Arc<Health>) -> Result<SocketAddr, ServerError> {
    let mut serving = SERVING.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, bound, slot)) = serving.iter().find(|(asked, _, _)| *asked == addr) {
        *slot.write().unwrap_or_else(|p| p.into_inner()) = health;
        return Ok(*bound);
    }
    let handle = super::install().ok_or(ServerError::Recorder)?;
    let listener = std::net::TcpListener::bind(addr).map_err(|source| ServerError::Bind { addr, source })?;
    listener.set_nonblocking(true).map_err(|source| ServerError::Bind { addr, source })?;
    let bound = listener.local_addr().map_err(|source| ServerError::Bind { addr, source })?;
    let slot: Current = Arc::new(RwLock::new(health));
    serving.push((addr, bound, slot.clone()));
    let (h1, h2) = (slot.clone(), slot);
    let app = Router::new()
        .route("/metrics", get(move || async move { handle.render() }))
        .route(
            "/health",
            // A stalled partition is detail, not a failed probe: restarting
            // the process would read its records again and fix nothing a
            // sick backend causes (the watchdog's module says why).
            get(move || async move {
                let health = current(&h1);
                let mut body = String::from(if health.is_healthy() { "ok\n" } else { "stalled\n" });
                for line in health.detail() {
                    body.push_str(&line);
                    body.push('\n');
                }
                let code = if health.is_healthy() { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
                (code, body)
            }),
        )
        .route(
            "/ready",
            get(move || async move {
                if current(&h2).is_ready() {
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
