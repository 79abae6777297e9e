//! Shared pieces of the benchmarks: generated input with known properties.

/// `n` JSON lines of about 300 bytes, each with a unique `event_id` and a
/// `ts` within the last hour before `now_secs` (so a 1 h window keeps all).
pub fn json_lines(n: usize, now_secs: i64) -> Vec<String> {
    let pad = "x".repeat(189);
    (0..n)
        .map(|i| {
            let ts = sluice_guest::time::format_rfc3339((now_secs - (i as i64 % 3000)) * 1_000_000_000);
            let line = format!(
                r#"{{"event_id":"ev-{i:010}","ts":"{ts}","service":"checkout","level":"info","user":{},"msg":"{pad}"}}"#,
                i % 9973
            );
            line
        })
        .collect()
}

/// Seconds since the Unix epoch, now.
pub fn now_secs() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn lines_are_about_300_bytes_and_ids_unique() {
        let lines = super::json_lines(1000, 1_700_000_000);
        let avg = lines.iter().map(String::len).sum::<usize>() / lines.len();
        assert!((280..=320).contains(&avg), "average {avg} bytes");
        let ids: std::collections::HashSet<&str> = lines.iter().map(|l| &l[13..27]).collect();
        assert_eq!(ids.len(), 1000);
    }
}
