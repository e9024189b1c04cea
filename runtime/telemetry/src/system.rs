//! `sys.*` channels through `sysinfo`: host CPU use and memory, and, where
//! there is no `/proc` (macOS, Windows), the watched process's RSS, virtual
//! size and CPU use. Where there is, the host's shared memory and tmpfs
//! (`sys.shmem`, `/proc/meminfo`'s `Shmem`: what `/dev/shm` holds). sysinfo allocates while it refreshes, so the sampler
//! reads this probe on its slower observer thread.

use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};

use super::{ChannelSpec, Probe, ProbeError, Unavailable, catalog};

#[derive(Debug)]
pub struct SysProbe {
    sys: System,
    pid: u32,
    /// Also report `mem.rss`, `mem.vm_size` and `proc.cpu` (no procfs probe here).
    process: bool,
    /// Also report `sys.shmem` (`/proc/meminfo` holds `Shmem`).
    shmem: bool,
    reads: u64,
}

/// `/proc/meminfo`'s `Shmem` line, in bytes.
pub fn parse_meminfo_shmem(text: &str) -> Option<f64> {
    text.lines()
        .filter_map(super::classes::kb_line)
        .find_map(|(k, v)| (k == "Shmem").then_some(v))
}

fn read_shmem() -> Option<f64> {
    parse_meminfo_shmem(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

impl SysProbe {
    /// `process`: report the process channels too, for platforms without `/proc`.
    pub fn new(pid: u32, process: bool) -> Result<Self, Unavailable> {
        let sys = System::new().map_err(|e| Unavailable::new("system", format!("sysinfo: {e}")))?;
        Ok(Self {
            sys,
            pid,
            process,
            shmem: read_shmem().is_some(),
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
        if self.shmem {
            ch.push(catalog::spec("sys.shmem"));
        }
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
        let mut at = 3;
        if self.shmem {
            out[at] = read_shmem().unwrap_or(f64::NAN);
            at += 1;
        }
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
            out[at] = p.memory() as f64;
            out[at + 1] = p.virtual_memory() as f64;
            out[at + 2] = if self.reads > 0 {
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
        let names: Vec<String> = p.channels().into_iter().map(|c| c.name).collect();
        let at = |n: &str| names.iter().position(|c| c == n).unwrap();
        let mut out = vec![f64::NAN; names.len()];
        p.read(&mut out).unwrap();
        assert!(out[0].is_nan(), "no CPU figure before two refreshes");
        assert!(out[1] > 0.0 && out[2] > 0.0 && out[2] <= out[1]);
        let (rss, vm) = (out[at("mem.rss")], out[at("mem.vm_size")]);
        assert!(rss > 0.0 && vm >= rss, "rss {rss} vm {vm}");
        if cfg!(target_os = "linux") {
            let shmem = out[at("sys.shmem")];
            assert!(shmem >= 0.0 && shmem < out[1], "{shmem}");
        }
        std::thread::sleep(sysinfo::MINIMUM_CPU_UPDATE_INTERVAL);
        p.read(&mut out).unwrap();
        assert!(out[0].is_finite() && out[at("proc.cpu")].is_finite());
    }

    #[test]
    fn the_hosts_shared_memory_is_read_from_meminfo() {
        let text =
            "MemTotal:       24000000 kB\nShmemHugePages:        0 kB\nShmem:            2048 kB\n";
        assert_eq!(parse_meminfo_shmem(text), Some(2048.0 * 1024.0));
        assert_eq!(parse_meminfo_shmem("MemTotal: 1 kB\n"), None);
    }
}
