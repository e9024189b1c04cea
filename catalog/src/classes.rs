//! The classes of memory a process's mappings are told in.

/// The classes, in the order they are told.
pub const CLASSES: [&str; 7] = ["heap", "anon", "shmem", "file", "stack", "gpu", "other"];

/// A process whose resident or own memory moved by less than this since
/// its last `smaps` reading is not read again (its classes cannot have
/// moved by more).
pub const CLASSES_MOVED: f64 = 1_048_576.0;
