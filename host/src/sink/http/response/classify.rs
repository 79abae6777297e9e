//! Reading one response with a profile: status rules first, then the
//! evidence in the body. Pure: the request's ids and the response in, a
//! `Ruling` out, held to the fixed rules before it leaves.

use super::fixed::{self, Evidence};
use super::json::Json;
use super::profile::{CountFate, Counts, Items, Profile, RecordFate, RequestFate, Row, StatusRule, Timed, Written};
use super::{Response, Ruling, excerpt};
use crate::sink::Answer;

/// The request a response answers, as much of it as a profile reads: the
/// records' ids, their times (ns, for a backend that names refused
/// records by time, `timed`) and their texts as sent (for one that quotes
/// them, `counts.documents`). Times and texts may be empty when the
/// profile reads neither.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request<'a> {
    pub ids: &'a [&'a str],
    pub times: &'a [Option<i64>],
    pub texts: &'a [&'a [u8]],
}

/// What `profile` makes of `response` to a request of the records `ids`.
pub fn classify(profile: &Profile, ids: &[&str], response: &Response<'_>) -> Ruling {
    classify_request(profile, &Request { ids, times: &[], texts: &[] }, response)
}

/// [`classify`], with what else of the request the profile reads.
pub(crate) fn classify_request(profile: &Profile, request: &Request<'_>, response: &Response<'_>) -> Ruling {
    let (reply, evidence) = read(profile, request, response);
    fixed::enforce(response.status, request.ids.len(), reply, evidence)
}

fn read(p: &Profile, request: &Request<'_>, r: &Response<'_>) -> (Ruling, Evidence) {
    let (ids, times) = (request.ids, request.times);
    let n = ids.len();
    let status = r.status;
    let said = || {
        // The records are fine, the credentials are not: say so, since an
        // operator reading "HTTP 403" first suspects the data.
        let whose = if matches!(status, 401 | 403 | 407) { " (credentials refused)" } else { "" };
        format!("HTTP {status}: {}{whose}", excerpt(r.body))
    };
    if !(200..300).contains(&status)
        && let Some(row) = &p.row
        && let Some(reply) = named_row(row, r, n)
    {
        return (reply, Evidence::PerRecord);
    }
    if let Some(t) = &p.timed
        && t.codes.iter().any(|c| c.contains(status))
        && let Some(reply) = timed(t, times, r, n)
    {
        return (reply, Evidence::PerRecord);
    }
    let fate = match p.status.iter().find(|rule| matches(rule, r)) {
        Some(rule) => rule.fate,
        None if (200..300).contains(&status) => RequestFate::Read,
        None if fixed::splittable_status(status) => RequestFate::Split,
        None => RequestFate::Systemic,
    };
    match fate {
        RequestFate::Accepted => (Ruling::Answers(vec![Answer::Accepted; n]), Evidence::Request),
        RequestFate::Duplicate => (Ruling::Answers(vec![Answer::Duplicate; n]), Evidence::Request),
        RequestFate::Systemic => (Ruling::Systemic(said()), Evidence::Request),
        RequestFate::Split => (Ruling::Split(said()), Evidence::Request),
        RequestFate::Read => evidence(p, request, r),
    }
}

fn matches(rule: &StatusRule, r: &Response<'_>) -> bool {
    if !rule.codes.iter().any(|c| c.contains(r.status)) {
        return false;
    }
    if let Some(b) = &rule.body
        && !b.0.is_match(&String::from_utf8_lossy(r.body))
    {
        return false;
    }
    if let Some(h) = &rule.header {
        let Some(value) = r.headers.get(h.as_str()) else { return false };
        if let Some(m) = &rule.header_matches
            && !m.0.is_match(&String::from_utf8_lossy(value.as_bytes()))
        {
            return false;
        }
    }
    true
}

