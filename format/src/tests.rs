use std::collections::BTreeMap;
use std::path::Path;

use crate::*;

/// A small random source for tests (xorshift64*).
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub(crate) fn below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }
}

/// Asserts that decoded rows `(seq, t_ns, values)` are `samples`, bit for
/// bit; with `loose_nan_and_zero` (format v1, whose codec stores every NaN
/// as nil and −0 as 0) any NaN matches any NaN and −0 matches 0.
pub(crate) fn assert_same_rows(
    samples: &[Sample],
    rows: &[(u64, u64, Vec<f64>)],
    loose_nan_and_zero: bool,
) {
    let same = |a: f64, b: f64| {
        a.to_bits() == b.to_bits()
            || (loose_nan_and_zero && ((a.is_nan() && b.is_nan()) || (a == 0.0 && b == 0.0)))
    };
    assert_eq!(rows.len(), samples.len());
    for (s, (seq, t, v)) in samples.iter().zip(rows) {
        assert_eq!((s.seq, s.t_ns), (*seq, *t));
        for (c, (a, b)) in s.values().iter().zip(v).enumerate() {
            assert!(
                same(*a, *b),
                "channel {c}: wrote {a:e} ({:#x}), read {b:e} ({:#x})",
                a.to_bits(),
                b.to_bits()
            );
        }
    }
}

pub(crate) fn header(channels: usize) -> Header {
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
        labels: BTreeMap::from([("rank".into(), "3".into())]),
    }
}

pub(crate) fn sample(i: u64, channels: usize) -> Sample {
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
pub(crate) fn recording_bytes(dir: &Path, n: u64, channels: usize) -> (Vec<u8>, WriteSummary) {
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

pub(crate) fn load(bytes: &[u8]) -> Result<Recording, RecordingError> {
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
fn damage_is_reported_where_it_is_and_reading_goes_on_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mut bytes, _) = recording_bytes(dir.path(), 1000, 4);
    let full = load(&bytes).unwrap();
    let at = bytes.len() / 2;
    let (start, len) = *stored_frames(&bytes)
        .iter()
        .find(|(s, l)| (*s..s + 20 + l).contains(&at))
        .unwrap();
    bytes[at] ^= 0x40;
    let rec = load(&bytes).unwrap();
    assert_eq!(rec.tail, None, "the footer was read");
    assert!(rec.is_damaged());
    let [loss] = &rec.losses[..] else {
        panic!("{:?}", rec.losses)
    };
    assert_eq!((loss.offset, loss.bytes), (start as u64, 20 + len as u64));
    assert!(loss.reason.contains("checksum"), "{loss}");
    // The pack held one block of 256 samples: exactly those are missing.
    assert_eq!(loss.samples, Some(256));
    assert_eq!(rec.len(), 1000 - 256);
    let first = rec
        .t_ns
        .iter()
        .position(|t| Some(*t) > loss.after_ns)
        .unwrap();
    assert_eq!(rec.t_ns[..first], full.t_ns[..first]);
    assert_eq!(rec.t_ns[first..], full.t_ns[first + 256..]);
    assert_eq!(loss.before_ns, Some(full.t_ns[first + 256]));
}

#[test]
fn an_absurd_frame_length_is_damage_not_an_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, _) = recording_bytes(dir.path(), 10, 2);
    // A frame header that claims 4 GiB: the reader must refuse it before
    // allocating anything for its payload.
    let mut evil = bytes.clone();
    evil.extend_from_slice(&layout::SYNC);
    evil.extend_from_slice(&u32::MAX.to_le_bytes());
    evil.extend_from_slice(&[0; 12]);
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
    assert!(
        msg.contains("version 99") && msg.contains("[1, 2, 3, 4, 5]"),
        "{msg}"
    );
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

/// Builds a v2 file frame by frame, as a hostile writer could.
fn raw_file(frames: &[Frame]) -> Vec<u8> {
    raw_file_of(FORMAT_VERSION, frames)
}

fn raw_file_of(version: u32, frames: &[Frame]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&version.to_le_bytes());
    // v5 frames carry the samples before them, as a writer counts them.
    let mut at = 0u64;
    for f in frames {
        let payload = codec_encode(f);
        out.extend_from_slice(&layout::stored(version, at, &payload));
        let blocks = match f {
            Frame::Packed(p) => p.unpack().unwrap_or_default(),
            other => vec![other.clone()],
        };
        for b in blocks {
            if let Frame::Block(b) = b {
                at += b.len() as u64;
            }
        }
    }
    out
}

/// Every reason a recording gives for what it could not read: its losses',
/// then its tail's.
fn reasons(rec: &Recording) -> String {
    let mut all: Vec<String> = rec.losses.iter().map(|l| l.reason.clone()).collect();
    all.extend(rec.tail.iter().map(|t| t.reason.clone()));
    all.join("; ")
}

