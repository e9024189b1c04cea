//! Reading recordings: a streaming frame reader and a whole-file loader.

use std::fs::File;
use std::io::{BufReader, Cursor, Read, Seek};
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::codec::Frame;
use crate::file::hex;
#[cfg(fuzzing)]
pub use crate::frames::check_checksums;
pub use crate::frames::{FrameReader, Skipped, TailProblem, TailProblemKind, Visit};
use crate::seek::Lifetime;
use crate::{ChannelSpec, Event, Footer, Header, RecordingError, Sample, check_new_channels};

/// What a recording lost to damage: bytes passed over between frames that
/// read, the samples in them (exact where the format says: v5, or a footer
/// or schema change after the loss), and the time between the last sample
/// read before and the first after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Loss {
    /// Byte offset of the first byte lost.
    pub offset: u64,
    pub bytes: u64,
    /// Samples lost; `None` where the file does not say.
    pub samples: Option<u64>,
    /// Time of the last sample read before the loss, and of the first
    /// after it (`None`: the recording's start, or its end).
    pub after_ns: Option<u64>,
    pub before_ns: Option<u64>,
    pub reason: String,
}

impl std::fmt::Display for Loss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs =
            |t: Option<u64>| t.map_or("?".to_string(), |t| format!("{:.1} s", t as f64 / 1e9));
        write!(f, "{} bytes at byte {}", self.bytes, self.offset)?;
        match self.samples {
            Some(n) => write!(f, ", {n} samples")?,
            None => write!(f, ", samples unknown")?,
        }
        write!(
            f,
            " between {} and {}: {}",
            self.after_ns.map_or("the start".into(), |t| secs(Some(t))),
            self.before_ns.map_or("the end".into(), |t| secs(Some(t))),
            self.reason
        )
    }
}

/// What a pass over a recording found besides its data.
#[derive(Debug, Clone)]
pub struct Scanned {
    /// The header, its schema holding every channel of the recording.
    pub header: Header,
    pub lifetimes: Vec<Lifetime>,
    pub samples: usize,
    pub footer: Option<Footer>,
    pub digest: String,
    pub tail: Option<TailProblem>,
    /// Damage read past, in file order (a damaged tail last).
    pub losses: Vec<Loss>,
    pub bytes: u64,
    pub frames: u64,
    /// A seek point every [`crate::SEEK_EVERY`] samples or so.
    pub seeks: Vec<crate::SeekPoint>,
}

/// Where a frame reader stood after a frame: what a pass that stops there
/// reports (its offset, frames read, digest so far).
#[derive(Debug)]
struct ReaderState {
    offset: u64,
    frames: u64,
    hash: Sha256,
}

/// A frame as the reading thread hands it to [`scan`].
#[allow(clippy::large_enum_variant)] // a few dozen in flight at most
enum ReadItem {
    Frame(Frame),
    Tail(TailProblem),
    End,
}

struct ReadAhead {
    /// Offset of the frame (for a frame of a pack: past the pack).
    at: u64,
    stored_at: u64,
    /// The stored frame's sample index (v5).
    frame_at: Option<u64>,
    /// Damage the reader passed over before this frame.
    skipped: Vec<Skipped>,
    after: ReaderState,
    item: ReadItem,
}

impl<R: Read + Seek> FrameReader<R> {
    fn state(&self) -> ReaderState {
        ReaderState {
            offset: self.offset,
            frames: self.frames,
            hash: self.hasher.clone(),
        }
    }
}

/// The reading thread of [`scan`]: reads frames (inflating and parsing
/// packs) and hands them on in order, until the end, a bad tail, or the
/// scan stops listening. The scan decodes the blocks: the two halves of the
/// work take about as long, so on two cores a long recording opens in about
/// half the time.
fn read_ahead<R: Read + Seek>(
    mut reader: FrameReader<R>,
    tx: std::sync::mpsc::SyncSender<ReadAhead>,
) {
    loop {
        let read = next_read(&mut reader);
        let last = matches!(read.item, ReadItem::End | ReadItem::Tail(_));
        if tx.send(read).is_err() || last {
            return;
        }
    }
}

/// The next frame and where the reader stands after it.
fn next_read<R: Read + Seek>(reader: &mut FrameReader<R>) -> ReadAhead {
    let at = reader.offset();
    let item = match reader.next_frame() {
        Ok(Some(f)) => ReadItem::Frame(f),
        Ok(None) => ReadItem::End,
        Err(p) => ReadItem::Tail(p),
    };
    ReadAhead {
        at,
        stored_at: reader.stored_at(),
        frame_at: reader.frame_at(),
        skipped: reader.take_skipped(),
        after: reader.state(),
        item,
    }
}

