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
use flatline_runtime::recording::{
    Event, EventKind, Frame, FrameReader, Header, Recording, RecordingSetup, RecordingWriter,
    SampleIndex, Slots, TailProblemKind, Tap, Tapped,
};
use flatline_runtime::telemetry::alloc::mark_observer_thread;
use flatline_runtime::telemetry::{
    self, ChannelSpec, Sample, SamplerConfig, SchemaChange, SchemaFeed,
};
use flatline_runtime::workload::driver::Workload;

use super::store::Store;

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

/// How a live stream (the built-in workloads, a watched process) reaches the
/// store and, while recording, the file. Each poll keeps its first write
/// error; the newest poll that had one sets [`Tee::error`]. A recording still
/// open when the tee is dropped (the window closed) is finished.
#[derive(Debug, Default)]
struct Tee {
    writer: Option<RecordingWriter>,
    /// A copy of the stream for the Prometheus exporter, if one runs.
    tap: Option<Tap>,
    /// The first write error of the poll in progress.
    pending: Option<String>,
    error: Option<String>,
}

impl Tee {
    fn new(writer: Option<RecordingWriter>) -> Self {
        Self {
            writer,
            tap: None,
            pending: None,
            error: None,
        }
    }

    fn note(&mut self, e: impl std::fmt::Display) {
        self.pending.get_or_insert_with(|| e.to_string());
    }

    /// Moves new samples into the store and, while recording, into the file,
    /// each after the schema changes that come before it.
    fn samples(&mut self, rx: &Receiver<Sample>, changes: &SchemaFeed, store: &mut Store) {
        for s in rx.try_iter() {
            changes.take_until(s.seq, |c| match c {
                SchemaChange::Add(specs) => self.add_channels(&specs, store),
                SchemaChange::End(positions) => self.end_channels(&positions, store),
            });
            self.sample(&s, store);
        }
    }

    /// One sample into the store and, while recording, into the file.
    fn sample(&mut self, s: &Sample, store: &mut Store) {
        store.push(s);
        if let Some(tap) = &self.tap {
            tap.send(Tapped::Sample(*s));
        }
        if let Some(Err(e)) = self.writer.as_mut().map(|w| w.push_sample(s)) {
            self.note(e);
        }
    }

    /// Channels that join (format v2), in the store and the file.
    fn add_channels(&mut self, specs: &[ChannelSpec], store: &mut Store) {
        store.add_channels(specs);
        if let Some(tap) = &self.tap {
            tap.send(Tapped::Add(specs.to_vec()));
        }
        if let Some(Err(e)) = self.writer.as_mut().map(|w| w.add_channels(specs)) {
            self.note(e);
        }
    }

    /// Channels that end, in the store and the file.
    fn end_channels(&mut self, positions: &[usize], store: &mut Store) {
        store.end_channels(positions);
        if let Some(tap) = &self.tap {
            tap.send(Tapped::End(positions.to_vec()));
        }
        if let Some(Err(e)) = self.writer.as_mut().map(|w| w.end_channels(positions)) {
            self.note(e);
        }
    }

    /// Adds an event to the store and, while recording, to the file.
    fn event(&mut self, e: Event, store: &mut Store) {
        if let Some(tap) = &self.tap {
            tap.send(Tapped::Event(e.clone()));
        }
        if let Some(Err(err)) = self.writer.as_mut().map(|w| w.push_event(e.clone())) {
            self.note(err);
        }
        store.push_event(e);
    }

    /// Ends a poll: lets the writer flush what is due, and shows its error.
    fn end_poll(&mut self) {
        if let Some(Err(e)) = self.writer.as_mut().map(RecordingWriter::tick) {
            self.note(e);
        }
        if let Some(e) = self.pending.take() {
            self.error = Some(e);
        }
    }

    /// Finishes the recording, if one is being written, and returns its path.
    fn finish(&mut self, end: &str) -> Result<Option<PathBuf>> {
        match self.writer.take() {
            Some(w) => Ok(Some(w.finish(end)?.path)),
            None => Ok(None),
        }
    }

    fn file(&self) -> Option<PathBuf> {
        self.writer.as_ref().map(|w| w.path().to_owned())
    }

    fn recording(&self) -> Option<(PathBuf, u64)> {
        self.writer
            .as_ref()
            .map(|w| (w.path().to_owned(), w.bytes_written()))
    }

    fn digest(&self) -> Option<String> {
        self.writer.as_ref().map(RecordingWriter::digest_hex)
    }
}

