//! Allocation sites of a watched job (`watch --sites`): the records the
//! preloaded library (`flatline-preload`) writes to a ring per process,
//! turned into live bytes by site.
//!
//! Each sampled allocation stands for its weight in bytes
//! (`flatline_format::sites::weight`); a site's live bytes are the weights
//! of its sampled blocks not yet freed, an unbiased estimate of the bytes
//! it holds. A site is where the allocation was made: the innermost Python
//! frame (file, line, function) where the process runs Python and the
//! library could read its frames, else the innermost native frame outside
//! the allocators (`allocators`: this library, the C and C++ runtimes,
//! the interpreter's, PyTorch's, numpy's, jemalloc, tcmalloc, mimalloc).
//!
//! Channels, each a `Level` in bytes so the evidence rule reads them as it
//! reads any memory:
//! - `site<N>.live` for each site once it holds 1 MiB (at most
//!   [`MAX_SITE_CHANNELS`]), labelled with its `pid`, `function`, `file`,
//!   `line`, `frames` (innermost first, one a line) and `code` (the source
//!   line, where its file could be read);
//! - beside it, for a heap profile's four sample types (`export --pprof`,
//!   `/debug/pprof/heap`): `site<N>.objects`, the blocks it holds (a gauge:
//!   the bytes are what the evidence rule judges), and `site<N>.alloc_bytes`
//!   and `site<N>.allocs`, what it allocated since it was first sampled
//!   (counters); each sample counts as its weight's bytes and as weight ÷
//!   size blocks, the same scaling;
//! - `pid<N>.alloc_live`: the bytes the process holds by the library's
//!   exact count (allocated less freed), beside its RSS;
//! - `sites.dropped`: records the rings could not take (full).
//!
//! Native frames are named here, off the job's hot path, from the process's
//! maps and each file's symbols and DWARF (`addr2line`), and only for the
//! sites that get a channel.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crossbeam_channel::Sender;
use flatline_format::sites as L;
/// The rings' layout (`flatline_format::sites`), for what reads a ring.
pub use flatline_format::sites as layout;
use flatline_format::{ChannelSpec, Event, EventKind};

use super::Clock;
use super::allocators;
use super::catalog;
use super::dynamic::DynamicChannels;
use super::{Probe, ProbeError};
use flatline_arena::sys::SiteRing;

/// A site gets a channel once its estimate holds this much.
pub const SITE_BYTES: i64 = 1 << 20;
/// At most this many site channels in a recording.
pub const MAX_SITE_CHANNELS: usize = 32;
/// Slots a sample keeps free beyond a site's counts: its three count
/// channels (for a heap profile) are added only while more than this many
/// are free, so that at a real job's size (dozens of processes, 32 sites)
/// they never take the room a growing site's bytes or a process's memory
/// need; such a site has `.live` alone.
pub const COUNT_RESERVE: usize = 64;
/// Records taken from one ring in one reading, at most.
const BATCH: usize = 1 << 16;
/// Frames kept to describe a site.
const FRAMES: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
/// A site is of one program image: its ring (a pid's `exec` starts a new
/// ring, whose code is mapped elsewhere).
enum Key {
    Python {
        ring: usize,
        file: String,
        function: String,
        line: u32,
    },
    Native {
        ring: usize,
        addr: u64,
    },
}

/// What a site is, for its channel's labels and the receipt.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Described {
    pub function: String,
    pub file: String,
    pub line: u32,
    /// Innermost first: `file:line function`.
    pub frames: Vec<String>,
    /// The source line, where its file could be read.
    pub code: Option<String>,
}

#[derive(Debug)]
struct Site {
    pid: u32,
    /// The ring its samples came from: its program's maps and Python.
    ring: usize,
    live: i64,
    /// Blocks held, bytes and blocks ever allocated: estimates as `live`.
    objects: f64,
    alloc_bytes: u64,
    allocs: f64,
    samples: u64,
    /// The position of its `.live` channel and how many it has: 4 where
    /// `.objects`, `.alloc_bytes` and `.allocs` follow it, 1 where the
    /// sample had no room for them ([`COUNT_RESERVE`]).
    channel: Option<(usize, usize)>,
    /// The first sample's frames: Python ones already named; native
    /// addresses named when the site gets a channel.
    python: Vec<(String, String, u32)>,
    native: Vec<u64>,
}

