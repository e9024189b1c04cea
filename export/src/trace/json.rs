//! A [`Model`] as Chrome's trace-event JSON (`export --chrome`), alone or
//! merged into a `torch.profiler` trace (`--merge`).
//!
//! Time: `ts` and `dur` are microseconds. Alone, `ts` counts from the Unix
//! epoch (the wall clock). A Kineto trace (torch.profiler's
//! `export_chrome_trace`, torch 2.x) writes `baseTimeNanoseconds` (the wall
//! clock, ns since the epoch) at its top level and each event's `ts` as
//! microseconds after it: recordings/traces/torch-profiler-small.json has
//! `baseTimeNanoseconds` 1790857026000000000 and `ts` about 5.7e12, which
//! add up to the moment it was made. A merged trace's events are written
//! on that same base, so both tools' events line up; a trace without one
//! is taken to count from the epoch. Trace viewers read `ts` only (the
//! base is the profiler's own key), so the merged file shows both on one
//! timeline.
//!
//! Processes keep their real pids: a watched process that torch profiled
//! is the same row in both. The job's row without a pid, and every lane
//! (a thread row: steps, markers, …), take ids above the largest pid
//! Linux can give (2^22), which no real process or thread has.

use std::collections::{BTreeMap, BTreeSet};

use flatline_telemetry::Unit;
use serde_json::{Map, Value, json};

use super::model::{Arg, Mark, Model};

/// The pid of the job's row where the recording names no process (a soak,
/// an import): above Linux's pid ceiling (`pid_max` is at most 2^22).
pub const NO_PID: u32 = (1 << 22) + 1;
/// The first lane's tid; the others follow.
pub const LANE_TID: u32 = (1 << 22) + 16;

/// A trace given to `--merge` that is not one.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("not a trace-event JSON file: {0}")]
    NotATrace(String),
}

/// `{"traceEvents": […], "displayTimeUnit": "ms"}` on the epoch's base.
pub fn document(m: &Model) -> Value {
    json!({
        "traceEvents": events(m, 0, &BTreeSet::new()),
        "displayTimeUnit": "ms",
    })
}

/// `other` (an object with `traceEvents`, or a bare array of events) with
/// the model's events added on its time base; its own keys and events are
/// kept as they are.
pub fn merge(m: &Model, other: Value) -> Result<Value, TraceError> {
    let mut doc = match other {
        Value::Object(o) => o,
        Value::Array(a) => {
            let mut o = Map::new();
            o.insert("traceEvents".into(), Value::Array(a));
            o.insert("displayTimeUnit".into(), "ms".into());
            o
        }
        other => {
            let what = match other {
                Value::Null => "null",
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                _ => "a string",
            };
            return Err(TraceError::NotATrace(format!(
                "{what}, not an object or a list of events"
            )));
        }
    };
    let base_ns = match doc.get("baseTimeNanoseconds") {
        None => 0,
        Some(b) => b
            .as_u64()
            .or_else(|| b.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
            .ok_or_else(|| TraceError::NotATrace(format!("baseTimeNanoseconds is {b}")))?,
    };
    let Some(Value::Array(theirs)) = doc.get_mut("traceEvents") else {
        return Err(TraceError::NotATrace("no traceEvents list".into()));
    };
    if let Some(i) = theirs.iter().position(|e| !e.is_object()) {
        return Err(TraceError::NotATrace(format!("event {i} is not an object")));
    }
    // A process the other trace names keeps its name there.
    let named: BTreeSet<u64> = theirs
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .filter_map(|e| e["pid"].as_u64())
        .collect();
    theirs.extend(events(m, base_ns, &named));
    Ok(Value::Object(doc))
}

/// Every event of the model, `ts` in µs after `base_ns`; no process name
/// for the pids in `named`.
fn events(m: &Model, base_ns: u64, named: &BTreeSet<u64>) -> Vec<Value> {
    let us = |t_ns: u64| (t_ns as i128 - base_ns as i128) as f64 / 1000.0;
    let pid_of = |i: usize| m.procs[i].pid.unwrap_or(NO_PID);
    let mut out = Vec::new();
    for (i, p) in m.procs.iter().enumerate() {
        let pid = pid_of(i);
        if !named.contains(&u64::from(pid)) {
            out.push(
                json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                "args": {"name": p.name}}),
            );
            if !p.labels.is_empty() {
                out.push(
                    json!({"ph": "M", "name": "process_labels", "pid": pid, "tid": 0,
                    "args": {"labels": p.labels.join(", ")}}),
                );
            }
        }
        for c in &p.counters {
            let key = unit_key(c.unit);
            for &(t, v) in &c.points {
                out.push(
                    json!({"ph": "C", "cat": "flatline", "name": c.name, "pid": pid,
                    "tid": pid, "ts": us(t), "args": {key: v}}),
                );
            }
        }
    }
    for (k, lane) in m.lanes.iter().enumerate() {
        let (pid, tid) = (pid_of(lane.proc), LANE_TID + k as u32);
        out.push(
            json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
            "args": {"name": lane.name}}),
        );
        for s in &lane.slices {
            out.push(
                json!({"ph": "X", "cat": "flatline", "name": s.name, "pid": pid,
                "tid": tid, "ts": us(s.t_ns), "dur": s.dur_ns as f64 / 1000.0, "args": args(s)}),
            );
        }
        for i in &lane.instants {
            out.push(
                json!({"ph": "i", "s": "t", "cat": "flatline", "name": i.name,
                "pid": pid, "tid": tid, "ts": us(i.t_ns), "args": args(i)}),
            );
        }
    }
    out.extend(heap_counters(m, &us));
    out
}

