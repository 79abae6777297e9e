//! A backend's answer described as data: which statuses mean what, where
//! the per-item answers are, which counts say how many records failed,
//! how an error names a bad row. The built-in profiles are written in
//! this form (`sink/http/profiles/*.toml`, shipped inside the binary) and
//! an operator writes the same keys under `[sink.response]` for a backend
//! sluice does not know.
//!
//! What a profile says is read by `classify`, then held to the host's
//! fixed rules (`fixed`): no profile can make a 404 quarantine a record.

use std::fmt;

use serde::{Deserialize, Deserializer};

use super::fixed;
use super::pointer::Pointer;

/// How one backend's answers are read: a built-in profile's file, or an
/// operator's `[sink.response]`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// One line on what "accepted" proves with this backend, for `sluice
    /// check`.
    #[serde(default)]
    pub description: String,
    /// How the request body is written (`lines` follows the sink's
    /// `encoding`; the others are what a backend takes, whatever it says).
    #[serde(default)]
    pub render: Render,
    /// With `sluice check --connect`: a backend that must take a request
    /// of no records (ClickHouse runs the insert of no rows). Otherwise a
    /// 4xx to it still proves the backend is there.
    #[serde(default)]
    pub strict_probe: bool,
    /// Whether the backend keeps one copy of a record sent twice, by its
    /// event id (Elasticsearch `create` with `_id`, a ClickHouse
    /// `ReplacingMergeTree` ordered by it). Where it does not, every
    /// resend of a record it took is a duplicate there: `sluice check`
    /// says which, and the profile's reading never causes one.
    #[serde(default)]
    pub dedup_by_id: bool,
    /// Whether an accepted answer proves the backend stored the records.
    /// `false` for a backend that answers 2xx and skips what it cannot
    /// parse, naming nothing (VictoriaLogs): `sluice check` warns that
    /// its answers cannot prove delivery, and `sluice audit` calls what it
    /// took "sent, unconfirmed".
    #[serde(default = "yes")]
    pub confirms: bool,
    /// Request-level rules, first match wins, after a named `row` (the
    /// most specific evidence there is). With none matching: a 2xx reads
    /// `items`, `counts` or `written` if the profile has them, else
    /// accepts every record; 400, 413 and 422 split the batch; anything
    /// else is systemic.
    #[serde(default)]
    pub status: Vec<StatusRule>,
    /// One answer per record in the body (a bulk API).
    pub items: Option<Items>,
    /// Success and failure counts in the body (no per-record answers).
    pub counts: Option<Counts>,
    /// An error that names the bad row (ClickHouse's `(at row 3)`).
    pub row: Option<Row>,
    /// How many rows the backend wrote, to check against the rows sent.
    pub written: Option<Written>,
    /// Errors that name the records they refused by time (Loki's `entry
    /// with timestamp … ignored`): those are rejected, every other record
    /// of the request was taken and is not sent again.
    pub timed: Option<Timed>,
}

fn yes() -> bool {
    true
}

/// How records become a request body. `lines` follows the sink's
/// `encoding`; the others are what the backend takes, whatever
/// `encoding` says.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Render {
    /// As the sink's `encoding` says: NDJSON or a JSON array.
    #[default]
    Lines,
    /// One JSON document per line.
    Ndjson,
    /// One JSON array.
    JsonArray,
    /// `_bulk`: a `create` action with the event id as `_id` before each
    /// record (needs the sink's `index`).
    ElasticsearchBulk,
    /// Splunk HEC envelopes: `{"time","event","fields":{"event_id"}}`.
    SplunkHec,
    /// OTLP/HTTP logs as JSON: a log record per event.
    OtlpJson,
    /// GELF 1.1, a message per line.
    Gelf,
    /// Loki's push API in JSON: streams of `[time, line]` values, the
    /// stream's labels from the sink's `[sink.labels]`.
    LokiPush,
}

