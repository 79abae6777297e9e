//! Recorded answers and the fates they must come to: the conformance
//! corpus in `conformance/responses/<profile>/*.json`. The host's unit
//! tests run every case against its profile, `sluice sink classify` runs
//! any case against any profile or classifier plugin, and the classifier
//! examples of every SDK are held to `conformance/responses/axiom/`.
//!
//! A case:
//!
//! ```json
//! { "about": "one bulk item of three refused for its mapping",
//!   "ids": ["a", "b", "c"],
//!   "response": { "status": 200, "headers": {"retry-after": "3"},
//!                 "body": "…" },
//!   "expect": { "answers": ["accepted", "reject", "accepted"],
//!               "reason": "mapper_parsing_exception" } }
//! ```
//!
//! `response.json` may stand for `body`: the body is then that value's
//! JSON text. For a classifier plugin a case may add what the request
//! carried: `timestamps` (RFC 3339, or null, one per id), `spans`
//! (`[start, length]` in the request body, one per id) and `attempt`; a
//! profile that matches quoted records reads `texts` (each record as
//! sent). `expect` holds one of `answers` (a fate per record), `systemic`,
//! `split` (true), `row` (the bad row, from 0) or `dropped` (a partial
//! success: every record taken, this many dropped unnamed), and may add
//! `reason`, text every non-accepted answer's reason must contain, and
//! `taken`, the ids the backend's answer says it stored: the case fails
//! when the reading would send any of them again.

use std::collections::BTreeMap;
use std::path::Path;

use http::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;

use super::classifier::Reader;
use super::response::{Response, Ruling};
use crate::plugin::classified::Asked;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Case {
    #[serde(default)]
    pub about: String,
    pub ids: Vec<String>,
    #[serde(default)]
    pub timestamps: Vec<Option<String>>,
    #[serde(default)]
    pub spans: Vec<(u32, u32)>,
    /// Each record's text as sent, for a profile that matches the records
    /// a backend quotes (`counts.documents`).
    #[serde(default)]
    pub texts: Vec<String>,
    #[serde(default = "first_attempt")]
    pub attempt: u32,
    pub response: Recorded,
    pub expect: Expect,
}

