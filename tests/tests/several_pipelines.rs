//! Several pipelines in one `sluice run` (issue 44): two file pipelines
//! listed in one file share one metrics and API listener; `/metrics`,
//! `/status.json`, `sluice tap` and `sluice top` name each pipeline; a
//! SIGHUP reloads each from its own file; each delivers every one of its
//! ids, reconciled; and configs that would share a name, a store or a
//! group are refused before anything runs, naming both files.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sluice_e2e::kafka::free_port;
use sluice_e2e::{get, now_rfc3339, scrape, sluice_bin};

fn sluice(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(sluice_bin!());
    c.args(args)
        .current_dir(dir)
        .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
        .stdin(Stdio::null());
    c
}

/// A file pipeline `name` reading `<name>.log`, into `<name>.ndjson`
/// (or the `[[sinks]]` of `sinks`).
fn config(dir: &Path, name: &str, port: u16, batch: usize, sinks: &str) -> PathBuf {
    let sink = if sinks.is_empty() {
        format!("[sink]\ntype = \"file\"\npath = \"{name}.ndjson\"\n")
    } else {
        sinks.to_string()
    };
    let text = format!(
        "[pipeline]\nname = \"{name}\"\nstate_dir = \"state-{name}\"\nbatch_size = {batch}\n\n\
         [source]\ntype = \"file\"\npaths = [\"{name}.log\"]\nfollow = true\npoll_interval = \"50ms\"\n\n{}\n\
         {sink}\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n\n[api]\nenabled = true\n",
        sluice_e2e::json_chain_toml(true, None)
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    path
}

fn ids_in(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["id"].as_str().map(String::from))
        .collect()
}

