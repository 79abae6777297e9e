//! The kafka sink and the quarantine topic, against tansu (started by the
//! harness). Ids are read back from the topics and reconciled.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sluice_e2e::kafka::{Broker, Storage, create_topic, produce, read_topic};
use sluice_e2e::{json_chain_toml, now_rfc3339, scrape, sluice_bin};

fn command(dir: &Path, config: &Path) -> Command {
    let mut c = Command::new(sluice_bin!());
    c.args(["run", "-c", &config.display().to_string()])
        .current_dir(dir)
        .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
        .env("SLUICE_LOG", "info")
        .stdin(Stdio::null());
    c
}

#[test]
fn the_kafka_sink_waits_out_a_broker_outage_and_every_id_arrives() {
    let mut broker = Broker::start(Storage::Sqlite);
    create_topic(&broker.brokers(), "out-events", 2);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let ts = now_rfc3339(0);
    let ids: Vec<String> = (0..5_000).map(|i| format!("ev-{i:07}")).collect();
    let text: String =
        ids.iter().map(|id| format!("{{\"event_id\":\"{id}\",\"ts\":\"{ts}\",\"msg\":\"m\"}}\n")).collect();
    std::fs::write(dir.path().join("input.log"), text).unwrap_or_else(|e| panic!("{e}"));
    let config = dir.path().join("sluice.toml");
    let cfg = format!(
        "[pipeline]\nname = \"kafka-sink\"\nstate_dir = \"state\"\nbatch_size = 500\n\n[source]\ntype = \"file\"\npaths = [\"input.log\"]\n\n{}\n\
         [sink]\ntype = \"kafka\"\nbrokers = \"{}\"\ntopic = \"out-events\"\nmessage_timeout = \"1s\"\n\
         [sink.breaker]\nfailures = 3\ninitial_probe = \"500ms\"\nmax_probe = \"1s\"\n[sink.retry]\ninitial_backoff = \"50ms\"\nmax_backoff = \"200ms\"\n",
        json_chain_toml(true, None),
        broker.brokers()
    );
    std::fs::write(&config, cfg).unwrap_or_else(|e| panic!("{e}"));
    // The broker is down when sluice starts and comes back 6 s later.
    broker.kill();
    let child = command(dir.path(), &config)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    std::thread::sleep(Duration::from_secs(6));
    broker.restart();
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("circuit breaker opened"), "{stderr}");
    assert!(stderr.contains("circuit breaker closed"), "{stderr}");

    let read = read_topic(&broker.brokers(), "out-events", 2);
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for r in &read {
        let key = String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned();
        let v: serde_json::Value = serde_json::from_slice(&r.value).unwrap_or_default();
        assert_eq!(v["id"].as_str(), Some(key.as_str()), "the record key is the event id");
        *counts.entry(key).or_insert(0) += 1;
    }
    let got: BTreeSet<&String> = counts.keys().collect();
    let want: BTreeSet<&String> = ids.iter().collect();
    assert_eq!(got, want, "every id in the topic, nothing else");
    // Nothing reached the broker while it was down, and the producer is
    // idempotent: no record is there twice.
    let dups: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).take(5).collect();
    assert!(dups.is_empty(), "{dups:?}");
    println!("kafka sink: {} ids through a 6 s broker outage, 0 lost, 0 duplicates", counts.len());
}

