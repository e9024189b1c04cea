//! The memory limit that will actually kill a job: its cgroup's.
//!
//! A training job in a container, a Slurm allocation or a systemd unit is
//! OOM-killed at its cgroup's limit, long before the host's RAM runs out.
//! This probe finds the watched process's memory cgroup from
//! `/proc/<pid>/cgroup` (v2's `0::/path`, or v1's `memory` hierarchy where a
//! host still mounts one) and reads, at the slow rate:
//! - `cgroup.current`: the memory the cgroup uses now (`memory.current`, v1
//!   `memory.usage_in_bytes`), a level;
//! - `cgroup.max`: the tightest limit on the way from it to the root
//!   (`memory.max`, v1 `memory.limit_in_bytes`), `NaN` where there is none.
//!   The analysis computes time to the limit against it (`analysis::rules`);
//! - `cgroup.oom_kills`: how many processes the kernel's OOM killer has
//!   killed in it (and below it) so far, a counter (`memory.events`'
//!   `oom_kill`, v1 `memory.oom_control`'s), `NaN` where the kernel does
//!   not say;
//! - where the cgroup's files hold them: `cgroup.oom` (v2 `oom`: times it
//!   ran out), `cgroup.max_hits` (v2 `max`, v1 `memory.failcnt`: times its
//!   use reached the limit), `cgroup.high_hits` (v2 `high`: times it was
//!   throttled over `memory.high`), `cgroup.under_oom` (v1: 1 while it is
//!   out of memory), `cgroup.peak` (v2 `memory.peak`, v1
//!   `memory.max_usage_in_bytes`) and `cgroup.pressure` (v2
//!   `memory.pressure`'s `some avg10`: the % of the last 10 s in which
//!   some task waited for memory).
//!
//! `--cgroup DIR` names the folder instead ([`CgroupProbe::at`]): a
//! container's or a pod's, read from the host.

use std::path::{Path, PathBuf};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_channel::Sender;
use flatline_format::{Event, EventKind};

use super::{ChannelSpec, Clock, Kind, Probe, ProbeError, Unavailable, catalog};

pub use flatline_catalog::CGROUP_LIMIT;

/// How many times faster the sampler reads near the edge.
pub const FASTER: u32 = 5;
/// Near the edge: the cgroup's working set (its use less the page cache not
/// in use, `inactive_file`) within this share of its limit, or its trend
/// reaching the limit within [`EDGE_S`]; or its `memory.high`
/// throttling rising, or memory pressure (`some avg10`) at [`EDGE_PRESSURE`]
/// % or more.
pub const EDGE_SHARE: f64 = 0.95;
pub const EDGE_S: f64 = 180.0;
pub const EDGE_PRESSURE: f64 = 10.0;
/// The shortest span of readings a trend to the limit is taken over.
pub const TREND_S: f64 = 2.0;
/// How long after the last sign of the edge the faster rate holds.
pub const EDGE_HOLD_S: f64 = 30.0;

/// Tells the sampler to read faster while the cgroup is near its limit
/// ([`FASTER`] times), and says so in the recording (a `sampling` fact as
/// it begins and as it ends).
#[derive(Debug)]
pub struct Edge {
    pub faster: Arc<AtomicBool>,
    pub events: Option<Sender<Event>>,
    pub clock: Clock,
    /// The last readings of use: (seconds, bytes), oldest first (6 s of
    /// them at the fastest slow rate, 10 Hz).
    recent: [(f64, f64); 64],
    filled: usize,
    last_sign_s: Option<f64>,
    last_high: f64,
}

impl Edge {
    pub fn new(faster: Arc<AtomicBool>, events: Option<Sender<Event>>, clock: Clock) -> Self {
        Self {
            faster,
            events,
            clock,
            recent: [(0.0, 0.0); 64],
            filled: 0,
            last_sign_s: None,
            last_high: f64::NAN,
        }
    }

