//! Timestamps as logs write them, to nanoseconds since the Unix epoch.
//!
//! One parser serves every format: a format is either a named one or a
//! strftime-like pattern, compiled once (at plugin setup) into items, so the
//! per-record cost is a single pass over the input with no allocation.
//!
//! | name | example | pattern |
//! |---|---|---|
//! | `rfc3339` (alias `iso8601`) | `2024-05-01T12:00:00.123Z`, `…+02:00` | (built in; also accepts a space for `T`) |
//! | `epoch_s`, `epoch_ms`, `epoch_us`, `epoch_ns` | `1714564800` | (integer or decimal, or a JSON number) |
//! | `syslog` | `Dec 10 06:55:46` | `%b %e %H:%M:%S` (no year: see below) |
//! | `hdfs` | `081109 203615` | `%y%m%d %H%M%S` |
//! | `apache` | `Sun Dec 04 04:47:44 2005` | `%a %b %d %H:%M:%S %Y` |
//! | `log4j` | `2015-07-29 17:41:44,747` | `%Y-%m-%d %H:%M:%S,%f` |
//!
//! Pattern items:
//!
//! | item | reads |
//! |---|---|
//! | `%Y` | a 4-digit year |
//! | `%y` | a 2-digit year: 69–99 → 19xx, 00–68 → 20xx (POSIX) |
//! | `%m`, `%d` | month, day: 1 or 2 digits (exactly 2 directly before another number) |
//! | `%e` | day, space-padded |
//! | `%j` | day of the year, 3 digits (001–366); not with `%m`, `%d` |
//! | `%b`, `%B` | a month's 3-letter abbreviation or full name, any case (`Dec`, `december`; not `Decem`) |
//! | `%a`, `%A` | a day's 3-letter abbreviation or full name, any case (checked, then skipped) |
//! | `%H` | hour, 0–23, 1 or 2 digits (exactly 2 directly before another number) |
//! | `%I`, `%p` | hour 1–12 and `AM`/`PM` (either case); each needs the other |
//! | `%M`, `%S` | minutes, seconds: exactly 2 digits |
//! | `%-M`, `%-S`, `%-m`, `%-d`, `%-H`, `%-I` | the same, unpadded: 1 or 2 digits (`22:16:0:119`) |
//! | `%T` | `%H:%M:%S` |
//! | `%3f`, `%6f`, `%9f` | exactly 3, 6, 9 digits: milliseconds, microseconds, nanoseconds |
//! | `%-3f`, `%-6f`, `%-9f` | 1 to 3, 6, 9 digits of the same units (`22:15:35:11` with `%H:%M:%S:%-3f` is 11 ms) |
//! | `%f` | a decimal fraction of any length (`.5` is half a second); only after `.` or `,` |
//! | `%z` | `Z`, `+hh:mm`, `+hhmm` or `+hh` |
//! | `%%` | a `%` |
//! | a space | one or more spaces |
//! | any other character | itself, exactly (`-`, `:`, `/`, `T`, `,`, `[`…) |
//!
//! Without `%z` a time is read in the format's zone (`with_zone`: `UTC`,
//! `-07:00`, or an IANA name such as `America/Los_Angeles`, with the tz
//! database compiled in), else as UTC, which [`Format::zone_notice`] lets
//! a plugin say at setup. In an IANA zone a local time the clocks skipped
//! or repeated is refused, naming it, unless [`Ambiguous`] picks the
//! earliest or latest instant it can mean.
//!
//! `%f` elsewhere (after `:`, say) is refused when the pattern is
//! compiled: `…:35:11` may mean 11 ms or 0.11 s, so the pattern must say
//! which with `%3f` or `%-3f` (or the µs and ns forms). A
//! fixed-width item refuses a field of the wrong width rather than
//! misreading it. Two numbers with nothing between them (`%Y%m%d`) are
//! read at fixed widths: `%m`, `%d`, `%H`, `%I` read exactly two digits
//! there (`2017123` is refused, not read as 2017-12-03), and an item that
//! may read one digit (`%-m`, `%e`, `%-3f`) is refused there when the
//! pattern is compiled.
//!
//! Refused rather than guessed: a leap second (`23:59:60`, which Unix time
//! cannot hold; it is not moved to `:59` or to the next second); an
//! `epoch_ms`, `epoch_us` or `epoch_ns` whose whole part has the digits of
//! a coarser unit of the years 2001–2286 (10 for seconds, 13 for
//! milliseconds, 16 for microseconds), which would otherwise read as a
//! time in 1970.
//!
//! A format without a year (syslog) takes the year of `now` and steps back
//! one year when that would put the time more than a day in the future: a
//! December line read in January belongs to last year. A config that knows
//! better names the year: `{ format = "syslog", year = 2016 }` wherever a
//! format is read (`timestamp_format` of the json and pattern plugins); the
//! same table takes `zone` and `ambiguous`.

use std::fmt;

/// The named formats, with an example: what `sluice plugin inspect
/// --formats` prints (the module docs above say the same).
pub const NAMED: &[(&str, &str)] = &[
    ("rfc3339 (iso8601)", "2024-05-01T12:00:00.123Z, …+02:00 (a space for T too)"),
    ("epoch_s, epoch_ms, epoch_us, epoch_ns", "1714564800 (text or a JSON number)"),
    ("syslog", "Dec 10 06:55:46 (%b %e %H:%M:%S; no year)"),
    ("hdfs", "081109 203615 (%y%m%d %H%M%S)"),
    ("apache", "Sun Dec 04 04:47:44 2005 (%a %b %d %H:%M:%S %Y)"),
    ("log4j", "2015-07-29 17:41:44,747 (%Y-%m-%d %H:%M:%S,%f)"),
];

/// The pattern items and what each reads.
pub const ITEMS: &[(&str, &str)] = &[
    ("%Y", "a 4-digit year"),
    ("%y", "a 2-digit year: 69–99 → 19xx, 00–68 → 20xx"),
    ("%m, %d", "month, day: 1 or 2 digits (2 directly before another number)"),
    ("%e", "day, space-padded"),
    ("%j", "day of the year, 3 digits (not with %m, %d)"),
    ("%b, %B", "month: Dec or December, any case (not Decem)"),
    ("%a, %A", "day name: Sun or Sunday (checked, skipped)"),
    ("%H", "hour 0–23, 1 or 2 digits (2 directly before another number)"),
    ("%I, %p", "hour 1–12 and AM/PM; each needs the other"),
    ("%M, %S", "minutes, seconds: exactly 2 digits"),
    ("%-M, %-S, %-m, %-d, %-H, %-I", "unpadded: 1 or 2 digits"),
    ("%T", "%H:%M:%S"),
    ("%3f, %6f, %9f", "exactly 3, 6, 9 digits: ms, µs, ns"),
    ("%-3f, %-6f, %-9f", "1 to 3, 6, 9 digits: ms, µs, ns (:11 is 11 ms)"),
    ("%f", "a decimal fraction, only after . or ,"),
    ("%z", "Z, +hh:mm, +hhmm, +hh"),
    ("%%", "a %"),
    ("a space", "one or more spaces"),
    ("any other character", "itself, exactly"),
];

const NANOS_PER_SEC: i64 = 1_000_000_000;
const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];
const DAYS: [&str; 7] = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"];

/// Why a timestamp could not be read; `Display` names the format and input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeError {
    pub input: String,
    pub format: String,
    pub why: String,
}

impl fmt::Display for TimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot read {:?} as {}: {}", self.input, self.format, self.why)
    }
}

impl std::error::Error for TimeError {}

/// How many digits a number item reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Width {
    /// Exactly 2 (`%M`, `%S`; and `%m`, `%d`, `%H`, `%I` directly before
    /// another number, where 1 or 2 would be ambiguous).
    Two,
    /// 1 or 2 (`%m`, `%d`, `%H`, `%I` elsewhere).
    OneOrTwo,
    /// 1 or 2, asked for with `-` (`%-M`); refused directly before another
    /// number.
    Unpadded,
}

