//! [`Recorder`]: the consumer end of a telemetry stream, writing a recording
//! on its own observer thread.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TrySendError, select};

use super::{Event, EventKind, Item, RecordingError, RecordingWriter, WriteFault, WriteSummary};
use crate::alloc::mark_observer_thread;
use crate::{Sample, SchemaFeed};

/// Live figures of a running recorder.
#[derive(Debug, Default)]
pub struct RecorderStats {
    pub samples: AtomicU64,
    pub bytes: AtomicU64,
    /// Events refused because the event queue was full.
    pub events_dropped: AtomicU64,
    /// Write faults (a full disk): the one in progress, and those that ended
    /// with writes working again.
    pub faults: std::sync::Mutex<Faults>,
    /// The same, for the second recording ([`Fanout::copy`]) while one runs.
    pub copy_faults: std::sync::Mutex<Faults>,
    /// A window's recorder ([`Recorder::spawn_for_window`]): the newest
    /// error of its recording that is not a write fault. It does not end
    /// the recorder (the window's stream goes on).
    pub error: std::sync::Mutex<Option<String>>,
}

/// A recorder's write faults so far.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Faults {
    /// Writes fail now: what is lost so far.
    pub now: Option<WriteFault>,
    /// Faults that ended (the file notes each gap).
    pub ended: Vec<WriteFault>,
}

impl Faults {
    /// Every fault, ended or not.
    pub fn all(&self) -> impl Iterator<Item = &WriteFault> {
        self.ended.iter().chain(&self.now)
    }
}

/// What a finished recorder wrote, and what writing cost.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RecorderSummary {
    #[serde(flatten)]
    pub write: WriteSummary,
    /// CPU time the recorder thread used, in nanoseconds (0 where unknown).
    pub cpu_ns: u64,
    /// Write faults met on the way (see [`Faults`]).
    #[serde(skip)]
    pub faults: Faults,
}

/// Most events waiting for the recorder; a full queue drops and counts.
pub const EVENT_CAPACITY: usize = 4096;

/// The queue of events on their way to a [`Recorder`]. Made before the
/// recorder, so producers that start first (a step log read on the sampler
/// thread) can hold a sender and reach the recording directly.
pub fn event_channel() -> (Sender<Event>, Receiver<Event>) {
    crossbeam_channel::bounded(EVENT_CAPACITY)
}

/// Where the items of one stream go besides the caller's own consumer (a
/// window's store): the recording, a second recording of the same stream
/// from some moment on (a live window's Record button), and the sinks that
/// share each item (the exporter's [`Tap`], a watch window's
/// [`WindowTap`]). The recorder thread and a watch window both push through
/// one.
#[derive(Debug, Default)]
pub struct Fanout {
    pub writer: Option<RecordingWriter>,
    /// A second recording, from [`RecordingWriter::fork`]. A write fault (a
    /// full disk) is weathered as the first's is; any other error ends it
    /// without touching the first.
    pub copy: Option<RecordingWriter>,
    /// Each gets every item, in the order pushed, and the notes of the
    /// recording's faults; none ever blocks the recorder.
    pub sinks: Vec<Box<dyn Sink>>,
    /// The error that ended `copy`, until taken.
    pub copy_error: Option<RecordingError>,
    /// A fault of `writer` has been told ([`Fanout::fault_news`]) and has
    /// not ended.
    faulted: bool,
    /// Samples lost in faults that ended.
    lost_before: u64,
}

/// What [`Fanout::fault_news`] found.
#[derive(Debug, Default)]
pub struct FaultNews {
    /// A fault that ended: writes work again, and the file notes the gap.
    pub resumed: Option<WriteFault>,
    /// The notes the stream got: the fault's beginning and end, in order.
    pub notes: Vec<Event>,
}

/// The start of the note a stream gets when its recording's writes begin
/// to fail (`recording fault: No space left on device (os error 28)`).
pub const FAULT_NOTE: &str = "recording fault: ";
/// The start of the note a stream gets when they work again.
pub const RESUMED_NOTE: &str = "recording resumed: ";

/// True for the notes a recording's writer adds to a stream or a file about
/// itself (a fault, its end, the gap it left), as against a probe's.
pub fn is_recording_note(text: &str) -> bool {
    text.starts_with(FAULT_NOTE)
        || text.starts_with(RESUMED_NOTE)
        || text.starts_with(flatline_format::GAP_NOTE)
}

