//! A pipelined ingest: a producer thread fills batch N+1 while the consumer
//! (the training step) holds batch N.
//!
//! Two preallocated slots (a [`BatchArena`] and its offsets each) change
//! hands over two bounded channels of slot indices: `filled` (producer to
//! consumer) and `free` (back). Whoever holds an index holds that slot; the
//! slot's mutex is never contended, it only tells the compiler what the
//! protocol already guarantees. Nothing is allocated per batch on either
//! thread: the slots, the channels' buffers and the offsets exist before the
//! first batch, and [`run`] counts both threads' allocation calls to show it.
//!
//! The producer draws offsets one batch ahead, as a data loader's sampler
//! does, and fills with [`BatchArena::fill_ahead`], so each fill also
//! prefetches the rows of the batch after it.

use std::sync::Mutex;
use std::time::Instant;

use crossbeam_channel::bounded;
use serde::Serialize;

use super::ingest::{BatchArena, Corpus, IngestError, OffsetSampler};
use super::percentile;
use crate::alloc;

/// One slot: a batch and the offsets it was filled from.
#[derive(Debug)]
pub struct Slot {
    pub batch: BatchArena,
    pub offsets: Vec<u64>,
}

/// Settings of a pipelined run.
#[derive(Debug, Clone)]
pub struct PipelineConfig {
    pub batch: usize,
    pub block: usize,
    /// Batches consumed before the timed ones (their hand-offs are not kept).
    pub warmup: usize,
    /// Timed batches.
    pub iters: usize,
    /// Seed of the offset stream.
    pub seed: u64,
}

/// What a pipelined run measured.
#[derive(Debug, Clone, Serialize)]
pub struct PipelineStats {
    /// From the consumer asking for the next batch to holding it.
    pub handoff_ns_p50: u64,
    pub handoff_ns_p95: u64,
    pub handoff_ns_p99: u64,
    /// The producer's fill times (prefetching the batch after), timed batches.
    pub fill_ns_p50: u64,
    pub fill_ns_p99: u64,
    /// Allocation calls per timed batch on the consumer's thread (asking,
    /// holding, handing back, and whatever `consume` did), and on the
    /// producer's (drawing, filling, handing over); `None` when the counting
    /// allocator is not installed.
    pub consumer_allocs_per_batch: Option<f64>,
    pub producer_allocs_per_batch: Option<f64>,
}

