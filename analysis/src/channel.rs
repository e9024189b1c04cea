//! What one channel's analysis says: its [`Verdict`], [`Severity`],
//! jumps and notes ([`ChannelAnalysis`]), and the [`Context`] it is read in.

use serde::{Deserialize, Serialize};

use crate::evidence::TrendEvidence;
use flatline_format::Kind;

/// Seconds in a day: the projection's horizon.
pub(crate) const DAY_S: f64 = 86_400.0;

/// What a series looks like. Each kind of channel has its own verdicts:
/// levels `flat`, `staircase`, `linear`, `noisy`; counters (read as rates)
/// `steady`, `rising`, `falling`, `bursty`; gauges `stable`, `drifting_up`,
/// `drifting_down`, `noisy`; peaks `held`, `rose`. Any: `insufficient`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// No trend, and the values stay within 1 % of their level (or within
    /// the channel's evidence floor).
    Flat,
    /// Discrete jumps separated by flat runs: allocator or OS reservations.
    Staircase,
    /// Steady growth (or shrinkage): a leak, if it is memory.
    Linear,
    /// No trend, but varying more than a flat (level) or stable (gauge) series.
    Noisy,
    /// Too few points to say.
    Insufficient,
    /// A counter whose rate holds.
    Steady,
    /// A counter whose rate climbs.
    Rising,
    /// A counter whose rate falls.
    Falling,
    /// A counter that moves in bursts between idle spells.
    Bursty,
    /// A gauge without a trend.
    Stable,
    /// A gauge that trends up (by a % an hour).
    DriftingUp,
    /// A gauge that trends down.
    DriftingDown,
    /// A peak (high-water mark) that did not rise after the start-up.
    Held,
    /// A peak that rose after the start-up.
    Rose,
}

impl Verdict {
    /// Every verdict, once (an exporter's one-hot series list them all).
    pub const ALL: [Verdict; 14] = [
        Verdict::Flat,
        Verdict::Staircase,
        Verdict::Linear,
        Verdict::Noisy,
        Verdict::Insufficient,
        Verdict::Steady,
        Verdict::Rising,
        Verdict::Falling,
        Verdict::Bursty,
        Verdict::Stable,
        Verdict::DriftingUp,
        Verdict::DriftingDown,
        Verdict::Held,
        Verdict::Rose,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Flat => "flat",
            Verdict::Staircase => "staircase",
            Verdict::Linear => "linear",
            Verdict::Noisy => "noisy",
            Verdict::Insufficient => "insufficient",
            Verdict::Steady => "steady",
            Verdict::Rising => "rising",
            Verdict::Falling => "falling",
            Verdict::Bursty => "bursty",
            Verdict::Stable => "stable",
            Verdict::DriftingUp => "drifting up",
            Verdict::DriftingDown => "drifting down",
            Verdict::Held => "held",
            Verdict::Rose => "rose",
        }
    }

    /// A level's growth (or shrinkage) verdict: the only verdicts projected.
    pub fn is_growth(self) -> bool {
        matches!(self, Verdict::Staircase | Verdict::Linear)
    }
}

/// How soon a growing level reaches its limit: `critical` within 24 h,
/// `warning` within 7 days, `info` later or with no limit known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Critical,
    Warning,
    Info,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }

    /// The severity of growth that reaches its limit in `time_to_limit_s`.
    pub fn of(time_to_limit_s: Option<f64>) -> Self {
        match time_to_limit_s {
            Some(s) if s < DAY_S => Severity::Critical,
            Some(s) if s < 7.0 * DAY_S => Severity::Warning,
            _ => Severity::Info,
        }
    }
}

/// One discrete change of level.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Jump {
    /// When it happened, seconds on the series' clock.
    pub t_s: f64,
    /// How far the level moved (negative: down).
    pub size: f64,
}

/// Extra knowledge about a series.
#[derive(Debug, Clone)]
pub struct Context<'a> {
    /// What the channel measures, which decides how it is read.
    pub kind: Kind,
    /// Seconds to skip at the start; `None`: found on this series
    /// ([`find_warmup`]: where start-up ends), 0 if it has none.
    pub warmup_s: Option<f64>,
    /// Training steps done at each point (same length as the series), for drift per step.
    pub steps: Option<&'a [f64]>,
    /// Tokens consumed at each point, for drift per token.
    pub tokens: Option<&'a [f64]>,
    /// A ceiling the value cannot pass (RAM, GPU memory), for the time to reach it.
    pub limit: Option<f64>,
    /// The smallest change that is evidence of growth for this channel (its
    /// measurement's resolution; see [`rules::evidence_floor`]); changes
    /// below it read as flat. 0: the channel has no such resolution, and a
    /// level's growth must pass [`MATERIAL_SHARE`] of its level instead.
    pub min_growth: f64,
}

impl Default for Context<'_> {
    fn default() -> Self {
        Self {
            kind: Kind::Level,
            warmup_s: None,
            steps: None,
            tokens: None,
            limit: None,
            min_growth: 0.0,
        }
    }
}

/// Growth of a level smaller than this share of the level is not material.
pub const MATERIAL_SHARE: f64 = 0.001;

/// A level's growth must hold in the later half of the run: its drift there
/// at least this share of what the run's rate predicts for it.
pub const SUSTAINED_SHARE: f64 = 0.25;

/// The leak rate a run's sensitivity is stated for: 1 MiB an hour for
/// bytes, 0.1 % of the level an hour otherwise.
pub const REFERENCE_LEAK_BYTES_PER_H: f64 = 1_048_576.0;