#[test]
fn the_quarantine_topic_holds_the_original_with_its_context_before_the_offset_moves() {
    let broker = Broker::start(Storage::Sqlite);
    let brokers = broker.brokers();
    create_topic(&brokers, "q-in", 2);
    create_topic(&brokers, "q-dead", 1);
    let ts = now_rfc3339(0);
    let mut records = Vec::new();
    let mut malformed = BTreeSet::new();
    let mut good = BTreeSet::new();
    for i in 0..2_000usize {
        let p = (i % 2) as i32;
        if i % 50 == 49 {
            let bad = format!("{{\"event_id\":\"bad-{i}\",\"ts\":");
            malformed.insert(bad.clone());
            records.push((p, format!("bad-{i}"), bad));
        } else {
            let id = format!("ev-{i:07}");
            records.push((p, id.clone(), format!("{{\"event_id\":\"{id}\",\"ts\":\"{ts}\"}}")));
            good.insert(id);
        }
    }
    produce(&brokers, "q-in", &records);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config: PathBuf = dir.path().join("sluice.toml");
    let cfg = format!(
        "[pipeline]\nname = \"qtopic\"\nstate_dir = \"state\"\nbatch_size = 200\n\n[source]\ntype = \"kafka\"\nbrokers = \"{brokers}\"\n\
         topics = [\"q-in\"]\ngroup_id = \"q-group\"\ncommit_interval = \"200ms\"\n\
         properties = {{ \"session.timeout.ms\" = 6000, \"heartbeat.interval.ms\" = 500 }}\n\n{}\n\
         [dedup]\nwindow = \"1h\"\n\n[sink]\ntype = \"file\"\npath = \"out/events.ndjson\"\n\n[quarantine]\ntopic = \"q-dead\"\n",
        json_chain_toml(true, None)
    );
    std::fs::write(&config, cfg).unwrap_or_else(|e| panic!("{e}"));
    let mut child = command(dir.path(), &config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let committed = sluice_e2e::kafka::committed(&brokers, "q-group", "q-in", 2);
        if committed == vec![Some(1000), Some(1000)] {
            break;
        }
        assert!(Instant::now() < deadline, "the group never committed everything: {committed:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let _ = child.wait();

    // Committed to the end: every quarantined record must be in the topic.
    let dead = read_topic(&brokers, "q-dead", 1);
    let values: BTreeSet<String> = dead.iter().map(|r| String::from_utf8_lossy(&r.value).into_owned()).collect();
    assert_eq!(values, malformed, "the quarantine topic holds exactly the malformed originals");
    assert_eq!(dead.len(), malformed.len(), "each once");
    for r in &dead {
        let key = String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned();
        assert!(key.starts_with("bad-"), "the original key is kept: {key}");
        let reason = r.header("sluice.reason").unwrap_or_default();
        assert!(reason.contains("not valid JSON"), "{reason}");
        assert_eq!(r.header("sluice.stage").as_deref(), Some("plugin"));
        assert!(r.header("sluice.plugin").unwrap_or_default().starts_with("json@"));
        let source = r.header("sluice.source").unwrap_or_default();
        assert!(source.starts_with("q-in/"), "{source}");
        let context: serde_json::Value =
            serde_json::from_str(&r.header("sluice.context").unwrap_or_default()).unwrap_or_default();
        assert_eq!(context["pipeline"], "qtopic");
        assert_eq!(context["plugins"][0]["name"], "json", "the processing version travels with it");
        assert!(context.get("payload").is_none(), "the value is the payload; the envelope does not repeat it");
    }
    let delivered: BTreeSet<String> = std::fs::read_to_string(dir.path().join("out/events.ndjson"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["id"].as_str().map(str::to_string))
        .collect();
    assert_eq!(delivered, good);
    println!(
        "quarantine topic: {} originals with context headers; {} ids delivered; committed to the end",
        dead.len(),
        good.len()
    );
}

/// The value of the first sample of `name` whose labels contain `label`.
fn sample(text: &str, name: &str, label: &str) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']) && l.contains(label))
        .find_map(|l| l.rsplit(' ').next().and_then(|v| v.parse().ok()))
}

#[test]
fn an_open_breaker_holds_the_partition_back_and_shows_as_lag_not_loss() {
    use sluice_e2e::backend::{Backend, Reaction, Req};
    let broker = Broker::start(Storage::Sqlite);
    let brokers = broker.brokers();
    create_topic(&brokers, "storm-in", 1);
    let ts = now_rfc3339(0);
    let records: Vec<(i32, String, String)> = (0..20_000)
        .map(|i| {
            let id = format!("ev-{i:07}");
            (0, id.clone(), format!("{{\"event_id\":\"{id}\",\"ts\":\"{ts}\",\"pad\":\"{}\"}}", "x".repeat(100)))
        })
        .collect();
    produce(&brokers, "storm-in", &records);
    // Healthy for the first 3 requests, then 503 for 8 s, then healthy.
    let storm_start = std::sync::Mutex::new(None::<Instant>);
    let backend = Backend::start(move |r: &Req| {
        let mut start = storm_start.lock().unwrap_or_else(|p| p.into_inner());
        if r.n < 3 {
            return Reaction::ok(r);
        }
        let began = *start.get_or_insert_with(Instant::now);
        if began.elapsed() < Duration::from_secs(8) { Reaction::fail(503, "overloaded", r) } else { Reaction::ok(r) }
    });
    let port = sluice_e2e::kafka::free_port();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = dir.path().join("sluice.toml");
    let cfg = format!(
        "[pipeline]\nname = \"storm\"\nstate_dir = \"state\"\nbatch_size = 500\n\n[source]\ntype = \"kafka\"\nbrokers = \"{brokers}\"\n\
         topics = [\"storm-in\"]\ngroup_id = \"storm-group\"\ncommit_interval = \"200ms\"\n\
         properties = {{ \"session.timeout.ms\" = 6000, \"heartbeat.interval.ms\" = 500 }}\n\n{}\n\
         [dedup]\nwindow = \"1h\"\n\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n\n\
         [sink]\ntype = \"http\"\nurl = \"{}/ingest\"\n[sink.breaker]\ninitial_probe = \"1s\"\nmax_probe = \"2s\"\n\
         [sink.retry]\ninitial_backoff = \"50ms\"\nmax_backoff = \"200ms\"\n",
        json_chain_toml(true, None),
        backend.url
    );
    std::fs::write(&config, cfg).unwrap_or_else(|e| panic!("{e}"));
    let mut child = command(dir.path(), &config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));

    let p = "partition=\"storm-in/0\"";
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut during = None;
    let mut after;
    loop {
        assert!(Instant::now() < deadline, "the pipeline never caught up");
        std::thread::sleep(Duration::from_millis(250));
        let m = scrape(port);
        let open = sample(&m, "sluice_breaker_state", "sink=").unwrap_or(0.0) >= 1.0;
        let paused = sample(&m, "sluice_partition_backpressured", p) == Some(1.0);
        let lag = sample(&m, "sluice_consumer_lag", p).unwrap_or(0.0);
        if open && paused && lag > 0.0 && during.is_none() {
            during = Some(m.clone());
        }
        after = m;
        if during.is_some() && sample(&after, "sluice_committed_offset", p) == Some(20_000.0) && lag == 0.0 {
            break;
        }
    }
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let _ = child.wait();
    let during = during.unwrap_or_default();
    let show = |m: &str| {
        m.lines()
            .filter(|l| {
                [
                    "sluice_breaker_state",
                    "sluice_breaker_transitions_total",
                    "sluice_partition_backpressured",
                    "sluice_consumer_lag",
                    "sluice_committed_offset",
                    "sluice_sink_requests_total",
                ]
                .iter()
                .any(|n| l.starts_with(n))
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    println!("breaker open, as the metrics showed it:\n{}\n\nafter the storm:\n{}", show(&during), show(&after));
    assert!(sample(&after, "sluice_breaker_transitions_total", "to=\"open\"").unwrap_or(0.0) >= 1.0);
    assert_eq!(sample(&after, "sluice_breaker_transitions_total", "to=\"closed\""), Some(1.0));
    assert_eq!(sample(&after, "sluice_breaker_state", "sink="), Some(0.0));

    let seen = backend.seen();
    let stored: BTreeSet<&String> = seen.stored.iter().collect();
    let want: BTreeSet<&String> = records.iter().map(|(_, id, _)| id).collect();
    assert_eq!(stored, want, "every id delivered after the storm; 503s store nothing");
    assert_eq!(seen.stored.len(), records.len(), "no duplicates: the storm stored nothing");
}
