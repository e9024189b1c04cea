//! [`FlatArena`]: a fixed-capacity, 64-byte aligned, zero-initialised buffer.

use std::alloc::{self, Layout};
use std::fmt;
use std::marker::PhantomData;
use std::mem;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use super::records::{BatchSlot64, QueueOrder64};

/// Alignment of the first element of every [`FlatArena`]: one cache line on
/// x86-64 and most AArch64 cores.
pub const ARENA_ALIGN: usize = 64;

/// Types for which the all-zero bit pattern is a valid value, so a buffer
/// obtained from `alloc_zeroed` may be read as a slice of them.
///
/// # Safety
///
/// Implement only for `Copy` types that are not zero-sized and for which every
/// byte being zero is a valid value: integers, floats, and `repr(C)` structs
/// or arrays made only of such fields (padding included).
pub unsafe trait Zeroable: Copy + 'static {}

macro_rules! zeroable {
    ($($t:ty),* $(,)?) => {$(
        // SAFETY: a primitive integer or float, or a `repr(C)` record made only of
        // integer fields and byte arrays; all-zero is a valid value of each, and
        // none is zero-sized.
        unsafe impl Zeroable for $t {}
    )*};
}
zeroable!(
    u8,
    u16,
    u32,
    u64,
    i8,
    i16,
    i32,
    i64,
    f32,
    f64,
    QueueOrder64,
    BatchSlot64
);

/// Why an arena could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArenaError {
    /// A capacity of zero: an arena always holds at least one element.
    #[error("an arena needs a capacity of at least one element")]
    Empty,
    /// `len` elements of `elem_bytes` each overflow the address space.
    #[error("an arena of {len} elements of {elem_bytes} bytes is too large for this machine")]
    TooLarge { len: usize, elem_bytes: usize },
    /// The system allocator refused the request.
    #[error("out of memory: the system allocator refused {bytes} bytes")]
    OutOfMemory { bytes: usize },
}

/// A fixed-capacity flat buffer of `T`, zero-initialised, whose first element
/// is aligned to [`ARENA_ALIGN`] bytes.
///
/// The buffer is allocated exactly once, in [`FlatArena::new`], and freed on
/// drop: nothing here can grow, shrink or move it, so a pointer taken into it
/// stays valid for the arena's life and no operation after construction
/// touches the heap. It dereferences to a plain slice.
///
/// Ownership is that of a `Box<[T]>`: `Send`/`Sync` follow `T`.
pub struct FlatArena<T: Zeroable> {
    ptr: NonNull<T>,
    len: usize,
    layout: Layout,
    _owns: PhantomData<T>,
}

// SAFETY: `FlatArena<T>` uniquely owns its buffer, like `Box<[T]>`: moving it to
// another thread moves the `T`s, which is sound when `T: Send`.
unsafe impl<T: Zeroable + Send> Send for FlatArena<T> {}
// SAFETY: shared access only hands out `&[T]`, which is sound across threads when
// `T: Sync`; mutation requires `&mut FlatArena<T>`.
unsafe impl<T: Zeroable + Sync> Sync for FlatArena<T> {}

