//! The replaced allocator entry points, the sampler, the ring's producer
//! side and the Python frame walk: all of the crate's `unsafe`.
//!
//! Rules every path here keeps, because it runs inside the program's own
//! `malloc`:
//!
//! - nothing here allocates on the hot path; the tables are fixed arrays
//!   sized at build time (2^18 sampled blocks, 2^16 anonymous mappings,
//!   4096 Python code objects) and the ring is mapped once per process;
//! - a thread-local guard stops recursion: whatever the sampling path
//!   itself allocates (glibc's `backtrace` loads libgcc once) is forwarded
//!   and counted, never sampled;
//! - the tables of sampled blocks and mappings take no lock (a signal
//!   handler that allocates may interrupt an update, and must not wait for
//!   its own thread: `crate::table`); the one lock, around a new Python
//!   code object's record, is taken only with the guard set (so never by a
//!   handler on the thread that holds it), never while calling anything that
//!   could allocate; `fork` takes it first (`pthread_atfork`) so a child
//!   never inherits it held.
//!
//! The blocks that read the interpreter's frames read several words of one
//! structure whose validity one comment states; `multiple_unsafe_ops_per_block`
//! is allowed here for them.
#![allow(unsafe_code)]
#![allow(clippy::multiple_unsafe_ops_per_block)]

use core::cell::Cell;
use core::ffi::{c_char, c_int, c_void};
use core::ptr;
use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use core::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize};

use flatline_format::sites as L;

use crate::{ring, sampling, table};

// ---------------------------------------------------------------------------
// The allocator that comes next.

type MallocFn = unsafe extern "C" fn(usize) -> *mut c_void;
type FreeFn = unsafe extern "C" fn(*mut c_void);
type CallocFn = unsafe extern "C" fn(usize, usize) -> *mut c_void;
type ReallocFn = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
type MemalignFn = unsafe extern "C" fn(usize, usize) -> *mut c_void;
type PosixMemalignFn = unsafe extern "C" fn(*mut *mut c_void, usize, usize) -> c_int;
type UsableFn = unsafe extern "C" fn(*mut c_void) -> usize;

unsafe extern "C" {
    // glibc's own entry points, used where `dlsym(RTLD_NEXT)` finds nothing
    // (and while it runs).
    fn __libc_malloc(size: usize) -> *mut c_void;
    fn __libc_free(p: *mut c_void);
    fn __libc_calloc(n: usize, size: usize) -> *mut c_void;
    fn __libc_realloc(p: *mut c_void, size: usize) -> *mut c_void;
    fn __libc_memalign(align: usize, size: usize) -> *mut c_void;
    fn __libc_valloc(size: usize) -> *mut c_void;
    fn __libc_pvalloc(size: usize) -> *mut c_void;
    fn malloc_usable_size(p: *mut c_void) -> usize;
    fn backtrace(buf: *mut *mut c_void, size: c_int) -> c_int;
}

struct Real {
    malloc: AtomicUsize,
    free: AtomicUsize,
    calloc: AtomicUsize,
    realloc: AtomicUsize,
    memalign: AtomicUsize,
    posix_memalign: AtomicUsize,
    aligned_alloc: AtomicUsize,
    valloc: AtomicUsize,
    pvalloc: AtomicUsize,
    usable: AtomicUsize,
}

static REAL: Real = Real {
    malloc: AtomicUsize::new(0),
    free: AtomicUsize::new(0),
    calloc: AtomicUsize::new(0),
    realloc: AtomicUsize::new(0),
    memalign: AtomicUsize::new(0),
    posix_memalign: AtomicUsize::new(0),
    aligned_alloc: AtomicUsize::new(0),
    valloc: AtomicUsize::new(0),
    pvalloc: AtomicUsize::new(0),
    usable: AtomicUsize::new(0),
};

/// 0: not looked up, 1: being looked up (calls meanwhile use glibc's own
/// entry points), 2: ready.
static RESOLVED: AtomicU32 = AtomicU32::new(0);

fn next_symbol(name: &[u8], from: *mut c_void) -> usize {
    debug_assert_eq!(name.last(), Some(&0));
    // SAFETY: `name` is NUL-terminated; RTLD_NEXT asks for the definition
    // after this library's, which is what the program would have called;
    // RTLD_DEFAULT for the first in the process's global scope.
    unsafe { libc::dlsym(from, name.as_ptr().cast::<c_char>()) as usize }
}

#[cold]
fn resolve() {
    if RESOLVED.compare_exchange(0, 1, AcqRel, Acquire).is_err() {
        return;
    }
    resolve_from(libc::RTLD_NEXT);
}

/// Looks the allocator's functions up in `from`. Preloaded, RTLD_NEXT:
/// the definitions after this library's. Loaded into a running process,
/// RTLD_DEFAULT: the ones its program already calls (this library is not
/// in its global scope; RTLD_NEXT would find the C library's own even
/// where the program runs jemalloc).
fn resolve_from(from: *mut c_void) {
    let set = |slot: &AtomicUsize, name: &[u8]| slot.store(next_symbol(name, from), Release);
    set(&REAL.malloc, b"malloc\0");
    set(&REAL.free, b"free\0");
    set(&REAL.calloc, b"calloc\0");
    set(&REAL.realloc, b"realloc\0");
    set(&REAL.memalign, b"memalign\0");
    set(&REAL.posix_memalign, b"posix_memalign\0");
    set(&REAL.aligned_alloc, b"aligned_alloc\0");
    set(&REAL.valloc, b"valloc\0");
    set(&REAL.pvalloc, b"pvalloc\0");
    set(&REAL.usable, b"malloc_usable_size\0");
    RESOLVED.store(2, Release);
}

/// The next allocator's function in `slot`, or None while it is not known
/// (the caller then uses glibc's).
#[inline(always)]
fn real(slot: &AtomicUsize) -> Option<usize> {
    if RESOLVED.load(Acquire) != 2 {
        resolve();
        if RESOLVED.load(Acquire) != 2 {
            return None;
        }
    }
    match slot.load(Relaxed) {
        0 => None,
        f => Some(f),
    }
}

fn usable(p: *mut c_void) -> usize {
    if p.is_null() {
        return 0;
    }
    match real(&REAL.usable) {
        // SAFETY: the slot holds `malloc_usable_size` of the allocator that
        // made `p` (resolved by name), and `p` is a live block of it.
        Some(f) => unsafe { core::mem::transmute::<usize, UsableFn>(f)(p) },
        // SAFETY: as above, glibc's own.
        None => unsafe { malloc_usable_size(p) },
    }
}

// ---------------------------------------------------------------------------
// Per-thread state: a recursion guard, the byte countdown to the next
// sample and its random source, and the bytes not yet added to the ring.

struct Thread {
    guard: Cell<bool>,
    seeded: Cell<bool>,
    rng: Cell<u64>,
    until_sample: Cell<i64>,
    live: Cell<i64>,
    allocated: Cell<i64>,
}

thread_local! {
    // `const` and no destructor: a plain TLS slot, nothing allocated or
    // registered, so it is usable inside malloc and while a thread exits.
    static T: Thread = const {
        Thread {
            guard: Cell::new(false),
            seeded: Cell::new(false),
            rng: Cell::new(0),
            until_sample: Cell::new(0),
            live: Cell::new(0),
            allocated: Cell::new(0),
        }
    };
}

// ---------------------------------------------------------------------------
// Process-wide state.

/// The ring's base, or null: sampling off (no FLATLINE_SITES_DIR, or the
/// ring could not be made).
static RING: AtomicPtr<u8> = AtomicPtr::new(ptr::null_mut());
static EVERY: AtomicU64 = AtomicU64::new(512 << 10);
/// Whether blocks are counted (H_LIVE): preloaded, every block is seen
/// from the program's start; attached, the older ones never were.
static COUNTING: AtomicBool = AtomicBool::new(true);

/// Threads inside a path that writes the ring through [`RingUse`].
static IN_RING: AtomicUsize = AtomicUsize::new(0);
/// A ring its watch has left (attached), waiting for the last thread that
/// may still write in it to leave: that one unmaps it.
static RETIRED: AtomicPtr<u8> = AtomicPtr::new(ptr::null_mut());

/// The ring, held for the length of a sample or of a sampled block's
/// free: a ring is unmapped only once no thread holds it. Counted first,
/// the ring read after (both SeqCst): a thread that reads a ring before it
/// is taken out of [`RING`] was counted before the retiring thread looks
/// at the count, so the count is not 0 while that thread may write in it.
struct RingUse {
    base: *mut u8,
}

impl RingUse {
    fn enter() -> RingUse {
        IN_RING.fetch_add(1, SeqCst);
        RingUse {
            base: RING.load(SeqCst),
        }
    }
}

impl Drop for RingUse {
    fn drop(&mut self) {
        if IN_RING.fetch_sub(1, SeqCst) == 1 {
            reclaim();
        }
    }
}

