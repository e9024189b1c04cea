//! Channels that join and leave a running stream: a process tree's workers
//! come and go, and each has its own channels while it lives.
//!
//! A probe that grows the schema (see [`Probe::dynamic`](super::Probe::dynamic))
//! works on the slow-probe thread through [`DynamicChannels`]: it adds
//! channels, ends them and sets their values. The sampler thread picks the
//! changes up at its next tick, widens its samples to match, and publishes
//! each change on the stream's [`SchemaFeed`], stamped with the sequence
//! number of the first sample that carries it, *before* it sends that
//! sample. The one consumer of the stream (the recorder thread, the window)
//! asks the feed for the changes up to each sample it takes, so it always
//! knows a sample's width and where each value sits ([`Slots`]). No change is
//! ever dropped: samples may be, changes are not.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::{ChannelSpec, MAX_CHANNELS, Sample, Schema};
use flatline_format::{Item, Slots};

#[derive(Debug, Default)]
struct FeedInner {
    /// Changes not yet taken, each with the seq of the first sample it applies to.
    queue: Mutex<VecDeque<(u64, Item)>>,
    queued: AtomicUsize,
}

/// The schema changes of a stream ([`Item::Add`], [`Item::End`]), in
/// order, for its one consumer.
#[derive(Debug, Clone, Default)]
pub struct SchemaFeed {
    inner: Arc<FeedInner>,
}

impl SchemaFeed {
    pub(crate) fn publish(&self, seq: u64, change: Item) {
        let mut q = self
            .inner
            .queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        q.push_back((seq, change));
        self.inner.queued.store(q.len(), Ordering::Release);
    }

    /// Hands `apply` every change that takes effect at or before sample
    /// `seq`, oldest first. Call it before using a sample. Costs one atomic
    /// load, and no lock, while nothing is queued.
    pub fn take_until(&self, seq: u64, mut apply: impl FnMut(Item)) {
        if self.inner.queued.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut q = self
            .inner
            .queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while q.front().is_some_and(|(at, _)| *at <= seq) {
            if let Some((_, c)) = q.pop_front() {
                apply(c);
            }
        }
        self.inner.queued.store(q.len(), Ordering::Release);
    }

    /// The stream's road: the schema changes that come before sample `s`,
    /// oldest first, then the sample. Every consumer of a live stream (the
    /// recorder thread, a watch window) takes its items this way. Each
    /// change is taken under the lock alone (never held while the consumer
    /// writes), and nothing is locked while nothing is queued.
    pub fn items(&self, s: Sample) -> Items<'_> {
        Items {
            feed: self,
            sample: Some(s),
        }
    }

    /// The oldest change queued, if it takes effect at or before sample `seq`.
    fn take_one(&self, seq: u64) -> Option<Item> {
        if self.inner.queued.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut q = self
            .inner
            .queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let c = if q.front().is_some_and(|(at, _)| *at <= seq) {
            q.pop_front().map(|(_, c)| c)
        } else {
            None
        };
        self.inner.queued.store(q.len(), Ordering::Release);
        c
    }

    /// Every change still queued (at the end of a stream).
    pub fn take_all(&self, apply: impl FnMut(Item)) {
        self.take_until(u64::MAX, apply);
    }
}

/// The items of one sample ([`SchemaFeed::items`]): its schema changes,
/// then the sample itself.
#[derive(Debug)]
pub struct Items<'a> {
    feed: &'a SchemaFeed,
    sample: Option<Sample>,
}

impl Iterator for Items<'_> {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        let seq = self.sample.as_ref()?.seq;
        match self.feed.take_one(seq) {
            Some(change) => Some(change),
            None => self.sample.take().map(Item::Sample),
        }
    }
}

/// What the growing probes have done since the sampler last looked.
#[derive(Debug)]
pub(crate) struct Grown {
    /// Channels of the schema the stream started with: never ended here.
    fixed: usize,
    slots: Slots,
    names: HashSet<String>,
    pending: Vec<Item>,
    /// Latest values by slot; only slots of grown channels are ever set.
    values: Box<[f64; MAX_CHANNELS]>,
    fresh: bool,
    /// Channels refused because a sample had no free slot for them.
    refused: u64,
}

impl Grown {
    pub(crate) fn new(schema: &Schema) -> Self {
        Self {
            fixed: schema.len(),
            slots: Slots::new(schema.len()),
            names: schema.channels.iter().map(|c| c.name.clone()).collect(),
            pending: Vec::new(),
            values: Box::new([f64::NAN; MAX_CHANNELS]),
            fresh: false,
            refused: 0,
        }
    }

    /// Moves the changes since the last call to `feed` (in effect from sample
    /// `seq`) and returns the sample width from now on.
    pub(crate) fn publish_changes(&mut self, seq: u64, feed: &SchemaFeed) -> usize {
        for c in self.pending.drain(..) {
            feed.publish(seq, c);
        }
        self.slots.width()
    }

    pub(crate) fn has_changes(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Whether a reading was set since the last sample took them.
    pub(crate) fn has_fresh_values(&self) -> bool {
        self.fresh
    }

    /// Copies a fresh reading into the sample's grown slots (from `first`
    /// on), once.
    pub(crate) fn take_values(&mut self, first: usize, sample: &mut Sample) {
        if !self.fresh {
            return;
        }
        let v = sample.values_mut();
        let end = v.len().min(MAX_CHANNELS);
        if first < end {
            v[first..end].copy_from_slice(&self.values[first..end]);
        }
        self.values.fill(f64::NAN);
        self.fresh = false;
    }
}

/// A growing probe's view of the stream's schema, lent to it on the
/// slow-probe thread.
#[derive(Debug)]
pub struct DynamicChannels<'a> {
    pub(crate) grown: &'a mut Grown,
}

