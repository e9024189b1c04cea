//! Nothing lost: a writer whose writes fail at any moment keeps a file
//! that reads to its end, and a reader goes on past damaged frames.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::tests::{SplitMix64, header, load, recording_bytes};
use crate::*;

/// A disk that fills on cue: from the `fail_at`-th write call on, writes
/// fail (the first of them after writing half of what it was given, as a
/// real full disk may), until the test frees it.
#[derive(Debug, Clone, Default)]
struct Disk(Arc<Mutex<DiskState>>);

#[derive(Debug, Default)]
struct DiskState {
    bytes: Vec<u8>,
    pos: usize,
    writes: u64,
    fail_at: Option<u64>,
    full: bool,
    partial_done: bool,
}

impl Disk {
    fn state(&self) -> std::sync::MutexGuard<'_, DiskState> {
        self.0.lock().unwrap()
    }
    fn free(&self) {
        let mut s = self.state();
        s.full = false;
        s.fail_at = None;
    }
}

impl Write for Disk {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut s = self.state();
        s.writes += 1;
        if s.fail_at.is_some_and(|k| s.writes >= k) {
            s.full = true;
        }
        let n = if s.full {
            if s.partial_done || buf.len() < 2 {
                return Err(std::io::Error::from_raw_os_error(28));
            }
            s.partial_done = true;
            buf.len() / 2
        } else {
            buf.len()
        };
        let pos = s.pos;
        if s.bytes.len() < pos + n {
            s.bytes.resize(pos + n, 0);
        }
        s.bytes[pos..pos + n].copy_from_slice(&buf[..n]);
        s.pos += n;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Storage for Disk {
    fn try_clone(&self) -> std::io::Result<Self> {
        Ok(self.clone())
    }
    fn cut_to(&mut self, len: u64) -> std::io::Result<()> {
        let mut s = self.state();
        s.bytes.truncate(len as usize);
        s.pos = len as usize;
        Ok(())
    }
    fn sync(&mut self) -> std::io::Result<()> {
        if self.state().full {
            return Err(std::io::Error::from_raw_os_error(28));
        }
        Ok(())
    }
}

/// What the run pushed: for each sample's time, every live channel's value
/// by name.
type Truth = BTreeMap<u64, BTreeMap<String, f64>>;

/// A run in which channels join and end (as a tree's processes come and
/// go) with the disk filling at the `fail_at`-th write and freed 40 samples
/// later. Returns the file, what was pushed, the samples pushed after the
/// writer said it resumed, and the gap's lost count.
struct Run {
    bytes: Vec<u8>,
    truth: Truth,
    after_resume: Vec<u64>,
    lost: u64,
    complete: bool,
    writes: u64,
}

fn run_with_fault(fail_at: Option<u64>) -> Option<Run> {
    let disk = Disk::default();
    disk.state().fail_at = fail_at;
    // A fault while the header is written is an error from `create`: no
    // recording was begun.
    let mut w =
        RecordingWriter::with_storage(disk.clone(), Path::new("disk.flr"), &header(2)).ok()?;
    let mut names: Vec<String> = vec!["c0".into(), "c1".into()];
    let mut live: Vec<bool> = vec![true, true];
    let mut truth = Truth::new();
    let mut after_resume = Vec::new();
    let mut resumed = false;
    let mut faulted_at: Option<u64> = None;
    let mut lost = 0;
    let mut rng = SplitMix64::new(fail_at.unwrap_or(0) + 1);
    for i in 0..400u64 {
        // Channels join and end at fixed samples, whatever the disk does.
        let spec = |n: &str| ChannelSpec::new(n, Unit::Bytes, Group::Memory);
        match i {
            50 | 170 | 290 => {
                let a = format!("pid{i}.rss");
                let b = format!("pid{i}.pss");
                let _ = w.add_channels(&[spec(&a), spec(&b)]);
                names.extend([a, b]);
                live.extend([true, true]);
            }
            120 | 240 | 330 => {
                let p = names.len() - 2;
                let _ = w.end_channels(&[p]);
                live[p] = false;
            }
            _ => {}
        }
        let t = i * 10_000_000;
        let mut values = vec![f64::NAN; w.slots().width()];
        let mut row = BTreeMap::new();
        for (p, name) in names.iter().enumerate() {
            if let (true, Some(slot)) = (live[p], w.slots().slot(p)) {
                let v = (i * 1000 + p as u64) as f64 + (rng.below(3) as f64);
                values[slot] = v;
                row.insert(name.clone(), v);
            }
        }
        truth.insert(t, row);
        let _ = w.push_sample(&Sample::from_values(i, t, &values));
        if resumed {
            after_resume.push(t);
        }
        if i % 7 == 0 {
            let _ = w.push_event(Event {
                t_ns: t,
                kind: EventKind::Marker(format!("m{i}")),
            });
        }
        // Written and flushed often: many durable points, many writes.
        if i % 5 == 4 {
            let _ = w.write_queued();
        }
        if w.fault().is_some() && faulted_at.is_none() {
            faulted_at = Some(i);
        }
        if faulted_at.is_some_and(|f| i == f + 40) {
            disk.free();
            w.retry_now();
            if let Some(f) = w.take_resumed() {
                resumed = true;
                lost = f.lost_samples;
            }
        }
    }
    let complete = w.finish("completed").is_ok();
    let s = disk.state();
    Some(Run {
        bytes: s.bytes.clone(),
        truth,
        after_resume,
        lost,
        complete,
        writes: s.writes,
    })
}

/// Checks a file against what was pushed: whole, every sample read is what
/// was pushed at its time, channel by channel.
fn check_against(bytes: &[u8], truth: &Truth, complete: bool, what: &str) -> Recording {
    let rec = load(bytes).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(rec.losses.is_empty(), "{what}: {:?}", rec.losses);
    if complete {
        assert_eq!(rec.tail, None, "{what}: the file reads to its footer");
    } else {
        // The disk was still full at the end: whole up to the fault.
        let tail = rec.tail.as_ref().expect("no footer");
        assert_eq!(tail.kind, TailProblemKind::Truncated, "{what}: {tail}");
    }
    for (k, t) in rec.t_ns.iter().enumerate() {
        let row = &truth[t];
        for (c, spec) in rec.header.schema.channels.iter().enumerate() {
            let read = rec.columns[c][k];
            match row.get(&spec.name) {
                Some(v) => assert_eq!(read, *v, "{what}: {} at {t}", spec.name),
                None => assert!(read.is_nan(), "{what}: {} at {t} read {read}", spec.name),
            }
        }
    }
    rec
}

#[test]
fn a_write_fault_at_any_write_leaves_a_file_that_reads_to_its_end() {
    let clean = run_with_fault(None).unwrap();
    assert!(clean.complete);
    let whole = check_against(&clean.bytes, &clean.truth, true, "no fault");
    assert_eq!(whole.len(), 400);
    assert_eq!(whole.header.schema.len(), 8);
    // Each write call of a clean run gets its fault.
    let writes = clean.writes;
    assert!(writes > 60, "{writes} writes");
    let mut faulted = 0;
    for k in 1..=writes {
        let Some(Run {
            bytes,
            truth,
            after_resume: after,
            lost,
            complete,
            ..
        }) = run_with_fault(Some(k))
        else {
            assert!(k <= 2, "only the header's writes fail `create`");
            continue;
        };
        let what = format!("fault at write {k}");
        let rec = check_against(&bytes, &truth, complete, &what);
        if !complete {
            continue;
        }
        if lost > 0 {
            faulted += 1;
        }
        // Every sample is either read or counted as lost by the gap note.
        assert_eq!(rec.len() as u64 + lost, 400, "{what}");
        // Every sample after the gap is there, with its channels.
        for t in &after {
            assert!(rec.t_ns.contains(t), "{what}: sample at {t} after the gap");
        }
        assert_eq!(rec.header.schema.len(), 8, "{what}: every channel");
        let gap = rec
            .events
            .iter()
            .any(|e| matches!(&e.kind, EventKind::Note(n) if n.starts_with(GAP_NOTE)));
        assert_eq!(gap, lost > 0, "{what}: a gap note where samples were lost");
        // The note reads back as the gap it says, sample for sample.
        let said: u64 = rec
            .events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Note(n) if n.starts_with(GAP_NOTE) => Some(
                    Gap::parse(n)
                        .unwrap_or_else(|| panic!("{what}: {n}"))
                        .samples,
                ),
                _ => None,
            })
            .sum();
        assert_eq!(said, lost, "{what}: the gap notes' samples");
    }
    assert!(
        faulted as u64 > writes / 2,
        "only {faulted} of {writes} runs met their fault"
    );
}