/// Unmaps the retired ring if no thread holds a ring now. Taken out of
/// [`RETIRED`] first and the count looked at again: a thread that came in
/// after this one's count fell to 0 may hold it (it read the ring before
/// it was retired); then it goes back for the last of them to unmap.
fn reclaim() {
    loop {
        let old = RETIRED.swap(ptr::null_mut(), SeqCst);
        if old.is_null() {
            return;
        }
        if IN_RING.load(SeqCst) == 0 {
            unmap_ring(old);
            return;
        }
        if RETIRED
            .compare_exchange(ptr::null_mut(), old, SeqCst, SeqCst)
            .is_err()
        {
            // Another ring retired meanwhile: this one stays mapped (2
            // MiB, said in the docs) rather than risk a thread writing in
            // it.
            return;
        }
        // Put back for the last thread out; if that one left while it was
        // out of RETIRED (and found nothing), this one tries again.
        if IN_RING.load(SeqCst) != 0 {
            return;
        }
    }
}

/// Takes `base` out of [`RING`] (attached, its watch over): from here on
/// every hook only forwards, and the ring's pages go once no thread holds
/// it. The caller holds a [`RingUse`] or runs alone. True for the one
/// caller that took it out.
fn retire(base: *mut u8) -> bool {
    if base.is_null()
        || RING
            .compare_exchange(base, ptr::null_mut(), SeqCst, SeqCst)
            .is_err()
    {
        // Not in use (another thread took it out first).
        return false;
    }
    let _ = RETIRED.compare_exchange(ptr::null_mut(), base, SeqCst, SeqCst);
    true
}

fn unmap_ring(base: *mut u8) {
    // SAFETY: a ring's whole mapping, made by `open_ring`, that no thread
    // holds (`reclaim`); by the system call, not this library's `munmap`.
    unsafe { libc::syscall(libc::SYS_munmap, base, L::RING_BYTES) };
}

/// Empties the table of sampled blocks (a new attach: the older ring's
/// blocks are not this one's). Run while no ring is published.
fn sampled_clear() {
    for k in &SAMPLED {
        k.store(table::EMPTY, Relaxed);
    }
    SAMPLED_COUNT.store(0, Release);
}

/// Sampled live blocks' addresses, and anonymous mappings seen (address,
/// length, so that `munmap` takes back only what `mmap` counted): open
/// addressing without a lock (`crate::table`), so that a signal handler
/// that allocates never waits on its own interrupted thread.
const TABLE: usize = 1 << 18;
static SAMPLED: [AtomicU64; TABLE] = [const { AtomicU64::new(0) }; TABLE];
static SAMPLED_COUNT: AtomicUsize = AtomicUsize::new(0);
const MAPS: usize = 1 << 16;
static MAP_ADDR: [AtomicU64; MAPS] = [const { AtomicU64::new(0) }; MAPS];
static MAP_LEN: [AtomicU64; MAPS] = [const { AtomicU64::new(0) }; MAPS];

fn lock(l: &AtomicBool) {
    while l
        .compare_exchange_weak(false, true, Acquire, Relaxed)
        .is_err()
    {
        core::hint::spin_loop();
    }
}

fn unlock(l: &AtomicBool) {
    l.store(false, Release);
}

fn header_u64(base: *mut u8, at: usize) -> &'static AtomicU64 {
    // SAFETY: `base` is the ring's mapping (RING_BYTES long, 4096-aligned,
    // never unmapped), `at` is one of the header's 8-aligned offsets.
    unsafe { &*base.add(at).cast::<AtomicU64>() }
}

fn header_i64(base: *mut u8, at: usize) -> &'static AtomicI64 {
    // SAFETY: as `header_u64`.
    unsafe { &*base.add(at).cast::<AtomicI64>() }
}

fn header_u32(base: *mut u8, at: usize) -> &'static AtomicU32 {
    // SAFETY: as `header_u64`, a 4-aligned offset.
    unsafe { &*base.add(at).cast::<AtomicU32>() }
}

fn sampled_insert(addr: u64) -> bool {
    let done = table::insert(&SAMPLED, addr).is_some();
    if done {
        SAMPLED_COUNT.fetch_add(1, Relaxed);
    }
    done
}

/// Takes `addr` out of the sampled table; true if it was there.
#[inline]
fn sampled_remove(addr: u64) -> bool {
    if SAMPLED_COUNT.load(Relaxed) == 0 {
        return false;
    }
    let done = table::remove(&SAMPLED, addr).is_some();
    if done {
        SAMPLED_COUNT.fetch_sub(1, Relaxed);
    }
    done
}

fn map_insert(addr: u64, len: u64) {
    table::insert_with_value(&MAP_ADDR, &MAP_LEN, addr, len);
}

/// The length counted for a mapping at `addr`, taken out; 0 if it was not
/// counted (a file mapping, one made before the library, or the middle of
/// one). A prefix unmapped leaves the rest counted.
fn map_remove(addr: u64, len: u64) -> u64 {
    let Some(had) = table::remove_with_value(&MAP_ADDR, &MAP_LEN, addr) else {
        return 0;
    };
    if had > len {
        map_insert(addr + len, had - len);
    }
    had.min(len)
}

// ---------------------------------------------------------------------------
// The ring's producer side.

fn slot_ptr(base: *mut u8, pos: u64) -> *mut u8 {
    // SAFETY: slot_offset(pos) + SLOT_BYTES ≤ RING_BYTES, inside the mapping.
    unsafe { base.add(L::slot_offset(pos)) }
}

fn slot_seq(base: *mut u8, pos: u64) -> &'static AtomicU64 {
    // SAFETY: a slot starts with its 8-aligned sequence word, inside the
    // mapping, which is never unmapped.
    unsafe { &*slot_ptr(base, pos).cast::<AtomicU64>() }
}

/// Claims a slot, copies `rec` in and publishes it (`crate::ring`); false
/// (and a drop counted) when the ring is full.
fn push(base: *mut u8, rec: &ring::Record) -> bool {
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

fn tid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

// ---------------------------------------------------------------------------
// Counting and sampling.

fn flush(base: *mut u8, t: &Thread) {
    header_i64(base, L::H_LIVE).fetch_add(t.live.replace(0), Relaxed);
    let a = t.allocated.replace(0);
    header_u64(base, L::H_ALLOCATED).fetch_add(a as u64, Relaxed);
}

fn draw(t: &Thread) -> i64 {
    let mut x = t.rng.get();
    if !t.seeded.get() {
        x = sampling::seed(tid(), t as *const Thread as u64);
        t.seeded.set(true);
    }
    let gap = sampling::gap(&mut x, EVERY.load(Relaxed));
    t.rng.set(x);
    gap
}

/// After the program got `p` of `size` bytes (`mapped`: a mapping's
/// length; a block counts its usable size).
#[inline]
fn allocated(p: *mut c_void, size: usize, mapped: Option<usize>) {
    let base = RING.load(Relaxed);
    if base.is_null() || p.is_null() {
        return;
    }
    let counting = COUNTING.load(Relaxed);
    let counted = if counting {
        mapped.unwrap_or_else(|| usable(p))
    } else {
        0
    };
    T.with(|t| {
        if counting {
            t.live.set(t.live.get() + counted as i64);
            t.allocated.set(t.allocated.get() + counted as i64);
            if t.live.get().abs() >= L::FLUSH_BYTES || t.allocated.get() >= L::FLUSH_BYTES {
                flush(base, t);
            }
        }
        if t.guard.get() {
            return;
        }
        if !t.seeded.get() {
            t.until_sample.set(draw(t));
        }
        if let Some(left) = sampling::countdown(t.until_sample.get(), size) {
            t.until_sample.set(left);
            return;
        }
        t.until_sample.set(draw(t));
        t.guard.set(true);
        sample(p as u64, size as u64);
        t.guard.set(false);
    });
}

/// Before the program gives back `p` (`mapped`: the length of a mapping
/// `allocated` counted; a block counts its usable size).
#[inline]
fn freeing(p: *mut c_void, mapped: Option<usize>) {
    let base = RING.load(Relaxed);
    if base.is_null() || p.is_null() {
        return;
    }
    if COUNTING.load(Relaxed) {
        let counted = mapped.unwrap_or_else(|| usable(p));
        T.with(|t| {
            t.live.set(t.live.get() - counted as i64);
            if t.live.get().abs() >= L::FLUSH_BYTES {
                flush(base, t);
            }
        });
    }
    if sampled_remove(p as u64) {
        let ring = RingUse::enter();
        if !ring.base.is_null() {
            push(ring.base, &ring::Record::free(p as u64));
        }
    }
}

/// Python frames read for a sample, innermost first: the site and enough
/// of its callers (each costs a walk of its code's line table).
const PY_FRAMES: usize = 12;

/// A sample, `errno` as the program left it: the looks at the watch and
/// the loader's objects make system calls that fail (EWOULDBLOCK while the
/// watch holds its lock) inside the program's `malloc`.
#[cold]
#[inline(never)]
fn sample(addr: u64, size: u64) {
    // SAFETY: errno is this thread's.
    let saved = unsafe { *libc::__errno_location() };
    sample_keeping_errno(addr, size);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
}

fn sample_keeping_errno(addr: u64, size: u64) {
    let ring = RingUse::enter();
    let base = ring.base;
    if base.is_null() {
        return;
    }
    let look = !COUNTING.load(Relaxed) && attach::due();
    if look && attach::watch_over(base) {
        // The watch that attached has ended: sampling stops, every hook
        // only forwards from here on, and the ring is unmapped once no
        // thread holds it (this one's `ring`, dropped on return, may be
        // the last). A watch killed (SIGKILL) left its folder: the ring's
        // file goes, and the folder once empty.
        if retire(base) {
            attach::remove_files(base);
        }
        return;
    }
    if look {
        attach::patch_new();
    }
    header_u64(base, L::H_SAMPLED).fetch_add(1, Relaxed);
    // Python frames first: where there are some they are the site, and the
    // native unwind (the costly part of a sample) is skipped.
    let mut py = [(0u32, 0u32); L::MAX_PY];
    let n_py = python::frames(base, &mut py[..PY_FRAMES]);
    let mut frames = [ptr::null_mut::<c_void>(); L::MAX_NATIVE];
    let n = if n_py > 0 {
        0
    } else {
        // SAFETY: the buffer holds MAX_NATIVE pointers. glibc's backtrace
        // may load libgcc_s (and allocate) the first time: the guard is set.
        unsafe { backtrace(frames.as_mut_ptr(), L::MAX_NATIVE as c_int) }.max(0) as usize
    };
    if !sampled_insert(addr) {
        // Its free could not be seen: a sample never freed would read as
        // growth. Not kept.
        header_u64(base, L::H_TABLE_FULL).fetch_add(1, Relaxed);
        return;
    }
    let w = L::weight(size, EVERY.load(Relaxed));
    let mut native = [0u64; L::MAX_NATIVE];
    for (to, f) in native.iter_mut().zip(&frames[..n]) {
        *to = *f as u64;
    }
    let rec = ring::Record::alloc(addr, size, w, tid(), &native[..n], &py[..n_py]);
    let pushed = push(base, &rec);
    if !pushed {
        sampled_remove(addr);
    }
}

// ---------------------------------------------------------------------------
// The replaced entry points.

/// # Safety
/// As C's `malloc`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    let p = match real(&REAL.malloc) {
        // SAFETY: the next allocator's malloc, called as the program did.
        Some(f) => unsafe { core::mem::transmute::<usize, MallocFn>(f)(size) },
        // SAFETY: glibc's malloc, as the program would have called it.
        None => unsafe { __libc_malloc(size) },
    };
    allocated(p, size, None);
    p
}

