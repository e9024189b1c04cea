//! [`analyze`]: one channel's series read as its kind says: the level
//! method (flat, staircase, linear, noisy, with the evidence of a trend),
//! counters as rates, gauges by their trend, peaks by their rises.

use crate::channel::{
    ChannelAnalysis, Context, DAY_S, Jump, MATERIAL_SHARE, Note, REFERENCE_LEAK_BYTES_PER_H,
    SUSTAINED_SHARE, Severity, Verdict,
};
use crate::evidence;
use crate::evidence::TrendEvidence;
use crate::stats::{median, quantile};
use crate::warmup::find_warmup;
use flatline_format::Kind;

const MAX_THEIL_SEN_POINTS: usize = 400;
const MAX_JUMP_LIST: usize = 1000;

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

/// The readings after the start-up.
struct Prepared {
    /// Row index of each reading (for steps and tokens).
    rows: Vec<usize>,
    t: Vec<f64>,
    x: Vec<f64>,
}

fn empty(ctx: &Context<'_>, warmup_s: f64, p: &Prepared) -> ChannelAnalysis {
    let n = p.x.len();
    ChannelAnalysis {
        kind: ctx.kind,
        verdict: Verdict::Insufficient,
        confidence: 0.0,
        points: n,
        warmup_s,
        duration_s: if n > 1 { p.t[n - 1] - p.t[0] } else { 0.0 },
        baseline: p.x.first().copied().unwrap_or(f64::NAN),
        final_value: p.x.last().copied().unwrap_or(f64::NAN),
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
        projection_24h: None,
        limit: ctx.limit,
        time_to_limit_s: None,
        severity: None,
        rate_per_s: None,
        pct_per_hour: None,
        last_rise_s: None,
        detectable_after_s: None,
        note: None,
        onset_s: None,
        rise_s: None,
        evidence: None,
    }
}

/// A line through (t, x) by Theil–Sen, and the robust scatter around it.
struct Trend {
    slope: f64,
    intercept: f64,
    scatter: f64,
}

fn trend(t: &[f64], x: &[f64]) -> Trend {
    let slope = theil_sen(t, x);
    let intercept = median(
        &mut t
            .iter()
            .zip(x)
            .map(|(ti, xi)| xi - slope * ti)
            .collect::<Vec<_>>(),
    );
    let mut resid: Vec<f64> = t
        .iter()
        .zip(x)
        .map(|(ti, xi)| (xi - intercept - slope * ti).abs())
        .collect();
    Trend {
        slope,
        intercept,
        scatter: 1.4826 * median(&mut resid),
    }
}

/// Analyses one channel: `t_s` in seconds (ascending), `v` its values (`NaN`:
/// no reading, skipped), read as its kind says (`ctx.kind`).
pub fn analyze(t_s: &[f64], v: &[f64], ctx: &Context<'_>) -> ChannelAnalysis {
    let n_all = t_s.len().min(v.len());
    let t0 = t_s.first().copied().unwrap_or(0.0);
    let warmup_s = match ctx.warmup_s {
        Some(w) => w.max(0.0),
        None => {
            let floor = ctx.min_growth;
            find_warmup(&t_s[..n_all], &v[..n_all], floor).map_or(0.0, |w| w.at_s - t0)
        }
    };
    let cut = t0 + warmup_s;
    let rows: Vec<usize> = (0..n_all)
        .filter(|&i| t_s[i] >= cut && !v[i].is_nan())
        .collect();
    let p = Prepared {
        t: rows.iter().map(|&i| t_s[i]).collect(),
        x: rows.iter().map(|&i| v[i]).collect(),
        rows,
    };
    let mut out = empty(ctx, warmup_s, &p);
    // A level's evidence is weighed (see [`evidence`]), so a few readings
    // can still be judged; other kinds need eight.
    let fewest = if ctx.kind == Kind::Level { 3 } else { 8 };
    if p.x.len() < fewest {
        out.drift = out.final_value - out.baseline;
        if out.drift.is_nan() {
            out.drift = 0.0;
        }
        if ctx.kind == Kind::Level {
            out.projection_24h = Some(0.0);
        }
        return out;
    }
    match ctx.kind {
        Kind::Level => {
            level(&p, ctx, &mut out);
            if out.rose_and_held() {
                out.rise_s = rise_span(&p.t, &p.x);
            }
        }
        Kind::Peak => peak(&p, ctx, &mut out),
        Kind::Counter => counter(&p, ctx, &mut out),
        Kind::Gauge => gauge(&p, &mut out),
    }
    out
}