    /// Weighs one reading: use, limit, `high` events, pressure.
    fn weigh(&mut self, current: f64, limit: f64, high: f64, pressure: f64) {
        let now = self.clock.now_ns() as f64 / 1e9;
        if current.is_finite() {
            if self.filled == self.recent.len() {
                self.recent.rotate_left(1);
                self.filled -= 1;
            }
            self.recent[self.filled] = (now, current);
            self.filled += 1;
        }
        // A trend over 2 s at least: a start-up's first allocations are no
        // course to a limit.
        let (t0, v0) = self.recent[0];
        let rate = if self.filled >= 2 && now - t0 >= TREND_S {
            (current - v0) / (now - t0)
        } else {
            f64::NAN
        };
        let mut why = None;
        if limit.is_finite() && current.is_finite() {
            if current >= EDGE_SHARE * limit {
                why = Some(format!(
                    "the cgroup's memory is {:.0} % of its limit",
                    current / limit * 100.0
                ));
            } else if rate > 0.0 && (limit - current) / rate < EDGE_S {
                why = Some(format!(
                    "the cgroup's memory reaches its limit in {:.0} s at its trend",
                    (limit - current) / rate
                ));
            }
        }
        if why.is_none() && high.is_finite() && self.last_high.is_finite() && high > self.last_high
        {
            why = Some("the cgroup is throttled over memory.high".into());
        }
        if why.is_none() && pressure >= EDGE_PRESSURE {
            why = Some(format!("memory pressure is {pressure:.0} %"));
        }
        if high.is_finite() {
            self.last_high = high;
        }
        if why.is_some() {
            self.last_sign_s = Some(now);
        }
        let want = self.last_sign_s.is_some_and(|s| now - s < EDGE_HOLD_S);
        if want != self.faster.load(Ordering::Relaxed) {
            self.faster.store(want, Ordering::Relaxed);
            let text = match why {
                Some(w) if want => format!("sampling {FASTER}× faster: {w}"),
                _ => format!(
                    "sampling at the usual rate again: no sign of the memory limit for {EDGE_HOLD_S:.0} s"
                ),
            };
            if let Some(tx) = &self.events {
                let _ = tx.try_send(Event {
                    t_ns: self.clock.now_ns(),
                    kind: EventKind::fact(
                        "sampling",
                        text,
                        &[("factor", if want { f64::from(FASTER) } else { 1.0 })],
                    ),
                });
            }
        }
    }
}

/// Why a cgroup folder given (`--cgroup DIR`) cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("{} is not a folder", .0.display())]
    NotADir(PathBuf),
    #[error(
        "{} holds neither memory.current (cgroup v2) nor memory.usage_in_bytes (cgroup v1): not a memory cgroup",
        .0.display()
    )]
    NoMemoryFiles(PathBuf),
}

/// Which hierarchy a cgroup is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

impl Version {
    fn files(self) -> (&'static str, &'static str) {
        match self {
            Version::V2 => ("memory.current", "memory.max"),
            Version::V1 => ("memory.usage_in_bytes", "memory.limit_in_bytes"),
        }
    }

    /// The file whose `oom_kill` line counts the OOM killer's kills.
    fn events(self) -> &'static str {
        match self {
            Version::V2 => "memory.events",
            Version::V1 => "memory.oom_control",
        }
    }
}

/// The memory cgroup named by the text of `/proc/<pid>/cgroup`: v1's
/// `memory` controller where there is one (it is the one that limits memory
/// on a hybrid host), else v2's unified `0::` line.
pub fn parse_proc_cgroup(text: &str) -> Option<(Version, String)> {
    let mut v2 = None;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2 = Some((Version::V2, path.to_owned()));
        } else if controllers.split(',').any(|c| c == "memory") {
            return Some((Version::V1, path.to_owned()));
        }
    }
    v2
}

/// A limit file's value in bytes; `None` for no limit (`max`, or v1's
/// page-rounded `i64::MAX`).
pub fn parse_limit(text: &str) -> Option<f64> {
    let t = text.trim();
    if t == "max" {
        return None;
    }
    let v: u64 = t.parse().ok()?;
    (v < 1 << 60).then_some(v as f64)
}

