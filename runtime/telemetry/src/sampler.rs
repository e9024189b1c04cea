//! The sampler: named threads that read the probes and stream [`Sample`]s
//! over a bounded `crossbeam-channel`.
//!
//! * `flatline-sampler` reads the fast probes (allocator, malloc, `/proc`,
//!   workload progress) at `hz`, adds the latest slow readings, and
//!   `try_send`s the sample. A full channel drops the sample and counts it;
//!   the thread never blocks on its consumer. It allocates nothing in steady
//!   state: it reports its own allocation calls as `telemetry.sampler_allocs`
//!   so anyone can check.
//! * `flatline-slow-probes` reads the probes whose calls are slow or
//!   allocate (NVML, sysinfo) at `slow_hz` (2 Hz by default) and publishes
//!   their values through a seqlock of atomics, so a 30 ms NVML call never
//!   holds back a 100 Hz tick. A slow channel carries a value only in the
//!   sample that follows a fresh reading, `NaN` otherwise.
//!
//! Both are observer threads (see [`super::alloc::mark_observer_thread`]).
//! [`Sampler::stop`] (or dropping the [`Sampler`]) sends the control message
//! that ends them cleanly.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError};

use super::alloc::{AllocProbe, mark_observer_thread, thread_allocs};
use super::cgroup::CgroupProbe;
use super::dynamic::{DynamicChannels, Grown, SchemaFeed};
use super::gpu::{GpuFacts, GpuProbe};
use super::malloc::MallocProbe;
use super::procfs::{ProcProbe, ProcTarget};
use super::system::SysProbe;
use super::tree::TreeProbe;
use super::work::{WorkProbe, WorkProgress};
use super::{Clock, MAX_CHANNELS, Probe, ProbeError, Sample, Schema, Unavailable};

/// Which process the telemetry describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// This process: the built-in workloads run here.
    SelfProcess,
    /// Another process, by PID (`flatline watch`).
    Pid(u32),
}

impl Target {
    fn pid(self) -> u32 {
        match self {
            Target::SelfProcess => std::process::id(),
            Target::Pid(pid) => pid,
        }
    }
}

/// Settings of a [`Sampler`].
#[derive(Debug, Clone)]
pub struct SamplerConfig {
    /// Samples per second of the fast probes.
    pub hz: f64,
    /// Samples the channel holds before the sampler starts dropping.
    pub capacity: usize,
    pub target: Target,
    /// Readings per second of the slow probes (GPU, sysinfo).
    pub slow_hz: f64,
    /// Try NVML for `gpu<i>.*`.
    pub gpu: bool,
    /// Read host CPU and memory through sysinfo.
    pub system: bool,
    /// Progress counters of a workload running in this process.
    pub progress: Option<Arc<WorkProgress>>,
    /// The stream's clock, when something (a step log) must stamp events
    /// before the sampler starts; by default one starts with the sampler.
    pub clock: Option<Clock>,
    /// Watch the target's descendants too (`tree.*`, and with
    /// `per_process`, `pid<N>.*` for each process while it lives).
    pub tree: bool,
    pub per_process: bool,
    /// Which memory cgroup to read (`cgroup.*`).
    pub cgroup: CgroupSource,
    /// Where probes send what happens (a process of the tree starts or
    /// exits); `None` drops it.
    pub events: Option<Sender<flatline_format::Event>>,
    /// The job's logged PyTorch reserved bytes, from which the GPU probe
    /// derives `gpu.other`.
    pub torch: Option<super::torch::TorchSeen>,
    /// The folder where a job started with the allocation-site library
    /// writes its rings (`watch --sites`): `site<N>.live` and
    /// `pid<N>.alloc_live` (see [`super::sites`]).
    pub sites: Option<std::path::PathBuf>,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        Self {
            hz: 100.0,
            capacity: 4096,
            target: Target::SelfProcess,
            slow_hz: 2.0,
            gpu: true,
            system: true,
            progress: None,
            clock: None,
            tree: false,
            per_process: true,
            cgroup: CgroupSource::OfTarget,
            events: None,
            torch: None,
            sites: None,
        }
    }
}

/// Which memory cgroup the sampler reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupSource {
    /// None.
    Off,
    /// The watched process's own, found from `/proc/<pid>/cgroup`.
    OfTarget,
    /// The folder given (`--cgroup DIR`): a container's or a pod's.
    Dir(std::path::PathBuf),
}

