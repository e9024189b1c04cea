//! What each channel is, declared once: its unit, group and kind, what
//! bounds it, and whether the dashboard plots it when nothing was chosen
//! yet. The built-in probes make their channels from these declarations
//! ([`spec`], [`Declared::spec`]); the analysis reads a channel's limit from
//! its declaration (`flatline_analysis::rules::limit_channel`) and the
//! dashboard its first choice of plots ([`shown`]). Adding a channel is a
//! line here and its reading in a probe (docs/development.md, "Adding a
//! channel").
//!
//! A name with `#` is a family: `gpu#.used` is `gpu0.used`, `gpu1.used`, and
//! `gpu0-2.used` (the same device once it answered again after it was lost);
//! `pid#.rss` is each process's. Channels no declaration covers (a job's own
//! printed metrics, the columns of its step log, files from older versions)
//! are judged by the name rules in `flatline_analysis::rules`.

pub mod allocators;
pub mod classes;
pub mod gpu;
pub mod torch;

use flatline_format::{ChannelSpec, Group, Kind, Unit};

/// The channel holding the watched process's cgroup memory limit.
pub const CGROUP_LIMIT: &str = "cgroup.max";

/// The largest step number that is a count: 2^53, the last integer a
/// channel's f64 holds exactly. A job's counter that wrapped (`-1` printed
/// unsigned: 18446744073709551615) or a float printed as a step is not
/// one; the parsers drop it and the receipts do not count it.
pub const MAX_STEP: u64 = 1 << 53;

/// A signal's name, where it is one a job dies of.
pub fn signal_name(sig: i32) -> Option<&'static str> {
    Some(match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        _ => return None,
    })
}

/// What bounds a channel's growth: the limit it is projected against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// Nothing does (a rate, a count, a time, a temperature).
    None,
    /// Host memory: the memory cgroup's limit (`cgroup.max`), else the
    /// host's RAM. Its growth is evidence in pages.
    Memory,
    /// Host memory that is address space, not memory in use (`mem.vm_size`,
    /// `mem.vm_data`): its growth is evidence in pages, but RAM does not
    /// bound it, so it has no limit.
    AddressSpace,
    /// The latest reading of the channel beside it with this leaf
    /// (`gpu0.used` is bounded by `gpu0.total`).
    Sibling(&'static str),
}

/// One channel's (or one family's) declaration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Declared {
    /// Its name; `#` stands for a device's or a process's number.
    pub name: &'static str,
    pub unit: Unit,
    pub group: Group,
    pub kind: Kind,
    pub bound: Bound,
    /// Plotted when the dashboard opens with no choice saved.
    pub shown: bool,
}

impl Declared {
    /// The channel called `name` (one of this declaration's, for a family).
    pub fn spec(&self, name: impl Into<String>) -> ChannelSpec {
        ChannelSpec::new(name, self.unit, self.group).with_kind(self.kind)
    }
}

const fn ch(
    name: &'static str,
    unit: Unit,
    group: Group,
    kind: Kind,
    bound: Bound,
    shown: bool,
) -> Declared {
    Declared {
        name,
        unit,
        group,
        kind,
        bound,
        shown,
    }
}

use Bound::{AddressSpace, Memory, None as Unbounded, Sibling};
use Group::{Allocator, Gpu, Malloc, Memory as Mem, StepLog, System, Telemetry, Workload};
use Kind::{Counter, Gauge, Level, Peak};
use Unit::{Bytes, Celsius, Count, Mebibytes, Nanoseconds, PerSecond, Percent, Seconds};

const SHOWN: bool = true;
const HIDDEN: bool = false;

