//! Classifier plugins (`wit/classifier.wit`): a backend's answer read by a
//! plugin rather than a built-in profile, for a backend no profile covers.
//!
//! The HTTP sink asks once per response. A plugin's fault (a trap, a
//! timeout, memory) is never a record's: the caller turns it into a
//! systemic answer, so the records wait and the instance is rebuilt for the
//! next response. Instances are pooled, since responses to one sink arrive
//! on several request tasks at once; each is used by one call at a time.

use std::sync::{Arc, Mutex};

use super::classified::{Answered, Asked, Reply};
use super::contract::Contract;
use super::engine::LoadedPlugin;
use super::error::{Fault, PluginError};
use super::instance::Instance;
use crate::verdict::PluginId;

/// A loaded classifier and its idle instances.
pub(crate) struct Classifier {
    plugin: Arc<LoadedPlugin>,
    idle: Mutex<Vec<Instance>>,
}

impl Classifier {
    /// Instantiate once and call `init`, so a refused config or a faulty
    /// plugin stops the start rather than the first response.
    pub(crate) fn new(plugin: Arc<LoadedPlugin>) -> Result<Classifier, PluginError> {
        if plugin.contract() != Contract::Classifier {
            return Err(PluginError::Link {
                plugin: plugin.id.to_string(),
                message: format!(
                    "it is a parse plugin ({}), not a classifier: name it under [[plugins]], not [sink.classifier]",
                    plugin.contract()
                ),
            });
        }
        let first = Instance::new(plugin.clone())?;
        Ok(Classifier { plugin, idle: Mutex::new(vec![first]) })
    }

    pub(crate) fn id(&self) -> &PluginId {
        &self.plugin.id
    }

    /// What the plugin makes of one response. A faulted instance is
    /// dropped; the next call builds another.
    pub(crate) fn classify(&self, asked: &Asked<'_>, answered: &Answered<'_>) -> Result<Reply, Fault> {
        let taken = self.idle.lock().ok().and_then(|mut idle| idle.pop());
        let mut instance = match taken {
            Some(i) => i,
            None => Instance::new(self.plugin.clone()).map_err(|e| Fault::Trap {
                trap: format!("cannot rebuild the instance: {e}"),
                stderr: String::new(),
            })?,
        };
        let said = instance.classify(asked, answered)?;
        if let Ok(mut idle) = self.idle.lock() {
            idle.push(instance);
        }
        Ok(said)
    }
}
