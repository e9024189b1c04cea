//! What opens windows: the [`Viewer`] the `flatline` crate implements and
//! [`Headless`] refuses, what a command asks it to show ([`Show`]), and how
//! a window ended ([`Closed`]).
//!
//! Every command that opens a window (`live`, `replay`, `compare`, a watch)
//! lives in `commands/`: it makes its source and store, and hands them to
//! one [`Viewer::show`]. The source says its own kind and rate
//! ([`Source::kind`], [`Source::sample_hz`]); the viewer only draws.

use std::path::PathBuf;

use anyhow::Result;

use crate::cli;
use flatline_receipt::fleet::Fleet;
use flatline_stream::source::{Meta, ReplaySource, Source, SourceKind};
use flatline_stream::store::{Align, Store};

/// How a window ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// Its close button, or the dashboard itself (after a screenshot).
    ByUser,
    /// Ctrl-C at the terminal, or SIGTERM.
    BySignal,
}

/// What a window shows.
#[allow(clippy::large_enum_variant)] // one per window, moved once
pub enum Shown {
    /// A source and the store it fills: live, a watch, a replay read up
    /// front, a followed file.
    Source {
        source: Box<dyn Source>,
        store: Store,
    },
    /// A recording the window reads on a thread of its own, already up
    /// (checked to be a recording before).
    Opening(PathBuf),
    /// A comparison: A as the source, B's store beside it, lined up by `align`.
    Compare {
        a: ReplaySource,
        a_store: Store,
        b: Meta,
        b_store: Store,
        align: Align,
    },
}

impl std::fmt::Debug for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shown::Source { source, .. } => write!(f, "Source({:?})", source.kind()),
            Shown::Opening(p) => write!(f, "Opening({})", p.display()),
            Shown::Compare { b, .. } => write!(f, "Compare(B: {})", b.label),
        }
    }
}

impl Shown {
    /// The kind of stream and its samples a second, which set the window's
    /// frame rate: a replay (or a file being opened) has no rate of its own
    /// and is drawn at the window's cap.
    pub fn pace(&self) -> (SourceKind, f64) {
        match self {
            Shown::Source { source, .. } => (source.kind(), source.sample_hz()),
            Shown::Opening(_) | Shown::Compare { .. } => (SourceKind::Replay, f64::INFINITY),
        }
    }
}

/// A window a command asks for.
#[derive(Debug)]
pub struct Show {
    pub title: String,
    /// Logical size, in points.
    pub size: [f32; 2],
    /// `--fps` and `--renderer`.
    pub window: cli::WindowArgs,
    /// Draw with the default view, save this PNG and close.
    pub screenshot: Option<PathBuf>,
    pub shown: Shown,
}

/// What opens windows, for the commands that show one. The `flatline` crate
/// implements it with eframe; [`Headless`] refuses every window.
pub trait Viewer {
    /// Fails, with advice, when no window can be opened here.
    fn check_display(&self) -> Result<()>;
    /// Shows `show` until the window closes (or its screenshot is saved).
    fn show(&self, show: Show) -> Result<Closed>;
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
    fn show(&self, _: Show) -> Result<Closed> {
        self.refuse()
    }
    fn fleet(&self, _: &cli::FleetArgs, _: Fleet) -> Result<()> {
        self.refuse()
    }
    fn bench(&self, _: cli::BenchCommand) -> Result<()> {
        self.refuse()
    }
}
