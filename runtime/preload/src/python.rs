//! Where CPython keeps a thread's frames, version by version: the plain
//! logic the hooks' frame reader (`hooks::python`) runs on, tested here
//! (under Miri too), away from the reads themselves.
//!
//! - 3.10: the thread state points at the innermost `PyFrameObject`; each
//!   has its code object, its caller (`f_back`) and `f_lasti`, the index of
//!   its last instruction (code units).
//! - 3.11 and 3.12: the thread state points at a `_PyCFrame`, whose
//!   `current_frame` is the innermost `_PyInterpreterFrame`; each has its
//!   code object, its caller (`previous`) and `prev_instr`, a pointer into
//!   the code's bytecode. 3.12 adds entry frames the C stack owns (`owner`
//!   = `FRAME_OWNED_BY_CSTACK`), which are no Python code's.
//! - 3.13: no `_PyCFrame`: the thread state's `current_frame`; `f_code`
//!   becomes `f_executable` (a code object, or None in an entry frame) and
//!   `prev_instr` becomes `instr_ptr` (the instruction being executed). The
//!   offsets are not taken from a table here but from the interpreter's own
//!   `_Py_DebugOffsets`, which it publishes for tools like this one at the
//!   start of `_PyRuntime` (cookie `xdebugpy`); only where each offset sits
//!   in that structure is 3.13's.
//!
//! The tables of 3.10, 3.11 and 3.12 and the positions in 3.13's
//! `_Py_DebugOffsets` are those of CPython's own headers, checked by the
//! test `layouts_match_each_installed_interpreter_s_headers`, which
//! compiles `offsetof` against every pyenv interpreter it finds. They hold
//! for the default (GIL) build on 64-bit Linux: a free-threaded build (its
//! objects have a larger header) and any other version are refused, said
//! as such, and get native frames, never a Python line read with a wrong
//! layout.

/// How a frame says where it is in its code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Instr {
    /// A C `int`: the index of its last instruction in code units (two
    /// bytes), −1 before it starts (3.10's `f_lasti`).
    Index,
    /// A pointer into the code object's bytecode, which starts at
    /// [`Layout::code_adaptive`] (3.11's and 3.12's `prev_instr`, 3.13's
    /// `instr_ptr`).
    Pointer,
}

/// The offsets the frame reader uses, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    /// In the thread state: the innermost frame (3.10, 3.13), or the
    /// `_PyCFrame` that holds it (3.11, 3.12).
    pub tstate_frame: usize,
    /// In the `_PyCFrame`, where there is one: the innermost frame.
    pub cframe_current: Option<usize>,
    pub frame_code: usize,
    pub frame_previous: usize,
    pub frame_instr: usize,
    pub instr: Instr,
    /// The frame's owner byte, where entry frames of the C stack exist.
    pub frame_owner: Option<usize>,
    pub code_filename: usize,
    /// `co_qualname` from 3.11, `co_name` before.
    pub code_name: usize,
    /// A C `int`.
    pub code_firstlineno: usize,
    pub code_adaptive: usize,
    /// `str`: its length, its 32-bit state, where an ASCII one's characters
    /// start (the size of `PyASCIIObject`), and a compact one's cached
    /// UTF-8 length and pointer.
    pub str_length: usize,
    pub str_state: usize,
    pub str_ascii_data: usize,
    pub str_utf8_length: usize,
    pub str_utf8: usize,
    pub object_type: usize,
}

/// `FRAME_OWNED_BY_CSTACK` (3.12, 3.13): an entry frame, no Python code.
const OWNED_BY_CSTACK: u8 = 3;

/// Whether a frame whose owner byte is `owner` is an entry frame of the C
/// stack (3.12, 3.13), which holds no Python code of its own.
pub(crate) fn is_entry_frame(owner: u8) -> bool {
    owner == OWNED_BY_CSTACK
}

/// The `str` state's bits (3.10 to 3.13 alike): compact, then ASCII.
const STATE_COMPACT: u32 = 1 << 5;
const STATE_ASCII: u32 = 1 << 6;

/// How a `str` holds its characters, by its state word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StrForm {
    /// Compact ASCII: its characters follow its `PyASCIIObject` header.
    Ascii,
    /// Compact, not ASCII: a UTF-8 copy, where one was made, is pointed to.
    Compact,
    /// A legacy (non-compact) string: not read.
    Other,
}

