//! A recorded telemetry session: sampler → channel → recorder → file.
//! Shared by `soak`, headless `watch` and `bench --telemetry-hz`; the header
//! comes from the one [`RecordingSetup`] every recording is made with.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use crossbeam_channel::{Receiver, Sender};
use flatline_telemetry::recording::{
    Event, EventKind, OnFault, Recorder, RecorderSummary, RecordingSetup, Tap, event_channel,
};
use flatline_telemetry::{
    self as telemetry, Probe, SamplerConfig, SamplerExit, Schema, Unavailable,
};

use flatline_export::prom::{ExportSetup, Exporter};

#[derive(Debug)]
pub struct Session {
    pub schema: Schema,
    pub unavailable: Vec<Unavailable>,
    sampler: telemetry::Sampler,
    recorder: Recorder,
    /// Serves the stream to Prometheus until the session is dropped.
    exporter: Option<Exporter>,
}

/// What a session follows its stream for: metrics served at `addr`
/// (`--prometheus`), alerts; and the `pid` label of channels that are not
/// one process's.
#[derive(Debug, Clone)]
pub struct Export {
    pub addr: Option<SocketAddr>,
    /// `--web-config`: TLS and basic auth for `addr`.
    pub web_config: Option<std::path::PathBuf>,
    pub pid: u32,
    pub alerts: Vec<flatline_export::alert::Alert>,
    pub on_alert: Option<String>,
    /// `--otlp`: where to push, and how often.
    pub otlp: Option<flatline_export::otlp::OtlpConfig>,
    /// The listener and door made before the watched command started
    /// ([`ExportConfig::prepare`]); without it they are made as the stream
    /// starts.
    pub ready: Option<Ready>,
}

/// An exporter's listener, bound, and its `--web-config`, read: made before
/// a watched command starts, so that a port in use or a bad config never
/// starts it, and handed to the exporter as they are (never bound twice).
#[derive(Clone)]
pub struct Ready {
    listener: Arc<Mutex<Option<TcpListener>>>,
    door: Option<flatline_export::web::Door>,
}

impl std::fmt::Debug for Ready {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ready")
            .field("listener", &self.listener)
            .field("door", &self.door.is_some())
            .finish()
    }
}

impl Ready {
    /// Binds `addr` (where given) and reads `web_config` (where given).
    pub fn make(addr: Option<SocketAddr>, web_config: Option<&Path>) -> Result<Self> {
        let door = web_config
            .map(flatline_export::web::Door::load)
            .transpose()?;
        let listener = addr
            .map(|a| TcpListener::bind(a).with_context(|| format!("serving /metrics on {a}")))
            .transpose()?;
        Ok(Self {
            listener: Arc::new(Mutex::new(listener)),
            door,
        })
    }

    /// Where the listener is bound, while it is held here.
    pub fn addr(&self) -> Option<SocketAddr> {
        let held = self.listener.lock().unwrap_or_else(|p| p.into_inner());
        held.as_ref().and_then(|l| l.local_addr().ok())
    }
}

/// What a stream is followed for, before the process it watches is known:
/// `--prometheus`, `--web-config`, `--alert` and `--on-alert` as plain
/// values (a live window hands them to its workload process).
#[derive(Debug, Clone, Default)]
pub struct ExportConfig {
    pub addr: Option<SocketAddr>,
    pub web_config: Option<std::path::PathBuf>,
    pub alerts: Vec<flatline_export::alert::Alert>,
    pub on_alert: Option<String>,
    pub otlp: Option<flatline_export::otlp::OtlpConfig>,
}

impl ExportConfig {
    /// Whether anything follows the stream: a server, alerts or OTLP.
    fn any(&self) -> bool {
        self.addr.is_some() || !self.alerts.is_empty() || self.otlp.is_some()
    }

