use std::path::Path;

use super::*;
use crate::telemetry::{ChannelSpec, Group, Sample, Unit};

fn header(channels: usize) -> Header {
    Header {
        format_version: FORMAT_VERSION,
        tool_version: "test".into(),
        started_unix_ms: 1_700_000_000_000,
        source: "test".into(),
        command_line: vec!["flatline".into(), "test".into()],
        config: BTreeMap::from([("hz".into(), "100".into())]),
        host: HostFacts::default(),
        schema: Schema {
            channels: (0..channels)
                .map(|i| ChannelSpec::new(format!("c{i}"), Unit::Bytes, Group::Memory))
                .collect(),
        },
        unavailable: vec![Unavailable::new("gpu", "no driver")],
        notes: vec![],
    }
}

fn sample(i: u64, channels: usize) -> Sample {
    let vals: Vec<f64> = (0..channels)
        .map(|c| match c {
            0 => 1e9 + (i / 50) as f64 * 262_144.0,
            1 => i as f64 * 0.5,
            2 if i.is_multiple_of(7) => f64::NAN,
            _ => (i * c as u64) as f64,
        })
        .collect();
    Sample::from_values(i, i * 10_000_000, &vals)
}

/// A finished recording of `n` samples (with an event every 100) as bytes.
fn recording_bytes(dir: &Path, n: u64, channels: usize) -> (Vec<u8>, WriteSummary) {
    let path = dir.join("r.flr");
    let mut w = RecordingWriter::create(&path, &header(channels), true).unwrap();
    for i in 0..n {
        w.push_sample(&sample(i, channels)).unwrap();
        if i % 100 == 99 {
            w.push_event(Event {
                t_ns: i * 10_000_000,
                kind: EventKind::Step {
                    step: i / 100,
                    tokens: Some(i * 16_384),
                },
            })
            .unwrap();
        }
    }
    let summary = w.finish("completed").unwrap();
    (std::fs::read(&path).unwrap(), summary)
}

fn load(bytes: &[u8]) -> Result<Recording, RecordingError> {
    Recording::from_bytes(bytes, Path::new("mem.flr"))
}

#[test]
fn a_finished_recording_reads_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, summary) = recording_bytes(dir.path(), 1000, 5);
    let rec = load(&bytes).unwrap();
    assert_eq!(rec.tail, None);
    assert_eq!(rec.len(), 1000);
    assert_eq!(rec.header, header(5));
    assert_eq!(rec.events.len(), 10);
    assert_eq!(
        rec.events[3].kind,
        EventKind::Step {
            step: 3,
            tokens: Some(399 * 16_384)
        }
    );
    let footer = rec.footer.as_ref().unwrap();
    assert_eq!(
        (footer.samples, footer.events, footer.end.as_str()),
        (1000, 10, "completed")
    );
    assert_eq!(rec.digest, summary.digest);
    assert_eq!(rec.digest.len(), 64);
    assert_eq!(summary.bytes, bytes.len() as u64);
    for i in [0usize, 1, 7, 499, 999] {
        let want = sample(i as u64, 5);
        let got = rec.sample(i).unwrap();
        assert_eq!(got.t_ns, want.t_ns);
        for (a, b) in want.values().iter().zip(got.values()) {
            assert!(
                a == b || (a.is_nan() && b.is_nan()),
                "sample {i}: {a} vs {b}"
            );
        }
    }
    assert_eq!(rec.channel("c1").unwrap()[10], 5.0);
    assert!((rec.duration_s() - 9.99).abs() < 1e-9);
}

#[test]
fn a_cut_at_any_byte_keeps_every_complete_frame_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, _) = recording_bytes(dir.path(), 600, 3);
    let full = load(&bytes).unwrap();
    let mut last_len = 0;
    let mut header_end = None;
    for cut in 0..bytes.len() {
        match load(&bytes[..cut]) {
            Err(RecordingError::BadMagic { .. }) => assert!(cut < 8, "cut {cut}"),
            Err(RecordingError::BadHeader { .. }) => assert!(header_end.is_none(), "cut {cut}"),
            Err(e) => panic!("cut {cut}: {e}"),
            Ok(rec) => {
                header_end.get_or_insert(cut);
                let tail = rec.tail.as_ref().expect("a cut file is never complete");
                assert_eq!(tail.kind, TailProblemKind::Truncated, "cut {cut}: {tail}");
                assert!(rec.len() >= last_len, "cut {cut}: samples went down");
                last_len = rec.len();
                // Whatever loaded is exactly the start of the full recording.
                assert_eq!(rec.t_ns[..], full.t_ns[..rec.len()]);
                assert!(rec.bytes <= cut as u64);
            }
        }
    }
    assert_eq!(last_len, 600, "only the footer was missing at the last cut");
}

