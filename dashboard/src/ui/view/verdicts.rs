//! The verdicts: the banner's headline and the cards under it.

use super::channels::{CRITICAL, FLAT, GROWS, UNTOLD, badge, severity_color};
use super::frame::{Action, Frame};
use crate::ui::Focus;
use crate::ui::shared::VerdictsState;
use eframe::egui::{self, RichText};
use flatline_analysis::summary::{self, Assessed};
use flatline_analysis::{ChannelAnalysis, Kind, Severity};
use flatline_receipt::fmt::value;
use flatline_telemetry::Unit;

/// The recording's finding in one sentence, above the plots, in the colour
/// of its severity: what a person reads first, live as it changes. Clicking
/// it plots the channels it names.
pub(super) fn banner(d: &Frame<'_>, ui: &mut egui::Ui, actions: &mut Vec<Action>) {
    // A recording that cannot be written comes first, whatever the data
    // say: what is on screen is no longer all on disk.
    if let Some(fault) = d.seen.write_fault.clone() {
        egui::Panel::top("write-fault").show(ui, |ui| {
            ui.add(
                egui::Label::new(
                    RichText::new(format!("Not recorded: {fault}"))
                        .size(16.0)
                        .strong()
                        .color(CRITICAL),
                )
                .wrap(),
            );
        });
    }
    let Some(assessment) = d.findings.answer.as_ref() else {
        return;
    };
    let died = assessment.died;
    let names = assessment.growing.clone();
    let text = assessment.headline.clone();
    let color = match assessment.severity {
        _ if died => CRITICAL,
        Some(s) => severity_color(s),
        // A finding (copies that rose and held) is growth found, not flat,
        // though no channel grows at the end: the colour of growth whose
        // limit is far.
        None if assessment.growth_found() => GROWS,
        // Readings that cannot tell growth from noise are not "flat": no green.
        None if !assessment.untold.is_empty() => UNTOLD,
        None => FLAT,
    };
    let clicked = egui::Panel::top("finding")
        .show(ui, |ui| {
            let r = ui.add(
                egui::Label::new(RichText::new(text).size(16.0).strong().color(color))
                    .sense(egui::Sense::click()),
            );
            if names.is_empty() {
                r
            } else {
                r.on_hover_text("click to plot the channels it names")
            }
            .clicked()
        })
        .inner;
    if clicked {
        actions.push(Action::Plot(names));
    }
}

/// The analysed channels as the summary reads them, with their indices.
pub(super) fn assessed(store: &crate::ui::Store) -> (Vec<usize>, Vec<Assessed<'_>>) {
    let schema = store.schema();
    (0..schema.len())
        .filter_map(|i| {
            let analysis = store.analysis(i)?;
            Some((
                i,
                Assessed {
                    name: &schema.channels[i].name,
                    unit: schema.channels[i].unit,
                    analysis,
                    limit: store.limit(i).map(|l| l.1),
                },
            ))
        })
        .unzip()
}