    /// What to follow the stream of `pid` for, if anything (`pid`: the
    /// `pid` label of channels that are not one process's).
    pub fn for_pid(&self, pid: u32) -> Option<Export> {
        self.any().then(|| Export {
            addr: self.addr,
            web_config: self.web_config.clone(),
            pid,
            alerts: self.alerts.clone(),
            on_alert: self.on_alert.clone(),
            otlp: self.otlp.clone(),
            ready: None,
        })
    }

    /// Binds the listener and reads the web config now, before what is
    /// watched starts (see [`Ready`]); `None` when nothing is exported.
    pub fn prepare(&self) -> Result<Option<Ready>> {
        if !self.any() {
            return Ok(None);
        }
        Ready::make(self.addr, self.web_config.as_deref()).map(Some)
    }
}

/// What a run does when its recording cannot be written (a full disk, a
/// quota, a file system turned read-only): `--on-write-error`. What each
/// does: [`OnWriteError::help`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnWriteError {
    Stop,
    #[default]
    KeepSampling,
}

impl OnWriteError {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            OnWriteError::Stop => "stop",
            OnWriteError::KeepSampling => "keep-sampling",
        }
    }

    /// What a watch window's recorder does on a fault: `stop` lets the
    /// recording go (the window goes on watching), `keep-sampling` retries.
    pub fn for_window(self) -> OnFault {
        match self {
            OnWriteError::Stop => OnFault::Abandon,
            OnWriteError::KeepSampling => OnFault::Retry,
        }
    }

    /// What it does, in one sentence (`--help` shows it).
    pub fn help(self) -> &'static str {
        match self {
            OnWriteError::Stop => {
                "End the run at once (a watched command is left running), with the receipt of \
                 what was recorded"
            }
            OnWriteError::KeepSampling => {
                "Keep sampling, analysing and serving /metrics, and retry the writes every few \
                 seconds; the file goes on, with a note of the gap, when space returns. The \
                 default: a day-long job should not lose its watch because its disk filled for \
                 a while"
            }
        }
    }
}

/// How a session ended.
#[derive(Debug)]
pub struct SessionEnd {
    pub recorder: RecorderSummary,
    pub exit: SamplerExit,
    pub dropped: u64,
}

impl Session {
    /// Starts telemetry with `cfg` and records it to `out` as `setup` says.
    pub fn start(
        setup: RecordingSetup,
        cfg: SamplerConfig,
        out: &Path,
        force: bool,
    ) -> Result<Self> {
        Self::start_with(setup, cfg, Vec::new(), event_channel(), out, force, None)
    }

    /// As [`Session::start`], with extra probes (a watched job's step log),
    /// the event queue they already send to (see [`event_channel`]), and
    /// metrics served to Prometheus if asked.
    pub fn start_with(
        setup: RecordingSetup,
        cfg: SamplerConfig,
        extra: Vec<Box<dyn Probe>>,
        events: (Sender<Event>, Receiver<Event>),
        out: &Path,
        force: bool,
        export: Option<Export>,
    ) -> Result<Self> {
        let s = Stream::start(setup, cfg, extra, &events.0, Some(out), force, export)?;
        let writer = s.writer.expect("a file was given");
        let recorder = Recorder::spawn_tapped(writer, s.tel.samples, s.tel.changes, events, s.tap)
            .context("starting the recorder")?;
        Ok(Self {
            schema: s.tel.schema,
            unavailable: s.tel.unavailable,
            sampler: s.tel.sampler,
            recorder,
            exporter: s.exporter,
        })
    }

    /// Records an event, stamped now on the samples' clock.
    pub fn event(&self, kind: EventKind) {
        self.recorder.event(Event {
            t_ns: self.sampler.elapsed_ns(),
            kind,
        });
    }

