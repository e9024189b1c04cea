//! A compiler barrier on one object, as the C references write it.
//!
//! `bench/c/ops1b*.c` end every operation with
//! `__asm__ __volatile__("" : : "r"(ring) : "memory")`: an empty assembly
//! block that takes the ring's address in a register and, because of the
//! memory clobber, makes the compiler assume any memory may have been read
//! or written. The work can then be neither deleted, nor batched, nor
//! vectorised across operations, and costs nothing at run time.
//! `std::hint::black_box(&mut ring)` does the same job but stores the
//! reference to the stack on every call: one more store per operation, which
//! a loop of about one cycle per operation notices (37 % on `ops1b --layout
//! soa`).

/// Tells the compiler that `target` (and any memory) may have been read and
/// written here, at no run-time cost.
#[inline(always)]
pub fn barrier<T: ?Sized>(target: &mut T) {
    #[cfg(not(miri))]
    // SAFETY: the template is a comment: no instruction runs, no register
    // but the input is named, the stack is not touched (`nostack`) and the
    // flags are kept (`preserves_flags`). Without `nomem`, the compiler must
    // assume the block reads and writes memory, which is the point.
    unsafe {
        std::arch::asm!(
            "/* barrier on {0} */",
            in(reg) (target as *mut T).cast::<u8>(),
            options(nostack, preserves_flags)
        );
    }
    // Miri cannot run assembly; black_box is its equivalent there.
    #[cfg(miri)]
    std::hint::black_box(target);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The barrier changes no result: stores before it are seen after it,
    /// registers live across it keep their values. (What it prevents, work
    /// folded away, shows in the benchmarks' times, not in results.)
    #[test]
    fn a_loop_with_barriers_computes_what_it_would_without() {
        let mut v = [0u32; 16];
        let mut sum = 0u64;
        for i in 0..1000u32 {
            let k = (i % 16) as usize;
            v[k] = v[k].wrapping_add(i);
            barrier(&mut v);
            sum += u64::from(v[k]);
        }
        let want: u64 = {
            let mut w = [0u32; 16];
            (0..1000u32)
                .map(|i| {
                    let k = (i % 16) as usize;
                    w[k] = w[k].wrapping_add(i);
                    u64::from(w[k])
                })
                .sum()
        };
        assert_eq!(sum, want);
        assert_eq!(
            v.iter().map(|&x| u64::from(x)).sum::<u64>(),
            (0..1000u64).sum::<u64>()
        );
    }
}
