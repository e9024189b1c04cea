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

use core::ffi::{c_char, c_int, c_void};
use core::ptr;
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use core::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize};

use flatline_format::sites as L;

use super::shared::header_u32;

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
    let alive = alive && (!locked || beside(&path[..n], LOCK_NAME).is_some_and(|l| lock_held(&l)));
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
    if unsafe { libc::dladdr(find_ours as *const c_void, &mut info) } == 0
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
    let own = find_ours as *const () as usize;
    let is_self = phdrs.iter().any(|h| {
        h.p_type == PT_LOAD
            && (base + h.p_vaddr as usize..base + (h.p_vaddr + h.p_memsz) as usize).contains(&own)
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
