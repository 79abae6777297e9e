//! The clickhouse sink against a real ClickHouse (Debian's 18.16, started
//! by `sluice_e2e::clickhouse` on a free loopback port). Ids are
//! reconciled in the table against the ids written, after SIGKILLs of
//! sluice mid-run; with ReplacingMergeTree ordered by event id, `FINAL`
//! shows each id once.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use sluice_e2e::clickhouse::ClickHouse;
use sluice_e2e::{json_chain_toml, now_rfc3339, quarantine_entries, sluice_bin, table_lines};

const TABLE: &str = "CREATE TABLE {name} (
    event_id String,
    ts DateTime,
    n UInt32,
    msg String,
    level String DEFAULT 'info'
) ENGINE = ReplacingMergeTree ORDER BY event_id";

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new(lines: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("input.log"), lines).unwrap_or_else(|e| panic!("{e}"));
        Fixture { dir }
    }

    fn config(&self, ch: &ClickHouse, table: &str, extra: &str) -> PathBuf {
        let cfg = format!(
            "[pipeline]\nname = \"ch-e2e\"\nstate_dir = \"state\"\nbatch_size = 1000\n\n[source]\ntype = \"file\"\npaths = [\"input*.log\"]\n\n{}\n\
             [sink]\ntype = \"clickhouse\"\nurl = \"{}\"\ntable = \"{table}\"\nuser = \"sluice\"\npassword_env = \"SLUICE_CH_PASSWORD\"\n\
             timestamp_field = \"ts\"\n{extra}\n[sink.settings]\ndate_time_input_format = \"best_effort\"\n",
            json_chain_toml(true, None),
            ch.url()
        );
        let path = self.dir.path().join("sluice.toml");
        std::fs::write(&path, cfg).unwrap_or_else(|e| panic!("{e}"));
        path
    }

    fn command(&self, config: &std::path::Path) -> Command {
        let mut c = Command::new(sluice_bin!());
        c.args(["run", "-c", &config.display().to_string(), "--summary", "json"])
            .current_dir(self.dir.path())
            .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
            .env("SLUICE_CH_PASSWORD", "s3cret")
            .env("SLUICE_LOG", "info")
            .stdin(Stdio::null());
        c
    }

    fn run(&self, config: &std::path::Path) -> String {
        let out = self.command(config).output().unwrap_or_else(|e| panic!("{e}"));
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "sluice run failed:\n{stderr}");
        stderr
    }

    fn quarantined(&self) -> BTreeMap<String, String> {
        quarantine_entries(&self.dir.path().join("state")).into_iter().collect()
    }
}

