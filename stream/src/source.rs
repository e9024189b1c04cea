//! Where the dashboard's data comes from: the built-in workloads live, or a
//! recording (finished, or still being written and followed). The views only
//! see the [`Store`]; the top bar asks a source what it can do.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result};
use crossbeam_channel::{Receiver, Sender};
use flatline_arena::workload::driver::Workload;
use flatline_telemetry::alloc::mark_observer_thread;
use flatline_telemetry::recording::{
    Event, EventKind, Feed, Header, Item, Recorder, Recording, RecordingSetup, SampleIndex,
    Scanner, TailProblemKind, Visit,
};
use flatline_telemetry::{self as telemetry, SamplerConfig};

use crate::store::Store;
use flatline_telemetry::names;

/// What a caption and a top bar say about a source.
#[derive(Debug, Clone, Default)]
pub struct Meta {
    /// "live: both at 100 Hz", "replay: soak.flr".
    pub label: String,
    pub host: String,
    pub file: Option<PathBuf>,
    pub digest: Option<String>,
    /// When its clock's 0 was, in ms since 1970 (for a wall-clock axis).
    pub started_unix_ms: Option<u64>,
}

/// Samples a live session keeps at full resolution before thinning its older
/// history (131,072: about 22 minutes at 100 Hz).
pub const LIVE_CAP: usize = 1 << 17;

/// Says whether a source has new data since it was last asked.
pub type Activity = Box<dyn FnMut() -> bool + Send>;

/// What kind of data a source gives; it decides which controls the window
/// shows (and, later, which settings it keeps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// The built-in workloads, running here.
    Live,
    /// Another process, watched.
    Watch,
    /// A recording on disk (finished, or followed while it grows).
    Replay,
}

/// "replay: soak.flr": a replay's label, by its file's name.
fn replay_label(path: &Path) -> String {
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    format!("replay: {name}")
}

/// The source of a window whose recording is still being read (see
/// `Dashboard::opening`): nothing to show yet.
#[derive(Debug)]
pub struct Opening {
    pub path: PathBuf,
}

impl Source for Opening {
    fn kind(&self) -> SourceKind {
        SourceKind::Replay
    }
    fn meta(&self) -> Meta {
        Meta {
            label: replay_label(&self.path),
            host: String::new(),
            file: Some(self.path.clone()),
            digest: None,
            started_unix_ms: None,
        }
    }
    fn status(&self) -> String {
        "opening…".into()
    }
    fn poll(&mut self, _store: &mut Store) {}
}

/// Where the data comes from. Views never call a source: they return actions
/// that the dashboard applies through these methods.
pub trait Source {
    fn kind(&self) -> SourceKind;
    /// Samples a second the stream brings (what the window's frame rate
    /// follows); a replay has no rate of its own: infinite, drawn at the
    /// window's cap.
    fn sample_hz(&self) -> f64 {
        f64::INFINITY
    }
    fn meta(&self) -> Meta;
    /// One word or two: "running", "paused", "following", "ended".
    fn status(&self) -> String;
    /// A recording this source writes that cannot be written now (a full
    /// disk), in words: what the window's red banner says.
    fn write_fault(&self) -> Option<String> {
        None
    }
    /// Moves new data into the store.
    fn poll(&mut self, store: &mut Store);
    /// Samples the sampler could not deliver.
    fn dropped(&self) -> u64 {
        0
    }
    /// Whether new data may still arrive (a live stream, a followed file).
    fn growing(&self) -> bool {
        false
    }
    /// A cheap check, for another thread, of whether new data waits to be
    /// polled (the window draws only then); `None`: data never arrives.
    fn activity(&self) -> Option<Activity> {
        None
    }
    /// Whether its own workload runs; `None` for sources without one.
    fn workload_running(&self) -> Option<bool> {
        None
    }
    fn set_workload_running(&mut self, _on: bool) {}
    /// Where a replay that holds only every n-th sample finds the rest on
    /// disk (see `detail.rs`); `None` for anything else.
    fn sample_index(&self) -> Option<SampleIndex> {
        None
    }
    /// The recording being written now, and its size so far.
    fn recording(&self) -> Option<(PathBuf, u64)> {
        None
    }
    /// Whether recording can be started and stopped on request.
    fn can_record(&self) -> bool {
        false
    }
    fn start_recording(&mut self, _path: &Path) -> Result<()> {
        anyhow::bail!("this source cannot record")
    }
    /// Finishes the recording, if one is being written, and returns its path.
    fn stop_recording(&mut self) -> Result<Option<PathBuf>> {
        Ok(None)
    }
    /// Whether markers can be added (a live or watched run, not a replay).
    fn can_mark(&self) -> bool {
        false
    }
    /// Adds a marker now ("here I changed X").
    fn mark(&mut self, _text: &str) -> Result<()> {
        anyhow::bail!("a recording being replayed takes no markers")
    }
}

