//! Drawing. Reads the store; changes only what the person chose (settings,
//! the play position) and returns everything else as [`Action`]s, which the
//! dashboard applies after the frame: no view starts a recording, writes a
//! file or reads a folder.

use std::collections::BTreeMap;
use std::path::PathBuf;

use eframe::egui::{self, Color32, RichText};
use egui_plot::{
    AxisHints, FilledArea, Legend, Line, LineStyle, Plot, PlotPoint, PlotPoints, PlotUi, Points,
    Polygon, Text, VLine,
};
use flatline_runtime::analysis::summary::{self, Assessed};
use flatline_runtime::analysis::{ChannelAnalysis, Kind, Severity, Verdict};
use flatline_runtime::recording::EventKind;
use flatline_runtime::telemetry::{Group, Unit};

use super::Dashboard;
use flatline_core::fmt::{bytes, value};

mod axes;
mod compare;
mod selection;

pub use selection::RangeReceipt;

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
}

/// Draws one frame and returns what the clicks in it asked for.
pub fn draw(d: &mut Dashboard, ui: &mut egui::Ui) -> Vec<Action> {
    let mut actions = Vec::new();
    keys(d, ui, &mut actions);
    let visible = d.visible_len();
    top_bar(d, ui, &mut actions);
    caption(d, ui, visible);
    if d.timeline.is_some() {
        timeline(d, ui);
    }
    channels(d, ui, visible);
    if d.other.is_some() {
        if d.settings.cards {
            compare::cards(d, ui);
        }
        egui::CentralPanel::default().show(ui, |ui| compare::plots(d, ui, visible));
    } else {
        // No verdict, not even "nothing to judge", before there is data.
        if d.settings.cards && d.opening.is_none() {
            cards(d, ui);
        }
        if d.opening.is_none() {
            banner(d, ui);
        }
        egui::CentralPanel::default().show(ui, |ui| plots(d, ui, visible));
    }
    if d.browser_open {
        browser(d, ui, &mut actions);
    }
    range_receipt(d, ui);
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

/// The receipt of a part of the run chosen on a plot, in a window of its
/// own until closed; "Copy" puts it on the clipboard as Markdown.
fn range_receipt(d: &mut Dashboard, ui: &mut egui::Ui) {
    let Some(r) = &d.range_receipt else {
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
                        for cell in row {
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
        d.range_receipt = None;
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

/// Acts on a key pressed while no text field has the keyboard.
fn keys(d: &mut Dashboard, ui: &mut egui::Ui, actions: &mut Vec<Action>) {
    let ctx = ui.ctx().clone();
    if ctx.egui_wants_keyboard_input() {
        return;
    }
    let pressed = |k: egui::Key| ctx.input(|i| i.key_pressed(k));
    if pressed(egui::Key::Space)
        && let Some(tl) = d.timeline.as_mut()
    {
        if tl.playing {
            tl.pause();
        } else {
            tl.play();
        }
    }
    for (key, forward) in [(egui::Key::ArrowRight, true), (egui::Key::ArrowLeft, false)] {
        if pressed(key)
            && let Some(tl) = d.timeline.as_mut()
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
                tl.seek(t);
                tl.pause();
            }
        }
    }
    if pressed(egui::Key::F) {
        d.keys.fit = true;
    }
    if pressed(egui::Key::D) {
        d.settings.drift = !d.settings.drift;
    }
    if pressed(egui::Key::T) {
        d.settings.wall_clock = !d.settings.wall_clock;
    }
    if pressed(egui::Key::M) && d.source.can_mark() {
        d.keys.focus_mark = true;
    }
    if pressed(egui::Key::S) {
        actions.push(Action::Screenshot);
    }
    if pressed(egui::Key::Questionmark) {
        d.keys.help = !d.keys.help;
    }
    if pressed(egui::Key::Escape) {
        d.keys.help = false;
    }
    if d.keys.help {
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
        d.keys.help &= open;
    }
}

fn top_bar(d: &mut Dashboard, ui: &mut egui::Ui, actions: &mut Vec<Action>) {
    egui::Panel::top("top").show(ui, |ui| {
        ui.horizontal_wrapped(|ui| {
            let meta = d.source.meta();
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
                _ => d.source.status(),
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
                flatline_core::fmt::thousands(d.store.len() as u64)
            ));
            ui.label(format!("{} dropped", d.source.dropped()));
            // The window's own memory, apart from the measured process's.
            if d.source.kind() != super::SourceKind::Replay
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
            let recording = d.source.recording();
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
            if let Some(running) = d.source.workload_running() {
                let label = if running {
                    "Stop workload"
                } else {
                    "Start workload"
                };
                if ui.button(label).clicked() {
                    actions.push(Action::SetWorkload(!running));
                }
            }
            if d.source.can_record() {
                if recording.is_some() {
                    if ui.button("Stop recording").clicked() {
                        actions.push(Action::StopRecording);
                    }
                } else if ui.button("Record").clicked() {
                    actions.push(Action::StartRecording);
                }
            }
            if d.source.can_mark() {
                let field = ui.add(
                    egui::TextEdit::singleline(&mut d.mark_text)
                        .hint_text("marker text (m)")
                        .desired_width(140.0),
                );
                if std::mem::take(&mut d.keys.focus_mark) {
                    field.request_focus();
                }
                let entered =
                    field.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
                let text = d.mark_text.trim().to_owned();
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
            } else if d.source.kind() == super::SourceKind::Replay
                && ui
                    .button("Compare with…")
                    .on_hover_text("draw a second recording beside this one")
                    .clicked()
            {
                actions.push(Action::BrowseToCompare);
            }
            ui.separator();
            ui.toggle_value(&mut d.settings.drift, "Drift");
            // Offered only once the data's steps advance (see rules::step_axis).
            if d.store.step_axis().is_some() {
                ui.toggle_value(&mut d.settings.x_steps, "x: step");
            }
            ui.toggle_value(&mut d.settings.counts, "Counts")
                .on_hover_text("plot counters as their cumulative count, not their rate");
            ui.toggle_value(&mut d.settings.grouped, "Grouped").on_hover_text(
                "one plot per group and unit, whatever the magnitudes (off: a row per memory channel)",
            );
            ui.toggle_value(&mut d.settings.cards, "Verdicts");
            if ui
                .button(if d.settings.dark { "Light" } else { "Dark" })
                .clicked()
            {
                d.settings.dark = !d.settings.dark;
            }
        });
    });
}

/// The strip that ties a picture to its recording.
fn caption(d: &mut Dashboard, ui: &mut egui::Ui, visible: usize) {
    let meta = d.source.meta();
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

fn timeline(d: &mut Dashboard, ui: &mut egui::Ui) {
    let Some(tl) = d.timeline.as_mut() else {
        return;
    };
    // In compare mode both sides' moments count, each named by its side.
    let sides: Vec<(&str, &super::Store)> = match &d.other {
        Some(o) => vec![("A: ", &d.store), ("B: ", &o.store)],
        None => vec![("", &d.store)],
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
                tl.seek(tl.start_s);
            }
            if tl.playing {
                if ui.button("Pause").clicked() {
                    tl.pause();
                }
            } else if ui.button("Play").clicked() {
                tl.play();
            }
            egui::ComboBox::from_label("speed")
                .selected_text(format!("{}×", tl.speed))
                .show_ui(ui, |ui| {
                    for s in [1.0, 10.0, 100.0, 1000.0] {
                        ui.selectable_value(&mut tl.speed, s, format!("{s}×"));
                    }
                });
            if ui
                .add_enabled(next_event.is_some(), egui::Button::new("Next event"))
                .clicked()
                && let Some(t) = next_event
            {
                tl.seek(t);
            }
            if ui.button("End").clicked() {
                tl.seek(tl.end_s);
                tl.pause();
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
                                tl.seek(*t);
                                tl.pause();
                            }
                        }
                    });
            }
            let (lo, hi) = (tl.start_s, tl.end_s.max(tl.start_s + 1e-9));
            ui.spacing_mut().slider_width = (ui.available_width() - 120.0).max(100.0);
            ui.add(egui::Slider::new(&mut tl.playhead_s, lo..=hi).text("playhead (s)"));
        });
    });
}

