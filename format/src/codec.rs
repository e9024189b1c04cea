//! Frames, and the coding of sample values: v1's row-major deltas
//! ([`SampleBlock`]) and v2's columns ([`ColumnBlock`], in `columns.rs`).

mod columns;
mod fast;
mod frame;
mod pack;

pub use columns::{Code, ColumnBlock};
#[cfg(test)]
pub use frame::encode;
pub use frame::{ChannelsEnded, Frame, Packed, SampleBlock, SchemaExtension, decode, encode_into};
pub use pack::Packer;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Sample;
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
