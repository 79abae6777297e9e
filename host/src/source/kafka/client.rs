//! The librdkafka configuration of a sluice consumer.
//!
//! Sluice owns the properties the custody rule depends on: offsets are
//! never committed by librdkafka on its own (`enable.auto.commit` and
//! `enable.auto.offset.store` off); sluice commits each partition's
//! finished prefix itself. Everything else passes through from
//! `source.properties`, over sluice's defaults.
//!
//! Secrets (the SASL password, the TLS key's password) are read from the
//! environment variables the config names, at the moment the client is
//! built; they are never kept in `Config`, and `describe` shows where they
//! come from, not what they are.

use std::collections::BTreeMap;

use rdkafka::ClientConfig;
use rdkafka::config::RDKafkaLogLevel;

use super::KafkaSourceError;
use super::config::KafkaSourceConfig;
use super::connection::{KafkaConnection, PropertyValue};

/// sluice's defaults, each overridable in `source.properties`.
const DEFAULTS: [(&str, &str); 4] = [
    // A new group starts at the beginning: records already in the topic
    // when a pipeline is first deployed are not skipped.
    ("auto.offset.reset", "earliest"),
    // Moving one partition does not stop the others.
    ("partition.assignment.strategy", "cooperative-sticky"),
    // librdkafka's prefetch bound in bytes, per partition (each partition
    // has its own queue in a group member): a term of the memory bound in
    // docs/src/kafka.md ("Back-pressure"). The count bound, `queued.min.messages`, comes from
    // `source.queue_records` (`member_config`).
    ("queued.max.messages.kbytes", "8192"),
    // `sluice lag` and `replay` do not consume; a member sets its own.
    ("queued.min.messages", "1000"),
];

/// What the client config holds, printable: secrets show their source.
pub(crate) fn describe(k: &KafkaSourceConfig) -> BTreeMap<String, String> {
    settings(k).into_iter().chain(k.connection.secret_sources()).collect()
}

/// Every non-secret setting, in the order they apply (later wins).
fn settings(k: &KafkaSourceConfig) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = DEFAULTS.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
    out.extend(k.connection.security());
    for (key, v) in &k.connection.properties {
        out.push((key.clone(), v.to_string()));
    }
    out.push(("bootstrap.servers".into(), k.connection.brokers.clone()));
    out.push(("group.id".into(), k.group_id.clone()));
    out.push(("enable.auto.commit".into(), "false".into()));
    out.push(("enable.auto.offset.store".into(), "false".into()));
    out.push(("enable.partition.eof".into(), "false".into()));
    out
}

/// The config of a group member (or of `sluice lag`/`replay`, which use
/// the same group without joining it).
pub(crate) fn client_config(k: &KafkaSourceConfig) -> Result<ClientConfig, KafkaSourceError> {
    configured(&k.connection, settings(k))
}

/// Only what reaches and logs into the brokers (address, TLS, SASL): for
/// an admin client, which warns of every consumer property it is given.
/// Built from the settings, never copied out of a built config: librdkafka
/// hands secrets back as "[sanitized for safety]", and an admin client
/// that logs in with that password never gets an answer.
pub(crate) fn connection_config(k: &KafkaSourceConfig) -> Result<ClientConfig, KafkaSourceError> {
    let keep = |key: &str| ["bootstrap.", "security.", "ssl.", "sasl.", "client."].iter().any(|p| key.starts_with(p));
    configured(&k.connection, settings(k).into_iter().filter(|(key, _)| keep(key)).collect())
}

fn configured(conn: &KafkaConnection, settings: Vec<(String, String)>) -> Result<ClientConfig, KafkaSourceError> {
    let mut c = ClientConfig::new();
    // librdkafka drops what is below its own level before sluice's log can
    // filter it; rust-rdkafka guesses that level from the `log` crate's
    // target "librdkafka", which no one names. Take it from sluice's
    // filter for the target its lines are logged under (`SLUICE_LOG=
    // info,rdkafka=debug`, with the `debug` property saying what to say).
    c.set_log_level(if tracing::enabled!(target: "rdkafka", tracing::Level::DEBUG) {
        RDKafkaLogLevel::Debug
    } else if tracing::enabled!(target: "rdkafka", tracing::Level::INFO) {
        RDKafkaLogLevel::Info
    } else {
        RDKafkaLogLevel::Warning
    });
    for (key, value) in settings {
        c.set(key, value);
    }
    for (key, value) in conn.secrets().map_err(KafkaSourceError::Other)? {
        c.set(key, value);
    }
    Ok(c)
}

