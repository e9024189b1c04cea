//! Frames, and the coding of sample values: v1's row-major deltas
//! ([`SampleBlock`]) and v2's columns ([`ColumnBlock`], in `columns.rs`).

use std::fmt;

use serde::de::{SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{ChannelSpec, DigestMark, Event, Footer, Header, MAX_CHANNELS, Sample};

mod columns;
mod fast;
pub use columns::{Code, ColumnBlock};

/// One frame's payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(clippy::large_enum_variant)] // frames are built and dropped one at a time
pub enum Frame {
    Header(Header),
    /// A v1 sample block.
    Samples(SampleBlock),
    Event(Event),
    Digest(DigestMark),
    Footer(Footer),
    /// A v2 sample block.
    Block(ColumnBlock),
    /// v2: channels that join the schema.
    Channels(SchemaExtension),
    /// v2: channels that carry no more values.
    Ended(ChannelsEnded),
    /// v3: a sample block and the events of the same half second, deflated
    /// together (see [`Packed`]).
    Packed(Packed),
}

/// Frames written together and compressed as one (format v3): the
/// MessagePack list of the frames, deflated (raw DEFLATE, RFC 1951). Only
/// sample blocks and events are packed; a pack never holds another pack.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Packed {
    /// Bytes of the list once inflated (at most [`crate::MAX_FRAME_BYTES`]).
    pub raw_bytes: u32,
    #[serde(with = "serde_bytes")]
    pub deflated: Vec<u8>,
}

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

/// Channels that join the schema from sample index `at` on (the number of
/// samples written before this frame). Earlier samples have no value for them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SchemaExtension {
    pub at: u64,
    pub channels: Vec<ChannelSpec>,
}

/// Channels (by position in the schema) that end at sample index `at`: from
/// there on they carry no values, because what they measured is gone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelsEnded {
    pub at: u64,
    pub channels: Vec<u32>,
}

/// Consecutive samples of one stream (format v1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleBlock {
    /// Values per sample (the schema's channel count when written).
    pub channels: u32,
    pub seq0: u64,
    pub t0_ns: u64,
    /// For samples 1.., the step in `seq` from the sample before.
    pub dseq: Vec<u64>,
    /// For samples 1.., the step in `t_ns` from the sample before.
    pub dt_ns: Vec<u64>,
    /// Row-major values, delta-coded per channel (see the module docs).
    pub values: Tokens,
}

/// Largest magnitude stored as an exact integer (and as deltas).
const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53

#[inline]
fn whole(v: f64) -> bool {
    v.is_finite() && v.fract() == 0.0 && v.abs() <= EXACT
}

/// The coded values of a v1 block (the same codes as v2's columns, [`Code`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tokens(pub Vec<Code>);

impl SampleBlock {
    /// Codes `samples` (all with `channels` values) as one block; `None` if empty.
    pub fn encode(samples: &[Sample], channels: usize) -> Option<Self> {
        let first = samples.first()?;
        let mut prev: Vec<Option<f64>> = vec![None; channels];
        let mut tokens = Vec::with_capacity(samples.len() * channels);
        for s in samples {
            for (p, &v) in prev.iter_mut().zip(s.values()) {
                tokens.push(match (*p, v) {
                    (_, v) if v.is_nan() => Code::Nil,
                    (Some(p), v) if whole(p) && whole(v) => Code::Int(v as i64 - p as i64),
                    (_, v) if whole(v) => Code::Int(v as i64),
                    (_, v) => Code::Float(v),
                });
                *p = (!v.is_nan()).then_some(v);
            }
        }
        let pairs = || samples.windows(2);
        Some(Self {
            channels: channels as u32,
            seq0: first.seq,
            t0_ns: first.t_ns,
            dseq: pairs().map(|w| w[1].seq.wrapping_sub(w[0].seq)).collect(),
            dt_ns: pairs().map(|w| w[1].t_ns.wrapping_sub(w[0].t_ns)).collect(),
            values: Tokens(tokens),
        })
    }

