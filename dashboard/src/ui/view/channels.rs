//! The left panel: channels by group with their verdict badges, and the
//! processes of a watched tree.

use super::*;

pub(super) fn group_name(g: Group) -> &'static str {
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

/// The one meaning colour has outside the lines (which say whose data they
/// are): how urgent a finding is, the same on a badge, a card and the
/// banner. Growth's severity first (red: its limit within 24 h; amber:
/// within 7 days; tan: it grows, its limit far or unknown), then what is
/// not growth: green for flat, blue-grey for what moves without growing
/// (noise, bursts, memory that shrinks), grey for what cannot be told.
pub(super) const CRITICAL: Color32 = Color32::from_rgb(220, 70, 60);
pub(super) const WARNING: Color32 = Color32::from_rgb(225, 165, 40);
pub(super) const GROWS: Color32 = Color32::from_rgb(200, 170, 110);
pub(super) const FLAT: Color32 = Color32::from_rgb(70, 175, 95);
pub(super) const NEUTRAL: Color32 = Color32::from_rgb(120, 140, 200);
pub(super) const UNTOLD: Color32 = Color32::GRAY;

pub(super) fn severity_color(s: Severity) -> Color32 {
    match s {
        Severity::Critical => CRITICAL,
        Severity::Warning => WARNING,
        Severity::Info => GROWS,
    }
}

/// A badge's colour (see [`CRITICAL`]): memory that shrinks steadily or in
/// steps is not an alarm (the headline and `--fail-on` count growth only).
pub(super) fn verdict_color(a: &ChannelAnalysis) -> Color32 {
    if a.verdict.is_growth() && a.slope_per_s < 0.0 {
        return NEUTRAL;
    }
    if let Some(s) = a.severity {
        return severity_color(s);
    }
    match a.verdict {
        Verdict::Flat | Verdict::Stable | Verdict::Steady | Verdict::Held => FLAT,
        Verdict::Staircase
        | Verdict::Linear
        | Verdict::Rising
        | Verdict::DriftingUp
        | Verdict::Rose => GROWS,
        Verdict::Noisy | Verdict::Bursty | Verdict::Falling | Verdict::DriftingDown => NEUTRAL,
        Verdict::Insufficient => UNTOLD,
    }
}

pub(super) fn badge(ui: &mut egui::Ui, a: Option<&ChannelAnalysis>) {
    let Some(a) = a else { return };
    let c = verdict_color(a);
    ui.label(
        RichText::new(a.verdict.as_str())
            .small()
            .color(Color32::BLACK)
            .background_color(c),
    );
}

pub(super) fn channels(d: &mut Dashboard, ui: &mut egui::Ui, visible: usize) {
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

/// `tree.procs` at its last reading before sample `visible`.
fn tree_procs(d: &Dashboard, visible: usize) -> Option<usize> {
    let store = &d.store;
    let i = store
        .schema()
        .channels
        .iter()
        .position(|c| c.name == "tree.procs")?;
    let series = store.series(i);
    let r = series.last_reading_before(visible)?;
    let n = *series.values().get(r)?;
    (n.is_finite() && n >= 0.0).then_some(n as usize)
}

/// The processes panel: one row per process of the watched tree; a click
/// plots its channels.
pub(super) fn processes(d: &mut Dashboard, ui: &mut egui::Ui, visible: usize) {
    let rows = process_rows(d, visible);
    if rows.is_empty() {
        return;
    }
    let live = rows.iter().filter(|r| r.exited_s.is_none()).count();
    // The tree's own count: processes without channels of their own (flat
    // ones waiting while room is kept for those that copy) are not rows.
    let in_tree = tree_procs(d, visible).filter(|&n| n > live);
    let title = match in_tree {
        Some(n) => {
            format!("Processes ({n} live, {live} with channels of their own; all in tree.*)")
        }
        None => format!("Processes ({live} live, {} seen)", rows.len()),
    };
    egui::CollapsingHeader::new(title)
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

pub(super) fn channel_row(d: &mut Dashboard, ui: &mut egui::Ui, i: usize, visible: usize) {
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
        // The figures first, from the right; the name takes what is left
        // and is elided, whole on hover, rather than drawn under them.
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
            ui.with_layout(egui::Layout::left_to_right(egui::Align::Center), |ui| {
                let r = elided_checkbox(ui, &mut on, &spec.name);
                if r.changed() {
                    if on {
                        d.settings.selected.insert(spec.name.clone());
                    } else {
                        d.settings.selected.remove(&spec.name);
                    }
                }
            });
        });
    });
}

/// A checkbox whose name is elided to the space left, and said whole on
/// hover when it is.
pub(super) fn elided_checkbox(ui: &mut egui::Ui, on: &mut bool, name: &str) -> egui::Response {
    let font = egui::TextStyle::Body.resolve(ui.style());
    let s = ui.spacing();
    let wants = ui
        .painter()
        .layout_no_wrap(name.to_owned(), font, Color32::WHITE)
        .size()
        .x
        + s.icon_width
        + s.icon_spacing;
    let elided = wants > ui.available_width();
    ui.style_mut().wrap_mode = Some(egui::TextWrapMode::Truncate);
    let r = ui.checkbox(on, name);
    if elided { r.on_hover_text(name) } else { r }
}
