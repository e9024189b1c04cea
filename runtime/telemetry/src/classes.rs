//! Where a process's memory lives, by class, from `/proc/<pid>/smaps`
//! (one block per mapping): the heap (`[heap]`, brk), anonymous memory
//! (private anonymous mappings: malloc's large blocks and arenas, Python's
//! and numpy's buffers, tensors; and the private copies inside file
//! mappings), shared memory (`/dev/shm`, memfd, SysV, shared anonymous),
//! mapped files (their page cache), stacks, GPU driver mappings
//! (`/dev/nvidia*`, `/dev/dri`, `/dev/kfd`) and the rest (`[vdso]`, …).
//! Each class is its mappings' PSS, so the classes add up to the process's
//! PSS. Within anonymous memory, the shape that tells allocators apart: how
//! many regions, the most common size among them, and glibc's per-thread
//! arenas (64 MiB reservations, aligned to 64 MiB, read and written only up
//! to what they hold).
//!
//! The tree probe reads it for each process whose memory moved since it
//! was first seen, and again each time it moved ([`ClassReader::due`]),
//! at most every [`CLASSES_EVERY_NS`] each, within a CPU budget of its own
//! ([`CLASSES_BUDGET`]): a walk of `smaps` costs what one of
//! `smaps_rollup` does (both walk the page tables: about 3 ms per GiB
//! resident here), plus its text, a line per field per mapping. Each
//! reading is a `classes` fact (pid, figures) in the recording; the
//! receipt turns the first and last of a process into its `where`.

use std::collections::HashMap;

use flatline_format::EventKind;

pub use flatline_catalog::classes::{CLASSES, CLASSES_MOVED};

/// How often one process's `smaps` may be read again, at most.
pub const CLASSES_EVERY_NS: u64 = 5_000_000_000;
/// Share of one core the `smaps` reads may use on average.
pub const CLASSES_BUDGET: f64 = 0.0015;
/// CPU time the budget starts with and holds at most, ns.
pub const CLASSES_BANK_NS: f64 = 30_000_000.0;
/// How many shared-memory segments a reading names, largest first.
pub const SEGMENTS: usize = 6;

/// glibc's arena reservation on 64-bit (`HEAP_MAX_SIZE`).
const ARENA: u64 = 64 << 20;

/// One reading of a process's `smaps`: PSS by class, and the shape of its
/// anonymous memory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Classes {
    /// PSS in bytes, in the order of [`CLASSES`].
    pub pss: [f64; 7],
    /// Private anonymous mappings.
    pub regions: u64,
    /// The most common size (bytes) among those holding memory, and how
    /// many have it.
    pub mode_size: u64,
    pub mode_count: u64,
    /// glibc arenas: 64 MiB-aligned anonymous reservations of 64 MiB, and
    /// the PSS in them (bytes).
    pub arenas: u64,
    pub in_arenas: f64,
    /// Shared-memory segments by name (`/dev/shm/…`, `/memfd:…`,
    /// `/SYSV…`, `[shmem]` for shared anonymous memory), PSS, largest first,
    /// at most [`SEGMENTS`]; and how many there are.
    pub segments: Vec<(String, f64)>,
    pub shm_segments: u64,
}

/// Which class a mapping's memory is, by its path and permissions.
fn class_of(path: &str, shared: bool) -> usize {
    let at = |c: &str| CLASSES.iter().position(|&k| k == c).unwrap_or(6);
    if path == "[heap]" {
        at("heap")
    } else if path.starts_with("[stack") {
        at("stack")
    } else if path.starts_with("/dev/nvidia") || path.starts_with("/dev/dri/") || path == "/dev/kfd"
    {
        at("gpu")
    } else if path.starts_with("/dev/shm/")
        || path.starts_with("/memfd:")
        || path.starts_with("/SYSV")
        || path.starts_with("[anon_shmem")
        || path.starts_with("/dev/zero")
        || (shared && (path.is_empty() || path.starts_with("[anon:")))
    {
        at("shmem")
    } else if path.is_empty() || path.starts_with("[anon:") {
        at("anon")
    } else if path.starts_with('[') {
        at("other")
    } else {
        at("file")
    }
}

/// The name a shared-memory segment is told by.
fn segment_name(path: &str) -> String {
    let p = path.trim_end_matches(" (deleted)");
    if p.is_empty() || p.starts_with("/dev/zero") || p.starts_with("[anon") {
        "[shmem]".to_owned()
    } else {
        p.to_owned()
    }
}

