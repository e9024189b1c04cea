//! The two reference workloads of the seed proposal, run for real.
//!
//! Both do all their allocation up front, in constructors; the loops that are
//! timed touch only memory that already exists. The tests prove it by
//! counting allocator calls.

pub mod driver;
pub mod ingest;
pub mod ingest_bench;
pub mod ops1b;
pub mod pipeline;
pub mod progress;
mod rng;

pub use rng::SplitMix64;

/// Nearest-rank percentile (`q` in 0..=1) of an ascending-sorted slice; 0 for an empty one.
pub(crate) fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.50), 50);
        assert_eq!(percentile(&v, 0.95), 95);
        assert_eq!(percentile(&v, 0.99), 99);
        assert_eq!(percentile(&v, 1.0), 100);
        assert_eq!(percentile(&v, 0.0), 1);
        assert_eq!(percentile(&[7], 0.5), 7);
        assert_eq!(percentile(&[], 0.5), 0);
        assert_eq!(percentile(&[1, 2, 3], 0.5), 2);
    }
}
