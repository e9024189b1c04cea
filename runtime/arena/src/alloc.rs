//! Allocation counts from [`CountingAlloc`](crate::arena::CountingAlloc).
//!
//! The counters only move when the binary installs `CountingAlloc` as its
//! `#[global_allocator]`; [`is_installed`] tells, and [`count_thread_allocs`]
//! returns `None` rather than a misleading zero when it is not.

pub use crate::arena::AllocStats;

/// Marks the calling thread as one of flatline's observers (sampler, sink,
/// UI): its allocations are then counted apart, in
/// [`AllocStats::observer_allocs`] and [`AllocStats::observer_live_bytes`],
/// and no longer in the process-wide figures that describe the workload.
pub fn mark_observer_thread() {
    crate::arena::mark_observer_thread();
}

/// Process-wide allocation counters, now.
pub fn stats() -> AllocStats {
    crate::arena::stats()
}

/// Allocation calls (`alloc`, `alloc_zeroed`, `realloc`) made so far by the
/// calling thread.
pub fn thread_allocs() -> u64 {
    crate::arena::thread_allocs()
}

/// Whether `CountingAlloc` is this process's global allocator.
pub fn is_installed() -> bool {
    crate::arena::is_installed()
}

/// Runs `f` and returns its result with the allocation calls the calling
/// thread made meanwhile, or `None` when the counting allocator is not
/// installed (so no count can be trusted).
pub fn count_thread_allocs<R>(f: impl FnOnce() -> R) -> (R, Option<u64>) {
    let installed = is_installed();
    let before = thread_allocs();
    let out = f();
    let n = thread_allocs() - before;
    (out, installed.then_some(n))
}
