//! Judgments of many runs of one job (`flatline fleet`, one recording per
//! rank or node): which of them is different. Data only: the receipt crate
//! words it (`flatline_receipt::fleet`).
//!
//! Per channel the ranks' rates are summarised by their median and MAD
//! (median absolute deviation, scaled to a standard deviation), not their
//! mean, so one leaking rank cannot hide by moving the average. A rank is
//! an **outlier** in a channel when its own analysis says the channel
//! grows, fewer than half the ranks grow in it, and its rate is at least
//! [`OUTLIER_MADS`] MADs above the median. Rates are per training step where
//! every recording has steps (ranks run in lock-step, so a slow node is not
//! a leaky one), else per second; neither depends on when each node's
//! clock started.

use std::collections::BTreeMap;

use flatline_format::Unit;

/// How far above the ranks' median, in MADs, a growing rank's rate must be
/// to be named as the one that is different.
pub const OUTLIER_MADS: f64 = 5.0;

/// Fewest recordings of a channel that can show one of them different (as
/// the Prometheus rule's `>= 3`): of two, neither is the odd one out.
pub const MIN_RANKS: usize = 3;

/// A level channel's growth in one recording.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub unit: Unit,
    pub slope_per_s: f64,
    pub slope_per_step: Option<f64>,
    /// Its own analysis calls it growth (upwards).
    pub grows: bool,
}

/// A channel across the fleet.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelSummary {
    pub unit: Unit,
    /// Members (indices) that have it.
    pub members: Vec<usize>,
    /// Members whose own analysis calls it growth.
    pub growing: Vec<usize>,
    /// Rates per step (else per second) of the members that have it.
    pub per_step: bool,
    pub median: f64,
    pub mad: f64,
}

