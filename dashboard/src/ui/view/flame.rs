//! The allocation sites (`watch --sites`) as a flame graph: the bytes each
//! stack holds at the playhead, as an icicle drawn bottom-up: the top row
//! is the lines that allocated (the sites themselves, widest first), each
//! frame's callers under it, so the answer is the first row whatever the
//! stacks' depth. A frame's width is what its stacks hold; its colour is
//! how much of the sites' growth runs through it (grey-blue: none; to red:
//! all of it). Clicking a frame plots its sites' live bytes over time (it
//! selects their channels); hovering says what it holds and grows.

use eframe::egui::{self, Color32, RichText, Sense, Stroke};
use flatline_export::pprof::{self, Frame as StackFrame};

use super::frame::{Action, Frame};
use flatline_receipt::fmt::bytes;

/// One frame of the icicle: what the stacks through it hold and grow, and
/// their sites' channels.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// `None` for the root (every site).
    pub frame: Option<StackFrame>,
    /// Bytes held at the playhead by the stacks through it.
    pub held: f64,
    /// Bytes a second they grow (their sites' slopes where a site grows).
    pub growth: f64,
    /// The channel positions of its sites (`site<N>.live`).
    pub sites: Vec<usize>,
    /// Its callers, most held first.
    pub children: Vec<Node>,
}

/// A site as the icicle takes it.
#[derive(Debug, Clone)]
pub struct SiteStack {
    pub channel: usize,
    /// Innermost first, as recorded.
    pub frames: Vec<StackFrame>,
    pub held: f64,
    pub growth: f64,
}

/// The bottom-up tree of `sites`: under the root, the innermost frames;
/// under each, its callers. A site that holds nothing is left out.
pub fn bottom_up(sites: &[SiteStack]) -> Node {
    let mut root = Node {
        frame: None,
        held: 0.0,
        growth: 0.0,
        sites: Vec::new(),
        children: Vec::new(),
    };
    for s in sites.iter().filter(|s| s.held > 0.0) {
        let mut at = &mut root;
        at.held += s.held;
        at.growth += s.growth;
        at.sites.push(s.channel);
        for f in &s.frames {
            let k = match at.children.iter().position(|c| c.frame.as_ref() == Some(f)) {
                Some(k) => k,
                None => {
                    at.children.push(Node {
                        frame: Some(f.clone()),
                        held: 0.0,
                        growth: 0.0,
                        sites: Vec::new(),
                        children: Vec::new(),
                    });
                    at.children.len() - 1
                }
            };
            at = &mut at.children[k];
            at.held += s.held;
            at.growth += s.growth;
            at.sites.push(s.channel);
        }
    }
    sort(&mut root);
    root
}

fn sort(n: &mut Node) {
    n.children.sort_by(|a, b| {
        b.held
            .total_cmp(&a.held)
            .then_with(|| a.frame.cmp(&b.frame))
    });
    for c in &mut n.children {
        sort(c);
    }
}

/// A frame's colour: grey-blue where none of the growth runs through it,
/// to red where all of it does.
pub fn color(growth: f64, total_growth: f64) -> Color32 {
    let base = [70.0, 86.0, 112.0];
    let hot = [214.0, 72.0, 58.0];
    let f = if total_growth > 0.0 && growth > 0.0 {
        (growth / total_growth).clamp(0.0, 1.0).sqrt() * 0.85 + 0.15
    } else {
        0.0
    };
    let c = |k: usize| (base[k] + (hot[k] - base[k]) * f).round() as u8;
    Color32::from_rgb(c(0), c(1), c(2))
}

/// The samples read for the playhead: up to it, or, past the start of a
/// job's teardown, up to that start (what the sites held then, as the
/// receipt reads them, not the nothing they hold once freed).
pub(super) fn held_until(d: &Frame<'_>, visible: usize) -> usize {
    match d.store.analysis_end() {
        Some(end) => visible.min(d.store.times().partition_point(|&t| t < end).max(1)),
        None => visible,
    }
}

/// A site's last reading among its first `until` values (0 before it has
/// one).
pub(super) fn held(values: &[f64], until: usize) -> f64 {
    values[..until.min(values.len())]
        .iter()
        .rev()
        .copied()
        .find(|v| v.is_finite())
        .unwrap_or(0.0)
}

