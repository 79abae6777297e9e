//! The `sluice:plugin/helpers` interface: work a log parser repeats per
//! record, run natively in the host for plugins that would otherwise
//! interpret it (Python, JavaScript) or carry it themselves (C). Pure
//! functions over sluice's own code (the guest SDK's timestamp formats,
//! logfmt splitter and pattern shortcuts, the output check): a format, a
//! zone or a pattern means the same in every language.
//!
//! Each is linear in its input, and the plugin's memory limit bounds the
//! input; what could make the host hold memory or work without bound (how
//! many compiled resources, how many patterns, how long a path) is capped
//! here, with an error naming the cap. The limits are documented in
//! `wit/plugin.wit`.

use regex::Regex;
use sluice_guest::time::Format;

/// Live `time-format`s per instance.
pub(crate) const MAX_TIME_FORMATS: usize = 64;
/// Live `patterns` sets per instance.
pub(crate) const MAX_PATTERN_SETS: usize = 16;
/// Patterns in one set.
pub(crate) const MAX_PATTERNS: usize = 256;
/// The compiled size of one pattern (the regex crate's own limit).
pub(crate) const MAX_PATTERN_BYTES: usize = 1 << 20;

/// What an instance holds of the helpers, counted against the caps.
#[derive(Default)]
pub(crate) struct HelperState {
    pub time_formats: usize,
    pub pattern_sets: usize,
    /// The batch a call of `process` is handling, lent for that call only:
    /// what the per-batch helpers (`logfmt-batch`) read, so that an
    /// interpreted plugin crosses the boundary once per batch, not once
    /// per record with a payload the guest already holds.
    pub batch: Option<std::sync::Arc<dyn BatchPayloads>>,
    /// The instance asked for payloads on demand (`payloads-on-demand`,
    /// in `init`): its batches are packed without them.
    pub on_demand: bool,
    /// `init` is running: the only time `payloads-on-demand` is heard.
    pub initializing: bool,
    /// Per record of the batch being handled: `json-get-batch` found its
    /// payload to be one JSON object, so the output contract need not
    /// parse it again when an event keeps it. Cleared per call.
    pub objects: Vec<bool>,
    /// What the `schema` helper answers from (`[schema_registry]`).
    pub schemas: Option<std::sync::Arc<crate::schema_registry::cache::Schemas>>,
}

/// The payloads of a batch as the host holds them, for a plugin that has
/// them on demand: handles to the records' own bytes (a reference count
/// each, no copy).
pub(crate) struct HeldPayloads(pub Vec<bytes::Bytes>);

impl BatchPayloads for HeldPayloads {
    fn count(&self) -> usize {
        self.0.len()
    }

    fn payload(&self, i: usize) -> &[u8] {
        self.0.get(i).map_or(&[], |b| &b[..])
    }
}

/// The payloads of a batch as the host lent them to the guest: the same
/// bytes the guest reads as `record.payload`, so a per-batch helper's
/// answer for record `i` is the per-record helper's answer for its payload.
pub(crate) trait BatchPayloads: Send + Sync {
    fn count(&self) -> usize;
    fn payload(&self, i: usize) -> &[u8];
}

/// A compiled `time-format`.
pub struct TimeFormat(pub Format);

/// A format's name or pattern, or its JSON table (`{"format": …, "zone":
/// …}`): the same forms a plugin config takes.
pub(crate) fn compile_time_format(spec: &str) -> Result<TimeFormat, String> {
    let format = if spec.trim_start().starts_with('{') {
        serde_json::from_str::<Format>(spec).map_err(|e| e.to_string())?
    } else {
        Format::new(spec)?
    };
    Ok(TimeFormat(format))
}

impl TimeFormat {
    pub(crate) fn parse(&self, text: &str, now: i64) -> Result<i64, String> {
        self.0.parse(text, now).map_err(|e| e.to_string())
    }
}

/// A compiled `patterns` set: each pattern's regex, tried in order, and
/// its capture names.
pub struct Patterns(Vec<Regex>);

