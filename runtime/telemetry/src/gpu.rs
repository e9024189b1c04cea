//! `gpu<i>.*` channels from NVIDIA's NVML, through `nvml-wrapper`.
//!
//! NVML is loaded at run time (`libnvidia-ml.so.1`, or the library named by
//! `FLATLINE_NVML_LIB`), so flatline builds and runs without an NVIDIA driver: then [`GpuProbe::new`] returns
//! [`Unavailable`] with the loader's reason, at once. NVML calls can take tens
//! of milliseconds, so the sampler reads this probe on its slower thread.
//! nvml-wrapper allocates inside its process queries; that thread is an
//! observer thread, so those allocations stay out of `alloc.*`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;

use super::torch::{OTHER, TorchSeen};
use super::{ChannelSpec, Clock, DynamicChannels, Probe, ProbeError, Unavailable, catalog};
use flatline_format::{Event, EventKind};

/// Channels per device, by leaf, in order (declared in `catalog.rs` as
/// `gpu#.used`, …).
const PER_DEVICE: [&str; 5] = ["used", "total", "util", "temp_c", PROC_USED];
/// A device's memory that the watched processes use, as the driver counts it.
use flatline_catalog::gpu::PROC_USED;
pub use flatline_catalog::gpu::is_proc_used;

/// Readings in a row a device may fail (a timed-out call, a driver busy
/// resetting another GPU) before its channels end; `GPU_IS_LOST` ends them
/// at once.
pub const END_AFTER_FAILURES: u32 = 20;

/// The variable naming another NVML library to load instead of the system's
/// `libnvidia-ml.so.1` (the tests' stand-in, or a driver in an odd place).
pub const NVML_LIB_VAR: &str = "FLATLINE_NVML_LIB";

/// What NVML says about the GPUs, for a recording's host facts.
pub use flatline_format::GpuFacts;

/// One device's state between readings.
#[derive(Debug, Clone)]
struct Device {
    values: [f64; PER_DEVICE.len()],
    /// The last reading failed, and how many in a row did.
    failing: bool,
    failures: u32,
    /// NVML said the GPU is lost (fallen off the bus).
    lost: bool,
    /// Where its channels are while they live.
    first: Option<usize>,
    /// Its channels were added once, and they ended (it was lost).
    added: bool,
    ended: bool,
    /// Told that its listed processes are all out of sight.
    told_hidden: bool,
}

/// The `gpu<i>.*` channels of every device, `pid<N>.vram` for each process
/// of the watched tree that holds GPU memory, and `gpu.other` where the job
/// logs PyTorch's reserved memory (see [`super::torch`]). All of them are
/// grown on the stream (see [`super::dynamic`]): a lost device's channels and
/// an exited process's end.
pub struct GpuProbe {
    nvml: Nvml,
    pid: u32,
    /// The watched tree's pids, where a tree probe shares them: VRAM is held
    /// by the ranks and workers, not by the launcher that was started.
    tree: Option<super::tree::TreePids>,
    /// Give each process of the tree that holds GPU memory `pid<N>.vram`.
    per_process: bool,
    facts: GpuFacts,
    /// Where a device that stops (or starts again) answering is told.
    events: Option<(crossbeam_channel::Sender<Event>, Clock)>,
    devices: Vec<Device>,
    /// GPU memory by process of the tree (summed over devices) at the last
    /// reading, and whether every device answered it.
    vram: HashMap<u32, f64>,
    complete: bool,
    /// `pid<N>.vram` positions by pid.
    vram_channels: HashMap<u32, usize>,
    /// A process's pids in the PID namespaces below this one's (`NSpid`), by
    /// pid: NVML may list any of them.
    aliases: HashMap<u32, Vec<u32>>,
    proc_root: PathBuf,
    torch: Option<TorchSeen>,
    /// `gpu.other`: its position once added, its value at the last reading.
    other: Option<Option<usize>>,
    other_value: f64,
    told_other: bool,
}

impl std::fmt::Debug for GpuProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuProbe")
            .field("pid", &self.pid)
            .field("facts", &self.facts)
            .finish()
    }
}

