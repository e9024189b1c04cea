//! [`Recorder`]: the consumer end of a telemetry stream, writing a recording
//! on its own observer thread.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TrySendError, select};

use super::{Event, RecordingError, RecordingWriter, WriteSummary};
use crate::telemetry::alloc::mark_observer_thread;
use crate::telemetry::{ChannelSpec, Sample, SchemaChange, SchemaFeed};

/// Live figures of a running recorder.
#[derive(Debug, Default)]
pub struct RecorderStats {
    pub samples: AtomicU64,
    pub bytes: AtomicU64,
    /// Events refused because the event queue was full.
    pub events_dropped: AtomicU64,
}

/// What a finished recorder wrote, and what writing cost.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RecorderSummary {
    #[serde(flatten)]
    pub write: WriteSummary,
    /// CPU time the recorder thread used, in nanoseconds (0 where unknown).
    pub cpu_ns: u64,
}

/// Most events waiting for the recorder; a full queue drops and counts.
pub const EVENT_CAPACITY: usize = 4096;

/// The queue of events on their way to a [`Recorder`]. Made before the
/// recorder, so producers that start first (a step log read on the sampler
/// thread) can hold a sender and reach the recording directly.
pub fn event_channel() -> (Sender<Event>, Receiver<Event>) {
    crossbeam_channel::bounded(EVENT_CAPACITY)
}

/// Applies one schema change of a live stream to the file being written.
pub fn apply_change(
    writer: &mut RecordingWriter,
    change: SchemaChange,
) -> Result<(), RecordingError> {
    match change {
        SchemaChange::Add(specs) => writer.add_channels(&specs),
        SchemaChange::End(positions) => writer.end_channels(&positions),
    }
}

/// Writes a sample of a live stream after the schema changes that come
/// before it, passing each change and the sample on to `tap`.
fn push_tapped(
    writer: &mut RecordingWriter,
    changes: &SchemaFeed,
    s: &Sample,
    tap: Option<&Tap>,
) -> Result<(), RecordingError> {
    let mut changed = Ok(());
    changes.take_until(s.seq, |c| {
        if let Some(tap) = tap {
            tap.change(&c);
        }
        if changed.is_ok() {
            changed = apply_change(writer, c);
        }
    });
    changed?;
    if let Some(tap) = tap {
        tap.send(Tapped::Sample(*s));
    }
    writer.push_sample(s)
}

/// What a [`Tap`] passes on: the stream as it is written, in order.
// Samples are nearly every item, so a queue slot is a sample's size either
// way; boxing them would allocate once a sample instead.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Tapped {
    /// Channels that join the stream (their positions follow the others').
    Add(Vec<ChannelSpec>),
    /// Channels that end, by position.
    End(Vec<usize>),
    Sample(Sample),
    Event(Event),
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
    tx: Sender<Tapped>,
    stats: Arc<TapStats>,
}

/// What a tap lost.
#[derive(Debug, Default)]
pub struct TapStats {
    pub dropped: AtomicU64,
    pub broken: std::sync::atomic::AtomicBool,
}

impl Tap {
    /// A tap, the end its reader takes items from, and its figures.
    pub fn new() -> (Self, Receiver<Tapped>, Arc<TapStats>) {
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
    pub fn send(&self, item: Tapped) {
        if self.stats.broken.load(Relaxed) {
            return;
        }
        let schema = matches!(item, Tapped::Add(_) | Tapped::End(_));
        if self.tx.try_send(item).is_err() {
            self.stats.dropped.fetch_add(1, Relaxed);
            if schema {
                self.stats.broken.store(true, Relaxed);
            }
        }
    }

    /// Passes a schema change on.
    pub fn change(&self, c: &SchemaChange) {
        self.send(match c {
            SchemaChange::Add(specs) => Tapped::Add(specs.clone()),
            SchemaChange::End(positions) => Tapped::End(positions.clone()),
        });
    }
}

/// Writes every sample of `samples`, and the events sent to it, into a
/// recording until told to finish.
#[derive(Debug)]
pub struct Recorder {
    events: Sender<Event>,
    control: Sender<String>,
    thread: JoinHandle<Result<RecorderSummary, RecordingError>>,
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
        mut writer: RecordingWriter,
        samples: Receiver<Sample>,
        changes: SchemaFeed,
        (events, event_rx): (Sender<Event>, Receiver<Event>),
        tap: Option<Tap>,
    ) -> std::io::Result<Self> {
        let (control, control_rx) = crossbeam_channel::bounded::<String>(1);
        let stats = Arc::new(RecorderStats::default());
        let st = stats.clone();
        let thread = std::thread::Builder::new()
            .name("flatline-recorder".into())
            .spawn(move || {
                mark_observer_thread();
                let cpu0 = crate::sys::thread_cpu_ns();
                let tick = crossbeam_channel::tick(Duration::from_millis(100));
                let mut samples_open = true;
                let end = loop {
                    select! {
                        recv(samples) -> s => match s {
                            Ok(s) => push_tapped(&mut writer, &changes, &s, tap.as_ref())?,
                            // The sampler has stopped; wait for the end reason.
                            Err(_) => { samples_open = false; break control_rx.recv().unwrap_or_else(|_| "completed".into()); }
                        },
                        recv(event_rx) -> e => if let Ok(e) = e {
                            if let Some(tap) = &tap {
                                tap.send(Tapped::Event(e.clone()));
                            }
                            writer.push_event(e)?;
                        },
                        recv(control_rx) -> end => break end.unwrap_or_else(|_| "completed".into()),
                        recv(tick) -> _ => writer.tick()?,
                    }
                    st.samples.store(writer.samples(), Relaxed);
                    st.bytes.store(writer.bytes_written(), Relaxed);
                };
                // Whatever is still queued belongs to the recording.
                if samples_open {
                    for s in samples.try_iter() {
                        push_tapped(&mut writer, &changes, &s, tap.as_ref())?;
                    }
                }
                for e in event_rx.try_iter() {
                    writer.push_event(e)?;
                }
                let write = writer.finish(&end)?;
                st.samples.store(write.samples, Relaxed);
                st.bytes.store(write.bytes, Relaxed);
                let cpu_ns = crate::sys::thread_cpu_ns().saturating_sub(cpu0);
                Ok(RecorderSummary { write, cpu_ns })
            })?;
        Ok(Self {
            events,
            control,
            thread,
            stats,
        })
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

    /// Writes what is queued and the footer with `end` as the reason, and
    /// returns what was written. Stop the sampler first, so that every sample
    /// it produced is in the channel.
    pub fn finish(self, end: &str) -> Result<RecorderSummary, RecordingError> {
        let _ = self.control.send(end.to_owned());
        match self.thread.join() {
            Ok(r) => r,
            Err(_) => Err(RecordingError::Encode(
                "the recorder thread panicked".into(),
            )),
        }
    }
}
