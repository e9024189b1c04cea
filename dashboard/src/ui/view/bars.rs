//! The strips around the plots: the top bar and its keys, the caption
//! that ties a picture to its recording, the timeline, a range's receipt.

use super::frame::{Action, Frame, Setting};
use super::{axes, compare};
use crate::ui::shared::KeyState;
use eframe::egui::{self, Color32, RichText};
use flatline_receipt::fmt::bytes;
use flatline_telemetry::recording::EventKind;

/// The receipt of a part of the run chosen on a plot, in a window of its
/// own until closed; "Copy" puts it on the clipboard as Markdown.
pub(super) fn range_receipt(d: &Frame<'_>, ui: &mut egui::Ui, actions: &mut Vec<Action>) {
    let Some(r) = d.part else {
        return;
    };
    let mut open = true;
    let title = format!("Receipt: {} to {}", axes::clock(r.from), axes::clock(r.to));
    egui::Window::new(title)
        .open(&mut open)
        .collapsible(false)
        .default_width(420.0)
        .show(ui.ctx(), |ui| {
            ui.label(RichText::new(&r.headline).strong());
            egui::Grid::new("range-receipt")
                .num_columns(4)
                .striped(true)
                .show(ui, |ui| {
                    for h in ["channel", "verdict", "drift", "slope"] {
                        ui.label(RichText::new(h).small());
                    }
                    ui.end_row();
                    for row in &r.rows {
                        for cell in [&row.channel, &row.verdict, &row.drift, &row.slope] {
                            ui.label(cell);
                        }
                        ui.end_row();
                    }
                });
            if ui.button("Copy as Markdown").clicked() {
                ui.ctx().copy_text(r.markdown.clone());
            }
        });
    if !open {
        actions.push(Action::ClosePart);
    }
}

/// The keys, as people expect them of a viewer.
pub const KEYS: [(&str, &str); 10] = [
    ("space", "play or pause a replay"),
    ("t", "time since the start / wall clock (local time)"),
    (
        "shift + drag",
        "on a plot: the receipt of that part of the run",
    ),
    ("← / →", "the previous / next event or marker"),
    ("f", "fit: every plot back to all of its data"),
    ("d", "drift mode on or off"),
    ("m", "type a marker (live and watch), Enter adds it"),
    ("s", "screenshot"),
    ("?", "this list"),
    ("Esc", "close it"),
];

/// Acts on a key pressed while no text field has the keyboard: the
/// keys' own requests in `keys`, the rest as actions.
pub(super) fn keys(
    d: &Frame<'_>,
    keys: &mut KeyState,
    ui: &mut egui::Ui,
    actions: &mut Vec<Action>,
) {
    let ctx = ui.ctx().clone();
    keys.fit = false;
    if ctx.egui_wants_keyboard_input() {
        return;
    }
    let pressed = |k: egui::Key| ctx.input(|i| i.key_pressed(k));
    if pressed(egui::Key::Space)
        && let Some(tl) = d.timeline
    {
        actions.push(if tl.playing {
            Action::Pause
        } else {
            Action::Play
        });
    }
    for (key, forward) in [(egui::Key::ArrowRight, true), (egui::Key::ArrowLeft, false)] {
        if pressed(key)
            && let Some(tl) = d.timeline
        {
            let at = tl.playhead_s;
            let moments = d
                .store
                .events()
                .iter()
                .filter(|e| !matches!(e.kind, EventKind::Step { .. } | EventKind::LinesRead { .. }))
                .map(|e| e.t_ns as f64 / 1e9);
            let to = if forward {
                moments.filter(|&t| t > at + 1e-9).min_by(f64::total_cmp)
            } else {
                moments.filter(|&t| t < at - 1e-9).max_by(f64::total_cmp)
            };
            if let Some(t) = to {
                actions.extend([Action::Seek(t), Action::Pause]);
            }
        }
    }
    if pressed(egui::Key::F) {
        keys.fit = true;
    }
    if pressed(egui::Key::D) {
        actions.push(Action::Set(Setting::Drift, !d.settings.drift));
    }
    if pressed(egui::Key::T) {
        actions.push(Action::Set(Setting::WallClock, !d.settings.wall_clock));
    }
    if pressed(egui::Key::M) && d.seen.can_mark {
        keys.focus_mark = true;
    }
    if pressed(egui::Key::S) {
        actions.push(Action::Screenshot);
    }
    if pressed(egui::Key::Questionmark) {
        keys.help = !keys.help;
    }
    if pressed(egui::Key::Escape) {
        keys.help = false;
    }
    if keys.help {
        let mut open = true;
        egui::Window::new("Keys")
            .open(&mut open)
            .collapsible(false)
            .resizable(false)
            .show(&ctx, |ui| {
                egui::Grid::new("keys").num_columns(2).show(ui, |ui| {
                    for (k, what) in KEYS {
                        ui.label(RichText::new(k).monospace().strong());
                        ui.label(what);
                        ui.end_row();
                    }
                });
            });
        keys.help &= open;
    }
}

