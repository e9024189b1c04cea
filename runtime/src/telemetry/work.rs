//! Progress of the measured workload, published through atomics.
//!
//! The workload thread only does relaxed atomic adds (one per 65,536 `ops1b`
//! operations, two per ingest batch); the sampler reads the totals and turns
//! them into rates and per-interval fill-time percentiles. Neither side ever
//! waits for the other.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use crossbeam_utils::CachePadded;

use super::{ChannelSpec, Probe, ProbeError, catalog};

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
}

/// `work.*` and `ingest.*` channels from a [`WorkProgress`].
#[derive(Debug)]
pub struct WorkProbe {
    progress: Arc<WorkProgress>,
    last: Option<(u64, Instant)>,
    seen: Box<[u64; BUCKETS]>,
    now: Box<[u64; BUCKETS]>,
}

impl WorkProbe {
    pub fn new(progress: Arc<WorkProgress>) -> Self {
        let mut seen = Box::new([0u64; BUCKETS]);
        progress.fill.snapshot(&mut seen);
        Self {
            progress,
            last: None,
            seen,
            now: Box::new([0u64; BUCKETS]),
        }
    }
}

impl Probe for WorkProbe {
    fn name(&self) -> &'static str {
        "work"
    }

    fn channels(&self) -> Vec<ChannelSpec> {
        vec![
            catalog::spec("work.ops"),
            catalog::spec("work.ops_per_s"),
            catalog::spec("ingest.batches"),
            catalog::spec("ingest.fill_ns_p50"),
            catalog::spec("ingest.fill_ns_p99"),
            catalog::spec("work.steps"),
            catalog::spec("work.tokens"),
        ]
    }

    fn read(&mut self, out: &mut [f64]) -> Result<(), ProbeError> {
        let now = Instant::now();
        let ops = self.progress.ops();
        out[0] = ops as f64;
        out[1] = match self.last {
            Some((last_ops, at)) => {
                let dt = now.duration_since(at).as_secs_f64();
                if dt > 0.0 {
                    // Whole operations a second: the interval's clock
                    // jitter swamps any fraction, which would cost the
                    // recording a full float per sample.
                    (ops.saturating_sub(last_ops) as f64 / dt).round()
                } else {
                    f64::NAN
                }
            }
            None => f64::NAN,
        };
        self.last = Some((ops, now));
        out[2] = self.progress.batches() as f64;
        // Percentiles over the batches since the last read.
        self.progress.fill.snapshot(&mut self.now);
        for (n, s) in self.now.iter_mut().zip(self.seen.iter_mut()) {
            let total = *n;
            *n = total.saturating_sub(*s);
            *s = total;
        }
        let q = |q| quantile(&self.now, q).map_or(f64::NAN, |v| v as f64);
        out[3] = q(0.50);
        out[4] = q(0.99);
        out[5] = self.progress.steps() as f64;
        out[6] = self.progress.tokens() as f64;
        Ok(())
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

    #[test]
    fn the_probe_reports_rates_and_interval_percentiles() {
        let progress = WorkProgress::new();
        let mut probe = WorkProbe::new(progress.clone());
        let mut out = [f64::NAN; 7];
        probe.read(&mut out).unwrap();
        assert!(out[1].is_nan() && out[3].is_nan(), "no rate or batches yet");
        progress.add_ops(1_000_000);
        progress.record_step(16_384);
        progress.record_step(16_384);
        for _ in 0..100 {
            progress.record_batch(20_000);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        probe.read(&mut out).unwrap();
        assert_eq!((out[0], out[2]), (1_000_000.0, 100.0));
        assert_eq!((out[5], out[6]), (2.0, 32_768.0));
        assert!(out[1] > 0.0 && out[1] < 1_000_000.0 / 0.019, "{}", out[1]);
        assert!((out[3] / 20_000.0 - 1.0).abs() < 0.07);
        // The next interval has no batches: its percentiles are gaps, not repeats.
        probe.read(&mut out).unwrap();
        assert!(out[3].is_nan() && out[4].is_nan());
    }
}
