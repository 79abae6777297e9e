//! The `kafka` sink: each event produced to a topic with `acks=all` and
//! idempotence, keyed by its event id. An event is accepted on its delivery
//! report, never when it is queued: a queued record is still only in this
//! process's memory.

use std::time::Duration;

#[cfg(feature = "kafka")]
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
#[cfg(feature = "kafka")]
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};
use serde::Deserialize;

use super::encoding::EncodingConfig;
use super::guard::GuardConfig;
#[cfg(feature = "kafka")]
use super::http::body::Framing;
use super::http::config::Payload;
#[cfg(feature = "kafka")]
use super::http::response::profile::Render;
#[cfg(feature = "kafka")]
use super::{Answer, Attempt, Delivery, Sink, SinkError};
use crate::problem::Problems;
use crate::source::kafka::connection::KafkaConnection;
#[cfg(feature = "kafka")]
use crate::source::kafka::connection::PropertyValue;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KafkaSinkConfig {
    /// Brokers, TLS, SASL and librdkafka producer properties (`linger.ms =
    /// 5`; `_` for `.` in environment overrides): the source's type.
    #[serde(flatten)]
    pub connection: KafkaConnection,
    /// The topic every event is produced to (it must exist).
    pub topic: String,
    /// What the record value is (the record key is the event id).
    #[serde(default)]
    pub payload: Payload,
    /// How long librdkafka may try before it reports a record failed
    /// (`message.timeout.ms`); a failure is then sent again by sluice.
    #[schemars(with = "crate::units::DurationText")]
    #[serde(default = "default_timeout", deserialize_with = "crate::units::duration")]
    pub message_timeout: Duration,
    /// Write each record value in Avro or Protobuf, framed for the
    /// `[schema_registry]` (which it needs); unset: the JSON of `payload`.
    #[serde(default)]
    pub encoding: Option<EncodingConfig>,
    #[serde(flatten)]
    pub guard: GuardConfig,
}

fn default_timeout() -> Duration {
    Duration::from_secs(30)
}

/// Properties the sink's guarantee depends on.
pub(crate) const OWNED: [(&str, &str); 3] = [
    ("acks", "the sink's guarantee depends on it"),
    ("enable.idempotence", "the sink's guarantee depends on it"),
    ("bootstrap.servers", "use sink.brokers"),
];

impl KafkaSinkConfig {
    /// Every problem, keyed under `[sink]`.
    pub(crate) fn validate(&self, p: &mut Problems) {
        if self.topic.is_empty() || !self.topic.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) {
            p.add("topic", format!("{:?} is not a valid topic name", self.topic));
        }
        self.connection.validate("sink", &OWNED, p);
        self.guard.validate(p);
        if let Some(e) = &self.encoding {
            p.under("encoding", |p| e.validate(p));
        }
    }

    /// Paths made absolute; `_` in property names from the environment
    /// read as `.`.
    pub(crate) fn absolutize(&mut self, abs: &dyn Fn(&std::path::Path) -> std::path::PathBuf) {
        self.connection.absolutize(abs);
    }
}

#[cfg(feature = "kafka")]
pub(crate) struct KafkaSink {
    producer: FutureProducer,
    topic: String,
    payload: Payload,
    name: String,
    encoding: Option<RegistryEncoding>,
}

/// `[sink.encoding]` as a running sink holds it: the schema, and its id
/// once the registry gave it.
#[cfg(feature = "kafka")]
struct RegistryEncoding {
    schema: super::encoding::Schema,
    schema_text: String,
    schema_type: &'static str,
    subject: String,
    register: bool,
    #[cfg(feature = "http")]
    client: crate::schema_registry::client::RegistryClient,
    id: std::sync::OnceLock<u32>,
}

