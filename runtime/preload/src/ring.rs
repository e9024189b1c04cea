//! The ring's producer side as plain code: a record laid out in a buffer
//! (`flatline_format::sites`' slot layout), and the claim and publication
//! of a slot (Vyukov's bounded queue: claim position p while the slot's
//! sequence is p, fill it, store p+1; a slot not yet handed back by the
//! reader is a full ring, and the record is dropped and counted, never
//! waited for). The hooks copy a record's body into the claimed slot of
//! the shared mapping; the tests here run the same protocol over memory of
//! their own, with a reader as the runtime's.

use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use flatline_format::sites as L;

/// One slot's record, laid out in a buffer of the slot's size.
pub struct Record {
    buf: [u8; L::SLOT_BYTES],
    end: usize,
}

impl Record {
    fn new(kind: u32) -> Self {
        let mut r = Self {
            buf: [0; L::SLOT_BYTES],
            end: L::S_KIND,
        };
        r.u32(L::S_KIND, kind);
        r
    }

    fn bytes(&mut self, at: usize, b: &[u8]) {
        self.buf[at..at + b.len()].copy_from_slice(b);
        self.end = self.end.max(at + b.len());
    }

    fn u64(&mut self, at: usize, v: u64) {
        self.bytes(at, &v.to_le_bytes());
    }

    fn u32(&mut self, at: usize, v: u32) {
        self.bytes(at, &v.to_le_bytes());
    }

    fn u16(&mut self, at: usize, v: u16) {
        self.bytes(at, &v.to_le_bytes());
    }

    /// A sampled block: its address, size and weight, the thread, and the
    /// frames (at most [`L::MAX_NATIVE`] native, [`L::MAX_PY`] Python; more
    /// are cut).
    pub fn alloc(
        addr: u64,
        size: u64,
        weight: u64,
        tid: u32,
        native: &[u64],
        py: &[(u32, u32)],
    ) -> Self {
        let native = &native[..native.len().min(L::MAX_NATIVE)];
        let py = &py[..py.len().min(L::MAX_PY)];
        let mut r = Self::new(L::ALLOC);
        r.u16(L::S_N_NATIVE, native.len() as u16);
        r.u16(L::S_N_PY, py.len() as u16);
        r.u64(L::S_ADDR, addr);
        r.u64(L::S_SIZE, size);
        r.u64(L::S_WEIGHT, weight);
        r.u32(L::S_TID, tid);
        for (i, f) in native.iter().enumerate() {
            r.u64(L::S_NATIVE + 8 * i, *f);
        }
        for (i, (code, line)) in py.iter().enumerate() {
            r.u32(L::S_PY + 8 * i, *code);
            r.u32(L::S_PY + 8 * i + 4, *line);
        }
        r
    }

    /// A sampled block freed.
    pub fn free(addr: u64) -> Self {
        let mut r = Self::new(L::FREE);
        r.u16(L::S_N_NATIVE, 0);
        r.u16(L::S_N_PY, 0);
        r.u64(L::S_ADDR, addr);
        r
    }

    /// What a Python code object's id names: its first line, its name (at
    /// most half the text) and its file (the rest; the file's end, which
    /// says most: the path's start is the venv).
    pub fn code(id: u32, first_line: u64, name: &[u8], file: &[u8]) -> Self {
        let n = name.len().min(L::MAX_TEXT / 2);
        let f = file.len().min(L::MAX_TEXT - n);
        let mut r = Self::new(L::CODE);
        r.u16(L::S_N_NATIVE, 0);
        r.u16(L::S_N_PY, 0);
        r.u64(L::S_ADDR, u64::from(id));
        r.u64(L::S_SIZE, first_line);
        r.u64(L::S_WEIGHT, n as u64 | (f as u64) << 16);
        r.bytes(L::S_TEXT, &name[..n]);
        r.bytes(L::S_TEXT + n, &file[file.len() - f..]);
        r
    }

    /// What goes into a claimed slot at [`L::S_KIND`]: everything after the
    /// sequence word, up to the last byte written.
    pub fn body(&self) -> &[u8] {
        &self.buf[L::S_KIND..self.end]
    }
}

/// Claims the next position of a ring whose producers' tail is `tail` and
/// whose slot for a position has the sequence word `seq(pos)`; None, and
/// one more counted in `dropped`, when the reader has not handed that slot
/// back yet (a full ring). Never waits for the reader.
pub fn claim<'a>(
    tail: &AtomicU64,
    dropped: &AtomicU64,
    seq: impl Fn(u64) -> &'a AtomicU64,
) -> Option<u64> {
    let mut pos = tail.load(Relaxed);
    loop {
        let s = L::sequence(seq(pos).load(Acquire), pos);
        let dif = s.wrapping_sub(pos) as i64;
        if dif == 0 {
            match tail.compare_exchange_weak(pos, pos + 1, Relaxed, Relaxed) {
                Ok(_) => return Some(pos),
                Err(p) => pos = p,
            }
        } else if dif < 0 {
            dropped.fetch_add(1, Relaxed);
            return None;
        } else {
            pos = tail.load(Relaxed);
        }
    }
}

