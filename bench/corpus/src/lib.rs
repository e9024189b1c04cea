//! A labelled corpus that measures the analysis: synthetic level series of
//! known shape (flat, linear of several slopes, staircases of several quanta
//! and periods, a collector's sawtooth, a leak that starts late, a plateau
//! after start-up, a flicker, a few single pages) × noise levels × lengths ×
//! sample rates, each with the verdict it must get and, for linear ones, its
//! true slope. `flatline bench analysis --corpus` runs [`analyze`] over it
//! (and over labelled channels of the shipped recordings) and prints the
//! confusion matrix and the slope errors.
//!
//! Each series has a truth by construction ([`Case::truth`]: it grows, holds
//! or falls), which the tests score against, and a verdict it is expected
//! to get by shape (`expected`, for the confusion matrix). The ambiguous
//! middle (trends of 1 to 5 times the noise over the run) is in it: whether
//! a run can show such growth is the analysis's own statement (its
//! detectable rate), and growth it says it could see must be found.
//!
//! [`analyze`]: flatline_analysis::analyze

use flatline_analysis::Verdict;
use flatline_arena::workload::SplitMix64;

/// One labelled series.
#[derive(Debug, Clone)]
pub struct Case {
    /// Shape and parameters, e.g. `linear 1MiB/s σ=0.1% 6000@10Hz`.
    pub name: String,
    /// The shape's family (a row of the confusion matrix is the expected verdict).
    pub family: &'static str,
    pub expected: Verdict,
    pub t: Vec<f64>,
    pub v: Vec<f64>,
    /// For linear series: the true slope per second.
    pub slope: Option<f64>,
    /// Growth with one long-run rate (linear series, staircases): that rate
    /// per second, the truth [`truth_z`] is measured against.
    pub true_rate: Option<f64>,
    /// The evidence floor the channel would have (64 KiB for host memory).
    pub min_growth: f64,
}

/// What a series truly does, by construction (not by any rule of the
/// analysis): it grows, it does not, or it falls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truth {
    Growth,
    Flat,
    Falling,
}

impl Case {
    /// The truth of the series, by its family's construction.
    pub fn truth(&self) -> Truth {
        match self.family {
            "linear" | "staircase" | "late leak" | "sawtooth leak" | "ambiguous" | "threshold"
            | "faint staircase" => Truth::Growth,
            "falling" => Truth::Falling,
            _ => Truth::Flat,
        }
    }

    /// Growth whose truth makes it clear: its [`truth_z`] at least
    /// [`CLEAR_Z`] and its rise over the run at least its evidence floor
    /// (the reading's resolution: under it nothing is certain, however
    /// smooth). `None`: no one long-run rate to measure against.
    pub fn clear(&self) -> Option<bool> {
        let rate = self.true_rate.filter(|_| self.truth() == Truth::Growth)?;
        let span = match (self.t.first(), self.t.last()) {
            (Some(a), Some(b)) => b - a,
            _ => 0.0,
        };
        Some(rate * span >= self.min_growth && truth_z(&self.t, &self.v, rate) >= CLEAR_Z)
    }

    /// The analysis of this series, as a level with its evidence floor.
    pub fn analyze(&self) -> flatline_analysis::ChannelAnalysis {
        flatline_analysis::analyze(
            &self.t,
            &self.v,
            &flatline_analysis::Context {
                min_growth: self.min_growth,
                ..flatline_analysis::Context::default()
            },
        )
    }
}

/// The truth's limit: a growth channel whose [`truth_z`] is at least this
/// is clearly detectable, and the analysis must find it.
pub const CLEAR_Z: f64 = 10.0;