/// What a frame shows of its source, read from it once a frame by the
/// dashboard's frame loop ([`SourceFacts::read`]): the views read these
/// values and never call the source.
#[derive(Debug, Clone)]
pub struct SourceFacts {
    pub kind: SourceKind,
    pub meta: Meta,
    pub status: String,
    pub write_fault: Option<String>,
    pub dropped: u64,
    pub workload_running: Option<bool>,
    pub recording: Option<(PathBuf, u64)>,
    pub can_record: bool,
    pub can_mark: bool,
}

impl SourceFacts {
    pub fn read(source: &dyn Source) -> Self {
        Self {
            kind: source.kind(),
            meta: source.meta(),
            status: source.status(),
            write_fault: source.write_fault(),
            dropped: source.dropped(),
            workload_running: source.workload_running(),
            recording: source.recording(),
            can_record: source.can_record(),
            can_mark: source.can_mark(),
        }
    }
}

/// The built-in workloads, run by a child process (`flatline serve`) whose
/// stream this window follows: the process-level channels (`mem.*`,
/// `malloc.*`, `alloc.*`) describe the workload and its sampler, never the
/// window's own stores, caches and frames. The child writes its stream to a
/// file in a private temporary folder rather than a pipe, so it never waits
/// for a slow window, and a crash of either side leaves a readable file.
pub struct LiveSource {
    workload: Workload,
    /// The rate the workload process was started at.
    hz: f64,
    child: Child,
    /// The child's standard input: `pause`, `resume`, `mark TEXT`, `quit`.
    /// Shared with the marker socket's thread.
    control: Arc<Mutex<Option<ChildStdin>>>,
    /// `flatline mark` reaches the workload through this.
    _marks: Option<crate::mark::MarkServer>,
    running: bool,
    follower: Follower,
    dropped_idx: Option<usize>,
    dropped: u64,
    /// The child's answers to `record` and `stop-recording`, a line each.
    answers: Receiver<String>,
    /// The second recording the child writes, while one runs.
    recording: Option<PathBuf>,
    /// The last recording error the child reported.
    error: Option<String>,
    /// Write faults the child reports as they begin and end.
    faults: Arc<Mutex<ChildFaults>>,
    /// Holds the stream file; removed when the source goes.
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for LiveSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSource")
            .field("workload", &self.workload)
            .field("child", &self.child.id())
            .finish_non_exhaustive()
    }
}

/// How long the window waits for its child's stream to start.
const SERVE_START: Duration = Duration::from_secs(30);

/// What a live window's workload process (`flatline serve`) runs, as plain
/// values: built once from `live`'s arguments (`LiveArgs::serve_config`) and
/// handed on in one form, [`ServeConfig::argv`], which `serve` parses back
/// to the same values (a test in `cli.rs` checks it).
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub workload: Workload,
    /// Telemetry samples per second.
    pub hz: f64,
    pub layout: flatline_arena::workload::ops1b::Layout,
    /// What the child does when the window's recording cannot be written.
    pub on_write_error: crate::session::OnWriteError,
    /// Whether the child serves /metrics, and what it alerts on.
    pub export: crate::session::ExportConfig,
    /// The run's labels (`--label`), key and value.
    pub labels: Vec<(String, String)>,
}

impl ServeConfig {
    /// `workload` at `hz`, every other setting at its default.
    pub fn new(workload: Workload, hz: f64) -> Self {
        Self {
            workload,
            hz,
            layout: flatline_arena::workload::ops1b::Layout::Aos,
            on_write_error: crate::session::OnWriteError::default(),
            export: crate::session::ExportConfig::default(),
            labels: Vec::new(),
        }
    }

