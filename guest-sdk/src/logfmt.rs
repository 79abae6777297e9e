//! `key=value` (logfmt) lines split into their pairs: the one splitter
//! behind the `helpers` interface's `logfmt`, which Python, JavaScript and
//! C plugins call natively, so that a pair means the same in each.
//!
//! A pair is `key=value` or `key="quoted value"` (spaces inside; `\"` and
//! `\\` escape a quote and a backslash); a key alone (`debug`) has no
//! value. Pairs are separated by spaces; an empty key (`=x`) is skipped.

/// The pairs of `line`, in order, borrowing from it where no escape was
/// undone. A line end (`\r\n`, `\n`) is not part of the last value.
pub fn pairs(line: &str) -> Vec<(&str, Option<std::borrow::Cow<'_, str>>)> {
    use std::borrow::Cow;
    let line = line.trim_end_matches(['\r', '\n']);
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && b[i] == b' ' {
            i += 1;
        }
        let start = i;
        while i < b.len() && b[i] != b'=' && b[i] != b' ' {
            i += 1;
        }
        let key = &line[start..i];
        if i < b.len() && b[i] == b'=' {
            i += 1;
            let value = if i < b.len() && b[i] == b'"' {
                i += 1;
                let from = i;
                let mut unescaped: Option<String> = None;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' && i + 1 < b.len() && matches!(b[i + 1], b'"' | b'\\') {
                        let s = unescaped.get_or_insert_with(|| line[from..i].to_string());
                        s.push(b[i + 1] as char);
                        i += 2;
                        continue;
                    }
                    // Whole characters: a multi-byte one is copied as it is.
                    let len = utf8_len(b[i]);
                    if let Some(s) = unescaped.as_mut() {
                        s.push_str(&line[i..(i + len).min(b.len())]);
                    }
                    i += len;
                }
                let i_end = i.min(b.len());
                i += 1;
                match unescaped {
                    Some(s) => Cow::Owned(s),
                    None => Cow::Borrowed(&line[from..i_end]),
                }
            } else {
                let from = i;
                while i < b.len() && b[i] != b' ' {
                    i += 1;
                }
                Cow::Borrowed(&line[from..i])
            };
            if !key.is_empty() {
                out.push((key, Some(value)));
            }
        } else if !key.is_empty() {
            out.push((key, None));
        }
    }
    out
}

fn utf8_len(first: u8) -> usize {
    match first {
        0xF0.. => 4,
        0xE0.. => 3,
        0xC0.. => 2,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(line: &str) -> Vec<(String, Option<String>)> {
        pairs(line).into_iter().map(|(k, v)| (k.to_string(), v.map(|v| v.into_owned()))).collect()
    }

    #[test]
    fn pairs_quotes_escapes_and_bare_keys() {
        let s = |k: &str, v: &str| (k.to_string(), Some(v.to_string()));
        assert_eq!(
            owned("level=info msg=\"user logged in\" user=42 debug\r\n"),
            vec![s("level", "info"), s("msg", "user logged in"), s("user", "42"), ("debug".into(), None)]
        );
        assert_eq!(owned(r#"a="say \"hi\" \\ ok" b=é"#), vec![s("a", r#"say "hi" \ ok"#), s("b", "é")]);
        assert_eq!(owned(r#"q="ü \"x\"""#), vec![s("q", "ü \"x\"")]);
        assert_eq!(owned("=x  y= z"), vec![s("y", ""), ("z".into(), None)]);
        assert_eq!(owned(r#"open="never closed"#), vec![s("open", "never closed")]);
        assert!(owned("   \n").is_empty());
    }
}
