//! The `flatline` desktop dashboard: the only crate that imports a GUI crate.
//!
//! The binary (`src/main.rs`) installs the counting allocator and calls
//! [`run`]; the commands themselves live in `flatline_cli`, which opens
//! windows through the [`Viewer`](flatline_cli::Viewer) this crate gives it
//! ([`window::Window`]).

pub mod bench;
pub mod from_cli;
pub mod ui;
pub mod window;

use std::process::ExitCode;

/// Runs the command line with the eframe window as its viewer.
pub fn run(cli: flatline_cli::cli::Cli) -> ExitCode {
    flatline_cli::run(cli, &window::Window)
}
