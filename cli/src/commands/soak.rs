//! `flatline soak`: the built-in workloads, headless, for a while, recorded.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use crossbeam_channel::Receiver;
use flatline_arena::workload::driver::{Driver, DriverConfig, Workload};
use flatline_telemetry::alloc::mark_observer_thread;
use flatline_telemetry::recording::{EventKind, RecordingSetup};
use flatline_telemetry::work::WorkProgress;
use flatline_telemetry::{CgroupSource, SamplerConfig};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::{ServeArgs, SoakArgs};
use flatline_receipt::fmt::bytes;
use flatline_stream::session::{Session, SessionEnd};

pub use flatline_stream::session::{default_dir, default_path, interrupt_flag};

/// A recorded run of the built-in workloads: what `soak` and `serve` share.
struct WorkloadRun<'a> {
    source: &'a str,
    workload: Workload,
    layout: flatline_arena::workload::ops1b::Layout,
    hz: f64,
    step_ms: Option<f64>,
    /// `None`: until stopped.
    seconds: Option<f64>,
    out: &'a Path,
    force: bool,
    redact_host: bool,
    /// The run's place in a job (`--label`, and the job's environment).
    labels: std::collections::BTreeMap<String, String>,
    /// Serve the stream to Prometheus, check alerts.
    export: &'a crate::cli::PrometheusArgs,
    on_write_error: flatline_stream::session::OnWriteError,
    /// `serve`'s: what to do when the window's recording (the copy) cannot
    /// be written; faults are also told to the window on standard output.
    window: Option<flatline_stream::session::OnWriteError>,
    /// `--cgroup DIR`; by default this process's own cgroup.
    cgroup: Option<PathBuf>,
}

/// How the run went.
struct RunEnd {
    end: SessionEnd,
    ended_by: &'static str,
    wall: Duration,
    result: Result<&'static str>,
}

/// Runs the workload with telemetry into `run.out` until its time is up or
/// `stop` is set; while `paused` is set the workload idles (telemetry goes on).
/// Texts arriving on `marks` are recorded as markers the moment they come.
/// What reaches a running workload session from outside: `flatline mark`,
/// and a live window's requests to its `serve` child.
#[derive(Debug)]
enum Request {
    Mark(String),
    /// Record the stream from now on into a second file as well.
    Record(PathBuf),
    /// Finish the second recording, with this end reason.
    StopRecording(String),
}

/// The `serve` child's answer to a live window's request, one line on its
/// standard output: `ok`, `recorded PATH`, or `error TEXT`.
fn answer(result: Result<String>) {
    let line = match result {
        Ok(s) => s,
        Err(e) => format!("error {:#}", e),
    };
    flatline_stream::session::tell_window(&line);
}

/// The workload's configuration, and the recording's header of this run.
fn run_setup(run: &WorkloadRun<'_>) -> (DriverConfig, RecordingSetup) {
    let step = run.step_ms.map(|ms| Duration::from_secs_f64(ms / 1e3));
    let driver_cfg = DriverConfig {
        workload: run.workload,
        step,
        layout: run.layout,
        ..DriverConfig::default()
    };
    let mut setup = RecordingSetup::new(run.source);
    setup.redact_host = run.redact_host;
    setup.labels = run.labels.clone();
    setup.workload(&driver_cfg).hz(run.hz);
    if let Some(s) = run.seconds {
        setup.set("seconds", s);
    }
    if let Some(dir) = &run.cgroup {
        setup.set("cgroup", dir.display());
    }
    (driver_cfg, setup)
}

