//! The watched process and all its descendants: PSS and USS per process
//! from `/proc/<pid>/smaps_rollup`, summed over the tree, with per-process
//! channels that join when a process appears and end when it exits.
//!
//! Why PSS: a DataLoader worker that reads a Python list of its parent's
//! objects touches every object's reference count, so the kernel copies each
//! page into the worker. Every process's RSS stays flat (the pages were
//! already mapped, shared); the tree's PSS (each shared page divided among
//! its sharers) rises by exactly the copies. Summing RSS counts a shared
//! page once per sharer and says nothing.
//!
//! The probe runs on the slow-probe thread. RSS (`/proc/<pid>/status`) is read
//! at every reading. Reading `smaps_rollup` walks the page tables (about
//! 14 ms for a 1.5 GiB process), so it runs within a CPU budget (1 % of one
//! core by default): each reading reads the processes whose turn it is, new
//! ones first, and `tree.pss`, `tree.uss` and `tree.swap` are published when
//! every process has been read once since the last sums (a round). A small
//! tree is read whole at every reading; five 1.5 GiB processes, about every
//! seven seconds. Each reading lists
//! every process's parent from `/proc/*/stat`, so a child is found within
//! one period (0.5 s at the default 2 Hz) of its start and counts in
//! `tree.*` from then on. Its start is told (a `process_started` event, its
//! `pid<N>.*` channels) at its second sighting, so that a wrapper that execs
//! what it wraps (a shell shim that becomes `python3`) is named and given a
//! role as what it became. A process that
//! cannot be read (another user's, or gone between listing and reading) is
//! skipped and counted in `tree.skipped`, never fatal. A process listed once
//! and gone before the next listing (a child that lived less than a period)
//! is in `tree.*` for that reading but never named nor given channels; it is
//! counted in `tree.brief`, so a receipt can say how many came and went. One
//! that lived entirely between two listings is not seen at all: no `/proc`
//! walk can count it.
//!
//! Roles: `main` is the watched process (and, when that is a launcher such as
//! a shell, `env` or `timeout`, its direct children); `rank` is a child of a
//! `torchrun` / `torch.distributed` agent; `worker` is a process started from
//! the same executable as its parent (DataLoader workers, multiprocessing
//! pools); `other` is everything else (a shell, a compiler, `nvidia-smi`).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crossbeam_channel::Sender;

use super::{ChannelSpec, Clock, DynamicChannels, Probe, ProbeError, catalog};
use flatline_format::{Event, EventKind};

/// Fields of `/proc/<pid>/stat` the tree needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatLine {
    pub comm: String,
    pub state: u8,
    pub ppid: u32,
    /// Minor page faults so far (the whole process, all its threads).
    pub minflt: u64,
    /// Start time in clock ticks since boot: with the pid, it names a process
    /// even after its pid is reused.
    pub start: u64,
}

/// Parses `/proc/<pid>/stat` for the tree; `None` when cut short.
pub fn parse_stat_line(text: &str) -> Option<StatLine> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_owned();
    let mut f = text.get(close + 1..)?.split_ascii_whitespace();
    // state(3) ppid(4) pgrp session tty_nr tpgid flags minflt(10) … starttime(22)
    let state = *f.next()?.as_bytes().first()?;
    let ppid = f.next()?.parse().ok()?;
    let minflt = f.nth(5)?.parse().ok()?;
    let start = f.nth(11)?.parse().ok()?;
    Some(StatLine {
        comm,
        state,
        ppid,
        minflt,
        start,
    })
}

/// A dead process's exit status, in `waitpid`'s form: `/proc/<pid>/stat`'s
/// 52nd field (Linux 3.5 on), kept while it waits to be reaped.
pub fn parse_exit_status(text: &str) -> Option<i32> {
    let close = text.rfind(')')?;
    // Fields from the state (the 3rd) on: the 52nd is the 50th of them.
    text.get(close + 1..)?
        .split_ascii_whitespace()
        .nth(49)?
        .parse()
        .ok()
}

pub use flatline_catalog::signal_name;

/// The fact of how process `pid` ended, from its `waitpid` status: kind
/// `exit`, with `code` (it exited) or `signal` (it was killed) in its
/// figures.
pub fn exit_fact(pid: u32, name: &str, status: i32) -> EventKind {
    let sig = status & 0x7f;
    if sig == 0 {
        let code = (status >> 8) & 0xff;
        EventKind::fact(
            "exit",
            format!("process {pid} ({name}) exited with code {code}"),
            &[("code", f64::from(code))],
        )
        .of_pid(pid)
    } else {
        let named = signal_name(sig).map_or(String::new(), |n| format!(" ({n})"));
        EventKind::fact(
            "exit",
            format!("process {pid} ({name}) was killed by signal {sig}{named}"),
            &[("signal", f64::from(sig))],
        )
        .of_pid(pid)
    }
}

/// What the kernel counts for a process at no cost: its minor faults
/// (`/proc/<pid>/stat`) and its resident pages by kind (`statm`), in
/// bytes. Two of them a reading apart give [`copied_bytes`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub minflt: u64,
    /// Resident anonymous memory.
    pub anon: u64,
    /// Resident file-backed and shared memory (`RssFile` + `RssShmem`).
    pub shared: u64,
}

/// `/proc/<pid>/statm`'s resident and shared sizes, in bytes.
pub fn parse_statm(text: &str, page: u64) -> Option<(u64, u64)> {
    let mut f = text.split_ascii_whitespace();
    // No address space: a process that has exited and not yet been reaped
    // (a zombie reads all zeros). That is no reading, not an RSS of 0.
    let size: u64 = f.next()?.parse().ok()?;
    if size == 0 {
        return None;
    }
    let resident: u64 = f.next()?.parse().ok()?;
    let shared: u64 = f.next()?.parse().ok()?;
    Some((resident * page, shared * page))
}

