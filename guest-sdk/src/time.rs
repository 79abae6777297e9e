//! Timestamps as logs write them, to nanoseconds since the Unix epoch.
//!
//! One parser serves every format: a format is either a named one or a
//! strftime-like pattern, compiled once (at plugin setup) into items, so the
//! per-record cost is a single pass over the input with no allocation.
//!
//! | name | example | pattern |
//! |---|---|---|
//! | `rfc3339` | `2024-05-01T12:00:00.123Z`, `…+02:00` | (built in; also accepts a space for `T`) |
//! | `epoch_s`, `epoch_ms`, `epoch_us`, `epoch_ns` | `1714564800` | (integer, or a JSON number) |
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
//! | `%m`, `%d` | month, day: 1 or 2 digits |
//! | `%e` | day, space-padded |
//! | `%j` | day of the year, 3 digits (001–366); not with `%m`, `%d` |
//! | `%b` | month name, 3 letters or more (`Dec`, `December`) |
//! | `%a` | day name (checked to be a word, then skipped) |
//! | `%H` | hour, 0–23, 1 or 2 digits |
//! | `%I`, `%p` | hour 1–12 and `AM`/`PM` (either case); each needs the other |
//! | `%M`, `%S` | minutes, seconds: exactly 2 digits |
//! | `%-M`, `%-S`, `%-m`, `%-d`, `%-H` | the same, unpadded: 1 or 2 digits (`22:16:0:119`) |
//! | `%T` | `%H:%M:%S` |
//! | `%3f`, `%6f`, `%9f` | exactly 3, 6, 9 digits: milliseconds, microseconds, nanoseconds |
//! | `%f` | a decimal fraction of any length (`.5` is half a second); only after `.` or `,` |
//! | `%z` | `Z`, `+hh:mm`, `+hhmm` or `+hh` |
//! | `%%` | a `%` |
//! | a space | one or more spaces |
//!
//! Without `%z` the time is UTC. `%f` elsewhere (after `:`, say) is refused
//! when the pattern is compiled: `…:35:11` may mean 11 ms or 0.11 s, so the
//! pattern must say which with `%3f` (or `%6f`, `%9f`). A fixed-width item
//! refuses a field of the wrong width rather than misreading it.
//!
//! A format without a year (syslog) takes the year of `now` and steps back
//! one year when that would put the time more than a day in the future: a
//! December line read in January belongs to last year. A config that knows
//! better names the year: `{ format = "syslog", year = 2016 }` wherever a
//! format is read (`timestamp_format` of the json and pattern plugins).

use std::fmt;

/// The named formats, with an example: what `sluice plugin inspect
/// --formats` prints (the module docs above say the same).
pub const NAMED: &[(&str, &str)] = &[
    ("rfc3339", "2024-05-01T12:00:00.123Z, …+02:00 (a space for T too)"),
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
    ("%m, %d", "month, day: 1 or 2 digits"),
    ("%e", "day, space-padded"),
    ("%j", "day of the year, 3 digits (not with %m, %d)"),
    ("%b", "month name (Dec, December)"),
    ("%a", "day name (skipped)"),
    ("%H", "hour 0–23, 1 or 2 digits"),
    ("%I, %p", "hour 1–12 and AM/PM; each needs the other"),
    ("%M, %S", "minutes, seconds: exactly 2 digits"),
    ("%-M, %-S, %-m, %-d, %-H", "unpadded: 1 or 2 digits"),
    ("%T", "%H:%M:%S"),
    ("%3f, %6f, %9f", "exactly 3, 6, 9 digits: ms, µs, ns"),
    ("%f", "a decimal fraction, only after . or ,"),
    ("%z", "Z, +hh:mm, +hhmm, +hh"),
    ("%%", "a %"),
    ("a space", "one or more spaces"),
];