    /// The child's arguments after the program's name, its stream to `out`:
    /// the one place a live window's settings become a command line.
    pub fn argv(&self, out: &Path) -> Vec<std::ffi::OsString> {
        let mut a: Vec<std::ffi::OsString> = vec![
            "serve".into(),
            format!("--workload={}", self.workload.name()).into(),
            format!("--hz={}", self.hz).into(),
            format!("--layout={}", self.layout.name()).into(),
            format!("--on-write-error={}", self.on_write_error.name()).into(),
            "--out".into(),
            out.as_os_str().to_owned(),
        ];
        let e = &self.export;
        if let Some(addr) = e.addr {
            a.push(format!("--prometheus={addr}").into());
        }
        if let Some(w) = &e.web_config {
            let mut flag = std::ffi::OsString::from("--web-config=");
            flag.push(w);
            a.push(flag);
        }
        for alert in &e.alerts {
            a.push(format!("--alert={}", alert.text).into());
        }
        if let Some(c) = &e.on_alert {
            a.push(format!("--on-alert={c}").into());
        }
        if let Some(o) = &e.otlp {
            // The child inherits the environment (its OTEL_EXPORTER_OTLP_*
            // variables); the endpoint and headers are passed as resolved.
            a.push(format!("--otlp={}", o.transport.metrics.url).into());
            for (k, v) in &o.transport.headers {
                a.push(format!("--otlp-header={k}={v}").into());
            }
            a.push(format!("--otlp-every={}", o.every.as_secs_f64()).into());
        }
        for (k, v) in &self.labels {
            a.push(format!("--label={k}={v}").into());
        }
        a
    }
}

impl LiveSource {
    /// Starts the workloads in a child process (this executable, `serve`).
    pub fn start(config: ServeConfig) -> Result<(Self, Store)> {
        let exe = std::env::current_exe().context("finding flatline's own executable")?;
        Self::start_with(&exe, config)
    }

