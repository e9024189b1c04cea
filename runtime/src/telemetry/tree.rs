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
//! The probe runs on the slow-probe thread (reading `smaps_rollup` walks the
//! page tables: milliseconds on a multi-GB process). Each reading lists
//! every process's parent from `/proc/*/stat`, so a child is found within
//! one period (0.5 s at the default 2 Hz) of its start and counts in
//! `tree.*` from then on. Its start is told (a `process_started` event, its
//! `pid<N>.*` channels) at its second sighting, so that a wrapper that execs
//! what it wraps (a shell shim that becomes `python3`) is named and given a
//! role as what it became. A process that
//! cannot be read (another user's, or gone between listing and reading) is
//! skipped and counted in `tree.skipped`, never fatal.
//!
//! Roles: `main` is the watched process (and, when that is a launcher such as
//! a shell, `env` or `timeout`, its direct children); `rank` is a child of a
//! `torchrun` / `torch.distributed` agent; `worker` is a process started from
//! the same executable as its parent (DataLoader workers, multiprocessing
//! pools); `other` is everything else (a shell, a compiler, `nvidia-smi`).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crossbeam_channel::Sender;

use super::{ChannelSpec, Clock, DynamicChannels, Group, Kind, Probe, ProbeError, Unit};
use flatline_format::{Event, EventKind};

