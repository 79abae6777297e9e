//! `pattern`: text lines through named-capture patterns, tried in order.
//!
//! ```toml
//! patterns = ['^%{HDFSDATE:Date} %{HDFSTIME:Time} %{INT:Pid} %{LEVEL:Level} %{NOTSPACE:Component}: %{GREEDYDATA:Content}$']
//! # or, each pattern with its own timestamp (several formats in one stream):
//! # [[patterns]]
//! # regex = '^\[(?P<Time>%{APACHETIME})\] ...'
//! # timestamp = { fields = ["Time"], format = "apache" }
//! on_no_match = "reject"           # or "drop" (default reject: keep it in quarantine)
//! id_field = "Id"                  # optional: a capture that is the event id
//! [timestamp]                      # optional: captures joined by one space, then parsed
//! fields = ["Date", "Time"]
//! format = "hdfs"                  # see sluice_guest::time
//! zone = "UTC"                     # of times written without one: "-07:00", "America/Los_Angeles"
//! # ambiguous = "earliest"         # a local time DST skipped or repeated (default: reject it)
//! ```
//!
//! A pattern is a regular expression (Rust `regex` syntax) where
//! `%{SHORTCUT:name}` captures a common piece into field `name` and
//! `%{SHORTCUT}` matches it without capturing; `(?P<name>...)` works too. The
//! body is a JSON object of the captured fields, as strings, or as numbers
//! for a typed capture: `%{INT:bytes:int}`, `%{NUMBER:ms:float}` (a value
//! that does not fit is a rejection naming the field). A field whose name
//! starts with `_` (`%{INT:_ms}`) is captured for the timestamp or the id
//! and kept out of the body. The shortcuts are listed in
//! `plugins/pattern/README.md`.
//!
//! The top-level `[timestamp]` rule applies to every pattern without its
//! own; each such pattern must capture every field the rule names (the
//! config is refused at setup otherwise, naming the pattern), or opt out
//! with `timestamp = false` (its events carry no time).

use std::collections::BTreeMap;

use regex::Regex;
use serde::Deserialize;
use sluice_guest::time::{Ambiguous, Format};
use sluice_guest::{Event, Outcome, Plugin, Record, export_plugin};

/// The shortcuts live in the SDK, so that `sluice plugin inspect --formats`
/// lists the same table this plugin expands.
pub use sluice_guest::shortcuts::SHORTCUTS;

pub use sluice_guest::shortcuts::{FieldType, expand};

#[derive(Deserialize, Default, Clone, Copy, PartialEq, Eq, Debug)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
enum OnNoMatch {
    #[default]
    Reject,
    Drop,
}

/// A timestamp rule: which captures hold the time, and how it is written.
#[derive(Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
struct TimestampConfig {
    /// The captures, joined by one space in this order, then read with
    /// `format`: `["Date", "Time"]`.
    fields: Vec<String>,
    /// A named format (`hdfs`, `apache`, `syslog`, …), a pattern of items,
    /// or a table with its year and zone (below).
    format: Format,
    /// The zone of a time written without one: `UTC`, an offset (`-07:00`)
    /// or an IANA name (`America/Los_Angeles`). Unset: UTC, with a warning
    /// at setup.
    #[serde(default)]
    zone: Option<String>,
    /// A local time a daylight-saving change skipped or repeated: refused
    /// unless this says `earliest` or `latest`.
    #[serde(default)]
    ambiguous: Option<Ambiguous>,
}

impl TimestampConfig {
    /// Applies `zone` to the format, and says (once, at setup) when the
    /// rule reads zone-less times as UTC: `at` names the rule.
    fn resolve(&mut self, at: &str) -> Result<(), String> {
        match (&self.zone, self.ambiguous) {
            (Some(zone), ambiguous) => {
                self.format = self
                    .format
                    .clone()
                    .with_zone(zone, ambiguous.unwrap_or_default())
                    .map_err(|e| format!("{at}.{e}"))?;
            }
            (None, Some(_)) => return Err(format!("{at}.ambiguous: needs a zone (an IANA name) to apply to")),
            (None, None) => {}
        }
        for notice in [self.format.zone_notice(), self.format.year_notice()].into_iter().flatten() {
            sluice_guest::log(sluice_guest::Level::Warn, &format!("{at}: {notice}"));
        }
        Ok(())
    }
}

/// A pattern: a string, or a table with its own timestamp rule.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(untagged))]
enum PatternSpec {
    Plain(String),
    Full(FullPattern),
}

