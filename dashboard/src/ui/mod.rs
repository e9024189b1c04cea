//! The desktop dashboard: eframe window, egui_plot plots.
//!
//! State ([`Dashboard`]: source, store, settings) is kept apart from drawing
//! (`view`). Drawing is given a [`Frame`], which holds no source: it reads
//! the [`Store`] and what the frame loop read of the source this frame
//! ([`Dashboard::seen`]). The whole UI is drawn into one `egui::Ui`, so the
//! tests drive exactly the code the window runs (`egui_kittest`).

pub mod fleet;
pub mod icon;
mod timeline;
mod view;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use eframe::egui;

pub use flatline_core::Closed;
use flatline_core::stream::detail;
pub use flatline_core::stream::source::{
    Activity, LIVE_CAP, LiveSource, Meta, Opening, ReplaySource, ServeConfig, Source, SourceFacts,
    SourceKind, WatchSource,
};
pub use flatline_core::stream::store::{Align, Series, Store};
pub use timeline::Timeline;
pub use view::{
    Action, Frame, ProcessRow, RangeReceipt, marker_lines, process_rows, push_column, rates,
};

/// What the user chose, kept between runs (eframe storage).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Settings {
    /// Channels drawn in the plots.
    pub selected: BTreeSet<String>,
    /// Draw value − baseline instead of the value.
    pub drift: bool,
    /// Training step on the x axis (when the data has steps).
    pub x_steps: bool,
    pub dark: bool,
    /// Show the verdict cards.
    pub cards: bool,
    /// Plot counters as their cumulative count instead of their rate.
    #[serde(default)]
    pub counts: bool,
    /// Channels of a group and unit share one plot, whatever their
    /// magnitudes (the older view). Off: each memory channel has a row of
    /// its own, and others share only within 20× of each other.
    #[serde(default)]
    pub grouped: bool,
    /// Time on the x axis as a UTC wall clock instead of since the start.
    #[serde(default)]
    pub wall_clock: bool,
}

impl Default for Settings {
    fn default() -> Self {
        // What each channel's declaration says (`telemetry/catalog.rs`).
        let selected = flatline_telemetry::catalog::shown().collect();
        Self {
            selected,
            drift: false,
            x_steps: false,
            dark: true,
            cards: true,
            counts: false,
            grouped: false,
            wall_clock: false,
        }
    }
}

/// A screenshot being taken: a few frames to settle, then the capture, then
/// the PNG (the dashboard's and the fleet's windows).
#[derive(Debug)]
pub(crate) struct Capture {
    path: PathBuf,
    settle_frames: u32,
    requested: bool,
    exit_after: bool,
    image: Arc<Mutex<Option<Arc<egui::ColorImage>>>>,
}

impl Capture {
    pub(crate) fn new(path: PathBuf, exit_after: bool) -> Self {
        Self {
            path,
            settle_frames: 3,
            requested: false,
            exit_after,
            image: Arc::default(),
        }
    }

    /// One frame of it: `Some` once the PNG is written (or could not be),
    /// after which the window closes if it was asked to.
    pub(crate) fn step(&mut self, ctx: &egui::Context) -> Option<Result<PathBuf, String>> {
        if let Some(img) = self.image.lock().expect("screenshot lock").take() {
            let result = save_png(&img, &self.path)
                .map(|()| self.path.clone())
                .map_err(|e| format!("{e:#}"));
            if self.exit_after {
                ctx.send_viewport_cmd(egui::ViewportCommand::Close);
            }
            return Some(result);
        }
        if self.settle_frames > 0 {
            self.settle_frames -= 1;
            ctx.request_repaint();
        } else if !self.requested {
            self.requested = true;
            let slot = self.image.clone();
            let repaint = ctx.clone();
            ctx.request_screenshot(move |img| {
                *slot.lock().expect("screenshot lock") = Some(img);
                repaint.request_repaint();
            });
        }
        None
    }
}

