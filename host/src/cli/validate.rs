//! What `check`, `run` and a reload all ask first: is this config, with
//! its plugins, sources, sink and store, one that can start? Every problem
//! in one pass, as bad input (exit 2).

use anyhow::Result;

use super::args::ConfigArgs;
use crate::config::Config;
use crate::pipeline;
use crate::plugin::engine::Runtime;
use crate::source::config::SourceConfig;
use crate::store::Store;

/// Bad input (config, plugins, paths): exit 2 before anything is read.
pub(crate) struct BadInput(pub anyhow::Error);

pub(super) fn load(args: &ConfigArgs) -> Result<(Config, Runtime, crate::plugin::chain::Chain), BadInput> {
    let runtime = Runtime::new(Runtime::default_cache_dir()).map_err(|e| BadInput(e.into()))?;
    let (cfg, chain) = validate(args, &runtime, true)?;
    super::mask::mask_output_as(&cfg);
    Ok((cfg, runtime, chain))
}

/// Everything `check` checks, every problem of it in one pass (the config
/// file's own first, then each plugin, source file, the sink and the
/// store); the state store too when `open_store` (a reload does not: the
/// running pipeline holds it, and its folder cannot change live).
pub(super) fn validate(
    args: &ConfigArgs,
    runtime: &Runtime,
    open_store: bool,
) -> Result<(Config, crate::plugin::chain::Chain), BadInput> {
    let cfg = Config::load(&args.config).map_err(|e| BadInput(e.into()))?;
    let mut problems: Vec<String> = Vec::new();
    let mut say = |e: &dyn std::fmt::Display| problems.push(e.to_string());
    // Every plugin loads and accepts its config, or nothing starts.
    let mut stages = Vec::with_capacity(cfg.plugins.len());
    for i in 0..cfg.plugins.len() {
        match pipeline::setup::build_stage(runtime, &cfg, i, None) {
            Ok(stage) => stages.push(stage),
            Err(e) => {
                let place = refusal_place(&args.config, i, &e);
                say(&format_args!("{:#}{place}", anyhow::Error::new(e)))
            }
        }
    }
    // Sources that can be read and a sink that can be written, or nothing starts.
    match &cfg.source {
        SourceConfig::File(f) => match crate::source::file::discover(&f.paths) {
            Err(e) => say(&e),
            Ok(files) if files.is_empty() => say(&format_args!("source.paths {:?} match no file", f.paths)),
            Ok(files) => {
                for file in &files {
                    if let Err(e) = std::fs::File::open(file) {
                        say(&format_args!("source file {}: {e}", file.display()));
                    }
                }
            }
        },
        // A broker that is down is not bad input: the consumer waits for it
        // (and `sluice check` says so). A client librdkafka refuses is.
        #[cfg(not(feature = "kafka"))]
        SourceConfig::Kafka(_) => {}
        #[cfg(feature = "kafka")]
        SourceConfig::Kafka(k) => {
            if let Err(e) = crate::source::kafka::client::client_config(k).and_then(|c| {
                c.create::<rdkafka::consumer::BaseConsumer>()
                    .map_err(crate::source::kafka::KafkaSourceError::client("configure the consumer"))
            }) {
                say(&format_args!("source: {e}"));
            }
        }
    }
    if let Err(e) = pipeline::setup::open_sinks(&cfg, runtime) {
        say(&format_args!("sink: {e}"));
    }
    // The state store opens for this pipeline (not another's, not a
    // damaged one), or nothing starts. A full volume or a store another
    // process holds is not bad input but a passing condition: the run
    // itself stops on it with exit 1, which a supervisor retries.
    if open_store
        && let Err(e) = Store::open(&cfg.pipeline.state_dir, &pipeline::setup::identity(&cfg))
        && !matches!(e, crate::store::StoreError::NoSpace { .. } | crate::store::StoreError::InUse { .. })
    {
        say(&e);
    }
    let file = args.config.display();
    match problems.as_slice() {
        [] => Ok((cfg, crate::plugin::chain::Chain::new(stages))),
        [one] => Err(BadInput(anyhow::anyhow!("config {file}: {one}"))),
        many => Err(BadInput(anyhow::anyhow!(
            "config {file} has {} problems:{}",
            many.len(),
            many.iter().map(|p| format!("\n  {p}")).collect::<String>()
        ))),
    }
}

/// ` (line L, column C)` of the key a plugin's refusal of its config
/// names, in the file the operator wrote; empty for another failure, or
/// when the file does not write it (an environment override).
fn refusal_place(config: &std::path::Path, i: usize, e: &pipeline::error::PipelineError) -> String {
    let pipeline::error::PipelineError::PluginAt { error, .. } = e else { return String::new() };
    let crate::plugin::error::PluginError::Config { message, .. } = error.as_ref() else { return String::new() };
    let Ok(text) = std::fs::read_to_string(config) else { return String::new() };
    match crate::config::locate_plugin_problem(&text, i, message) {
        Some((line, column)) => format!(" (line {line}, column {column})"),
        None => String::new(),
    }
}
