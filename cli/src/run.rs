//! [`run`]: the command line, command by command, and any error told once
//! on stderr with its exit code.

use std::process::ExitCode;

use crate::cli;
use crate::commands::{bench, compare, convert, fleet, live, replay, report, soak, watch};
use crate::viewer::Viewer;
use flatline_export::web;
use flatline_export::{AlreadySaid, BadFlag, EXIT_BAD_FLAG};
use flatline_stream::mark;

/// The exit code of a failed run: 2 when a flag was at fault, else 1.
fn failure(err: &anyhow::Error) -> ExitCode {
    if err.chain().any(|e| e.downcast_ref::<BadFlag>().is_some()) {
        ExitCode::from(EXIT_BAD_FLAG)
    } else {
        ExitCode::FAILURE
    }
}

/// Prints an error once, as one line; one already said prints nothing.
fn say(err: &anyhow::Error) {
    if err.downcast_ref::<AlreadySaid>().is_none() {
        // `{:#}` puts anyhow's context chain on one line: "opening corpus x: No such file".
        eprintln!("flatline: error: {err:#}");
    }
}

/// Runs the command line and turns any error into one line on stderr.
pub fn run(cli: cli::Cli, viewer: &dyn Viewer) -> ExitCode {
    if let Some(cli::Command::Watch(args)) = &cli.command {
        return match watch::run(args, viewer) {
            // A started command's exit code is flatline's.
            Ok(Some(code)) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
            Ok(None) => ExitCode::SUCCESS,
            Err(err) => {
                say(&err);
                failure(&err)
            }
        };
    }
    let result = match cli.command {
        None => live::run(&cli::LiveArgs::default(), viewer),
        Some(cli::Command::Live(args)) => live::run(&args, viewer),
        Some(cli::Command::Replay(args)) => replay::run(&args, viewer),
        Some(cli::Command::Bench(args)) => bench::run(args, viewer),
        Some(cli::Command::Soak(args)) => soak::run(&args),
        Some(cli::Command::Serve(args)) => soak::serve(&args),
        Some(cli::Command::Report(args)) => match report::run(&args) {
            Ok(report::Gate::Failed) => return ExitCode::from(report::EXIT_GATE_FAILED),
            Ok(report::Gate::Damaged) => return ExitCode::from(report::EXIT_DAMAGED),
            other => other.map(drop),
        },
        Some(cli::Command::Compare(args)) => compare::run(&args, viewer),
        Some(cli::Command::Fleet(args)) => fleet::run(&args, viewer),
        Some(cli::Command::Import(args)) => convert::import(&args),
        Some(cli::Command::Export(args)) => convert::export(&args),
        Some(cli::Command::Synth(args)) => convert::synth(&args),
        Some(cli::Command::Mark(args)) => mark::run(&args.text, args.to.as_deref()),
        Some(cli::Command::HashPassword(args)) => web::hash_password_command(args.cost),
        Some(cli::Command::Watch(_)) => unreachable!("handled above"),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            say(&err);
            failure(&err)
        }
    }
}
