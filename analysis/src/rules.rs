//! Facts about channels that every view of them must agree on: what bounds a
//! channel (its limit), which channel is the step axis, and a channel's
//! plain statistics. Receipts and the dashboard both ask here.

use flatline_catalog::names;
use flatline_catalog::{self as catalog, Bound, Declared};
use flatline_format::HostFacts;
use flatline_format::{STEP_CHANNELS, Schema, Unit};

/// First, last, min and max of the readings of one channel (NaN skipped):
/// the format's own, which a bounded load keeps over every sample.
pub use flatline_format::ColumnStats as ChannelStats;

/// The statistics of one channel's readings.
pub fn channel_stats(col: &[f64]) -> ChannelStats {
    let mut st = ChannelStats::default();
    for &v in col {
        st.add(v);
    }
    st
}

/// A channel's declaration ([`flatline_catalog`]), where one
/// covers it with this unit.
fn declared(name: &str, unit: Unit) -> Option<&'static Declared> {
    catalog::declared(name).filter(|d| d.unit == unit)
}

/// Whether a channel is host memory that a memory limit bounds: what its
/// declaration says ([`Bound::Memory`] or [`Bound::AddressSpace`]); for a
/// channel no declaration covers (a file from an older version), by its
/// name: the watched process's `mem.*`, the tree's `tree.*`, a process's
/// `pid<N>.rss|pss|uss`, and the cgroup's `cgroup.current`.
pub fn is_host_memory(name: &str, unit: Unit) -> bool {
    if unit != Unit::Bytes {
        return false;
    }
    if let Some(d) = declared(name, unit) {
        return matches!(d.bound, Bound::Memory | Bound::AddressSpace);
    }
    is_host_memory_by_name(name)
}

/// [`is_host_memory`]'s rule by name, for bytes no declaration covers.
fn is_host_memory_by_name(name: &str) -> bool {
    let per_process = name.strip_prefix("pid").is_some_and(|rest| {
        rest.starts_with(|c: char| c.is_ascii_digit())
            && rest
                .rsplit_once('.')
                .is_some_and(|(_, leaf)| matches!(leaf, "rss" | "pss" | "uss"))
    });
    name.starts_with("mem.")
        || name.starts_with("tree.")
        || per_process
        || matches!(name, names::CGROUP_CURRENT | names::CGROUP_PEAK)
}

/// Whether a host memory channel is address space rather than memory in
/// use ([`Bound::AddressSpace`]): `mem.vm_size` (every mapping) and
/// `mem.vm_data` (data and anonymous mappings, touched or not). A process
/// may reserve far more of it than the host has RAM (allocators and CUDA
/// reserve address space in bulk), and neither RAM nor a cgroup limit
/// bounds it, so it has no limit and no time to one: its growth is
/// reported, but never as the host running out.
pub fn is_address_space(name: &str) -> bool {
    catalog::declared(name).is_some_and(|d| d.bound == Bound::AddressSpace)
}

/// The host's RAM, for the host memory channels that use it (in bytes).
pub fn ram_limit(name: &str, unit: Unit, host: &HostFacts) -> Option<f64> {
    (is_host_memory(name, unit) && !is_address_space(name) && host.mem_total_bytes > 0)
        .then_some(host.mem_total_bytes as f64)
}

/// The channel whose latest reading bounds this one, as its declaration
/// says: the cgroup's memory limit (`cgroup.max`) for host memory, a GPU's
/// total memory for its used memory and for a process's share of it. A
/// channel no declaration covers goes by its name: host memory as above,
/// `gpu<i>.used|proc_used` (or `gpu<i>-<k>`, a lost device's channels once
/// it answered again) by `gpu<i>.total`.
pub fn limit_channel(name: &str, unit: Unit) -> Option<String> {
    if let Some(d) = declared(name, unit) {
        return match d.bound {
            Bound::Memory => Some(CGROUP_LIMIT.into()),
            Bound::None | Bound::AddressSpace => None,
            Bound::Sibling(leaf) => name
                .split_once('.')
                .map(|(stem, _)| format!("{stem}.{leaf}")),
        };
    }
    limit_by_name(name, unit)
}

