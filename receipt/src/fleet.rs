//! A fleet's receipt (`flatline fleet`): its members, its headline, and
//! the text, Markdown and JSON a person reads. What the fleet judges (each
//! channel's median and spread, the outliers, what they come to) is decided
//! in [`flatline_analysis::fleet`]; this module words it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use flatline_analysis::fleet::{self as judge, Trend};
use flatline_analysis::{Kind, rules};
use flatline_format::{Recording, Unit};
use serde_json::{Value, json};

use crate::fmt::value;

pub use flatline_analysis::fleet::{ChannelSummary, MIN_RANKS, OUTLIER_MADS, Outlier, Rate};

/// One recording of the fleet, as far as the comparison needs it.
#[derive(Debug, Clone)]
pub struct Member {
    pub file: PathBuf,
    pub labels: BTreeMap<String, String>,
    pub host: String,
    pub duration_s: f64,
    /// "7,155 steps", where the recording has a step axis.
    pub training: Option<String>,
    pub headline: String,
    /// Whether its headline tells how the job ended (a process killed by
    /// the OOM killer, an out-of-memory error it ended with).
    pub ended_badly: bool,
    pub truncated: bool,
    /// Why it could not be read; then it has no channels.
    pub error: Option<String>,
    pub channels: BTreeMap<String, Rate>,
    /// The recording's digest (sha256 of its samples).
    pub digest: String,
    /// Where its start-up ended (seconds), as its analysis found it.
    pub warmup_s: f64,
    /// Each compared channel's readings, thinned to at most
    /// [`SERIES_POINTS`] (seconds since its start, value): the window's
    /// small multiples.
    pub series: BTreeMap<String, Vec<[f64; 2]>>,
}

impl Member {
    /// How a person names it: `rank 5`, else its file's name.
    pub fn name(&self) -> String {
        match self.labels.get("rank") {
            Some(r) => format!("rank {r}"),
            None => self.file.file_name().map_or_else(
                || self.file.display().to_string(),
                |n| n.to_string_lossy().into(),
            ),
        }
    }

    /// Its own headline, or why it could not be read.
    pub fn said(&self) -> String {
        match &self.error {
            Some(e) => format!("cannot be read: {e}"),
            None => self.headline.clone(),
        }
    }

    fn sort_key(&self) -> (u64, String) {
        let rank = self.labels.get("rank").and_then(|r| r.parse().ok());
        (rank.unwrap_or(u64::MAX), self.file.display().to_string())
    }
}

impl Member {
    /// A member that could not be read, and why.
    pub fn unread(path: &Path, error: String) -> Member {
        Member {
            error: Some(error),
            ..Member::blank(path)
        }
    }

    fn blank(path: &Path) -> Member {
        Member {
            file: path.to_owned(),
            labels: BTreeMap::new(),
            host: String::new(),
            duration_s: 0.0,
            training: None,
            headline: String::new(),
            ended_badly: false,
            truncated: false,
            error: None,
            channels: BTreeMap::new(),
            digest: String::new(),
            warmup_s: 0.0,
            series: BTreeMap::new(),
        }
    }

    /// What the fleet keeps of one recording, analysed as `report` would:
    /// each level channel's growth rate and whether its own evidence calls
    /// it growth.
    pub fn of(path: &Path, rec: &Recording) -> Member {
        let mut m = Member::blank(path);
        let receipt = crate::report::analyse(rec, None);
        m.headline = receipt.headline().to_owned();
        m.ended_badly = receipt
            .facts
            .ending
            .headline(receipt.facts.rank.as_deref(), &value, &crate::fmt::duration)
            .is_some();
        m.labels = rec.header.labels.clone();
        m.host = rec.header.host.hostname.clone();
        m.duration_s = rec.duration_s();
        m.training = crate::report::training_axes(rec);
        m.truncated = rec.is_truncated();
        m.digest = rec.digest.clone();
        m.warmup_s = receipt.warmup.seconds();
        // Steps a second over the run, from its step axis: a rate per step is
        // the trend per second over it (the analysis's own per-step figure is
        // its verdict's, 0 for what it calls flat, and would leave no spread).
        let column = |i: usize| rec.columns[i].as_slice();
        let steps_per_s = rules::step_axis(&rec.header.schema, column).and_then(|i| {
            let (lo, hi) = rec.columns[i]
                .iter()
                .filter(|v| v.is_finite())
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
                    (lo.min(v), hi.max(v))
                });
            Some((hi - lo) / m.duration_s).filter(|r| r.is_finite() && *r > 0.0)
        });
        for r in &receipt.rows {
            let a = &r.analysis;
            // A process's own channels differ by pid from rank to rank.
            if a.kind != Kind::Level
                || r.spec.labels.contains_key("pid")
                || !a.slope_per_s.is_finite()
            {
                continue;
            }
            m.series
                .insert(r.spec.name.clone(), thin(&rec.t_ns, &rec.columns[r.index]));
            m.channels.insert(
                r.spec.name.clone(),
                Rate {
                    unit: r.spec.unit,
                    slope_per_s: a.slope_per_s,
                    slope_per_step: steps_per_s.map(|r| a.slope_per_s / r),
                    grows: a.verdict.is_growth() && a.slope_per_s > 0.0,
                },
            );
        }
        m
    }
}

