//! Where the dashboard's data comes from: the built-in workloads live, or a
//! recording (finished, or still being written and followed). The views only
//! see the [`Store`]; the top bar asks a source what it can do.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context as _, Result};
use crossbeam_channel::Receiver;
use flatline_runtime::recording::{
    Event, EventKind, Frame, FrameReader, Header, Recording, RecordingSetup, RecordingWriter,
    TailProblemKind,
};
use flatline_runtime::telemetry::alloc::mark_observer_thread;
use flatline_runtime::telemetry::work::WorkProgress;
use flatline_runtime::telemetry::{self, Sample, SamplerConfig};
use flatline_runtime::workload::driver::{Driver, DriverConfig, Workload};

use super::store::Store;

/// What a caption and a top bar say about a source.
#[derive(Debug, Clone, Default)]
pub struct Meta {
    /// "live: both at 100 Hz", "replay: soak.flr".
    pub label: String,
    pub host: String,
    pub file: Option<PathBuf>,
    pub digest: Option<String>,
}

/// How a live stream (the built-in workloads, a watched process) reaches the
/// store and, while recording, the file. Each poll keeps its first write
/// error; the newest poll that had one sets [`Tee::error`]. A recording still
/// open when the tee is dropped (the window closed) is finished.
#[derive(Default)]
struct Tee {
    writer: Option<RecordingWriter>,
    /// The first write error of the poll in progress.
    pending: Option<String>,
    error: Option<String>,
}

impl Tee {
    fn new(writer: Option<RecordingWriter>) -> Self {
        Self {
            writer,
            pending: None,
            error: None,
        }
    }

    fn note(&mut self, e: impl std::fmt::Display) {
        self.pending.get_or_insert_with(|| e.to_string());
    }

    /// Moves new samples into the store and, while recording, into the file.
    fn samples(&mut self, rx: &Receiver<Sample>, store: &mut Store) {
        for s in rx.try_iter() {
            store.push(&s);
            if let Some(Err(e)) = self.writer.as_mut().map(|w| w.push_sample(&s)) {
                self.note(e);
            }
        }
    }

    /// Adds an event to the store and, while recording, to the file.
    fn event(&mut self, e: Event, store: &mut Store) {
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
    /// Whether its own workload runs; `None` for sources without one.
    fn workload_running(&self) -> Option<bool> {
        None
    }
    fn set_workload_running(&mut self, _on: bool) {}
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
}

/// The built-in workloads, run in this process with telemetry streaming in.
pub struct LiveSource {
    workload: Workload,
    hz: f64,
    samples: Receiver<Sample>,
    events: Receiver<Event>,
    sampler: telemetry::Sampler,
    running: Arc<AtomicBool>,
    quit: Arc<AtomicBool>,
    worker: Option<JoinHandle<Result<()>>>,
    /// How a recording of this session is made (the same fields as `soak`'s).
    setup: RecordingSetup,
    schema: telemetry::Schema,
    unavailable: Vec<telemetry::Unavailable>,
    tee: Tee,
}

impl std::fmt::Debug for LiveSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSource")
            .field("workload", &self.workload)
            .field("hz", &self.hz)
            .finish_non_exhaustive()
    }
}

