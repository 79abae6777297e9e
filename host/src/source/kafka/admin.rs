//! Questions for the brokers outside the consume loop: topic retention
//! (the default dedup window), the group's lag (`sluice lag`), resetting
//! the group's offsets (`sluice replay`), and the dedup changelog's topic.

use std::time::Duration;

use rdkafka::ClientContext;
use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use serde::Serialize;

use super::client::{client_config, connection_config};
use super::config::ResetTo;
use super::watermarks::watermarks;
use super::{KafkaSourceError, partition_name};
use crate::source::kafka::config::KafkaSourceConfig;

const TIMEOUT: Duration = Duration::from_secs(10);

fn consumer(k: &KafkaSourceConfig) -> Result<BaseConsumer, KafkaSourceError> {
    client_config(k)?.create().map_err(KafkaSourceError::client("create a consumer"))
}

/// The configured topics' partitions, as the brokers list them now.
pub(crate) fn partitions(
    consumer: &BaseConsumer,
    k: &KafkaSourceConfig,
) -> Result<Vec<(String, i32)>, KafkaSourceError> {
    let md = consumer.fetch_metadata(None, TIMEOUT).map_err(KafkaSourceError::client("fetch metadata"))?;
    let mut out = Vec::new();
    for t in md.topics().iter().filter(|t| k.matches(t.name())) {
        for p in t.partitions() {
            out.push((t.name().to_string(), p.id()));
        }
    }
    out.sort();
    Ok(out)
}

/// A client context that keeps librdkafka's last error. A refused login
/// or a failed TLS handshake reaches the failed call only as "transport
/// failure"; the cause comes through the error callback.
#[derive(Default)]
struct LastError(std::sync::Mutex<Option<String>>);

impl LastError {
    fn take(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl ClientContext for LastError {
    /// librdkafka's FAIL lines carry the most precise cause ("SASL SCRAM
    /// authentication failed: broker responded with invalid-proof"); they
    /// are logged as well.
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        use rdkafka::config::RDKafkaLogLevel::*;
        if matches!(level, Emerg | Alert | Critical | Error) {
            *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(message.to_string());
            tracing::error!(target: "rdkafka", fac, "{message}");
        } else {
            tracing::debug!(target: "rdkafka", fac, "{message}");
        }
    }

    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        let mut last = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // "All brokers down" follows the cause and would hide it; a cause
        // already known from the log is more precise than a bare code.
        if error.rdkafka_error_code() != Some(rdkafka::types::RDKafkaErrorCode::AllBrokersDown) && last.is_none() {
            *last = Some(if reason.is_empty() { error.to_string() } else { reason.to_string() });
        }
    }
}

impl rdkafka::consumer::ConsumerContext for LastError {}

/// `sluice check --connect`: the brokers answer within a few seconds, take
/// the credentials, and hold every named topic (a `^regex` at least one).
/// A failure says the brokers' own reason when they gave one.
pub(crate) fn probe(k: &KafkaSourceConfig) -> Result<String, KafkaSourceError> {
    let c: BaseConsumer<LastError> = client_config(k)?
        .create_with_context(LastError::default())
        .map_err(KafkaSourceError::client("create a consumer"))?;
    let md = c.fetch_metadata(None, Duration::from_secs(5)).map_err(|e| {
        // The errors wait on the client's queue until it is polled.
        for _ in 0..5 {
            if let Some(Err(e)) = c.poll(Duration::from_millis(20)) {
                c.context().error(e, "");
            }
        }
        match c.context().take() {
            Some(cause) => KafkaSourceError::Other(format!("fetch metadata: {e}: {cause}")),
            None => KafkaSourceError::Client { what: "fetch metadata".into(), source: e },
        }
    })?;
    let names: Vec<&str> = md.topics().iter().filter(|t| t.error().is_none()).map(|t| t.name()).collect();
    let mut found = Vec::new();
    for t in &k.topics {
        let hits = match t.strip_prefix('^') {
            Some(re) => match regex::Regex::new(&format!("^{re}")) {
                Ok(re) => names.iter().filter(|n| re.is_match(n)).count(),
                Err(_) => 0,
            },
            None => names.iter().filter(|n| *n == t).count(),
        };
        if hits == 0 {
            return Err(KafkaSourceError::Other(format!("source topic {t:?} does not exist on the brokers")));
        }
        found.push(format!("{t} ({hits} topic{})", if hits == 1 { "" } else { "s" }));
    }
    Ok(format!("{} broker(s); {}", md.brokers().len(), found.join(", ")))
}