/// Baseline and final (medians of the first and last windows), drift, and
/// drift per step and token. Returns the window.
fn ends(p: &Prepared, ctx: &Context<'_>, out: &mut ChannelAnalysis) -> usize {
    let (x, n) = (&p.x, p.x.len());
    let w = (n / 20).max(5).min(n / 2);
    out.baseline = median(&mut x[..w].to_vec());
    out.final_value = median(&mut x[n - w..].to_vec());
    out.drift = out.final_value - out.baseline;
    let (a_mid, b_mid) = (p.rows[w / 2], p.rows[n - w + w / 2]);
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
    w
}

/// Steps per second over the analysed run, where steps advance.
fn steps_per_s(p: &Prepared, ctx: &Context<'_>, duration_s: f64) -> Option<f64> {
    let steps = ctx.steps?;
    let n = p.rows.len();
    let ds = steps.get(p.rows[n - 1])? - steps.get(p.rows[0])?;
    (ds > 0.0 && duration_s > 0.0).then(|| ds / duration_s)
}

/// A level: flat, staircase, linear or noisy; projected, with its time to
/// the limit and severity.
fn level(p: &Prepared, ctx: &Context<'_>, out: &mut ChannelAnalysis) {
    let (t, x, n) = (&p.t, &p.x, p.x.len());
    let w = ends(p, ctx, out);

    // Noise of the differences, jumps, ramps.
    let d: Vec<f64> = x.windows(2).map(|p| p[1] - p[0]).collect();
    out.noise = noise_of(&d);
    let level = median(&mut x.iter().map(|v| v.abs()).collect::<Vec<_>>());
    let resolution = level * 1e-12 + f64::MIN_POSITIVE;
    // Jumps are found at the data's own resolution; growth must pass the
    // channel's evidence floor, and be material against its level, to be
    // called growth.
    let evidence = if ctx.min_growth > 0.0 {
        resolution.max(ctx.min_growth)
    } else {
        resolution.max(MATERIAL_SHARE * level)
    };
    let threshold = (6.0 * out.noise).max(resolution);
    let (mut jumps, changes) = find_jumps(t, &d, threshold);
    out.jumps = jumps.len();
    out.longest_flat_s = longest_flat(t, &jumps);

    // Trend and scatter around it.
    let tr = trend(t, x);
    out.slope_per_s = tr.slope;
    let run_trend = tr.slope * out.duration_s;
    let ev = evidence::test(t, x, tr.slope, tr.intercept, out.drift, evidence);
    let spread = {
        let mut c = x.clone();
        quantile(&mut c, 0.95) - quantile(&mut c, 0.05)
    };
    let tolerance = (level * 0.01).max(evidence);

    // Jumps inside the first and final windows are listed but do not decide
    // the verdict: `baseline` and `final` are their medians, so they already
    // stand on one side of such a jump; the last reading of a start-up can
    // fall just after the start-up, and a watched process that exits frees
    // its memory in its last samples.
    let (first_to, final_from) = (t[w], t[n - w]);
    let deciding = || {
        jumps
            .iter()
            .filter(move |j| j.t_s >= first_to && j.t_s < final_from)
    };
    out.quantum = quantum_of(&deciding().map(|j| j.size).collect::<Vec<_>>());
    let net: f64 = deciding().map(|j| j.size).sum();
    let gross: f64 = deciding().map(|j| j.size.abs()).sum();
    let changing = changes as f64 / d.len() as f64;
    let growth = out.drift.abs();
    // Growth is called on evidence, one rule for both shapes: the trend
    // test at the receipt's confidence (see [`evidence`]). A staircase is
    // then told from a line by its jumps (each beyond six times the noise
    // of the differences): one step that held is a level that moved, and
    // its residuals' autocorrelation leaves it too few effective readings
    // to be a trend.
    let (mut verdict, mut confidence) = if ev.significant()
        && deciding().next().is_some()
        && changing <= 0.2
        && net.signum() == out.drift.signum()
        && net.abs() >= 0.6 * gross
        && growth > evidence
        && net.abs() >= 0.5 * growth
    {
        let explained = (net.abs() / growth.max(net.abs())).min(1.0);
        (Verdict::Staircase, explained * (1.0 - changing))
    } else if ev.significant()
        && run_trend.signum() == out.drift.signum()
        && ((run_trend.abs() > evidence && growth > evidence)
            || certain(ctx, &ev, growth, tr.scatter, resolution))
    {
        (Verdict::Linear, ev.certainty())
    } else if spread <= tolerance && (ev.detectable_per_s.is_some() || growth <= evidence) {
        // Flat: within the band, and either this run could have shown a
        // trend or it moved by less than the evidence. A level that moved
        // past the evidence in steps too few to weigh is not called flat.
        (
            Verdict::Flat,
            (1.0 - spread / tolerance).clamp(0.0, 1.0).max(0.5),
        )
    } else if settled_later(t, x, out.duration_s, tolerance, evidence, out.drift) {
        out.note = Some(Note::NotSustained);
        (Verdict::Flat, 0.5)
    } else if ev.detectable_per_s.is_none() {
        // It moved, and too few readings (for their autocorrelation) can
        // show a trend at the confidence: growth and noise cannot be told.
        (Verdict::Insufficient, 0.0)
    } else {
        (Verdict::Noisy, (spread / tolerance / 10.0).clamp(0.5, 1.0))
    };
    let rate = |v: Verdict| match v {
        Verdict::Staircase if out.duration_s > 0.0 => out.drift / out.duration_s,
        Verdict::Linear => tr.slope,
        _ => 0.0,
    };
    // Growth must hold: the later half of the run moves the same way, by a
    // fair share of what the run's rate predicts for it. Growth that stopped
    // is start-up the start-up did not catch, or a level that stepped once.
    if verdict.is_growth() {
        let mid = t[0] + out.duration_s / 2.0;
        let late_net: f64 = deciding().filter(|j| j.t_s >= mid).map(|j| j.size).sum();
        let (sustained, late) = sustained(t, x, mid, rate(verdict), verdict, late_net);
        if !sustained {
            (verdict, confidence) = (held(late, tolerance), 0.5);
            out.note = Some(Note::NotSustained);
        }
    } else if verdict == Verdict::Flat && out.drift != 0.0 && out.note.is_none() {
        out.note = Some(Note::Within { band: tolerance });
    }
    // Growth that stopped at the end: a start-up the start-up cannot yet
    // tell from a leak (a live window 4 s after a 30 s ramp), or a leak
    // that was fixed. The latest readings' own trend is below a quarter of
    // the run's rate, significantly, where the rate would have moved them
    // past the evidence floor. Only for growth without jumps: a staircase
    // pauses between its steps.
    if verdict == Verdict::Linear
        && deciding().next().is_none()
        && let Some(at) = stopped(t, x, tr.slope, evidence)
    {
        (verdict, confidence) = (held(&x[t.partition_point(|&ti| ti < at)..], tolerance), 0.5);
        out.note = Some(Note::NotSustained);
    }
    // A level that held, then began to grow: the whole run's line misses a
    // leak that starts late, and its scatter makes the run look noisy.
    // (A run whose later half grows no faster than twice its first half's,
    // by least squares, has no such onset: the search is skipped.)
    let onset = if matches!(
        verdict,
        Verdict::Noisy | Verdict::Linear | Verdict::Insufficient
    ) && (verdict != Verdict::Linear || speeds_up(t, x))
    {
        late_onset(t, x, evidence)
    } else {
        None
    };
    if let Some(tail) = &onset {
        (verdict, confidence) = (Verdict::Linear, tail.confidence);
        (out.onset_s, out.slope_per_s) = (Some(tail.at), tail.slope);
    }
    out.verdict = verdict;
    out.confidence = confidence;

    // Projection, limit, severity.
    let r = onset.map_or_else(|| rate(verdict), |tail| tail.slope);
    project(p, ctx, r, out);
    out.detectable_after_s =
        detectable_after(ctx, level, n, out.duration_s, tr.scatter, &ev, evidence);
    out.evidence = Some(ev);
    jumps.truncate(MAX_JUMP_LIST);
    out.jump_list = jumps;
}

