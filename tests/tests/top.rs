//! `sluice top` against a running pipeline, in a real terminal: tmux runs
//! it in a detached session of known size, `capture-pane` reads what it
//! draws, `send-keys q` quits it. The pipeline follows a file that a writer
//! keeps growing, so the rates are not zero.

use std::process::Command;
use std::time::{Duration, Instant};

use sluice_e2e::watched::Watched;
use sluice_e2e::{now_rfc3339, sluice_bin};

/// tmux on a socket of this test's own, so no other server is touched.
fn tmux(socket: &str, args: &[&str]) -> std::process::Output {
    Command::new("tmux").arg("-L").arg(socket).args(args).output().unwrap_or_else(|e| panic!("tmux: {e}"))
}

#[test]
fn top_shows_each_partition_live_and_quits_on_q() {
    let ts = now_rfc3339(0);
    let line = move |i: usize| format!("{{\"event_id\":\"ev-{i:07}\",\"ts\":\"{ts}\",\"msg\":\"line {i}\"}}\n");
    let mut watched = Watched::start(sluice_bin!(), "top-e2e", 2_000, line, "");
    let dir = watched.dir.path().to_path_buf();

    let socket = format!("sluice-top-{}", std::process::id());
    let top = format!("{} top -c sluice.toml", sluice_bin!().display());
    let started =
        tmux(&socket, &["new-session", "-d", "-x", "180", "-y", "30", "-c", &dir.display().to_string(), &top]);
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
    watched.stop_writing();
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
    // Without a terminal it says so, instead of drawing into a pipe.
    let piped = Command::new(sluice_bin!())
        .args(["top", "-c", "sluice.toml"])
        .current_dir(&dir)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let said = String::from_utf8_lossy(&piped.stderr);
    assert!(!piped.status.success() && said.contains("draws on a terminal"), "{said}");
    // The pipeline it watched runs on, untouched; SIGTERM ends it cleanly.
    assert!(watched.stop(), "the pipeline after top");
}
