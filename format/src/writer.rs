//! Writing a recording, on the consumer side of the telemetry channel.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::codec::{
    ChannelsEnded, Code, ColumnBlock, Frame, Packed, Packer, SchemaExtension, encode_into,
};
use crate::file::hex;
use crate::layout;
use crate::{
    ChannelSpec, DigestMark, Event, EventKind, FORMAT_VERSION, Footer, Header, Item, MAGIC,
    MAX_CHANNELS, RecordingError, Sample, Schema, Slots, check_new_channels,
};

/// Longest a sample waits in memory before its block is written and flushed
/// to the operating system: a process killed with SIGKILL loses at most this
/// much (plus what was still in the channel).
pub const BLOCK_AGE: Duration = Duration::from_millis(500);
/// Most samples in one block.
pub const BLOCK_SAMPLES: usize = 256;
/// Most events in one pack: a burst of events (an imported step log) is
/// written in packs of this many rather than one pack over the frame limit.
pub const PACK_EVENTS: usize = 4096;
/// How often a running digest mark is written.
pub const DIGEST_EVERY: Duration = Duration::from_secs(60);
/// How often a recording whose writes fail (a full disk) tries again.
pub const WRITE_RETRY: Duration = Duration::from_secs(3);

/// The start of the note a recording carries where a write fault left a
/// gap (`recording gap: 812 samples and 0 events lost between …`).
pub const GAP_NOTE: &str = "recording gap: ";

/// A gap a write fault left, as its note ([`GAP_NOTE`]) says it.
#[derive(Debug, Clone, PartialEq)]
pub struct Gap {
    pub samples: u64,
    pub events: u64,
    /// Seconds on the stream's clock: the last sample kept before the gap,
    /// and the last one lost.
    pub from_s: f64,
    pub to_s: f64,
    /// The error, as the operating system said it.
    pub cause: String,
}

impl Gap {
    /// Reads a note the writer left (`recording gap: 132 samples and 0
    /// events lost between 2.3 s and 8.9 s (No space left on device (os
    /// error 28))`); `None` for any other text.
    pub fn parse(note: &str) -> Option<Self> {
        let rest = note.strip_prefix(GAP_NOTE)?;
        let (samples, rest) = rest.split_once(" samples and ")?;
        let (events, rest) = rest.split_once(" events lost between ")?;
        let (from, rest) = rest.split_once(" s and ")?;
        let (to, rest) = rest.split_once(" s (")?;
        Some(Self {
            samples: samples.parse().ok()?,
            events: events.parse().ok()?,
            from_s: from.parse().ok()?,
            to_s: to.parse().ok()?,
            cause: rest.strip_suffix(')')?.to_owned(),
        })
    }
}

/// A recording whose writes fail (a full disk, a quota, a file system
/// turned read-only) and what it has lost since. The file keeps every frame
/// up to [`WriteFault::safe_t_ns`], whole: what was half written is cut
/// away, so every reader reads it (as truncated, until a footer follows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteFault {
    pub path: PathBuf,
    /// The error, as the operating system said it.
    pub cause: String,
    /// Stream time up to which every sample is on disk.
    pub safe_t_ns: u64,
    /// Samples and events pushed since then that are not in the file.
    pub lost_samples: u64,
    pub lost_events: u64,
    /// Stream time of the last item lost.
    pub lost_until_ns: u64,
}

impl WriteFault {
    /// "x.flr: No space left on device (os error 28); on disk up to 5.2 s".
    pub fn describe(&self) -> String {
        format!(
            "{}: {}; on disk up to {:.1} s",
            self.path.display(),
            self.cause,
            self.safe_t_ns as f64 / 1e9
        )
    }
}

/// The part of a recording that is on disk for sure: what the last flush
/// that succeeded had written.
#[derive(Debug, Clone)]
struct Durable {
    bytes: u64,
    frames: u64,
    samples: u64,
    events: u64,
    last_t_ns: u64,
    hasher: Sha256,
}

/// What a finished recording holds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WriteSummary {
    pub path: PathBuf,
    pub bytes: u64,
    pub frames: u64,
    pub samples: u64,
    pub events: u64,
    pub digest: String,
    /// Whether the file ends with its footer; false for one cut at a write
    /// fault (whole up to it, read as truncated).
    pub complete: bool,
}