pub(crate) fn compile_patterns(patterns: &[String]) -> Result<Patterns, String> {
    if patterns.is_empty() {
        return Err("give at least one pattern".into());
    }
    if patterns.len() > MAX_PATTERNS {
        return Err(format!("{} patterns, over the limit of {MAX_PATTERNS} per set", patterns.len()));
    }
    let compiled = patterns
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let (expanded, _typed) = sluice_guest::shortcuts::expand(p).map_err(|e| format!("patterns[{i}]: {e}"))?;
            regex::RegexBuilder::new(&expanded)
                .size_limit(MAX_PATTERN_BYTES)
                .dfa_size_limit(MAX_PATTERN_BYTES)
                .build()
                .map_err(|e| format!("patterns[{i}]: {e}"))
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Patterns(compiled))
}

impl Patterns {
    /// The first pattern that matches, with its named captures that took
    /// part, in the pattern's order.
    pub(crate) fn first_match(&self, line: &str) -> Option<(u32, Vec<(String, String)>)> {
        self.0.iter().enumerate().find_map(|(i, re)| {
            let caps = re.captures(line)?;
            let named = re
                .capture_names()
                .enumerate()
                .filter_map(|(idx, name)| Some((name?.to_string(), caps.get(idx)?.as_str().to_string())))
                .collect();
            Some((i as u32, named))
        })
    }
}

/// The JSON text at each dotted path of the object `payload`, none where
/// it holds nothing.
pub(crate) fn json_get(payload: &[u8], paths: &[String]) -> Result<Vec<Option<String>>, String> {
    sluice_guest::batch_fields::check_paths(paths)?;
    // One parse; the output check words what is wrong only when it is.
    let value = match serde_json::from_slice::<serde_json::Value>(payload) {
        Ok(object @ serde_json::Value::Object(_)) => object,
        _ => return Err(json_object_check(payload).unwrap_or_else(|| "the payload is not one JSON object".into())),
    };
    Ok(paths
        .iter()
        .map(|path| {
            let mut at = &value;
            for segment in path.split('.') {
                at = match at {
                    serde_json::Value::Object(map) => map.get(segment)?,
                    serde_json::Value::Array(items) => items.get(segment.parse::<usize>().ok()?)?,
                    _ => return None,
                };
            }
            Some(at.to_string())
        })
        .collect())
}

/// None when `payload` is one JSON object in UTF-8: the host's output
/// check, the very rule every event body meets.
pub(crate) fn json_object_check(payload: &[u8]) -> Option<String> {
    sluice_guest::output_rules::body_breach(payload)
}

/// The pairs of a logfmt line (`sluice_guest::logfmt`), owned for the
/// boundary.
pub(crate) fn logfmt(line: &[u8]) -> Vec<(String, Option<String>)> {
    let text = String::from_utf8_lossy(line);
    sluice_guest::logfmt::pairs(&text).into_iter().map(|(k, v)| (k.to_string(), v.map(|v| v.into_owned()))).collect()
}

/// The pairs of a logfmt line as one JSON object's text: values strings,
/// a bare key `true`, the last of a repeated key kept (in the place of
/// its first).
pub(crate) fn logfmt_object(line: &[u8]) -> String {
    let mut out = Vec::with_capacity(line.len() + 16);
    write_logfmt_object(line, &mut out);
    // Valid UTF-8: JSON text written from `str`s.
    String::from_utf8(out).unwrap_or_default()
}

/// `logfmt_object` of every payload of `batch`, in order, one per line
/// (JSON Lines: JSON text never holds a raw newline), written into one
/// buffer; "" when no batch is being processed. The text can be about six
/// times the payloads' bytes (a control byte is written `\u0001`), and the
/// host builds it before the guest takes it in: past `limit` bytes (the
/// instance's memory limit, which the guest could not hold anyway) it
/// stops, with an error naming the limit, and the SDK asks record by
/// record instead.
pub(crate) fn logfmt_batch(batch: Option<&dyn BatchPayloads>, limit: usize) -> Result<String, String> {
    let Some(batch) = batch else { return Ok(String::new()) };
    let n = batch.count();
    let bytes: usize = (0..n).map(|i| batch.payload(i).len() + 16).sum();
    let mut out = Vec::with_capacity(bytes.min(limit));
    for i in 0..n {
        if i > 0 {
            out.push(b'\n');
        }
        write_logfmt_object(batch.payload(i), &mut out);
        if out.len() > limit {
            return Err(format!(
                "the logfmt texts of this batch's {n} records pass {limit} bytes, the plugin's memory limit, \
                 at record {i}: ask record by record (logfmt-object)"
            ));
        }
    }
    Ok(String::from_utf8(out).unwrap_or_default())
}

