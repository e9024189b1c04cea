//! PyTorch's CUDA caching allocator, as a job logs it, beside the driver.
//!
//! A job that logs `torch.cuda.memory_allocated()` and `memory_reserved()`
//! (or `memory_stats()` keys such as `allocated_bytes.all.current`), in any
//! format flatline reads, gets `torch.*` channels in bytes in place of the
//! plain `log.*` ones, and two derived from them:
//!
//! - `torch.cache` = reserved − allocated: blocks the allocator keeps cached,
//!   split or fragmented, that no tensor uses;
//! - `gpu.other` = the process's memory as the driver counts it (NVML) −
//!   reserved: the CUDA context, NCCL buffers, cuBLAS/cuDNN workspaces and
//!   any library that allocates outside PyTorch. The GPU probe derives it
//!   (it holds the NVML side) from the latest reserved value it is handed
//!   through [`TorchSeen`].

use std::sync::{Arc, Mutex};
use std::time::Instant;

pub use flatline_catalog::torch::{CACHE, OTHER, Stat, recognise};

/// The latest reserved bytes a job logged (its main rank's), handed from
/// the thread that reads the job's output to the GPU probe, which derives
/// [`OTHER`] from it.
#[derive(Debug, Clone, Default)]
pub struct TorchSeen {
    latest: Arc<Mutex<Option<(Instant, f64)>>>,
}

/// How long a logged reserved value is used for `gpu.other`: a job logs its
/// statistics every few steps; one that stopped logging says nothing now.
pub const FRESH_FOR: std::time::Duration = std::time::Duration::from_secs(60);

impl TorchSeen {
    pub fn set_reserved(&self, bytes: f64) {
        *self
            .latest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some((Instant::now(), bytes));
    }

    /// The reserved bytes logged within [`FRESH_FOR`], if any.
    pub fn reserved(&self) -> Option<f64> {
        self.reserved_at(Instant::now())
    }

    /// The reserved bytes logged within [`FRESH_FOR`] before `now`.
    fn reserved_at(&self, now: Instant) -> Option<f64> {
        let l = *self
            .latest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        l.filter(|(at, _)| now.saturating_duration_since(*at) <= FRESH_FOR)
            .map(|(_, b)| b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::leaf;

    fn r(key: &str) -> Option<(Stat, f64)> {
        recognise(&leaf(key))
    }

    #[test]
    fn the_keys_jobs_log_are_recognised_with_their_scale() {
        assert_eq!(
            r("torch.cuda.memory_allocated"),
            Some((Stat::Allocated, 1.0))
        );
        assert_eq!(r("memory_reserved"), Some((Stat::Reserved, 1.0)));
        assert_eq!(r("memory_cached"), Some((Stat::Reserved, 1.0)));
        assert_eq!(r("mem_allocated_mb"), Some((Stat::Allocated, 1_048_576.0)));
        assert_eq!(
            r("gpu_memory_reserved_GiB"),
            Some((Stat::Reserved, 1_073_741_824.0))
        );
        assert_eq!(
            r("allocated_bytes.all.current"),
            Some((Stat::Allocated, 1.0))
        );
        assert_eq!(
            r("DeviceStatsMonitor.on_train_batch_end/reserved_bytes.all.current"),
            Some((Stat::Reserved, 1.0))
        );
        assert_eq!(
            r("inactive_split_bytes.all.current"),
            Some((Stat::InactiveSplit, 1.0))
        );
        assert_eq!(r("num_alloc_retries"), Some((Stat::AllocRetries, 1.0)));
    }

    #[test]
    fn peaks_and_other_keys_are_not_levels_of_the_allocator() {
        for key in [
            "torch.cuda.max_memory_allocated",
            "allocated_bytes.all.peak",
            "reserved_bytes.all.allocated",
            "allocated",
            "loss",
            "memory_allocated_ratio",
        ] {
            assert_eq!(r(key), None, "{key}");
        }
    }

    #[test]
    fn a_stale_reserved_value_is_not_used() {
        let seen = TorchSeen::default();
        assert_eq!(seen.reserved(), None);
        seen.set_reserved(3e9);
        assert_eq!(seen.reserved(), Some(3e9));
        // Asked later (a clock moved forward, which works on any machine,
        // where one moved back cannot before the machine has been up that
        // long): fresh until FRESH_FOR, stale after.
        let at = seen.latest.lock().unwrap().unwrap().0;
        assert_eq!(seen.reserved_at(at + FRESH_FOR), Some(3e9));
        assert_eq!(seen.reserved_at(at + FRESH_FOR * 2), None);
    }
}
