//! How sluice reaches a Kafka cluster, for the source and the sink alike:
//! librdkafka properties, TLS files and SASL credentials.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::problem::Problems;
use serde::Deserialize;

/// Where the brokers are and how to log in: one type for `[source]` and
/// `[sink]` (flattened into each, so the keys sit in the section itself).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
pub struct KafkaConnection {
    /// `host:port[,host:port…]`.
    pub brokers: String,
    /// Any librdkafka property (`"session.timeout.ms" = 6000`), over
    /// sluice's defaults; the ones the custody rule depends on, and
    /// secrets, are refused here. In environment overrides write `_` for
    /// `.`: `SLUICE__<SECTION>__PROPERTIES__SESSION_TIMEOUT_MS=6000`.
    #[serde(default)]
    pub properties: BTreeMap<String, PropertyValue>,
    /// TLS to the brokers (`security.protocol` becomes `SSL`, or
    /// `SASL_SSL` with `sasl`).
    pub tls: Option<TlsConfig>,
    /// SASL login (`SASL_PLAINTEXT`, or `SASL_SSL` with `tls`).
    pub sasl: Option<SaslConfig>,
}

impl KafkaConnection {
    /// What reaches and logs into the brokers, in the order librdkafka is
    /// to apply it (the address last, so no property overrides it).
    /// Secrets are not here: `secrets` reads them when a client is built.
    pub(crate) fn security(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let protocol = match (self.tls.is_some(), self.sasl.is_some()) {
            (true, true) => Some("SASL_SSL"),
            (true, false) => Some("SSL"),
            (false, true) => Some("SASL_PLAINTEXT"),
            (false, false) => None,
        };
        if let Some(protocol) = protocol {
            out.push(("security.protocol".into(), protocol.into()));
        }
        if let Some(tls) = &self.tls {
            for (key, p) in
                [("ssl.ca.location", &tls.ca), ("ssl.certificate.location", &tls.cert), ("ssl.key.location", &tls.key)]
            {
                if let Some(p) = p {
                    out.push((key.into(), p.display().to_string()));
                }
            }
        }
        if let Some(sasl) = &self.sasl {
            out.push(("sasl.mechanisms".into(), sasl.mechanism.clone()));
            out.push(("sasl.username".into(), sasl.username.clone()));
        }
        out
    }

    /// The secrets, read from the environment now (never kept in the
    /// config): `(property, value)`, or the variable that is not set.
    pub(crate) fn secrets(&self) -> Result<Vec<(&'static str, String)>, String> {
        let from_env = |var: &str| std::env::var(var).map_err(|_| format!("the environment variable {var} is not set"));
        let mut out = Vec::new();
        if let Some(sasl) = &self.sasl {
            out.push(("sasl.password", from_env(&sasl.password_env)?));
        }
        if let Some(var) = self.tls.as_ref().and_then(|t| t.key_password_env.as_ref()) {
            out.push(("ssl.key.password", from_env(var)?));
        }
        Ok(out)
    }

    /// Where each secret comes from, for printing instead of the secret.
    pub(crate) fn secret_sources(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Some(sasl) = &self.sasl {
            out.push(("sasl.password".into(), format!("*** (from ${})", sasl.password_env)));
        }
        if let Some(var) = self.tls.as_ref().and_then(|t| t.key_password_env.as_ref()) {
            out.push(("ssl.key.password".into(), format!("*** (from ${var})")));
        }
        out
    }

    /// Every problem, keyed under the section the connection is flattened
    /// into; `section` (`source`, `sink`) names it in the messages.
    /// `owned`: properties sluice sets itself in this section, each with
    /// what to write instead.
    pub(crate) fn validate(&self, section: &str, owned: &[(&str, &str)], p: &mut Problems) {
        if self.brokers.trim().is_empty() {
            p.add("brokers", "name at least one host:port".into());
        }
        for key in self.properties.keys() {
            let at = format!("properties.{key:?}");
            if let Some((_, instead)) = owned.iter().find(|(k, _)| k == key) {
                p.add(&at, format!("set by sluice; {instead}"));
            }
            if is_secret_property(key) {
                p.add(
                    &at,
                    format!(
                        "secrets come from the environment only: use {section}.sasl.password_env or \
                         {section}.tls.key_password_env"
                    ),
                );
            }
        }
        if let Some(sasl) = &self.sasl {
            let mechanisms = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];
            if !mechanisms.contains(&sasl.mechanism.as_str()) {
                p.add("sasl.mechanism", format!("{:?} is not one of {mechanisms:?}", sasl.mechanism));
            }
            if std::env::var_os(&sasl.password_env).is_none() {
                p.add("sasl.password_env", format!("the environment variable {} is not set", sasl.password_env));
            }
        }
        if let Some(tls) = &self.tls {
            for (key, file) in [("ca", &tls.ca), ("cert", &tls.cert), ("key", &tls.key)] {
                if let Some(file) = file.as_ref().filter(|f| !f.is_file()) {
                    p.add(&format!("tls.{key}"), format!("{}: no such file", file.display()));
                }
            }
            if tls.cert.is_some() != tls.key.is_some() {
                p.add("tls", "cert and key go together".into());
            }
            if let Some(var) = tls.key_password_env.as_ref().filter(|v| std::env::var_os(v).is_none()) {
                p.add("tls.key_password_env", format!("the environment variable {var} is not set"));
            }
        }
    }

    /// Relative TLS files made absolute against the config file's folder,
    /// and environment overrides' `_` read as `.` in property names
    /// (an environment variable's name cannot hold a dot).
    pub(crate) fn absolutize(&mut self, abs: &dyn Fn(&Path) -> PathBuf) {
        self.properties =
            std::mem::take(&mut self.properties).into_iter().map(|(key, v)| (key.replace('_', "."), v)).collect();
        if let Some(tls) = &mut self.tls {
            for p in [&mut tls.ca, &mut tls.cert, &mut tls.key].into_iter().flatten() {
                *p = abs(p);
            }
        }
    }
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum PropertyValue {
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
}

impl std::fmt::Display for PropertyValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PropertyValue::Bool(b) => write!(f, "{b}"),
            PropertyValue::Int(n) => write!(f, "{n}"),
            PropertyValue::Float(x) => write!(f, "{x}"),
            PropertyValue::Text(t) => f.write_str(t),
        }
    }
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// CA bundle (PEM) to verify the brokers; default: the system's.
    pub ca: Option<PathBuf>,
    /// Client certificate (PEM) for mutual TLS, with `key`.
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM), with `cert`.
    pub key: Option<PathBuf>,
    /// The environment variable holding the key's password.
    pub key_password_env: Option<String>,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SaslConfig {
    /// `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    pub mechanism: String,
    /// The user sluice logs in as.
    pub username: String,
    /// The environment variable holding the password: secrets never sit
    /// in the config file.
    pub password_env: String,
}

/// Property names that hold secrets; they come from the environment only.
pub(crate) fn is_secret_property(key: &str) -> bool {
    ["password", "secret", "ssl.key.pem", "ssl_key", "sasl.oauthbearer.config", "sasl.jaas"]
        .iter()
        .any(|s| key.contains(s))
}
