//! What is replaced by `***` before record content leaves the process: in
//! quarantine entries (payload, key, headers, reason), in log lines, and in
//! error messages. One config for all of them, `quarantine.mask_fields`
//! and `quarantine.mask_patterns`: a secret masked in the store but printed
//! in a WARN line would be shipped to the log system in the clear.
//!
//! Three ways a secret is found, from the most to the least exact:
//!
//! - in a record (`apply`, `secrets`): the values of the masked JSON
//!   fields (a name at any depth, or a dotted path), and what the patterns
//!   and the masked names (`password=x`) match in text that is not JSON
//!   and in every JSON string;
//! - in text about a record (a reason, a sink's answer): the values found
//!   in that record, wherever they appear, then the patterns;
//! - in text with no record at hand (any log line, an error): the patterns,
//!   and each masked field name written as JSON (`"password": "x"`, also
//!   escaped inside a quoted string) or as `name=value`.
//!
//! A leaf module: it knows nothing of the store or the logs that use it.

use std::borrow::Cow;

use regex::bytes::Regex;

/// What a masked value is replaced with.
pub(crate) const MASK: &str = "***";

/// Values shorter than this are not searched for in free text: masking
/// every `1` or `ok` of a message would garble it and hide nothing a secret
/// is made of.
const MIN_SECRET: usize = 3;

#[derive(Debug, Clone, Default)]
pub(crate) struct Masking {
    /// A name (`password`) at any depth, or a dotted path from the root
    /// (`auth.key`).
    fields: Vec<String>,
    /// Over a payload that is not JSON, and over every JSON string: the
    /// first capture group, or the whole match when there is none.
    patterns: Vec<(String, Regex)>,
    /// Per masked field name, its value where text writes it as JSON or
    /// as `name=value` (a string field holding `… password=x`, a line
    /// that is not JSON, a reason).
    in_text: Vec<(String, Regex)>,
}

/// A masking rule that does not compile, by its key and value.
#[derive(Debug, thiserror::Error)]
pub enum MaskingError {
    /// One of `quarantine.mask_patterns`.
    #[error("quarantine.mask_patterns: {pattern:?}: {source}")]
    Pattern {
        /// The regex as configured.
        pattern: String,
        /// Why it does not compile.
        source: regex::Error,
    },
    /// One of `quarantine.mask_fields`.
    #[error("quarantine.mask_fields: {field:?}: {source}")]
    Field {
        /// The field name as configured.
        field: String,
        /// Why the regex made of it does not compile.
        source: regex::Error,
    },
}

impl Masking {
    /// `Err` names the pattern that does not compile (config validation
    /// reports it first, with its key).
    pub(crate) fn new(fields: &[String], patterns: &[String]) -> Result<Masking, MaskingError> {
        let patterns = patterns
            .iter()
            .map(|p| {
                Regex::new(p)
                    .map(|r| (p.clone(), r))
                    .map_err(|source| MaskingError::Pattern { pattern: p.clone(), source })
            })
            .collect::<Result<_, _>>()?;
        let in_text = fields
            .iter()
            .filter_map(|f| f.rsplit('.').next().filter(|n| !n.is_empty()))
            .map(|name| {
                let n = regex::escape(name);
                // `"n": "v"`, `\"n\": \"v\"` (inside a quoted string), `"n": 12`,
                // and `n=v` (logfmt, query strings).
                Regex::new(&format!(
                    r#"(?i)\\?"{n}\\?"\s*:\s*(\\?"(?:[^"\\]|\\[^"])*\\?"|[^\s,}}\]]+)|(?:^|[^A-Za-z0-9_]){n}=("[^"]*"|[^\s,&]+)"#
                ))
                .map(|re| (name.to_string(), re))
                .map_err(|source| MaskingError::Field { field: name.to_string(), source })
            })
            .collect::<Result<_, _>>()?;
        Ok(Masking { fields: fields.to_vec(), patterns, in_text })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.fields.is_empty() && self.patterns.is_empty()
    }

    /// Whether `name` (a header's) is one of the masked names, in any
    /// case: header names are compared that way by most of their readers.
    pub(crate) fn names(&self, name: &str) -> bool {
        self.fields.iter().any(|f| f.eq_ignore_ascii_case(name))
    }