/// How clearly a series' true rate stands out of its own noise, from its
/// construction, not from any rule of the analysis: the residuals after
/// removing the true slope (`v − rate·t`, about their mean), their lag-1
/// autocorrelation `ρ` (0 when negative), the effective number of readings
/// `n (1 − ρ) / (1 + ρ)`, the slope's standard error over the span
/// `σ / √Σ(t − t̄)² · √(n / n_eff)`, and `z = rate / that error`. A series
/// with no residual at all (a noise-free climb) is infinitely clear; fewer
/// than three readings are not clear at all (0). Readings that are `NaN`
/// are not readings.
pub fn truth_z(t: &[f64], v: &[f64], rate_per_s: f64) -> f64 {
    let (ts, rs): (Vec<f64>, Vec<f64>) = t
        .iter()
        .zip(v)
        .filter(|(t, v)| t.is_finite() && v.is_finite())
        .map(|(&t, &v)| (t, v - rate_per_s * t))
        .unzip();
    let n = ts.len();
    if n < 3 {
        return 0.0;
    }
    let nf = n as f64;
    let t_mean = ts.iter().sum::<f64>() / nf;
    let r_mean = rs.iter().sum::<f64>() / nf;
    let e: Vec<f64> = rs.iter().map(|r| r - r_mean).collect();
    let sxx: f64 = ts.iter().map(|t| (t - t_mean).powi(2)).sum();
    let see: f64 = e.iter().map(|e| e * e).sum();
    if sxx <= 0.0 {
        return 0.0;
    }
    // Residuals within rounding of none: the climb is exact.
    let scale = rs.iter().fold(0.0f64, |m, r| m.max(r.abs())).max(1.0);
    if see.sqrt() <= 1e-12 * scale * nf.sqrt() {
        return f64::INFINITY;
    }
    let rho = (e.windows(2).map(|w| w[0] * w[1]).sum::<f64>() / see).clamp(0.0, 0.999);
    let n_eff = (nf * (1.0 - rho) / (1.0 + rho)).max(2.0);
    let sigma = (see / (nf - 1.0)).sqrt();
    let se = sigma / sxx.sqrt() * (nf / n_eff).sqrt();
    rate_per_s / se
}

/// Approximately normal noise (sum of 12 uniforms), reproducible.
struct Noise(SplitMix64);