pub(super) fn cards(
    d: &Frame<'_>,
    mine: &mut VerdictsState,
    ui: &mut egui::Ui,
    actions: &mut Vec<Action>,
) {
    let schema = d.store.schema();
    let (index, assessed) = assessed(d.store);
    let answer = d.findings.answer.as_ref();
    let layers = answer.and_then(|a| a.gpu_layers.clone());
    // One card per growth (a process's RSS, PSS and USS and the sums that
    // repeat it are one), most urgent first.
    let growths: &[flatline_analysis::answer::Growth] = answer.map_or(&[], |a| &a.growths);
    let told: std::collections::HashSet<&str> = growths
        .iter()
        .flat_map(|g| {
            g.channels
                .iter()
                .chain(g.sites.iter().map(|s| &s.channel))
                .map(String::as_str)
        })
        .collect();
    // Then the chosen channels no growth card tells (nor its sites), most
    // urgent first.
    let selected: Vec<usize> = summary::order(&assessed)
        .into_iter()
        .map(|k| index[k])
        .filter(|&i| d.settings.selected.contains(&schema.channels[i].name))
        .filter(|&i| !told.contains(schema.channels[i].name.as_str()))
        .collect();
    let warmup = match d.store.warmup() {
        Some((t, ch)) => format!(
            "after a start-up of {:.1} s (where {ch} settles)",
            t - d.store.time_range().0
        ),
        None => "no start-up found: every reading counts".into(),
    };
    egui::Panel::right("verdicts")
        .resizable(true)
        .default_size(250.0)
        .show(ui, |ui| {
            ui.heading("Verdicts");
            // The headline is the banner above the plots; the GPU's layers
            // finding stays here.
            if let Some(f) = layers {
                ui.label(RichText::new(f.text).strong());
            }
            ui.label(RichText::new(format!("updated once a second, {warmup}")).small());
            egui::ScrollArea::vertical().show(ui, |ui| {
                for g in growths {
                    let r = egui::Frame::group(ui.style())
                        .show(ui, |ui| {
                            ui.set_width(ui.available_width());
                            growth_card(ui, g);
                        })
                        .response
                        .interact(egui::Sense::click())
                        .on_hover_text(
                            "click to plot it with its site, and mark its process and site",
                        );
                    if r.clicked() {
                        let site = g.sites.first().map(|s| s.channel.clone());
                        actions.push(Action::Plot(
                            std::iter::once(g.channel.clone())
                                .chain(site.clone())
                                .collect(),
                        ));
                        actions.push(Action::Focus(Focus {
                            pid: g.who.as_ref().map(|w| w.pid),
                            site,
                        }));
                    }
                }
                let mut toggled = None;
                for i in selected {
                    let spec = d.store.schema().channels[i].clone();
                    let Some(a) = d.store.analysis(i) else {
                        continue;
                    };
                    // Growth that reaches a limit within a week is open at
                    // first; the rest is one line until clicked.
                    let urgent = matches!(a.severity, Some(Severity::Warning | Severity::Critical));
                    let open = urgent != mine.cards_toggled.contains(&spec.name);
                    let r = egui::Frame::group(ui.style())
                        .show(ui, |ui| {
                            ui.set_width(ui.available_width());
                            if open {
                                card(ui, &spec.name, spec.unit, a);
                            } else {
                                card_line(ui, &spec.name, spec.unit, a);
                            }
                        })
                        .response
                        .interact(egui::Sense::click())
                        .on_hover_text(if open {
                            "click to fold"
                        } else {
                            "click for the details"
                        });
                    if r.clicked() {
                        toggled = Some(spec.name.clone());
                    }
                }
                if let Some(name) = toggled
                    && !mine.cards_toggled.remove(&name)
                {
                    mine.cards_toggled.insert(name);
                }
            });
        });
}

/// A growth's card: who grows, how fast and to which limit, in what kind
/// of memory, which code holds it, what to try, and the channels that are
/// this one growth.
pub(super) fn growth_card(ui: &mut egui::Ui, g: &flatline_analysis::answer::Growth) {
    let color = g.severity.map_or(GROWS, severity_color);
    let who = g.subject();
    ui.horizontal_wrapped(|ui| {
        ui.label(RichText::new(who).strong().color(color));
        ui.label(RichText::new(g.verdict.as_str()).small().color(color));
    });
    let rate = flatline_analysis::finding::rate_text(g.rate_per_s, g.unit, &value);
    let limit = match g.time_to_limit_s {
        Some(t) => format!(", limit in {}", flatline_receipt::fmt::duration(t)),
        None => String::new(),
    };
    ui.label(format!("grows {rate}{limit}"));
    if let Some(m) = &g.memory {
        ui.label(format!("{:.0} % {}", 100.0 * m.share, m.phrase()))
            .on_hover_text(&m.detail);
    }
    // Without sites, what to try says how to get them.
    if let Some(site) = g.sites.first() {
        ui.label(
            RichText::new(format!(
                "{:.0} % at {} {}",
                100.0 * site.share,
                site.at,
                site.function
            ))
            .monospace()
            .small(),
        );
        if let Some(code) = &site.code {
            ui.label(RichText::new(code).monospace().small().weak());
        }
    }
    if let Some(t) = &g.advice {
        ui.label(RichText::new(format!("try: {t}")).small().italics());
    }
    let n = g.channels.len();
    ui.label(
        RichText::new(if n == 1 {
            g.channel.clone()
        } else {
            format!("{} and {} more channels", g.channel, n - 1)
        })
        .small()
        .weak(),
    )
    .on_hover_text(g.channels.join("\n"));
}

