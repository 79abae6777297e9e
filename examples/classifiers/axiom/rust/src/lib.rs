//! A classifier for Axiom's ingest API (`POST /v1/datasets/<name>/ingest`),
//! which no built-in profile covers: a 200 counts `ingested` and `failed`
//! and lists each failure with the *timestamp* of the event it refused,
//! not its position. So a failure is matched back to the one record sent
//! with that time; where two records share it, the answer cannot say
//! which failed and the batch is split to find out.
//!
//! The same logic is written in Python, JavaScript and C beside this
//! folder, and all four pass `conformance/responses/axiom/`.

use std::collections::HashMap;

use sluice_classifier::{Classifier, Fate, Reply, Request, Response, export_classifier};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Axiom {}

#[derive(serde::Deserialize)]
struct Ingest {
    ingested: u64,
    failed: u64,
    #[serde(default)]
    failures: Vec<Failure>,
}

#[derive(serde::Deserialize)]
struct Failure {
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(default)]
    error: String,
}

impl Classifier for Axiom {
    fn classify(&mut self, request: &Request, response: &Response) -> Reply {
        let n = request.len();
        match response.status {
            200..=299 => {}
            // A record Axiom cannot take at all (a body that is not JSON).
            400 | 413 | 422 => return Reply::Split(response.excerpt()),
            _ => return Reply::All(Fate::Systemic(response.excerpt())),
        }
        let ingest: Ingest = match response.json() {
            Ok(i) => i,
            Err(e) => return Reply::All(Fate::Systemic(format!("HTTP {}: {e}", response.status))),
        };
        if ingest.ingested + ingest.failed != n as u64 {
            return Reply::All(Fate::Systemic(format!(
                "Axiom counted {} ingested and {} failed of the {n} sent",
                ingest.ingested, ingest.failed
            )));
        }
        if ingest.failed == 0 {
            return Reply::All(Fate::Accepted);
        }
        let first = ingest.failures.first().map_or("no failure listed", |f| f.error.as_str());
        let split = || Reply::Split(format!("axiom: {} of {n} failed: {first}", ingest.failed));
        if ingest.failures.len() as u64 != ingest.failed {
            return split();
        }
        // One pass over the request: each time to its record, or to none
        // when two records share it (which one failed is then unknown).
        let mut by_time: HashMap<i64, Option<usize>> = HashMap::with_capacity(n);
        for i in 0..n {
            if let Some(ns) = request.timestamp(i) {
                by_time.entry(ns).and_modify(|shared| *shared = None).or_insert(Some(i));
            }
        }
        let mut fates = vec![Fate::Accepted; n];
        for f in &ingest.failures {
            let Some(ns) = f.timestamp.as_deref().and_then(rfc3339_nanos) else { return split() };
            match by_time.get(&ns) {
                Some(Some(i)) if fates[*i] == Fate::Accepted => fates[*i] = Fate::Reject(format!("axiom: {}", f.error)),
                _ => return split(),
            }
        }
        Reply::Each(fates)
    }
}

/// `2024-05-01T12:00:01.5Z` (or with an offset) as ns since the epoch.
pub fn rfc3339_nanos(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let s = b.get(from..from + len)?;
        s.iter().all(u8::is_ascii_digit).then(|| s.iter().fold(0i64, |a, d| a * 10 + i64::from(d - b'0')))
    };
    let (y, mo, d) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (h, mi, s) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') || !matches!(b.get(10), Some(b'T' | b't' | b' ')) {
        return None;
    }
    let mut at = 19;
    let mut frac = 0i64;
    if b.get(at) == Some(&b'.') {
        at += 1;
        let mut digits = 0;
        while let Some(c) = b.get(at).filter(|c| c.is_ascii_digit()) {
            if digits < 9 {
                frac = frac * 10 + i64::from(c - b'0');
                digits += 1;
            }
            at += 1;
        }
        frac *= 10i64.pow(9 - digits);
    }
    let offset = match b.get(at) {
        Some(b'Z' | b'z') if at + 1 == b.len() => 0,
        Some(sign @ (b'+' | b'-')) if at + 6 == b.len() => {
            let o = num(at + 1, 2)? * 3600 + num(at + 4, 2)? * 60;
            if *sign == b'-' { -o } else { o }
        }
        _ => return None,
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3600 + mi * 60 + s - offset) * 1_000_000_000 + frac)
}

export_classifier!(Axiom);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_reads_fractions_and_offsets() {
        assert_eq!(rfc3339_nanos("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(rfc3339_nanos("2024-05-01T12:00:01.5Z"), Some(1_714_564_801_500_000_000));
        assert_eq!(rfc3339_nanos("2024-05-01T14:00:01.5+02:00"), Some(1_714_564_801_500_000_000));
        assert_eq!(rfc3339_nanos("2024-05-01 12:00:01"), None, "no zone: no instant");
    }

    #[test]
    fn a_failure_lands_on_the_record_with_its_time() {
        let t = |s| rfc3339_nanos(s);
        let req = Request::new(
            &["a", "b", "c"],
            &[t("2024-05-01T12:00:00Z"), t("2024-05-01T12:00:01Z"), t("2024-05-01T12:00:02Z")],
            &[],
        );
        let body =
            r#"{"ingested":2,"failed":1,"failures":[{"timestamp":"2024-05-01T12:00:01Z","error":"field too long"}]}"#;
        let Reply::Each(f) = Axiom {}.classify(&req, &Response::new(200, body)) else { panic!("each") };
        assert_eq!(f, vec![Fate::Accepted, Fate::Reject("axiom: field too long".into()), Fate::Accepted]);
    }
}