/// The sites of the store over samples `[0, held_until)`.
fn stacks(d: &Frame<'_>, held_until: usize) -> Vec<SiteStack> {
    let schema = d.store.schema();
    schema
        .channels
        .iter()
        .enumerate()
        .filter(|(_, c)| flatline_analysis::rules::is_site_channel(&c.name))
        .map(|(i, c)| {
            let held = held(d.store.series(i).values(), held_until);
            let growth = d
                .store
                .analysis(i)
                .filter(|a| a.verdict.is_growth())
                .map_or(0.0, |a| a.slope_per_s.max(0.0));
            SiteStack {
                channel: i,
                frames: pprof::frames(&c.labels),
                held,
                growth,
            }
        })
        .collect()
}

/// Height of a row of frames.
const ROW: f32 = 17.0;

/// The flame graph's panel, above the timeline, where the stream has sites.
pub fn panel(d: &Frame<'_>, ui: &mut egui::Ui, visible: usize, actions: &mut Vec<Action>) {
    if !d
        .store
        .schema()
        .channels
        .iter()
        .any(|c| flatline_analysis::rules::is_site_channel(&c.name))
    {
        return;
    }
    let until = held_until(d, visible);
    let root = bottom_up(&stacks(d, until));
    let at = |n: usize| match n {
        0 => 0.0,
        n => d.store.times().get(n - 1).copied().unwrap_or(0.0),
    };
    let when = if until < visible {
        format!("at {:.1} s, where the job's teardown began", at(until))
    } else {
        format!("at {:.1} s", at(visible))
    };
    egui::Panel::bottom("flatline-flame")
        .resizable(true)
        .default_size(8.0 * ROW + 24.0)
        .min_size(3.0 * ROW + 24.0)
        .show(ui, |ui| {
            let grows = if root.growth > 0.0 {
                format!(", growing {}/s (red)", bytes(root.growth))
            } else {
                ", none growing".into()
            };
            ui.label(
                RichText::new(format!(
                    "Flame graph: live bytes by stack {when}, the allocating lines on top, their callers below: {} in {} site{}{grows}; click a frame to plot its sites",
                    bytes(root.held),
                    root.sites.len(),
                    if root.sites.len() == 1 { "" } else { "s" }
                ))
                .small(),
            );
            if root.held <= 0.0 {
                return;
            }
            let (rect, _) = ui.allocate_exact_size(ui.available_size(), Sense::hover());
            let rows = (rect.height() / ROW).floor().max(1.0) as usize;
            let mut clicked: Option<Vec<usize>> = None;
            draw_children(
                ui,
                &root,
                rect.left(),
                rect.width(),
                rect.top(),
                rows,
                root.growth,
                root.held,
                &mut clicked,
            );
            if let Some(sites) = clicked {
                let schema = d.store.schema();
                actions.push(Action::Plot(
                    sites
                        .into_iter()
                        .map(|i| schema.channels[i].name.clone())
                        .collect(),
                ));
            }
        });
}