/// # Safety
/// As C's `free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    freeing(p, None);
    match real(&REAL.free) {
        // SAFETY: the next allocator's free, on a block it made.
        Some(f) => unsafe { core::mem::transmute::<usize, FreeFn>(f)(p) },
        // SAFETY: glibc's free, on a block it made.
        None => unsafe { __libc_free(p) },
    }
}

/// # Safety
/// As C's `calloc`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    let p = match real(&REAL.calloc) {
        // SAFETY: the next allocator's calloc, called as the program did.
        Some(f) => unsafe { core::mem::transmute::<usize, CallocFn>(f)(n, size) },
        // SAFETY: glibc's calloc.
        None => unsafe { __libc_calloc(n, size) },
    };
    allocated(p, n.saturating_mul(size), None);
    p
}

/// # Safety
/// As C's `realloc`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    // The old block's size, before it is gone (only while counting).
    let old = if RING.load(Relaxed).is_null() || !COUNTING.load(Relaxed) {
        0
    } else {
        usable(p)
    };
    let q = match real(&REAL.realloc) {
        // SAFETY: the next allocator's realloc, on a block it made.
        Some(f) => unsafe { core::mem::transmute::<usize, ReallocFn>(f)(p, size) },
        // SAFETY: glibc's realloc.
        None => unsafe { __libc_realloc(p, size) },
    };
    if q.is_null() && size != 0 {
        // Failed: `p` is still the program's, unchanged.
        return q;
    }
    // The old block is gone (or is `q`, resized): counted as freed, then
    // `q` as a new allocation, sampled by its new size.
    if !p.is_null() {
        freeing(p, Some(old));
    }
    allocated(q, size, None);
    q
}

/// # Safety
/// As glibc's `reallocarray`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        // SAFETY: as `realloc`.
        Some(total) => unsafe { realloc(p, total) },
        None => {
            // SAFETY: errno is this thread's.
            unsafe { *libc::__errno_location() = libc::ENOMEM };
            ptr::null_mut()
        }
    }
}

fn aligned(slot: &AtomicUsize, align: usize, size: usize) -> *mut c_void {
    let p = match real(slot) {
        // SAFETY: the next allocator's memalign-like function (memalign,
        // aligned_alloc), called as the program did.
        Some(f) => unsafe { core::mem::transmute::<usize, MemalignFn>(f)(align, size) },
        // SAFETY: glibc's memalign does what both do.
        None => unsafe { __libc_memalign(align, size) },
    };
    allocated(p, size, None);
    p
}

/// # Safety
/// As C's `memalign`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    aligned(&REAL.memalign, align, size)
}

/// # Safety
/// As C's `aligned_alloc`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    aligned(&REAL.aligned_alloc, align, size)
}

/// # Safety
/// As C's `posix_memalign`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    let rc = match real(&REAL.posix_memalign) {
        // SAFETY: the next allocator's posix_memalign, called as the
        // program did (`out` is the program's).
        Some(f) => unsafe { core::mem::transmute::<usize, PosixMemalignFn>(f)(out, align, size) },
        None => {
            if !align.is_power_of_two() || !align.is_multiple_of(core::mem::size_of::<usize>()) {
                return libc::EINVAL;
            }
            // SAFETY: glibc's memalign with an alignment it accepts.
            let p = unsafe { __libc_memalign(align, size) };
            if p.is_null() {
                return libc::ENOMEM;
            }
            // SAFETY: `out` is the program's pointer to write the block to.
            unsafe { *out = p };
            0
        }
    };
    if rc == 0 {
        // SAFETY: on success `*out` holds the new block.
        let p = unsafe { *out };
        allocated(p, size, None);
    }
    rc
}

fn page_aligned(
    slot: &AtomicUsize,
    size: usize,
    glibc: unsafe extern "C" fn(usize) -> *mut c_void,
) -> *mut c_void {
    let p = match real(slot) {
        // SAFETY: the next allocator's valloc or pvalloc.
        Some(f) => unsafe { core::mem::transmute::<usize, MallocFn>(f)(size) },
        // SAFETY: glibc's own.
        None => unsafe { glibc(size) },
    };
    allocated(p, size, None);
    p
}

/// # Safety
/// As C's `valloc`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    page_aligned(&REAL.valloc, size, __libc_valloc)
}

/// # Safety
/// As C's `pvalloc`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    page_aligned(&REAL.pvalloc, size, __libc_pvalloc)
}

/// # Safety
/// As C's `mmap`. Made by the system call itself (glibc's wrapper adds
/// nothing on x86-64 and aarch64 Linux but errno, which `syscall` sets).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmap(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: libc::off_t,
) -> *mut c_void {
    // SAFETY: the arguments are the program's, passed on unchanged.
    let r = unsafe { libc::syscall(libc::SYS_mmap, addr, len, prot, flags, fd, off) };
    let p = r as *mut c_void;
    if r != -1 && flags & libc::MAP_ANONYMOUS != 0 && flags & libc::MAP_FIXED == 0 {
        map_insert(p as u64, len as u64);
        allocated(p, len, Some(len));
    }
    if r == -1 { libc::MAP_FAILED } else { p }
}

/// # Safety
/// As `mmap`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmap64(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: libc::off64_t,
) -> *mut c_void {
    // SAFETY: as `mmap` (off_t is 64 bits here).
    unsafe { mmap(addr, len, prot, flags, fd, off as libc::off_t) }
}

/// # Safety
/// As C's `munmap`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn munmap(addr: *mut c_void, len: usize) -> c_int {
    let counted = map_remove(addr as u64, len as u64);
    if counted > 0 {
        freeing(addr, Some(counted as usize));
    }
    // SAFETY: the program's arguments, passed on unchanged.
    unsafe { libc::syscall(libc::SYS_munmap, addr, len) as c_int }
}

// ---------------------------------------------------------------------------
// Start-up, fork.

fn env(name: &[u8]) -> Option<&'static [u8]> {
    // SAFETY: `name` is NUL-terminated; getenv's result (if any) is a
    // NUL-terminated string of the environment, alive while it is not
    // changed (read once, at start-up and in a fork's child).
    let p = unsafe { libc::getenv(name.as_ptr().cast::<c_char>()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: as above.
    Some(unsafe { core::ffi::CStr::from_ptr(p) }.to_bytes())
}

fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() {
        return None;
    }
    b.iter().try_fold(0u64, |n, &c| {
        c.is_ascii_digit()
            .then(|| n.checked_mul(10)?.checked_add(u64::from(c - b'0')))
            .flatten()
    })
}

/// Writes `n` in decimal at `buf[at..]`; the new end.
fn put_decimal(buf: &mut [u8], mut at: usize, n: u64) -> usize {
    let mut digits = [0u8; 20];
    let mut k = 0;
    let mut m = n;
    loop {
        digits[k] = b'0' + (m % 10) as u8;
        k += 1;
        m /= 10;
        if m == 0 {
            break;
        }
    }
    while k > 0 && at < buf.len() {
        k -= 1;
        buf[at] = digits[k];
        at += 1;
    }
    at
}

