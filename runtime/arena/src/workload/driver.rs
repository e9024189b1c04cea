//! Runs the built-in workloads in time slices, for soaks and the live view.
//!
//! Everything is built in [`Driver::new`]; [`Driver::run_slice`] then works
//! for a given time without touching the heap, publishing progress through a
//! [`WorkProgress`] as it goes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::ingest::{BatchArena, Corpus, IngestError, OffsetSampler, baseline_batch};
use super::ops1b::{AnyRing, Layout};
use crate::workload::progress::WorkProgress;

/// Which workload a run drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Workload {
    /// The ring arena, in rounds of a million operations.
    Ops1b,
    /// Batch ingestion, batch after batch (or one batch per step when paced).
    Ingest,
    /// Both, alternating; when paced, ops1b fills the time between steps.
    Both,
    /// Nothing: the telemetry of an idle process, as a baseline.
    Idle,
    /// The allocating per-sample loader that ingest replaces, paced like
    /// ingest: about 140 allocation calls and a fresh `[B, T]` pair per
    /// batch, so its allocator and page-table traffic can be recorded and
    /// compared with the arena's zero. The only workload that allocates.
    IngestBaseline,
}

impl Workload {
    /// Whether it feeds batches (and so has a batch, block and corpus).
    pub fn ingests(self) -> bool {
        matches!(
            self,
            Workload::Ingest | Workload::Both | Workload::IngestBaseline
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            Workload::Ops1b => "ops1b",
            Workload::Ingest => "ingest",
            Workload::Both => "both",
            Workload::Idle => "idle",
            Workload::IngestBaseline => "ingest-baseline",
        }
    }
}

/// Settings of a [`Driver`].
#[derive(Debug, Clone)]
pub struct DriverConfig {
    pub workload: Workload,
    /// Pace ingest like a training loop: one batch per step of this length.
    pub step: Option<Duration>,
    pub batch: usize,
    pub block: usize,
    pub corpus_tokens: usize,
    pub seed: u64,
    /// How the ops1b ring lays out what an operation touches.
    pub layout: Layout,
}

impl Default for DriverConfig {
    fn default() -> Self {
        Self {
            workload: Workload::Both,
            step: None,
            batch: 64,
            block: 256,
            corpus_tokens: super::ingest::DEFAULT_CORPUS_TOKENS,
            seed: 1337,
            layout: Layout::Aos,
        }
    }
}

/// Operations per ops1b round (about 2.5 ms on the build machine).
const ROUND: u64 = 1 << 20;

struct Ingest {
    corpus: Corpus,
    arena: BatchArena,
    sampler: OffsetSampler,
    offsets: Vec<u64>,
    /// The next batch's offsets, drawn ahead so its rows are prefetched
    /// while this batch is copied (as a data loader's sampler runs ahead).
    next: Vec<u64>,
    /// Fill with the allocating baseline instead of the arena.
    baseline: bool,
}

/// The built-in workloads, ready to run.
pub struct Driver {
    cfg: DriverConfig,
    ring: Option<AnyRing>,
    ingest: Option<Ingest>,
    progress: Arc<WorkProgress>,
    next_step: Option<Instant>,
    steps: u64,
    tokens: u64,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("cfg", &self.cfg)
            .field("steps", &self.steps)
            .finish()
    }
}

impl Driver {
    /// Builds what the workload needs (the ring, the corpus and batch arena).
    pub fn new(cfg: DriverConfig, progress: Arc<WorkProgress>) -> Result<Self, IngestError> {
        let wants_ring = matches!(cfg.workload, Workload::Ops1b | Workload::Both);
        let wants_ingest = cfg.workload.ingests();
        let ring = if wants_ring {
            Some(AnyRing::new(cfg.layout)?)
        } else {
            None
        };
        let ingest = if wants_ingest {
            let corpus = Corpus::generate(cfg.corpus_tokens, cfg.seed.wrapping_add(1));
            let mut sampler = OffsetSampler::new(corpus.len(), cfg.block, cfg.seed)?;
            let mut next = vec![0; cfg.batch];
            sampler.draw(&mut next);
            Some(Ingest {
                sampler,
                arena: BatchArena::new(cfg.batch, cfg.block)?,
                offsets: vec![0; cfg.batch],
                next,
                baseline: cfg.workload == Workload::IngestBaseline,
                corpus,
            })
        } else {
            None
        };
        Ok(Self {
            cfg,
            ring,
            ingest,
            progress,
            next_step: None,
            steps: 0,
            tokens: 0,
        })
    }

    pub fn config(&self) -> &DriverConfig {
        &self.cfg
    }

    /// Steps completed (paced ingest only).
    pub fn steps(&self) -> u64 {
        self.steps
    }

    fn batch(&mut self) -> Result<(), IngestError> {
        let Some(ing) = self.ingest.as_mut() else {
            return Ok(());
        };
        std::mem::swap(&mut ing.offsets, &mut ing.next);
        ing.sampler.draw(&mut ing.next);
        let t0 = Instant::now();
        if ing.baseline {
            let batch = baseline_batch(ing.corpus.tokens(), &ing.offsets, self.cfg.block)?;
            std::hint::black_box(&batch);
        } else {
            ing.arena
                .fill_ahead(ing.corpus.tokens(), &ing.offsets, &ing.next)?;
            std::hint::black_box(ing.arena.x());
        }
        self.progress.record_batch(t0.elapsed().as_nanos() as u64);
        Ok(())
    }

    fn round(&mut self) {
        if let Some(ring) = self.ring.as_mut() {
            std::hint::black_box(ring.run_observed(ROUND, Some(&self.progress)));
        }
    }