/// The longest `retention.ms` among the configured topics; `None` when a
/// topic keeps records forever or the brokers do not say.
pub(crate) fn retention(k: &KafkaSourceConfig) -> Result<Option<Duration>, KafkaSourceError> {
    let c = consumer(k)?;
    let topics: Vec<String> =
        partitions(&c, k)?.into_iter().map(|(t, _)| t).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    if topics.is_empty() {
        return Ok(None);
    }
    let mut longest: Option<Duration> = None;
    for r in retentions(k, &topics)? {
        match r {
            Some(d) => longest = Some(longest.map_or(d, |l| l.max(d))),
            // Kept forever: no window covers that.
            None => return Ok(None),
        }
    }
    Ok(longest)
}

/// An admin client with only the connection and security settings.
fn admin(k: &KafkaSourceConfig) -> Result<AdminClient<DefaultClientContext>, KafkaSourceError> {
    connection_config(k)?.create().map_err(KafkaSourceError::client("create an admin client"))
}

fn runtime() -> Result<tokio::runtime::Runtime, KafkaSourceError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| KafkaSourceError::Other(format!("runtime: {e}")))
}

/// Each topic's `retention.ms`; `None` for one kept forever (or unsaid).
pub(crate) fn retentions(k: &KafkaSourceConfig, topics: &[String]) -> Result<Vec<Option<Duration>>, KafkaSourceError> {
    let admin = admin(k)?;
    let specs: Vec<ResourceSpecifier<'_>> = topics.iter().map(|t| ResourceSpecifier::Topic(t)).collect();
    let results = runtime()?
        .block_on(admin.describe_configs(&specs, &AdminOptions::new().request_timeout(Some(TIMEOUT))))
        .map_err(KafkaSourceError::client("describe topic configs"))?;
    let mut out = Vec::new();
    for r in results {
        let resource = r.map_err(|code| KafkaSourceError::Other(format!("describe topic configs: {code}")))?;
        let ms = resource.get("retention.ms").and_then(|e| e.value.as_deref()).and_then(|v| v.parse::<i64>().ok());
        out.push(ms.filter(|ms| *ms >= 0).map(|ms| Duration::from_millis(ms as u64)));
    }
    Ok(out)
}

/// How many partitions `topic` has; `None` when it does not exist.
pub(crate) fn partition_count(k: &KafkaSourceConfig, topic: &str) -> Result<Option<i32>, KafkaSourceError> {
    let c = consumer(k)?;
    let md =
        c.fetch_metadata(Some(topic), TIMEOUT).map_err(KafkaSourceError::client(format!("metadata of {topic}")))?;
    Ok(md.topics().iter().find(|t| t.name() == topic && t.error().is_none()).map(|t| t.partitions().len() as i32))
}

/// The most partitions any configured topic has (0 when none exists yet).
pub(crate) fn source_partition_count(k: &KafkaSourceConfig) -> Result<i32, KafkaSourceError> {
    let c = consumer(k)?;
    let parts = partitions(&c, k)?;
    Ok(parts.iter().map(|(_, p)| p + 1).max().unwrap_or(0))
}

