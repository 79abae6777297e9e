//! Which of a pipeline's sinks an event goes to (`[[routes]]`).
//!
//! Rules are read in order and the first that matches an event names its
//! sinks (a rule may name several: a fan-out). An event no rule matches
//! goes to every sink, so a route can narrow where events go but never
//! drop one silently. A rule without a condition matches every event: the
//! last rule of a split such as "errors to one index, the rest to
//! another".
//!
//! Plain Rust over the event's body, no I/O: the batch's plan calls it
//! (`custody::plan`), and with one sink and no routes it is never called.

pub(crate) mod config;
pub(crate) mod error;
mod test;

use std::sync::Arc;

use config::{DEFAULT_SINK, MAX_SINKS, RouteConfig, SinkMask};
use error::RouteError;
use test::Test;

#[derive(Debug, Clone)]
struct Rule {
    /// A JSON pointer (`/level`, `/http/status`).
    field: String,
    test: Test,
    sinks: SinkMask,
}

/// The pipeline's sinks by name, with its compiled routes.
#[derive(Debug, Clone)]
pub(crate) struct Fanout {
    names: Vec<Arc<str>>,
    salts: Vec<[u8; 8]>,
    rules: Vec<Rule>,
    all: SinkMask,
}

/// The bytes a sink's ids are told apart by in the dedup window: none for
/// [`DEFAULT_SINK`] (a pipeline that had one `[sink]` keeps its window),
/// the name's digest for any other. XORed into the id's digest, not its
/// scope, so a partition's ids stay one key range.
pub(crate) fn salt(name: &str) -> [u8; 8] {
    if name == DEFAULT_SINK {
        return [0; 8];
    }
    let h = blake3::hash(name.as_bytes());
    let mut s = [0u8; 8];
    s.copy_from_slice(&h.as_bytes()[..8]);
    s
}

