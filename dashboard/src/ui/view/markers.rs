//! Markers and events on the plots.

use super::*;

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
pub(super) fn marker_lines_on(
    store: &crate::ui::Store,
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

/// Most marker labels written on a plot (every marker gets its line).
pub(super) const MARKER_LABELS: usize = 24;

/// Markers as dashed vertical lines, labelled at the top of the plot;
/// markers closer than 1 % of the x range share a line and a label.
/// Labels sit at `top`, the highest point drawn: a label placed at the
/// plot's own upper bound would widen the bounds it is placed by, frame after
/// frame.
pub(super) fn draw_markers(pui: &mut PlotUi<'_>, marks: &[(f64, String)], top: f64) {
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
