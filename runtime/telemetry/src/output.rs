//! Steps, metrics and markers from what a training job already prints.
//!
//! [`parse_line`] reads one line of a job's stdout or stderr, as printed by
//! the usual trainers, and says what it found; it never fails (a line that
//! says nothing is [`Line::default`]):
//!
//! - nanoGPT: `iter 100: loss 2.3456, time 30.12ms, mfu 5.00%` → step 100,
//!   `log.loss`, `log.time_ms`, `log.mfu_pct` (the unit from the suffix);
//! - its evals: `step 2000: train loss 1.2345, val loss 1.4567` → step 2000,
//!   `log.train_loss`, `log.val_loss` and a marker `eval`;
//! - a saved checkpoint (`saving checkpoint to out`, `Saving model
//!   checkpoint to …`) → a marker whose text is the line;
//! - Python dict reprs and JSON objects with numeric values (a Hugging Face
//!   Trainer's `{'loss': 2.1, 'grad_norm': 1.3, 'epoch': 0.12}`) → `log.<key>`;
//!   a `step`, `global_step` or `iter` key is the step;
//! - `key=value` and `key: value` pairs on a line that names a step
//!   (`step 100 loss=2.31 lr=3e-4`);
//! - torchrun's `[default<rank>]:` prefix is stripped and the rank kept;
//! - a progress bar (tqdm's, rich's) is read at each draw: its count is the
//!   step, its rate `progress.it_per_s` (see [`super::bars`] for which bar
//!   and how); other text overwritten with `\r` is not read.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, TrySendError};
use flatline_format::{Event, EventKind};

pub use super::bars::Bars;
use super::bars::{Bar, parse_bar};
use super::keys::{leaf, unit_of};
use super::{ChannelSpec, Clock, Group, GrowHandle, Kind, Unit};

/// What one line said.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Line {
    /// The training step it reports.
    pub step: Option<u64>,
    /// Metrics, as channel leaves (`loss`, `time_ms`), values and units.
    pub values: Vec<(String, f64, Unit)>,
    /// A moment worth marking on the plots (an eval, a checkpoint).
    pub marker: Option<String>,
    /// The torchrun rank that printed it.
    pub rank: Option<u32>,
    /// A progress bar's drawn state (the collector turns it into a step and
    /// channels: [`super::bars::Bars`]).
    pub bar: Option<Bar>,
    /// Channels named whole (`progress.it_per_s`), not under `log.`.
    pub progress: Vec<(String, f64, Unit)>,
    /// Memory running out, as the job said it ([`super::oom`]): the fact
    /// and its marker's text.
    pub oom: Option<(EventKind, String)>,
}

impl Line {
    /// Whether the line said anything at all.
    pub fn is_empty(&self) -> bool {
        self.step.is_none()
            && self.values.is_empty()
            && self.marker.is_none()
            && self.bar.is_none()
            && self.progress.is_empty()
            && self.oom.is_none()
    }

    /// Replaces the line's bar by what it gives: `steps` says whether the
    /// bar's count may be the step (not where a log gives the steps).
    /// Returns the note to record, if any.
    pub fn read_bar(&mut self, bars: &mut Bars, steps: bool) -> Option<String> {
        let bar = self.bar.take()?;
        let r = bars.read(&bar);
        if steps && self.step.is_none() {
            self.step = r.step;
        }
        self.values.extend(r.values);
        self.progress.extend(r.progress);
        if self.marker.is_none() {
            self.marker = r.marker;
        }
        r.note
    }
}

/// One channel value a line gives (see [`cells`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub name: String,
    pub value: f64,
    pub unit: Unit,
    pub kind: Option<Kind>,
    pub group: Group,
}

