//! `ops1b`: the seed's "1 billion operations" loop over a ring of 64-byte orders.
//!
//! A ring of [`RING_SLOTS`] [`QueueOrder64`]s; slot `i` starts with
//! `queue_position = 100 + i % 10` and `total_at_level = 50`. Operation `i`
//! touches slot `i mod RING_SLOTS`: its queue position moves up by one, or
//! wraps back to `total_at_level` once it reaches 1, and a `u64` checksum adds
//! the new position. After every operation an optimisation barrier
//! ([`crate::arena::barrier`] on the ring: an empty `asm` block with the ring
//! in a register and memory assumed clobbered) stops the compiler from
//! deleting, vectorising or batching the work: the same rule as the C
//! references in `bench/c/ops1b*.c`, which put
//! `asm volatile("" : : "r"(ring) : "memory")` in the same place.

use std::hint::black_box;
use std::time::Instant;

use serde::Serialize;

use crate::alloc;
use crate::arena::{ArenaError, FlatArena, QueueOrder64, barrier};
use crate::workload::progress::WorkProgress;

/// Slots in the ring: 65,536 × 64 bytes = 4 MiB.
pub const RING_SLOTS: usize = 65_536;
const MASK: usize = RING_SLOTS - 1;

/// The initial queue position of slot `i`.
#[inline]
pub fn initial_position(i: usize) -> u32 {
    100 + (i % 10) as u32
}

/// The level total every slot starts with.
pub const TOTAL_AT_LEVEL: u32 = 50;

/// Runs `ops` operations as chunks of at most [`RING_SLOTS`] (`chunk(n)`
/// runs `n` and returns their checksum), publishing progress after each:
/// one relaxed atomic add per chunk.
fn in_chunks(ops: u64, progress: Option<&WorkProgress>, mut chunk: impl FnMut(u64) -> u64) -> u64 {
    let mut sum = 0u64;
    let mut left = ops;
    while left > 0 {
        let n = left.min(RING_SLOTS as u64);
        sum = sum.wrapping_add(chunk(n));
        if let Some(p) = progress {
            p.add_ops(n);
        }
        left -= n;
    }
    sum
}

/// The ring and how far through the operation sequence it is.
#[derive(Debug)]
pub struct Ring {
    slots: FlatArena<QueueOrder64>,
    next_op: u64,
}

impl Ring {
    /// Allocates the ring (once) and sets every slot to its initial state.
    pub fn new() -> Result<Self, ArenaError> {
        let mut ring = Self {
            slots: FlatArena::new(RING_SLOTS)?,
            next_op: 0,
        };
        ring.reset();
        Ok(ring)
    }

    /// Puts every slot back in its initial state and restarts at operation 0.
    pub fn reset(&mut self) {
        for (i, slot) in self.slots.iter_mut().enumerate() {
            *slot = QueueOrder64 {
                id: i as u64,
                queue_position: initial_position(i),
                total_at_level: TOTAL_AT_LEVEL,
                ..QueueOrder64::default()
            };
        }
        self.next_op = 0;
    }

    /// Operations run since construction or the last [`reset`](Self::reset).
    pub fn ops_done(&self) -> u64 {
        self.next_op
    }

    /// The slots as they are now.
    pub fn slots(&self) -> &[QueueOrder64] {
        &self.slots
    }

    /// Runs the next `ops` operations and returns their checksum (wrapping sum
    /// of the new queue positions). Successive calls continue the sequence:
    /// `run(a)` then `run(b)` leaves the ring as `run(a + b)` would, and their
    /// checksums add up to its checksum. Touches no heap.
    pub fn run(&mut self, ops: u64) -> u64 {
        self.run_observed(ops, None)
    }

    /// As [`run`](Self::run), publishing progress to `progress` after every
    /// [`RING_SLOTS`] operations (one relaxed atomic add each time).
    pub fn run_observed(&mut self, ops: u64, progress: Option<&WorkProgress>) -> u64 {
        in_chunks(ops, progress, |n| self.run_chunk(n))
    }

