//! The grok-style shortcuts of pattern plugins: named regex pieces for the
//! fields logs share (numbers, hosts, times), so that a pattern reads
//! `%{IPORHOST:client} %{INT:bytes:int}` instead of the regex itself.

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
