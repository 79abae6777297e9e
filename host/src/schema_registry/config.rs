//! `[schema_registry]`: where the schemas of framed records come from.
//!
//! ```toml
//! [schema_registry]
//! url = "https://registry.example.com:8081"
//! basic_auth = { user = "sluice", password_env = "REGISTRY_PASSWORD" }
//! ca_file = "/etc/ssl/registry-ca.pem"   # a private CA, beside the system's
//! timeout = "10s"                         # per request
//! retry_max = "30s"                       # the longest wait between tries while it is down
//! ```

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::problem::Problems;

/// A Confluent-compatible schema registry.
#[derive(Debug, Clone, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SchemaRegistryConfig {
    /// Its base URL, `http://` or `https://`; requests go to
    /// `<url>/schemas/ids/<id>`.
    pub url: String,
    /// HTTP basic authentication (Confluent Cloud's API key and secret).
    #[serde(default)]
    pub basic_auth: Option<RegistryAuth>,
    /// A PEM file of the CA that signed the registry's certificate, trusted
    /// beside the system's; a relative path is read from the config's
    /// folder.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// How long one request may take.
    #[schemars(with = "crate::units::DurationText")]
    #[serde(default = "default_timeout", deserialize_with = "crate::units::duration")]
    pub timeout: Duration,
    /// While the registry cannot answer, the batch waits and asks again:
    /// after 100 ms, then twice as long each time, up to this.
    #[schemars(with = "crate::units::DurationText")]
    #[serde(default = "default_retry_max", deserialize_with = "crate::units::duration")]
    pub retry_max: Duration,
}

/// `[schema_registry.basic_auth]`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegistryAuth {
    /// The user name (an API key).
    pub user: String,
    /// The variable holding the password (an API secret); unset stops the
    /// start.
    pub password_env: Option<String>,
}

fn default_timeout() -> Duration {
    Duration::from_secs(10)
}

fn default_retry_max() -> Duration {
    Duration::from_secs(30)
}

impl SchemaRegistryConfig {
    /// Relative paths against the config's folder.
    pub(crate) fn absolutize(&mut self, abs: &dyn Fn(&std::path::Path) -> PathBuf) {
        if let Some(f) = &mut self.ca_file {
            *f = abs(f);
        }
    }

    /// The URL as logs and `check` show it: a password written in it
    /// left out.
    pub(crate) fn shown_url(&self) -> String {
        match url::Url::parse(&self.url) {
            Ok(mut u) => {
                let _ = u.set_password(None);
                u.to_string()
            }
            Err(_) => self.url.clone(),
        }
    }

    /// Every problem, keyed from this section.
    pub(crate) fn validate(&self, p: &mut Problems) {
        match url::Url::parse(&self.url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => {}
            Ok(u) => p.add("url", format!("{:?}: the scheme must be http or https, not {:?}", self.url, u.scheme())),
            Err(e) => p.add("url", format!("{:?}: {e}", self.url)),
        }
        if self.timeout.is_zero() {
            p.add("timeout", "must be more than 0".into());
        }
        if self.retry_max < Duration::from_millis(100) {
            p.add("retry_max", "must be at least 100ms (the first wait)".into());
        }
        if let Some(f) = &self.ca_file
            && !f.is_file()
        {
            p.add("ca_file", format!("{}: no such file", f.display()));
        }
        if let Some(RegistryAuth { password_env: Some(var), .. }) = &self.basic_auth
            && std::env::var_os(var).is_none()
        {
            p.add("basic_auth.password_env", format!("${var} is not set"));
        }
        if let Some(missing) = crate::features::Feature::Http.missing("[schema_registry]") {
            p.add("url", missing.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(toml_text: &str) -> Vec<String> {
        let cfg: SchemaRegistryConfig = toml::from_str(toml_text).unwrap_or_else(|e| panic!("{e}"));
        let mut p = Problems::new(std::path::Path::new("sluice.toml"));
        cfg.validate(&mut p);
        p.into_result().err().map(|e| e.to_string().lines().map(str::to_string).collect()).unwrap_or_default()
    }

    #[test]
    fn a_bad_url_or_duration_is_named_by_its_key() {
        assert!(problems("url = \"http://localhost:8081\"").is_empty());
        let p = problems("url = \"ftp://x\"\ntimeout = \"0s\"\nretry_max = \"10ms\"").join("\n");
        assert!(p.contains("url") && p.contains("ftp"), "{p}");
        assert!(p.contains("timeout: must be more than 0"), "{p}");
        assert!(p.contains("retry_max"), "{p}");
    }

    #[test]
    fn an_unknown_key_stops_the_start() {
        let e = toml::from_str::<SchemaRegistryConfig>("url = \"http://x\"\nuri = \"http://y\"").err();
        assert!(e.is_some_and(|e| e.to_string().contains("uri")));
    }
}
