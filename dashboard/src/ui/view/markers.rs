//! Markers and events: their labels once, on a lane of their own above the
//! shared time (or step) axis, gathered into clusters where they crowd; on
//! the plots at most a faint line each, and none where they are dense.

use super::frame::Frame;
use super::kit::{linked_plot, strip, value_at};
use eframe::egui::{self, Color32, RichText};
use egui_plot::{LineStyle, PlotUi, VLine};
use flatline_telemetry::recording::EventKind;

/// What a mark is, told apart on the lane by its glyph and colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkKind {
    /// A marker the job printed or a person set (an evaluation, a
    /// checkpoint, "start-up ends" of the job's own).
    Marker,
    /// A probe's or the recorder's note (a GPU lost, a recording fault).
    Note,
    /// Where the analysis's start-up ends.
    Warmup,
}

impl MarkKind {
    pub(super) fn color(self) -> Color32 {
        match self {
            MarkKind::Marker => Color32::from_rgb(190, 150, 230),
            MarkKind::Note => Color32::from_rgb(170, 190, 210),
            MarkKind::Warmup => Color32::from_gray(150),
        }
    }
}

/// One mark on the x axis drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    pub x: f64,
    pub text: String,
    pub kind: MarkKind,
}

/// The markers up to the visible end (a job's evals and checkpoints), as
/// (x, text): the time, or the step when steps are the x axis.
pub fn marker_lines(d: &Frame<'_>, visible: usize, x_steps: bool) -> Vec<(f64, String)> {
    marks(d, visible, x_steps)
        .into_iter()
        .map(|m| (m.x, m.text))
        .collect()
}

/// [`marker_lines`] with each mark's kind.
pub(super) fn marks(d: &Frame<'_>, visible: usize, x_steps: bool) -> Vec<Mark> {
    marks_on(
        d.store,
        visible,
        d.store.step_axis().filter(|_| x_steps),
        true,
    )
}

/// The marks of any store, placed on channel `x_axis` (a step or token
/// count) or, without one, at their time; with `warmup`, where the start-up
/// ends too.
pub(super) fn marks_on(
    store: &crate::ui::Store,
    visible: usize,
    x_axis: Option<usize>,
    warmup: bool,
) -> Vec<Mark> {
    let times = store.times();
    let Some(last) = visible.checked_sub(1).filter(|&i| i < times.len()) else {
        return Vec::new();
    };
    // Where start-up ended goes with the markers: the analysis starts there.
    // So do the probes' notes (a GPU that stopped answering): moments too.
    let warmup = store.warmup().filter(|_| warmup).map(|(t, _)| Mark {
        x: t,
        text: "start-up ends".to_string(),
        kind: MarkKind::Warmup,
    });
    let mut marks: Vec<Mark> = store
        .events()
        .iter()
        .filter_map(|e| {
            let (text, kind) = match &e.kind {
                EventKind::Marker(text) => (text, MarkKind::Marker),
                EventKind::Note(text) => (text, MarkKind::Note),
                _ => return None,
            };
            Some(Mark {
                x: e.t_ns as f64 / 1e9,
                text: text.clone(),
                kind,
            })
        })
        .chain(warmup)
        .collect();
    marks.sort_by(|a, b| a.x.total_cmp(&b.x));
    marks
        .into_iter()
        .filter(|m| m.x <= times[last])
        .filter_map(|m| match x_axis {
            None => Some(m),
            Some(s) => Some(Mark {
                x: value_at(store, s, visible, m.x)?,
                ..m
            }),
        })
        .collect()
}

/// The lane's height: a row of glyphs and their labels.
pub(super) const LANE: f32 = 24.0;

/// Marks closer than this many points share one glyph (a cluster).
const CLUSTER_PX: f32 = 10.0;

/// Most faint lines a plot carries; with more marks in view, none.
pub(super) const MOST_LINES: usize = 40;

/// Marks as faint vertical lines on a plot, at most [`MOST_LINES`] in view
/// (more would hide the data under them: the lane still shows them all).
pub(super) fn draw_markers(pui: &mut PlotUi<'_>, marks: &[Mark]) {
    let r = pui.plot_bounds().range_x();
    let shown: Vec<&Mark> = marks
        .iter()
        .filter(|m| r.contains(&m.x))
        .take(MOST_LINES + 1)
        .collect();
    if shown.len() > MOST_LINES {
        return;
    }
    for m in shown {
        let c = m.kind.color();
        pui.vline(
            VLine::new("", m.x)
                .color(Color32::from_rgba_unmultiplied(c.r(), c.g(), c.b(), 70))
                .style(LineStyle::dashed_loose()),
        );
    }
}