fn group_name(g: Group) -> &'static str {
    match g {
        Group::Memory => "Memory and page tables",
        Group::Allocator => "Allocator",
        Group::Malloc => "glibc malloc",
        Group::Gpu => "GPU",
        Group::Workload => "Workload",
        Group::System => "Process and system",
        Group::StepLog => "Step log",
        Group::Telemetry => "Telemetry",
    }
}

/// A badge's colour: by verdict, but memory that shrinks steadily or in steps
/// is not an alarm (the headline and `--fail-on` count growth only), so it
/// takes the neutral colour of a noisy channel rather than red or amber.
fn verdict_color(a: &ChannelAnalysis) -> Color32 {
    if a.verdict.is_growth() && a.slope_per_s < 0.0 {
        return NEUTRAL;
    }
    match a.verdict {
        Verdict::Flat | Verdict::Stable | Verdict::Steady | Verdict::Held => {
            Color32::from_rgb(60, 170, 90)
        }
        Verdict::Staircase => Color32::from_rgb(220, 160, 40),
        Verdict::Linear => Color32::from_rgb(220, 70, 60),
        Verdict::Noisy | Verdict::Bursty => NEUTRAL,
        Verdict::Rising
        | Verdict::Falling
        | Verdict::DriftingUp
        | Verdict::DriftingDown
        | Verdict::Rose => Color32::from_rgb(200, 170, 110),
        Verdict::Insufficient => Color32::GRAY,
    }
}

const NEUTRAL: Color32 = Color32::from_rgb(120, 140, 200);

fn badge(ui: &mut egui::Ui, a: Option<&ChannelAnalysis>) {
    let Some(a) = a else { return };
    let c = verdict_color(a);
    ui.label(
        RichText::new(a.verdict.as_str())
            .small()
            .color(Color32::BLACK)
            .background_color(c),
    );
}

fn channels(d: &mut Dashboard, ui: &mut egui::Ui, visible: usize) {
    egui::Panel::left("channels")
        .resizable(true)
        .default_size(330.0)
        .show(ui, |ui| {
            egui::ScrollArea::vertical().show(ui, |ui| {
                processes(d, ui, visible);
                let mut groups: BTreeMap<u8, Vec<usize>> = BTreeMap::new();
                for (i, c) in d.store.schema().channels.iter().enumerate() {
                    // A process's own channels are listed under Processes.
                    if !c.labels.contains_key("pid") {
                        groups.entry(c.group as u8).or_default().push(i);
                    }
                }
                for idx in groups.values() {
                    let group = d.store.schema().channels[idx[0]].group;
                    egui::CollapsingHeader::new(group_name(group))
                        .default_open(!matches!(group, Group::Telemetry | Group::System))
                        .show(ui, |ui| {
                            for &i in idx {
                                channel_row(d, ui, i, visible);
                            }
                        });
                }
            });
        });
}

/// One process of the watched tree, as the processes panel lists it.
#[derive(Debug, Clone)]
pub struct ProcessRow {
    /// Its channels' stem: `pid4242`.
    pub stem: String,
    pub pid: u32,
    pub role: String,
    pub name: String,
    /// Latest readings up to the visible end, in bytes.
    pub rss: Option<f64>,
    pub pss: Option<f64>,
    pub uss: Option<f64>,
    pub pss_position: usize,
    /// When it exited (seconds), if it has by the visible end.
    pub exited_s: Option<f64>,
}

/// The processes of the watched tree over samples `[0, visible)`: live ones
/// first, each part sorted by PSS, largest first.
pub fn process_rows(d: &Dashboard, visible: usize) -> Vec<ProcessRow> {
    let store = &d.store;
    let schema = store.schema();
    let until = match visible {
        0 => f64::NEG_INFINITY,
        n => store.times().get(n - 1).copied().unwrap_or(f64::INFINITY),
    };
    let mut exits: BTreeMap<u32, f64> = BTreeMap::new();
    for e in store.events() {
        let t = e.t_ns as f64 / 1e9;
        if let EventKind::ProcessExited { pid, .. } = &e.kind
            && t <= until
        {
            exits.insert(*pid, t);
        }
    }
    let pss = store.process_pss();
    let leaves = store.process_leaves();
    // Each process's latest reading before `visible`, found through its
    // PSS pyramid: a few steps per process however long ago it exited
    // (walking back sample by sample cost a week's replay most of its time).
    let mut out: Vec<ProcessRow> = pss
        .iter()
        .zip(leaves)
        .map(|(&i, &[rss, uss])| {
            let c = &schema.channels[i];
            let pid = c
                .labels
                .get("pid")
                .and_then(|p| p.parse().ok())
                .unwrap_or(0);
            let last = store.series(i).last_reading_before(visible);
            let at = |ch: Option<usize>, r: usize| {
                ch.and_then(|ch| store.series(ch).values().get(r).copied())
                    .filter(|v| !v.is_nan())
            };
            ProcessRow {
                pid,
                role: c.labels.get("role").cloned().unwrap_or_default(),
                name: c.labels.get("name").cloned().unwrap_or_default(),
                rss: last.and_then(|r| at(rss, r)),
                pss: last.and_then(|r| at(Some(i), r)),
                uss: last.and_then(|r| at(uss, r)),
                pss_position: i,
                // A process whose pid came back later: only the newest exit counts.
                exited_s: exits.get(&pid).copied().filter(|_| last.is_some()),
                stem: c.name.trim_end_matches(".pss").to_owned(),
            }
        })
        .collect();
    out.retain(|p| p.pss.is_some());
    out.sort_by(|a, b| {
        (a.exited_s.is_some(), b.pss.unwrap_or(0.0))
            .partial_cmp(&(b.exited_s.is_some(), a.pss.unwrap_or(0.0)))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    out
}

/// The processes panel: one row per process of the watched tree; a click
/// plots its channels.
fn processes(d: &mut Dashboard, ui: &mut egui::Ui, visible: usize) {
    let rows = process_rows(d, visible);
    if rows.is_empty() {
        return;
    }
    let live = rows.iter().filter(|r| r.exited_s.is_none()).count();
    egui::CollapsingHeader::new(format!("Processes ({live} live, {} seen)", rows.len()))
        .default_open(true)
        .show(ui, |ui| {
            egui::Grid::new("processes")
                .striped(true)
                .num_columns(7)
                .show(ui, |ui| {
                    for h in ["pid", "role", "name", "RSS", "PSS", "USS", ""] {
                        ui.label(RichText::new(h).small().strong());
                    }
                    ui.end_row();
                    for r in rows {
                        let gone = r.exited_s.is_some();
                        let text = |t: String| {
                            let t = RichText::new(t).small();
                            if gone { t.weak() } else { t }
                        };
                        let names = ["rss", "pss", "uss"].map(|l| format!("{}.{l}", r.stem));
                        let on = d.settings.selected.contains(&names[1]);
                        if ui
                            .selectable_label(on, text(r.pid.to_string()).monospace())
                            .on_hover_text("plot this process's RSS, PSS and USS")
                            .clicked()
                        {
                            for n in names {
                                if on {
                                    d.settings.selected.remove(&n);
                                } else {
                                    d.settings.selected.insert(n);
                                }
                            }
                        }
                        ui.label(text(r.role.clone()));
                        ui.label(text(r.name.clone()));
                        for v in [r.rss, r.pss, r.uss] {
                            ui.label(text(v.map_or("–".into(), bytes)).monospace());
                        }
                        match r.exited_s {
                            Some(t) => {
                                ui.label(text(format!("exited {t:.1} s")));
                            }
                            None => badge(ui, d.store.analysis(r.pss_position)),
                        }
                        ui.end_row();
                    }
                });
        });
}

fn channel_row(d: &mut Dashboard, ui: &mut egui::Ui, i: usize, visible: usize) {
    let spec = d.store.schema().channels[i].clone();
    let values = d.store.series(i).values();
    let current = values[..visible.min(values.len())]
        .iter()
        .rev()
        .copied()
        .find(|v| !v.is_nan());
    let analysis = d.store.analysis(i);
    ui.horizontal(|ui| {
        let mut on = d.settings.selected.contains(&spec.name);
        if ui.checkbox(&mut on, &spec.name).changed() {
            if on {
                d.settings.selected.insert(spec.name.clone());
            } else {
                d.settings.selected.remove(&spec.name);
            }
        }
        ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
            badge(ui, analysis);
            // A counter beside its rate; anything else beside its drift.
            if let Some(r) = analysis.and_then(|a| a.rate_per_s) {
                ui.label(RichText::new(format!("{}/s", value(r, spec.unit))).small());
            } else if let Some(a) = analysis
                && a.drift != 0.0
                && a.drift.is_finite()
            {
                let sign = if a.drift > 0.0 { "+" } else { "-" };
                ui.label(
                    RichText::new(format!("{sign}{}", value(a.drift.abs(), spec.unit))).small(),
                );
            }
            ui.label(
                RichText::new(current.map_or("–".into(), |v| value(v, spec.unit))).monospace(),
            );
        });
    });
}

