//! A real PostgreSQL for the suites: Debian's `postgresql` (15), a cluster
//! made here with `initdb` in a temporary folder, the server on a free
//! loopback port with password (SCRAM) authentication over TCP, stopped by
//! its process id. `.ci/run` installs it (`scripts/setup`); a missing
//! server fails the suite loudly.
//!
//! PostgreSQL refuses to run as root: under root (CI, these machines) the
//! cluster is made and run as the `postgres` user the package creates.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::kafka::free_port;

/// The superuser the suites connect as, and its password.
pub const USER: &str = "postgres";
pub const PASSWORD: &str = "pg-s3cret";

/// The folder of `initdb` and `postgres`: `SLUICE_POSTGRES_BIN`, else the
/// newest `/usr/lib/postgresql/*/bin`.
pub fn bin_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("SLUICE_POSTGRES_BIN") {
        return PathBuf::from(p);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path().join("bin"))).filter(|p| p.join("postgres").is_file()).collect()
        })
        .unwrap_or_default();
    found.sort_by_key(|p| {
        p.parent().and_then(|v| v.file_name()).and_then(|v| v.to_str()).and_then(|v| v.parse::<u32>().ok())
    });
    found.pop().unwrap_or_else(|| {
        panic!(
            "PostgreSQL is not installed: run scripts/setup (apt-get install postgresql), or set SLUICE_POSTGRES_BIN"
        )
    })
}

/// Who runs the server: the `postgres` user when we are root.
fn owner() -> Option<(u32, u32)> {
    let out = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&out.stdout).trim() != "0" {
        return None;
    }
    let id = |flag: &str| -> Option<u32> {
        let o = Command::new("id").args([flag, "postgres"]).output().ok()?;
        String::from_utf8_lossy(&o.stdout).trim().parse().ok()
    };
    Some((id("-u").unwrap_or_else(|| panic!("running as root and there is no postgres user")), id("-g")?))
}

pub struct Postgres {
    child: Child,
    pub port: u16,
    dir: tempfile::TempDir,
}

impl Postgres {
    pub fn start() -> Postgres {
        Postgres::start_with(None)
    }

    /// A server that takes TCP connections over TLS only (`hostssl` in
    /// `pg_hba.conf`, `ssl = on`), with this certificate and key (PEM): a
    /// client that does not speak TLS is refused, so a passing run proves
    /// the connection was encrypted.
    pub fn start_tls(cert: &[u8], key: &[u8]) -> Postgres {
        Postgres::start_with(Some((cert, key)))
    }

