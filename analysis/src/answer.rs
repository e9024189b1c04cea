//! The answer, typed: each growth (the channels that are one process's
//! memory growing, grouped), who holds it, in what kind of memory, which
//! code allocated it and what to try; and the sentence every surface starts
//! with when something grows. [`super::summary::Answer`] holds it, made from the
//! growing channels, the process tree and the allocation sites; receipts,
//! the window, the exporter and the notebook only lay it out.

use serde::Serialize;

use super::finding::{Assessed, rate_text};
use super::rules::LimitSource;
use super::sites::{PROGRAM_SHARE, Site};
use super::tree::{ProcessSeen, TreeSummary};
use super::{Severity, Verdict};
use flatline_format::Unit;

/// Who holds a growth: one process of the watched tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Who {
    pub pid: u32,
    /// Its command's name (`python`).
    pub name: String,
    /// `main`, `worker`, … (see [`super::tree`]).
    pub role: String,
    /// The job's rank, where its labels say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<String>,
}

impl Who {
    /// `python 7830 (main)`, `python 7831 (worker, rank 2)`.
    pub fn words(&self) -> String {
        match &self.rank {
            Some(r) => format!("{} {} ({}, rank {r})", self.name, self.pid, self.role),
            None => format!("{} {} ({})", self.name, self.pid, self.role),
        }
    }
}

/// What kind of memory grew: the class of mappings that took most of a
/// process's growth (see [`super::places::Where`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryKind {
    /// `heap`, `anon`, `file`, `shmem`, `stack`, `gpu` or `other`.
    pub class: String,
    /// Its share of the growth, 0 to 1.
    pub share: f64,
    /// Seconds since the start over which the process's mappings were
    /// compared.
    pub from_s: f64,
    pub to_s: f64,
    /// What it is, in a person's words, with its figures ("99 % of its
    /// growth (59.0 MiB) in the heap (brk): …").
    pub detail: String,
}

impl MemoryKind {
    /// "in the heap", as the sentence says it.
    pub fn phrase(&self) -> &'static str {
        match self.class.as_str() {
            "heap" => "in the heap",
            "anon" => "in anonymous memory",
            "file" => {
                "in the page cache of files it maps, which the kernel takes back under pressure"
            }
            "shmem" => "in shared memory (segments mapped and kept)",
            "stack" => "in its main thread's stack",
            "gpu" => "in GPU driver mappings",
            _ => "in other mappings",
        }
    }

    /// Memory a fix of a leak does not shrink: page cache, shared memory.
    pub fn is_not_the_program(&self) -> bool {
        self.share >= 0.5 && matches!(self.class.as_str(), "file" | "shmem")
    }
}

/// An allocation site that holds part of a growth.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SiteShare {
    /// Its channel (`site20.live`).
    pub channel: String,
    /// `sites_job.py:52`, or the function where no file is known.
    pub at: String,
    /// Its file (as the stack says it) and line, where known.
    pub file: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    pub function: String,
    /// The line's source, where it was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// "3.14", "3.13t": a native site in a Python whose frames could not
    /// be read: the line is not known, and the sentence says so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub python_unread: Option<String>,
    /// Its sampled live bytes' growth, bytes a second, and what it held at
    /// the end of the part analysed.
    pub growth_per_s: f64,
    pub live_bytes: f64,
    /// Its growth as a share of the growth it is part of (0 to 1, at most 1).
    pub share: f64,
}

impl SiteShare {
    /// `sites_job.py:52 `history.append(…)``, as the sentence names it.
    pub fn words(&self) -> String {
        match &self.code {
            Some(c) => format!("{} `{c}`", self.at),
            None if self.at == self.function => self.at.clone(),
            None => format!("{} ({})", self.at, self.function),
        }
    }
}

/// One growth: the channels that are the same memory growing, and what is
/// known of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Growth {
    /// The channel its figures are of: its most urgent.
    pub channel: String,
    /// Every growing channel that is this growth, most urgent first
    /// (`tree.rss`, `pid7830.rss`, `pid7830.pss`, `mem.rss`, …).
    pub channels: Vec<String>,
    pub unit: Unit,
    pub verdict: Verdict,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    /// Its rate over a day's projection, per second.
    pub rate_per_s: f64,
    /// A staircase's step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_to_limit_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<LimitSource>,
    #[serde(rename = "process", skip_serializing_if = "Option::is_none")]
    pub who: Option<Who>,
    #[serde(rename = "where", skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryKind>,
    /// The growing sites of its process, largest first.
    pub sites: Vec<SiteShare>,
    /// Whether the recording sampled allocation sites at all
    /// (`watch --sites`).
    pub sites_sampled: bool,
    /// Why sites asked for were not sampled (a running process), where
    /// they were refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sites_refused: Option<String>,
    /// What to try, where something can be said.
    #[serde(rename = "try", skip_serializing_if = "Option::is_none")]
    pub advice: Option<String>,
    /// A tree's sum that grows in several of its processes together (two
    /// DataLoader workers that each keep what they load): those processes,
    /// most urgent first; their own channels are part of this growth.
    #[serde(rename = "processes", skip_serializing_if = "Vec::is_empty")]
    pub among: Vec<Who>,
    /// How much its channel rose over the part analysed, and over how
    /// many seconds.
    pub drift: f64,
    pub over_s: f64,
    /// What its process holds by the allocation-site library's exact
    /// count (`pid<N>.alloc_live`, with `watch --sites`), beside it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program: Option<Program>,
}

