//! The ingest kernel: gather rows of `u16` tokens into `i64` rows, with the
//! widest vector instructions the CPU has.
//!
//! The loop is plain safe Rust that LLVM vectorises. The default x86-64
//! target only promises SSE2, where widening `u16` to `i64` takes a chain of
//! unpacks; with AVX2 it is one `vpmovzxwq` per four tokens. So on x86-64 the
//! same loop is also compiled for AVX2 and chosen at run time when the CPU has
//! it (checked once by std and cached), which is what the C reference gets
//! from `-mavx2` at build time.
//!
//! [`gather_rows_ahead`] does the same and prefetches the next batch's
//! rows, which a loader knows before it needs them.

/// Writes `x[b][t] = tokens[off_b + t]` and `y[b][t] = tokens[off_b + t + 1]`
/// for every row `b` (rows are `block` long, `x` and `y` row-major).
///
/// # Panics
///
/// If `x` or `y` is not `offsets.len() * block` long, or an offset leaves no
/// room for `block + 1` tokens. Callers validate first; see
/// [`crate::workload::ingest::BatchArena::fill`].
#[inline]
pub fn gather_rows(tokens: &[u16], offsets: &[u64], block: usize, x: &mut [i64], y: &mut [i64]) {
    // No next batch: nothing is prefetched, and the loop is the same one.
    gather_rows_ahead(tokens, offsets, &[], block, x, y);
}

/// [`gather_rows`], asking the CPU meanwhile to bring the rows of the
/// *next* batch (`next`, drawn ahead as a data loader's sampler does) into
/// the cache, so that the next call finds its rows there instead of waiting
/// on memory for each. First the first line of every next row, all
/// together: on 4 KiB pages nearly every row lies on a page the TLB does not
/// hold, and their page walks then overlap one another. Then, while row `b`
/// is copied, the whole of row `b` of the next batch. (One row's prefetch
/// before each copy alone took 1.18x as long on 4 KiB pages: each page walk
/// waited behind a row's stores. Whole rows all up front was as quick there
/// but 1.07x as long on huge pages, where the prefetches only queue for the
/// line-fill buffers.) Prefetches are hints: they never
/// fault, and an offset out of range is simply not prefetched. Where there
/// is no prefetch instruction (not x86-64), this is [`gather_rows`].
///
/// # Panics
///
/// As [`gather_rows`].
#[inline]
pub fn gather_rows_ahead(
    tokens: &[u16],
    offsets: &[u64],
    next: &[u64],
    block: usize,
    x: &mut [i64],
    y: &mut [i64],
) {
    assert_eq!(x.len(), offsets.len() * block, "x is [B, T]");
    assert_eq!(y.len(), offsets.len() * block, "y is [B, T]");
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: `gather_rows_ahead_avx2` only requires the AVX2 target feature,
        // which the CPU was just found to have.
        unsafe { gather_rows_ahead_avx2(tokens, offsets, next, block, x, y) };
        return;
    }
    gather_rows_ahead_generic(tokens, offsets, next, block, x, y);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn gather_rows_ahead_avx2(
    tokens: &[u16],
    offsets: &[u64],
    next: &[u64],
    block: usize,
    x: &mut [i64],
    y: &mut [i64],
) {
    gather_rows_ahead_generic(tokens, offsets, next, block, x, y);
}

#[inline(always)]
fn gather_rows_ahead_generic(
    tokens: &[u16],
    offsets: &[u64],
    next: &[u64],
    block: usize,
    x: &mut [i64],
    y: &mut [i64],
) {
    for &n in next {
        if let Some(first) = usize::try_from(n).ok().and_then(|o| tokens.get(o)) {
            prefetch(first);
        }
    }
    let rows = x.chunks_exact_mut(block).zip(y.chunks_exact_mut(block));
    for (b, ((xr, yr), &off)) in rows.zip(offsets).enumerate() {
        if let Some(&n) = next.get(b) {
            prefetch_row(tokens, n, block + 1);
        }
        copy_row(tokens, off, xr, yr);
    }
}