    /// Samples in the block.
    pub fn len(&self) -> usize {
        if self.values.0.is_empty() && self.dt_ns.is_empty() {
            0
        } else {
            self.dt_ns.len() + 1
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Decodes the block, calling `row(seq, t_ns, values)` for each sample.
    /// Fails, without calling `row` for a bad sample, if the block does not
    /// add up (lengths, overflowing deltas).
    pub fn decode(&self, mut row: impl FnMut(u64, u64, &[f64])) -> Result<(), String> {
        let ch = self.channels as usize;
        let n = self.len();
        if self.dseq.len() != self.dt_ns.len() {
            return Err("sample block: seq and time lengths differ".into());
        }
        if ch == 0 || ch > MAX_CHANNELS {
            return Err(format!("sample block: {ch} channels"));
        }
        if self.values.0.len() != n * ch {
            return Err(format!(
                "sample block: {} values for {n} samples of {ch} channels",
                self.values.0.len()
            ));
        }
        let mut prev: Vec<Option<f64>> = vec![None; ch];
        let mut vals = vec![0.0; ch];
        let (mut seq, mut t) = (self.seq0, self.t0_ns);
        for (i, chunk) in self.values.0.chunks_exact(ch).enumerate() {
            if i > 0 {
                seq = seq
                    .checked_add(self.dseq[i - 1])
                    .ok_or("sample block: seq overflows")?;
                t = t
                    .checked_add(self.dt_ns[i - 1])
                    .ok_or("sample block: time overflows")?;
            }
            for ((out, p), tok) in vals.iter_mut().zip(prev.iter_mut()).zip(chunk) {
                let v = match (*tok, *p) {
                    (Code::Nil, _) => f64::NAN,
                    (Code::Float(f), _) => f,
                    (Code::Int(d), Some(p)) if whole(p) => {
                        let v = (p as i64)
                            .checked_add(d)
                            .ok_or("sample block: delta overflows")?;
                        v as f64
                    }
                    (Code::Int(d), _) => d as f64,
                };
                *out = v;
                *p = (!v.is_nan()).then_some(v);
            }
            row(seq, t, &vals);
        }
        Ok(())
    }
}

impl Serialize for Tokens {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for t in &self.0 {
            seq.serialize_element(t)?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for Tokens {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Tokens;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of coded values")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tokens, A::Error> {
                // Trust the length hint only so far: the frame limit bounds the input.
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
                while let Some(t) = seq.next_element()? {
                    out.push(t);
                }
                Ok(Tokens(out))
            }
        }
        d.deserialize_seq(V)
    }
}

/// Encodes a frame's payload.
#[cfg(test)]
pub fn encode(frame: &Frame) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    encode_into(frame, &mut out)?;
    Ok(out)
}

/// Encodes a frame's payload into `out` (cleared first), reusing its memory.
pub fn encode_into(frame: &Frame, out: &mut Vec<u8>) -> Result<(), String> {
    out.clear();
    rmp_serde::encode::write_named(out, frame).map_err(|e| e.to_string())
}

