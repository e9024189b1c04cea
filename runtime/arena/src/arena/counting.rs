//! [`CountingAlloc`]: the system allocator, counted.
//!
//! Process-wide totals sit in cache-padded atomics (one line each, so threads
//! that allocate do not also fight over a shared line of counters); each
//! thread also counts its own allocation calls in a `const` thread-local, so a
//! benchmark can say what *its* thread allocated while other threads (a
//! sampler, the UI) do their own work. The cost per call is a handful of
//! relaxed atomic adds: cheap enough to stay on in release builds.
//!
//! flatline's own threads (samplers, sinks, the UI) mark themselves as
//! *observer* threads. Their calls go to a second set of counters, so the
//! process-wide figures show the workload, not the instrument measuring it.
//! A block is counted against the kind of thread that frees it; observer
//! threads free what they allocate, so in practice the two sets stay apart.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering::Relaxed};

use crossbeam_utils::CachePadded;

/// A global allocator that forwards to [`System`] and counts.
///
/// Install it in a binary with
/// `#[global_allocator] static A: flatline_arena::arena::CountingAlloc = flatline_arena::arena::CountingAlloc;`.
/// Without that, every counter stays at zero and
/// [`crate::alloc::is_installed`] says so.
#[derive(Debug, Clone, Copy, Default)]
pub struct CountingAlloc;

/// A snapshot of the process-wide counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct AllocStats {
    /// Calls that obtained memory: `alloc`, `alloc_zeroed` and `realloc`.
    pub allocs: u64,
    /// Calls that released memory (`dealloc`).
    pub frees: u64,
    /// Of `allocs`, how many were `realloc`.
    pub reallocs: u64,
    /// Bytes currently allocated through this allocator.
    pub live_bytes: u64,
    /// Highest `live_bytes` seen.
    pub peak_bytes: u64,
    /// Bytes ever requested (a `realloc` counts its new size).
    pub total_bytes: u64,
    /// Allocation calls made by observer threads (not included above).
    pub observer_allocs: u64,
    /// Bytes currently allocated by observer threads (not included above).
    pub observer_live_bytes: u64,
}

struct Counters {
    allocs: CachePadded<AtomicU64>,
    frees: CachePadded<AtomicU64>,
    reallocs: CachePadded<AtomicU64>,
    live: CachePadded<AtomicU64>,
    peak: CachePadded<AtomicU64>,
    total: CachePadded<AtomicU64>,
    observer_allocs: CachePadded<AtomicU64>,
    observer_live: CachePadded<AtomicU64>,
}

static COUNTERS: Counters = Counters {
    allocs: CachePadded::new(AtomicU64::new(0)),
    frees: CachePadded::new(AtomicU64::new(0)),
    reallocs: CachePadded::new(AtomicU64::new(0)),
    live: CachePadded::new(AtomicU64::new(0)),
    peak: CachePadded::new(AtomicU64::new(0)),
    total: CachePadded::new(AtomicU64::new(0)),
    observer_allocs: CachePadded::new(AtomicU64::new(0)),
    observer_live: CachePadded::new(AtomicU64::new(0)),
};

thread_local! {
    // `const`-initialised and without a destructor: reading it never allocates and
    // never registers a TLS destructor, which an allocator must not do.
    static THREAD_ALLOCS: Cell<u64> = const { Cell::new(0) };
    static OBSERVER: Cell<bool> = const { Cell::new(false) };
}

#[inline]
fn is_observer() -> bool {
    OBSERVER.try_with(Cell::get).unwrap_or(false)
}

#[inline]
fn on_alloc(size: usize) {
    let size = size as u64;
    // `try_with` fails only while this thread's locals are being torn down.
    let _ = THREAD_ALLOCS.try_with(|c| c.set(c.get() + 1));
    if is_observer() {
        COUNTERS.observer_allocs.fetch_add(1, Relaxed);
        COUNTERS.observer_live.fetch_add(size, Relaxed);
        return;
    }
    COUNTERS.allocs.fetch_add(1, Relaxed);
    COUNTERS.total.fetch_add(size, Relaxed);
    let live = COUNTERS.live.fetch_add(size, Relaxed).wrapping_add(size);
    COUNTERS.peak.fetch_max(live, Relaxed);
}

#[inline]
fn on_release(size: usize) {
    let live = if is_observer() {
        &COUNTERS.observer_live
    } else {
        &COUNTERS.live
    };
    live.fetch_sub(size as u64, Relaxed);
}