/// The channels a line sets: `log.<key>` (`log.rank<r>.<key>` for torchrun
/// ranks other than 0) and `log.step`; PyTorch's allocator statistics as
/// `torch.<stat>` in bytes instead (`torch.rank<r>.<stat>`, see
/// [`super::torch`]), and `torch.cache` where a line has both allocated and
/// reserved.
pub fn cells(line: &Line) -> Vec<Cell> {
    let rank = line.rank.filter(|&r| r > 0);
    let (log, torch) = match rank {
        Some(r) => (format!("log.rank{r}."), format!("torch.rank{r}.")),
        None => ("log.".to_owned(), "torch.".to_owned()),
    };
    let mut out = Vec::with_capacity(line.values.len() + 2);
    let (mut allocated, mut reserved) = (None, None);
    for (key, v, unit) in &line.values {
        match super::torch::recognise(key) {
            Some((stat, scale)) => {
                let bytes = v * scale;
                match stat {
                    super::torch::Stat::Allocated => allocated = Some(bytes),
                    super::torch::Stat::Reserved => reserved = Some(bytes),
                    _ => {}
                }
                out.push(Cell {
                    name: format!("{torch}{}", stat.leaf()),
                    value: bytes,
                    unit: stat.unit(),
                    kind: Some(stat.kind()),
                    group: Group::Gpu,
                });
            }
            None => out.push(Cell {
                name: format!("{log}{key}"),
                value: *v,
                unit: *unit,
                kind: None,
                group: Group::StepLog,
            }),
        }
    }
    for (name, v, unit) in &line.progress {
        out.push(Cell {
            name: name.clone(),
            value: *v,
            unit: *unit,
            kind: Some(Kind::Gauge),
            group: Group::StepLog,
        });
    }
    if let (Some(a), Some(r)) = (allocated, reserved) {
        out.push(Cell {
            name: format!("{torch}cache"),
            value: r - a,
            unit: Unit::Bytes,
            kind: Some(Kind::Level),
            group: Group::Gpu,
        });
    }
    if let Some(step) = line.step {
        out.push(Cell {
            name: format!("{log}step"),
            value: step as f64,
            unit: Unit::Count,
            kind: Some(Kind::Counter),
            group: Group::StepLog,
        });
    }
    out
}

/// Keys that give the step.
fn is_step_key(k: &str) -> bool {
    matches!(
        k.to_ascii_lowercase().as_str(),
        "step" | "global_step" | "iter" | "iteration"
    )
}

/// A row of named numbers as a [`Line`]: a step key is the step, every other
/// key `log.<leaf>` with the unit its name implies; a Hugging Face eval
/// (`eval_*` keys) is marked `eval`.
pub fn pairs_line<'a>(pairs: impl IntoIterator<Item = (&'a str, f64)>) -> Line {
    let mut out = Line::default();
    for (k, v) in pairs {
        if !v.is_finite() {
            continue;
        }
        if is_step_key(k) && v >= 0.0 && v.fract() == 0.0 {
            // A wrapped counter is no step (and no metric either).
            if v <= super::MAX_STEP as f64 {
                out.step = Some(v as u64);
            }
            continue;
        }
        let l = leaf(k);
        if l.is_empty() {
            continue;
        }
        if l.starts_with("eval_") {
            out.marker = Some("eval".into());
        }
        out.values.push((l, v, unit_of(k)));
    }
    out
}

/// A number with an optional unit suffix: `30.12ms` → (30.12, `_ms`,
/// milliseconds), `5.00%` → (5.0, `_pct`, percent).
fn number_with_unit(s: &str) -> Option<(f64, &'static str, Unit)> {
    let s = s.trim().trim_end_matches(',');
    const SUFFIXES: [(&str, &str, Unit); 6] = [
        ("ms", "_ms", Unit::Milliseconds),
        ("us", "_us", Unit::Microseconds),
        ("µs", "_us", Unit::Microseconds),
        ("%", "_pct", Unit::Percent),
        ("s", "_s", Unit::Seconds),
        ("", "", Unit::Number),
    ];
    for (suffix, tag, unit) in SUFFIXES {
        if let Some(n) = s.strip_suffix(suffix)
            && let Ok(v) = n.trim().parse::<f64>()
            && v.is_finite()
        {
            return Some((v, tag, unit));
        }
    }
    None
}

fn step_number(s: &str) -> Option<u64> {
    let n: u64 = s.trim().trim_end_matches([':', ',']).parse().ok()?;
    (n <= super::MAX_STEP).then_some(n)
}

/// Reads `key value, key value…` (nanoGPT's list after `iter N:`).
fn spaced_pairs(rest: &str, out: &mut Line) {
    for part in rest.split(',') {
        let part = part.trim();
        let Some((key, val)) = part.rsplit_once(' ') else {
            continue;
        };
        if let Some((v, tag, unit)) = number_with_unit(val) {
            let k = leaf(key);
            if !k.is_empty() {
                out.values.push((format!("{k}{tag}"), v, unit));
            }
        }
    }
}

/// Reads a Python dict repr or a JSON object on one line (see
/// [`pairs_line`]: a step key is the step, an eval is marked).
fn object(text: &str, out: &mut Line) -> bool {
    let Some(inner) = text.strip_prefix('{').and_then(|t| t.strip_suffix('}')) else {
        return false;
    };
    let found = pairs_line(inner.split(',').filter_map(|part| {
        let (k, v) = part.split_once(':')?;
        let k = k.trim().trim_matches(['\'', '"']);
        let v = v.trim().trim_matches(['\'', '"']).parse::<f64>().ok()?;
        Some((k, v))
    }));
    if found.is_empty() {
        return false;
    }
    out.step = found.step;
    out.values = found.values;
    out.marker = found.marker;
    true
}

