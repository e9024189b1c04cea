//! `gpu<i>.*` channels from NVIDIA's NVML, through `nvml-wrapper`.
//!
//! NVML is loaded at run time (`libnvidia-ml.so.1`, or the library named by
//! `FLATLINE_NVML_LIB`), so flatline builds and runs without an NVIDIA driver: then [`GpuProbe::new`] returns
//! [`Unavailable`] with the loader's reason, at once. NVML calls can take tens
//! of milliseconds, so the sampler reads this probe on its slower thread.
//! nvml-wrapper allocates inside its process queries; that thread is an
//! observer thread, so those allocations stay out of `alloc.*`.

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::enums::device::UsedGpuMemory;

use super::{ChannelSpec, Group, Probe, ProbeError, Unavailable, Unit};

/// Channels per device, in order.
const PER_DEVICE: [(&str, Unit); 5] = [
    ("used", Unit::Bytes),
    ("total", Unit::Bytes),
    ("util", Unit::Percent),
    ("temp_c", Unit::Celsius),
    ("proc_used", Unit::Bytes),
];

/// The variable naming another NVML library to load instead of the system's
/// `libnvidia-ml.so.1` (the tests' stand-in, or a driver in an odd place).
pub const NVML_LIB_VAR: &str = "FLATLINE_NVML_LIB";

/// What NVML says about the GPUs, for a recording's host facts.
pub use flatline_format::GpuFacts;

pub struct GpuProbe {
    nvml: Nvml,
    devices: u32,
    pid: u32,
    /// The watched tree's pids, where a tree probe shares them: VRAM is held
    /// by the ranks and workers, not by the launcher that was started.
    tree: Option<super::tree::TreePids>,
    facts: GpuFacts,
    /// Where a device that stops (or starts again) answering is told, and
    /// which devices failed at the last reading.
    events: Option<(
        crossbeam_channel::Sender<flatline_format::Event>,
        super::Clock,
    )>,
    failing: Vec<bool>,
}

impl std::fmt::Debug for GpuProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuProbe")
            .field("pid", &self.pid)
            .field("facts", &self.facts)
            .finish()
    }
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
                format!("NVML from {}: {e}", std::path::Path::new(path).display()),
            ),
            None => Unavailable::new("gpu", format!("NVML: {e}")),
        })?;
        let devices = nvml
            .device_count()
            .map_err(|e| Unavailable::new("gpu", format!("NVML device count: {e}")))?;
        if devices == 0 {
            return Err(Unavailable::new("gpu", "NVML found no NVIDIA GPU"));
        }
        let driver = nvml
            .sys_driver_version()
            .unwrap_or_else(|e| format!("unknown ({e})"));
        let names = (0..devices)
            .map(|i| {
                nvml.device_by_index(i)
                    .and_then(|d| d.name())
                    .unwrap_or_else(|e| format!("GPU {i} ({e})"))
            })
            .collect();
        Ok(Self {
            nvml,
            devices,
            pid,
            tree: None,
            events: None,
            failing: vec![false; devices as usize],
            facts: GpuFacts {
                driver,
                devices: names,
            },
        })
    }

    /// Sums `gpu<i>.proc_used` over the tree's pids (else the watched pid's
    /// own).
    pub fn over_tree(mut self, pids: super::tree::TreePids) -> Self {
        self.tree = Some(pids);
        self
    }

    /// Tells `events` (stamped on `clock`) when a device stops answering,
    /// and when it answers again.
    pub fn with_events(
        mut self,
        events: crossbeam_channel::Sender<flatline_format::Event>,
        clock: super::Clock,
    ) -> Self {
        self.events = Some((events, clock));
        self
    }

    /// Driver version and device names.
    pub fn facts(&self) -> &GpuFacts {
        &self.facts
    }

    /// One device's readings; `tree`: the watched tree's pids (may be empty).
    fn read_device(
        &self,
        i: u32,
        tree: &[u32],
        out: &mut [f64],
    ) -> Result<(), nvml_wrapper::error::NvmlError> {
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
        let ours = |pid: u32| pid == self.pid || tree.contains(&pid);
        let mut mine = 0u64;
        let mut listed = false;
        let lists = [
            dev.running_compute_processes(),
            dev.running_graphics_processes(),
        ];
        for list in lists.into_iter().flatten() {
            listed = true;
            for p in list.iter().filter(|p| ours(p.pid)) {
                if let UsedGpuMemory::Used(b) = p.used_gpu_memory {
                    mine += b;
                }
            }
        }
        out[4] = if listed { mine as f64 } else { f64::NAN };
        Ok(())
    }
}

impl Probe for GpuProbe {
    fn name(&self) -> &'static str {
        "gpu"
    }

    fn channels(&self) -> Vec<ChannelSpec> {
        (0..self.devices)
            .flat_map(|i| {
                PER_DEVICE.iter().map(move |&(what, unit)| {
                    ChannelSpec::new(format!("gpu{i}.{what}"), unit, Group::Gpu)
                })
            })
            .collect()
    }

    /// Reads every device; one that fails (a GPU fallen off the bus) reads
    /// as gaps while the others go on. Fails only when every device does.
    fn read(&mut self, out: &mut [f64]) -> Result<(), ProbeError> {
        // The tree's pids once per reading, not once per device.
        let tree: Vec<u32> = self.tree.as_ref().map_or_else(Vec::new, |t| {
            t.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone()
        });
        let mut first_err = None;
        let mut read_any = false;
        for (i, chunk) in out.chunks_exact_mut(PER_DEVICE.len()).enumerate() {
            chunk.fill(f64::NAN);
            let result = self.read_device(i as u32, &tree, chunk);
            let failed = result.is_err();
            if failed != self.failing[i]
                && let Some((tx, clock)) = &self.events
            {
                let text = match &result {
                    Err(e) => format!("gpu{i} stopped answering: NVML: {e}"),
                    Ok(()) => format!("gpu{i} answers again"),
                };
                let _ = tx.try_send(flatline_format::Event {
                    t_ns: clock.now_ns(),
                    kind: flatline_format::EventKind::Note(text),
                });
            }
            self.failing[i] = failed;
            match result {
                Ok(()) => read_any = true,
                Err(e) => {
                    chunk.fill(f64::NAN);
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) if !read_any => Err(ProbeError::Failed(format!("NVML: {e}"))),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a machine without the NVIDIA driver (CI, this project's build
    /// machines) the probe must be unavailable with the loader's reason, fast.
    /// Where a driver is present the probe must list five channels per GPU.
    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot dlopen")]
    fn absent_driver_is_a_reason_not_a_panic() {
        let t0 = std::time::Instant::now();
        match GpuProbe::new(std::process::id()) {
            Err(u) => {
                assert_eq!(u.probe, "gpu");
                assert!(u.reason.starts_with("NVML"), "{u:?}");
                assert!(t0.elapsed() < std::time::Duration::from_secs(5));
            }
            Ok(mut p) => {
                let ch = p.channels();
                assert_eq!(ch.len(), p.facts().devices.len() * PER_DEVICE.len());
                assert_eq!(ch[0].name, "gpu0.used");
                let mut out = vec![f64::NAN; ch.len()];
                p.read(&mut out).unwrap();
                assert!(out[1] > 0.0, "gpu0.total");
            }
        }
    }
}
