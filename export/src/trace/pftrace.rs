//! A [`Model`] as a Perfetto trace (`perfetto.protos.Trace`): a process
//! track per row with a counter track per channel under it, a child track
//! per lane (steps as slices, the rest as instants), and the heap dumps as
//! heapprofd's `ProfilePacket`s.
//!
//! Time: every packet is stamped on `BUILTIN_CLOCK_REALTIME` (clock id 1,
//! `timestamp_clock_id`), in ns since the Unix epoch, so the trace lines up
//! with anything else stamped on the wall clock (a `torch.profiler` trace
//! of the same run). The trace's first packet is a `ClockSnapshot` whose
//! `primary_trace_clock` is REALTIME: Perfetto's docs
//! (docs/concepts/clock-sync.md, protos/perfetto/trace/clock_snapshot.proto)
//! make that the trace's own timeline, so the UI shows wall-clock times.
//! The snapshot also sets BOOTTIME (an older trace processor's default
//! trace clock) and MONOTONIC_COARSE (the clock trace processor reads a
//! heap dump's `timestamp` in) equal to REALTIME: a recording has only the
//! wall clock, and these identities keep every timestamp where it was.
//!
//! Sequences: track events on sequence 1, heap dumps on sequence 2, each
//! opened with `SEQ_INCREMENTAL_STATE_CLEARED`. Nothing is interned (names
//! are written in full), so no packet needs incremental state; the dumps
//! carry their own tables of strings, frames and stacks, which hold for
//! their packet only (trace processor clears them after each).

use flatline_telemetry::Unit;
use prost::Message;

use super::model::{Arg, Mark, Model};
use super::proto::{
    AnnotationValue, CLOCK_BOOTTIME, CLOCK_MONOTONIC_COARSE, CLOCK_REALTIME, Callstack, Clock,
    ClockSnapshot, CounterDescriptor, Data, DebugAnnotation, Frame, HeapSample, InternedString,
    Mapping, ProcessDescriptor, ProcessHeapSamples, ProfilePacket, SEQ_INCREMENTAL_STATE_CLEARED,
    TYPE_COUNTER, TYPE_INSTANT, TYPE_SLICE_BEGIN, TYPE_SLICE_END, Trace, TracePacket,
    TrackDescriptor, TrackEvent, UNIT_COUNT, UNIT_SIZE_BYTES, UNIT_TIME_NS,
};

/// The sequence of the track descriptors and events.
pub const TRACK_SEQ: u32 = 1;
/// The sequence of the heap dumps.
pub const PROFILE_SEQ: u32 = 2;
/// The heap a dump is of: the sampled allocations are the malloc family's
/// (the preloaded library replaces it), heapprofd's native heap.
pub const HEAP_NAME: &str = "libc.malloc";

/// The trace, encoded.
pub fn encode(m: &Model) -> Vec<u8> {
    let mut packet = vec![clock_snapshot(m.base_ns)];
    tracks(m, &mut packet);
    profiles(m, &mut packet);
    Trace { packet }.encode_to_vec()
}

/// A packet of sequence `seq`, stamped `t_ns` on the wall clock.
fn packet(seq: u32, t_ns: Option<u64>, data: Data) -> TracePacket {
    TracePacket {
        timestamp: t_ns,
        timestamp_clock_id: t_ns.map(|_| CLOCK_REALTIME),
        trusted_packet_sequence_id: Some(seq),
        sequence_flags: None,
        data: Some(data),
    }
}

/// The first packet: the wall clock is the trace's clock (see the module's
/// comment).
fn clock_snapshot(base_ns: u64) -> TracePacket {
    let clock = |id| Clock {
        clock_id: Some(id),
        timestamp: Some(base_ns),
    };
    let snapshot = ClockSnapshot {
        clocks: vec![
            clock(CLOCK_REALTIME),
            clock(CLOCK_BOOTTIME),
            clock(CLOCK_MONOTONIC_COARSE),
        ],
        primary_trace_clock: Some(CLOCK_REALTIME as i32),
    };
    let mut p = packet(TRACK_SEQ, None, Data::ClockSnapshot(snapshot));
    p.sequence_flags = Some(SEQ_INCREMENTAL_STATE_CLEARED);
    p
}

