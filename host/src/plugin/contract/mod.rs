//! The two versions of the plugin contract the host speaks, told apart at
//! load by type-checking the component's exports:
//!
//! - `v01`: `sluice:plugin@0.1.0` (`wit/v0.1/plugin.wit`), a batch as
//!   `list<record>`;
//! - `v02`: `sluice:plugin@0.2.0` (`wit/plugin.wit`), a batch as a few
//!   buffers (`sluice-abi`).
//!
//! - `classifier`: the second world of 0.2 (`wit/classifier.wit`), a
//!   plugin that reads an HTTP sink's responses instead of records;
//! - `shared`: what every version has alike on the host's side (the log
//!   and clock imports, a call's raw result).
//!
//! Both parse versions lift into the host's own `Outcome`s; the output contract that
//! applies to both is `output_rules`. The generated bindings stay private:
//! the rest of the host speaks `record.rs`.

use std::fmt;

use wasmtime::Store;
use wasmtime::component::{InstancePre, Linker};

use super::sandbox::StoreState;
use crate::plugin::inputs::Inputs;

/// A contract version, as `sluice plugin inspect` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contract {
    V01,
    V02,
    /// `world classifier` of 0.2: reads a sink's answers, never records.
    Classifier,
}

impl Contract {
    /// The package version alone: `0.2.0`.
    pub(crate) fn version(&self) -> &'static str {
        match self {
            Contract::V01 => "0.1.0",
            Contract::V02 | Contract::Classifier => "0.2.0",
        }
    }

    /// The world within the package: `plugin` or `classifier`.
    pub(crate) fn world(&self) -> &'static str {
        match self {
            Contract::V01 | Contract::V02 => "plugin",
            Contract::Classifier => "classifier",
        }
    }
}

impl fmt::Display for Contract {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Contract::Classifier => write!(f, "sluice:plugin@{} (classifier)", self.version()),
            _ => write!(f, "sluice:plugin@{}", self.version()),
        }
    }
}

/// Link the imports of both versions (log, clock) into `linker`.
pub(super) fn add_to_linker(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    v01::add_to_linker(linker)?;
    v02::add_to_linker(linker)
}

/// A component linked and type-checked against one version.
#[derive(Clone)]
pub(super) enum Pre {
    V01(v01::BindingsPre<StoreState>),
    V02(v02::BindingsPre<StoreState>),
    Classifier(classifier::BindingsPre<StoreState>),
}

impl Pre {
    /// Which contract the component's exports match: 0.2 first, then 0.1,
    /// then the classifier world; none is an error naming what each check
    /// said.
    pub(super) fn detect(instance_pre: InstancePre<StoreState>) -> Result<Pre, String> {
        let e02 = match v02::BindingsPre::new(instance_pre.clone()) {
            Ok(pre) => return Ok(Pre::V02(pre)),
            Err(e) => e,
        };
        let e01 = match v01::BindingsPre::new(instance_pre.clone()) {
            Ok(pre) => return Ok(Pre::V01(pre)),
            Err(e) => e,
        };
        match classifier::BindingsPre::new(instance_pre) {
            Ok(pre) => Ok(Pre::Classifier(pre)),
            Err(ec) => Err(format!(
                "not a sluice plugin: its exports match neither sluice:plugin@0.2.0 ({e02:#}) nor sluice:plugin@0.1.0 ({e01:#}) nor a classifier ({ec:#})"
            )),
        }
    }

    pub(super) fn contract(&self) -> Contract {
        match self {
            Pre::V01(_) => Contract::V01,
            Pre::V02(_) => Contract::V02,
            Pre::Classifier(_) => Contract::Classifier,
        }
    }

    pub(super) fn instantiate(&self, store: &mut Store<StoreState>) -> wasmtime::Result<Bound> {
        Ok(match self {
            Pre::V01(pre) => Bound::V01(pre.instantiate(store)?),
            Pre::V02(pre) => Bound::V02(pre.instantiate(store)?, v02::Packer::default()),
            Pre::Classifier(pre) => Bound::Classifier(pre.instantiate(store)?),
        })
    }
}

/// An instantiated plugin, with what its version keeps between calls.
pub(super) enum Bound {
    V01(v01::Bindings),
    V02(v02::Bindings, v02::Packer),
    Classifier(classifier::Bindings),
}

impl Bound {
    pub(super) fn call_init(
        &self,
        store: &mut Store<StoreState>,
        config: &str,
    ) -> wasmtime::Result<Result<(), String>> {
        match self {
            Bound::V01(b) => b.call_init(store, config),
            Bound::V02(b, _) => b.call_init(store, config),
            Bound::Classifier(b) => b.call_init(store, config),
        }
    }

    pub(super) fn call_process(
        &mut self,
        store: &mut Store<StoreState>,
        batch: Inputs<'_>,
    ) -> wasmtime::Result<Returned> {
        match self {
            Bound::V01(b) => v01::process(b, store, batch),
            Bound::V02(b, packer) => v02::process(b, packer, store, batch),
            // The chain refuses a classifier at load (`build_chain`); this
            // is only a guard.
            Bound::Classifier(_) => Err(wasmtime::format_err!("a classifier plugin has no process")),
        }
    }

    pub(super) fn call_classify(
        &self,
        store: &mut Store<StoreState>,
        request: &crate::plugin::classified::Asked<'_>,
        response: &crate::plugin::classified::Answered<'_>,
    ) -> wasmtime::Result<crate::plugin::classified::Reply> {
        match self {
            Bound::Classifier(b) => classifier::classify(b, store, request, response),
            Bound::V01(_) | Bound::V02(..) => Err(wasmtime::format_err!("a parse plugin has no classify")),
        }
    }
}

mod classifier;
pub(super) mod shared;
mod v01;
mod v02;

use shared::Returned;
