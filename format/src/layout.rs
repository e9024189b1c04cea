//! How a frame sits in the file: its stored head, by format version.
//!
//! Versions 1 to 4: `length u32 LE | CRC-32 of the payload u32 LE |
//! payload`. Version 5 puts a sync word first and the sample index of the
//! frame in the head, so that a reader that meets a damaged frame finds the
//! next one by its sync word and knows how many samples it missed:
//! `SYNC | length u32 LE | CRC-32 u32 LE | sample index u64 LE | payload`,
//! the checksum over the sample index's eight bytes and the payload.

/// The four bytes every v5 frame starts with.
pub const SYNC: [u8; 4] = [0xF1, 0xA7, 0x5E, 0xC5];

/// Bytes of a stored frame's head in format `version`.
pub fn head_len(version: u32) -> usize {
    if version >= 5 { 20 } else { 8 }
}

/// A stored frame's head as read: the payload's length, its checksum, and
/// (v5) the number of samples written before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub len: u32,
    pub crc: u32,
    pub at: Option<u64>,
}

impl Head {
    /// Parses a head of format `version` (`bytes` is [`head_len`] long);
    /// `None` when a v5 head does not start with [`SYNC`].
    pub fn parse(version: u32, bytes: &[u8]) -> Option<Self> {
        let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap());
        if version < 5 {
            return Some(Self {
                len: u32_at(0),
                crc: u32_at(4),
                at: None,
            });
        }
        if bytes[..4] != SYNC {
            return None;
        }
        Some(Self {
            len: u32_at(4),
            crc: u32_at(8),
            at: Some(u64::from_le_bytes(bytes[12..20].try_into().unwrap())),
        })
    }

    /// Whether `payload` is what this head's checksum covers.
    pub fn checks(&self, payload: &[u8]) -> bool {
        checksum(self.at, payload) == self.crc
    }
}

/// The checksum a head carries: CRC-32 of the sample index (v5) and the
/// payload.
pub fn checksum(at: Option<u64>, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    if let Some(at) = at {
        h.update(&at.to_le_bytes());
    }
    h.update(payload);
    h.finalize()
}

/// Writes the head of a frame of format `version` into `out` (which must be
/// [`head_len`] long): `at` is the number of samples written before the
/// frame (v5 only).
pub fn write_head(version: u32, at: u64, payload: &[u8], out: &mut [u8]) {
    let len = (payload.len() as u32).to_le_bytes();
    if version < 5 {
        out[..4].copy_from_slice(&len);
        out[4..8].copy_from_slice(&checksum(None, payload).to_le_bytes());
        return;
    }
    out[..4].copy_from_slice(&SYNC);
    out[4..8].copy_from_slice(&len);
    out[8..12].copy_from_slice(&checksum(Some(at), payload).to_le_bytes());
    out[12..20].copy_from_slice(&at.to_le_bytes());
}

/// A whole stored frame of format `version`, as bytes (tests, tools).
pub fn stored(version: u32, at: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0; head_len(version)];
    write_head(version, at, payload, &mut out);
    out.extend_from_slice(payload);
    out
}
