//! Format v2's sample block: one coded column per channel.
//!
//! A column is a MessagePack list `[order, item, item, …]`. `order` (1 or 2)
//! says how whole numbers are coded; an item is an integer, a float, nil (no
//! reading), or a run `[count, item]` standing for `count` equal items.
//!
//! Decoding keeps two pieces of state: the last value read (`NaN` readings
//! skipped) and, with order 2, the last first difference. For each item:
//!
//! - nil: `NaN` (Rust's `f64::NAN`; any other NaN is a float item, so its
//!   sign and payload read back); the state is unchanged (a slow probe's gaps cost nothing and
//!   its next reading is still a difference from its last one);
//! - a float: that value; the difference is forgotten;
//! - an integer after a whole last value (|v| ≤ 2^53): with order 2 and a
//!   remembered difference `d`, the value is `last + d + item` and the new
//!   difference `d + item`; otherwise `last + item`, remembering `item`;
//! - an integer with no whole last value: the value itself.
//!
//! So a constant channel is one run of zeros with either order, and a steady
//! counter (or clock) is one run of zeros with order 2. Sequence numbers and
//! times are `u64` columns coded the same way with wrapping arithmetic, so
//! any `u64` reads back exactly.

use std::fmt;

use serde::de::{self, SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{MAX_SCHEMA_CHANNELS, Sample};

/// Most samples one v2 block may hold (the writer puts in at most
/// [`crate::BLOCK_SAMPLES`]); a block claiming more is damage.
pub const MAX_BLOCK_SAMPLES: u32 = 1024;

/// Largest magnitude stored as an exact integer (and as differences).
const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53

/// Whether `v` is stored as an integer: finite, whole, within 2^53, and not
/// −0 (which is stored as a float, so that it reads back as −0).
#[inline]
fn whole(v: f64) -> bool {
    v.is_finite() && v.fract() == 0.0 && v.abs() <= EXACT && !(v == 0.0 && v.is_sign_negative())
}

/// One coded value of a column (see the module docs); a writer keeps a
/// `Vec<Code>` as scratch between blocks ([`ColumnBlock::encode_into`]).
#[derive(Debug, Clone, Copy)]
pub enum Code {
    Int(i64),
    Float(f64),
    Nil,
}

impl PartialEq for Code {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Code::Int(a), Code::Int(b)) => a == b,
            (Code::Float(a), Code::Float(b)) => a.to_bits() == b.to_bits(),
            (Code::Nil, Code::Nil) => true,
            _ => false,
        }
    }
}

impl Code {
    /// Bytes MessagePack spends on it.
    fn size(self) -> usize {
        match self {
            Code::Nil => 1,
            Code::Float(f) if f64::from(f as f32).to_bits() == f.to_bits() => 5,
            Code::Float(_) => 9,
            Code::Int(i) => int_size(i),
        }
    }
}

fn int_size(i: i64) -> usize {
    match i {
        -32..=127 => 1,
        -128..=255 => 2,
        -32_768..=65_535 => 3,
        -2_147_483_648..=4_294_967_295 => 5,
        _ => 9,
    }
}

/// A stored item: a code, or a run of equal codes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Item {
    One(Code),
    Run(u32, Code),
}

/// A coded column: its order and its items.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Column {
    pub(super) order: u8,
    pub(super) items: Vec<Item>,
}

/// Codes for `values` with `order`.
fn codes_f64(values: impl Iterator<Item = f64>, order: u8, out: &mut Vec<Code>) {
    let (mut last, mut diff): (Option<f64>, Option<i64>) = (None, None);
    for v in values {
        let code = if v.to_bits() == f64::NAN.to_bits() {
            Code::Nil
        } else if v.is_nan() {
            // Any other NaN keeps its bits (sign and payload) as a float.
            diff = None;
            Code::Float(v)
        } else if whole(v) && last.is_some_and(whole) {
            let d = v as i64 - last.unwrap_or(0.0) as i64;
            let code = match diff {
                Some(pd) if order == 2 => Code::Int(d - pd),
                _ => Code::Int(d),
            };
            diff = Some(d);
            code
        } else if whole(v) {
            diff = None;
            Code::Int(v as i64)
        } else {
            diff = None;
            Code::Float(v)
        };
        if !v.is_nan() {
            last = Some(v);
        }
        out.push(code);
    }
}

