//! The `postgres` sink: one transaction per batch, `INSERT … ON CONFLICT
//! (id) DO NOTHING` into a table keyed by the event id. Effectively once:
//! a record sent again (a lost answer, a crash before its id was recorded)
//! conflicts with its own row and is answered `Duplicate`.
//!
//! Each event's fields become columns (`jsonb_populate_recordset`, as
//! ClickHouse's JSONEachRow: a field the table lacks is ignored; a column
//! the event lacks takes its `DEFAULT`, or NULL). The batch goes as one
//! statement; only when the database refuses a row (SQLSTATE class 22, a
//! value of the wrong type; 23, a constraint) is the batch inserted again
//! row by row inside one transaction, a savepoint per row, so the refused
//! rows are rejected alone and the rest committed. Anything else — the
//! connection, the credentials (28), a missing table (42P01), a read-only
//! server (25006), no resources (53), a shutdown (57) — is systemic.

#[cfg(feature = "postgres")]
use std::collections::HashMap;
#[cfg(feature = "postgres")]
use std::sync::Mutex;
#[cfg(feature = "postgres")]
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::Deserialize;

use super::guard::GuardConfig;
use super::http::config::default_id_field;
#[cfg(feature = "postgres")]
use super::{
    Answer, Attempt, Delivery, Sink, SinkError,
    http::{body::Framing, config::Payload, response::profile::Render},
};
use crate::problem::Problems;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PostgresSinkConfig {
    /// `postgresql://user@host:5432/db` or `host=… port=… user=… dbname=…`,
    /// without the password.
    pub url: String,
    /// The environment variable holding the password; unset stops the start.
    pub password_env: Option<String>,
    /// `table` or `schema.table`.
    pub table: String,
    /// The column that receives the event id: the table's primary key (or a
    /// unique index on it alone), which makes a second insert a no-op.
    #[serde(default = "default_id_field")]
    pub id_column: String,
    /// The column that receives the event's time (RFC 3339), if any.
    pub timestamp_column: Option<String>,
    /// TLS to the server, verified against `ca` (default: the system's)
    /// with the host name; `cert` and `key` (PEM, PKCS#8) for a client
    /// certificate. Without it the connection is plain.
    pub tls: Option<PostgresTls>,
    /// Connections, shared by every partition: batches in flight at once.
    #[serde(default = "default_connections")]
    pub connections: usize,
    /// Establishing a connection; past it the batch waits behind the
    /// breaker.
    #[schemars(with = "crate::units::DurationText")]
    #[serde(default = "default_connect_timeout", deserialize_with = "crate::units::duration")]
    pub connect_timeout: Duration,
    /// The server cancels a statement that runs longer
    /// (`statement_timeout`), and a connection whose sent data goes
    /// unacknowledged this long is dropped (`tcp_user_timeout`): a batch
    /// never waits forever on a dead network.
    #[schemars(with = "crate::units::DurationText")]
    #[serde(default = "default_timeout", deserialize_with = "crate::units::duration")]
    pub timeout: Duration,
    #[serde(flatten)]
    pub guard: GuardConfig,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PostgresTls {
    /// The CA certificate (PEM) the server's is verified against; default:
    /// the system's.
    pub ca: Option<std::path::PathBuf>,
    /// A client certificate (PEM), with `key`.
    pub cert: Option<std::path::PathBuf>,
    /// The client certificate's private key (PEM, PKCS#8), with `cert`.
    pub key: Option<std::path::PathBuf>,
}

fn default_connections() -> usize {
    2
}
fn default_connect_timeout() -> Duration {
    Duration::from_secs(5)
}
fn default_timeout() -> Duration {
    Duration::from_secs(30)
}

/// `name`, a plain identifier: it is written into statements, quoted.
fn identifier(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && s.len() <= 63
}

#[cfg(feature = "postgres")]
fn quoted(name: &str) -> String {
    format!("\"{name}\"")
}

impl PostgresSinkConfig {
    /// Every problem, keyed under `[sink]` (of its own keys the first: a
    /// table name is not read further once the URL is bad).
    pub(crate) fn validate(&self, p: &mut Problems) {
        p.add_first(self.first_problem());
        self.guard.validate(p);
    }

    fn first_problem(&self) -> Result<(), (String, String)> {
        #[cfg(feature = "postgres")]
        self.url.parse::<postgres::Config>().map_err(|e| ("url".to_string(), e.to_string()))?;
        if self.url.contains("password") {
            return Err(("url".into(), "no password in the url: name its variable in password_env".into()));
        }
        let parts: Vec<&str> = self.table.split('.').collect();
        if parts.len() > 2 || !parts.iter().all(|p| identifier(p)) {
            return Err(("table".into(), format!("{:?}: table or schema.table, letters, digits and _", self.table)));
        }
        if !identifier(&self.id_column) {
            return Err(("id_column".into(), format!("{:?}: letters, digits and _", self.id_column)));
        }
        if let Some(c) = self.timestamp_column.as_ref().filter(|c| !identifier(c)) {
            return Err(("timestamp_column".into(), format!("{c:?}: letters, digits and _")));
        }
        if let Some(var) = self.password_env.as_ref().filter(|v| std::env::var_os(v).is_none()) {
            return Err(("password_env".into(), format!("the environment variable {var} is not set")));
        }
        if let Some(tls) = &self.tls {
            for (key, file) in [("tls.ca", &tls.ca), ("tls.cert", &tls.cert), ("tls.key", &tls.key)] {
                if let Some(file) = file.as_ref().filter(|f| !f.is_file()) {
                    return Err((key.into(), format!("{}: no such file", file.display())));
                }
            }
            if tls.cert.is_some() != tls.key.is_some() {
                return Err(("tls".into(), "cert and key go together".into()));
            }
        }
        if self.connections == 0 {
            return Err(("connections".into(), "must be at least 1".into()));
        }
        if self.timeout.is_zero() {
            return Err(("timeout".into(), "must be more than 0".into()));
        }
        Ok(())
    }

    /// The table, quoted: `"schema"."table"`.
    #[cfg(feature = "postgres")]
    fn table_sql(&self) -> String {
        self.table.split('.').map(quoted).collect::<Vec<_>>().join(".")
    }

    #[cfg(feature = "postgres")]
    pub(crate) fn name(&self) -> String {
        let host = self
            .url
            .parse::<postgres::Config>()
            .ok()
            .and_then(|c| match c.get_hosts().first() {
                Some(postgres::config::Host::Tcp(h)) => Some(format!("{h}:{}", c.get_ports().first().unwrap_or(&5432))),
                _ => None,
            })
            .unwrap_or_else(|| "local".into());
        format!("postgres {host} {}", self.table)
    }
}

#[cfg(feature = "postgres")]
enum Tls {
    Plain,
    Native(postgres_native_tls::MakeTlsConnector),
}

#[cfg(feature = "postgres")]
/// One connection with its statements prepared for the table as it is.
struct Conn {
    client: postgres::Client,
    insert: postgres::Statement,
    /// Which of the given ids have a row: what makes an id `RETURNING`
    /// did not give back a duplicate rather than a row a trigger or rule
    /// discarded.
    present: postgres::Statement,
}

#[cfg(feature = "postgres")]
pub(crate) struct PostgresSink {
    cfg: PostgresSinkConfig,
    connect: postgres::Config,
    tls: Tls,
    table: String,
    payload: Payload,
    /// `connections` slots, each a connection made on first use and again
    /// after it broke.
    slots: Vec<Mutex<Option<Conn>>>,
    next: AtomicUsize,
    name: String,
}

#[cfg(feature = "postgres")]
impl PostgresSink {
    pub(crate) fn new(cfg: &PostgresSinkConfig) -> Result<PostgresSink, SinkError> {
        let setup = |message: String| SinkError::Setup { target: cfg.name(), message };
        let mut connect: postgres::Config = cfg.url.parse().map_err(|e: postgres::Error| setup(e.to_string()))?;
        if let Some(var) = &cfg.password_env {
            let password = std::env::var(var).map_err(|_| setup(format!("password_env: ${var} is not set")))?;
            connect.password(password);
        }
        connect
            .connect_timeout(cfg.connect_timeout)
            .tcp_user_timeout(cfg.timeout)
            .keepalives_idle(Duration::from_secs(30))
            .application_name("sluice")
            .options(&format!("-c statement_timeout={}", cfg.timeout.as_millis()));
        let tls = match &cfg.tls {
            None => Tls::Plain,
            Some(t) => {
                let read = |p: &std::path::Path| std::fs::read(p).map_err(|e| setup(format!("{}: {e}", p.display())));
                let mut b = native_tls::TlsConnector::builder();
                if let Some(ca) = &t.ca {
                    b.add_root_certificate(
                        native_tls::Certificate::from_pem(&read(ca)?).map_err(|e| setup(format!("tls.ca: {e}")))?,
                    );
                }
                if let (Some(cert), Some(key)) = (&t.cert, &t.key) {
                    b.identity(
                        native_tls::Identity::from_pkcs8(&read(cert)?, &read(key)?)
                            .map_err(|e| setup(format!("tls.cert/tls.key: {e}")))?,
                    );
                }
                connect.ssl_mode(postgres::config::SslMode::Require);
                Tls::Native(postgres_native_tls::MakeTlsConnector::new(
                    b.build().map_err(|e| setup(format!("tls: {e}")))?,
                ))
            }
        };
        Ok(PostgresSink {
            cfg: cfg.clone(),
            connect,
            tls,
            table: cfg.table_sql(),
            payload: Payload::Event { id_field: cfg.id_column.clone(), timestamp_field: cfg.timestamp_column.clone() },
            slots: (0..cfg.connections.max(1)).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            name: cfg.name(),
        })
    }

    fn client(&self) -> Result<postgres::Client, postgres::Error> {
        match &self.tls {
            Tls::Plain => self.connect.connect(postgres::NoTls),
            Tls::Native(t) => self.connect.connect(t.clone()),
        }
    }

    /// A connection and its insert: the table's columns are read once per
    /// connection, so a column added with a default takes effect on the
    /// next one.
    fn open(&self) -> Result<Conn, postgres::Error> {
        let mut client = self.client()?;
        let columns = client.query(
            "SELECT a.attname::text, pg_get_expr(d.adbin, d.adrelid), a.attgenerated <> '', \
             format_type(a.atttypid, a.atttypmod) \
             FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum \
             WHERE a.attrelid = $1::text::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            &[&self.table],
        )?;
        let (mut names, mut values) = (Vec::new(), Vec::new());
        let mut id_type = "text".to_string();
        for row in columns {
            let (name, default, generated): (String, Option<String>, bool) = (row.get(0), row.get(1), row.get(2));
            if name == self.cfg.id_column {
                id_type = row.get(3);
            }
            if generated {
                continue;
            }
            let q = quoted(&name);
            values.push(match default {
                Some(d) => format!("COALESCE(r.{q}, {d})"),
                None => format!("r.{q}"),
            });
            names.push(q);
        }
        let id = quoted(&self.cfg.id_column);
        let sql = format!(
            "INSERT INTO {t} ({names}) SELECT {values} FROM jsonb_populate_recordset(NULL::{t}, $1::text::jsonb) AS r \
             ON CONFLICT ({id}) DO NOTHING RETURNING {id}::text",
            t = self.table,
            names = names.join(", "),
            values = values.join(", "),
        );
        let insert = client.prepare(&sql)?;
        let present = client.prepare(&format!(
            "SELECT u.i FROM unnest($1::text[]) AS u(i) WHERE EXISTS (SELECT 1 FROM {t} WHERE {id} = u.i::{id_type})",
            t = self.table,
        ))?;
        Ok(Conn { client, insert, present })
    }

    fn rows(&self, batch: &[&Delivery]) -> String {
        let f = Framing { render: Render::JsonArray, payload: &self.payload, index: None, labels: None };
        // Valid UTF-8: JSON written from checked bodies and escaped ids.
        String::from_utf8_lossy(&f.body(batch)).into_owned()
    }

    /// The whole batch in one statement; `Err` when the database refused
    /// it (a row's fault or the database's: `insert_rows` tells them apart).
    fn insert_all(&self, conn: &mut Conn, batch: &[Delivery]) -> Result<Vec<Answer>, postgres::Error> {
        let refs: Vec<&Delivery> = batch.iter().collect();
        let rows = self.rows(&refs);
        let mut tx = conn.client.transaction()?;
        let inserted = tx.query(&conn.insert, &[&rows])?;
        tx.commit()?;
        Ok(fates(batch, inserted.iter().map(|r| r.get::<_, String>(0))))
    }

    /// Row by row in one transaction, a savepoint each: a refused row is
    /// rejected with the database's reason, the others committed together.
    fn insert_rows(&self, conn: &mut Conn, batch: &[Delivery]) -> Result<Vec<Answer>, postgres::Error> {
        let mut refused: HashMap<usize, String> = HashMap::new();
        let mut inserted = Vec::new();
        let mut tx = conn.client.transaction()?;
        for (i, d) in batch.iter().enumerate() {
            let rows = self.rows(&[d]);
            let mut sp = tx.savepoint("sluice_row")?;
            match sp.query(&conn.insert, &[&rows]) {
                Ok(r) => {
                    sp.commit()?;
                    inserted.extend(r.iter().map(|r| r.get::<_, String>(0)));
                }
                Err(e) if records_fault(&e) => {
                    sp.rollback()?;
                    refused.insert(i, describe(&e));
                }
                Err(e) => return Err(e),
            }
        }
        tx.commit()?;
        let mut answers = fates(batch, inserted.into_iter());
        for (i, reason) in refused {
            answers[i] = Answer::Rejected(reason);
        }
        Ok(answers)
    }

    fn deliver_on(&self, conn: &mut Conn, batch: &[Delivery]) -> Result<Vec<Answer>, postgres::Error> {
        let mut answers = match self.insert_all(conn, batch) {
            Err(e) if records_fault(&e) => self.insert_rows(conn, batch)?,
            other => other?,
        };
        // An id not returned is a duplicate only if its row is there: a
        // BEFORE INSERT trigger that returns NULL (or a rule) discards a
        // row without an error, and counting that record as delivered
        // would lose it. One look-up per batch, on replays only.
        let unproven: Vec<&str> =
            batch.iter().zip(&answers).filter(|(_, a)| **a == Answer::Duplicate).map(|(d, _)| d.id.as_str()).collect();
        if !unproven.is_empty() {
            let there: std::collections::HashSet<String> =
                conn.client.query(&conn.present, &[&unproven])?.iter().map(|r| r.get(0)).collect();
            for (d, a) in batch.iter().zip(answers.iter_mut()) {
                if *a == Answer::Duplicate && !there.contains(d.id.as_str()) {
                    *a = Answer::Rejected(
                        "postgres: the row was neither inserted nor there: a trigger or rule discarded it".into(),
                    );
                }
            }
        }
        Ok(answers)
    }
}

#[cfg(feature = "postgres")]
/// Each record accepted if its id came back from `RETURNING`, else a
/// duplicate (the row was there: `ON CONFLICT DO NOTHING`). A second
/// record of the same id in one batch is the duplicate.
fn fates(batch: &[Delivery], inserted: impl Iterator<Item = String>) -> Vec<Answer> {
    let mut new: HashMap<String, usize> = HashMap::new();
    for id in inserted {
        *new.entry(id).or_default() += 1;
    }
    batch
        .iter()
        .map(|d| match new.get_mut(d.id.as_str()) {
            Some(n) if *n > 0 => {
                *n -= 1;
                Answer::Accepted
            }
            _ => Answer::Duplicate,
        })
        .collect()
}

#[cfg(feature = "postgres")]
/// A value of the wrong type (class 22), a constraint (class 23: not
/// null, a check, another unique key): the row's, not the database's.
fn records_fault(e: &postgres::Error) -> bool {
    e.code().is_some_and(|c| c.code().starts_with("22") || c.code().starts_with("23"))
}

#[cfg(feature = "postgres")]
/// The server's code and message; not its detail, which may quote a value.
fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("postgres {}: {}", db.code().code(), db.message()),
        // A connection's failure says little alone ("error performing TLS
        // handshake"): its causes say why (the certificate, the CA).
        None => {
            let mut out = format!("postgres: {e}");
            let mut source = std::error::Error::source(e);
            while let Some(cause) = source {
                let text = cause.to_string();
                if !out.contains(&text) {
                    out.push_str(": ");
                    out.push_str(&text);
                }
                source = cause.source();
            }
            out
        }
    }
}

