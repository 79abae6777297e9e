//! The `sluice` command line. Each subcommand lives in its own file; this
//! one holds the argument grammar (clap) and the dispatch.

pub mod plugin;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "sluice", version, about = "A stream processor that never loses a record it was handed.")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Develop and examine plugins.
    #[command(subcommand)]
    Plugin(PluginCommand),
}

#[derive(Subcommand, Debug)]
pub enum PluginCommand {
    /// Run a chain of plugins over lines from a file or stdin and print one
    /// JSON outcome per input line: the plugin author's loop.
    ///
    /// Each `--config` applies to the `--plugin` before it:
    /// `--plugin pattern.wasm --config hdfs.toml --plugin ts-window.wasm --config window.toml`
    Run(RunArgs),
    /// Show a plugin's name, digest, WIT version, size and imports.
    Inspect(InspectArgs),
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// A plugin component (.wasm); repeat for a chain, in order.
    #[arg(long = "plugin", short = 'p', required = true, value_name = "PATH")]
    pub plugins: Vec<PathBuf>,
    /// A TOML file holding the config table of the `--plugin` before it.
    #[arg(long = "config", short = 'c', value_name = "FILE")]
    pub configs: Vec<PathBuf>,
    /// Read lines from this file instead of stdin.
    #[arg(long, short = 'i', value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// Records per call into the plugin.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub batch_size: u32,
    /// Memory limit per plugin instance, MiB.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub memory_mib: u32,
    /// Time limit per batch call, e.g. 5s, 500ms.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub time_limit: std::time::Duration,
    /// Print only the summary, not one line per record.
    #[arg(long)]
    pub quiet: bool,
    /// Directory for compiled plugins (default: the user cache directory).
    #[arg(long, env = "SLUICE_PLUGIN_CACHE", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct InspectArgs {
    /// The plugin component (.wasm).
    pub path: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    sluice_guest::duration::parse(s)
}
