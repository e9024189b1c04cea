//! Where start-up ends: the start-up is found, not assumed.
//!
//! A job's memory climbs while it loads a model, builds its dataset or
//! fills caches, then settles. [`find_warmup`] fits the series (reduced to at
//! most [`BUCKETS`] bucket means) with two independent straight lines, before
//! and after each candidate break in the first half of the run, and keeps
//! the break that leaves the least squared error; start-up ends at the first
//! reading from there that reaches the settled level ([`reached`]). It is
//! start-up only when
//!
//! - two lines explain the series much better than one (they remove at
//!   least half of one line's squared error),
//! - the level moved during start-up, from the run's start to where the
//!   settled line begins, by more than the channel's evidence floor and
//!   four times the settled part's scatter, and
//! - the settled part moves by less than a quarter of that over its whole
//!   length, and
//! - the climb leaves the first level at the start: it sat there for no
//!   longer than a tenth of the series (a rise after a stretch of
//!   stillness is growth, however it ends).
//!
//! A climb that settles on a plateau (held within a tenth of the climb for
//! a tenth of the series) ends there, even when the level moves again
//! later: what comes after is the run. When the settled part moves by more
//! than the quarter, that plateau is the only start-up there is, and only
//! if the climb to it is at least as large as all the series moves after
//! it (a dataset build, then a smaller burst of copies; never the first
//! step of a staircase).
//!
//! So a leak from the start (one line), a leak that starts late (the later
//! line is the steeper) and a flat run (nothing moved) have no start-up; a
//! ramp or a step up followed by a plateau does.

use super::rules;
use flatline_catalog::names;
use flatline_format::{ChannelSpec, Kind, Schema};

/// Most points the break is searched over.
pub const BUCKETS: usize = 400;

/// A start-up found in a series.
#[derive(Debug, Clone, PartialEq)]
pub struct Warmup {
    /// When start-up ended, on the series' clock.
    pub at_s: f64,
    /// The channel it was found in (for a recording's start-up).
    pub channel: Option<String>,
}

/// Running sums for least-squares lines over any range of points.
struct Sums {
    t: Vec<f64>,
    v: Vec<f64>,
    tt: Vec<f64>,
    tv: Vec<f64>,
    vv: Vec<f64>,
}

/// A fitted line over a range: slope, value at `t`, squared error.
struct Fit {
    slope: f64,
    mean_t: f64,
    mean_v: f64,
    sse: f64,
}

impl Fit {
    fn at(&self, t: f64) -> f64 {
        self.mean_v + self.slope * (t - self.mean_t)
    }
}

impl Sums {
    fn new(t: &[f64], v: &[f64]) -> Self {
        let mut s = Self {
            t: vec![0.0],
            v: vec![0.0],
            tt: vec![0.0],
            tv: vec![0.0],
            vv: vec![0.0],
        };
        for (&ti, &vi) in t.iter().zip(v) {
            let last = s.t.len() - 1;
            s.t.push(s.t[last] + ti);
            s.v.push(s.v[last] + vi);
            s.tt.push(s.tt[last] + ti * ti);
            s.tv.push(s.tv[last] + ti * vi);
            s.vv.push(s.vv[last] + vi * vi);
        }
        s
    }

    fn fit(&self, a: usize, b: usize) -> Fit {
        let n = (b - a) as f64;
        let d = |c: &[f64]| (c[b] - c[a]) / n;
        let (mt, mv) = (d(&self.t), d(&self.v));
        let var_t = (d(&self.tt) - mt * mt).max(0.0);
        let cov = d(&self.tv) - mt * mv;
        let var_v = (d(&self.vv) - mv * mv).max(0.0);
        let slope = if var_t > 0.0 { cov / var_t } else { 0.0 };
        Fit {
            slope,
            mean_t: mt,
            mean_v: mv,
            sse: (n * (var_v - slope * cov)).max(0.0),
        }
    }
}

