//! The few C library calls flatline makes, each wrapped safely.

/// glibc's malloc statistics (`mallinfo2`), in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MallocInfo {
    /// Non-mmapped space obtained from the system by all arenas (`arena`).
    pub arena: u64,
    /// Space in blocks served by mmap (`hblkhd`).
    pub mmap: u64,
    /// Space in use by the application (`uordblks`).
    pub in_use: u64,
    /// Free space held in the arenas (`fordblks`).
    pub free: u64,
}

/// Reads glibc's malloc statistics for this process (all arenas). Takes each
/// arena's lock briefly; allocates nothing.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn malloc_info() -> Option<MallocInfo> {
    // SAFETY: `mallinfo2` takes no arguments, has no preconditions and returns a
    // plain struct by value (glibc 2.33 or newer, which the build links against).
    let m = unsafe { libc::mallinfo2() };
    Some(MallocInfo {
        arena: m.arena as u64,
        mmap: m.hblkhd as u64,
        in_use: m.uordblks as u64,
        free: m.fordblks as u64,
    })
}

/// glibc's malloc statistics are not available off glibc.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn malloc_info() -> Option<MallocInfo> {
    None
}

/// Clock ticks per second of the times in `/proc/<pid>/stat` (`USER_HZ`).
#[cfg(target_os = "linux")]
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: `sysconf` with a valid name constant has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as u64 } else { 100 }
}

/// The size of a memory page, in bytes (the unit of `/proc` fault counts).
#[cfg(target_os = "linux")]
pub fn page_size() -> u64 {
    // SAFETY: `sysconf` with a valid name constant has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if page > 0 { page as u64 } else { 4096 }
}

/// The size of a memory page, in bytes.
#[cfg(not(target_os = "linux"))]
pub fn page_size() -> u64 {
    4096
}

/// CPU time the calling thread has used, in nanoseconds.
#[cfg(target_os = "linux")]
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec that outlives the call, and
    // CLOCK_THREAD_CPUTIME_ID is a clock every Linux kernel since 2.6.12 provides.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Thread CPU time is not read off Linux.
#[cfg(not(target_os = "linux"))]
pub fn thread_cpu_ns() -> u64 {
    0
}

