//! The ingest benchmark (`flatline bench ingest`): the arena's loader, the
//! write-only floor, the allocating baseline and the pipelined loader timed
//! over the same offsets. It sits above both loaders ([`super::ingest`],
//! [`super::pipeline`]), so neither imports the other's benchmark.

use std::hint::black_box;
use std::time::Instant;

use serde::Serialize;

use super::ingest::{BatchArena, Corpus, CorpusSource, IngestError, OffsetSampler, baseline_batch};
use super::percentile;
use super::pipeline::{self, PipelineStats};
use crate::alloc;
use crate::workload::progress::WorkProgress;

/// Settings of one ingest benchmark.
#[derive(Debug, Clone)]
pub struct IngestBenchConfig {
    pub batch: usize,
    pub block: usize,
    /// Timed batches per loader.
    pub iters: usize,
    /// Untimed batches per loader before the timed ones.
    pub warmup: usize,
    /// Seed of the offset stream (both loaders get the same offsets).
    pub seed: u64,
    /// Also run the allocating baseline.
    pub baseline: bool,
    /// Where to publish batch counts and arena fill times while it runs.
    pub progress: Option<std::sync::Arc<WorkProgress>>,
    /// Also run the pipelined loader ([`super::pipeline`]), its consumer
    /// holding each batch this long (a training step), in nanoseconds.
    pub pipelined_step_ns: Option<u64>,
}

impl Default for IngestBenchConfig {
    fn default() -> Self {
        Self {
            batch: 64,
            block: 256,
            iters: 20_000,
            warmup: 1_000,
            seed: 1337,
            baseline: true,
            progress: None,
            pipelined_step_ns: None,
        }
    }
}

/// Fill-time percentiles of one loader.
#[derive(Debug, Clone, Serialize)]
pub struct FillStats {
    pub fill_ns_p50: u64,
    pub fill_ns_p95: u64,
    pub fill_ns_p99: u64,
    /// Allocation calls per timed batch on the benchmark thread; `None` when
    /// the counting allocator is not installed.
    pub allocs_per_batch: Option<f64>,
}

/// One ingest benchmark, as `flatline bench ingest --json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct IngestReport {
    pub workload: &'static str,
    pub batch: usize,
    pub block: usize,
    pub corpus_tokens: usize,
    pub corpus: CorpusSource,
    pub iters: usize,
    pub warmup_iters: usize,
    pub fill_ns_p50: u64,
    pub fill_ns_p95: u64,
    pub fill_ns_p99: u64,
    pub allocs_per_batch: Option<f64>,
    /// The same fill without prefetching the next batch's rows (each fill
    /// waits on memory for its own): what prefetching saves.
    pub plain: FillStats,
    /// Only writing the two `[B, T]` outputs, on the same buffers: the least
    /// a fill can cost.
    pub floor_ns_p50: u64,
    pub floor_ns_p95: u64,
    pub floor_ns_p99: u64,
    pub baseline: Option<FillStats>,
    pub pipelined: Option<PipelinedReport>,
    /// With `--huge-pages`: how much of this process's anonymous memory the
    /// kernel backed with huge pages (`AnonHugePages`), the corpus being
    /// nearly all of it; `None` when not asked.
    pub huge_page_bytes: Option<u64>,
}

/// The pipelined loader: a producer thread fills the next batch into a
/// second slot while the consumer holds this one for `step_ns`.
#[derive(Debug, Clone, Serialize)]
pub struct PipelinedReport {
    /// How long the consumer held each batch (its simulated training step:
    /// it reads the whole batch, then spins until the time is up).
    pub step_ns: u64,
    #[serde(flatten)]
    pub stats: PipelineStats,
}

/// Times `cfg.iters` batches of the arena loader (and, if asked, of the
/// allocating baseline on the same offsets), one clock read either side of
/// each fill. Offsets are drawn before each timed region.
pub fn bench(corpus: &Corpus, cfg: &IngestBenchConfig) -> Result<IngestReport, IngestError> {
    let tokens = corpus.tokens();
    let mut arena = BatchArena::new(cfg.batch, cfg.block)?;
    let mut offsets = vec![0u64; cfg.batch];
    let mut times = Vec::with_capacity(cfg.iters);

    // As a loader runs it: offsets drawn a batch ahead, and the next batch's
    // rows prefetched while this one is copied.
    let mut sampler = OffsetSampler::new(tokens.len(), cfg.block, cfg.seed)?;
    let mut next = vec![0u64; cfg.batch];
    sampler.draw(&mut next);
    let arena_stats = time_loader(cfg, &mut times, |_| {
        std::mem::swap(&mut offsets, &mut next);
        sampler.draw(&mut next);
        let t0 = Instant::now();
        let a0 = alloc::thread_allocs();
        arena.fill_ahead(tokens, &offsets, &next)?;
        black_box(arena.x());
        let a1 = alloc::thread_allocs();
        let ns = t0.elapsed().as_nanos() as u64;
        if let Some(p) = &cfg.progress {
            p.record_batch(ns);
        }
        Ok((ns, a1 - a0))
    })?;

    // The same offsets, each fill on its own.
    let mut sampler = OffsetSampler::new(tokens.len(), cfg.block, cfg.seed)?;
    let plain = time_loader(cfg, &mut times, |_| {
        sampler.draw(&mut offsets);
        let t0 = Instant::now();
        let a0 = alloc::thread_allocs();
        arena.fill(tokens, &offsets)?;
        black_box(arena.x());
        let a1 = alloc::thread_allocs();
        Ok((t0.elapsed().as_nanos() as u64, a1 - a0))
    })?;

    // The floor: the same stores into the same buffers, nothing gathered.
    let floor = time_loader(cfg, &mut times, |i| {
        let t0 = Instant::now();
        arena.write_only(i as i64);
        black_box(arena.x());
        Ok((t0.elapsed().as_nanos() as u64, 0))
    })?;

    let baseline = if cfg.baseline {
        let mut sampler = OffsetSampler::new(tokens.len(), cfg.block, cfg.seed)?;
        Some(time_loader(cfg, &mut times, |_| {
            sampler.draw(&mut offsets);
            let t0 = Instant::now();
            let a0 = alloc::thread_allocs();
            let batch = baseline_batch(tokens, &offsets, cfg.block)?;
            black_box(&batch);
            let a1 = alloc::thread_allocs();
            let ns = t0.elapsed().as_nanos() as u64;
            drop(batch); // the consumer's drop, outside the timed region
            Ok((ns, a1 - a0))
        })?)
    } else {
        None
    };

    let pipelined = match cfg.pipelined_step_ns {
        Some(step_ns) => Some(PipelinedReport {
            step_ns,
            stats: pipelined(corpus, cfg, step_ns)?,
        }),
        None => None,
    };

    Ok(IngestReport {
        workload: "ingest",
        batch: cfg.batch,
        block: cfg.block,
        corpus_tokens: tokens.len(),
        corpus: corpus.source().clone(),
        iters: cfg.iters,
        warmup_iters: cfg.warmup,
        fill_ns_p50: arena_stats.fill_ns_p50,
        fill_ns_p95: arena_stats.fill_ns_p95,
        fill_ns_p99: arena_stats.fill_ns_p99,
        allocs_per_batch: arena_stats.allocs_per_batch,
        plain,
        floor_ns_p50: floor.fill_ns_p50,
        floor_ns_p95: floor.fill_ns_p95,
        floor_ns_p99: floor.fill_ns_p99,
        baseline,
        pipelined,
        huge_page_bytes: None,
    })
}