/// Outcome of a screenshot, shared with the command line.
pub type ShotResult = Arc<Mutex<Option<Result<PathBuf, String>>>>;

/// A recording the browser lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub path: PathBuf,
    pub bytes: u64,
}

/// The second recording of a comparison (B), drawn beside the source (A).
#[derive(Debug)]
pub struct Other {
    pub meta: Meta,
    pub store: Store,
    /// What the two runs are lined up by on the x axis.
    pub align: Align,
}

/// The banner's tree findings (see [`Dashboard::tree_findings`]).
pub type TreeFindings = (
    std::time::Instant,
    (usize, usize, u64, usize),
    // The tree, how the job ended so far, the sites: as the receipt reads them.
    flatline_analysis::reading::Facts,
    // A replay's whole recording read as its receipt reads it (a live
    // stream's banner reads the live analyses).
    Option<flatline_analysis::reading::Reading>,
);

/// The dashboard's state: where the data comes from, what it holds, what the
/// person chose, and the play position. Views draw it and return
/// [`Action`]s; [`Dashboard::apply`] carries them out after the frame.
pub struct Dashboard {
    /// Asked by the frame loop only ([`Dashboard::tick`], [`Dashboard::show`],
    /// [`Dashboard::apply`]); the views read [`Dashboard::seen`] through
    /// their [`Frame`].
    pub source: Box<dyn Source>,
    /// What this frame shows of the source, read once before it is drawn.
    pub seen: SourceFacts,
    pub store: Store,
    pub settings: Settings,
    /// Play position, for a replay.
    pub timeline: Option<Timeline>,
    /// Where the browser looks for recordings.
    pub recordings_dir: PathBuf,
    pub browser_open: bool,
    /// The browser's list, read when it opens or on "Refresh", never per frame.
    pub listed: Vec<Listed>,
    pub notice: Option<(String, Instant)>,
    capture: Option<Capture>,
    pub shot_result: ShotResult,
    /// Set when the user asked for a screenshot this frame (tests read it).
    pub screenshots_requested: u32,
    /// The window's own resident memory, read once a second: shown apart
    /// from the workload's, so nobody takes one for the other.
    pub window_rss: Option<u64>,
    window_rss_at: Option<Instant>,
    /// A second recording compared with the source, if one is open.
    pub other: Option<Other>,
    /// The browser opens what is clicked as B of a comparison, not as the source.
    pub browsing_for_compare: bool,
    /// Full resolution read from disk where a thinned replay is zoomed in.
    pub detail: Option<detail::Detail>,
    /// A recording being read on a thread of its own, the window already up
    /// (see [`Dashboard::opening`]).
    pub opening: Option<Loading>,
    /// What the views keep between frames (zoom, selection, folds, the
    /// marker being typed): theirs to change.
    pub view: ViewState,
}

/// What the views keep from frame to frame besides the person's
/// [`Settings`]: theirs to read and change, nobody else's but the frame
/// loop's (which reads `pixel_s` for its pacing and resets `zoom` when the
/// data change under it).
#[derive(Debug, Default)]
pub struct ViewState {
    /// The text of the next marker, as typed beside "Mark".
    pub mark_text: String,
    /// The time range the plots showed last frame, when zoomed in (narrower
    /// than the data); the lines are cut to it (and half a view each side).
    pub zoom: Option<[f64; 2]>,
    /// What the keyboard asked for that a later part of the frame does.
    pub keys: KeyState,
    /// Verdict cards clicked open (or, for urgent ones, folded).
    pub cards_toggled: BTreeSet<String>,
    /// Folded lines of the processes panel opened: a group's flat ones by
    /// its head's pid, the exited ones as 0.
    pub processes_unfolded: BTreeSet<u32>,
    /// The process tree's findings for the banner, made at most once a
    /// second (they scan the tree's columns): when, and for which store
    /// (samples, channels, first time's bits).
    pub tree_findings: Option<TreeFindings>,
    /// Channels the banner has called growing, each plotted once when it
    /// first is (a person who then hides one is not overruled).
    pub auto_plotted: std::collections::HashSet<String>,
    /// The growth card last clicked: its process's row and its site's are
    /// marked in the panels on the left.
    pub focus: Option<Focus>,
    /// A part of the run being chosen (shift + drag on a plot), in seconds.
    pub selecting: Option<[f64; 2]>,
    /// The receipt of the part last chosen, shown until closed.
    pub range_receipt: Option<RangeReceipt>,
    /// Seconds of new data that move the plots last drawn by one pixel
    /// along x (infinite when the view does not show the newest data);
    /// `None` when no plot was drawn. The window's waker asks for no frame
    /// sooner (see [`MOST_STILL`]).
    pub pixel_s: Option<f64>,
}

