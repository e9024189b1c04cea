//! The logs a training job already writes, followed while it runs
//! ([`LogTail`]) or read whole after it ([`read_all`]):
//!
//! - CSV with a header row, read with the `csv` crate (quoted fields, cells
//!   left empty). Lightning's `CSVLogger` rewrites its whole `metrics.csv`
//!   with a wider header when a metric first appears: a rewrite is seen by a
//!   new inode, a file shorter than what was read, a changed header or a
//!   read position that is no longer the end of a row, and reading resumes at
//!   the first row not read before (rows keep their order in a rewrite), so
//!   no row is lost or read twice;
//! - JSON lines, one object per line, whose key set may grow;
//! - a Hugging Face `trainer_state.json` (its `log_history` list), rewritten
//!   whole at each checkpoint: the entries after the ones already read;
//! - anything else is a saved console log: each line read as printed output
//!   is (see [`super::output`]).
//!
//! Files are polled, not watched with inotify: logs often sit on network
//! file systems where change notification does not reach. Every row or line
//! becomes a [`Line`] (a step, `log.<key>` values, a marker), the same as a
//! printed line, so one collector turns both into channels and events.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Sender, TrySendError};

use super::Clock;
use super::bars::parse_bar;
use super::output::{Line, OutputStats, Printed, StepPattern, pairs_line, parse_with};

/// The layouts a log may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Csv,
    JsonLines,
    TrainerState,
    Text,
}

impl LogFormat {
    pub fn name(self) -> &'static str {
        match self {
            Self::Csv => "CSV",
            Self::JsonLines => "JSON lines",
            Self::TrainerState => "trainer_state.json",
            Self::Text => "console log",
        }
    }
}

/// Why a log cannot be read or followed.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("{path}: {cause}")]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error(
        "{path}: nothing to read after waiting {waited:.0} s (a log starts with a CSV header, a JSON object or a line of text)"
    )]
    NoHeader { path: PathBuf, waited: f64 },
    #[error("{path}: {reason}")]
    Bad { path: PathBuf, reason: String },
    #[error("the watched process exited before its log {path} appeared")]
    ProcessGone { path: PathBuf },
}

/// Most bytes read from a log in one go; a longer backlog is read over
/// several.
pub const READ_CHUNK: usize = 4 << 20;

/// Largest `trainer_state.json` read (it is read whole at every change).
pub const MAX_STATE: u64 = 256 << 20;

/// How often a followed log is looked at.
pub const POLL: Duration = Duration::from_millis(250);

/// Whether a first line is a CSV header: two or more names, none a number.
/// Without a `.csv` name the names must also be free of spaces, so that a
/// console line with a comma is not taken for one.
fn is_csv_header(line: &str, csv_name: bool) -> bool {
    let Some(cells) = csv_cells(line) else {
        return false;
    };
    cells.len() >= 2
        && cells.iter().all(|c| {
            let c = c.trim();
            let mut chars = c.chars();
            chars
                .next()
                .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
                && chars.all(|ch| {
                    ch.is_ascii_alphanumeric() || "_./-".contains(ch) || (csv_name && ch == ' ')
                })
        })
}

/// One CSV line's cells.
fn csv_cells(line: &str) -> Option<Vec<String>> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(line.as_bytes());
    let rec = rdr.records().next()?.ok()?;
    Some(rec.iter().map(|c| c.trim().to_owned()).collect())
}

/// What kind of log `head` (the file's first bytes, or all of it) is, or
/// `None` while that cannot be told yet (empty, or a first line not ended).
pub fn detect(path: &Path, head: &[u8]) -> Option<LogFormat> {
    let text = String::from_utf8_lossy(head);
    let start = text.trim_start();
    if start.is_empty() {
        return None;
    }
    let first = start.split_once('\n').map(|(l, _)| l.trim());
    if start.starts_with('{') {
        if let Some(l) = first
            && serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(l).is_ok()
        {
            return Some(LogFormat::JsonLines);
        }
        // A pretty-printed document: a trainer state once it parses whole.
        return match serde_json::from_str::<serde_json::Value>(start) {
            Ok(v)
                if v.get("log_history")
                    .is_some_and(serde_json::Value::is_array) =>
            {
                Some(LogFormat::TrainerState)
            }
            Ok(_) => Some(LogFormat::Text),
            Err(_) => None,
        };
    }
    let first = first?;
    let csv_name = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"));
    if is_csv_header(first, csv_name) {
        Some(LogFormat::Csv)
    } else {
        Some(LogFormat::Text)
    }
}

