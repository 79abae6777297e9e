//! The postgres sink against a real PostgreSQL (Debian's 15, a cluster made
//! and started by `sluice_e2e::postgres` on a free loopback port, password
//! authentication over TCP). Ids are reconciled in the table against the
//! ids written, after SIGKILLs of sluice mid-run: `ON CONFLICT (event_id)
//! DO NOTHING` makes every resend a no-op, so the table holds each id once
//! and the conflicts it absorbed are counted by a trigger.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sluice_e2e::postgres::{PASSWORD, Postgres};
use sluice_e2e::{json_chain_toml, now_rfc3339, quarantine_entries, sluice_bin, table_lines};

/// `n NOT NULL`: an event without it is refused by the database (23502);
/// `n integer`: an event whose n is not a number too (22P02). A BEFORE
/// INSERT trigger counts every row offered, conflicts included (a row
/// refused or rolled back takes its count with it).
const TABLE: &str = "
CREATE TABLE events (
    event_id text PRIMARY KEY,
    ts timestamptz,
    n integer NOT NULL,
    msg text,
    level text DEFAULT 'info',
    received timestamptz DEFAULT now()
);
CREATE TABLE offered (event_id text);
CREATE FUNCTION count_offer() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO offered VALUES (NEW.event_id); RETURN NEW; END $$;
CREATE TRIGGER offered BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION count_offer();
";

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new(lines: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("input.log"), lines).unwrap_or_else(|e| panic!("{e}"));
        Fixture { dir }
    }

    fn config(&self, pg: &Postgres, table: &str, extra: &str) -> PathBuf {
        let cfg = format!(
            "[pipeline]\nname = \"pg-e2e\"\nstate_dir = \"state\"\nbatch_size = 1000\n\n[source]\ntype = \"file\"\npaths = [\"input*.log\"]\n\n{}\n\
             [sink]\ntype = \"postgres\"\nurl = \"{}\"\npassword_env = \"SLUICE_PG_PASSWORD\"\ntable = \"{table}\"\n\
             timestamp_column = \"ts\"\n{extra}\n\
             [sink.breaker]\ninitial_probe = \"200ms\"\nmax_probe = \"400ms\"\n[sink.retry]\ninitial_backoff = \"10ms\"\nmax_backoff = \"20ms\"\n",
            json_chain_toml(true, None),
            pg.url()
        );
        let path = self.dir.path().join("sluice.toml");
        std::fs::write(&path, cfg).unwrap_or_else(|e| panic!("{e}"));
        path
    }

    fn command(&self, config: &std::path::Path, password: &str) -> Command {
        let mut c = Command::new(sluice_bin!());
        c.args(["run", "-c", &config.display().to_string(), "--summary", "json"])
            .current_dir(self.dir.path())
            .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
            .env("SLUICE_PG_PASSWORD", password)
            .env("SLUICE_LOG", "info")
            .stdin(Stdio::null());
        c
    }

    fn run(&self, config: &std::path::Path) -> String {
        let out = self.command(config, PASSWORD).output().unwrap_or_else(|e| panic!("{e}"));
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "sluice run failed:\n{stderr}");
        stderr
    }

    fn quarantined(&self) -> BTreeMap<String, String> {
        quarantine_entries(&self.dir.path().join("state")).into_iter().collect()
    }
}