/// Where a recording's bytes go: a file, or (in tests) a store that fails
/// on cue. Besides writing, the writer cuts it back to what was last whole
/// after a failed write, and syncs it at the end.
pub trait Storage: Write + Sized {
    /// A second handle on the same storage (the writer drops its buffer by
    /// taking the old handle apart).
    fn try_clone(&self) -> std::io::Result<Self>;
    /// Cuts the storage to `len` bytes and puts the write position there.
    fn cut_to(&mut self, len: u64) -> std::io::Result<()>;
    /// Makes what was written durable.
    fn sync(&mut self) -> std::io::Result<()>;
}

impl Storage for File {
    fn try_clone(&self) -> std::io::Result<Self> {
        File::try_clone(self)
    }
    fn cut_to(&mut self, len: u64) -> std::io::Result<()> {
        self.set_len(len)?;
        self.seek(SeekFrom::Start(len)).map(|_| ())
    }
    fn sync(&mut self) -> std::io::Result<()> {
        self.sync_all()
    }
}

/// Appends frames to a new recording file (or any [`Storage`]).
#[derive(Debug)]
pub struct RecordingWriter<S: Storage = File> {
    path: PathBuf,
    out: BufWriter<S>,
    hasher: Sha256,
    /// Every channel so far, ended ones included (each is a column of every
    /// block).
    schema: Schema,
    /// Which sample slot each live channel's value is in.
    slots: Slots,
    /// The header it was created with, and every schema change since: what
    /// [`RecordingWriter::fork`] replays so that a second file keeps the
    /// same slots.
    initial: Header,
    changes: Vec<Item>,
    /// Samples and events in frames written (not queued), and the latest
    /// time among them.
    written_samples: u64,
    written_events: u64,
    written_t_ns: u64,
    durable: Durable,
    /// Set while writes fail; schema changes made meanwhile, owed to the
    /// file; when writes were last tried; a fault that has ended, until
    /// [`RecordingWriter::take_resumed`].
    fault: Option<WriteFault>,
    owed: Vec<Frame>,
    /// Schema changes written since the last flush that succeeded: a
    /// roll-back cuts them off the file, and then they are owed again (the
    /// schema in memory already has them, and every later block has their
    /// columns).
    unflushed: Vec<Frame>,
    last_retry: Instant,
    resumed: Option<WriteFault>,
    frames: u64,
    samples: u64,
    events: u64,
    bytes: u64,
    last_t_ns: u64,
    pending: Vec<Sample>,
    /// Events since the last pack, as frames; written with the next block.
    pending_events: Vec<Frame>,
    pending_since: Option<Instant>,
    /// Buffers kept from block to block, so that writing allocates nothing
    /// once they have grown: the block, the encoder's codes, the packer's
    /// buffers, the pack, the payload.
    block: ColumnBlock,
    codes: Vec<Code>,
    packer: Packer,
    packed: Packed,
    payload: Vec<u8>,
    dirty: bool,
    last_flush: Instant,
    last_digest: Instant,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> RecordingError + '_ {
    move |source| RecordingError::Io {
        path: path.to_owned(),
        cause: source,
    }
}

/// The folder `path` would be made in, which must exist (it is named,
/// never created).
fn folder_of(path: &Path) -> Result<PathBuf, RecordingError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(RecordingError::MissingFolder {
            path: path.to_owned(),
            dir,
        });
    }
    Ok(dir)
}

/// What a header must be for this build to write it: this build's
/// version, a schema that fits a sample.
fn check_header(header: &Header) -> Result<(), RecordingError> {
    if header.format_version != FORMAT_VERSION {
        return Err(RecordingError::Encode(format!(
            "this build writes format version {FORMAT_VERSION}, not {}",
            header.format_version
        )));
    }
    check_new_channels(&Schema::default(), &header.schema.channels)
        .map_err(RecordingError::BadSchema)?;
    if header.schema.len() > MAX_CHANNELS {
        return Err(RecordingError::BadSchema(format!(
            "{} channels do not fit in a sample of {MAX_CHANNELS}",
            header.schema.len()
        )));
    }
    Ok(())
}