/// The recording's finding in one sentence, above the plots, in the colour
/// of its severity: what a person reads first, live as it changes. Clicking
/// it plots the channels it names.
fn banner(d: &mut Dashboard, ui: &mut egui::Ui) {
    let (_, assessed) = assessed(&d.store);
    if assessed.is_empty() {
        return;
    }
    // The process tree's findings, as the receipt makes them, from what
    // the store holds: at most once a second, and only when it grew.
    // Which store and how much of it: a recording opened in its place is a
    // new key, and made at once.
    let key = (
        d.store.len(),
        d.store.schema().len(),
        d.store.time_range().0.to_bits(),
    );
    let stale = d.tree_findings.as_ref().is_none_or(|(at, k, _)| {
        *k != key && (k.1 != key.1 || k.2 != key.2 || at.elapsed().as_secs_f64() >= 1.0)
    });
    if stale {
        let store = &d.store;
        let schema = store.schema();
        let by_name = |n: &str| schema.index_of(n).and_then(|i| store.analysis(i));
        let data = flatline_runtime::analysis::tree::Columns {
            t: store.times(),
            column: |n: &str| schema.index_of(n).map(|i| store.series(i).values()),
        };
        let tree =
            flatline_runtime::analysis::tree::summarize(schema, store.events(), by_name, &data);
        d.tree_findings = Some((std::time::Instant::now(), key, tree));
    }
    let tree = d.tree_findings.as_ref().and_then(|(.., t)| t.as_ref());
    let assessment = summary::assess(&assessed, tree, &value, &flatline_core::fmt::duration);
    let names: Vec<String> = assessment
        .growing
        .iter()
        .map(|g| g.name.to_string())
        .collect();
    let text = assessment.headline.clone();
    let color = match assessment.severity() {
        Some(Severity::Critical) => Color32::from_rgb(220, 70, 60),
        Some(Severity::Warning) => Color32::from_rgb(225, 165, 40),
        Some(Severity::Info) => Color32::from_rgb(120, 160, 220),
        // Readings that cannot tell growth from noise are not "flat": no green.
        None if !assessment.untold.is_empty() => Color32::GRAY,
        None => Color32::from_rgb(80, 180, 100),
    };
    let clicked = egui::Panel::top("finding")
        .show(ui, |ui| {
            let r = ui.add(
                egui::Label::new(RichText::new(text).size(16.0).strong().color(color))
                    .sense(egui::Sense::click()),
            );
            if names.is_empty() {
                r
            } else {
                r.on_hover_text("click to plot the channels it names")
            }
            .clicked()
        })
        .inner;
    if clicked {
        d.settings.selected.extend(names);
    }
}

/// The analysed channels as the summary reads them, with their indices.
fn assessed(store: &super::Store) -> (Vec<usize>, Vec<Assessed<'_>>) {
    let schema = store.schema();
    (0..schema.len())
        .filter_map(|i| {
            let analysis = store.analysis(i)?;
            Some((
                i,
                Assessed {
                    name: &schema.channels[i].name,
                    unit: schema.channels[i].unit,
                    analysis,
                    limit: store.limit(i).map(|l| l.1),
                },
            ))
        })
        .unzip()
}

fn cards(d: &mut Dashboard, ui: &mut egui::Ui) {
    let schema = d.store.schema();
    let (index, assessed) = assessed(&d.store);
    let layers = summary::gpu_layers(&assessed, &value);
    // The chosen channels, most urgent first.
    let selected: Vec<usize> = summary::order(&assessed)
        .into_iter()
        .map(|k| index[k])
        .filter(|&i| d.settings.selected.contains(&schema.channels[i].name))
        .collect();
    let warmup = match d.store.warmup() {
        Some((t, ch)) => format!(
            "after a warm-up of {:.1} s (where {ch}'s start-up ends)",
            t - d.store.time_range().0
        ),
        None => "no start-up found: every reading counts".into(),
    };
    egui::Panel::right("verdicts")
        .resizable(true)
        .default_size(250.0)
        .show(ui, |ui| {
            ui.heading("Verdicts");
            // The headline is the banner above the plots; the GPU's layers
            // finding stays here.
            if let Some(f) = layers {
                ui.label(RichText::new(f.text).strong());
            }
            ui.label(RichText::new(format!("updated once a second, {warmup}")).small());
            egui::ScrollArea::vertical().show(ui, |ui| {
                let mut toggled = None;
                for i in selected {
                    let spec = d.store.schema().channels[i].clone();
                    let Some(a) = d.store.analysis(i) else {
                        continue;
                    };
                    // Growth that reaches a limit within a week is open at
                    // first; the rest is one line until clicked.
                    let urgent = matches!(a.severity, Some(Severity::Warning | Severity::Critical));
                    let open = urgent != d.cards_toggled.contains(&spec.name);
                    let r = egui::Frame::group(ui.style())
                        .show(ui, |ui| {
                            ui.set_width(ui.available_width());
                            if open {
                                card(ui, &spec.name, spec.unit, a);
                            } else {
                                card_line(ui, &spec.name, spec.unit, a);
                            }
                        })
                        .response
                        .interact(egui::Sense::click())
                        .on_hover_text(if open {
                            "click to fold"
                        } else {
                            "click for the details"
                        });
                    if r.clicked() {
                        toggled = Some(spec.name.clone());
                    }
                }
                if let Some(name) = toggled
                    && !d.cards_toggled.remove(&name)
                {
                    d.cards_toggled.insert(name);
                }
            });
        });
}

/// A folded card: name, badge, drift (or rate, trend, rises) and the time to
/// the limit, on one line.
fn card_line(ui: &mut egui::Ui, name: &str, u: Unit, a: &ChannelAnalysis) {
    ui.horizontal(|ui| {
        ui.label(RichText::new(name).strong());
        badge(ui, Some(a));
        let what = match a.kind {
            Kind::Level | Kind::Peak if a.drift != 0.0 && a.drift.is_finite() => {
                flatline_core::report::change(a.drift, u)
            }
            Kind::Level | Kind::Peak => "0".into(),
            Kind::Counter => format!("{}/s", value(a.rate_per_s.unwrap_or(0.0), u)),
            Kind::Gauge => flatline_core::report::trend_text(a).unwrap_or_default(),
        };
        ui.label(RichText::new(what).small());
        if let Some(s) = a.time_to_limit_s {
            ui.label(
                RichText::new(format!("limit in {}", flatline_core::fmt::duration(s))).small(),
            );
        }
    });
}