/// Where a stream's items go besides its recordings: each is handed a
/// clone of every item, and never blocks (a full one drops and counts).
pub trait Sink: Send + std::fmt::Debug {
    /// Passes an item on.
    fn send(&self, item: Item);
    /// The recording's writes fail (`faulted`, a full disk) or work again;
    /// `lost` samples of the stream are not in it so far.
    fn write_fault(&self, _faulted: bool, _lost: u64) {}
}

impl Sink for Tap {
    fn send(&self, item: Item) {
        Tap::send(self, item);
    }
    fn write_fault(&self, faulted: bool, lost: u64) {
        self.stats.write_fault.store(faulted, Relaxed);
        self.stats.lost_samples.store(lost, Relaxed);
    }
}

impl Sink for WindowTap {
    fn send(&self, item: Item) {
        WindowTap::send(self, item);
    }
}

impl Fanout {
    /// A fanout to `writer` and `sinks`.
    pub fn new(writer: Option<RecordingWriter>, sinks: Vec<Box<dyn Sink>>) -> Self {
        Self {
            writer,
            sinks,
            ..Self::default()
        }
    }

    /// The changes of the recording's write fault since the last call.
    /// Each is told to the tap as a note in the stream ([`FAULT_NOTE`],
    /// [`RESUMED_NOTE`]) and in its figures ([`TapStats::write_fault`],
    /// [`TapStats::lost_samples`]), and returned, with its note, for the
    /// caller's own consumer.
    pub fn fault_news(&mut self) -> FaultNews {
        let mut news = FaultNews::default();
        let Some(w) = self.writer.as_mut() else {
            return news;
        };
        if let Some(r) = w.take_resumed() {
            self.lost_before += r.lost_samples;
            self.faulted = false;
            news.notes.push(Event {
                t_ns: r.lost_until_ns,
                kind: EventKind::Note(format!(
                    "{RESUMED_NOTE}{} samples lost from {:.1} s",
                    r.lost_samples,
                    r.safe_t_ns as f64 / 1e9
                )),
            });
            news.resumed = Some(r);
        }
        let now = w.fault();
        // The common case, on the recorder's path for every item: writes
        // work and nothing changed since the last call.
        if now.is_none() && news.notes.is_empty() {
            return news;
        }
        if let Some(f) = now
            && !self.faulted
        {
            self.faulted = true;
            news.notes.push(Event {
                t_ns: f.lost_until_ns,
                kind: EventKind::Note(format!("{FAULT_NOTE}{}", f.cause)),
            });
        }
        let lost = self.lost_before + now.map_or(0, |f| f.lost_samples);
        for sink in &self.sinks {
            sink.write_fault(self.faulted, lost);
            for e in &news.notes {
                sink.send(Item::Event(e.clone()));
            }
        }
        news
    }

    /// Passes `item` to the sinks and the recordings. An error of the main
    /// recording is returned (the item is in the sinks and the copy); one
    /// of the copy finishes it, kept in [`Fanout::copy_error`].
    pub fn push(&mut self, item: &Item) -> Result<(), RecordingError> {
        for sink in &self.sinks {
            sink.send(item.clone());
        }
        if let Some(c) = self.copy.as_mut() {
            let r = c.push(item);
            self.copy_failed(r);
        }
        match self.writer.as_mut() {
            Some(w) => w.push(item),
            None => Ok(()),
        }
    }

    /// Ends the copy on an error that is not a write fault it weathers.
    fn copy_failed(&mut self, r: Result<(), RecordingError>) {
        if let Err(e) = r
            && self.copy.as_ref().is_none_or(|c| c.fault().is_none())
        {
            self.copy = None;
            self.copy_error = Some(e);
        }
    }

    /// Time-based duties of the recordings (see [`RecordingWriter::tick`]).
    pub fn tick(&mut self) -> Result<(), RecordingError> {
        if let Some(c) = self.copy.as_mut() {
            let r = c.tick();
            self.copy_failed(r);
        }
        match self.writer.as_mut() {
            Some(w) => w.tick(),
            None => Ok(()),
        }
    }

    /// Starts the second recording at `path`.
    pub fn start_copy(&mut self, path: &Path, force: bool) -> Result<(), RecordingError> {
        let Some(w) = &self.writer else {
            return Err(RecordingError::Encode(
                "nothing is being recorded to copy".into(),
            ));
        };
        if self.copy.is_some() {
            return Err(RecordingError::Encode("already recording a copy".into()));
        }
        self.copy = Some(w.fork(path, force)?);
        self.copy_error = None;
        Ok(())
    }