/// Where a level that rose and held made its rise: from where it passed
/// 5 % of it to where it passed 95 %, the rise measured between the
/// medians of its first and last five readings.
fn rise_span(t: &[f64], x: &[f64]) -> Option<[f64; 2]> {
    let k = 5.min(x.len());
    if k == 0 {
        return None;
    }
    let from = median(&mut x[..k].to_vec());
    let to = median(&mut x[x.len() - k..].to_vec());
    let rise = to - from;
    if rise <= 0.0 {
        return None;
    }
    let when = |share: f64| {
        let at = from + share * rise;
        x.iter().position(|&v| v >= at).map(|i| t[i])
    };
    Some([when(0.05)?, when(0.95)?])
}

/// The jumps among the differences `d` of a series at times `t` (a run of
/// at most three consecutive changes beyond `threshold`, the same way, that
/// holds for three steps and is not the way back from a spike), and how
/// many differences were beyond `threshold` at all.
fn find_jumps(t: &[f64], d: &[f64], threshold: f64) -> (Vec<Jump>, usize) {
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
        // next three steps (else it is a spike or a flicker), and not the
        // way back from a spike that went the other way just before.
        let holds = d[i..d.len().min(i + 3)]
            .iter()
            .all(|x| x.abs() <= threshold);
        let returns = start > 0 && d[start - 1].abs() > threshold && d[start - 1].signum() != sign;
        if i - start <= 3 && holds && !returns {
            jumps.push(Jump {
                t_s: t[start + 1],
                size: d[start..i].iter().sum(),
            });
        }
    }
    (jumps, changes)
}

