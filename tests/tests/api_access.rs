//! `[api]`: the metrics listener serves record contents to no one without
//! a token. A pipeline listens on 0.0.0.0 with the API on and a bearer
//! token; every endpoint is asked with no token, a wrong one and the right
//! one. The open ones (`/metrics`, `/health`, `/ready`) answer; the closed
//! ones (`/tap`, `/status.json`) give 401 and not one byte of a record,
//! until the right token; refusals are counted. The same config without a
//! token refuses to start, naming the key. The control: on loopback with
//! no token, anyone who reaches the port reads the records (what every
//! listener did before). The status page logs in with the token in
//! headless Chromium. The state folder is the owner's alone.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sluice_e2e::browser::chromium;
use sluice_e2e::{json_chain_toml, now_rfc3339, scrape, sluice_bin};

const TOKEN: &str = "e2e-token-0123456789abcdef";
const TOKEN_VAR: &str = "SLUICE_E2E_API_TOKEN";
/// In every record: a byte of it in a refusal is a leak.
const SECRET: &str = "card-4111-SECRET";

struct Running {
    dir: tempfile::TempDir,
    port: u16,
    child: Child,
    stop: Arc<AtomicBool>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    /// Stop writing and stop the pipeline; its folder stays.
    fn halt(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.halt();
    }
}

fn config(dir: &Path, host: &str, port: u16, api: &str) {
    let cfg = format!(
        "[pipeline]\nname = \"api-e2e\"\nstate_dir = \"state\"\nbatch_size = 50\n\n\
         [source]\ntype = \"file\"\npaths = [\"input.log\"]\nfollow = true\npoll_interval = \"50ms\"\n\n{}\n\
         [sink]\ntype = \"file\"\npath = \"out.ndjson\"\n\n[metrics]\nlisten = \"{host}:{port}\"\n\n{api}\n",
        json_chain_toml(true, None)
    );
    std::fs::write(dir.join("sluice.toml"), cfg).unwrap_or_else(|e| panic!("{e}"));
}

/// A pipeline on `host` with `api`, its input growing with records that
/// each carry [`SECRET`].
fn start(host: &str, api: &str) -> Running {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let port = sluice_e2e::kafka::free_port();
    config(dir.path(), host, port, api);
    let ts = now_rfc3339(0);
    let line = move |i: usize| format!("{{\"event_id\":\"ev-{i:07}\",\"ts\":\"{ts}\",\"card\":\"{SECRET}\"}}\n");
    let input = dir.path().join("input.log");
    std::fs::write(&input, (0..100).map(&line).collect::<String>()).unwrap_or_else(|e| panic!("{e}"));
    let child = Command::new(sluice_bin!())
        .args(["run", "-c", "sluice.toml"])
        .current_dir(dir.path())
        .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
        .env(TOKEN_VAR, TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("run.log")).unwrap_or_else(|e| panic!("{e}")))
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let started = Instant::now();
    while !scrape(port).contains("sluice_records_in_total") {
        let log = std::fs::read_to_string(dir.path().join("run.log")).unwrap_or_default();
        assert!(started.elapsed() < Duration::from_secs(60), "the pipeline never counted a record:\n{log}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        Some(std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new().append(true).open(input).unwrap_or_else(|e| panic!("{e}"));
            let mut i = 100;
            while !stop.load(Ordering::SeqCst) {
                f.write_all((i..i + 20).map(&line).collect::<String>().as_bytes()).unwrap_or_else(|e| panic!("{e}"));
                i += 20;
                std::thread::sleep(Duration::from_millis(50));
            }
        }))
    };
    Running { dir, port, child, stop, writer }
}

/// `GET path` with `Authorization: Bearer token` when given: the status
/// and the body, read for at most `for_at_most` (a tap streams forever).
fn ask(port: u16, path: &str, token: Option<&str>, for_at_most: Duration) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("{e}"));
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n{auth}\r\n").as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    s.set_read_timeout(Some(Duration::from_millis(200))).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    let until = Instant::now() + for_at_most;
    let mut buf = [0u8; 8192];
    while Instant::now() < until {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or(String::new(), |(_, b)| b.to_string());
    (status, body)
}

const SHORT: Duration = Duration::from_millis(1500);