/// The fast copy-on-write estimate between two readings: minor faults that
/// brought no new resident page, in bytes. A write to a page shared since
/// a fork faults once and replaces the shared page by a private copy, so
/// RSS stays where it was; a first touch of new memory (anonymous) or of a
/// file page already in the page cache also faults once, but adds a
/// resident page, which is subtracted here. What it cannot tell from a copy:
/// memory unmapped and touched again between the same two readings (an
/// allocator that returns and re-maps, a file mapped anew), where RSS ends
/// where it began; a transparent huge page is one fault for 512 pages and
/// reads as none. So it is a lead indicator, never a verdict: it chooses
/// whose page tables to walk first, and the PSS and USS those walks read
/// are the evidence.
pub fn copied_bytes(before: Counts, now: Counts, page: u64) -> u64 {
    let faults = now.minflt.saturating_sub(before.minflt);
    let gained = now.anon.saturating_sub(before.anon) + now.shared.saturating_sub(before.shared);
    faults.saturating_sub(gained / page.max(1)) * page
}

/// Memory of one process from `/proc/<pid>/smaps_rollup`, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rollup {
    pub rss: f64,
    pub pss: f64,
    /// Private_Clean + Private_Dirty: what exiting would give back.
    pub uss: f64,
    pub swap_pss: f64,
}

/// Parses `smaps_rollup`; `None` when it holds no `Pss` line (an exited
/// process, a kernel thread).
pub fn parse_rollup(text: &str) -> Option<Rollup> {
    let mut r = Rollup::default();
    let mut has_pss = false;
    for (key, v) in text.lines().filter_map(super::classes::kb_line) {
        match key {
            "Rss" => r.rss = v,
            "Pss" => {
                r.pss = v;
                has_pss = true;
            }
            "Private_Clean" | "Private_Dirty" => r.uss += v,
            "SwapPss" => r.swap_pss = v,
            _ => {}
        }
    }
    has_pss.then_some(r)
}

/// Executables whose direct children are the job itself.
const LAUNCHERS: [&str; 12] = [
    "sh", "bash", "dash", "zsh", "env", "timeout", "nohup", "uv", "poetry", "srun", "mpirun",
    "conda",
];

/// Whether a command line is a `torch.distributed` agent (`torchrun`,
/// `python -m torch.distributed.run`, the older `launch`).
pub fn is_agent(cmdline: &str) -> bool {
    cmdline.split(['\0', ' ']).any(|a| {
        a.rsplit('/').next() == Some("torchrun")
            || a == "torch.distributed.run"
            || a == "torch.distributed.launch"
    })
}

/// One process of the tree.
#[derive(Debug, Clone)]
struct Member {
    start: u64,
    ppid: u32,
    name: String,
    role: &'static str,
    exe: Option<PathBuf>,
    agent: bool,
    /// Position of its `pid<N>.rss` (then `.pss`, `.uss`), once added.
    channels: Option<usize>,
    /// When it was first seen, on the stream's clock.
    first_ns: u64,
    /// Whether its start has been told (event, channels): at its second
    /// sighting, once a wrapper has had time to exec what it wraps.
    announced: bool,
    /// Resident set, read every reading (cheap: `/proc/<pid>/status`).
    rss: Option<f64>,
    /// The last reading's fault and resident counts.
    counts: Option<Counts>,
    /// The copy-on-write estimate since it was first seen, bytes.
    cow: u64,
    /// Flat when it started, with little room: channels once it moves.
    waiting: bool,
    /// `cow` when its page tables were last walked, and when (stream clock).
    cow_at_walk: u64,
    walked_ns: Option<u64>,
    /// Walks still owed, a [`SETTLE_EVERY_NS`] apart, since it last moved:
    /// the readings that show its level held when the copying stopped.
    settle: u8,
    /// Its latest page-table walk (what its own channels stand on), its
    /// walk in the round in progress, and what its part of the tree's sums
    /// stands on: its walk in the last whole round or, for a process born
    /// in the watched tree, nothing (a fork adds nothing to the tree's PSS:
    /// a child's share of a page is taken from its parent's) and its
    /// counts when first seen.
    walk: Option<Walk>,
    round: Option<Walk>,
    anchor: Option<Walk>,
    /// What its part of the tree's USS stands on: as `anchor`, but a fork
    /// is not nothing to its parent's USS (the pages it had to itself are
    /// shared with the child now): a parent's goes stale at each child it
    /// forks, and comes back with its next walk, which is due at once.
    uss_base: Option<Walk>,
    /// Whether its own walks confirmed that its faults are copies (its USS
    /// rose by at least [`CONFIRM_SHARE`] of what they read as copies):
    /// only then do they carry its figures between walks.
    confirmed: bool,
    told_unconfirmed: bool,
    /// Walked in this reading.
    fresh: bool,
    /// It forked: walked before the round's others, with new processes.
    stale: bool,
}

/// A page-table walk, and the cheap counts at its time: the base a
/// process's figures are carried forward from.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Walk {
    /// `None`: unreadable (another user's process), so no part of the sums;
    /// zeros: the base of a process born in the tree.
    mem: Option<Rollup>,
    cow: u64,
    counts: Counts,
    at_ns: u64,
}

impl Member {
    /// What changed since `base` by the cheap counts, bytes: copies (where
    /// its walks confirmed its fault counts are copies), resident anonymous
    /// pages, resident file-backed and shared pages.
    fn since(&self, base: &Walk) -> (f64, f64, f64) {
        let now = self.counts.unwrap_or(base.counts);
        let cow = if self.confirmed {
            self.cow.saturating_sub(base.cow) as f64
        } else {
            0.0
        };
        (
            cow,
            now.anon as f64 - base.counts.anon as f64,
            now.shared as f64 - base.counts.shared as f64,
        )
    }

