//! The GPU's channels that the analysis reads by name.

/// The leaf of a device's memory used by the watched processes.
pub const PROC_USED: &str = "proc_used";

/// Whether `name` is a device's memory used by the watched processes
/// (`gpu0.proc_used`, `gpu1-2.proc_used`).
pub fn is_proc_used(name: &str) -> bool {
    crate::declared(name).is_some_and(|d| d.name.strip_prefix("gpu#.") == Some(PROC_USED))
}
