//! Drift analysis: is this slow climb flat, a staircase, a leak, or noise?
//!
//! One function, [`analyze`], answers it for one channel's series, the same
//! way every time, and shows its working ([`ChannelAnalysis`]). `report` runs
//! it over a whole recording; the dashboard keeps a bounded [`Tracker`] per
//! channel and runs the same function over it once a second.
//!
//! The method, after a warm-up (default: the first 10 % of the run):
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
//!   a flicker); a run of more than three such changes in a row is a ramp,
//!   not a jump. The
//!   **quantum** is the largest unit (the smallest jump, or a whole fraction
//!   of it down to 1/8) of which every jump is a whole multiple within 10 %,
//!   then refined as the total of the jumps over the total of their units.
//! * **verdict**:
//!   `staircase` when there are jumps, they are sparse (at most 20 % of
//!   the points change), they mostly go one way and they explain at least
//!   half of the drift (jumps inside the final 5 % window are listed but do
//!   not decide: a process that exits frees its memory there); else `linear` when the trend over the run (slope ×
//!   duration) is larger than three times the robust scatter around the
//!   fitted line; else `flat` when the middle 90 % of the values spans at most 1 % of
//!   their level; else `noisy`. Fewer than 8 points: `insufficient`.
//! * **confidence** (0–1) says how cleanly the series fits its verdict; it is
//!   a heuristic, documented on [`ChannelAnalysis::confidence`].
//! * **projection**: the growth rate (the slope for `linear`, the average
//!   rate drift / time for `staircase`, the slope otherwise) over 24 hours,
//!   and the time until a known limit (RAM, GPU memory) at that rate. A
//!   staircase is growth too: it is projected, not explained away.

pub mod rules;
mod tracker;
pub mod tree;

use serde::{Deserialize, Serialize};

pub use tracker::Tracker;

/// What a series looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// No trend, and the values stay within 1 % of their level.
    Flat,
    /// Discrete jumps separated by flat runs: allocator or OS reservations.
    Staircase,
    /// Steady growth (or shrinkage): a leak, if it is memory.
    Linear,
    /// No trend, but varying more than a flat series.
    Noisy,
    /// Too few points to say.
    Insufficient,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Flat => "flat",
            Verdict::Staircase => "staircase",
            Verdict::Linear => "linear",
            Verdict::Noisy => "noisy",
            Verdict::Insufficient => "insufficient",
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
#[derive(Debug, Clone, Default)]
pub struct Context<'a> {
    /// Seconds to skip at the start; `None`: the first 10 % of the run.
    pub warmup_s: Option<f64>,
    /// Training steps done at each point (same length as the series), for drift per step.
    pub steps: Option<&'a [f64]>,
    /// Tokens consumed at each point, for drift per token.
    pub tokens: Option<&'a [f64]>,
    /// A ceiling the value cannot pass (RAM, GPU memory), for the time to reach it.
    pub limit: Option<f64>,
    /// The smallest change that is evidence of growth for this channel (its
    /// measurement's resolution; see [`rules::evidence_floor`]); changes
    /// below it read as flat. 0: any change counts.
    pub min_growth: f64,
}

/// The analysis of one channel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelAnalysis {
    pub verdict: Verdict,
    /// How cleanly the series fits its verdict, 0–1. `staircase`: the share of
    /// the drift the jumps explain, times the share of points that do not
    /// change. `linear`: 1 − scatter / |trend|. `flat`: 1 − spread / (1 % of
    /// level). `noisy`: how far the spread exceeds the flat tolerance, capped.
    pub confidence: f64,
    /// Points analysed (after the warm-up, readings only).
    pub points: usize,
    pub warmup_s: f64,
    /// Seconds from the first analysed point to the last.
    pub duration_s: f64,
    pub baseline: f64,
    #[serde(rename = "final")]
    pub final_value: f64,
    pub drift: f64,
    pub drift_per_step: Option<f64>,
    pub drift_per_token: Option<f64>,
    pub slope_per_s: f64,
    pub slope_per_step: Option<f64>,
    /// Robust standard deviation of the step-to-step differences.
    pub noise: f64,
    /// Number of jumps.
    pub jumps: usize,
    /// The first 1000 jumps.
    pub jump_list: Vec<Jump>,
    pub quantum: Option<f64>,
    /// Longest time without a jump, in seconds.
    pub longest_flat_s: f64,
    /// The growth over 24 hours at the projected rate.
    pub projection_24h: f64,
    pub limit: Option<f64>,
    /// Seconds until `limit` at the projected rate, if it is being approached.
    pub time_to_limit_s: Option<f64>,
}

const MAX_THEIL_SEN_POINTS: usize = 400;
const MAX_JUMP_LIST: usize = 1000;
const DAY_S: f64 = 86_400.0;

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mid = v.len() / 2;
    let (_, m, _) = v.select_nth_unstable_by(mid, f64::total_cmp);
    let m = *m;
    if v.len() % 2 == 1 {
        m
    } else {
        let lo = v[..mid].iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lo + m) / 2.0
    }
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let k = ((v.len() - 1) as f64 * q).round() as usize;
    *v.select_nth_unstable_by(k, f64::total_cmp).1
}

