//! `flatline replay FILE`: a recording in the window, played, followed
//! while it grows (`--follow`), or drawn once into a PNG (`--screenshot`).

use anyhow::{Context, Result};
use flatline_telemetry::recording::FrameReader;

use crate::cli::ReplayArgs;
use crate::viewer::{Show, Shown, Viewer};
use flatline_stream::source::{ReplaySource, Source};

pub fn run(args: &ReplayArgs, viewer: &dyn Viewer) -> Result<()> {
    viewer.check_display()?;
    let shown = if !args.follow && args.screenshot.is_none() {
        // The window comes up at once and reads the file on a thread of its
        // own; what is not a recording at all is refused first, here.
        let file = std::fs::File::open(&args.file)
            .with_context(|| format!("opening {}", args.file.display()))?;
        FrameReader::open(std::io::BufReader::new(file), &args.file)?;
        Shown::Opening(args.file.clone())
    } else {
        let (source, store): (Box<dyn Source>, _) = if args.follow {
            let (s, st) = ReplaySource::follow(&args.file)?;
            (Box::new(s), st)
        } else {
            let (s, st) = ReplaySource::open(&args.file)?;
            (Box::new(s), st)
        };
        Shown::Source { source, store }
    };
    viewer.show(Show {
        title: format!("flatline — {}", args.file.display()),
        size: args.size,
        window: args.window.clone(),
        screenshot: args.screenshot.clone(),
        shown,
    })?;
    Ok(())
}
