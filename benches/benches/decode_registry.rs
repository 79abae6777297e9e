//! The same records three ways, through the host as the driver's front
//! calls the chain (`Chain::judge`, batches of 1,000): JSON lines through
//! the `json` plugin, and the records in Avro and in Protobuf, framed for
//! a schema registry, through the `avro` and `protobuf` plugins, which
//! decode them to JSON events. Each record has the same six fields
//! (`benches/src/lib.rs`, `json_line`): an id, an RFC 3339 time read as
//! the event time, two short strings, a number, 189 bytes of text.
//!
//! Prints records per CPU-second of the calling thread (every plugin call
//! runs on it), best of five, and Avro's and Protobuf's ratio to JSON in
//! this run. The schemas are held as the registry's would be after the
//! first batch: what is timed is decoding, not fetching (one request per
//! schema id per run).
//!
//! `cargo bench -p sluice-benches --bench decode_registry`
//! (`SLUICE_BENCH_RECORDS`, default 100,000).

use std::sync::Arc;
use std::time::Duration;

use apache_avro::types::{Record as AvroRecord, Value as Avro};
use prost_reflect::{DescriptorPool, DynamicMessage, Value as Pv};
use serde_json::{Value, json};
use sluice::plugin::chain::build_chain;
use sluice::plugin::spec::PluginSpec;
use sluice::record::Record;
use sluice::schema_registry::cache::{RegisteredSchema, Schemas};
use sluice::verdict::Judgement;

const BATCH: usize = 1000;
const ROUNDS: usize = 5;
const AVRO_ID: u32 = 1;
const PROTOBUF_ID: u32 = 2;

const AVRO_SCHEMA: &str = r#"{"type":"record","name":"Line","fields":[
  {"name":"event_id","type":"string"},{"name":"ts","type":"string"},
  {"name":"service","type":"string"},{"name":"level","type":"string"},
  {"name":"user","type":"long"},{"name":"msg","type":"string"}]}"#;

const PROTO: &str = r#"syntax = "proto3";
message Line {
  string event_id = 1;
  string ts = 2;
  string service = 3;
  string level = 4;
  int64 user = 5;
  string msg = 6;
}
"#;

fn header(id: u32) -> Vec<u8> {
    let mut h = vec![0];
    h.extend_from_slice(&id.to_be_bytes());
    h
}

fn avro_records(lines: &[Value]) -> Vec<Vec<u8>> {
    let schema = apache_avro::Schema::parse_str(AVRO_SCHEMA).unwrap_or_else(|e| panic!("{e}"));
    lines
        .iter()
        .map(|l| {
            let mut r = AvroRecord::new(&schema).unwrap_or_else(|| panic!("not a record schema"));
            for key in ["event_id", "ts", "service", "level", "msg"] {
                r.put(key, Avro::String(l[key].as_str().unwrap_or_default().to_string()));
            }
            r.put("user", Avro::Long(l["user"].as_i64().unwrap_or_default()));
            let mut out = header(AVRO_ID);
            out.extend(apache_avro::to_avro_datum(&schema, r).unwrap_or_else(|e| panic!("{e}")));
            out
        })
        .collect()
}

fn protobuf_records(lines: &[Value]) -> Vec<Vec<u8>> {
    let mut compiler = protox::Compiler::with_file_resolver(OneFile);
    compiler.open_file("line.proto").unwrap_or_else(|e| panic!("{e}"));
    let pool: DescriptorPool = compiler.descriptor_pool();
    let desc = pool.get_message_by_name("Line").unwrap_or_else(|| panic!("no Line"));
    lines
        .iter()
        .map(|l| {
            let mut m = DynamicMessage::new(desc.clone());
            for key in ["event_id", "ts", "service", "level", "msg"] {
                m.set_field_by_name(key, Pv::String(l[key].as_str().unwrap_or_default().to_string()));
            }
            m.set_field_by_name("user", Pv::I64(l["user"].as_i64().unwrap_or_default()));
            let mut out = header(PROTOBUF_ID);
            // Message indexes: `0`, the file's first message.
            out.push(0);
            out.extend(prost::Message::encode_to_vec(&m));
            out
        })
        .collect()
}

