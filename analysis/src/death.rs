//! How a watched job ended: who died, of what, and what grew before it.
//!
//! A process of the tree was killed by the OOM killer when
//! - the kernel's log names it (a `kernel_oom_kill` fact), or
//! - the cgroup's `oom_kill` count (`cgroup.oom_kills`) rose between the
//!   two readings around the moment it left the tree (within
//!   [`SLACK_S`]), and it died by SIGKILL or by no signal the watch could
//!   see; of several that left together, the largest ones, as many as
//!   the count rose.
//!
//! A process that died by another signal is told with its signal. What
//! said so: a zombie's exit status (`exit` facts), the job's own words
//! ("DataLoader worker (pid N) is killed by signal: Killed.") and the
//! kernel's log. Out-of-memory errors the job printed
//! (see `telemetry::oom`) are kept as they were said.

use std::collections::BTreeMap;

use serde::Serialize;

use super::rules::{self, LimitSource};
use super::tree::Columns;
use flatline_catalog::names;
use flatline_format::HostFacts;
use flatline_format::{Event, EventKind};
use flatline_format::{Schema, Unit};

/// How far apart a process's leaving the tree and a rise of the cgroup's
/// OOM count may be and still be the same kill: the tree is listed and the
/// cgroup read on the slow thread (2 Hz by default), each stamped when read.
pub const SLACK_S: f64 = 1.5;

/// How far back "what grew before" looks, at most.
pub const BEFORE_S: f64 = 300.0;

/// What killed a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// The kernel's OOM killer, as its log says.
    KernelOomKiller,
    /// The OOM killer, as the cgroup's count says (no log line read).
    OomKiller,
    /// A signal (`signal` says which).
    Signal,
}

/// What grew in the minutes before a death.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Before {
    pub window_s: f64,
    /// The tree's channel (`tree.pss`, else `tree.rss`, else `mem.rss`).
    pub channel: String,
    pub grew: f64,
    /// How much of it was the dead process's own (its channel of the same
    /// kind), where it had channels.
    pub own: Option<f64>,
}

/// A process of the tree that died by a signal or the OOM killer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Death {
    pub pid: u32,
    pub name: String,
    pub role: String,
    /// When it left the tree, seconds since the start.
    pub t_s: f64,
    pub cause: Cause,
    pub signal: Option<i32>,
    /// Its resident size when killed (the kernel's figure), else at its last
    /// reading.
    pub size: Option<f64>,
    /// Seconds from its last reading to when it left the tree.
    pub last_reading_before_s: Option<f64>,
    /// The limit it ran into, and whose.
    pub limit: Option<f64>,
    pub limit_of: Option<&'static str>,
    pub before: Option<Before>,
    /// What said so, in words.
    pub evidence: Vec<String>,
}

/// An out-of-memory error the job printed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PrintedOom {
    pub t_s: f64,
    pub kind: String,
    pub pid: Option<u32>,
    pub text: String,
    pub figures: BTreeMap<String, f64>,
}

/// How the job ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Ending {
    pub deaths: Vec<Death>,
    pub out_of_memory: Vec<PrintedOom>,
    /// The watched process's exit code or signal, where the watch saw it.
    pub exit_code: Option<i32>,
    pub exit_signal: Option<i32>,
    /// OOM kills the kernel logged of processes outside the tree, and rises
    /// of the cgroup's count no death of the tree explains.
    pub others_killed: Vec<String>,
    /// When the recording ends, seconds since the start.
    pub end_s: f64,
}

/// The printed kinds of [`PrintedOom`]: the facts (`EventKind::Fact`) that
/// say a program printed that it ran out of memory.
pub const PRINTED: &[&str] = &[
    "cuda_oom",
    "torch_oom",
    "cuda_error_oom",
    "nccl_oom",
    "dataloader_killed",
    "dataloader_exited",
    "memory_error",
    "bad_alloc",
];

struct Left {
    pid: u32,
    name: String,
    role: String,
    t_s: f64,
    stem: Option<String>,
    signal: Option<i32>,
    code: Option<i32>,
    kernel: Option<(f64, String)>,
    printed: Option<String>,
    /// When the last process before it joined the tree.
    shaped_s: Option<f64>,
}