    /// Its part of the tree's sums: its anchor, carried forward (`uss`
    /// NaN while its USS base is stale). Each copy adds a page to the
    /// tree's PSS (the private copy; the page it copied stays, shared by
    /// the others), each new resident page one. Never below nothing nor
    /// above its RSS: memory it shared and freed (a parent's list freed as
    /// the job ends) leaves less than its anonymous pages say.
    fn tree_part(&self) -> Option<Rollup> {
        let base = self.anchor?;
        let Some(b) = base.mem else {
            return Some(Rollup::default());
        };
        let cap = self.rss.unwrap_or(f64::INFINITY).max(0.0);
        let (cow, anon, shared) = self.since(&base);
        let uss = self.uss_base.map_or(f64::NAN, |u| match u.mem {
            Some(m) => {
                let (cow, anon, _) = self.since(&u);
                (m.uss + cow + anon).clamp(0.0, cap)
            }
            None => 0.0,
        });
        Some(Rollup {
            rss: 0.0,
            pss: (b.pss + cow + anon + shared).clamp(0.0, cap),
            uss,
            swap_pss: b.swap_pss,
        })
    }

    /// Its own PSS and USS now: its latest walk, carried forward. A copy
    /// adds a whole page to its USS and, to its PSS, what it did not already
    /// pay of the shared page (its walk's mean share of a shared page).
    fn estimate(&self) -> Option<Rollup> {
        // A parent that has just forked shares what it had to itself: its
        // last walk says nothing of its PSS and USS now.
        if self.stale {
            return None;
        }
        let w = self.walk?;
        let m = w.mem?;
        let (cow, anon, shared) = self.since(&w);
        let share = if m.rss > m.uss {
            ((m.pss - m.uss) / (m.rss - m.uss)).clamp(0.0, 1.0)
        } else {
            0.0
        };
        let cap = self.rss.unwrap_or(f64::INFINITY).max(0.0);
        Some(Rollup {
            rss: m.rss,
            pss: (m.pss + cow * (1.0 - share) + anon + shared * share).clamp(0.0, cap),
            uss: (m.uss + cow + anon).clamp(0.0, cap),
            swap_pss: m.swap_pss,
        })
    }
}

/// What one reading found, applied to the schema in [`Probe::dynamic`].
#[derive(Debug, Default)]
struct Found {
    started: Vec<u32>,
    exited: Vec<Member>,
}

/// Reads the process tree under a root pid.
#[derive(Debug)]
pub struct TreeProbe {
    proc_root: PathBuf,
    root: u32,
    members: HashMap<u32, Member>,
    /// Processes whose memory could not be read, so far.
    skipped: u64,
    /// The copy-on-write estimate of processes that have left the tree.
    cow_gone: u64,
    /// How often a mover's page tables may be walked again, and one that
    /// has stopped moving.
    mover_every_ns: u64,
    settle_every_ns: u64,
    page: u64,
    /// Processes seen at one listing only (gone before they were named).
    brief: u64,
    /// Exit statuses of members seen dead and not yet reaped (a zombie's
    /// `stat` holds it), told when they leave.
    exits: HashMap<u32, i32>,
    per_process: bool,
    found: Found,
    events: Option<Sender<Event>>,
    clock: Clock,
    buf: String,
    /// `stat` and `statm` of the tree's members, kept open and read again
    /// from their start at each reading: opening a `/proc/<pid>/` file walks
    /// its path every time (opens and closes were 14 % of the watcher's CPU
    /// samples at 65 processes). At most [`HELD_FILES`]; a member's go with
    /// it, and one that fails to read (its process gone) is opened anew by
    /// path, so a pid used again is read as the new process it is.
    held: HashMap<(u32, Held), std::fs::File>,
    /// Share of one core the `smaps_rollup` reads may use (thread CPU
    /// time), in two buckets it fills as time passes: [`ROUND_SHARE`] of it
    /// for the round (and new processes), the rest for processes that move.
    /// A walk goes while its bucket is not below zero (a big process's walk
    /// may take it below: it waits until the bucket refills); a bucket holds
    /// at most [`BANK_NS`], and what the movers' would hold beyond that goes
    /// to the round's, so an idle tree's rounds get the whole budget.
    budget: f64,
    round_ns: f64,
    mover_ns: f64,
    budget_at: std::time::Instant,
    /// Whether the note that per-process channels ran out has been sent.
    told_full: bool,
    /// Whether the note that flat processes wait for channels has been sent.
    told_waiting: bool,
    /// What left the tree's PSS sum's parts without leaving the tree: a
    /// process that exits takes its own pages (its USS) with it, while its
    /// share of the pages it shared stays with the others. Zero again at each
    /// whole round.
    residual: Rollup,
    /// Listings so far: a process seen at the first was not born in the
    /// watched tree, so its part of the sums waits for its first walk.
    scans: u64,
    /// The members' pids, told to whoever shares them (the GPU probe sums
    /// the tree's VRAM over them).
    shared: Option<TreePids>,
    /// Where each process's memory lives, read from `smaps` for those that
    /// move (see [`super::classes`]); `None`: not read.
    classes: Option<super::classes::ClassReader>,
}

/// The watched tree's pids as the tree probe last saw them; shared with
/// probes that read per-process figures elsewhere (NVML).
pub type TreePids = std::sync::Arc<std::sync::Mutex<Vec<u32>>>;

impl TreeProbe {
    /// Watches `root` and its descendants through `/proc`. With
    /// `per_process`, each process also gets channels of its own.
    pub fn new(root: u32, per_process: bool, events: Option<Sender<Event>>, clock: Clock) -> Self {
        Self::with_proc_root(Path::new("/proc"), root, per_process, events, clock)
    }