/// The declared channels' names, for code that reads a channel by name:
/// one spelling, checked against [`CHANNELS`] by a test.
pub mod names {
    pub const MEM_RSS: &str = "mem.rss";
    pub const MEM_HWM: &str = "mem.hwm";
    pub const MEM_VM_DATA: &str = "mem.vm_data";
    pub const MEM_VM_SIZE: &str = "mem.vm_size";
    pub const MEM_VM_PTE: &str = "mem.vm_pte";
    pub const MEM_RSS_ANON: &str = "mem.rss_anon";
    pub const MEM_RSS_FILE: &str = "mem.rss_file";
    pub const MEM_SWAP: &str = "mem.swap";
    pub const MEM_MINFLT: &str = "mem.minflt";
    pub const MEM_MAJFLT: &str = "mem.majflt";
    pub const PROC_THREADS: &str = "proc.threads";
    pub const PROC_CPU: &str = "proc.cpu";
    pub const SYS_CPU: &str = "sys.cpu";
    pub const SYS_MEM_TOTAL: &str = "sys.mem_total";
    pub const SYS_MEM_AVAILABLE: &str = "sys.mem_available";
    pub const SYS_SHMEM: &str = "sys.shmem";
    pub const TREE_RSS: &str = "tree.rss";
    pub const TREE_PSS: &str = "tree.pss";
    pub const TREE_USS: &str = "tree.uss";
    pub const TREE_SWAP: &str = "tree.swap";
    pub const TREE_PROCS: &str = "tree.procs";
    pub const TREE_SKIPPED: &str = "tree.skipped";
    pub const TREE_BRIEF: &str = "tree.brief";
    pub const TREE_COW: &str = "tree.cow";
    pub const TREE_AGE: &str = "tree.age";
    pub const CGROUP_CURRENT: &str = "cgroup.current";
    pub const CGROUP_MAX: &str = "cgroup.max";
    pub const CGROUP_OOM_KILLS: &str = "cgroup.oom_kills";
    pub const CGROUP_OOM: &str = "cgroup.oom";
    pub const CGROUP_MAX_HITS: &str = "cgroup.max_hits";
    pub const CGROUP_HIGH_HITS: &str = "cgroup.high_hits";
    pub const CGROUP_UNDER_OOM: &str = "cgroup.under_oom";
    pub const CGROUP_PEAK: &str = "cgroup.peak";
    pub const CGROUP_PRESSURE: &str = "cgroup.pressure";
    pub const CGROUP_ANON: &str = "cgroup.anon";
    pub const CGROUP_FILE: &str = "cgroup.file";
    pub const CGROUP_SHMEM: &str = "cgroup.shmem";
    pub const CGROUP_KERNEL: &str = "cgroup.kernel";
    pub const CGROUP_SOCK: &str = "cgroup.sock";
    pub const GPU_OTHER: &str = "gpu.other";
    pub const ALLOC_LIVE: &str = "alloc.live";
    pub const ALLOC_PEAK: &str = "alloc.peak";
    pub const ALLOC_COUNT: &str = "alloc.count";
    pub const ALLOC_FREES: &str = "alloc.frees";
    pub const ALLOC_RATE: &str = "alloc.rate";
    pub const TELEMETRY_ALLOCS: &str = "telemetry.allocs";
    pub const SITES_DROPPED: &str = "sites.dropped";
    pub const MALLOC_ARENA: &str = "malloc.arena";
    pub const MALLOC_MMAP: &str = "malloc.mmap";
    pub const MALLOC_IN_USE: &str = "malloc.in_use";
    pub const MALLOC_FREE: &str = "malloc.free";
    pub const WORK_OPS: &str = "work.ops";
    pub const WORK_OPS_PER_S: &str = "work.ops_per_s";
    pub const INGEST_BATCHES: &str = "ingest.batches";
    pub const INGEST_FILL_NS_P50: &str = "ingest.fill_ns_p50";
    pub const INGEST_FILL_NS_P99: &str = "ingest.fill_ns_p99";
    pub const WORK_STEPS: &str = "work.steps";
    pub const WORK_TOKENS: &str = "work.tokens";
    pub const TELEMETRY_DROPPED: &str = "telemetry.dropped";
    pub const TELEMETRY_READ_NS: &str = "telemetry.read_ns";
    pub const TELEMETRY_SAMPLER_ALLOCS: &str = "telemetry.sampler_allocs";
    pub const LOG_VM_RSS_MB: &str = "log.vm_rss_mb";
    pub const LOG_VM_DATA_MB: &str = "log.vm_data_mb";
    pub const LOG_VRAM_ALLOC_MB: &str = "log.vram_alloc_mb";
    pub const LOG_VRAM_RESERVED_MB: &str = "log.vram_reserved_mb";
    /// Every one of them, for the test that checks them against the declarations.
    pub const ALL: &[&str] = &[
        MEM_RSS,
        MEM_HWM,
        MEM_VM_DATA,
        MEM_VM_SIZE,
        MEM_VM_PTE,
        MEM_RSS_ANON,
        MEM_RSS_FILE,
        MEM_SWAP,
        MEM_MINFLT,
        MEM_MAJFLT,
        PROC_THREADS,
        PROC_CPU,
        SYS_CPU,
        SYS_MEM_TOTAL,
        SYS_MEM_AVAILABLE,
        SYS_SHMEM,
        TREE_RSS,
        TREE_PSS,
        TREE_USS,
        TREE_SWAP,
        TREE_PROCS,
        TREE_SKIPPED,
        TREE_BRIEF,
        TREE_COW,
        TREE_AGE,
        CGROUP_CURRENT,
        CGROUP_MAX,
        CGROUP_OOM_KILLS,
        CGROUP_OOM,
        CGROUP_MAX_HITS,
        CGROUP_HIGH_HITS,
        CGROUP_UNDER_OOM,
        CGROUP_PEAK,
        CGROUP_PRESSURE,
        CGROUP_ANON,
        CGROUP_FILE,
        CGROUP_SHMEM,
        CGROUP_KERNEL,
        CGROUP_SOCK,
        GPU_OTHER,
        ALLOC_LIVE,
        ALLOC_PEAK,
        ALLOC_COUNT,
        ALLOC_FREES,
        ALLOC_RATE,
        TELEMETRY_ALLOCS,
        SITES_DROPPED,
        MALLOC_ARENA,
        MALLOC_MMAP,
        MALLOC_IN_USE,
        MALLOC_FREE,
        WORK_OPS,
        WORK_OPS_PER_S,
        INGEST_BATCHES,
        INGEST_FILL_NS_P50,
        INGEST_FILL_NS_P99,
        WORK_STEPS,
        WORK_TOKENS,
        TELEMETRY_DROPPED,
        TELEMETRY_READ_NS,
        TELEMETRY_SAMPLER_ALLOCS,
        LOG_VM_RSS_MB,
        LOG_VM_DATA_MB,
        LOG_VRAM_ALLOC_MB,
        LOG_VRAM_RESERVED_MB,
    ];
}