    #[inline(always)]
    fn run_chunk(&mut self, ops: u64) -> u64 {
        let ring: &mut [QueueOrder64; RING_SLOTS] = (&mut *self.slots)
            .try_into()
            .expect("the ring is allocated with RING_SLOTS slots");
        let mut i = self.next_op as usize;
        let mut sum = 0u64;
        for _ in 0..ops {
            // `i & MASK` < RING_SLOTS, so indexing the fixed-size array needs no bounds check.
            let slot = &mut ring[i & MASK];
            let q = slot.queue_position;
            let q = if q <= 1 { slot.total_at_level } else { q - 1 };
            slot.queue_position = q;
            sum = sum.wrapping_add(u64::from(q));
            i = i.wrapping_add(1);
            barrier(&mut *ring);
        }
        self.next_op = self.next_op.wrapping_add(ops);
        sum
    }
}

/// How the ring lays out what an operation touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// The seed's: each operation reads and writes its 64-byte record
    /// (4 MiB of ring, one cache line an operation).
    #[default]
    Aos,
    /// The two fields an operation touches (`queue_position`,
    /// `total_at_level`) in `u32` arrays of their own beside the records:
    /// 8 bytes a slot, 512 KiB of hot data, which stays in L2.
    Soa,
}

impl Layout {
    /// As `--layout` and a recording's `layout` say it.
    pub fn name(self) -> &'static str {
        match self {
            Layout::Aos => "aos",
            Layout::Soa => "soa",
        }
    }
}

/// The `ops1b` ring with its hot fields apart ([`Layout::Soa`]): the same
/// operation, the same per-operation barrier, the same checksum as
/// [`Ring`]. The records stay beside the hot arrays, as an order book keeps
/// them, and are not touched by the loop.
#[derive(Debug)]
pub struct HotRing {
    positions: FlatArena<u32>,
    totals: FlatArena<u32>,
    records: FlatArena<QueueOrder64>,
    next_op: u64,
}

impl HotRing {
    /// Allocates the arrays (once) and sets every slot to its initial state.
    pub fn new() -> Result<Self, ArenaError> {
        let mut ring = Self {
            positions: FlatArena::new(RING_SLOTS)?,
            totals: FlatArena::new(RING_SLOTS)?,
            records: FlatArena::new(RING_SLOTS)?,
            next_op: 0,
        };
        ring.reset();
        Ok(ring)
    }

    /// Puts every slot back in its initial state and restarts at operation 0.
    pub fn reset(&mut self) {
        for (i, ((p, t), r)) in self
            .positions
            .iter_mut()
            .zip(self.totals.iter_mut())
            .zip(self.records.iter_mut())
            .enumerate()
        {
            *p = initial_position(i);
            *t = TOTAL_AT_LEVEL;
            *r = QueueOrder64 {
                id: i as u64,
                ..QueueOrder64::default()
            };
        }
        self.next_op = 0;
    }

    /// Each slot's `(queue_position, total_at_level)` as they are now.
    pub fn positions(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.positions
            .iter()
            .copied()
            .zip(self.totals.iter().copied())
    }

    /// As [`Ring::run_observed`].
    pub fn run_observed(&mut self, ops: u64, progress: Option<&WorkProgress>) -> u64 {
        in_chunks(ops, progress, |n| self.run_chunk(n))
    }

    /// Runs `ops` (at most [`RING_SLOTS`]) operations from `next_op`: the
    /// slots from `next_op mod RING_SLOTS` to the ring's end, then, if the
    /// chunk wraps, from slot 0. Walking the slots as two runs rather than
    /// masking every index is what the C reference does too: with the mask,
    /// LLVM spends two register copies an operation that GCC does not
    /// (1.16x its C reference; as runs, with loops placed as
    /// `.cargo/config.toml` asks, 0.99x: docs/measuring-against-c.md).
    #[inline(always)]
    fn run_chunk(&mut self, ops: u64) -> u64 {
        let ops = usize::try_from(ops).expect("a chunk is at most RING_SLOTS operations");
        let start = (self.next_op as usize) & MASK;
        let first = ops.min(RING_SLOTS - start);
        let wrapped = ops - first;
        let sum = run_slots(
            &mut self.positions[start..start + first],
            &self.totals[start..start + first],
        )
        .wrapping_add(run_slots(
            &mut self.positions[..wrapped],
            &self.totals[..wrapped],
        ));
        self.next_op = self.next_op.wrapping_add(ops as u64);
        sum
    }
}

