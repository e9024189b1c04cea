//! A recording as a Perfetto trace (`export --perfetto`) or as Chrome's
//! trace-event JSON (`export --chrome`, `--merge`), for reading a job's
//! memory beside its profiler's trace of the same run.
//!
//! What a trace holds, both formats alike (laid out once, in `model` and
//! `heap`, then encoded by `pftrace` or `json`):
//!
//! - a process row per process of the watched tree (its `pid<N>.*`
//!   channels, named and given a role by their labels), a counter per
//!   channel under it; the channels of no process (`tree.*`, `mem.*`,
//!   `gpu0.*`, `cgroup.*`, `log.*`, …) under the job's row, which is the
//!   watched process's own where the tree has it (the header's `pid`);
//! - steps as slices (each from the step before to its own end) on a
//!   `steps` lane, markers and phases as instants on `markers`; starts,
//!   exits and deaths (exit statuses, OOM kills, printed out-of-memory
//!   errors) on the `events` lane of the process they concern;
//! - the receipt's headline and findings as instants at the end of the
//!   part written, on the job's `findings` lane, or on the lane of the
//!   process a growth is in;
//! - the allocation sites (`watch --sites`) as heap dumps at round
//!   intervals (at most about 60), per process.
//!
//! Every moment is the wall clock: the header's `started_unix_ms` plus a
//! sample's or event's `t_ns`.

mod heap;
mod json;
mod model;
mod pftrace;
mod proto;
#[cfg(test)]
mod tests;

use flatline_receipt::report;
use flatline_telemetry::recording::Recording;

pub use json::TraceError;
pub use model::TraceRange;

/// The Perfetto trace (`perfetto.protos.Trace`), encoded.
pub fn perfetto(rec: &Recording, range: TraceRange) -> Vec<u8> {
    pftrace::encode(&layout(rec, range))
}

/// The Chrome trace-event JSON: `{"traceEvents": […], "displayTimeUnit":
/// "ms"}`, `ts` in microseconds since the Unix epoch.
pub fn chrome(rec: &Recording, range: TraceRange) -> serde_json::Value {
    json::document(&layout(rec, range))
}

/// Chrome JSON of `rec` merged into `other` (a trace-event JSON object or
/// array as torch.profiler writes it), on `other`'s time base; an error if
/// `other` is not a trace.
pub fn merge(
    rec: &Recording,
    range: TraceRange,
    other: serde_json::Value,
) -> Result<serde_json::Value, TraceError> {
    json::merge(&layout(rec, range), other)
}

/// The recording laid out: rows, lanes, findings (the receipt of the same
/// part: its JSON's `headline` and `findings`) and heap dumps.
fn layout(rec: &Recording, range: TraceRange) -> model::Model {
    let mut m = model::Model::build(rec, range);
    let receipt = if range.from_s.is_none() && range.to_s.is_none() {
        report::analyse(rec, None)
    } else {
        let end_s = rec.t_ns.last().map_or(0.0, |&t| t as f64 / 1e9);
        let from = range.from_s.unwrap_or(0.0).max(0.0);
        let to = range.to_s.unwrap_or(end_s).min(end_s).max(from);
        report::analyse_range(rec, None, Some([from, to]))
    };
    let findings = report::json_report(rec, &receipt);
    m.add_findings(rec, range, &findings);
    heap::add_dumps(&mut m, rec, range);
    m
}