fn stems(schema: &Schema) -> BTreeMap<u32, String> {
    let mut out = BTreeMap::new();
    for c in &schema.channels {
        if let (Some(pid), Some(stem)) = (
            c.labels.get("pid").and_then(|p| p.parse::<u32>().ok()),
            c.name.strip_suffix(".rss"),
        ) && stem.starts_with("pid")
        {
            out.insert(pid, stem.to_owned());
        }
    }
    out
}

/// The last finite value at or before `t` and its time.
fn at_or_before(t: &[f64], v: &[f64], at: f64) -> Option<(f64, f64)> {
    let end = t.partition_point(|&x| x <= at);
    (0..end)
        .rev()
        .find(|&i| v.get(i).is_some_and(|x| x.is_finite()))
        .map(|i| (t[i], v[i]))
}

/// The first finite value at or after `t`.
fn at_or_after(t: &[f64], v: &[f64], at: f64, until: f64) -> Option<f64> {
    let from = t.partition_point(|&x| x < at);
    (from..t.len())
        .take_while(|&i| t[i] <= until)
        .find(|&i| v.get(i).is_some_and(|x| x.is_finite()))
        .map(|i| v[i])
}

/// Reads how the job ended from its events and channels.
pub fn read<'c, F: Fn(&str) -> Option<&'c [f64]>>(
    schema: &Schema,
    events: &[Event],
    host: &HostFacts,
    data: &Columns<'c, F>,
    root: Option<u32>,
) -> Ending {
    let end_s = data.t.last().copied().unwrap_or(0.0);
    let mut ending = Ending {
        end_s,
        ..Ending::default()
    };
    let Seen { left, exits } = seen(schema, events, root, end_s, &mut ending);
    let oom_by_count = counted_oom_kills(data, &left, &mut ending);
    let limit = rules::limit_for(names::TREE_RSS, Unit::Bytes, host, |c| {
        rules::latest((data.column)(c)?)
    });
    for (j, l) in left.iter().enumerate() {
        let counted = oom_by_count.contains(&j);
        if let Some(d) = death(data, l, counted, exits.contains_key(&l.pid), limit) {
            ending.deaths.push(d);
        }
    }
    ending.deaths.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    ending
}

/// What the events say of the processes that left: who, when, their exit
/// status, the kernel's and the job's own words; printed out-of-memory
/// errors, the watched process's exit and kills of no process of the tree
/// go straight into `ending`.
struct Seen {
    left: Vec<Left>,
    exits: BTreeMap<u32, (Option<i32>, Option<i32>)>,
}

