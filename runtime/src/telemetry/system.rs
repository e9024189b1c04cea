//! `sys.*` channels through `sysinfo`: host CPU use and memory, and, where
//! there is no `/proc` (macOS, Windows), the watched process's RSS, virtual
//! size and CPU use. sysinfo allocates while it refreshes, so the sampler
//! reads this probe on its slower observer thread.

use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};

use super::{ChannelSpec, Probe, ProbeError, Unavailable, catalog};

#[derive(Debug)]
pub struct SysProbe {
    sys: System,
    pid: u32,
    /// Also report `mem.rss`, `mem.vm_size` and `proc.cpu` (no procfs probe here).
    process: bool,
    reads: u64,
}

impl SysProbe {
    /// `process`: report the process channels too, for platforms without `/proc`.
    pub fn new(pid: u32, process: bool) -> Result<Self, Unavailable> {
        let sys = System::new().map_err(|e| Unavailable::new("system", format!("sysinfo: {e}")))?;
        Ok(Self {
            sys,
            pid,
            process,
            reads: 0,
        })
    }
}

impl Probe for SysProbe {
    fn name(&self) -> &'static str {
        "system"
    }

    fn channels(&self) -> Vec<ChannelSpec> {
        let mut ch = vec![
            catalog::spec("sys.cpu"),
            catalog::spec("sys.mem_total"),
            catalog::spec("sys.mem_available"),
        ];
        if self.process {
            ch.extend(["mem.rss", "mem.vm_size", "proc.cpu"].map(catalog::spec));
        }
        ch
    }

    fn read(&mut self, out: &mut [f64]) -> Result<(), ProbeError> {
        self.sys.refresh_cpu_usage();
        self.sys.refresh_memory();
        // CPU use is a difference between two refreshes: the first has none.
        out[0] = if self.reads > 0 {
            f64::from(self.sys.global_cpu_usage())
        } else {
            f64::NAN
        };
        out[1] = self.sys.total_memory() as f64;
        out[2] = self.sys.available_memory() as f64;
        if self.process {
            let pid = Pid::from_u32(self.pid);
            self.sys.refresh_processes_specifics(
                ProcessesToUpdate::Some(&[pid]),
                true,
                ProcessRefreshKind::nothing().with_memory().with_cpu(),
            );
            let p = self
                .sys
                .process(pid)
                .ok_or(ProbeError::Gone { pid: self.pid })?;
            out[3] = p.memory() as f64;
            out[4] = p.virtual_memory() as f64;
            out[5] = if self.reads > 0 {
                f64::from(p.cpu_usage())
            } else {
                f64::NAN
            };
        }
        self.reads += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot read system files")]
    fn reads_host_memory_and_this_process() {
        let mut p = SysProbe::new(std::process::id(), true).unwrap();
        let mut out = vec![f64::NAN; p.channels().len()];
        p.read(&mut out).unwrap();
        assert!(out[0].is_nan(), "no CPU figure before two refreshes");
        assert!(out[1] > 0.0 && out[2] > 0.0 && out[2] <= out[1]);
        assert!(
            out[3] > 0.0 && out[4] >= out[3],
            "rss {} vm {}",
            out[3],
            out[4]
        );
        std::thread::sleep(sysinfo::MINIMUM_CPU_UPDATE_INTERVAL);
        p.read(&mut out).unwrap();
        assert!(out[0].is_finite() && out[5].is_finite());
    }
}