/// The whole comparison.
#[derive(Debug, Clone)]
pub struct Fleet {
    pub members: Vec<Member>,
    pub channels: BTreeMap<String, ChannelSummary>,
    pub outliers: Vec<Outlier>,
    /// What the outliers and summaries come to ([`judge::trend`]).
    pub trend: Trend,
    pub headline: String,
    /// One digest for the set ([`set_digest`]).
    pub digest: String,
}

impl Fleet {
    /// The members, by rank (else file), compared.
    pub fn of(mut members: Vec<Member>) -> Fleet {
        members.sort_by_key(Member::sort_key);
        let rates: Vec<&BTreeMap<String, Rate>> = members.iter().map(|m| &m.channels).collect();
        let (channels, outliers) = judge::compare(&rates);
        let trend = judge::trend(&channels, &outliers);
        let headline = headline(&members, &channels, &trend);
        let digest = set_digest(&members);
        Fleet {
            members,
            channels,
            outliers,
            trend,
            headline,
            digest,
        }
    }
}

/// Points a member keeps per channel for the window.
pub const SERIES_POINTS: usize = 300;

/// A column as at most [`SERIES_POINTS`] points: the mean of its readings
/// in each of as many equal spans of time.
fn thin(t_ns: &[u64], column: &[f64]) -> Vec<[f64; 2]> {
    let (Some(&first), Some(&last)) = (t_ns.first(), t_ns.last()) else {
        return Vec::new();
    };
    let span = (last - first).max(1) as f64;
    let mut sums = vec![(0.0, 0.0, 0u32); SERIES_POINTS];
    for (&t, &v) in t_ns.iter().zip(column) {
        if v.is_finite() {
            let k = (((t - first) as f64 / span) * SERIES_POINTS as f64) as usize;
            let s = &mut sums[k.min(SERIES_POINTS - 1)];
            s.0 += (t - first) as f64 / 1e9;
            s.1 += v;
            s.2 += 1;
        }
    }
    sums.into_iter()
        .filter(|s| s.2 > 0)
        .map(|(t, v, n)| [t / f64::from(n), v / f64::from(n)])
        .collect()
}

/// One digest for the set: sha256 over the members' digests, sorted, so
/// the same recordings give the same digest in any order.
pub fn set_digest(members: &[Member]) -> String {
    use sha2::{Digest, Sha256};
    let mut ds: Vec<&str> = members.iter().map(|m| m.digest.as_str()).collect();
    ds.sort_unstable();
    let mut h = Sha256::new();
    for d in ds {
        h.update(d.as_bytes());
        h.update(b"\n");
    }
    format!("{:x}", h.finalize())
}

/// A rate per hour in its unit: "41.0 MiB/h".
fn per_hour(rate_per_s: f64, unit: Unit) -> String {
    format!("{}/h", value(rate_per_s * 3600.0, unit))
}

/// One sentence for the whole fleet; a recording whose job lost a process
/// to the OOM killer (or ended out of memory) is told first.
fn headline(
    members: &[Member],
    channels: &BTreeMap<String, ChannelSummary>,
    trend: &Trend,
) -> String {
    let trends = trend_sentence(members, channels, trend);
    let ended: Vec<&Member> = members.iter().filter(|m| m.ended_badly).collect();
    match ended.as_slice() {
        [] => trends,
        [m] => format!("{}: {} {trends}", m.name(), m.headline),
        more => format!(
            "{} recordings ended out of memory, {} first: {} {trends}",
            more.len(),
            more[0].name(),
            more[0].headline
        ),
    }
}

