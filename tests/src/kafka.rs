//! A real Kafka-protocol broker for the suites: tansu, started here on a
//! free loopback port and stopped by its process id. `.ci/run` installs it
//! (`scripts/setup`); a missing broker fails the suite loudly, it is never
//! skipped.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};

/// The tansu program: `$SLUICE_TANSU`, else `tansu` on PATH (or in
/// ~/.cargo/bin).
pub fn tansu_bin() -> PathBuf {
    program("SLUICE_TANSU", "tansu", "cargo install tansu --locked --features dynostore,libsql")
}

/// The nisshi program (tansu renamed, from 0.7): `$SLUICE_NISSHI`, else
/// `nisshi` on PATH (or in ~/.cargo/bin). The suites that need Kafka
/// transactions run on it: tansu 0.6 routes no EndTxn, so no transaction
/// can end there.
pub fn nisshi_bin() -> PathBuf {
    program(
        "SLUICE_NISSHI",
        "nisshi",
        "cargo install nisshi --version 0.7.0 --locked --ignore-rust-version --no-default-features --features \
         dynostore,libsql",
    )
}

/// A broker program: `$env`, else `name` on PATH or in ~/.cargo/bin.
fn program(env: &str, name: &str, install: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(env) {
        return PathBuf::from(p);
    }
    let mut dirs: Vec<PathBuf> =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(Path::new(&home).join(".cargo/bin"));
    }
    dirs.into_iter()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("the {name} broker is not installed: run scripts/setup ({install}), or set {env}"))
}

/// What the suites' own clients need beyond the address to reach a
/// broker that asks for credentials or TLS, by the address it advertises:
/// the helpers below (`produce`, `committed`…) connect as its tests do.
static CLIENT_PROPERTIES: std::sync::Mutex<Vec<(String, Properties)>> = std::sync::Mutex::new(Vec::new());

/// librdkafka properties, in the order they are set.
type Properties = Vec<(String, String)>;

/// A client config for `brokers`, with what that broker asks of clients.
pub fn client(brokers: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", brokers);
    let known = CLIENT_PROPERTIES.lock().unwrap_or_else(|p| p.into_inner());
    for (_, props) in known.iter().filter(|(b, _)| b == brokers) {
        for (k, v) in props {
            c.set(k, v);
        }
    }
    c
}

fn set_client_properties(brokers: &str, props: &[(&str, &str)]) {
    let mut known = CLIENT_PROPERTIES.lock().unwrap_or_else(|p| p.into_inner());
    known.retain(|(b, _)| b != brokers);
    known.push((brokers.to_string(), props.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()));
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or_else(|e| panic!("{e}"))
}

/// Where the broker keeps its records.
///
/// Suites that read records use `Sqlite`. tansu 0.6's memory storage
/// answers a fetch from an offset inside a record batch with the batches
/// that start after it (tansu-storage `dynostore.rs`, `fetch`:
/// `offsets.split_off(&offset)`), so a consumer that resumes mid-batch (a
/// restart at a committed offset, a resume after a pause) skips the rest of
/// that batch or waits forever; its ListOffsets also reports a wrong high
/// watermark. Found by these suites; the SQLite storage stores records one
/// by one and has neither defect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    /// For tests that read no records (group membership, topic configs).
    Memory,
    /// `sqlite://tansu.db` in the broker's folder: survives a kill.
    Sqlite,
}

pub struct Broker {
    /// tansu, or nisshi (`start_nisshi`).
    program: PathBuf,
    child: Option<Child>,
    pub port: u16,
    /// The port clients are told to use: `port`, or a fault proxy's.
    advertised: u16,
    storage: Storage,
    dir: tempfile::TempDir,
    /// Clients must log in (SASL/SCRAM): `--authentication`.
    authentication: bool,
    /// The TLS front clients reach it through, if any.
    tls: Option<crate::tls::TlsFront>,
}

