//! What a timestamp rule's zone costs per record (issue 24, item 2): the
//! same local times read as UTC, at a fixed offset, and in an IANA zone
//! (the tz database lookup of each time), beside RFC 3339. CPU ns per
//! parse, median of five rounds of 200,000 times spread over two years
//! (so DST changes are crossed, none falls in a gap or fold), natively:
//! the guest runs the same code in wasm at about the ratio
//! `plugin_runtime` shows.
//!
//! `cargo bench -p sluice-benches --bench timestamp_zones`

use sluice_benches::{median, thread_cpu_seconds};
use sluice_guest::time::{Ambiguous, Format};

const N: usize = 200_000;

fn inputs(rfc3339: bool) -> Vec<String> {
    (0..N)
        .map(|i| {
            // Every 5 h 17 min from 2023-01-01 12:34:56: hours 0–23 all met.
            let t = 1_672_576_496 + i as i64 * 19_020 % (2 * 365 * 86_400);
            let s = sluice_guest::time::format_rfc3339(t * 1_000_000_000);
            let s = s.trim_end_matches('Z').to_string();
            // 01:xx and 02:xx are skipped or doubled on a change day in
            // Los Angeles: move those to 03:xx so every input is valid.
            let s = if s[11..13] == *"01" || s[11..13] == *"02" { format!("{}03{}", &s[..11], &s[13..]) } else { s };
            if rfc3339 { format!("{s}Z") } else { s.replace('T', " ") }
        })
        .collect()
}

fn ns_per_parse(format: &Format, inputs: &[String]) -> f64 {
    let rounds: Vec<f64> = (0..5)
        .map(|_| {
            let start = thread_cpu_seconds();
            let mut sum = 0i64;
            for s in inputs {
                sum = sum.wrapping_add(format.parse(s, 0).unwrap_or_else(|e| panic!("{e}")));
            }
            std::hint::black_box(sum);
            (thread_cpu_seconds() - start) * 1e9 / inputs.len() as f64
        })
        .collect();
    median(rounds)
}

fn main() {
    let local = inputs(false);
    let pattern = "%Y-%m-%d %H:%M:%S";
    let plain = Format::new(pattern).unwrap_or_else(|e| panic!("{e}"));
    let utc = ns_per_parse(&plain, &local);
    let cases = [
        ("rfc3339 (offset in the text)", Format::rfc3339(), inputs(true)),
        (
            "pattern, zone = \"UTC\"",
            plain.clone().with_zone("UTC", Ambiguous::Reject).unwrap_or_else(|e| panic!("{e}")),
            local.clone(),
        ),
        (
            "pattern, zone = \"-07:00\"",
            plain.clone().with_zone("-07:00", Ambiguous::Reject).unwrap_or_else(|e| panic!("{e}")),
            local.clone(),
        ),
        (
            "pattern, zone = \"America/Los_Angeles\"",
            plain.clone().with_zone("America/Los_Angeles", Ambiguous::Reject).unwrap_or_else(|e| panic!("{e}")),
            local.clone(),
        ),
    ];
    println!("{N} times, CPU ns per parse (median of 5), against the pattern without a zone:");
    println!("  {:<40} {utc:>7.1} ns  1.00x", "pattern, no zone (read as UTC)");
    for (name, format, inputs) in &cases {
        let ns = ns_per_parse(format, inputs);
        println!("  {name:<40} {ns:>7.1} ns  {:.2}x", ns / utc);
    }
}
