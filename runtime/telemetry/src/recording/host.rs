//! Facts about the machine a recording is made on.

use sysinfo::{CpuRefreshKind, System};

pub use flatline_format::HostFacts;

use crate::gpu::GpuFacts;

/// Reads the facts of this machine. Anything unreadable is "unknown".
pub fn collect(gpu: Option<GpuFacts>) -> HostFacts {
    let unknown = |r: Result<String, sysinfo::Error>| r.unwrap_or_else(|_| "unknown".into());
    let (cpu_model, mem_total_bytes) = match System::new() {
        Ok(mut sys) => {
            sys.refresh_cpu_list(CpuRefreshKind::nothing());
            sys.refresh_memory();
            let cpu = sys
                .cpus()
                .first()
                .map(|c| c.brand().trim().to_owned())
                .filter(|b| !b.is_empty())
                .unwrap_or_else(|| "unknown".into());
            (cpu, sys.total_memory())
        }
        Err(_) => ("unknown".into(), 0),
    };
    HostFacts {
        hostname: unknown(System::host_name()),
        os: System::long_os_version().unwrap_or_else(|_| std::env::consts::OS.into()),
        kernel: unknown(System::kernel_version()),
        cpu_model,
        cores: std::thread::available_parallelism().map_or(0, |n| n.get() as u32),
        mem_total_bytes,
        gpu,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot read system files")]
    fn collects_this_machine() {
        let h = collect(None);
        assert!(h.cores >= 1);
        assert!(h.mem_total_bytes > 0);
        assert!(!h.os.is_empty());
        assert!(h.summary().contains(&h.kernel));
    }
}
