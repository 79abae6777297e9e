//! `sluice tap` against a running pipeline: samples of what passes a
//! point, at the rate asked, masked like the quarantine; the pipeline it
//! taps delivers every record all the same (reconciled by id).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_e2e::kafka::free_port;
use sluice_e2e::{json_chain_toml, now_rfc3339, running_pipeline, scrape, sluice_bin};

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
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
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
    std::fs::write(dir.path().join("input.log"), (0..1_000).map(&line).collect::<String>())
        .unwrap_or_else(|e| panic!("{e}"));
    let port = free_port();
    let cfg = format!(
        "[pipeline]\nname = \"tap-e2e\"\nstate_dir = \"state\"\nbatch_size = 100\n\n\
         [source]\ntype = \"file\"\npaths = [\"input.log\"]\nfollow = true\npoll_interval = \"50ms\"\n\n{}\n\
         [sink]\ntype = \"file\"\npath = \"out.ndjson\"\n\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n\n\
         [quarantine]\nmask_fields = [\"password\"]\n",
        json_chain_toml(true, None)
    );
    std::fs::write(dir.path().join("sluice.toml"), cfg).unwrap_or_else(|e| panic!("{e}"));
    let mut pipeline = running_pipeline(sluice_bin!(), dir.path(), port);
    // A writer keeps the file growing, about 2,000 lines a second.
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicUsize::new(1_000));
    let writer = {
        let (path, stop, written) = (dir.path().join("input.log"), stop.clone(), written.clone());
        std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap_or_else(|e| panic!("{e}"));
            while !stop.load(Ordering::SeqCst) {
                let i = written.load(Ordering::SeqCst);
                f.write_all((i..i + 100).map(&line).collect::<String>().as_bytes()).unwrap_or_else(|e| panic!("{e}"));
                written.store(i + 100, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };

    let seconds = 3;
    let parse = |lines: &[String]| -> Vec<serde_json::Value> {
        lines.iter().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?} is not JSON: {e}"))).collect()
    };
    // Before the sink, 5 a second.
    let sink = parse(&tap_for(dir.path(), &["--before-sink", "--rate", "5"], seconds));
    assert_eq!(sink.first().map(|v| v["tapping"].clone()), Some("before-sink".into()), "{sink:?}");
    let samples = &sink[1..];
    // A full bucket, then 5 a second: never more than 5 × (seconds + 1).
    assert!((3..=5 * (seconds as usize + 1)).contains(&samples.len()), "{} samples: {sink:?}", samples.len());
    for s in samples {
        assert!(s["id"].as_str().is_some_and(|id| id.starts_with("ev-")), "{s}");
        assert_eq!(s["event"]["password"], "***", "masked like the quarantine: {s}");
    }
    // After the json plugin: what it emits, with its position.
    let after = parse(&tap_for(dir.path(), &["--after", "json", "--rate", "20"], 2));
    assert_eq!(after.first().map(|v| v["tapping"].clone()), Some("after json".into()), "{after:?}");
    assert!(after.len() > 3, "{after:?}");
    for s in &after[1..] {
        assert!(s["position"].as_str().is_some_and(|p| p.contains("input.log#0@")), "{s}");
        assert_eq!(s["event"]["password"], "***", "{s}");
    }
    // Into the quarantine: the broken lines, masked, with the reason.
    let q = parse(&tap_for(dir.path(), &["--quarantined"], 2));
    assert!(q.len() > 1 && q[1..].iter().all(|s| s["reason"].is_string() && s["payload"].as_str().is_some_and(|p| p.starts_with("broken line"))), "{q:?}");
    for lines in [&sink, &after, &q] {
        let text: Vec<String> = lines.iter().map(|v| v.to_string()).collect();
        assert!(!text.iter().any(|l| l.contains("S3CRET")), "a secret in a tap: {text:?}");
    }
    // A plugin the pipeline does not have: refused, naming the ones it has.
    let out = sluice(dir.path(), &["tap", "-c", "sluice.toml", "--after", "nosuch"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && said.contains("no plugin \"nosuch\"") && said.contains("its plugins: json"),
        "{said}"
    );
    // Nobody taps now: the point costs nothing and the stream is gone.
    assert!(!scrape(port).is_empty());

    stop.store(true, Ordering::SeqCst);
    let _ = writer.join();
    let total = written.load(Ordering::SeqCst);
    // The tapped pipeline delivers every good line once, all the same.
    let want: BTreeSet<String> = (0..total).filter(|i| i % 10 != 9).map(|i| format!("ev-{i:07}")).collect();
    let waiting = Instant::now();
    let delivered = loop {
        let text = std::fs::read_to_string(dir.path().join("out.ndjson")).unwrap_or_default();
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
    let _ = Command::new("kill").args(["-TERM", &pipeline.id().to_string()]).status();
    assert!(pipeline.wait().is_ok_and(|c| c.success()));
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
