//! `ingest`: nanoGPT-style batch token ingestion.
//!
//! nanoGPT's `get_batch` draws `B` random offsets into a token corpus and
//! stacks `x[b] = corpus[off_b .. off_b + T]` and
//! `y[b] = corpus[off_b + 1 .. off_b + T + 1]`, widened to `int64`, into two
//! `[B, T]` tensors. [`BatchArena`] does the same into two buffers allocated
//! once, 64-byte aligned, behind a [`BatchSlot64`] header: no heap traffic per
//! batch. [`baseline_batch`] does it the way a typical loader does (a fresh
//! vector per sample for x and for y, then a collate into fresh `[B, T]`
//! vectors, as `torch.stack` over per-sample tensors) so the two can be
//! compared on the same offsets.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use super::SplitMix64;
use crate::arena::{
    ArenaError, BatchSlot64, FlatArena, MappedTokens, anon_tokens, gather_rows, gather_rows_ahead,
    map_tokens,
};

/// Generated corpora use token values below this, like a character-level vocabulary.
pub const GENERATED_VOCAB: u64 = 168;

/// Tokens in the corpus the seed's figures were measured on (nanoGPT shakespeare_char
/// scaled up); the default size of a generated corpus.
pub const DEFAULT_CORPUS_TOKENS: usize = 16_671_459;

/// Why an ingest workload could not be set up or run.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    // Causes are part of the messages, not also `source()`s: a chain of
    // errors says each once.
    #[error("cannot open corpus {path}: {cause}")]
    Open {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("cannot read corpus {path}: {cause}")]
    Map {
        path: PathBuf,
        cause: crate::arena::MapError,
    },
    #[error("batch size and block size must be at least 1 (got batch {batch}, block {block})")]
    BadShape { batch: usize, block: usize },
    #[error("a batch of {batch} × {block} tokens is too large for this machine")]
    ShapeTooLarge { batch: usize, block: usize },
    #[error("the corpus has {tokens} tokens; a block of {block} needs at least {needed}")]
    CorpusTooShort {
        tokens: usize,
        block: usize,
        needed: usize,
    },
    #[error("a batch of {batch} rows needs {batch} offsets, got {got}")]
    OffsetCount { batch: usize, got: usize },
    #[error("offset {offset} is out of range: offsets must be below {limit}")]
    OffsetOutOfRange { offset: u64, limit: u64 },
    #[error("cannot allocate the batch buffers: {0}")]
    Arena(ArenaError),
}

impl From<ArenaError> for IngestError {
    fn from(e: ArenaError) -> Self {
        IngestError::Arena(e)
    }
}

/// Where a corpus came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CorpusSource {
    Generated { seed: u64 },
    File { path: PathBuf },
}

#[derive(Debug)]
enum Tokens {
    Owned(Vec<u16>),
    Mapped(MappedTokens),
}

/// A token corpus: little-endian `u16`s, memory-mapped or generated.
#[derive(Debug)]
pub struct Corpus {
    tokens: Tokens,
    source: CorpusSource,
}

impl Corpus {
    /// `len` tokens below [`GENERATED_VOCAB`], reproducible from `seed` (the C
    /// reference in `bench/c/` generates the same sequence).
    pub fn generate(len: usize, seed: u64) -> Self {
        let mut rng = SplitMix64::new(seed);
        let tokens = (0..len)
            .map(|_| rng.below(GENERATED_VOCAB) as u16)
            .collect();
        Self {
            tokens: Tokens::Owned(tokens),
            source: CorpusSource::Generated { seed },
        }
    }

    /// [`generate`](Self::generate), the tokens in anonymous memory the
    /// kernel is asked to back with huge pages ([`anon_tokens`]): what the
    /// TLB costs a fill, measured by comparison.
    pub fn generate_huge(len: usize, seed: u64) -> Result<Self, IngestError> {
        let mut rng = SplitMix64::new(seed);
        let tokens =
            anon_tokens(len, true, || rng.below(GENERATED_VOCAB) as u16).map_err(|source| {
                IngestError::Map {
                    path: PathBuf::from("(anonymous memory)"),
                    cause: source,
                }
            })?;
        Ok(Self {
            tokens: Tokens::Mapped(tokens),
            source: CorpusSource::Generated { seed },
        })
    }

    /// Maps a nanoGPT `train.bin`-style file (little-endian `u16`s) read-only.
    pub fn open(path: &Path) -> Result<Self, IngestError> {
        let file = File::open(path).map_err(|source| IngestError::Open {
            path: path.to_owned(),
            cause: source,
        })?;
        let mapped = map_tokens(&file).map_err(|source| IngestError::Map {
            path: path.to_owned(),
            cause: source,
        })?;
        Ok(Self {
            tokens: Tokens::Mapped(mapped),
            source: CorpusSource::File {
                path: path.to_owned(),
            },
        })
    }

