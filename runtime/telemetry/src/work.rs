//! The `work.*` and `ingest.*` channels, read from the counters a workload
//! bumps ([`WorkProgress`], in the runtime).

use std::sync::Arc;
use std::time::Instant;

pub use flatline_arena::workload::progress::{
    BUCKETS, LatencyHistogram, WorkProgress, bucket_of, bucket_value, quantile,
};

use super::{ChannelSpec, Probe, ProbeError, catalog};

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
        progress.fill_snapshot(&mut seen);
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
        self.progress.fill_snapshot(&mut self.now);
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