/// Where start-up ends in this series (`NaN`: no reading), if it has a
/// start-up; `floor` is the smallest change that counts for the channel.
pub fn find_warmup(t_s: &[f64], v: &[f64], floor: f64) -> Option<Warmup> {
    let (t, x): (Vec<f64>, Vec<f64>) = t_s
        .iter()
        .zip(v)
        .filter(|(_, v)| !v.is_nan())
        .map(|(&t, &v)| (t, v))
        .unzip();
    if x.len() < 16 {
        return None;
    }
    // Bucket means, centred (large byte counts squared lose digits).
    let (t0, v0) = (t[0], x[0]);
    let per = x.len().div_ceil(BUCKETS);
    let mut bt = Vec::with_capacity(BUCKETS);
    let mut bv = Vec::with_capacity(BUCKETS);
    let mut starts = Vec::with_capacity(BUCKETS);
    for (tc, xc) in t.chunks(per).zip(x.chunks(per)) {
        let k = tc.len() as f64;
        starts.push(tc[0]);
        bt.push(tc.iter().map(|t| t - t0).sum::<f64>() / k);
        bv.push(xc.iter().map(|v| v - v0).sum::<f64>() / k);
    }
    let m = bv.len();
    if m < 16 {
        return None;
    }
    let sums = Sums::new(&bt, &bv);
    let one = sums.fit(0, m);
    if one.sse <= 0.0 {
        return None;
    }
    let lo = (m / 50).max(3);
    let (k, a, b) = (lo..=m / 2)
        .map(|k| (k, sums.fit(0, k), sums.fit(k, m)))
        .min_by(|x, y| (x.1.sse + x.2.sse).total_cmp(&(y.1.sse + y.2.sse)))?;
    let explained = 1.0 - (a.sse + b.sse) / one.sse;
    let rise = b.at(bt[k]) - a.at(bt[0]);
    let startup = rise.abs();
    let settled = (b.slope * (bt[m - 1] - bt[k])).abs();
    let scatter = (b.sse / (m - k) as f64).sqrt();
    if !(explained >= 0.5 && startup > floor.max(4.0 * scatter)) {
        return None;
    }
    // A start-up is what a process does when it starts: the climb leaves
    // the first level soon, not after a stretch at it longer than a tenth
    // of the series (workers that sat still for 20 s of 2 minutes, then
    // copied pages for a minute or in a burst of 25 s and held them, grew:
    // that is no start-up; a model loaded 5 s into a minute is).
    let left = (0..k)
        .find(|&i| (bv[i] - bv[0]) * rise.signum() >= 0.1 * startup)
        .unwrap_or(0);
    let still = bt[left] - bt[0];
    let span = bt[m - 1] - bt[0];
    if still > 0.1 * span {
        return None;
    }
    // Nor does a start-up sit still in the middle of its climb: a level
    // that settled (held within a tenth of the climb for a tenth of the
    // series) and then rose again settled there, and what came after is
    // the run (a node's ranks built their lists, then two workers copied a
    // burst of pages 15 s later).
    let band = 0.1 * startup;
    if settled >= 0.25 * startup {
        // The second line still moves, so two lines are no start-up and
        // a plateau is the only sign of one: the climb to it must be
        // material and at least as large as all the series does after it
        // (a build, then a smaller burst; not the first step of a
        // staircase). Only a climb: a level that dropped and came back
        // part way is read whole.
        if rise <= 0.0 {
            return None;
        }
        let i = first_plateau(&bt, &bv, left, m, 0.1 * span, band)?;
        let climb = (bv[i] - bv[0]).abs();
        let (lo, hi) = bv[i..]
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| {
                (l.min(v), h.max(v))
            });
        return (climb > floor.max(4.0 * scatter) && climb >= hi - lo).then(|| Warmup {
            at_s: starts[i],
            channel: None,
        });
    }
    if let Some(i) = first_plateau(&bt, &bv, left, k, 0.1 * span, band)
        && (bv[i] - bv[0]).abs() > floor.max(4.0 * scatter)
    {
        return Some(Warmup {
            at_s: starts[i],
            channel: None,
        });
    }
    Some(Warmup {
        at_s: starts[reached(&bv, k, rise)],
        channel: None,
    })
}