#[test]
fn ids_reconcile_after_sigkills_and_final_shows_each_once() {
    let ch = ClickHouse::start();
    ch.query(&TABLE.replace("{name}", "events"));
    // Every insert, as it came: a plain MergeTree fed by the inserts
    // (merges of ReplacingMergeTree may fold duplicates before we look).
    // Its `sleep` holds each insert's answer 300 ms after the rows are in
    // `events`: a kill while rows are arriving lands in the window between
    // "ClickHouse has it" and "sluice recorded it", the window the
    // idempotent table exists for.
    ch.query(
        "CREATE MATERIALIZED VIEW arrivals ENGINE = MergeTree ORDER BY tuple() \
         AS SELECT event_id FROM events WHERE sleep(0.3) = 0",
    );
    let (text, good, bad_row, malformed) = table_lines(20_000, false);
    let f = Fixture::new(&text);
    let config = f.config(&ch, "events", "[sink.batch]\nmax_records = 1000\n");
    let rows_now = || ch.query("SELECT count() FROM events").trim().parse::<u64>().unwrap_or(0);

    // SIGKILL mid-run, three times, each once rows are arriving.
    let mut mid_run = 0;
    for _ in 0..3 {
        let mut child =
            f.command(&config).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap_or_else(|e| panic!("{e}"));
        let before = rows_now();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while rows_now() <= before {
            assert!(std::time::Instant::now() < deadline, "no rows arriving");
            if child.try_wait().ok().flatten().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if child.try_wait().ok().flatten().is_none() {
            mid_run += 1;
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(mid_run >= 2, "only {mid_run} of 3 kills came before the run ended");
    let stderr = f.run(&config);

    let all: Vec<String> = ch.lines("SELECT event_id FROM arrivals ORDER BY event_id");
    let finals: Vec<String> = ch.lines("SELECT event_id FROM events FINAL ORDER BY event_id");
    let final_set: BTreeSet<String> = finals.iter().cloned().collect();
    assert_eq!(finals.len(), final_set.len(), "FINAL shows each id once");
    let lost: Vec<_> = good.difference(&final_set).take(5).collect();
    assert!(lost.is_empty(), "ids lost: {lost:?}");
    let stray: Vec<_> = final_set.difference(&good).take(5).collect();
    assert!(stray.is_empty(), "rows that should not be there: {stray:?}");

    // The quarantine: the lines that are not JSON, and the rows ClickHouse
    // named "(at row N)", each with the server's reason.
    let q = f.quarantined();
    let mut q_malformed = BTreeSet::new();
    let mut q_rows = BTreeSet::new();
    for (payload, reason) in &q {
        match serde_json::from_str::<serde_json::Value>(payload) {
            Ok(v) => {
                assert!(reason.contains("Cannot parse input") || reason.contains("Code: "), "{reason}");
                q_rows.insert(v["event_id"].as_str().unwrap_or_default().to_string());
            }
            Err(_) => {
                q_malformed.insert(payload.clone());
            }
        }
    }
    assert_eq!(q_malformed, malformed);
    assert_eq!(q_rows, bad_row, "exactly the rows the table refused");
    let raw_duplicates = all.len() - finals.len();
    assert!(raw_duplicates > 0, "three kills mid-run left no duplicate at all: the kills missed the window they test");
    // Each duplicate has a cause: a kill can repeat at most the one insert
    // it interrupted (1,000 rows).
    assert!(raw_duplicates <= 3 * 1000, "{raw_duplicates} duplicates from 3 kills of one 1,000-row insert each");
    println!(
        "clickhouse: {mid_run} kills mid-run; {} ids, {} rows inserted ({raw_duplicates} duplicates \
         from the kills, folded by FINAL), {} bad rows and {} malformed lines quarantined",
        finals.len(),
        all.len(),
        q_rows.len(),
        q_malformed.len()
    );
    assert!(stderr.contains("\"records\":"), "{stderr}");
}

#[test]
fn schema_changes_never_stop_delivery() {
    let ch = ClickHouse::start();
    ch.query(&TABLE.replace("{name}", "drift"));
    let ts = now_rfc3339(0);
    let mut text = String::new();
    for i in 0..300 {
        let line = match i % 3 {
            // A field the table does not have (a new field upstream).
            0 => format!(
                "{{\"event_id\":\"ev-{i}\",\"ts\":\"{ts}\",\"n\":{i},\"msg\":\"m\",\"level\":\"warn\",\"trace_id\":\"t{i}\"}}"
            ),
            // Without a field the table has (`level`): the table's default.
            1 => format!("{{\"event_id\":\"ev-{i}\",\"ts\":\"{ts}\",\"n\":{i},\"msg\":\"m\"}}"),
            _ => format!("{{\"event_id\":\"ev-{i}\",\"ts\":\"{ts}\",\"n\":{i},\"msg\":\"m\",\"level\":\"error\"}}"),
        };
        text.push_str(&line);
        text.push('\n');
    }
    let f = Fixture::new(&text);
    f.run(&f.config(&ch, "drift", ""));
    let rows = ch.lines("SELECT n % 3, level, count() FROM drift FINAL GROUP BY n % 3, level ORDER BY n % 3");
    // ClickHouse before 19.12 fills an omitted JSONEachRow field with its
    // type's zero value; later ones apply the column's DEFAULT
    // (`input_format_defaults_for_omitted_fields`, on by default since 20).
    let version = ch.query("SELECT version()");
    let missing = if version.starts_with("18.") { "" } else { "info" };
    assert_eq!(
        rows,
        vec!["0\twarn\t100".to_string(), format!("1\t{missing}\t100"), "2\terror\t100".to_string()],
        "unknown fields skipped, missing ones defaulted (server {})",
        version.trim()
    );
    assert!(f.quarantined().is_empty());

    // With skip_unknown_fields = false, a row with a new field is the
    // data's fault: it alone goes to the quarantine, named by ClickHouse.
    ch.query(&TABLE.replace("{name}", "strict"));
    let g = Fixture::new(&text);
    g.run(&g.config(&ch, "strict", "skip_unknown_fields = false\n"));
    let delivered = ch.query("SELECT count() FROM strict FINAL");
    let q = g.quarantined();
    println!(
        "strict table: {} rows delivered, {} quarantined; a reason: {:?}",
        delivered.trim(),
        q.len(),
        q.values().next()
    );
    assert_eq!(delivered.trim(), "200");
    assert_eq!(q.len(), 100);
    assert!(q.values().all(|r| r.contains("trace_id")), "{:?}", q.values().next());
}

#[test]
fn a_missing_table_waits_behind_the_breaker_instead_of_quarantining() {
    let ch = ClickHouse::start();
    let ts = now_rfc3339(0);
    let text: String =
        (0..100).map(|i| format!("{{\"event_id\":\"ev-{i}\",\"ts\":\"{ts}\",\"n\":{i},\"msg\":\"m\"}}\n")).collect();
    let f = Fixture::new(&text);
    let config = f.config(&ch, "late", "[sink.breaker]\ninitial_probe = \"200ms\"\nmax_probe = \"400ms\"\n[sink.retry]\ninitial_backoff = \"10ms\"\nmax_backoff = \"20ms\"\n");
    let child =
        f.command(&config).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap_or_else(|e| panic!("{e}"));
    // The operator forgot the table; it appears two seconds later.
    std::thread::sleep(Duration::from_secs(2));
    ch.query(&TABLE.replace("{name}", "late"));
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("circuit breaker opened"), "{stderr}");
    assert!(stderr.contains("circuit breaker closed"), "{stderr}");
    assert_eq!(ch.query("SELECT count() FROM late FINAL").trim(), "100");
    assert!(f.quarantined().is_empty(), "a config error is the backend's, not the records'");
}

/// `check --connect` runs an insert of no rows: it proves the server is
/// there, takes the user, and has the table, and writes nothing.
#[test]
fn check_connect_names_a_refused_password_and_a_missing_table() {
    let ch = ClickHouse::start();
    ch.query(&TABLE.replace("{name}", "probed"));
    let f = Fixture::new("");
    let check = |table: &str, password: &str| {
        let config = f.config(&ch, table, "");
        let out = Command::new(sluice_bin!())
            .args(["check", "--connect", "-c", &config.display().to_string()])
            .current_dir(f.dir.path())
            .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
            .env("SLUICE_CH_PASSWORD", password)
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(f.dir.path().join("input.log"), "").unwrap_or_else(|e| panic!("{e}"));
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (code, out) = check("probed", "s3cret");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("connect: sink clickhouse") && out.contains(": ok (HTTP 200"), "{out}");
    assert_eq!(ch.query("SELECT count() FROM probed").trim(), "0", "the probe inserts nothing");
    let (code, out) = check("probed", "wrong");
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("FAILED (HTTP") && out.contains("sluice"), "names the refused user: {out}");
    let (code, out) = check("absent", "s3cret");
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("FAILED (HTTP") && out.contains("absent") && out.contains("doesn't exist"), "{out}");
    println!("{out}");
}