    /// As [`TreeProbe::new`], reading a `/proc` somewhere else (tests).
    pub fn with_proc_root(
        proc_root: &Path,
        root: u32,
        per_process: bool,
        events: Option<Sender<Event>>,
        clock: Clock,
    ) -> Self {
        Self {
            proc_root: proc_root.to_owned(),
            root,
            members: HashMap::new(),
            skipped: 0,
            cow_gone: 0,
            mover_every_ns: MOVER_EVERY_NS,
            settle_every_ns: SETTLE_EVERY_NS,
            page: flatline_arena::sys::page_size(),
            brief: 0,
            exits: HashMap::new(),
            per_process,
            found: Found::default(),
            events,
            clock,
            buf: String::new(),
            held: HashMap::new(),
            budget: ROLLUP_BUDGET,
            round_ns: ROLLUP_CREDIT_NS,
            mover_ns: 0.0,
            budget_at: std::time::Instant::now(),
            told_full: false,
            told_waiting: false,
            residual: Rollup::default(),
            scans: 0,
            shared: None,
            classes: Some(super::classes::ClassReader::default()),
        }
    }

    /// Without reading where each process's memory lives (`smaps`).
    pub fn without_classes(mut self) -> Self {
        self.classes = None;
        self
    }

    /// Reads `smaps` of the processes due (see
    /// [`super::classes::ClassReader::due`]: those whose memory moved), the
    /// least recently read first ([`super::classes::ClassReader::order`]),
    /// while the budget lasts; each reading is a `classes` fact.
    fn read_classes(&mut self) {
        let Some(mut reader) = self.classes.take() else {
            return;
        };
        reader.retain(|p| self.members.contains_key(&p));
        if self.events.is_some() && reader.refill() {
            let now_ns = self.clock.now_ns();
            let mut due: Vec<u32> = self
                .members
                .iter()
                .filter(|(p, m)| {
                    let uss = m.estimate().map_or(f64::NAN, |r| r.uss);
                    m.announced && reader.due(**p, m.rss.unwrap_or(f64::NAN), uss, now_ns)
                })
                .map(|(p, _)| *p)
                .collect();
            reader.order(&mut due);
            for pid in due {
                if !reader.has_budget() {
                    break;
                }
                let t0 = flatline_arena::sys::thread_cpu_ns();
                let read = self.read_to_buf(pid, "smaps");
                let classes = read
                    .then(|| super::classes::Classes::parse(&self.buf))
                    .flatten();
                let cost = flatline_arena::sys::thread_cpu_ns().saturating_sub(t0) as f64;
                let Some(m) = self.members.get(&pid) else {
                    continue;
                };
                let uss = m.estimate().map_or(f64::NAN, |r| r.uss);
                reader.read(pid, m.rss.unwrap_or(f64::NAN), uss, now_ns, cost);
                if let (Some(c), Some(tx)) = (classes, &self.events) {
                    let _ = tx.try_send(Event {
                        t_ns: now_ns,
                        kind: c.fact(pid, &m.name),
                    });
                }
            }
        }
        self.classes = Some(reader);
    }

    /// Tells `pids` the members after every scan.
    pub fn sharing(mut self, pids: TreePids) -> Self {
        self.shared = Some(pids);
        self
    }

    /// Lets the `smaps_rollup` reads use `share` of one core on average
    /// (default [`ROLLUP_BUDGET`]) after `credit_ns` of CPU up front (default
    /// 100 ms, so the first round of a big tree is not spread out).
    pub fn with_budget(mut self, share: f64, credit_ns: f64) -> Self {
        self.budget = share;
        self.round_ns = credit_ns;
        self
    }

    /// Reads a member's `stat` or `statm` into `buf` through its held file,
    /// or by path (keeping the file for a member while there is room).
    fn read_held(&mut self, pid: u32, which: Held) -> bool {
        if let Some(f) = self.held.get(&(pid, which)) {
            if read_from_start(f, &mut self.buf) {
                return true;
            }
            self.held.remove(&(pid, which));
        }
        let name = match which {
            Held::Stat => "stat",
            Held::Statm => "statm",
        };
        let path = self.proc_root.join(pid.to_string()).join(name);
        let Ok(f) = std::fs::File::open(path) else {
            self.buf.clear();
            return false;
        };
        if !read_from_start(&f, &mut self.buf) {
            return false;
        }
        if self.members.contains_key(&pid) && self.held.len() < HELD_FILES {
            self.held.insert((pid, which), f);
        }
        true
    }

    fn read_to_buf(&mut self, pid: u32, file: &str) -> bool {
        use std::io::Read;
        self.buf.clear();
        let path = self.proc_root.join(pid.to_string()).join(file);
        std::fs::File::open(path)
            .and_then(|mut f| f.read_to_string(&mut self.buf))
            .is_ok()
    }