/// The first bucket from `from` before `to` where the level holds within
/// `band` for at least `long` seconds.
fn first_plateau(
    bt: &[f64],
    bv: &[f64],
    from: usize,
    to: usize,
    long: f64,
    band: f64,
) -> Option<usize> {
    (from..to).find(|&i| {
        let (mut lo, mut hi) = (bv[i], bv[i]);
        for j in i..bv.len() {
            lo = lo.min(bv[j]);
            hi = hi.max(bv[j]);
            if hi - lo > band {
                return false;
            }
            if bt[j] - bt[i] >= long {
                return j < to;
            }
        }
        false
    })
}

/// Where the series first reaches its settled level, from the break `k` on.
/// The best break in least squares can fall a reading early: the last
/// reading of the climb then counts as settled, and the step from it to the
/// plateau, just after the cut, would look like growth. So start-up ends at
/// the first reading within the settled part's range (its 5–95 % quantiles)
/// on the side the climb came from.
fn reached(bv: &[f64], k: usize, rise: f64) -> usize {
    let mut settled = bv[k..].to_vec();
    settled.sort_by(f64::total_cmp);
    let q = |p: f64| settled[((settled.len() - 1) as f64 * p).round() as usize];
    let (low, high) = (q(0.05), q(0.95));
    // Never past the middle of what was settled: a plateau is most of it.
    let last = k + (bv.len() - k) / 2;
    (k..last)
        .find(|&i| {
            if rise > 0.0 {
                bv[i] >= low
            } else {
                bv[i] <= high
            }
        })
        .unwrap_or(k)
}

/// Whether a channel's start-up ends a stream's start-up: memory levels
/// other than a tree's per-process channels (host memory, the allocator's
/// live bytes, GPU memory in use). The receipt ([`recording_warmup`]) and
/// the window ([`super::LiveAnalysis`]) ask the same.
pub fn is_warmup_source(c: &ChannelSpec) -> bool {
    // Not a process's own channels: their readings start with its first
    // page-table walk, which at a big tree can come long after the process
    // started (a worker first walked when it begins to copy would read its
    // copying as its start-up). The job's start-up shows in its own and the
    // tree's sums.
    c.kind == Kind::Level
        && !c.labels.contains_key("pid")
        && (rules::is_host_memory(&c.name, c.unit)
            || c.name == names::ALLOC_LIVE
            || (c.name.starts_with("gpu") && c.name.ends_with(".used")))
}

