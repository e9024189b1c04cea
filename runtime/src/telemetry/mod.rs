//! What the process is doing, read cheaply. Today: the allocator counters.

pub mod alloc;
