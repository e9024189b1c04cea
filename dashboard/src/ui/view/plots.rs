//! The plots: small multiples on one time (or step) axis, linked, with a
//! read-out under the pointer and a wall-clock axis.

use super::axes;
use super::channels::group_name;
use super::frame::{Action, Frame};
use super::kit::{
    DATA, PanelKey, TICK_CHAR_W, Wall, X_AXIS, Y_AXIS_WIDTH, jump_x, line, linked_plot, magnitude,
    pixel_seconds, readout, runs, strip, wall_clock_axis, wall_origin, within,
};
use super::markers::{LANE, Mark, draw_markers, lane_plot, marks};
use super::series::decimate;
use super::series::rates;
use super::tree::{Rows, tree_plot};
use crate::ui::shared::{KeyState, PlotsState};
use eframe::egui::{self, Color32, RichText};
use egui_plot::{PlotPoint, PlotPoints, Points, Polygon};
use flatline_analysis::Kind;
use flatline_telemetry::names;
use flatline_telemetry::{Group, Unit};

pub(super) fn plots(
    d: &Frame<'_>,
    keys: &KeyState,
    mine: &mut PlotsState,
    ui: &mut egui::Ui,
    visible: usize,
    actions: &mut Vec<Action>,
) {
    if let Some(l) = &d.opening {
        ui.centered_and_justified(|ui| {
            ui.label(
                RichText::new(format!(
                    "Reading {} ({})…",
                    l.path.display(),
                    flatline_receipt::fmt::bytes(l.bytes as f64)
                ))
                .size(18.0),
            )
        });
        return;
    }
    let (tree, panels) = panels(d);
    let count = panels.len() + usize::from(tree.is_some());
    if count == 0 {
        ui.centered_and_justified(|ui| ui.label("Choose channels on the left to plot them."));
        return;
    }
    let f = frame_of(d, mine, ui, visible, count);
    if let (Some(z), Some(_)) = (mine.zoom, d.detail) {
        let times = &d.store.times()[..visible.min(d.store.times().len())];
        let held = times.partition_point(|&t| t <= z[1]) - times.partition_point(|&t| t < z[0]);
        actions.push(Action::Detail {
            view: z,
            held,
            columns: f.rows.columns,
        });
    }
    let mut seen_x: Option<[f64; 2]> = None;
    let mut plot_w = 0.0_f32;
    // The rows scroll; the time axis they share stays in view under them.
    // More rows than fit: the view holds whole rows only (the rest a
    // scroll away), never a plot cut in half at the axis.
    let room = (ui.available_height() - X_AXIS - 8.0 - f.lane_h).max(80.0);
    // The rows as last drawn, else as planned.
    let row = mine.row_h.unwrap_or(f.rows.height + ROW_CHROME);
    let rows_height = if f.overflow {
        (room / row).floor().max(1.0) * row
    } else {
        room
    };
    let mut tallest = 0.0_f32;
    egui::ScrollArea::vertical()
        .max_height(rows_height)
        .show(ui, |ui| {
            let mut measure = |ui: &egui::Ui, top: f32| {
                tallest = tallest.max(ui.cursor().top() - top);
            };
            if let Some(tree) = tree {
                let top = ui.cursor().top();
                tree_plot(d, keys, ui, tree, visible, f.rows, false);
                measure(ui, top);
            }
            for (key, chans) in panels {
                let top = ui.cursor().top();
                if let Some((x, w)) =
                    panel(d, keys, &mut mine.selecting, ui, &f, key, &chans, actions)
                {
                    seen_x = Some(x);
                    plot_w = w;
                }
                measure(ui, top);
            }
        });
    if tallest > 0.0 {
        mine.row_h = Some(tallest);
    }
    shared_axis(keys, ui, &f);
    let times = &d.store.times()[..visible.min(d.store.times().len())];
    mine.pixel_s = seen_x.and_then(|v| pixel_seconds(v, f.rows.data_x, times, plot_w, f.x_steps));
    // Zoomed in when the plots show less than 90 % of the data's time.
    let data_x = f.rows.data_x;
    mine.zoom = seen_x.filter(|v| !f.x_steps && v[1] - v[0] < 0.9 * (data_x[1] - data_x[0]));
    if keys.fit {
        mine.zoom = None;
    }
}