/// The descriptors of every track, then every counter value, slice and
/// instant on them.
fn tracks(m: &Model, out: &mut Vec<TracePacket>) {
    let mut next = 0u64;
    let mut uuid = || {
        next += 1;
        next
    };
    let descriptor = |d: TrackDescriptor| packet(TRACK_SEQ, None, Data::TrackDescriptor(d));
    let mut proc_uuids = Vec::new();
    let mut events = Vec::new();
    for p in &m.procs {
        let id = uuid();
        proc_uuids.push(id);
        let process = p.pid.map(|pid| ProcessDescriptor {
            pid: Some(pid as i32),
            cmdline: p.cmdline.clone(),
            process_name: Some(p.name.clone()),
            process_labels: p.labels.clone(),
        });
        let name = match p.pid {
            Some(_) => None,
            None => Some(p.name.clone()),
        };
        out.push(descriptor(TrackDescriptor {
            uuid: Some(id),
            name,
            process,
            description: (!p.role.is_empty()).then(|| format!("role: {}", p.role)),
            ..TrackDescriptor::default()
        }));
        for c in &p.counters {
            let track = uuid();
            out.push(descriptor(TrackDescriptor {
                uuid: Some(track),
                parent_uuid: Some(id),
                name: Some(c.name.clone()),
                counter: Some(counter_descriptor(c.unit)),
                ..TrackDescriptor::default()
            }));
            for &(t, v) in &c.points {
                let e = TrackEvent {
                    r#type: Some(TYPE_COUNTER),
                    track_uuid: Some(track),
                    double_counter_value: Some(v),
                    ..TrackEvent::default()
                };
                events.push(packet(TRACK_SEQ, Some(t), Data::TrackEvent(e)));
            }
        }
    }
    for lane in &m.lanes {
        let track = uuid();
        out.push(descriptor(TrackDescriptor {
            uuid: Some(track),
            parent_uuid: Some(proc_uuids[lane.proc]),
            name: Some(lane.name.clone()),
            ..TrackDescriptor::default()
        }));
        // A slice's end before the next one's begin at the same moment:
        // trace processor keeps a sequence's order among equal stamps.
        for s in &lane.slices {
            events.push(mark(track, TYPE_SLICE_BEGIN, s, s.t_ns));
            events.push(mark(track, TYPE_SLICE_END, s, s.t_ns + s.dur_ns));
        }
        for i in &lane.instants {
            events.push(mark(track, TYPE_INSTANT, i, i.t_ns));
        }
    }
    out.extend(events);
}

/// A slice's begin or end, or an instant, on track `track` at `t_ns`.
fn mark(track: u64, kind: i32, m: &Mark, t_ns: u64) -> TracePacket {
    let end = kind == TYPE_SLICE_END;
    let e = TrackEvent {
        r#type: Some(kind),
        track_uuid: Some(track),
        name: (!end).then(|| m.name.clone()),
        categories: if end { vec![] } else { vec!["flatline".into()] },
        debug_annotations: if end {
            vec![]
        } else {
            m.args.iter().map(|(k, v)| annotation(k, v)).collect()
        },
        ..TrackEvent::default()
    };
    packet(TRACK_SEQ, Some(t_ns), Data::TrackEvent(e))
}

fn annotation(name: &str, value: &Arg) -> DebugAnnotation {
    let value = match value {
        Arg::Text(t) => AnnotationValue::Text(t.clone()),
        Arg::Num(v) if v.fract() == 0.0 && v.abs() < 9.0e15 => AnnotationValue::Int(*v as i64),
        Arg::Num(v) => AnnotationValue::Double(*v),
    };
    DebugAnnotation {
        name: Some(name.to_owned()),
        value: Some(value),
    }
}

/// What a channel's values are in: bytes (a MiB column scaled to them),
/// a count, a time scaled to ns, else a unit's name.
pub fn counter_descriptor(unit: Unit) -> CounterDescriptor {
    let (unit, multiplier, name) = match unit {
        Unit::Bytes => (Some(UNIT_SIZE_BYTES), None, None),
        Unit::Mebibytes => (Some(UNIT_SIZE_BYTES), Some(1 << 20), None),
        Unit::Count => (Some(UNIT_COUNT), None, None),
        Unit::Nanoseconds => (Some(UNIT_TIME_NS), None, None),
        Unit::Microseconds => (Some(UNIT_TIME_NS), Some(1_000), None),
        Unit::Milliseconds => (Some(UNIT_TIME_NS), Some(1_000_000), None),
        Unit::Seconds => (Some(UNIT_TIME_NS), Some(1_000_000_000), None),
        Unit::Percent => (None, None, Some("%")),
        Unit::Celsius => (None, None, Some("°C")),
        Unit::PerSecond => (None, None, Some("/s")),
        Unit::Number => (None, None, None),
    };
    CounterDescriptor {
        unit,
        unit_multiplier: multiplier,
        unit_name: name.map(str::to_owned),
    }
}