/// The pipelined loader over the same offsets, its consumer reading each
/// batch and holding it for `step_ns`.
fn pipelined(
    corpus: &Corpus,
    cfg: &IngestBenchConfig,
    step_ns: u64,
) -> Result<PipelineStats, IngestError> {
    let pcfg = pipeline::PipelineConfig {
        batch: cfg.batch,
        block: cfg.block,
        warmup: cfg.warmup,
        iters: cfg.iters,
        seed: cfg.seed,
    };
    pipeline::run(corpus, &pcfg, |_, slot| {
        let t0 = Instant::now();
        let x = slot.batch.x();
        black_box(x.iter().fold(0i64, |a, &v| a.wrapping_add(v)));
        while (t0.elapsed().as_nanos() as u64) < step_ns {
            std::hint::spin_loop();
        }
        Ok(())
    })
}

/// Runs `one` for the warm-up and the timed iterations; `one` returns the
/// batch's fill time in ns and the allocation calls it made.
fn time_loader(
    cfg: &IngestBenchConfig,
    times: &mut Vec<u64>,
    mut one: impl FnMut(usize) -> Result<(u64, u64), IngestError>,
) -> Result<FillStats, IngestError> {
    let installed = alloc::is_installed();
    for i in 0..cfg.warmup {
        one(i)?;
    }
    times.clear(); // keeps its capacity: no allocation in the loop below
    let mut allocs = 0u64;
    for i in 0..cfg.iters {
        let (ns, a) = one(i)?;
        times.push(ns);
        allocs += a;
    }
    times.sort_unstable();
    Ok(FillStats {
        fill_ns_p50: percentile(times, 0.50),
        fill_ns_p95: percentile(times, 0.95),
        fill_ns_p99: percentile(times, 0.99),
        allocs_per_batch: installed.then(|| allocs as f64 / cfg.iters.max(1) as f64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_reports_zero_allocations_for_the_arena() {
        let corpus = Corpus::generate(50_000, 2);
        let cfg = IngestBenchConfig {
            batch: 8,
            block: 64,
            iters: 200,
            warmup: 10,
            ..IngestBenchConfig::default()
        };
        let r = bench(&corpus, &cfg).unwrap();
        assert_eq!(r.allocs_per_batch, Some(0.0));
        let b = r.baseline.expect("baseline ran");
        assert!(b.allocs_per_batch.unwrap() >= 2.0 * 8.0 + 2.0);
        assert!(r.fill_ns_p50 <= r.fill_ns_p95 && r.fill_ns_p95 <= r.fill_ns_p99);
        assert!(r.floor_ns_p50 <= r.floor_ns_p95 && r.floor_ns_p95 <= r.floor_ns_p99);
        assert_eq!((r.iters, r.corpus_tokens), (200, 50_000));
        let r = bench(
            &corpus,
            &IngestBenchConfig {
                baseline: false,
                ..cfg.clone()
            },
        )
        .unwrap();
        assert!(r.baseline.is_none() && r.pipelined.is_none());
        assert_eq!(r.plain.allocs_per_batch, Some(0.0));
        // Pipelined: nothing allocated per batch on either thread, blocked
        // or not (a 20 µs step lets the producer run ahead and wait).
        let r = bench(
            &corpus,
            &IngestBenchConfig {
                baseline: false,
                pipelined_step_ns: Some(20_000),
                ..cfg
            },
        )
        .unwrap();
        let p = r.pipelined.expect("pipelined ran");
        assert_eq!(p.step_ns, 20_000);
        assert_eq!(p.stats.consumer_allocs_per_batch, Some(0.0));
        assert_eq!(p.stats.producer_allocs_per_batch, Some(0.0));
        assert!(p.stats.handoff_ns_p50 <= p.stats.handoff_ns_p99);
    }
}