impl Drop for Tee {
    fn drop(&mut self) {
        let _ = self.finish("window closed");
    }
}

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
        let name = self.path.file_name().map_or_else(
            || self.path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        Meta {
            label: format!("replay: {name}"),
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
    fn meta(&self) -> Meta;
    /// One word or two: "running", "paused", "following", "ended".
    fn status(&self) -> String;
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
    fn activity(&self) -> Option<super::Activity> {
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

/// The built-in workloads, run by a child process (`flatline serve`) whose
/// stream this window follows: the process-level channels (`mem.*`,
/// `malloc.*`, `alloc.*`) describe the workload and its sampler, never the
/// window's own stores, caches and frames. The child writes its stream to a
/// file in a private temporary folder rather than a pipe, so it never waits
/// for a slow window, and a crash of either side leaves a readable file.
pub struct LiveSource {
    workload: Workload,
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
    tee: Tee,
    /// Holds the stream file; removed when the source goes.
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for LiveSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSource")
            .field("workload", &self.workload)
            .field("hz", &self.hz)
            .field("child", &self.child.id())
            .finish_non_exhaustive()
    }
}

/// How long the window waits for its child's stream to start.
const SERVE_START: Duration = Duration::from_secs(30);

impl LiveSource {
    /// Starts the workloads in a child process (this executable, `serve`).
    pub fn start(workload: Workload, hz: f64) -> Result<(Self, Store)> {
        let exe = std::env::current_exe().context("finding flatline's own executable")?;
        Self::start_with(&exe, workload, hz, &[])
    }

    /// As [`LiveSource::start`], with `program` as the flatline to run, and
    /// `extra` flags for it (`--layout`; `--prometheus`, `--alert`: see
    /// [`crate::cli::PrometheusArgs::to_args`]); the child serves and
    /// alerts, and says so on stderr.
    pub fn start_with(
        program: &Path,
        workload: Workload,
        hz: f64,
        extra: &[String],
    ) -> Result<(Self, Store)> {
        let dir = tempfile::Builder::new()
            .prefix("flatline-live-")
            .tempdir()
            .context("creating a folder for the live stream")?;
        let path = dir.path().join("stream.flr");
        let mut cmd = Command::new(program);
        cmd.args(["serve", "--workload", workload.name(), "--hz"])
            .arg(hz.to_string())
            .arg("--out")
            .arg(&path)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::null());
        flatline_runtime::sys::end_with_this_process(&mut cmd);
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
        let mut store = Store::new(header.schema.clone(), super::LIVE_CAP);
        store.set_host(&header.host);
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
                dropped_idx: header.schema.index_of("telemetry.dropped"),
                dropped: 0,
                follower,
                tee: Tee::default(),
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
        // Closing its input ends the child cleanly; a child that does not end
        // within two seconds is killed. Then `tee` finishes the recording.
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

    fn meta(&self) -> Meta {
        Meta {
            label: format!("live: {} at {} Hz", self.workload.name(), self.hz),
            host: self.follower.header.host.summary(),
            file: self.tee.file(),
            digest: self.tee.digest(),
            started_unix_ms: Some(self.follower.header.started_unix_ms),
        }
    }

    fn status(&self) -> String {
        if let Some(e) = &self.tee.error {
            return format!("error: {e}");
        }
        if !self.follower.is_open() {
            return "workload stopped".into();
        }
        if self.running { "running" } else { "paused" }.into()
    }

    fn poll(&mut self, store: &mut Store) {
        mark_observer_thread();
        self.follower.read_new(store, &mut self.tee);
        self.tee.end_poll();
        if let Some(v) = self
            .dropped_idx
            .and_then(|i| flatline_runtime::analysis::rules::latest(store.series(i).values()))
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

    fn activity(&self) -> Option<super::Activity> {
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
        self.tee.recording()
    }

    fn can_record(&self) -> bool {
        true
    }

    /// Starts writing everything from now on to `path`, with the stream's
    /// header (its schema, host and configuration) and this moment as its start.
    fn start_recording(&mut self, path: &Path) -> Result<()> {
        if self.tee.writer.is_some() {
            anyhow::bail!("already recording");
        }
        let h = &self.follower.header;
        let mut setup = RecordingSetup::new(&h.source);
        setup.config = h.config.clone();
        setup.host = h.host.clone();
        let schema = &self.follower.schema;
        self.tee.writer = Some(setup.create(path, false, schema, &h.unavailable)?);
        Ok(())
    }

    fn stop_recording(&mut self) -> Result<Option<PathBuf>> {
        self.tee.finish("stopped")
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

/// A row of a file (one value per channel position) as a live sample (one
/// value per slot).
fn to_slots(slots: &Slots, seq: u64, t_ns: u64, row: &[f64]) -> Sample {
    let mut s = Sample::new(seq, t_ns, slots.width());
    let values = s.values_mut();
    for (&v, slot) in row.iter().zip(slots.all()) {
        if let Some(k) = slot {
            values[usize::from(*k)] = v;
        }
    }
    s
}

/// Reads a recording that another process is still writing, frame by frame,
/// into a store (and through a [`Tee`], when one records).
#[derive(Debug)]
struct Follower {
    reader: Option<FrameReader<BufReader<File>>>,
    header: Header,
    /// The header's channels and every one added since.
    schema: telemetry::Schema,
    /// Where each live channel's value goes in a sample.
    slots: Slots,
    digest: String,
    status: String,
}

impl Follower {
    fn open(path: &Path) -> Result<(Self, Header)> {
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let (reader, header) = FrameReader::open(BufReader::new(file), path)?;
        Ok((
            Self {
                reader: Some(reader),
                schema: header.schema.clone(),
                slots: Slots::new(header.schema.len()),
                header: header.clone(),
                digest: String::new(),
                status: "following".into(),
            },
            header,
        ))
    }

    fn is_open(&self) -> bool {
        self.reader.is_some()
    }

    fn read_new(&mut self, store: &mut Store, tee: &mut Tee) {
        let Some(reader) = self.reader.as_mut() else {
            return;
        };
        loop {
            match reader.next_frame() {
                Ok(Some(Frame::Samples(block))) => {
                    let slots = &self.slots;
                    let _ =
                        block.decode(|seq, t, v| tee.sample(&to_slots(slots, seq, t, v), store));
                }
                Ok(Some(Frame::Block(block))) => {
                    let slots = &self.slots;
                    let _ =
                        block.decode(|seq, t, v| tee.sample(&to_slots(slots, seq, t, v), store));
                }
                Ok(Some(Frame::Channels(ext))) => {
                    self.schema.channels.extend(ext.channels.iter().cloned());
                    self.slots.add(ext.channels.len());
                    tee.add_channels(&ext.channels, store);
                }
                Ok(Some(Frame::Ended(end))) => {
                    let ended: Vec<usize> = end.channels.iter().map(|&c| c as usize).collect();
                    self.slots.end(&ended);
                    tee.end_channels(&ended, store);
                }
                Ok(Some(Frame::Event(e))) => tee.event(e, store),
                Ok(Some(Frame::Footer(f))) => {
                    self.status = format!("ended: {}", f.end);
                    self.digest = f.digest;
                    self.reader = None;
                    break;
                }
                Ok(Some(_)) => {}
                // The writer has not finished the next frame yet: ask again later.
                Ok(None) => break,
                Err(p) if p.kind == TailProblemKind::Truncated => break,
                Err(p) => {
                    self.status = format!("damaged at byte {}", p.offset);
                    self.reader = None;
                    break;
                }
            }
        }
        if let Some(r) = &self.reader {
            self.digest = r.digest_hex();
        }
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
    /// Followed data goes to the store only (a replay never records).
    tee: Tee,
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
        let rec = Recording::open_bounded(path, budget)
            .with_context(|| format!("opening {}", path.display()))?;
        Ok(Self::from_recording(rec))
    }

    /// A recording already read (its columns move into the store).
    pub fn from_recording(mut rec: Recording) -> (Self, Store) {
        let store = Store::from_recording(&mut rec);
        let mut status: String = match &rec.tail {
            None => "ended".into(),
            Some(t) if t.kind == TailProblemKind::Truncated => "truncated".into(),
            Some(t) => format!("damaged at byte {}", t.offset),
        };
        if let Some(t) = &rec.thinned {
            status.push_str(&format!(
                "; every {} of {} samples shown",
                crate::fmt::ordinal(t.stride),
                crate::fmt::thousands(t.samples as u64)
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
                tee: Tee::default(),
            },
            store,
        )
    }

    /// Opens a recording that may still be growing and keeps reading it.
    /// Like a live window, it keeps the latest [`super::LIVE_CAP`] samples at
    /// full resolution and thins older history, so a soak followed for days
    /// stays bounded.
    pub fn follow(path: &Path) -> Result<(Self, Store)> {
        let (follower, header) = Follower::open(path)?;
        let mut store = Store::new(header.schema.clone(), super::LIVE_CAP);
        store.set_host(&header.host);
        let mut src = Self {
            path: path.to_owned(),
            digest: String::new(),
            header,
            index: None,
            follow: Some(follower),
            status: "following".into(),
            tee: Tee::default(),
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
        let name = self.path.file_name().map_or_else(
            || self.path.display().to_string(),
            |n| n.to_string_lossy().into(),
        );
        Meta {
            label: format!("replay: {name}"),
            host: self.header.host.summary(),
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
            f.read_new(store, &mut self.tee);
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

    fn activity(&self) -> Option<super::Activity> {
        self.follow
            .is_some()
            .then(|| file_growth(self.path.clone()))
    }
}

/// Whether the file at `path` changed length since the last call (the
/// first call says yes): a stream file another process appends to.
fn file_growth(path: PathBuf) -> super::Activity {
    let mut last = None;
    Box::new(move || {
        let len = std::fs::metadata(&path).map(|m| m.len()).ok();
        let grew = len != last;
        last = len;
        grew
    })
}

/// Another process, watched by PID, with its step log if it has one.
pub struct WatchSource {
    pid: u32,
    hz: f64,
    host: String,
    samples: Receiver<Sample>,
    changes: SchemaFeed,
    steps: Receiver<Event>,
    /// Markers added in the window, stamped when added, recorded at the next poll.
    marks: Vec<Event>,
    sampler: telemetry::Sampler,
    tee: Tee,
    exited: bool,
    /// When sampling began (its clock's 0), in ms since 1970.
    started_unix_ms: u64,
    /// Serves the stream to Prometheus while the window is open.
    _exporter: Option<crate::prom::Exporter>,
}

impl std::fmt::Debug for WatchSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchSource")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

impl WatchSource {
    /// Starts sampling `pid` (with `extra` probes, e.g. its step log, whose
    /// step events arrive on `steps`), and records to `out` as `setup` says.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        pid: u32,
        cfg: SamplerConfig,
        extra: Vec<Box<dyn telemetry::Probe>>,
        steps: Receiver<Event>,
        mut setup: RecordingSetup,
        out: Option<&Path>,
        force: bool,
        export: Option<(crate::session::Export, Sender<Event>)>,
    ) -> Result<(Self, Store)> {
        let hz = cfg.hz;
        let started_unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let tel = telemetry::start_with(cfg, extra).context("starting telemetry")?;
        setup.collect_host(tel.gpu.clone());
        let (tap, exporter) = match export {
            Some((e, events)) => {
                let (tap, exporter) =
                    crate::session::start_exporter(e, &tel.schema, &setup, &tel.sampler, events)?;
                (Some(tap), Some(exporter))
            }
            None => (None, None),
        };
        let writer = match out {
            Some(path) => Some(setup.create(path, force, &tel.schema, &tel.unavailable)?),
            None => None,
        };
        let mut store = Store::new(tel.schema.clone(), super::LIVE_CAP);
        store.set_host(&setup.host);
        let mut tee = Tee::new(writer);
        tee.tap = tap;
        Ok((
            Self {
                pid,
                hz,
                host: setup.host.summary(),
                samples: tel.samples,
                changes: tel.changes,
                steps,
                marks: Vec::new(),
                sampler: tel.sampler,
                tee,
                exited: false,
                started_unix_ms,
                _exporter: exporter,
            },
            store,
        ))
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

    fn meta(&self) -> Meta {
        Meta {
            label: format!("watch: pid {} at {} Hz", self.pid, self.hz),
            host: self.host.clone(),
            file: self.tee.file(),
            digest: self.tee.digest(),
            started_unix_ms: Some(self.started_unix_ms),
        }
    }

    fn status(&self) -> String {
        if let Some(e) = &self.tee.error {
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
        self.tee.samples(&self.samples, &self.changes, store);
        // Step events come stamped with the time their row was read.
        for e in self.steps.try_iter() {
            self.tee.event(e, store);
        }
        for e in self.marks.drain(..) {
            self.tee.event(e, store);
        }
        if !self.exited && self.sampler.is_finished() {
            self.exited = true;
            let e = Event {
                t_ns: self.sampler.elapsed_ns(),
                kind: EventKind::TargetExited { pid: self.pid },
            };
            self.tee.event(e, store);
            if let Err(e) = self.tee.finish("target exited") {
                self.tee.note(format!("{e:#}"));
            }
        }
        self.tee.end_poll();
    }

    fn dropped(&self) -> u64 {
        self.sampler.dropped()
    }

    fn growing(&self) -> bool {
        !self.exited
    }

    fn activity(&self) -> Option<super::Activity> {
        let (samples, steps, progress) = (
            self.samples.clone(),
            self.steps.clone(),
            self.sampler.progress(),
        );
        let mut told = (u64::MAX, false);
        Some(Box::new(move || {
            // Only lengths and counters are read: nothing is taken from the
            // queues, which the window's own poll drains.
            let now = (progress.produced(), progress.ended());
            let fresh = now != told || !samples.is_empty() || !steps.is_empty();
            told = now;
            fresh
        }))
    }

    fn recording(&self) -> Option<(PathBuf, u64)> {
        self.tee.recording()
    }

    fn can_mark(&self) -> bool {
        !self.exited
    }

    fn mark(&mut self, text: &str) -> Result<()> {
        let text = crate::mark::check_message(text.as_bytes()).map_err(anyhow::Error::msg)?;
        self.marks.push(Event {
            t_ns: self.sampler.elapsed_ns(),
            kind: EventKind::Marker(text),
        });
        Ok(())
    }
}