impl Fanout {
    /// The sinks named `names` (in their order) and the rules over them.
    /// Checked by `config` first; an unknown sink here is a bug, and is
    /// refused with the same words.
    pub(crate) fn new(names: &[String], routes: &[RouteConfig]) -> Result<Fanout, RouteError> {
        if names.is_empty() || names.len() > MAX_SINKS {
            return Err(RouteError::SinkCount { count: names.len(), max: MAX_SINKS });
        }
        let mut rules = Vec::with_capacity(routes.len());
        for (i, r) in routes.iter().enumerate() {
            let mut sinks: SinkMask = 0;
            for s in &r.sinks {
                let at = names
                    .iter()
                    .position(|n| n == s)
                    .ok_or_else(|| RouteError::NoSuchSink { rule: i, name: s.clone() })?;
                sinks |= 1 << at;
            }
            let test = r.test().map_err(|problem| RouteError::Rule { rule: i, problem })?;
            rules.push(Rule { field: r.field.clone().unwrap_or_default(), test, sinks });
        }
        let all = if names.len() == MAX_SINKS { SinkMask::MAX } else { (1 << names.len()) - 1 };
        Ok(Fanout {
            names: names.iter().map(|n| Arc::from(n.as_str())).collect(),
            salts: names.iter().map(|n| salt(n)).collect(),
            rules,
            all,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }

    pub(crate) fn name(&self, sink: usize) -> &str {
        self.names.get(sink).map_or("?", |n| n)
    }

    /// The name, shared (a quarantine entry keeps it).
    pub(crate) fn name_arc(&self, sink: usize) -> Arc<str> {
        self.names.get(sink).cloned().unwrap_or_else(|| Arc::from("?"))
    }

    /// The same sinks and ids, every event to `sink` alone: a replay of
    /// what that sink refused.
    pub(crate) fn only(&self, sink: usize) -> Fanout {
        Fanout { rules: Vec::new(), all: if sink < self.names.len() { 1 << sink } else { 0 }, ..self.clone() }
    }

    /// The index of the sink named `name`.
    pub(crate) fn index_of(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| &**n == name)
    }

    pub(crate) fn salt(&self, sink: usize) -> [u8; 8] {
        self.salts.get(sink).copied().unwrap_or_default()
    }

    /// Whether every event goes to the one sink: the plan then does what
    /// it did before sinks had names.
    pub(crate) fn is_single(&self) -> bool {
        self.names.len() == 1
    }

    /// The sinks a plugin named for an event (names joined by `,`, as the
    /// contract carries them), over the config's routes. A name no sink
    /// has is an error naming it and the sinks there are: the record goes
    /// to the quarantine, never to a sink it was not meant for.
    pub(crate) fn mask_of(&self, route: &[u8]) -> Result<SinkMask, RouteError> {
        let mut mask: SinkMask = 0;
        for name in route.split(|b| *b == b',') {
            match self.names.iter().position(|n| n.as_bytes() == name) {
                Some(at) => mask |= 1 << at,
                None => {
                    let names: Vec<&str> = self.names.iter().map(|n| &**n).collect();
                    return Err(RouteError::UnknownSink {
                        name: String::from_utf8_lossy(name).into_owned(),
                        sinks: names.join(", "),
                    });
                }
            }
        }
        if mask == 0 {
            return Err(RouteError::NoSink);
        }
        Ok(mask)
    }

    /// Where an event goes: the sinks its plugin named, else the routes'.
    pub(crate) fn sinks_of(&self, event: &crate::record::Event) -> Result<SinkMask, RouteError> {
        match &event.sinks {
            Some(route) => self.mask_of(route),
            None => Ok(self.sinks_for(&event.body)),
        }
    }

    /// The sinks an event with `body` (one JSON value) goes to. The body
    /// is parsed only when a rule reads a field.
    pub(crate) fn sinks_for(&self, body: &[u8]) -> SinkMask {
        if self.rules.is_empty() {
            return self.all;
        }
        let mut parsed: Option<Option<serde_json::Value>> = None;
        for rule in &self.rules {
            if matches!(rule.test, Test::Always) {
                return rule.sinks;
            }
            let value = parsed.get_or_insert_with(|| serde_json::from_slice(body).ok());
            let field = value.as_ref().and_then(|v| v.pointer(&rule.field));
            let hit = match (&rule.test, field) {
                (Test::Always, _) => true,
                (Test::Exists(want), f) => f.is_some() == *want,
                (Test::Equals(want), Some(serde_json::Value::String(s))) => s == want,
                (Test::Equals(want), Some(other)) => {
                    let text = other.to_string();
                    text == *want
                }
                (Test::Matches(re), Some(serde_json::Value::String(s))) => re.is_match(s),
                (Test::Matches(re), Some(other)) => re.is_match(&other.to_string()),
                (Test::Equals(_) | Test::Matches(_), None) => false,
            };
            if hit {
                return rule.sinks;
            }
        }
        self.all
    }

    /// The graph as `sluice check` prints it: each sink (`kinds`: how
    /// each describes itself, its name first), one line per rule, then
    /// where the rest go.
    pub(crate) fn describe(&self, kinds: &[String]) -> Vec<String> {
        let names = |mask: SinkMask| -> String {
            (0..self.names.len()).filter(|i| mask & (1 << i) != 0).map(|i| self.name(i)).collect::<Vec<_>>().join(", ")
        };
        let mut out = Vec::new();
        for (i, n) in self.names.iter().enumerate() {
            // A sink of several describes itself after its name.
            out.push(format!("sink {}", kinds.get(i).map_or(&**n, String::as_str)));
        }
        for (i, r) in self.rules.iter().enumerate() {
            let test = match &r.test {
                Test::Always => "every event".to_string(),
                Test::Exists(true) => format!("{} exists", r.field),
                Test::Exists(false) => format!("{} is absent", r.field),
                Test::Equals(v) => format!("{} = {v:?}", r.field),
                Test::Matches(re) => format!("{} ~ /{}/", r.field, re.as_str()),
            };
            out.push(format!("route {i}: {test} → {}", names(r.sinks)));
        }
        if !self.rules.iter().any(|r| matches!(r.test, Test::Always)) {
            let rest = if self.rules.is_empty() { "every event" } else { "events no route matches" };
            out.push(format!("{rest} → {}", names(self.all)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(
        field: &str,
        equals: Option<&str>,
        matches: Option<&str>,
        exists: Option<bool>,
        sinks: &[&str],
    ) -> RouteConfig {
        RouteConfig {
            field: (!field.is_empty()).then(|| field.to_string()),
            equals: equals.map(String::from),
            matches: matches.map(String::from),
            exists,
            sinks: sinks.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn names() -> Vec<String> {
        ["errors", "access", "archive"].map(String::from).to_vec()
    }

    #[test]
    fn the_first_rule_that_matches_names_the_sinks_and_the_rest_go_everywhere() {
        let f = Fanout::new(
            &names(),
            &[
                route("/level", Some("error"), None, None, &["errors", "archive"]),
                route("/http/status", None, Some("^5"), None, &["errors"]),
                route("/path", None, None, Some(true), &["access"]),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.sinks_for(br#"{"level":"error","path":"/"}"#), 0b101, "first match wins, a fan-out");
        assert_eq!(f.sinks_for(br#"{"http":{"status":503}}"#), 0b001, "a number read as its JSON text");
        assert_eq!(f.sinks_for(br#"{"path":"/x"}"#), 0b010);
        assert_eq!(f.sinks_for(br#"{"level":"info"}"#), 0b111, "no rule matched: every sink");
        assert_eq!(f.sinks_for(b"not json"), 0b111, "nothing to read: every sink, never dropped");
        // A catch-all at the end makes it a split.
        let split = Fanout::new(
            &names(),
            &[route("/level", Some("error"), None, None, &["errors"]), route("", None, None, None, &["access"])],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(split.sinks_for(br#"{"level":"error"}"#), 0b001);
        assert_eq!(split.sinks_for(br#"{"level":"info"}"#), 0b010);
        assert!(split.describe(&[]).iter().all(|l| !l.contains("no route matches")), "{:?}", split.describe(&[]));
    }

    #[test]
    fn one_default_sink_keeps_its_ids_and_named_sinks_are_apart() {
        assert_eq!(salt(DEFAULT_SINK), [0; 8]);
        assert_ne!(salt("a"), salt("b"));
        assert_ne!(salt("a"), [0; 8]);
        let f = Fanout::new(&[DEFAULT_SINK.to_string()], &[]).unwrap_or_else(|e| panic!("{e}"));
        assert!(f.is_single());
        assert_eq!(f.sinks_for(b"{}"), 1);
        assert!(
            Fanout::new(&names(), &[route("/a", Some("x"), None, None, &["nope"])])
                .is_err_and(|e| e.to_string().contains("nope"))
        );
    }
}