/// What a request-level rule may decide. `retry` and `reject` are not
/// here on purpose: they are facts about one record, and only per-record
/// evidence (`items`, `counts`, `row`) may state them.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RequestFate {
    /// Every record of the request is accepted.
    Accepted,
    /// Every record is already there.
    Duplicate,
    /// The backend's fault: the records wait behind the breaker.
    Systemic,
    /// Some record is bad and the answer does not say which: send the
    /// halves (a lone record is then rejected with the answer).
    Split,
    /// Read the body's evidence: `items`, `counts`, `written`.
    Read,
}

/// A rule over the whole request's answer (`[[sink.response.status]]`).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusRule {
    /// Status codes, each a number (`404`) or a class (`"4xx"`).
    pub codes: Vec<Code>,
    /// The rule applies only when the body matches this regex.
    pub body: Option<Pattern>,
    /// ... only when this header is present (a name, any case).
    pub header: Option<String>,
    /// ... only when that header's value matches this regex.
    pub header_matches: Option<Pattern>,
    /// What a matching answer means for every record of the request.
    pub fate: RequestFate,
}

/// What a per-record answer may decide.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RecordFate {
    /// The backend took the record.
    Accepted,
    /// The backend already had it (a conflict on its id).
    Duplicate,
    /// A passing refusal of this record (a 429 item): sent again.
    Retry,
    /// The record itself is bad: quarantined with the answer as reason.
    Reject,
    /// The backend's fault: the records wait behind the breaker.
    Systemic,
}

/// Where a bulk answer holds one answer per record, and what each means.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Items {
    /// The array of per-record answers (`/items`).
    pub array: Pointer,
    /// An item's status, from the item (`/*/status`).
    pub status: Pointer,
    /// An item's error type (`/*/error/type`), for rules and reasons.
    pub error_type: Option<Pointer>,
    /// An item's error text (`/*/error/reason`), for rules and reasons.
    pub reason: Option<Pointer>,
    /// Match items to records by this id (the event id) instead of by
    /// position.
    pub id: Option<Pointer>,
    /// First match wins; with none matching, a 2xx item is accepted and
    /// any other is rejected.
    #[serde(default)]
    pub rules: Vec<ItemRule>,
}

/// A rule over one item of a bulk answer.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ItemRule {
    /// Item statuses; empty: any.
    #[serde(default)]
    pub codes: Vec<Code>,
    /// Error types (`version_conflict_engine_exception`); empty: any.
    #[serde(default)]
    pub error_types: Vec<String>,
    /// The item's error text matches this regex.
    pub reason_matches: Option<Pattern>,
    /// What a matching item means for its record.
    pub fate: RecordFate,
}

/// Where an answer counts the records taken and refused, when it names
/// none of them.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Counts {
    /// Records taken, summed over every value reached
    /// (`/status/*/successful`); without it, every record not failed.
    pub successful: Option<Pointer>,
    /// Records refused, summed likewise.
    pub failed: Pointer,
    /// The failures when `failed` reaches nothing, an empty body included
    /// (OTLP leaves `partialSuccess` out when all went well); without it,
    /// a missing count is an unreadable answer.
    pub failed_when_absent: Option<u64>,
    /// Error texts that come with failures (`/status/*/error`).
    pub errors: Option<Pointer>,
    /// The refused records themselves, quoted (Quickwit's
    /// `/parse_failures/*/document`): each is matched to the one record
    /// sent with exactly that text, which is rejected; the others were
    /// taken and are not sent again. When a quote matches no record, or
    /// fewer are quoted than `failed` counts, the batch is split instead.
    pub documents: Option<Pointer>,
    /// Error texts that say which kind of failure it is, first match wins.
    #[serde(default)]
    pub rules: Vec<TextRule>,
    /// A failure whose error text matches no rule: `split` (a record's
    /// fault: find it), `systemic` (the backend's until a rule says
    /// otherwise) or `accepted` (the backend's contract says the rest was
    /// taken and a refused record must not be sent again, as OTLP's
    /// partial success: the batch is accepted, and the refused count
    /// logged with the error and counted). A failure with no text at all
    /// is split, unless this is `accepted`.
    #[serde(default = "split")]
    pub otherwise: CountFate,
}