    /// Every live process's parent, start and name, from `/proc/*/stat`.
    fn list(&mut self) -> HashMap<u32, StatLine> {
        let mut all = HashMap::new();
        let Ok(dir) = std::fs::read_dir(&self.proc_root) else {
            return all;
        };
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let read = if self.members.contains_key(&pid) {
                self.read_held(pid, Held::Stat)
            } else {
                self.read_to_buf(pid, "stat")
            };
            if read && let Some(st) = parse_stat_line(&self.buf) {
                if !matches!(st.state, b'Z' | b'X' | b'x') {
                    all.insert(pid, st);
                } else if let Some(status) = self
                    .members
                    .get(&pid)
                    .filter(|m| m.start == st.start)
                    .and_then(|_| parse_exit_status(&self.buf))
                {
                    // Dead, not yet reaped by its parent: how it ended.
                    self.exits.insert(pid, status);
                }
            }
        }
        all
    }

    fn role_of(&self, pid: u32, st: &StatLine, exe: Option<&Path>) -> &'static str {
        if pid == self.root {
            return "main";
        }
        let Some(parent) = self.members.get(&st.ppid) else {
            return "other";
        };
        if parent.agent {
            "rank"
        } else if st.ppid == self.root && LAUNCHERS.contains(&parent.name.as_str()) {
            "main"
        } else if exe.is_some() && exe == parent.exe.as_deref() || st.comm == parent.name {
            "worker"
        } else {
            "other"
        }
    }

    fn emit_at(&self, t_ns: u64, kind: EventKind) {
        if let Some(tx) = &self.events {
            let _ = tx.try_send(Event { t_ns, kind });
        }
    }

    /// The watched process is gone: nothing of the tree is read any more
    /// (no stale values after it), and the rest of the tree leaves with it
    /// (a job that exits at once after losing a worker: the worker is told,
    /// with how it died, where it was seen dead).
    fn root_left(&mut self) -> ProbeError {
        for m in self.members.values_mut() {
            m.rss = None;
            m.fresh = false;
        }
        let left: Vec<u32> = self
            .members
            .iter()
            .filter(|(pid, m)| **pid != self.root && m.announced)
            .map(|(&pid, _)| pid)
            .collect();
        for pid in left {
            let Some(m) = self.members.remove(&pid) else {
                continue;
            };
            let now = self.clock.now_ns();
            if let Some(status) = self.exits.remove(&pid) {
                self.emit_at(now, exit_fact(pid, &m.name, status));
            }
            self.emit_at(
                now,
                EventKind::ProcessExited {
                    pid,
                    name: m.name.clone(),
                    role: m.role.into(),
                },
            );
            self.found.exited.push(m);
        }
        ProbeError::Gone { pid: self.root }
    }

    /// The processes in `gone` leave the tree: their own pages leave the
    /// tree's PSS with them, and each announced one is told as exited (with
    /// its exit status where it was seen); one never announced counts as
    /// brief.
    fn leave(&mut self, gone: Vec<u32>) {
        for pid in gone {
            let Some(m) = self.members.remove(&pid) else {
                continue;
            };
            self.held.remove(&(pid, Held::Stat));
            self.held.remove(&(pid, Held::Statm));
            self.cow_gone += m.cow;
            // Its own pages leave the tree's PSS with it; its share of the
            // pages it shared stays, paid by the others now.
            if let Some(part) = m.tree_part() {
                let own = m.estimate().map_or(part.uss, |e| e.uss);
                self.residual.pss += part.pss - own.clamp(0.0, part.pss.max(0.0));
            }
            let status = self.exits.remove(&pid);
            if !m.announced {
                self.brief += 1;
            } else {
                if let Some(status) = status {
                    self.emit_at(self.clock.now_ns(), exit_fact(pid, &m.name, status));
                }
                self.emit_at(
                    self.clock.now_ns(),
                    EventKind::ProcessExited {
                        pid,
                        name: m.name.clone(),
                        role: m.role.into(),
                    },
                );
                self.found.exited.push(m);
            }
        }
    }

    /// Lists the tree, notes who joined and left, and reads everyone's memory.
    fn scan(&mut self) -> Result<(), ProbeError> {
        let all = self.list();
        if !all.contains_key(&self.root) {
            return Err(self.root_left());
        }
        let order = parents_first(self.root, &all);
        let live: HashSet<u32> = order.iter().copied().collect();
        let gone: Vec<u32> = self
            .members
            .iter()
            .filter(|(pid, m)| {
                !live.contains(pid) || all.get(pid).is_some_and(|s| s.start != m.start)
            })
            .map(|(&pid, _)| pid)
            .collect();
        self.leave(gone);
        for pid in order {
            let st = &all[&pid];
            if let Some(m) = self.members.get_mut(&pid)
                && m.name != st.comm
            {
                // It exec'd (a shell wrapper that becomes python): new name, new binary.
                m.name.clone_from(&st.comm);
                m.exe = std::fs::read_link(self.proc_root.join(pid.to_string()).join("exe")).ok();
            }
            match self.members.get(&pid) {
                None => {
                    let exe =
                        std::fs::read_link(self.proc_root.join(pid.to_string()).join("exe")).ok();
                    let agent = self.read_to_buf(pid, "cmdline") && is_agent(&self.buf);
                    self.members.insert(
                        pid,
                        Member {
                            start: st.start,
                            ppid: st.ppid,
                            name: st.comm.clone(),
                            role: "other",
                            exe,
                            agent,
                            channels: None,
                            first_ns: self.clock.now_ns(),
                            announced: false,
                            rss: None,
                            counts: None,
                            cow: 0,
                            waiting: false,
                            cow_at_walk: 0,
                            walked_ns: None,
                            settle: 0,
                            walk: None,
                            round: None,
                            anchor: None,
                            uss_base: None,
                            confirmed: false,
                            told_unconfirmed: false,
                            fresh: false,
                            stale: false,
                        },
                    );
                }
                Some(m) if !m.announced => {
                    let first_ns = m.first_ns;
                    let exe = m.exe.clone();
                    let agent = self.read_to_buf(pid, "cmdline") && is_agent(&self.buf);
                    let role = self.role_of(pid, st, exe.as_deref());
                    if let Some(m) = self.members.get_mut(&pid) {
                        m.role = role;
                        m.agent = agent;
                        m.announced = true;
                    }
                    self.emit_at(
                        first_ns,
                        EventKind::ProcessStarted {
                            pid,
                            ppid: st.ppid,
                            name: st.comm.clone(),
                            role: role.into(),
                        },
                    );
                    self.found.started.push(pid);
                }
                Some(_) => {}
            }
            // `statm`, not `status`: the kernel renders it for a fraction
            // of the cost (no signal masks nor CPU lists), and it holds all
            // the tree needs at every reading.
            let statm = self
                .read_held(pid, Held::Statm)
                .then(|| parse_statm(&self.buf, self.page))
                .flatten();
            let rss = statm.map(|(resident, _)| resident as f64);
            let counts = statm.map(|(resident, shared)| Counts {
                minflt: st.minflt,
                anon: resident.saturating_sub(shared),
                shared,
            });
            let born_here = self.scans > 0;
            let mut forked_by = None;
            if let Some(m) = self.members.get_mut(&pid) {
                m.rss = rss;
                m.fresh = false;
                if let Some(now) = counts {
                    if let Some(before) = m.counts {
                        m.cow += copied_bytes(before, now, self.page);
                    } else if born_here && m.anchor.is_none() {
                        // Born in the watched tree: its part of the sums
                        // starts from nothing, at its first counts.
                        m.anchor = Some(Walk {
                            mem: Some(Rollup::default()),
                            cow: m.cow,
                            counts: now,
                            at_ns: m.first_ns,
                        });
                        m.uss_base = m.anchor;
                        forked_by = Some(m.ppid);
                    }
                    m.counts = Some(now);
                }
            }
            if let Some(parent) = forked_by.and_then(|pp| self.members.get_mut(&pp)) {
                parent.uss_base = None;
                parent.stale = true;
            }
        }
        self.scans += 1;
        self.read_rollups();
        Ok(())
    }

    /// Adds `pid`'s channels; false (and a note, once) when there is no room.
    fn give_channels(&mut self, pid: u32, ch: &mut DynamicChannels<'_>) -> bool {
        let Some(m) = self.members.get_mut(&pid) else {
            return false;
        };
        // A reused pid gets a name of its own: pid123, then pid123-2, …
        let stem = ch.free_stem(&format!("pid{pid}"), "rss");
        let specs = PROCESS_CHANNELS
            .iter()
            .map(|&leaf| {
                catalog::spec(&format!("{stem}.{leaf}"))
                    .with_label("pid", pid.to_string())
                    .with_label("ppid", m.ppid.to_string())
                    .with_label("name", m.name.clone())
                    .with_label("role", m.role)
            })
            .collect();
        m.channels = ch.add(specs);
        if m.channels.is_none() && !self.told_full {
            self.told_full = true;
            let why = format!(
                "process {pid} and later ones get no channels of their own: the recording \
                 holds as many channels as it can (tree.* go on)"
            );
            self.emit_at(self.clock.now_ns(), EventKind::Note(why));
        }
        self.members.get(&pid).is_some_and(|m| m.channels.is_some())
    }

    /// Reads `smaps_rollup` (PSS, USS, swap) of the processes whose turn it
    /// is, within the CPU budget. Reading it walks the process's page tables
    /// (about 16 ms per GiB resident), so a tree of big processes is walked
    /// over many readings: new processes first, then those whose fast signal
    /// says pages are being copied (from at most 1 − [`ROUND_SHARE`] of the
    /// budget), then the round in pid order with what is left, so that
    /// rounds complete at any tree size.
    fn read_rollups(&mut self) {
        let now = std::time::Instant::now();
        let dt = now.duration_since(self.budget_at).as_nanos() as f64;
        self.budget_at = now;
        self.mover_ns += (1.0 - ROUND_SHARE) * self.budget * dt;
        self.round_ns += ROUND_SHARE * self.budget * dt;
        if self.mover_ns > BANK_NS {
            self.round_ns += self.mover_ns - BANK_NS;
            self.mover_ns = BANK_NS;
        }
        self.round_ns = self.round_ns.min(BANK_NS.max(ROLLUP_CREDIT_NS));
        let now_ns = self.clock.now_ns();
        // Whose turn it is. From the round's share: new processes (never
        // read) and parents that have just forked first, then the round in
        // pid order (a stable round-robin: a round ends only when each has
        // had its turn). From the movers' share, between the two: those
        // whose fast signal says pages are being copied, most first (read
        // again even when this round has read them, at most once a
        // [`MOVER_EVERY_NS`]), then those that have just stopped (a few
        // walks, [`SETTLE_EVERY_NS`] apart, so that the readings show the
        // level held, not only that it rose). A process that moves keeps
        // its turn in the round too.
        let mut first: Vec<u32> = Vec::new();
        let mut round: Vec<u32> = Vec::new();
        let mut movers: Vec<(u8, std::cmp::Reverse<u64>, u32)> = Vec::new();
        for (&p, m) in &self.members {
            let moved = m.cow - m.cow_at_walk;
            let since = |every: u64| {
                m.walked_ns
                    .is_none_or(|w| now_ns.saturating_sub(w) >= every)
            };
            // What the sums wait for comes first: a parent's walk after it
            // forked (the tree's USS), a process that was there before the
            // watch (its part). A process born in the tree has its part
            // already; its first walk is its turn in the round (forty
            // workers of a 1.5 GiB rank are a second of walking).
            if m.stale || (m.walked_ns.is_none() && m.anchor.is_none()) {
                first.push(p);
            } else if m.round.is_none() {
                round.push(p);
            }
            if moved >= MOVED_BYTES && since(self.mover_every_ns) {
                movers.push((1, std::cmp::Reverse(moved), p));
            } else if m.walked_ns.is_some() && m.settle > 0 && since(self.settle_every_ns) {
                movers.push((2, std::cmp::Reverse(0), p));
            }
        }
        first.sort_unstable();
        round.sort_unstable();
        movers.sort_unstable();
        let turn: Vec<(bool, u32)> = first
            .into_iter()
            .map(|p| (false, p))
            .chain(movers.into_iter().map(|(_, _, p)| (true, p)))
            .chain(round.into_iter().map(|p| (false, p)))
            .collect();
        let mut notes = Vec::new();
        for (mover, pid) in turn {
            if (if mover { self.mover_ns } else { self.round_ns }) < 0.0
                || self
                    .members
                    .get(&pid)
                    .is_none_or(|m| m.walked_ns == Some(now_ns))
            {
                continue;
            }
            let t0 = flatline_arena::sys::thread_cpu_ns();
            let mem = if self.read_to_buf(pid, "smaps_rollup") {
                parse_rollup(&self.buf)
            } else {
                None
            };
            let cost = flatline_arena::sys::thread_cpu_ns().saturating_sub(t0) as f64;
            if mover {
                self.mover_ns -= cost;
            } else {
                self.round_ns -= cost;
            }
            if mem.is_none() {
                self.skipped += 1;
            }
            let Some(m) = self.members.get_mut(&pid) else {
                continue;
            };
            let walk = Walk {
                mem,
                cow: m.cow,
                counts: m.counts.unwrap_or_default(),
                at_ns: now_ns,
            };
            // The fast signal checked against the truth: copies raise the
            // process's own memory page for page.
            if let (Some(prev), Some(new)) = (m.walk, mem)
                && let Some(old) = prev.mem
            {
                let copies = m.cow.saturating_sub(prev.cow);
                if copies >= MOVED_BYTES {
                    let anon = walk.counts.anon as f64 - prev.counts.anon as f64;
                    let own = new.uss - old.uss - anon;
                    let confirmed = own >= CONFIRM_SHARE * copies as f64;
                    if !confirmed && !m.told_unconfirmed {
                        m.told_unconfirmed = true;
                        notes.push(format!(
                            "process {pid} ({}): its faults read as {:.1} MiB of copied pages \
                             between two page-table walks, but its own memory (USS) moved \
                             {:+.1} MiB: not copies (memory unmapped and mapped again, buffers \
                             freed and made anew); its fast signal orders its walks and counts \
                             in no figure until its walks confirm it",
                            m.name,
                            copies as f64 / 1_048_576.0,
                            own / 1_048_576.0
                        ));
                    }
                    m.confirmed = confirmed;
                }
            }
            m.walk = Some(walk);
            m.round = Some(walk);
            if m.uss_base.is_none() {
                m.uss_base = Some(walk);
            }
            m.stale = false;
            m.fresh = mem.is_some();
            m.settle = if m.cow - m.cow_at_walk >= MOVED_BYTES {
                SETTLE_WALKS
            } else {
                m.settle.saturating_sub(1)
            };
            m.cow_at_walk = m.cow;
            m.walked_ns = Some(now_ns);
        }
        for n in notes {
            self.emit_at(now_ns, EventKind::Note(n));
        }
    }

    /// Whether every member has been walked since the last whole round:
    /// then the walks become what the sums stand on.
    fn close_round(&mut self) {
        if self.members.is_empty() || self.members.values().any(|m| m.round.is_none()) {
            return;
        }
        for m in self.members.values_mut() {
            m.anchor = m.round.take();
            m.uss_base = m.anchor;
        }
        self.residual = Rollup::default();
    }

    /// The tree's PSS, USS and swap: every part carried forward from what
    /// it stands on; `None` while a process's part stands on nothing yet (it
    /// was there before the watch began and has not been walked).
    fn sums(&self) -> Option<Rollup> {
        let mut sum = self.residual;
        for m in self.members.values() {
            let p = m.tree_part()?;
            sum.pss += p.pss;
            sum.uss += p.uss;
            sum.swap_pss += p.swap_pss;
        }
        Some(sum)
    }

    /// How old the oldest walk the sums stand on is, seconds.
    fn sums_age_s(&self, now_ns: u64) -> f64 {
        self.members
            .values()
            .filter_map(|m| m.anchor.map(|a| a.at_ns))
            .min()
            .map_or(f64::NAN, |t| now_ns.saturating_sub(t) as f64 / 1e9)
    }
}