/// Issue 25, item 3: ClickHouse behind a black hole for 30 s mid-run (a
/// fault proxy throws every byte away both ways; new connections reach
/// nothing). Inserts time out, the breaker opens, nothing arrives; when the
/// route is back the rest arrives. Every good id in the table, the bad rows
/// and lines quarantined, and the only raw duplicates are inserts the hole
/// swallowed the answers of (folded by FINAL).
#[test]
fn clickhouse_behind_a_30_s_black_hole_is_waited_for_and_nothing_is_lost() {
    use sluice_e2e::proxy::{FaultProxy, Link};
    let ch = ClickHouse::start();
    ch.query(&TABLE.replace("{name}", "events"));
    ch.query("CREATE MATERIALIZED VIEW arrivals ENGINE = MergeTree ORDER BY tuple() AS SELECT event_id FROM events");
    let upstream = ch.url().trim_start_matches("http://").parse().unwrap_or_else(|e| panic!("{e}"));
    let proxy = FaultProxy::start(upstream);
    // Slowed, so that the hole opens mid-run.
    proxy.set(Link::Delay(Duration::from_millis(100)));
    let (text, good, bad_row, malformed) = table_lines(20_000, false);
    let f = Fixture::new(&text);
    let config = f.config(&ch, "events", "[sink.batch]\nmax_records = 500\n[sink.request]\ntimeout = \"2s\"\n");
    let text =
        std::fs::read_to_string(&config).unwrap_or_default().replace(&ch.url(), &format!("http://{}", proxy.addr()));
    std::fs::write(&config, text).unwrap_or_else(|e| panic!("{e}"));
    let arrived = || ch.query("SELECT count() FROM arrivals").trim().parse::<u64>().unwrap_or(0);
    let (stderr, (at_open, at_close)) = std::thread::scope(|scope| {
        let cutter = scope.spawn(|| {
            while arrived() < 2_000 {
                std::thread::sleep(Duration::from_millis(10));
            }
            proxy.set(Link::Blackhole);
            // What was on its way when the hole opened lands within a second.
            std::thread::sleep(Duration::from_secs(1));
            let at_open = arrived();
            std::thread::sleep(Duration::from_secs(29));
            let at_close = arrived();
            proxy.set(Link::Pass);
            (at_open, at_close)
        });
        let stderr = f.run(&config);
        (stderr, cutter.join().unwrap_or_else(|_| panic!("the cutter failed")))
    });
    assert_eq!(at_open, at_close, "rows arrived through the black hole");
    assert!(stderr.contains("circuit breaker opened") && stderr.contains("circuit breaker closed"), "{stderr}");
    let all = ch.lines("SELECT event_id FROM arrivals");
    let finals: BTreeSet<String> = ch.lines("SELECT event_id FROM events FINAL").into_iter().collect();
    let lost: Vec<_> = good.difference(&finals).take(5).collect();
    assert!(lost.is_empty(), "ids lost: {lost:?}");
    let stray: Vec<_> = finals.difference(&good).take(5).collect();
    assert!(stray.is_empty(), "rows that should not be there: {stray:?}");
    let q = f.quarantined();
    let q_rows: BTreeSet<String> = q
        .keys()
        .filter_map(|p| serde_json::from_str::<serde_json::Value>(p).ok())
        .map(|v| v["event_id"].as_str().unwrap_or_default().to_string())
        .collect();
    let q_malformed: BTreeSet<String> =
        q.keys().filter(|p| serde_json::from_str::<serde_json::Value>(p).is_err()).cloned().collect();
    assert_eq!((q_rows, q_malformed), (bad_row, malformed), "the quarantine holds the bad rows and lines");
    let duplicates = all.len() - finals.len();
    // An insert whose answer the hole took is sent again: at most the
    // inserts in flight when it opened.
    assert!(duplicates <= 4 * 500, "{duplicates} raw duplicates");
    println!(
        "clickhouse behind a 30 s black hole: {} ids, {} rows inserted ({duplicates} duplicates from answers the hole \
         took, folded by FINAL), {} bytes swallowed, 0 lost",
        finals.len(),
        all.len(),
        proxy.swallowed()
    );
}