impl RecordingWriter<File> {
    /// Whether [`RecordingWriter::create`] could make `path`: its folder
    /// exists and takes a new file, and `path` does not exist (unless
    /// `force`, when it must be a file that opens for writing). Nothing is
    /// left behind; a command checks this before it starts what it records.
    pub fn check_path(path: &Path, force: bool) -> Result<(), RecordingError> {
        let dir = folder_of(path)?;
        let io = |cause| RecordingError::Io {
            path: path.to_owned(),
            cause,
        };
        match std::fs::symlink_metadata(path) {
            Ok(_) if !force => {
                return Err(RecordingError::Exists {
                    path: path.to_owned(),
                });
            }
            Ok(m) if m.is_dir() => {
                return Err(io(std::io::Error::new(
                    std::io::ErrorKind::IsADirectory,
                    "a folder, not a file",
                )));
            }
            Ok(_) => {
                OpenOptions::new().write(true).open(path).map_err(io)?;
                return Ok(());
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(e)),
        }
        // A file of our own beside it, made and removed: the folder takes
        // new files (permissions, a read-only mount).
        let probe = dir.join(format!(".flatline-check-{}", std::process::id()));
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&probe)
            .map_err(io)?;
        let _ = std::fs::remove_file(&probe);
        Ok(())
    }

    /// Creates `path` and writes the magic, the version and `header` (whose
    /// `format_version` must be this build's [`FORMAT_VERSION`]).
    /// Refuses to overwrite an existing file unless `force`, and names a
    /// missing folder rather than creating it.
    pub fn create(path: &Path, header: &Header, force: bool) -> Result<Self, RecordingError> {
        folder_of(path)?;
        check_header(header)?;
        let mut opts = OpenOptions::new();
        opts.write(true);
        if force {
            opts.create(true).truncate(true);
        } else {
            opts.create_new(true);
        }
        let file = opts.open(path).map_err(|source| {
            if source.kind() == std::io::ErrorKind::AlreadyExists {
                RecordingError::Exists {
                    path: path.to_owned(),
                }
            } else {
                RecordingError::Io {
                    path: path.to_owned(),
                    cause: source,
                }
            }
        })?;
        // A start refused here (the disk full before the header is written)
        // leaves nothing behind: the file was made (or emptied, with
        // `force`) for this recording, and an empty one would only refuse
        // the same command next time.
        Self::with_storage(file, path, header).inspect_err(|_| {
            let _ = std::fs::remove_file(path);
        })
    }

    /// A second recording of the same stream from now on, at `path`: the
    /// same header (source, configuration, host, clock) and the schema
    /// changes so far, so that the stream's samples fit its slots too. What
    /// a live window records while its workload process streams to it.
    pub fn fork(&self, path: &Path, force: bool) -> Result<Self, RecordingError> {
        let mut w = Self::create(path, &self.initial, force)?;
        for c in &self.changes {
            w.push(c)?;
        }
        Ok(w)
    }
}

impl<S: Storage> RecordingWriter<S> {
    /// A recording written to `storage` (empty, at its start), named
    /// `path` in what it reports: the magic, the version and `header`.
    pub fn with_storage(storage: S, path: &Path, header: &Header) -> Result<Self, RecordingError> {
        check_header(header)?;
        let mut w = Self {
            path: path.to_owned(),
            out: BufWriter::with_capacity(64 << 10, storage),
            hasher: Sha256::new(),
            schema: header.schema.clone(),
            slots: Slots::new(header.schema.len()),
            initial: header.clone(),
            changes: Vec::new(),
            written_samples: 0,
            written_events: 0,
            written_t_ns: 0,
            durable: Durable {
                bytes: 0,
                frames: 0,
                samples: 0,
                events: 0,
                last_t_ns: 0,
                hasher: Sha256::new(),
            },
            fault: None,
            owed: Vec::new(),
            unflushed: Vec::new(),
            last_retry: Instant::now(),
            resumed: None,
            frames: 0,
            samples: 0,
            events: 0,
            bytes: 0,
            last_t_ns: 0,
            pending: Vec::with_capacity(BLOCK_SAMPLES),
            pending_events: Vec::new(),
            pending_since: None,
            block: ColumnBlock::default(),
            codes: Vec::with_capacity(BLOCK_SAMPLES),
            packer: Packer::default(),
            packed: Packed::default(),
            payload: Vec::with_capacity(64 << 10),
            dirty: false,
            last_flush: Instant::now(),
            last_digest: Instant::now(),
        };
        let mut head = [0u8; 12];
        head[..8].copy_from_slice(&MAGIC);
        head[8..].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        w.out.write_all(&head).map_err(io_err(path))?;
        w.bytes = head.len() as u64;
        // Twice: a reader whose first copy is damaged reads the second, and
        // every frame after it keeps its meaning.
        let frame = Frame::Header(header.clone());
        w.write_frame(&frame)?;
        w.write_frame(&frame)?;
        w.flush()?;
        Ok(w)
    }