/// Most CPU time a bucket of the rollup budget holds: about four walks of
/// a 1.5 GiB process.
const BANK_NS: f64 = 100e6;

/// Share of the rollup budget kept for the round (processes in pid order),
/// whatever moves: at least this share goes to completing rounds.
pub const ROUND_SHARE: f64 = 0.4;

/// A process's fault counts are taken for copies once a walk shows its own
/// memory (USS, less new anonymous pages) rose by at least this share of
/// what they counted since its previous walk.
pub const CONFIRM_SHARE: f64 = 0.5;

/// Copies (by the fast estimate) since a process's last walk that make it a
/// mover: its page tables are walked before the round's.
const MOVED_BYTES: u64 = 256 << 10;

/// Per-process channels kept free, in processes, for processes that start
/// copying after the sample has filled with flat ones.
const MOVER_ROOM: usize = 4;

/// Which of a member's files [`TreeProbe::held`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Held {
    Stat,
    Statm,
}

/// Files held open at most: two per member for 256 members, well inside
/// the usual limit of 1,024 open files; a bigger tree's others are opened
/// by path at each reading, as before.
const HELD_FILES: usize = 512;

/// Reads `f` from its start into `buf` (`pread`: a `/proc` file renders
/// afresh when read from offset 0). One read of a page holds any `stat` or
/// `statm`; a short read is the end.
fn read_from_start(f: &std::fs::File, buf: &mut String) -> bool {
    use std::os::unix::fs::FileExt;
    let mut bytes = std::mem::take(buf).into_bytes();
    bytes.clear();
    let mut off = 0;
    loop {
        let at = bytes.len();
        bytes.resize(at + 4096, 0);
        match f.read_at(&mut bytes[at..], off) {
            Ok(n) => {
                bytes.truncate(at + n);
                off += n as u64;
                if n < 4096 {
                    break;
                }
            }
            Err(_) => {
                bytes.clear();
                *buf = String::from_utf8(bytes).unwrap_or_default();
                return false;
            }
        }
    }
    match String::from_utf8(bytes) {
        Ok(s) => {
            *buf = s;
            true
        }
        Err(_) => false,
    }
}