pub(crate) fn str_form(state: u32) -> StrForm {
    match (state & STATE_COMPACT != 0, state & STATE_ASCII != 0) {
        (true, true) => StrForm::Ascii,
        (true, false) => StrForm::Compact,
        _ => StrForm::Other,
    }
}

const V3_10: Layout = Layout {
    tstate_frame: 24,
    cframe_current: None,
    frame_code: 32,
    frame_previous: 24,
    frame_instr: 96,
    instr: Instr::Index,
    frame_owner: None,
    code_filename: 104,
    code_name: 112,
    code_firstlineno: 40,
    // Unused with Instr::Index.
    code_adaptive: 0,
    str_length: 16,
    str_state: 32,
    str_ascii_data: 48,
    str_utf8_length: 48,
    str_utf8: 56,
    object_type: 8,
};

const V3_11: Layout = Layout {
    tstate_frame: 56,
    cframe_current: Some(8),
    frame_code: 32,
    frame_previous: 48,
    frame_instr: 56,
    instr: Instr::Pointer,
    frame_owner: None,
    code_filename: 112,
    code_name: 128,
    code_firstlineno: 72,
    code_adaptive: 184,
    str_length: 16,
    str_state: 32,
    str_ascii_data: 48,
    str_utf8_length: 48,
    str_utf8: 56,
    object_type: 8,
};

const V3_12: Layout = Layout {
    tstate_frame: 56,
    cframe_current: Some(0),
    frame_code: 0,
    frame_previous: 8,
    frame_instr: 56,
    instr: Instr::Pointer,
    frame_owner: Some(70),
    code_filename: 112,
    code_name: 128,
    code_firstlineno: 68,
    code_adaptive: 192,
    str_length: 16,
    str_state: 32,
    str_ascii_data: 40,
    str_utf8_length: 40,
    str_utf8: 48,
    object_type: 8,
};

/// Why an interpreter's frames are not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// A version whose layout the library does not know.
    Version,
    /// A free-threaded build (`3.13t`).
    FreeThreaded,
    /// Its `_Py_DebugOffsets` were not there or did not read as 3.13's.
    DebugOffsets,
}

/// The layout of a GIL build of CPython `major.minor`, for the versions
/// whose layout is a table here; 3.13 is read from its debug offsets
/// ([`from_debug_offsets`]).
pub(crate) fn table(major: u64, minor: u64) -> Option<Layout> {
    match (major, minor) {
        (3, 10) => Some(V3_10),
        (3, 11) => Some(V3_11),
        (3, 12) => Some(V3_12),
        _ => None,
    }
}

/// "3.13.0 (main, …)" or "3.13.0 experimental free-threading build (…)":
/// (major, minor, free-threaded).
pub(crate) fn parse_version(v: &[u8]) -> Option<(u64, u64, bool)> {
    let number = |s: &[u8]| -> Option<(u64, usize)> {
        let n = s.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 || n > 4 {
            return None;
        }
        let mut x = 0;
        for &c in &s[..n] {
            x = x * 10 + u64::from(c - b'0');
        }
        Some((x, n))
    };
    let (major, a) = number(v)?;
    if v.get(a) != Some(&b'.') {
        return None;
    }
    let (minor, _) = number(&v[a + 1..])?;
    let needle = b"free-threading";
    let free = v.windows(needle.len()).any(|w| w == needle);
    Some((major, minor, free))
}

/// How many bytes of `_PyRuntime` [`from_debug_offsets`] reads.
pub(crate) const DEBUG_OFFSETS_BYTES: usize = 584;
/// `_Py_DebugOffsets.cookie`.
pub(crate) const DEBUG_COOKIE: &[u8; 8] = b"xdebugpy";

