//! What a view is given ([`Frame`]) and what it hands back ([`Action`]).

use std::path::PathBuf;

use flatline_stream::detail::Detail;
use flatline_stream::source::SourceFacts;
use flatline_stream::store::Store;

use crate::ui::shared::{Findings, Listed, Loading, Other, Settings, ViewState};
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
}

/// What one frame's views are given ([`super::Dashboard::frame`]): to read,
/// the data and what the frame loop read of the source; to change, what is
/// theirs. Everything else they want is an [`Action`].
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
    /// The person's choices: theirs to change.
    pub settings: &'a mut Settings,
    /// The play position, for a replay: theirs to move.
    pub timeline: Option<&'a mut Timeline>,
    /// What the views keep between frames: theirs.
    pub view: &'a mut ViewState,
    /// The tree, deaths and sites beside the analyses, made by the frame
    /// loop before this frame is drawn: read-only.
    pub findings: &'a Findings,
}

impl Frame<'_> {
    /// True while a screenshot is being prepared.
    pub fn capturing(&self) -> bool {
        self.capturing
    }

    /// Samples the views draw: all of them live, up to the playhead in replay.
    pub fn visible_len(&self) -> usize {
        crate::ui::shared::visible_len(self.store, self.timeline.as_deref())
    }

    /// Samples of B the views draw: up to the same elapsed time as A's.
    pub fn other_visible_len(&self) -> usize {
        crate::ui::shared::other_visible_len(self.other, self.timeline.as_deref())
    }
}