/// Every declared channel, by the probe that reads it: name, unit, group,
/// kind, bound, shown by default.
#[rustfmt::skip]
pub const CHANNELS: &[Declared] = &[
    // procfs: /proc/<pid>/status and /stat (and sysinfo's fallback).
    ch("mem.rss",                  Bytes,       Mem,       Level,   Memory,           SHOWN),
    ch("mem.hwm",                  Bytes,       Mem,       Peak,    Memory,           HIDDEN),
    ch("mem.vm_data",              Bytes,       Mem,       Level,   AddressSpace,     SHOWN),
    ch("mem.vm_size",              Bytes,       Mem,       Level,   AddressSpace,     HIDDEN),
    ch("mem.vm_pte",               Bytes,       Mem,       Level,   Memory,           SHOWN),
    ch("mem.rss_anon",             Bytes,       Mem,       Level,   Memory,           HIDDEN),
    ch("mem.rss_file",             Bytes,       Mem,       Level,   Memory,           HIDDEN),
    ch("mem.swap",                 Bytes,       Mem,       Level,   Memory,           HIDDEN),
    ch("mem.minflt",               Count,       Mem,       Counter, Unbounded,        HIDDEN),
    ch("mem.majflt",               Count,       Mem,       Counter, Unbounded,        HIDDEN),
    ch("proc.threads",             Count,       System,    Gauge,   Unbounded,        HIDDEN),
    ch("proc.cpu",                 Percent,     System,    Gauge,   Unbounded,        HIDDEN),
    // system: sysinfo.
    ch("sys.cpu",                  Percent,     System,    Gauge,   Unbounded,        HIDDEN),
    ch("sys.mem_total",            Bytes,       System,    Gauge,   Unbounded,        HIDDEN),
    ch("sys.mem_available",        Bytes,       System,    Gauge,   Unbounded,        HIDDEN),
    ch("sys.shmem",                Bytes,       System,    Gauge,   Unbounded,        HIDDEN),
    // tree: a watched job's processes.
    ch("tree.rss",                 Bytes,       Mem,       Level,   Memory,           HIDDEN),
    ch("tree.pss",                 Bytes,       Mem,       Level,   Memory,           SHOWN),
    ch("tree.uss",                 Bytes,       Mem,       Level,   Memory,           HIDDEN),
    ch("tree.swap",                Bytes,       Mem,       Level,   Memory,           HIDDEN),
    ch("tree.procs",               Count,       Mem,       Gauge,   Unbounded,        HIDDEN),
    ch("tree.skipped",             Count,       Mem,       Counter, Unbounded,        HIDDEN),
    ch("tree.brief",               Count,       Mem,       Counter, Unbounded,        HIDDEN),
    ch("tree.cow",                 Bytes,       Mem,       Counter, Memory,           HIDDEN),
    ch("tree.age",                 Seconds,     Mem,       Gauge,   Unbounded,        HIDDEN),
    ch("pid#.rss",                 Bytes,       Mem,       Level,   Memory,           HIDDEN),
    ch("pid#.pss",                 Bytes,       Mem,       Level,   Memory,           HIDDEN),
    ch("pid#.uss",                 Bytes,       Mem,       Level,   Memory,           HIDDEN),
    ch("pid#.cow",                 Bytes,       Mem,       Counter, Unbounded,        HIDDEN),
    // cgroup: the memory cgroup of the watched process. `cgroup.current`
    // is a level while the cgroup is the job's own (a gauge when shared).
    ch("cgroup.current",           Bytes,       Mem,       Level,   Memory,           HIDDEN),
    ch("cgroup.max",               Bytes,       Mem,       Gauge,   Unbounded,        HIDDEN),
    ch("cgroup.oom_kills",         Count,       Mem,       Counter, Unbounded,        HIDDEN),
    ch("cgroup.oom",               Count,       Mem,       Counter, Unbounded,        HIDDEN),
    ch("cgroup.max_hits",          Count,       Mem,       Counter, Unbounded,        HIDDEN),
    ch("cgroup.high_hits",         Count,       Mem,       Counter, Unbounded,        HIDDEN),
    ch("cgroup.under_oom",         Count,       Mem,       Gauge,   Unbounded,        HIDDEN),
    ch("cgroup.peak",              Bytes,       Mem,       Peak,    Memory,           HIDDEN),
    ch("cgroup.pressure",          Percent,     Mem,       Gauge,   Unbounded,        HIDDEN),
    // What the cgroup's memory is (memory.stat): gauges, a split of
    // `cgroup.current`, whose verdict is the job's; `file` holds `shmem`.
    ch("cgroup.anon",              Bytes,       Mem,       Gauge,   Unbounded,        HIDDEN),
    ch("cgroup.file",              Bytes,       Mem,       Gauge,   Unbounded,        HIDDEN),
    ch("cgroup.shmem",             Bytes,       Mem,       Gauge,   Unbounded,        HIDDEN),
    ch("cgroup.kernel",            Bytes,       Mem,       Gauge,   Unbounded,        HIDDEN),
    ch("cgroup.sock",              Bytes,       Mem,       Gauge,   Unbounded,        HIDDEN),
    // gpu: NVML, per device and per process.
    ch("gpu#.used",                Bytes,       Gpu,       Level,   Sibling("total"), SHOWN),
    ch("gpu#.total",               Bytes,       Gpu,       Level,   Unbounded,        HIDDEN),
    ch("gpu#.util",                Percent,     Gpu,       Gauge,   Unbounded,        HIDDEN),
    ch("gpu#.temp_c",              Celsius,     Gpu,       Gauge,   Unbounded,        HIDDEN),
    ch("gpu#.proc_used",           Bytes,       Gpu,       Level,   Sibling("total"), SHOWN),
    ch("pid#.vram",                Bytes,       Gpu,       Level,   Unbounded,        HIDDEN),
    ch("gpu.other",                Bytes,       Gpu,       Level,   Unbounded,        HIDDEN),
    // alloc: the counting global allocator (this process).
    ch("alloc.live",               Bytes,       Allocator, Level,   Unbounded,        SHOWN),
    ch("alloc.peak",               Bytes,       Allocator, Peak,    Unbounded,        HIDDEN),
    ch("alloc.count",              Count,       Allocator, Counter, Unbounded,        HIDDEN),
    ch("alloc.frees",              Count,       Allocator, Counter, Unbounded,        HIDDEN),
    ch("alloc.rate",               PerSecond,   Allocator, Gauge,   Unbounded,        SHOWN),
    ch("telemetry.allocs",         Count,       Telemetry, Counter, Unbounded,        HIDDEN),
    // sites: a watched job's allocation sites (`watch --sites`).
    ch("site#.live",               Bytes,       Allocator, Level,   Unbounded,        HIDDEN),
    ch("site#.objects",            Count,       Allocator, Gauge,   Unbounded,        HIDDEN),
    ch("site#.alloc_bytes",        Bytes,       Allocator, Counter, Unbounded,        HIDDEN),
    ch("site#.allocs",             Count,       Allocator, Counter, Unbounded,        HIDDEN),
    ch("pid#.alloc_live",          Bytes,       Allocator, Level,   Unbounded,        HIDDEN),
    ch("sites.dropped",            Count,       Telemetry, Counter, Unbounded,        HIDDEN),
    // malloc: glibc's mallinfo2 (this process).
    ch("malloc.arena",             Bytes,       Malloc,    Level,   Unbounded,        SHOWN),
    ch("malloc.mmap",              Bytes,       Malloc,    Level,   Unbounded,        SHOWN),
    ch("malloc.in_use",            Bytes,       Malloc,    Level,   Unbounded,        HIDDEN),
    ch("malloc.free",              Bytes,       Malloc,    Level,   Unbounded,        HIDDEN),
    // work: the built-in workloads' atomics.
    ch("work.ops",                 Count,       Workload,  Counter, Unbounded,        HIDDEN),
    ch("work.ops_per_s",           PerSecond,   Workload,  Gauge,   Unbounded,        SHOWN),
    ch("ingest.batches",           Count,       Workload,  Counter, Unbounded,        HIDDEN),
    ch("ingest.fill_ns_p50",       Nanoseconds, Workload,  Gauge,   Unbounded,        SHOWN),
    ch("ingest.fill_ns_p99",       Nanoseconds, Workload,  Gauge,   Unbounded,        HIDDEN),
    ch("work.steps",               Count,       Workload,  Counter, Unbounded,        HIDDEN),
    ch("work.tokens",              Count,       Workload,  Counter, Unbounded,        HIDDEN),
    // The sampler's own.
    ch("telemetry.dropped",        Count,       Telemetry, Counter, Unbounded,        HIDDEN),
    ch("telemetry.read_ns",        Nanoseconds, Telemetry, Gauge,   Unbounded,        HIDDEN),
    ch("telemetry.sampler_allocs", Count,       Telemetry, Counter, Unbounded,        HIDDEN),
    // A job's step log: the columns of these names, where it has them, are
    // plotted first (a log's columns are the job's, not declared here).
    ch("log.vm_rss_mb",            Mebibytes,   StepLog,   Level,   Unbounded,        SHOWN),
    ch("log.vm_data_mb",           Mebibytes,   StepLog,   Level,   Unbounded,        SHOWN),
    ch("log.vram_alloc_mb",        Mebibytes,   StepLog,   Level,   Unbounded,        SHOWN),
    ch("log.vram_reserved_mb",     Mebibytes,   StepLog,   Level,   Unbounded,        SHOWN),
];

