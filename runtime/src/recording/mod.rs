//! Recordings: crash-safe files of samples and events that replay later.
//!
//! # File format, version 1
//!
//! ```text
//! magic    8 bytes  "FLATLINE"
//! version  4 bytes  u32 little-endian (1)
//! frames   each:    length u32 LE | CRC-32 of the payload u32 LE | payload
//! ```
//!
//! Every payload is one MessagePack [`Frame`] (rmp-serde, structs as maps so
//! later versions can add fields). The first frame is the [`Header`]: channel
//! schema, host facts, the run's configuration and command line, the tool
//! version and the wall-clock start. Then, in time order: sample blocks (each
//! at most half a second of samples, flushed to the OS when written), events,
//! and every minute a digest mark. A run that ends cleanly writes a
//! [`Footer`] last.
//!
//! The digest is SHA-256 over the payloads of every frame before the footer,
//! in order: it names exactly the recording a receipt or screenshot came
//! from. The footer carries it, and a reader recomputes it.
//!
//! A reader returns every complete frame and, if the tail went bad, where and
//! how: `truncated` (the file ends inside a frame, or without a footer) or
//! `damaged` (bad checksum, a frame over [`MAX_FRAME_BYTES`], a payload that
//! does not decode). Bad magic or an unknown version is an error naming both.
//!
//! Sample values are delta-coded per channel within a block: a whole number
//! (|v| ≤ 2^53) after a whole number is stored as the integer difference,
//! anything else as itself, `NaN` as nil. Flat series cost about one byte per
//! value, and every value reads back bit for bit (except that −0 reads as 0).

mod codec;
pub mod csv;
pub mod host;
mod reader;
mod recorder;
mod writer;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use codec::{Frame, SampleBlock};
pub use host::HostFacts;
pub use reader::{FrameReader, Recording, TailProblem, TailProblemKind};
pub use recorder::{Recorder, RecorderStats, RecorderSummary};
pub use writer::{RecordingWriter, WriteSummary};

use crate::telemetry::{Schema, Unavailable};

/// The first 8 bytes of every recording.
pub const MAGIC: [u8; 8] = *b"FLATLINE";
/// The format version this build writes.
pub const FORMAT_VERSION: u32 = 1;
/// Versions this build reads.
pub const READABLE_VERSIONS: &[u32] = &[1];
/// A frame longer than this is damage, never an allocation.
pub const MAX_FRAME_BYTES: u32 = 16 << 20;
/// File name extension of recordings.
pub const EXTENSION: &str = "flr";

/// Everything about a recording that is known when it starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub format_version: u32,
    pub tool_version: String,
    /// Wall-clock start, milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// What made it: `soak`, `live`, `watch`, `import`, `bench`.
    pub source: String,
    pub command_line: Vec<String>,
    /// The run's configuration, as `key = value` text.
    pub config: BTreeMap<String, String>,
    pub host: HostFacts,
    pub schema: Schema,
    /// Probes that could not work, with their reasons.
    pub unavailable: Vec<Unavailable>,
    /// Free-form notes (an import's skipped columns, say).
    #[serde(default)]
    pub notes: Vec<String>,
}

impl Header {
    /// A header for a recording that starts now, made by this process: this
    /// format version and tool version, the wall clock, the command line.
    pub fn new(
        source: &str,
        schema: Schema,
        host: HostFacts,
        config: BTreeMap<String, String>,
        unavailable: Vec<Unavailable>,
    ) -> Self {
        Self {
            format_version: FORMAT_VERSION,
            tool_version: env!("CARGO_PKG_VERSION").into(),
            started_unix_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            source: source.into(),
            command_line: std::env::args().collect(),
            config,
            host,
            schema,
            unavailable,
            notes: Vec::new(),
        }
    }
}

/// Something that happened at a moment of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Time since the recording started, in nanoseconds.
    pub t_ns: u64,
    pub kind: EventKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// The run entered a phase (`warmup`, `ops1b`, `ingest`, `idle`…).
    Phase(String),
    /// A user's marker.
    Marker(String),
    /// A training step ended; `tokens` counts all tokens so far.
    Step { step: u64, tokens: Option<u64> },
    /// The watched process exited.
    TargetExited { pid: u32 },
    /// Anything else worth keeping beside the data.
    Note(String),
}

/// Written last by a run that ends cleanly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Footer {
    /// Frames before the footer.
    pub frames: u64,
    pub samples: u64,
    pub events: u64,
    /// SHA-256 (hex) over the payloads of every frame before the footer.
    pub digest: String,
    /// Time of the last sample, in nanoseconds since the start.
    pub duration_ns: u64,
    /// Why the run ended: `completed`, `interrupted`, `target exited`…
    pub end: String,
}

/// A running digest, written every minute so a cut-off file still carries
/// recent proof of what it held.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DigestMark {
    pub frames: u64,
    pub digest: String,
}

/// What can go wrong with a recording as a whole.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a flatline recording (starts with {found:02x?}, expected \"FLATLINE\")")]
    BadMagic { path: PathBuf, found: Vec<u8> },
    #[error(
        "{path}: recording format version {found} is not supported by this flatline (reads {supported:?})"
    )]
    UnsupportedVersion {
        path: PathBuf,
        found: u32,
        supported: &'static [u32],
    },
    #[error("{path}: the header is unreadable: {reason}")]
    BadHeader { path: PathBuf, reason: String },
    #[error("{path} already exists (pass --force to overwrite it)")]
    Exists { path: PathBuf },
    #[error("cannot create {path}: the folder {} does not exist", dir.display())]
    MissingFolder { path: PathBuf, dir: PathBuf },
    #[error("a sample has {got} values but the schema has {expected} channels")]
    SchemaMismatch { expected: usize, got: usize },
    #[error("cannot encode a frame: {0}")]
    Encode(String),
}

#[cfg(test)]
mod tests;
