//! Telemetry: probes read what a process is doing; a sampler thread turns
//! their readings into [`Sample`]s and streams them over a bounded channel.
//!
//! Data flows one way: probe → sampler → channel → consumer. The measured
//! thread is never blocked: the sampler `try_send`s into a bounded
//! `crossbeam-channel`, and a full channel drops the sample and counts it
//! (`telemetry.dropped`). In steady state the sampler thread allocates
//! nothing, and flatline's own threads are counted apart from the process's
//! allocation figures (see [`alloc::mark_observer_thread`]), so `alloc.*`
//! shows the workload, not the instrument.
//!
//! A probe that cannot work on this machine (no NVIDIA driver, no `/proc`, no
//! glibc) is listed once as [`Unavailable`] with its reason; its channels are
//! simply absent from the [`Schema`].

pub mod alloc;
pub mod gpu;
pub mod malloc;
pub mod procfs;
pub mod sampler;
pub mod steplog;
pub mod system;
pub mod work;

use serde::{Deserialize, Serialize};

pub use sampler::{
    Sampler, SamplerConfig, SamplerExit, Target, Telemetry, TelemetryError, start, start_with,
};

/// Most channels one [`Sample`] can carry.
pub const MAX_CHANNELS: usize = 128;

/// What a channel's values measure. Values are stored in base units; the UI
/// chooses how to show them (MiB, µs, …) and says which.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Bytes,
    /// 2^20 bytes: step logs that report memory in "MB" mean MiB.
    Mebibytes,
    /// A number of things (allocations, faults, threads, operations).
    Count,
    Percent,
    Nanoseconds,
    Microseconds,
    Milliseconds,
    Seconds,
    Celsius,
    /// Events per second.
    PerSecond,
    /// A plain number with no unit (a loss, a ratio).
    Number,
}

/// Which family of channels a channel belongs to, for grouping in views.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Group {
    /// Process memory and page tables (`/proc`).
    Memory,
    /// flatline's counting allocator.
    Allocator,
    /// glibc malloc statistics.
    Malloc,
    Gpu,
    /// Progress of the measured workload.
    Workload,
    /// The host as a whole.
    System,
    /// Columns of a training job's own step log.
    StepLog,
    /// flatline's own health: drops, sampling cost.
    Telemetry,
}

/// Name, unit and group of one channel, e.g. `mem.rss` in bytes, group memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelSpec {
    pub name: String,
    pub unit: Unit,
    pub group: Group,
}

impl ChannelSpec {
    pub fn new(name: impl Into<String>, unit: Unit, group: Group) -> Self {
        Self {
            name: name.into(),
            unit,
            group,
        }
    }
}

/// Channels that count training steps: the built-in workloads' own first,
/// then a step log's. The first one a stream has is its step axis.
pub const STEP_CHANNELS: [&str; 2] = ["work.steps", "log.step"];

/// Channels that count training tokens, in the same order.
pub const TOKEN_CHANNELS: [&str; 2] = ["work.tokens", "log.tokens"];

/// The channels of a stream, in the order of a [`Sample`]'s values.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schema {
    pub channels: Vec<ChannelSpec>,
}

impl Schema {
    /// Position of the channel called `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.channels.iter().position(|c| c.name == name)
    }

    /// Position of the first of `names` that this schema has (see [`STEP_CHANNELS`]).
    pub fn index_of_first(&self, names: &[&str]) -> Option<usize> {
        names.iter().find_map(|n| self.index_of(n))
    }

    pub fn len(&self) -> usize {
        self.channels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.channels.is_empty()
    }
}

/// A probe that could not work here, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unavailable {
    pub probe: String,
    pub reason: String,
}

impl Unavailable {
    pub fn new(probe: &str, reason: impl Into<String>) -> Self {
        Self {
            probe: probe.to_owned(),
            reason: reason.into(),
        }
    }
}

/// One reading of every channel of a [`Schema`] at one moment.
///
/// Fixed-size and `Copy`, so sending it through a bounded channel never
/// touches the heap. A value is `NaN` when its channel had no reading at this
/// moment (a slower probe between its readings, a failed read).
#[derive(Clone, Copy)]
pub struct Sample {
    /// Sampler tick, from 0. Ticks whose sample was dropped leave gaps.
    pub seq: u64,
    /// Monotonic time since the sampler started, in nanoseconds.
    pub t_ns: u64,
    len: u16,
    values: [f64; MAX_CHANNELS],
}

