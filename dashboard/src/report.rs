//! `flatline report`: what a recording holds, as text or JSON.

use std::path::Path;

use anyhow::{Context, Result};
use flatline_runtime::recording::{Recording, TailProblemKind};
use serde_json::{Map, Value, json};

use crate::cli::{ReportArgs, ReportFormat};
use crate::fmt::{bytes, value};

/// First, last, min and max of the readings of one channel (NaN skipped).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChannelStats {
    pub samples: usize,
    pub first: f64,
    pub last: f64,
    pub min: f64,
    pub max: f64,
}

pub fn channel_stats(col: &[f64]) -> ChannelStats {
    let mut st = ChannelStats {
        samples: 0,
        first: f64::NAN,
        last: f64::NAN,
        min: f64::NAN,
        max: f64::NAN,
    };
    for &v in col.iter().filter(|v| !v.is_nan()) {
        if st.samples == 0 {
            st.first = v;
            st.min = v;
            st.max = v;
        }
        st.samples += 1;
        st.last = v;
        st.min = st.min.min(v);
        st.max = st.max.max(v);
    }
    st
}

fn num(v: f64) -> Value {
    if v.is_finite() { json!(v) } else { Value::Null }
}

/// The JSON receipt of issue #4's contract.
pub fn json_report(rec: &Recording) -> Value {
    let h = &rec.header;
    let mut channels = Map::new();
    for (spec, col) in h.schema.channels.iter().zip(&rec.columns) {
        let st = channel_stats(col);
        channels.insert(
            spec.name.clone(),
            json!({
                "unit": spec.unit,
                "group": spec.group,
                "samples": st.samples,
                "first": num(st.first),
                "last": num(st.last),
                "min": num(st.min),
                "max": num(st.max),
            }),
        );
    }
    let unavailable: Map<String, Value> = h
        .unavailable
        .iter()
        .map(|u| (u.probe.clone(), json!(u.reason)))
        .collect();
    json!({
        "recording": {
            "path": rec.path.display().to_string(),
            "format_version": h.format_version,
            "tool_version": h.tool_version,
            "source": h.source,
            "started_unix_ms": h.started_unix_ms,
            "duration_s": rec.duration_s(),
            "samples": rec.len(),
            "events": rec.events.len(),
            "bytes": rec.bytes,
            "truncated": rec.is_truncated(),
            "tail": rec.tail,
            "digest": rec.digest,
            "end": rec.footer.as_ref().map(|f| f.end.clone()),
            "command_line": h.command_line,
            "config": h.config,
            "notes": h.notes,
        },
        "host": h.host,
        "channels": channels,
        "unavailable": unavailable,
    })
}

/// The terminal receipt.
pub fn text_report(rec: &Recording) -> String {
    use std::fmt::Write as _;
    let h = &rec.header;
    let mut s = String::new();
    let _ = writeln!(s, "recording  {}", rec.path.display());
    let end = match (&rec.footer, &rec.tail) {
        (_, Some(t)) => format!("{t}"),
        (Some(f), None) => format!("ended: {}", f.end),
        (None, None) => "no footer".into(),
    };
    let _ = writeln!(
        s,
        "  {} from {}, flatline {}, format v{}; {:.1} s, {} samples, {} events, {}; {end}",
        h.source,
        humantime::format_rfc3339_seconds(
            std::time::UNIX_EPOCH + std::time::Duration::from_millis(h.started_unix_ms)
        ),
        h.tool_version,
        h.format_version,
        rec.duration_s(),
        rec.len(),
        rec.events.len(),
        bytes(rec.bytes as f64),
    );
    let _ = writeln!(s, "  digest sha256:{}", rec.digest);
    if h.host != Default::default() {
        let _ = writeln!(s, "  host {}", h.host.summary());
    }
    if !h.config.is_empty() {
        let cfg: Vec<String> = h.config.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(s, "  config {}", cfg.join(" "));
    }
    for n in &h.notes {
        let _ = writeln!(s, "  note: {n}");
    }
    let _ = writeln!(
        s,
        "\n  {:<26}{:>8}{:>16}{:>16}{:>16}{:>16}",
        "channel", "samples", "first", "last", "min", "max"
    );
    for (spec, col) in h.schema.channels.iter().zip(&rec.columns) {
        let st = channel_stats(col);
        let f = |v| value(v, spec.unit);
        let _ = writeln!(
            s,
            "  {:<26}{:>8}{:>16}{:>16}{:>16}{:>16}",
            spec.name,
            st.samples,
            f(st.first),
            f(st.last),
            f(st.min),
            f(st.max)
        );
    }
    for u in &h.unavailable {
        let _ = writeln!(s, "  unavailable: {}: {}", u.probe, u.reason);
    }
    s
}

/// Opens a recording, warning on stderr if its tail is bad.
pub fn open(path: &Path) -> Result<Recording> {
    let rec = Recording::open(path).with_context(|| format!("opening {}", path.display()))?;
    if let Some(t) = &rec.tail {
        let what = match t.kind {
            TailProblemKind::Truncated => "is truncated",
            TailProblemKind::Damaged => "is damaged",
        };
        eprintln!(
            "flatline: warning: {} {what} at byte {} ({}); using the {} samples before it",
            path.display(),
            t.offset,
            t.reason,
            rec.len()
        );
    }
    Ok(rec)
}

pub fn run(args: &ReportArgs) -> Result<()> {
    let rec = open(&args.file)?;
    match args.format {
        ReportFormat::Json => println!("{}", serde_json::to_string_pretty(&json_report(&rec))?),
        ReportFormat::Text => print!("{}", text_report(&rec)),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_skip_missing_readings() {
        let st = channel_stats(&[f64::NAN, 3.0, 1.0, f64::NAN, 2.0, f64::NAN]);
        assert_eq!(
            st,
            ChannelStats {
                samples: 3,
                first: 3.0,
                last: 2.0,
                min: 1.0,
                max: 3.0
            }
        );
        let none = channel_stats(&[f64::NAN]);
        assert_eq!(none.samples, 0);
        assert!(none.first.is_nan());
    }
}