/// A `Key:   N kB` line of `/proc` (`smaps`, `smaps_rollup`, `meminfo`):
/// its key and value in bytes (0 where the number does not read).
pub fn kb_line(line: &str) -> Option<(&str, f64)> {
    let (key, rest) = line.split_once(':')?;
    let v = rest
        .split_ascii_whitespace()
        .next()
        .and_then(|n| n.parse::<u64>().ok())
        .map_or(0.0, |k| k as f64 * 1024.0);
    Some((key, v))
}

/// One mapping's header line: `start-end perms offset dev inode [path]`.
struct Header<'a> {
    start: u64,
    end: u64,
    perms: &'a str,
    path: &'a str,
}

fn parse_header(line: &str) -> Option<Header<'_>> {
    let mut f = line.splitn(6, ' ');
    let range = f.next()?;
    let (a, b) = range.split_once('-')?;
    let start = u64::from_str_radix(a, 16).ok()?;
    let end = u64::from_str_radix(b, 16).ok()?;
    let perms = f.next()?;
    if perms.len() != 4 {
        return None;
    }
    // offset, device, inode; the path follows after padding.
    let _ = (f.next()?, f.next()?, f.next()?);
    let path = f.next().unwrap_or("").trim();
    Some(Header {
        start,
        end,
        perms,
        path,
    })
}

/// A mapping being read: its class, size and fields so far.
struct Mapping {
    class: usize,
    size: u64,
    start: u64,
    end: u64,
    private_anon: bool,
    readable: bool,
    segment: Option<String>,
    pss: f64,
    anonymous: f64,
}

impl Classes {
    /// Parses the text of `/proc/<pid>/smaps`; `None` where it holds no
    /// mapping (an exited process, a kernel thread).
    pub fn parse(text: &str) -> Option<Classes> {
        let mut c = Classes::default();
        let mut sizes: HashMap<u64, u64> = HashMap::new();
        let mut segments: HashMap<String, f64> = HashMap::new();
        let mut cur: Option<Mapping> = None;
        // The last private anonymous mapping that can hold an arena's
        // start: (start, end, PSS).
        let mut arena_head: Option<(u64, u64, f64)> = None;
        let mut any = false;
        let close = |m: Mapping,
                     c: &mut Classes,
                     sizes: &mut HashMap<u64, u64>,
                     segments: &mut HashMap<String, f64>,
                     head: &mut Option<(u64, u64, f64)>| {
            // Private copies inside a file mapping (written data, COW) are
            // the program's anonymous memory, not page cache.
            if c_is_file(m.class) {
                let anon = m.anonymous.min(m.pss);
                c.pss[1] += anon;
                c.pss[m.class] += m.pss - anon;
            } else {
                c.pss[m.class] += m.pss;
            }
            if let Some(name) = m.segment {
                *segments.entry(name).or_default() += m.pss;
            }
            if m.private_anon {
                c.regions += 1;
                if m.pss > 0.0 {
                    *sizes.entry(m.size).or_default() += 1;
                }
                // glibc reserves an arena's 64 MiB aligned and opens it
                // (read and write) as it fills: the open part first, the
                // rest reserved with no access after it.
                let aligned = m.start.is_multiple_of(ARENA);
                if m.readable && aligned && m.size == ARENA {
                    c.arenas += 1;
                    c.in_arenas += m.pss;
                    *head = None;
                } else if m.readable && aligned && m.size < ARENA {
                    *head = Some((m.start, m.end, m.pss));
                } else if let Some((_, _, pss)) =
                    head.filter(|(s, e, _)| !m.readable && *e == m.start && m.end - s == ARENA)
                {
                    c.arenas += 1;
                    c.in_arenas += pss;
                    *head = None;
                } else {
                    *head = None;
                }
            } else {
                *head = None;
            }
        };
        for line in text.lines() {
            if let Some(h) = line
                .as_bytes()
                .first()
                .filter(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
                .and_then(|_| parse_header(line))
            {
                if let Some(m) = cur.take() {
                    close(m, &mut c, &mut sizes, &mut segments, &mut arena_head);
                }
                any = true;
                let shared = h.perms.as_bytes()[3] == b's';
                let class = class_of(h.path, shared);
                cur = Some(Mapping {
                    class,
                    size: h.end.saturating_sub(h.start),
                    start: h.start,
                    end: h.end,
                    private_anon: !shared && (h.path.is_empty() || h.path.starts_with("[anon:")),
                    readable: h.perms.starts_with('r'),
                    segment: (CLASSES[class] == "shmem").then(|| segment_name(h.path)),
                    pss: 0.0,
                    anonymous: 0.0,
                });
                continue;
            }
            let Some(m) = cur.as_mut() else { continue };
            match kb_line(line) {
                Some(("Pss", v)) => m.pss = v,
                Some(("Anonymous", v)) => m.anonymous = v,
                _ => {}
            }
        }
        if let Some(m) = cur.take() {
            close(m, &mut c, &mut sizes, &mut segments, &mut arena_head);
        }
        if let Some((&size, &count)) = sizes.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))) {
            c.mode_size = size;
            c.mode_count = count;
        }
        let mut segs: Vec<(String, f64)> = segments.into_iter().filter(|s| s.1 > 0.0).collect();
        c.shm_segments = segs.len() as u64;
        segs.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        segs.truncate(SEGMENTS);
        c.segments = segs;
        any.then_some(c)
    }

    /// The recording's fact of this reading, about process `pid`: kind
    /// `classes`; figures: each class's PSS, `regions`, `mode_size`,
    /// `mode_count`, `arenas`, `in_arenas` (PSS in them), `shm_segments`
    /// (shared-memory segments holding
    /// memory), and `shm:<name>` for each segment named.
    pub fn fact(&self, pid: u32, name: &str) -> EventKind {
        let mut figures: Vec<(String, f64)> = CLASSES
            .iter()
            .zip(self.pss)
            .map(|(k, v)| ((*k).to_owned(), v))
            .collect();
        figures.push(("regions".into(), self.regions as f64));
        figures.push(("mode_size".into(), self.mode_size as f64));
        figures.push(("mode_count".into(), self.mode_count as f64));
        figures.push(("arenas".into(), self.arenas as f64));
        figures.push(("in_arenas".into(), self.in_arenas));
        figures.push(("shm_segments".into(), self.shm_segments as f64));
        for (n, v) in &self.segments {
            figures.push((format!("shm:{n}"), *v));
        }
        let mib = |v: f64| v / 1_048_576.0;
        let text = format!(
            "process {pid} ({name}) holds heap {:.1} MiB, anonymous {:.1} MiB in {} regions, \
             shared {:.1} MiB, mapped files {:.1} MiB, stacks {:.1} MiB, GPU mappings {:.1} MiB",
            mib(self.pss[0]),
            mib(self.pss[1]),
            self.regions,
            mib(self.pss[2]),
            mib(self.pss[3]),
            mib(self.pss[4]),
            mib(self.pss[5]),
        );
        let refs: Vec<(&str, f64)> = figures.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        EventKind::fact("classes", text, &refs).of_pid(pid)
    }
}