/// What a growth card points at (see [`ViewState::focus`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Focus {
    pub pid: Option<u32>,
    /// Its site's channel (`site20.live`).
    pub site: Option<String>,
}

/// Requests from the keyboard (see `view::keys`) carried to the part of the
/// frame that acts on them.
#[derive(Debug, Default, Clone, Copy)]
pub struct KeyState {
    /// `f`: every plot back to all of its data.
    pub fit: bool,
    /// `m`: the marker field takes the keyboard.
    pub focus_mark: bool,
    /// `?`: the list of keys is open.
    pub help: bool,
}

impl std::fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dashboard")
            .field("source", &self.source.meta().label)
            .field("samples", &self.store.len())
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Dashboard {
    pub fn new(source: Box<dyn Source>, store: Store, settings: Settings) -> Self {
        let timeline = (source.kind() == SourceKind::Replay).then(|| {
            let (start, end) = store.time_range();
            Timeline::new(start, end)
        });
        let mut d = Self {
            seen: SourceFacts::read(&*source),
            source,
            store,
            settings,
            timeline,
            recordings_dir: PathBuf::from("recordings"),
            browser_open: false,
            listed: Vec::new(),
            notice: None,
            capture: None,
            shot_result: Arc::default(),
            screenshots_requested: 0,
            window_rss: None,
            window_rss_at: None,
            other: None,
            browsing_for_compare: false,
            detail: None,
            opening: None,
            view: ViewState::default(),
        };
        d.detail = d.detail_for_source();
        d
    }

    /// A detail reader for the source, if it is a thinned replay.
    fn detail_for_source(&self) -> Option<detail::Detail> {
        let (t0, t1) = self.store.time_range();
        self.source
            .sample_index()
            .map(|ix| detail::Detail::new(ix, t1 - t0))
    }

    /// Draws `store` (a recording, B) beside the source (A) on the same
    /// axis, lined up by `align` where both have that axis (else by time).
    /// The timeline spans both and moves both.
    pub fn compare_with(&mut self, meta: Meta, store: Store, align: Align) {
        let (a0, a1) = self.store.time_range();
        let (b0, b1) = store.time_range();
        let both = self.store.axis(align).is_some() && store.axis(align).is_some();
        let align = if both { align } else { Align::Time };
        self.timeline = Some(Timeline::new(a0.min(b0), a1.max(b1)));
        self.other = Some(Other { meta, store, align });
    }

    /// Opens the recording at `path` as B of a comparison.
    pub fn compare_path(&mut self, path: &Path) -> Result<()> {
        let (src, store) = ReplaySource::open(path)?;
        // By step where both have steps: compare_with falls back to time.
        self.compare_with(src.meta(), store, Align::Step);
        self.browser_open = false;
        self.say(format!("comparing with {}", path.display()));
        Ok(())
    }

    /// Samples of B the views draw: up to the same elapsed time as A's.
    pub fn other_visible_len(&self) -> usize {
        other_visible_len(self.other.as_ref(), self.timeline.as_ref())
    }

    /// What the views are given this frame: all but the source, and to
    /// change only what is theirs.
    pub fn frame(&mut self) -> Frame<'_> {
        Frame {
            store: &self.store,
            seen: &self.seen,
            other: self.other.as_ref(),
            detail: self.detail.as_ref(),
            listed: &self.listed,
            notice: self.notice.as_ref(),
            window_rss: self.window_rss,
            recordings_dir: &self.recordings_dir,
            browser_open: self.browser_open,
            browsing_for_compare: self.browsing_for_compare,
            opening: self.opening.as_ref(),
            capturing: self.capture.is_some(),
            settings: &mut self.settings,
            timeline: self.timeline.as_mut(),
            view: &mut self.view,
        }
    }

    /// A window that reads the recording at `path` on a thread of its own:
    /// it is up and drawn at once, saying what it opens, and shows the
    /// recording when it is read (a week takes seconds). The caller checks
    /// the file's header first, so a file that is not a recording is still
    /// refused before any window opens.
    pub fn opening(path: PathBuf, settings: Settings) -> Self {
        let store = Store::new(Default::default(), 1024);
        let mut d = Self::new(Box::new(Opening { path: path.clone() }), store, settings);
        d.opening = Some(Loading {
            bytes: std::fs::metadata(&path).map_or(0, |m| m.len()),
            path,
            started: Instant::now(),
            rx: None,
        });
        d
    }

    /// Starts the read of [`Dashboard::opening`] (once there is a context
    /// to wake when it is done) and installs its result when it is.
    fn poll_opening(&mut self, ctx: &egui::Context) {
        let Some(l) = &mut self.opening else {
            return;
        };
        let Some(rx) = &l.rx else {
            let (tx, rx) = std::sync::mpsc::channel();
            let (path, ctx) = (l.path.clone(), ctx.clone());
            let spawned = std::thread::Builder::new()
                .name("flatline-open".into())
                .spawn(move || {
                    let _ = tx.send(ReplaySource::open(&path));
                    ctx.request_repaint();
                });
            match spawned {
                Ok(_) => l.rx = Some(rx),
                Err(e) => {
                    let path = l.path.clone();
                    self.opening = None;
                    self.say(format!("cannot read {}: {e}", path.display()));
                }
            }
            return;
        };
        let read = match rx.try_recv() {
            Ok(read) => read,
            Err(std::sync::mpsc::TryRecvError::Empty) => return,
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                Err(anyhow::anyhow!("the reading thread stopped"))
            }
        };
        let (path, took) = (l.path.clone(), l.started.elapsed());
        self.opening = None;
        match read {
            Ok((src, store)) => {
                self.install(src, store);
                self.say(format!(
                    "opened {} in {:.1} s",
                    path.display(),
                    took.as_secs_f64()
                ));
            }
            Err(e) => self.say(format!("{e:#}")),
        }
    }

    /// Opens a recording in place of the current source.
    pub fn open_recording(&mut self, path: &Path) -> Result<()> {
        let (src, store) = ReplaySource::open(path)?;
        self.install(src, store);
        self.say(format!("opened {}", path.display()));
        Ok(())
    }

    /// Shows a recording read in place of the current source.
    fn install(&mut self, src: ReplaySource, store: Store) {
        let (start, end) = store.time_range();
        self.other = None;
        self.source = Box::new(src);
        self.store = store;
        self.detail = self.detail_for_source();
        self.view.zoom = None;
        self.timeline = Some(Timeline::new(start, end));
        self.browser_open = false;
    }

    /// Reads the browser's folder again.
    pub fn refresh_recordings(&mut self) {
        let mut listed: Vec<Listed> = std::fs::read_dir(&self.recordings_dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.extension()
                    .is_some_and(|e| e == flatline_telemetry::recording::EXTENSION)
            })
            .map(|path| Listed {
                bytes: std::fs::metadata(&path).map_or(0, |m| m.len()),
                path,
            })
            .collect();
        listed.sort_by(|a, b| a.path.cmp(&b.path));
        self.listed = listed;
    }

    /// Carries out what the views asked for in the last frame (`ctx` is
    /// woken when a read it started ends).
    pub fn apply(&mut self, actions: Vec<Action>, ctx: &egui::Context) {
        for action in actions {
            match action {
                Action::SetWorkload(on) => self.source.set_workload_running(on),
                Action::StartRecording => {
                    let msg = match flatline_core::commands::soak::default_path("live")
                        .and_then(|p| self.source.start_recording(&p).map(|()| p))
                    {
                        Ok(p) => format!("recording to {}", p.display()),
                        Err(e) => format!("cannot record: {e:#}"),
                    };
                    self.say(msg);
                }
                Action::StopRecording => match self.source.stop_recording() {
                    Ok(Some(p)) => self.say(format!("recording saved to {}", p.display())),
                    Ok(None) => {}
                    Err(e) => self.say(format!("recording failed: {e:#}")),
                },
                Action::Screenshot => {
                    let name = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
                        .to_string()
                        .replace(':', "-");
                    self.screenshot_to(PathBuf::from(format!("flatline-{name}.png")), false);
                }
                Action::ToggleBrowser | Action::BrowseToCompare => {
                    self.browsing_for_compare = action == Action::BrowseToCompare;
                    self.browser_open = !self.browser_open;
                    if self.browser_open {
                        self.refresh_recordings();
                    }
                }
                Action::RefreshRecordings => self.refresh_recordings(),
                Action::Mark(text) => match self.source.mark(&text) {
                    Ok(()) => {
                        self.say(format!("marked: {text}"));
                        self.view.mark_text.clear();
                    }
                    Err(e) => self.say(format!("cannot mark: {e:#}")),
                },
                Action::Open(path) => {
                    let opened = if self.browsing_for_compare {
                        self.compare_path(&path)
                    } else {
                        self.open_recording(&path)
                    };
                    if let Err(e) = opened {
                        self.say(format!("cannot open {}: {e:#}", path.display()));
                    }
                }
                Action::StopComparing => {
                    self.other = None;
                    let (start, end) = self.store.time_range();
                    self.timeline = Some(Timeline::new(start, end));
                }
                Action::CloseBrowser => self.browser_open = false,
                Action::Detail {
                    view,
                    held,
                    columns,
                } => {
                    if let Some(dt) = &mut self.detail {
                        let ctx = ctx.clone();
                        dt.want(view, held, columns, move || ctx.request_repaint());
                    }
                }
            }
        }
    }

    fn say(&mut self, msg: String) {
        self.notice = Some((msg, Instant::now()));
    }

    /// Asks for a screenshot of the full view into `path`; with `exit_after`
    /// the window closes once it is written.
    pub fn screenshot_to(&mut self, path: PathBuf, exit_after: bool) {
        self.screenshots_requested += 1;
        self.capture = Some(Capture::new(path, exit_after));
    }

    /// True while a screenshot is being prepared (hover effects are off).
    pub fn capturing(&self) -> bool {
        self.capture.is_some()
    }

    /// Samples the views draw: all of them live, up to the playhead in replay.
    pub fn visible_len(&self) -> usize {
        visible_len(&self.store, self.timeline.as_ref())
    }

    /// Moves new data from the source into the store (and, while recording,
    /// into the file). The window calls this from `App::logic`, which eframe
    /// runs before every frame and also while the window is minimized or
    /// covered and nothing is drawn: a live recording must not stall because
    /// nobody is looking. Whoever drives [`Dashboard::show`] without eframe
    /// (tests, `bench ui`) calls this before it.
    pub fn tick(&mut self) {
        self.source.poll(&mut self.store);
        if self
            .window_rss_at
            .is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(1))
        {
            self.window_rss = flatline_telemetry::procfs::own_rss();
            self.window_rss_at = Some(Instant::now());
        }
        if let Some(tl) = &mut self.timeline {
            if self.source.growing() {
                let (start, end) = self.store.time_range();
                tl.follow(start, end);
            }
            tl.tick();
        }
    }

    /// Whether the dashboard needs more frames now, with no input and no new
    /// data: a replay playing, analyses due on the data shown, a screenshot
    /// being taken.
    pub fn busy(&self) -> bool {
        self.timeline.as_ref().is_some_and(|t| t.playing)
            || self.store.analyses_due()
            || self.other.as_ref().is_some_and(|o| o.store.analyses_due())
            || self.capture.is_some()
    }

    /// Whether data shown has not been analysed yet (its analysis comes
    /// within a second): a frame then, even with nothing new.
    pub fn stale(&self) -> bool {
        self.store.analyses_pending()
            || self
                .other
                .as_ref()
                .is_some_and(|o| o.store.analyses_pending())
    }

    /// Draws the whole dashboard into `ui` (one frame); see [`Dashboard::tick`]
    /// for where the data comes from.
    pub fn show(&mut self, ui: &mut egui::Ui) {
        let ctx = ui.ctx().clone();
        ctx.set_theme(if self.settings.dark {
            egui::Theme::Dark
        } else {
            egui::Theme::Light
        });
        // A screenshot waits for every analysis; a normal frame spends about
        // 2 ms on them, so frames stay short when many go stale at once.
        let budget = if self.capture.is_some() {
            None
        } else {
            Some(std::time::Duration::from_millis(2))
        };
        self.poll_opening(&ctx);
        self.store.begin_frame(budget);
        if let Some(o) = &mut self.other {
            o.store.begin_frame(budget);
        }
        self.run_capture(&ctx);
        self.seen = SourceFacts::read(&*self.source);
        if let Some(dt) = &mut self.detail {
            dt.poll();
        }
        let actions = view::draw(&mut self.frame(), ui);
        self.apply(actions, &ctx);
    }

    fn run_capture(&mut self, ctx: &egui::Context) {
        let Some(result) = self.capture.as_mut().and_then(|c| c.step(ctx)) else {
            return;
        };
        self.capture = None;
        match &result {
            Ok(p) => self.say(format!("screenshot saved to {}", p.display())),
            Err(e) => self.say(format!("screenshot failed: {e}")),
        }
        *self.shot_result.lock().expect("result lock") = Some(result);
    }
}