    fn write_frame(&mut self, frame: &Frame) -> Result<(), RecordingError> {
        let mut payload = std::mem::take(&mut self.payload);
        let written = encode_into(frame, &mut payload)
            .map_err(RecordingError::Encode)
            .and_then(|()| self.write_payload(&payload, matches!(frame, Frame::Footer(_))));
        self.payload = payload;
        written
    }

    fn write_payload(&mut self, payload: &[u8], footer: bool) -> Result<(), RecordingError> {
        if u32::try_from(payload.len()).map_or(true, |l| l > super::MAX_FRAME_BYTES) {
            return Err(RecordingError::Encode(format!(
                "a frame of {} bytes is over the limit",
                payload.len()
            )));
        }
        let mut head = [0u8; 20];
        let head = &mut head[..layout::head_len(FORMAT_VERSION)];
        layout::write_head(FORMAT_VERSION, self.written_samples, payload, head);
        if let Err(e) = self
            .out
            .write_all(head)
            .and_then(|()| self.out.write_all(payload))
        {
            return Err(self.trip(e));
        }
        if !footer {
            self.hasher.update(payload);
        }
        self.frames += 1;
        self.bytes += (head.len() + payload.len()) as u64;
        self.dirty = true;
        Ok(())
    }

    /// Writes the queued samples (as one block) and events as one pack.
    fn write_pending(&mut self) -> Result<(), RecordingError> {
        let mut block = std::mem::take(&mut self.block);
        let has_block = block.encode_into(&self.pending, self.slots.all(), &mut self.codes);
        if !has_block && self.pending_events.is_empty() {
            self.block = block;
            return Ok(());
        }
        let mut frames = std::mem::take(&mut self.pending_events);
        if has_block {
            frames.push(Frame::Block(block));
        }
        let mut packed = std::mem::take(&mut self.packed);
        let written = self
            .packer
            .pack(frames.iter(), &mut packed)
            .map_err(RecordingError::Encode)
            .map(|()| Frame::Packed(packed))
            .and_then(|frame| {
                let written = self.write_frame(&frame);
                if let Frame::Packed(p) = frame {
                    self.packed = p;
                }
                written
            });
        if has_block && let Some(Frame::Block(b)) = frames.pop() {
            self.block = b;
        }
        if written.is_ok() {
            self.written_samples += self.pending.len() as u64;
            self.written_events += frames.len() as u64;
            let last_sample = self.pending.last().map_or(0, |s| s.t_ns);
            let last_event = frames
                .iter()
                .filter_map(|f| match f {
                    Frame::Event(e) => Some(e.t_ns),
                    _ => None,
                })
                .max()
                .unwrap_or(0);
            self.written_t_ns = self.written_t_ns.max(last_sample).max(last_event);
        }
        frames.clear();
        self.pending_events = frames;
        written?;
        self.pending.clear();
        self.pending_since = None;
        self.flush()
    }

    /// Queues a sample; writes its block when it is full or old enough.
    pub fn push_sample(&mut self, s: &Sample) -> Result<(), RecordingError> {
        if s.values().len() != self.slots.width() {
            return Err(RecordingError::SchemaMismatch {
                expected: self.slots.width(),
                got: s.values().len(),
            });
        }
        if let Some(f) = self.fault.as_mut() {
            f.lost_samples += 1;
            f.lost_until_ns = f.lost_until_ns.max(s.t_ns);
            return self.tick();
        }
        self.pending.push(*s);
        self.pending_since.get_or_insert_with(Instant::now);
        self.samples += 1;
        self.last_t_ns = self.last_t_ns.max(s.t_ns);
        if self.pending.len() >= BLOCK_SAMPLES {
            self.write_pending()?;
        }
        self.tick()
    }