/// Makes this process's ring in FLATLINE_SITES_DIR: `<pid>.<n>.ring`, the
/// first `n` free (an exec'd program keeps its pid). Null where it cannot.
fn open_ring(live: i64) -> *mut u8 {
    let dir = match attach::dir() {
        Some(d) => d,
        None => match env(b"FLATLINE_SITES_DIR\0") {
            Some(d) => d,
            None => return ptr::null_mut(),
        },
    };
    let mut path = [0u8; 4096];
    if dir.len() + 64 > path.len() {
        return ptr::null_mut();
    }
    path[..dir.len()].copy_from_slice(dir);
    path[dir.len()] = b'/';
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    let stem = put_decimal(&mut path, dir.len() + 1, u64::from(pid));
    path[stem] = b'.';
    let mut fd = -1;
    for n in 0..1000u64 {
        let mut end = put_decimal(&mut path, stem + 1, n);
        for &c in L::SUFFIX.as_bytes() {
            path[end] = c;
            end += 1;
        }
        path[end] = 0;
        // SAFETY: `path` is NUL-terminated.
        fd = unsafe {
            libc::open(
                path.as_ptr().cast::<c_char>(),
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                0o600,
            )
        };
        // SAFETY: errno is this thread's.
        if fd >= 0 || unsafe { *libc::__errno_location() } != libc::EEXIST {
            break;
        }
    }
    if fd < 0 {
        return ptr::null_mut();
    }
    // SAFETY: `fd` is the file just made.
    let sized = unsafe { libc::ftruncate(fd, L::RING_BYTES as libc::off_t) } == 0;
    let base = if sized {
        // SAFETY: a shared mapping of the whole file, by the system call
        // (not this library's own `mmap`, which would count it). Every page
        // is made resident now (MAP_POPULATE): pages the records reached
        // one by one would add up to the ring's 2 MiB to the job's RSS
        // slowly, over its whole run, and a watch would read flatline's own
        // ring as the job's growth. Resident from the job's first instant,
        // they are part of its start.
        let r = unsafe {
            libc::syscall(
                libc::SYS_mmap,
                ptr::null_mut::<c_void>(),
                L::RING_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                0 as libc::off_t,
            )
        };
        if r == -1 {
            ptr::null_mut()
        } else {
            r as *mut u8
        }
    } else {
        ptr::null_mut()
    };
    // SAFETY: `fd` is ours; the mapping outlives it.
    unsafe { libc::close(fd) };
    if base.is_null() {
        return base;
    }
    // The slots' sequence words are all 0 (a new file's zeros), each
    // slot's first sequence as stored (`flatline_format::sites::stored`).
    header_u32(base, L::H_PID).store(pid, Relaxed);
    header_u64(base, L::H_EVERY).store(EVERY.load(Relaxed), Relaxed);
    header_i64(base, L::H_LIVE).store(live, Relaxed);
    header_i64(base, L::H_INHERITED).store(live, Relaxed);
    header_u32(base, L::H_ATTACHED).store(u32::from(!COUNTING.load(Relaxed)), Relaxed);
    header_u64(base, L::H_PID_NS).store(pid_namespace(), Relaxed);
    attach::set_ring_path(base, &path);
    header_u64(base, L::H_MAGIC).store(L::MAGIC, Release);
    base
}

/// The inode of this process's pid namespace, 0 where it cannot be read.
fn pid_namespace() -> u64 {
    // SAFETY: all-zero is a valid stat record, filled by the call.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a record to fill; stat allocates
    // nothing.
    if unsafe { libc::stat(c"/proc/self/ns/pid".as_ptr(), &mut st) } == 0 {
        st.st_ino
    } else {
        0
    }
}

extern "C" fn before_fork() {
    lock(&python::CODE_LOCK);
}

extern "C" fn after_fork_parent() {
    unlock(&python::CODE_LOCK);
}

extern "C" fn after_fork_child() {
    unlock(&python::CODE_LOCK);
    // The child's only thread is this one: no other holds a ring or runs a
    // pass here, so what the parent's threads held is let go, and a
    // retired ring (which the child never writes) goes.
    IN_RING.store(0, SeqCst);
    attach::forked();
    let retired = RETIRED.swap(ptr::null_mut(), SeqCst);
    let parent = RING.load(Relaxed);
    if !retired.is_null() && retired != parent {
        unmap_ring(retired);
    }
    if parent.is_null() {
        return;
    }
    // The child holds what the parent held (the forking thread's share
    // not yet added in included; that share stays the parent's to add to
    // its own ring); its own ring from here on.
    let share = T.with(|t| {
        t.allocated.set(0);
        t.live.replace(0)
    });
    let live = header_i64(parent, L::H_LIVE).load(Relaxed) + share;
    let child = open_ring(live);
    if !child.is_null() && !COUNTING.load(Relaxed) {
        attach::inherit_watch(parent, child);
    }
    RING.store(child, Release);
    // The parent's ring: the child never writes it.
    unmap_ring(parent);
    python::forget_codes();
}

static ATFORK: AtomicBool = AtomicBool::new(false);

fn register_fork_handlers() {
    if ATFORK.swap(true, AcqRel) {
        return;
    }
    // SAFETY: three plain C functions that take the locks in one order.
    unsafe {
        libc::pthread_atfork(
            Some(before_fork),
            Some(after_fork_parent),
            Some(after_fork_child),
        )
    };
}

extern "C" fn init() {
    resolve();
    if let Some(every) = env(b"FLATLINE_SITES_EVERY\0").and_then(parse_u64) {
        EVERY.store(every.max(1), Relaxed);
    }
    let base = open_ring(0);
    if base.is_null() {
        return;
    }
    register_fork_handlers();
    RING.store(base, Release);
}

/// Called by `flatline watch --pid PID --sites` inside the running
/// process it attached to (through ptrace, on one stopped thread, after
/// this library was loaded with `dlopen`): sampling into a new ring in
/// `dir`, one sample per `every` bytes, while process `watcher` runs (0:
/// in another pid namespace, not looked for), the watch holds the lock on
/// `dir/watch.lock` where there is one, and the ring's file is there; then
/// the ring is unmapped. 0: sampling; 1: a ring is already being
/// written (preloaded at the start, or another watch attached); 2: the
/// ring could not be made; 3: an argument was wrong.
///
/// # Safety
/// `dir` is a NUL-terminated path.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn flatline_attach(dir: *const c_char, every: u64, watcher: u32) -> c_int {
    if dir.is_null() {
        return 3;
    }
    {
        let ring = RingUse::enter();
        if !ring.base.is_null() {
            // A ring being written: the preloaded library's, or an earlier
            // attach's whose watch is over but which has not seen it yet.
            if COUNTING.load(Relaxed) || !attach::watch_over(ring.base) {
                return 1;
            }
            if retire(ring.base) {
                attach::remove_files(ring.base);
            }
        }
    }
    // SAFETY: the caller passes a NUL-terminated path.
    let dir = unsafe { core::ffi::CStr::from_ptr(dir) }.to_bytes();
    // The ring's path, `<dir>/<pid>.<n>.ring`, must fit its header's room.
    if dir.is_empty()
        || dir.len() + 32 > L::PATH_BYTES
        || !attach::set_dir(dir)
        || !attach::find_ours()
    {
        return 3;
    }
    // The allocator the program calls, not the one after this library.
    resolve_from(libc::RTLD_DEFAULT);
    RESOLVED.store(2, Release);
    COUNTING.store(false, Release);
    EVERY.store(every.max(1), Relaxed);
    // Codes named to a ring before (an earlier attach) are named again, and
    // its blocks are not this ring's.
    python::forget_codes();
    sampled_clear();
    let base = open_ring(0);
    if base.is_null() {
        return 2;
    }
    attach::set_watch(base, watcher);
    register_fork_handlers();
    RING.store(base, Release);
    attach::patch_all();
    0
}

/// Run by the dynamic loader when the library is loaded.
#[used]
#[unsafe(link_section = ".init_array")]
static INIT: extern "C" fn() = init;

// ---------------------------------------------------------------------------
// Loaded into a running process.

mod attach {
    //! Attached (`flatline_attach`): the rings' folder and this process's
    //! ring (a path each), the watcher, and the redirection of every loaded
    //! object's allocation calls to this library's entry points.
    //!
    //! A preloaded library's `malloc` is the program's because the loader
    //! binds each call to the first definition; one loaded later is bound
    //! to nothing, so each object's global offset table (the slots its
    //! calls to `malloc`, `free`, … go through, `R_X86_64_JUMP_SLOT` and
    //! `R_X86_64_GLOB_DAT`) is pointed at this library's, as memray's
    //! symbol patcher and heaptrack's injected mode do. One 8-byte store a
    //! slot: a thread calling meanwhile gets the old function or the new,
    //! both of which forward to the same allocator.
    //!
    //! An object is patched only once the loader has finished relocating
    //! it: a slot written before its relocation would have the object's
    //! base added to it (a lazy slot) or its page made read-only under the
    //! loader's own writes, and the program would crash. The proof is its
    //! RELRO pages, which the loader makes read-only after relocating it:
    //! read from `/proc/self/maps` while `dl_iterate_phdr` holds the
    //! loader's list still. An object without RELRO is patched at the
    //! attach only (as every attacher does) and never later. Objects loaded
    //! after the attach (`dlopen`) are found at most once a second, from a
    //! sample, when the loader's count of objects added has moved (or one
    //! was still being relocated), and patched then; `dlopen` itself is
    //! not hooked, since the loader would then search flatline's library's
    //! paths instead of its caller's (`RUNPATH`).

    use super::*;

    /// A path written once by the thread that attaches (or by a fork's
    /// child, single-threaded then), read afterwards.
    pub(super) struct PathSlot {
        bytes: core::cell::UnsafeCell<[u8; 4096]>,
        len: AtomicUsize,
    }