/// Samples of `store` drawn: all of them live, up to the playhead in replay.
fn visible_len(store: &Store, timeline: Option<&Timeline>) -> usize {
    match timeline {
        Some(tl) => store.len_until(tl.playhead_s),
        None => store.len(),
    }
}

/// Samples of B drawn: up to the same elapsed time as A's.
fn other_visible_len(other: Option<&Other>, timeline: Option<&Timeline>) -> usize {
    match (other, timeline) {
        (Some(o), Some(tl)) => o.store.len_until(tl.playhead_s),
        (Some(o), None) => o.store.len(),
        (None, _) => 0,
    }
}

/// Writes an egui image as PNG.
pub fn save_png(img: &egui::ColorImage, path: &Path) -> Result<()> {
    let [w, h] = img.size;
    let bytes: Vec<u8> = img.pixels.iter().flat_map(|c| c.to_array()).collect();
    image::save_buffer(
        path,
        &bytes,
        w as u32,
        h as u32,
        image::ExtendedColorType::Rgba8,
    )
    .with_context(|| format!("writing {}", path.display()))
}

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
/// A recording being read for [`Dashboard::opening`].
#[derive(Debug)]
pub struct Loading {
    pub path: PathBuf,
    /// The file's size when the read began.
    pub bytes: u64,
    pub started: Instant,
    rx: Option<std::sync::mpsc::Receiver<Result<(ReplaySource, Store)>>>,
}

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
        let pixel = self.dash.view.pixel_s.unwrap_or(0.0);
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
    Ok(())
}

/// The eframe renderer for `--renderer`; wgpu only in a build with the
/// `wgpu` feature (see the feature's note in dashboard/Cargo.toml).
fn native_renderer(which: Renderer) -> Result<eframe::Renderer> {
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
    let interrupted = flatline_core::commands::soak::interrupt_flag()?;
    let flag = interrupted.clone();
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title(title)
            .with_inner_size(size)
            .with_icon(icon::icon()),
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
