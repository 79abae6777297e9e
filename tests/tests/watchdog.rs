//! The partition watchdog, on the `sluice` binary against a scripted HTTP
//! backend: a request that never answers leaves a partition with records
//! waiting and nothing finishing, which must be reported (metric, warning
//! naming the stage, `/health` detail); a breaker episode must not be,
//! since that partition is late, not stalled. And after the stall, a run
//! against a backend that answers loses nothing: every id is stored.

use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sluice_e2e::backend::{Backend, How, Reaction, Req};
use sluice_e2e::kafka::free_port;
use sluice_e2e::{get, json_chain_toml, now_rfc3339, scrape, sluice_bin};

struct Scenario {
    dir: tempfile::TempDir,
    ids: Vec<String>,
}

impl Scenario {
    fn new(n: usize) -> Scenario {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ts = now_rfc3339(0);
        let ids: Vec<String> = (0..n).map(|i| format!("ev-{i:07}")).collect();
        let text: String =
            ids.iter().map(|id| format!("{{\"event_id\":\"{id}\",\"ts\":\"{ts}\",\"msg\":\"line\"}}\n")).collect();
        std::fs::write(dir.path().join("input.log"), text).unwrap_or_else(|e| panic!("{e}"));
        Scenario { dir, ids }
    }

    /// A config for `backend`, watched with `stall`, metrics on `port`.
    fn config(&self, backend: &Backend, follow: bool, stall: &str, port: u16, sink_extra: &str) -> std::path::PathBuf {
        let cfg = format!(
            "[pipeline]\nname = \"watchdog-e2e\"\nstate_dir = \"state\"\nbatch_size = 100\n\n\
             [source]\ntype = \"file\"\npaths = [\"input.log\"]\nfollow = {follow}\n\n{chain}\n\
             [sink]\ntype = \"http\"\nurl = \"{url}/ingest\"\nresponse = \"status\"\n{sink_extra}\n\
             [sink.batch]\nmax_records = 100\n\
             [sink.retry]\nmax_attempts = 3\ninitial_backoff = \"10ms\"\nmax_backoff = \"50ms\"\n\
             [sink.breaker]\ninitial_probe = \"200ms\"\nmax_probe = \"800ms\"\n\n\
             [watchdog]\nstall = \"{stall}\"\n\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n",
            chain = json_chain_toml(true, None),
            url = backend.url,
        );
        let path = self.dir.path().join("sluice.toml");
        std::fs::write(&path, cfg).unwrap_or_else(|e| panic!("{e}"));
        path
    }

    fn spawn(&self, config: &std::path::Path) -> Child {
        Command::new(sluice_bin!())
            .args(["run", "-c", &config.display().to_string()])
            .current_dir(self.dir.path())
            .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
            .env("SLUICE_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"))
    }
}

