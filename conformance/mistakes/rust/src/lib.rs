//! Every helper of the Rust SDK given what an author is likely to pass by
//! mistake (`conformance/mistakes/README.md`). Rust's types refuse the
//! wrong types at compile time, so the mistakes here are of value: a
//! payload that is not UTF-8 handed to a time format, a spec or a duration
//! that means nothing, the extremes of an `i64`, a path into a body that is
//! not an object. Each answers with an error (the record is rejected with
//! it) or a value; none panics, which inside a plugin would be a trap.

use serde::Deserialize;
use sluice_guest::{Event, Outcome, Plugin, Record, duration, export_plugin, json, time};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mistakes {}

fn answered(name: &str, result: impl std::fmt::Debug) -> Outcome {
    Outcome::emit_json(&serde_json::json!({ "mistake": name, "result": format!("{result:?}") }))
}

impl Plugin for Mistakes {
    fn process(&mut self, record: &Record<'_>) -> Outcome {
        let payload = record.payload;
        let name = String::from_utf8_lossy(payload.split(|b| *b == b' ').next().unwrap_or_default()).into_owned();
        let day = match time::Format::new("%Y-%m-%d") {
            Ok(f) => f,
            Err(e) => return Outcome::reject(e),
        };
        let refused = |e: String| Outcome::reject(format!("{name}: {e}"));
        match name.as_str() {
            // A payload that is not UTF-8, as text.
            "parse-not-utf8" => match day.parse_bytes(b"\xff\xfe2017-05-16", 0) {
                Ok(n) => answered(&name, n),
                Err(e) => refused(e.to_string()),
            },
            "format-nonsense" => match time::Format::new("\u{fffd}when") {
                Ok(_) => answered(&name, "compiled"),
                Err(e) => refused(e),
            },
            "year-zero" => match time::Format::new("%b %d").and_then(|f| f.with_year(0)) {
                Ok(_) => answered(&name, "taken"),
                Err(e) => refused(e),
            },
            "zone-nonsense" => {
                match time::Format::new("%Y").and_then(|f| f.with_zone("Mars/Olympus", Default::default())) {
                    Ok(_) => answered(&name, "taken"),
                    Err(e) => refused(e),
                }
            }
            "duration-negative" => match duration::parse("-5s") {
                Ok(d) => answered(&name, d),
                Err(e) => refused(e),
            },
            "text-not-utf8" => match Record::from_line(b"\xff").text() {
                Ok(t) => answered(&name, t),
                Err(outcome) => outcome,
            },
            "object-not-object" => match json::RawObject::parse(b"[1,2]") {
                Ok(o) => answered(&name, o.get("a")),
                Err(e) => refused(e),
            },
            "id-empty" => Outcome::emit(Event::json(&serde_json::json!({"a": 1})).with_id("")),
            // Values at the edges: answered.
            "ok-parse-now-extreme" => answered(&name, day.parse("2017-05-16", i64::MIN).is_ok()),
            "ok-rfc3339-extreme" => answered(&name, (time::format_rfc3339(i64::MIN), time::format_rfc3339(i64::MAX))),
            "ok-parse-epoch-huge" => {
                answered(&name, time::Format::new("epoch_s").map(|f| f.parse("99999999999999999999", 0).is_err()))
            }
            "ok-path-odd" => answered(
                &name,
                json::RawObject::parse(br#"{"a":{"b":[1]}}"#).map(|o| (o.get(""), o.get("a..b"), o.get("a.b.9"))),
            ),
            _ => Outcome::reject("no such mistake in this demo"),
        }
    }
}

export_plugin!(Mistakes);