/// Reads `key=value` and `key: value` pairs after a `step N` on a line.
fn keyed_pairs(text: &str, out: &mut Line) {
    let words: Vec<&str> = text.split_whitespace().collect();
    let step_at = words.iter().position(|w| {
        let w = w.trim_end_matches([':', ',']).to_ascii_lowercase();
        w == "step" || w == "iter" || w == "iteration"
    });
    let Some(i) = step_at else { return };
    let Some(step) = words.get(i + 1).and_then(|w| step_number(w)) else {
        return;
    };
    let mut found = Vec::new();
    let mut k = i + 2;
    while k < words.len() {
        let w = words[k].trim_end_matches(',');
        if let Some((key, val)) = w.split_once('=') {
            if let Some((v, tag, unit)) = number_with_unit(val) {
                found.push((format!("{}{tag}", leaf(key)), v, unit));
            }
        } else if let Some(key) = w.strip_suffix(':')
            && let Some((v, tag, unit)) = words.get(k + 1).and_then(|v| number_with_unit(v))
        {
            found.push((format!("{}{tag}", leaf(key)), v, unit));
            k += 1;
        }
        k += 1;
    }
    found.retain(|(k, _, _)| !k.is_empty() && !k.starts_with('_'));
    if !found.is_empty() {
        out.step = Some(step);
        out.values.extend(found);
    }
}

/// A `--step-pattern`: a regular expression whose named groups say what a
/// line holds: `step` is the step, every other group a metric (its name the
/// channel's leaf, its text a number with an optional unit suffix).
#[derive(Debug, Clone)]
pub struct StepPattern {
    re: regex::Regex,
}

/// Why a `--step-pattern` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PatternError {
    #[error(transparent)]
    Regex(#[from] regex::Error),
    #[error(
        "it has no named group: name the step (?P<step>\\d+) and the values, e.g. (?P<loss>[0-9.]+)"
    )]
    NoGroups,
}

impl StepPattern {
    pub fn new(pattern: &str) -> Result<Self, PatternError> {
        let re = regex::Regex::new(pattern)?;
        if re.capture_names().flatten().next().is_none() {
            return Err(PatternError::NoGroups);
        }
        Ok(Self { re })
    }

    /// What a line says by this pattern, if it matches.
    pub fn parse(&self, text: &str) -> Option<Line> {
        let caps = self.re.captures(text)?;
        let mut out = Line::default();
        for name in self.re.capture_names().flatten() {
            let Some(m) = caps.name(name) else { continue };
            if name == "step" {
                out.step = step_number(m.as_str());
            } else if let Some((v, tag, unit)) = number_with_unit(m.as_str()) {
                out.values.push((format!("{}{tag}", leaf(name)), v, unit));
            }
        }
        (!out.is_empty()).then_some(out)
    }
}

/// What one printed line says: by `pattern` where it matches, else by the
/// formats of the module's list.
pub fn parse_with(raw: &str, pattern: Option<&StepPattern>) -> Line {
    if let Some(p) = pattern {
        let text = raw
            .rsplit('\r')
            .next()
            .unwrap_or(raw)
            .trim_end_matches('\n');
        if let Some(line) = p.parse(text) {
            return line;
        }
    }
    parse_line(raw)
}

/// What one printed line says (see the module's list).
pub fn parse_line(raw: &str) -> Line {
    let mut out = Line::default();
    // A progress bar redraws itself after `\r`: only the last state is text.
    let mut text = raw
        .rsplit('\r')
        .next()
        .unwrap_or(raw)
        .trim_end_matches('\n');
    if let Some(rest) = text.strip_prefix("[default")
        && let Some((rank, after)) = rest.split_once("]:")
    {
        out.rank = rank.parse().ok();
        text = after;
    }
    if let Some(bar) = parse_bar(text) {
        out.bar = Some(bar);
        return out;
    }
    let text = text.trim();
    if text.is_empty() || raw.contains('\r') && (text.contains("it/s") || text.contains("%|")) {
        return out;
    }
    // Few lines name memory; those that do are read for out-of-memory errors.
    if (text.contains("emory") || text.contains("alloc") || text.contains("DataLoader worker"))
        && let Some(found) = super::oom::parse(text)
    {
        out.oom = Some(found);
        return out;
    }
    let lower = text.to_ascii_lowercase();
    if lower.contains("saving checkpoint") || lower.contains("saving model checkpoint") {
        out.marker = Some(text.to_owned());
        return out;
    }
    // nanoGPT's training line and its evals.
    for (word, eval) in [("iter ", false), ("step ", true)] {
        if let Some(rest) = lower.strip_prefix(word)
            && let Some((n, after)) = rest.split_once(':')
            && let Some(step) = step_number(n)
        {
            let before = out.values.len();
            spaced_pairs(&text[text.len() - after.len()..], &mut out);
            if out.values.len() > before {
                out.step = Some(step);
                if eval {
                    out.marker = Some("eval".into());
                }
                return out;
            }
        }
    }
    if object(text, &mut out) {
        return out;
    }
    keyed_pairs(text, &mut out);
    out
}

