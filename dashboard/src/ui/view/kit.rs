//! The plots' building blocks, shared by every plot (the main plots, the
//! markers' lane, the tree's stack, compare mode): a linked plot with the
//! shared axes, a line, the wall clock, the read-out under the pointer.

use super::axes;
use super::frame::Frame;
use eframe::egui::{self, Color32};
use egui_plot::{AxisHints, Legend, Line, Plot, PlotPoint, PlotPoints};
use flatline_receipt::fmt::value;
use flatline_telemetry::{Group, Unit};

/// About how wide a character of a tick's label is drawn, in points (the
/// axis's small text; a little over, so that no label is cut).
pub(super) const TICK_CHAR_W: f64 = 7.0;

/// A plot that shows no data, only where x is (the shared time axis, the
/// markers' lane): no grid, nothing to read out, drag or zoom, and a y axis
/// as wide as the rows' with nothing written on it.
pub(super) fn strip(plot: Plot<'_>) -> Plot<'_> {
    plot.show_grid([false, false])
        .show_crosshair(false)
        .show_x(false)
        .show_y(false)
        .allow_drag(false)
        .allow_zoom(false)
        .y_axis_formatter(|_, _| String::new())
}

/// Seconds of new data that move plots showing `seen` of `data` (on the
/// time axis, or on steps, whose time per step the data's span gives) by one
/// of `width` pixels; infinite when the newest data is out of view.
pub(super) fn pixel_seconds(
    seen: [f64; 2],
    data: [f64; 2],
    times: &[f64],
    width: f32,
    x_steps: bool,
) -> Option<f64> {
    let (t0, t1) = (*times.first()?, *times.last()?);
    let time_per_x = if x_steps {
        (t1 - t0) / (data[1] - data[0])
    } else {
        1.0
    };
    if seen[1] < data[1] - 1e-9 * data[1].abs().max(1.0) {
        return Some(f64::INFINITY);
    }
    let s = (seen[1] - seen[0]) * time_per_x / f64::from(width);
    (s.is_finite() && s > 0.0).then_some(s)
}

/// A wall clock to read a time axis on.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Wall {
    /// The plots' 0 as the local clock reads it: seconds since 1970 plus
    /// the zone's offset at the run's start (a change of offset during the
    /// run, such as daylight saving time, is not followed).
    pub(super) origin: f64,
    /// The zone's name as the C library gives it ("CET"), or the offset
    /// ("UTC+5:30") when it has none.
    pub(super) zone: String,
}

/// The wall clock of the plots' 0, in the local time zone, when the person
/// asked for a wall clock (`t`) on a time axis and the source knows when
/// the run began.
pub(super) fn wall_origin(d: &Frame<'_>, x_steps: bool) -> Option<Wall> {
    if !d.settings.wall_clock || x_steps {
        return None;
    }
    let start = d.seen.meta.started_unix_ms? as f64 / 1e3;
    Some(Wall::at(
        start,
        flatline_arena::sys::local_zone(start.floor() as i64),
    ))
}

impl Wall {
    /// The wall clock of a run that began at `start` (seconds since 1970)
    /// in `zone` (its offset east of UTC in seconds and its name; `None`:
    /// UTC).
    pub(super) fn at(start: f64, zone: Option<(i64, String)>) -> Self {
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
pub(super) fn wall_clock_axis<'a>(plot: Plot<'a>, wall: Option<&Wall>) -> Plot<'a> {
    let Some(&Wall { origin, ref zone }) = wall else {
        return plot;
    };
    let spacing = GRID_MIN_SPACING;
    plot.x_grid_spacer(move |g| axes::x_clock_marks(g, spacing, origin))
        .x_axis_formatter(move |m, _| axes::wall(origin + m.value))
        .x_axis_label(format!("wall clock ({zone})"))
}

/// Width of every plot's y axis, in points: room for "1,234.5" and a sign.
pub(super) const Y_AXIS_WIDTH: f32 = 56.0;

/// Height of the shared time axis under the rows, in points.
pub(super) const X_AXIS: f32 = 34.0;

/// A plot: its channels' group, unit, whether it shows rates, and the
/// channel when it is that channel's own row.
pub(super) type PanelKey = (Group, Unit, bool, Option<usize>);

/// Channels whose sizes differ by more than this get plots of their own.
pub(super) const MAGNITUDES: f64 = 20.0;

