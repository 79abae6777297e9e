//! Durations as operators write them in config: `90s`, `15m`, `24h`, `7d`,
//! `500ms`, or combined, `1h30m`. Units: ns, us, ms, s, m, h, d, w.

use std::time::Duration;

/// Parse a duration; the error quotes the input and says what is allowed.
pub fn parse(input: &str) -> Result<Duration, String> {
    let s = input.trim();
    let bad = |why: &str| format!("invalid duration {input:?}: {why} (examples: 500ms, 90s, 15m, 24h, 7d, 1h30m)");
    if s.is_empty() {
        return Err(bad("empty"));
    }
    let mut total: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad("expected a number"));
        }
        let n: u128 = rest[..digits].parse().map_err(|_| bad("number too large"))?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let nanos_per: u128 = match &rest[..unit_len] {
            "ns" => 1,
            "us" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "d" => 86_400_000_000_000,
            "w" => 604_800_000_000_000,
            "" => return Err(bad("missing unit")),
            _ => return Err(bad("unknown unit")),
        };
        rest = &rest[unit_len..];
        total = n.checked_mul(nanos_per).and_then(|v| total.checked_add(v)).ok_or_else(|| bad("too large"))?;
    }
    let secs = u64::try_from(total / 1_000_000_000).map_err(|_| bad("too large"))?;
    Ok(Duration::new(secs, (total % 1_000_000_000) as u32))
}

/// serde adapter: `#[serde(with = "sluice_guest::duration")]`.
pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = <String as serde::Deserialize>::deserialize(d)?;
    parse(&s).map_err(serde::de::Error::custom)
}

/// Render a duration the way [`parse`] reads it, for messages.
pub fn display(d: Duration) -> String {
    let nanos = d.as_nanos();
    for (unit, per) in [
        ("w", 604_800_000_000_000u128),
        ("d", 86_400_000_000_000),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_units_and_combinations() {
        assert_eq!(parse("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("7d"), Ok(Duration::from_secs(604_800)));
        assert_eq!(display(Duration::from_secs(86_400)), "1d");
        assert_eq!(display(Duration::from_secs(5_400)), "90m");
    }

    #[test]
    fn errors_quote_the_input() {
        for bad in ["", "10", "h", "10 parsecs", "5x", "99999999999999999999999w"] {
            let e = parse(bad).err().unwrap_or_default();
            assert!(e.contains(&format!("{bad:?}")), "{bad}: {e}");
        }
    }
}
