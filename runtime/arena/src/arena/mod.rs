//! Raw memory, in one place.
//!
//! Everything in flatline that needs `unsafe` for memory lives below this
//! module (the C library calls live in [`crate::sys`]):
//!
//! * [`FlatArena`]: a fixed-capacity buffer whose first element sits on a
//!   64-byte boundary (one x86-64 cache line), allocated zeroed once at
//!   construction and never grown, moved or reallocated. Indexing it is plain
//!   slice indexing.
//! * [`QueueOrder64`] and [`BatchSlot64`]: the 64-byte records of the seed
//!   proposal, with their size and alignment checked at compile time.
//! * [`CountingAlloc`]: a `#[global_allocator]` wrapper around the system
//!   allocator that counts calls and bytes, so "zero allocations on the hot
//!   path" is a number, not a promise.
//! * [`map_tokens`]: a read-only memory map of a token file seen as `u16`s.
//! * [`gather_rows`]: the ingest kernel, dispatched to AVX2 when the CPU has it;
//!   [`gather_rows_ahead`] also prefetches the next batch's rows.
//! * [`barrier`]: the C references' per-operation compiler barrier, without
//!   the stack store that `black_box` makes.
//!
//! Every `unsafe` block has a `// SAFETY:` comment saying why it holds; the
//! tests in each submodule exercise each block and run under Miri
//! (`cargo +nightly miri test -p flatline-arena arena::`).

mod barrier;
mod buf;
mod counting;
mod gather;
mod mapped;
mod records;

pub use barrier::barrier;
pub use buf::{ARENA_ALIGN, ArenaError, FlatArena, Zeroable};
pub use counting::{AllocStats, CountingAlloc};
pub use gather::{gather_rows, gather_rows_ahead};
pub use mapped::{MapError, MappedTokens, anon_tokens, map_tokens};
pub use records::{BatchSlot64, QueueOrder64};

pub(crate) use counting::{is_installed, mark_observer_thread, stats, thread_allocs};