/// Why telemetry could not start.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("sampling rate {0} Hz is out of range (0 < Hz <= 10000)")]
    BadRate(f64),
    #[error("channel capacity must be at least 1")]
    BadCapacity,
    #[error("cannot watch process {pid}: {reason}")]
    Target { pid: u32, reason: String },
    #[error("cannot start the sampler thread: {0}")]
    Spawn(std::io::Error),
    #[error("--cgroup: {0}")]
    Cgroup(#[from] super::cgroup::CgroupError),
}

/// How the sampler thread ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplerExit {
    /// Stopped by its control message.
    Stopped,
    /// The watched process exited; the samples before that were sent.
    TargetExited { pid: u32 },
    /// The receiving end of the channel was dropped.
    ReceiverGone,
    /// The sampler thread panicked (a bug).
    Panicked,
}

/// A running telemetry stream: what it carries, and the receiving end.
#[derive(Debug)]
pub struct Telemetry {
    pub schema: Schema,
    pub unavailable: Vec<Unavailable>,
    pub gpu: Option<GpuFacts>,
    pub samples: Receiver<Sample>,
    /// Channels that join and end while the stream runs (see
    /// [`super::dynamic`]): take the changes up to each sample before using it.
    pub changes: SchemaFeed,
    pub sampler: Sampler,
}

#[derive(Debug)]
struct Shared {
    /// Time zero of every sample's `t_ns`.
    start: Instant,
    produced: AtomicU64,
    dropped: AtomicU64,
    stop_slow: AtomicBool,
    target_gone: AtomicBool,
    /// The sampling thread has ended.
    ended: AtomicBool,
    /// What growing probes added, ended and read (see [`super::dynamic`]).
    grown: Mutex<Grown>,
    changes: SchemaFeed,
    /// Near a memory limit: both loops read [`super::cgroup::FASTER`] times
    /// faster (see [`super::cgroup::Edge`]).
    faster: Arc<AtomicBool>,
}

/// How far a sampler has got, for a thread that does not own it (a window
/// that draws only when there is something new).
#[derive(Debug, Clone)]
pub struct Progress {
    shared: Arc<Shared>,
}

impl Progress {
    /// Samples produced so far (sent or dropped).
    pub fn produced(&self) -> u64 {
        self.shared.produced.load(Ordering::Relaxed)
    }

    /// Samples dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Whether the sampling thread has ended (its last sample is sent).
    pub fn ended(&self) -> bool {
        self.shared.ended.load(Ordering::Acquire)
    }
}

/// Handle to the sampler threads. Dropping it stops them.
#[derive(Debug)]
pub struct Sampler {
    control: Sender<()>,
    fast: Option<JoinHandle<SamplerExit>>,
    slow: Option<JoinHandle<()>>,
    shared: Arc<Shared>,
}

impl Sampler {
    /// Samples sent so far.
    pub fn produced(&self) -> u64 {
        self.shared.produced.load(Ordering::Relaxed)
    }

    /// Nanoseconds since time zero of the samples' `t_ns`: use it to stamp
    /// events so they line up with the samples.
    pub fn elapsed_ns(&self) -> u64 {
        self.clock().now_ns()
    }

    /// The samples' clock, to hand to a thread that stamps events.
    pub fn clock(&self) -> Clock {
        Clock {
            start: self.shared.start,
        }
    }

    /// A handle through which another thread can grow the stream's schema.
    pub fn grow(&self) -> GrowHandle {
        GrowHandle {
            shared: self.shared.clone(),
        }
    }

    /// Samples dropped so far because the channel was full.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// True once the sampler thread has ended on its own (target exited,
    /// receiver gone).
    /// What another thread may ask of this sampler's progress.
    pub fn progress(&self) -> Progress {
        Progress {
            shared: self.shared.clone(),
        }
    }

