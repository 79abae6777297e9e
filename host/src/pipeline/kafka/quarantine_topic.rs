//! The quarantine topic (`quarantine.topic`): every quarantined record of a
//! Kafka pipeline is also produced to a topic of the source's cluster, so
//! that repair tooling can consume it where the data lives. The local
//! quarantine keeps it too.
//!
//! The message is the original record: its key and value unchanged (masked
//! fields masked), its own headers, and sluice's context in headers:
//! `sluice.reason`, `sluice.stage`, `sluice.plugin`, `sluice.source`
//! (`topic/partition@offset`), `sluice.pipeline`, `sluice.entry`,
//! `sluice.time`, and `sluice.context`, the whole local entry as a JSON
//! envelope without the payload (the processing version is in it).
//!
//! Custody: a batch's offsets finish only after every entry has its
//! delivery report (`acks=all`). A broker that does not take them makes
//! the partition wait and retry, as a sick sink does; a record the topic
//! refuses for good (too large) is logged and counted, and stays in the
//! local quarantine, which is durable on its own.

use std::time::{Duration, Instant};

use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};

use crate::pipeline::kafka::events::QuarantineTopicAnswered;
use crate::record::Position;
use crate::sink::Answer;
use crate::sink::retry::RetryConfig;
use crate::source::kafka::KafkaSourceError;
use crate::source::kafka::config::KafkaSourceConfig;
use crate::store::quarantine::Entry;
use crate::telemetry::InternalEvent;

pub(crate) struct QuarantineTopic {
    producer: FutureProducer,
    topic: String,
    retry: RetryConfig,
}

impl QuarantineTopic {
    pub(crate) fn new(source: &KafkaSourceConfig, topic: &str) -> Result<QuarantineTopic, KafkaSourceError> {
        let c = crate::source::kafka::client::producer_config(&source.connection, &Default::default())?;
        let producer = c.create().map_err(KafkaSourceError::client("create the quarantine topic's producer"))?;
        Ok(QuarantineTopic { producer, topic: topic.to_string(), retry: RetryConfig::default() })
    }

    /// Produce `entries` until each has a delivery report (or a final
    /// refusal). `false` when `stopping()` came first: the caller must then
    /// leave those records unfinished.
    pub(crate) fn publish(&self, entries: &[&Entry], stopping: &dyn Fn() -> bool) -> bool {
        let mut pending: Vec<&Entry> = entries.to_vec();
        let mut round = 0;
        while !pending.is_empty() {
            let reports: Vec<_> = pending.iter().map(|e| self.send(e)).collect();
            let answers: Vec<Answer> = futures::executor::block_on(futures::future::join_all(reports));
            let mut again = Vec::new();
            for (e, a) in pending.into_iter().zip(answers) {
                QuarantineTopicAnswered { entry: &e.id, topic: &self.topic, answer: &a }.emit();
                if matches!(a, Answer::Retry(_) | Answer::Systemic(_)) {
                    again.push(e);
                }
            }
            pending = again;
            if pending.is_empty() {
                break;
            }
            let until = Instant::now() + self.retry.backoff(round);
            round += 1;
            while Instant::now() < until {
                if stopping() {
                    return false;
                }
                std::thread::sleep(until.saturating_duration_since(Instant::now()).min(Duration::from_millis(50)));
            }
        }
        true
    }

    fn send(&self, e: &Entry) -> impl std::future::Future<Output = Answer> + use<> {
        let source = match &e.position {
            Position::Kafka { topic, partition, offset } => format!("{topic}/{partition}@{offset}"),
            Position::File { path, offset, .. } => format!("{path}@{offset}"),
        };
        let mut context = serde_json::to_value(e).unwrap_or_default();
        if let Some(o) = context.as_object_mut() {
            o.remove("payload");
        }
        let context = context.to_string();
        let plugin = e.plugin.as_ref().map(|p| format!("{}@{}", p.name, p.digest)).unwrap_or_default();
        let mut headers = OwnedHeaders::new();
        for (k, v) in &e.headers {
            headers = headers.insert(Header { key: k, value: Some(&v.to_vec()) });
        }
        for (k, v) in [
            ("sluice.reason", e.reason.as_str()),
            ("sluice.stage", e.stage.as_str()),
            ("sluice.plugin", plugin.as_str()),
            ("sluice.source", source.as_str()),
            ("sluice.pipeline", e.pipeline.as_str()),
            ("sluice.entry", e.id.as_str()),
            ("sluice.time", e.time.as_str()),
            ("sluice.context", context.as_str()),
        ] {
            headers = headers.insert(Header { key: k, value: Some(v) });
        }
        let payload = e.payload.to_vec();
        let key = e.key.as_ref().map(|k| k.to_vec());
        let mut record = FutureRecord::<Vec<u8>, Vec<u8>>::to(&self.topic).payload(&payload).headers(headers);
        if let Some(k) = &key {
            record = record.key(k);
        }
        let sent = self.producer.send_result(record).map_err(|(err, _)| crate::sink::kafka::answer_for(&err));
        async move {
            match sent {
                Err(a) => a,
                Ok(report) => match report.await {
                    Ok(Ok(_)) => Answer::Accepted,
                    Ok(Err((err, _))) => crate::sink::kafka::answer_for(&err),
                    Err(_) => Answer::Systemic("producer closed before the delivery report".into()),
                },
            }
        }
    }
}

/// The driver's quarantine log, for a Kafka pipeline with `quarantine.topic`.
impl crate::pipeline::driver::QuarantineLog for QuarantineTopic {
    fn publish(&self, entries: &[&Entry], stopping: &dyn Fn() -> bool) -> bool {
        QuarantineTopic::publish(self, entries, stopping)
    }
}
