//! What is wrong with a config, key by key: the type every component's
//! `validate` adds to and the config assembler reports, a leaf so that
//! components depend on it and not on the assembler.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {}: {message}", path.display())]
    Load { path: PathBuf, message: String },
    #[error("config {}: {key}: {message}", path.display())]
    Invalid { path: PathBuf, key: String, message: String },
    /// More than one thing is wrong: each on its own line, key first.
    #[error("config {} has {} problems:{}", path.display(), problems.len(), problems.iter().map(|p| format!("\n  {}: {}", p.key, p.message)).collect::<String>())]
    Many { path: PathBuf, problems: Vec<Problem> },
}

/// One thing wrong with a config: the key at fault and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub key: String,
    pub message: String,
}

/// Everything wrong with one config file, gathered before anything
/// refuses it: an operator fixes a config in one round trip, not one per
/// mistake.
pub struct Problems {
    path: PathBuf,
    list: Vec<Problem>,
}

impl Problems {
    pub fn new(path: &Path) -> Problems {
        Problems { path: path.to_path_buf(), list: Vec::new() }
    }

    pub fn add(&mut self, key: &str, message: String) {
        self.list.push(Problem { key: key.to_string(), message });
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Nothing wrong, one thing (its key in the message, as ever), or a list.
    pub fn into_result(mut self) -> Result<(), ConfigError> {
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