fn seen(
    schema: &Schema,
    events: &[Event],
    root: Option<u32>,
    end_s: f64,
    ending: &mut Ending,
) -> Seen {
    let t_of = |e: &Event| e.t_ns as f64 / 1e9;
    let stems = stems(schema);
    let mut names: BTreeMap<u32, (String, String)> = BTreeMap::new();
    let mut left: Vec<Left> = Vec::new();
    let mut kernel: Vec<(u32, f64, String, f64)> = Vec::new();
    let mut exits: BTreeMap<u32, (Option<i32>, Option<i32>)> = BTreeMap::new();
    let mut printed_signal: BTreeMap<u32, (i32, String)> = BTreeMap::new();
    let mut root_left = None;
    let mut started: Vec<f64> = Vec::new();
    for e in events {
        match &e.kind {
            EventKind::ProcessStarted {
                pid, name, role, ..
            } => {
                names.insert(*pid, (name.clone(), role.clone()));
                started.push(t_of(e));
            }
            EventKind::ProcessExited { pid, name, role } => left.push(Left {
                pid: *pid,
                name: name.clone(),
                role: role.clone(),
                t_s: t_of(e),
                stem: stems.get(pid).cloned(),
                signal: None,
                code: None,
                kernel: None,
                printed: None,
                shaped_s: started.last().copied(),
            }),
            EventKind::TargetExited { pid } if *pid != 0 => root_left = Some((*pid, t_of(e))),
            EventKind::Fact {
                kind,
                pid,
                text,
                figures,
            } => match (kind.as_str(), pid) {
                ("exit", Some(p)) => {
                    let sig = figures.get("signal").map(|&s| s as i32);
                    let code = figures.get("code").map(|&c| c as i32);
                    exits.insert(*p, (sig, code));
                }
                ("kernel_oom_kill", Some(p)) => {
                    let size = ["anon_rss", "file_rss", "shmem_rss"]
                        .iter()
                        .filter_map(|k| figures.get(*k))
                        .filter(|v| v.is_finite())
                        .sum();
                    kernel.push((*p, t_of(e), text.clone(), size));
                }
                (k, _) if PRINTED.contains(&k) => {
                    if k == "dataloader_killed"
                        && let (Some(p), Some(s)) = (pid, figures.get("signal"))
                    {
                        printed_signal.insert(*p, (*s as i32, text.clone()));
                    }
                    ending.out_of_memory.push(PrintedOom {
                        t_s: t_of(e),
                        kind: k.to_owned(),
                        pid: *pid,
                        text: text.clone(),
                        figures: figures.clone(),
                    });
                }
                _ => {}
            },
            _ => {}
        }
    }
    // The watched process itself leaves by the sampler's end, not the tree's.
    if let Some((pid, t_s)) = root_left.or_else(|| root.zip(Some(end_s))) {
        if let Some(&(sig, code)) = exits.get(&pid) {
            ending.exit_signal = sig;
            ending.exit_code = code.or(sig.map(|s| 128 + s));
        }
        if !left.iter().any(|l| l.pid == pid) && exits.contains_key(&pid) {
            let (name, role) = names
                .get(&pid)
                .cloned()
                .unwrap_or_else(|| (String::new(), "main".into()));
            left.push(Left {
                pid,
                name,
                role,
                t_s,
                stem: stems.get(&pid).cloned(),
                signal: None,
                code: None,
                kernel: None,
                printed: None,
                shaped_s: started.iter().rev().find(|&&s| s < t_s).copied(),
            });
        }
    }
    for l in &mut left {
        if let Some(&(sig, code)) = exits.get(&l.pid) {
            l.signal = sig;
            l.code = code;
        }
        if let Some((sig, text)) = printed_signal.get(&l.pid) {
            l.signal = l.signal.or(Some(*sig));
            l.printed = Some(text.clone());
        }
    }
    // The kernel's own word first.
    for (pid, t, text, size) in &kernel {
        match left
            .iter_mut()
            .find(|l| l.pid == *pid && (l.t_s - t).abs() < 30.0)
        {
            Some(l) => {
                l.kernel = Some((*size, text.clone()));
                l.signal = l.signal.or(Some(9));
            }
            None => ending.others_killed.push(text.clone()),
        }
    }
    Seen { left, exits }
}

/// The processes the cgroup's OOM kill count names (by index into `left`),
/// where no kernel log line did: as many as the count rose, the largest
/// first among those that left then with no other cause; a rise with too
/// few of them is said in `ending.others_killed`.
fn counted_oom_kills<'c, F: Fn(&str) -> Option<&'c [f64]>>(
    data: &Columns<'c, F>,
    left: &[Left],
    ending: &mut Ending,
) -> Vec<usize> {
    let mut oom_by_count: Vec<usize> = Vec::new();
    if let Some(kills) = (data.column)(names::CGROUP_OOM_KILLS) {
        let t = data.t;
        let mut last: Option<(f64, f64)> = None;
        for (i, &v) in kills.iter().enumerate() {
            if !v.is_finite() {
                continue;
            }
            if let Some((t0, v0)) = last
                && v > v0
            {
                let rose = (v - v0).round() as usize;
                let (from, to) = (t0 - SLACK_S, t[i] + SLACK_S);
                let named = left
                    .iter()
                    .filter(|l| l.kernel.is_some() && l.t_s >= from && l.t_s <= to)
                    .count();
                let mut cands: Vec<usize> = (0..left.len())
                    .filter(|&j| {
                        let l = &left[j];
                        l.kernel.is_none()
                            && l.t_s >= from
                            && l.t_s <= to
                            && l.signal.is_none_or(|s| s == 9)
                            && l.code.is_none()
                            && !oom_by_count.contains(&j)
                    })
                    .collect();
                let size = |j: usize| last_reading(data, &left[j]).map_or(0.0, |r| r.1);
                cands.sort_by(|&a, &b| size(b).total_cmp(&size(a)));
                let want = rose.saturating_sub(named);
                let took = cands.len().min(want);
                oom_by_count.extend(cands.into_iter().take(want));
                if took < want {
                    ending.others_killed.push(format!(
                        "the cgroup's OOM kill count rose by {} at {:.1} s, {} of them no process of the watched tree",
                        rose,
                        t[i],
                        want - took
                    ));
                }
            }
            last = Some((t[i], v));
        }
    }
    oom_by_count
}

