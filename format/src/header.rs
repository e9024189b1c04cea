//! What a recording holds besides samples: its header (schema, host,
//! configuration), events, digest marks and footer.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{FORMAT_VERSION, Schema, Unavailable};

/// The NVIDIA driver and GPUs of a host, where NVML works.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuFacts {
    pub driver: String,
    pub devices: Vec<String>,
}

/// What a reviewer needs to know about where a recording came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostFacts {
    pub hostname: String,
    /// e.g. "Linux (Debian GNU/Linux 12)".
    pub os: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cores: u32,
    pub mem_total_bytes: u64,
    /// NVIDIA driver and GPU names, where NVML works.
    #[serde(default)]
    pub gpu: Option<GpuFacts>,
}

impl HostFacts {
    /// The same facts without the machine's name, for recordings that will be
    /// shared.
    pub fn redacted(mut self) -> Self {
        self.hostname = "redacted".into();
        self
    }

    /// One line for captions and receipts.
    pub fn summary(&self) -> String {
        let gpu = match &self.gpu {
            Some(g) if !g.devices.is_empty() => {
                format!(", {} (driver {})", g.devices.join(", "), g.driver)
            }
            _ => String::new(),
        };
        format!(
            "{}: {}, kernel {}, {} × {}, {:.1} GiB{gpu}",
            self.hostname,
            self.os,
            self.kernel,
            self.cores,
            self.cpu_model,
            self.mem_total_bytes as f64 / (1u64 << 30) as f64
        )
    }
}

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
    /// A process joined the watched tree (`role`: `main`, `worker`, `rank`,
    /// `other`).
    ProcessStarted {
        pid: u32,
        ppid: u32,
        name: String,
        role: String,
    },
    /// A process of the watched tree exited (or left it).
    ProcessExited {
        pid: u32,
        name: String,
        role: String,
    },
    /// Anything else worth keeping beside the data.
    Note(String),
    /// How many lines a reader of the job's output or log (`source`:
    /// `output`, `log`) has read so far, and how many said something (a
    /// step, a metric, a marker); the last of a source is its total.
    LinesRead {
        source: String,
        lines: u64,
        parsed: u64,
    },
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
