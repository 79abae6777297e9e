//! The http sink against a scripted backend (`sluice_e2e::backend`), for
//! what a real server cannot be made to show on demand. Each scenario runs
//! the `sluice` binary over a file of known ids and reconciles: every id
//! the backend stored against the ids written (nothing lost), the
//! quarantine against the ids the backend refused, and every duplicate
//! against the request that explains it (an answer that was lost, or a
//! batch that was split). Breaker transitions are read from the log and
//! the request times.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use sluice_e2e::backend::{Backend, How, Logged, Reaction, Req, Seen};
use sluice_e2e::{json_chain_toml, now_rfc3339, quarantine_entries, sluice_bin};

struct Scenario {
    dir: tempfile::TempDir,
    /// Every id written, in order.
    ids: Vec<String>,
}

fn n_of(id: &str) -> usize {
    id.trim_start_matches("ev-").parse().unwrap_or(usize::MAX)
}

impl Scenario {
    /// `n` lines with ids `ev-0000000…`; `poison(i)` lines carry a field
    /// the "status" backend refuses.
    fn new(n: usize, poison: impl Fn(usize) -> bool) -> Scenario {
        let ts = now_rfc3339(0);
        Scenario::with_times(n, poison, |_| ts.clone())
    }

    /// [`Scenario::new`] with line `i`'s time `ts(i)`.
    fn with_times(n: usize, poison: impl Fn(usize) -> bool, ts: impl Fn(usize) -> String) -> Scenario {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut text = String::new();
        let mut ids = Vec::new();
        for i in 0..n {
            let id = format!("ev-{i:07}");
            let extra = if poison(i) { ",\"poison\":true" } else { "" };
            let ts = ts(i);
            text.push_str(&format!(
                "{{\"event_id\":\"{id}\",\"ts\":\"{ts}\",\"n\":{i},\"msg\":\"line {i}\"{extra}}}\n"
            ));
            ids.push(id);
        }
        std::fs::write(dir.path().join("input.log"), text).unwrap_or_else(|e| panic!("{e}"));
        Scenario { dir, ids }
    }

    fn config(&self, sink: &str) -> PathBuf {
        let cfg = format!(
            "[pipeline]\nname = \"http-e2e\"\nstate_dir = \"state\"\nbatch_size = 100\n\n[source]\ntype = \"file\"\npaths = [\"input*.log\"]\n\n{}\n{sink}\n",
            json_chain_toml(true, None)
        );
        let path = self.dir.path().join("sluice.toml");
        std::fs::write(&path, cfg).unwrap_or_else(|e| panic!("{e}"));
        path
    }

    fn run(&self, sink: &str, env: &[(&str, &str)]) -> String {
        let config = self.config(sink);
        let out = Command::new(sluice_bin!())
            .args(["run", "-c", &config.display().to_string(), "--summary", "json"])
            .current_dir(self.dir.path())
            .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
            .env("SLUICE_LOG", "info")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "sluice run failed:\n{stderr}");
        stderr
    }

    /// Quarantined event ids with their reasons.
    fn quarantined(&self) -> BTreeMap<String, String> {
        quarantine_entries(&self.dir.path().join("state"))
            .into_iter()
            .map(|(payload, reason)| {
                let v: serde_json::Value = serde_json::from_str(&payload).unwrap_or_default();
                (v["event_id"].as_str().unwrap_or_default().to_string(), reason)
            })
            .collect()
    }
}

/// Nothing lost, nothing unexpected, and every duplicate explained: an id
/// stored k times must have been stored by at least k − 1 requests whose
/// answer did not reach sluice as a success (`lost(request)`).
fn reconcile(
    s: &Scenario,
    seen: &Seen,
    refused: &BTreeSet<String>,
    lost: impl Fn(&Logged) -> bool,
) -> (usize, BTreeMap<String, String>) {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for id in &seen.stored {
        *counts.entry(id).or_insert(0) += 1;
    }
    let expected: BTreeSet<&str> = s.ids.iter().map(String::as_str).filter(|id| !refused.contains(*id)).collect();
    let stored: BTreeSet<&str> = counts.keys().copied().collect();
    let lost_ids: Vec<_> = expected.difference(&stored).take(5).collect();
    assert!(lost_ids.is_empty(), "ids lost: {lost_ids:?}");
    let stray: Vec<_> = stored.difference(&expected).take(5).collect();
    assert!(stray.is_empty(), "ids stored that should not be: {stray:?}");
    let quarantined = s.quarantined();
    let q: BTreeSet<String> = quarantined.keys().cloned().collect();
    assert_eq!(&q, refused, "the quarantine holds exactly what the backend refused");
    let mut duplicates = 0;
    for (id, k) in &counts {
        if *k > 1 {
            duplicates += k - 1;
            let causes = seen.requests.iter().filter(|r| lost(r) && r.stored.iter().any(|x| x == id)).count();
            assert!(causes >= k - 1, "{id} stored {k} times but only {causes} lost answers explain it");
        }
    }
    (duplicates, quarantined)
}

const FAST_RETRY: &str = "[sink.retry]\nmax_attempts = 3\ninitial_backoff = \"10ms\"\nmax_backoff = \"50ms\"\n\
                          [sink.breaker]\ninitial_probe = \"200ms\"\nmax_probe = \"800ms\"\n";

fn sink(backend: &Backend, response: &str, extra: &str) -> String {
    format!(
        "[sink]\ntype = \"http\"\nurl = \"{}/ingest\"\nresponse = \"{response}\"\n{extra}\n{FAST_RETRY}",
        backend.url
    )
}

fn log_lines<'a>(stderr: &'a str, what: &str) -> Vec<&'a str> {
    stderr.lines().filter(|l| l.contains(what)).collect()
}

#[test]
fn openobserve_200_with_failed_counts_is_split_until_the_failures_are_isolated() {
    let s = Scenario::new(400, |_| false);
    let too_old = |e: &serde_json::Value| e["n"].as_u64().is_some_and(|n| n % 37 == 0);
    let backend = Backend::start(move |r: &Req| {
        let store: Vec<bool> = r.events.iter().map(|e| !too_old(e)).collect();
        let failed = store.iter().filter(|k| !**k).count();
        let ok = store.len() - failed;
        let error = if failed > 0 { ",\"error\":\"Too old data, only last 5 hours data can be ingested\"" } else { "" };
        Reaction {
            status: 200,
            body: format!(
                "{{\"code\":200,\"status\":[{{\"name\":\"logs\",\"successful\":{ok},\"failed\":{failed}{error}}}]}}"
            ),
            store,
            how: How::Answer,
            headers: Vec::new(),
        }
    });
    let stderr =
        s.run(&sink(&backend, "openobserve", "encoding = \"json_array\"\n[sink.batch]\nmax_records = 50\n"), &[]);
    let refused: BTreeSet<String> = s.ids.iter().filter(|id| n_of(id).is_multiple_of(37)).cloned().collect();
    let seen = backend.seen();
    // A half that held a failure was answered 200 with failed > 0: its good
    // events were stored, and are sent again in the next split.
    let (dups, quarantined) = reconcile(&s, &seen, &refused, |r| r.stored.len() < r.ids.len());
    for reason in quarantined.values() {
        assert!(reason.contains("Too old data") && reason.contains("failed=1 of 1"), "{reason}");
    }
    println!(
        "openobserve: {} requests, {} ids refused and quarantined, {dups} duplicates from splits, all explained",
        seen.requests.len(),
        refused.len()
    );
    assert!(log_lines(&stderr, "circuit breaker opened").is_empty(), "a partial failure is not a sick backend");
}