/// Start, head and payload length of every stored frame, and the samples
/// each holds.
fn frames_of(bytes: &[u8]) -> Vec<(usize, usize, u64)> {
    let head = layout::head_len(FORMAT_VERSION);
    let mut out = Vec::new();
    let mut at = 12;
    while at + head <= bytes.len() {
        let h = layout::Head::parse(FORMAT_VERSION, &bytes[at..at + head]).unwrap();
        out.push((at, head + h.len as usize, h.at.unwrap()));
        at += head + h.len as usize;
    }
    // Samples in each: the next frame's index less its own.
    let mut with = Vec::new();
    for (k, &(s, len, a)) in out.iter().enumerate() {
        let next = out.get(k + 1).map_or(a, |f| f.2);
        with.push((s, len, next - a));
    }
    with
}

#[test]
fn five_damaged_frames_lose_only_what_they_held() {
    let Run { bytes, truth, .. } = run_with_fault(None).unwrap();
    let frames = frames_of(&bytes);
    let total = load(&bytes).unwrap().len() as u64;
    let mut rng = SplitMix64::new(7);
    for round in 0..40 {
        let mut b = bytes.clone();
        let mut hit = std::collections::BTreeSet::new();
        while hit.len() < 5 {
            hit.insert(rng.below(frames.len() as u64) as usize);
        }
        for &k in &hit {
            let (s, len, _) = frames[k];
            let i = s + rng.below(len as u64) as usize;
            b[i] ^= 1 << rng.below(8);
        }
        let what = format!("round {round}, frames {hit:?}");
        let rec = load(&b).unwrap_or_else(|e| panic!("{what}: {e}"));
        let held: u64 = hit.iter().map(|&k| frames[k].2).sum();
        assert_eq!(rec.len() as u64, total - held, "{what}: {:?}", rec.losses);
        let lost_bytes: u64 = rec.losses.iter().map(|l| l.bytes).sum();
        let hit_bytes: u64 = hit.iter().map(|&k| frames[k].1 as u64).sum();
        assert_eq!(lost_bytes, hit_bytes, "{what}: {:?}", rec.losses);
        let lost_samples: u64 = rec.losses.iter().map(|l| l.samples.unwrap()).sum();
        assert_eq!(lost_samples, held, "{what}");
        assert!(rec.losses.len() <= 5 && !rec.losses.is_empty(), "{what}");
        // Every channel is still known, and what is read is right.
        assert_eq!(rec.header.schema.len(), 8, "{what}");
        let last = frames.len() - 1;
        if !hit.contains(&last) {
            assert!(rec.footer.is_some(), "{what}");
        }
        for (k, t) in rec.t_ns.iter().enumerate() {
            for (c, spec) in rec.header.schema.channels.iter().enumerate() {
                let read = rec.columns[c][k];
                if spec.name.starts_with("lost.") {
                    // Both copies of its change were hit: its name is gone.
                    continue;
                }
                match truth[t].get(&spec.name) {
                    Some(v) => assert_eq!(read, *v, "{what}: {} at {t}", spec.name),
                    None => assert!(read.is_nan(), "{what}: {} at {t}", spec.name),
                }
            }
        }
    }
}

