//! What a sink is handed (one event, its body checked once) and the final
//! word on it. Plain data between the custody decisions and the sinks.

use bytes::Bytes;

use crate::record::EventId;

/// One event on its way to a sink: its body as the plugins wrote it, moved
/// here from the chain's output and checked once on the way (the output
/// contract), so sinks copy it through without parsing it again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The event id: what the dedup window keys and a backend dedups by.
    pub id: EventId,
    /// Nanoseconds since the epoch, when the event has a time; rendered as
    /// RFC 3339 where a sink writes it (`write_timestamp`).
    pub timestamp: Option<i64>,
    /// One JSON value in UTF-8 (an object from any plugin): a slice of the
    /// batch's or a plugin's buffer, shared, never copied on the way here.
    body: Bytes,
    /// The sinks a plugin named for it (names joined by `,`): what the
    /// repartitioning front writes into the internal topic, so that the
    /// back routes the event as the plugin said.
    sinks: Option<Bytes>,
}

impl Delivery {
    /// A delivery for `body`, checked here: a body that is not JSON (a
    /// plugin broke the contract) is carried as a JSON string rather than
    /// corrupting NDJSON. For bodies nothing has checked yet (tests, cases).
    pub fn new(id: impl Into<EventId>, timestamp: Option<i64>, body: &[u8]) -> Delivery {
        Delivery { id: id.into(), timestamp, body: crate::record::json_or_string(body).into(), sinks: None }
    }

    /// A delivery for a body the chain has checked (`Verdict::Emit`): moved
    /// in, not parsed or copied. The white space JSON allows around it is
    /// cut (a body ending in a line feed would split an NDJSON line) by
    /// narrowing the slice: a look at its first and last bytes.
    pub fn checked(id: EventId, timestamp: Option<i64>, mut body: Bytes) -> Delivery {
        let end = body.len() - body.iter().rev().take_while(|b| is_json_space(**b)).count();
        body.truncate(end);
        let start = body.iter().take_while(|b| is_json_space(**b)).count();
        if start > 0 {
            body = body.slice(start..);
        }
        Delivery { id, timestamp, body, sinks: None }
    }

    /// This delivery with the route its plugin named.
    pub(crate) fn routed(mut self, sinks: Option<Bytes>) -> Delivery {
        self.sinks = sinks;
        self
    }

    /// The sinks a plugin named for the event, names joined by `,`.
    pub(crate) fn sinks(&self) -> Option<&[u8]> {
        self.sinks.as_deref()
    }

    /// The event's JSON text, as the plugin wrote it.
    pub(crate) fn event(&self) -> &[u8] {
        &self.body
    }

    /// `"2026-11-29T21:00:00Z"` (quoted) or `null`, appended to `out`.
    pub(crate) fn write_timestamp(&self, out: &mut Vec<u8>) {
        match self.timestamp {
            Some(ns) => {
                out.push(b'"');
                sluice_guest::time::write_rfc3339(ns, out);
                out.push(b'"');
            }
            None => out.extend_from_slice(b"null"),
        }
    }

    /// The envelope line sinks write by default,
    /// `{"id":…,"timestamp":…,"event":{…}}`, appended to `out` straight from
    /// the delivery's bytes: the id escaped, the time formatted in place,
    /// the body copied.
    pub fn write_envelope(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"id\":");
        write_json_string(&self.id, out);
        out.extend_from_slice(b",\"timestamp\":");
        self.write_timestamp(out);
        out.extend_from_slice(b",\"event\":");
        out.extend_from_slice(&self.body);
        out.push(b'}');
    }
}

fn is_json_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The final word on one event, after retries and the breaker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinalAnswer {
    /// Taken (or already there): its id goes into the dedup window.
    Accepted,
    /// Refused for good: the record is quarantined with this reason.
    Rejected(String),
}

/// `s` as a JSON string, appended to `out`: serde_json's escaping, which
/// copies runs of plain bytes at once.
pub(crate) fn write_json_string(s: &str, out: &mut Vec<u8>) {
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}