/// The config of a group member that consumes: librdkafka stops fetching
/// a partition once its queue holds `source.queue_records` records
/// (default four batches of `batch_size`): that queue is the back-pressure
/// (`pipeline/kafka/task.rs`). A queue that reached the bound is looked at
/// again after `fetch.queue.backoff.ms`: librdkafka's 1 s default starves a
/// driver that drains four batches in less (16 partitions ran at 1.1k
/// records/s with it, `benches/README.md`). Statistics once a second give
/// the metrics each partition's queue length. All unless
/// `source.properties` says.
pub(crate) fn member_config(k: &KafkaSourceConfig, batch_size: usize) -> Result<ClientConfig, KafkaSourceError> {
    let mut c = client_config(k)?;
    let queue = k.queue_records.unwrap_or(4 * batch_size);
    for (key, value) in [
        ("queued.min.messages", queue.to_string()),
        ("fetch.queue.backoff.ms", "20".into()),
        ("statistics.interval.ms", "1000".into()),
    ] {
        if !k.connection.properties.contains_key(key) {
            c.set(key, value);
        }
    }
    Ok(c)
}

/// A producer to the same cluster (the quarantine topic, the kafka sink):
/// the connection and security settings, no consumer properties, and the
/// producer settings a sink depends on. `acks=all` with idempotence: a
/// delivery report means every in-sync replica has the record, and the
/// producer's own retries neither duplicate nor reorder.
pub(crate) fn producer_config(
    conn: &KafkaConnection,
    properties: &BTreeMap<String, PropertyValue>,
) -> Result<ClientConfig, KafkaSourceError> {
    let mut settings = conn.security();
    settings.push(("bootstrap.servers".into(), conn.brokers.clone()));
    let mut c = configured(conn, settings)?;
    c.set("acks", "all");
    c.set("enable.idempotence", "true");
    for (key, v) in properties {
        c.set(key.clone(), v.to_string());
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::super::connection::SaslConfig;
    use super::*;

    fn cfg() -> KafkaSourceConfig {
        KafkaSourceConfig {
            connection: KafkaConnection {
                brokers: "127.0.0.1:9092".into(),
                properties: [("session.timeout.ms".to_string(), PropertyValue::Int(6000))].into(),
                tls: None,
                sasl: Some(SaslConfig {
                    mechanism: "PLAIN".into(),
                    username: "svc".into(),
                    password_env: "SLUICE_TEST_KAFKA_PASSWORD_UNIT".into(),
                }),
            },
            topics: vec!["logs".into(), "^audit-.*".into()],
            group_id: "g".into(),
            commit_interval: std::time::Duration::from_secs(1),
            queue_records: None,
            linger: std::time::Duration::from_millis(100),
            transactions: false,
        }
    }

    #[test]
    fn secrets_come_from_the_environment_and_are_never_shown() {
        let k = cfg();
        assert!(client_config(&k).is_err(), "an unset password variable is an error");
        // SAFETY: this test is the only user of the variable.
        unsafe { std::env::set_var("SLUICE_TEST_KAFKA_PASSWORD_UNIT", "hunter2") };
        let c = client_config(&k).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.get("sasl.password"), Some("hunter2"));
        assert_eq!(c.get("security.protocol"), Some("SASL_PLAINTEXT"));
        assert_eq!(c.get("session.timeout.ms"), Some("6000"));
        assert_eq!(c.get("enable.auto.commit"), Some("false"));
        let shown = format!("{:?} {:?}", describe(&k), c);
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("*** (from $SLUICE_TEST_KAFKA_PASSWORD_UNIT)"), "{shown}");
        // The admin clients' config carries the password itself (not the
        // placeholder a built config's map shows) and no consumer setting.
        let admin = connection_config(&k).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(admin.get("sasl.password"), Some("hunter2"));
        assert_eq!(admin.get("sasl.username"), Some("svc"));
        assert_eq!(admin.get("bootstrap.servers"), Some("127.0.0.1:9092"));
        assert_eq!(admin.get("group.id"), None);
        assert_eq!(admin.get("enable.auto.commit"), None);
    }

    #[test]
    fn topics_by_name_or_regex() {
        let k = cfg();
        assert!(k.matches("logs"));
        assert!(k.matches("audit-eu"));
        assert!(!k.matches("logs2"));
        assert!(!k.matches("xaudit-eu"));
    }
}