/// The noise of a series' differences `d`: their MAD, scaled to a standard
/// deviation.
fn noise_of(d: &[f64]) -> f64 {
    let mut dd = d.to_vec();
    let med = median(&mut dd);
    let mut abs_dev: Vec<f64> = d.iter().map(|x| (x - med).abs()).collect();
    1.4826 * median(&mut abs_dev)
}

/// The longest time between two jumps, or from an end to the nearest.
fn longest_flat(t: &[f64], jumps: &[Jump]) -> f64 {
    let mut edges: Vec<f64> = Vec::with_capacity(jumps.len() + 2);
    edges.push(t[0]);
    edges.extend(jumps.iter().map(|j| j.t_s));
    edges.push(t[t.len() - 1]);
    edges.windows(2).map(|e| e[1] - e[0]).fold(0.0, f64::max)
}

/// Whether growth at `rate` held through the later half of the run (from
/// `mid`): it moved the same way by [`SUSTAINED_SHARE`] of what the rate
/// predicts, by its medians, or for a staircase by its deciding jumps there
/// (`late_net`). Also the later half's readings.
fn sustained<'x>(
    t: &[f64],
    x: &'x [f64],
    mid: f64,
    rate: f64,
    verdict: Verdict,
    late_net: f64,
) -> (bool, &'x [f64]) {
    let n = x.len();
    let from = t.partition_point(|&ti| ti < mid);
    let late = &x[from..];
    let lw = (late.len() / 10).max(3).min(late.len() / 2).max(1);
    let late_drift =
        median(&mut late[late.len() - lw..].to_vec()) - median(&mut late[..lw].to_vec());
    let expected = rate * (t[n - 1] - t[from.min(n - 1)]);
    let sustained = if verdict == Verdict::Staircase {
        // A staircase still steps: its deciding jumps in the later half
        // add up, the drift's way, to that share of what its rate
        // predicts. A level that stepped early and held since is
        // settled, however a dip or its noise moves the later medians.
        late_net * expected.signum() >= SUSTAINED_SHARE * expected.abs()
    } else {
        late_drift * expected.signum() >= SUSTAINED_SHARE * expected.abs()
    };
    (sustained, late)
}

/// The projection over a day at rate `r`, the rate per step, the time to
/// the limit and the severity.
fn project(p: &Prepared, ctx: &Context<'_>, r: f64, out: &mut ChannelAnalysis) {
    out.projection_24h = Some(r * DAY_S);
    if let Some(sps) = steps_per_s(p, ctx, out.duration_s) {
        out.slope_per_step = Some(r / sps);
    }
    if let Some(limit) = ctx.limit
        && r > 0.0
        && limit > out.final_value
    {
        out.time_to_limit_s = Some((limit - out.final_value) / r);
    }
    if out.verdict.is_growth() && r > 0.0 {
        out.severity = Some(Severity::of(out.time_to_limit_s));
    }
}

/// How long before a reference leak rises above this run's scatter and the
/// evidence floor.
fn detectable_after(
    ctx: &Context<'_>,
    level: f64,
    n: usize,
    duration_s: f64,
    scatter: f64,
    ev: &TrendEvidence,
    evidence: f64,
) -> Option<f64> {
    let reference_per_s = if ctx.min_growth > 0.0 || level > 1e6 {
        REFERENCE_LEAK_BYTES_PER_H / 3600.0
    } else {
        MATERIAL_SHARE * level / 3600.0
    };
    let per_s = (n - 1) as f64 / duration_s;
    (reference_per_s > 0.0 && per_s.is_finite() && per_s > 0.0).then(|| {
        evidence::limit_s(reference_per_s, scatter, ev.inflation, per_s)
            .max(evidence::floor_time(reference_per_s, evidence))
    })
}