#[derive(Debug)]
struct Code {
    name: String,
    file: String,
}

/// A mapped file of a process: its address range and where it starts in
/// the file.
#[derive(Debug, Clone)]
struct Map {
    start: u64,
    end: u64,
    offset: u64,
    path: String,
}

/// A ring file stays until the watch ends (the folder goes then): a
/// pid's rings are numbered in the order its programs made them, and a
/// file removed would let a later program take its number.
#[derive(Debug)]
struct Ring {
    ring: SiteRing,
    pid: u32,
    head: u64,
    codes: HashMap<u32, Code>,
    /// A sampled block not yet freed: its site, and the bytes and blocks it
    /// stands for.
    blocks: HashMap<u64, (usize, u64, f64)>,
    maps: Vec<Map>,
    maps_read: bool,
    /// Whether each native address seen is an allocator's own frame
    /// (`allocators::is_allocator`, by its library and its name).
    allocator_frames: HashMap<u64, bool>,
    live_channel: Option<usize>,
    python_told: bool,
    /// Whether the note that the ring is an attach's was given.
    attach_told: bool,
    dropped_told: u64,
    ended: bool,
}

/// Reads a watched job's allocation-site rings (see the module's comment).
#[derive(Debug)]
pub struct SitesProbe {
    dir: PathBuf,
    opened: HashSet<OsString>,
    rings: Vec<Ring>,
    sites: Vec<Site>,
    index: HashMap<Key, usize>,
    symbols: Symbols,
    events: Option<Sender<Event>>,
    clock: Clock,
    site_channels: usize,
    told_full: bool,
    /// Channels to end at the next `dynamic`.
    to_end: Vec<usize>,
}

impl SitesProbe {
    /// Reads the rings the job's processes make in `dir`.
    pub fn new(dir: impl Into<PathBuf>, events: Option<Sender<Event>>, clock: Clock) -> Self {
        Self {
            dir: dir.into(),
            opened: HashSet::new(),
            rings: Vec::new(),
            sites: Vec::new(),
            index: HashMap::new(),
            symbols: Symbols::default(),
            events,
            clock,
            site_channels: 0,
            told_full: false,
            to_end: Vec::new(),
        }
    }

    fn emit(&self, kind: EventKind) {
        if let Some(tx) = &self.events {
            let _ = tx.try_send(Event {
                t_ns: self.clock.now_ns(),
                kind,
            });
        }
    }

