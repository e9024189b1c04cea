//! Step logs in, samples out: CSV import and export.
//!
//! Import reads a training job's step log (one row per step, a header row of
//! column names) into a recording: every numeric column becomes a channel
//! `log.<column>` with its values kept as they are and the unit taken from
//! the name's suffix (`_mb` MiB, `_us`, `_ms`, `_s`, `_per_sec`, `_bytes`,
//! `_pct`); `elapsed_s` (or `t_s`, `time_s`) is the time axis; `step` becomes
//! `log.step`, the step axis. Columns whose first value is not a number
//! (hashes) are skipped, with a note in the recording's header.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::{Event, EventKind, RecordingError, RecordingSetup, RecordingWriter, WriteSummary};
use crate::keys::{leaf, unit_of};
use crate::{ChannelSpec, Group, MAX_CHANNELS, Sample, Schema};

/// Why a CSV could not be imported or exported.
#[derive(Debug, thiserror::Error)]
pub enum CsvError {
    #[error("{path}: {cause}")]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{path}, line {line}: {reason}")]
    Bad {
        path: PathBuf,
        line: u64,
        reason: String,
    },
    #[error(transparent)]
    Recording(#[from] RecordingError),
}

/// Names that mean "seconds since the start of the run".
const TIME_COLUMNS: [&str; 3] = ["elapsed_s", "t_s", "time_s"];

fn parse_cell(s: &str) -> Option<f64> {
    let s = s.trim();
    if s.is_empty() {
        return Some(f64::NAN);
    }
    s.parse::<f64>().ok()
}

fn line_of(pos: Option<&csv::Position>) -> u64 {
    pos.map_or(0, csv::Position::line)
}

/// Why a header row of column names cannot be imported, if it cannot: empty,
/// all numbers (no header), a column without a name or named twice.
fn check_names(names: &[String]) -> Result<(), String> {
    if names.is_empty() || names.iter().all(|n| n.is_empty()) {
        return Err("the file is empty: a header row of column names is needed".into());
    }
    if names
        .iter()
        .all(|n| parse_cell(n).is_some_and(|v| !v.is_nan()))
    {
        return Err(
            "no header row: the first row is all numbers; add a row of column names".into(),
        );
    }
    let mut seen = HashSet::new();
    for n in names {
        if n.is_empty() {
            return Err("a column has no name".into());
        }
        if !seen.insert(n.as_str()) {
            return Err(format!("column {n:?} appears twice"));
        }
    }
    Ok(())
}

/// The channels of the numeric columns, named as a followed log names them
/// (`val/loss` → `log.val_loss`); refused where two read as one name or
/// where more than a recording holds.
fn channels_of(names: &[String], numeric: &[usize]) -> Result<Vec<ChannelSpec>, String> {
    if numeric.len() > MAX_CHANNELS {
        return Err(format!(
            "{} numeric columns; at most {MAX_CHANNELS} fit",
            numeric.len()
        ));
    }
    let mut channels: Vec<ChannelSpec> = Vec::with_capacity(numeric.len());
    for &i in numeric {
        let name = format!("log.{}", leaf(&names[i]));
        if name == "log." {
            return Err(format!("column {:?} has no letters or digits", names[i]));
        }
        if let Some(c) = channels.iter().find(|c| c.name == name) {
            return Err(format!(
                "columns {:?} and {:?} both read as {}",
                c.name, names[i], name
            ));
        }
        channels.push(ChannelSpec::new(name, unit_of(&names[i]), Group::StepLog));
    }
    Ok(channels)
}

/// Imports the step log at `csv_path` into a new recording at `out`.
pub fn import(
    csv_path: &Path,
    out: &Path,
    force: bool,
    command_line: Vec<String>,
) -> Result<WriteSummary, CsvError> {
    let bad = |line: u64, reason: String| CsvError::Bad {
        path: csv_path.to_owned(),
        line,
        reason,
    };
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .trim(csv::Trim::All)
        .from_path(csv_path)
        .map_err(|e| match e.into_kind() {
            csv::ErrorKind::Io(source) => CsvError::Io {
                path: csv_path.to_owned(),
                cause: source,
            },
            other => bad(1, format!("{other:?}")),
        })?;
    let names: Vec<String> = rdr
        .headers()
        .map_err(|e| bad(1, e.to_string()))?
        .iter()
        .map(str::to_owned)
        .collect();
    check_names(&names).map_err(|reason| bad(1, reason))?;
    let time_col = names
        .iter()
        .position(|n| TIME_COLUMNS.contains(&n.as_str()));

    let mut records = rdr.records();
    let first = match records.next() {
        Some(Ok(r)) => r,
        Some(Err(e)) => return Err(csv_bad(csv_path, e)),
        None => return Err(bad(2, "no data rows after the header".into())),
    };
    // A column is numeric if its first value is a number (or empty).
    let mut numeric = Vec::new();
    let mut notes = Vec::new();
    for (i, (name, cell)) in names.iter().zip(first.iter()).enumerate() {
        if Some(i) == time_col {
            continue;
        }
        if parse_cell(cell).is_some() {
            numeric.push(i);
        } else {
            notes.push(format!(
                "column {name} is text (first value {cell:?}): skipped"
            ));
        }
    }
    if numeric.is_empty() {
        return Err(bad(2, "no numeric column to import".into()));
    }
    if time_col.is_none() {
        notes.push("no elapsed_s/t_s/time_s column: one row per second assumed".into());
    }
    // Channel names as a followed log gets them (`val/loss` → `log.val_loss`).
    let channels = channels_of(&names, &numeric).map_err(|reason| bad(1, reason))?;
    let schema = Schema { channels };
    // Its steps are step events too, as when the log is followed.
    let step_at = numeric.iter().position(|&i| {
        matches!(
            names[i].to_ascii_lowercase().as_str(),
            "step" | "global_step" | "iter" | "iteration"
        )
    });
    let tokens_at = numeric.iter().position(|&i| names[i] == "tokens");
    let mut setup = RecordingSetup::new("import");
    setup.set("csv", csv_path.display());
    setup.notes = notes;
    let header = imported_header(&setup, schema, csv_path, command_line);
    let mut w = RecordingWriter::create(out, &header, force)?;
    let mut values = vec![0.0; numeric.len()];
    let mut last_t = 0u64;
    let mut row = |rec: &csv::StringRecord, index: u64| -> Result<Sample, CsvError> {
        let line = line_of(rec.position());
        for (v, &i) in values.iter_mut().zip(&numeric) {
            let cell = &rec[i];
            *v = parse_cell(cell).ok_or_else(|| {
                bad(
                    line,
                    format!("column {}: {cell:?} is not a number", names[i]),
                )
            })?;
        }
        let t_ns = match time_col {
            Some(i) => {
                let cell = &rec[i];
                let t = parse_cell(cell)
                    .filter(|t| t.is_finite() && *t >= 0.0)
                    .ok_or_else(|| {
                        bad(
                            line,
                            format!("column {}: {cell:?} is not a time in seconds", names[i]),
                        )
                    })?;
                (t * 1e9).round() as u64
            }
            None => index * 1_000_000_000,
        };
        if t_ns < last_t {
            return Err(bad(line, "time goes backwards".into()));
        }
        last_t = t_ns;
        Ok(Sample::from_values(index, t_ns, &values))
    };
    let mut last_step = None;
    let mut push = |w: &mut RecordingWriter, s: Sample| -> Result<(), CsvError> {
        w.push_sample(&s)?;
        let v = s.values();
        if let Some(at) = step_at
            && v[at].is_finite()
            && v[at] >= 0.0
            // A counter that wrapped (-1 printed unsigned) is no step.
            && v[at] <= crate::MAX_STEP as f64
            && last_step != Some(v[at])
        {
            last_step = Some(v[at]);
            let tokens = tokens_at
                .map(|t| v[t])
                .filter(|t| t.is_finite() && *t >= 0.0);
            w.push_event(Event {
                t_ns: s.t_ns,
                kind: EventKind::Step {
                    step: v[at] as u64,
                    tokens: tokens.map(|t| t as u64),
                },
            })?;
        }
        Ok(())
    };
    let s = row(&first, 0)?;
    push(&mut w, s)?;
    for (k, rec) in records.enumerate() {
        let rec = rec.map_err(|e| csv_bad(csv_path, e))?;
        let s = row(&rec, k as u64 + 1)?;
        push(&mut w, s)?;
    }
    Ok(w.finish("completed")?)
}

/// The header of a recording made from a log elsewhere: the host is
/// unknown, and the run started when the log was last written (the best the
/// file says).
pub(super) fn imported_header(
    setup: &RecordingSetup,
    schema: Schema,
    log: &Path,
    command_line: Vec<String>,
) -> super::Header {
    let mut header = setup.header(schema, Vec::new());
    header.started_unix_ms = std::fs::metadata(log)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64);
    header.command_line = command_line;
    header
}

