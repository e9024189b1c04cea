//! What the summary, the sites and the answer share, kept apart so none of
//! them imports another both ways: an analysed channel as they read it, a
//! finding, and a rate as a person reads it.

use super::ChannelAnalysis;
use super::rules::LimitSource;
use flatline_format::Unit;

/// One analysed channel, as the summary needs it.
#[derive(Debug, Clone, Copy)]
pub struct Assessed<'a> {
    pub name: &'a str,
    pub unit: Unit,
    pub analysis: &'a ChannelAnalysis,
    pub limit: Option<LimitSource>,
}

/// A rate a person reads without arithmetic: per second when it is large,
/// else per hour.
pub fn rate_text(per_s: f64, unit: Unit, value: &dyn Fn(f64, Unit) -> String) -> String {
    let big = match unit {
        Unit::Bytes => per_s.abs() >= 1024.0,
        _ => per_s.abs() >= 1.0,
    };
    if big {
        format!("{}/s", value(per_s, unit))
    } else {
        format!("{}/h", value(per_s * 3600.0, unit))
    }
}

/// A finding beyond single channels' verdicts: which processes of a tree,
/// or which layer of GPU memory, the growth lives in. Each stands on the
/// growth verdicts of the channels it names (see [`super::tree`] and
/// [`gpu_layers`]), so a finding never comes without growth.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Finding {
    /// `copy_on_access`, `process_grew`, `gpu_layer` or `where` (what
    /// memory a process's growth is: no growth verdict of its own); the
    /// receipt adds `oom_kill`, `killed_by_signal`, `out_of_memory` and
    /// `trend`.
    pub kind: &'static str,
    pub text: String,
}
