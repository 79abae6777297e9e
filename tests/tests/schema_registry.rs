//! Avro and Protobuf records from a schema registry, end to end: a real
//! broker (tansu), a registry that keeps its schemas in a topic on it
//! (`sluice_e2e::registry`), records encoded by the libraries producers
//! use (fastavro, Google's protobuf; `tests/encoders/encode.py`), and the
//! `sluice` binary decoding them with the first-party `avro`,
//! `protobuf` and `json-schema` plugins into an NDJSON file.
//!
//! Each test changes the topic's schema mid-stream and takes the registry
//! away twice: while records of a schema sluice has not seen are waiting
//! (they wait, none is quarantined), and across a restart of sluice (what
//! it fetched before is in its state folder). It reconciles event ids:
//! every record produced is in the sink once, with its fields, and the one
//! record framed with an id the registry never had is the only one
//! quarantined, with that id in its reason.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sluice::store::Store;
use sluice_e2e::kafka::{Broker, Storage, create_topic, produce};
use sluice_e2e::registry::SchemaRegistry;
use sluice_e2e::{plugin, sluice_bin, workspace_root};

/// One test at a time: each starts a broker, a registry and sluice.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The id framed into one record that no schema was ever registered under.
const NEVER_REGISTERED: u32 = 4040;