const NANOS_PER_SEC: i64 = 1_000_000_000;
const MONTHS: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    Literal(u8),
    Spaces,
    Year4,
    Year2,
    Month,
    MonthName,
    Day,
    DaySpacePadded,
    DayName,
    DayOfYear,
    Hour,
    Hour12,
    AmPm,
    /// `padded`: exactly 2 digits; else 1 or 2.
    Minute {
        padded: bool,
    },
    Second {
        padded: bool,
    },
    Fraction,
    /// Exactly this many digits: 3, 6 or 9.
    FixedFraction(usize),
    Zone,
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
        Ok(Format { name: spec.to_string(), kind, has_year, year: None })
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

    /// RFC 3339, the default wherever a format is optional.
    pub fn rfc3339() -> Format {
        Format { name: "rfc3339".into(), kind: Kind::Rfc3339, has_year: true, year: None }
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
            Kind::Pattern(items) => parse_pattern(items, s.as_bytes(), self.has_year, self.year, now),
        };
        result.map_err(|why| TimeError { input: input.to_string(), format: self.name.clone(), why })
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
/// too (`{ format = "syslog", year = 2016 }`).
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum FormatSpec {
    Name(String),
    WithYear(FormatWithYear),
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FormatWithYear {
    format: String,
    year: i64,
}

impl<'de> serde::Deserialize<'de> for Format {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let format = match FormatSpec::deserialize(d) {
            Ok(FormatSpec::Name(spec)) => Format::new(&spec),
            Ok(FormatSpec::WithYear(f)) => Format::new(&f.format).and_then(|fmt| fmt.with_year(f.year)),
            Err(_) => Err("a timestamp format is a name or pattern, or { format = \"…\", year = 2016 }".into()),
        };
        format.map_err(serde::de::Error::custom)
    }
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
        let item = match (bytes.next(), unpadded, width) {
            (Some(b'f'), false, Some(w)) => Item::FixedFraction(w),
            (Some(b'f'), false, None) => {
                if !matches!(items.last(), Some(Item::Literal(b'.' | b','))) {
                    return Err(bad("%f (a decimal fraction) is ambiguous unless it follows '.' or ',': \
                         write %3f for milliseconds, %6f for microseconds or %9f for nanoseconds"
                        .into()));
                }
                Item::Fraction
            }
            (Some(c), _, Some(_)) => return Err(bad(format!("a width is allowed only before f, not %{}", c as char))),
            (Some(b'm'), _, None) => Item::Month,
            (Some(b'd'), _, None) => Item::Day,
            (Some(b'H'), _, None) => Item::Hour,
            (Some(b'M'), u, None) => Item::Minute { padded: !u },
            (Some(b'S'), u, None) => Item::Second { padded: !u },
            (Some(c), true, None) => return Err(bad(format!("%-{} has no unpadded form", c as char))),
            (Some(b'Y'), false, None) => Item::Year4,
            (Some(b'y'), false, None) => Item::Year2,
            (Some(b'b'), false, None) => Item::MonthName,
            (Some(b'e'), false, None) => Item::DaySpacePadded,
            (Some(b'a'), false, None) => Item::DayName,
            (Some(b'j'), false, None) => Item::DayOfYear,
            (Some(b'I'), false, None) => Item::Hour12,
            (Some(b'p'), false, None) => Item::AmPm,
            (Some(b'z'), false, None) => Item::Zone,
            (Some(b'%'), false, None) => Item::Literal(b'%'),
            (Some(b'T'), false, None) => {
                items.extend([Item::Hour, Item::Literal(b':'), Item::Minute { padded: true }, Item::Literal(b':')]);
                Item::Second { padded: true }
            }
            (Some(other), _, None) => return Err(bad(format!("unknown item %{}", other as char))),
            (None, _, _) => return Err(bad("ends with a lone %".into())),
        };
        items.push(item);
    }
    let has = |f: fn(&Item) -> bool| items.iter().any(f);
    if has(|i| matches!(i, Item::Hour12)) != has(|i| matches!(i, Item::AmPm)) {
        return Err(bad("%I (hour 1–12) and %p (AM/PM) go together".into()));
    }
    if has(|i| matches!(i, Item::Hour12)) && has(|i| matches!(i, Item::Hour)) {
        return Err(bad("%I and %H both give the hour".into()));
    }
    if has(|i| matches!(i, Item::DayOfYear))
        && has(|i| matches!(i, Item::Month | Item::MonthName | Item::Day | Item::DaySpacePadded))
    {
        return Err(bad("%j (day of the year) and a month or day both give the date".into()));
    }
    Ok(items)
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
        let unit = match width {
            3 => "milliseconds",
            6 => "microseconds",
            _ => "nanoseconds",
        };
        let v = self.digits(width, width, &format!("{width} digits of {unit}"))?;
        if self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
            return Err(format!("expected {width} digits of {unit} at byte {start}, found more"));
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