/// The bytes a process's program holds (allocated and not freed, counted
/// by the allocation-site library), beside a growth of its memory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Program {
    /// `pid<N>.alloc_live`.
    pub channel: String,
    /// How much it moved over the part analysed, and what it held at its
    /// end.
    pub drift: f64,
    pub level: f64,
    /// Its rise as a share of the growth's (0 where it did not rise).
    pub share: f64,
}

impl Growth {
    /// The program's own bytes do not grow with its memory: what grows is
    /// what the allocator keeps of memory that was freed.
    pub fn allocator_keeps(&self) -> bool {
        self.program
            .as_ref()
            .is_some_and(|p| p.share < PROGRAM_SHARE)
    }
}

/// Sets beside each growth of one process what its program holds, where
/// the allocation-site library counted it (`rows`: every channel).
pub fn with_program(growths: &mut [Growth], rows: &[Assessed<'_>]) {
    for g in growths.iter_mut() {
        let Some(w) = g.who.as_ref().filter(|_| g.among.is_empty()) else {
            continue;
        };
        // Growth in a file's page cache or in shared memory is not the
        // allocator's, whatever malloc holds.
        let not_malloc = g
            .memory
            .as_ref()
            .is_some_and(MemoryKind::is_not_the_program);
        if is_gpu(&g.channel) || !g.unit.is_bytes() || g.drift <= 0.0 || not_malloc {
            continue;
        }
        let name = format!("pid{}.alloc_live", w.pid);
        let Some(r) = rows.iter().find(|r| r.name == name) else {
            continue;
        };
        let a = r.analysis;
        if a.verdict == Verdict::Insufficient || !a.drift.is_finite() {
            continue;
        }
        g.program = Some(Program {
            channel: name,
            drift: a.drift,
            level: a.final_value,
            share: (a.drift.max(0.0) / g.drift).min(1.0),
        });
        if g.allocator_keeps() {
            g.advice = advice(g);
        }
    }
}

impl Growth {
    /// Who grows, as a sentence names it: its process, the processes it
    /// is in together, else its channel.
    pub fn subject(&self) -> String {
        match (&self.who, self.among.as_slice()) {
            (Some(w), _) if is_gpu(&self.channel) => format!("{}'s GPU memory", w.words()),
            (Some(w), _) => w.words(),
            (None, []) => self.channel.clone(),
            (None, among) => together(among),
        }
    }
}

/// A channel of GPU memory: a device's (`gpu0.used`, `gpu0.proc_used`,
/// `gpu.other`) or a process's on its devices (`pid42.vram`).
fn is_gpu(channel: &str) -> bool {
    channel.starts_with("gpu") || channel.ends_with(".vram")
}

/// A sum over the watched tree: `tree.*`, and the cgroup's use it runs in
/// (`cgroup.current`, `cgroup.peak`).
fn is_sum(channel: &str) -> bool {
    channel.starts_with("tree.") || matches!(channel, "cgroup.current" | "cgroup.peak")
}

/// The process a channel is of: `pid<N>.*`'s, the watched process's for
/// `mem.*`, and for the tree's sums (`tree.*`) the one process that grew
/// (else the one whose mappings grew most, else the only one).
pub fn process_of<'t>(tree: &'t TreeSummary, channel: &str) -> Option<&'t ProcessSeen> {
    let procs = &tree.processes;
    if let Some(pid) = channel
        .strip_prefix("pid")
        .and_then(|r| r.split('.').next())
        .and_then(|n| n.parse::<u32>().ok())
    {
        return procs.iter().find(|p| p.pid == pid);
    }
    if channel.starts_with("mem.") {
        return procs.iter().find(|p| {
            p.role == "main" && p.ppid.is_none_or(|pp| !procs.iter().any(|q| q.pid == pp))
        });
    }
    if is_sum(channel) {
        let grew: Vec<&ProcessSeen> = procs
            .iter()
            .filter(|p| tree.grew.contains(&p.pid))
            .collect();
        match grew.as_slice() {
            [one] => return Some(one),
            // Several grew: the sum is theirs together, no one's alone
            // (see [`Growth::among`]).
            [_, _, ..] => return None,
            [] => {}
        }
        let moved = |p: &ProcessSeen| -> f64 {
            p.where_
                .as_ref()
                .map_or(0.0, |w| w.classes.values().filter(|v| **v > 0.0).sum())
        };
        let most = procs
            .iter()
            .filter(|p| p.where_.is_some())
            .max_by(|a, b| moved(a).total_cmp(&moved(b)));
        return most.or(match procs.as_slice() {
            [one] => Some(one),
            _ => None,
        });
    }
    None
}

