//! The native window around a [`Dashboard`]: the renderer (glow or wgpu),
//! the frame rate and its pacing, the waker thread that asks for frames
//! only when there is something new to draw, the display check, and
//! [`run_window`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use eframe::egui;

use flatline_cli::Closed;
use flatline_stream::source::{Activity, SourceKind};

use super::shared::Settings;
use super::state::Dashboard;

/// Which renderer draws a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renderer {
    /// OpenGL.
    Glow,
    Wgpu,
}

impl Renderer {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Renderer::Glow => "glow",
            Renderer::Wgpu => "wgpu",
        }
    }
}

/// What was asked of a window (`--fps`, `--renderer`); unset, the defaults
/// for its stream.
#[derive(Debug, Clone, Copy, Default)]
pub struct WindowAsked {
    pub fps: Option<f64>,
    pub renderer: Option<Renderer>,
}

/// How the window draws.
#[derive(Debug, Clone, Copy)]
pub struct WindowOptions {
    /// Most frames a second while there is something new to show.
    pub fps: f64,
    pub renderer: Renderer,
    /// What the window shows: each kind keeps its own layout and settings.
    pub kind: SourceKind,
}

/// Under Mesa's software rasteriser (a remote node over X forwarding or
/// VNC, Xvfb) glow draws a frame for a fraction of what wgpu costs; see the
/// figures in docs/dashboard.md, "What the window costs".
pub const DEFAULT_RENDERER: Renderer = Renderer::Glow;

/// Frames a second at most, by default: the sample rate, capped here (a
/// replay playing; see [`MAX_LIVE_FPS`] for a stream being taken).
pub const MAX_DEFAULT_FPS: f64 = 30.0;

/// Frames a second at most, by default, while a live or watched stream
/// flows: memory moves in seconds, and a figure redrawn five times a second
/// reads as live, so a 10 Hz stream is drawn in batches of two samples
/// (none is left out) at half the cost of a frame per sample. Input is
/// answered at once whatever the cap.
pub const MAX_LIVE_FPS: f64 = 5.0;

impl WindowOptions {
    /// What was `asked`, with the defaults for a stream of `sample_hz`
    /// samples a second.
    pub fn new(asked: WindowAsked, sample_hz: f64, kind: SourceKind) -> Self {
        let most = match kind {
            SourceKind::Live | SourceKind::Watch => MAX_LIVE_FPS,
            SourceKind::Replay => MAX_DEFAULT_FPS,
        };
        Self {
            fps: asked.fps.unwrap_or(sample_hz.min(most)),
            renderer: asked.renderer.unwrap_or(DEFAULT_RENDERER),
            kind,
        }
    }
}

/// Frames drawn by this process's window (for `bench window`).
pub static FRAMES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The eframe application around a [`Dashboard`].
#[derive(Debug)]
pub struct App {
    pub dash: Dashboard,
    /// Set by Ctrl-C or SIGTERM: close the window the normal way.
    pub interrupted: Arc<AtomicBool>,
    /// Shared with the waker thread.
    pace: Arc<Pace>,
}

impl Drop for App {
    fn drop(&mut self) {
        self.pace.gone.store(true, Ordering::Relaxed);
    }
}

/// What the window and its waker thread share. The waker alone asks for
/// frames that no input caused (new data, the dashboard's own analyses, a
/// replay playing), so that no two of them come closer than the frame
/// period, whoever wanted them.
#[derive(Debug)]
struct Pace {
    /// The dashboard wants frames with no new data (set by `App::logic`).
    busy: AtomicBool,
    /// It has data not analysed yet: a frame within [`MOST_STILL`].
    stale: AtomicBool,
    gone: AtomicBool,
    epoch: Instant,
    /// Nanoseconds from `epoch` to the start of the last frame.
    last_frame_ns: AtomicU64,
    /// [`Dashboard::pixel_s`] of the last frame, as f64 bits (0: none).
    pixel_s: AtomicU64,
}