impl<T: Zeroable> FlatArena<T> {
    /// Allocates `len` zeroed elements, the first on a 64-byte boundary.
    pub fn new(len: usize) -> Result<Self, ArenaError> {
        if len == 0 {
            return Err(ArenaError::Empty);
        }
        let elem_bytes = mem::size_of::<T>();
        let layout = Layout::array::<T>(len)
            .and_then(|l| l.align_to(ARENA_ALIGN))
            .map_err(|_| ArenaError::TooLarge { len, elem_bytes })?;
        // Zeroable excludes zero-sized types, and len > 0.
        debug_assert!(layout.size() > 0);
        // SAFETY: `layout` has a non-zero size (len > 0 and `T` is not zero-sized,
        // both required above) and a valid power-of-two alignment.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw.cast::<T>()).ok_or(ArenaError::OutOfMemory {
            bytes: layout.size(),
        })?;
        Ok(Self {
            ptr,
            len,
            layout,
            _owns: PhantomData,
        })
    }

    /// Allocates `len` elements, each a copy of `value`.
    pub fn filled(len: usize, value: T) -> Result<Self, ArenaError> {
        let mut arena = Self::new(len)?;
        arena.fill(value);
        Ok(arena)
    }

    /// Number of elements (fixed at construction).
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: an arena holds at least one element.
    #[inline]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Size of the buffer in bytes, as allocated.
    #[inline]
    pub fn size_bytes(&self) -> usize {
        self.layout.size()
    }

    /// Address of the first element (aligned to [`ARENA_ALIGN`]).
    #[inline]
    pub fn as_ptr(&self) -> *const T {
        self.ptr.as_ptr()
    }

    /// The elements as a slice.
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: `ptr` points to one live allocation of `len` elements of `T`, aligned
        // for `T`, every element initialised (zeroed, valid by `Zeroable`, or written
        // since through `&mut`); the returned borrow is tied to `&self`, so no `&mut`
        // to the same memory can coexist with it.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The elements as a mutable slice.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as in `as_slice`; the borrow is tied to `&mut self`, so it is the only
        // reference to the buffer while it lives.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Zeroable> Drop for FlatArena<T> {
    fn drop(&mut self) {
        // SAFETY: `ptr` was returned by `alloc_zeroed(self.layout)` in `new`, has not been
        // freed (this is the only place that frees it, and drop runs once), and
        // `Zeroable` types are `Copy`, so no element needs dropping first.
        unsafe { alloc::dealloc(self.ptr.as_ptr().cast::<u8>(), self.layout) }
    }
}

impl<T: Zeroable> Deref for FlatArena<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Zeroable> DerefMut for FlatArena<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

impl<T: Zeroable> fmt::Debug for FlatArena<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlatArena")
            .field("elem", &std::any::type_name::<T>())
            .field("len", &self.len)
            .field("bytes", &self.layout.size())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_on_a_cache_line_and_zeroed() {
        for len in [1usize, 3, 8, 63, 64, 1000] {
            let a = FlatArena::<u16>::new(len).unwrap();
            assert_eq!(a.as_ptr() as usize % ARENA_ALIGN, 0, "len {len}");
            assert_eq!(a.len(), len);
            assert!(a.iter().all(|&v| v == 0));
            assert!(a.size_bytes() >= len * 2);
        }
        let r = FlatArena::<QueueOrder64>::new(5).unwrap();
        assert_eq!(r.as_ptr() as usize % 64, 0);
        assert!(r.iter().all(|o| *o == QueueOrder64::default()));
    }

    #[test]
    fn writes_are_read_back_and_the_buffer_never_moves() {
        let mut a = FlatArena::<i64>::new(100).unwrap();
        let before = a.as_ptr();
        for (i, v) in a.iter_mut().enumerate() {
            *v = i as i64 * 3 - 7;
        }
        a.as_mut_slice()[99] = i64::MAX;
        assert_eq!(a.as_ptr(), before);
        assert_eq!(a[0], -7);
        assert_eq!(a[98], 98 * 3 - 7);
        assert_eq!(a[99], i64::MAX);
        let moved = a; // moving the handle does not move the buffer
        assert_eq!(moved.as_ptr(), before);
    }

    #[test]
    fn filled_copies_the_value_everywhere() {
        let rec = QueueOrder64 {
            queue_position: 7,
            total_at_level: 50,
            ..QueueOrder64::default()
        };
        let a = FlatArena::filled(17, rec).unwrap();
        assert!(a.iter().all(|o| *o == rec));
    }

    #[test]
    fn refuses_empty_and_oversized_requests() {
        assert_eq!(FlatArena::<u8>::new(0).unwrap_err(), ArenaError::Empty);
        let err = FlatArena::<u64>::new(usize::MAX / 4).unwrap_err();
        assert!(
            matches!(err, ArenaError::TooLarge { elem_bytes: 8, .. }),
            "{err:?}"
        );
    }

    #[test]
    fn moves_across_threads() {
        let mut a = FlatArena::<u32>::new(16).unwrap();
        a[3] = 9;
        let sum = std::thread::spawn(move || a.iter().map(|&v| u64::from(v)).sum::<u64>())
            .join()
            .unwrap();
        assert_eq!(sum, 9);
    }
}