/// The value of a `key value` line of a flat-keyed cgroup file
/// (`memory.events`, `memory.oom_control`, `memory.stat`).
pub fn keyed(text: &str, key: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key)
            .then(|| v.trim().parse::<u64>().ok())?
            .map(|v| v as f64)
    })
}

/// How one more channel is read from a file of the cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    /// The value of a `key value` line.
    Keyed(&'static str),
    /// The whole file is one number.
    Whole,
    /// `memory.pressure`'s `some avg10=…`, in %.
    Pressure,
}

/// The channels read beyond use, limit and kills: (channel, file, how),
/// each kept where its file exists.
const EXTRA_V2: &[(&str, &str, Read)] = &[
    ("cgroup.oom", "memory.events", Read::Keyed("oom")),
    ("cgroup.max_hits", "memory.events", Read::Keyed("max")),
    ("cgroup.high_hits", "memory.events", Read::Keyed("high")),
    ("cgroup.peak", "memory.peak", Read::Whole),
    ("cgroup.pressure", "memory.pressure", Read::Pressure),
    // What the cgroup's memory is: `memory.stat`'s split (`file` holds the
    // page cache, tmpfs and shared memory, so `shmem` is part of it).
    ("cgroup.anon", "memory.stat", Read::Keyed("anon")),
    ("cgroup.file", "memory.stat", Read::Keyed("file")),
    ("cgroup.shmem", "memory.stat", Read::Keyed("shmem")),
    ("cgroup.kernel", "memory.stat", Read::Keyed("kernel")),
    ("cgroup.sock", "memory.stat", Read::Keyed("sock")),
];
const EXTRA_V1: &[(&str, &str, Read)] = &[
    ("cgroup.max_hits", "memory.failcnt", Read::Whole),
    (
        "cgroup.under_oom",
        "memory.oom_control",
        Read::Keyed("under_oom"),
    ),
    ("cgroup.peak", "memory.max_usage_in_bytes", Read::Whole),
    // v1's hierarchical totals: `rss` is anonymous memory, `cache` the page
    // cache with tmpfs and shared memory.
    ("cgroup.anon", "memory.stat", Read::Keyed("total_rss")),
    ("cgroup.file", "memory.stat", Read::Keyed("total_cache")),
    ("cgroup.shmem", "memory.stat", Read::Keyed("total_shmem")),
    ("cgroup.kernel", "memory.kmem.usage_in_bytes", Read::Whole),
];

/// `some avg10=X` of a PSI file (`memory.pressure`), in %.
pub fn parse_pressure(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_ascii_whitespace()
        .find_map(|f| f.strip_prefix("avg10="))?
        .parse()
        .ok()
}

/// Reads one memory cgroup.
#[derive(Debug)]
pub struct CgroupProbe {
    dir: PathBuf,
    /// The hierarchy's root: the walk for limits stops there.
    root: PathBuf,
    version: Version,
    /// Processes in the cgroup at the start that are neither the job nor
    /// the session running it (see [`strangers`]).
    others: usize,
    /// The channels its files hold beyond the first three.
    extra: Vec<(&'static str, &'static str, Read)>,
    /// Whether it tells the sampler to read faster near the limit.
    edge: Option<Edge>,
}

/// The pids in the cgroup at `dir` and in every cgroup below it (whose
/// memory the cgroup's own counts too).
fn members(dir: &Path, out: &mut Vec<u32>) {
    if let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        out.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                members(&e.path(), out);
            }
        }
    }
}