impl Width {
    fn min(self) -> usize {
        if self == Width::Two { 2 } else { 1 }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    Literal(u8),
    Spaces,
    Year4,
    Year2,
    Month(Width),
    MonthName,
    Day(Width),
    DaySpacePadded,
    DayName,
    DayOfYear,
    Hour(Width),
    Hour12(Width),
    AmPm,
    Minute(Width),
    Second(Width),
    Fraction,
    /// Exactly this many digits: 3, 6 or 9.
    FixedFraction(usize),
    /// 1 to this many digits of the unit this many digits give (`%-3f`:
    /// `11` is 11 ms).
    UnpaddedFraction(usize),
    Zone,
}

impl Item {
    /// Whether the item starts by reading a digit: a number item directly
    /// before one must know where it ends.
    fn starts_with_digit(self) -> bool {
        matches!(
            self,
            Item::Year4
                | Item::Year2
                | Item::Month(_)
                | Item::Day(_)
                | Item::DayOfYear
                | Item::Hour(_)
                | Item::Hour12(_)
                | Item::Minute(_)
                | Item::Second(_)
                | Item::FixedFraction(_)
                | Item::UnpaddedFraction(_)
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Rfc3339,
    Epoch { nanos_per_unit: i64 },
    Pattern(Vec<Item>),
}

/// A compiled timestamp format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format {
    name: String,
    kind: Kind,
    has_year: bool,
    /// The year to take when the input has none; none: infer it from now.
    year: Option<i64>,
    /// The zone of a time written without one; none: UTC.
    zone: Option<ZoneRule>,
}

/// What a time means that its text leaves without a zone: a fixed offset
/// or an IANA zone, whose daylight-saving changes make some local times
/// skipped (a gap) or twice (a fold).
#[derive(Debug, Clone, PartialEq, Eq)]
struct ZoneRule {
    /// As the config wrote it, for messages.
    name: String,
    zone: Zone,
    ambiguous: Ambiguous,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Zone {
    /// Seconds east of UTC.
    Fixed(i64),
    Named(jiff::tz::TimeZone),
}

/// What a local time that a daylight-saving change skipped or repeated
/// becomes: refused by default, since either answer may be an hour wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Ambiguous {
    /// The record is rejected, its reason naming the time and the zone.
    #[default]
    Reject,
    /// The earliest instant the local time can mean.
    Earliest,
    /// The latest instant the local time can mean.
    Latest,
}

impl Format {
    /// Compile a named format or a pattern; the error names what is wrong.
    pub fn new(spec: &str) -> Result<Format, String> {
        let kind = match spec {
            "rfc3339" | "iso8601" => Kind::Rfc3339,
            "epoch_s" => Kind::Epoch { nanos_per_unit: NANOS_PER_SEC },
            "epoch_ms" => Kind::Epoch { nanos_per_unit: 1_000_000 },
            "epoch_us" => Kind::Epoch { nanos_per_unit: 1_000 },
            "epoch_ns" => Kind::Epoch { nanos_per_unit: 1 },
            "syslog" => Kind::Pattern(compile("%b %e %H:%M:%S")?),
            "hdfs" => Kind::Pattern(compile("%y%m%d %H%M%S")?),
            "apache" => Kind::Pattern(compile("%a %b %d %H:%M:%S %Y")?),
            "log4j" => Kind::Pattern(compile("%Y-%m-%d %H:%M:%S,%f")?),
            other if other.contains('%') => Kind::Pattern(compile(other)?),
            other => {
                return Err(format!(
                    "unknown timestamp format {other:?}: use rfc3339, epoch_s, epoch_ms, epoch_us, \
                     epoch_ns, syslog, hdfs, apache, log4j, or a %-pattern such as \"%Y-%m-%d %H:%M:%S\""
                ));
            }
        };
        let has_year = match &kind {
            Kind::Pattern(items) => items.iter().any(|i| matches!(i, Item::Year4 | Item::Year2)),
            _ => true,
        };
        Ok(Format { name: spec.to_string(), kind, has_year, year: None, zone: None })
    }

    /// The same format, taking `year` when the input has none (instead of
    /// inferring it from the clock): for old logs without a year.
    pub fn with_year(mut self, year: i64) -> Result<Format, String> {
        if self.has_year {
            return Err(format!("year: the timestamp format {:?} reads the year from the input", self.name));
        }
        if !(1..=9999).contains(&year) {
            return Err(format!("year: {year} is out of range (1–9999)"));
        }
        self.year = Some(year);
        Ok(self)
    }

    /// The same format, reading a time written without a zone in `zone`:
    /// `UTC`, a fixed offset (`-07:00`, `+0530`) or an IANA name
    /// (`America/Los_Angeles`, daylight saving applied). A format whose
    /// input carries its zone (rfc3339, epochs, a pattern with `%z`) is
    /// refused one: the two could disagree.
    pub fn with_zone(mut self, zone: &str, ambiguous: Ambiguous) -> Result<Format, String> {
        let carried = match &self.kind {
            Kind::Rfc3339 => Some("rfc3339 times carry their own offset"),
            Kind::Epoch { .. } => Some("an epoch count is UTC by definition"),
            Kind::Pattern(items) if items.contains(&Item::Zone) => Some("the pattern reads the zone itself (%z)"),
            Kind::Pattern(_) => None,
        };
        if let Some(why) = carried {
            return Err(format!(
                "zone: the timestamp format {:?} needs none ({why}); zone is for a pattern without %z",
                self.name
            ));
        }
        let parsed = match fixed_offset(zone) {
            Some(secs) => Zone::Fixed(secs),
            None => Zone::Named(jiff::tz::TimeZone::get(zone).map_err(|_| {
                format!(
                    "zone: unknown time zone {zone:?}: an IANA name such as \"America/Los_Angeles\" or \
                     \"Europe/Berlin\", an offset such as \"-07:00\", or \"UTC\""
                )
            })?),
        };
        if ambiguous != Ambiguous::Reject && matches!(parsed, Zone::Fixed(_)) {
            return Err(format!(
                "ambiguous: {zone:?} is a fixed offset, where no local time is skipped or repeated; \
                 ambiguous is for an IANA zone"
            ));
        }
        self.zone = Some(ZoneRule { name: zone.to_string(), zone: parsed, ambiguous });
        Ok(self)
    }

    /// What an operator should know about this format's zone: a pattern
    /// without `%z` and without a configured zone reads its times as UTC,
    /// which is an hour or more wrong for a log written in local time and
    /// would go unnoticed. None when the input or the config says the zone.
    pub fn zone_notice(&self) -> Option<String> {
        match &self.kind {
            Kind::Pattern(items) if self.zone.is_none() && !items.contains(&Item::Zone) => Some(format!(
                "the timestamp format {:?} writes no zone: its times are read as UTC. If the log writes \
                 local time, name its zone (zone = \"America/Los_Angeles\" or \"-07:00\"); \
                 zone = \"UTC\" says they are UTC and silences this",
                self.name
            )),
            _ => None,
        }
    }

    /// What an operator should know about this format's year, as
    /// [`Format::zone_notice`] of its zone: a format without a year
    /// (syslog) and without a configured `year` takes each time's year
    /// from now, the host's clock, so a log of another year reads as this
    /// one and would go unnoticed. None when the input or the config says
    /// the year.
    pub fn year_notice(&self) -> Option<String> {
        (!self.has_year && self.year.is_none()).then(|| {
            format!(
                "the timestamp format {:?} writes no year: each time gets the year of now (the host's clock; \
                 the year before when that would put it more than a day ahead), which is wrong for a log of \
                 another year; name it: {{ format = {:?}, year = 2016 }}",
                self.name, self.name
            )
        })
    }

