//! The desktop dashboard: eframe window, egui_plot plots.
//!
//! State ([`Dashboard`]: source, store, settings) is kept apart from drawing
//! (`view`). Drawing is given a [`Frame`], which holds no source: it reads
//! the [`Store`] and what the frame loop read of the source this frame
//! ([`Dashboard::seen`]). The whole UI is drawn into one `egui::Ui`, so the
//! tests drive exactly the code the window runs (`egui_kittest`).

//!
//! The rooms: [`state`] (the [`Dashboard`] and what the views keep),
//! [`native`] (the window: renderer, pacing, waker, [`run_window`]),
//! [`capture`] (screenshots), `view` (the drawing), [`fleet`] (the fleet's
//! window), `timeline` (the play position).

mod capture;
pub mod fleet;
pub mod icon;
mod native;
mod shared;
mod state;
mod timeline;
mod view;

pub use capture::{ShotResult, save_png};
pub use flatline_cli::Closed;
pub use flatline_stream::source::{
    Activity, LIVE_CAP, LiveSource, Meta, Opening, ReplaySource, ServeConfig, Source, SourceFacts,
    SourceKind, WatchSource,
};
pub use flatline_stream::store::{Align, Series, Store};
pub use native::{
    App, DEFAULT_RENDERER, FRAMES, MAX_DEFAULT_FPS, MAX_LIVE_FPS, MOST_STILL, Renderer,
    WindowAsked, WindowOptions, check_display, run_window, settings_key,
};
pub use shared::{
    Findings, Focus, KeyState, Listed, Loading, Other, PlotsState, ProcessesState, RangeReceipt,
    RangeRow, Settings, VerdictsState, ViewState,
};
pub use state::Dashboard;
pub use timeline::Timeline;
pub use view::{
    Action, Frame, ProcessRow, Setting, marker_lines, process_rows, push_column, rates,
};
