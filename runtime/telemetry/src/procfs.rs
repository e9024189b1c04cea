//! Process memory, page tables and faults from `/proc/<pid>/status` and
//! `/proc/<pid>/stat`, for this process or any PID.
//!
//! The parsers are pure functions over the files' bytes and allocate nothing;
//! the probe reads both files into a buffer it reuses, so a steady-state tick
//! costs two `open`/`read`/`close` sequences and no heap traffic.

use std::fs::File;
use std::io::{self, Read};
use std::path::PathBuf;
use std::time::Instant;

use super::{ChannelSpec, Probe, ProbeError, Unavailable, catalog};

/// Fields of `/proc/<pid>/status` that flatline reads. Sizes in bytes; a
/// field the kernel did not print (older kernels lack `RssAnon`, kernel
/// threads lack every `Vm*`) is `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcStatus {
    /// The state letter: `R`, `S`, `D`, `Z` (zombie), `X` (dead), …
    pub state: Option<u8>,
    pub vm_rss: Option<u64>,
    pub vm_hwm: Option<u64>,
    pub vm_data: Option<u64>,
    pub vm_size: Option<u64>,
    pub vm_pte: Option<u64>,
    pub rss_anon: Option<u64>,
    pub rss_file: Option<u64>,
    pub vm_swap: Option<u64>,
    pub threads: Option<u64>,
}

impl ProcStatus {
    /// A zombie or dead task: the process has exited, only its entry remains.
    pub fn has_exited(&self) -> bool {
        matches!(self.state, Some(b'Z' | b'X' | b'x'))
    }
}

/// This process's resident memory (`VmRSS`, bytes), where `/proc` has it:
/// flatline's own, for its window and its exporter to show.
pub fn own_rss() -> Option<u64> {
    parse_status(&std::fs::read("/proc/self/status").ok()?).vm_rss
}

/// Parses the text of `/proc/<pid>/status`. Unknown lines are skipped, bad
/// numbers leave their field `None`; it never fails and never allocates.
pub fn parse_status(text: &[u8]) -> ProcStatus {
    let mut st = ProcStatus::default();
    for line in text.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (key, rest) = (&line[..colon], &line[colon + 1..]);
        let slot = match key {
            b"State" => {
                st.state = rest.iter().copied().find(|b| !b.is_ascii_whitespace());
                continue;
            }
            b"Threads" => {
                st.threads = parse_u64(first_word(rest));
                continue;
            }
            b"VmRSS" => &mut st.vm_rss,
            b"VmHWM" => &mut st.vm_hwm,
            b"VmData" => &mut st.vm_data,
            b"VmSize" => &mut st.vm_size,
            b"VmPTE" => &mut st.vm_pte,
            b"RssAnon" => &mut st.rss_anon,
            b"RssFile" => &mut st.rss_file,
            b"VmSwap" => &mut st.vm_swap,
            _ => continue,
        };
        *slot = parse_kb(rest);
    }
    st
}

/// Fields of `/proc/<pid>/stat` that flatline reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcStat {
    pub state: u8,
    pub minflt: u64,
    pub majflt: u64,
    /// User and system CPU time, in clock ticks.
    pub utime: u64,
    pub stime: u64,
    pub num_threads: u64,
}

/// Parses the text of `/proc/<pid>/stat`. The command name (field 2) may hold
/// spaces and parentheses, so fields are counted from the last `)`. `None` if
/// the text is cut short or malformed. Never allocates.
pub fn parse_stat(text: &[u8]) -> Option<ProcStat> {
    let close = text.iter().rposition(|&b| b == b')')?;
    let mut f = text[close + 1..]
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty());
    // After the name: state(3) ppid pgrp session tty_nr tpgid flags minflt(10)
    // cminflt majflt(12) cmajflt utime(14) stime(15) cutime cstime priority nice
    // num_threads(20).
    let state = *f.next()?.first()?;
    let mut f = f.skip(6);
    let minflt = parse_u64(f.next()?)?;
    let majflt = parse_u64(f.nth(1)?)?;
    let utime = parse_u64(f.nth(1)?)?;
    let stime = parse_u64(f.next()?)?;
    let num_threads = parse_u64(f.nth(4)?)?;
    Some(ProcStat {
        state,
        minflt,
        majflt,
        utime,
        stime,
        num_threads,
    })
}

