//! `sluice tap` against a running pipeline: samples of what passes a
//! point, at the rate asked, masked like the quarantine; the pipeline it
//! taps delivers every record all the same (reconciled by id).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_e2e::watched::Watched;
use sluice_e2e::{now_rfc3339, scrape, sluice_bin};

fn sluice(dir: &std::path::Path, args: &[&str]) -> Command {
    let mut c = Command::new(sluice_bin!());
    c.args(args)
        .current_dir(dir)
        .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
        .stdin(Stdio::null());
    c
}

/// `sluice tap <args>` for `seconds`, its stdout's lines.
fn tap_for(dir: &std::path::Path, args: &[&str], seconds: u64) -> Vec<String> {
    let mut child: Child = sluice(dir, &[&["tap", "-c", "sluice.toml"], args].concat())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let lines = Arc::new(Mutex::new(Vec::new()));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let reader = {
        let lines = lines.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                lines.lock().unwrap_or_else(|p| p.into_inner()).push(l);
            }
        })
    };
    std::thread::sleep(Duration::from_secs(seconds));
    let _ = child.kill();
    let _ = child.wait();
    let _ = reader.join();
    lines.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

#[test]
fn tap_samples_each_point_at_its_rate_masked_and_the_pipeline_loses_nothing() {
    let ts = now_rfc3339(0);
    // Every tenth line is not JSON: quarantined. Every line carries a
    // secret the config masks.
    let line = move |i: usize| {
        if i % 10 == 9 {
            format!("broken line {i} password=PW{i}-S3CRET\n")
        } else {
            format!("{{\"event_id\":\"ev-{i:07}\",\"ts\":\"{ts}\",\"password\":\"PW{i}-S3CRET\",\"n\":{i}}}\n")
        }
    };
    let mut watched =
        Watched::start(sluice_bin!(), "tap-e2e", 1_000, line, "[quarantine]\nmask_fields = [\"password\"]\n");
    let (dir, port) = (watched.dir.path().to_path_buf(), watched.port);

    let seconds = 3;
    let parse = |lines: &[String]| -> Vec<serde_json::Value> {
        lines.iter().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?} is not JSON: {e}"))).collect()
    };
    // Before the sink, 5 a second.
    let sink = parse(&tap_for(&dir, &["--before-sink", "--rate", "5"], seconds));
    assert_eq!(sink.first().map(|v| v["tapping"].clone()), Some("before-sink".into()), "{sink:?}");
    let samples = &sink[1..];
    // A full bucket, then 5 a second: never more than 5 × (seconds + 1).
    assert!((3..=5 * (seconds as usize + 1)).contains(&samples.len()), "{} samples: {sink:?}", samples.len());
    for s in samples {
        assert!(s["id"].as_str().is_some_and(|id| id.starts_with("ev-")), "{s}");
        assert_eq!(s["event"]["password"], "***", "masked like the quarantine: {s}");
    }
    // After the json plugin: what it emits, with its position.
    let after = parse(&tap_for(&dir, &["--after", "json", "--rate", "20"], 2));
    assert_eq!(after.first().map(|v| v["tapping"].clone()), Some("after json".into()), "{after:?}");
    assert!(after.len() > 3, "{after:?}");
    for s in &after[1..] {
        assert!(s["position"].as_str().is_some_and(|p| p.contains("input.log#0@")), "{s}");
        assert_eq!(s["event"]["password"], "***", "{s}");
    }
    // Into the quarantine: the broken lines, masked, with the reason.
    let q = parse(&tap_for(&dir, &["--quarantined"], 2));
    assert!(q.len() > 1 && q[1..].iter().all(|s| s["reason"].is_string() && s["payload"].as_str().is_some_and(|p| p.starts_with("broken line"))), "{q:?}");
    for lines in [&sink, &after, &q] {
        let text: Vec<String> = lines.iter().map(|v| v.to_string()).collect();
        assert!(!text.iter().any(|l| l.contains("S3CRET")), "a secret in a tap: {text:?}");
    }
    // A plugin the pipeline does not have: refused, naming the ones it has.
    let out =
        sluice(&dir, &["tap", "-c", "sluice.toml", "--after", "nosuch"]).output().unwrap_or_else(|e| panic!("{e}"));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && said.contains("no plugin \"nosuch\"") && said.contains("its plugins: json"),
        "{said}"
    );
    // Nobody taps now: the point costs nothing and the stream is gone.
    assert!(!scrape(port).is_empty());

    let total = watched.stop_writing();
    // The tapped pipeline delivers every good line once, all the same.
    let want: BTreeSet<String> = (0..total).filter(|i| i % 10 != 9).map(|i| format!("ev-{i:07}")).collect();
    let waiting = Instant::now();
    let delivered = loop {
        let text = std::fs::read_to_string(dir.join("out.ndjson")).unwrap_or_default();
        let ids: Vec<String> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v["id"].as_str().map(String::from))
            .collect();
        if ids.len() >= want.len() || waiting.elapsed() > Duration::from_secs(30) {
            break ids;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(watched.stop(), "the pipeline after the taps");
    let set: BTreeSet<String> = delivered.iter().cloned().collect();
    assert_eq!(set, want, "every good id delivered");
    assert_eq!(delivered.len(), want.len(), "each once");
    for lines in [&sink, &after, &q] {
        println!("{}\n{}", lines[0], lines[1]);
    }
    println!(
        "tap: {} before-sink samples in {seconds} s at 5/s; {total} lines delivered or quarantined meanwhile",
        samples.len()
    );
}