/// Theil–Sen slope of (t, v) over at most [`MAX_THEIL_SEN_POINTS`] evenly spaced points.
fn theil_sen(t: &[f64], v: &[f64]) -> f64 {
    let n = t.len();
    if n < 2 {
        return 0.0;
    }
    let step = n.div_ceil(MAX_THEIL_SEN_POINTS);
    let idx: Vec<usize> = (0..n).step_by(step).collect();
    let mut slopes = Vec::with_capacity(idx.len() * (idx.len() - 1) / 2);
    for (a, &i) in idx.iter().enumerate() {
        for &j in &idx[a + 1..] {
            let dt = t[j] - t[i];
            if dt > 0.0 {
                slopes.push((v[j] - v[i]) / dt);
            }
        }
    }
    if slopes.is_empty() {
        0.0
    } else {
        median(&mut slopes)
    }
}

/// The largest unit of which every size is a whole multiple (within 10 %).
fn quantum_of(sizes: &[f64]) -> Option<f64> {
    let abs: Vec<f64> = sizes.iter().map(|s| s.abs()).filter(|s| *s > 0.0).collect();
    let smallest = abs.iter().copied().fold(f64::INFINITY, f64::min);
    if !smallest.is_finite() {
        return None;
    }
    let q = (1..=8).map(|d| smallest / d as f64).find(|&q| {
        abs.iter().all(|s| {
            let k = s / q;
            (k - k.round()).abs() <= 0.1
        })
    })?;
    // Refine over every jump, so noise on the smallest one does not set the unit.
    let units: f64 = abs.iter().map(|s| (s / q).round()).sum();
    Some(abs.iter().sum::<f64>() / units)
}