/// Reads a recording once from start to end, handing every block, schema
/// change and event to `visit` as it goes; a bad tail ends the pass and is
/// reported, as [`Recording::open`] reports it. A second thread reads,
/// inflates and decodes ahead while this one hands rows on, so a long
/// recording opens in about the time of the slower of the two.
pub fn scan(
    r: impl Read + Seek + Send,
    path: &Path,
    visit: &mut dyn Visit,
) -> Result<Scanned, RecordingError> {
    let Scanner {
        reader, mut pass, ..
    } = Scanner::open(r, path)?;
    visit.start(&pass.s.header);
    if cfg!(fuzzing) {
        // One thread under the fuzzer: its runs stay deterministic, and the
        // thread-locals of a helper thread that is just finishing do not
        // look like leaks to LeakSanitizer.
        let mut reader = reader;
        while pass.apply(next_read(&mut reader), visit, Mode::Whole) == Applied::More {}
    } else {
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::sync_channel(4);
            scope.spawn(move || read_ahead(reader, tx));
            for read in rx {
                if pass.apply(read, visit, Mode::Whole) != Applied::More {
                    break;
                }
            }
            // Leaving the scope drops `rx`: a reader still ahead stops.
        });
    }
    pass.finish();
    Ok(pass.s)
}

/// A pass over a recording that another process may still be writing: each
/// [`Scanner::read_new`] hands on what was written since the last, through
/// the same checks as [`scan`] (the file's version rules, schema changes at
/// their sample, a second header, data after the footer, the digest), and
/// stops at the end of what is there, or inside a frame the writer has not
/// finished, to go on from there when asked again. A scanner that reads a
/// finished file through to its end finds what [`scan`] finds.
#[derive(Debug)]
pub struct Scanner<R> {
    reader: FrameReader<R>,
    pass: Pass,
    /// The footer and the end after it were read, or a bad tail.
    over: bool,
}

/// What one frame did to a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Applied {
    /// Taken; read on.
    More,
    /// The end of what is written so far, before the footer: a follower
    /// asks again later.
    Waiting,
    /// The pass is over: the footer and the end after it, or a bad tail.
    Over,
}

/// Whether a pass reads a finished file or follows a growing one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Whole,
    Follow,
}

/// A visitor that keeps nothing.
struct NoVisit;

impl Visit for NoVisit {}

/// One pass's state: what it found so far, where its reader stood after the
/// last frame it took, and the buffers a block's rows are decoded into.
#[derive(Debug)]
struct Pass {
    s: Scanned,
    state: ReaderState,
    version: u32,
    /// A block's rows, decoded before any is handed on.
    seq: Vec<u64>,
    t_buf: Vec<u64>,
    v_buf: Vec<f64>,
    /// The header as opened: a copy of it (v5 writes two) is passed over.
    header: Header,
    /// The last schema change taken, while no sample followed it: its copy
    /// (v5 writes two) is passed over.
    last_change: Option<Frame>,
    /// Samples lost to damage so far: the writer's sample index of the next
    /// sample is `samples + lost`.
    lost: u64,
    /// The loss no sample has followed yet.
    open_loss: Option<usize>,
    /// Time of the last sample read.
    last_t: Option<u64>,
    /// The stored frame whose sample index was checked last.
    checked: u64,
}

impl<R: Read + Seek> Scanner<R> {
    /// Checks the magic, the version and the header, as [`scan`] does.
    pub fn open(r: R, path: &Path) -> Result<Self, RecordingError> {
        let (reader, header) = FrameReader::open(r, path)?;
        let channels = header.schema.len();
        let header_copy = header.clone();
        let pass = Pass {
            s: Scanned {
                lifetimes: vec![
                    Lifetime {
                        from: 0,
                        until: None
                    };
                    channels
                ],
                header,
                samples: 0,
                footer: None,
                digest: String::new(),
                tail: None,
                losses: Vec::new(),
                bytes: 0,
                frames: 0,
                seeks: Vec::new(),
            },
            state: reader.state(),
            version: reader.version(),
            seq: Vec::new(),
            t_buf: Vec::new(),
            v_buf: Vec::new(),
            header: header_copy,
            last_change: None,
            lost: 0,
            open_loss: None,
            last_t: None,
            checked: 0,
        };
        Ok(Self {
            reader,
            pass,
            over: false,
        })
    }