/// Codes for `u64` values (wrapping differences), the first one absolute.
fn codes_u64(values: impl Iterator<Item = u64>, order: u8, out: &mut Vec<Code>) {
    let (mut last, mut diff): (Option<u64>, Option<i64>) = (None, None);
    for v in values {
        let code = match (last, diff) {
            (None, _) => Code::Int(v as i64),
            (Some(p), Some(pd)) if order == 2 => {
                let d = v.wrapping_sub(p) as i64;
                diff = Some(d);
                Code::Int(d.wrapping_sub(pd))
            }
            (Some(p), _) => {
                let d = v.wrapping_sub(p) as i64;
                diff = Some(d);
                Code::Int(d)
            }
        };
        last = Some(v);
        out.push(code);
    }
}

/// Calls `emit(item, bytes)` for the items that code `codes`: runs of equal
/// codes collapsed where that is shorter.
fn runs(codes: &[Code], mut emit: impl FnMut(Item, usize)) {
    let mut i = 0;
    while i < codes.len() {
        let c = codes[i];
        let mut n = 1;
        while i + n < codes.len() && codes[i + n] == c {
            n += 1;
        }
        let as_run = 1 + int_size(n as i64) + c.size();
        if n > 1 && as_run < n * c.size() {
            emit(Item::Run(n as u32, c), as_run);
        } else {
            for _ in 0..n {
                emit(Item::One(c), c.size());
            }
        }
        i += n;
    }
}

impl Column {
    /// Refills the column with the shorter of the two orders for the codes
    /// `code` makes. Reuses the column's and `scratch`'s memory: a writer
    /// that keeps both allocates nothing per block once they have grown.
    fn fill_best(&mut self, code: impl Fn(u8, &mut Vec<Code>), scratch: &mut Vec<Code>) {
        let mut best = (1u8, usize::MAX);
        for order in [1u8, 2] {
            scratch.clear();
            code(order, scratch);
            let mut size = 1; // the order itself
            runs(scratch, |_, bytes| size += bytes);
            if size < best.1 {
                best = (order, size);
            }
        }
        // Scratch holds order 2's codes; make the winner's again if it was 1.
        if best.0 == 1 {
            scratch.clear();
            code(1, scratch);
        }
        self.order = best.0;
        self.items.clear();
        let items = &mut self.items;
        runs(scratch, |item, _| items.push(item));
    }

    /// Calls `each(count, code)` for every item (a run of `count` equal
    /// codes), refusing a column of another order or that does not hold
    /// exactly `n` values, before a count would take it past `n`.
    fn walk(
        &self,
        n: usize,
        mut each: impl FnMut(usize, Code) -> Result<(), String>,
    ) -> Result<(), String> {
        if self.order != 1 && self.order != 2 {
            return Err(format!("column order {}", self.order));
        }
        let mut seen = 0usize;
        for item in &self.items {
            let (count, code) = match *item {
                Item::One(c) => (1, c),
                Item::Run(k, c) => (k as usize, c),
            };
            if count > n - seen {
                return Err(format!("a column of more than {n} values"));
            }
            seen += count;
            each(count, code)?;
        }
        if seen != n {
            return Err(format!("a column of {seen} values for {n} samples"));
        }
        Ok(())
    }

    /// Expands the column into `n` codes.
    fn expand(&self, n: usize, out: &mut Vec<Code>) -> Result<(), String> {
        out.clear();
        self.walk(n, |count, code| {
            out.extend(std::iter::repeat_n(code, count));
            Ok(())
        })
    }

