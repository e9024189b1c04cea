//! `flatline bench window`: what an open window costs the machine, measured
//! as a person would: the CPU time of the window's process and the frames it
//! drew, over a stretch of seconds, in two cases, each in a process of its
//! own (a process opens one window):
//!
//! - `live`: the dashboard following a live stream (`flatline serve` with the
//!   idle workload, at `--hz`), as `live` and `watch` windows do; the stream's
//!   own process is not counted;
//! - `paused`: a replay of a synthetic ten-minute recording, paused, with no
//!   input: nothing new to show.
//!
//! The first 3 s of each case (the window opening, the first analyses) are
//! left out. Each case reports its CPU a second and a frame: the first is
//! what a person pays, the second what machines of different speed compare
//! on (CI's guard reads it).

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use flatline_arena::workload::driver::Workload;

use crate::ui::{Dashboard, LiveSource, ReplaySource, ServeConfig, Settings, WindowOptions};
use flatline_cli::cli::WindowBenchArgs;

/// Left out at the start of each case.
const SETTLE: Duration = Duration::from_secs(3);

/// This process's CPU time (user + system), from `/proc/self/stat`.
fn process_cpu_s() -> Result<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").context("reading /proc/self/stat")?;
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .context("an odd /proc/self/stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3 of the file, utime 14 and stime 15.
    let tick = |i: usize| -> Result<f64> {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .context("an odd /proc/self/stat")
    };
    let hz = flatline_arena::sys::clock_ticks_per_second() as f64;
    Ok((tick(11)? + tick(12)?) / hz)
}

/// One case, in this process: opens the window, measures, closes it, prints
/// one JSON line.
fn run_case(args: &WindowBenchArgs, case: &str) -> Result<()> {
    crate::ui::check_display()?;
    let dir = tempfile::tempdir().context("creating a temporary folder")?;
    let (dash, fps): (Dashboard, f64) = match case {
        "live" => {
            let (src, store) = LiveSource::start(ServeConfig::new(Workload::Idle, args.hz))?;
            (
                Dashboard::new(Box::new(src), store, Settings::default()),
                args.hz,
            )
        }
        "paused" => {
            let path = dir.path().join("paused.flr");
            super::ui::write_synthetic(&path, 60_000)?;
            let (src, store) = ReplaySource::open(&path)?;
            (
                Dashboard::new(Box::new(src), store, Settings::default()),
                crate::ui::MAX_DEFAULT_FPS,
            )
        }
        other => bail!("no case {other:?}: live or paused"),
    };
    let window = WindowOptions::new(
        crate::from_cli::asked(&args.window),
        fps,
        dash.source.kind(),
    );
    let seconds = args.seconds;
    let measured = std::sync::Arc::new(std::sync::Mutex::new(None));
    let result = measured.clone();
    // Measures from another thread, then closes the window as Ctrl-C would.
    std::thread::spawn(move || {
        std::thread::sleep(SETTLE);
        let (c0, f0, t0) = (
            process_cpu_s(),
            crate::ui::FRAMES.load(std::sync::atomic::Ordering::Relaxed),
            Instant::now(),
        );
        std::thread::sleep(Duration::from_secs_f64(seconds));
        let (c1, f1, t1) = (
            process_cpu_s(),
            crate::ui::FRAMES.load(std::sync::atomic::Ordering::Relaxed),
            t0.elapsed(),
        );
        *result.lock().expect("result lock") = Some(match (c0, c1) {
            (Ok(c0), Ok(c1)) => Ok((c1 - c0, f1 - f0, t1.as_secs_f64())),
            (Err(e), _) | (_, Err(e)) => Err(e),
        });
        let _ = flatline_arena::sys::terminate(std::process::id());
    });
    crate::ui::run_window(
        &format!("flatline — bench window ({case})"),
        [1600.0, 1000.0],
        window,
        move |_| dash,
    )?;
    let (cpu_s, frames, wall_s) = measured
        .lock()
        .expect("result lock")
        .take()
        .context("the window closed before the measurement ended")??;
    let v = serde_json::json!({
        "case": case,
        "seconds": wall_s,
        "frames": frames,
        "frames_per_s": frames as f64 / wall_s,
        "cpu_s": cpu_s,
        "cpu_pct_of_core": 100.0 * cpu_s / wall_s,
        // What a frame costs: machines of different speed compare on it.
        "cpu_ms_per_frame": (frames > 0).then(|| 1000.0 * cpu_s / frames as f64),
        "fps_cap": window.fps,
        "renderer": window.renderer.name(),
    });
    println!("{v}");
    Ok(())
}

pub fn run(args: &WindowBenchArgs) -> Result<()> {
    if let Some(case) = &args.case {
        return run_case(args, case);
    }
    crate::ui::check_display()?;
    let exe = std::env::current_exe().context("finding flatline's own executable")?;
    let mut results = Vec::new();
    for case in ["live", "paused"] {
        let mut cmd = Command::new(&exe);
        cmd.args(["bench", "window", "--case", case, "--seconds"])
            .arg(args.seconds.to_string())
            .arg("--hz")
            .arg(args.hz.to_string());
        if let Some(f) = args.window.fps {
            cmd.arg("--fps").arg(f.to_string());
        }
        if let Some(r) = args.window.renderer {
            cmd.arg("--renderer").arg(format!("{r:?}").to_lowercase());
        }
        let out = cmd
            .output()
            .with_context(|| format!("running the {case} case"))?;
        if !out.status.success() {
            bail!(
                "the {case} case failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let line = String::from_utf8_lossy(&out.stdout);
        let v: serde_json::Value = line
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str(l).ok())
            .with_context(|| format!("the {case} case printed no result: {line}"))?;
        results.push(v);
    }
    let pct = |v: &serde_json::Value| v["cpu_pct_of_core"].as_f64().unwrap_or(f64::NAN);
    if args.json {
        println!(
            "{}",
            serde_json::json!({"workload": "window", "hz": args.hz, "cases": results})
        );
    } else {
        println!(
            "window under {} ({} renderer), {:.0} s a case after {} s to settle",
            std::env::var("DISPLAY").unwrap_or_default(),
            results[0]["renderer"].as_str().unwrap_or("?"),
            args.seconds,
            SETTLE.as_secs()
        );
        for v in &results {
            let per_frame = v["cpu_ms_per_frame"]
                .as_f64()
                .map_or("no frames".to_owned(), |ms| format!("{ms:5.1} ms a frame"));
            println!(
                "  {:7} {:6.1} frames/s (cap {:.0})   CPU {:6.2} % of a core, {per_frame}",
                v["case"].as_str().unwrap_or("?"),
                v["frames_per_s"].as_f64().unwrap_or(f64::NAN),
                v["fps_cap"].as_f64().unwrap_or(f64::NAN),
                pct(v)
            );
        }
    }
    if let Some((live, paused)) = args.fail_above {
        let (l, p) = (pct(&results[0]), pct(&results[1]));
        if !(l <= live && p <= paused) {
            bail!(
                "the window costs more than allowed: live {l:.2} % (limit {live} %), paused \
                 {p:.2} % (limit {paused} %) of a core"
            );
        }
    }
    Ok(())
}