/// One operation on each slot of `pos` in turn (`tot` beside it), with the
/// per-operation barrier; returns the sum of the new positions.
#[inline(always)]
fn run_slots(pos: &mut [u32], tot: &[u32]) -> u64 {
    let n = pos.len().min(tot.len());
    let (pos, tot) = (&mut pos[..n], &tot[..n]);
    let mut sum = 0u64;
    for k in 0..n {
        // Widened where it is read, so the sum needs no second
        // zero-extension (what the C compiler gets for free).
        let q = u64::from(pos[k]);
        let q = if q > 1 {
            q - 1
        } else {
            // One operation in 50 wraps: kept off the straight-line path,
            // as GCC lays out the C reference's loop.
            std::hint::cold_path();
            u64::from(tot[k])
        };
        pos[k] = q as u32;
        sum = sum.wrapping_add(q);
        // The same barrier as the AoS loop (and the C references).
        barrier(&mut *pos);
    }
    sum
}

/// The `ops1b` ring in either [`Layout`].
#[derive(Debug)]
pub enum AnyRing {
    Aos(Ring),
    Soa(HotRing),
}

impl AnyRing {
    /// Allocates the ring laid out as `layout` says (once).
    pub fn new(layout: Layout) -> Result<Self, ArenaError> {
        Ok(match layout {
            Layout::Aos => AnyRing::Aos(Ring::new()?),
            Layout::Soa => AnyRing::Soa(HotRing::new()?),
        })
    }

    /// As [`Ring::run_observed`], in either layout.
    pub fn run_observed(&mut self, ops: u64, progress: Option<&WorkProgress>) -> u64 {
        match self {
            AnyRing::Aos(r) => r.run_observed(ops, progress),
            AnyRing::Soa(r) => r.run_observed(ops, progress),
        }
    }
}

/// One timed run of `ops1b`, as `flatline bench ops1b --json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct Ops1bReport {
    pub workload: &'static str,
    pub layout: Layout,
    pub ops: u64,
    pub elapsed_ns: u64,
    pub ns_per_op: f64,
    pub mops_per_s: f64,
    pub checksum: u64,
    /// Allocation calls the benchmark thread made inside the timed region;
    /// `None` when the counting allocator is not installed.
    pub heap_allocs: Option<u64>,
}

/// Builds a fresh ring (untimed) and times `ops` operations on it,
/// publishing progress to `progress` if given.
pub fn bench(ops: u64, progress: Option<&WorkProgress>) -> Result<Ops1bReport, ArenaError> {
    bench_layout(Layout::Aos, ops, progress)
}