fn c_is_file(class: usize) -> bool {
    CLASSES[class] == "file"
}

/// A process read again waits at least this share of the time since its
/// first reading: a week-long leak is read about a hundred times, not
/// every few seconds, and its last reading is at most this share of the
/// run old.
pub const CLASSES_BACKOFF: f64 = 0.1;

/// What the reader knows of one process.
#[derive(Debug, Clone, Copy)]
struct Seen {
    /// RSS and USS at its last reading, or at its first sighting before it.
    rss: f64,
    uss: f64,
    /// Its first and last readings (stream clock, ns), once read.
    read: Option<(u64, u64)>,
}

/// Which processes' `smaps` to read, and the budget the reads spend.
#[derive(Debug)]
pub struct ClassReader {
    seen: HashMap<u32, Seen>,
    bank_ns: f64,
    at: std::time::Instant,
    share: f64,
}

impl Default for ClassReader {
    fn default() -> Self {
        Self::new(CLASSES_BUDGET)
    }
}

impl ClassReader {
    pub fn new(share: f64) -> Self {
        Self {
            seen: HashMap::new(),
            bank_ns: CLASSES_BANK_NS,
            at: std::time::Instant::now(),
            share,
        }
    }

    /// Fills the budget for the time passed; whether any is left.
    pub fn refill(&mut self) -> bool {
        let now = std::time::Instant::now();
        self.bank_ns = (self.bank_ns + self.share * now.duration_since(self.at).as_nanos() as f64)
            .min(CLASSES_BANK_NS);
        self.at = now;
        self.bank_ns >= 0.0
    }

