//! A recording laid out as a trace, once, for both encoders: which process
//! each channel belongs to, the steps, markers and deaths on their lanes,
//! the findings, and (from [`super::heap`]) the allocation sites' dumps.
//! `pftrace` writes it as Perfetto's protobuf, `json` as Chrome's
//! trace-event JSON, so the two can never say different things.

use std::collections::BTreeMap;

use flatline_telemetry::recording::{EventKind, Recording};
use flatline_telemetry::{ChannelSpec, Unit};

/// Which part of a recording to write.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TraceRange {
    /// Seconds after the start.
    pub from_s: Option<f64>,
    pub to_s: Option<f64>,
    /// Only this process's tracks (and the tree's).
    pub pid: Option<u32>,
}

impl TraceRange {
    /// Whether a moment `t_ns` after the start is inside (both ends
    /// included, as `export --csv` takes them).
    pub fn holds(&self, t_ns: u64) -> bool {
        let t = t_ns as f64 / 1e9;
        self.from_s.is_none_or(|f| t >= f) && self.to_s.is_none_or(|to| t <= to)
    }

    /// Whether something about process `pid` (`None`: the job as a whole)
    /// is written.
    fn keeps(&self, pid: Option<u32>) -> bool {
        match (self.pid, pid) {
            (Some(want), Some(p)) => want == p,
            _ => true,
        }
    }
}

/// A recording, laid out as a trace.
#[derive(Debug, Default)]
pub struct Model {
    /// The recording's start on the wall clock, ns since the Unix epoch:
    /// every moment below is this plus a sample's or event's `t_ns`.
    pub base_ns: u64,
    /// The job (or the host) first, then each process of the tree.
    pub procs: Vec<Proc>,
    /// Tracks of slices and instants, each under one of `procs`.
    pub lanes: Vec<Lane>,
    /// Allocation-site frames; `stacks` and `dumps` point into them.
    pub frames: Vec<SiteFrame>,
    /// Call stacks, outermost frame first.
    pub stacks: Vec<Vec<usize>>,
    /// Heap dumps, in time order.
    pub dumps: Vec<Dump>,
}

/// One process row: the job's (which may have no pid) or a tree process's.
#[derive(Debug, Default)]
pub struct Proc {
    pub pid: Option<u32>,
    pub name: String,
    /// `main`, `worker`, … from the tree's labels; `job` for the job's row
    /// when no process of the tree is the job.
    pub role: String,
    pub cmdline: Vec<String>,
    /// `key=value` facts shown beside its name (the run's labels, rank, …).
    pub labels: Vec<String>,
    pub counters: Vec<Counter>,
}

/// One channel's readings inside the range.
#[derive(Debug)]
pub struct Counter {
    /// The channel's name, as `export --csv` heads its column.
    pub name: String,
    pub unit: Unit,
    /// (wall-clock ns, value), each a change (and the last reading);
    /// samples without a reading are left out.
    pub points: Vec<(u64, f64)>,
}

/// A track of slices and instants under a process.
#[derive(Debug)]
pub struct Lane {
    /// Index into [`Model::procs`].
    pub proc: usize,
    pub name: String,
    /// Slices that do not overlap, in time order.
    pub slices: Vec<Mark>,
    pub instants: Vec<Mark>,
}

/// A slice (with `dur_ns`) or an instant (`dur_ns` 0).
#[derive(Debug, Clone)]
pub struct Mark {
    /// Wall clock, ns since the Unix epoch.
    pub t_ns: u64,
    pub dur_ns: u64,
    pub name: String,
    pub args: Vec<(String, Arg)>,
}

/// A mark's argument.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    Text(String),
    Num(f64),
}

/// One frame of an allocation site's stack: the heap profile's own.
pub use crate::pprof::Frame as SiteFrame;

/// A process's sampled heap at one moment, one entry per stack.
#[derive(Debug, Clone)]
pub struct Dump {
    /// Wall clock, ns since the Unix epoch.
    pub t_ns: u64,
    pub pid: u32,
    pub samples: Vec<HeapTotals>,
}

/// A stack's totals since the process started, as heapprofd reports them:
/// `allocated` and `freed` only grow; what is held is their difference.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HeapTotals {
    pub stack: usize,
    pub allocated: u64,
    pub freed: u64,
    pub allocs: u64,
    pub frees: u64,
}

/// Whether a fact says a process died or ran out of memory: its exit, an
/// OOM kill, or a printed out-of-memory error as the death reading knows
/// them (docs/recordings.md); the others (`classes`, `sampling`) are not
/// drawn.
fn is_death(kind: &str) -> bool {
    matches!(kind, "exit" | "kernel_oom_kill") || flatline_analysis::death::PRINTED.contains(&kind)
}

/// The longest name an instant is given; its whole text is an argument.
const NAME_CHARS: usize = 120;

impl Model {
    /// The processes and their counters, the events on their lanes, the
    /// findings; the heap dumps are [`super::heap`]'s to add.
    pub fn build(rec: &Recording, range: TraceRange) -> Self {
        let mut m = Model {
            base_ns: rec.header.started_unix_ms.saturating_mul(1_000_000),
            ..Model::default()
        };
        m.add_processes(rec, range);
        m.add_events(rec, range);
        m
    }