fn body(answer: &str) -> &str {
    answer.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

fn tmux(socket: &str, args: &[&str]) -> std::process::Output {
    Command::new("tmux").arg("-L").arg(socket).args(args).output().unwrap_or_else(|e| panic!("tmux: {e}"))
}

#[test]
fn two_pipelines_in_one_process_share_one_listener_and_each_is_named_reloaded_and_reconciled() {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = tmp.path();
    let port = free_port();
    config(dir, "alpha", port, 100, "");
    // beta has two sinks and a route: `top` draws it.
    let beta = config(
        dir,
        "beta",
        port,
        100,
        "[[sinks]]\nname = \"main\"\ntype = \"file\"\npath = \"beta.ndjson\"\n\
         [[sinks]]\nname = \"copy\"\ntype = \"file\"\npath = \"beta-copy.ndjson\"\n\
         [[routes]]\nfield = \"/n\"\nexists = true\nsinks = [\"main\", \"copy\"]\n",
    );
    std::fs::write(dir.join("all.toml"), "pipelines = [\"alpha.toml\", \"beta.toml\"]\n")
        .unwrap_or_else(|e| panic!("{e}"));
    // Both files keep growing, each with ids of its own.
    let ts = now_rfc3339(0);
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = ["alpha", "beta"]
        .into_iter()
        .map(|name| {
            let (path, stop, ts) = (dir.join(format!("{name}.log")), stop.clone(), ts.clone());
            std::fs::write(&path, "").unwrap_or_else(|e| panic!("{e}"));
            std::thread::spawn(move || {
                let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap_or_else(|e| panic!("{e}"));
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    let lines: String = (n..n + 50)
                        .map(|i| format!("{{\"event_id\":\"{name}-{i:06}\",\"ts\":\"{ts}\",\"n\":{i}}}\n"))
                        .collect();
                    f.write_all(lines.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
                    n += 50;
                    std::thread::sleep(Duration::from_millis(50));
                }
                n
            })
        })
        .collect();
    let log = std::fs::File::create(dir.join("run.log")).unwrap_or_else(|e| panic!("{e}"));
    let mut run: Child = sluice(dir, &["run", "-c", "all.toml"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let logs = || std::fs::read_to_string(dir.join("run.log")).unwrap_or_default();
    let started = Instant::now();
    let both = |text: &str| {
        ["alpha", "beta"].iter().all(|p| {
            text.lines().any(|l| l.starts_with("sluice_records_in_total{") && l.contains(&format!("pipeline=\"{p}\"")))
        })
    };
    while !both(&scrape(port)) {
        assert!(started.elapsed() < Duration::from_secs(60), "both pipelines never counted: {}", logs());
        std::thread::sleep(Duration::from_millis(100));
    }

    // One listener: each partition's series under its pipeline.
    let metrics = scrape(port);
    for name in ["alpha", "beta"] {
        let path = dir.join(format!("{name}.log"));
        let series =
            format!("partition=\"{}\",pipeline=\"{name}\"", std::fs::canonicalize(&path).unwrap_or(path).display());
        assert!(
            metrics.lines().any(|l| l.starts_with("sluice_records_in_total{") && l.contains(&series)),
            "{series} in:\n{metrics}"
        );
    }
    assert!(get(port, "/health").starts_with("HTTP/1.1 200") || get(port, "/health").starts_with("HTTP/1.0 200"));
    assert!(get(port, "/ready").contains("ready"), "ready when both are");
    for name in ["alpha", "beta"] {
        assert!(
            metrics.lines().any(|l| l.starts_with("sluice_config_info{")
                && l.contains(&format!("pipeline=\"{name}\""))
                && l.ends_with(" 1")),
            "{name}'s config digest in force: {metrics}"
        );
    }

    // The status page's data names both pipelines and keeps them apart.
    std::thread::sleep(Duration::from_secs(2));
    let status: serde_json::Value =
        serde_json::from_str(body(&get(port, "/status.json"))).unwrap_or_else(|e| panic!("status.json: {e}"));
    let names: Vec<&str> =
        status["pipelines"].as_array().into_iter().flatten().filter_map(|p| p["pipeline"].as_str()).collect();
    assert_eq!(names, ["alpha", "beta"], "{status}");
    assert!(
        status["pipelines"].as_array().into_iter().flatten().all(|p| p["config_digest"].is_string()),
        "each with its config's digest: {status}"
    );
    let last = &status["samples"].as_array().and_then(|s| s.last()).cloned().unwrap_or_default();
    let partitions: Vec<&String> = last["partitions"].as_object().map(|m| m.keys().collect()).unwrap_or_default();
    for name in ["alpha", "beta"] {
        assert!(partitions.iter().any(|p| p.starts_with(&format!("{name}:"))), "{name} in {partitions:?}");
    }

    // The page, in the browser: both names in its header, a picture row
    // per pipeline, each pipeline's partitions as rows of their own.
    let profile = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let page = sluice_e2e::browser::chromium(
        profile.path(),
        &["--virtual-time-budget=4000", "--dump-dom", &format!("http://127.0.0.1:{port}/")],
    );
    let dom = String::from_utf8_lossy(&page.stdout).into_owned();
    assert!(dom.contains("<span id=\"pipeline\">alpha · beta</span>"), "{dom}");
    for name in ["alpha", "beta"] {
        assert!(dom.contains(&format!("data-pipeline=\"{name}\"")), "{name}'s picture row: {dom}");
        assert!(dom.contains(&format!("data-partition=\"{name}:")), "{name}'s partition rows: {dom}");
    }
    // `sluice tap --pipeline beta`: beta's events only, each line naming it.
    // Through the list file: tap finds the listener its pipelines share.
    let mut tap = sluice(dir, &["tap", "-c", "all.toml", "--before-sink", "--pipeline", "beta"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    std::thread::sleep(Duration::from_secs(2));
    let _ = tap.kill();
    let tapped = tap.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let lines: Vec<serde_json::Value> =
        String::from_utf8_lossy(&tapped.stdout).lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert_eq!(lines.first().map(|h| h["pipeline"].clone()), Some("beta".into()), "{lines:?}");
    assert!(lines.len() > 2, "samples of beta: {lines:?}");
    for s in &lines[1..] {
        assert_eq!(s["pipeline"], "beta", "{s}");
        assert!(s["id"].as_str().is_some_and(|id| id.starts_with("beta-")), "{s}");
    }
    let unknown = sluice(dir, &["tap", "--url", &format!("127.0.0.1:{port}"), "--before-sink", "--pipeline", "gamma"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let said = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        !unknown.status.success() && said.contains("no pipeline \"gamma\"") && said.contains("alpha, beta"),
        "{said}"
    );

    // `sluice top` draws each pipeline's partition as its own row.
    let socket = format!("sluice-several-{}", std::process::id());
    let top = format!("{} top -c all.toml", sluice_bin!().display());
    let opened = tmux(&socket, &["new-session", "-d", "-x", "200", "-y", "30", "-c", &dir.display().to_string(), &top]);
    assert!(opened.status.success(), "{}", String::from_utf8_lossy(&opened.stderr));
    let mut screen = String::new();
    let watching = Instant::now();
    while watching.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(500));
        screen = String::from_utf8_lossy(&tmux(&socket, &["capture-pane", "-p"]).stdout).into_owned();
        if screen.contains("alpha:") && screen.contains("beta:") && screen.contains("routes:") {
            break;
        }
    }
    let _ = tmux(&socket, &["kill-server"]);
    assert!(screen.contains("alpha:") && screen.contains("beta:"), "top names both pipelines:\n{screen}");
    assert!(screen.contains("routes: beta:route 0: /n exists → main, copy"), "top draws beta's routes:\n{screen}");
    assert!(
        scrape(port)
            .contains("sluice_route_info{at=\"0\",route=\"route 0: /n exists → main, copy\",pipeline=\"beta\"} 1"),
        "the routes as a metric"
    );

    // A SIGHUP reloads each pipeline from its own file: beta's changed,
    // alpha's did not.
    let text = std::fs::read_to_string(&beta).unwrap_or_default();
    std::fs::write(&beta, text.replace("batch_size = 100", "batch_size = 200")).unwrap_or_else(|e| panic!("{e}"));
    let _ = Command::new("kill").args(["-HUP", &run.id().to_string()]).status();
    let reloaded = |text: &str, name: &str, result: &str| {
        text.lines().any(|l| {
            l.starts_with("sluice_config_reloads_total{")
                && l.contains(&format!("pipeline=\"{name}\""))
                && l.contains(&format!("result=\"{result}\""))
        })
    };
    let hup = Instant::now();
    while !(reloaded(&scrape(port), "beta", "ok") && reloaded(&scrape(port), "alpha", "unchanged")) {
        assert!(hup.elapsed() < Duration::from_secs(30), "no reload per pipeline: {}\n{}", scrape(port), logs());
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(!reloaded(&scrape(port), "alpha", "ok"), "alpha's config did not change");

    // Stop writing; each pipeline delivers exactly its own ids, once.
    stop.store(true, Ordering::SeqCst);
    let written: Vec<usize> = writers.into_iter().map(|w| w.join().unwrap_or(0)).collect();
    for (name, n, file) in
        [("alpha", written[0], "alpha"), ("beta", written[1], "beta"), ("beta", written[1], "beta-copy")]
    {
        let want: BTreeSet<String> = (0..n).map(|i| format!("{name}-{i:06}")).collect();
        let out = dir.join(format!("{file}.ndjson"));
        let waiting = Instant::now();
        while ids_in(&out).len() < want.len() && waiting.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(200));
        }
        let got = ids_in(&out);
        let set: BTreeSet<String> = got.iter().cloned().collect();
        assert_eq!(set, want, "{file} holds exactly {name}'s ids: {}", logs());
        assert_eq!(got.len(), want.len(), "{file}: each once");
    }
    let _ = Command::new("kill").args(["-TERM", &run.id().to_string()]).status();
    let status = run.wait().unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success(), "both pipelines drained and ended cleanly: {}", logs());

    // The commands of one pipeline's store take the list file and a name.
    let audit =
        sluice(dir, &["audit", "-c", "all.toml", "--pipeline", "beta", "--json", "beta-000001", "alpha-000001"])
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
    let said = String::from_utf8_lossy(&audit.stdout);
    let answers: Vec<serde_json::Value> = said.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert_eq!(answers.len(), 2, "{said}{}", String::from_utf8_lossy(&audit.stderr));
    assert_eq!(answers[0]["verdict"], "delivered", "beta's store holds beta's id: {said}");
    let sinks: Vec<&str> =
        answers[0]["sinks"].as_array().into_iter().flatten().filter_map(|s| s["sink"].as_str()).collect();
    assert_eq!(sinks, ["main", "copy"], "delivered to each of beta's sinks: {said}");
    assert!(answers[0]["sinks"].as_array().into_iter().flatten().all(|s| s["delivered"].is_object()), "{said}");
    assert_eq!(answers[1]["verdict"], "unknown", "and alpha's is not in it: {said}");
    let unnamed = sluice(dir, &["quarantine", "stats", "-c", "all.toml"]).output().unwrap_or_else(|e| panic!("{e}"));
    let why = String::from_utf8_lossy(&unnamed.stderr);
    assert_eq!(unnamed.status.code(), Some(2), "{why}");
    assert!(why.contains("lists 2 pipelines (alpha, beta)") && why.contains("--pipeline"), "{why}");
    let named = sluice(dir, &["quarantine", "stats", "-c", "all.toml", "--pipeline", "alpha"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(named.status.success(), "{}", String::from_utf8_lossy(&named.stderr));
    println!("two pipelines in one process: alpha {} ids, beta {} ids, one listener", written[0], written[1]);
}

/// Configs that would share what each pipeline must own are refused
/// before anything runs (exit 2), naming both files and the key.
#[test]
fn pipelines_that_would_share_a_name_or_a_store_are_refused_naming_both_files() {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = tmp.path();
    let port = free_port();
    let a = config(dir, "alpha", port, 100, "");
    std::fs::write(dir.join("alpha.log"), "").unwrap_or_else(|e| panic!("{e}"));
    let twin = dir.join("twin.toml");
    std::fs::write(&twin, std::fs::read_to_string(&a).unwrap_or_default()).unwrap_or_else(|e| panic!("{e}"));
    let out = sluice(dir, &["run", "-c", "alpha.toml", "-c", "twin.toml"]).output().unwrap_or_else(|e| panic!("{e}"));
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    for part in ["alpha.toml and", "twin.toml", "pipeline.name \"alpha\"", "pipeline.state_dir"] {
        assert!(said.contains(part), "{part} in: {said}");
    }
    // `sluice check` of a list file checks each pipeline, then the pair.
    std::fs::write(dir.join("twins.toml"), "pipelines = [\"alpha.toml\", \"twin.toml\"]\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let checked = sluice(dir, &["check", "-c", "twins.toml"]).output().unwrap_or_else(|e| panic!("{e}"));
    let said = String::from_utf8_lossy(&checked.stderr);
    assert_eq!(checked.status.code(), Some(2), "{said}");
    assert!(said.contains("pipeline.name \"alpha\""), "{said}");
    let text = std::fs::read_to_string(&a).unwrap_or_default();
    std::fs::write(&twin, text.replace("\"alpha\"", "\"gamma\"").replace("state-alpha", "state-gamma"))
        .unwrap_or_else(|e| panic!("{e}"));
    let checked = sluice(dir, &["check", "-c", "twins.toml"]).output().unwrap_or_else(|e| panic!("{e}"));
    let out = String::from_utf8_lossy(&checked.stdout);
    assert!(checked.status.success(), "{out}{}", String::from_utf8_lossy(&checked.stderr));
    assert!(out.contains("pipeline \"alpha\"") && out.contains("pipeline \"gamma\""), "{out}");
    assert!(out.contains("2 pipelines in one process"), "{out}");
    let sunk = std::fs::read_to_string(dir.join("alpha.ndjson")).unwrap_or_default();
    assert!(sunk.is_empty(), "nothing ran: {sunk}");
}