/// An on/off button for one of the person's settings: the click is an
/// action, carried out after the frame.
fn toggle(
    d: &Frame<'_>,
    ui: &mut egui::Ui,
    actions: &mut Vec<Action>,
    setting: Setting,
    label: &str,
) -> egui::Response {
    let mut on = setting.of(d.settings);
    let r = ui.toggle_value(&mut on, label);
    if r.changed() {
        actions.push(Action::Set(setting, on));
    }
    r
}

/// The top bar: what is shown, the source's controls, the marker field
/// (its text is the bar's own; `keys` hands it the keyboard) and the
/// person's settings.
pub(super) fn top_bar(
    d: &Frame<'_>,
    mark_text: &mut String,
    keys: &mut KeyState,
    ui: &mut egui::Ui,
    actions: &mut Vec<Action>,
) {
    egui::Panel::top("top").show(ui, |ui| {
        ui.horizontal_wrapped(|ui| {
            let meta = d.seen.meta.clone();
            ui.label(RichText::new("flatline").strong());
            ui.separator();
            if let Some(o) = &d.other {
                ui.label(RichText::new(format!("A {}", meta.label)).color(compare::A));
                ui.label(RichText::new(format!("B {}", o.meta.label)).color(compare::B));
            } else {
                ui.label(&meta.label);
            }
            let mut status = match &d.timeline {
                Some(tl) if tl.playing => format!("playing at {}×", tl.speed),
                _ => d.seen.status.clone(),
            };
            if let (Some(z), Some(dt)) = (d.zoom, &d.detail) {
                status.push_str(if dt.covering(z).is_some() {
                    "; every sample in view"
                } else if dt.is_loading() {
                    "; reading the view at full resolution…"
                } else {
                    ""
                });
                if let Some(e) = &dt.failed {
                    status.push_str(&format!("; full resolution unavailable: {e}"));
                }
            }
            ui.label(RichText::new(status).italics());
            ui.separator();
            let (t0, t1) = d.store.time_range();
            ui.label(format!("{:.1} s", (t1 - t0).max(0.0)));
            ui.label(format!(
                "{} samples",
                flatline_receipt::fmt::thousands(d.store.len() as u64)
            ));
            ui.label(format!("{} dropped", d.seen.dropped));
            // The window's own memory, apart from the measured process's.
            if d.seen.kind != crate::ui::SourceKind::Replay
                && let Some(rss) = d.window_rss
            {
                ui.label(
                    RichText::new(format!("window {}", bytes(rss as f64)))
                        .small()
                        .weak(),
                )
                .on_hover_text(
                    "this window's own resident memory; the plotted channels describe the measured process",
                );
            }
            let recording = d.seen.recording.clone();
            if let Some((path, size)) = &recording {
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                ui.label(
                    RichText::new(format!("REC {name} {}", bytes(*size as f64)))
                        .color(Color32::RED),
                );
            }
            ui.separator();
            if let Some(running) = d.seen.workload_running {
                let label = if running {
                    "Stop workload"
                } else {
                    "Start workload"
                };
                if ui.button(label).clicked() {
                    actions.push(Action::SetWorkload(!running));
                }
            }
            if d.seen.can_record {
                if recording.is_some() {
                    if ui.button("Stop recording").clicked() {
                        actions.push(Action::StopRecording);
                    }
                } else if ui.button("Record").clicked() {
                    actions.push(Action::StartRecording);
                }
            }
            if d.seen.can_mark {
                let field = ui.add(
                    egui::TextEdit::singleline(mark_text)
                        .hint_text("marker text (m)")
                        .desired_width(140.0),
                );
                if std::mem::take(&mut keys.focus_mark) {
                    field.request_focus();
                }
                let entered =
                    field.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
                let text = mark_text.trim().to_owned();
                if (ui
                    .add_enabled(!text.is_empty(), egui::Button::new("Mark"))
                    .on_hover_text("a labelled line on every plot, in the recording and its receipts")
                    .clicked()
                    || entered)
                    && !text.is_empty()
                {
                    actions.push(Action::Mark(text));
                }
            }
            if ui.button("Screenshot").clicked() {
                actions.push(Action::Screenshot);
            }
            if ui.button("Open recording…").clicked() {
                actions.push(Action::ToggleBrowser);
            }
            if d.other.is_some() {
                if ui.button("Stop comparing").clicked() {
                    actions.push(Action::StopComparing);
                }
            } else if d.seen.kind == crate::ui::SourceKind::Replay
                && ui
                    .button("Compare with…")
                    .on_hover_text("draw a second recording beside this one")
                    .clicked()
            {
                actions.push(Action::BrowseToCompare);
            }
            ui.separator();
            toggle(d, ui, actions, Setting::Drift, "Drift");
            // Offered only once the data's steps advance (see rules::step_axis).
            if d.store.step_axis().is_some() {
                toggle(d, ui, actions, Setting::XSteps, "x: step");
            }
            toggle(d, ui, actions, Setting::Counts, "Counts")
                .on_hover_text("plot counters as their cumulative count, not their rate");
            toggle(d, ui, actions, Setting::Grouped, "Grouped").on_hover_text(
                "one plot per group and unit, whatever the magnitudes (off: a row per memory channel)",
            );
            toggle(d, ui, actions, Setting::Cards, "Verdicts");
            if ui
                .button(if d.settings.dark { "Light" } else { "Dark" })
                .clicked()
            {
                actions.push(Action::Set(Setting::Dark, !d.settings.dark));
            }
        });
    });
}

