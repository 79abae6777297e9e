//! A real ClickHouse for the suites: Debian's `clickhouse-server` (18.16),
//! started here with its data in a temporary folder, HTTP on a free
//! loopback port, and stopped by its process id. `.ci/run` installs it
//! (`scripts/setup`); a missing server fails the suite loudly.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::kafka::free_port;

pub fn server_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("SLUICE_CLICKHOUSE") {
        return PathBuf::from(p);
    }
    let mut dirs: Vec<PathBuf> =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    dirs.push("/usr/sbin".into());
    dirs.push("/usr/bin".into());
    dirs.into_iter().map(|d| d.join("clickhouse-server")).find(|p| p.is_file()).unwrap_or_else(|| {
        panic!("clickhouse-server is not installed: run scripts/setup (apt-get install clickhouse-server), or set SLUICE_CLICKHOUSE")
    })
}

pub struct ClickHouse {
    child: Child,
    pub port: u16,
    dir: tempfile::TempDir,
    runtime: tokio::runtime::Runtime,
    client: reqwest::Client,
}

const USERS: &str = r#"<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>2000000000</max_memory_usage></default></profiles>
  <users>
    <default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default>
    <sluice><password>s3cret</password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></sluice>
  </users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
"#;

impl ClickHouse {
    pub fn start() -> ClickHouse {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = dir.path();
        for sub in ["data", "tmp", "log", "user_files"] {
            std::fs::create_dir_all(d.join(sub)).unwrap_or_else(|e| panic!("{e}"));
        }
        let port = free_port();
        let tcp = free_port();
        std::fs::write(d.join("users.xml"), USERS).unwrap_or_else(|e| panic!("{e}"));
        let p = |s: &str| d.join(s).display().to_string();
        let config = format!(
            r#"<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>{log}</log><errorlog>{err}</errorlog><console>0</console></logger>
  <http_port>{port}</http_port>
  <tcp_port>{tcp}</tcp_port>
  <listen_host>127.0.0.1</listen_host>
  <path>{data}/</path>
  <tmp_path>{tmp}/</tmp_path>
  <user_files_path>{files}/</user_files_path>
  <users_config>{users}</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>268435456</mark_cache_size>
  <max_concurrent_queries>100</max_concurrent_queries>
</yandex>
"#,
            log = p("log/server.log"),
            err = p("log/err.log"),
            data = p("data"),
            tmp = p("tmp"),
            files = p("user_files"),
            users = p("users.xml"),
        );
        std::fs::write(d.join("config.xml"), config).unwrap_or_else(|e| panic!("{e}"));
        let child = Command::new(server_bin())
            .arg(format!("--config-file={}", d.join("config.xml").display()))
            .current_dir(d)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("log/stderr")).map(Stdio::from).unwrap_or(Stdio::null()))
            .spawn()
            .unwrap_or_else(|e| panic!("start clickhouse-server: {e}"));
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap_or_else(|e| panic!("{e}"));
        // No idle connections: this runtime only runs inside `block_on`, so
        // hyper cannot notice that the server closed a pooled connection
        // (ClickHouse closes one idle for 10 s) while the test was
        // running sluice, and the next query would fail on a dead socket.
        let client =
            reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap_or_else(|e| panic!("http client: {e}"));
        let mut ch = ClickHouse { child, port, dir, runtime, client };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if ch.ping() {
                break;
            }
            if let Ok(Some(status)) = ch.child.try_wait() {
                panic!("clickhouse-server exited at start ({status}): {}", ch.log_tail());
            }
            assert!(Instant::now() < deadline, "clickhouse-server did not answer /ping in 60 s: {}", ch.log_tail());
            std::thread::sleep(Duration::from_millis(200));
        }
        ch
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn ping(&self) -> bool {
        let url = format!("{}/ping", self.url());
        self.runtime.block_on(async { self.client.get(url).send().await.is_ok_and(|r| r.status().is_success()) })
    }

    fn running(&self) -> bool {
        // `try_wait` needs `&mut`; /proc answers without it (a dead child
        // not yet waited for is a zombie, state Z).
        std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .is_ok_and(|stat| stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
    }

    fn log_tail(&self) -> String {
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        let text = read(&self.dir.path().join("log/err.log")) + &read(&self.dir.path().join("log/stderr"));
        text.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// Run `sql`; panics with ClickHouse's message on an error.
    pub fn query(&self, sql: &str) -> String {
        let url = self.url();
        let answer = self.runtime.block_on(async {
            let r = self.client.post(url).body(sql.to_string()).send().await?;
            Ok::<_, reqwest::Error>((r.status(), r.text().await.unwrap_or_default()))
        });
        let (status, text) = answer.unwrap_or_else(|e| {
            panic!("{sql}: {e:?}; clickhouse-server running: {}; its log:\n{}", self.running(), self.log_tail())
        });
        assert!(status.is_success(), "{sql}: HTTP {status}: {text}");
        text
    }

    /// The rows of `sql` as lines.
    pub fn lines(&self, sql: &str) -> Vec<String> {
        self.query(sql).lines().map(str::to_string).collect()
    }
}

impl Drop for ClickHouse {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