/// One channel's verdict card, as its kind is read.
fn card(ui: &mut egui::Ui, name: &str, u: Unit, a: &ChannelAnalysis) {
    ui.horizontal(|ui| {
        ui.label(RichText::new(name).strong());
        badge(ui, Some(a));
        if let Some(sev) = a.severity {
            let c = match sev {
                Severity::Critical => Color32::from_rgb(220, 70, 60),
                Severity::Warning => Color32::from_rgb(220, 160, 40),
                Severity::Info => Color32::GRAY,
            };
            ui.label(RichText::new(sev.as_str()).small().strong().color(c));
        }
        ui.label(RichText::new(format!("{:.0} %", a.confidence * 100.0)).small());
    });
    let signed = |v: f64| {
        if v == 0.0 || !v.is_finite() {
            "0".to_string()
        } else {
            format!("{}{}", if v > 0.0 { "+" } else { "-" }, value(v.abs(), u))
        }
    };
    let pct =
        flatline_core::report::trend_text(a).map_or(String::new(), |t| format!("   trend {t}"));
    match a.kind {
        Kind::Level => {
            let text = flatline_core::report::verdict_text(a, u);
            if text != a.verdict.as_str() {
                ui.label(RichText::new(text).small().italics());
            }
            ui.label(format!(
                "drift {}   slope {}/s",
                signed(a.drift),
                signed(a.slope_per_s)
            ));
            let jumps = match a.quantum {
                Some(q) if a.jumps > 0 => format!("{} jumps × {}", a.jumps, value(q, u)),
                _ => format!("{} jumps", a.jumps),
            };
            ui.label(format!(
                "{jumps}, longest flat {}",
                flatline_core::fmt::duration(a.longest_flat_s)
            ));
            let eta = a.time_to_limit_s.map_or(String::new(), |s| {
                format!(", limit in {}", flatline_core::fmt::duration(s))
            });
            ui.label(format!(
                "24 h: {}{eta}",
                signed(a.projection_24h.unwrap_or(0.0))
            ));
        }
        Kind::Counter => {
            ui.label(format!(
                "rate {}/s{pct}",
                value(a.rate_per_s.unwrap_or(0.0), u)
            ));
            ui.label(format!(
                "from {}/s to {}/s",
                value(a.baseline, u),
                value(a.final_value, u)
            ));
            if let Some(p) = a.drift_per_step {
                ui.label(format!("{} per step", value(p, u)));
            }
        }
        Kind::Gauge => {
            ui.label(format!(
                "{} to {}{pct}",
                value(a.baseline, u),
                value(a.final_value, u)
            ));
        }
        Kind::Peak => {
            let last = a
                .last_rise_s
                .map_or(String::new(), |t| format!(", last at {t:.1} s"));
            ui.label(format!("{} rises, {}{last}", a.jumps, signed(a.drift)));
        }
    }
}

/// How a unit is drawn on a plot axis: scale and label.
fn axis_unit(g: Group, u: Unit) -> (f64, &'static str) {
    match u {
        // Operation rates run to hundreds of millions; allocation rates do not.
        Unit::PerSecond if g != Group::Workload => (1.0, "/s"),
        Unit::Bytes => (1.0 / 1_048_576.0, "MiB"),
        Unit::Mebibytes => (1.0, "MiB"),
        Unit::Nanoseconds => (1e-3, "µs"),
        Unit::Microseconds => (1.0, "µs"),
        Unit::Milliseconds => (1.0, "ms"),
        Unit::Seconds => (1.0, "s"),
        Unit::Percent => (1.0, "%"),
        Unit::Celsius => (1.0, "°C"),
        Unit::PerSecond => (1e-6, "M/s"),
        Unit::Count => (1.0, "count"),
        Unit::Number => (1.0, ""),
    }
}

/// Points for one channel over samples `[0, visible)`: at most about two per
/// pixel column (min and max of each bucket), and runs of one value as their
/// two ends (see [`push_column`]).
pub fn decimate(
    d: &Dashboard,
    ch: usize,
    visible: usize,
    columns: usize,
    baseline: f64,
    scale: f64,
) -> Vec<PlotPoint> {
    let x_axis = d.store.step_axis().filter(|_| d.settings.x_steps);
    if let (None, Some(z)) = (x_axis, d.zoom) {
        // Zoomed in: bucket the view (and half a view each side, so a pan
        // shows lines at once), from the full-resolution detail if it
        // covers the view, else from what the store holds.
        let end = visible
            .checked_sub(1)
            .and_then(|i| d.store.times().get(i))
            .copied()
            .unwrap_or(f64::NEG_INFINITY);
        let w = z[1] - z[0];
        let span = [z[0] - w / 2.0, (z[1] + w / 2.0).min(end)];
        let detail = d.detail.as_ref().and_then(|dt| dt.covering(z));
        return match detail.and_then(|l| Some((&l.times, l.series.get(ch)?))) {
            Some((times, series)) => decimate_span(times, series, span, columns, baseline, scale),
            None => decimate_span(
                &d.store.times()[..visible],
                d.store.series(ch),
                span,
                columns,
                baseline,
                scale,
            ),
        };
    }
    decimate_on(&d.store, x_axis, ch, visible, columns, baseline, scale)
}

/// Points for the samples of `series` (at `times`) within `span` (and the
/// one each side, so the line reaches the edges): about two per pixel
/// column over the view, which is half the span.
fn decimate_span(
    times: &[f64],
    series: &flatline_core::store::Series,
    span: [f64; 2],
    columns: usize,
    baseline: f64,
    scale: f64,
) -> Vec<PlotPoint> {
    let i0 = times.partition_point(|&t| t < span[0]).saturating_sub(1);
    let i1 = (times.partition_point(|&t| t <= span[1]) + 1).min(times.len());
    let mut out = Vec::with_capacity(columns * 4 + 2);
    for (i, [lo, hi]) in series.buckets(i0, i1, columns * 2) {
        if lo.is_nan() {
            continue;
        }
        push_column(
            &mut out,
            times[i],
            (lo - baseline) * scale,
            (hi - baseline) * scale,
        );
    }
    out
}

/// [`decimate`] for any store, on the values of channel `x_axis` (a step or
/// token count) or, without one, on time.
fn decimate_on(
    store: &super::Store,
    x_axis: Option<usize>,
    ch: usize,
    visible: usize,
    columns: usize,
    baseline: f64,
    scale: f64,
) -> Vec<PlotPoint> {
    let x_axis: Option<&[f64]> = x_axis.map(|i| store.series(i).values());
    let times = store.times();
    let x_of = |i: usize| match x_axis {
        Some(xs) => xs.get(i).copied().unwrap_or(f64::NAN),
        None => times[i],
    };
    let mut out = Vec::with_capacity(columns * 2 + 2);
    for (i, [lo, hi]) in store.series(ch).buckets(0, visible, columns) {
        let x = x_of(i);
        if x.is_nan() || lo.is_nan() {
            continue;
        }
        push_column(
            &mut out,
            x,
            (lo - baseline) * scale,
            (hi - baseline) * scale,
        );
    }
    out
}

/// Appends a column (its lowest and highest point at `x`) to a line, x
/// ascending, where a one-point column between two of the same value is
/// left out: the last point of the run moves to `x` instead. The line draws
/// the same, and a flat channel (the common case) costs two points instead
/// of one or two per pixel column: a software rasteriser pays for every
/// segment's triangles at every frame. A run ends on its last column, just
/// before the next value, so [`rates`] come out the same.
pub fn push_column(out: &mut Vec<PlotPoint>, x: f64, lo: f64, hi: f64) {
    if lo == hi
        && let [.., a, b] = out.as_mut_slice()
        && a.y == lo
        && b.y == lo
    {
        b.x = x;
        return;
    }
    out.push(PlotPoint::new(x, lo));
    if hi != lo {
        out.push(PlotPoint::new(x, hi));
    }
}

/// A counter's points as its rate: between consecutive columns, the rise of
/// their highest point (a count only rises) over the x between them; a
/// counter that went back (restarted) draws nothing there.
pub fn rates(pts: &[PlotPoint]) -> Vec<PlotPoint> {
    let mut cols: Vec<PlotPoint> = Vec::with_capacity(pts.len() / 2 + 1);
    for p in pts {
        match cols.last_mut() {
            Some(last) if last.x == p.x => last.y = last.y.max(p.y),
            _ => cols.push(*p),
        }
    }
    cols.windows(2)
        .filter(|w| w[1].x > w[0].x && w[1].y >= w[0].y)
        .map(|w| PlotPoint::new(w[1].x, (w[1].y - w[0].y) / (w[1].x - w[0].x)))
        .collect()
}

