//! The window as flatline_cli's [`Viewer`]: whatever a command asks it to
//! show ([`Show`]: live, a watch, a replay, a comparison), fleet's window
//! and the window benchmarks (`crate::bench`). The commands themselves, and
//! the sources they make, are flatline_cli's.

use std::path::PathBuf;

use anyhow::{Result, bail};

use flatline_cli::cli::{BenchCommand, FleetArgs};
use flatline_cli::{Closed, Show, Shown, Viewer};

use crate::from_cli;
use crate::ui::{self, Dashboard, Settings};

/// The eframe window.
#[derive(Debug, Clone, Copy, Default)]
pub struct Window;

impl Viewer for Window {
    fn check_display(&self) -> Result<()> {
        ui::check_display()
    }
    fn show(&self, show: Show) -> Result<Closed> {
        let (kind, hz) = show.shown.pace();
        let options = ui::WindowOptions::new(from_cli::asked(&show.window), hz, kind);
        let shown = show.shown;
        let make = move |settings| match shown {
            Shown::Source { source, store } => Dashboard::new(source, store, settings),
            Shown::Opening(path) => Dashboard::opening(path, settings),
            Shown::Compare {
                a,
                a_store,
                b,
                b_store,
                align,
            } => {
                let mut d = Dashboard::new(Box::new(a), a_store, settings);
                d.compare_with(b, b_store, align);
                d
            }
        };
        open(
            &show.title,
            show.size,
            options,
            make,
            show.screenshot.as_ref(),
        )
    }
    fn fleet(&self, args: &FleetArgs, fleet: flatline_receipt::fleet::Fleet) -> Result<()> {
        let window = ui::fleet::FleetWindow {
            screenshot: args.screenshot.clone(),
            size: args.size,
            renderer: args
                .renderer
                .map_or(ui::DEFAULT_RENDERER, from_cli::renderer),
        };
        ui::fleet::run(&window, fleet)
    }
    fn bench(&self, cmd: BenchCommand) -> Result<()> {
        match cmd {
            BenchCommand::Ui(args) => crate::bench::ui::run(&args),
            BenchCommand::Window(args) => crate::bench::window::run(&args),
            _ => unreachable!("flatline_cli runs the other benchmarks"),
        }
    }
}

/// Opens the window on the dashboard `make` builds; with `screenshot`,
/// renders it with the default view, saves the PNG and closes.
fn open(
    title: &str,
    size: [f32; 2],
    window: ui::WindowOptions,
    make: impl FnOnce(Settings) -> Dashboard + 'static,
    screenshot: Option<&PathBuf>,
) -> Result<Closed> {
    let Some(png) = screenshot else {
        return ui::run_window(title, size, window, make);
    };
    // Evidence is made with the default view, whatever this user last chose.
    let mut dash = make(Settings::default());
    dash.screenshot_to(png.clone(), true);
    let result = dash.shot_result.clone();
    let closed = ui::run_window(title, size, window, move |_| dash)?;
    match result.lock().expect("result lock").take() {
        Some(Ok(path)) => {
            println!("wrote {}", path.display());
            Ok(closed)
        }
        Some(Err(e)) => bail!("screenshot failed: {e}"),
        None => bail!("the window closed before the screenshot was taken"),
    }
}