/// [`limit_channel`]'s rule by name, for channels no declaration covers.
fn limit_by_name(name: &str, unit: Unit) -> Option<String> {
    if unit == Unit::Bytes && is_host_memory_by_name(name) {
        return (!is_address_space(name)).then(|| CGROUP_LIMIT.into());
    }
    let (stem, what) = name.strip_prefix("gpu")?.split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (index, again) = stem.split_once('-').unwrap_or((stem, "0"));
    (matches!(what, "used" | "proc_used") && digits(index) && digits(again))
        .then(|| format!("gpu{stem}.total"))
}

/// Pages of growth host memory channels need before they are evidence of
/// growth.
pub const EVIDENCE_PAGES: f64 = 16.0;

/// The smallest change that is evidence of growth for a channel. Host
/// memory (`mem.*`, `tree.*`, `pid<N>.*`, `cgroup.current`) moves by pages,
/// and a process tree's PSS by fractions of one (a page shared by k
/// processes counts 1/k page in each): one last page fault, or a reader
/// touching a few shared pages, is not a leak. Below 16 pages (64 KiB) such
/// a change reads as flat, never as a staircase projected to a day; six
/// 64-page steps are still a staircase. Memory a job logs in MiB
/// (`log.*_mb`) is paged too: 16 pages in MiB. glibc's statistics
/// (`malloc.*`) move by its heap's granule, [`MALLOC_GRANULE`]. Other
/// channels: 0, and a
/// level's growth must then pass 0.1 % of its level
/// ([`super::MATERIAL_SHARE`]).
pub fn evidence_floor(name: &str, unit: Unit) -> f64 {
    if is_host_memory(name, unit) {
        EVIDENCE_PAGES * 4096.0
    } else if unit == Unit::Bytes && name.starts_with("malloc.") {
        // glibc grows and trims its heap by M_TOP_PAD (128 KiB): less than
        // that moving between in-use and free costs the process nothing.
        MALLOC_GRANULE
    } else if unit == Unit::Mebibytes {
        // A job's own log of its memory in MiB (`log.vm_rss_mb`): pages too.
        EVIDENCE_PAGES * 4096.0 / 1_048_576.0
    } else {
        0.0
    }
}

/// glibc's default `M_TOP_PAD`: the step its heap grows and shrinks by.
pub const MALLOC_GRANULE: f64 = 128.0 * 1024.0;

/// The channel holding the watched process's cgroup memory limit (named by
/// the probe that writes it).
pub use flatline_catalog::CGROUP_LIMIT;

/// What bounds a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitSource {
    /// The memory limit of the process's cgroup (`memory.max`, v1's
    /// `memory.limit_in_bytes`): what the OOM killer enforces.
    Cgroup,
    /// The host's RAM, where no cgroup limit applies.
    HostRam,
    /// A GPU's total memory.
    GpuTotal,
    /// The RSS a process (or the tree) maps: its own memory grows while
    /// its RSS holds still, copying the pages it shares, and stops when
    /// every one is copied ([`super::bound_copy`]).
    Shared,
}

impl LimitSource {
    pub fn describe(self) -> &'static str {
        match self {
            LimitSource::Cgroup => "the cgroup's memory limit",
            LimitSource::HostRam => "the host's RAM",
            LimitSource::GpuTotal => "the GPU's memory",
            LimitSource::Shared => "its RSS (every page it shares copied)",
        }
    }
}