    /// Whether process `pid` (resident `rss`, own memory `uss`, NaN where
    /// unknown) is due a reading at `now_ns`: its memory moved by
    /// [`CLASSES_MOVED`] since it was first seen (its first reading) or
    /// since its last reading, which is at least [`CLASSES_EVERY_NS`] old
    /// and [`CLASSES_BACKOFF`] of the time since its first. A process that
    /// never moves is never read: nothing of it grew to be told.
    pub fn due(&mut self, pid: u32, rss: f64, uss: f64, now_ns: u64) -> bool {
        let Some(s) = self.seen.get_mut(&pid) else {
            self.seen.insert(
                pid,
                Seen {
                    rss,
                    uss,
                    read: None,
                },
            );
            return false;
        };
        // A figure unknown when first seen (no page-table walk yet) has its
        // baseline at its first known value.
        if s.rss.is_nan() {
            s.rss = rss;
        }
        if s.uss.is_nan() {
            s.uss = uss;
        }
        if let Some((first, last)) = s.read {
            let wait = (CLASSES_BACKOFF * last.saturating_sub(first) as f64) as u64;
            if now_ns.saturating_sub(last) < CLASSES_EVERY_NS.max(wait) {
                return false;
            }
        }
        let moved =
            |a: f64, b: f64| a.is_finite() && b.is_finite() && (a - b).abs() >= CLASSES_MOVED;
        moved(rss, s.rss) || moved(uss, s.uss)
    }

    /// A reading of `pid` was made, costing `cost_ns` of CPU.
    pub fn read(&mut self, pid: u32, rss: f64, uss: f64, now_ns: u64, cost_ns: f64) {
        let first = self
            .seen
            .get(&pid)
            .and_then(|s| s.read)
            .map_or(now_ns, |(f, _)| f);
        self.seen.insert(
            pid,
            Seen {
                rss,
                uss,
                read: Some((first, now_ns)),
            },
        );
        self.bank_ns -= cost_ns;
    }

    /// Puts the processes due a reading in the order the budget serves
    /// them: never read first, then the longest since its last reading,
    /// then by pid. In pid order a job's main process (the lowest pid) took
    /// the budget at every turn: a real PyTorch job's two DataLoader
    /// workers, each growing 15 MiB/s, were never read in 55 s, and their
    /// growth could not be told as heap or anonymous memory.
    pub fn order(&self, due: &mut [u32]) {
        due.sort_unstable_by_key(|p| {
            let last = self.seen.get(p).and_then(|s| s.read).map(|(_, last)| last);
            (last.is_some(), last.unwrap_or(0), *p)
        });
    }

    /// Whether the budget has time left now.
    pub fn has_budget(&self) -> bool {
        self.bank_ns >= 0.0
    }

