//! `flatline._flatline`: the native half of the `flatline` Python package.
//!
//! Every byte of a recording is read here, by `flatline-format`'s reader,
//! and every receipt made by the command line's report code (`flatline-receipt`): the Python half
//! (`python/flatline/__init__.py`) only shapes what this returns. Values go
//! to numpy as the vectors the reader filled (moved, not copied value by
//! value); the header and events as JSON text for `json.loads`.

use std::path::{Path, PathBuf};

use flatline_format::{ChannelSpec, Event, Header, Recording, RecordingError, Visit};
use flatline_receipt::report;
use numpy::IntoPyArray;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyFileNotFoundError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

create_exception!(
    _flatline,
    RecordingFileError,
    PyException,
    "A recording that cannot be read at all (not a flatline recording, a damaged header)."
);

/// A reader's error as Python's: a missing file is `FileNotFoundError`,
/// anything else the module's own error, its message the CLI's.
fn py_err(e: RecordingError) -> PyErr {
    match &e {
        RecordingError::Io { cause, .. } if cause.kind() == std::io::ErrorKind::NotFound => {
            PyFileNotFoundError::new_err(e.to_string())
        }
        _ => RecordingFileError::new_err(e.to_string()),
    }
}

/// An event as a flat JSON object: `t` (seconds), `kind` (`step`,
/// `marker`, `note`, …) and the kind's fields (`text` for a marker's,
/// note's or phase's words).
fn event_json(e: &Event) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    out.insert("t".into(), (e.t_ns as f64 / 1e9).into());
    match serde_json::to_value(&e.kind).unwrap_or_default() {
        serde_json::Value::String(kind) => {
            out.insert("kind".into(), kind.into());
        }
        serde_json::Value::Object(o) => {
            for (kind, body) in o {
                out.insert("kind".into(), kind.into());
                match body {
                    serde_json::Value::Object(mut fields) => {
                        // A fact names its own kind (`exit`, `cuda_oom`): under `fact`.
                        if let Some(k) = fields.remove("kind") {
                            fields.insert("fact".into(), k);
                        }
                        out.extend(fields)
                    }
                    other => {
                        out.insert("text".into(), other);
                    }
                }
            }
        }
        _ => {}
    }
    out.into()
}

/// What a read holds, before it becomes Python's.
struct Held {
    header: Header,
    t_ns: Vec<u64>,
    columns: Vec<Vec<f64>>,
    /// Per channel: when it carried values (seconds), where known.
    lifetimes: Vec<(Option<f64>, Option<f64>)>,
    events: Vec<Event>,
    digest: String,
    warning: Option<String>,
    /// Every how many samples one is held (1: all of them).
    stride: usize,
    samples_total: usize,
}

/// A whole file, at most `budget` bytes of values held (past it, every
/// `stride`-th sample, as `flatline report` holds a week).
fn read_whole(path: &Path, budget: usize) -> Result<Held, RecordingError> {
    let rec = Recording::open_bounded(path, budget)?;
    let at = |i: usize| rec.t_ns.get(i).map(|&t| t as f64 / 1e9);
    let lifetimes = rec
        .lifetimes
        .iter()
        .map(|l| (at(l.from), l.until.and_then(at)))
        .collect();
    let warning = rec
        .tail
        .as_ref()
        .map(|t| report::tail_text(path, t, rec.samples_total()));
    Ok(Held {
        lifetimes,
        stride: rec.thinned.as_ref().map_or(1, |t| t.stride),
        samples_total: rec.samples_total(),
        header: rec.header,
        t_ns: rec.t_ns,
        columns: rec.columns,
        events: rec.events,
        digest: rec.digest,
        warning,
    })
}

/// One pass over the file holding only the samples and events in
/// `[t0_ns, t1_ns]`, every one of them.
#[derive(Default)]
struct Range {
    t0_ns: u64,
    t1_ns: u64,
    t_ns: Vec<u64>,
    columns: Vec<Vec<f64>>,
    events: Vec<Event>,
    /// (channel, sample index, joins) not yet given a time.
    pending: Vec<(usize, usize, bool)>,
    lifetimes: Vec<(Option<f64>, Option<f64>)>,
    channels: usize,
}

impl Visit for Range {
    fn start(&mut self, header: &Header) {
        self.channels = header.schema.len();
        self.pending = (0..self.channels).map(|c| (c, 0, true)).collect();
    }
    fn channels(&mut self, at: usize, specs: &[ChannelSpec]) {
        for c in self.channels..self.channels + specs.len() {
            self.pending.push((c, at, true));
        }
        self.channels += specs.len();
    }
    fn ended(&mut self, at: usize, positions: &[u32]) {
        self.pending
            .extend(positions.iter().map(|&p| (p as usize, at, false)));
    }
    fn rows(&mut self, first: usize, t_ns: &[u64], values: &[f64]) {
        if t_ns.is_empty() {
            return;
        }
        let n = values.len() / t_ns.len();
        let end = first + t_ns.len();
        let lifetimes = &mut self.lifetimes;
        self.pending.retain(|&(c, at, joins)| {
            if at >= end {
                return true;
            }
            let t = t_ns[at.saturating_sub(first)] as f64 / 1e9;
            if lifetimes.len() <= c {
                lifetimes.resize(c + 1, (None, None));
            }
            if joins {
                lifetimes[c].0 = Some(t);
            } else {
                lifetimes[c].1 = Some(t);
            }
            false
        });
        for (k, &t) in t_ns.iter().enumerate() {
            if t < self.t0_ns || t > self.t1_ns {
                continue;
            }
            // A channel that joined later has no values before: NaN.
            while self.columns.len() < n {
                self.columns.push(vec![f64::NAN; self.t_ns.len()]);
            }
            self.t_ns.push(t);
            for (c, col) in self.columns.iter_mut().enumerate() {
                col.push(values.get(k * n + c).copied().unwrap_or(f64::NAN));
            }
        }
    }
    fn event(&mut self, e: Event) {
        if e.t_ns >= self.t0_ns && e.t_ns <= self.t1_ns {
            self.events.push(e);
        }
    }
}

