//! A part of the run chosen on a plot (shift + drag), and its receipt: the
//! same analysis as `report --from/--to`, on the plotted channels' readings
//! the window holds for that part.

use flatline_analysis::ChannelAnalysis;
use flatline_telemetry::Unit;

use std::collections::BTreeSet;

use flatline_stream::store::Store;

use super::axes::clock;
use crate::ui::shared::{RangeReceipt, RangeRow};
use flatline_receipt::render::{Block, Col, Doc, Table};

/// Analyses the plotted channels' readings from `from` to `to` seconds, each
/// as its kind, after the window's start-up where the part begins inside it.
/// `selected` are the plotted channels, listed in its table.
pub fn receipt(store: &Store, selected: &BTreeSet<String>, from: f64, to: f64) -> RangeReceipt {
    let times = store.times();
    let t0 = times.first().copied().unwrap_or(0.0);
    let schema = store.schema();
    // Read and answered as `report --from/--to` reads a recording: every
    // channel (the headline is the part's), then the plotted ones listed.
    let run = store.read_part(Some([from - t0, to - t0]));
    let read = &run.reading;
    let samples = read.samples.len();
    let headline = run.answer.headline.clone();
    let analysed: Vec<(usize, &ChannelAnalysis)> = read
        .channels
        .iter()
        .filter(|r| selected.contains(&schema.channels[r.index].name))
        .map(|r| (r.index, &r.analysis))
        .collect();
    let signed = |v: f64, u: Unit| {
        if v == 0.0 || !v.is_finite() {
            "0".to_string()
        } else {
            flatline_receipt::report::change(v, u)
        }
    };
    let rows: Vec<RangeRow> = analysed
        .iter()
        .map(|(i, a)| {
            let u = schema.channels[*i].unit;
            RangeRow {
                channel: schema.channels[*i].name.clone(),
                verdict: flatline_receipt::report::verdict_text(a, u),
                drift: signed(a.drift, u),
                slope: format!("{}/s", signed(a.slope_per_s, u)),
            }
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
            format!("`{}`", r.channel),
            r.verdict.clone(),
            r.drift.clone(),
            r.slope.clone(),
        ]);
    }
    let mut doc = Doc::default();
    doc.push(Block::Headline(headline.clone()))
        .push(Block::Para(format!(
            "Part analysed: {} to {} ({} samples).",
            clock(from),
            clock(to),
            samples
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