    /// The bytes to keep, and what was masked: JSON paths as found
    /// (`user.password`), `pattern <p>` for a pattern that matched, and
    /// `<name> in text` for a masked name's value in text (`password=x`).
    pub(crate) fn apply(&self, payload: &[u8]) -> (Vec<u8>, Vec<String>) {
        if self.is_empty() {
            return (payload.to_vec(), Vec::new());
        }
        let mut masked = Vec::new();
        let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(payload) else {
            let kept = self.mask_text(payload, &mut masked);
            return (kept, masked);
        };
        for field in &self.fields {
            for (path, v) in fields_named(&mut value, field) {
                *v = serde_json::Value::String(MASK.into());
                masked.push(path);
            }
        }
        self.mask_strings(&mut value, &mut masked);
        if masked.is_empty() {
            return (payload.to_vec(), masked);
        }
        masked.sort();
        masked.dedup();
        (serde_json::to_vec(&value).unwrap_or_else(|_| payload.to_vec()), masked)
    }

    /// The values `apply` would mask in `payload`, as they may appear in
    /// text about it: a string field's text (and its JSON-escaped form),
    /// any other value's JSON and its strings, what a pattern matched.
    /// For [`Masking::text`], over a reason or an answer about this record.
    pub(crate) fn secrets(&self, payload: &[u8]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        if self.is_empty() {
            return out;
        }
        match serde_json::from_slice::<serde_json::Value>(payload) {
            Ok(mut value) => {
                for field in &self.fields {
                    for (_, v) in fields_named(&mut value, field) {
                        if !v.is_string() {
                            out.push(serde_json::to_vec(v).unwrap_or_default());
                        }
                        strings(v, &mut |s| {
                            out.push(s.as_bytes().to_vec());
                            // As a JSON text quotes it: `a\"b` for `a"b`.
                            let quoted = serde_json::to_string(s).unwrap_or_default();
                            if let Some(inner) = quoted.get(1..quoted.len().saturating_sub(1)) {
                                out.push(inner.as_bytes().to_vec());
                            }
                        });
                    }
                }
                let rules = self.text_rules();
                strings(&value, &mut |s| self.matches(s.as_bytes(), &rules, &mut out));
            }
            Err(_) => self.matches(payload, &self.text_rules(), &mut out),
        }
        out.retain(|s| s.len() >= MIN_SECRET);
        // The longest first: a secret that contains another is replaced whole.
        out.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        out.dedup();
        out
    }

    /// `text` with every one of `secrets` (from [`Masking::secrets`] of the
    /// record it speaks of) masked, then what the patterns and the masked
    /// field names find in it. Borrowed, not copied, when nothing is found.
    pub(crate) fn text<'t>(&self, text: &'t str, secrets: &[Vec<u8>]) -> Cow<'t, str> {
        if self.is_empty() {
            return Cow::Borrowed(text);
        }
        let mut out: Cow<'_, [u8]> = Cow::Borrowed(text.as_bytes());
        for secret in secrets.iter().filter(|s| !s.is_empty()) {
            if memchr::memmem::find(&out, secret).is_some() {
                out = Cow::Owned(replace_all(&out, secret));
            }
        }
        for re in self.text_rules() {
            if let Some(masked) = replace_groups(&out, re) {
                out = Cow::Owned(masked);
            }
        }
        match out {
            Cow::Borrowed(_) => Cow::Borrowed(text),
            Cow::Owned(b) => Cow::Owned(String::from_utf8_lossy(&b).into_owned()),
        }
    }

    /// [`Masking::text`] with no record at hand, owned.
    #[cfg(test)]
    fn mask_reason(&self, reason: String) -> String {
        match self.text(&reason, &[]) {
            Cow::Borrowed(_) => reason,
            Cow::Owned(masked) => masked,
        }
    }

    /// What finds a secret in text: the patterns, then the masked field
    /// names.
    fn text_rules(&self) -> Vec<&Regex> {
        self.patterns.iter().chain(&self.in_text).map(|(_, re)| re).collect()
    }

    /// What each of `res` masks in `text`, pushed to `out`.
    fn matches(&self, text: &[u8], res: &[&Regex], out: &mut Vec<Vec<u8>>) {
        for re in res {
            for caps in re.captures_iter(text) {
                if let Some(m) = masked_part(&caps) {
                    out.push(m.as_bytes().to_vec());
                }
            }
        }
    }

    fn mask_text(&self, text: &[u8], masked: &mut Vec<String>) -> Vec<u8> {
        let mut out = text.to_vec();
        for (source, re) in &self.patterns {
            if let Some(next) = replace_groups(&out, re) {
                out = next;
                masked.push(format!("pattern {source}"));
            }
        }
        for (name, re) in &self.in_text {
            if let Some(next) = replace_groups(&out, re) {
                out = next;
                masked.push(format!("{name} in text"));
            }
        }
        out
    }

    fn mask_strings(&self, v: &mut serde_json::Value, masked: &mut Vec<String>) {
        match v {
            serde_json::Value::String(s) => {
                let kept = self.mask_text(s.as_bytes(), masked);
                if kept != s.as_bytes() {
                    *s = String::from_utf8_lossy(&kept).into_owned();
                }
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(|x| self.mask_strings(x, masked)),
            serde_json::Value::Object(o) => o.values_mut().for_each(|x| self.mask_strings(x, masked)),
            _ => {}
        }
    }
}

