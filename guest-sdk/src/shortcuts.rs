//! The grok-style shortcuts of pattern plugins: named regex pieces for the
//! fields logs share (numbers, hosts, times), so that a pattern reads
//! `%{IPORHOST:client} %{INT:bytes:int}` instead of the regex itself. The
//! pattern plugin and the host's `patterns` helper both expand them here, so
//! a pattern means the same in every language.

/// `%{NAME}` → regex, as the pattern plugin expands them (its README lists
/// them; `sluice plugin inspect --formats` prints them). Kept to pieces that
/// are unambiguous in logs.
pub const SHORTCUTS: &[(&str, &str)] = &[
    ("INT", r"[+-]?\d+"),
    ("NUMBER", r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"),
    ("WORD", r"\w+"),
    ("NOTSPACE", r"\S+"),
    ("SPACE", r"\s*"),
    ("DATA", r".*?"),
    ("GREEDYDATA", r".*"),
    ("LEVEL", r"(?i:trace|debug|info|notice|warn|warning|error|err|crit|critical|alert|emerg|fatal|severe)"),
    // LEVEL's words, `verbose`, and the single capital letters of Android's
    // logcat (V, D, I, W, E, F, A), under grok's name.
    (
        "LOGLEVEL",
        r"(?:(?i:trace|debug|verbose|info|notice|warn|warning|error|err|crit|critical|alert|emerg|fatal|severe)|[VDIWEFA])",
    ),
    ("IPV4", r"(?:\d{1,3}\.){3}\d{1,3}"),
    ("IPV6", r"[0-9A-Fa-f:]*:[0-9A-Fa-f:.]+"),
    ("IP", r"(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f:]*:[0-9A-Fa-f:.]+)"),
    ("HOSTNAME", r"[A-Za-z0-9](?:[A-Za-z0-9_-]{0,62})(?:\.[A-Za-z0-9_-]{1,63})*\.?"),
    ("HOST", r"[A-Za-z0-9](?:[A-Za-z0-9_-]{0,62})(?:\.[A-Za-z0-9_-]{1,63})*\.?"),
    ("MONTH", r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*"),
    ("DAY", r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*"),
    ("MONTHDAY", r"(?:0?[1-9]|[12]\d|3[01])"),
    ("YEAR", r"\d{4}"),
    ("TIME", r"\d{2}:\d{2}:\d{2}(?:[.,]\d+)?"),
    ("SYSLOGTIMESTAMP", r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +\d{1,2} \d{2}:\d{2}:\d{2}"),
    ("TIMESTAMP_ISO8601", r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"),
    ("DATE_ISO", r"\d{4}-\d{2}-\d{2}"),
    ("HDFSDATE", r"\d{6}"),
    ("HDFSTIME", r"\d{6}"),
    (
        "APACHETIME",
        r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{2} \d{2}:\d{2}:\d{2} \d{4}",
    ),
    ("LOG4JTIME", r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}"),
    ("POSINT", r"\b[1-9]\d*\b"),
    ("UUID", r"[0-9A-Fa-f]{8}-(?:[0-9A-Fa-f]{4}-){3}[0-9A-Fa-f]{12}"),
    ("QUOTEDSTRING", r#""(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'"#),
    ("PATH", r"(?:/[^/\s]*)+|[A-Za-z]:(?:\\[^\\\s]*)+"),
    ("DATE", r"\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}|\d{4}-\d{2}-\d{2}"),
    (
        "IPORHOST",
        r"(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f:]*:[0-9A-Fa-f:.]+|[A-Za-z0-9](?:[A-Za-z0-9_-]{0,62})(?:\.[A-Za-z0-9_-]{1,63})*\.?)",
    ),
];

/// What a typed capture becomes in the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    Text,
    Int,
    Float,
}

/// Expand `%{SHORTCUT:name}`, `%{SHORTCUT:name:type}` and `%{SHORTCUT}`
/// into regex syntax; returns the regex and the typed fields.
pub fn expand(pattern: &str) -> Result<(String, Vec<(String, FieldType)>), String> {
    let mut out = String::with_capacity(pattern.len() * 2);
    let mut typed = Vec::new();
    let mut rest = pattern;
    while let Some(start) = rest.find("%{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or_else(|| format!("unclosed %{{ in pattern {pattern:?}"))?;
        let spec = &after[..end];
        let mut parts = spec.splitn(3, ':');
        let name = parts.next().unwrap_or_default();
        let field = parts.next();
        let ty = match parts.next() {
            None => FieldType::Text,
            Some("int") => FieldType::Int,
            Some("float") => FieldType::Float,
            Some(other) => {
                return Err(format!("%{{{spec}}} in pattern {pattern:?}: unknown type {other:?} (int or float)"));
            }
        };
        let body = SHORTCUTS.iter().find(|(n, _)| *n == name).map(|(_, re)| *re).ok_or_else(|| {
            let known: Vec<&str> = SHORTCUTS.iter().map(|(n, _)| *n).collect();
            format!("unknown shortcut %{{{name}}} in pattern {pattern:?}; known: {}", known.join(", "))
        })?;
        match field {
            Some(f) if !f.is_empty() && f.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => {
                out.push_str(&format!("(?P<{f}>{body})"));
                if ty != FieldType::Text {
                    typed.push((f.to_string(), ty));
                }
            }
            Some(f) => return Err(format!("field name {f:?} in pattern {pattern:?}: use letters, digits and _")),
            None => out.push_str(&format!("(?:{body})")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok((out, typed))
}
