//! flatline-arena: the instrumented side of flatline.
//!
//! This crate runs the seed proposal's workloads, whose memory behaviour
//! flatline measures, and counts what they allocate. It never depends on a GUI crate (egui, eframe,
//! winit, wgpu): CI checks that with `cargo tree`.
//!
//! * [`arena`] owns raw memory: 64-byte aligned flat buffers, the 64-byte
//!   records that live in them, the counting global allocator and the corpus
//!   memory map.
//! * [`sys`] wraps the few C library calls: glibc malloc statistics,
//!   `sysconf`, thread CPU time, and process signals (`kill` with SIGTERM,
//!   the parent-death signal of a started command).
//!
//!   These two are the only modules allowed `unsafe`; every block there
//!   carries a `// SAFETY:` comment and is exercised by tests that also run
//!   under Miri where Miri can model the call.
//! * [`workload`] holds the two reference workloads of the seed proposal:
//!   [`workload::ops1b`] (the 1-billion-operation ring arena) and
//!   [`workload::ingest`] (nanoGPT-style batch token ingestion, with an
//!   allocating baseline loader beside it).
//! * [`alloc`] reads the counting allocator's totals (who allocated, and
//!   whether the counter is installed at all).
//!
//! What reads a process (the probes and the sampler) is the crate
//! `flatline-telemetry`, the recorder is its `recording`, and what tells flat
//! from staircase from leak is the crate `flatline-analysis`.

// The two opt-ins to `unsafe` in the workspace (the workspace lints deny it):
// `arena` for raw memory, `sys` for C library calls.
pub mod alloc;
#[allow(unsafe_code)]
pub mod arena;
#[allow(unsafe_code)]
pub mod sys;
pub mod workload;

#[cfg(test)]
#[global_allocator]
static TEST_ALLOC: arena::CountingAlloc = arena::CountingAlloc;
