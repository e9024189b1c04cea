//! The verdicts: the banner's headline and the cards under it.

use super::*;

/// The recording's finding in one sentence, above the plots, in the colour
/// of its severity: what a person reads first, live as it changes. Clicking
/// it plots the channels it names.
pub(super) fn banner(d: &mut Frame<'_>, ui: &mut egui::Ui) {
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
    let (_, assessed) = assessed(d.store);
    if assessed.is_empty() {
        return;
    }
    // The process tree's findings, as the receipt makes them, from what
    // the store holds: at most once a second, and only when it grew.
    // Which store, how much of it and how much of it is analysed: a
    // recording opened in its place is a new key, and made at once, and so
    // is the first key with every channel analysed (a replay's analyses
    // arrive over its first frames, and its length never changes after:
    // findings made before them would stand for good).
    let key = (
        d.store.len(),
        d.store.schema().len(),
        d.store.time_range().0.to_bits(),
        d.store.unanalysed(),
    );
    let stale = d.view.tree_findings.as_ref().is_none_or(|(at, k, ..)| {
        *k != key
            && (k.1 != key.1
                || k.2 != key.2
                || (key.3 == 0 && k.3 != 0)
                || at.elapsed().as_secs_f64() >= 1.0)
    });
    if stale {
        let store = &d.store;
        let schema = store.schema();
        let by_name = |n: &str| schema.index_of(n).and_then(|i| store.analysis(i));
        // The tree up to where the analyses stop (a job's teardown), and
        // who died over the whole stream, as the receipt reads them.
        let times = store.times();
        let until = |n: usize| flatline_runtime::analysis::tree::Columns {
            t: &times[..n],
            column: move |c: &str| {
                let v = store.series(schema.index_of(c)?).values();
                Some(&v[..n.min(v.len())])
            },
        };
        let end = store
            .analysis_end()
            .map_or(times.len(), |end| times.partition_point(|&t| t < end));
        let tree = flatline_runtime::analysis::tree::summarize(
            schema,
            store.events(),
            by_name,
            &until(end),
        );
        let data = until(times.len());
        // The host's RAM is not the store's to know: a death is measured
        // against the cgroup's limit where there is one.
        let ending = flatline_runtime::analysis::death::read(
            schema,
            store.events(),
            &Default::default(),
            &data,
            None,
        );
        d.view.tree_findings = Some((std::time::Instant::now(), key, tree, ending));
    }
    let (tree, ending) = match d.view.tree_findings.as_ref() {
        Some((_, _, t, e)) => (t.as_ref(), Some(e)),
        None => (None, None),
    };
    let sites = sites_of(d.store);
    let damage = d.store.damage().map(|dmg| summary::DamageNote {
        sentence: dmg.sentence(),
        lost: dmg.lines(),
        in_headline: dmg.in_headline(),
    });
    let schema = d.store.schema();
    let known = summary::Known {
        tree,
        ending,
        sites: &sites,
        sites_sampled: schema
            .channels
            .iter()
            .any(|c| flatline_runtime::analysis::rules::samples_sites(&c.name)),
        rank: d.store.rank(),
        damage: damage.as_ref(),
    };
    let assessment = summary::assess(&assessed, &known, &value, &flatline_core::fmt::duration);
    // Who died when memory ran out comes first (the headline says so):
    // in the colour of what is critical.
    let died = ending
        .and_then(|e| e.headline(None, &value, &flatline_core::fmt::duration))
        .is_some();
    let names: Vec<String> = assessment
        .growing
        .iter()
        .map(|g| g.name.to_string())
        .collect();
    // What grows is plotted: each of the most urgent few growths once (its
    // lead channel, not its process's RSS, PSS and USS and the sums that
    // repeat it) beside the site whose code holds most of it; once each,
    // once every channel is analysed (a replay's analyses arrive over its
    // first frames, as fast as the machine allows: a channel urgent only
    // among the first few analysed is not what grows most).
    let ready = d.store.unanalysed() == 0;
    let plotted: Vec<String> = assessment
        .growths
        .iter()
        .take(AUTO_PLOTTED)
        .flat_map(|g| {
            std::iter::once(g.channel.clone()).chain(g.sites.first().map(|s| s.channel.clone()))
        })
        .collect();
    for n in plotted.iter().take(if ready { AUTO_PLOTTED } else { 0 }) {
        if d.view.auto_plotted.insert(n.clone()) {
            d.settings.selected.insert(n.clone());
        }
    }
    let text = assessment.headline.clone();
    let color = match assessment.severity() {
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
        d.settings.selected.extend(names);
    }
}