    pub fn samples_written(&self) -> u64 {
        self.recorder
            .stats()
            .samples
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn bytes_written(&self) -> u64 {
        self.recorder
            .stats()
            .bytes
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn dropped(&self) -> u64 {
        self.sampler.dropped()
    }

    /// A handle to grow the stream's schema from another thread.
    pub fn grow(&self) -> telemetry::GrowHandle {
        self.sampler.grow()
    }

    /// Starts a second recording of this session's stream at `path`, from
    /// now on (see `Recorder::copy_to`).
    pub fn copy_to(&self, path: &std::path::Path) -> Result<()> {
        Ok(self.recorder.copy_to(path)?)
    }

    /// Finishes the second recording; what it wrote, if one was running.
    pub fn finish_copy(
        &self,
        end: &str,
    ) -> Result<Option<flatline_telemetry::recording::WriteSummary>> {
        Ok(self.recorder.finish_copy(end)?)
    }

    /// The recording's write faults so far (a full disk).
    pub fn faults(&self) -> flatline_telemetry::recording::Faults {
        self.recorder.faults()
    }

    /// The second recording's write faults so far.
    pub fn copy_faults(&self) -> flatline_telemetry::recording::Faults {
        self.recorder.copy_faults()
    }

    /// True once the sampler has ended on its own (the watched process exited).
    pub fn sampler_finished(&self) -> bool {
        self.sampler.is_finished()
    }

    /// Stops the sampler, then writes the rest and the footer; `end` is
    /// the footer's reason unless the sampler ended otherwise (its target
    /// exited, it failed).
    pub fn finish(self, end: &str) -> Result<SessionEnd> {
        self.finish_with(end, true)
    }

    /// [`Session::finish`]; with `exit_decides` false, `end` stands even when
    /// the target exited (a watch that stopped its own command).
    pub fn finish_with(self, end: &str, exit_decides: bool) -> Result<SessionEnd> {
        let dropped = self.sampler.dropped();
        let exit = self.sampler.stop();
        let end = match exit {
            SamplerExit::Panicked => "sampler failed",
            SamplerExit::TargetExited { .. } if exit_decides => "target exited",
            _ => end,
        };
        let recorder = self
            .recorder
            .finish(end)
            .context("finishing the recording")?;
        // The exporter has had the last sample; it stops serving here.
        drop(self.exporter);
        Ok(SessionEnd {
            recorder,
            exit,
            dropped,
        })
    }
}

/// What every recorded stream starts with, a headless one's or a window's:
/// its telemetry, the exporter if asked (its port taken first, so that a
/// busy one leaves no empty recording), and the file if one is given.
/// [`Session`] and the watch window (`WatchSource`) then hand it to a
/// [`Recorder`].
pub(crate) struct Stream {
    pub tel: telemetry::Telemetry,
    pub setup: RecordingSetup,
    pub tap: Option<Tap>,
    pub exporter: Option<Exporter>,
    pub writer: Option<flatline_telemetry::recording::RecordingWriter>,
}

impl Stream {
    pub(crate) fn start(
        mut setup: RecordingSetup,
        cfg: SamplerConfig,
        extra: Vec<Box<dyn Probe>>,
        events: &Sender<Event>,
        out: Option<&Path>,
        force: bool,
        export: Option<Export>,
    ) -> Result<Self> {
        let tel = telemetry::start_with(cfg, extra).context("starting telemetry")?;
        setup.collect_host(tel.gpu.clone());
        let (tap, exporter) = match export {
            Some(e) => {
                let (tap, exporter) =
                    start_exporter(e, &tel.schema, &setup, &tel.sampler, events.clone())?;
                (Some(tap), Some(exporter))
            }
            None => (None, None),
        };
        let writer = match out {
            Some(path) => Some(setup.create(path, force, &tel.schema, &tel.unavailable)?),
            None => None,
        };
        Ok(Self {
            tel,
            setup,
            tap,
            exporter,
            writer,
        })
    }
}

/// Starts following a stream for `e` (its metrics served, its alerts
/// checked, their markers sent to `events`) and returns the tap that feeds
/// it; says on stderr where metrics are served.
pub fn start_exporter(
    e: Export,
    schema: &Schema,
    setup: &RecordingSetup,
    sampler: &telemetry::Sampler,
    events: Sender<Event>,
) -> Result<(Tap, Exporter)> {
    let ready = match e.ready {
        Some(r) => r,
        None => Ready::make(e.addr, e.web_config.as_deref())?,
    };
    let door = ready.door;
    let listener = ready
        .listener
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    // A listener already handed on (a copy of the same Ready) is bound anew.
    let listener = match (listener, e.addr) {
        (Some(l), _) => Some(l),
        (None, Some(a)) => {
            Some(TcpListener::bind(a).with_context(|| format!("serving /metrics on {a}"))?)
        }
        (None, None) => None,
    };
    let (tap, rx, stats) = Tap::new();
    let progress = sampler.progress();
    if let Some(o) = &e.otlp {
        eprintln!(
            "flatline: pushing metrics over OTLP to {} every {} s{}",
            o.transport.metrics.url,
            o.every.as_secs_f64(),
            if o.transport.gzip { ", gzipped" } else { "" }
        );
    }
    let exporter = Exporter::start(
        listener,
        door.clone(),
        schema,
        ExportSetup {
            host: setup.host.hostname.clone(),
            pid: e.pid,
            labels: setup.labels.clone().into_iter().collect(),
            facts: setup.host.clone(),
            alerts: e.alerts,
            on_alert: e.on_alert,
            events: Some(events),
            sites_every: setup
                .config
                .get("sites_every")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            program: flatline_export::pprof::program(&setup.config),
            otlp: e.otlp,
        },
        rx,
        stats,
        Box::new(move || progress.dropped()),
    )?;
    if let Some(addr) = exporter.addr() {
        let scheme = door
            .as_ref()
            .map_or("http", flatline_export::web::Door::scheme);
        let door_says = door.as_ref().map_or_else(
            || "no TLS, no password".to_owned(),
            flatline_export::web::Door::describe,
        );
        eprintln!(
            "flatline: serving Prometheus metrics at {scheme}://{addr}/metrics ({door_says})"
        );
        if setup.config.contains_key("sites_every") {
            eprintln!(
                "flatline: serving the allocation sites as a pprof heap profile at {scheme}://{addr}{} (a site joins once it holds 1 MiB)",
                flatline_export::http::HEAP
            );
        }
        let open = door.as_ref().is_none_or(|d| d.tls.is_none());
        if open && !flatline_export::web::is_loopback(addr) {
            eprintln!(
                "flatline: warning: /metrics on {addr} is reachable from other machines {}: it shows this host's name, PIDs and the watched command's processes (give --web-config; see docs/prometheus.md#the-exporters-door)",
                if door.as_ref().is_some_and(|d| d.auth.is_some()) {
                    "and its password travels in clear, without TLS"
                } else {
                    "without TLS or a password"
                }
            );
        }
    }
    Ok((tap, exporter))
}

/// Says a run's write faults (a full disk) as they begin and end, once
/// each, on stderr.
#[derive(Debug, Default)]
pub struct FaultWatch {
    told_now: bool,
    told_ended: usize,
    /// `serve`'s: also say each fault to the window, on standard output,
    /// as `fault|resumed WHICH TEXT` (WHICH: `stream` or `copy`).
    window: Option<&'static str>,
}

/// One line to a live window from its workload process (an answer or a
/// fault report), on one line whatever the text holds.
pub fn tell_window(line: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", line.replace('\n', " "));
    let _ = out.flush();
}

impl FaultWatch {
    /// A watch that also tells the window of `which` recording's faults.
    pub fn telling_window(which: &'static str) -> Self {
        Self {
            window: Some(which),
            ..Self::default()
        }
    }

    /// Looks at the session's faults; true when the run should end now (a
    /// fault, and `--on-write-error stop`).
    pub fn check(&mut self, session: &Session, policy: OnWriteError) -> bool {
        self.look(&session.faults(), policy)
    }

    /// As [`FaultWatch::check`], for any recording's faults.
    pub fn look(
        &mut self,
        f: &flatline_telemetry::recording::Faults,
        policy: OnWriteError,
    ) -> bool {
        if f.ended.len() < self.told_ended {
            // A new recording (the window's copy starts afresh).
            *self = Self {
                window: self.window,
                ..Self::default()
            };
        }
        for r in f.ended.iter().skip(self.told_ended) {
            if let Some(which) = self.window {
                tell_window(&format!(
                    "resumed {which} {}: {} samples lost from {:.1} s",
                    r.path.display(),
                    r.lost_samples,
                    r.safe_t_ns as f64 / 1e9
                ));
            }
            eprintln!(
                "flatline: {} is written again; {} samples and {} events between {:.1} s and {:.1} s were lost (the file notes the gap)",
                r.path.display(),
                r.lost_samples,
                r.lost_events,
                r.safe_t_ns as f64 / 1e9,
                r.lost_until_ns as f64 / 1e9
            );
        }
        self.told_ended = f.ended.len();
        match (&f.now, self.told_now) {
            (Some(now), false) => {
                let then = match policy {
                    OnWriteError::Stop => "stopping (--on-write-error stop)".to_owned(),
                    OnWriteError::KeepSampling => format!(
                        "sampling goes on and the writes are tried again every {} s (--on-write-error keep-sampling)",
                        flatline_telemetry::recording::WRITE_RETRY.as_secs()
                    ),
                };
                eprintln!(
                    "flatline: error: cannot write the recording: {}; {then}",
                    now.describe()
                );
                if let Some(which) = self.window {
                    let then = match policy {
                        OnWriteError::Stop => "stopping".to_owned(),
                        OnWriteError::KeepSampling => format!(
                            "retrying every {} s",
                            flatline_telemetry::recording::WRITE_RETRY.as_secs()
                        ),
                    };
                    tell_window(&format!(
                        "fault {which} cannot write {}; {then}",
                        now.describe()
                    ));
                }
                self.told_now = true;
            }
            (None, true) => self.told_now = false,
            _ => {}
        }
        f.now.is_some() && policy == OnWriteError::Stop
    }
}

/// After a run whose recording met write faults: one line on what the file
/// lacks, and an error that makes the exit code non-zero without saying the
/// cause again (it was said when it happened).
pub fn fault_outcome(faults: &flatline_telemetry::recording::Faults) -> Result<()> {
    let (samples, events) = faults
        .all()
        .fold((0, 0), |(s, e), f| (s + f.lost_samples, e + f.lost_events));
    if faults.now.is_none() && faults.ended.is_empty() {
        return Ok(());
    }
    let file = match &faults.now {
        Some(f) => format!(
            "the file is whole up to {:.1} s, without a footer",
            f.safe_t_ns as f64 / 1e9
        ),
        None => "the file is whole and notes each gap".to_owned(),
    };
    eprintln!(
        "flatline: {samples} samples and {events} events were not recorded (write errors above); {file}"
    );
    Err(flatline_export::AlreadySaid.into())
}

/// `recordings/<prefix>-<UTC time>.flr`, creating `recordings/` if needed:
/// where a recording made without `--out` goes (soak, a headless watch, the
/// window's record button).
pub fn default_path(prefix: &str) -> Result<std::path::PathBuf> {
    let dir = default_dir()?;
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(':', "-");
    Ok(dir.join(format!("{prefix}-{now}.flr")))
}

/// The folder of recordings made without `--out` (`recordings/`), made
/// where it is missing.
pub fn default_dir() -> Result<std::path::PathBuf> {
    let dir = std::path::PathBuf::from("recordings");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// Ctrl-C (SIGINT) and SIGTERM set this flag instead of ending the process,
/// so a recording can be finished with its footer (a session's, or the
/// window's, which closes as its close button does). SIGHUP is left alone:
/// a soak started under `nohup` must survive the terminal closing.
pub fn interrupt_flag() -> Result<Arc<std::sync::atomic::AtomicBool>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        signal_hook::flag::register(signal, flag.clone())
            .with_context(|| format!("installing a handler for signal {signal}"))?;
    }
    Ok(flag)
}
