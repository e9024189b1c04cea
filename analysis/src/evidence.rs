//! Evidence of a trend by weight, not by count: does a level's series rise
//! (or fall) beyond its noise, at the receipt's confidence, whatever the
//! number of its readings?
//!
//! The test is the Mann–Kendall trend test, the classical companion of the
//! Theil–Sen slope the analysis already reports (both rest on the same
//! pairwise comparisons). For readings `x_1 … x_n` in time order,
//!
//! ```text
//! S = Σ_{i<j} sign(x_j − x_i)
//! Var S = [n(n−1)(2n+5) − Σ_g t_g(t_g−1)(2t_g+5)] / 18
//! ```
//!
//! where `t_g` are the sizes of groups of equal values (memory moves by
//! pages, so ties are common). Under "no trend" with independent noise,
//! `Z = (S − sign S) / √Var S` is standard normal; a trend is evidence when
//! `|Z| ≥ Z_CRIT`, the two-sided normal quantile of [`CONFIDENCE`]. It needs
//! no estimate of the noise's size or shape, so twelve readings rising by a
//! third are as strong evidence as twelve thousand (and eight readings that
//! all rise is the fewest that can pass: a monotone series of `n` readings
//! reaches `|Z| ≈ 1.5 √n`).
//!
//! Memory series are not independent from reading to reading: a value
//! carried between two reads, an allocator that wanders, a collector's
//! sawtooth. Autocorrelation `ρ_k` of the residuals around the Theil–Sen
//! line inflates the variance of `S` by `f = 1 + 2 Σ_k (1 − k/n) ρ_k`
//! (the integrated autocorrelation time; `n / f` readings are worth as much
//! as independent ones). The sum runs over the first lags while `ρ_k` is
//! itself significant (above `1.645 / √n`, one-sided 5 %; and at least by
//! an AR(1)'s `(1 + ρ_1) / (1 − ρ_1)`, since fitting the line removes a
//! wandering level's long-lag correlation from its residuals), as Hamed and
//! Rao (1998) keep only significant autocorrelations: a dozen readings
//! estimate `ρ` only to ±0.3, and correcting by chance would discard real
//! evidence at random, while a random walk or a sawtooth (autocorrelated
//! over many lags) is not taken for a trend. Series longer than
//! [`MAX_BINS`] readings are tested as that many bin means.
//!
//! A level can also wander as a random walk does (each reading the last one
//! plus a step): then its residuals are autocorrelated at every lag and the
//! test above, rightly, finds little evidence in the levels, though steps
//! that keep going one way are a trend. The second test reads the steps:
//! `Z_steps = drift / (σ_steps √(n − 1))`, the drift (between the medians of
//! the first and last 5 % of the readings) against the standard deviation
//! of the steps between consecutive readings. It is exact for a random walk
//! and conservative for stationary noise (whose steps spread more than its
//! drift can move: a collector's sawtooth drops all it gained in a few
//! large steps). A trend is evidence when either statistic passes; each is
//! at [`CONFIDENCE`], so both together call at most 0.2 % of trendless
//! channels growth. Both need [`MIN_READINGS`] readings.
//!
//! What growth could this run have detected? For a linear trend of slope
//! `b` under white noise of standard deviation `σ`, `n` readings evenly
//! spread over `D` seconds give `E[Z] ≈ b D √n / (2 √π σ)`, so the smallest
//! detectable slope is
//!
//! ```text
//! b_min = 2 √π · Z_CRIT · σ · √f / (D √n)        (f: the variance inflation)
//! ```
//!
//! and, turned around, a leak of rate `b` on a channel read `r` times a
//! second is detectable after
//!
//! ```text
//! D_min = max( (2 √π · Z_CRIT · σ · √(f / r) / b)^(2/3),  8 f / r )
//! ```
//!
//! (the second term: the fewest readings that can pass at all). `σ` is the
//! robust scatter of the readings around the Theil–Sen line. Growth must
//! also exceed the channel's evidence floor (its resolution, see
//! [`super::rules::evidence_floor`]) before it is called growth, which adds
//! `floor / b` to the time it takes.