    /// Forgets the processes that left (`keep` false): a pid used again is
    /// a new process.
    pub fn retain(&mut self, keep: impl Fn(u32) -> bool) {
        self.seen.retain(|p, _| keep(*p));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]
Size:                132 kB
Rss:                 120 kB
Pss:                 120 kB
Anonymous:           120 kB
VmFlags: rd wr mr mw me ac sd
7f0000000000-7f0000021000 rw-p 00000000 00:00 0 
Size:                132 kB
Rss:                 132 kB
Pss:                 132 kB
Anonymous:           132 kB
7f0000021000-7f0004000000 ---p 00000000 00:00 0 
Size:              65404 kB
Rss:                   0 kB
Pss:                   0 kB
7f1000000000-7f1000040000 rw-p 00000000 00:00 0 
Size:                256 kB
Rss:                 256 kB
Pss:                 256 kB
Anonymous:           256 kB
7f1000040000-7f1000080000 rw-p 00000000 00:00 0 
Size:                256 kB
Rss:                 256 kB
Pss:                 200 kB
Anonymous:           256 kB
7f2000000000-7f2000100000 rw-s 00000000 00:1a 12345                      /dev/shm/torch_77_1
Size:               1024 kB
Rss:                1024 kB
Pss:                 512 kB
7f3000000000-7f3000200000 r--s 00000000 08:01 999                        /data/big file.bin
Size:               2048 kB
Rss:                2048 kB
Pss:                2048 kB
Anonymous:             0 kB
7f3100000000-7f3100010000 rw-p 00001000 08:01 1000                       /usr/lib/libc.so.6
Size:                 64 kB
Rss:                  64 kB
Pss:                  40 kB
Anonymous:             8 kB
7f4000000000-7f4000200000 rw-s 00000000 00:05 77                         /dev/nvidia0
Size:               2048 kB
Rss:                  64 kB
Pss:                  64 kB
7f5000000000-7f5000010000 rw-s 00000000 00:01 5                          /dev/zero (deleted)
Size:                 64 kB
Rss:                  64 kB
Pss:                  16 kB
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]
Size:                132 kB
Rss:                  16 kB
Pss:                  16 kB
7ffc10000000-7ffc10002000 r-xp 00000000 00:00 0                          [vdso]
Size:                  8 kB
Rss:                   4 kB
Pss:                   4 kB
";

    /// Each mapping's PSS goes to its class; the private copies in a
    /// file mapping are anonymous memory; the shape of anonymous memory
    /// names the regions, the most common size and glibc's arena.
    #[test]
    fn a_processes_mappings_are_read_by_class_and_shape() {
        let c = Classes::parse(MAPS).unwrap();
        let k = 1024.0;
        assert_eq!(
            c.pss,
            [
                120.0 * k,
                (132.0 + 256.0 + 200.0 + 8.0) * k,
                (512.0 + 16.0) * k,
                (2048.0 + 32.0) * k,
                16.0 * k,
                64.0 * k,
                4.0 * k
            ]
        );
        assert_eq!(c.regions, 4, "four private anonymous mappings");
        assert_eq!((c.mode_size, c.mode_count), (256 * 1024, 2));
        assert_eq!(c.arenas, 1, "an open head and its reserved rest");
        assert_eq!(c.in_arenas, 132.0 * k);
        assert_eq!(
            c.segments,
            [
                ("/dev/shm/torch_77_1".to_owned(), 512.0 * k),
                ("[shmem]".to_owned(), 16.0 * k)
            ]
        );
        let EventKind::Fact {
            kind, pid, figures, ..
        } = c.fact(42, "python3")
        else {
            panic!("a fact")
        };
        assert_eq!((kind.as_str(), pid), ("classes", Some(42)));
        assert_eq!(figures["anon"], c.pss[1]);
        assert_eq!(figures["shm:/dev/shm/torch_77_1"], 512.0 * k);
        assert_eq!(figures["arenas"], 1.0);
        assert_eq!(figures["shm_segments"], 2.0);
        assert_eq!(Classes::parse(""), None);
    }

    /// A process is read once it moved since it was first seen, then
    /// again only once it moved and the period passed (longer as it keeps
    /// being read); the budget spent stops reads until it refills.
    #[test]
    fn a_process_is_read_only_once_it_moved() {
        let mut r = ClassReader::new(0.0);
        let s = |n: u64| n * 1_000_000_000;
        assert!(!r.due(7, 100e6, 50e6, 0), "first seen: its baseline");
        assert!(!r.due(7, 100.5e6, 50e6, s(1)), "moved too little");
        assert!(r.due(7, 102e6, 50e6, s(1)), "moved since first seen");
        r.read(7, 102e6, 50e6, s(1), 1e6);
        assert!(!r.due(7, 200e6, 50e6, s(6) - 1), "too soon");
        assert!(!r.due(7, 102.5e6, 50e6, s(6)), "moved too little");
        assert!(r.due(7, 102e6, 52e6, s(6)), "its own memory moved");
        // Read 100 s after its first reading: the next waits 10 s.
        r.read(7, 102e6, 52e6, s(101), CLASSES_BANK_NS);
        assert!(!r.due(7, 300e6, 52e6, s(110)));
        assert!(r.due(7, 300e6, 52e6, s(111)));
        assert!(!r.has_budget(), "the bank is spent");
        r.retain(|p| p != 7);
        assert!(
            !r.due(7, 0.0, 0.0, s(112)),
            "gone: a new process, first seen"
        );
        // An own memory not known when first seen: its first known value
        // is its baseline.
        assert!(!r.due(8, 100e6, f64::NAN, 0));
        assert!(!r.due(8, 100e6, 40e6, s(1)));
        assert!(r.due(8, 100e6, 42e6, s(2)));
    }

    /// The budget serves the process never read first, then the one read
    /// longest ago: a main process with the lowest pid does not take every
    /// turn from its workers.
    #[test]
    fn the_budget_serves_the_least_recently_read_first() {
        let mut r = ClassReader::new(0.0);
        let s = |n: u64| n * 1_000_000_000;
        for p in [10, 11, 12] {
            r.due(p, 100e6, 50e6, 0);
        }
        r.read(10, 110e6, 60e6, s(5), 1.0);
        r.read(12, 110e6, 60e6, s(3), 1.0);
        let mut due = vec![10, 11, 12];
        r.order(&mut due);
        assert_eq!(due, [11, 12, 10]);
        r.read(11, 110e6, 60e6, s(9), 1.0);
        r.order(&mut due);
        assert_eq!(due, [12, 10, 11]);
    }
}
