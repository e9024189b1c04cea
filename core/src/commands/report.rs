//! `report`: a recording's receipt on stdout, and its `--fail-on` gate.
//! What a receipt says is decided in `flatline-receipt` (re-exported here),
//! which the Python module shares without the server stack.

use std::path::Path;

use anyhow::Result;
use flatline_runtime::analysis::{self, Verdict};
use flatline_runtime::recording::{Recording, TailProblem};

pub use flatline_receipt::report::*;

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

/// The level channels whose verdict is one of `verdicts` (growth only, for
/// linear and staircase), among those `channels` names (all if empty), as
/// "name (verdict)".
pub fn gate_matches(
    receipt: &Receipt<'_>,
    verdicts: &[Verdict],
    channels: &[glob::Pattern],
) -> Vec<String> {
    let growing = receipt.growing();
    receipt
        .rows
        .iter()
        .filter(|r| r.analysis.kind == analysis::Kind::Level)
        .filter(|r| channels.is_empty() || channels.iter().any(|g| g.matches(&r.spec.name)))
        .filter(|r| verdicts.contains(&r.analysis.verdict))
        .filter(|r| match r.analysis.verdict {
            Verdict::Linear | Verdict::Staircase => growing.contains(&r.spec.name.as_str()),
            _ => true,
        })
        .map(|r| format!("{} ({})", r.spec.name, r.analysis.verdict.as_str()))
        .collect()
}

pub fn run(args: &ReportArgs) -> Result<Gate> {
    let rec = open_within(&args.file, (args.memory_mib as usize) << 20)?;
    let range = match (args.from, args.to) {
        (None, None) => None,
        (from, to) => {
            let [from, to] = [from.unwrap_or(0.0), to.unwrap_or(f64::INFINITY)];
            if from >= to {
                anyhow::bail!("--from {from} is not before --to {to}");
            }
            if from > rec.duration_s() {
                anyhow::bail!(
                    "--from {from} is past the end of {} ({:.1} s long)",
                    args.file.display(),
                    rec.duration_s()
                );
            }
            Some([from, to])
        }
    };
    let receipt = analyse_range(&rec, args.warmup_s, range);
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
    // No --fail-on matches nothing.
    let matched = gate_matches(&receipt, &args.fail_on, &args.channels);
    if matched.is_empty() {
        return Ok(Gate::Passed);
    }
    eprintln!("flatline: --fail-on: {}", matched.join(", "));
    Ok(Gate::Failed)
}