/// A line's findings, stamped when it was read.
#[derive(Debug, Clone)]
pub struct Printed {
    pub t_ns: u64,
    pub line: Line,
    /// Read from a log file rather than printed (a log's steps are always
    /// step events; printed ones only when no log is read).
    pub from_log: bool,
}

/// What the readers of a job's output have seen.
#[derive(Debug, Default)]
pub struct OutputStats {
    pub bytes: AtomicU64,
    pub lines: AtomicU64,
    /// Lines that said something (a step, a metric, a marker).
    pub parsed: AtomicU64,
    /// Parsed lines dropped because the collector fell behind.
    pub dropped: AtomicU64,
    /// Bytes passed through but not read for lines, because the line reader
    /// fell behind (the job's pipe is never held for it); in a log file,
    /// lines too long to read.
    pub skipped_bytes: AtomicU64,
    /// Times a log file was rewritten or replaced under its reader.
    pub rewrites: AtomicU64,
    /// Bytes the line reader of printed output has taken from the copier,
    /// read or skipped: what it still holds is `bytes` less this (the
    /// watch waits while it moves).
    pub taken: AtomicU64,
}

/// Longest line read whole; the rest of a longer one is passed through but
/// not read.
pub const MAX_LINE: usize = 64 << 10;

/// Most step events a second from printed output, on average, and the burst
/// allowed above it.
pub const STEP_EVENTS_PER_S: f64 = 100.0;
pub const STEP_EVENT_BURST: f64 = 200.0;

/// Lines waiting for the collector; a full queue drops and counts.
pub const QUEUE: usize = 16 << 10;

/// The queue between the output readers and the collector.
pub fn queue() -> (Sender<Printed>, Receiver<Printed>) {
    crossbeam_channel::bounded(QUEUE)
}

/// Share of one core the line reader may use on average, after
/// [`READER_CREDIT_NS`] up front; past it, chunks are skipped and counted.
pub const READER_BUDGET: f64 = 0.25;
pub const READER_CREDIT_NS: f64 = 200e6;

/// Chunks of output waiting to be read for lines; past this the reader
/// skips chunks (and counts their bytes) rather than hold the pipe.
pub const CHUNKS: usize = 64;

/// A piece of a job's output on its way to the line reader; `gap` says the
/// reader fell behind and chunks before this one were skipped.
struct Chunk {
    bytes: Vec<u8>,
    gap: bool,
}