/// One `ProfilePacket` per moment with dumps, all of that moment's
/// processes in it.
fn profiles(m: &Model, out: &mut Vec<TracePacket>) {
    if m.dumps.is_empty() {
        return;
    }
    let tables = tables(m);
    let mut index = 0u64;
    let mut i = 0;
    while i < m.dumps.len() {
        let t = m.dumps[i].t_ns;
        let n = m.dumps[i..].iter().take_while(|d| d.t_ns == t).count();
        let process_dumps = m.dumps[i..i + n]
            .iter()
            .map(|d| ProcessHeapSamples {
                pid: Some(u64::from(d.pid)),
                timestamp: Some(d.t_ns),
                heap_name: Some(HEAP_NAME.into()),
                samples: d
                    .samples
                    .iter()
                    .map(|s| HeapSample {
                        callstack_id: Some(s.stack as u64 + 1),
                        self_allocated: Some(s.allocated),
                        self_freed: Some(s.freed),
                        alloc_count: Some(s.allocs),
                        free_count: Some(s.frees),
                    })
                    .collect(),
            })
            .collect();
        let mut p = packet(
            PROFILE_SEQ,
            Some(t),
            Data::ProfilePacket(ProfilePacket {
                process_dumps,
                continued: Some(false),
                index: Some(index),
                ..tables.clone()
            }),
        );
        if index == 0 {
            p.sequence_flags = Some(SEQ_INCREMENTAL_STATE_CLEARED);
        }
        out.push(p);
        index += 1;
        i += n;
    }
}

/// The strings, mappings (one per source file, its path's parts), frames
/// (`rel_pc`: the line) and stacks every dump refers to. Ids start at 1.
/// Every mapping's build id is string 1, the empty string, written in each
/// packet: trace processor clears a packet's strings after it, its implicit
/// string 0 with them, and a mapping whose build id it cannot find is
/// dropped, with its frames and their stacks.
fn tables(m: &Model) -> ProfilePacket {
    let mut strings: Vec<String> = Vec::new();
    let mut intern = |s: &str| -> u64 {
        let at = strings.iter().position(|x| x == s).unwrap_or_else(|| {
            strings.push(s.to_owned());
            strings.len() - 1
        });
        at as u64 + 1
    };
    let no_build_id = intern("");
    let mut files: Vec<&str> = Vec::new();
    let mut mappings = Vec::new();
    let mut frames = Vec::new();
    for (i, f) in m.frames.iter().enumerate() {
        let file = if f.file.is_empty() {
            "unknown"
        } else {
            &f.file
        };
        let map = match files.iter().position(|x| *x == file) {
            Some(at) => at,
            None => {
                files.push(file);
                let at = files.len() - 1;
                let path_string_ids = file
                    .split('/')
                    .filter(|p| !p.is_empty())
                    .map(&mut intern)
                    .collect();
                mappings.push(Mapping {
                    iid: Some(at as u64 + 1),
                    build_id: Some(no_build_id),
                    start: Some((at as u64) << 32),
                    end: Some((at as u64 + 1) << 32),
                    path_string_ids,
                });
                at
            }
        };
        frames.push(Frame {
            iid: Some(i as u64 + 1),
            function_name_id: Some(intern(&f.label())),
            mapping_id: Some(map as u64 + 1),
            rel_pc: Some(f.line.max(0) as u64),
        });
    }
    let callstacks = m
        .stacks
        .iter()
        .enumerate()
        .map(|(i, s)| Callstack {
            iid: Some(i as u64 + 1),
            frame_ids: s.iter().map(|&f| f as u64 + 1).collect(),
        })
        .collect();
    let strings = strings
        .into_iter()
        .enumerate()
        .map(|(i, s)| InternedString {
            iid: Some(i as u64 + 1),
            str: Some(s.into_bytes()),
        })
        .collect();
    ProfilePacket {
        strings,
        frames,
        callstacks,
        mappings,
        ..ProfilePacket::default()
    }
}
