//! The ring's header words and slots, in shared memory, and the one spin
//! lock: what the entry points, the attach and the frame walk all use.

use core::ptr;
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use core::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64};

use flatline_format::sites as L;

use crate::ring;

pub(super) fn lock(l: &AtomicBool) {
    while l
        .compare_exchange_weak(false, true, Acquire, Relaxed)
        .is_err()
    {
        core::hint::spin_loop();
    }
}

pub(super) fn unlock(l: &AtomicBool) {
    l.store(false, Release);
}

pub(super) fn header_u64(base: *mut u8, at: usize) -> &'static AtomicU64 {
    // SAFETY: `base` is a ring's mapping (RING_BYTES long, 4096-aligned)
    // that the caller holds in use (a `RingUse`, or the one thread that
    // maps or retires it), so not unmapped meanwhile; `at` is one of the
    // header's 8-aligned offsets.
    unsafe { &*base.add(at).cast::<AtomicU64>() }
}

pub(super) fn header_i64(base: *mut u8, at: usize) -> &'static AtomicI64 {
    // SAFETY: as `header_u64`.
    unsafe { &*base.add(at).cast::<AtomicI64>() }
}

pub(super) fn header_u32(base: *mut u8, at: usize) -> &'static AtomicU32 {
    // SAFETY: as `header_u64`, a 4-aligned offset.
    unsafe { &*base.add(at).cast::<AtomicU32>() }
}

pub(super) fn slot_ptr(base: *mut u8, pos: u64) -> *mut u8 {
    // SAFETY: slot_offset(pos) + SLOT_BYTES ≤ RING_BYTES, inside the mapping.
    unsafe { base.add(L::slot_offset(pos)) }
}

pub(super) fn slot_seq(base: *mut u8, pos: u64) -> &'static AtomicU64 {
    // SAFETY: a slot starts with its 8-aligned sequence word, inside the
    // mapping, held in use by the caller (as `header_u64`).
    unsafe { &*slot_ptr(base, pos).cast::<AtomicU64>() }
}

/// Claims a slot, copies `rec` in and publishes it (`crate::ring`); false
/// (and a drop counted) when the ring is full.
pub(super) fn push(base: *mut u8, rec: &ring::Record) -> bool {
    let tail = header_u64(base, L::H_TAIL);
    let dropped = header_u64(base, L::H_DROPPED);
    let Some(pos) = ring::claim(tail, dropped, |pos| slot_seq(base, pos)) else {
        return false;
    };
    let body = rec.body();
    debug_assert!(L::S_KIND + body.len() <= L::SLOT_BYTES);
    // SAFETY: the slot at `pos` is claimed (no one else writes it until it
    // is published); the body fits after its sequence word; `body` is not
    // inside the ring.
    unsafe {
        ptr::copy_nonoverlapping(
            body.as_ptr(),
            slot_ptr(base, pos).add(L::S_KIND),
            body.len(),
        )
    };
    ring::publish(slot_seq(base, pos), pos);
    true
}