/// Which plots the chosen channels make, in schema order: `tree.pss`'s
/// own (its processes stacked under it), if chosen, and the panels. Each
/// memory channel a row of its own (small multiples on one time axis);
/// other channels of a group and unit share a plot while within
/// MAGNITUDES× of each other, so a 2.5 MiB page table never lies flat on
/// the zero of a 750 MiB RSS. "Grouped" puts a group and unit on one plot
/// whatever the magnitudes. Counters are drawn as rates (per second, or per
/// step on a step axis) unless the person asked for counts: a panel of
/// their own.
pub(super) fn panels(d: &Frame<'_>) -> (Option<usize>, Vec<(PanelKey, Vec<usize>)>) {
    let mut panels: Vec<(PanelKey, Vec<usize>)> = Vec::new();
    let tree = d
        .store
        .schema()
        .index_of(names::TREE_PSS)
        .filter(|_| d.settings.selected.contains(names::TREE_PSS));
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
    (tree, panels)
}

/// A row's height beyond its plot: its title line and the spacing above.
const ROW_CHROME: f32 = 34.0;
/// The least height of a plot; more rows than fit so scroll.
const MIN_PLOT: f32 = 80.0;

/// What every plot of a frame shares: where the rows go, the x axis drawn
/// and its clock, the markers, and the part of the run being chosen.
pub(super) struct PlotFrame {
    pub(super) rows: Rows,
    pub(super) visible: usize,
    pub(super) capturing: bool,
    /// Shift + drag chooses a part of the run (on the time axis) instead of
    /// panning: its receipt opens when the drag ends.
    pub(super) choosing: bool,
    pub(super) chosen: Option<[f64; 2]>,
    pub(super) x_steps: bool,
    pub(super) x_label: &'static str,
    pub(super) wall: Option<Wall>,
    pub(super) lane_marks: Vec<Mark>,
    /// The markers' lane's height with its spacing; 0 without markers.
    pub(super) lane_h: f32,
    pub(super) zoomed: bool,
    /// More rows than fit at their least height: they scroll.
    pub(super) overflow: bool,
}

/// This frame's [`PlotFrame`], for `count` plots.
fn frame_of(
    d: &Frame<'_>,
    mine: &mut PlotsState,
    ui: &egui::Ui,
    visible: usize,
    count: usize,
) -> PlotFrame {
    let link = egui::Id::unique("flatline-x");
    // Each plot has a title line and spacing above it.
    // The last plot also holds the shared time axis.
    let fitted =
        (ui.available_height() - ROW_CHROME * count as f32 - X_AXIS - LANE - 8.0) / count as f32;
    let height = fitted.max(MIN_PLOT);
    let columns = ui.available_width().max(100.0) as usize;
    let x_steps = d.settings.x_steps && d.store.step_axis().is_some();
    let lane_marks = marks(d, visible, x_steps);
    let lane_h = if lane_marks.is_empty() {
        0.0
    } else {
        LANE + ui.spacing().item_spacing.y
    };
    let data_x = data_extent(d, visible, x_steps);
    if x_steps {
        mine.zoom = None;
    }
    PlotFrame {
        rows: Rows {
            columns,
            height,
            link,
            data_x,
        },
        visible,
        capturing: d.capturing(),
        choosing: ui.input(|i| i.modifiers.shift) || mine.selecting.is_some(),
        chosen: mine.selecting,
        x_steps,
        x_label: if x_steps {
            "step"
        } else {
            "time since the start"
        },
        wall: wall_origin(d, x_steps),
        lane_marks,
        lane_h,
        zoomed: mine.zoom.is_some(),
        overflow: fitted < MIN_PLOT,
    }
}

/// The data's extent on the axis drawn: every row and the shared axis
/// include it, so their x ranges agree (each plot fitting its own data
/// would set rows that start later apart from the rest).
fn data_extent(d: &Frame<'_>, visible: usize, x_steps: bool) -> [f64; 2] {
    let times = &d.store.times()[..visible.min(d.store.times().len())];
    match d.store.step_axis().filter(|_| x_steps) {
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
    }
}

/// A line to draw: its channel's name, its points, and the jumps marked on it.
type PanelLine = (String, Vec<PlotPoint>, Vec<[f64; 2]>);

/// The lines of a panel's channels, in each channel's own unit (less its
/// baseline when drift is shown; as rates when `rate`).
fn panel_lines(d: &Frame<'_>, f: &PlotFrame, chans: &[usize], rate: bool) -> Vec<PanelLine> {
    let (visible, columns) = (f.visible, f.rows.columns);
    // Values are drawn in the channel's unit, then scaled to the unit
    // that fits what this plot shows (in `panel`).
    let scale = 1.0;
    let mut lines = Vec::new();
    for &ch in chans {
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
        // Jumps found by the analysis, marked on the line where
        // they are part of a finding of growth (a staircase's
        // steps): at their time, or at the step reached by then.
        // On a channel judged flat or noisy its page-sized steps
        // would read as events; hovering still says each.
        let marks: Vec<[f64; 2]> = match &analysis {
            Some(a) if !rate && a.verdict.is_growth() && a.slope_per_s > 0.0 => a
                .jump_list
                .iter()
                .filter_map(|j| {
                    let idx = d.store.times()[..visible].partition_point(|&t| t < j.t_s);
                    let v = *d.store.series(ch).values().get(idx)?;
                    let x = jump_x(d, visible, j.t_s, f.x_steps)?;
                    (!v.is_nan()).then_some([x, (v - baseline) * scale])
                })
                .collect(),
            _ => Vec::new(),
        };
        lines.push((name, pts, marks));
    }
    lines
}