/// Where each value this reader needs sits in 3.13's `_Py_DebugOffsets`
/// (each a u64): the structure's own layout, not the interpreter's.
mod at313 {
    pub const VERSION: usize = 8;
    pub const FREE_THREADED: usize = 16;
    pub const TSTATE_SIZE: usize = 152;
    pub const TSTATE_CURRENT_FRAME: usize = 184;
    pub const FRAME_SIZE: usize = 224;
    pub const FRAME_PREVIOUS: usize = 232;
    pub const FRAME_EXECUTABLE: usize = 240;
    pub const FRAME_INSTR_PTR: usize = 248;
    pub const FRAME_OWNER: usize = 264;
    pub const CODE_SIZE: usize = 272;
    pub const CODE_FILENAME: usize = 280;
    pub const CODE_QUALNAME: usize = 296;
    pub const CODE_FIRSTLINENO: usize = 312;
    pub const CODE_ADAPTIVE: usize = 344;
    pub const OBJECT_TYPE: usize = 360;
    pub const STR_SIZE: usize = 536;
    pub const STR_STATE: usize = 544;
    pub const STR_LENGTH: usize = 552;
    pub const STR_ASCII_SIZE: usize = 560;
}

/// The layout a 3.13 interpreter publishes: `blob` is the start of its
/// `_PyRuntime` ([`DEBUG_OFFSETS_BYTES`]). Refused unless the cookie is
/// there, the version it carries is 3.13, the build is not free-threaded,
/// and every offset lies inside the structure it is of.
pub(crate) fn from_debug_offsets(blob: &[u8]) -> Result<Layout, Refused> {
    use at313 as A;
    if blob.len() < DEBUG_OFFSETS_BYTES || &blob[..8] != DEBUG_COOKIE {
        return Err(Refused::DebugOffsets);
    }
    let u = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&blob[at..at + 8]);
        u64::from_le_bytes(b) as usize
    };
    // PY_VERSION_HEX: 0xMMmmPPRS.
    let version = u(A::VERSION);
    if (version >> 24, version >> 16 & 0xff) != (3, 13) {
        return Err(Refused::Version);
    }
    if u(A::FREE_THREADED) != 0 {
        return Err(Refused::FreeThreaded);
    }
    let inside = |size: usize, fields: &[usize], width: usize| {
        size > 0 && size < 1 << 16 && fields.iter().all(|&f| f + width <= size)
    };
    let (tstate, frame, code, text) = (
        u(A::TSTATE_SIZE),
        u(A::FRAME_SIZE),
        u(A::CODE_SIZE),
        u(A::STR_SIZE),
    );
    let l = Layout {
        tstate_frame: u(A::TSTATE_CURRENT_FRAME),
        cframe_current: None,
        frame_code: u(A::FRAME_EXECUTABLE),
        frame_previous: u(A::FRAME_PREVIOUS),
        frame_instr: u(A::FRAME_INSTR_PTR),
        instr: Instr::Pointer,
        frame_owner: Some(u(A::FRAME_OWNER)),
        code_filename: u(A::CODE_FILENAME),
        code_name: u(A::CODE_QUALNAME),
        code_firstlineno: u(A::CODE_FIRSTLINENO),
        code_adaptive: u(A::CODE_ADAPTIVE),
        str_length: u(A::STR_LENGTH),
        str_state: u(A::STR_STATE),
        str_ascii_data: u(A::STR_ASCII_SIZE),
        // A compact str: PyASCIIObject, then its UTF-8 length and pointer.
        str_utf8_length: u(A::STR_ASCII_SIZE),
        str_utf8: u(A::STR_ASCII_SIZE) + 8,
        object_type: u(A::OBJECT_TYPE),
    };
    let ok = inside(tstate, &[l.tstate_frame], 8)
        && inside(frame, &[l.frame_code, l.frame_previous, l.frame_instr], 8)
        && inside(frame, &[l.frame_owner.unwrap_or(0)], 1)
        && inside(code, &[l.code_filename, l.code_name, l.code_firstlineno], 8)
        && l.code_adaptive <= code
        && inside(text, &[l.str_length, l.str_utf8], 8)
        && inside(text, &[l.str_state], 4)
        && l.object_type == 8;
    if ok {
        Ok(l)
    } else {
        Err(Refused::DebugOffsets)
    }
}