/// Asks process `pid` to end (`SIGTERM`), as `kill PID` does: a training
/// script can catch it and save its state, unlike the `SIGKILL` of
/// [`std::process::Child::kill`].
#[cfg(target_os = "linux")]
pub fn terminate(pid: u32) -> std::io::Result<()> {
    let pid = libc::pid_t::try_from(pid)
        .ok()
        .filter(|&p| p > 0)
        .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: `kill` takes plain integers and touches no memory of ours; a positive
    // pid names exactly one process (never a group), and SIGTERM is a valid signal.
    if unsafe { libc::kill(pid, libc::SIGTERM) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Off Linux there is no gentle stop here; callers fall back to `Child::kill`.
#[cfg(not(target_os = "linux"))]
pub fn terminate(_pid: u32) -> std::io::Result<()> {
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}

/// Ties a command about to be spawned to this process: when the thread that
/// spawns it ends (so also when the process exits, is killed or crashes),
/// the command gets SIGTERM from the kernel (`PR_SET_PDEATHSIG`). Spawn from
/// a thread that lives as long as the command should, such as `main`.
#[cfg(target_os = "linux")]
pub fn end_with_this_process(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let parent = libc::pid_t::try_from(std::process::id()).unwrap_or(0);
    let tie = move || {
        // SAFETY: `prctl(PR_SET_PDEATHSIG, sig)` takes plain integers and touches no
        // memory of ours.
        if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // The parent may have died before the tie was made: then nobody would send
        // the signal, so refuse to start.
        // SAFETY: `getppid` has no arguments and cannot fail.
        if unsafe { libc::getppid() } != parent {
            return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
        }
        Ok(())
    };
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe work is allowed: it makes two system calls (prctl and
    // getppid, both async-signal-safe), allocates nothing (`last_os_error` and
    // `from_raw_os_error` build an error from an integer) and takes no locks.
    unsafe {
        cmd.pre_exec(tie);
    }
}

/// Off Linux a started command is not tied to this process.
#[cfg(not(target_os = "linux"))]
pub fn end_with_this_process(_cmd: &mut std::process::Command) {}

/// This process's real user id.
#[cfg(unix)]
pub fn uid() -> u32 {
    // SAFETY: `getuid` has no arguments, touches no memory of ours and cannot fail.
    unsafe { libc::getuid() }
}

/// The user id of the process at the other end of a connected Unix socket,
/// as the kernel recorded it when the connection was made (`SO_PEERCRED`):
/// what a socket server checks before it believes a message.
#[cfg(target_os = "linux")]
pub fn peer_uid(stream: &std::os::unix::net::UnixStream) -> std::io::Result<u32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: the descriptor is the stream's own, open for the whole call; `cred`
    // is a live, writable `ucred` and `len` holds its exact size, which is what
    // SO_PEERCRED writes (the kernel writes at most `len` bytes and updates it).
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast::<libc::c_void>(),
            &raw mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if len as usize != std::mem::size_of::<libc::ucred>() {
        return Err(std::io::Error::other("SO_PEERCRED returned a short answer"));
    }
    Ok(cred.uid)
}

/// Waits for `child` to exit and returns its status with its peak resident
/// memory in bytes (`ru_maxrss` of `wait4`): the high-water mark of the
/// whole run, whatever it did last. Consumes the child: it is reaped here.
#[cfg(target_os = "linux")]
pub fn wait_peak_rss(
    child: std::process::Child,
) -> std::io::Result<(std::process::ExitStatus, u64)> {
    use std::os::unix::process::ExitStatusExt;
    let pid = libc::pid_t::try_from(child.id()).map_err(std::io::Error::other)?;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero `rusage` is a valid value of that plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = loop {
        // SAFETY: `status` and `usage` are live, writable values of the types
        // wait4 writes, for the whole call. The pid is our own unreaped child
        // (the `Child` is consumed, so std never waits for it again).
        let rc = unsafe { libc::wait4(pid, &raw mut status, 0, &raw mut usage) };
        if rc >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break rc;
        }
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let peak = u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024;
    Ok((std::process::ExitStatus::from_raw(status), peak))
}

/// The local time zone at `unix_s` (seconds since 1970) as the C library
/// reads it from `TZ` or `/etc/localtime`: its offset east of UTC in seconds
/// and its abbreviation ("CET", "UTC"). `None` if the time is out of range.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn local_zone(unix_s: i64) -> Option<(i64, String)> {
    let t = libc::time_t::try_from(unix_s).ok()?;
    // SAFETY: an all-zero `tm` is a valid value of that plain C struct (a null
    // `tm_zone` included).
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: `t` and `tm` are live locals of the types `localtime_r` reads and
    // writes, for the whole call; it writes nothing else of ours.
    if unsafe { libc::localtime_r(&raw const t, &raw mut tm) }.is_null() {
        return None;
    }
    let zone = if tm.tm_zone.is_null() {
        String::new()
    } else {
        // SAFETY: glibc points `tm_zone` at a NUL-terminated name it keeps for
        // the life of the process (its time-zone tables are never freed).
        unsafe { std::ffi::CStr::from_ptr(tm.tm_zone) }
            .to_string_lossy()
            .into_owned()
    };
    #[allow(
        clippy::useless_conversion,
        reason = "c_long is i64 here but i32 on 32-bit targets"
    )]
    let offset = i64::from(tm.tm_gmtoff);
    Some((offset, zone))
}

/// Off glibc the local zone is not read; callers keep UTC.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn local_zone(_unix_s: i64) -> Option<(i64, String)> {
    None
}

/// The consumer's side of an allocation-site ring
/// ([`flatline_format::sites`]): the file a preloaded job's process writes,
/// mapped shared. Its producers are other processes, so every word both
/// sides touch is read and written as an atomic.
#[derive(Debug)]
pub struct SiteRing {
    map: memmap2::MmapMut,
}