/// Where the last whole CSV record in `buf` ends (after its newline), with
/// quoted fields that hold newlines kept whole; 0 if none has ended.
fn csv_records_end(buf: &[u8]) -> usize {
    let mut quoted = false;
    let mut end = 0;
    for (i, &b) in buf.iter().enumerate() {
        match b {
            b'"' => quoted = !quoted,
            b'\n' if !quoted => end = i + 1,
            _ => {}
        }
    }
    end
}

/// Where the last whole line in `buf` ends (after its newline).
fn lines_end(buf: &[u8]) -> usize {
    buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)
}

/// The parsing state of one log: what is known of its layout, and how far
/// into its rows it has read.
#[derive(Debug)]
struct Parser {
    format: LogFormat,
    /// CSV: the header line as read (with its newline), and its names.
    header: Vec<u8>,
    columns: Vec<String>,
    /// Rows (CSV records, JSON lines, trainer-state entries) read so far.
    rows: u64,
    /// After a CSV rewrite: rows at its start that were read before it.
    skip: u64,
    pattern: Option<StepPattern>,
    stats: Arc<OutputStats>,
}

impl Parser {
    fn new(format: LogFormat, pattern: Option<StepPattern>, stats: Arc<OutputStats>) -> Self {
        Self {
            format,
            header: Vec::new(),
            columns: Vec::new(),
            rows: 0,
            skip: 0,
            pattern,
            stats,
        }
    }

    fn counted(&self, line: Line, out: &mut Vec<Line>) {
        self.stats.lines.fetch_add(1, Relaxed);
        if !line.is_empty() {
            self.stats.parsed.fetch_add(1, Relaxed);
            out.push(line);
        }
    }

    /// Takes a CSV header line (with its newline).
    fn set_header(&mut self, line: &[u8]) {
        self.header = line.to_vec();
        self.columns = csv_cells(&String::from_utf8_lossy(line)).unwrap_or_default();
    }

    /// Whole CSV records after the header.
    fn csv(&mut self, bytes: &[u8], out: &mut Vec<Line>) {
        let mut rdr = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .trim(csv::Trim::All)
            .from_reader(bytes);
        for rec in rdr.records() {
            let Ok(rec) = rec else {
                self.stats.lines.fetch_add(1, Relaxed);
                continue;
            };
            if rec.iter().eq(self.columns.iter().map(String::as_str)) {
                continue; // the header again
            }
            if rec.len() == 1 && rec[0].is_empty() {
                continue; // a blank line
            }
            self.rows += 1;
            if self.skip > 0 {
                self.skip -= 1;
                continue;
            }
            let line = if rec.len() == self.columns.len() {
                pairs_line(
                    self.columns
                        .iter()
                        .zip(rec.iter())
                        .filter_map(|(c, v)| Some((c.as_str(), v.parse::<f64>().ok()?))),
                )
            } else {
                Line::default()
            };
            self.counted(line, out);
        }
    }

    /// Whole lines of JSON objects or console text.
    fn lines(&mut self, bytes: &[u8], out: &mut Vec<Line>) {
        for raw in bytes.split(|&b| b == b'\n') {
            let text = String::from_utf8_lossy(raw);
            if text.trim().is_empty() {
                continue;
            }
            self.rows += 1;
            let line = match self.format {
                LogFormat::JsonLines => {
                    match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&text)
                    {
                        Ok(obj) => pairs_line(
                            obj.iter()
                                .filter_map(|(k, v)| Some((k.as_str(), v.as_f64()?))),
                        ),
                        Err(_) => Line::default(),
                    }
                }
                _ => {
                    // A saved console keeps every drawn state of a progress
                    // bar before the line's last text: each is read.
                    let mut states = text.split('\r');
                    let last = states.next_back().unwrap_or_default();
                    for state in states {
                        if let Some(bar) = parse_bar(state) {
                            let bar = Line {
                                bar: Some(bar),
                                ..Line::default()
                            };
                            self.counted(bar, out);
                        }
                    }
                    if last.trim().is_empty() {
                        continue;
                    }
                    parse_with(last, self.pattern.as_ref())
                }
            };
            self.counted(line, out);
        }
    }

    /// A whole trainer state: the `log_history` entries not read before.
    /// Err if it does not parse (it may be half written).
    fn trainer_state(&mut self, doc: &[u8], out: &mut Vec<Line>) -> Result<(), String> {
        let v: serde_json::Value = serde_json::from_slice(doc).map_err(|e| e.to_string())?;
        let Some(history) = v.get("log_history").and_then(serde_json::Value::as_array) else {
            return Err("no log_history list".into());
        };
        // A run resumed from an earlier checkpoint starts again from a
        // shorter history: what follows is new.
        let seen = (self.rows as usize).min(history.len());
        for entry in &history[seen..] {
            let line = entry.as_object().map_or_else(Line::default, |obj| {
                pairs_line(
                    obj.iter()
                        .filter_map(|(k, v)| Some((k.as_str(), v.as_f64()?))),
                )
            });
            self.counted(line, out);
        }
        self.rows = history.len() as u64;
        Ok(())
    }
}