/// Lays out `n`'s children in `[x, x + width)` on the row at `y`, and theirs
/// under them, `rows` deep at most.
#[allow(clippy::too_many_arguments)]
fn draw_children(
    ui: &mut egui::Ui,
    n: &Node,
    x: f32,
    width: f32,
    y: f32,
    rows: usize,
    total_growth: f64,
    total_held: f64,
    clicked: &mut Option<Vec<usize>>,
) {
    if rows == 0 || n.held <= 0.0 {
        return;
    }
    let mut left = x;
    for c in &n.children {
        let w = (c.held / n.held) as f32 * width;
        if w < 1.0 {
            left += w;
            continue;
        }
        let r = egui::Rect::from_min_size(egui::pos2(left, y), egui::vec2(w, ROW));
        let Some(f) = &c.frame else { continue };
        let name = f.label();
        let id = ui
            .scope_id()
            .with(("flame", &name, left.to_bits(), y.to_bits()));
        let resp = ui.interact(r, id, Sense::click());
        let fill = color(c.growth, total_growth);
        let painter = ui.painter();
        painter.rect_filled(r.shrink(0.5), 2.0, fill);
        if resp.hovered() {
            painter.rect_stroke(
                r.shrink(0.5),
                2.0,
                Stroke::new(1.5, Color32::WHITE),
                egui::StrokeKind::Inside,
            );
        }
        if w > 24.0 {
            // Elided to the frame's width (whole on hover), never cut.
            let mut job = egui::text::LayoutJob::simple_singleline(
                name.clone(),
                egui::FontId::proportional(11.0),
                Color32::from_gray(240),
            );
            job.wrap = egui::text::TextWrapping::truncate_at_width(w - 6.0);
            let galley = painter.layout_job(job);
            painter.galley(
                egui::pos2(r.left() + 3.0, r.center().y - galley.size().y / 2.0),
                galley,
                Color32::from_gray(240),
            );
        }
        let share = 100.0 * c.held / total_held;
        let grows = if c.growth > 0.0 {
            format!(", grows {}/s", bytes(c.growth))
        } else {
            String::new()
        };
        let said = format!("{name}: {} held ({share:.0} %){grows}", bytes(c.held));
        resp.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Button, true, &name));
        let resp = resp.on_hover_text(format!(
            "{}\n{said}\n{} site{}; click to plot {}",
            f.file,
            c.sites.len(),
            if c.sites.len() == 1 { "" } else { "s" },
            if c.sites.len() == 1 { "it" } else { "them" }
        ));
        if resp.clicked() {
            *clicked = Some(c.sites.clone());
        }
        draw_children(
            ui,
            c,
            left,
            w,
            y + ROW,
            rows - 1,
            total_growth,
            total_held,
            clicked,
        );
        left += w;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(function: &str, file: &str, line: i64) -> StackFrame {
        StackFrame {
            function: function.into(),
            file: file.into(),
            line,
        }
    }

    fn site(channel: usize, frames: &[StackFrame], held: f64, growth: f64) -> SiteStack {
        SiteStack {
            channel,
            frames: frames.to_vec(),
            held,
            growth,
        }
    }

    /// Two lines called from one function, and an import elsewhere: the
    /// top row is the allocating lines, widest first; a caller they share
    /// is one frame holding both; a site that holds nothing is out.
    #[test]
    fn the_allocating_lines_are_the_top_row_and_callers_merge() {
        let main = f("main", "/w/job.py", 90);
        let keep = f("keep", "/w/job.py", 52);
        let step = f("step", "/w/job.py", 40);
        let imp = f("_find_and_load", "<frozen importlib._bootstrap>", 1176);
        let root = bottom_up(&[
            site(7, &[keep.clone(), main.clone()], 50.0, 1.5),
            site(8, &[step.clone(), main.clone()], 10.0, 0.0),
            site(9, std::slice::from_ref(&imp), 70.0, 0.0),
            site(10, &[f("gone", "/w/x.py", 1)], 0.0, 0.0),
        ]);
        assert_eq!((root.held, root.growth), (130.0, 1.5));
        assert_eq!(root.sites, [7, 8, 9]);
        let top: Vec<String> = root
            .children
            .iter()
            .map(|c| c.frame.as_ref().unwrap().label())
            .collect();
        assert_eq!(
            top,
            [
                "_find_and_load <frozen importlib._bootstrap>:1176",
                "keep job.py:52",
                "step job.py:40"
            ]
        );
        // Each line's caller under it: main twice, once under each.
        let under_keep = &root.children[1].children;
        assert_eq!(under_keep.len(), 1);
        assert_eq!(under_keep[0].frame.as_ref(), Some(&main));
        assert_eq!((under_keep[0].held, under_keep[0].growth), (50.0, 1.5));
        assert_eq!(under_keep[0].sites, [7]);
    }

    /// Growth is what colours a frame: none is the base, all of it red.
    #[test]
    fn a_frame_is_red_by_the_share_of_growth_through_it() {
        let none = color(0.0, 2.0);
        let all = color(2.0, 2.0);
        let half = color(1.0, 2.0);
        assert_eq!(none, Color32::from_rgb(70, 86, 112));
        assert_eq!(all, Color32::from_rgb(214, 72, 58));
        assert!(half.r() > none.r() && half.r() < all.r());
        // Nothing grows: every frame is the base.
        assert_eq!(color(0.0, 0.0), none);
    }
}