    /// Decodes the column into `n` values, item by item (runs are not
    /// expanded into codes first), refusing a column that does not hold
    /// exactly `n`.
    fn decode_f64(&self, n: usize, out: &mut Vec<f64>) -> Result<(), String> {
        out.clear();
        // The last value read (NaN readings skipped) and whether it is
        // whole, kept rather than recomputed per value.
        let (mut last, mut last_whole, mut diff) = (0.0f64, false, None::<i64>);
        self.walk(n, |count, code| {
            match code {
                Code::Nil => out.extend(std::iter::repeat_n(f64::NAN, count)),
                Code::Float(f) => {
                    diff = None;
                    if !f.is_nan() {
                        last = f;
                        last_whole = whole(f);
                    }
                    out.extend(std::iter::repeat_n(f, count));
                }
                Code::Int(i) => {
                    for _ in 0..count {
                        let v = if last_whole {
                            let d = match diff {
                                Some(pd) if self.order == 2 => pd.checked_add(i),
                                _ => Some(i),
                            }
                            .ok_or("a difference overflows")?;
                            diff = Some(d);
                            (last as i64).checked_add(d).ok_or("a value overflows")? as f64
                        } else {
                            diff = None;
                            i as f64
                        };
                        // An i64 as f64 is finite, whole and never −0.
                        last = v;
                        last_whole = v.abs() <= EXACT;
                        out.push(v);
                    }
                }
            }
            Ok(())
        })
    }

    fn decode_u64(
        &self,
        n: usize,
        scratch: &mut Vec<Code>,
        out: &mut Vec<u64>,
    ) -> Result<(), String> {
        self.expand(n, scratch)?;
        out.clear();
        let (mut last, mut diff): (Option<u64>, Option<i64>) = (None, None);
        for &code in scratch.iter() {
            let Code::Int(i) = code else {
                return Err("a sequence number or time that is not an integer".into());
            };
            let v = match (last, diff) {
                (None, _) => i as u64,
                (Some(p), Some(pd)) if self.order == 2 => {
                    let d = pd.wrapping_add(i);
                    diff = Some(d);
                    p.wrapping_add(d as u64)
                }
                (Some(p), _) => {
                    diff = Some(i);
                    p.wrapping_add(i as u64)
                }
            };
            last = Some(v);
            out.push(v);
        }
        Ok(())
    }
}

/// Consecutive samples of one stream, column by column (format v2).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ColumnBlock {
    /// Samples in the block.
    pub samples: u32,
    /// Sequence numbers and times (ns since the start), as `u64` columns.
    pub(super) seq: Column,
    pub(super) t_ns: Column,
    /// One column per channel of the schema when the block was written.
    pub(super) values: Vec<Column>,
}

impl ColumnBlock {
    /// Codes `samples` (all with `channels` values, channel `i` in slot `i`)
    /// as one block; `None` if empty.
    pub fn encode(samples: &[Sample], channels: usize) -> Option<Self> {
        let slots: Vec<Option<u16>> = (0..channels).map(|i| Some(i as u16)).collect();
        let mut block = Self::default();
        block
            .encode_into(samples, &slots, &mut Vec::new())
            .then_some(block)
    }

    /// Codes `samples` into this block, reusing its memory and `scratch`'s
    /// (the recorder keeps one block and allocates nothing per block once its
    /// buffers have grown); false if there are no samples. The block has a
    /// column per entry of `slots` (per channel of the schema): the values in
    /// that sample slot, or nothing (`NaN`) for an ended channel.
    pub fn encode_into(
        &mut self,
        samples: &[Sample],
        slots: &[Option<u16>],
        scratch: &mut Vec<Code>,
    ) -> bool {
        if samples.is_empty() {
            return false;
        }
        self.samples = samples.len() as u32;
        self.seq.fill_best(
            |o, out| codes_u64(samples.iter().map(|s| s.seq), o, out),
            scratch,
        );
        self.t_ns.fill_best(
            |o, out| codes_u64(samples.iter().map(|s| s.t_ns), o, out),
            scratch,
        );
        self.values.truncate(slots.len());
        self.values.resize_with(slots.len(), Column::default);
        for (column, slot) in self.values.iter_mut().zip(slots) {
            let slot = slot.map(usize::from);
            column.fill_best(
                |o, out| {
                    codes_f64(
                        samples.iter().map(|s| {
                            slot.and_then(|c| s.values().get(c).copied())
                                .unwrap_or(f64::NAN)
                        }),
                        o,
                        out,
                    )
                },
                scratch,
            );
        }
        true
    }