fn parse_pattern(items: &[Item], s: &[u8], has_year: bool, year: Option<i64>, now: i64) -> Result<i64, String> {
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
            Item::Month => p.month = c.digits(1, 2, "a month")?,
            Item::MonthName => {
                let at = c.i;
                let w = c.word();
                p.month = month_from_name(w).ok_or_else(|| format!("expected a month name at byte {at}"))?;
            }
            Item::Day => p.day = c.digits(1, 2, "a day")?,
            Item::DaySpacePadded => {
                c.spaces(0)?;
                p.day = c.digits(1, 2, "a day")?;
            }
            Item::DayName => {
                let at = c.i;
                if c.word().len() < 3 {
                    return Err(format!("expected a day name at byte {at}"));
                }
            }
            Item::Hour => p.hour = c.digits(1, 2, "an hour")?,
            Item::Hour12 => {
                let at = c.i;
                p.hour = c.digits(1, 2, "an hour (1–12)")?;
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
            Item::Minute { padded } => p.minute = c.digits(if padded { 2 } else { 1 }, 2, "minutes")?,
            Item::Second { padded } => p.second = c.digits(if padded { 2 } else { 1 }, 2, "seconds")?,
            Item::Fraction => p.nanos = c.fraction()?,
            Item::FixedFraction(width) => p.nanos = c.fixed_fraction(width)?,
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
        assemble(&p)
    } else if let Some(year) = year {
        assemble(&Parts { year: Some(year), ..p })
    } else {
        // No year in the input: take now's, and last year's when that puts
        // the time more than a day ahead of now.
        let year_now = civil_from_days(now.div_euclid(NANOS_PER_SEC * 86_400)).0;
        let this_year = assemble(&Parts { year: Some(year_now), ..p })?;
        if this_year > now.saturating_add(86_400 * NANOS_PER_SEC) {
            assemble(&Parts { year: Some(year_now - 1), ..p })
        } else {
            Ok(this_year)
        }
    }
}

fn month_from_name(w: &[u8]) -> Option<i64> {
    if w.len() < 3 {
        return None;
    }
    let lower = [w[0].to_ascii_lowercase(), w[1].to_ascii_lowercase(), w[2].to_ascii_lowercase()];
    MONTHS.iter().position(|m| m.as_bytes() == lower).map(|i| i as i64 + 1)
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
    assemble(&p)
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
    i64::try_from(nanos).map_err(|_| "out of range".to_string())
}

fn assemble(p: &Parts) -> Result<i64, String> {
    let year = p.year.unwrap_or(1970);
    if let Some(yday) = p.yday {
        let days = if is_leap(year) { 366 } else { 365 };
        if !(1..=days).contains(&yday) {
            return Err(format!("day of the year {yday} out of range for {year}"));
        }
        let (_, month, day) = civil_from_days(days_from_civil(year, 1, 1) + yday - 1);
        return assemble(&Parts { yday: None, month, day, ..*p });
    }
    if !(1..=12).contains(&p.month) {
        return Err(format!("month {} out of range", p.month));
    }
    if p.day < 1 || p.day > days_in_month(year, p.month) {
        return Err(format!("day {} out of range for {year}-{:02}", p.day, p.month));
    }
    if p.hour > 23 || p.minute > 59 || p.second > 60 {
        return Err(format!("time {:02}:{:02}:{:02} out of range", p.hour, p.minute, p.second));
    }
    let days = days_from_civil(year, p.month, p.day);
    let secs = days * 86_400 + p.hour * 3600 + p.minute * 60 + p.second.min(59) - p.offset;
    secs.checked_mul(NANOS_PER_SEC)
        .and_then(|n| n.checked_add(p.nanos))
        .ok_or_else(|| format!("year {year} out of range"))
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
        assert!(Format::new("%3d").err().unwrap_or_default().contains("a width is allowed only before f"));
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
        let err = serde_json::from_str::<Format>(r#"{"format":"syslog","yeer":2016}"#).err().map(|e| e.to_string());
        assert!(err.unwrap_or_default().contains("{ format ="), "a misspelt key is refused");
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
