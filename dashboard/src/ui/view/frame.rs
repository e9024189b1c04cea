//! What a view is given ([`Frame`]) and what it hands back ([`Action`]).

use std::path::PathBuf;

use flatline_stream::detail::Detail;
use flatline_stream::source::SourceFacts;
use flatline_stream::store::Store;

use crate::ui::shared::{Findings, Focus, Listed, Loading, Other, RangeReceipt, Settings};
use crate::ui::timeline::Timeline;

/// What a click asked for that is more than a change of view.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Pause or resume the source's own workload.
    SetWorkload(bool),
    StartRecording,
    StopRecording,
    Screenshot,
    /// Open or close the recordings browser (opening reads its folder).
    ToggleBrowser,
    /// Add a marker with this text to the live or watched run.
    Mark(String),
    RefreshRecordings,
    /// Open this recording (as B, when the browser was opened to compare).
    Open(PathBuf),
    /// Open the browser to choose a recording to compare with.
    BrowseToCompare,
    StopComparing,
    /// Close the recordings browser.
    CloseBrowser,
    /// Read the samples of this time range at full resolution from the
    /// file, where the store holds fewer than `columns` (`held`) of them.
    Detail {
        view: [f64; 2],
        held: usize,
        columns: usize,
    },
    /// Plot these channels (a growth card, the banner, a flame frame, a
    /// checkbox ticked).
    Plot(Vec<String>),
    /// Stop plotting this channel (its checkbox cleared).
    Unplot(String),
    /// Change one of the person's settings.
    Set(Setting, bool),
    /// Mark a growth's process and site in the panels on the left.
    Focus(Focus),
    /// Analyse this part of the run (seconds on the plots' clock) as
    /// `report --from/--to` would: its receipt opens.
    ChoosePart {
        from: f64,
        to: f64,
    },
    /// Close the part's receipt.
    ClosePart,
    /// Move the playhead to this second (held within the recording).
    Seek(f64),
    Play,
    Pause,
    /// Replay at this many times the recorded speed.
    Speed(f64),
}

/// One of the person's on/off choices ([`Settings`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    Drift,
    XSteps,
    Counts,
    Grouped,
    Cards,
    Dark,
    WallClock,
}

impl Setting {
    /// Its value in `s`.
    pub fn of(self, s: &Settings) -> bool {
        match self {
            Setting::Drift => s.drift,
            Setting::XSteps => s.x_steps,
            Setting::Counts => s.counts,
            Setting::Grouped => s.grouped,
            Setting::Cards => s.cards,
            Setting::Dark => s.dark,
            Setting::WallClock => s.wall_clock,
        }
    }

    /// Sets its value in `s`.
    pub fn set(self, s: &mut Settings, on: bool) {
        *match self {
            Setting::Drift => &mut s.drift,
            Setting::XSteps => &mut s.x_steps,
            Setting::Counts => &mut s.counts,
            Setting::Grouped => &mut s.grouped,
            Setting::Cards => &mut s.cards,
            Setting::Dark => &mut s.dark,
            Setting::WallClock => &mut s.wall_clock,
        } = on;
    }
}

/// What one frame's views are given to read ([`super::Dashboard::frame`]):
/// the data, what the frame loop read of the source and made of it, the
/// person's settings and the play position. A view changes only its own
/// part of the [`crate::ui::ViewState`], handed to it beside the frame;
/// everything else it wants is an [`Action`], carried out after the frame.
#[derive(Debug)]
pub struct Frame<'a> {
    pub store: &'a Store,
    /// What this frame shows of the source, read once before it is drawn.
    pub seen: &'a SourceFacts,
    /// B of a comparison.
    pub other: Option<&'a Other>,
    /// Full resolution read from disk where a thinned replay is zoomed in;
    /// the frame loop polls it, a view asks for more by [`Action::Detail`].
    pub detail: Option<&'a Detail>,
    pub listed: &'a [Listed],
    pub notice: Option<&'a (String, std::time::Instant)>,
    pub window_rss: Option<u64>,
    pub recordings_dir: &'a std::path::Path,
    pub browser_open: bool,
    pub browsing_for_compare: bool,
    pub opening: Option<&'a Loading>,
    /// A screenshot is being taken (hover effects are off).
    pub capturing: bool,
    /// The person's choices ([`Action::Set`], [`Action::Plot`] change them).
    pub settings: &'a Settings,
    /// The play position, for a replay ([`Action::Seek`] moves it).
    pub timeline: Option<&'a Timeline>,
    /// The growth card last clicked: its process's row and its site's are
    /// marked in the panels on the left ([`Action::Focus`]).
    pub focus: Option<&'a Focus>,
    /// The receipt of the part last chosen on a plot, shown until closed
    /// ([`Action::ChoosePart`], [`Action::ClosePart`]).
    pub part: Option<&'a RangeReceipt>,
    /// The time range the plots showed last frame, when zoomed in.
    pub zoom: Option<[f64; 2]>,
    /// The tree, deaths and sites beside the analyses, made by the frame
    /// loop before this frame is drawn.
    pub findings: &'a Findings,
}

impl Frame<'_> {
    /// True while a screenshot is being prepared.
    pub fn capturing(&self) -> bool {
        self.capturing
    }

    /// Samples the views draw: all of them live, up to the playhead in replay.
    pub fn visible_len(&self) -> usize {
        crate::ui::shared::visible_len(self.store, self.timeline)
    }

    /// Samples of B the views draw: up to the same elapsed time as A's.
    pub fn other_visible_len(&self) -> usize {
        crate::ui::shared::other_visible_len(self.other, self.timeline)
    }
}