/// How `l` died, if it was killed (by the kernel's OOM killer, by the
/// cgroup's as its count says (`counted`), or by a signal), with the
/// evidence; `None` for a process that ended on its own.
fn death<'c, F: Fn(&str) -> Option<&'c [f64]>>(
    data: &Columns<'c, F>,
    l: &Left,
    counted: bool,
    exit_seen: bool,
    limit: Option<(f64, LimitSource)>,
) -> Option<Death> {
    let cause = if l.kernel.is_some() {
        Cause::KernelOomKiller
    } else if counted {
        Cause::OomKiller
    } else if l.signal.is_some() {
        Cause::Signal
    } else {
        return None;
    };
    let reading = last_reading(data, l);
    let mut evidence = Vec::new();
    if let Some((_, text)) = &l.kernel {
        evidence.push(format!("the kernel's log: {text}"));
    }
    if counted || l.kernel.is_some() && (data.column)(names::CGROUP_OOM_KILLS).is_some() {
        evidence.push("the cgroup's OOM kill count rose as it left the tree".into());
    }
    match (l.signal, exit_seen) {
        (Some(s), true) => evidence.push(format!(
            "its exit status: killed by signal {s}{}",
            flatline_catalog::signal_name(s).map_or(String::new(), |n| format!(" ({n})"))
        )),
        (None, _) if cause == Cause::OomKiller => evidence.push(
            "its exit status was not seen (its parent reaped it between two readings)".into(),
        ),
        _ => {}
    }
    if let Some(p) = &l.printed {
        evidence.push(format!("the job printed: {p}"));
    }
    let (limit, limit_of) = match (cause, limit) {
        (Cause::Signal, _) | (_, None) => (None, None),
        (_, Some((v, src))) => (
            Some(v),
            Some(match src {
                LimitSource::Cgroup => "the cgroup's",
                _ => "the host's RAM,",
            }),
        ),
    };
    Some(Death {
        pid: l.pid,
        name: l.name.clone(),
        role: l.role.clone(),
        t_s: l.t_s,
        cause,
        signal: l.signal.or(matches!(cause, Cause::OomKiller).then_some(9)),
        size: l
            .kernel
            .as_ref()
            .map(|k| k.0)
            .filter(|&s| s > 0.0)
            .or(reading.map(|r| r.1)),
        last_reading_before_s: reading.map(|r| (l.t_s - r.0).max(0.0)),
        limit,
        limit_of,
        before: before(data, l),
        evidence,
    })
}

/// A process's last reading of its own RSS before it left: (time, bytes).
fn last_reading<'c, F: Fn(&str) -> Option<&'c [f64]>>(
    data: &Columns<'c, F>,
    l: &Left,
) -> Option<(f64, f64)> {
    let stem = l.stem.as_ref()?;
    let v = (data.column)(&format!("{stem}.rss"))?;
    at_or_before(data.t, v, l.t_s)
}

fn before<'c, F: Fn(&str) -> Option<&'c [f64]>>(data: &Columns<'c, F>, l: &Left) -> Option<Before> {
    let t = data.t;
    let start = t.first().copied()?;
    // Since the tree took its shape (the last process joined, and settled),
    // at most BEFORE_S back.
    let shaped = l.shaped_s.map_or(start, |s| s + SLACK_S).min(l.t_s);
    let from = (l.t_s - BEFORE_S).max(start).max(shaped);
    for leaf in ["pss", "rss"] {
        let channel = format!("tree.{leaf}");
        let Some(v) = (data.column)(&channel) else {
            continue;
        };
        let (at_end, last) = at_or_before(t, v, l.t_s)?;
        let first = at_or_after(t, v, from, at_end)?;
        let own = l.stem.as_ref().and_then(|stem| {
            let c = (data.column)(&format!("{stem}.{leaf}"))?;
            let (e, last) = at_or_before(t, c, l.t_s)?;
            Some(last - at_or_after(t, c, from, e)?)
        });
        return Some(Before {
            window_s: at_end - from,
            channel,
            grew: last - first,
            own,
        });
    }
    None
}

