//! The Kafka pipeline end to end: a real Kafka-protocol broker (tansu,
//! started here), the `sluice` binary as a group member, RocksDB for the
//! dedup window and quarantine, an NDJSON file as the sink. Every test
//! reconciles event ids: what was produced against what the sink and the
//! quarantine hold, and the group's committed offsets against what was
//! finished.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sluice::store::Store;
use sluice_e2e::kafka::{Broker, Storage, committed, create_topic, free_port, high_watermarks, produce, produce_with};
use sluice_e2e::proxy::Link;
use sluice_e2e::{plugin, scrape, sluice_bin};

const PARTITIONS: i32 = 4;

/// Where the records are: the tansu broker, or (for what tansu cannot do)
/// librdkafka's mock cluster, which listens on loopback too.
trait Cluster {
    fn brokers(&self) -> String;
    fn create(&self, topic: &str, partitions: i32);
    /// The dedup changelog of `group`, where sluice cannot create it.
    fn changelog(&self, group: &str);
}

impl Cluster for Broker {
    fn brokers(&self) -> String {
        Broker::brokers(self)
    }
    fn create(&self, topic: &str, partitions: i32) {
        create_topic(&Broker::brokers(self), topic, partitions);
    }
    /// tansu takes CreateTopics: sluice creates its changelog itself.
    fn changelog(&self, _group: &str) {}
}

impl Cluster for rdkafka::mocking::MockCluster<'static, rdkafka::producer::DefaultProducerContext> {
    fn brokers(&self) -> String {
        self.bootstrap_servers()
    }
    fn create(&self, topic: &str, partitions: i32) {
        self.create_topic(topic, partitions, 1).unwrap_or_else(|e| panic!("{e}"));
    }
    /// The mock cluster answers no CreateTopics.
    fn changelog(&self, group: &str) {
        self.create(&format!("{group}-dedup-changelog"), PARTITIONS);
    }
}

/// One test at a time: each starts a broker and sluice processes, and on
/// two cores parallel runs starve the brokers' group heartbeats.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

struct Fixture {
    dir: tempfile::TempDir,
    topic: String,
    group: String,
    good: BTreeSet<String>,
    malformed: BTreeSet<String>,
    written: usize,
}

impl Fixture {
    fn new(broker: &impl Cluster, name: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let f = Fixture {
            dir,
            topic: format!("{name}-logs"),
            group: format!("{name}-group"),
            good: BTreeSet::new(),
            malformed: BTreeSet::new(),
            written: 0,
        };
        broker.create(&f.topic, PARTITIONS);
        broker.changelog(&f.group);
        f
    }

    /// Produce `n` records over the partitions: unique `event_id`s, every
    /// tenth repeated in a second message of the same partition (a
    /// producer's retry), every fiftieth malformed.
    fn produce(&mut self, broker: &impl Cluster, n: usize) {
        let records = self.next_records(n);
        produce(&broker.brokers(), &self.topic, &records);
    }

    /// The next `n` records as `produce` sends them, counted as produced.
    fn next_records(&mut self, n: usize) -> Vec<(i32, String, String)> {
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
        let ts = sluice_guest::time::format_rfc3339(now * 1_000_000_000);
        let mut records = Vec::with_capacity(n + n / 10);
        for i in self.written..self.written + n {
            let p = (i % PARTITIONS as usize) as i32;
            if i % 50 == 49 {
                let bad = format!("{{\"event_id\":\"bad-{i}\",\"ts\":");
                self.malformed.insert(bad.clone());
                records.push((p, format!("bad-{i}"), bad));
            } else {
                let id = format!("ev-{i:07}");
                let line =
                    format!("{{\"event_id\":\"{id}\",\"ts\":\"{ts}\",\"n\":{i},\"pad\":\"{}\"}}", "x".repeat(100));
                if i % 10 == 0 {
                    records.push((p, id.clone(), line.clone()));
                }
                records.push((p, id.clone(), line));
                self.good.insert(id);
            }
        }
        self.written += n;
        records
    }

    /// Produce the next `n` records from a thread, in chunks, while the
    /// test goes on: members are busy when it kills one.
    fn produce_in_background(&mut self, broker: &impl Cluster, n: usize) -> std::thread::JoinHandle<()> {
        let records = self.next_records(n);
        let (brokers, topic) = (broker.brokers(), self.topic.clone());
        std::thread::spawn(move || {
            for chunk in records.chunks(2_000) {
                produce(&brokers, &topic, chunk);
            }
        })
    }

    /// Produce `n` records, and run instance "a" until it has delivered
    /// them all and stopped (SIGTERM): its config.
    fn run_to_the_end(&mut self, broker: &impl Cluster, n: usize) -> PathBuf {
        self.produce(broker, n);
        let config = self.config(broker, "a", "");
        let mut child = self.spawn(&config, "a.log");
        self.wait_complete(Duration::from_secs(120), &mut [&mut child]);
        std::thread::sleep(Duration::from_millis(600));
        assert_eq!(terminate(&mut child), 0, "{}", self.logs());
        config
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A config for instance `name` (its own state and sink file).
    fn config(&self, broker: &impl Cluster, name: &str, extra: &str) -> PathBuf {
        let cfg = format!(
            r#"
[pipeline]
name = "e2e-kafka"
state_dir = "state-{name}"
batch_size = 500

[source]
type = "kafka"
brokers = "{brokers}"
topics = ["{topic}"]
group_id = "{group}"
commit_interval = "200ms"
properties = {{ "session.timeout.ms" = 6000, "heartbeat.interval.ms" = 500 }}

{plugins}
[dedup]
window = "1h"

[sink]
type = "file"
path = "out/{name}.ndjson"
{extra}
"#,
            brokers = broker.brokers(),
            topic = self.topic,
            group = self.group,
            plugins = sluice_e2e::json_chain_toml(true, Some("1d")),
        );
        let path = self.path(&format!("{name}.toml"));
        std::fs::write(&path, cfg).unwrap_or_else(|e| panic!("{e}"));
        path
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(sluice_bin!());
        c.args(args)
            .current_dir(self.dir.path())
            .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
            .env("SLUICE_LOG", std::env::var("SLUICE_E2E_LOG").unwrap_or_else(|_| "info".into()))
            .stdin(Stdio::null());
        c
    }

    fn spawn(&self, config: &Path, log: &str) -> Proc {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path(log))
            .unwrap_or_else(|e| panic!("{e}"));
        Proc(
            self.command(&["run", "-c", &config.display().to_string()])
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("{e}")),
        )
    }

    /// Run a `sluice` subcommand to its end: (exit code, stdout, stderr).
    fn sluice(&self, args: &[&str]) -> (i32, String, String) {
        let out = self.command(args).output().unwrap_or_else(|e| panic!("{e}"));
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Wait until the sinks hold at least `n` lines (prefix `prefix`).
    fn wait_lines(&self, prefix: &str, n: usize, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.delivered(prefix).len() < n {
            assert!(Instant::now() < deadline, "fewer than {n} lines in {prefix}* after {limit:?}: {}", self.logs());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Ids in the sink files whose names start with `prefix`.
    fn delivered(&self, prefix: &str) -> Vec<String> {
        let mut ids = Vec::new();
        let Ok(entries) = std::fs::read_dir(self.path("out")) else { return ids };
        let mut files: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        files.sort();
        for file in files.iter().filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(prefix))) {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            let complete = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
            for l in complete.lines() {
                let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("sink line {l:?}: {e}"));
                ids.push(v["id"].as_str().unwrap_or_else(|| panic!("no id: {l}")).to_string());
            }
        }
        ids
    }

    /// Wait until every good id is in the sinks; panic when `limit` passes
    /// with no new id delivered (a stall: something is lost or stuck), or
    /// after five times `limit` in all. tansu on SQLite answers fetches in
    /// bursts (seen here: a few thousand records every ~10 s on a loaded
    /// machine, and a whole run taking from 35 s to 220 s), so a fixed total
    /// would fail slow runs that lose nothing.
    fn wait_complete(&self, limit: Duration, running: &mut [&mut Proc]) {
        let started = Instant::now();
        let mut progress_at = started;
        let mut last_missing = usize::MAX;
        loop {
            let have: BTreeSet<String> = self.delivered("").into_iter().collect();
            let missing = self.good.difference(&have).count();
            if missing == 0 {
                return;
            }
            if missing < last_missing {
                last_missing = missing;
                progress_at = Instant::now();
            }
            for c in running.iter_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    panic!("sluice exited early ({status}); {missing} ids missing; logs: {}", self.logs());
                }
            }
            assert!(
                progress_at.elapsed() < limit,
                "{missing} ids still missing, none delivered for {limit:?}; logs: {}",
                self.logs()
            );
            assert!(
                started.elapsed() < limit * 5,
                "{missing} ids still missing after {:?}; logs: {}",
                limit * 5,
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Whether any member's log says `needle`, anywhere in it: a check
    /// must not read `logs()`, whose tail can be all warnings by then.
    fn logged(&self, needle: &str) -> bool {
        std::fs::read_dir(self.dir.path()).into_iter().flatten().flatten().any(|e| {
            e.path().extension().is_some_and(|x| x == "log")
                && std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains(needle))
        })
    }

    /// The tail of each member's log, for a failure's message.
    fn logs(&self) -> String {
        let mut out = String::new();
        for e in std::fs::read_dir(self.dir.path()).into_iter().flatten().flatten() {
            if e.path().extension().is_some_and(|x| x == "log") {
                let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                let tail: String = text
                    .lines()
                    // Quarantine lines flood the tail; errors never are.
                    .filter(|l| {
                        !(l.contains("quarantined") || l.contains("record rejected"))
                            || l.contains("ERROR")
                            || l.starts_with("error")
                    })
                    .rev()
                    .take(std::env::var("SLUICE_E2E_LOG_LINES").ok().and_then(|v| v.parse().ok()).unwrap_or(40))
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<Vec<_>>()
                    .join("\n");
                out.push_str(&format!("\n--- {} ---\n{tail}", e.path().display()));
            }
        }
        out
    }

    /// Quarantined payloads across the given state folders. In each, one
    /// entry per source position: a record read again after a kill (its
    /// offset not yet committed) and quarantined again replaces its entry
    /// (issue 25, item 7: 20 of 594 positions were entered twice in 6
    /// kills before).
    fn quarantined(&self, states: &[&str]) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for s in states {
            let Ok(store) = Store::open_read_only(&self.path(s)) else { continue };
            let mut positions = BTreeSet::new();
            for e in store.quarantine_entries().unwrap_or_else(|e| panic!("{e}")) {
                assert!(e.reason.contains("not valid JSON"), "{}: {}", e.id, e.reason);
                assert!(positions.insert(e.position.to_string()), "{s}: a second entry for {}", e.position);
                out.insert(String::from_utf8_lossy(&e.payload.to_vec()).into_owned());
            }
        }
        out
    }

    /// Nothing lost, nothing invented: the sinks' ids are exactly the good
    /// ids, the quarantines hold exactly the malformed records.
    fn assert_reconciled(&self, states: &[&str]) {
        let delivered: BTreeSet<String> = self.delivered("").into_iter().collect();
        let missing: Vec<_> = self.good.difference(&delivered).take(5).collect();
        let unexpected: Vec<_> = delivered.difference(&self.good).take(5).collect();
        assert!(missing.is_empty(), "ids lost: {missing:?} (and maybe more)");
        assert!(unexpected.is_empty(), "ids never produced: {unexpected:?}");
        assert_eq!(self.quarantined(states), self.malformed, "the quarantine holds exactly the malformed records");
    }

    /// Every partition's committed offset is its high watermark: every
    /// record finished, and the commit says so.
    fn assert_fully_committed(&self, broker: &impl Cluster) {
        let high = high_watermarks(&broker.brokers(), &self.topic, PARTITIONS);
        let committed = committed(&broker.brokers(), &self.group, &self.topic, PARTITIONS);
        let expected: Vec<Option<i64>> = high.iter().map(|h| Some(*h)).collect();
        assert_eq!(committed, expected, "committed offsets against high watermarks; logs: {}", self.logs());
    }
}

/// A sluice process, SIGKILLed if the test ends while it runs (a failed
/// assertion must not leave it behind).
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl std::ops::Deref for Proc {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Proc {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

/// SIGTERM, then the exit status within the grace period.
fn terminate(child: &mut Child) -> i32 {
    // SAFETY: kill(2) on a child we own.
    unsafe { libc_kill(child.id() as i32, 15) };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return status.code().unwrap_or(-1);
        }
        assert!(Instant::now() < deadline, "sluice did not stop within 20 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

/// `pipeline.batch_size` of the fixture's configs.
const BATCH: usize = 500;

/// The commit interval of the kill tests: long enough that a kill always
/// finds delivered records not yet committed, which only the changelog
/// keeps from being delivered again.
const COMMIT_SLOWLY: &str = "3s";

/// A field of a log line (`name=value` or `name="value"`).
fn log_field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let at = line.find(&format!(" {name}="))? + name.len() + 2;
    let rest = &line[at..];
    match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next(),
        None => rest.split_whitespace().next(),
    }
}

/// The partitions a member's log says it was assigned.
fn assigned_partitions(log: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter(|l| l.contains("kind=\"assigned\""))
        .filter_map(|l| Some(log_field(l, "partition")?.to_string()))
        .collect()
}

/// The ids a member's log says it restored from the changelog.
fn restored_ids(log: &Path) -> u64 {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter(|l| l.contains("dedup state restored"))
        .filter_map(|l| log_field(l, "ids")?.parse::<u64>().ok())
        .sum()
}

fn counts(ids: &[String]) -> BTreeMap<&str, usize> {
    let mut m = BTreeMap::new();
    for id in ids {
        *m.entry(id.as_str()).or_insert(0) += 1;
    }
    m
}

fn metric_lines<'a>(text: &'a str, names: &[&str]) -> Vec<&'a str> {
    text.lines().filter(|l| names.iter().any(|n| l.starts_with(n))).collect()
}

