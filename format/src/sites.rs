//! The layout of an allocation-site ring: the shared-memory file through
//! which the preloaded library (`flatline-preload`, one ring per process)
//! hands sampled allocations to flatline without ever waiting on it.
//!
//! ```text
//! header  HEADER_BYTES   fixed fields at the H_* offsets below; the
//!                        producers' and the consumer's counters each on a
//!                        cache line of their own
//! slots   SLOTS × SLOT_BYTES, a bounded multi-producer queue (Vyukov's):
//!                        slot i starts with sequence i (stored less i, so
//!                        a new ring is all zeros: see [`stored`]; the
//!                        library maps it resident whole, so that it never
//!                        grows the job's RSS page by page); a producer claims
//!                        position p by moving `tail` from p to p+1 while
//!                        the slot's sequence is p, fills it and stores p+1;
//!                        the consumer takes position p when the sequence
//!                        is p+1 and frees it by storing p+SLOTS. A producer
//!                        that finds the slot not yet freed drops its record
//!                        and counts it (H_DROPPED): it never waits.
//! ```
//!
//! Every integer is little-endian (the rings never leave the machine). This
//! module is plain data: the library writes it, `flatline_telemetry::sites`
//! reads it.

/// "FLSITES1": the first 8 bytes of a ring.
pub const MAGIC: u64 = u64::from_le_bytes(*b"FLSITES1");
pub const HEADER_BYTES: usize = 4096;
pub const SLOT_BYTES: usize = 512;
/// Slots per ring (a power of two): 2 MiB of records in flight.
pub const SLOTS: usize = 4096;
/// The whole file.
pub const RING_BYTES: usize = HEADER_BYTES + SLOTS * SLOT_BYTES;
/// The file-name suffix of a ring; the name is `<pid>.<n>.ring`.
pub const SUFFIX: &str = ".ring";

// Header fields (byte offsets).
/// u64 [`MAGIC`].
pub const H_MAGIC: usize = 0;
/// u32: the process that writes the ring.
pub const H_PID: usize = 8;
/// u32: what the library knows of Python frames ([`PY_UNKNOWN`]…).
pub const H_PYTHON: usize = 12;
/// u64: the mean number of bytes allocated between two samples.
pub const H_EVERY: usize = 16;
/// u32: the interpreter's version as major × 100 + minor, once seen.
pub const H_PY_VERSION: usize = 24;
/// u64, producers: the next position to claim.
pub const H_TAIL: usize = 64;
/// u64, consumer: the next position it will take (for a reader's restart).
pub const H_HEAD: usize = 128;
/// u64: records dropped because the ring was full.
pub const H_DROPPED: usize = 192;
/// i64: bytes the program holds, allocated less freed (each block's usable
/// size; anonymous mappings by their length), exact up to each thread's
/// unflushed share (under [`FLUSH_BYTES`] a thread).
pub const H_LIVE: usize = 256;
/// u64: bytes ever allocated (usable sizes), as H_LIVE.
pub const H_ALLOCATED: usize = 264;
/// u64: allocations sampled.
pub const H_SAMPLED: usize = 272;
/// u64: samples not kept because the table of sampled blocks was full.
pub const H_TABLE_FULL: usize = 280;
/// i64: H_LIVE when the ring was made: what a forked child holds of its
/// parent's (0 for a program's first ring).
pub const H_INHERITED: usize = 288;
/// u32: 1 where the library was loaded into a running process
/// (`watch --pid --sites`): its samples start at the attach, what the
/// program allocated before is unknown, and H_LIVE is not kept (a free of
/// an older block would be taken from a count that never had it).
pub const H_ATTACHED: usize = 296;
/// u64: the inode of the writer's pid namespace (`/proc/self/ns/pid`), 0
/// where it could not be read. H_PID is the pid in that namespace: a
/// process in a container has another there than the watcher sees.
pub const H_PID_NS: usize = 304;
/// u32: an attached ring's watcher, the pid the library checks to know
/// the watch runs (0: in another pid namespace, not checked).
pub const H_WATCHER: usize = 312;
/// u32: 1 where the attached ring's watch holds an exclusive `flock` on
/// `watch.lock` in the ring's folder for as long as it runs.
pub const H_LOCK: usize = 316;
/// The ring file's own path, NUL-terminated (empty where it did not fit):
/// what the library removes, and looks for, as its watch ends, whatever
/// later attach has set since.
pub const H_PATH: usize = 1024;
/// The path's room (with its NUL): an attach to a longer folder is refused.
pub const PATH_BYTES: usize = 1024;

/// A thread adds its allocated and freed bytes to the header each time they
/// reach this much.
pub const FLUSH_BYTES: i64 = 64 << 10;

