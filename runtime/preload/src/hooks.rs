//! The replaced allocator entry points, the sampler and the ring's making,
//! with the attach ([`attach`]), the Python frame walk ([`frames`]) and the
//! ring's header and slots ([`shared`], which the other two use and nothing
//! here imports back): all of the crate's `unsafe`.
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
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize};

use flatline_format::sites as L;

use crate::{ring, sampling, table};

mod shared;
use shared::{header_i64, header_u32, header_u64, lock, push, unlock};

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
    let n_py = frames::frames(base, &mut py[..PY_FRAMES]);
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
    lock(&frames::CODE_LOCK);
}

extern "C" fn after_fork_parent() {
    unlock(&frames::CODE_LOCK);
}

extern "C" fn after_fork_child() {
    unlock(&frames::CODE_LOCK);
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
    frames::forget_codes();
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
    frames::forget_codes();
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

mod attach;

// ---------------------------------------------------------------------------
// Python frames.

mod frames;