    /// As [`LiveSource::start`], with `program` as the flatline to run; the
    /// child serves and alerts as `config.export` says, and says so on stderr.
    pub fn start_with(program: &Path, config: ServeConfig) -> Result<(Self, Store)> {
        let workload = config.workload;
        let hz = config.hz;
        let dir = tempfile::Builder::new()
            .prefix("flatline-live-")
            .tempdir()
            .context("creating a folder for the live stream")?;
        let path = dir.path().join("stream.flr");
        let mut cmd = Command::new(program);
        cmd.args(config.argv(&path))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        flatline_arena::sys::end_with_this_process(&mut cmd);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {} serve", program.display()))?;
        let t0 = std::time::Instant::now();
        let (follower, header) = loop {
            match Follower::open(&path) {
                Ok(f) => break f,
                Err(e) => {
                    if let Ok(Some(status)) = child.try_wait() {
                        anyhow::bail!("the workload process ended before it started: {status}");
                    }
                    if t0.elapsed() > SERVE_START {
                        let _ = child.kill();
                        let _ = child.wait();
                        return Err(e.context("waiting for the workload process's stream"));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        };
        let mut store = Store::new(header.schema.clone(), LIVE_CAP);
        store.set_host(&header.host);
        let faults = Arc::new(Mutex::new(ChildFaults::default()));
        let answers = read_answers(child.stdout.take(), faults.clone())?;
        let control = Arc::new(Mutex::new(child.stdin.take()));
        let marks = {
            let control = control.clone();
            crate::mark::listen("live", Some(child.id()), None, move |text| {
                tell(&control, &format!("mark {text}"));
            })
        };
        Ok((
            Self {
                workload,
                hz,
                child,
                control,
                _marks: marks,
                running: true,
                dropped_idx: header.schema.index_of(names::TELEMETRY_DROPPED),
                dropped: 0,
                follower,
                answers,
                recording: None,
                error: None,
                faults,
                dir,
            },
            store,
        ))
    }

    /// The child process running the workload.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn tell(&mut self, line: &str) {
        tell(&self.control, line);
    }

    /// Asks the child something and waits for its one-line answer.
    fn ask(&mut self, line: &str) -> Result<String> {
        // An answer left over from a request that timed out is stale.
        while self.answers.try_recv().is_ok() {}
        self.tell(line);
        match self.answers.recv_timeout(ANSWER_WAIT) {
            Ok(a) => match a.strip_prefix("error ") {
                Some(e) => Err(anyhow::anyhow!("{e}")),
                None => Ok(a),
            },
            Err(_) => anyhow::bail!("the workload process did not answer `{line}`"),
        }
    }
}

/// How long a live window waits for its workload process to answer.
const ANSWER_WAIT: Duration = Duration::from_secs(10);

/// What the workload process said of its write faults (`fault`,
/// `resumed` and `stopped` lines on its standard output, about its
/// `stream` or the window's `copy`).
#[derive(Debug, Default)]
struct ChildFaults {
    stream: Option<String>,
    copy: Option<String>,
    /// The copy was stopped by its fault (`--on-write-error stop`).
    copy_stopped: bool,
    /// Notes for the store, not yet taken.
    notes: Vec<String>,
}

impl ChildFaults {
    /// Takes a `fault|resumed|stopped stream|copy TEXT` line; false for
    /// any other line (an answer).
    fn take(&mut self, line: &str) -> bool {
        let mut parts = line.splitn(3, ' ');
        let (Some(what), Some(which), text) = (parts.next(), parts.next(), parts.next()) else {
            return false;
        };
        let text = text.unwrap_or_default().to_owned();
        let slot = match which {
            "stream" => &mut self.stream,
            "copy" => &mut self.copy,
            _ => return false,
        };
        match what {
            "fault" => {
                self.notes.push(format!(
                    "{}{text}",
                    flatline_telemetry::recording::FAULT_NOTE
                ));
                *slot = Some(text);
            }
            "resumed" => {
                self.notes.push(format!(
                    "{}{text}",
                    flatline_telemetry::recording::RESUMED_NOTE
                ));
                *slot = None;
            }
            "stopped" => {
                *slot = Some(text);
                self.copy_stopped = true;
            }
            _ => return false,
        }
        true
    }
}

/// Lines of the child's standard output, on a thread of their own: its
/// answers, and its fault reports kept in `faults`.
fn read_answers(
    stdout: Option<std::process::ChildStdout>,
    faults: Arc<Mutex<ChildFaults>>,
) -> Result<Receiver<String>> {
    use std::io::BufRead as _;
    let (tx, rx) = crossbeam_channel::bounded(16);
    if let Some(out) = stdout {
        std::thread::Builder::new()
            .name("flatline-answers".into())
            .spawn(move || {
                mark_observer_thread();
                for line in std::io::BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    if faults
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .take(&line)
                    {
                        continue;
                    }
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            })
            .context("starting the thread that reads the workload process's answers")?;
    }
    Ok(rx)
}

/// Says one line to the workload process; a closed pipe is dropped.
fn tell(control: &Mutex<Option<ChildStdin>>, line: &str) {
    use std::io::Write as _;
    let mut c = control
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(pipe) = c.as_mut()
        && writeln!(pipe, "{line}").is_err()
    {
        *c = None;
    }
}

impl Drop for LiveSource {
    fn drop(&mut self) {
        // A recording the child writes for this window is finished first,
        // whatever the child then takes to end: it is answered once written.
        if self.recording.is_some() {
            let _ = self.ask("stop-recording window closed");
        }
        // Closing its input ends the child cleanly; a child that does not end
        // within two seconds is killed.
        self.tell("quit");
        *self
            .control
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while matches!(self.child.try_wait(), Ok(None)) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Source for LiveSource {
    fn kind(&self) -> SourceKind {
        SourceKind::Live
    }

    fn sample_hz(&self) -> f64 {
        self.hz
    }

    fn meta(&self) -> Meta {
        Meta {
            label: format!("live: {} at {} Hz", self.workload.name(), self.hz),
            host: self.follower.header.caption_host(),
            file: self.recording.clone(),
            // A file still being written has no digest yet.
            digest: None,
            started_unix_ms: Some(self.follower.header.started_unix_ms),
        }
    }

    fn status(&self) -> String {
        if let Some(e) = &self.error {
            return format!("error: {e}");
        }
        if !self.follower.is_open() {
            return "workload stopped".into();
        }
        if self.running { "running" } else { "paused" }.into()
    }

    fn write_fault(&self) -> Option<String> {
        let f = self
            .faults
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match (&f.copy, &f.stream) {
            (Some(c), Some(s)) => Some(format!("{c}; the window's stream: {s}")),
            (Some(c), None) => Some(c.clone()),
            (None, Some(s)) => Some(format!("the window's stream: {s}")),
            (None, None) => None,
        }
    }

    fn poll(&mut self, store: &mut Store) {
        mark_observer_thread();
        self.follower.read_new(store);
        let notes = {
            let mut f = self
                .faults
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if std::mem::take(&mut f.copy_stopped) {
                self.recording = None;
            }
            std::mem::take(&mut f.notes)
        };
        let t_ns = (store.time_range().1.max(0.0) * 1e9) as u64;
        for text in notes {
            store.push_item(&Item::Event(Event {
                t_ns,
                kind: EventKind::Note(text),
            }));
        }
        if let Some(v) = self
            .dropped_idx
            .and_then(|i| flatline_analysis::rules::latest(store.series(i).values()))
        {
            self.dropped = v as u64;
        }
    }

    fn dropped(&self) -> u64 {
        self.dropped
    }

    fn growing(&self) -> bool {
        self.follower.is_open()
    }

    fn activity(&self) -> Option<Activity> {
        Some(file_growth(self.dir.path().join("stream.flr")))
    }

    fn workload_running(&self) -> Option<bool> {
        Some(self.running)
    }

    /// Pauses or resumes the workload (telemetry keeps streaming).
    fn set_workload_running(&mut self, on: bool) {
        self.tell(if on { "resume" } else { "pause" });
        self.running = on;
    }

    fn recording(&self) -> Option<(PathBuf, u64)> {
        let path = self.recording.clone()?;
        let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
        Some((path, bytes))
    }

    fn can_record(&self) -> bool {
        true
    }

    /// Asks the workload process to record its stream from now on to
    /// `path` as well: the window never decodes and re-encodes what the
    /// child already wrote.
    fn start_recording(&mut self, path: &Path) -> Result<()> {
        if self.recording.is_some() {
            anyhow::bail!("already recording");
        }
        // The child runs in another folder's context only if told an
        // absolute path; a line break would end the request early.
        let abs =
            std::path::absolute(path).with_context(|| format!("resolving {}", path.display()))?;
        let text = abs.to_str().filter(|t| !t.contains(['\n', '\r']));
        let Some(text) = text else {
            anyhow::bail!(
                "{}: a recording's path must be text on one line",
                path.display()
            );
        };
        self.ask(&format!("record {text}"))?;
        self.error = None;
        self.recording = Some(path.to_owned());
        Ok(())
    }

    fn stop_recording(&mut self) -> Result<Option<PathBuf>> {
        let Some(path) = self.recording.take() else {
            return Ok(None);
        };
        match self.ask("stop-recording") {
            Ok(_) => Ok(Some(path)),
            Err(e) => {
                self.error = Some(format!("{e:#}"));
                Err(e)
            }
        }
    }

    fn can_mark(&self) -> bool {
        true
    }

    /// Recorded by the workload process, in its stream, on its clock.
    fn mark(&mut self, text: &str) -> Result<()> {
        let text = crate::mark::check_message(text.as_bytes()).map_err(anyhow::Error::msg)?;
        self.tell(&format!("mark {text}"));
        Ok(())
    }
}

/// Reads a recording that another process is still writing, through the
/// format's own incremental reader (its checks, its fuzzing), and hands what
/// was written since the last read to a store: rows by position, as the
/// file holds them.
#[derive(Debug)]
struct Follower {
    scanner: Option<Scanner<BufReader<File>>>,
    /// The header as written.
    header: Header,
    digest: String,
    status: String,
}

/// A [`Visit`] that takes a pass's rows, schema changes and events into a
/// store.
struct IntoStore<'a>(&'a mut Store);

impl Visit for IntoStore<'_> {
    fn channels(&mut self, _at: usize, specs: &[telemetry::ChannelSpec]) {
        self.0.add_channels(specs);
    }
    fn ended(&mut self, _at: usize, positions: &[u32]) {
        let positions: Vec<usize> = positions.iter().map(|&c| c as usize).collect();
        self.0.end_channels(&positions);
    }
    fn rows(&mut self, _first: usize, t_ns: &[u64], values: &[f64]) {
        let width = values.len() / t_ns.len().max(1);
        for (i, &t) in t_ns.iter().enumerate() {
            self.0.push_row(t, &values[i * width..(i + 1) * width]);
        }
    }
    fn event(&mut self, e: Event) {
        self.0.push_event(e);
    }
}

impl Follower {
    fn open(path: &Path) -> Result<(Self, Header)> {
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let scanner = Scanner::open(BufReader::new(file), path)?;
        let header = scanner.header().clone();
        Ok((
            Self {
                scanner: Some(scanner),
                header: header.clone(),
                digest: String::new(),
                status: "following".into(),
            },
            header,
        ))
    }

    fn is_open(&self) -> bool {
        self.scanner.is_some()
    }

    /// Takes into `store` everything the writer has finished since the last
    /// call; at the footer or at damage the follower closes and says which.
    fn read_new(&mut self, store: &mut Store) {
        let Some(scanner) = self.scanner.as_mut() else {
            return;
        };
        if scanner.read_new(&mut IntoStore(store)) {
            self.digest = scanner.digest_so_far();
            return;
        }
        let s = scanner.scanned();
        self.status = match (&s.tail, &s.footer) {
            (Some(p), _) => format!("damaged at byte {}", p.offset),
            (None, Some(f)) => format!("ended: {}", f.end),
            (None, None) => "ended".into(),
        };
        self.digest = s.digest.clone();
        self.scanner = None;
    }
}

/// Bytes of samples a replay holds at most before it shows every 2nd,
/// 4th, … sample of a longer recording.
pub const REPLAY_BUDGET: usize = 128 << 20;

/// A recording on disk, optionally followed while another process writes it.
#[derive(Debug)]
pub struct ReplaySource {
    path: PathBuf,
    header: Header,
    /// The file's seek index, when the store holds a thinned load of it.
    index: Option<SampleIndex>,
    digest: String,
    follow: Option<Follower>,
    status: String,
}

impl ReplaySource {
    /// Loads a recording: whole, or past [`REPLAY_BUDGET`] of samples
    /// every 2nd, 4th, … one (the status says which), so a week-long file
    /// opens on a laptop instead of asking for gigabytes.
    pub fn open(path: &Path) -> Result<(Self, Store)> {
        Self::open_within(path, REPLAY_BUDGET)
    }

    /// [`Self::open`] holding about `budget` bytes of values.
    pub fn open_within(path: &Path, budget: usize) -> Result<(Self, Store)> {
        let rec = Recording::open_bounded(path, budget)?;
        Ok(Self::from_recording(rec))
    }

    /// A recording already read (its columns move into the store).
    pub fn from_recording(mut rec: Recording) -> (Self, Store) {
        let store = Store::from_recording(&mut rec);
        let mut status: String = match &rec.tail {
            None if rec.is_damaged() => {
                format!("read past damage at byte {}", rec.losses[0].offset)
            }
            None => "ended".into(),
            Some(t) if t.kind == TailProblemKind::Truncated => "truncated".into(),
            Some(t) => format!("damaged at byte {}", t.offset),
        };
        if let Some(t) = &rec.thinned {
            status.push_str(&format!(
                "; every {} of {} samples shown",
                flatline_receipt::fmt::ordinal(t.stride),
                flatline_receipt::fmt::thousands(t.samples as u64)
            ));
        }
        (
            Self {
                path: rec.path.clone(),
                digest: rec.digest.clone(),
                header: rec.header,
                index: rec.thinned.is_some().then_some(rec.index),
                follow: None,
                status,
            },
            store,
        )
    }

    /// Opens a recording that may still be growing and keeps reading it.
    /// Like a live window, it keeps the latest [`LIVE_CAP`] samples at
    /// full resolution and thins older history, so a soak followed for days
    /// stays bounded.
    pub fn follow(path: &Path) -> Result<(Self, Store)> {
        let (follower, header) = Follower::open(path)?;
        let mut store = Store::new(header.schema.clone(), LIVE_CAP);
        store.set_host(&header.host);
        store.set_launched(&header.config);
        let mut src = Self {
            path: path.to_owned(),
            digest: String::new(),
            header,
            index: None,
            follow: Some(follower),
            status: "following".into(),
        };
        src.poll(&mut store);
        Ok((src, store))
    }
}

impl Source for ReplaySource {
    fn sample_index(&self) -> Option<SampleIndex> {
        self.index.clone()
    }
    fn kind(&self) -> SourceKind {
        SourceKind::Replay
    }

    fn meta(&self) -> Meta {
        Meta {
            label: replay_label(&self.path),
            host: self.header.caption_host(),
            file: Some(self.path.clone()),
            digest: Some(self.digest.clone()),
            started_unix_ms: Some(self.header.started_unix_ms),
        }
    }

    fn status(&self) -> String {
        self.status.clone()
    }

    fn poll(&mut self, store: &mut Store) {
        if let Some(f) = self.follow.as_mut() {
            // Followed data goes to the store only (a replay never records).
            f.read_new(store);
            self.status = f.status.clone();
            self.digest = f.digest.clone();
            if !f.is_open() {
                self.follow = None;
            }
        }
    }

    fn growing(&self) -> bool {
        self.follow.is_some()
    }

    fn activity(&self) -> Option<Activity> {
        self.follow
            .is_some()
            .then(|| file_growth(self.path.clone()))
    }
}

/// Whether the file at `path` changed length since the last call (the
/// first call says yes): a stream file another process appends to.
fn file_growth(path: PathBuf) -> Activity {
    let mut last = None;
    Box::new(move || {
        let len = std::fs::metadata(&path).map(|m| m.len()).ok();
        let grew = len != last;
        last = len;
        grew
    })
}

/// Another process, watched by PID, with its step log if it has one. Its
/// stream takes the headless watch's road (sampler → recorder thread →
/// fanout: the file, the exporter's tap) and reaches the window last, as a
/// [`Feed`] that each poll moves into the store: the UI thread writes no
/// file. A write fault (a full disk) is not an error: the window says it in
/// red ([`Source::write_fault`]), the stream notes it, and the policy
/// decides: let the recording go (whole up to the fault) or retry until
/// writes work again. The recording is finished when the target exits or
/// the window closes.
pub struct WatchSource {
    pid: u32,
    hz: f64,
    host: String,
    feed: Feed,
    sampler: telemetry::Sampler,
    /// `None` once the target exited and the recording was finished.
    recorder: Option<Recorder>,
    /// The recording being written and its digest; `None` when none is
    /// (never asked for, finished, or let go at a fault).
    file: Option<(PathBuf, String)>,
    policy: crate::session::OnWriteError,
    /// The write fault in progress, or the one that stopped the recording.
    fault: Option<String>,
    /// The newest recording error that was not a write fault.
    error: Option<String>,
    exited: bool,
    /// When sampling began (its clock's 0), in ms since 1970.
    started_unix_ms: u64,
    /// Serves the stream to Prometheus while the window is open.
    _exporter: Option<flatline_export::prom::Exporter>,
}

impl std::fmt::Debug for WatchSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchSource")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

impl WatchSource {
    /// Starts sampling `pid` (with `extra` probes, e.g. its step log), with
    /// the event queue its probes already send to (see [`event_channel`]),
    /// and records to `out` as `setup` says.
    ///
    /// [`event_channel`]: flatline_telemetry::recording::event_channel
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        pid: u32,
        cfg: SamplerConfig,
        extra: Vec<Box<dyn telemetry::Probe>>,
        events: (Sender<Event>, Receiver<Event>),
        setup: RecordingSetup,
        out: Option<&Path>,
        force: bool,
        on_write_error: crate::session::OnWriteError,
        export: Option<crate::session::Export>,
    ) -> Result<(Self, Store)> {
        let hz = cfg.hz;
        let started_unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let s = crate::session::Stream::start(setup, cfg, extra, &events.0, out, force, export)?;
        let file = s
            .writer
            .as_ref()
            .map(|w| (w.path().to_owned(), w.digest_hex()));
        let mut store = Store::new(s.tel.schema.clone(), LIVE_CAP);
        store.set_host(&s.setup.host);
        store.set_launched(&s.setup.config);
        let (recorder, feed) = Recorder::spawn_for_window(
            s.writer,
            s.tel.samples,
            s.tel.changes,
            events,
            s.tap,
            on_write_error.for_window(),
        )
        .context("starting the recorder")?;
        Ok((
            Self {
                pid,
                hz,
                host: flatline_telemetry::recording::with_labels(
                    s.setup.host.summary(),
                    &s.setup.labels,
                ),
                feed,
                sampler: s.tel.sampler,
                recorder: Some(recorder),
                file,
                policy: on_write_error,
                fault: None,
                error: None,
                exited: false,
                started_unix_ms,
                _exporter: s.exporter,
            },
            store,
        ))
    }

    /// Reads the recorder's fault and error into what the window says.
    fn read_faults(&mut self) {
        let Some(r) = &self.recorder else {
            return;
        };
        if let Some(e) = r.error() {
            self.error = Some(e);
        }
        let Some(f) = r.faults().now else {
            self.fault = None;
            return;
        };
        self.fault = Some(match self.policy {
            crate::session::OnWriteError::KeepSampling => format!(
                "cannot write {}; retrying every {} s",
                f.describe(),
                flatline_telemetry::recording::WRITE_RETRY.as_secs()
            ),
            crate::session::OnWriteError::Stop => {
                // The recorder let it go, whole up to the fault.
                self.file = None;
                format!(
                    "cannot write {}; recording stopped (--on-write-error stop)",
                    f.describe()
                )
            }
        });
    }
}

impl Drop for WatchSource {
    fn drop(&mut self) {
        if let Some(r) = self.recorder.take() {
            let _ = r.finish_window("window closed");
        }
    }
}

impl WatchSource {
    /// A handle to grow the stream's schema from another thread (a job's
    /// printed metrics).
    pub fn grow(&self) -> telemetry::GrowHandle {
        self.sampler.grow()
    }
}

impl Source for WatchSource {
    fn kind(&self) -> SourceKind {
        SourceKind::Watch
    }

