//! flatline-runtime: the instrumented side of flatline.
//!
//! This crate runs the workloads whose memory behaviour flatline measures and
//! counts what they allocate. It never depends on a GUI crate (egui, eframe,
//! winit, wgpu): CI checks that with `cargo tree`.
//!
//! * [`arena`] owns raw memory: 64-byte aligned flat buffers, the 64-byte
//!   records that live in them, the counting global allocator and the corpus
//!   memory map. It is the only module allowed `unsafe`; every block there
//!   carries a `// SAFETY:` comment and is exercised by tests that also run
//!   under Miri.
//! * [`workload`] holds the two reference workloads of the seed proposal:
//!   [`workload::ops1b`] (the 1-billion-operation ring arena) and
//!   [`workload::ingest`] (nanoGPT-style batch token ingestion, with an
//!   allocating baseline loader beside it).
//! * [`telemetry`] reads what a process is doing (allocator, malloc,
//!   `/proc`, NVML, sysinfo) and streams it as [`telemetry::Sample`]s.
//! * [`recording`] writes and reads crash-safe recordings of those samples,
//!   and converts step-log CSVs.
//! * [`analysis`] tells flat from staircase from leak, with a 24-hour projection.

// The only opt-in to `unsafe` in the workspace (the workspace lints deny it).
pub mod analysis;
#[allow(unsafe_code)]
pub mod arena;
pub mod recording;
pub mod telemetry;
pub mod workload;

#[cfg(test)]
#[global_allocator]
static TEST_ALLOC: arena::CountingAlloc = arena::CountingAlloc;
