//! Where partitions begin and end, asked for a list of partitions at
//! once.
//!
//! librdkafka's watermark query takes one partition and makes a round trip
//! for it; asked per partition, a member of a thousand partitions made a
//! thousand round trips for each look at its group (the stranded-member
//! watch, the changelog follower, `sluice lag`), and a broker that answers
//! each slowly made that minutes. `offsets_for_times` with the logical
//! timestamps of the earliest (-2) and the latest (-1) offset sends the same
//! ListOffsets request for every partition of a broker together: two
//! requests per broker, whatever the count.

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

/// The low and high watermark of each of `parts`, in their order.
pub(crate) fn watermarks<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    parts: &[(&str, i32)],
    timeout: Duration,
) -> KafkaResult<Vec<(i64, i64)>> {
    if parts.is_empty() {
        return Ok(Vec::new());
    }
    let ends = |logical: Offset| -> KafkaResult<Vec<i64>> {
        let mut asked = TopicPartitionList::with_capacity(parts.len());
        for (topic, partition) in parts {
            asked.add_partition_offset(topic, *partition, logical)?;
        }
        let answered = consumer.offsets_for_times(asked, timeout)?;
        // Read once into a map: `find_partition` is a linear search with a
        // string compare, a million of them for a thousand partitions.
        let elements = answered.elements();
        let mut by_partition = std::collections::HashMap::with_capacity(parts.len());
        for e in &elements {
            e.error()?;
            by_partition.insert((e.topic(), e.partition()), e.offset());
        }
        parts
            .iter()
            .map(|(topic, partition)| match by_partition.get(&(*topic, *partition)) {
                Some(Offset::Offset(o)) => Ok(*o),
                // The broker named no offset: as if the query failed.
                Some(_) => Err(KafkaError::OffsetFetch(RDKafkaErrorCode::OffsetNotAvailable)),
                None => Err(KafkaError::OffsetFetch(RDKafkaErrorCode::UnknownTopicOrPartition)),
            })
            .collect()
    };
    let low = ends(Offset::Beginning)?;
    let high = ends(Offset::End)?;
    Ok(low.into_iter().zip(high).collect())
}