struct OneFile;

impl protox::file::FileResolver for OneFile {
    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        protox::file::File::from_source(name, PROTO)
    }
}

/// Best of ROUNDS in this thread's CPU time, of every batch through the
/// chain; and the events emitted in the last round.
fn through_host(specs: &[PluginSpec], records: &[Vec<u8>]) -> (Duration, usize) {
    let runtime = sluice_benches::runtime();
    let mut chain = build_chain(&runtime, specs).unwrap_or_else(|e| panic!("{e}"));
    let buffer = bytes::Bytes::from(records.concat());
    let mut spans = Vec::with_capacity(records.len());
    let mut at = 0;
    for r in records {
        spans.push((at, at + r.len()));
        at += r.len();
    }
    let path: Arc<str> = "bench".into();
    let mut best = Duration::MAX;
    let mut emitted = 0;
    for _ in 0..ROUNDS {
        let t = sluice_benches::thread_cpu_seconds();
        emitted = 0;
        for chunk in spans.chunks(BATCH) {
            let batch: Vec<Record> =
                chunk.iter().map(|&(a, b)| Record::line(buffer.slice(a..b), path.clone(), 0, a as u64)).collect();
            let refs: Vec<&Record> = batch.iter().collect();
            let verdicts = chain.judge(&refs).unwrap_or_else(|e| panic!("{e}"));
            emitted += verdicts.judged.iter().filter(|v| matches!(v, Judgement::Emit(_))).count();
        }
        best = best.min(Duration::from_secs_f64(sluice_benches::thread_cpu_seconds() - t));
    }
    (best, emitted)
}

fn main() {
    let n: usize = std::env::var("SLUICE_BENCH_RECORDS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let lines: Vec<String> = sluice_benches::json_lines(n, sluice_benches::now_secs());
    let values: Vec<Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}"))).collect();
    let json_records: Vec<Vec<u8>> = lines.iter().map(|l| l.clone().into_bytes()).collect();
    let avro = avro_records(&values);
    let protobuf = protobuf_records(&values);

    let schemas = Arc::new(Schemas::open(None).unwrap_or_else(|e| panic!("{e}")));
    let held = |id, schema_type: &str, text: &str| {
        let schema = RegisteredSchema::new(schema_type, text);
        schemas.insert(id, schema).unwrap_or_else(|e| panic!("{e}"));
    };
    held(AVRO_ID, "AVRO", AVRO_SCHEMA);
    held(PROTOBUF_ID, "PROTOBUF", PROTO);
    let fields = json!({ "id_field": "event_id", "timestamp_field": "ts", "require_id": true });
    let spec = |name: &str| PluginSpec { schemas: Some(schemas.clone()), ..sluice_e2e::spec(name, fields.clone()) };

    let mut rates = Vec::new();
    for (name, records) in [("json", &json_records), ("avro", &avro), ("protobuf", &protobuf)] {
        let (cpu, emitted) = through_host(&[spec(name)], records);
        assert_eq!(emitted, n, "{name}: every record decodes to an event");
        let bytes: usize = records.iter().map(Vec::len).sum();
        let rate = n as f64 / cpu.as_secs_f64();
        println!(
            "decode_registry {name:>8}: {rate:>10.0} records/s per core ({:.0} bytes a record, {:.1} ms CPU for {n})",
            bytes as f64 / n as f64,
            cpu.as_secs_f64() * 1000.0
        );
        rates.push(rate);
    }
    println!(
        "decode_registry: avro {:.2}x json, protobuf {:.2}x json (records/s)",
        rates[1] / rates[0],
        rates[2] / rates[0]
    );
}