/// The family pattern of a numbered name (`gpu0-2.used` → `gpu#.used`), if
/// it is one: a stem of letters, a number, and optionally `-` and another.
fn pattern(name: &str) -> Option<(&str, &str)> {
    let (stem, leaf) = name.split_once('.')?;
    let digits = stem.find(|c: char| c.is_ascii_digit())?;
    let (letters, number) = stem.split_at(digits);
    let (n, again) = number.split_once('-').unwrap_or((number, "0"));
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (!letters.is_empty() && all_digits(n) && all_digits(again)).then_some((letters, leaf))
}

/// The declaration of the channel called `name`, if there is one.
pub fn declared(name: &str) -> Option<&'static Declared> {
    if let Some(d) = CHANNELS.iter().find(|d| d.name == name) {
        return Some(d);
    }
    let (letters, leaf) = pattern(name)?;
    CHANNELS.iter().find(|d| {
        d.name
            .split_once("#.")
            .is_some_and(|(l, f)| l == letters && f == leaf)
    })
}

/// The channel called `name`, as declared.
///
/// # Panics
/// When no declaration covers `name`: a built-in probe's channel must be
/// declared in [`CHANNELS`] (the tests make every probe's).
pub fn spec(name: &str) -> ChannelSpec {
    declared(name)
        .unwrap_or_else(|| panic!("{name} is not declared in catalog/src/lib.rs"))
        .spec(name)
}

