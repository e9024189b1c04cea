//! `--alert EXPR`: conditions on the live analysis, checked once a second
//! by the exporter's thread (see [`crate::prom`]).
//!
//! An expression is `SUBJECT [MEASURE] OP THRESHOLD`:
//! - SUBJECT: a channel name or glob (`tree.pss`, `pid*.pss`, `gpu?.used`),
//!   or `any` for every channel; one that no stream can ever have (it
//!   matches no name the catalog declares, nor a job's `log.`, `torch.` or
//!   `progress.` key: [`crate::select::could_name`]) is refused as it is
//!   parsed, so an alert is never accepted that cannot fire;
//! - MEASURE: `value` (the default: the latest reading), `drift`, `slope`
//!   (per second, levels only), `time_to_limit`, `severity` (of a growing
//!   level: info, warning, critical);
//! - OP: `>`, `>=`, `<`, `<=`;
//! - THRESHOLD: in the channel's base unit, with a size (`20GiB`, `512MB`)
//!   for memory, a size per time (`10MiB/min`, `1MB/s`) for a slope, a
//!   duration (`2h`, `30min`) for a time to limit, a severity's name.
//!
//! An alert fires when its condition becomes true for a channel, once, and
//! again only after it was false; see [`Alerts::check`]. Alerts on the
//! analysis wait for [`MIN_EVIDENCE_S`] of analysed readings.

use std::collections::HashSet;
use std::fmt;

use flatline_analysis::{ChannelAnalysis, Severity, Verdict};

/// Seconds of analysed readings (after the start-up) before an alert on the
/// analysis (drift, slope, time to limit, severity) is checked; alerts on
/// the value are checked at once.
pub const MIN_EVIDENCE_S: f64 = 10.0;

/// What an alert measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    Value,
    Drift,
    Slope,
    TimeToLimit,
    Severity,
}

impl Measure {
    fn name(self) -> &'static str {
        match self {
            Measure::Value => "value",
            Measure::Drift => "drift",
            Measure::Slope => "slope",
            Measure::TimeToLimit => "time_to_limit",
            Measure::Severity => "severity",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Gt,
    Ge,
    Lt,
    Le,
}

impl Op {
    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Op::Gt => a > b,
            Op::Ge => a >= b,
            Op::Lt => a < b,
            Op::Le => a <= b,
        }
    }
}

/// One parsed `--alert` expression.
#[derive(Debug, Clone)]
pub struct Alert {
    /// The expression as given.
    pub text: String,
    /// `None`: any channel.
    subject: Option<glob::Pattern>,
    pub measure: Measure,
    op: Op,
    threshold: f64,
}

impl fmt::Display for Alert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Parses an expression; the error says what is wrong and what is expected.
pub fn parse(text: &str) -> Result<Alert, String> {
    const FORM: &str = "expected `CHANNEL [value|drift|slope|time_to_limit|severity] >|>=|<|<= THRESHOLD`, \
         e.g. `tree.pss > 20GiB`, `mem.rss slope > 10MiB/min`, `gpu0.used time_to_limit < 2h`, \
         `any severity >= warning`";
    let words: Vec<&str> = text.split_whitespace().collect();
    let (subject, measure, op, threshold) = match words.as_slice() {
        [s, o, t] => (*s, "value", *o, *t),
        [s, m, o, t] => (*s, *m, *o, *t),
        _ => return Err(format!("{text:?}: {FORM}")),
    };
    let measure = match measure {
        "value" => Measure::Value,
        "drift" => Measure::Drift,
        "slope" => Measure::Slope,
        "time_to_limit" => Measure::TimeToLimit,
        "severity" => Measure::Severity,
        m => return Err(format!("{text:?}: no measure {m:?}; {FORM}")),
    };
    let op = match op {
        ">" => Op::Gt,
        ">=" => Op::Ge,
        "<" => Op::Lt,
        "<=" => Op::Le,
        o => return Err(format!("{text:?}: no comparison {o:?}; {FORM}")),
    };
    let subject = match subject {
        "any" => None,
        s => {
            let glob = glob::Pattern::new(s)
                .map_err(|e| format!("{text:?}: {s:?} is not a channel glob: {e}"))?;
            // Checked now, before a stream starts: one that can never have
            // such a channel would watch in silence (see crate::select).
            if !crate::select::could_name(s) {
                return Err(crate::select::no_such_channel(text, s));
            }
            Some(glob)
        }
    };
    let threshold = match measure {
        Measure::Value | Measure::Drift => size(threshold),
        Measure::Slope => rate(threshold),
        Measure::TimeToLimit => humantime::parse_duration(threshold)
            .map(|d| d.as_secs_f64())
            .map_err(|e| format!("not a duration ({e}); e.g. 2h, 30min")),
        Measure::Severity => match threshold {
            "info" => Ok(0.0),
            "warning" => Ok(1.0),
            "critical" => Ok(2.0),
            _ => Err("a severity is info, warning or critical".into()),
        },
    }
    .map_err(|e| format!("{text:?}: threshold {threshold:?}: {e}"))?;
    Ok(Alert {
        text: text.to_owned(),
        subject,
        measure,
        op,
        threshold,
    })
}