#[derive(Clone, Copy, PartialEq)]
enum Format {
    Avro,
    Protobuf,
    JsonSchema,
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::Avro => "avro",
            Format::Protobuf => "protobuf",
            Format::JsonSchema => "json-schema",
        }
    }

    fn registry_type(self) -> &'static str {
        match self {
            Format::Avro => "AVRO",
            Format::Protobuf => "PROTOBUF",
            Format::JsonSchema => "JSON",
        }
    }

    /// Version 1 of the topic's schema, or version 2, which adds
    /// `referrer`, as `encode.py` takes it.
    fn schema(self, version: u32) -> Value {
        match self {
            Format::Avro => {
                let mut fields = vec![
                    json!({"name": "event_id", "type": "string"}),
                    json!({"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}),
                    json!({"name": "page", "type": "string"}),
                    json!({"name": "n", "type": "long"}),
                ];
                if version == 2 {
                    fields.push(json!({"name": "referrer", "type": ["null", "string"], "default": null}));
                }
                json!({"type": "record", "name": "Click", "namespace": "shop", "fields": fields})
            }
            Format::Protobuf => {
                let mut fields = vec![
                    json!({"name": "event_id", "number": 1, "type": "string"}),
                    json!({"name": "ts", "number": 2, "type": "timestamp"}),
                    json!({"name": "page", "number": 3, "type": "string"}),
                    json!({"name": "n", "number": 4, "type": "int64"}),
                ];
                if version == 2 {
                    fields.push(json!({"name": "referrer", "number": 5, "type": "string"}));
                }
                json!({"package": "shop", "message": "Click", "fields": fields})
            }
            Format::JsonSchema => {
                let mut properties = json!({
                    "event_id": {"type": "string", "minLength": 1},
                    "ts": {"type": "integer"},
                    "page": {"type": "string"},
                    "n": {"type": "integer"},
                });
                if version == 2 {
                    properties["referrer"] = json!({"type": "string"});
                }
                json!({"type": "object", "required": ["event_id", "ts", "page", "n"], "properties": properties})
            }
        }
    }

    /// The header a Confluent serializer writes before the message: magic
    /// byte, id, and for Protobuf the message indexes (`0`: the first).
    fn header(self, id: u32) -> Vec<u8> {
        let mut h = vec![0];
        h.extend_from_slice(&id.to_be_bytes());
        if self == Format::Protobuf {
            h.push(0);
        }
        h
    }
}

/// Record `i`: its fields as the producer wrote them.
fn record(i: usize, version: u32) -> Value {
    let mut r = json!({"event_id": format!("click-{i:05}"), "ts": ts_ms(i), "page": format!("/p/{i}"), "n": i});
    if version == 2 {
        // Avro's union is written as its branch's value by fastavro.
        r["referrer"] = json!(format!("/from/{i}"));
    }
    r
}

fn ts_ms(i: usize) -> i64 {
    1_700_000_000_000 + i as i64 * 1_000
}

/// `tests/encoders/encode.py` given `job`: its answer.
fn encoder(job: &Value) -> Value {
    let python = std::env::var("SLUICE_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = workspace_root().join("tests/encoders/encode.py");
    let mut child = Command::new(&python)
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{python} {}: {e} (scripts/setup installs it)", script.display()));
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap_or_else(|| panic!("no stdin"));
        stdin.write_all(job.to_string().as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    }
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "encode.py failed (fastavro and protobuf come from scripts/setup, in $SLUICE_PYTHON's venv): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("encode.py: {e}"))
}

/// The schema's text as registered, and each record encoded.
fn encode(format: Format, version: u32, records: &[Value]) -> (String, Vec<Vec<u8>>) {
    let answer = encoder(&json!({"format": format.name(), "schema": format.schema(version), "records": records}));
    (answer["schema_text"].as_str().unwrap_or_default().to_string(), payloads(&answer))
}

/// The encoded records of an `encode.py` answer (hex in it).
fn payloads(answer: &Value) -> Vec<Vec<u8>> {
    answer["payloads"]
        .as_array()
        .unwrap_or_else(|| panic!("encode.py: {answer}"))
        .iter()
        .map(|h| hex(h.as_str().unwrap_or_default()))
        .collect()
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

/// SIGTERM, and its exit code.
fn terminate(p: &mut Proc) -> i32 {
    // SAFETY: kill(2) on a child we own.
    unsafe { libc_kill(p.0.id() as i32, 15) };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(Some(status)) = p.0.try_wait() {
            return status.code().unwrap_or(-1);
        }
        assert!(Instant::now() < deadline, "sluice did not stop within 30 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}

struct Run {
    dir: tempfile::TempDir,
    format: Format,
    brokers: String,
    topic: String,
    /// Records produced: event id to (index, schema version).
    produced: BTreeMap<String, (usize, u32)>,
}

impl Run {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Records `range` in schema `version`, registered as `id`, produced
    /// over two partitions.
    fn produce(&mut self, range: std::ops::Range<usize>, version: u32, id: u32) {
        let records: Vec<Value> = range.clone().map(|i| record(i, version)).collect();
        let (_, payloads) = encode(self.format, version, &records);
        let framed: Vec<(i32, String, Vec<u8>)> = range
            .zip(payloads)
            .map(|(i, p)| {
                let mut framed = self.format.header(id);
                framed.extend(p);
                self.produced.insert(format!("click-{i:05}"), (i, version));
                ((i % 2) as i32, format!("click-{i:05}"), framed)
            })
            .collect();
        produce(&self.brokers, &self.topic, &framed);
    }

    /// The run's config; `reader`, a reader schema for Avro or Protobuf.
    fn config(&self, registry: &str, reader: Option<&str>) -> PathBuf {
        let plugin_config = match (self.format, reader) {
            (Format::Avro, Some(reader)) => format!("reader_schema = '''{reader}'''"),
            (Format::Protobuf, Some(reader)) => {
                format!("reader_schema = '''{reader}'''\nreader_message = \"shop.Click\"")
            }
            // JSON has no reader schema: each record keeps its own fields.
            (Format::JsonSchema, _) => "timestamp_format = \"epoch_ms\"".to_string(),
            (_, None) => String::new(),
        };
        let cfg = format!(
            r#"
[pipeline]
name = "e2e-registry"
state_dir = "state"
batch_size = 100

[source]
type = "kafka"
brokers = "{brokers}"
topics = ["{topic}"]
group_id = "registry-group"
commit_interval = "200ms"
properties = {{ "session.timeout.ms" = 6000, "heartbeat.interval.ms" = 500 }}

[schema_registry]
url = "{registry}"
retry_max = "1s"
timeout = "2s"

[[plugins]]
name = "{name}"
path = "{path}"
[plugins.config]
id_field = "event_id"
timestamp_field = "ts"
require_id = true
{plugin_config}

[dedup]
window = "1h"

[sink]
type = "file"
path = "out/clicks.ndjson"
"#,
            brokers = self.brokers,
            topic = self.topic,
            name = self.format.name(),
            path = plugin(self.format.name()).display(),
        );
        let path = self.path("sluice.toml");
        std::fs::write(&path, cfg).unwrap_or_else(|e| panic!("{e}"));
        path
    }

    fn spawn(&self, config: &Path) -> Proc {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path("sluice.log"))
            .unwrap_or_else(|e| panic!("{e}"));
        Proc(
            Command::new(sluice_bin!())
                .args(["run", "-c", &config.display().to_string()])
                .current_dir(self.dir.path())
                .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
                .env("SLUICE_LOG", "info")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("{e}")),
        )
    }

    /// `sluice check --connect`: its exit code and what it printed.
    fn check_connect(&self, config: &Path) -> (i32, String) {
        let out = Command::new(sluice_bin!())
            .args(["check", "--connect", "-c", &config.display().to_string()])
            .current_dir(self.dir.path())
            .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"))
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.code().unwrap_or(-1), said)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.path("sluice.log")).unwrap_or_default()
    }

    /// The sink's lines.
    fn delivered(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.path("out/clicks.ndjson")).unwrap_or_default();
        let complete = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
        complete.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("sink line {l:?}: {e}"))).collect()
    }

    /// Until the sink holds `n` lines; the run must not exit meanwhile.
    fn wait_lines(&self, n: usize, sluice: &mut Proc) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while self.delivered().len() < n {
            if let Ok(Some(status)) = sluice.0.try_wait() {
                panic!("sluice exited ({status}) with {} of {n} lines: {}", self.delivered().len(), self.log());
            }
            assert!(Instant::now() < deadline, "{} of {n} lines after 120 s: {}", self.delivered().len(), self.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn quarantined(&self) -> Vec<(String, String)> {
        let store = Store::open_read_only(&self.path("state")).unwrap_or_else(|e| panic!("{e}"));
        store
            .quarantine_entries()
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .map(|e| (e.position.to_string(), e.reason))
            .collect()
    }
}

fn evolves_through_registry_outages(format: Format) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let broker = Broker::start(Storage::Sqlite);
    let brokers = broker.brokers();
    let mut registry = SchemaRegistry::start(&brokers);
    let topic = format!("clicks-{}", format.name());
    create_topic(&brokers, &topic, 2);
    let mut run = Run {
        dir: tempfile::tempdir().unwrap_or_else(|e| panic!("{e}")),
        format,
        brokers: brokers.clone(),
        topic: topic.clone(),
        produced: BTreeMap::new(),
    };
    let subject = format!("{topic}-value");
    let (v1_text, _) = encode(format, 1, &[]);
    let (v2_text, _) = encode(format, 2, &[]);
    let v1 = registry.register(&subject, format.registry_type(), &v1_text);

    // 1. Version 1, and one record framed with an id nobody registered.
    run.produce(0..150, 1, v1);
    let mut stray = format.header(NEVER_REGISTERED);
    stray.extend_from_slice(b"\x02x");
    produce(&brokers, &topic, &[(0, "stray".to_string(), stray)]);
    let config = run.config(&registry.url(), Some(&v2_text));
    let (code, said) = run.check_connect(&config);
    assert_eq!(code, 0, "{said}");
    assert!(said.contains(&format!("schema registry {}/: ok (1 subjects)", registry.url())), "{said}");
    let mut sluice = run.spawn(&config);
    run.wait_lines(150, &mut sluice);
    assert!(registry.fetches() >= 2, "the v1 id and the stray id were fetched: {}", registry.fetches());

    // 2. Version 2 is registered, then the registry goes down before
    // sluice has seen a record of it: those records wait.
    let v2 = registry.register(&subject, format.registry_type(), &v2_text);
    assert_ne!(v1, v2);
    registry.stop();
    run.produce(150..300, 2, v2);
    let waited_from = Instant::now();
    while !run.log().contains("the schema registry cannot answer") {
        assert!(waited_from.elapsed() < Duration::from_secs(60), "no word of the outage: {}", run.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(run.delivered().len(), 150, "a record of the unseen schema went through with the registry down");
    let (code, said) = run.check_connect(&config);
    assert_eq!(code, 3, "check --connect says a dependency is unreachable: {said}");
    assert!(said.contains("schema registry") && said.contains("FAILED"), "{said}");
    assert!(sluice.0.try_wait().ok().flatten().is_none(), "sluice stopped during the outage: {}", run.log());
    // A stop during the outage is a stop like any other: the waiting batch
    // is let go undecided, and the next start waits for it again.
    assert_eq!(terminate(&mut sluice), 0, "a stop while the registry is down: {}", run.log());
    assert!(run.log().contains("the batch waiting for it is let go undecided"), "{}", run.log());
    let said = run.log().matches("the schema registry cannot answer").count();
    let mut sluice = run.spawn(&config);
    while run.log().matches("the schema registry cannot answer").count() <= said {
        assert!(waited_from.elapsed() < Duration::from_secs(90), "the restart did not wait: {}", run.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(run.delivered().len(), 150, "delivered after the stop with the registry down");
    // Back, knowing only what its topic holds.
    registry.restart();
    run.wait_lines(300, &mut sluice);
    assert!(registry.fetches() >= 1, "v2 was fetched after the restart");

    // 3. sluice restarts while the registry is down: both ids are in its
    // state folder.
    assert_eq!(terminate(&mut sluice), 0, "{}", run.log());
    registry.stop();
    run.produce(300..350, 1, v1);
    run.produce(350..400, 2, v2);
    let mut sluice = run.spawn(&config);
    run.wait_lines(400, &mut sluice);
    assert_eq!(terminate(&mut sluice), 0, "{}", run.log());

    // Reconcile: every id once, with its fields.
    let lines = run.delivered();
    let mut seen = BTreeMap::new();
    for line in &lines {
        let id = line["id"].as_str().unwrap_or_else(|| panic!("no id: {line}")).to_string();
        *seen.entry(id).or_insert(0) += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "delivered more than once: {twice:?}");
    let missing: Vec<_> = run.produced.keys().filter(|id| !seen.contains_key(*id)).collect();
    assert!(missing.is_empty(), "never delivered: {missing:?}");
    assert_eq!(seen.len(), run.produced.len(), "delivered ids nobody produced");
    for line in &lines {
        let id = line["id"].as_str().unwrap_or_default();
        let (i, version) = run.produced[id];
        let event = &line["event"];
        assert_eq!(event["page"], format!("/p/{i}"), "{line}");
        assert_eq!(event["n"], i as u64, "{line}");
        let referrer = if version == 2 {
            json!(format!("/from/{i}"))
        } else {
            // The reader's default for a record written before the field.
            match format {
                Format::Avro => Value::Null,
                Format::Protobuf => json!(""),
                // Absent: no reader schema fills it in.
                Format::JsonSchema => Value::Null,
            }
        };
        assert_eq!(event["referrer"], referrer, "{line}");
        assert_eq!(
            line["timestamp"],
            sluice_guest::time::format_rfc3339(ts_ms(i) * 1_000_000),
            "the event time is the record's ts: {line}"
        );
    }
    // The stray record alone is quarantined, and says why.
    let quarantined = run.quarantined();
    assert_eq!(quarantined.len(), 1, "{quarantined:?}");
    assert!(
        quarantined[0].1.contains(&NEVER_REGISTERED.to_string()) && quarantined[0].1.contains("404"),
        "{quarantined:?}"
    );
}

#[test]
fn avro_records_whose_schema_changes_mid_stream_survive_registry_outages() {
    evolves_through_registry_outages(Format::Avro);
}

#[test]
fn protobuf_records_whose_schema_changes_mid_stream_survive_registry_outages() {
    evolves_through_registry_outages(Format::Protobuf);
}

#[test]
fn json_schema_records_whose_schema_changes_mid_stream_survive_registry_outages() {
    evolves_through_registry_outages(Format::JsonSchema);
}

/// The fields a Kafka sink's encoded records carry (no timestamp: the
/// JSON events give `n` and `page`, and the id).
fn sink_schema(format: Format) -> Value {
    match format {
        Format::Avro => json!({"type": "record", "name": "Click", "namespace": "shop", "fields": [
            {"name": "event_id", "type": "string"},
            {"name": "page", "type": "string"},
            {"name": "n", "type": "long"}]}),
        Format::Protobuf => json!({"package": "shop", "message": "Click", "fields": [
            {"name": "event_id", "number": 1, "type": "string"},
            {"name": "page", "number": 2, "type": "string"},
            {"name": "n", "number": 3, "type": "int64"}]}),
        Format::JsonSchema => json!({"title": "shop.Click", "type": "object",
            "required": ["event_id", "page", "n"],
            "properties": {"event_id": {"type": "string"}, "page": {"type": "string"}, "n": {"type": "integer"}}}),
    }
}

/// Read `payloads` (the messages alone) back as a consumer's
/// deserializer does: fastavro, or protobuf's `json_format`.
fn decode(format: Format, payloads: &[&[u8]]) -> Vec<Value> {
    if format == Format::JsonSchema {
        // A JSON Schema deserializer parses the text after the header.
        return payloads.iter().map(|p| serde_json::from_slice(p).unwrap_or_else(|e| panic!("{e}"))).collect();
    }
    let hex: Vec<String> = payloads.iter().map(|p| p.iter().map(|b| format!("{b:02x}")).collect()).collect();
    let answer =
        encoder(&json!({"decode": true, "format": format.name(), "schema": sink_schema(format), "payloads": hex}));
    answer["records"].as_array().cloned().unwrap_or_else(|| panic!("decode: {answer}"))
}

/// JSON events to a Kafka topic in Avro, Protobuf or JSON checked by a
/// JSON Schema: the schema registered
/// under `<topic>-value`, each record framed with its id, read back by
/// the producers' own libraries; an event that does not fit the schema is
/// quarantined, and nothing else.
fn a_kafka_sink_writes_what_a_registry_consumer_reads(format: Format) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let broker = Broker::start(Storage::Sqlite);
    let brokers = broker.brokers();
    let mut registry = SchemaRegistry::start(&brokers);
    let topic = format!("clicks-out-{}", format.name());
    create_topic(&brokers, &topic, 1);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let n = 120;
    let mut lines: Vec<String> = (0..n)
        .map(|i| json!({"event_id": format!("e-{i:04}"), "page": format!("/p/{i}"), "n": i}).to_string())
        .collect();
    lines.insert(60, json!({"event_id": "misfit", "page": 7, "n": "seven"}).to_string());
    std::fs::write(dir.path().join("in.ndjson"), lines.join("\n") + "\n").unwrap_or_else(|e| panic!("{e}"));
    let schema_text = match format {
        Format::Protobuf => proto_text(&sink_schema(format)),
        _ => sink_schema(format).to_string(),
    };
    let cfg = format!(
        r#"
[pipeline]
name = "e2e-registry-sink"
state_dir = "state"

[source]
type = "file"
paths = ["in.ndjson"]

[schema_registry]
url = "{registry}"

[[plugins]]
name = "json"
path = "{json}"
config = {{ id_field = "event_id", require_id = true }}

[sink]
type = "kafka"
brokers = "{brokers}"
topic = "{topic}"
payload = {{ type = "event", id_field = "event_id" }}

[sink.encoding]
format = "{fmt}"
schema = '''{schema_text}'''
subject = "topic"
"#,
        registry = registry.url(),
        json = plugin("json").display(),
        fmt = match format {
            Format::JsonSchema => "json",
            other => other.name(),
        },
    );
    let config = dir.path().join("sluice.toml");
    std::fs::write(&config, cfg).unwrap_or_else(|e| panic!("{e}"));
    let run = Run { dir, format, brokers: brokers.clone(), topic: topic.clone(), produced: BTreeMap::new() };
    // The registry is down when the sink first needs the schema's id: the
    // events wait behind the breaker, none is written or quarantined.
    registry.stop();
    let mut sluice = run.spawn(&config);
    let waited_from = Instant::now();
    while !run.log().contains("schema registry") {
        assert!(waited_from.elapsed() < Duration::from_secs(60), "no word of the outage: {}", run.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(sluice_e2e::kafka::high_watermarks(&brokers, &topic, 1)[0], 0, "written with no schema id");
    assert!(sluice.0.try_wait().ok().flatten().is_none(), "sluice stopped during the outage: {}", run.log());
    registry.restart();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let high = sluice_e2e::kafka::high_watermarks(&brokers, &topic, 1)[0];
        let quarantined = Store::open_read_only(&run.path("state")).map(|s| s.quarantine_entries().map(|q| q.len()));
        if high >= n as i64 && matches!(quarantined, Ok(Ok(1))) {
            break;
        }
        if let Ok(Some(status)) = sluice.0.try_wait() {
            panic!("sluice exited ({status}) with {high} records written: {}", run.log());
        }
        assert!(Instant::now() < deadline, "{high} of {n} records after 120 s: {}", run.log());
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(terminate(&mut sluice), 0, "{}", run.log());

    // The id the registry gave the subject, which `check --connect` looks
    // up (and never registers).
    let latest = reqwest_get(&format!("{}/subjects/{topic}-value/versions/latest", registry.url()));
    let id = u32::try_from(latest["id"].as_u64().unwrap_or_else(|| panic!("{latest}"))).unwrap_or(0);
    let (code, said) = run.check_connect(&config);
    assert_eq!(code, 0, "{said}");
    assert!(said.contains(&format!("schema id {id} under subject \"{topic}-value\"")), "{said}");
    let records = sluice_e2e::kafka::read_topic(&brokers, &topic, 1);
    assert_eq!(records.len(), n, "one record per event, and none for the misfit");
    let header = format.header(id);
    let bodies: Vec<&[u8]> = records
        .iter()
        .map(|r| {
            assert!(r.value.starts_with(&header), "framed with id {id}: {:?}", &r.value[..r.value.len().min(8)]);
            &r.value[header.len()..]
        })
        .collect();
    let decoded = decode(format, &bodies);
    for (i, (r, d)) in records.iter().zip(&decoded).enumerate() {
        let key = String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned();
        assert_eq!(key, format!("e-{i:04}"));
        assert_eq!(d["event_id"], key, "{d}");
        assert_eq!(d["page"], format!("/p/{i}"), "{d}");
        // Protobuf's JSON mapping writes an int64 as text.
        assert!(d["n"] == json!(i) || d["n"] == json!(i.to_string()), "{d}");
    }
    let quarantined = run.quarantined();
    assert_eq!(quarantined.len(), 1, "{quarantined:?}");
    assert!(quarantined[0].1.contains("encoding"), "{quarantined:?}");
}

/// The `.proto` text `encode.py` writes for a Protobuf spec.
fn proto_text(spec: &Value) -> String {
    let answer = encoder(&json!({"format": "protobuf", "schema": spec, "records": []}));
    answer["schema_text"].as_str().unwrap_or_default().to_string()
}

fn reqwest_get(url: &str) -> Value {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(async {
        let r = reqwest::get(url).await.unwrap_or_else(|e| panic!("GET {url}: {e}"));
        let bytes = r.bytes().await.unwrap_or_else(|e| panic!("GET {url}: {e}"));
        serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("GET {url}: {e}"))
    })
}

#[test]
fn a_kafka_sink_writes_avro_a_consumer_reads() {
    a_kafka_sink_writes_what_a_registry_consumer_reads(Format::Avro);
}

#[test]
fn a_kafka_sink_writes_protobuf_a_consumer_reads() {
    a_kafka_sink_writes_what_a_registry_consumer_reads(Format::Protobuf);
}

#[test]
fn a_kafka_sink_writes_json_schema_records_a_consumer_reads() {
    a_kafka_sink_writes_what_a_registry_consumer_reads(Format::JsonSchema);
}

/// Confluent's schema references: the topic's schema uses a type that
/// another subject holds (an Avro named type, a Protobuf import, a JSON
/// Schema `$ref`). sluice fetches the referenced schema with the one that
/// names it and keeps both in its state folder: every record is delivered
/// once with its nested fields, and a sluice restarted while the registry
/// is down decodes the next records from what it kept.
fn decodes_a_schema_that_references_another_subject(format: Format) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let broker = Broker::start(Storage::Sqlite);
    let brokers = broker.brokers();
    let mut registry = SchemaRegistry::start(&brokers);
    let topic = format!("orders-{}", format.name());
    create_topic(&brokers, &topic, 2);
    let money_avro = json!({"type": "record", "name": "Money", "namespace": "shop", "fields": [
        {"name": "cents", "type": "long"}, {"name": "currency", "type": "string"}]});
    let money_json = json!({"type": "object", "required": ["cents", "currency"],
        "properties": {"cents": {"type": "integer"}, "currency": {"type": "string", "minLength": 3}}});
    let (schema, reference) = match format {
        Format::Avro => (
            json!({"type": "record", "name": "Order", "namespace": "shop", "fields": [
                {"name": "event_id", "type": "string"},
                {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
                {"name": "total", "type": "shop.Money"}]}),
            "shop.Money",
        ),
        Format::Protobuf => (
            json!({"package": "shop", "message": "Click", "fields": [
                {"name": "event_id", "number": 1, "type": "string"},
                {"name": "ts", "number": 2, "type": "timestamp"},
                {"name": "total", "number": 3, "type": "message:shop.Money"}],
              "imports": [{"file": "shop/money.proto", "package": "shop", "message": "Money", "fields": [
                {"name": "cents", "number": 1, "type": "int64"},
                {"name": "currency", "number": 2, "type": "string"}]}]}),
            "shop/money.proto",
        ),
        Format::JsonSchema => (
            json!({"type": "object", "required": ["event_id", "ts", "total"], "properties": {
                "event_id": {"type": "string"}, "ts": {"type": "integer"}, "total": {"$ref": "money.json"}}}),
            "money.json",
        ),
    };
    let records: Vec<Value> = (0..120)
        .map(|i| json!({"event_id": format!("order-{i:05}"), "ts": ts_ms(i), "total": {"cents": i * 10, "currency": "EUR"}}))
        .collect();
    let mut job = json!({"format": format.name(), "schema": schema, "records": records});
    if format == Format::Avro {
        job["references"] = json!([money_avro]);
    }
    let answer = encoder(&job);
    let referenced = match format {
        Format::Avro => money_avro.to_string(),
        Format::Protobuf => answer["import_texts"][reference].as_str().unwrap_or_default().to_string(),
        Format::JsonSchema => money_json.to_string(),
    };
    registry.register("shop-money", format.registry_type(), &referenced);
    let id = registry.register_with_references(
        &format!("{topic}-value"),
        format.registry_type(),
        answer["schema_text"].as_str().unwrap_or_default(),
        json!([{"name": reference, "subject": "shop-money", "version": 1}]),
    );
    let payloads: Vec<Vec<u8>> = payloads(&answer)
        .into_iter()
        .map(|p| {
            let mut framed = format.header(id);
            framed.extend(p);
            framed
        })
        .collect();
    let run = Run {
        dir: tempfile::tempdir().unwrap_or_else(|e| panic!("{e}")),
        format,
        brokers: brokers.clone(),
        topic: topic.clone(),
        produced: BTreeMap::new(),
    };
    let keyed = |range: std::ops::Range<usize>| -> Vec<(i32, String, Vec<u8>)> {
        range.map(|i| ((i % 2) as i32, format!("order-{i:05}"), payloads[i].clone())).collect()
    };
    produce(&brokers, &topic, &keyed(0..100));
    let config = run.config(&registry.url(), None);
    let mut sluice = run.spawn(&config);
    run.wait_lines(100, &mut sluice);
    assert_eq!(terminate(&mut sluice), 0, "{}", run.log());
    // The registry goes away; what sluice kept decodes the rest.
    registry.stop();
    produce(&brokers, &topic, &keyed(100..120));
    let mut sluice = run.spawn(&config);
    run.wait_lines(120, &mut sluice);
    assert_eq!(terminate(&mut sluice), 0, "{}", run.log());

    let mut seen = BTreeMap::new();
    for line in run.delivered() {
        let id = line["id"].as_str().unwrap_or_else(|| panic!("no id: {line}")).to_string();
        let i: usize = id.trim_start_matches("order-").parse().unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(line["event"]["total"], json!({"cents": i * 10, "currency": "EUR"}), "{line}");
        *seen.entry(id).or_insert(0) += 1;
    }
    let expected: BTreeMap<String, i32> = (0..120).map(|i| (format!("order-{i:05}"), 1)).collect();
    assert_eq!(seen, expected, "every order once");
    assert_eq!(run.quarantined(), Vec::new(), "nothing quarantined");
}

#[test]
fn an_avro_schema_that_references_another_subjects_type_decodes() {
    decodes_a_schema_that_references_another_subject(Format::Avro);
}

#[test]
fn a_protobuf_schema_that_imports_another_subjects_file_decodes() {
    decodes_a_schema_that_references_another_subject(Format::Protobuf);
}

#[test]
fn a_json_schema_whose_ref_is_another_subjects_schema_decodes() {
    decodes_a_schema_that_references_another_subject(Format::JsonSchema);
}
