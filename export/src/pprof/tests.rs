//! Profiles of a small watch built here, encoded, gunzipped and decoded
//! with the same prost messages: values, stacks and labels checked against
//! what the recording holds. (CI's `scripts/pprof-check.py` reads real ones
//! with `go tool pprof`.)

use std::collections::BTreeMap;
use std::path::Path;

use flatline_telemetry::recording::{Header, HostFacts, Recording, RecordingWriter};
use flatline_telemetry::{ChannelSpec, Group, Sample as Row, Schema, Unit};

use super::proto::PbProfile;
use super::{Frame, PprofError, ProfileRange, decode, encode, from_recording, parse_frame};

const MIB: f64 = 1_048_576.0;
const SEC: u64 = 1_000_000_000;

fn spec(name: &str, unit: Unit, labels: &[(&str, &str)]) -> ChannelSpec {
    labels
        .iter()
        .fold(ChannelSpec::new(name, unit, Group::Memory), |c, (k, v)| {
            c.with_label(k, *v)
        })
}

/// Four channels of one site of `pid`.
fn site(n: usize, pid: &str, frames: &str) -> Vec<ChannelSpec> {
    let plain = [("pid", pid), ("role", "site")];
    let mut live = plain.to_vec();
    live.push(("frames", frames));
    vec![
        spec(&format!("site{n}.live"), Unit::Bytes, &live),
        spec(&format!("site{n}.objects"), Unit::Count, &plain),
        spec(&format!("site{n}.alloc_bytes"), Unit::Bytes, &plain),
        spec(&format!("site{n}.allocs"), Unit::Count, &plain),
    ]
}

/// A watch of pid 100 (`python3`, main) and 101 (`pt_worker`, worker),
/// rank 3, 11 samples a second apart. Site 0 (pid 101, `leak` at
/// job.py:12 under `main` at job.py:30) keeps 1 MiB more each second from
/// the start; site 1 (pid 100, C `make_buf`) holds 4 MiB throughout and
/// churns 2 MiB a second; site 2 (pid 100) joins at 6 s holding 3 MiB.
fn recording(dir: &Path, counts: bool) -> Recording {
    let mut channels = vec![
        spec("mem.rss", Unit::Bytes, &[]),
        spec(
            "pid100.rss",
            Unit::Bytes,
            &[("pid", "100"), ("name", "python3"), ("role", "main")],
        ),
        spec(
            "pid101.rss",
            Unit::Bytes,
            &[("pid", "101"), ("name", "pt_worker"), ("role", "worker")],
        ),
    ];
    let mut s0 = site(0, "101", "/src/job.py:12 leak\n/src/job.py:30 main");
    let mut s1 = site(1, "100", "make_buf (libbuf.so)\n/src/job.py:40 setup");
    if !counts {
        s0.truncate(1);
        s1.truncate(1);
    }
    channels.extend(s0);
    channels.extend(s1);
    let config = BTreeMap::from([
        ("sites_every".to_owned(), "524288".to_owned()),
        ("command".to_owned(), "/usr/bin/python3 job.py".to_owned()),
    ]);
    let mut header = Header::new(
        "watch",
        Schema { channels },
        HostFacts::default(),
        config,
        vec![],
    );
    header.labels.insert("rank".into(), "3".into());
    header.started_unix_ms = 1_700_000_000_000;
    let path = dir.join("s.flr");
    let mut w = RecordingWriter::create(&path, &header, true).unwrap();
    for i in 0..11u64 {
        if i == 6 && counts {
            w.add_channels(&site(2, "100", "/src/late.py:7 late"))
                .unwrap();
        }
        let t = i as f64;
        let mut v = vec![1e9, 5e8, 4e8];
        let s0 = [
            (t + 1.0) * MIB,
            (t + 1.0) * 64.0,
            (t + 1.0) * 2.0 * MIB,
            (t + 1.0) * 200.0,
        ];
        let s1 = [4.0 * MIB, 4.0, 4.0 * MIB + t * 2.0 * MIB, 4.0 + t * 2.0];
        if counts {
            v.extend(s0);
            v.extend(s1);
            if i >= 6 {
                v.extend([3.0 * MIB, 3.0, 3.0 * MIB, 3.0]);
            }
        } else {
            v.extend([s0[0], s1[0]]);
        }
        w.push_sample(&Row::from_values(i, i * SEC, &v)).unwrap();
    }
    w.finish("completed").unwrap();
    Recording::open(&path).unwrap()
}