    /// RFC 3339, the default wherever a format is optional.
    pub fn rfc3339() -> Format {
        Format { name: "rfc3339".into(), kind: Kind::Rfc3339, has_year: true, year: None, zone: None }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether [`Format::parse`] needs `now` to fill in a missing year.
    pub fn needs_year(&self) -> bool {
        !self.has_year
    }

    /// Parse `input` (surrounding spaces ignored) to nanoseconds since the
    /// epoch. `now` (nanoseconds) is used only by formats without a year.
    pub fn parse(&self, input: &str, now: i64) -> Result<i64, TimeError> {
        let s = input.trim();
        let result = match &self.kind {
            Kind::Rfc3339 => parse_rfc3339(s.as_bytes()),
            Kind::Epoch { nanos_per_unit } => parse_epoch(s, *nanos_per_unit),
            Kind::Pattern(items) => {
                parse_pattern(items, s.as_bytes(), self.has_year, self.year, self.zone.as_ref(), now)
            }
        };
        result.map_err(|why| TimeError { input: input.to_string(), format: self.name.clone(), why })
    }

    /// [`Format::parse`] of a record's payload or a field as it comes, as
    /// bytes: text that is not UTF-8 is an error naming where, not a
    /// panic (a plugin's panic is a trap).
    pub fn parse_bytes(&self, input: &[u8], now: i64) -> Result<i64, TimeError> {
        match std::str::from_utf8(input) {
            Ok(text) => self.parse(text, now),
            Err(e) => Err(TimeError {
                input: String::from_utf8_lossy(input).into_owned(),
                format: self.name.clone(),
                why: format!("not UTF-8 (invalid byte at offset {})", e.valid_up_to()),
            }),
        }
    }

    /// Parse a JSON value: numbers for the epoch formats, strings for all.
    pub fn parse_json(&self, value: &serde_json::Value, now: i64) -> Result<i64, TimeError> {
        match (value, &self.kind) {
            (serde_json::Value::String(s), _) => self.parse(s, now),
            // A JSON number's own text, so that decimals stay exact.
            (serde_json::Value::Number(n), Kind::Epoch { nanos_per_unit }) => {
                let text = n.to_string();
                parse_epoch(&text, *nanos_per_unit).map_err(|why| TimeError {
                    input: text,
                    format: self.name.clone(),
                    why,
                })
            }
            (other, _) => Err(TimeError {
                input: other.to_string(),
                format: self.name.clone(),
                why: format!("expected a string, found {}", crate::json::kind(other)),
            }),
        }
    }
}

/// A format in a config: its name or pattern, or a table naming the year
/// too (`{ format = "syslog", year = 2016 }`). Read through a JSON value,
/// whatever the config's language, so that a table's mistake is named by
/// its key.
impl<'de> serde::Deserialize<'de> for Format {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        format_of(&value).map_err(serde::de::Error::custom)
    }
}

fn format_of(value: &serde_json::Value) -> Result<Format, String> {
    use serde_json::Value;
    const TABLE: &str = "{ format = \"…\", year = 2016, zone = \"…\", ambiguous = \"reject\" }";
    let table = match value {
        Value::String(spec) => return Format::new(spec),
        Value::Object(table) => table,
        other => {
            return Err(format!(
                "a timestamp format is a name or pattern, or {TABLE}: found {}",
                crate::json::kind(other)
            ));
        }
    };
    if let Some(key) = table.keys().find(|k| !matches!(k.as_str(), "format" | "year" | "zone" | "ambiguous")) {
        return Err(format!(
            "{key}: not a key of a timestamp format table {TABLE} (its keys: format, year, zone, ambiguous)"
        ));
    }
    let format = match table.get("format") {
        Some(Value::String(spec)) => Format::new(spec)?,
        Some(other) => return Err(format!("format: a name or pattern, found {}", crate::json::kind(other))),
        None => return Err(format!("format: missing from the timestamp format table {TABLE}")),
    };
    let format = match table.get("year") {
        None => format,
        Some(Value::Number(n)) if n.as_i64().is_some() => format.with_year(n.as_i64().unwrap_or_default())?,
        Some(other) => {
            return Err(format!("year: a whole number such as 2016, found {}", crate::json::kind(other)));
        }
    };
    let ambiguous = match table.get("ambiguous") {
        None => None,
        Some(value) => Some(ambiguous_of(value)?),
    };
    match (table.get("zone"), ambiguous) {
        (None, None) => Ok(format),
        (None, Some(_)) => Err("ambiguous: needs a zone (an IANA name) to apply to".into()),
        (Some(Value::String(zone)), ambiguous) => format.with_zone(zone, ambiguous.unwrap_or_default()),
        (Some(other), _) => Err(format!(
            "zone: an IANA name such as \"America/Los_Angeles\" or an offset such as \"-07:00\", found {}",
            crate::json::kind(other)
        )),
    }
}

/// `ambiguous = "reject" | "earliest" | "latest"`, its mistake named.
fn ambiguous_of(value: &serde_json::Value) -> Result<Ambiguous, String> {
    match value.as_str() {
        Some("reject") => Ok(Ambiguous::Reject),
        Some("earliest") => Ok(Ambiguous::Earliest),
        Some("latest") => Ok(Ambiguous::Latest),
        _ => Err(format!("ambiguous: \"reject\", \"earliest\" or \"latest\", found {value}")),
    }
}

/// `UTC`, `Z`, `+hh:mm`, `+hhmm` or `+hh` as seconds east of UTC; none for
/// anything else (an IANA name, or a mistake the zone database names).
fn fixed_offset(zone: &str) -> Option<i64> {
    if zone.eq_ignore_ascii_case("utc") || zone == "Z" {
        return Some(0);
    }
    if !zone.starts_with(['+', '-']) {
        return None;
    }
    let mut c = Cursor { s: zone.as_bytes(), i: 0 };
    let secs = c.zone().ok()?;
    (c.i == zone.len()).then_some(secs)
}

fn compile(pattern: &str) -> Result<Vec<Item>, String> {
    let bad = |why: String| format!("timestamp pattern {pattern:?}: {why}");
    let mut items = Vec::new();
    let mut bytes = pattern.bytes().peekable();
    while let Some(b) = bytes.next() {
        if b == b' ' {
            items.push(Item::Spaces);
            continue;
        }
        if b != b'%' {
            items.push(Item::Literal(b));
            continue;
        }
        let unpadded = bytes.next_if_eq(&b'-').is_some();
        let width = bytes.next_if(|c| matches!(c, b'3' | b'6' | b'9')).map(|c| usize::from(c - b'0'));
        let number = |padded: Width| if unpadded { Width::Unpadded } else { padded };
        let item = match (bytes.next(), unpadded, width) {
            (Some(b'f'), false, Some(w)) => Item::FixedFraction(w),
            (Some(b'f'), true, Some(w)) => Item::UnpaddedFraction(w),
            (Some(b'f'), true, None) => {
                return Err(bad("%-f needs its unit: %-3f (1–3 digits of milliseconds), %-6f or %-9f".into()));
            }
            (Some(b'f'), false, None) => {
                if !matches!(items.last(), Some(Item::Literal(b'.' | b','))) {
                    return Err(bad("%f (a decimal fraction) is ambiguous unless it follows '.' or ',': \
                         write %3f for milliseconds, %6f for microseconds or %9f for nanoseconds \
                         (%-3f for 1–3 digits of milliseconds)"
                        .into()));
                }
                Item::Fraction
            }
            (Some(c), _, Some(w)) => {
                return Err(bad(format!(
                    "a width ({w}) is allowed only before f (%{w}f, %-{w}f), not before %{}",
                    c as char
                )));
            }
            (Some(b'm'), _, None) => Item::Month(number(Width::OneOrTwo)),
            (Some(b'd'), _, None) => Item::Day(number(Width::OneOrTwo)),
            (Some(b'H'), _, None) => Item::Hour(number(Width::OneOrTwo)),
            (Some(b'I'), _, None) => Item::Hour12(number(Width::OneOrTwo)),
            (Some(b'M'), _, None) => Item::Minute(number(Width::Two)),
            (Some(b'S'), _, None) => Item::Second(number(Width::Two)),
            (Some(c), true, None) => return Err(bad(format!("%-{} has no unpadded form", c as char))),
            (Some(b'Y'), false, None) => Item::Year4,
            (Some(b'y'), false, None) => Item::Year2,
            (Some(b'b' | b'B'), false, None) => Item::MonthName,
            (Some(b'e'), false, None) => Item::DaySpacePadded,
            (Some(b'a' | b'A'), false, None) => Item::DayName,
            (Some(b'j'), false, None) => Item::DayOfYear,
            (Some(b'p'), false, None) => Item::AmPm,
            (Some(b'z'), false, None) => Item::Zone,
            (Some(b'%'), false, None) => Item::Literal(b'%'),
            (Some(b'T'), false, None) => {
                items.extend([
                    Item::Hour(Width::OneOrTwo),
                    Item::Literal(b':'),
                    Item::Minute(Width::Two),
                    Item::Literal(b':'),
                ]);
                Item::Second(Width::Two)
            }
            (Some(other), _, None) => return Err(bad(format!("unknown item %{}", other as char))),
            (None, _, _) => return Err(bad("ends with a lone %".into())),
        };
        items.push(item);
    }
    // Numbers side by side have no separator to end them: a 1-or-2-digit
    // item next to another number reads exactly two digits (`%Y%m%d`
    // reads `20171203`, and refuses `2017123` rather than take it for
    // 2017-12-03), and one the pattern asked to read unpadded, directly
    // before another number, is ambiguous.
    let two = |item: Item| match item {
        Item::Month(Width::OneOrTwo) => Item::Month(Width::Two),
        Item::Day(Width::OneOrTwo) => Item::Day(Width::Two),
        Item::Hour(Width::OneOrTwo) => Item::Hour(Width::Two),
        Item::Hour12(Width::OneOrTwo) => Item::Hour12(Width::Two),
        other => other,
    };
    for i in 1..items.len() {
        if !(items[i].starts_with_digit() && (items[i - 1].starts_with_digit() || items[i - 1] == Item::DaySpacePadded))
        {
            continue;
        }
        if matches!(
            items[i - 1],
            Item::Month(Width::Unpadded)
                | Item::Day(Width::Unpadded)
                | Item::Hour(Width::Unpadded)
                | Item::Hour12(Width::Unpadded)
                | Item::Minute(Width::Unpadded)
                | Item::Second(Width::Unpadded)
                | Item::UnpaddedFraction(_)
                | Item::DaySpacePadded
        ) {
            return Err(bad(
                "an item of 1 or more digits (%-…, %e) directly before another number is ambiguous: put a \
                 separator between them, or use the padded item"
                    .into(),
            ));
        }
        items[i - 1] = two(items[i - 1]);
        items[i] = two(items[i]);
    }
    let has = |f: fn(&Item) -> bool| items.iter().any(f);
    if has(|i| matches!(i, Item::Hour12(_))) != has(|i| matches!(i, Item::AmPm)) {
        return Err(bad("%I (hour 1–12) and %p (AM/PM) go together".into()));
    }
    if has(|i| matches!(i, Item::Hour12(_))) && has(|i| matches!(i, Item::Hour(_))) {
        return Err(bad("%I and %H both give the hour".into()));
    }
    if has(|i| matches!(i, Item::DayOfYear))
        && has(|i| matches!(i, Item::Month(_) | Item::MonthName | Item::Day(_) | Item::DaySpacePadded))
    {
        return Err(bad("%j (day of the year) and a month or day both give the date".into()));
    }
    Ok(items)
}

/// The unit `width` digits of a second give.
fn unit_of(width: usize) -> &'static str {
    match width {
        3 => "milliseconds",
        6 => "microseconds",
        _ => "nanoseconds",
    }
}

struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn digits(&mut self, min: usize, max: usize, what: &str) -> Result<i64, String> {
        let start = self.i;
        while self.i < self.s.len() && self.i - start < max && self.s[self.i].is_ascii_digit() {
            self.i += 1;
        }
        if self.i - start < min {
            return Err(format!("expected {what} at byte {start}"));
        }
        Ok(self.s[start..self.i].iter().fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0')))
    }

    fn byte(&mut self, want: u8) -> Result<(), String> {
        if self.s.get(self.i) == Some(&want) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!("expected {:?} at byte {}", want as char, self.i))
        }
    }

    fn spaces(&mut self, min: usize) -> Result<(), String> {
        let start = self.i;
        while self.s.get(self.i) == Some(&b' ') {
            self.i += 1;
        }
        if self.i - start < min { Err(format!("expected a space at byte {start}")) } else { Ok(()) }
    }

    fn word(&mut self) -> &[u8] {
        let start = self.i;
        while self.i < self.s.len() && self.s[self.i].is_ascii_alphabetic() {
            self.i += 1;
        }
        &self.s[start..self.i]
    }

    /// Fraction digits of a second, as nanoseconds (digits past 9 ignored).
    fn fraction(&mut self) -> Result<i64, String> {
        let start = self.i;
        let mut nanos = 0i64;
        while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
            if self.i - start < 9 {
                nanos = nanos * 10 + i64::from(self.s[self.i] - b'0');
            }
            self.i += 1;
        }
        let n = self.i - start;
        if n == 0 {
            return Err(format!("expected fraction digits at byte {start}"));
        }
        for _ in n..9 {
            nanos *= 10;
        }
        Ok(nanos)
    }

    /// Exactly `width` digits of a second (3: ms, 6: µs, 9: ns), as
    /// nanoseconds; a field of another width is refused, not misread.
    fn fixed_fraction(&mut self, width: usize) -> Result<i64, String> {
        let start = self.i;
        let unit = unit_of(width);
        let v = self.digits(width, width, &format!("{width} digits of {unit}"))?;
        if self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
            return Err(format!("expected {width} digits of {unit} at byte {start}, found more"));
        }
        Ok(v * 10i64.pow(9 - width as u32))
    }

    /// 1 to `width` digits of the unit `width` digits give (3: ms), as
    /// nanoseconds: `%-3f` reads `11` as 11 ms, and refuses a fourth digit.
    fn unpadded_fraction(&mut self, width: usize) -> Result<i64, String> {
        let start = self.i;
        let unit = unit_of(width);
        let v = self.digits(1, width, &format!("1 to {width} digits of {unit}"))?;
        if self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
            return Err(format!("expected at most {width} digits of {unit} at byte {start}, found more"));
        }
        Ok(v * 10i64.pow(9 - width as u32))
    }

    /// `Z`, `z`, `+hh:mm`, `+hhmm` or `+hh`, as seconds east of UTC.
    fn zone(&mut self) -> Result<i64, String> {
        match self.s.get(self.i) {
            Some(b'Z' | b'z') => {
                self.i += 1;
                Ok(0)
            }
            Some(&sign @ (b'+' | b'-')) => {
                self.i += 1;
                let h = self.digits(2, 2, "zone hours")?;
                if self.s.get(self.i) == Some(&b':') {
                    self.i += 1;
                }
                let m = if self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
                    self.digits(2, 2, "zone minutes")?
                } else {
                    0
                };
                if h > 23 || m > 59 {
                    return Err(format!("zone offset {h:02}:{m:02} out of range"));
                }
                let secs = h * 3600 + m * 60;
                Ok(if sign == b'-' { -secs } else { secs })
            }
            _ => Err(format!("expected a zone (Z or +hh:mm) at byte {}", self.i)),
        }
    }
}

