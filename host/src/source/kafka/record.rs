//! Kafka messages as plugin records. The position (topic, partition,
//! offset) gives the default event id; the message timestamp is handed to
//! plugins as the source timestamp.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use rdkafka::Message;
use rdkafka::message::{BorrowedMessage, Headers};

use crate::record::{Position, Record};

/// A message copied out of librdkafka's buffers, so that its buffer is
/// released at once, not when the batch finishes.
#[derive(Debug, Clone)]
pub(crate) struct KafkaRecord {
    pub offset: i64,
    pub record: Record,
}

/// A batch of messages being copied out of librdkafka: every payload and
/// key into one buffer, so that a batch costs one allocation for its bytes
/// and each record's payload is a slice of it.
#[derive(Default)]
pub(crate) struct MessageBatch {
    data: Vec<u8>,
    messages: Vec<Copied>,
}

/// One message's place in the batch's buffer.
struct Copied {
    offset: i64,
    partition: i32,
    payload: Range<usize>,
    key: Option<Range<usize>>,
    headers: Vec<(String, Vec<u8>)>,
    source_timestamp: Option<i64>,
}

impl MessageBatch {
    /// Room for `messages` more messages and `bytes` more bytes.
    pub(crate) fn reserve(&mut self, messages: usize, bytes: usize) {
        self.data.reserve(bytes);
        self.messages.reserve(messages);
    }

    pub(crate) fn len(&self) -> usize {
        self.messages.len()
    }

    /// The bytes copied so far.
    pub(crate) fn bytes(&self) -> usize {
        self.data.len()
    }

    /// Copy `m` in; its buffer in librdkafka may go once this returns.
    pub(crate) fn push(&mut self, m: &BorrowedMessage<'_>) {
        let mut copy = |b: &[u8]| {
            let start = self.data.len();
            self.data.extend_from_slice(b);
            start..self.data.len()
        };
        let payload = copy(m.payload().unwrap_or_default());
        let key = m.key().map(&mut copy);
        // Headers are rare and small: copied as they are.
        let headers = m
            .headers()
            .map(|hs| hs.iter().map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec).unwrap_or_default())).collect())
            .unwrap_or_default();
        self.messages.push(Copied {
            offset: m.offset(),
            partition: m.partition(),
            payload,
            key,
            headers,
            source_timestamp: m.timestamp().to_millis().map(|ms| ms.saturating_mul(1_000_000)),
        });
    }

    /// The records, in the order pushed. `topic`: the partition's topic
    /// name, shared by its records (the same as `m.topic()`).
    pub(crate) fn finish(self, topic: &Arc<str>) -> impl Iterator<Item = KafkaRecord> + '_ {
        let data = Bytes::from(self.data);
        self.messages.into_iter().map(move |c| KafkaRecord {
            offset: c.offset,
            record: Record {
                payload: data.slice(c.payload),
                key: c.key.map(|k| data.slice(k)),
                headers: c.headers,
                source_timestamp: c.source_timestamp,
                position: Position::Kafka { topic: topic.clone(), partition: c.partition, offset: c.offset },
                event_id: None,
                timestamp: None,
                sinks: None,
            },
        })
    }
}

/// One message as a record, on its own (not on the hot path: a batch of
/// one).
pub(crate) fn from_message(m: &BorrowedMessage<'_>, topic: &Arc<str>) -> Option<KafkaRecord> {
    let mut batch = MessageBatch::default();
    batch.push(m);
    batch.finish(topic).next()
}