/// The channels plotted when nothing was chosen yet (a family's first
/// member: `gpu0.used`).
pub fn shown() -> impl Iterator<Item = String> {
    CHANNELS
        .iter()
        .filter(|d| d.shown)
        .map(|d| d.name.replace('#', "0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names code reads channels by are the declared ones, each once,
    /// and every declared name (not a family) has its constant.
    #[test]
    fn every_name_constant_is_a_declared_channel() {
        let declared: Vec<&str> = CHANNELS
            .iter()
            .map(|d| d.name)
            .filter(|n| !n.contains('#'))
            .collect();
        assert_eq!(names::ALL, declared.as_slice());
        assert_eq!(names::MEM_RSS, "mem.rss");
        assert_eq!(names::CGROUP_OOM_KILLS, "cgroup.oom_kills");
    }

    #[test]
    fn families_cover_numbered_names_and_nothing_else() {
        assert_eq!(declared("gpu0.used").unwrap().name, "gpu#.used");
        assert_eq!(declared("gpu3-2.proc_used").unwrap().name, "gpu#.proc_used");
        assert_eq!(declared("pid4121.rss").unwrap().name, "pid#.rss");
        assert_eq!(declared("pid4121-3.vram").unwrap().name, "pid#.vram");
        assert_eq!(declared("gpu.other").unwrap().name, "gpu.other");
        for undeclared in [
            "gpu0.fan",
            "gpux.used",
            "pid.rss",
            "pid1-.rss",
            "log.loss",
            "mem",
        ] {
            assert!(declared(undeclared).is_none(), "{undeclared}");
        }
    }

    #[test]
    fn a_name_is_declared_once() {
        let mut names: Vec<&str> = CHANNELS.iter().map(|d| d.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before);
    }

    #[test]
    fn a_declared_channel_is_made_as_declared() {
        let s = spec("gpu1.used");
        assert_eq!(
            (s.name.as_str(), s.unit, s.group, s.kind),
            ("gpu1.used", Bytes, Gpu, Level)
        );
        assert!(shown().any(|n| n == "gpu0.used"));
        assert!(!shown().any(|n| n == "cgroup.oom_kills"));
    }
}