    fn sample_hz(&self) -> f64 {
        self.hz
    }

    fn meta(&self) -> Meta {
        Meta {
            label: format!("watch: pid {} at {} Hz", self.pid, self.hz),
            host: self.host.clone(),
            file: self.file.as_ref().map(|f| f.0.clone()),
            digest: self.file.as_ref().map(|f| f.1.clone()),
            started_unix_ms: Some(self.started_unix_ms),
        }
    }

    fn write_fault(&self) -> Option<String> {
        self.fault.clone()
    }

    fn status(&self) -> String {
        if let Some(e) = &self.error {
            return format!("recording error: {e}");
        }
        if self.exited {
            "process exited"
        } else {
            "watching"
        }
        .into()
    }

    fn poll(&mut self, store: &mut Store) {
        mark_observer_thread();
        for item in self.feed.items() {
            store.push_item(&item);
        }
        self.read_faults();
        if !self.exited && self.sampler.is_finished() {
            self.exited = true;
            if let Some(r) = self.recorder.take() {
                r.event(Event {
                    t_ns: self.sampler.elapsed_ns(),
                    kind: EventKind::TargetExited { pid: self.pid },
                });
                if let Err(e) = r.finish_window("target exited") {
                    self.error = Some(format!("{e:#}"));
                }
            }
            self.file = None;
            // What the recorder passed on before it ended.
            for item in self.feed.items() {
                store.push_item(&item);
            }
        }
    }

