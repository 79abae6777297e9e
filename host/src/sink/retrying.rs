//! Drives a sink through failure: what is retried, how long to wait, and
//! when to stop sending altogether. Every sink goes through this, so a
//! file, an HTTP backend and a Kafka topic fail the same way.
//!
//! The custody rule's side of delivery: an event leaves here `Accepted`
//! (its id may be recorded), `Rejected` (it goes to the quarantine with the
//! backend's answer), or undecided — only when the caller is stopping, in
//! which case its record stays unfinished and is read again.
//!
//! - `Answer::Retry` is about the event: it spends one of the event's
//!   `retry.max_attempts`, then the event is rejected with the last answer.
//! - `Answer::Systemic` is about the backend: the breaker counts the
//!   failed request, the event is sent again after a backoff (or the
//!   backend's `Retry-After`, if longer), and while the breaker is open
//!   nothing is sent at all; the partitions wait, their queues fill,
//!   fetching pauses and the lag grows.
//! - `Answer::Duplicate` (the backend has it already) is a door like
//!   `Accepted`: its id may be recorded.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::breaker::{Breaker, BreakerConfig, Permit, Transition};
use super::retry::RetryConfig;
use super::{Answer, Attempt, Delivery, Sink};
use crate::delivery::FinalAnswer;
use crate::sink::events::{BreakerChanged, SinkRequests};
use crate::telemetry::InternalEvent;

/// A sink behind its retries and breaker: the one place a failed request
/// waits, so the sinks themselves only send.
pub struct RetryingSink {
    sink: Box<dyn Sink>,
    name: String,
    retry: RetryConfig,
    breaker: Mutex<Breaker>,
}

/// How often a waiting caller looks at its stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

/// The longest `Retry-After` honoured: a backend that asks for a day is
/// more likely wrong than right, and a quarter of an hour is already lag
/// an operator's alert sees.
pub(crate) const RETRY_AFTER_CAP: Duration = Duration::from_secs(15 * 60);

impl RetryingSink {
    /// `sink` held to `retry` and `breaker`.
    pub fn new(sink: Box<dyn Sink>, retry: RetryConfig, breaker: BreakerConfig) -> RetryingSink {
        RetryingSink::labelled(sink, retry, breaker, None)
    }

    /// With `name` (one of several sinks) before its target in logs and
    /// metrics labels: `index: http://…`.
    pub(crate) fn labelled(
        sink: Box<dyn Sink>,
        retry: RetryConfig,
        breaker: BreakerConfig,
        name: Option<&str>,
    ) -> RetryingSink {
        let name = match name {
            Some(n) => format!("{n}: {}", sink.describe()),
            None => sink.describe(),
        };
        BreakerChanged::initial(&name);
        RetryingSink { sink, name, retry, breaker: Mutex::new(Breaker::new(breaker)) }
    }

    pub(crate) fn describe(&self) -> &str {
        &self.name
    }

    /// The sink's own probe: once, outside the breaker and the retries.
    pub(crate) fn probe(&self) -> Result<String, String> {
        self.sink.probe()
    }

    /// Whether the breaker lets nothing through now (open, or its one
    /// probe out): what makes a partition waiting in the sink late rather
    /// than stalled.
    pub(crate) fn breaker_open(&self) -> bool {
        !matches!(self.breaker().state(), super::breaker::State::Closed { .. })
    }

    fn breaker(&self) -> std::sync::MutexGuard<'_, Breaker> {
        self.breaker.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn changed(&self, t: Option<Transition>) {
        if let Some(t) = t {
            BreakerChanged { sink: &self.name, transition: t }.emit();
        }
    }

    /// Deliver `batch` until every event is accepted or rejected, or until
    /// `stopping()` says the caller must let go (those events come back
    /// `None`: not delivered as far as anyone knows).
    pub fn deliver(&self, batch: &[Delivery], stopping: &dyn Fn() -> bool) -> Vec<Option<FinalAnswer>> {
        let mut out: Vec<Option<FinalAnswer>> = vec![None; batch.len()];
        let mut attempts = vec![0u32; batch.len()];
        let mut pending: Vec<usize> = (0..batch.len()).collect();
        let mut round = 0u32;
        while !pending.is_empty() {
            // Wait for the breaker's leave to send.
            let probe = loop {
                if stopping() {
                    return out;
                }
                let (permit, t) = self.breaker().permit(Instant::now());
                self.changed(t);
                match permit {
                    Permit::Send => break false,
                    Permit::Probe => break true,
                    Permit::WaitUntil(at) => {
                        std::thread::sleep(at.saturating_duration_since(Instant::now()).min(STOP_POLL))
                    }
                }
            };
            if probe && stopping() {
                self.breaker().abandon_probe(Instant::now());
                return out;
            }

            // The first round sends the batch as it is; later rounds only
            // what is still pending.
            let subset: Vec<Delivery>;
            let sent: &[Delivery] = if pending.len() == batch.len() {
                batch
            } else {
                subset = pending.iter().map(|i| batch[*i].clone()).collect();
                &subset
            };
            let started = Instant::now();
            let nth = 1 + pending.iter().map(|i| attempts[*i]).max().unwrap_or(0);
            let attempt =
                self.sink.deliver_nth(sent, nth).unwrap_or_else(|e| Attempt::systemic(sent.len(), &e.to_string()));
            let attempt = conform(attempt, sent.len());
            SinkRequests { sink: &self.name, attempt: &attempt, seconds: started.elapsed().as_secs_f64() }.emit();
            {
                let mut b = self.breaker();
                let now = Instant::now();
                // Failures first: a call with any answered request proves
                // the backend alive and closes the breaker.
                let mut ts: Vec<Option<Transition>> =
                    (0..attempt.requests_failed).map(|_| b.failure(now, probe)).collect();
                if attempt.requests_ok > 0 {
                    ts.push(b.success());
                }
                if let Some(d) = attempt.retry_after {
                    b.hold(now + d.min(RETRY_AFTER_CAP));
                }
                drop(b);
                ts.into_iter().for_each(|t| self.changed(t));
            }

            let mut again = Vec::new();
            for (i, answer) in pending.iter().copied().zip(attempt.answers) {
                match answer {
                    Answer::Accepted | Answer::Duplicate => out[i] = Some(FinalAnswer::Accepted),
                    Answer::Rejected(reason) => out[i] = Some(FinalAnswer::Rejected(reason)),
                    Answer::Retry(reason) => {
                        attempts[i] += 1;
                        if attempts[i] >= self.retry.max_attempts.max(1) {
                            let n = attempts[i];
                            out[i] = Some(FinalAnswer::Rejected(format!("gave up after {n} attempts: {reason}")));
                        } else {
                            again.push(i);
                        }
                    }
                    Answer::Systemic(_) => again.push(i),
                }
            }
            pending = again;
            if pending.is_empty() {
                break;
            }
            let wait = self.retry.backoff(round).max(attempt.retry_after.unwrap_or_default().min(RETRY_AFTER_CAP));
            round = round.saturating_add(1);
            let until = Instant::now() + wait;
            while Instant::now() < until {
                if stopping() {
                    return out;
                }
                std::thread::sleep(until.saturating_duration_since(Instant::now()).min(STOP_POLL));
            }
        }
        out
    }
}