    fn open_new(&mut self) {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return;
        };
        // `<pid>.<n>.ring`: a pid's later programs (each `exec`) have
        // higher n; open them in that order.
        let mut found: Vec<(u64, u64, std::fs::DirEntry)> = dir
            .flatten()
            .filter(|e| !self.opened.contains(&e.file_name()))
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let (pid, n) = name.strip_suffix(L::SUFFIX)?.split_once('.')?;
                Some((pid.parse().ok()?, n.parse().ok()?, e))
            })
            .collect();
        found.sort_by_key(|(pid, n, _)| (*pid, *n));
        for (_, _, entry) in found {
            let name = entry.file_name();
            // A ring whose magic is not written yet is tried again next time.
            if let Ok(ring) = SiteRing::open(&entry.path()) {
                self.opened.insert(name);
                // A process in a container wrote its pid there; ours is
                // another. Gone already, it has nothing to read for.
                let Some(pid) = host_pid(ring.u32_at(L::H_PID), ring.u64_at(L::H_PID_NS)) else {
                    continue;
                };
                let head = ring.u64_at(L::H_HEAD);
                // A pid's new ring is a new program (`exec`): the old
                // image's memory is gone, its sites end; its exact count's
                // channel goes on with the new one's.
                let mut live_channel = None;
                for old in self.rings.iter_mut().filter(|r| r.pid == pid && !r.ended) {
                    old.ended = true;
                    live_channel = live_channel.or(old.live_channel.take());
                    for site in self.sites.iter_mut().filter(|s| s.pid == pid) {
                        self.to_end
                            .extend(site.channel.take().into_iter().flat_map(|(p, n)| p..p + n));
                    }
                }
                // Its mappings now, while it runs: a short-lived process
                // (a test's child, a worker) may be gone by the time its
                // first samples are read, and its frames, the library's own
                // and the interpreter's, could then not be named.
                self.rings.push(Ring {
                    ring,
                    pid,
                    head,
                    codes: HashMap::new(),
                    blocks: HashMap::new(),
                    maps: read_maps(pid),
                    maps_read: false,
                    allocator_frames: HashMap::new(),
                    live_channel,
                    python_told: false,
                    attach_told: false,
                    dropped_told: 0,
                    ended: false,
                });
            }
        }
    }

    fn drain(&mut self, r: usize) {
        // An address no mapping holds makes the maps be read again, at most
        // once a reading (a library loaded since; JIT code never is).
        self.rings[r].maps_read = false;
        for _ in 0..BATCH {
            let ring = &mut self.rings[r];
            let Some(rec) = ring.ring.take(ring.head) else {
                break;
            };
            ring.head += 1;
            let u64_at = |at: usize| u64::from_le_bytes(rec[at..at + 8].try_into().unwrap());
            let u32_at = |at: usize| u32::from_le_bytes(rec[at..at + 4].try_into().unwrap());
            let u16_at = |at: usize| u16::from_le_bytes(rec[at..at + 2].try_into().unwrap());
            match u32_at(L::S_KIND) {
                L::CODE => {
                    let lens = u64_at(L::S_WEIGHT);
                    let (n, f) = ((lens & 0xffff) as usize, (lens >> 16 & 0xffff) as usize);
                    let text = |from: usize, len: usize| {
                        let end = (from + len).min(L::SLOT_BYTES);
                        String::from_utf8_lossy(&rec[from.min(end)..end]).into_owned()
                    };
                    let code = Code {
                        name: text(L::S_TEXT, n),
                        file: text(L::S_TEXT + n, f),
                    };
                    ring.codes.insert(u64_at(L::S_ADDR) as u32, code);
                }
                L::FREE => {
                    if let Some((site, w, n)) = ring.blocks.remove(&u64_at(L::S_ADDR)) {
                        self.sites[site].live -= w as i64;
                        self.sites[site].objects -= n;
                    }
                }
                L::ALLOC => {
                    let n_native = usize::from(u16_at(L::S_N_NATIVE)).min(L::MAX_NATIVE);
                    let n_py = usize::from(u16_at(L::S_N_PY)).min(L::MAX_PY);
                    let native: Vec<u64> =
                        (0..n_native).map(|i| u64_at(L::S_NATIVE + 8 * i)).collect();
                    let python: Vec<(String, String, u32)> = (0..n_py.min(FRAMES))
                        .map(|i| {
                            let id = u32_at(L::S_PY + 8 * i);
                            let line = u32_at(L::S_PY + 8 * i + 4);
                            match ring.codes.get(&id) {
                                Some(c) => (c.file.clone(), c.name.clone(), line),
                                None => ("?".into(), "?".into(), line),
                            }
                        })
                        .collect();
                    let pid = ring.pid;
                    let key = match python.first() {
                        Some((file, function, line)) => Key::Python {
                            ring: r,
                            file: file.clone(),
                            function: function.clone(),
                            line: *line,
                        },
                        None => {
                            let native_only = self.program_frames(r, &native);
                            Key::Native {
                                ring: r,
                                addr: native_only.first().copied().unwrap_or(0),
                            }
                        }
                    };
                    let site = match self.index.get(&key) {
                        Some(&s) => s,
                        None => {
                            self.sites.push(Site {
                                pid,
                                ring: r,
                                live: 0,
                                objects: 0.0,
                                alloc_bytes: 0,
                                allocs: 0.0,
                                samples: 0,
                                channel: None,
                                python,
                                native,
                            });
                            self.index.insert(key, self.sites.len() - 1);
                            self.sites.len() - 1
                        }
                    };
                    let w = u64_at(L::S_WEIGHT);
                    // A sample of `size` bytes stands for w bytes, so for
                    // w / size blocks of its size.
                    let n = w as f64 / u64_at(L::S_SIZE).max(1) as f64;
                    let s = &mut self.sites[site];
                    s.live += w as i64;
                    s.objects += n;
                    s.alloc_bytes += w;
                    s.allocs += n;
                    s.samples += 1;
                    self.rings[r].blocks.insert(u64_at(L::S_ADDR), (site, w, n));
                }
                _ => {}
            }
        }
    }

    /// `frames` less the allocators' own (innermost first): by library,
    /// and by function name, so that the interpreter's allocator, C++'s
    /// `operator new`, PyTorch's CPU allocator or numpy's is never a site.
    fn program_frames(&mut self, r: usize, frames: &[u64]) -> Vec<u64> {
        let mut out = Vec::with_capacity(frames.len());
        for &a in frames {
            let ring = &mut self.rings[r];
            if let Some(&known) = ring.allocator_frames.get(&a) {
                if !known {
                    out.push(a);
                }
                continue;
            }
            let mut map = find_map(&ring.maps, a).cloned();
            if map.is_none() && !ring.maps_read {
                ring.maps_read = true;
                // A process that has exited has none: what was read while
                // it ran is kept.
                let now = read_maps(ring.pid);
                if !now.is_empty() {
                    ring.maps = now;
                }
                map = find_map(&ring.maps, a).cloned();
            }
            let map_known = map.is_some();
            let allocator = map.is_some_and(|m| {
                let lib = file_name(&m.path);
                // A return address: the call is the instruction before it.
                let (function, file) = self
                    .symbols
                    .name(&m, a.saturating_sub(1))
                    .map(|(f, file, _)| (f, file))
                    .unwrap_or_default();
                allocators::is_allocator(lib, &file, &function)
            });
            // An address no mapping held is asked about again next time
            // (a library loaded since).
            if map_known {
                self.rings[r].allocator_frames.insert(a, allocator);
            }
            if !allocator {
                out.push(a);
            }
        }
        out
    }

    /// "3.14", "3.13t": the Python process `pid` runs (its latest
    /// program), where its frames could not be read.
    fn unread_python(&self, ring: usize) -> Option<String> {
        let r = &self.rings[ring];
        let v = r.ring.u32_at(L::H_PY_VERSION);
        let version = format!("{}.{}", v / 100, v % 100);
        match r.ring.u32_at(L::H_PYTHON) {
            L::PY_UNSUPPORTED if v > 0 => Some(version),
            L::PY_UNSUPPORTED => Some("of an unknown version".into()),
            L::PY_FREE_THREADED => Some(format!("{version}t")),
            _ => None,
        }
    }

    /// Names site `s`'s frames (native ones from the process's files).
    fn describe(&mut self, s: usize) -> Described {
        let site = &self.sites[s];
        let pid = site.pid;
        if !site.python.is_empty() {
            let frames: Vec<String> = site
                .python
                .iter()
                .map(|(file, f, line)| format!("{file}:{line} {f}"))
                .collect();
            let (file, function, line) = site.python[0].clone();
            let code = source_line(pid, &file, line);
            return Described {
                function,
                file,
                line,
                frames,
                code,
            };
        }
        let native = site.native.clone();
        let r = site.ring;
        let program = self.program_frames(r, &native);
        let maps = self.rings[r].maps.clone();
        let mut frames = Vec::new();
        let mut first: Option<(String, String, u32)> = None;
        for &a in program.iter().take(FRAMES) {
            // A return address: the call is the instruction before it.
            let named = find_map(&maps, a).and_then(|m| self.symbols.name(m, a.saturating_sub(1)));
            let (function, file, line) =
                named.unwrap_or_else(|| (format!("{a:#x}"), String::new(), 0));
            frames.push(match (file.is_empty(), line) {
                (true, _) => function.clone(),
                (false, 0) => format!("{function} ({file})"),
                (false, _) => format!("{file}:{line} {function}"),
            });
            first.get_or_insert((function, file, line));
        }
        let (function, file, line) = first.unwrap_or_else(|| ("?".into(), String::new(), 0));
        let code = (!file.is_empty())
            .then(|| source_line(pid, &file, line))
            .flatten();
        Described {
            function,
            file,
            line,
            frames,
            code,
        }
    }
}

