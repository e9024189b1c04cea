//! Compare mode: the source (A) and a second recording (B) drawn together,
//! one plot a channel, each side in its own fixed colour on one aligned axis.

use eframe::egui::{self, Color32, RichText};
use flatline_analysis::{ChannelAnalysis, Kind};
use flatline_telemetry::Unit;

use super::channels::badge;
use super::frame::Frame;
use super::kit::{line, linked_plot, runs};
use super::markers::{Mark, draw_markers, lane_plot, marks_on};
use super::series::rates;
use super::series::{axis_unit, decimate_on};
use crate::ui::shared::Findings;
use crate::ui::{Align, Store};
use flatline_receipt::fmt::value;

/// Side A's colour (the source): blue.
pub const A: Color32 = super::kit::DATA;
/// Side B's colour (the recording compared with it): teal, not orange,
/// which the badges use for growth.
pub const B: Color32 = Color32::from_rgb(70, 200, 180);

fn axis_label(align: Align) -> &'static str {
    match align {
        Align::Time => "time since the start",
        Align::Step => "step",
        Align::Tokens => "tokens",
    }
}

/// The chosen channels either side has, A's in its order, then B's own.
fn chosen(d: &Frame<'_>, b: &Store) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for store in [d.store, b] {
        for c in &store.schema().channels {
            if d.settings.selected.contains(&c.name) && !names.contains(&c.name) {
                names.push(c.name.clone());
            }
        }
    }
    names
}

/// One side's line of a channel, as the settings draw it (value, drift
/// from its own baseline, or rate for a counter), with its axis unit and
/// whether it is a rate.
fn side_line(
    store: &Store,
    name: &str,
    visible: usize,
    columns: usize,
    align: Align,
    drift: bool,
    counts: bool,
) -> Option<(Vec<egui_plot::PlotPoint>, &'static str, bool)> {
    let i = store.schema().index_of(name)?;
    let spec = &store.schema().channels[i];
    let (scale, label) = axis_unit(spec.group, spec.unit);
    let rate = spec.kind == Kind::Counter && !counts;
    let baseline = match store.analysis(i) {
        Some(a) if drift && !rate && a.baseline.is_finite() => a.baseline,
        _ => 0.0,
    };
    let x = store.axis(align);
    let pts = decimate_on(store, x, i, visible, columns, baseline, scale);
    let pts = if rate { rates(&pts) } else { pts };
    Some((pts, label, rate))
}

/// One plot per chosen channel, A and B on the same axis.
pub fn plots(d: &Frame<'_>, ui: &mut egui::Ui, visible: usize) {
    let Some(other) = d.other.as_ref() else {
        return;
    };
    let names = chosen(d, &other.store);
    if names.is_empty() {
        ui.centered_and_justified(|ui| ui.label("Choose channels on the left to plot them."));
        return;
    }
    let align = other.align;
    let b_visible = d.other_visible_len();
    let height =
        ((ui.available_height() - 34.0 * names.len() as f32) / names.len() as f32).max(90.0);
    let columns = ui.available_width().max(100.0) as usize;
    let link = egui::Id::unique("flatline-compare-x");
    let capturing = d.capturing();
    let (drift, counts) = (d.settings.drift, d.settings.counts);
    let marks: Vec<Mark> = {
        let side = |store: &Store, n: usize, letter: &str| {
            // Each side's own start-up is said on the cards, not as marks.
            marks_on(store, n, store.axis(align), false)
                .into_iter()
                .map(|m| Mark {
                    text: format!("{letter}: {}", m.text),
                    ..m
                })
                .collect::<Vec<_>>()
        };
        let mut m = side(d.store, visible, "A");
        m.extend(side(&other.store, b_visible, "B"));
        m.sort_by(|a, b| a.x.total_cmp(&b.x));
        m
    };
    if !marks.is_empty() {
        let say_x = move |x: f64| match align {
            Align::Time => format!("{x:.1} s"),
            _ => format!("{} {}", axis_label(align), super::axes::step_label(x)),
        };
        lane_plot(
            ui,
            "compare-lane",
            link,
            capturing,
            axis_label(align),
            None,
            &marks,
            &say_x,
        );
    }
    egui::ScrollArea::vertical().show(ui, |ui| {
        for name in names {
            let a = side_line(d.store, &name, visible, columns, align, drift, counts);
            let b = side_line(
                &other.store,
                &name,
                b_visible,
                columns,
                align,
                drift,
                counts,
            );
            let Some((_, label, rate)) = a.as_ref().or(b.as_ref()) else {
                continue;
            };
            let what = if *rate {
                " rate"
            } else if drift {
                " drift"
            } else {
                ""
            };
            let per = if align == Align::Time { "s" } else { "step" };
            let unit = if *rate {
                format!("{label}/{per}").replace("count/", "/")
            } else {
                (*label).to_string()
            };
            let only = match (&a, &b) {
                (Some(_), None) => "  (only in A)",
                (None, Some(_)) => "  (only in B)",
                _ => "",
            };
            ui.label(RichText::new(format!("{name}{what} ({unit}){only}")).strong());
            linked_plot(
                ("compare", &name),
                height,
                link,
                capturing,
                axis_label(align),
                true,
                true,
            )
            .show(ui, |pui| {
                draw_markers(pui, &marks);
                for (letter, color, side) in [("A", A, a), ("B", B, b)] {
                    if let Some((pts, ..)) = side {
                        for run in runs(&pts) {
                            pui.line(line(letter, run).color(color));
                        }
                    }
                }
            });
        }
    });
}

