//! Drawing. A view is given a [`Frame`] to read (the store, what the
//! frame loop read of the source and made of it, the person's settings,
//! the play position) and `&mut` to its own part of the [`ViewState`]
//! alone; everything else it wants (a setting changed, a channel plotted,
//! the playhead moved, a part's receipt) it returns as an [`Action`], which
//! the dashboard carries out after the frame: no view changes another's
//! state, starts a recording, writes a file, reads a folder or asks the
//! source anything (the source is not in a [`Frame`]).

use eframe::egui::{self};

use crate::ui::shared::ViewState;

mod axes;
mod bars;
mod browser;
mod channels;
mod compare;
mod flame;
mod frame;
mod kit;
mod markers;
mod plots;
pub(crate) mod selection;
mod series;
mod tree;
mod verdicts;

use bars::{caption, keys, range_receipt, timeline, top_bar};

use browser::browser;
use channels::channels;
use plots::plots;
use verdicts::{banner, cards};

pub use channels::{ProcessRow, process_rows};
pub use frame::{Action, Frame, Setting};
pub use markers::marker_lines;
pub use series::{push_column, rates};

/// Draws one frame and returns what the clicks in it asked for; each
/// view changes only its own part of `view`.
pub fn draw(d: &Frame<'_>, view: &mut ViewState, ui: &mut egui::Ui) -> Vec<Action> {
    let mut actions = Vec::new();
    // Set by the plots, if drawn.
    view.plots.pixel_s = None;
    keys(d, &mut view.keys, ui, &mut actions);
    let visible = d.visible_len();
    top_bar(d, &mut view.mark_text, &mut view.keys, ui, &mut actions);
    caption(d, ui, visible);
    if d.timeline.is_some() {
        timeline(d, ui, &mut actions);
    }
    channels(d, &mut view.processes, ui, visible, &mut actions);
    let keys = view.keys;
    if d.other.is_some() {
        if d.settings.cards {
            compare::cards(d, ui);
        }
        egui::CentralPanel::default().show(ui, |ui| compare::plots(d, ui, visible));
    } else {
        // No verdict, not even "nothing to judge", before there is data.
        if d.opening.is_none() {
            // The one answer, made by the frame loop ([`Findings`]), read
            // by the cards and the banner.
            if d.settings.cards {
                cards(d, &mut view.verdicts, ui, &mut actions);
            }
            banner(d, ui, &mut actions);
        }
        flame::panel(d, ui, visible, &mut actions);
        egui::CentralPanel::default().show(ui, |ui| {
            plots(d, &keys, &mut view.plots, ui, visible, &mut actions)
        });
    }
    if d.browser_open {
        browser(d, ui, &mut actions);
    }
    range_receipt(d, ui, &mut actions);
    if let Some((msg, at)) = &d.notice
        && at.elapsed().as_secs() < 6
        && !d.capturing()
    {
        let msg = msg.clone();
        egui::Area::new(egui::Id::unique("flatline-notice"))
            .anchor(egui::Align2::CENTER_BOTTOM, [0.0, -60.0])
            .show(ui.ctx(), |ui| {
                egui::Frame::popup(ui.style()).show(ui, |ui| ui.label(msg));
            });
    }
    actions
}

#[cfg(test)]
mod tests {
    use flatline_analysis::{LiveAnalysis, Severity, Verdict};
    use flatline_telemetry::{ChannelSpec, Group, Unit};

    use super::channels::{FLAT, GROWS, NEUTRAL, verdict_color};
    use super::kit::{Wall, pixel_seconds};
    use super::tree::carried;
    use super::*;