    /// Channels (columns) in the block.
    pub fn channels(&self) -> usize {
        self.values.len()
    }

    pub fn len(&self) -> usize {
        self.samples as usize
    }

    pub fn is_empty(&self) -> bool {
        self.samples == 0
    }

    /// Decodes the block, calling `row(seq, t_ns, values)` for each sample.
    /// Checks the whole block first: on an error `row` is never called.
    pub fn decode(&self, mut row: impl FnMut(u64, u64, &[f64])) -> Result<(), String> {
        let (mut seq, mut t, mut v) = (Vec::new(), Vec::new(), Vec::new());
        self.decode_into(&mut seq, &mut t, &mut v)?;
        for (i, vals) in v.chunks_exact(self.values.len()).enumerate() {
            row(seq[i], t[i], vals);
        }
        Ok(())
    }

    /// Decodes the block into sequence numbers, times and row-major values
    /// (`channels()` a sample), appended to what the vectors hold. On an
    /// error they are left as they were.
    pub fn decode_into(
        &self,
        seq: &mut Vec<u64>,
        t: &mut Vec<u64>,
        values: &mut Vec<f64>,
    ) -> Result<(), String> {
        if self.samples == 0 || self.samples > MAX_BLOCK_SAMPLES {
            return Err(format!(
                "sample block: {} samples (1 to {MAX_BLOCK_SAMPLES})",
                self.samples
            ));
        }
        let ch = self.values.len();
        if ch == 0 || ch > MAX_SCHEMA_CHANNELS {
            return Err(format!("sample block: {ch} channels"));
        }
        let n = self.samples as usize;
        let mut scratch = Vec::with_capacity(n);
        let (mut s, mut ts) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let block = |e: String| format!("sample block: {e}");
        self.seq
            .decode_u64(n, &mut scratch, &mut s)
            .map_err(block)?;
        self.t_ns
            .decode_u64(n, &mut scratch, &mut ts)
            .map_err(block)?;
        let base = values.len();
        values.resize(base + n * ch, 0.0);
        let mut col = Vec::with_capacity(n);
        for (c, column) in self.values.iter().enumerate() {
            if let Err(e) = column.decode_f64(n, &mut col) {
                values.truncate(base);
                return Err(format!("sample block, channel {c}: {e}"));
            }
            for (slot, &x) in values[base + c..].iter_mut().step_by(ch).zip(&col) {
                *slot = x;
            }
        }
        seq.extend_from_slice(&s);
        t.extend_from_slice(&ts);
        Ok(())
    }
}

impl Serialize for Code {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Code::Int(i) => s.serialize_i64(i),
            // Half the bytes when the value survives the trip through f32.
            Code::Float(f) if f64::from(f as f32).to_bits() == f.to_bits() => {
                s.serialize_f32(f as f32)
            }
            Code::Float(f) => s.serialize_f64(f),
            Code::Nil => s.serialize_unit(),
        }
    }
}

impl Serialize for Item {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Item::One(c) => c.serialize(s),
            Item::Run(n, c) => (n, c).serialize(s),
        }
    }
}

impl Serialize for Column {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.items.len() + 1))?;
        seq.serialize_element(&self.order)?;
        for item in &self.items {
            seq.serialize_element(item)?;
        }
        seq.end()
    }
}

/// Reads one code: an integer, a float or nil.
struct CodeVisitor;

