//! `[metrics]` (where the listener is) and `[api]` (who may read what it
//! serves beyond metrics and health).

use std::net::SocketAddr;

use serde::Deserialize;

use crate::problem::Problems;

#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Serve `/metrics` (Prometheus), `/health` and `/ready` here, e.g.
    /// `127.0.0.1:9898`. Unset: no endpoint.
    pub listen: Option<std::net::SocketAddr>,
}

/// The shortest token accepted: 16 bytes, a guess away from nothing.
pub(crate) const MIN_TOKEN_BYTES: usize = 16;

#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApiConfig {
    /// Serve `/tap`, `/status.json` and the status page. Off by default:
    /// they carry record contents and quarantine reasons.
    #[serde(default)]
    pub enabled: bool,
    /// The environment variable holding the bearer token those endpoints
    /// ask for (`Authorization: Bearer …`). Required when `metrics.listen`
    /// is not a loopback address.
    pub token_env: Option<String>,
}

impl ApiConfig {
    /// Every problem, keyed from the config's root (`api.*`: whether it
    /// may be on depends on `metrics.listen`).
    pub(crate) fn validate(&self, listen: Option<SocketAddr>, p: &mut Problems) {
        if let Some(var) = &self.token_env {
            match std::env::var(var) {
                Ok(t) if t.trim().len() >= MIN_TOKEN_BYTES => {}
                Ok(_) => p.add(
                    "api.token_env",
                    format!("${var} holds fewer than {MIN_TOKEN_BYTES} bytes: make the token long and random"),
                ),
                Err(_) => p.add("api.token_env", format!("${var} is not set")),
            }
        }
        if !self.enabled {
            return;
        }
        match listen {
            None => p.add("api.enabled", "needs metrics.listen: the API is served on the metrics listener".into()),
            Some(addr) if !addr.ip().is_loopback() && self.token_env.is_none() => p.add(
                "api.token_env",
                format!(
                    "required: metrics.listen {addr} is reachable from other hosts, and [api] serves record contents \
                     (/tap, /status.json); name the environment variable that holds a bearer token, or listen on 127.0.0.1"
                ),
            ),
            Some(_) => {}
        }
    }
}