/// The strip that ties a picture to its recording.
pub(super) fn caption(d: &Frame<'_>, ui: &mut egui::Ui, visible: usize) {
    let meta = d.seen.meta.clone();
    let (t0, _) = d.store.time_range();
    let t1 = visible
        .checked_sub(1)
        .and_then(|i| d.store.times().get(i))
        .copied()
        .unwrap_or(t0);
    let file = meta.file.as_ref().map_or("(not recorded)".into(), |p| {
        p.file_name().map_or_else(
            || p.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    });
    let digest = meta
        .digest
        .as_deref()
        .filter(|d| !d.is_empty())
        .unwrap_or("–");
    let other = d.other.as_ref().map(|o| {
        let file = o
            .meta
            .file
            .as_ref()
            .and_then(|p| p.file_name())
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        (file, o.meta.digest.clone().unwrap_or_default())
    });
    egui::Panel::bottom("caption").show(ui, |ui| {
        ui.horizontal_wrapped(|ui| {
            let small = |s: String| RichText::new(s).small().monospace();
            ui.label(small(format!("flatline {}", env!("CARGO_PKG_VERSION"))));
            if let Some((b_file, b_digest)) = other {
                ui.label(small(format!("A {file} sha256:{digest}")).color(compare::A));
                ui.label(small(format!("B {b_file} sha256:{b_digest}")).color(compare::B));
                ui.label(small(format!("t {t0:.1}–{t1:.1} s")));
                return;
            }
            ui.label(small(format!("file {file}")));
            ui.label(small(format!("t {t0:.1}–{t1:.1} s")));
            ui.label(small(format!("sha256:{digest}")));
            ui.label(small(format!("host {}", meta.host)));
        });
    });
}

/// The play position's bar: its moves are actions.
pub(super) fn timeline(d: &Frame<'_>, ui: &mut egui::Ui, actions: &mut Vec<Action>) {
    let Some(tl) = d.timeline else {
        return;
    };
    // In compare mode both sides' moments count, each named by its side.
    let sides: Vec<(&str, &crate::ui::Store)> = match &d.other {
        Some(o) => vec![("A: ", d.store), ("B: ", &o.store)],
        None => vec![("", d.store)],
    };
    // Steps are too many to stop at: "Next event" stops at markers, phases,
    // processes joining and leaving, notes.
    let next_event = sides
        .iter()
        .flat_map(|(_, s)| s.events())
        .filter(|e| !matches!(e.kind, EventKind::Step { .. } | EventKind::LinesRead { .. }))
        .map(|e| e.t_ns as f64 / 1e9)
        .filter(|&t| t > tl.playhead_s + 1e-9)
        .min_by(f64::total_cmp);
    let mut marks: Vec<(f64, String)> = sides
        .iter()
        .flat_map(|(side, s)| {
            s.events().iter().filter_map(move |e| match &e.kind {
                EventKind::Marker(text) | EventKind::Note(text) => {
                    Some((e.t_ns as f64 / 1e9, format!("{side}{text}")))
                }
                _ => None,
            })
        })
        .collect();
    marks.sort_by(|a, b| a.0.total_cmp(&b.0));
    egui::Panel::bottom("timeline").show(ui, |ui| {
        ui.horizontal(|ui| {
            if ui.button("Start").clicked() {
                actions.push(Action::Seek(tl.start_s));
            }
            if tl.playing {
                if ui.button("Pause").clicked() {
                    actions.push(Action::Pause);
                }
            } else if ui.button("Play").clicked() {
                actions.push(Action::Play);
            }
            egui::ComboBox::from_label("speed")
                .selected_text(format!("{}×", tl.speed))
                .show_ui(ui, |ui| {
                    for s in [1.0, 10.0, 100.0, 1000.0] {
                        if ui
                            .selectable_label(tl.speed == s, format!("{s}×"))
                            .clicked()
                        {
                            actions.push(Action::Speed(s));
                        }
                    }
                });
            if ui
                .add_enabled(next_event.is_some(), egui::Button::new("Next event"))
                .clicked()
                && let Some(t) = next_event
            {
                actions.push(Action::Seek(t));
            }
            if ui.button("End").clicked() {
                actions.extend([Action::Seek(tl.end_s), Action::Pause]);
            }
            if !marks.is_empty() {
                egui::ComboBox::from_label("go to marker")
                    .selected_text(format!("Markers ({})", marks.len()))
                    .width(150.0)
                    .show_ui(ui, |ui| {
                        for (t, text) in &marks {
                            if ui
                                .selectable_label(false, format!("{t:.1} s  {text}"))
                                .clicked()
                            {
                                actions.extend([Action::Seek(*t), Action::Pause]);
                            }
                        }
                    });
            }
            let (lo, hi) = (tl.start_s, tl.end_s.max(tl.start_s + 1e-9));
            // The slider takes what its value box and label leave.
            let font = egui::TextStyle::Body.resolve(ui.style());
            let width = |text: String| {
                ui.painter()
                    .layout_no_wrap(text, font.clone(), Color32::WHITE)
                    .size()
                    .x
            };
            let s = ui.spacing();
            let value =
                (width(format!("{hi:.2}")) + 2.0 * s.button_padding.x).max(s.interact_size.x);
            let reserve = value + width("playhead (s)".into()) + 2.0 * s.item_spacing.x + 16.0;
            ui.spacing_mut().slider_width = (ui.available_width() - reserve).max(100.0);
            let mut at = tl.playhead_s;
            if ui
                .add(egui::Slider::new(&mut at, lo..=hi).text("playhead (s)"))
                .changed()
            {
                actions.push(Action::Seek(at));
            }
        });
    });
}