#[test]
fn elasticsearch_bulk_partial_failures_reject_only_the_bad_items() {
    let s = Scenario::new(400, |_| false);
    let index = std::sync::Mutex::new(BTreeSet::<String>::new());
    let throttled = std::sync::Mutex::new(BTreeSet::<String>::new());
    let backend = Backend::start(move |r: &Req| {
        let mut index = index.lock().unwrap_or_else(|p| p.into_inner());
        let mut throttled = throttled.lock().unwrap_or_else(|p| p.into_inner());
        let mut store = Vec::new();
        let mut items = Vec::new();
        for (id, e) in r.ids.iter().zip(&r.events) {
            let n = e["n"].as_u64().unwrap_or(0);
            let (status, error) = if n % 41 == 0 {
                (400, r#","error":{"type":"mapper_parsing_exception","reason":"failed to parse field [n]"}"#)
            } else if index.contains(id) {
                (409, r#","error":{"type":"version_conflict_engine_exception","reason":"document already exists"}"#)
            } else if n % 13 == 0 && throttled.insert(id.clone()) {
                (429, r#","error":{"type":"es_rejected_execution_exception","reason":"queue full"}"#)
            } else {
                (201, "")
            };
            let keep = status == 201;
            if keep {
                index.insert(id.clone());
            }
            store.push(keep);
            items.push(format!("{{\"create\":{{\"_index\":\"logs\",\"_id\":\"{id}\",\"status\":{status}{error}}}}}"));
        }
        Reaction {
            status: 200,
            body: format!("{{\"took\":1,\"errors\":true,\"items\":[{}]}}", items.join(",")),
            store,
            how: How::Answer,
            headers: Vec::new(),
        }
    });
    s.run(&sink(&backend, "elasticsearch_bulk", "index = \"logs\"\n[sink.batch]\nmax_records = 50\n"), &[]);
    let refused: BTreeSet<String> = s.ids.iter().filter(|id| n_of(id).is_multiple_of(41)).cloned().collect();
    let seen = backend.seen();
    let (dups, quarantined) = reconcile(&s, &seen, &refused, |_| false);
    assert_eq!(dups, 0, "create with _id: the backend itself never stores twice");
    for reason in quarantined.values() {
        assert!(reason.contains("mapper_parsing_exception"), "{reason}");
    }
    let throttled_ids = s.ids.iter().filter(|id| n_of(id).is_multiple_of(13) && !n_of(id).is_multiple_of(41)).count();
    let sent: usize = seen.requests.iter().map(|r| r.ids.len()).sum();
    assert_eq!(sent, 400 + throttled_ids, "each 429 item sent once more, nothing else");
    println!(
        "bulk: {} requests, {} items refused, {throttled_ids} throttled and retried, 0 duplicates",
        seen.requests.len(),
        refused.len()
    );
}

#[test]
fn a_4xx_splits_the_batch_and_rejects_only_the_bad_records() {
    let s = Scenario::new(300, |i| i % 53 == 7);
    let backend = Backend::start(|r: &Req| {
        if r.events.iter().any(|e| e["poison"] == true) {
            Reaction::fail(400, "{\"error\":\"field poison is not allowed\"}", r)
        } else {
            Reaction::ok(r)
        }
    });
    s.run(&sink(&backend, "status", "[sink.batch]\nmax_records = 50\n"), &[]);
    let refused: BTreeSet<String> = s.ids.iter().filter(|id| n_of(id) % 53 == 7).cloned().collect();
    let seen = backend.seen();
    let (dups, quarantined) = reconcile(&s, &seen, &refused, |_| false);
    assert_eq!(dups, 0);
    for reason in quarantined.values() {
        assert!(reason.contains("HTTP 400") && reason.contains("poison is not allowed"), "{reason}");
    }
    println!("4xx split: {} requests to isolate {} bad records among 300", seen.requests.len(), refused.len());
}

#[test]
fn unauthorized_waits_through_the_breaker_and_quarantines_nothing() {
    let s = Scenario::new(200, |_| false);
    let backend = Backend::start(|r: &Req| {
        let auth = r.headers.get("authorization").map(|v| v.as_bytes().to_vec()).unwrap_or_default();
        if r.n < 7 || auth != b"Bearer t0ken-xyz" {
            Reaction::fail(401, "{\"error\":\"token expired\"}", r)
        } else {
            Reaction::ok(r)
        }
    });
    let extra = "[sink.headers_from_env]\nAuthorization = \"SLUICE_TEST_TOKEN\"\n[sink.batch]\nmax_records = 100\n";
    let stderr = s.run(&sink(&backend, "status", extra), &[("SLUICE_TEST_TOKEN", "Bearer t0ken-xyz")]);
    let seen = backend.seen();
    // 7 refusals, far more than retry.max_attempts = 3: still nothing quarantined.
    let (dups, _) = reconcile(&s, &seen, &BTreeSet::new(), |_| false);
    assert_eq!(dups, 0);
    assert!(!stderr.contains("t0ken-xyz"), "the credential never reaches the log");
    assert!(stderr.contains("credentials refused"), "{stderr}");
    let opened = log_lines(&stderr, "circuit breaker opened");
    assert_eq!(opened.len(), 1, "{stderr}");
    assert!(opened[0].contains("after_failures=5"), "{}", opened[0]);
    assert_eq!(log_lines(&stderr, "probe failed").len(), 2, "requests 6 and 7 were probes: {stderr}");
    assert_eq!(log_lines(&stderr, "circuit breaker closed").len(), 1, "{stderr}");
}

#[test]
fn a_503_storm_opens_the_breaker_at_five_probes_back_off_to_the_cap_and_one_success_closes_it() {
    let s = Scenario::new(100, |_| false);
    let storm = Duration::from_millis(3000);
    let backend = Backend::start(
        move |r: &Req| {
            if r.at < storm { Reaction::fail(503, "overloaded", r) } else { Reaction::ok(r) }
        },
    );
    let stderr = s.run(&sink(&backend, "status", "[sink.batch]\nmax_records = 100\n"), &[]);
    let seen = backend.seen();
    let (dups, _) = reconcile(&s, &seen, &BTreeSet::new(), |_| false);
    assert_eq!(dups, 0);
    let at: Vec<u128> = seen.requests.iter().map(|r| r.at.as_millis()).collect();
    let gaps: Vec<u128> = at.windows(2).map(|w| w[1] - w[0]).collect();
    println!("503 storm: request times (ms) {at:?}, gaps {gaps:?}");
    // Closed: five failures with retry backoff only (≤ 50 ms each).
    assert!(gaps[..4].iter().all(|g| *g < 150), "the first five requests come quickly: {gaps:?}");
    // Open: probes after 200, 400, 800, 800 … ms (the cap), never sooner.
    let pauses = [200u128, 400, 800, 800, 800, 800];
    for (i, gap) in gaps[4..].iter().enumerate() {
        let p = pauses[i.min(pauses.len() - 1)];
        assert!(
            *gap >= p && *gap < p + 300,
            "probe {} came {gap} ms after the last failure, expected {p}: {gaps:?}",
            i + 1
        );
    }
    let failed = seen.requests.iter().filter(|r| r.status == 503).count();
    let last = seen.requests.last().map(|r| r.status);
    assert_eq!(last, Some(200), "the run ends with the probe that closed the breaker");
    assert_eq!(log_lines(&stderr, "circuit breaker opened").len(), 1);
    assert_eq!(log_lines(&stderr, "probe failed").len(), failed - 5, "{stderr}");
    assert_eq!(log_lines(&stderr, "circuit breaker closed").len(), 1);
}

#[test]
fn an_answer_lost_after_the_backend_stored_is_retried_and_the_duplicate_is_explained() {
    let s = Scenario::new(300, |_| false);
    let backend = Backend::start(|r: &Req| {
        let mut re = Reaction::ok(r);
        if r.n == 2 || r.n == 5 {
            re.how = How::Drop;
        }
        re
    });
    let cfg = sink(&backend, "status", "[sink.batch]\nmax_records = 50\n");
    let stderr = s.run(&cfg, &[]);
    // Two failed requests, never five in a row: the breaker stays closed.
    assert!(log_lines(&stderr, "circuit breaker opened").is_empty(), "{stderr}");
    let incomplete = log_lines(&stderr, "sink delivery incomplete");
    assert_eq!(incomplete.len(), 2, "one retried call per dropped answer: {stderr}");
    assert!(incomplete.iter().all(|l| l.contains("may have taken it")), "{incomplete:?}");
    {
        let seen = backend.seen();
        let (dups, _) = reconcile(&s, &seen, &BTreeSet::new(), |r| r.how == How::Drop);
        let dropped: usize = seen.requests.iter().filter(|r| r.how == How::Drop).map(|r| r.ids.len()).sum();
        assert_eq!(dups, dropped, "exactly the events of the two dropped answers arrive twice");
        println!("dropped connections: {dropped} events stored twice, each explained by a dropped answer");
    }
    // A replay of the same records (a copy of the file is a new partition):
    // the dedup window keeps every one of them from the backend.
    let before = backend.seen().stored.len();
    std::fs::copy(s.dir.path().join("input.log"), s.dir.path().join("input-replay.log"))
        .unwrap_or_else(|e| panic!("{e}"));
    let stderr = s.run(&cfg, &[]);
    assert_eq!(backend.seen().stored.len(), before, "the replay delivered nothing again");
    assert!(stderr.contains("\"duplicate\":300"), "{stderr}");
}

/// An answer cut part-way by the network (a fault proxy between sluice and
/// the backend passes 20 bytes of the first answer, then resets): sluice
/// cannot tell whether the backend took the batch, retries it, and the
/// only duplicates are that request's events.
#[test]
fn an_answer_cut_mid_way_by_the_network_is_retried_and_the_duplicate_is_explained() {
    let s = Scenario::new(300, |_| false);
    let backend = Backend::start(Reaction::ok);
    let proxy = sluice_e2e::proxy::FaultProxy::start(backend.addr);
    proxy.cut_next_response_after(20);
    let cfg = format!(
        "[sink]\ntype = \"http\"\nurl = \"http://{}/ingest\"\nresponse = \"status\"\n[sink.batch]\nmax_records = 50\n{FAST_RETRY}",
        proxy.addr()
    );
    let stderr = s.run(&cfg, &[]);
    assert_eq!(log_lines(&stderr, "sink delivery incomplete").len(), 1, "one retried call: {stderr}");
    let seen = backend.seen();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for id in &seen.stored {
        *counts.entry(id).or_insert(0) += 1;
    }
    let twice: BTreeSet<&str> = counts.iter().filter(|(_, k)| **k > 1).map(|(id, _)| *id).collect();
    // The cut answer's request: the one whose events are the duplicates.
    let cut = seen
        .requests
        .iter()
        .find(|r| r.ids.iter().map(String::as_str).collect::<BTreeSet<_>>() == twice)
        .unwrap_or_else(|| panic!("no one request explains the duplicates {twice:?}"))
        .n;
    let (dups, _) = reconcile(&s, &seen, &BTreeSet::new(), |r| r.n == cut);
    assert_eq!(dups, 50, "the 50 events of the request whose answer was cut were stored twice");
    println!("an answer cut after 20 bytes: request {cut}'s 50 events stored twice, nothing lost");
}

#[test]
fn a_response_that_never_comes_times_out_and_is_retried() {
    let s = Scenario::new(200, |_| false);
    let backend = Backend::start(|r: &Req| {
        let mut re = Reaction::ok(r);
        if r.n == 1 {
            re.how = How::Hang;
        }
        re
    });
    let stderr =
        s.run(&sink(&backend, "status", "[sink.batch]\nmax_records = 50\n[sink.request]\ntimeout = \"1s\"\n"), &[]);
    assert!(stderr.contains("timed out"), "the lost answer is named in the log: {stderr}");
    assert!(log_lines(&stderr, "circuit breaker opened").is_empty(), "{stderr}");
    let seen = backend.seen();
    let (dups, _) = reconcile(&s, &seen, &BTreeSet::new(), |r| r.how == How::Hang);
    assert_eq!(dups, 50, "the 50 events of the unanswered request were stored twice");
}

#[test]
fn slow_responses_are_waited_for_within_the_concurrency_limit() {
    let s = Scenario::new(400, |_| false);
    let backend = Backend::start(|r: &Req| {
        let mut re = Reaction::ok(r);
        re.how = How::Delay(Duration::from_millis(300));
        re
    });
    let extra =
        "[sink.batch]\nmax_records = 25\n[sink.request]\ntimeout = \"5s\"\nconcurrency = 2\ncompression = \"gzip\"\n";
    let stderr = s.run(&sink(&backend, "status", extra), &[]);
    let seen = backend.seen();
    let (dups, _) = reconcile(&s, &seen, &BTreeSet::new(), |_| false);
    assert_eq!(dups, 0);
    assert_eq!(seen.requests.len(), 16, "25 events per request");
    // Never more than two requests within one 300 ms answer.
    for r in &seen.requests {
        let overlapping =
            seen.requests.iter().filter(|o| o.at >= r.at && o.at < r.at + Duration::from_millis(250)).count();
        assert!(overlapping <= 2, "request.concurrency = 2, yet {overlapping} requests overlapped");
    }
    assert!(log_lines(&stderr, "circuit breaker opened").is_empty(), "slow is not failed");
}

/// Issue 25, item 3: the backend goes behind a black hole for 30 s while
/// sluice delivers (a fault proxy throws every byte away both ways, and
/// new connections reach nothing). Requests time out, the breaker opens and
/// probes; nothing reaches the backend; when the route is back a probe
/// closes the breaker and the rest arrives. Nothing lost; the only
/// duplicates are events of requests that reached the backend just before
/// the hole opened and whose answers it swallowed (the lost-response rule).
#[test]
fn a_backend_behind_a_30_s_black_hole_is_waited_for_and_nothing_is_lost() {
    use sluice_e2e::proxy::{FaultProxy, Link};
    let s = Scenario::new(3_000, |_| false);
    let backend = Backend::start(|r: &Req| {
        let mut re = Reaction::ok(r);
        re.how = How::Delay(Duration::from_millis(20));
        re
    });
    let t0 = std::time::Instant::now();
    let proxy = FaultProxy::start(backend.addr);
    let cfg = format!(
        "[sink]\ntype = \"http\"\nurl = \"http://{}/ingest\"\nresponse = \"status\"\n[sink.batch]\nmax_records = 50\n\
         [sink.request]\ntimeout = \"2s\"\n{FAST_RETRY}",
        proxy.addr()
    );
    let hole = Duration::from_secs(30);
    let (stderr, (opened, closed)) = std::thread::scope(|scope| {
        let cutter = scope.spawn(|| {
            while backend.seen().stored.len() < 500 {
                std::thread::sleep(Duration::from_millis(5));
            }
            proxy.set(Link::Blackhole);
            let opened = t0.elapsed();
            std::thread::sleep(hole);
            proxy.set(Link::Pass);
            (opened, t0.elapsed())
        });
        let stderr = s.run(&cfg, &[]);
        (stderr, cutter.join().unwrap_or_else(|_| panic!("the cutter failed")))
    });
    let seen = backend.seen();
    let during: Vec<usize> = seen
        .requests
        .iter()
        .filter(|r| r.at > opened + Duration::from_millis(200) && r.at < closed)
        .map(|r| r.n)
        .collect();
    assert!(during.is_empty(), "requests reached the backend through the black hole: {during:?}");
    assert!(proxy.swallowed() > 0, "the black hole took the bytes in flight");
    assert!(!log_lines(&stderr, "circuit breaker opened").is_empty(), "{stderr}");
    assert!(!log_lines(&stderr, "circuit breaker closed").is_empty(), "{stderr}");
    // Answers the hole may have swallowed: requests the backend took in the
    // request timeout before it opened.
    let (dups, _) = reconcile(&s, &seen, &BTreeSet::new(), |r| {
        r.at + Duration::from_secs(2) + Duration::from_millis(500) >= opened
            && r.at <= opened + Duration::from_millis(200)
    });
    let back = seen.requests.iter().find(|r| r.at >= closed).map(|r| r.at - closed);
    println!(
        "a 30 s black hole before the backend: {} events, {} requests, {dups} duplicates (each explained by an answer \
         swallowed as the hole opened), 0 lost; {} bytes swallowed; the first request through {:.1} s after the route \
         was back",
        s.ids.len(),
        seen.requests.len(),
        proxy.swallowed(),
        back.map_or(f64::NAN, |d| d.as_secs_f64())
    );
    let back = back.unwrap_or_else(|| panic!("nothing reached the backend after the hole: {stderr}"));
    assert!(
        back < Duration::from_secs(10),
        "recovered {back:?} after the route was back (probes every <= 0.8 s + 2 s)"
    );
}

/// Issue 44: two sinks, one of whose backends answers 503 for 30 s from its
/// sixth request on. Even-numbered events are routed to `a` alone, the rest
/// go to both. The held sink's breaker opens (and only its own); nothing
/// is quarantined; `a` keeps every event it accepted exactly once (its
/// doors are not taken back while `b` waits); `b`'s events wait and then
/// arrive, none lost; and `b` never gets an event it was not routed to.
#[test]
fn one_of_two_sinks_down_for_30_s_holds_its_records_and_loses_nothing() {
    let s = Scenario::new(3_000, |_| false);
    let outage = Duration::from_secs(30);
    let down_from: std::sync::Arc<std::sync::Mutex<Option<Duration>>> = std::sync::Arc::default();
    let a = Backend::start(Reaction::ok);
    let since = down_from.clone();
    let b = Backend::start(move |r: &Req| {
        let mut from = since.lock().unwrap_or_else(|p| p.into_inner());
        if r.n == 5 {
            *from = Some(r.at);
        }
        match *from {
            Some(at) if r.at < at + outage => Reaction::fail(503, "service unavailable", r),
            _ => Reaction::ok(r),
        }
    });
    let named = |name: &str, backend: &Backend| {
        format!(
            "[[sinks]]\nname = \"{name}\"\ntype = \"http\"\nurl = \"{}/ingest\"\nresponse = \"status\"\n\
             [sinks.batch]\nmax_records = 50\n{}",
            backend.url,
            FAST_RETRY.replace("[sink.", "[sinks.")
        )
    };
    let cfg = format!(
        "{}{}[[routes]]\nfield = \"/n\"\nmatches = \"[02468]$\"\nsinks = [\"a\"]\n",
        named("a", &a),
        named("b", &b)
    );
    let stderr = s.run(&cfg, &[]);
    let from = down_from.lock().map(|f| *f).unwrap_or_default().unwrap_or_else(|| panic!("b never went down"));
    let (seen_a, seen_b) = (a.seen(), b.seen());
    let even = |id: &str| n_of(id).is_multiple_of(2);
    // a: every event, each once.
    let mut in_a: BTreeMap<&str, usize> = BTreeMap::new();
    for id in &seen_a.stored {
        *in_a.entry(id).or_default() += 1;
    }
    assert_eq!(in_a.len(), s.ids.len(), "a has every event");
    assert!(in_a.values().all(|k| *k == 1), "a got an event twice: its doors were taken back");
    // b: every odd event, none even, after the outage for those it held.
    let in_b: BTreeSet<&str> = seen_b.stored.iter().map(String::as_str).collect();
    let want_b: BTreeSet<&str> = s.ids.iter().map(String::as_str).filter(|id| !even(id)).collect();
    assert_eq!(in_b, want_b, "b has exactly the events routed to it");
    let stored_during =
        seen_b.requests.iter().filter(|r| r.at > from && r.at < from + outage && !r.stored.is_empty()).count();
    assert_eq!(stored_during, 0, "b stored nothing while it answered 503");
    assert!(seen_b.requests.iter().any(|r| r.at >= from + outage && !r.stored.is_empty()), "b's events arrived after");
    assert!(s.quarantined().is_empty(), "a sick backend makes sluice late, never fills the quarantine");
    let opened = log_lines(&stderr, "circuit breaker opened");
    assert!(!opened.is_empty(), "{stderr}");
    assert!(opened.iter().all(|l| l.contains(&b.url[7..]) && !l.contains(&a.url[7..])), "only b's breaker: {opened:?}");
    println!(
        "two sinks, b down {} s: a {} events once each, b {} events (its {} held ones arrived after), 0 quarantined",
        outage.as_secs(),
        in_a.len(),
        in_b.len(),
        seen_b.requests.iter().filter(|r| r.at >= from + outage).map(|r| r.stored.len()).sum::<usize>()
    );
}

/// Issue 44: with two sinks, a record one of them refuses is quarantined
/// naming that sink, and a replay sends it to that sink alone: the other,
/// which accepted it the first time, is never sent it again (its audit
/// shows no absorbed duplicate).
#[test]
fn a_record_one_sink_refused_is_replayed_to_that_sink_alone() {
    let s = Scenario::new(200, |i| i % 40 == 3);
    let fixed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let repaired = fixed.clone();
    let b = Backend::start(move |r: &Req| {
        if !repaired.load(std::sync::atomic::Ordering::SeqCst) && r.events.iter().any(|e| e["poison"] == true) {
            Reaction::fail(400, "{\"error\":\"field poison is not allowed\"}", r)
        } else {
            Reaction::ok(r)
        }
    });
    let cfg = format!(
        "[[sinks]]\nname = \"a\"\ntype = \"file\"\npath = \"a.ndjson\"\n\
         [[sinks]]\nname = \"b\"\ntype = \"http\"\nurl = \"{}/ingest\"\nresponse = \"status\"\n\
         [sinks.batch]\nmax_records = 20\n{}",
        b.url,
        FAST_RETRY.replace("[sink.", "[sinks.")
    );
    s.run(&cfg, &[]);
    let poison: BTreeSet<String> = s.ids.iter().filter(|id| n_of(id) % 40 == 3).cloned().collect();
    let quarantined = s.quarantined();
    assert_eq!(quarantined.keys().cloned().collect::<BTreeSet<_>>(), poison);
    assert!(
        quarantined.values().all(|r| r.starts_with("sink b: ") && r.contains("poison is not allowed")),
        "{quarantined:?}"
    );
    let lines_in_a = || std::fs::read_to_string(s.dir.path().join("a.ndjson")).unwrap_or_default().lines().count();
    assert_eq!(lines_in_a(), 200, "a took every record, the refused ones too");
    assert!(b.seen().stored.iter().all(|id| !poison.contains(id)));

    fixed.store(true, std::sync::atomic::Ordering::SeqCst);
    let cli = |args: &[&str]| {
        let out = Command::new(sluice_bin!())
            .args(args)
            .current_dir(s.dir.path())
            .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (_, summary) = cli(&["quarantine", "replay", "-c", "sluice.toml", "--summary", "json"]);
    assert!(summary.contains(&format!("\"delivered\":{}", poison.len())), "{summary}");
    assert_eq!(lines_in_a(), 200, "a was not sent them again");
    let in_b: BTreeSet<String> = b.seen().stored.iter().filter(|id| poison.contains(*id)).cloned().collect();
    assert_eq!(in_b, poison, "b has them now");
    let mut args = vec!["audit", "-c", "sluice.toml", "--json"];
    args.extend(poison.iter().map(String::as_str));
    let (out, _) = cli(&args);
    for line in out.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let sinks = v["sinks"].as_array().cloned().unwrap_or_default();
        let (a, b) = (&sinks[0], &sinks[1]);
        assert!(a["delivered"].is_object() && a["absorbed"].is_null(), "a had it once, and no replay reached it: {v}");
        assert_eq!(b["delivered"]["via"], "replay", "{v}");
    }
    println!("replay to the refusing sink alone: {} records, a untouched, b has them", poison.len());
}

/// Issue 40: a wrong URL path answers 404 to every request. Before, the
/// batch was split down to single records and all 20 were quarantined in
/// 0.2 s. A 404 is the backend's (or the config's) fault: the records wait
/// behind the breaker, whole, and arrive once the path answers.
#[test]
fn a_backend_answering_404_then_200_after_10_s_delivers_everything_and_quarantines_nothing() {
    let s = Scenario::new(20, |_| false);
    let outage = Duration::from_secs(10);
    let backend =
        Backend::start(
            move |r: &Req| {
                if r.at < outage { Reaction::fail(404, "404 page not found", r) } else { Reaction::ok(r) }
            },
        );
    let stderr = s.run(&sink(&backend, "status", ""), &[]);
    let seen = backend.seen();
    let (dups, _) = reconcile(&s, &seen, &BTreeSet::new(), |_| false);
    assert_eq!(dups, 0);
    let refused: Vec<&Logged> = seen.requests.iter().filter(|r| r.status == 404).collect();
    assert!(refused.len() >= 5, "the backend kept answering 404 for 10 s: {} requests", refused.len());
    assert!(
        refused.iter().all(|r| r.ids.len() == 20),
        "a 404 never splits the batch: {:?}",
        refused.iter().map(|r| r.ids.len()).collect::<Vec<_>>()
    );
    assert!(seen.requests.last().is_some_and(|r| r.at >= outage && r.status == 200));
    assert_eq!(log_lines(&stderr, "circuit breaker opened").len(), 1, "{stderr}");
    assert_eq!(log_lines(&stderr, "circuit breaker closed").len(), 1, "{stderr}");
    println!("404 for 10 s: {} refused requests, each with all 20 records; 20 delivered, 0 quarantined", refused.len());
}

/// A wrong method (405) or content type (415) is the config's, for every
/// record alike: never split, never quarantined.
#[test]
fn a_405_or_415_is_systemic_never_split_never_quarantined() {
    let s = Scenario::new(60, |_| false);
    let backend = Backend::start(|r: &Req| match r.n {
        0..=2 => Reaction::fail(405, "Method Not Allowed", r),
        3..=5 => Reaction::fail(415, "Unsupported Media Type", r),
        _ => Reaction::ok(r),
    });
    s.run(&sink(&backend, "status", "[sink.batch]\nmax_records = 100\n"), &[]);
    let seen = backend.seen();
    let (dups, _) = reconcile(&s, &seen, &BTreeSet::new(), |_| false);
    assert_eq!(dups, 0);
    let sizes: Vec<usize> = seen.requests.iter().map(|r| r.ids.len()).collect();
    assert_eq!(sizes, vec![60; 7], "six refusals of the whole batch, then one delivery: {sizes:?}");
}

/// Elasticsearch's back-pressure and a missing or blocked index, item by
/// item. Before, an item's 429 spent an attempt (quarantined after
/// `max_attempts`) and an item's 404 or 403 was rejected at once. They are
/// the cluster's state: the items wait, spend nothing, and arrive.
#[test]
fn a_bulk_items_429_or_missing_index_waits_and_spends_no_attempt() {
    let s = Scenario::new(100, |_| false);
    let backend = Backend::start(|r: &Req| {
        let mut store = Vec::new();
        let mut items = Vec::new();
        for (id, e) in r.ids.iter().zip(&r.events) {
            let n = e["n"].as_u64().unwrap_or(0);
            // Requests 0-1: the index is missing; 2-3: blocked read-only;
            // then items 7, 17, … are throttled for four more requests,
            // more than retry.max_attempts = 3.
            let (status, error) = match r.n {
                0 | 1 => (404, r#","error":{"type":"index_not_found_exception","reason":"no such index [logs]"}"#),
                2 | 3 => (
                    403,
                    r#","error":{"type":"cluster_block_exception","reason":"index [logs] blocked by: [FORBIDDEN/8/index write (api)]"}"#,
                ),
                4..=7 if n % 10 == 7 => {
                    (429, r#","error":{"type":"es_rejected_execution_exception","reason":"queue full"}"#)
                }
                _ => (201, ""),
            };
            store.push(status == 201);
            items.push(format!("{{\"create\":{{\"_index\":\"logs\",\"_id\":\"{id}\",\"status\":{status}{error}}}}}"));
        }
        Reaction {
            status: 200,
            body: format!("{{\"took\":1,\"errors\":true,\"items\":[{}]}}", items.join(",")),
            store,
            how: How::Answer,
            headers: Vec::new(),
        }
    });
    let stderr =
        s.run(&sink(&backend, "elasticsearch_bulk", "index = \"logs\"\n[sink.batch]\nmax_records = 100\n"), &[]);
    let seen = backend.seen();
    let (dups, _) = reconcile(&s, &seen, &BTreeSet::new(), |_| false);
    assert_eq!(dups, 0);
    let sizes: Vec<usize> = seen.requests.iter().map(|r| r.ids.len()).collect();
    assert_eq!(&sizes[..5], &[100, 100, 100, 100, 100], "a missing or blocked index holds the whole batch: {sizes:?}");
    assert!(sizes[5..8].iter().all(|n| *n == 10), "then only the ten throttled items: {sizes:?}");
    assert_eq!(seen.requests.len(), 9, "{sizes:?}");
    assert!(stderr.contains("circuit breaker opened"), "systemic items count towards the breaker: {stderr}");
}

/// `Retry-After` sets when the next request may go: here 2 s, against a
/// retry backoff of at most 50 ms and a first probe after 200 ms.
#[test]
fn retry_after_holds_the_next_request_back() {
    let s = Scenario::new(50, |_| false);
    let backend = Backend::start(|r: &Req| match r.n {
        0 => Reaction::fail(503, "overloaded", r).header("retry-after", "2"),
        1 => Reaction::fail(429, "slow down", r).header("retry-after", "1"),
        _ => Reaction::ok(r),
    });
    s.run(&sink(&backend, "status", "[sink.batch]\nmax_records = 100\n"), &[]);
    let seen = backend.seen();
    let (dups, _) = reconcile(&s, &seen, &BTreeSet::new(), |_| false);
    assert_eq!(dups, 0);
    let at: Vec<u128> = seen.requests.iter().map(|r| r.at.as_millis()).collect();
    assert_eq!(at.len(), 3, "{at:?}");
    assert!(at[1] - at[0] >= 2000, "Retry-After: 2 waited for: {at:?}");
    assert!(at[2] - at[1] >= 1000, "Retry-After: 1 waited for: {at:?}");
    assert!(at[1] - at[0] < 4000 && at[2] - at[1] < 3000, "and not much longer: {at:?}");
}

/// `check --connect` against a wrong path: the backend answers, but 404 is
/// no backend to deliver to, and `check` says so (exit 3) instead of
/// "reachable". A backend that only refuses the empty probe body (400) is
/// there.
#[test]
fn check_connect_calls_a_wrong_path_a_failure() {
    let s = Scenario::new(1, |_| false);
    let backend = Backend::start(|r: &Req| match r.n {
        0 => Reaction::fail(404, "404 page not found", r),
        _ => Reaction::fail(400, "{\"error\":\"empty body\"}", r),
    });
    let check = || {
        let config = s.config(&sink(&backend, "status", ""));
        let out = Command::new(sluice_bin!())
            .args(["check", "--connect", "-c", &config.display().to_string()])
            .current_dir(s.dir.path())
            .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (code, out) = check();
    assert_eq!(code, Some(3), "{out}");
    assert!(out.contains("FAILED (HTTP 404: not found: the URL's path"), "{out}");
    assert!(out.contains("fixed: request 3xx 401 403 404"), "check prints the fixed rules: {out}");
    let (code, out) = check();
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("HTTP 400 to a request with no event (reachable"), "{out}");
}

/// Splunk HEC: events rendered as HEC envelopes; a 400 naming an
/// `invalid-event-number` rejects that event alone. HEC indexes the events
/// before the invalid one and answers 400 all the same: those are sent
/// again, and the only duplicates are theirs.
#[test]
fn splunk_hec_rejects_the_invalid_event_it_names_and_nothing_else() {
    let s = Scenario::new(200, |i| i % 37 == 11);
    let backend = Backend::start(|r: &Req| {
        let first_bad = r.events.iter().position(|e| e["poison"] == true);
        match first_bad {
            None => Reaction { body: "{\"text\":\"Success\",\"code\":0}".into(), ..Reaction::ok(r) },
            Some(bad) => Reaction {
                status: 400,
                body: format!("{{\"text\":\"Invalid data format\",\"code\":6,\"invalid-event-number\":{bad}}}"),
                store: (0..r.ids.len()).map(|i| i < bad).collect(),
                how: How::Answer,
                headers: Vec::new(),
            },
        }
    });
    s.run(&sink(&backend, "splunk_hec", "[sink.batch]\nmax_records = 50\n"), &[]);
    let refused: BTreeSet<String> = s.ids.iter().filter(|id| n_of(id) % 37 == 11).cloned().collect();
    let seen = backend.seen();
    assert!(
        seen.requests.iter().all(|r| !r.ids.is_empty() && r.ids.iter().all(|id| id.starts_with("ev-"))),
        "HEC envelopes carry fields.event_id"
    );
    // HEC indexed the events before the invalid one: they are taken, never
    // sent again. No answer was lost, so no duplicate has a cause.
    let (dups, quarantined) = reconcile(&s, &seen, &refused, |_| false);
    assert_eq!(dups, 0, "an event HEC took was sent again");
    assert_eq!(taken_and_sent_again(&seen), 0);
    for reason in quarantined.values() {
        assert!(reason.contains("Invalid data format"), "{reason}");
    }
    println!(
        "splunk_hec: {} requests, {} invalid events quarantined, 0 events HEC took sent again",
        seen.requests.len(),
        refused.len()
    );
}

/// Ids a backend stored that were sent to it again in a later request:
/// a resend of what it said it took (its answers were all delivered).
fn taken_and_sent_again(seen: &Seen) -> usize {
    let mut stored: BTreeSet<&str> = BTreeSet::new();
    let mut again = 0;
    for r in &seen.requests {
        again += r.ids.iter().filter(|id| stored.contains(id.as_str())).count();
        stored.extend(r.stored.iter().map(String::as_str));
    }
    again
}

/// OTLP/HTTP partial success (the specification: the client MUST NOT
/// retry it): the batch is accepted, the refused count logged and
/// counted, and nothing is sent again. On today's split every accepted
/// record of a half was stored again.
#[test]
fn otlp_partial_success_is_accepted_counted_and_never_resent() {
    let s = Scenario::new(60, |i| i % 7 == 3);
    let backend = Backend::start(|r: &Req| {
        let store: Vec<bool> = r.events.iter().map(|e| e["poison"] != true).collect();
        let rejected = store.iter().filter(|k| !**k).count();
        let body = if rejected == 0 {
            "{}".to_string()
        } else {
            format!(
                "{{\"partialSuccess\":{{\"rejectedLogRecords\":\"{rejected}\",\"errorMessage\":\"{rejected} log records dropped: invalid attribute\"}}}}"
            )
        };
        Reaction { status: 200, body, store, how: How::Answer, headers: Vec::new() }
    });
    let stderr = s.run(&sink(&backend, "otlp_http", "[sink.batch]\nmax_records = 20\n"), &[]);
    let seen = backend.seen();
    let dropped: usize = s.ids.iter().filter(|id| n_of(id) % 7 == 3).count();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for id in &seen.stored {
        *counts.entry(id).or_default() += 1;
    }
    assert!(counts.values().all(|k| *k == 1), "an accepted record stored twice: {counts:?}");
    assert_eq!(counts.len(), s.ids.len() - dropped, "every record the receiver kept, once");
    assert_eq!(seen.requests.len(), 3, "one request per 20 events, none split or sent again");
    assert_eq!(taken_and_sent_again(&seen), 0);
    assert!(s.quarantined().is_empty(), "nothing quarantined: the receiver keeps what it refused to itself");
    let said = log_lines(&stderr, "dropped records it did not name");
    assert!(!said.is_empty() && said.iter().all(|l| l.contains("invalid attribute")), "{stderr}");
    let total: usize = said
        .iter()
        .filter_map(|l| l.split("dropped=").nth(1)?.split(|c: char| !c.is_ascii_digit()).next()?.parse::<usize>().ok())
        .sum();
    assert_eq!(total, dropped, "the refused count is recorded: {said:?}");
    println!("otlp_http: 3 requests, {dropped} dropped by the receiver and counted, 0 resent");
}

/// Quickwit quotes each document it could not parse: that record alone is
/// quarantined, the rest were ingested and are not sent again.
#[test]
fn quickwit_parse_failures_name_their_records_and_nothing_taken_is_resent() {
    let s = Scenario::new(60, |i| i % 9 == 4);
    let backend = Backend::start(|r: &Req| {
        let lines: Vec<&[u8]> = r.body.split(|b| *b == b'\n').filter(|l| !l.is_empty()).collect();
        let store: Vec<bool> = r.events.iter().map(|e| e["poison"] != true).collect();
        let failures: Vec<String> = lines
            .iter()
            .zip(&store)
            .filter(|(_, keep)| !**keep)
            .map(|(line, _)| {
                serde_json::json!({"document": String::from_utf8_lossy(line), "reason": "doc_parsing",
                    "message": "failed to parse field `poison`"})
                .to_string()
            })
            .collect();
        let ok = store.iter().filter(|k| **k).count();
        let body = format!(
            "{{\"num_docs_for_processing\":{},\"num_ingested_docs\":{ok},\"num_rejected_docs\":{},\"parse_failures\":[{}]}}",
            store.len(),
            failures.len(),
            failures.join(",")
        );
        Reaction { status: 200, body, store, how: How::Answer, headers: Vec::new() }
    });
    s.run(&sink(&backend, "quickwit", "[sink.batch]\nmax_records = 20\n"), &[]);
    let refused: BTreeSet<String> = s.ids.iter().filter(|id| n_of(id) % 9 == 4).cloned().collect();
    let seen = backend.seen();
    let (dups, quarantined) = reconcile(&s, &seen, &refused, |_| false);
    assert_eq!(dups, 0);
    assert_eq!(taken_and_sent_again(&seen), 0);
    assert_eq!(seen.requests.len(), 3, "no split: each failure was named");
    for reason in quarantined.values() {
        assert!(reason.contains("failed to parse field"), "{reason}");
    }
    println!("quickwit: 3 requests, {} quoted documents quarantined, 0 resent", refused.len());
}

/// Datadog answers 413 above its size limit: the sink learns it from the
/// first 413 and sends later batches under it, instead of splitting each.
#[test]
fn a_413_lowers_the_request_size_once_for_later_batches() {
    let s = Scenario::new(600, |_| false);
    let backend = Backend::start(|r: &Req| {
        let bytes = r.body.len();
        if bytes > 10_000 {
            Reaction::fail(413, "Payload too large", r)
        } else {
            Reaction { status: 202, ..Reaction::ok(r) }
        }
    });
    let stderr = s.run(&sink(&backend, "datadog", ""), &[]);
    let seen = backend.seen();
    let (dups, _) = reconcile(&s, &seen, &BTreeSet::new(), |_| false);
    assert_eq!(dups, 0);
    // Each worker may have a batch in the sink before the first 413 is
    // answered (two here); every batch after that fits. Splitting each
    // batch anew answered 413 to all six.
    let too_large = seen.requests.iter().filter(|r| r.status == 413).count();
    assert!((1..=2).contains(&too_large), "the limit is learnt once: {too_large} answers 413");
    assert!(!log_lines(&stderr, "requests now stay under").is_empty(), "{stderr}");
    println!("datadog: {} requests for 600 events, one 413", seen.requests.len());
}

/// VictoriaLogs skips a line it cannot parse and answers 200 naming
/// nothing: sluice cannot know. `check` says its answers cannot prove
/// delivery, and `audit` calls what it took "sent, unconfirmed".
#[test]
fn a_backend_whose_answers_prove_nothing_is_named_unconfirmed() {
    let s = Scenario::new(20, |i| i == 5);
    let backend = Backend::start(|r: &Req| Reaction {
        store: r.events.iter().map(|e| e["poison"] != true).collect(),
        ..Reaction::ok(r)
    });
    let sink_toml = sink(&backend, "victorialogs", "");
    s.run(&sink_toml, &[]);
    let config = s.dir.path().join("sluice.toml");
    let check = Command::new(sluice_bin!())
        .args(["check", "-c", &config.display().to_string()])
        .current_dir(s.dir.path())
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(said.contains("its answers cannot prove delivery"), "{said}");
    assert!(said.contains("resends: the backend stores every copy"), "{said}");
    let audit = Command::new(sluice_bin!())
        .args(["audit", "-c", &config.display().to_string(), "ev-0000005", "ev-0000006"])
        .current_dir(s.dir.path())
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let said = String::from_utf8_lossy(&audit.stdout);
    assert_eq!(said.lines().filter(|l| l.contains("sent, unconfirmed")).count(), 2, "{said}");
    let seen = backend.seen();
    assert!(!seen.stored.iter().any(|id| id == "ev-0000005"), "the backend skipped it, as VictoriaLogs does");
}

/// The Axiom classifier plugin (examples/classifiers/axiom), built here.
fn classifier(crate_name: &str) -> PathBuf {
    sluice_e2e::build_wasm(&[crate_name]).join(format!("{}.wasm", crate_name.replace('-', "_")))
}

/// An Axiom-shaped backend: counts, and each failure named by its event's
/// time. Every 23rd event is refused.
fn axiom_backend() -> Backend {
    Backend::start(|r: &Req| {
        let refused = |e: &serde_json::Value| e["n"].as_u64().is_some_and(|n| n % 23 == 0);
        let store: Vec<bool> = r.events.iter().map(|e| !refused(e)).collect();
        let failures: Vec<String> = r
            .events
            .iter()
            .filter(|e| refused(e))
            .map(|e| format!("{{\"timestamp\":{},\"error\":\"field n is not accepted here\"}}", e["ts"]))
            .collect();
        let ingested = store.iter().filter(|k| **k).count();
        Reaction {
            status: 200,
            body: format!(
                "{{\"ingested\":{ingested},\"failed\":{},\"failures\":[{}],\"processedBytes\":1,\"blocksCreated\":0,\"walLength\":0}}",
                failures.len(),
                failures.join(",")
            ),
            store,
            how: How::Answer,
            headers: Vec::new(),
        }
    })
}

/// A backend no built-in profile covers, read by a classifier plugin: each
/// failure lands on the one record with its time, so the refused events
/// are quarantined with Axiom's reason, and no batch is split (a split
/// would send ingested events twice: the backend would store duplicates).
#[test]
fn a_classifier_plugin_reads_a_backend_no_profile_covers_record_by_record() {
    // Distinct times, a second apart: a failure names exactly one record.
    let s = Scenario::with_times(300, |_| false, |i| now_rfc3339(-(i as i64)));
    let backend = axiom_backend();
    let wasm = classifier("sluice-classifier-axiom");
    let extra = format!("[sink.classifier]\npath = \"{}\"\n[sink.batch]\nmax_records = 50\n", wasm.display());
    s.run(&sink(&backend, "status", &extra), &[]);
    let refused: BTreeSet<String> = s.ids.iter().filter(|id| n_of(id).is_multiple_of(23)).cloned().collect();
    let seen = backend.seen();
    let (dups, quarantined) = reconcile(&s, &seen, &refused, |_| false);
    assert_eq!(dups, 0, "no split: every failure was matched to its record");
    assert!(seen.requests.iter().all(|r| r.ids.len() == 50), "one request per 50 events, none split");
    for reason in quarantined.values() {
        assert!(reason.contains("axiom: field n is not accepted here"), "{reason}");
    }
    println!(
        "axiom classifier: {} requests, {} refused and quarantined by time, 0 splits, 0 duplicates",
        seen.requests.len(),
        refused.len()
    );
    // The control: the same backend read by the status profile counts every
    // 200 as accepted, and the refused events are lost without a trace.
    let s = Scenario::with_times(300, |_| false, |i| now_rfc3339(-(i as i64)));
    let backend = axiom_backend();
    s.run(&sink(&backend, "status", "[sink.batch]\nmax_records = 50\n"), &[]);
    let stored: BTreeSet<String> = backend.seen().stored.iter().cloned().collect();
    let missing = s.ids.iter().filter(|id| !stored.contains(id.as_str())).count();
    assert_eq!(missing, refused.len(), "without the classifier, what Axiom refused is neither stored nor quarantined");
    assert!(s.quarantined().is_empty());
}

/// A classifier that traps, spins past its time limit, runs out of
/// memory, answers too few fates or names a row never sent: each is the
/// classifier's fault, never a record's. The answer is systemic, the
/// records wait, and once the backend answers what the classifier reads
/// without fault, everything arrives and nothing is quarantined. One that
/// blames every record for a 404 is overruled by the fixed rules.
#[test]
fn a_faulty_classifier_is_systemic_and_quarantines_nothing() {
    let wasm = classifier("sluice-classifier-hostile");
    for (mode, status) in
        [("trap", 202), ("spin", 202), ("grow", 202), ("short", 202), ("row-outside", 202), ("reject-all", 404)]
    {
        let s = Scenario::new(40, |_| false);
        let backend =
            Backend::start(move |r: &Req| if r.n < 3 { Reaction::fail(status, "not yet", r) } else { Reaction::ok(r) });
        let extra = format!(
            "[sink.classifier]\npath = \"{}\"\ntime_limit = \"200ms\"\nmemory = \"32MiB\"\nconfig = {{ mode = \"{mode}\", fault_on_status = {status} }}\n",
            wasm.display()
        );
        let stderr = s.run(&sink(&backend, "status", &extra), &[]);
        let seen = backend.seen();
        let (dups, _) = reconcile(&s, &seen, &BTreeSet::new(), |_| false);
        assert_eq!(dups, 0, "{mode}");
        let faulted = seen.requests.iter().filter(|r| r.status == status).count();
        assert_eq!(faulted, 3, "{mode}: the backend's three {status}s were each read and none split");
        assert!(seen.requests.iter().all(|r| r.ids.len() == 40), "{mode}: a classifier's fault never splits");
        if matches!(mode, "trap" | "spin" | "grow") {
            assert!(stderr.contains("faulted"), "{mode}: the log says why the answer was unread:\n{stderr}");
        }
        println!("{mode}: {faulted} answers unread or overruled, 40 delivered, 0 quarantined");
    }
}

/// A classifier pinned by digest is loaded through the same check as a
/// chain's plugin: the pinned file starts, a swapped file is refused
/// before it is compiled (its `init` never runs), naming both digests.
#[test]
fn a_pinned_classifier_starts_only_from_the_pinned_bytes() {
    use sluice::sink::http::classifier::ClassifierConfig;
    let wasm = classifier("sluice-classifier-hostile");
    let bytes = std::fs::read(&wasm).unwrap_or_else(|e| panic!("{}: {e}", wasm.display()));
    let pinned = format!("blake3:{}", blake3::hash(&bytes).to_hex());
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("classifier.wasm");
    std::fs::write(&path, &bytes).unwrap_or_else(|e| panic!("{e}"));
    let config = ClassifierConfig {
        path: path.clone(),
        digest: Some(pinned.clone()),
        config: serde_json::json!({ "mode": "reject-all", "fault_on_status": 404 }),
        ..ClassifierConfig::default()
    };
    let plugins = sluice::plugin::engine::Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
    assert!(config.build(&plugins).is_ok(), "the pinned bytes start");
    // Another build of the same plugin in its place.
    let other = classifier("sluice-classifier-axiom");
    std::fs::copy(&other, &path).unwrap_or_else(|e| panic!("{e}"));
    let refused = config
        .build(&plugins)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_else(|| panic!("a swapped classifier was loaded"));
    let found = format!("blake3:{}", blake3::hash(&std::fs::read(&other).unwrap_or_default()).to_hex());
    assert!(refused.contains(&pinned) && refused.contains(&found), "both digests named: {refused}");
}

/// Go's `time.Time.String()` of `ns`, as Loki writes a refused entry's time.
fn go_time(ns: i64) -> String {
    let rfc = sluice_guest::time::format_rfc3339(ns);
    format!("{} +0000 UTC", rfc.trim_end_matches('Z').replacen('T', " ", 1))
}

/// Loki takes the good entries of a push and answers 400 naming the
/// refused ones by time: those are quarantined with Loki's reason, and
/// the entries it took are not sent again (no split, no duplicate).
#[test]
fn loki_rejects_the_entries_it_names_by_time_and_keeps_the_rest() {
    let s = Scenario::with_times(200, |_| false, |i| now_rfc3339(-(i as i64)));
    let too_old = |e: &serde_json::Value| e["n"].as_u64().is_some_and(|n| n % 19 == 0);
    let labels = std::sync::Arc::new(std::sync::Mutex::new(BTreeSet::<String>::new()));
    let streams = labels.clone();
    let backend = Backend::start(move |r: &Req| {
        assert_eq!(r.loki.len(), r.ids.len(), "a Loki push body");
        let mut seen = streams.lock().unwrap_or_else(|p| p.into_inner());
        seen.extend(r.loki.iter().map(|(_, l)| l.to_string()));
        let store: Vec<bool> = r.events.iter().map(|e| !too_old(e)).collect();
        let refused: Vec<String> = r
            .loki
            .iter()
            .zip(&store)
            .filter(|(_, keep)| !**keep)
            .map(|((ns, l), _)| {
                format!(
                    "entry with timestamp {} ignored, reason: 'entry too far behind, oldest acceptable timestamp is: x' for stream: {l},\n",
                    go_time(*ns)
                )
            })
            .collect();
        if refused.is_empty() {
            return Reaction { status: 204, ..Reaction::ok(r) };
        }
        Reaction {
            status: 400,
            body: format!("{}total ignored: {} out of {}", refused.concat(), refused.len(), r.ids.len()),
            store,
            how: How::Answer,
            headers: Vec::new(),
        }
    });
    let extra = "[sink.labels]\nstatic = { job = \"e2e\" }\nfields = [\"msg_kind\"]\n[sink.batch]\nmax_records = 50\n";
    s.run(&sink(&backend, "loki", extra), &[]);
    let refused: BTreeSet<String> = s.ids.iter().filter(|id| n_of(id).is_multiple_of(19)).cloned().collect();
    let seen = backend.seen();
    let (dups, quarantined) = reconcile(&s, &seen, &refused, |_| false);
    assert_eq!(dups, 0, "what Loki took was not sent again");
    assert_eq!(seen.requests.len(), 4, "four pushes of 50, none split");
    for reason in quarantined.values() {
        assert!(reason.contains("HTTP 400: entry too far behind"), "{reason}");
    }
    // The events have no msg_kind field: the label is left out, the set one
    // is on every stream.
    let labels = labels.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert_eq!(labels, BTreeSet::from([r#"{"job":"e2e"}"#.to_string()]));
    println!(
        "loki: {} pushes, {} entries refused by time and quarantined, 0 resent",
        seen.requests.len(),
        refused.len()
    );
}