    /// Hands `visit` every frame written since the last call (never
    /// [`Visit::start`]: the header is [`Self::header`]). True while the
    /// writer may add more; false once the pass is over, at the footer or at
    /// a damaged frame ([`Self::scanned`] says which). A frame the writer is
    /// still writing is left for the next call.
    pub fn read_new(&mut self, visit: &mut dyn Visit) -> bool {
        if self.over {
            return false;
        }
        loop {
            match self
                .pass
                .apply(next_read(&mut self.reader), visit, Mode::Follow)
            {
                Applied::More => {}
                Applied::Waiting => return true,
                Applied::Over => {
                    self.pass.finish();
                    self.over = true;
                    return false;
                }
            }
        }
    }

    /// The header, its schema holding every channel added so far.
    pub fn header(&self) -> &Header {
        &self.pass.s.header
    }

    /// What the pass has found so far; once it is over, all of it, as
    /// [`scan`] reports it.
    pub fn scanned(&self) -> &Scanned {
        &self.pass.s
    }

    /// Whether the pass is over (the footer read, or a bad tail).
    pub fn is_over(&self) -> bool {
        self.over
    }

    /// SHA-256 (hex) of the payloads taken so far, footer excluded.
    pub fn digest_so_far(&self) -> String {
        hex(&self.pass.state.hash.clone().finalize())
    }

    /// Ends the pass: reads what is left as a finished file, and reports
    /// what [`scan`] reports of it (one without its footer is truncated,
    /// where its last frame stops). Frames it reads now reach no visitor.
    pub fn into_scanned(mut self) -> Scanned {
        if !self.over {
            let mut none = NoVisit;
            while self
                .pass
                .apply(next_read(&mut self.reader), &mut none, Mode::Whole)
                == Applied::More
            {}
            self.pass.finish();
        }
        self.pass.s
    }
}

impl Pass {
    /// Takes one frame as read.
    fn apply(&mut self, read: ReadAhead, visit: &mut dyn Visit, mode: Mode) -> Applied {
        self.state = read.after;
        let at = read.at;
        // A follower waits at the end of what is written, before the
        // footer, and inside a frame not finished yet (even after the
        // footer: what follows it is judged once it is whole). It waits at
        // damage too: the frame after it may not be written yet, and once
        // it is, reading goes on there (the reader stands where it was).
        let follows = mode == Mode::Follow;
        let tail_at = match &read.item {
            ReadItem::Tail(p) => Some(p.offset),
            _ => None,
        };
        for sk in read.skipped {
            // A follower that waits at damage reads it again later: what
            // the reader gave up on there is not lost yet.
            if !(follows && tail_at == Some(sk.offset)) {
                self.note_loss(sk.offset, sk.bytes, sk.reason);
            }
        }
        if follows && tail_at.is_some() {
            return Applied::Waiting;
        }
        let frame = match read.item {
            ReadItem::End if follows && self.s.footer.is_none() => return Applied::Waiting,
            ReadItem::End => return Applied::Over,
            ReadItem::Tail(p) => {
                self.s.tail = Some(p);
                return Applied::Over;
            }
            _ if self.s.footer.is_some() => {
                self.s.tail = Some(TailProblem {
                    kind: TailProblemKind::Damaged,
                    offset: at,
                    reason: "data after the footer".into(),
                });
                return Applied::Over;
            }
            ReadItem::Frame(f) => f,
        };
        let stored_bytes = self.state.offset.saturating_sub(read.stored_at);
        // A copy of what was just taken (v5 writes the header and every
        // schema change twice) is passed over.
        let copy = match &frame {
            Frame::Header(h) => *h == self.header,
            Frame::Channels(_) | Frame::Ended(_) => self.last_change.as_ref() == Some(&frame),
            _ => false,
        };
        if copy {
            self.s.bytes = self.state.offset;
            return Applied::More;
        }
        // v5: each stored frame says how many samples came before it.
        if read.stored_at != self.checked {
            self.checked = read.stored_at;
            if let Some(fa) = read.frame_at
                && let Err(e) = self.account(fa)
            {
                self.note_loss(read.stored_at, stored_bytes, e);
                return Applied::More;
            }
        }
        match self.take(frame, read.stored_at, visit) {
            Ok(()) => self.s.bytes = self.state.offset,
            // A frame that checks but does not fit what came before is
            // lost like a damaged one, and reading goes on.
            Err(e) => self.note_loss(read.stored_at, stored_bytes, e),
        }
        Applied::More
    }