/// Least-squares slope of (t, x): O(n), for cheap screening.
fn ls_slope(t: &[f64], x: &[f64]) -> f64 {
    let n = t.len() as f64;
    if t.len() < 2 {
        return 0.0;
    }
    let (mt, mx) = (t.iter().sum::<f64>() / n, x.iter().sum::<f64>() / n);
    let (mut cov, mut var) = (0.0, 0.0);
    for (ti, xi) in t.iter().zip(x) {
        cov += (ti - mt) * (xi - mx);
        var += (ti - mt) * (ti - mt);
    }
    if var > 0.0 { cov / var } else { 0.0 }
}

/// Whether the later half of the run grows more than twice as fast as the
/// first (least squares): only then can a late onset (a tail at least four
/// times as steep as the part before it) be there.
fn speeds_up(t: &[f64], x: &[f64]) -> bool {
    let mid = t.partition_point(|&ti| ti < (t[0] + t[t.len() - 1]) / 2.0);
    let (head, tail) = (
        ls_slope(&t[..mid], &x[..mid]),
        ls_slope(&t[mid..], &x[mid..]),
    );
    tail > 0.0 && tail > 2.0 * head
}

/// Where linear growth at `rate` (per second) stopped, if it did: the
/// longest tail of the run (its last 10 to 40 %, at least 5 readings) over
/// which the rate would have moved the level by more than the evidence,
/// whose own Theil–Sen trend is under a quarter of that and below it by
/// more than [`evidence::Z_CRIT`] standard errors of the tail's slope
/// (`scatter · √(12 / n) / span`, the least-squares error at its noise, `n`
/// the readings the slope stands on). A series that moves in steps and
/// seldom falls ([`steps_up`]: an allocation site's sampled bytes, each
/// sample adding its weight) has not stopped where it already paused as
/// long, rising no more, while it grew ([`paused_before`]): a few seconds
/// without a sample are no stop.
fn stopped(t: &[f64], x: &[f64], rate: f64, evidence: f64) -> Option<f64> {
    if rate <= 0.0 {
        return None;
    }
    let stepped = steps_up(x);
    let n = t.len();
    let duration = t[n - 1] - t[0];
    // Growth still going in the last tenth (least squares at half the rate
    // or more) stopped nowhere: the robust search is skipped.
    let last = t.partition_point(|&ti| ti < t[n - 1] - 0.1 * duration);
    if n - last >= 5 && ls_slope(&t[last..], &x[last..]) >= 0.5 * rate {
        return None;
    }
    [0.4, 0.3, 0.2, 0.1].into_iter().find_map(|share| {
        let from = t.partition_point(|&ti| ti < t[n - 1] - share * duration);
        let (tt, xt) = (&t[from..], &x[from..]);
        if xt.len() < 5 {
            return None;
        }
        let span = tt[tt.len() - 1] - tt[0];
        let expected = rate * span;
        if expected <= evidence {
            return None;
        }
        let tail = trend(tt, xt);
        let grew = tail.slope * span;
        // The slope stands on at most MAX_THEIL_SEN_POINTS of the readings.
        let used = xt.len().min(MAX_THEIL_SEN_POINTS) as f64;
        let se = tail.scatter * (12.0 / used).sqrt();
        let paused = || paused_before(t, x, from, span, xt[xt.len() - 1] - xt[0]);
        (grew < 0.25 * expected
            && expected - grew > evidence::Z_CRIT * se
            && !(stepped && paused()))
        .then_some(tt[0])
    })
}

/// Whether a series moves in steps that seldom go down: at least a tenth
/// of its readings unmoved and at most a tenth lower than the one before.
fn steps_up(x: &[f64]) -> bool {
    let d = x.len().saturating_sub(1);
    let (still, falls) = x.windows(2).fold((0, 0), |(s, f), w| {
        (s + usize::from(w[1] == w[0]), f + usize::from(w[1] < w[0]))
    });
    d > 0 && 10 * still >= d && 10 * falls <= d
}

/// Whether, before reading `before`, a stretch of `span` seconds (one
/// beginning at each reading) rose by no more than `rise`.
fn paused_before(t: &[f64], x: &[f64], before: usize, span: f64, rise: f64) -> bool {
    let mut end = 0;
    (0..before)
        .take_while(|&i| t[i] + span <= t[before])
        .any(|i| {
            end = end.max(i);
            while end < before && t[end + 1] <= t[i] + span {
                end += 1;
            }
            x[end] - x[i] <= rise
        })
}