    /// Finishes the second recording, if one is being written (one whose
    /// writes still fail is left whole up to its fault, without a footer).
    pub fn finish_copy(&mut self, end: &str) -> Result<Option<WriteSummary>, RecordingError> {
        match self.copy.take() {
            Some(mut c) => {
                if c.fault().is_some() {
                    c.retry_now();
                }
                if c.fault().is_some() {
                    return Ok(Some(c.kept()));
                }
                match c.close(end) {
                    Ok(w) => Ok(Some(w)),
                    Err(_) if c.fault().is_some() => Ok(Some(c.kept())),
                    Err(e) => Err(e),
                }
            }
            None => match self.copy_error.take() {
                Some(e) => Err(e),
                None => Ok(None),
            },
        }
    }
}

/// Most items waiting for a tap's reader (about 1 KiB each); a full queue
/// drops and counts.
pub const TAP_CAPACITY: usize = 1024;

/// A copy of a live stream for another consumer (an exporter, alerts) than
/// the one that writes it: bounded, never blocking the writer. A full queue
/// drops samples and counts them; a schema change that cannot be queued
/// breaks the tap for good (its reader could no longer tell the channels
/// apart), which [`TapStats::broken`] says.
#[derive(Debug, Clone)]
pub struct Tap {
    tx: Sender<Item>,
    stats: Arc<TapStats>,
}

/// What a tap lost, and what its stream's recording lost.
#[derive(Debug, Default)]
pub struct TapStats {
    pub dropped: AtomicU64,
    pub broken: std::sync::atomic::AtomicBool,
    /// The recording's writes fail (a full disk), from the fault until
    /// they work again ([`Fanout::fault_news`]); one stopped on a fault
    /// stays so.
    pub write_fault: std::sync::atomic::AtomicBool,
    /// Samples of the stream the recording lost to write faults so far.
    pub lost_samples: AtomicU64,
}

impl Tap {
    /// A tap, the end its reader takes items from, and its figures.
    pub fn new() -> (Self, Receiver<Item>, Arc<TapStats>) {
        let (tx, rx) = crossbeam_channel::bounded(TAP_CAPACITY);
        let stats = Arc::new(TapStats::default());
        (
            Self {
                tx,
                stats: stats.clone(),
            },
            rx,
            stats,
        )
    }

    /// Passes an item on, unless the tap is broken; never blocks.
    pub fn send(&self, item: Item) {
        if self.stats.broken.load(Relaxed) {
            return;
        }
        let schema = item.is_schema_change();
        if self.tx.try_send(item).is_err() {
            self.stats.dropped.fetch_add(1, Relaxed);
            if schema {
                self.stats.broken.store(true, Relaxed);
            }
        }
    }
}

/// Most samples a window's [`Feed`] holds unread (the sampler's own queue,
/// [`crate::SamplerConfig::capacity`]'s default): a window that is
/// not drawn for a while (minimized) misses the rest, counted, while the
/// recording gets every one.
pub const WINDOW_BACKLOG: usize = 4096;

/// The recorder's end of a window's copy of the stream: every schema change
/// and event, and the samples while fewer than [`WINDOW_BACKLOG`] wait.
/// Unlike a [`Tap`] it never loses a schema change, so the window's store
/// always knows its channels.
#[derive(Debug, Clone)]
pub struct WindowTap {
    tx: Sender<Item>,
    waiting: Arc<AtomicU64>,
    dropped: Arc<AtomicU64>,
}

/// The window's end of a [`WindowTap`].
#[derive(Debug, Clone)]
pub struct Feed {
    rx: Receiver<Item>,
    waiting: Arc<AtomicU64>,
    dropped: Arc<AtomicU64>,
}

impl WindowTap {
    /// A window's copy of a stream, and the end the window reads.
    pub fn new() -> (Self, Feed) {
        let (tx, rx) = crossbeam_channel::unbounded();
        let (waiting, dropped) = (Arc::default(), Arc::default());
        (
            Self {
                tx,
                waiting: Arc::clone(&waiting),
                dropped: Arc::clone(&dropped),
            },
            Feed {
                rx,
                waiting,
                dropped,
            },
        )
    }