/// The ceiling of a channel and where it comes from: the latest reading of
/// its limit channel ([`limit_channel`]) where there is one, else the host's
/// RAM for host memory. `latest(name)` gives a channel's latest reading.
pub fn limit_for(
    name: &str,
    unit: Unit,
    host: &HostFacts,
    latest: impl Fn(&str) -> Option<f64>,
) -> Option<(f64, LimitSource)> {
    let from_channel = limit_channel(name, unit)
        .and_then(|c| latest(&c))
        .filter(|v| v.is_finite() && *v > 0.0);
    match from_channel {
        Some(v) if is_host_memory(name, unit) => Some((v, LimitSource::Cgroup)),
        Some(v) => Some((v, LimitSource::GpuTotal)),
        None => ram_limit(name, unit, host).map(|v| (v, LimitSource::HostRam)),
    }
}

/// The latest reading of a channel (gaps skipped).
pub fn latest(values: &[f64]) -> Option<f64> {
    values.iter().rev().copied().find(|v| !v.is_nan())
}

/// True when a counter's readings advance (not all equal): only then is it
/// an axis. A `work.steps` that stays 0 (a workload without steps) is no
/// step axis, and drift per step over it would divide by nothing.
pub fn advances(values: &[f64]) -> bool {
    let s = channel_stats(values);
    s.samples > 1 && s.max > s.min
}

/// The step axis of a stream: the first of [`STEP_CHANNELS`] it has whose
/// readings advance. `column(i)` gives channel `i`'s readings.
pub fn step_axis<'a>(schema: &Schema, column: impl Fn(usize) -> &'a [f64]) -> Option<usize> {
    STEP_CHANNELS
        .iter()
        .filter_map(|n| schema.index_of(n))
        .find(|&i| advances(column(i)))
}

/// Whether a channel is an allocation site's (`site<N>.live`): an
/// estimate from samples that explains memory; the headline judges memory
/// itself, never a site.
/// Whether a channel is there only when allocation sites were sampled
/// (`watch --sites`): a site, the library's own count, its drops.
pub fn samples_sites(name: &str) -> bool {
    site_leaf(name).is_some() || name == names::SITES_DROPPED || name.ends_with(".alloc_live")
}

/// Whether a channel is an allocation site's live bytes (`site<N>.live`):
/// the site's one channel that is judged, and that carries its labels.
pub fn is_site_channel(name: &str) -> bool {
    site_leaf(name) == Some("live")
}

