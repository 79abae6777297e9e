//! Reading a backend's response as answers about events. Pure: status and
//! body in, a `Reply` out; the unit tests below hold real response shapes.

use super::config::Interpretation;
use crate::sink::Answer;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// One answer per event of the request.
    Answers(Vec<Answer>),
    /// The request failed as a whole; nothing is known about the events.
    Unavailable(String),
    /// Some events are bad and the response does not say which: split the
    /// request and send the halves (a lone event is then rejected with
    /// this reason).
    Split(String),
    /// Nothing was taken, and row `row` (from 0) is why: reject it and
    /// send the others again.
    BadRow { row: usize, reason: String },
}

/// The start of a body, for reasons and logs.
pub fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(400)]);
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub fn interpret(how: Interpretation, status: u16, body: &[u8], n: usize) -> Reply {
    match how {
        Interpretation::Status => by_status(status, body, n),
        Interpretation::Openobserve if status == 200 => openobserve(body, n),
        Interpretation::ElasticsearchBulk if (200..300).contains(&status) => bulk(body, n),
        Interpretation::Clickhouse => clickhouse(status, body, n),
        Interpretation::Openobserve | Interpretation::ElasticsearchBulk => by_status(status, body, n),
    }
}

fn by_status(status: u16, body: &[u8], n: usize) -> Reply {
    let reason = format!("HTTP {status}: {}", excerpt(body));
    match status {
        200..=299 => Reply::Answers(vec![Answer::Accepted; n]),
        // The events are fine, the credentials are not: wait, never quarantine.
        401 | 403 => Reply::Unavailable(format!("{reason} (credentials refused)")),
        408 | 429 | 500..=599 => Reply::Unavailable(reason),
        400..=499 => Reply::Split(reason),
        _ => Reply::Unavailable(reason),
    }
}

/// `{"code":200,"status":[{"name":"logs","successful":9,"failed":1,"error":"…"}]}`
fn openobserve(body: &[u8], n: usize) -> Reply {
    #[derive(serde::Deserialize)]
    struct Stream {
        #[serde(default)]
        successful: u64,
        #[serde(default)]
        failed: u64,
        #[serde(default)]
        error: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Response {
        status: Vec<Stream>,
    }
    let Ok(r) = serde_json::from_slice::<Response>(body) else {
        return Reply::Unavailable(format!("HTTP 200 without per-stream counts: {}", excerpt(body)));
    };
    let successful: u64 = r.status.iter().map(|s| s.successful).sum();
    let failed: u64 = r.status.iter().map(|s| s.failed).sum();
    if failed == 0 && successful == n as u64 {
        return Reply::Answers(vec![Answer::Accepted; n]);
    }
    let errors: Vec<&str> = r.status.iter().filter_map(|s| s.error.as_deref()).collect();
    let reason = if errors.is_empty() {
        format!("openobserve: successful={successful} failed={failed} of {n}")
    } else {
        format!("openobserve: successful={successful} failed={failed} of {n}: {}", errors.join("; "))
    };
    Reply::Split(reason)
}

/// `{"errors":true,"items":[{"create":{"_id":"a","status":201}}, …]}`
fn bulk(body: &[u8], n: usize) -> Reply {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
        return Reply::Unavailable(format!("bulk response is not JSON: {}", excerpt(body)));
    };
    let Some(items) = v.get("items").and_then(|i| i.as_array()).filter(|i| i.len() == n) else {
        return Reply::Unavailable(format!("bulk response without one item per event: {}", excerpt(body)));
    };
    let answers = items
        .iter()
        .map(|item| {
            // The item's only key is its action: create, index, …
            let result = item.as_object().and_then(|o| o.values().next());
            let status = result.and_then(|r| r.get("status")).and_then(|s| s.as_u64()).unwrap_or(0);
            let error = result.and_then(|r| r.get("error")).map(|e| {
                let kind = e.get("type").and_then(|t| t.as_str()).unwrap_or("error");
                let why = e.get("reason").and_then(|t| t.as_str()).unwrap_or("");
                format!("{kind}: {why}")
            });
            let reason = || format!("bulk item {status}: {}", error.clone().unwrap_or_default());
            match status {
                200..=299 => Answer::Accepted,
                // `create` of an id that is there: delivered before.
                409 => Answer::Accepted,
                429 | 500..=599 | 0 => Answer::Retry(reason()),
                _ => Answer::Rejected(reason()),
            }
        })
        .collect();
    Reply::Answers(answers)
}

