//! `dedup.repartition = true`: exact topic-wide dedup across instances, as
//! Kafka Streams makes it with its repartition topics.
//!
//! Under the plain topic scope an instance learns the other instances' ids
//! from the changelog it follows, so a copy read on one instance within
//! the follower's lag of its original on another passes. Here every
//! instance runs two group members, each on the one custody path
//! (`super::serve`, the partition driver):
//!
//! - **the front**, in the pipeline's group on the source topics, runs the
//!   plugins and produces each event to the internal topic
//!   `<group_id>-by-id`, keyed by its id and placed by Kafka's own
//!   partitioner for keys (murmur2, as Java clients place them): every
//!   copy of an id, from any source partition and any instance, lands on
//!   the same partition there. That topic is the front's sink, so the
//!   usual rule holds: a source offset is committed only once the events
//!   of every record below it are acknowledged there (`acks=all`,
//!   idempotent). Its dedup window is local and per partition, without a
//!   changelog: it only spares the internal topic a re-send; what a new
//!   owner reads again is produced again and absorbed behind it.
//! - **the back**, in the group `<group_id>-by-id` on that topic, takes
//!   each record as the event the front checked (the id from the key, the
//!   time from the value's head, the body as it was written: no plugin and
//!   no parse), decides it with the partition scope and the pipeline's
//!   changelog, and delivers it to the configured sink. Its offsets follow
//!   the contiguous rule; with `source.transactions` its commits fence.
//!
//! So the copies of an id meet on one back partition, owned by one member
//! at a time, whose window decides them in order: none passes twice, save
//! the at-most-one-batch a member's death costs under the changelog (and
//! no more than that with transactions). A front that was killed or fenced
//! costs nothing downstream: whatever it produces twice is a copy the back
//! absorbs.
//!
//! The internal topic's value is `by_id_value`'s.

use std::time::Duration;

use rdkafka::producer::{FutureProducer, FutureRecord};

use super::by_id_value::{HEAD, write_head};
use super::member::{Common, Serving, serve};
use crate::config::Config;
use crate::delivery::Delivery;
use crate::pipeline::error::PipelineError;
use crate::pipeline::setup::open_sinks;
use crate::sink::breaker::BreakerConfig;
use crate::sink::kafka::{answer_for, probe_topic, reported};
use crate::sink::named::Sinks;
use crate::sink::retry::RetryConfig;
use crate::sink::retrying::RetryingSink;
use crate::sink::{Attempt, Sink, SinkError};
use crate::source::kafka::config::KafkaSourceConfig;
use crate::source::kafka::connection::PropertyValue;
use crate::source::kafka::{KafkaSourceError, admin, client};
use crate::store::dedup::config::ChangelogConfig;
use crate::store::dedup::config::DedupScope;

/// The internal topic of the group `group`, and the back's group.
use crate::source::kafka::config::repartition_topic;

/// The front's sink: each event to the internal topic, keyed by its id.
/// Accepted on the delivery report (`acks=all`), as the kafka sink.
pub(crate) struct ByIdSink {
    producer: FutureProducer,
    topic: String,
    name: String,
}

/// librdkafka places a keyed record by murmur2 of its key, as Java clients
/// do: every instance agrees, whatever else it sets.
const PARTITIONER: &str = "murmur2";

// Not idempotent, unlike every other producer of sluice: an idempotent
// producer holds at most 5 requests in flight per broker, and librdkafka's
// broker thread polls without sleeping while it waits for one to come back
// (measured: a repartitioned run took 80–96 µs of CPU per record against
// tansu with it, 16–18 µs without). What idempotence guards against here
// costs nothing: a retry that writes an event twice writes a copy the back
// absorbs, and the order of the internal topic's records decides nothing. An
// event is still accepted only on its delivery report, with `acks=all`.

impl ByIdSink {
    pub(crate) fn new(source: &KafkaSourceConfig, topic: &str) -> Result<ByIdSink, SinkError> {
        let setup = |message: String| SinkError::Setup { target: format!("kafka {topic}"), message };
        let properties = [
            ("partitioner".to_string(), PropertyValue::Text(PARTITIONER.into())),
            ("message.timeout.ms".to_string(), PropertyValue::Int(30_000)),
            ("enable.idempotence".to_string(), PropertyValue::Bool(false)),
        ]
        .into_iter()
        .collect();
        let producer: FutureProducer = client::producer_config(&source.connection, &properties)
            .and_then(|c| c.create().map_err(KafkaSourceError::client("create the producer")))
            .map_err(|e| setup(e.to_string()))?;
        Ok(ByIdSink {
            producer,
            topic: topic.to_string(),
            name: format!("kafka {} {topic}", source.connection.brokers),
        })
    }
}

