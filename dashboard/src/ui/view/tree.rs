//! The process tree's stacked areas.

use super::channels::{ProcessRow, process_rows};
use super::frame::Frame;
use super::kit::{X_AXIS, line, linked_plot, runs, value_at, wall_clock_axis, wall_origin};
use super::markers::{draw_markers, marks};
use super::series::decimate;
use crate::ui::shared::KeyState;
use eframe::egui::{self, Color32, RichText};
use egui_plot::FilledArea;
use flatline_telemetry::names;

/// Most processes stacked one by one under `tree.pss` (those that grew
/// first); the rest share a band.
pub(super) const STACKED: usize = 5;

/// `tree.pss` over time with each process's PSS stacked under it, largest
/// at the bottom: where the tree's growth lives, at a glance.
/// Where a plot row goes: the pixel columns its lines are thinned to, its
/// height, and the link that keeps every row on one x axis.
#[derive(Clone, Copy)]
pub(super) struct Rows {
    pub(super) columns: usize,
    pub(super) height: f32,
    pub(super) link: egui::Id,
    /// The data's extent on the x axis drawn, which every row includes.
    pub(super) data_x: [f64; 2],
}

/// `values` at each of `picked` (ascending rows, a subset of `rows`, the
/// rows with any process's reading), carried forward from the last reading
/// at or before it among `rows`; 0 before the first reading and from
/// `until` (the process's exit, in seconds) on.
pub(super) fn carried(
    values: &[f64],
    rows: &[usize],
    picked: &[usize],
    times: &[f64],
    until: f64,
) -> Vec<f64> {
    let mut out = Vec::with_capacity(picked.len());
    let (mut last, mut k) = (0.0, 0);
    for &p in picked {
        while k < rows.len() && rows[k] <= p {
            if let Some(v) = values.get(rows[k]).filter(|v| !v.is_nan()) {
                last = *v;
            }
            k += 1;
        }
        let gone = times.get(p).is_some_and(|&t| t >= until);
        out.push(if gone { 0.0 } else { last });
    }
    out
}

/// The stack's bands, bottom first: flat processes, largest first, past a
/// few of them one band for the rest; those whose own memory grew on top,
/// each a band (the top of the stack is where the growth lives). Each band
/// is its label and its processes' PSS channels.
fn bands_of(procs: &[ProcessRow]) -> Vec<(String, Vec<usize>)> {
    let (grew, flat): (Vec<&ProcessRow>, Vec<&ProcessRow>) = procs
        .iter()
        .filter(|p| p.pss_position.is_some())
        .partition(|p| p.grew);
    let room = STACKED.saturating_sub(grew.len()).max(STACKED / 3);
    let lump = |rows: &[&ProcessRow], what: &str| {
        (
            format!("{} more{what}", rows.len()),
            rows.iter()
                .filter_map(|p| p.pss_position)
                .collect::<Vec<_>>(),
        )
    };
    let one = |p: &&ProcessRow| {
        let tag = if p.grew { " (grew)" } else { "" };
        (
            format!("{} {}{tag}", p.pid, p.name),
            p.pss_position.into_iter().collect(),
        )
    };
    let mut bands: Vec<(String, Vec<usize>)> = flat.iter().take(room).map(one).collect();
    if flat.len() > room {
        bands.push(lump(&flat[room..], ""));
    }
    let tops = STACKED.saturating_sub(room).max(1);
    if grew.len() > tops {
        bands.push(lump(&grew[tops..], " that grew"));
    }
    bands.extend(grew.iter().take(tops).rev().map(one));
    bands
}

/// Each process's PSS at the columns `picked` (of `rows`): its last
/// reading held until the next, and until it exits. The processes' PSS is
/// read round-robin under the tree probe's budget, so a row holds a few
/// processes' readings, not all; held, the stack adds up values that hold
/// at the same moment.
fn held_readings(
    store: &crate::ui::Store,
    procs: &[ProcessRow],
    rows: &[usize],
    picked: &[usize],
) -> std::collections::HashMap<usize, Vec<f64>> {
    procs
        .iter()
        .filter_map(|p| {
            let c = p.pss_position?;
            let until = p.exited_s.unwrap_or(f64::INFINITY);
            Some((
                c,
                carried(store.series(c).values(), rows, picked, store.times(), until),
            ))
        })
        .collect()
}

