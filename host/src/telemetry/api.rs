//! `[api]`: who may read what the metrics listener serves.
//!
//! Two kinds of endpoint share the listener. `/metrics`, `/health` and
//! `/ready` carry no record content and stay open, so Prometheus and a
//! kubelet need nothing. `/tap` (records as they pass), `/status.json`
//! (quarantine reasons) and the status page that draws it are off unless
//! `[api] enabled = true`; once on, they answer only a request bearing the
//! token when one is configured, and the config must configure one when
//! the listener is off loopback: a pipeline cannot start that would hand
//! records to anyone who can reach its port.
//!
//! The token comes from the environment (never the file, never a log),
//! is compared in constant time, and a refusal says nothing but 401.

use super::config::ApiConfig;

/// What the listener enforces, built from the config in force.
#[derive(Clone, Default)]
pub(crate) struct Access {
    pub enabled: bool,
    token: Option<Vec<u8>>,
}

impl std::fmt::Debug for Access {
    /// Never the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access").field("enabled", &self.enabled).field("token", &self.token.is_some()).finish()
    }
}

/// Why a request for a closed endpoint is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// `[api] enabled` is false.
    Off,
    /// The token is missing or wrong.
    Unauthorized,
}

impl Access {
    /// The access a validated config asks for; the token read from its
    /// variable now (a validated config has it set).
    ///
    /// A `token_env` whose variable cannot be read here (it was unset
    /// after validation) closes the endpoints to everyone rather than
    /// opening them: an empty token matches no request.
    pub(crate) fn from_config(cfg: &ApiConfig) -> Access {
        let token =
            cfg.token_env.as_ref().map(|v| std::env::var(v).map(|t| t.trim().as_bytes().to_vec()).unwrap_or_default());
        Access { enabled: cfg.enabled, token }
    }

    /// For tests and the CLI: an enabled API with this token.
    #[cfg(test)]
    fn with_token(token: Option<&str>) -> Access {
        Access { enabled: true, token: token.map(|t| t.as_bytes().to_vec()) }
    }

    /// May a request with this `Authorization` header value read a closed
    /// endpoint?
    pub(crate) fn admit(&self, authorization: Option<&[u8]>) -> Result<(), Refusal> {
        if !self.enabled {
            return Err(Refusal::Off);
        }
        let Some(want) = &self.token else { return Ok(()) };
        if want.is_empty() {
            return Err(Refusal::Unauthorized);
        }
        let given = authorization.and_then(|h| h.strip_prefix(b"Bearer ")).map(<[u8]>::trim_ascii).unwrap_or_default();
        if constant_time_eq(given, want) { Ok(()) } else { Err(Refusal::Unauthorized) }
    }
}

/// Equal bytes, in a time that depends on `want`'s length only: a caller
/// learns nothing of the token from how long a wrong guess took.
fn constant_time_eq(given: &[u8], want: &[u8]) -> bool {
    let mut diff = given.len() ^ want.len();
    for (i, w) in want.iter().enumerate() {
        diff |= usize::from(given.get(i).copied().unwrap_or(!*w) ^ w);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;
    use crate::problem::Problems;

    #[test]
    fn only_the_right_token_is_admitted() {
        let a = Access::with_token(Some("0123456789abcdef-secret"));
        assert_eq!(a.admit(Some(b"Bearer 0123456789abcdef-secret")), Ok(()));
        for wrong in [
            None,
            Some(&b""[..]),
            Some(b"Bearer "),
            Some(b"Bearer 0123456789abcdef-secreT"),
            Some(b"Bearer 0123456789abcdef-secret2"),
            Some(b"Bearer 0123456789abcdef-secre"),
            Some(b"Basic 0123456789abcdef-secret"),
            Some(b"0123456789abcdef-secret"),
        ] {
            assert_eq!(a.admit(wrong), Err(Refusal::Unauthorized), "{:?}", wrong.map(String::from_utf8_lossy));
        }
        assert_eq!(Access::with_token(None).admit(None), Ok(()), "no token configured: loopback only");
        let unreadable = ApiConfig { enabled: true, token_env: Some("SLUICE_API_TOKEN_UNSET_FOR_TEST".into()) };
        let closed = Access::from_config(&unreadable);
        assert_eq!(closed.admit(None), Err(Refusal::Unauthorized), "a token that cannot be read opens nothing");
        assert_eq!(closed.admit(Some(b"Bearer ")), Err(Refusal::Unauthorized));
        assert_eq!(Access::default().admit(Some(b"Bearer x")), Err(Refusal::Off));
    }

    #[test]
    fn off_loopback_the_api_needs_a_token_naming_the_key() {
        let open = |addr: &str| -> Option<SocketAddr> { addr.parse().ok() };
        let on = ApiConfig { enabled: true, token_env: None };
        let check = |api: &ApiConfig, listen| Problems::of(|p| api.validate(listen, p));
        assert!(check(&on, open("127.0.0.1:9898")).is_empty());
        assert!(check(&on, open("[::1]:9898")).is_empty());
        let problems = check(&on, open("0.0.0.0:9898"));
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].key, "api.token_env");
        assert!(problems[0].message.contains("0.0.0.0:9898"), "{}", problems[0].message);
        assert_eq!(check(&on, None)[0].key, "api.enabled");
        // Off, nothing is served, so nothing is asked.
        assert!(check(&ApiConfig::default(), open("0.0.0.0:9898")).is_empty());
        let unset = ApiConfig { enabled: true, token_env: Some("SLUICE_API_TOKEN_UNSET_FOR_TEST".into()) };
        assert!(
            check(&unset, open("0.0.0.0:9898"))
                .iter()
                .any(|p| p.key == "api.token_env" && p.message.contains("not set"))
        );
    }

    #[test]
    fn the_debug_form_never_shows_the_token() {
        let shown = format!("{:?}", Access::with_token(Some("0123456789abcdef-secret")));
        assert!(!shown.contains("secret"), "{shown}");
    }
}
