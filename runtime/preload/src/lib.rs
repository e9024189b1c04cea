//! flatline-preload: the library `flatline watch --sites -- CMD` preloads
//! into the command (`LD_PRELOAD`), to say which code holds the memory a
//! job grows.
//!
//! It replaces `malloc`, `calloc`, `realloc`, `reallocarray`, `free`,
//! `posix_memalign`, `aligned_alloc`, `memalign`, `valloc`, `pvalloc`,
//! `mmap`/`mmap64` (anonymous mappings) and `munmap`, each forwarding to the
//! allocator that comes next (glibc's, or one the program links), and:
//!
//! - counts the bytes the program holds, allocated less freed, exactly
//!   (each block's usable size; anonymous mappings by length);
//! - samples allocations by bytes, as tcmalloc, jemalloc and Go's heap
//!   profiler do: one per `FLATLINE_SITES_EVERY` bytes (512 KiB) on
//!   average, the gaps drawn from an exponential distribution, so a block
//!   of `s` bytes is sampled with probability 1 − e^(−s/every) and stands
//!   for s / (1 − e^(−s/every)) bytes;
//! - records each sampled block's address, size, native stack (glibc's
//!   `backtrace`) and, in a CPython 3.10 to 3.13 process, the calling
//!   thread's Python frames (code object and line, read from the
//!   interpreter's own frame records without calling into it, so without
//!   allocating or taking the GIL: [`python`] says where each version keeps
//!   them), and the sampled block's free;
//! - hands the records to flatline through a ring in shared memory
//!   (`flatline_format::sites`), one per process, never waiting: a full ring
//!   drops and counts.
//!
//! A forked child (a DataLoader worker) opens a ring of its own; an `exec`
//! keeps `LD_PRELOAD` and `FLATLINE_SITES_DIR` in the environment, so the
//! new program is sampled too, into a new ring. Without
//! `FLATLINE_SITES_DIR` the library only forwards.
//!
//! Every `unsafe` block is in `hooks`; the rest is plain logic, tested as
//! such (also under Miri): when to sample ([`sampling`]), where a Python keeps its frames
//! ([`python`]), the ring's
//! records and their claim and publication ([`ring`]), the tables
//! ([`table`]). The hooks are left out
//! of the test build: a test binary's own `malloc` would be theirs.

#[cfg(all(target_os = "linux", not(test)))]
mod hooks;
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) mod python;
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) mod ring;
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) mod sampling;
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) mod table;