fn split() -> CountFate {
    CountFate::Split
}

/// What a counted failure means for the request.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CountFate {
    /// Some record is bad and the answer does not say which: find it.
    Split,
    /// The backend's fault: the records wait behind the breaker.
    Systemic,
    /// Taken as a whole: the backend kept what it could and, by its
    /// contract, must not be sent the rest again.
    Accepted,
}

/// A rule over one error text of a counted answer.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TextRule {
    /// A regex over one error text.
    pub matches: Pattern,
    /// What a failure with such a text is.
    pub fate: CountFate,
}

/// How an error names the one row it refused.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Row {
    /// A regex over the body whose first group is the row number.
    pub pattern: Pattern,
    /// The number of the first row (ClickHouse counts from 1).
    #[serde(default = "one")]
    pub base: usize,
    /// The header that carries the backend's error code.
    pub code_header: Option<String>,
    /// Or a regex over the body whose first group is the error code.
    pub code_pattern: Option<Pattern>,
    /// Error codes that are never a row's fault, even when a row is named
    /// (no such table, no memory, read-only).
    #[serde(default)]
    pub systemic_codes: Vec<u32>,
    /// The backend took the rows before the named one (Splunk HEC indexes
    /// the events before an invalid one): they are accepted and never sent
    /// again, and only those after it are. Otherwise nothing was taken (an
    /// all-or-nothing insert): the named row is rejected and the others
    /// sent again.
    #[serde(default)]
    pub taken_before: bool,
}

fn one() -> usize {
    1
}

/// How an error names the records it refused by their time.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Timed {
    /// The statuses whose body is read so (Loki: 400).
    pub codes: Vec<Code>,
    /// A regex matched across the body, once per refused record: the
    /// named group `time` is its time, `reason` (optional) why.
    pub pattern: Pattern,
    /// How `time` is written, tried in order (docs/src/plugins.md, "Timestamps").
    pub time_formats: TimeFormats,
    /// A regex whose first group is how many records the backend says it
    /// refused: when it is not the number of times named, or the answer
    /// carries no count, it does not say which records failed, and the
    /// request is split.
    pub total: Option<Pattern>,
}

/// Timestamp formats, compiled when the config is read.
#[derive(Debug, Clone)]
pub struct TimeFormats(pub Vec<sluice_guest::time::Format>);

impl TimeFormats {
    /// `text` as ns since the epoch by the first format that reads it.
    pub(crate) fn parse(&self, text: &str) -> Option<i64> {
        self.0.iter().find_map(|f| f.parse(text, 0).ok())
    }
}

impl<'de> Deserialize<'de> for TimeFormats {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<TimeFormats, D::Error> {
        let specs = Vec::<String>::deserialize(d)?;
        if specs.is_empty() {
            return Err(serde::de::Error::custom("at least one timestamp format"));
        }
        specs
            .iter()
            .map(|s| sluice_guest::time::Format::new(s).map_err(|e| serde::de::Error::custom(format!("{s:?}: {e}"))))
            .collect::<Result<Vec<_>, _>>()
            .map(TimeFormats)
    }
}

/// Where an answer says how many rows were written, so a backend that
/// answers 200 and drops rows is caught.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Written {
    /// The header holding a JSON summary; without it, the body.
    pub header: Option<String>,
    /// Where the count of rows written is (`/written_rows`).
    pub pointer: Pointer,
}

/// A status code or a class of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code {
    /// The lowest status included (`400` for `"4xx"`).
    pub lo: u16,
    /// The highest status included (`499` for `"4xx"`).
    pub hi: u16,
}

