//! flatline's command line: its grammar ([`cli`], clap's types turned into
//! plain settings for the layers below) and every command ([`commands`]),
//! over the stream (`flatline-stream`: sources, sessions, the store) and the
//! exporters (`flatline-export`). Nothing here depends on a GUI crate (CI
//! checks its `cargo tree`): the window lives in the `flatline` crate
//! (dashboard/, whose `main.rs` is the program), which implements [`Viewer`]
//! and hands it to [`run`].

pub mod cli;
pub mod commands;

mod run;
mod viewer;

pub use run::run;
pub use viewer::{Closed, Headless, Show, Shown, Viewer};