fn codec_encode(f: &Frame) -> Vec<u8> {
    rmp_serde::to_vec_named(f).unwrap()
}

#[test]
fn channels_join_and_end_mid_recording() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("grow.flr");
    let mut w = RecordingWriter::create(&path, &header(2), false).unwrap();
    for i in 0..10 {
        w.push_sample(&sample(i, 2)).unwrap();
    }
    // A worker appears: two channels from sample 10 on.
    let worker = [
        ChannelSpec::new("pid7.rss", Unit::Bytes, Group::Memory).with_label("role", "worker"),
        ChannelSpec::new("pid7.pss", Unit::Bytes, Group::Memory),
    ];
    w.add_channels(&worker).unwrap();
    assert!(
        w.push_sample(&sample(10, 2)).is_err(),
        "the old width is refused"
    );
    for i in 10..20 {
        w.push_sample(&Sample::from_values(
            i,
            i * 10_000_000,
            &[1.0, 2.0, 3e6 + i as f64, 4e6],
        ))
        .unwrap();
    }
    // It exits at sample 20: its slots stay, their contents are not read.
    w.end_channels(&[2, 3]).unwrap();
    assert!(w.end_channels(&[2]).is_err(), "a channel ends once");
    assert!(w.end_channels(&[9]).is_err(), "no such channel");
    assert!(
        w.add_channels(&worker[..1]).is_err(),
        "a name is never reused"
    );
    for i in 20..25 {
        w.push_sample(&Sample::from_values(
            i,
            i * 10_000_000,
            &[1.0, 2.0, 99.0, 99.0],
        ))
        .unwrap();
    }
    w.finish("completed").unwrap();

    let rec = Recording::open(&path).unwrap();
    assert_eq!(rec.tail, None);
    assert_eq!(rec.len(), 25);
    assert_eq!(rec.header.schema.len(), 4);
    assert_eq!(rec.header.schema.channels[2].labels["role"], "worker");
    assert_eq!(
        rec.lifetimes[0],
        Lifetime {
            from: 0,
            until: None
        }
    );
    assert_eq!(
        rec.lifetimes[2],
        Lifetime {
            from: 10,
            until: Some(20)
        }
    );
    let rss = rec.channel("pid7.rss").unwrap();
    assert!(
        rss[..10].iter().all(|v| v.is_nan()),
        "absent before it joined"
    );
    assert_eq!(rss[10], 3e6 + 10.0);
    assert_eq!(rss[19], 3e6 + 19.0);
    assert!(rss[20..].iter().all(|v| v.is_nan()), "ended, not 99");
    assert!(rec.is_live(2, 15) && !rec.is_live(2, 5) && !rec.is_live(2, 20));
    assert_eq!(rec.channel("c1").unwrap()[24], 2.0);
}

#[test]
fn a_channel_that_joins_after_one_ended_takes_its_slot_not_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reuse.flr");
    let mut w = RecordingWriter::create(&path, &header(2), false).unwrap();
    let spec = |n: &str| ChannelSpec::new(n, Unit::Bytes, Group::Memory);
    // 200 workers, one after another, each living 3 samples: far more channels
    // over the recording than a sample holds, never more than 3 values wide.
    let mut seq = 0u64;
    for k in 0..200u64 {
        w.add_channels(&[spec(&format!("pid{k}.rss"))]).unwrap();
        for _ in 0..3 {
            w.push_sample(&Sample::from_values(seq, seq * 1000, &[1.0, 2.0, k as f64]))
                .unwrap();
            seq += 1;
        }
        w.end_channels(&[2 + k as usize]).unwrap();
    }
    assert!(
        w.push_sample(&Sample::from_values(seq, seq * 1000, &[1.0, 2.0]))
            .is_err(),
        "the width stays: slot 2 is free, not gone"
    );
    w.finish("completed").unwrap();
    let rec = Recording::open(&path).unwrap();
    assert_eq!(rec.tail, None);
    assert_eq!(rec.header.schema.len(), 202);
    for k in [0usize, 57, 199] {
        let col = rec.channel(&format!("pid{k}.rss")).unwrap();
        let live: Vec<f64> = col.iter().copied().filter(|v| !v.is_nan()).collect();
        assert_eq!(live, [k as f64; 3], "pid{k}");
        assert_eq!(rec.lifetimes[2 + k].from, 3 * k);
    }
}