    /// The tokens.
    #[inline]
    pub fn tokens(&self) -> &[u16] {
        match &self.tokens {
            Tokens::Owned(v) => v,
            Tokens::Mapped(m) => m.tokens(),
        }
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.tokens().len()
    }

    /// True when the corpus holds no token.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Where the tokens came from.
    pub fn source(&self) -> &CorpusSource {
        &self.source
    }
}

/// Exclusive upper bound of batch offsets for a corpus of `tokens` and blocks of
/// `block`: offsets lie in `[0, tokens − block − 1)`, so `y`'s last token exists.
pub fn offset_limit(tokens: usize, block: usize) -> Result<u64, IngestError> {
    let needed = block + 2;
    if tokens < needed {
        return Err(IngestError::CorpusTooShort {
            tokens,
            block,
            needed,
        });
    }
    Ok((tokens - block - 1) as u64)
}

/// Draws batch offsets, uniformly in `[0, limit)`, from a seeded stream.
#[derive(Debug, Clone)]
pub struct OffsetSampler {
    rng: SplitMix64,
    limit: u64,
}

impl OffsetSampler {
    pub fn new(corpus_tokens: usize, block: usize, seed: u64) -> Result<Self, IngestError> {
        Ok(Self {
            rng: SplitMix64::new(seed),
            limit: offset_limit(corpus_tokens, block)?,
        })
    }

    /// Fills `out` with fresh offsets. Allocates nothing.
    #[inline]
    pub fn draw(&mut self, out: &mut [u64]) {
        for o in out {
            *o = self.rng.below(self.limit);
        }
    }
}

/// Two preallocated `[B, T]` buffers of `i64` (x and y), each starting on a
/// cache line, and a [`BatchSlot64`] header. Built once; every
/// [`fill`](Self::fill) rewrites them in place.
#[derive(Debug)]
pub struct BatchArena {
    header: FlatArena<BatchSlot64>,
    x: FlatArena<i64>,
    y: FlatArena<i64>,
    batch: usize,
    block: usize,
    origin: Instant,
}

impl BatchArena {
    /// Allocates the buffers for batches of `batch` rows of `block` tokens.
    pub fn new(batch: usize, block: usize) -> Result<Self, IngestError> {
        if batch == 0 || block == 0 {
            return Err(IngestError::BadShape { batch, block });
        }
        let n = batch
            .checked_mul(block)
            .filter(|&n| {
                u32::try_from(batch).is_ok() && u32::try_from(block).is_ok() && n < usize::MAX / 8
            })
            .ok_or(IngestError::ShapeTooLarge { batch, block })?;
        let mut header = FlatArena::new(1)?;
        header[0] = BatchSlot64 {
            block_size: block as u32,
            batch_size: batch as u32,
            token_count: n as u64,
            stride: block as u64,
            ..BatchSlot64::default()
        };
        Ok(Self {
            header,
            x: FlatArena::new(n)?,
            y: FlatArena::new(n)?,
            batch,
            block,
            origin: Instant::now(),
        })
    }

    /// Writes the batch for `offsets` (one per row): `x[b][t] = tokens[off_b + t]`,
    /// `y[b][t] = tokens[off_b + t + 1]`. Touches no heap.
    pub fn fill(&mut self, tokens: &[u16], offsets: &[u64]) -> Result<(), IngestError> {
        self.check(tokens, offsets)?;
        gather_rows(tokens, offsets, self.block, &mut self.x, &mut self.y);
        self.stamp();
        Ok(())
    }

    /// [`fill`](Self::fill), prefetching the rows of the next batch
    /// (`next`, one offset per row, drawn ahead) as it goes: the next fill
    /// then finds its rows in the cache. The same batch is
    /// written either way.
    pub fn fill_ahead(
        &mut self,
        tokens: &[u16],
        offsets: &[u64],
        next: &[u64],
    ) -> Result<(), IngestError> {
        self.check(tokens, offsets)?;
        self.check(tokens, next)?;
        gather_rows_ahead(tokens, offsets, next, self.block, &mut self.x, &mut self.y);
        self.stamp();
        Ok(())
    }

    /// One offset per row, each leaving room for a row and its target.
    fn check(&self, tokens: &[u16], offsets: &[u64]) -> Result<(), IngestError> {
        if offsets.len() != self.batch {
            return Err(IngestError::OffsetCount {
                batch: self.batch,
                got: offsets.len(),
            });
        }
        let limit = offset_limit(tokens.len(), self.block)?;
        match offsets.iter().find(|&&o| o >= limit) {
            Some(&offset) => Err(IngestError::OffsetOutOfRange { offset, limit }),
            None => Ok(()),
        }
    }

