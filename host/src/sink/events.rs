//! What a guarded sink says: its breaker changing state, and each
//! request's answer.

use metrics::{counter, gauge, histogram};

use crate::telemetry::{EVENTS, InternalEvent};

/// A sink's circuit breaker changed state.
pub(crate) struct BreakerChanged<'a> {
    pub sink: &'a str,
    pub transition: crate::sink::breaker::Transition,
}

impl BreakerChanged<'_> {
    /// A new sink starts closed; the gauge says so from the first scrape.
    pub(crate) fn initial(sink: &str) {
        gauge!("sluice_breaker_state", "sink" => sink.to_string()).set(0.0);
    }
}

impl InternalEvent for BreakerChanged<'_> {
    fn emit(&self) {
        use crate::sink::breaker::Transition;
        let s = || self.sink.to_string();
        let (to, state) = match self.transition {
            Transition::Opened { .. } | Transition::ProbeFailed { .. } => ("open", 1.0),
            Transition::Probing => ("probing", 2.0),
            Transition::Closed => ("closed", 0.0),
        };
        gauge!("sluice_breaker_state", "sink" => s()).set(state);
        counter!("sluice_breaker_transitions_total", "sink" => s(), "to" => to).increment(1);
        match self.transition {
            Transition::Opened { after_failures, pause } => tracing::warn!(target: EVENTS, sink = self.sink,
                after_failures,
                probe_in_ms = pause.as_millis() as u64,
                "circuit breaker opened: nothing is sent until a probe succeeds; partitions pause and lag grows"
            ),
            Transition::ProbeFailed { pause } => tracing::warn!(target: EVENTS, sink = self.sink,
                next_probe_in_ms = pause.as_millis() as u64,
                "circuit breaker probe failed; staying open"
            ),
            Transition::Probing => tracing::info!(target: EVENTS, sink = self.sink, "circuit breaker probing"),
            Transition::Closed => {
                tracing::info!(target: EVENTS, sink = self.sink, "circuit breaker closed: delivering again")
            }
        }
    }
}

/// One call into a sink: its requests and how the backend answered each
/// event.
pub(crate) struct SinkRequests<'a> {
    pub sink: &'a str,
    pub attempt: &'a crate::sink::Attempt,
    pub seconds: f64,
}

impl InternalEvent for SinkRequests<'_> {
    fn emit(&self) {
        use crate::sink::Answer;
        let s = || self.sink.to_string();
        let a = self.attempt;
        counter!("sluice_sink_requests_total", "sink" => s(), "result" => "ok").increment(a.requests_ok.into());
        counter!("sluice_sink_requests_total", "sink" => s(), "result" => "failed").increment(a.requests_failed.into());
        histogram!("sluice_sink_request_seconds", "sink" => s()).record(self.seconds);
        // Fates by class, in the order of `Answer`: accepted, duplicate,
        // retry, reject, systemic.
        let mut n = [0u64; 5];
        let mut last = None;
        for answer in &a.answers {
            let class = match answer {
                Answer::Accepted => 0,
                Answer::Duplicate => 1,
                Answer::Retry(_) => 2,
                Answer::Rejected(_) => 3,
                Answer::Systemic(_) => 4,
            };
            n[class] += 1;
            if matches!(answer, Answer::Retry(_) | Answer::Systemic(_)) {
                last = answer.reason();
            }
        }
        for (fate, count) in ["accepted", "duplicate", "retry", "reject", "systemic"].into_iter().zip(n) {
            if count > 0 {
                counter!("sluice_sink_answers_total", "sink" => s(), "fate" => fate).increment(count);
            }
        }
        if a.splits > 0 {
            counter!("sluice_sink_splits_total", "sink" => s()).increment(a.splits.into());
        }
        if a.dropped_by_backend > 0 {
            counter!("sluice_sink_dropped_by_backend_total", "sink" => s()).increment(a.dropped_by_backend);
            tracing::warn!(target: EVENTS, sink = self.sink, dropped = a.dropped_by_backend,
                "the backend took the request but dropped records it did not name, and its protocol forbids \
                 sending them again: {}",
                a.dropped_reason.as_deref().unwrap_or("no reason given")
            );
        }
        let [accepted, duplicate, retry, rejected, systemic] = n;
        if let Some(reason) = last {
            tracing::warn!(target: EVENTS, sink = self.sink,
                accepted,
                duplicate,
                retry,
                rejected,
                systemic,
                retry_after_s = a.retry_after.map(|d| d.as_secs()),
                "sink delivery incomplete: {reason}"
            );
        } else {
            tracing::debug!(target: EVENTS, sink = self.sink, accepted, duplicate, rejected, seconds = self.seconds, "sink delivered");
        }
    }
}

/// A sink's request bytes were lowered after the backend answered 413.
pub(crate) struct BatchBytesLowered<'a> {
    pub sink: &'a str,
    pub from: u64,
    pub to: u64,
}

impl InternalEvent for BatchBytesLowered<'_> {
    fn emit(&self) {
        gauge!("sluice_sink_max_request_bytes", "sink" => self.sink.to_string()).set(self.to as f64);
        tracing::warn!(target: EVENTS, sink = self.sink, from = self.from, to = self.to,
            "the backend refused a request as too large (413): requests now stay under {} bytes (batch.max_bytes \
             was {})",
            self.to,
            self.from
        );
    }
}