    /// Adds channels from the next sample on: every sample pushed after this
    /// carries values for them, in the slots [`Slots`] gives them (ended
    /// channels' slots first). Refuses names that are taken, empty or too
    /// long, more live channels than a sample holds, and schemas over the
    /// format's limit.
    pub fn add_channels(&mut self, channels: &[ChannelSpec]) -> Result<(), RecordingError> {
        check_new_channels(&self.schema, channels).map_err(RecordingError::BadSchema)?;
        if !self.slots.fits(channels.len()) {
            return Err(RecordingError::BadSchema(format!(
                "{} more live channels do not fit in a sample of {MAX_CHANNELS}",
                channels.len()
            )));
        }
        if channels.is_empty() {
            return Ok(());
        }
        let frame = Frame::Channels(SchemaExtension {
            at: self.samples,
            channels: channels.to_vec(),
        });
        self.write_change(frame)?;
        self.schema.channels.extend_from_slice(channels);
        self.slots.add(channels.len());
        self.changes.push(Item::Add(channels.to_vec()));
        self.tick()
    }

    /// Ends the channels at these positions from the next sample on: their
    /// columns carry no more values, and their sample slots are free for
    /// channels that join later.
    pub fn end_channels(&mut self, positions: &[usize]) -> Result<(), RecordingError> {
        let mut ending = Vec::with_capacity(positions.len());
        for &i in positions {
            match (i < self.slots.positions()).then(|| self.slots.slot(i)) {
                None => {
                    return Err(RecordingError::BadSchema(format!(
                        "no channel at position {i} to end"
                    )));
                }
                Some(None) => {
                    return Err(RecordingError::BadSchema(format!(
                        "channel {} has ended already",
                        self.schema.channels[i].name
                    )));
                }
                Some(Some(_)) if ending.contains(&(i as u32)) => {
                    return Err(RecordingError::BadSchema(format!(
                        "channel {} is listed twice",
                        self.schema.channels[i].name
                    )));
                }
                Some(Some(_)) => ending.push(i as u32),
            }
        }
        if ending.is_empty() {
            return Ok(());
        }
        let frame = Frame::Ended(ChannelsEnded {
            at: self.samples,
            channels: ending,
        });
        self.write_change(frame)?;
        self.slots.end(positions);
        self.changes.push(Item::End(positions.to_vec()));
        self.tick()
    }

    /// Writes a schema change (after what is queued), or owes it to the
    /// file while writes fail. Written twice, so that one damaged copy
    /// costs nothing: every block after it has the change's columns.
    fn write_change(&mut self, frame: Frame) -> Result<(), RecordingError> {
        if self.fault.is_some() {
            self.owed.push(frame);
            return Ok(());
        }
        self.write_pending()?;
        self.write_frame(&frame)?;
        self.write_frame(&frame)?;
        self.unflushed.push(frame);
        Ok(())
    }

    /// Writes one item of a live stream (see [`Item`]).
    pub fn push(&mut self, item: &Item) -> Result<(), RecordingError> {
        match item {
            Item::Add(specs) => self.add_channels(specs),
            Item::End(positions) => self.end_channels(positions),
            Item::Sample(s) => self.push_sample(s),
            Item::Event(e) => self.push_event(e.clone()),
        }
    }

    /// Where each live channel's value sits in the samples it takes.
    pub fn slots(&self) -> &Slots {
        &self.slots
    }

    /// Every channel so far, ended ones included.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Queues an event: it is written in the same pack as the samples of
    /// its half second (or sooner, in a burst of [`PACK_EVENTS`]), so an
    /// event every step neither cuts the stream into blocks of a few samples
    /// nor costs a frame of its own. Events carry their own time, so a reader
    /// never needs them in sample order.
    pub fn push_event(&mut self, e: Event) -> Result<(), RecordingError> {
        if let Some(f) = self.fault.as_mut() {
            f.lost_events += 1;
            f.lost_until_ns = f.lost_until_ns.max(e.t_ns);
            return self.tick();
        }
        self.last_t_ns = self.last_t_ns.max(e.t_ns);
        self.pending_events.push(Frame::Event(e));
        self.pending_since.get_or_insert_with(Instant::now);
        self.events += 1;
        if self.pending_events.len() >= PACK_EVENTS {
            self.write_pending()?;
        }
        self.tick()
    }