/// The verdict of a level whose growth did not hold, by the readings since:
/// flat when their middle 90 % stays within `tolerance`, else noisy.
fn held(since: &[f64], tolerance: f64) -> Verdict {
    let mut l = since.to_vec();
    if quantile(&mut l, 0.95) - quantile(&mut l, 0.05) <= tolerance {
        Verdict::Flat
    } else {
        Verdict::Noisy
    }
}

/// How far beyond the noise a trend must be (the Mann–Kendall statistic,
/// corrected for autocorrelation) to be certain whatever its size.
pub const CERTAIN_Z: f64 = 10.0;

/// A trend the data make certain, though smaller than the materiality
/// floor (0.1 % of the level) that holds growth back elsewhere: a steady
/// climb of 64 KiB/s on a 20 GiB GPU adds up to 5.3 GiB a day, and "flat"
/// would stop a person looking. Only for channels without a physical floor
/// of their own (host memory moves in pages, and 16 of them is its floor:
/// below that is the allocator's quantization, however steady).
fn certain(ctx: &Context, ev: &TrendEvidence, growth: f64, scatter: f64, resolution: f64) -> bool {
    ctx.min_growth <= 0.0 && ev.z.abs() >= CERTAIN_Z && growth > (4.0 * scatter).max(resolution)
}

/// A level that moved, then held: the later half of the run within a flat
/// level's band (`tolerance`) and moving by less than the evidence (steps
/// early in the run, a start-up the start-up missed). A move within the band
/// (`drift`, over the whole run) has held too when its later half moved
/// by less than [`SUSTAINED_SHARE`] of what the run's rate predicts for it,
/// the rule growth verdicts are held to: a start-up's tail that slows to a
/// stop (workers' first batches, +0.25 % and then 67 KB in half a minute)
/// is no trend that adds up. A larger move keeps the strict rule: a level
/// that stepped by more than the band is never read flat on its later half
/// alone.
fn settled_later(
    t: &[f64],
    x: &[f64],
    duration_s: f64,
    tolerance: f64,
    evidence: f64,
    drift: f64,
) -> bool {
    let from = t.partition_point(|&ti| ti < t[0] + duration_s / 2.0);
    let late = &x[from..];
    if late.len() < 2 || duration_s <= 0.0 {
        return false;
    }
    let lw = (late.len() / 10).max(3).min(late.len() / 2).max(1);
    let mut l = late.to_vec();
    let moved = median(&mut late[late.len() - lw..].to_vec()) - median(&mut late[..lw].to_vec());
    let late_span = t[t.len() - 1] - t[from];
    let predicted = (drift / duration_s * late_span).abs();
    let stopped = moved.abs() <= evidence
        || (drift.abs() <= tolerance && moved.abs() <= SUSTAINED_SHARE * predicted);
    quantile(&mut l, 0.95) - quantile(&mut l, 0.05) <= tolerance && stopped
}

/// Growth found in the last part of a run.
struct Onset {
    /// Where the tail's line leaves the level held before it.
    at: f64,
    slope: f64,
    confidence: f64,
}