/// The body's evidence about each record; with none to read, all accepted.
fn evidence(p: &Profile, request: &Request<'_>, r: &Response<'_>) -> (Ruling, Evidence) {
    let ids = request.ids;
    let n = ids.len();
    if let Some(w) = &p.written
        && let Some(reply) = written(w, r, n)
    {
        return (reply, Evidence::PerRecord);
    }
    if p.items.is_none() && p.counts.is_none() {
        return (Ruling::Answers(vec![Answer::Accepted; n]), Evidence::Request);
    }
    let empty_is_none_failed = p.counts.as_ref().is_some_and(|c| c.failed_when_absent.is_some());
    let parsed = if empty_is_none_failed && r.body.trim_ascii().is_empty() {
        Ok(Json::empty_object())
    } else {
        Json::parse(r.body)
    };
    let Ok(body) = parsed else {
        return (
            Ruling::Systemic(format!("HTTP {}: the answer is not the JSON expected: {}", r.status, excerpt(r.body))),
            Evidence::Request,
        );
    };
    if let Some(items) = &p.items {
        return (per_item(items, ids, &body, r.status), Evidence::PerRecord);
    }
    if let Some(counts) = &p.counts {
        return (counted(counts, &body, request, r.status), Evidence::PerRecord);
    }
    (Ruling::Answers(vec![Answer::Accepted; n]), Evidence::Request)
}

fn per_item(items: &Items, ids: &[&str], body: &Json<'_>, status: u16) -> Ruling {
    let n = ids.len();
    let Some(array) = items.array.first(body).and_then(|a| a.as_array()) else {
        return Ruling::Systemic(format!("HTTP {status}: no item array at {}", items.array));
    };
    if array.len() != n {
        return Ruling::Systemic(format!("HTTP {status}: {} items answer {n} records", array.len()));
    }
    let mut answers: Vec<Option<Answer>> = vec![None; n];
    // By id: each id's records, the first answered first (one look-up per
    // item, not a scan of the request).
    let mut by_id: std::collections::HashMap<&str, Vec<usize>> = std::collections::HashMap::new();
    if items.id.is_some() {
        for (i, id) in ids.iter().enumerate().rev() {
            by_id.entry(id).or_default().push(i);
        }
    }
    for (pos, item) in array.iter().enumerate() {
        let at = match &items.id {
            None => pos,
            Some(id) => {
                let named = id.first(item).map(Json::text);
                let Some(i) = named.and_then(|id| by_id.get_mut(id.as_str()).and_then(Vec::pop)) else {
                    return Ruling::Systemic(format!("HTTP {status}: item {pos} names no record that was sent"));
                };
                i
            }
        };
        let answer = item_answer(items, item);
        if answers[at].replace(answer).is_some() {
            return Ruling::Systemic(format!("HTTP {status}: two items answer record {}", at + 1));
        }
    }
    // Every slot is filled: n items, each to a distinct record.
    Ruling::Answers(answers.into_iter().map(|a| a.unwrap_or_else(|| Answer::Systemic("no item".into()))).collect())
}

fn item_answer(items: &Items, item: &Json<'_>) -> Answer {
    let Some(code) = items.status.first(item).and_then(Json::count).and_then(|c| u16::try_from(c).ok()) else {
        return Answer::Systemic(format!("bulk item without a status at {}", items.status));
    };
    // Borrowed, and looked up only when a rule or a reason needs them:
    // most items of a bulk answer are plain 2xx.
    let as_str = |p: &Option<super::pointer::Pointer>| p.as_ref().and_then(|p| p.first(item)).and_then(Json::as_str);
    let kind = || as_str(&items.error_type).unwrap_or("");
    let why = || as_str(&items.reason).unwrap_or("");
    let reason = || match (kind(), why()) {
        ("", "") => format!("item {code}"),
        (k, "") => format!("item {code}: {k}"),
        ("", w) => format!("item {code}: {w}"),
        (k, w) => format!("item {code}: {k}: {w}"),
    };
    if fixed::systemic_item_status(code) {
        return Answer::Systemic(reason());
    }
    let rule = items.rules.iter().find(|r| {
        (r.codes.is_empty() || r.codes.iter().any(|c| c.contains(code)))
            && (r.error_types.is_empty() || r.error_types.iter().any(|t| t == kind()))
            && r.reason_matches.as_ref().is_none_or(|m| m.0.is_match(why()))
    });
    match rule.map(|r| r.fate) {
        Some(RecordFate::Accepted) => Answer::Accepted,
        Some(RecordFate::Duplicate) => Answer::Duplicate,
        Some(RecordFate::Retry) => Answer::Retry(reason()),
        Some(RecordFate::Reject) => Answer::Rejected(reason()),
        Some(RecordFate::Systemic) => Answer::Systemic(reason()),
        None if (200..300).contains(&code) => Answer::Accepted,
        None => Answer::Rejected(reason()),
    }
}