impl DynamicChannels<'_> {
    /// Adds `specs` from the next sample on; returns the position of the
    /// first, or `None` (nothing added) when a name is taken, a sample has
    /// no free slot left for them, or the recording would pass
    /// [`MAX_SCHEMA_CHANNELS`](flatline_format::MAX_SCHEMA_CHANNELS) channels
    /// over its life (the last two are counted in [`Self::refused`]).
    pub fn add(&mut self, specs: Vec<ChannelSpec>) -> Option<usize> {
        let g = &mut *self.grown;
        let mut seen = HashSet::new();
        if specs
            .iter()
            .any(|s| g.names.contains(&s.name) || !seen.insert(s.name.as_str()))
        {
            return None;
        }
        if g.slots.positions() + specs.len() > flatline_format::MAX_SCHEMA_CHANNELS
            || !g.slots.add(specs.len())
        {
            g.refused += specs.len() as u64;
            return None;
        }
        let first = g.slots.positions() - specs.len();
        g.names.extend(specs.iter().map(|s| s.name.clone()));
        g.pending.push(Item::Add(specs));
        Some(first)
    }

    /// How many more channels [`Self::add`] would take now.
    pub fn room(&self) -> usize {
        let g = &*self.grown;
        g.slots
            .room()
            .min(flatline_format::MAX_SCHEMA_CHANNELS.saturating_sub(g.slots.positions()))
    }

    /// Whether a name is in the schema already (ended channels included).
    pub fn is_taken(&self, name: &str) -> bool {
        self.grown.names.contains(name)
    }

    /// The first free stem of `base` for channels named `<stem>.<leaf>`:
    /// `base`, then `base-2`, `base-3`, … A name is never reused, so a pid
    /// the kernel hands out again, or a GPU that answers again after its
    /// channels ended, reads on under a stem of its own.
    pub fn free_stem(&self, base: &str, leaf: &str) -> String {
        (1u32..)
            .map(|k| {
                if k == 1 {
                    base.to_owned()
                } else {
                    format!("{base}-{k}")
                }
            })
            .find(|s| !self.is_taken(&format!("{s}.{leaf}")))
            .unwrap_or_else(|| base.to_owned())
    }

    /// Ends the channels at `positions` (added through [`Self::add`]) from
    /// the next sample on.
    pub fn end(&mut self, positions: &[usize]) {
        let live: Vec<usize> = positions
            .iter()
            .copied()
            .filter(|&p| p >= self.grown.fixed && self.grown.slots.slot(p).is_some())
            .collect();
        if live.is_empty() {
            return;
        }
        for &p in &live {
            if let Some(s) = self.grown.slots.slot(p) {
                self.grown.values[s] = f64::NAN;
            }
        }
        self.grown.slots.end(&live);
        self.grown.pending.push(Item::End(live));
    }

    /// Sets the value the channel at `position` carries in the next sample.
    pub fn set(&mut self, position: usize, value: f64) {
        if let Some(s) = self.grown.slots.slot(position) {
            self.grown.values[s] = value;
            self.grown.fresh = true;
        }
    }

    /// Channels refused so far for want of a free sample slot.
    pub fn refused(&self) -> u64 {
        self.grown.refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Group, Unit};

    fn spec(n: &str) -> ChannelSpec {
        ChannelSpec::new(n, Unit::Bytes, Group::Memory)
    }

    #[test]
    fn changes_reach_the_consumer_in_order_at_their_sample() {
        let schema = Schema {
            channels: vec![spec("a"), spec("b")],
        };
        let mut g = Grown::new(&schema);
        let feed = SchemaFeed::default();
        let mut d = DynamicChannels { grown: &mut g };
        let p = d.add(vec![spec("pid1.rss"), spec("pid1.pss")]).unwrap();
        assert_eq!(p, 2);
        assert_eq!(d.add(vec![spec("a")]), None, "a taken name");
        d.set(3, 42.0);
        assert_eq!(g.publish_changes(10, &feed), 4);
        let mut s = Sample::new(10, 0, 4);
        g.take_values(2, &mut s);
        assert_eq!((s.get(2), s.get(3)), (None, Some(42.0)));
        let mut d = DynamicChannels { grown: &mut g };
        d.end(&[2, 3, 0]);
        g.publish_changes(12, &feed);

        let mut got = Vec::new();
        feed.take_until(9, |c| got.push(c));
        assert!(got.is_empty(), "nothing before sample 10");
        feed.take_until(11, |c| got.push(c));
        assert_eq!(got, [Item::Add(vec![spec("pid1.rss"), spec("pid1.pss")])]);
        feed.take_all(|c| got.push(c));
        // Position 0 was in the schema from the start: not this probe's to end.
        assert_eq!(got[1], Item::End(vec![2, 3]));
    }

    #[test]
    fn a_full_sample_refuses_channels_and_counts_them() {
        let schema = Schema {
            channels: (0..MAX_CHANNELS - 1)
                .map(|i| spec(&format!("c{i}")))
                .collect(),
        };
        let mut g = Grown::new(&schema);
        let mut d = DynamicChannels { grown: &mut g };
        assert_eq!(d.room(), 1);
        assert_eq!(d.add(vec![spec("x"), spec("y")]), None);
        assert_eq!(d.refused(), 2);
        assert_eq!(d.add(vec![spec("x")]), Some(MAX_CHANNELS - 1));
    }
}