// What the library knows of Python frames.
pub const PY_UNKNOWN: u32 = 0;
/// Frames are read (CPython 3.10 to 3.13, whose layouts the library knows).
pub const PY_FRAMES: u32 = 1;
/// Not a Python process (no interpreter found).
pub const PY_NONE: u32 = 2;
/// A Python whose frame layout the library does not know: native frames
/// only (H_PY_VERSION says which).
pub const PY_UNSUPPORTED: u32 = 3;
/// A free-threaded CPython (`3.13t`), whose objects' layout differs:
/// native frames only.
pub const PY_FREE_THREADED: u32 = 4;

// Slot fields (byte offsets within a slot).
/// u64: the queue's sequence number.
pub const S_SEQ: usize = 0;
/// u32: [`ALLOC`], [`FREE`] or [`CODE`].
pub const S_KIND: usize = 8;
/// u16: native frames that follow at [`S_NATIVE`].
pub const S_N_NATIVE: usize = 12;
/// u16: Python frames that follow at [`S_PY`].
pub const S_N_PY: usize = 14;
/// u64: the block's address (ALLOC, FREE); the code's id (CODE).
pub const S_ADDR: usize = 16;
/// u64: the block's size in bytes (ALLOC); the code's first line (CODE).
pub const S_SIZE: usize = 24;
/// u64: the bytes this sample stands for (ALLOC): size / (1 − e^(−size/every)).
/// CODE: the name's length (low 16 bits) and the file's (next 16).
pub const S_WEIGHT: usize = 32;
/// u32: the thread (its kernel id).
pub const S_TID: usize = 40;
/// Native return addresses, u64 each, innermost first.
pub const S_NATIVE: usize = 64;
pub const MAX_NATIVE: usize = 24;
/// Python frames, innermost first: (code id u32, line u32) each.
pub const S_PY: usize = S_NATIVE + MAX_NATIVE * 8;
pub const MAX_PY: usize = (SLOT_BYTES - S_PY) / 8;
/// CODE: the function's name, then its file, UTF-8, at most this much.
pub const S_TEXT: usize = 64;
pub const MAX_TEXT: usize = SLOT_BYTES - S_TEXT;

// The layout holds together: checked when this compiles.
const _: () = assert!(SLOTS.is_power_of_two());
const _: () = assert!(S_PY + MAX_PY * 8 <= SLOT_BYTES && MAX_PY >= 16);
const _: () = assert!(
    H_PID_NS + 8 <= HEADER_BYTES && H_INHERITED + 8 <= HEADER_BYTES && S_TID + 4 <= S_NATIVE
);

pub const ALLOC: u32 = 1;
pub const FREE: u32 = 2;
pub const CODE: u32 = 3;

/// The bytes one sampled allocation of `size` stands for when samples are
/// drawn every `every` bytes on average (the gaps exponential): the block
/// is sampled with probability 1 − e^(−size/every), so this weight makes
/// the sum over samples an unbiased estimate of the bytes allocated.
pub fn weight(size: u64, every: u64) -> u64 {
    if every == 0 {
        return size;
    }
    let r = size as f64 / every as f64;
    let p = -(-r).exp_m1();
    if p <= 0.0 {
        return every;
    }
    (size as f64 / p).round() as u64
}

/// What a slot's sequence word holds for sequence `seq` at position `pos`:
/// the sequence less the slot's index, so that every slot's first sequence
/// (its index) is stored as 0.
pub fn stored(seq: u64, pos: u64) -> u64 {
    seq.wrapping_sub(pos & (SLOTS as u64 - 1))
}

/// The sequence a slot's word `word` stands for, at position `pos`.
pub fn sequence(word: u64, pos: u64) -> u64 {
    word.wrapping_add(pos & (SLOTS as u64 - 1))
}

/// The byte offset of position `pos`'s slot within a ring.
pub fn slot_offset(pos: u64) -> usize {
    HEADER_BYTES + (pos as usize & (SLOTS - 1)) * SLOT_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_fits_and_a_weight_is_unbiased() {
        assert_eq!(slot_offset(SLOTS as u64), HEADER_BYTES);
        // A new ring's zeros are each slot's first sequence.
        for pos in [0, 1, 17, SLOTS as u64 - 1] {
            assert_eq!(sequence(0, pos), pos);
            assert_eq!(sequence(stored(pos + 1, pos), pos), pos + 1);
            let again = pos + SLOTS as u64;
            assert_eq!(sequence(stored(again, pos), again), again);
        }
        // A small block stands for about `every` bytes, a huge one for itself.
        let every = 512 << 10;
        let small = weight(64, every);
        assert!(
            (every as f64 - small as f64).abs() / (every as f64) < 1e-3,
            "{small}"
        );
        assert_eq!(weight(1 << 30, every), 1 << 30);
        // Expected value: size × P(sampled) × weight / P = size.
        let size = 200_000u64;
        let p = 1.0 - (-(size as f64) / every as f64).exp();
        let expected = p * weight(size, every) as f64;
        assert!((expected - size as f64).abs() < 1.0, "{expected}");
    }
}