#[inline]
fn on_free(size: usize) {
    if !is_observer() {
        COUNTERS.frees.fetch_add(1, Relaxed);
    }
    on_release(size);
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged,
// so `System` upholds the `GlobalAlloc` contract; the counting around each call
// neither allocates nor touches the memory handed out.
unsafe impl GlobalAlloc for CountingAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller guarantees `layout` has a non-zero size, as `System.alloc` needs.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            on_alloc(layout.size());
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            on_alloc(layout.size());
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller guarantees `ptr` came from this allocator (hence from
        // `System`, to which every allocation was forwarded) with this `layout`.
        unsafe { System.dealloc(ptr, layout) };
        on_free(layout.size());
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `ptr`/`layout` describe a live block from this
        // allocator (so from `System`) and that `new_size` is valid for `layout.align()`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if !is_observer() {
                COUNTERS.reallocs.fetch_add(1, Relaxed);
            }
            on_release(layout.size());
            on_alloc(new_size);
        }
        p
    }
}

/// Reads the process-wide counters. Each field is read atomically; the
/// snapshot as a whole is not (another thread may allocate in between).
pub(crate) fn stats() -> AllocStats {
    AllocStats {
        allocs: COUNTERS.allocs.load(Relaxed),
        frees: COUNTERS.frees.load(Relaxed),
        reallocs: COUNTERS.reallocs.load(Relaxed),
        live_bytes: COUNTERS.live.load(Relaxed),
        peak_bytes: COUNTERS.peak.load(Relaxed),
        total_bytes: COUNTERS.total.load(Relaxed),
        observer_allocs: COUNTERS.observer_allocs.load(Relaxed),
        observer_live_bytes: COUNTERS.observer_live.load(Relaxed),
    }
}

/// Marks the calling thread as one of flatline's observers: from now on its
/// allocations are counted apart from the process-wide figures.
pub(crate) fn mark_observer_thread() {
    let _ = OBSERVER.try_with(|c| c.set(true));
}

/// Allocation calls made so far by the calling thread.
#[inline]
pub(crate) fn thread_allocs() -> u64 {
    THREAD_ALLOCS.try_with(Cell::get).unwrap_or(0)
}

/// Whether [`CountingAlloc`] is this process's global allocator: one probe
/// allocation, checked against the calling thread's counter, cached.
pub(crate) fn is_installed() -> bool {
    static STATE: AtomicU8 = AtomicU8::new(0); // 0 unknown, 1 yes, 2 no
    match STATE.load(Relaxed) {
        1 => true,
        2 => false,
        _ => {
            let before = thread_allocs();
            drop(std::hint::black_box(Box::new(0u64)));
            let yes = thread_allocs() != before;
            STATE.store(if yes { 1 } else { 2 }, Relaxed);
            yes
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The runtime's test binary installs `CountingAlloc` (see lib.rs). Tests run
    // side by side there, all moving the same global counters, so these check only
    // per-thread counts and figures that never go down. The global counters are
    // checked to the byte in `tests/alloc_counters.rs`, a binary that runs alone.

    #[test]
    fn is_installed_in_the_test_binary() {
        assert!(is_installed());
    }

    #[test]
    fn counts_each_allocation_call_of_this_thread() {
        let before = thread_allocs();
        let a = std::hint::black_box(vec![1u8; 100]);
        let b = std::hint::black_box(Box::new([0u64; 4]));
        assert_eq!(thread_allocs() - before, 2);
        drop((a, b));
        assert_eq!(thread_allocs() - before, 2, "frees are not allocations");
    }

    #[test]
    fn counts_growth_through_realloc() {
        let before_thread = thread_allocs();
        let before = stats();
        let mut v: Vec<u8> = Vec::with_capacity(1);
        for i in 0..1000u32 {
            v.push(i as u8);
        }
        std::hint::black_box(&v);
        let after = stats();
        let calls = thread_allocs() - before_thread;
        assert!(calls >= 2, "one alloc and some reallocs, got {calls}");
        assert!(after.reallocs > before.reallocs);
        assert!(after.total_bytes - before.total_bytes >= 1000);
        assert!(after.peak_bytes >= 1000);
    }

    #[test]
    fn other_threads_do_not_count_against_this_one() {
        let before = thread_allocs();
        std::thread::scope(|s| {
            s.spawn(|| {
                let inner = thread_allocs();
                let v: Vec<Box<u32>> = (0..50).map(Box::new).collect();
                assert!(thread_allocs() - inner >= 51);
                drop(v);
            });
        });
        // Spawning a scoped thread allocates on this thread (its handle), but the 51
        // allocations made inside it must not show up here.
        assert!(thread_allocs() - before < 51);
    }
}