/// Starts two threads: one copies `src` to `dst` byte for byte as it arrives
/// (each read is written and flushed at once: a line-buffered job stays line
/// buffered, a `\r` progress bar still animates, binary junk passes), and
/// hands each chunk to the other, which reads the lines and sends what they
/// say to `to`. The copier never waits for the reader: when the reader falls
/// behind, or has used its CPU budget ([`READER_BUDGET`] of one core),
/// chunks are skipped and counted, so flatline never holds the job's pipe
/// nor takes its cores. Both end at the end of `src`; the handle is the
/// reader's.
#[allow(clippy::too_many_arguments)]
pub fn pass_through(
    name: &str,
    mut src: impl Read + Send + 'static,
    mut dst: impl Write + Send + 'static,
    to: Sender<Printed>,
    clock: Clock,
    stats: Arc<OutputStats>,
    pattern: Option<StepPattern>,
) -> std::io::Result<JoinHandle<()>> {
    let (chunks, rx) = crossbeam_channel::bounded::<Chunk>(CHUNKS);
    let copier_stats = stats.clone();
    std::thread::Builder::new()
        .name(format!("flatline-{name}"))
        .spawn(move || {
            super::alloc::mark_observer_thread();
            let stats = copier_stats;
            let mut buf = vec![0u8; 64 << 10];
            let mut gap = false;
            loop {
                let n = match src.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                };
                // Passing through comes first; a closed terminal does not stop the reading.
                let _ = dst.write_all(&buf[..n]).and_then(|()| dst.flush());
                stats.bytes.fetch_add(n as u64, Relaxed);
                let chunk = Chunk {
                    bytes: buf[..n].to_vec(),
                    gap,
                };
                gap = match chunks.try_send(chunk) {
                    Ok(()) => false,
                    Err(_) => {
                        stats.skipped_bytes.fetch_add(n as u64, Relaxed);
                        true
                    }
                };
            }
        })?;
    std::thread::Builder::new()
        .name(format!("flatline-{name}-lines"))
        .spawn(move || {
            super::alloc::mark_observer_thread();
            let mut line: Vec<u8> = Vec::with_capacity(4096);
            // The text before a `\r` that was not a bar: a `\r\n` line's.
            let mut before_cr: Vec<u8> = Vec::new();
            let mut skip = false;
            let started = std::time::Instant::now();
            let mut spent_ns = 0u64;
            for chunk in rx {
                stats.taken.fetch_add(chunk.bytes.len() as u64, Relaxed);
                // Over its CPU budget the reader skips chunks, so that a job
                // that floods its output keeps its cores.
                let allowed =
                    READER_CREDIT_NS + READER_BUDGET * started.elapsed().as_nanos() as f64;
                if spent_ns as f64 > allowed {
                    stats
                        .skipped_bytes
                        .fetch_add(chunk.bytes.len() as u64, Relaxed);
                    line.clear();
                    skip = true;
                    continue;
                }
                let t0 = flatline_arena::sys::thread_cpu_ns();
                if chunk.gap {
                    // The line in progress lost its middle: drop it.
                    line.clear();
                    skip = true;
                }
                // A `\r` ends a drawn state of a progress bar; a `\n` a line.
                for piece in chunk.bytes.split_inclusive(|&b| b == b'\n' || b == b'\r') {
                    let end = piece.last().copied();
                    if !skip {
                        let room = MAX_LINE.saturating_sub(line.len());
                        line.extend_from_slice(&piece[..piece.len().min(room)]);
                    }
                    if end == Some(b'\r') {
                        before_cr.clear();
                        if !skip && !read_draw(&line, &to, clock, &stats) {
                            std::mem::swap(&mut line, &mut before_cr);
                            before_cr.pop();
                        }
                        line.clear();
                        skip = false;
                    } else if end == Some(b'\n') {
                        if !skip {
                            let whole = if line.as_slice() == b"\n" && !before_cr.is_empty() {
                                &before_cr
                            } else {
                                &line
                            };
                            read_line(whole, &to, clock, &stats, pattern.as_ref());
                        }
                        line.clear();
                        before_cr.clear();
                        skip = false;
                    }
                }
                spent_ns += flatline_arena::sys::thread_cpu_ns().saturating_sub(t0);
            }
            if !line.is_empty() && !skip {
                read_line(&line, &to, clock, &stats, pattern.as_ref());
            }
        })
}

/// Reads one drawn state (the text before a `\r`): a progress bar's is sent
/// on, and counted as a line that said something; anything else is text a
/// terminal would overwrite, and false is returned.
fn read_draw(bytes: &[u8], to: &Sender<Printed>, clock: Clock, stats: &OutputStats) -> bool {
    let Some(bar) = parse_bar(&String::from_utf8_lossy(bytes)) else {
        return false;
    };
    stats.lines.fetch_add(1, Relaxed);
    stats.parsed.fetch_add(1, Relaxed);
    let p = Printed {
        t_ns: clock.now_ns(),
        line: Line {
            bar: Some(bar),
            ..Line::default()
        },
        from_log: false,
    };
    if let Err(TrySendError::Full(_)) = to.try_send(p) {
        stats.dropped.fetch_add(1, Relaxed);
    }
    true
}

fn read_line(
    bytes: &[u8],
    to: &Sender<Printed>,
    clock: Clock,
    stats: &OutputStats,
    pattern: Option<&StepPattern>,
) {
    stats.lines.fetch_add(1, Relaxed);
    let line = parse_with(&String::from_utf8_lossy(bytes), pattern);
    if line.is_empty() {
        return;
    }
    stats.parsed.fetch_add(1, Relaxed);
    let p = Printed {
        t_ns: clock.now_ns(),
        line,
        from_log: false,
    };
    if let Err(TrySendError::Full(_)) = to.try_send(p) {
        stats.dropped.fetch_add(1, Relaxed);
    }
}

