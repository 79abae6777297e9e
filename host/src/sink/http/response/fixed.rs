//! The rules no profile and no classifier plugin can override (DESIGN.md,
//! "Sinks"). They exist because one misread answer turns a backend's
//! outage into a quarantine full of good records: a wrong URL path answers
//! 404 to every request, and a reader that took that as "these records are
//! bad" would split every batch down to single records and quarantine them
//! all. So:
//!
//! - a request answered 3xx, 401, 403, 404, 405, 407, 408, 411, 415, 429
//!   or 5xx, or not answered at all (a timeout, a lost connection), is
//!   systemic: the breaker counts it, the records wait, none spends an
//!   attempt or reaches the quarantine;
//! - a batch is split to find its bad records only on 400, 413 or 422, or
//!   on per-record evidence (per-item answers, failure counts, a row the
//!   backend names);
//! - an item answered 401, 403, 404, 408, 429 or 5xx inside a bulk answer
//!   (a blocked or missing index, a full thread pool) is systemic too;
//! - an answer that cannot be read where one is expected, or that does
//!   not account for every record sent, is systemic.
//!
//! The one exception is a row the backend names with a parse error: that
//! is evidence about one record whatever the status (ClickHouse before 19
//! answers a bad row with 500).

use super::Ruling;

/// Where a reply came from: the request's status and headers alone, or
/// answers that name records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Evidence {
    Request,
    PerRecord,
}

/// Request-level statuses that are always the backend's, never a record's.
pub(crate) fn systemic_status(status: u16) -> bool {
    matches!(status, 300..=399 | 401 | 403 | 404 | 405 | 407 | 408 | 411 | 415 | 429 | 500..=599)
        || !(100..=599).contains(&status)
}

/// Statuses on which a batch may be split without per-record evidence.
pub(crate) fn splittable_status(status: u16) -> bool {
    matches!(status, 400 | 413 | 422)
}

/// Item-level statuses (inside a bulk answer) that are always systemic.
pub(crate) fn systemic_item_status(status: u16) -> bool {
    matches!(status, 401 | 403 | 404 | 408 | 429 | 500..=599)
}

/// Holds `reply` to the rules above. `n` is the number of records sent.
pub(crate) fn enforce(status: u16, n: usize, reply: Ruling, evidence: Evidence) -> Ruling {
    match reply {
        Ruling::Answers(a) if a.len() != n => {
            Ruling::Systemic(format!("HTTP {status}: the answer accounts for {} records, {n} were sent", a.len()))
        }
        Ruling::BadRow { row, .. } if row >= n => {
            Ruling::Systemic(format!("HTTP {status}: the answer names row {}, {n} were sent", row + 1))
        }
        row @ Ruling::BadRow { .. } if evidence == Evidence::PerRecord => row,
        Ruling::Systemic(r) => Ruling::Systemic(r),
        other if systemic_status(status) => Ruling::Systemic(match other {
            Ruling::Split(r) | Ruling::BadRow { reason: r, .. } => r,
            _ => format!("HTTP {status}"),
        }),
        Ruling::Split(r) if evidence == Evidence::Request && !splittable_status(status) => Ruling::Systemic(r),
        other => other,
    }
}

/// The fixed rules as `sluice check` prints them.
pub(crate) const DESCRIBED: &[&str] = &[
    "request 3xx 401 403 404 405 407 408 411 415 429 5xx, timeout, lost connection: systemic",
    "split only on 400 413 422, or on per-record evidence (items, counts, a named row)",
    "bulk item 401 403 404 408 429 5xx: systemic",
    "an unreadable answer where one is expected, or a wrong count of answers: systemic",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::Answer;

    #[test]
    fn nothing_overrides_a_systemic_status() {
        for status in [301, 302, 401, 403, 404, 405, 407, 408, 411, 415, 429, 500, 502, 503, 504, 599, 0, 600] {
            for reply in [
                Ruling::Answers(vec![Answer::Accepted; 3]),
                Ruling::Answers(vec![Answer::Rejected("bad".into()); 3]),
                Ruling::Split("bad".into()),
            ] {
                for evidence in [Evidence::Request, Evidence::PerRecord] {
                    let got = enforce(status, 3, reply.clone(), evidence);
                    assert!(matches!(got, Ruling::Systemic(_)), "{status} {reply:?} {evidence:?} → {got:?}");
                }
            }
            // A row named by the backend is evidence whatever the status.
            let row = Ruling::BadRow { row: 1, reason: "Cannot parse input (at row 2)".into(), taken_before: false };
            assert_eq!(enforce(status, 3, row.clone(), Evidence::PerRecord), row);
            assert!(matches!(enforce(status, 3, row, Evidence::Request), Ruling::Systemic(_)));
        }
    }

    #[test]
    fn splits_only_on_400_413_422_without_evidence() {
        for status in [400, 413, 422] {
            assert_eq!(enforce(status, 2, Ruling::Split("x".into()), Evidence::Request), Ruling::Split("x".into()));
        }
        for status in [200, 406, 409, 410, 412, 418, 451] {
            assert!(matches!(enforce(status, 2, Ruling::Split("x".into()), Evidence::Request), Ruling::Systemic(_)));
        }
        // Counts that say some records failed are evidence on a 200.
        assert_eq!(enforce(200, 2, Ruling::Split("x".into()), Evidence::PerRecord), Ruling::Split("x".into()));
    }

    #[test]
    fn a_wrong_count_or_a_row_outside_the_request_is_systemic() {
        assert!(
            matches!(enforce(200, 3, Ruling::Answers(vec![Answer::Accepted; 2]), Evidence::PerRecord), Ruling::Systemic(r) if r.contains("accounts for 2"))
        );
        assert!(matches!(
            enforce(500, 3, Ruling::BadRow { row: 3, reason: String::new(), taken_before: false }, Evidence::PerRecord),
            Ruling::Systemic(_)
        ));
        assert_eq!(
            enforce(200, 2, Ruling::Answers(vec![Answer::Accepted; 2]), Evidence::Request),
            Ruling::Answers(vec![Answer::Accepted; 2])
        );
    }
}