fn trend_sentence(
    members: &[Member],
    channels: &BTreeMap<String, ChannelSummary>,
    trend: &Trend,
) -> String {
    let n = members.iter().filter(|m| m.error.is_none()).count();
    let host = |i: usize| {
        let m = &members[i];
        if m.host.is_empty() {
            String::new()
        } else {
            format!(" ({})", m.host)
        }
    };
    match trend {
        Trend::Outliers {
            channel,
            members: same,
            fastest_per_s,
            also,
            others,
        } => {
            let c = &channels[channel];
            let names: Vec<String> = same
                .iter()
                .map(|&i| format!("{}{}", members[i].name(), host(i)))
                .collect();
            let rest = c.members.len() - same.len();
            let mut s = match same.as_slice() {
                [one] => format!(
                    "{} of {n}{} grows {} in {channel}; the other {rest} do not.",
                    members[*one].name(),
                    host(*one),
                    per_hour(*fastest_per_s, c.unit),
                ),
                _ => {
                    let (last, before) = names.split_last().expect("two or more");
                    format!(
                        "{} and {last} of {n} grow in {channel} (up to {}); the other {rest} do not.",
                        before.join(", "),
                        per_hour(*fastest_per_s, c.unit)
                    )
                }
            };
            if !also.is_empty() {
                let more = also.len().saturating_sub(3);
                let mut list = also
                    .iter()
                    .take(3)
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(", ");
                if more > 0 {
                    list.push_str(&format!(" and {more} more"));
                }
                s.push_str(&format!(" Also in {list}."));
            }
            if *others > 0 {
                s.push_str(&format!(
                    " {others} more outliers: other ranks in other channels."
                ));
            }
            s
        }
        Trend::Flat => {
            format!("No rank stands out: {n} recordings, and no memory channel grows in any.")
        }
        Trend::Whole { channel } => {
            let c = &channels[channel];
            format!(
                "{channel} grows in {} of {} recordings alike (median {}): the whole job's, not one rank's.",
                c.growing.len(),
                c.members.len(),
                if c.per_step {
                    format!("{}/step", value(c.median, c.unit))
                } else {
                    per_hour(c.median, c.unit)
                }
            )
        }
        Trend::Some { channel, too_few } => {
            let c = &channels[channel];
            let (k, of) = (c.growing.len(), c.members.len());
            // Some grow, not most, and none is an outlier: say who, and why not.
            let mut names: Vec<String> = c.growing.iter().map(|&i| members[i].name()).collect();
            if names.len() > 3 {
                let more = names.len() - 3;
                names.truncate(3);
                names.push(format!("{more} more"));
            }
            let why = if *too_few {
                let s = if of == 1 { "" } else { "s" };
                format!(
                    "{of} recording{s} {} too few to tell one that is different",
                    if of == 1 { "is" } else { "are" }
                )
            } else {
                "no faster than the ranks' spread allows, so none is called different".to_owned()
            };
            format!(
                "{} grow{} in {channel} ({k} of {of} recordings): {why}.",
                names.join(", "),
                if k == 1 { "s" } else { "" }
            )
        }
    }
}

fn how_far(f: &Fleet, o: &Outlier) -> String {
    let c = &f.channels[&o.channel];
    let basis = if c.per_step {
        format!(
            "{}/step against a median of {}/step",
            value(o.rate, c.unit),
            value(c.median, c.unit)
        )
    } else {
        format!(
            "{} against a median of {}",
            per_hour(o.rate, c.unit),
            per_hour(c.median, c.unit)
        )
    };
    format!("{basis}, {:.0} MADs above", o.mads)
}

/// An outlier as the receipts list it.
struct OutlierRow {
    name: String,
    host: String,
    channel: String,
    /// Its rate against the median, and how many MADs above it.
    how_far: String,
}

/// Each outlier as the receipts list it: who, where, which channel, how far.
fn outlier_rows(f: &Fleet) -> Vec<OutlierRow> {
    f.outliers
        .iter()
        .map(|o| {
            let m = &f.members[o.member];
            OutlierRow {
                name: m.name(),
                host: m.host.clone(),
                channel: o.channel.clone(),
                how_far: how_far(f, o),
            }
        })
        .collect()
}

/// A recording as the receipts list it.
struct RecordingRow {
    name: String,
    host: String,
    took: String,
    /// "7,155 steps", where it has a step axis.
    training: String,
    /// Its own headline, or why it could not be read.
    said: String,
    truncated: bool,
}

/// Each recording as the receipts list it: who, where, how long, its
/// steps, what it says; and whether it was cut short.
fn recording_rows(f: &Fleet) -> Vec<RecordingRow> {
    f.members
        .iter()
        .map(|m| RecordingRow {
            name: m.name(),
            host: m.host.clone(),
            took: crate::fmt::duration(m.duration_s),
            training: m.training.clone().unwrap_or_default(),
            said: m.said(),
            truncated: m.truncated,
        })
        .collect()
}

