//! `flatline fleet`: many recordings of one job, one per rank or node, and
//! which of them is different.
//!
//! Each recording is analysed as `report` would, one after another (so the
//! memory held is one recording's), and only what the fleet compares is
//! kept: each level channel's growth rate and whether its own evidence calls
//! it growth. Per channel the ranks' rates are summarised by their median
//! and MAD (median absolute deviation, scaled to a standard deviation), not
//! their mean, so one leaking rank cannot hide by moving the average. A
//! rank is an **outlier** in a channel when its own analysis says the
//! channel grows, fewer than half the ranks grow in it, and its rate is at
//! least [`OUTLIER_MADS`] MADs above the median. Rates are per training step
//! where every recording has steps (ranks run in lock-step, so a slow node
//! is not a leaky one), else per second; neither depends on when each node's
//! clock started.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use flatline_analysis::Kind;
use flatline_telemetry::Unit;
use serde_json::{Value, json};

use crate::cli::{FleetArgs, ReportFormat};
use flatline_receipt::fmt::{thousands, value};

/// How far above the ranks' median, in MADs, a growing rank's rate must be
/// to be named as the one that is different.
pub const OUTLIER_MADS: f64 = 5.0;

/// Fewest recordings of a channel that can show one of them different (as
/// the Prometheus rule's `>= 3`): of two, neither is the odd one out.
pub const MIN_RANKS: usize = 3;

pub mod model;

pub use model::{ChannelSummary, Fleet, Member, Outlier, Rate};

/// The recordings named: files as given, folders as the `.flr` files in
/// them, by name.
pub fn files(args: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for a in args {
        if a.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(a)
                .with_context(|| format!("reading the folder {}", a.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.extension()
                        .is_some_and(|x| x == flatline_telemetry::recording::EXTENSION)
                })
                .collect();
            if found.is_empty() {
                anyhow::bail!("{} holds no recordings (*.flr)", a.display());
            }
            found.sort();
            out.extend(found);
        } else {
            out.push(a.clone());
        }
    }
    Ok(out)
}