/// The leaf of any of a site's channels (`site<N>.live`, `.objects`,
/// `.alloc_bytes`, `.allocs`), or `None` for a channel that is no site's.
pub fn site_leaf(name: &str) -> Option<&str> {
    let (stem, leaf) = name.split_once('.')?;
    let n = stem.strip_prefix("site")?;
    let numbered = !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit() || b == b'-');
    (numbered && matches!(leaf, "live" | "objects" | "alloc_bytes" | "allocs")).then_some(leaf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flatline_format::{ChannelSpec, Group};

    #[test]
    fn limits_come_from_the_host_or_the_gpus_total() {
        let host = HostFacts {
            mem_total_bytes: 1 << 30,
            ..HostFacts::default()
        };
        assert_eq!(ram_limit("mem.rss", Unit::Bytes, &host), Some(1073741824.0));
        assert_eq!(ram_limit("mem.minflt", Unit::Count, &host), None);
        assert_eq!(ram_limit("gpu0.used", Unit::Bytes, &host), None);
        assert_eq!(
            limit_channel("gpu12.proc_used", Unit::Bytes).as_deref(),
            Some("gpu12.total")
        );
        assert_eq!(limit_channel("gpux.used", Unit::Bytes), None);
        assert_eq!(
            limit_channel("gpu1-2.used", Unit::Bytes).as_deref(),
            Some("gpu1-2.total")
        );
        assert_eq!(limit_channel("gpu1-.used", Unit::Bytes), None);
        assert_eq!(limit_channel("mem.minflt", Unit::Count), None);
        assert_eq!(
            limit_channel("mem.rss", Unit::Bytes).as_deref(),
            Some("cgroup.max")
        );
        assert_eq!(latest(&[1.0, 2.0, f64::NAN]), Some(2.0));
    }

    #[test]
    fn host_memory_is_bounded_by_the_cgroup_first_then_the_ram() {
        let host = HostFacts {
            mem_total_bytes: 8 << 30,
            ..HostFacts::default()
        };
        let cgroup = |n: &str| (n == "cgroup.max").then_some(2e9);
        let none = |_: &str| None;
        for name in ["mem.rss", "tree.pss", "pid4242.uss", "cgroup.current"] {
            assert_eq!(
                limit_for(name, Unit::Bytes, &host, cgroup),
                Some((2e9, LimitSource::Cgroup)),
                "{name}"
            );
            assert_eq!(
                limit_for(name, Unit::Bytes, &host, none),
                Some(((8u64 << 30) as f64, LimitSource::HostRam)),
                "{name}"
            );
        }
        // No limit in the cgroup (`max`) reads as no reading: the RAM bounds it.
        let unlimited = |n: &str| (n == "cgroup.max").then_some(f64::NAN);
        assert_eq!(
            limit_for("tree.pss", Unit::Bytes, &host, unlimited).map(|l| l.1),
            Some(LimitSource::HostRam)
        );
        // Address space is bounded by neither: a CUDA process maps more
        // than the host has RAM.
        for name in ["mem.vm_size", "mem.vm_data"] {
            assert_eq!(limit_for(name, Unit::Bytes, &host, cgroup), None, "{name}");
            assert_eq!(limit_for(name, Unit::Bytes, &host, none), None, "{name}");
            assert_eq!(evidence_floor(name, Unit::Bytes), 65536.0, "{name}");
        }
        assert_eq!(limit_for("tree.procs", Unit::Count, &host, cgroup), None);
        assert_eq!(limit_for("pidx.rss", Unit::Bytes, &host, cgroup), None);
        let gpu = |n: &str| (n == "gpu0.total").then_some(80e9);
        assert_eq!(
            limit_for("gpu0.used", Unit::Bytes, &host, gpu),
            Some((80e9, LimitSource::GpuTotal))
        );
    }

    #[test]
    fn a_step_channel_is_an_axis_only_when_it_advances() {
        let ch = |n: &str| ChannelSpec::new(n, Unit::Count, Group::Workload);
        let schema = Schema {
            channels: vec![ch("work.steps"), ch("log.step")],
        };
        let still = [0.0, 0.0, 0.0];
        let moving = [1.0, f64::NAN, 2.0];
        assert_eq!(step_axis(&schema, |i| [&still[..], &moving][i]), Some(1));
        assert_eq!(step_axis(&schema, |i| [&moving[..], &moving][i]), Some(0));
        assert_eq!(step_axis(&schema, |_| &still[..]), None);
        assert!(!advances(&[f64::NAN, 3.0]));
    }

    /// The declarations and the rules by name that judge channels no
    /// declaration covers agree on every declared channel: a file from
    /// before the catalog is judged as one written now.
    #[test]
    fn every_declaration_agrees_with_the_rules_by_name() {
        for d in catalog::CHANNELS {
            let name = d.name.replace('#', "0");
            let memory = matches!(d.bound, Bound::Memory | Bound::AddressSpace);
            assert_eq!(
                d.unit == Unit::Bytes && is_host_memory_by_name(&name),
                memory,
                "{name}"
            );
            assert_eq!(
                limit_channel(&name, d.unit),
                limit_by_name(&name, d.unit),
                "{name}"
            );
        }
        // A declared name read with another unit (a CSV's guess) goes by
        // name: a GPU's use in MiB is still bounded by its total, and an
        // RSS in MiB is not bytes of host memory.
        assert_eq!(
            limit_channel("gpu0.used", Unit::Mebibytes).as_deref(),
            Some("gpu0.total")
        );
        assert_eq!(limit_channel("mem.rss", Unit::Mebibytes), None);
        assert!(is_address_space("mem.vm_data") && !is_address_space("mem.rss"));
    }
}