/// How many processes of the cgroup at `dir` are strangers to the job:
/// neither `pid` nor one of its descendants, nor this process (the watcher)
/// nor one of its ancestors (the shell that started it). Their memory is in
/// `cgroup.current` too, so its growth is not the job's to answer for.
pub fn strangers(proc_root: &Path, dir: &Path, pid: u32) -> usize {
    let ppid = |p: u32| {
        std::fs::read_to_string(proc_root.join(p.to_string()).join("stat"))
            .ok()
            .and_then(|t| super::tree::parse_stat_line(&t))
            .map(|s| s.ppid)
    };
    // The watcher and the chain of processes that started it.
    let mut session = vec![std::process::id()];
    while let Some(&p) = session.last() {
        match ppid(p) {
            Some(pp) if pp > 1 && !session.contains(&pp) && session.len() < 64 => session.push(pp),
            _ => break,
        }
    }
    let of_the_job = |p: u32| {
        let mut at = p;
        for _ in 0..64 {
            if at == pid {
                return true;
            }
            match ppid(at) {
                Some(pp) if pp > 1 && pp != at => at = pp,
                _ => return false,
            }
        }
        false
    };
    let mut all = Vec::new();
    members(dir, &mut all);
    all.into_iter()
        .filter(|&p| !session.contains(&p) && !of_the_job(p))
        .count()
}

impl CgroupProbe {
    /// The memory cgroup of `pid`, under the usual mount point.
    pub fn new(pid: u32) -> Result<Self, Unavailable> {
        Self::find(Path::new("/proc"), Path::new("/sys/fs/cgroup"), pid)
    }

    /// As [`CgroupProbe::new`], with `/proc` and the cgroup mount elsewhere
    /// (tests fake both).
    pub fn find(proc_root: &Path, mount: &Path, pid: u32) -> Result<Self, Unavailable> {
        let na = |why: String| Unavailable::new("cgroup", why);
        let text = std::fs::read_to_string(proc_root.join(pid.to_string()).join("cgroup"))
            .map_err(|e| na(format!("cannot read /proc/{pid}/cgroup: {e}")))?;
        let (version, path) =
            parse_proc_cgroup(&text).ok_or_else(|| na("no memory cgroup listed".into()))?;
        let root = match version {
            Version::V2 => mount.to_owned(),
            Version::V1 => mount.join("memory"),
        };
        let (current, _) = version.files();
        // Inside a cgroup namespace the path seen from /proc may not exist under
        // the mount, whose root is then the job's own cgroup.
        let candidates = [root.join(path.trim_start_matches('/')), root.clone()];
        let dir = candidates
            .into_iter()
            .find(|d| d.join(current).is_file())
            .ok_or_else(|| na(format!("no {current} under {}", root.display())))?;
        let others = strangers(proc_root, &dir, pid);
        Ok(Self::open(dir, root, version, others))
    }

    fn open(dir: PathBuf, root: PathBuf, version: Version, others: usize) -> Self {
        let table = match version {
            Version::V2 => EXTRA_V2,
            Version::V1 => EXTRA_V1,
        };
        let extra = table
            .iter()
            .copied()
            .filter(|(_, file, how)| {
                let text = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
                match how {
                    Read::Keyed(key) => keyed(&text, key).is_some(),
                    Read::Whole => text.trim().parse::<u64>().is_ok(),
                    Read::Pressure => parse_pressure(&text).is_some(),
                }
            })
            .collect();
        Self {
            dir,
            root,
            version,
            others,
            extra,
            edge: None,
        }
    }

    /// The same probe, telling the sampler to read faster near the limit.
    pub fn with_edge(mut self, edge: Edge) -> Self {
        self.edge = Some(edge);
        self
    }

    /// The memory cgroup at `dir` (`--cgroup DIR`): v2 where it holds
    /// `memory.current`, v1 where it holds `memory.usage_in_bytes`. Limits
    /// are looked for up its parents while they hold the limit file; `pid`
    /// (the watched job, if any) decides who is a stranger in it.
    pub fn at(dir: &Path, pid: Option<u32>) -> Result<Self, CgroupError> {
        let version = if dir.join("memory.current").is_file() {
            Version::V2
        } else if dir.join("memory.usage_in_bytes").is_file() {
            Version::V1
        } else if !dir.is_dir() {
            return Err(CgroupError::NotADir(dir.to_owned()));
        } else {
            return Err(CgroupError::NoMemoryFiles(dir.to_owned()));
        };
        let (_, max) = version.files();
        let mut root = dir.to_owned();
        while let Some(p) = root.parent() {
            if !p.join(max).is_file() {
                break;
            }
            root = p.to_owned();
        }
        let others = pid.map_or(0, |pid| strangers(Path::new("/proc"), dir, pid));
        Ok(Self::open(dir.to_owned(), root, version, others))
    }

