//! Loading the allocation-site library into a process that is already
//! running (`watch --pid PID --sites`), without a debugger: one of its
//! threads is stopped with ptrace where it waits in a system call, made to
//! call the C library's own `dlopen` on `libflatline_preload.so` and then
//! the library's `flatline_attach`, and let go with its registers as they
//! were. The library then points every loaded object's allocation calls at
//! its sampler (`flatline-preload`'s `hooks::attach`) and stops sampling by
//! itself once the watch has ended (its process gone, or its ring's file).
//!
//! What is checked before the process is touched, each refusal said with
//! what would permit it: the machine (x86-64 Linux), the process running
//! (not a zombie, not stopped, not being traced), ptrace permitted (the
//! same user or CAP_SYS_PTRACE, and Yama's `ptrace_scope`), a dynamically
//! linked glibc program with `dlopen`.
//!
//! A process in a container (another mount namespace) cannot open this
//! process's paths: the library is copied into a folder of its own
//! (`/dev/shm`, `/tmp` or `/var/tmp`, the first that is writable and not
//! mounted noexec, reached through `/proc/PID/root`), and the rings'
//! folder is made there too ([`reachable_folder`]); in another pid
//! namespace the watcher's pid means nothing to it, and the watch's lock
//! file alone tells it that the watch has ended.
//!
//! Only a thread blocked in a system call that no allocator makes while
//! holding its lock (a futex wait, a sleep, a read, a poll…) is used: a
//! thread stopped in the middle of `malloc`, or in the `mmap` it makes for
//! a new heap, could hold the lock the `dlopen` needs. The system call is
//! restarted as the kernel would after a signal. Every `unsafe` block here
//! is a ptrace or wait call on the thread this module has seized.
#![allow(unsafe_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What an attach could not do. `Refused`: nothing was done to the
/// process. `Failed`: it was stopped and let go again, as it was.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Failed(String),
}

/// A finished attach: the thread that made the calls, how long it was
/// stopped, and whether the library was there already (an earlier attach).
#[derive(Debug, Clone)]
pub struct Attached {
    pub tid: u32,
    pub stopped_for: Duration,
    pub loaded_before: bool,
    /// Where the library was copied for a process in a container (this
    /// process's path to it): the watch removes it as it ends (the process
    /// keeps its mapping).
    pub library_copy: Option<PathBuf>,
}

/// Loads `library` into process `pid` and starts its sampling, one sample
/// per `every` bytes, into a ring in `dir`, while this process runs.
/// `dir` is this process's path; for a process in a container it is one
/// under `/proc/PID/root` ([`reachable_folder`]), passed to it as its own.
pub fn attach(pid: u32, library: &Path, dir: &Path, every: u64) -> Result<Attached, AttachError> {
    let theirs = path_in_target(dir);
    // `<dir>/<pid>.<n>.ring` is kept in the ring's header.
    if theirs.as_os_str().len() + 32 > flatline_format::sites::PATH_BYTES {
        return Err(refused(format!(
            "the rings' folder {} is too long a path (over {} bytes): set TMPDIR to a shorter one",
            theirs.display(),
            flatline_format::sites::PATH_BYTES - 32
        )));
    }
    let plan = check(pid, library)?;
    if let Some(to) = &plan.copy_to {
        copy_library(library, to).map_err(|e| {
            refused(format!(
                "process {pid} is in a container; the library could not be copied into it ({}): {e}",
                to.display()
            ))
        })?;
    }
    let mut done = imp::inject(pid, &plan, &theirs, every)?;
    done.library_copy = plan.copy_to;
    Ok(done)
}

