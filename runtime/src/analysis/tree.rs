//! What a recording says about a watched process tree: who was in it, who
//! grew, and the one finding per-process RSS cannot show (PSS grows while
//! every RSS stays flat: workers copying pages they only read).
//!
//! Receipts and the dashboard both ask here; the per-channel verdicts come
//! from [`super::analyze`] and are passed in.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{ChannelAnalysis, Verdict};
use crate::telemetry::Schema;
use flatline_format::{Event, EventKind};

/// One process that was part of the tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessSeen {
    pub pid: u32,
    pub name: String,
    pub role: String,
    /// When it joined the tree and left it, seconds since the start.
    pub started_s: Option<f64>,
    pub exited_s: Option<f64>,
    /// The stem of its channels (`pid4242`), where it had channels.
    pub channels: Option<String>,
    /// Its PSS verdict and growth, where it had channels.
    pub pss_verdict: Option<Verdict>,
    pub pss_drift: Option<f64>,
}

/// The process tree of a recording.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TreeSummary {
    pub processes: Vec<ProcessSeen>,
    /// Most processes in the tree at once (`tree.procs`).
    pub peak: usize,
    /// Processes whose PSS grew (by at least [`MATERIAL_SHARE`] of it), by pid.
    pub grew: Vec<u32>,
    /// One line for a person, where the tree shows something a single
    /// process's RSS would hide.
    pub finding: Option<String>,
}

/// Growth below this share of a channel's level is no finding about the
/// tree: a worker's interpreter copies a few pages once after the fork.
pub const MATERIAL_SHARE: f64 = 0.05;

/// Whether a verdict says the channel grew, by at least [`MATERIAL_SHARE`]
/// of its level.
pub fn grows(a: &ChannelAnalysis) -> bool {
    matches!(a.verdict, Verdict::Linear | Verdict::Staircase)
        && a.drift > 0.0
        && a.drift >= MATERIAL_SHARE * a.baseline.abs()
}

/// Whether a verdict says the channel held still.
fn still(a: &ChannelAnalysis) -> bool {
    matches!(
        a.verdict,
        Verdict::Flat | Verdict::Noisy | Verdict::Insufficient
    ) || a.drift <= 0.0
}

/// The tree of a recording, or `None` when it watched no tree. `analysis(name)`
/// gives a channel's analysis.
pub fn summarize<'a>(
    schema: &Schema,
    events: &[Event],
    analysis: impl Fn(&str) -> Option<&'a ChannelAnalysis>,
    peak_procs: Option<f64>,
) -> Option<TreeSummary> {
    let tree_pss = analysis("tree.pss")?;
    let mut seen: BTreeMap<u32, ProcessSeen> = BTreeMap::new();
    let t = |e: &Event| e.t_ns as f64 / 1e9;
    for e in events {
        match &e.kind {
            EventKind::ProcessStarted {
                pid, name, role, ..
            } => {
                // A reused pid is a new process: keep the latest under its pid.
                seen.insert(
                    *pid,
                    ProcessSeen {
                        pid: *pid,
                        name: name.clone(),
                        role: role.clone(),
                        started_s: Some(t(e)),
                        exited_s: None,
                        channels: None,
                        pss_verdict: None,
                        pss_drift: None,
                    },
                );
            }
            EventKind::ProcessExited { pid, .. } => {
                if let Some(p) = seen.get_mut(pid) {
                    p.exited_s = Some(t(e));
                }
            }
            _ => {}
        }
    }
    // A process's channels carry its pid as a label; the last ones win, as above.
    for c in &schema.channels {
        let (Some(pid), Some(stem)) = (
            c.labels.get("pid").and_then(|p| p.parse::<u32>().ok()),
            c.name.strip_suffix(".pss"),
        ) else {
            continue;
        };
        let p = seen.entry(pid).or_insert_with(|| ProcessSeen {
            pid,
            name: c.labels.get("name").cloned().unwrap_or_default(),
            role: c.labels.get("role").cloned().unwrap_or_default(),
            started_s: None,
            exited_s: None,
            channels: None,
            pss_verdict: None,
            pss_drift: None,
        });
        p.channels = Some(stem.to_owned());
        if let Some(a) = analysis(&c.name) {
            p.pss_verdict = Some(a.verdict);
            p.pss_drift = Some(a.drift);
        }
    }
    let grew: Vec<u32> = seen
        .values()
        .filter(|p| {
            let stem = p.channels.as_deref();
            stem.and_then(|s| analysis(&format!("{s}.pss")))
                .is_some_and(grows)
        })
        .map(|p| p.pid)
        .collect();
    let rss_flat = |stem: &str| analysis(&format!("{stem}.rss")).is_none_or(still);
    let every_rss_flat = analysis("mem.rss").is_none_or(still)
        && seen
            .values()
            .filter_map(|p| p.channels.as_deref())
            .all(rss_flat);
    let finding = (grows(tree_pss) && every_rss_flat).then(|| {
        "copy-on-access: worker memory grows while every RSS is flat \
         (workers touch pages they share with their parent, e.g. a Python list \
         read by DataLoader workers: keep such data in one numpy array or bytes object)"
            .to_string()
    });
    let peak = peak_procs
        .filter(|v| v.is_finite())
        .map_or(seen.len(), |v| v as usize);
    Some(TreeSummary {
        processes: seen.into_values().collect(),
        peak,
        grew,
        finding,
    })
}
