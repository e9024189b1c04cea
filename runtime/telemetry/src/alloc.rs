//! The `alloc.*` channels, from the counting allocator
//! ([`flatline_arena::alloc`]).

pub use flatline_arena::alloc::{
    AllocStats, count_thread_allocs, is_installed, mark_observer_thread, stats, thread_allocs,
};

use super::{ChannelSpec, Probe, ProbeError, Unavailable, catalog};

/// `alloc.*` channels from the counting allocator (with `alloc.rate`, the
/// allocation calls per second over the last interval), plus the observers'
/// own allocation calls as `telemetry.allocs`.
#[derive(Debug)]
pub struct AllocProbe {
    last: Option<(u64, std::time::Instant)>,
}

impl AllocProbe {
    /// Works only where the counting allocator is this process's global allocator.
    pub fn new() -> Result<Self, Unavailable> {
        if is_installed() {
            Ok(Self { last: None })
        } else {
            Err(Unavailable::new(
                "alloc",
                "the counting allocator is not this process's #[global_allocator]",
            ))
        }
    }
}

impl Probe for AllocProbe {
    fn name(&self) -> &'static str {
        "alloc"
    }

    fn channels(&self) -> Vec<ChannelSpec> {
        vec![
            catalog::spec("alloc.live"),
            catalog::spec("alloc.peak"),
            catalog::spec("alloc.count"),
            catalog::spec("alloc.frees"),
            catalog::spec("alloc.rate"),
            catalog::spec("telemetry.allocs"),
        ]
    }

    fn read(&mut self, out: &mut [f64]) -> Result<(), ProbeError> {
        let s = stats();
        let now = std::time::Instant::now();
        let rate = match self.last {
            Some((n, at)) if now > at => {
                s.allocs.saturating_sub(n) as f64 / now.duration_since(at).as_secs_f64()
            }
            _ => f64::NAN,
        };
        self.last = Some((s.allocs, now));
        out.copy_from_slice(&[
            s.live_bytes as f64,
            s.peak_bytes as f64,
            s.allocs as f64,
            s.frees as f64,
            rate,
            s.observer_allocs as f64,
        ]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_reads_the_counters() {
        // Exact figures are checked in `tests/alloc_counters.rs`, where nothing else
        // runs; here other tests allocate meanwhile, so only bounds that hold anyway.
        let mut p = AllocProbe::new().expect("installed in the test binary");
        let mut out = vec![f64::NAN; p.channels().len()];
        let start = std::time::Instant::now();
        p.read(&mut out).unwrap();
        assert!(out[4].is_nan(), "no rate before a second reading");
        let burst: Vec<Box<u64>> = (0..1000).map(Box::new).collect();
        p.read(&mut out).unwrap();
        let outer = start.elapsed().as_secs_f64();
        drop(burst);
        assert!(out.iter().all(|v| v.is_finite()));
        // At least 1000 calls within at most `outer` seconds, however slow the machine.
        assert!(out[4] * outer >= 1000.0, "{} /s over {outer} s", out[4]);
        // (Live and peak are read one after the other, so only their signs are certain.)
        assert!(out[0] > 0.0 && out[1] > 0.0 && out[2] >= 1000.0);
    }

    #[test]
    fn counts_what_the_closure_allocates() {
        let (v, n) = count_thread_allocs(|| std::hint::black_box(vec![vec![0u8; 8]; 3]));
        assert_eq!(v.len(), 3);
        assert_eq!(n, Some(4)); // the outer Vec and three inner ones
        let ((), n) = count_thread_allocs(|| {
            std::hint::black_box(1 + 1);
        });
        assert_eq!(n, Some(0));
    }
}
