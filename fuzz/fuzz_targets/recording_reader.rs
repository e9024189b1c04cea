//! Any bytes at all through the recording reader (formats v1 to v3, packs
//! included): it must return an error or a recording whose columns line up,
//! never panic, hang or allocate without bound. Under `cfg(fuzzing)` the
//! reader skips frame checksums, so mutations reach the inflater and the
//! MessagePack, column-block and schema decoders instead of dying at the CRC.
//! The same bytes are then followed as a growing file (the watch window's
//! road, [`Scanner`]), shown in two parts: it must find what a whole scan
//! finds. And the fuzzer's first five bytes pick a byte of the v5 golden
//! recording to damage: read with checksums on, it may cost at most the
//! frame it falls in.
#![no_main]

use std::cell::Cell;
use std::io::{Cursor, Read, Seek, SeekFrom};
use std::path::Path;

use flatline_format::{Recording, Scanned, Scanner, Visit, layout, scan};
use libfuzzer_sys::fuzz_target;

/// The fuzzer's bytes as a file still being written: reads see `shown`.
struct Growing<'a> {
    data: &'a [u8],
    shown: &'a Cell<usize>,
    at: usize,
}

impl Read for Growing<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let shown = self.shown.get();
        let from = self.at.min(shown);
        let n = buf.len().min(shown - from);
        buf[..n].copy_from_slice(&self.data[from..from + n]);
        self.at += n;
        Ok(n)
    }
}

impl Seek for Growing<'_> {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        if let SeekFrom::Start(at) = pos {
            self.at = at as usize;
        }
        Ok(self.at as u64)
    }
}

/// Counts what a pass hands on.
#[derive(Default, PartialEq, Debug)]
struct Counts {
    rows: usize,
    events: usize,
    added: usize,
    ended: usize,
}

impl Visit for Counts {
    fn channels(&mut self, _: usize, specs: &[flatline_format::ChannelSpec]) {
        self.added += specs.len();
    }
    fn ended(&mut self, _: usize, positions: &[u32]) {
        self.ended += positions.len();
    }
    fn rows(&mut self, _: usize, t_ns: &[u64], _: &[f64]) {
        self.rows += t_ns.len();
    }
    fn event(&mut self, _: flatline_format::Event) {
        self.events += 1;
    }
}

fn key(s: &Scanned) -> impl PartialEq + std::fmt::Debug + '_ {
    (
        s.samples,
        s.bytes,
        s.frames,
        &s.digest,
        &s.tail,
        &s.lifetimes,
        &s.losses,
    )
}

/// A whole v5 recording in which channels join and end (the golden file).
const V5: &[u8] = include_bytes!("../../recordings/golden/v5.flr");

/// One damaged byte of a good v5 recording, where the fuzzer's first bytes
/// say, with checksums checked as a real reader checks them: it costs at
/// most the frame it falls in (its samples, its bytes).
fn one_damaged_byte(data: &[u8]) {
    let Some(pick) = data.get(..5) else { return };
    let at = 12 + u32::from_le_bytes(pick[..4].try_into().unwrap()) as usize % (V5.len() - 12);
    let flip = pick[4].max(1);
    // The clean file's frames: where each starts, how long, and the
    // samples it holds (the next frame's index less its own).
    let head = layout::head_len(5);
    let mut frames = Vec::new();
    let mut p = 12;
    while p + head <= V5.len() {
        let h = layout::Head::parse(5, &V5[p..p + head]).expect("the golden file is whole");
        frames.push((p, head + h.len as usize, h.at.unwrap()));
        p += head + h.len as usize;
    }
    let k = frames.iter().position(|f| (f.0..f.0 + f.1).contains(&at)).unwrap();
    let held = frames.get(k + 1).map_or(0, |f| f.2) .saturating_sub(frames[k].2);
    let clean = Recording::from_bytes(V5, Path::new("v5.flr")).unwrap();
    let mut bad = V5.to_vec();
    bad[at] ^= flip;
    flatline_format::check_checksums(true);
    let read = Recording::from_bytes(&bad, Path::new("v5.flr"));
    flatline_format::check_checksums(false);
    let rec = read.expect("one damaged byte leaves a recording");
    assert!(
        rec.len() as u64 + held >= clean.len() as u64,
        "byte {at}: {} of {} samples read, the frame held {held}",
        rec.len(),
        clean.len()
    );
    let lost: u64 = rec.losses.iter().map(|l| l.bytes).sum();
    assert!(lost <= frames[k].1 as u64, "byte {at}: {:?}", rec.losses);
    assert_eq!(rec.header.schema.len(), clean.header.schema.len(), "byte {at}");
}

fuzz_target!(|data: &[u8]| {
    one_damaged_byte(data);
    if let Ok(rec) = Recording::from_bytes(data, Path::new("fuzz.flr")) {
        assert_eq!(rec.columns.len(), rec.header.schema.len());
        assert_eq!(rec.lifetimes.len(), rec.header.schema.len());
        for (i, col) in rec.columns.iter().enumerate() {
            assert_eq!(col.len(), rec.t_ns.len());
            // A channel carries no value outside its lifetime.
            for (at, v) in col.iter().enumerate() {
                assert!(v.is_nan() || rec.is_live(i, at), "channel {i} at {at}");
            }
        }
        assert!(rec.bytes <= data.len() as u64);
        let _ = rec.duration_s();
    }
    let mut whole_counts = Counts::default();
    let whole = scan(Cursor::new(data), Path::new("fuzz.flr"), &mut whole_counts);
    // Shown half first (or whole, where half holds no header yet), then
    // the rest: the follower must take what a whole scan takes.
    let shown = Cell::new(data.len() / 2);
    let growing = || Growing {
        data,
        shown: &shown,
        at: 0,
    };
    let opened = Scanner::open(growing(), Path::new("fuzz.flr")).or_else(|_| {
        shown.set(data.len());
        Scanner::open(growing(), Path::new("fuzz.flr"))
    });
    match (whole, opened) {
        (Ok(whole), Ok(mut follower)) => {
            let mut counts = Counts::default();
            follower.read_new(&mut counts);
            shown.set(data.len());
            follower.read_new(&mut counts);
            let followed = follower.into_scanned();
            assert_eq!(counts, whole_counts);
            assert_eq!(key(&followed), key(&whole));
        }
        (Err(_), Err(_)) => {}
        (whole, followed) => panic!(
            "scan and follow disagree on opening: {:?} vs {:?}",
            whole.is_ok(),
            followed.is_ok()
        ),
    }
});