fn plots(d: &mut Dashboard, ui: &mut egui::Ui, visible: usize) {
    if let Some(l) = &d.opening {
        ui.centered_and_justified(|ui| {
            ui.label(
                RichText::new(format!(
                    "Reading {} ({})…",
                    l.path.display(),
                    flatline_core::fmt::bytes(l.bytes as f64)
                ))
                .size(18.0),
            )
        });
        return;
    }
    // Plots of the chosen channels, in schema order: each memory channel a
    // row of its own (small multiples on one time axis); other channels of a
    // group and unit share a plot while within MAGNITUDES× of each other, so
    // a 2.5 MiB page table never lies flat on the zero of a 750 MiB RSS.
    // "Grouped" puts a group and unit on one plot whatever the magnitudes.
    // Counters are drawn as rates (per second, or per step on a step axis)
    // unless the person asked for counts: a panel of their own.
    let mut panels: Vec<(PanelKey, Vec<usize>)> = Vec::new();
    // tree.pss gets a plot of its own, the processes' PSS stacked under it.
    let tree = d
        .store
        .schema()
        .index_of("tree.pss")
        .filter(|_| d.settings.selected.contains("tree.pss"));
    for (i, c) in d.store.schema().channels.iter().enumerate() {
        if !d.settings.selected.contains(&c.name) || Some(i) == tree {
            continue;
        }
        let rate = c.kind == Kind::Counter && !d.settings.counts;
        let key = (c.group, c.unit, rate);
        let own_row = !d.settings.grouped && c.unit.is_bytes() && !rate;
        let m = magnitude(d.store.series(i).values());
        // Counters' rates are not their readings' size: they share as before.
        let joins = |k: &PanelKey, chans: &[usize]| {
            (k.0, k.1, k.2) == key
                && k.3.is_none()
                && (d.settings.grouped
                    || rate
                    || within(
                        chans.iter().map(|&j| magnitude(d.store.series(j).values())),
                        m,
                    ))
        };
        match panels.iter_mut().find(|(k, c)| !own_row && joins(k, c)) {
            Some((_, v)) => v.push(i),
            None => panels.push(((c.group, c.unit, rate, own_row.then_some(i)), vec![i])),
        }
    }
    let count = panels.len() + usize::from(tree.is_some());
    if count == 0 {
        ui.centered_and_justified(|ui| ui.label("Choose channels on the left to plot them."));
        return;
    }
    let link = egui::Id::unique("flatline-x");
    // Each plot has a title line and spacing above it.
    // The last plot also holds the shared time axis.
    let height = ((ui.available_height() - 34.0 * count as f32 - X_AXIS) / count as f32).max(80.0);
    let columns = ui.available_width().max(100.0) as usize;
    let capturing = d.capturing();
    // Shift + drag chooses a part of the run (on the time axis) instead of
    // panning: its receipt opens when the drag ends.
    let choosing = ui.input(|i| i.modifiers.shift) || d.selecting.is_some();
    let chosen = d.selecting;
    let x_steps = d.settings.x_steps && d.store.step_axis().is_some();
    let wall = wall_origin(d, x_steps);
    let x_label = if x_steps {
        "step"
    } else {
        "time since the start"
    };
    let marks = marker_lines(d, visible, x_steps);
    let times = &d.store.times()[..visible.min(d.store.times().len())];
    // The data's extent on the axis drawn: every row and the shared axis
    // include it, so their x ranges agree (each plot fitting its own data
    // would set rows that start later apart from the rest).
    let data_x = match d.store.step_axis().filter(|_| x_steps) {
        Some(i) => {
            let steps = d.store.series(i).values();
            let (lo, hi) = steps[..times.len().min(steps.len())]
                .iter()
                .filter(|v| v.is_finite())
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
                    (lo.min(v), hi.max(v))
                });
            if lo <= hi { [lo, hi] } else { [0.0, 0.0] }
        }
        None => [
            times.first().copied().unwrap_or(0.0),
            times.last().copied().unwrap_or(0.0),
        ],
    };
    if x_steps {
        d.zoom = None;
    }
    if let (Some(z), Some(dt)) = (d.zoom, d.detail.as_mut()) {
        dt.poll();
        let held = times.partition_point(|&t| t <= z[1]) - times.partition_point(|&t| t < z[0]);
        let ctx = ui.ctx().clone();
        dt.want(z, held, columns, move || ctx.request_repaint());
    }
    let zoomed = d.zoom.is_some();
    let mut seen_x: Option<[f64; 2]> = None;
    // The rows scroll; the time axis they share stays in view under them.
    let rows_height = (ui.available_height() - X_AXIS - 8.0).max(80.0);
    egui::ScrollArea::vertical()
        .max_height(rows_height)
        .show(ui, |ui| {
            if let Some(tree) = tree {
                let rows = Rows {
                    columns,
                    height,
                    link,
                    data_x,
                };
                tree_plot(d, ui, tree, visible, rows, false);
            }
            for ((group, unit, rate, own), chans) in panels {
                // Values are drawn in the channel's unit, then scaled to the unit
                // that fits what this plot shows (below).
                let scale = 1.0;
                let mut lines = Vec::new();
                for &ch in &chans {
                    let name = d.store.schema().channels[ch].name.clone();
                    let analysis = d.store.analysis(ch);
                    let baseline = if d.settings.drift {
                        analysis
                            .as_ref()
                            .map(|a| a.baseline)
                            .filter(|b| b.is_finite())
                            .unwrap_or(0.0)
                    } else {
                        0.0
                    };
                    let pts = if rate {
                        rates(&decimate(d, ch, visible, columns, 0.0, scale))
                    } else {
                        decimate(d, ch, visible, columns, baseline, scale)
                    };
                    // Jumps found by the analysis, marked on the line: at
                    // their time, or at the step reached by then.
                    let marks: Vec<[f64; 2]> = match &analysis {
                        Some(a) if !rate => a
                            .jump_list
                            .iter()
                            .filter_map(|j| {
                                let idx =
                                    d.store.times()[..visible].partition_point(|&t| t < j.t_s);
                                let v = *d.store.series(ch).values().get(idx)?;
                                let x = jump_x(d, visible, j.t_s, x_steps)?;
                                (!v.is_nan()).then_some([x, (v - baseline) * scale])
                            })
                            .collect(),
                        _ => Vec::new(),
                    };
                    lines.push((name, pts, marks));
                }
                if lines.iter().all(|(_, p, _)| p.is_empty()) {
                    continue; // nothing to draw yet (a channel this workload does not feed)
                }
                // KiB, MiB or GiB (k, M; µs, ms) as the largest value drawn needs.
                let largest = lines
                    .iter()
                    .flat_map(|(_, p, _)| p.iter().map(|p| p.y.abs()))
                    .filter(|y| y.is_finite())
                    .fold(0.0, f64::max);
                let au = axes::unit_for(
                    group,
                    if rate && unit == Unit::Count {
                        Unit::PerSecond
                    } else {
                        unit
                    },
                    largest,
                );
                for (_, pts, marks) in &mut lines {
                    pts.iter_mut().for_each(|p| p.y *= au.scale);
                    marks.iter_mut().for_each(|m| m[1] *= au.scale);
                }
                let per = if x_steps { "step" } else { "s" };
                let label = match (rate, unit) {
                    (false, _) => au.label.clone(),
                    (true, Unit::Count) => au.label.replace("/s", &format!("/{per}")),
                    (true, _) => format!("{}/{per}", au.label),
                };
                // A plot of one channel is titled by it, a shared one by its group.
                let what = match chans.as_slice() {
                    [one] => d.store.schema().channels[*one].name.clone(),
                    _ => group_name(group).to_string(),
                };
                let title = if rate {
                    format!("{what} rates ({label})")
                } else if d.settings.drift {
                    format!("{what} drift ({label})")
                } else if label.is_empty() {
                    what
                } else {
                    format!("{what} ({label})")
                };
                // A flat line should look flat: show at least ±1 % of the level, the
                // band the analysis calls flat, so a few bytes do not fill the plot.
                let (lo, hi) = lines
                    .iter()
                    .flat_map(|(_, p, _)| p.iter().map(|p| p.y))
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), y| {
                        (a.min(y), b.max(y))
                    });
                let mid = (lo + hi) / 2.0;
                let band = if lo.is_finite() && !d.settings.drift && (hi - lo) < 0.02 * mid.abs() {
                    Some((mid - 0.01 * mid.abs(), mid + 0.01 * mid.abs()))
                } else {
                    None
                };
                ui.label(RichText::new(title).strong());
                let signed = d.settings.drift && !rate;
                let shown = linked_plot(
                    ("plot", group as u8, unit as u8, rate, own, chans[0]),
                    height,
                    link,
                    capturing,
                    x_label,
                    // One channel: its name is the plot's title.
                    chans.len() > 1,
                    false,
                )
                .include_y(band.map_or(f64::NAN, |b| b.0))
                .include_y(band.map_or(f64::NAN, |b| b.1))
                // Lines zoomed in are cut to the view: the whole run's ends keep
                // a reset (double-click) going back to all of it.
                .include_x(data_x[0])
                .include_x(data_x[1])
                .y_axis_formatter(move |m, r| axes::y_label(m, r, signed))
                .allow_drag(!choosing || x_steps);
                let shown = wall_clock_axis(shown, wall.as_ref());
                // `f`: back to all of the data.
                let shown = if d.keys.fit { shown.reset() } else { shown };
                let shown = shown.show(ui, |pui| {
                    // Zoomed in on time, the y axis follows what is drawn there.
                    if zoomed && lo.is_finite() {
                        let (lo, hi) = band.unwrap_or((lo, hi));
                        let m = ((hi - lo) * 0.05).max(hi.abs().max(1.0) * 1e-9);
                        pui.set_plot_bounds_y(lo - m..=hi + m);
                    }
                    draw_markers(pui, &marks, band.map_or(hi, |b| b.1.max(hi)));
                    if let Some([a, b]) = chosen {
                        let y = pui.plot_bounds().range_y();
                        let (lo, hi) = (*y.start(), *y.end());
                        pui.polygon(
                            Polygon::new(
                                "",
                                PlotPoints::new(vec![[a, lo], [b, lo], [b, hi], [a, hi]]),
                            )
                            .fill_color(Color32::from_rgba_unmultiplied(120, 160, 220, 40))
                            .stroke(egui::Stroke::new(1.0, Color32::from_rgb(120, 160, 220))),
                        );
                    }
                    for (name, pts, marks) in lines {
                        let has_marks = !marks.is_empty();
                        pui.line(line(name, pts));
                        if has_marks {
                            // Drawn, not listed: a jump is read by hovering it.
                            pui.points(Points::new("", marks).radius(3.0));
                        }
                    }
                });
                if choosing && !x_steps {
                    let r = &shown.response;
                    if let Some(pos) = r.interact_pointer_pos() {
                        let x = shown.transform.value_from_position(pos).x;
                        if r.drag_started() {
                            d.selecting = Some([x, x]);
                        } else if r.dragged()
                            && let Some(sel) = d.selecting.as_mut()
                        {
                            sel[1] = x;
                        }
                    }
                    if r.drag_stopped()
                        && let Some([a, b]) = d.selecting.take()
                        && a != b
                    {
                        d.range_receipt = Some(selection::receipt(d, a.min(b), a.max(b)));
                    }
                }
                if !capturing && let Some(pos) = shown.response.hover_pos() {
                    let x = shown.transform.value_from_position(pos).x;
                    let per_point = 1.0 / shown.transform.dpos_dvalue_x().abs().max(1e-12);
                    let rows = readout(d, &chans, visible, x, x_steps, per_point, rate);
                    if !rows.is_empty() {
                        // At once, not after the tooltip delay: a read-out follows
                        // the pointer as it moves along the plot.
                        egui::Tooltip::for_widget(&shown.response)
                            .at_pointer()
                            .gap(12.0)
                            .show(|ui| {
                                for (i, r) in rows.into_iter().enumerate() {
                                    ui.label(if i == 0 {
                                        RichText::new(r).strong()
                                    } else {
                                        RichText::new(r)
                                    });
                                }
                            });
                    }
                }
                let r = shown.transform.bounds().range_x();
                seen_x = Some([*r.start(), *r.end()]);
            }
        });
    // The shared time axis: a plot with no data, linked to the rows, whose
    // y axis is as wide as theirs so its ticks fall under their times.
    let axis = linked_plot(
        "time-axis",
        X_AXIS + 6.0,
        link,
        capturing,
        x_label,
        false,
        true,
    )
    .show_grid([false, false])
    .show_crosshair(false)
    .show_x(false)
    .show_y(false)
    .allow_drag(false)
    .allow_zoom(false)
    .y_axis_formatter(|_, _| String::new())
    .include_x(data_x[0])
    .include_x(data_x[1]);
    let axis = if d.keys.fit { axis.reset() } else { axis };
    wall_clock_axis(axis, wall.as_ref()).show(ui, |_| {});
    // Zoomed in when the plots show less than 90 % of the data's time.
    d.zoom = seen_x.filter(|v| !x_steps && v[1] - v[0] < 0.9 * (data_x[1] - data_x[0]));
    if std::mem::take(&mut d.keys.fit) {
        d.zoom = None;
    }
}

