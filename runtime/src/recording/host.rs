//! Facts about the machine a recording was made on.

use serde::{Deserialize, Serialize};
use sysinfo::{CpuRefreshKind, System};

use crate::telemetry::gpu::GpuFacts;

/// What a reviewer needs to know about where a recording came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostFacts {
    pub hostname: String,
    /// e.g. "Linux (Debian GNU/Linux 12)".
    pub os: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cores: u32,
    pub mem_total_bytes: u64,
    /// NVIDIA driver and GPU names, where NVML works.
    #[serde(default)]
    pub gpu: Option<GpuFacts>,
}

impl HostFacts {
    /// Reads the facts of this machine. Anything unreadable is "unknown".
    pub fn collect(gpu: Option<GpuFacts>) -> Self {
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
        Self {
            hostname: unknown(System::host_name()),
            os: System::long_os_version().unwrap_or_else(|_| std::env::consts::OS.into()),
            kernel: unknown(System::kernel_version()),
            cpu_model,
            cores: std::thread::available_parallelism().map_or(0, |n| n.get() as u32),
            mem_total_bytes,
            gpu,
        }
    }

    /// The same facts without the machine's name, for recordings that will be
    /// shared.
    pub fn redacted(mut self) -> Self {
        self.hostname = "redacted".into();
        self
    }

    /// One line for captions and receipts.
    pub fn summary(&self) -> String {
        let gpu = match &self.gpu {
            Some(g) if !g.devices.is_empty() => {
                format!(", {} (driver {})", g.devices.join(", "), g.driver)
            }
            _ => String::new(),
        };
        format!(
            "{}: {}, kernel {}, {} × {}, {:.1} GiB{gpu}",
            self.hostname,
            self.os,
            self.kernel,
            self.cores,
            self.cpu_model,
            self.mem_total_bytes as f64 / (1u64 << 30) as f64
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot read system files")]
    fn collects_this_machine() {
        let h = HostFacts::collect(None);
        assert!(h.cores >= 1);
        assert!(h.mem_total_bytes > 0);
        assert!(!h.os.is_empty());
        assert!(h.summary().contains(&h.kernel));
    }
}