    /// The folder read.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The tightest limit from the cgroup up to the hierarchy's root.
    fn limit(&self) -> Option<f64> {
        let (_, max) = self.version.files();
        let mut best: Option<f64> = None;
        let mut dir = Some(self.dir.as_path());
        while let Some(d) = dir {
            if let Some(v) = std::fs::read_to_string(d.join(max))
                .ok()
                .and_then(|t| parse_limit(&t))
            {
                best = Some(best.map_or(v, |b: f64| b.min(v)));
            }
            if d == self.root {
                break;
            }
            dir = d.parent().filter(|p| p.starts_with(&self.root));
        }
        best
    }
}

impl Probe for CgroupProbe {
    fn name(&self) -> &'static str {
        "cgroup"
    }

    /// `cgroup.current` is a level, judged as the job's memory, only while
    /// the cgroup is the job's own (a container, a Slurm job, a systemd
    /// scope of its own); one shared with other processes (a desktop
    /// session, a shared container) is a gauge: shown and its trend told,
    /// never called the job's growth. Its limit counts either way.
    fn channels(&self) -> Vec<ChannelSpec> {
        let current = catalog::spec("cgroup.current");
        let current = if self.others == 0 {
            current
        } else {
            current
                .with_kind(Kind::Gauge)
                .with_label("shared_with", format!("{} other processes", self.others))
        };
        let mut v = vec![
            current,
            catalog::spec(CGROUP_LIMIT),
            catalog::spec("cgroup.oom_kills"),
        ];
        v.extend(self.extra.iter().map(|(name, _, _)| catalog::spec(name)));
        v
    }

    fn read(&mut self, out: &mut [f64]) -> Result<(), ProbeError> {
        let (current, _) = self.version.files();
        out[0] = std::fs::read_to_string(self.dir.join(current))
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .map_or(f64::NAN, |v| v as f64);
        out[1] = self.limit().unwrap_or(f64::NAN);
        out[2] = std::fs::read_to_string(self.dir.join(self.version.events()))
            .ok()
            .and_then(|t| keyed(&t, "oom_kill"))
            .unwrap_or(f64::NAN);
        // Each file once a reading, however many channels it holds.
        let mut texts: Vec<(&str, String)> = Vec::with_capacity(4);
        for (slot, (_, file, how)) in out[3..].iter_mut().zip(&self.extra) {
            let at = match texts.iter().position(|(f, _)| f == file) {
                Some(i) => i,
                None => {
                    let t = std::fs::read_to_string(self.dir.join(file)).unwrap_or_default();
                    texts.push((file, t));
                    texts.len() - 1
                }
            };
            let text = &texts[at].1;
            *slot = match how {
                Read::Keyed(key) => keyed(text, key),
                Read::Whole => text.trim().parse::<u64>().ok().map(|v| v as f64),
                Read::Pressure => parse_pressure(text),
            }
            .unwrap_or(f64::NAN);
        }
        if let Some(edge) = &mut self.edge {
            // The working set, as the kubelet counts it: page cache not in
            // use (inactive files) is the kernel's to reclaim, so a
            // container full of cache is not at its edge.
            let read;
            let stat: &str = match texts.iter().find(|(f, _)| *f == "memory.stat") {
                Some((_, t)) => t,
                None => {
                    read =
                        std::fs::read_to_string(self.dir.join("memory.stat")).unwrap_or_default();
                    &read
                }
            };
            let inactive = match self.version {
                Version::V2 => keyed(stat, "inactive_file"),
                Version::V1 => keyed(stat, "total_inactive_file"),
            }
            .unwrap_or(0.0);
            let working = out[0] - inactive;
            let by = |name: &str| {
                self.extra
                    .iter()
                    .position(|(n, ..)| *n == name)
                    .map_or(f64::NAN, |i| out[3 + i])
            };
            edge.weigh(
                working,
                out[1],
                by("cgroup.high_hits"),
                by("cgroup.pressure"),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// v2's `memory.events` and v1's `memory.oom_control` both count kills
    /// on an `oom_kill` line; `oom_kill_disable` and `oom_group_kill` are
    /// other lines.
    #[test]
    fn the_oom_kill_count_is_read_from_either_hierarchys_file() {
        let v2 = "low 0\nhigh 4\nmax 9\noom 2\noom_kill 1\noom_group_kill 0\n";
        let v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 5\n";
        assert_eq!(keyed(v2, "oom_kill"), Some(1.0));
        assert_eq!(keyed(v1, "oom_kill"), Some(5.0));
        assert_eq!(keyed(v2, "max"), Some(9.0));
        assert_eq!(keyed("oom_kill_disable 0\n", "oom_kill"), None);
        assert_eq!(keyed("oom_kill many\n", "oom_kill"), None);
    }

    #[test]
    fn the_memory_cgroup_is_found_on_v2_and_hybrid_hosts() {
        assert_eq!(
            parse_proc_cgroup("0::/user.slice/job.scope\n"),
            Some((Version::V2, "/user.slice/job.scope".into()))
        );
        let hybrid = "9:name=systemd:/\n4:memory:/slurm/job_7\n0::/\n";
        assert_eq!(
            parse_proc_cgroup(hybrid),
            Some((Version::V1, "/slurm/job_7".into()))
        );
        assert_eq!(
            parse_proc_cgroup("5:cpu,memory:/a\n"),
            Some((Version::V1, "/a".into()))
        );
        assert_eq!(parse_proc_cgroup("3:cpu:/\n"), None);
        assert_eq!(parse_limit("max\n"), None);
        assert_eq!(parse_limit("9223372036854771712\n"), None);
        assert_eq!(parse_limit("2147483648\n"), Some(2147483648.0));
    }

    /// A fake `/proc/<pid>/cgroup` and cgroup v2 mount: the job's limit is
    /// 3 GiB, its parent's 2 GiB (the tighter one wins), the root has none.
    #[test]
    fn a_faked_cgroup_gives_current_use_and_the_tightest_limit() {
        let tmp = tempfile::tempdir().unwrap();
        let proc_root = tmp.path().join("proc");
        let mount = tmp.path().join("cgroup");
        std::fs::create_dir_all(proc_root.join("77")).unwrap();
        std::fs::write(proc_root.join("77/cgroup"), "0::/train.slice/job\n").unwrap();
        let job = mount.join("train.slice/job");
        std::fs::create_dir_all(&job).unwrap();
        std::fs::write(mount.join("memory.max"), "max\n").unwrap();
        std::fs::write(mount.join("train.slice/memory.max"), "2147483648\n").unwrap();
        std::fs::write(job.join("memory.max"), "3221225472\n").unwrap();
        std::fs::write(job.join("memory.current"), "1048576\n").unwrap();
        std::fs::write(
            job.join("memory.events"),
            "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n",
        )
        .unwrap();

        let mut p = CgroupProbe::find(&proc_root, &mount, 77).unwrap();
        assert_eq!(p.dir(), job);
        assert_eq!(
            p.channels()[0].kind,
            Kind::Level,
            "no cgroup.procs: no strangers"
        );
        let mut out = [0.0; 3];
        p.read(&mut out).unwrap();
        assert_eq!(out, [1048576.0, 2147483648.0, 2.0]);

        // The limit is lifted: no limit reads as NaN (the RAM bounds it then);
        // a kernel that keeps no events says no count.
        std::fs::write(mount.join("train.slice/memory.max"), "max\n").unwrap();
        std::fs::write(job.join("memory.max"), "max\n").unwrap();
        std::fs::remove_file(job.join("memory.events")).unwrap();
        p.read(&mut out).unwrap();
        assert!(out[1].is_nan() && out[2].is_nan(), "{out:?}");

        // A process whose cgroup has no memory files is no error, just absent.
        std::fs::write(proc_root.join("77/cgroup"), "0::/elsewhere\n").unwrap();
        std::fs::remove_file(job.join("memory.current")).unwrap();
        let err = CgroupProbe::find(&proc_root, &mount, 77).unwrap_err();
        assert!(err.reason.contains("memory.current"), "{}", err.reason);
    }

    /// A cgroup shared with processes outside the job: its memory is
    /// context, not the job's level.
    #[test]
    fn a_cgroup_shared_with_strangers_is_a_gauge() {
        let tmp = tempfile::tempdir().unwrap();
        let proc_root = tmp.path().join("proc");
        let mount = tmp.path().join("cgroup");
        let stat = |pid: u32, ppid: u32| {
            let d = proc_root.join(pid.to_string());
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(
                d.join("stat"),
                format!("{pid} (p) S {ppid} 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0"),
            )
            .unwrap();
            std::fs::write(
                d.join("cgroup"),
                "0::/job
",
            )
            .unwrap();
        };
        // The job 77, its worker 78 in a child cgroup, and 90, a stranger.
        stat(77, 1);
        stat(78, 77);
        stat(90, 1);
        let job = mount.join("job");
        std::fs::create_dir_all(job.join("workers")).unwrap();
        std::fs::write(job.join("memory.current"), "1048576\n").unwrap();
        std::fs::write(job.join("cgroup.procs"), "77\n").unwrap();
        std::fs::write(job.join("workers/cgroup.procs"), "78\n").unwrap();
        let p = CgroupProbe::find(&proc_root, &mount, 77).unwrap();
        assert_eq!(p.channels()[0].kind, Kind::Level, "the job's own");
        std::fs::write(job.join("cgroup.procs"), "77\n90\n").unwrap();
        let p = CgroupProbe::find(&proc_root, &mount, 77).unwrap();
        let ch = &p.channels()[0];
        assert_eq!(ch.kind, Kind::Gauge);
        assert_eq!(strangers(&proc_root, &job, 77), 1);
    }
}

#[cfg(test)]
mod given_folder {
    use super::*;

    /// `--cgroup DIR` reads a folder by the files it holds: v2's use, its
    /// limit and every event and pressure line; v1's likewise; a folder of
    /// neither is refused, saying why.
    #[test]
    fn a_folder_is_read_as_the_hierarchy_its_files_say() {
        let tmp = tempfile::tempdir().unwrap();
        let pod = tmp.path().join("kubepods/pod1");
        std::fs::create_dir_all(&pod).unwrap();
        std::fs::write(tmp.path().join("kubepods/memory.max"), "4294967296\n").unwrap();
        std::fs::write(pod.join("memory.max"), "max\n").unwrap();
        std::fs::write(pod.join("memory.current"), "1048576\n").unwrap();
        std::fs::write(pod.join("memory.peak"), "2097152\n").unwrap();
        std::fs::write(
            pod.join("memory.events"),
            "low 0\nhigh 7\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n",
        )
        .unwrap();
        std::fs::write(
            pod.join("memory.pressure"),
            "some avg10=12.50 avg60=3.00 avg300=0.61 total=1234\nfull avg10=1.00 avg60=0.00 avg300=0.00 total=99\n",
        )
        .unwrap();
        // A kernel before 5.18 has no `kernel` line: that channel is left out.
        std::fs::write(
            pod.join("memory.stat"),
            "anon 700000\nfile 300000\nkernel_stack 16384\nsock 4096\nshmem 120000\nfile_mapped 8192\ninactive_file 200000\n",
        )
        .unwrap();
        let mut p = CgroupProbe::at(&pod, None).unwrap();
        let names: Vec<String> = p.channels().into_iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            [
                "cgroup.current",
                "cgroup.max",
                "cgroup.oom_kills",
                "cgroup.oom",
                "cgroup.max_hits",
                "cgroup.high_hits",
                "cgroup.peak",
                "cgroup.pressure",
                "cgroup.anon",
                "cgroup.file",
                "cgroup.shmem",
                "cgroup.sock"
            ]
        );
        let mut out = vec![0.0; names.len()];
        p.read(&mut out).unwrap();
        assert_eq!(
            out,
            [
                1048576.0,
                4294967296.0,
                1.0,
                1.0,
                3.0,
                7.0,
                2097152.0,
                12.5,
                700000.0,
                300000.0,
                120000.0,
                4096.0
            ],
            "the parent's limit counts: it holds memory.max"
        );

        let v1 = tmp.path().join("memory/docker/abc");
        std::fs::create_dir_all(&v1).unwrap();
        std::fs::write(v1.join("memory.usage_in_bytes"), "4096\n").unwrap();
        std::fs::write(v1.join("memory.limit_in_bytes"), "8192\n").unwrap();
        std::fs::write(v1.join("memory.failcnt"), "5\n").unwrap();
        std::fs::write(
            v1.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        )
        .unwrap();
        // v1 reads the hierarchical totals, not the cgroup's own lines.
        std::fs::write(
            v1.join("memory.stat"),
            "cache 1\nrss 2\nshmem 3\ntotal_cache 3072\ntotal_rss 1024\ntotal_shmem 512\n",
        )
        .unwrap();
        std::fs::write(v1.join("memory.kmem.usage_in_bytes"), "256\n").unwrap();
        let mut p = CgroupProbe::at(&v1, None).unwrap();
        let names: Vec<String> = p.channels().into_iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            [
                "cgroup.current",
                "cgroup.max",
                "cgroup.oom_kills",
                "cgroup.max_hits",
                "cgroup.under_oom",
                "cgroup.anon",
                "cgroup.file",
                "cgroup.shmem",
                "cgroup.kernel"
            ]
        );
        let mut out = vec![0.0; names.len()];
        p.read(&mut out).unwrap();
        assert_eq!(
            out,
            [4096.0, 8192.0, 2.0, 5.0, 0.0, 1024.0, 3072.0, 512.0, 256.0]
        );

        let err = CgroupProbe::at(tmp.path(), None).unwrap_err();
        assert!(err.to_string().contains("not a memory cgroup"), "{err}");
        let err = CgroupProbe::at(&tmp.path().join("nope"), None).unwrap_err();
        assert!(err.to_string().contains("is not a folder"), "{err}");
        assert_eq!(parse_pressure("full avg10=1.00\n"), None);
    }
}