#[test]
fn damage_is_reported_where_it_starts_and_what_precedes_it_loads() {
    let dir = tempfile::tempdir().unwrap();
    let (mut bytes, _) = recording_bytes(dir.path(), 1000, 4);
    let full = load(&bytes).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x40;
    let rec = load(&bytes).unwrap();
    let tail = rec.tail.clone().unwrap();
    assert_eq!(tail.kind, TailProblemKind::Damaged);
    assert!(tail.offset <= at as u64, "{tail}");
    assert!(tail.reason.contains("checksum"), "{tail}");
    assert!(rec.len() > 100 && rec.len() < 1000, "{}", rec.len());
    assert_eq!(rec.t_ns[..], full.t_ns[..rec.len()]);
}

#[test]
fn an_absurd_frame_length_is_damage_not_an_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, _) = recording_bytes(dir.path(), 10, 2);
    // A frame header that claims 4 GiB: the reader must refuse it before
    // allocating anything for its payload.
    let mut evil = bytes.clone();
    evil.extend_from_slice(&u32::MAX.to_le_bytes());
    evil.extend_from_slice(&[0; 4]);
    let rec = load(&evil).unwrap();
    let tail = rec.tail.clone().unwrap();
    assert_eq!(tail.kind, TailProblemKind::Damaged);
    assert!(tail.reason.contains("over the limit"), "{tail}");
    assert_eq!(tail.offset, bytes.len() as u64);
    assert_eq!(rec.len(), 10);
}

#[test]
fn frames_after_the_footer_are_damage() {
    let dir = tempfile::tempdir().unwrap();
    let (mut bytes, _) = recording_bytes(dir.path(), 10, 2);
    let copy = bytes.clone();
    bytes.extend_from_slice(&copy[12..]); // the header frame again, and more
    let rec = load(&bytes).unwrap();
    assert_eq!(rec.len(), 10);
    assert!(rec.tail.unwrap().reason.contains("after the footer"));
}

#[test]
fn bad_magic_and_unknown_versions_are_named() {
    let err = load(b"PK\x03\x04 this is a zip file").unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, RecordingError::BadMagic { .. }));
    assert!(
        msg.contains("not a flatline recording") && msg.contains("FLATLINE"),
        "{msg}"
    );
    let mut v99 = MAGIC.to_vec();
    v99.extend_from_slice(&99u32.to_le_bytes());
    let msg = load(&v99).unwrap_err().to_string();
    assert!(msg.contains("version 99") && msg.contains("[1]"), "{msg}");
    assert!(matches!(load(b""), Err(RecordingError::BadMagic { .. })));
}

#[test]
fn never_overwrites_silently_and_names_a_missing_folder() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.flr");
    std::fs::write(&path, b"precious").unwrap();
    let err = RecordingWriter::create(&path, &header(1), false).unwrap_err();
    assert!(matches!(err, RecordingError::Exists { .. }), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"precious");
    RecordingWriter::create(&path, &header(1), true).unwrap();
    let missing = dir.path().join("no/such/dir/b.flr");
    let err = RecordingWriter::create(&missing, &header(1), false).unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
}

#[test]
fn samples_reach_the_disk_within_the_block_age_while_the_writer_lives() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.flr");
    let mut w = RecordingWriter::create(&path, &header(2), false).unwrap();
    for i in 0..30 {
        w.push_sample(&sample(i, 2)).unwrap();
    }
    std::thread::sleep(writer::BLOCK_AGE);
    w.tick().unwrap();
    // Another reader, as after a SIGKILL: the writer has not finished.
    let rec = Recording::open(&path).unwrap();
    assert_eq!(rec.len(), 30);
    assert_eq!(rec.tail.unwrap().kind, TailProblemKind::Truncated);
    drop(w);
}

#[test]
fn a_schema_mismatch_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = RecordingWriter::create(&dir.path().join("m.flr"), &header(3), false).unwrap();
    let err = w.push_sample(&sample(0, 2)).unwrap_err();
    assert!(matches!(
        err,
        RecordingError::SchemaMismatch {
            expected: 3,
            got: 2
        }
    ));
}

mod csv_import {
    use super::*;
    use crate::recording::csv::{CsvError, export, import, unit_of};

    const SEED_LIKE: &str = "step,elapsed_s,loss,feeder_us,vram_alloc_mb,rss_delta_mb,fnv1a_hash\n\
0,0.00,2.8973,52.28,204.27,+0.00,0x805651DA\n\
1,0.18,2.8643,108.58,204.08,+0.00,0x4C87FB96\n\
2,0.33,2.8435,51.33,204.27,+1.00,0x17427265\n";

    fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn a_step_log_becomes_channels_with_units() {
        let dir = tempfile::tempdir().unwrap();
        let csv = write(dir.path(), "log.csv", SEED_LIKE);
        let out = dir.path().join("log.flr");
        let summary = import(&csv, &out, false, vec![]).unwrap();
        assert_eq!(summary.samples, 3);
        let rec = Recording::open(&out).unwrap();
        assert!(rec.tail.is_none());
        let names: Vec<&str> = rec
            .header
            .schema
            .channels
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "log.step",
                "log.loss",
                "log.feeder_us",
                "log.vram_alloc_mb",
                "log.rss_delta_mb"
            ]
        );
        let units: Vec<Unit> = rec.header.schema.channels.iter().map(|c| c.unit).collect();
        assert_eq!(
            units,
            [
                Unit::Count,
                Unit::Number,
                Unit::Microseconds,
                Unit::Mebibytes,
                Unit::Mebibytes
            ]
        );
        assert_eq!(rec.t_ns, [0, 180_000_000, 330_000_000]);
        assert_eq!(
            rec.channel("log.vram_alloc_mb").unwrap(),
            [204.27, 204.08, 204.27]
        );
        assert_eq!(rec.channel("log.rss_delta_mb").unwrap(), [0.0, 0.0, 1.0]);
        assert!(
            rec.header.notes.iter().any(|n| n.contains("fnv1a_hash")),
            "{:?}",
            rec.header.notes
        );
        assert_eq!(rec.header.source, "import");
    }

    #[test]
    fn bad_csvs_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("x.flr");
        let cases = [
            (
                "noheader.csv",
                "0,0.0,1.5\n1,0.1,1.6\n",
                "line 1",
                "no header row",
            ),
            (
                "ragged.csv",
                "step,elapsed_s,loss\n0,0.0,1.5\n1,0.1\n",
                "line 3",
                "2 fields where the header has 3",
            ),
            (
                "junk.csv",
                "step,elapsed_s,loss\n0,0.0,1.5\n1,0.1,oops\n",
                "line 3",
                "column loss: \"oops\"",
            ),
            ("empty.csv", "", "line 1", "empty"),
            ("onlyheader.csv", "step,loss\n", "line 2", "no data rows"),
            (
                "backwards.csv",
                "step,elapsed_s\n0,5\n1,4\n",
                "line 3",
                "backwards",
            ),
            ("dup.csv", "a,a\n1,2\n", "line 1", "appears twice"),
        ];
        for (name, text, line, what) in cases {
            let csv = write(dir.path(), name, text);
            let err = import(&csv, &out, true, vec![]).unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, CsvError::Bad { .. }), "{name}: {msg}");
            assert!(msg.contains(line) && msg.contains(what), "{name}: {msg}");
        }
        let err = import(&dir.path().join("missing.csv"), &out, true, vec![]).unwrap_err();
        assert!(matches!(err, CsvError::Io { .. }), "{err}");
    }

    #[test]
    fn units_come_from_suffixes() {
        assert_eq!(unit_of("vm_rss_mb"), Unit::Mebibytes);
        assert_eq!(unit_of("train_ms"), Unit::Milliseconds);
        assert_eq!(unit_of("feeder_us"), Unit::Microseconds);
        assert_eq!(unit_of("tokens_per_sec"), Unit::PerSecond);
        assert_eq!(unit_of("step"), Unit::Count);
        assert_eq!(unit_of("loss"), Unit::Number);
    }

    #[test]
    fn export_writes_one_row_per_sample() {
        let dir = tempfile::tempdir().unwrap();
        let (bytes, _) = recording_bytes(dir.path(), 20, 3);
        let rec = load(&bytes).unwrap();
        let out = dir.path().join("out.csv");
        assert_eq!(export(&rec, &out, false).unwrap(), 20);
        let text = std::fs::read_to_string(&out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "t_s,c0,c1,c2");
        assert_eq!(lines[1], "0.000000,1000000000,0,");
        assert_eq!(lines[2], "0.010000,1000000000,0.5,2");
        assert_eq!(lines.len(), 21);
        assert!(export(&rec, &out, false).is_err(), "no silent overwrite");
    }
}

#[test]
fn the_recorder_keeps_every_sample_the_sampler_sent() {
    use crate::telemetry::{self, SamplerConfig};
    let dir = tempfile::tempdir().unwrap();
    let tel = telemetry::start(SamplerConfig {
        hz: 200.0,
        gpu: false,
        system: false,
        ..SamplerConfig::default()
    })
    .unwrap();
    let mut h = header(0);
    h.schema = tel.schema.clone();
    let path = dir.path().join("rec.flr");
    let rec = Recorder::spawn(
        RecordingWriter::create(&path, &h, false).unwrap(),
        tel.samples,
    )
    .unwrap();
    rec.event(Event {
        t_ns: 1,
        kind: EventKind::Phase("idle".into()),
    });
    // Wait for 20 samples however loaded the machine is (0.1 s unloaded).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while tel.sampler.produced() < 20 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let produced_before_stop = tel.sampler.produced();
    tel.sampler.stop();
    let summary = rec.finish("completed").unwrap();
    assert!(summary.write.samples >= produced_before_stop && produced_before_stop >= 20);
    let back = Recording::open(&path).unwrap();
    assert!(back.tail.is_none(), "{:?}", back.tail);
    assert_eq!(back.len() as u64, summary.write.samples);
    assert_eq!(back.events.len(), 1);
    assert_eq!(back.footer.as_ref().unwrap().end, "completed");
    assert!(back.channel("mem.rss").unwrap().iter().all(|v| *v > 1e6));
}