fn record_workload(
    run: &WorkloadRun<'_>,
    stop: &AtomicBool,
    paused: &AtomicBool,
    bar: &ProgressBar,
    requests: &Receiver<Request>,
) -> Result<RunEnd> {
    let progress = WorkProgress::new();
    let (driver_cfg, setup) = run_setup(run);
    // The workload's memory (ring, corpus, batch buffers) is allocated before
    // telemetry starts: the recording shows the run, not its set-up.
    let mut driver =
        Driver::new(driver_cfg, progress.clone()).context("setting up the workload")?;
    // From here on this thread only sets up telemetry, draws and waits; the
    // workload runs on its own thread. As an observer, this thread's
    // allocations (host facts, the writer's buffer, the progress bar's text)
    // stay out of alloc.*.
    mark_observer_thread();
    let session = Session::start_with(
        setup,
        SamplerConfig {
            hz: run.hz,
            progress: Some(progress),
            cgroup: run
                .cgroup
                .clone()
                .map_or(CgroupSource::OfTarget, CgroupSource::Dir),
            ..SamplerConfig::default()
        },
        Vec::new(),
        flatline_telemetry::recording::event_channel(),
        run.out,
        run.force,
        run.export.export(std::process::id()),
    )?;
    session.event(EventKind::Phase(run.workload.name().into()));
    let total = run.seconds.map(Duration::from_secs_f64);
    let start = Instant::now();
    // Set when the recording cannot be written and the policy is to stop.
    let halt = AtomicBool::new(false);
    let mut faults = match run.window {
        Some(_) => flatline_stream::session::FaultWatch::telling_window("stream"),
        None => flatline_stream::session::FaultWatch::default(),
    };
    let mut copy_faults = flatline_stream::session::FaultWatch::telling_window("copy");
    let result = std::thread::scope(|scope| -> Result<&'static str> {
        let work = std::thread::Builder::new()
            .name("flatline-workload".into())
            .spawn_scoped(scope, || -> Result<&'static str> {
                loop {
                    let elapsed = start.elapsed();
                    if total.is_some_and(|t| elapsed >= t) {
                        return Ok("completed");
                    }
                    if halt.load(Ordering::Relaxed) {
                        return Ok("write failed");
                    }
                    if stop.load(Ordering::Relaxed) {
                        return Ok("interrupted");
                    }
                    if session.sampler_finished() {
                        return Ok("completed");
                    }
                    let slice = total.map_or(Duration::from_millis(100), |t| {
                        (t - elapsed).min(Duration::from_millis(100))
                    });
                    if paused.load(Ordering::Relaxed) {
                        std::thread::sleep(slice.min(Duration::from_millis(50)));
                        continue;
                    }
                    driver
                        .run_slice(slice, &mut |step, tokens| {
                            session.event(EventKind::Step {
                                step,
                                tokens: Some(tokens),
                            })
                        })
                        .context("running the workload")?;
                }
            })
            .context("starting the workload thread")?;
        while !work.is_finished() {
            if faults.check(&session, run.on_write_error) {
                halt.store(true, Ordering::Relaxed);
            }
            if let Some(policy) = run.window
                && copy_faults.look(&session.copy_faults(), policy)
            {
                let said = match session.finish_copy("write failed") {
                    Ok(Some(w)) => format!(
                        "{}: {} samples kept; recording stopped (--on-write-error stop)",
                        w.path.display(),
                        w.samples
                    ),
                    Ok(None) => "recording stopped (--on-write-error stop)".to_owned(),
                    Err(e) => format!("{e:#}"),
                };
                flatline_stream::session::tell_window(&format!("stopped copy {said}"));
            }
            match requests.recv_timeout(Duration::from_millis(200)) {
                Ok(Request::Mark(text)) => {
                    session.event(EventKind::Marker(text));
                    continue;
                }
                Ok(Request::Record(path)) => {
                    answer(session.copy_to(&path).map(|()| "ok".into()));
                    continue;
                }
                Ok(Request::StopRecording(why)) => {
                    answer(session.finish_copy(&why).map(|w| match w {
                        Some(w) => format!("recorded {}", w.path.display()),
                        None => "ok".into(),
                    }));
                    continue;
                }
                Err(_) => {}
            }
            bar.set_position(start.elapsed().as_millis() as u64);
            bar.set_message(format!(
                "{} samples, {}, {} dropped",
                session.samples_written(),
                bytes(session.bytes_written() as f64),
                session.dropped()
            ));
        }
        work.join()
            .map_err(|_| anyhow::anyhow!("the workload thread panicked"))?
    });
    let wall = start.elapsed();
    // Only `serve` is asked for a second recording, by its window; the
    // window has gone when the run ends this way.
    if let Err(e) = session.finish_copy("window closed") {
        eprintln!("flatline: the window's recording: {e:#}");
    }
    let ended_by = match &result {
        Ok(e) => *e,
        Err(_) => "workload failed",
    };
    let end = session.finish(ended_by)?;
    Ok(RunEnd {
        end,
        ended_by,
        wall,
        result,
    })
}

