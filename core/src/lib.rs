//! flatline's headless core: everything but the window.
//!
//! Sources and the store they fill, sessions (sampler, recorder, exporter),
//! receipts, the Prometheus exporter and alerts, and the implementation of
//! every command. Nothing here depends on a GUI crate (CI checks its
//! `cargo tree`): the window lives in the `flatline` crate, which implements
//! [`Viewer`] and hands it to [`run`]. Tests, benchmarks and (later) Python
//! bindings use this crate without a display.

pub use flatline_receipt::{fmt, render};

pub mod cli;
pub mod commands;
pub mod export;
pub mod select;
pub mod stream;

use commands::{bench, compare, convert, fleet, report, soak, watch};
use export::web;
use stream::{mark, source, store};

use std::process::ExitCode;

use anyhow::Result;
use flatline_telemetry::recording::Recording;

/// An error whose cause has already been said on stderr: the run exits
/// non-zero without a second line.
#[derive(Debug, Clone, Copy)]
pub struct AlreadySaid;

impl std::fmt::Display for AlreadySaid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("(said above)")
    }
}

impl std::error::Error for AlreadySaid {}

/// A flag that asks for something the run cannot do (a channel selector
/// that selects nothing, say), found after clap parsed it: exit 2, as
/// clap's own flag errors, never a run that passes by not looking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadFlag(pub String);

impl std::fmt::Display for BadFlag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadFlag {}

/// The exit code of a bad flag (clap's, and [`BadFlag`]'s).
pub const EXIT_BAD_FLAG: u8 = 2;

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

/// How a window ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// Its close button, or the dashboard itself (after a screenshot).
    ByUser,
    /// Ctrl-C at the terminal, or SIGTERM.
    BySignal,
}

/// What opens windows, for the commands that show one. The `flatline` crate
/// implements it with eframe; [`Headless`] refuses every window.
pub trait Viewer {
    /// Fails, with advice, when no window can be opened here.
    fn check_display(&self) -> Result<()>;
    /// `flatline live`.
    fn live(&self, args: &cli::LiveArgs) -> Result<()>;
    /// `flatline replay`.
    fn replay(&self, args: &cli::ReplayArgs) -> Result<()>;
    /// `flatline compare A B` without `--format`: both in one window.
    fn compare(&self, args: &cli::CompareArgs, a: Recording, b: Recording) -> Result<()>;
    /// A watch's window on its source and store, until it closes.
    fn watch(
        &self,
        pid: u32,
        window: &cli::WindowArgs,
        hz: f64,
        src: source::WatchSource,
        store: store::Store,
    ) -> Result<Closed>;
    /// `flatline fleet --window` or `--screenshot`: the fleet in a window.
    fn fleet(&self, args: &cli::FleetArgs, fleet: fleet::Fleet) -> Result<()>;
    /// `flatline bench ui` and `bench window`: what the window costs.
    fn bench(&self, cmd: cli::BenchCommand) -> Result<()>;
}

/// A [`Viewer`] for builds and callers without a window.
#[derive(Debug, Clone, Copy, Default)]
pub struct Headless;

impl Headless {
    fn refuse<T>(&self) -> Result<T> {
        anyhow::bail!(
            "this build of flatline has no window; use the headless commands (`watch --headless`, `report`, `soak`)"
        )
    }
}

impl Viewer for Headless {
    fn check_display(&self) -> Result<()> {
        self.refuse()
    }
    fn live(&self, _: &cli::LiveArgs) -> Result<()> {
        self.refuse()
    }
    fn replay(&self, _: &cli::ReplayArgs) -> Result<()> {
        self.refuse()
    }
    fn compare(&self, _: &cli::CompareArgs, _: Recording, _: Recording) -> Result<()> {
        self.refuse()
    }
    fn watch(
        &self,
        _: u32,
        _: &cli::WindowArgs,
        _: f64,
        _: source::WatchSource,
        _: store::Store,
    ) -> Result<Closed> {
        self.refuse()
    }
    fn fleet(&self, _: &cli::FleetArgs, _: fleet::Fleet) -> Result<()> {
        self.refuse()
    }
    fn bench(&self, _: cli::BenchCommand) -> Result<()> {
        self.refuse()
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
        None => viewer.live(&cli::LiveArgs::default()),
        Some(cli::Command::Live(args)) => viewer.live(&args),
        Some(cli::Command::Replay(args)) => viewer.replay(&args),
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