    /// Takes a frame that read: rows, schema changes, events, the footer.
    fn take(&mut self, frame: Frame, stored_at: u64, visit: &mut dyn Visit) -> Result<(), String> {
        let version = self.version;
        let (seq, t_buf, v_buf) = (&mut self.seq, &mut self.t_buf, &mut self.v_buf);
        seq.clear();
        t_buf.clear();
        v_buf.clear();
        let decoded = match &frame {
            Frame::Samples(b) if version == 1 => Some((
                b.channels as usize,
                b.decode(|_, t, v| {
                    t_buf.push(t);
                    v_buf.extend_from_slice(v);
                }),
            )),
            Frame::Block(b) if version >= 2 => {
                Some((b.channels(), b.decode_into(seq, t_buf, v_buf)))
            }
            _ => None,
        };
        if let Some((width, decoded)) = decoded {
            decoded?;
            let known = self.s.lifetimes.len();
            if width > known && !self.s.losses.is_empty() {
                // Both copies of a schema change were lost: its channels'
                // names are gone, but not their values. They read on as
                // gauges named by position (no growth is told of a gauge),
                // and the loss says so.
                let specs: Vec<ChannelSpec> = (known..width)
                    .map(|p| {
                        ChannelSpec::new(
                            format!("lost.{p}"),
                            crate::Unit::Number,
                            crate::Group::Telemetry,
                        )
                        .with_kind(crate::Kind::Gauge)
                    })
                    .collect();
                check_new_channels(&self.s.header.schema, &specs)?;
                if let Some(l) = self.s.losses.last_mut() {
                    l.reason.push_str(&if width - known == 1 {
                        format!("; channel {known}'s name was lost with it, read as lost.{known}")
                    } else {
                        format!(
                            "; the names of channels {known} to {} were lost with it, read as lost.{known}…",
                            width - 1
                        )
                    });
                }
                let n = self.s.samples;
                visit.channels(n, &specs);
                for spec in specs {
                    self.s.header.schema.channels.push(spec);
                    self.s.lifetimes.push(Lifetime {
                        from: n,
                        until: None,
                    });
                }
            }
            self.s.apply_rows(width, t_buf, v_buf, stored_at, visit)?;
            self.last_change = None;
            // Every loss since the last sample ends at this one (losses
            // of frames that held no samples come one after another).
            if self.open_loss.take().is_some() {
                for l in self.s.losses.iter_mut().rev() {
                    if l.before_ns.is_some() || l.after_ns != self.last_t {
                        break;
                    }
                    l.before_ns = t_buf.first().copied();
                }
            }
            if let Some(&t) = t_buf.last() {
                self.last_t = Some(t);
            }
            return Ok(());
        }
        match frame {
            Frame::Samples(_) | Frame::Block(_) => Err(format!(
                "a sample block of another format version than the file's {version}"
            )),
            Frame::Channels(_) | Frame::Ended(_) if version < 2 => {
                Err("a schema change in a format v1 file".into())
            }
            Frame::Channels(ext) => {
                self.account(ext.at)?;
                self.last_change = Some(Frame::Channels(ext.clone()));
                self.s.add_channels(ext, self.lost, visit)
            }
            Frame::Ended(end) => {
                self.account(end.at)?;
                self.last_change = Some(Frame::Ended(end.clone()));
                self.s.end_channels(&end, self.lost, visit)
            }
            Frame::Event(e) => {
                visit.event(e);
                Ok(())
            }
            Frame::Digest(_) => Ok(()),
            Frame::Header(_) => Err("a second header".into()),
            // The frame reader opens packs; one never reaches here.
            Frame::Packed(_) => Err("a pack that was not opened".into()),
            Frame::Footer(f) => {
                self.s.footer = Some(f);
                Ok(())
            }
        }
    }

    /// Checks a sample index the file gives (a v5 frame's, a schema
    /// change's) against the samples read and lost so far: more means
    /// samples lost with the damage just passed over.
    fn account(&mut self, at: u64) -> Result<(), String> {
        let next = self.s.samples as u64 + self.lost;
        if at < next || (at > next && self.s.losses.is_empty()) {
            return Err(format!(
                "a frame at sample {at} where sample {next} is next"
            ));
        }
        if at > next {
            let gap = at - next;
            self.lost += gap;
            let last = self.s.losses.last_mut().expect("checked above");
            last.samples = Some(last.samples.unwrap_or(0) + gap);
        }
        Ok(())
    }