#[derive(Default)]
struct Parts {
    year: Option<i64>,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    nanos: i64,
    offset: i64,
    /// Day of the year (`%j`), resolved once the year is known.
    yday: Option<i64>,
    /// `%p`: true for PM; with `%I`.
    pm: Option<bool>,
}

fn parse_pattern(
    items: &[Item],
    s: &[u8],
    has_year: bool,
    year: Option<i64>,
    zone: Option<&ZoneRule>,
    now: i64,
) -> Result<i64, String> {
    let mut c = Cursor { s, i: 0 };
    let mut p = Parts { month: 1, day: 1, ..Parts::default() };
    for item in items {
        match *item {
            Item::Literal(b) => c.byte(b)?,
            Item::Spaces => c.spaces(1)?,
            Item::Year4 => p.year = Some(c.digits(4, 4, "a 4-digit year")?),
            Item::Year2 => {
                let y = c.digits(2, 2, "a 2-digit year")?;
                p.year = Some(if y >= 69 { 1900 + y } else { 2000 + y });
            }
            Item::Month(w) => p.month = c.digits(w.min(), 2, "a month")?,
            Item::MonthName => {
                let at = c.i;
                let w = c.word();
                p.month = name_index(&MONTHS, w).ok_or_else(|| {
                    format!("expected a month's name or its 3-letter abbreviation at byte {at}, found {:?}", lossy(w))
                })? as i64
                    + 1;
            }
            Item::Day(w) => p.day = c.digits(w.min(), 2, "a day")?,
            Item::DaySpacePadded => {
                c.spaces(0)?;
                p.day = c.digits(1, 2, "a day")?;
            }
            Item::DayName => {
                let at = c.i;
                let w = c.word();
                if name_index(&DAYS, w).is_none() {
                    return Err(format!(
                        "expected a day's name or its 3-letter abbreviation at byte {at}, found {:?}",
                        lossy(w)
                    ));
                }
            }
            Item::Hour(w) => p.hour = c.digits(w.min(), 2, "an hour")?,
            Item::Hour12(w) => {
                let at = c.i;
                p.hour = c.digits(w.min(), 2, "an hour (1–12)")?;
                if !(1..=12).contains(&p.hour) {
                    return Err(format!("hour {} at byte {at} is not 1–12 (%I)", p.hour));
                }
            }
            Item::AmPm => {
                let at = c.i;
                p.pm = match c.word().to_ascii_lowercase().as_slice() {
                    b"am" => Some(false),
                    b"pm" => Some(true),
                    _ => return Err(format!("expected AM or PM at byte {at}")),
                };
            }
            Item::DayOfYear => p.yday = Some(c.digits(3, 3, "a 3-digit day of the year")?),
            Item::Minute(w) => p.minute = c.digits(w.min(), 2, "minutes")?,
            Item::Second(w) => p.second = c.digits(w.min(), 2, "seconds")?,
            Item::Fraction => p.nanos = c.fraction()?,
            Item::FixedFraction(width) => p.nanos = c.fixed_fraction(width)?,
            Item::UnpaddedFraction(width) => p.nanos = c.unpadded_fraction(width)?,
            Item::Zone => p.offset = c.zone()?,
        }
    }
    if c.i != s.len() {
        return Err(format!("unexpected text at byte {}", c.i));
    }
    if let Some(pm) = p.pm {
        // 12 AM is midnight, 12 PM noon.
        p.hour = p.hour % 12 + if pm { 12 } else { 0 };
    }
    if has_year {
        assemble(&p, zone)
    } else if let Some(year) = year {
        assemble(&Parts { year: Some(year), ..p }, zone)
    } else {
        // No year in the input: take now's, and last year's when that puts
        // the time more than a day ahead of now.
        let year_now = civil_from_days(now.div_euclid(NANOS_PER_SEC * 86_400)).0;
        let this_year = assemble(&Parts { year: Some(year_now), ..p }, zone)?;
        if this_year > now.saturating_add(86_400 * NANOS_PER_SEC) {
            assemble(&Parts { year: Some(year_now - 1), ..p }, zone)
        } else {
            Ok(this_year)
        }
    }
}