/// The analysis of one channel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelAnalysis {
    /// How the channel was read (see [`Context::kind`]).
    pub kind: Kind,
    pub verdict: Verdict,
    /// How cleanly the series fits its verdict, 0–1. `staircase`: the share of
    /// the drift the jumps explain, times the share of points that do not
    /// change. `linear`: 1 − scatter / |trend|. `flat`: 1 − spread / (1 % of
    /// level). `noisy`: how far the spread exceeds the flat tolerance, capped.
    pub confidence: f64,
    /// Points analysed (after the start-up, readings only).
    pub points: usize,
    pub warmup_s: f64,
    /// Seconds from the first analysed point to the last.
    pub duration_s: f64,
    /// Levels, gauges, peaks: medians of the first and last windows.
    /// Counters: the rate (per second) at the start and the end.
    pub baseline: f64,
    #[serde(rename = "final")]
    pub final_value: f64,
    pub drift: f64,
    pub drift_per_step: Option<f64>,
    pub drift_per_token: Option<f64>,
    /// The trend per second (counters: of the rate).
    pub slope_per_s: f64,
    pub slope_per_step: Option<f64>,
    /// Robust standard deviation of the step-to-step differences.
    pub noise: f64,
    /// Number of jumps (peaks: rises).
    pub jumps: usize,
    /// The first 1000 jumps.
    pub jump_list: Vec<Jump>,
    pub quantum: Option<f64>,
    /// Longest time without a jump, in seconds.
    pub longest_flat_s: f64,
    /// Levels only: the growth over 24 hours at the projected rate (0 when
    /// flat); `None` for other kinds, which are never projected.
    pub projection_24h: Option<f64>,
    pub limit: Option<f64>,
    /// Seconds until `limit` at the projected rate, if it is being approached.
    pub time_to_limit_s: Option<f64>,
    /// Growing levels: how soon the limit is reached.
    pub severity: Option<Severity>,
    /// Counters: the count per second over the run.
    pub rate_per_s: Option<f64>,
    /// Gauges: the trend in % of the level per hour (counters: of the rate).
    pub pct_per_hour: Option<f64>,
    /// Peaks: when the peak last rose.
    pub last_rise_s: Option<f64>,
    /// Levels: how long a run at this noise must be before a leak of
    /// [`REFERENCE_LEAK_BYTES_PER_H`] (bytes; else 0.1 % of the level an
    /// hour) shows as growth.
    pub detectable_after_s: Option<f64>,
    /// Why a level that moved is not called growth, where it moved.
    pub note: Option<Note>,
    /// Where growth began, for a level that held flat and then grew (a late
    /// leak), on the same clock as `t_s`. Its slope and projection are those
    /// of the growth since then, which the whole run's line misses.
    pub onset_s: Option<f64>,
    /// A level that rose and then held ([`Self::rose_and_held`]): when its
    /// rise began and ended (where it passed 5 % and 95 % of it), on the
    /// same clock as `t_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rise_s: Option<[f64; 2]>,
    /// Levels: the trend test behind the verdict (see [`evidence`]): how
    /// many readings over what span, how far beyond the noise, and the
    /// smallest growth rate this run could have detected.
    pub evidence: Option<TrendEvidence>,
}

impl ChannelAnalysis {
    /// Whether its readings show a rise, upwards: growth to the end (a
    /// growth verdict), or growth beyond the noise that then held
    /// ([`Note::NotSustained`]: not a leak, but memory the run gained and
    /// kept, such as pages workers copied in a first epoch).
    pub fn rose(&self) -> bool {
        let grows = self.verdict.is_growth() && self.slope_per_s > 0.0;
        let held = self.note == Some(Note::NotSustained)
            && self.drift > 0.0
            && self
                .evidence
                .as_ref()
                .is_some_and(TrendEvidence::significant);
        grows || held
    }

    /// A rise that then held (see [`Self::rose`]), not growth at the end.
    pub fn rose_and_held(&self) -> bool {
        self.rose() && !self.verdict.is_growth()
    }
}

/// Why a level that moved is still not growth.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "why")]
pub enum Note {
    /// It moved, but by less than a level must to be more than flat: the
    /// larger of 1 % of its level and the evidence growth needs (its
    /// resolution floor, or [`MATERIAL_SHARE`] of its level): "flat within
    /// 12 KiB".
    Within { band: f64 },
    /// It moved in the first half of the run, then held: start-up the
    /// start-up did not catch, or a level that stepped once.
    NotSustained,
    /// A PSS that rose while the same process's (or tree's) private memory,
    /// its USS, did not: pages it shares were left to fewer processes (a
    /// sharer exited), which moves PSS without a byte allocated.
    SharedPages,
    /// A tree's sum (`tree.uss`) whose trend rose by less than a flat
    /// level's band while none of the processes it sums grows: their own
    /// small rises, each of which held, added together at their own times
    /// ([`super::sum_of_parts`]).
    PartsFlat,
    /// The job ended during its start-up: it grew from its launch to its
    /// end without settling, in less time than a start-up can take, so its
    /// growth cannot be told from a start-up ([`in_start_up`]).
    StartUp,
    /// Growth found soon after a start-up ([`settling`]) that is still
    /// small beside what the start-up rose (`rise`): a start-up's tail (an
    /// allocator settling, a last import, a cache filling) cannot yet be
    /// told from a leak.
    Settling { rise: f64 },
}