fn first_word(s: &[u8]) -> &[u8] {
    s.split(|b| b.is_ascii_whitespace())
        .find(|w| !w.is_empty())
        .unwrap_or(&[])
}

fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    s.iter().try_fold(0u64, |acc, &b| {
        let d = b.wrapping_sub(b'0');
        (d < 10).then_some(())?;
        acc.checked_mul(10)?.checked_add(u64::from(d))
    })
}

/// `"   1234 kB"` → 1234 × 1024 bytes. A value without a unit is taken as bytes.
fn parse_kb(s: &[u8]) -> Option<u64> {
    let mut words = s
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty());
    let n = parse_u64(words.next()?)?;
    match words.next() {
        Some(b"kB") => n.checked_mul(1024),
        None => Some(n),
        Some(_) => None,
    }
}

/// Reads a whole small file into `buf` (reusing its capacity).
fn read_into(path: &std::path::Path, buf: &mut Vec<u8>) -> io::Result<()> {
    buf.clear();
    File::open(path)?.read_to_end(buf)?;
    Ok(())
}

/// Which process a probe reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcTarget {
    /// The calling process (`/proc/self`).
    SelfProcess,
    Pid(u32),
}

/// `mem.*` and `proc.*` channels from `/proc/<pid>`.
#[derive(Debug)]
pub struct ProcProbe {
    pid: u32,
    status_path: PathBuf,
    stat_path: PathBuf,
    buf: Vec<u8>,
    ticks_per_s: f64,
    last_cpu: Option<(u64, Instant)>,
}

/// The channels read, in position order (declared in `catalog.rs`).
const PROC_CHANNELS: [&str; 12] = [
    "mem.rss",
    "mem.hwm",
    "mem.vm_data",
    "mem.vm_size",
    "mem.vm_pte",
    "mem.rss_anon",
    "mem.rss_file",
    "mem.swap",
    "mem.minflt",
    "mem.majflt",
    "proc.threads",
    "proc.cpu",
];

impl ProcProbe {
    /// Opens the probe and reads once to check the process can be read.
    pub fn new(target: ProcTarget) -> Result<Self, Unavailable> {
        if !cfg!(target_os = "linux") {
            return Err(Unavailable::new(
                "procfs",
                "no /proc on this operating system",
            ));
        }
        let pid = match target {
            ProcTarget::SelfProcess => std::process::id(),
            ProcTarget::Pid(pid) => pid,
        };
        let dir = PathBuf::from(format!("/proc/{pid}"));
        let mut probe = Self {
            pid,
            status_path: dir.join("status"),
            stat_path: dir.join("stat"),
            buf: Vec::with_capacity(16 << 10),
            ticks_per_s: ticks_per_second(),
            last_cpu: None,
        };
        let mut out = [f64::NAN; PROC_CHANNELS.len()];
        match probe.read(&mut out) {
            Ok(()) => Ok(probe),
            Err(ProbeError::Gone { .. }) => Err(Unavailable::new(
                "procfs",
                format!("process {pid} does not exist or has exited"),
            )),
            Err(e) => Err(Unavailable::new(
                "procfs",
                format!("cannot read /proc/{pid}: {e}"),
            )),
        }
    }

    /// The PID this probe reads.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    fn gone_or_failed(&self, e: io::Error) -> ProbeError {
        match e.kind() {
            io::ErrorKind::NotFound => ProbeError::Gone { pid: self.pid },
            // ESRCH: the task went away between open and read.
            _ if e.raw_os_error() == Some(3) => ProbeError::Gone { pid: self.pid },
            _ => ProbeError::Failed(format!("/proc/{}: {e}", self.pid)),
        }
    }
}

#[cfg(target_os = "linux")]
fn ticks_per_second() -> f64 {
    flatline_arena::sys::clock_ticks_per_second() as f64
}

#[cfg(not(target_os = "linux"))]
fn ticks_per_second() -> f64 {
    100.0
}

