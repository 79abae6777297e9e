//! Durations and sizes as a config writes them (`30s`, `7d`, `64MiB`), and
//! paths made plain: the units every component's config shares, so no
//! component reaches into the config assembler for them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// A duration: `500ms`, `30s`, `5m`, `2h`, `7d`, `1w`.
pub(crate) fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    sluice_guest::duration::deserialize(d)
}

/// Sizes: `1048576`, `64KiB`, `1MiB`, `2GiB`, `10MB`.
pub(crate) fn bytes<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        N(u64),
        S(String),
    }
    match Raw::deserialize(d)? {
        Raw::N(n) => Ok(n),
        Raw::S(s) => parse_size(&s).map_err(serde::de::Error::custom),
    }
}

/// Remove `.` and `..` without touching the file system (the path may not
/// exist yet, and symlinks are the operator's to choose).
pub fn normalize(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("invalid size {s:?} (examples: 65536, 64KiB, 256MiB)"))?;
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => return Err(format!("invalid size {s:?}: unknown unit (use B, KiB, MiB, GiB, KB, MB, GB)")),
    };
    n.checked_mul(mult).ok_or_else(|| format!("invalid size {s:?}: too large"))
}

/// An optional duration: `None` when the key is absent.
pub(crate) fn optional_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    sluice_guest::duration::deserialize(d).map(Some)
}

/// A duration as an operator writes it in a config, in the largest unit
/// that holds it whole, days at most: `7d` is said back as `7d`, not the
/// `1w` the guest SDK's reasons use.
pub(crate) fn display(d: Duration) -> String {
    let nanos = d.as_nanos();
    for (unit, per) in [
        ("d", 86_400_000_000_000u128),
        ("h", 3_600_000_000_000),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
    ] {
        if nanos >= per && nanos.is_multiple_of(per) {
            return format!("{}{unit}", nanos / per);
        }
    }
    format!("{nanos}ns")
}

/// How a duration is written, for the config's JSON Schema (the field
/// itself is a `Duration`, read by [`duration`]).
pub(crate) struct DurationText;

impl schemars::JsonSchema for DurationText {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^([0-9]+(ns|us|ms|s|m|h|d|w))+$",
            "description": "A duration: a number and a unit (ns, us, ms, s, m, h, d, w), e.g. `500ms`, `30s`, `7d`, `1h30m`."
        })
    }
}

/// How a size is written, for the config's JSON Schema (the field itself
/// is a byte count, read by [`bytes`]).
pub(crate) struct SizeText;

impl schemars::JsonSchema for SizeText {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Size".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A size in bytes: a number, or a number and a unit (B, KiB, MiB, GiB, KB, MB, GB), e.g. `65536`, `64KiB`, `1MiB`.",
            "anyOf": [
                { "type": "integer", "minimum": 0 },
                { "type": "string", "pattern": "^\\s*[0-9]+\\s*(B|KiB|MiB|GiB|KB|MB|GB)?\\s*$" }
            ]
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::display;

    #[test]
    fn a_duration_is_said_back_as_a_config_writes_it() {
        assert_eq!(display(Duration::from_secs(7 * 86_400)), "7d");
        assert_eq!(display(Duration::from_secs(300)), "5m");
        assert_eq!(display(Duration::from_millis(1500)), "1500ms");
        assert_eq!(display(Duration::ZERO), "0ns");
    }
}