#[test]
fn hostile_schema_frames_are_refused_without_allocating_them() {
    let h = header(1);
    let ok = [Frame::Header(h.clone())];
    assert!(load(&raw_file(&ok)).is_ok());

    // A name of 1 GB cannot even be a frame: the length is refused first.
    let mut big = raw_file(&ok);
    big.extend_from_slice(&layout::SYNC);
    big.extend_from_slice(&(1u32 << 30).to_le_bytes());
    big.extend_from_slice(&[0; 12]);
    let rec = load(&big).unwrap();
    assert!(rec.tail.unwrap().reason.contains("over the limit"));

    // A schema frame that says it holds 10 million channels, in 40 bytes.
    let mut claim = vec![0x81, 0xa8]; // {"channels": …
    claim.extend_from_slice(b"channels");
    claim.push(0x82); // {at, channels}
    claim.extend_from_slice(&[0xa2, b'a', b't', 0x00]);
    claim.push(0xa8);
    claim.extend_from_slice(b"channels");
    claim.push(0xdd); // array32
    claim.extend_from_slice(&10_000_000u32.to_be_bytes());
    let mut file = raw_file(&ok);
    file.extend_from_slice(&layout::stored(FORMAT_VERSION, 0, &claim));
    let rec = load(&file).unwrap();
    assert!(rec.is_damaged(), "{:?}", rec.losses);
    assert_eq!(rec.header.schema.len(), 1);

    // Real channels, but too many, a name too long, or a name taken.
    let spec = |n: String| ChannelSpec::new(n, Unit::Bytes, Group::Memory);
    let cases = [
        (
            (0..MAX_SCHEMA_CHANNELS)
                .map(|i| spec(format!("x{i}")))
                .collect::<Vec<_>>(),
            "exceed",
        ),
        (vec![spec("y".repeat(MAX_NAME_BYTES + 1))], "name of"),
        (vec![spec("c0".into())], "twice"),
    ];
    for (channels, what) in cases {
        let ext = Frame::Channels(SchemaExtension { at: 0, channels });
        let rec = load(&raw_file(&[Frame::Header(h.clone()), ext])).unwrap();
        assert!(reasons(&rec).contains(what), "{what}: {}", reasons(&rec));
        assert_eq!(rec.header.schema.len(), 1);
    }
    // A schema change that does not sit where the samples are.
    let ext = Frame::Channels(SchemaExtension {
        at: 5,
        channels: vec![spec("late".into())],
    });
    let rec = load(&raw_file(&[Frame::Header(h.clone()), ext])).unwrap();
    assert!(reasons(&rec).contains("at sample 5"), "{}", reasons(&rec));
    // And a header whose own schema is hostile is no recording at all.
    let mut bad = h;
    bad.schema.channels.push(spec("c0".into()));
    let err = load(&raw_file(&[Frame::Header(bad)])).unwrap_err();
    assert!(err.to_string().contains("twice"), "{err}");
}

#[test]
fn older_readers_refuse_newer_files_and_v1_files_keep_their_rules() {
    // The v1 reader (flatline 0.1 before format v2) read only version 1: it
    // refuses later files naming the version, as any reader refuses a
    // version it does not know. Here: the same check with the version after
    // this build's.
    let dir = tempfile::tempdir().unwrap();
    let (mut bytes, _) = recording_bytes(dir.path(), 5, 2);
    assert_eq!(bytes[8..12], FORMAT_VERSION.to_le_bytes());
    let next = FORMAT_VERSION + 1;
    bytes[8..12].copy_from_slice(&next.to_le_bytes());
    let msg = load(&bytes).unwrap_err().to_string();
    assert!(
        msg.contains(&format!("version {next} is not supported")),
        "{msg}"
    );
    // A v2 block in a file that says version 1 is damage, not a guess.
    let mut h = header(2);
    h.format_version = 1;
    let block = Frame::Block(ColumnBlock::encode(&[sample(0, 2)], 2).unwrap());
    let rec = load(&raw_file_of(1, &[Frame::Header(h), block])).unwrap();
    assert!(reasons(&rec).contains("another format version"));
}