fn string(p: &PbProfile, i: i64) -> &str {
    &p.string_table[i as usize]
}

/// Each sample as (its stack as `function file:line` innermost first, its
/// values, its labels as `key=value`).
type Row3 = (Vec<String>, Vec<i64>, Vec<String>);

fn rows(p: &PbProfile) -> Vec<Row3> {
    p.sample
        .iter()
        .map(|s| {
            let stack = s
                .location_id
                .iter()
                .map(|id| {
                    let loc = &p.location[*id as usize - 1];
                    assert_eq!(loc.id, *id, "location ids are their positions + 1");
                    let line = &loc.line[0];
                    let f = &p.function[line.function_id as usize - 1];
                    assert_eq!(f.id, line.function_id);
                    format!(
                        "{} {}:{}",
                        string(p, f.name),
                        string(p, f.filename),
                        line.line
                    )
                })
                .collect();
            let labels = s
                .label
                .iter()
                .map(|l| {
                    if l.str != 0 {
                        format!("{}={}", string(p, l.key), string(p, l.str))
                    } else {
                        format!("{}={}", string(p, l.key), l.num)
                    }
                })
                .collect();
            (stack, s.value.clone(), labels)
        })
        .collect()
}

fn mib(n: f64) -> i64 {
    (n * MIB) as i64
}

