//! flatline-format: the data of a flatline recording and nothing else.
//!
//! Samples, channel schemas, events, and the `.flr` file format that holds
//! them: codec, writer and reader. Its dependencies are serde, rmp-serde,
//! flate2 (pure-Rust deflate), crc32fast, sha2 and thiserror; it never depends on a probe (NVML,
//! sysinfo), a channel crate or a GUI, so the runtime, the dashboard and the
//! fuzzer can all use it and CI checks that it stays that small.
//!
//! # File format
//!
//! ```text
//! magic    8 bytes  "FLATLINE"
//! version  4 bytes  u32 little-endian (1 to 5)
//! frames   each:    length u32 LE | CRC-32 of the payload u32 LE | payload      (v1 to v4)
//!                   SYNC | length u32 LE | CRC-32 u32 LE | sample index u64 LE | payload   (v5)
//! ```
//!
//! Every payload is one MessagePack [`Frame`] (rmp-serde, structs as maps so
//! later versions can add fields). The first frame is the [`Header`]: channel
//! schema, host facts, the run's configuration and command line, the tool
//! version and the wall-clock start. Then, in time order: sample blocks (each
//! at most half a second of samples, flushed to the OS when written), events,
//! and every minute a digest mark. A run that ends cleanly writes a
//! [`Footer`] last.
//!
//! The digest is SHA-256 over the payloads of every frame before the footer,
//! in order: it names exactly the recording a receipt or screenshot came
//! from. The footer carries it, and a reader recomputes it.
//!
//! A reader returns every complete frame and, if the tail went bad, where and
//! how: `truncated` (the file ends inside a frame, or without a footer) or
//! `damaged` (bad checksum, a frame over [`MAX_FRAME_BYTES`], a payload that
//! does not decode, a schema change it refuses). Bad magic or an unknown
//! version is an error naming both.
//!
//! ## Version 1
//!
//! Sample blocks ([`SampleBlock`]) are row-major: per sample, per channel, a
//! whole number (|v| ≤ 2^53) after a whole number is stored as the integer
//! difference, anything else as itself, `NaN` as nil. The schema is fixed by
//! the header; channels carry no kind (the reader infers it, see [`Kind`]).
//!
//! ## Version 2
//!
//! - **Column blocks** ([`ColumnBlock`]): per channel, the values as first or
//!   second differences (whichever the writer found shorter for that block),
//!   with runs of equal codes collapsed into one `[count, code]` pair. A
//!   channel that does not change in a block costs a few bytes, whatever the
//!   rate; a counter that rises steadily costs about as little. `NaN` is nil
//!   and does not break the differences. Every value reads back bit for bit
//!   (v2 writers stored −0 as 0 and every NaN as nil; v3 writers keep both).
//!   Blocks are independent of each other.
//! - **Channels added mid-recording** ([`Frame::Channels`]): new channels from
//!   sample index `at` on; earlier samples read as absent (`NaN`) for them.
//! - **Channels that end** ([`Frame::Ended`]): from sample index `at` on the
//!   channel carries no values, and the reader records that it ended (a
//!   process exited) rather than went quiet. An ended channel keeps its
//!   position (its column carries nothing from then on); a channel never
//!   comes back under the same position. In memory, a live channel's value
//!   sits in a sample slot that an ended channel may have freed (see
//!   [`Slots`]); the file never holds slots, only positions.
//! - **Kinds** in the schema: every [`ChannelSpec`] says whether it is a
//!   `level`, `peak`, `counter` or `gauge`.
//!
//! ## Version 3
//!
//! Version 2's frames, plus **packs** ([`Packed`]): the writer gathers a
//! block and the events of the same half second into one frame, the
//! MessagePack list of those frames deflated (raw DEFLATE). A step event a
//! few times a second no longer costs a frame header and its field names
//! each time, and the columns' codes compress further. A pack is still one
//! checksummed, length-prefixed frame, flushed within half a second, so what
//! a crash keeps is unchanged; it is inflated to at most the size it states
//! (itself within [`MAX_FRAME_BYTES`]) and may hold only blocks and events.
//! The column codec is v2's; a v3 writer stores −0 and NaNs other than
//! `f64::NAN` as floats, so that every `f64` reads back bit for bit.
//!
//! ## Version 4
//!
//! Version 3's frames, plus facts (events read from outside the samples:
//! a death, the job's exit status).
//!
//! ## Version 5: read past damage
//!
//! Version 4's frames in a head that lets a reader go on past a damaged
//! frame (see `layout`): every stored frame starts with the sync word
//! [`layout::SYNC`] and carries the number of samples written before it,
//! covered by its checksum. A reader that meets a frame whose checksum,
//! length or payload is wrong looks for the next sync word whose frame
//! checks, goes on from there, and knows from that frame's sample index how
//! many samples it lost ([`Loss`]). What the frames after it depend on is
//! written twice: the header, and every schema change (channels that join
//! or end), the second copy right after the first; a reader takes the first
//! copy it can read and passes over the other. One damaged byte then costs
//! at most the frame it falls in. Older versions are read past a damaged
//! frame only where its length still points at a frame that checks.
//!
//! Hostile input is bounded: a frame over [`MAX_FRAME_BYTES`] is refused
//! before anything is allocated for it, a schema over [`MAX_SCHEMA_CHANNELS`]
//! channels or a name over [`MAX_NAME_BYTES`] bytes is refused, and no list
//! length read from a frame is trusted beyond what the frame can hold.

mod codec;
mod file;
mod frames;
mod header;
mod item;
pub mod layout;
mod reader;
mod sample;
mod schema;
mod seek;
pub mod sites;
mod slots;
mod writer;

pub use codec::{ChannelsEnded, ColumnBlock, Frame, Packed, Packer, SampleBlock, SchemaExtension};
pub use file::{
    EXTENSION, FORMAT_VERSION, MAGIC, MAX_FRAME_BYTES, MAX_SCHEMA_CHANNELS, READABLE_VERSIONS,
    RecordingError, check_new_channels,
};
pub use header::{
    DigestMark, Event, EventKind, Footer, GpuFacts, Header, HostFacts, labels_line, with_labels,
};
pub use item::Item;
#[cfg(fuzzing)]
pub use reader::check_checksums;
pub use reader::{
    ColumnStats, FrameReader, Loss, Recording, Scanned, Scanner, Skipped, TailProblem,
    TailProblemKind, Thinned, Visit, scan,
};
pub use sample::{MAX_CHANNELS, Sample};
pub use schema::{
    ChannelSpec, Group, Kind, MAX_NAME_BYTES, STEP_CHANNELS, Schema, TOKEN_CHANNELS, Unavailable,
    Unit,
};
pub use seek::{Lifetime, SEEK_EVERY, SampleIndex, Samples, SeekPoint};
pub use slots::Slots;
pub use writer::{
    BLOCK_AGE, BLOCK_SAMPLES, DIGEST_EVERY, GAP_NOTE, Gap, PACK_EVENTS, RecordingWriter, Storage,
    WRITE_RETRY, WriteFault, WriteSummary,
};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_damage;