/// A side's first sentence, as its receipt says it (`None` before its
/// channels are analysed).
fn headline(findings: &Findings) -> String {
    findings
        .answer
        .as_ref()
        .map_or_else(String::new, |a| a.headline.clone())
}

/// One side's verdict on one line: its letter, badge and figures.
fn side_row(ui: &mut egui::Ui, letter: &str, color: Color32, u: Unit, a: Option<&ChannelAnalysis>) {
    ui.horizontal(|ui| {
        ui.label(RichText::new(letter).strong().color(color));
        let Some(a) = a else {
            ui.label(RichText::new("not recorded").small().weak());
            return;
        };
        badge(ui, Some(a));
        let signed = |v: f64| flatline_receipt::report::change(v, u);
        let text = match a.kind {
            Kind::Level => format!(
                "drift {}, slope {}/s",
                signed(a.drift),
                signed(a.slope_per_s)
            ),
            Kind::Counter => format!("rate {}/s", value(a.rate_per_s.unwrap_or(f64::NAN), u)),
            Kind::Gauge => format!("{} to {}", value(a.baseline, u), value(a.final_value, u)),
            Kind::Peak => format!("{} rises, {}", a.jumps, signed(a.drift)),
        };
        ui.label(RichText::new(text).small());
    });
}

/// The verdict cards of both sides, a channel at a time.
/// The lines of code whose growth changed from A to B, as `compare`'s
/// receipt says them, where both sides sampled sites.
fn site_lines(a: &Findings, b: &Findings) -> Vec<String> {
    let (Some(fa), Some(fb)) = (&a.facts, &b.facts) else {
        return Vec::new();
    };
    if !(fa.sites_sampled && fb.sites_sampled) {
        return Vec::new();
    }
    flatline_analysis::compare::site_changes(&fa.sites, &fb.sites)
        .iter()
        .filter_map(flatline_receipt::compare::site_sentence)
        .map(|s| format!("By line of code: {s}."))
        .collect()
}

pub fn cards(d: &Frame<'_>, ui: &mut egui::Ui) {
    let Some(other) = d.other.as_ref() else {
        return;
    };
    let names = chosen(d, &other.store);
    let (ha, hb) = (headline(d.findings), headline(&other.findings));
    let lines = site_lines(d.findings, &other.findings);
    egui::Panel::right("verdicts")
        .resizable(true)
        .default_size(300.0)
        .show(ui, |ui| {
            ui.heading("Verdicts, A and B");
            ui.label(RichText::new(format!("A: {ha}")).strong().color(A));
            ui.label(RichText::new(format!("B: {hb}")).strong().color(B));
            ui.label(
                RichText::new("each side analysed on its own, after its own start-up").small(),
            );
            for line in &lines {
                ui.label(RichText::new(line).color(super::channels::GROWS));
            }
            egui::ScrollArea::vertical().show(ui, |ui| {
                for name in &names {
                    fn find<'s>(
                        s: &'s Store,
                        name: &str,
                    ) -> Option<(Unit, Option<&'s ChannelAnalysis>)> {
                        let i = s.schema().index_of(name)?;
                        Some((s.schema().channels[i].unit, s.analysis(i)))
                    }
                    let (fa, fb) = (find(d.store, name), find(&other.store, name));
                    let Some(unit) = fa.or(fb).map(|f| f.0) else {
                        continue;
                    };
                    egui::Frame::group(ui.style()).show(ui, |ui| {
                        ui.set_width(ui.available_width());
                        ui.label(RichText::new(name).strong());
                        side_row(ui, "A", A, unit, fa.and_then(|f| f.1));
                        side_row(ui, "B", B, unit, fb.and_then(|f| f.1));
                    });
                }
            });
        });
}