/// Reads a whole log (for `flatline import`): its layout and what each row
/// or line says, in order. Rows that say nothing are counted in `stats`.
pub fn read_all(
    path: &Path,
    pattern: Option<StepPattern>,
    stats: Arc<OutputStats>,
) -> Result<(LogFormat, Vec<Line>), LogError> {
    let io = |source| LogError::Io {
        path: path.to_owned(),
        cause: source,
    };
    let bytes = std::fs::read(path).map_err(io)?;
    let bad = |reason: &str| LogError::Bad {
        path: path.to_owned(),
        reason: reason.into(),
    };
    let format = detect(path, &bytes).ok_or_else(|| {
        bad(if bytes.trim_ascii().is_empty() {
            "the file is empty"
        } else {
            "a JSON document that does not parse"
        })
    })?;
    let mut p = Parser::new(format, pattern, stats);
    let mut out = Vec::new();
    match format {
        LogFormat::Csv => {
            let start = bytes.len() - bytes.trim_ascii_start().len();
            let header_end = bytes[start..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |i| start + i + 1);
            p.set_header(&bytes[start..header_end]);
            p.csv(&bytes[header_end..], &mut out);
        }
        LogFormat::TrainerState => p.trainer_state(&bytes, &mut out).map_err(|e| bad(&e))?,
        LogFormat::JsonLines | LogFormat::Text => p.lines(&bytes, &mut out),
    }
    Ok((format, out))
}

/// A log being followed while its job runs.
#[derive(Debug)]
pub struct LogTail {
    path: PathBuf,
    parser: Parser,
    /// The file's identity (inode) when last read.
    id: u64,
    /// Bytes consumed: the end of the last whole row read.
    offset: u64,
    /// Trainer state: (length, modification time) when last read whole.
    seen: Option<(u64, std::time::SystemTime)>,
    buf: Vec<u8>,
}

#[cfg(unix)]
fn file_id(m: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    m.ino()
}

#[cfg(not(unix))]
fn file_id(_m: &std::fs::Metadata) -> u64 {
    0
}