#[cfg(feature = "postgres")]
impl Sink for PostgresSink {
    fn deliver(&self, batch: &[Delivery]) -> Result<Attempt, SinkError> {
        if batch.is_empty() {
            return Ok(Attempt::default());
        }
        let slot = &self.slots[self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len()];
        let mut guard = slot.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            match self.open() {
                Ok(c) => *guard = Some(c),
                Err(e) => return Ok(Attempt::systemic(batch.len(), &describe(&e))),
            }
        }
        let Some(conn) = guard.as_mut() else { return Ok(Attempt::systemic(batch.len(), "no connection")) };
        match self.deliver_on(conn, batch) {
            Ok(answers) => Ok(Attempt { answers, requests_ok: 1, ..Attempt::default() }),
            Err(e) => {
                // A broken connection, or a table that changed under a
                // prepared statement: the next batch connects afresh.
                *guard = None;
                Ok(Attempt::systemic(batch.len(), &describe(&e)))
            }
        }
    }

    fn describe(&self) -> String {
        self.name.clone()
    }

    /// Connects, prepares the insert (the table and its columns are
    /// there), and checks that the id column is unique and the server
    /// writable. Writes nothing.
    fn probe(&self) -> Result<String, String> {
        let mut conn = self.open().map_err(|e| describe(&e))?;
        let unique: i64 = conn
            .client
            .query_one(
                "SELECT count(*) FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] \
                 WHERE i.indrelid = $1::text::regclass AND i.indisunique AND i.indnatts = 1 AND a.attname = $2",
                &[&self.table, &self.cfg.id_column],
            )
            .map(|r| r.get(0))
            .map_err(|e| describe(&e))?;
        if unique == 0 {
            return Err(format!(
                "{}: no primary key or unique index on {:?} alone: a record sent twice would be two rows",
                self.cfg.table, self.cfg.id_column
            ));
        }
        let read_only: String =
            conn.client.query_one("SHOW transaction_read_only", &[]).map(|r| r.get(0)).map_err(|e| describe(&e))?;
        if read_only == "on" {
            return Err("the server is read-only (a standby?)".into());
        }
        Ok(format!("table {} is there, keyed on {}, writable", self.cfg.table, self.cfg.id_column))
    }
}

