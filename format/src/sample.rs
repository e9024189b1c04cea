//! [`Sample`]: one reading of every channel at one moment.

/// Most channels one [`Sample`] can carry.
pub const MAX_CHANNELS: usize = 128;

/// One reading of every channel of a [`Schema`](crate::Schema) at one moment.
///
/// Fixed-size and `Copy`, so sending it through a bounded channel never
/// touches the heap. A value is `NaN` when its channel had no reading at this
/// moment (a slower probe between its readings, a failed read).
#[derive(Clone, Copy)]
pub struct Sample {
    /// Sampler tick, from 0. Ticks whose sample was dropped leave gaps.
    pub seq: u64,
    /// Monotonic time since the sampler started, in nanoseconds.
    pub t_ns: u64,
    len: u16,
    values: [f64; MAX_CHANNELS],
}

impl Sample {
    /// A sample of `len` channels, every value `NaN`. `len` is capped at [`MAX_CHANNELS`].
    pub fn new(seq: u64, t_ns: u64, len: usize) -> Self {
        Self {
            seq,
            t_ns,
            len: len.min(MAX_CHANNELS) as u16,
            values: [f64::NAN; MAX_CHANNELS],
        }
    }

    /// Builds a sample from values (at most [`MAX_CHANNELS`] are kept).
    pub fn from_values(seq: u64, t_ns: u64, values: &[f64]) -> Self {
        let mut s = Self::new(seq, t_ns, values.len());
        let n = s.len as usize;
        s.values[..n].copy_from_slice(&values[..n]);
        s
    }

    /// The values, one per channel of the schema.
    #[inline]
    pub fn values(&self) -> &[f64] {
        &self.values[..self.len as usize]
    }

    #[inline]
    pub fn values_mut(&mut self) -> &mut [f64] {
        &mut self.values[..self.len as usize]
    }

    /// The value of channel `i`, or `None` if it had no reading.
    #[inline]
    pub fn get(&self, i: usize) -> Option<f64> {
        self.values().get(i).copied().filter(|v| !v.is_nan())
    }

    /// Time since the sampler started, in seconds.
    pub fn t_s(&self) -> f64 {
        self.t_ns as f64 / 1e9
    }
}

impl std::fmt::Debug for Sample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sample")
            .field("seq", &self.seq)
            .field("t_ns", &self.t_ns)
            .field("values", &self.values())
            .finish()
    }
}

impl PartialEq for Sample {
    fn eq(&self, other: &Self) -> bool {
        // NaN means "no reading": two missing readings are equal.
        self.seq == other.seq
            && self.t_ns == other.t_ns
            && self.len == other.len
            && self
                .values()
                .iter()
                .zip(other.values())
                .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_carry_their_values_and_mark_gaps() {
        let mut s = Sample::new(3, 1_500_000_000, 4);
        assert_eq!(s.values().len(), 4);
        assert!(s.values().iter().all(|v| v.is_nan()));
        s.values_mut()[1] = 42.0;
        assert_eq!(s.get(1), Some(42.0));
        assert_eq!(s.get(0), None);
        assert_eq!(s.get(9), None);
        assert_eq!(s.t_s(), 1.5);
        let t = Sample::from_values(3, 1_500_000_000, &[f64::NAN, 42.0, f64::NAN, f64::NAN]);
        assert_eq!(s, t);
        let too_many = vec![1.0; MAX_CHANNELS + 5];
        assert_eq!(
            Sample::from_values(0, 0, &too_many).values().len(),
            MAX_CHANNELS
        );
    }
}
