//! A direct reader of the frames in a pack: the same MessagePack the serde
//! path reads, parsed from the byte slice without serde's per-value
//! dispatch, which took about 40 % of opening a week-long recording.
//!
//! Only sample blocks laid out as this build writes them are taken here
//! (`{"block": {"samples", "seq", "t_ns", "values"}}`, in that order); any
//! other frame, or a block laid out otherwise (a later version's extra
//! field), goes to serde, which stays the reference: where this reader
//! returns a block, serde returns the same one (a test checks on random and
//! damaged input).

use serde::Deserialize as _;

use super::columns::{Code, Column, ColumnBlock, Item};
use super::frame::Frame;

/// A cursor over MessagePack bytes.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn u8(&mut self) -> Option<u8> {
        let v = *self.b.get(self.at)?;
        self.at += 1;
        Some(v)
    }

    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let s = self.b.get(self.at..self.at + N)?;
        self.at += N;
        s.try_into().ok()
    }

    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }

    /// An integer of any width as i128 (wide enough for every marker).
    fn int_of(&mut self, m: u8) -> Option<i128> {
        Some(match m {
            0x00..=0x7f => i128::from(m),
            0xe0..=0xff => i128::from(m as i8),
            0xcc => i128::from(self.u8()?),
            0xcd => i128::from(u16::from_be_bytes(self.take()?)),
            0xce => i128::from(u32::from_be_bytes(self.take()?)),
            0xcf => i128::from(u64::from_be_bytes(self.take()?)),
            0xd0 => i128::from(self.u8()? as i8),
            0xd1 => i128::from(i16::from_be_bytes(self.take()?)),
            0xd2 => i128::from(i32::from_be_bytes(self.take()?)),
            0xd3 => i128::from(i64::from_be_bytes(self.take()?)),
            _ => return None,
        })
    }

    fn int(&mut self) -> Option<i128> {
        let m = self.u8()?;
        self.int_of(m)
    }

    fn array_len(&mut self) -> Option<usize> {
        Some(match self.u8()? {
            m @ 0x90..=0x9f => usize::from(m & 0x0f),
            0xdc => usize::from(u16::from_be_bytes(self.take()?)),
            0xdd => u32::from_be_bytes(self.take()?) as usize,
            _ => return None,
        })
    }

    fn map_len(&mut self) -> Option<usize> {
        Some(match self.u8()? {
            m @ 0x80..=0x8f => usize::from(m & 0x0f),
            0xde => usize::from(u16::from_be_bytes(self.take()?)),
            0xdf => u32::from_be_bytes(self.take()?) as usize,
            _ => return None,
        })
    }

    fn str(&mut self) -> Option<&'a [u8]> {
        let n = match self.u8()? {
            m @ 0xa0..=0xbf => usize::from(m & 0x1f),
            0xd9 => usize::from(self.u8()?),
            0xda => usize::from(u16::from_be_bytes(self.take()?)),
            _ => return None,
        };
        self.bytes(n)
    }

    fn key(&mut self, want: &[u8]) -> Option<()> {
        (self.str()? == want).then_some(())
    }

    /// A code: an integer within i64, a float, or nil.
    fn code_of(&mut self, m: u8) -> Option<Code> {
        Some(match m {
            0xc0 => Code::Nil,
            0xca => Code::Float(f64::from(f32::from_be_bytes(self.take()?))),
            0xcb => Code::Float(f64::from_be_bytes(self.take()?)),
            _ => Code::Int(i64::try_from(self.int_of(m)?).ok()?),
        })
    }

    fn item(&mut self) -> Option<Item> {
        let m = self.u8()?;
        // Small differences, the common case, first.
        if m < 0x80 {
            return Some(Item::One(Code::Int(i64::from(m))));
        }
        if m >= 0xe0 {
            return Some(Item::One(Code::Int(i64::from(m as i8))));
        }
        if (0x90..=0x9f).contains(&m) || m == 0xdc || m == 0xdd {
            self.at -= 1;
            if self.array_len()? != 2 {
                return None;
            }
            let n = u32::try_from(self.int()?).ok().filter(|&n| n > 0)?;
            let m = self.u8()?;
            return Some(Item::Run(n, self.code_of(m)?));
        }
        Some(Item::One(self.code_of(m)?))
    }

    fn column(&mut self) -> Option<Column> {
        let n = self.array_len()?.checked_sub(1)?;
        let order = u8::try_from(self.int()?).ok()?;
        // Every item takes at least a byte: a length beyond what is left is damage.
        if n > self.b.len() - self.at {
            return None;
        }
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(self.item()?);
        }
        Some(Column { order, items })
    }

    fn block(&mut self) -> Option<ColumnBlock> {
        if self.map_len()? != 4 {
            return None;
        }
        self.key(b"samples")?;
        let samples = u32::try_from(self.int()?).ok()?;
        self.key(b"seq")?;
        let seq = self.column()?;
        self.key(b"t_ns")?;
        let t_ns = self.column()?;
        self.key(b"values")?;
        let n = self.array_len()?;
        if n > self.b.len() - self.at {
            return None;
        }
        let mut values = Vec::with_capacity(n);
        for _ in 0..n {
            values.push(self.column()?);
        }
        Some(ColumnBlock {
            samples,
            seq,
            t_ns,
            values,
        })
    }

    /// A block frame `{"block": …}` at the cursor, or `None` (the cursor
    /// is then anywhere).
    fn block_frame(&mut self) -> Option<ColumnBlock> {
        if self.map_len()? != 1 {
            return None;
        }
        self.key(b"block")?;
        self.block()
    }
}

/// The frames of an inflated pack (a MessagePack list of frames).
pub(super) fn frames(raw: &[u8]) -> Result<Vec<Frame>, String> {
    let mut c = Cursor { b: raw, at: 0 };
    let Some(n) = c.array_len() else {
        return rmp_serde::from_slice(raw).map_err(|e| e.to_string());
    };
    // Every frame takes at least a byte.
    if n > raw.len() {
        return Err(format!("a pack of {n} frames in {} bytes", raw.len()));
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let start = c.at;
        if let Some(b) = c.block_frame() {
            out.push(Frame::Block(b));
            continue;
        }
        let mut rest = raw.get(start..).unwrap_or_default();
        let before = rest.len();
        let f = Frame::deserialize(&mut rmp_serde::Deserializer::new(&mut rest))
            .map_err(|e| e.to_string())?;
        c.at = start + (before - rest.len());
        out.push(f);
    }
    Ok(out)
}

/// The serde path alone, for the tests to hold [`frames`] to.
#[cfg(test)]
pub(super) fn block_by_serde(raw: &[u8]) -> Option<ColumnBlock> {
    match rmp_serde::from_slice::<Frame>(raw) {
        Ok(Frame::Block(b)) => Some(b),
        _ => None,
    }
}

#[cfg(test)]
pub(super) fn block_fast(raw: &[u8]) -> Option<ColumnBlock> {
    Cursor { b: raw, at: 0 }.block_frame()
}