/// ClickHouse answers an error as `Code: 27, e.displayText() = DB::Exception:
/// Cannot parse input: … (at row 3)` — older servers with HTTP 500, newer
/// ones with 400 for bad data. A named row is the data's fault; anything
/// else (no such table, no memory, bad credentials) is the backend's.
fn clickhouse(status: u16, body: &[u8], n: usize) -> Reply {
    if (200..300).contains(&status) {
        return Reply::Answers(vec![Answer::Accepted; n]);
    }
    let text = String::from_utf8_lossy(body);
    let reason = format!("HTTP {status}: {}", excerpt(body));
    if let Some(row) = row_named(&text) {
        // Rows count from 1.
        if row >= 1 && row <= n {
            return Reply::BadRow { row: row - 1, reason };
        }
    }
    Reply::Unavailable(reason)
}

fn row_named(text: &str) -> Option<usize> {
    let at = text.find("(at row ")?;
    let digits: String = text[at + 8..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use Interpretation::*;

    #[test]
    fn status_codes() {
        assert_eq!(interpret(Status, 204, b"", 2), Reply::Answers(vec![Answer::Accepted; 2]));
        for s in [401, 403, 408, 429, 500, 503] {
            assert!(matches!(interpret(Status, s, b"x", 2), Reply::Unavailable(_)), "{s}");
        }
        assert!(matches!(interpret(Status, 401, b"", 1), Reply::Unavailable(r) if r.contains("credentials")));
        assert!(matches!(interpret(Status, 400, b"bad field", 2), Reply::Split(r) if r.contains("bad field")));
        assert!(matches!(interpret(Status, 413, b"", 2), Reply::Split(_)));
        // Redirects are not followed: a 3xx never counts as delivered.
        assert!(matches!(interpret(Status, 302, b"", 2), Reply::Unavailable(_)));
    }

    #[test]
    fn openobserve_is_never_accepted_on_the_status_alone() {
        let ok = br#"{"code":200,"status":[{"name":"logs","successful":3,"failed":0}]}"#;
        assert_eq!(interpret(Openobserve, 200, ok, 3), Reply::Answers(vec![Answer::Accepted; 3]));
        let bad = br#"{"code":200,"status":[{"name":"logs","successful":2,"failed":1,"error":"Too old data, only last 5 hours data can be ingested"}]}"#;
        assert!(matches!(interpret(Openobserve, 200, bad, 3), Reply::Split(r) if r.contains("Too old data")));
        assert!(matches!(interpret(Openobserve, 200, b"OK", 3), Reply::Unavailable(_)));
        // Fewer successes than events, no failures named: still not accepted.
        let short = br#"{"code":200,"status":[{"name":"logs","successful":2,"failed":0}]}"#;
        assert!(matches!(interpret(Openobserve, 200, short, 3), Reply::Split(_)));
        assert!(matches!(interpret(Openobserve, 503, b"", 3), Reply::Unavailable(_)));
    }

    #[test]
    fn bulk_items() {
        let body = br#"{"took":3,"errors":true,"items":[
            {"create":{"_id":"a","status":201}},
            {"create":{"_id":"b","status":409,"error":{"type":"version_conflict_engine_exception","reason":"document already exists"}}},
            {"create":{"_id":"c","status":400,"error":{"type":"mapper_parsing_exception","reason":"failed to parse field [ts]"}}},
            {"create":{"_id":"d","status":429,"error":{"type":"es_rejected_execution_exception","reason":"queue full"}}}]}"#;
        let Reply::Answers(a) = interpret(ElasticsearchBulk, 200, body, 4) else { panic!("answers expected") };
        assert_eq!(a[0], Answer::Accepted);
        assert_eq!(a[1], Answer::Accepted, "409 on create: already there");
        assert!(matches!(&a[2], Answer::Rejected(r) if r.contains("mapper_parsing_exception")));
        assert!(matches!(&a[3], Answer::Retry(r) if r.contains("queue full")));
        assert!(matches!(interpret(ElasticsearchBulk, 200, br#"{"items":[]}"#, 4), Reply::Unavailable(_)));
    }

    #[test]
    fn clickhouse_rows() {
        let body = b"Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected , before: x: (at row 3)\n, e.what() = DB::Exception\n";
        assert!(matches!(interpret(Clickhouse, 500, body, 5), Reply::BadRow { row: 2, .. }));
        assert!(matches!(interpret(Clickhouse, 400, body, 2), Reply::Unavailable(_)), "a row past the batch");
        let no_table = b"Code: 60, e.displayText() = DB::Exception: Table default.nope doesn't exist.";
        assert!(matches!(interpret(Clickhouse, 404, no_table, 5), Reply::Unavailable(_)));
        assert_eq!(interpret(Clickhouse, 200, b"", 5), Reply::Answers(vec![Answer::Accepted; 5]));
    }
}