/// Marks that share a glyph on the lane.
#[derive(Debug)]
pub(super) struct Cluster<'m> {
    /// Screen x of its first and last mark.
    pub(super) from: f32,
    pub(super) to: f32,
    pub(super) marks: Vec<&'m Mark>,
}

impl Cluster<'_> {
    fn kind(&self) -> MarkKind {
        let k = self.marks[0].kind;
        if self.marks.iter().all(|m| m.kind == k) {
            k
        } else {
            MarkKind::Marker
        }
    }
}

/// What `marks` hold, short: each text once with its count, in order
/// ("eval ×11 · checkpoint ×11"), the rest counted past three.
pub(super) fn label<'m>(marks: impl IntoIterator<Item = &'m Mark>) -> String {
    let mut texts: Vec<(&str, usize)> = Vec::new();
    for m in marks {
        match texts.iter_mut().find(|(t, _)| *t == m.text) {
            Some((_, n)) => *n += 1,
            None => texts.push((&m.text, 1)),
        }
    }
    const MOST: usize = 3;
    let mut parts: Vec<String> = texts
        .iter()
        .take(MOST)
        .map(|&(t, n)| {
            if n == 1 {
                t.to_owned()
            } else {
                format!("{t} ×{n}")
            }
        })
        .collect();
    if texts.len() > MOST {
        let rest: usize = texts[MOST..].iter().map(|(_, n)| n).sum();
        parts.push(format!("{rest} more"));
    }
    parts.join(" · ")
}

/// The marks within `[left, right]` on the screen, a cluster for those
/// within [`CLUSTER_PX`] of its first.
pub(super) fn clusters(
    marks: &[Mark],
    at: impl Fn(f64) -> f32,
    left: f32,
    right: f32,
) -> Vec<Cluster<'_>> {
    let mut out: Vec<Cluster<'_>> = Vec::new();
    for m in marks {
        let px = at(m.x);
        if !(left..=right).contains(&px) {
            continue;
        }
        match out.last_mut() {
            Some(c) if px - c.from < CLUSTER_PX => {
                c.to = px;
                c.marks.push(m);
            }
            _ => out.push(Cluster {
                from: px,
                to: px,
                marks: vec![m],
            }),
        }
    }
    out
}

