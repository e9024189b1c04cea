//! `flatline import`: a job's log, made after the fact, as a recording.
//!
//! A CSV step log goes through [`super::csv::import`] (strict: a bad cell is
//! an error with its line). JSON lines, a Hugging Face `trainer_state.json`
//! and a saved console log (nanoGPT, Hugging Face, torchrun output) are read
//! as [`crate::logfile`] reads them while following: every row or
//! line that says something becomes one sample, its keys `log.<key>`
//! channels that join the recording where they first appear, its step a step
//! event, its evals and checkpoints markers. These logs carry no clock: a
//! value named `elapsed_s`, `t_s` or `time_s` gives the time, else one row a
//! second is assumed (and said in the recording's notes).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use super::{Event, EventKind, RecordingError, RecordingSetup, RecordingWriter, WriteSummary};
use crate::logfile::{self, LogError, LogFormat};
use crate::output::{self, OutputStats, StepPattern};
use crate::{ChannelSpec, Sample, Schema};

/// Why a log could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Csv(#[from] super::csv::CsvError),
    #[error(transparent)]
    Recording(#[from] RecordingError),
}

/// What an import read and wrote.
#[derive(Debug)]
pub struct Imported {
    pub format: LogFormat,
    pub write: WriteSummary,
    /// Rows or lines read, and how many said something.
    pub lines: u64,
    pub parsed: u64,
}

const TIME_KEYS: [&str; 3] = ["elapsed_s", "t_s", "time_s"];

/// Imports the log at `path` into a new recording at `out`.
pub fn import(
    path: &Path,
    out: &Path,
    force: bool,
    command_line: Vec<String>,
    pattern: Option<StepPattern>,
) -> Result<Imported, ImportError> {
    let stats = Arc::new(OutputStats::default());
    let (format, lines) = logfile::read_all(path, pattern, stats.clone())?;
    let counted = |st: &OutputStats| {
        (
            st.lines.load(std::sync::atomic::Ordering::Relaxed),
            st.parsed.load(std::sync::atomic::Ordering::Relaxed),
        )
    };
    if format == LogFormat::Csv {
        let write = super::csv::import(path, out, force, command_line)?;
        let (lines, parsed) = counted(&stats);
        return Ok(Imported {
            format,
            write,
            lines,
            parsed,
        });
    }
    let (read, parsed) = counted(&stats);
    if lines.is_empty() {
        return Err(LogError::Bad {
            path: path.to_owned(),
            reason: format!(
                "read as a {}: none of its {read} lines has a step, a metric or a marker",
                format.name()
            ),
        }
        .into());
    }
    let timed = lines.iter().any(|l| {
        l.values
            .iter()
            .any(|(k, _, _)| TIME_KEYS.contains(&k.as_str()))
    });
    let mut setup = RecordingSetup::new("import");
    setup.set("log", path.display());
    setup.set("format", format.name());
    setup.notes.push(format!(
        "{read} lines read ({}); {parsed} had a step, a metric or a marker",
        format.name()
    ));
    if !timed {
        setup
            .notes
            .push("the log has no elapsed_s/t_s/time_s: one row per second assumed".into());
    }
    let header = super::csv::imported_header(&setup, Schema::default(), path, command_line);
    let mut w = RecordingWriter::create(out, &header, force)?;
    let mut positions: HashMap<String, usize> = HashMap::new();
    let mut row: Vec<f64> = Vec::new();
    let (mut t_ns, mut last_step) = (0u64, None);
    let mut bars = output::Bars::default();
    for (i, mut line) in lines.into_iter().enumerate() {
        let note = line.read_bar(&mut bars, true);
        let cells = output::cells(&line);
        let new: Vec<ChannelSpec> = cells
            .iter()
            .filter(|c| !positions.contains_key(&c.name))
            .map(|c| {
                let spec = ChannelSpec::new(c.name.clone(), c.unit, c.group);
                c.kind.map_or(spec.clone(), |k| spec.with_kind(k))
            })
            .collect();
        if !new.is_empty() {
            for spec in &new {
                positions.insert(spec.name.clone(), positions.len());
            }
            w.add_channels(&new)?;
        }
        row.clear();
        row.resize(positions.len(), f64::NAN);
        for c in &cells {
            row[positions[&c.name]] = c.value;
        }
        if timed {
            if let Some(t) = line
                .values
                .iter()
                .find(|(k, v, _)| TIME_KEYS.contains(&k.as_str()) && *v >= 0.0)
            {
                t_ns = t_ns.max((t.1 * 1e9).round() as u64);
            }
        } else {
            t_ns = i as u64 * 1_000_000_000;
        }
        // A line before any channel (a progress bar's first draw at 0, a
        // marker) has no values: its events are kept, no empty sample.
        if !row.is_empty() {
            w.push_sample(&Sample::from_values(i as u64, t_ns, &row))?;
        }
        if let Some(step) = line.step
            && line.rank.is_none_or(|r| r == 0)
            && last_step != Some(step)
        {
            last_step = Some(step);
            let tokens = line
                .values
                .iter()
                .find(|(k, v, _)| k == "tokens" && *v >= 0.0)
                .map(|t| t.1 as u64);
            w.push_event(Event {
                t_ns,
                kind: EventKind::Step { step, tokens },
            })?;
        }
        if let Some(text) = &line.marker {
            w.push_event(Event {
                t_ns,
                kind: EventKind::Marker(text.clone()),
            })?;
        }
        if let Some(text) = note {
            w.push_event(Event {
                t_ns,
                kind: EventKind::Note(text),
            })?;
        }
    }
    w.push_event(Event {
        t_ns,
        kind: EventKind::LinesRead {
            source: "log".into(),
            lines: read,
            parsed,
        },
    })?;
    Ok(Imported {
        format,
        write: w.finish("completed")?,
        lines: read,
        parsed,
    })
}
