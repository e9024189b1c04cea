//! What a fleet is made of: its members, each channel's summary across
//! them, and the outliers (plain data, which the window draws too).

use std::collections::BTreeMap;
use std::path::PathBuf;

use flatline_telemetry::Unit;

/// One recording of the fleet, as far as the comparison needs it.
#[derive(Debug, Clone)]
pub struct Member {
    pub file: PathBuf,
    pub labels: BTreeMap<String, String>,
    pub host: String,
    pub duration_s: f64,
    /// "7,155 steps", where the recording has a step axis.
    pub training: Option<String>,
    pub headline: String,
    /// Whether its headline tells how the job ended (a process killed by
    /// the OOM killer, an out-of-memory error it ended with).
    pub ended_badly: bool,
    pub truncated: bool,
    /// Why it could not be read; then it has no channels.
    pub error: Option<String>,
    pub channels: BTreeMap<String, Rate>,
    /// The recording's digest (sha256 of its samples).
    pub digest: String,
    /// Where its start-up ended (seconds), as its analysis found it.
    pub warmup_s: f64,
    /// Each compared channel's readings, thinned to at most
    /// [`SERIES_POINTS`] (seconds since its start, value): the window's
    /// small multiples.
    pub series: BTreeMap<String, Vec<[f64; 2]>>,
}

impl Member {
    /// How a person names it: `rank 5`, else its file's name.
    pub fn name(&self) -> String {
        match self.labels.get("rank") {
            Some(r) => format!("rank {r}"),
            None => self.file.file_name().map_or_else(
                || self.file.display().to_string(),
                |n| n.to_string_lossy().into(),
            ),
        }
    }

    /// Its own headline, or why it could not be read.
    pub fn said(&self) -> String {
        match &self.error {
            Some(e) => format!("cannot be read: {e}"),
            None => self.headline.clone(),
        }
    }

    pub(super) fn sort_key(&self) -> (u64, String) {
        let rank = self.labels.get("rank").and_then(|r| r.parse().ok());
        (rank.unwrap_or(u64::MAX), self.file.display().to_string())
    }
}

/// A level channel's growth in one recording.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub unit: Unit,
    pub slope_per_s: f64,
    pub slope_per_step: Option<f64>,
    /// Its own analysis calls it growth (upwards).
    pub grows: bool,
}

/// A channel across the fleet.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelSummary {
    pub unit: Unit,
    /// Members (indices) that have it.
    pub members: Vec<usize>,
    /// Members whose own analysis calls it growth.
    pub growing: Vec<usize>,
    /// Rates per step (else per second) of the members that have it.
    pub per_step: bool,
    pub median: f64,
    pub mad: f64,
}

/// A member whose channel grows when most do not.
#[derive(Debug, Clone, PartialEq)]
pub struct Outlier {
    pub member: usize,
    pub channel: String,
    /// Its rate (per step or per second, as the channel's summary says).
    pub rate: f64,
    /// Its rate per second, whatever the basis (for saying it per hour).
    pub rate_per_s: f64,
    /// How far above the median, in MADs.
    pub mads: f64,
}

/// The whole comparison.
#[derive(Debug, Clone)]
pub struct Fleet {
    pub members: Vec<Member>,
    pub channels: BTreeMap<String, ChannelSummary>,
    pub outliers: Vec<Outlier>,
    pub headline: String,
}