/// [`bench`] with the ring laid out as `layout` says.
pub fn bench_layout(
    layout: Layout,
    ops: u64,
    progress: Option<&WorkProgress>,
) -> Result<Ops1bReport, ArenaError> {
    let mut ring = AnyRing::new(layout)?;
    let ((checksum, elapsed), heap_allocs) = alloc::count_thread_allocs(|| {
        let t0 = Instant::now();
        let sum = ring.run_observed(black_box(ops), progress);
        (sum, t0.elapsed())
    });
    let elapsed_ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX).max(1);
    Ok(Ops1bReport {
        workload: "ops1b",
        layout,
        ops,
        elapsed_ns,
        ns_per_op: elapsed_ns as f64 / ops.max(1) as f64,
        mops_per_s: ops as f64 / elapsed_ns as f64 * 1e3,
        checksum,
        heap_allocs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule written as plainly as possible, on a Vec of (position, total) pairs.
    fn model(ops: u64) -> (u64, Vec<(u32, u32)>) {
        let mut ring: Vec<(u32, u32)> = (0..RING_SLOTS)
            .map(|i| (100 + (i % 10) as u32, 50))
            .collect();
        let mut sum = 0u64;
        for op in 0..ops {
            let slot = &mut ring[(op % RING_SLOTS as u64) as usize];
            slot.0 = if slot.0 <= 1 { slot.1 } else { slot.0 - 1 };
            sum += u64::from(slot.0);
        }
        (sum, ring)
    }

    fn positions(ring: &Ring) -> Vec<(u32, u32)> {
        ring.slots()
            .iter()
            .map(|s| (s.queue_position, s.total_at_level))
            .collect()
    }

    #[test]
    fn matches_the_scalar_model() {
        // 10M operations: every slot visited ~150 times, so each one wraps past 1.
        for ops in [0, 1, 9, 65_535, 65_536, 65_537, 10_000_000] {
            let mut ring = Ring::new().unwrap();
            let sum = ring.run(ops);
            let (want_sum, want_ring) = model(ops);
            assert_eq!(sum, want_sum, "checksum after {ops} ops");
            assert_eq!(positions(&ring), want_ring, "ring after {ops} ops");
            assert_eq!(ring.ops_done(), ops);
        }
    }

    #[test]
    fn runs_continue_where_they_stopped() {
        let mut whole = Ring::new().unwrap();
        let total = whole.run(1_000_003);
        let mut parts = Ring::new().unwrap();
        let a = parts.run(400_000);
        let b = parts.run(1);
        let c = parts.run(600_002);
        assert_eq!(a + b + c, total);
        assert_eq!(positions(&parts), positions(&whole));
        parts.reset();
        assert_eq!(positions(&parts), model(0).1);
        assert_eq!(parts.ops_done(), 0);
    }

    #[test]
    #[cfg_attr(miri, ignore = "1.3e9 operations are for native runs")]
    fn known_answers() {
        let mut ring = Ring::new().unwrap();
        assert_eq!(ring.run(300_000_000), 7_851_891_676);
        let mut ring = Ring::new().unwrap();
        assert_eq!(ring.run(1_000_000_000), 25_689_187_392);
    }

    #[test]
    fn the_hot_field_layout_matches_the_scalar_model() {
        for ops in [0, 1, 9, 65_535, 65_536, 65_537, 10_000_000] {
            let mut ring = HotRing::new().unwrap();
            let sum = ring.run_observed(ops, None);
            let (want_sum, want_ring) = model(ops);
            assert_eq!(sum, want_sum, "checksum after {ops} ops");
            assert_eq!(
                ring.positions().collect::<Vec<_>>(),
                want_ring,
                "ring after {ops} ops"
            );
        }
        let mut parts = HotRing::new().unwrap();
        let a = parts.run_observed(400_000, None);
        let b = parts.run_observed(600_003, None);
        assert_eq!(a + b, model(1_000_003).0);
        parts.reset();
        assert_eq!(parts.positions().collect::<Vec<_>>(), model(0).1);
    }

    #[test]
    #[cfg_attr(miri, ignore = "1e9 operations are for native runs")]
    fn the_hot_field_layout_gives_the_known_answer() {
        let r = bench_layout(Layout::Soa, 1_000_000_000, None).unwrap();
        assert_eq!(r.checksum, 25_689_187_392);
        assert_eq!(
            r.heap_allocs,
            Some(0),
            "counted (the tests install the counting allocator), and none"
        );
    }

    #[test]
    fn progress_counts_every_operation() {
        let progress = WorkProgress::new();
        let mut ring = Ring::new().unwrap();
        let sum = ring.run_observed(200_001, Some(&progress));
        assert_eq!(progress.ops(), 200_001);
        assert_eq!(sum, model(200_001).0);
    }

    #[test]
    fn bench_reports_no_allocation_in_the_timed_loop() {
        let r = bench(2_000_000, Some(&WorkProgress::new())).unwrap();
        assert_eq!(r.heap_allocs, Some(0));
        assert_eq!(r.checksum, model(2_000_000).0);
        assert_eq!(r.ops, 2_000_000);
        assert!(r.elapsed_ns > 0 && r.ns_per_op > 0.0 && r.mops_per_s > 0.0);
    }
}