impl SiteRing {
    /// Maps the ring at `path`; an error if it is not one (too short, or
    /// its magic not yet written).
    pub fn open(path: &std::path::Path) -> std::io::Result<Self> {
        use flatline_format::sites as L;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)?;
        if file.metadata()?.len() < L::RING_BYTES as u64 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not a whole allocation-site ring",
            ));
        }
        // SAFETY: the file is a ring of RING_BYTES that its writer never
        // shrinks; every access below goes through atomics, or copies out
        // of a slot its producer has published and that no producer
        // touches until this side hands it back.
        let map = unsafe {
            memmap2::MmapOptions::new()
                .len(L::RING_BYTES)
                .map_mut(&file)?
        };
        let ring = Self { map };
        if ring.u64_at(L::H_MAGIC) != L::MAGIC {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not an allocation-site ring (or not ready)",
            ));
        }
        Ok(ring)
    }

    fn atomic_u64(&self, at: usize) -> &std::sync::atomic::AtomicU64 {
        assert!(at.is_multiple_of(8) && at + 8 <= self.map.len());
        let word = self.map[at..]
            .as_ptr()
            .cast::<std::sync::atomic::AtomicU64>();
        // SAFETY: in bounds and 8-aligned (the mapping is page-aligned);
        // the word is only ever accessed atomically, by both sides.
        unsafe { &*word }
    }

    /// A header word (`H_*`), as written by the producers.
    pub fn u64_at(&self, at: usize) -> u64 {
        self.atomic_u64(at)
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// A 32-bit header field (`H_PID`, `H_PYTHON`, `H_PY_VERSION`).
    pub fn u32_at(&self, at: usize) -> u32 {
        let word = self.u64_at(at & !7);
        (word >> ((at & 7) * 8)) as u32
    }

    /// Whether the record at `pos` is published (and not yet taken).
    pub fn ready(&self, pos: u64) -> bool {
        use flatline_format::sites as L;
        let at = L::slot_offset(pos);
        let word = self
            .atomic_u64(at + L::S_SEQ)
            .load(std::sync::atomic::Ordering::Acquire);
        L::sequence(word, pos) == pos + 1
    }

    /// The record at position `pos`, copied out, its slot handed back to
    /// the producers; None while it is not published yet.
    pub fn take(&mut self, pos: u64) -> Option<[u8; flatline_format::sites::SLOT_BYTES]> {
        use flatline_format::sites as L;
        use std::sync::atomic::Ordering;
        let at = L::slot_offset(pos);
        let word = self.atomic_u64(at + L::S_SEQ).load(Ordering::Acquire);
        if L::sequence(word, pos) != pos + 1 {
            return None;
        }
        let mut out = [0u8; L::SLOT_BYTES];
        out.copy_from_slice(&self.map[at..at + L::SLOT_BYTES]);
        self.atomic_u64(at + L::S_SEQ)
            .store(L::stored(pos + L::SLOTS as u64, pos), Ordering::Release);
        self.atomic_u64(L::H_HEAD).store(pos + 1, Ordering::Relaxed);
        Some(out)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// A ring written as the preloaded library writes one (all zeros, its
    /// magic, a published record): the record is taken once, its slot
    /// handed back for the producers' next lap, and a file that is not a
    /// ring (too short, no magic) is refused.
    #[test]
    fn a_site_ring_s_records_are_taken_once_and_their_slots_handed_back() {
        use flatline_format::sites as L;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("7.0.ring");
        let mut bytes = vec![0u8; L::RING_BYTES];
        std::fs::write(&path, &bytes).unwrap();
        let e = SiteRing::open(&path).unwrap_err();
        assert!(e.to_string().contains("not an allocation-site ring"), "{e}");
        std::fs::write(dir.path().join("short.ring"), [0u8; 64]).unwrap();
        assert!(SiteRing::open(&dir.path().join("short.ring")).is_err());
        // Position 5 published (sequence 6), its kind and address set.
        bytes[L::H_MAGIC..L::H_MAGIC + 8].copy_from_slice(&L::MAGIC.to_le_bytes());
        let at = L::slot_offset(5);
        bytes[at..at + 8].copy_from_slice(&L::stored(6, 5).to_le_bytes());
        bytes[at + L::S_KIND..at + L::S_KIND + 4].copy_from_slice(&L::ALLOC.to_le_bytes());
        bytes[at + L::S_ADDR..at + L::S_ADDR + 8].copy_from_slice(&0xdead_beefu64.to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let mut ring = SiteRing::open(&path).unwrap();
        assert!(!ring.ready(4) && ring.take(4).is_none(), "nothing at 4");
        assert!(ring.ready(5));
        let rec = ring.take(5).unwrap();
        assert_eq!(rec[L::S_ADDR..L::S_ADDR + 8], 0xdead_beefu64.to_le_bytes());
        assert!(!ring.ready(5) && ring.take(5).is_none(), "taken once");
        // Handed back: the next lap's producer finds its sequence.
        let word = u64::from_le_bytes(
            std::fs::read(&path).unwrap()[at..at + 8]
                .try_into()
                .unwrap(),
        );
        assert_eq!(L::sequence(word, 5 + L::SLOTS as u64), 5 + L::SLOTS as u64);
        assert_eq!(ring.u64_at(L::H_HEAD), 6);
    }

    /// Run by [`the_local_zone_is_what_tz_says`] in a child with `TZ` set:
    /// prints what it reads (the environment is not the test's to change).
    #[test]
    #[ignore = "a helper: run by the_local_zone_is_what_tz_says"]
    fn print_the_local_zone() {
        let (offset, zone) = local_zone(1_700_000_000).unwrap();
        println!("zone={zone} offset={offset}");
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri runs no processes")]
    fn the_local_zone_is_what_tz_says() {
        // POSIX TZ strings: no time-zone database needed.
        for (tz, want) in [
            ("XST-5:30", "zone=XST offset=19800"),
            ("UTC0", "zone=UTC offset=0"),
            ("ABC+3", "zone=ABC offset=-10800"),
        ] {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "sys::tests::print_the_local_zone"])
                .args(["--ignored", "--nocapture", "--test-threads=1"])
                .env("TZ", tz)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && text.contains(want),
                "TZ={tz}: {text}"
            );
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri runs no processes")]
    fn a_child_s_peak_memory_is_read_after_it_exits() {
        // A Python that holds 64 MiB for a moment, then exits: its
        // high-water mark counts it although it is gone by the end.
        let child = std::process::Command::new("python3")
            .args(["-c", "b = bytearray(64 << 20); b = None"])
            .spawn()
            .unwrap();
        let (status, peak) = wait_peak_rss(child).unwrap();
        assert!(status.success());
        assert!(peak >= 64 << 20, "{peak}");
        assert!(peak < 1 << 30, "{peak}");
    }

    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[cfg_attr(miri, ignore = "Miri does not model glibc's malloc")]
    fn malloc_info_sees_a_large_block() {
        // glibc serves a large block from mmap or, once its dynamic mmap threshold
        // has risen, from the heap: either way in_use + mmap grows by its size.
        // Other tests allocate and free meanwhile, so allow a few tries.
        const BIG: u64 = 32 << 20;
        let total = |m: MallocInfo| m.in_use + m.mmap;
        let grew = (0..5).any(|_| {
            let before = malloc_info().unwrap();
            let v = std::hint::black_box(vec![1u8; BIG as usize]);
            let during = malloc_info().unwrap();
            drop(v);
            total(during) >= total(before) + BIG * 3 / 4
        });
        assert!(grew, "mallinfo2 never saw a 32 MiB block");
        let m = malloc_info().unwrap();
        assert!(m.arena > 0 && m.in_use > 0);
    }

    #[test]
    #[cfg(target_os = "linux")]
    #[cfg_attr(miri, ignore = "Miri does not model thread CPU clocks")]
    fn thread_cpu_time_counts_this_threads_work() {
        let t0 = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = std::hint::black_box(x.wrapping_add(i));
        }
        let used = thread_cpu_ns() - t0;
        assert!(used > 1_000_000, "{used} ns for 2e7 additions");
        let t1 = thread_cpu_ns();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            thread_cpu_ns() - t1 < 20_000_000,
            "sleeping is not CPU time"
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri does not model sysconf")]
    fn clock_ticks_are_plausible() {
        let t = clock_ticks_per_second();
        assert!((10..=10_000).contains(&t), "{t}");
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri does not model sockets")]
    fn a_socket_peer_is_this_user() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(peer_uid(&a).unwrap(), uid());
        assert_eq!(peer_uid(&b).unwrap(), uid());
        let me = std::fs::metadata("/proc/self").map(|m| {
            use std::os::unix::fs::MetadataExt;
            m.uid()
        });
        assert_eq!(uid(), me.unwrap(), "the owner of our own /proc entry");
        // Not a socket: an error, not a made-up id.
        let file = std::fs::File::open("/proc/self/stat").unwrap();
        let fake: std::os::unix::net::UnixStream = std::os::fd::OwnedFd::from(file).into();
        assert!(peer_uid(&fake).is_err());
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot start processes")]
    fn terminate_ends_a_process_with_sigterm() {
        use std::os::unix::process::ExitStatusExt;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        terminate(child.id()).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGTERM));
        assert_eq!(
            terminate(0).unwrap_err().kind(),
            std::io::ErrorKind::InvalidInput,
            "0 would signal our own process group"
        );
        assert!(terminate(u32::MAX).is_err(), "not a pid_t");
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot start processes")]
    fn a_tied_command_ends_when_its_spawning_thread_does() {
        use std::os::unix::process::ExitStatusExt;
        // The tie is to the spawning thread, so a short-lived thread stands in for a
        // flatline that exits or is killed.
        let mut child = std::thread::spawn(|| {
            let mut cmd = std::process::Command::new("sleep");
            cmd.arg("30");
            end_with_this_process(&mut cmd);
            cmd.spawn().unwrap()
        })
        .join()
        .unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGTERM), "{status}");

        // Untied, the same command outlives its spawning thread.
        let mut untied = std::thread::spawn(|| {
            std::process::Command::new("sleep")
                .arg("30")
                .spawn()
                .unwrap()
        })
        .join()
        .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(untied.try_wait().unwrap().is_none(), "still running");
        untied.kill().unwrap();
        untied.wait().unwrap();
    }
}