/// Create `topic` (replication as the brokers default) with `configs`.
pub(crate) fn create_topic(
    k: &KafkaSourceConfig,
    topic: &str,
    partitions: i32,
    configs: &[(&str, String)],
) -> Result<(), KafkaSourceError> {
    let admin = admin(k)?;
    let mut new = rdkafka::admin::NewTopic::new(topic, partitions, rdkafka::admin::TopicReplication::Fixed(-1));
    for (key, value) in configs {
        new = new.set(key, value);
    }
    let results = runtime()?
        .block_on(admin.create_topics([&new], &AdminOptions::new().operation_timeout(Some(TIMEOUT))))
        .map_err(KafkaSourceError::client(format!("create topic {topic}")))?;
    for r in results {
        match r {
            Ok(_) => {}
            // Another member created it first.
            Err((_, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((t, code)) => return Err(KafkaSourceError::Other(format!("create topic {t}: {code}"))),
        }
    }
    Ok(())
}

/// One partition's progress for the group.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub(crate) struct PartitionLag {
    pub topic: String,
    pub partition: i32,
    /// The group's committed offset (the next record to read), if any.
    pub committed: Option<i64>,
    pub low: i64,
    pub high: i64,
    /// `high - committed` (from `low` when nothing was committed).
    pub lag: i64,
}

pub(crate) fn lag(k: &KafkaSourceConfig) -> Result<Vec<PartitionLag>, KafkaSourceError> {
    let c = consumer(k)?;
    let parts = partitions(&c, k)?;
    let mut tpl = TopicPartitionList::new();
    for (t, p) in &parts {
        tpl.add_partition(t, *p);
    }
    let committed = c.committed_offsets(tpl, TIMEOUT).map_err(KafkaSourceError::client("fetch committed offsets"))?;
    let mut out = Vec::new();
    let named: Vec<(&str, i32)> = parts.iter().map(|(t, p)| (t.as_str(), *p)).collect();
    let ends = watermarks(&c, &named, TIMEOUT).map_err(KafkaSourceError::client("watermarks"))?;
    for ((t, p), (low, high)) in parts.into_iter().zip(ends) {
        let committed = committed.find_partition(&t, p).and_then(|e| match e.offset() {
            Offset::Offset(o) => Some(o),
            _ => None,
        });
        let lag = (high - committed.unwrap_or(low)).max(0);
        out.push(PartitionLag { topic: t, partition: p, committed, low, high, lag });
    }
    Ok(out)
}

/// One partition moved by a reset.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Reset {
    pub partition: String,
    pub from: Option<i64>,
    pub to: i64,
}

/// Reset the group's committed offsets so the next run re-reads from
/// `to`. Refused while the group has live members: they would commit over
/// the reset (and Kafka refuses the commit of a non-member anyway).
///
/// `force` skips the live-member check, for brokers that cannot describe
/// groups (the tansu broker's SQLite storage, for one); the operator then
/// vouches that no member runs.
pub(crate) fn reset(
    k: &KafkaSourceConfig,
    to: &ResetTo,
    only: &[i32],
    force: bool,
) -> Result<Vec<Reset>, KafkaSourceError> {
    let c = consumer(k)?;
    if !force {
        let groups = c.fetch_group_list(Some(&k.group_id), TIMEOUT).map_err(|e| {
            KafkaSourceError::Other(format!(
                "cannot tell whether group {:?} has live members ({e}); stop every member and run again with --force",
                k.group_id
            ))
        })?;
        let members: usize = groups.groups().iter().filter(|g| g.name() == k.group_id).map(|g| g.members().len()).sum();
        if members > 0 {
            return Err(KafkaSourceError::GroupActive { group: k.group_id.clone(), members });
        }
    }
    let parts: Vec<_> = partitions(&c, k)?.into_iter().filter(|(_, p)| only.is_empty() || only.contains(p)).collect();
    if parts.is_empty() {
        return Err(KafkaSourceError::Other(format!("no partition of {:?} matches {only:?}", k.topics)));
    }
    let mut tpl = TopicPartitionList::new();
    for (t, p) in &parts {
        tpl.add_partition(t, *p);
    }
    let before = c.committed_offsets(tpl, TIMEOUT).map_err(KafkaSourceError::client("fetch committed offsets"))?;
    let mut commit = TopicPartitionList::new();
    let mut out = Vec::new();
    for (t, p, target, _) in targets(&c, &parts, to)? {
        commit.add_partition_offset(&t, p, Offset::Offset(target)).map_err(KafkaSourceError::client("reset"))?;
        let from = before.find_partition(&t, p).and_then(|e| match e.offset() {
            Offset::Offset(o) => Some(o),
            _ => None,
        });
        out.push(Reset { partition: partition_name(&t, p), from, to: target });
    }
    c.commit(&commit, CommitMode::Sync).map_err(KafkaSourceError::client("commit the reset offsets"))?;
    Ok(out)
}