/// `xr[t] = tokens[off + t]`, `yr[t] = tokens[off + t + 1]`.
#[inline(always)]
fn copy_row(tokens: &[u16], off: u64, xr: &mut [i64], yr: &mut [i64]) {
    let block = xr.len();
    let src = &tokens[off as usize..off as usize + block + 1];
    for (d, &s) in xr.iter_mut().zip(&src[..block]) {
        *d = i64::from(s);
    }
    for (d, &s) in yr.iter_mut().zip(&src[1..]) {
        *d = i64::from(s);
    }
}

/// Tokens per 64-byte cache line.
const TOKENS_PER_LINE: usize = 64 / std::mem::size_of::<u16>();

/// Prefetches every cache line of `tokens[off..off + len]` (what lies in
/// range of it) into all cache levels.
#[inline(always)]
fn prefetch_row(tokens: &[u16], off: u64, len: usize) {
    let Some(row) = usize::try_from(off)
        .ok()
        .and_then(|o| tokens.get(o..o.saturating_add(len)))
    else {
        return;
    };
    // One address in each line the row touches: its start, each line's
    // start after it, and its last token (which may open one more line).
    let lead = (row.as_ptr() as usize / 2) % TOKENS_PER_LINE;
    let mut i = 0;
    while i < row.len() {
        prefetch(&row[i]);
        i += TOKENS_PER_LINE - if i == 0 { lead } else { 0 };
    }
    if let Some(last) = row.last() {
        prefetch(last);
    }
}

/// Asks the CPU to load the line holding `at` into every cache level.
#[inline(always)]
fn prefetch(at: &u16) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 CPU has (it is in
        // the x86-64 baseline this crate is built for). A prefetch reads no data
        // into the program and cannot fault; the pointer comes from a live
        // reference in any case.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(at).cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_paths_gather_the_same_rows() {
        let tokens: Vec<u16> = (0..200u32).map(|i| (i * 331 % 65_521) as u16).collect();
        let offsets = [0u64, 5, 100, 187];
        for block in [1usize, 3, 4, 12] {
            let n = offsets.len() * block;
            let (mut x, mut y) = (vec![-1i64; n], vec![-1i64; n]);
            gather_rows(&tokens, &offsets, block, &mut x, &mut y);
            let (mut gx, mut gy) = (vec![-1i64; n], vec![-1i64; n]);
            gather_rows_ahead_generic(&tokens, &offsets, &[], block, &mut gx, &mut gy);
            assert_eq!((&x, &y), (&gx, &gy), "block {block}");
            for (b, &off) in offsets.iter().enumerate() {
                for t in 0..block {
                    assert_eq!(x[b * block + t], i64::from(tokens[off as usize + t]));
                    assert_eq!(y[b * block + t], i64::from(tokens[off as usize + t + 1]));
                }
            }
        }
    }

    #[test]
    fn gathering_ahead_writes_the_same_rows_as_gathering() {
        let tokens: Vec<u16> = (0..5000u32).map(|i| (i * 7919 % 65_521) as u16).collect();
        let offsets = [0u64, 17, 1000, 4000, 3];
        // The next batch: in range, at the very end, out of range, and shorter
        // than this one; none of it changes what is written.
        let nexts: [&[u64]; 4] = [&[9, 8, 7, 6, 5], &[4999 - 13, 0], &[u64::MAX, 6000], &[]];
        for block in [1usize, 4, 12, 100] {
            let n = offsets.len() * block;
            let (mut gx, mut gy) = (vec![-1i64; n], vec![-1i64; n]);
            gather_rows(&tokens, &offsets, block, &mut gx, &mut gy);
            for next in nexts {
                let (mut x, mut y) = (vec![-1i64; n], vec![-1i64; n]);
                gather_rows_ahead(&tokens, &offsets, next, block, &mut x, &mut y);
                assert_eq!((&x, &y), (&gx, &gy), "block {block}, next {next:?}");
                let (mut x, mut y) = (vec![-1i64; n], vec![-1i64; n]);
                gather_rows_ahead_generic(&tokens, &offsets, next, block, &mut x, &mut y);
                assert_eq!((&x, &y), (&gx, &gy), "generic, block {block}");
            }
        }
    }

    #[test]
    #[should_panic(expected = "x is [B, T]")]
    fn refuses_a_wrongly_sized_output() {
        let tokens = [1u16; 10];
        let (mut x, mut y) = (vec![0i64; 3], vec![0i64; 4]);
        gather_rows(&tokens, &[0, 1], 2, &mut x, &mut y);
    }
}