/// A wall clock to read a time axis on.
#[derive(Debug, Clone, PartialEq)]
struct Wall {
    /// The plots' 0 as the local clock reads it: seconds since 1970 plus
    /// the zone's offset at the run's start (a change of offset during the
    /// run, such as daylight saving time, is not followed).
    origin: f64,
    /// The zone's name as the C library gives it ("CET"), or the offset
    /// ("UTC+5:30") when it has none.
    zone: String,
}

/// The wall clock of the plots' 0, in the local time zone, when the person
/// asked for a wall clock (`t`) on a time axis and the source knows when
/// the run began.
fn wall_origin(d: &Dashboard, x_steps: bool) -> Option<Wall> {
    if !d.settings.wall_clock || x_steps {
        return None;
    }
    let start = d.source.meta().started_unix_ms? as f64 / 1e3;
    Some(Wall::at(
        start,
        flatline_runtime::sys::local_zone(start.floor() as i64),
    ))
}

impl Wall {
    /// The wall clock of a run that began at `start` (seconds since 1970)
    /// in `zone` (its offset east of UTC in seconds and its name; `None`:
    /// UTC).
    fn at(start: f64, zone: Option<(i64, String)>) -> Self {
        let (offset, name) = zone.unwrap_or((0, String::new()));
        let zone = if !name.is_empty() {
            name
        } else if offset == 0 {
            "UTC".to_string()
        } else {
            let sign = if offset < 0 { "-" } else { "+" };
            let m = offset.unsigned_abs() / 60;
            format!("UTC{sign}{}:{:02}", m / 60, m % 60)
        };
        Wall {
            origin: start + offset as f64,
            zone,
        }
    }
}

/// A time axis read on a wall clock, ticks on its round times; unchanged
/// without one.
fn wall_clock_axis<'a>(plot: Plot<'a>, wall: Option<&Wall>) -> Plot<'a> {
    let Some(&Wall { origin, ref zone }) = wall else {
        return plot;
    };
    let spacing = GRID_MIN_SPACING;
    plot.x_grid_spacer(move |g| axes::x_clock_marks(g, spacing, origin))
        .x_axis_formatter(move |m, _| axes::wall(origin + m.value))
        .x_axis_label(format!("wall clock ({zone})"))
}

/// Width of every plot's y axis, in points: room for "1,234.5" and a sign.
const Y_AXIS_WIDTH: f32 = 56.0;

/// Height of the shared time axis under the rows, in points.
const X_AXIS: f32 = 34.0;

/// A plot: its channels' group, unit, whether it shows rates, and the
/// channel when it is that channel's own row.
type PanelKey = (Group, Unit, bool, Option<usize>);

/// Channels whose sizes differ by more than this get plots of their own.
const MAGNITUDES: f64 = 20.0;

/// A channel's size: its latest reading's magnitude (0 before any).
fn magnitude(values: &[f64]) -> f64 {
    values
        .iter()
        .rev()
        .find(|v| !v.is_nan())
        .map_or(0.0, |v| v.abs())
}

/// Whether a channel of size `m` can share a plot with channels of these
/// sizes: all within [`MAGNITUDES`]× of each other (a zero fits anywhere).
fn within(sizes: impl Iterator<Item = f64>, m: f64) -> bool {
    let (lo, hi) = sizes
        .chain([m])
        .filter(|&x| x > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(a, b), x| (a.min(x), b.max(x)));
    hi == 0.0 || hi <= lo * MAGNITUDES
}