/// A pattern with a timestamp rule of its own (`[[patterns]]`): for a
/// stream that mixes formats.
#[derive(Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
struct FullPattern {
    /// The pattern, as a string pattern is written.
    regex: String,
    /// This pattern's rule, or `false` for none (not even the top-level
    /// `[timestamp]`).
    #[serde(default)]
    timestamp: Option<OwnTimestamp>,
}

/// A pattern's own timestamp: a rule of its own, or `false` to take none
/// (not even the top-level one).
enum OwnTimestamp {
    Rule(TimestampConfig),
    None,
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for OwnTimestamp {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "OwnTimestamp".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let rule = generator.subschema_for::<TimestampConfig>();
        schemars::json_schema!({ "anyOf": [rule, { "const": false }] })
    }
}

impl<'de> Deserialize<'de> for OwnTimestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Bool(false) => Ok(OwnTimestamp::None),
            v @ serde_json::Value::Object(_) => {
                serde_json::from_value(v).map(OwnTimestamp::Rule).map_err(D::Error::custom)
            }
            other => Err(D::Error::custom(format!(
                "a pattern's timestamp is a table {{ fields, format }} or false (none, not even the top-level \
                 one), not {}",
                if other == serde_json::Value::Bool(true) { "true" } else { sluice_guest::json::kind(&other) }
            ))),
        }
    }
}

/// By hand rather than `untagged`, so that a mistake in a table names its
/// key (`unknown field \`regx\``) instead of "did not match any variant".
impl<'de> Deserialize<'de> for PatternSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::String(s) => Ok(PatternSpec::Plain(s)),
            v @ serde_json::Value::Object(_) => {
                serde_json::from_value(v).map(PatternSpec::Full).map_err(D::Error::custom)
            }
            other => Err(D::Error::custom(format!(
                "a pattern is a string or a table with `regex` (and `timestamp`), not {}",
                sluice_guest::json::kind(&other)
            ))),
        }
    }
}

impl PatternSpec {
    fn regex(&self) -> &str {
        match self {
            PatternSpec::Plain(r) | PatternSpec::Full(FullPattern { regex: r, .. }) => r,
        }
    }
}

/// Text lines through named-capture patterns, tried in order: the first
/// that matches makes the event, a JSON object of its captures.
#[derive(Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Pattern {
    /// The patterns, tried in order: each a regular expression (Rust
    /// `regex` syntax) where `%{SHORTCUT:name}` captures a shortcut's
    /// match into field `name`, `%{SHORTCUT:name:int}` or `:float` as a
    /// number, `%{SHORTCUT}` matches without capturing, and `(?P<name>…)`
    /// captures a regex of your own. A field whose name starts with `_`
    /// is kept out of the body. A string, or a table with its own
    /// timestamp rule (`[[patterns]]`).
    patterns: Vec<PatternSpec>,
    /// A line no pattern matches is rejected into the quarantine (`reject`,
    /// with the number of patterns tried) or dropped on purpose and counted
    /// (`drop`).
    #[serde(default)]
    on_no_match: OnNoMatch,
    /// A capture whose text is the event id; unset, the id comes from the
    /// record's source position.
    #[serde(default)]
    id_field: Option<String>,
    /// The timestamp rule of every pattern without its own; each such
    /// pattern must capture the fields it names.
    #[serde(default)]
    timestamp: Option<TimestampConfig>,
    #[cfg_attr(feature = "schema", schemars(skip))]
    #[serde(skip)]
    compiled: Vec<Compiled>,
}

/// The config's JSON Schema, from the type itself (the book's reference).
#[cfg(feature = "schema")]
pub fn config_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Pattern)).unwrap_or_default()
}

struct Compiled {
    regex: Regex,
    /// (capture group index, field name, type, whether it goes in the
    /// body), in pattern order.
    fields: Vec<(usize, String, FieldType, bool)>,
    /// Which timestamp rule the pattern's events take.
    timestamp: Rule,
}

enum Rule {
    Own(TimestampConfig),
    /// The top-level `[timestamp]`, if there is one.
    Shared,
    /// `timestamp = false`.
    None,
}

