//! Axes a person reads at a glance: a unit chosen from what the plot shows
//! (KiB, MiB or GiB; µs or ms; k or M), at least three labelled ticks on
//! every y axis, signed ticks in the drift view, and time as `h:mm:ss`.

use std::ops::RangeInclusive;

use egui_plot::{GridInput, GridMark};
use flatline_telemetry::{Group, Unit};

/// How a plot's values are shown: multiplied by `scale`, in `label`.
#[derive(Debug, Clone, PartialEq)]
pub struct AxisUnit {
    pub scale: f64,
    pub label: String,
}

/// The unit for a plot of `u` whose largest magnitude is `largest` (in the
/// channel's own unit): the largest unit in which it is at least 1, so a
/// 2.5 MiB page table reads "2.5 MiB", not "0.002 GiB" or "2621440 B".
pub fn unit_for(g: Group, u: Unit, largest: f64) -> AxisUnit {
    let m = if largest.is_finite() {
        largest.abs()
    } else {
        0.0
    };
    let pick = |steps: &[(f64, &str)]| {
        let (scale, label) = steps
            .iter()
            .find(|(per, _)| m >= *per)
            .copied()
            .unwrap_or(*steps.last().expect("a unit"));
        AxisUnit {
            scale: 1.0 / scale,
            label: label.to_string(),
        }
    };
    const KI: f64 = 1024.0;
    match u {
        Unit::Bytes => pick(&[
            (KI * KI * KI, "GiB"),
            (KI * KI, "MiB"),
            (KI, "KiB"),
            (1.0, "B"),
        ]),
        Unit::Mebibytes => pick(&[(KI, "GiB"), (1.0, "MiB"), (1.0 / KI, "KiB")]),
        Unit::Nanoseconds => pick(&[(1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns")]),
        Unit::Microseconds => pick(&[(1e6, "s"), (1e3, "ms"), (1.0, "µs")]),
        Unit::Milliseconds => pick(&[(1e3, "s"), (1.0, "ms")]),
        Unit::Seconds => pick(&[(1.0, "s")]),
        Unit::Percent => pick(&[(1.0, "%")]),
        Unit::Celsius => pick(&[(1.0, "°C")]),
        Unit::PerSecond => pick(&[(1e9, "G/s"), (1e6, "M/s"), (1e3, "k/s"), (1.0, "/s")]),
        Unit::Count | Unit::Number => {
            let count = if u == Unit::Count && g != Group::Workload {
                "count"
            } else {
                ""
            };
            let mut a = pick(&[(1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, count)]);
            if a.scale == 1.0 {
                a.label = count.into();
            }
            a
        }
    }
}

/// Least distance between labelled y ticks, in points.
const TICK_SPACING: f64 = 26.0;
/// Most ticks a y axis is given.
const MOST_TICKS: f64 = 8.0;
/// Least distance between y tick labels egui_plot still draws (see
/// `linked_plot`'s `label_spacing`), with a margin.
const LABEL_SPACING: f64 = 16.0;

/// The y grid: steps of 1, 2 or 5 × 10ⁿ, the smallest at least
/// [`TICK_SPACING`] points apart, and never fewer than three ticks over the
/// visible range where that spacing allows (a flat plot in a band of ±1 %
/// still gets three readable ticks, not one).
pub fn y_marks(input: GridInput, spacing_min: f32) -> Vec<GridMark> {
    let (lo, hi) = input.bounds;
    let span = hi - lo;
    if !usable(span) || !usable(input.base_step_size) {
        return Vec::new();
    }
    // `base_step_size` is the value of `spacing_min` points.
    let per_point = input.base_step_size / f64::from(spacing_min);
    let points = span / per_point;
    // As many ticks as fit at TICK_SPACING, at least 3, at most MOST_TICKS;
    // of the nice steps whose ticks are at least LABEL_SPACING apart, the one
    // whose tick count is nearest that (never fewer than three where three
    // fit).
    let want = (points / TICK_SPACING).clamp(3.0, MOST_TICKS);
    let count = |s: f64| ((hi / s).floor() - (lo / s).ceil() + 1.0).max(0.0);
    let top = span.log10().floor() as i32;
    let steps =
        || (top - 4..=top + 1).flat_map(|n| [1.0, 2.0, 2.5, 5.0].map(|m| m * 10f64.powi(n)));
    // A plot too short for three readable ticks gets two, or one.
    let step = [3.0, 2.0, 1.0]
        .into_iter()
        .find_map(|least| {
            steps()
                .filter(|&s| count(s) >= least && s / per_point >= LABEL_SPACING)
                .min_by(|&a, &b| {
                    (count(a) - want)
                        .abs()
                        .total_cmp(&(count(b) - want).abs())
                        .then(b.total_cmp(&a))
                })
        })
        .unwrap_or_else(|| nice_at_most(span / 3.0));
    let mut out = Vec::new();
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    for k in first..=last {
        // One strength for every line; the labels read the step from it.
        out.push(GridMark {
            value: k as f64 * step,
            step_size: step,
        });
    }
    out
}

/// A positive, finite size (not NaN).
fn usable(x: f64) -> bool {
    x.is_finite() && x > 0.0
}

/// The largest of 1, 2, 2.5, 5 × 10ⁿ at most `x`.
fn nice_at_most(x: f64) -> f64 {
    let p = 10f64.powf(x.log10().floor());
    [5.0, 2.5, 2.0, 1.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&s| s <= x * (1.0 + 1e-9))
        .unwrap_or(p)
}

/// A y tick's text: as many decimals as the step between ticks needs,
/// thousands grouped, and a sign where the plot shows differences.
pub fn y_label(mark: GridMark, _range: &RangeInclusive<f64>, signed: bool) -> String {
    // Decimals that tell neighbouring ticks apart: the step's (`y_marks`
    // gives each mark the step between marks).
    let step = mark.step_size;
    // The fewest decimals that write the step exactly (0.25: two).
    let decimals = if usable(step) {
        (0..=6)
            .find(|&d| {
                let scaled = step * 10f64.powi(d);
                (scaled - scaled.round()).abs() < 1e-6 * scaled.max(1.0)
            })
            .unwrap_or(6) as usize
    } else {
        0
    };
    let v = if mark.value.abs() < step * 1e-6 {
        0.0
    } else {
        mark.value
    };
    let body = grouped(v.abs(), decimals);
    match (signed, v) {
        (true, v) if v > 0.0 => format!("+{body}"),
        (_, v) if v < 0.0 => format!("-{body}"),
        _ => body,
    }
}

/// `v` (not negative) with `decimals` places and its integer part grouped
/// by thousands.
fn grouped(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    match s.split_once('.') {
        Some((int, frac)) => format!(
            "{}.{frac}",
            flatline_receipt::fmt::thousands(int.parse().unwrap_or(0))
        ),
        None => flatline_receipt::fmt::thousands(s.parse().unwrap_or(0)),
    }
}

/// Least distance between labelled time ticks, in points ("1:02:03" is wide).
const TIME_TICK_SPACING: f64 = 90.0;

/// Steps a clock is read in, in seconds.
const CLOCK_STEPS: [f64; 20] = [
    0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0,
    3600.0, 7200.0, 10_800.0, 21_600.0, 43_200.0,
];

/// The time grid: ticks on steps a clock is read in (10 s, 1 min, 5 min,
/// 1 h, …), at least [`TIME_TICK_SPACING`] points apart; days past 12 h.
pub fn x_time_marks(input: GridInput, spacing_min: f32) -> Vec<GridMark> {
    x_clock_marks(input, spacing_min, 0.0)
}

/// [`x_time_marks`] for a clock that reads `origin + x`: ticks where that
/// clock shows a round time (12:15:00, not 12:13:17).
pub fn x_clock_marks(input: GridInput, spacing_min: f32, origin: f64) -> Vec<GridMark> {
    let (lo, hi) = (input.bounds.0 + origin, input.bounds.1 + origin);
    let span = hi - lo;
    if !usable(span) || !usable(input.base_step_size) {
        return Vec::new();
    }
    let per_point = input.base_step_size / f64::from(spacing_min);
    let least = per_point * TIME_TICK_SPACING;
    let step = CLOCK_STEPS
        .into_iter()
        .find(|&s| s >= least)
        .unwrap_or_else(|| 86_400.0 * (least / 86_400.0).ceil());
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last)
        .map(|k| GridMark {
            value: k as f64 * step - origin,
            step_size: step,
        })
        .collect()
}

/// The step grid: whole steps on 1, 2 or 5 × 10ⁿ, ticks at least
/// [`TIME_TICK_SPACING`] points apart (as the time grid's).
pub fn x_step_marks(input: GridInput, spacing_min: f32) -> Vec<GridMark> {
    let (lo, hi) = input.bounds;
    if !usable(hi - lo) || !usable(input.base_step_size) {
        return Vec::new();
    }
    let per_point = input.base_step_size / f64::from(spacing_min);
    let least = (per_point * TIME_TICK_SPACING).max(1.0);
    let decade = 10f64.powf(least.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * decade)
        .find(|&s| s >= least)
        .unwrap_or(10.0 * decade);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last)
        .map(|k| GridMark {
            value: k as f64 * step,
            step_size: step,
        })
        .collect()
}

/// A step tick's label: the whole step, its thousands grouped.
pub fn step_label(v: f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    let sign = if v < 0.0 { "-" } else { "" };
    format!(
        "{sign}{}",
        flatline_receipt::fmt::thousands(v.abs().round() as u64)
    )
}

/// A moment as a UTC wall clock reads it (`unix_s`: seconds since 1970).
pub fn wall(unix_s: f64) -> String {
    if !unix_s.is_finite() {
        return String::new();
    }
    let day = unix_s.rem_euclid(86_400.0).round() as u64 % 86_400;
    format!("{:02}:{:02}:{:02}", day / 3600, day / 60 % 60, day % 60)
}

/// Elapsed time as people tell it: seconds under a minute, `m:ss` under an
/// hour, `h:mm:ss` past it (`-` before the start).
pub fn clock(t: f64) -> String {
    if !t.is_finite() {
        return String::new();
    }
    let sign = if t < 0.0 { "-" } else { "" };
    let t = t.abs();
    if t < 60.0 {
        let s = format!("{t:.1}");
        let s = s.strip_suffix(".0").unwrap_or(&s);
        return format!("{sign}{s} s");
    }
    let whole = t.round() as u64;
    let (h, m, s) = (whole / 3600, whole / 60 % 60, whole % 60);
    if h == 0 {
        format!("{sign}{m}:{s:02}")
    } else {
        format!("{sign}{h}:{m:02}:{s:02}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_fits_the_magnitude() {
        let u = |u, m| unit_for(Group::Memory, u, m).label;
        assert_eq!(u(Unit::Bytes, 2.5 * 1048576.0), "MiB");
        assert_eq!(u(Unit::Bytes, 750.0 * 1048576.0), "MiB");
        assert_eq!(u(Unit::Bytes, 3.0 * 1073741824.0), "GiB");
        assert_eq!(u(Unit::Bytes, 4096.0), "KiB");
        assert_eq!(u(Unit::Bytes, 0.0), "B");
        assert_eq!(u(Unit::Mebibytes, 2048.0), "GiB");
        assert_eq!(u(Unit::Nanoseconds, 47_100.0), "µs");
        assert_eq!(u(Unit::PerSecond, 4.1e8), "M/s");
        assert_eq!(u(Unit::Count, 9560.0), "k");
        assert_eq!(u(Unit::Count, 6.0), "count");
        let gib = unit_for(Group::Memory, Unit::Bytes, 2e9);
        assert_eq!(gib.scale, 1.0 / 1073741824.0);
    }

    fn grid(lo: f64, hi: f64, height_points: f64) -> Vec<GridMark> {
        let spacing = 24.0;
        let input = GridInput {
            bounds: (lo, hi),
            base_step_size: (hi - lo) / height_points * spacing,
        };
        y_marks(input, spacing as f32)
    }

    fn marks(lo: f64, hi: f64, height_points: f64) -> Vec<f64> {
        grid(lo, hi, height_points)
            .into_iter()
            .map(|m| m.value)
            .collect()
    }

    #[test]
    fn a_flat_plot_still_gets_three_readable_ticks() {
        // 36 MiB ± 1 % in a plot 100 points high: ticks 35.7, 35.8, … not "36" alone.
        let m = grid(35.64, 36.36, 100.0);
        assert!(m.len() >= 3, "{m:?}");
        let labels: Vec<String> = m
            .iter()
            .map(|&g| y_label(g, &(35.64..=36.36), false))
            .collect();
        assert!(labels.iter().all(|l| l.contains('.')), "{labels:?}");
        let unique: std::collections::BTreeSet<_> = labels.iter().collect();
        assert_eq!(unique.len(), labels.len(), "{labels:?}");
        // A tall plot gets more, never more than eight.
        let tall = marks(0.0, 1000.0, 600.0);
        assert!((3..=8).contains(&tall.len()), "{tall:?}");
        // Any span, any height: at least three, never closer than labels fit.
        for (lo, hi) in [
            (31.68, 32.32),
            (920.0, 936.0),
            (0.0, 1e-3),
            (-5.0, 7.0),
            (1.1987, 1.2021),
        ] {
            for h in [60.0, 90.0, 130.0, 300.0] {
                let m = marks(lo, hi, h);
                assert!(m.len() >= 3, "{lo}..{hi} in {h}: {m:?}");
                let apart = (m[1] - m[0]) / (hi - lo) * h;
                assert!(apart >= LABEL_SPACING - 1e-9, "{lo}..{hi} in {h}: {m:?}");
            }
        }
        assert!(marks(5.0, 5.0, 100.0).is_empty());
    }

    #[test]
    fn drift_ticks_are_signed_and_big_ones_grouped() {
        let r = -2.0..=2.0;
        let l = |v: f64| {
            y_label(
                GridMark {
                    value: v,
                    step_size: 1.0,
                },
                &r,
                true,
            )
        };
        assert_eq!(
            (l(1.0), l(0.0), l(-1.0)),
            ("+1".into(), "0".into(), "-1".into())
        );
        // A step of 0.25 writes two decimals, a step of 0.2 one.
        let at = |value: f64, step_size: f64| y_label(GridMark { value, step_size }, &r, false);
        assert_eq!(
            (at(47.25, 0.25), at(47.4, 0.2)),
            ("47.25".into(), "47.4".into())
        );
        let big = y_label(
            GridMark {
                value: 1_250_000.0,
                step_size: 250_000.0,
            },
            &(0.0..=2e6),
            false,
        );
        assert_eq!(big, "1,250,000");
    }

    #[test]
    fn time_reads_as_a_clock() {
        assert_eq!(clock(12.5), "12.5 s");
        assert_eq!(clock(30.0), "30 s");
        assert_eq!(clock(75.0), "1:15");
        assert_eq!(clock(43_200.0), "12:00:00");
        assert_eq!(clock(11_520.4), "3:12:00");
        assert_eq!(clock(-5.0), "-5 s");
        // Ticks land on round clock times over three hours in 800 points.
        let input = GridInput {
            bounds: (0.0, 3.0 * 3600.0),
            base_step_size: 3.0 * 3600.0 / 800.0 * 24.0,
        };
        let m: Vec<f64> = x_time_marks(input, 24.0).iter().map(|m| m.value).collect();
        assert!(m.len() >= 3 && m.iter().all(|v| v % 600.0 == 0.0), "{m:?}");
        // On a wall clock that started at 12:03:17 UTC, ticks fall on its
        // round times, and read as it does.
        let origin = 1_700_000_000.0 - 1_700_000_000.0 % 86_400.0 + 12.0 * 3600.0 + 197.0;
        let input = GridInput {
            bounds: (0.0, 3.0 * 3600.0),
            base_step_size: 3.0 * 3600.0 / 800.0 * 24.0,
        };
        let m = x_clock_marks(input, 24.0, origin);
        assert!(m.iter().all(|g| (g.value + origin) % 600.0 == 0.0), "{m:?}");
        assert_eq!(wall(origin), "12:03:17");
        // Three hours in 800 points: a tick every 30 min, the first at 12:30.
        assert_eq!(wall(origin + m[0].value), "12:30:00");
        assert_eq!(wall(origin + m[1].value), "13:00:00");
    }

    #[test]
    fn steps_tick_on_whole_round_numbers() {
        // 15 steps across 800 points: a tick every 2, none between steps.
        let input = GridInput {
            bounds: (0.0, 15.0),
            base_step_size: 15.0 / 800.0 * 24.0,
        };
        let m: Vec<f64> = x_step_marks(input, 24.0).iter().map(|m| m.value).collect();
        assert_eq!(m, [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0]);
        // 3,974 steps: on 500s, at least three of them.
        let input = GridInput {
            bounds: (-20.0, 3974.0),
            base_step_size: 3994.0 / 800.0 * 24.0,
        };
        let m: Vec<f64> = x_step_marks(input, 24.0).iter().map(|m| m.value).collect();
        assert!(m.len() >= 3 && m.iter().all(|v| v % 500.0 == 0.0), "{m:?}");
        // Zoomed in to under one step a tick: whole steps still.
        let input = GridInput {
            bounds: (3.2, 4.9),
            base_step_size: 1.7 / 800.0 * 24.0,
        };
        let m: Vec<f64> = x_step_marks(input, 24.0).iter().map(|m| m.value).collect();
        assert_eq!(m, [4.0]);
        assert_eq!(step_label(12_500.0), "12,500");
        assert_eq!(step_label(-3.0), "-3");
    }
}