/// Scales a panel's lines to KiB, MiB or GiB (k, M; µs, ms) as the largest
/// value drawn needs, and returns the unit's label (per second, or per step
/// on a step axis, for rates).
fn to_unit(lines: &mut [PanelLine], group: Group, unit: Unit, rate: bool, x_steps: bool) -> String {
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
    for (_, pts, marks) in lines.iter_mut() {
        pts.iter_mut().for_each(|p| p.y *= au.scale);
        marks.iter_mut().for_each(|m| m[1] *= au.scale);
    }
    let per = if x_steps { "step" } else { "s" };
    match (rate, unit) {
        (false, _) => au.label.clone(),
        (true, Unit::Count) => au.label.replace("/s", &format!("/{per}")),
        (true, _) => format!("{}/{per}", au.label),
    }
}

/// The lowest and highest value drawn, and, where they are within 2 % of
/// their level (and drift is not shown), the band of ±1 % around it that
/// the plot shows at least: the band the analysis calls flat, so that a
/// flat line looks flat and a few bytes do not fill the plot.
fn y_extent(lines: &[PanelLine], drift: bool) -> ((f64, f64), Option<(f64, f64)>) {
    let (lo, hi) = lines
        .iter()
        .flat_map(|(_, p, _)| p.iter().map(|p| p.y))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), y| {
            (a.min(y), b.max(y))
        });
    let mid = (lo + hi) / 2.0;
    let band = if lo.is_finite() && !drift && (hi - lo) < 0.02 * mid.abs() {
        Some((mid - 0.01 * mid.abs(), mid + 0.01 * mid.abs()))
    } else {
        None
    };
    ((lo, hi), band)
}

/// A panel's title: its channel's name or its group's, what is drawn (rates,
/// drift) and the unit.
fn panel_title(d: &Frame<'_>, chans: &[usize], group: Group, rate: bool, label: &str) -> String {
    // A plot of one channel is titled by it, a shared one by its group.
    let what = match chans {
        [one] => d.store.schema().channels[*one].name.clone(),
        _ => group_name(group).to_string(),
    };
    if rate {
        format!("{what} rates ({label})")
    } else if d.settings.drift {
        format!("{what} drift ({label})")
    } else if label.is_empty() {
        what
    } else {
        format!("{what} ({label})")
    }
}