/// A folded card: name, badge, drift (or rate, trend, rises) and the time to
/// the limit, on one line.
pub(super) fn card_line(ui: &mut egui::Ui, name: &str, u: Unit, a: &ChannelAnalysis) {
    ui.horizontal(|ui| {
        ui.label(RichText::new(name).strong());
        badge(ui, Some(a));
        let what = match a.kind {
            Kind::Level | Kind::Peak if a.drift != 0.0 && a.drift.is_finite() => {
                flatline_receipt::report::change(a.drift, u)
            }
            Kind::Level | Kind::Peak => "0".into(),
            Kind::Counter => format!("{}/s", value(a.rate_per_s.unwrap_or(0.0), u)),
            Kind::Gauge => flatline_receipt::report::trend_text(a).unwrap_or_default(),
        };
        ui.label(RichText::new(what).small());
        if let Some(s) = a.time_to_limit_s {
            ui.label(
                RichText::new(format!("limit in {}", flatline_receipt::fmt::duration(s))).small(),
            );
        }
    });
}

/// One channel's verdict card, as its kind is read.
pub(super) fn card(ui: &mut egui::Ui, name: &str, u: Unit, a: &ChannelAnalysis) {
    ui.horizontal(|ui| {
        ui.label(RichText::new(name).strong());
        badge(ui, Some(a));
        if let Some(sev) = a.severity {
            let c = severity_color(sev);
            ui.label(RichText::new(sev.as_str()).small().strong().color(c));
        }
        ui.label(RichText::new(format!("{:.0} %", a.confidence * 100.0)).small());
    });
    let signed = |v: f64| {
        if v == 0.0 || !v.is_finite() {
            "0".to_string()
        } else {
            format!("{}{}", if v > 0.0 { "+" } else { "-" }, value(v.abs(), u))
        }
    };
    let pct =
        flatline_receipt::report::trend_text(a).map_or(String::new(), |t| format!("   trend {t}"));
    match a.kind {
        Kind::Level => {
            let text = flatline_receipt::report::verdict_text(a, u);
            if text != a.verdict.as_str() {
                ui.label(RichText::new(text).small().italics());
            }
            ui.label(format!(
                "drift {}   slope {}/s",
                signed(a.drift),
                signed(a.slope_per_s)
            ));
            let jumps = match a.quantum {
                Some(q) if a.jumps > 0 => format!("{} jumps × {}", a.jumps, value(q, u)),
                _ => format!("{} jumps", a.jumps),
            };
            ui.label(format!(
                "{jumps}, longest flat {}",
                flatline_receipt::fmt::duration(a.longest_flat_s)
            ));
            let eta = a.time_to_limit_s.map_or(String::new(), |s| {
                format!(", limit in {}", flatline_receipt::fmt::duration(s))
            });
            ui.label(format!(
                "24 h: {}{eta}",
                signed(a.projection_24h.unwrap_or(0.0))
            ));
        }
        Kind::Counter => {
            ui.label(format!(
                "rate {}/s{pct}",
                value(a.rate_per_s.unwrap_or(0.0), u)
            ));
            ui.label(format!(
                "from {}/s to {}/s",
                value(a.baseline, u),
                value(a.final_value, u)
            ));
            if let Some(p) = a.drift_per_step {
                ui.label(format!("{} per step", value(p, u)));
            }
        }
        Kind::Gauge => {
            ui.label(format!(
                "{} to {}{pct}",
                value(a.baseline, u),
                value(a.final_value, u)
            ));
        }
        Kind::Peak => {
            let last = a
                .last_rise_s
                .map_or(String::new(), |t| format!(", last at {t:.1} s"));
            ui.label(format!("{} rises, {}{last}", a.jumps, signed(a.drift)));
        }
    }
}