    /// Passes an item on; a sample is dropped, and counted, when
    /// [`WINDOW_BACKLOG`] samples wait already. Never blocks.
    pub fn send(&self, item: Item) {
        let sample = matches!(item, Item::Sample(_));
        if sample {
            if self.waiting.load(Relaxed) >= WINDOW_BACKLOG as u64 {
                self.dropped.fetch_add(1, Relaxed);
                return;
            }
            self.waiting.fetch_add(1, Relaxed);
        }
        // The window gone, nobody reads: nothing to do.
        let _ = self.tx.send(item);
    }
}

impl Feed {
    /// The waiting items, in order (none blocks).
    pub fn items(&self) -> impl Iterator<Item = Item> + '_ {
        self.rx.try_iter().inspect(|item| {
            if matches!(item, Item::Sample(_)) {
                self.waiting.fetch_sub(1, Relaxed);
            }
        })
    }

    /// Whether items wait.
    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }

    /// Samples the window missed because it did not read them in time.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Relaxed)
    }
}

/// What a window's recorder does when its recording's writes fail (a full
/// disk): the window's `--on-write-error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFault {
    /// Keep the writer, which retries now and then.
    Retry,
    /// Let the recording go, whole up to the fault and without a footer;
    /// the window's stream goes on.
    Abandon,
}

/// What the recorder makes of a write's result. A write fault (a full
/// disk) is not the end: the writer keeps the file whole, drops what it
/// cannot write and retries; the owner reads the fault from the stats and
/// decides. Anything else (a bad schema change) ends the recorder, or, for
/// a window, is kept for it to say.
fn keep_going(
    out: &mut Fanout,
    r: Result<(), RecordingError>,
    st: &RecorderStats,
    on_fault: Option<OnFault>,
) -> Result<(), RecordingError> {
    match r {
        Err(_) if out.writer.as_ref().is_some_and(|w| w.fault().is_some()) => Ok(()),
        Err(e) if on_fault.is_some() => {
            *st.error
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(e.to_string());
            Ok(())
        }
        other => other,
    }
}

/// The owner's requests; `Some(end)` once it asks to finish.
fn obey(out: &mut Fanout, c: Control) -> Option<String> {
    match c {
        Control::Finish(end) => Some(end),
        Control::Copy(path, reply) => {
            let _ = reply.send(out.start_copy(&path, false));
            None
        }
        Control::FinishCopy(end, reply) => {
            let _ = reply.send(out.finish_copy(&end));
            None
        }
    }
}

/// Tells the owner, through `st`, how the recording's writes and its copy's
/// fare (faults now and ended, samples and bytes written); a window that
/// abandons a faulted recording lets its writer go here.
fn publish_faults(out: &mut Fanout, st: &RecorderStats, on_fault: Option<OnFault>) {
    {
        let mut f = st
            .copy_faults
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match out.copy.as_mut() {
            Some(c) => {
                if let Some(r) = c.take_resumed() {
                    f.ended.push(r);
                }
                f.now = c.fault().cloned();
            }
            None => *f = Faults::default(),
        }
    }
    let resumed = out.fault_news().resumed;
    if let Some(w) = out.writer.as_mut() {
        let now = w.fault().cloned();
        let abandon = now.is_some() && on_fault == Some(OnFault::Abandon);
        let mut f = st
            .faults
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(r) = resumed {
            f.ended.push(r);
        }
        f.now = now;
        st.samples.store(w.samples(), Relaxed);
        st.bytes.store(w.bytes_written(), Relaxed);
        if abandon {
            // Whole up to the fault, no footer; `f.now` keeps saying why.
            out.writer = None;
        }
    }
}

/// What a [`Recorder`]'s owner asks of its thread.
#[derive(Debug)]
enum Control {
    /// Write what is queued and the footer, with this end reason.
    Finish(String),
    /// Start a second recording of the stream at this path (see
    /// [`Fanout::start_copy`]), saying how that went.
    Copy(PathBuf, Sender<Result<(), RecordingError>>),
    /// Finish the second recording, saying what it wrote.
    FinishCopy(String, Sender<Result<Option<WriteSummary>, RecordingError>>),
}

/// Writes every sample of `samples`, and the events sent to it, into a
/// recording until told to finish.
#[derive(Debug)]
pub struct Recorder {
    events: Sender<Event>,
    control: Sender<Control>,
    /// `None`: nothing was being recorded at the end (a window's).
    thread: JoinHandle<Result<Option<RecorderSummary>, RecordingError>>,
    stats: Arc<RecorderStats>,
}