/// A sink that answers the wrong number of events broke its contract:
/// nothing it said can be trusted, so the whole call counts as failed.
fn conform(attempt: Attempt, n: usize) -> Attempt {
    if attempt.answers.len() == n {
        attempt
    } else {
        tracing::error!(expected = n, got = attempt.answers.len(), "sink answered the wrong number of events");
        Attempt::systemic(n, "sink answered the wrong number of events")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::SinkError;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Answers from a script, one call at a time.
    struct Scripted {
        calls: AtomicU32,
        script: fn(u32, &[Delivery]) -> Attempt,
    }

    impl Sink for Scripted {
        fn deliver(&self, batch: &[Delivery]) -> Result<Attempt, SinkError> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            Ok((self.script)(n, batch))
        }
        fn describe(&self) -> String {
            "scripted".into()
        }
    }

    fn fast() -> (RetryConfig, BreakerConfig) {
        (
            RetryConfig {
                max_attempts: 3,
                initial_backoff: Duration::from_millis(1),
                max_backoff: Duration::from_millis(4),
            },
            BreakerConfig {
                failures: 5,
                initial_probe: Duration::from_millis(5),
                max_probe: Duration::from_millis(20),
            },
        )
    }

    fn batch(n: usize) -> Vec<Delivery> {
        (0..n).map(|i| Delivery::new(format!("e{i}"), None, b"{}")).collect()
    }

    fn guarded(script: fn(u32, &[Delivery]) -> Attempt) -> RetryingSink {
        let (r, b) = fast();
        RetryingSink::new(Box::new(Scripted { calls: AtomicU32::new(0), script }), r, b)
    }

    #[test]
    fn a_record_retried_too_often_is_rejected_and_the_rest_delivered() {
        let g = guarded(|_, b| Attempt {
            answers: b
                .iter()
                .map(|d| if d.id == "e1" { Answer::Retry("busy".into()) } else { Answer::Accepted })
                .collect(),
            requests_ok: 1,
            ..Attempt::default()
        });
        let out = g.deliver(&batch(3), &|| false);
        assert_eq!(out[0], Some(FinalAnswer::Accepted));
        assert_eq!(out[1], Some(FinalAnswer::Rejected("gave up after 3 attempts: busy".into())));
        assert_eq!(out[2], Some(FinalAnswer::Accepted));
    }

    #[test]
    fn unavailable_never_spends_attempts_and_the_breaker_opens_then_closes() {
        // Twelve failed calls, then success: far more than max_attempts,
        // yet nothing is rejected.
        let g = guarded(|n, b| if n < 12 { Attempt::systemic(b.len(), "503") } else { Attempt::accepted(b.len()) });
        let out = g.deliver(&batch(2), &|| false);
        assert_eq!(out, vec![Some(FinalAnswer::Accepted); 2]);
        assert!(matches!(g.breaker().state(), crate::sink::breaker::State::Closed { failures: 0 }));
    }

    #[test]
    fn a_stopping_caller_gets_its_undecided_events_back() {
        let g = guarded(|_, b| Attempt::systemic(b.len(), "down"));
        let started = Instant::now();
        let out = g.deliver(&batch(2), &|| started.elapsed() > Duration::from_millis(100));
        assert_eq!(out, vec![None, None]);
    }

    #[test]
    fn a_wrong_answer_count_is_a_failed_request_not_a_delivery() {
        let g = guarded(|n, b| if n == 0 { Attempt::accepted(1) } else { Attempt::accepted(b.len()) });
        assert_eq!(g.deliver(&batch(3), &|| false), vec![Some(FinalAnswer::Accepted); 3]);
        assert_eq!(g.sink.describe(), "scripted");
    }
}