#[test]
fn hundred_thousand_ids_over_four_partitions_reconcile_and_commit() {
    let _serial = serial();
    let broker = Broker::start(Storage::Sqlite);
    let mut f = Fixture::new(&broker, "bulk");
    let n = std::env::var("SLUICE_E2E_KAFKA_N").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    f.produce(&broker, n);
    let port = free_port();
    let config = f.config(&broker, "a", &format!("[metrics]\nlisten = \"127.0.0.1:{port}\""));
    let started = Instant::now();
    let mut child = f.spawn(&config, "a.log");
    // Not ready until the group has assigned partitions (the join takes
    // about half the session timeout, 3 s here), then ready.
    let ready = |port| sluice_e2e::get(port, "/ready");
    let mut answers = Vec::new();
    while started.elapsed() < Duration::from_secs(30) {
        let a = ready(port);
        let status = a.split_whitespace().nth(1).unwrap_or("").to_string();
        if answers.last() != Some(&status) {
            answers.push(status.clone());
        }
        if status == "200" {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        answers.iter().any(|s| s == "503") && answers.last().map(String::as_str) == Some("200"),
        "/ready went {answers:?}; {}",
        f.logs()
    );
    let logs = std::fs::read_to_string(f.path("a.log")).unwrap_or_default();
    assert!(logs.contains("kind=\"assigned\""), "ready only once assigned: {logs}");
    // Lag and commit metrics as they read mid-run.
    let mut mid_run = String::new();
    while started.elapsed() < Duration::from_secs(30) {
        let text = scrape(port);
        if text.contains("sluice_consumer_lag") && text.contains("sluice_offset_commit_seconds_count") {
            mid_run = text;
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    f.wait_complete(Duration::from_secs(120), &mut [&mut child]);
    let seconds = started.elapsed().as_secs_f64();
    // The last commit goes out within the interval (200 ms) and the lag
    // gauges, sampled each second, reach zero.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut end = scrape(port);
    while Instant::now() < deadline {
        let lags = metric_lines(&end, &["sluice_consumer_lag{"]);
        if lags.len() == PARTITIONS as usize && lags.iter().all(|l| l.ends_with(" 0")) {
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
        end = scrape(port);
    }
    assert_eq!(terminate(&mut child), 0, "{}", f.logs());
    f.assert_reconciled(&["state-a"]);
    let ids = f.delivered("");
    let dups: Vec<_> = counts(&ids).into_iter().filter(|(_, n)| *n > 1).take(5).collect();
    assert!(dups.is_empty(), "the producer's repeats are absorbed by dedup: {dups:?}");
    f.assert_fully_committed(&broker);
    assert_audited(&f, &config);
    assert_shadowed(&f, &config, &broker);
    let names =
        ["sluice_consumer_lag", "sluice_committed_offset", "sluice_offset_commit_seconds", "sluice_commit_blocked"];
    println!(
        "100k ids / 4 partitions: {} delivered, {} quarantined, in {seconds:.1} s\nmid-run:\n{}\nat the end:\n{}",
        ids.len(),
        f.malformed.len(),
        metric_lines(&mid_run, &names).join("\n"),
        metric_lines(&end, &names).join("\n")
    );
    assert!(!mid_run.is_empty(), "the metrics endpoint showed lag and commit metrics mid-run; {}", f.logs());
    for l in metric_lines(&end, &["sluice_consumer_lag{"]) {
        assert!(l.ends_with(" 0"), "lag is zero at the end: {l}");
    }
}

/// `sluice audit` of a sample of the ids produced, on a Kafka store: each
/// delivered id's trail names its partition (`topic/N`, N the partition
/// it was produced to) and an offset, a repeated id also its absorbed
/// copy from the same partition, a malformed record is quarantined, and an
/// id never produced is unknown.
fn assert_audited(f: &Fixture, config: &Path) {
    let sample: Vec<&String> = f.good.iter().step_by(97).collect();
    let bad: Vec<String> = (0..f.written).filter(|i| i % 50 == 49).take(20).map(|i| format!("bad-{i}")).collect();
    let mut ids: Vec<String> = sample.iter().map(|s| s.to_string()).chain(bad.iter().cloned()).collect();
    ids.push("never-produced".into());
    let out = f
        .command(&["audit", "-c", &config.display().to_string(), "--json"])
        .args(&ids)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(0), "audit: {}", String::from_utf8_lossy(&out.stderr));
    let answers: BTreeMap<String, serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"));
            (v["id"].as_str().unwrap_or_default().to_string(), v)
        })
        .collect();
    assert_eq!(answers.len(), ids.len(), "one answer per id");
    for id in &sample {
        let a = &answers[id.as_str()];
        let i: usize = id.trim_start_matches("ev-").parse().unwrap_or(0);
        let partition = format!("{}/{}", f.topic, i % PARTITIONS as usize);
        assert_eq!(a["verdict"], "delivered", "{a}");
        assert_eq!(a["delivered"]["source"]["kind"], "kafka", "{a}");
        assert_eq!(a["delivered"]["source"]["name"].as_str(), Some(partition.as_str()), "{a}");
        assert!(a["delivered"]["source"]["offset"].is_u64(), "{a}");
        if i.is_multiple_of(10) {
            assert_eq!(a["absorbed"]["source"]["name"].as_str(), Some(partition.as_str()), "{a}");
            assert_ne!(a["absorbed"]["source"]["offset"], a["delivered"]["source"]["offset"], "another message: {a}");
        }
    }
    for id in &bad {
        assert_eq!(answers[id]["verdict"], "quarantined", "{}", answers[id]);
    }
    assert_eq!(answers["never-produced"]["verdict"], "unknown");
    println!("audit on Kafka: {} ids answered as the reconciliation found them", ids.len());
}

/// `sluice shadow` on Kafka: 2,000 records read by assignment from the
/// earliest offsets, through the chain and a candidate whose json plugin
/// takes the id from `n`: every well-formed record differs by its id and
/// nothing else, the malformed ones not at all, and the group's committed
/// offsets do not move.
fn assert_shadowed(f: &Fixture, config: &Path, broker: &impl Cluster) {
    let candidate = f.path("json-candidate.json");
    std::fs::write(&candidate, r#"{"id_field":"n","timestamp_field":"ts","require_id":true}"#)
        .unwrap_or_else(|e| panic!("{e}"));
    let before = committed(&broker.brokers(), &f.group, &f.topic, PARTITIONS);
    let spec = format!("json={}", candidate.display());
    let args = ["shadow", "-c", &config.display().to_string(), "--plugin-config", &spec, "--limit", "2000", "--json"];
    let out = f.command(&args).output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(0), "shadow: {}", String::from_utf8_lossy(&out.stderr));
    let mut lines: Vec<serde_json::Value> =
        String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let totals = lines.pop().unwrap_or_default();
    assert_eq!(totals["totals"]["records"], 2000, "{totals}");
    for d in &lines {
        let kinds: Vec<&str> =
            d["differences"].as_array().into_iter().flatten().filter_map(|x| x["kind"].as_str()).collect();
        assert_eq!(kinds, ["id"], "{d}");
        assert!(d["position"].as_str().is_some_and(|p| p.starts_with(&format!("kafka:{}/", f.topic))), "{d}");
    }
    // A malformed record (`bad-…`, every fiftieth produced, in partitions
    // 1 and 3) is rejected by both chains alike; which partitions the 2,000
    // came from is librdkafka's choice.
    let malformed = 2000 - lines.len();
    // Every fiftieth record produced is malformed and all of them land in
    // partitions 1 and 3: at most about one in 25 of what is read.
    assert!(malformed <= 2000 / 20, "only the malformed records are the same: {malformed}");
    assert_eq!(committed(&broker.brokers(), &f.group, &f.topic, PARTITIONS), before, "shadow commits nothing");
    println!("shadow on Kafka: 2000 records, {} differ by id only, {malformed} malformed alike", lines.len());
}

/// Each repeated id must be explained by a kill: its occurrences in the
/// sink are separated by a point where a process died (`cuts`, in lines of
/// the sink file `file`), never two inside one process's life.
fn assert_duplicates_explained(ids: &[String], cuts: &[usize]) -> usize {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let mut explained = 0;
    for (i, id) in ids.iter().enumerate() {
        if let Some(prev) = seen.insert(id.as_str(), i) {
            assert!(
                cuts.iter().any(|c| prev < *c && *c <= i),
                "{id} delivered twice (lines {prev} and {i}) with no kill in between (kills at {cuts:?})"
            );
            explained += 1;
        }
    }
    explained
}

// tansu 0.6 never evicts a SIGKILLed member of a settled group: two plain
// rdkafka consumers show it too (the survivor keeps its own partitions
// only, 40 s after the kill, with a 6 s session timeout). These two run on
// librdkafka's mock cluster, whose coordinator evicts, with the two sluice
// processes connecting to it over loopback.

#[test]
fn two_members_cooperative_sticky_one_killed_the_other_finishes() {
    let _serial = serial();
    // The same run without the changelog first: what it costs not to
    // have one (the figure before issue 13).
    let without = two_members("coopoff", "cooperative-sticky", false);
    let with = two_members("coop", "cooperative-sticky", true);
    println!("ids delivered by both members: {without} without the changelog, {with} with it");
}

#[test]
fn two_members_eager_one_killed_the_other_finishes() {
    let _serial = serial();
    two_members("eager", "range", true);
}

/// Returns how many ids both members delivered.
fn two_members(name: &str, strategy: &str, changelog: bool) -> usize {
    let broker = rdkafka::mocking::MockCluster::new(1).unwrap_or_else(|e| panic!("{e}"));
    let mut f = Fixture::new(&broker, name);
    f.produce(&broker, 80_000);
    let (ca, cb) = (f.config(&broker, "a", ""), f.config(&broker, "b", ""));
    for c in [&ca, &cb] {
        // The fixture's inline `properties` table, with the strategy added.
        let text = std::fs::read_to_string(c).unwrap_or_else(|e| panic!("{e}"));
        let text = text
            .replace(
                "\"heartbeat.interval.ms\" = 500 }",
                &format!("\"heartbeat.interval.ms\" = 500, \"partition.assignment.strategy\" = \"{strategy}\" }}"),
            )
            // Commits seconds apart: without the changelog, everything a
            // delivered since its last commit is delivered again by b.
            .replace("commit_interval = \"200ms\"", &format!("commit_interval = \"{COMMIT_SLOWLY}\""));
        std::fs::write(c, text).unwrap_or_else(|e| panic!("{e}"));
        if !changelog {
            with_dedup(c, "changelog.enabled = false");
        }
    }
    let mut a = f.spawn(&ca, "a.log");
    let mut b = f.spawn(&cb, "b.log");
    // Both members got partitions and delivered.
    f.wait_lines("a", 500, Duration::from_secs(60));
    f.wait_lines("b", 500, Duration::from_secs(60));
    // Kill a member of a settled group (past a session timeout after the
    // join, so no rebalance is in flight when it dies) while it is busy:
    // fresh records, and a few hundred of them delivered.
    std::thread::sleep(Duration::from_secs(7));
    let load = f.produce_in_background(&broker, 40_000);
    let busy = f.delivered("a").len() + 2_000;
    f.wait_lines("a", busy, Duration::from_secs(60));
    a.kill().unwrap_or_else(|e| panic!("{e}"));
    let _ = a.wait();
    let by_a = f.delivered("a");
    load.join().unwrap_or_else(|_| panic!("the producer failed"));
    // More records after the kill: b must take over a's partitions.
    f.produce(&broker, 10_000);
    f.wait_complete(Duration::from_secs(180), &mut [&mut b]);
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(terminate(&mut b), 0, "{}", f.logs());
    f.assert_reconciled(&["state-a", "state-b"]);
    f.assert_fully_committed(&broker);
    // A duplicate is an id a delivered before it died and b delivered
    // again after taking the partition over (a's dedup state did not
    // follow it); b never repeats itself.
    let by_b = f.delivered("b");
    let b_counts = counts(&by_b);
    assert!(b_counts.values().all(|n| *n == 1), "b delivered an id twice");
    let a_set: BTreeSet<&str> = by_a.iter().map(String::as_str).collect();
    let again: Vec<&str> = b_counts.keys().filter(|id| a_set.contains(**id)).copied().collect();
    // b took over a's partitions. Read from the whole of each log: the
    // tail `f.logs()` shows can be all warnings by the end of a run.
    let a_partitions = assigned_partitions(&f.path("a.log"));
    let b_partitions = assigned_partitions(&f.path("b.log"));
    assert!(!a_partitions.is_empty(), "a was assigned nothing: {}", f.logs());
    assert!(
        a_partitions.is_subset(&b_partitions),
        "b was assigned {b_partitions:?}, not all of a's {a_partitions:?}: {}",
        f.logs()
    );
    // a's partitions' ids followed them to b through the changelog: what
    // both delivered is at most the batch each of a's partitions had
    // between its sink and the changelog when a died (issue 13; before
    // the changelog: 1,250 cooperative-sticky, 2,690 eager).
    let bound = BATCH * a_partitions.len();
    let restored = restored_ids(&f.path("b.log"));
    println!(
        "two members ({strategy}, changelog {}): a delivered {} before SIGKILL (owning {a_partitions:?}), b {}; {} ids \
         delivered by both (bound with the changelog {bound}: one batch per partition of a), 0 lost; b restored \
         {restored} ids from the changelog",
        if changelog { "on" } else { "off" },
        by_a.len(),
        by_b.len(),
        again.len()
    );
    if changelog {
        assert!(again.len() <= bound, "{} ids delivered by both, over the bound {bound}", again.len());
        assert!(restored > 0, "b restored a's ids from the changelog: {}", f.logs());
    } else {
        assert_eq!(restored, 0, "no changelog, nothing restored");
    }
    again.len()
}

/// A zombie without transactions: member a is stopped (SIGSTOP) past its
/// session timeout while busy, b takes a's partitions and goes on, then a
/// is continued. a finds its partitions lost, stops their tasks, and
/// rejoins; nothing is lost. What a delivered after it lost them, b may
/// deliver too.
#[test]
fn a_stopped_member_past_its_session_loses_nothing_and_rejoins() {
    let _serial = serial();
    let broker = rdkafka::mocking::MockCluster::new(1).unwrap_or_else(|e| panic!("{e}"));
    zombie(&broker, "zombie", false);
}

/// The same zombie with `source.transactions`, on nisshi: b's tasks
/// initialise the transactional ids of the partitions they take, so when a
/// is continued its next produce or commit on them is refused as fenced:
/// it says so, stops them, delivers nothing more from them, and rejoins.
/// (librdkafka's mock cluster cannot show it: a second InitProducerId for
/// a transactional id gets a new producer id there, and the first keeps
/// its epoch. tansu 0.6 cannot end a transaction.)
#[test]
fn with_transactions_a_stopped_member_past_its_session_is_fenced_and_rejoins() {
    let _serial = serial();
    let broker = Broker::start_nisshi(Storage::Sqlite);
    zombie(&broker, "zombiefence", true);
}

fn zombie(broker: &impl Cluster, name: &str, transactions: bool) {
    let mut f = Fixture::new(broker, name);
    f.produce(broker, 40_000);
    let (ca, cb) = (f.config(broker, "a", ""), f.config(broker, "b", ""));
    if transactions {
        for c in [&ca, &cb] {
            with_source(c, "transactions = true");
        }
    }
    let mut a = f.spawn(&ca, "a.log");
    let mut b = f.spawn(&cb, "b.log");
    f.wait_lines("a", 500, Duration::from_secs(60));
    f.wait_lines("b", 500, Duration::from_secs(60));
    // A settled group, then more records, and a stopped while it is busy.
    std::thread::sleep(Duration::from_secs(7));
    let load = f.produce_in_background(broker, 20_000);
    let busy = f.delivered("a").len() + 1_000;
    f.wait_lines("a", busy, Duration::from_secs(60));
    let owned = live_partitions(&f.path("a.log"));
    // Stopped right after a write to its sink: that batch's ids and
    // offsets are on their way, its transaction (if any) still open.
    let sink = f.path("out/a.ndjson");
    let size = || std::fs::metadata(&sink).map(|m| m.len()).unwrap_or(0);
    let (before, waiting) = (size(), Instant::now());
    while size() == before && waiting.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(1));
    }
    // SAFETY: kill(2) on a child we own.
    unsafe { libc_kill(a.id() as i32, 19) };
    let stopped = f.delivered("a").len();
    // Past the session timeout (6 s), and long enough for b to take a's
    // partitions and deliver from them.
    std::thread::sleep(Duration::from_secs(15));
    load.join().unwrap_or_else(|_| panic!("the producer failed"));
    // SAFETY: as above.
    unsafe { libc_kill(a.id() as i32, 18) };
    // a finds its partitions lost, and rejoins: the group gives it some
    // again.
    let continued = Instant::now();
    loop {
        let a_log = std::fs::read_to_string(f.path("a.log")).unwrap_or_default();
        if a_log.find("kind=\"lost\"").is_some_and(|lost| a_log[lost..].contains("kind=\"assigned\"")) {
            break;
        }
        assert!(continued.elapsed() < Duration::from_secs(60), "a did not rejoin within 60 s: {}", f.logs());
        std::thread::sleep(Duration::from_millis(200));
    }
    f.produce(broker, 5_000);
    f.wait_complete(Duration::from_secs(180), &mut [&mut a, &mut b]);
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(terminate(&mut a), 0, "{}", f.logs());
    assert_eq!(terminate(&mut b), 0, "{}", f.logs());
    f.assert_reconciled(&["state-a", "state-b"]);
    f.assert_fully_committed(broker);
    let by_a = f.delivered("a");
    let after_stop: BTreeSet<&str> = by_a[stopped..].iter().map(String::as_str).collect();
    let by_b = f.delivered("b");
    let twice = by_b.iter().filter(|id| after_stop.contains(id.as_str())).count();
    let both = counts(&[by_a.clone(), by_b.clone()].concat()).values().filter(|n| **n > 1).count();
    let a_log = std::fs::read_to_string(f.path("a.log")).unwrap_or_default();
    let fenced: BTreeSet<&str> = a_log
        .lines()
        .filter(|l| l.contains("fenced: another member"))
        .filter_map(|l| log_field(l, "partition"))
        .collect();
    println!(
        "a zombie (SIGSTOP 15 s, session 6 s, transactions {}): {} lines by a ({} after it was continued), {} by b; \
         {both} ids delivered by both, {twice} of them delivered by a after it was stopped; a owned {owned:?} and \
         was fenced on {fenced:?}; 0 lost",
        if transactions { "on" } else { "off" },
        by_a.len(),
        by_a.len() - stopped,
        by_b.len()
    );
    if transactions {
        assert!(!fenced.is_empty(), "a was fenced on none of its partitions: {}", f.logs());
        assert!(fenced.iter().all(|p| owned.contains(*p)), "fenced on {fenced:?}, owned {owned:?}");
        // What both delivered: at most the batch each of a's partitions
        // had between its sink and its commit when a stopped.
        assert!(both <= BATCH * owned.len(), "{both} ids delivered by both");
    } else {
        assert!(!a_log.contains("fenced: another member"), "fenced without transactions");
    }
}