use serde::{Deserialize, Serialize};

/// The confidence a growth verdict is stated at (two-sided).
pub const CONFIDENCE: f64 = 0.999;

/// The standard normal quantile for [`CONFIDENCE`], two-sided: Φ⁻¹(0.9995).
pub const Z_CRIT: f64 = 3.290_526_731_491_926;

/// The fewest effective readings with which any trend can pass at
/// [`CONFIDENCE`]: 8 readings that all rise give |Z| = 3.34.
pub const MIN_READINGS: f64 = 8.0;

/// One-sided 5 % normal quantile: lag-1 autocorrelation below `Z_RHO / √n`
/// is not told from none (Hamed–Rao: only significant autocorrelation
/// corrects the variance).
const Z_RHO: f64 = 1.644_853_626_951_472;

/// What the readings say about a trend, and what they could have shown.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TrendEvidence {
    /// Readings tested.
    pub readings: usize,
    /// Seconds from the first tested reading to the last.
    pub span_s: f64,
    /// The Mann–Kendall statistic, corrected for autocorrelation: a trend
    /// is evidence when `|z| ≥ z_crit`.
    pub z: f64,
    /// The increments' statistic: the drift over `σ_steps √(n − 1)`, where
    /// `σ_steps` is the standard deviation of the steps between readings (a
    /// random walk's test for drift; see the module documentation).
    pub z_steps: f64,
    pub z_crit: f64,
    /// The confidence the test is stated at.
    pub confidence: f64,
    /// Lag-1 autocorrelation of the residuals (0 where not significant).
    pub rho: f64,
    /// How much the residuals' autocorrelation inflates the variance of the
    /// statistic (1: independent readings).
    pub inflation: f64,
    /// Readings worth as much as independent ones: `readings / inflation`
    /// (of bin means, for long series).
    pub effective_readings: f64,
    /// The robust scatter around the trend line (the noise `σ`; of bin
    /// means, for long series).
    pub scatter: f64,
    /// The smallest slope (per second) these readings could tell from their
    /// noise at the confidence (and above the evidence floor over the span);
    /// `None` when too few effective readings can show any trend.
    pub detectable_per_s: Option<f64>,
}

impl TrendEvidence {
    /// A trend beyond the noise, at the confidence, by either test.
    pub fn significant(&self) -> bool {
        self.strongest() >= self.z_crit
    }

    /// The stronger of the two statistics.
    pub fn strongest(&self) -> f64 {
        self.z.abs().max(self.z_steps.abs())
    }

    /// How sure the tests are that there is a trend: `1 − p` (two-sided)
    /// of the stronger one.
    pub fn certainty(&self) -> f64 {
        1.0 - 2.0 * normal_tail(self.strongest())
    }
}

/// The upper tail of the standard normal, `1 − Φ(z)`.
pub fn normal_tail(z: f64) -> f64 {
    0.5 * libm::erfc(z / std::f64::consts::SQRT_2)
}