/// A bounded load holds every `stride`-th sample and the last, keeps exact
/// counts and statistics, and places channels that join and end on the
/// samples it holds.
#[test]
fn a_bounded_load_thins_samples_and_keeps_the_whole_in_its_counts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.flr");
    let mut w = RecordingWriter::create(&path, &header(3), false).unwrap();
    let n = 10_003u64;
    for i in 0..n {
        if i == 4_000 {
            w.add_channels(&[ChannelSpec::new("pid9.pss", Unit::Bytes, Group::Memory)])
                .unwrap();
        }
        if i == 7_000 {
            w.end_channels(&[3]).unwrap();
        }
        let mut s = sample(i, 3);
        if (4_000..7_000).contains(&i) {
            s = Sample::from_values(
                i,
                s.t_ns,
                &[s.values()[0], s.values()[1], s.values()[2], i as f64],
            );
        } else if i >= 7_000 {
            // The ended channel's slot is free; nothing joined it.
            s = Sample::from_values(
                i,
                s.t_ns,
                &[s.values()[0], s.values()[1], s.values()[2], f64::NAN],
            );
        }
        w.push_sample(&s).unwrap();
        if i % 100 == 99 {
            w.push_event(Event {
                t_ns: s.t_ns,
                kind: EventKind::Step {
                    step: i / 100,
                    tokens: None,
                },
            })
            .unwrap();
        }
    }
    w.push_event(Event {
        t_ns: n * 10_000_000,
        kind: EventKind::Marker("end".into()),
    })
    .unwrap();
    w.finish("completed").unwrap();
    let whole = Recording::open(&path).unwrap();
    assert_eq!(whole.thinned, None);
    // Room for about 1,000 rows of 4 values (and the time).
    let part = Recording::open_bounded(&path, 1_000 * 5 * 8).unwrap();
    let t = part.thinned.as_ref().expect("thinned");
    assert_eq!((t.stride, t.samples, t.steps), (16, 10_003, 100));
    assert_eq!(part.samples_total(), 10_003);
    assert_eq!(part.events_total(), 101);
    assert_eq!(part.step_events(), whole.step_events());
    assert_eq!(part.events.len(), 1, "only the marker is held");
    // Every 16th sample, and the last.
    assert_eq!(part.len(), 10_002 / 16 + 1 + 1);
    let kept: Vec<u64> = (0..n)
        .step_by(16)
        .chain([n - 1])
        .map(|i| i * 10_000_000)
        .collect();
    assert_eq!(part.t_ns, kept);
    for c in 0..4 {
        assert_eq!(part.column_stats(c), whole.column_stats(c), "channel {c}");
        for (k, &ti) in part.t_ns.iter().enumerate() {
            let i = (ti / 10_000_000) as usize;
            let (a, b) = (part.columns[c][k], whole.columns[c][i]);
            assert!(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
        }
    }
    // The worker joined at sample 4,000 and ended at 7,000: the held rows
    // from 250 (4,000 / 16) to 438 (7,000 / 16, rounded up).
    assert_eq!(
        part.lifetimes[3],
        Lifetime {
            from: 250,
            until: Some(438)
        }
    );
    assert_eq!(part.t_ns[250], 4_000 * 10_000_000);
    assert!(part.t_ns[437] < 7_000 * 10_000_000 && part.t_ns[438] >= 7_000 * 10_000_000);
    // Under the budget, a bounded load is the whole load.
    let roomy = Recording::open_bounded(&path, 1 << 30).unwrap();
    assert_eq!(
        (roomy.t_ns.len(), roomy.thinned.is_none()),
        (whole.len(), true)
    );
    assert_eq!(roomy.columns.len(), whole.columns.len());
}

/// Raw DEFLATE of `raw`, as a hostile writer could make a pack.
fn deflate(raw: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(raw).unwrap();
    z.finish().unwrap()
}

/// A pack of `frames` as MessagePack, whatever they are.
fn pack_of(frames: &[Frame]) -> Frame {
    let raw = rmp_serde::to_vec_named(frames).unwrap();
    Frame::Packed(Packed {
        raw_bytes: raw.len() as u32,
        deflated: deflate(&raw),
    })
}

/// Start and payload length of every stored frame after the magic and
/// version (of this build's format).
fn stored_frames(bytes: &[u8]) -> Vec<(usize, usize)> {
    let head = layout::head_len(FORMAT_VERSION);
    let (mut at, mut out) = (12, Vec::new());
    while at + head <= bytes.len() {
        let h = layout::Head::parse(FORMAT_VERSION, &bytes[at..at + head]).unwrap();
        out.push((at, h.len as usize));
        at += head + h.len as usize;
    }
    out
}

