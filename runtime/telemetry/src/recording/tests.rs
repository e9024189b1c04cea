//! The recording tests that need the runtime: CSV import/export and the
//! recorder thread fed by a real sampler.

use std::collections::BTreeMap;
use std::path::Path;

use super::*;
use crate::{ChannelSpec, Group, Sample, Schema, Unavailable, Unit};

fn header(channels: usize) -> Header {
    let schema = Schema {
        channels: (0..channels)
            .map(|i| ChannelSpec::new(format!("c{i}"), Unit::Bytes, Group::Memory))
            .collect(),
    };
    let mut h = Header::new(
        "test",
        schema,
        HostFacts::default(),
        BTreeMap::new(),
        vec![],
    );
    h.unavailable = vec![Unavailable::new("gpu", "no driver")];
    h
}

mod csv_import {
    use super::*;
    use crate::keys::unit_of;
    use crate::recording::csv::{CsvError, export, import};

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
        let path = dir.path().join("r.flr");
        let mut w = RecordingWriter::create(&path, &header(3), false).unwrap();
        for i in 0..20u64 {
            let c2 = if i % 7 == 0 { f64::NAN } else { (i * 2) as f64 };
            let vals = [1e9, i as f64 * 0.5, c2];
            w.push_sample(&Sample::from_values(i, i * 10_000_000, &vals))
                .unwrap();
        }
        w.finish("completed").unwrap();
        let out = dir.path().join("out.csv");
        assert_eq!(
            export(&path, &out, false, Default::default()).unwrap().rows,
            20
        );
        let text = std::fs::read_to_string(&out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "t_s,c0,c1,c2");
        assert_eq!(lines[1], "0.000000,1000000000,0,");
        assert_eq!(lines[2], "0.010000,1000000000,0.5,2");
        assert_eq!(lines.len(), 21);
        assert!(
            export(&path, &out, false, Default::default()).is_err(),
            "no silent overwrite"
        );
    }
}

#[test]
fn the_recorder_keeps_every_sample_the_sampler_sent() {
    use crate::SamplerConfig;
    let dir = tempfile::tempdir().unwrap();
    let tel = crate::start(SamplerConfig {
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

/// A window's recorder: samples sent straight into its queue (no sampler),
/// and an event; returns the recorder's feed and what it ended with.
fn window_run(
    writer: Option<RecordingWriter>,
    n: u64,
) -> (
    Feed,
    Option<RecorderSummary>,
    crossbeam_channel::Sender<Sample>,
) {
    let (tx, rx) = crossbeam_channel::bounded(4096);
    let (rec, feed) = Recorder::spawn_for_window(
        writer,
        rx,
        crate::SchemaFeed::default(),
        event_channel(),
        None,
        OnFault::Retry,
    )
    .unwrap();
    for i in 0..n {
        tx.send(Sample::from_values(i, i * 1_000_000, &[i as f64, 2.0, 3.0]))
            .unwrap();
    }
    rec.event(Event {
        t_ns: n * 1_000_000,
        kind: EventKind::Marker("here".into()),
    });
    let end = rec.finish_window("window closed").unwrap();
    (feed, end, tx)
}

#[test]
fn a_windows_recorder_writes_the_file_and_hands_the_window_the_same_items() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.flr");
    let w = RecordingWriter::create(&path, &header(3), false).unwrap();
    let (feed, end, _tx) = window_run(Some(w), 500);
    let end = end.expect("a recording was written");
    assert_eq!(end.write.samples, 500);
    let mut shown = Vec::new();
    shown.extend(feed.items());
    let samples: Vec<&Sample> = shown
        .iter()
        .filter_map(|i| match i {
            Item::Sample(s) => Some(s),
            _ => None,
        })
        .collect();
    assert_eq!(samples.len(), 500);
    let back = Recording::open(&path).unwrap();
    assert_eq!(back.footer.as_ref().unwrap().end, "window closed");
    let c0 = back.channel("c0").unwrap();
    assert_eq!(c0.len(), 500);
    assert!(samples.iter().zip(c0).all(|(s, v)| s.values()[0] == *v));
    assert!(
        shown.iter().any(
            |i| matches!(i, Item::Event(Event { kind: EventKind::Marker(m), .. }) if m == "here")
        ),
        "the window gets the event the file got"
    );
    assert_eq!(back.events.len(), 1);
    assert_eq!(feed.dropped(), 0);
}

#[test]
fn a_window_that_records_nothing_still_gets_its_stream() {
    let (feed, end, _tx) = window_run(None, 50);
    assert!(end.is_none(), "nothing was recorded");
    let n = feed
        .items()
        .filter(|item| matches!(item, Item::Sample(_)))
        .count();
    assert_eq!(n, 50);
}

#[test]
fn a_window_that_does_not_read_misses_samples_past_its_backlog_but_no_schema_change() {
    let (tap, feed) = WindowTap::new();
    let extra = 25;
    for i in 0..(WINDOW_BACKLOG + extra) as u64 {
        tap.send(Item::Sample(Sample::from_values(i, i, &[1.0])));
    }
    let spec = header(1).schema.channels[0].clone();
    tap.send(Item::Add(vec![spec]));
    tap.send(Item::End(vec![0]));
    assert_eq!(feed.dropped(), extra as u64);
    let (mut samples, mut changes) = (0, 0);
    for item in feed.items() {
        match item {
            Item::Sample(_) => samples += 1,
            _ => changes += 1,
        }
    }
    assert_eq!((samples, changes), (WINDOW_BACKLOG, 2));
    // Read, the backlog is free again.
    tap.send(Item::Sample(Sample::from_values(0, 0, &[1.0])));
    assert_eq!(feed.dropped(), extra as u64);
}

#[test]
fn the_writer_allocates_nothing_per_block_once_warm() {
    use crate::alloc::count_thread_allocs;
    let dir = tempfile::tempdir().unwrap();
    let mut w = RecordingWriter::create(&dir.path().join("a.flr"), &header(35), false).unwrap();
    let sample = |i: u64| {
        let vals: Vec<f64> = (0..35)
            .map(|c| match c {
                0 => 1e9 + (i / 300) as f64 * 4096.0,
                1 => (i * 1_234_567) as f64,
                2 => (i % 17) as f64 * 0.37,
                3 if !i.is_multiple_of(50) => f64::NAN,
                _ => c as f64,
            })
            .collect();
        Sample::from_values(i, i * 10_000_000 + (i * 7919) % 100_000, &vals)
    };
    let samples: Vec<Sample> = (0..6000).map(sample).collect();
    // Warm: the block, the codes and the payload buffers grow to their size.
    for s in &samples[..3000] {
        w.push_sample(s).unwrap();
    }
    let (r, n) = count_thread_allocs(|| {
        for s in &samples[3000..] {
            w.push_sample(s)?;
        }
        Ok::<(), RecordingError>(())
    });
    r.unwrap();
    assert_eq!(n, Some(0), "allocation calls for 3000 samples (11 blocks)");
    w.finish("completed").unwrap();
}