/// Analyses one channel: `t_s` in seconds (ascending), `v` its values (`NaN`:
/// no reading, skipped).
pub fn analyze(t_s: &[f64], v: &[f64], ctx: &Context<'_>) -> ChannelAnalysis {
    let n_all = t_s.len().min(v.len());
    let t0 = t_s.first().copied().unwrap_or(0.0);
    let t_end = t_s[..n_all].last().copied().unwrap_or(0.0);
    let warmup_s = ctx.warmup_s.unwrap_or((t_end - t0) * 0.1).max(0.0);
    let cut = t0 + warmup_s;
    // Readings after the warm-up, with their row index (for steps and tokens).
    let rows: Vec<usize> = (0..n_all)
        .filter(|&i| t_s[i] >= cut && !v[i].is_nan())
        .collect();
    let t: Vec<f64> = rows.iter().map(|&i| t_s[i]).collect();
    let x: Vec<f64> = rows.iter().map(|&i| v[i]).collect();
    let n = x.len();
    let mut out = ChannelAnalysis {
        verdict: Verdict::Insufficient,
        confidence: 0.0,
        points: n,
        warmup_s,
        duration_s: if n > 1 { t[n - 1] - t[0] } else { 0.0 },
        baseline: x.first().copied().unwrap_or(f64::NAN),
        final_value: x.last().copied().unwrap_or(f64::NAN),
        drift: 0.0,
        drift_per_step: None,
        drift_per_token: None,
        slope_per_s: 0.0,
        slope_per_step: None,
        noise: 0.0,
        jumps: 0,
        jump_list: Vec::new(),
        quantum: None,
        longest_flat_s: 0.0,
        projection_24h: 0.0,
        limit: ctx.limit,
        time_to_limit_s: None,
    };
    if n < 8 {
        out.drift = out.final_value - out.baseline;
        if out.drift.is_nan() {
            out.drift = 0.0;
        }
        return out;
    }

    // Baseline and final: medians of the first and last windows.
    let w = (n / 20).max(5).min(n / 2);
    out.baseline = median(&mut x[..w].to_vec());
    out.final_value = median(&mut x[n - w..].to_vec());
    out.drift = out.final_value - out.baseline;
    let (a_mid, b_mid) = (rows[w / 2], rows[n - w + w / 2]);
    let per = |axis: Option<&[f64]>| {
        let axis = axis?;
        let d = axis.get(b_mid)? - axis.get(a_mid)?;
        (d.is_finite() && d > 0.0).then_some(d)
    };
    if let Some(ds) = per(ctx.steps) {
        out.drift_per_step = Some(out.drift / ds);
    }
    if let Some(dk) = per(ctx.tokens) {
        out.drift_per_token = Some(out.drift / dk);
    }

    // Noise of the differences, jumps, ramps.
    let d: Vec<f64> = x.windows(2).map(|p| p[1] - p[0]).collect();
    let mut abs_dev: Vec<f64> = {
        let mut dd = d.clone();
        let med = median(&mut dd);
        d.iter().map(|x| (x - med).abs()).collect()
    };
    out.noise = 1.4826 * median(&mut abs_dev);
    let level = median(&mut x.iter().map(|v| v.abs()).collect::<Vec<_>>());
    let resolution = level * 1e-12 + f64::MIN_POSITIVE;
    // Jumps are found at the data's own resolution; growth must pass the
    // channel's evidence floor to be called growth.
    let evidence = resolution.max(ctx.min_growth);
    let threshold = (6.0 * out.noise).max(resolution);
    let mut changes = 0usize;
    let mut jumps: Vec<Jump> = Vec::new();
    let mut i = 0;
    while i < d.len() {
        if d[i].abs() <= threshold {
            i += 1;
            continue;
        }
        // A run of consecutive large changes in the same direction.
        let sign = d[i].signum();
        let start = i;
        while i < d.len() && d[i].abs() > threshold && d[i].signum() == sign {
            i += 1;
        }
        changes += i - start;
        // A jump is a new level that holds: no other large change in the
        // next three steps (else it is a spike or a flicker).
        let holds = d[i..d.len().min(i + 3)]
            .iter()
            .all(|x| x.abs() <= threshold);
        if i - start <= 3 && holds {
            jumps.push(Jump {
                t_s: t[start + 1],
                size: d[start..i].iter().sum(),
            });
        }
    }
    out.jumps = jumps.len();
    let mut edges: Vec<f64> = Vec::with_capacity(jumps.len() + 2);
    edges.push(t[0]);
    edges.extend(jumps.iter().map(|j| j.t_s));
    edges.push(t[n - 1]);
    out.longest_flat_s = edges.windows(2).map(|e| e[1] - e[0]).fold(0.0, f64::max);

    // Trend and scatter around it.
    out.slope_per_s = theil_sen(&t, &x);
    let intercept = median(
        &mut t
            .iter()
            .zip(&x)
            .map(|(ti, xi)| xi - out.slope_per_s * ti)
            .collect::<Vec<_>>(),
    );
    let mut resid: Vec<f64> = t
        .iter()
        .zip(&x)
        .map(|(ti, xi)| (xi - intercept - out.slope_per_s * ti).abs())
        .collect();
    let scatter = 1.4826 * median(&mut resid);
    let trend = out.slope_per_s * out.duration_s;
    let spread = {
        let mut c = x.clone();
        quantile(&mut c, 0.95) - quantile(&mut c, 0.05)
    };
    let tolerance = (level * 0.01).max(evidence);

    // Jumps inside the final window are listed but do not decide the verdict:
    // `final` is their median anyway, and a watched process that exits frees
    // its memory in its last samples.
    let final_from = t[n - w];
    let deciding = || jumps.iter().filter(|j| j.t_s < final_from);
    out.quantum = quantum_of(&deciding().map(|j| j.size).collect::<Vec<_>>());
    let net: f64 = deciding().map(|j| j.size).sum();
    let gross: f64 = deciding().map(|j| j.size.abs()).sum();
    let changing = changes as f64 / d.len() as f64;
    let growth = out.drift.abs();
    let (verdict, confidence) = if deciding().next().is_some()
        && changing <= 0.2
        && net.abs() >= 0.6 * gross
        && growth > evidence
        && net.abs() >= 0.5 * growth
    {
        let explained = (net.abs() / growth.max(net.abs())).min(1.0);
        (Verdict::Staircase, explained * (1.0 - changing))
    } else if trend.abs() > 3.0 * scatter && trend.abs() > evidence && growth > evidence {
        (
            Verdict::Linear,
            (1.0 - scatter / trend.abs()).clamp(0.0, 1.0),
        )
    } else if spread <= tolerance {
        (
            Verdict::Flat,
            (1.0 - spread / tolerance).clamp(0.0, 1.0).max(0.5),
        )
    } else {
        (Verdict::Noisy, (spread / tolerance / 10.0).clamp(0.5, 1.0))
    };
    out.verdict = verdict;
    out.confidence = confidence;

    // Projection.
    let rate = match verdict {
        // Flat within the evidence floor: nothing to project.
        Verdict::Flat => 0.0,
        Verdict::Staircase if out.duration_s > 0.0 => out.drift / out.duration_s,
        _ => out.slope_per_s,
    };
    out.projection_24h = rate * DAY_S;
    if let Some(steps) = ctx.steps {
        let ds = steps
            .get(rows[n - 1])
            .zip(steps.get(rows[0]))
            .map(|(b, a)| b - a);
        if let Some(ds) = ds.filter(|d| *d > 0.0 && out.duration_s > 0.0) {
            out.slope_per_step = Some(rate / (ds / out.duration_s));
        }
    }
    if let Some(limit) = ctx.limit
        && rate > 0.0
        && limit > out.final_value
    {
        out.time_to_limit_s = Some((limit - out.final_value) / rate);
    }
    jumps.truncate(MAX_JUMP_LIST);
    out.jump_list = jumps;
    out
}

#[cfg(test)]
mod tests;
