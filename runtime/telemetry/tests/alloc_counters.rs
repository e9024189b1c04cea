//! The process-wide counters of `CountingAlloc`, checked to the byte.
//!
//! The library's unit tests run many threads at once, all allocating through
//! the same global counters, so there they can only check per-thread figures
//! or loose bounds. This binary has no test harness (`harness = false` in
//! Cargo.toml): `main` runs alone, so every difference below is exactly what
//! the code between two readings did, and a counting error of one byte fails.

use flatline_arena::arena::CountingAlloc;
use flatline_telemetry::Probe;
use flatline_telemetry::alloc::{
    AllocProbe, AllocStats, count_thread_allocs, is_installed, mark_observer_thread, stats,
};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Big enough that a miscount cannot hide in rounding, small enough for Miri.
const BIG: u64 = 1 << 20;

fn main() {
    assert!(is_installed(), "the counting allocator is this binary's");
    a_block_counts_its_size_while_live_and_nothing_after();
    realloc_moves_live_bytes_and_counts_once();
    the_peak_holds_the_highest_live_figure();
    observer_threads_are_counted_apart();
    the_probe_reports_the_counters();
    count_thread_allocs_counts_this_thread();
    println!("alloc_counters: all checks passed");
}

fn a_block_counts_its_size_while_live_and_nothing_after() {
    let s0 = stats();
    let v = std::hint::black_box(vec![0u8; BIG as usize]);
    let s1 = stats();
    drop(v);
    let s2 = stats();
    assert_eq!(s1.live_bytes - s0.live_bytes, BIG, "{s0:?} -> {s1:?}");
    assert_eq!(s1.allocs - s0.allocs, 1);
    assert_eq!(s1.total_bytes - s0.total_bytes, BIG);
    assert_eq!(s1.frees, s0.frees, "nothing freed yet");
    assert_eq!(s2.live_bytes, s0.live_bytes, "{s1:?} -> {s2:?}");
    assert_eq!(s2.frees - s1.frees, 1);
    assert_eq!(s2.allocs, s1.allocs, "a free is not an allocation");
}

fn realloc_moves_live_bytes_and_counts_once() {
    let mut v: Vec<u8> = Vec::with_capacity(16);
    let s0 = stats();
    v.reserve_exact(4096);
    std::hint::black_box(&v);
    let s1 = stats();
    assert_eq!(s1.reallocs - s0.reallocs, 1, "{s0:?} -> {s1:?}");
    assert_eq!(s1.allocs - s0.allocs, 1, "a realloc is an allocation call");
    assert_eq!(s1.live_bytes - s0.live_bytes, 4096 - 16);
    assert_eq!(s1.total_bytes - s0.total_bytes, 4096, "counts the new size");
    assert_eq!(s1.frees, s0.frees, "a realloc is not a free");
    drop(v);
    assert_eq!(stats().live_bytes, s0.live_bytes - 16);
}

fn the_peak_holds_the_highest_live_figure() {
    let s0 = stats();
    assert!(s0.peak_bytes >= s0.live_bytes);
    // Higher than any peak so far, so the peak must move to exactly this figure.
    let size = s0.peak_bytes - s0.live_bytes + BIG;
    let v = std::hint::black_box(vec![0u8; size as usize]);
    let s1 = stats();
    drop(v);
    let s2 = stats();
    assert_eq!(s1.peak_bytes, s0.live_bytes + size, "{s0:?} -> {s1:?}");
    assert_eq!(s2.peak_bytes, s1.peak_bytes, "a free never lowers the peak");
    assert_eq!(s2.live_bytes, s0.live_bytes);
}

fn observer_threads_are_counted_apart() {
    let (b0, b1, b2): (AllocStats, AllocStats, AllocStats) = std::thread::spawn(|| {
        mark_observer_thread();
        let b0 = stats();
        let v = std::hint::black_box(vec![0u8; BIG as usize]);
        let b1 = stats();
        drop(v);
        let b2 = stats();
        (b0, b1, b2)
    })
    .join()
    .expect("observer thread");
    assert_eq!(b1.observer_live_bytes - b0.observer_live_bytes, BIG);
    assert_eq!(b1.observer_allocs - b0.observer_allocs, 1);
    assert_eq!(b1.live_bytes, b0.live_bytes, "not a workload allocation");
    assert_eq!(b1.allocs, b0.allocs);
    assert_eq!(b1.total_bytes, b0.total_bytes);
    assert_eq!(b2.observer_live_bytes, b0.observer_live_bytes);
    assert_eq!(
        b2.frees, b1.frees,
        "an observer's free is not the workload's"
    );
    assert_eq!(b2.live_bytes, b0.live_bytes);
}

fn the_probe_reports_the_counters() {
    let mut p = AllocProbe::new().expect("installed");
    let names: Vec<String> = p.channels().iter().map(|c| c.name.to_string()).collect();
    let mut out = vec![f64::NAN; names.len()];
    let at = |name: &str| names.iter().position(|n| n == name).expect(name);
    let start = std::time::Instant::now();
    let s0 = stats();
    p.read(&mut out).expect("read");
    let s1 = stats();
    assert_eq!(s0, s1, "reading the probe allocates nothing");
    assert_eq!(out[at("alloc.live")], s0.live_bytes as f64);
    assert_eq!(out[at("alloc.peak")], s0.peak_bytes as f64);
    assert_eq!(out[at("alloc.count")], s0.allocs as f64);
    assert_eq!(out[at("alloc.frees")], s0.frees as f64);
    assert_eq!(out[at("telemetry.allocs")], s0.observer_allocs as f64);
    assert!(
        out[at("alloc.rate")].is_nan(),
        "no rate before a second reading"
    );

    let burst: Vec<Box<u64>> = (0..1000).map(Box::new).collect();
    p.read(&mut out).expect("read");
    let outer = start.elapsed().as_secs_f64();
    drop(burst);
    // At least 1000 calls between the two readings, over an interval no longer than
    // `outer`, so the rate is at least 1000 / `outer` however slow the machine.
    let rate = out[at("alloc.rate")];
    assert!(rate * outer >= 1000.0, "rate {rate}/s over {outer} s");
}

fn count_thread_allocs_counts_this_thread() {
    let (v, n) = count_thread_allocs(|| std::hint::black_box(vec![vec![0u8; 8]; 3]));
    assert_eq!(v.len(), 3);
    assert_eq!(n, Some(4), "the outer Vec and three inner ones");
}