/// Fixes the checksum of the stored frame at `at` after its payload was
/// changed.
fn fix_checksum(b: &mut [u8], at: usize) {
    let head = layout::head_len(FORMAT_VERSION);
    let h = layout::Head::parse(FORMAT_VERSION, &b[at..at + head]).unwrap();
    let crc = layout::checksum(h.at, &b[at + head..at + head + h.len as usize]);
    b[at + 8..at + 12].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn a_v3_recording_keeps_every_f64_bit_for_bit() {
    let specials = [
        0.0,
        -0.0,
        f64::NAN,
        f64::from_bits(0xfff8_0000_0000_0000),
        f64::from_bits(0x7ff8_dead_beef_0001),
        f64::from_bits(0x7ff0_0000_0000_0001),
        f64::INFINITY,
        f64::NEG_INFINITY,
        5e-324,
        -5e-324,
        f64::MAX,
        f64::MIN,
        9_007_199_254_740_992.0,
        0.1,
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("adv.flr");
    let mut w = RecordingWriter::create(&path, &header(3), false).unwrap();
    let mut rng = SplitMix64::new(3);
    let mut wrote = Vec::new();
    for i in 0..2000u64 {
        let vals = [
            specials[(i as usize) % specials.len()],
            f64::from_bits(rng.next_u64()),
            if i % 2 == 0 { 1e300 } else { -0.0 },
        ];
        let s = Sample::from_values(i, i * 1_000_000, &vals);
        w.push_sample(&s).unwrap();
        wrote.push(s);
    }
    w.finish("completed").unwrap();
    let rec = Recording::open(&path).unwrap();
    assert_eq!(rec.header.format_version, FORMAT_VERSION);
    assert_eq!(rec.tail, None);
    let rows: Vec<_> = (0..rec.len())
        .map(|i| {
            let s = rec.sample(i).unwrap();
            (s.seq, s.t_ns, s.values().to_vec())
        })
        .collect();
    // Recording::sample numbers samples by position; the writer's seq here
    // is the position too.
    assert_same_rows(&wrote, &rows, false);
}

#[test]
fn events_share_packs_with_their_samples_and_bursts_are_split() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, summary) = recording_bytes(dir.path(), 1000, 4);
    // 1000 samples written at once are 4 blocks of 256; each pack carries
    // the events queued since the last: no event has a frame of its own.
    // Frames: the header twice, 4 packs, footer.
    assert_eq!(summary.frames, 7, "{summary:?}");
    assert_eq!(stored_frames(&bytes).len(), 7);
    let path = dir.path().join("burst.flr");
    let mut w = RecordingWriter::create(&path, &header(1), false).unwrap();
    let n = 2 * PACK_EVENTS as u64 + 5;
    for i in 0..n {
        w.push_event(Event {
            t_ns: i,
            kind: EventKind::Marker(format!("m{i}")),
        })
        .unwrap();
    }
    let summary = w.finish("completed").unwrap();
    // Two full packs as the burst arrives, the rest with the footer.
    assert_eq!(summary.frames, 2 + 3 + 1, "{summary:?}");
    let rec = Recording::open(&path).unwrap();
    assert_eq!(rec.tail, None);
    assert_eq!(rec.events.len() as u64, n);
    assert!(
        rec.events
            .iter()
            .enumerate()
            .all(|(i, e)| e.t_ns == i as u64)
    );
}

#[test]
fn hostile_packs_are_damage_not_allocations() {
    let block = |i| Frame::Block(ColumnBlock::encode(&[sample(i, 2)], 2).unwrap());
    let good = pack_of(&[block(0)]);
    let zeros = vec![0u8; 8 << 20];
    let cases: Vec<(&str, Frame)> = vec![
        (
            "over the limit",
            Frame::Packed(Packed {
                raw_bytes: MAX_FRAME_BYTES + 1,
                deflated: deflate(b"\x90"),
            }),
        ),
        (
            // 8 MiB of zeros deflate to a few KiB and claim 100 bytes: the
            // reader stops inflating at 101.
            "inflates to 101+ bytes, not the 100",
            Frame::Packed(Packed {
                raw_bytes: 100,
                deflated: deflate(&zeros),
            }),
        ),
        (
            "not the 9 it says",
            Frame::Packed(Packed {
                raw_bytes: 9,
                deflated: deflate(b"\x90"),
            }),
        ),
        (
            "does not inflate",
            Frame::Packed(Packed {
                raw_bytes: 3,
                deflated: vec![0xff; 40],
            }),
        ),
        ("other than", pack_of(&[Frame::Header(header(2))])),
        ("other than", pack_of(&[block(1), good.clone()])),
    ];
    for (want, bad) in cases {
        let rec = load(&raw_file(&[
            Frame::Header(header(2)),
            good.clone(),
            bad,
            good.clone(),
        ]))
        .unwrap();
        assert_eq!(
            rec.len(),
            2,
            "{want}: what is on either side of the bad pack loads"
        );
        let [loss] = &rec.losses[..] else {
            panic!("{want}: {:?}", rec.losses)
        };
        assert!(loss.reason.contains(want), "{want}: {}", loss.reason);
    }
    // A pack in a v2 file is damage too: v2 has no packs.
    let mut h = header(2);
    h.format_version = 2;
    let rec = load(&raw_file_of(2, &[Frame::Header(h), block(0), good])).unwrap();
    assert_eq!(rec.len(), 1);
    assert!(reasons(&rec).contains("packed frame in a format v2 file"));
}