    /// The wall clock of a moment `t_ns` after the start.
    pub fn wall(&self, t_ns: u64) -> u64 {
        self.base_ns.saturating_add(t_ns)
    }

    /// One row per process stem of the kept channels, the job's first; the
    /// job's row is its own process's when the tree has it.
    fn add_processes(&mut self, rec: &Recording, range: TraceRange) {
        let h = &rec.header;
        let job_pid = h.config.get("pid").and_then(|p| p.parse::<u32>().ok());
        // A reused pid's channels have a stem of their own (`pid4121-2`):
        // a row of their own.
        let mut by_stem: BTreeMap<(u32, String), Proc> = BTreeMap::new();
        let mut job_counters = Vec::new();
        for (k, spec) in h.schema.channels.iter().enumerate() {
            if is_site(spec) {
                continue;
            }
            let pid = spec.labels.get("pid").and_then(|p| p.parse::<u32>().ok());
            if !range.keeps(pid) {
                continue;
            }
            let Some(counter) = counter(rec, k, range, self.base_ns) else {
                continue;
            };
            let Some(pid) = pid else {
                job_counters.push(counter);
                continue;
            };
            let stem = spec.name.split('.').next().unwrap_or_default().to_owned();
            let p = by_stem.entry((pid, stem)).or_insert_with(|| Proc {
                pid: Some(pid),
                ..Proc::default()
            });
            if p.name.is_empty()
                && let Some(n) = spec.labels.get("name")
            {
                p.name = n.clone();
            }
            if let Some(r) = spec.labels.get("role").filter(|r| *r != "alloc")
                && p.role.is_empty()
            {
                p.role = r.clone();
            }
            p.counters.push(counter);
        }
        let own = job_pid.and_then(|p| by_stem.remove(&(p, format!("pid{p}"))));
        let mut job = own.unwrap_or_else(|| Proc {
            pid: job_pid,
            role: "job".into(),
            ..Proc::default()
        });
        if job.name.is_empty() {
            job.name = match h.config.get("command") {
                Some(c) => c.split_whitespace().next().unwrap_or(c).to_owned(),
                None => format!("flatline {}", h.source),
            };
        }
        if let Some(c) = h.config.get("command") {
            job.cmdline = c.split_whitespace().map(str::to_owned).collect();
        }
        job.labels = h.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        job.counters.extend(job_counters);
        self.procs.push(job);
        for mut p in by_stem.into_values() {
            if p.name.is_empty() {
                p.name = format!("pid {}", p.pid.unwrap_or_default());
            }
            self.procs.push(p);
        }
    }

    /// The row of process `pid` (the first of a reused pid's), if written.
    pub fn proc_of(&self, pid: u32) -> Option<usize> {
        self.procs.iter().position(|p| p.pid == Some(pid))
    }

    /// The lane `name` of row `proc`, made on first use.
    fn lane(&mut self, proc: usize, name: &str) -> &mut Lane {
        let at = match self
            .lanes
            .iter()
            .position(|l| l.proc == proc && l.name == name)
        {
            Some(at) => at,
            None => {
                self.lanes.push(Lane {
                    proc,
                    name: name.to_owned(),
                    slices: Vec::new(),
                    instants: Vec::new(),
                });
                self.lanes.len() - 1
            }
        };
        &mut self.lanes[at]
    }

    /// An instant on lane `name` of process `pid`'s row (the job's where the
    /// pid is unknown or has no row).
    fn instant(&mut self, pid: Option<u32>, lane: &str, mark: Mark) {
        let proc = pid.and_then(|p| self.proc_of(p)).unwrap_or(0);
        self.lane(proc, lane).instants.push(mark);
    }