/// A captured value as its field's type says.
fn typed_value(name: &str, text: &str, ty: FieldType) -> Result<serde_json::Value, String> {
    match ty {
        FieldType::Text => Ok(serde_json::Value::String(text.to_string())),
        FieldType::Int => text
            .trim_start_matches('+')
            .parse::<i64>()
            .map(serde_json::Value::from)
            .map_err(|e| format!("field {name}: {text:?} is not an int ({e})")),
        FieldType::Float => text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(serde_json::Value::Number)
            .ok_or_else(|| format!("field {name}: {text:?} is not a finite float")),
    }
}

impl Plugin for Pattern {
    fn setup(&mut self) -> Result<(), String> {
        if self.patterns.is_empty() {
            return Err("patterns: give at least one pattern".into());
        }
        for (i, spec) in std::mem::take(&mut self.patterns).into_iter().enumerate() {
            let (expanded, typed) = expand(spec.regex()).map_err(|e| format!("patterns[{i}]: {e}"))?;
            let regex = Regex::new(&expanded).map_err(|e| format!("patterns[{i}]: {e}"))?;
            let type_of = |n: &str| typed.iter().find(|(f, _)| f == n).map_or(FieldType::Text, |(_, t)| *t);
            let fields: Vec<(usize, String, FieldType, bool)> = regex
                .capture_names()
                .enumerate()
                .filter_map(|(idx, n)| n.map(|n| (idx, n.to_string(), type_of(n), !n.starts_with('_'))))
                .collect();
            if fields.is_empty() {
                return Err(format!("patterns[{i}] captures no field: use %{{SHORTCUT:name}} or (?P<name>...)"));
            }
            let captured = |f: &str| fields.iter().any(|(_, n, _, _)| n == f);
            let timestamp = match spec {
                PatternSpec::Full(FullPattern { timestamp: Some(OwnTimestamp::Rule(mut ts)), .. }) => {
                    if let Some(f) = ts.fields.iter().find(|f| !captured(f)) {
                        return Err(format!("patterns[{i}].timestamp.fields: {f:?} is not captured by this pattern"));
                    }
                    ts.resolve(&format!("patterns[{i}].timestamp"))?;
                    Rule::Own(ts)
                }
                PatternSpec::Full(FullPattern { timestamp: Some(OwnTimestamp::None), .. }) => Rule::None,
                _ => {
                    // Refused here, not line by line at run time: every
                    // line through this pattern would be rejected.
                    if let Some(f) = self.timestamp.iter().flat_map(|t| &t.fields).find(|f| !captured(f)) {
                        return Err(format!(
                            "patterns[{i}] does not capture {f:?}, which the top-level timestamp.fields names: \
                             capture it, give the pattern a timestamp of its own, or set its timestamp = false"
                        ));
                    }
                    Rule::Shared
                }
            };
            self.compiled.push(Compiled { regex, fields, timestamp });
        }
        let named = |f: &str| self.compiled.iter().any(|c| c.fields.iter().any(|(_, n, _, _)| n == f));
        if let Some(id) = &self.id_field
            && !named(id)
        {
            return Err(format!("id_field {id:?} is not captured by any pattern"));
        }
        if let Some(ts) = &mut self.timestamp {
            ts.resolve("timestamp")?;
            if ts.fields.is_empty() {
                return Err("timestamp.fields: name at least one captured field".into());
            }
            if !self.compiled.iter().any(|c| matches!(c.timestamp, Rule::Shared)) {
                return Err("timestamp: every pattern has a timestamp of its own (or none): the top-level rule \
                            applies to no pattern"
                    .into());
            }
        }
        Ok(())
    }