/// What a person hovering a plot at `x` reads: the time (and step) there,
/// each of the plot's channels' value at that sample, and any jump the
/// analysis found within 8 points of the pointer, with its size.
fn readout(
    d: &Dashboard,
    chans: &[usize],
    visible: usize,
    x: f64,
    x_steps: bool,
    per_point: f64,
    rate: bool,
) -> Vec<String> {
    let store = &d.store;
    let times = &store.times()[..visible.min(store.times().len())];
    let steps = store.step_axis().map(|i| store.series(i).values());
    // The sample at the pointer, on whichever axis is drawn.
    let idx = match (x_steps, steps) {
        (true, Some(s)) => s[..times.len().min(s.len())].partition_point(|&v| v.is_nan() || v < x),
        _ => times.partition_point(|&t| t < x),
    };
    let Some(&t) = times.get(idx.min(times.len().saturating_sub(1))) else {
        return Vec::new();
    };
    let idx = idx.min(times.len() - 1);
    let mut head = match wall_origin(d, x_steps) {
        Some(w) => format!("{} {}", axes::wall(w.origin + t), w.zone),
        None => axes::clock(t),
    };
    // The step reached by then (a step log writes fewer lines than there are
    // samples, so the sample at the pointer may have none of its own).
    if let Some(step) = step_at(store, visible, t) {
        head.push_str(&format!(
            "  ·  step {}",
            flatline_core::fmt::thousands(step as u64)
        ));
    }
    let mut rows = vec![head];
    for &ch in chans {
        let spec = &store.schema().channels[ch];
        let values = store.series(ch).values();
        let Some(at) = values[..=idx.min(values.len().saturating_sub(1))]
            .iter()
            .rposition(|v| !v.is_nan())
        else {
            continue;
        };
        let v = values[at];
        let shown = if rate {
            // The rate over the sample before: what the line shows there.
            let prev = values[..at].iter().rposition(|v| !v.is_nan());
            match prev {
                Some(p) if times.get(at) > times.get(p) => {
                    let dt = times[at] - times[p];
                    format!("{}/s", value((v - values[p]) / dt, spec.unit))
                }
                _ => continue,
            }
        } else {
            value(v, spec.unit)
        };
        rows.push(format!("{}  {shown}", spec.name));
    }
    if !rate {
        for &ch in chans {
            let spec = &store.schema().channels[ch];
            let Some(a) = store.analysis(ch) else {
                continue;
            };
            for j in &a.jump_list {
                let Some(jx) = jump_x(d, visible, j.t_s, x_steps) else {
                    continue;
                };
                if ((jx - x) / per_point).abs() <= 8.0 {
                    let sign = if j.size >= 0.0 { "+" } else { "-" };
                    // The jump's own time and step, not the pointer's.
                    let step = step_at(store, visible, j.t_s)
                        .map(|s| format!(" (step {})", flatline_core::fmt::thousands(s as u64)))
                        .unwrap_or_default();
                    rows.push(format!(
                        "jump in {}: {sign}{} at {}{step}",
                        spec.name,
                        value(j.size.abs(), spec.unit),
                        axes::clock(j.t_s)
                    ));
                }
            }
        }
    }
    rows
}

/// Where a moment at `t` seconds lies on the x axis drawn: `t` itself, or,
/// with steps as the axis, the step reached by then.
fn jump_x(d: &Dashboard, visible: usize, t: f64, x_steps: bool) -> Option<f64> {
    match d.store.step_axis().filter(|_| x_steps) {
        Some(_) => step_at(&d.store, visible, t),
        None => Some(t),
    }
}

/// The step reached by the sample at `t` seconds; `None` without a step
/// axis or before its first value.
fn step_at(store: &super::Store, visible: usize, t: f64) -> Option<f64> {
    value_at(store, store.step_axis()?, visible, t)
}

/// The markers up to the visible end (a job's evals and checkpoints), as
/// (x, text): the time, or the step when steps are the x axis.
pub fn marker_lines(d: &Dashboard, visible: usize, x_steps: bool) -> Vec<(f64, String)> {
    marker_lines_on(
        &d.store,
        visible,
        d.store.step_axis().filter(|_| x_steps),
        true,
    )
}

/// [`marker_lines`] for any store, placed on channel `x_axis` (a step or
/// token count) or, without one, at their time; with `warmup`, where the
/// start-up ends too.
fn marker_lines_on(
    store: &super::Store,
    visible: usize,
    x_axis: Option<usize>,
    warmup: bool,
) -> Vec<(f64, String)> {
    let times = store.times();
    let Some(last) = visible.checked_sub(1).filter(|&i| i < times.len()) else {
        return Vec::new();
    };
    // Where start-up ended goes with the markers: the analysis starts there.
    // So do the probes' notes (a GPU that stopped answering): moments too.
    let warmup = store
        .warmup()
        .filter(|_| warmup)
        .map(|(t, _)| (t, "warm-up ends".to_string()));
    let mut marks: Vec<(f64, String)> = store
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Marker(text) | EventKind::Note(text) => {
                Some((e.t_ns as f64 / 1e9, text.clone()))
            }
            _ => None,
        })
        .chain(warmup)
        .collect();
    marks.sort_by(|a, b| a.0.total_cmp(&b.0));
    marks
        .into_iter()
        .filter(|(t, _)| *t <= times[last])
        .filter_map(|(t, text)| match x_axis {
            None => Some((t, text.clone())),
            Some(s) => Some((value_at(store, s, visible, t)?, text.clone())),
        })
        .collect()
}

/// Channel `ch`'s last value up to the sample at `t` seconds (the first at
/// or after it), within the first `visible` samples: where a moment lies on
/// a step or token axis. `None` before the channel's first value.
fn value_at(store: &super::Store, ch: usize, visible: usize, t: f64) -> Option<f64> {
    let times = store.times();
    let last = visible.checked_sub(1).filter(|&i| i < times.len())?;
    let i = times[..=last].partition_point(|&x| x < t).min(last);
    store.series(ch).values()[..=i]
        .iter()
        .rev()
        .copied()
        .find(|v| !v.is_nan())
}

/// Most marker labels written on a plot (every marker gets its line).
const MARKER_LABELS: usize = 24;

/// Markers as dashed vertical lines, labelled at the top of the plot;
/// markers closer than 1 % of the x range share a line and a label.
/// Labels sit at `top`, the highest point drawn: a label placed at the
/// plot's own upper bound would widen the bounds it is placed by, frame after
/// frame.
fn draw_markers(pui: &mut PlotUi<'_>, marks: &[(f64, String)], top: f64) {
    let color = Color32::from_rgb(190, 150, 230);
    let bounds = pui.plot_bounds();
    let near = 0.01 * bounds.width();
    let top = if top.is_finite() {
        top
    } else {
        bounds.max()[1]
    };
    let mut merged: Vec<(f64, String)> = Vec::new();
    for (x, text) in marks {
        match merged.last_mut() {
            Some((x0, t0)) if (x - *x0).abs() < near => {
                t0.push_str(" · ");
                t0.push_str(text);
            }
            _ => merged.push((*x, text.clone())),
        }
    }
    for (k, (x, text)) in merged.iter().enumerate() {
        pui.vline(
            VLine::new("", *x)
                .color(color)
                .style(LineStyle::dashed_loose()),
        );
        if k < MARKER_LABELS {
            pui.text(
                Text::new(
                    "",
                    PlotPoint::new(*x, top),
                    RichText::new(text).small().color(color),
                )
                .anchor(egui::Align2::LEFT_TOP),
            );
        }
    }
}

/// A line through `pts` as they are. egui_plot would merge points less
/// than a pixel apart into a band, and fill each band between its
/// neighbours' ranges: a start-up jump in the first pixel column followed by
/// a long flat run (two points, see [`push_column`]) became a wedge across
/// the whole plot, a ramp the data never had. [`decimate`] already keeps
/// about two points a pixel column, so bands save nothing.
fn line(name: impl Into<String>, pts: Vec<PlotPoint>) -> Line<'static> {
    Line::new(name, PlotPoints::Owned(pts)).allow_band(false)
}

/// Grid lines closer than this (in points) are left out rather than faded in:
/// each grid line spans its plot, and a software rasteriser pays for every
/// pixel of every faint one at every frame.
const GRID_MIN_SPACING: f32 = 24.0;