    /// Time-based duties; call at least a few times a second even when no
    /// sample arrives: writes an aged block, flushes, marks the digest.
    pub fn tick(&mut self) -> Result<(), RecordingError> {
        if self.fault.is_some() {
            if self.last_retry.elapsed() >= WRITE_RETRY {
                self.retry();
            }
            return Ok(());
        }
        if self.pending_since.is_some_and(|t| t.elapsed() >= BLOCK_AGE) {
            self.write_pending()?;
        }
        if self.last_digest.elapsed() >= DIGEST_EVERY {
            self.write_pending()?;
            let mark = DigestMark {
                frames: self.frames,
                digest: self.digest_hex(),
            };
            self.write_frame(&Frame::Digest(mark))?;
            self.last_digest = Instant::now();
        }
        if self.dirty && self.last_flush.elapsed() >= BLOCK_AGE {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes what is queued now (as one pack) and flushes: what a caller
    /// that wants a durable point at once asks for, instead of waiting for
    /// the block's age.
    pub fn write_queued(&mut self) -> Result<(), RecordingError> {
        if self.fault.is_some() {
            return self.tick();
        }
        self.write_pending()
    }

    /// Hands everything written so far to the operating system.
    pub fn flush(&mut self) -> Result<(), RecordingError> {
        if let Err(e) = self.out.flush() {
            return Err(self.trip(e));
        }
        self.dirty = false;
        self.last_flush = Instant::now();
        self.unflushed.clear();
        self.durable = Durable {
            bytes: self.bytes,
            frames: self.frames,
            samples: self.written_samples,
            events: self.written_events,
            last_t_ns: self.written_t_ns,
            hasher: self.hasher.clone(),
        };
        Ok(())
    }

    /// A write failed: cuts the file back to what the last flush left whole,
    /// forgets what was queued or half written (counting it as lost), and
    /// from now on drops what is pushed until a retry succeeds. Returns the
    /// error, to be said once.
    fn trip(&mut self, e: std::io::Error) -> RecordingError {
        let lost_samples = self.samples.saturating_sub(self.durable.samples);
        let lost_events = self.events.saturating_sub(self.durable.events);
        let lost_until_ns = self.last_t_ns;
        let fault = self.fault.get_or_insert_with(|| WriteFault {
            path: self.path.clone(),
            cause: e.to_string(),
            safe_t_ns: self.durable.last_t_ns,
            lost_samples: 0,
            lost_events: 0,
            lost_until_ns: 0,
        });
        fault.lost_samples += lost_samples;
        fault.lost_events += lost_events;
        fault.lost_until_ns = fault.lost_until_ns.max(lost_until_ns);
        // Whatever the roll-back meets, the file keeps its whole frames: a
        // reader stops at the first incomplete one.
        let _ = self.roll_back();
        self.last_retry = Instant::now();
        RecordingError::Io {
            path: self.path.clone(),
            cause: e,
        }
    }

    /// Back to the last durable state: the buffer dropped unwritten, the
    /// file cut to its length then, the counters and digest as they were.
    fn roll_back(&mut self) -> std::io::Result<()> {
        let d = self.durable.clone();
        self.bytes = d.bytes;
        self.frames = d.frames;
        self.samples = d.samples;
        self.events = d.events;
        self.written_samples = d.samples;
        self.written_events = d.events;
        self.written_t_ns = d.last_t_ns;
        self.last_t_ns = d.last_t_ns;
        self.hasher = d.hasher;
        self.pending.clear();
        self.pending_events.clear();
        self.pending_since = None;
        self.dirty = false;
        // The schema changes the cut takes off the file are owed again,
        // before those made since, from the next sample written on.
        let mut owed = std::mem::take(&mut self.unflushed);
        owed.append(&mut self.owed);
        for f in &mut owed {
            match f {
                Frame::Channels(x) => x.at = d.samples,
                Frame::Ended(x) => x.at = d.samples,
                _ => {}
            }
        }
        self.owed = owed;
        let file = self.out.get_ref().try_clone()?;
        let old = std::mem::replace(&mut self.out, BufWriter::with_capacity(64 << 10, file));
        // Dropping a BufWriter would write its buffer: take it apart instead.
        let (_, _unwritten) = old.into_parts();
        self.out.get_mut().cut_to(d.bytes)
    }

    /// While writes fail: tries again (at most every [`WRITE_RETRY`]). On
    /// success the file goes on with the schema changes made meanwhile and a
    /// note of the gap, which a reader shows among the recording's notes.
    fn retry(&mut self) {
        let Some(fault) = self.fault.clone() else {
            return;
        };
        self.last_retry = Instant::now();
        let owed = std::mem::take(&mut self.owed);
        let gap = Event {
            t_ns: fault.lost_until_ns.max(fault.safe_t_ns),
            kind: EventKind::Note(format!(
                "{GAP_NOTE}{} samples and {} events lost between {:.1} s and {:.1} s ({})",
                fault.lost_samples,
                fault.lost_events,
                fault.safe_t_ns as f64 / 1e9,
                fault.lost_until_ns as f64 / 1e9,
                fault.cause
            )),
        };
        // While the fault stands, `trip` only rolls back: clear it for the try.
        self.fault = None;
        let mut tried = Ok(());
        for f in &owed {
            tried = tried
                .and_then(|()| self.write_frame(f))
                .and_then(|()| self.write_frame(f));
            if tried.is_ok() {
                self.unflushed.push(f.clone());
            }
        }
        tried = tried
            .and_then(|()| self.write_frame(&Frame::Event(gap.clone())))
            .and_then(|()| {
                self.events += 1;
                self.written_events += 1;
                self.written_t_ns = self.written_t_ns.max(gap.t_ns);
                self.last_t_ns = self.last_t_ns.max(gap.t_ns);
                self.flush()
            });
        match tried {
            Ok(()) => self.resumed = Some(fault),
            Err(_) => {
                // `trip` counted nothing new (the counters were rolled back
                // already); keep the first fault's figures and cause.
                let _ = self.roll_back();
                self.fault = Some(fault);
                // What the roll-back owes again is a part of these.
                self.owed = owed;
            }
        }
    }

    /// Tries the writes again now, whenever the last try was.
    pub fn retry_now(&mut self) {
        self.retry();
    }

    /// What the file holds for sure (all of it, once flushed; up to the
    /// fault while writes fail), for a recording left without its footer.
    pub fn kept(&self) -> WriteSummary {
        let d = &self.durable;
        WriteSummary {
            path: self.path.clone(),
            bytes: d.bytes,
            frames: d.frames,
            samples: d.samples,
            events: d.events,
            digest: hex(&d.hasher.clone().finalize()),
            complete: false,
        }
    }

    /// The fault in progress, if writes fail now.
    pub fn fault(&self) -> Option<&WriteFault> {
        self.fault.as_ref()
    }

    /// A fault that has ended since the last call: writes work again, and
    /// the file has a note of the gap.
    pub fn take_resumed(&mut self) -> Option<WriteFault> {
        self.resumed.take()
    }

    /// SHA-256 (hex) of every frame payload written so far.
    pub fn digest_hex(&self) -> String {
        hex(&self.hasher.clone().finalize())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes written so far (queued samples not counted).
    pub fn bytes_written(&self) -> u64 {
        self.bytes
    }

    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Writes what is queued and the footer, and syncs the file to disk.
    pub fn finish(mut self, end: &str) -> Result<WriteSummary, RecordingError> {
        self.close(end)
    }

    /// [`RecordingWriter::finish`] without giving the writer up: when the
    /// footer cannot be written (the disk filled at the very end) the error
    /// is a write fault ([`RecordingWriter::fault`] says it) and
    /// [`RecordingWriter::kept`] still says what the file holds, whole up to
    /// the fault.
    pub fn close(&mut self, end: &str) -> Result<WriteSummary, RecordingError> {
        if let Some(f) = self.fault.clone() {
            // One more try; if the disk is still full the file stays as it
            // was cut, whole up to the fault, without a footer.
            self.retry();
            if self.fault.is_some() {
                return Err(RecordingError::Io {
                    path: self.path.clone(),
                    cause: std::io::Error::other(format!(
                        "{}; the recording ends at {:.1} s without a footer",
                        f.cause,
                        f.safe_t_ns as f64 / 1e9
                    )),
                });
            }
        }
        self.write_pending()?;
        let digest = self.digest_hex();
        let footer = Footer {
            frames: self.frames,
            samples: self.samples,
            events: self.events,
            digest: digest.clone(),
            duration_ns: self.last_t_ns,
            end: end.to_owned(),
        };
        self.write_frame(&Frame::Footer(footer))?;
        self.flush()?;
        if let Err(e) = self.out.get_mut().sync() {
            return Err(self.trip(e));
        }
        Ok(WriteSummary {
            path: self.path.clone(),
            bytes: self.bytes,
            frames: self.frames,
            samples: self.samples,
            events: self.events,
            digest,
            complete: true,
        })
    }
}