/// The start-up of a whole recording: the latest start-up found among the
/// channels [`is_warmup_source`] names, or `None` when none has one. Every channel is then analysed after
/// it, so one receipt has one start-up.
pub fn recording_warmup<'a>(
    schema: &Schema,
    t_s: &[f64],
    column: impl Fn(usize) -> &'a [f64],
) -> Option<Warmup> {
    schema
        .channels
        .iter()
        .enumerate()
        .filter(|(_, c)| is_warmup_source(c))
        .filter_map(|(i, c)| {
            let floor = rules::evidence_floor(&c.name, c.unit);
            find_warmup(t_s, column(i), floor).map(|w| Warmup {
                at_s: w.at_s,
                channel: Some(c.name.clone()),
            })
        })
        .max_by(|a, b| a.at_s.total_cmp(&b.at_s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(n: usize, hz: f64, f: impl Fn(f64) -> f64) -> (Vec<f64>, Vec<f64>) {
        let t: Vec<f64> = (0..n).map(|i| i as f64 / hz).collect();
        let v = t.iter().map(|&t| f(t)).collect();
        (t, v)
    }

    /// A deterministic wiggle standing in for noise.
    fn wiggle(t: f64) -> f64 {
        (t * 7.3).sin() * 0.6 + (t * 2.1).cos() * 0.4
    }

    #[test]
    fn a_dataset_build_then_a_plateau_ends_where_it_settles() {
        // 14 s of building (+60 MiB), then flat for 26 s, at 10 Hz.
        let (t, v) = series(400, 10.0, |t| {
            1e8 + 6e7 * (t / 14.0).min(1.0) + 2e5 * wiggle(t)
        });
        let w = find_warmup(&t, &v, 65536.0).expect("a start-up");
        assert!((w.at_s - 14.0).abs() < 1.0, "{w:?}");
        // A step up at 5 s, then flat.
        let (t, v) = series(600, 10.0, |t| if t < 5.0 { 1e6 } else { 9e6 } + wiggle(t));
        let w = find_warmup(&t, &v, 0.0).expect("a step");
        assert!((w.at_s - 5.0).abs() < 0.5, "{w:?}");
    }

    #[test]
    fn leaks_and_flat_runs_have_no_warm_up() {
        let floor = 65536.0;
        let flat = series(1000, 10.0, |t| 1e9 + 1e4 * wiggle(t));
        let leak = series(1000, 10.0, |t| 1e9 + 1e6 * t + 1e4 * wiggle(t));
        let late = series(1000, 10.0, |t| {
            1e9 + 1e6 * (t - 60.0).max(0.0) + 1e4 * wiggle(t)
        });
        for (name, (t, v)) in [("flat", flat), ("leak", leak), ("late leak", late)] {
            assert_eq!(find_warmup(&t, &v, floor), None, "{name}");
        }
        // A start-up smaller than the floor is none.
        let (t, v) = series(400, 10.0, |t| 1e8 + 3e4 * (t / 10.0).min(1.0));
        assert_eq!(find_warmup(&t, &v, floor), None);
        assert!(find_warmup(&t, &v, 0.0).is_some());
        assert_eq!(find_warmup(&t[..10], &v[..10], 0.0), None, "too short");
    }

    /// A worker flat for 22 s after its start copies 80 MiB over 25 s and
    /// holds it to the end (117 s at 2 Hz): it grew, and that is no
    /// start-up, though a climb then a plateau is start-up's shape.
    #[test]
    fn a_rise_after_a_stretch_of_stillness_is_no_start_up() {
        let mib = 1_048_576.0;
        let burst = |still: f64| {
            series(234, 2.0, move |t| {
                1e9 + 80.0 * mib * ((t - still) / 25.0).clamp(0.0, 1.0) + 2e4 * wiggle(t)
            })
        };
        let (t, v) = burst(22.0);
        assert_eq!(find_warmup(&t, &v, 65536.0), None);
        // Nor is a slow copy of a minute after the same stillness.
        let (t, v) = series(234, 2.0, |t| {
            1e9 + 80.0 * 1_048_576.0 * ((t - 22.0) / 60.0).clamp(0.0, 1.0) + 2e4 * wiggle(t)
        });
        assert_eq!(find_warmup(&t, &v, 65536.0), None);
        // A start-up (a build in the first 10 s), 15 s still, then the
        // burst: the start-up ends where the build settled.
        let (t, v) = series(234, 2.0, |t| {
            1e9 + 200.0 * 1_048_576.0 * (t / 10.0).min(1.0)
                + 80.0 * 1_048_576.0 * ((t - 25.0) / 25.0).clamp(0.0, 1.0)
                + 2e4 * wiggle(t)
        });
        let w = find_warmup(&t, &v, 65536.0).expect("the build's start-up");
        assert!((w.at_s - 10.0).abs() < 1.5, "{w:?}");
        // The same climb from the start is a start-up.
        let (t, v) = burst(0.0);
        let w = find_warmup(&t, &v, 65536.0).expect("a start-up");
        assert!((w.at_s - 25.0).abs() < 2.0, "{w:?}");
    }
}