/// A mover is walked again at most this often (stream clock).
const MOVER_EVERY_NS: u64 = 1_000_000_000;

/// Walks owed to a process after it stopped moving, this far apart: six
/// readings over 15 s, so that a level that rose and then held is seen
/// holding (the analysis needs five readings in a run's tail to say that
/// growth stopped) rather than left at its last rising reading until the
/// round-robin comes back, minutes later in a big tree.
const SETTLE_WALKS: u8 = 6;
const SETTLE_EVERY_NS: u64 = 3_000_000_000;

/// CPU the rollup reads may use up front (the first round of a big tree).
const ROLLUP_CREDIT_NS: f64 = 100e6;

/// Share of one core the rollup reads may use, on average, by default.
pub const ROLLUP_BUDGET: f64 = 0.01;

/// The tree's channels, in `read`'s order.
const TREE_CHANNELS: [&str; 9] = [
    "tree.rss",
    "tree.pss",
    "tree.uss",
    "tree.swap",
    "tree.procs",
    "tree.skipped",
    "tree.brief",
    "tree.cow",
    "tree.age",
];

/// The per-process channels' leaves, in position order (declared in
/// `catalog.rs` as `pid#.rss`, …): `cow` is the fast copy-on-write
/// estimate ([`copied_bytes`]), a counter of bytes since the process was
/// first seen.
pub const PROCESS_CHANNELS: [&str; 4] = ["rss", "pss", "uss", "cow"];

