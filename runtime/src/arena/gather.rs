//! The ingest kernel: gather rows of `u16` tokens into `i64` rows, with the
//! widest vector instructions the CPU has.
//!
//! The loop is plain safe Rust that LLVM vectorises. The default x86-64
//! target only promises SSE2, where widening `u16` to `i64` takes a chain of
//! unpacks; with AVX2 it is one `vpmovzxwq` per four tokens. So on x86-64 the
//! same loop is also compiled for AVX2 and chosen at run time when the CPU has
//! it (checked once by std and cached), which is what the C reference gets
//! from `-mavx2` at build time.

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
    assert_eq!(x.len(), offsets.len() * block, "x is [B, T]");
    assert_eq!(y.len(), offsets.len() * block, "y is [B, T]");
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: `gather_rows_avx2` only requires the AVX2 target feature, which the
        // CPU was just found to have.
        unsafe { gather_rows_avx2(tokens, offsets, block, x, y) };
        return;
    }
    gather_rows_generic(tokens, offsets, block, x, y);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn gather_rows_avx2(tokens: &[u16], offsets: &[u64], block: usize, x: &mut [i64], y: &mut [i64]) {
    gather_rows_generic(tokens, offsets, block, x, y);
}

#[inline(always)]
fn gather_rows_generic(
    tokens: &[u16],
    offsets: &[u64],
    block: usize,
    x: &mut [i64],
    y: &mut [i64],
) {
    let rows = x.chunks_exact_mut(block).zip(y.chunks_exact_mut(block));
    for ((xr, yr), &off) in rows.zip(offsets) {
        let src = &tokens[off as usize..off as usize + block + 1];
        for (d, &s) in xr.iter_mut().zip(&src[..block]) {
            *d = i64::from(s);
        }
        for (d, &s) in yr.iter_mut().zip(&src[1..]) {
            *d = i64::from(s);
        }
    }
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
            gather_rows_generic(&tokens, &offsets, block, &mut gx, &mut gy);
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
    #[should_panic(expected = "x is [B, T]")]
    fn refuses_a_wrongly_sized_output() {
        let tokens = [1u16; 10];
        let (mut x, mut y) = (vec![0i64; 3], vec![0i64; 4]);
        gather_rows(&tokens, &[0, 1], 2, &mut x, &mut y);
    }
}
