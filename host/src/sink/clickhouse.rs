//! The `clickhouse` sink: the http sink set up for
//! `INSERT INTO <database>.<table> FORMAT JSONEachRow`, answers read the
//! ClickHouse way (all or nothing; a bad row named "(at row N)").
//!
//! Idempotent when the table is a `ReplacingMergeTree` ordered by the
//! event id (`examples/clickhouse/`): a record delivered twice (a lost
//! answer, a crash before its id was recorded) is one row after merges and
//! in `SELECT … FINAL`.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::guard::GuardConfig;
use super::http::config::{
    BasicAuth, Encoding, HttpSinkConfig, Method, Payload, ResponseConfig, SendingConfig, default_id_field,
};
use crate::problem::Problems;

/// How it sends (`batch`, `request`) is the http sink's [`SendingConfig`]
/// and its `retry` and `breaker` every sink's [`GuardConfig`], both
/// flattened: serde rejects a key that neither this struct nor a flattened
/// one took (`deny_unknown_fields` on the outer struct only), so a
/// misspelt key still stops the start.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClickhouseSinkConfig {
    /// The HTTP interface, e.g. `http://127.0.0.1:8123`.
    pub url: String,
    #[serde(default = "default_database")]
    /// The database of `table`.
    pub database: String,
    /// The table inserted into (a `ReplacingMergeTree` ordered by the id
    /// column folds a record sent twice).
    pub table: String,
    /// Column that receives the event id (the table's ORDER BY key).
    #[serde(default = "default_id_field")]
    pub id_field: String,
    /// Column that receives the event's RFC 3339 time, if any.
    pub timestamp_field: Option<String>,
    /// Fields the table does not have are skipped (`true`, the default) or
    /// make the row fail (`false`: the row is quarantined).
    #[serde(default = "yes")]
    pub skip_unknown_fields: bool,
    /// The user, by HTTP basic authentication.
    pub user: Option<String>,
    /// The environment variable holding the user's password; unset stops
    /// the start.
    pub password_env: Option<String>,
    /// More ClickHouse settings for the insert, as URL parameters.
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
    /// `[sink.batch]`, `[sink.request]`.
    #[serde(flatten)]
    pub sending: SendingConfig,
    /// `[sink.retry]`, `[sink.breaker]`.
    #[serde(flatten)]
    pub guard: GuardConfig,
}

fn default_database() -> String {
    "default".into()
}
fn yes() -> bool {
    true
}

/// Database and table names are sent inside a query: plain identifiers only.
fn identifier(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl ClickhouseSinkConfig {
    /// Every problem, keyed under `[sink]`: its own keys', then the http
    /// sink's it is.
    pub(crate) fn validate(&self, p: &mut Problems) {
        if !identifier(&self.database) {
            p.add("database", format!("{:?}: letters, digits and _ only", self.database));
        }
        if !identifier(&self.table) {
            p.add("table", format!("{:?}: letters, digits and _ only", self.table));
        }
        if self.password_env.is_some() && self.user.is_none() {
            p.add("password_env", "needs user".into());
        }
        self.http().validate(p);
    }

    /// The sink's name in logs and metrics: the server's origin and the
    /// table, never the credentials a URL may carry.
    pub fn name(&self) -> String {
        let mut url = url::Url::parse(&self.url).map(|u| u.origin().ascii_serialization()).unwrap_or_default();
        if url.is_empty() {
            url.clone_from(&self.url);
        }
        format!("clickhouse {url} {}.{}", self.database, self.table)
    }

    /// The http sink this preset is.
    pub fn http(&self) -> HttpSinkConfig {
        let mut url = url::Url::parse(&self.url).ok();
        if let Some(u) = &mut url {
            let mut q = u.query_pairs_mut();
            q.append_pair("query", &format!("INSERT INTO `{}`.`{}` FORMAT JSONEachRow", self.database, self.table));
            q.append_pair("input_format_skip_unknown_fields", if self.skip_unknown_fields { "1" } else { "0" });
            for (k, v) in &self.settings {
                q.append_pair(k, v);
            }
        }
        HttpSinkConfig {
            url: url.map(String::from).unwrap_or_else(|| self.url.clone()),
            method: Method::Post,
            headers: BTreeMap::new(),
            headers_from_env: BTreeMap::new(),
            basic_auth: self
                .user
                .as_ref()
                .map(|u| BasicAuth { user: u.clone(), password_env: self.password_env.clone() }),
            classifier: None,
            response: ResponseConfig::Named("clickhouse".into()),
            encoding: Encoding::Ndjson,
            payload: Payload::Event { id_field: self.id_field.clone(), timestamp_field: self.timestamp_field.clone() },
            index: None,
            labels: None,
            sending: self.sending.clone(),
            guard: self.guard.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_insert_query_and_its_settings_go_in_the_url() {
        let cfg: ClickhouseSinkConfig = toml::from_str(
            "url = \"http://127.0.0.1:8123\"\ntable = \"events\"\n[settings]\ndate_time_input_format = \"best_effort\"\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let http = cfg.http();
        let url = url::Url::parse(&http.url).unwrap_or_else(|e| panic!("{e}"));
        let q: BTreeMap<_, _> = url.query_pairs().into_owned().collect();
        assert_eq!(q["query"], "INSERT INTO `default`.`events` FORMAT JSONEachRow");
        assert_eq!(q["input_format_skip_unknown_fields"], "1");
        assert_eq!(q["date_time_input_format"], "best_effort");
        assert_eq!(cfg.name(), "clickhouse http://127.0.0.1:8123 default.events");
        let bad: ClickhouseSinkConfig =
            toml::from_str("url = \"http://h\"\ntable = \"x; DROP TABLE y\"").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(Problems::of(|p| bad.validate(p)).first().map(|e| e.key.as_str()), Some("table"));
    }
}
