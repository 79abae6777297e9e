//! The `sluice` binary: parse the command line, set up logging, dispatch.
//! Errors end here, printed with their context chain; bad input (a config,
//! a plugin, a path) exits with code 2, as the README promises.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};
use sluice::cli::{self, Cli, Command, PluginCommand};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_env("SLUICE_LOG").unwrap_or_else(|_| EnvFilter::new("warn")))
        .with_writer(std::io::stderr)
        .init();
    let matches = Cli::command().get_matches();
    let parsed = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    let result = match &parsed.command {
        Command::Plugin(PluginCommand::Run(args)) => {
            let run = matches.subcommand_matches("plugin").and_then(|m| m.subcommand_matches("run"));
            let indices = |id: &str| -> Vec<usize> {
                run.and_then(|m| m.indices_of(id)).map(|i| i.collect()).unwrap_or_default()
            };
            cli::plugin::pair_configs(&indices("plugins"), &indices("configs")).and_then(|owners| cli::plugin::run(args, &owners))
        }
        Command::Plugin(PluginCommand::Inspect(args)) => cli::plugin::inspect(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