#[test]
fn ids_reconcile_after_sigkills_with_each_row_once_and_refused_rows_alone_in_the_quarantine() {
    let pg = Postgres::start();
    pg.execute(TABLE);
    let (text, good, bad_row, malformed) = table_lines(20_000, true);
    let f = Fixture::new(&text);
    let config = f.config(&pg, "events", "");
    let rows_now = || pg.column("SELECT count(*) FROM events").first().and_then(|c| c.parse::<u64>().ok()).unwrap_or(0);

    // SIGKILL mid-run, three times, each once rows are arriving.
    let mut mid_run = 0;
    for _ in 0..3 {
        let mut child = f
            .command(&config, PASSWORD)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        let before = rows_now();
        let deadline = Instant::now() + Duration::from_secs(60);
        while rows_now() <= before {
            assert!(Instant::now() < deadline, "no rows arriving: {}", pg.log_tail());
            if child.try_wait().ok().flatten().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        if child.try_wait().ok().flatten().is_none() {
            mid_run += 1;
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(mid_run >= 2, "only {mid_run} of 3 kills came before the run ended");
    let stderr = f.run(&config);

    let rows: Vec<String> = pg.column("SELECT event_id FROM events ORDER BY event_id");
    let row_set: BTreeSet<String> = rows.iter().cloned().collect();
    assert_eq!(rows.len(), row_set.len(), "each id once: the primary key");
    let lost: Vec<_> = good.difference(&row_set).take(5).collect();
    assert!(lost.is_empty(), "ids lost: {lost:?}");
    let stray: Vec<_> = row_set.difference(&good).take(5).collect();
    assert!(stray.is_empty(), "rows that should not be there: {stray:?}");
    let levels =
        pg.column("SELECT count(*) FROM events WHERE level = 'warn' AND received IS NOT NULL AND n IS NOT NULL");
    assert_eq!(levels, vec![good.len().to_string()], "fields to columns, defaults kept");

    // The quarantine: the lines that are not JSON, and the rows the
    // database refused, each with its SQLSTATE.
    let q = f.quarantined();
    let (mut q_rows, mut q_malformed) = (BTreeSet::new(), BTreeSet::new());
    for (payload, reason) in &q {
        match serde_json::from_str::<serde_json::Value>(payload) {
            Ok(v) => {
                assert!(reason.contains("postgres 22P02") || reason.contains("postgres 23502"), "{reason}");
                q_rows.insert(v["event_id"].as_str().unwrap_or_default().to_string());
            }
            Err(_) => {
                q_malformed.insert(payload.clone());
            }
        }
    }
    assert_eq!(q_malformed, malformed);
    assert_eq!(q_rows, bad_row, "exactly the rows the table refused");
    // Every offer beyond the rows is a resend ON CONFLICT absorbed: at
    // most the batches in flight at a kill (1,000 rows each, 4 in flight).
    let offered: u64 = pg.column("SELECT count(*) FROM offered").first().and_then(|c| c.parse().ok()).unwrap_or(0);
    let absorbed = offered - rows.len() as u64;
    assert!(absorbed <= 3 * 4 * 1000, "{absorbed} conflicts from 3 kills");
    println!(
        "postgres: {mid_run} kills mid-run; {} ids, each once; {absorbed} resent rows absorbed by ON CONFLICT; \
         {} refused rows and {} malformed lines quarantined",
        rows.len(),
        q_rows.len(),
        q_malformed.len()
    );
    assert!(stderr.contains("\"records\":"), "{stderr}");

    // The state lost (a new volume, a store restored from an old backup):
    // the whole file is read and sent again, and every row conflicts with
    // its own id. The table is unchanged; every resend is absorbed.
    std::fs::remove_dir_all(f.dir.path().join("state")).unwrap_or_else(|e| panic!("{e}"));
    f.run(&config);
    let again: Vec<String> = pg.column("SELECT event_id FROM events ORDER BY event_id");
    assert_eq!(again, rows, "a replay of everything changes nothing");
    let offered_after: u64 =
        pg.column("SELECT count(*) FROM offered").first().and_then(|c| c.parse().ok()).unwrap_or(0);
    assert_eq!(offered_after - offered, good.len() as u64, "each good record offered once more, and absorbed");
    println!("postgres: a replay without state offered {} rows again, 0 new", offered_after - offered);
}

/// Events `ids` with an `n` the table takes.
fn plain_events(ids: std::ops::Range<usize>) -> String {
    let ts = now_rfc3339(0);
    ids.map(|i| format!("{{\"event_id\":\"ev-{i}\",\"ts\":\"{ts}\",\"n\":{i},\"msg\":\"m\"}}\n")).collect()
}

/// Runs sluice over `ids` with `password`; two seconds in, `fix` runs;
/// returns the fixture and what sluice logged. With `kill`, sluice is
/// stopped after `fix` instead of left to finish.
fn run_across_a_fault(
    pg: &Postgres,
    ids: std::ops::Range<usize>,
    password: &str,
    fix: impl FnOnce(),
    kill: bool,
) -> (Fixture, String) {
    let f = Fixture::new(&plain_events(ids));
    let config = f.config(pg, "events", "");
    let mut child = f
        .command(&config, password)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    std::thread::sleep(Duration::from_secs(2));
    fix();
    if kill {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !kill {
        assert_eq!(out.status.code(), Some(0), "{stderr}");
    }
    (f, stderr)
}

/// A missing table, a refused password, a read-only server: the records
/// wait behind the breaker, none is quarantined, and each arrives once
/// the fault is fixed.
#[test]
fn a_missing_table_a_refused_password_and_a_read_only_server_wait_and_quarantine_nothing() {
    let pg = Postgres::start();

    // The operator forgot the table; it appears two seconds later.
    let (f, stderr) = run_across_a_fault(&pg, 0..300, PASSWORD, || pg.execute(TABLE), false);
    assert!(stderr.contains("circuit breaker opened") && stderr.contains("42P01"), "{stderr}");
    assert_eq!(pg.column("SELECT count(*) FROM events"), vec!["300"]);
    assert!(f.quarantined().is_empty(), "a missing table is the backend's, not the records'");

    // A read-only database for two seconds (a standby, a full disk's
    // emergency switch).
    pg.execute("ALTER DATABASE postgres SET default_transaction_read_only = on");
    let writable =
        || pg.execute("BEGIN READ WRITE; ALTER DATABASE postgres SET default_transaction_read_only = off; COMMIT;");
    let (g, stderr) = run_across_a_fault(&pg, 300..600, PASSWORD, writable, false);
    assert!(stderr.contains("25006"), "the read-only refusal is named: {stderr}");
    assert_eq!(pg.column("SELECT count(*) FROM events"), vec!["600"]);
    assert!(g.quarantined().is_empty());

    // A wrong password for two seconds, then sluice restarted with the
    // right one (a rotated secret).
    let (h, stderr) = run_across_a_fault(&pg, 600..700, "wrong", || {}, true);
    assert!(stderr.contains("28P01"), "{stderr}");
    assert!(
        !stderr.contains("\"wrong\"") && !stderr.contains("=wrong"),
        "the password never reaches the log: {stderr}"
    );
    assert!(h.quarantined().is_empty(), "refused credentials quarantine nothing");
    h.run(&h.config(&pg, "events", ""));
    assert_eq!(pg.column("SELECT count(*) FROM events"), vec!["700"]);
}

/// A row a trigger discards (`BEFORE INSERT … RETURN NULL`) is neither
/// inserted nor an error: it must not count as "already there". It is
/// quarantined with the reason; its neighbours are delivered.
#[test]
fn a_row_a_trigger_discards_is_quarantined_not_taken_for_a_duplicate() {
    let pg = Postgres::start();
    pg.execute(TABLE);
    pg.execute(
        "CREATE FUNCTION discard_seven() RETURNS trigger LANGUAGE plpgsql AS $$ \
         BEGIN IF NEW.n % 7 = 3 THEN RETURN NULL; END IF; RETURN NEW; END $$; \
         CREATE TRIGGER discard BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION discard_seven();",
    );
    let f = Fixture::new(&plain_events(0..100));
    f.run(&f.config(&pg, "events", ""));
    let rows: BTreeSet<String> = pg.column("SELECT event_id FROM events").into_iter().collect();
    let q: BTreeSet<String> = f
        .quarantined()
        .into_iter()
        .map(|(payload, reason)| {
            assert!(reason.contains("neither inserted nor there"), "{reason}");
            serde_json::from_str::<serde_json::Value>(&payload).unwrap_or_default()["event_id"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    let discarded: BTreeSet<String> = (0..100).filter(|i| i % 7 == 3).map(|i| format!("ev-{i}")).collect();
    assert_eq!(q, discarded, "every discarded row is in the quarantine");
    assert_eq!(rows.len() + q.len(), 100, "every id is in the table or the quarantine");
    assert!(rows.is_disjoint(&q));
}

/// `check --connect` connects, prepares the insert and checks the key,
/// writing nothing; it names what is wrong.
#[test]
fn check_connect_names_a_refused_password_a_missing_table_and_a_missing_key() {
    let pg = Postgres::start();
    pg.execute(TABLE);
    pg.execute("CREATE TABLE unkeyed (event_id text, n integer)");
    let f = Fixture::new("");
    let check = |table: &str, password: &str| {
        let config = f.config(&pg, table, "");
        let out = Command::new(sluice_bin!())
            .args(["check", "--connect", "-c", &config.display().to_string()])
            .current_dir(f.dir.path())
            .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
            .env("SLUICE_PG_PASSWORD", password)
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (code, out) = check("events", PASSWORD);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("connect: sink postgres") && out.contains("keyed on event_id"), "{out}");
    assert_eq!(pg.column("SELECT count(*) FROM events"), vec!["0"], "the probe inserts nothing");
    let (code, out) = check("events", "wrong");
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("28P01"), "names the refused password: {out}");
    let (code, out) = check("absent", PASSWORD);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("42P01") && out.contains("absent"), "{out}");
    let (code, out) = check("unkeyed", PASSWORD);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("no primary key or unique index"), "{out}");
}

/// `[sink.tls]` against a server that takes TLS only: with the server's
/// CA every id arrives; without TLS the server refuses the connection, and
/// with another CA the certificate is refused; both named by `check
/// --connect`, neither quarantines a record.
#[test]
fn tls_verified_against_the_ca_delivers_and_a_plain_or_unverified_connection_is_refused() {
    let (cert, key) = sluice_e2e::tls::self_signed();
    let pg = Postgres::start_tls(&cert, &key);
    pg.execute(TABLE);
    let (text, ids, bad_rows, malformed) = table_lines(300, false);
    let f = Fixture::new(&text);
    let ca = f.dir.path().join("ca.pem");
    std::fs::write(&ca, &cert).unwrap_or_else(|e| panic!("{e}"));
    let (other, _) = sluice_e2e::tls::self_signed();
    let other_ca = f.dir.path().join("other-ca.pem");
    std::fs::write(&other_ca, &other).unwrap_or_else(|e| panic!("{e}"));
    let check = |extra: &str| {
        let config = f.config(&pg, "events", extra);
        let out = Command::new(sluice_bin!())
            .args(["check", "--connect", "-c", &config.display().to_string()])
            .current_dir(f.dir.path())
            .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
            .env("SLUICE_PG_PASSWORD", PASSWORD)
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        (out.status.code().unwrap_or(-1), said)
    };
    let (code, out) = check("");
    assert_eq!(code, 3, "a plain connection is refused by a TLS-only server: {out}");
    assert!(out.contains("no encryption") || out.contains("pg_hba"), "{out}");
    let (code, out) = check("[sink.tls]\nca = \"other-ca.pem\"\n");
    assert_eq!(code, 3, "another CA: {out}");
    assert!(out.to_lowercase().contains("certificate"), "{out}");
    let (code, out) = check("[sink.tls]\nca = \"ca.pem\"\n");
    assert_eq!(code, 0, "{out}");
    f.run(&f.config(&pg, "events", "[sink.tls]\nca = \"ca.pem\"\n"));
    let stored: BTreeSet<String> = pg.column("SELECT event_id FROM events").into_iter().collect();
    let missing: Vec<_> = ids.difference(&stored).take(5).collect();
    assert!(missing.is_empty(), "ids lost over TLS: {missing:?}");
    assert_eq!(stored, ids, "exactly the good ids, each once");
    assert_eq!(
        f.quarantined().len(),
        bad_rows.len() + malformed.len(),
        "only the rows the database or the parser refused"
    );
    println!(
        "postgres over TLS: {} ids delivered; plain and wrong-CA connections refused by check --connect",
        stored.len()
    );
}