impl Probe for ProcProbe {
    fn name(&self) -> &'static str {
        "procfs"
    }

    fn channels(&self) -> Vec<ChannelSpec> {
        PROC_CHANNELS
            .iter()
            .map(|&name| catalog::spec(name))
            .collect()
    }

    fn read(&mut self, out: &mut [f64]) -> Result<(), ProbeError> {
        let mut buf = std::mem::take(&mut self.buf);
        let status = read_into(&self.status_path, &mut buf).map(|()| parse_status(&buf));
        let stat = status
            .and_then(|st| read_into(&self.stat_path, &mut buf).map(|()| (st, parse_stat(&buf))));
        self.buf = buf;
        let (st, stat) = stat.map_err(|e| self.gone_or_failed(e))?;
        if st.has_exited() || stat.is_some_and(|s| matches!(s.state, b'Z' | b'X' | b'x')) {
            return Err(ProbeError::Gone { pid: self.pid });
        }
        let f = |v: Option<u64>| v.map_or(f64::NAN, |v| v as f64);
        out[..8].copy_from_slice(&[
            f(st.vm_rss),
            f(st.vm_hwm),
            f(st.vm_data),
            f(st.vm_size),
            f(st.vm_pte),
            f(st.rss_anon),
            f(st.rss_file),
            f(st.vm_swap),
        ]);
        out[10] = f(st.threads);
        out[8] = f(stat.map(|s| s.minflt));
        out[9] = f(stat.map(|s| s.majflt));
        out[11] = f64::NAN;
        if let Some(s) = stat {
            let now = Instant::now();
            let ticks = s.utime + s.stime;
            if let Some((last, at)) = self.last_cpu {
                let dt = now.duration_since(at).as_secs_f64();
                if dt > 0.0 {
                    let busy = ticks.saturating_sub(last) as f64 / self.ticks_per_s;
                    // Whole kernel ticks over the interval: digits past
                    // f32's seven are noise, and f32 precision halves what
                    // the recording spends on this channel (docs/long-recordings.md,
                    // "Choosing the encoding by measurement").
                    out[11] = f64::from((100.0 * busy / dt) as f32);
                }
            }
            self.last_cpu = Some((ticks, now));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS_6X: &str = "Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\n\
Pid:\t4242\nVmPeak:\t 5123456 kB\nVmSize:\t 5000000 kB\nVmLck:\t       0 kB\nVmHWM:\t 1400000 kB\n\
VmRSS:\t 1327308 kB\nRssAnon:\t 1200000 kB\nRssFile:\t  127000 kB\nRssShmem:\t     308 kB\n\
VmData:\t 3039296 kB\nVmStk:\t     132 kB\nVmExe:\t    2800 kB\nVmLib:\t  190000 kB\n\
VmPTE:\t    4200 kB\nVmSwap:\t       0 kB\nHugetlbPages:\t       0 kB\nThreads:\t37\n\
SigQ:\t0/127338\nCpus_allowed_list:\t0-15\n";

    /// A 3.x kernel: no RssAnon/RssFile lines.
    const STATUS_3X: &str = "Name:\told\nState:\tR (running)\nVmSize:\t  10000 kB\nVmHWM:\t 900 kB\n\
VmRSS:\t     800 kB\nVmData:\t    300 kB\nVmPTE:\t      40 kB\nVmSwap:\t  12 kB\nThreads:\t1\n";

    /// A kernel thread: no Vm* lines at all.
    const STATUS_KTHREAD: &str = "Name:\tkworker/0:1\nState:\tI (idle)\nThreads:\t1\n";

    #[test]
    fn parses_a_modern_status() {
        let st = parse_status(STATUS_6X.as_bytes());
        assert_eq!(st.state, Some(b'S'));
        assert_eq!(st.vm_rss, Some(1_327_308 * 1024));
        assert_eq!(st.vm_hwm, Some(1_400_000 * 1024));
        assert_eq!(st.vm_data, Some(3_039_296 * 1024));
        assert_eq!(st.vm_size, Some(5_000_000 * 1024));
        assert_eq!(st.vm_pte, Some(4_200 * 1024));
        assert_eq!(st.rss_anon, Some(1_200_000 * 1024));
        assert_eq!(st.rss_file, Some(127_000 * 1024));
        assert_eq!(st.vm_swap, Some(0));
        assert_eq!(st.threads, Some(37));
        assert!(!st.has_exited());
    }

    #[test]
    fn missing_fields_stay_none() {
        let st = parse_status(STATUS_3X.as_bytes());
        assert_eq!((st.vm_rss, st.vm_swap), (Some(800 * 1024), Some(12 * 1024)));
        assert_eq!((st.rss_anon, st.rss_file), (None, None));
        let st = parse_status(STATUS_KTHREAD.as_bytes());
        assert_eq!(st.state, Some(b'I'));
        assert_eq!((st.vm_rss, st.vm_data, st.vm_pte), (None, None, None));
        assert_eq!(st.threads, Some(1));
    }

    #[test]
    fn junk_does_not_break_the_status_parser() {
        let st = parse_status(
            b"VmRSS:\tlots kB\nVmData: 12 MB\n:::\n\nVmPTE:\t99999999999999999999999 kB\nState:",
        );
        assert_eq!(st, ProcStatus::default());
        let zombie = parse_status(b"Name:\tx\nState:\tZ (zombie)\nThreads:\t1\n");
        assert!(zombie.has_exited());
    }

    #[test]
    fn parses_stat_with_a_hostile_command_name() {
        let text = b"4242 (py (worker) 1) S 1 4242 4242 0 -1 4194560 123456 0 78 0 \
9000 1500 0 0 20 0 37 0 100 5000000000 331827 18446744073709551615 1 1 0 0 0 0 0 16781312 17922 0 0 0 17 3 0 0 0 0 0\n";
        let s = parse_stat(text).unwrap();
        assert_eq!(s.state, b'S');
        assert_eq!((s.minflt, s.majflt), (123_456, 78));
        assert_eq!((s.utime, s.stime), (9_000, 1_500));
        assert_eq!(s.num_threads, 37);
        assert_eq!(parse_stat(b"4242 (cut) S 1 2 3"), None);
        assert_eq!(parse_stat(b"no parenthesis at all"), None);
        assert_eq!(parse_stat(b""), None);
    }

    #[test]
    #[cfg(target_os = "linux")]
    #[cfg_attr(miri, ignore = "Miri cannot read /proc")]
    fn reads_this_process_and_sees_growth() {
        let mut p = ProcProbe::new(ProcTarget::SelfProcess).unwrap();
        let names: Vec<String> = p.channels().into_iter().map(|c| c.name).collect();
        assert_eq!(names.len(), PROC_CHANNELS.len());
        let rss = names.iter().position(|n| n == "mem.rss").unwrap();
        let minflt = names.iter().position(|n| n == "mem.minflt").unwrap();
        let mut a = vec![f64::NAN; names.len()];
        p.read(&mut a).unwrap();
        // Touch 64 MiB of fresh pages: RSS and minor faults must both rise.
        let mut v = vec![0u8; 64 << 20];
        for i in (0..v.len()).step_by(4096) {
            v[i] = 1;
        }
        std::hint::black_box(&v);
        let mut b = vec![f64::NAN; names.len()];
        p.read(&mut b).unwrap();
        assert!(
            b[rss] >= a[rss] + 32.0 * 1048576.0,
            "{} -> {}",
            a[rss],
            b[rss]
        );
        assert!(
            b[minflt] >= a[minflt] + 8000.0,
            "{} -> {}",
            a[minflt],
            b[minflt]
        );
        assert!(
            b[..11]
                .iter()
                .enumerate()
                .all(|(i, v)| v.is_finite() || names[i] == "mem.swap")
        );
        assert!(b[11].is_finite(), "cpu % after the second read");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_missing_pid_is_unavailable_with_a_reason() {
        // PIDs are below 2^22 on Linux.
        let err = ProcProbe::new(ProcTarget::Pid(4_999_999)).unwrap_err();
        assert!(err.reason.contains("4999999"), "{err:?}");
    }
}