impl Pace {
    fn new() -> Self {
        Self {
            busy: AtomicBool::new(true),
            stale: AtomicBool::new(false),
            gone: AtomicBool::new(false),
            epoch: Instant::now(),
            last_frame_ns: AtomicU64::new(0),
            pixel_s: AtomicU64::new(0),
        }
    }

    /// How long new data may wait for its frame: until it moves the plots
    /// by a pixel, at most [`MOST_STILL`].
    fn data_may_wait(&self) -> Duration {
        let s = f64::from_bits(self.pixel_s.load(Ordering::Relaxed));
        Duration::from_secs_f64(s.clamp(0.0, MOST_STILL.as_secs_f64()))
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn frame_began(&self) {
        self.last_frame_ns.store(self.now_ns(), Ordering::Relaxed);
    }

    fn last_frame(&self) -> Instant {
        self.epoch + Duration::from_nanos(self.last_frame_ns.load(Ordering::Relaxed))
    }
}

/// Where settings were kept before they were kept per kind of source: read
/// when a kind has none of its own yet.
const SETTINGS_KEY: &str = "flatline-settings";

/// A kind of source as its storage file is named.
fn kind_name(kind: SourceKind) -> &'static str {
    match kind {
        SourceKind::Live => "live",
        SourceKind::Watch => "watch",
        SourceKind::Replay => "replay",
    }
}

/// The storage key of a kind of source's settings: a live window, a watch
/// and a replay each remember their own channels, modes and theme.
pub fn settings_key(kind: SourceKind) -> &'static str {
    match kind {
        SourceKind::Live => "flatline-settings-live",
        SourceKind::Watch => "flatline-settings-watch",
        SourceKind::Replay => "flatline-settings-replay",
    }
}

impl eframe::App for App {
    fn logic(&mut self, ctx: &egui::Context, _frame: &mut eframe::Frame) {
        self.dash.tick();
        if self.interrupted.load(Ordering::Relaxed) {
            ctx.send_viewport_cmd(egui::ViewportCommand::Close);
        }
        // No timer here: a frame comes with input, or when the waker asks
        // for it, for new data or because the dashboard is busy.
        self.pace.busy.store(self.dash.busy(), Ordering::Relaxed);
        self.pace.stale.store(self.dash.stale(), Ordering::Relaxed);
        let pixel = self.dash.view.plots.pixel_s.unwrap_or(0.0);
        self.pace.pixel_s.store(pixel.to_bits(), Ordering::Relaxed);
    }

    /// The panels' colour: the panels themselves are transparent in the
    /// window (see [`run_window`]), so the clear paints their background.
    fn clear_color(&self, visuals: &egui::Visuals) -> [f32; 4] {
        let panels = if visuals.dark_mode {
            egui::Visuals::dark().panel_fill
        } else {
            egui::Visuals::light().panel_fill
        };
        panels.to_normalized_gamma_f32()
    }

    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        FRAMES.fetch_add(1, Ordering::Relaxed);
        self.pace.frame_began();
        self.dash.show(ui);
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        let key = settings_key(self.dash.source.kind());
        eframe::set_value(storage, key, &self.dash.settings);
    }
}

/// How often the waker looks for new data between frames, at most.
const POLL: Duration = Duration::from_millis(20);

/// The longest new data waits for a frame: the figures and counts around
/// the plots change with every sample, even where the plots do not.
pub const MOST_STILL: Duration = Duration::from_secs(1);