impl Sink for ByIdSink {
    fn deliver(&self, batch: &[Delivery]) -> Result<Attempt, SinkError> {
        // One buffer for the batch's values: librdkafka copies each value
        // as it is queued.
        let mut value = Vec::with_capacity(HEAD + 512);
        let pending: Vec<_> = batch
            .iter()
            .map(|d| {
                value.clear();
                write_head(d.timestamp, d.sinks(), &mut value);
                value.extend_from_slice(d.event());
                let record = FutureRecord::to(&self.topic).key(d.id.as_bytes()).payload(&value);
                // Queue full or a local refusal: nothing was sent.
                self.producer.send_result(record).map_err(|(e, _)| answer_for(&e))
            })
            .collect();
        Ok(reported(pending))
    }

    fn describe(&self) -> String {
        self.name.clone()
    }

    fn probe(&self) -> Result<String, String> {
        probe_topic(&self.producer, &self.topic)
    }
}

/// The front's config (and its source's, which it holds too): the
/// pipeline's, deciding each partition's ids locally (no changelog, no
/// follower, no transactions: what it does twice, the back absorbs).
fn front(cfg: &Config, source: &KafkaSourceConfig) -> (Config, KafkaSourceConfig) {
    let mut cfg = cfg.clone();
    cfg.dedup.scope = DedupScope::Partition;
    cfg.dedup.repartition = false;
    cfg.dedup.changelog = ChangelogConfig { enabled: false, ..cfg.dedup.changelog };
    let source = KafkaSourceConfig { transactions: false, ..source.clone() };
    cfg.source = crate::source::config::SourceConfig::Kafka(Box::new(source.clone()));
    (cfg, source)
}

/// The back's config (and its source's, which it holds too): the internal
/// topic in a group of its own, no plugins, the partition scope with the
/// pipeline's changelog.
fn back(cfg: &Config, source: &KafkaSourceConfig, topic: &str) -> (Config, KafkaSourceConfig) {
    let mut back = cfg.clone();
    back.plugins = Vec::new();
    back.dedup.scope = DedupScope::Partition;
    back.dedup.repartition = false;
    // The pipeline's changelog keeps its name: the back is the only member
    // that writes one.
    back.dedup.changelog.topic = cfg.changelog_topic();
    let source = KafkaSourceConfig { topics: vec![topic.to_string()], group_id: topic.to_string(), ..source.clone() };
    back.source = crate::source::config::SourceConfig::Kafka(Box::new(source.clone()));
    (back, source)
}

/// A repartitioned pipeline's two sides, for `sluice quarantine replay`:
/// an entry the front quarantined (a plugin's rejection, a refused record)
/// is replayed through the front again, into the internal topic, so that
/// the back decides its ids as it decides every other copy; an entry the
/// back quarantined (its sink refused the event) is replayed through the
/// back, as the event it was.
pub(crate) struct Sides {
    pub front: Config,
    front_source: KafkaSourceConfig,
    pub back: Config,
    back_source: KafkaSourceConfig,
    /// The front's sink: the internal topic.
    pub front_sink: Sinks,
    topic: String,
}

