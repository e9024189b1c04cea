//! The open-addressed tables the hooks keep (the sampled blocks' addresses,
//! the anonymous mappings' addresses and lengths), as plain functions over
//! slices of atomics, so that they are tested here, also under Miri.
//!
//! Every slot changes by compare-and-swap alone, with no lock: the hooks run
//! inside the program's `malloc` and `free`, and a signal handler that
//! allocates can interrupt a thread in the middle of a table update. With a
//! lock, the handler's own sample waited for a lock its own thread held, for
//! ever (issue 65: a `free` interrupted while it held the table's lock).
//!
//! A slot is [`EMPTY`] until a key is put in it, [`TOMB`] once that key is
//! taken out, and never empty again: so every slot between a key's home and
//! the key is non-empty for as long as the key is in, and a lookup that
//! meets an empty slot can stop there.

use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

/// A slot no key was ever put in.
pub const EMPTY: u64 = 0;
/// A slot whose key was taken out.
pub const TOMB: u64 = 1;
/// How far from its home a key may be.
pub const PROBES: usize = 32;

/// Where a lookup of `key` starts in a table of `len` slots (a power of two
/// of at least 2).
pub fn home(key: u64, len: usize) -> usize {
    debug_assert!(len >= 2 && len.is_power_of_two());
    let bits = len.trailing_zeros();
    ((key >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
}

fn probes(key: u64, len: usize) -> impl Iterator<Item = usize> {
    let h = home(key, len);
    (0..PROBES.min(len)).map(move |i| (h + i) & (len - 1))
}

/// Puts `key` (neither [`EMPTY`] nor [`TOMB`]) in the first free slot within
/// [`PROBES`] of its home: that slot's index, or None when all of them are
/// taken (the caller counts it). A key already in is put in again.
pub fn insert(keys: &[AtomicU64], key: u64) -> Option<usize> {
    debug_assert!(key != EMPTY && key != TOMB);
    for j in probes(key, keys.len()) {
        let slot = &keys[j];
        let mut v = slot.load(Relaxed);
        while v == EMPTY || v == TOMB {
            match slot.compare_exchange_weak(v, key, Release, Relaxed) {
                Ok(_) => return Some(j),
                Err(now) => v = now,
            }
        }
    }
    None
}

/// The index of a slot that holds `key`, if one does (the hooks look a key
/// up only to take it out: [`remove`]).
#[cfg(test)]
pub fn find(keys: &[AtomicU64], key: u64) -> Option<usize> {
    for j in probes(key, keys.len()) {
        match keys[j].load(Acquire) {
            EMPTY => return None,
            v if v == key => return Some(j),
            _ => {}
        }
    }
    None
}

/// Takes `key` out: the index of the slot this call emptied, or None if no
/// slot held it. A key put in twice is taken out once per call, and two
/// calls for one slot never both succeed.
pub fn remove(keys: &[AtomicU64], key: u64) -> Option<usize> {
    take(keys, key, |_| ()).map(|(j, ())| j)
}

/// [`remove`] for a table whose slots carry a value beside the key
/// (`values[j]` goes with `keys[j]`): the key's value, read before its slot
/// is given up (after that another key may take the slot and its value).
pub fn remove_with_value(keys: &[AtomicU64], values: &[AtomicU64], key: u64) -> Option<u64> {
    debug_assert_eq!(keys.len(), values.len());
    take(keys, key, |j| values[j].load(Acquire)).map(|(_, v)| v)
}

/// Puts `key` with `value` in (see [`insert`]); false when there is no room.
/// The value is written after the key: whoever looks the key up after this
/// returns (the program's `munmap` after its `mmap`) reads it.
pub fn insert_with_value(keys: &[AtomicU64], values: &[AtomicU64], key: u64, value: u64) -> bool {
    debug_assert_eq!(keys.len(), values.len());
    match insert(keys, key) {
        Some(j) => {
            values[j].store(value, Release);
            true
        }
        None => false,
    }
}

fn take<V>(keys: &[AtomicU64], key: u64, read: impl Fn(usize) -> V) -> Option<(usize, V)> {
    for j in probes(key, keys.len()) {
        let slot = &keys[j];
        match slot.load(Acquire) {
            EMPTY => return None,
            v if v == key => {
                let value = read(j);
                if slot.compare_exchange(key, TOMB, AcqRel, Acquire).is_ok() {
                    return Some((j, value));
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn table(len: usize) -> Vec<AtomicU64> {
        (0..len).map(|_| AtomicU64::new(EMPTY)).collect()
    }

    /// `n` keys (block-like addresses, 16-aligned) that share one home.
    fn colliding(len: usize, n: usize) -> Vec<u64> {
        let want = home(0x1000, len);
        (0x100u64..)
            .map(|k| k << 4)
            .filter(|&k| home(k, len) == want)
            .take(n)
            .collect()
    }

    #[test]
    fn a_key_is_found_until_it_is_removed_and_removed_once() {
        let t = table(1024);
        let key = 0x7f00_dead_bee0;
        assert_eq!(find(&t, key), None);
        let at = insert(&t, key).expect("room");
        assert_eq!(find(&t, key), Some(at));
        assert_eq!(remove(&t, key), Some(at));
        assert_eq!(find(&t, key), None);
        assert_eq!(remove(&t, key), None, "a second remove finds nothing");
        // A key put in twice (an address freed and reused before its old
        // entry was taken) comes out twice, then no more.
        insert(&t, key).unwrap();
        insert(&t, key).unwrap();
        assert!(remove(&t, key).is_some());
        assert!(remove(&t, key).is_some());
        assert_eq!(remove(&t, key), None);
    }

    #[test]
    fn lookups_pass_removed_keys_and_a_full_neighbourhood_refuses() {
        let len = 256;
        let t = table(len);
        let keys = colliding(len, PROBES + 1);
        for &k in &keys[..PROBES] {
            assert!(insert(&t, k).is_some());
        }
        // All PROBES slots from the shared home are taken: no room.
        assert_eq!(insert(&t, keys[PROBES]), None);
        // Taking out the first leaves a tombstone the last key is still
        // found past, and the next insert reuses it.
        let first = remove(&t, keys[0]).unwrap();
        assert_eq!(t[first].load(Relaxed), TOMB);
        assert!(find(&t, keys[PROBES - 1]).is_some());
        assert_eq!(insert(&t, keys[PROBES]), Some(first));
        for &k in &keys[1..] {
            assert!(remove(&t, k).is_some(), "{k:#x}");
        }
        assert!(keys.iter().all(|&k| find(&t, k).is_none()));
    }

    #[test]
    fn a_mapping_keeps_its_length_beside_its_address() {
        let keys = table(64);
        let lens = table(64);
        assert!(insert_with_value(&keys, &lens, 0x7000_0000, 65536));
        assert!(insert_with_value(&keys, &lens, 0x7100_0000, 4096));
        assert_eq!(remove_with_value(&keys, &lens, 0x7000_0000), Some(65536));
        assert_eq!(remove_with_value(&keys, &lens, 0x7000_0000), None);
        assert_eq!(remove_with_value(&keys, &lens, 0x7100_0000), Some(4096));
    }

    /// Threads that put their own keys in and take them out, all in the same
    /// few homes, never lose or take another's: what the hooks' lock used to
    /// guarantee, now by compare-and-swap alone.
    #[test]
    fn threads_sharing_homes_never_lose_a_key() {
        let len = 128;
        let threads = 4;
        let rounds = if cfg!(miri) { 20 } else { 20_000 };
        let t: Arc<Vec<AtomicU64>> = Arc::new(table(len));
        // Each thread's keys share a home with the others'.
        let keys = Arc::new(colliding(len, threads * 6));
        let handles: Vec<_> = (0..threads)
            .map(|n| {
                let (t, keys) = (Arc::clone(&t), Arc::clone(&keys));
                std::thread::spawn(move || {
                    let mine = &keys[n * 6..n * 6 + 6];
                    for r in 0..rounds {
                        for &k in mine {
                            assert!(insert(&t, k).is_some(), "no room in round {r}");
                        }
                        for &k in mine {
                            assert!(find(&t, k).is_some(), "{k:#x} lost in round {r}");
                            assert!(remove(&t, k).is_some(), "{k:#x} lost in round {r}");
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert!(t.iter().all(|s| matches!(s.load(Relaxed), EMPTY | TOMB)));
    }
}
