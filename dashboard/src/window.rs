//! `flatline live` and `flatline replay`: the commands that open the window.

use anyhow::{Context, Result, bail};

use crate::cli::{LiveArgs, ReplayArgs};
use crate::ui::{self, Dashboard, LiveSource, ReplaySource, Settings, Source};

pub fn live(args: &LiveArgs) -> Result<()> {
    ui::check_display()?;
    let exe = std::env::current_exe().context("finding flatline's own executable")?;
    let (mut src, store) =
        LiveSource::start_with(&exe, args.workload.into(), args.hz, &args.export.to_args())?;
    if let Some(path) = &args.record {
        src.start_recording(path)?;
    }
    let window = ui::WindowOptions::new(&args.window, args.hz);
    ui::run_window(
        "flatline — live",
        [1600.0, 1000.0],
        window,
        move |settings| Dashboard::new(Box::new(src), store, settings),
    )?;
    Ok(())
}

pub fn replay(args: &ReplayArgs) -> Result<()> {
    ui::check_display()?;
    let (src, store): (Box<dyn ui::Source>, _) = if args.follow {
        let (s, st) = ReplaySource::follow(&args.file)?;
        (Box::new(s), st)
    } else {
        let (s, st) = ReplaySource::open(&args.file)?;
        (Box::new(s), st)
    };
    let name = args.file.display().to_string();
    // A replay plays (or a followed soak grows) at up to 30 frames a second.
    let window = ui::WindowOptions::new(&args.window, ui::MAX_DEFAULT_FPS);
    match &args.screenshot {
        None => {
            ui::run_window(
                &format!("flatline — {name}"),
                args.size,
                window,
                move |settings| Dashboard::new(src, store, settings),
            )?;
            Ok(())
        }
        Some(png) => {
            // Evidence is made with the default view, whatever this user last chose.
            let mut dash = Dashboard::new(src, store, Settings::default());
            dash.screenshot_to(png.clone(), true);
            let result = dash.shot_result.clone();
            ui::run_window(
                &format!("flatline — {name}"),
                args.size,
                window,
                move |_| dash,
            )?;
            match result.lock().expect("result lock").take() {
                Some(Ok(path)) => {
                    println!("wrote {}", path.display());
                    Ok(())
                }
                Some(Err(e)) => bail!("screenshot failed: {e}"),
                None => bail!("the window closed before the screenshot was taken"),
            }
        }
    }
}
