//! Reading one response with a profile: status rules first, then the
//! evidence in the body. Pure: the request's ids and the response in, a
//! `Reply` out, held to the fixed rules before it leaves.

use super::fixed::{self, Evidence};
use super::json::Json;
use super::profile::{CountFate, Counts, Items, Profile, RecordFate, RequestFate, Row, StatusRule, Timed, Written};
use super::{Reply, Response, excerpt};
use crate::sink::Answer;

/// What `profile` makes of `response` to a request of the records `ids`.
pub fn classify(profile: &Profile, ids: &[&str], response: &Response<'_>) -> Reply {
    classify_timed(profile, ids, &[], response)
}

/// [`classify`], with the records' times (ns, by position) for a profile
/// whose backend names refused records by time (`timed`).
pub fn classify_timed(profile: &Profile, ids: &[&str], times: &[Option<i64>], response: &Response<'_>) -> Reply {
    let (reply, evidence) = read(profile, ids, times, response);
    fixed::enforce(response.status, ids.len(), reply, evidence)
}

fn read(p: &Profile, ids: &[&str], times: &[Option<i64>], r: &Response<'_>) -> (Reply, Evidence) {
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
        RequestFate::Accepted => (Reply::Answers(vec![Answer::Accepted; n]), Evidence::Request),
        RequestFate::Duplicate => (Reply::Answers(vec![Answer::Duplicate; n]), Evidence::Request),
        RequestFate::Systemic => (Reply::Systemic(said()), Evidence::Request),
        RequestFate::Split => (Reply::Split(said()), Evidence::Request),
        RequestFate::Read => evidence(p, ids, r),
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
fn evidence(p: &Profile, ids: &[&str], r: &Response<'_>) -> (Reply, Evidence) {
    let n = ids.len();
    if let Some(w) = &p.written
        && let Some(reply) = written(w, r, n)
    {
        return (reply, Evidence::PerRecord);
    }
    if p.items.is_none() && p.counts.is_none() {
        return (Reply::Answers(vec![Answer::Accepted; n]), Evidence::Request);
    }
    let empty_is_none_failed = p.counts.as_ref().is_some_and(|c| c.failed_when_absent.is_some());
    let parsed = if empty_is_none_failed && r.body.trim_ascii().is_empty() {
        Ok(Json::empty_object())
    } else {
        Json::parse(r.body)
    };
    let Ok(body) = parsed else {
        return (
            Reply::Systemic(format!("HTTP {}: the answer is not the JSON expected: {}", r.status, excerpt(r.body))),
            Evidence::Request,
        );
    };
    if let Some(items) = &p.items {
        return (per_item(items, ids, &body, r.status), Evidence::PerRecord);
    }
    if let Some(counts) = &p.counts {
        return (counted(counts, &body, n, r.status), Evidence::PerRecord);
    }
    (Reply::Answers(vec![Answer::Accepted; n]), Evidence::Request)
}

fn per_item(items: &Items, ids: &[&str], body: &Json<'_>, status: u16) -> Reply {
    let n = ids.len();
    let Some(array) = items.array.first(body).and_then(|a| a.as_array()) else {
        return Reply::Systemic(format!("HTTP {status}: no item array at {}", items.array));
    };
    if array.len() != n {
        return Reply::Systemic(format!("HTTP {status}: {} items answer {n} records", array.len()));
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
                    return Reply::Systemic(format!("HTTP {status}: item {pos} names no record that was sent"));
                };
                i
            }
        };
        let answer = item_answer(items, item);
        if answers[at].replace(answer).is_some() {
            return Reply::Systemic(format!("HTTP {status}: two items answer record {}", at + 1));
        }
    }
    // Every slot is filled: n items, each to a distinct record.
    Reply::Answers(answers.into_iter().map(|a| a.unwrap_or_else(|| Answer::Systemic("no item".into()))).collect())
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

fn counted(c: &Counts, body: &Json<'_>, n: usize, status: u16) -> Reply {
    let Some(failed) = c.failed.sum(body).or(c.failed_when_absent) else {
        return Reply::Systemic(format!("HTTP {status}: no count of failures at {}", c.failed));
    };
    let ok = match &c.successful {
        Some(p) => match p.sum(body) {
            Some(ok) => ok,
            None => return Reply::Systemic(format!("HTTP {status}: no count of successes at {p}")),
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
        return Reply::Systemic(format!("HTTP {status}: the counts do not account for the records sent: {}", reason()));
    }
    if failed == 0 {
        return Reply::Answers(vec![Answer::Accepted; n]);
    }
    // Each error text is judged; one that says the backend failed makes
    // the whole answer systemic (no record is blamed for it).
    let judged =
        errors.iter().map(|e| c.rules.iter().find(|r| r.matches.0.is_match(e)).map_or(c.otherwise, |r| r.fate));
    if judged.into_iter().any(|f| f == CountFate::Systemic) {
        return Reply::Systemic(format!("HTTP {status}: {}", reason()));
    }
    Reply::Split(reason())
}

fn named_row(row: &Row, r: &Response<'_>, n: usize) -> Option<Reply> {
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
        Some(i) if i < n => Some(Reply::BadRow { row: i, reason }),
        _ => Some(Reply::Systemic(format!("{reason} (row {number} is not one of the {n} sent)"))),
    }
}

/// The records an answer names by time, rejected; the others taken.
/// `None` when the body names no time: the status rules read it then.
fn timed(t: &Timed, times: &[Option<i64>], r: &Response<'_>, n: usize) -> Option<Reply> {
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
    let split = |why: String| Some(Reply::Split(format!("HTTP {}: {why}", r.status)));
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
    Some(Reply::Answers(answers))
}

fn written(w: &Written, r: &Response<'_>, n: usize) -> Option<Reply> {
    let source = match &w.header {
        Some(h) => Json::parse(r.headers.get(h.as_str())?.as_bytes()).ok()?,
        None => Json::parse(r.body).ok()?,
    };
    let rows = w.pointer.first(&source).and_then(Json::count)?;
    if rows == 0 && n > 0 {
        // The backend dropped the whole insert as one it has (ClickHouse's
        // insert deduplication of a block sent again).
        return Some(Reply::Answers(vec![Answer::Duplicate; n]));
    }
    if rows < n as u64 {
        return Some(Reply::Systemic(format!("HTTP {}: the backend wrote {rows} of the {n} rows sent", r.status)));
    }
    None
}
