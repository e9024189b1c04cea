//! The names of printed keys: a key's channel leaf and the unit its name
//! implies. Shared by the line parser ([`super::output`]), the progress-bar
//! parser ([`super::bars`]) and CSV import, so a key printed by a job and a
//! column of a CSV become the same channel.

use super::Unit;

/// A channel leaf from a printed key: lower case, runs of anything but
/// letters and digits as one `_`.
pub fn leaf(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for c in key.trim().chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('_') && !out.is_empty() {
            out.push('_');
        }
    }
    while out.ends_with('_') {
        out.pop();
    }
    out
}

/// The unit a column name's suffix implies.
pub fn unit_of(column: &str) -> Unit {
    let c = column.to_ascii_lowercase();
    if c == "step" || c == "steps" || c == "tokens" || c.ends_with("_count") {
        Unit::Count
    } else if c.ends_with("_mb") || c.ends_with("_mib") {
        Unit::Mebibytes
    } else if c.ends_with("_bytes") {
        Unit::Bytes
    } else if c.ends_with("_per_sec") || c.ends_with("_per_s") {
        Unit::PerSecond
    } else if c.ends_with("_us") {
        Unit::Microseconds
    } else if c.ends_with("_ms") {
        Unit::Milliseconds
    } else if c.ends_with("_ns") {
        Unit::Nanoseconds
    } else if c.ends_with("_s") {
        Unit::Seconds
    } else if c.ends_with("_pct") || c.ends_with("_percent") {
        Unit::Percent
    } else {
        Unit::Number
    }
}
