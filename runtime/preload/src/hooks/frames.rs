//! The calling thread's Python frames in CPython 3.10 to 3.13, read
//! from the interpreter's frame records where its version keeps them
//! (`crate::python`: a checked table for 3.10 to 3.12, the
//! interpreter's own `_Py_DebugOffsets` for 3.13): a thread's own
//! frames do not change while it is inside a C call, GIL held or not
//! (PyTorch releases it around its operators), and nothing is called
//! that could allocate. Each frame's code is checked to be a code
//! object (`PyCode_Type`) before it is read. A free-threaded build or
//! another version gets native frames only, said in the ring's header.

use core::ffi::{c_char, c_int};
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize};

use flatline_format::sites as L;

use super::shared::{header_u32, lock, push, unlock};
use crate::ring;

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
    let blob =
        unsafe { core::slice::from_raw_parts(runtime as *const u8, layout::DEBUG_OFFSETS_BYTES) };
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
    let v = unsafe { core::ffi::CStr::from_ptr(core::mem::transmute::<usize, StrFn>(version)()) };
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