/// Decodes a frame's payload.
pub fn decode(payload: &[u8]) -> Result<Frame, String> {
    rmp_serde::from_slice(payload).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::SplitMix64;

    fn roundtrip(samples: &[Sample], ch: usize) -> Vec<(u64, u64, Vec<f64>)> {
        let block = SampleBlock::encode(samples, ch).unwrap();
        let bytes = encode(&Frame::Samples(block)).unwrap();
        let Frame::Samples(back) = decode(&bytes).unwrap() else {
            panic!("not a block")
        };
        let mut rows = Vec::new();
        back.decode(|seq, t, v| rows.push((seq, t, v.to_vec())))
            .unwrap();
        rows
    }

    /// The direct block reader of packs takes every block this build
    /// writes, and on damaged bytes it never returns a block that serde
    /// would not return the same.
    #[test]
    fn the_direct_block_reader_agrees_with_serde() {
        let mut rng = SplitMix64::new(5);
        let specials = [0.0, -0.0, f64::NAN, f64::INFINITY, 1e300, 5e-324, 0.5];
        let (mut taken, mut damaged_taken) = (0, 0);
        for _ in 0..300 {
            let ch = 1 + rng.below(12) as usize;
            let n = 1 + rng.below(300);
            let samples: Vec<Sample> = (0..n)
                .map(|i| {
                    let vals: Vec<f64> = (0..ch)
                        .map(|c| match (c + rng.below(3) as usize) % 5 {
                            0 => 7.0,
                            1 => (i * 4096) as f64,
                            2 => specials[rng.below(specials.len() as u64) as usize],
                            3 => f64::from_bits(rng.next_u64()),
                            _ => -((rng.below(1 << 40)) as f64),
                        })
                        .collect();
                    Sample::from_values(u64::MAX - i, i * 10_000_000 + rng.below(999), &vals)
                })
                .collect();
            let block = ColumnBlock::encode(&samples, ch).unwrap();
            let bytes = encode(&Frame::Block(block.clone())).unwrap();
            assert_eq!(fast::block_fast(&bytes), Some(block));
            taken += 1;
            for _ in 0..30 {
                let mut b = bytes.clone();
                for _ in 0..1 + rng.below(3) {
                    let i = rng.below(b.len() as u64) as usize;
                    b[i] = rng.next_u64() as u8;
                }
                if rng.below(4) == 0 {
                    b.truncate(rng.below(b.len() as u64) as usize);
                }
                if let Some(direct) = fast::block_fast(&b) {
                    damaged_taken += 1;
                    assert_eq!(fast::block_by_serde(&b), Some(direct));
                }
            }
        }
        assert_eq!(taken, 300);
        // Many damaged blocks still parse (a changed value is still a value):
        // the comparison above is not vacuous.
        assert!(damaged_taken > 500, "{damaged_taken}");
    }

    #[test]
    fn every_kind_of_value_reads_back_exactly() {
        let mut rng = SplitMix64::new(9);
        let specials = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            1e-300,
            1.5e300,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            9_007_199_254_740_992.0,
            -9_007_199_254_740_992.0,
            9_007_199_254_740_994.0,
            f64::MAX,
            f64::MIN_POSITIVE,
            1327308.0 * 1024.0,
            0.1,
            3.0e9 + 0.25,
        ];
        let ch = 7;
        let samples: Vec<Sample> = (0..300u64)
            .map(|i| {
                let vals: Vec<f64> = (0..ch)
                    .map(|c| match c {
                        0 => specials[rng.below(specials.len() as u64) as usize],
                        1 => (1 << 30) as f64 + (i / 50) as f64 * 4096.0, // a staircase
                        2 => f64::from_bits(rng.next_u64()),              // any bits at all
                        3 => (rng.next_u64() >> 11) as f64,               // big whole numbers
                        4 => -((rng.below(1000)) as f64),
                        5 => {
                            if i % 3 == 0 {
                                f64::NAN
                            } else {
                                i as f64
                            }
                        }
                        _ => rng.below(1_000_000) as f64 / 7.0,
                    })
                    .collect();
                Sample::from_values(i * 2 + 5, i * 10_000_000 + 3, &vals)
            })
            .collect();
        let rows = roundtrip(&samples, ch);
        crate::tests::assert_same_rows(&samples, &rows, true);
    }

    #[test]
    fn flat_and_stepping_series_cost_about_a_byte_a_value() {
        let ch = 30;
        let samples: Vec<Sample> = (0..100u64)
            .map(|i| {
                let vals: Vec<f64> = (0..ch)
                    .map(|c| 1.3e9 + (c as f64) * 4096.0 + (i / 40) as f64 * 262_144.0)
                    .collect();
                Sample::from_values(i, i * 10_000_000, &vals)
            })
            .collect();
        let block = SampleBlock::encode(&samples, ch).unwrap();
        let bytes = encode(&Frame::Samples(block)).unwrap();
        let per_value = bytes.len() as f64 / (100.0 * ch as f64);
        assert!(per_value < 1.6, "{per_value:.2} bytes per value");
    }

    #[test]
    fn inconsistent_blocks_are_errors() {
        let s = [
            Sample::from_values(0, 0, &[1.0, 2.0]),
            Sample::from_values(1, 10, &[3.0, 4.0]),
        ];
        let mut b = SampleBlock::encode(&s, 2).unwrap();
        b.values.0.pop();
        assert!(
            b.decode(|_, _, _| {})
                .unwrap_err()
                .contains("3 values for 2 samples")
        );
        let mut b = SampleBlock::encode(&s, 2).unwrap();
        b.values.0[2] = Code::Int(i64::MAX);
        assert!(b.decode(|_, _, _| {}).unwrap_err().contains("overflows"));
        let mut b = SampleBlock::encode(&s, 2).unwrap();
        b.channels = 0;
        assert!(b.decode(|_, _, _| {}).is_err());
        let mut b = SampleBlock::encode(&s, 2).unwrap();
        b.dt_ns.push(5);
        assert!(b.decode(|_, _, _| {}).is_err());
    }
}