/// The index of `w` among `names` (lower case, full names), matching a
/// whole name or its first three letters, in any case: `Dec`, `december`;
/// not `Decem`.
fn name_index(names: &[&str], w: &[u8]) -> Option<usize> {
    names.iter().position(|n| {
        let n = n.as_bytes();
        (w.len() == 3 || w.len() == n.len()) && n.len() >= w.len() && n[..w.len()].eq_ignore_ascii_case(w)
    })
}

fn lossy(w: &[u8]) -> String {
    String::from_utf8_lossy(w).into_owned()
}

fn parse_rfc3339(s: &[u8]) -> Result<i64, String> {
    let (mut p, mut c) = match rfc3339_head(s) {
        Some(p) => (p, Cursor { s, i: 19 }),
        None => rfc3339_head_slowly(s)?,
    };
    if s.get(c.i) == Some(&b'.') {
        c.i += 1;
        p.nanos = c.fraction()?;
    }
    p.offset = c.zone()?;
    if c.i != s.len() {
        return Err(format!("unexpected text at byte {}", c.i));
    }
    assemble(&p, None)
}

/// `YYYY-MM-DDTHH:MM:SS` read at fixed places, the shape nearly every
/// timestamp has; none sends the text the general way, which accepts the
/// same heads and names what is wrong. A plugin reads one per record: the
/// general reader was about a tenth of the plugins' time in `ledger`'s
/// end-to-end run.
fn rfc3339_head(s: &[u8]) -> Option<Parts> {
    let h = s.get(..19)?;
    if h[4] != b'-' || h[7] != b'-' || !matches!(h[10], b'T' | b't' | b' ') || h[13] != b':' || h[16] != b':' {
        return None;
    }
    let digit = |i: usize| h[i].is_ascii_digit().then(|| i64::from(h[i] - b'0'));
    let two = |i: usize| Some(digit(i)? * 10 + digit(i + 1)?);
    Some(Parts {
        year: Some(two(0)? * 100 + two(2)?),
        month: two(5)?,
        day: two(8)?,
        hour: two(11)?,
        minute: two(14)?,
        second: two(17)?,
        ..Parts::default()
    })
}

fn rfc3339_head_slowly(s: &[u8]) -> Result<(Parts, Cursor<'_>), String> {
    let mut c = Cursor { s, i: 0 };
    let mut p = Parts { year: Some(c.digits(4, 4, "a 4-digit year")?), ..Parts::default() };
    c.byte(b'-')?;
    p.month = c.digits(2, 2, "a month")?;
    c.byte(b'-')?;
    p.day = c.digits(2, 2, "a day")?;
    match s.get(c.i) {
        Some(b'T' | b't' | b' ') => c.i += 1,
        _ => return Err(format!("expected 'T' at byte {}", c.i)),
    }
    p.hour = c.digits(2, 2, "an hour")?;
    c.byte(b':')?;
    p.minute = c.digits(2, 2, "minutes")?;
    c.byte(b':')?;
    p.second = c.digits(2, 2, "seconds")?;
    Ok((p, c))
}

/// An integer or decimal count of units, read exactly (no float rounding:
/// `1714564800.25` seconds is 250 ms past the second, not 249.999872).
fn parse_epoch(s: &str, nanos_per_unit: i64) -> Result<i64, String> {
    let (negative, digits) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let whole_digits = whole.trim_start_matches('0').len();
    let all_digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() && frac.is_empty() || !all_digits(whole) || !all_digits(frac) {
        return Err("not a number".into());
    }
    let whole: i128 = if whole.is_empty() { 0 } else { whole.parse().map_err(|_| "out of range".to_string())? };
    let mut nanos = whole * i128::from(nanos_per_unit);
    // Fraction digits beyond nanosecond precision cannot matter.
    let frac = &frac[..frac.len().min(19)];
    if !frac.is_empty() {
        let scale = 10i128.pow(frac.len() as u32);
        let value: i128 = frac.parse().map_err(|_| "not a number".to_string())?;
        nanos += value * i128::from(nanos_per_unit) / scale;
    }
    let nanos = if negative { -nanos } else { nanos };
    let nanos = i64::try_from(nanos).map_err(|_| "out of range".to_string())?;
    // A count of a coarser unit read as a finer one lands in the first
    // months of 1970, silently: the number of its digits gives it away
    // (10 for seconds, 13 for milliseconds, 16 for microseconds of the
    // years 2001–2286).
    let coarser: &[(usize, &str)] = match nanos_per_unit {
        1_000_000 => &[(10, "seconds (epoch_s)")],
        1_000 => &[(10, "seconds (epoch_s)"), (13, "milliseconds (epoch_ms)")],
        1 => &[(10, "seconds (epoch_s)"), (13, "milliseconds (epoch_ms)"), (16, "microseconds (epoch_us)")],
        _ => &[],
    };
    if let Some((digits, name)) = coarser.iter().find(|(d, _)| *d == whole_digits) {
        return Err(format!(
            "{digits} digits read in this unit fall in 1970 ({}): the number looks like a count of {name}",
            format_rfc3339(nanos)
        ));
    }
    Ok(nanos)
}

/// The instant the parts name: their own offset (`%z`, RFC 3339), else
/// the configured zone's at that local time, else UTC.
fn assemble(p: &Parts, zone: Option<&ZoneRule>) -> Result<i64, String> {
    let year = p.year.unwrap_or(1970);
    if let Some(yday) = p.yday {
        let days = if is_leap(year) { 366 } else { 365 };
        if !(1..=days).contains(&yday) {
            return Err(format!("day of the year {yday} out of range for {year}"));
        }
        let (_, month, day) = civil_from_days(days_from_civil(year, 1, 1) + yday - 1);
        return assemble(&Parts { yday: None, month, day, ..*p }, zone);
    }
    if !(1..=12).contains(&p.month) {
        return Err(format!("month {} out of range", p.month));
    }
    if p.day < 1 || p.day > days_in_month(year, p.month) {
        return Err(format!("day {} out of range for {year}-{:02}", p.day, p.month));
    }
    if p.second == 60 && p.hour <= 23 && p.minute <= 59 {
        // Unix time has no place for it: moving it to :59 or to the next
        // second would say something the log did not.
        return Err(format!(
            "{:02}:{:02}:60 is a leap second, which a count of seconds since 1970 (Unix time) cannot hold: \
             refused rather than moved to :59 or to the next second",
            p.hour, p.minute
        ));
    }
    if p.hour > 23 || p.minute > 59 || p.second > 59 {
        return Err(format!("time {:02}:{:02}:{:02} out of range", p.hour, p.minute, p.second));
    }
    let offset = match zone {
        None => p.offset,
        Some(rule) => offset_in(rule, year, p)?,
    };
    let days = days_from_civil(year, p.month, p.day);
    let secs = days * 86_400 + p.hour * 3600 + p.minute * 60 + p.second - offset;
    secs.checked_mul(NANOS_PER_SEC)
        .and_then(|n| n.checked_add(p.nanos))
        .ok_or_else(|| format!("year {year} out of range"))
}

/// The zone's offset (seconds east of UTC) at the local time of `p`, a
/// valid date and time. A local time that a change of offset skipped or
/// repeated has two candidates; the rule's `ambiguous` picks the earlier
/// or later instant, or refuses, naming both offsets.
fn offset_in(rule: &ZoneRule, year: i64, p: &Parts) -> Result<i64, String> {
    use jiff::tz::AmbiguousOffset;
    let tz = match &rule.zone {
        Zone::Fixed(secs) => return Ok(*secs),
        Zone::Named(tz) => tz,
    };
    let local = || format!("{year:04}-{:02}-{:02} {:02}:{:02}:{:02}", p.month, p.day, p.hour, p.minute, p.second);
    let small = |v: i64| i8::try_from(v).map_err(|_| format!("{} is out of range", local()));
    let year16 = i16::try_from(year).map_err(|_| format!("year {year} is out of range"))?;
    let dt = jiff::civil::DateTime::new(
        year16,
        small(p.month)?,
        small(p.day)?,
        small(p.hour)?,
        small(p.minute)?,
        small(p.second)?,
        0,
    )
    .map_err(|e| format!("{}: {e}", local()))?;
    let (before, after, gap) = match tz.to_ambiguous_timestamp(dt).offset() {
        AmbiguousOffset::Unambiguous { offset } => return Ok(i64::from(offset.seconds())),
        AmbiguousOffset::Gap { before, after } => (before, after, true),
        AmbiguousOffset::Fold { before, after } => (before, after, false),
    };
    let (before, after) = (i64::from(before.seconds()), i64::from(after.seconds()));
    // The instant is local − offset: the larger offset gives the earlier.
    match rule.ambiguous {
        Ambiguous::Earliest => Ok(before.max(after)),
        Ambiguous::Latest => Ok(before.min(after)),
        Ambiguous::Reject => {
            let (from, to) = (offset_text(before), offset_text(after));
            let what = if gap {
                format!("does not exist in {}: the clocks skipped it, going from {from} to {to}", rule.name)
            } else {
                format!("happened twice in {}: at {from}, then again at {to}", rule.name)
            };
            Err(format!(
                "{} {what}; refused rather than guessed (ambiguous = \"earliest\" or \"latest\" picks one)",
                local()
            ))
        }
    }
}