    /// Growth takes its severity's colour; the same trend downwards is not
    /// an alarm.
    #[test]
    fn shrinking_memory_is_not_coloured_as_a_leak() {
        let rss = ChannelSpec::new("mem.rss", Unit::Bytes, Group::Memory);
        let mut live = LiveAnalysis::new(&[rss.clone(), rss.clone(), rss]);
        for k in 0..600 {
            let t = k as f64 * 0.1;
            let wobble = [0.0, 4096.0, -4096.0, 0.0][k % 4];
            let sign = [1.0, -1.0, 0.0];
            let v = |i: usize| 5e8 + wobble + sign[i] * t * 1048576.0;
            live.push(t, v, f64::NAN, f64::NAN);
        }
        live.refresh(None);
        let (up, down) = (live.analysis(0).unwrap(), live.analysis(1).unwrap());
        assert_eq!(
            (up.verdict, down.verdict),
            (Verdict::Linear, Verdict::Linear)
        );
        // No limit known: growth's own colour, not an alarm's.
        assert_eq!(up.severity, Some(Severity::Info));
        assert_eq!(verdict_color(up), GROWS);
        assert_eq!(verdict_color(down), NEUTRAL);
        let flat = live.analysis(2).unwrap();
        assert_eq!((flat.verdict, verdict_color(flat)), (Verdict::Flat, FLAT));
    }

    /// New data waits for its frame until it would move the plots by a
    /// pixel: ten minutes on 1,000 pixels is 0.6 s a pixel; a view zoomed
    /// into the past waits for nothing it could show; on the step axis the
    /// data's own time per step converts.
    #[test]
    fn new_data_waits_until_it_moves_a_pixel() {
        let times: Vec<f64> = (0..=6000).map(|k| k as f64 * 0.1).collect();
        let all = [0.0, 600.0];
        let s = pixel_seconds(all, all, &times, 1000.0, false).unwrap();
        assert!((s - 0.6).abs() < 1e-9, "{s}");
        assert_eq!(
            pixel_seconds([100.0, 200.0], all, &times, 1000.0, false),
            Some(f64::INFINITY)
        );
        // 3,000 steps in the same 600 s: 5 steps a second.
        let steps = [0.0, 3000.0];
        let s = pixel_seconds(steps, steps, &times, 1000.0, true).unwrap();
        assert!((s - 0.6).abs() < 1e-9, "{s}");
        assert_eq!(pixel_seconds(all, all, &[], 1000.0, false), None);
    }

    /// A process read every third row (round-robin with the others) holds
    /// its last reading in the stack until its next, not 0 between them;
    /// nothing before its first reading or from its exit on.
    #[test]
    fn each_band_holds_its_last_reading_until_the_next() {
        let nan = f64::NAN;
        let values = [nan, nan, nan, 11.0, nan, nan, 12.0, nan, nan, 13.0];
        let rows = [0, 1, 3, 4, 6, 7, 9];
        let times: Vec<f64> = (0..10).map(|r| r as f64 * 0.5).collect();
        assert_eq!(
            carried(&values, &rows, &rows, &times, f64::INFINITY),
            [0.0, 0.0, 11.0, 11.0, 12.0, 12.0, 13.0]
        );
        // Thinned to every other row, the same readings hold.
        assert_eq!(
            carried(&values, &rows, &[1, 4, 7], &times, f64::INFINITY),
            [0.0, 11.0, 12.0]
        );
        // Exited at 3.2 s: nothing from row 7 (3.5 s) on.
        assert_eq!(
            carried(&values, &rows, &rows, &times, 3.2),
            [0.0, 0.0, 11.0, 11.0, 12.0, 0.0, 0.0]
        );
    }

    /// The wall clock reads the local zone: its offset moves the origin
    /// (so ticks and labels fall on local round times), its name labels it,
    /// and a zone without a name is told by its offset.
    #[test]
    fn the_wall_clock_is_local_time() {
        let start = 1_700_000_000.0; // 22:13:20 UTC
        let w = Wall::at(start, Some((19_800, "XST".into())));
        assert_eq!(
            (axes::wall(w.origin).as_str(), w.zone.as_str()),
            ("03:43:20", "XST")
        );
        let w = Wall::at(start, Some((-10_800, String::new())));
        assert_eq!(
            (axes::wall(w.origin).as_str(), w.zone.as_str()),
            ("19:13:20", "UTC-3:00")
        );
        let w = Wall::at(start, None);
        assert_eq!(
            (axes::wall(w.origin).as_str(), w.zone.as_str()),
            ("22:13:20", "UTC")
        );
    }
}