impl Probe for SitesProbe {
    fn name(&self) -> &'static str {
        "sites"
    }

    fn channels(&self) -> Vec<ChannelSpec> {
        vec![catalog::spec("sites.dropped")]
    }

    fn read(&mut self, out: &mut [f64]) -> Result<(), ProbeError> {
        self.open_new();
        for r in 0..self.rings.len() {
            self.drain(r);
        }
        out[0] = self
            .rings
            .iter()
            .map(|r| r.ring.u64_at(L::H_DROPPED) as f64)
            .sum();
        let mut notes = Vec::new();
        for r in &mut self.rings {
            let py = r.ring.u32_at(L::H_PYTHON);
            if matches!(py, L::PY_UNSUPPORTED | L::PY_FREE_THREADED) && !r.python_told {
                r.python_told = true;
                let v = r.ring.u32_at(L::H_PY_VERSION);
                let what = if py == L::PY_FREE_THREADED {
                    format!("a free-threaded Python {}.{} (3.13t)", v / 100, v % 100)
                } else {
                    format!("Python {}.{}", v / 100, v % 100)
                };
                notes.push(format!(
                    "sites: process {} runs {what}, whose frames flatline cannot read (it reads \
                     CPython 3.10 to 3.13, GIL builds): its sites are native frames, not lines",
                    r.pid,
                ));
            }
            if !r.attach_told && r.ring.u32_at(L::H_ATTACHED) == 1 {
                r.attach_told = true;
                notes.push(format!(
                    "sites: attached to process {} while it ran: its sites count what it \
                     allocated from then on (what it held before is not known, and a free of an \
                     older block is not taken from any site); its exact count of bytes held \
                     (alloc_live) is not kept",
                    r.pid
                ));
            }
            let dropped = r.ring.u64_at(L::H_DROPPED);
            if dropped > 0 && r.dropped_told == 0 {
                r.dropped_told = dropped;
                notes.push(format!(
                    "sites: process {}'s ring was full and dropped {dropped} records (flatline \
                     read it too slowly); its sites' bytes are estimates from fewer samples",
                    r.pid
                ));
            }
        }
        for n in notes {
            self.emit(EventKind::Note(n));
        }
        Ok(())
    }

    fn grows(&self) -> bool {
        true
    }

    fn dynamic(&mut self, ch: &mut DynamicChannels<'_>) {
        // Which rings' processes are gone, their rings read to the end. A
        // process gone holds nothing: it gets no channel now (a test's
        // short-lived children, a job's helper commands), and those it has
        // end at this reading, after their last values.
        let gone: Vec<bool> = self
            .rings
            .iter()
            .map(|r| r.ended || (!running(r.pid) && !r.ring.ready(r.head)))
            .collect();
        // Each process's exact count, once it moved 1 MiB from what it
        // started with (a shell or a short helper the job runs gets none,
        // nor a forked worker that only holds its parent's).
        for (ring, &gone) in self.rings.iter_mut().zip(&gone) {
            let live = ring.ring.u64_at(L::H_LIVE) as i64;
            let own = live - ring.ring.u64_at(L::H_INHERITED) as i64;
            if ring.live_channel.is_none() && !gone && own.abs() >= SITE_BYTES {
                let pid = ring.pid;
                let stem = ch.free_stem(&format!("pid{pid}"), "alloc_live");
                let spec = catalog::spec(&format!("{stem}.alloc_live"))
                    .with_label("pid", pid.to_string())
                    .with_label("role", "alloc");
                ring.live_channel = ch.add(vec![spec]);
            }
            if let Some(p) = ring.live_channel {
                ch.set(p, live as f64);
            }
        }
        // Sites that now hold enough, most first.
        let mut new: Vec<(i64, usize)> = self
            .sites
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                s.channel.is_none() && !gone[s.ring] && s.live >= SITE_BYTES && s.samples >= 2
            })
            .map(|(i, s)| (s.live, i))
            .collect();
        new.sort_unstable_by(|a, b| b.cmp(a));
        for (_, s) in new {
            if self.site_channels >= MAX_SITE_CHANNELS {
                if !self.told_full {
                    self.told_full = true;
                    self.emit(EventKind::Note(format!(
                        "sites: {MAX_SITE_CHANNELS} sites have channels; later ones are not kept"
                    )));
                }
                break;
            }
            let d = self.describe(s);
            let pid = self.sites[s].pid;
            let plain = format!("site{}", self.site_channels);
            let stem = if ch.is_taken(&format!("{plain}.live")) {
                ch.free_stem("site0", "live")
            } else {
                plain
            };
            // A role of their own: Prometheus's rules over the job's own
            // channels (`role=""`) and the processes panel pass them by.
            let mut spec = catalog::spec(&format!("{stem}.live"))
                .with_label("pid", pid.to_string())
                .with_label("role", "site")
                .with_label("function", d.function.clone())
                .with_label("file", d.file.clone())
                .with_label("line", d.line.to_string())
                .with_label("frames", d.frames.join("\n"));
            if let Some(code) = &d.code {
                spec = spec.with_label("code", code.clone());
            }
            if self.sites[s].python.is_empty()
                && let Some(v) = self.unread_python(self.sites[s].ring)
            {
                // A native site in a Python whose frames were not read:
                // the line is not known, and the receipt says so first.
                spec = spec.with_label("python_unread", v);
            }
            // Its counts carry only what names them: the labels live on
            // `.live`, one channel a site.
            let count = |leaf: &str| {
                catalog::spec(&format!("{stem}.{leaf}"))
                    .with_label("pid", pid.to_string())
                    .with_label("role", "site")
            };
            // Its counts only while the sample has room to spare: a site's
            // bytes, and the processes' channels, come first.
            let specs = if ch.room() >= 4 + COUNT_RESERVE {
                vec![
                    spec,
                    count("objects"),
                    count("alloc_bytes"),
                    count("allocs"),
                ]
            } else {
                vec![spec]
            };
            let n = specs.len();
            if let Some(p) = ch.add(specs) {
                self.sites[s].channel = Some((p, n));
                self.site_channels += 1;
            }
        }
        for s in &self.sites {
            if let Some((p, n)) = s.channel {
                ch.set(p, s.live.max(0) as f64);
                if n == 4 {
                    ch.set(p + 1, s.objects.max(0.0).round());
                    ch.set(p + 2, s.alloc_bytes as f64);
                    ch.set(p + 3, s.allocs.round());
                }
            }
        }
        // A process gone, its ring read to the end: its channels end.
        let mut ended = std::mem::take(&mut self.to_end);
        for (i, r) in self.rings.iter_mut().enumerate() {
            if gone[i] && !r.ended {
                r.ended = true;
                ended.extend(r.live_channel.take());
                for s in self.sites.iter_mut().filter(|s| s.ring == i) {
                    ended.extend(s.channel.take().into_iter().flat_map(|(p, n)| p..p + n));
                }
            }
        }
        if !ended.is_empty() {
            ch.end(&ended);
        }
    }
}

