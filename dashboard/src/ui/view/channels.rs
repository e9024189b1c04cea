//! The left panel: channels by group with their verdict badges, and the
//! processes of a watched tree.

use super::frame::{Action, Frame};
use crate::ui::shared::ProcessesState;
use eframe::egui::{self, Color32, RichText};
use flatline_analysis::{ChannelAnalysis, Severity, Verdict};
use flatline_receipt::fmt::{bytes, value};
use flatline_telemetry::Group;
use flatline_telemetry::names;
use flatline_telemetry::recording::EventKind;
use std::collections::BTreeMap;

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

pub(super) fn channels(
    d: &Frame<'_>,
    mine: &mut ProcessesState,
    ui: &mut egui::Ui,
    visible: usize,
    actions: &mut Vec<Action>,
) {
    egui::Panel::left("channels")
        .resizable(true)
        .default_size(330.0)
        .show(ui, |ui| {
            egui::ScrollArea::vertical().show(ui, |ui| {
                processes(d, mine, ui, visible, actions);
                sites(d, ui, visible, actions);
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
                                channel_row(d, ui, i, visible, actions);
                            }
                        });
                }
            });
        });
}

/// The allocation sites of a `watch --sites` stream (`site<N>.live`):
/// growing ones first (by their slope), then by the bytes they hold; each
/// a channel row, then where it is, its stack on hover.
fn sites(d: &Frame<'_>, ui: &mut egui::Ui, visible: usize, actions: &mut Vec<Action>) {
    let schema = d.store.schema();
    // A job frees what it holds as it exits: past the start of its
    // teardown a site reads what it held then, as the receipt does, not
    // the nothing it holds once freed.
    let held_until = super::flame::held_until(d, visible);
    let mut rows: Vec<(f64, f64, usize)> = schema
        .channels
        .iter()
        .enumerate()
        .filter(|(_, c)| flatline_analysis::rules::is_site_channel(&c.name))
        .map(|(i, _)| {
            let a = d.store.analysis(i);
            let growth = a
                .filter(|a| a.verdict.is_growth())
                .map_or(0.0, |a| a.slope_per_s.max(0.0));
            let held = super::flame::held(d.store.series(i).values(), held_until);
            (growth, held, i)
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    rows.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.total_cmp(&a.1)));
    let growing = rows.iter().filter(|r| r.0 > 0.0).count();
    egui::CollapsingHeader::new(format!(
        "Allocation sites ({}, {growing} growing)",
        rows.len()
    ))
    .default_open(true)
    .show(ui, |ui| {
        for (_, _, i) in rows {
            // Named by its code, its channel under it.
            let labels = &d.store.schema().channels[i].labels;
            let get = |k: &str| labels.get(k).map_or("", String::as_str);
            let file = get("file").rsplit('/').next().unwrap_or_default();
            let place = match get("line") {
                "" | "0" => format!("{} {}", get("function"), file),
                line => format!("{file}:{line} {}", get("function")),
            };
            let mut stack = format!("pid {}\n", get("pid"));
            if !get("code").is_empty() {
                stack.push_str(&format!("{}\n", get("code")));
            }
            stack.push_str(get("frames"));
            let channel = d.store.schema().channels[i].name.clone();
            // The site a growth card pointed at is marked.
            let place = if d
                .focus
                .is_some_and(|f| f.site.as_deref() == Some(channel.as_str()))
            {
                format!("» {place}")
            } else {
                place
            };
            channel_row_named(d, ui, i, held_until, &place, actions);
            ui.label(
                RichText::new(format!("    {channel}, pid {}", get("pid")))
                    .small()
                    .weak(),
            )
            .on_hover_text(stack);
        }
    });
}

/// One process of the watched tree, as the processes panel lists it.
#[derive(Debug, Clone)]
pub struct ProcessRow {
    /// Its channels' stem: `pid4242`.
    pub stem: String,
    pub pid: u32,
    pub ppid: u32,
    pub role: String,
    pub name: String,
    /// Latest readings up to the visible end, in bytes.
    pub rss: Option<f64>,
    pub pss: Option<f64>,
    pub uss: Option<f64>,
    /// Its PSS channel; `None` for a process without channels of its own
    /// (flat ones wait, in `tree.*`, while room is kept for those that copy).
    pub pss_position: Option<usize>,
    /// Its USS channel.
    pub uss_position: Option<usize>,
    /// When it exited (seconds), if it has by the visible end.
    pub exited_s: Option<f64>,
    /// Its own PSS or USS grew, or rose and held, by the rule any channel's
    /// growth is told by.
    pub grew: bool,
}