/// The pids of `NSpid:` in a `/proc/<pid>/status` (this namespace's first,
/// then each nested one's).
pub fn nspids(status: &str) -> Vec<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map(|rest| {
            rest.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

impl GpuProbe {
    /// Loads NVML and counts the devices; `pid` is the process whose own GPU
    /// memory `gpu<i>.proc_used` reports (with [`GpuProbe::over_tree`], its
    /// whole tree's).
    pub fn new(pid: u32) -> Result<Self, Unavailable> {
        let lib = std::env::var_os(NVML_LIB_VAR).filter(|p| !p.is_empty());
        let nvml = match &lib {
            Some(path) => Nvml::builder().lib_path(path).init(),
            None => Nvml::init(),
        }
        .map_err(|e| match &lib {
            Some(path) => Unavailable::new(
                "gpu",
                format!("NVML from {}: {e}", Path::new(path).display()),
            ),
            None => Unavailable::new("gpu", format!("NVML: {e}")),
        })?;
        let count = nvml
            .device_count()
            .map_err(|e| Unavailable::new("gpu", format!("NVML device count: {e}")))?;
        if count == 0 {
            return Err(Unavailable::new("gpu", "NVML found no NVIDIA GPU"));
        }
        let driver = nvml
            .sys_driver_version()
            .unwrap_or_else(|e| format!("unknown ({e})"));
        let names = (0..count)
            .map(|i| {
                nvml.device_by_index(i)
                    .and_then(|d| d.name())
                    .unwrap_or_else(|e| format!("GPU {i} ({e})"))
            })
            .collect();
        let device = Device {
            values: [f64::NAN; PER_DEVICE.len()],
            failing: false,
            failures: 0,
            lost: false,
            first: None,
            added: false,
            ended: false,
            told_hidden: false,
        };
        Ok(Self {
            nvml,
            pid,
            tree: None,
            per_process: false,
            events: None,
            devices: vec![device; count as usize],
            vram: HashMap::new(),
            complete: false,
            vram_channels: HashMap::new(),
            aliases: HashMap::new(),
            proc_root: PathBuf::from("/proc"),
            torch: None,
            other: None,
            other_value: f64::NAN,
            told_other: false,
            facts: GpuFacts {
                driver,
                devices: names,
            },
        })
    }

    /// Sums `gpu<i>.proc_used` over the tree's pids (else the watched pid's
    /// own); with `per_process`, each process of it holding GPU memory gets
    /// `pid<N>.vram`.
    pub fn over_tree(mut self, pids: super::tree::TreePids, per_process: bool) -> Self {
        self.tree = Some(pids);
        self.per_process = per_process;
        self
    }

    /// Tells `events` (stamped on `clock`) when a device stops answering,
    /// and when it answers again.
    pub fn with_events(mut self, events: crossbeam_channel::Sender<Event>, clock: Clock) -> Self {
        self.events = Some((events, clock));
        self
    }

    /// Derives `gpu.other` from the reserved bytes the job logs.
    pub fn with_torch(mut self, seen: TorchSeen) -> Self {
        self.torch = Some(seen);
        self
    }

    /// Driver version and device names.
    pub fn facts(&self) -> &GpuFacts {
        &self.facts
    }

    fn note(&self, text: String) {
        if let Some((tx, clock)) = &self.events {
            let _ = tx.try_send(Event {
                t_ns: clock.now_ns(),
                kind: EventKind::Note(text),
            });
        }
    }

    /// Each watched pid with the pids NVML may list for it: itself, and its
    /// pids in nested PID namespaces (read once per process).
    fn watched(&mut self) -> Vec<(u32, u32)> {
        let mut pids: Vec<u32> = self.tree.as_ref().map_or_else(Vec::new, |t| {
            t.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone()
        });
        if !pids.contains(&self.pid) {
            pids.push(self.pid);
        }
        self.aliases.retain(|p, _| pids.contains(p));
        let mut out = Vec::with_capacity(pids.len());
        for pid in pids {
            let root = &self.proc_root;
            let aliases = self.aliases.entry(pid).or_insert_with(|| {
                std::fs::read_to_string(root.join(pid.to_string()).join("status"))
                    .map(|s| nspids(&s))
                    .unwrap_or_default()
            });
            out.push((pid, pid));
            out.extend(aliases.iter().filter(|&&a| a != pid).map(|&a| (a, pid)));
        }
        out
    }

    /// One device's readings into `out`, and its processes' memory into
    /// `vram`; `watched`: (pid NVML may list, the watched pid it is).
    /// `Ok(false)` when the device lists processes of which none is visible
    /// here (another PID namespace): then its `proc_used` is left out.
    fn read_device(
        &self,
        i: u32,
        watched: &[(u32, u32)],
        out: &mut [f64],
        vram: &mut HashMap<u32, f64>,
    ) -> Result<bool, NvmlError> {
        let dev = self.nvml.device_by_index(i)?;
        let mem = dev.memory_info()?;
        out[0] = mem.used as f64;
        out[1] = mem.total as f64;
        out[2] = dev
            .utilization_rates()
            .map_or(f64::NAN, |u| f64::from(u.gpu));
        out[3] = dev
            .temperature(TemperatureSensor::Gpu)
            .map_or(f64::NAN, f64::from);
        // A process with a CUDA context shows up as a compute process; one that only
        // draws shows up as a graphics process. Absent from both lists: it holds nothing.
        let mut mine = 0u64;
        let (mut answered, mut others, mut matched) = (false, Vec::new(), false);
        let lists = [
            dev.running_compute_processes(),
            dev.running_graphics_processes(),
        ];
        for list in lists.into_iter().flatten() {
            answered = true;
            for p in &list {
                match watched.iter().find(|(listed, _)| *listed == p.pid) {
                    Some(&(_, pid)) => {
                        matched = true;
                        if let UsedGpuMemory::Used(b) = p.used_gpu_memory {
                            mine += b;
                            *vram.entry(pid).or_default() += b as f64;
                        }
                    }
                    None => others.push(p.pid),
                }
            }
        }
        // NVML lists the host's pids; in a container with a PID namespace of
        // its own none of them is a process here, and 0 would read as "holds
        // no GPU memory".
        let hidden = !matched
            && !others.is_empty()
            && !others
                .iter()
                .any(|p| self.proc_root.join(p.to_string()).exists());
        out[4] = if answered && !hidden {
            mine as f64
        } else {
            f64::NAN
        };
        Ok(!hidden)
    }

    /// Adds a device's channels under `gpu<i>` (or, once a lost device that
    /// ended answers again, `gpu<i>-2`, …: a name is never reused).
    fn add_device(&mut self, i: usize, ch: &mut DynamicChannels<'_>) {
        let stem = ch.free_stem(&format!("gpu{i}"), "used");
        let name = self.facts.devices.get(i).cloned().unwrap_or_default();
        let specs = PER_DEVICE
            .iter()
            .map(|&what| {
                catalog::spec(&format!("{stem}.{what}"))
                    .with_label("gpu", i.to_string())
                    .with_label("name", name.clone())
            })
            .collect();
        self.devices[i].first = ch.add(specs);
        self.devices[i].added = true;
    }
}

impl Probe for GpuProbe {
    fn name(&self) -> &'static str {
        "gpu"
    }

    /// None at the start: every channel is grown (see [`Probe::dynamic`]).
    fn channels(&self) -> Vec<ChannelSpec> {
        Vec::new()
    }

    /// Reads every device; one that fails (a GPU fallen off the bus) reads
    /// as gaps, and after [`END_AFTER_FAILURES`] (or at once when lost) its
    /// channels end, while the others go on. Fails only when every device does.
    fn read(&mut self, _out: &mut [f64]) -> Result<(), ProbeError> {
        let watched = self.watched();
        let mut vram = HashMap::new();
        let mut first_err = None;
        let mut read_any = false;
        for i in 0..self.devices.len() {
            let mut values = [f64::NAN; PER_DEVICE.len()];
            let result = self.read_device(i as u32, &watched, &mut values, &mut vram);
            let failed = result.is_err();
            if failed != self.devices[i].failing {
                self.note(match &result {
                    Err(e) => format!("gpu{i} stopped answering: NVML: {e}"),
                    Ok(_) => format!("gpu{i} answers again"),
                });
            }
            let d = &mut self.devices[i];
            d.failing = failed;
            match result {
                Ok(visible) => {
                    read_any = true;
                    d.failures = 0;
                    d.lost = false;
                    d.values = values;
                    if !visible && !d.told_hidden {
                        d.told_hidden = true;
                        self.note(format!(
                            "gpu{i} lists processes, none of them visible in this PID \
                             namespace (flatline in a container of its own?): gpu{i}.proc_used \
                             is left out, not read as 0"
                        ));
                    }
                }
                Err(e) => {
                    d.failures += 1;
                    d.lost |= matches!(e, NvmlError::GpuLost);
                    d.values = [f64::NAN; PER_DEVICE.len()];
                    first_err.get_or_insert(e);
                }
            }
        }
        self.complete = first_err.is_none();
        self.vram = vram;
        self.other_value = f64::NAN;
        if let Some(reserved) = self.torch.as_ref().and_then(TorchSeen::reserved) {
            // The one process PyTorch's statistics can be about.
            match self.vram.values().collect::<Vec<_>>().as_slice() {
                [one] => self.other_value = **one - reserved,
                [] => {}
                many if !self.told_other => {
                    self.told_other = true;
                    self.note(format!(
                        "gpu.other is left out: {} processes hold GPU memory, and the logged \
                         PyTorch statistics are one process's",
                        many.len()
                    ));
                }
                _ => {}
            }
        }
        match first_err {
            Some(e) if !read_any => Err(ProbeError::Failed(format!("NVML: {e}"))),
            _ => Ok(()),
        }
    }

    fn grows(&self) -> bool {
        true
    }

    fn dynamic(&mut self, ch: &mut DynamicChannels<'_>) {
        for i in 0..self.devices.len() {
            let d = &self.devices[i];
            if !d.added || (d.ended && !d.failing) {
                self.devices[i].ended = false;
                self.add_device(i, ch);
            }
            let d = &mut self.devices[i];
            if let Some(first) = d.first {
                if d.failing && (d.lost || d.failures >= END_AFTER_FAILURES) {
                    let all: Vec<usize> = (first..first + PER_DEVICE.len()).collect();
                    ch.end(&all);
                    d.first = None;
                    d.ended = true;
                } else {
                    for (k, &v) in d.values.iter().enumerate() {
                        if !v.is_nan() {
                            ch.set(first + k, v);
                        }
                    }
                }
            }
        }
        if self.per_process {
            if self.complete {
                let gone: Vec<u32> = self
                    .vram_channels
                    .keys()
                    .filter(|p| !self.vram.contains_key(p))
                    .copied()
                    .collect();
                for pid in gone {
                    if let Some(p) = self.vram_channels.remove(&pid) {
                        ch.end(&[p]);
                    }
                }
            }
            let mut held: Vec<(u32, f64)> = self
                .vram
                .iter()
                .filter(|(_, b)| **b > 0.0)
                .map(|(&p, &b)| (p, b))
                .collect();
            held.sort_by_key(|(p, _)| *p);
            for (pid, bytes) in held {
                let at = match self.vram_channels.get(&pid) {
                    Some(&at) => Some(at),
                    None => {
                        // As the tree names a reused pid: pid123, pid123-2, …
                        let stem = ch.free_stem(&format!("pid{pid}"), "vram");
                        let spec = catalog::spec(&format!("{stem}.vram"))
                            .with_label("pid", pid.to_string());
                        let at = ch.add(vec![spec]);
                        if let Some(at) = at {
                            self.vram_channels.insert(pid, at);
                        }
                        at
                    }
                };
                if let Some(at) = at {
                    ch.set(at, bytes);
                }
            }
        }
        if !self.other_value.is_nan() {
            let at = *self
                .other
                .get_or_insert_with(|| ch.add(vec![catalog::spec(OTHER)]));
            if let Some(at) = at {
                ch.set(at, self.other_value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device's process memory is told by its declaration, lost-and-back
    /// devices included; nothing else whose name ends alike is.
    #[test]
    fn process_memory_is_told_by_its_declaration() {
        for yes in ["gpu0.proc_used", "gpu12.proc_used", "gpu1-2.proc_used"] {
            assert!(is_proc_used(yes), "{yes}");
        }
        for no in [
            "gpu0.used",
            "gpux.proc_used",
            "pid3.proc_used",
            "gpu.other",
            "log.proc_used",
        ] {
            assert!(!is_proc_used(no), "{no}");
        }
    }

    /// On a machine without the NVIDIA driver (CI, this project's build
    /// machines) the probe must be unavailable with the loader's reason.
    /// Where a driver is present the probe must list five channels per GPU.
    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot dlopen")]
    fn absent_driver_is_a_reason_not_a_panic() {
        match GpuProbe::new(std::process::id()) {
            Err(u) => {
                assert_eq!(u.probe, "gpu");
                assert!(u.reason.starts_with("NVML"), "{u:?}");
            }
            Ok(mut p) => {
                assert!(p.channels().is_empty(), "grown, not fixed");
                p.read(&mut []).unwrap();
                assert!(p.devices[0].values[1] > 0.0, "gpu0.total");
            }
        }
    }

    /// NVML may list a process by its pid in a nested PID namespace: the
    /// status file's `NSpid` gives them all, this namespace's first.
    #[test]
    fn nspid_lists_every_namespaces_pid() {
        let status = "Name:\tpython\nTgid:\t4242\nNgid:\t0\nPid:\t4242\nPPid:\t1\n\
                      NSpid:\t4242\t17\nNSpgid:\t4242\t17\n";
        assert_eq!(nspids(status), [4242, 17]);
        assert_eq!(
            nspids("Name:\tx\nPid:\t5\n"),
            Vec::<u32>::new(),
            "an old kernel"
        );
    }
}