    /// Notes bytes lost at `offset` (merged with the loss no sample has
    /// followed yet where they meet).
    fn note_loss(&mut self, offset: u64, bytes: u64, reason: String) {
        if let Some(i) = self.open_loss {
            let l = &mut self.s.losses[i];
            if l.offset + l.bytes >= offset {
                l.bytes = l.bytes.max(offset + bytes - l.offset);
                return;
            }
        }
        self.s.losses.push(Loss {
            offset,
            bytes,
            // v5 frames say how many samples came before them.
            samples: (self.version >= 5).then_some(0),
            after_ns: self.last_t,
            before_ns: None,
            reason,
        });
        self.open_loss = Some(self.s.losses.len() - 1);
    }

    /// Closes the pass where its reader stands: the digest, and the tail of a
    /// file without its footer or with a footer whose digest differs.
    fn finish(&mut self) {
        let (s, state) = (&mut self.s, &self.state);
        s.frames = state.frames;
        s.digest = hex(&state.hash.clone().finalize());
        if s.bytes == 0 {
            s.bytes = state.offset;
        }
        if let Some(f) = &s.footer
            && !s.losses.is_empty()
        {
            // The footer counts every sample written: what was not read is
            // what the losses took, and a single loss of unknown size took
            // all of it. Its digest cannot match: frames are missing.
            let lost = f.samples.saturating_sub(s.samples as u64);
            let known: u64 = s.losses.iter().filter_map(|l| l.samples).sum();
            let mut unknown = s.losses.iter_mut().filter(|l| l.samples.is_none());
            if let (Some(l), None) = (unknown.next(), unknown.next()) {
                l.samples = Some(lost.saturating_sub(known));
            }
            return;
        }
        if s.tail.is_none() {
            match &s.footer {
                None => {
                    s.tail = Some(TailProblem {
                        kind: TailProblemKind::Truncated,
                        offset: state.offset,
                        reason:
                            "the recording ends without a footer: the run did not finish cleanly"
                                .into(),
                    });
                }
                Some(f) if f.digest != s.digest => {
                    s.tail = Some(TailProblem {
                        kind: TailProblemKind::Damaged,
                        offset: state.offset,
                        reason: format!(
                            "the footer's digest {} does not match the frames' {}",
                            f.digest, s.digest
                        ),
                    });
                }
                Some(_) => {}
            }
        }
    }
}

impl Scanned {
    /// Hands on a decoded block's rows (`width` values each), ended
    /// channels' values let go, and keeps a seek point when one is due.
    fn apply_rows(
        &mut self,
        width: usize,
        t: &[u64],
        values: &mut [f64],
        stored_at: u64,
        visit: &mut dyn Visit,
    ) -> Result<(), String> {
        let channels = self.lifetimes.len();
        if width != channels {
            return Err(format!(
                "a block of {width} channels in a recording of {channels}"
            ));
        }
        let first = self.samples;
        // An ended channel's slot is not read: it carries no value.
        for (c, life) in self.lifetimes.iter().enumerate() {
            let Some(u) = life.until else { continue };
            let from = u.saturating_sub(first).min(t.len());
            for x in values
                .iter_mut()
                .skip(from * width + c)
                .step_by(width.max(1))
            {
                *x = f64::NAN;
            }
        }
        visit.rows(first, t, values);
        let due = self
            .seeks
            .last()
            .map_or(0, |p| p.sample + crate::SEEK_EVERY);
        if first >= due && !t.is_empty() {
            self.seeks.push(crate::SeekPoint {
                offset: stored_at,
                sample: first,
                t_ns: t[0],
            });
        }
        self.samples += t.len();
        Ok(())
    }

    fn add_channels(
        &mut self,
        ext: crate::SchemaExtension,
        lost: u64,
        visit: &mut dyn Visit,
    ) -> Result<(), String> {
        let n = self.samples;
        if ext.at != n as u64 + lost {
            return Err(format!(
                "channels added at sample {} after {n} samples",
                ext.at
            ));
        }
        check_new_channels(&self.header.schema, &ext.channels)?;
        visit.channels(n, &ext.channels);
        for spec in ext.channels {
            self.header.schema.channels.push(spec);
            self.lifetimes.push(Lifetime {
                from: n,
                until: None,
            });
        }
        Ok(())
    }

