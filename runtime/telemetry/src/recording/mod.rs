//! Recordings: crash-safe files of samples and events that replay later.
//!
//! The format itself (frames, codec, reader, writer) lives in the
//! `flatline-format` crate and is re-exported here; this module adds what
//! needs the runtime: the host facts of this machine ([`host::collect`]), the
//! [`Recorder`] thread on the consumer side of a telemetry channel, and CSV
//! import and export.

pub mod csv;
pub mod host;
pub mod import;
pub mod labels;
mod recorder;
mod setup;
pub mod synth;

/// How a frame sits in a file, by format version (a tool that damages a
/// copy of one on purpose needs to know).
pub use flatline_format::layout::head_len;
pub use flatline_format::{
    BLOCK_SAMPLES, ChannelsEnded, ColumnBlock, ColumnStats, DigestMark, EXTENSION, Event,
    EventKind, FORMAT_VERSION, Footer, Frame, FrameReader, Gap, Header, HostFacts, Item, Lifetime,
    Loss, MAGIC, MAX_FRAME_BYTES, READABLE_VERSIONS, Recording, RecordingError, RecordingWriter,
    SEEK_EVERY, SampleBlock, SampleIndex, Samples, Scanned, Scanner, SchemaExtension, SeekPoint,
    Slots, TailProblem, TailProblemKind, Thinned, Visit, WRITE_RETRY, WriteFault, WriteSummary,
    scan, with_labels,
};
pub use recorder::{
    EVENT_CAPACITY, FAULT_NOTE, Fanout, FaultNews, Faults, Feed, OnFault, RESUMED_NOTE, Recorder,
    RecorderStats, RecorderSummary, Sink, TAP_CAPACITY, Tap, TapStats, WINDOW_BACKLOG, WindowTap,
    event_channel, is_recording_note,
};
pub use setup::RecordingSetup;

#[cfg(test)]
mod tests;