/// Mann–Kendall `S` and its variance with ties, in O(n log n): each
/// reading counts the earlier readings below and above it (a Fenwick tree
/// over the ranks of the values).
fn mann_kendall(x: &[f64]) -> (f64, f64) {
    let n = x.len();
    let mut sorted: Vec<f64> = x.to_vec();
    sorted.sort_by(f64::total_cmp);
    // Tie groups for the variance, and dense ranks for the counting.
    let mut ties = 0.0;
    let mut distinct: Vec<f64> = Vec::with_capacity(n);
    let mut i = 0;
    while i < n {
        let mut j = i + 1;
        while j < n && sorted[j] == sorted[i] {
            j += 1;
        }
        let tg = (j - i) as f64;
        ties += tg * (tg - 1.0) * (2.0 * tg + 5.0);
        distinct.push(sorted[i]);
        i = j;
    }
    let m = distinct.len();
    let mut tree = vec![0u64; m + 1];
    let mut s: i64 = 0;
    for (seen, &v) in x.iter().enumerate() {
        let r = distinct.partition_point(|&d| d < v); // 0-based rank
        // Earlier readings strictly below: prefix sum over ranks < r.
        let mut below = 0u64;
        let mut k = r;
        while k > 0 {
            below += tree[k];
            k &= k - 1;
        }
        // Earlier readings at or below: prefix over ranks ≤ r.
        let mut at_or_below = 0u64;
        let mut k = r + 1;
        while k > 0 {
            at_or_below += tree[k];
            k &= k - 1;
        }
        let above = seen as u64 - at_or_below;
        s += below as i64 - above as i64;
        let mut k = r + 1;
        while k <= m {
            tree[k] += 1;
            k += k & k.wrapping_neg();
        }
    }
    let nf = n as f64;
    let var = ((nf * (nf - 1.0) * (2.0 * nf + 5.0)) - ties) / 18.0;
    (s as f64, var.max(0.0))
}

/// The variance inflation of `S` that the residuals' autocorrelation
/// implies: `1 + 2 Σ_k (1 − k/n) ρ_k`, summed over the first lags while
/// `ρ_k` is significant (above `Z_RHO / √n`), at most a quarter of the
/// series, and at least the AR(1) inflation of `ρ_1`. Returns it with
/// `ρ_1` (0 where not significant).
fn inflation(r: &[f64]) -> (f64, f64) {
    let n = r.len();
    let den: f64 = r.iter().map(|v| v * v).sum();
    if n < 3 || den <= 0.0 {
        return (1.0, 0.0);
    }
    let nf = n as f64;
    let threshold = Z_RHO / nf.sqrt();
    let (mut f, mut rho1) = (1.0, 0.0);
    for k in 1..=(n / 4).max(1) {
        let rho = r[k..].iter().zip(r).map(|(a, b)| a * b).sum::<f64>() / den;
        if rho <= threshold {
            break;
        }
        if k == 1 {
            rho1 = rho;
        }
        f += 2.0 * (1.0 - k as f64 / nf) * rho;
    }
    // A wandering level's residuals lose their long-lag correlation to the
    // fitted line, which cuts the sum short: an AR(1) with the same `ρ_1`
    // inflates at least by (1 + ρ_1) / (1 − ρ_1).
    let ar1 = (1.0 + rho1) / (1.0 - rho1).max(1e-3);
    (f.max(ar1), rho1)
}

/// Readings above this many are tested as this many bin means of
/// consecutive readings: under white noise a trend test on bin means
/// loses no power, and the autocorrelation sum stays cheap.
pub const MAX_BINS: usize = 2048;