impl Broker {
    pub fn start(storage: Storage) -> Broker {
        let port = free_port();
        Broker::start_advertising(storage, port, port)
    }

    /// A nisshi broker: one that implements Kafka transactions to the end.
    pub fn start_nisshi(storage: Storage) -> Broker {
        let port = free_port();
        Broker::launch(nisshi_bin(), storage, (port, port), None, &[])
    }

    /// A broker every client reaches through a fault proxy: it advertises
    /// the proxy's port, so the connections the metadata leads to cross
    /// the proxy too.
    pub fn start_behind_proxy(storage: Storage) -> (Broker, crate::proxy::FaultProxy) {
        let (port, advertised) = (free_port(), free_port());
        let proxy = crate::proxy::FaultProxy::start_on(advertised, ([127, 0, 0, 1], port).into());
        (Broker::start_advertising(storage, port, advertised), proxy)
    }

    fn start_advertising(storage: Storage, port: u16, advertised: u16) -> Broker {
        Broker::launch(tansu_bin(), storage, (port, advertised), None, &[])
    }

    /// Start `program` on `port`, telling clients to use `advertised` and
    /// to set `client` (all it asks of them: a port is reused in time, and
    /// what an earlier broker on it asked does not carry over).
    fn launch(
        program: PathBuf,
        storage: Storage,
        (port, advertised): (u16, u16),
        tls: Option<crate::tls::TlsFront>,
        client: &[(&str, &str)],
    ) -> Broker {
        set_client_properties(&format!("127.0.0.1:{advertised}"), client);
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut b = Broker { program, child: None, port, advertised, storage, dir, authentication: false, tls };
        b.restart();
        b
    }

    /// A broker that requires SASL/SCRAM-SHA-256 logins (tansu 0.6 offers
    /// SCRAM-SHA-256 and -512, not PLAIN). `users` (name, password) are
    /// created on a first, open start; then it restarts on the same
    /// storage with `--authentication`. The suites' own clients log in as
    /// the first user.
    pub fn start_with_users(users: &[(&str, &str)]) -> Broker {
        let port = free_port();
        let mut b = Broker::start_advertising(Storage::Sqlite, port, port);
        for (name, password) in users {
            let out = Command::new(tansu_bin())
                .args(["user", "create", "--broker", &format!("tcp://127.0.0.1:{port}"), "--mechanism", "scram256"])
                .args([name, password])
                .output()
                .unwrap_or_else(|e| panic!("tansu user create: {e}"));
            assert!(out.status.success(), "tansu user create {name}: {}", String::from_utf8_lossy(&out.stderr));
        }
        b.kill();
        let (name, password) = users.first().copied().unwrap_or_else(|| panic!("no user"));
        set_client_properties(
            &b.brokers(),
            &[
                ("security.protocol", "SASL_PLAINTEXT"),
                ("sasl.mechanisms", "SCRAM-SHA-256"),
                ("sasl.username", name),
                ("sasl.password", password),
            ],
        );
        b.authentication = true;
        b.restart();
        b
    }

    /// A broker clients reach over TLS only: it advertises the port of a
    /// TLS front (`tls::TlsFront`) with a certificate made for 127.0.0.1.
    pub fn start_with_tls(storage: Storage) -> Broker {
        let (port, advertised) = (free_port(), free_port());
        let front = crate::tls::TlsFront::start_on(advertised, ([127, 0, 0, 1], port).into());
        let ca = front.ca().display().to_string();
        let client = [("security.protocol", "SSL"), ("ssl.ca.location", ca.as_str())];
        Broker::launch(tansu_bin(), storage, (port, advertised), Some(front), &client)
    }

    /// The CA (PEM) that verifies the TLS front, if there is one.
    pub fn tls_ca(&self) -> Option<&Path> {
        self.tls.as_ref().map(crate::tls::TlsFront::ca)
    }