/// The byte offset into a code object's bytecode that `PyCode_Addr2Line`
/// takes, from what a frame holds (`value`: 3.10's `f_lasti`, or the
/// instruction pointer); None before its first instruction, whose line is
/// the code's first.
pub(crate) fn byte_offset(l: &Layout, code: usize, value: usize) -> Option<i32> {
    let off = match l.instr {
        Instr::Index => (value as u32 as i32 as i64).checked_mul(2)?,
        Instr::Pointer => value as i64 - (code + l.code_adaptive) as i64,
    };
    // Whole code units; an offset no code object has is not a line.
    (0..i64::from(i32::MAX))
        .contains(&off)
        .then_some((off & !1) as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 3.13 `_Py_DebugOffsets` as 3.13.0 fills it (the values this
    /// reader uses; the rest zero).
    fn blob_313() -> Vec<u8> {
        let mut b = vec![0u8; DEBUG_OFFSETS_BYTES];
        b[..8].copy_from_slice(DEBUG_COOKIE);
        let mut put = |at: usize, v: u64| b[at..at + 8].copy_from_slice(&v.to_le_bytes());
        use at313 as A;
        put(A::VERSION, 0x030D_00F0);
        put(A::TSTATE_SIZE, 4368);
        put(A::TSTATE_CURRENT_FRAME, 72);
        put(A::FRAME_SIZE, 80);
        put(A::FRAME_PREVIOUS, 8);
        put(A::FRAME_EXECUTABLE, 0);
        put(A::FRAME_INSTR_PTR, 56);
        put(A::FRAME_OWNER, 70);
        put(A::CODE_SIZE, 208);
        put(A::CODE_FILENAME, 112);
        put(A::CODE_QUALNAME, 128);
        put(A::CODE_FIRSTLINENO, 68);
        put(A::CODE_ADAPTIVE, 200);
        put(A::OBJECT_TYPE, 8);
        put(A::STR_SIZE, 72);
        put(A::STR_STATE, 32);
        put(A::STR_LENGTH, 16);
        put(A::STR_ASCII_SIZE, 40);
        b
    }

    #[test]
    fn a_3_13_interpreter_s_own_offsets_are_its_layout() {
        let l = from_debug_offsets(&blob_313()).expect("read");
        assert_eq!(l.tstate_frame, 72);
        assert_eq!(l.cframe_current, None);
        assert_eq!((l.frame_code, l.frame_previous, l.frame_instr), (0, 8, 56));
        assert_eq!(l.frame_owner, Some(70));
        assert_eq!(
            (l.code_filename, l.code_name, l.code_adaptive),
            (112, 128, 200)
        );
        assert_eq!(
            (l.str_ascii_data, l.str_utf8_length, l.str_utf8),
            (40, 40, 48)
        );
        assert_eq!(l.instr, Instr::Pointer);
    }

    #[test]
    fn debug_offsets_that_are_not_3_13_s_are_refused() {
        let put = |b: &mut Vec<u8>, at: usize, v: u64| {
            b[at..at + 8].copy_from_slice(&v.to_le_bytes());
        };
        // No cookie: not the structure at all.
        let mut b = blob_313();
        b[0] = b'X';
        assert_eq!(from_debug_offsets(&b), Err(Refused::DebugOffsets));
        assert_eq!(from_debug_offsets(&b[..100]), Err(Refused::DebugOffsets));
        // 3.14 publishes the structure with other fields: its positions
        // here would read the wrong values.
        let mut b = blob_313();
        put(&mut b, at313::VERSION, 0x030E_00F0);
        assert_eq!(from_debug_offsets(&b), Err(Refused::Version));
        let mut b = blob_313();
        put(&mut b, at313::FREE_THREADED, 1);
        assert_eq!(from_debug_offsets(&b), Err(Refused::FreeThreaded));
        // An offset outside its structure: not trusted.
        let mut b = blob_313();
        put(&mut b, at313::FRAME_INSTR_PTR, 4000);
        assert_eq!(from_debug_offsets(&b), Err(Refused::DebugOffsets));
        let mut b = blob_313();
        put(&mut b, at313::CODE_SIZE, 0);
        assert_eq!(from_debug_offsets(&b), Err(Refused::DebugOffsets));
    }

    #[test]
    fn only_the_versions_with_a_checked_table_have_one() {
        assert_eq!(table(3, 10), Some(V3_10));
        assert_eq!(table(3, 11), Some(V3_11));
        assert_eq!(table(3, 12), Some(V3_12));
        for (a, b) in [(3, 9), (3, 13), (3, 14), (2, 7), (4, 0)] {
            assert_eq!(table(a, b), None, "{a}.{b}");
        }
    }

    #[test]
    fn versions_read_from_the_interpreter_s_string() {
        assert_eq!(
            parse_version(b"3.12.1 (main, Jan  1 2024, 00:00:00) [GCC 12.2.0]"),
            Some((3, 12, false))
        );
        assert_eq!(
            parse_version(b"3.13.0 experimental free-threading build (main, Oct  8 2024)"),
            Some((3, 13, true))
        );
        assert_eq!(parse_version(b"3.10.13"), Some((3, 10, false)));
        assert_eq!(parse_version(b"x.1"), None);
        assert_eq!(parse_version(b"3"), None);
        assert_eq!(parse_version(b"3."), None);
    }

    #[test]
    fn a_frame_s_place_in_its_code_as_pycode_addr2line_takes_it() {
        // 3.10: f_lasti in code units; −1 before the first instruction.
        assert_eq!(byte_offset(&V3_10, 0x1000, 7), Some(14));
        assert_eq!(byte_offset(&V3_10, 0x1000, u32::MAX as usize), None);
        assert_eq!(byte_offset(&V3_10, 0x1000, 0), Some(0));
        // 3.11+: a pointer into the bytecode after the code's header.
        let code = 0x7f00_0000_1000;
        assert_eq!(byte_offset(&V3_11, code, code + 184 + 10), Some(10));
        assert_eq!(byte_offset(&V3_12, code, code + 192 + 11), Some(10));
        // Before the bytecode (a frame not yet started) or absurdly far.
        assert_eq!(byte_offset(&V3_12, code, code + 100), None);
        assert_eq!(byte_offset(&V3_12, code, 0), None);
        assert_eq!(byte_offset(&V3_12, code, code + (1 << 40)), None);
    }

    #[test]
    fn a_str_s_form_and_an_entry_frame_by_their_bits() {
        // interned (bits 0-1) and kind (2-4) do not matter.
        assert_eq!(
            str_form(STATE_COMPACT | STATE_ASCII | 0b111),
            StrForm::Ascii
        );
        assert_eq!(str_form(STATE_COMPACT | (2 << 2)), StrForm::Compact);
        assert_eq!(str_form(STATE_ASCII), StrForm::Other);
        assert_eq!(str_form(0), StrForm::Other);
        assert!(is_entry_frame(3));
        assert!(!is_entry_frame(0) && !is_entry_frame(1) && !is_entry_frame(2));
    }

    /// Each table, and 3.13's positions in `_Py_DebugOffsets`, against
    /// `offsetof` in the headers of every pyenv interpreter found
    /// (`~/.pyenv/versions/3.1[0-3].*`), compiled with the system's C
    /// compiler. Under CI at least one must be found.
    #[test]
    #[cfg_attr(miri, ignore = "runs a C compiler")]
    fn layouts_match_each_installed_interpreter_s_headers() {
        let root = std::path::PathBuf::from(std::env::var("HOME").unwrap_or_default())
            .join(".pyenv/versions");
        let mut checked = Vec::new();
        let mut dirs: Vec<_> = std::fs::read_dir(&root)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        dirs.sort();
        for dir in dirs {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            let Some((3, minor, false)) = parse_version(name.as_bytes()) else {
                continue;
            };
            if !(10..=13).contains(&minor) {
                continue;
            }
            let include = dir.join(format!("include/python3.{minor}"));
            if !include.join("Python.h").exists() {
                continue;
            }
            let got = offsets_from_headers(&include, minor);
            let want: Vec<(String, usize)> = if minor == 13 {
                use at313 as A;
                vec![
                    ("dbg.version".into(), A::VERSION),
                    ("dbg.free_threaded".into(), A::FREE_THREADED),
                    ("dbg.thread_state.size".into(), A::TSTATE_SIZE),
                    (
                        "dbg.thread_state.current_frame".into(),
                        A::TSTATE_CURRENT_FRAME,
                    ),
                    ("dbg.interpreter_frame.size".into(), A::FRAME_SIZE),
                    ("dbg.interpreter_frame.previous".into(), A::FRAME_PREVIOUS),
                    (
                        "dbg.interpreter_frame.executable".into(),
                        A::FRAME_EXECUTABLE,
                    ),
                    ("dbg.interpreter_frame.instr_ptr".into(), A::FRAME_INSTR_PTR),
                    ("dbg.interpreter_frame.owner".into(), A::FRAME_OWNER),
                    ("dbg.code_object.size".into(), A::CODE_SIZE),
                    ("dbg.code_object.filename".into(), A::CODE_FILENAME),
                    ("dbg.code_object.qualname".into(), A::CODE_QUALNAME),
                    ("dbg.code_object.firstlineno".into(), A::CODE_FIRSTLINENO),
                    ("dbg.code_object.co_code_adaptive".into(), A::CODE_ADAPTIVE),
                    ("dbg.pyobject.ob_type".into(), A::OBJECT_TYPE),
                    ("dbg.unicode_object.size".into(), A::STR_SIZE),
                    ("dbg.unicode_object.state".into(), A::STR_STATE),
                    ("dbg.unicode_object.length".into(), A::STR_LENGTH),
                    (
                        "dbg.unicode_object.asciiobject_size".into(),
                        A::STR_ASCII_SIZE,
                    ),
                    ("runtime.debug_offsets".into(), 0),
                    ("sizeof.debug_offsets_at_least".into(), DEBUG_OFFSETS_BYTES),
                ]
            } else {
                let l = table(3, minor).unwrap();
                let mut w = vec![
                    ("frame.code".into(), l.frame_code),
                    ("frame.previous".into(), l.frame_previous),
                    ("frame.instr".into(), l.frame_instr),
                    ("code.filename".into(), l.code_filename),
                    ("code.name".into(), l.code_name),
                    ("code.firstlineno".into(), l.code_firstlineno),
                    ("str.length".into(), l.str_length),
                    ("str.state".into(), l.str_state),
                    ("str.ascii_data".into(), l.str_ascii_data),
                    ("str.utf8_length".into(), l.str_utf8_length),
                    ("str.utf8".into(), l.str_utf8),
                    ("obj.type".into(), l.object_type),
                    ("tstate.frame".into(), l.tstate_frame),
                ];
                if let Some(c) = l.cframe_current {
                    w.push(("cframe.current".into(), c));
                    w.push(("code.adaptive".into(), l.code_adaptive));
                }
                if let Some(o) = l.frame_owner {
                    w.push(("frame.owner".into(), o));
                    w.push(("owner.cstack".into(), usize::from(OWNED_BY_CSTACK)));
                }
                w
            };
            let mut want = want;
            want.push(("bit.compact".into(), STATE_COMPACT as usize));
            want.push(("bit.ascii".into(), STATE_ASCII as usize));
            if minor == 13 {
                want.push(("owner.cstack".into(), usize::from(OWNED_BY_CSTACK)));
            }
            for (field, at) in &want {
                let g = got.get(field.as_str()).copied();
                if field.starts_with("sizeof.") {
                    // Fields added at its end in a later release move none.
                    assert!(g >= Some(*at), "3.{minor} ({name}): {field} {g:?}");
                } else {
                    assert_eq!(g, Some(*at), "3.{minor} ({name}): {field}");
                }
            }
            checked.push(name);
        }
        eprintln!("layouts checked against the headers of: {checked:?}");
        if std::env::var("CI").as_deref() == Ok("true") {
            assert!(
                !checked.is_empty(),
                "no pyenv CPython 3.10-3.13 with headers under {}",
                root.display()
            );
        }
    }

    /// `offsetof` of each field the reader uses, from the headers in
    /// `include`, by a C program compiled and run here.
    fn offsets_from_headers(
        include: &std::path::Path,
        minor: u64,
    ) -> std::collections::HashMap<String, usize> {
        let body = match minor {
            10 => {
                "P(\"tstate.frame\", offsetof(PyThreadState, frame));
                 P(\"frame.code\", offsetof(PyFrameObject, f_code));
                 P(\"frame.previous\", offsetof(PyFrameObject, f_back));
                 P(\"frame.instr\", offsetof(PyFrameObject, f_lasti));
                 P(\"code.name\", offsetof(PyCodeObject, co_name));"
            }
            11 | 12 => {
                "P(\"tstate.frame\", offsetof(PyThreadState, cframe));
                 P(\"cframe.current\", offsetof(_PyCFrame, current_frame));
                 P(\"frame.code\", offsetof(_PyInterpreterFrame, f_code));
                 P(\"frame.previous\", offsetof(_PyInterpreterFrame, previous));
                 P(\"frame.instr\", offsetof(_PyInterpreterFrame, prev_instr));
                 P(\"frame.owner\", offsetof(_PyInterpreterFrame, owner));
                 P(\"code.name\", offsetof(PyCodeObject, co_qualname));
                 P(\"code.adaptive\", offsetof(PyCodeObject, co_code_adaptive));"
            }
            _ => {
                "P(\"runtime.debug_offsets\", offsetof(_PyRuntimeState, debug_offsets));
                 P(\"sizeof.debug_offsets_at_least\", sizeof(_Py_DebugOffsets));
                 D(version); D(free_threaded);
                 D(thread_state.size); D(thread_state.current_frame);
                 D(interpreter_frame.size); D(interpreter_frame.previous);
                 D(interpreter_frame.executable); D(interpreter_frame.instr_ptr);
                 D(interpreter_frame.owner);
                 D(code_object.size); D(code_object.filename); D(code_object.qualname);
                 D(code_object.firstlineno); D(code_object.co_code_adaptive);
                 D(pyobject.ob_type);
                 D(unicode_object.size); D(unicode_object.state);
                 D(unicode_object.length); D(unicode_object.asciiobject_size);"
            }
        };
        let src = format!(
            "#define Py_BUILD_CORE 1\n#include <Python.h>\n#include <stddef.h>\n#include <stdint.h>\n\
             #include <stdio.h>\n#include <string.h>\n\
             #if PY_VERSION_HEX < 0x030B0000\n#include <frameobject.h>\n#else\n\
             #include \"internal/pycore_frame.h\"\n#endif\n\
             #if PY_VERSION_HEX >= 0x030D0000\n#include \"internal/pycore_runtime.h\"\n#endif\n\
             #define P(n, e) printf(\"%s %zu\\n\", n, (size_t)(e))\n\
             #define D(f) P(\"dbg.\" #f, offsetof(_Py_DebugOffsets, f))\n\
             int main(void) {{ {body}\n\
             P(\"code.filename\", offsetof(PyCodeObject, co_filename));\n\
             P(\"code.firstlineno\", offsetof(PyCodeObject, co_firstlineno));\n\
             P(\"str.length\", offsetof(PyASCIIObject, length));\n\
             P(\"str.state\", offsetof(PyASCIIObject, state));\n\
             P(\"str.ascii_data\", sizeof(PyASCIIObject));\n\
             P(\"str.utf8_length\", offsetof(PyCompactUnicodeObject, utf8_length));\n\
             P(\"str.utf8\", offsetof(PyCompactUnicodeObject, utf8));\n\
             P(\"obj.type\", offsetof(PyObject, ob_type));\n\
             #if PY_VERSION_HEX >= 0x030C0000\n\
             P(\"owner.cstack\", FRAME_OWNED_BY_CSTACK);\n\
             #endif\n\
             {{ PyASCIIObject o; uint32_t w; memset(&o, 0, sizeof o); o.state.compact = 1;\n\
                memcpy(&w, &o.state, 4); P(\"bit.compact\", w); }}\n\
             {{ PyASCIIObject o; uint32_t w; memset(&o, 0, sizeof o); o.state.ascii = 1;\n\
                memcpy(&w, &o.state, 4); P(\"bit.ascii\", w); }}\n\
             return 0; }}\n"
        );
        let dir =
            std::env::temp_dir().join(format!("flatline-pylayout-{}-3{minor}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let c = dir.join("offsets.c");
        let exe = dir.join("offsets");
        std::fs::write(&c, src).unwrap();
        let cc = std::process::Command::new("cc")
            .arg("-w")
            .arg("-I")
            .arg(include)
            .arg(&c)
            .arg("-o")
            .arg(&exe)
            .output()
            .expect("a C compiler (cc) runs");
        assert!(
            cc.status.success(),
            "offsets for 3.{minor} did not compile: {}",
            String::from_utf8_lossy(&cc.stderr)
        );
        let out = std::process::Command::new(&exe).output().unwrap();
        std::fs::remove_dir_all(&dir).ok();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let (k, v) = l.split_once(' ')?;
                Some((k.to_owned(), v.parse().ok()?))
            })
            .collect()
    }
}
