//! `[[routes]]`: which sinks an event goes to, checked where it is defined.

use serde::Deserialize;

use crate::problem::Problems;

use super::error::RuleProblem;
use super::test::Test;

/// Sinks as bits of a mask, by their index in the pipeline's list: at most
/// [`MAX_SINKS`].
pub(crate) type SinkMask = u64;
pub(crate) const MAX_SINKS: usize = 64;

/// The name a single `[sink]` has: its ids are keyed as they always were.
pub(crate) const DEFAULT_SINK: &str = "default";

/// One rule: a condition on a field of the event's body, and the sinks an
/// event that meets it goes to. Rules are read in order; the first that
/// matches decides. An event no rule matches goes to every sink.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// The field the rule reads, as a JSON pointer (`/level`,
    /// `/http/status`). Without it (and without a condition) the rule
    /// matches every event: a split's last rule.
    #[serde(default)]
    pub field: Option<String>,
    /// The field's value is this string (a number or boolean compares by
    /// its JSON text: `equals = "503"`).
    #[serde(default)]
    pub equals: Option<String>,
    /// The field's value matches this regular expression.
    #[serde(default)]
    pub matches: Option<String>,
    /// The field is there (`true`) or absent (`false`).
    #[serde(default)]
    pub exists: Option<bool>,
    /// The sinks' names (`[[sinks]]`'s `name`); several is a fan-out.
    pub sinks: Vec<String>,
}

impl RouteConfig {
    /// The rule's test; the error names the key at fault.
    pub(super) fn test(&self) -> Result<Test, RuleProblem> {
        let problem = |key, why: String| Err(RuleProblem { key, why });
        let conditions = [self.equals.is_some(), self.matches.is_some(), self.exists.is_some()];
        match (self.field.as_deref(), conditions.iter().filter(|c| **c).count()) {
            (None, 0) => Ok(Test::Always),
            (None, _) => problem("field", "a condition needs the field it reads".into()),
            (Some(_), 0) => problem("field", "needs one of equals, matches or exists".into()),
            (Some(_), 2..) => problem("equals, matches, exists", "one condition per rule".into()),
            (Some(f), _) if !f.starts_with('/') => {
                problem("field", format!("{f:?} is not a JSON pointer (write \"/{f}\")"))
            }
            (Some(_), _) => {
                if let Some(e) = &self.equals {
                    Ok(Test::Equals(e.clone()))
                } else if let Some(m) = &self.matches {
                    regex::Regex::new(m)
                        .map(Test::Matches)
                        .map_err(|e| RuleProblem { key: "matches", why: e.to_string() })
                } else {
                    Ok(Test::Exists(self.exists.unwrap_or(true)))
                }
            }
        }
    }

    /// Every problem of this rule against the sinks `names`, as `(key
    /// under routes[i], message)`.
    /// Every problem, keyed under the rule (`routes[i]`); `names`: the
    /// config's sinks.
    pub(crate) fn validate(&self, names: &[String], p: &mut Problems) {
        if let Err(RuleProblem { key, why }) = self.test() {
            p.add(key, why);
        }
        if self.sinks.is_empty() {
            p.add("sinks", "names no sink".into());
        }
        for s in &self.sinks {
            if !names.contains(s) {
                p.add("sinks", format!("no sink is named {s:?}; the sinks are {}", names.join(", ")));
            }
        }
    }
}