pub fn text(f: &Fleet) -> String {
    let mut s = format!("{}\n\n", f.headline);
    if !f.outliers.is_empty() {
        s.push_str("outliers\n");
        for OutlierRow {
            name,
            host,
            channel,
            how_far,
        } in outlier_rows(f)
        {
            s.push_str(&format!(
                "  {name:<10} {host:<10} {channel:<12} {how_far}\n"
            ));
        }
        s.push('\n');
    }
    s.push_str("channels\n");
    for (name, c) in &f.channels {
        let grows: Vec<String> = c.growing.iter().map(|&i| f.members[i].name()).collect();
        s.push_str(&format!(
            "  {name:<14} {} of {} grow{}\n",
            c.growing.len(),
            c.members.len(),
            if grows.is_empty() || grows.len() > 8 {
                String::new()
            } else {
                format!(" ({})", grows.join(", "))
            }
        ));
    }
    s.push_str(&format!("\nrecordings ({})\n", f.members.len()));
    for RecordingRow {
        name,
        host,
        took,
        training,
        said: what,
        truncated,
    } in recording_rows(f)
    {
        let cut = if truncated { " (truncated)" } else { "" };
        s.push_str(&format!(
            "  {name:<10} {host:<10} {took:>9} {training:>14}{cut}  {what}\n"
        ));
    }
    s
}

pub fn md(f: &Fleet) -> String {
    let mut s = format!("**{}**\n\n", f.headline);
    if !f.outliers.is_empty() {
        s.push_str("| outlier | host | channel | how far |\n|---|---|---|---|\n");
        for OutlierRow {
            name,
            host,
            channel,
            how_far,
        } in outlier_rows(f)
        {
            s.push_str(&format!("| {name} | {host} | `{channel}` | {how_far} |\n"));
        }
        s.push('\n');
    }
    s.push_str("| recording | host | duration | training | headline |\n|---|---|---|---|---|\n");
    for RecordingRow {
        name,
        host,
        took,
        training,
        said,
        truncated: _,
    } in recording_rows(f)
    {
        let what = said.replace('|', "\\|");
        s.push_str(&format!(
            "| {name} | {host} | {took} | {training} | {what} |\n"
        ));
    }
    s
}