    fn process(&mut self, record: &Record) -> Outcome {
        let line = match record.text() {
            Ok(l) => l,
            Err(rejected) => return rejected,
        };
        let Some((compiled, caps)) = self.compiled.iter().find_map(|c| c.regex.captures(line).map(|caps| (c, caps)))
        else {
            return match self.on_no_match {
                OnNoMatch::Drop => Outcome::drop("no pattern matched"),
                OnNoMatch::Reject => Outcome::reject(format!("no pattern matched (tried {})", self.compiled.len())),
            };
        };
        let mut fields = BTreeMap::new();
        let mut body = serde_json::Map::with_capacity(compiled.fields.len());
        for (idx, name, ty, in_body) in &compiled.fields {
            if let Some(m) = caps.get(*idx) {
                fields.insert(name.as_str(), m.as_str());
                if !in_body {
                    continue;
                }
                match typed_value(name, m.as_str(), *ty) {
                    Ok(v) => body.insert(name.clone(), v),
                    Err(why) => return Outcome::reject(why),
                };
            }
        }
        let mut event = Event::json(&serde_json::Value::Object(body));
        if let Some(id) = &self.id_field {
            event.id = fields.get(id.as_str()).map(|s| s.to_string());
        }
        let rule = match &compiled.timestamp {
            Rule::Own(ts) => Some(ts),
            Rule::Shared => self.timestamp.as_ref(),
            Rule::None => None,
        };
        if let Some(ts) = rule {
            let mut parts = Vec::with_capacity(ts.fields.len());
            for f in &ts.fields {
                match fields.get(f.as_str()) {
                    Some(v) => parts.push(*v),
                    // Captured by the pattern (setup checked), but in a
                    // part of it this line did not take.
                    None => return Outcome::reject(format!("timestamp field {f:?}: this line has no value for it")),
                }
            }
            let text = parts.join(" ");
            let now = if ts.format.needs_year() { sluice_guest::now() } else { 0 };
            match ts.format.parse(&text, now) {
                Ok(ns) => event.timestamp = Some(ns),
                Err(e) => return Outcome::reject(format!("timestamp: {e}")),
            }
        }
        Outcome::emit(event)
    }
}