fn first_attempt() -> u32 {
    1
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Recorded {
    pub status: u16,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub json: Option<serde_json::Value>,
}

impl Recorded {
    /// This answer to `sent`, read by `reader`.
    pub(crate) fn read_with(&self, reader: &Reader, sent: &Asked<'_>) -> Result<Ruling, String> {
        let mut headers = HeaderMap::new();
        for (k, v) in &self.headers {
            let name = HeaderName::from_bytes(k.as_bytes()).map_err(|e| format!("header {k}: {e}"))?;
            headers.insert(name, HeaderValue::from_str(v).map_err(|e| format!("header {k}: {e}"))?);
        }
        let body = match (&self.body, &self.json) {
            (Some(b), None) => b.clone().into_bytes(),
            (None, Some(j)) => j.to_string().into_bytes(),
            (None, None) => Vec::new(),
            (Some(_), Some(_)) => return Err("response has both body and json".into()),
        };
        Ok(reader.read(sent, &Response { status: self.status, headers: &headers, body: &body }))
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Expect {
    pub answers: Option<Vec<String>>,
    #[serde(default)]
    pub systemic: bool,
    #[serde(default)]
    pub split: bool,
    pub row: Option<usize>,
    /// A partial success: every record answered taken, this many dropped
    /// by the backend without naming them.
    pub dropped: Option<u64>,
    pub reason: Option<String>,
    /// The ids the backend's answer says it stored: none of them may be
    /// sent again (answered anything but accepted or duplicate), since a
    /// backend that does not dedup by id would store it twice.
    pub taken: Option<Vec<String>>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum CaseError {
    #[error("{path}: {message}")]
    Read { path: String, message: String },
    #[error("{path}: expected {expected}, got {got}")]
    Mismatch { path: String, expected: String, got: String },
}

impl Case {
    pub(crate) fn load(path: &Path) -> Result<Case, CaseError> {
        let read = |message: String| CaseError::Read { path: path.display().to_string(), message };
        let text = std::fs::read_to_string(path).map_err(|e| read(e.to_string()))?;
        let case: Case = serde_json::from_str(&text).map_err(|e| read(e.to_string()))?;
        let e = &case.expect;
        let said = usize::from(e.answers.is_some())
            + usize::from(e.systemic)
            + usize::from(e.split)
            + usize::from(e.row.is_some())
            + usize::from(e.dropped.is_some());
        if said != 1 {
            return Err(read("expect holds exactly one of answers, systemic, split, row, dropped".into()));
        }
        if let Some(id) = e.taken.iter().flatten().find(|id| !case.ids.contains(id)) {
            return Err(read(format!("expect.taken names {id:?}, which is not one of ids")));
        }
        if e.answers.as_ref().is_some_and(|a| a.len() != case.ids.len()) {
            return Err(read("expect.answers needs one fate per id".into()));
        }
        if !case.timestamps.is_empty() && case.timestamps.len() != case.ids.len() {
            return Err(read("timestamps needs one per id (null for none)".into()));
        }
        if !case.spans.is_empty() && case.spans.len() != case.ids.len() {
            return Err(read("spans needs one per id".into()));
        }
        if !case.texts.is_empty() && case.texts.len() != case.ids.len() {
            return Err(read("texts needs one per id".into()));
        }
        case.nanos().map_err(read)?;
        Ok(case)
    }

    /// The timestamps as ns since the epoch.
    fn nanos(&self) -> Result<Vec<Option<i64>>, String> {
        let rfc3339 = crate::plugin::helpers::compile_time_format("rfc3339")?;
        self.timestamps
            .iter()
            .map(|t| t.as_deref().map(|t| rfc3339.parse(t, 0).map_err(|e| format!("timestamps: {e}"))).transpose())
            .collect()
    }

    /// The case's response read by `reader`.
    pub(crate) fn reply(&self, reader: &Reader) -> Result<Ruling, String> {
        let ids: Vec<&str> = self.ids.iter().map(String::as_str).collect();
        let timestamps = self.nanos()?;
        let texts: Vec<&[u8]> = self.texts.iter().map(|t| t.as_bytes()).collect();
        let sent = Asked {
            ids: &ids,
            timestamps: &timestamps,
            spans: &self.spans,
            texts: &texts,
            body_bytes: 0,
            attempt: self.attempt,
        };
        self.response.read_with(reader, &sent)
    }

    /// The ids of `expect.taken` that `reply` would send again.
    fn resent_taken(&self, reply: &Ruling) -> Vec<String> {
        let Some(taken) = &self.expect.taken else { return Vec::new() };
        let settled = super::response::settle((0..self.ids.len()).collect(), reply.clone());
        let kept: std::collections::BTreeSet<usize> = settled
            .answered
            .iter()
            .filter(|(_, a)| matches!(a, crate::sink::Answer::Accepted | crate::sink::Answer::Duplicate))
            .map(|(i, _)| *i)
            .collect();
        self.ids
            .iter()
            .enumerate()
            .filter(|(i, id)| taken.contains(id) && !kept.contains(i))
            .map(|(_, id)| id.clone())
            .collect()
    }

    /// `Ok(what it came to)` when the reader reads it as expected.
    pub(crate) fn check(&self, reader: &Reader, path: &Path) -> Result<String, CaseError> {
        let shown = path.display().to_string();
        let reply = self.reply(reader).map_err(|message| CaseError::Read { path: shown.clone(), message })?;
        let got = describe(&reply);
        let e = &self.expect;
        let fits = match &reply {
            Ruling::Answers(a) => {
                e.answers.as_ref().is_some_and(|want| a.iter().map(|x| x.fate()).eq(want.iter().map(String::as_str)))
            }
            Ruling::Systemic(_) => e.systemic,
            Ruling::Split(_) => e.split,
            Ruling::BadRow { row, .. } => e.row == Some(*row),
            Ruling::Partial { rejected, .. } => e.dropped == Some(*rejected),
        };
        let reasons: Vec<&str> = match &reply {
            Ruling::Answers(a) => a.iter().filter_map(|x| x.reason()).collect(),
            Ruling::Systemic(r)
            | Ruling::Split(r)
            | Ruling::BadRow { reason: r, .. }
            | Ruling::Partial { reason: r, .. } => {
                vec![r]
            }
        };
        let reason_fits = e
            .reason
            .as_ref()
            .is_none_or(|want| !reasons.is_empty() && reasons.iter().all(|r| r.contains(want.as_str())));
        let resent = self.resent_taken(&reply);
        if !resent.is_empty() {
            return Err(CaseError::Mismatch {
                path: shown,
                expected: "nothing the backend took sent again".into(),
                got: format!("{got}, which sends {} again", resent.join(", ")),
            });
        }
        if fits && reason_fits {
            return Ok(got);
        }
        let mut expected = match (&e.answers, e.systemic, e.split, e.row, e.dropped) {
            (Some(a), ..) => format!("answers {}", a.join(" ")),
            (_, true, ..) => "systemic".into(),
            (_, _, true, ..) => "split".into(),
            (_, _, _, Some(r), _) => format!("row {r}"),
            (.., Some(d)) => format!("dropped {d}"),
            _ => "nothing".into(),
        };
        if let Some(r) = &e.reason {
            expected.push_str(&format!(" with reasons containing {r:?}"));
        }
        let got = if reasons.is_empty() { got } else { format!("{got} ({})", reasons.join(" | ")) };
        Err(CaseError::Mismatch { path: shown, expected, got })
    }
}

/// A reply in the words of the corpus.
pub(crate) fn describe(reply: &Ruling) -> String {
    match reply {
        Ruling::Answers(a) => format!("answers {}", a.iter().map(|x| x.fate()).collect::<Vec<_>>().join(" ")),
        Ruling::Systemic(_) => "systemic".into(),
        Ruling::Split(_) => "split".into(),
        Ruling::BadRow { row, taken_before: false, .. } => format!("row {row}"),
        Ruling::BadRow { row, taken_before: true, .. } => format!("row {row}, those before it taken"),
        Ruling::Partial { rejected, .. } => format!("dropped {rejected}"),
    }
}

/// The cases of a folder, in name order.
pub(crate) fn cases(dir: &Path) -> Result<Vec<std::path::PathBuf>, CaseError> {
    let read = |message: String| CaseError::Read { path: dir.display().to_string(), message };
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| read(e.to_string()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::http::response::profile::{BUILTIN, Profile};

    fn reader(name: &str) -> Reader {
        Reader::profile(Profile::builtin(name).unwrap_or_else(|e| panic!("{e}")))
    }

    /// Every built-in profile has a corpus, with at least one partial
    /// failure (some records accepted, some not), and reads every case of
    /// it as recorded.
    #[test]
    fn every_builtin_profile_reads_its_corpus() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance/responses");
        let mut failures = Vec::new();
        for (name, _) in BUILTIN {
            let profile = reader(name);
            let paths = cases(&root.join(name)).unwrap_or_else(|e| panic!("{e}"));
            assert!(paths.len() >= 3, "{name}: a corpus of at least three answers");
            let mut partial = false;
            for path in paths {
                let case = Case::load(&path).unwrap_or_else(|e| panic!("{e}"));
                partial |= case.expect.split
                    || case.expect.row.is_some()
                    || case.expect.dropped.is_some()
                    || case
                        .expect
                        .answers
                        .as_ref()
                        .is_some_and(|a| a.iter().any(|f| f == "accepted") && a.iter().any(|f| f != "accepted"));
                if let Err(e) = case.check(&profile, &path) {
                    failures.push(e.to_string());
                }
            }
            assert!(partial, "{name}: the corpus holds a partial failure");
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    /// The corpus can fail: a case read by the wrong profile does not fit.
    #[test]
    fn a_case_read_by_another_profile_is_a_mismatch() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance/responses");
        let path = root.join("elasticsearch_bulk/02-partial-failures.json");
        let case = Case::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let status = reader("status");
        assert!(matches!(case.check(&status, &path), Err(CaseError::Mismatch { .. })));
    }
}
