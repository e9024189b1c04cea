//! A training job's own step log, tailed as it grows: CSV with a header row,
//! or JSON lines (one object per line). Each new row becomes `log.<column>`
//! values in the next sample, and a step event (with its tokens, where the log
//! has a `tokens` column), stamped on the stream's [`Clock`] when the row was
//! read, sent straight to whoever records the events.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use super::{ChannelSpec, Clock, Group, Probe, ProbeError};
use crate::recording::csv::unit_of;
use crate::recording::{Event, EventKind};

/// The two layouts a step log may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Csv,
    JsonLines,
}

/// Why a step log cannot be followed.
#[derive(Debug, thiserror::Error)]
pub enum StepLogError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path}: no header after waiting {waited:.0} s (the log must start with a CSV header row or a JSON object)"
    )]
    NoHeader { path: PathBuf, waited: f64 },
    #[error(
        "{path}: the first line is neither a CSV header nor a JSON object with numeric fields: {line:?}"
    )]
    BadHeader { path: PathBuf, line: String },
    #[error("the watched process exited before its log {path} appeared")]
    ProcessGone { path: PathBuf },
}

/// Counters a person wants to see about a tailed log.
#[derive(Debug, Default)]
pub struct StepLogStats {
    pub rows: AtomicU64,
    /// Lines that did not parse (wrong number of fields, not JSON, …).
    pub bad_rows: AtomicU64,
}

/// A step log being followed; a [`Probe`] for the sampler.
#[derive(Debug)]
pub struct StepLog {
    path: PathBuf,
    format: LogFormat,
    columns: Vec<String>,
    offset: u64,
    partial: Vec<u8>,
    buf: Vec<u8>,
    step_col: Option<usize>,
    tokens_col: Option<usize>,
    steps: Option<(Sender<Event>, Clock)>,
    stats: Arc<StepLogStats>,
}

/// Splits a header line into its layout and column names.
pub fn parse_header(line: &str) -> Option<(LogFormat, Vec<String>)> {
    let line = line.trim();
    if line.starts_with('{') {
        let obj: serde_json::Map<String, serde_json::Value> = serde_json::from_str(line).ok()?;
        let cols: Vec<String> = obj
            .iter()
            .filter(|(_, v)| v.is_number())
            .map(|(k, _)| k.clone())
            .collect();
        return (!cols.is_empty()).then_some((LogFormat::JsonLines, cols));
    }
    let cols: Vec<String> = line.split(',').map(|c| c.trim().to_owned()).collect();
    let named = cols
        .iter()
        .all(|c| !c.is_empty() && c.parse::<f64>().is_err());
    (named && !line.is_empty()).then_some((LogFormat::Csv, cols))
}