/// The growths among `growing` (most urgent first, as
/// [`super::summary::growing`] orders them), each with who holds it, its
/// kind of memory and its sites. `sites_sampled`: whether the recording has
/// allocation-site channels at all.
pub fn growths(
    growing: &[Assessed<'_>],
    tree: Option<&TreeSummary>,
    sites: &[Site],
    sites_sampled: bool,
    rank: Option<&str>,
) -> Vec<Growth> {
    // Channels join the growth of the process they are of; the watched
    // process's `mem.*` without a tree are one growth; the rest stand alone.
    // GPU memory (a GPU's `gpu0.used`, what the tree holds on it,
    // `gpu0.proc_used`, a process's `pid42.vram`) is a growth apart from
    // host memory: its own limit, and neither the host's mappings nor
    // malloc's sites say what it is.
    let key = |name: &str| -> String {
        let place = if is_gpu(name) { "gpu " } else { "" };
        match tree.and_then(|t| process_of(t, name)) {
            Some(p) => format!("{place}pid {}", p.pid),
            None if is_gpu(name) => "gpu".into(),
            None if name.starts_with("mem.") => "mem".into(),
            None => name.into(),
        }
    };
    let mut out: Vec<(String, Growth)> = Vec::new();
    for g in growing {
        let k = key(g.name);
        if let Some((_, growth)) = out.iter_mut().find(|(o, _)| *o == k) {
            growth.channels.push(g.name.to_owned());
            continue;
        }
        let a = g.analysis;
        let process = tree.and_then(|t| process_of(t, g.name));
        let who = process.map(|p| Who {
            pid: p.pid,
            name: p.name.clone(),
            role: p.role.clone(),
            rank: rank.map(str::to_owned),
        });
        let gpu = is_gpu(g.name);
        let memory = process
            .filter(|_| !gpu)
            .and_then(|p| p.where_.as_ref())
            .map(|w| MemoryKind {
                class: w.largest.clone(),
                share: w.share,
                from_s: w.from_s,
                to_s: w.to_s,
                detail: w.text.clone(),
            });
        let slope = a.slope_per_s;
        let sites: Vec<SiteShare> = sites
            .iter()
            .filter(|s| s.growth_per_s > 0.0 && !gpu)
            .filter(|s| match (&who, s.pid) {
                (Some(w), Some(pid)) => w.pid == pid,
                _ => true,
            })
            .map(|s| SiteShare {
                channel: s.channel.clone(),
                at: site_at(s),
                file: s.file.clone(),
                line: s.line,
                function: s.function.clone(),
                code: s.code.clone(),
                python_unread: s.python_unread.clone(),
                growth_per_s: s.growth_per_s,
                live_bytes: s.live_bytes,
                share: if slope > 0.0 && g.unit.is_bytes() {
                    (s.growth_per_s / slope).min(1.0)
                } else {
                    0.0
                },
            })
            .collect();
        let mut growth = Growth {
            channel: g.name.to_owned(),
            channels: vec![g.name.to_owned()],
            unit: g.unit,
            verdict: a.verdict,
            severity: a.severity,
            rate_per_s: a.projection_24h.unwrap_or(0.0) / 86_400.0,
            step: (a.verdict == Verdict::Staircase)
                .then_some(a.quantum)
                .flatten(),
            time_to_limit_s: a.time_to_limit_s,
            limit: g.limit,
            who,
            memory,
            sites,
            sites_sampled,
            sites_refused: None,
            advice: None,
            among: Vec::new(),
            drift: a.drift,
            over_s: a.duration_s,
            program: None,
        };
        growth.advice = advice(&growth);
        out.push((k, growth));
    }
    // A GPU's own channels and the one process whose GPU memory grows are
    // the same growth, told as that process's.
    let procs_on_gpu: Vec<usize> = (0..out.len())
        .filter(|&j| out[j].0.starts_with("gpu pid "))
        .collect();
    if let ([p], Some(d)) = (
        procs_on_gpu.as_slice(),
        out.iter().position(|(k, _)| k == "gpu"),
    ) {
        let (p, d) = (*p, d);
        let (keep, take) = if d < p { (d, p) } else { (p, d) };
        let (_, taken) = out.remove(take);
        let who = if take == p {
            taken.who.clone()
        } else {
            out[keep].1.who.clone()
        };
        let g = &mut out[keep].1;
        g.channels.extend(taken.channels);
        g.who = who;
    }
    let mut out: Vec<Growth> = out.into_iter().map(|(_, g)| g).collect();
    if let Some(t) = tree {
        merge_shared(&mut out, t);
    }
    out
}

/// A tree's sum (`tree.*`) that no one process carries alone, where
/// several of its processes grow: they are one growth, the sum's, with
/// those processes named ([`Growth::among`]), their channels and sites
/// joined, a site's line counted once across them.
fn merge_shared(out: &mut Vec<Growth>, tree: &TreeSummary) {
    let shared = |g: &Growth| g.who.is_none() && is_sum(&g.channel);
    let Some(k) = out
        .iter()
        .position(|g| shared(g) && g.channel.starts_with("tree."))
        .or_else(|| out.iter().position(shared))
    else {
        return;
    };
    let parts = (0..out.len())
        .filter(|&j| {
            out[j]
                .who
                .as_ref()
                .is_some_and(|w| tree.grew.contains(&w.pid))
        })
        .count();
    if parts < 2 {
        return;
    }
    // Every sum that no one process carries (`tree.rss`, `tree.pss`,
    // `cgroup.current`) and every process that grew: one growth, the most
    // urgent sum's.
    let member =
        |g: &Growth| shared(g) || g.who.as_ref().is_some_and(|w| tree.grew.contains(&w.pid));
    // The merged growth stands where its most urgent member stood.
    let first = out.iter().position(member).unwrap_or(k);
    let mut lead = None;
    let mut taken: Vec<Growth> = Vec::new();
    let mut rest: Vec<Growth> = Vec::new();
    for (j, g) in std::mem::take(out).into_iter().enumerate() {
        if j == k {
            lead = Some(g);
        } else if member(&g) {
            taken.push(g);
        } else {
            rest.push(g);
        }
    }
    *out = rest;
    let Some(lead) = lead else {
        return;
    };
    out.insert(first.min(out.len()), lead);
    let k = first.min(out.len() - 1);
    let g = &mut out[k];
    let slope = g.rate_per_s;
    // A kind of memory all of them grew in.
    let procs: Vec<&Growth> = taken.iter().filter(|p| p.who.is_some()).collect();
    g.memory = memory_of_all(tree, procs.iter().filter_map(|p| p.who.as_ref()));
    // Their sites, one per line: two workers running the same code hold
    // it at the same line.
    let mut sites: Vec<SiteShare> = Vec::new();
    for site in procs.iter().flat_map(|p| p.sites.iter()) {
        match sites
            .iter_mut()
            .find(|s| s.at == site.at && s.function == site.function)
        {
            Some(s) => {
                s.growth_per_s += site.growth_per_s;
                s.live_bytes += site.live_bytes;
            }
            None => sites.push(site.clone()),
        }
    }
    for s in &mut sites {
        s.share = if slope > 0.0 && g.unit.is_bytes() {
            (s.growth_per_s / slope).min(1.0)
        } else {
            0.0
        };
    }
    sites.sort_by(|a, b| b.growth_per_s.total_cmp(&a.growth_per_s));
    g.sites = sites;
    for p in taken {
        g.channels.extend(p.channels);
        g.among.extend(p.who);
    }
    g.advice = advice(g);
}

/// A site as a sentence names it: `sites_job.py:52 `history.append(…)``.
pub fn site_words(s: &Site) -> String {
    let at = site_at(s);
    match &s.code {
        Some(c) => format!("{at} `{c}`"),
        None if at == s.function => at,
        None => format!("{at} ({})", s.function),
    }
}

/// The kind of memory several processes grew in together: their growth
/// by class summed (see [`super::places::Where`]), the largest class and
/// its share of it all.
fn memory_of_all<'w>(tree: &TreeSummary, who: impl Iterator<Item = &'w Who>) -> Option<MemoryKind> {
    let procs: Vec<(u32, &super::places::Where)> = who
        .filter_map(|w| tree.processes.iter().find(|p| p.pid == w.pid))
        .filter_map(|p| Some((p.pid, p.where_.as_ref()?)))
        .collect();
    let places: Vec<&super::places::Where> = procs.iter().map(|(_, w)| *w).collect();
    let mut classes: std::collections::BTreeMap<&str, f64> = Default::default();
    for w in &places {
        for (c, v) in &w.classes {
            *classes.entry(c.as_str()).or_default() += v.max(0.0);
        }
    }
    let total: f64 = classes.values().sum();
    let (class, most) = classes
        .iter()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .filter(|_| total > 0.0)?;
    Some(MemoryKind {
        class: (*class).to_owned(),
        share: most / total,
        from_s: places
            .iter()
            .map(|w| w.from_s)
            .fold(f64::INFINITY, f64::min),
        to_s: places
            .iter()
            .map(|w| w.to_s)
            .fold(f64::NEG_INFINITY, f64::max),
        detail: procs
            .iter()
            .map(|(pid, w)| format!("process {pid}: {}", w.text))
            .collect::<Vec<_>>()
            .join("; "),
    })
}

