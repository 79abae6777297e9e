//! The `sluice` command line. Each subcommand lives in its own file, its
//! arguments in `args` (the grammar); this one parses and dispatches, and
//! no subcommand imports it.

mod args;
mod audit;
mod cases;
pub(crate) mod check;
mod helpers;
mod mask;
mod offsets;
pub(crate) mod plugin;
mod progress;
mod quarantine;
mod reference;
pub(crate) mod run;
mod scaffold;
mod scaffold_classifier;
mod several;
mod shadow;
mod sink;
mod store;
pub(crate) mod summary;
mod tap;
mod top;
mod validate;

use std::process::ExitCode;

use args::{Cli, Command, ConfigArgs, ConfigCommand, Kind, PluginCommand, SinkCommand, StoreCommand};
use clap::{CommandFactory, FromArgMatches};
use tracing_subscriber::EnvFilter;

/// The whole program: parse the command line, set up logging, dispatch.
/// Errors end here, printed with their context chain; bad input (a config,
/// a plugin, a path) exits with code 2, as docs/src/exit-codes.md promises.
pub fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_env("SLUICE_LOG").unwrap_or_else(|_| EnvFilter::new("warn")))
        // Each line masked as the config in force says (`telemetry::redact`).
        .with_writer(crate::telemetry::redact::Stderr)
        // Colour only for a person at a terminal: logs collected from a
        // pipe or a file stay plain text for whoever greps them.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    // A changelog restore draws its bars when stderr is a terminal.
    crate::telemetry::progress::enable();
    let matches = Cli::command().get_matches();
    let mut parsed = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    if let Some(Err(e)) = parsed.command.one_config().map(ConfigArgs::resolve) {
        crate::telemetry::redact::error(&format_args!("{e:#}"));
        return ExitCode::from(2);
    }
    let result = match &parsed.command {
        Command::Run(args) => return run::run(args),
        Command::Check(args) => match check::check(args) {
            Ok(()) => Ok(()),
            Err(check::CheckFailed::BadInput(e)) => Err(e),
            Err(check::CheckFailed::Unreachable(why)) => {
                crate::telemetry::redact::error(&why);
                return ExitCode::from(check::EXIT_UNREACHABLE);
            }
        },
        Command::Test(args) => match cases::test(args) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::from(1),
            Err(e) => Err(e),
        },
        Command::Quarantine(cmd) => quarantine::run(cmd),
        Command::Audit(args) => audit::run(args),
        Command::Shadow(args) => shadow::run(args),
        Command::Lag(args) => offsets::lag(args),
        Command::Config(ConfigCommand::Schema) => {
            println!("{}", serde_json::to_string_pretty(&crate::config::schema::schema()).unwrap_or_default());
            Ok(())
        }
        Command::Config(ConfigCommand::Reference) => {
            print!("{}", crate::config::schema::reference());
            Ok(())
        }
        Command::Config(ConfigCommand::CliReference) => {
            print!("{}", reference::markdown());
            Ok(())
        }
        Command::Top(args) => top::top(args),
        Command::Tap(args) => tap::tap(args),
        Command::Replay(args) => offsets::replay(args),
        Command::Store(StoreCommand::Repair(args)) => store::repair_store(args),
        Command::Plugin(PluginCommand::Run(args)) => {
            let run = matches.subcommand_matches("plugin").and_then(|m| m.subcommand_matches("run"));
            let indices = |id: &str| -> Vec<usize> {
                run.and_then(|m| m.indices_of(id)).map(|i| i.collect()).unwrap_or_default()
            };
            plugin::pair_configs(&indices("plugins"), &indices("configs")).and_then(|owners| plugin::run(args, &owners))
        }
        Command::Plugin(PluginCommand::Inspect(args)) => plugin::inspect(args),
        Command::Plugin(PluginCommand::Test(args)) => match plugin::test(args) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::from(1),
            Err(e) => Err(e),
        },
        Command::Plugin(PluginCommand::New(args)) => match args.kind {
            Kind::Classifier => scaffold_classifier::new(args),
            _ => scaffold::new(args),
        },
        Command::Plugin(PluginCommand::Cache(args)) => plugin::cache(args),
        Command::Plugin(PluginCommand::Helpers) => helpers::serve(std::io::stdin().lock(), std::io::stdout().lock()),
        Command::Sink(SinkCommand::Classify(args)) => match sink::classify(args) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::from(1),
            Err(e) => Err(e),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            crate::telemetry::redact::error(&format_args!("{e:#}"));
            ExitCode::from(2)
        }
    }
}