impl<'de> Visitor<'de> for CodeVisitor {
    type Value = Code;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an integer, a float or nil")
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Code, E> {
        Ok(Code::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Code, E> {
        i64::try_from(v)
            .map(Code::Int)
            .map_err(|_| E::custom("integer value out of range"))
    }
    fn visit_f32<E: de::Error>(self, v: f32) -> Result<Code, E> {
        Ok(Code::Float(f64::from(v)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Code, E> {
        Ok(Code::Float(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Code, E> {
        Ok(Code::Nil)
    }
    fn visit_none<E: de::Error>(self) -> Result<Code, E> {
        Ok(Code::Nil)
    }
}

impl<'de> Deserialize<'de> for Code {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(CodeVisitor)
    }
}

/// Reads one item: a code, or a list (a run, whose inner item must be a code).
struct ItemVisitor {
    in_run: bool,
}

impl<'de> Visitor<'de> for ItemVisitor {
    type Value = Item;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an integer, a float, nil or a run [count, code]")
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Item, E> {
        CodeVisitor.visit_i64(v).map(Item::One)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Item, E> {
        CodeVisitor.visit_u64(v).map(Item::One)
    }
    fn visit_f32<E: de::Error>(self, v: f32) -> Result<Item, E> {
        CodeVisitor.visit_f32(v).map(Item::One)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Item, E> {
        CodeVisitor.visit_f64(v).map(Item::One)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Item, E> {
        Ok(Item::One(Code::Nil))
    }
    fn visit_none<E: de::Error>(self) -> Result<Item, E> {
        Ok(Item::One(Code::Nil))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Item, A::Error> {
        if self.in_run {
            return Err(de::Error::custom("a run inside a run"));
        }
        let n: u32 = seq
            .next_element()?
            .ok_or_else(|| de::Error::custom("a run without a count"))?;
        let inner = seq
            .next_element_seed(ItemSeed { in_run: true })?
            .ok_or_else(|| de::Error::custom("a run without a code"))?;
        if seq.next_element::<de::IgnoredAny>()?.is_some() {
            return Err(de::Error::custom("a run of more than two parts"));
        }
        match inner {
            Item::One(c) if n > 0 => Ok(Item::Run(n, c)),
            Item::One(_) => Err(de::Error::custom("a run of 0")),
            Item::Run(..) => Err(de::Error::custom("a run inside a run")),
        }
    }
}

struct ItemSeed {
    in_run: bool,
}

impl<'de> de::DeserializeSeed<'de> for ItemSeed {
    type Value = Item;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Item, D::Error> {
        d.deserialize_any(ItemVisitor {
            in_run: self.in_run,
        })
    }
}

impl<'de> Deserialize<'de> for Column {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Column;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a coded column [order, items…]")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Column, A::Error> {
                let order: u8 = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::custom("a column without its order"))?;
                // Trust the length hint only so far: the frame limit bounds the input.
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 12));
                while let Some(item) = seq.next_element_seed(ItemSeed { in_run: false })? {
                    items.push(item);
                }
                Ok(Column { order, items })
            }
        }
        d.deserialize_seq(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::SplitMix64;

    fn roundtrip(samples: &[Sample], ch: usize) -> (Vec<(u64, u64, Vec<f64>)>, usize) {
        let block = ColumnBlock::encode(samples, ch).unwrap();
        let bytes = rmp_serde::to_vec_named(&block).unwrap();
        let back: ColumnBlock = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(back, block);
        let mut rows = Vec::new();
        back.decode(|seq, t, v| rows.push((seq, t, v.to_vec())))
            .unwrap();
        (rows, bytes.len())
    }

    #[test]
    fn adversarial_values_read_back_exactly() {
        let mut rng = SplitMix64::new(17);
        let specials = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::from_bits(0x7ff8_dead_beef_0001), // a NaN with a payload
            f64::from_bits(0xfff8_0000_0000_0000), // x86's 0/0: a negative NaN
            f64::from_bits(0x7ff0_0000_0000_0001), // a signalling NaN
            -5e-324,
            f64::MIN_POSITIVE,
            5e-324, // the smallest subnormal
            2.2e-308,
            EXACT,
            -EXACT,
            EXACT + 2.0,
            f64::MAX,
            f64::MIN,
            i64::MAX as f64,
            0.1,
        ];
        let ch = 8;
        let samples: Vec<Sample> = (0..256u64)
            .map(|i| {
                let vals: Vec<f64> = (0..ch)
                    .map(|c| match c {
                        0 => specials[rng.below(specials.len() as u64) as usize],
                        1 => f64::from_bits(rng.next_u64()),
                        2 => 7.0, // constant
                        3 => {
                            if i % 2 == 0 {
                                EXACT
                            } else {
                                -EXACT
                            }
                        } // alternating extremes
                        4 => (i * 1_000_003) as f64, // a steady counter
                        5 => {
                            if i % 50 == 0 {
                                (i * 4096) as f64
                            } else {
                                f64::NAN
                            }
                        } // a slow probe
                        6 => {
                            if i % 3 == 0 {
                                1e300
                            } else {
                                -1e300
                            }
                        } // huge jumps
                        _ => (rng.next_u64() >> 11) as f64,
                    })
                    .collect();
                // Sequence numbers and times near the top of u64: wrapping must be exact.
                Sample::from_values(u64::MAX - 300 + i, i.wrapping_mul(0x1234_5678_9abc), &vals)
            })
            .collect();
        let (rows, _) = roundtrip(&samples, ch);
        crate::tests::assert_same_rows(&samples, &rows, false);
    }

    #[test]
    fn still_and_steady_channels_cost_a_few_bytes_a_block() {
        // 50 samples (half a second at 100 Hz) of 30 channels: constant, a
        // steady counter, a staircase and a clock with a fixed period.
        let ch = 30;
        let samples: Vec<Sample> = (0..50u64)
            .map(|i| {
                let vals: Vec<f64> = (0..ch)
                    .map(|c| match c % 3 {
                        0 => 1.3e9 + c as f64 * 4096.0,
                        1 => (i * 4_000_000) as f64,
                        _ => 1.3e9 + (i / 20) as f64 * 262_144.0,
                    })
                    .collect();
                Sample::from_values(i, i * 10_000_000, &vals)
            })
            .collect();
        let (_, bytes) = roundtrip(&samples, ch);
        let per_channel = bytes as f64 / ch as f64;
        assert!(
            per_channel < 20.0,
            "{per_channel:.1} bytes per channel per block"
        );
    }

    #[test]
    fn hostile_blocks_are_errors_not_allocations() {
        let s = [
            Sample::from_values(0, 0, &[1.0, 2.0]),
            Sample::from_values(1, 10, &[3.0, 4.0]),
        ];
        let good = ColumnBlock::encode(&s, 2).unwrap();
        let mut b = good.clone();
        b.samples = 3;
        assert!(
            b.decode(|_, _, _| panic!("no rows"))
                .unwrap_err()
                .contains("values for 3")
        );
        let mut b = good.clone();
        b.samples = u32::MAX;
        assert!(b.decode(|_, _, _| panic!("no rows")).is_err());
        // A run that claims four billion values is refused before it is expanded.
        let mut b = good.clone();
        b.values[0].items = vec![Item::Run(u32::MAX, Code::Int(0))];
        assert!(
            b.decode(|_, _, _| panic!("no rows"))
                .unwrap_err()
                .contains("more than 2")
        );
        let mut b = good.clone();
        b.values[1].order = 7;
        assert!(b.decode(|_, _, _| panic!("no rows")).is_err());
        let mut b = good.clone();
        b.values[0].items = vec![Item::One(Code::Int(1)), Item::One(Code::Int(i64::MAX))];
        assert!(
            b.decode(|_, _, _| panic!("no rows"))
                .unwrap_err()
                .contains("overflows")
        );
        let mut b = good;
        b.values.clear();
        assert!(b.decode(|_, _, _| panic!("no rows")).is_err());
        // Runs inside runs and empty runs do not decode at all.
        for bad in [
            &[0x92, 0x01, 0x92, 0x02, 0x92, 0x02, 0x00][..], // [1, [2, [2, 0]]]
            &[0x92, 0x01, 0x92, 0x00, 0x05][..],             // [1, [0, 5]]
        ] {
            assert!(rmp_serde::from_slice::<Column>(bad).is_err(), "{bad:x?}");
        }
    }
}
