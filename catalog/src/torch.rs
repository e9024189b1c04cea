//! PyTorch's allocator as a job logs it: the statistics, the channels
//! derived from them, and the logged keys recognised.

use flatline_format::{Kind, Unit};

/// What a logged key says about PyTorch's allocator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stat {
    /// Memory held by live tensors.
    Allocated,
    /// Memory the caching allocator holds from the driver.
    Reserved,
    /// Cached blocks split and not in use (fragmentation).
    InactiveSplit,
    /// Times an allocation failed, the cache was flushed, and it was retried.
    AllocRetries,
}

impl Stat {
    /// The channel leaf after `torch.`.
    pub fn leaf(self) -> &'static str {
        match self {
            Stat::Allocated => "allocated",
            Stat::Reserved => "reserved",
            Stat::InactiveSplit => "inactive_split",
            Stat::AllocRetries => "alloc_retries",
        }
    }

    /// Whether `name` is the main rank's channel of this statistic
    /// (`torch.allocated`; other ranks' are `torch.rank<r>.allocated`).
    pub fn is_channel(self, name: &str) -> bool {
        name.strip_prefix("torch.") == Some(self.leaf())
    }

    pub fn unit(self) -> Unit {
        match self {
            Stat::AllocRetries => Unit::Count,
            _ => Unit::Bytes,
        }
    }

    pub fn kind(self) -> Kind {
        match self {
            Stat::AllocRetries => Kind::Counter,
            _ => Kind::Level,
        }
    }
}

/// The derived channel of cached blocks no tensor uses.
pub const CACHE: &str = "torch.cache";
/// The derived channel of GPU memory outside PyTorch's allocator.
pub const OTHER: &str = "gpu.other";

/// Recognises a logged key (as a channel leaf: `torch_cuda_memory_allocated`,
/// `allocated_bytes_all_current`, `mem_reserved_mb`…) and the factor that
/// turns its value into bytes. Peaks (`max_memory_allocated`,
/// `*_peak`) are not the current level and are left as they are.
pub fn recognise(leaf: &str) -> Option<(Stat, f64)> {
    if leaf.contains("max") || leaf.contains("peak") {
        return None;
    }
    if leaf.ends_with("num_alloc_retries") {
        return Some((Stat::AllocRetries, 1.0));
    }
    // memory_stats() keys, bytes always; Lightning's DeviceStatsMonitor
    // prefixes them with its hook's name.
    for (key, stat) in [
        ("allocated_bytes_all_current", Stat::Allocated),
        ("reserved_bytes_all_current", Stat::Reserved),
        ("inactive_split_bytes_all_current", Stat::InactiveSplit),
    ] {
        if leaf.ends_with(key) {
            return Some((stat, 1.0));
        }
    }
    // torch.cuda.memory_allocated()/memory_reserved() (memory_cached() is the
    // old name of reserved), often logged divided into MiB or GiB.
    const SCALES: [(&str, f64); 7] = [
        ("_bytes", 1.0),
        ("_kb", 1024.0),
        ("_mb", 1_048_576.0),
        ("_mib", 1_048_576.0),
        ("_gb", 1_073_741_824.0),
        ("_gib", 1_073_741_824.0),
        ("", 1.0),
    ];
    for (suffix, scale) in SCALES {
        let Some(stem) = leaf.strip_suffix(suffix) else {
            continue;
        };
        let stat = if stem.ends_with("memory_allocated") || stem.ends_with("mem_allocated") {
            Stat::Allocated
        } else if stem.ends_with("memory_reserved")
            || stem.ends_with("mem_reserved")
            || stem.ends_with("memory_cached")
        {
            Stat::Reserved
        } else {
            continue;
        };
        return Some((stat, scale));
    }
    None
}
