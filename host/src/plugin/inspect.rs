//! What a plugin file is, without running it: for `sluice plugin inspect`
//! and for checking a plugin against the contract before a pipeline starts.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::engine::Runtime;
use super::error::PluginError;

/// The WIT package every first-party SDK targets.
pub(crate) const WIT_PACKAGE: &str = "sluice:plugin";

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Inspection {
    pub path: PathBuf,
    pub name: String,
    /// blake3 of the file's bytes: the plugin's version.
    pub digest: String,
    pub size_bytes: u64,
    /// The `sluice:plugin` version (`0.2.0`) the component was built against: the
    /// one whose exports it type-checks against (the host runs 0.1 and
    /// 0.2), or, for a component that matches neither, the version in its
    /// import names, if any.
    pub wit_version: Option<String>,
    /// The world it exports: `plugin` (records into events, `[[plugins]]`)
    /// or `classifier` (a sink's answers, `[sink.classifier]`).
    pub world: Option<String>,
    /// Why this host cannot run it, when it cannot.
    pub not_runnable: Option<String>,
    pub imports: Vec<String>,
    pub exports: Vec<String>,
}

pub(crate) fn inspect(runtime: &Runtime, path: &Path, name: &str) -> Result<Inspection, PluginError> {
    let bytes = std::fs::read(path).map_err(|e| PluginError::Read { path: path.to_path_buf(), source: e })?;
    let digest = blake3::hash(&bytes);
    let component = runtime.compile(path, &bytes, digest)?;
    let ty = component.component_type();
    let engine = runtime.engine();
    let mut imports: Vec<String> = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
    let mut exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
    imports.sort();
    exports.sort();
    let (wit_version, world, not_runnable) = match runtime.contract_of(&component) {
        Ok(contract) => (Some(contract.version().to_string()), Some(contract.world().to_string()), None),
        Err(why) => (
            imports
                .iter()
                .filter_map(|i| {
                    i.strip_prefix(WIT_PACKAGE).and_then(|rest| rest.split_once('@')).map(|(_, v)| v.to_string())
                })
                .next(),
            None,
            Some(why),
        ),
    };
    Ok(Inspection {
        path: path.to_path_buf(),
        name: name.to_string(),
        digest: digest.to_hex().to_string(),
        size_bytes: bytes.len() as u64,
        wit_version,
        world,
        not_runnable,
        imports,
        exports,
    })
}