impl LiveSource {
    /// Builds the workload, starts telemetry and the workload thread.
    pub fn start(workload: Workload, hz: f64) -> Result<(Self, Store)> {
        let progress = WorkProgress::new();
        let driver_cfg = DriverConfig {
            workload,
            ..DriverConfig::default()
        };
        let mut setup = RecordingSetup::new("live");
        setup.workload(&driver_cfg).hz(hz);
        let mut driver =
            Driver::new(driver_cfg, progress.clone()).context("setting up the workload")?;
        let tel = telemetry::start(SamplerConfig {
            hz,
            progress: Some(progress),
            ..SamplerConfig::default()
        })
        .context("starting telemetry")?;
        setup.collect_host(tel.gpu.clone());
        let (ev_tx, ev_rx) = crossbeam_channel::bounded(4096);
        let running = Arc::new(AtomicBool::new(true));
        let quit = Arc::new(AtomicBool::new(false));
        let (r, q) = (running.clone(), quit.clone());
        // Events are stamped on the samples' clock, so they line up with them.
        let clock = tel.sampler.clock();
        let worker = std::thread::Builder::new()
            .name("flatline-workload".into())
            .spawn(move || -> Result<()> {
                let _ = ev_tx.try_send(Event {
                    t_ns: clock.now_ns(),
                    kind: EventKind::Phase(workload.name().into()),
                });
                while !q.load(Ordering::Relaxed) {
                    if r.load(Ordering::Relaxed) {
                        driver.run_slice(Duration::from_millis(50), &mut |step, tokens| {
                            let _ = ev_tx.try_send(Event {
                                t_ns: clock.now_ns(),
                                kind: EventKind::Step {
                                    step,
                                    tokens: Some(tokens),
                                },
                            });
                        })?;
                    } else {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
                Ok(())
            })
            .context("starting the workload thread")?;
        let mut store = Store::new(tel.schema.clone(), super::LIVE_CAP);
        store.set_ram_limits(&setup.host);
        Ok((
            Self {
                workload,
                hz,
                samples: tel.samples,
                events: ev_rx,
                sampler: tel.sampler,
                running,
                quit,
                worker: Some(worker),
                setup,
                schema: tel.schema,
                unavailable: tel.unavailable,
                tee: Tee::default(),
            },
            store,
        ))
    }
}

impl Drop for LiveSource {
    fn drop(&mut self) {
        self.quit.store(true, Ordering::Relaxed);
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
        // Then `tee` finishes the recording, if one is open.
    }
}

impl Source for LiveSource {
    fn kind(&self) -> SourceKind {
        SourceKind::Live
    }

    fn meta(&self) -> Meta {
        Meta {
            label: format!("live: {} at {} Hz", self.workload.name(), self.hz),
            host: self.setup.host.summary(),
            file: self.tee.file(),
            digest: self.tee.digest(),
        }
    }

    fn status(&self) -> String {
        if let Some(e) = &self.tee.error {
            return format!("error: {e}");
        }
        if self.worker.as_ref().is_some_and(JoinHandle::is_finished) {
            return "workload stopped".into();
        }
        if self.running.load(Ordering::Relaxed) {
            "running"
        } else {
            "paused"
        }
        .into()
    }

    fn poll(&mut self, store: &mut Store) {
        mark_observer_thread();
        self.tee.samples(&self.samples, store);
        for e in self.events.try_iter() {
            self.tee.event(e, store);
        }
        self.tee.end_poll();
    }

    fn dropped(&self) -> u64 {
        self.sampler.dropped()
    }

    fn growing(&self) -> bool {
        true
    }

    fn workload_running(&self) -> Option<bool> {
        Some(self.running.load(Ordering::Relaxed))
    }

    /// Pauses or resumes the workload (telemetry keeps streaming).
    fn set_workload_running(&mut self, on: bool) {
        self.running.store(on, Ordering::Relaxed);
    }

    fn recording(&self) -> Option<(PathBuf, u64)> {
        self.tee.recording()
    }

    fn can_record(&self) -> bool {
        true
    }

    /// Starts writing everything from now on to `path`.
    fn start_recording(&mut self, path: &Path) -> Result<()> {
        if self.tee.writer.is_some() {
            anyhow::bail!("already recording");
        }
        // The recording's header says it starts now, not when the window opened.
        self.tee.writer = Some(
            self.setup
                .create(path, false, &self.schema, &self.unavailable)?,
        );
        Ok(())
    }

    fn stop_recording(&mut self) -> Result<Option<PathBuf>> {
        self.tee.finish("stopped")
    }
}

/// A recording on disk, optionally followed while another process writes it.
#[derive(Debug)]
pub struct ReplaySource {
    path: PathBuf,
    header: Header,
    digest: String,
    follow: Option<FrameReader<BufReader<File>>>,
    status: String,
}

impl ReplaySource {
    /// Loads a whole recording.
    pub fn open(path: &Path) -> Result<(Self, Store)> {
        let rec = Recording::open(path).with_context(|| format!("opening {}", path.display()))?;
        let store = Store::from_recording(&rec);
        let status = match &rec.tail {
            None => "ended".into(),
            Some(t) if t.kind == TailProblemKind::Truncated => "truncated".into(),
            Some(t) => format!("damaged at byte {}", t.offset),
        };
        Ok((
            Self {
                path: path.to_owned(),
                digest: rec.digest.clone(),
                header: rec.header,
                follow: None,
                status,
            },
            store,
        ))
    }

    /// Opens a recording that may still be growing and keeps reading it.
    pub fn follow(path: &Path) -> Result<(Self, Store)> {
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let (reader, header) = FrameReader::open(BufReader::new(file), path)?;
        let store = Store::new(header.schema.clone(), usize::MAX);
        let mut src = Self {
            path: path.to_owned(),
            digest: String::new(),
            header,
            follow: Some(reader),
            status: "following".into(),
        };
        let mut store = store;
        src.poll(&mut store);
        Ok((src, store))
    }

    fn read_new(&mut self, store: &mut Store) {
        let Some(reader) = self.follow.as_mut() else {
            return;
        };
        loop {
            match reader.next_frame() {
                Ok(Some(Frame::Samples(block))) => {
                    let _ = block.decode(|seq, t, v| store.push(&Sample::from_values(seq, t, v)));
                }
                Ok(Some(Frame::Block(block))) => {
                    let _ = block.decode(|seq, t, v| store.push(&Sample::from_values(seq, t, v)));
                }
                Ok(Some(Frame::Channels(ext))) => {
                    store.add_channels(&ext.channels, &self.header.host)
                }
                Ok(Some(Frame::Ended(end))) => {
                    let ended: Vec<usize> = end.channels.iter().map(|&c| c as usize).collect();
                    store.end_channels(&ended);
                }
                Ok(Some(Frame::Event(e))) => store.push_event(e),
                Ok(Some(Frame::Footer(f))) => {
                    self.status = format!("ended: {}", f.end);
                    self.digest = f.digest;
                    self.follow = None;
                    break;
                }
                Ok(Some(_)) => {}
                // The writer has not finished the next frame yet: ask again later.
                Ok(None) => break,
                Err(p) if p.kind == TailProblemKind::Truncated => break,
                Err(p) => {
                    self.status = format!("damaged at byte {}", p.offset);
                    self.follow = None;
                    break;
                }
            }
        }
        if let Some(r) = &self.follow {
            self.digest = r.digest_hex();
        }
    }
}

impl Source for ReplaySource {
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
        }
    }

