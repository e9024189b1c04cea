//! What opens windows: the [`Viewer`] the `flatline` crate implements and
//! [`Headless`] refuses, and how a window ended ([`Closed`]).

use anyhow::Result;
use flatline_telemetry::recording::Recording;

use crate::cli;
use crate::commands::fleet::model::Fleet;
use crate::stream::{source, store};

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
    fn fleet(&self, args: &cli::FleetArgs, fleet: Fleet) -> Result<()>;
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
    fn fleet(&self, _: &cli::FleetArgs, _: Fleet) -> Result<()> {
        self.refuse()
    }
    fn bench(&self, _: cli::BenchCommand) -> Result<()> {
        self.refuse()
    }
}
