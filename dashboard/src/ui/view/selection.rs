//! A part of the run chosen on a plot (shift + drag), and its receipt: the
//! same analysis as `report --from/--to`, on the plotted channels' readings
//! the window holds for that part.

use flatline_analysis::summary::{self, Assessed};
use flatline_analysis::tree::Columns;
use flatline_analysis::{ChannelAnalysis, reading};
use flatline_telemetry::Unit;

use super::axes::clock;
use super::frame::Frame;
use crate::ui::shared::RangeReceipt;
use flatline_receipt::fmt::value;
use flatline_receipt::render::{Block, Col, Doc, Table};

/// Analyses the plotted channels' readings from `from` to `to` seconds, each
/// as its kind, after the window's start-up where the part begins inside it.
pub fn receipt(d: &Frame<'_>, from: f64, to: f64) -> RangeReceipt {
    let store = &d.store;
    let times = store.times();
    let t0 = times.first().copied().unwrap_or(0.0);
    let schema = store.schema();
    // Read as `report --from/--to` reads a recording: every channel (the
    // headline is the part's), then the plotted ones listed.
    let input = reading::Input {
        schema,
        events: store.events(),
        host: store.host(),
        launched: false,
        t: times,
        column: |i: usize| store.series(i).values(),
    };
    let read = reading::read_input(&input, None, Some([from - t0, to - t0]), false);
    let samples = read.samples.len();
    let assessed: Vec<Assessed<'_>> = read.assessed(schema);
    // The part's tree, deaths and sites, as the receipt of a part reads them.
    let (a, b) = (read.samples.start, read.samples.end);
    let by_index = read.by_index(schema.len());
    let stream = reading::Stream {
        schema,
        events: store.events(),
        host: store.host(),
        root: store.root(),
        rank: store.rank(),
        part: Columns {
            t: &times[a..b],
            column: |n: &str| Some(&store.series(schema.index_of(n)?).values()[a..b]),
        },
        whole: Columns {
            t: times,
            column: |n: &str| Some(store.series(schema.index_of(n)?).values()),
        },
    };
    let facts = reading::Facts::read(&stream, |i| by_index[i]);
    let headline = summary::assess(
        &assessed,
        &facts.known(reading::Lost::default()),
        &value,
        &flatline_receipt::fmt::duration,
    )
    .headline;
    let analysed: Vec<(usize, &ChannelAnalysis)> = read
        .channels
        .iter()
        .filter(|r| d.settings.selected.contains(&schema.channels[r.index].name))
        .map(|r| (r.index, &r.analysis))
        .collect();
    let signed = |v: f64, u: Unit| {
        if v == 0.0 || !v.is_finite() {
            "0".to_string()
        } else {
            flatline_receipt::report::change(v, u)
        }
    };
    let rows: Vec<[String; 4]> = analysed
        .iter()
        .map(|(i, a)| {
            let u = schema.channels[*i].unit;
            [
                schema.channels[*i].name.clone(),
                flatline_receipt::report::verdict_text(a, u),
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