/// Where `to` is in each of `parts`, with its high watermark now:
/// `(topic, partition, offset, high)`.
fn targets(
    c: &BaseConsumer,
    parts: &[(String, i32)],
    to: &ResetTo,
) -> Result<Vec<(String, i32, i64, i64)>, KafkaSourceError> {
    let by_time = if let ResetTo::Time(ms) = to {
        let mut q = TopicPartitionList::new();
        for (t, p) in parts {
            q.add_partition_offset(t, *p, Offset::Offset(*ms))
                .map_err(KafkaSourceError::client("offsets for times"))?;
        }
        Some(c.offsets_for_times(q, TIMEOUT).map_err(KafkaSourceError::client("offsets for times"))?)
    } else {
        None
    };
    let mut out = Vec::new();
    let named: Vec<(&str, i32)> = parts.iter().map(|(t, p)| (t.as_str(), *p)).collect();
    let ends = watermarks(c, &named, TIMEOUT).map_err(KafkaSourceError::client("watermarks"))?;
    for ((t, p), (low, high)) in parts.iter().zip(ends) {
        let target = match to {
            ResetTo::Earliest => low,
            ResetTo::Offset(n) => (*n).clamp(low, high),
            ResetTo::Time(_) => match by_time.as_ref().and_then(|l| l.find_partition(t, *p)).map(|e| e.offset()) {
                Some(Offset::Offset(o)) => o.clamp(low, high),
                // No record at or after that time: start at the end.
                _ => high,
            },
        };
        out.push((t.clone(), *p, target, high));
    }
    Ok(out)
}

/// Up to `limit` records of the configured topics from `from` up to each
/// partition's high watermark as it is now, read by assignment: no group
/// is joined and nothing is committed (`sluice shadow`).
pub(crate) fn read_from(
    k: &KafkaSourceConfig,
    from: &ResetTo,
    limit: usize,
) -> Result<Vec<crate::record::Record>, KafkaSourceError> {
    use rdkafka::message::Message;
    let c = consumer(k)?;
    let parts = partitions(&c, k)?;
    let mut tpl = TopicPartitionList::new();
    let mut ends = std::collections::HashMap::new();
    for (t, p, target, high) in targets(&c, &parts, from)? {
        if target < high {
            tpl.add_partition_offset(&t, p, Offset::Offset(target)).map_err(KafkaSourceError::client("assign"))?;
            ends.insert((t, p), high);
        }
    }
    c.assign(&tpl).map_err(KafkaSourceError::client("assign"))?;
    let topics: std::collections::HashMap<String, std::sync::Arc<str>> =
        ends.keys().map(|(t, _)| (t.clone(), std::sync::Arc::from(t.as_str()))).collect();
    let mut out = Vec::new();
    let mut quiet = std::time::Instant::now();
    while !ends.is_empty() && out.len() < limit {
        match c.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                quiet = std::time::Instant::now();
                let key = (m.topic().to_string(), m.partition());
                let Some(high) = ends.get(&key).copied() else { continue };
                if m.offset() < high {
                    let topic = topics.get(&key.0).cloned().unwrap_or_else(|| std::sync::Arc::from(key.0.as_str()));
                    out.extend(super::record::from_message(&m, &topic).map(|r| r.record));
                }
                if m.offset() + 1 >= high {
                    ends.remove(&key);
                }
            }
            Some(Err(e)) => return Err(KafkaSourceError::Other(format!("read: {e}"))),
            None if quiet.elapsed() > TIMEOUT => {
                return Err(KafkaSourceError::Other(format!(
                    "no record for {} s while {} partitions had more to read",
                    TIMEOUT.as_secs(),
                    ends.len()
                )));
            }
            None => {}
        }
    }
    Ok(out)
}