    fn start_with(tls: Option<(&[u8], &[u8])>) -> Postgres {
        let bin = bin_dir();
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let owner = owner();
        let as_owner = |c: &mut Command| {
            if let Some((uid, gid)) = owner {
                c.uid(uid).gid(gid);
            }
        };
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap_or_else(|e| panic!("chown: {e}"));
        }
        let pwfile = dir.path().join("pw");
        std::fs::write(&pwfile, PASSWORD).unwrap_or_else(|e| panic!("{e}"));
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(&pwfile, Some(uid), Some(gid)).unwrap_or_else(|e| panic!("chown: {e}"));
        }
        let data = dir.path().join("data");
        let mut initdb = Command::new(bin.join("initdb"));
        initdb
            .args(["-D", &data.display().to_string(), "-U", USER, "--auth-local=trust", "--auth-host=scram-sha-256"])
            .arg(format!("--pwfile={}", pwfile.display()))
            .args(["--encoding=UTF8", "--locale=C.UTF-8"])
            .current_dir(dir.path())
            .stdin(Stdio::null());
        as_owner(&mut initdb);
        let out = initdb.output().unwrap_or_else(|e| panic!("initdb: {e}"));
        assert!(
            out.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let mut tls_args = Vec::new();
        if let Some((cert, key)) = tls {
            use std::os::unix::fs::PermissionsExt;
            for (name, pem) in [("server.crt", cert), ("server.key", key)] {
                let path = data.join(name);
                std::fs::write(&path, pem).unwrap_or_else(|e| panic!("{e}"));
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                    .unwrap_or_else(|e| panic!("{e}"));
                if let Some((uid, gid)) = owner {
                    std::os::unix::fs::chown(&path, Some(uid), Some(gid)).unwrap_or_else(|e| panic!("chown: {e}"));
                }
            }
            let hba = data.join("pg_hba.conf");
            let text = std::fs::read_to_string(&hba).unwrap_or_else(|e| panic!("{e}"));
            let text: String = text
                .lines()
                .map(|l| if l.starts_with("host ") { l.replacen("host ", "hostssl ", 1) } else { l.to_string() })
                .map(|l| l + "\n")
                .collect();
            std::fs::write(&hba, text).unwrap_or_else(|e| panic!("{e}"));
            tls_args = vec!["-c".to_string(), "ssl=on".to_string()];
        }
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("server.log")).unwrap_or_else(|e| panic!("{e}"));
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(dir.path().join("server.log"), Some(uid), Some(gid))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let mut server = Command::new(bin.join("postgres"));
        server
            .args(["-D", &data.display().to_string(), "-p", &port.to_string()])
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                &format!("unix_socket_directories={}", dir.path().display()),
            ])
            .args(&tls_args)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log));
        as_owner(&mut server);
        let child = server.spawn().unwrap_or_else(|e| panic!("start postgres: {e}"));
        let mut pg = Postgres { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if pg.client().is_ok() {
                break;
            }
            if let Ok(Some(status)) = pg.child.try_wait() {
                panic!("postgres exited at start ({status}): {}", pg.log_tail());
            }
            assert!(Instant::now() < deadline, "postgres did not answer in 60 s: {}", pg.log_tail());
            std::thread::sleep(Duration::from_millis(200));
        }
        pg
    }

    /// `postgresql://postgres@127.0.0.1:PORT/postgres`, without the password.
    pub fn url(&self) -> String {
        format!("postgresql://{USER}@127.0.0.1:{}/postgres", self.port)
    }

    /// The suite's own connection, over the cluster's Unix socket (trusted,
    /// and open on a TLS-only server too).
    pub fn client(&self) -> Result<postgres::Client, postgres::Error> {
        let mut c = postgres::Config::new();
        c.host_path(self.dir.path())
            .port(self.port)
            .user(USER)
            .dbname("postgres")
            .connect_timeout(Duration::from_secs(5));
        c.connect(postgres::NoTls)
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
        text.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// Run statements; panics with the server's message.
    pub fn execute(&self, sql: &str) {
        let mut c = self.client().unwrap_or_else(|e| panic!("connect: {e}"));
        c.batch_execute(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// The first column of each row of `sql`, as text.
    pub fn column(&self, sql: &str) -> Vec<String> {
        let mut c = self.client().unwrap_or_else(|e| panic!("connect: {e}"));
        c.simple_query(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .into_iter()
            .filter_map(|m| match m {
                postgres::SimpleQueryMessage::Row(r) => Some(r.get(0).unwrap_or_default().to_string()),
                _ => None,
            })
            .collect()
    }

    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    /// Stops the server (smart shutdown waits for clients: SIGINT is the
    /// fast one).
    pub fn stop(&mut self) {
        let _ = Command::new("kill").args(["-INT", &self.child.id().to_string()]).status();
        let _ = self.child.wait();
    }

    /// Starts it again on the same port and data.
    pub fn restart(&mut self) {
        self.stop();
        let bin = bin_dir();
        let data = self.dir.path().join("data");
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.path().join("server.log"))
            .unwrap_or_else(|e| panic!("{e}"));
        let mut server = Command::new(bin.join("postgres"));
        server
            .args(["-D", &data.display().to_string(), "-p", &self.port.to_string()])
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                &format!("unix_socket_directories={}", self.dir.path().display()),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log));
        if let Some((uid, gid)) = owner() {
            server.uid(uid).gid(gid);
        }
        self.child = server.spawn().unwrap_or_else(|e| panic!("restart postgres: {e}"));
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.client().is_err() {
            assert!(Instant::now() < deadline, "postgres did not come back: {}", self.log_tail());
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}