impl Recorder {
    /// Starts the `flatline-recorder` thread, with an event queue of its own.
    pub fn spawn(writer: RecordingWriter, samples: Receiver<Sample>) -> std::io::Result<Self> {
        Self::spawn_with_events(writer, samples, SchemaFeed::default(), event_channel())
    }

    /// Starts the `flatline-recorder` thread, writing the events that arrive
    /// on `events` (see [`event_channel`]) as well as those sent through
    /// [`Recorder::event`], and the stream's schema changes from `changes`.
    pub fn spawn_with_events(
        writer: RecordingWriter,
        samples: Receiver<Sample>,
        changes: SchemaFeed,
        events: (Sender<Event>, Receiver<Event>),
    ) -> std::io::Result<Self> {
        Self::spawn_tapped(writer, samples, changes, events, None)
    }

    /// [`Recorder::spawn_with_events`], passing what it writes on to `tap`
    /// as well.
    pub fn spawn_tapped(
        writer: RecordingWriter,
        samples: Receiver<Sample>,
        changes: SchemaFeed,
        events: (Sender<Event>, Receiver<Event>),
        tap: Option<Tap>,
    ) -> std::io::Result<Self> {
        Self::spawn_inner(Some(writer), samples, changes, events, tap, None)
    }

    /// A watch window's recorder: the same road as a headless watch's
    /// (sampler → recorder → fanout), with the window's copy of every item
    /// as a last way out, read from the returned [`Feed`] (the UI thread
    /// reads a store; it writes no file). `writer` may be `None` (a window
    /// that records nothing). An error of the recording that is not a
    /// write fault does not end it: it is kept in
    /// [`RecorderStats::error`], and the stream goes on.
    pub fn spawn_for_window(
        writer: Option<RecordingWriter>,
        samples: Receiver<Sample>,
        changes: SchemaFeed,
        events: (Sender<Event>, Receiver<Event>),
        tap: Option<Tap>,
        on_fault: OnFault,
    ) -> std::io::Result<(Self, Feed)> {
        let (window, feed) = WindowTap::new();
        let r = Self::spawn_inner(
            writer,
            samples,
            changes,
            events,
            tap,
            Some((window, on_fault)),
        )?;
        Ok((r, feed))
    }

    fn spawn_inner(
        writer: Option<RecordingWriter>,
        samples: Receiver<Sample>,
        changes: SchemaFeed,
        (events, event_rx): (Sender<Event>, Receiver<Event>),
        tap: Option<Tap>,
        window: Option<(WindowTap, OnFault)>,
    ) -> std::io::Result<Self> {
        let (control, control_rx) = crossbeam_channel::bounded::<Control>(4);
        let stats = Arc::new(RecorderStats::default());
        let st = stats.clone();
        let thread = std::thread::Builder::new()
            .name("flatline-recorder".into())
            .spawn(move || {
                mark_observer_thread();
                let cpu0 = flatline_arena::sys::thread_cpu_ns();
                let tick = crossbeam_channel::tick(Duration::from_millis(100));
                let on_fault = window.as_ref().map(|w| w.1);
                let mut sinks: Vec<Box<dyn Sink>> = Vec::new();
                sinks.extend(tap.map(|t| Box::new(t) as Box<dyn Sink>));
                sinks.extend(window.map(|w| Box::new(w.0) as Box<dyn Sink>));
                let mut out = Fanout::new(writer, sinks);
                let mut samples_open = true;
                let keep = |out: &mut Fanout, r| keep_going(out, r, &st, on_fault);
                let publish = |out: &mut Fanout| publish_faults(out, &st, on_fault);
                let end = loop {
                    select! {
                        recv(samples) -> s => match s {
                            Ok(s) => {
                                let mut r = Ok(());
                                for item in changes.items(s) {
                                    if r.is_ok() {
                                        r = out.push(&item);
                                    }
                                }
                                keep(&mut out, r)?;
                            }
                            // The sampler has stopped; wait for the end reason.
                            Err(_) => {
                                samples_open = false;
                                break loop {
                                    match control_rx.recv() {
                                        Ok(c) => if let Some(end) = obey(&mut out, c) { break end },
                                        Err(_) => break "completed".into(),
                                    }
                                };
                            }
                        },
                        recv(event_rx) -> e => if let Ok(e) = e {
                            let r = out.push(&Item::Event(e));
                            keep(&mut out, r)?;
                        },
                        recv(control_rx) -> c => match c {
                            Ok(c) => if let Some(end) = obey(&mut out, c) { break end },
                            Err(_) => break "completed".into(),
                        },
                        recv(tick) -> _ => {
                            let r = out.tick();
                            keep(&mut out, r)?;
                        }
                    }
                    publish(&mut out);
                };
                // Whatever is still queued belongs to the recording.
                if samples_open {
                    for s in samples.try_iter() {
                        let mut r = Ok(());
                        for item in changes.items(s) {
                            if r.is_ok() {
                                r = out.push(&item);
                            }
                        }
                        keep(&mut out, r)?;
                    }
                }
                for e in event_rx.try_iter() {
                    let r = out.push(&Item::Event(e));
                    keep(&mut out, r)?;
                }
                let _ = out.finish_copy(&end);
                let Some(mut writer) = out.writer.take() else {
                    // A window that recorded nothing, or whose recording
                    // was let go at a fault.
                    return Ok(None);
                };
                if writer.fault().is_some() {
                    writer.retry_now();
                }
                let mut faults = st
                    .faults
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone();
                if let Some(r) = writer.take_resumed() {
                    faults.ended.push(r);
                }
                let write = match writer.fault() {
                    // Still failing: the file stays as it was cut, whole up
                    // to the fault, without a footer.
                    Some(_) => writer.kept(),
                    None => match writer.close(&end) {
                        Ok(w) => w,
                        // The footer itself did not fit: the same.
                        Err(_) if writer.fault().is_some() => writer.kept(),
                        Err(e) => return Err(e),
                    },
                };
                faults.now = writer.fault().cloned();
                *st.faults
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = faults.clone();
                st.samples.store(write.samples, Relaxed);
                st.bytes.store(write.bytes, Relaxed);
                let cpu_ns = flatline_arena::sys::thread_cpu_ns().saturating_sub(cpu0);
                Ok(Some(RecorderSummary {
                    write,
                    cpu_ns,
                    faults,
                }))
            })?;
        Ok(Self {
            events,
            control,
            thread,
            stats,
        })
    }

