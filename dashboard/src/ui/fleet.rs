//! `flatline fleet --window` and `--screenshot`: a job's ranks at a glance.
//! A small plot per compared channel with every rank a faint line and the
//! outliers drawn strongly and named; the fleet's table beside them (a
//! click opens that rank's recording in a replay window of its own); the
//! set's digest and its files in the caption.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use eframe::egui::{self, Color32, RichText};
use egui_plot::{Line, Plot, PlotPoints};
use flatline_receipt::fleet::Fleet;
use flatline_receipt::fmt::value;
use flatline_telemetry::Unit;

use super::capture::{Capture, ShotResult};

/// The fleet's window state: the comparison, a screenshot being taken, and
/// what the last click asked for.
#[derive(Debug)]
pub struct FleetView {
    pub fleet: Fleet,
    digest: String,
    capture: Option<Capture>,
    pub shot_result: ShotResult,
    /// The recording the person asked to open, and what came of it.
    pub opened: Option<String>,
    /// How a recording is opened (a replay window of its own; tests
    /// replace it).
    pub opener: fn(&std::path::Path) -> Result<()>,
}

/// Opens `file` in a replay window of its own: another flatline process.
fn replay_window(file: &std::path::Path) -> Result<()> {
    let exe = std::env::current_exe().context("finding flatline's own executable")?;
    std::process::Command::new(exe)
        .arg("replay")
        .arg(file)
        .spawn()
        .with_context(|| format!("opening {}", file.display()))?;
    Ok(())
}

/// Outliers' colours, in the order they are named.
const STRONG: [Color32; 4] = [
    Color32::from_rgb(230, 90, 60),
    Color32::from_rgb(240, 170, 40),
    Color32::from_rgb(200, 80, 200),
    Color32::from_rgb(60, 190, 220),
];

impl FleetView {
    pub fn new(fleet: Fleet) -> Self {
        let digest = fleet.digest.clone();
        Self {
            fleet,
            digest,
            capture: None,
            shot_result: Arc::default(),
            opened: None,
            opener: replay_window,
        }
    }

    /// Saves the whole window as PNG after a few frames, then closes it.
    pub fn screenshot_to(&mut self, path: PathBuf) {
        self.capture = Some(Capture::new(path, true));
    }

    fn run_capture(&mut self, ctx: &egui::Context) {
        if let Some(result) = self.capture.as_mut().and_then(|c| c.step(ctx)) {
            self.capture = None;
            *self.shot_result.lock().expect("result lock") = Some(result);
        }
    }

    /// Opens member `i`'s recording as a replay in a window of its own.
    fn open(&mut self, i: usize) {
        let file = self.fleet.members[i].file.clone();
        self.opened = Some(match (self.opener)(&file) {
            Ok(()) => format!("opened {}", file.display()),
            Err(e) => format!("{e:#}"),
        });
    }

    /// One frame of the fleet.
    pub fn show(&mut self, ui: &mut egui::Ui) {
        let ctx = ui.ctx().clone();
        ctx.set_theme(egui::Theme::Dark);
        self.run_capture(&ctx);
        let f = &self.fleet;
        egui::Panel::top("fleet-headline").show(ui, |ui| {
            let color = if f.outliers.is_empty() {
                Color32::LIGHT_GRAY
            } else {
                STRONG[1]
            };
            ui.label(RichText::new(&f.headline).size(16.0).strong().color(color));
        });
        let files: Vec<String> = f
            .members
            .iter()
            .map(|m| {
                m.file
                    .file_name()
                    .map_or(String::new(), |n| n.to_string_lossy().into_owned())
            })
            .collect();
        egui::Panel::bottom("fleet-caption").show(ui, |ui| {
            ui.label(
                RichText::new(format!(
                    "flatline {} fleet of {} recordings, set sha256:{} ({})",
                    env!("CARGO_PKG_VERSION"),
                    f.members.len(),
                    self.digest,
                    files.join(" ")
                ))
                .monospace()
                .small(),
            );
        });
        let mut clicked = None;
        egui::Panel::left("fleet-table")
            .default_size(520.0)
            .show(ui, |ui| {
                egui::ScrollArea::vertical().show(ui, |ui| {
                    if let Some(o) = &self.opened {
                        ui.label(RichText::new(o).small().weak());
                    }
                    egui::Grid::new("fleet-rows")
                        .striped(true)
                        .num_columns(4)
                        .show(ui, |ui| {
                            for h in ["recording", "host", "training", "its own headline"] {
                                ui.label(RichText::new(h).small().strong());
                            }
                            ui.end_row();
                            for (i, m) in f.members.iter().enumerate() {
                                let strong = f.outliers.iter().position(|o| o.member == i);
                                let mut name = RichText::new(m.name()).small().monospace();
                                if let Some(k) = strong {
                                    name = name.color(STRONG[k % STRONG.len()]).strong();
                                }
                                if ui
                                    .selectable_label(false, name)
                                    .on_hover_text(format!("open {} in a replay", m.file.display()))
                                    .clicked()
                                {
                                    clicked = Some(i);
                                }
                                ui.label(RichText::new(&m.host).small());
                                ui.label(
                                    RichText::new(m.training.clone().unwrap_or_default()).small(),
                                );
                                let what = if m.truncated {
                                    format!("(truncated) {}", m.said())
                                } else {
                                    m.said()
                                };
                                ui.add(egui::Label::new(RichText::new(what).small()).truncate());
                                ui.end_row();
                            }
                        });
                });
            });
        // Channels with an outlier first, then by name.
        let mut channels: Vec<(&String, Unit)> =
            f.channels.iter().map(|(n, c)| (n, c.unit)).collect();
        channels.sort_by_key(|(n, _)| !f.outliers.iter().any(|o| &o.channel == *n));
        egui::CentralPanel::default().show(ui, |ui| {
            let cols = 2.min(channels.len()).max(1);
            let rows = channels.len().div_ceil(cols).max(1);
            let w = ui.available_width() / cols as f32 - 8.0;
            let h = (ui.available_height() / rows as f32 - 28.0).clamp(120.0, 400.0);
            egui::Grid::new("fleet-plots")
                .num_columns(cols)
                .show(ui, |ui| {
                    for (k, (name, unit)) in channels.iter().enumerate() {
                        ui.vertical(|ui| {
                            let grows = f.channels[*name].growing.len();
                            ui.label(
                                RichText::new(format!(
                                    "{name}: {grows} of {} grow",
                                    f.channels[*name].members.len()
                                ))
                                .strong(),
                            );
                            small_multiple(ui, f, name, *unit, [w, h]);
                        });
                        if (k + 1) % cols == 0 {
                            ui.end_row();
                        }
                    }
                });
        });
        if let Some(i) = clicked {
            self.open(i);
        }
    }
}