fn counted(c: &Counts, body: &Json<'_>, request: &Request<'_>, status: u16) -> Ruling {
    let n = request.ids.len();
    let Some(failed) = c.failed.sum(body).or(c.failed_when_absent) else {
        return Ruling::Systemic(format!("HTTP {status}: no count of failures at {}", c.failed));
    };
    let ok = match &c.successful {
        Some(p) => match p.sum(body) {
            Some(ok) => ok,
            None => return Ruling::Systemic(format!("HTTP {status}: no count of successes at {p}")),
        },
        None => (n as u64).saturating_sub(failed),
    };
    let errors: Vec<String> = c
        .errors
        .as_ref()
        .map(|p| p.all(body).into_iter().map(Json::text).filter(|t| !t.is_empty()).collect())
        .unwrap_or_default();
    let reason = || {
        let mut s = format!("successful={ok} failed={failed} of {n}");
        if !errors.is_empty() {
            s.push_str(": ");
            s.push_str(&errors.join("; "));
        }
        s
    };
    if ok.saturating_add(failed) != n as u64 {
        return Ruling::Systemic(format!(
            "HTTP {status}: the counts do not account for the records sent: {}",
            reason()
        ));
    }
    if failed == 0 {
        return Ruling::Answers(vec![Answer::Accepted; n]);
    }
    // Each error text is judged; one that says the backend failed makes
    // the whole answer systemic (no record is blamed for it). A failure
    // with no text is a record's, unless the backend's contract says the
    // rest was taken whatever failed.
    let mut judged: Vec<CountFate> = errors
        .iter()
        .map(|e| c.rules.iter().find(|r| r.matches.0.is_match(e)).map_or(c.otherwise, |r| r.fate))
        .collect();
    if judged.is_empty() {
        judged.push(if c.otherwise == CountFate::Accepted { CountFate::Accepted } else { CountFate::Split });
    }
    if judged.contains(&CountFate::Systemic) {
        return Ruling::Systemic(format!("HTTP {status}: {}", reason()));
    }
    // The refused records quoted: matched to what was sent, they alone
    // are rejected, and the rest is not sent again.
    if let Some(documents) = &c.documents
        && let Some(answers) = quoted(documents, body, request, failed, &errors, status)
    {
        return Ruling::Answers(answers);
    }
    if judged.iter().all(|f| *f == CountFate::Accepted) {
        return Ruling::Partial { rejected: failed, reason: reason() };
    }
    Ruling::Split(reason())
}

/// Answers from the refused records' own text, quoted by the backend:
/// each quote to the one record sent with exactly that text (rejected, with
/// the error at the same place when there is one), the rest accepted.
/// `None` when that does not account for every failure the backend
/// counted: a quote that matches no record sent alone, or fewer quotes
/// than failures.
fn quoted(
    documents: &super::pointer::Pointer,
    body: &Json<'_>,
    request: &Request<'_>,
    failed: u64,
    errors: &[String],
    status: u16,
) -> Option<Vec<Answer>> {
    let n = request.ids.len();
    if request.texts.len() != n {
        return None;
    }
    let quotes: Vec<String> = documents.all(body).into_iter().map(Json::text).collect();
    if quotes.len() as u64 != failed {
        return None;
    }
    let mut by_text: std::collections::HashMap<&[u8], Vec<usize>> = std::collections::HashMap::with_capacity(n);
    for (i, text) in request.texts.iter().enumerate().rev() {
        by_text.entry(text.trim_ascii()).or_default().push(i);
    }
    let mut answers = vec![Answer::Accepted; n];
    for (k, quote) in quotes.iter().enumerate() {
        let i = by_text.get_mut(quote.trim().as_bytes()).and_then(Vec::pop)?;
        let why = errors.get(k).filter(|_| errors.len() == quotes.len()).map_or("refused", String::as_str);
        answers[i] = Answer::Rejected(format!("HTTP {status}: {why}"));
    }
    Some(answers)
}