impl Sample {
    /// A sample of `len` channels, every value `NaN`. `len` is capped at [`MAX_CHANNELS`].
    pub fn new(seq: u64, t_ns: u64, len: usize) -> Self {
        Self {
            seq,
            t_ns,
            len: len.min(MAX_CHANNELS) as u16,
            values: [f64::NAN; MAX_CHANNELS],
        }
    }

    /// Builds a sample from values (at most [`MAX_CHANNELS`] are kept).
    pub fn from_values(seq: u64, t_ns: u64, values: &[f64]) -> Self {
        let mut s = Self::new(seq, t_ns, values.len());
        let n = s.len as usize;
        s.values[..n].copy_from_slice(&values[..n]);
        s
    }

    /// The values, one per channel of the schema.
    #[inline]
    pub fn values(&self) -> &[f64] {
        &self.values[..self.len as usize]
    }

    #[inline]
    pub fn values_mut(&mut self) -> &mut [f64] {
        &mut self.values[..self.len as usize]
    }

    /// The value of channel `i`, or `None` if it had no reading.
    #[inline]
    pub fn get(&self, i: usize) -> Option<f64> {
        self.values().get(i).copied().filter(|v| !v.is_nan())
    }

    /// Time since the sampler started, in seconds.
    pub fn t_s(&self) -> f64 {
        self.t_ns as f64 / 1e9
    }
}

impl std::fmt::Debug for Sample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sample")
            .field("seq", &self.seq)
            .field("t_ns", &self.t_ns)
            .field("values", &self.values())
            .finish()
    }
}

impl PartialEq for Sample {
    fn eq(&self, other: &Self) -> bool {
        // NaN means "no reading": two missing readings are equal.
        self.seq == other.seq
            && self.t_ns == other.t_ns
            && self.len == other.len
            && self
                .values()
                .iter()
                .zip(other.values())
                .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()))
    }
}

/// Why a probe could not read this time.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The observed process has exited (or is a zombie): nothing more to read.
    #[error("process {pid} has exited")]
    Gone { pid: u32 },
    /// A passing failure; the sampler records `NaN` and carries on.
    #[error("{0}")]
    Failed(String),
}

/// A source of readings for a fixed set of channels.
///
/// `channels` is asked once, when the sampler is built; `read` fills exactly
/// that many values, in that order, each tick. `read` runs on the sampler
/// thread at the sampling rate: it must not block for long, and in steady
/// state it should not allocate.
pub trait Probe: Send {
    /// Short name, used when the probe is listed as unavailable or failing.
    fn name(&self) -> &'static str;
    /// The channels this probe fills.
    fn channels(&self) -> Vec<ChannelSpec>;
    /// Writes one value per channel into `out` (`out.len()` equals the
    /// number of channels); leaves `NaN` where there is no reading.
    fn read(&mut self, out: &mut [f64]) -> Result<(), ProbeError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_carry_their_values_and_mark_gaps() {
        let mut s = Sample::new(3, 1_500_000_000, 4);
        assert_eq!(s.values().len(), 4);
        assert!(s.values().iter().all(|v| v.is_nan()));
        s.values_mut()[1] = 42.0;
        assert_eq!(s.get(1), Some(42.0));
        assert_eq!(s.get(0), None);
        assert_eq!(s.get(9), None);
        assert_eq!(s.t_s(), 1.5);
        let t = Sample::from_values(3, 1_500_000_000, &[f64::NAN, 42.0, f64::NAN, f64::NAN]);
        assert_eq!(s, t);
        let too_many = vec![1.0; MAX_CHANNELS + 5];
        assert_eq!(
            Sample::from_values(0, 0, &too_many).values().len(),
            MAX_CHANNELS
        );
    }

    #[test]
    fn schema_finds_channels_by_name() {
        let schema = Schema {
            channels: vec![
                ChannelSpec::new("mem.rss", Unit::Bytes, Group::Memory),
                ChannelSpec::new("alloc.count", Unit::Count, Group::Allocator),
            ],
        };
        assert_eq!(schema.index_of("alloc.count"), Some(1));
        assert_eq!(schema.index_of("gpu0.used"), None);
        assert_eq!(schema.len(), 2);
    }
}
