//! The trace exports of a small watch built here: what is encoded is
//! decoded with the same prost messages (and the JSON read back) and its
//! values checked against the recording.

use std::collections::BTreeMap;
use std::path::Path;

use flatline_telemetry::recording::{
    Event, EventKind, Header, HostFacts, Recording, RecordingWriter,
};
use flatline_telemetry::{ChannelSpec, Group, Sample, Schema, Unit};
use prost::Message;
use serde_json::{Value, json};

use super::proto::{self, Data, Trace, TracePacket, TrackDescriptor, TrackEvent};
use super::{TraceRange, chrome, merge, perfetto};

/// The recording's wall-clock start: 2023-11-14T22:13:20Z.
const START_MS: u64 = 1_700_000_000_000;
const BASE_NS: u64 = START_MS * 1_000_000;
/// 31 samples, one a second.
const SAMPLES: u64 = 31;
const SEC: u64 = 1_000_000_000;

fn spec(name: &str, unit: Unit, labels: &[(&str, &str)]) -> ChannelSpec {
    labels
        .iter()
        .fold(ChannelSpec::new(name, unit, Group::Memory), |c, (k, v)| {
            c.with_label(k, *v)
        })
}

fn process(name: &str, pid: &str, who: &str, role: &str) -> ChannelSpec {
    spec(
        name,
        Unit::Bytes,
        &[("pid", pid), ("ppid", "1"), ("name", who), ("role", role)],
    )
}

/// A watch of `python3 job.py` (pid 100) and its worker 101, whose site
/// `leak_here` (joining at sample 5) keeps 1 MiB a second; steps at 1, 2
/// and 3 s, a marker at 2.5 s, the worker OOM-killed at 29 s.
fn recording(dir: &Path) -> Recording {
    let schema = Schema {
        channels: vec![
            spec("mem.rss", Unit::Bytes, &[]),
            spec("tree.pss", Unit::Bytes, &[]),
            process("pid100.rss", "100", "python3", "main"),
            process("pid101.rss", "101", "pt_worker", "worker"),
            spec("log.loss", Unit::Number, &[]),
            spec("cgroup.max", Unit::Bytes, &[]),
        ],
    };
    let config = BTreeMap::from([
        ("pid".to_owned(), "100".to_owned()),
        ("command".to_owned(), "python3 job.py".to_owned()),
    ]);
    let mut header = Header::new("watch", schema, HostFacts::default(), config, vec![]);
    header.started_unix_ms = START_MS;
    let path = dir.join("w.flr");
    let mut w = RecordingWriter::create(&path, &header, true).unwrap();
    let site = [("pid", "101"), ("role", "site")];
    let mut live = site.to_vec();
    live.extend([
        ("function", "leak_here"),
        ("file", "/src/job.py"),
        ("line", "12"),
        ("frames", "/src/job.py:12 leak_here\n/src/job.py:30 main"),
    ]);
    for i in 0..SAMPLES {
        if i == 5 {
            w.add_channels(&[
                spec("site0.live", Unit::Bytes, &live),
                spec("site0.objects", Unit::Count, &site),
                spec("site0.alloc_bytes", Unit::Bytes, &site),
                spec("site0.allocs", Unit::Count, &site),
            ])
            .unwrap();
        }
        let mut v = vec![
            1e8 + i as f64 * 4096.0,
            2e8 + i as f64,
            9e7 + i as f64 * 1024.0,
            if i == 7 { f64::NAN } else { 5e7 + i as f64 },
            2.0 - i as f64 * 0.01,
            8e9,
        ];
        if i >= 5 {
            let mib = (i - 4) as f64 * 1_048_576.0;
            // Allocated over-counts at first and then lags: the estimate's noise.
            v.extend([
                mib,
                (i - 4) as f64 * 16.0,
                mib * 1.5 - 1000.0,
                (i - 4) as f64 * 20.0,
            ]);
        }
        w.push_sample(&Sample::from_values(i, i * SEC, &v)).unwrap();
    }
    let step = |step, tokens| EventKind::Step { step, tokens };
    let oom = "Killed process 101 (pt_worker)";
    let exited = EventKind::ProcessExited {
        pid: 101,
        name: "pt_worker".into(),
        role: "worker".into(),
    };
    let events = [
        (SEC, step(1, None)),
        (2 * SEC, step(2, Some(64))),
        (5 * SEC / 2, EventKind::Marker("eval".into())),
        (3 * SEC, step(3, None)),
        (
            29 * SEC,
            EventKind::fact("kernel_oom_kill", oom, &[("anon_rss", 3e9)]).of_pid(101),
        ),
        (29 * SEC, exited),
    ];
    for (t_ns, kind) in events {
        w.push_event(Event { t_ns, kind }).unwrap();
    }
    w.finish("completed").unwrap();
    Recording::open(&path).unwrap()
}