#[test]
fn a_profile_holds_every_site_with_its_four_values_stack_and_process() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recording(dir.path(), true);
    let p = decode(&encode(
        &from_recording(&rec, ProfileRange::default()).unwrap(),
    ));
    let types: Vec<(&str, &str)> = p
        .sample_type
        .iter()
        .map(|v| (string(&p, v.r#type), string(&p, v.unit)))
        .collect();
    assert_eq!(
        types,
        [
            ("alloc_objects", "count"),
            ("alloc_space", "bytes"),
            ("inuse_objects", "count"),
            ("inuse_space", "bytes")
        ]
    );
    assert_eq!(string(&p, p.default_sample_type), "inuse_space");
    assert_eq!(p.string_table[0], "");
    assert_eq!(p.period, 524_288);
    let r = rows(&p);
    // Largest held first: the leak (11 MiB) above make_buf (4 MiB) and
    // the late site (3 MiB).
    assert_eq!(r.len(), 3);
    assert_eq!(r[0].0, ["leak /src/job.py:12", "main /src/job.py:30"]);
    // Held: the last reading; allocated: everything since the start.
    assert_eq!(r[0].1, [2200, mib(22.0), 704, mib(11.0)]);
    assert_eq!(
        r[0].2,
        ["pid=101", "process=pt_worker", "role=worker", "rank=3"]
    );
    assert_eq!(r[1].0, ["make_buf libbuf.so:0", "setup /src/job.py:40"]);
    assert_eq!(r[1].1, [24, mib(24.0), 4, mib(4.0)]);
    assert_eq!(
        r[1].2,
        ["pid=100", "process=python3", "role=main", "rank=3"]
    );
    assert_eq!(r[2].0, ["late /src/late.py:7"]);
    assert_eq!(r[2].1, [3, mib(3.0), 3, mib(3.0)]);
    // One mapping, the program, whose frames come symbolized (pprof's
    // tools then symbolize nothing themselves).
    assert_eq!(p.mapping.len(), 1);
    assert_eq!(string(&p, p.mapping[0].filename), "/usr/bin/python3");
    assert!(p.mapping[0].has_functions && p.mapping[0].has_line_numbers);
    assert!(p.location.iter().all(|l| l.mapping_id == 1));
    // One function and one location per distinct frame.
    assert_eq!(p.location.len(), 5);
    assert_eq!(p.function.len(), 5);
    // The wall clock at the last sample, the window from the start.
    assert_eq!(p.time_nanos, 1_700_000_000_000_000_000 + 10 * SEC as i64);
    assert_eq!(p.duration_nanos, 10 * SEC as i64);
    assert!(string(&p, p.comment[0]).contains("0.0 s to 10.0 s"));
}

#[test]
fn a_window_holds_what_was_held_at_its_end_and_allocated_within_it() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recording(dir.path(), true);
    let range = ProfileRange {
        from_s: Some(3.0),
        to_s: Some(7.5),
        ..ProfileRange::default()
    };
    let r = rows(&decode(&encode(&from_recording(&rec, range).unwrap())));
    // At 7 s the leak held 8 MiB; from 3 s (the reading before: 2 s, 6
    // MiB allocated) to 7 s (16 MiB) it allocated 10 MiB.
    assert_eq!(r[0].1, [1000, mib(10.0), 512, mib(8.0)]);
    // make_buf: 4 MiB held, 10 MiB churned.
    assert_eq!(r[1].1, [10, mib(10.0), 4, mib(4.0)]);
    // The late site joined at 6 s, within the window: all of it counts.
    assert_eq!(r[2].1, [3, mib(3.0), 3, mib(3.0)]);
}

#[test]
fn growth_is_what_the_held_bytes_gained_and_a_site_that_did_not_grow_is_zero() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recording(dir.path(), true);
    let range = ProfileRange {
        from_s: Some(3.0),
        to_s: Some(7.5),
        growth: true,
        ..ProfileRange::default()
    };
    let p = decode(&encode(&from_recording(&rec, range).unwrap()));
    let r = rows(&p);
    // The leak gained 8 − 3 = 5 MiB; make_buf held what it held; the late
    // site gained all of its 3 MiB.
    let leak = r.iter().find(|x| x.0[0].starts_with("leak")).unwrap();
    assert_eq!(leak.1[2..], [320, mib(5.0)]);
    let buf = r.iter().find(|x| x.0[0].starts_with("make_buf")).unwrap();
    assert_eq!(buf.1[2..], [0, 0]);
    let late = r.iter().find(|x| x.0[0].starts_with("late")).unwrap();
    assert_eq!(late.1[2..], [3, mib(3.0)]);
    assert!(
        p.comment
            .iter()
            .any(|c| string(&p, *c).contains("gained over the window"))
    );
}

#[test]
fn one_process_only_and_a_pid_without_sites_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recording(dir.path(), true);
    let range = |pid| ProfileRange {
        pid: Some(pid),
        ..ProfileRange::default()
    };
    let r = rows(&decode(&encode(&from_recording(&rec, range(100)).unwrap())));
    assert_eq!(r.len(), 2);
    assert!(r.iter().all(|x| x.2[0] == "pid=100"));
    assert_eq!(
        from_recording(&rec, range(7)).unwrap_err(),
        PprofError::NoSitesOfPid {
            pid: 7,
            of: "100, 101".into()
        }
    );
}

#[test]
fn a_recording_without_sites_is_refused_with_how_to_make_one() {
    let dir = tempfile::tempdir().unwrap();
    let schema = Schema {
        channels: vec![spec("mem.rss", Unit::Bytes, &[])],
    };
    let header = Header::new(
        "soak",
        schema,
        HostFacts::default(),
        BTreeMap::new(),
        vec![],
    );
    let path = dir.path().join("plain.flr");
    let mut w = RecordingWriter::create(&path, &header, true).unwrap();
    w.push_sample(&Row::from_values(0, 0, &[1.0])).unwrap();
    w.finish("completed").unwrap();
    let err =
        from_recording(&Recording::open(&path).unwrap(), ProfileRange::default()).unwrap_err();
    assert!(matches!(err, PprofError::NoSites(_)));
    assert!(err.to_string().contains("watch --sites"), "{err}");
}