    fn end_channels(
        &mut self,
        end: &crate::ChannelsEnded,
        lost: u64,
        visit: &mut dyn Visit,
    ) -> Result<(), String> {
        let n = self.samples;
        if end.at != n as u64 + lost {
            return Err(format!(
                "channels ended at sample {} after {n} samples",
                end.at
            ));
        }
        for &i in &end.channels {
            match self.lifetimes.get_mut(i as usize) {
                Some(life) if life.until.is_none() => life.until = Some(n),
                Some(_) => return Err(format!("channel {i} ended twice")),
                None => return Err(format!("no channel {i} to end")),
            }
        }
        visit.ended(n, &end.channels);
        Ok(())
    }
}

/// A whole recording in memory, column by column.
#[derive(Debug, Clone)]
pub struct Recording {
    pub path: PathBuf,
    /// The header as written, except that `schema` holds every channel of the
    /// recording: those added mid-recording follow the header's own, in the
    /// order they were added (see `lifetimes`).
    pub header: Header,
    /// One per channel of `header.schema`.
    pub lifetimes: Vec<Lifetime>,
    /// Sample times, nanoseconds since the start.
    pub t_ns: Vec<u64>,
    /// One column per channel of `header.schema`, `NaN` where there was no reading.
    pub columns: Vec<Vec<f64>>,
    pub events: Vec<Event>,
    pub footer: Option<Footer>,
    /// SHA-256 (hex) over every intact frame before the footer.
    pub digest: String,
    /// What went wrong at the end, if anything; everything before it is here.
    pub tail: Option<TailProblem>,
    /// Damage read past, in file order: what each cost.
    pub losses: Vec<Loss>,
    /// Bytes of intact frames (from the start of the file).
    pub bytes: u64,
    pub frames: u64,
    /// What a bounded load let go ([`Recording::open_bounded`]); `None`
    /// when every sample and event is held.
    pub thinned: Option<Thinned>,
    /// Where the file's samples lie on disk: any range of them, at full
    /// resolution, is read from there ([`SampleIndex::read`]).
    pub index: crate::SampleIndex,
}

/// A recording held in part: every `stride`-th sample (and the last), the
/// events but for steps, and exact counts and statistics of the whole.
#[derive(Debug, Clone, PartialEq)]
pub struct Thinned {
    pub stride: usize,
    /// Samples in the file.
    pub samples: usize,
    /// Events in the file, step events included.
    pub events: usize,
    /// Step events in the file (not held).
    pub steps: usize,
    /// Per channel, over every sample.
    pub stats: Vec<ColumnStats>,
}

/// A channel's readings over every sample: how many, the first and last,
/// the least and the greatest (`NaN` when it has none).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ColumnStats {
    pub samples: usize,
    pub first: f64,
    pub last: f64,
    pub min: f64,
    pub max: f64,
}

impl Default for ColumnStats {
    fn default() -> Self {
        Self {
            samples: 0,
            first: f64::NAN,
            last: f64::NAN,
            min: f64::NAN,
            max: f64::NAN,
        }
    }
}

impl ColumnStats {
    /// Counts one reading (`NaN`: none).
    pub fn add(&mut self, x: f64) {
        if x.is_nan() {
            return;
        }
        if self.samples == 0 {
            *self = Self {
                samples: 1,
                first: x,
                last: x,
                min: x,
                max: x,
            };
            return;
        }
        self.samples += 1;
        self.last = x;
        self.min = self.min.min(x);
        self.max = self.max.max(x);
    }
}

/// The whole-file loader's visitor: every sample (or, with a budget, every
/// `stride`-th), every event (or all but steps).
#[derive(Default)]
struct Collect {
    budget: Option<usize>,
    stride: usize,
    t_ns: Vec<u64>,
    columns: Vec<Vec<f64>>,
    events: Vec<Event>,
    events_seen: usize,
    steps: usize,
    stats: Vec<ColumnStats>,
    /// The last sample seen: its index, time and values.
    last: Option<(usize, u64, Vec<f64>)>,
}