#[test]
fn off_loopback_every_endpoint_answers_by_its_rule_and_no_record_leaks_without_the_token() {
    let api = format!("[api]\nenabled = true\ntoken_env = \"{TOKEN_VAR}\"\n");
    let p = start("0.0.0.0", &api);
    for open in ["/metrics", "/health", "/ready"] {
        let (status, body) = ask(p.port, open, None, SHORT);
        assert_eq!(status, 200, "{open}: {body}");
        assert!(!body.contains(SECRET), "{open} carries no record");
    }
    let mut refused = 0;
    for closed in ["/status.json", "/tap?before_sink"] {
        for token in [None, Some("wrong-token-0123456789abcdef"), Some(&TOKEN[..TOKEN.len() - 1])] {
            let (status, body) = ask(p.port, closed, token, SHORT);
            assert_eq!(status, 401, "{closed} with {token:?}: {body}");
            assert_eq!(body, "unauthorized\n", "{closed} with {token:?}: 401 and nothing else");
            refused += 1;
        }
    }
    // The right token: the tap streams the records, secret and all (masking
    // is the operator's choice, `quarantine.mask_fields`), and the
    // status JSON answers.
    let (status, body) = ask(p.port, "/tap?before_sink", Some(TOKEN), Duration::from_secs(4));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("ev-") && body.contains(SECRET), "the tap with the token: {body}");
    let (status, body) = ask(p.port, "/status.json", Some(TOKEN), SHORT);
    assert_eq!(status, 200);
    assert!(serde_json::from_str::<serde_json::Value>(&body).is_ok_and(|v| v["about"]["pipeline"] == "api-e2e"));
    // The page itself holds no record: it is served, and asks for the token.
    let (status, page) = ask(p.port, "/", None, SHORT);
    assert_eq!(status, 200);
    assert!(page.contains("id=\"login\"") && !page.contains(SECRET));
    // Every refusal counted, by endpoint.
    let metrics = scrape(p.port);
    let count = |endpoint: &str| -> u64 {
        metrics
            .lines()
            .find(|l| l.starts_with("sluice_api_unauthorized_total") && l.contains(&format!("endpoint=\"{endpoint}\"")))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    assert_eq!(count("/tap") + count("/status.json"), refused, "{metrics}");
    // The token is never in the log.
    let log = std::fs::read_to_string(p.dir.path().join("run.log")).unwrap_or_default();
    assert!(!log.contains(TOKEN), "{log}");
    println!(
        "0.0.0.0: 3 open endpoints answered, {refused} requests without the right token refused with 401 and 0 record bytes"
    );

    // `sluice tap` sends the token from a file; without it, it says why.
    let token_file = p.dir.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap_or_else(|e| panic!("{e}"));
    let url = format!("127.0.0.1:{}", p.port);
    let mut tap = Command::new(sluice_bin!())
        .args(["tap", "--url", &url, "--before-sink", "--token-file", &token_file.display().to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut first = String::new();
    if let Some(out) = tap.stdout.take() {
        let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut first);
    }
    let _ = tap.kill();
    let _ = tap.wait();
    assert!(!first.is_empty(), "sluice tap with --token-file read the stream");
    let out = Command::new(sluice_bin!())
        .args(["tap", "--url", &url, "--before-sink"])
        .env_remove("SLUICE_API_TOKEN")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("401") && said.contains("--token-file"), "{said}");
}

#[test]
fn off_loopback_without_a_token_the_pipeline_refuses_to_start_naming_the_key() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    config(dir.path(), "0.0.0.0", sluice_e2e::kafka::free_port(), "[api]\nenabled = true\n");
    std::fs::write(dir.path().join("input.log"), "{}\n").unwrap_or_else(|e| panic!("{e}"));
    for command in ["run", "check"] {
        let out = Command::new(sluice_bin!())
            .args([command, "-c", "sluice.toml"])
            .current_dir(dir.path())
            .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {said}");
        assert!(said.contains("api.token_env") && said.contains("0.0.0.0"), "{command}: {said}");
    }
    assert!(!dir.path().join("state").exists(), "nothing started");
}