/// A channel's size: its latest reading's magnitude (0 before any).
pub(super) fn magnitude(values: &[f64]) -> f64 {
    values
        .iter()
        .rev()
        .find(|v| !v.is_nan())
        .map_or(0.0, |v| v.abs())
}

/// Whether a channel of size `m` can share a plot with channels of these
/// sizes: all within [`MAGNITUDES`]× of each other (a zero fits anywhere).
pub(super) fn within(sizes: impl Iterator<Item = f64>, m: f64) -> bool {
    let (lo, hi) = sizes
        .chain([m])
        .filter(|&x| x > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(a, b), x| (a.min(x), b.max(x)));
    hi == 0.0 || hi <= lo * MAGNITUDES
}

/// What a person hovering a plot at `x` reads: the time (and step) there,
/// each of the plot's channels' value at that sample, and any jump the
/// analysis found within 8 points of the pointer, with its size.
pub(super) fn readout(
    d: &Frame<'_>,
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
            flatline_receipt::fmt::thousands(step as u64)
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
                        .map(|s| format!(" (step {})", flatline_receipt::fmt::thousands(s as u64)))
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
pub(super) fn jump_x(d: &Frame<'_>, visible: usize, t: f64, x_steps: bool) -> Option<f64> {
    match d.store.step_axis().filter(|_| x_steps) {
        Some(_) => step_at(d.store, visible, t),
        None => Some(t),
    }
}

/// The step reached by the sample at `t` seconds; `None` without a step
/// axis or before its first value.
pub(super) fn step_at(store: &crate::ui::Store, visible: usize, t: f64) -> Option<f64> {
    value_at(store, store.step_axis()?, visible, t)
}

/// Channel `ch`'s last value up to the sample at `t` seconds (the first at
/// or after it), within the first `visible` samples: where a moment lies on
/// a step or token axis. `None` before the channel's first value.
pub(super) fn value_at(store: &crate::ui::Store, ch: usize, visible: usize, t: f64) -> Option<f64> {
    let times = store.times();
    let last = visible.checked_sub(1).filter(|&i| i < times.len())?;
    let i = times[..=last].partition_point(|&x| x < t).min(last);
    store.series(ch).values()[..=i]
        .iter()
        .rev()
        .copied()
        .find(|v| !v.is_nan())
}

/// A line through `pts` as they are. egui_plot would merge points less
/// than a pixel apart into a band, and fill each band between its
/// neighbours' ranges: a start-up jump in the first pixel column followed by
/// a long flat run (two points, see [`push_column`]) became a wedge across
/// the whole plot, a ramp the data never had. [`decimate`] already keeps
/// about two points a pixel column, so bands save nothing.
///
/// Colour has one meaning per kind of mark: a line's colour says whose data
/// it is (a recording's: [`DATA`], which is compare's A; compare's B has its
/// own), never how it is judged; verdicts and severities are the badges'
/// and the banner's. So a flat channel is never drawn in an alarm colour
/// (egui_plot's first automatic colour is a red).
/// A line's points in its runs: a point with no position (see
/// [`super::series::break_at_lost`]) separates two, which are drawn as
/// lines of their own under one name.
pub(super) fn runs(pts: &[PlotPoint]) -> impl Iterator<Item = Vec<PlotPoint>> + '_ {
    pts.split(|p| p.x.is_nan())
        .filter(|r| !r.is_empty())
        .map(<[PlotPoint]>::to_vec)
}

pub(super) fn line(name: impl Into<String>, pts: Vec<PlotPoint>) -> Line<'static> {
    Line::new(name, PlotPoints::Owned(pts))
        .allow_band(false)
        .color(DATA)
}

/// The colour of a recording's own lines.
pub(super) const DATA: Color32 = Color32::from_rgb(90, 160, 255);

/// Grid lines closer than this (in points) are left out rather than faded in:
/// each grid line spans its plot, and a software rasteriser pays for every
/// pixel of every faint one at every frame.
pub(super) const GRID_MIN_SPACING: f32 = 24.0;

/// A plot whose x axis and cursor follow the others'; no hover read-outs in
/// a screenshot. No background fill: the panel's colour shows through, which
/// saves a pass over most of the window at every frame.
pub(super) fn linked_plot<'a>(
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
