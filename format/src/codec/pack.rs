//! Packs: sample blocks and events deflated together, and their reading
//! (the fast path first).

use super::fast;
use super::frame::{Frame, Packed};

/// Deflate level of packs: 6 measured as small as 9 on recordings and
/// cheaper (docs/long-recordings.md, "Choosing the encoding by measurement").
const PACK_LEVEL: u32 = 6;

/// Packs frames, reusing the memory of its buffers between packs: a recorder
/// that keeps one allocates nothing per pack once they have grown.
#[derive(Debug)]
pub struct Packer {
    raw: Vec<u8>,
    deflate: flate2::Compress,
}

impl Default for Packer {
    fn default() -> Self {
        Self {
            raw: Vec::with_capacity(64 << 10),
            deflate: flate2::Compress::new(flate2::Compression::new(PACK_LEVEL), false),
        }
    }
}

impl Packer {
    /// Encodes `frames` (blocks and events) into `out`'s bytes.
    pub fn pack<'a>(
        &mut self,
        frames: impl ExactSizeIterator<Item = &'a Frame>,
        out: &mut Packed,
    ) -> Result<(), String> {
        self.raw.clear();
        let n = u32::try_from(frames.len()).map_err(|_| "too many frames to pack")?;
        rmp::encode::write_array_len(&mut self.raw, n).map_err(|e| e.to_string())?;
        for f in frames {
            if !matches!(f, Frame::Block(_) | Frame::Event(_)) {
                return Err("only sample blocks and events are packed".into());
            }
            rmp_serde::encode::write_named(&mut self.raw, f).map_err(|e| e.to_string())?;
        }
        out.raw_bytes = u32::try_from(self.raw.len())
            .ok()
            .filter(|&n| n <= crate::MAX_FRAME_BYTES)
            .ok_or_else(|| format!("a pack of {} bytes is over the limit", self.raw.len()))?;
        out.deflated.clear();
        // Deflate never grows incompressible input by more than a few bytes
        // per 16 KiB block; reserve that so one call finishes.
        out.deflated
            .reserve(self.raw.len() + self.raw.len() / 1024 + 64);
        self.deflate.reset();
        let status = self
            .deflate
            .compress_vec(&self.raw, &mut out.deflated, flate2::FlushCompress::Finish)
            .map_err(|e| e.to_string())?;
        if status != flate2::Status::StreamEnd {
            return Err("deflate did not finish a pack".into());
        }
        Ok(())
    }
}

impl Packed {
    /// The frames it holds. Inflates at most `raw_bytes` (itself within
    /// [`crate::MAX_FRAME_BYTES`]) and refuses a pack whose stream says
    /// otherwise, or that holds anything but sample blocks and events.
    pub fn unpack(&self) -> Result<Vec<Frame>, String> {
        use std::io::Read as _;
        if self.raw_bytes > crate::MAX_FRAME_BYTES {
            return Err(format!(
                "a pack of {} bytes is over the limit",
                self.raw_bytes
            ));
        }
        let mut raw = Vec::with_capacity(self.raw_bytes as usize);
        flate2::read::DeflateDecoder::new(&self.deflated[..])
            .take(u64::from(self.raw_bytes) + 1)
            .read_to_end(&mut raw)
            .map_err(|e| format!("a pack does not inflate: {e}"))?;
        if raw.len() != self.raw_bytes as usize {
            return Err(format!(
                "a pack inflates to {}{} bytes, not the {} it says",
                raw.len(),
                if raw.len() > self.raw_bytes as usize {
                    "+"
                } else {
                    ""
                },
                self.raw_bytes
            ));
        }
        let frames = fast::frames(&raw)?;
        match frames
            .iter()
            .find(|f| !matches!(f, Frame::Block(_) | Frame::Event(_)))
        {
            Some(_) => Err("a pack holds a frame other than a sample block or an event".into()),
            None => Ok(frames),
        }
    }
}
