//! Reading a recording's frames one by one: the head of each, its checksum,
//! and the way past a damaged one (v5's sync word, older versions' own
//! lengths). What the frames add up to is [`crate::reader`]'s.

use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::path::Path;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::codec::{Frame, decode};
use crate::file::hex;
use crate::{
    ChannelSpec, Event, Header, MAGIC, MAX_FRAME_BYTES, READABLE_VERSIONS, RecordingError,
    check_new_channels,
};

/// How the tail of a recording went bad.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TailProblemKind {
    /// The file ends inside a frame, or without a footer: the run was cut off.
    Truncated,
    /// A frame's bytes are wrong: bad checksum, absurd length, bad payload.
    Damaged,
}

/// Where and why reading stopped before a clean end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TailProblem {
    pub kind: TailProblemKind,
    /// Byte offset of the first frame that could not be read.
    pub offset: u64,
    pub reason: String,
}

impl std::fmt::Display for TailProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            TailProblemKind::Truncated => "truncated",
            TailProblemKind::Damaged => "damaged",
        };
        write!(f, "{kind} at byte {}: {}", self.offset, self.reason)
    }
}

/// A stretch of bytes a reader passed over: frames that did not check or
/// decode, between two it could read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub offset: u64,
    pub bytes: u64,
    pub reason: String,
}

/// Reads frames one at a time. On an incomplete frame it seeks back to the
/// frame's start, so a reader following a file that is still being written
/// can simply ask again later. A frame that does not check or decode is
/// passed over, and the reader goes on at the next frame that does (see
/// [`FrameReader::take_skipped`]).
#[derive(Debug)]
pub struct FrameReader<R> {
    pub(crate) r: R,
    pub(crate) version: u32,
    pub(crate) offset: u64,
    pub(crate) hasher: Sha256,
    pub(crate) frames: u64,
    /// Frames of the last pack not handed out yet (format v3).
    pub(crate) unpacked: std::collections::VecDeque<Frame>,
    /// Where the stored frame last read starts (a pack's, for its frames).
    pub(crate) stored_at: u64,
    /// The sample index the stored frame last read carries (v5).
    pub(crate) at: Option<u64>,
    /// Damage passed over since [`FrameReader::take_skipped`] was last asked.
    pub(crate) skipped: Vec<Skipped>,
}

/// Why a stored frame could not be read where the reader stands.
enum Bad {
    /// The input ends inside it.
    Truncated(String),
    /// Its bytes are wrong; `next` is where the next frame starts if its
    /// length can be believed (its checksum matched).
    Damaged(String, Option<u64>),
}

/// A stored frame read whole and checked.
struct Stored {
    head: crate::layout::Head,
    payload: Vec<u8>,
}

#[cfg(fuzzing)]
static CHECK_CRC: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Under the fuzzer, checksums are skipped unless asked for, so that
/// mutations reach the decoders behind them; a target that corrupts bytes
/// on purpose turns them back on.
#[cfg(fuzzing)]
pub fn check_checksums(on: bool) {
    CHECK_CRC.store(on, std::sync::atomic::Ordering::Relaxed);
}