/// `sites_job.py:52`: the file's name and line, else the function.
fn site_at(s: &Site) -> String {
    let file = s.file.rsplit('/').next().unwrap_or_default();
    match (file.is_empty(), s.line) {
        (false, Some(l)) if l > 0 => format!("{file}:{l}"),
        (false, _) => file.to_owned(),
        (true, _) => s.function.clone(),
    }
}

/// What to try, by what is known of a growth.
fn advice(g: &Growth) -> Option<String> {
    if g.allocator_keeps() {
        return Some(ALLOCATOR_TRY.into());
    }
    if let Some(m) = g.memory.as_ref().filter(|m| m.is_not_the_program()) {
        return Some(match m.class.as_str() {
            "file" => "nothing to fix in the program: the page cache of a file it maps is given back when memory is short; count it only against a cgroup's limit".into(),
            _ => "unmap and unlink shared-memory segments once read (a DataLoader's workers pass batches through /dev/shm: fewer workers or a smaller prefetch_factor holds fewer)".into(),
        });
    }
    if let Some(s) = g.sites.first() {
        return Some(format!(
            "look at what {} keeps: a list, cache or history that gains an entry each step and is never cut",
            s.words()
        ));
    }
    if g.who.is_some() && !g.sites_sampled && g.unit.is_bytes() {
        return Some(
            "run the job under `flatline watch --sites` to see which line allocates what it keeps"
                .into(),
        );
    }
    None
}

/// What to try where the allocator keeps freed memory (the receipt's
/// `try:` line; the first sentence names the first three).
const ALLOCATOR_TRY: &str = "MALLOC_ARENA_MAX=2 (fewer glibc arenas), a lower \
MALLOC_TRIM_THRESHOLD_ or MALLOC_MMAP_THRESHOLD_ (freed memory given back sooner), or \
jemalloc or mimalloc by LD_PRELOAD; in Python, fewer long-lived small objects among \
short-lived ones (pymalloc frees an arena only when all of it is free)";

/// The sentence a growth the allocator keeps is told in: what the program
/// holds is flat, its memory grew anyway. "What python3 28236 (main) holds
/// is flat (10.4 MiB allocated and not freed, +222.0 KiB over the run), but
/// its RSS grew 3.09 MiB in 47.0 s: the allocator keeps memory that was
/// freed (glibc's arenas and fragmentation, CPython's pymalloc arenas); try
/// MALLOC_ARENA_MAX=2, a lower MALLOC_TRIM_THRESHOLD_, or jemalloc."
fn allocator_sentence(
    g: &Growth,
    p: &Program,
    value: &dyn Fn(f64, Unit) -> String,
    duration: &dyn Fn(f64) -> String,
) -> String {
    let who = g.subject();
    let moved = if p.drift.abs() < 0.5 {
        "unchanged".to_owned()
    } else {
        let sign = if p.drift > 0.0 { "+" } else { "-" };
        format!("{sign}{}", value(p.drift.abs(), g.unit))
    };
    // One process's growth: its own memory, whichever sum carries it.
    let leaf = g.channel.rsplit('.').next().unwrap_or_default();
    format!(
        "What {who} holds is flat ({} allocated and not freed, {moved} over the run), but its \
         {} grew {} in {}: the allocator keeps memory that was freed (glibc's arenas and \
         fragmentation, CPython's pymalloc arenas); try MALLOC_ARENA_MAX=2, a lower \
         MALLOC_TRIM_THRESHOLD_, or jemalloc.",
        value(p.level, g.unit),
        leaf.to_uppercase(),
        value(g.drift, g.unit),
        duration(g.over_s)
    )
}

