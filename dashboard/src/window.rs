//! The window as flatline_core's [`Viewer`]: `live`, `replay`, `compare`,
//! a watch's window, fleet's window and the window benchmarks (`crate::bench`).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use flatline_telemetry::recording::{FrameReader, Recording};

use flatline_core::cli::{
    AlignArg, BenchCommand, CompareArgs, FleetArgs, LiveArgs, ReplayArgs, WindowArgs,
};
use flatline_core::stream::store::Store;
use flatline_core::{Closed, Viewer};

use crate::from_cli;
use crate::ui::{self, Dashboard, LiveSource, ReplaySource, Settings, Source, WatchSource};

/// The eframe window.
#[derive(Debug, Clone, Copy, Default)]
pub struct Window;

impl Viewer for Window {
    fn check_display(&self) -> Result<()> {
        ui::check_display()
    }
    fn live(&self, args: &LiveArgs) -> Result<()> {
        live(args)
    }
    fn replay(&self, args: &ReplayArgs) -> Result<()> {
        replay(args)
    }
    fn compare(&self, args: &CompareArgs, a: Recording, b: Recording) -> Result<()> {
        compare(args, a, b)
    }
    fn watch(
        &self,
        pid: u32,
        window: &WindowArgs,
        hz: f64,
        src: WatchSource,
        store: Store,
    ) -> Result<Closed> {
        ui::run_window(
            &format!("flatline — watching {pid}"),
            [1600.0, 1000.0],
            ui::WindowOptions::new(from_cli::asked(window), hz, ui::SourceKind::Watch),
            move |settings| Dashboard::new(Box::new(src), store, settings),
        )
    }
    fn fleet(&self, args: &FleetArgs, fleet: flatline_core::commands::fleet::Fleet) -> Result<()> {
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
            _ => unreachable!("flatline_core runs the other benchmarks"),
        }
    }
}

pub fn live(args: &LiveArgs) -> Result<()> {
    ui::check_display()?;
    let exe = std::env::current_exe().context("finding flatline's own executable")?;
    let (mut src, store) = LiveSource::start_with(&exe, args.serve_config())?;
    if let Some(path) = &args.record {
        src.start_recording(path)?;
    }
    let window =
        ui::WindowOptions::new(from_cli::asked(&args.window), args.hz, ui::SourceKind::Live);
    ui::run_window(
        "flatline — live",
        [1600.0, 1000.0],
        window,
        move |settings| Dashboard::new(Box::new(src), store, settings),
    )?;
    Ok(())
}

pub fn replay(args: &ReplayArgs) -> Result<()> {
    ui::check_display()?;
    let name = args.file.display().to_string();
    let window = ui::WindowOptions::new(
        from_cli::asked(&args.window),
        ui::MAX_DEFAULT_FPS,
        ui::SourceKind::Replay,
    );
    if !args.follow && args.screenshot.is_none() {
        // The window comes up at once and reads the file on a thread of its
        // own; what is not a recording at all is refused first, here.
        let file = std::fs::File::open(&args.file)
            .with_context(|| format!("opening {}", args.file.display()))?;
        FrameReader::open(std::io::BufReader::new(file), &args.file)?;
        let path = args.file.clone();
        ui::run_window(
            &format!("flatline — {name}"),
            args.size,
            window,
            move |settings| Dashboard::opening(path, settings),
        )?;
        return Ok(());
    }
    let (src, store): (Box<dyn ui::Source>, _) = if args.follow {
        let (s, st) = ReplaySource::follow(&args.file)?;
        (Box::new(s), st)
    } else {
        let (s, st) = ReplaySource::open(&args.file)?;
        (Box::new(s), st)
    };
    // A replay plays (or a followed soak grows) at up to 30 frames a second.
    let dash = move |settings| Dashboard::new(src, store, settings);
    open(
        &format!("flatline — {name}"),
        args.size,
        window,
        dash,
        args.screenshot.as_ref(),
    )
}

/// `flatline compare A B` in the window: A as the source, B beside it.
pub fn compare(args: &CompareArgs, a: Recording, b: Recording) -> Result<()> {
    ui::check_display()?;
    let title = format!("flatline — {} and {}", args.a.display(), args.b.display());
    let (src, store) = ReplaySource::from_recording(a);
    let (other, other_store) = ReplaySource::from_recording(b);
    let meta = other.meta();
    // Step when both runs have steps (the dashboard falls back to time
    // where one has none), unless asked.
    let align = args.align.unwrap_or(AlignArg::Step).into();
    let window = ui::WindowOptions::new(
        from_cli::asked(&args.window),
        ui::MAX_DEFAULT_FPS,
        ui::SourceKind::Replay,
    );
    let dash = move |settings| {
        let mut d = Dashboard::new(Box::new(src), store, settings);
        d.compare_with(meta, other_store, align);
        d
    };
    open(&title, args.size, window, dash, args.screenshot.as_ref())
}

/// Opens the window on the dashboard `make` builds; with `screenshot`,
/// renders it with the default view, saves the PNG and closes.
fn open(
    title: &str,
    size: [f32; 2],
    window: ui::WindowOptions,
    make: impl FnOnce(Settings) -> Dashboard + 'static,
    screenshot: Option<&PathBuf>,
) -> Result<()> {
    let Some(png) = screenshot else {
        ui::run_window(title, size, window, make)?;
        return Ok(());
    };
    // Evidence is made with the default view, whatever this user last chose.
    let mut dash = make(Settings::default());
    dash.screenshot_to(png.clone(), true);
    let result = dash.shot_result.clone();
    ui::run_window(title, size, window, move |_| dash)?;
    match result.lock().expect("result lock").take() {
        Some(Ok(path)) => {
            println!("wrote {}", path.display());
            Ok(())
        }
        Some(Err(e)) => bail!("screenshot failed: {e}"),
        None => bail!("the window closed before the screenshot was taken"),
    }
}