/// Whether `pid` runs: not gone, nor a zombie (exited, its parent has not
/// waited for it yet; its maps are empty).
fn running(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // "pid (comm) S …": the state follows the last ')', comm may hold any.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    !matches!(state, Some("Z" | "X"))
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn find_map(maps: &[Map], addr: u64) -> Option<&Map> {
    maps.iter().find(|m| m.start <= addr && addr < m.end)
}

/// The pid this process knows a ring's writer by: the one it wrote where
/// it shares this process's pid namespace (or the namespace is unknown),
/// else the process in namespace `ns` whose innermost pid is `pid` (the
/// last of its status's `NSpid`); None where none runs.
fn host_pid(pid: u32, ns: u64) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let ino = |p: &Path| std::fs::metadata(p).map(|m| m.ino()).ok();
    if ns == 0 || ino(Path::new("/proc/self/ns/pid")).is_none_or(|o| o == ns) {
        return Some(pid);
    }
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse::<u32>().ok()?, e.path())))
        .filter(|(_, path)| ino(&path.join("ns/pid")) == Some(ns))
        .find_map(|(p, path)| {
            let status = std::fs::read_to_string(path.join("status")).ok()?;
            let inner: u32 = status
                .lines()
                .find_map(|l| l.strip_prefix("NSpid:"))?
                .split_whitespace()
                .last()?
                .parse()
                .ok()?;
            (inner == pid).then_some(p)
        })
}