/// The part of a match that is masked: the first group that took part, or
/// the whole match when the pattern has none; never an empty one (`x*`
/// masks nothing).
fn masked_part<'h>(caps: &regex::bytes::Captures<'h>) -> Option<regex::bytes::Match<'h>> {
    let group = caps.iter().skip(1).flatten().next();
    let whole = if caps.len() == 1 { caps.get(0) } else { None };
    group.or(whole).filter(|m| !m.is_empty())
}

/// `text` with what `re` masks replaced, or none when it masks nothing.
fn replace_groups(text: &[u8], re: &Regex) -> Option<Vec<u8>> {
    let mut next = Vec::with_capacity(text.len());
    let (mut last, mut hit) = (0, false);
    for caps in re.captures_iter(text) {
        let Some(m) = masked_part(&caps) else { continue };
        next.extend_from_slice(&text[last..m.start()]);
        next.extend_from_slice(MASK.as_bytes());
        last = m.end();
        hit = true;
    }
    hit.then(|| {
        next.extend_from_slice(&text[last..]);
        next
    })
}

fn replace_all(text: &[u8], secret: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut last = 0;
    for at in memchr::memmem::find_iter(text, secret) {
        if at < last {
            continue;
        }
        out.extend_from_slice(&text[last..at]);
        out.extend_from_slice(MASK.as_bytes());
        last = at + secret.len();
    }
    out.extend_from_slice(&text[last..]);
    out
}

/// Every value `field` names under `v`, with its path: a dotted path from
/// the root, or a name at any depth (arrays included).
fn fields_named<'v>(v: &'v mut serde_json::Value, field: &str) -> Vec<(String, &'v mut serde_json::Value)> {
    let mut found = Vec::new();
    if field.contains('.') {
        let mut cur = Some(v);
        for key in field.split('.') {
            cur = cur.and_then(|v| v.get_mut(key));
        }
        if let Some(v) = cur {
            found.push((field.to_string(), v));
        }
    } else {
        named(v, field, "", &mut found);
    }
    found
}

fn named<'v>(v: &'v mut serde_json::Value, name: &str, at: &str, found: &mut Vec<(String, &'v mut serde_json::Value)>) {
    match v {
        serde_json::Value::Object(o) => {
            for (k, x) in o.iter_mut() {
                let path = if at.is_empty() { k.clone() } else { format!("{at}.{k}") };
                if k == name {
                    found.push((path, x));
                } else {
                    named(x, name, &path, found);
                }
            }
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter_mut().enumerate() {
                named(x, name, &format!("{at}[{i}]"), found);
            }
        }
        _ => {}
    }
}

/// Each string under `v`, at any depth.
fn strings(v: &serde_json::Value, f: &mut dyn FnMut(&str)) {
    match v {
        serde_json::Value::String(s) => f(s),
        serde_json::Value::Array(a) => a.iter().for_each(|x| strings(x, f)),
        serde_json::Value::Object(o) => o.values().for_each(|x| strings(x, f)),
        _ => {}
    }
}