impl LogTail {
    /// Waits (up to `timeout`) for `path` to exist and say what it is,
    /// checking `alive` meanwhile.
    pub fn wait_for(
        path: &Path,
        timeout: Duration,
        pattern: Option<StepPattern>,
        mut alive: impl FnMut() -> bool,
    ) -> Result<Self, LogError> {
        let t0 = Instant::now();
        loop {
            if let Ok(mut f) = File::open(path) {
                let io = |source| LogError::Io {
                    path: path.to_owned(),
                    cause: source,
                };
                let mut head = vec![0u8; 64 << 10];
                let mut read = read_full(&mut f, &mut head).map_err(io)?;
                if read == head.len() && head.trim_ascii_start().starts_with(b"{") {
                    // Perhaps a long trainer state: it says what it is only whole.
                    head.truncate(read);
                    read += f
                        .by_ref()
                        .take(MAX_STATE)
                        .read_to_end(&mut head)
                        .map_err(io)?;
                }
                if let Some(format) = detect(path, &head[..read]) {
                    let id = f.metadata().map(|m| file_id(&m)).unwrap_or(0);
                    let mut tail = Self {
                        path: path.to_owned(),
                        parser: Parser::new(format, pattern, Arc::default()),
                        id,
                        offset: 0,
                        seen: None,
                        buf: Vec::new(),
                    };
                    if format == LogFormat::Csv {
                        tail.take_header(&head);
                    }
                    return Ok(tail);
                }
            }
            if !alive() {
                return Err(LogError::ProcessGone {
                    path: path.to_owned(),
                });
            }
            if t0.elapsed() >= timeout {
                return Err(LogError::NoHeader {
                    path: path.to_owned(),
                    waited: timeout.as_secs_f64(),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn format(&self) -> LogFormat {
        self.parser.format
    }

    pub fn stats(&self) -> Arc<OutputStats> {
        self.parser.stats.clone()
    }

    /// Reads the CSV header at the start of `head`; the rows follow it.
    fn take_header(&mut self, head: &[u8]) -> bool {
        let Some(end) = head.iter().position(|&b| b == b'\n') else {
            return false;
        };
        self.parser.set_header(&head[..=end]);
        self.offset = end as u64 + 1;
        true
    }

    /// The file's first line now, with its newline (empty if not yet whole).
    fn header_now(&self, f: &mut File) -> std::io::Result<Vec<u8>> {
        let mut head = vec![0u8; self.parser.header.len().max(1)];
        f.seek(SeekFrom::Start(0))?;
        let n = read_full(f, &mut head)?;
        head.truncate(n);
        Ok(head)
    }

    /// Reads what was added since the last poll into `out`. A missing file
    /// (rotated, being replaced) is not an error: it is looked for again.
    pub fn poll(&mut self, out: &mut Vec<Line>) -> Result<(), LogError> {
        let path = self.path.clone();
        let io = |source| LogError::Io {
            path: path.clone(),
            cause: source,
        };
        let mut f = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io(e)),
        };
        let meta = f.metadata().map_err(io)?;
        let (id, len) = (file_id(&meta), meta.len());
        match self.parser.format {
            LogFormat::TrainerState => {
                let sig = (len, meta.modified().map_err(io)?);
                if self.seen == Some(sig) {
                    return Ok(());
                }
                if len > MAX_STATE {
                    return Err(LogError::Bad {
                        path: self.path.clone(),
                        reason: format!("over {} MiB: not read", MAX_STATE >> 20),
                    });
                }
                self.buf.clear();
                f.read_to_end(&mut self.buf).map_err(io)?;
                self.parser
                    .stats
                    .bytes
                    .fetch_add(self.buf.len() as u64, Relaxed);
                // Half written: tried again at the next poll.
                if self.parser.trainer_state(&self.buf, out).is_ok() {
                    self.seen = Some(sig);
                }
                Ok(())
            }
            LogFormat::Csv => {
                let head = self.header_now(&mut f).map_err(io)?;
                let rewritten = id != self.id || len < self.offset || head != self.parser.header;
                if rewritten || !self.at_row_start(&mut f).map_err(io)? {
                    // Read again from its header, past the rows read before.
                    let mut whole = vec![0u8; 64 << 10];
                    f.seek(SeekFrom::Start(0)).map_err(io)?;
                    let n = read_full(&mut f, &mut whole).map_err(io)?;
                    if !self.take_header(&whole[..n]) {
                        return Ok(()); // being written: next poll
                    }
                    self.id = id;
                    self.parser.skip = self.parser.rows;
                    self.parser.rows = 0;
                    self.parser.stats.rewrites.fetch_add(1, Relaxed);
                }
                self.read_rows(&mut f, len, out).map_err(io)
            }
            LogFormat::JsonLines | LogFormat::Text => {
                if id != self.id || len < self.offset {
                    // Replaced or truncated: a new log from its start.
                    self.id = id;
                    self.offset = 0;
                }
                self.read_rows(&mut f, len, out).map_err(io)
            }
        }
    }

    /// Whether the byte before the read position ends a row, as it did when
    /// it was read (a rewrite that kept the header and grew past it would
    /// otherwise be read from the middle of a row).
    fn at_row_start(&self, f: &mut File) -> std::io::Result<bool> {
        if self.offset == 0 {
            return Ok(true);
        }
        let mut b = [0u8; 1];
        f.seek(SeekFrom::Start(self.offset - 1))?;
        Ok(read_full(f, &mut b)? == 1 && b[0] == b'\n')
    }

    /// Whole rows from the read position to `len` (at most [`READ_CHUNK`]).
    fn read_rows(&mut self, f: &mut File, len: u64, out: &mut Vec<Line>) -> std::io::Result<()> {
        while self.offset < len {
            let want = (len - self.offset).min(READ_CHUNK as u64) as usize;
            self.buf.resize(want, 0);
            f.seek(SeekFrom::Start(self.offset))?;
            let n = read_full(f, &mut self.buf)?;
            self.buf.truncate(n);
            let csv = self.parser.format == LogFormat::Csv;
            let mut end = if csv {
                csv_records_end(&self.buf)
            } else {
                lines_end(&self.buf)
            };
            if end == 0 {
                if n < READ_CHUNK {
                    return Ok(()); // a row still being written
                }
                // One line longer than a chunk: skipped, counted.
                self.parser.stats.skipped_bytes.fetch_add(n as u64, Relaxed);
                end = n;
            } else {
                let rows = std::mem::take(&mut self.buf);
                if csv {
                    self.parser.csv(&rows[..end], out);
                } else {
                    self.parser.lines(&rows[..end], out);
                }
                self.buf = rows;
            }
            self.parser.stats.bytes.fetch_add(end as u64, Relaxed);
            self.offset += end as u64;
        }
        Ok(())
    }

    /// Follows the log on its own thread, every `every`, sending what each
    /// row says (stamped when read on `clock`) to `to`, until `stop` is set;
    /// then reads once more and ends. Errors end nothing: the log is looked
    /// at again at the next poll, and the first error of a kind is kept in
    /// the returned handle's result.
    pub fn spawn(
        mut self,
        to: Sender<Printed>,
        clock: Clock,
        every: Duration,
        stop: Arc<AtomicBool>,
    ) -> std::io::Result<JoinHandle<Option<String>>> {
        std::thread::Builder::new()
            .name("flatline-log".into())
            .spawn(move || {
                super::alloc::mark_observer_thread();
                let mut lines = Vec::new();
                let mut first_error = None;
                loop {
                    let last = stop.load(Relaxed);
                    if let Err(e) = self.poll(&mut lines) {
                        first_error.get_or_insert_with(|| e.to_string());
                    }
                    let t_ns = clock.now_ns();
                    for line in lines.drain(..) {
                        let p = Printed {
                            t_ns,
                            line,
                            from_log: true,
                        };
                        if let Err(TrySendError::Full(_)) = to.try_send(p) {
                            self.parser.stats.dropped.fetch_add(1, Relaxed);
                        }
                    }
                    if last {
                        return first_error;
                    }
                    let until = Instant::now() + every;
                    while Instant::now() < until && !stop.load(Relaxed) {
                        std::thread::sleep(Duration::from_millis(10).min(every));
                    }
                }
            })
    }
}

/// Reads until `buf` is full or the file ends.
fn read_full(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::Unit;

    fn steps(lines: &[Line]) -> Vec<u64> {
        lines.iter().filter_map(|l| l.step).collect()
    }

    fn value(l: &Line, key: &str) -> Option<f64> {
        l.values.iter().find(|(k, _, _)| k == key).map(|v| v.1)
    }

    #[test]
    fn tells_the_layouts_apart() {
        let p = Path::new("log");
        let csv = Path::new("metrics.csv");
        assert_eq!(detect(p, b"step,loss\n1,2\n"), Some(LogFormat::Csv));
        assert_eq!(detect(p, b"step,loss"), None, "a first line not ended");
        assert_eq!(
            detect(p, b"epoch,step,lr-Adam,val/loss\n"),
            Some(LogFormat::Csv)
        );
        assert_eq!(
            detect(p, b"Loading model, tokenizer\n"),
            Some(LogFormat::Text),
            "a console line with a comma"
        );
        assert_eq!(
            detect(csv, b"train loss,val loss\n"),
            Some(LogFormat::Csv),
            "a .csv may have spaced names"
        );
        assert_eq!(
            detect(p, b"iter 0: loss 2.1, time 3ms\n"),
            Some(LogFormat::Text)
        );
        assert_eq!(detect(p, b"{\"step\": 1}\n"), Some(LogFormat::JsonLines));
        let state = b"{\n  \"global_step\": 10,\n  \"log_history\": []\n}\n";
        assert_eq!(detect(p, state), Some(LogFormat::TrainerState));
        assert_eq!(detect(p, &state[..20]), None, "half written");
        assert_eq!(detect(p, b"  \n"), None);
    }

    #[test]
    fn rows_give_steps_units_and_eval_markers() {
        let l = pairs_line([("global_step", 40.0), ("loss", 2.5), ("vm_rss_mb", 100.0)]);
        assert_eq!(l.step, Some(40));
        assert_eq!(l.values[1], ("vm_rss_mb".into(), 100.0, Unit::Mebibytes));
        assert_eq!(l.marker, None);
        let e = pairs_line([("eval_loss", 1.9), ("step", 500.0), ("epoch", f64::NAN)]);
        assert_eq!(e.marker.as_deref(), Some("eval"));
        assert_eq!((e.step, e.values.len()), (Some(500), 1), "NaN is no value");
    }

    fn write(path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
    }

    fn append(path: &Path, text: &str) {
        let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    fn tail(path: &Path) -> LogTail {
        LogTail::wait_for(path, Duration::from_secs(1), None, || true).unwrap()
    }

    #[test]
    fn csv_quoted_fields_half_rows_and_junk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.csv");
        write(
            &path,
            "step,tokens,note,vm_rss_mb\n0,16384,\"a, b\",100.5\n",
        );
        let mut t = tail(&path);
        assert_eq!(t.format(), LogFormat::Csv);
        let mut out = Vec::new();
        t.poll(&mut out).unwrap();
        assert_eq!(steps(&out), [0]);
        assert_eq!(value(&out[0], "vm_rss_mb"), Some(100.5));
        assert_eq!(value(&out[0], "tokens"), Some(16384.0));
        assert_eq!(out[0].values.len(), 2, "the text cell is no value");
        out.clear();
        append(&path, "1,32768,\"multi\nline\",100.");
        t.poll(&mut out).unwrap();
        assert!(out.is_empty(), "a half-written row waits");
        append(&path, "75\ngarbage\n2,49152,x,101.0\n");
        t.poll(&mut out).unwrap();
        assert_eq!(steps(&out), [1, 2]);
        assert_eq!(value(&out[0], "vm_rss_mb"), Some(100.75));
        let st = t.stats();
        assert_eq!(
            (st.lines.load(Relaxed), st.parsed.load(Relaxed)),
            (4, 3),
            "the junk row counted, not read"
        );
    }

    /// Lightning's CSVLogger: the whole file rewritten, same inode, with a
    /// wider header, when a metric first appears.
    #[test]
    fn a_rewritten_csv_resumes_at_the_first_new_row() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.csv");
        write(&path, "epoch,step,train_loss\n0,0,3.0\n0,1,2.9\n");
        let mut t = tail(&path);
        let mut out = Vec::new();
        t.poll(&mut out).unwrap();
        assert_eq!(steps(&out), [0, 1]);
        out.clear();
        // Rewritten in place (truncate and write), one new row with it.
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        f.write_all(b"epoch,step,train_loss,val_loss\n0,0,3.0,\n0,1,2.9,\n0,1,,2.5\n")
            .unwrap();
        drop(f);
        t.poll(&mut out).unwrap();
        assert_eq!(t.stats().rewrites.load(Relaxed), 1);
        assert_eq!(out.len(), 1, "the two rows read before are not read again");
        assert_eq!(value(&out[0], "val_loss"), Some(2.5));
        assert_eq!(value(&out[0], "train_loss"), None);
        out.clear();
        append(&path, "0,2,2.8,\n");
        t.poll(&mut out).unwrap();
        assert_eq!(steps(&out), [2]);
        assert_eq!(value(&out[0], "train_loss"), Some(2.8));
        // Replaced by a new file (new inode) of the same rows plus one.
        let tmp = dir.path().join("m.tmp");
        write(
            &tmp,
            "epoch,step,train_loss,val_loss\n0,0,3.0,\n0,1,2.9,\n0,1,,2.5\n0,2,2.8,\n1,3,2.7,\n",
        );
        std::fs::rename(&tmp, &path).unwrap();
        out.clear();
        t.poll(&mut out).unwrap();
        assert_eq!(steps(&out), [3]);
    }

    #[test]
    fn json_lines_grow_keys_and_truncation_starts_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        write(&path, "{\"step\": 1, \"loss\": 2.0}\nnot json\n");
        let mut t = tail(&path);
        assert_eq!(t.format(), LogFormat::JsonLines);
        let mut out = Vec::new();
        t.poll(&mut out).unwrap();
        assert_eq!(steps(&out), [1]);
        append(&path, "{\"step\": 2, \"loss\": 1.9, \"grad_norm\": 0.5}\n");
        t.poll(&mut out).unwrap();
        assert_eq!(value(&out[1], "grad_norm"), Some(0.5));
        write(&path, "{\"step\": 0}\n");
        out.clear();
        t.poll(&mut out).unwrap();
        assert_eq!(steps(&out), [0], "a truncated log is read from its start");
        let st = t.stats();
        assert_eq!((st.lines.load(Relaxed), st.parsed.load(Relaxed)), (4, 3));
    }

    #[test]
    fn trainer_state_entries_once_each() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trainer_state.json");
        let state = |n: usize| {
            let entries: Vec<String> = (1..=n)
                .map(|i| format!("{{\"loss\": {}, \"step\": {}}}", 3.0 / i as f64, 10 * i))
                .collect();
            format!(
                "{{\n  \"global_step\": {},\n  \"log_history\": [\n{}\n  ]\n}}\n",
                10 * n,
                entries.join(",\n")
            )
        };
        write(&path, &state(2));
        let mut t = tail(&path);
        assert_eq!(t.format(), LogFormat::TrainerState);
        let mut out = Vec::new();
        t.poll(&mut out).unwrap();
        t.poll(&mut out).unwrap();
        assert_eq!(steps(&out), [10, 20], "unchanged: not read again");
        // Half written, then whole.
        let full = state(4);
        write(&path, &full[..full.len() / 2]);
        t.poll(&mut out).unwrap();
        assert_eq!(out.len(), 2);
        write(&path, &full);
        t.poll(&mut out).unwrap();
        assert_eq!(steps(&out), [10, 20, 30, 40]);
    }

