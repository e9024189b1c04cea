//! The 64-byte records of the seed proposal. Plain data, no `unsafe` here; they
//! live in this module because [`super::Zeroable`] vouches for them.

use std::mem::{align_of, offset_of, size_of};

/// One order in a price-level queue, padded to exactly one cache line.
///
/// Layout (byte offsets): `id` 0, `price` 8, `size` 16, `queue_position` 20,
/// `total_at_level` 24, `side` 28, `order_type` 29, padding 30..32,
/// `timestamp_nanos` 32, `reserved` 40..64.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct QueueOrder64 {
    pub id: u64,
    pub price: u64,
    pub size: u32,
    pub queue_position: u32,
    pub total_at_level: u32,
    pub side: u8,
    pub order_type: u8,
    pub padding: [u8; 2],
    pub timestamp_nanos: u64,
    pub reserved: [u8; 24],
}

/// Header of one ingested batch, padded to exactly one cache line.
///
/// Layout (byte offsets): `batch_id` 0, `block_size` 8, `batch_size` 12,
/// `token_count` 16, `stride` 24, `timestamp_nanos` 32, `reserved` 40..64.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct BatchSlot64 {
    /// Sequence number of the batch, from 1.
    pub batch_id: u64,
    /// Tokens per row (T).
    pub block_size: u32,
    /// Rows per batch (B).
    pub batch_size: u32,
    /// B × T: tokens in each of the x and y buffers.
    pub token_count: u64,
    /// Elements between the starts of consecutive rows of x and y.
    pub stride: u64,
    /// When the batch was filled, in nanoseconds since its arena was built.
    pub timestamp_nanos: u64,
    pub reserved: [u8; 24],
}

const _: () = {
    assert!(size_of::<QueueOrder64>() == 64);
    assert!(align_of::<QueueOrder64>() == 64);
    assert!(offset_of!(QueueOrder64, price) == 8);
    assert!(offset_of!(QueueOrder64, size) == 16);
    assert!(offset_of!(QueueOrder64, queue_position) == 20);
    assert!(offset_of!(QueueOrder64, total_at_level) == 24);
    assert!(offset_of!(QueueOrder64, side) == 28);
    assert!(offset_of!(QueueOrder64, order_type) == 29);
    assert!(offset_of!(QueueOrder64, timestamp_nanos) == 32);
    assert!(offset_of!(QueueOrder64, reserved) == 40);

    assert!(size_of::<BatchSlot64>() == 64);
    assert!(align_of::<BatchSlot64>() == 64);
    assert!(offset_of!(BatchSlot64, block_size) == 8);
    assert!(offset_of!(BatchSlot64, batch_size) == 12);
    assert!(offset_of!(BatchSlot64, token_count) == 16);
    assert!(offset_of!(BatchSlot64, stride) == 24);
    assert!(offset_of!(BatchSlot64, timestamp_nanos) == 32);
    assert!(offset_of!(BatchSlot64, reserved) == 40);
};