/// Where `pid`'s own paths are opened from: its root (`/proc/PID/root`)
/// where it is in another mount namespace (a container), else "" (this
/// process's paths are its).
fn root_of(pid: u32) -> String {
    let ours = std::fs::read_link("/proc/self/ns/mnt").ok();
    let theirs = std::fs::read_link(format!("/proc/{pid}/ns/mnt")).ok();
    match (ours, theirs) {
        (Some(a), Some(b)) if a != b => format!("/proc/{pid}/root"),
        _ => String::new(),
    }
}

/// The file-backed, executable mappings of `pid`, their paths as this
/// process opens them.
fn read_maps(pid: u32) -> Vec<Map> {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return Vec::new();
    };
    let root = root_of(pid);
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (range, perms, offset) = (f.next()?, f.next()?, f.next()?);
            let path = f.nth(2)?;
            if !perms.contains('x') || !path.starts_with('/') {
                return None;
            }
            let (a, b) = range.split_once('-')?;
            Some(Map {
                start: u64::from_str_radix(a, 16).ok()?,
                end: u64::from_str_radix(b, 16).ok()?,
                offset: u64::from_str_radix(offset, 16).ok()?,
                path: format!("{root}{path}"),
            })
        })
        .collect()
}

/// Line `line` of `file` (relative to the process's working folder where
/// it is not absolute), trimmed; None where it cannot be read.
fn source_line(pid: u32, file: &str, line: u32) -> Option<String> {
    if line == 0 || file.starts_with('<') {
        return None;
    }
    let path = if Path::new(file).is_absolute() {
        PathBuf::from(file)
    } else {
        std::fs::read_link(format!("/proc/{pid}/cwd"))
            .ok()?
            .join(file)
    };
    let path = PathBuf::from(format!("{}{}", root_of(pid), path.display()));
    let text = std::fs::read_to_string(path).ok()?;
    let l = text.lines().nth(line as usize - 1)?.trim();
    (!l.is_empty()).then(|| l.chars().take(160).collect())
}