/// How often the collector records how many lines each source has read.
pub const COUNTS_EVERY_NS: u64 = 10_000_000_000;

/// Starts the thread that turns printed lines and log rows into the
/// stream's data: `log.<key>` channels (added when a key first appears;
/// `log.rank<r>.<key>` for torchrun ranks other than 0), `log.step`, a step
/// event for each new step (a log's always; printed ones only with
/// `output_steps`: when a log is read too, its steps are the ones kept), and
/// marker events. Every [`COUNTS_EVERY_NS`] and at its end it records, for
/// each of `counts`, how many lines were read and how many said something
/// ([`EventKind::LinesRead`]). PyTorch's allocator statistics become
/// `torch.*` channels (see [`cells`]), and the main rank's reserved bytes
/// are handed to `torch` for the GPU probe. Ends when every reader has ended.
#[allow(clippy::too_many_arguments)]
pub fn collect(
    from: Receiver<Printed>,
    grow: GrowHandle,
    events: Sender<Event>,
    output_steps: bool,
    clock: Clock,
    counts: Vec<(String, Arc<OutputStats>)>,
    torch: Option<super::torch::TorchSeen>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("flatline-output".into())
        .spawn(move || {
            super::alloc::mark_observer_thread();
            let mut c = Collector {
                positions: HashMap::new(),
                last_step: None,
                tokens: STEP_EVENT_BURST,
                refilled_ns: 0,
                events,
                output_steps,
                torch,
                bars: Bars::default(),
            };
            let mut told: Vec<(u64, u64)> = vec![(0, 0); counts.len()];
            let mut told_ns = 0u64;
            loop {
                match from.recv_timeout(std::time::Duration::from_secs(1)) {
                    Ok(p) => c.take(&grow, p),
                    Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                    Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
                }
                let now = clock.now_ns();
                if now.saturating_sub(told_ns) >= COUNTS_EVERY_NS {
                    told_ns = now;
                    c.counts(&counts, &mut told, now);
                }
            }
            c.counts(&counts, &mut told, clock.now_ns());
        })
}
/// The collector's state: where each channel is, and the step events'
/// thinning.
struct Collector {
    /// Each channel's position, or None where the stream refused it.
    positions: HashMap<String, Option<usize>>,
    /// A step printed again (an eval line after its iteration, a dict
    /// repeated with the same global_step) is not a new step.
    last_step: Option<u64>,
    /// Step events are thinned past STEP_EVENTS_PER_S (a token bucket on the
    /// lines' own times): each is a frame of the recording, and a job
    /// printing a million steps a second must not make the recorder its
    /// bottleneck. log.step carries every step the samples see.
    tokens: f64,
    refilled_ns: u64,
    events: Sender<Event>,
    output_steps: bool,
    /// Where the main rank's reserved bytes go, for the GPU probe's
    /// `gpu.other`.
    torch: Option<super::torch::TorchSeen>,
    /// The job's progress bars: which gives the steps.
    bars: Bars,
}

impl Collector {
    fn take(&mut self, grow: &GrowHandle, mut p: Printed) {
        // Bars of the main rank only: another rank's bar would fight it.
        if p.line.rank.is_none_or(|r| r == 0)
            && let Some(note) = p
                .line
                .read_bar(&mut self.bars, p.from_log || self.output_steps)
        {
            let _ = self.events.try_send(Event {
                t_ns: p.t_ns,
                kind: EventKind::Note(note),
            });
        }
        p.line.bar = None;
        let positions = &mut self.positions;
        let cells = cells(&p.line);
        grow.with(|ch| {
            for c in &cells {
                // A name is copied once, when its channel is added.
                let at = match positions.get(&c.name) {
                    Some(&at) => at,
                    None => {
                        let spec = ChannelSpec::new(c.name.clone(), c.unit, c.group);
                        let at = ch.add(vec![match c.kind {
                            Some(k) => spec.with_kind(k),
                            None => spec,
                        }]);
                        positions.insert(c.name.clone(), at);
                        at
                    }
                };
                if let Some(at) = at {
                    ch.set(at, c.value);
                }
            }
        });
        if let (Some(seen), Some(r)) = (
            &self.torch,
            cells
                .iter()
                .find(|c| super::torch::Stat::Reserved.is_channel(&c.name)),
        ) {
            seen.set_reserved(r.value);
        }
        let main_rank = p.line.rank.is_none_or(|r| r == 0);
        self.tokens = (self.tokens
            + p.t_ns.saturating_sub(self.refilled_ns) as f64 * STEP_EVENTS_PER_S / 1e9)
            .min(STEP_EVENT_BURST);
        self.refilled_ns = p.t_ns;
        if let Some(step) = p.line.step
            && main_rank
            && (p.from_log || self.output_steps)
            && self.last_step != Some(step)
            && self.tokens >= 1.0
        {
            self.last_step = Some(step);
            self.tokens -= 1.0;
            let tokens = p
                .line
                .values
                .iter()
                .find(|(k, v, _)| k == "tokens" && *v >= 0.0)
                .map(|(_, v, _)| *v as u64);
            let _ = self.events.try_send(Event {
                t_ns: p.t_ns,
                kind: EventKind::Step { step, tokens },
            });
        }
        if let Some((fact, marker)) = p.line.oom.take() {
            let _ = self.events.try_send(Event {
                t_ns: p.t_ns,
                kind: fact,
            });
            let _ = self.events.try_send(Event {
                t_ns: p.t_ns,
                kind: EventKind::Marker(marker),
            });
        }
        // A log that is read records the evals itself, with their steps: a
        // printed eval would mark the same moment twice.
        if let Some(text) = p.line.marker
            && (p.from_log || self.output_steps || text != "eval")
        {
            let _ = self.events.try_send(Event {
                t_ns: p.t_ns,
                kind: EventKind::Marker(text),
            });
        }
    }