#[cfg(all(test, feature = "postgres"))]
mod tests {
    use super::*;

    fn cfg(extra: &str) -> PostgresSinkConfig {
        toml::from_str(&format!("url = \"postgresql://sluice@127.0.0.1:5432/logs\"\ntable = \"events\"\n{extra}"))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn names_are_checked_before_they_reach_a_statement() {
        assert!(cfg("").first_problem().is_ok());
        assert_eq!(cfg("").table_sql(), "\"events\"");
        assert_eq!(cfg("").name(), "postgres 127.0.0.1:5432 events");
        let c = PostgresSinkConfig { table: "logs.events".into(), ..cfg("") };
        assert_eq!(c.table_sql(), "\"logs\".\"events\"");
        for (table, key) in [("a; DROP TABLE b", "table"), ("a.b.c", "table"), ("1x", "table")] {
            let c = PostgresSinkConfig { table: table.into(), ..cfg("") };
            assert_eq!(c.first_problem().err().map(|e| e.0), Some(key.to_string()), "{table}");
        }
        let c = cfg("id_column = \"id\\\"\"");
        assert_eq!(c.first_problem().err().map(|e| e.0), Some("id_column".into()));
        let c = PostgresSinkConfig { url: "postgresql://u:pw@h/db?password=x".into(), ..cfg("") };
        assert_eq!(c.first_problem().err().map(|e| e.0), Some("url".into()));
        let c = cfg("password_env = \"SLUICE_PG_UNSET_Q\"");
        assert_eq!(c.first_problem().err().map(|e| e.0), Some("password_env".into()));
    }

    #[test]
    fn returned_ids_are_accepted_the_rest_duplicates() {
        let batch: Vec<Delivery> = ["a", "b", "a", "c"].iter().map(|id| Delivery::new(*id, None, b"{}")).collect();
        let got = fates(&batch, ["a".to_string(), "c".to_string()].into_iter());
        assert_eq!(got, vec![Answer::Accepted, Answer::Duplicate, Answer::Duplicate, Answer::Accepted]);
    }
}