/// The counter key of a unit: a viewer names the track `<channel> <key>`.
fn unit_key(unit: Unit) -> &'static str {
    match unit {
        Unit::Bytes => "bytes",
        Unit::Mebibytes => "MiB",
        Unit::Count => "count",
        Unit::Percent => "percent",
        Unit::Nanoseconds => "ns",
        Unit::Microseconds => "us",
        Unit::Milliseconds => "ms",
        Unit::Seconds => "s",
        Unit::Celsius => "celsius",
        Unit::PerSecond => "per_s",
        Unit::Number => "value",
    }
}

fn args(m: &Mark) -> Value {
    let map: Map<String, Value> = m
        .args
        .iter()
        .map(|(k, v)| {
            let v = match v {
                Arg::Text(t) => Value::from(t.clone()),
                Arg::Num(n) => json!(n),
            };
            (k.clone(), v)
        })
        .collect();
    Value::Object(map)
}

/// The heap dumps as counters (Chrome's format has no heap profile): per
/// process, the bytes each allocating frame holds at each dump, one track
/// `heap: <function> <file>:<line>` per frame.
fn heap_counters(m: &Model, us: &dyn Fn(u64) -> f64) -> Vec<Value> {
    let mut out = Vec::new();
    for d in &m.dumps {
        let mut held: BTreeMap<String, u64> = BTreeMap::new();
        for s in &d.samples {
            let leaf = m.stacks[s.stack].last().map(|&f| m.frames[f].label());
            *held.entry(leaf.unwrap_or_default()).or_default() += s.allocated - s.freed;
        }
        for (frame, bytes) in held {
            out.push(
                json!({"ph": "C", "cat": "flatline", "name": format!("heap: {frame}"),
                "pid": d.pid, "tid": d.pid, "ts": us(d.t_ns), "args": {"bytes": bytes}}),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Model, merge};

    #[test]
    fn a_bare_list_is_a_trace_and_anything_else_is_not() {
        let m = Model::default();
        let list = merge(&m, json!([{"ph": "i", "name": "x", "ts": 1}])).unwrap();
        assert_eq!(list["traceEvents"][0]["name"], "x");
        assert_eq!(list["displayTimeUnit"], "ms");
        let bad = [
            json!(3),
            json!({"events": []}),
            json!({"traceEvents": {}}),
            json!({"traceEvents": [], "baseTimeNanoseconds": "soon"}),
            json!([1, 2]),
            json!("trace"),
        ];
        for b in bad {
            let e = merge(&m, b.clone()).unwrap_err();
            assert!(
                e.to_string().starts_with("not a trace-event JSON file"),
                "{b}: {e}"
            );
        }
    }
}
