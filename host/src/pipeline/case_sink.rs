//! The sink of a config case (`sluice test`): without scripted answers it
//! accepts every event; with them, each request the sink would send gets
//! the next answer, read by the sink's own reader (its response profile,
//! or its classifier plugin) and held to the fixed rules, in the rounds the guarded driver runs (a split sends
//! halves, a named row is taken out, a retry spends an attempt, a
//! systemic answer spends none). A record still waiting when the answers
//! run out is reported as waiting: late, not lost.

use crate::delivery::Delivery;
use crate::delivery::FinalAnswer;
use crate::plugin::classified::Asked;
use crate::sink::Answer;
use crate::sink::http::classifier::Reader;
use crate::sink::http::corpus::Recorded;
use crate::sink::http::response::{Next, settle};

/// Why a record is still in the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Waiting {
    /// Its last answer was systemic (the backend's fault).
    Systemic(String),
    /// Its last answer was a retry with attempts left.
    Retry(String),
}

pub(crate) struct CaseSink<'a> {
    reader: Reader,
    answers: std::slice::Iter<'a, Recorded>,
    max_attempts: u32,
}

impl<'a> CaseSink<'a> {
    pub(crate) fn new(reader: Reader, answers: &'a [Recorded], max_attempts: u32) -> CaseSink<'a> {
        CaseSink { reader, answers: answers.iter(), max_attempts: max_attempts.max(1) }
    }

    /// Each delivery's outcome, or why it still waits.
    pub(crate) fn deliver(&mut self, batch: &[Delivery]) -> Result<Vec<Result<FinalAnswer, Waiting>>, String> {
        let mut out: Vec<Result<FinalAnswer, Waiting>> =
            vec![Err(Waiting::Systemic("no request was answered".into())); batch.len()];
        let mut attempts = vec![0u32; batch.len()];
        let mut pending: Vec<usize> = (0..batch.len()).collect();
        while !pending.is_empty() && self.answers.len() > 0 {
            let mut answers: Vec<Option<Answer>> = vec![None; batch.len()];
            self.resolve(batch, pending.clone(), &mut answers)?;
            let mut again = Vec::new();
            for i in pending {
                match answers[i].take() {
                    None => again.push(i),
                    Some(Answer::Accepted | Answer::Duplicate) => out[i] = Ok(FinalAnswer::Accepted),
                    Some(Answer::Rejected(r)) => out[i] = Ok(FinalAnswer::Rejected(r)),
                    Some(Answer::Retry(r)) => {
                        attempts[i] += 1;
                        if attempts[i] >= self.max_attempts {
                            out[i] = Ok(FinalAnswer::Rejected(format!("gave up after {} attempts: {r}", attempts[i])));
                        } else {
                            out[i] = Err(Waiting::Retry(r));
                            again.push(i);
                        }
                    }
                    Some(Answer::Systemic(r)) => {
                        out[i] = Err(Waiting::Systemic(r));
                        again.push(i);
                    }
                }
            }
            pending = again;
        }
        Ok(out)
    }

    /// One request of `items`, then as its reply demands (the http sink's
    /// `resolve`, one request at a time); `None` where the answers ran out.
    fn resolve(&mut self, batch: &[Delivery], mut items: Vec<usize>, out: &mut [Option<Answer>]) -> Result<(), String> {
        while !items.is_empty() {
            let Some(recorded) = self.answers.next() else { return Ok(()) };
            let ids: Vec<&str> = items.iter().map(|i| batch[*i].id.as_str()).collect();
            let times: Vec<Option<i64>> = items.iter().map(|i| batch[*i].timestamp).collect();
            let sent = Asked { ids: &ids, timestamps: &times, spans: &[], texts: &[], body_bytes: 0, attempt: 1 };
            let reply = recorded.read_with(&self.reader, &sent).map_err(|e| format!("sink answer: {e}"))?;
            let settled = settle(items, reply);
            for (i, a) in settled.answered {
                out[i] = Some(a);
            }
            match settled.next {
                Next::Done => return Ok(()),
                Next::Resend(rest) => items = rest,
                Next::Halves(left, right) => {
                    self.resolve(batch, left, out)?;
                    return self.resolve(batch, right, out);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::http::response::profile::Profile;

    fn answer(status: u16, json: serde_json::Value) -> Recorded {
        serde_json::from_value(serde_json::json!({"status": status, "json": json})).unwrap_or_else(|e| panic!("{e}"))
    }

    fn batch(n: usize) -> Vec<Delivery> {
        (0..n).map(|i| Delivery::new(format!("e{i}"), None, b"{}")).collect()
    }

    #[test]
    fn splits_rows_retries_and_systemic_answers_play_out_as_the_driver_would() {
        let status = Profile::builtin("status").unwrap_or_else(|e| panic!("{e}"));
        // 4 records: a 400 splits; the left half is accepted; the right
        // half's 400 splits again; e2 accepted, e3 refused alone.
        let script = [
            answer(400, serde_json::json!({})),
            answer(200, serde_json::json!({})),
            answer(400, serde_json::json!({})),
            answer(200, serde_json::json!({})),
            answer(400, serde_json::json!({"error": "bad e3"})),
        ];
        let mut sink = CaseSink::new(Reader::profile(status.clone()), &script, 5);
        let got = sink.deliver(&batch(4)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got[..3], [Ok(FinalAnswer::Accepted), Ok(FinalAnswer::Accepted), Ok(FinalAnswer::Accepted)]);
        assert!(matches!(&got[3], Ok(FinalAnswer::Rejected(r)) if r.contains("bad e3")));

        // A 404 then a 503: never quarantined, still waiting when the script ends.
        let script = [answer(404, serde_json::json!({})), answer(503, serde_json::json!({}))];
        let got =
            CaseSink::new(Reader::profile(status), &script, 1).deliver(&batch(2)).unwrap_or_else(|e| panic!("{e}"));
        assert!(got.iter().all(|g| matches!(g, Err(Waiting::Systemic(r)) if r.contains("503"))), "{got:?}");

        // A bulk item retried until the attempts run out.
        let mut es = Profile::builtin("elasticsearch_bulk").unwrap_or_else(|e| panic!("{e}"));
        es.items.iter_mut().for_each(|i| {
            i.rules.insert(0, toml::from_str("codes = [409]\nfate = \"retry\"").unwrap_or_else(|e| panic!("{e}")))
        });
        let conflict = |n: usize| {
            answer(200, serde_json::json!({"items": vec![serde_json::json!({"create": {"status": 409}}); n]}))
        };
        let script = [conflict(1), conflict(1), conflict(1)];
        let got = CaseSink::new(Reader::profile(es), &script, 2).deliver(&batch(1)).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            matches!(&got[0], Ok(FinalAnswer::Rejected(r)) if r.starts_with("gave up after 2 attempts")),
            "{got:?}"
        );
    }
}
