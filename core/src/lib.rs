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

mod error;
mod run;
mod viewer;

pub use error::{AlreadySaid, BadFlag, EXIT_BAD_FLAG};
pub use run::run;
pub use viewer::{Closed, Headless, Show, Shown, Viewer};