    /// Counts the batch and stamps its time in the header.
    fn stamp(&mut self) {
        let h = &mut self.header[0];
        h.batch_id += 1;
        h.timestamp_nanos = u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
    }

    /// Writes both outputs without reading the corpus: every input `v`,
    /// every target `v + 1`. What a fill costs at least (the same stores,
    /// no gather): the floor `bench ingest` prints beside the fill.
    pub fn write_only(&mut self, v: i64) {
        self.x.fill(v);
        self.y.fill(v.wrapping_add(1));
        self.header[0].batch_id += 1;
    }

    /// Inputs, row-major `[B, T]`.
    pub fn x(&self) -> &[i64] {
        &self.x
    }

    /// Targets (inputs shifted by one token), row-major `[B, T]`.
    pub fn y(&self) -> &[i64] {
        &self.y
    }

    /// The header of the last batch.
    pub fn header(&self) -> &BatchSlot64 {
        &self.header[0]
    }

    /// Bytes held by the arena (header and both buffers).
    pub fn size_bytes(&self) -> usize {
        self.header.size_bytes() + self.x.size_bytes() + self.y.size_bytes()
    }
}

/// The allocating baseline: what a typical loader does per batch. Each sample
/// becomes a fresh `Vec<i64>` for x and one for y; a collate then stacks them
/// into fresh `[B, T]` vectors. Returns `(x, y)`.
pub fn baseline_batch(
    tokens: &[u16],
    offsets: &[u64],
    block: usize,
) -> Result<(Vec<i64>, Vec<i64>), IngestError> {
    if offsets.is_empty() || block == 0 {
        return Err(IngestError::BadShape {
            batch: offsets.len(),
            block,
        });
    }
    let limit = offset_limit(tokens.len(), block)?;
    let mut xs: Vec<Vec<i64>> = Vec::new();
    let mut ys: Vec<Vec<i64>> = Vec::new();
    for &off in offsets {
        if off >= limit {
            return Err(IngestError::OffsetOutOfRange { offset: off, limit });
        }
        let o = off as usize;
        xs.push(tokens[o..o + block].iter().map(|&t| i64::from(t)).collect());
        ys.push(
            tokens[o + 1..o + block + 1]
                .iter()
                .map(|&t| i64::from(t))
                .collect(),
        );
    }
    Ok((xs.concat(), ys.concat()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc;

    #[test]
    fn generated_corpus_is_reproducible_and_in_vocabulary() {
        let a = Corpus::generate(10_000, 7);
        let b = Corpus::generate(10_000, 7);
        let c = Corpus::generate(10_000, 8);
        assert_eq!(a.tokens(), b.tokens());
        assert_ne!(a.tokens(), c.tokens());
        assert!(a.tokens().iter().all(|&t| u64::from(t) < GENERATED_VOCAB));
        assert_eq!(
            Corpus::generate_huge(10_000, 7).unwrap().tokens(),
            a.tokens()
        );
        // Every symbol shows up in 10k draws from 168.
        let mut seen = [false; GENERATED_VOCAB as usize];
        a.tokens().iter().for_each(|&t| seen[t as usize] = true);
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn arena_fill_matches_the_definition() {
        let corpus = Corpus::generate(5_000, 1);
        let tok = corpus.tokens();
        let (b, t) = (4, 16);
        let mut arena = BatchArena::new(b, t).unwrap();
        let offsets = [0u64, 17, 4_000, (5_000 - t - 2) as u64];
        arena.fill(tok, &offsets).unwrap();
        for (row, &off) in offsets.iter().enumerate() {
            for col in 0..t {
                let o = off as usize + col;
                assert_eq!(arena.x()[row * t + col], i64::from(tok[o]));
                assert_eq!(arena.y()[row * t + col], i64::from(tok[o + 1]));
            }
        }
        let h = arena.header();
        assert_eq!((h.batch_id, h.batch_size, h.block_size), (1, 4, 16));
        assert_eq!((h.token_count, h.stride), (64, 16));
        assert_eq!(arena.x().as_ptr() as usize % 64, 0);
        assert_eq!(arena.y().as_ptr() as usize % 64, 0);
    }

    #[test]
    fn baseline_equals_the_arena_on_the_same_offsets() {
        let corpus = Corpus::generate(100_000, 3);
        let mut sampler = OffsetSampler::new(corpus.len(), 256, 99).unwrap();
        let mut arena = BatchArena::new(64, 256).unwrap();
        let mut offsets = vec![0; 64];
        for _ in 0..20 {
            sampler.draw(&mut offsets);
            arena.fill(corpus.tokens(), &offsets).unwrap();
            let (x, y) = baseline_batch(corpus.tokens(), &offsets, 256).unwrap();
            assert_eq!(arena.x(), &x[..]);
            assert_eq!(arena.y(), &y[..]);
        }
        assert_eq!(arena.header().batch_id, 20);
    }

    #[test]
    fn filling_allocates_nothing_and_the_baseline_allocates_per_sample() {
        let corpus = Corpus::generate(100_000, 3);
        let mut sampler = OffsetSampler::new(corpus.len(), 32, 5).unwrap();
        let mut arena = BatchArena::new(8, 32).unwrap();
        let mut offsets = vec![0; 8];
        let ((), n) = alloc::count_thread_allocs(|| {
            for _ in 0..1000 {
                sampler.draw(&mut offsets);
                arena.fill(corpus.tokens(), &offsets).unwrap();
            }
        });
        assert_eq!(n, Some(0));
        let (_, n) =
            alloc::count_thread_allocs(|| baseline_batch(corpus.tokens(), &offsets, 32).unwrap());
        // Per sample one Vec for x and one for y, the two outer lists (which grow
        // by reallocation while the samples are pushed), and the two collated outputs.
        let n = n.unwrap();
        assert!(n >= 2 * 8 + 2 + 2, "{n}");
    }

    #[test]
    fn offsets_stay_inside_the_corpus() {
        let mut s = OffsetSampler::new(300, 256, 1).unwrap();
        let limit = offset_limit(300, 256).unwrap();
        assert_eq!(limit, 43);
        let mut out = [0u64; 256];
        for _ in 0..100 {
            s.draw(&mut out);
            assert!(out.iter().all(|&o| o < limit));
        }
        // The largest offset still leaves room for y's last token.
        let corpus = Corpus::generate(300, 1);
        let mut arena = BatchArena::new(1, 256).unwrap();
        arena.fill(corpus.tokens(), &[limit - 1]).unwrap();
        assert_eq!(arena.y()[255], i64::from(corpus.tokens()[299 - 1]));
    }

    #[test]
    fn bad_shapes_and_offsets_are_errors_not_panics() {
        assert!(matches!(
            BatchArena::new(0, 8),
            Err(IngestError::BadShape { .. })
        ));
        assert!(matches!(
            BatchArena::new(8, 0),
            Err(IngestError::BadShape { .. })
        ));
        assert!(OffsetSampler::new(10, 8, 0).is_ok());
        assert!(matches!(
            OffsetSampler::new(9, 8, 0),
            Err(IngestError::CorpusTooShort {
                tokens: 9,
                block: 8,
                needed: 10
            })
        ));
        let corpus = Corpus::generate(100, 0);
        let mut arena = BatchArena::new(2, 8).unwrap();
        assert!(matches!(
            arena.fill(corpus.tokens(), &[0]),
            Err(IngestError::OffsetCount { batch: 2, got: 1 })
        ));
        assert!(matches!(
            arena.fill(corpus.tokens(), &[0, 91]),
            Err(IngestError::OffsetOutOfRange {
                offset: 91,
                limit: 91
            })
        ));
        assert!(matches!(
            baseline_batch(corpus.tokens(), &[95], 8),
            Err(IngestError::OffsetOutOfRange {
                offset: 95,
                limit: 91
            })
        ));
    }

    #[test]
    fn opens_a_token_file_and_reports_missing_ones() {
        let path = std::env::temp_dir().join(format!("flatline-corpus-{}.bin", std::process::id()));
        let tokens: Vec<u16> = (0..2_000u16).collect();
        let bytes: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
        std::fs::write(&path, bytes).unwrap();
        let corpus = Corpus::open(&path).unwrap();
        assert_eq!(corpus.tokens(), &tokens[..]);
        assert_eq!(corpus.source(), &CorpusSource::File { path: path.clone() });
        std::fs::remove_file(&path).unwrap();
        let err = Corpus::open(&path).unwrap_err();
        assert!(matches!(err, IngestError::Open { .. }));
        assert!(err.to_string().contains("flatline-corpus-"), "{err}");
    }

    #[test]
    fn the_floor_writes_both_outputs_whole() {
        let mut a = BatchArena::new(4, 16).unwrap();
        a.write_only(7);
        assert!(a.x().iter().all(|&v| v == 7) && a.y().iter().all(|&v| v == 8));
        assert_eq!((a.x().len(), a.header().batch_id), (64, 1));
    }
}