fn decoded(rec: &Recording, range: TraceRange) -> Vec<TracePacket> {
    Trace::decode(perfetto(rec, range).as_slice())
        .unwrap()
        .packet
}

fn descriptors(packets: &[TracePacket]) -> Vec<&TrackDescriptor> {
    packets
        .iter()
        .filter_map(|p| match &p.data {
            Some(Data::TrackDescriptor(d)) => Some(d),
            _ => None,
        })
        .collect()
}

fn track<'a>(
    packets: &'a [TracePacket],
    name: &str,
    parent_pid: Option<i32>,
) -> &'a TrackDescriptor {
    let ds = descriptors(packets);
    let parent = |d: &TrackDescriptor| {
        ds.iter()
            .find(|p| p.uuid == d.parent_uuid)
            .and_then(|p| p.process.as_ref())
            .and_then(|p| p.pid)
    };
    ds.iter()
        .copied()
        .find(|d| d.name.as_deref() == Some(name) && parent(d) == parent_pid)
        .unwrap_or_else(|| panic!("no track {name} under {parent_pid:?}"))
}

/// Every event on track `uuid`, with its packet's timestamp.
fn events_on(packets: &[TracePacket], uuid: Option<u64>) -> Vec<(u64, &TrackEvent)> {
    packets
        .iter()
        .filter_map(|p| match &p.data {
            Some(Data::TrackEvent(e)) if e.track_uuid == uuid => {
                assert_eq!(p.timestamp_clock_id, Some(proto::CLOCK_REALTIME));
                assert_eq!(p.trusted_packet_sequence_id, Some(1));
                Some((p.timestamp.unwrap(), e))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn the_trace_starts_on_the_wall_clock() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recording(dir.path());
    let packets = decoded(&rec, TraceRange::default());
    let Some(Data::ClockSnapshot(snap)) = &packets[0].data else {
        panic!("the first packet is no clock snapshot: {:?}", packets[0]);
    };
    assert_eq!(snap.primary_trace_clock, Some(proto::CLOCK_REALTIME as i32));
    let ids: Vec<u32> = snap.clocks.iter().filter_map(|c| c.clock_id).collect();
    assert_eq!(ids, [1, 6, 4]);
    assert!(snap.clocks.iter().all(|c| c.timestamp == Some(BASE_NS)));
    assert_eq!(
        packets[0].sequence_flags,
        Some(proto::SEQ_INCREMENTAL_STATE_CLEARED)
    );
}

#[test]
fn each_process_has_its_counters_with_the_recorded_values() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recording(dir.path());
    let packets = decoded(&rec, TraceRange::default());
    let procs: Vec<(i32, String)> = descriptors(&packets)
        .iter()
        .filter_map(|d| d.process.as_ref())
        .map(|p| (p.pid.unwrap(), p.process_name.clone().unwrap()))
        .collect();
    // The job's row is its own process's: one row for pid 100.
    assert_eq!(procs, [(100, "python3".into()), (101, "pt_worker".into())]);
    let worker = track(&packets, "pid101.rss", Some(101));
    let unit = worker.counter.as_ref().unwrap().unit;
    assert_eq!(unit, Some(proto::UNIT_SIZE_BYTES));
    let values: Vec<(u64, f64)> = events_on(&packets, worker.uuid)
        .into_iter()
        .map(|(t, e)| {
            assert_eq!(e.r#type, Some(proto::TYPE_COUNTER));
            (t, e.double_counter_value.unwrap())
        })
        .collect();
    let want: Vec<(u64, f64)> = (0..SAMPLES)
        .filter(|&i| i != 7)
        .map(|i| (BASE_NS + i * SEC, 5e7 + i as f64))
        .collect();
    assert_eq!(values, want);
    // The channels of no process sit on the job's row.
    for name in ["mem.rss", "tree.pss", "pid100.rss", "log.loss"] {
        let t = track(&packets, name, Some(100));
        assert_eq!(
            events_on(&packets, t.uuid).len(),
            SAMPLES as usize,
            "{name}"
        );
    }
    // A flat channel: its first and last readings.
    let flat = track(&packets, "cgroup.max", Some(100));
    let at: Vec<u64> = events_on(&packets, flat.uuid)
        .iter()
        .map(|(t, e)| {
            assert_eq!(e.double_counter_value, Some(8e9));
            (t - BASE_NS) / SEC
        })
        .collect();
    assert_eq!(at, [0, SAMPLES - 1]);
    // Sites are heap dumps, not counters.
    assert!(
        descriptors(&packets)
            .iter()
            .all(|d| !d.name.as_deref().unwrap_or("").starts_with("site"))
    );
}

#[test]
fn steps_are_slices_and_markers_and_deaths_instants() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recording(dir.path());
    let packets = decoded(&rec, TraceRange::default());
    let steps = track(&packets, "steps", Some(100));
    let slices: Vec<(u64, i32, Option<&str>)> = events_on(&packets, steps.uuid)
        .into_iter()
        .map(|(t, e)| (t - BASE_NS, e.r#type.unwrap(), e.name.as_deref()))
        .collect();
    let (b, e) = (proto::TYPE_SLICE_BEGIN, proto::TYPE_SLICE_END);
    assert_eq!(
        slices,
        [
            (0, b, Some("step 1")),
            (SEC, e, None),
            (SEC, b, Some("step 2")),
            (2 * SEC, e, None),
            (2 * SEC, b, Some("step 3")),
            (3 * SEC, e, None),
        ]
    );
    let markers = track(&packets, "markers", Some(100));
    let on = events_on(&packets, markers.uuid);
    assert_eq!(on.len(), 1);
    assert_eq!(on[0].0, BASE_NS + 5 * SEC / 2);
    assert_eq!(on[0].1.r#type, Some(proto::TYPE_INSTANT));
    assert_eq!(on[0].1.name.as_deref(), Some("eval"));
    // The OOM kill and the exit are the worker's.
    let deaths = track(&packets, "events", Some(101));
    let names: Vec<&str> = events_on(&packets, deaths.uuid)
        .into_iter()
        .map(|(t, e)| {
            assert_eq!(t, BASE_NS + 29 * SEC);
            e.name.as_deref().unwrap()
        })
        .collect();
    assert_eq!(
        names,
        [
            "kernel_oom_kill: Killed process 101 (pt_worker)",
            "exited: pt_worker 101 (worker)"
        ]
    );
    let oom = events_on(&packets, deaths.uuid)[0].1;
    let figure = oom
        .debug_annotations
        .iter()
        .find(|a| a.name.as_deref() == Some("anon_rss"))
        .unwrap();
    assert_eq!(
        figure.value,
        Some(proto::AnnotationValue::Int(3_000_000_000))
    );
}

#[test]
fn the_headline_and_findings_are_instants_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recording(dir.path());
    let packets = decoded(&rec, TraceRange::default());
    let report =
        flatline_receipt::report::json_report(&rec, &flatline_receipt::report::analyse(&rec, None));
    let headline = report["headline"].as_str().unwrap();
    let mut texts = Vec::new();
    for d in descriptors(&packets)
        .into_iter()
        .filter(|d| d.name.as_deref() == Some("findings"))
    {
        for (t, e) in events_on(&packets, d.uuid) {
            assert_eq!(t, BASE_NS + (SAMPLES - 1) * SEC);
            let text = e
                .debug_annotations
                .iter()
                .find(|a| a.name.as_deref() == Some("text"))
                .and_then(|a| match &a.value {
                    Some(proto::AnnotationValue::Text(t)) => Some(t.clone()),
                    _ => None,
                })
                .unwrap();
            texts.push(text);
        }
    }
    assert_eq!(texts.first().map(String::as_str), Some(headline));
    // Each finding once, the headline's sentence among them once.
    let findings: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["text"].as_str().unwrap())
        .filter(|t| *t != headline)
        .collect();
    assert!(!findings.is_empty(), "{report}");
    assert_eq!(texts.len(), 1 + findings.len(), "{texts:?}");
    for f in findings {
        assert!(texts.iter().any(|t| t == f), "{f}");
    }
}

/// The dumps of one process: (time, held bytes per stack, allocated,
/// freed) in the order written.
fn dumps(packets: &[TracePacket]) -> Vec<(u64, u64, u64, u64)> {
    let mut out = Vec::new();
    for (k, p) in packets
        .iter()
        .filter(|p| matches!(p.data, Some(Data::ProfilePacket(_))))
        .enumerate()
    {
        let Some(Data::ProfilePacket(pp)) = &p.data else {
            unreachable!()
        };
        assert_eq!(p.trusted_packet_sequence_id, Some(2));
        assert_eq!(pp.index, Some(k as u64));
        assert_eq!(p.sequence_flags.is_some(), k == 0);
        let strings: Vec<String> = pp
            .strings
            .iter()
            .map(|s| String::from_utf8(s.str.clone().unwrap()).unwrap())
            .collect();
        // The stack, outermost first: main, then leak_here.
        assert_eq!(pp.callstacks.len(), 1);
        let names: Vec<&str> = pp.callstacks[0]
            .frame_ids
            .iter()
            .map(|&f| {
                let frame = &pp.frames[f as usize - 1];
                assert_eq!(frame.iid, Some(f));
                strings[frame.function_name_id.unwrap() as usize - 1].as_str()
            })
            .collect();
        assert_eq!(names, ["main job.py:30", "leak_here job.py:12"]);
        assert_eq!(pp.mappings.len(), 1);
        let path: Vec<&str> = pp.mappings[0]
            .path_string_ids
            .iter()
            .map(|&s| strings[s as usize - 1].as_str())
            .collect();
        assert_eq!(path, ["src", "job.py"]);
        // Its build id is a string of the packet's own (trace processor
        // forgets a packet's strings after it).
        let build = pp.mappings[0].build_id.unwrap();
        assert!(build > 0 && strings[build as usize - 1].is_empty());
        assert_eq!(pp.process_dumps.len(), 1);
        let d = &pp.process_dumps[0];
        assert_eq!(
            (d.pid, d.heap_name.as_deref()),
            (Some(101), Some("libc.malloc"))
        );
        assert_eq!(d.timestamp, p.timestamp);
        let s = &d.samples[0];
        let (a, f) = (s.self_allocated.unwrap(), s.self_freed.unwrap());
        out.push((d.timestamp.unwrap(), a - f, a, f));
    }
    out
}

#[test]
fn sites_are_heap_dumps_whose_totals_never_fall() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recording(dir.path());
    let got = dumps(&decoded(&rec, TraceRange::default()));
    // 30 s: a dump every second from the site's first reading (5 s) on.
    assert_eq!(got.len(), 26);
    for (k, &(t, held, _, _)) in got.iter().enumerate() {
        let i = 5 + k as u64;
        assert_eq!(t, BASE_NS + i * SEC);
        assert_eq!(held, (i - 4) * 1_048_576, "held at {i} s");
    }
    for w in got.windows(2) {
        assert!(w[1].2 >= w[0].2 && w[1].3 >= w[0].3, "{w:?}");
    }
}

#[test]
fn a_range_and_a_pid_keep_their_part() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recording(dir.path());
    let range = TraceRange {
        from_s: Some(10.0),
        to_s: Some(20.0),
        pid: Some(100),
    };
    let packets = decoded(&rec, range);
    let pids: Vec<i32> = descriptors(&packets)
        .iter()
        .filter_map(|d| d.process.as_ref()?.pid)
        .collect();
    assert_eq!(pids, [100]);
    let rss = track(&packets, "pid100.rss", Some(100));
    let times: Vec<u64> = events_on(&packets, rss.uuid)
        .iter()
        .map(|(t, _)| (t - BASE_NS) / SEC)
        .collect();
    assert_eq!(times, (10..=20).collect::<Vec<u64>>());
    assert!(dumps(&packets).is_empty(), "the site is pid 101's");
    // The worker's site alone, from 10 s to 20 s.
    let worker = TraceRange {
        pid: Some(101),
        ..range
    };
    let got = dumps(&decoded(&rec, worker));
    let times: Vec<u64> = got.iter().map(|d| (d.0 - BASE_NS) / SEC).collect();
    assert_eq!(times, (10..=20).collect::<Vec<u64>>());
}

#[test]
fn the_chrome_trace_says_the_same_in_microseconds() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recording(dir.path());
    let doc = chrome(&rec, TraceRange::default());
    assert_eq!(doc["displayTimeUnit"], "ms");
    let events = doc["traceEvents"].as_array().unwrap();
    let names: Vec<(u64, &str)> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .map(|e| {
            (
                e["pid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(names, [(100, "python3"), (101, "pt_worker")]);
    let base_us = (BASE_NS / 1000) as f64;
    let rss: Vec<(f64, f64)> = events
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == "pid101.rss")
        .map(|e| {
            assert_eq!(
                (e["pid"].as_u64(), e["tid"].as_u64()),
                (Some(101), Some(101))
            );
            (
                e["ts"].as_f64().unwrap() - base_us,
                e["args"]["bytes"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(rss.len(), SAMPLES as usize - 1);
    assert_eq!(rss[3], (3e6, 5e7 + 3.0));
    let steps: Vec<(f64, f64, &str)> = events
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| {
            let ts = e["ts"].as_f64().unwrap() - base_us;
            (ts, e["dur"].as_f64().unwrap(), e["name"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        steps,
        [
            (0.0, 1e6, "step 1"),
            (1e6, 1e6, "step 2"),
            (2e6, 1e6, "step 3")
        ]
    );
    let eval = events
        .iter()
        .find(|e| e["ph"] == "i" && e["name"] == "eval")
        .unwrap();
    assert_eq!(eval["ts"].as_f64().unwrap() - base_us, 2.5e6);
    assert_eq!(eval["pid"], 100);
    let heap: Vec<f64> = events
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == "heap: leak_here job.py:12")
        .map(|e| e["args"]["bytes"].as_f64().unwrap())
        .collect();
    assert_eq!(heap.len(), 26);
    assert_eq!(heap[25], 26.0 * 1_048_576.0);
}

#[test]
fn a_merge_puts_both_on_the_profilers_base() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recording(dir.path());
    let base = BASE_NS - 3_600 * SEC;
    let torch = json!({
        "schemaVersion": 1,
        "baseTimeNanoseconds": base,
        "traceEvents": [
            {"ph": "M", "name": "process_name", "pid": 100, "tid": 0, "args": {"name": "python"}},
            {"ph": "X", "name": "train_step", "pid": 100, "tid": 100, "ts": 3.6e9 + 1e6, "dur": 5e5},
        ],
    });
    let out = merge(&rec, TraceRange::default(), torch).unwrap();
    assert_eq!(out["schemaVersion"], 1);
    let events = out["traceEvents"].as_array().unwrap();
    assert_eq!(events[1]["name"], "train_step");
    // pid 100 keeps the profiler's name; 101 gets flatline's.
    let named: Vec<u64> = events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| e["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(named, [100, 101]);
    // Step 2 began 1 s after the recording's start, 3,601 s after the
    // profiler's base: where its train_step began.
    let step2 = events.iter().find(|e| e["name"] == "step 2").unwrap();
    assert_eq!(step2["ts"].as_f64().unwrap(), 3.6e9 + 1e6);
}

#[test]
fn the_shipped_torch_trace_merges() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recording(dir.path());
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../recordings/traces/torch-profiler-small.json");
    let torch: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    let theirs = torch["traceEvents"].as_array().unwrap().len();
    let out = merge(&rec, TraceRange::default(), torch).unwrap();
    let events = out["traceEvents"].as_array().unwrap();
    assert!(events[..theirs].iter().any(|e| e["name"] == "train_step"));
    assert!(
        events[theirs..]
            .iter()
            .any(|e| e["ph"] == "C" && e["name"] == "pid101.rss")
    );
    let reread: Value = serde_json::from_str(&out.to_string()).unwrap();
    assert_eq!(
        reread["traceEvents"].as_array().unwrap().len(),
        events.len()
    );
}

#[test]
fn a_recording_of_no_process_is_one_named_row() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("../recordings/golden/v3.flr");
    let rec = Recording::open(&golden).unwrap();
    let packets = decoded(&rec, TraceRange::default());
    let ds = descriptors(&packets);
    assert!(ds.iter().all(|d| d.process.is_none()));
    let row = ds.iter().find(|d| d.parent_uuid.is_none()).unwrap();
    assert_eq!(row.name.as_deref(), Some("flatline soak"));
    assert!(
        ds.iter()
            .any(|d| d.counter.is_some() && d.parent_uuid == row.uuid)
    );
    let doc = chrome(&rec, TraceRange::default());
    let names = doc["traceEvents"].as_array().unwrap().iter();
    let row = names
        .filter(|e| e["name"] == "process_name")
        .collect::<Vec<_>>();
    assert_eq!(row.len(), 1);
    assert_eq!(row[0]["pid"], super::json::NO_PID);
}
