//! Telemetry: probes read what a process is doing; a sampler thread turns
//! their readings into [`Sample`]s and streams them over a bounded channel.
//!
//! Data flows one way: probe → sampler → channel → consumer. The measured
//! thread is never blocked: the sampler `try_send`s into a bounded
//! `crossbeam-channel`, and a full channel drops the sample and counts it
//! (`telemetry.dropped`). In steady state the sampler thread allocates
//! nothing, and flatline's own threads are counted apart from the process's
//! allocation figures (see [`alloc::mark_observer_thread`]), so `alloc.*`
//! shows the workload, not the instrument.
//!
//! A probe that cannot work on this machine (no NVIDIA driver, no `/proc`, no
//! glibc) is listed once as [`Unavailable`] with its reason; its channels are
//! simply absent from the [`Schema`].

pub mod alloc;
pub use flatline_catalog::allocators;
#[cfg(target_os = "linux")]
pub mod attach;
pub mod bars;
pub use catalog::names;
pub use flatline_catalog as catalog;
pub mod cgroup;
pub mod classes;
pub mod dynamic;
pub mod gpu;
pub mod keys;
pub mod kmsg;
pub mod logfile;
pub mod malloc;
pub mod oom;
pub mod output;
mod probe;
pub mod procfs;
pub mod recording;
pub mod sampler;
#[cfg(target_os = "linux")]
pub mod sites;
pub mod system;
pub mod torch;
pub mod tree;
pub mod work;

pub use dynamic::{DynamicChannels, SchemaFeed};

pub use flatline_format::{
    ChannelSpec, Group, Item, Kind, MAX_CHANNELS, STEP_CHANNELS, Sample, Schema, TOKEN_CHANNELS,
    Unavailable, Unit,
};
pub use probe::{Clock, MAX_STEP, Probe, ProbeError};
pub use sampler::{
    CgroupSource, GrowHandle, Sampler, SamplerConfig, SamplerExit, Target, Telemetry,
    TelemetryError, start, start_with,
};

// The tests count their own allocations (`count_thread_allocs`).
#[cfg(test)]
#[global_allocator]
static TEST_ALLOC: flatline_arena::arena::CountingAlloc = flatline_arena::arena::CountingAlloc;

#[cfg(test)]
mod tests {
    /// Every channel the sampler makes (the process's, the system's, the
    /// allocator's, malloc's, the cgroup's, the tree's and its processes',
    /// its own) is declared, and made with the declared unit, group and kind.
    #[test]
    fn every_channel_the_sampler_makes_is_declared_and_made_as_declared() {
        use crate::{SamplerConfig, Target};
        use flatline_catalog::declared;
        use flatline_format::Item;
        // A child, so that the tree has a process of its own to add.
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let tel = crate::start(SamplerConfig {
            hz: 50.0,
            target: Target::Pid(std::process::id()),
            tree: true,
            gpu: false,
            ..SamplerConfig::default()
        })
        .unwrap();
        let mut made = tel.schema.channels.clone();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !made.iter().any(|c| c.name.starts_with("pid"))
            && std::time::Instant::now() < deadline
        {
            if let Ok(s) = tel
                .samples
                .recv_timeout(std::time::Duration::from_millis(100))
            {
                for item in tel.changes.items(s) {
                    if let Item::Add(specs) = item {
                        made.extend(specs);
                    }
                }
            }
        }
        tel.sampler.stop();
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            made.iter().any(|c| c.name.starts_with("pid")),
            "the tree added its processes"
        );
        for c in &made {
            let d = declared(&c.name).unwrap_or_else(|| panic!("{} is not declared", c.name));
            assert_eq!((c.unit, c.group), (d.unit, d.group), "{}", c.name);
            // A cgroup shared with other processes makes its use a gauge.
            if !(c.name == "cgroup.current" && c.labels.contains_key("shared_with")) {
                assert_eq!(c.kind, d.kind, "{}", c.name);
            }
        }
    }
}