    // SAFETY: written only before `len` is published (Release), by one
    // thread at a time (the attaching one, or a fork's only thread); read
    // after `len` is loaded (Acquire).
    unsafe impl Sync for PathSlot {}

    impl PathSlot {
        const fn new() -> Self {
            PathSlot {
                bytes: core::cell::UnsafeCell::new([0; 4096]),
                len: AtomicUsize::new(0),
            }
        }

        /// Stores `b` (NUL added); false where it does not fit.
        fn set(&self, b: &[u8]) -> bool {
            if b.len() + 1 > 4096 {
                return false;
            }
            self.len.store(0, Release);
            // SAFETY: see the `Sync` impl: this thread alone writes now.
            let buf = unsafe { &mut *self.bytes.get() };
            buf[..b.len()].copy_from_slice(b);
            buf[b.len()] = 0;
            self.len.store(b.len(), Release);
            true
        }

        /// The path without its NUL, or None if unset.
        fn get(&self) -> Option<&'static [u8]> {
            let n = self.len.load(Acquire);
            if n == 0 {
                return None;
            }
            // SAFETY: `n` bytes were written before `len` was published, and
            // the slot is static; a later `set` happens only at an attach or
            // in a fork's child, when no reader runs in this process.
            let buf: &'static [u8; 4096] = unsafe { &*self.bytes.get() };
            Some(&buf[..n])
        }
    }

    /// The folder the next ring is made in (an attach sets it). What a
    /// ring's watch is (its watcher, its lock, its file) is in the ring's
    /// own header (`H_WATCHER`, `H_LOCK`, `H_PATH`), so that a thread that
    /// finds an older ring's watch over acts on that ring's files, never on
    /// those a later attach has set meanwhile.
    static DIR: PathSlot = PathSlot::new();
    /// CLOCK_MONOTONIC_COARSE seconds of the next check of the watcher.
    static NEXT_CHECK: AtomicI64 = AtomicI64::new(0);

    pub(super) fn dir() -> Option<&'static [u8]> {
        DIR.get()
    }

    pub(super) fn set_dir(d: &[u8]) -> bool {
        DIR.set(d)
    }

    const LOCK_NAME: &[u8] = b"watch.lock";

    // The system calls the looks make, by `syscall` rather than glibc's
    // wrappers: `open`, `read` and `close` are cancellation points, and a
    // thread cancelled inside the program's `malloc` would unwind through
    // this library's frames.

    fn sys_open(path: *const c_char) -> c_int {
        // SAFETY: a NUL-terminated path, opened read-only.
        unsafe {
            libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                path,
                libc::O_RDONLY | libc::O_CLOEXEC,
                0,
            ) as c_int
        }
    }

    fn sys_read(fd: c_int, buf: &mut [u8]) -> isize {
        // SAFETY: `buf` is writable for its length.
        unsafe { libc::syscall(libc::SYS_read, fd, buf.as_mut_ptr(), buf.len()) as isize }
    }

    fn sys_close(fd: c_int) {
        // SAFETY: a descriptor this module opened.
        unsafe { libc::syscall(libc::SYS_close, fd) };
    }

    fn exists(path: *const c_char) -> bool {
        // SAFETY: a NUL-terminated path.
        unsafe { libc::syscall(libc::SYS_faccessat, libc::AT_FDCWD, path, libc::F_OK, 0) == 0 }
    }

    /// What a forked child's only thread starts from: no pass runs.
    pub(super) fn forked() {
        PATCHING.store(false, Release);
    }

    /// Writes `path` (a ring file's, NUL-terminated or not) into the ring's
    /// header, before the ring is published.
    pub(super) fn set_ring_path(base: *mut u8, path: &[u8]) {
        let n = path.iter().position(|&c| c == 0).unwrap_or(path.len());
        if n + 1 > L::PATH_BYTES {
            return;
        }
        // SAFETY: the header's path field, PATH_BYTES long, inside the
        // mapping; no reader looks at it before the ring is published.
        unsafe {
            ptr::copy_nonoverlapping(path.as_ptr(), base.add(L::H_PATH), n);
            *base.add(L::H_PATH + n) = 0;
        }
    }

    /// The ring's own path from its header, NUL-terminated in a buffer of
    /// its own, and its length; None where it holds none.
    fn ring_path(base: *mut u8) -> Option<([u8; L::PATH_BYTES], usize)> {
        let mut out = [0u8; L::PATH_BYTES];
        // SAFETY: the header's path field, inside the mapping (held by the
        // caller's RingUse), written before the ring was published.
        unsafe { ptr::copy_nonoverlapping(base.add(L::H_PATH), out.as_mut_ptr(), L::PATH_BYTES) };
        let n = out.iter().position(|&c| c == 0)?;
        (n > 0).then_some((out, n))
    }

    /// `<the folder of the ring's path>/<name>`, NUL-terminated, or (with
    /// `name` empty) the folder itself.
    fn beside(path: &[u8], name: &[u8]) -> Option<[u8; L::PATH_BYTES]> {
        let slash = path.iter().rposition(|&c| c == b'/')?;
        let dir = if name.is_empty() { slash } else { slash + 1 };
        if dir + name.len() + 1 > L::PATH_BYTES || slash == 0 {
            return None;
        }
        let mut out = [0u8; L::PATH_BYTES];
        out[..dir].copy_from_slice(&path[..dir]);
        out[dir..dir + name.len()].copy_from_slice(name);
        Some(out)
    }

    /// Marks a new ring as an attach's: its watcher, and whether the watch
    /// holds `watch.lock` in its folder.
    pub(super) fn set_watch(base: *mut u8, watcher: u32) {
        let locked = ring_path(base)
            .and_then(|(p, n)| beside(&p[..n], LOCK_NAME))
            .is_some_and(|l| exists(l.as_ptr().cast::<c_char>()));
        header_u32(base, L::H_WATCHER).store(watcher, Relaxed);
        header_u32(base, L::H_LOCK).store(u32::from(locked), Relaxed);
        NEXT_CHECK.store(0, Relaxed);
    }

    /// A forked child's ring watched as its parent's was.
    pub(super) fn inherit_watch(parent: *mut u8, child: *mut u8) {
        for at in [L::H_WATCHER, L::H_LOCK] {
            header_u32(child, at).store(header_u32(parent, at).load(Relaxed), Relaxed);
        }
    }

    /// Whether the watch still holds its lock: a shared lock cannot be
    /// had while it holds the exclusive one.
    fn lock_held(lock: &[u8]) -> bool {
        let fd = sys_open(lock.as_ptr().cast::<c_char>());
        if fd < 0 {
            // The file gone is the watch over; one that cannot be opened
            // now (no descriptor free) is not.
            // SAFETY: errno is this thread's.
            return unsafe { *libc::__errno_location() } != libc::ENOENT;
        }
        // SAFETY: `fd` is the file just opened; a lock got is let go with
        // the descriptor.
        let got = unsafe { libc::syscall(libc::SYS_flock, fd, libc::LOCK_SH | libc::LOCK_NB) } == 0;
        sys_close(fd);
        !got
    }

    /// Whether a second has passed since the last look (for one thread):
    /// samples look then whether the watch is over ([`watch_over`], a few
    /// system calls) and for objects loaded since ([`patch_new`]).
    pub(super) fn due() -> bool {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a timespec to fill; the coarse clock is read
        // from the vDSO, without a system call.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut now) };
        let next = NEXT_CHECK.load(Relaxed);
        if now.tv_sec < next
            || NEXT_CHECK
                .compare_exchange(next, now.tv_sec + 1, Relaxed, Relaxed)
                .is_err()
        {
            return false;
        }
        true
    }

    /// The ring's file (its path from its own header), the watch's lock
    /// file (its watch is over: any other process of the folder sees that
    /// as well), and the folder if that is now empty. The caller took the
    /// ring out of use ([`super::retire`] returned true) and holds it.
    pub(super) fn remove_files(base: *mut u8) {
        let Some((path, n)) = ring_path(base) else {
            return;
        };
        // SAFETY: NUL-terminated paths; failures (gone already) are
        // nothing to act on; a folder still holding rings stays.
        unsafe {
            libc::unlink(path.as_ptr().cast::<c_char>());
            if let Some(lock) = beside(&path[..n], LOCK_NAME) {
                libc::unlink(lock.as_ptr().cast::<c_char>());
            }
            if let Some(dir) = beside(&path[..n], b"") {
                libc::rmdir(dir.as_ptr().cast::<c_char>());
            }
        }
    }

    /// Whether the watch of the attached ring at `base` (held by the
    /// caller) is over: its process gone, its lock let go, or the ring's
    /// file removed (a watch removes its folder as it ends).
    pub(super) fn watch_over(base: *mut u8) -> bool {
        let Some((path, n)) = ring_path(base) else {
            return true;
        };
        let watcher = header_u32(base, L::H_WATCHER).load(Relaxed);
        // 0: the watcher is in another pid namespace (the lock tells).
        let alive = watcher == 0
            // SAFETY: signal 0 only checks that the process exists.
            || unsafe { libc::kill(watcher as libc::pid_t, 0) } == 0
            // SAFETY: errno is this thread's.
            || unsafe { *libc::__errno_location() } == libc::EPERM;
        let locked = header_u32(base, L::H_LOCK).load(Relaxed) == 1;
        let alive =
            alive && (!locked || beside(&path[..n], LOCK_NAME).is_some_and(|l| lock_held(&l)));
        let ring = exists(path.as_ptr().cast::<c_char>());
        !(alive && ring)
    }

    /// The functions whose slots are pointed here.
    const REPLACED: [&[u8]; 13] = [
        b"malloc\0",
        b"free\0",
        b"calloc\0",
        b"realloc\0",
        b"reallocarray\0",
        b"memalign\0",
        b"aligned_alloc\0",
        b"posix_memalign\0",
        b"valloc\0",
        b"pvalloc\0",
        b"mmap\0",
        b"mmap64\0",
        b"munmap\0",
    ];
    /// This library's definition of each, by `dlsym` on its own handle: a
    /// reference to `malloc` from inside it is bound like any other, to the
    /// program's (this library is not first in the global scope), so
    /// `malloc as usize` here would be the C library's.
    static OURS: [AtomicUsize; 13] = [const { AtomicUsize::new(0) }; 13];

    /// Looks this library's entry points up; false where it cannot.
    pub(super) fn find_ours() -> bool {
        // SAFETY: all-zero is a valid Dl_info (pointers, null).
        let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
        // SAFETY: an address inside this library; `info` is filled.
        if unsafe { libc::dladdr(flatline_attach as *const c_void, &mut info) } == 0
            || info.dli_fname.is_null()
        {
            return false;
        }
        // SAFETY: the loader's NUL-terminated name of this library, which is
        // loaded (RTLD_NOLOAD takes one more reference, given back below).
        let handle = unsafe { libc::dlopen(info.dli_fname, libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        if handle.is_null() {
            return false;
        }
        let mut all = true;
        for (slot, name) in OURS.iter().zip(REPLACED) {
            // SAFETY: a handle of this library and a NUL-terminated name:
            // the search starts at this library, whose definition it finds.
            let f = unsafe { libc::dlsym(handle, name.as_ptr().cast::<c_char>()) } as usize;
            all &= f != 0;
            slot.store(f, Release);
        }
        // SAFETY: the reference RTLD_NOLOAD took.
        unsafe { libc::dlclose(handle) };
        all
    }

    fn replacement(name: &[u8]) -> Option<usize> {
        let i = REPLACED.iter().position(|r| &r[..r.len() - 1] == name)?;
        match OURS[i].load(Acquire) {
            0 => None,
            f => Some(f),
        }
    }

    const PT_LOAD: u32 = 1;
    const PT_DYNAMIC: u32 = 2;
    const PT_GNU_RELRO: u32 = 0x6474_e552;
    const DT_NULL: i64 = 0;
    const DT_PLTRELSZ: i64 = 2;
    const DT_STRTAB: i64 = 5;
    const DT_SYMTAB: i64 = 6;
    const DT_RELA: i64 = 7;
    const DT_RELASZ: i64 = 8;
    const DT_JMPREL: i64 = 23;
    const R_X86_64_GLOB_DAT: u64 = 6;
    const R_X86_64_JUMP_SLOT: u64 = 7;

    /// Load bases of the objects patched (0: a free entry): each is
    /// patched once. Emptied when an object was unloaded (another may take
    /// its place) and at each attach.
    const OBJECTS: usize = 4096;
    static PATCHED: [AtomicUsize; OBJECTS] = [const { AtomicUsize::new(0) }; OBJECTS];
    /// The loader's counts of objects added and removed at the last pass.
    static ADDS_SEEN: AtomicU64 = AtomicU64::new(0);
    static SUBS_SEEN: AtomicU64 = AtomicU64::new(0);
    /// An object was still being relocated at the last pass.
    static PENDING: AtomicBool = AtomicBool::new(false);
    /// A pass runs (one at a time: it owns [`SCRATCH`]).
    static PATCHING: AtomicBool = AtomicBool::new(false);
    /// An attach found a pass running (its thread may be the one stopped
    /// for the attach, in its `read`): the next look does the attach's.
    static ATTACH_PASS_DUE: AtomicBool = AtomicBool::new(false);

    /// What a pass keeps of `/proc/self/maps`: the mappings that cannot be
    /// written (start, end), in the file's (ascending) order, and the
    /// buffer it is read through. Used only by the thread that set
    /// [`PATCHING`].
    const RANGES: usize = 65536;
    struct Scratch {
        ranges: [(usize, usize); RANGES],
        n: usize,
        /// More ranges than the table holds: those past it are not known.
        full: bool,
        buf: [u8; 16384],
    }
    struct ScratchCell(core::cell::UnsafeCell<Scratch>);
    // SAFETY: used only by the one thread that holds PATCHING.
    unsafe impl Sync for ScratchCell {}
    static SCRATCH: ScratchCell = ScratchCell(core::cell::UnsafeCell::new(Scratch {
        ranges: [(0, 0); RANGES],
        n: 0,
        full: false,
        buf: [0; 16384],
    }));

    /// A pass's state, passed to [`each_object`].
    struct Pass {
        /// At the attach: objects without RELRO are patched too.
        at_attach: bool,
        maps_read: bool,
    }

    /// Every loaded object's allocation slots, this library's and the
    /// dynamic loader's and the vDSO's aside (the attach).
    pub(super) fn patch_all() {
        if !cfg!(target_arch = "x86_64") {
            return;
        }
        if PATCHING.swap(true, Acquire) {
            ATTACH_PASS_DUE.store(true, Release);
            return;
        }
        attach_pass();
        PATCHING.store(false, Release);
    }

    /// The attach's pass, with PATCHING held.
    fn attach_pass() {
        ATTACH_PASS_DUE.store(false, Relaxed);
        for b in &PATCHED {
            b.store(0, Relaxed);
        }
        let (adds, subs) = counts();
        ADDS_SEEN.store(adds, Relaxed);
        SUBS_SEEN.store(subs, Relaxed);
        pass(true);
    }

    /// The objects loaded since the last pass, or still being relocated at
    /// it (asked from a sample, at most once a second).
    pub(super) fn patch_new() {
        if !cfg!(target_arch = "x86_64") || PATCHING.swap(true, Acquire) {
            return;
        }
        if ATTACH_PASS_DUE.load(Acquire) {
            attach_pass();
            PATCHING.store(false, Release);
            return;
        }
        let (adds, subs) = counts();
        if subs != SUBS_SEEN.swap(subs, Relaxed) {
            for b in &PATCHED {
                b.store(0, Relaxed);
            }
        }
        let moved = adds != ADDS_SEEN.swap(adds, Relaxed);
        if moved || PENDING.load(Relaxed) {
            pass(false);
        }
        PATCHING.store(false, Release);
    }

    fn pass(at_attach: bool) {
        PENDING.store(false, Relaxed);
        let mut p = Pass {
            at_attach,
            maps_read: false,
        };
        // SAFETY: the callback only reads the loader's records of each
        // object, which stay valid during the call; `p` outlives it.
        unsafe { libc::dl_iterate_phdr(Some(each_object), (&mut p as *mut Pass).cast::<c_void>()) };
    }

    /// The loader's counts of objects added and removed.
    fn counts() -> (u64, u64) {
        unsafe extern "C" fn first(
            info: *mut libc::dl_phdr_info,
            _size: usize,
            data: *mut c_void,
        ) -> c_int {
            // SAFETY: the loader's record for this call, and our pair.
            unsafe {
                let info = &*info;
                *data.cast::<(u64, u64)>() = (info.dlpi_adds, info.dlpi_subs);
            }
            1
        }
        let mut c = (0u64, 0u64);
        // SAFETY: the callback writes `c`, which outlives the call.
        unsafe { libc::dl_iterate_phdr(Some(first), (&mut c as *mut (u64, u64)).cast::<c_void>()) };
        c
    }

    /// Reads the mappings that cannot be written into [`SCRATCH`], by
    /// system calls (nothing allocated).
    fn read_maps(sc: &mut Scratch) {
        sc.n = 0;
        sc.full = false;
        let fd = sys_open(c"/proc/self/maps".as_ptr());
        if fd < 0 {
            return;
        }
        let mut kept = 0usize;
        loop {
            if kept == sc.buf.len() {
                // A line longer than the buffer (none is: a path is at
                // most 4096 bytes): dropped.
                kept = 0;
            }
            let got = sys_read(fd, &mut sc.buf[kept..]);
            if got <= 0 {
                break;
            }
            let end = kept + got as usize;
            let mut start = 0;
            while let Some(nl) = sc.buf[start..end].iter().position(|&c| c == b'\n') {
                let line = start..start + nl;
                if let Some(r) = read_only_range(&sc.buf[line]) {
                    if sc.n < RANGES {
                        sc.ranges[sc.n] = r;
                        sc.n += 1;
                    } else {
                        sc.full = true;
                    }
                }
                start += nl + 1;
            }
            sc.buf.copy_within(start..end, 0);
            kept = end - start;
        }
        sys_close(fd);
    }

    /// "start-end perms …": the range of a private mapping that can be read
    /// and neither written nor run (`r--p`, as RELRO pages are once the
    /// loader has protected them).
    fn read_only_range(line: &[u8]) -> Option<(usize, usize)> {
        let dash = line.iter().position(|&c| c == b'-')?;
        let space = line.iter().position(|&c| c == b' ')?;
        if dash >= space || line.get(space + 1..space + 5)? != b"r--p" {
            return None;
        }
        Some((hex(&line[..dash])?, hex(&line[dash + 1..space])?))
    }

    fn hex(digits: &[u8]) -> Option<usize> {
        let mut v = 0usize;
        for &c in digits {
            let d = (c as char).to_digit(16)?;
            v = v.checked_mul(16)? + d as usize;
        }
        (!digits.is_empty()).then_some(v)
    }

    fn read_only(sc: &Scratch, addr: usize) -> bool {
        let r = &sc.ranges[..sc.n];
        let i = r.partition_point(|&(start, _)| start <= addr);
        i > 0 && addr < r[i - 1].1
    }

    fn already_patched(base: usize) -> bool {
        PATCHED.iter().any(|b| b.load(Relaxed) == base)
    }

    fn mark_patched(base: usize) {
        for b in &PATCHED {
            if b.compare_exchange(0, base, Relaxed, Relaxed).is_ok() {
                return;
            }
        }
    }

    unsafe extern "C" fn each_object(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: the loader passes a valid record for this call, and
        // `pass` its Pass.
        let (info, pass) = unsafe { (&*info, &mut *data.cast::<Pass>()) };
        // SAFETY: this thread holds PATCHING (patch_all, patch_new).
        let sc = unsafe { &mut *SCRATCH.0.get() };
        if !pass.maps_read {
            // Read while the loader's list is held (this callback): an
            // object listed now cannot be unloaded, nor another mapped in
            // its place, before the pass ends.
            read_maps(sc);
            pass.maps_read = true;
        }
        let name = if info.dlpi_name.is_null() {
            &b""[..]
        } else {
            // SAFETY: a NUL-terminated name owned by the loader.
            unsafe { core::ffi::CStr::from_ptr(info.dlpi_name) }.to_bytes()
        };
        let base = info.dlpi_addr as usize;
        // SAFETY: `dlpi_phnum` program headers at `dlpi_phdr`.
        let phdrs = unsafe { core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum.into()) };
        let own = flatline_attach as *const () as usize;
        let is_self = phdrs.iter().any(|h| {
            h.p_type == PT_LOAD
                && (base + h.p_vaddr as usize..base + (h.p_vaddr + h.p_memsz) as usize)
                    .contains(&own)
        });
        let is_loader = contains(name, b"/ld-linux") || contains(name, b"/ld-");
        let is_vdso = name.starts_with(b"linux-vdso") || name.starts_with(b"linux-gate");
        if is_self || is_loader || is_vdso {
            return 0;
        }
        let Some(dynamic) = phdrs.iter().find(|h| h.p_type == PT_DYNAMIC) else {
            return 0;
        };
        let relro = phdrs.iter().find(|h| h.p_type == PT_GNU_RELRO).map(|h| {
            (
                base + h.p_vaddr as usize,
                base + (h.p_vaddr + h.p_memsz) as usize,
            )
        });
        if already_patched(base) {
            return 0;
        }
        // The pages the loader protects once it has relocated the object
        // (whole pages of the RELRO segment): read-only, it is done.
        let protected = relro
            .map(|(a, b)| (a & !4095, b & !4095))
            .filter(|(a, b)| a < b);
        match protected {
            Some((page, _)) if !read_only(sc, page) => {
                // Still being relocated (a `dlopen` under way): next time;
                // or past what the table held (not looked at again).
                if !(sc.full && sc.n > 0 && page >= sc.ranges[sc.n - 1].0) {
                    PENDING.store(true, Relaxed);
                }
                return 0;
            }
            Some(_) => {}
            // Nothing tells when it is relocated: at the attach only.
            None if pass.at_attach => {}
            None => return 0,
        }
        let mut dyn_ptr = (base + dynamic.p_vaddr as usize) as *const [i64; 2];
        let (mut strtab, mut symtab) = (0usize, 0usize);
        let (mut rela, mut relasz, mut jmprel, mut pltrelsz) = (0usize, 0usize, 0usize, 0usize);
        // The loader has made these addresses absolute (x86-64 glibc
        // rewrites them in place); an offset below the base is one it has
        // not.
        let at = |v: i64| {
            let v = v as usize;
            if v < base { v + base } else { v }
        };
        loop {
            // SAFETY: the dynamic section is a DT_NULL-terminated array of
            // (tag, value) pairs, mapped with its object.
            let [tag, val] = unsafe { dyn_ptr.read() };
            match tag {
                DT_NULL => break,
                DT_STRTAB => strtab = at(val),
                DT_SYMTAB => symtab = at(val),
                DT_RELA => rela = at(val),
                DT_RELASZ => relasz = val as usize,
                DT_JMPREL => jmprel = at(val),
                DT_PLTRELSZ => pltrelsz = val as usize,
                _ => {}
            }
            // SAFETY: the next pair; the DT_NULL one ends the loop.
            dyn_ptr = unsafe { dyn_ptr.add(1) };
        }
        if strtab == 0 || symtab == 0 {
            return 0;
        }
        for (table, bytes) in [(jmprel, pltrelsz), (rela, relasz)] {
            if table == 0 {
                continue;
            }
            // Elf64_Rela: r_offset, r_info, r_addend.
            let relocs = table as *const [u64; 3];
            for i in 0..bytes / 24 {
                // SAFETY: `bytes / 24` records at `table`, as the dynamic
                // section states.
                let [offset, rinfo, _] = unsafe { relocs.add(i).read() };
                let kind = rinfo & 0xffff_ffff;
                if kind != R_X86_64_JUMP_SLOT && kind != R_X86_64_GLOB_DAT {
                    continue;
                }
                let sym = (rinfo >> 32) as usize;
                // Elf64_Sym: st_name (u32) first, 24 bytes each.
                // SAFETY: the relocation's symbol index is in the table.
                let st_name = unsafe { ((symtab + sym * 24) as *const u32).read() } as usize;
                // SAFETY: st_name is an offset of a NUL-terminated string
                // in the string table.
                let sym_name =
                    unsafe { core::ffi::CStr::from_ptr((strtab + st_name) as *const c_char) };
                let Some(to) = replacement(sym_name.to_bytes()) else {
                    continue;
                };
                let slot = base + offset as usize;
                write_slot(slot, to, relro);
            }
        }
        mark_patched(base);
        0
    }

    fn contains(hay: &[u8], needle: &[u8]) -> bool {
        hay.windows(needle.len()).any(|w| w == needle)
    }

    /// Stores `to` in the slot at `slot`: a slot in the object's RELRO
    /// range (read-only after relocation) is made writable for the store
    /// and read-only again.
    fn write_slot(slot: usize, to: usize, relro: Option<(usize, usize)>) {
        // SAFETY: an aligned 8-byte slot of the object's offset table,
        // mapped readable with its object.
        if unsafe { (*(slot as *const AtomicUsize)).load(Relaxed) } == to {
            return;
        }
        let page = slot & !4095;
        // The pages the loader made read-only: whole pages of the segment
        // (a slot in its last, partial page shares a writable page).
        let in_relro = relro.is_some_and(|(a, b)| a & !4095 <= slot && slot < b & !4095);
        if in_relro {
            // SAFETY: the page holds the slot, mapped with its object.
            if unsafe {
                libc::mprotect(
                    page as *mut c_void,
                    4096,
                    libc::PROT_READ | libc::PROT_WRITE,
                )
            } != 0
            {
                return;
            }
        }
        // SAFETY: an aligned 8-byte slot of the object's offset table, now
        // writable; other threads read it whole (an aligned store).
        unsafe { (*(slot as *const AtomicUsize)).store(to, Release) };
        if in_relro {
            // SAFETY: as above, back to what RELRO made it.
            unsafe { libc::mprotect(page as *mut c_void, 4096, libc::PROT_READ) };
        }
    }
}