/// The sentence a growth is told in: "python 7830 (main) grows 1.65 MiB/s
/// (the host's RAM in 3.9 h): 99 % of it in the heap, 80 % allocated at
/// sites_job.py:52 `history.append(out.detach().clone())`."
pub fn sentence(
    g: &Growth,
    value: &dyn Fn(f64, Unit) -> String,
    duration: &dyn Fn(f64) -> String,
) -> String {
    if let Some(p) = g.program.as_ref().filter(|_| g.allocator_keeps()) {
        return allocator_sentence(g, p, value, duration);
    }
    let subject = g.subject();
    let how = match (g.verdict, g.step) {
        (Verdict::Staircase, Some(q)) => format!(" in steps of {}", value(q, g.unit)),
        (Verdict::Staircase, None) => " in steps".into(),
        _ => String::new(),
    };
    let limit = match (g.time_to_limit_s, g.limit) {
        (Some(t), Some(src)) => format!("{} in {}", limit_name(src), duration(t)),
        (Some(t), None) => format!("its limit in {}", duration(t)),
        (None, _) => "no limit known".into(),
    };
    let grows = if g.among.is_empty() {
        "grows"
    } else {
        "grow together"
    };
    let mut s = format!(
        "{subject} {grows} {}{how} ({limit})",
        rate_text(g.rate_per_s, g.unit, value)
    );
    let mut parts = Vec::new();
    if let Some(m) = &g.memory {
        parts.push(format!("{} of it {}", pct(m.share), m.phrase()));
    }
    let mut unread = None;
    if let Some(site) = g.sites.first().filter(|s| s.share > 0.0) {
        match &site.python_unread {
            // The line cannot be known: said where the line would be,
            // never a native frame passed off as it.
            Some(v) => unread = Some((v.clone(), site)),
            None => {
                let of = if parts.is_empty() { " of it" } else { "" };
                parts.push(format!(
                    "{}{of} allocated at {}",
                    pct(site.share),
                    site.words()
                ));
            }
        }
    }
    if !parts.is_empty() {
        s.push_str(": ");
        s.push_str(&parts.join(", "));
    }
    if let Some((v, site)) = unread {
        s.push_str(&format!(
            "{}Python {v}'s frames cannot be read, so the line is not known; the native site is {} ({} of it)",
            if parts.is_empty() { ": " } else { "; " },
            site.words(),
            pct(site.share)
        ));
    }
    s.push('.');
    if g.who.is_some()
        && !g.sites_sampled
        && g.unit.is_bytes()
        && !g
            .memory
            .as_ref()
            .is_some_and(MemoryKind::is_not_the_program)
    {
        // What the heap holds more of may be the program's, or what the
        // allocator keeps of memory freed: only the library's count tells.
        let malloc = g
            .memory
            .as_ref()
            .is_some_and(|m| m.share >= 0.5 && matches!(m.class.as_str(), "heap" | "anon"));
        if let Some(why) = &g.sites_refused {
            s.push_str(&format!(
                " Allocation sites were asked for but not sampled: {why}; start the job under `flatline watch --sites -- CMD` to name the line."
            ));
            return s;
        }
        s.push_str(if malloc {
            " `watch --sites` would name the line that allocates it, or show that the allocator keeps it."
        } else {
            " `watch --sites` would name the line that allocates it."
        });
    }
    s
}

/// "2 workers (pt_data_worker 7831 and 7832)", "3 processes (python 7830
/// (main), …)": the processes a shared growth is in.
fn together(among: &[Who]) -> String {
    let role = &among[0].role;
    let same = among
        .iter()
        .all(|w| &w.role == role && w.name == among[0].name);
    let shown = 4;
    let mut names: Vec<String> = among
        .iter()
        .take(shown)
        .map(|w| if same { w.pid.to_string() } else { w.words() })
        .collect();
    if among.len() > shown {
        names.push(format!("{} more", among.len() - shown));
    }
    let list = match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => names.join(""),
    };
    if same {
        format!("{} {}s ({} {list})", among.len(), role, among[0].name)
    } else {
        format!("{} processes ({list})", among.len())
    }
}

/// A share as the sentence says it: "99 %", never over 100.
fn pct(share: f64) -> String {
    format!("{:.0} %", (share * 100.0).clamp(0.0, 100.0))
}

/// What bounds a growth, short: "the host's RAM".
fn limit_name(src: LimitSource) -> &'static str {
    match src {
        LimitSource::Shared => "its RSS",
        other => other.describe(),
    }
}

