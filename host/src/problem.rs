//! What is wrong with a config, key by key: the type every component's
//! `validate` adds to and the config assembler reports, a leaf so that
//! components depend on it and not on the assembler.

use std::path::{Path, PathBuf};

/// Why a config stops the start; every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read, or is not TOML.
    #[error("cannot read config {}: {message}", path.display())]
    Load {
        /// The config file.
        path: PathBuf,
        /// Why, with the line when TOML says it.
        message: String,
    },
    /// One key is wrong.
    #[error("config {}: {key}: {message}", path.display())]
    Invalid {
        /// The config file.
        path: PathBuf,
        /// The key at fault, dotted (`sinks[1].url`).
        key: String,
        /// What is wrong and what would be right.
        message: String,
    },
    /// More than one thing is wrong: each on its own line, key first.
    #[error("config {} has {} problems:{}", path.display(), problems.len(), problems.iter().map(|p| format!("\n  {}: {}", p.key, p.message)).collect::<String>())]
    Many {
        /// The config file.
        path: PathBuf,
        /// Each key at fault, in the order found.
        problems: Vec<Problem>,
    },
}

/// One thing wrong with a config: the key at fault and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The key at fault, dotted (`sinks[1].url`).
    pub key: String,
    /// What is wrong and what would be right.
    pub message: String,
}

/// Everything wrong with one config file, gathered before anything
/// refuses it: an operator fixes a config in one round trip, not one per
/// mistake.
pub(crate) struct Problems {
    path: PathBuf,
    list: Vec<Problem>,
}

impl Problems {
    pub(crate) fn new(path: &Path) -> Problems {
        Problems { path: path.to_path_buf(), list: Vec::new() }
    }

    pub(crate) fn add(&mut self, key: &str, message: String) {
        self.list.push(Problem { key: key.to_string(), message });
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// What `check` adds, its keys under `prefix` (`sink`, `sinks[2]`,
    /// `routes[0]`): a component names its own keys, not where the file
    /// put it. A problem of the whole part (key `""`) is keyed `prefix`.
    pub(crate) fn under(&mut self, prefix: &str, check: impl FnOnce(&mut Problems)) {
        let start = self.list.len();
        check(self);
        for p in &mut self.list[start..] {
            p.key = if p.key.is_empty() { prefix.to_string() } else { format!("{prefix}.{}", p.key) };
        }
    }

    /// The problem of a check that stops at its first (later checks need
    /// what it found good: a URL parsed, a profile known), if any.
    pub(crate) fn add_first(&mut self, first: Result<(), (String, String)>) {
        if let Err((key, message)) = first {
            self.add(&key, message);
        }
    }

    /// Every problem `check` finds, outside a config file: what a unit
    /// test of one part reads.
    #[cfg(test)]
    pub(crate) fn of(check: impl FnOnce(&mut Problems)) -> Vec<Problem> {
        let mut p = Problems::new(Path::new(""));
        check(&mut p);
        p.list
    }

    /// Nothing wrong, one thing (its key in the message, as ever), or a list.
    pub(crate) fn into_result(mut self) -> Result<(), ConfigError> {
        match self.list.len() {
            0 => Ok(()),
            1 => {
                let Problem { key, message } = self.list.remove(0);
                Err(ConfigError::Invalid { path: self.path, key, message })
            }
            _ => Err(ConfigError::Many { path: self.path, problems: self.list }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_names_its_own_keys_and_the_caller_says_where_it_sits() {
        let found = Problems::of(|p| {
            p.add("api.enabled", "top".into());
            p.under("sinks[1]", |p| {
                p.add("breaker.failures", "must be at least 1".into());
                p.under("classifier", |p| p.add("path", "missing".into()));
                p.add("", "the whole sink".into());
            });
        });
        let keys: Vec<&str> = found.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["api.enabled", "sinks[1].breaker.failures", "sinks[1].classifier.path", "sinks[1]"]);
    }
}