/// A plot whose x axis and cursor follow the others'; no hover read-outs in
/// a screenshot. No background fill: the panel's colour shows through, which
/// saves a pass over most of the window at every frame.
fn linked_plot<'a>(
    id: impl std::hash::Hash + std::fmt::Debug,
    height: f32,
    link: egui::Id,
    capturing: bool,
    x_label: &str,
    legend: bool,
    x_axis: bool,
) -> Plot<'a> {
    let spacing = GRID_MIN_SPACING;
    let plot = if x_label.starts_with("time") {
        Plot::new(id)
            .x_grid_spacer(move |g| axes::x_time_marks(g, spacing))
            .x_axis_formatter(|m, _| axes::clock(m.value))
    } else if x_label == "step" {
        Plot::new(id)
            .x_grid_spacer(move |g| axes::x_step_marks(g, spacing))
            .x_axis_formatter(|m, _| axes::step_label(m.value))
    } else {
        Plot::new(id)
    };
    let plot = if legend {
        plot.legend(Legend::default())
    } else {
        plot
    };
    // Small multiples share one time axis: its ticks and label under the
    // last plot only, which leaves the others their height for data.
    let plot = plot
        .show_axes([x_axis, true])
        // Tick labels from 14 points apart (the text is about 12 high), so a
        // short plot still reads three values; every y axis equally wide, so
        // the rows' times line up.
        .custom_y_axes(vec![
            AxisHints::new_y()
                .label_spacing(14.0..=18.0)
                .min_thickness(Y_AXIS_WIDTH),
        ]);
    plot.y_grid_spacer(move |g| axes::y_marks(g, spacing))
        .y_axis_formatter(|m, r| axes::y_label(m, r, false))
        .height(height)
        .link_axis(link, [true, false])
        .link_cursor(link, [true, false])
        // A wheel or pinch zooms time only; the y axis fits the data.
        .allow_zoom([true, false])
        .show_crosshair(!capturing)
        .show_x(!capturing)
        .show_y(!capturing)
        // The hover read-out (see `readout`) says more than one point's x, y.
        .label_formatter(|_| None)
        .x_axis_label(x_label.to_owned())
        .show_background(false)
        .grid_spacing(egui::Rangef::new(GRID_MIN_SPACING, 300.0))
}

/// Most processes stacked one by one under `tree.pss`; the rest share a band.
const STACKED: usize = 12;

/// `tree.pss` over time with each process's PSS stacked under it, largest
/// at the bottom: where the tree's growth lives, at a glance.
/// Where a plot row goes: the pixel columns its lines are thinned to, its
/// height, and the link that keeps every row on one x axis.
#[derive(Clone, Copy)]
struct Rows {
    columns: usize,
    height: f32,
    link: egui::Id,
    /// The data's extent on the x axis drawn, which every row includes.
    data_x: [f64; 2],
}

fn tree_plot(
    d: &Dashboard,
    ui: &mut egui::Ui,
    tree: usize,
    visible: usize,
    rows: Rows,
    x_axis: bool,
) {
    let Rows {
        columns,
        height,
        link,
        data_x,
    } = rows;
    const MIB: f64 = 1.0 / 1_048_576.0;
    let store = &d.store;
    let x_steps = d.settings.x_steps && store.step_axis().is_some();
    // A reading's x: its time, or the step reached by then (a step log's
    // lines rarely fall on the tree's readings; none yet: not drawn).
    let x_at = |i: usize| match store.step_axis().filter(|_| x_steps) {
        Some(s) => value_at(store, s, visible, store.times()[i]),
        None => Some(store.times()[i]),
    };
    // The rows that carry the processes' readings, thinned to about one per
    // pixel column.
    let rows = store.process_rows();
    let rows = &rows[..rows.partition_point(|&r| r < visible)];
    let stride = rows.len().div_ceil(columns.max(1)).max(1);
    let (picked, xs): (Vec<usize>, Vec<f64>) = rows
        .iter()
        .copied()
        .step_by(stride)
        .filter_map(|r| Some((r, x_at(r)?)))
        .unzip();
    // Largest PSS at the bottom; past STACKED processes, one band for the rest.
    let order: Vec<usize> = process_rows(d, visible)
        .iter()
        .map(|p| p.pss_position)
        .collect();
    let value = |c: usize, r: usize| {
        let v = store.series(c).values().get(r).copied().unwrap_or(f64::NAN);
        if v.is_nan() { 0.0 } else { v * MIB }
    };
    let mut lower = vec![0.0; picked.len()];
    let mut areas = Vec::new();
    let bands: Vec<(String, Vec<usize>)> = order
        .iter()
        .take(STACKED)
        .map(|&c| {
            let spec = &store.schema().channels[c];
            let label = format!(
                "{} {}",
                spec.labels.get("pid").map_or("", String::as_str),
                spec.labels.get("name").map_or("", String::as_str)
            );
            (label, vec![c])
        })
        .chain((order.len() > STACKED).then(|| {
            (
                format!("{} more", order.len() - STACKED),
                order[STACKED..].to_vec(),
            )
        }))
        .collect();
    let mut stacked = Vec::new();
    for (k, (label, chans)) in bands.into_iter().enumerate() {
        let upper: Vec<f64> = picked
            .iter()
            .zip(&lower)
            .map(|(&r, lo)| lo + chans.iter().map(|&c| value(c, r)).sum::<f64>())
            .collect();
        let color = Color32::from_rgb(
            (70 + 37 * k % 150) as u8,
            (120 + 53 * k % 120) as u8,
            (200 - 29 * k % 120) as u8,
        );
        stacked.push((
            label,
            color,
            std::mem::replace(&mut lower, upper.clone()),
            upper,
        ));
    }
    // A column where no band moved, between two where none did either, is
    // left out (as [`push_column`] does for lines): the areas draw the same
    // with far fewer triangles.
    let keep = |j: usize| {
        j == 0
            || j + 1 >= xs.len()
            || !stacked.iter().all(|(_, _, lo, up)| {
                lo[j - 1] == lo[j] && lo[j] == lo[j + 1] && up[j - 1] == up[j] && up[j] == up[j + 1]
            })
    };
    let kept: Vec<usize> = (0..xs.len()).filter(|&j| keep(j)).collect();
    let pick = |v: &[f64]| -> Vec<f64> { kept.iter().map(|&j| v[j]).collect() };
    let kept_xs = pick(&xs);
    for (label, color, lo, up) in &stacked {
        areas.push(
            FilledArea::new(label, &kept_xs, &pick(lo), &pick(up))
                .fill_color(color.gamma_multiply(0.55)),
        );
    }
    let total = decimate(d, tree, visible, columns, 0.0, MIB);
    if total.is_empty() && areas.is_empty() {
        return;
    }
    ui.label(RichText::new("Process tree: PSS of each process, stacked (MiB)").strong());
    let x_label = if x_steps {
        "step"
    } else {
        "time since the start"
    };
    let plot = linked_plot(
        "plot-tree",
        if x_axis { height + X_AXIS } else { height },
        link,
        d.capturing(),
        x_label,
        true,
        x_axis,
    )
    .include_y(0.0)
    .include_x(data_x[0])
    .include_x(data_x[1]);
    let plot = if d.keys.fit { plot.reset() } else { plot };
    let plot = wall_clock_axis(plot, wall_origin(d, x_steps).as_ref());
    plot.show(ui, |pui| {
        for a in areas {
            pui.add(a);
        }
        let top = lower
            .iter()
            .chain(total.iter().map(|p| &p.y))
            .copied()
            .fold(0.0, f64::max);
        pui.line(line("tree.pss", total).width(2.0));
        draw_markers(pui, &marker_lines(d, visible, x_steps), top);
    });
}

fn browser(d: &mut Dashboard, ui: &mut egui::Ui, actions: &mut Vec<Action>) {
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
            for f in &d.listed {
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
        d.browser_open = false;
    }
}

#[cfg(test)]
mod tests {
    use flatline_runtime::analysis::LiveAnalysis;
    use flatline_runtime::telemetry::{ChannelSpec, Group, Unit};

    use super::*;

    /// Growth is red; the same trend downwards is not an alarm.
    #[test]
    fn shrinking_memory_is_not_coloured_as_a_leak() {
        let rss = ChannelSpec::new("mem.rss", Unit::Bytes, Group::Memory);
        let mut live = LiveAnalysis::new(&[rss.clone(), rss]);
        for k in 0..600 {
            let t = k as f64 * 0.1;
            let wobble = [0.0, 4096.0, -4096.0, 0.0][k % 4];
            let v = |i: usize| 5e8 + wobble + if i == 0 { 1.0 } else { -1.0 } * t * 1048576.0;
            live.push(t, v, f64::NAN, f64::NAN);
        }
        live.refresh(None);
        let (up, down) = (live.analysis(0).unwrap(), live.analysis(1).unwrap());
        assert_eq!(
            (up.verdict, down.verdict),
            (Verdict::Linear, Verdict::Linear)
        );
        assert_eq!(verdict_color(up), Color32::from_rgb(220, 70, 60));
        assert_eq!(verdict_color(down), NEUTRAL);
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