/// A file's symbols and DWARF, and its loadable segments.
type Symbolized = (addr2line::Loader, Vec<Segment>);

/// Files' symbols and DWARF, loaded once each (None: not an ELF file, or
/// one that could not be read).
#[derive(Default)]
struct Symbols {
    files: HashMap<String, Option<Symbolized>>,
}

impl std::fmt::Debug for Symbols {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Symbols({} files)", self.files.len())
    }
}

impl Symbols {
    /// (function, file, line) of address `addr` in mapping `m`.
    fn name(&mut self, m: &Map, addr: u64) -> Option<(String, String, u32)> {
        let entry = self.files.entry(m.path.clone()).or_insert_with(|| {
            let mut loads = elf_segments(Path::new(&m.path))?;
            loads.retain(|s| s.kind == 1);
            let loader = addr2line::Loader::new(&m.path).ok()?;
            Some((loader, loads))
        });
        let (loader, loads) = entry.as_ref()?;
        // Address → file offset → the address the file states.
        let offset = addr - m.start + m.offset;
        let seg = loads
            .iter()
            .find(|s| s.offset <= offset && offset < s.offset + s.file_size)?;
        let probe = offset - seg.offset + seg.vaddr;
        let mut function = None;
        let mut location = None;
        if let Ok(mut frames) = loader.find_frames(probe) {
            while let Ok(Some(f)) = frames.next() {
                // The innermost frame that names a function: with inlining,
                // the function the call is written in.
                if function.is_none() {
                    function = f
                        .function
                        .as_ref()
                        .and_then(|n| n.demangle().ok().map(|s| s.into_owned()));
                    location = f
                        .location
                        .as_ref()
                        .map(|l| (l.file.unwrap_or("").to_owned(), l.line.unwrap_or(0)));
                }
            }
        }
        let function = function.or_else(|| {
            loader
                .find_symbol(probe)
                .map(|s| addr2line::demangle_auto(s.into(), None).into_owned())
        })?;
        let (file, line) = location.unwrap_or_else(|| (file_name(&m.path).to_owned(), 0));
        Some((function, file, line))
    }
}

