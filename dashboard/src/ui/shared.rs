//! What the dashboard and its views share: the person's [`Settings`] (kept
//! between runs), what the views keep from frame to frame ([`ViewState`]),
//! the browser's list, B of a comparison, a recording being opened, and how
//! many samples a frame shows. The views read it through their `Frame`; the
//! dashboard ([`super::state`]) owns it.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use flatline_stream::source::{Meta, ReplaySource};
use flatline_stream::store::{Align, Store};

use super::timeline::Timeline;

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
        // What each channel's declaration says (`catalog/src/lib.rs`).
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
    /// B's findings and answer, made by the frame loop as A's are.
    pub findings: Findings,
}

/// The facts beside the analyses (the process tree, how the job ended so
/// far, the sites), as the receipt reads them, made by the frame loop
/// before any view draws ([`Findings::refresh`]) and read by the banner,
/// the cards and the processes panel alike: no view makes or keeps them.
#[derive(Debug, Default)]
pub struct Findings {
    /// When they were made, and of which store: its samples, channels,
    /// first time's bits and channels not analysed yet.
    made: Option<(Instant, FindingsKey)>,
    /// The tree, deaths and sites; `None` before anything is analysed.
    pub facts: Option<flatline_analysis::reading::Facts>,
    /// The one answer, of a replay's whole recording read as its receipt
    /// reads it, else of the live analyses; `None` before anything is
    /// analysed.
    pub answer: Option<flatline_analysis::summary::Answer>,
}

/// Which store, how much of it and how much of it is analysed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FindingsKey {
    samples: usize,
    channels: usize,
    first_t: u64,
    unanalysed: usize,
}

impl Findings {
    /// Makes them anew from `store` when they are stale: at most once a
    /// second, and only when it grew. A recording opened in its place is a
    /// new key, and made at once, and so is each key with more or fewer
    /// channels analysed (a replay's analyses arrive over its first frames,
    /// and its length never changes after: findings made before them would
    /// stand for good, and the cards would lay out an answer older than
    /// the analyses beside them). `replay`: a replay whose every channel is analysed
    /// is read whole, as its receipt reads it, once.
    pub fn refresh(&mut self, store: &Store, replay: bool) {
        if (0..store.schema().len()).all(|i| store.analysis(i).is_none()) {
            return;
        }
        let key = FindingsKey {
            samples: store.len(),
            channels: store.schema().len(),
            first_t: store.time_range().0.to_bits(),
            unanalysed: store.unanalysed(),
        };
        let stale = self.made.as_ref().is_none_or(|(at, k)| {
            *k != key
                && (k.channels != key.channels
                    || k.first_t != key.first_t
                    || k.unanalysed != key.unanalysed
                    || at.elapsed().as_secs_f64() >= 1.0)
        });
        if !stale {
            return;
        }
        // A replay read whole as its receipt reads it, once every channel
        // is analysed; else the live analyses.
        let (facts, answer) = match replay && key.unanalysed == 0 {
            true => {
                let run = store.read_whole();
                (run.facts, run.answer)
            }
            false => store.answer(),
        };
        self.made = Some((Instant::now(), key));
        self.facts = Some(facts);
        self.answer = Some(answer);
    }

    /// The process tree's summary, where one was made.
    pub fn tree(&self) -> Option<&flatline_analysis::tree::TreeSummary> {
        self.facts.as_ref()?.tree.as_ref()
    }
}

/// What the views keep from frame to frame besides the person's
/// [`Settings`], each part its own view's: the frame loop hands each view
/// `&mut` to its part alone ([`super::view::draw`]), and reads `plots`'
/// `pixel_s` for its pacing and resets `plots.zoom` when the data change
/// under it. What one view decides for others (a focus, a part's receipt,
/// a setting, the plotted channels) is an [`super::view::Action`].
#[derive(Debug, Default)]
pub struct ViewState {
    /// The text of the next marker, as typed beside "Mark" (the top bar's;
    /// the frame loop makes the marker).
    pub mark_text: String,
    /// What the keyboard asked for this frame (the keys' own; the views
    /// drawn after them read it).
    pub keys: KeyState,
    pub verdicts: VerdictsState,
    pub processes: ProcessesState,
    pub plots: PlotsState,
}

/// The cards' own.
#[derive(Debug, Default)]
pub struct VerdictsState {
    /// Verdict cards clicked open (or, for urgent ones, folded).
    pub cards_toggled: BTreeSet<String>,
}

/// The processes panel's own.
#[derive(Debug, Default)]
pub struct ProcessesState {
    /// Folded lines opened: a group's flat ones by its head's pid, the
    /// exited ones as 0.
    pub unfolded: BTreeSet<u32>,
}

/// The plots' own.
#[derive(Debug, Default)]
pub struct PlotsState {
    /// The time range the plots showed last frame, when zoomed in (narrower
    /// than the data); the lines are cut to it (and half a view each side).
    pub zoom: Option<[f64; 2]>,
    /// Seconds of new data that move the plots last drawn by one pixel
    /// along x (infinite when the view does not show the newest data);
    /// `None` when no plot was drawn. The window's waker asks for no frame
    /// sooner (see [`super::MOST_STILL`]).
    pub pixel_s: Option<f64>,
    /// A part of the run being chosen (shift + drag on a plot), in seconds.
    pub selecting: Option<[f64; 2]>,
    /// The tallest row (title and plot) the last frame drew, in points:
    /// where rows scroll, the view holds as many whole ones as fit.
    pub row_h: Option<f32>,
}

/// What a growth card points at (the dashboard's `focus`, set by
/// [`super::view::Action::Focus`]).
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

/// Samples of `store` drawn: all of them live, up to the playhead in replay.
pub(crate) fn visible_len(store: &Store, timeline: Option<&Timeline>) -> usize {
    match timeline {
        Some(tl) => store.len_until(tl.playhead_s),
        None => store.len(),
    }
}

/// Samples of B drawn: up to the same elapsed time as A's.
pub(crate) fn other_visible_len(other: Option<&Other>, timeline: Option<&Timeline>) -> usize {
    match (other, timeline) {
        (Some(o), Some(tl)) => o.store.len_until(tl.playhead_s),
        (Some(o), None) => o.store.len(),
        (None, _) => 0,
    }
}

/// A recording being read for [`Dashboard::opening`].
#[derive(Debug)]
pub struct Loading {
    pub path: PathBuf,
    /// The file's size when the read began.
    pub bytes: u64,
    pub started: Instant,
    pub(super) rx: Option<std::sync::mpsc::Receiver<Result<(ReplaySource, Store)>>>,
}

/// The receipt of a part of the run.
#[derive(Debug, Clone)]
pub struct RangeReceipt {
    /// Seconds on the plots' clock.
    pub from: f64,
    pub to: f64,
    pub headline: String,
    /// The plotted channels, as the part's receipt says them.
    pub rows: Vec<RangeRow>,
    /// The same as a Markdown table, to paste into an issue.
    pub markdown: String,
}

/// A channel of a part's receipt, as a person reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeRow {
    pub channel: String,
    /// "linear, 1.2 MiB/min" (the receipt's words).
    pub verdict: String,
    pub drift: String,
    /// "+1.2 KiB/s".
    pub slope: String,
}
