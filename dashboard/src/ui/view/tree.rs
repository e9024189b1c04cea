//! The process tree's stacked areas.

use super::*;

/// Most processes stacked one by one under `tree.pss`; the rest share a band.
pub(super) const STACKED: usize = 12;

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

pub(super) fn tree_plot(
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
    let procs = process_rows(d, visible);
    let order: Vec<usize> = procs.iter().map(|p| p.pss_position).collect();
    // The processes' PSS is read round-robin under the tree probe's budget,
    // so a row holds a few processes' readings, not all: each band holds
    // its process's last reading until the next (and until it exits), so
    // that the stack adds up values that hold at the same moment.
    let held: std::collections::HashMap<usize, Vec<f64>> = procs
        .iter()
        .map(|p| {
            let c = p.pss_position;
            let until = p.exited_s.unwrap_or(f64::INFINITY);
            (
                c,
                carried(
                    store.series(c).values(),
                    rows,
                    &picked,
                    store.times(),
                    until,
                ),
            )
        })
        .collect();
    let value = |c: usize, j: usize| held.get(&c).map_or(0.0, |v| v[j] * MIB);
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
    ui.label(
        RichText::new("Process tree: PSS of each process, stacked, each at its last reading (MiB)")
            .strong(),
    );
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
        pui.line(line("tree.pss", total).width(2.0));
        draw_markers(pui, &marks(d, visible, x_steps));
    });
}