/// Runs `cfg.warmup + cfg.iters` batches through two slots: a producer
/// thread fills them, this thread hands each to `consume` (batch index,
/// slot) and times how long it waited for it. An error from either side
/// stops both and is returned.
pub fn run(
    corpus: &Corpus,
    cfg: &PipelineConfig,
    mut consume: impl FnMut(usize, &Slot) -> Result<(), IngestError>,
) -> Result<PipelineStats, IngestError> {
    let tokens = corpus.tokens();
    let total = cfg.warmup + cfg.iters;
    let mut sampler = OffsetSampler::new(tokens.len(), cfg.block, cfg.seed)?;
    let slot = || -> Result<Mutex<Slot>, IngestError> {
        Ok(Mutex::new(Slot {
            batch: BatchArena::new(cfg.batch, cfg.block)?,
            offsets: vec![0; cfg.batch],
        }))
    };
    let slots = [slot()?, slot()?];
    // The first time a thread blocks on a channel, crossbeam allocates (its
    // thread's wait context, the channel's list of waiters) and keeps it. A
    // side that first blocked inside the timed iterations (on a loaded
    // machine, say) counted that one allocation as the hot path's. So each
    // side is made to block once in the warm-up: each waits BLOCK_ONCE for
    // the other once, at the first batch.
    const BLOCK_ONCE: std::time::Duration = std::time::Duration::from_millis(20);
    let (filled_tx, filled_rx) = bounded::<usize>(slots.len());
    let (free_tx, free_rx) = bounded::<usize>(slots.len());
    // And, whatever the scheduler does, each side first blocks here, on the
    // channel it will wait on, before anything is timed or counted: an
    // empty channel's receive with a short timeout registers the thread's
    // wait context and the channel's waiter list (a loaded machine made the
    // consumer's first block land in the counted batches: 0.01 a batch).
    let prime = std::time::Duration::from_micros(50);
    let _ = filled_rx.recv_timeout(prime);
    let _ = free_rx.recv_timeout(prime);
    for i in 0..slots.len() {
        free_tx.send(i).expect("the receiver is alive");
    }
    let mut handoffs = Vec::with_capacity(cfg.iters);
    let installed = alloc::is_installed();

    std::thread::scope(|s| {
        let slots = &slots;
        let producer = s.spawn(move || -> Result<(Vec<u64>, u64), IngestError> {
            // This thread's wait context (the free channel's waiter list
            // was primed above).
            let (_keep, idle) = bounded::<()>(1);
            let _ = idle.recv_timeout(prime);
            let mut fills = Vec::with_capacity(cfg.iters);
            let mut next = vec![0u64; cfg.batch];
            sampler.draw(&mut next);
            let mut allocs = 0u64;
            for i in 0..total {
                // The consumer hung up: it stopped early (its error is reported).
                let Ok(idx) = free_rx.recv() else { break };
                let a0 = alloc::thread_allocs();
                let mut slot = slots[idx].lock().unwrap_or_else(|e| e.into_inner());
                let slot = &mut *slot;
                slot.offsets.copy_from_slice(&next);
                sampler.draw(&mut next);
                let t0 = Instant::now();
                slot.batch.fill_ahead(tokens, &slot.offsets, &next)?;
                let ns = t0.elapsed().as_nanos() as u64;
                let a1 = alloc::thread_allocs();
                if i >= cfg.warmup {
                    fills.push(ns);
                    allocs += a1 - a0;
                }
                if i == 0 && cfg.warmup > 0 {
                    // Make the consumer wait once in the warm-up (see
                    // BLOCK_ONCE).
                    std::thread::sleep(BLOCK_ONCE);
                }
                if filled_tx.send(idx).is_err() {
                    break;
                }
            }
            Ok((fills, allocs))
        });

        let mut consumer_allocs = 0u64;
        let mut consumed = Ok(());
        for i in 0..total {
            let a0 = alloc::thread_allocs();
            let t0 = Instant::now();
            // The producer stopped: its error is reported below.
            let Ok(idx) = filled_rx.recv() else { break };
            let slot = slots[idx].lock().unwrap_or_else(|e| e.into_inner());
            let waited = t0.elapsed().as_nanos() as u64;
            consumed = consume(i, &slot);
            drop(slot);
            if i == 0 && cfg.warmup > 0 {
                // And the producer (see BLOCK_ONCE).
                std::thread::sleep(BLOCK_ONCE);
            }
            // Refused once the producer has filled its last batch (or failed:
            // then `recv` above ends the loop and its error is reported).
            let _ = free_tx.send(idx);
            if i >= cfg.warmup {
                handoffs.push(waited);
                consumer_allocs += alloc::thread_allocs() - a0;
            }
            if consumed.is_err() {
                break;
            }
        }
        // Unblock a producer still waiting for a slot, then collect it.
        drop(free_tx);
        drop(filled_rx);
        let (mut fills, producer_allocs) = producer
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))?;
        consumed?;
        handoffs.sort_unstable();
        fills.sort_unstable();
        let per = |n: u64| installed.then(|| n as f64 / cfg.iters.max(1) as f64);
        Ok(PipelineStats {
            handoff_ns_p50: percentile(&handoffs, 0.50),
            handoff_ns_p95: percentile(&handoffs, 0.95),
            handoff_ns_p99: percentile(&handoffs, 0.99),
            fill_ns_p50: percentile(&fills, 0.50),
            fill_ns_p99: percentile(&fills, 0.99),
            consumer_allocs_per_batch: per(consumer_allocs),
            producer_allocs_per_batch: per(producer_allocs),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena::gather_rows;

    /// Every batch the pipeline hands over is the plain gather of the
    /// offsets it was filled from, and those offsets are the sampler's
    /// stream in order: nothing skipped, repeated or torn between slots.
    #[test]
    fn every_pipelined_batch_is_the_plain_gather_of_the_sampler_s_offsets() {
        let corpus = Corpus::generate(50_000, 3);
        let (batch, block) = (8, 33);
        let cfg = PipelineConfig {
            batch,
            block,
            warmup: 5,
            iters: 300,
            seed: 11,
        };
        let mut expected = OffsetSampler::new(corpus.len(), block, cfg.seed).unwrap();
        let mut want = vec![0u64; batch];
        let (mut gx, mut gy) = (vec![0i64; batch * block], vec![0i64; batch * block]);
        let mut seen = 0;
        let stats = run(&corpus, &cfg, |i, slot| {
            assert_eq!(i, seen);
            seen += 1;
            expected.draw(&mut want);
            assert_eq!(slot.offsets, want, "batch {i}");
            gather_rows(corpus.tokens(), &want, block, &mut gx, &mut gy);
            assert_eq!(slot.batch.x(), &gx[..], "batch {i}");
            assert_eq!(slot.batch.y(), &gy[..], "batch {i}");
            // Hold it a little, as a training step would.
            std::thread::yield_now();
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, 305);
        assert!(stats.handoff_ns_p50 <= stats.handoff_ns_p99);
        assert!(stats.fill_ns_p50 > 0);
    }

    #[test]
    fn an_error_on_either_side_stops_both_and_is_returned() {
        let corpus = Corpus::generate(10_000, 3);
        let cfg = PipelineConfig {
            batch: 4,
            block: 16,
            warmup: 0,
            iters: 1_000,
            seed: 1,
        };
        let mut n = 0;
        let e = run(&corpus, &cfg, |i, _| {
            n += 1;
            if i == 7 {
                Err(IngestError::BadShape { batch: 0, block: 0 })
            } else {
                Ok(())
            }
        })
        .unwrap_err();
        assert!(matches!(e, IngestError::BadShape { .. }), "{e}");
        assert_eq!(n, 8);
        // A corpus too short for the block fails before any thread starts.
        let tiny = Corpus::generate(10, 3);
        assert!(run(&tiny, &cfg, |_, _| Ok(())).is_err());
    }
}