/// "Also growing: python 7831 (worker), gpu.used." for the growths after
/// the first, at most three named. A process whose own bytes are flat
/// while its allocator keeps what it freed is not among them: its program
/// does not grow (the receipt's body says what its allocator keeps).
pub fn also_growing(rest: &[Growth]) -> Option<String> {
    let rest: Vec<&Growth> = rest.iter().filter(|g| !g.allocator_keeps()).collect();
    if rest.is_empty() {
        return None;
    }
    let named: Vec<String> = rest.iter().take(3).map(|g| g.subject()).collect();
    let more = rest.len() - named.len();
    Some(format!(
        "Also growing: {}{}.",
        named.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::{Known, assess};
    use crate::tree::{ProcessSeen, TreeSummary};
    use crate::{ChannelAnalysis, Context, analyze};

    fn value(v: f64, u: Unit) -> String {
        match u {
            Unit::Bytes => format!("{:.2} MiB", v / 1_048_576.0),
            _ => format!("{v}"),
        }
    }

    fn duration(s: f64) -> String {
        format!("{:.1} h", s / 3600.0)
    }

    fn growing_at(mib_per_s: f64) -> ChannelAnalysis {
        let t: Vec<f64> = (0..600).map(f64::from).collect();
        let x: Vec<f64> = t
            .iter()
            .map(|t| 7e8 + mib_per_s * 1_048_576.0 * t)
            .collect();
        analyze(
            &t,
            &x,
            &Context {
                limit: Some(25e9),
                min_growth: 65536.0,
                ..Context::default()
            },
        )
    }

    fn process(pid: u32, role: &str, ppid: Option<u32>) -> ProcessSeen {
        ProcessSeen {
            pid,
            name: "python".into(),
            role: role.into(),
            ppid,
            started_s: Some(0.0),
            exited_s: None,
            channels: Some(format!("pid{pid}")),
            pss_verdict: None,
            pss_growth: None,
            where_: None,
        }
    }

    /// Where a process grew: all of 500 MB in `class`.
    fn place(class: &str) -> crate::places::Where {
        crate::places::Where {
            classes: [(class.to_owned(), 5e8)].into_iter().collect(),
            largest: class.into(),
            share: 1.0,
            from_s: 0.0,
            to_s: 600.0,
            regions: 0.0,
            region_size: None,
            of_size: 0.0,
            arenas: 0.0,
            arenas_held: 0.0,
            in_arenas: 0.0,
            segments: Default::default(),
            new_segments: 0.0,
            text: String::new(),
        }
    }

    fn tree(processes: Vec<ProcessSeen>, grew: Vec<u32>) -> TreeSummary {
        TreeSummary {
            processes,
            peak: 1,
            brief: 0,
            grew,
            finding: None,
            copy: None,
            sums_age_s: None,
        }
    }

    fn row<'a>(name: &'a str, a: &'a ChannelAnalysis) -> Assessed<'a> {
        Assessed {
            name,
            unit: Unit::Bytes,
            analysis: a,
            limit: Some(LimitSource::HostRam),
        }
    }

    fn site(pid: u32, per_s: f64) -> Site {
        Site {
            channel: "site20.live".into(),
            pid: Some(pid),
            function: "torch_job".into(),
            file: "/work/dashboard/tests/data/sites_job.py".into(),
            line: Some(52),
            frames: Vec::new(),
            code: Some("history.append(out.detach().clone())".into()),
            python_unread: None,
            verdict: Verdict::Linear,
            growth_per_s: per_s,
            live_bytes: 49e6,
        }
    }

    /// A Python whose frames could not be read (a version flatline has no
    /// layout for, a free-threaded build): the first sentence says the
    /// line is not known, and names the native site as such, never as
    /// where the growth was allocated.
    #[test]
    fn a_site_whose_python_line_cannot_be_read_is_said_as_such() {
        let a = growing_at(1.2);
        let rows = [row("pid7830.rss", &a)];
        let t = tree(vec![process(7830, "main", None)], vec![7830]);
        let mut native = site(7830, 0.82 * 1.2 * 1_048_576.0);
        native.function = "bytearray___init__".into();
        native.file = "Objects/bytearrayobject.c".into();
        native.line = Some(812);
        native.code = None;
        native.python_unread = Some("3.14t".into());
        let sites = [native];
        let known = Known {
            sites: &sites,
            sites_sampled: true,
            ..Known::tree(Some(&t))
        };
        let got = assess(&rows, &known, &value, &duration);
        assert!(
            got.headline.ends_with(
                ": Python 3.14t's frames cannot be read, so the line is not known; the native \
                 site is bytearrayobject.c:812 (bytearray___init__) (82 % of it)."
            ),
            "{}",
            got.headline
        );
        assert!(!got.headline.contains("allocated at"), "{}", got.headline);
        let mut read = sites[0].clone();
        read.python_unread = None;
        let sites = [read];
        let known = Known {
            sites: &sites,
            sites_sampled: true,
            ..Known::tree(Some(&t))
        };
        let got = assess(&rows, &known, &value, &duration);
        assert!(
            got.headline
                .ends_with("82 % of it allocated at bytearrayobject.c:812 (bytearray___init__)."),
            "{}",
            got.headline
        );
    }

    /// One process's RSS, PSS and the tree's and `mem.*` sums it carries
    /// are one growth, told by who holds it and which line allocated it.
    #[test]
    fn one_process_growing_is_one_growth_named_by_its_process_and_line() {
        let a = growing_at(1.65);
        let rows = [
            row("tree.rss", &a),
            row("pid7830.rss", &a),
            row("pid7830.pss", &a),
            row("mem.rss", &a),
        ];
        let t = tree(vec![process(7830, "main", None)], vec![7830]);
        let sites = [site(7830, 0.8 * 1.65 * 1_048_576.0)];
        let known = Known {
            sites: &sites,
            sites_sampled: true,
            ..Known::tree(Some(&t))
        };
        let got = assess(&rows, &known, &value, &duration);
        assert_eq!(got.growths.len(), 1, "{:?}", got.growths);
        let g = &got.growths[0];
        assert_eq!(g.channels.len(), 4);
        assert_eq!(g.who.as_ref().map(|w| w.pid), Some(7830));
        assert!((g.sites[0].share - 0.8).abs() < 0.01, "{:?}", g.sites);
        assert!(
            got.headline.starts_with("python 7830 (main) grows 1.65 MiB/s (the host's RAM in ")
                && got.headline.ends_with(
                    "80 % of it allocated at sites_job.py:52 `history.append(out.detach().clone())`."
                ),
            "{}",
            got.headline
        );
        assert!(!got.headline.contains("Also growing"), "{}", got.headline);
        assert!(g.advice.as_deref().unwrap().contains("sites_job.py:52"));
    }

    /// Without sampled sites the sentence says how to get them; a site of
    /// another process is not this growth's.
    #[test]
    fn without_sites_the_sentence_says_how_to_get_them() {
        let a = growing_at(2.0);
        let rows = [row("pid10.rss", &a)];
        let t = tree(vec![process(10, "main", None)], vec![10]);
        let got = assess(&rows, &Known::tree(Some(&t)), &value, &duration);
        assert!(
            got.headline
                .ends_with("`watch --sites` would name the line that allocates it."),
            "{}",
            got.headline
        );
        let sites = [site(11, 1e6)];
        let known = Known {
            sites: &sites,
            sites_sampled: true,
            ..Known::tree(Some(&t))
        };
        let got = assess(&rows, &known, &value, &duration);
        assert!(got.growths[0].sites.is_empty());
        assert!(!got.headline.contains("sites"), "{}", got.headline);
        assert!(!got.headline.contains("allocated at"), "{}", got.headline);
    }

    /// Two DataLoader workers that each keep what they load: the tree's
    /// sum is theirs together, not the main process's (a real run's
    /// headline once gave the sum's 32 MiB/s to the main process, whose own
    /// channels could not tell growth); one growth names both, and their
    /// one line counted once.
    #[test]
    fn a_sum_grown_by_two_workers_is_theirs_together() {
        let sum = growing_at(32.0);
        let each = growing_at(15.0);
        let rows = [
            row("tree.rss", &sum),
            row("pid11.rss", &each),
            row("cgroup.current", &sum),
            row("pid12.rss", &each),
            row("tree.pss", &sum),
        ];
        let worker = |pid: u32| ProcessSeen {
            where_: Some(place("heap")),
            ..process(pid, "worker", Some(10))
        };
        let t = tree(
            vec![process(10, "main", None), worker(11), worker(12)],
            vec![11, 12],
        );
        let mut s12 = site(12, 6.0 * 1_048_576.0);
        s12.channel = "site21.live".into();
        let sites = [site(11, 6.0 * 1_048_576.0), s12];
        let known = Known {
            sites: &sites,
            sites_sampled: true,
            ..Known::tree(Some(&t))
        };
        let got = assess(&rows, &known, &value, &duration);
        assert_eq!(got.growths.len(), 1, "{:#?}", got.growths);
        let g = &got.growths[0];
        assert!(g.who.is_none());
        let among: Vec<u32> = g.among.iter().map(|w| w.pid).collect();
        assert_eq!(among, [11, 12]);
        let mut channels = g.channels.clone();
        channels.sort();
        assert_eq!(
            channels,
            [
                "cgroup.current",
                "pid11.rss",
                "pid12.rss",
                "tree.pss",
                "tree.rss"
            ]
        );
        assert_eq!(g.sites.len(), 1, "{:?}", g.sites);
        assert!(
            (g.sites[0].share - 12.0 / 32.0).abs() < 0.01,
            "{:?}",
            g.sites
        );
        assert!(
            got.headline
                .starts_with("2 workers (python 11 and 12) grow together 32.00 MiB/s")
                && got
                    .headline
                    .contains("100 % of it in the heap, 38 % allocated at sites_job.py:52"),
            "{}",
            got.headline
        );
        assert!(!got.headline.contains("python 10"), "{}", got.headline);
    }

    /// A watch whose `--sites` was refused (a running process) says why,
    /// and never tells its reader to ask for what they asked for.
    #[test]
    fn refused_sites_are_said_not_asked_for() {
        let grows = growing_at(1.0);
        let rows = [row("pid10.rss", &grows)];
        let mut p = process(10, "main", None);
        p.where_ = Some(place("heap"));
        let t = tree(vec![p], vec![10]);
        let plain = assess(&rows, &Known::tree(Some(&t)), &value, &duration).headline;
        assert!(
            plain.ends_with(
                "`watch --sites` would name the line that allocates it, or show that the allocator keeps it."
            ),
            "{plain}"
        );
        let known = Known {
            sites_refused: Some("nothing can be preloaded into a running process (--pid)"),
            ..Known::tree(Some(&t))
        };
        let refused = assess(&rows, &known, &value, &duration).headline;
        assert!(
            refused.ends_with(
                "Allocation sites were asked for but not sampled: nothing can be preloaded into a \
                 running process (--pid); start the job under `flatline watch --sites -- CMD` to \
                 name the line."
            ),
            "{refused}"
        );
        assert!(!refused.contains("would name"), "{refused}");
    }

    /// A process that grows through a file it maps is not told to tune its
    /// allocator because what malloc holds stays flat (a real run's receipt
    /// once said "the allocator keeps memory that was freed" of a page
    /// cache); one that grows in its heap with malloc flat still is.
    #[test]
    fn page_cache_growth_is_no_allocator_retention() {
        let grows = growing_at(19.0);
        let t: Vec<f64> = (0..600).map(f64::from).collect();
        let flat = analyze(&t, &vec![5e6; 600], &Context::default());
        let rows = [row("pid10.rss", &grows), row("pid10.alloc_live", &flat)];
        let kinds = |class: &str| {
            let mut p = process(10, "main", None);
            p.where_ = Some(place(class));
            let t = tree(vec![p], vec![10]);
            assess(&rows, &Known::tree(Some(&t)), &value, &duration)
                .findings
                .iter()
                .map(|f| f.kind)
                .collect::<Vec<_>>()
        };
        assert!(
            !kinds("file").contains(&"allocator_keeps"),
            "{:?}",
            kinds("file")
        );
        assert!(!kinds("shmem").contains(&"allocator_keeps"));
        assert!(
            kinds("heap").contains(&"allocator_keeps"),
            "{:?}",
            kinds("heap")
        );
        // And the first sentence blames the allocator only where it grew
        // in the heap.
        let headline = |class: &str| {
            let mut p = process(10, "main", None);
            p.where_ = Some(place(class));
            let t = tree(vec![p], vec![10]);
            assess(&rows, &Known::tree(Some(&t)), &value, &duration).headline
        };
        assert!(
            headline("heap").starts_with("What python 10 (main) holds is flat"),
            "{}",
            headline("heap")
        );
        assert!(headline("heap").contains("the allocator keeps memory that was freed"));
        assert!(
            headline("file").starts_with("python 10 (main) grows")
                && !headline("file").contains("allocator"),
            "{}",
            headline("file")
        );
    }

    /// A worker the OOM killer took, where its sites were sampled: the
    /// first sentence says who died and the line it held most with.
    #[test]
    fn a_death_says_the_line_the_killed_process_held_most_with() {
        use crate::death::{Cause, Death, Ending};
        let t: Vec<f64> = (0..600).map(f64::from).collect();
        let flat = analyze(&t, &vec![7e8; 600], &Context::default());
        let rows = [row("tree.rss", &flat)];
        let ending = Ending {
            deaths: vec![Death {
                pid: 11,
                name: "pt_data_worker".into(),
                role: "worker".into(),
                t_s: 15.7,
                cause: Cause::KernelOomKiller,
                signal: Some(9),
                size: Some(1.4e9),
                last_reading_before_s: None,
                limit: Some(1.5 * 1_073_741_824.0),
                limit_of: Some("cgroup"),
                before: None,
                evidence: Vec::new(),
            }],
            ..Ending::default()
        };
        let mut other = site(12, 0.0);
        other.live_bytes = 9e8;
        let sites = [site(11, 0.0), other];
        let known = Known {
            ending: Some(&ending),
            sites: &sites,
            sites_sampled: true,
            ..Known::default()
        };
        let h = assess(&rows, &known, &value, &duration).headline;
        assert!(
            h.starts_with("Worker 11 (pt_data_worker) was killed"),
            "{h}"
        );
        assert!(
            h.ends_with(
                "It held most at sites_job.py:52 `history.append(out.detach().clone())` (46.73 MiB when last read)."
            ),
            "{h}"
        );
        // Without its sites, the death alone.
        let known = Known {
            ending: Some(&ending),
            ..Known::default()
        };
        let h = assess(&rows, &known, &value, &duration).headline;
        assert!(!h.contains("held most"), "{h}");
    }

    /// A process's GPU memory growing beside its host memory is a growth
    /// of its own: not told in the host's heap nor at a malloc site; the
    /// GPU's own channels join it.
    #[test]
    fn gpu_memory_is_a_growth_apart_from_host_memory() {
        let host = growing_at(4.0);
        let vram = growing_at(2.0);
        let rows = [
            row("pid10.rss", &host),
            row("pid10.vram", &vram),
            row("gpu0.used", &vram),
            row("gpu0.proc_used", &vram),
        ];
        let p = ProcessSeen {
            where_: Some(place("heap")),
            ..process(10, "main", None)
        };
        let t = tree(vec![p], vec![10]);
        let sites = [site(10, 3.0 * 1_048_576.0)];
        let known = Known {
            sites: &sites,
            sites_sampled: true,
            ..Known::tree(Some(&t))
        };
        let got = assess(&rows, &known, &value, &duration);
        assert_eq!(got.growths.len(), 2, "{:#?}", got.growths);
        let host_g = got
            .growths
            .iter()
            .find(|g| g.channel == "pid10.rss")
            .unwrap();
        assert_eq!(host_g.channels, ["pid10.rss"]);
        assert!(host_g.memory.is_some() && !host_g.sites.is_empty());
        let gpu_g = got.growths.iter().find(|g| g.channels.len() == 3).unwrap();
        let mut channels = gpu_g.channels.clone();
        channels.sort();
        assert_eq!(channels, ["gpu0.proc_used", "gpu0.used", "pid10.vram"]);
        assert!(
            gpu_g.memory.is_none() && gpu_g.sites.is_empty(),
            "{gpu_g:?}"
        );
    }

    /// Two processes growing are two growths; the second is named after
    /// the first, by who it is.
    #[test]
    fn two_processes_are_two_growths() {
        let fast = growing_at(4.0);
        let slow = growing_at(1.0);
        let rows = [row("pid10.rss", &fast), row("pid11.rss", &slow)];
        let t = tree(
            vec![process(10, "main", None), process(11, "worker", Some(10))],
            vec![10, 11],
        );
        let known = Known {
            rank: Some("3"),
            ..Known::tree(Some(&t))
        };
        let got = assess(&rows, &known, &value, &duration);
        assert_eq!(got.growths.len(), 2);
        assert!(
            got.headline
                .starts_with("python 10 (main, rank 3) grows 4.00 MiB/s")
                && got
                    .headline
                    .ends_with("Also growing: python 11 (worker, rank 3)."),
            "{}",
            got.headline
        );
    }
}