/// The processes of the watched tree over samples `[0, visible)`: live ones
/// first (those without channels of their own among them, from the tree's
/// start events), those that grew first, then by PSS, largest first; then
/// the ones that exited (with channels only: a fork storm's thousands of
/// brief children are counted by the tree, not listed).
pub fn process_rows(d: &Frame<'_>, visible: usize) -> Vec<ProcessRow> {
    let store = &d.store;
    let schema = store.schema();
    let until = match visible {
        0 => f64::NEG_INFINITY,
        n => store.times().get(n - 1).copied().unwrap_or(f64::INFINITY),
    };
    let mut exits: BTreeMap<u32, f64> = BTreeMap::new();
    // pid → (ppid, name, role) of its latest start by `until`.
    let mut started: BTreeMap<u32, (u32, &str, &str)> = BTreeMap::new();
    for e in store.events() {
        let t = e.t_ns as f64 / 1e9;
        if t > until {
            continue;
        }
        match &e.kind {
            EventKind::ProcessExited { pid, .. } => {
                exits.insert(*pid, t);
            }
            EventKind::ProcessStarted {
                pid,
                ppid,
                name,
                role,
            } => {
                started.insert(*pid, (*ppid, name, role));
                exits.remove(pid);
            }
            _ => {}
        }
    }
    let pss = store.process_pss();
    let leaves = store.process_leaves();
    let grew = |i: Option<usize>| i.and_then(|i| store.analysis(i)).is_some_and(|a| a.rose());
    // Who grew is the tree summary's word, the receipt's (a parent whose
    // pages its workers copied rose in USS, and grew nothing), where the
    // banner has made it.
    let tree_grew = d.findings.tree().map(|t| &t.grew);
    // Each process's latest reading before `visible`, found through its
    // PSS pyramid: a few steps per process however long ago it exited
    // (walking back sample by sample cost a week's replay most of its time).
    let mut out: Vec<ProcessRow> = pss
        .iter()
        .zip(leaves)
        .map(|(&i, &[rss, uss])| {
            let c = &schema.channels[i];
            let label = |k: &str| c.labels.get(k).and_then(|p| p.parse().ok()).unwrap_or(0);
            let pid = label("pid");
            let last = store.series(i).last_reading_before(visible);
            let at = |ch: Option<usize>, r: usize| {
                ch.and_then(|ch| store.series(ch).values().get(r).copied())
                    .filter(|v| !v.is_nan())
            };
            ProcessRow {
                pid,
                ppid: label("ppid"),
                role: c.labels.get("role").cloned().unwrap_or_default(),
                name: c.labels.get("name").cloned().unwrap_or_default(),
                rss: last.and_then(|r| at(rss, r)),
                pss: last.and_then(|r| at(Some(i), r)),
                uss: last.and_then(|r| at(uss, r)),
                pss_position: Some(i),
                uss_position: uss,
                // A process whose pid came back later: only the newest exit counts.
                exited_s: exits.get(&pid).copied().filter(|_| last.is_some()),
                stem: c.name.trim_end_matches(".pss").to_owned(),
                grew: tree_grew.map_or_else(|| grew(Some(i)) || grew(uss), |g| g.contains(&pid)),
            }
        })
        .collect();
    out.retain(|p| p.pss.is_some());
    let listed: std::collections::BTreeSet<u32> = out
        .iter()
        .filter(|r| r.exited_s.is_none())
        .map(|r| r.pid)
        .collect();
    out.extend(
        started
            .into_iter()
            .filter(|(pid, _)| !exits.contains_key(pid) && !listed.contains(pid))
            .map(|(pid, (ppid, name, role))| ProcessRow {
                stem: format!("pid{pid}"),
                pid,
                ppid,
                role: role.to_owned(),
                name: name.to_owned(),
                rss: None,
                pss: None,
                uss: None,
                pss_position: None,
                uss_position: None,
                exited_s: None,
                grew: false,
            }),
    );
    out.sort_by(|a, b| {
        (a.exited_s.is_some(), !a.grew, b.pss.unwrap_or(-1.0))
            .partial_cmp(&(b.exited_s.is_some(), !b.grew, a.pss.unwrap_or(-1.0)))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    out
}

/// Past this many rows the processes panel groups them (see
/// [`process_groups`]); a small tree is one plain list.
pub const GROUP_ABOVE: usize = 16;

/// Live processes of the panel, grouped: a process whose children are
/// listed heads a group of those children that have none of their own
/// (a rank and its DataLoader workers); any other process heads a group of
/// one. Groups where something grew come first, then by the PSS they hold;
/// within a group, those that grew first (as [`process_rows`] orders them).
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessGroup {
    /// Index in the rows.
    pub head: usize,
    pub members: Vec<usize>,
}

impl ProcessGroup {
    /// Members that did not grow: folded under one line.
    pub fn flat<'r>(&self, rows: &'r [ProcessRow]) -> Vec<&'r ProcessRow> {
        self.members
            .iter()
            .map(|&m| &rows[m])
            .filter(|r| !r.grew)
            .collect()
    }
}