#[cfg(feature = "kafka")]
impl RegistryEncoding {
    /// The schema's id, asked of the registry at the first batch and
    /// kept; the registry's error (systemic) while it cannot say.
    fn id(&self) -> Result<u32, String> {
        if let Some(id) = self.id.get() {
            return Ok(*id);
        }
        #[cfg(feature = "http")]
        {
            let id = self
                .client
                .subject_id(&self.subject, self.schema_type, &self.schema_text, self.register)
                .map_err(|e| e.to_string())?;
            Ok(*self.id.get_or_init(|| id))
        }
        #[cfg(not(feature = "http"))]
        Err("[sink.encoding] needs the `http` feature for the schema registry's client".into())
    }

    /// `check --connect`: the schema's id under its subject, looked up
    /// and never registered (a check writes nothing).
    fn probe(&self) -> Result<String, String> {
        #[cfg(feature = "http")]
        {
            use crate::schema_registry::resolver::RegistryError;
            match self.client.subject_id(&self.subject, self.schema_type, &self.schema_text, false) {
                Ok(id) => Ok(format!("schema id {id} under subject {:?}", self.subject)),
                Err(RegistryError::Subject { status: 404, .. }) if self.register => Ok(format!(
                    "the registry answers; the schema is not under subject {:?} yet: the first batch registers it",
                    self.subject
                )),
                Err(e) => Err(e.to_string()),
            }
        }
        #[cfg(not(feature = "http"))]
        Err("[sink.encoding] needs the `http` feature for the schema registry's client".into())
    }
}

#[cfg(feature = "kafka")]
impl KafkaSink {
    pub(crate) fn new(
        cfg: &KafkaSinkConfig,
        registry: Option<&crate::schema_registry::config::SchemaRegistryConfig>,
    ) -> Result<KafkaSink, SinkError> {
        let setup = |message: String| SinkError::Setup { target: format!("kafka {}", cfg.topic), message };
        let encoding = match (&cfg.encoding, registry) {
            (None, _) => None,
            (Some(_), None) => return Err(setup("[sink.encoding] needs a [schema_registry] section".into())),
            (Some(e), Some(r)) => {
                let schema =
                    super::encoding::Schema::compile(e).map_err(|(k, m)| setup(format!("encoding.{k}: {m}")))?;
                let subject = schema.subject(e.subject, &cfg.topic);
                #[cfg(not(feature = "http"))]
                let _ = r;
                Some(RegistryEncoding {
                    schema,
                    schema_text: e.schema.clone(),
                    schema_type: e.format.schema_type(),
                    subject,
                    register: e.register,
                    #[cfg(feature = "http")]
                    client: crate::schema_registry::client::RegistryClient::new(r).map_err(|e| setup(e.to_string()))?,
                    id: std::sync::OnceLock::new(),
                })
            }
        };
        let mut properties = cfg.connection.properties.clone();
        properties.insert("message.timeout.ms".into(), PropertyValue::Int(cfg.message_timeout.as_millis() as i64));
        let client = crate::source::kafka::client::producer_config(&cfg.connection, &properties)
            .map_err(|e| setup(e.to_string()))?;
        let producer: FutureProducer = client.create().map_err(|e| setup(e.to_string()))?;
        Ok(KafkaSink {
            producer,
            topic: cfg.topic.clone(),
            payload: cfg.payload.clone(),
            name: match &encoding {
                Some(e) => format!(
                    "kafka {} {} ({} of subject {})",
                    cfg.connection.brokers, cfg.topic, e.schema_type, e.subject
                ),
                None => format!("kafka {} {}", cfg.connection.brokers, cfg.topic),
            },
            encoding,
        })
    }
}

#[cfg(feature = "kafka")]
/// Errors about the record itself are final; the rest is the cluster's.
pub(crate) fn answer_for(e: &KafkaError) -> Answer {
    let code = e.rdkafka_error_code();
    match code {
        Some(
            RDKafkaErrorCode::MessageSizeTooLarge
            | RDKafkaErrorCode::InvalidMessageSize
            | RDKafkaErrorCode::InvalidMessage
            | RDKafkaErrorCode::InvalidRecord
            | RDKafkaErrorCode::MessageBatchTooLarge,
        ) => Answer::Rejected(format!("kafka: {e}")),
        _ => Answer::Systemic(format!("kafka: {e}")),
    }
}