    pub fn is_finished(&self) -> bool {
        self.shared.ended.load(Ordering::Acquire)
            || self.fast.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Stops both threads and says how the sampler ended.
    pub fn stop(mut self) -> SamplerExit {
        self.shutdown()
    }

    fn shutdown(&mut self) -> SamplerExit {
        let _ = self.control.try_send(());
        let exit = match self.fast.take() {
            Some(h) => {
                h.thread().unpark();
                h.join().unwrap_or(SamplerExit::Panicked)
            }
            None => SamplerExit::Stopped,
        };
        self.shared.stop_slow.store(true, Ordering::Relaxed);
        if let Some(h) = self.slow.take() {
            h.thread().unpark();
            let _ = h.join();
        }
        exit
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Lets a thread other than the slow-probe thread (the reader of a job's
/// printed output) add, end and set channels of a running stream, under the
/// same lock the sampler thread only tries.
#[derive(Debug, Clone)]
pub struct GrowHandle {
    shared: Arc<Shared>,
}

impl GrowHandle {
    /// Runs `f` with the stream's growing channels; hold it briefly.
    pub fn with<R>(&self, f: impl FnOnce(&mut DynamicChannels<'_>) -> R) -> R {
        let mut grown = self
            .shared
            .grown
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut DynamicChannels { grown: &mut grown })
    }
}

/// Latest slow readings, published by the slow thread, read by the fast one.
/// A seqlock: odd `seq` while writing; a reader that sees `seq` change under
/// it skips this tick and picks the values up on the next.
struct SlowSlots {
    seq: AtomicU64,
    values: Box<[AtomicU64]>,
}

impl SlowSlots {
    fn new(n: usize) -> Self {
        Self {
            seq: AtomicU64::new(0),
            values: (0..n).map(|_| AtomicU64::new(f64::NAN.to_bits())).collect(),
        }
    }

    fn publish(&self, values: &[f64]) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s + 1, Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::Release);
        for (slot, v) in self.values.iter().zip(values) {
            slot.store(v.to_bits(), Ordering::Relaxed);
        }
        self.seq.store(s + 2, Ordering::Release);
    }

    /// Copies the values into `out` if a complete reading newer than `*seen`
    /// is there; returns whether it did.
    fn take_new(&self, seen: &mut u64, out: &mut [f64]) -> bool {
        let s1 = self.seq.load(Ordering::Acquire);
        if s1 % 2 == 1 || s1 == *seen {
            return false;
        }
        for (o, slot) in out.iter_mut().zip(self.values.iter()) {
            *o = f64::from_bits(slot.load(Ordering::Relaxed));
        }
        std::sync::atomic::fence(Ordering::Acquire);
        if self.seq.load(Ordering::Relaxed) != s1 {
            out.fill(f64::NAN);
            return false;
        }
        *seen = s1;
        true
    }
}

type Placed = (Box<dyn Probe>, Range<usize>);

/// Places probes one after another in the schema; a probe whose channels no
/// longer fit in a [`Sample`] is listed as unavailable.
fn place(
    probes: Vec<Box<dyn Probe>>,
    schema: &mut Schema,
    reserve: usize,
    unavailable: &mut Vec<Unavailable>,
) -> Vec<Placed> {
    let mut placed = Vec::new();
    for p in probes {
        let ch = p.channels();
        let start = schema.channels.len();
        if start + ch.len() + reserve > MAX_CHANNELS {
            unavailable.push(Unavailable::new(
                p.name(),
                format!(
                    "its {} channels do not fit in a sample of {MAX_CHANNELS}",
                    ch.len()
                ),
            ));
            continue;
        }
        schema.channels.extend(ch);
        placed.push((p, start..schema.channels.len()));
    }
    placed
}

/// How long samples go on after the target is gone (its own channels read
/// as absent), so that what it printed last, read from its output by
/// another thread, still lands in a sample.
pub const EXIT_GRACE: Duration = Duration::from_secs(1);

/// The shortest periods near a memory limit: the fast loop at most 100 Hz,
/// the slow probes (the tree's walks, NVML) at most 10 Hz, however fast
/// they were asked to go.
const FAST_FASTEST: Duration = Duration::from_millis(10);
const SLOW_FASTEST: Duration = Duration::from_millis(100);

/// The channels the sampler adds about itself.
const OWN_CHANNELS: [&str; 3] = [
    "telemetry.dropped",
    "telemetry.read_ns",
    "telemetry.sampler_allocs",
];

/// Opens every probe that works here, starts the sampler threads, and
/// returns the stream.
pub fn start(config: SamplerConfig) -> Result<Telemetry, TelemetryError> {
    start_with(config, Vec::new())
}

/// Probes, in the order they read.
type Probes = Vec<Box<dyn Probe>>;

/// The probes of the slow thread (the system, the process tree, the
/// kernel's log, allocation sites, the cgroup, the GPU), each that cannot
/// work here listed in `unavailable`; and the GPU's facts, if one is read.
fn slow_probes(
    config: &SamplerConfig,
    pid: u32,
    clock: Clock,
    has_proc: bool,
    faster: &Arc<AtomicBool>,
    unavailable: &mut Vec<Unavailable>,
) -> Result<(Probes, Option<GpuFacts>), TelemetryError> {
    let mut slow: Probes = Vec::new();
    if config.system || !has_proc {
        match SysProbe::new(pid, !has_proc) {
            Ok(p) => slow.push(Box::new(p)),
            Err(u) => unavailable.push(u),
        }
    }
    // The tree probe reads before the GPU probe on the slow thread, and tells
    // it the tree's pids: the GPU memory of the whole tree is summed.
    let tree_pids = super::tree::TreePids::default();
    if config.tree {
        slow.push(Box::new(
            TreeProbe::new(pid, config.per_process, config.events.clone(), clock)
                .sharing(tree_pids.clone()),
        ));
    }
    // What the kernel logs of OOM kills, while a job's tree is watched.
    if config.tree
        && cfg!(target_os = "linux")
        && let Some(tx) = &config.events
    {
        match super::kmsg::KmsgProbe::new(tx.clone(), clock) {
            Ok(p) => slow.push(Box::new(p.with_tree(tree_pids.clone()))),
            Err(u) => unavailable.push(u),
        }
    }
    #[cfg(target_os = "linux")]
    if let Some(dir) = &config.sites {
        slow.push(Box::new(super::sites::SitesProbe::new(
            dir.clone(),
            config.events.clone(),
            clock,
        )));
    }
    let edge = || super::cgroup::Edge::new(faster.clone(), config.events.clone(), clock);
    match &config.cgroup {
        CgroupSource::Off => {}
        CgroupSource::OfTarget if cfg!(target_os = "linux") => match CgroupProbe::new(pid) {
            Ok(p) => slow.push(Box::new(p.with_edge(edge()))),
            Err(u) => unavailable.push(u),
        },
        CgroupSource::OfTarget => {}
        CgroupSource::Dir(dir) => {
            let job = matches!(config.target, Target::Pid(_)).then_some(pid);
            slow.push(Box::new(CgroupProbe::at(dir, job)?.with_edge(edge())));
        }
    }
    let mut gpu = None;
    if config.gpu {
        match GpuProbe::new(pid) {
            Ok(p) => {
                gpu = Some(p.facts().clone());
                let p = if config.tree {
                    p.over_tree(tree_pids, config.per_process)
                } else {
                    p
                };
                let p = match &config.torch {
                    Some(seen) => p.with_torch(seen.clone()),
                    None => p,
                };
                let p = match &config.events {
                    Some(tx) => p.with_events(tx.clone(), clock),
                    None => p,
                };
                slow.push(Box::new(p));
            }
            Err(u) => unavailable.push(u),
        }
    }

    Ok((slow, gpu))
}

/// As [`start`], with more probes read on the fast thread after the built-in
/// ones (a watched job's step log, say).
pub fn start_with(
    config: SamplerConfig,
    extra: Vec<Box<dyn Probe>>,
) -> Result<Telemetry, TelemetryError> {
    if !(config.hz > 0.0 && config.hz <= 10_000.0) {
        return Err(TelemetryError::BadRate(config.hz));
    }
    if !(config.slow_hz > 0.0 && config.slow_hz <= 10_000.0) {
        return Err(TelemetryError::BadRate(config.slow_hz));
    }
    if config.capacity == 0 {
        return Err(TelemetryError::BadCapacity);
    }
    let pid = config.target.pid();
    let clock = config.clock.unwrap_or_else(Clock::start);
    let mut unavailable = Vec::new();
    let mut fast: Vec<Box<dyn Probe>> = Vec::new();

    // The allocator and malloc describe this process only.
    if config.target == Target::SelfProcess {
        match AllocProbe::new() {
            Ok(p) => fast.push(Box::new(p)),
            Err(u) => unavailable.push(u),
        }
        match MallocProbe::new() {
            Ok(p) => fast.push(Box::new(p)),
            Err(u) => unavailable.push(u),
        }
    }
    let proc_target = match config.target {
        Target::SelfProcess => ProcTarget::SelfProcess,
        Target::Pid(pid) => ProcTarget::Pid(pid),
    };
    let has_proc = match ProcProbe::new(proc_target) {
        Ok(p) => {
            fast.push(Box::new(p));
            true
        }
        Err(u) if cfg!(target_os = "linux") && matches!(config.target, Target::Pid(_)) => {
            return Err(TelemetryError::Target {
                pid,
                reason: u.reason,
            });
        }
        Err(u) => {
            unavailable.push(u);
            false
        }
    };
    if let Some(progress) = &config.progress {
        fast.push(Box::new(WorkProbe::new(progress.clone())));
    }
    fast.extend(extra);
    let faster = Arc::new(AtomicBool::new(false));
    let (slow, gpu) = slow_probes(&config, pid, clock, has_proc, &faster, &mut unavailable)?;
    let mut schema = Schema::default();
    let reserve = OWN_CHANNELS.len();
    let fast = place(fast, &mut schema, reserve, &mut unavailable);
    let slow_start = schema.channels.len();
    let slow = place(slow, &mut schema, reserve, &mut unavailable);
    let slow_range = slow_start..schema.channels.len();
    let own_start = schema.channels.len();
    for name in OWN_CHANNELS {
        schema.channels.push(super::catalog::spec(name));
    }

    let (tx, rx) = crossbeam_channel::bounded(config.capacity);
    let (control_tx, control_rx) = crossbeam_channel::bounded(1);
    let shared = Arc::new(Shared {
        start: clock.zero(),
        produced: AtomicU64::new(0),
        dropped: AtomicU64::new(0),
        stop_slow: AtomicBool::new(false),
        target_gone: AtomicBool::new(false),
        ended: AtomicBool::new(false),
        grown: Mutex::new(Grown::new(&schema)),
        changes: SchemaFeed::default(),
        faster,
    });
    let slots = Arc::new(SlowSlots::new(slow_range.len()));

    let slow_handle = if slow.is_empty() {
        None
    } else {
        let (shared, slots) = (shared.clone(), slots.clone());
        let period = Duration::from_secs_f64(1.0 / config.slow_hz);
        let h = std::thread::Builder::new()
            .name("flatline-slow-probes".into())
            .spawn(move || run_slow(slow, slow_start, &slots, &shared, period))
            .map_err(TelemetryError::Spawn)?;
        Some(h)
    };
    let fast_loop = FastLoop {
        probes: fast,
        slots,
        slow_range,
        own_start,
        fixed: schema.channels.len(),
        len: schema.channels.len(),
        period: Duration::from_secs_f64(1.0 / config.hz),
        shared: shared.clone(),
    };
    let mut sampler = Sampler {
        control: control_tx,
        fast: None,
        slow: slow_handle,
        shared,
    };
    // On a failed spawn, dropping `sampler` stops the slow thread again.
    let fast_handle = std::thread::Builder::new()
        .name("flatline-sampler".into())
        .spawn(move || {
            let shared = fast_loop.shared.clone();
            let exit = fast_loop.run(&tx, &control_rx);
            drop(tx);
            shared.ended.store(true, Ordering::Release);
            exit
        })
        .map_err(TelemetryError::Spawn)?;
    sampler.fast = Some(fast_handle);
    Ok(Telemetry {
        changes: sampler.shared.changes.clone(),
        schema,
        unavailable,
        gpu,
        samples: rx,
        sampler,
    })
}

fn run_slow(
    mut probes: Vec<Placed>,
    base: usize,
    slots: &SlowSlots,
    shared: &Shared,
    period: Duration,
) {
    mark_observer_thread();
    let mut values = vec![f64::NAN; slots.values.len()];
    let mut next = Instant::now();
    while !shared.stop_slow.load(Ordering::Relaxed) {
        for (probe, range) in &mut probes {
            let out = &mut values[range.start - base..range.end - base];
            match probe.read(out) {
                Ok(()) => {}
                Err(ProbeError::Gone { .. }) => {
                    out.fill(f64::NAN);
                    shared.target_gone.store(true, Ordering::Relaxed);
                }
                Err(ProbeError::Failed(_)) => out.fill(f64::NAN),
            }
            if probe.grows() {
                let mut grown = shared
                    .grown
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                probe.dynamic(&mut DynamicChannels { grown: &mut grown });
            }
        }
        slots.publish(&values);
        let period = if shared.faster.load(Ordering::Relaxed) {
            (period / super::cgroup::FASTER).max(SLOW_FASTEST)
        } else {
            period
        };
        next += period;
        let now = Instant::now();
        if next <= now {
            next = now + period;
        }
        // Woken early by `Sampler::shutdown`; spurious wake-ups just re-check.
        while !shared.stop_slow.load(Ordering::Relaxed) {
            let now = Instant::now();
            if now >= next {
                break;
            }
            std::thread::park_timeout(next - now);
        }
    }
}

struct FastLoop {
    probes: Vec<Placed>,
    slots: Arc<SlowSlots>,
    slow_range: Range<usize>,
    own_start: usize,
    /// Channels the stream started with; grown ones follow.
    fixed: usize,
    len: usize,
    period: Duration,
    shared: Arc<Shared>,
}

impl FastLoop {
    /// At the stop: one more sample if a growing channel (a job's printed
    /// metric) was set since the last one, so that the last line a job
    /// printed is in the stream. With `read_probes` false (the target is
    /// gone) its other channels are NaN.
    fn last_sample(&mut self, tx: &Sender<Sample>, seq: u64, read_probes: bool) {
        let Ok(mut grown) = self.shared.grown.lock() else {
            return;
        };
        if !grown.has_fresh_values() {
            return;
        }
        if grown.has_changes() {
            self.len = grown.publish_changes(seq, &self.shared.changes);
        }
        let t_ns = u64::try_from(self.shared.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let mut s = Sample::new(seq, t_ns, self.len);
        grown.take_values(self.fixed, &mut s);
        drop(grown);
        if read_probes {
            let values = s.values_mut();
            for (probe, range) in &mut self.probes {
                if probe.read(&mut values[range.clone()]).is_err() {
                    values[range.clone()].fill(f64::NAN);
                }
            }
        }
        if tx.try_send(s).is_ok() {
            self.shared.produced.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn run(mut self, tx: &Sender<Sample>, control: &Receiver<()>) -> SamplerExit {
        mark_observer_thread();
        let start = self.shared.start;
        let mut next = Instant::now();
        let mut seq = 0u64;
        let mut slow_seen = 0u64;
        // Once the target is gone: when to stop, and how it ended.
        let mut ending: Option<(Instant, SamplerExit)> = None;
        loop {
            let tick = Instant::now();
            let t_ns = u64::try_from(tick.duration_since(start).as_nanos()).unwrap_or(u64::MAX);
            // Grown channels: changes first (so this sample has their width),
            // then their latest values, under one lock the slow thread may hold;
            // if it does, they wait for the next tick.
            let mut s = match self.shared.grown.try_lock() {
                Ok(mut grown) => {
                    if grown.has_changes() {
                        self.len = grown.publish_changes(seq, &self.shared.changes);
                    }
                    let mut s = Sample::new(seq, t_ns, self.len);
                    grown.take_values(self.fixed, &mut s);
                    s
                }
                Err(_) => Sample::new(seq, t_ns, self.len),
            };
            let values = s.values_mut();
            for (probe, range) in &mut self.probes {
                match probe.read(&mut values[range.clone()]) {
                    Ok(()) => {}
                    Err(ProbeError::Gone { pid }) => {
                        values[range.clone()].fill(f64::NAN);
                        ending
                            .get_or_insert((tick + EXIT_GRACE, SamplerExit::TargetExited { pid }));
                    }
                    Err(ProbeError::Failed(_)) => values[range.clone()].fill(f64::NAN),
                }
            }
            if self.shared.target_gone.load(Ordering::Relaxed) {
                // Only the slow probes could tell (no /proc here).
                ending.get_or_insert((tick + EXIT_GRACE, SamplerExit::TargetExited { pid: 0 }));
            }
            if let Some((at, exit)) = ending
                && tick >= at
            {
                // The stream has ended on its own. Readings a job's last
                // printed lines set from now on (it may print as it exits)
                // go out with the stop, in one last sample.
                self.shared.ended.store(true, Ordering::Release);
                if control.recv().is_ok() {
                    self.last_sample(tx, seq, false);
                }
                return exit;
            }
            self.slots
                .take_new(&mut slow_seen, &mut values[self.slow_range.clone()]);
            let own = &mut values[self.own_start..];
            own[0] = self.shared.dropped.load(Ordering::Relaxed) as f64;
            own[1] = tick.elapsed().as_nanos() as f64;
            own[2] = thread_allocs() as f64;
            match tx.try_send(s) {
                Ok(()) => {
                    self.shared.produced.fetch_add(1, Ordering::Relaxed);
                }
                Err(TrySendError::Full(_)) => {
                    self.shared.dropped.fetch_add(1, Ordering::Relaxed);
                }
                Err(TrySendError::Disconnected(_)) => return SamplerExit::ReceiverGone,
            }
            seq += 1;
            let period = if self.shared.faster.load(Ordering::Relaxed) {
                (self.period / super::cgroup::FASTER).max(FAST_FASTEST)
            } else {
                self.period
            };
            next += period;
            let now = Instant::now();
            if next <= now {
                // Fell behind (a slow read, a descheduled thread): skip the missed
                // ticks rather than firing a burst to catch up.
                let behind = now.duration_since(next).as_nanos() / period.as_nanos().max(1);
                next += period * (behind as u32 + 1);
            }
            // Sleep until the next tick, checking for the control message. A
            // blocking `recv_deadline` would do the same, but crossbeam sets up its
            // waiting context lazily (an allocation) at the first wait that really
            // blocks, which on a loaded machine can come late into the run;
            // `park_timeout` never allocates. `Sampler::shutdown` unparks us.
            loop {
                match control.try_recv() {
                    Err(TryRecvError::Empty) => {}
                    Ok(()) | Err(TryRecvError::Disconnected) => {
                        self.last_sample(tx, seq, true);
                        return SamplerExit::Stopped;
                    }
                }
                let now = Instant::now();
                if now >= next {
                    break;
                }
                std::thread::park_timeout(next - now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc;

    /// Receives samples until `enough` holds for them or 20 s pass. Tests wait for
    /// what they need rather than sleeping a fixed time, so a loaded machine makes
    /// them slower, not red; the count a test asks for is still checked after.
    fn collect_until(rx: &Receiver<Sample>, enough: impl Fn(&[Sample]) -> bool) -> Vec<Sample> {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut got = Vec::new();
        while !enough(&got) && Instant::now() < deadline {
            if let Ok(s) = rx.recv_timeout(Duration::from_millis(50)) {
                got.push(s);
            }
        }
        got
    }

    fn quiet(hz: f64, capacity: usize) -> SamplerConfig {
        SamplerConfig {
            hz,
            capacity,
            gpu: false,
            system: false,
            ..SamplerConfig::default()
        }
    }

    #[test]
    fn streams_samples_of_the_schema_and_stops_cleanly() {
        let progress = WorkProgress::new();
        let t = start(SamplerConfig {
            progress: Some(progress.clone()),
            ..quiet(200.0, 1024)
        })
        .unwrap();
        progress.add_ops(12_345);
        let mut got = collect_until(&t.samples, |g| g.len() >= 10);
        let rss = t.schema.index_of("mem.rss").expect("procfs works on Linux");
        let ops = t.schema.index_of("work.ops").unwrap();
        assert!(t.schema.index_of("alloc.live").is_some());
        assert!(t.schema.index_of("telemetry.dropped").is_some());
        assert_eq!(t.sampler.stop(), SamplerExit::Stopped);
        got.extend(t.samples.try_iter());
        assert!(got.len() >= 10, "{} samples", got.len());
        for w in got.windows(2) {
            assert!(w[1].seq > w[0].seq && w[1].t_ns > w[0].t_ns);
        }
        let last = got.last().unwrap();
        assert_eq!(last.values().len(), t.schema.len());
        assert!(last.get(rss).unwrap() > 1e6);
        assert_eq!(last.get(ops), Some(12_345.0));
        // After stop the channel is closed: the receiver sees the end.
        assert!(t.samples.recv().is_err());
    }

    #[test]
    fn a_stalled_receiver_costs_counted_drops_not_the_producers_rate() {
        // Two samplers side by side, so both see the same machine load: one whose
        // receiver drains, one whose receiver never reads.
        let drained = start(quiet(1000.0, 1 << 16)).unwrap();
        let stalled = start(quiet(1000.0, 16)).unwrap();
        // Read the drained one until it has ticked 200 times (0.2 s unloaded).
        let seen = collect_until(&drained.samples, |g| g.len() >= 200);
        assert!(seen.len() >= 200, "{} samples", seen.len());
        let d = drained.sampler.produced() + drained.sampler.dropped();
        let (produced, dropped) = (stalled.sampler.produced(), stalled.sampler.dropped());
        let drop_idx = stalled.schema.index_of("telemetry.dropped").unwrap();
        drained.sampler.stop();
        stalled.sampler.stop();
        assert_eq!(produced, 16, "exactly the capacity got through");
        // A producer that blocked on the full channel would have stopped at 16 or 17
        // ticks; one that never blocks keeps pace with its drained twin, within what
        // the scheduler makes of two threads on a busy machine.
        let s = produced + dropped;
        assert!(
            s * 2 >= d,
            "stalled producer ticked {s} times, drained one {d}"
        );
        assert!(dropped > 0);
        let got: Vec<Sample> = stalled.samples.try_iter().collect();
        assert_eq!(got.len(), 16);
        assert_eq!(
            got[15].get(drop_idx),
            Some(0.0),
            "drops began after the 16th"
        );
        let last_seen = drained
            .samples
            .try_iter()
            .last()
            .or(seen.last().copied())
            .unwrap();
        assert_eq!(
            last_seen.get(drop_idx),
            Some(0.0),
            "the drained stream lost nothing"
        );
    }

    #[test]
    fn the_sampler_thread_allocates_nothing_in_steady_state() {
        assert!(alloc::is_installed());
        let t = start(SamplerConfig {
            progress: Some(WorkProgress::new()),
            ..quiet(500.0, 100_000)
        })
        .unwrap();
        let idx = t.schema.index_of("telemetry.sampler_allocs").unwrap();
        let mut got = collect_until(&t.samples, |g| g.len() > 300);
        t.sampler.stop();
        got.extend(t.samples.try_iter());
        assert!(got.len() > 300, "{}", got.len());
        // Setting up (thread start, first reads) may allocate; after the first
        // few ticks, not one more call.
        let warm = got[5].get(idx).unwrap();
        let last = got.last().unwrap().get(idx).unwrap();
        assert_eq!(
            last,
            warm,
            "the sampler allocated {} times in steady state",
            last - warm
        );
    }

    #[test]
    fn bad_settings_are_errors() {
        assert!(matches!(
            start(quiet(0.0, 8)),
            Err(TelemetryError::BadRate(_))
        ));
        assert!(matches!(
            start(quiet(f64::NAN, 8)),
            Err(TelemetryError::BadRate(_))
        ));
        assert!(matches!(
            start(quiet(10.0, 0)),
            Err(TelemetryError::BadCapacity)
        ));
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_pid_that_does_not_exist_is_an_error_naming_it() {
        let err = start(SamplerConfig {
            target: Target::Pid(4_999_999),
            ..quiet(10.0, 8)
        })
        .unwrap_err();
        assert!(err.to_string().contains("4999999"), "{err}");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_watched_process_that_exits_ends_the_stream() {
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let t = start(SamplerConfig {
            target: Target::Pid(child.id()),
            ..quiet(100.0, 1024)
        })
        .unwrap();
        assert!(
            t.schema.index_of("alloc.live").is_none(),
            "not this process's allocator"
        );
        let before = collect_until(&t.samples, |g| g.len() >= 5);
        assert!(before.len() >= 5, "samples while it ran: {}", before.len());
        child.kill().unwrap();
        child.wait().unwrap(); // reaped: /proc/<pid> disappears
        let deadline = Instant::now() + Duration::from_secs(5);
        while !t.sampler.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let pid = child.id();
        assert_eq!(t.sampler.stop(), SamplerExit::TargetExited { pid });
    }

    #[test]
    fn slow_probes_arrive_at_their_own_cadence() {
        let t = start(SamplerConfig {
            system: true,
            slow_hz: 10.0,
            ..quiet(200.0, 4096)
        })
        .unwrap();
        let idx = t
            .schema
            .index_of("sys.mem_total")
            .expect("sysinfo works here");
        let carries = |s: &Sample| s.get(idx).is_some();
        let mut got = collect_until(&t.samples, |g| g.iter().filter(|s| carries(s)).count() >= 4);
        t.sampler.stop();
        got.extend(t.samples.try_iter());
        let with = got.iter().filter(|s| carries(s)).count();
        // At 200 Hz and 10 Hz, each slow reading lands in one of ~20 fast samples and
        // is not repeated in the ones between (which would make nearly all carry it).
        assert!(
            with >= 4,
            "{with} of {} samples carry sys.mem_total",
            got.len()
        );
        assert!(
            with * 2 <= got.len(),
            "{with} of {} samples carry sys.mem_total",
            got.len()
        );
    }

    #[test]
    fn the_seqlock_hands_over_whole_readings_once() {
        let slots = SlowSlots::new(3);
        let mut seen = 0;
        let mut out = [0.0; 3];
        assert!(
            !slots.take_new(&mut seen, &mut out),
            "nothing published yet"
        );
        slots.publish(&[1.0, 2.0, 3.0]);
        assert!(slots.take_new(&mut seen, &mut out));
        assert_eq!(out, [1.0, 2.0, 3.0]);
        assert!(!slots.take_new(&mut seen, &mut out), "no new reading");
        slots.publish(&[4.0, f64::NAN, 6.0]);
        assert!(slots.take_new(&mut seen, &mut out));
        assert_eq!((out[0], out[2]), (4.0, 6.0));
        assert!(out[1].is_nan());
    }
}