pub fn process_groups(rows: &[ProcessRow]) -> Vec<ProcessGroup> {
    let live: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i].exited_s.is_none())
        .collect();
    let index: BTreeMap<u32, usize> = live.iter().map(|&i| (rows[i].pid, i)).collect();
    let parents: std::collections::BTreeSet<u32> = live
        .iter()
        .map(|&i| rows[i].ppid)
        .filter(|p| index.contains_key(p))
        .collect();
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for &i in &live {
        let r = &rows[i];
        match index.get(&r.ppid) {
            Some(&p) if !parents.contains(&r.pid) && p != i => {
                groups.entry(p).or_default().push(i);
            }
            _ => {
                groups.entry(i).or_default();
            }
        }
    }
    let mut out: Vec<ProcessGroup> = groups
        .into_iter()
        .map(|(head, members)| ProcessGroup { head, members })
        .collect();
    let weigh = |g: &ProcessGroup| {
        let all = || std::iter::once(g.head).chain(g.members.iter().copied());
        let grew = all().any(|i| rows[i].grew);
        let pss: f64 = all().filter_map(|i| rows[i].pss).sum();
        (!grew, -pss)
    };
    out.sort_by(|a, b| {
        weigh(a)
            .partial_cmp(&weigh(b))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    out
}

/// `tree.procs` at its last reading before sample `visible`.
fn tree_procs(d: &Frame<'_>, visible: usize) -> Option<usize> {
    let store = &d.store;
    let i = store
        .schema()
        .channels
        .iter()
        .position(|c| c.name == names::TREE_PROCS)?;
    let series = store.series(i);
    let r = series.last_reading_before(visible)?;
    let n = *series.values().get(r)?;
    (n.is_finite() && n >= 0.0).then_some(n as usize)
}

/// A row's badge: the verdict of its PSS, or of its USS where that one is
/// the more telling (a process copying its parent's pages grows in USS
/// while the PSS it shares moves both ways); "rose, held" for a rise that
/// stopped.
fn process_badge(d: &Frame<'_>, ui: &mut egui::Ui, r: &ProcessRow) {
    let [pss, uss] = [r.pss_position, r.uss_position].map(|i| i.and_then(|i| d.store.analysis(i)));
    let growth = |a: &Option<&ChannelAnalysis>| a.is_some_and(|a| a.verdict.is_growth());
    let held = |a: &Option<&ChannelAnalysis>| a.is_some_and(ChannelAnalysis::rose_and_held);
    if growth(&pss) || !growth(&uss) && !held(&uss) && !held(&pss) {
        return badge(ui, pss);
    }
    if growth(&uss) {
        return badge(ui, uss);
    }
    ui.label(
        RichText::new("rose, held")
            .small()
            .color(Color32::BLACK)
            .background_color(GROWS),
    )
    .on_hover_text("its own memory rose, then stopped growing");
}

/// The processes panel: one row per process of the watched tree; a click
/// plots its channels. Past [`GROUP_ABOVE`] rows, workers are grouped under
/// their parent, those that grew first, and the flat ones fold into a line.
pub(super) fn processes(
    d: &Frame<'_>,
    mine: &mut ProcessesState,
    ui: &mut egui::Ui,
    visible: usize,
    actions: &mut Vec<Action>,
) {
    let rows = process_rows(d, visible);
    if rows.is_empty() {
        return;
    }
    let live = rows.iter().filter(|r| r.exited_s.is_none()).count();
    let own = rows
        .iter()
        .filter(|r| r.exited_s.is_none() && r.pss_position.is_some())
        .count();
    let n = tree_procs(d, visible).map_or(live, |n| n.max(live));
    let title = if own < n {
        format!("Processes ({n} live, {own} with channels of their own; all in tree.*)")
    } else {
        format!("Processes ({live} live, {} seen)", rows.len())
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
                    if rows.len() <= GROUP_ABOVE {
                        for r in &rows {
                            process_row(d, ui, r, false, actions);
                        }
                        return;
                    }
                    for g in process_groups(&rows) {
                        process_row(d, ui, &rows[g.head], false, actions);
                        let flat = g.flat(&rows);
                        for &m in &g.members {
                            if rows[m].grew || flat.len() < 2 {
                                process_row(d, ui, &rows[m], true, actions);
                            }
                        }
                        if flat.len() >= 2 {
                            let head = rows[g.head].pid;
                            if folded(mine, ui, head, "flat", &flat) {
                                for r in flat {
                                    process_row(d, ui, r, true, actions);
                                }
                            }
                        }
                    }
                    let gone: Vec<&ProcessRow> =
                        rows.iter().filter(|r| r.exited_s.is_some()).collect();
                    if gone.len() >= 2 {
                        if folded(mine, ui, 0, "exited", &gone) {
                            for r in gone {
                                process_row(d, ui, r, false, actions);
                            }
                        }
                    } else {
                        for r in gone {
                            process_row(d, ui, r, false, actions);
                        }
                    }
                });
        });
}

