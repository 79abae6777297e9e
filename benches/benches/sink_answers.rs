//! What reading a backend's answer costs (issue 40): a built-in response
//! profile (data: pointers, rules, the fixed rules after) against the
//! least a reader of that answer must do, measured in the same run.
//!
//! - baseline: a typed serde parse of the Elasticsearch bulk answer and a
//!   status match per item (what the hard-coded reader did before the
//!   profiles);
//! - `elasticsearch_bulk`, 1,000 items: all created, and one in ten
//!   refused (mapping errors, conflicts, a full queue);
//! - `openobserve` counts and `status` alone, per request;
//! - a classifier plugin (the Axiom example, Rust built for wasm32-wasip2)
//!   reading counts of 1,000 records, all ingested and one in ten failed
//!   (each failure matched to its record by time), beside the same
//!   classifier's code run natively (what the WebAssembly boundary adds)
//!   and the `openobserve` profile (a built-in reading of counts).
//!
//! Best of seven rounds, thread CPU ns per batch and per record.
//!
//! `cargo bench -p sluice-benches --bench sink_answers`

use std::collections::HashMap;

use reqwest::header::HeaderMap;
use sluice::sink::Answer;
use sluice::sink::http::response::Response;
use sluice::sink::http::response::classify::classify;
use sluice::sink::http::response::profile::Profile;
use sluice_benches::thread_cpu_seconds;

const N: usize = 1000;
const ROUNDS: usize = 7;
const REPEAT: usize = 200;

