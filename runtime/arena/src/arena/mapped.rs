//! A token file (nanoGPT's `train.bin`: little-endian `u16`s, nothing else)
//! mapped read-only into memory and seen as `&[u16]` without copying.

use std::fs::File;

use memmap2::{Advice, Mmap, MmapMut};

/// Why a token file could not be mapped.
#[derive(Debug, thiserror::Error)]
pub enum MapError {
    // The cause is in the message, not also a `source()`.
    #[error("cannot map the file: {0}")]
    Io(std::io::Error),
    #[error("the file is empty")]
    Empty,
    #[error("the file has {bytes} bytes, an odd number: it cannot hold 16-bit tokens")]
    OddLength { bytes: u64 },
    #[error("the mapping is not aligned for 16-bit tokens")]
    Misaligned,
    #[error("token files are little-endian and this host is big-endian")]
    BigEndianHost,
}

impl From<std::io::Error> for MapError {
    fn from(e: std::io::Error) -> Self {
        MapError::Io(e)
    }
}

/// A read-only memory map of a token file.
///
/// The file must not be truncated by another process while it is mapped:
/// reading a page past a shrunken end raises SIGBUS. That is the same
/// contract as `numpy.memmap`, which nanoGPT uses for the same files.
#[derive(Debug)]
pub struct MappedTokens {
    map: Mmap,
    len: usize,
}

/// Maps `file` read-only and checks that it holds whole little-endian `u16`s.
pub fn map_tokens(file: &File) -> Result<MappedTokens, MapError> {
    if cfg!(target_endian = "big") {
        return Err(MapError::BigEndianHost);
    }
    let bytes = file.metadata()?.len();
    if bytes == 0 {
        return Err(MapError::Empty);
    }
    if bytes % 2 != 0 {
        return Err(MapError::OddLength { bytes });
    }
    // SAFETY: the map is read-only and private to this process. Its soundness also
    // needs the file not to be truncated or rewritten under us while mapped; that is
    // documented on `MappedTokens` as the caller's contract (as for numpy.memmap).
    let map = unsafe { Mmap::map(file)? };
    let len = view_le_u16(&map)?.len();
    Ok(MappedTokens { map, len })
}

/// `len` tokens from `next`, in anonymous memory of their own. With `huge`,
/// the kernel is asked to back it with huge pages (transparent huge pages,
/// `madvise`), before anything is written to it: random rows of a corpus
/// spread over thousands of 4 KiB pages miss the TLB on almost every row,
/// and 2 MiB pages cover it with a few dozen entries. The kernel may refuse
/// (THP off, or no huge page free): the tokens are the same either way.
pub fn anon_tokens(
    len: usize,
    huge: bool,
    mut next: impl FnMut() -> u16,
) -> Result<MappedTokens, MapError> {
    if len == 0 {
        return Err(MapError::Empty);
    }
    let mut map = MmapMut::map_anon(len * 2)?;
    if huge {
        // A hint: refused where the kernel has no THP, which changes nothing.
        let _ = map.advise(Advice::HugePage);
    }
    for pair in map.chunks_exact_mut(2) {
        pair.copy_from_slice(&next().to_le_bytes());
    }
    let map = map.make_read_only()?;
    let len = view_le_u16(&map)?.len();
    Ok(MappedTokens { map, len })
}

impl MappedTokens {
    /// The tokens, in file order.
    #[inline]
    pub fn tokens(&self) -> &[u16] {
        // SAFETY: `map_tokens` checked through `view_le_u16` that the mapping starts on a
        // 2-byte boundary and holds exactly `len` u16s; any bit pattern is a valid u16,
        // the map is immutable and lives as long as the returned borrow of `self`.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().cast::<u16>(), self.len) }
    }
}

/// Sees `bytes` as `u16`s in place; the caller has checked it is little-endian data on
/// a little-endian host. Fails unless `bytes` is 2-byte aligned with an even length.
fn view_le_u16(bytes: &[u8]) -> Result<&[u16], MapError> {
    // SAFETY: every bit pattern is a valid u16, and `align_to` only puts correctly
    // aligned, in-bounds elements in the middle slice.
    let (head, mid, tail) = unsafe { bytes.align_to::<u16>() };
    if !head.is_empty() {
        return Err(MapError::Misaligned);
    }
    if !tail.is_empty() {
        return Err(MapError::OddLength {
            bytes: bytes.len() as u64,
        });
    }
    Ok(mid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A 64-byte aligned byte buffer holding `words` as little-endian bytes.
    fn le_bytes(words: &[u16]) -> crate::arena::FlatArena<u8> {
        let mut buf = crate::arena::FlatArena::<u8>::new(words.len() * 2 + 2).unwrap();
        for (pair, w) in buf.chunks_exact_mut(2).zip(words) {
            pair.copy_from_slice(&w.to_le_bytes());
        }
        buf
    }

    #[test]
    fn view_reads_little_endian_words_in_place() {
        let words = [0x0102u16, 0xA0B0, 7];
        let buf = le_bytes(&words);
        let view = view_le_u16(&buf[..6]).unwrap();
        assert_eq!(view, &words);
        assert_eq!(view.as_ptr().cast::<u8>(), buf.as_ptr(), "no copy");
    }

    #[test]
    fn view_rejects_misalignment_and_odd_lengths() {
        let buf = le_bytes(&[1, 2, 3]);
        assert!(matches!(view_le_u16(&buf[1..7]), Err(MapError::Misaligned)));
        assert!(matches!(
            view_le_u16(&buf[..7]),
            Err(MapError::OddLength { bytes: 7 })
        ));
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot mmap")]
    fn anonymous_tokens_hold_what_was_written_with_or_without_huge_pages() {
        for huge in [false, true] {
            let mut i = 0u16;
            let t = anon_tokens(5000, huge, || {
                i = i.wrapping_add(7);
                i
            })
            .unwrap();
            assert_eq!(t.tokens().len(), 5000);
            assert!(
                t.tokens()
                    .iter()
                    .enumerate()
                    .all(|(k, &v)| v == (k as u16 + 1) * 7)
            );
        }
        assert!(matches!(anon_tokens(0, true, || 0), Err(MapError::Empty)));
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot mmap files")]
    fn maps_a_token_file() {
        let path = std::env::temp_dir().join(format!("flatline-map-{}.bin", std::process::id()));
        let tokens: Vec<u16> = (0..1000u16).map(|i| i.wrapping_mul(257)).collect();
        let mut f = File::create(&path).unwrap();
        for t in &tokens {
            f.write_all(&t.to_le_bytes()).unwrap();
        }
        drop(f);
        let mapped = map_tokens(&File::open(&path).unwrap()).unwrap();
        assert_eq!(mapped.tokens(), &tokens[..]);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot open files")]
    fn refuses_empty_and_odd_files() {
        let dir = std::env::temp_dir();
        let empty = dir.join(format!("flatline-map-empty-{}.bin", std::process::id()));
        std::fs::write(&empty, b"").unwrap();
        assert!(matches!(
            map_tokens(&File::open(&empty).unwrap()),
            Err(MapError::Empty)
        ));
        let odd = dir.join(format!("flatline-map-odd-{}.bin", std::process::id()));
        std::fs::write(&odd, b"abc").unwrap();
        assert!(matches!(
            map_tokens(&File::open(&odd).unwrap()),
            Err(MapError::OddLength { bytes: 3 })
        ));
        std::fs::remove_file(empty).unwrap();
        std::fs::remove_file(odd).unwrap();
    }
}
