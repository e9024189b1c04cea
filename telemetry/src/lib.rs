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
pub mod allocators;
#[cfg(target_os = "linux")]
pub mod attach;
pub mod bars;
pub mod catalog;
pub use catalog::names;
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