/// The longest tail of the run (its last 50, 40, 30 or 20 %) that grows
/// linearly at nearly the steepest such tail's slope: the trend over it is more than three times the scatter around
/// it and above the evidence, its ends (medians of a tenth) moved up by
/// more than the evidence and by at least half the trend, and its later
/// half still grows (by [`SUSTAINED_SHARE`] of what the slope predicts).
/// The part before it must have held: its own trend within its scatter (or
/// the evidence) and under a quarter of the tail's slope, so a level that
/// wanders (a random walk) is not taken for one that held and then leaked.
/// Returns where its growth began (where its line leaves the level held
/// before it) and its slope.
fn late_onset(t: &[f64], x: &[f64], evidence: f64) -> Option<Onset> {
    let n = t.len();
    let duration = t[n - 1] - t[0];
    let mut found: Vec<Onset> = Vec::new();
    for share in [0.5, 0.6, 0.7, 0.8] {
        let from = t.partition_point(|&ti| ti < t[0] + share * duration);
        let (tt, xt) = (&t[from..], &x[from..]);
        if xt.len() < 16 {
            continue;
        }
        let tr = trend(tt, xt);
        let span = tt[tt.len() - 1] - tt[0];
        let run = tr.slope * span;
        let lw = (xt.len() / 10).max(3);
        let ends = |a: &[f64]| median(&mut a.to_vec());
        let drift = ends(&xt[xt.len() - lw..]) - ends(&xt[..lw]);
        let late = &xt[xt.len() / 2..];
        let lw2 = lw.min(late.len() / 2).max(1);
        let late_drift = ends(&late[late.len() - lw2..]) - ends(&late[..lw2]);
        let late_expected = tr.slope * (tt[tt.len() - 1] - tt[xt.len() / 2]);
        // Before it, the level held: no trend of its own that the scatter
        // does not explain, and none near the tail's.
        let head = trend(&t[..from], &x[..from]);
        let head_run = head.slope * (t[from - 1] - t[0]);
        let held = head_run.abs() <= (3.0 * head.scatter).max(evidence)
            && head.slope.abs() * 4.0 < tr.slope;
        if held
            && run > 0.0
            && run > 3.0 * tr.scatter
            && run > evidence
            && drift > evidence
            && drift >= 0.5 * run
            && late_drift >= SUSTAINED_SHARE * late_expected
            // The tail's growth passes the same trend test as a whole run's.
            && evidence::test(tt, xt, tr.slope, tr.intercept, drift, evidence).significant()
        {
            let confidence = (1.0 - tr.scatter / run).clamp(0.0, 1.0);
            let level = median(&mut x[..from].to_vec());
            let at = ((level - tr.intercept) / tr.slope).clamp(t[0], t[n - 1]);
            found.push(Onset {
                at,
                slope: tr.slope,
                confidence,
            });
        }
    }
    // A longer tail that starts on the flat part grows more slowly on
    // average: take the longest tail near the steepest slope; the onset is
    // where its line leaves the level held before it.
    let steepest = found.iter().map(|f| f.slope).fold(0.0, f64::max);
    found.into_iter().find(|f| f.slope >= 0.9 * steepest)
}

/// A peak (high-water mark): how often and by how much it rose, and when
/// last. Never projected: a peak that keeps rising is told by its level.
fn peak(p: &Prepared, ctx: &Context<'_>, out: &mut ChannelAnalysis) {
    let (t, x) = (&p.t, &p.x);
    ends(p, ctx, out);
    out.baseline = x[0];
    out.final_value = x[x.len() - 1];
    out.drift = out.final_value - out.baseline;
    let level = median(&mut x.iter().map(|v| v.abs()).collect::<Vec<_>>());
    let floor = ctx.min_growth.max(level * 1e-12 + f64::MIN_POSITIVE);
    let mut rises: Vec<Jump> = Vec::new();
    let mut i = 1;
    while i < x.len() {
        if x[i] - x[i - 1] > 0.0 {
            let start = i;
            while i < x.len() && x[i] - x[i - 1] > 0.0 {
                i += 1;
            }
            let size = x[i - 1] - x[start - 1];
            if size > floor {
                rises.push(Jump {
                    t_s: t[start],
                    size,
                });
            }
        } else {
            i += 1;
        }
    }
    out.jumps = rises.len();
    out.last_rise_s = rises.last().map(|j| j.t_s);
    out.verdict = if rises.is_empty() {
        Verdict::Held
    } else {
        Verdict::Rose
    };
    out.confidence = 1.0;
    rises.truncate(MAX_JUMP_LIST);
    out.jump_list = rises;
}

