//! The value of `dedup.repartition`'s internal topic: what a front writes
//! and a back reads, apart from both so that the partition task (which
//! reads it) does not import the run that starts the two halves.
//!
//! The internal topic's value is `[1][has time][time: i64 big-endian
//! nanoseconds][body]`: a fixed head, so the back slices the body out of
//! its batch's buffer, and no header is allocated per record. An event a
//! plugin routed (`Event::to_sinks`) is written `[2][has time][time][route
//! length: u32 big-endian][route][body]`, and the back routes it as the
//! plugin said; both versions are read.

use crate::record::{EventId, Record};

/// The first byte of every value the front writes: the format's version.
const VERSION: u8 = 1;
/// The version of an event that carries a plugin's route.
const ROUTED: u8 = 2;
/// The value's head: the version, whether the event has a time, the time.
pub(super) const HEAD: usize = 10;

/// Append the head of an event's value to `out`, with its route if a
/// plugin named one.
pub(super) fn write_head(timestamp: Option<i64>, route: Option<&[u8]>, out: &mut Vec<u8>) {
    out.push(if route.is_some() { ROUTED } else { VERSION });
    out.push(u8::from(timestamp.is_some()));
    out.extend_from_slice(&timestamp.unwrap_or(0).to_be_bytes());
    if let Some(route) = route {
        // At most `sluice_abi::MAX_ROUTE_BYTES`: the contract bounds it.
        out.extend_from_slice(&(route.len() as u32).to_be_bytes());
        out.extend_from_slice(route);
    }
}

/// Make a record read from the internal topic the event its front wrote:
/// its id from the key, its time from the value's head, its payload the
/// body (a slice of the same buffer). `Err`: no front wrote it (the
/// reason the record is quarantined with).
pub(crate) fn decode(record: &mut Record) -> Result<(), String> {
    let head = record.payload.get(..HEAD).ok_or("shorter than the head sluice's front writes")?;
    if head[0] != VERSION && head[0] != ROUTED {
        return Err(format!(
            "its head says version {}, not {VERSION} or {ROUTED}: not written by this sluice's front",
            head[0]
        ));
    }
    let mut body_at = HEAD;
    if head[0] == ROUTED {
        let mut len = [0u8; 4];
        len.copy_from_slice(record.payload.get(HEAD..HEAD + 4).ok_or("its route's length is cut short")?);
        let end = HEAD + 4 + u32::from_be_bytes(len) as usize;
        let route = record.payload.get(HEAD + 4..end).ok_or("its route is cut short")?;
        if let Some(why) = sluice_abi::route_error(route) {
            return Err(format!("its route {why}"));
        }
        record.sinks = Some(record.payload.slice(HEAD + 4..end));
        body_at = end;
    }
    let mut time = [0u8; 8];
    time.copy_from_slice(&head[2..HEAD]);
    let timestamp = (head[1] == 1).then(|| i64::from_be_bytes(time));
    // The key's bytes are the id: shared, not copied.
    let id = match record.key.clone().map(EventId::from_utf8) {
        Some(Ok(id)) if !id.is_empty() => id,
        Some(Ok(_)) | None => return Err("no event id in its key".into()),
        Some(Err(_)) => return Err("its key is not UTF-8: not an event id".into()),
    };
    record.event_id = Some(id);
    record.timestamp = timestamp;
    record.payload = record.payload.slice(body_at..);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Position;
    use bytes::Bytes;

    fn read_back(key: Option<&[u8]>, value: Vec<u8>) -> (Record, Result<(), String>) {
        let mut r = Record {
            payload: Bytes::from(value),
            key: key.map(Bytes::copy_from_slice),
            headers: Vec::new(),
            source_timestamp: None,
            position: Position::Kafka { topic: "g-by-id".into(), partition: 0, offset: 7 },
            event_id: None,
            timestamp: None,
            sinks: None,
        };
        let result = decode(&mut r);
        (r, result)
    }

    #[test]
    fn what_the_front_writes_the_back_reads_as_the_same_event() {
        for timestamp in [Some(1_764_000_000_123_456_789), Some(-5), Some(0), None] {
            for route in [None, Some(b"archive,index".as_slice())] {
                let mut value = Vec::new();
                write_head(timestamp, route, &mut value);
                value.extend_from_slice(br#"{"a":1}"#);
                let (r, result) = read_back(Some(b"ev-1"), value);
                assert_eq!(result, Ok(()));
                assert_eq!(r.event_id.as_deref(), Some("ev-1"));
                assert_eq!(r.timestamp, timestamp);
                assert_eq!(r.sinks.as_deref(), route, "a plugin's route crosses the internal topic");
                assert_eq!(&r.payload[..], br#"{"a":1}"#);
            }
        }
        // A route cut short, or not a list of names, is refused by name.
        let mut value = Vec::new();
        write_head(None, Some(b"a b"), &mut value);
        assert!(read_back(Some(b"ev-1"), value.clone()).1.is_err_and(|e| e.contains("names sink \"a b\"")));
        value.truncate(HEAD + 2);
        assert!(read_back(Some(b"ev-1"), value).1.is_err_and(|e| e.contains("cut short")));
    }

    #[test]
    fn a_record_no_front_wrote_is_refused_with_its_reason() {
        let (_, r) = read_back(Some(b"ev-1"), br#"{"message":"plain"}"#.to_vec());
        assert!(r.is_err_and(|e| e.contains("version")), "a JSON body without the head");
        let (_, r) = read_back(Some(b"ev-1"), vec![1, 0]);
        assert!(r.is_err_and(|e| e.contains("shorter")));
        let mut value = Vec::new();
        write_head(None, None, &mut value);
        let (_, r) = read_back(None, value.clone());
        assert!(r.is_err_and(|e| e.contains("no event id")));
        let (_, r) = read_back(Some(b""), value.clone());
        assert!(r.is_err_and(|e| e.contains("no event id")));
        let (_, r) = read_back(Some(&[0xff, 0xfe]), value);
        assert!(r.is_err_and(|e| e.contains("UTF-8")));
    }
}