    fn status(&self) -> String {
        self.status.clone()
    }

    fn poll(&mut self, store: &mut Store) {
        self.read_new(store);
    }

    fn growing(&self) -> bool {
        self.follow.is_some()
    }
}

/// Another process, watched by PID, with its step log if it has one.
pub struct WatchSource {
    pid: u32,
    hz: f64,
    host: String,
    samples: Receiver<Sample>,
    steps: Receiver<Event>,
    sampler: telemetry::Sampler,
    tee: Tee,
    exited: bool,
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
    ) -> Result<(Self, Store)> {
        let hz = cfg.hz;
        let tel = telemetry::start_with(cfg, extra).context("starting telemetry")?;
        setup.collect_host(tel.gpu.clone());
        let writer = match out {
            Some(path) => Some(setup.create(path, force, &tel.schema, &tel.unavailable)?),
            None => None,
        };
        let mut store = Store::new(tel.schema.clone(), super::LIVE_CAP);
        store.set_ram_limits(&setup.host);
        Ok((
            Self {
                pid,
                hz,
                host: setup.host.summary(),
                samples: tel.samples,
                steps,
                sampler: tel.sampler,
                tee: Tee::new(writer),
                exited: false,
            },
            store,
        ))
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
        self.tee.samples(&self.samples, store);
        // Step events come stamped with the time their row was read.
        for e in self.steps.try_iter() {
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

    fn recording(&self) -> Option<(PathBuf, u64)> {
        self.tee.recording()
    }
}
