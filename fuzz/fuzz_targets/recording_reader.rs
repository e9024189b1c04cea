//! Any bytes at all through the recording reader (formats v1 to v3, packs
//! included): it must return an error or a recording whose columns line up,
//! never panic, hang or allocate without bound. Under `cfg(fuzzing)` the
//! reader skips frame checksums, so mutations reach the inflater and the
//! MessagePack, column-block and schema decoders instead of dying at the CRC.
//! The same bytes are then followed as a growing file (the watch window's
//! road, [`Scanner`]), shown in two parts: it must find what a whole scan
//! finds.
#![no_main]

use std::cell::Cell;
use std::io::{Cursor, Read, Seek, SeekFrom};
use std::path::Path;

use flatline_format::{Recording, Scanned, Scanner, Visit, scan};
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
    (s.samples, s.bytes, s.frames, &s.digest, &s.tail, &s.lifetimes)
}

fuzz_target!(|data: &[u8]| {
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