impl Noise {
    fn next(&mut self, sigma: f64) -> f64 {
        let s: f64 = (0..12)
            .map(|_| (self.0.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
            .sum();
        (s - 6.0) * sigma
    }
}

const PAGE: f64 = 4096.0;
const MIB: f64 = 1_048_576.0;
const FLOOR: f64 = 16.0 * PAGE;

/// The whole corpus, the same every time: for each size and noise level,
/// one family after another, in the order (and from the seeds) they were
/// added, so every series keeps its noise when a family is added.
pub fn generate() -> Vec<Case> {
    let mut out = Vec::new();
    let mut seeds = Seeds {
        first: 1,
        // Families added later draw their noise from seeds of their own, so
        // the series before them keep theirs.
        later: 1 << 32,
    };
    let sizes: [(usize, f64); 4] = [(100, 1.0), (600, 10.0), (6000, 10.0), (36_000, 100.0)];
    for &(n, hz) in &sizes {
        for &rel in &[0.0, 1e-4, 1e-3, 2e-2] {
            let g = Grid::new(n, hz, rel);
            let s = &mut seeds;
            flat(&g, s, &mut out);
            linear(&g, s, &mut out);
            staircases(&g, s, &mut out);
            sawtooth(&g, s, &mut out);
            late_leak(&g, s, &mut out);
            plateau(&g, s, &mut out);
            borderline(&g, s, &mut out);
            if g.sigma > 0.0 {
                ambiguous(&g, s, &mut out);
            } else {
                thresholds(&g, s, &mut out);
            }
            falling(&g, s, &mut out);
            spikes(&g, s, &mut out);
            two_early_steps(&g, s, &mut out);
            slowing_start_ups(&g, s, &mut out);
            steps_and_a_dip(&g, s, &mut out);
            sawtooth_leak(&g, s, &mut out);
            flicker(&g, s, &mut out);
        }
        out.push(three_pages(n, hz));
    }
    out
}

/// The two seed sequences the families draw from (see [`generate`]).
struct Seeds {
    first: u64,
    later: u64,
}

/// One size and noise level of the corpus: what every family's series of
/// it share.
struct Grid {
    n: usize,
    hz: f64,
    duration: f64,
    rel: f64,
    sigma: f64,
    level: f64,
    /// What a series that holds gets at this noise: flat while 3.3σ ≤ 1 %
    /// of the level, noisy above.
    flat: Verdict,
}

impl Grid {
    fn new(n: usize, hz: f64, rel: f64) -> Grid {
        let level = 2e9;
        Grid {
            n,
            hz,
            duration: n as f64 / hz,
            rel,
            sigma: rel * level,
            level,
            flat: if rel <= 1e-3 {
                Verdict::Flat
            } else {
                Verdict::Noisy
            },
        }
    }

    /// A series of shape `f` (of the sample's index and time) plus this
    /// grid's noise, drawn from the next of `seed`.
    fn shape(
        &self,
        f: &dyn Fn(usize, f64) -> f64,
        seed: &mut u64,
        name: String,
        family: &'static str,
        expected: Verdict,
        slope: Option<f64>,
    ) -> Case {
        *seed += 1;
        let mut noise = Noise(SplitMix64::new(*seed));
        let t: Vec<f64> = (0..self.n).map(|i| i as f64 / self.hz).collect();
        let v = t
            .iter()
            .enumerate()
            .map(|(i, &ti)| f(i, ti) + noise.next(self.sigma))
            .collect();
        Case {
            name: format!("{name} σ={}% {}@{}Hz", self.rel * 100.0, self.n, self.hz),
            family,
            expected,
            t,
            v,
            slope,
            true_rate: slope,
            min_growth: FLOOR,
        }
    }
}

/// Flat: within 1 % of its level while 3.3σ ≤ 1 %.
fn flat(g: &Grid, s: &mut Seeds, out: &mut Vec<Case>) {
    let level = g.level;
    out.push(g.shape(
        &|_, _| level,
        &mut s.first,
        "flat".into(),
        "flat",
        g.flat,
        None,
    ));
}

/// Linear, where the trend over the run is at least 10× the noise.
fn linear(g: &Grid, s: &mut Seeds, out: &mut Vec<Case>) {
    let level = g.level;
    for &per_s in &[64.0 * PAGE, MIB, 16.0 * MIB] {
        let trend = per_s * g.duration;
        if trend >= 10.0 * g.sigma && trend > FLOOR && trend > 1e-3 * level {
            out.push(g.shape(
                &|_, t| level + per_s * t,
                &mut s.first,
                format!("linear {}/s", per_s),
                "linear",
                Verdict::Linear,
                Some(per_s),
            ));
        }
    }
}

/// Staircases: quanta × periods (at least five steps in the run), each
/// step above the noise's reach.
fn staircases(g: &Grid, s: &mut Seeds, out: &mut Vec<Case>) {
    let (level, duration) = (g.level, g.duration);
    for &(q, period_s) in &[
        (64.0 * PAGE, duration / 6.0),
        (2.0 * MIB, duration / 10.0),
        (32.0 * MIB, duration / 5.0),
    ] {
        if q >= 10.0 * g.sigma && 5.0 * q > 1e-3 * level {
            let mut c = g.shape(
                &|_, t| level + q * (t / period_s).floor(),
                &mut s.first,
                format!("staircase {q} every {period_s:.1}s"),
                "staircase",
                Verdict::Staircase,
                None,
            );
            c.true_rate = Some(q / period_s);
            out.push(c);
        }
    }
}

/// A collector's sawtooth: grows 5 % over a tenth of the run, drops back.
fn sawtooth(g: &Grid, s: &mut Seeds, out: &mut Vec<Case>) {
    let (level, tooth) = (g.level, g.duration / 10.0);
    out.push(g.shape(
        &|_, t| level * (1.0 + 0.05 * ((t % tooth) / tooth)),
        &mut s.first,
        "sawtooth 5%".into(),
        "sawtooth",
        Verdict::Noisy,
        None,
    ));
}

/// A leak that starts at 40 % of the run, trend ≥ 10× noise.
fn late_leak(g: &Grid, s: &mut Seeds, out: &mut Vec<Case>) {
    let (level, duration, per_s) = (g.level, g.duration, MIB);
    let late_trend = per_s * duration * 0.6;
    if late_trend >= 10.0 * g.sigma && late_trend > 1e-3 * level {
        out.push(g.shape(
            &|_, t| level + per_s * (t - 0.4 * duration).max(0.0),
            &mut s.first,
            "late leak 1MiB/s".into(),
            "late leak",
            Verdict::Linear,
            None,
        ));
    }
}

/// A plateau after a start-up ramp over the first 20 %.
fn plateau(g: &Grid, s: &mut Seeds, out: &mut Vec<Case>) {
    let (level, duration) = (g.level, g.duration);
    let up = 0.05 * level;
    if up >= 10.0 * g.sigma {
        out.push(g.shape(
            &|_, t| level + up * (t / (0.2 * duration)).min(1.0),
            &mut s.first,
            "plateau after start-up".into(),
            "plateau",
            g.flat,
            None,
        ));
    }
}

/// Borderline: a trend of exactly 10× the noise.
fn borderline(g: &Grid, s: &mut Seeds, out: &mut Vec<Case>) {
    if g.sigma <= 0.0 {
        return;
    }
    let level = g.level;
    let per_s = 10.0 * g.sigma / g.duration;
    if per_s * g.duration > 1e-3 * level {
        out.push(g.shape(
            &|_, t| level + per_s * t,
            &mut s.first,
            "linear at 10× noise".into(),
            "linear",
            Verdict::Linear,
            Some(per_s),
        ));
    }
}

/// The ambiguous middle: trends of 1, 2, 3 and 5 times the noise over the
/// run. Growth by construction; whether a run this long can show it is the
/// analysis's to state (its detectable rate). And across the thresholds,
/// not only outside them: trends of 8 to 40 times the noise (the analysis's
/// own growth rule asks 10×). The truth's z says which of them any analysis
/// could see.
fn ambiguous(g: &Grid, s: &mut Seeds, out: &mut Vec<Case>) {
    let (level, duration) = (g.level, g.duration);
    for k in [1.0, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0, 40.0] {
        let per_s = k * g.sigma / duration;
        out.push(g.shape(
            &|_, t| level + per_s * t,
            &mut s.later,
            format!("linear at {k}× noise"),
            if k < 8.0 { "ambiguous" } else { "threshold" },
            Verdict::Linear,
            Some(per_s),
        ));
    }
    // A staircase whose steps are 2 to 8 times the noise: under the jumps
    // the analysis sees between single readings (six times the noise of
    // their differences), clear between the treads' means. A blind spot of
    // the analysis, reported apart (see the test below and
    // docs/drift-analysis.md).
    for k in [2.0, 4.0, 8.0] {
        let (q, period_s) = (k * g.sigma, duration / 8.0);
        let mut c = g.shape(
            &|_, t| level + q * (t / period_s).floor(),
            &mut s.later,
            format!("staircase of {k}× noise"),
            "faint staircase",
            // Steps no single reading resolves: a line at best.
            Verdict::Linear,
            None,
        );
        c.true_rate = Some(q / period_s);
        out.push(c);
    }
}

/// Without noise, rises of half to four times the evidence floor and of a
/// tenth to three times the material share of the level.
fn thresholds(g: &Grid, s: &mut Seeds, out: &mut Vec<Case>) {
    let level = g.level;
    for rise in [
        0.5 * FLOOR,
        FLOOR,
        2.0 * FLOOR,
        4.0 * FLOOR,
        0.1e-3 * level,
        0.3e-3 * level,
        1e-3 * level,
        3e-3 * level,
    ] {
        let per_s = rise / g.duration;
        // At the floor or under it: within the reading's resolution, read
        // flat.
        let expected = if rise <= FLOOR {
            Verdict::Flat
        } else {
            Verdict::Linear
        };
        out.push(g.shape(
            &|_, t| level + per_s * t,
            &mut s.later,
            format!("rise of {rise:.0} B"),
            "threshold",
            expected,
            Some(per_s),
        ));
    }
}

/// Falling: memory given back at 64 KiB/s (the pages a cache releases),
/// never growth.
fn falling(g: &Grid, s: &mut Seeds, out: &mut Vec<Case>) {
    let level = g.level;
    out.push(g.shape(
        &|_, t| level - 16.0 * PAGE * t,
        &mut s.later,
        "falling 64KiB/s".into(),
        "falling",
        Verdict::Linear,
        None,
    ));
}

/// Rare single-sample spikes (1 in 200, +3 %) on a flat level.
fn spikes(g: &Grid, s: &mut Seeds, out: &mut Vec<Case>) {
    let level = g.level;
    out.push(g.shape(
        &|i, _| level * if i % 200 == 199 { 1.03 } else { 1.0 },
        &mut s.first,
        "flat with spikes".into(),
        "spikes",
        g.flat,
        None,
    ));
}

/// Two early steps, then flat for the rest: settled, not growth.
fn two_early_steps(g: &Grid, s: &mut Seeds, out: &mut Vec<Case>) {
    let (level, duration) = (g.level, g.duration);
    let step = 0.05 * level;
    if step >= 10.0 * g.sigma {
        out.push(g.shape(
            &|_, t| level + step * ((t / (0.15 * duration)).floor().min(2.0)),
            &mut s.first,
            "two early steps".into(),
            "settled",
            g.flat,
            None,
        ));
    }
}

/// A start-up that climbs fast, then ever more slowly (loading a
/// framework: +35 % of the level over the first 10–18 %), then holds: its
/// last readings land just short of the plateau.
fn slowing_start_ups(g: &Grid, s: &mut Seeds, out: &mut Vec<Case>) {
    let level = g.level;
    let up = 0.35 * level;
    for share in [0.10, 0.14, 0.18] {
        let ramp = share * g.duration;
        out.push(g.shape(
            &|_, t| level + up * (t / ramp).min(1.0).sqrt(),
            &mut s.later,
            format!("start-up that slows over {:.0} %", share * 100.0),
            "plateau",
            g.flat,
            None,
        ));
    }
}

/// Two early steps, then held, with a dip of 0.3 % for a twentieth of the
/// run just after its middle (a cache dropped and refilled).
fn steps_and_a_dip(g: &Grid, s: &mut Seeds, out: &mut Vec<Case>) {
    let (level, duration) = (g.level, g.duration);
    let step = 0.01 * level;
    if step >= 10.0 * g.sigma {
        out.push(g.shape(
            &|_, t| {
                let steps = ((t / (0.1 * duration)).floor()).min(2.0);
                let dip = (0.5..0.55).contains(&(t / duration)) as u8 as f64;
                level + step * steps - 0.003 * level * dip
            },
            &mut s.later,
            "two early steps, a dip".into(),
            "settled",
            g.flat,
            None,
        ));
    }
}

/// A leak under a collector's sawtooth: 2 % teeth, 10 % growth over the run.
fn sawtooth_leak(g: &Grid, s: &mut Seeds, out: &mut Vec<Case>) {
    let (level, duration) = (g.level, g.duration);
    let tooth = duration / 8.0;
    out.push(g.shape(
        &|_, t| level * (1.0 + 0.1 * t / duration + 0.02 * ((t % tooth) / tooth)),
        &mut s.first,
        "leak under a sawtooth".into(),
        "sawtooth leak",
        Verdict::Linear,
        None,
    ));
}

/// Flicker between two levels 2 % apart.
fn flicker(g: &Grid, s: &mut Seeds, out: &mut Vec<Case>) {
    let level = g.level;
    let mut flips = SplitMix64::new(s.first + 1000);
    let flick: Vec<f64> = (0..g.n).map(|_| (flips.below(2)) as f64).collect();
    out.push(g.shape(
        &|i, _| level * (1.0 + 0.02 * flick[i]),
        &mut s.first,
        "flicker 2%".into(),
        "flicker",
        Verdict::Noisy,
        None,
    ));
}

/// Three single pages over the run, noiseless: under the floor, flat.
fn three_pages(n: usize, hz: f64) -> Case {
    let duration = n as f64 / hz;
    let t: Vec<f64> = (0..n).map(|i| i as f64 / hz).collect();
    let v = t
        .iter()
        .map(|&t| 5e7 + PAGE * ((t / duration * 4.0).floor().min(3.0)))
        .collect();
    Case {
        name: format!("three single pages {n}@{hz}Hz"),
        family: "pages",
        expected: Verdict::Flat,
        t,
        v,
        slope: None,
        true_rate: None,
        min_growth: FLOOR,
    }
}

/// The verdicts in the order a confusion matrix lists them.
pub const LEVEL_VERDICTS: [Verdict; 5] = [
    Verdict::Flat,
    Verdict::Staircase,
    Verdict::Linear,
    Verdict::Noisy,
    Verdict::Insufficient,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_corpus_is_labelled_and_deterministic() {
        let a = generate();
        let b = generate();
        assert!(a.len() > 60, "{}", a.len());
        assert_eq!(a.len(), b.len());
        assert!(
            a.iter()
                .zip(&b)
                .all(|(x, y)| x.v == y.v && x.name == y.name)
        );
        for fam in [
            "flat",
            "linear",
            "staircase",
            "sawtooth",
            "late leak",
            "plateau",
            "flicker",
            "pages",
            "spikes",
            "settled",
            "sawtooth leak",
            "ambiguous",
            "threshold",
            "faint staircase",
            "falling",
        ] {
            assert!(a.iter().any(|c| c.family == fam), "{fam}");
        }
    }

    /// The targets the drift-analysis documentation states, checked on the
    /// corpus by each series' truth: no flat or falling series called
    /// growth, at most 2 % of the growing series missed where the analysis
    /// says it could see them (their slope at least its detectable rate),
    /// and slopes within 5 % where the trend is 10× the noise.
    #[test]
    fn the_analysis_meets_its_targets_on_the_corpus() {
        let corpus = generate();
        let (mut detectable, mut missed) = (0, Vec::new());
        for c in &corpus {
            let a = c.analyze();
            let called = a.verdict.is_growth() && a.slope_per_s > 0.0;
            match c.truth() {
                Truth::Flat | Truth::Falling => {
                    assert!(!called, "false growth: {} {a:?}", c.name);
                }
                // The blind spot held apart (see the test below).
                Truth::Growth if c.family == "faint staircase" => {}
                Truth::Growth => {
                    let can = match (c.slope, a.evidence.and_then(|e| e.detectable_per_s)) {
                        (Some(s), Some(d)) => s >= d,
                        // Shapes without one slope (staircases, late and
                        // sawtooth leaks) are built to grow by ten times
                        // their noise or more.
                        (None, Some(_)) => true,
                        _ => false,
                    };
                    if can {
                        detectable += 1;
                        if !called {
                            missed.push(format!("{}: {:?}", c.name, a.verdict));
                        }
                    }
                }
            }
            // The slope is held where the trend is 10× the noise; the
            // families across that line are not.
            let across = matches!(c.family, "ambiguous" | "threshold");
            if let (Some(s), Verdict::Linear, false) = (c.slope, a.verdict, across) {
                assert!(
                    (a.slope_per_s / s - 1.0).abs() <= 0.05,
                    "{}: slope {} vs {s}",
                    c.name,
                    a.slope_per_s
                );
            }
        }
        assert!(detectable > 50, "{detectable}");
        assert!(
            missed.len() as f64 <= 0.02 * detectable as f64,
            "{} of {detectable} detectable growing series missed: {missed:#?}",
            missed.len()
        );
        // The ambiguous middle is in it, and some of it is found.
        let found = corpus
            .iter()
            .filter(|c| c.family == "ambiguous")
            .filter(|c| c.analyze().verdict.is_growth())
            .count();
        assert!(found > 0);
    }
    /// Recall judged against the truth, not the analysis's own statement:
    /// every series its construction makes clear ([`Case::clear`]) is
    /// called growth, at least 99 % of them in each family. One family is
    /// a blind spot the analysis has today and is held apart: staircases
    /// whose steps are under the jumps it sees between single readings
    /// (`faint staircase`; `flatline bench analysis --corpus` reports its
    /// recall, docs/drift-analysis.md states it).
    #[test]
    fn clear_growth_is_found_in_every_family() {
        let mut by: std::collections::BTreeMap<&str, (usize, Vec<String>)> = Default::default();
        for c in generate() {
            if c.clear() != Some(true) || c.family == "faint staircase" {
                continue;
            }
            let a = c.analyze();
            let e = by.entry(c.family).or_default();
            e.0 += 1;
            if !(a.verdict.is_growth() && a.slope_per_s > 0.0) {
                let z = truth_z(&c.t, &c.v, c.true_rate.unwrap());
                e.1.push(format!("{} (z {z:.1}): {:?}", c.name, a.verdict));
            }
        }
        assert!(
            by.contains_key("threshold") && by.contains_key("ambiguous"),
            "{by:?}"
        );
        let all: usize = by.values().map(|v| v.0).sum();
        assert!(all > 80, "{all} clear series");
        for (family, (clear, missed)) in &by {
            assert!(
                missed.len() as f64 <= 0.01 * *clear as f64,
                "{family}: {} of {clear} clear growing series missed: {missed:#?}",
                missed.len()
            );
        }
    }

    /// The truth's measure itself: white noise around a known slope gives
    /// z near `trend/σ · √(n/12)`; an exact climb is infinitely clear; a
    /// random walk's few effective readings make it unclear.
    #[test]
    fn truth_z_measures_the_noise_around_the_true_line() {
        let n = 1200;
        let t: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let mut noise = Noise(SplitMix64::new(7));
        let (sigma, rate) = (100.0, 0.5);
        let v: Vec<f64> = t.iter().map(|&t| rate * t + noise.next(sigma)).collect();
        let z = truth_z(&t, &v, rate);
        let expect = rate * n as f64 / sigma * (n as f64 / 12.0).sqrt();
        assert!((z / expect - 1.0).abs() < 0.1, "{z} vs {expect}");
        let exact: Vec<f64> = t.iter().map(|&t| 3.0 + rate * t).collect();
        assert_eq!(truth_z(&t, &exact, rate), f64::INFINITY);
        let mut walk = 0.0;
        let w: Vec<f64> = t
            .iter()
            .map(|&t| {
                walk += noise.next(sigma);
                rate * t + walk
            })
            .collect();
        assert!(truth_z(&t, &w, rate) < z / 5.0, "{}", truth_z(&t, &w, rate));
        assert_eq!(truth_z(&t[..2], &v[..2], rate), 0.0);
    }
}