/// Draws one panel: its title, its plot, the part of the run being chosen
/// on it and the read-out under the pointer. Returns the x range it showed
/// and its width in points; `None` when it had nothing to draw yet.
#[allow(clippy::too_many_arguments)]
fn panel(
    d: &Frame<'_>,
    keys: &KeyState,
    selecting: &mut Option<[f64; 2]>,
    ui: &mut egui::Ui,
    f: &PlotFrame,
    (group, unit, rate, own): PanelKey,
    chans: &[usize],
    actions: &mut Vec<Action>,
) -> Option<([f64; 2], f32)> {
    let mut lines = panel_lines(d, f, chans, rate);
    if lines.iter().all(|(_, p, _)| p.is_empty()) {
        return None; // nothing to draw yet (a channel this workload does not feed)
    }
    let label = to_unit(&mut lines, group, unit, rate, f.x_steps);
    let title = panel_title(d, chans, group, rate, &label);
    let ((lo, hi), band) = y_extent(&lines, d.settings.drift);
    ui.label(RichText::new(title).strong());
    let signed = d.settings.drift && !rate;
    let data_x = f.rows.data_x;
    let shown = linked_plot(
        ("plot", group as u8, unit as u8, rate, own, chans[0]),
        f.rows.height,
        f.rows.link,
        f.capturing,
        f.x_label,
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
    .allow_drag(!f.choosing || f.x_steps);
    let shown = wall_clock_axis(shown, f.wall.as_ref());
    // `f`: back to all of the data.
    let shown = if keys.fit { shown.reset() } else { shown };
    let shown = shown.show(ui, |pui| {
        // Zoomed in on time, the y axis follows what is drawn there.
        if f.zoomed && lo.is_finite() {
            let (lo, hi) = band.unwrap_or((lo, hi));
            let m = ((hi - lo) * 0.05).max(hi.abs().max(1.0) * 1e-9);
            pui.set_plot_bounds_y(lo - m..=hi + m);
        }
        draw_markers(pui, &f.lane_marks);
        if let Some([a, b]) = f.chosen {
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
            for run in runs(&pts) {
                pui.line(line(name.clone(), run));
            }
            if has_marks {
                // Drawn, not listed: a jump is read by hovering it.
                pui.points(Points::new("", marks).radius(3.0).color(DATA));
            }
        }
    });
    if f.choosing && !f.x_steps {
        choose_by_drag(selecting, &shown.response, &shown.transform, actions);
    }
    if !f.capturing {
        hover_readout(d, f, &shown, chans, rate);
    }
    let r = shown.transform.bounds().range_x();
    Some(([*r.start(), *r.end()], shown.transform.frame().width()))
}

/// Shift + drag on a plot: the part of the run chosen follows the pointer,
/// and its receipt is asked for when the drag ends.
fn choose_by_drag(
    selecting: &mut Option<[f64; 2]>,
    r: &egui::Response,
    transform: &egui_plot::PlotTransform,
    actions: &mut Vec<Action>,
) {
    if let Some(pos) = r.interact_pointer_pos() {
        let x = transform.value_from_position(pos).x;
        if r.drag_started() {
            *selecting = Some([x, x]);
        } else if r.dragged()
            && let Some(sel) = selecting.as_mut()
        {
            sel[1] = x;
        }
    }
    if r.drag_stopped()
        && let Some([a, b]) = selecting.take()
        && a != b
    {
        actions.push(Action::ChoosePart {
            from: a.min(b),
            to: a.max(b),
        });
    }
}

/// The read-out of a panel's channels under the pointer.
fn hover_readout<R>(
    d: &Frame<'_>,
    f: &PlotFrame,
    shown: &egui_plot::PlotResponse<R>,
    chans: &[usize],
    rate: bool,
) {
    let Some(pos) = shown.response.hover_pos() else {
        return;
    };
    let x = shown.transform.value_from_position(pos).x;
    let per_point = 1.0 / shown.transform.dpos_dvalue_x().abs().max(1e-12);
    let rows = readout(d, chans, f.visible, x, f.x_steps, per_point, rate);
    if rows.is_empty() {
        return;
    }
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

/// Under the rows: the markers' lane, if any, and the time (or step) axis
/// they share: a plot with no data, linked to the rows, whose y axis is as
/// wide as theirs so its ticks fall under their times.
fn shared_axis(keys: &KeyState, ui: &mut egui::Ui, f: &PlotFrame) {
    let data_x = f.rows.data_x;
    if !f.lane_marks.is_empty() {
        let x_steps = f.x_steps;
        let say_x = |x: f64| {
            if x_steps {
                format!("step {}", axes::step_label(x))
            } else {
                format!("{x:.1} s")
            }
        };
        lane_plot(
            ui,
            "markers-lane",
            f.rows.link,
            f.capturing,
            f.x_label,
            Some(data_x),
            &f.lane_marks,
            &say_x,
        );
    }
    let axis = linked_plot(
        "time-axis",
        X_AXIS + 6.0,
        f.rows.link,
        f.capturing,
        f.x_label,
        false,
        true,
    )
    .include_x(data_x[0])
    .include_x(data_x[1]);
    let axis = strip(axis);
    let axis = if keys.fit { axis.reset() } else { axis };
    let axis = wall_clock_axis(axis, f.wall.as_ref());
    // A tick's label is centred on it: one nearer the right end than half
    // its width would be cut by the plot's edge ("1:10" of a run that ends
    // at 70.4 s), so it is left out.
    let width = f64::from(ui.available_width() - Y_AXIS_WIDTH).max(1.0);
    let (x_steps, wall) = (f.x_steps, f.wall.as_ref().map(|w| w.origin));
    let axis = axis.x_axis_formatter(move |m, range| {
        let text = match (wall, x_steps) {
            (Some(origin), _) => axes::wall(origin + m.value),
            (None, true) => axes::step_label(m.value),
            (None, false) => axes::clock(m.value),
        };
        let span = range.end() - range.start();
        let to_edge = (range.end() - m.value) / span * width;
        if span > 0.0 && to_edge < TICK_CHAR_W * text.chars().count() as f64 / 2.0 {
            String::new()
        } else {
            text
        }
    });
    axis.show(ui, |_| {});
}