/// An ELF program header: its type (`PT_LOAD` 1, `PT_INTERP` 3), where it
/// starts in the file, the address the file states for it, its size in
/// the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub kind: u32,
    pub offset: u64,
    pub vaddr: u64,
    pub file_size: u64,
}

/// The program headers of a 64-bit little-endian ELF file (its header and
/// its table only are read); None for anything else.
pub fn elf_segments(path: &Path) -> Option<Vec<Segment>> {
    use std::io::{Read, Seek};
    let mut head = [0u8; 64];
    let mut f = std::fs::File::open(path).ok()?;
    f.read_exact(&mut head).ok()?;
    if &head[..4] != b"\x7fELF" || head[4] != 2 || head[5] != 1 {
        return None;
    }
    let u16_at = |b: &[u8], at: usize| u16::from_le_bytes([b[at], b[at + 1]]);
    let u64_at = |b: &[u8], at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[at..at + 8]);
        u64::from_le_bytes(w)
    };
    let (phoff, size, n) = (
        u64_at(&head, 32),
        usize::from(u16_at(&head, 54)),
        usize::from(u16_at(&head, 56)),
    );
    if size < 40 {
        return None;
    }
    let mut table = vec![0u8; size * n];
    f.seek(std::io::SeekFrom::Start(phoff)).ok()?;
    f.read_exact(&mut table).ok()?;
    Some(
        table
            .chunks_exact(size)
            .map(|p| Segment {
                kind: u32::from(u16_at(p, 0)) | u32::from(u16_at(p, 2)) << 16,
                offset: u64_at(p, 8),
                vaddr: u64_at(p, 16),
                file_size: u64_at(p, 32),
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child that has exited and not been waited for is a zombie: its
    /// /proc entry stays, its maps are empty, and it runs no longer.
    #[test]
    fn a_zombie_does_not_run_and_this_process_does() {
        assert!(running(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let stat = format!("/proc/{pid}/stat");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::fs::read_to_string(&stat).is_ok_and(|s| !s.contains(") Z ")) {
            assert!(std::time::Instant::now() < deadline, "`true` did not exit");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!running(pid), "{:?}", std::fs::read_to_string(&stat));
        child.wait().unwrap();
        assert!(!running(pid));
    }

    #[test]
    fn this_test_binary_s_segments_are_read_and_a_text_file_is_none() {
        let exe = std::env::current_exe().unwrap();
        let segs = elf_segments(&exe).expect("an ELF file");
        assert!(
            segs.iter().any(|s| s.kind == 1 && s.file_size > 0),
            "{segs:?}"
        );
        assert!(
            segs.iter().any(|s| s.kind == 3),
            "a dynamic executable has an interpreter"
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t.sh"), "#!/bin/sh\necho hi\n").unwrap();
        assert_eq!(elf_segments(&dir.path().join("t.sh")), None);
    }
}
