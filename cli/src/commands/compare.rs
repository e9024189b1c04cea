//! `flatline compare A B`: two recordings side by side, as a receipt (text,
//! Markdown, JSON) or in the dashboard. What the comparison judges is in
//! `flatline_analysis::compare`, its words in `flatline_receipt::compare`;
//! this file parses the flags and prints.

use anyhow::Result;
use flatline_receipt::compare::{Comparison, json_report, md_report, text_report};

use crate::cli::{AlignArg, CompareArgs, ReportFormat};
use crate::commands::report;
use crate::viewer::{Show, Shown};
use flatline_stream::source::{ReplaySource, Source};
use flatline_stream::store::Align;

pub fn run(args: &CompareArgs, viewer: &dyn crate::Viewer) -> Result<()> {
    // Each file is opened once, warning once if its tail is bad; a damaged
    // side compares what it has.
    let a = report::open(&args.a)?;
    let b = report::open(&args.b)?;
    if let Some(format) = args.format {
        let c = Comparison::new(&a, &b, args.align.map(Align::from), args.warmup_s);
        match format {
            ReportFormat::Json => println!("{}", serde_json::to_string_pretty(&json_report(&c))?),
            ReportFormat::Md => print!("{}", md_report(&c)),
            ReportFormat::Text => print!("{}", text_report(&c)),
        }
        if args.screenshot.is_none() {
            return Ok(());
        }
    }
    // A as the source, B beside it; by step when both runs have steps (the
    // dashboard falls back to time where one has none), unless asked.
    viewer.check_display()?;
    let title = format!("flatline — {} and {}", args.a.display(), args.b.display());
    let (a, a_store) = ReplaySource::from_recording(a);
    let (b, b_store) = ReplaySource::from_recording(b);
    let shown = Shown::Compare {
        a,
        a_store,
        b: b.meta(),
        b_store,
        align: args.align.unwrap_or(AlignArg::Step).into(),
    };
    viewer.show(Show {
        title,
        size: args.size,
        window: args.window.clone(),
        screenshot: args.screenshot.clone(),
        shown,
    })?;
    Ok(())
}