impl Code {
    pub(crate) fn contains(&self, status: u16) -> bool {
        (self.lo..=self.hi).contains(&status)
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lo == self.hi { write!(f, "{}", self.lo) } else { write!(f, "{}xx", self.lo / 100) }
    }
}

impl<'de> Deserialize<'de> for Code {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Code, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u16),
            S(String),
        }
        let bad = |s: &str| serde::de::Error::custom(format!("{s:?}: a status code (404) or a class (\"4xx\")"));
        match Raw::deserialize(d)? {
            Raw::N(n) if (100..=599).contains(&n) => Ok(Code { lo: n, hi: n }),
            Raw::N(n) => Err(bad(&n.to_string())),
            Raw::S(s) => match s.as_bytes() {
                [c @ b'1'..=b'5', b'x' | b'X', b'x' | b'X'] => {
                    let lo = u16::from(c - b'0') * 100;
                    Ok(Code { lo, hi: lo + 99 })
                }
                _ => s
                    .parse::<u16>()
                    .ok()
                    .filter(|n| (100..=599).contains(n))
                    .map(|n| Code { lo: n, hi: n })
                    .ok_or_else(|| bad(&s)),
            },
        }
    }
}

/// A regex, compiled when the config is read: a bad one stops the start
/// with the key that holds it.
#[derive(Clone)]
pub struct Pattern(pub regex::Regex);

impl fmt::Debug for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0.as_str())
    }
}

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Pattern, D::Error> {
        let text = String::deserialize(d)?;
        regex::Regex::new(&text).map(Pattern).map_err(|e| serde::de::Error::custom(format!("{text:?}: {e}")))
    }
}

/// In the config's JSON Schema: what `deserialize` above reads.
impl schemars::JsonSchema for Pattern {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Regex".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "format": "regex", "description": "A regular expression (Rust's `regex` syntax)." })
    }
}

impl schemars::JsonSchema for Code {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "StatusCode".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "An HTTP status code (`404`) or a class of them (`\"4xx\"`).",
            "anyOf": [
                { "type": "integer", "minimum": 100, "maximum": 599 },
                { "type": "string", "pattern": "^[1-5][xX][xX]$" }
            ]
        })
    }
}

impl schemars::JsonSchema for TimeFormats {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "TimeFormats".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "array",
            "minItems": 1,
            "items": { "type": "string" },
            "description": "Timestamp formats, tried in order: `rfc3339`, `unix`, `unix_ms`, `unix_ns` or a strftime pattern."
        })
    }
}

/// The built-in profiles, by name: data shipped inside the binary.
pub(crate) const BUILTIN: &[(&str, &str)] = &[
    ("status", include_str!("../profiles/status.toml")),
    ("openobserve", include_str!("../profiles/openobserve.toml")),
    ("openobserve_bulk", include_str!("../profiles/openobserve_bulk.toml")),
    ("elasticsearch_bulk", include_str!("../profiles/elasticsearch_bulk.toml")),
    ("clickhouse", include_str!("../profiles/clickhouse.toml")),
    ("datadog", include_str!("../profiles/datadog.toml")),
    ("victorialogs", include_str!("../profiles/victorialogs.toml")),
    ("quickwit", include_str!("../profiles/quickwit.toml")),
    ("splunk_hec", include_str!("../profiles/splunk_hec.toml")),
    ("otlp_http", include_str!("../profiles/otlp_http.toml")),
    ("gelf", include_str!("../profiles/gelf.toml")),
    ("loki", include_str!("../profiles/loki.toml")),
];

/// A response profile that cannot be had by its name.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// `response = "…"` names no built-in profile.
    #[error("{name:?} is not a built-in response profile (built in: {known})")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The built-in names, comma-separated.
        known: String,
    },
    /// Shipped data, parsed by a unit test of every profile: a broken
    /// build, still reported rather than a panic.
    #[error("the built-in profile {name:?} does not parse: {source}")]
    Broken {
        /// The profile's name.
        name: String,
        /// The TOML error.
        source: toml::de::Error,
    },
}