impl Death {
    /// "worker 1321 (python) of rank 2"
    pub fn who(&self, rank: Option<&str>) -> String {
        let role = match self.role.as_str() {
            "" | "other" => "process",
            r => r,
        };
        let name = if self.name.is_empty() {
            String::new()
        } else {
            format!(" ({})", self.name)
        };
        let rank = rank.map_or(String::new(), |r| format!(" of rank {r}"));
        format!("{role} {}{name}{rank}", self.pid)
    }

    /// The sentence a receipt says of it.
    pub fn sentence(
        &self,
        rank: Option<&str>,
        value: &dyn Fn(f64, Unit) -> String,
        duration: &dyn Fn(f64) -> String,
    ) -> String {
        let who = self.who(rank);
        let by = match self.cause {
            Cause::KernelOomKiller | Cause::OomKiller => "the kernel's OOM killer".to_owned(),
            Cause::Signal => {
                let s = self.signal.unwrap_or(0);
                match flatline_catalog::signal_name(s) {
                    Some(n) => format!("signal {s} ({n})"),
                    None => format!("signal {s}"),
                }
            }
        };
        let mut s = format!("{who} was killed by {by}");
        if let Some(size) = self.size {
            s += &format!(" at {}", value(size, Unit::Bytes));
            if let (Some(l), Some(of)) = (self.limit, self.limit_of) {
                s += &format!(" of {of} {}", value(l, Unit::Bytes));
            }
        }
        s += &format!(" ({:.1} s into the run)", self.t_s);
        if let Some(b) = &self.before
            && self.cause != Cause::Signal
            && b.window_s > 0.0
        {
            s += &format!(
                "; in the {} before, {} grew {}",
                duration(b.window_s),
                b.channel,
                signed(b.grew, value)
            );
            if let Some(own) = b.own
                && b.grew > 0.0
                && own > 0.0
            {
                s += &format!(
                    ", {:.0} % of it in that {}",
                    (own / b.grew * 100.0).min(100.0),
                    if self.role == "worker" {
                        "worker"
                    } else {
                        "process"
                    }
                );
            }
        }
        s
    }
}

fn signed(v: f64, value: &dyn Fn(f64, Unit) -> String) -> String {
    if v < 0.0 {
        format!("-{}", value(-v, Unit::Bytes))
    } else {
        value(v, Unit::Bytes)
    }
}

impl Ending {
    /// The printed out-of-memory error the run ended with, if it did: the
    /// last one, within [`PRINTED_END_S`] of the end.
    pub fn ended_with(&self) -> Option<&PrintedOom> {
        self.out_of_memory
            .iter()
            .rev()
            .find(|p| p.kind != "dataloader_exited")
            .filter(|p| self.end_s - p.t_s <= PRINTED_END_S)
            .filter(|_| self.exit_code.is_none_or(|c| c != 0))
    }

    /// The headline this ending gives, if any: an OOM kill first, then an
    /// out-of-memory error the run ended with.
    pub fn headline(
        &self,
        rank: Option<&str>,
        value: &dyn Fn(f64, Unit) -> String,
        duration: &dyn Fn(f64) -> String,
    ) -> Option<String> {
        let exit = match (self.exit_code, self.exit_signal) {
            (_, Some(s)) => format!(
                "; the job was killed by signal {s}{}",
                flatline_catalog::signal_name(s).map_or(String::new(), |n| format!(" ({n})"))
            ),
            (Some(c), None) if c != 0 => format!("; the job exited with code {c}"),
            _ => String::new(),
        };
        if let Some(d) = self.deaths.iter().find(|d| d.cause != Cause::Signal) {
            let mut s = d.sentence(rank, value, duration);
            // Its first letter up: it opens the receipt.
            if let Some(c) = s.get(..1) {
                s = c.to_uppercase() + &s[1..];
            }
            return Some(format!("{s}{exit}."));
        }
        let p = self.ended_with()?;
        let text = p.text.trim_end_matches('.');
        Some(match text.strip_prefix("CUDA out of memory: ") {
            Some(rest) => format!("The job ran out of CUDA memory: {rest}{exit}."),
            None => format!("The job ran out of memory: {text}{exit}."),
        })
    }
}

/// How close to the end a printed out-of-memory error must be for the run
/// to be said to have ended with it.
pub const PRINTED_END_S: f64 = 15.0;