/// One line for several processes (a group's flat workers, those that
/// exited): their count, role and summed readings; a click unfolds them.
/// Whether they are unfolded.
fn folded(
    mine: &mut ProcessesState,
    ui: &mut egui::Ui,
    key: u32,
    what: &str,
    rows: &[&ProcessRow],
) -> bool {
    let open = mine.unfolded.contains(&key);
    let arrow = if open { "–" } else { "+" };
    let text = |t: String| RichText::new(t).small().weak();
    if ui
        .selectable_label(
            open,
            RichText::new(format!("{arrow} {}", rows.len())).small(),
        )
        .on_hover_text(if open { "fold them" } else { "list them" })
        .clicked()
        && !mine.unfolded.remove(&key)
    {
        mine.unfolded.insert(key);
    }
    let mut roles: BTreeMap<&str, usize> = BTreeMap::new();
    for r in rows {
        *roles.entry(r.role.as_str()).or_default() += 1;
    }
    let role = roles
        .iter()
        .max_by_key(|(_, n)| **n)
        .map_or("", |(r, _)| *r);
    ui.label(text(format!("{role}s")));
    let bare = rows.iter().filter(|r| r.pss_position.is_none()).count();
    ui.label(text(match bare {
        0 => what.to_owned(),
        n => format!("{what}; {n} in tree.* only"),
    }));
    for f in [
        |r: &ProcessRow| r.rss,
        |r: &ProcessRow| r.pss,
        |r: &ProcessRow| r.uss,
    ] {
        let read: Vec<f64> = rows.iter().filter_map(|r| f(r)).collect();
        let sum = (!read.is_empty()).then(|| read.iter().sum::<f64>());
        ui.label(text(sum.map_or("–".into(), |v| format!("Σ {}", bytes(v)))).monospace());
    }
    ui.label("");
    ui.end_row();
    open
}