/// Where a process in another mount namespace (a container) can reach a
/// file this process writes: the first of its `/dev/shm`, `/tmp` and
/// `/var/tmp` that is a folder, writable and not mounted noexec, as this
/// process's path (`/proc/PID/root/…`). None for a process in this
/// process's mount namespace (its paths are ours), or where none is.
pub fn reachable_folder(pid: u32) -> Option<PathBuf> {
    if same_namespace(pid, "mnt") {
        return None;
    }
    let root = PathBuf::from(format!("/proc/{pid}/root"));
    ["dev/shm", "tmp", "var/tmp"]
        .iter()
        .map(|f| root.join(f))
        .find(|f| f.is_dir() && writable_and_executable(f))
}

/// Whether `pid` is in this process's namespace of kind `kind` ("mnt",
/// "pid"); unreadable counts as the same.
fn same_namespace(pid: u32, kind: &str) -> bool {
    let ours = std::fs::read_link(format!("/proc/self/ns/{kind}")).ok();
    let theirs = std::fs::read_link(format!("/proc/{pid}/ns/{kind}")).ok();
    ours.is_none() || theirs.is_none() || ours == theirs
}

fn writable_and_executable(folder: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(folder.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: all-zero is a valid statvfs record, filled by the call.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a record to fill.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return false;
    }
    st.f_flag & (libc::ST_RDONLY | libc::ST_NOEXEC) == 0
}

/// `dir` as the target sees it: a path under `/proc/N/root` is one in
/// that process's root.
fn path_in_target(dir: &Path) -> PathBuf {
    let mut parts = dir.components();
    let lead: Vec<_> = parts.by_ref().take(4).collect();
    let is_root = lead.len() == 4
        && lead[1].as_os_str() == "proc"
        && lead[2]
            .as_os_str()
            .to_str()
            .is_some_and(|n| n.parse::<u32>().is_ok())
        && lead[3].as_os_str() == "root";
    if is_root {
        Path::new("/").join(parts.as_path())
    } else {
        dir.to_owned()
    }
}

/// Copies the library to `to` (a process in a container), whole or not at
/// all: written beside it and renamed. One already there of the same
/// length is kept (its name holds the library's length and time).
fn copy_library(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let len = std::fs::metadata(from)?.len();
    if std::fs::metadata(to).is_ok_and(|m| m.len() == len) {
        return Ok(());
    }
    let part = to.with_extension(format!("part{}", std::process::id()));
    std::fs::copy(from, &part)?;
    std::fs::set_permissions(&part, std::fs::Permissions::from_mode(0o755))?;
    std::fs::rename(&part, to).inspect_err(|_| {
        let _ = std::fs::remove_file(&part);
    })
}

/// What the checks found: where `dlopen` is in the process, the library's
/// path as the process sees it, and whether it is mapped already.
#[derive(Debug)]
struct Plan {
    dlopen: u64,
    library: PathBuf,
    /// Where the library is copied first (a process in a container).
    copy_to: Option<PathBuf>,
    attach_offset: u64,
    loaded_before: bool,
    /// The pid the library looks for to know the watch runs: this
    /// process's, or 0 from another pid namespace.
    watcher: u32,
}

fn refused(s: impl Into<String>) -> AttachError {
    AttachError::Refused(s.into())
}