/// Asks `ctx` for a frame when the source has new data, the dashboard is
/// busy, or Ctrl-C came, at most `fps` times a second counting the frames
/// that input caused; ends when the app is gone. A check costs a file's
/// length or an atomic load.
///
/// New data gets its frame once it moves the plots by a pixel along x
/// (the last frame's [`Dashboard::pixel_s`]), or after [`MOST_STILL`]: a
/// window showing ten minutes of a 10 Hz stream on 1,000 pixels draws 1.7
/// frames a second, not 10, and loses nothing a pixel could show.
///
/// A covered or minimized window draws nothing whatever is asked: eframe
/// then runs [`App::logic`] alone, so the data still flows.
fn spawn_waker(
    ctx: egui::Context,
    mut activity: Option<Activity>,
    fps: f64,
    interrupted: Arc<AtomicBool>,
    pace: Arc<Pace>,
) -> Result<()> {
    let period = Duration::from_secs_f64(1.0 / fps);
    std::thread::Builder::new()
        .name("flatline-waker".into())
        .spawn(move || {
            flatline_telemetry::alloc::mark_observer_thread();
            // The waker's own last request, which egui answers a moment
            // later: the next may not come sooner than a period after it.
            let mut asked = Instant::now();
            // New data not yet drawn.
            let mut pending = false;
            while !pace.gone.load(Ordering::Relaxed) {
                let earliest = (pace.last_frame().max(asked) + period).max(Instant::now());
                std::thread::sleep(earliest.saturating_duration_since(Instant::now()));
                if interrupted.load(Ordering::Relaxed) {
                    ctx.request_repaint();
                    std::thread::sleep(POLL);
                    continue;
                }
                // `activity` first: it also forgets what it reported.
                pending |= activity.as_mut().is_some_and(|a| a());
                let stale = pace.stale.load(Ordering::Relaxed);
                let wait = if pending {
                    pace.data_may_wait()
                } else {
                    MOST_STILL
                };
                let due = (pending || stale) && pace.last_frame().elapsed() >= wait;
                if due || pace.busy.load(Ordering::Relaxed) {
                    pending = false;
                    // egui answers a request without delay with two frames;
                    // one with a delay, however short, with one.
                    ctx.request_repaint_after(Duration::from_millis(1));
                    asked = Instant::now();
                } else {
                    std::thread::sleep(POLL.min(period));
                }
            }
        })
        .context("starting the window's waker thread")?;
    Ok(())
}

/// Fails with advice when no display can be reached.
pub fn check_display() -> Result<()> {
    if cfg!(target_os = "linux")
        && std::env::var_os("DISPLAY").is_none()
        && std::env::var_os("WAYLAND_DISPLAY").is_none()
    {
        bail!(
            "no display: neither DISPLAY nor WAYLAND_DISPLAY is set; on a headless machine run it under a virtual \
             display, e.g. `xvfb-run -a flatline …` (apt-get install xvfb)"
        );
    }
    if cfg!(all(target_os = "linux", not(feature = "wayland")))
        && std::env::var_os("DISPLAY").is_none()
    {
        bail!(
            "no X11 display: only WAYLAND_DISPLAY is set, and this flatline was built without Wayland; start \
             XWayland (most Wayland desktops run it and set DISPLAY), or build with \
             `cargo build --release --features wayland`"
        );
    }
    Ok(())
}

/// The eframe renderer for `--renderer`; wgpu only in a build with the
/// `wgpu` feature (see the feature's note in dashboard/Cargo.toml).
pub(super) fn native_renderer(which: Renderer) -> Result<eframe::Renderer> {
    match which {
        Renderer::Glow => Ok(eframe::Renderer::Glow),
        #[cfg(feature = "wgpu")]
        Renderer::Wgpu => Ok(eframe::Renderer::Wgpu),
        #[cfg(not(feature = "wgpu"))]
        Renderer::Wgpu => bail!(
            "this flatline was built without the wgpu renderer; use `--renderer glow` (the default), or build with \
             `cargo build --release --features wgpu`"
        ),
    }
}