    /// Where clients bootstrap: the advertised address.
    /// The broker's process id while it runs: a bench reads its CPU
    /// time beside sluice's, so a broker-bound figure shows as one.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn brokers(&self) -> String {
        format!("127.0.0.1:{}", self.advertised)
    }

    /// Start (again) on the same port and folder.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "the broker is running");
        let url = format!("tcp://127.0.0.1:{}", self.port);
        let advertised = format!("tcp://127.0.0.1:{}", self.advertised);
        let storage = match self.storage {
            Storage::Memory => "memory://tansu/",
            Storage::Sqlite => "sqlite://tansu.db",
        };
        let log = std::fs::File::create(self.dir.path().join("broker.log")).unwrap_or_else(|e| panic!("{e}"));
        let child = Command::new(&self.program)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &advertised,
                "--storage-engine",
                storage,
            ])
            .args(self.authentication.then_some("--authentication"))
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap_or_else(|e| panic!("{e}")))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.program.display()));
        self.child = Some(child);
        self.wait_ready();
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let consumer: BaseConsumer = client(&self.brokers()).create().unwrap_or_else(|e| panic!("{e}"));
        loop {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!("tansu exited at start ({status}): {}", self.log());
            }
            if consumer.fetch_metadata(None, Duration::from_secs(2)).is_ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "tansu did not come up on {} within 30 s: {}",
                self.brokers(),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("broker.log")).unwrap_or_default()
    }

    /// SIGKILL the broker and wait for it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill();
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap_or_else(|e| panic!("{e}"))
}

pub fn create_topic(brokers: &str, topic: &str, partitions: i32) {
    create_topic_with(brokers, topic, partitions, &[]);
}

/// Create a topic with topic-level configs (`retention.ms`…).
pub fn create_topic_with(brokers: &str, topic: &str, partitions: i32, configs: &[(&str, &str)]) {
    let admin: AdminClient<DefaultClientContext> = client(brokers).create().unwrap_or_else(|e| panic!("{e}"));
    let mut new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    for (k, v) in configs {
        new = new.set(k, v);
    }
    let results = rt()
        .block_on(admin.create_topics([&new], &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)))))
        .unwrap_or_else(|e| panic!("create topic {topic}: {e}"));
    for r in results {
        r.unwrap_or_else(|(t, e)| panic!("create topic {t}: {e}"));
    }
}

/// Delete a topic (and wait until the brokers no longer list it).
pub fn delete_topic(brokers: &str, topic: &str) {
    let admin: AdminClient<DefaultClientContext> = client(brokers).create().unwrap_or_else(|e| panic!("{e}"));
    let results = rt()
        .block_on(admin.delete_topics(&[topic], &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)))))
        .unwrap_or_else(|e| panic!("delete topic {topic}: {e}"));
    for r in results {
        r.unwrap_or_else(|(t, e)| panic!("delete topic {t}: {e}"));
    }
    let consumer: BaseConsumer = client(brokers).create().unwrap_or_else(|e| panic!("{e}"));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let md = consumer.fetch_metadata(None, Duration::from_secs(10)).unwrap_or_else(|e| panic!("{e}"));
        if !md.topics().iter().any(|t| t.name() == topic) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{topic} still listed 20 s after its deletion");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Produce `(partition, key, payload)` records with `acks=all`; every one
/// is acknowledged before this returns, or it panics.
pub fn produce<P: AsRef<[u8]>>(brokers: &str, topic: &str, records: &[(i32, String, P)]) {
    produce_with(brokers, topic, records, &[]);
}