fn process_row(
    d: &Frame<'_>,
    ui: &mut egui::Ui,
    r: &ProcessRow,
    indent: bool,
    actions: &mut Vec<Action>,
) {
    let gone = r.exited_s.is_some();
    let text = |t: String| {
        let t = RichText::new(t).small();
        if gone { t.weak() } else { t }
    };
    // The process a growth card pointed at is marked.
    let marked = d.focus.is_some_and(|f| f.pid == Some(r.pid));
    let pid = match (indent, marked) {
        (_, true) => format!("» {}", r.pid),
        (true, false) => format!("  {}", r.pid),
        (false, false) => r.pid.to_string(),
    };
    if r.pss_position.is_some() {
        let names = ["rss", "pss", "uss"].map(|l| format!("{}.{l}", r.stem));
        let on = d.settings.selected.contains(&names[1]);
        if ui
            .selectable_label(on, text(pid).monospace())
            .on_hover_text("plot this process's RSS, PSS and USS")
            .clicked()
        {
            if on {
                actions.extend(names.into_iter().map(Action::Unplot));
            } else {
                actions.push(Action::Plot(names.to_vec()));
            }
        }
    } else {
        ui.label(text(pid).monospace());
    }
    ui.label(text(r.role.clone()));
    // Where its memory grew, where its `smaps` readings say: the class
    // beside its name, the words on hover.
    let place = d
        .findings
        .tree()
        .and_then(|t| t.processes.iter().find(|p| p.pid == r.pid))
        .and_then(|p| p.where_.as_ref());
    match place {
        Some(w) => {
            let class = match w.largest.as_str() {
                "file" => "page cache",
                "anon" => "anonymous",
                other => other,
            };
            ui.label(text(format!(
                "{}  {class} {:.0} %",
                r.name,
                100.0 * w.share
            )))
            .on_hover_text(format!(
                "where it grew, {:.1}–{:.1} s: {}",
                w.from_s, w.to_s, w.text
            ));
        }
        None => {
            ui.label(text(r.name.clone()));
        }
    }
    for v in [r.rss, r.pss, r.uss] {
        ui.label(text(v.map_or("–".into(), bytes)).monospace());
    }
    // How it died, where the banner's reading of the ending says.
    let death = d
        .findings
        .facts
        .as_ref()
        .and_then(|f| f.ending.deaths.iter().find(|x| x.pid == r.pid));
    match (r.exited_s, death) {
        (Some(t), Some(x)) => {
            let how = match x.cause {
                flatline_analysis::death::Cause::Signal => {
                    format!("killed by signal {} {t:.1} s", x.signal.unwrap_or(0))
                }
                _ => format!("OOM-killed {t:.1} s"),
            };
            ui.label(RichText::new(how).small().strong().color(CRITICAL))
                .on_hover_text(x.evidence.join("\n"));
        }
        (Some(t), None) => {
            ui.label(text(format!("exited {t:.1} s")));
        }
        (None, _) if r.pss_position.is_none() => {
            ui.label(RichText::new("in tree.*").small().weak())
                .on_hover_text(
                    "no channels of its own: it is flat, and room is kept for processes whose \
                 pages are being copied; its memory is in tree.*",
                );
        }
        (None, _) => process_badge(d, ui, r),
    }
    ui.end_row();
}

pub(super) fn channel_row(
    d: &Frame<'_>,
    ui: &mut egui::Ui,
    i: usize,
    visible: usize,
    actions: &mut Vec<Action>,
) {
    let name = d.store.schema().channels[i].name.clone();
    channel_row_named(d, ui, i, visible, &name, actions);
}

/// [`channel_row`] under another name than its channel's (a site's code).
fn channel_row_named(
    d: &Frame<'_>,
    ui: &mut egui::Ui,
    i: usize,
    visible: usize,
    label: &str,
    actions: &mut Vec<Action>,
) {
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
                let r = elided_checkbox(ui, &mut on, label);
                if r.changed() {
                    actions.push(if on {
                        Action::Plot(vec![spec.name.clone()])
                    } else {
                        Action::Unplot(spec.name.clone())
                    });
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

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pid: u32, ppid: u32, role: &str, pss: f64, grew: bool) -> ProcessRow {
        ProcessRow {
            stem: format!("pid{pid}"),
            pid,
            ppid,
            role: role.into(),
            name: "python3".into(),
            rss: Some(pss),
            pss: Some(pss),
            uss: Some(pss / 2.0),
            pss_position: Some(pid as usize),
            uss_position: None,
            exited_s: None,
            grew,
        }
    }

    /// A launcher, two ranks and their workers: each rank heads its
    /// workers, the launcher (whose children head groups of their own) is
    /// alone, the group where a worker grew comes first whatever its size,
    /// and only that worker is left out of the folded flat ones.
    #[test]
    fn workers_are_grouped_under_their_rank_and_the_group_that_grew_comes_first() {
        let mut rows = vec![row(100, 1, "main", 5e6, false)];
        rows.push(row(200, 100, "rank", 900e6, false));
        rows.extend((201..=205).map(|p| row(p, 200, "worker", 300e6, false)));
        rows.push(row(300, 100, "rank", 400e6, false));
        rows.extend((301..=303).map(|p| row(p, 300, "worker", 100e6, p == 302)));
        let mut gone = row(400, 100, "worker", 1e6, false);
        gone.exited_s = Some(3.0);
        rows.push(gone);
        let pids = |g: &ProcessGroup| -> (u32, Vec<u32>) {
            (
                rows[g.head].pid,
                g.members.iter().map(|&m| rows[m].pid).collect(),
            )
        };
        let groups = process_groups(&rows);
        let got: Vec<_> = groups.iter().map(pids).collect();
        assert_eq!(
            got,
            vec![
                (300, vec![301, 302, 303]),
                (200, vec![201, 202, 203, 204, 205]),
                (100, vec![]),
            ]
        );
        let flat: Vec<u32> = groups[0].flat(&rows).iter().map(|r| r.pid).collect();
        assert_eq!(flat, [301, 303]);
    }
}
