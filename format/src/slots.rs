//! [`Slots`]: where each channel's value sits in a [`Sample`](crate::Sample).
//!
//! A recording's schema only grows: a channel keeps its position for the
//! whole file, ended or not, up to [`MAX_SCHEMA_CHANNELS`](crate::MAX_SCHEMA_CHANNELS).
//! A [`Sample`](crate::Sample) is fixed-size ([`MAX_CHANNELS`] values) so that
//! it never touches the heap. The two meet here: a live channel holds one
//! sample *slot*; when it ends its slot is freed, and the next channel to
//! join takes the lowest free slot. A job whose DataLoader starts four new
//! workers every epoch thus runs for days without running out of slots.
//!
//! The rule is deterministic: whoever applies the same joins and ends in the
//! same order (the sampler, the recorder, the dashboard's store, a follower
//! of a file) gets the same map, so only the schema changes travel, never
//! the map. Files store positions, not slots: a reader of a `.flr` never
//! needs this.

use crate::MAX_CHANNELS;

/// Position → slot map of a growing schema.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Slots {
    /// The slot of each channel by position; `None` once it has ended.
    of: Vec<Option<u16>>,
    /// Free slots below `width`, lowest last (popped first).
    free: Vec<u16>,
    /// Values a sample carries: one past the highest slot ever used.
    width: usize,
}

impl Slots {
    /// The map of a schema of `n` channels, none ended: channel `i` in slot
    /// `i` (channels past [`MAX_CHANNELS`] have none).
    pub fn new(n: usize) -> Self {
        Self {
            of: (0..n)
                .map(|i| (i < MAX_CHANNELS).then_some(i as u16))
                .collect(),
            free: Vec::new(),
            width: n.min(MAX_CHANNELS),
        }
    }

    /// Channels so far, ended ones included.
    pub fn positions(&self) -> usize {
        self.of.len()
    }

    /// Values each sample carries now.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Whether `n` more channels would find slots.
    pub fn fits(&self, n: usize) -> bool {
        n <= self.room()
    }

    /// How many more channels would find slots now.
    pub fn room(&self) -> usize {
        self.free.len() + (MAX_CHANNELS - self.width)
    }

    /// Slots for `n` channels joining at the next positions: the lowest free
    /// ones first, then new ones past the width. Returns false, changing
    /// nothing, when they do not fit.
    pub fn add(&mut self, n: usize) -> bool {
        if !self.fits(n) {
            return false;
        }
        for _ in 0..n {
            let slot = self.free.pop().unwrap_or_else(|| {
                self.width += 1;
                (self.width - 1) as u16
            });
            self.of.push(Some(slot));
        }
        true
    }

    /// Frees the slots of the channels at `positions`; positions that do not
    /// exist or have ended already are ignored.
    pub fn end(&mut self, positions: &[usize]) {
        for &p in positions {
            if let Some(slot) = self.of.get_mut(p).and_then(Option::take) {
                self.free.push(slot);
            }
        }
        // Lowest last, so `pop` hands out the lowest.
        self.free.sort_unstable_by(|a, b| b.cmp(a));
    }

    /// The slot of the channel at `position`, if it is live.
    #[inline]
    pub fn slot(&self, position: usize) -> Option<usize> {
        self.of.get(position).copied().flatten().map(usize::from)
    }

    /// The slot of every position, `None` for ended ones.
    pub fn all(&self) -> &[Option<u16>] {
        &self.of
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ended_slots_are_reused_lowest_first() {
        let mut s = Slots::new(3);
        assert_eq!((s.width(), s.slot(2)), (3, Some(2)));
        assert!(s.add(2));
        assert_eq!((s.slot(3), s.slot(4), s.width()), (Some(3), Some(4), 5));
        s.end(&[4, 1, 1, 99]);
        assert_eq!((s.slot(1), s.slot(4)), (None, None));
        assert!(s.add(3));
        // Positions 5, 6, 7 take slots 1, 4, then a new 5.
        assert_eq!(
            (s.slot(5), s.slot(6), s.slot(7), s.width()),
            (Some(1), Some(4), Some(5), 6)
        );
        assert_eq!(s.positions(), 8);
    }

    #[test]
    fn many_short_lived_channels_never_widen_the_sample() {
        let mut s = Slots::new(10);
        for i in 0..1000 {
            assert!(s.add(3));
            let p = s.positions();
            s.end(&[p - 3, p - 2, p - 1]);
            assert_eq!(s.width(), 13, "round {i}");
        }
        assert_eq!(s.positions(), 3010);
    }

    #[test]
    fn a_full_sample_refuses_more_and_changes_nothing() {
        let mut s = Slots::new(MAX_CHANNELS - 1);
        assert!(!s.add(2));
        assert_eq!(
            (s.positions(), s.width()),
            (MAX_CHANNELS - 1, MAX_CHANNELS - 1)
        );
        assert!(s.add(1));
        s.end(&[0]);
        assert!(s.add(1));
        assert_eq!(s.slot(MAX_CHANNELS), Some(0));
    }
}