/// How many of the growing channels, most urgent first, the banner plots
/// by itself.
const AUTO_PLOTTED: usize = 4;

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

pub(super) fn cards(d: &mut Frame<'_>, ui: &mut egui::Ui) {
    let schema = d.store.schema();
    let (index, assessed) = assessed(d.store);
    let layers = summary::gpu_layers(&assessed, &value);
    // The chosen channels, most urgent first.
    let selected: Vec<usize> = summary::order(&assessed)
        .into_iter()
        .map(|k| index[k])
        .filter(|&i| d.settings.selected.contains(&schema.channels[i].name))
        .collect();
    let warmup = match d.store.warmup() {
        Some((t, ch)) => format!(
            "after a warm-up of {:.1} s (where {ch}'s start-up ends)",
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
                let mut toggled = None;
                for i in selected {
                    let spec = d.store.schema().channels[i].clone();
                    let Some(a) = d.store.analysis(i) else {
                        continue;
                    };
                    // Growth that reaches a limit within a week is open at
                    // first; the rest is one line until clicked.
                    let urgent = matches!(a.severity, Some(Severity::Warning | Severity::Critical));
                    let open = urgent != d.view.cards_toggled.contains(&spec.name);
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
                    && !d.view.cards_toggled.remove(&name)
                {
                    d.view.cards_toggled.insert(name);
                }
            });
        });
}

/// A folded card: name, badge, drift (or rate, trend, rises) and the time to
/// the limit, on one line.
pub(super) fn card_line(ui: &mut egui::Ui, name: &str, u: Unit, a: &ChannelAnalysis) {
    ui.horizontal(|ui| {
        ui.label(RichText::new(name).strong());
        badge(ui, Some(a));
        let what = match a.kind {
            Kind::Level | Kind::Peak if a.drift != 0.0 && a.drift.is_finite() => {
                flatline_core::commands::report::change(a.drift, u)
            }
            Kind::Level | Kind::Peak => "0".into(),
            Kind::Counter => format!("{}/s", value(a.rate_per_s.unwrap_or(0.0), u)),
            Kind::Gauge => flatline_core::commands::report::trend_text(a).unwrap_or_default(),
        };
        ui.label(RichText::new(what).small());
        if let Some(s) = a.time_to_limit_s {
            ui.label(
                RichText::new(format!("limit in {}", flatline_core::fmt::duration(s))).small(),
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
    let pct = flatline_core::commands::report::trend_text(a)
        .map_or(String::new(), |t| format!("   trend {t}"));
    match a.kind {
        Kind::Level => {
            let text = flatline_core::commands::report::verdict_text(a, u);
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
                flatline_core::fmt::duration(a.longest_flat_s)
            ));
            let eta = a.time_to_limit_s.map_or(String::new(), |s| {
                format!(", limit in {}", flatline_core::fmt::duration(s))
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

/// The allocation sites the store holds (`watch --sites`), as the receipt
/// reads them from a recording.
fn sites_of(store: &crate::ui::Store) -> Vec<flatline_runtime::analysis::sites::Site> {
    use flatline_runtime::analysis::sites;
    let schema = store.schema();
    let channels: Vec<sites::SiteChannel<'_>> = (0..schema.len())
        .filter(|&i| flatline_runtime::analysis::rules::is_site_channel(&schema.channels[i].name))
        .filter_map(|i| {
            Some(sites::SiteChannel {
                name: &schema.channels[i].name,
                labels: &schema.channels[i].labels,
                analysis: store.analysis(i)?,
                last: store.series(i).values().last().copied().unwrap_or(f64::NAN),
            })
        })
        .collect();
    sites::sites(&channels)
}