/// `json-get-batch` over the batch being handled: the packed answer, and
/// per record whether its payload is one JSON object. The SDK's
/// `pack_json_fields` is the one implementation, here as in a plugin's
/// native tests.
pub(crate) fn json_get_batch(
    batch: Option<&dyn BatchPayloads>,
    paths: &[String],
    limit: usize,
) -> Result<(sluice_guest::JsonFields, Vec<bool>), String> {
    let Some(batch) = batch else {
        sluice_guest::batch_fields::check_paths(paths)?;
        return Ok(Default::default());
    };
    sluice_guest::pack_json_fields((0..batch.count()).map(|i| batch.payload(i)), paths, limit)
}

fn write_logfmt_object(line: &[u8], out: &mut Vec<u8>) {
    let text = String::from_utf8_lossy(line);
    let pairs = sluice_guest::logfmt::pairs(&text);
    // In the line's order: a repeated key (rare) keeps its first place.
    let mut kept: Vec<(&str, Option<&str>)> = Vec::with_capacity(pairs.len());
    for (key, value) in &pairs {
        match kept.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value.as_deref(),
            None => kept.push((key, value.as_deref())),
        }
    }
    out.push(b'{');
    for (i, (key, value)) in kept.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_json_string(out, key);
        out.push(b':');
        match value {
            Some(v) => push_json_string(out, v),
            None => out.extend_from_slice(b"true"),
        }
    }
    out.push(b'}');
}