/// A small fuzzer that runs in every test run: bytes of packs changed at
/// random (checksums fixed, so the change reaches the inflater and the
/// decoders behind it) give an error or a consistent recording, never a
/// panic. `fuzz/` runs the same reader under libFuzzer for longer.
#[test]
fn mutated_packs_give_errors_or_consistent_recordings() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, _) = recording_bytes(dir.path(), 600, 4);
    let frames = stored_frames(&bytes);
    let packs = &frames[1..frames.len() - 1];
    let mut rng = SplitMix64::new(99);
    let mut damaged = 0;
    for _ in 0..1500 {
        let mut b = bytes.clone();
        let (at, len) = packs[rng.below(packs.len() as u64) as usize];
        for _ in 0..1 + rng.below(4) {
            let i = at + 20 + rng.below(len as u64) as usize;
            b[i] ^= 1 << rng.below(8);
        }
        fix_checksum(&mut b, at);
        if let Ok(rec) = load(&b) {
            assert_eq!(rec.columns.len(), rec.header.schema.len());
            assert!(rec.columns.iter().all(|c| c.len() == rec.t_ns.len()));
            damaged += usize::from(rec.is_damaged());
        }
    }
    // Nearly every change is caught: a pack's stream is deflate, its list
    // MessagePack, and the digest covers the rest.
    assert!(damaged > 1400, "{damaged} of 1500 changes noticed");
}

/// Any range read through the seek index is the same, value for value, as
/// the same samples of the whole recording loaded; a bounded load's index
/// reads full resolution however thin the load.
#[test]
fn ranges_read_from_disk_match_the_whole_recording() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seek.flr");
    let mut w = RecordingWriter::create(&path, &header(2), false).unwrap();
    let spec = |n: &str| ChannelSpec::new(n, Unit::Bytes, Group::Memory);
    // Workers come and go every 3,000 samples across 20,000: blocks of
    // every size, schema changes between seek points.
    let mut live = None;
    for i in 0..20_000u64 {
        if i % 3000 == 1000 {
            let k = i / 3000;
            w.add_channels(&[spec(&format!("pid{k}.rss"))]).unwrap();
            live = Some(w.schema().len() - 1);
        }
        if i % 3000 == 2500
            && let Some(p) = live.take()
        {
            w.end_channels(&[p]).unwrap();
        }
        let mut vals = vec![i as f64, (i % 7) as f64 * 0.25];
        // The worker's slot stays once made; an ended one's value is not read.
        if i >= 1000 {
            vals.push(if live.is_some() { 1e6 + i as f64 } else { 99.0 });
        }
        w.push_sample(&Sample::from_values(i, i * 10_000_000, &vals))
            .unwrap();
        if i % 777 == 0 {
            w.push_event(Event {
                t_ns: i * 10_000_000,
                kind: EventKind::Marker(format!("m{i}")),
            })
            .unwrap();
        }
    }
    w.finish("completed").unwrap();
    let whole = Recording::open(&path).unwrap();
    assert_eq!(whole.len(), 20_000);
    let index = &whole.index;
    assert!(
        index.points.len() >= 10,
        "{} seek points",
        index.points.len()
    );
    assert!(
        index
            .points
            .windows(2)
            .all(|p| p[1].sample >= p[0].sample + SEEK_EVERY && p[1].offset > p[0].offset)
    );
    for range in [
        0..10,
        5..2000,
        1023..1025,
        2999..7001,
        19_990..20_000,
        19_999..30_000,
    ] {
        let got = index.read(range.clone()).unwrap();
        let end = range.end.min(20_000);
        assert_eq!(got.first, range.start, "{range:?}");
        assert_eq!(got.t_ns, whole.t_ns[range.start..end], "{range:?}");
        for (c, col) in got.columns.iter().enumerate() {
            let want = &whole.columns[c][range.start..end];
            assert!(
                col.iter()
                    .zip(want)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{range:?}, channel {c}"
            );
        }
    }
    // By time: samples 4,000 to 4,100 are 40.00 s to 41.00 s.
    let got = index
        .read_time(40_000_000_000, 41_000_000_000, 1_000)
        .unwrap();
    assert_eq!((got.first, got.len()), (4000, 101));
    let got = index.read_time(40_000_000_000, 41_000_000_000, 10).unwrap();
    assert_eq!(got.len(), 10, "at most what was asked");
    // A load thinned to every 16th sample or so keeps the same index.
    let thin = Recording::open_bounded(&path, 20_000 * 8).unwrap();
    assert!(thin.thinned.as_ref().unwrap().stride > 1);
    assert_eq!(thin.index, whole.index);
}