/// A number with an optional size suffix: `20GiB`, `512MB`, `4096`.
fn size(s: &str) -> Result<f64, String> {
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| "not a number, or a size like 20GiB".to_string())?;
    let k = match unit {
        "" | "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" => 1024f64.powi(4),
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        u => {
            return Err(format!(
                "no size unit {u:?} (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)"
            ));
        }
    };
    Ok(n * k)
}

/// A size per time: `10MiB/min`, `1MB/s`, `2GiB/h`; a bare number is per second.
fn rate(s: &str) -> Result<f64, String> {
    let (amount, per) = s.split_once('/').unwrap_or((s, "s"));
    let per_s = match per {
        "s" => 1.0,
        "min" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        p => return Err(format!("no time unit {p:?} (s, min, h, d)")),
    };
    Ok(size(amount)? / per_s)
}

/// What one channel offers an alert: its name, latest reading and analysis,
/// in base units (`scale` converts the analysis's own unit).
#[derive(Debug, Clone)]
pub struct Reading<'a> {
    pub name: &'a str,
    pub latest: Option<f64>,
    pub analysis: Option<&'a ChannelAnalysis>,
    pub scale: f64,
    pub is_level: bool,
}

impl Alert {
    fn applies_to(&self, channel: &str) -> bool {
        self.subject.as_ref().is_none_or(|p| p.matches(channel))
    }

    /// The measured number, where the channel has one.
    fn measure(&self, r: &Reading<'_>) -> Option<f64> {
        // A trend needs evidence: a job's start-up (python importing torch
        // takes its RSS from nothing to 700 MiB in a second or two) is not
        // a slope of hundreds of MB/s, and an alert on it would be false.
        let a = r
            .analysis
            .filter(|a| a.verdict != Verdict::Insufficient && a.duration_s >= MIN_EVIDENCE_S);
        match self.measure {
            Measure::Value => r.latest.map(|v| v * r.scale),
            Measure::Drift => a.map(|a| a.drift * r.scale),
            Measure::Slope => a.filter(|_| r.is_level).map(|a| a.slope_per_s * r.scale),
            Measure::TimeToLimit => a.and_then(|a| a.time_to_limit_s),
            Measure::Severity => a
                .filter(|a| a.verdict.is_growth())
                .map(|a| match a.severity {
                    Some(Severity::Critical) => 2.0,
                    Some(Severity::Warning) => 1.0,
                    _ => 0.0,
                }),
        }
        .filter(|v| v.is_finite())
    }
}

/// One firing: which alert, on which channel, at what value.
#[derive(Debug, Clone, PartialEq)]
pub struct Firing {
    pub alert: String,
    pub channel: String,
    pub measure: &'static str,
    pub value: f64,
}

impl fmt::Display for Firing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "alert `{}`: {} {} is {}",
            self.alert,
            self.channel,
            self.measure,
            fmt_value(self.value)
        )
    }
}

fn fmt_value(v: f64) -> String {
    if v.abs() >= 1e4 || (v != 0.0 && v.abs() < 1e-2) {
        format!("{v:.4e}")
    } else {
        format!("{v:.3}")
    }
}

/// The alerts of a stream, and which (alert, channel) pairs are firing.
#[derive(Debug, Default)]
pub struct Alerts {
    alerts: Vec<Alert>,
    firing: HashSet<(usize, String)>,
}