export_plugin!(Pattern);

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_guest::configure;

    const HDFS: &str = r#"{"patterns":["^%{HDFSDATE:Date} %{HDFSTIME:Time} %{INT:Pid} %{LEVEL:Level} %{NOTSPACE:Component}: %{GREEDYDATA:Content}$"],"timestamp":{"fields":["Date","Time"],"format":"hdfs"}}"#;

    #[test]
    fn captures_fields_and_the_timestamp() {
        let mut p = configure::<Pattern>(HDFS).unwrap_or_else(|e| panic!("{e}"));
        let out = p.process(&Record::from_line("081109 203615 148 INFO dfs.DataNode$PacketResponder: done\r\n"));
        let Outcome::Emit(ev) = out else { panic!("{out:?}") };
        let body: serde_json::Value = serde_json::from_slice(&ev[0].body).unwrap_or_default();
        assert_eq!(body["Pid"], "148");
        assert_eq!(body["Component"], "dfs.DataNode$PacketResponder");
        assert_eq!(body["Content"], "done");
        assert_eq!(ev[0].timestamp, Some(1_226_262_975_000_000_000));
    }

    #[test]
    fn each_pattern_may_carry_its_own_timestamp() {
        let cfg = r#"{"patterns":[
            {"regex":"^(?P<t>\\d{6} \\d{6}) %{GREEDYDATA:m}$","timestamp":{"fields":["t"],"format":"hdfs"}},
            {"regex":"^(?P<t>%{LOG4JTIME}) %{GREEDYDATA:m}$","timestamp":{"fields":["t"],"format":"log4j"}},
            "^%{WORD:w}$"]}"#;
        let mut p = configure::<Pattern>(cfg).unwrap_or_else(|e| panic!("{e}"));
        let mut ts = |line: &str| match p.process(&Record::from_line(line)) {
            Outcome::Emit(ev) => ev[0].timestamp,
            other => panic!("{other:?}"),
        };
        assert_eq!(ts("081109 203615 x"), Some(1_226_262_975_000_000_000));
        assert_eq!(ts("2015-07-29 17:41:44,747 y"), Some(1_438_191_704_747_000_000));
        assert_eq!(ts("plain"), None);
        let e = configure::<Pattern>(r#"{"patterns":[{"regx":"^a$"}]}"#).err().unwrap_or_default();
        assert!(e.contains("unknown field `regx`"), "{e}");
        let e = configure::<Pattern>(r#"{"patterns":[7]}"#).err().unwrap_or_default();
        assert!(e.contains("a pattern is a string or a table"), "{e}");
        let bad = r#"{"patterns":[{"regex":"^%{WORD:w}$","timestamp":{"fields":["t"],"format":"hdfs"}}]}"#;
        let e = configure::<Pattern>(bad).err().unwrap_or_default();
        assert!(e.contains("patterns[0].timestamp.fields") && e.contains("\"t\""), "{e}");
    }

    /// A rule names the zone of times written without one; a local time
    /// the clocks skipped is a rejection naming it; each rule's mistake is
    /// named by its place.
    #[test]
    fn a_timestamp_rule_names_its_zone() {
        let cfg = r#"{"patterns":[
            "^%{TIMESTAMP_ISO8601:t} %{GREEDYDATA:m}$",
            {"regex":"^@(?P<u>\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d) %{GREEDYDATA:m}$",
             "timestamp":{"fields":["u"],"format":"%Y-%m-%d %H:%M:%S","zone":"-07:00"}}],
            "timestamp":{"fields":["t"],"format":"%Y-%m-%d %H:%M:%S","zone":"America/Los_Angeles"}}"#;
        let mut p = configure::<Pattern>(cfg).unwrap_or_else(|e| panic!("{e}"));
        let mut ts = |line: &str| match p.process(&Record::from_line(line)) {
            Outcome::Emit(ev) => Ok(sluice_guest::time::format_rfc3339(ev[0].timestamp.unwrap_or_default())),
            Outcome::Reject(why) => Err(why),
            other => panic!("{other:?}"),
        };
        assert_eq!(ts("2024-01-15 12:00:00 winter").as_deref(), Ok("2024-01-15T20:00:00Z"));
        assert_eq!(ts("2024-07-01 12:00:00 summer").as_deref(), Ok("2024-07-01T19:00:00Z"));
        assert_eq!(ts("@2024-01-15 12:00:00 fixed").as_deref(), Ok("2024-01-15T19:00:00Z"));
        let why = ts("2024-03-10 02:30:00 skipped").unwrap_err();
        assert!(why.contains("2024-03-10 02:30:00 does not exist in America/Los_Angeles"), "{why}");
        let bad = |rule: &str| {
            let cfg = format!(r#"{{"patterns":["^%{{GREEDYDATA:t}}$"],"timestamp":{{"fields":["t"],{rule}}}}}"#);
            configure::<Pattern>(&cfg).err().unwrap_or_default()
        };
        let e = bad(r#""format":"%Y-%m-%d %H:%M:%S","zone":"Mars/Olympus""#);
        assert!(e.contains("timestamp.zone: unknown time zone \"Mars/Olympus\""), "{e}");
        let e = bad(r#""format":"%Y-%m-%d %H:%M:%S","ambiguous":"latest""#);
        assert!(e.contains("timestamp.ambiguous: needs a zone"), "{e}");
        let e = bad(r#""format":"rfc3339","zone":"UTC""#);
        assert!(e.contains("timestamp.zone:") && e.contains("carry their own offset"), "{e}");
        let e = bad(r#""format":"%Y","zone":"UTC","ambiguous":"sometimes""#);
        assert!(e.contains("unknown variant `sometimes`") && e.contains("earliest"), "{e}");
    }

    /// Issue 24's findings: a capture only for the time landed in the
    /// event; a pattern without the shared rule's fields was accepted and
    /// then rejected every line; `timestamp = false` was refused.
    #[test]
    fn a_hidden_capture_feeds_the_time_and_each_pattern_takes_the_shared_rule_or_none() {
        let cfg = r#"{"patterns":[
            "^%{HDFSDATE:Date} %{HDFSTIME:Time}:(?P<_ms>\\d{1,3}) %{LOGLEVEL:Level} %{GREEDYDATA:Content}$",
            {"regex":"^-- %{GREEDYDATA:Content}$","timestamp":false}],
            "timestamp":{"fields":["Date","Time","_ms"],"format":"%y%m%d %H%M%S %-3f"}}"#;
        let mut p = configure::<Pattern>(cfg).unwrap_or_else(|e| panic!("{e}"));
        let Outcome::Emit(ev) = p.process(&Record::from_line("081109 203615:7 W started")) else { panic!("no match") };
        let body: serde_json::Value = serde_json::from_slice(&ev[0].body).unwrap_or_default();
        assert_eq!(body, serde_json::json!({"Date": "081109", "Time": "203615", "Level": "W", "Content": "started"}));
        assert_eq!(ev[0].timestamp, Some(1_226_262_975_007_000_000), "7 ms, from a capture kept out of the body");
        let Outcome::Emit(ev) = p.process(&Record::from_line("-- a marker line")) else { panic!("no match") };
        assert_eq!(ev[0].timestamp, None, "timestamp = false: no time, and no rejection");
        // The shared rule on a pattern that cannot give it: refused at
        // setup, naming the pattern and the field.
        let cfg = r#"{"patterns":["^%{HDFSDATE:Date} %{HDFSTIME:Time} %{GREEDYDATA:m}$","^-- %{GREEDYDATA:m}$"],
            "timestamp":{"fields":["Date","Time"],"format":"hdfs"}}"#;
        let e = configure::<Pattern>(cfg).err().unwrap_or_default();
        assert!(e.contains("patterns[1] does not capture \"Date\"") && e.contains("timestamp = false"), "{e}");
        let e = configure::<Pattern>(r#"{"patterns":[{"regex":"^%{WORD:w}$","timestamp":true}]}"#).err();
        assert!(e.unwrap_or_default().contains("or false"), "true is not a rule");
        // LOGLEVEL takes logcat's single letters, LEVEL does not.
        for (level, ok) in [("V", true), ("D", true), ("F", true), ("Warning", true), ("X", false)] {
            let mut p = configure::<Pattern>(r#"{"patterns":["^%{LOGLEVEL:l}/x$"]}"#).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                matches!(p.process(&Record::from_line(format!("{level}/x").as_str())), Outcome::Emit(_)),
                ok,
                "{level}"
            );
        }
    }

    #[test]
    fn typed_captures_give_json_numbers_and_a_value_that_does_not_fit_is_rejected() {
        let cfg = r#"{"patterns":["^%{IPORHOST:client} %{QUOTEDSTRING:req} %{POSINT:status:int} %{INT:bytes:int} %{NUMBER:ms:float} %{UUID:id} %{PATH:path} %{DATE:day}$"]}"#;
        let mut p = configure::<Pattern>(cfg).unwrap_or_else(|e| panic!("{e}"));
        let line =
            r#"10.0.0.7 "GET /a \"b\"" 200 -12 3.5 123e4567-e89b-12d3-a456-426614174000 /var/log/x.log 02/03/2016"#;
        let Outcome::Emit(ev) = p.process(&Record::from_line(line)) else { panic!("no match") };
        let body: serde_json::Value = serde_json::from_slice(&ev[0].body).unwrap_or_default();
        assert_eq!(body["status"], 200);
        assert_eq!(body["bytes"], -12);
        assert_eq!(body["ms"], 3.5);
        assert_eq!(body["client"], "10.0.0.7");
        assert_eq!(body["req"], r#""GET /a \"b\"""#);
        assert_eq!(body["path"], "/var/log/x.log");
        assert_eq!(body["day"], "02/03/2016");
        let mut big = configure::<Pattern>(r#"{"patterns":["^%{INT:n:int}$"]}"#).unwrap_or_else(|e| panic!("{e}"));
        match big.process(&Record::from_line("99999999999999999999")) {
            Outcome::Reject(r) => assert!(r.starts_with("field n: \"99999999999999999999\" is not an int"), "{r}"),
            other => panic!("{other:?}"),
        }
        let e = configure::<Pattern>(r#"{"patterns":["^%{INT:n:integer}$"]}"#).err().unwrap_or_default();
        assert!(e.contains("unknown type \"integer\" (int or float)"), "{e}");
    }

    #[test]
    fn the_guide_lists_every_shortcut() {
        let guide = include_str!("../README.md");
        for (name, regex) in SHORTCUTS {
            let row = format!("| `{name}` | `{}` |", regex.replace('|', "\\|"));
            assert!(guide.contains(&row), "plugins/pattern/README.md lacks {row}");
        }
    }

    #[test]
    fn no_match_rejects_or_drops_as_configured() {
        let mut p = configure::<Pattern>(HDFS).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(p.process(&Record::from_line("garbage")), Outcome::Reject(r) if r.contains("no pattern")));
        let cfg = r#"{"patterns":["^%{INT:n}$"],"on_no_match":"drop"}"#;
        let mut p = configure::<Pattern>(cfg).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(p.process(&Record::from_line("x")), Outcome::Drop(_)));
    }

    #[test]
    fn config_errors_name_the_pattern_and_field() {
        let e = configure::<Pattern>(r#"{"patterns":["%{NOPE:x}"]}"#).err().unwrap_or_default();
        assert!(e.contains("patterns[0]") && e.contains("NOPE"), "{e}");
        let e = configure::<Pattern>(r#"{"patterns":["(unclosed"]}"#).err().unwrap_or_default();
        assert!(e.contains("patterns[0]"), "{e}");
        let e = configure::<Pattern>(r#"{"patterns":["%{INT:n}"],"id_field":"m"}"#).err().unwrap_or_default();
        assert!(e.contains("\"m\""), "{e}");
        let e = configure::<Pattern>(r#"{"patterns":["%{INT}"]}"#).err().unwrap_or_default();
        assert!(e.contains("captures no field"), "{e}");
    }
}
