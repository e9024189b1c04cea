//! What a probe is ([`Probe`], [`ProbeError`]), the sampler's [`Clock`], and
//! the largest step a channel carries.

use crate::dynamic::DynamicChannels;
use flatline_format::ChannelSpec;

pub use flatline_catalog::MAX_STEP;

/// The one clock of a telemetry stream: every sample's `t_ns` and every
/// event's (a step read from a log, a phase, a marker) count nanoseconds from
/// the same start, so events line up with the samples around them. Cheap to
/// copy into any thread that stamps events.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    pub(crate) start: std::time::Instant,
}

impl Clock {
    /// A clock whose zero is now.
    pub fn start() -> Self {
        Self {
            start: std::time::Instant::now(),
        }
    }

    /// Nanoseconds since the clock's zero.
    pub fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The instant of its zero.
    pub fn zero(&self) -> std::time::Instant {
        self.start
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
    /// True for a probe that adds and ends channels of its own while it runs
    /// (a process tree's per-process channels). Such a probe runs on the
    /// slow-probe thread, and after each `read` gets [`Probe::dynamic`].
    fn grows(&self) -> bool {
        false
    }
    /// Adds, ends and sets the probe's own channels; called on the slow-probe
    /// thread right after `read`, under a lock the sampler thread only ever
    /// tries, so do the slow work in `read` and only apply it here.
    fn dynamic(&mut self, _channels: &mut DynamicChannels<'_>) {}
}