impl Profile {
    /// A built-in profile by name.
    pub fn builtin(name: &str) -> Result<Profile, ProfileError> {
        let Some((_, text)) = BUILTIN.iter().find(|(n, _)| *n == name) else {
            let names: Vec<&str> = BUILTIN.iter().map(|(n, _)| *n).collect();
            return Err(ProfileError::Unknown { name: name.to_string(), known: names.join(", ") });
        };
        toml::from_str(text).map_err(|source| ProfileError::Broken { name: name.to_string(), source })
    }

    /// Checks beyond the types: `Err((key, message))`, the key relative
    /// to the profile.
    pub(crate) fn first_problem(&self) -> Result<(), (String, String)> {
        for (i, rule) in self.status.iter().enumerate() {
            // A single fixed code, or a whole class of them (3xx, 5xx),
            // given another fate: say so rather than silently overrule it.
            // A class such as 4xx may hold fixed codes; those stay systemic.
            if rule.fate != RequestFate::Systemic
                && let Some(c) = rule.codes.iter().find(|c| (c.lo..=c.hi).all(fixed::systemic_status))
            {
                return Err((
                    format!("status[{i}].codes"),
                    format!(
                        "{c} is always systemic (a fault of the backend, never of a record); no profile can make it {:?}",
                        rule.fate
                    ),
                ));
            }
            if rule.fate == RequestFate::Read && self.items.is_none() && self.counts.is_none() && self.written.is_none()
            {
                return Err((format!("status[{i}].fate"), "\"read\" needs [items], [counts] or [written]".into()));
            }
            if rule.header_matches.is_some() && rule.header.is_none() {
                return Err((format!("status[{i}].header_matches"), "needs header".into()));
            }
        }
        if self.items.is_some() && self.counts.is_some() {
            return Err(("counts".into(), "a profile reads [items] or [counts], not both".into()));
        }
        if let Some(t) = &self.timed {
            if t.pattern.0.capture_names().all(|n| n != Some("time")) {
                return Err(("timed.pattern".into(), "needs a group named time: (?P<time>…)".into()));
            }
            if let Some(c) = t.codes.iter().find(|c| (c.lo..=c.hi).any(fixed::systemic_status)) {
                return Err((
                    "timed.codes".into(),
                    format!("{c} holds statuses that are always systemic: no record is named on them"),
                ));
            }
            if t.total.as_ref().is_some_and(|p| p.0.captures_len() < 2) {
                return Err(("timed.total".into(), "needs a group that captures the count".into()));
            }
        }
        if let Some(row) = &self.row
            && row.pattern.0.captures_len() < 2
        {
            return Err(("row.pattern".into(), "needs a group that captures the row number".into()));
        }
        Ok(())
    }