impl Collect {
    /// Lets every other held sample go and doubles the stride.
    fn halve(&mut self) {
        if self.stride == 1 {
            self.events
                .retain(|e| !matches!(e.kind, crate::EventKind::Step { .. }));
        }
        self.stride *= 2;
        let keep = |v: &mut Vec<f64>| {
            let mut j = 0;
            v.retain(|_| {
                j += 1;
                (j - 1) % 2 == 0
            });
        };
        let mut j = 0;
        self.t_ns.retain(|_| {
            j += 1;
            (j - 1) % 2 == 0
        });
        self.columns.iter_mut().for_each(keep);
    }
}

impl Visit for Collect {
    fn start(&mut self, header: &Header) {
        self.columns = vec![Vec::new(); header.schema.len()];
        if self.budget.is_some() {
            self.stats = vec![ColumnStats::default(); header.schema.len()];
        }
    }
    fn channels(&mut self, _at: usize, specs: &[ChannelSpec]) {
        let held = self.t_ns.len();
        self.columns
            .extend(specs.iter().map(|_| vec![f64::NAN; held]));
        if self.budget.is_some() {
            self.stats
                .extend(specs.iter().map(|_| ColumnStats::default()));
        }
    }
    fn rows(&mut self, first: usize, t_ns: &[u64], values: &[f64]) {
        let width = self.columns.len();
        let Some(budget) = self.budget else {
            debug_assert_eq!(first, self.t_ns.len());
            self.t_ns.extend_from_slice(t_ns);
            for row in values.chunks_exact(width.max(1)).take(t_ns.len()) {
                for (col, &x) in self.columns.iter_mut().zip(row) {
                    col.push(x);
                }
            }
            return;
        };
        let row_of = |k: usize| values.get(k * width..(k + 1) * width).unwrap_or(&[]);
        for (k, &t) in t_ns.iter().enumerate() {
            let row = row_of(k);
            for (st, &x) in self.stats.iter_mut().zip(row) {
                st.add(x);
            }
            let g = first + k;
            if g.is_multiple_of(self.stride) {
                self.t_ns.push(t);
                for (col, &x) in self.columns.iter_mut().zip(row) {
                    col.push(x);
                }
                if self.t_ns.len() * (width + 1) * 8 > budget {
                    self.halve();
                }
            }
        }
        if let Some(&t) = t_ns.last() {
            let row = row_of(t_ns.len() - 1);
            let g = first + t_ns.len() - 1;
            match &mut self.last {
                Some((lg, lt, lrow)) => {
                    *lg = g;
                    *lt = t;
                    lrow.clear();
                    lrow.extend_from_slice(row);
                }
                None => self.last = Some((g, t, row.to_vec())),
            }
        }
    }
    fn event(&mut self, e: Event) {
        self.events_seen += 1;
        let step = matches!(e.kind, crate::EventKind::Step { .. });
        self.steps += usize::from(step);
        // Once thinned, step events are counted, not held.
        if !(step && self.stride > 1) {
            self.events.push(e);
        }
    }
}

impl Recording {
    /// Loads the recording at `path`.
    pub fn open(path: &Path) -> Result<Self, RecordingError> {
        let file = File::open(path).map_err(|source| RecordingError::Io {
            path: path.to_owned(),
            cause: source,
        })?;
        Self::from_reader(BufReader::with_capacity(1 << 20, file), path)
    }

    /// Loads a recording held in memory (used by the fuzzer and the tests).
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<Self, RecordingError> {
        Self::from_reader(Cursor::new(bytes), path)
    }

    /// Loads a recording from any seekable reader.
    pub fn from_reader(r: impl Read + Seek + Send, path: &Path) -> Result<Self, RecordingError> {
        Self::load(r, path, None)
    }

    /// Loads the recording at `path` holding at most about `budget` bytes
    /// of values: past that, every other sample held is let go and only
    /// every `stride`-th sample is kept from then on (the stride doubles
    /// each time), plus the last one. What an analysis needs of a week
    /// fits; a recording under the budget loads whole, exactly as
    /// [`Recording::open`] loads it. [`Recording::thinned`] says what was
    /// let go, with exact statistics of every channel over every sample.
    pub fn open_bounded(path: &Path, budget: usize) -> Result<Self, RecordingError> {
        let file = File::open(path).map_err(|source| RecordingError::Io {
            path: path.to_owned(),
            cause: source,
        })?;
        Self::load(BufReader::with_capacity(1 << 20, file), path, Some(budget))
    }

