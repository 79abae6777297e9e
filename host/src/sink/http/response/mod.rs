//! Reading a backend's response as answers about records. A `Profile`
//! (data: the built-in ones in `../profiles/`, or the operator's
//! `[sink.response]`) says what the backend's statuses, items, counts and
//! errors mean; `classify` reads one response with it; `fixed` holds every
//! reading to the rules no profile can override.
//!
//! Pure: the request's ids and the response in, a `Ruling` out. The corpus
//! in `conformance/responses/` (recorded answers and the fates they must
//! come to, `../corpus.rs`) runs through here for every built-in profile.

pub mod classify;
pub(crate) mod fixed;
pub(crate) mod json;
pub(crate) mod pointer;
pub mod profile;

use std::time::Duration;

use crate::sink::Answer;

/// What a response says about the records of its request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ruling {
    /// One answer per record of the request.
    Answers(Vec<Answer>),
    /// The backend's fault (or nothing could be read): every record waits
    /// behind the breaker.
    Systemic(String),
    /// Some records are bad and the response does not say which: split the
    /// request and send the halves (a lone record is then rejected with
    /// this reason).
    Split(String),
    /// Row `row` (from 0) is refused: reject it. The rows after it were
    /// not taken and are sent again; those before it were taken when
    /// `taken_before` (else sent again too: an all-or-nothing insert).
    BadRow {
        /// The refused row, from 0.
        row: usize,
        /// The backend's words.
        reason: String,
        /// Whether the rows before it were taken.
        taken_before: bool,
    },
    /// Every record is answered as taken: the backend refused `rejected`
    /// of them without naming which, and its contract says not to send
    /// them again (OTLP's partial success). The count and `reason` are
    /// logged and counted.
    Partial {
        /// How many the backend refused.
        rejected: u64,
        /// What it said of them.
        reason: String,
    },
}

/// What one reply settles of the records of a request (`items`, by their
/// place in the batch), and what is left to send: the one reading of a
/// [`Ruling`] that the sink and `sluice test`'s scripted answers share.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Settled {
    pub answered: Vec<(usize, Answer)>,
    pub next: Next,
    /// The request counts as failed for the breaker: a systemic answer
    /// about it or any of its records.
    pub failed: bool,
    /// Records the backend dropped without naming them, and why (a
    /// partial success): they are answered accepted.
    pub dropped: Option<(u64, String)>,
}

/// What is sent next for the records a reply did not settle.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    Done,
    /// These, in one request: what an all-or-nothing insert did not take,
    /// or what came after the row a backend refused.
    Resend(Vec<usize>),
    /// These, in two requests, to find the bad records among them.
    Halves(Vec<usize>, Vec<usize>),
}

pub(crate) fn settle(mut items: Vec<usize>, reply: Ruling) -> Settled {
    let done =
        |answered: Vec<(usize, Answer)>, failed: bool| Settled { answered, next: Next::Done, failed, dropped: None };
    match reply {
        Ruling::Answers(answers) => {
            let failed = answers.iter().any(|a| matches!(a, Answer::Systemic(_)));
            done(items.into_iter().zip(answers).collect(), failed)
        }
        Ruling::Systemic(reason) => done(items.iter().map(|i| (*i, Answer::Systemic(reason.clone()))).collect(), true),
        Ruling::Partial { rejected, reason } => Settled {
            dropped: Some((rejected, reason)),
            ..done(items.into_iter().map(|i| (i, Answer::Accepted)).collect(), false)
        },
        Ruling::BadRow { row, reason, taken_before } if row < items.len() => {
            let after = items.split_off(row + 1);
            let bad = items.pop().unwrap_or_default();
            let mut answered = vec![(bad, Answer::Rejected(reason))];
            let rest = if taken_before {
                answered.extend(items.into_iter().map(|i| (i, Answer::Accepted)));
                after
            } else {
                items.extend(after);
                items
            };
            let next = if rest.is_empty() { Next::Done } else { Next::Resend(rest) };
            Settled { answered, next, failed: false, dropped: None }
        }
        // `fixed::enforce` turns a row outside the request into a systemic
        // answer before it gets here.
        Ruling::BadRow { reason, .. } => {
            done(items.iter().map(|i| (*i, Answer::Systemic(reason.clone()))).collect(), true)
        }
        Ruling::Split(reason) if items.len() == 1 => done(vec![(items[0], Answer::Rejected(reason))], false),
        Ruling::Split(_) => {
            let right = items.split_off(items.len() / 2);
            Settled { answered: Vec::new(), next: Next::Halves(items, right), failed: false, dropped: None }
        }
    }
}