#[test]
fn a_recording_from_before_the_counts_has_its_bytes_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recording(dir.path(), false);
    let p = decode(&encode(
        &from_recording(&rec, ProfileRange::default()).unwrap(),
    ));
    let r = rows(&p);
    assert_eq!(r[0].1, [0, 0, 0, mib(11.0)]);
    assert_eq!(r[1].1, [0, 0, 0, mib(4.0)]);
    assert!(
        p.comment
            .iter()
            .any(|c| string(&p, *c).contains("only inuse_space"))
    );
}

#[test]
fn frames_are_read_in_each_form_the_preload_writes() {
    let f = |function: &str, file: &str, line| Frame {
        function: function.into(),
        file: file.into(),
        line,
    };
    assert_eq!(parse_frame("/a/b.py:12 leak"), f("leak", "/a/b.py", 12));
    // A colon in the path and spaces in a C++ name.
    assert_eq!(
        parse_frame("C:/x:y/m.cc:7 ns::Foo<int, 2>::bar(int) const"),
        f("ns::Foo<int, 2>::bar(int) const", "C:/x:y/m.cc", 7)
    );
    assert_eq!(
        parse_frame("PyList_Append (libpython3.12.so.1.0)"),
        f("PyList_Append", "libpython3.12.so.1.0", 0)
    );
    assert_eq!(parse_frame("0x7f01deadbeef"), f("0x7f01deadbeef", "", 0));
    // A name with a colon but no line is a name.
    assert_eq!(parse_frame("std::vector"), f("std::vector", "", 0));
}

/// The shipped PyTorch watch (`recordings/watch-sites-torch.flr`), whose
/// job frees what it held as it exits: without --to the profile ends where
/// the receipt's analysis ends (before the teardown) and says so, and the
/// leaking line holds its last reading there; `--growth`
/// from 6 s puts that line first.
#[test]
fn a_whole_run_ends_where_the_receipt_does_and_agrees_with_it() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../recordings/watch-sites-torch.flr");
    let rec = Recording::open(&path).unwrap();
    let receipt = flatline_receipt::report::analyse(&rec, None);
    let json = flatline_receipt::report::json_report(&rec, &receipt);
    let top = &json["sites"][0];
    assert_eq!(top["line"], 52, "{top}");
    let td = receipt.teardown_s.expect("the job's teardown");
    let p = decode(&encode(
        &from_recording(&rec, ProfileRange::default()).unwrap(),
    ));
    let r = rows(&p);
    let line52 = r
        .iter()
        .find(|x| x.0[0].ends_with("sites_job.py:52"))
        .expect("sites_job.py:52 in the profile");
    // Its last reading before the teardown (the receipt's `live_bytes` is
    // the median of the last twentieth analysed: a little lower).
    let site = rec.header.schema.channels.iter().position(|c| {
        c.labels.get("line").map(String::as_str) == Some("52") && c.name.ends_with(".live")
    });
    let column = &rec.columns[site.unwrap()];
    let before = rec.t_ns.partition_point(|&t| (t as f64) < td * 1e9);
    let last = column[..before]
        .iter()
        .rev()
        .find(|v| v.is_finite())
        .unwrap();
    assert_eq!(line52.1[3], last.round() as i64);
    let said = top["live_bytes"].as_f64().unwrap();
    assert!(
        *last >= said && *last < 1.1 * said,
        "{last} vs the receipt's {said}"
    );
    assert!(
        p.comment
            .iter()
            .any(|c| string(&p, *c).contains(&format!("teardown began ({td:.1} s)"))),
        "{:?}",
        p.comment.iter().map(|c| string(&p, *c)).collect::<Vec<_>>()
    );
    let growth = ProfileRange {
        from_s: Some(6.0),
        growth: true,
        ..ProfileRange::default()
    };
    let r = rows(&decode(&encode(&from_recording(&rec, growth).unwrap())));
    assert!(r[0].0[0].ends_with("sites_job.py:52"), "{:?}", r[0]);
}
