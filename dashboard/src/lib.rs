//! The `flatline` desktop dashboard: the only crate that imports a GUI crate.
//!
//! The binary (`src/main.rs`) installs the counting allocator and calls
//! [`run`]; the commands themselves live in `flatline_core`, which opens
//! windows through the [`Viewer`](flatline_core::Viewer) this crate gives it
//! ([`window::Window`]).

pub mod bench;
pub mod from_cli;
pub mod ui;
pub mod window;

use std::process::ExitCode;

/// Runs the command line with the eframe window as its viewer.
pub fn run(cli: flatline_core::cli::Cli) -> ExitCode {
    flatline_core::run(cli, &window::Window)
}