/// [`produce`] with producer properties of the caller's (a test that
/// depends on how records are batched in the log sets `batch.size`).
pub fn produce_with<P: AsRef<[u8]>>(
    brokers: &str,
    topic: &str,
    records: &[(i32, String, P)],
    properties: &[(&str, &str)],
) {
    let mut config = client(brokers);
    config
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "60000");
    for (key, value) in properties {
        config.set(*key, *value);
    }
    let producer: ThreadedProducer<DefaultProducerContext> = config.create().unwrap_or_else(|e| panic!("{e}"));
    for (p, key, payload) in records {
        let mut rec = BaseRecord::to(topic).partition(*p).key(key.as_str()).payload(payload.as_ref());
        loop {
            match producer.send(rec) {
                Ok(()) => break,
                Err((e, r)) => {
                    assert!(
                        matches!(
                            e,
                            rdkafka::error::KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull)
                        ),
                        "produce: {e}"
                    );
                    rec = r;
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
    }
    producer.flush(Duration::from_secs(60)).unwrap_or_else(|e| panic!("flush: {e}"));
    assert_eq!(producer.in_flight_count(), 0, "records not acknowledged");
}

/// The group's committed offsets for `topic`'s partitions `0..n`.
pub fn committed(brokers: &str, group: &str, topic: &str, n: i32) -> Vec<Option<i64>> {
    let consumer: BaseConsumer = client(brokers).set("group.id", group).create().unwrap_or_else(|e| panic!("{e}"));
    let mut tpl = TopicPartitionList::new();
    for p in 0..n {
        tpl.add_partition(topic, p);
    }
    let got = consumer.committed_offsets(tpl, Duration::from_secs(10)).unwrap_or_else(|e| panic!("{e}"));
    (0..n)
        .map(|p| match got.find_partition(topic, p).map(|e| e.offset()) {
            Some(Offset::Offset(o)) => Some(o),
            _ => None,
        })
        .collect()
}

/// The high watermarks of `topic`'s partitions `0..n`.
pub fn high_watermarks(brokers: &str, topic: &str, n: i32) -> Vec<i64> {
    let consumer: BaseConsumer = client(brokers).create().unwrap_or_else(|e| panic!("{e}"));
    (0..n)
        .map(|p| {
            consumer.fetch_watermarks(topic, p, Duration::from_secs(10)).map(|w| w.1).unwrap_or_else(|e| panic!("{e}"))
        })
        .collect()
}

/// One record read back from a topic.
#[derive(Debug, Clone)]
pub struct Read {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Vec<u8>,
    pub headers: Vec<(String, Vec<u8>)>,
}

impl Read {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    }
}

/// Every record of `topic`'s partitions `0..n`, read from the start up to
/// the high watermarks as they are now.
pub fn read_topic(brokers: &str, topic: &str, n: i32) -> Vec<Read> {
    use rdkafka::Message;
    use rdkafka::message::Headers;
    let highs = high_watermarks(brokers, topic, n);
    let consumer: BaseConsumer = client(brokers)
        .set("group.id", format!("reader-{}", free_port()))
        .set("enable.auto.commit", "false")
        .create()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut tpl = TopicPartitionList::new();
    for p in 0..n {
        tpl.add_partition_offset(topic, p, Offset::Beginning).unwrap_or_else(|e| panic!("{e}"));
    }
    consumer.assign(&tpl).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    let mut next = vec![0i64; n as usize];
    let deadline = Instant::now() + Duration::from_secs(60);
    while (0..n as usize).any(|p| next[p] < highs[p]) {
        assert!(Instant::now() < deadline, "read {topic}: stuck at {next:?} of {highs:?}");
        let Some(m) = consumer.poll(Duration::from_millis(200)) else { continue };
        let m = m.unwrap_or_else(|e| panic!("read {topic}: {e}"));
        next[m.partition() as usize] = m.offset() + 1;
        let headers = m
            .headers()
            .map(|hs| hs.iter().map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec).unwrap_or_default())).collect())
            .unwrap_or_default();
        out.push(Read {
            partition: m.partition(),
            offset: m.offset(),
            key: m.key().map(<[u8]>::to_vec),
            value: m.payload().map(<[u8]>::to_vec).unwrap_or_default(),
            headers,
        });
    }
    out
}