    #[test]
    fn console_logs_read_as_printed_and_a_followed_log_sends_to_the_collector() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("train.log");
        write(
            &path,
            "Overriding config\niter 0: loss 4.0, time 30.00ms\nsaving checkpoint to out\n",
        );
        let t = tail(&path);
        assert_eq!(t.format(), LogFormat::Text);
        let (tx, rx) = crossbeam_channel::bounded(64);
        let stop = Arc::new(AtomicBool::new(false));
        let stats = t.stats();
        let h = t
            .spawn(tx, Clock::start(), Duration::from_millis(20), stop.clone())
            .unwrap();
        let first: Vec<Printed> = (0..2)
            .map(|_| rx.recv_timeout(Duration::from_secs(5)).unwrap())
            .collect();
        assert_eq!(first[0].line.step, Some(0));
        assert!(first.iter().all(|p| p.from_log));
        assert_eq!(
            first[1].line.marker.as_deref(),
            Some("saving checkpoint to out")
        );
        append(&path, "iter 1: loss 3.0, time 30.00ms\n");
        let p = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(p.line.step, Some(1));
        stop.store(true, Relaxed);
        assert_eq!(h.join().unwrap(), None);
        assert!(rx.recv().is_err(), "the sender went with the thread");
        assert_eq!(
            (stats.lines.load(Relaxed), stats.parsed.load(Relaxed)),
            (4, 3)
        );
    }

    #[test]
    fn read_all_and_its_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.csv");
        write(&path, "\nstep,loss\n1,2.0\n2,1.5\n");
        let (f, lines) = read_all(&path, None, Arc::default()).unwrap();
        assert_eq!((f, steps(&lines)), (LogFormat::Csv, vec![1, 2]));
        write(&path, "");
        let e = read_all(&path, None, Arc::default()).unwrap_err();
        assert!(e.to_string().contains("empty"), "{e}");
        let e = read_all(&dir.path().join("none"), None, Arc::default()).unwrap_err();
        assert!(matches!(e, LogError::Io { .. }));
        let err = LogTail::wait_for(
            &dir.path().join("never"),
            Duration::from_secs(5),
            None,
            || false,
        )
        .unwrap_err();
        assert!(matches!(err, LogError::ProcessGone { .. }));
    }
}
