//! One frame's payload ([`Frame`]) and its encoding: the sample blocks, the
//! schema's extensions, MessagePack in and out.

use std::fmt;

use serde::de::{SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{ChannelSpec, DigestMark, Event, Footer, Header, MAX_CHANNELS, Sample};

use super::columns::{Code, ColumnBlock};

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