/// A member whose channel grows when most do not.
#[derive(Debug, Clone, PartialEq)]
pub struct Outlier {
    pub member: usize,
    pub channel: String,
    /// Its rate (per step or per second, as the channel's summary says).
    pub rate: f64,
    /// Its rate per second, whatever the basis (for saying it per hour).
    pub rate_per_s: f64,
    /// How far above the median, in MADs.
    pub mads: f64,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Each channel's summary across the members (each member's level
/// channels' rates, by name), and the outliers, the growth that matters
/// most first.
pub fn compare(
    members: &[&BTreeMap<String, Rate>],
) -> (BTreeMap<String, ChannelSummary>, Vec<Outlier>) {
    let mut names: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, m) in members.iter().enumerate() {
        for name in m.keys() {
            names.entry(name).or_default().push(i);
        }
    }
    let mut channels = BTreeMap::new();
    let mut outliers = Vec::new();
    for (name, have) in names {
        let rate = |i: usize| members[i][name];
        let per_step = have.iter().all(|&i| rate(i).slope_per_step.is_some());
        let x = |i: usize| {
            let r = rate(i);
            if per_step {
                r.slope_per_step.unwrap_or(f64::NAN)
            } else {
                r.slope_per_s
            }
        };
        let mut xs: Vec<f64> = have.iter().map(|&i| x(i)).collect();
        let med = median(&mut xs);
        let mut dev: Vec<f64> = xs.iter().map(|v| (v - med).abs()).collect();
        let mad = 1.4826 * median(&mut dev);
        let growing: Vec<usize> = have.iter().copied().filter(|&i| rate(i).grows).collect();
        // A spread of nothing (ranks that agree to the byte) would make any
        // difference infinitely many MADs: a floor of a millionth of the
        // largest rate.
        let floor = xs.iter().fold(0.0_f64, |m, v| m.max(v.abs())) * 1e-6;
        if have.len() >= MIN_RANKS && growing.len() * 2 < have.len() {
            for &i in &growing {
                let mads = (x(i) - med) / mad.max(floor).max(f64::MIN_POSITIVE);
                if mads >= OUTLIER_MADS {
                    outliers.push(Outlier {
                        member: i,
                        channel: name.to_owned(),
                        rate: x(i),
                        rate_per_s: rate(i).slope_per_s,
                        mads,
                    });
                }
            }
        }
        channels.insert(
            name.to_owned(),
            ChannelSummary {
                unit: rate(have[0]).unit,
                members: have,
                growing,
                per_step,
                median: med,
                mad,
            },
        );
    }
    // The headline names the growth that matters most, not the one
    // furthest from the others in MADs: a rank whose RSS grows 28 GiB/h
    // leads with that, not with its page tables' 52 MiB/h, however far
    // they stand out. Bytes first, by how fast they grow; then the rest,
    // by how far they stand out.
    let bytes = |o: &Outlier| {
        channels
            .get(&o.channel)
            .is_some_and(|c: &ChannelSummary| c.unit.is_bytes())
    };
    outliers.sort_by(|a, b| {
        bytes(b)
            .cmp(&bytes(a))
            .then_with(|| {
                if bytes(a) && bytes(b) {
                    b.rate_per_s.total_cmp(&a.rate_per_s)
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .then_with(|| b.mads.total_cmp(&a.mads))
    });
    (channels, outliers)
}

/// What a fleet's trends come to, for its headline.
#[derive(Debug, Clone, PartialEq)]
pub enum Trend {
    /// Some ranks stand out in `channel` (the first outlier's).
    Outliers {
        channel: String,
        /// The members that stand out in it, by index.
        members: Vec<usize>,
        /// The fastest of their rates, a second.
        fastest_per_s: f64,
        /// The other channels the same members stand out in, by name.
        also: Vec<String>,
        /// Outliers of other members in other channels.
        others: usize,
    },
    /// No level channel grows in any recording.
    Flat,
    /// Most of the recordings that have `channel` grow in it alike: the
    /// whole job's growth, not one rank's.
    Whole { channel: String },
    /// Some grow in `channel`, not most, and none stands out: there are
    /// too few recordings to tell, or they are no faster than the spread.
    Some { channel: String, too_few: bool },
}

/// What the channels' summaries and the outliers come to.
pub fn trend(channels: &BTreeMap<String, ChannelSummary>, outliers: &[Outlier]) -> Trend {
    if let Some(first) = outliers.first() {
        let mut same: Vec<&Outlier> = outliers
            .iter()
            .filter(|o| o.channel == first.channel)
            .collect();
        same.sort_by_key(|o| o.member);
        let fastest_per_s = same.iter().map(|o| o.rate_per_s).fold(f64::MIN, f64::max);
        // The same ranks standing out in other channels (a leak shows in
        // RSS, PSS and USS alike), named; other ranks elsewhere, counted.
        let ours = |o: &&Outlier| same.iter().any(|x| x.member == o.member);
        let mut also: Vec<String> = outliers
            .iter()
            .filter(|o| o.channel != first.channel && ours(o))
            .map(|o| o.channel.clone())
            .collect();
        also.sort_unstable();
        also.dedup();
        let others = outliers
            .iter()
            .filter(|o| o.channel != first.channel && !ours(o))
            .count();
        return Trend::Outliers {
            channel: first.channel.clone(),
            members: same.iter().map(|o| o.member).collect(),
            fastest_per_s,
            also,
            others,
        };
    }
    let widest = channels
        .iter()
        .filter(|(_, c)| !c.growing.is_empty())
        .max_by_key(|(_, c)| c.growing.len());
    let Some((name, c)) = widest else {
        return Trend::Flat;
    };
    let (k, of) = (c.growing.len(), c.members.len());
    let channel = name.clone();
    if of >= MIN_RANKS && k * 2 > of {
        Trend::Whole { channel }
    } else {
        Trend::Some {
            channel,
            too_few: of < MIN_RANKS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(pss_per_s: f64, grows: bool) -> BTreeMap<String, Rate> {
        let rate = |slope_per_s: f64, grows| Rate {
            unit: Unit::Bytes,
            slope_per_s,
            slope_per_step: Some(slope_per_s / 2.0),
            grows,
        };
        BTreeMap::from([
            ("tree.pss".to_owned(), rate(pss_per_s, grows)),
            ("mem.rss".to_owned(), rate(0.0, false)),
        ])
    }

    /// Ranks that agree to the byte leave no spread: the one that grows is
    /// still told from them (the floor), per step since all have steps.
    #[test]
    fn ranks_that_agree_to_the_byte_still_show_the_one_that_grows() {
        let ms: Vec<BTreeMap<String, Rate>> = (0..8)
            .map(|r| rates(if r == 6 { 100.0 } else { 0.0 }, r == 6))
            .collect();
        let refs: Vec<&BTreeMap<String, Rate>> = ms.iter().collect();
        let (channels, outliers) = compare(&refs);
        assert_eq!(outliers.len(), 1, "{outliers:?}");
        assert_eq!((outliers[0].member, outliers[0].rate), (6, 50.0));
        assert!(channels["tree.pss"].per_step);
        assert_eq!(channels["tree.pss"].growing, [6]);
        assert_eq!(
            trend(&channels, &outliers),
            Trend::Outliers {
                channel: "tree.pss".into(),
                members: vec![6],
                fastest_per_s: 100.0,
                also: vec![],
                others: 0
            }
        );
        // Half of them growing is no outlier: the whole job's, told so.
        let ms: Vec<BTreeMap<String, Rate>> = (0..8).map(|r| rates(100.0, r < 5)).collect();
        let refs: Vec<&BTreeMap<String, Rate>> = ms.iter().collect();
        let (channels, outliers) = compare(&refs);
        assert!(outliers.is_empty());
        assert_eq!(
            trend(&channels, &outliers),
            Trend::Whole {
                channel: "tree.pss".into()
            }
        );
    }
}
