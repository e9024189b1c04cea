//! A part of the run chosen on a plot (shift + drag), and its receipt: the
//! same analysis as `report --from/--to`, on the plotted channels' readings
//! the window holds for that part.

use flatline_runtime::analysis::summary::{self, Assessed};
use flatline_runtime::analysis::{ChannelAnalysis, Context, analyze, rules};
use flatline_runtime::telemetry::Unit;

use super::Frame;
use super::axes::clock;
use flatline_core::fmt::value;
use flatline_core::render::{Block, Col, Doc, Table};

/// The receipt of a part of the run.
#[derive(Debug, Clone)]
pub struct RangeReceipt {
    /// Seconds on the plots' clock.
    pub from: f64,
    pub to: f64,
    pub headline: String,
    /// Channel, verdict as a person reads it, drift, slope.
    pub rows: Vec<[String; 4]>,
    /// The same as a Markdown table, to paste into an issue.
    pub markdown: String,
}

/// Analyses the plotted channels' readings from `from` to `to` seconds, each
/// as its kind, after the window's warm-up where the part begins inside it.
pub fn receipt(d: &Frame<'_>, from: f64, to: f64) -> RangeReceipt {
    let store = &d.store;
    let times = store.times();
    let (a, b) = (
        times.partition_point(|&t| t < from),
        times.partition_point(|&t| t <= to),
    );
    let t = &times[a..b.max(a)];
    let warmup = match (store.warmup(), t.first()) {
        (Some((w, _)), Some(&first)) => (w - first).max(0.0),
        _ => 0.0,
    };
    let steps = store
        .step_axis()
        .map(|i| &store.series(i).values()[a..b.max(a)]);
    let schema = store.schema();
    let mut analysed: Vec<(usize, ChannelAnalysis)> = Vec::new();
    for (i, spec) in schema.channels.iter().enumerate() {
        if !d.settings.selected.contains(&spec.name) {
            continue;
        }
        let v = store.series(i).values();
        if v.len() < b {
            continue; // a channel that ended before this part
        }
        let ctx = Context {
            kind: spec.kind,
            warmup_s: Some(warmup),
            steps,
            limit: store.limit(i).map(|l| l.0),
            min_growth: rules::evidence_floor(&spec.name, spec.unit),
            ..Context::default()
        };
        analysed.push((i, analyze(t, &v[a..b.max(a)], &ctx)));
    }
    let assessed: Vec<Assessed<'_>> = analysed
        .iter()
        .map(|(i, a)| Assessed {
            name: &schema.channels[*i].name,
            unit: schema.channels[*i].unit,
            analysis: a,
            limit: store.limit(*i).map(|l| l.1),
        })
        .collect();
    let headline = summary::headline(&assessed, &value, &flatline_core::fmt::duration);
    let order = summary::order(&assessed);
    let signed = |v: f64, u: Unit| {
        if v == 0.0 || !v.is_finite() {
            "0".to_string()
        } else {
            flatline_core::commands::report::change(v, u)
        }
    };
    let rows: Vec<[String; 4]> = order
        .into_iter()
        .map(|k| {
            let (i, a) = &analysed[k];
            let u = schema.channels[*i].unit;
            [
                schema.channels[*i].name.clone(),
                flatline_core::commands::report::verdict_text(a, u),
                signed(a.drift, u),
                format!("{}/s", signed(a.slope_per_s, u)),
            ]
        })
        .collect();
    let mut table = Table::new(vec![
        Col::left("channel", 0),
        Col::left("verdict", 0),
        Col::right("drift", 0),
        Col::right("slope", 0),
    ]);
    for r in &rows {
        table.row(vec![
            format!("`{}`", r[0]),
            r[1].clone(),
            r[2].clone(),
            r[3].clone(),
        ]);
    }
    let mut doc = Doc::default();
    doc.push(Block::Headline(headline.clone()))
        .push(Block::Para(format!(
            "Part analysed: {} to {} ({} samples).",
            clock(from),
            clock(to),
            t.len()
        )))
        .push(Block::Table {
            indent: String::new(),
            table,
        });
    let markdown = doc.markdown();
    RangeReceipt {
        from,
        to,
        headline,
        rows,
        markdown,
    }
}