/// Where the lane's labels go: each under the first glyph it names, saying
/// every cluster up to the next label, so that no glyph is left unnamed
/// and no label touches another or leaves the lane. Returns (x, first, end,
/// text): the label's left edge and the clusters `first..end` it names.
pub(super) fn labels(
    found: &[Cluster<'_>],
    width: impl Fn(&str) -> f32,
    left: f32,
    right: f32,
) -> Vec<(f32, usize, usize, String)> {
    const GAP: f32 = 10.0;
    // Room for a glyph's antialiasing past the measured width.
    let right = right - 2.0;
    let text_of = |k: usize, end: usize| {
        let text = label(found[k..end].iter().flat_map(|c| c.marks.iter().copied()));
        let w = width(&text);
        (text, w)
    };
    // (x, first, end, text, where the space before it began)
    let mut out: Vec<(f32, usize, usize, String, f32)> = Vec::new();
    let (mut k, mut free) = (0, left);
    while k < found.len() {
        let mut end = k + 1;
        let (text, w) = loop {
            let (text, w) = text_of(k, end);
            let x = found[k].from.max(free);
            if end < found.len() && found[end].from < x + w + GAP {
                end += 1;
                continue;
            }
            break (text, w);
        };
        out.push((found[k].from.max(free), k, end, text, free));
        free = found[k].from.max(free) + w + GAP;
        k = end;
    }
    // The last label keeps inside the lane: moved left as far as the one
    // before allows, or else that one names its clusters too.
    while let Some((x, first, end, text, before)) = out.pop() {
        let w = width(&text);
        if x + w <= right {
            out.push((x, first, end, text, before));
            break;
        }
        if right - w >= before || out.is_empty() {
            out.push(((right - w).max(before), first, end, text, before));
            break;
        }
        let prev = out.pop().expect("one before");
        let (text, _) = text_of(prev.1, end);
        out.push((prev.0, prev.1, end, text, prev.4));
    }
    out.into_iter()
        .map(|(x, first, end, text, _)| (x, first, end, text))
        .collect()
}

/// Draws the lane in the plot area of `shown` (a plot linked to the rows):
/// a glyph per cluster on its upper half, their labels under them; hovering
/// a glyph lists its marks, their x said by `say_x`.
pub(super) fn lane(
    ui: &egui::Ui,
    shown: &egui_plot::PlotResponse<()>,
    marks: &[Mark],
    say_x: &dyn Fn(f64) -> String,
) {
    let rect = *shown.transform.frame();
    let painter = ui.painter_at(rect);
    let found = clusters(
        marks,
        |x| shown.transform.position_from_point_x(x),
        rect.left(),
        rect.right(),
    );
    let y = rect.top() + 5.0;
    for c in &found {
        let color = c.kind().color();
        let mid = egui::pos2((c.from + c.to) / 2.0, y);
        if c.to - c.from > 2.0 {
            painter.line_segment(
                [egui::pos2(c.from, y), egui::pos2(c.to, y)],
                egui::Stroke::new(2.0, color),
            );
        }
        // A glyph per kind: a marker ▼, a note ●, the start-up's end |.
        match c.kind() {
            MarkKind::Marker => {
                let corners = vec![
                    egui::pos2(mid.x - 4.0, y - 4.0),
                    egui::pos2(mid.x + 4.0, y - 4.0),
                    egui::pos2(mid.x, y + 3.0),
                ];
                painter.add(egui::Shape::convex_polygon(
                    corners,
                    color,
                    egui::Stroke::NONE,
                ));
            }
            MarkKind::Note => {
                painter.circle_filled(mid, 3.5, color);
            }
            MarkKind::Warmup => {
                painter.line_segment(
                    [egui::pos2(mid.x, y - 5.0), egui::pos2(mid.x, y + 4.0)],
                    egui::Stroke::new(2.0, color),
                );
            }
        }
    }
    let font = egui::FontId::proportional(11.0);
    let layout = |text: String| painter.layout_no_wrap(text, font.clone(), Color32::GRAY);
    for (x, first, _, text) in labels(
        &found,
        |t| layout(t.to_owned()).size().x,
        rect.left(),
        rect.right(),
    ) {
        let color = found[first].kind().color();
        // A label longer than the whole lane (a long note alone on it) is
        // cut to the lane with "…"; hovering its glyph says it whole.
        let mut job = egui::text::LayoutJob::single_section(
            text,
            egui::TextFormat::simple(font.clone(), color),
        );
        job.wrap = egui::text::TextWrapping::truncate_at_width(rect.right() - 2.0 - x);
        let galley = painter.layout_job(job);
        painter.galley(egui::pos2(x, y + 5.0), galley, color);
    }
    let hovered = shown.response.hover_pos().and_then(|p| {
        found
            .iter()
            .filter(|c| p.x >= c.from - 6.0 && p.x <= c.to + 6.0)
            .min_by(|a, b| {
                let d = |c: &Cluster<'_>| ((c.from + c.to) / 2.0 - p.x).abs();
                d(a).total_cmp(&d(b))
            })
    });
    if let Some(c) = hovered {
        egui::Tooltip::for_widget(&shown.response)
            .at_pointer()
            .gap(12.0)
            .show(|ui| {
                const MOST: usize = 15;
                for m in c.marks.iter().take(MOST) {
                    ui.label(format!("{}  {}", say_x(m.x), m.text));
                }
                if c.marks.len() > MOST {
                    ui.label(RichText::new(format!("and {} more", c.marks.len() - MOST)).weak());
                }
            });
    }
}

/// A lane of `marks` across the width of the plots linked by `link`: a plot
/// with no data and a y axis as wide as theirs, so its x falls under theirs.
#[allow(clippy::too_many_arguments)]
pub(super) fn lane_plot(
    ui: &mut egui::Ui,
    id: &str,
    link: egui::Id,
    capturing: bool,
    x_label: &str,
    data_x: Option<[f64; 2]>,
    marks: &[Mark],
    say_x: &dyn Fn(f64) -> String,
) {
    let plot = strip(linked_plot(
        id, LANE, link, capturing, x_label, false, false,
    ));
    let plot = match data_x {
        Some([a, b]) => plot.include_x(a).include_x(b),
        None => plot,
    };
    let shown = plot.show(ui, |_| {});
    lane(ui, &shown, marks, say_x);
}