    /// Steps as slices, markers and phases as instants, starts, exits and
    /// deaths on their process's `events` lane.
    fn add_events(&mut self, rec: &Recording, range: TraceRange) {
        let from_ns = range.from_s.map_or(0, |f| (f.max(0.0) * 1e9) as u64);
        let mut last_step: Option<u64> = None;
        for e in &rec.events {
            let inside = range.holds(e.t_ns);
            let at = self.wall(e.t_ns);
            match &e.kind {
                EventKind::Step { step, tokens } => {
                    // From the step before (outside the range too), the
                    // range's start at the earliest; the first from t = 0.
                    let start = last_step.unwrap_or(0).max(from_ns).min(e.t_ns);
                    last_step = Some(e.t_ns);
                    if !inside {
                        continue;
                    }
                    let mut args = vec![("step".into(), Arg::Num(*step as f64))];
                    if let Some(t) = tokens {
                        args.push(("tokens".into(), Arg::Num(*t as f64)));
                    }
                    let mark = Mark {
                        t_ns: self.wall(start),
                        dur_ns: e.t_ns - start,
                        name: format!("step {step}"),
                        args,
                    };
                    self.lane(0, "steps").slices.push(mark);
                }
                _ if !inside => {}
                EventKind::Marker(text) => self.instant(None, "markers", plain(at, text, &[])),
                EventKind::Phase(p) => {
                    self.instant(None, "markers", plain(at, &format!("phase {p}"), &[]))
                }
                EventKind::ProcessStarted {
                    pid,
                    ppid,
                    name,
                    role,
                } if range.keeps(Some(*pid)) => {
                    let what = format!("started: {name} {pid} ({role}, child of {ppid})");
                    self.instant(Some(*pid), "events", plain(at, &what, &[]));
                }
                EventKind::ProcessExited { pid, name, role } if range.keeps(Some(*pid)) => {
                    let what = format!("exited: {name} {pid} ({role})");
                    self.instant(Some(*pid), "events", plain(at, &what, &[]));
                }
                EventKind::TargetExited { pid } if range.keeps(Some(*pid)) => {
                    let what = format!("the watched process {pid} exited");
                    self.instant(Some(*pid), "events", plain(at, &what, &[]));
                }
                EventKind::Fact {
                    kind,
                    pid,
                    text,
                    figures,
                } if is_death(kind) && range.keeps(*pid) => {
                    let mut mark = plain(at, &format!("{kind}: {text}"), &[("kind", kind)]);
                    mark.args.push(("text".into(), Arg::Text(text.clone())));
                    for (k, v) in figures {
                        mark.args.push((k.clone(), Arg::Num(*v)));
                    }
                    self.instant(*pid, "events", mark);
                }
                _ => {}
            }
        }
    }

    /// The headline and each finding, as instants at the end of the part
    /// analysed: the job's `findings` lane, or the lane of the process a
    /// growth is in.
    pub fn add_findings(&mut self, rec: &Recording, range: TraceRange, report: &serde_json::Value) {
        let inside: Vec<u64> = rec
            .t_ns
            .iter()
            .copied()
            .filter(|&t| range.holds(t))
            .collect();
        let Some(&end) = inside.last() else {
            return;
        };
        let at = self.wall(end);
        let headline = report["headline"].as_str().unwrap_or_default();
        if !headline.is_empty() {
            let mark = plain(at, headline, &[("kind", "headline"), ("text", headline)]);
            self.instant(None, "findings", mark);
        }
        for f in report["findings"].as_array().into_iter().flatten() {
            let kind = f["kind"].as_str().unwrap_or("finding");
            let text = f["text"].as_str().unwrap_or_default();
            let pid = f["process"]["pid"].as_u64().map(|p| p as u32);
            // The headline is often the first finding's sentence: said once.
            if !range.keeps(pid) || text == headline {
                continue;
            }
            let mut mark = plain(at, text, &[("kind", kind), ("text", text)]);
            if let Some(r) = f["rate_per_s"].as_f64() {
                mark.args.push(("rate_per_s".into(), Arg::Num(r)));
            }
            if let Some(cs) = f["channels"].as_array() {
                let names: Vec<&str> = cs.iter().filter_map(|c| c.as_str()).collect();
                mark.args
                    .push(("channels".into(), Arg::Text(names.join(", "))));
            }
            self.instant(pid, "findings", mark);
        }
    }
}

/// Whether a channel is an allocation site's (drawn as heap dumps, not
/// counters): labelled `role=site`, or, in recordings made before sites had
/// a role, named `site<N>.*` with a pid.
pub fn is_site(spec: &ChannelSpec) -> bool {
    let numbered = spec
        .name
        .strip_prefix("site")
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
    match spec.labels.get("role") {
        Some(role) => role == "site",
        None => numbered && spec.labels.contains_key("pid"),
    }
}

/// Channel `k`'s readings inside the range; `None` when it has none there.
/// A reading equal to the one before is left out (a counter track holds
/// its value until the next), but for the last: a flat channel of a long
/// recording costs two points, not one a sample.
fn counter(rec: &Recording, k: usize, range: TraceRange, base_ns: u64) -> Option<Counter> {
    let column = rec.columns.get(k)?;
    let read: Vec<(u64, f64)> = rec
        .t_ns
        .iter()
        .zip(column)
        .filter(|(t, v)| v.is_finite() && range.holds(**t))
        .map(|(&t, &v)| (base_ns.saturating_add(t), v))
        .collect();
    let last = read.len().saturating_sub(1);
    let points: Vec<(u64, f64)> = read
        .iter()
        .enumerate()
        .filter(|&(i, p)| i == 0 || i == last || read[i - 1].1.to_bits() != p.1.to_bits())
        .map(|(_, &p)| p)
        .collect();
    let spec = &rec.header.schema.channels[k];
    (!points.is_empty()).then(|| Counter {
        name: spec.name.clone(),
        unit: spec.unit,
        points,
    })
}

/// An instant named `text` (cut to [`NAME_CHARS`]), with text arguments.
fn plain(t_ns: u64, text: &str, args: &[(&str, &str)]) -> Mark {
    let name = match text.char_indices().nth(NAME_CHARS) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    };
    Mark {
        t_ns,
        dur_ns: 0,
        name,
        args: args
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Arg::Text((*v).to_owned())))
            .collect(),
    }
}