/// Tests readings `(t, x)` (time order, no gaps) for a trend, given the
/// Theil–Sen line through them (`slope`, `intercept`) and the channel's
/// evidence floor.
pub fn test(
    t: &[f64],
    x: &[f64],
    slope: f64,
    intercept: f64,
    drift: f64,
    floor: f64,
) -> TrendEvidence {
    let n = t.len().min(x.len());
    let span_s = if n > 1 { t[n - 1] - t[0] } else { 0.0 };
    let (bt, bx): (Vec<f64>, Vec<f64>) = if n > MAX_BINS {
        let per = n.div_ceil(MAX_BINS);
        t[..n]
            .chunks(per)
            .zip(x[..n].chunks(per))
            .map(|(tc, xc)| {
                let k = tc.len() as f64;
                (tc.iter().sum::<f64>() / k, xc.iter().sum::<f64>() / k)
            })
            .unzip()
    } else {
        (t[..n].to_vec(), x[..n].to_vec())
    };
    let m = bx.len();
    let (s, var) = if m >= 2 {
        mann_kendall(&bx)
    } else {
        (0.0, 0.0)
    };
    let resid: Vec<f64> = bt
        .iter()
        .zip(&bx)
        .map(|(ti, xi)| xi - intercept - slope * ti)
        .collect();
    let scatter = {
        let mut a: Vec<f64> = resid.iter().map(|r| r.abs()).collect();
        1.4826 * crate::stats::median(&mut a)
    };
    let scatter = if scatter.is_finite() { scatter } else { 0.0 };
    // Centred, and clipped at 3σ so a single spike does not decide the
    // autocorrelation.
    let clip = if scatter > 0.0 {
        3.0 * scatter
    } else {
        f64::INFINITY
    };
    let clipped: Vec<f64> = resid.iter().map(|r| r.clamp(-clip, clip)).collect();
    let mean = clipped.iter().sum::<f64>() / clipped.len().max(1) as f64;
    let clipped: Vec<f64> = clipped.iter().map(|r| r - mean).collect();
    let (f, rho) = inflation(&clipped);
    let z = if var > 0.0 {
        (s - s.signum()) / (var * f).sqrt()
    } else {
        0.0
    };
    let effective = m as f64 / f;
    // The increments' test: the drift against the spread of the steps
    // between readings, as a random walk's.
    let steps = x[..n].windows(2).map(|w| w[1] - w[0]);
    let k = n.saturating_sub(1) as f64;
    let step_sd = if n >= 3 {
        let mean = (x[n - 1] - x[0]) / k;
        (steps.map(|d| (d - mean) * (d - mean)).sum::<f64>() / (k - 1.0)).sqrt()
    } else {
        0.0
    };
    let z_steps = if n as f64 >= MIN_READINGS && step_sd > 0.0 {
        drift / (step_sd * k.sqrt())
    } else {
        0.0
    };
    let detectable_per_s = (effective >= MIN_READINGS && span_s > 0.0).then(|| {
        let levels = 2.0 * std::f64::consts::PI.sqrt() * Z_CRIT * scatter * f.sqrt()
            / (span_s * (m as f64).sqrt());
        let walk = if step_sd > 0.0 {
            Z_CRIT * step_sd * k.sqrt() / span_s
        } else {
            f64::INFINITY
        };
        levels.min(walk).max(floor / span_s)
    });
    TrendEvidence {
        readings: n,
        span_s,
        z,
        z_steps,
        z_crit: Z_CRIT,
        confidence: CONFIDENCE,
        rho,
        inflation: f,
        effective_readings: effective,
        scatter,
        detectable_per_s,
    }
}

/// The statistical limit: the shortest run after which a trend of `rate`
/// per second is told from noise `sigma` (whose autocorrelation inflates the variance by `inflation`) at
/// [`CONFIDENCE`], on a channel read `per_s` times a second (see the module
/// documentation). The evidence floor is not in it: see [`floor_time`].
pub fn limit_s(rate: f64, sigma: f64, inflation: f64, per_s: f64) -> f64 {
    let f = inflation.max(1.0);
    let count = MIN_READINGS * f / per_s;
    if rate.abs() <= 0.0 {
        return f64::INFINITY;
    }
    let stat = (2.0 * std::f64::consts::PI.sqrt() * Z_CRIT * sigma * (f / per_s).sqrt()
        / rate.abs())
    .powf(2.0 / 3.0);
    stat.max(count)
}

