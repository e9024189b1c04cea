//! Drift analysis: is this slow climb flat, a staircase, a leak, or noise?
//!
//! One function, [`analyze`], answers it for one channel's series, the same
//! way every time, and shows its working ([`ChannelAnalysis`]). `report` runs
//! it over a whole recording; the dashboard keeps a bounded [`Tracker`] per
//! channel and runs the same function over it once a second.
//!
//! Each channel is read as its [`Kind`] says: a **level** (memory in use)
//! by the method below; a **counter** as its rate over windows of equal time
//! (`steady`, `rising`, `falling`, `bursty`); a **gauge** by its trend
//! (`stable`, `drifting up/down` by % of its level an hour, `noisy`); a
//! **peak** by its rises (`held`, `rose`). Only levels are projected.
//!
//! A level's method, after a start-up (given, or found where start-up ends:
//! [`find_warmup`]):
//!
//! * **baseline** and **final**: medians of the first and last 5 % of the
//!   points (at least 5); **drift** = final − baseline.
//! * **slope**: Theil–Sen (median of pairwise slopes) over at most 400
//!   evenly spaced points: single jumps and outliers barely move it.
//! * **noise**: 1.4826 × the median absolute deviation of the step-to-step
//!   differences, i.e. the standard deviation of the differences that robust
//!   statistics would estimate.
//! * **jumps**: differences larger than 6 × noise (or any change at all in a
//!   noiseless series), neighbours in the same direction merged, that hold
//!   (no other large change in the next three steps: else it is a spike or
//!   a flicker) and are not the way back from a spike; a run of more than
//!   three such changes in a row is a ramp, not a jump. The **quantum** is
//!   the largest unit (the smallest jump, or a whole fraction of it down to
//!   1/8) of which every jump is a whole multiple within 10 %, then refined
//!   as the total of the jumps over the total of their units.
//! * **evidence**: growth counts only above the channel's resolution
//!   ([`rules::evidence_floor`]: 16 pages for paged memory) or, where it has
//!   none, above [`MATERIAL_SHARE`] of its level.
//! * **verdict**: `staircase` when there are jumps, they are sparse (at most
//!   20 % of the points change), they mostly go one way, the drift's way,
//!   and they explain at least half of the drift (jumps inside the first
//!   and final 5 % windows are listed but do not decide: the baseline and
//!   final medians already stand on one side of them; a start-up's last
//!   reading can fall just after the start-up, and a process that exits
//!   frees its memory at the end); else `linear` when the trend over the run (slope ×
//!   duration) is larger than three times the robust scatter around the
//!   fitted line; else `flat` when the middle 90 % of the values spans at
//!   most 1 % of their level (or the evidence); else `noisy`. Growth must
//!   also be **sustained** ([`SUSTAINED_SHARE`]; a staircase by its own
//!   deciding jumps in the later half): else the verdict is that of the
//!   later half, with [`Note::NotSustained`]. A level the run's line
//!   calls `noisy` is searched for a **late onset**: the last half, 40 %,
//!   30 % or 20 % of the run (the longest first) that is itself linear
//!   growth, sustained, above the evidence; found, the verdict is `linear`
//!   from there (`onset_s`), at the slope since then. Fewer than 8 points:
//!   `insufficient`.
//! * **confidence** (0–1) says how cleanly the series fits its verdict; it is
//!   a heuristic, documented on [`ChannelAnalysis::confidence`].
//! * **projection**: the growth rate (the slope for `linear`, the average
//!   rate drift / time for `staircase`, 0 otherwise) over 24 hours, the time
//!   until a known limit at that rate, and a [`Severity`] from it. A
//!   staircase is growth too: it is projected, not explained away.

pub mod answer;
mod channel;
pub mod compare;
pub mod death;
pub mod evidence;
pub mod finding;
pub mod fleet;
mod level;
mod live;
pub mod places;
pub mod reading;
pub mod rules;
pub mod run;
pub mod sites;
mod start_up;
mod stats;
pub mod summary;
mod tracker;
pub mod tree;
mod warmup;

pub use channel::{
    ChannelAnalysis, Context, Jump, MATERIAL_SHARE, Note, REFERENCE_LEAK_BYTES_PER_H,
    SUSTAINED_SHARE, Severity, Verdict,
};
pub use evidence::TrendEvidence;
pub use flatline_format::Kind;
pub use level::{CERTAIN_Z, analyze};
pub use live::LiveAnalysis;
pub use start_up::{
    SETTLE_SHARE, START_UP_ONLY_S, bound_copy, exit_in_start_up, in_start_up, parts_of,
    reconcile_pss, rss_of, settling, settling_for_s, start_up_rise, sum_of_parts, uss_of,
};
pub use tracker::Tracker;
pub use warmup::{Warmup, find_warmup, recording_warmup};

#[cfg(test)]
mod tests;