    fn dropped(&self) -> u64 {
        self.sampler.dropped() + self.feed.dropped()
    }

    fn growing(&self) -> bool {
        !self.exited
    }

    fn activity(&self) -> Option<Activity> {
        let (feed, progress) = (self.feed.clone(), self.sampler.progress());
        let mut told = (u64::MAX, false);
        Some(Box::new(move || {
            // Only lengths and counters are read: nothing is taken from the
            // feed, which the window's own poll drains.
            let now = (progress.produced(), progress.ended());
            let fresh = now != told || !feed.is_empty();
            told = now;
            fresh
        }))
    }

    fn recording(&self) -> Option<(PathBuf, u64)> {
        let bytes = self.recorder.as_ref().map_or(0, |r| {
            r.stats().bytes.load(std::sync::atomic::Ordering::Relaxed)
        });
        self.file.as_ref().map(|f| (f.0.clone(), bytes))
    }

    fn can_mark(&self) -> bool {
        !self.exited
    }

    fn mark(&mut self, text: &str) -> Result<()> {
        let text = crate::mark::check_message(text.as_bytes()).map_err(anyhow::Error::msg)?;
        let Some(r) = &self.recorder else {
            anyhow::bail!("the watched process has exited");
        };
        r.event(Event {
            t_ns: self.sampler.elapsed_ns(),
            kind: EventKind::Marker(text),
        });
        Ok(())
    }
}
