//! `sluice top` against a running pipeline, in a real terminal: tmux runs
//! it in a detached session of known size, `capture-pane` reads what it
//! draws, `send-keys q` quits it. The pipeline follows a file that a writer
//! keeps growing, so the rates are not zero.

use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

use sluice_e2e::kafka::free_port;
use sluice_e2e::{json_chain_toml, now_rfc3339, running_pipeline, sluice_bin};

/// tmux on a socket of this test's own, so no other server is touched.
fn tmux(socket: &str, args: &[&str]) -> std::process::Output {
    Command::new("tmux").arg("-L").arg(socket).args(args).output().unwrap_or_else(|e| panic!("tmux: {e}"))
}

#[test]
fn top_shows_each_partition_live_and_quits_on_q() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let ts = now_rfc3339(0);
    let line = move |i: usize| format!("{{\"event_id\":\"ev-{i:07}\",\"ts\":\"{ts}\",\"msg\":\"line {i}\"}}\n");
    std::fs::write(dir.path().join("input.log"), (0..2_000).map(line.clone()).collect::<String>())
        .unwrap_or_else(|e| panic!("{e}"));
    let port = free_port();
    let cfg = format!(
        "[pipeline]\nname = \"top-e2e\"\nstate_dir = \"state\"\nbatch_size = 100\n\n\
         [source]\ntype = \"file\"\npaths = [\"input.log\"]\nfollow = true\npoll_interval = \"50ms\"\n\n{}\n\
         [sink]\ntype = \"file\"\npath = \"out.ndjson\"\n\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n",
        json_chain_toml(true, None)
    );
    std::fs::write(dir.path().join("sluice.toml"), cfg).unwrap_or_else(|e| panic!("{e}"));
    let mut pipeline = running_pipeline(sluice_bin!(), dir.path(), port);
    // A writer keeps the file growing while top watches.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (path, stop) = (dir.path().join("input.log"), stop.clone());
        std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap_or_else(|e| panic!("{e}"));
            let mut i = 2_000;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let chunk: String = (i..i + 100).map(&line).collect();
                f.write_all(chunk.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
                i += 100;
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };

    let socket = format!("sluice-top-{}", std::process::id());
    let top = format!("{} top -c sluice.toml", sluice_bin!().display());
    let started =
        tmux(&socket, &["new-session", "-d", "-x", "180", "-y", "30", "-c", &dir.path().display().to_string(), &top]);
    assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));
    // Two readings a second apart give rates; wait for a row that has one.
    let mut screen = String::new();
    let rate = |screen: &str| -> u64 {
        let row = screen.lines().find(|l| l.contains("input.log")).unwrap_or_default();
        // The row as drawn: `│/…/input.log   1,234   1,200 …│`.
        let cells: Vec<&str> = row.trim_matches(|c| c == '│' || c == ' ').split_whitespace().collect();
        cells.get(1).and_then(|c| c.replace(',', "").parse().ok()).unwrap_or(0)
    };
    let watching = Instant::now();
    while watching.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(500));
        screen = String::from_utf8_lossy(&tmux(&socket, &["capture-pane", "-p"]).stdout).into_owned();
        if rate(&screen) > 0 {
            break;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = writer.join();
    for what in ["sluice top", "PARTITION", "IN/S", "DELIVERED/S", "LAG", "IN FLIGHT", "STATE", "breaker:", "q quits"] {
        assert!(screen.contains(what), "{what} is not on the screen:\n{screen}");
    }
    assert!(rate(&screen) > 0, "the partition's rate in, after a second of growth:\n{screen}");
    assert!(screen.contains("flowing") || screen.contains("backpressured"), "{screen}");
    println!("top, as drawn:\n{screen}");

    tmux(&socket, &["send-keys", "q"]);
    let quitting = Instant::now();
    while tmux(&socket, &["has-session"]).status.success() {
        assert!(quitting.elapsed() < Duration::from_secs(10), "top did not quit on q");
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = tmux(&socket, &["kill-server"]);
    // The pipeline it watched runs on, untouched; SIGTERM ends it cleanly.
    let _ = Command::new("kill").args(["-TERM", &pipeline.id().to_string()]).status();
    let code = pipeline.wait().unwrap_or_else(|e| panic!("{e}"));
    assert!(code.success(), "the pipeline after top: {code}");
}