pub fn json(f: &Fleet) -> Value {
    let recordings: Vec<Value> = f
        .members
        .iter()
        .map(|m| {
            json!({
                "file": m.file.display().to_string(),
                "labels": m.labels,
                "host": m.host,
                "duration_s": m.duration_s,
                "training": m.training,
                "headline": m.headline,
                "truncated": m.truncated,
                "error": m.error,
                "digest": m.digest,
            })
        })
        .collect();
    let channels: serde_json::Map<String, Value> = f
        .channels
        .iter()
        .map(|(name, c)| {
            let files = |v: &[usize]| -> Vec<String> {
                v.iter()
                    .map(|&i| f.members[i].file.display().to_string())
                    .collect()
            };
            (
                name.clone(),
                json!({
                    "recordings": c.members.len(),
                    "growing": files(&c.growing),
                    "per": if c.per_step { "step" } else { "second" },
                    "median_slope": c.median,
                    "mad_slope": c.mad,
                }),
            )
        })
        .collect();
    let outliers: Vec<Value> = f
        .outliers
        .iter()
        .map(|o| {
            let m = &f.members[o.member];
            json!({
                "file": m.file.display().to_string(),
                "labels": m.labels,
                "host": m.host,
                "channel": o.channel,
                "slope": o.rate,
                "slope_per_s": o.rate_per_s,
                "per": if f.channels[&o.channel].per_step { "step" } else { "second" },
                "median_slope": f.channels[&o.channel].median,
                "mads": o.mads,
            })
        })
        .collect();
    json!({
        "headline": f.headline,
        "digest": f.digest,
        "recordings": recordings,
        "channels": channels,
        "outliers": outliers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(rank: usize, pss_per_s: f64, grows: bool) -> Member {
        let rate = |slope_per_s: f64, grows| Rate {
            unit: Unit::Bytes,
            slope_per_s,
            slope_per_step: Some(slope_per_s / 2.0),
            grows,
        };
        // Flat ranks' trends scatter a little around zero.
        let jitter = ((rank * 7919) % 13) as f64 - 6.0;
        Member {
            file: PathBuf::from(format!("rank-{rank}.flr")),
            labels: BTreeMap::from([("rank".to_owned(), rank.to_string())]),
            host: format!("node-{}", rank / 8),
            duration_s: 3600.0,
            training: None,
            headline: String::new(),
            ended_badly: false,
            truncated: false,
            error: None,
            channels: BTreeMap::from([
                ("tree.pss".to_owned(), rate(pss_per_s + jitter, grows)),
                ("mem.rss".to_owned(), rate(jitter, false)),
            ]),
            digest: format!("{rank:064x}"),
            warmup_s: 0.0,
            series: BTreeMap::new(),
        }
    }

    fn fleet(members: Vec<Member>) -> (Vec<Outlier>, String) {
        let f = Fleet::of(members);
        (f.outliers, f.headline)
    }

    /// One rank of 16 grows 41 MiB/h when the others scatter around zero:
    /// it alone is named, by the median and MAD of the ranks' rates.
    #[test]
    fn the_one_leaking_rank_is_named() {
        let leak = 41.0 * 1_048_576.0 / 3600.0;
        let members: Vec<Member> = (0..16)
            .map(|r| member(r, if r == 5 { leak } else { 0.0 }, r == 5))
            .collect();
        let (outliers, h) = fleet(members);
        assert_eq!(outliers.len(), 1, "{outliers:?}");
        assert_eq!(
            (outliers[0].member, outliers[0].channel.as_str()),
            (5, "tree.pss")
        );
        assert!(outliers[0].mads >= OUTLIER_MADS);
        assert_eq!(
            h,
            "rank 5 of 16 (node-0) grows 41.01 MiB/h in tree.pss; the other 15 do not."
        );
    }

    /// Of a rank's outlying channels the headline leads with the one whose
    /// bytes grow fastest (its RSS, 28 GiB/h), not the one furthest from
    /// the other ranks in MADs (its page tables, 52 MiB/h, which scatter
    /// less).
    #[test]
    fn the_headline_leads_with_the_growth_that_matters_most() {
        let per_h = |mib: f64| mib * 1_048_576.0 / 3600.0;
        let rate = |slope_per_s: f64, grows| Rate {
            unit: Unit::Bytes,
            slope_per_s,
            slope_per_step: None,
            grows,
        };
        let members: Vec<Member> = (0..4)
            .map(|r| {
                let mut m = member(r, 0.0, false);
                let leak = r == 2;
                // RSS: the others scatter by a few MiB/h; page tables, by bytes.
                let jitter = (r as f64 - 1.5) * per_h(4.0);
                m.channels.insert(
                    "mem.rss".into(),
                    rate(if leak { per_h(28.0 * 1024.0) } else { jitter }, leak),
                );
                m.channels.insert(
                    "mem.vm_pte".into(),
                    rate(if leak { per_h(52.0) } else { r as f64 }, leak),
                );
                m
            })
            .collect();
        let (outliers, h) = fleet(members);
        let pte = outliers.iter().find(|o| o.channel == "mem.vm_pte").unwrap();
        let rss = outliers.iter().find(|o| o.channel == "mem.rss").unwrap();
        assert!(
            pte.mads > rss.mads,
            "the page tables stand out further: {outliers:?}"
        );
        assert!(
            h.starts_with("rank 2 of 4 (node-0) grows 28.00 GiB/h in mem.rss"),
            "{h}"
        );
    }

    /// A leak every rank has is the job's, not an outlier's; a fleet where
    /// nothing grows says so; a growing rank no faster than the others'
    /// scatter (its own verdict notwithstanding) is not called different.
    #[test]
    fn a_leak_of_the_whole_job_and_a_flat_job_name_no_rank() {
        let leak = 10_000.0;
        let all: Vec<Member> = (0..16).map(|r| member(r, leak, true)).collect();
        let (outliers, h) = fleet(all);
        assert!(outliers.is_empty(), "{outliers:?}");
        assert!(
            h.starts_with("tree.pss grows in 16 of 16 recordings alike"),
            "{h}"
        );
        let flat: Vec<Member> = (0..16).map(|r| member(r, 0.0, false)).collect();
        let (outliers, h) = fleet(flat);
        assert!(outliers.is_empty());
        assert_eq!(
            h,
            "No rank stands out: 16 recordings, and no memory channel grows in any."
        );
        let barely: Vec<Member> = (0..16).map(|r| member(r, 0.0, r == 3)).collect();
        let (outliers, h) = fleet(barely);
        assert!(outliers.is_empty());
        assert!(
            h.starts_with("rank 3 grows in tree.pss (1 of 16 recordings): no faster"),
            "{h}"
        );
        // Of two, neither is the odd one out, and the leak is not the job's.
        let two: Vec<Member> = (0..2).map(|r| member(r, leak, r == 1)).collect();
        let (outliers, h) = fleet(two);
        assert!(outliers.is_empty());
        assert_eq!(
            h,
            "rank 1 grows in tree.pss (1 of 2 recordings): 2 recordings are too few to tell one that is different."
        );
    }
}
