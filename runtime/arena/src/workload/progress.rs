//! Progress of the measured workload, published through atomics (the
//! telemetry's `WorkProbe` reads it as the `work.*` and `ingest.*` channels).
//!
//! The workload thread only does relaxed atomic adds (one per 65,536 `ops1b`
//! operations, two per ingest batch); the sampler reads the totals and turns
//! them into rates and per-interval fill-time percentiles. Neither side ever
//! waits for the other.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crossbeam_utils::CachePadded;

/// Buckets of [`LatencyHistogram`]: 8 exact values below 8, then 8 buckets per
/// power of two up to 2^64 (each at most 12.5 % wide).
pub const BUCKETS: usize = 8 + 61 * 8;

/// Bucket of a value.
#[inline]
pub fn bucket_of(v: u64) -> usize {
    if v < 8 {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros() as usize; // 3..=63
    let sub = ((v >> (msb - 3)) & 7) as usize;
    (msb - 2) * 8 + sub
}

/// A representative value of bucket `i`: the value itself below 8, else the
/// middle of the bucket's range.
pub fn bucket_value(i: usize) -> u64 {
    if i < 8 {
        return i as u64;
    }
    let msb = i / 8 + 2;
    let sub = (i % 8) as u64;
    let lo = (8 + sub) << (msb - 3);
    let width = 1u64 << (msb - 3);
    lo + width / 2
}

/// A lock-free log-linear histogram of nanosecond durations.
#[derive(Debug)]
pub struct LatencyHistogram {
    buckets: Box<[AtomicU64; BUCKETS]>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self {
            buckets: Box::new([const { AtomicU64::new(0) }; BUCKETS]),
        }
    }
}

impl LatencyHistogram {
    /// Counts one duration. One relaxed atomic add; never allocates.
    #[inline]
    pub fn record(&self, ns: u64) {
        self.buckets[bucket_of(ns)].fetch_add(1, Relaxed);
    }

    /// Copies the cumulative counts into `out`.
    pub fn snapshot(&self, out: &mut [u64; BUCKETS]) {
        for (o, b) in out.iter_mut().zip(self.buckets.iter()) {
            *o = b.load(Relaxed);
        }
    }
}

/// The `q` quantile (0..=1) of the counts in `hist`, as a bucket value; `None` if empty.
pub fn quantile(hist: &[u64; BUCKETS], q: f64) -> Option<u64> {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0;
    for (i, &c) in hist.iter().enumerate() {
        seen += c;
        if seen >= rank {
            return Some(bucket_value(i));
        }
    }
    None
}

/// Counters a workload bumps as it goes.
#[derive(Debug, Default)]
pub struct WorkProgress {
    ops: CachePadded<AtomicU64>,
    batches: CachePadded<AtomicU64>,
    steps: CachePadded<AtomicU64>,
    tokens: CachePadded<AtomicU64>,
    fill: LatencyHistogram,
}

impl WorkProgress {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// `n` more operations done.
    #[inline]
    pub fn add_ops(&self, n: u64) {
        self.ops.fetch_add(n, Relaxed);
    }

    /// One more ingest batch, filled in `fill_ns`.
    #[inline]
    pub fn record_batch(&self, fill_ns: u64) {
        self.batches.fetch_add(1, Relaxed);
        self.fill.record(fill_ns);
    }

    /// One more training-style step, which consumed `tokens` tokens.
    #[inline]
    pub fn record_step(&self, tokens: u64) {
        self.steps.fetch_add(1, Relaxed);
        self.tokens.fetch_add(tokens, Relaxed);
    }

    pub fn steps(&self) -> u64 {
        self.steps.load(Relaxed)
    }

    pub fn tokens(&self) -> u64 {
        self.tokens.load(Relaxed)
    }

    pub fn ops(&self) -> u64 {
        self.ops.load(Relaxed)
    }

    pub fn batches(&self) -> u64 {
        self.batches.load(Relaxed)
    }

    /// The batch fill times so far, by bucket of [`bucket_of`].
    pub fn fill_snapshot(&self, out: &mut [u64; BUCKETS]) {
        self.fill.snapshot(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_ordered_and_tight() {
        let mut last = 0;
        for v in (0..5000u64).chain([1 << 20, (1 << 20) + 1, u64::MAX / 3, u64::MAX]) {
            let b = bucket_of(v);
            assert!(b < BUCKETS);
            assert!(b >= last, "bucket order at {v}");
            last = b;
            let rep = bucket_value(b) as f64;
            assert!(
                (rep - v as f64).abs() <= v as f64 / 16.0 + 0.5,
                "{v} -> {rep}"
            );
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn quantiles_of_a_known_mix() {
        let h = LatencyHistogram::default();
        for _ in 0..90 {
            h.record(10_000);
        }
        for _ in 0..10 {
            h.record(1_000_000);
        }
        let mut snap = [0u64; BUCKETS];
        h.snapshot(&mut snap);
        let p50 = quantile(&snap, 0.5).unwrap() as f64;
        let p99 = quantile(&snap, 0.99).unwrap() as f64;
        assert!((p50 / 10_000.0 - 1.0).abs() < 0.07, "{p50}");
        assert!((p99 / 1_000_000.0 - 1.0).abs() < 0.07, "{p99}");
        assert_eq!(quantile(&[0; BUCKETS], 0.5), None);
    }
}