/// The control: the rule is what stops the leak. On loopback without a
/// token the API is open to whoever reaches the port, which was every
/// listener's behaviour before `[api]`; off by default, nothing is served.
#[test]
fn the_control_on_loopback_without_a_token_serves_records_to_anyone_and_off_serves_none() {
    let p = start("127.0.0.1", "[api]\nenabled = true\n");
    let (status, body) = ask(p.port, "/tap?before_sink", None, Duration::from_secs(4));
    assert_eq!(status, 200);
    assert!(body.contains(SECRET), "an open API leaks the records: {body}");
    drop(p);
    let p = start("127.0.0.1", "");
    for closed in ["/tap?before_sink", "/status.json", "/"] {
        let (status, body) = ask(p.port, closed, None, SHORT);
        assert_eq!(status, 404, "{closed}: {body}");
        assert!(body.contains("[api] enabled = true") && !body.contains(SECRET), "{closed}: {body}");
    }
    assert_eq!(ask(p.port, "/metrics", None, SHORT).0, 200);
}

/// The status page takes the token once, from a field or a link's
/// fragment (which no request carries), keeps it in the tab's session
/// storage and sends it as a header: it draws the pipeline with it, and
/// asks for it without.
#[test]
fn the_status_page_logs_in_with_the_token_in_a_browser() {
    let api = format!("[api]\nenabled = true\ntoken_env = \"{TOKEN_VAR}\"\n");
    let p = start("127.0.0.1", &api);
    std::thread::sleep(Duration::from_secs(3));
    let profile = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("http://127.0.0.1:{}/", p.port);
    let dom = chromium(profile.path(), &["--virtual-time-budget=4000", "--dump-dom", &url]);
    let dom = String::from_utf8_lossy(&dom.stdout).into_owned();
    assert!(dom.contains("enter this pipeline's API token"), "without the token the page asks for it: {dom}");
    assert!(!dom.contains("<span id=\"pipeline\">api-e2e</span>"), "and draws nothing: {dom}");
    let profile = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dom = chromium(profile.path(), &["--virtual-time-budget=4000", "--dump-dom", &format!("{url}#token={TOKEN}")]);
    let dom = String::from_utf8_lossy(&dom.stdout).into_owned();
    assert!(dom.contains("<span id=\"pipeline\">api-e2e</span>"), "with the token the page draws the pipeline: {dom}");
    assert!(dom.contains("<form id=\"login\" hidden"), "{dom}");
    // The page's own requests carried the header: the server never saw
    // the token in a path (the fragment is no part of a request).
    let log = std::fs::read_to_string(p.dir.path().join("run.log")).unwrap_or_default();
    assert!(!log.contains(TOKEN), "{log}");
}

#[test]
fn the_state_folder_and_an_export_are_the_owners_alone() {
    use std::os::unix::fs::PermissionsExt;
    let mut p = start("127.0.0.1", "");
    let mode = |path: &Path| std::fs::metadata(path).map(|m| m.permissions().mode() & 0o777).unwrap_or(0);
    assert_eq!(mode(&p.dir.path().join("state")), 0o700);
    let dir = p.dir.path().to_path_buf();
    p.halt();
    // An export of the quarantine, whatever the umask.
    let export = dir.join("export.ndjson");
    let out = Command::new(sluice_bin!())
        .args(["quarantine", "export", "-c", "sluice.toml", "--to", &export.display().to_string()])
        .current_dir(&dir)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(mode(&export), 0o600);
    // A folder someone opened up is said at check and at start, with its
    // path and mode, and narrowed.
    std::fs::set_permissions(dir.join("state"), std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(sluice_bin!())
        .args(["check", "-c", "sluice.toml"])
        .current_dir(&dir)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("WARNING") && said.contains("mode 0755") && said.contains("state"), "{said}");
    // `check` narrowed it; open it again for the start to find.
    std::fs::set_permissions(dir.join("state"), std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("{e}"));
    let log = dir.join("again.log");
    let mut run = Command::new(sluice_bin!())
        .args(["run", "-c", "sluice.toml"])
        .current_dir(&dir)
        .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap_or_else(|e| panic!("{e}")))
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let started = Instant::now();
    let said = loop {
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        if said.contains("open to other users") || started.elapsed() > Duration::from_secs(30) {
            break said;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = run.kill();
    let _ = run.wait();
    assert!(said.contains("mode 0755") && said.contains("sets it to 0700"), "{said}");
    assert_eq!(mode(&dir.join("state")), 0o700, "narrowed at start");
}