// ---------------------------------------------------------------------------
// Python frames.

mod python {
    //! The calling thread's Python frames in CPython 3.10 to 3.13, read
    //! from the interpreter's frame records where its version keeps them
    //! (`crate::python`: a checked table for 3.10 to 3.12, the
    //! interpreter's own `_Py_DebugOffsets` for 3.13): a thread's own
    //! frames do not change while it is inside a C call, GIL held or not
    //! (PyTorch releases it around its operators), and nothing is called
    //! that could allocate. Each frame's code is checked to be a code
    //! object (`PyCode_Type`) before it is read. A free-threaded build or
    //! another version gets native frames only, said in the ring's header.

    use super::*;
    use crate::python::{self as layout, Instr, Layout, Refused};

    static STATE: AtomicU32 = AtomicU32::new(L::PY_UNKNOWN);
    static TRIES: AtomicU32 = AtomicU32::new(0);
    static THREAD_STATE: AtomicUsize = AtomicUsize::new(0);
    static ADDR2LINE: AtomicUsize = AtomicUsize::new(0);
    static CODE_TYPE: AtomicUsize = AtomicUsize::new(0);
    /// Set once, before the state says frames are read. Setting it takes
    /// no allocation; a thread that probes at the same moment waits for the
    /// copy of a few words.
    static LAYOUT: std::sync::OnceLock<Layout> = std::sync::OnceLock::new();