fn bulk(failing: bool) -> String {
    let items: Vec<String> = (0..N)
        .map(|i| {
            let (status, error) = match i % 10 {
                3 if failing => (400, r#","error":{"type":"mapper_parsing_exception","reason":"failed to parse field [ts]"}"#),
                6 if failing => (409, r#","error":{"type":"version_conflict_engine_exception","reason":"document already exists"}"#),
                8 if failing => (429, r#","error":{"type":"es_rejected_execution_exception","reason":"queue full"}"#),
                _ => (201, ""),
            };
            format!(
                r#"{{"create":{{"_index":"logs","_id":"ev-{i:07}","_version":1,"result":"created","_shards":{{"total":2,"successful":1,"failed":0}},"_seq_no":{i},"_primary_term":1,"status":{status}{error}}}}}"#
            )
        })
        .collect();
    format!(r#"{{"took":30,"errors":{failing},"items":[{}]}}"#, items.join(","))
}

/// The hard-coded reader: typed, no pointers, no rules.
fn baseline(body: &[u8]) -> Vec<Answer> {
    #[derive(serde::Deserialize)]
    struct Error {
        #[serde(rename = "type")]
        kind: String,
        reason: String,
    }
    #[derive(serde::Deserialize)]
    struct Item {
        status: u16,
        error: Option<Error>,
    }
    #[derive(serde::Deserialize)]
    struct Bulk {
        items: Vec<HashMap<String, Item>>,
    }
    let Ok(b) = serde_json::from_slice::<Bulk>(body) else { return vec![Answer::Systemic("unreadable".into()); N] };
    b.items
        .into_iter()
        .map(|m| match m.into_values().next() {
            Some(Item { status: 200..=299, .. }) => Answer::Accepted,
            Some(Item { status: 409, .. }) => Answer::Duplicate,
            Some(Item { status: 429 | 500..=599, error }) => {
                Answer::Systemic(error.map(|e| format!("{}: {}", e.kind, e.reason)).unwrap_or_default())
            }
            Some(Item { error, .. }) => {
                Answer::Rejected(error.map(|e| format!("{}: {}", e.kind, e.reason)).unwrap_or_default())
            }
            None => Answer::Systemic("empty item".into()),
        })
        .collect()
}

fn best(f: &mut dyn FnMut()) -> f64 {
    (0..ROUNDS)
        .map(|_| {
            let t0 = thread_cpu_seconds();
            for _ in 0..REPEAT {
                f();
            }
            (thread_cpu_seconds() - t0) / REPEAT as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let ids: Vec<String> = (0..N).map(|i| format!("ev-{i:07}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let headers = HeaderMap::new();
    let es = Profile::builtin("elasticsearch_bulk").unwrap_or_else(|e| panic!("{e}"));
    let status = Profile::builtin("status").unwrap_or_else(|e| panic!("{e}"));
    let oo = Profile::builtin("openobserve").unwrap_or_else(|e| panic!("{e}"));
    println!("reading one answer to a request of {N} records, thread CPU, best of {ROUNDS}:");
    println!("{:<60} {:>12} {:>12} {:>8}", "reader", "µs/batch", "ns/record", "× base");
    for failing in [false, true] {
        let body = bulk(failing);
        let r = Response { status: 200, headers: &headers, body: body.as_bytes() };
        // Both readers must agree before either is timed.
        let sluice::sink::http::response::Ruling::Answers(a) = classify(&es, &ids, &r) else { panic!("answers") };
        assert_eq!(
            a.iter().map(Answer::fate).collect::<Vec<_>>(),
            baseline(body.as_bytes()).iter().map(Answer::fate).collect::<Vec<_>>()
        );
        let base = best(&mut || {
            std::hint::black_box(baseline(std::hint::black_box(body.as_bytes())));
        });
        let prof = best(&mut || {
            std::hint::black_box(classify(&es, &ids, std::hint::black_box(&r)));
        });
        let what = if failing { "one in ten refused" } else { "all created" };
        println!(
            "{:<60} {:>12.1} {:>12.1} {:>8}",
            format!("bulk, {what}: typed serde (baseline)"),
            base * 1e6,
            base * 1e9 / N as f64,
            "1.00"
        );
        println!(
            "{:<60} {:>12.1} {:>12.1} {:>8.2}",
            format!("bulk, {what}: profile elasticsearch_bulk"),
            prof * 1e6,
            prof * 1e9 / N as f64,
            prof / base
        );
    }
    let counts = format!(r#"{{"code":200,"status":[{{"name":"logs","successful":{N},"failed":0}}]}}"#);
    let r = Response { status: 200, headers: &headers, body: counts.as_bytes() };
    let t = best(&mut || {
        std::hint::black_box(classify(&oo, &ids, std::hint::black_box(&r)));
    });
    println!("{:<60} {:>12.1} {:>12.1}", "counts: profile openobserve", t * 1e6, t * 1e9 / N as f64);
    let r = Response { status: 204, headers: &headers, body: b"" };
    let t = best(&mut || {
        std::hint::black_box(classify(&status, &ids, std::hint::black_box(&r)));
    });
    println!("{:<60} {:>12.1} {:>12.1}", "a 204: profile status", t * 1e6, t * 1e9 / N as f64);
    classifier_plugin(&ids);
}

/// The Axiom answer to `N` records whose times are `times`: every tenth
/// failed when `failing`.
fn axiom_body(times: &[i64], failing: bool) -> String {
    let failures: Vec<String> = (0..N)
        .filter(|i| failing && i % 10 == 3)
        .map(|i| {
            format!(
                r#"{{"timestamp":"{}","error":"field 'level' is a string here and a number in the dataset"}}"#,
                sluice_guest::time::format_rfc3339(times[i])
            )
        })
        .collect();
    format!(
        r#"{{"ingested":{},"failed":{},"failures":[{}],"processedBytes":300000,"blocksCreated":0,"walLength":{N}}}"#,
        N - failures.len(),
        failures.len(),
        failures.join(",")
    )
}

fn classifier_plugin(ids: &[&str]) {
    use sluice::plugin::classified::Asked;
    use sluice::sink::http::classifier::ClassifierConfig;
    use sluice_classifier::Classifier as _;
    let wasm = sluice_e2e::build_wasm(&["sluice-classifier-axiom"]).join("sluice_classifier_axiom.wasm");
    let reader = ClassifierConfig { path: wasm, ..ClassifierConfig::default() }
        .build(&sluice_benches::runtime())
        .unwrap_or_else(|e| panic!("{e}"));
    let base_ns = 1_733_300_000_000_000_000i64;
    let times: Vec<Option<i64>> = (0..N as i64).map(|i| Some(base_ns + i * 1_000_000)).collect();
    let plain: Vec<i64> = times.iter().flatten().copied().collect();
    let spans: Vec<(u32, u32)> = (0..N as u32).map(|i| (i * 300, 299)).collect();
    let sent = Asked { ids, timestamps: &times, spans: &spans, texts: &[], body_bytes: N as u64 * 300, attempt: 1 };
    let native_request = sluice_classifier::Request::new(ids, &times, &spans);
    let headers = HeaderMap::new();
    let oo = Profile::builtin("openobserve").unwrap_or_else(|e| panic!("{e}"));
    for failing in [false, true] {
        let body = axiom_body(&plain, failing);
        let r = Response { status: 200, headers: &headers, body: body.as_bytes() };
        let reply = reader.read(&sent, &r);
        let want = if failing { N / 10 } else { 0 };
        match &reply {
            sluice::sink::http::response::Ruling::Answers(a) => {
                assert_eq!(a.iter().filter(|x| x.fate() == "reject").count(), want, "the plugin matched every failure")
            }
            other => panic!("answers expected, got {other:?}"),
        }
        let native_response = sluice_classifier::Response::new(200, body.clone().into_bytes());
        let mut native = sluice_classifier_axiom::Axiom {};
        let base = best(&mut || {
            std::hint::black_box(native.classify(&native_request, std::hint::black_box(&native_response)));
        });
        let plugin = best(&mut || {
            std::hint::black_box(reader.read(&sent, std::hint::black_box(&r)));
        });
        let failed = if failing { N / 10 } else { 0 };
        let counts = format!(
            r#"{{"code":200,"status":[{{"name":"logs","successful":{},"failed":{failed}{}}}]}}"#,
            N - failed,
            if failing { r#","error":"Too old data""# } else { "" }
        );
        let rc = Response { status: 200, headers: &headers, body: counts.as_bytes() };
        let profile = best(&mut || {
            std::hint::black_box(classify(&oo, ids, std::hint::black_box(&rc)));
        });
        let what = if failing { "one in ten failed" } else { "all ingested" };
        for (name, t) in [
            (format!("axiom, {what}: the classifier natively (baseline)"), base),
            (format!("axiom, {what}: classifier plugin (wasm)"), plugin),
            (format!("counts, {what}: profile openobserve"), profile),
        ] {
            println!("{:<60} {:>12.1} {:>12.1} {:>8.2}", name, t * 1e6, t * 1e9 / N as f64, t / base);
        }
    }
}
