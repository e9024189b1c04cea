//! Number formatting for people.

use flatline_format::Unit;

/// `1234567` → `"1,234,567"`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A number as given on the command line, said back readably: `1.5`,
/// `3600`, and past a billion (or under a millionth) in exponent form,
/// `1e308`, never its 309 digits.
pub fn given(v: f64) -> String {
    if v != 0.0 && v.is_finite() && !(1e-6..1e9).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// `1st`, `2nd`, `3rd`, `4th`, … `11th`, `256th`.
pub fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// A duration in nanoseconds with a unit that keeps 3–4 significant digits.
pub fn nanos(ns: u64) -> String {
    let ns = ns as f64;
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.2} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.3} s", ns / 1e9)
    }
}

/// A span of seconds in the largest unit that keeps it readable.
pub fn duration(s: f64) -> String {
    if !s.is_finite() {
        return "–".into();
    }
    let a = s.abs();
    if a >= 2.0 * 86_400.0 {
        format!("{:.1} d", s / 86_400.0)
    } else if a >= 2.0 * 3600.0 {
        format!("{:.1} h", s / 3600.0)
    } else if a >= 120.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{s:.1} s")
    }
}

/// A byte count in MiB or GiB (binary units, named), or plain bytes when small.
pub fn bytes(b: f64) -> String {
    let a = b.abs();
    if a >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", b / (1u64 << 30) as f64)
    } else if a >= (1u64 << 20) as f64 {
        format!("{:.2} MiB", b / (1u64 << 20) as f64)
    } else if a >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}

/// A value of a channel, in a unit a person reads at a glance.
pub fn value(v: f64, unit: Unit) -> String {
    if v.is_nan() {
        return "–".into();
    }
    match unit {
        Unit::Bytes => bytes(v),
        Unit::Mebibytes => bytes(v * 1_048_576.0),
        Unit::Nanoseconds if v >= 0.0 => nanos(v.round() as u64),
        Unit::Microseconds if v >= 0.0 => nanos((v * 1e3).round() as u64),
        Unit::Milliseconds if v >= 0.0 => nanos((v * 1e6).round() as u64),
        Unit::Seconds => format!("{v:.2} s"),
        Unit::Percent => format!("{v:.1} %"),
        Unit::Celsius => format!("{v:.0} °C"),
        Unit::PerSecond => format!("{}/s", compact(v)),
        Unit::Count if v.fract() == 0.0 && v.abs() < 1e15 => {
            let s = thousands(v.abs() as u64);
            if v < 0.0 { format!("-{s}") } else { s }
        }
        _ => compact(v),
    }
}

/// A plain number with 4 significant digits, k/M/G suffixed when large.
pub fn compact(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.2}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.4}")
    }
}

/// How every surface words an answer's numbers: [`value`] and [`duration`].
pub const WORDS: flatline_analysis::reading::Words<'static> = flatline_analysis::reading::Words {
    value: &value,
    duration: &duration,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_number_is_said_back_short() {
        assert_eq!(given(1e308), "1e308");
        assert_eq!(given(1.5), "1.5");
        assert_eq!(given(3600.0), "3600");
        assert_eq!(given(0.0), "0");
        assert_eq!(given(2.5e-9), "2.5e-9");
        assert_eq!(given(f64::INFINITY), "inf");
    }

    #[test]
    fn durations_pick_a_unit() {
        assert_eq!(duration(45.0), "45.0 s");
        assert_eq!(duration(600.0), "10.0 min");
        assert_eq!(duration(3.0 * 86_400.0), "3.0 d");
        assert_eq!(duration(f64::INFINITY), "–");
    }

    #[test]
    fn values_carry_their_unit() {
        assert_eq!(value(1_359_151_104.0, Unit::Bytes), "1.27 GiB");
        assert_eq!(value(4_300_800.0, Unit::Bytes), "4.10 MiB");
        assert_eq!(value(204.25, Unit::Mebibytes), "204.25 MiB");
        assert_eq!(value(0.00033, Unit::Mebibytes), "346 B");
        assert_eq!(value(52.28, Unit::Microseconds), "52.28 µs");
        assert_eq!(value(123_456.0, Unit::Count), "123,456");
        assert_eq!(value(f64::NAN, Unit::Bytes), "–");
        assert_eq!(value(411_600_000.0, Unit::PerSecond), "411.60M/s");
        assert_eq!(value(2.8973, Unit::Number), "2.8973");
    }

    #[test]
    fn groups_thousands() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(25_689_187_392), "25,689,187,392");
    }

    #[test]
    fn picks_a_unit() {
        assert_eq!(nanos(950), "950 ns");
        assert_eq!(nanos(17_240), "17.24 µs");
        assert_eq!(nanos(1_823_000_000), "1.823 s");
        assert_eq!(nanos(2_500_000), "2.50 ms");
    }
}