/// The columns to draw: a column where no band moved, between two where
/// none did either, is left out (as [`push_column`] does for lines): the
/// areas draw the same with far fewer triangles.
fn kept_columns(n: usize, stacked: &[(String, Color32, Vec<f64>, Vec<f64>)]) -> Vec<usize> {
    let keep = |j: usize| {
        j == 0
            || j + 1 >= n
            || !stacked.iter().all(|(_, _, lo, up)| {
                lo[j - 1] == lo[j] && lo[j] == lo[j + 1] && up[j - 1] == up[j] && up[j] == up[j + 1]
            })
    };
    (0..n).filter(|&j| keep(j)).collect()
}

pub(super) fn tree_plot(
    d: &Frame<'_>,
    keys: &KeyState,
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
    // Flat processes at the bottom, largest first, past a few of them one
    // band for the rest; those whose own memory grew on top, each a band:
    // the top of the stack is where the growth lives.
    let procs = process_rows(d, visible);
    let bands = bands_of(&procs);
    // The processes' PSS is read round-robin under the tree probe's budget,
    // so a row holds a few processes' readings, not all: each band holds
    // its process's last reading until the next (and until it exits), so
    // that the stack adds up values that hold at the same moment.
    let held = held_readings(store, &procs, rows, &picked);
    let value = |c: usize, j: usize| held.get(&c).map_or(0.0, |v| v[j] * MIB);
    let mut lower = vec![0.0; picked.len()];
    let mut areas = Vec::new();
    let mut stacked = Vec::new();
    // Processes without channels of their own are in tree.pss only: at the
    // bottom, in grey, what tree.pss holds beyond the bands (its latest
    // whole round at each column), so the stack adds up to the line.
    let bare = procs
        .iter()
        .filter(|p| p.pss_position.is_none() && p.exited_s.is_none())
        .count();
    if bare > 0 {
        let total = store.series(tree);
        let rest: Vec<f64> = picked
            .iter()
            .enumerate()
            .map(|(j, &p)| {
                let t = total
                    .last_reading_before(p + 1)
                    .map_or(0.0, |r| total.values()[r] * MIB);
                let read: f64 = bands
                    .iter()
                    .flat_map(|(_, chans)| chans)
                    .map(|&c| value(c, j))
                    .sum();
                (t - read).max(0.0)
            })
            .collect();
        stacked.push((
            format!("{bare} without channels of their own"),
            Color32::GRAY,
            std::mem::replace(&mut lower, rest.clone()),
            rest,
        ));
    }
    for (k, (label, chans)) in bands.into_iter().enumerate() {
        let upper: Vec<f64> = lower
            .iter()
            .enumerate()
            .map(|(j, lo)| lo + chans.iter().map(|&c| value(c, j)).sum::<f64>())
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
    let kept = kept_columns(xs.len(), &stacked);
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
    ui.label(
        RichText::new("Process tree: PSS of each process, stacked, each at its last reading (MiB)")
            .strong(),
    );
    let x_label = if x_steps {
        "step"
    } else {
        "time since the start"
    };
    // Twice as tall as its legend (a line per band and the total's), so
    // the legend leaves most of the stack in view.
    let height = height.max(2.0 * 17.0 * (stacked.len() + 1) as f32);
    let plot = linked_plot(
        "plot-tree",
        if x_axis { height + X_AXIS } else { height },
        link,
        d.capturing(),
        x_label,
        true,
        x_axis,
    )
    // Top left, where a rising stack leaves room; the legend is as tall as
    // the plot, so few bands have one of their own (see [`STACKED`]).
    .legend(egui_plot::Legend::default().position(egui_plot::Corner::LeftTop))
    .include_y(0.0)
    .include_x(data_x[0])
    .include_x(data_x[1]);
    let plot = if keys.fit { plot.reset() } else { plot };
    let plot = wall_clock_axis(plot, wall_origin(d, x_steps).as_ref());
    plot.show(ui, |pui| {
        for a in areas {
            pui.add(a);
        }
        for run in runs(&total) {
            pui.line(line(names::TREE_PSS, run).width(2.0));
        }
        draw_markers(pui, &marks(d, visible, x_steps));
    });
}
