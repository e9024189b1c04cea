//! [`Item`]: one thing a live telemetry stream carries, in order.
//!
//! Every source of a stream (the sampler and its schema feed, a recording
//! another process is writing, a synthetic run) yields items, and every
//! consumer (a [`RecordingWriter`](crate::RecordingWriter), the exporter's
//! tap, the dashboard's store) takes them: a channel that joins or ends
//! travels in this one shape from the probe to the file. A sample's values
//! sit in slots ([`Slots`]); [`Slots::apply`] keeps a consumer's map in step
//! with the items it takes.

use crate::{ChannelSpec, Event, Sample, Slots};

/// One item of a stream. A schema change comes before the first sample
/// that carries it.
// Samples are nearly every item, so a queue slot is a sample's size either
// way; boxing them would allocate once a sample instead.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// Channels that join the stream (their positions follow the others').
    Add(Vec<ChannelSpec>),
    /// Channels that end, by position.
    End(Vec<usize>),
    /// Values by slot.
    Sample(Sample),
    Event(Event),
}

impl Item {
    /// Whether it changes the schema (losing one would mislabel channels).
    pub fn is_schema_change(&self) -> bool {
        matches!(self, Item::Add(_) | Item::End(_))
    }
}

impl Slots {
    /// Follows a schema change (other items change nothing). Returns false,
    /// changing nothing, when added channels do not fit in a sample.
    pub fn apply(&mut self, item: &Item) -> bool {
        match item {
            Item::Add(specs) => self.add(specs.len()),
            Item::End(positions) => {
                self.end(positions);
                true
            }
            Item::Sample(_) | Item::Event(_) => true,
        }
    }

    /// A row of a file (one value per channel position) as a sample (one
    /// value per slot); ended channels' values are dropped.
    pub fn sample(&self, seq: u64, t_ns: u64, row: &[f64]) -> Sample {
        let mut s = Sample::new(seq, t_ns, self.width());
        let values = s.values_mut();
        for (&v, slot) in row.iter().zip(self.all()) {
            if let Some(k) = slot {
                values[usize::from(*k)] = v;
            }
        }
        s
    }

    /// The value of the channel at `position` in `s`; NaN once it has
    /// ended (or where the sample is short).
    #[inline]
    pub fn value(&self, s: &Sample, position: usize) -> f64 {
        self.slot(position)
            .and_then(|k| s.get(k))
            .unwrap_or(f64::NAN)
    }

    /// A sample's values by position: `(position, value)` of each live
    /// channel.
    pub fn by_position<'a>(&'a self, s: &'a Sample) -> impl Iterator<Item = (usize, f64)> + 'a {
        self.all()
            .iter()
            .enumerate()
            .filter_map(|(p, slot)| slot.and_then(|k| s.get(usize::from(k))).map(|v| (p, v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Group, Unit};

    #[test]
    fn a_row_goes_to_slots_and_back_to_positions() {
        let mut slots = Slots::new(3);
        assert!(slots.apply(&Item::End(vec![1])));
        assert!(slots.apply(&Item::Add(vec![ChannelSpec::new(
            "pid9.rss",
            Unit::Bytes,
            Group::Memory
        )])));
        // Position 3 took the slot position 1 freed.
        assert_eq!(slots.slot(3), Some(1));
        let s = slots.sample(7, 70, &[10.0, 11.0, 12.0, 13.0]);
        assert_eq!(
            (s.seq, s.t_ns, s.values()),
            (7, 70, &[10.0, 13.0, 12.0][..])
        );
        assert!(slots.value(&s, 1).is_nan());
        assert_eq!(slots.value(&s, 3), 13.0);
        let back: Vec<_> = slots.by_position(&s).collect();
        assert_eq!(back, vec![(0, 10.0), (2, 12.0), (3, 13.0)]);
    }

    #[test]
    fn samples_and_events_leave_the_map_alone() {
        let mut slots = Slots::new(2);
        let before = slots.clone();
        assert!(slots.apply(&Item::Sample(Sample::new(0, 0, 2))));
        assert_eq!(slots, before);
    }
}