fn csv_bad(path: &Path, e: csv::Error) -> CsvError {
    let line = line_of(e.position());
    let reason = match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => {
            format!("{len} fields where the header has {expected_len}")
        }
        csv::ErrorKind::Utf8 { err, .. } => format!("not UTF-8 text ({err})"),
        _ => e.to_string(),
    };
    CsvError::Bad {
        path: path.to_owned(),
        line,
        reason,
    }
}

/// Which samples an export writes: those from `from_s` to `to_s` (seconds
/// since the start, both included), and of those at most one every
/// `every_s` seconds (the first at or after each multiple of it).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ExportRange {
    pub from_s: Option<f64>,
    pub to_s: Option<f64>,
    pub every_s: Option<f64>,
}

/// What an export wrote, and how its recording ended.
#[derive(Debug, Clone)]
pub struct Exported {
    pub rows: u64,
    pub channels: usize,
    /// The pass over the recording: its schema, tail and digest.
    pub scanned: super::Scanned,
}

fn create(out: &Path, force: bool) -> Result<std::fs::File, CsvError> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true);
    if force {
        opts.create(true).truncate(true);
    } else {
        opts.create_new(true);
    }
    opts.open(out).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            CsvError::Recording(RecordingError::Exists {
                path: out.to_owned(),
            })
        } else {
            CsvError::Io {
                path: out.to_owned(),
                cause: e,
            }
        }
    })
}

