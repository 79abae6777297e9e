//! The custody rule, for one partition: the committed position is the end
//! of the longest prefix of records that have all passed a door
//! (delivered, duplicate, quarantined, dropped). Records finish out of order
//! (retries, splits, parallel requests); the commit never jumps a gap and
//! never moves backwards, so a restart re-reads every unfinished record.
//!
//! Positions are opaque increasing numbers: a Kafka offset (a record spans
//! `offset..offset + 1`) or a file byte range (a line spans its first byte
//! to the first byte after its line end). The committed value has the Kafka
//! meaning: the next position to read.

use std::collections::VecDeque;

/// The four doors of the custody rule, counted per partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Door {
    Delivered,
    Duplicate,
    Quarantined,
    Dropped,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OffsetError {
    #[error("record {start}..{next} begins before the previous record ends ({last_next})")]
    OutOfOrder { start: u64, next: u64, last_next: u64 },
    #[error("record {start}..{next} is empty or backwards")]
    Empty { start: u64, next: u64 },
    #[error("no record in flight starts at {0}")]
    Unknown(u64),
    #[error("record at {0} already passed a door")]
    AlreadyDone(u64),
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    start: u64,
    next: u64,
    door: Option<Door>,
}

/// Per-partition tracker of records in flight. No I/O: the caller persists
/// [`OffsetTracker::committable`] when it is convenient (periodically,
/// on revoke, on shutdown), and only that value.
#[derive(Debug, Clone)]
pub(crate) struct OffsetTracker {
    committable: u64,
    last_next: u64,
    in_flight: VecDeque<Slot>,
}

impl OffsetTracker {
    /// Start tracking at `position`, where reading (re)starts.
    pub(crate) fn new(position: u64) -> Self {
        OffsetTracker { committable: position, last_next: position, in_flight: VecDeque::new() }
    }

    /// Register a record as read; records must be registered in read order.
    /// Gaps between records (a Kafka compaction hole, bytes skipped) are
    /// allowed: nothing is owed for them.
    pub(crate) fn begin(&mut self, start: u64, next: u64) -> Result<(), OffsetError> {
        if next <= start {
            return Err(OffsetError::Empty { start, next });
        }
        if start < self.last_next {
            return Err(OffsetError::OutOfOrder { start, next, last_next: self.last_next });
        }
        if self.in_flight.is_empty() && start > self.committable {
            // A gap before the first record in flight belongs to nobody.
            self.committable = start;
        }
        self.in_flight.push_back(Slot { start, next, door: None });
        self.last_next = next;
        Ok(())
    }

    /// The record starting at `start` passed `door`. Returns the new
    /// committable position when it moved.
    pub(crate) fn finish(&mut self, start: u64, door: Door) -> Result<Option<u64>, OffsetError> {
        let idx = self.in_flight.binary_search_by_key(&start, |s| s.start).map_err(|_| OffsetError::Unknown(start))?;
        let slot = &mut self.in_flight[idx];
        if slot.door.is_some() {
            return Err(OffsetError::AlreadyDone(start));
        }
        slot.door = Some(door);
        let before = self.committable;
        // The custody rule itself: advance only over a finished prefix.
        while let Some(front) = self.in_flight.front() {
            if front.door.is_none() {
                break;
            }
            self.committable = front.next;
            self.in_flight.pop_front();
        }
        Ok((self.committable != before).then_some(self.committable))
    }

    /// The position to commit: every record below it passed a door.
    pub(crate) fn committable(&self) -> u64 {
        self.committable
    }

    /// The first record still owed, if any: what blocks the commit.
    #[cfg(test)]
    fn blocking(&self) -> Option<u64> {
        self.in_flight.iter().find(|s| s.door.is_none()).map(|s| s.start)
    }

    #[cfg(test)]
    fn in_flight(&self) -> usize {
        self.in_flight.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn commits_only_the_contiguous_finished_prefix() {
        let mut t = OffsetTracker::new(100);
        for (s, n) in [(100, 110), (110, 125), (125, 126), (130, 140)] {
            t.begin(s, n).unwrap_or_else(|e| panic!("{e}"));
        }
        assert_eq!(t.finish(110, Door::Delivered), Ok(None), "a gap at 100 holds the commit");
        assert_eq!(t.blocking(), Some(100));
        assert_eq!(t.finish(100, Door::Quarantined), Ok(Some(125)));
        assert_eq!(t.finish(130, Door::Dropped), Ok(None));
        assert_eq!(t.finish(125, Door::Duplicate), Ok(Some(140)), "the 126..130 hole is owed by nobody");
        assert_eq!(t.in_flight(), 0);
        assert_eq!(t.finish(125, Door::Duplicate), Err(OffsetError::Unknown(125)));
    }

    #[test]
    fn rejects_misuse() {
        let mut t = OffsetTracker::new(0);
        assert!(t.begin(5, 5).is_err());
        assert!(t.begin(0, 10).is_ok());
        assert!(matches!(t.begin(9, 12), Err(OffsetError::OutOfOrder { .. })));
        assert!(t.finish(0, Door::Delivered).is_ok());
        assert_eq!(t.committable(), 10);
        // A tracker started past a gap commits from the first record read.
        let mut t = OffsetTracker::new(0);
        assert!(t.begin(50, 51).is_ok());
        assert_eq!(t.committable(), 50);
    }

    proptest! {
        /// Random record sizes and gaps, finished in a random order: the
        /// committable position never moves backwards, never passes an
        /// unfinished record, and ends at the end of the last record.
        #[test]
        fn never_jumps_a_gap_never_moves_back(
            spans in proptest::collection::vec((0u64..3, 1u64..50), 1..200),
            order_seed in proptest::collection::vec(any::<u64>(), 200),
        ) {
            let mut t = OffsetTracker::new(0);
            let mut records = Vec::new();
            let mut pos = 0;
            for (gap, len) in spans {
                pos += gap;
                t.begin(pos, pos + len).map_err(|e| TestCaseError::fail(e.to_string()))?;
                records.push((pos, pos + len));
                pos += len;
            }
            let mut order: Vec<usize> = (0..records.len()).collect();
            order.sort_by_key(|i| order_seed[*i % order_seed.len()].wrapping_mul(*i as u64 + 1));
            let mut done = vec![false; records.len()];
            let mut last = t.committable();
            for i in order {
                t.finish(records[i].0, Door::Delivered).map_err(|e| TestCaseError::fail(e.to_string()))?;
                done[i] = true;
                let c = t.committable();
                prop_assert!(c >= last, "moved backwards: {} -> {}", last, c);
                // Every record that ends at or below c is done...
                for (j, (_, next)) in records.iter().enumerate() {
                    if *next <= c { prop_assert!(done[j], "committed {} past unfinished record {:?}", c, records[j]); }
                }
                // ...and c is as far as the finished prefix allows.
                let prefix_end = records.iter().zip(&done).take_while(|(_, d)| **d).last().map(|(r, _)| r.1);
                if let Some(end) = prefix_end { prop_assert!(c >= end, "held back at {} though {} is finished", c, end); }
                last = c;
            }
            prop_assert_eq!(t.committable(), records.last().map(|r| r.1).unwrap_or(0));
            prop_assert_eq!(t.blocking(), None);
        }
    }
}