#[test]
fn a_host_line_says_what_is_unknown_instead_of_empty_punctuation() {
    use crate::{GpuFacts, Header, HostFacts, Schema};
    let full = HostFacts {
        hostname: "node-a".into(),
        os: "Linux (Debian GNU/Linux 12)".into(),
        kernel: "6.18.0".into(),
        cpu_model: "AMD EPYC".into(),
        cores: 2,
        mem_total_bytes: 8 << 30,
        gpu: Some(GpuFacts {
            driver: "580.1".into(),
            devices: vec!["H200".into()],
        }),
    };
    assert_eq!(
        full.summary(),
        "node-a: Linux (Debian GNU/Linux 12), kernel 6.18.0, 2 × AMD EPYC, 8.0 GiB, H200 (driver 580.1)"
    );
    let partial = HostFacts {
        kernel: "6.18.0".into(),
        ..HostFacts::default()
    };
    assert_eq!(partial.summary(), "unnamed host: kernel 6.18.0");
    assert_eq!(HostFacts::default().summary(), "not recorded");
    let mut h = Header::new(
        "import",
        Schema::default(),
        HostFacts::default(),
        [("csv".to_owned(), "log.csv".to_owned())].into(),
        Vec::new(),
    );
    assert_eq!(h.host_line(), "not recorded: imported from a CSV log");
    h.config = [("format".to_owned(), "JSON lines".to_owned())].into();
    assert_eq!(
        h.host_line(),
        "not recorded: imported from a JSON lines log"
    );
    h.source = "watch".into();
    assert_eq!(h.host_line(), "not recorded");
    h.host = full.clone();
    assert_eq!(h.host_line(), full.summary());
}

/// Everything a pass hands on, as text (values by their bits).
#[derive(Default)]
struct Log(Vec<String>);

impl Visit for Log {
    fn channels(&mut self, at: usize, specs: &[ChannelSpec]) {
        let names: Vec<_> = specs.iter().map(|s| s.name.as_str()).collect();
        self.0.push(format!("add {at} {names:?}"));
    }
    fn ended(&mut self, at: usize, positions: &[u32]) {
        self.0.push(format!("end {at} {positions:?}"));
    }
    fn rows(&mut self, first: usize, t_ns: &[u64], values: &[f64]) {
        let width = values.len() / t_ns.len().max(1);
        for (i, (t, row)) in t_ns.iter().zip(values.chunks(width.max(1))).enumerate() {
            let bits: Vec<_> = row.iter().map(|v| v.to_bits()).collect();
            self.0.push(format!("row {} {t} {bits:?}", first + i));
        }
    }
    fn event(&mut self, e: Event) {
        self.0.push(format!("event {e:?}"));
    }
}

/// A file another process is still writing: reads see only its first
/// `shown` bytes.
struct Growing {
    bytes: std::rc::Rc<Vec<u8>>,
    shown: std::rc::Rc<std::cell::Cell<usize>>,
    at: u64,
}

impl std::io::Read for Growing {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let end = self.shown.get();
        let from = (self.at as usize).min(end);
        let n = buf.len().min(end - from);
        buf[..n].copy_from_slice(&self.bytes[from..from + n]);
        self.at += n as u64;
        Ok(n)
    }
}

impl std::io::Seek for Growing {
    fn seek(&mut self, pos: std::io::SeekFrom) -> std::io::Result<u64> {
        let std::io::SeekFrom::Start(at) = pos else {
            unreachable!("the frame reader seeks only from the start")
        };
        self.at = at;
        Ok(at)
    }
}

/// A follower of `bytes` shown `step` bytes more at each read: its log and
/// what it found at the end.
fn follow_in_steps(bytes: &[u8], step: usize) -> (Vec<String>, Scanned) {
    let bytes = std::rc::Rc::new(bytes.to_vec());
    let shown = std::rc::Rc::new(std::cell::Cell::new(0));
    let growing = |at| Growing {
        bytes: bytes.clone(),
        shown: shown.clone(),
        at,
    };
    // Open once the header is there, as the watch window does.
    let mut scanner = loop {
        shown.set((shown.get() + step).min(bytes.len()));
        match Scanner::open(growing(0), Path::new("mem.flr")) {
            Ok(s) => break s,
            Err(_) if shown.get() < bytes.len() => {}
            Err(e) => panic!("{e}"),
        }
    };
    let mut log = Log::default();
    while scanner.read_new(&mut log) {
        if shown.get() == bytes.len() {
            // The writer stopped without a footer: the follower gives up.
            break;
        }
        shown.set((shown.get() + step).min(bytes.len()));
    }
    (log.0, scanner.into_scanned())
}

fn scan_whole(bytes: &[u8]) -> (Vec<String>, Scanned) {
    let mut log = Log::default();
    let s = scan(std::io::Cursor::new(bytes), Path::new("mem.flr"), &mut log).unwrap();
    (log.0, s)
}