/// A counter, read as a rate: steady, rising, falling or bursty; the rate
/// per second (and the count per step where steps exist), never a 24 h
/// projection of the count.
fn counter(p: &Prepared, ctx: &Context<'_>, out: &mut ChannelAnalysis) {
    let (t, x, n) = (&p.t, &p.x, p.x.len());
    // The count per step, over the run.
    if let Some(sps) = steps_per_s(p, ctx, out.duration_s) {
        let total = x[n - 1] - x[0];
        if total >= 0.0 {
            out.drift_per_step = Some(total / (sps * out.duration_s));
        }
    }
    // Rates over windows of equal time (at least a second, at most 200 of
    // them): a counter read at 100 Hz is too coarse sample to sample.
    let windows = (out.duration_s.floor() as usize).clamp(8, 200);
    let span = out.duration_s / windows as f64;
    let mut rt = Vec::with_capacity(windows);
    let mut r = Vec::with_capacity(windows);
    let (mut counted, mut over) = (0.0, 0.0);
    let mut j = 0;
    let mut prev = (t[0], x[0]);
    for k in 1..=windows {
        let edge = t[0] + span * k as f64;
        while j + 1 < n && t[j + 1] <= edge + 1e-9 {
            j += 1;
        }
        let (tj, xj) = (t[j], x[j]);
        if tj > prev.0 {
            let dx = xj - prev.1;
            // A counter that went back (restarted) says nothing for this window.
            if dx >= 0.0 {
                rt.push(edge);
                r.push(dx / (tj - prev.0));
                counted += dx;
                over += tj - prev.0;
            }
            prev = (tj, xj);
        }
    }
    if r.len() < 4 {
        return;
    }
    // The rate told is the count over the time (restarts left out); the
    // windows' median decides the shape.
    out.rate_per_s = Some(counted / over);
    let rate = median(&mut r.clone());
    let m = r.len();
    let w = (m / 5).max(2);
    out.baseline = median(&mut r[..w].to_vec());
    out.final_value = median(&mut r[m - w..].to_vec());
    out.drift = out.final_value - out.baseline;
    let tr = trend(&rt, &r);
    out.slope_per_s = tr.slope;
    out.noise = tr.scatter;
    let change = tr.slope * (rt[m - 1] - rt[0]);
    let idle = r.iter().filter(|&&v| v == 0.0).count() as f64 / m as f64;
    let high = quantile(&mut r.clone(), 0.9);

    let (verdict, confidence) =
        if ((0.2..=0.8).contains(&idle) && high > 0.0) || (rate > 0.0 && high > 5.0 * rate) {
            (Verdict::Bursty, idle.max(0.5))
        } else if change.abs() > 3.0 * tr.scatter && change.abs() > 0.1 * rate.abs().max(1e-12) {
            (
                if change > 0.0 {
                    Verdict::Rising
                } else {
                    Verdict::Falling
                },
                (1.0 - tr.scatter / change.abs()).clamp(0.0, 1.0),
            )
        } else {
            (
                Verdict::Steady,
                1.0 - (change.abs() / (3.0 * tr.scatter).max(1e-12)).min(0.5),
            )
        };
    if matches!(verdict, Verdict::Rising | Verdict::Falling) && rate > 0.0 {
        out.pct_per_hour = Some(tr.slope * 3600.0 / rate * 100.0);
    }
    out.verdict = verdict;
    out.confidence = confidence;
}

/// A gauge: stable, drifting up or down (by % of its level an hour), or
/// noisy. Never projected to a day.
fn gauge(p: &Prepared, out: &mut ChannelAnalysis) {
    let (t, x) = (&p.t, &p.x);
    let n = x.len();
    let w = (n / 20).max(5).min(n / 2);
    out.baseline = median(&mut x[..w].to_vec());
    out.final_value = median(&mut x[n - w..].to_vec());
    out.drift = out.final_value - out.baseline;
    let tr = trend(t, x);
    out.slope_per_s = tr.slope;
    out.noise = tr.scatter;
    let level = median(&mut x.iter().map(|v| v.abs()).collect::<Vec<_>>());
    let change = tr.slope * out.duration_s;
    let spread = {
        let mut c = x.clone();
        quantile(&mut c, 0.95) - quantile(&mut c, 0.05)
    };
    // The trend word must agree with the drift beside it: a line that
    // rises while the end sits below the start (a level that fell and
    // recovered) is no drift either way.
    let (verdict, confidence) = if change.abs() > 3.0 * tr.scatter
        && change.abs() > 0.02 * level
        && out.drift.abs() > 0.02 * level
        && change.signum() == out.drift.signum()
    {
        (
            if change > 0.0 {
                Verdict::DriftingUp
            } else {
                Verdict::DriftingDown
            },
            (1.0 - tr.scatter / change.abs()).clamp(0.0, 1.0),
        )
    } else if spread > 0.2 * level.max(f64::MIN_POSITIVE) {
        (
            Verdict::Noisy,
            (spread / level.max(f64::MIN_POSITIVE)).clamp(0.5, 1.0),
        )
    } else {
        (
            Verdict::Stable,
            1.0 - (spread / (0.2 * level).max(f64::MIN_POSITIVE)).min(0.5),
        )
    };
    if matches!(verdict, Verdict::DriftingUp | Verdict::DriftingDown) && level > 0.0 {
        out.pct_per_hour = Some(tr.slope * 3600.0 / level * 100.0);
    }
    out.verdict = verdict;
    out.confidence = confidence;
}
