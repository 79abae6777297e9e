//! A Kafka message as a plugin record. The position (topic, partition,
//! offset) gives the default event id; the message timestamp is handed to
//! plugins as the source timestamp.

use std::sync::Arc;

use rdkafka::Message;
use rdkafka::message::{BorrowedMessage, Headers};

use crate::plugin::{Position, Record};

/// A message copied out of librdkafka's buffers, so that its buffer is
/// released at once, not when the batch finishes.
#[derive(Debug, Clone)]
pub struct KafkaRecord {
    pub offset: i64,
    pub record: Record,
}

/// `topic`: the partition's topic name, shared by its records (the same as
/// `m.topic()`). The payload is copied once, out of librdkafka's buffer.
pub fn from_message(m: &BorrowedMessage<'_>, topic: &Arc<str>) -> KafkaRecord {
    let headers = m
        .headers()
        .map(|hs| hs.iter().map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec).unwrap_or_default())).collect())
        .unwrap_or_default();
    KafkaRecord {
        offset: m.offset(),
        record: Record {
            payload: m.payload().map(<[u8]>::to_vec).unwrap_or_default(),
            key: m.key().map(<[u8]>::to_vec),
            headers,
            source_timestamp: m.timestamp().to_millis().map(|ms| ms.saturating_mul(1_000_000)),
            position: Position::Kafka { topic: topic.clone(), partition: m.partition(), offset: m.offset() },
            event_id: None,
            timestamp: None,
        },
    }
}