    /// The rules in force, fixed ones first, as `sluice check` prints them.
    pub(crate) fn describe(&self) -> Vec<String> {
        let mut out: Vec<String> = fixed::DESCRIBED.iter().map(|s| format!("fixed: {s}")).collect();
        for rule in &self.status {
            let codes: Vec<String> = rule.codes.iter().map(Code::to_string).collect();
            let mut when = codes.join(" ");
            if let Some(b) = &rule.body {
                when.push_str(&format!(" body ~ {:?}", b.0.as_str()));
            }
            if let Some(h) = &rule.header {
                when.push_str(&format!(" header {h}"));
                if let Some(m) = &rule.header_matches {
                    when.push_str(&format!(" ~ {:?}", m.0.as_str()));
                }
            }
            out.push(format!("status {when}: {}", word(rule.fate)));
        }
        if let Some(items) = &self.items {
            let by = items.id.as_ref().map_or("position".to_string(), |p| format!("id at {p}"));
            out.push(format!("items at {} (status {}, matched by {by})", items.array, items.status));
            for r in &items.rules {
                let codes: Vec<String> = r.codes.iter().map(Code::to_string).collect();
                let mut when = if codes.is_empty() { "any".to_string() } else { codes.join(" ") };
                if !r.error_types.is_empty() {
                    when.push_str(&format!(" type {}", r.error_types.join("|")));
                }
                if let Some(m) = &r.reason_matches {
                    when.push_str(&format!(" reason ~ {:?}", m.0.as_str()));
                }
                out.push(format!("  item {when}: {}", word(r.fate)));
            }
            out.push("  item otherwise: 2xx accepted, else reject".into());
        }
        if let Some(c) = &self.counts {
            let ok = c.successful.as_ref().map_or("(the rest)".to_string(), Pointer::to_string);
            out.push(format!("counts: successful {ok} failed {} (every record accounted for, or systemic)", c.failed));
            for r in &c.rules {
                out.push(format!("  error ~ {:?}: {}", r.matches.0.as_str(), word(r.fate)));
            }
            out.push(format!("  error otherwise: {}", word(c.otherwise)));
        }
        if let Some(r) = &self.row {
            out.push(format!(
                "row named by {:?} (from {}); never for codes {:?}",
                r.pattern.0.as_str(),
                r.base,
                r.systemic_codes
            ));
        }
        if let Some(t) = &self.timed {
            let codes: Vec<String> = t.codes.iter().map(Code::to_string).collect();
            out.push(format!(
                "on {}: records named by time ({:?}) rejected, the others accepted; a time not sent, or shared, splits",
                codes.join(" "),
                t.pattern.0.as_str()
            ));
        }
        if let Some(w) = &self.written {
            out.push(format!(
                "written rows at {}{}: fewer than sent is systemic, none is a duplicate",
                w.pointer,
                w.header.as_ref().map(|h| format!(" of header {h}")).unwrap_or_default()
            ));
        }
        out.push("otherwise: 2xx read or accepted; 400 413 422 split; anything else systemic".into());
        out
    }
}

/// A fate as the config writes it.
fn word(fate: impl fmt::Debug) -> String {
    format!("{fate:?}").to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_parses_and_validates() {
        for (name, _) in BUILTIN {
            let p = Profile::builtin(name).unwrap_or_else(|e| panic!("{e}"));
            p.first_problem().unwrap_or_else(|(k, m)| panic!("{name}: {k}: {m}"));
            assert!(!p.description.is_empty(), "{name} says what accepted proves");
        }
        assert!(Profile::builtin("nope").is_err_and(|e| e.to_string().contains("elasticsearch_bulk")));
    }

    #[test]
    fn a_profile_cannot_give_a_fixed_code_another_fate() {
        for (codes, fate) in
            [("[404]", "split"), ("[\"5xx\"]", "accepted"), ("[429]", "read"), ("[\"3xx\"]", "duplicate")]
        {
            let text = format!(
                "[[status]]\ncodes = {codes}\nfate = \"{fate}\"\n[counts]\nsuccessful = \"/s\"\nfailed = \"/f\"\n"
            );
            let p: Profile = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
            let err = p.first_problem().err().unwrap_or_else(|| panic!("{codes} {fate} accepted"));
            assert_eq!(err.0, "status[0].codes", "{err:?}");
        }
        // A class that only holds some fixed codes is allowed; they stay systemic.
        let p: Profile =
            toml::from_str("[[status]]\ncodes = [\"4xx\"]\nfate = \"split\"\n").unwrap_or_else(|e| panic!("{e}"));
        assert!(p.first_problem().is_ok());
        // Request-level reject is not a word of the language.
        let e =
            toml::from_str::<Profile>("[[status]]\ncodes = [400]\nfate = \"reject\"\n").err().map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("unknown variant")));
        assert!(toml::from_str::<Profile>("[[status]]\ncodes = [\"6xx\"]\nfate = \"split\"\n").is_err());
        assert!(toml::from_str::<Profile>("[[status]]\ncodes = [200]\nbody = \"(\"\nfate = \"split\"\n").is_err());
    }
}
