//! The file browser of a window opened without a recording.

use super::frame::{Action, Frame};
use eframe::egui::{self};
use flatline_receipt::fmt::bytes;

pub(super) fn browser(d: &Frame<'_>, ui: &mut egui::Ui, actions: &mut Vec<Action>) {
    let mut open = d.browser_open;
    let title = if d.browsing_for_compare {
        "Compare with recording"
    } else {
        "Open recording"
    };
    egui::Window::new(title)
        .open(&mut open)
        .show(ui.ctx(), |ui| {
            ui.horizontal(|ui| {
                ui.label(format!("Recordings in {}/:", d.recordings_dir.display()));
                if ui.button("Refresh").clicked() {
                    actions.push(Action::RefreshRecordings);
                }
            });
            if d.listed.is_empty() {
                ui.label("(none here; pass a file: flatline replay FILE)");
            }
            for f in d.listed {
                let name = f
                    .path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if ui
                    .button(format!("{name}  ({})", bytes(f.bytes as f64)))
                    .clicked()
                {
                    actions.push(Action::Open(f.path.clone()));
                }
            }
        });
    if !open {
        actions.push(Action::CloseBrowser);
    }
}