    type ThreadStateFn = unsafe extern "C" fn() -> *mut u8;
    type Addr2LineFn = unsafe extern "C" fn(*mut u8, c_int) -> c_int;
    type IntFn = unsafe extern "C" fn() -> c_int;
    type StrFn = unsafe extern "C" fn() -> *const c_char;

    /// Code objects seen: their address (and their name's and file's, to
    /// tell a freed one's address reused), the id is the index + 1.
    const CODES: usize = 4096;
    static CODE_KEY: [AtomicUsize; CODES] = [const { AtomicUsize::new(0) }; CODES];
    static CODE_CHECK: [AtomicUsize; CODES] = [const { AtomicUsize::new(0) }; CODES];
    pub(super) static CODE_LOCK: AtomicBool = AtomicBool::new(false);

    /// Frames walked at most for one sample (entry frames skipped count).
    const WALK: usize = 256;

    fn symbol(name: &[u8]) -> usize {
        // SAFETY: NUL-terminated; RTLD_DEFAULT searches the process (the
        // executable of a static build exports its symbols, a shared one's
        // libpython is loaded globally), whatever path the program ran by.
        unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr().cast::<c_char>()) as usize }
    }

    fn set_state(base: *mut u8, s: u32) {
        STATE.store(s, Release);
        header_u32(base, L::H_PYTHON).store(s, Relaxed);
    }

    /// The layout of the interpreter this process runs, or why none.
    fn find_layout(major: u64, minor: u64) -> Result<Layout, Refused> {
        if let Some(l) = layout::table(major, minor) {
            return Ok(l);
        }
        if (major, minor) != (3, 13) {
            return Err(Refused::Version);
        }
        let runtime = symbol(b"_PyRuntime\0");
        if runtime == 0 {
            return Err(Refused::DebugOffsets);
        }
        // SAFETY: `_PyRuntime` is 3.13's `_PyRuntimeState`, a static of
        // many KiB whose first member is its `_Py_DebugOffsets` (584 bytes
        // in 3.13, checked against its headers); written once before the
        // interpreter is initialized, read only.
        let blob = unsafe {
            core::slice::from_raw_parts(runtime as *const u8, layout::DEBUG_OFFSETS_BYTES)
        };
        layout::from_debug_offsets(blob)
    }

    #[cold]
    fn probe(base: *mut u8) {
        let initialized = symbol(b"Py_IsInitialized\0");
        if initialized == 0 {
            if TRIES.fetch_add(1, Relaxed) > 64 {
                set_state(base, L::PY_NONE);
            }
            return;
        }
        // SAFETY: CPython's `int Py_IsInitialized(void)`, callable any time.
        if unsafe { core::mem::transmute::<usize, IntFn>(initialized)() } == 0 {
            return;
        }
        let version = symbol(b"Py_GetVersion\0");
        if version == 0 {
            set_state(base, L::PY_NONE);
            return;
        }
        // SAFETY: `const char *Py_GetVersion(void)`: a static string.
        let v =
            unsafe { core::ffi::CStr::from_ptr(core::mem::transmute::<usize, StrFn>(version)()) };
        let Some((major, minor, free)) = layout::parse_version(v.to_bytes()) else {
            set_state(base, L::PY_UNSUPPORTED);
            return;
        };
        header_u32(base, L::H_PY_VERSION).store((major * 100 + minor) as u32, Relaxed);
        if free {
            set_state(base, L::PY_FREE_THREADED);
            return;
        }
        let tstate = symbol(b"PyGILState_GetThisThreadState\0");
        let addr2line = symbol(b"PyCode_Addr2Line\0");
        let code_type = symbol(b"PyCode_Type\0");
        if tstate == 0 || addr2line == 0 || code_type == 0 {
            set_state(base, L::PY_UNSUPPORTED);
            return;
        }
        match find_layout(major, minor) {
            Ok(l) => {
                // Two threads probing find the same layout: the first stays.
                let _ = LAYOUT.set(l);
                THREAD_STATE.store(tstate, Relaxed);
                ADDR2LINE.store(addr2line, Relaxed);
                CODE_TYPE.store(code_type, Relaxed);
                set_state(base, L::PY_FRAMES);
            }
            Err(Refused::FreeThreaded) => set_state(base, L::PY_FREE_THREADED),
            Err(_) => set_state(base, L::PY_UNSUPPORTED),
        }
    }

    fn word(p: usize, at: usize) -> usize {
        // SAFETY: callers pass a live interpreter structure of this thread
        // and an offset inside it (its version's layout, see the module's
        // comment).
        unsafe { ((p + at) as *const usize).read() }
    }

    fn word32(p: usize, at: usize) -> u32 {
        // SAFETY: as `word`, a 4-byte field.
        unsafe { ((p + at) as *const u32).read() }
    }

    fn byte(p: usize, at: usize) -> u8 {
        // SAFETY: as `word`, a 1-byte field.
        unsafe { ((p + at) as *const u8).read() }
    }

    /// Fills `out` with (code id, line), innermost first; how many.
    pub(super) fn frames(base: *mut u8, out: &mut [(u32, u32)]) -> usize {
        match STATE.load(Acquire) {
            L::PY_FRAMES => {}
            L::PY_UNKNOWN => {
                probe(base);
                if STATE.load(Acquire) != L::PY_FRAMES {
                    return 0;
                }
            }
            _ => return 0,
        }
        let Some(l) = LAYOUT.get().copied() else {
            return 0;
        };
        let get = THREAD_STATE.load(Relaxed);
        // SAFETY: `PyThreadState *PyGILState_GetThisThreadState(void)`,
        // callable from any thread with or without the GIL; null for a
        // thread Python does not know.
        let tstate = unsafe { core::mem::transmute::<usize, ThreadStateFn>(get)() } as usize;
        if tstate == 0 {
            return 0;
        }
        let mut frame = word(tstate, l.tstate_frame);
        if let Some(current) = l.cframe_current {
            if frame == 0 {
                return 0;
            }
            frame = word(frame, current);
        }
        let addr2line = ADDR2LINE.load(Relaxed);
        let code_type = CODE_TYPE.load(Relaxed);
        let mut n = 0;
        for _ in 0..WALK {
            if frame == 0 || n == out.len() {
                break;
            }
            let code = word(frame, l.frame_code);
            let previous = word(frame, l.frame_previous);
            let entry = l
                .frame_owner
                .is_some_and(|o| layout::is_entry_frame(byte(frame, o)));
            if entry {
                frame = previous;
                continue;
            }
            if code == 0 {
                break;
            }
            if word(code, l.object_type) != code_type {
                // Not Python code (3.13's None of an entry frame).
                frame = previous;
                continue;
            }
            let at = match l.instr {
                Instr::Index => word32(frame, l.frame_instr) as usize,
                Instr::Pointer => word(frame, l.frame_instr),
            };
            let line = match layout::byte_offset(&l, code, at) {
                None => word32(code, l.code_firstlineno) as c_int,
                // SAFETY: `int PyCode_Addr2Line(PyCodeObject *, int)`: a
                // pure table lookup on a live code object.
                Some(offset) => unsafe {
                    core::mem::transmute::<usize, Addr2LineFn>(addr2line)(code as *mut u8, offset)
                },
            };
            out[n] = (code_id(base, code, &l), line.max(0) as u32);
            n += 1;
            frame = previous;
        }
        n
    }

    /// The UTF-8 of a `str` where it is held as such (compact ASCII, or a
    /// cached UTF-8 copy); None otherwise.
    fn utf8(s: usize, l: &Layout) -> Option<&'static [u8]> {
        if s == 0 {
            return None;
        }
        // A live str object (a live code object's name or file); state is
        // its 32-bit bit field.
        let form = layout::str_form(word32(s, l.str_state));
        if form == layout::StrForm::Ascii {
            let len = word(s, l.str_length);
            // SAFETY: a compact ASCII str's characters follow its header.
            return Some(unsafe {
                core::slice::from_raw_parts((s + l.str_ascii_data) as *const u8, len)
            });
        }
        if form == layout::StrForm::Compact {
            let p = word(s, l.str_utf8);
            if p != 0 {
                let len = word(s, l.str_utf8_length);
                // SAFETY: the str's cached UTF-8, `len` bytes.
                return Some(unsafe { core::slice::from_raw_parts(p as *const u8, len) });
            }
        }
        None
    }

    fn code_id(base: *mut u8, code: usize, l: &Layout) -> u32 {
        let name = word(code, l.code_name);
        let file = word(code, l.code_filename);
        let check = name ^ file.rotate_left(17);
        let h = ((code as u64 >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize % CODES;
        lock(&CODE_LOCK);
        let mut id = 0;
        for i in 0..64 {
            let j = (h + i) % CODES;
            let k = CODE_KEY[j].load(Relaxed);
            if k == code && CODE_CHECK[j].load(Relaxed) == check {
                id = j as u32 + 1;
                break;
            }
            if k == 0 || k == code {
                // New, or a freed code object's address reused: say what
                // this id now names, before any sample uses it.
                let first = u64::from(word32(code, l.code_firstlineno));
                let name = utf8(name, l).unwrap_or(b"?");
                let file = utf8(file, l).unwrap_or(b"?");
                let this = j as u32 + 1;
                let said = push(base, &ring::Record::code(this, first, name, file));
                if said {
                    CODE_KEY[j].store(code, Relaxed);
                    CODE_CHECK[j].store(check, Relaxed);
                    id = this;
                }
                break;
            }
        }
        unlock(&CODE_LOCK);
        id
    }

    /// A fork's child writes a new ring: its code objects are said again.
    pub(super) fn forget_codes() {
        for k in &CODE_KEY {
            k.store(0, Relaxed);
        }
    }
}
