//! The `flatline` command line and desktop dashboard.
//!
//! The binary (`src/main.rs`) installs the counting allocator and calls
//! [`run`]; everything else lives here so the tests can drive it.

pub mod alert;
pub mod bench;
pub mod cli;
pub mod compare;
pub mod convert;
pub mod corpus;
pub mod fmt;
pub mod mark;
pub mod prom;
pub mod report;
pub mod session;
pub mod soak;
pub mod ui;
pub mod watch;
pub mod window;

use std::process::ExitCode;

/// Runs the command line and turns any error into one line on stderr.
pub fn run(cli: cli::Cli) -> ExitCode {
    if let Some(cli::Command::Watch(args)) = &cli.command {
        return match watch::run(args) {
            // A started command's exit code is flatline's.
            Ok(Some(code)) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
            Ok(None) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("flatline: error: {err:#}");
                ExitCode::FAILURE
            }
        };
    }
    let result = match cli.command {
        None => window::live(&cli::LiveArgs::default()),
        Some(cli::Command::Live(args)) => window::live(&args),
        Some(cli::Command::Replay(args)) => window::replay(&args),
        Some(cli::Command::Bench(args)) => bench::run(args),
        Some(cli::Command::Soak(args)) => soak::run(&args),
        Some(cli::Command::Serve(args)) => soak::serve(&args),
        Some(cli::Command::Report(args)) => match report::run(&args) {
            Ok(report::Gate::Failed) => return ExitCode::from(report::EXIT_GATE_FAILED),
            other => other.map(drop),
        },
        Some(cli::Command::Compare(args)) => compare::run(&args),
        Some(cli::Command::Import(args)) => convert::import(&args),
        Some(cli::Command::Export(args)) => convert::export(&args),
        Some(cli::Command::Synth(args)) => convert::synth(&args),
        Some(cli::Command::Mark(args)) => mark::run(&args),
        Some(cli::Command::Watch(_)) => unreachable!("handled above"),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // `{:#}` puts anyhow's context chain on one line: "opening corpus x: No such file".
            eprintln!("flatline: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