/// serde_json's escaping, written into the one buffer (no string per value).
fn push_json_string(out: &mut Vec<u8>, s: &str) {
    let _ = serde_json::to_writer(&mut *out, s);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_format_compiles_from_a_name_a_pattern_or_a_table() {
        let at = |spec: &str, text: &str| compile_time_format(spec).and_then(|f| f.parse(text, 0));
        assert_eq!(at("rfc3339", "2024-05-01T12:00:00Z"), Ok(1_714_564_800_000_000_000));
        assert_eq!(at("%Y-%m-%d %H:%M:%S", "2024-05-01 12:00:00"), Ok(1_714_564_800_000_000_000));
        let la = r#"{"format": "%Y-%m-%d %H:%M:%S", "zone": "America/Los_Angeles"}"#;
        assert_eq!(at(la, "2024-05-01 05:00:00"), Ok(1_714_564_800_000_000_000));
        let e = at(la, "2024-03-10 02:30:00").unwrap_err();
        assert!(e.contains("does not exist in America/Los_Angeles"), "{e}");
        assert!(compile_time_format("%Q").is_err_and(|e| e.contains("%Q")));
        assert!(compile_time_format(r#"{"format":"syslog","zon":"UTC"}"#).is_err_and(|e| e.starts_with("zon:")));
    }

    #[test]
    fn patterns_expand_shortcuts_and_answer_the_first_match() {
        let p = compile_patterns(&["^%{INT:pid} %{LOGLEVEL:level}$".into(), "^(?P<any>.*)$".into()]).unwrap();
        assert_eq!(p.first_match("42 W"), Some((0, vec![("pid".into(), "42".into()), ("level".into(), "W".into())])));
        assert_eq!(p.first_match("free text"), Some((1, vec![("any".into(), "free text".into())])));
        let e = compile_patterns(&["ok".into(), "%{NOPE:x}".into()]).err().unwrap_or_default();
        assert!(e.starts_with("patterns[1]: unknown shortcut"), "{e}");
        assert!(compile_patterns(&[]).is_err());
        let many: Vec<String> = (0..=MAX_PATTERNS).map(|i| format!("^{i}$")).collect();
        assert!(compile_patterns(&many).is_err_and(|e| e.contains("over the limit of 256")));
    }

    /// A pattern that sends a backtracking engine exponential is linear
    /// here; one whose compiled form is huge is refused at compile.
    #[test]
    fn hostile_patterns_are_linear_or_refused() {
        let p = compile_patterns(&["^(a+)+$".into()]).unwrap();
        let line = format!("{}!", "a".repeat(100_000));
        let started = std::time::Instant::now();
        assert_eq!(p.first_match(&line), None);
        // Linear: some milliseconds; backtracking would take longer than
        // the universe has.
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        let huge = compile_patterns(&["(?:a{1000}){1000}".into()]).err().unwrap_or_default();
        assert!(huge.contains("size limit"), "{huge}");
    }

    #[test]
    fn json_get_answers_each_path_and_refuses_what_is_not_an_object() {
        let body = br#"{"user":{"id":"u1","n":7},"tags":["a","b"],"ok":true}"#;
        let paths: Vec<String> =
            ["user.id", "user.n", "tags.1", "ok", "nope", "user.id.x", "user"].map(String::from).to_vec();
        assert_eq!(
            json_get(body, &paths).unwrap(),
            vec![
                Some("\"u1\"".into()),
                Some("7".into()),
                Some("\"b\"".into()),
                Some("true".into()),
                None,
                None,
                Some(r#"{"id":"u1","n":7}"#.into())
            ]
        );
        assert!(json_get(b"[1]", &paths).is_err_and(|e| e.contains("array")));
        let long = vec!["a.".repeat(10_000)];
        assert!(json_get(body, &long).is_err_and(|e| e.contains("over the limit of 32")));
        let wide: Vec<String> = (0..65).map(|i| format!("k{i}")).collect();
        assert!(json_get(body, &wide).is_err_and(|e| e.contains("over the limit of 64")));
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(200), "]".repeat(200));
        assert!(json_get(deep.as_bytes(), &["a".into()]).is_err());
    }

    struct Payloads(Vec<&'static [u8]>);

    impl BatchPayloads for Payloads {
        fn count(&self) -> usize {
            self.0.len()
        }
        fn payload(&self, i: usize) -> &[u8] {
            self.0[i]
        }
    }

    /// The per-batch answer is the per-record one, line by line: a newline
    /// or a control byte in a value is escaped, so it cannot split a line.
    #[test]
    fn logfmt_of_a_batch_is_each_payloads_object_on_its_own_line() {
        let payloads: Vec<&'static [u8]> =
            vec![b"a=1 b=\"x\ny\"", b"", b"c=\x01 flag\r\n", b"\xff=2", b"d=\"unterminated"];
        let text = logfmt_batch(Some(&Payloads(payloads.clone())), 1 << 20).unwrap();
        let lines: Vec<&str> = text.split('\n').collect();
        assert_eq!(lines.len(), payloads.len(), "{text}");
        for (line, payload) in lines.iter().zip(&payloads) {
            assert_eq!(*line, logfmt_object(payload));
        }
        assert_eq!(lines[0], r#"{"a":"1","b":"x\ny"}"#);
        assert_eq!(lines[1], "{}");
        assert_eq!(lines[2], r#"{"c":"\u0001","flag":true}"#);
        assert_eq!(logfmt_batch(Some(&Payloads(vec![b"x=1"])), 64).unwrap(), r#"{"x":"1"}"#);
        assert_eq!(logfmt_batch(None, 64).unwrap(), "", "no batch outside a call of process");
    }

    /// Control bytes grow six times as JSON; the host stops building the
    /// text at the instance's memory limit instead of holding it all.
    #[test]
    fn logfmt_of_a_batch_stops_at_the_memory_limit() {
        static BIG: [u8; 4096] = [1; 4096];
        let mut line = b"k=".to_vec();
        line.extend_from_slice(&BIG);
        let line: &'static [u8] = line.leak();
        let batch = Payloads(vec![b"a=1", line, b"b=2"]);
        let e = logfmt_batch(Some(&batch), 4 * 4096).unwrap_err();
        assert!(e.contains("at record 1") && e.contains("16384 bytes"), "{e}");
        let whole = logfmt_batch(Some(&batch), 7 * 4096 + 64).unwrap();
        assert_eq!(whole.split('\n').nth(1).map(str::len), Some(6 * 4096 + 8), "each control byte as \\u0001");
    }

    #[test]
    fn logfmt_as_one_object_keeps_the_last_of_a_key() {
        assert_eq!(logfmt_object(b"b=1 a=\"x \\\"y\\\"\" flag b=2"), r#"{"b":"2","a":"x \"y\"","flag":true}"#);
        assert_eq!(logfmt_object(b""), "{}");
    }

    #[test]
    fn logfmt_pairs_cross_owned_and_bad_bytes_are_replaced() {
        assert_eq!(
            logfmt(b"a=1 b=\"x \\\"y\\\"\" c=\xff flag\n"),
            vec![
                ("a".into(), Some("1".into())),
                ("b".into(), Some("x \"y\"".into())),
                ("c".into(), Some("\u{fffd}".into())),
                ("flag".into(), None)
            ]
        );
    }

    struct Owned(Vec<Vec<u8>>);

    impl BatchPayloads for Owned {
        fn count(&self) -> usize {
            self.0.len()
        }
        fn payload(&self, i: usize) -> &[u8] {
            &self.0[i]
        }
    }

    /// What `json-get-batch` calls an object, the output contract would
    /// accept as a kept body: the host skips that check on its word.
    fn agrees(payloads: Vec<Vec<u8>>) -> Result<(), String> {
        let batch = Owned(payloads);
        let (_, objects) = json_get_batch(Some(&batch), &["id".to_string()], usize::MAX)?;
        for (p, object) in batch.0.iter().zip(objects) {
            let breach = sluice_guest::output_rules::body_breach(p);
            if object && breach.is_some() {
                return Err(format!("{:?}: an object to json-get-batch, but {breach:?}", String::from_utf8_lossy(p)));
            }
        }
        Ok(())
    }

    #[test]
    fn what_json_get_batch_calls_an_object_the_output_contract_accepts() {
        let cases: Vec<&[u8]> = vec![
            br#"{"id":"a"}"#,
            b"{\"id\":\"a\"}\r\n",
            b"  {\"a\":1}  ",
            br#"{"a":"\ud800"}"#,
            br#"{"\ud800":1}"#,
            br#"{"a":1,"a":2}"#,
            br#"{"a":1}x"#,
            b"\xef\xbb\xbf{}",
            b"{\"a\":\"\xff\"}",
            b"{\"a\":\"\x01\"}",
            br#"{"a":NaN}"#,
            br#"{"a":1e999}"#,
            br#"{"a":[1,2,{"b":[]}]}"#,
            b"{}\n{}",
            b"{\"a\":\"\n\"}",
            br#"[{"a":1}]"#,
            b"",
        ];
        let mut deep = Vec::new();
        deep.extend_from_slice(b"{\"a\":");
        deep.extend(std::iter::repeat_n(b'[', 200));
        deep.extend(std::iter::repeat_n(b']', 200));
        deep.push(b'}');
        let mut payloads: Vec<Vec<u8>> = cases.into_iter().map(<[u8]>::to_vec).collect();
        payloads.push(deep);
        agrees(payloads).unwrap_or_else(|e| panic!("{e}"));
    }

    proptest::proptest! {
        #[test]
        fn json_get_batch_never_passes_what_the_output_contract_refuses(
            texts in proptest::collection::vec("[{}\\[\\]\":,a-c0-9 \\\\\\u{0}-\\u{7f}\\u{e9}]{0,24}", 1..24),
            bytes in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..16), 0..4),
        ) {
            let mut payloads: Vec<Vec<u8>> = texts.into_iter().map(|t| format!("{{\"id\":{t}}}").into_bytes()).collect();
            payloads.extend(bytes.into_iter().map(|b| [b"{\"a\":\"".as_slice(), &b, b"\"}"].concat()));
            proptest::prop_assert!(agrees(payloads).is_ok());
        }
    }
}