#[cfg(test)]
mod edge {
    use super::*;

    /// Near the limit, or under pressure, the sampler is told to read
    /// faster, once, and the recording is told why.
    #[test]
    fn the_edge_is_near_the_limit_or_under_pressure() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let flag = Arc::new(AtomicBool::new(false));
        let mut e = Edge::new(flag.clone(), Some(tx), Clock::start());
        e.weigh(50.0, 100.0, 0.0, 0.0);
        assert!(
            !flag.load(Ordering::Relaxed),
            "half the limit, no trend yet"
        );
        e.weigh(96.0, 100.0, 0.0, 0.0);
        assert!(flag.load(Ordering::Relaxed));
        let ev = rx.try_recv().unwrap();
        let EventKind::Fact {
            kind,
            text,
            figures,
            ..
        } = ev.kind
        else {
            panic!("a fact")
        };
        assert_eq!(kind, "sampling");
        assert!(
            text.contains("5× faster") && text.contains("96 %"),
            "{text}"
        );
        assert_eq!(figures["factor"], 5.0);
        e.weigh(96.0, 100.0, 0.0, 0.0);
        assert!(rx.try_recv().is_err(), "told once, as it begins");

        let flag = Arc::new(AtomicBool::new(false));
        let mut e = Edge::new(flag.clone(), None, Clock::start());
        e.weigh(10.0, f64::NAN, 0.0, 25.0);
        assert!(flag.load(Ordering::Relaxed), "pressure alone, no limit");
        let flag = Arc::new(AtomicBool::new(false));
        let mut e = Edge::new(flag.clone(), None, Clock::start());
        e.weigh(10.0, f64::NAN, 3.0, 0.0);
        assert!(
            !flag.load(Ordering::Relaxed),
            "a first high count is no rise"
        );
        e.weigh(10.0, f64::NAN, 4.0, 0.0);
        assert!(flag.load(Ordering::Relaxed), "memory.high throttling rose");
    }
}
