use super::*;
use flatline_arena::workload::SplitMix64;

/// Approximately normal noise (sum of 12 uniforms), reproducible.
struct Noise(SplitMix64);

impl Noise {
    fn new(seed: u64) -> Self {
        Self(SplitMix64::new(seed))
    }
    fn next(&mut self, sigma: f64) -> f64 {
        let s: f64 = (0..12)
            .map(|_| (self.0.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
            .sum();
        (s - 6.0) * sigma
    }
}

/// `n` points at `hz`, values from `f(i, t)`.
fn series(n: usize, hz: f64, mut f: impl FnMut(usize, f64) -> f64) -> (Vec<f64>, Vec<f64>) {
    let t: Vec<f64> = (0..n).map(|i| i as f64 / hz).collect();
    let v = t.iter().enumerate().map(|(i, &t)| f(i, t)).collect();
    (t, v)
}

fn run(t: &[f64], v: &[f64]) -> ChannelAnalysis {
    analyze(t, v, &Context::default())
}

#[test]
fn flat_with_noise_is_flat() {
    let mut noise = Noise::new(1);
    let (t, v) = series(20_000, 100.0, |_, _| 1e9 + noise.next(1e5));
    let a = run(&t, &v);
    assert_eq!(a.verdict, Verdict::Flat, "{a:?}");
    assert_eq!(a.jumps, 0);
    assert!(
        a.drift.abs() < 1e5 && a.projection_24h.unwrap().abs() < 1e8,
        "{a:?}"
    );
    // A noiseless constant too.
    let (t, v) = series(1000, 10.0, |_, _| 42.0);
    let a = run(&t, &v);
    assert_eq!(
        (a.verdict, a.drift, a.slope_per_s),
        (Verdict::Flat, 0.0, 0.0)
    );
}

#[test]
fn steady_growth_is_linear_with_the_right_slope() {
    let mut noise = Noise::new(2);
    // 1 MiB/s on 1 GiB with 64 KiB of noise, 10 minutes at 10 Hz.
    let (t, v) = series(6000, 10.0, |_, t| {
        (1u64 << 30) as f64 + 1048576.0 * t + noise.next(65536.0)
    });
    let a = run(&t, &v);
    assert_eq!(a.verdict, Verdict::Linear, "{a:?}");
    assert!(
        (a.slope_per_s / 1048576.0 - 1.0).abs() < 0.01,
        "{}",
        a.slope_per_s
    );
    assert!((a.projection_24h.unwrap() / (1048576.0 * 86400.0) - 1.0).abs() < 0.01);
    assert!(a.confidence > 0.9, "{}", a.confidence);
    // Noiseless page-by-page growth, every sample: linear, not a staircase.
    let (t, v) = series(5000, 100.0, |i, _| 1e8 + 4096.0 * 3.0 * i as f64);
    let a = run(&t, &v);
    assert_eq!(a.verdict, Verdict::Linear, "{a:?}");
    assert!((a.slope_per_s - 4096.0 * 3.0 * 100.0).abs() < 1.0);
}

#[test]
fn staircases_of_several_quanta_and_spacings() {
    let cases = [
        // (quantum, samples between steps, noise sigma, base)
        (4096.0, 50, 0.0, 1e9),
        (262_144.0, 200, 0.0, 1.3e9),
        (2_097_152.0, 1000, 1000.0, 4e9),
        (0.25, 300, 0.0, 1296.2), // an imported _mb column: the seed's sub-arena steps
        (1.0, 700, 0.01, 204.0),
    ];
    for (k, (q, every, sigma, base)) in cases.into_iter().enumerate() {
        let mut noise = Noise::new(10 + k as u64);
        // Steps of one or two quanta, the level never coming back down.
        let (t, v) = series(10_000, 100.0, |i, _| {
            let steps = i / every;
            base + q * (steps + steps / 3) as f64 + noise.next(sigma)
        });
        let a = run(&t, &v);
        assert_eq!(a.verdict, Verdict::Staircase, "case {k}: {a:?}");
        let q_found = a.quantum.unwrap_or_else(|| panic!("case {k}: no quantum"));
        assert!(
            (q_found / q - 1.0).abs() < 0.05,
            "case {k}: quantum {q_found} for {q}"
        );
        let expected_jumps = (9000..10_000).step_by(every).count(); // roughly: after start-up
        assert!(a.jumps >= expected_jumps, "case {k}: {} jumps", a.jumps);
        assert!(
            a.longest_flat_s >= (every as f64 / 100.0) * 0.9,
            "case {k}: {}",
            a.longest_flat_s
        );
        assert!(a.projection_24h.unwrap() > 0.0, "a staircase is growth too");
    }
}

#[test]
fn a_single_step_is_one_jump_and_no_trend_yet() {
    // One step that held is a level that moved: its jump is listed with its
    // quantum, but a trend needs more than one event (the trend test finds
    // too few effective readings in a step), so it is not projected.
    let (t, v) = series(2000, 10.0, |i, _| if i < 1500 { 100.0 } else { 164.0 });
    let a = run(&t, &v);
    assert_eq!(a.verdict, Verdict::Insufficient, "{a:?}");
    assert_eq!(a.severity, None);
    assert_eq!((a.jumps, a.quantum), (1, Some(64.0)));
    assert_eq!(
        a.jump_list[0],
        Jump {
            t_s: 150.0,
            size: 64.0
        }
    );
    assert_eq!(a.drift, 64.0);
    assert!(
        (a.longest_flat_s - 150.0).abs() < 0.2,
        "{}",
        a.longest_flat_s
    );
}

#[test]
fn a_jump_spread_over_two_samples_is_one_jump() {
    let (t, v) = series(1000, 10.0, |i, _| match i {
        0..=599 => 10.0,
        600 => 11.0,
        _ => 12.0,
    });
    let a = run(&t, &v);
    assert_eq!((a.jumps, a.quantum), (1, Some(2.0)), "{a:?}");
    assert!(!a.verdict.is_growth(), "one step is no trend: {a:?}");
}

#[test]
fn a_sawtooth_is_noisy_not_growth() {
    // Grows for 10 s, drops back: a collector's rhythm.
    let (t, v) = series(20_000, 100.0, |i, _| 5e8 + 1e6 * (i % 1000) as f64);
    let a = run(&t, &v);
    assert_eq!(a.verdict, Verdict::Noisy, "{a:?}");
    assert!(a.drift.abs() < 2e8);
}

#[test]
fn a_two_level_flicker_is_noisy() {
    let mut r = SplitMix64::new(5);
    let (t, v) = series(
        5000,
        100.0,
        |_, _| if r.below(2) == 0 { 100.0 } else { 110.0 },
    );
    let a = run(&t, &v);
    assert_eq!(a.verdict, Verdict::Noisy, "{a:?}");
    // Rare flips between two levels: many jumps, but they cancel out.
    let (t, v) = series(
        5000,
        100.0,
        |i, _| if (i / 400) % 2 == 0 { 100.0 } else { 110.0 },
    );
    let a = run(&t, &v);
    assert_eq!(a.verdict, Verdict::Noisy, "{a:?}");
}

#[test]
fn too_few_points_say_so() {
    let a = run(&[0.0, 1.0, 2.0], &[1.0, 2.0, 3.0]);
    assert_eq!(a.verdict, Verdict::Insufficient);
    assert_eq!(a.points, 3, "no start-up found: no start-up");
    let a = run(&[], &[]);
    assert_eq!((a.verdict, a.points), (Verdict::Insufficient, 0));
}

#[test]
fn gaps_are_skipped_and_the_warm_up_is_honoured() {
    // A start-up ramp in the first 10 %, then flat, with every third reading missing.
    let (t, v) = series(3000, 10.0, |i, _| {
        if i % 3 == 1 {
            f64::NAN
        } else if i < 250 {
            i as f64 * 1000.0
        } else {
            250_000.0
        }
    });
    let a = run(&t, &v);
    assert_eq!(a.verdict, Verdict::Flat, "{a:?}");
    // The start-up is found where the ramp ends (25 s), to a bucket or two.
    assert!((a.warmup_s - 25.0).abs() < 1.0, "{}", a.warmup_s);
    assert!((1790..=1850).contains(&a.points), "{}", a.points);
    let a = analyze(
        &t,
        &v,
        &Context {
            warmup_s: Some(0.0),
            ..Context::default()
        },
    );
    // Without the start-up the ramp counts: a level that moved, then held
    // (settled), never growth.
    assert_eq!(
        (a.verdict, a.note),
        (Verdict::Flat, Some(Note::NotSustained)),
        "{a:?}"
    );
}

#[test]
fn drift_per_step_and_token_and_time_to_a_limit() {
    let (t, v) = series(1000, 10.0, |_, t| 1000.0 + 2.0 * t); // +2 per second
    let steps: Vec<f64> = t.iter().map(|t| (t * 5.0).floor()).collect(); // 5 steps/s
    let tokens: Vec<f64> = steps.iter().map(|s| s * 1000.0).collect();
    let ctx = Context {
        warmup_s: Some(0.0),
        steps: Some(&steps),
        tokens: Some(&tokens),
        limit: Some(2000.0),
        ..Context::default()
    };
    let a = analyze(&t, &v, &ctx);
    assert_eq!(a.verdict, Verdict::Linear);
    assert!((a.drift_per_step.unwrap() - 0.4).abs() < 0.01, "{a:?}");
    assert!((a.drift_per_token.unwrap() - 0.0004).abs() < 1e-5);
    assert!((a.slope_per_step.unwrap() - 0.4).abs() < 0.01);
    // From the final level (the median of the last 5 %) to the limit, at 2/s.
    assert!((a.final_value - 1195.0).abs() < 0.2, "{}", a.final_value);
    let want = (2000.0 - a.final_value) / 2.0;
    assert!(
        (a.time_to_limit_s.unwrap() - want).abs() < 0.5,
        "{:?}",
        a.time_to_limit_s
    );
}

#[test]
fn the_tracker_agrees_with_the_whole_series_and_stays_bounded() {
    let mut noise = Noise::new(7);
    let (t, v) = series(200_000, 100.0, |i, _| {
        1e9 + 262_144.0 * (i / 5000) as f64 + noise.next(100.0)
    });
    let whole = run(&t, &v);
    let mut tr = Tracker::new(4096);
    for (&ti, &vi) in t.iter().zip(&v) {
        tr.push(ti, vi, f64::NAN, f64::NAN);
    }
    assert!(tr.len() <= 4096 && tr.len() >= 2048, "{}", tr.len());
    assert_eq!(tr.seen(), 200_000);
    let live = tr.analyze(Kind::Level, None, None, 0.0);
    assert_eq!(
        (whole.verdict, live.verdict),
        (Verdict::Staircase, Verdict::Staircase)
    );
    for q in [whole.quantum, live.quantum] {
        assert!((q.unwrap() / 262_144.0 - 1.0).abs() < 0.002, "{q:?}");
    }
    assert!(
        (live.drift - whole.drift).abs() <= 262_144.0 + 1000.0,
        "{} vs {} (start-ups {} and {})",
        live.drift,
        whole.drift,
        live.warmup_s,
        whole.warmup_s
    );
    // Baseline and final are medians over the first and last 5 %, which here
    // span two steps each: they may differ by one.
    assert!((live.final_value - whole.final_value).abs() <= 262_144.0 + 1000.0);
}

#[test]
fn a_release_in_the_last_samples_does_not_decide_the_verdict() {
    // 4 MiB steps, then the process exits and frees everything in its last sample.
    let (t, mut v) = series(2000, 20.0, |i, _| 1e7 + 4_194_304.0 * (i / 300) as f64);
    *v.last_mut().unwrap() = 1e6;
    let a = run(&t, &v);
    assert_eq!(a.verdict, Verdict::Staircase, "{a:?}");
    assert!((a.quantum.unwrap() / 4_194_304.0 - 1.0).abs() < 0.01);
}

#[test]
fn changes_below_the_evidence_floor_read_flat() {
    // A tree's PSS: 61 MiB, up 13 KiB in three small steps (a few shared pages
    // copied), over 25 s at 2 Hz.
    let t: Vec<f64> = (0..50).map(|i| i as f64 * 0.5).collect();
    let v: Vec<f64> = (0..50)
        .map(|i| {
            64e6 + 4096.0 * f64::from(u8::from(i > 10) + u8::from(i > 20))
                + if i > 30 { 5120.0 } else { 0.0 }
        })
        .collect();
    // 13 KiB on 64 MB is under 0.1 % of the level: not material, whatever the floor.
    let any = analyze(&t, &v, &Context::default());
    assert_eq!(any.verdict, Verdict::Flat, "{any:?}");
    assert!(matches!(any.note, Some(Note::Within { band }) if band > 64e3));
    let floor = crate::rules::evidence_floor("tree.pss", flatline_format::Unit::Bytes);
    assert_eq!(floor, 65536.0);
    let a = analyze(
        &t,
        &v,
        &Context {
            min_growth: floor,
            ..Context::default()
        },
    );
    assert_eq!(a.verdict, Verdict::Flat, "{a:?}");
    // 64 pages a step is growth whatever the floor.
    let big: Vec<f64> = v.iter().map(|x| 64e6 + (x - 64e6) * 64.0).collect();
    let b = analyze(
        &t,
        &big,
        &Context {
            min_growth: floor,
            ..Context::default()
        },
    );
    // Three such steps in 25 s are not yet a trend at 99.9 %...
    assert!(!b.verdict.is_growth(), "{b:?}");
    // ...twenty of them over 100 s are, and read as a staircase.
    let t: Vec<f64> = (0..200).map(|i| i as f64 * 0.5).collect();
    let steps: Vec<f64> = (0..200)
        .map(|i| 64e6 + 64.0 * 4096.0 * f64::from(i / 10))
        .collect();
    let c = analyze(
        &t,
        &steps,
        &Context {
            min_growth: floor,
            ..Context::default()
        },
    );
    assert_eq!(c.verdict, Verdict::Staircase, "{c:?}");
    use crate::rules::evidence_floor;
    use flatline_format::Unit;
    assert_eq!(evidence_floor("mem.rss", Unit::Bytes), 65536.0);
    assert_eq!(
        evidence_floor("alloc.live", Unit::Bytes),
        0.0,
        "exact: every byte counts"
    );
    assert_eq!(evidence_floor("mem.minflt", Unit::Count), 0.0);
    assert_eq!(evidence_floor("malloc.in_use", Unit::Bytes), 131072.0);
    assert_eq!(evidence_floor("log.vm_rss_mb", Unit::Mebibytes), 0.0625);
    // Flat is flat: no 24 h projection, no time to a limit.
    let capped = analyze(
        &t,
        &v,
        &Context {
            min_growth: floor,
            limit: Some(1e9),
            ..Context::default()
        },
    );
    assert_eq!(
        (capped.projection_24h, capped.time_to_limit_s),
        (Some(0.0), None)
    );
}

fn as_kind(kind: Kind, t: &[f64], v: &[f64]) -> ChannelAnalysis {
    analyze(
        t,
        v,
        &Context {
            kind,
            ..Context::default()
        },
    )
}

#[test]
fn counters_are_read_as_rates_and_never_projected() {
    // A fault counter climbing at 500/s with jitter: steady, not a leak.
    let mut noise = Noise::new(11);
    let mut count = 0.0;
    let (t, v) = series(6000, 100.0, |_, _| {
        count += 5.0 + noise.next(1.0).round();
        count
    });
    let a = as_kind(Kind::Counter, &t, &v);
    assert_eq!(a.verdict, Verdict::Steady, "{a:?}");
    assert!((a.rate_per_s.unwrap() / 500.0 - 1.0).abs() < 0.02, "{a:?}");
    assert_eq!(
        (a.projection_24h, a.time_to_limit_s, a.severity),
        (None, None, None)
    );
    // The same count read as a level would be called growth: the kind matters.
    assert!(run(&t, &v).verdict.is_growth());
    // A rate that doubles over the run: rising, by % an hour.
    let (t, v) = series(6000, 100.0, |_, t| 100.0 * t + 100.0 * t * t / 60.0);
    let a = as_kind(Kind::Counter, &t, &v);
    assert_eq!(a.verdict, Verdict::Rising, "{a:?}");
    assert!(a.pct_per_hour.unwrap() > 100.0, "{a:?}");
    // Work in bursts: 2 s on, 3 s idle.
    let (t, v) = series(6000, 100.0, |_, t| {
        let cycles = (t / 5.0).floor();
        let into = (t - 5.0 * cycles).min(2.0);
        1000.0 * (2.0 * cycles + into)
    });
    assert_eq!(as_kind(Kind::Counter, &t, &v).verdict, Verdict::Bursty);
}

#[test]
fn gauges_are_stable_drifting_or_noisy_and_never_projected() {
    let mut noise = Noise::new(12);
    let (t, v) = series(3600, 1.0, |_, _| 50.0 + noise.next(0.5));
    let a = as_kind(Kind::Gauge, &t, &v);
    assert_eq!(
        (a.verdict, a.projection_24h),
        (Verdict::Stable, None),
        "{a:?}"
    );
    assert_eq!(a.pct_per_hour, None, "a stable gauge has no trend to state");
    // Throughput falling 5 % an hour: worth saying.
    let (t, v) = series(3600, 1.0, |_, t| {
        1000.0 * (1.0 - 0.05 * t / 3600.0) + noise.next(2.0)
    });
    let a = as_kind(Kind::Gauge, &t, &v);
    assert_eq!(a.verdict, Verdict::DriftingDown, "{a:?}");
    assert!((a.pct_per_hour.unwrap() + 5.0).abs() < 0.5, "{a:?}");
    // A CPU % jumping between 20 and 90.
    let mut r = SplitMix64::new(3);
    let (t, v) = series(600, 1.0, |_, _| 20.0 + 70.0 * r.below(2) as f64);
    assert_eq!(as_kind(Kind::Gauge, &t, &v).verdict, Verdict::Noisy);
}

#[test]
fn peaks_count_their_rises() {
    let (t, v) = series(1000, 10.0, |_, t| {
        1e8 + if t > 30.0 { 4e6 } else { 0.0 } + if t > 70.0 { 4e6 } else { 0.0 }
    });
    let a = as_kind(Kind::Peak, &t, &v);
    assert_eq!((a.verdict, a.jumps), (Verdict::Rose, 2), "{a:?}");
    assert!((a.last_rise_s.unwrap() - 70.1).abs() < 0.2, "{a:?}");
    assert_eq!((a.projection_24h, a.time_to_limit_s), (None, None));
    let (t, v) = series(1000, 10.0, |_, _| 1e8);
    assert_eq!(as_kind(Kind::Peak, &t, &v).verdict, Verdict::Held);
}

#[test]
fn growth_that_stops_early_is_not_sustained() {
    // +8 MiB in the first fifth, flat for the rest, with no start-up allowed.
    let (t, v) = series(3000, 10.0, |_, t| {
        1e9 + 8.0 * 1048576.0 * (t / 60.0).min(1.0)
    });
    let a = analyze(
        &t,
        &v,
        &Context {
            warmup_s: Some(0.0),
            min_growth: 65536.0,
            ..Context::default()
        },
    );
    // Within 1 % of 1 GB: flat, and the receipt says it moved (settled).
    assert_eq!(a.verdict, Verdict::Flat, "{a:?}");
    assert!(
        matches!(a.note, Some(Note::Within { .. } | Note::NotSustained)),
        "{a:?}"
    );
    assert_eq!((a.projection_24h, a.severity), (Some(0.0), None));
    // Steps up early (25 % each), then flat: not sustained.
    let (t2, v2) = series(3000, 10.0, |_, t| {
        1e9 * (1.0 + 0.25 * (t / 30.0).floor().min(2.0))
    });
    let b = analyze(
        &t2,
        &v2,
        &Context {
            warmup_s: Some(0.0),
            min_growth: 65536.0,
            ..Context::default()
        },
    );
    assert_eq!(
        (b.verdict, b.note),
        (Verdict::Flat, Some(Note::NotSustained)),
        "{b:?}"
    );
    assert_eq!(b.severity, None);
    // Found, the start-up cuts it off instead: flat with nothing to explain.
    let a = analyze(
        &t,
        &v,
        &Context {
            min_growth: 65536.0,
            ..Context::default()
        },
    );
    assert!((a.warmup_s - 60.0).abs() < 2.0, "{}", a.warmup_s);
    assert_eq!((a.verdict, a.note), (Verdict::Flat, None), "{a:?}");
}

/// `Verdict::ALL` lists each verdict once: a new verdict that is left out
/// would be missing from the exporter's one-hot series.
#[test]
fn every_verdict_is_listed_once() {
    let names: std::collections::BTreeSet<&str> = Verdict::ALL.iter().map(|v| v.as_str()).collect();
    assert_eq!(names.len(), Verdict::ALL.len());
    // Exhaustive: a new variant breaks this match, which points here and
    // to the list.
    for v in Verdict::ALL {
        match v {
            Verdict::Flat
            | Verdict::Staircase
            | Verdict::Linear
            | Verdict::Noisy
            | Verdict::Insufficient
            | Verdict::Steady
            | Verdict::Rising
            | Verdict::Falling
            | Verdict::Bursty
            | Verdict::Stable
            | Verdict::DriftingUp
            | Verdict::DriftingDown
            | Verdict::Held
            | Verdict::Rose => {}
        }
    }
}

/// A leak that starts late: 70 % of the run flat around 900 MiB with noise
/// well over 1 % of the level, then 50 MiB an hour. The run's line calls it
/// noisy; the tail is growth, placed where it began, at its own rate.
#[test]
fn a_leak_that_starts_late_is_growth_from_where_it_began() {
    let mib = 1_048_576.0;
    let mut noise = Noise::new(9);
    let hours = 24.0;
    let (t, v) = series(8641, 0.1, |_, t| {
        let late = (t - 0.7 * hours * 3600.0).max(0.0);
        900.0 * mib + 50.0 * mib * late / 3600.0 + noise.next(6.0 * mib)
    });
    let a = run(&t, &v);
    assert_eq!(a.verdict, Verdict::Linear, "{a:?}");
    let onset = a.onset_s.expect("an onset");
    assert!(
        (0.65 * hours * 3600.0..=0.75 * hours * 3600.0).contains(&onset),
        "onset at {} h",
        onset / 3600.0
    );
    let per_h = a.slope_per_s * 3600.0 / mib;
    assert!((40.0..60.0).contains(&per_h), "{per_h} MiB/h");
    assert!(a.projection_24h.unwrap() > 900.0 * mib);

    // The same noise without the leak stays what it was, with no onset;
    // so does a sawtooth, and a leak that started at the start is found by
    // the run's own line, as before.
    for sigma in [6.0, 30.0] {
        let mut noise = Noise::new(9);
        let (t, v) = series(8641, 0.1, |_, _| 900.0 * mib + noise.next(sigma * mib));
        let a = run(&t, &v);
        assert_eq!((a.verdict, a.onset_s), (Verdict::Noisy, None), "{a:?}");
    }
    let (t, v) = series(8641, 0.1, |_, t| 6e9 + 2e9 * ((t % 600.0) / 600.0));
    let a = run(&t, &v);
    assert_eq!((a.verdict, a.onset_s), (Verdict::Noisy, None), "{a:?}");
    let mut noise = Noise::new(9);
    let (t, v) = series(8641, 0.1, |_, t| {
        900.0 * mib + 5.0 * mib * t / 3600.0 + noise.next(mib)
    });
    let a = run(&t, &v);
    assert_eq!((a.verdict, a.onset_s), (Verdict::Linear, None), "{a:?}");
}

/// `tree.rss` of a small PyTorch training loop, read at 2 Hz (MiB): the
/// interpreter and torch load for 6 s, then the loop holds its memory
/// (a real watch; it once made a one-step "staircase" projected to the
/// host's RAM in 5 days).
const TORCH_START_UP_MIB: [f64; 92] = [
    6.88, 368.61, 461.03, 490.77, 506.87, 521.62, 543.82, 557.29, 629.46, 644.39, 652.91, 669.34,
    683.74, 683.74, 679.87, 680.74, 681.74, 683.75, 682.75, 683.75, 683.75, 683.75, 683.75, 682.75,
    683.75, 683.75, 681.75, 683.75, 683.75, 678.75, 682.75, 681.75, 681.75, 683.75, 681.76, 683.76,
    683.76, 680.76, 682.76, 680.76, 680.76, 680.76, 680.76, 677.31, 680.76, 677.76, 677.77, 680.77,
    680.77, 680.77, 680.77, 680.77, 680.77, 680.77, 680.77, 680.77, 680.77, 680.77, 681.77, 684.77,
    684.77, 681.77, 680.45, 680.78, 680.78, 683.78, 682.78, 681.78, 682.78, 682.78, 682.78, 682.78,
    681.78, 680.78, 677.78, 682.79, 682.79, 680.91, 682.79, 682.79, 680.79, 682.79, 680.79, 680.79,
    680.79, 682.79, 683.79, 683.79, 680.79, 682.79, 682.79, 680.80,
];

#[test]
fn the_last_reading_of_a_start_up_is_not_a_staircase() {
    let (t, v) = series(92, 2.0, |i, _| TORCH_START_UP_MIB[i] * 1048576.0);
    let floor = 65536.0;
    // The climb's last reading (669 MiB at 5.5 s) is still start-up: the
    // start-up ends at the first reading on the plateau.
    let w = find_warmup(&t, &v, floor).expect("a start-up");
    assert_eq!(w.at_s, 6.0, "{w:?}");
    // Cut one reading early (a recording's start-up comes from its fastest
    // channel), the step from it to the plateau is inside the baseline's
    // window: listed, not deciding, and not growth.
    let a = analyze(
        &t,
        &v,
        &Context {
            warmup_s: Some(5.5),
            min_growth: floor,
            ..Context::default()
        },
    );
    assert_eq!(a.jumps, 1, "{a:?}");
    assert!(!a.verdict.is_growth(), "{a:?}");
    assert_eq!((a.severity, a.projection_24h), (None, Some(0.0)), "{a:?}");
    let found = analyze(
        &t,
        &v,
        &Context {
            min_growth: floor,
            ..Context::default()
        },
    );
    assert_eq!(found.warmup_s, 6.0);
    assert!(!found.verdict.is_growth(), "{found:?}");
}

#[test]
fn a_staircase_must_still_step_in_the_later_half() {
    let mib = 1048576.0;
    let mut noise = Noise::new(7);
    // Two steps of 8 MiB at 5 s and 12 s of a 60 s run, then held, with a
    // 3 MiB dip for 3 s just after the middle (a cache dropped and refilled):
    // the later half's first readings are low, its last ones are not, yet
    // nothing stepped up since 12 s. Settled, not a staircase to project.
    let (t, v) = series(600, 10.0, |_, t| {
        let steps = (t >= 5.0) as u8 + (t >= 12.0) as u8;
        let dip = if (30.0..33.0).contains(&t) { 3.0 } else { 0.0 };
        1e9 + (8.0 * steps as f64 - dip) * mib + noise.next(2e4)
    });
    let ctx = Context {
        warmup_s: Some(0.0),
        min_growth: 65536.0,
        ..Context::default()
    };
    let a = analyze(&t, &v, &ctx);
    assert_eq!(a.jumps, 4, "{a:?}");
    assert!(!a.verdict.is_growth() && a.severity.is_none(), "{a:?}");
    // Steps every 7 s through the run keep stepping: a staircase.
    let (t, v) = series(600, 10.0, |_, t| {
        1e9 + 8.0 * mib * ((t + 2.0) / 7.0).floor() + noise.next(2e4)
    });
    let b = analyze(&t, &v, &ctx);
    assert_eq!(b.verdict, Verdict::Staircase, "{b:?}");
    assert!(b.severity.is_some(), "{b:?}");
}

/// Issue 34: a tree's PSS read every few seconds (a dozen readings) that
/// rises by a third is growth, whatever the count; six readings cannot be.
#[test]
fn a_dozen_sparse_readings_that_rise_are_growth() {
    let mib = 1_048_576.0;
    let t: Vec<f64> = (0..12).map(|i| f64::from(i) * 4.5).collect();
    let v: Vec<f64> = t.iter().map(|t| 1100.0 * mib + 12.0 * mib * t).collect();
    let ctx = Context {
        warmup_s: Some(0.0),
        min_growth: 65536.0,
        ..Context::default()
    };
    let a = analyze(&t, &v, &ctx);
    assert_eq!(a.verdict, Verdict::Linear, "{a:?}");
    assert!((a.slope_per_s / (12.0 * mib) - 1.0).abs() < 0.01, "{a:?}");
    let e = a.evidence.unwrap();
    assert_eq!(e.readings, 12);
    assert!(e.significant() && e.detectable_per_s.is_some(), "{e:?}");
    // Six such readings: too few to show any trend at 99.9 %, and not flat.
    let b = analyze(&t[..6], &v[..6], &ctx);
    assert_eq!(b.verdict, Verdict::Insufficient, "{b:?}");
    assert_eq!(b.evidence.unwrap().detectable_per_s, None);
}

/// A level that moved past its evidence floor in a few steps, within 1 % of
/// its level, is not flat when its readings cannot weigh a trend.
#[test]
fn a_few_steps_past_the_floor_are_not_flat() {
    let mib = 1_048_576.0;
    // 1.3 GiB, +1.0 MiB in ten 0.25 MiB steps (seven up, three down) over
    // 10 minutes at 6.6 Hz, as the seed's own log moves.
    let pattern = [1.0, 1.0, -1.0, 1.0, 1.0, 1.0, -1.0, 1.0, -1.0, 1.0];
    let level = |k: usize| pattern[..k].iter().sum::<f64>();
    let (t, v) = series(3975, 6.6, |i, _| {
        1300.0 * mib + 0.25 * mib * level((i / 362).min(10))
    });
    let ctx = Context {
        warmup_s: Some(0.0),
        min_growth: 65536.0,
        ..Context::default()
    };
    let a = analyze(&t, &v, &ctx);
    assert_eq!(a.verdict, Verdict::Insufficient, "{a:?}");
    assert!(a.severity.is_none(), "{a:?}");
    // Four regular steps, all up, are a staircase at 99.9 %.
    let (t4, v4) = series(3975, 6.6, |i, _| {
        1300.0 * mib + 0.25 * mib * (i / 800) as f64
    });
    assert_eq!(analyze(&t4, &v4, &ctx).verdict, Verdict::Staircase);
    // Three single pages (under the floor) are flat.
    let (t, v) = series(600, 10.0, |i, _| 1300.0 * mib + 4096.0 * (i / 200) as f64);
    assert_eq!(analyze(&t, &v, &ctx).verdict, Verdict::Flat);
}

/// A start-up ramp seen four seconds after it ended (a live window whose
/// start-up cannot be found yet) is settled, not a leak; the same ramp
/// still rising is growth.
#[test]
fn a_ramp_that_stopped_is_settled() {
    let mib = 1_048_576.0;
    let ramp = |t: f64| 100.0 * mib + 3.3 * mib * t.min(30.0);
    let ctx = Context {
        warmup_s: Some(0.0),
        min_growth: 65536.0,
        ..Context::default()
    };
    let (t, v) = series(170, 5.0, |_, t| ramp(t));
    let a = analyze(&t, &v, &ctx);
    assert!(!a.verdict.is_growth(), "{a:?}");
    assert_eq!(a.note, Some(Note::NotSustained), "{a:?}");
    let (t, v) = series(140, 5.0, |_, t| ramp(t));
    assert_eq!(analyze(&t, &v, &ctx).verdict, Verdict::Linear);
}

/// An allocation site's sampled bytes (a watched C leak of 1.25 MiB/s,
/// sampled one per 512 KiB on average, read every half second): each
/// sample adds its weight, and the last two seconds happened to bring
/// none. That is no stop: the run paused as long while it grew. The
/// same steps ending in a wait twice as long as any before still stop.
#[test]
fn a_sampled_series_that_waits_for_its_next_sample_has_not_stopped() {
    let weight = 557_738.0;
    let samples = [
        1, 0, 1, 1, 0, 2, 0, 0, 1, 0, 0, 1, 0, 2, 2, 1, 1, 2, 2, 1, 3, 1, 0, 1, 1, 3, 1, 1, 1, 2,
        0, 2, 2, 0, 0, 3, 3, 2, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 0, 0, 0, 0,
    ];
    let read = |waits: usize| {
        let mut v = vec![2.0 * weight];
        for k in samples.iter().chain(std::iter::repeat_n(&0, waits)) {
            v.push(v[v.len() - 1] + f64::from(*k) * weight);
        }
        let t: Vec<f64> = (0..v.len()).map(|i| 2.1 + 0.5 * i as f64).collect();
        (t, v)
    };
    let ctx = Context {
        warmup_s: Some(0.0),
        ..Context::default()
    };
    let (t, v) = read(0);
    let a = analyze(&t, &v, &ctx);
    assert_eq!(a.verdict, Verdict::Linear, "{a:?}");
    let truth = 1.25 * 1_048_576.0;
    assert!((a.slope_per_s - truth).abs() < 0.3 * truth, "{a:?}");
    let (t, v) = read(12);
    let a = analyze(&t, &v, &ctx);
    assert!(!a.verdict.is_growth(), "{a:?}");
    assert_eq!(a.note, Some(Note::NotSustained), "{a:?}");
}

/// PSS that rises while USS does not is shared pages changing hands.
#[test]
fn pss_growth_without_uss_growth_is_shared_pages() {
    let mib = 1_048_576.0;
    let t: Vec<f64> = (0..200).map(|i| f64::from(i) * 0.5).collect();
    let ctx = Context {
        warmup_s: Some(0.0),
        min_growth: 65536.0,
        ..Context::default()
    };
    let rising: Vec<f64> = t.iter().map(|t| 50.0 * mib + 0.1 * mib * t).collect();
    let held: Vec<f64> = t.iter().map(|_| 20.0 * mib).collect();
    let mut pss = analyze(&t, &rising, &ctx);
    assert_eq!(pss.verdict, Verdict::Linear);
    let uss = analyze(&t, &held, &ctx);
    reconcile_pss(&mut pss, &uss);
    assert!(!pss.verdict.is_growth(), "{pss:?}");
    assert_eq!((pss.note, pss.severity), (Some(Note::SharedPages), None));
    // Copy-on-access: USS grows with PSS, and the growth stands.
    let mut pss = analyze(&t, &rising, &ctx);
    let uss = analyze(&t, &rising, &ctx);
    reconcile_pss(&mut pss, &uss);
    assert_eq!(pss.verdict, Verdict::Linear);
    assert_eq!(uss_of("pid42.pss").as_deref(), Some("pid42.uss"));
    assert_eq!(uss_of("tree.pss").as_deref(), Some("tree.uss"));
    assert_eq!(uss_of("gpu0.pss"), None);
}

/// A tree's sum whose steady-looking rise is under a flat level's band,
/// while each process it adds up holds (rose and settled, or flat), is no
/// growth; where one of them grows, or the sum passes the band, it stands.
#[test]
fn a_sum_of_processes_that_each_hold_is_not_growth() {
    let mib = 1_048_576.0;
    let t: Vec<f64> = (0..300).map(|i| f64::from(i) * 0.25).collect();
    let ctx = Context {
        warmup_s: Some(0.0),
        min_growth: 16384.0,
        ..Context::default()
    };
    // 254 MiB rising a steady 1 MiB over 75 s: 0.4 %, a line.
    let sum: Vec<f64> = t.iter().map(|t| 254.0 * mib + t / 75.0 * mib).collect();
    let a = analyze(&t, &sum, &ctx);
    assert_eq!(a.verdict, Verdict::Linear, "{a:?}");
    // Each part rose once, at its own moment, then held.
    let step = |at: f64| -> Vec<f64> {
        t.iter()
            .map(|&x| 12.0 * mib + if x >= at { 0.4 * mib } else { 0.0 })
            .collect()
    };
    let parts = [
        analyze(&t, &step(20.0), &ctx),
        analyze(&t, &step(30.0), &ctx),
    ];
    assert!(parts.iter().all(|p| !p.verdict.is_growth()), "{parts:?}");
    let mut read = a.clone();
    sum_of_parts(&mut read, &parts.iter().collect::<Vec<_>>());
    assert_eq!(
        (read.verdict, read.note),
        (Verdict::Flat, Some(Note::PartsFlat))
    );
    assert_eq!((read.severity, read.time_to_limit_s), (None, None));
    // A part that grows: the sum's growth is its.
    let leak: Vec<f64> = t.iter().map(|t| 12.0 * mib + t / 75.0 * mib).collect();
    let growing = analyze(&t, &leak, &ctx);
    assert!(growing.verdict.is_growth());
    let mut read = a.clone();
    sum_of_parts(&mut read, &[&parts[0], &growing]);
    assert_eq!(read.verdict, Verdict::Linear);
    // A sum past the band is growth, however its parts read.
    let big: Vec<f64> = t
        .iter()
        .map(|t| 254.0 * mib + 4.0 * t / 75.0 * mib)
        .collect();
    let mut read = analyze(&t, &big, &ctx);
    sum_of_parts(&mut read, &parts.iter().collect::<Vec<_>>());
    assert_eq!(read.verdict, Verdict::Linear);
    // A sum its few readings cannot tell, whose every part is told flat
    // or settled: told by them.
    let few_t = [0.0, 15.0, 30.0, 45.0, 60.0, 75.0];
    let few = analyze(
        &few_t,
        &few_t.map(|t| 254.0 * mib + t / 75.0 * 0.6 * mib),
        &ctx,
    );
    assert_eq!(few.verdict, Verdict::Insufficient, "{few:?}");
    let mut read = few.clone();
    sum_of_parts(&mut read, &parts.iter().collect::<Vec<_>>());
    assert_eq!(
        (read.verdict, read.note),
        (Verdict::Flat, Some(Note::PartsFlat))
    );
    // … but not where a part cannot be told either.
    let mut read = few.clone();
    sum_of_parts(&mut read, &[&parts[0], &few]);
    assert_eq!(read.verdict, Verdict::Insufficient);
    let names = ["tree.uss", "pid1.uss", "pid2.uss", "pid2.rss", "pid3x.uss"];
    assert_eq!(parts_of("tree.uss", names.into_iter()), Some(vec![1, 2]));
    assert_eq!(parts_of("mem.rss", names.into_iter()), None);
}

/// A gauge's trend word agrees with its drift: a line that rises while the
/// end sits below the start drifts neither way.
#[test]
fn a_gauge_never_drifts_up_with_a_negative_drift() {
    // Holds at 1000, drops to 900, then climbs back to 975.
    let (t, v) = series(1200, 1.0, |_, t| {
        if t < 100.0 {
            1000.0
        } else {
            900.0 + 75.0 * (t - 100.0) / 1100.0
        }
    });
    let a = as_kind(Kind::Gauge, &t, &v);
    assert!(a.drift < 0.0, "{a:?}");
    assert_ne!(a.verdict, Verdict::DriftingUp, "{a:?}");
}

/// A start-up's tail that slows to a stop within the flat band (a fixed
/// DataLoader's workers: +0.25 % of 266 MB in page-sized steps, most of it
/// in the first half, 64 s at 2 Hz) held: flat, not "cannot be told". The
/// same rise kept up to the end is no such thing.
#[test]
fn a_small_rise_that_slowed_to_a_stop_held_and_one_that_goes_on_did_not() {
    let page = 4096.0;
    let ctx = Context {
        warmup_s: Some(0.0),
        min_growth: 65536.0,
        ..Context::default()
    };
    // 160 pages over the run, the rate falling with a time constant of 8 s.
    let (t, slowing) = series(128, 2.0, |_, t| {
        266e6 + page * (160.0 * (1.0 - (-t / 8.0).exp())).floor()
    });
    let a = analyze(&t, &slowing, &ctx);
    assert_eq!(
        (a.verdict, a.note),
        (Verdict::Flat, Some(Note::NotSustained)),
        "{a:?}"
    );
    // 160 pages at an even rate: its later half moves as much as its first.
    let (t, going) = series(128, 2.0, |_, t| 266e6 + page * (160.0 * t / 64.0).floor());
    let b = analyze(&t, &going, &ctx);
    assert_ne!(b.verdict, Verdict::Flat, "{b:?}");
}

/// A steady climb the data make certain is growth however small against
/// its level (64 KiB/s on a 20 GiB GPU: 0.03 % over two minutes, under the
/// 0.1 % materiality floor, and 5.3 GiB a day); host memory keeps its floor
/// of 16 pages, below which a steady few pages are the allocator's.
#[test]
fn a_certain_climb_is_growth_however_small_against_its_level() {
    let (t, v) = series(235, 2.0, |i, t| {
        21.5e9 + 65536.0 * t + 4096.0 * ((i % 3) as f64 - 1.0)
    });
    let a = analyze(&t, &v, &Context::default());
    assert_eq!(a.verdict, Verdict::Linear, "{a:?}");
    let per_day = a.projection_24h.unwrap();
    assert!((per_day / (65536.0 * 86_400.0) - 1.0).abs() < 0.05, "{a:?}");
    // The same shape without a trend is flat.
    let (t, v) = series(235, 2.0, |i, _| 21.5e9 + 4096.0 * ((i % 3) as f64 - 1.0));
    assert_eq!(analyze(&t, &v, &Context::default()).verdict, Verdict::Flat);
    // Host memory: 12 pages over two minutes in steady steps stay under its floor.
    let (t, v) = series(240, 2.0, |_, t| 1e9 + 4096.0 * (t / 10.0).floor());
    let host = Context {
        min_growth: 65536.0,
        ..Context::default()
    };
    assert!(!analyze(&t, &v, &host).verdict.is_growth());
}