fn read_range(path: &Path, t0_ns: u64, t1_ns: u64) -> Result<Held, RecordingError> {
    let file = std::fs::File::open(path).map_err(|cause| RecordingError::Io {
        path: path.to_owned(),
        cause,
    })?;
    let mut v = Range {
        t0_ns,
        t1_ns,
        ..Range::default()
    };
    let s = flatline_format::scan(
        std::io::BufReader::with_capacity(1 << 20, file),
        path,
        &mut v,
    )?;
    let channels = s.header.schema.len();
    while v.columns.len() < channels {
        v.columns.push(vec![f64::NAN; v.t_ns.len()]);
    }
    v.lifetimes.resize(channels, (None, None));
    let warning = s
        .tail
        .as_ref()
        .map(|t| report::tail_text(path, t, s.samples));
    Ok(Held {
        header: s.header,
        t_ns: v.t_ns,
        columns: v.columns,
        lifetimes: v.lifetimes,
        events: v.events,
        digest: s.digest,
        warning,
        stride: 1,
        samples_total: s.samples,
    })
}

/// Seconds as nanoseconds, refusing what is not a time.
fn ns(s: f64, what: &str) -> PyResult<u64> {
    if s.is_nan() || s < 0.0 {
        return Err(PyValueError::new_err(format!(
            "{what}={s}: a time in seconds from the recording's start, 0 or more"
        )));
    }
    Ok((s * 1e9).min(u64::MAX as f64) as u64)
}

/// Reads a recording: a dict the Python half shapes into a `Recording`.
#[pyfunction]
#[pyo3(signature = (path, start=None, end=None, memory_mib=256))]
fn read(
    py: Python<'_>,
    path: PathBuf,
    start: Option<f64>,
    end: Option<f64>,
    memory_mib: usize,
) -> PyResult<Py<PyDict>> {
    let held = if start.is_none() && end.is_none() {
        py.detach(|| read_whole(&path, memory_mib.saturating_mul(1 << 20)))
            .map_err(py_err)?
    } else {
        let t0 = ns(start.unwrap_or(0.0), "start")?;
        let t1 = end.map_or(Ok(u64::MAX), |e| ns(e, "end"))?;
        if t0 > t1 {
            return Err(PyValueError::new_err(format!(
                "start={} is after end={}: no sample lies between",
                start.unwrap_or(0.0),
                end.unwrap_or(f64::INFINITY)
            )));
        }
        py.detach(|| read_range(&path, t0, t1)).map_err(py_err)?
    };
    let out = PyDict::new(py);
    let header = serde_json::to_string(&held.header)
        .map_err(|e| PyValueError::new_err(format!("the header as JSON: {e}")))?;
    out.set_item("header", header)?;
    let events: Vec<serde_json::Value> = held.events.iter().map(event_json).collect();
    out.set_item(
        "events",
        serde_json::to_string(&events).unwrap_or_else(|_| "[]".into()),
    )?;
    out.set_item("digest", held.digest)?;
    out.set_item("warning", held.warning)?;
    out.set_item("stride", held.stride)?;
    out.set_item("samples_total", held.samples_total)?;
    out.set_item("lifetimes", held.lifetimes)?;
    out.set_item("t_ns", held.t_ns.into_pyarray(py))?;
    let columns: Vec<_> = held
        .columns
        .into_iter()
        .map(|c| c.into_pyarray(py))
        .collect();
    out.set_item("columns", columns)?;
    Ok(out.unbind())
}

/// `flatline report --format json` of the file (of `[start, end]` seconds
/// where given), as JSON text: the same code, the same budget.
#[pyfunction]
#[pyo3(signature = (path, start=None, end=None, warmup_s=None))]
fn report_json(
    py: Python<'_>,
    path: PathBuf,
    start: Option<f64>,
    end: Option<f64>,
    warmup_s: Option<f64>,
) -> PyResult<String> {
    py.detach(|| {
        let rec = Recording::open_bounded(&path, report::ANALYSIS_BUDGET).map_err(py_err)?;
        let range = match (start, end) {
            (None, None) => None,
            (s, e) => Some([s.unwrap_or(0.0), e.unwrap_or(f64::INFINITY)]),
        };
        let receipt = report::analyse_range(&rec, warmup_s, range);
        serde_json::to_string(&report::json_report(&rec, &receipt))
            .map_err(|e| PyValueError::new_err(e.to_string()))
    })
}

/// The version of the flatline that built this module.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _flatline(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(read, m)?)?;
    m.add_function(wrap_pyfunction!(report_json, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    // The findings' kinds that tell how a job died, as the analysis lists
    // them: the notebook's `%flatline last` names these.
    m.add(
        "DEATH_KINDS",
        flatline_receipt::report::DEATH_KINDS.to_vec(),
    )?;
    m.add(
        "RecordingFileError",
        m.py().get_type::<RecordingFileError>(),
    )?;
    Ok(())
}
