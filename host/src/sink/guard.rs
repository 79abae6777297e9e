//! `retry` and `breaker`: the two tables every sink has, defined once and
//! flattened into each sink's config, so that a key means the same under
//! every `type` and is checked in one place.

use serde::Deserialize;

use super::breaker::BreakerConfig;
use super::retry::RetryConfig;
use crate::problem::Problems;

/// How a sink is driven when its backend fails: bounded retries of what
/// the backend answered "retry" about, and the breaker that stops sending
/// (and so pauses the sources) while it is sick. Flattened: the keys sit
/// directly under `[sink]` (`[sink.retry]`, `[sink.breaker]`). It denies
/// no keys itself; the sink that flattens it does, after it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
pub struct GuardConfig {
    #[serde(default)]
    pub retry: RetryConfig,
    #[serde(default)]
    pub breaker: BreakerConfig,
}

impl GuardConfig {
    /// Every problem, keyed under `[sink]`.
    pub(crate) fn validate(&self, p: &mut Problems) {
        if self.retry.max_attempts == 0 {
            p.add("retry.max_attempts", "must be at least 1".into());
        }
        if self.breaker.failures == 0 {
            p.add("breaker.failures", "must be at least 1".into());
        }
        if self.breaker.initial_probe.is_zero() || self.breaker.max_probe < self.breaker.initial_probe {
            p.add("breaker", "need 0 < initial_probe <= max_probe".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::problem::Problems;
    use crate::sink::config::SinkConfig;

    /// Each sink type with its required keys, as a `[sink]` table's body.
    const SINKS: [&str; 5] = [
        "type = \"file\"\npath = \"out.ndjson\"",
        "type = \"http\"\nurl = \"http://127.0.0.1:1/\"",
        "type = \"clickhouse\"\nurl = \"http://127.0.0.1:1/\"\ntable = \"t\"",
        "type = \"kafka\"\nbrokers = \"127.0.0.1:1\"\ntopic = \"t\"",
        "type = \"postgres\"\nurl = \"postgresql://u@127.0.0.1/db\"\ntable = \"t\"",
    ];

    fn parse(text: &str) -> Result<SinkConfig, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn every_sink_reads_the_same_guard_and_refuses_a_misspelt_key() {
        for sink in SINKS {
            let cfg = parse(&format!("{sink}\n[retry]\nmax_attempts = 7\n[breaker]\nfailures = 3\n"))
                .unwrap_or_else(|e| panic!("{sink}: {e}"));
            let guard = cfg.guard();
            assert_eq!((guard.retry.max_attempts, guard.breaker.failures), (7, 3), "{sink}");
            let e = parse(&format!("{sink}\n[breakr]\nfailures = 3\n")).err().unwrap_or_default();
            assert!(e.contains("unknown field `breakr`"), "{sink}: {e}");
            let e = parse(&format!("{sink}\n[breaker]\nfailurs = 3\n")).err().unwrap_or_default();
            assert!(e.contains("unknown field `failurs`"), "{sink}: {e}");
            let cfg = parse(&format!("{sink}\n[breaker]\nfailures = 0\n")).unwrap_or_else(|e| panic!("{sink}: {e}"));
            let problems = Problems::of(|p| cfg.validate(p));
            assert!(problems.iter().any(|p| p.key == "breaker.failures"), "{sink}: {problems:?}");
        }
    }

    #[test]
    fn the_http_sinks_read_their_batch_and_request_and_refuse_a_misspelt_key() {
        for sink in &SINKS[1..3] {
            let cfg = parse(&format!("{sink}\n[batch]\nmax_records = 5\n[request]\nconcurrency = 2\n"))
                .unwrap_or_else(|e| panic!("{sink}: {e}"));
            let sending = match cfg {
                SinkConfig::Http(h) => h.sending,
                SinkConfig::Clickhouse(c) => c.http().sending,
                other => panic!("{other:?}"),
            };
            assert_eq!((sending.batch.max_records, sending.request.concurrency), (5, 2), "{sink}");
            let e = parse(&format!("{sink}\n[requests]\nconcurrency = 2\n")).err().unwrap_or_default();
            assert!(e.contains("unknown field `requests`"), "{sink}: {e}");
        }
    }
}