impl Alerts {
    pub fn new(alerts: Vec<Alert>) -> Self {
        Self {
            alerts,
            firing: HashSet::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.alerts.is_empty()
    }

    /// Checks every alert against every channel and returns those that have
    /// just begun to hold. One that holds still does not fire again, nor one
    /// whose channel has no such number for a while; one that a number says
    /// stopped holding may.
    pub fn check(&mut self, readings: &[Reading<'_>]) -> Vec<Firing> {
        let mut fired = Vec::new();
        for (k, alert) in self.alerts.iter().enumerate() {
            for r in readings.iter().filter(|r| alert.applies_to(r.name)) {
                let key = (k, r.name.to_owned());
                // No number now (an analysis recomputed, a start-up found
                // later, a channel that ended) is not "stopped holding":
                // the alert's state stands until a number says.
                let Some(v) = alert.measure(r) else {
                    continue;
                };
                if !alert.op.holds(v, alert.threshold) {
                    self.firing.remove(&key);
                } else if self.firing.insert(key) {
                    fired.push(Firing {
                        alert: alert.text.clone(),
                        channel: r.name.to_owned(),
                        measure: alert.measure.name(),
                        value: v,
                    });
                }
            }
        }
        fired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(name: &str, latest: f64) -> Reading<'_> {
        Reading {
            name,
            latest: Some(latest),
            analysis: None,
            scale: 1.0,
            is_level: true,
        }
    }

    #[test]
    fn expressions_parse_with_their_units() {
        let a = parse("tree.pss > 20GiB").unwrap();
        assert_eq!(
            (a.measure, a.threshold),
            (Measure::Value, 20.0 * 1073741824.0)
        );
        let a = parse("mem.rss slope > 10MiB/min").unwrap();
        assert_eq!(a.threshold, 10.0 * 1048576.0 / 60.0);
        let a = parse("gpu0.used time_to_limit < 2h").unwrap();
        assert_eq!((a.measure, a.threshold), (Measure::TimeToLimit, 7200.0));
        let a = parse("any severity >= warning").unwrap();
        assert!(a.subject.is_none());
        assert_eq!(a.threshold, 1.0);
    }

    #[test]
    fn bad_expressions_say_what_is_wrong() {
        for (bad, says) in [
            ("tree.pss", "expected"),
            ("tree.pss > 20 GiB", "no measure"),
            ("tree.pss => 20GiB", "no comparison"),
            ("tree.pss > 20Gb", "no size unit"),
            ("mem.rss slope > 1MiB/week", "no time unit"),
            ("gpu0.used time_to_limit < soon", "not a duration"),
            ("any severity >= bad", "info, warning or critical"),
            ("pid[.pss > 1", "not a channel glob"),
            (
                "mem.rs > 1GiB",
                "'mem.rs' names no channel a stream can have",
            ),
            ("gpu0.fan > 1", "(`#`: a number): gpu#.used, gpu#.total"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn an_alert_fires_once_until_it_stops_holding() {
        let mut alerts = Alerts::new(vec![parse("pid*.pss > 1KiB").unwrap()]);
        let check = |alerts: &mut Alerts, a: f64, b: f64| {
            let r = [
                reading("pid1.pss", a),
                reading("pid2.pss", b),
                reading("mem.rss", 1e9),
            ];
            alerts
                .check(&r)
                .into_iter()
                .map(|f| f.channel)
                .collect::<Vec<_>>()
        };
        assert_eq!(check(&mut alerts, 2048.0, 10.0), ["pid1.pss"]);
        assert!(check(&mut alerts, 4096.0, 10.0).is_empty(), "still holding");
        assert_eq!(check(&mut alerts, 10.0, 2048.0), ["pid2.pss"]);
        assert_eq!(check(&mut alerts, 2048.0, 2048.0), ["pid1.pss"], "re-armed");
        // A reading with no number between two that hold: still holding.
        assert!(check(&mut alerts, f64::NAN, 2048.0).is_empty());
        assert!(
            check(&mut alerts, 2048.0, 2048.0).is_empty(),
            "no number is no end"
        );
    }

    /// A start-up's steep second is not a slope to alert on; the same
    /// growth, held for a minute, is.
    #[test]
    fn an_alert_on_the_trend_waits_for_evidence() {
        use flatline_analysis::LiveAnalysis;
        use flatline_telemetry::{ChannelSpec, Group, Unit};
        let analysed = |seconds: usize| {
            let mut live =
                LiveAnalysis::new(&[ChannelSpec::new("mem.rss", Unit::Bytes, Group::Memory)]);
            for k in 0..seconds * 10 {
                let t = k as f64 * 0.1;
                live.push(t, |_| 1e8 + t * 100.0 * 1048576.0, f64::NAN, f64::NAN);
            }
            live.refresh(None);
            live.analysis(0).cloned().unwrap()
        };
        let (start, held) = (analysed(2), analysed(60));
        let slope = |a| {
            let mut alerts = Alerts::new(vec![parse("mem.rss slope > 1MiB/s").unwrap()]);
            let r = Reading {
                analysis: Some(a),
                ..reading("mem.rss", 1e9)
            };
            alerts.check(&[r]).len()
        };
        assert!(start.duration_s < MIN_EVIDENCE_S, "{}", start.duration_s);
        assert_eq!(slope(&start), 0, "two seconds of start-up");
        assert_eq!(slope(&held), 1, "a minute of growth");
    }
}