/// Reads one recording within `budget` bytes of samples.
fn member(path: &Path, budget: usize) -> Member {
    let mut m = Member {
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
    };
    let rec = match crate::commands::report::open_within(path, budget) {
        Ok(r) => r,
        Err(e) => {
            m.error = Some(format!("{e:#}"));
            return m;
        }
    };
    let receipt = crate::commands::report::analyse(&rec, None);
    m.headline = receipt.headline().to_owned();
    m.ended_badly = receipt
        .facts
        .ending
        .headline(
            receipt.facts.rank.as_deref(),
            &value,
            &flatline_receipt::fmt::duration,
        )
        .is_some();
    m.labels = rec.header.labels.clone();
    m.host = rec.header.host.hostname.clone();
    m.duration_s = rec.duration_s();
    m.training = crate::commands::report::training_axes(&rec);
    m.truncated = rec.is_truncated();
    m.digest = rec.digest.clone();
    m.warmup_s = receipt.warmup.seconds();
    // Steps a second over the run, from its step axis: a rate per step is
    // the trend per second over it (the analysis's own per-step figure is
    // its verdict's, 0 for what it calls flat, and would leave no spread).
    let column = |i: usize| rec.columns[i].as_slice();
    let steps_per_s =
        flatline_analysis::rules::step_axis(&rec.header.schema, column).and_then(|i| {
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
        if a.kind != Kind::Level || r.spec.labels.contains_key("pid") || !a.slope_per_s.is_finite()
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

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Each channel's summary across `members`, and the outliers, most
/// standing-out first.
pub fn compare(members: &[Member]) -> (BTreeMap<String, ChannelSummary>, Vec<Outlier>) {
    let mut names: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, m) in members.iter().enumerate() {
        for name in m.channels.keys() {
            names.entry(name).or_default().push(i);
        }
    }
    let mut channels = BTreeMap::new();
    let mut outliers = Vec::new();
    for (name, have) in names {
        let rate = |i: usize| members[i].channels[name];
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

/// A rate per hour in its unit: "41.0 MiB/h".
fn per_hour(rate_per_s: f64, unit: Unit) -> String {
    format!("{}/h", value(rate_per_s * 3600.0, unit))
}

/// One sentence for the whole fleet; a recording whose job lost a process
/// to the OOM killer (or ended out of memory) is told first.
pub fn headline(
    members: &[Member],
    channels: &BTreeMap<String, ChannelSummary>,
    outliers: &[Outlier],
) -> String {
    let trends = trend_headline(members, channels, outliers);
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

fn trend_headline(
    members: &[Member],
    channels: &BTreeMap<String, ChannelSummary>,
    outliers: &[Outlier],
) -> String {
    let n = members.iter().filter(|m| m.error.is_none()).count();
    if let Some(first) = outliers.first() {
        let mut same: Vec<&Outlier> = outliers
            .iter()
            .filter(|o| o.channel == first.channel)
            .collect();
        same.sort_by_key(|o| o.member);
        let fastest = same.iter().map(|o| o.rate_per_s).fold(f64::MIN, f64::max);
        let unit = channels[&first.channel].unit;
        let host = |o: &Outlier| {
            let m = &members[o.member];
            if m.host.is_empty() {
                String::new()
            } else {
                format!(" ({})", m.host)
            }
        };
        let names: Vec<String> = same
            .iter()
            .map(|o| format!("{}{}", members[o.member].name(), host(o)))
            .collect();
        let others = channels[&first.channel].members.len() - same.len();
        let mut s = if same.len() == 1 {
            format!(
                "{} of {n}{} grows {} in {}; the other {others} do not.",
                members[first.member].name(),
                host(first),
                per_hour(first.rate_per_s, unit),
                first.channel
            )
        } else {
            let (last, before) = names.split_last().expect("two or more");
            format!(
                "{} and {last} of {n} grow in {} (up to {}); the other {others} do not.",
                before.join(", "),
                first.channel,
                per_hour(fastest, unit)
            )
        };
        // The same ranks standing out in other channels (a leak shows in
        // RSS, PSS and USS alike), named; other ranks elsewhere, counted.
        let ours = |o: &&Outlier| same.iter().any(|x| x.member == o.member);
        let mut also: Vec<&str> = outliers
            .iter()
            .filter(|o| o.channel != first.channel && ours(o))
            .map(|o| o.channel.as_str())
            .collect();
        also.sort_unstable();
        also.dedup();
        if !also.is_empty() {
            let more = also.len().saturating_sub(3);
            let mut list = also.iter().take(3).copied().collect::<Vec<_>>().join(", ");
            if more > 0 {
                list.push_str(&format!(" and {more} more"));
            }
            s.push_str(&format!(" Also in {list}."));
        }
        let others = outliers
            .iter()
            .filter(|o| o.channel != first.channel && !ours(o))
            .count();
        if others > 0 {
            s.push_str(&format!(
                " {others} more outliers: other ranks in other channels."
            ));
        }
        return s;
    }
    let widest = channels
        .iter()
        .filter(|(_, c)| !c.growing.is_empty())
        .max_by_key(|(_, c)| c.growing.len());
    let Some((name, c)) = widest else {
        return format!("No rank stands out: {n} recordings, and no memory channel grows in any.");
    };
    let (k, of) = (c.growing.len(), c.members.len());
    if of >= MIN_RANKS && k * 2 > of {
        return format!(
            "{name} grows in {k} of {of} recordings alike (median {}): the whole job's, not one rank's.",
            if c.per_step {
                format!("{}/step", value(c.median, c.unit))
            } else {
                per_hour(c.median, c.unit)
            }
        );
    }
    // Some grow, not most, and none is an outlier: say who, and why not.
    let mut names: Vec<String> = c.growing.iter().map(|&i| members[i].name()).collect();
    if names.len() > 3 {
        let more = names.len() - 3;
        names.truncate(3);
        names.push(format!("{more} more"));
    }
    let why = if of < MIN_RANKS {
        let s = if of == 1 { "" } else { "s" };
        format!(
            "{of} recording{s} {} too few to tell one that is different",
            if of == 1 { "is" } else { "are" }
        )
    } else {
        "no faster than the ranks' spread allows, so none is called different".to_owned()
    };
    format!(
        "{} grow{} in {name} ({k} of {of} recordings): {why}.",
        names.join(", "),
        if k == 1 { "s" } else { "" }
    )
}

/// Reads and compares the recordings, one at a time within `budget` bytes.
pub fn read(paths: &[PathBuf], budget: usize) -> Fleet {
    let mut members: Vec<Member> = paths.iter().map(|p| member(p, budget)).collect();
    members.sort_by_key(Member::sort_key);
    let (channels, outliers) = compare(&members);
    let headline = headline(&members, &channels, &outliers);
    Fleet {
        members,
        channels,
        outliers,
        headline,
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

/// Each outlier as the receipts list it: who, where, which channel, how far.
fn outlier_rows(f: &Fleet) -> Vec<[String; 4]> {
    f.outliers
        .iter()
        .map(|o| {
            let m = &f.members[o.member];
            [m.name(), m.host.clone(), o.channel.clone(), how_far(f, o)]
        })
        .collect()
}

/// Each recording as the receipts list it: who, where, how long, its
/// steps, what it says; and whether it was cut short.
fn recording_rows(f: &Fleet) -> Vec<([String; 5], bool)> {
    f.members
        .iter()
        .map(|m| {
            let row = [
                m.name(),
                m.host.clone(),
                flatline_receipt::fmt::duration(m.duration_s),
                m.training.clone().unwrap_or_default(),
                m.said(),
            ];
            (row, m.truncated)
        })
        .collect()
}

pub fn text(f: &Fleet) -> String {
    let mut s = format!("{}\n\n", f.headline);
    if !f.outliers.is_empty() {
        s.push_str("outliers\n");
        for [name, host, channel, far] in outlier_rows(f) {
            s.push_str(&format!("  {name:<10} {host:<10} {channel:<12} {far}\n"));
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
    for ([name, host, took, training, what], truncated) in recording_rows(f) {
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
        for [name, host, channel, far] in outlier_rows(f) {
            s.push_str(&format!("| {name} | {host} | `{channel}` | {far} |\n"));
        }
        s.push('\n');
    }
    s.push_str("| recording | host | duration | training | headline |\n|---|---|---|---|---|\n");
    for ([name, host, took, training, what], _) in recording_rows(f) {
        let what = what.replace('|', "\\|");
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
        "digest": set_digest(&f.members),
        "recordings": recordings,
        "channels": channels,
        "outliers": outliers,
    })
}

pub fn run(args: &FleetArgs, viewer: &dyn crate::Viewer) -> Result<()> {
    let windowed = args.window || args.screenshot.is_some();
    if windowed {
        viewer.check_display()?;
    }
    let paths = files(&args.files)?;
    let f = read(&paths, (args.memory_mib as usize) << 20);
    let n = f.members.len();
    let bad: Vec<String> = f
        .members
        .iter()
        .filter(|m| m.error.is_some())
        .map(|m| m.file.display().to_string())
        .collect();
    if windowed {
        viewer.fleet(args, f)?;
    } else {
        match args.format {
            ReportFormat::Text => print!("{}", text(&f)),
            ReportFormat::Md => print!("{}", md(&f)),
            ReportFormat::Json => println!("{}", serde_json::to_string_pretty(&json(&f))?),
        }
    }
    if let Some(first) = bad.first() {
        anyhow::bail!(
            "{} of {n} recordings could not be read (the first: {first})",
            thousands(bad.len() as u64),
        );
    }
    Ok(())
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
        let (channels, outliers) = compare(&members);
        let h = headline(&members, &channels, &outliers);
        (outliers, h)
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