#[test]
fn every_single_damaged_byte_costs_at_most_its_frame() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, _) = recording_bytes(dir.path(), 700, 3);
    let frames = frames_of(&bytes);
    let total = load(&bytes).unwrap();
    for i in 12..bytes.len() {
        let mut b = bytes.clone();
        b[i] ^= 0x10;
        let rec = load(&b).unwrap_or_else(|e| panic!("byte {i}: {e}"));
        let &(_, len, held) = frames
            .iter()
            .find(|(s, l, _)| (*s..s + l).contains(&i))
            .unwrap();
        assert_eq!(rec.len() as u64, total.len() as u64 - held, "byte {i}");
        if i >= frames.last().unwrap().0 && rec.footer.is_none() {
            // The footer's length hit: the file reads as one cut short
            // there, which it cannot be told from.
            assert!(rec.is_truncated() || rec.is_damaged(), "byte {i}");
            continue;
        }
        assert!(rec.is_damaged(), "byte {i}");
        let lost: u64 = rec.losses.iter().map(|l| l.bytes).sum();
        assert_eq!(lost, len as u64, "byte {i}: {:?}", rec.losses);
        assert_eq!(
            rec.events.len(),
            total.events.len() - events_in(&bytes, i),
            "byte {i}"
        );
    }
}

/// Events in the stored frame holding byte `i`.
fn events_in(bytes: &[u8], i: usize) -> usize {
    let head = layout::head_len(FORMAT_VERSION);
    let (s, len, _) = *frames_of(bytes)
        .iter()
        .find(|(s, l, _)| (*s..s + l).contains(&i))
        .unwrap();
    let frame = crate::codec::decode(&bytes[s + head..s + len]).unwrap();
    match frame {
        Frame::Packed(p) => p
            .unpack()
            .unwrap()
            .iter()
            .filter(|f| matches!(f, Frame::Event(_)))
            .count(),
        Frame::Event(_) => 1,
        _ => 0,
    }
}