impl Sides {
    /// `None` unless `cfg` is repartitioned.
    pub(crate) fn of(cfg: &Config) -> Result<Option<Sides>, PipelineError> {
        match &cfg.source {
            crate::source::config::SourceConfig::Kafka(source) if cfg.dedup.repartition => {
                Sides::new(cfg, source).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// The two sides of `cfg`, whose source is `source`; the front's sink
    /// connected.
    fn new(cfg: &Config, source: &KafkaSourceConfig) -> Result<Sides, PipelineError> {
        let topic = repartition_topic(&source.group_id);
        let (front, front_source) = front(cfg, source);
        let (back, back_source) = back(cfg, source, &topic);
        let front_sink = Sinks::one(RetryingSink::new(
            Box::new(ByIdSink::new(source, &topic)?),
            RetryConfig::default(),
            BreakerConfig::default(),
        ));
        Ok(Sides { front, front_source, back, back_source, front_sink, topic })
    }

    /// Whether the back quarantined the record at `position`.
    pub(crate) fn is_back(&self, position: &crate::record::Position) -> bool {
        matches!(position, crate::record::Position::Kafka { topic, .. } if **topic == *self.topic)
    }
}

/// Create the internal topic when it is missing: as many partitions as the
/// source topics have (the back's parallelism), kept as long as the source
/// keeps a record.
fn ensure_topic(
    common: &Common<'_>,
    source: &KafkaSourceConfig,
    topic: &str,
    factor: u32,
) -> Result<(), PipelineError> {
    let failed = |what: String| PipelineError::Config(format!("dedup.repartition: topic {topic:?}: {what}"));
    let mut backoff = Duration::from_millis(500);
    let existing = loop {
        match admin::partition_count(source, topic) {
            Ok(n) => break n,
            Err(e) if common.stop.requested() => return Err(failed(e.to_string())),
            Err(e) => {
                tracing::warn!(topic, "cannot look up the internal topic yet, retrying in {backoff:?}: {e}");
                let until = std::time::Instant::now() + backoff;
                while std::time::Instant::now() < until && !common.stop.requested() {
                    std::thread::sleep(Duration::from_millis(50));
                }
                backoff = (backoff * 2).min(Duration::from_secs(10));
            }
        }
    };
    if existing.is_some() {
        return Ok(());
    }
    let partitions = admin::source_partition_count(source).map_err(|e| failed(e.to_string()))?.max(1);
    let retention = common.dedup.window().saturating_mul(factor);
    let configs = [("retention.ms", retention.as_millis().to_string()), ("cleanup.policy", "delete".to_string())];
    admin::create_topic(source, topic, partitions, &configs).map_err(|e| {
        failed(format!(
            "it does not exist and cannot be created ({e}): create it ({partitions} partitions, retention.ms {})",
            retention.as_millis()
        ))
    })?;
    tracing::info!(topic, partitions, "dedup.repartition: internal topic created");
    Ok(())
}

/// Run the front and the back of `cfg` until `stop`; either one's end
/// stops the other. Ready when both are.
pub(super) fn run(common: &Common<'_>, cfg: &Config, source: &KafkaSourceConfig) -> Result<(), PipelineError> {
    ensure_topic(common, source, &repartition_topic(&source.group_id), cfg.dedup.changelog.retention_factor)?;
    let sides = Sides::new(cfg, source)?;
    let back_sink = open_sinks(cfg, common.runtime)?;
    let ready = [std::sync::atomic::AtomicBool::new(false), std::sync::atomic::AtomicBool::new(false)];
    let set = |i: usize, r: bool| {
        use std::sync::atomic::Ordering::SeqCst;
        ready[i].store(r, SeqCst);
        common.health.set_ready(ready[0].load(SeqCst) && ready[1].load(SeqCst));
    };
    let (front_ready, back_ready) = (|r| set(0, r), |r| set(1, r));
    std::thread::scope(|s| {
        let front = std::thread::Builder::new().name("sluice-front".into()).spawn_scoped(
            s,
            crate::telemetry::labels::inherit(|| {
                // The run's health is the back's watchdog's: the back is
                // where the sink is.
                let serving = Serving {
                    cfg: &sides.front,
                    source: &sides.front_source,
                    sinks: &sides.front_sink,
                    ready: &front_ready,
                    watched: None,
                    reads_events: false,
                };
                let result = serve(common, &serving);
                // However the front ended (a failure before its member even
                // started), the back does not run on without it.
                common.stop.request();
                result
            }),
        );
        let front = match front {
            Ok(f) => f,
            Err(e) => return Err(PipelineError::Panicked(format!("cannot start the front: {e}"))),
        };
        let serving = Serving {
            cfg: &sides.back,
            source: &sides.back_source,
            sinks: &back_sink,
            ready: &back_ready,
            watched: Some(common.health),
            reads_events: true,
        };
        let back = serve(common, &serving);
        common.stop.request();
        let front = front.join().unwrap_or_else(|_| Err(PipelineError::Panicked("the front".into())));
        back.and(front)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_front_decides_locally_and_the_back_reads_the_internal_topic_with_the_changelog() {
        let text = "[pipeline]\nname = \"k\"\nstate_dir = \"s\"\n[source]\ntype = \"kafka\"\nbrokers = \"b:9092\"\n\
                    topics = [\"logs\"]\ngroup_id = \"g\"\ntransactions = true\n[sink]\ntype = \"stdout\"\n\
                    [dedup]\nscope = \"topic\"\nrepartition = true\n";
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("k.toml");
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
        let cfg = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let crate::source::config::SourceConfig::Kafka(source) = &cfg.source else { panic!("kafka") };
        let (f, fs) = front(&cfg, source);
        assert_eq!(
            (f.dedup.scope, f.dedup.repartition, f.dedup.changelog.enabled),
            (DedupScope::Partition, false, false)
        );
        assert!(!fs.transactions && fs.topics == ["logs"] && fs.group_id == "g");
        let (b, bs) = back(&cfg, source, &repartition_topic("g"));
        assert_eq!((b.dedup.scope, b.dedup.repartition), (DedupScope::Partition, false));
        assert!(b.plugins.is_empty());
        assert_eq!(b.dedup.changelog_topic(cfg.source.kafka_group()).as_deref(), Some("g-dedup-changelog"));
        assert!(bs.transactions && bs.topics == ["g-by-id"] && bs.group_id == "g-by-id");
    }
}
