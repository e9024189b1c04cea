//! What a recording file is: its magic, its versions, its limits, and the
//! errors of reading and writing one.

use crate::schema::{ChannelSpec, MAX_NAME_BYTES, Schema};
use std::path::PathBuf;

/// The first 8 bytes of every recording.
pub const MAGIC: [u8; 8] = *b"FLATLINE";
/// The format version this build writes.
pub const FORMAT_VERSION: u32 = 5;
/// Versions this build reads.
pub const READABLE_VERSIONS: &[u32] = &[1, 2, 3, 4, 5];
/// A frame longer than this is damage, never an allocation.
pub const MAX_FRAME_BYTES: u32 = 16 << 20;
/// Most channels a recording may have over its whole life (ended ones count).
pub const MAX_SCHEMA_CHANNELS: usize = 4096;
/// File name extension of recordings.
pub const EXTENSION: &str = "flr";

/// What can go wrong with a recording as a whole.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    // The cause is part of the message and not also a `source()`, so a
    // chain of errors (anyhow's `{:#}`) says it once.
    #[error("{path}: {cause}")]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{path}: not a flatline recording (starts with {found:02x?}, expected \"FLATLINE\")")]
    BadMagic { path: PathBuf, found: Vec<u8> },
    #[error(
        "{path}: recording format version {found} is not supported by this flatline (reads {supported:?})"
    )]
    UnsupportedVersion {
        path: PathBuf,
        found: u32,
        supported: &'static [u32],
    },
    #[error("{path}: the header is unreadable: {reason}")]
    BadHeader { path: PathBuf, reason: String },
    #[error("{path} already exists (pass --force to overwrite it)")]
    Exists { path: PathBuf },
    #[error("cannot create {path}: the folder {} does not exist", dir.display())]
    MissingFolder { path: PathBuf, dir: PathBuf },
    #[error("a sample has {got} values but the schema has {expected} channels")]
    SchemaMismatch { expected: usize, got: usize },
    #[error("bad schema change: {0}")]
    BadSchema(String),
    #[error("cannot encode a frame: {0}")]
    Encode(String),
}

/// Checks channels about to join a schema of `existing` channels: names
/// present, not too long, not taken, and the total within
/// [`MAX_SCHEMA_CHANNELS`].
pub fn check_new_channels(existing: &Schema, add: &[ChannelSpec]) -> Result<(), String> {
    if existing.len() + add.len() > MAX_SCHEMA_CHANNELS {
        return Err(format!(
            "{} channels would exceed the limit of {MAX_SCHEMA_CHANNELS}",
            existing.len() + add.len()
        ));
    }
    for (i, c) in add.iter().enumerate() {
        if c.name.is_empty() || c.name.len() > MAX_NAME_BYTES {
            return Err(format!(
                "a channel name of {} bytes (1 to {MAX_NAME_BYTES})",
                c.name.len()
            ));
        }
        if existing.index_of(&c.name).is_some() || add[..i].iter().any(|o| o.name == c.name) {
            return Err(format!("channel {} appears twice", c.name));
        }
    }
    Ok(())
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}