fn same_scan(a: &Scanned, b: &Scanned, what: &str) {
    assert_eq!(
        (
            a.samples,
            a.bytes,
            a.frames,
            &a.digest,
            &a.tail,
            &a.lifetimes
        ),
        (
            b.samples,
            b.bytes,
            b.frames,
            &b.digest,
            &b.tail,
            &b.lifetimes
        ),
        "{what}"
    );
    assert_eq!(a.losses, b.losses, "{what}");
    assert_eq!(a.footer.is_some(), b.footer.is_some(), "{what}");
    assert_eq!(a.header.schema.len(), b.header.schema.len(), "{what}");
}

#[test]
fn a_file_followed_as_it_is_written_reads_as_the_finished_file_scans() {
    let dir = tempfile::tempdir().unwrap();
    // Samples, events and packs, and channels that join and end.
    let path = dir.path().join("grow.flr");
    let mut w = RecordingWriter::create(&path, &header(2), true).unwrap();
    for i in 0..400 {
        if i == 100 {
            w.add_channels(&[ChannelSpec::new("pid7.rss", Unit::Bytes, Group::Memory)])
                .unwrap();
        }
        if i == 300 {
            w.end_channels(&[2]).unwrap();
        }
        let width = if (100..300).contains(&i) { 3 } else { 2 };
        let mut s = sample(i, width);
        if i >= 300 {
            s = Sample::from_values(i, i * 10_000_000, &[1.0, 2.0, 9.0]);
        }
        w.push_sample(&s).unwrap();
        if i % 50 == 49 {
            w.push_event(Event {
                t_ns: i * 10_000_000,
                kind: EventKind::Step {
                    step: i / 50,
                    tokens: None,
                },
            })
            .unwrap();
        }
    }
    w.finish("completed").unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let (whole_log, whole) = scan_whole(&bytes);
    assert!(whole.tail.is_none() && whole.footer.is_some());
    assert!(whole_log.iter().any(|l| l.starts_with("add 100")));
    assert!(whole_log.iter().any(|l| l.starts_with("end 300")));
    for step in [1, 7, 64, 1000, bytes.len()] {
        let (log, s) = follow_in_steps(&bytes, step);
        assert_eq!(log, whole_log, "shown {step} bytes at a time");
        same_scan(&s, &whole, &format!("shown {step} bytes at a time"));
    }
    // A writer that stopped without its footer: truncated, as scan says.
    let cut = &bytes[..bytes.len() - 40];
    let (whole_log, whole) = scan_whole(cut);
    assert_eq!(
        whole.tail.as_ref().unwrap().kind,
        TailProblemKind::Truncated
    );
    let (log, s) = follow_in_steps(cut, 97);
    assert_eq!(log, whole_log);
    same_scan(&s, &whole, "a cut file");
}

#[test]
fn a_follower_keeps_the_checks_of_a_whole_scan() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, _) = recording_bytes(dir.path(), 300, 3);
    // Damage in the middle, data after the footer: each ends the follower
    // where it ends a scan, and says why.
    let mut flipped = bytes.clone();
    flipped[bytes.len() / 2] ^= 0x40;
    let mut doubled = bytes.clone();
    doubled.extend_from_slice(&bytes[12..]);
    for (what, file) in [
        ("a flipped bit", flipped),
        ("data after the footer", doubled),
    ] {
        let (whole_log, whole) = scan_whole(&file);
        assert!(whole.tail.is_some() || !whole.losses.is_empty(), "{what}");
        for step in [13, 500] {
            let (log, s) = follow_in_steps(&file, step);
            assert_eq!(log, whole_log, "{what}");
            same_scan(&s, &whole, what);
        }
    }
}

/// What `create` would refuse, `check_path` says first, and leaves nothing.
#[test]
fn a_path_is_checked_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let new = dir.path().join("new.flr");
    RecordingWriter::check_path(&new, false).unwrap();
    assert!(!new.exists());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "left nothing"
    );
    let old = dir.path().join("old.flr");
    std::fs::write(&old, b"kept").unwrap();
    let e = RecordingWriter::check_path(&old, false).unwrap_err();
    assert!(matches!(e, RecordingError::Exists { .. }), "{e}");
    RecordingWriter::check_path(&old, true).unwrap();
    assert_eq!(std::fs::read(&old).unwrap(), b"kept", "not truncated");
    let e = RecordingWriter::check_path(&dir.path().join("no/such.flr"), false).unwrap_err();
    assert!(matches!(e, RecordingError::MissingFolder { .. }), "{e}");
    let e = RecordingWriter::check_path(dir.path(), true).unwrap_err();
    assert!(e.to_string().contains("a folder"), "{e}");
}