/// Opens the window on a dashboard and runs until it closes.
pub fn run_window(
    title: &str,
    size: [f32; 2],
    window: WindowOptions,
    make: impl FnOnce(Settings) -> Dashboard + 'static,
) -> Result<Closed> {
    check_display()?;
    // Ctrl-C at the terminal (or SIGTERM) closes the window as its close button
    // does, so a recording in progress gets its footer instead of being cut off.
    // The waker thread sees the flag within a frame period (at most 1 s)
    // and asks for the frame whose `App::logic` closes the window.
    let interrupted = flatline_stream::session::interrupt_flag()?;
    let flag = interrupted.clone();
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title(title)
            .with_inner_size(size)
            .with_icon(super::icon::icon()),
        persist_window: false,
        // A file per kind of window (live, watch, replay): each keeps its own
        // panel widths and settings.
        persistence_path: eframe::storage_dir("flatline")
            .map(|d| d.join(format!("{}.ron", kind_name(window.kind)))),
        // egui's dithering costs a shader pass per pixel, which a software
        // rasteriser pays in full at every frame; banding on plots is no loss.
        dithering: false,
        renderer: native_renderer(window.renderer)?,
        ..Default::default()
    };
    // winit panics (an `unwrap` in its X11 backend) when the display goes away
    // while the window is open. Unwinding drops the dashboard, whose source
    // finishes any recording with a footer; catching the panic here turns it
    // into one error line and a normal exit, after which the caller's own
    // clean-up (a watched command's stop) still runs.
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        eframe::run_native(
            "flatline",
            options,
            Box::new(move |cc| {
                let stored = |key: &str| {
                    cc.storage
                        .and_then(|s| eframe::get_value::<Settings>(s, key))
                };
                let mut dash = make(stored(SETTINGS_KEY).unwrap_or_default());
                // This kind of source's own, once it has saved any.
                if let Some(own) = stored(settings_key(dash.source.kind())) {
                    dash.settings = own;
                }
                // The window is cleared to the panels' colour, so the panels
                // need not fill themselves: one full-window pass less at
                // every frame, which a software rasteriser pays per pixel.
                cc.egui_ctx
                    .all_styles_mut(|s| s.visuals.panel_fill = egui::Color32::TRANSPARENT);
                // Corners of 2 points instead of egui's 4 to 6: three vertices a
                // corner instead of nine, so each button, badge and card is a
                // third of the triangles, which a software rasteriser sets up
                // one by one (about a tenth of a frame; docs/dashboard.md).
                cc.egui_ctx.all_styles_mut(|s| {
                    let w = &mut s.visuals.widgets;
                    for state in [
                        &mut w.noninteractive,
                        &mut w.inactive,
                        &mut w.hovered,
                        &mut w.active,
                        &mut w.open,
                    ] {
                        state.corner_radius = egui::CornerRadius::same(2);
                    }
                    s.visuals.window_corner_radius = egui::CornerRadius::same(2);
                    s.visuals.menu_corner_radius = egui::CornerRadius::same(2);
                });
                let pace = Arc::new(Pace::new());
                spawn_waker(
                    cc.egui_ctx.clone(),
                    dash.source.activity(),
                    window.fps,
                    flag.clone(),
                    pace.clone(),
                )?;
                Ok(Box::new(App {
                    dash,
                    interrupted: flag,
                    pace,
                }))
            }),
        )
    }));
    match run {
        Ok(Ok(())) if interrupted.load(Ordering::Relaxed) => Ok(Closed::BySignal),
        Ok(Ok(())) => Ok(Closed::ByUser),
        Ok(Err(e)) => bail!(
            "cannot open the window: {e} (on a headless machine use `xvfb-run -a flatline …`)"
        ),
        Err(panic) => {
            let why = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("no message");
            anyhow::bail!("the window failed while open (did the display go away?): {why}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_being_taken_is_drawn_at_most_five_times_a_second_by_default() {
        let none = WindowAsked::default();
        assert_eq!(WindowOptions::new(none, 10.0, SourceKind::Watch).fps, 5.0);
        assert_eq!(WindowOptions::new(none, 100.0, SourceKind::Live).fps, 5.0);
        // A slower stream is drawn at its own rate.
        assert_eq!(WindowOptions::new(none, 2.0, SourceKind::Watch).fps, 2.0);
        // A replay playing keeps its smooth cap, and --fps wins over both.
        assert_eq!(
            WindowOptions::new(none, MAX_DEFAULT_FPS, SourceKind::Replay).fps,
            30.0
        );
        let asked = WindowAsked {
            fps: Some(10.0),
            ..WindowAsked::default()
        };
        assert_eq!(WindowOptions::new(asked, 10.0, SourceKind::Watch).fps, 10.0);
    }
}
