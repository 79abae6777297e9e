//! Every helper of the Rust SDK, given what an author is likely to pass by
//! mistake (a record's payload that is not UTF-8, text where a time was
//! meant, the extremes of an `i64`), answers with an error or a value and
//! never panics: inside a plugin a panic is a trap, which costs the batch a
//! second run record by record and the instance a rebuild.

use sluice_guest::{duration, json, logfmt, shortcuts, time};

/// Awkward inputs: empty, spaces, control bytes, lone high bytes, long
/// digit runs, every format character, JSON fragments.
fn awkward() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = [
        "",
        " ",
        "\0",
        "\t\r\n",
        "-",
        "+",
        ":",
        "9",
        "-9",
        "%",
        "%%",
        "%Y",
        "{",
        "}",
        "{}",
        "[]",
        "\"",
        "\\",
        "a=",
        "=b",
        "a=\"",
        "a=\"\\",
        "1e999",
        "-0",
        "00",
        "2026-13-45T25:61:61Z",
        "2026-02-30T00:00:00Z",
        "9999-12-31T23:59:59.999999999999Z",
        "0000-01-01T00:00:00Z",
        "-2026-01-01T00:00:00Z",
        "2026-12-01T00:00:00+99:99",
        "Feb 30 25:00:00",
        "Dec 31 23:59:60",
        "18446744073709551616",
        "-9223372036854775809",
        "9223372036854775807",
        "-9223372036854775808",
        "{\"a\":",
        "{\"a\":{\"b\":[1,2",
        "%{INT:",
        "%{NOPE:x}",
        "%{INT:x:float}",
        "(?P<x>",
        "ü",
        "日本",
        "\u{feff}2026-01-01T00:00:00Z",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    out.push(vec![0xff, 0xfe, 0x80]);
    out.push(vec![b'{', 0xc3, b'}']);
    out.push("9".repeat(400).into_bytes());
    out.push("{".repeat(10_000).into_bytes());
    out.push("a.".repeat(500).into_bytes());
    out
}

const EXTREMES: [i64; 7] = [i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX - 1, i64::MAX];

#[test]
fn no_helper_panics_on_a_likely_mistake() {
    let inputs = awkward();
    let specs = [
        "rfc3339",
        "epoch_s",
        "epoch_ms",
        "epoch_us",
        "epoch_ns",
        "syslog",
        "hdfs",
        "apache",
        "log4j",
        "%Y-%m-%d %H:%M:%S",
        "%b %e %H:%M:%S",
        "%d/%b/%Y:%H:%M:%S %z",
        "%s",
        "%y%m%d",
        "%H:%M:%S%.f",
    ];
    for input in &inputs {
        let text = String::from_utf8_lossy(input);
        // Compiling whatever an author hands in as a spec.
        let _ = time::Format::new(&text);
        let _ = duration::parse(&text);
        let _ = shortcuts::expand(&text);
        let _ = logfmt::pairs(&text);
        if let Ok(object) = json::RawObject::parse(input) {
            for path in ["", ".", "a", "a.b", "a.0", "0", &*text] {
                let _ = (object.get(path), object.get_str(path), object.get_raw(path));
            }
        }
        for spec in specs {
            let Ok(format) = time::Format::new(spec) else { continue };
            for now in EXTREMES {
                let _ = format.parse(&text, now);
                let _ = format.parse_bytes(input, now);
                let _ = format.parse_json(&serde_json::Value::String(text.to_string()), now);
            }
            for zone in ["UTC", "+14:00", "-12:00", "Europe/Berlin", "Nowhere/Else", &*text] {
                if let Ok(zoned) = time::Format::new(spec).and_then(|f| f.with_zone(zone, time::Ambiguous::Earliest)) {
                    for now in EXTREMES {
                        let _ = zoned.parse(&text, now);
                    }
                }
            }
            for year in [i64::MIN, 0, 1, 1970, 9999, 10_000, i64::MAX] {
                if let Ok(with_year) = time::Format::new(spec).and_then(|f| f.with_year(year)) {
                    let _ = with_year.parse(&text, 0);
                }
            }
        }
    }
    for spec in specs {
        let Ok(format) = time::Format::new(spec) else { continue };
        for value in [
            serde_json::json!(1e300),
            serde_json::json!(-1e300),
            serde_json::json!(u64::MAX),
            serde_json::json!(i64::MIN),
            serde_json::json!(null),
            serde_json::json!([1]),
        ] {
            let _ = format.parse_json(&value, 0);
        }
    }
    for nanos in EXTREMES {
        let text = time::format_rfc3339(nanos);
        assert!(text.ends_with('Z'), "{nanos}: {text}");
    }
    for days in EXTREMES {
        let _ = time::civil_from_days(days / 1_000_000);
    }
}

/// A record's payload goes to a time format as it comes: bytes, read as
/// UTF-8, or an error naming the bytes that are not.
#[test]
fn a_time_format_parses_bytes_as_it_parses_text() {
    let format = time::Format::new("%Y-%m-%d").unwrap_or_else(|e| panic!("{e}"));
    let from_text = format.parse("2017-05-16", 0).map_err(|e| e.to_string());
    let from_bytes = format.parse_bytes(b"2017-05-16", 0).map_err(|e| e.to_string());
    assert_eq!(from_text, from_bytes);
    let refused = format.parse_bytes(&[b'2', 0xff], 0).map(|_| ()).map_err(|e| e.to_string());
    assert!(refused.as_ref().is_err_and(|e| e.contains("UTF-8")), "{refused:?}");
}
