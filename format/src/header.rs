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

    /// True when nothing about the machine was recorded (a recording made
    /// from a log file, not by watching a machine).
    pub fn is_unknown(&self) -> bool {
        *self == Self::default()
    }

    /// One line for captions and receipts; what is unknown is left out
    /// rather than shown as empty punctuation (`host : , kernel , 0 ×`).
    pub fn summary(&self) -> String {
        if self.is_unknown() {
            return "not recorded".into();
        }
        let mut parts = Vec::new();
        if !self.os.is_empty() {
            parts.push(self.os.clone());
        }
        if !self.kernel.is_empty() {
            parts.push(format!("kernel {}", self.kernel));
        }
        match (self.cores, self.cpu_model.is_empty()) {
            (0, true) => {}
            (0, false) => parts.push(self.cpu_model.clone()),
            (n, true) => parts.push(format!("{n} cores")),
            (n, false) => parts.push(format!("{n} × {}", self.cpu_model)),
        }
        if self.mem_total_bytes > 0 {
            parts.push(format!(
                "{:.1} GiB",
                self.mem_total_bytes as f64 / (1u64 << 30) as f64
            ));
        }
        if let Some(g) = &self.gpu
            && !g.devices.is_empty()
        {
            parts.push(format!("{} (driver {})", g.devices.join(", "), g.driver));
        }
        let name = if self.hostname.is_empty() {
            "unnamed host"
        } else {
            &self.hostname
        };
        if parts.is_empty() {
            name.to_owned()
        } else {
            format!("{name}: {}", parts.join(", "))
        }
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
    /// Where the run sits in a job of many ranks and nodes (`rank`,
    /// `local_rank`, `world_size`, `node_rank`, `slurm_job_id`, … from the
    /// watched process's environment, and `--label KEY=VALUE`). Older files
    /// have none; older readers skip it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

impl Header {
    /// The host line of captions and receipts (after "host "): its facts, or, for a
    /// recording imported from a log, why there are none.
    pub fn host_line(&self) -> String {
        if self.host.is_unknown() && self.source == "import" {
            let what = match self.config.get("format").map(String::as_str) {
                Some(f) if f.ends_with(".json") => f.to_owned(),
                Some(f) if f.ends_with(" log") => format!("a {f}"),
                Some(f) => format!("a {f} log"),
                None if self.config.contains_key("csv") => "a CSV log".to_owned(),
                None => "a log".to_owned(),
            };
            return format!("not recorded: imported from {what}");
        }
        self.host.summary()
    }

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
            labels: BTreeMap::new(),
        }
    }

    /// The caption's host part: [`Self::host_line`], then the labels.
    pub fn caption_host(&self) -> String {
        with_labels(self.host_line(), &self.labels)
    }

    /// The labels as one line (see [`labels_line`]).
    pub fn labels_line(&self) -> String {
        labels_line(&self.labels)
    }
}

/// A caption's host part followed by the labels, where there are any.
pub fn with_labels(host: String, labels: &BTreeMap<String, String>) -> String {
    if labels.is_empty() {
        host
    } else {
        format!("{host} · {}", labels_line(labels))
    }
}

/// Labels as one line, `rank=3 world_size=16`; empty without any.
pub fn labels_line(labels: &BTreeMap<String, String>) -> String {
    let parts: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    parts.join(" ")
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
    /// Something read from outside the samples that the analysis weighs
    /// (format v4): a process's exit status, a line of the kernel's log, an
    /// out-of-memory error the job printed. `kind` names it (the kinds
    /// are listed in docs/recordings.md); `text` says it in words, or
    /// quotes the line it came from; `figures` holds its numbers in base
    /// units (bytes, a signal's number, an exit code). A reader that does
    /// not know a kind keeps it as text: new kinds need no new format.
    Fact {
        kind: String,
        pid: Option<u32>,
        text: String,
        figures: BTreeMap<String, f64>,
    },
}

impl EventKind {
    /// A [`EventKind::Fact`] without a pid.
    pub fn fact(kind: &str, text: impl Into<String>, figures: &[(&str, f64)]) -> Self {
        EventKind::Fact {
            kind: kind.into(),
            pid: None,
            text: text.into(),
            figures: figures.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
        }
    }

    /// The same fact, about process `pid`.
    pub fn of_pid(mut self, p: u32) -> Self {
        if let EventKind::Fact { pid, .. } = &mut self {
            *pid = Some(p);
        }
        self
    }
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