/// Publishes the record written at the claimed position `pos`, whose
/// slot's sequence word is `seq`.
pub fn publish(seq: &AtomicU64, pos: u64) {
    seq.store(L::stored(pos + 1, pos), Release);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::AtomicBool;

    /// A ring in memory of the test's own: a sequence word and a body per
    /// slot, read as the runtime's reader reads a mapped one
    /// (`flatline_arena::sys`'s `take`).
    struct Ring {
        tail: AtomicU64,
        dropped: AtomicU64,
        seqs: Vec<AtomicU64>,
        bodies: Vec<Mutex<Vec<u8>>>,
    }

    impl Ring {
        fn new() -> Self {
            Self {
                tail: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
                // A new ring's zeros: each slot's first sequence, stored.
                seqs: (0..L::SLOTS).map(|_| AtomicU64::new(0)).collect(),
                bodies: (0..L::SLOTS).map(|_| Mutex::new(Vec::new())).collect(),
            }
        }

        fn index(pos: u64) -> usize {
            (L::slot_offset(pos) - L::HEADER_BYTES) / L::SLOT_BYTES
        }

        fn push(&self, r: &Record) -> bool {
            let Some(pos) = claim(&self.tail, &self.dropped, |p| &self.seqs[Self::index(p)]) else {
                return false;
            };
            let i = Self::index(pos);
            *self.bodies[i].lock().unwrap() = r.body().to_vec();
            publish(&self.seqs[i], pos);
            true
        }

        /// The record at `pos` as a whole slot, its slot handed back; None
        /// while it is not published.
        fn take(&self, pos: u64) -> Option<[u8; L::SLOT_BYTES]> {
            let i = Self::index(pos);
            if L::sequence(self.seqs[i].load(Acquire), pos) != pos + 1 {
                return None;
            }
            let mut out = [0u8; L::SLOT_BYTES];
            let body = self.bodies[i].lock().unwrap();
            out[L::S_KIND..L::S_KIND + body.len()].copy_from_slice(&body);
            drop(body);
            self.seqs[i].store(L::stored(pos + L::SLOTS as u64, pos), Release);
            Some(out)
        }
    }

    fn u64_at(s: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(s[at..at + 8].try_into().unwrap())
    }
    fn u32_at(s: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(s[at..at + 4].try_into().unwrap())
    }
    fn u16_at(s: &[u8], at: usize) -> u16 {
        u16::from_le_bytes(s[at..at + 2].try_into().unwrap())
    }

    #[test]
    fn records_read_back_whole() {
        let ring = Ring::new();
        let native: Vec<u64> = (0..30).map(|i| 0x5555_0000 + i).collect();
        let py = [(3, 52), (1, 7)];
        assert!(ring.push(&Record::alloc(0xabc0, 4096, 524_288, 77, &native, &py)));
        assert!(ring.push(&Record::free(0xabc0)));
        let name = b"Growing.__getitem__";
        let file = vec![b'x'; 600];
        let mut file = file;
        file.extend_from_slice(b"/data/job.py");
        assert!(ring.push(&Record::code(9, 40, name, &file)));

        let a = ring.take(0).unwrap();
        assert_eq!(u32_at(&a, L::S_KIND), L::ALLOC);
        assert_eq!(u16_at(&a, L::S_N_NATIVE) as usize, L::MAX_NATIVE, "cut");
        assert_eq!(u16_at(&a, L::S_N_PY), 2);
        assert_eq!(u64_at(&a, L::S_ADDR), 0xabc0);
        assert_eq!(u64_at(&a, L::S_SIZE), 4096);
        assert_eq!(u64_at(&a, L::S_WEIGHT), 524_288);
        assert_eq!(u32_at(&a, L::S_TID), 77);
        for (i, f) in native.iter().take(L::MAX_NATIVE).enumerate() {
            assert_eq!(u64_at(&a, L::S_NATIVE + 8 * i), *f);
        }
        assert_eq!((u32_at(&a, L::S_PY + 8), u32_at(&a, L::S_PY + 12)), (1, 7));

        let f = ring.take(1).unwrap();
        assert_eq!(u32_at(&f, L::S_KIND), L::FREE);
        assert_eq!(u64_at(&f, L::S_ADDR), 0xabc0);

        let c = ring.take(2).unwrap();
        assert_eq!(u32_at(&c, L::S_KIND), L::CODE);
        assert_eq!(u64_at(&c, L::S_ADDR), 9);
        assert_eq!(u64_at(&c, L::S_SIZE), 40);
        let lens = u64_at(&c, L::S_WEIGHT);
        let (n, fl) = ((lens & 0xffff) as usize, (lens >> 16 & 0xffff) as usize);
        assert_eq!(n, name.len());
        assert_eq!(n + fl, L::MAX_TEXT, "a long file fills the text");
        assert_eq!(&c[L::S_TEXT..L::S_TEXT + n], name);
        assert!(c[L::S_TEXT + n..L::S_TEXT + n + fl].ends_with(b"/data/job.py"));
        assert!(ring.take(3).is_none(), "nothing more was published");
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "filling the ring's 4096 slots took Miri over 15 minutes"
    )]
    fn a_full_ring_drops_and_counts_and_takes_again_once_read_across_its_wrap() {
        let ring = Ring::new();
        let slots = L::SLOTS as u64;
        for i in 0..slots {
            assert!(ring.push(&Record::free(i)), "slot {i}");
        }
        // Full: dropped and counted, never waited for.
        assert!(!ring.push(&Record::free(u64::MAX)));
        assert!(!ring.push(&Record::free(u64::MAX)));
        assert_eq!(ring.dropped.load(Relaxed), 2);
        // One read frees one slot, for position SLOTS (the wrap).
        assert_eq!(u64_at(&ring.take(0).unwrap(), L::S_ADDR), 0);
        assert!(ring.push(&Record::free(slots)));
        assert!(!ring.push(&Record::free(u64::MAX)));
        // Laps later, every record is still the one pushed at its position.
        let mut next_read = 1;
        let mut next_push = slots + 1;
        let laps = 3;
        for _ in 0..laps {
            while next_read < next_push {
                let r = ring.take(next_read).expect("published");
                assert_eq!(u64_at(&r, L::S_ADDR), next_read);
                next_read += 1;
            }
            for _ in 0..slots {
                assert!(ring.push(&Record::free(next_push)));
                next_push += 1;
            }
        }
        assert_eq!(ring.dropped.load(Relaxed), 3);
        assert_eq!(ring.tail.load(Relaxed), next_push);
        assert_eq!(next_push, (laps + 1) * slots + 1);
    }

    /// Producers on several threads and one reader at once: every record
    /// read is whole (its fields agree with each other), each thread's come
    /// in its order, and what was read plus what was dropped is what was
    /// pushed.
    #[test]
    #[cfg_attr(miri, ignore = "as slow under Miri as filling the ring")]
    fn producers_and_a_reader_at_once_lose_nothing_uncounted() {
        let ring = Ring::new();
        let threads = 4u64;
        let each = 50_000;
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut pos = 0u64;
                let mut last = vec![None::<u64>; threads as usize];
                let mut read = 0u64;
                loop {
                    // Done is read before the slot: a record published
                    // before `done` was set is seen on this pass.
                    let finished = done.load(Acquire);
                    match ring.take(pos) {
                        Some(r) => {
                            let t = u32_at(&r, L::S_TID) as u64;
                            let i = u64_at(&r, L::S_SIZE);
                            assert_eq!(u64_at(&r, L::S_ADDR), t << 32 | i, "torn");
                            assert_eq!(u64_at(&r, L::S_WEIGHT), i * 3 + t, "torn");
                            assert_eq!(u64_at(&r, L::S_NATIVE + 8), !i, "torn");
                            let prev = last[t as usize].replace(i);
                            assert!(prev.is_none_or(|p| p < i), "out of order");
                            read += 1;
                            pos += 1;
                        }
                        None if finished => return read,
                        None => std::thread::yield_now(),
                    }
                }
            });
            let producers: Vec<_> = (0..threads)
                .map(|t| {
                    let ring = &ring;
                    s.spawn(move || {
                        for i in 0..each {
                            let r =
                                Record::alloc(t << 32 | i, i, i * 3 + t, t as u32, &[i, !i], &[]);
                            ring.push(&r);
                        }
                    })
                })
                .collect();
            for p in producers {
                p.join().unwrap();
            }
            done.store(true, Release);
            let read = reader.join().unwrap();
            let dropped = ring.dropped.load(Relaxed);
            assert_eq!(
                read + dropped,
                threads * each,
                "{read} read, {dropped} dropped"
            );
            assert_eq!(ring.tail.load(Relaxed), read);
        });
    }
}
