//! The status page (`GET /` on the metrics listener) in a real browser:
//! headless Chromium loads it against a running pipeline, runs its script,
//! and the test reads the DOM it built (the partition, its rate, the charts,
//! the quarantine reasons, the config and plugin versions) and keeps a
//! screenshot beside the build (`status-page.png` in the target directory).

use std::time::Duration;

use sluice_e2e::browser::chromium;
use sluice_e2e::watched::Watched;
use sluice_e2e::{get, now_rfc3339, sluice_bin, target_dir};

#[test]
fn the_status_page_draws_the_running_pipeline_in_a_browser() {
    let ts = now_rfc3339(0);
    let line = move |i: usize| {
        if i % 20 == 19 {
            format!("not json {i}\n")
        } else {
            format!("{{\"event_id\":\"ev-{i:07}\",\"ts\":\"{ts}\",\"n\":{i}}}\n")
        }
    };
    // The file grows all along: samples with rates, in the page too.
    let watched = Watched::start(sluice_bin!(), "status-e2e", 1_000, line, "");
    let (dir, port) = (watched.dir.path().to_path_buf(), watched.port);
    std::thread::sleep(Duration::from_secs(5));

    // The samples the page reads.
    let json = get(port, "/status.json");
    let body = json.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let status: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {json}"));
    assert!(status["samples"].as_array().is_some_and(|s| s.len() >= 3), "{status}");
    assert_eq!(status["about"]["pipeline"], "status-e2e");
    assert!(status["reasons"].as_object().is_some_and(|r| r.keys().any(|k| k.contains("not valid JSON"))), "{status}");

    // The page, in the browser, while the file still grows.
    let profile = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("http://127.0.0.1:{port}/");
    let dom = chromium(profile.path(), &["--virtual-time-budget=4000", "--dump-dom", &url]);
    let dom = String::from_utf8_lossy(&dom.stdout).into_owned();
    assert!(dom.contains("<span id=\"pipeline\">status-e2e</span>"), "{dom}");
    let partition = dir.join("input.log").display().to_string();
    let row = dom
        .split("<tr ")
        .find(|r| r.contains(&format!("data-partition=\"{partition}\"")))
        .unwrap_or_else(|| panic!("no row for {partition}:\n{dom}"));
    let cell = |key: &str| -> String {
        let at = row.find(&format!("data-key=\"{key}\"")).unwrap_or_else(|| panic!("no {key} cell: {row}"));
        let rest = &row[at..];
        let text = &rest[rest.find('>').map_or(0, |i| i + 1)..];
        text[..text.find('<').unwrap_or(0)].to_string()
    };
    assert!(cell("in").replace(',', "").parse::<u64>().is_ok_and(|n| n > 0), "records in per second: {row}");
    assert!(["flowing", "backpressured"].contains(&cell("state").as_str()), "{row}");
    for drawn in ["data-series=\"in\"", "data-series=\"delivered\"", &format!("data-series=\"{partition}\"")] {
        assert!(dom.contains(drawn), "no {drawn} in the charts:\n{dom}");
    }
    assert!(dom.contains("data-stage=\"json@") && dom.contains("data-arrow=\"dedup→sink\""), "the picture: {dom}");
    assert!(dom.contains("payload is not valid JSON"), "the quarantine reasons: {dom}");
    let config = dom.split("<code id=\"config\">").nth(1).and_then(|c| c.split('<').next()).unwrap_or_default();
    assert!(config.len() >= 12 && config.chars().all(|c| c.is_ascii_hexdigit()), "the config digest: {config:?}");
    // The same digest on `/metrics`, from the start (it was set before the
    // endpoint's recorder existed).
    let metrics = sluice_e2e::scrape(port);
    assert!(metrics.contains(&format!("sluice_config_info{{digest=\"{config}\"}} 1")), "{metrics}");
    assert!(dom.contains("json@"), "the plugin version: {dom}");

    // A screenshot, kept beside the build for a person to look at.
    let shot = target_dir().join("status-page.png");
    let _ = std::fs::remove_file(&shot);
    let out = chromium(
        profile.path(),
        &["--virtual-time-budget=4000", "--window-size=1100,1400", &format!("--screenshot={}", shot.display()), &url],
    );
    let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
    assert!(size > 10_000, "a screenshot of {size} bytes: {}", String::from_utf8_lossy(&out.stderr));
    println!("status page: screenshot at {} ({size} bytes)", shot.display());

    assert!(watched.stop(), "the pipeline after the page");
}

/// Issue 44: with two sinks and a route, `/status.json`, the page and the
/// metrics name each sink; the page lists the routes.
#[test]
fn the_status_page_names_each_sink_and_lists_the_routes() {
    let ts = now_rfc3339(0);
    let line = move |i: usize| format!("{{\"event_id\":\"ev-{i:07}\",\"ts\":\"{ts}\",\"n\":{i}}}\n");
    let sinks = "[[sinks]]\nname = \"index\"\ntype = \"file\"\npath = \"index.ndjson\"\n\
                 [[sinks]]\nname = \"archive\"\ntype = \"file\"\npath = \"archive.ndjson\"\n\
                 [[routes]]\nfield = \"/n\"\nmatches = \"0$\"\nsinks = [\"archive\"]\n";
    let watched = Watched::start(sluice_bin!(), "status-sinks", 1_000, line, sinks);
    let port = watched.port;
    std::thread::sleep(Duration::from_secs(4));
    let json = get(port, "/status.json");
    let body = json.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let status: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {json}"));
    assert_eq!(status["about"]["sinks"], serde_json::json!(["index", "archive"]), "{status}");
    let routes = status["about"]["routes"].to_string();
    assert!(routes.contains("route 0: /n ~ /0$/ → archive") && routes.contains("→ index, archive"), "{routes}");
    let metrics = sluice_e2e::scrape(port);
    for sink in ["index", "archive"] {
        assert!(metrics.contains(&format!("sluice_breaker_state{{sink=\"{sink}: file ")), "{sink}: {metrics}");
    }
    let profile = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dom =
        chromium(profile.path(), &["--virtual-time-budget=4000", "--dump-dom", &format!("http://127.0.0.1:{port}/")]);
    let dom = String::from_utf8_lossy(&dom.stdout).into_owned();
    assert!(dom.contains("data-stage=\"sinks: index, archive\""), "the picture: {dom}");
    assert!(dom.contains("route 0: /n ~ /0$/ → archive"), "the routes: {dom}");
    let lines = |f: &str| std::fs::read_to_string(watched.dir.path().join(f)).unwrap_or_default().lines().count();
    let (archive, index) = (lines("archive.ndjson"), lines("index.ndjson"));
    assert!(archive > index && index > 0, "the archive has every event, the index nine in ten: {archive}, {index}");
    assert!(watched.stop(), "the pipeline after the page");
}