impl Probe for TreeProbe {
    fn name(&self) -> &'static str {
        "tree"
    }

    fn channels(&self) -> Vec<ChannelSpec> {
        TREE_CHANNELS.iter().map(|&n| catalog::spec(n)).collect()
    }

    fn read(&mut self, out: &mut [f64]) -> Result<(), ProbeError> {
        let scanned = self.scan();
        if let Some(shared) = &self.shared {
            let mut pids = shared
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            pids.clear();
            pids.extend(self.members.keys().copied());
            if !pids.contains(&self.root) && scanned.is_ok() {
                pids.push(self.root);
            }
        }
        scanned?;
        // A member listed but whose `statm` no longer reads (world-readable:
        // it exited, or is a zombie reading all zeros) is leaving: a sum
        // without it would be a drop that is no reading. The sums wait for
        // the next listing, which tells its exit.
        let leaving = self.members.values().any(|m| m.rss.is_none());
        let rss: Vec<f64> = self.members.values().filter_map(|m| m.rss).collect();
        out[0] = if rss.is_empty() || leaving {
            f64::NAN
        } else {
            rss.iter().sum::<f64>()
        };
        out[4] = self.members.len() as f64;
        out[5] = self.skipped as f64;
        out[6] = self.brief as f64;
        out[7] = (self.cow_gone + self.members.values().map(|m| m.cow).sum::<u64>()) as f64;
        // The sums, at every reading: each process's part carried forward
        // from the walk it stands on (re-based at each whole round).
        self.close_round();
        out[1..4].fill(f64::NAN);
        out[8] = f64::NAN;
        if !leaving
            && !self.members.is_empty()
            && let Some(sum) = self.sums()
        {
            out[1] = sum.pss;
            out[2] = sum.uss;
            out[3] = sum.swap_pss;
            out[8] = self.sums_age_s(self.clock.now_ns());
        }
        self.read_classes();
        Ok(())
    }

    fn grows(&self) -> bool {
        self.per_process
    }

    fn dynamic(&mut self, ch: &mut DynamicChannels<'_>) {
        let found = std::mem::take(&mut self.found);
        let ended: Vec<usize> = found
            .exited
            .iter()
            .filter_map(|m| m.channels)
            .flat_map(|p| p..p + PROCESS_CHANNELS.len())
            .collect();
        ch.end(&ended);
        // Channels at its start for a process while room for later movers
        // stays; one that is flat then waits, in the sums, until it moves.
        let per = PROCESS_CHANNELS.len();
        for pid in found.started {
            let Some(m) = self.members.get_mut(&pid) else {
                continue;
            };
            if pid == self.root || m.cow >= MOVED_BYTES || ch.room() >= per * (MOVER_ROOM + 1) {
                self.give_channels(pid, ch);
            } else {
                m.waiting = true;
                if !self.told_waiting {
                    self.told_waiting = true;
                    let why = format!(
                        "process {pid} and later flat ones get channels of their own only once their \
                         pages are being copied: room is kept for them (all are in tree.*)"
                    );
                    self.emit_at(self.clock.now_ns(), EventKind::Note(why));
                }
            }
        }
        // Waiting processes that began to copy, most first: channels now,
        // from a flat process's if need be.
        let mut movers: Vec<(u64, u32)> = self
            .members
            .iter()
            .filter(|(_, m)| m.waiting && m.cow >= MOVED_BYTES)
            .map(|(&pid, m)| (m.cow, pid))
            .collect();
        movers.sort_unstable_by(|a, b| b.cmp(a));
        for (_, pid) in movers {
            if ch.room() < per {
                let flattest = self
                    .members
                    .iter()
                    .filter(|&(&v, m)| {
                        v != self.root && m.channels.is_some() && m.cow < MOVED_BYTES
                    })
                    .min_by_key(|&(&v, m)| (m.cow, v))
                    .map(|(&v, _)| v);
                if let Some(v) = flattest
                    && let Some(p) = self.members.get_mut(&v).and_then(|m| m.channels.take())
                {
                    ch.end(&(p..p + per).collect::<Vec<_>>());
                    let why = format!(
                        "process {v}'s channels end (it is flat; it stays in tree.*) to make room \
                         for process {pid}, whose pages are being copied"
                    );
                    self.emit_at(self.clock.now_ns(), EventKind::Note(why));
                }
            }
            if self.give_channels(pid, ch)
                && let Some(m) = self.members.get_mut(&pid)
            {
                m.waiting = false;
            }
        }
        for m in self.members.values() {
            let Some(p) = m.channels else { continue };
            if let Some(rss) = m.rss {
                ch.set(p, rss);
                ch.set(p + 3, m.cow as f64);
            }
            if let Some(r) = m.estimate() {
                ch.set(p + 1, r.pss);
                ch.set(p + 2, r.uss);
            }
        }
    }
}

/// The tree's pids from `root` down, parents before children (so that a
/// child's role can read its parent's), siblings by pid.
fn parents_first(root: u32, all: &HashMap<u32, StatLine>) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (&pid, st) in all {
        children.entry(st.ppid).or_default().push(pid);
    }
    let mut order = vec![root];
    let mut i = 0;
    while i < order.len() {
        if let Some(c) = children.get(&order[i]) {
            let mut c = c.clone();
            c.sort_unstable();
            order.extend(c);
        }
        i += 1;
    }
    order
}

#[cfg(test)]
#[path = "tree_tests.rs"]
mod tests;