fn offset_text(secs: i64) -> String {
    let sign = if secs < 0 { '-' } else { '+' };
    let a = secs.abs();
    format!("{sign}{:02}:{:02}", a / 3600, a % 3600 / 60)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// algorithm: exact over the whole i64 range we accept, no tables).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The (year, month, day) of a day count since 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Nanoseconds since the epoch as RFC 3339 (UTC), for reasons and logs.
pub fn format_rfc3339(nanos: i64) -> String {
    let mut out = Vec::with_capacity(RFC3339_MAX);
    write_rfc3339(nanos, &mut out);
    // Only ASCII digits and separators were written.
    String::from_utf8(out).unwrap_or_default()
}

/// The longest text [`write_rfc3339`] writes: a signed 64-bit count of
/// nanoseconds spans years 1677 to 2262, so four digits of year always.
pub const RFC3339_MAX: usize = 30;

/// [`format_rfc3339`] appended to `out` without an allocation of its own:
/// the form sinks write for every event (`2026-11-29T21:00:00.5Z`, the
/// fraction without trailing zeros, none when whole).
pub fn write_rfc3339(nanos: i64, out: &mut Vec<u8>) {
    let mut buf = [0u8; RFC3339_MAX];
    out.extend_from_slice(rfc3339_into(nanos, &mut buf));
}

/// [`format_rfc3339`] into a buffer on the caller's stack; returns the
/// bytes written (ASCII).
pub fn rfc3339_into(nanos: i64, buf: &mut [u8; RFC3339_MAX]) -> &[u8] {
    let secs = nanos.div_euclid(NANOS_PER_SEC);
    let frac = nanos.rem_euclid(NANOS_PER_SEC);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    let (hh, mm, ss) = (sod / 3600, sod / 60 % 60, sod % 60);
    let digits = |buf: &mut [u8], mut v: i64| {
        for b in buf.iter_mut().rev() {
            *b = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    digits(&mut buf[0..4], y.clamp(0, 9999));
    buf[4] = b'-';
    digits(&mut buf[5..7], m);
    buf[7] = b'-';
    digits(&mut buf[8..10], d);
    buf[10] = b'T';
    digits(&mut buf[11..13], hh);
    buf[13] = b':';
    digits(&mut buf[14..16], mm);
    buf[16] = b':';
    digits(&mut buf[17..19], ss);
    let mut end = 19;
    if frac != 0 {
        buf[19] = b'.';
        digits(&mut buf[20..29], frac);
        end = 29;
        while buf[end - 1] == b'0' {
            end -= 1;
        }
    }
    buf[end] = b'Z';
    &buf[..=end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(spec: &str, input: &str) -> Result<String, String> {
        // 2026-11-29T12:00:00Z
        let now = days_from_civil(2026, 11, 29) * 86_400 * NANOS_PER_SEC + 12 * 3600 * NANOS_PER_SEC;
        Format::new(spec)?.parse(input, now).map(format_rfc3339).map_err(|e| e.to_string())
    }

    /// `input` read with `spec` in `zone` (and `ambiguous`), as RFC 3339 UTC.
    fn zoned(spec: &str, zone: &str, ambiguous: Ambiguous, input: &str) -> Result<String, String> {
        let now = days_from_civil(2026, 11, 29) * 86_400 * NANOS_PER_SEC;
        let format = Format::new(spec)?.with_zone(zone, ambiguous)?;
        format.parse(input, now).map(format_rfc3339).map_err(|e| e.to_string())
    }

    const LOCAL: &str = "%Y-%m-%d %H:%M:%S";
    const LA: &str = "America/Los_Angeles";

    #[test]
    fn a_fixed_offset_zone_reads_local_times() {
        assert_eq!(zoned(LOCAL, "-07:00", Ambiguous::Reject, "2024-05-01 12:00:00").unwrap(), "2024-05-01T19:00:00Z");
        assert_eq!(zoned(LOCAL, "+0530", Ambiguous::Reject, "2024-05-01 12:00:00").unwrap(), "2024-05-01T06:30:00Z");
        assert_eq!(zoned(LOCAL, "UTC", Ambiguous::Reject, "2024-05-01 12:00:00").unwrap(), "2024-05-01T12:00:00Z");
        // The 7 hours the issue's set was off by, without the zone.
        assert_eq!(ts(LOCAL, "2024-05-01 12:00:00").unwrap(), "2024-05-01T12:00:00Z");
    }

    #[test]
    fn an_iana_zone_applies_daylight_saving() {
        let r = Ambiguous::Reject;
        assert_eq!(zoned(LOCAL, LA, r, "2024-07-01 12:00:00").unwrap(), "2024-07-01T19:00:00Z");
        assert_eq!(zoned(LOCAL, LA, r, "2024-01-15 12:00:00").unwrap(), "2024-01-15T20:00:00Z");
        // A yearless syslog time in the zone, its year from now.
        assert_eq!(zoned("syslog", LA, r, "Jul  1 12:00:00").unwrap(), "2026-07-01T19:00:00Z");
    }

    #[test]
    fn a_local_time_the_clocks_skipped_is_refused_unless_the_rule_picks() {
        // 2024-03-10: Los Angeles went from 02:00 PST straight to 03:00 PDT.
        let e = zoned(LOCAL, LA, Ambiguous::Reject, "2024-03-10 02:30:00").unwrap_err();
        assert!(e.contains("2024-03-10 02:30:00 does not exist"), "{e}");
        assert!(e.contains("America/Los_Angeles") && e.contains("going from -08:00 to -07:00"), "{e}");
        assert!(e.contains("ambiguous = \"earliest\""), "{e}");
        assert_eq!(zoned(LOCAL, LA, Ambiguous::Earliest, "2024-03-10 02:30:00").unwrap(), "2024-03-10T09:30:00Z");
        assert_eq!(zoned(LOCAL, LA, Ambiguous::Latest, "2024-03-10 02:30:00").unwrap(), "2024-03-10T10:30:00Z");
        // Either side of the gap is one time only.
        assert_eq!(zoned(LOCAL, LA, Ambiguous::Reject, "2024-03-10 01:59:59").unwrap(), "2024-03-10T09:59:59Z");
        assert_eq!(zoned(LOCAL, LA, Ambiguous::Reject, "2024-03-10 03:00:00").unwrap(), "2024-03-10T10:00:00Z");
    }

    #[test]
    fn a_local_time_that_happened_twice_is_refused_unless_the_rule_picks() {
        // 2024-11-03: 01:00–02:00 happened at -07:00, then again at -08:00.
        let e = zoned(LOCAL, LA, Ambiguous::Reject, "2024-11-03 01:30:00").unwrap_err();
        assert!(e.contains("2024-11-03 01:30:00 happened twice"), "{e}");
        assert!(e.contains("in America/Los_Angeles: at -07:00, then again at -08:00"), "{e}");
        assert_eq!(zoned(LOCAL, LA, Ambiguous::Earliest, "2024-11-03 01:30:00").unwrap(), "2024-11-03T08:30:00Z");
        assert_eq!(zoned(LOCAL, LA, Ambiguous::Latest, "2024-11-03 01:30:00").unwrap(), "2024-11-03T09:30:00Z");
    }

    #[test]
    fn a_zone_where_the_input_carries_one_or_a_zone_unknown_is_refused() {
        let r = Ambiguous::Reject;
        let e = zoned("rfc3339", LA, r, "").unwrap_err();
        assert!(e.starts_with("zone:") && e.contains("carry their own offset"), "{e}");
        let e = zoned("epoch_ms", "-07:00", r, "").unwrap_err();
        assert!(e.contains("UTC by definition"), "{e}");
        let e = zoned("%Y-%m-%d %H:%M:%S%z", LA, r, "").unwrap_err();
        assert!(e.contains("reads the zone itself (%z)"), "{e}");
        let e = zoned(LOCAL, "America/Los_Angles", r, "").unwrap_err();
        assert!(e.contains("unknown time zone \"America/Los_Angles\""), "{e}");
        let e = zoned(LOCAL, "-7:00", r, "").unwrap_err();
        assert!(e.contains("unknown time zone \"-7:00\""), "{e}");
        let e = zoned(LOCAL, "-07:00", Ambiguous::Earliest, "").unwrap_err();
        assert!(e.starts_with("ambiguous:") && e.contains("fixed offset"), "{e}");
    }

    #[test]
    fn a_format_table_names_the_zone_and_its_mistakes() {
        let f = |v: serde_json::Value| format_of(&v);
        let format = f(serde_json::json!({"format": LOCAL, "zone": LA, "ambiguous": "latest"})).unwrap();
        assert_eq!(format_rfc3339(format.parse("2024-11-03 01:30:00", 0).unwrap()), "2024-11-03T09:30:00Z");
        assert!(format.zone_notice().is_none());
        let e = f(serde_json::json!({"format": LOCAL, "ambiguous": "latest"})).unwrap_err();
        assert!(e.starts_with("ambiguous: needs a zone"), "{e}");
        let e = f(serde_json::json!({"format": LOCAL, "zone": LA, "ambiguous": "first"})).unwrap_err();
        assert!(e.starts_with("ambiguous:") && e.contains("\"first\""), "{e}");
        let e = f(serde_json::json!({"format": LOCAL, "zone": 7})).unwrap_err();
        assert!(e.starts_with("zone:"), "{e}");
        let e = f(serde_json::json!({"format": LOCAL, "tz": LA})).unwrap_err();
        assert!(e.starts_with("tz: not a key") && e.contains("zone, ambiguous"), "{e}");
    }

    #[test]
    fn a_zoneless_pattern_without_a_zone_says_it_reads_utc() {
        let notice = Format::new(LOCAL).unwrap().zone_notice().unwrap_or_default();
        assert!(notice.contains("read as UTC") && notice.contains("zone = \"UTC\""), "{notice}");
        assert!(Format::new("syslog").unwrap().zone_notice().is_some());
        for quiet in ["rfc3339", "epoch_ms", "%Y-%m-%dT%H:%M:%S%z"] {
            assert!(Format::new(quiet).unwrap().zone_notice().is_none(), "{quiet}");
        }
        let utc = Format::new(LOCAL).unwrap().with_zone("UTC", Ambiguous::Reject).unwrap();
        assert!(utc.zone_notice().is_none());
    }

    #[test]
    fn a_format_without_a_year_says_so_until_the_config_names_one() {
        let syslog = Format::new("syslog").unwrap();
        let notice = syslog.year_notice().unwrap_or_default();
        assert!(notice.contains("writes no year") && notice.contains("year = 2016"), "{notice}");
        assert!(syslog.with_year(2016).unwrap().year_notice().is_none());
        for with_year in ["rfc3339", "%Y-%m-%d %H:%M:%S", "epoch_ms"] {
            assert!(Format::new(with_year).unwrap().year_notice().is_none(), "{with_year}");
        }
    }

    /// The old `format!` form, kept as the reference the writer must match.
    fn reference(nanos: i64) -> String {
        let secs = nanos.div_euclid(NANOS_PER_SEC);
        let frac = nanos.rem_euclid(NANOS_PER_SEC);
        let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
        let sod = secs.rem_euclid(86_400);
        let (hh, mm, ss) = (sod / 3600, sod / 60 % 60, sod % 60);
        if frac == 0 {
            format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
        } else {
            let ms = format!("{frac:09}");
            format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{}Z", ms.trim_end_matches('0'))
        }
    }

    #[test]
    fn the_allocation_free_writer_matches_the_formatted_text() {
        let mut cases = vec![0, 1, -1, i64::MIN, i64::MAX, 1_700_000_000_000_000_000, 951_782_400_000_000_000];
        // A deterministic spread over the whole range, fractions included.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            cases.push(x as i64);
            cases.push((x as i64) / 1_000_000 * 1_000_000);
            cases.push((x as i64) / NANOS_PER_SEC * NANOS_PER_SEC);
        }
        for n in cases {
            assert_eq!(format_rfc3339(n), reference(n), "{n}");
        }
    }

    #[test]
    fn fixed_width_fractions_read_their_unit_and_refuse_another_width() {
        assert_eq!(ts("%H:%M:%S:%3f", "22:35:11:011").as_deref(), Ok("2026-01-01T22:35:11.011Z"));
        assert_eq!(ts("%H:%M:%S.%6f", "22:35:11.000250").as_deref(), Ok("2026-01-01T22:35:11.00025Z"));
        assert_eq!(ts("%H:%M:%S.%9f", "22:35:11.000000007").as_deref(), Ok("2026-01-01T22:35:11.000000007Z"));
        // 11 ms written without its padding is refused, not read as 0.11 s.
        let short = ts("%H:%M:%S:%3f", "22:35:11:11").err().unwrap_or_default();
        assert!(short.contains("expected 3 digits of milliseconds at byte 9"), "{short}");
        let long = ts("%H:%M:%S:%3f", "22:35:11:0119").err().unwrap_or_default();
        assert!(long.contains("found more"), "{long}");
    }

    #[test]
    fn an_ambiguous_fraction_is_refused_when_the_pattern_is_compiled() {
        let err = Format::new("%H:%M:%S:%f").err().unwrap_or_default();
        assert!(err.contains("%f (a decimal fraction) is ambiguous") && err.contains("%3f"), "{err}");
        assert!(Format::new("%H:%M:%S.%f").is_ok() && Format::new("%H:%M:%S,%f").is_ok());
        assert!(Format::new("%3d").err().unwrap_or_default().contains("a width (3) is allowed only before f"));
    }

    /// Issue 24's findings: each of these was read wrong without a word.
    #[test]
    fn strict_items_refuse_what_they_would_have_misread() {
        // Unpadded milliseconds: `:11` is 11 ms, `:119` 119 ms; a fourth
        // digit is refused.
        assert_eq!(ts("%H:%M:%S:%-3f", "22:15:35:11").as_deref(), Ok("2026-01-01T22:15:35.011Z"));
        assert_eq!(ts("%H:%M:%S:%-3f", "22:15:35:119").as_deref(), Ok("2026-01-01T22:15:35.119Z"));
        assert_eq!(ts("%H:%M:%S.%-6f", "22:15:35.5").as_deref(), Ok("2026-01-01T22:15:35.000005Z"));
        assert!(ts("%H:%M:%S:%-3f", "22:15:35:1190").err().unwrap_or_default().contains("at most 3 digits"));
        assert!(Format::new("%H:%M:%S:%-f").err().unwrap_or_default().contains("%-3f"));
        // A month is its abbreviation or its name, not a word that begins
        // with one; the same for a day.
        assert_eq!(ts("%b %d %Y", "December 04 2005").as_deref(), Ok("2005-12-04T00:00:00Z"));
        assert_eq!(ts("%B %d %Y", "dec 04 2005").as_deref(), Ok("2005-12-04T00:00:00Z"));
        let e = ts("%b %d %Y", "Decem 04 2005").err().unwrap_or_default();
        assert!(e.contains("month's name") && e.contains("\"Decem\""), "{e}");
        assert!(ts("%b %d %Y", "Decembers 04 2005").is_err());
        assert!(ts("%a %b %d %Y", "Sunday Dec 04 2005").is_ok());
        assert!(ts("%a %b %d %Y", "Sunny Dec 04 2005").err().unwrap_or_default().contains("day's name"));
        // A leap second is refused, not moved.
        for (spec, input) in [("rfc3339", "2016-12-31T23:59:60Z"), ("%Y-%m-%d %H:%M:%S", "2016-12-31 23:59:60")] {
            let e = ts(spec, input).err().unwrap_or_default();
            assert!(e.contains("23:59:60 is a leap second") && e.contains("refused"), "{spec}: {e}");
        }
        assert!(ts("rfc3339", "2016-12-31T23:59:61Z").err().unwrap_or_default().contains("out of range"));
        // Numbers with nothing between them read fixed widths.
        assert_eq!(ts("%Y%m%d", "20171203").as_deref(), Ok("2017-12-03T00:00:00Z"));
        assert!(ts("%Y%m%d", "2017123").is_err(), "not 2017-12-03");
        assert_eq!(ts("%Y%m%d%H%M%S", "20171203070809").as_deref(), Ok("2017-12-03T07:08:09Z"));
        assert_eq!(
            ts("%Y-%m-%d %H:%M", "2017-1-3 7:08").as_deref(),
            Ok("2017-01-03T07:08:00Z"),
            "with separators 1 digit still reads"
        );
        assert!(Format::new("%Y%-m%d").err().unwrap_or_default().contains("ambiguous"));
        assert!(Format::new("%-S%-3f").err().unwrap_or_default().contains("ambiguous"));
        assert_eq!(ts("%H%M%S%-3f", "22153511").as_deref(), Ok("2026-01-01T22:15:35.011Z"));
        // A count of seconds given to epoch_ms would read as 1970.
        let e = ts("epoch_ms", "1714564800").err().unwrap_or_default();
        assert!(e.contains("1970-01-20") && e.contains("seconds (epoch_s)"), "{e}");
        assert!(ts("epoch_us", "1714564800123").err().unwrap_or_default().contains("milliseconds (epoch_ms)"));
        assert!(ts("epoch_ns", "1714564800123456").err().unwrap_or_default().contains("microseconds (epoch_us)"));
        assert_eq!(ts("epoch_ns", "1714564800123456789").as_deref(), Ok("2024-05-01T12:00:00.123456789Z"));
        assert_eq!(ts("epoch_us", "1714564800123456").as_deref(), Ok("2024-05-01T12:00:00.123456Z"));
        assert_eq!(ts("iso8601", "2024-05-01T12:00:00Z").as_deref(), Ok("2024-05-01T12:00:00Z"));
    }

    #[test]
    fn unpadded_fields_t_twelve_hour_clocks_and_days_of_the_year() {
        assert_eq!(ts("%-H:%-M:%-S:%3f", "22:16:0:119").as_deref(), Ok("2026-01-01T22:16:00.119Z"));
        assert!(ts("%H:%M:%S", "22:16:0").is_err(), "%S stays exactly two digits");
        assert_eq!(ts("%Y-%m-%d %T", "2016-01-02 03:04:05").as_deref(), Ok("2016-01-02T03:04:05Z"));
        assert_eq!(ts("%Y-%m-%d %I:%M:%S %p", "2016-01-02 12:04:05 AM").as_deref(), Ok("2016-01-02T00:04:05Z"));
        assert_eq!(ts("%Y-%m-%d %I:%M:%S %p", "2016-01-02 12:04:05 pm").as_deref(), Ok("2016-01-02T12:04:05Z"));
        assert_eq!(ts("%Y-%m-%d %I:%M %p", "2016-01-02 7:30 PM").as_deref(), Ok("2016-01-02T19:30:00Z"));
        assert!(ts("%Y-%m-%d %I:%M %p", "2016-01-02 13:30 PM").err().unwrap_or_default().contains("not 1–12"));
        assert!(Format::new("%I:%M").err().unwrap_or_default().contains("go together"));
        assert_eq!(ts("%Y %j %T", "2016 060 10:00:00").as_deref(), Ok("2016-02-29T10:00:00Z"));
        assert!(ts("%Y %j", "2015 366").err().unwrap_or_default().contains("out of range for 2015"));
        assert!(Format::new("%Y %j %m").err().unwrap_or_default().contains("both give the date"));
    }

    #[test]
    fn a_config_names_the_year_of_a_log_without_one() {
        let now = days_from_civil(2026, 11, 29) * 86_400 * NANOS_PER_SEC;
        let f: Format = serde_json::from_str(r#"{"format":"syslog","year":2016}"#).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.parse("Dec 10 06:55:46", now).map(format_rfc3339).as_deref(), Ok("2016-12-10T06:55:46Z"));
        let plain: Format = serde_json::from_str(r#""syslog""#).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(plain.parse("Dec 10 06:55:46", now).map(format_rfc3339).as_deref(), Ok("2025-12-10T06:55:46Z"));
        let err = serde_json::from_str::<Format>(r#"{"format":"rfc3339","year":2016}"#).err().map(|e| e.to_string());
        assert!(err.unwrap_or_default().contains("reads the year from the input"));
        // A table's mistake is named by its key.
        let err = |text: &str| serde_json::from_str::<Format>(text).err().map(|e| e.to_string()).unwrap_or_default();
        let e = err(r#"{"format":"syslog","yeer":2016}"#);
        assert!(e.starts_with("yeer: not a key") && e.contains("format, year"), "{e}");
        assert!(err(r#"{"year":2016}"#).starts_with("format: missing"));
        assert!(err(r#"{"format":"syslog","year":"2016"}"#).starts_with("year: a whole number"));
        assert!(err(r#"{"format":7}"#).starts_with("format: a name or pattern, found a number"));
        assert!(err(r#"{"format":"%Q"}"#).contains("unknown item %Q"));
        assert!(err("[1]").contains("found an array"));
    }

    #[test]
    fn named_formats_read_the_loghub_shapes() {
        assert_eq!(ts("hdfs", "081109 203615").as_deref(), Ok("2008-11-09T20:36:15Z"));
        assert_eq!(ts("apache", "Sun Dec 04 04:47:44 2005").as_deref(), Ok("2005-12-04T04:47:44Z"));
        assert_eq!(ts("log4j", "2015-07-29 17:41:44,747").as_deref(), Ok("2015-07-29T17:41:44.747Z"));
        assert_eq!(ts("syslog", "Jun 14 15:16:01").as_deref(), Ok("2026-06-14T15:16:01Z"));
        assert_eq!(ts("syslog", "Jun  4 15:16:01").as_deref(), Ok("2026-06-04T15:16:01Z"));
    }

    #[test]
    fn syslog_without_a_year_never_lands_in_the_future() {
        // A December line read on 2026-11-29 is from December 2025.
        assert_eq!(ts("syslog", "Dec 10 06:55:46").as_deref(), Ok("2025-12-10T06:55:46Z"));
        assert_eq!(ts("syslog", "Nov 30 06:00:00").as_deref(), Ok("2026-11-30T06:00:00Z"));
    }

    #[test]
    fn rfc3339_with_offsets_and_fractions() {
        assert_eq!(ts("rfc3339", "2024-02-29T23:59:59.5+01:00").as_deref(), Ok("2024-02-29T22:59:59.5Z"));
        assert_eq!(ts("rfc3339", "1969-12-31T23:59:59Z").as_deref(), Ok("1969-12-31T23:59:59Z"));
        assert_eq!(ts("rfc3339", "2024-01-01 00:00:00.123456789123z").as_deref(), Ok("2024-01-01T00:00:00.123456789Z"));
    }

    /// The fixed-place reading of `YYYY-MM-DDTHH:MM:SS` accepts exactly
    /// what the general one accepts, with the same fields, over every
    /// one-byte change of a valid head.
    #[test]
    fn the_fixed_head_and_the_general_one_agree() {
        let fields = |p: &Parts| (p.year, p.month, p.day, p.hour, p.minute, p.second);
        let base = b"2024-02-29T23:59:58.25Z".to_vec();
        let mut inputs = vec![base.clone(), b"2024-02-29 23:59:58Z".to_vec(), b"2024-02-29t23:59:58".to_vec()];
        for at in 0..19 {
            for b in [b'0', b'9', b'-', b':', b'T', b' ', b'x', b'/', 0xc3] {
                let mut m = base.clone();
                m[at] = b;
                inputs.push(m);
            }
            inputs.push(base[..at].to_vec());
        }
        for input in &inputs {
            let slow = rfc3339_head_slowly(input).ok().filter(|(_, c)| c.i == 19).map(|(p, _)| fields(&p));
            let fast = rfc3339_head(input).map(|p| fields(&p));
            assert_eq!(fast, slow, "{:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn epoch_formats() {
        assert_eq!(ts("epoch_s", "1714564800").as_deref(), Ok("2024-05-01T12:00:00Z"));
        assert_eq!(ts("epoch_ms", "1714564800123").as_deref(), Ok("2024-05-01T12:00:00.123Z"));
        assert_eq!(ts("epoch_s", "1714564800.25").as_deref(), Ok("2024-05-01T12:00:00.25Z"));
        let f = Format::new("epoch_ms").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.parse_json(&serde_json::json!(1000), 0), Ok(NANOS_PER_SEC));
    }

    #[test]
    fn errors_name_the_input_format_and_position() {
        let e = ts("rfc3339", "2024-13-01T00:00:00Z").err().unwrap_or_default();
        assert!(e.contains("\"2024-13-01T00:00:00Z\"") && e.contains("rfc3339") && e.contains("month 13"), "{e}");
        let e = ts("hdfs", "081109 2036").err().unwrap_or_default();
        assert!(e.contains("seconds at byte 11"), "{e}");
        let e = ts("rfc3339", "2023-02-29T00:00:00Z").err().unwrap_or_default();
        assert!(e.contains("day 29 out of range"), "{e}");
        assert!(Format::new("%Q").is_err());
        assert!(Format::new("yyyy-mm-dd").is_err());
        assert!(ts("epoch_s", "99999999999999999999").is_err());
        assert!(ts("epoch_s", "12a").is_err() && ts("epoch_s", ".").is_err() && ts("epoch_s", "1e5").is_err());
        assert_eq!(ts("epoch_ms", "-1000.5").as_deref(), Ok("1969-12-31T23:59:58.9995Z"));
    }

    #[test]
    fn civil_conversions_round_trip_over_centuries() {
        for days in (-800_000..800_000).step_by(997) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }
}
