//! Reading part of a recording from disk: seek points gathered on the pass
//! that opens it, so that a range of samples (a minute of a week, at full
//! resolution) is read without reading what comes before it.
//!
//! No file format holds an index: every version (a recording cut short by a
//! crash too) gets one from the streaming pass that opens it, which decodes
//! every block anyway. It costs a few bytes per [`SEEK_EVERY`] samples (a
//! week at 10 Hz: ~6,000 points, ~200 KiB).

use std::fs::File;
use std::io::{BufReader, Seek};
use std::ops::Range;
use std::path::PathBuf;

use crate::RecordingError;
use crate::codec::Frame;
use crate::frames::FrameReader;

/// Samples between seek points, at least (a point starts at a block).
pub const SEEK_EVERY: usize = 1024;

/// A stored frame whose block begins at sample `sample` (of the file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeekPoint {
    /// Byte offset of the stored frame (a pack, or the block itself).
    pub offset: u64,
    pub sample: usize,
    pub t_ns: u64,
}

/// Where a recording's samples lie on disk, and what a reader of a range
/// must know: the format version and when each channel carried values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SampleIndex {
    pub path: PathBuf,
    pub version: u32,
    pub points: Vec<SeekPoint>,
    /// Per channel, in samples of the file.
    pub lifetimes: Vec<Lifetime>,
    /// Samples in the file (up to a bad tail).
    pub samples: usize,
}

/// Samples read from disk: times and one column per channel.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Samples {
    /// Index in the file of the first sample.
    pub first: usize,
    pub t_ns: Vec<u64>,
    pub columns: Vec<Vec<f64>>,
}

impl Samples {
    pub fn len(&self) -> usize {
        self.t_ns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.t_ns.is_empty()
    }
}

impl SampleIndex {
    /// Samples `range` (indices in the file, clamped to it), every one.
    pub fn read(&self, range: Range<usize>) -> Result<Samples, RecordingError> {
        let start = range.start.min(self.samples);
        let at = self.points.partition_point(|p| p.sample <= start);
        self.read_from(at.checked_sub(1), |i, _| {
            if i < start {
                Step::Skip
            } else if i < range.end {
                Step::Keep
            } else {
                Step::Stop
            }
        })
    }

    /// Every sample with a time in `[t0_ns, t1_ns]`, up to `most` of them
    /// (the first `most`).
    pub fn read_time(
        &self,
        t0_ns: u64,
        t1_ns: u64,
        most: usize,
    ) -> Result<Samples, RecordingError> {
        let at = self.points.partition_point(|p| p.t_ns <= t0_ns);
        let mut kept = 0;
        self.read_from(at.checked_sub(1), |_, t| {
            if t < t0_ns {
                Step::Skip
            } else if t <= t1_ns && kept < most {
                kept += 1;
                Step::Keep
            } else {
                Step::Stop
            }
        })
    }

    /// Reads from seek point `point` (the start of the file's samples when
    /// `None`), asking `step(index, t_ns)` of each sample what to do.
    fn read_from(
        &self,
        point: Option<usize>,
        mut step: impl FnMut(usize, u64) -> Step,
    ) -> Result<Samples, RecordingError> {
        let io = |source| RecordingError::Io {
            path: self.path.clone(),
            cause: source,
        };
        let file = File::open(&self.path).map_err(io)?;
        let mut r = BufReader::with_capacity(256 << 10, file);
        let (mut reader, mut i) = match point.and_then(|k| self.points.get(k)) {
            Some(p) => (
                FrameReader::resume(r, self.version, p.offset).map_err(io)?,
                p.sample,
            ),
            None => {
                r.rewind().map_err(io)?;
                (FrameReader::open(r, &self.path)?.0, 0)
            }
        };
        let channels = self.lifetimes.len();
        let mut out = Samples {
            first: usize::MAX,
            t_ns: Vec::new(),
            columns: vec![Vec::new(); channels],
        };
        let mut stop = false;
        while !stop {
            // A bad tail was reported when the recording was opened; the
            // samples before it are all there is.
            let Ok(Some(frame)) = reader.next_frame() else {
                break;
            };
            let mut row = |_seq: u64, t: u64, values: &[f64]| {
                if stop {
                    return;
                }
                match step(i, t) {
                    Step::Skip => {}
                    Step::Stop => stop = true,
                    Step::Keep => {
                        out.first = out.first.min(i);
                        out.t_ns.push(t);
                        for (c, col) in out.columns.iter_mut().enumerate() {
                            let live = self.lifetimes[c].until.is_none_or(|u| i < u);
                            let v = values.get(c).copied().filter(|_| live);
                            col.push(v.unwrap_or(f64::NAN));
                        }
                    }
                }
                i += 1;
            };
            let decoded = match &frame {
                Frame::Block(b) if b.channels() <= channels => b.decode(&mut row),
                Frame::Samples(b) if b.channels as usize <= channels => b.decode(&mut row),
                Frame::Block(_) | Frame::Samples(_) => Err("a block wider than the schema".into()),
                Frame::Footer(_) => break,
                _ => Ok(()),
            };
            if decoded.is_err() {
                break;
            }
        }
        if out.first == usize::MAX {
            out.first = i;
        }
        Ok(out)
    }
}

enum Step {
    Skip,
    Keep,
    Stop,
}

/// When a channel carried values: from sample index `from` (0 for the
/// header's channels, later for channels added mid-recording) until `until`
/// (exclusive), if it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Lifetime {
    pub from: usize,
    pub until: Option<usize>,
}