fn stderr_of(child: Child) -> String {
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The value of the first sample of `metric` in a scrape.
fn sample(metrics: &str, metric: &str) -> Option<f64> {
    metrics.lines().find(|l| l.starts_with(metric))?.rsplit(' ').next()?.parse().ok()
}

#[test]
fn a_request_that_never_answers_is_reported_as_a_stall_in_the_sink_and_nothing_is_lost() {
    let s = Scenario::new(1_000);
    // The first two batches are answered; from the third on, the backend
    // keeps the events and never answers (the sink's timeout is an hour).
    let hanging = Backend::start(|r: &Req| {
        let mut reaction = Reaction::ok(r);
        if r.n >= 2 {
            reaction.how = How::Hang;
        }
        reaction
    });
    let port = free_port();
    let config = s.config(&hanging, true, "2s", port, "[sink.request]\ntimeout = \"1h\"\n");
    let mut child = s.spawn(&config);
    let started = Instant::now();
    let (health, metrics) = loop {
        let health = get(port, "/health");
        if health.contains("stalled") {
            break (health, scrape(port));
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("sluice ended ({status}) before the stall was reported:\n{}", stderr_of(child));
        }
        assert!(started.elapsed() < Duration::from_secs(60), "no stall reported in 60 s; /health says:\n{health}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let stalled_for = started.elapsed();
    // Still alive (200): a stall is detail, not a failed liveness probe.
    assert!(health.starts_with("HTTP/1.0 200") || health.starts_with("HTTP/1.1 200"), "{health}");
    let line = health.lines().find(|l| l.contains("stalled")).unwrap_or_default();
    assert!(line.contains("input.log") && line.contains("in stage sink"), "the partition and its stage: {line}");
    assert_eq!(sample(&metrics, "sluice_partition_stalled{"), Some(1.0), "{metrics}");
    assert!(sample(&metrics, "sluice_partition_stalled_seconds{").is_some_and(|s| s >= 2.0), "{metrics}");
    assert_eq!(sample(&metrics, "sluice_partition_late{"), Some(0.0), "the breaker never opened: not late");
    // The request that hangs holds the partition; a kill is what ends it.
    let _ = child.kill();
    let stderr = stderr_of(child);
    let warned: Vec<&str> = stderr.lines().filter(|l| l.contains("partition stalled")).collect();
    assert_eq!(warned.len(), 1, "one warning per episode:\n{stderr}");
    assert!(warned[0].contains("WARN") && warned[0].contains("stage=\"sink\""), "{}", warned[0]);
    assert!(!stderr.contains("circuit breaker opened"), "{stderr}");
    println!("request hanging: stall reported {:.1} s after the start (watchdog.stall 2 s)", stalled_for.as_secs_f64());
    println!("/health:\n{}\nlog: {}", health.split("\r\n\r\n").nth(1).unwrap_or_default(), warned[0]);

    // A backend that answers: what the hung requests held is delivered (or
    // was already), nothing is lost.
    let answering = Backend::start(Reaction::ok);
    let config = s.config(&answering, false, "2s", free_port(), "");
    let child = s.spawn(&config);
    let stderr = stderr_of(child);
    assert!(!stderr.contains("partition stalled"), "{stderr}");
    let mut stored: BTreeSet<String> = hanging.seen().stored.iter().cloned().collect();
    stored.extend(answering.seen().stored.iter().cloned());
    let missing: Vec<_> = s.ids.iter().filter(|id| !stored.contains(*id)).take(5).collect();
    assert!(missing.is_empty(), "ids lost: {missing:?}\n{stderr}");
    assert_eq!(stored.len(), s.ids.len(), "nothing but the ids written");
}

#[test]
fn a_breaker_episode_is_late_not_stalled() {
    let s = Scenario::new(300);
    // Nine 503s: five open the breaker, four probes fail after 200, 400,
    // 800 and 800 ms. The partition waits on it 2.2 s, past the 1 s stall,
    // and must not be called stalled.
    let backend =
        Backend::start(|r: &Req| if r.n < 9 { Reaction::fail(503, "overloaded", r) } else { Reaction::ok(r) });
    let port = free_port();
    let config = s.config(&backend, false, "1s", port, "");
    let mut child = s.spawn(&config);
    let mut late_seen = false;
    let started = Instant::now();
    while child.try_wait().ok().flatten().is_none() {
        let health = get(port, "/health");
        assert!(!health.contains("stalled"), "a breaker episode is not a stall:\n{health}");
        let metrics = scrape(port);
        assert_ne!(sample(&metrics, "sluice_partition_stalled{"), Some(1.0), "{metrics}");
        if health.contains("late: waiting on the sink's open breaker") {
            late_seen = true;
            assert_eq!(sample(&metrics, "sluice_partition_late{"), Some(1.0), "{metrics}");
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the run did not end");
        std::thread::sleep(Duration::from_millis(100));
    }
    let stderr = stderr_of(child);
    assert!(late_seen, "/health said the partition was late at some point:\n{stderr}");
    assert!(stderr.contains("circuit breaker opened"), "{stderr}");
    assert!(stderr.contains("partition late"), "{stderr}");
    assert!(!stderr.contains("partition stalled"), "{stderr}");
    let stored: BTreeSet<String> = backend.seen().stored.iter().cloned().collect();
    assert_eq!(stored, s.ids.iter().cloned().collect::<BTreeSet<_>>(), "every id stored after the storm");
}