/// One response as a profile reads it.
pub struct Response<'a> {
    /// The HTTP status.
    pub status: u16,
    /// The response headers.
    pub headers: &'a http::header::HeaderMap,
    /// The whole body.
    pub body: &'a [u8],
}

/// The start of a body, for reasons and logs.
pub(crate) fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(400)]);
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `Retry-After`, in seconds or as an HTTP date; a date in the past is no
/// wait at all.
pub(crate) fn retry_after(headers: &http::header::HeaderMap, now: std::time::SystemTime) -> Option<Duration> {
    let value = headers.get(http::header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::classify::classify;
    use super::profile::Profile;
    use super::*;
    use http::header::{HeaderMap, HeaderValue, RETRY_AFTER};
    use std::time::SystemTime;

    fn builtin(name: &str) -> Profile {
        Profile::builtin(name).unwrap_or_else(|e| panic!("{e}"))
    }

    fn read(profile: &str, status: u16, body: &str, n: usize) -> Ruling {
        let ids: Vec<String> = (0..n).map(|i| format!("e{i}")).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        classify(&builtin(profile), &ids, &Response { status, headers: &HeaderMap::new(), body: body.as_bytes() })
    }

    /// The misreadings of issue 40, each of which quarantined records the
    /// backend never blamed.
    #[test]
    fn a_wrong_path_a_wrong_method_or_a_wrong_type_is_systemic_never_split() {
        for profile in profile::BUILTIN.iter().map(|(name, _)| *name) {
            for status in [404, 405, 415, 301, 503, 429] {
                assert!(
                    matches!(read(profile, status, "not found", 20), Ruling::Systemic(_)),
                    "{profile} {status}: {:?}",
                    read(profile, status, "not found", 20)
                );
            }
            // ClickHouse's 400 without a named row is the query's (a bad
            // setting), for every row alike.
            let want_split = profile != "clickhouse";
            assert_eq!(matches!(read(profile, 400, "bad", 2), Ruling::Split(_)), want_split, "{profile} 400");
        }
    }

    #[test]
    fn a_bulk_items_back_pressure_or_missing_index_is_systemic_not_a_retry_or_a_reject() {
        let body = r#"{"errors":true,"items":[
            {"create":{"_id":"e0","status":201}},
            {"create":{"_id":"e1","status":429,"error":{"type":"es_rejected_execution_exception","reason":"queue full"}}},
            {"create":{"_id":"e2","status":404,"error":{"type":"index_not_found_exception","reason":"no such index [logs]"}}},
            {"create":{"_id":"e3","status":403,"error":{"type":"cluster_block_exception","reason":"index [logs] blocked by: [FORBIDDEN/8/index write (api)]"}}},
            {"create":{"_id":"e4","status":503,"error":{"type":"unavailable_shards_exception","reason":"primary shard is not active"}}},
            {"create":{"_id":"e5","status":409,"error":{"type":"version_conflict_engine_exception","reason":"document already exists"}}},
            {"create":{"_id":"e6","status":400,"error":{"type":"mapper_parsing_exception","reason":"failed to parse field [ts]"}}}]}"#;
        let Ruling::Answers(a) = read("elasticsearch_bulk", 200, body, 7) else { panic!("answers expected") };
        assert_eq!(a[0], Answer::Accepted);
        for (i, what) in [(1, "queue full"), (2, "index_not_found"), (3, "cluster_block"), (4, "primary shard")] {
            assert!(matches!(&a[i], Answer::Systemic(r) if r.contains(what)), "{i}: {:?}", a[i]);
        }
        assert_eq!(a[5], Answer::Duplicate);
        assert!(matches!(&a[6], Answer::Rejected(r) if r.contains("mapper_parsing_exception")));
    }

    #[test]
    fn openobserve_error_text_tells_a_records_fault_from_the_backends() {
        let too_old = r#"{"code":200,"status":[{"name":"logs","successful":2,"failed":1,"error":"Too old data, only last 5 hours data can be ingested. Data discarded."}]}"#;
        assert!(matches!(read("openobserve", 200, too_old, 3), Ruling::Split(r) if r.contains("Too old")));
        let storage = r#"{"code":200,"status":[{"name":"logs","successful":0,"failed":3,"error":"write to WAL failed: no space left on device"}]}"#;
        assert!(matches!(read("openobserve", 200, storage, 3), Ruling::Systemic(r) if r.contains("no space")));
        let short = r#"{"code":200,"status":[{"name":"logs","successful":2,"failed":0}]}"#;
        assert!(matches!(read("openobserve", 200, short, 3), Ruling::Systemic(r) if r.contains("do not account")));
        assert!(matches!(read("openobserve", 200, "OK", 3), Ruling::Systemic(r) if r.contains("not the JSON")));
    }

    #[test]
    fn clickhouse_headers_are_read() {
        let p = builtin("clickhouse");
        let ids = ["a", "b", "c"];
        let mut h = HeaderMap::new();
        h.insert("x-clickhouse-summary", HeaderValue::from_static(r#"{"read_rows":"0","written_rows":"2"}"#));
        let r = Response { status: 200, headers: &h, body: b"" };
        assert!(matches!(classify(&p, &ids, &r), Ruling::Systemic(m) if m.contains("wrote 2 of the 3")));
        h.insert("x-clickhouse-summary", HeaderValue::from_static(r#"{"written_rows":"0"}"#));
        let r = Response { status: 200, headers: &h, body: b"" };
        assert_eq!(classify(&p, &ids, &r), Ruling::Answers(vec![Answer::Duplicate; 3]), "a block deduplicated whole");
        h.insert("x-clickhouse-summary", HeaderValue::from_static(r#"{"written_rows":"3"}"#));
        let r = Response { status: 200, headers: &h, body: b"" };
        assert_eq!(classify(&p, &ids, &r), Ruling::Answers(vec![Answer::Accepted; 3]));
        // A row named, but the exception code says the table is missing.
        let mut h = HeaderMap::new();
        h.insert("x-clickhouse-exception-code", HeaderValue::from_static("60"));
        let body = b"Code: 60. DB::Exception: Table default.x doesn't exist (at row 1)";
        let r = Response { status: 404, headers: &h, body };
        assert!(matches!(classify(&p, &ids, &r), Ruling::Systemic(_)));
        let body = b"Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected , before: zz (at row 2)";
        let r = Response { status: 500, headers: &HeaderMap::new(), body };
        assert!(matches!(classify(&p, &ids, &r), Ruling::BadRow { row: 1, .. }), "a bad row on an old server's 500");
    }

    /// A profile of an operator's own (docs/src/sinks.md's example), items matched
    /// by id: an answer in another order still lands on its records.
    #[test]
    fn items_matched_by_id_land_on_their_records_in_any_order() {
        let p: Profile = toml::from_str(
            "[[status]]\ncodes = [\"2xx\"]\nfate = \"read\"\n[items]\narray = \"/results\"\nstatus = \"/code\"\n\
             reason = \"/message\"\nid = \"/id\"\n[[items.rules]]\ncodes = [422]\nreason_matches = \"(?i)too old\"\nfate = \"reject\"\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let body =
            br#"{"results":[{"id":"c","code":200},{"id":"a","code":422,"message":"Too old"},{"id":"b","code":409}]}"#;
        let r = Response { status: 200, headers: &HeaderMap::new(), body };
        let Ruling::Answers(a) = classify(&p, &["a", "b", "c"], &r) else { panic!("answers") };
        assert!(matches!(&a[0], Answer::Rejected(r) if r == "item 422: Too old"), "{a:?}");
        assert!(matches!(&a[1], Answer::Rejected(r) if r == "item 409"), "no rule: a 4xx item is rejected");
        assert_eq!(a[2], Answer::Accepted);
        let stray = br#"{"results":[{"id":"c","code":200},{"id":"x","code":200},{"id":"a","code":200}]}"#;
        let r = Response { status: 200, headers: &HeaderMap::new(), body: stray };
        assert!(matches!(classify(&p, &["a", "b", "c"], &r), Ruling::Systemic(m) if m.contains("names no record")));
    }

    #[test]
    fn retry_after_in_seconds_or_as_a_date() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_986_000);
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h, now), None);
        h.insert(RETRY_AFTER, HeaderValue::from_static("12"));
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(12)));
        h.insert(
            RETRY_AFTER,
            HeaderValue::from_str(&httpdate::fmt_http_date(now + Duration::from_secs(90)))
                .unwrap_or_else(|e| panic!("{e}")),
        );
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(90)));
        h.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h, now), None);
    }

    /// What a reply settles: the rows a backend took before the one it
    /// refused are kept and never sent again; an all-or-nothing insert
    /// sends the others again; a partial success keeps every record and
    /// says how many the backend dropped; a split halves.
    #[test]
    fn a_reply_settles_what_the_backend_took_and_sends_again_only_the_rest() {
        let bad = |taken_before| Ruling::BadRow { row: 2, reason: "bad".into(), taken_before };
        let s = settle(vec![10, 11, 12, 13, 14], bad(true));
        assert_eq!(
            s.answered,
            vec![(12, Answer::Rejected("bad".into())), (10, Answer::Accepted), (11, Answer::Accepted)]
        );
        assert_eq!(s.next, Next::Resend(vec![13, 14]));
        let s = settle(vec![10, 11, 12, 13, 14], bad(false));
        assert_eq!(s.answered, vec![(12, Answer::Rejected("bad".into()))]);
        assert_eq!(s.next, Next::Resend(vec![10, 11, 13, 14]));
        let s = settle(vec![10, 11, 12], bad(true));
        assert_eq!(s.next, Next::Done, "the refused row was the last");
        let s = settle(vec![1, 2], Ruling::Partial { rejected: 1, reason: "dropped".into() });
        assert_eq!(s.answered, vec![(1, Answer::Accepted), (2, Answer::Accepted)]);
        assert_eq!((s.next, s.failed, s.dropped), (Next::Done, false, Some((1, "dropped".into()))));
        assert_eq!(settle(vec![1, 2, 3], Ruling::Split("x".into())).next, Next::Halves(vec![1], vec![2, 3]));
        assert_eq!(settle(vec![4], Ruling::Split("x".into())).answered, vec![(4, Answer::Rejected("x".into()))]);
        let s = settle(vec![4, 5], Ruling::Systemic("down".into()));
        assert!(s.failed && s.answered.iter().all(|(_, a)| matches!(a, Answer::Systemic(_))));
    }

    /// Each built-in profile says whether its backend keeps one copy of a
    /// record sent twice: a resend's cost is declared, never assumed.
    #[test]
    fn every_builtin_profile_declares_whether_its_backend_dedups_by_id() {
        for (name, text) in profile::BUILTIN {
            assert!(text.lines().any(|l| l.starts_with("dedup_by_id = ")), "profiles/{name}.toml");
        }
        assert!(builtin("elasticsearch_bulk").dedup_by_id && !builtin("splunk_hec").dedup_by_id);
        assert!(!builtin("victorialogs").confirms && builtin("otlp_http").confirms);
    }
}