    fn load(
        r: impl Read + Seek + Send,
        path: &Path,
        budget: Option<usize>,
    ) -> Result<Self, RecordingError> {
        let mut c = Collect {
            budget,
            stride: 1,
            ..Collect::default()
        };
        let s = scan(r, path, &mut c)?;
        let total = s.samples;
        // The last sample always counts: the run's end and final values.
        if let Some((g, t, row)) = c.last.take()
            && !g.is_multiple_of(c.stride)
        {
            c.t_ns.push(t);
            for (col, x) in c.columns.iter_mut().zip(row) {
                col.push(x);
            }
        }
        let stride = c.stride;
        let held = |g: usize| g.div_ceil(stride).min(c.t_ns.len());
        let lifetimes = s
            .lifetimes
            .iter()
            .map(|l| Lifetime {
                from: held(l.from),
                until: l.until.map(held),
            })
            .collect();
        let index = crate::SampleIndex {
            path: path.to_owned(),
            version: s.header.format_version,
            points: s.seeks,
            lifetimes: s.lifetimes.clone(),
            samples: total,
        };
        let thinned = (stride > 1).then_some(Thinned {
            stride,
            samples: total,
            events: c.events_seen,
            steps: c.steps,
            stats: c.stats,
        });
        Ok(Recording {
            path: path.to_owned(),
            header: s.header,
            lifetimes,
            t_ns: c.t_ns,
            columns: c.columns,
            events: c.events,
            footer: s.footer,
            digest: s.digest,
            tail: s.tail,
            losses: s.losses,
            bytes: s.bytes,
            frames: s.frames,
            thinned,
            index,
        })
    }

    /// True while channel `i` is live at sample index `at`.
    pub fn is_live(&self, i: usize, at: usize) -> bool {
        self.lifetimes
            .get(i)
            .is_some_and(|l| at >= l.from && l.until.is_none_or(|u| at < u))
    }

    /// Samples in the file (more than [`Recording::len`] when thinned).
    pub fn samples_total(&self) -> usize {
        self.thinned.as_ref().map_or(self.len(), |t| t.samples)
    }

    /// Events in the file, step events included (held or not).
    pub fn events_total(&self) -> usize {
        self.thinned
            .as_ref()
            .map_or(self.events.len(), |t| t.events)
    }

    /// Step events in the file.
    pub fn step_events(&self) -> usize {
        match &self.thinned {
            Some(t) => t.steps,
            None => self
                .events
                .iter()
                .filter(|e| matches!(e.kind, crate::EventKind::Step { .. }))
                .count(),
        }
    }

    /// Channel `i`'s statistics over every sample of the file.
    pub fn column_stats(&self, i: usize) -> ColumnStats {
        if let Some(st) = self.thinned.as_ref().and_then(|t| t.stats.get(i)) {
            return *st;
        }
        let mut st = ColumnStats::default();
        for &x in self.columns.get(i).map_or(&[][..], Vec::as_slice) {
            st.add(x);
        }
        st
    }

    /// Samples held.
    pub fn len(&self) -> usize {
        self.t_ns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.t_ns.is_empty()
    }

    /// True when the recording did not end cleanly with an intact footer.
    pub fn is_truncated(&self) -> bool {
        self.tail.is_some()
    }

    /// True when some of the file could not be read: frames passed over,
    /// or a damaged tail (a file that only stops early, as a killed run's
    /// does, is truncated, not damaged).
    pub fn is_damaged(&self) -> bool {
        !self.losses.is_empty()
            || self
                .tail
                .as_ref()
                .is_some_and(|t| t.kind == TailProblemKind::Damaged)
    }

    /// Seconds from the first sample to the last.
    pub fn duration_s(&self) -> f64 {
        match (self.t_ns.first(), self.t_ns.last()) {
            (Some(a), Some(b)) => b.saturating_sub(*a) as f64 / 1e9,
            _ => 0.0,
        }
    }

    /// The values of the channel called `name`.
    pub fn channel(&self, name: &str) -> Option<&[f64]> {
        let i = self.header.schema.index_of(name)?;
        self.columns.get(i).map(Vec::as_slice)
    }

    /// Sample `i` as a [`Sample`] (sequence numbers are not kept in memory:
    /// `seq` is the index).
    pub fn sample(&self, i: usize) -> Option<Sample> {
        let t = *self.t_ns.get(i)?;
        let values: Vec<f64> = self.columns.iter().map(|c| c[i]).collect();
        Some(Sample::from_values(i as u64, t, &values))
    }
}