/// A member's readings of a channel after its start-up, as the change since
/// then: ranks whose levels differ by gigabytes share one axis, and a leak
/// of megabytes an hour is seen.
fn drift(m: &flatline_receipt::fleet::Member, name: &str, scale: f64) -> Option<Vec<[f64; 2]>> {
    let points = m.series.get(name)?;
    let from = points.partition_point(|p| p[0] < m.warmup_s);
    let base = points.get(from)?[1];
    Some(
        points[from..]
            .iter()
            .map(|p| [p[0], (p[1] - base) * scale])
            .collect(),
    )
}

/// Every member's `name` as a faint line, the outliers' over them, strong
/// and named in the legend: each the change since its start-up ended.
fn small_multiple(ui: &mut egui::Ui, f: &Fleet, name: &str, unit: Unit, size: [f32; 2]) {
    let (scale, label) = match unit {
        Unit::Bytes => (1.0 / 1_048_576.0, "MiB"),
        _ => (1.0, ""),
    };
    let strong: Vec<usize> = f
        .outliers
        .iter()
        .filter(|o| o.channel == name)
        .map(|o| o.member)
        .collect();
    Plot::new(format!("fleet-{name}"))
        .width(size[0])
        .height(size[1])
        .legend(egui_plot::Legend::default().position(egui_plot::Corner::LeftTop))
        .x_axis_label("time since each recording's start (s)")
        .y_axis_label(format!("{label} since start-up"))
        .allow_scroll(false)
        .show(ui, |pui| {
            for (i, m) in f.members.iter().enumerate() {
                if strong.contains(&i) {
                    continue;
                }
                let Some(pts) = drift(m, name, scale) else {
                    continue;
                };
                pui.line(
                    Line::new("", PlotPoints::from(pts))
                        .color(Color32::from_gray(110).gamma_multiply(0.5))
                        .width(1.0),
                );
            }
            for (k, &i) in strong.iter().enumerate() {
                let m = &f.members[i];
                let Some(pts) = drift(m, name, scale) else {
                    continue;
                };
                let last = pts
                    .last()
                    .map_or(String::new(), |p| value(p[1] / scale, unit));
                pui.line(
                    Line::new(
                        format!("{} ({}), +{last} since start-up", m.name(), m.host),
                        PlotPoints::from(pts),
                    )
                    .color(STRONG[k % STRONG.len()])
                    .width(2.5),
                );
            }
        });
}

/// How the fleet's window opens (`fleet --window`, `--screenshot`, `--size`,
/// `--renderer`).
#[derive(Debug, Clone)]
pub struct FleetWindow {
    /// Saves the first full frame here and closes.
    pub screenshot: Option<PathBuf>,
    pub size: [f32; 2],
    pub renderer: super::Renderer,
}

/// `flatline fleet --window` or `--screenshot PNG`.
pub fn run(args: &FleetWindow, fleet: Fleet) -> Result<()> {
    super::check_display()?;
    let mut view = FleetView::new(fleet);
    let result = view.shot_result.clone();
    if let Some(p) = &args.screenshot {
        view.screenshot_to(p.clone());
    }
    let view = Arc::new(Mutex::new(view));
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title("flatline — fleet")
            .with_inner_size(args.size),
        persist_window: false,
        dithering: false,
        renderer: super::native::native_renderer(args.renderer)?,
        ..Default::default()
    };
    eframe::run_ui_native("flatline", options, move |ui, _frame| {
        view.lock().expect("fleet view").show(ui);
    })
    .map_err(|e| {
        anyhow::anyhow!(
            "cannot open the window: {e} (on a headless machine use `xvfb-run -a flatline …`)"
        )
    })?;
    if args.screenshot.is_some() {
        match result.lock().expect("result lock").take() {
            Some(Ok(p)) => eprintln!("wrote {}", p.display()),
            Some(Err(e)) => anyhow::bail!("the screenshot failed: {e}"),
            None => anyhow::bail!("the window closed before the screenshot was taken"),
        }
    }
    Ok(())
}