    /// Works for about `budget`; `on_step(step, tokens_so_far)` is called
    /// after each paced step. Allocates nothing, but for the baseline.
    pub fn run_slice(
        &mut self,
        budget: Duration,
        on_step: &mut dyn FnMut(u64, u64),
    ) -> Result<(), IngestError> {
        let end = Instant::now() + budget;
        if let Some(step) = self.cfg.step.filter(|_| self.ingest.is_some()) {
            let mut next = *self.next_step.get_or_insert_with(Instant::now);
            loop {
                let now = Instant::now();
                if now >= next {
                    self.batch()?;
                    let tokens = (self.cfg.batch * self.cfg.block) as u64;
                    self.steps += 1;
                    self.tokens += tokens;
                    self.progress.record_step(tokens);
                    on_step(self.steps, self.tokens);
                    next += step;
                    if next < now {
                        next = now + step; // fell behind: do not burst to catch up
                    }
                    self.next_step = Some(next);
                    continue;
                }
                if now >= end {
                    return Ok(());
                }
                // The rest of the step is the GPU's: idle, or ops1b for `both`.
                if self.ring.is_some() {
                    self.round();
                } else {
                    std::thread::sleep(next.min(end) - now);
                }
            }
        }
        match self.cfg.workload {
            Workload::Idle => std::thread::sleep(budget),
            Workload::Ops1b => {
                while Instant::now() < end {
                    self.round();
                }
            }
            Workload::Ingest | Workload::Both | Workload::IngestBaseline => {
                while Instant::now() < end {
                    self.round();
                    // About as long in ingest as the round took (~2.5 ms of batches).
                    for _ in 0..256 {
                        self.batch()?;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc;

    fn small(workload: Workload, step: Option<Duration>) -> DriverConfig {
        DriverConfig {
            workload,
            step,
            batch: 8,
            block: 32,
            corpus_tokens: 100_000,
            seed: 1,
            layout: Layout::Aos,
        }
    }

    #[test]
    fn slices_do_the_work_without_allocating() {
        for w in [
            Workload::Ops1b,
            Workload::Ingest,
            Workload::Both,
            Workload::Idle,
        ] {
            let progress = WorkProgress::new();
            let mut d = Driver::new(small(w, None), progress.clone()).unwrap();
            let (r, n) = alloc::count_thread_allocs(|| {
                d.run_slice(Duration::from_millis(30), &mut |_, _| {})
            });
            r.unwrap();
            assert_eq!(n, Some(0), "{w:?}");
            let ops = progress.ops() > 0;
            let batches = progress.batches() > 0;
            match w {
                Workload::Ops1b => assert!(ops && !batches),
                Workload::Ingest | Workload::Both => {
                    assert!(ops == (w == Workload::Both) && batches)
                }
                Workload::Idle => assert!(!ops && !batches),
                Workload::IngestBaseline => unreachable!(),
            }
        }
        // The hot-field ring does the same operations, allocating nothing,
        // and ends where the 64-byte one does after the same rounds.
        let cfg = DriverConfig {
            layout: Layout::Soa,
            ..small(Workload::Ops1b, None)
        };
        let progress = WorkProgress::new();
        let mut d = Driver::new(cfg, progress.clone()).unwrap();
        let (r, n) =
            alloc::count_thread_allocs(|| d.run_slice(Duration::from_millis(30), &mut |_, _| {}));
        r.unwrap();
        assert_eq!(n, Some(0));
        assert!(progress.ops() > 0 && progress.ops().is_multiple_of(ROUND));
        assert_eq!(
            AnyRing::new(Layout::Aos).unwrap().run_observed(ROUND, None),
            AnyRing::new(Layout::Soa).unwrap().run_observed(ROUND, None)
        );
    }

    #[test]
    fn the_baseline_allocates_per_sample_like_a_loader() {
        let progress = WorkProgress::new();
        let cfg = small(Workload::IngestBaseline, Some(Duration::from_millis(5)));
        let mut d = Driver::new(cfg, progress.clone()).unwrap();
        let (r, n) =
            alloc::count_thread_allocs(|| d.run_slice(Duration::from_millis(40), &mut |_, _| {}));
        r.unwrap();
        let batches = progress.batches();
        assert!(batches >= 1, "no batch in 40 ms");
        // Per batch of 8: an x and a y vector per sample, the two lists that
        // hold them growing, and the two collated outputs.
        let per_batch = n.expect("counted") as f64 / batches as f64;
        assert!(
            (18.0..=30.0).contains(&per_batch),
            "{per_batch} allocations a batch"
        );
        assert_eq!(progress.ops(), 0);
    }

    #[test]
    fn paced_ingest_takes_one_batch_per_step() {
        let progress = WorkProgress::new();
        let mut d = Driver::new(
            small(Workload::Ingest, Some(Duration::from_millis(10))),
            progress.clone(),
        )
        .unwrap();
        let mut seen = Vec::new();
        d.run_slice(Duration::from_millis(105), &mut |s, t| seen.push((s, t)))
            .unwrap();
        // Steps at 0, 10, …, 100 ms: 11 on an idle machine, fewer when the scheduler
        // is late. Never more: unpaced, the slice would take thousands of batches.
        assert!((1..=12).contains(&seen.len()), "{} steps", seen.len());
        assert_eq!(seen[0], (1, 256));
        assert_eq!(progress.batches(), seen.len() as u64);
        assert_eq!(
            (progress.steps(), progress.tokens()),
            (seen.len() as u64, 256 * seen.len() as u64)
        );
    }
}