/// `source.transactions` on nisshi (tansu 0.6 cannot end a transaction).
/// Member a is stopped (SIGSTOP) while busy, and each of its partitions'
/// transactional ids is initialised by another producer: what the
/// partition's next owner does first when the group moves it (the zombie
/// test above lets the group do it). When a is
/// continued it is fenced: it stops its partitions, commits nothing more
/// and delivers at most the batch each had in its sink when it stopped.
/// Then b, with a store of its own, takes the group over and finishes:
/// every id, every offset committed by transactions alone. The control
/// (no transactions) shows what a zombie does unfenced.
#[test]
fn with_transactions_a_fenced_member_stops_and_the_next_owner_loses_nothing() {
    let _serial = serial();
    let broker = Broker::start_nisshi(Storage::Sqlite);
    let unfenced = fenced_run(&broker, "fenceoff", false);
    let fenced = fenced_run(&broker, "fence", true);
    println!(
        "a member whose transactional ids were taken over while it was stopped delivered {fenced} lines after it \
         was continued with transactions (bound: one batch per partition, {}), {unfenced} without",
        BATCH * PARTITIONS as usize
    );
}

/// Returns how many lines a delivered after it was continued.
fn fenced_run(broker: &Broker, name: &str, transactions: bool) -> usize {
    let mut f = Fixture::new(broker, name);
    f.produce(broker, 12_000);
    let ca = f.config(broker, "a", "");
    let cb = f.config(broker, "b", "");
    for c in [&ca, &cb] {
        with_source(c, &format!("transactions = {transactions}"));
    }
    let mut a = spawn_saying_commits(&f, &ca, "a.log");
    f.wait_lines("a", 1_500, Duration::from_secs(90));
    // Every partition has committed once: its task holds its
    // transactional id, so the takeover below comes after it (a task
    // still starting would take the id back, as a newer owner does).
    let a_log = f.path("a.log");
    let waiting = Instant::now();
    while !(0..PARTITIONS).all(|p| {
        let name = format!("(\"{}/{p}\"", f.topic);
        std::fs::read_to_string(&a_log)
            .unwrap_or_default()
            .lines()
            .any(|l| l.contains("offsets committed") && l.contains(&name))
    }) {
        assert!(waiting.elapsed() < Duration::from_secs(60), "a has not committed on every partition: {}", f.logs());
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: kill(2) on a child we own.
    unsafe { libc_kill(a.id() as i32, 19) };
    let stopped = f.delivered("a").len();
    // What a sent before it stopped (a commit on its way) is the
    // brokers' to answer first.
    std::thread::sleep(Duration::from_secs(2));
    let before_stop = std::fs::read_to_string(&a_log).unwrap_or_default().lines().count();
    // The next owner's first step, for every partition.
    for p in 0..PARTITIONS {
        let id = format!("{}-txn-{}-{p}", f.group, f.topic);
        let next: rdkafka::producer::BaseProducer = sluice_e2e::kafka::client(&broker.brokers())
            .set("transactional.id", &id)
            .create()
            .unwrap_or_else(|e| panic!("{e}"));
        rdkafka::producer::Producer::init_transactions(&next, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("init {id}: {e}"));
    }
    let at_fence = committed(&broker.brokers(), &f.group, &f.topic, PARTITIONS);
    // SAFETY: as above.
    unsafe { libc_kill(a.id() as i32, 18) };
    let fenced_lines = || {
        std::fs::read_to_string(&a_log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("fenced: another member"))
            .count()
    };
    // Fresh records on every partition: each has a batch to deliver and
    // commit, and so meets the fence (an idle partition would not know
    // until it had work).
    f.produce(broker, 6_000);
    let continued = Instant::now();
    if transactions {
        while fenced_lines() < PARTITIONS as usize {
            assert!(continued.elapsed() < Duration::from_secs(60), "a was not fenced on every partition: {}", f.logs());
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    // What a does now, fenced or not.
    std::thread::sleep(Duration::from_secs(8));
    let after = f.delivered("a").len() - stopped;
    let committed_by_a = committed(&broker.brokers(), &f.group, &f.topic, PARTITIONS);
    assert_eq!(terminate(&mut a), 0, "{}", f.logs());
    if transactions {
        assert!(
            after <= BATCH * PARTITIONS as usize,
            "a delivered {after} lines after it was fenced: more than the batch each partition had in its sink"
        );
        // What a committed once continued, per partition: at most the
        // transaction it had begun before the fence (nisshi 0.7 lets an
        // EndTxn of an old epoch end it; Kafka refuses that too), and
        // nothing after the partition's fence.
        let text = std::fs::read_to_string(&a_log).unwrap_or_default();
        let after_continue: Vec<&str> = text.lines().skip(before_stop).collect();
        for p in 0..PARTITIONS {
            let name = format!("{}/{p}", f.topic);
            let fence = after_continue
                .iter()
                .position(|l| l.contains("fenced: another member") && log_field(l, "partition") == Some(name.as_str()))
                .unwrap_or_else(|| panic!("{name} was not fenced"));
            let commits: Vec<usize> = after_continue
                .iter()
                .enumerate()
                .filter(|(_, l)| l.contains("offsets committed") && l.contains(&format!("(\"{name}\"")))
                .map(|(i, _)| i)
                .collect();
            assert!(
                commits.len() <= 1 && commits.iter().all(|i| *i < fence),
                "{name}: commits after SIGCONT {commits:?}, fenced at {fence}"
            );
        }
        for (p, (now, then)) in committed_by_a.iter().zip(&at_fence).enumerate() {
            let moved = now.unwrap_or(0) - then.unwrap_or(0);
            assert!((0..=BATCH as i64).contains(&moved), "partition {p}: a's commit moved {moved} after the fence");
        }
    } else {
        assert_eq!(fenced_lines(), 0, "without transactions nothing is fenced");
        assert!(after > BATCH * PARTITIONS as usize, "unfenced, a went on delivering: {after} lines");
    }
    // b says how each of its commits was made.
    let mut b = spawn_saying_commits(&f, &cb, "b.log");
    f.wait_complete(Duration::from_secs(120), &mut [&mut b]);
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(terminate(&mut b), 0, "{}", f.logs());
    f.assert_reconciled(&["state-a", "state-b"]);
    f.assert_fully_committed(broker);
    let commits: Vec<String> = std::fs::read_to_string(f.path("b.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("offsets committed"))
        .filter_map(|l| log_field(l, "reason").map(str::to_string))
        .collect();
    if transactions {
        assert!(!commits.is_empty() && commits.iter().all(|r| r == "transaction"), "b's commits: {commits:?}");
    } else {
        assert!(commits.iter().all(|r| r != "transaction"), "b's commits: {commits:?}");
    }
    let twice = delivered_twice(&f);
    println!(
        "{name}: a delivered {stopped} lines before SIGSTOP and {after} after SIGCONT; b {}; {} ids delivered twice; \
         0 lost; every offset committed{}",
        f.delivered("b").len(),
        twice.len(),
        if transactions { " in transactions" } else { "" }
    );
    if transactions {
        assert!(twice.len() <= BATCH * PARTITIONS as usize, "{} ids delivered twice", twice.len());
    }
    after
}

/// A sluice run whose log has a line per offset commit (`offsets
/// committed`, with its reason).
fn spawn_saying_commits(f: &Fixture, config: &Path, log: &str) -> Proc {
    let log = std::fs::File::create(f.path(log)).unwrap_or_else(|e| panic!("{e}"));
    Proc(
        f.command(&["run", "-c", &config.display().to_string()])
            .env("SLUICE_LOG", "info,sluice::telemetry::events=debug")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{e}")),
    )
}

/// tansu 0.6 takes InitProducerId and the rest, but routes no EndTxn: no
/// transaction can end. A run with `source.transactions` stops at its first
/// commit and says what to do, commits nothing, and loses nothing: the run
/// after it, without transactions, delivers and commits every record.
#[test]
fn on_brokers_that_cannot_end_a_transaction_the_run_stops_and_says_so() {
    let _serial = serial();
    let broker = Broker::start(Storage::Sqlite);
    let mut f = Fixture::new(&broker, "noendtxn");
    f.produce(&broker, 2_000);
    let config = f.config(&broker, "a", "");
    with_source(&config, "transactions = true");
    let mut a = f.spawn(&config, "a.log");
    let started = Instant::now();
    let status = loop {
        if let Ok(Some(status)) = a.try_wait() {
            break status;
        }
        assert!(started.elapsed() < Duration::from_secs(90), "still running after 90 s: {}", f.logs());
        std::thread::sleep(Duration::from_millis(200));
    };
    let log = std::fs::read_to_string(f.path("a.log")).unwrap_or_default();
    assert!(!status.success(), "{log}");
    assert!(log.contains("set source.transactions = false") && log.contains("EndTxn"), "{log}");
    assert_eq!(committed(&broker.brokers(), &f.group, &f.topic, PARTITIONS), vec![None; PARTITIONS as usize]);
    let text = std::fs::read_to_string(&config).unwrap_or_default();
    std::fs::write(&config, text.replace("transactions = true", "transactions = false"))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut a = f.spawn(&config, "a.log");
    f.wait_complete(Duration::from_secs(120), &mut [&mut a]);
    // The first run delivered what it could not commit, so every id is
    // there at once; what is owed is the commits. A partition still
    // restoring its ids has committed nothing yet (0.76 s for one on a
    // loaded machine, past a fixed 600 ms wait that once stood here).
    wait_all_committed(&broker, &f, false);
    assert_eq!(terminate(&mut a), 0, "{}", f.logs());
    f.assert_reconciled(&["state-a"]);
    f.assert_fully_committed(&broker);
}

/// Run `config` `cycles` times, each SIGKILLed once it delivered 300 more
/// lines (or all that is left: a kill after the last record still tests
/// the restart at the end of the topic) and a while more, `step` ms apart
/// from one cycle to the next (somewhere inside a batch, a commit, or
/// between them); then once to the end, reconciled and fully committed.
/// The sink's line counts at the kills.
fn kill_loop(broker: &Broker, f: &Fixture, config: &Path, cycles: usize, step: u64) -> Vec<usize> {
    let mut cuts = Vec::new();
    for k in 0..cycles {
        let before = f.delivered("a").len();
        let mut child = f.spawn(config, "a.log");
        f.wait_lines("a", (before + 300).min(f.good.len()), Duration::from_secs(90));
        std::thread::sleep(Duration::from_millis(50 + (k as u64 * step) % 700));
        child.kill().unwrap_or_else(|e| panic!("{e}"));
        let _ = child.wait();
        cuts.push(f.delivered("a").len());
    }
    let mut last = f.spawn(config, "a.log");
    f.wait_complete(Duration::from_secs(180), &mut [&mut last]);
    // Every good id may have been delivered before this last run (the
    // kills came late): it still has the malformed records after the last
    // commit to read again and quarantine, and then their offsets to
    // commit. Done is committed, not delivered.
    let deadline = Instant::now() + Duration::from_secs(90);
    let high = high_watermarks(&broker.brokers(), &f.topic, PARTITIONS);
    while committed(&broker.brokers(), &f.group, &f.topic, PARTITIONS)
        != high.iter().map(|h| Some(*h)).collect::<Vec<_>>()
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(terminate(&mut last), 0, "{}", f.logs());
    f.assert_reconciled(&["state-a"]);
    f.assert_fully_committed(broker);
    cuts
}

#[test]
fn sigkill_loop_loses_nothing_and_every_duplicate_is_explained() {
    let _serial = serial();
    let broker = Broker::start(Storage::Sqlite);
    let mut f = Fixture::new(&broker, "kill");
    f.produce(&broker, 40_000);
    let config = f.config(&broker, "a", "");
    let cycles = 8;
    let cuts = kill_loop(&broker, &f, &config, cycles, 137);
    let ids = f.delivered("a");
    let explained = assert_duplicates_explained(&ids, &cuts);
    println!(
        "SIGKILL loop: {cycles} kills at sink lines {cuts:?}; {} lines, {explained} duplicates, each across a kill; 0 lost",
        ids.len()
    );
}

/// The StatefulSet's claim (deploy/kubernetes): with static membership
/// (`group.instance.id`, the pod's name) a member SIGKILLed and started
/// again takes its partitions back at once; the group does not wait out
/// the session timeout, and nothing is lost.
#[test]
fn a_static_member_restarted_after_sigkill_takes_its_partitions_back_at_once() {
    let _serial = serial();
    let broker = Broker::start(Storage::Sqlite);
    let mut f = Fixture::new(&broker, "static");
    f.produce(&broker, 4_000);
    let session = Duration::from_secs(20);
    let config = |name: &str| {
        let path = f.config(&broker, name, "");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
        let text = text.replace(
            "\"session.timeout.ms\" = 6000",
            &format!("\"session.timeout.ms\" = {}, \"group.instance.id\" = \"member-{name}\"", session.as_millis()),
        );
        assert!(text.contains("group.instance.id"), "the fixture's properties are where this test expects them");
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
        path
    };
    let (config_a, config_b) = (config("a"), config("b"));
    let mut a = f.spawn(&config_a, "a.log");
    let mut b = f.spawn(&config_b, "b.log");
    f.wait_complete(Duration::from_secs(90), &mut [&mut a, &mut b]);
    let before_a = f.delivered("a").len();
    a.kill().unwrap_or_else(|e| panic!("{e}"));
    let _ = a.wait();
    let load = f.produce_in_background(&broker, 4_000);
    let restarted = Instant::now();
    let mut a = f.spawn(&config_a, "a.log");
    load.join().unwrap_or_else(|_| panic!("the producer thread failed"));
    f.wait_complete(Duration::from_secs(60), &mut [&mut a, &mut b]);
    let took = restarted.elapsed();
    assert!(f.delivered("a").len() > before_a, "a took back partitions and delivered from them: {}", f.logs());
    assert!(took < session, "the restarted member's partitions waited {took:?}, the session timeout is {session:?}");
    assert_eq!(terminate(&mut a), 0, "{}", f.logs());
    assert_eq!(terminate(&mut b), 0, "{}", f.logs());
    f.assert_reconciled(&["state-a", "state-b"]);
    f.assert_fully_committed(&broker);
    let again = delivered_twice(&f).len();
    println!(
        "static membership: SIGKILLed member back and its partitions drained {took:?} after its restart (session \
         timeout {session:?}); {again} delivered twice; 0 lost"
    );
}

#[test]
fn a_broker_killed_and_restarted_mid_run_loses_nothing() {
    let _serial = serial();
    let mut broker = Broker::start(Storage::Sqlite);
    let mut f = Fixture::new(&broker, "brokerkill");
    f.produce(&broker, 20_000);
    let mut child = f.spawn(&f.config(&broker, "a", ""), "a.log");
    f.wait_lines("a", 2_000, Duration::from_secs(60));
    broker.kill();
    std::thread::sleep(Duration::from_secs(2));
    broker.restart();
    f.produce(&broker, 5_000);
    f.wait_complete(Duration::from_secs(180), &mut [&mut child]);
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(terminate(&mut child), 0, "{}", f.logs());
    f.assert_reconciled(&["state-a"]);
    f.assert_fully_committed(&broker);
    let ids = f.delivered("a");
    let dups = counts(&ids).values().filter(|n| **n > 1).count();
    assert_eq!(dups, 0, "one process, one dedup store: a broker restart re-reads, dedup absorbs");
    println!("broker SIGKILL + restart mid-run: {} ids delivered once each, 0 lost", ids.len());
}

#[test]
fn replay_from_earliest_delivers_nothing_new_and_is_refused_while_the_group_is_live() {
    let _serial = serial();
    let broker = Broker::start(Storage::Sqlite);
    let mut f = Fixture::new(&broker, "replay");
    f.produce(&broker, 8_000);
    let config = f.config(&broker, "a", "");
    let cfg = config.display().to_string();
    let mut child = f.spawn(&config, "a.log");
    f.wait_complete(Duration::from_secs(120), &mut [&mut child]);
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(terminate(&mut child), 0, "{}", f.logs());
    let first = f.delivered("a");
    // tansu's SQLite storage cannot describe a group (its DescribeGroups
    // fails to decode what it stored), so sluice cannot check for live
    // members here: it refuses, and --force vouches for it. The check
    // itself is tested on the memory storage, below.
    let (code, _, stderr) = f.sluice(&["replay", "-c", &cfg, "--from", "earliest"]);
    assert_ne!(code, 0, "without the live-member check, replay refuses: {stderr}");
    assert!(stderr.contains("--force") || stderr.contains("live member"), "{stderr}");
    let (code, stdout, stderr) = f.sluice(&["replay", "-c", &cfg, "--from", "earliest", "--force"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    for p in 0..PARTITIONS {
        assert!(stdout.contains(&format!("replay-logs/{p}: ")) && stdout.contains("-> 0"), "{stdout}");
    }
    let (code, lag, stderr) = f.sluice(&["lag", "-c", &cfg]);
    assert_eq!(code, 0, "{stderr}");
    let high: i64 = high_watermarks(&broker.brokers(), &f.topic, PARTITIONS).iter().sum();
    assert!(lag.contains(&format!("total lag: {high}")), "after the reset the lag is everything: {lag}");

    let mut again = f.spawn(&config, "a.log");
    let deadline = Instant::now() + Duration::from_secs(120);
    while committed(&broker.brokers(), &f.group, &f.topic, PARTITIONS).iter().flatten().sum::<i64>() < high {
        assert!(Instant::now() < deadline, "the replay did not finish: {}", f.logs());
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(terminate(&mut again), 0, "{}", f.logs());
    let second = f.delivered("a");
    assert_eq!(second.len(), first.len(), "a replay inside the window delivers nothing new");
    f.assert_reconciled(&["state-a"]);
    let (_, lag, _) = f.sluice(&["lag", "-c", &cfg]);
    assert!(lag.contains("total lag: 0"), "{lag}");
    println!("replay from earliest: {high} records read again, 0 delivered again");
}

#[test]
fn check_reads_the_topics_retention_for_the_window_and_warns_when_shorter() {
    let _serial = serial();
    let broker = Broker::start(Storage::Memory);
    let f = Fixture::new(&broker, "retention");
    sluice_e2e::kafka::create_topic_with(&broker.brokers(), "retention-kept", 2, &[("retention.ms", "7200000")]);
    let config = f.config(&broker, "a", "").display().to_string();
    let text = std::fs::read_to_string(&config).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&config, text.replace("retention-logs", "retention-kept")).unwrap_or_else(|e| panic!("{e}"));
    // The fixture sets dedup.window = 1h: shorter than the 2h retention.
    let (code, out, err) = f.sluice(&["check", "-c", &config]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("warning: dedup.window 1h is shorter than the topics' retention 2h"), "{out}");
    // Without a window, the retention is the window.
    let text = std::fs::read_to_string(&config).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&config, text.replace("window = \"1h\"", "")).unwrap_or_else(|e| panic!("{e}"));
    let (code, out, err) = f.sluice(&["check", "-c", &config]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("window 2h (the topics' retention)"), "{out}");
    // The scope in force, and the changelog `run` will create.
    assert!(
        out.contains("scope partition (the default)") && out.contains("dedup.scope = \"topic\" catches it"),
        "{out}"
    );
    assert!(
        out.contains("changelog \"retention-group-dedup-changelog\" does not exist: `sluice run` creates it (2 partitions, retention 4h"),
        "{out}"
    );
    println!("sluice check on a topic kept 2h:\n{out}");
    // An existing changelog that keeps less than the window is a warning.
    sluice_e2e::kafka::create_topic_with(
        &broker.brokers(),
        "retention-group-dedup-changelog",
        2,
        &[("retention.ms", "60000")],
    );
    let (code, out, err) = f.sluice(&["check", "-c", &config]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("warning: dedup changelog \"retention-group-dedup-changelog\": its retention 1m is shorter than the dedup window 2h"),
        "{out}"
    );
}

#[test]
fn check_connect_probes_the_brokers_and_the_sink_and_exits_3_naming_what_failed() {
    let _serial = serial();
    let broker = Broker::start(Storage::Memory);
    let f = Fixture::new(&broker, "connect");
    sluice_e2e::kafka::create_topic(&broker.brokers(), "connect-out", 2);
    let config = f.config(&broker, "a", "").display().to_string();
    let text = std::fs::read_to_string(&config).unwrap_or_else(|e| panic!("{e}"));
    let kafka_sink = text.replace(
        "type = \"file\"\npath = \"out/a.ndjson\"",
        &format!("type = \"kafka\"\nbrokers = \"{}\"\ntopic = \"connect-out\"", broker.brokers()),
    );
    assert_ne!(kafka_sink, text, "the fixture's sink is where this test expects it");
    std::fs::write(&config, &kafka_sink).unwrap_or_else(|e| panic!("{e}"));
    let (code, out, err) = f.sluice(&["check", "-c", &config, "--connect"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("connect: source brokers {}: ok (", broker.brokers())), "{out}");
    assert!(out.contains("connect-logs (1 topic)"), "{out}");
    assert!(out.contains("topic \"connect-out\" has 2 partitions"), "{out}");
    println!("sluice check --connect:\n{out}");
    // A source topic the brokers do not hold (its own state: a store
    // belongs to one pipeline's sources).
    let nowhere = kafka_sink.replace("topics = [\"connect-logs\"]", "topics = [\"nowhere\"]");
    std::fs::write(&config, nowhere.replace("state-a", "state-b")).unwrap_or_else(|e| panic!("{e}"));
    let (code, out, err) = f.sluice(&["check", "-c", &config, "--connect"]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(out.contains("FAILED (kafka: source topic \"nowhere\" does not exist on the brokers)"), "{out}");
    // Brokers nobody listens on: both probes fail, both are named.
    let closed = format!("127.0.0.1:{}", sluice_e2e::kafka::free_port());
    std::fs::write(&config, kafka_sink.replace(&broker.brokers(), &closed)).unwrap_or_else(|e| panic!("{e}"));
    let (code, out, err) = f.sluice(&["check", "-c", &config, "--connect"]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(err.contains("2 of its dependencies cannot be reached"), "{err}");
    assert!(out.contains(&format!("connect: source brokers {closed}: FAILED")), "{out}");
    assert!(out.contains("connect: sink kafka") && out.matches(": FAILED (").count() == 2, "{out}");
}

#[test]
fn replay_is_refused_while_the_group_has_a_live_member() {
    let _serial = serial();
    // The memory storage describes groups; no records are read here, so
    // its fetch defect (a fetch from inside a record batch skips the
    // batch) cannot matter.
    let broker = Broker::start(Storage::Memory);
    let f = Fixture::new(&broker, "live");
    let config = f.config(&broker, "a", "");
    let cfg = config.display().to_string();
    let mut child = f.spawn(&config, "a.log");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (code, _, stderr) = f.sluice(&["replay", "-c", &cfg, "--from", "earliest"]);
        if stderr.contains("1 live member") {
            assert_ne!(code, 0);
            break;
        }
        assert!(Instant::now() < deadline, "replay was never refused: {stderr}; {}", f.logs());
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(terminate(&mut child), 0, "{}", f.logs());
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

#[test]
fn a_slow_stage_stops_fetching_at_the_queue_bound_and_memory_stays_bounded() {
    let _serial = serial();
    let broker = Broker::start(Storage::Sqlite);
    let f = Fixture::new(&broker, "slow");
    // 20,000 records of 2 KiB (40 MiB) that a deliberately slow plugin
    // takes 20 ms each to refuse.
    let pad = "p".repeat(2048);
    let records: Vec<(i32, String, String)> =
        (0..20_000).map(|i| (i % PARTITIONS, format!("k{i}"), format!("POISON {i} {pad}"))).collect();
    // Batches of 64 KiB (about 31 records), so one fetch response is as
    // large as the broker makes it, not one producer batch of 1 MB.
    produce_with(&broker.brokers(), &f.topic, &records, &[("batch.size", "65536")]);
    let port = free_port();
    let cfg = format!(
        r#"
[pipeline]
name = "slow"
state_dir = "state-a"
batch_size = 20

[source]
type = "kafka"
brokers = "{brokers}"
topics = ["{topic}"]
group_id = "{group}"
queue_records = 50
properties = {{ "session.timeout.ms" = 6000, "queued.max.messages.kbytes" = 1024, "max.partition.fetch.bytes" = 65536 }}

[[plugins]]
name = "slow"
path = "{hostile}"
time_limit = "20ms"
config = {{ attack = "infinite-loop" }}

[sink]
type = "file"
path = "out/a.ndjson"

[metrics]
listen = "127.0.0.1:{port}"
"#,
        brokers = broker.brokers(),
        topic = f.topic,
        group = f.group,
        hostile = plugin("hostile").display(),
    );
    let config = f.path("slow.toml");
    std::fs::write(&config, cfg).unwrap_or_else(|e| panic!("{e}"));
    let mut child = f.spawn(&config, "a.log");
    let started = Instant::now();
    // librdkafka's queue of each partition, from its statistics.
    let mut max_prefetched = 0f64;
    // RSS once records flow (the plugin compiled, the consumer fetching):
    // the baseline the queue bound is measured against.
    let mut first = None;
    let mut peak = 0;
    let mut last = String::new();
    let records_in = |text: &str| -> f64 {
        metric_lines(text, &["sluice_records_in_total{"])
            .iter()
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    while started.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(500));
        if let Ok(Some(status)) = child.try_wait() {
            panic!("sluice exited during the slow stage ({status}); {}", f.logs());
        }
        let text = scrape(port);
        for l in metric_lines(&text, &["sluice_partition_prefetched_records{"]) {
            max_prefetched = max_prefetched.max(l.rsplit(' ').next().and_then(|v| v.parse().ok()).unwrap_or(0.0));
        }
        let rss = rss_kib(child.id());
        if first.is_none() && records_in(&text) > 0.0 {
            first = Some(rss);
        }
        peak = peak.max(rss);
        last = text;
    }
    let done = records_in(&last);
    let code = terminate(&mut child);
    let first = first.unwrap_or_else(|| panic!("no record processed in 15 s; {}", f.logs()));
    println!(
        "slow stage: {done} of 20000 records processed in 15 s; at most {max_prefetched} records in a partition's \
         librdkafka queue (queue_records 50); RSS {first} KiB once records flowed, peak {peak} KiB; exit {code}"
    );
    assert_eq!(code, 0, "{}", f.logs());
    assert!(done < 10_000.0, "the stage was slow: most records still in Kafka ({done} processed)");
    // The queue fills to its bound (fetching stops there, not earlier) and
    // overshoots it by at most one fetch response: tansu answers with about
    // 1 MiB (some 490 of these records) whatever max.partition.fetch.bytes
    // asks, in whole producer batches (so one more batch at most, which
    // the 64 KiB batches above keep to some 31 records), so the bound is
    // queue_records + 1 MiB, not + 64 KiB.
    assert!(max_prefetched >= 50.0, "a partition's queue reached queue_records: {max_prefetched}");
    assert!(max_prefetched <= 50.0 + 512.0, "prefetch bounded by queue_records + one fetch: {max_prefetched}");
    assert!(peak < first + 48 * 1024, "memory stays bounded while 40 MiB wait in Kafka: {first} -> {peak} KiB");
}

/// Dedup buckets expire while a Kafka pipeline runs, not only at its start
/// (a long run must not grow its state store without bound). An 8 s window
/// has 1 s buckets; after the window has passed the first round's bucket,
/// the same process drops it, and a second round still reconciles.
#[test]
fn a_long_run_drops_expired_dedup_buckets_without_a_restart() {
    let _serial = serial();
    let broker = Broker::start(Storage::Sqlite);
    let mut f = Fixture::new(&broker, "expiry");
    f.produce(&broker, 2_000);
    let port = free_port();
    let config = f.config(&broker, "a", &format!("[metrics]\nlisten = \"127.0.0.1:{port}\""));
    let log = std::fs::File::create(f.path("a.log")).unwrap_or_else(|e| panic!("{e}"));
    let mut child = Proc(
        f.command(&["run", "-c", &config.display().to_string()])
            .env("SLUICE__DEDUP__WINDOW", "8s")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{e}")),
    );
    f.wait_complete(Duration::from_secs(120), &mut [&mut child]);
    let dropped = |text: &str| -> f64 {
        metric_lines(text, &["sluice_dedup_buckets_dropped_total"])
            .iter()
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let before = dropped(&scrape(port));
    // Past the window and the bucket's end, with the process still running.
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut text = scrape(port);
    while dropped(&text) <= before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
        text = scrape(port);
    }
    f.produce(&broker, 1_000);
    f.wait_complete(Duration::from_secs(120), &mut [&mut child]);
    assert_eq!(terminate(&mut child), 0, "{}", f.logs());
    f.assert_reconciled(&["state-a"]);
    let logs = std::fs::read_to_string(f.path("a.log")).unwrap_or_default();
    println!(
        "expiry: buckets dropped during the run {} (at the first round's end {before}); {}",
        dropped(&text),
        metric_lines(&text, &["sluice_dedup_buckets "]).join(" ")
    );
    assert!(dropped(&text) > before, "a bucket past the window was dropped without a restart; {}", f.logs());
    assert!(logs.contains("dedup buckets past the window dropped"), "the log says so too");
}

/// Add `scope = "topic"` (or any line) to a config's `[dedup]` table.
fn with_dedup(config: &Path, line: &str) {
    let text = std::fs::read_to_string(config).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(config, text.replace("[dedup]\n", &format!("[dedup]\n{line}\n"))).unwrap_or_else(|e| panic!("{e}"));
}

/// Ids delivered more than once across every sink file.
fn delivered_twice(f: &Fixture) -> Vec<String> {
    counts(&f.delivered("")).into_iter().filter(|(_, n)| *n > 1).map(|(id, _)| id.to_string()).collect()
}

// Three members on the mock cluster (tansu does not evict a SIGKILLed
// member), each SIGKILLed and restarted in turn while records keep coming:
// a crash-restart of every instance, one at a time. Each kill may repeat
// what the victim's partitions had between the sink and the changelog, at
// most one batch each; everything else follows the partitions.
#[test]
fn a_rolling_restart_of_three_members_under_load_repeats_at_most_a_batch_per_partition_moved() {
    let _serial = serial();
    let broker = rdkafka::mocking::MockCluster::new(1).unwrap_or_else(|e| panic!("{e}"));
    let mut f = Fixture::new(&broker, "roll");
    f.produce(&broker, 20_000);
    let names = ["a", "b", "c"];
    let configs: Vec<PathBuf> = names
        .iter()
        .map(|n| {
            let c = f.config(&broker, n, "");
            let text = std::fs::read_to_string(&c).unwrap_or_else(|e| panic!("{e}"));
            let text = text.replace("commit_interval = \"200ms\"", &format!("commit_interval = \"{COMMIT_SLOWLY}\""));
            std::fs::write(&c, text).unwrap_or_else(|e| panic!("{e}"));
            c
        })
        .collect();
    let mut procs: Vec<Proc> = names.iter().zip(&configs).map(|(n, c)| f.spawn(c, &format!("{n}.log"))).collect();
    for n in names {
        f.wait_lines(n, 200, Duration::from_secs(60));
    }
    std::thread::sleep(Duration::from_secs(7));
    let mut owned_at_kill = Vec::new();
    for (i, n) in names.iter().enumerate() {
        // Load: the members are busy with these when the victim dies.
        let load = f.produce_in_background(&broker, 20_000);
        let before = f.delivered(n).len();
        f.wait_lines(n, before + 1_000, Duration::from_secs(60));
        procs[i].kill().unwrap_or_else(|e| panic!("{e}"));
        let _ = procs[i].wait();
        load.join().unwrap_or_else(|_| panic!("the producer failed"));
        let log = f.path(&format!("{n}.log"));
        owned_at_kill.push(live_partitions(&log));
        let assigned_before = assignments(&log);
        procs[i] = f.spawn(&configs[i], &format!("{n}.log"));
        // Back in the group with partitions (after the mock evicts the
        // dead member) before the next one goes.
        let deadline = Instant::now() + Duration::from_secs(90);
        while assignments(&log) == assigned_before {
            assert!(Instant::now() < deadline, "{n} got no partition back after its restart: {}", f.logs());
            std::thread::sleep(Duration::from_millis(300));
        }
        std::thread::sleep(Duration::from_secs(3));
    }
    {
        let mut running: Vec<&mut Proc> = procs.iter_mut().collect();
        f.wait_complete(Duration::from_secs(180), &mut running);
    }
    std::thread::sleep(Duration::from_millis(600));
    for p in &mut procs {
        assert_eq!(terminate(p), 0, "{}", f.logs());
    }
    f.assert_reconciled(&["state-a", "state-b", "state-c"]);
    f.assert_fully_committed(&broker);
    let twice = delivered_twice(&f);
    let bound: usize = owned_at_kill.iter().map(|p| p.len() * BATCH).sum();
    println!(
        "rolling SIGKILL restart of 3 members under load: {} lines, {} ids delivered twice (bound {bound}: one batch \
         per partition each victim owned, {owned_at_kill:?}), 0 lost",
        f.delivered("").len(),
        twice.len()
    );
    assert!(twice.len() <= bound, "{} ids delivered twice, over the bound {bound}: {:?}", twice.len(), &twice[..5]);
}

/// How many partition assignments a member's log shows.
fn assignments(log: &Path) -> usize {
    std::fs::read_to_string(log).unwrap_or_default().matches("kind=\"assigned\"").count()
}

/// The partitions a member owns as its log tells (assigned and not since
/// revoked or lost), in the order of the log.
fn live_partitions(log: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut live = BTreeSet::new();
    for l in text.lines().filter(|l| l.contains(" rebalance ")) {
        let (Some(p), Some(kind)) = (log_field(l, "partition"), log_field(l, "kind")) else { continue };
        if kind == "assigned" {
            live.insert(p.to_string());
        } else {
            live.remove(p);
        }
    }
    live
}

/// Records whose ids repeat: every tenth good id is sent a second time, on
/// another partition and under another key (a producer's re-send of the
/// same business event as a new message).
fn resent(f: &mut Fixture, from: usize, n: usize, ts: &str) -> Vec<(i32, String, String)> {
    let mut records = Vec::new();
    for i in from..from + n {
        let p = (i % PARTITIONS as usize) as i32;
        let id = format!("ev-{i:07}");
        let line = format!("{{\"event_id\":\"{id}\",\"ts\":\"{ts}\",\"n\":{i}}}");
        records.push((p, id.clone(), line.clone()));
        if i % 10 == 3 {
            let other = (p + 1 + (i / 10 % 3) as i32) % PARTITIONS;
            records.push((other, format!("resend-{i}"), line));
        }
        f.good.insert(id);
    }
    records
}

fn rfc3339_now() -> String {
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    sluice_guest::time::format_rfc3339(now * 1_000_000_000)
}

#[test]
fn with_the_topic_scope_an_id_resent_on_another_partition_is_delivered_once() {
    let _serial = serial();
    let broker = Broker::start(Storage::Sqlite);
    let ts = rfc3339_now();
    // The control: under the partition scope the re-sends pass.
    let mut control = Fixture::new(&broker, "partscope");
    let records = resent(&mut control, 0, 4_000, &ts);
    produce(&broker.brokers(), &control.topic, &records);
    let config = control.config(&broker, "a", "");
    let mut child = control.spawn(&config, "a.log");
    control.wait_complete(Duration::from_secs(120), &mut [&mut child]);
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(terminate(&mut child), 0, "{}", control.logs());
    let passed = delivered_twice(&control).len();
    assert_eq!(passed, 400, "under the partition scope every re-send on another partition is delivered again");

    let mut f = Fixture::new(&broker, "topicscope");
    let records = resent(&mut f, 0, 10_000, &ts);
    produce(&broker.brokers(), &f.topic, &records);
    let (ca, cb) = (f.config(&broker, "a", ""), f.config(&broker, "b", ""));
    with_dedup(&ca, "scope = \"topic\"");
    with_dedup(&cb, "scope = \"topic\"");
    // One instance: its partitions claim their ids in flight, so a copy
    // read at the same moment on another partition is caught too.
    let mut a = f.spawn(&ca, "a.log");
    f.wait_complete(Duration::from_secs(120), &mut [&mut a]);
    let one = delivered_twice(&f);
    assert!(one.is_empty(), "one instance, topic scope: {} ids delivered twice: {:?}", one.len(), &one[..5]);
    // Two instances: b follows the whole changelog before its first batch,
    // then re-sends of ids a delivered land on partitions of both.
    let mut b = f.spawn(&cb, "b.log");
    let deadline = Instant::now() + Duration::from_secs(90);
    while assigned_partitions(&f.path("b.log")).is_empty() || !f.logged("dedup state restored") {
        assert!(Instant::now() < deadline, "b never got partitions: {}", f.logs());
        std::thread::sleep(Duration::from_millis(300));
    }
    std::thread::sleep(Duration::from_secs(5));
    let mut again = Vec::new();
    for i in (0..10_000).filter(|i| i % 10 == 7) {
        let id = format!("ev-{i:07}");
        let p = ((i * 7 + 1) % PARTITIONS as usize) as i32;
        again.push((p, format!("late-{i}"), format!("{{\"event_id\":\"{id}\",\"ts\":\"{ts}\",\"n\":{i}}}")));
    }
    let fresh = resent(&mut f, 10_000, 2_000, &ts);
    again.extend(fresh);
    produce(&broker.brokers(), &f.topic, &again);
    let high: i64 = high_watermarks(&broker.brokers(), &f.topic, PARTITIONS).iter().sum();
    let deadline = Instant::now() + Duration::from_secs(120);
    while committed(&broker.brokers(), &f.group, &f.topic, PARTITIONS).iter().flatten().sum::<i64>() < high {
        assert!(Instant::now() < deadline, "the re-sends were not all consumed: {}", f.logs());
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(terminate(&mut a), 0, "{}", f.logs());
    assert_eq!(terminate(&mut b), 0, "{}", f.logs());
    f.assert_reconciled(&["state-a", "state-b"]);
    let twice = delivered_twice(&f);
    let by_b = f.delivered("b").len();
    // Across instances the bound is the follower's lag: a copy read on b's
    // partition within some tens of milliseconds of its original on a's
    // passes again. The new ids' in-stream copies (produced together with
    // their originals) are that case; the late re-sends are not.
    let concurrent: BTreeSet<String> = (10_000..12_000).filter(|i| i % 10 == 3).map(|i| format!("ev-{i:07}")).collect();
    let late: Vec<&String> = twice.iter().filter(|id| !concurrent.contains(*id)).collect();
    println!(
        "topic scope: partition scope let {passed} of 400 re-sends through; topic scope, one instance: 0 of 1000; \
         two instances ({by_b} lines by b): {} of 1000 late re-sends passed, and {} of 200 copies sent together with \
         their originals (inside the follower's lag)",
        late.len(),
        twice.len() - late.len()
    );
    assert!(by_b > 0, "b took partitions and delivered: {}", f.logs());
    assert!(late.is_empty(), "two instances, topic scope: {} late re-sends delivered twice: {late:?}", late.len());
}

/// `dedup.repartition`: the scenario above where the topic scope is only
/// as exact as the follower's lag (copies produced together with their
/// originals on other partitions, read by two instances at once). Every
/// event goes through `<group>-by-id`, keyed by its id, so the copies of
/// an id meet on one partition there, decided by one member: none passes.
/// The control, the plain topic scope, lets some through.
#[test]
fn with_repartitioning_copies_read_on_two_instances_at_once_are_delivered_once() {
    let _serial = serial();
    let broker = Broker::start(Storage::Sqlite);
    let (followed, followed_late) = two_instances_at_once(&broker, "followed", "scope = \"topic\"");
    assert!(followed > 0, "the control: under the plain topic scope some copies read together pass");
    let (together, late) = two_instances_at_once(&broker, "byid", "scope = \"topic\"\nrepartition = true");
    assert_eq!((together, late), (0, 0), "repartitioned: no copy passes");
    println!(
        "two instances reading copies together with their originals: ids delivered twice under the topic scope \
         {followed} of 1,200 (and {followed_late} of 1,000 late copies); repartitioned 0 (and 0)"
    );
}

/// Copies of 1,200 ids produced together with their originals (on other
/// partitions) and 1,000 late copies, read by two instances started at
/// once; reconciled by id. The ids delivered twice: those produced
/// together, and the late ones.
fn two_instances_at_once(broker: &Broker, name: &str, dedup: &str) -> (usize, usize) {
    let ts = rfc3339_now();
    let mut f = Fixture::new(broker, name);
    let records = resent(&mut f, 0, 10_000, &ts);
    produce(&broker.brokers(), &f.topic, &records);
    let (ca, cb) = (f.config(broker, "a", ""), f.config(broker, "b", ""));
    for c in [&ca, &cb] {
        with_dedup(c, dedup);
    }
    // Both at once: each front reads some partitions from the start, so an
    // original and its copy are read on different instances together.
    let mut a = f.spawn(&ca, "a.log");
    let mut b = f.spawn(&cb, "b.log");
    f.wait_complete(Duration::from_secs(120), &mut [&mut a, &mut b]);
    // Then copies of ids delivered by then, and new ids with their own.
    let mut again = Vec::new();
    for i in (0..10_000).filter(|i| i % 10 == 7) {
        let id = format!("ev-{i:07}");
        let p = ((i * 7 + 1) % PARTITIONS as usize) as i32;
        again.push((p, format!("late-{i}"), format!("{{\"event_id\":\"{id}\",\"ts\":\"{ts}\",\"n\":{i}}}")));
    }
    again.extend(resent(&mut f, 10_000, 2_000, &ts));
    produce(&broker.brokers(), &f.topic, &again);
    f.wait_complete(Duration::from_secs(120), &mut [&mut a, &mut b]);
    let repartitioned = dedup.contains("repartition");
    wait_all_committed(broker, &f, repartitioned);
    assert_eq!(terminate(&mut a), 0, "{}", f.logs());
    assert_eq!(terminate(&mut b), 0, "{}", f.logs());
    f.assert_reconciled(&["state-a", "state-b"]);
    f.assert_fully_committed(broker);
    let twice = delivered_twice(&f);
    let (by_a, by_b) = (f.delivered("a").len(), f.delivered("b").len());
    let together = twice.iter().filter(|id| id[3..].parse::<usize>().is_ok_and(|i| i % 10 == 3)).count();
    println!(
        "{name} ({dedup:?}), two instances: {together} of 1,200 copies produced together with their originals and \
         {} of 1,000 late copies delivered twice; a delivered {by_a} lines, b {by_b}; 0 lost",
        twice.len() - together
    );
    assert!(by_a > 0 && by_b > 0, "both instances delivered (a {by_a}, b {by_b}): {}", f.logs());
    if repartitioned {
        assert!(twice.is_empty(), "{} ids delivered twice: {:?}", twice.len(), &twice[..twice.len().min(5)]);
    }
    (together, twice.len() - together)
}

/// Wait until the source's group has committed every record, and the
/// back's group (`repartitioned`) every record of the internal topic.
fn wait_all_committed(broker: &Broker, f: &Fixture, repartitioned: bool) {
    let internal = format!("{}-by-id", f.group);
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let source: i64 = high_watermarks(&broker.brokers(), &f.topic, PARTITIONS).iter().sum();
        let front: i64 = committed(&broker.brokers(), &f.group, &f.topic, PARTITIONS).iter().flatten().sum();
        let (high, back) = if repartitioned {
            (
                high_watermarks(&broker.brokers(), &internal, PARTITIONS).iter().sum(),
                committed(&broker.brokers(), &internal, &internal, PARTITIONS).iter().flatten().sum(),
            )
        } else {
            (0, 0)
        };
        if back == high && front == source {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not all committed: back {back}/{high}, front {front}/{source}: {}",
            f.logs()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// 200 records three days old (the ts-window's max_age 1d quarantines
/// them), produced to the fixture's topic; ids `late-0000`…
fn produce_late(broker: &Broker, f: &Fixture) -> Vec<(i32, String, String)> {
    let old = sluice_e2e::now_rfc3339(-3 * 86_400);
    let late: Vec<(i32, String, String)> = (0..200)
        .map(|i| {
            let id = format!("late-{i:04}");
            (i % PARTITIONS, id.clone(), format!("{{\"event_id\":\"{id}\",\"ts\":\"{old}\",\"n\":{i}}}"))
        })
        .collect();
    produce(&broker.brokers(), &f.topic, &late);
    late
}

/// `quarantine replay` of a repartitioned pipeline: what its front
/// quarantined (here records the ts-window found too old) replays through
/// the front again, into the internal topic, so the back decides those
/// ids like any other: another instance's back delivers each replayed
/// record once and absorbs a copy of it sent later.
#[test]
fn a_repartitioned_replay_goes_through_the_back_and_absorbs_later_copies() {
    let _serial = serial();
    let broker = Broker::start(Storage::Sqlite);
    let mut f = Fixture::new(&broker, "byidreplay");
    let late = produce_late(&broker, &f);
    f.produce(&broker, 2_000);
    let config = |name: &str, max_age: &str| {
        let config = f.config(&broker, name, "");
        with_dedup(&config, "scope = \"topic\"\nrepartition = true");
        let text = std::fs::read_to_string(&config)
            .unwrap_or_default()
            .replace("max_age = \"1d\"", &format!("max_age = \"{max_age}\""));
        std::fs::write(&config, text).unwrap_or_else(|e| panic!("{e}"));
        config
    };
    let mut a = f.spawn(&config("a", "1d"), "a.log");
    f.wait_complete(Duration::from_secs(120), &mut [&mut a]);
    wait_all_committed(&broker, &f, true);
    assert_eq!(terminate(&mut a), 0, "{}", f.logs());
    let late_ids = |prefix: &str| f.delivered(prefix).into_iter().filter(|id| id.starts_with("late-")).count();
    assert_eq!(late_ids(""), 0, "the ts-window quarantined the late records");
    // The repair: a window wide enough, for the replay and from now on.
    let wide = config("a", "30d");
    let (code, stdout, stderr) =
        f.sluice(&["quarantine", "replay", "-c", &wide.display().to_string(), "--summary", "json"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stderr.contains("\"delivered\":200") || stdout.contains("\"delivered\":200"), "{stdout}{stderr}");
    assert_eq!(late_ids(""), 0, "the replay produced to the internal topic, not to the sink");
    // Another instance, its own store, takes every partition of both
    // groups; a copy of each late record is sent after the replay.
    produce(&broker.brokers(), &f.topic, &late);
    let mut b = f.spawn(&config("b", "30d"), "b.log");
    wait_all_committed(&broker, &f, true);
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(terminate(&mut b), 0, "{}", f.logs());
    let twice: Vec<String> = delivered_twice(&f).into_iter().filter(|id| id.starts_with("late-")).collect();
    println!(
        "repartitioned replay: 200 entries into the internal topic; b's back delivered {} late records and {} twice",
        late_ids("b"),
        twice.len()
    );
    assert_eq!(late_ids("b"), 200, "b's back delivered each replayed record: {}", f.logs());
    assert!(twice.is_empty(), "copies of replayed records delivered again: {twice:?}");
}

/// A repartitioned run SIGKILLed again and again, anywhere (in its front's
/// batch or produce, its back's delivery, a commit of either): nothing is
/// lost, and every id delivered twice was delivered on both sides of a
/// kill.
#[test]
fn a_repartitioned_run_killed_anywhere_loses_nothing() {
    let _serial = serial();
    let broker = Broker::start(Storage::Sqlite);
    let mut f = Fixture::new(&broker, "byidkill");
    f.produce(&broker, 20_000);
    let config = f.config(&broker, "a", "");
    with_dedup(&config, "scope = \"topic\"\nrepartition = true");
    let cycles = 4;
    let cuts = kill_loop(&broker, &f, &config, cycles, 211);
    let ids = f.delivered("a");
    let explained = assert_duplicates_explained(&ids, &cuts);
    // The audit finds each id's delivery to the sink, by the back.
    let sample: Vec<String> = f.good.iter().step_by(997).cloned().collect();
    let out = f
        .command(&["audit", "-c", &config.display().to_string(), "--json"])
        .args(&sample)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(0), "audit: {}", String::from_utf8_lossy(&out.stderr));
    let internal = format!("{}-by-id/", f.group);
    let answers: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert_eq!(answers.len(), sample.len(), "one answer per id");
    // An id the restart restored from the changelog keeps no trail.
    let mut trails = 0;
    for a in &answers {
        assert_eq!(a["verdict"], "delivered", "{a}");
        if let Some(sink) = a["delivered"]["sink"].as_str() {
            assert!(sink.contains("a.ndjson"), "the delivery is the back's, to the sink: {a}");
            assert!(a["delivered"]["source"]["name"].as_str().is_some_and(|s| s.starts_with(&internal)), "{a}");
            trails += 1;
        }
    }
    assert!(trails > 0, "some deliveries keep their trail: {answers:?}");
    println!(
        "repartitioned SIGKILL loop: {cycles} kills at sink lines {cuts:?}; {} lines, {explained} duplicates, each \
         across a kill; 0 lost",
        ids.len()
    );
}

#[test]
fn a_lost_changelog_stops_the_partition_or_with_accept_duplicates_runs_and_counts() {
    let _serial = serial();
    // The memory storage: tansu 0.6's SQLite DeleteTopics deletes every
    // topic of the cluster (its topic_delete_by.sql filters by cluster
    // only). Both runs here start at a batch boundary (the first at 0, the
    // second where the first committed everything), so the memory
    // storage's fetch defect cannot skip records.
    let broker = Broker::start(Storage::Memory);
    let mut f = Fixture::new(&broker, "lost");
    let config = f.run_to_the_end(&broker, 4_000);
    let changelog = format!("{}-dedup-changelog", f.group);
    sluice_e2e::kafka::delete_topic(&broker.brokers(), &changelog);
    f.produce(&broker, 1_000);
    let before = f.delivered("a").len();
    // The store read that changelog: without it the run refuses to start.
    let (code, _, stderr) = f.sluice(&["run", "-c", &config.display().to_string()]);
    assert_ne!(code, 0, "{stderr}");
    assert!(
        stderr.contains(&format!("dedup changelog {changelog} does not exist")) && stderr.contains("accept-duplicates"),
        "{stderr}"
    );
    assert_eq!(f.delivered("a").len(), before, "nothing delivered without the ids");
    // The operator accepts duplicates: it runs, and counts what it could
    // not check.
    let port = free_port();
    let config = f.config(&broker, "a", &format!("[metrics]\nlisten = \"127.0.0.1:{port}\""));
    with_dedup(&config, "on_missing_state = \"accept-duplicates\"");
    let mut child = f.spawn(&config, "a.log");
    f.wait_complete(Duration::from_secs(120), &mut [&mut child]);
    let unchecked: f64 = metric_lines(&scrape(port), &["sluice_dedup_unchecked_records_total{"])
        .iter()
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(terminate(&mut child), 0, "{}", f.logs());
    f.assert_reconciled(&["state-a"]);
    let logs = f.logs();
    println!(
        "lost changelog: refused with\n  {}\nthen ran with accept-duplicates: {unchecked} records unchecked",
        stderr.trim()
    );
    assert!(unchecked >= 1_000.0 * 0.9, "the records read after the loss are counted unchecked: {unchecked}; {logs}");
    assert!(f.logged("running anyway"), "{logs}");
}

/// A store lost with its machine is rebuilt from the changelog when the
/// partitions are assigned: on a terminal (script(1) gives it one) each
/// partition's restore draws a bar, the log lines written between its
/// draws; with stderr in a file, nothing but the log.
#[test]
fn a_changelog_restore_shows_progress_on_a_terminal_and_nothing_in_a_pipe() {
    let _serial = serial();
    let broker = Broker::start(Storage::Memory);
    let mut f = Fixture::new(&broker, "restorebar");
    let config = f.run_to_the_end(&broker, 4_000);
    let restores = |text: &str| text.matches("dedup state restored").count();
    let wait_restored = |file: &str| {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let text = String::from_utf8_lossy(&std::fs::read(f.path(file)).unwrap_or_default()).into_owned();
            if restores(&text) >= PARTITIONS as usize {
                return;
            }
            assert!(Instant::now() < deadline, "no restore of every partition within 90 s: {text}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    // The store is lost: the next start reads every partition's ids back.
    std::fs::remove_dir_all(f.path("state-a")).unwrap_or_else(|e| panic!("{e}"));
    let mut child = f.spawn(&config, "piped.log");
    wait_restored("piped.log");
    assert_eq!(terminate(&mut child), 0, "{}", f.logs());
    let piped = std::fs::read_to_string(f.path("piped.log")).unwrap_or_default();
    assert!(restored_ids(&f.path("piped.log")) > 0, "ids came back from the changelog: {piped}");
    assert!(!piped.contains("changelog offsets (") && !piped.contains('\r'), "no bar in a file: {piped}");
    // Again, on a terminal. script(1) runs sluice in the background to
    // learn its pid, and writes what the terminal shows to tty.out.
    std::fs::remove_dir_all(f.path("state-a")).unwrap_or_else(|e| panic!("{e}"));
    let pid = f.path("tty.pid");
    let line = format!("{} run -c {} & echo $! > {}; wait", sluice_bin!().display(), config.display(), pid.display());
    let shown = std::fs::File::create(f.path("tty.out")).unwrap_or_else(|e| panic!("{e}"));
    let mut tty = Proc(
        Command::new("script")
            .args(["-qec", &line, "/dev/null"])
            .current_dir(f.dir.path())
            .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
            .env("SLUICE_LOG", "info")
            .stdin(Stdio::null())
            .stdout(shown)
            .spawn()
            .unwrap_or_else(|e| panic!("{e}")),
    );
    wait_restored("tty.out");
    let pid: i32 = std::fs::read_to_string(&pid).unwrap_or_default().trim().parse().unwrap_or_else(|e| panic!("{e}"));
    // SAFETY: kill(2) on the sluice process script(1) started for us.
    unsafe { libc_kill(pid, 15) };
    let status = tty.wait().unwrap_or_else(|e| panic!("{e}"));
    let shown = String::from_utf8_lossy(&std::fs::read(f.path("tty.out")).unwrap_or_default()).into_owned();
    assert!(status.success(), "{shown}");
    assert!(
        shown.contains("restoring ") && shown.contains("changelog offsets ("),
        "a bar on the terminal while the ids are restored: {shown:?}"
    );
    assert!(restores(&shown) >= PARTITIONS as usize, "the log lines between the draws: {shown:?}");
    let bar = shown.split(['\r', '\n']).rfind(|l| l.contains("changelog offsets (")).unwrap_or_default();
    println!("a restore on a terminal: {bar:?}");
}

/// `/ready` answers 503 from a partition's assignment until its ids are
/// back from the changelog, and 200 only once every assigned partition's
/// are. A fault proxy delays each of the broker's answers, so that the
/// restore takes seconds.
#[test]
fn ready_waits_until_every_assigned_partition_has_restored_its_ids() {
    let _serial = serial();
    let (broker, proxy) = Broker::start_behind_proxy(Storage::Sqlite);
    let mut f = Fixture::new(&broker, "readyrestore");
    f.run_to_the_end(&broker, 4_000);
    // The store is lost (kept aside for the reconciliation: its quarantine
    // holds the first run's malformed records).
    std::fs::rename(f.path("state-a"), f.path("state-lost")).unwrap_or_else(|e| panic!("{e}"));
    proxy.set(Link::Delay(Duration::from_millis(150)));
    let port = free_port();
    let config = f.config(&broker, "a", &format!("[metrics]\nlisten = \"127.0.0.1:{port}\""));
    let mut child = f.spawn(&config, "b.log");
    let started = Instant::now();
    // (status, assigned, restored) at each sample: /ready first, then the
    // log, so a 200 read before the log is always explained by the log.
    let mut samples: Vec<(String, usize, usize)> = Vec::new();
    loop {
        let answer = sluice_e2e::get(port, "/ready");
        let status = answer.split_whitespace().nth(1).unwrap_or("").to_string();
        let log = std::fs::read_to_string(f.path("b.log")).unwrap_or_default();
        let assigned = log.matches("kind=\"assigned\"").count();
        let restored = log.matches("dedup state restored").count();
        if samples.last() != Some(&(status.clone(), assigned, restored)) {
            samples.push((status.clone(), assigned, restored));
        }
        if status == "200" {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(90), "never ready: {samples:?}; {}", f.logs());
        std::thread::sleep(Duration::from_millis(25));
    }
    proxy.set(Link::Pass);
    let log = std::fs::read_to_string(f.path("b.log")).unwrap_or_default();
    let seconds: f64 = log
        .lines()
        .filter(|l| l.contains("dedup state restored"))
        .filter_map(|l| log_field(l, "seconds")?.parse::<f64>().ok())
        .fold(0.0, f64::max);
    println!(
        "/ready while restoring (status, partitions assigned, restored): {samples:?}; the slowest restore {seconds:.1} s"
    );
    for (status, assigned, restored) in &samples {
        if status == "200" {
            assert!(
                *assigned >= PARTITIONS as usize && restored >= assigned,
                "ready before every restore: {samples:?}"
            );
        }
    }
    assert!(
        samples.iter().any(|(status, assigned, restored)| status == "503" && *assigned > 0 && restored < assigned),
        "not ready while assigned partitions restore: {samples:?}"
    );
    assert!(restored_ids(&f.path("b.log")) > 0, "{log}");
    // Ready means working: new records flow, and the whole topic
    // reconciles by id.
    f.produce(&broker, 1_000);
    f.wait_complete(Duration::from_secs(120), &mut [&mut child]);
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(terminate(&mut child), 0, "{}", f.logs());
    f.assert_reconciled(&["state-lost", "state-a"]);
    f.assert_fully_committed(&broker);
}

/// The network between sluice and its broker is cut for 30 s under load
/// (a fault proxy holds every byte both ways, as a partition does), inside
/// a session timeout of 45 s (Kafka's default): the member keeps its
/// partitions, its commits and fetches wait, and when the link is back
/// nothing is lost and the lag the cut left drains to 0.
///
/// A cut longer than the session timeout cannot be shown on tansu 0.6: it
/// keeps the expired member as the group's leader, so every later join
/// gets "rebalance in progress" or "unknown member" from SyncGroup, for
/// ever (plain librdkafka consumers show the same; the mock cluster's
/// `all_brokers_down_past_the_session_timeout` in kafka_faults.rs covers
/// that case).
#[test]
fn a_30_s_network_cut_under_load_loses_nothing_and_the_lag_drains() {
    let _serial = serial();
    let (broker, proxy) = Broker::start_behind_proxy(Storage::Sqlite);
    let mut f = Fixture::new(&broker, "netcut");
    f.produce(&broker, 20_000);
    let port = free_port();
    let config = f.config(&broker, "a", &format!("[metrics]\nlisten = \"127.0.0.1:{port}\""));
    // Small fetches over a slow link until the cut: the records arrive
    // over seconds, so the cut finds most of them still in the topic (at
    // full speed the whole topic can be in before the test can cut).
    let text = std::fs::read_to_string(&config).unwrap_or_default().replace(
        "\"session.timeout.ms\" = 6000",
        "\"session.timeout.ms\" = 45000, \"max.partition.fetch.bytes\" = 16384",
    );
    std::fs::write(&config, text).unwrap_or_else(|e| panic!("{e}"));
    proxy.set(Link::Delay(Duration::from_millis(50)));
    let mut child = f.spawn(&config, "a.log");
    f.wait_lines("a", 1_000, Duration::from_secs(120));
    // The metrics endpoint is local: it answers through the cut.
    let lag = || -> f64 {
        metric_lines(&scrape(port), &["sluice_consumer_lag{"])
            .iter()
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    proxy.set(Link::Hold);
    let (cut, at_cut) = (Instant::now(), f.delivered("a").len());
    // Under load: ids not yet delivered when the link goes.
    let behind = f.good.len().saturating_sub(at_cut);
    let mut health = BTreeSet::new();
    while cut.elapsed() < Duration::from_secs(30) {
        health.insert(sluice_e2e::get(port, "/health").split_whitespace().nth(1).unwrap_or("").to_string());
        std::thread::sleep(Duration::from_millis(500));
    }
    let after_cut = f.delivered("a").len();
    proxy.set(Link::Pass);
    f.wait_complete(Duration::from_secs(120), &mut [&mut child]);
    let back = Instant::now();
    while lag() > 0.0 {
        assert!(back.elapsed() < Duration::from_secs(60), "the lag stays at {}: {}", lag(), f.logs());
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(terminate(&mut child), 0, "{}", f.logs());
    f.assert_reconciled(&["state-a"]);
    f.assert_fully_committed(&broker);
    let delivered = f.delivered("a");
    let twice = counts(&delivered).values().filter(|c| **c > 1).count();
    let logs = std::fs::read_to_string(f.path("a.log")).unwrap_or_default();
    let lost = logs.matches("kind=\"lost\"").count() + logs.matches("kind=\"revoked\"").count();
    println!(
        "a 30 s cut under load: {at_cut} lines delivered at the cut, {after_cut} when it ended; {behind} ids \
         not yet delivered at the cut; lag 0 {:.1} s after the records were all in; /health in the cut {health:?}; {lost} partitions lost \
         or revoked; {} lines for {} ids ({twice} delivered twice)",
        back.elapsed().as_secs_f64(),
        delivered.len(),
        f.good.len()
    );
    assert!(behind > 0, "the cut came under load: ids not yet delivered");
    assert_eq!(health, BTreeSet::from(["200".to_string()]), "a cut inside the session timeout is not a stall");
}

/// `quarantine replay` on Kafka puts the ids it delivers in the dedup
/// changelog too: another instance that takes the partitions restores them
/// and absorbs a re-sent copy of every replayed record, as the replaying
/// store itself would.
#[test]
fn replayed_ids_reach_the_changelog_and_the_next_owner_absorbs_their_copies() {
    let _serial = serial();
    let broker = Broker::start(Storage::Sqlite);
    let mut f = Fixture::new(&broker, "replaylog");
    let late = produce_late(&broker, &f);
    f.run_to_the_end(&broker, 2_000);
    // The repair: a window wide enough, for the replay and from now on.
    let widened = |name: &str| {
        let config = f.config(&broker, name, "");
        let text =
            std::fs::read_to_string(&config).unwrap_or_default().replace("max_age = \"1d\"", "max_age = \"30d\"");
        std::fs::write(&config, text).unwrap_or_else(|e| panic!("{e}"));
        config
    };
    let a = widened("a");
    let (code, stdout, stderr) =
        f.sluice(&["quarantine", "replay", "-c", &a.display().to_string(), "--summary", "json"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stderr.contains("\"delivered\":200") || stdout.contains("\"delivered\":200"), "{stdout}{stderr}");
    let late_ids = |prefix: &str| f.delivered(prefix).into_iter().filter(|id| id.starts_with("late-")).count();
    assert_eq!(late_ids("a"), 200, "the replay delivered each late record once");
    // Another instance, its own store, takes every partition and is sent a
    // copy of each late record.
    produce(&broker.brokers(), &f.topic, &late);
    let b = widened("b");
    let mut child = f.spawn(&b, "b.log");
    let started = Instant::now();
    loop {
        let high = high_watermarks(&broker.brokers(), &f.topic, PARTITIONS);
        let done = committed(&broker.brokers(), &f.group, &f.topic, PARTITIONS);
        if done.iter().zip(&high).all(|(c, h)| *c == Some(*h)) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "b never committed to {high:?}: {done:?}; {}", f.logs());
        std::thread::sleep(Duration::from_millis(500));
    }
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(terminate(&mut child), 0, "{}", f.logs());
    let restored = restored_ids(&f.path("b.log"));
    println!("replayed 200 late records; b restored {restored} ids and delivered {} of the 200 copies", late_ids("b"));
    assert_eq!(late_ids("b"), 0, "b absorbed every copy of a replayed record: {}", f.logs());
    assert!(restored >= 200, "b restored the replayed ids with the rest: {restored}");
}

/// Add `line` to the `[source]` table of the config at `path` (the
/// fixture's config writes none of the security settings).
fn with_source(path: &Path, line: &str) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let (head, tail) = text.split_once("\n[source]\n").unwrap_or_else(|| panic!("no [source] in {text}"));
    std::fs::write(path, format!("{head}\n[source]\n{line}\n{tail}")).unwrap_or_else(|e| panic!("{e}"));
}

/// `sluice check --connect` with `env` set: (exit code, stdout and stderr).
fn check_connect(f: &Fixture, config: &Path, env: &[(&str, &str)]) -> (i32, String) {
    let out = f
        .command(&["check", "-c", &config.display().to_string(), "--connect"])
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

/// Run instance `a` of `config` with `env` until every good id is in its
/// sink: the metrics text as it was at the end, then SIGTERM.
fn run_reconciled(f: &Fixture, config: &Path, port: u16, env: &[(&str, &str)]) -> String {
    let log = std::fs::File::create(f.path("a.log")).unwrap_or_else(|e| panic!("{e}"));
    let mut child = Proc(
        f.command(&["run", "-c", &config.display().to_string()])
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{e}")),
    );
    f.wait_complete(Duration::from_secs(120), &mut [&mut child]);
    std::thread::sleep(Duration::from_millis(600));
    let metrics = scrape(port);
    assert_eq!(terminate(&mut child), 0, "{}", f.logs());
    f.assert_reconciled(&["state-a"]);
    metrics
}

/// A broker that requires SCRAM-SHA-256 logins: `check --connect` passes
/// with the right password and fails with exit 3 and a wrong one, naming
/// the broker and the cause; a run reconciles by id; the password is in
/// no log line, metric or `check` output.
#[test]
fn scram_logins_connect_run_and_never_show_the_password() {
    let _serial = serial();
    const PASSWORD: &str = "pw-Zq81-e2e-secret";
    const WRONG: &str = "pw-not-it-7731";
    let broker = Broker::start_with_users(&[("sluice-e2e", PASSWORD)]);
    let mut f = Fixture::new(&broker, "scram");
    f.produce(&broker, 2_000);
    let port = free_port();
    let config = f.config(&broker, "a", &format!("[metrics]\nlisten = \"127.0.0.1:{port}\""));
    with_source(
        &config,
        r#"sasl = { mechanism = "SCRAM-SHA-256", username = "sluice-e2e", password_env = "SLUICE_E2E_KAFKA_PASSWORD" }"#,
    );
    let (code, right) = check_connect(&f, &config, &[("SLUICE_E2E_KAFKA_PASSWORD", PASSWORD)]);
    assert_eq!(code, 0, "{right}");
    assert!(right.contains(&format!("connect: source brokers {}: ok (", broker.brokers())), "{right}");
    let (code, wrong) = check_connect(&f, &config, &[("SLUICE_E2E_KAFKA_PASSWORD", WRONG)]);
    assert_eq!(code, 3, "a refused login cannot reach the brokers: {wrong}");
    let failed = wrong.lines().find(|l| l.contains("connect: source brokers")).unwrap_or_default().to_string();
    assert!(
        failed.contains(&broker.brokers())
            && failed.contains("FAILED")
            && failed.contains("SASL SCRAM authentication failed"),
        "the broker and the cause: {wrong}"
    );
    let metrics = run_reconciled(&f, &config, port, &[("SLUICE_E2E_KAFKA_PASSWORD", PASSWORD)]);
    let logs = std::fs::read_to_string(f.path("a.log")).unwrap_or_default();
    println!("SCRAM-SHA-256: a wrong password's check says\n  {}", failed.trim());
    for (what, text) in [("check", &right), ("failed check", &wrong), ("log", &logs), ("metrics", &metrics)] {
        assert!(!text.contains(PASSWORD) && !text.contains(WRONG), "a password in the {what}: {text}");
    }
    assert!(right.contains("sasl.password = ***"), "the check says the password is set, not what: {right}");
}

/// Brokers reached over TLS (a front with a certificate made for
/// 127.0.0.1): with the CA that signed it, `check --connect` passes and a
/// run reconciles by id; with another CA, the check fails with exit 3
/// naming the broker and the failed verification.
#[test]
fn tls_brokers_are_verified_on_check_and_run() {
    let _serial = serial();
    let broker = Broker::start_with_tls(Storage::Sqlite);
    let mut f = Fixture::new(&broker, "tls");
    f.produce(&broker, 2_000);
    let port = free_port();
    let ca = broker.tls_ca().unwrap_or_else(|| panic!("no CA")).display().to_string();
    let config = f.config(&broker, "a", &format!("[metrics]\nlisten = \"127.0.0.1:{port}\""));
    with_source(&config, &format!("tls = {{ ca = \"{ca}\" }}"));
    let (code, out) = check_connect(&f, &config, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("security.protocol = SSL"), "{out}");
    // Another CA: the brokers' certificate does not verify.
    let other = f.path("other-ca.pem");
    std::fs::write(&other, sluice_e2e::tls::self_signed().0).unwrap_or_else(|e| panic!("{e}"));
    let stranger = f.path("stranger.toml");
    std::fs::write(
        &stranger,
        std::fs::read_to_string(&config).unwrap_or_default().replace(&ca, &other.display().to_string()),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (code, wrong) = check_connect(&f, &stranger, &[]);
    assert_eq!(code, 3, "{wrong}");
    let failed = wrong.lines().find(|l| l.contains("connect: source brokers")).unwrap_or_default().to_string();
    assert!(
        failed.contains(&broker.brokers()) && failed.contains("FAILED") && failed.contains("certificate verify failed"),
        "the broker and the cause: {wrong}"
    );
    println!("TLS: a CA that did not sign the brokers' certificate: check says\n  {}", failed.trim());
    run_reconciled(&f, &config, port, &[]);
    f.assert_fully_committed(&broker);
}

#[test]
fn a_reload_under_load_on_kafka_drains_commits_and_rejoins_losing_nothing() {
    let _serial = serial();
    let broker = Broker::start(Storage::Sqlite);
    let mut f = Fixture::new(&broker, "reload");
    f.produce(&broker, 10_000);
    let config = f.config(&broker, "a", "");
    let mut child = f.spawn(&config, "a.log");
    f.wait_lines("a", 2_000, Duration::from_secs(60));
    // json stops setting the time and ts-window goes: every event of the
    // new chain has no timestamp.
    let text = std::fs::read_to_string(&config).unwrap_or_else(|e| panic!("{e}"));
    let new = text.replace(&sluice_e2e::json_chain_toml(true, Some("1d")), &sluice_e2e::json_chain_toml(true, None));
    std::fs::write(&config, new.replace("timestamp_field = \"ts\", ", "")).unwrap_or_else(|e| panic!("{e}"));
    let load = f.produce_in_background(&broker, 10_000);
    // SAFETY: kill(2) on a child we own.
    unsafe { libc_kill(child.id() as i32, 1) };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f.logged("config reloaded") {
        assert!(Instant::now() < deadline, "no reload: {}", f.logs());
        std::thread::sleep(Duration::from_millis(100));
    }
    load.join().unwrap_or_else(|_| panic!("the producer failed"));
    f.wait_complete(Duration::from_secs(120), &mut [&mut child]);
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(terminate(&mut child), 0, "{}", f.logs());
    f.assert_reconciled(&["state-a"]);
    f.assert_fully_committed(&broker);
    let ids = f.delivered("a");
    let twice: Vec<_> = counts(&ids).into_iter().filter(|(_, n)| *n > 1).take(5).collect();
    assert!(twice.is_empty(), "one store across the reload: nothing delivered twice: {twice:?}");
    let sink = std::fs::read_to_string(f.path("out/a.ndjson")).unwrap_or_default();
    let stamped = sluice_e2e::timestamped_lines(&sink);
    let swap = stamped.iter().position(|s| !s).unwrap_or(stamped.len());
    println!(
        "kafka reload under load: {} lines, {swap} by the old chain, {} by the new; 0 lost, 0 twice",
        stamped.len(),
        stamped.len() - swap
    );
    assert!(swap >= 2_000 && swap < stamped.len(), "both chains delivered: {swap} of {}", stamped.len());
    assert!(stamped[swap..].iter().all(|s| !s), "after the swap only the new chain's events");
}

/// Issue 25, item 8: a member whose group is held by another that does no
/// work. A plain consumer of the same group (cooperative-sticky, like
/// sluice) takes the topic's one partition first and keeps it, reading and
/// never committing; sluice joins and is given nothing. Past
/// `watchdog.stall` with the lag standing still, sluice says so: one
/// warning, `sluice_member_stranded` and its lag, a `/health` line, while
/// `/ready` stays 503. When the holder leaves, sluice takes the partition,
/// delivers every id once, and the report ends.
#[test]
fn a_member_left_with_no_partitions_while_another_holds_them_is_reported() {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let _serial = serial();
    let broker = Broker::start(Storage::Sqlite);
    let f = Fixture::new(&broker, "stranded");
    let (brokers, topic, group) = (broker.brokers(), "stranded-one".to_string(), f.group.clone());
    create_topic(&brokers, &topic, 1);
    let ts = sluice_e2e::now_rfc3339(0);
    let ids: BTreeSet<String> = (0..2_000).map(|i| format!("st-{i:05}")).collect();
    let records: Vec<(i32, String, String)> =
        ids.iter().map(|id| (0, id.clone(), format!("{{\"event_id\":\"{id}\",\"ts\":\"{ts}\"}}"))).collect();
    produce(&brokers, &topic, &records);
    // The holder: in the group first, so the sticky assignment keeps the
    // partition with it when sluice joins.
    let (leave, held) = (std::sync::Arc::new(AtomicBool::new(false)), std::sync::Arc::new(AtomicUsize::new(0)));
    let holder = {
        let (leave, held, brokers, topic, group) = (leave.clone(), held.clone(), brokers.clone(), topic.clone(), group);
        std::thread::spawn(move || {
            let c: BaseConsumer = sluice_e2e::kafka::client(&brokers)
                .set("group.id", &group)
                .set("client.id", "holder")
                .set("enable.auto.commit", "false")
                .set("auto.offset.reset", "earliest")
                .set("partition.assignment.strategy", "cooperative-sticky")
                .set("session.timeout.ms", "6000")
                .set("heartbeat.interval.ms", "500")
                .create()
                .unwrap_or_else(|e| panic!("{e}"));
            c.subscribe(&[&topic]).unwrap_or_else(|e| panic!("{e}"));
            while !leave.load(Ordering::SeqCst) {
                let _ = c.poll(Duration::from_millis(100));
                held.store(c.assignment().map(|a| a.count()).unwrap_or(0), Ordering::SeqCst);
            }
            c.unsubscribe();
        })
    };
    let joined = Instant::now();
    while held.load(Ordering::SeqCst) == 0 {
        assert!(joined.elapsed() < Duration::from_secs(60), "the holder was never given the partition");
        std::thread::sleep(Duration::from_millis(100));
    }
    let port = free_port();
    let config =
        f.config(&broker, "a", &format!("\n[watchdog]\nstall = \"3s\"\n\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n"));
    let text = std::fs::read_to_string(&config).unwrap_or_default();
    std::fs::write(&config, text.replace(&format!("topics = [\"{}\"]", f.topic), &format!("topics = [\"{topic}\"]")))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut a = f.spawn(&config, "a.log");
    let waited = Instant::now();
    while !std::fs::read_to_string(f.path("a.log")).unwrap_or_default().contains("member stranded:") {
        assert!(waited.elapsed() < Duration::from_secs(90), "never reported stranded: {}", f.logs());
        assert!(a.try_wait().ok().flatten().is_none(), "sluice exited: {}", f.logs());
        std::thread::sleep(Duration::from_millis(200));
    }
    let stranded_after = waited.elapsed();
    assert_eq!(held.load(Ordering::SeqCst), 1, "the holder still has the partition");
    let health = sluice_e2e::get(port, "/health");
    assert!(health.starts_with("HTTP/1.0 200") || health.starts_with("HTTP/1.1 200"), "{health}");
    assert!(health.contains("member: stranded") && health.contains("stranded-one is 2000"), "{health}");
    let ready = sluice_e2e::get(port, "/ready");
    assert!(ready.contains(" 503 "), "no partitions, not ready: {ready}");
    let metrics = scrape(port);
    let mut lines = metric_lines(&metrics, &["sluice_member_stranded ", "sluice_member_stranded_group_lag "]);
    lines.sort();
    assert_eq!(lines, ["sluice_member_stranded 1", "sluice_member_stranded_group_lag 2000"], "{metrics}");
    assert!(f.delivered("a").is_empty(), "sluice owned nothing, so delivered nothing");
    // The holder leaves: sluice takes the partition and delivers it all.
    leave.store(true, Ordering::SeqCst);
    holder.join().unwrap_or_else(|_| panic!("the holder failed"));
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let have: BTreeSet<String> = f.delivered("a").into_iter().collect();
        let log = std::fs::read_to_string(f.path("a.log")).unwrap_or_default();
        if have.is_superset(&ids) && log.contains("member no longer stranded") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} ids missing after the holder left: {}",
            ids.len() - have.len(),
            f.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let health = sluice_e2e::get(port, "/health");
    assert!(!health.contains("member:"), "the report ended: {health}");
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(terminate(&mut a), 0, "{}", f.logs());
    let delivered = f.delivered("a");
    let set: BTreeSet<String> = delivered.iter().cloned().collect();
    assert_eq!(set, ids, "every id, nothing else");
    assert_eq!(delivered.len(), ids.len(), "each once");
    assert_eq!(committed(&brokers, &f.group, &topic, 1), [Some(2_000)], "committed to the end");
    let log = std::fs::read_to_string(f.path("a.log")).unwrap_or_default();
    assert_eq!(log.matches("member stranded:").count(), 1, "one warning per episode: {log}");
    println!(
        "a stranded member: reported {:.1} s after it started (watchdog.stall 3 s, a group join of ~3 s), lag 2000; \
         after the holder left, 2000 ids delivered once each, 0 lost, committed to 2000",
        stranded_after.as_secs_f64()
    );
}

/// Issue 44: two pipelines in one `sluice run` read one topic with two
/// group ids. Pipeline "archive" writes a file; pipeline "index" posts to
/// an HTTP backend that answers 503 until the test lets it take records.
/// While it is down the archive delivers every id and commits every
/// partition to its high watermark, and the index commits no partition to
/// its end (its records wait behind its breaker, none quarantined). They
/// share one metrics listener, each partition's series labelled with its
/// pipeline. Brought up, the index delivers every id and commits too.
#[test]
fn two_pipelines_in_one_process_keep_independent_offsets_while_one_sink_is_down() {
    let _one = serial();
    let broker = Broker::start(Storage::Sqlite);
    let mut f = Fixture::new(&broker, "two-pipelines");
    f.produce(&broker, 2_000);
    let up = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let is_up = up.clone();
    let backend = sluice_e2e::backend::Backend::start(move |r| {
        if is_up.load(std::sync::atomic::Ordering::SeqCst) {
            sluice_e2e::backend::Reaction::ok(r)
        } else {
            sluice_e2e::backend::Reaction::fail(503, "service unavailable", r)
        }
    });
    let port = free_port();
    let metrics = format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n");
    let named = |config: PathBuf, name: &str, group: &str| {
        let text = std::fs::read_to_string(&config).unwrap_or_else(|e| panic!("{e}"));
        let text = text
            .replace("name = \"e2e-kafka\"", &format!("name = \"{name}\""))
            .replace(&format!("group_id = \"{}\"", f.group), &format!("group_id = \"{group}\""));
        std::fs::write(&config, text).unwrap_or_else(|e| panic!("{e}"));
        config
    };
    let archive = named(f.config(&broker, "archive", &metrics), "archive", "two-archive");
    let index = f.config(&broker, "index", &metrics);
    let text = std::fs::read_to_string(&index).unwrap_or_else(|e| panic!("{e}"));
    let http = format!(
        "[sink]\ntype = \"http\"\nurl = \"{}/ingest\"\nresponse = \"status\"\n\
         [sink.retry]\nmax_attempts = 3\ninitial_backoff = \"10ms\"\nmax_backoff = \"50ms\"\n\
         [sink.breaker]\ninitial_probe = \"200ms\"\nmax_probe = \"800ms\"\n",
        backend.url
    );
    std::fs::write(&index, text.replace("[sink]\ntype = \"file\"\npath = \"out/index.ndjson\"\n", &http))
        .unwrap_or_else(|e| panic!("{e}"));
    let index = named(index, "index", "two-index");
    let log = std::fs::File::create(f.path("both.log")).unwrap_or_else(|e| panic!("{e}"));
    let mut both = Proc(
        f.command(&["run", "-c", &archive.display().to_string(), "-c", &index.display().to_string()])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let brokers = broker.brokers();
    let high = high_watermarks(&brokers, &f.topic, PARTITIONS);
    let at_end: Vec<Option<i64>> = high.iter().map(|h| Some(*h)).collect();
    // The archive: every id, every partition committed to its end.
    f.wait_complete(Duration::from_secs(120), &mut [&mut both]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while committed(&brokers, "two-archive", &f.topic, PARTITIONS) != at_end {
        assert!(Instant::now() < deadline, "the archive's group never committed to the end: {}", f.logs());
        std::thread::sleep(Duration::from_millis(200));
    }
    // Meanwhile the index holds: nothing stored, no partition at its end.
    std::thread::sleep(Duration::from_secs(2));
    assert!(backend.seen().stored.is_empty(), "the index's backend stored while it answered 503");
    let held = committed(&brokers, "two-index", &f.topic, PARTITIONS);
    assert!(
        held.iter().zip(&high).all(|(c, h)| c.is_none_or(|c| c < *h)),
        "the index committed past records it has not delivered: {held:?} of {high:?}"
    );
    // One listener, each pipeline's partitions apart.
    let text = scrape(port);
    for name in ["archive", "index"] {
        let label = format!("partition=\"{}/0\",pipeline=\"{name}\"", f.topic);
        assert!(
            text.lines().any(|l| l.starts_with("sluice_high_watermark{") && l.contains(&label)),
            "no {label} in /metrics:\n{text}"
        );
    }
    // Not closed: open (1), or probing (2) when the scrape falls on one of
    // its probes (every 200–800 ms here).
    let breakers: Vec<&str> = text.lines().filter(|l| l.starts_with("sluice_breaker_state{")).collect();
    assert!(
        breakers.iter().any(|l| l.contains("pipeline=\"index\"") && (l.ends_with(" 1") || l.ends_with(" 2"))),
        "the index's breaker is open, by its pipeline: {breakers:?}"
    );
    let late = |name: &str| {
        text.lines().any(|l| {
            l.starts_with("sluice_partition_late{") && l.contains(&format!("pipeline=\"{name}\"")) && l.ends_with(" 1")
        })
    };
    assert!(late("index") && !late("archive"), "the index is late, the archive is not");
    // Up: the index catches up, and commits to the end as well.
    up.store(true, std::sync::atomic::Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let stored: BTreeSet<String> = backend.seen().stored.iter().cloned().collect();
        if stored == f.good && committed(&brokers, "two-index", &f.topic, PARTITIONS) == at_end {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the index never caught up ({} of {}): {}",
            stored.len(),
            f.good.len(),
            f.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(committed(&brokers, "two-archive", &f.topic, PARTITIONS), at_end, "the archive's offsets stand");
    assert_eq!(terminate(&mut both), 0, "{}", std::fs::read_to_string(f.path("both.log")).unwrap_or_default());
    // Each pipeline reconciles by id: its own store's quarantine holds
    // exactly the malformed records, and nothing else is missing.
    let archived: BTreeSet<String> = f.delivered("archive").into_iter().collect();
    assert_eq!(archived, f.good, "the archive holds exactly the good ids");
    assert_eq!(f.quarantined(&["state-archive"]), f.malformed);
    assert_eq!(f.quarantined(&["state-index"]), f.malformed, "the index quarantined nothing for its backend's outage");
    println!(
        "two pipelines, one process, one topic: archive {} ids committed while index was down; index then {} ids",
        archived.len(),
        backend.seen().stored.iter().collect::<BTreeSet<_>>().len()
    );
}

/// A member's threads do not grow with its partitions (issue 57): one
/// consumer for all of them, its partitions lanes of the workers, one
/// supervisor opening them in turn, and no restore reader left once they
/// are open. The same member, ready on 4 partitions and on 256, runs the
/// same threads: the run's within 2 × cores + 16, and five more the
/// process has whatever it runs (main, signals, reloads, the metrics
/// endpoint, the plugins' epoch ticker).
#[test]
fn a_member_of_256_partitions_runs_no_more_threads_than_one_of_4() {
    let _serial = serial();
    let broker = Broker::start(Storage::Sqlite);
    let f = Fixture::new(&broker, "threads");
    let many = "threads-many-logs";
    broker.create(many, 256);
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let mut counts = Vec::new();
    for (topic, name) in [(f.topic.as_str(), "four"), (many, "many")] {
        let port = free_port();
        let config = f.config(&broker, name, &format!("[metrics]\nlisten = \"127.0.0.1:{port}\""));
        let text = std::fs::read_to_string(&config).unwrap_or_default();
        let text = text
            .replace(&format!("topics = [\"{}\"]", f.topic), &format!("topics = [\"{topic}\"]"))
            .replace(&format!("group_id = \"{}\"", f.group), &format!("group_id = \"threads-{name}\""));
        std::fs::write(&config, text).unwrap_or_else(|e| panic!("{e}"));
        let mut child = f.spawn(&config, &format!("{name}.log"));
        let started = Instant::now();
        while sluice_e2e::get(port, "/ready").split_whitespace().nth(1) != Some("200") {
            assert!(started.elapsed() < Duration::from_secs(120), "{name}: never ready: {}", f.logs());
            std::thread::sleep(Duration::from_millis(100));
        }
        // The most seen over two seconds of a ready member, by name.
        let mut most: (usize, BTreeMap<String, usize>) = (0, BTreeMap::new());
        for _ in 0..20 {
            let mut names = BTreeMap::new();
            for task in std::fs::read_dir(format!("/proc/{}/task", child.id())).into_iter().flatten().flatten() {
                let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
                *names.entry(comm.trim().trim_end_matches(|c: char| c.is_ascii_digit()).to_string()).or_default() += 1;
            }
            let threads = names.values().sum();
            if threads > most.0 {
                most = (threads, names);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(terminate(&mut child), 0, "{}", f.logs());
        counts.push((name, most.0, most.1));
    }
    println!("threads of a ready member, by partitions: {counts:?} on {cores} cores");
    let (four, many) = (counts[0].1, counts[1].1);
    assert!(four > 0, "no thread seen: {counts:?}");
    assert!(many <= four + 1, "256 partitions took more threads than 4: {counts:?}");
    assert!(many <= 2 * cores + 16 + 5, "more than 2 x cores + 16, and the process's five: {counts:?}");
}