/// Fields of `/proc/<pid>/stat` the tree needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatLine {
    pub comm: String,
    pub state: u8,
    pub ppid: u32,
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
    // state(3) ppid(4) … starttime(22)
    let state = *f.next()?.as_bytes().first()?;
    let ppid = f.next()?.parse().ok()?;
    let start = f.nth(17)?.parse().ok()?;
    Some(StatLine {
        comm,
        state,
        ppid,
        start,
    })
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
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let kb = || -> f64 {
            rest.split_ascii_whitespace()
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .map_or(0.0, |k| k as f64 * 1024.0)
        };
        match key {
            "Rss" => r.rss = kb(),
            "Pss" => {
                r.pss = kb();
                has_pss = true;
            }
            "Private_Clean" | "Private_Dirty" => r.uss += kb(),
            "SwapPss" => r.swap_pss = kb(),
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
    mem: Option<Rollup>,
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
    per_process: bool,
    found: Found,
    events: Option<Sender<Event>>,
    clock: Clock,
    buf: String,
}

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
            per_process,
            found: Found::default(),
            events,
            clock,
            buf: String::new(),
        }
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
            if self.read_to_buf(pid, "stat")
                && let Some(st) = parse_stat_line(&self.buf)
                && !matches!(st.state, b'Z' | b'X' | b'x')
            {
                all.insert(pid, st);
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

    /// Lists the tree, notes who joined and left, and reads everyone's memory.
    fn scan(&mut self) -> Result<(), ProbeError> {
        let all = self.list();
        if !all.contains_key(&self.root) {
            return Err(ProbeError::Gone { pid: self.root });
        }
        let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
        for (&pid, st) in &all {
            children.entry(st.ppid).or_default().push(pid);
        }
        // Parents before children, so a child's role can read its parent's.
        let mut order = vec![self.root];
        let mut i = 0;
        while i < order.len() {
            if let Some(c) = children.get(&order[i]) {
                let mut c = c.clone();
                c.sort_unstable();
                order.extend(c);
            }
            i += 1;
        }
        let live: HashSet<u32> = order.iter().copied().collect();
        let gone: Vec<u32> = self
            .members
            .iter()
            .filter(|(pid, m)| {
                !live.contains(pid) || all.get(pid).is_some_and(|s| s.start != m.start)
            })
            .map(|(&pid, _)| pid)
            .collect();
        for pid in gone {
            if let Some(m) = self.members.remove(&pid)
                && m.announced
            {
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
                            mem: None,
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
            let mem = if self.read_to_buf(pid, "smaps_rollup") {
                parse_rollup(&self.buf)
            } else {
                None
            };
            if mem.is_none() {
                self.skipped += 1;
            }
            if let Some(m) = self.members.get_mut(&pid) {
                m.mem = mem;
            }
        }
        Ok(())
    }
}

/// The tree's channels, in `read`'s order.
const TREE_CHANNELS: [(&str, Unit, Kind); 6] = [
    ("tree.rss", Unit::Bytes, Kind::Level),
    ("tree.pss", Unit::Bytes, Kind::Level),
    ("tree.uss", Unit::Bytes, Kind::Level),
    ("tree.swap", Unit::Bytes, Kind::Level),
    ("tree.procs", Unit::Count, Kind::Gauge),
    ("tree.skipped", Unit::Count, Kind::Counter),
];

/// The per-process channels' leaves, in position order.
pub const PROCESS_CHANNELS: [&str; 3] = ["rss", "pss", "uss"];

impl Probe for TreeProbe {
    fn name(&self) -> &'static str {
        "tree"
    }

    fn channels(&self) -> Vec<ChannelSpec> {
        TREE_CHANNELS
            .iter()
            .map(|&(n, u, k)| ChannelSpec::new(n, u, Group::Memory).with_kind(k))
            .collect()
    }

    fn read(&mut self, out: &mut [f64]) -> Result<(), ProbeError> {
        self.scan()?;
        let mut sum = Rollup::default();
        let mut read = 0;
        for m in self.members.values() {
            if let Some(r) = m.mem {
                sum.rss += r.rss;
                sum.pss += r.pss;
                sum.uss += r.uss;
                sum.swap_pss += r.swap_pss;
                read += 1;
            }
        }
        let values = [
            sum.rss,
            sum.pss,
            sum.uss,
            sum.swap_pss,
            self.members.len() as f64,
            self.skipped as f64,
        ];
        if read == 0 {
            out[..4].fill(f64::NAN);
            out[4..].copy_from_slice(&values[4..]);
        } else {
            out.copy_from_slice(&values);
        }
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
        for pid in found.started {
            let Some(m) = self.members.get_mut(&pid) else {
                continue;
            };
            // A reused pid gets a name of its own: pid123, then pid123-2, …
            let base = format!("pid{pid}");
            let stem = (1..)
                .map(|k| {
                    if k == 1 {
                        base.clone()
                    } else {
                        format!("{base}-{k}")
                    }
                })
                .find(|s| !ch.is_taken(&format!("{s}.rss")))
                .unwrap_or(base);
            let specs = PROCESS_CHANNELS
                .iter()
                .map(|leaf| {
                    ChannelSpec::new(format!("{stem}.{leaf}"), Unit::Bytes, Group::Memory)
                        .with_kind(Kind::Level)
                        .with_label("pid", pid.to_string())
                        .with_label("ppid", m.ppid.to_string())
                        .with_label("name", m.name.clone())
                        .with_label("role", m.role)
                })
                .collect();
            m.channels = ch.add(specs);
        }
        for m in self.members.values() {
            if let (Some(p), Some(r)) = (m.channels, m.mem) {
                ch.set(p, r.rss);
                ch.set(p + 1, r.pss);
                ch.set(p + 2, r.uss);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_names_parse() {
        let s = "4242 (python3 (w) x) S 4000 4242 4000 0 -1 4194304 10 0 0 0 1 2 0 0 20 0 3 0 987654 100 200";
        let st = parse_stat_line(s).unwrap();
        assert_eq!(st.comm, "python3 (w) x");
        assert_eq!((st.state, st.ppid, st.start), (b'S', 4000, 987654));
        assert_eq!(parse_stat_line("12 (cut) S 1"), None);
    }

    #[test]
    fn rollups_give_pss_and_uss() {
        let text = "00400000-7ff [rollup]\nRss:  1752 kB\nPss:  770 kB\nShared_Clean: 1568 kB\n\
                    Private_Clean:  68 kB\nPrivate_Dirty:  116 kB\nSwapPss:  4 kB\n";
        let r = parse_rollup(text).unwrap();
        assert_eq!(r.rss, 1752.0 * 1024.0);
        assert_eq!(r.pss, 770.0 * 1024.0);
        assert_eq!(r.uss, 184.0 * 1024.0);
        assert_eq!(r.swap_pss, 4.0 * 1024.0);
        assert_eq!(parse_rollup(""), None, "an exited process has no rollup");
    }

    #[test]
    fn torchrun_agents_are_recognised() {
        assert!(is_agent(
            "/usr/bin/python3\0/venv/bin/torchrun\0--nproc-per-node=2\0train.py\0"
        ));
        assert!(is_agent("python\0-m\0torch.distributed.run\0train.py"));
        assert!(!is_agent("python\0train.py\0--torchrun-like"));
    }
}