    /// Starts a second recording of this stream at `path` from now on (a
    /// live window's Record button, asked of its workload process). Refuses
    /// an existing file.
    pub fn copy_to(&self, path: &Path) -> Result<(), RecordingError> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.ask(Control::Copy(path.to_owned(), tx))?;
        rx.recv().unwrap_or_else(|_| Err(gone()))
    }

    /// Finishes the second recording with `end` as its reason; `None` if
    /// none was being written.
    pub fn finish_copy(&self, end: &str) -> Result<Option<WriteSummary>, RecordingError> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.ask(Control::FinishCopy(end.to_owned(), tx))?;
        rx.recv().unwrap_or_else(|_| Err(gone()))
    }

    fn ask(&self, c: Control) -> Result<(), RecordingError> {
        self.control.send(c).map_err(|_| gone())
    }

    /// Queues an event; never blocks (a full queue drops it and counts it).
    pub fn event(&self, e: Event) {
        if let Err(TrySendError::Full(_)) = self.events.try_send(e) {
            self.stats.events_dropped.fetch_add(1, Relaxed);
        }
    }

    pub fn stats(&self) -> &RecorderStats {
        &self.stats
    }

    /// The write faults so far (a copy).
    pub fn faults(&self) -> Faults {
        self.stats
            .faults
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The second recording's write faults so far (none when none runs).
    pub fn copy_faults(&self) -> Faults {
        self.stats
            .copy_faults
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Writes what is queued and the footer with `end` as the reason, and
    /// returns what was written. Stop the sampler first, so that every sample
    /// it produced is in the channel.
    pub fn finish(self, end: &str) -> Result<RecorderSummary, RecordingError> {
        self.finish_window(end)?
            .ok_or_else(|| RecordingError::Encode("the recorder had no recording".into()))
    }

    /// [`Recorder::finish`] for a window's recorder: `None` when nothing
    /// was being recorded at the end.
    pub fn finish_window(self, end: &str) -> Result<Option<RecorderSummary>, RecordingError> {
        let _ = self.control.send(Control::Finish(end.to_owned()));
        match self.thread.join() {
            Ok(r) => r,
            Err(_) => Err(RecordingError::Encode(
                "the recorder thread panicked".into(),
            )),
        }
    }

    /// A window's recorder: the newest error of its recording that was not
    /// a write fault, if any.
    pub fn error(&self) -> Option<String> {
        self.stats
            .error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// The error of a request the recorder thread can no longer answer.
fn gone() -> RecordingError {
    RecordingError::Encode("the recorder thread has ended".into())
}