fn checksums_on() -> bool {
    #[cfg(fuzzing)]
    return CHECK_CRC.load(std::sync::atomic::Ordering::Relaxed);
    #[cfg(not(fuzzing))]
    true
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl<R: Read + Seek> FrameReader<R> {
    /// Checks the magic and version and reads the header frame.
    pub fn open(mut r: R, path: &Path) -> Result<(Self, Header), RecordingError> {
        let io = |source| RecordingError::Io {
            path: path.to_owned(),
            cause: source,
        };
        let mut head = [0u8; 12];
        let n = read_full(&mut r, &mut head).map_err(io)?;
        if n < 8 || head[..8] != MAGIC {
            return Err(RecordingError::BadMagic {
                path: path.to_owned(),
                found: head[..n.min(8)].to_vec(),
            });
        }
        if n < 12 {
            return Err(RecordingError::BadHeader {
                path: path.to_owned(),
                reason: "the file ends inside the version field".into(),
            });
        }
        let version = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
        if !READABLE_VERSIONS.contains(&version) {
            return Err(RecordingError::UnsupportedVersion {
                path: path.to_owned(),
                found: version,
                supported: READABLE_VERSIONS,
            });
        }
        let mut reader = Self {
            r,
            version,
            offset: 12,
            hasher: Sha256::new(),
            frames: 0,
            unpacked: Default::default(),
            stored_at: 12,
            at: None,
            skipped: Vec::new(),
        };
        let bad = |reason: String| RecordingError::BadHeader {
            path: path.to_owned(),
            reason,
        };
        match reader.next_frame() {
            Ok(Some(Frame::Header(h))) if h.format_version == version => {
                check_new_channels(&crate::Schema::default(), &h.schema.channels)
                    .map_err(|e| bad(format!("its schema: {e}")))?;
                Ok((reader, h))
            }
            Ok(Some(Frame::Header(h))) => Err(bad(format!(
                "the header says version {}, the file {version}",
                h.format_version
            ))),
            Ok(Some(_)) => Err(bad("the first frame is not a header".into())),
            Ok(None) => Err(bad("the file ends before the header".into())),
            Err(p) => Err(bad(p.to_string())),
        }
    }

    /// The next frame; `Ok(None)` at a clean end of the input (between frames).
    /// The frames of a pack (format v3) come out one by one, as if written
    /// apart; [`Self::offset`] is then already past the pack.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, TailProblem> {
        loop {
            if let Some(f) = self.unpacked.pop_front() {
                return Ok(Some(f));
            }
            let start = self.offset;
            match self.next_stored()? {
                Some(Frame::Packed(p)) => {
                    let unpacked = if self.version < 3 {
                        Err(format!("a packed frame in a format v{} file", self.version))
                    } else {
                        p.unpack()
                    };
                    match unpacked {
                        Ok(frames) => self.unpacked = frames.into(),
                        // Its bytes checked: the next frame is right after it.
                        Err(reason) => self.skip(start, self.offset - start, reason),
                    }
                }
                other => return Ok(other),
            }
        }
    }

    /// A reader of a file's frames from `offset` on (a frame's start, as a
    /// [`crate::SeekPoint`] gives it), for a file of format `version` whose
    /// header was read before. Its digest covers only what it reads.
    pub fn resume(mut r: R, version: u32, offset: u64) -> std::io::Result<Self> {
        r.seek(SeekFrom::Start(offset))?;
        Ok(Self {
            r,
            version,
            offset,
            hasher: Sha256::new(),
            frames: 0,
            unpacked: Default::default(),
            stored_at: offset,
            at: None,
            skipped: Vec::new(),
        })
    }

    /// Byte offset of the stored frame the last frame came from (for a
    /// frame of a pack, the pack's).
    pub fn stored_at(&self) -> u64 {
        self.stored_at
    }

    /// The next frame as stored in the file, past any damage.
    fn next_stored(&mut self) -> Result<Option<Frame>, TailProblem> {
        let start = self.offset;
        let mut pos = start;
        // The first problem met, while looking for a frame that reads.
        let mut first: Option<(TailProblemKind, String)> = None;
        // v1–v4: the reader went where the damaged frame's length pointed.
        let mut jumped = false;
        loop {
            let bad = match self.read_stored(pos) {
                Ok(None) if first.is_none() => return Ok(None),
                Ok(None) => break,
                Ok(Some(st)) => match decode(&st.payload) {
                    Ok(frame) => {
                        match first {
                            Some((TailProblemKind::Truncated, reason)) => self.skip(
                                start,
                                pos - start,
                                format!("a frame's length is wrong ({reason})"),
                            ),
                            Some((_, reason)) => self.skip(start, pos - start, reason),
                            None => {}
                        }
                        self.take(&frame, &st, pos);
                        return Ok(Some(frame));
                    }
                    Err(e) => Bad::Damaged(
                        format!("undecodable frame: {e}"),
                        Some(
                            pos + (crate::layout::head_len(self.version) + st.payload.len()) as u64,
                        ),
                    ),
                },
                Err(b) => b,
            };
            let next = match bad {
                Bad::Truncated(reason) => {
                    if first.is_none() {
                        first = Some((TailProblemKind::Truncated, reason));
                    }
                    if !checksums_on() {
                        // What is there ends inside a frame (a writer's
                        // frame not finished yet, or a cut file). Without
                        // checksums (the fuzzer's default) no frame after
                        // it could prove its length wrong.
                        break;
                    }
                    // A length that runs past the end may be the damage; a
                    // frame that checks after it says so (else it is a cut,
                    // or a frame still being written).
                    None
                }
                Bad::Damaged(reason, next) => {
                    first = match first {
                        Some((TailProblemKind::Truncated, _)) | None => {
                            Some((TailProblemKind::Damaged, reason))
                        }
                        f => f,
                    };
                    next
                }
            };
            // Where to look next: v5 by the sync word; older versions where
            // a frame's own length points, else (a length that cannot be
            // believed, or a frame there that does not check either) at the
            // next place a frame's head, checksum and payload agree.
            let scan = |r: &mut Self, from: u64| {
                let found = if r.version >= 5 {
                    r.find_sync(from)
                } else {
                    r.find_frame(from)
                };
                found.map_err(|e| TailProblem {
                    kind: TailProblemKind::Damaged,
                    offset: pos,
                    reason: format!("read error: {e}"),
                })
            };
            let found = if self.version >= 5 {
                scan(self, pos + 1)?
            } else if pos == start && next.is_some() {
                jumped = true;
                next
            } else if checksums_on() {
                // Past a length that was believed and led nowhere, from
                // just after the damaged frame's start: frames it skipped
                // may still read.
                let from = if std::mem::take(&mut jumped) {
                    start
                } else {
                    pos
                };
                scan(self, from + 1)?
            } else {
                // Without checksums (the fuzzer's default) no frame found
                // by a scan could prove itself.
                None
            };
            let Some(p) = found else { break };
            if self.r.seek(SeekFrom::Start(p)).is_err() {
                break;
            }
            pos = p;
        }
        // Nothing more reads: the first problem is where reading stops.
        let (kind, reason) = first.expect("a problem was met");
        let _ = self.r.seek(SeekFrom::Start(start));
        if kind == TailProblemKind::Damaged {
            // What follows is lost, to the end of the input.
            let rest = std::io::copy(&mut (&mut self.r).take(u64::MAX), &mut std::io::sink());
            let _ = self.r.seek(SeekFrom::Start(start));
            // Noted apart, never merged with damage passed before it in
            // this call (a pack that did not inflate): a follower waits
            // here and reads these bytes again once more is written, so
            // it must be able to tell them from what is lost for good.
            self.skipped.push(Skipped {
                offset: start,
                bytes: rest.unwrap_or(0),
                reason: reason.clone(),
            });
        }
        self.stored_at = start;
        Err(TailProblem {
            kind,
            offset: start,
            reason,
        })
    }

    /// Reads and checks the stored frame where the input stands (`pos`).
    fn read_stored(&mut self, pos: u64) -> Result<Option<Stored>, Bad> {
        let mut head = [0u8; 20];
        let head = &mut head[..crate::layout::head_len(self.version)];
        let n = read_full(&mut self.r, head)
            .map_err(|e| Bad::Damaged(format!("read error: {e}"), None))?;
        if n == 0 {
            return Ok(None);
        }
        if n < head.len() {
            return Err(Bad::Truncated(format!(
                "the file ends inside a frame header ({n} of {} bytes)",
                head.len()
            )));
        }
        let Some(h) = crate::layout::Head::parse(self.version, head) else {
            return Err(Bad::Damaged(
                "no sync word where a frame starts".into(),
                None,
            ));
        };
        if h.len > MAX_FRAME_BYTES {
            return Err(Bad::Damaged(
                format!(
                    "frame length {} is over the limit of {MAX_FRAME_BYTES}",
                    h.len
                ),
                None,
            ));
        }
        let mut payload = vec![0u8; h.len as usize];
        let got = read_full(&mut self.r, &mut payload)
            .map_err(|e| Bad::Damaged(format!("read error: {e}"), None))?;
        if got < payload.len() {
            return Err(Bad::Truncated(format!(
                "the file ends inside a frame ({got} of {} bytes)",
                h.len
            )));
        }
        // The fuzzer skips the checksum (unless its target asks) so that
        // its mutations reach the decoders behind it.
        if checksums_on() && !h.checks(&payload) {
            // Its length may still be right (a flipped bit in the payload).
            let next = pos + (head.len() + payload.len()) as u64;
            return Err(Bad::Damaged("frame checksum mismatch".into(), Some(next)));
        }
        Ok(Some(Stored { head: h, payload }))
    }

    /// Takes a frame read at `pos`: the digest, the counts, where the next
    /// one starts.
    fn take(&mut self, frame: &Frame, st: &Stored, pos: u64) {
        if !matches!(frame, Frame::Footer(_)) {
            self.hasher.update(&st.payload);
        }
        self.frames += 1;
        self.stored_at = pos;
        self.at = st.head.at;
        self.offset = pos + (crate::layout::head_len(self.version) + st.payload.len()) as u64;
    }

    /// The next v5 sync word at or after `from` (the input is left there),
    /// or `None` at the end of the input.
    fn find_sync(&mut self, from: u64) -> std::io::Result<Option<u64>> {
        use crate::layout::SYNC;
        self.r.seek(SeekFrom::Start(from))?;
        let mut buf = vec![0u8; 64 << 10];
        // Bytes carried over from the last chunk (a sync word may straddle).
        let mut keep = 0usize;
        let mut base = from;
        loop {
            let n = read_full(&mut self.r, &mut buf[keep..])?;
            let have = keep + n;
            if let Some(i) = buf[..have].windows(SYNC.len()).position(|w| w == SYNC) {
                let at = base + i as u64;
                self.r.seek(SeekFrom::Start(at))?;
                return Ok(Some(at));
            }
            if n == 0 {
                return Ok(None);
            }
            keep = (SYNC.len() - 1).min(have);
            buf.copy_within(have - keep..have, 0);
            base += (have - keep) as u64;
        }
    }

    /// The next place at or after `from` where a frame of format v1–v4
    /// starts (the input is left there), or `None` at the end of the
    /// input. Those versions have no sync word, so a frame is known by what
    /// every frame is: a length that fits in what is left and under
    /// [`MAX_FRAME_BYTES`], a payload that opens as every frame's does (a
    /// MessagePack map of one entry named by a short string) and the
    /// checksum of that payload; [`Self::next_stored`] then decodes it.
    fn find_frame(&mut self, from: u64) -> std::io::Result<Option<u64>> {
        let end = self.r.seek(SeekFrom::End(0))?;
        self.r.seek(SeekFrom::Start(from))?;
        // A head and the payload's first two bytes.
        const LOOK: usize = 10;
        let mut buf = vec![0u8; 64 << 10];
        let mut keep = 0usize;
        let mut base = from;
        loop {
            let n = read_full(&mut self.r, &mut buf[keep..])?;
            let have = keep + n;
            let mut i = 0;
            while i + LOOK <= have {
                let w = &buf[i..i + LOOK];
                let len = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                let at = base + i as u64;
                let fits = (2..=MAX_FRAME_BYTES).contains(&len) && at + 8 + u64::from(len) <= end;
                // Every frame is an enum MessagePack writes as a map of one
                // entry whose key is its name (`packed`, `block`, …).
                if fits && w[8] == 0x81 && (0xa1..=0xbf).contains(&w[9]) {
                    let crc = u32::from_le_bytes([w[4], w[5], w[6], w[7]]);
                    if self.checks_at(at + 8, len, crc)? {
                        self.r.seek(SeekFrom::Start(at))?;
                        return Ok(Some(at));
                    }
                    self.r.seek(SeekFrom::Start(base + have as u64))?;
                }
                i += 1;
            }
            if n == 0 {
                return Ok(None);
            }
            keep = (LOOK - 1).min(have);
            buf.copy_within(have - keep..have, 0);
            base += (have - keep) as u64;
        }
    }

    /// Whether the `len` bytes at `at` have the checksum `crc` (v1–v4: of
    /// the payload alone).
    fn checks_at(&mut self, at: u64, len: u32, crc: u32) -> std::io::Result<bool> {
        self.r.seek(SeekFrom::Start(at))?;
        let mut h = crc32fast::Hasher::new();
        let mut left = len as usize;
        let mut chunk = [0u8; 8192];
        while left > 0 {
            let k = left.min(chunk.len());
            let got = read_full(&mut self.r, &mut chunk[..k])?;
            if got < k {
                return Ok(false);
            }
            h.update(&chunk[..k]);
            left -= k;
        }
        Ok(h.finalize() == crc)
    }

    /// Notes damage passed over (merged with the last note where they meet).
    fn skip(&mut self, offset: u64, bytes: u64, reason: String) {
        if let Some(last) = self.skipped.last_mut()
            && last.offset + last.bytes >= offset
        {
            last.bytes = last.bytes.max(offset + bytes - last.offset);
            return;
        }
        self.skipped.push(Skipped {
            offset,
            bytes,
            reason,
        });
    }

    /// Damage passed over since the last call, oldest first.
    pub fn take_skipped(&mut self) -> Vec<Skipped> {
        std::mem::take(&mut self.skipped)
    }

    /// The sample index the stored frame last read carries (format v5):
    /// how many samples were written before it.
    pub fn frame_at(&self) -> Option<u64> {
        self.at
    }

    /// The file's format version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Byte offset of the next frame.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// SHA-256 (hex) of the payloads read so far, footer excluded.
    pub fn digest_hex(&self) -> String {
        hex(&self.hasher.clone().finalize())
    }

    /// Frames read so far (header included).
    pub fn frames(&self) -> u64 {
        self.frames
    }
}

/// What one pass over a recording hands on, frame by frame. Nothing is
/// kept by the pass itself, so a visitor that keeps little reads a
/// recording of any length in bounded memory (`export` does).
pub trait Visit {
    /// The header, before anything else.
    fn start(&mut self, _header: &Header) {}
    /// Channels that join the schema from sample index `at` on.
    fn channels(&mut self, _at: usize, _specs: &[ChannelSpec]) {}
    /// Channels (by position) that carry no values from sample `at` on.
    fn ended(&mut self, _at: usize, _positions: &[u32]) {}
    /// Samples `first..first + t_ns.len()`: their times, and row by row
    /// (`values.len() / t_ns.len()` a row) one value per channel of the
    /// schema so far (`NaN`: no reading, or a channel that ended). A block
    /// that does not decode is never handed on, not even in part.
    fn rows(&mut self, _first: usize, _t_ns: &[u64], _values: &[f64]) {}
    fn event(&mut self, _e: Event) {}
}