fn named_row(row: &Row, r: &Response<'_>, n: usize) -> Option<Ruling> {
    let body = String::from_utf8_lossy(r.body);
    let number: usize = row.pattern.0.captures(&body)?.get(1)?.as_str().parse().ok()?;
    let code = row
        .code_header
        .as_ref()
        .and_then(|h| r.headers.get(h.as_str()))
        .and_then(|v| v.to_str().ok()?.trim().parse::<u32>().ok())
        .or_else(|| row.code_pattern.as_ref()?.0.captures(&body)?.get(1)?.as_str().parse().ok());
    if code.is_some_and(|c| row.systemic_codes.contains(&c)) {
        return None;
    }
    let reason = format!("HTTP {}: {}", r.status, excerpt(r.body));
    match number.checked_sub(row.base) {
        Some(i) if i < n => Some(Ruling::BadRow { row: i, reason, taken_before: row.taken_before }),
        _ => Some(Ruling::Systemic(format!("{reason} (row {number} is not one of the {n} sent)"))),
    }
}

/// The records an answer names by time, rejected; the others taken.
/// `None` when the body names no time: the status rules read it then.
fn timed(t: &Timed, times: &[Option<i64>], r: &Response<'_>, n: usize) -> Option<Ruling> {
    let body = String::from_utf8_lossy(r.body);
    let named: Vec<(Option<i64>, String)> = t
        .pattern
        .0
        .captures_iter(&body)
        .filter_map(|c| {
            let time = c.name("time")?.as_str();
            let reason = c.name("reason").map_or_else(|| c[0].to_string(), |m| m.as_str().to_string());
            Some((t.time_formats.parse(time), reason))
        })
        .collect();
    let first = named.first()?.1.clone();
    let split = |why: String| Some(Ruling::Split(format!("HTTP {}: {why}", r.status)));
    // The records not named are answered accepted: with a total to check,
    // only when the backend's own count says every refusal was named (a
    // list it cut short must not pass for "the rest was taken").
    if let Some(total) = &t.total {
        match total.0.captures(&body).and_then(|c| c.get(1)?.as_str().parse::<usize>().ok()) {
            Some(count) if count == named.len() => {}
            Some(count) => return split(format!("{count} refused, {} of them named: {first}", named.len())),
            None => {
                return split(format!("no count of the refused to check the {} named against: {first}", named.len()));
            }
        }
    }
    // One pass over the request: each time to its record, or to none when
    // two records share it (which one was refused is then unknown).
    let mut by_time: std::collections::HashMap<i64, Option<usize>> = std::collections::HashMap::with_capacity(n);
    for (i, ns) in times.iter().enumerate().take(n) {
        if let Some(ns) = ns {
            by_time.entry(*ns).and_modify(|shared| *shared = None).or_insert(Some(i));
        }
    }
    let mut answers = vec![Answer::Accepted; n];
    for (ns, reason) in named {
        match ns.and_then(|ns| by_time.get(&ns).copied().flatten()) {
            Some(i) if answers[i] == Answer::Accepted => {
                answers[i] = Answer::Rejected(format!("HTTP {}: {reason}", r.status));
            }
            _ => return split(format!("a refused record's time is not one sent alone: {reason}")),
        }
    }
    Some(Ruling::Answers(answers))
}

fn written(w: &Written, r: &Response<'_>, n: usize) -> Option<Ruling> {
    let source = match &w.header {
        Some(h) => Json::parse(r.headers.get(h.as_str())?.as_bytes()).ok()?,
        None => Json::parse(r.body).ok()?,
    };
    let rows = w.pointer.first(&source).and_then(Json::count)?;
    if rows == 0 && n > 0 {
        // The backend dropped the whole insert as one it has (ClickHouse's
        // insert deduplication of a block sent again).
        return Some(Ruling::Answers(vec![Answer::Duplicate; n]));
    }
    if rows < n as u64 {
        return Some(Ruling::Systemic(format!("HTTP {}: the backend wrote {rows} of the {n} rows sent", r.status)));
    }
    None
}