#[test]
fn a_v4_file_is_read_past_a_frame_whose_length_still_holds() {
    let v4 =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../recordings/golden/v4.flr"))
            .unwrap();
    let whole = load(&v4).unwrap();
    // The stored frames of v4: length | crc | payload.
    let mut starts = Vec::new();
    let mut at = 12;
    while at + 8 <= v4.len() {
        let len = u32::from_le_bytes(v4[at..at + 4].try_into().unwrap()) as usize;
        starts.push((at, len));
        at += 8 + len;
    }
    // A flipped bit in the payload of a frame in the middle.
    let (s, len) = starts[starts.len() / 2];
    let mut b = v4.clone();
    b[s + 8 + len / 2] ^= 1;
    let rec = load(&b).unwrap();
    let [loss] = &rec.losses[..] else {
        panic!("{:?} {:?}", rec.losses, rec.tail)
    };
    assert_eq!((loss.offset, loss.bytes), (s as u64, 8 + len as u64));
    assert!(rec.footer.is_some(), "read to the footer");
    // The footer counts the samples: the loss knows how many it took.
    assert_eq!(
        loss.samples,
        Some(whole.len() as u64 - rec.len() as u64),
        "{loss}"
    );
}

/// The stored frames of a v1–v4 file: start and payload length.
fn old_frames(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 12;
    while at + 8 <= b.len() {
        let len = u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
        out.push((at, len));
        at += 8 + len;
    }
    out
}

/// A file of every older format whose frame lengths were damaged (one past
/// the limit, one that points into the next frame's payload) and one of
/// whose payloads was: its frames are found again past each, to the
/// footer, and only the damaged frames are lost.
#[test]
fn older_formats_are_read_past_a_damaged_length() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("../recordings");
    for (file, version) in [
        ("golden/v1.flr", 1),
        ("golden/v2.flr", 2),
        ("golden/v3.flr", 3),
        ("golden/v4.flr", 4),
        ("watch-torch-leak-45s.flr", 3),
    ] {
        let bytes = std::fs::read(golden.join(file)).unwrap();
        assert_eq!(bytes[8] as u32, version, "{file}");
        let whole = load(&bytes).unwrap();
        let frames = old_frames(&bytes);
        let n = frames.len();
        // The header, the footer and the last frame of samples stay whole:
        // what is damaged is inside.
        // Frames apart from each other: damage in frames side by side is
        // one loss.
        let hit = [1, (n - 2) / 2, n - 3];
        assert!(hit[1] >= 3 && hit[2] >= hit[1] + 2, "{file}: {n} frames");
        let mut b = bytes.clone();
        // A length whose high byte went bad (over the limit), …
        b[frames[hit[0]].0 + 3] = 0xFF;
        // … one that reads short, into the frame's own payload, …
        b[frames[hit[1]].0] ^= 0x03;
        // … and a flipped byte in a payload.
        let (s, len) = frames[hit[2]];
        b[s + 8 + len / 2] ^= 0x40;
        let rec = load(&b).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(
            rec.footer.is_some(),
            "{file}: read to the footer: {:?} {:?}",
            rec.losses,
            rec.tail
        );
        assert_eq!(rec.losses.len(), 3, "{file}: {:?}", rec.losses);
        for (loss, &k) in rec.losses.iter().zip(&hit) {
            let (s, len) = frames[k];
            assert_eq!(
                (loss.offset, loss.bytes),
                (s as u64, 8 + len as u64),
                "{file}: frame {k}: {loss}"
            );
        }
        // What was read is the whole file's but for those frames' samples.
        assert!(rec.len() < whole.len() || rec.events.len() < whole.events.len());
        assert_eq!(
            rec.t_ns.last(),
            whole.t_ns.last(),
            "{file}: read to its end"
        );
    }
}

/// Garbage after a damaged length: nothing is found again, and what was
/// passed over runs to the end of the file.
#[test]
fn an_older_file_whose_rest_cannot_be_read_says_how_much() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../recordings/golden/v3.flr");
    let bytes = std::fs::read(path).unwrap();
    let frames = old_frames(&bytes);
    let (s, _) = frames[frames.len() / 2];
    let mut b = bytes.clone();
    b[s + 3] = 0xFF;
    // Every frame after it is overwritten.
    let mut rng = SplitMix64::new(3);
    for x in &mut b[s + 8..] {
        *x = rng.below(256) as u8;
    }
    let rec = load(&b).unwrap();
    assert!(rec.footer.is_none());
    let last = rec.losses.last().unwrap();
    assert_eq!(
        (last.offset, last.bytes, last.before_ns),
        (s as u64, (b.len() - s) as u64, None),
        "{last}"
    );
}