/// A masking from literals, for tests here and in the store's.
#[cfg(test)]
pub(crate) fn masking(fields: &[&str], patterns: &[&str]) -> Masking {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    Masking::new(&s(fields), &s(patterns)).unwrap_or_else(|e| panic!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_json_fields_and_says_so() {
        let m = masking(&["token", "auth.key", "absent"], &[]);
        let (kept, masked) = m.apply(br#"{"token":"s3cret","auth":{"key":"k","user":"u"},"n":1}"#);
        let text = String::from_utf8_lossy(&kept);
        assert!(!text.contains("s3cret") && !text.contains("\"k\""), "{text}");
        assert!(text.contains("\"user\":\"u\""));
        assert_eq!(masked, vec!["auth.key".to_string(), "token".to_string()]);
        // A masked name in text that is not JSON, or in a JSON string.
        let (kept, masked) = m.apply(b"not json token=1 tokens=2");
        assert_eq!(String::from_utf8_lossy(&kept), "not json token=*** tokens=2");
        assert_eq!(masked, ["token in text"]);
        let (kept, masked) = m.apply(br#"{"ts":"yesterday token=abc","n":1}"#);
        assert_eq!(String::from_utf8_lossy(&kept), r#"{"n":1,"ts":"yesterday token=***"}"#);
        assert_eq!(masked, ["token in text"]);
    }

    #[test]
    fn a_name_is_masked_at_any_depth_and_patterns_reach_text_and_strings() {
        let m = masking(&["password"], &[r"token=(\S+)", r"Bearer [A-Za-z0-9.]+"]);
        let (kept, masked) = m
            .apply(br#"{"user":{"password":"hunter2","name":"ann"},"list":[{"password":"p2"}],"msg":"token=abc1 ok"}"#);
        let text = String::from_utf8_lossy(&kept);
        for secret in ["hunter2", "p2", "abc1"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert!(text.contains("\"name\":\"ann\"") && text.contains("token=*** ok"), "{text}");
        assert_eq!(masked, ["list[0].password", "pattern token=(\\S+)", "user.password"]);
        let (kept, masked) = m.apply(b"GET /x token=s3cr3t&y=1 Authorization: Bearer eyJ.abc");
        assert_eq!(String::from_utf8_lossy(&kept), "GET /x token=*** Authorization: ***");
        assert_eq!(masked.len(), 2);
        assert_eq!(m.mask_reason("rejected token=abc1 here".into()), "rejected token=*** here");
        assert_eq!(m.mask_reason("nothing to hide".into()), "nothing to hide");
        assert!(Masking::new(&[], &["(unclosed".into()]).is_err());
        let (kept, masked) = masking(&[], &["x*"]).apply(b"abc");
        assert_eq!((kept.as_slice(), masked.len()), (&b"abc"[..], 0), "an empty match masks nothing");
    }

    #[test]
    fn a_records_secrets_are_masked_wherever_text_about_it_quotes_them() {
        let m = masking(&["password", "auth.key"], &[r"token=(\S+)"]);
        let record = br#"{"user":"ann","password":"Hunter 2","auth":{"key":{"id":"K3Y-1","n":12345}},"msg":"token=T0K ok","pin":"12"}"#;
        let secrets = m.secrets(record);
        for s in ["Hunter 2", "K3Y-1", "T0K", r#"{"id":"K3Y-1","n":12345}"#] {
            assert!(secrets.iter().any(|x| x == s.as_bytes()), "{s} not among {secrets:?}");
        }
        // A value the record holds, quoted by a plugin's reason or a
        // backend's answer in any form: masked, the rest kept.
        let reason = "cannot parse 'Hunter 2' for ann (key K3Y-1, token=T0K)";
        // (The pattern's `\S+` takes the closing parenthesis too.)
        assert_eq!(m.text(reason, &secrets), "cannot parse '***' for ann (key ***, token=***");
        assert!(matches!(m.text("nothing here", &secrets), Cow::Borrowed(_)), "not copied when nothing is found");
        // With no record at hand: the field names, as JSON and as name=value.
        for (text, kept) in [
            (r#"bad row {"password": "pw one", "user": "u"}"#, r#"bad row {"password": ***, "user": "u"}"#),
            (r#"reason="body {\"password\":\"pw two\",\"x\":1}""#, r#"reason="body {\"password\":***,\"x\":1}""#),
            ("login user=u password=pw3 ok", "login user=u password=*** ok"),
            (r#"{"PASSWORD":12345}"#, r#"{"PASSWORD":***}"#),
        ] {
            assert_eq!(m.text(text, &[]), kept);
        }
        assert_eq!(m.text("mypassword=x is not the field", &[]), "mypassword=x is not the field");
        assert!(Masking::default().text("password=x", &[]) == "password=x", "nothing configured: nothing masked");
    }
}
