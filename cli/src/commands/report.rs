//! `report`: a recording's receipt on stdout, and its `--fail-on` gate.
//! What a receipt says is decided in `flatline-receipt` (re-exported here),
//! which the Python module shares without the server stack.

use std::path::Path;

use anyhow::Result;
use flatline_analysis::{self as analysis, Verdict};
use flatline_telemetry::recording::{Recording, TailProblem};

pub use flatline_receipt::report::*;
pub use flatline_receipt::text::{md_report, text_report};

use crate::cli::{ReportArgs, ReportFormat};

/// Opens a recording, warning on stderr if its tail is bad.
pub fn open(path: &Path) -> Result<Recording> {
    open_within(path, ANALYSIS_BUDGET)
}

/// [`open`], holding at most `budget` bytes of samples.
pub fn open_within(path: &Path, budget: usize) -> Result<Recording> {
    // Its errors name the file; a context naming it again would say it twice.
    let rec = Recording::open_bounded(path, budget)?;
    if let Some(t) = &rec.tail {
        warn_tail(path, t, rec.samples_total());
    }
    for l in &rec.losses {
        eprintln!(
            "flatline: warning: {}: damaged, read past it: {l}",
            path.display()
        );
    }
    Ok(rec)
}

/// The warning for a recording whose tail is bad, with the samples kept.
pub fn warn_tail(path: &Path, t: &TailProblem, samples: usize) {
    eprintln!("flatline: warning: {}", tail_text(path, t, samples));
}

/// What `report` found, for its exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// No `--fail-on`, or no channel matched it.
    Passed,
    /// A channel has a verdict `--fail-on` names (exit 3).
    Failed,
    /// `--fail-on` on a damaged recording, without `--allow-damaged`
    /// (exit 4): a verdict on part of a file is no pass.
    Damaged,
}

/// `report`'s exit code when `--fail-on` finds a matching verdict.
pub const EXIT_GATE_FAILED: u8 = 3;
/// `report`'s exit code when `--fail-on` meets a damaged recording.
pub const EXIT_DAMAGED: u8 = 4;

/// What a `--fail-on` gate looked at and what it found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateCheck {
    /// The level channels it judged (those `--channels` selects, or all).
    pub checked: Vec<String>,
    /// Those with a verdict it names, as "name (verdict)".
    pub matched: Vec<String>,
}

impl GateCheck {
    /// The line that says what was checked and what matched, for stderr.
    pub fn describe(&self, verdicts: &[Verdict]) -> String {
        let names: Vec<&str> = verdicts.iter().map(|v| v.as_str()).collect();
        let n = self.checked.len();
        let of = format!("{n} level channel{}", if n == 1 { "" } else { "s" });
        let checked = flatline_export::select::list(&self.checked);
        if self.matched.is_empty() {
            format!(
                "--fail-on {}: none of {of} matched (checked: {checked})",
                names.join(",")
            )
        } else {
            format!(
                "--fail-on {}: {} of {of} matched: {} (checked: {checked})",
                names.join(","),
                self.matched.len(),
                self.matched.join(", ")
            )
        }
    }
}

/// Checks `--fail-on` against a receipt: the level channels `channels`
/// selects (all if empty) whose verdict is one of `verdicts` (growth only,
/// for linear and staircase). A gate that would judge nothing is a bad
/// flag: a glob that selects no channel of the recording, or none that is
/// a level, or a recording without a level channel.
pub fn gate(
    receipt: &Receipt<'_>,
    verdicts: &[Verdict],
    channels: &[glob::Pattern],
) -> Result<GateCheck, flatline_export::BadFlag> {
    let all: Vec<&str> = receipt.rows.iter().map(|r| r.spec.name.as_str()).collect();
    let levels: Vec<&str> = receipt
        .rows
        .iter()
        .filter(|r| r.analysis.kind == analysis::Kind::Level)
        .map(|r| r.spec.name.as_str())
        .collect();
    let unmatched = flatline_export::select::selects(
        "--channels",
        channels,
        &all,
        "channel",
        "the recording has",
    )?;
    if levels.is_empty() {
        return Err(flatline_export::BadFlag(format!(
            "--fail-on: the recording has no level channel to judge (its {} channels are counters and gauges)",
            all.len()
        )));
    }
    let not_levels = flatline_export::select::selects(
        "--channels",
        channels,
        &levels,
        "level channel (--fail-on judges levels only)",
        "the recording's levels are",
    )?;
    for g in not_levels {
        let what = if unmatched.contains(&g) {
            "no channel"
        } else {
            "no level channel"
        };
        eprintln!("flatline: warning: --channels '{g}' selects {what} of this recording");
    }
    let growing = receipt.growing();
    let judged: Vec<&Row<'_>> = receipt
        .rows
        .iter()
        .filter(|r| r.analysis.kind == analysis::Kind::Level)
        .filter(|r| channels.is_empty() || channels.iter().any(|g| g.matches(&r.spec.name)))
        .collect();
    let matched = judged
        .iter()
        .filter(|r| verdicts.contains(&r.analysis.verdict))
        .filter(|r| match r.analysis.verdict {
            Verdict::Linear | Verdict::Staircase => growing.contains(&r.spec.name.as_str()),
            _ => true,
        })
        .map(|r| format!("{} ({})", r.spec.name, r.analysis.verdict.as_str()))
        .collect();
    Ok(GateCheck {
        checked: judged.iter().map(|r| r.spec.name.clone()).collect(),
        matched,
    })
}

pub fn run(args: &ReportArgs) -> Result<Gate> {
    let rec = open_within(&args.file, (args.memory_mib as usize) << 20)?;
    let range = match (args.from, args.to) {
        (None, None) => None,
        (from, to) => {
            let [from, to] = [from.unwrap_or(0.0), to.unwrap_or(f64::INFINITY)];
            let given = flatline_receipt::fmt::given;
            if from >= to {
                anyhow::bail!("--from {} is not before --to {}", given(from), given(to));
            }
            if from > rec.duration_s() {
                anyhow::bail!(
                    "--from {} is past the end of {} ({:.1} s long)",
                    given(from),
                    args.file.display(),
                    rec.duration_s()
                );
            }
            Some([from, to])
        }
    };
    let receipt = analyse_range(&rec, args.warmup_s, range);
    // The gate's flags are checked before anything is printed.
    let gate = if args.fail_on.is_empty() {
        None
    } else {
        Some(gate(&receipt, &args.fail_on, &args.channels)?)
    };
    match args.format {
        ReportFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&json_report(&rec, &receipt))?
        ),
        ReportFormat::Md => print!("{}", md_report(&rec, &receipt)),
        ReportFormat::Text => print!("{}", text_report(&rec, &receipt)),
    }
    // A verdict on part of a file is no verdict on the file: damage fails
    // the gate first (exit 4), whatever the part read says.
    if let Some(d) = receipt.damage.as_ref()
        && !args.fail_on.is_empty()
        && !args.allow_damaged
    {
        eprintln!(
            "flatline: --fail-on: {} is damaged: {} (pass --allow-damaged to judge what could be read)",
            args.file.display(),
            d.sentence()
        );
        return Ok(Gate::Damaged);
    }
    let Some(gate) = gate else {
        return Ok(Gate::Passed);
    };
    eprintln!("flatline: {}", gate.describe(&args.fail_on));
    Ok(if gate.matched.is_empty() {
        Gate::Passed
    } else {
        Gate::Failed
    })
}