    /// Records the sources' line counts that changed since last told.
    fn counts(&self, counts: &[(String, Arc<OutputStats>)], told: &mut [(u64, u64)], t_ns: u64) {
        for ((source, st), last) in counts.iter().zip(told.iter_mut()) {
            let now = (st.lines.load(Relaxed), st.parsed.load(Relaxed));
            if now != *last {
                *last = now;
                let _ = self.events.try_send(Event {
                    t_ns,
                    kind: EventKind::LinesRead {
                        source: source.clone(),
                        lines: now.0,
                        parsed: now.1,
                    },
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MAX_STEP;

    fn keys(l: &Line) -> Vec<(&str, f64)> {
        l.values.iter().map(|(k, v, _)| (k.as_str(), *v)).collect()
    }

    #[test]
    fn nanogpt_lines_give_steps_metrics_units_and_eval_markers() {
        let l = parse_line("iter 100: loss 2.3456, time 30.12ms, mfu 5.00%");
        assert_eq!(l.step, Some(100));
        assert_eq!(
            keys(&l),
            [("loss", 2.3456), ("time_ms", 30.12), ("mfu_pct", 5.0)]
        );
        assert_eq!(l.values[1].2, Unit::Milliseconds);
        assert_eq!(l.marker, None);
        let e = parse_line("step 2000: train loss 1.2345, val loss 1.4567");
        assert_eq!(e.step, Some(2000));
        assert_eq!(keys(&e), [("train_loss", 1.2345), ("val_loss", 1.4567)]);
        assert_eq!(e.marker.as_deref(), Some("eval"));
        let c = parse_line("saving checkpoint to out");
        assert_eq!(c.marker.as_deref(), Some("saving checkpoint to out"));
        assert!(c.step.is_none() && c.values.is_empty());
    }

    /// A step counter that wrapped (`-1` printed unsigned) is no step: a
    /// receipt would count 18,446,744,073,709,551,615 of them.
    #[test]
    fn a_wrapped_step_counter_is_no_step() {
        for line in [
            r#"{"step": 18446744073709551615, "loss": 1.5}"#,
            "iter 18446744073709551615: loss 1.5",
            "step=1e30 loss=1.5",
        ] {
            assert_eq!(parse_line(line).step, None, "{line}");
        }
        let json = parse_line(r#"{"step": 18446744073709551615, "loss": 1.5}"#);
        assert_eq!(keys(&json), [("loss", 1.5)], "its metrics are kept");
        assert_eq!(
            parse_line(r#"{"step": 9007199254740992}"#).step,
            Some(MAX_STEP)
        );
        assert_eq!(parse_line("iter 41: loss 1.5").step, Some(41));
    }

    #[test]
    fn dict_reprs_and_json_objects_give_their_numeric_keys() {
        let hf =
            parse_line("{'loss': 2.1, 'grad_norm': 1.3, 'learning_rate': 5e-05, 'epoch': 0.12}");
        assert_eq!(
            keys(&hf),
            [
                ("loss", 2.1),
                ("grad_norm", 1.3),
                ("learning_rate", 5e-5),
                ("epoch", 0.12)
            ]
        );
        assert_eq!(hf.step, None);
        let js = parse_line(r#"{"global_step": 40, "eval_loss": 1.9, "note": "x"}"#);
        assert_eq!(js.step, Some(40));
        assert_eq!(keys(&js), [("eval_loss", 1.9)]);
    }

    #[test]
    fn pairs_need_a_step_on_the_line() {
        let l = parse_line("Epoch 1 | step 300 loss=2.31 lr=3e-4 grad-norm: 0.9");
        assert_eq!(l.step, Some(300));
        assert_eq!(keys(&l), [("loss", 2.31), ("lr", 3e-4), ("grad_norm", 0.9)]);
        assert!(
            parse_line("loss=2.31 lr=3e-4").is_empty(),
            "no step, no row"
        );
        assert!(parse_line("Downloading shards: 3 of 8").is_empty());
    }

    #[test]
    fn torchrun_prefixes_and_progress_bars() {
        let l = parse_line("[default1]:iter 7: loss 3.0000, time 12.00ms");
        assert_eq!((l.rank, l.step), (Some(1), Some(7)));
        let bar = " 45%|████▌     | 45/100 [00:04<00:05, 10.31it/s]\r 46%|████▋     | 46/100 [00:04<00:05, 10.30it/s]";
        // A bar's last drawn state is read as a bar (the collector makes it steps).
        let b = parse_line(bar).bar.expect("a bar");
        assert_eq!((b.n, b.total, b.rate), (46.0, Some(100.0), Some(10.30)));
        // After the last redraw, a real line is read.
        let mixed = " 99%|█████████▉| 99/100 [00:09<00:00, 10.3it/s]\r{'loss': 1.5, 'epoch': 1.0}";
        assert_eq!(keys(&parse_line(mixed)), [("loss", 1.5), ("epoch", 1.0)]);
        assert!(parse_line("\u{0}\u{7f}garbage\u{1b}[0m").is_empty());
    }

    /// What the line reader sends for `bytes` passed through.
    fn read_through(bytes: &[u8]) -> Vec<Line> {
        let (tx, rx) = queue();
        let stats = Arc::new(OutputStats::default());
        let reader = pass_through(
            "test",
            std::io::Cursor::new(bytes.to_vec()),
            std::io::sink(),
            tx,
            Clock::start(),
            stats,
            None,
        )
        .unwrap();
        reader.join().unwrap();
        rx.try_iter().map(|p| p.line).collect()
    }

    #[test]
    fn the_reader_reads_each_bar_draw_and_crlf_lines() {
        let mut bytes = b"iter 1: loss 2.0000, time 1.00ms\r\n".to_vec();
        bytes.extend(
            std::fs::read(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/data/bars/hf.stderr"
            ))
            .unwrap(),
        );
        bytes.extend(b"iter 2: loss 1.0000, time 1.00ms\n");
        let lines = read_through(&bytes);
        assert_eq!(
            lines[0].step,
            Some(1),
            "a CRLF line is read: {:?}",
            lines[0]
        );
        let bars: Vec<f64> = lines
            .iter()
            .filter_map(|l| l.bar.as_ref())
            .map(|b| b.n)
            .collect();
        // tqdm drew the training bar 32 times (0 to 60 by 2, 60 again at
        // its close) and the evaluation bars 6.
        assert_eq!(bars.len(), 38, "{bars:?}");
        assert_eq!(bars.iter().filter(|&&n| n == 60.0).count(), 2);
        assert_eq!(lines.last().unwrap().step, Some(2));
    }

    #[test]
    fn a_step_pattern_reads_what_nothing_else_fits() {
        let p =
            StepPattern::new(r"^\[(?P<step>\d+)/\d+\] L=(?P<loss>[0-9.]+) dt=(?P<dt>[0-9.]+ms)")
                .unwrap();
        let l = parse_with("[120/5000] L=2.50 dt=31.5ms", Some(&p));
        assert_eq!(l.step, Some(120));
        assert_eq!(keys(&l), [("loss", 2.5), ("dt_ms", 31.5)]);
        // A line it does not match falls back to the usual formats.
        assert_eq!(parse_with("iter 3: loss 1.0", Some(&p)).step, Some(3));
        assert!(matches!(
            StepPattern::new("step (\\d+)"),
            Err(PatternError::NoGroups)
        ));
        assert!(matches!(
            StepPattern::new("(?P<step>"),
            Err(PatternError::Regex(_))
        ));
    }

    #[test]
    fn leaves_are_channel_safe() {
        assert_eq!(leaf("Train Loss"), "train_loss");
        assert_eq!(leaf("learning-rate/group0"), "learning_rate_group0");
        assert_eq!(leaf("__"), "");
    }
}