/// `flatline serve`: what a live window runs in a child process, so that the
/// memory it measures is the workload's and not the window's. Runs until its
/// standard input says `quit` or closes (the window went away) or a signal
/// comes; `pause` and `resume` lines stop and restart the workload,
/// `mark TEXT` records a marker, and `record PATH` and `stop-recording
/// [REASON]` start and finish a second recording of the stream (the window's Record
/// button: the window never re-encodes what this process already wrote),
/// each answered with a line on standard output (see [`answer`]).
pub fn serve(args: &ServeArgs) -> Result<()> {
    let stop = interrupt_flag()?;
    let paused = Arc::new(AtomicBool::new(false));
    let (marks_tx, marks) = crossbeam_channel::unbounded();
    {
        let (stop, paused) = (stop.clone(), paused.clone());
        std::thread::Builder::new()
            .name("flatline-control".into())
            .spawn(move || {
                mark_observer_thread();
                for line in std::io::stdin().lines() {
                    match line.as_deref().map(str::trim) {
                        Ok("pause") => paused.store(true, Ordering::Relaxed),
                        Ok("resume") => paused.store(false, Ordering::Relaxed),
                        Ok("quit") | Err(_) => break,
                        Ok("stop-recording") => {
                            let _ = marks_tx.send(Request::StopRecording("stopped".into()));
                        }
                        Ok(l) => {
                            if let Some(why) = l.strip_prefix("stop-recording ") {
                                let _ = marks_tx.send(Request::StopRecording(why.into()));
                            } else if let Some(text) = l.strip_prefix("mark ") {
                                let _ = marks_tx.send(Request::Mark(text.to_owned()));
                            } else if let Some(path) = l.strip_prefix("record ") {
                                let _ = marks_tx.send(Request::Record(PathBuf::from(path)));
                            }
                        }
                    }
                }
                stop.store(true, Ordering::Relaxed);
            })
            .context("starting the control thread")?;
    }
    let run = WorkloadRun {
        source: "live",
        workload: args.run.workload.into(),
        layout: args.run.layout.into(),
        hz: args.run.hz,
        step_ms: args.run.step_ms,
        seconds: None,
        out: &args.out,
        force: true,
        redact_host: false,
        labels: args.labels.over(job_env()),
        export: &args.export,
        // The window's own stream keeps going; the policy is for the
        // recording the window asked for.
        on_write_error: flatline_stream::session::OnWriteError::KeepSampling,
        window: Some(args.on_write_error),
        cgroup: None,
    };
    let done = record_workload(&run, &stop, &paused, &ProgressBar::hidden(), &marks)?;
    done.result.map(|_| ())
}

/// The job labels of this process's own environment (a soak run by a
/// launcher, one per rank).
fn job_env() -> std::collections::BTreeMap<String, String> {
    flatline_telemetry::recording::labels::from_env(std::env::vars())
}

pub fn run(args: &SoakArgs) -> Result<()> {
    let out = match &args.recording.out {
        Some(p) => p.clone(),
        None => default_path("soak")?,
    };
    let run = WorkloadRun {
        source: "soak",
        workload: args.run.workload.into(),
        layout: args.run.layout.into(),
        hz: args.run.hz,
        step_ms: args.run.step_ms,
        seconds: Some(args.seconds),
        out: &out,
        force: args.recording.force,
        redact_host: args.recording.redact_host,
        labels: args.labels.over(job_env()),
        export: &args.export,
        on_write_error: args.recording.on_write_error,
        window: None,
        cgroup: args.cgroup.clone(),
    };
    let stop = interrupt_flag()?;
    // `flatline mark TEXT` reaches this soak while it runs.
    let (marks_tx, marks) = crossbeam_channel::unbounded();
    let listening = flatline_stream::mark::listen("soak", None, Some(&out), move |text| {
        let _ = marks_tx.send(Request::Mark(text));
    });
    let total = Duration::from_secs_f64(args.seconds);
    let bar = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new(total.as_millis() as u64);
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} {elapsed_precise} [{wide_bar}] {percent}%  {msg}",
            )
            .expect("a valid template"),
        );
        bar
    } else {
        ProgressBar::hidden()
    };
    let RunEnd {
        end,
        ended_by,
        wall,
        result,
    } = record_workload(&run, &stop, &AtomicBool::new(false), &bar, &marks)?;
    drop(listening);
    bar.finish_and_clear();
    result?;
    if ended_by == "interrupted" {
        eprintln!("flatline: interrupted; the recording is complete up to now");
    }
    let rec = crate::commands::report::open(&out)?;
    let receipt = crate::commands::report::analyse(&rec, None);
    print!("{}", crate::commands::report::text_report(&rec, &receipt));
    let w = &end.recorder.write;
    let per_hour = w.bytes as f64 * 3600.0 / wall.as_secs_f64().max(1e-3);
    println!(
        "\n  wrote {} ({} samples, {} dropped) in {:.1} s: {} per hour at {} Hz",
        w.path.display(),
        w.samples,
        end.dropped,
        wall.as_secs_f64(),
        bytes(per_hour),
        args.run.hz
    );
    if end.recorder.cpu_ns > 0 {
        println!(
            "  recording cost: {:.3} s of CPU on the recorder thread = {:.2} % of one core",
            end.recorder.cpu_ns as f64 / 1e9,
            100.0 * end.recorder.cpu_ns as f64 / wall.as_nanos() as f64
        );
    }
    flatline_stream::session::fault_outcome(&end.recorder.faults)
}