/// Reads the recording at `path` from start to end.
fn scan_file(path: &Path, visit: &mut dyn super::Visit) -> Result<super::Scanned, CsvError> {
    let file = std::fs::File::open(path).map_err(|source| RecordingError::Io {
        path: path.to_owned(),
        cause: source,
    })?;
    Ok(super::scan(
        std::io::BufReader::with_capacity(1 << 20, file),
        path,
        visit,
    )?)
}

/// Writes one row per sample of the recording at `path` (within `range`):
/// `t_s`, then one column per channel, named as the channel; a missing
/// value is an empty cell. Streams: the file is read twice (once for the
/// channels that join mid-recording, which the header row names, once for
/// the rows), and no more than a block of samples is held at once, so a
/// recording of any length exports in bounded memory.
pub fn export(
    path: &Path,
    out: &Path,
    force: bool,
    range: ExportRange,
) -> Result<Exported, CsvError> {
    export_with(path, out, range, || create(out, force))
}

/// [`export`] into `w` (standard output, say) instead of a file; `out` names
/// it in errors.
pub fn export_into<W: std::io::Write>(
    path: &Path,
    out: &Path,
    w: W,
    range: ExportRange,
) -> Result<Exported, CsvError> {
    export_with(path, out, range, || Ok(w))
}

/// The export, into what `open` gives once the recording's channels are
/// known (so a recording that cannot be read makes no file).
fn export_with<W: std::io::Write>(
    path: &Path,
    out: &Path,
    range: ExportRange,
    open: impl FnOnce() -> Result<W, CsvError>,
) -> Result<Exported, CsvError> {
    /// The first pass: every channel's name.
    struct Names(Vec<String>);
    impl super::Visit for Names {
        fn start(&mut self, h: &super::Header) {
            self.0 = h.schema.channels.iter().map(|c| c.name.clone()).collect();
        }
        fn channels(&mut self, _at: usize, specs: &[ChannelSpec]) {
            self.0.extend(specs.iter().map(|c| c.name.clone()));
        }
    }
    /// The second pass: the rows, as CSV.
    struct Rows<W: std::io::Write> {
        w: csv::Writer<W>,
        width: usize,
        range: ExportRange,
        next_s: f64,
        rows: u64,
        cells: Vec<String>,
        error: Option<csv::Error>,
    }
    impl<W: std::io::Write> super::Visit for Rows<W> {
        fn rows(&mut self, _first: usize, t_ns: &[u64], values: &[f64]) {
            if self.error.is_some() || t_ns.is_empty() {
                return;
            }
            let n = values.len() / t_ns.len();
            for (&t, row) in t_ns.iter().zip(values.chunks_exact(n.max(1))) {
                let t_s = t as f64 / 1e9;
                if self.range.from_s.is_some_and(|f| t_s < f)
                    || self.range.to_s.is_some_and(|to| t_s > to)
                    || t_s < self.next_s
                {
                    continue;
                }
                if let Some(every) = self.range.every_s {
                    self.next_s = ((t_s / every).floor() + 1.0) * every;
                }
                self.cells.clear();
                self.cells.push(format!("{t_s:.6}"));
                // Channels that join later have no cell yet: empty.
                for k in 0..self.width {
                    let v = if n > 0 { row.get(k).copied() } else { None };
                    self.cells.push(match v {
                        Some(v) if !v.is_nan() => format!("{v}"),
                        _ => String::new(),
                    });
                }
                if let Err(e) = self.w.write_record(&self.cells) {
                    self.error = Some(e);
                    return;
                }
                self.rows += 1;
            }
        }
    }
    let io = |source| CsvError::Io {
        path: out.to_owned(),
        cause: source,
    };
    let into_io = |e: csv::Error| match e.into_kind() {
        csv::ErrorKind::Io(source) => io(source),
        other => io(std::io::Error::other(format!("{other:?}"))),
    };
    let mut names = Names(Vec::new());
    scan_file(path, &mut names)?;
    let file = open()?;
    let mut w = csv::Writer::from_writer(std::io::BufWriter::new(file));
    let mut head = vec!["t_s".to_owned()];
    head.extend(names.0.iter().cloned());
    w.write_record(&head).map_err(into_io)?;
    let mut rows = Rows {
        w,
        width: names.0.len(),
        range,
        next_s: f64::NEG_INFINITY,
        rows: 0,
        cells: Vec::with_capacity(head.len()),
        error: None,
    };
    let scanned = scan_file(path, &mut rows)?;
    if let Some(e) = rows.error {
        return Err(into_io(e));
    }
    rows.w.flush().map_err(io)?;
    Ok(Exported {
        rows: rows.rows,
        channels: names.0.len(),
        scanned,
    })
}