fn check(pid: u32, library: &Path) -> Result<Plan, AttachError> {
    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        return Err(refused(
            "attaching to a running process is built for x86-64 Linux only",
        ));
    }
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let stat = std::fs::read_to_string(proc.join("stat"))
        .map_err(|_| refused(format!("process {pid} does not exist")))?;
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, r)| r.split_whitespace().next())
        .unwrap_or("?");
    match state {
        "Z" | "X" => return Err(refused(format!("process {pid} has exited"))),
        "T" | "t" => {
            return Err(refused(format!(
                "process {pid} is stopped (by a signal or a debugger): it cannot run the library's loading"
            )));
        }
        _ => {}
    }
    let status = std::fs::read_to_string(proc.join("status")).unwrap_or_default();
    let field = |k: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .map(|v| v.trim().to_owned())
    };
    if let Some(t) = field("TracerPid:").filter(|t| t != "0") {
        return Err(refused(format!(
            "process {pid} is already traced by process {t} (a debugger or another tool): detach it first"
        )));
    }
    permitted(pid, &field("Uid:").unwrap_or_default())?;
    let in_container = !same_namespace(pid, "mnt");
    if let Ok(exe) = std::fs::read(proc.join("exe")).map(|b| b.get(..20).map(<[u8]>::to_vec)) {
        // e_machine, at byte 18 of the ELF header: 62 is x86-64.
        if let Some(h) = exe
            && h.starts_with(b"\x7fELF")
            && u16::from_le_bytes([h[18], h[19]]) != 62
        {
            return Err(refused(format!(
                "process {pid} runs another architecture's code"
            )));
        }
    }
    let maps = std::fs::read_to_string(proc.join("maps"))
        .map_err(|e| refused(format!("cannot read process {pid}'s mappings: {e}")))?;
    let mapped = |file: &dyn Fn(&str) -> bool| {
        maps.lines().find_map(|l| {
            let mut f = l.split_whitespace();
            let range = f.next()?;
            let offset = f.nth(1)?;
            let path = f.nth(2)?;
            let name = path.rsplit('/').next()?;
            (file(name) && offset == "00000000").then(|| {
                let start = u64::from_str_radix(range.split('-').next()?, 16).ok()?;
                Some((start, path.to_owned()))
            })?
        })
    };
    let libc = mapped(&|n| n == "libc.so.6" || (n.starts_with("libc-2.") && n.ends_with(".so")));
    let Some((libc_base, libc_path)) = libc else {
        let musl = mapped(&|n| n.starts_with("ld-musl") || n.starts_with("libc.musl"));
        return Err(refused(if musl.is_some() {
            format!("process {pid} runs on musl, not glibc: attaching is built for glibc")
        } else {
            format!(
                "process {pid} is linked statically (no C library is mapped): nothing can be loaded into it"
            )
        }));
    };
    let dlopen = [
        (libc_base, libc_path.clone(), "dlopen"),
        (libc_base, libc_path.clone(), "__libc_dlopen_mode"),
    ]
    .into_iter()
    .chain(mapped(&|n| n == "libdl.so.2").map(|(b, p)| (b, p, "dlopen")))
    .find_map(|(base, path, name)| {
        let root = Path::new(&format!("/proc/{pid}/root")).join(path.trim_start_matches('/'));
        let file = if root.exists() {
            root
        } else {
            PathBuf::from(&path)
        };
        dynamic_symbol(&file, name).map(|v| base + v)
    })
    .ok_or_else(|| refused(format!("process {pid}'s C library has no dlopen")))?;
    let library = library
        .canonicalize()
        .map_err(|e| refused(format!("the library {}: {e}", library.display())))?;
    let attach_offset = dynamic_symbol(&library, "flatline_attach").ok_or_else(|| {
        refused(format!(
            "{} has no flatline_attach: a library from an older flatline?",
            library.display()
        ))
    })?;
    let (theirs, copy_to) = if in_container {
        let folder = reachable_folder(pid).ok_or_else(|| {
            refused(format!(
                "process {pid} is in a container (another mount namespace), and none of its \
                 /dev/shm, /tmp and /var/tmp can take the library (missing, read-only or mounted \
                 noexec)"
            ))
        })?;
        let meta = std::fs::metadata(&library)
            .map_err(|e| refused(format!("the library {}: {e}", library.display())))?;
        let stamp = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs());
        let name = format!("libflatline_preload-{}-{stamp}.so", meta.len());
        let copy = folder.join(&name);
        (path_in_target(&copy), Some(copy))
    } else {
        (library.clone(), None)
    };
    let lib_name = theirs.to_string_lossy().into_owned();
    let loaded_before = maps
        .lines()
        .any(|l| l.ends_with(&lib_name) || l.ends_with(&format!("{lib_name} (deleted)")));
    Ok(Plan {
        dlopen,
        library: theirs,
        copy_to,
        attach_offset,
        loaded_before,
        watcher: if same_namespace(pid, "pid") {
            std::process::id()
        } else {
            0
        },
    })
}

