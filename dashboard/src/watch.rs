//! `flatline watch`: another process, by PID or started here, with its own
//! step log, in the dashboard or headless.

use std::process::{Child, Command};

use std::process::Stdio;
use std::sync::Arc;

use crossbeam_channel::Sender;
use flatline_runtime::telemetry::{GrowHandle, output};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use flatline_runtime::recording::{Event, EventKind, RecordingSetup, event_channel};
use flatline_runtime::telemetry::steplog::StepLog;
use flatline_runtime::telemetry::{Clock, Probe, SamplerConfig, SamplerExit, Target};

use crate::cli::{StepsFrom, WatchArgs};
use crate::fmt::bytes;
use crate::session::Session;

/// How long a started command has to end after SIGTERM before it gets SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Whether `child` ends within `limit` (polled every 20 ms; it is not reaped).
fn exited_within(child: &mut Child, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if !matches!(child.try_wait(), Ok(None)) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The watched process: one we were pointed at, or one we started.
struct Watched {
    pid: u32,
    child: Option<Child>,
    /// What a started command prints, passed through and read.
    output: Option<Output>,
}

/// The readers of a started command's output: its lines, on their way to
/// the collector that starts with the telemetry.
struct Output {
    readers: Vec<std::thread::JoinHandle<()>>,
    lines: Option<crossbeam_channel::Receiver<output::Printed>>,
    collector: Option<std::thread::JoinHandle<()>>,
    stats: Arc<output::OutputStats>,
}

impl Output {
    /// Starts turning the lines into channels, steps and markers.
    fn collect(
        &mut self,
        grow: GrowHandle,
        events: Sender<Event>,
        step_events: bool,
    ) -> Result<()> {
        if let Some(lines) = self.lines.take() {
            self.collector = Some(
                output::collect(lines, grow, events, step_events)
                    .context("starting the output reader")?,
            );
        }
        Ok(())
    }

    /// Waits a moment for the last lines (the command has ended, or is being
    /// stopped): a grandchild that keeps the pipe open does not hold the
    /// watch.
    fn settle(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.readers.iter().any(|r| !r.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        while self.collector.as_ref().is_some_and(|c| !c.is_finished())
            && self
                .readers
                .iter()
                .all(std::thread::JoinHandle::is_finished)
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn summary(&self) -> String {
        let st = &self.stats;
        format!(
            "output: {} lines, {} with steps, metrics or markers{}",
            st.lines.load(Ordering::Relaxed),
            st.parsed.load(Ordering::Relaxed),
            match (
                st.dropped.load(Ordering::Relaxed),
                st.skipped_bytes.load(Ordering::Relaxed)
            ) {
                (0, 0) => String::new(),
                (n, b) => format!(
                    "; the reader fell behind: {n} lines dropped, {} not read",
                    bytes(b as f64)
                ),
            }
        )
    }
}

impl Watched {
    fn alive(&mut self) -> bool {
        match &mut self.child {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => {
                std::path::Path::new(&format!("/proc/{}", self.pid)).exists()
                    || !cfg!(target_os = "linux")
            }
        }
    }

    /// Ends a command we started that is still running when the watch ends (at
    /// `--seconds`, on Ctrl-C, or when the window closes). It gets `wait_first`
    /// to end on its own (a Ctrl-C at the terminal reaches it too), then
    /// SIGTERM, so it can save its state, then SIGKILL after [`STOP_GRACE`]: the
    /// command lives as long as its watch, as under `timeout`. Returns how it
    /// was stopped, or `None` when it ended by itself or was not ours.
    fn stop_started(&mut self, wait_first: Duration) -> Option<String> {
        let child = self.child.as_mut()?;
        let pid = child.id();
        if exited_within(child, wait_first) {
            return None;
        }
        if flatline_runtime::sys::terminate(pid).is_ok() && exited_within(child, STOP_GRACE) {
            let status = child.wait().ok()?;
            return Some(format!("stopped process {pid} with SIGTERM ({status})"));
        }
        let _ = child.kill();
        let status = child.wait().ok()?;
        Some(format!(
            "stopped process {pid} with SIGKILL ({status}), {} s after SIGTERM",
            STOP_GRACE.as_secs()
        ))
    }

    /// The started command's exit code (after waiting for it), if we started one.
    fn exit_code(&mut self) -> Option<i32> {
        let status = self.child.as_mut()?.wait().ok()?;
        Some(status.code().unwrap_or_else(|| {
            // Killed by a signal: the shell's convention, 128 + signal.
            #[cfg(unix)]
            {
                use std::os::unix::process::ExitStatusExt;
                128 + status.signal().unwrap_or(0)
            }
            #[cfg(not(unix))]
            {
                1
            }
        }))
    }
}

fn start_target(args: &WatchArgs, clock: Clock) -> Result<Watched> {
    match (args.pid, args.command.split_first()) {
        (Some(_), None) if args.steps_from.is_some() || args.step_pattern.is_some() => {
            bail!(
                "--steps-from and --step-pattern read a started command's output: give the command after `--`"
            )
        }
        (Some(pid), None) => Ok(Watched {
            pid,
            child: None,
            output: None,
        }),
        (None, Some((prog, rest))) => {
            let from = args.steps_from.unwrap_or(StepsFrom::Both);
            let (out, err) = match from {
                StepsFrom::Stdout => (true, false),
                StepsFrom::Stderr => (false, true),
                StepsFrom::Both => (true, true),
                StepsFrom::None => (false, false),
            };
            let mut cmd = Command::new(prog);
            cmd.args(rest);
            if out {
                cmd.stdout(Stdio::piped());
            }
            if err {
                cmd.stderr(Stdio::piped());
            }
            // Even if flatline dies without cleaning up (SIGKILL, or Xlib ending the
            // process when the display goes away), the command does not outlive it.
            flatline_runtime::sys::end_with_this_process(&mut cmd);
            let mut child = cmd.spawn().with_context(|| format!("starting {prog}"))?;
            let output = (out || err).then(|| {
                let (tx, rx) = output::queue();
                let stats = Arc::new(output::OutputStats::default());
                let mut readers = Vec::new();
                if let Some(o) = child.stdout.take() {
                    readers.extend(
                        output::pass_through(
                            "stdout",
                            o,
                            std::io::stdout(),
                            tx.clone(),
                            clock,
                            stats.clone(),
                            args.step_pattern.clone(),
                        )
                        .ok(),
                    );
                }
                if let Some(e) = child.stderr.take() {
                    readers.extend(
                        output::pass_through(
                            "stderr",
                            e,
                            std::io::stderr(),
                            tx,
                            clock,
                            stats.clone(),
                            args.step_pattern.clone(),
                        )
                        .ok(),
                    );
                }
                Output {
                    readers,
                    lines: Some(rx),
                    collector: None,
                    stats,
                }
            });
            Ok(Watched {
                pid: child.id(),
                child: Some(child),
                output,
            })
        }
        (None, None) => bail!("say what to watch: --pid PID, or a command after `--`"),
        (Some(_), Some(_)) => bail!("give either --pid or a command after `--`, not both"),
    }
}

/// The step-log probe, waiting for the log's first line if needed; its step
/// events, stamped on `clock`, go to `steps`.
fn step_log(
    args: &WatchArgs,
    target: &mut Watched,
    steps: crossbeam_channel::Sender<Event>,
    clock: Clock,
) -> Result<Option<StepLog>> {
    let Some(path) = &args.log else {
        return Ok(None);
    };
    if !path.exists() {
        eprintln!("flatline: waiting for {} …", path.display());
    }
    let log = StepLog::wait_for(path, Duration::from_secs_f64(args.log_wait_s), || {
        target.alive()
    })?;
    Ok(Some(log.with_steps(steps, clock)))
}

/// What the recording's header says about this watch, window or headless.
fn setup(args: &WatchArgs, pid: u32) -> RecordingSetup {
    let mut setup = RecordingSetup::new("watch");
    setup.redact_host = args.redact_host;
    setup
        .watch(pid, &args.command, args.log.as_deref())
        .hz(args.hz);
    if let Some(s) = args.seconds {
        setup.set("seconds", s);
    }
    setup
}

fn sampler_config(
    args: &WatchArgs,
    pid: u32,
    clock: Clock,
    events: Sender<Event>,
) -> SamplerConfig {
    SamplerConfig {
        hz: args.hz,
        target: Target::Pid(pid),
        clock: Some(clock),
        tree: !args.no_tree,
        per_process: !args.no_per_process,
        events: Some(events),
        ..SamplerConfig::default()
    }
}

/// Runs the watch; returns the started command's exit code, if one was started
/// and ended on its own (0 when flatline stopped it because the watch ended).
pub fn run(args: &WatchArgs) -> Result<Option<i32>> {
    if !args.headless {
        crate::ui::check_display()?;
    }
    // One clock for the samples, the log's step events and the command's
    // printed lines, which go straight to whoever records (the recorder
    // thread, or the window).
    let clock = Clock::start();
    let mut target = start_target(args, clock)?;
    let events = event_channel();
    let printed_events = events.0.clone();
    let log = match step_log(args, &mut target, events.0.clone(), clock) {
        Ok(l) => l,
        Err(e) => {
            // Never leave a started command running behind an error.
            if let Some(c) = target.child.as_mut() {
                let _ = c.kill();
                let _ = c.wait();
            }
            return Err(e);
        }
    };
    let log_stats = log.as_ref().map(StepLog::stats);
    let extra: Vec<Box<dyn Probe>> = log
        .into_iter()
        .map(|l| Box::new(l) as Box<dyn Probe>)
        .collect();
    if !args.headless {
        let (src, store) = crate::ui::WatchSource::start(
            target.pid,
            sampler_config(args, target.pid, clock, events.0.clone()),
            extra,
            events.1,
            setup(args, target.pid),
            args.out.as_deref(),
            args.force,
        )?;
        if let Some(o) = target.output.as_mut() {
            o.collect(src.grow(), printed_events, args.log.is_none())?;
        }
        let shown = crate::ui::run_window(
            &format!("flatline — watching {}", target.pid),
            [1600.0, 1000.0],
            move |settings| crate::ui::Dashboard::new(Box::new(src), store, settings),
        );
        // Closed or failed, the window takes a command we started with it. After a
        // Ctrl-C, which the command got too, it first has time to end on its own
        // (a trainer may be saving a checkpoint).
        let by_signal = matches!(shown, Ok(crate::ui::Closed::BySignal));
        let stopped = target.stop_started(if by_signal {
            STOP_GRACE
        } else {
            Duration::ZERO
        });
        if let Some(how) = &stopped {
            eprintln!("flatline: the window closed; {how}");
        }
        shown?;
        return Ok(match (&stopped, by_signal) {
            (Some(_), true) => Some(130),
            (Some(_), false) => Some(0),
            (None, _) => target.exit_code(),
        });
    }

    let out = match &args.out {
        Some(p) => p.clone(),
        None => crate::soak::default_path(&format!("watch-{}", target.pid))?,
    };
    let session = Session::start_with(
        setup(args, target.pid),
        sampler_config(args, target.pid, clock, events.0.clone()),
        extra,
        events,
        &out,
        args.force,
    )?;
    if let Some(o) = target.output.as_mut() {
        o.collect(session.grow(), printed_events, args.log.is_none())?;
    }
    flatline_runtime::telemetry::alloc::mark_observer_thread();
    let stop = crate::soak::interrupt_flag()?;
    let start = Instant::now();
    let limit = args.seconds.map(Duration::from_secs_f64);
    let ended_by = loop {
        std::thread::sleep(Duration::from_millis(100));
        if session.sampler_finished() {
            session.event(EventKind::TargetExited { pid: target.pid });
            break "target exited";
        }
        if stop.load(Ordering::Relaxed) {
            break "interrupted";
        }
        if limit.is_some_and(|l| start.elapsed() >= l) {
            break "completed";
        }
    };
    // The command's last lines belong to the recording.
    if let Some(o) = target.output.as_mut() {
        o.settle(Duration::from_secs(1));
    }
    let end = session.finish(ended_by)?;
    let rec = crate::report::open(&out)?;
    let rows = crate::report::analyse(&rec, None);
    print!("{}", crate::report::text_report(&rec, &rows));
    if let Some(st) = log_stats {
        println!(
            "  step log: {} rows, {} that did not parse",
            st.rows.load(Ordering::Relaxed),
            st.bad_rows.load(Ordering::Relaxed)
        );
    }
    if let Some(o) = &target.output {
        println!("  {}", o.summary());
    }
    if let SamplerExit::TargetExited { pid } = end.exit {
        println!("  process {pid} exited; the recording covers it to the end");
    }
    let interrupted = ended_by == "interrupted";
    let stopped = target.stop_started(if interrupted {
        STOP_GRACE
    } else {
        Duration::ZERO
    });
    if let Some(how) = &stopped {
        let why = if interrupted {
            "interrupted"
        } else {
            "--seconds reached"
        };
        println!("  {why}: {how}");
    }
    println!(
        "\n  wrote {} ({} samples, {})",
        out.display(),
        end.recorder.write.samples,
        bytes(end.recorder.write.bytes as f64)
    );
    if stopped.is_some() {
        // Stopped by us: the watch did what was asked (130: as interrupted).
        return Ok(Some(if interrupted { 130 } else { 0 }));
    }
    Ok(target.exit_code())
}