impl StepLog {
    /// Waits (up to `timeout`) for `path` to exist and hold a first line,
    /// checking `alive` meanwhile; reads the header from it.
    pub fn wait_for(
        path: &Path,
        timeout: Duration,
        mut alive: impl FnMut() -> bool,
    ) -> Result<Self, StepLogError> {
        let t0 = Instant::now();
        loop {
            if let Ok(text) = std::fs::read(path)
                && let Some(end) = text.iter().position(|&b| b == b'\n')
            {
                let line = String::from_utf8_lossy(&text[..end]).into_owned();
                let (format, columns) =
                    parse_header(&line).ok_or_else(|| StepLogError::BadHeader {
                        path: path.to_owned(),
                        line: line.clone(),
                    })?;
                let find = |name: &str| columns.iter().position(|c| c == name);
                return Ok(Self {
                    path: path.to_owned(),
                    format,
                    step_col: find("step"),
                    tokens_col: find("tokens"),
                    // JSON lines: the first object is data too, so read it again.
                    offset: if format == LogFormat::Csv {
                        end as u64 + 1
                    } else {
                        0
                    },
                    columns,
                    partial: Vec::new(),
                    buf: Vec::with_capacity(64 << 10),
                    steps: None,
                    stats: Arc::default(),
                });
            }
            if !alive() {
                return Err(StepLogError::ProcessGone {
                    path: path.to_owned(),
                });
            }
            if t0.elapsed() >= timeout {
                return Err(StepLogError::NoHeader {
                    path: path.to_owned(),
                    waited: timeout.as_secs_f64(),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sends a step event for every row that has a step, stamped on `clock`
    /// when the row is read (never blocking: a full channel loses the event).
    pub fn with_steps(mut self, steps: Sender<Event>, clock: Clock) -> Self {
        self.steps = Some((steps, clock));
        self
    }

    pub fn format(&self) -> LogFormat {
        self.format
    }

    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    pub fn stats(&self) -> Arc<StepLogStats> {
        self.stats.clone()
    }

    /// Parses one data line into `out` (one value per column, NaN if missing);
    /// false if the line does not parse.
    fn parse_row(&self, line: &str, out: &mut [f64]) -> bool {
        match self.format {
            LogFormat::Csv => {
                let cells: Vec<&str> = line.split(',').collect();
                if cells.len() != self.columns.len() {
                    return false;
                }
                for (o, c) in out.iter_mut().zip(cells) {
                    *o = c.trim().parse::<f64>().unwrap_or(f64::NAN);
                }
                true
            }
            LogFormat::JsonLines => {
                let Ok(obj) =
                    serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(line)
                else {
                    return false;
                };
                for (o, c) in out.iter_mut().zip(&self.columns) {
                    *o = obj
                        .get(c)
                        .and_then(serde_json::Value::as_f64)
                        .unwrap_or(f64::NAN);
                }
                true
            }
        }
    }
}

impl Probe for StepLog {
    fn name(&self) -> &'static str {
        "steplog"
    }

    fn channels(&self) -> Vec<ChannelSpec> {
        self.columns
            .iter()
            .map(|c| ChannelSpec::new(format!("log.{c}"), unit_of(c), Group::StepLog))
            .collect()
    }

    fn read(&mut self, out: &mut [f64]) -> Result<(), ProbeError> {
        out.fill(f64::NAN);
        let mut file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) => return Err(ProbeError::Failed(format!("{}: {e}", self.path.display()))),
        };
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        if len < self.offset {
            // Truncated or replaced: start over (a CSV's header comes round again).
            self.offset = 0;
            self.partial.clear();
        }
        if len == self.offset {
            return Ok(());
        }
        self.buf.clear();
        let read = file
            .seek(SeekFrom::Start(self.offset))
            .and_then(|_| file.take(len - self.offset).read_to_end(&mut self.buf));
        if let Err(e) = read {
            return Err(ProbeError::Failed(format!("{}: {e}", self.path.display())));
        }
        self.offset += self.buf.len() as u64;
        self.partial.extend_from_slice(&self.buf);
        // Only whole lines; a line still being written waits for the next tick.
        let Some(last_nl) = self.partial.iter().rposition(|&b| b == b'\n') else {
            return Ok(());
        };
        let whole: Vec<u8> = self.partial.drain(..=last_nl).collect();
        let mut row = vec![f64::NAN; self.columns.len()];
        for line in String::from_utf8_lossy(&whole).lines() {
            let line = line.trim();
            if line.is_empty()
                || (self.format == LogFormat::Csv
                    && parse_header(line).is_some_and(|(_, c)| c == self.columns))
            {
                continue;
            }
            if !self.parse_row(line, &mut row) {
                self.stats.bad_rows.fetch_add(1, Relaxed);
                continue;
            }
            self.stats.rows.fetch_add(1, Relaxed);
            out.copy_from_slice(&row);
            if let (Some((tx, clock)), Some(s)) = (&self.steps, self.step_col)
                && row[s].is_finite()
                && row[s] >= 0.0
            {
                let tokens = self
                    .tokens_col
                    .map(|t| row[t])
                    .filter(|t| t.is_finite() && *t >= 0.0);
                let _ = tx.try_send(Event {
                    t_ns: clock.now_ns(),
                    kind: EventKind::Step {
                        step: row[s] as u64,
                        tokens: tokens.map(|t| t as u64),
                    },
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn headers_of_both_layouts() {
        assert_eq!(
            parse_header("step,loss,vm_rss_mb\n"),
            Some((
                LogFormat::Csv,
                vec!["step".into(), "loss".into(), "vm_rss_mb".into()]
            ))
        );
        assert_eq!(
            parse_header(r#"{"step": 0, "loss": 2.5, "note": "warm", "tokens": 16384}"#),
            Some((
                LogFormat::JsonLines,
                vec!["step".into(), "loss".into(), "tokens".into()]
            ))
        );
        assert_eq!(parse_header("0,1.5,2"), None, "numbers are not a header");
        assert_eq!(parse_header("{not json"), None);
        assert_eq!(parse_header(""), None);
    }

    #[test]
    fn tails_rows_as_they_are_appended_and_counts_bad_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.csv");
        let mut f = File::create(&path).unwrap();
        writeln!(f, "step,tokens,vm_rss_mb").unwrap();
        writeln!(f, "0,16384,100.5").unwrap();
        f.flush().unwrap();
        let (tx, rx) = crossbeam_channel::unbounded();
        let clock = Clock::start();
        let mut log = StepLog::wait_for(&path, Duration::from_secs(1), || true)
            .unwrap()
            .with_steps(tx, clock);
        let names: Vec<String> = log.channels().into_iter().map(|c| c.name).collect();
        assert_eq!(names, ["log.step", "log.tokens", "log.vm_rss_mb"]);
        let mut out = [0.0; 3];
        log.read(&mut out).unwrap();
        assert_eq!(out, [0.0, 16384.0, 100.5]);
        log.read(&mut out).unwrap();
        assert!(
            out.iter().all(|v| v.is_nan()),
            "no new row: a gap, not a repeat"
        );
        // A half-written line waits; junk is counted and skipped.
        write!(f, "1,32768,100.").unwrap();
        f.flush().unwrap();
        log.read(&mut out).unwrap();
        assert!(out[0].is_nan());
        writeln!(f, "75\ngarbage\n2,49152,101.0").unwrap();
        f.flush().unwrap();
        let before = clock.now_ns();
        log.read(&mut out).unwrap();
        let after = clock.now_ns();
        assert_eq!(out, [2.0, 49152.0, 101.0], "the latest row wins the sample");
        let stats = log.stats();
        assert_eq!(
            (stats.rows.load(Relaxed), stats.bad_rows.load(Relaxed)),
            (3, 1)
        );
        let events: Vec<Event> = rx.try_iter().collect();
        let steps: Vec<EventKind> = events.iter().map(|e| e.kind.clone()).collect();
        let step = |step, tokens| EventKind::Step {
            step,
            tokens: Some(tokens),
        };
        assert_eq!(steps, [step(0, 16384), step(1, 32768), step(2, 49152)]);
        // Stamped when read, on the stream's clock: rows 1 and 2 by the last read.
        assert!(events[0].t_ns < before);
        assert!(
            events[1..]
                .iter()
                .all(|e| (before..=after).contains(&e.t_ns))
        );
    }

    #[test]
    fn json_lines_and_a_log_that_appears_late() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let p2 = path.clone();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            std::fs::write(
                &p2,
                "{\"step\": 7, \"loss\": 1.25}\n{\"step\": 8, \"loss\": null}\n",
            )
            .unwrap();
        });
        let mut log = StepLog::wait_for(&path, Duration::from_secs(5), || true).unwrap();
        writer.join().unwrap();
        assert_eq!(log.format(), LogFormat::JsonLines);
        let mut out = [0.0; 2];
        log.read(&mut out).unwrap();
        assert_eq!(out[0], 8.0);
        assert!(out[1].is_nan(), "null is no reading");
        let err = StepLog::wait_for(
            &dir.path().join("never"),
            Duration::from_millis(200),
            || true,
        )
        .unwrap_err();
        assert!(matches!(err, StepLogError::NoHeader { .. }));
        let err = StepLog::wait_for(&dir.path().join("never"), Duration::from_secs(5), || false)
            .unwrap_err();
        assert!(matches!(err, StepLogError::ProcessGone { .. }));
    }
}
