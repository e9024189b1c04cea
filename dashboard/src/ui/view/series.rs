//! What a plot is drawn from: a series decimated to the pixels it covers
//! (min/max columns), counters as rates, axis units.

use super::frame::Frame;
use egui_plot::PlotPoint;
use flatline_telemetry::{Group, Unit};

/// How a unit is drawn on a plot axis: scale and label.
pub(super) fn axis_unit(g: Group, u: Unit) -> (f64, &'static str) {
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
    d: &Frame<'_>,
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
        let lost = d.store.lost_stretches();
        return match detail.and_then(|l| Some((&l.times, l.series.get(ch)?))) {
            Some((times, series)) => {
                decimate_span(times, series, span, columns, baseline, scale, &lost)
            }
            None => decimate_span(
                &d.store.times()[..visible],
                d.store.series(ch),
                span,
                columns,
                baseline,
                scale,
                &lost,
            ),
        };
    }
    decimate_on(d.store, x_axis, ch, visible, columns, baseline, scale)
}

/// Points for the samples of `series` (at `times`) within `span` (and the
/// one each side, so the line reaches the edges): about two per pixel
/// column over the view, which is half the span.
#[allow(clippy::too_many_arguments)]
pub(super) fn decimate_span(
    times: &[f64],
    series: &flatline_stream::store::Series,
    span: [f64; 2],
    columns: usize,
    baseline: f64,
    scale: f64,
    lost: &[[f64; 2]],
) -> Vec<PlotPoint> {
    let i0 = times.partition_point(|&t| t < span[0]).saturating_sub(1);
    let i1 = (times.partition_point(|&t| t <= span[1]) + 1).min(times.len());
    let mut out = Vec::with_capacity(columns * 4 + 2);
    for (i, [lo, hi]) in series.buckets(i0, i1, columns * 2) {
        if lo.is_nan() {
            continue;
        }
        break_at_lost(&mut out, times[i], lost);
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
pub(super) fn decimate_on(
    store: &crate::ui::Store,
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
    // Lost stretches are on the time axis; a step axis draws on.
    let lost = if x_axis.is_none() {
        store.lost_stretches()
    } else {
        Vec::new()
    };
    let mut out = Vec::with_capacity(columns * 2 + 2);
    for (i, [lo, hi]) in store.series(ch).buckets(0, visible, columns) {
        let x = x_of(i);
        if x.is_nan() || lo.is_nan() {
            continue;
        }
        break_at_lost(&mut out, x, &lost);
        push_column(
            &mut out,
            x,
            (lo - baseline) * scale,
            (hi - baseline) * scale,
        );
    }
    out
}

/// Breaks a line before a column at `x` where a lost stretch (damage, a
/// gap a full disk left: `lost`, seconds) lies between it and the line's
/// last point: a point with no position ends one run of the line, and the
/// next begins after the loss, so no line is drawn across what was never
/// read.
pub fn break_at_lost(out: &mut Vec<PlotPoint>, x: f64, lost: &[[f64; 2]]) {
    let Some(last) = out.last().map(|p| p.x).filter(|v| !v.is_nan()) else {
        return;
    };
    if lost
        .iter()
        .any(|&[from, to]| last <= from && x >= to && to > from)
    {
        out.push(PlotPoint::new(f64::NAN, f64::NAN));
    }
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
