//! `flatline live` (and `flatline` alone): the built-in workloads in a
//! process of their own, streamed into the window.

use anyhow::{Context, Result};

use crate::cli::LiveArgs;
use crate::viewer::{Show, Shown, Viewer};
use flatline_stream::source::{LiveSource, Source};

pub fn run(args: &LiveArgs, viewer: &dyn Viewer) -> Result<()> {
    viewer.check_display()?;
    let exe = std::env::current_exe().context("finding flatline's own executable")?;
    let (mut source, store) = LiveSource::start_with(&exe, args.serve_config())?;
    if let Some(path) = &args.record {
        source.start_recording(path)?;
    }
    viewer.show(Show {
        title: "flatline — live".to_owned(),
        size: [1600.0, 1000.0],
        window: args.window.clone(),
        screenshot: None,
        shown: Shown::Source {
            source: Box::new(source),
            store,
        },
    })?;
    Ok(())
}