fn ptrace_scope() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(0)
}

/// What a ptrace refused under Yama's scope 1 means.
fn yama_refusal(pid: u32) -> String {
    format!(
        "kernel.yama.ptrace_scope is 1: only a process's ancestors (or one it allows with \
         prctl(PR_SET_PTRACER)) may attach to it, and {pid} is not flatline's child; run flatline \
         as root or with CAP_SYS_PTRACE (setcap cap_sys_ptrace+ep), or set the sysctl to 0"
    )
}

/// Whether ptrace may attach to `pid` (whose `Uid:` line is `uids`), said
/// with what would permit it.
fn permitted(pid: u32, uids: &str) -> Result<(), AttachError> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    // CAP_SYS_PTRACE is capability 19.
    let cap = cap_eff & (1 << 19) != 0;
    let our_uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().nth(1).map(str::to_owned))
        .unwrap_or_default();
    let their = uids.split_whitespace().collect::<Vec<_>>();
    let same_user = !their.is_empty() && their.iter().all(|u| *u == our_uid);
    if !same_user && !cap {
        return Err(refused(format!(
            "process {pid} belongs to another user (uid {}): attaching needs the same user, or \
             flatline run as root or with CAP_SYS_PTRACE",
            their.first().unwrap_or(&"?")
        )));
    }
    let scope = ptrace_scope();
    match scope {
        0 => Ok(()),
        3 => Err(refused(
            "kernel.yama.ptrace_scope is 3: this kernel lets no process attach to another until it \
             restarts",
        )),
        1 | 2 if cap => Ok(()),
        // Its ancestors may; so may a process it named with
        // PR_SET_PTRACER (a notebook's kernel names its watcher): ptrace
        // says, and a refusal is worded then (`yama_refusal`).
        1 => Ok(()),
        _ => Err(refused(format!(
            "kernel.yama.ptrace_scope is {scope}: attaching needs CAP_SYS_PTRACE (run flatline as root)"
        ))),
    }
}

/// The value (its address in the file's terms) of dynamic symbol `name` in
/// the 64-bit little-endian ELF file at `path`.
fn dynamic_symbol(path: &Path, name: &str) -> Option<u64> {
    let data = std::fs::read(path).ok()?;
    let u16_at = |at: usize| Some(u16::from_le_bytes(data.get(at..at + 2)?.try_into().ok()?));
    let u32_at = |at: usize| Some(u32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?));
    let u64_at = |at: usize| Some(u64::from_le_bytes(data.get(at..at + 8)?.try_into().ok()?));
    if data.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let shoff = u64_at(0x28)? as usize;
    let shentsize = usize::from(u16_at(0x3a)?);
    let shnum = usize::from(u16_at(0x3c)?);
    let section = |i: usize| shoff + i * shentsize;
    // SHT_DYNSYM (11): its string table is the section its sh_link names.
    let dynsym = (0..shnum).find(|&i| u32_at(section(i) + 4) == Some(11))?;
    let (sym_off, sym_size) = (
        u64_at(section(dynsym) + 0x18)? as usize,
        u64_at(section(dynsym) + 0x20)? as usize,
    );
    let strtab = u32_at(section(dynsym) + 0x28)? as usize;
    let str_off = u64_at(section(strtab) + 0x18)? as usize;
    for i in 0..sym_size / 24 {
        let at = sym_off + i * 24;
        let st_name = u32_at(at)? as usize;
        let start = str_off + st_name;
        let end = start + data.get(start..)?.iter().position(|&c| c == 0)?;
        let value = u64_at(at + 8)?;
        // A definition (a section index other than 0, undefined).
        if &data[start..end] == name.as_bytes() && u16_at(at + 6)? != 0 && value != 0 {
            return Some(value);
        }
    }
    None
}