/// The time a trend of `rate` per second takes to grow past the evidence
/// floor `floor`.
pub fn floor_time(rate: f64, floor: f64) -> f64 {
    if rate.abs() <= 0.0 {
        f64::INFINITY
    } else {
        floor / rate.abs()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute(x: &[f64]) -> f64 {
        let mut s = 0.0;
        for i in 0..x.len() {
            for j in i + 1..x.len() {
                s += (x[j] - x[i]).signum() * f64::from(u8::from(x[j] != x[i]));
            }
        }
        s
    }

    #[test]
    fn the_statistic_counts_pairs_like_the_definition() {
        let cases: [&[f64]; 5] = [
            &[1.0, 2.0, 3.0, 4.0],
            &[4.0, 3.0, 2.0, 1.0],
            &[1.0, 1.0, 2.0, 2.0, 1.0, 3.0],
            &[5.0, 5.0, 5.0],
            &[0.3, -1.0, 2.5, 2.5, 0.0, 7.0, -3.0, 0.3],
        ];
        for x in cases {
            assert_eq!(mann_kendall(x).0, brute(x), "{x:?}");
        }
        // Ties reduce the variance: 3 equal values have none.
        assert_eq!(mann_kendall(&[5.0, 5.0, 5.0]).1, 0.0);
        let (_, var) = mann_kendall(&[1.0, 2.0, 3.0, 4.0]);
        assert!((var - 4.0 * 3.0 * 13.0 / 18.0).abs() < 1e-9);
    }

    #[test]
    fn eight_rising_readings_are_the_fewest_that_pass() {
        for n in 3..12 {
            let t: Vec<f64> = (0..n).map(|i| i as f64 * 5.0).collect();
            let x: Vec<f64> = t.iter().map(|t| 1e9 + 1e6 * t).collect();
            let e = test(&t, &x, 1e6, 1e9, x[n - 1] - x[0], 65536.0);
            assert_eq!(e.significant(), n >= 8, "{n} readings: z = {}", e.z);
        }
    }

    #[test]
    fn a_random_walk_is_not_a_trend_but_a_trend_in_white_noise_is() {
        // A reproducible walk, and white noise (σ = 3) around a trend that
        // rises by 10σ over the run.
        let mut state = 7u64;
        let mut gauss = || {
            let mut s = 0.0;
            for _ in 0..12 {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                s += (state >> 11) as f64 / (1u64 << 53) as f64;
            }
            s - 6.0
        };
        let n = 600;
        let t: Vec<f64> = (0..n).map(f64::from).collect();
        let mut walk = vec![0.0; n as usize];
        for i in 1..n as usize {
            walk[i] = walk[i - 1] + gauss();
        }
        // Least squares: the test takes the line as given.
        let fit = |x: &[f64]| {
            let k = x.len() as f64;
            let (mt, mx) = (t.iter().sum::<f64>() / k, x.iter().sum::<f64>() / k);
            let cov: f64 = t.iter().zip(x).map(|(t, x)| (t - mt) * (x - mx)).sum();
            let var: f64 = t.iter().map(|t| (t - mt) * (t - mt)).sum();
            let b = cov / var;
            (b, mx - b * mt)
        };
        let (b, a) = fit(&walk);
        let e = test(&t, &walk, b, a, walk[walk.len() - 1] - walk[0], 0.0);
        assert!(e.rho > 0.5, "{e:?}");
        assert!(!e.significant(), "{e:?}");
        let rise = 30.0;
        let noisy: Vec<f64> = t
            .iter()
            .map(|ti| rise * ti / 600.0 + 3.0 * gauss())
            .collect();
        let (b2, a2) = fit(&noisy);
        let e2 = test(&t, &noisy, b2, a2, rise, 0.0);
        assert!(e2.significant(), "{e2:?}");
        assert!(
            e2.inflation < 1.3,
            "white noise: little autocorrelation {e2:?}"
        );
    }

    #[test]
    fn the_limit_shrinks_with_more_readings_and_a_faster_leak() {
        let base = limit_s(1000.0, 1e5, 1.0, 1.0);
        assert!(limit_s(1000.0, 1e5, 1.0, 10.0) < base);
        assert!(limit_s(2000.0, 1e5, 1.0, 1.0) < base);
        assert!(limit_s(1000.0, 1e5, 3.0, 1.0) > base);
        // Noise-free: only the count of readings limits.
        assert_eq!(limit_s(1000.0, 0.0, 1.0, 2.0), 4.0);
        assert!(limit_s(0.0, 1.0, 1.0, 1.0).is_infinite());
        assert_eq!(floor_time(1024.0, 65536.0), 64.0);
    }
}
