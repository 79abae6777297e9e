//! The output contract's JSON check, with each validator the issue named
//! (issue 21, item 4): is a body one JSON object in UTF-8?
//!
//! Every candidate first answers a corpus of bodies that sit on the rule's
//! edges (invalid UTF-8 inside a string, two objects back to back, a
//! trailing comma, nesting past serde_json's limit...) and is shown where
//! it disagrees with sluice's check, `output_rules::body_breach`; then it
//! checks 200,000 generated bodies of about 300 bytes (the shape of
//! `pipeline_file`), best of five, CPU ns per body.
//!
//! `cargo bench -p sluice-benches --bench json_check --features validators`

use serde::de::IgnoredAny;
use sluice_benches::thread_cpu_seconds;
use sluice_guest::output_rules::body_breach;

type Check = fn(&[u8], &mut Vec<u8>) -> bool;

fn object_start(b: &[u8]) -> bool {
    b.trim_ascii_start().first() == Some(&b'{')
}

fn sluice_check(b: &[u8], _: &mut Vec<u8>) -> bool {
    body_breach(b).is_none()
}

fn simdutf8_serde(b: &[u8], _: &mut Vec<u8>) -> bool {
    match simdutf8::basic::from_utf8(b) {
        Ok(text) => object_start(b) && serde_json::from_str::<IgnoredAny>(text).is_ok(),
        Err(_) => false,
    }
}

fn serde_from_slice(b: &[u8], _: &mut Vec<u8>) -> bool {
    object_start(b) && serde_json::from_slice::<IgnoredAny>(b).is_ok()
}

fn sonic(b: &[u8], _: &mut Vec<u8>) -> bool {
    object_start(b) && sonic_rs::from_slice::<IgnoredAny>(b).is_ok()
}

fn simd_json_tape(b: &[u8], scratch: &mut Vec<u8>) -> bool {
    // simd-json parses in place: a copy per body into a reused buffer.
    scratch.clear();
    scratch.extend_from_slice(b);
    object_start(b) && simd_json::to_tape(scratch).is_ok()
}

fn sdk_scan(b: &[u8], _: &mut Vec<u8>) -> bool {
    sluice_guest::json::RawObject::parse(b).is_ok()
}

const CANDIDATES: &[(&str, Check)] = &[
    ("the SDK's scan (RawObject::parse)", sdk_scan),
    ("sluice's rule (output_rules::body_breach)", sluice_check),
    ("simdutf8 + serde_json", simdutf8_serde),
    ("serde_json from_slice", serde_from_slice),
    ("sonic-rs", sonic),
    ("simd-json tape", simd_json_tape),
];

fn edge_cases() -> Vec<(String, Vec<u8>)> {
    let deep = |n: usize| format!("{{\"a\":{}1{}}}", "[".repeat(n), "]".repeat(n));
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty object", b"{}".to_vec()),
        ("an object", br#"{"a":1,"b":"x","c":[true,null,1.5e3]}"#.to_vec()),
        ("spaces around", b" \t{\"a\":1}\n ".to_vec()),
        ("escaped UTF-16", br#"{"a":"\u00e9\ud83d\ude00"}"#.to_vec()),
        ("UTF-8 in a string", "{\"a\":\"é😀\"}".as_bytes().to_vec()),
        ("invalid UTF-8 in a string", b"{\"a\":\"\xff\"}".to_vec()),
        ("invalid UTF-8 in a name", b"{\"\xc3\x28\":1}".to_vec()),
        ("a lone surrogate escape", br#"{"a":"\ud800"}"#.to_vec()),
        ("two objects", br#"{"a":1}{"b":2}"#.to_vec()),
        ("cut short", br#"{"a":"#.to_vec()),
        ("trailing comma", br#"{"a":1,}"#.to_vec()),
        ("leading zero", br#"{"a":01}"#.to_vec()),
        ("NaN", br#"{"a":NaN}"#.to_vec()),
        ("raw control character", b"{\"a\":\"x\x01y\"}".to_vec()),
        ("single quotes", b"{'a':1}".to_vec()),
        ("bad exponent", br#"{"a":1e}"#.to_vec()),
        ("an array", b"[1,2]".to_vec()),
        ("a string", br#""x""#.to_vec()),
        ("a number", b"12".to_vec()),
        ("nothing", b"".to_vec()),
        ("nested 100 deep", deep(100).into_bytes()),
        ("nested 200 deep", deep(200).into_bytes()),
    ];
    cases.into_iter().map(|(n, b)| (n.to_string(), b)).collect()
}

fn main() {
    let now = sluice_benches::now_secs();
    let bodies: Vec<Vec<u8>> = sluice_benches::json_lines(200_000, now).into_iter().map(String::into_bytes).collect();
    let cases = edge_cases();
    let mut scratch = Vec::new();
    println!("json_check: is a body one JSON object in UTF-8? 200,000 bodies of about 300 bytes, best of 5");
    for (name, check) in CANDIDATES {
        let mut disagree = Vec::new();
        for (n, b) in &cases {
            let accepts = check(b, &mut scratch);
            if accepts != body_breach(b).is_none() {
                disagree.push(format!("{n} ({})", if accepts { "accepts" } else { "refuses" }));
            }
        }
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t0 = thread_cpu_seconds();
            let ok = bodies.iter().filter(|b| check(b, &mut scratch)).count();
            let spent = thread_cpu_seconds() - t0;
            assert_eq!(ok, bodies.len(), "{name} refused a generated body");
            best = best.min(spent);
        }
        println!("  {name:<32} {:>7.1} ns per body", best * 1e9 / bodies.len() as f64);
        if !disagree.is_empty() {
            println!("    differs from sluice's rule on: {}", disagree.join(", "));
        }
    }
}