/// System calls no allocator makes while it holds a lock (x86-64
/// numbers): a thread blocked in one of them can run `dlopen`.
const SAFE_SYSCALLS: [i64; 24] = [
    0,   // read
    1,   // write
    7,   // poll
    23,  // select
    34,  // pause
    35,  // nanosleep
    43,  // accept
    45,  // recvfrom
    47,  // recvmsg
    61,  // wait4
    128, // rt_sigtimedwait
    130, // rt_sigsuspend
    202, // futex
    230, // clock_nanosleep
    232, // epoll_wait
    247, // waitid
    270, // pselect6
    271, // ppoll
    281, // epoll_pwait
    288, // accept4
    299, // recvmmsg
    441, // epoll_pwait2
    17,  // pread64
    19,  // readv
];

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod imp {
    use super::*;

    const EVENT_STOP: i32 = 128;

    fn failed(s: impl Into<String>) -> AttachError {
        AttachError::Failed(s.into())
    }

    fn errno() -> std::io::Error {
        std::io::Error::last_os_error()
    }

    /// A seized thread: let go (registers restored where they were
    /// changed, a signal that arrived meanwhile handed back) when dropped.
    struct Seized {
        tid: libc::pid_t,
        saved: Option<libc::user_regs_struct>,
        pending: i32,
    }

    impl Drop for Seized {
        fn drop(&mut self) {
            if let Some(regs) = self.saved.take() {
                // SAFETY: the thread is seized and in a ptrace stop; its own
                // registers go back.
                unsafe { libc::ptrace(libc::PTRACE_SETREGS, self.tid, 0, &regs as *const _) };
            }
            // SAFETY: detaching a thread this process seized.
            unsafe {
                libc::ptrace(
                    libc::PTRACE_DETACH,
                    self.tid,
                    0,
                    self.pending as libc::c_long,
                )
            };
        }
    }

    /// Waits for `tid`'s next stop (up to `limit`); its raw status.
    fn wait_stop(tid: libc::pid_t, limit: Duration) -> Result<i32, AttachError> {
        let until = Instant::now() + limit;
        loop {
            let mut status = 0;
            // SAFETY: waiting for a thread this process traces.
            let r = unsafe { libc::waitpid(tid, &mut status, libc::__WALL | libc::WNOHANG) };
            if r == tid {
                if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
                    return Err(failed(format!(
                        "thread {tid} ended while flatline attached"
                    )));
                }
                return Ok(status);
            }
            if r < 0 {
                return Err(failed(format!("waiting for thread {tid}: {}", errno())));
            }
            if Instant::now() > until {
                return Err(failed(format!(
                    "thread {tid} did not stop within {} s",
                    limit.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    fn get_regs(tid: libc::pid_t) -> Result<libc::user_regs_struct, AttachError> {
        // SAFETY: all-zero is a valid user_regs_struct (plain integers).
        let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        // SAFETY: the thread is in a ptrace stop; `regs` is filled.
        if unsafe { libc::ptrace(libc::PTRACE_GETREGS, tid, 0, &mut regs as *mut _) } < 0 {
            return Err(failed(format!(
                "reading thread {tid}'s registers: {}",
                errno()
            )));
        }
        Ok(regs)
    }

    /// Seizes and stops `tid`; None if it is not blocked in a safe system
    /// call (it is let go again at once).
    fn stop_safely(pid: u32, tid: libc::pid_t) -> Result<Option<Seized>, AttachError> {
        // Under Yama's scope 1 a process may name its tracer just after
        // starting it (a notebook's kernel): a refusal is tried again for
        // a second.
        let yama = ptrace_scope() == 1;
        let mut tries = if yama { 20 } else { 1 };
        // SAFETY: PTRACE_SEIZE attaches without stopping or signalling.
        while unsafe { libc::ptrace(libc::PTRACE_SEIZE, tid, 0, 0) } < 0 {
            let e = errno();
            tries -= 1;
            if e.raw_os_error() == Some(libc::EPERM) && tries > 0 {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            return Err(match e.raw_os_error() {
                Some(libc::EPERM) if yama => refused(yama_refusal(pid)),
                Some(libc::EPERM) => refused(format!(
                    "ptrace was refused for thread {tid} ({e}): the process may be non-dumpable \
                     (set-user-ID, or PR_SET_DUMPABLE 0), or a security module forbids it"
                )),
                Some(libc::ESRCH) => refused(format!("thread {tid} is gone")),
                _ => refused(format!("ptrace could not attach to thread {tid}: {e}")),
            });
        }
        let mut seized = Seized {
            tid,
            saved: None,
            pending: 0,
        };
        // SAFETY: stops the seized thread.
        if unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0) } < 0 {
            return Err(failed(format!("stopping thread {tid}: {}", errno())));
        }
        let status = wait_stop(tid, Duration::from_secs(5))?;
        if status >> 16 != EVENT_STOP {
            // A signal arriving for the thread stopped it first: kept for
            // its detach, and this stop serves as well.
            seized.pending = libc::WSTOPSIG(status);
        }
        let regs = get_regs(tid)?;
        let nr = regs.orig_rax as i64;
        if nr < 0 || !SAFE_SYSCALLS.contains(&nr) {
            return Ok(None);
        }
        // A read or write of a regular file is not a wait: it is the
        // dynamic loader reading a library (holding its lock, which the
        // `dlopen` would take again on the same thread, mid-load), or the
        // library reading /proc/self/maps while the loader's list is held.
        if [0, 1, 17, 19].contains(&nr)
            && std::fs::metadata(format!("/proc/{pid}/fd/{}", regs.rdi as i32))
                .is_ok_and(|m| m.is_file())
        {
            return Ok(None);
        }
        Ok(Some(seized))
    }

    fn poke(tid: libc::pid_t, at: u64, bytes: &[u8]) -> Result<(), AttachError> {
        for (i, chunk) in bytes.chunks(8).enumerate() {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            let word = u64::from_le_bytes(w);
            let addr = at + 8 * i as u64;
            // SAFETY: writes one word of the seized thread's own stack,
            // below its stack pointer and red zone.
            if unsafe { libc::ptrace(libc::PTRACE_POKEDATA, tid, addr, word) } < 0 {
                return Err(failed(format!("writing thread {tid}'s stack: {}", errno())));
            }
        }
        Ok(())
    }

    /// Calls `func(args…)` on the stopped thread, `data` copied below its
    /// stack first (its address is `args`' `DATA` placeholder); the value
    /// it returns. The thread's registers are restored by the caller.
    fn call(
        s: &mut Seized,
        regs: &libc::user_regs_struct,
        func: u64,
        args: [u64; 3],
        data: &[u8],
    ) -> Result<u64, AttachError> {
        let tid = s.tid;
        // Below the red zone (128 bytes) and then some; 16-aligned.
        let data_at = (regs.rsp - 1024 - data.len() as u64) & !15;
        poke(tid, data_at, data)?;
        // The return address, 0: the call's end is a fault at 0, which is
        // seen here and never delivered.
        let ret_at = data_at - 8;
        poke(tid, ret_at, &0u64.to_le_bytes())?;
        let mut r = *regs;
        let fill = |a: u64| if a == DATA { data_at } else { a };
        r.rip = func;
        r.rdi = fill(args[0]);
        r.rsi = fill(args[1]);
        r.rdx = fill(args[2]);
        r.rax = 0;
        r.rsp = ret_at;
        // Not in a system call: the kernel must not restart one on the way
        // out (it does, with the saved registers, at the detach).
        r.orig_rax = u64::MAX;
        // SAFETY: the thread is stopped; these are its registers, changed.
        if unsafe { libc::ptrace(libc::PTRACE_SETREGS, tid, 0, &r as *const _) } < 0 {
            return Err(failed(format!(
                "setting thread {tid}'s registers: {}",
                errno()
            )));
        }
        let mut give = 0;
        loop {
            // SAFETY: resumes the seized thread (with a signal it got
            // meanwhile, which it would have had).
            if unsafe { libc::ptrace(libc::PTRACE_CONT, tid, 0, give as libc::c_long) } < 0 {
                return Err(failed(format!("resuming thread {tid}: {}", errno())));
            }
            give = 0;
            let status = wait_stop(tid, Duration::from_secs(20))?;
            let sig = libc::WSTOPSIG(status);
            if status >> 16 != 0 {
                continue;
            }
            if sig == libc::SIGSEGV {
                let now = get_regs(tid)?;
                if now.rip == 0 {
                    return Ok(now.rax);
                }
                return Err(failed(format!(
                    "the call crashed in thread {tid} at {:#x}; its registers were restored",
                    now.rip
                )));
            }
            // Another signal while it ran: delivered now, as it would have
            // been (a handler runs on this stack, below our frame).
            give = sig;
        }
    }

    /// Signals that would end flatline, held back while a thread of the
    /// target runs flatline's calls: were flatline to die then, the thread
    /// would return to address 0 untraced, and the process would crash.
    /// (SIGKILL cannot be held back: that window, a few milliseconds, is
    /// said in docs/watching.md.) Restored, and any held signal delivered,
    /// when dropped, after the thread was let go.
    struct HeldSignals(libc::sigset_t);

    impl HeldSignals {
        fn hold() -> Self {
            // SAFETY: sigset_t is plain data, filled by sigemptyset.
            let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
            // SAFETY: `set` is a valid sigset to clear.
            unsafe { libc::sigemptyset(&mut set) };
            for sig in [
                libc::SIGINT,
                libc::SIGTERM,
                libc::SIGHUP,
                libc::SIGQUIT,
                libc::SIGPIPE,
            ] {
                // SAFETY: as above; a valid signal number.
                unsafe { libc::sigaddset(&mut set, sig) };
            }
            // SAFETY: `set` and `old` are valid sigsets; this thread's mask.
            unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old) };
            HeldSignals(old)
        }
    }

    impl Drop for HeldSignals {
        fn drop(&mut self) {
            // SAFETY: restores the mask `hold` saved.
            unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
        }
    }

    /// Stands for the address of the call's data among its arguments.
    const DATA: u64 = u64::MAX - 1;

    pub(super) fn inject(
        pid: u32,
        plan: &Plan,
        dir: &Path,
        every: u64,
    ) -> Result<Attached, AttachError> {
        let started = Instant::now();
        let until = started + Duration::from_secs(3);
        // Declared first, dropped last: after every seized thread is let go.
        let _held = HeldSignals::hold();
        let (mut seized, regs) = loop {
            let mut tids: Vec<libc::pid_t> = std::fs::read_dir(format!("/proc/{pid}/task"))
                .map_err(|_| refused(format!("process {pid} is gone")))?
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect();
            // The main thread first: it is the one people expect.
            tids.sort_by_key(|&t| (t != pid as libc::pid_t, t));
            let mut found = None;
            for tid in tids {
                match stop_safely(pid, tid) {
                    Ok(Some(s)) => {
                        found = Some(s);
                        break;
                    }
                    Ok(None) => {}
                    Err(AttachError::Refused(e)) if tid == pid as libc::pid_t => {
                        return Err(AttachError::Refused(e));
                    }
                    Err(_) => {}
                }
            }
            if let Some(mut s) = found {
                let regs = get_regs(s.tid)?;
                s.saved = Some(regs);
                break (s, regs);
            }
            if Instant::now() > until {
                return Err(refused(format!(
                    "no thread of process {pid} waited in a system call within 3 s (each was \
                     running, or inside the allocator): it was left as it was; try again"
                )));
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let path = plan.library.to_string_lossy().into_owned() + "\0";
        // RTLD_NOW (2), local: the library is found by its handle only.
        let handle = call(
            &mut seized,
            &regs,
            plan.dlopen,
            [DATA, 2, 0],
            path.as_bytes(),
        )?;
        if handle == 0 {
            return Err(failed(format!(
                "process {pid} could not load {} (can its user read the file? is its folder \
                 mounted noexec?)",
                plan.library.display()
            )));
        }
        let base = library_base(pid, &plan.library).ok_or_else(|| {
            failed("the library was loaded but is not among the process's mappings")
        })?;
        let dir_arg = dir.to_string_lossy().into_owned() + "\0";
        let rc = call(
            &mut seized,
            &regs,
            base + plan.attach_offset,
            [DATA, every, u64::from(plan.watcher)],
            dir_arg.as_bytes(),
        )? as i32;
        let tid = seized.tid as u32;
        drop(seized);
        match rc {
            0 => Ok(Attached {
                tid,
                stopped_for: started.elapsed(),
                loaded_before: plan.loaded_before,
                library_copy: None,
            }),
            1 => Err(failed(format!(
                "process {pid} is already sampled (started under `watch --sites`, or attached by \
                 another watch)"
            ))),
            2 => Err(failed(format!(
                "process {pid} could not make its ring in {}",
                dir.display()
            ))),
            n => Err(failed(format!(
                "the library's attach in process {pid} returned {n}"
            ))),
        }
    }

    /// Where `library` starts in `pid`'s mappings (its first, offset 0).
    fn library_base(pid: u32, library: &Path) -> Option<u64> {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
        let lib = library.to_string_lossy();
        maps.lines().find_map(|l| {
            let mut f = l.split_whitespace();
            let range = f.next()?;
            let offset = f.nth(1)?;
            let path = f.nth(2)?;
            (path == lib && offset == "00000000")
                .then(|| u64::from_str_radix(range.split('-').next()?, 16).ok())?
        })
    }
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
mod imp {
    use super::*;

    pub(super) fn inject(_: u32, _: &Plan, _: &Path, _: u64) -> Result<Attached, AttachError> {
        Err(refused(
            "attaching to a running process is built for x86-64 Linux only",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dlopen_is_found_in_this_process_s_c_library() {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let libc = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.ends_with("/libc.so.6"))
            .expect("a dynamically linked test binary maps libc.so.6");
        let v = dynamic_symbol(Path::new(libc), "dlopen").expect("glibc 2.34+ has dlopen");
        assert!(v > 0);
        assert_eq!(
            dynamic_symbol(Path::new(libc), "no_such_function_here"),
            None
        );
        assert_eq!(
            dynamic_symbol(Path::new("/proc/self/status"), "dlopen"),
            None
        );
    }

    #[test]
    fn a_path_under_a_process_s_root_is_given_to_it_as_its_own() {
        assert_eq!(
            path_in_target(Path::new("/proc/4242/root/dev/shm/flatline-sites-x")),
            Path::new("/dev/shm/flatline-sites-x")
        );
        for ours in [
            "/dev/shm/flatline-sites-x",
            "/proc/self/root/tmp",
            "/proc/4242/cwd/x",
        ] {
            assert_eq!(path_in_target(Path::new(ours)), Path::new(ours));
        }
        // This process is in its own mount namespace: nothing to reach.
        assert_eq!(reachable_folder(std::process::id()), None);
    }

    #[test]
    fn a_process_that_does_not_exist_or_has_exited_is_refused() {
        let e = check(u32::MAX - 7, Path::new("/nonexistent")).unwrap_err();
        assert!(matches!(e, AttachError::Refused(_)), "{e}");
        assert!(e.to_string().contains("does not exist"), "{e}");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let stat = format!("/proc/{pid}/stat");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::read_to_string(&stat).is_ok_and(|s| !s.contains(") Z ")) {
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(5));
        }
        let e = check(pid, Path::new("/nonexistent")).unwrap_err();
        assert!(e.to_string().contains("has exited"), "{e}");
        child.wait().unwrap();
    }
}
