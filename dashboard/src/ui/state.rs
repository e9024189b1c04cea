//! The dashboard's state: where the data come from ([`Dashboard::source`]),
//! what they hold (the [`Store`]), what the person chose ([`Settings`],
//! kept between runs), the play position, and what the views keep from
//! frame to frame ([`ViewState`]). The views draw it and return actions;
//! [`Dashboard::apply`] carries them out after the frame.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use eframe::egui;

use super::timeline::Timeline;
use super::view::{Action, Frame};
use flatline_stream::detail;
use flatline_stream::source::{Meta, Opening, ReplaySource, Source, SourceFacts, SourceKind};
use flatline_stream::store::{Align, Store};

use super::capture::{Capture, ShotResult};

use super::shared::{
    Findings, Focus, Listed, Loading, Other, RangeReceipt, Settings, ViewState, other_visible_len,
    visible_len,
};

/// How many of the growing channels, most urgent first, are plotted by
/// themselves ([`Dashboard::show`]).
const AUTO_PLOTTED: usize = 4;

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
    /// What the views keep between frames (zoom, folds, the marker being
    /// typed), each part its own view's to change.
    pub view: ViewState,
    /// The growth card last clicked ([`Action::Focus`]): its process's row
    /// and its site's are marked in the panels on the left.
    pub focus: Option<Focus>,
    /// The receipt of the part last chosen on a plot, made by the frame
    /// loop ([`Action::ChoosePart`]) and shown until closed.
    pub part: Option<RangeReceipt>,
    /// Channels the answer has called growing, each plotted once when it
    /// first is (a person who then hides one is not overruled).
    auto_plotted: std::collections::HashSet<String>,
    /// The tree, deaths and sites beside the analyses, made before each
    /// frame is drawn (the views only read them).
    pub findings: Findings,
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
            focus: None,
            part: None,
            auto_plotted: Default::default(),
            findings: Findings::default(),
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
        self.other = Some(Other {
            meta,
            store,
            align,
            findings: Findings::default(),
        });
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

    /// What the views are given to read this frame: all but the source and
    /// their own state.
    pub fn frame(&self) -> Frame<'_> {
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
            settings: &self.settings,
            timeline: self.timeline.as_ref(),
            focus: self.focus.as_ref(),
            part: self.part.as_ref(),
            zoom: self.view.plots.zoom,
            findings: &self.findings,
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
        // The last recording's tree and deaths are not this one's.
        self.findings = Findings::default();
        self.detail = self.detail_for_source();
        self.view.plots.zoom = None;
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
                    let msg = match flatline_stream::session::default_path("live")
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
                Action::Plot(names) => self.settings.selected.extend(names),
                Action::Unplot(name) => {
                    self.settings.selected.remove(&name);
                }
                Action::Set(setting, on) => setting.set(&mut self.settings, on),
                Action::Focus(f) => self.focus = Some(f),
                Action::ChoosePart { from, to } => {
                    self.part = Some(super::view::selection::receipt(
                        &self.store,
                        &self.settings.selected,
                        from,
                        to,
                    ));
                }
                Action::ClosePart => self.part = None,
                Action::Seek(t) => {
                    if let Some(tl) = &mut self.timeline {
                        tl.seek(t);
                    }
                }
                Action::Play => {
                    if let Some(tl) = &mut self.timeline {
                        tl.play();
                    }
                }
                Action::Pause => {
                    if let Some(tl) = &mut self.timeline {
                        tl.pause();
                    }
                }
                Action::Speed(x) => {
                    if let Some(tl) = &mut self.timeline {
                        tl.speed = x;
                    }
                }
            }
            // What changed is drawn in the next frame.
            ctx.request_repaint();
        }
    }

    /// What grows is plotted: each of the most urgent few growths once (its
    /// lead channel, not its process's RSS, PSS and USS and the sums that
    /// repeat it) beside the site whose code holds most of it; once each,
    /// once every channel is analysed (a replay's analyses arrive over its
    /// first frames, as fast as the machine allows: a channel urgent only
    /// among the first few analysed is not what grows most). Done before
    /// the frame is drawn, so its plots show them.
    fn plot_new_growths(&mut self) {
        let Some(answer) = self.findings.answer.as_ref() else {
            return;
        };
        if self.store.unanalysed() != 0 {
            return;
        }
        let plotted = answer.growths.iter().take(AUTO_PLOTTED).flat_map(|g| {
            std::iter::once(g.channel.clone()).chain(g.sites.first().map(|s| s.channel.clone()))
        });
        for n in plotted.take(AUTO_PLOTTED) {
            if self.auto_plotted.insert(n.clone()) {
                self.settings.selected.insert(n);
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
        // Before anything is drawn, so every view of this frame reads the
        // same findings (the processes panel, drawn before the banner, once
        // showed the previous frame's; compare mode never made them).
        self.findings.refresh(&self.store, self.timeline.is_some());
        if let Some(o) = &mut self.other {
            // B is a recording, replayed whole.
            o.findings.refresh(&o.store, true);
        }
        // The answer's growths, plotted by the banner's reading of them
        // (none before there is data, nor in compare mode).
        if self.other.is_none() && self.opening.is_none() {
            self.plot_new_growths();
        }
        // Each view gets `&mut` to its own part of the view state alone.
        // (The frame reads the plots' last zoom before their state is lent.)
        let zoom = self.view.plots.zoom;
        let mut view = std::mem::take(&mut self.view);
        let frame = Frame {
            zoom,
            ..self.frame()
        };
        let actions = super::view::draw(&frame, &mut view, ui);
        self.view = view;
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