#[cfg(feature = "kafka")]
/// The answers of a batch's records once each is reported (or was refused
/// before it was sent): a record is accepted on its delivery report, never
/// when queued. The batch counts as one failed request when nothing got
/// through.
pub(crate) fn reported(pending: Vec<Result<DeliveryFuture, Answer>>) -> Attempt {
    let answers: Vec<Answer> =
        futures::executor::block_on(futures::future::join_all(pending.into_iter().map(|p| async move {
            match p {
                Err(answer) => answer,
                Ok(report) => match report.await {
                    Ok(Ok(_)) => Answer::Accepted,
                    Ok(Err((e, _))) => answer_for(&e),
                    Err(_) => Answer::Systemic("kafka: producer closed before the delivery report".into()),
                },
            }
        })));
    let failed = answers.iter().all(|a| matches!(a, Answer::Systemic(_)));
    Attempt { answers, requests_ok: u32::from(!failed), requests_failed: u32::from(failed), ..Attempt::default() }
}

#[cfg(feature = "kafka")]
/// `topic`'s metadata through `producer`: the brokers answer, take the
/// credentials, and know the topic.
pub(crate) fn probe_topic(producer: &FutureProducer, topic: &str) -> Result<String, String> {
    use rdkafka::producer::Producer;
    let md = producer
        .client()
        .fetch_metadata(Some(topic), std::time::Duration::from_secs(5))
        .map_err(|e| format!("brokers: {e}"))?;
    match md.topics().iter().find(|t| t.name() == topic) {
        Some(t) if t.error().is_none() => {
            Ok(format!("{} broker(s); topic {topic:?} has {} partitions", md.brokers().len(), t.partitions().len()))
        }
        _ => Err(format!("topic {topic:?} does not exist on the brokers")),
    }
}

#[cfg(feature = "kafka")]
impl Sink for KafkaSink {
    fn deliver(&self, batch: &[Delivery]) -> Result<Attempt, SinkError> {
        let framing = Framing { render: Render::Ndjson, payload: &self.payload, index: None, labels: None };
        let mut pending = Vec::with_capacity(batch.len());
        // The schema's id, once per sink: without it no record can be
        // written, and the registry's outage is the batch's, not theirs.
        let id = match self.encoding.as_ref().map(RegistryEncoding::id).transpose() {
            Ok(id) => id,
            Err(e) => {
                let answer = Answer::Systemic(format!("schema registry: {e}"));
                return Ok(reported(batch.iter().map(|_| Err(answer.clone())).collect()));
            }
        };
        let mut json = Vec::new();
        for d in batch {
            let mut value = Vec::with_capacity(d.event().len() + 64);
            match (&self.encoding, id) {
                (Some(e), Some(id)) => {
                    json.clear();
                    framing.event(d, &mut json);
                    if let Err(reason) = e.schema.encode(id, &json, &mut value) {
                        pending.push(Err(Answer::Rejected(format!("{} encoding: {reason}", e.schema_type))));
                        continue;
                    }
                }
                _ => framing.event(d, &mut value),
            }
            let record = FutureRecord::to(&self.topic).key(d.id.as_bytes()).payload(&value);
            // Queue full or a local refusal: nothing was sent.
            pending.push(self.producer.send_result(record).map_err(|(e, _)| answer_for(&e)));
        }
        Ok(reported(pending))
    }

    fn describe(&self) -> String {
        self.name.clone()
    }

    fn probe(&self) -> Result<String, String> {
        let topic = probe_topic(&self.producer, &self.topic)?;
        match &self.encoding {
            Some(e) => Ok(format!("{topic}; {}", e.probe()?)),
            None => Ok(topic),
        }
    }
}
