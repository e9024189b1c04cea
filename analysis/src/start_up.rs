//! The corrections a channel's analysis gets from the run around it: growth
//! only in the start-up, settling after it, a copy bounded by the RSS it
//! copies, PSS read beside USS. `reading` applies them, in one place.

use crate::channel::{ChannelAnalysis, DAY_S, Note, Severity, Verdict};
use crate::{rules, tree};
use flatline_format::Kind;

/// The longest life of a job watched from its launch that is read as its
/// start-up: a framework's import and a model's load take seconds to tens
/// of seconds.
pub const START_UP_ONLY_S: f64 = 30.0;

/// Whether `e` is the watched job's exit within [`START_UP_ONLY_S`] of the
/// first reading (`first_s`, on the events' clock).
pub fn exit_in_start_up(e: &flatline_format::Event, first_s: f64) -> bool {
    matches!(e.kind, flatline_format::EventKind::TargetExited { .. })
        && e.t_ns as f64 / 1e9 - first_s < START_UP_ONLY_S
}

/// Re-reads a growing level as `insufficient` with [`Note::StartUp`]: the
/// job ended before its start-up could be told from a leak. Nothing is
/// projected; what it rose stays in `drift`. Pages copied under a still RSS
/// (`copied`, [`bound_copy`]) keep their finding: it stands on its own
/// evidence. Anything else is left as it is.
pub fn in_start_up(a: &mut ChannelAnalysis, copied: bool) {
    if growing_level(a, copied) {
        untold_as(a, Note::StartUp);
    }
}

/// The share of a start-up's rise that growth found soon after it must
/// reach before it is told from the start-up's tail ([`settling`]).
pub const SETTLE_SHARE: f64 = 0.01;

/// How long after a start-up of `warmup_s` its tail is weighed against it:
/// as long again as the start-up took, and at least [`START_UP_ONLY_S`].
pub fn settling_for_s(warmup_s: f64) -> f64 {
    warmup_s.max(START_UP_ONLY_S)
}

/// A found start-up's tail: a level that rose by `rise` during its
/// start-up (see [`start_up_rise`]) and grows after it, within
/// [`settling_for_s`] of its end, by a trend (slope × time since) under
/// [`SETTLE_SHARE`] of that rise is re-read as `insufficient` with
/// [`Note::Settling`]. A live window a few seconds past an import's end
/// sees the process take its last pages (2 pages a second for 11 s after a
/// 700 MB PyTorch start-up, then nothing) as a steady trend, and a leak and
/// that tail cannot be told apart until the trend outgrows the tail or the
/// time passes. A leak of 2 MiB/s after the same start-up passes the share
/// in 4 s. Copied pages (`copied`) keep their finding.
pub fn settling(a: &mut ChannelAnalysis, rise: f64, copied: bool) {
    if !growing_level(a, copied)
        || a.warmup_s <= 0.0
        || rise <= 0.0
        || a.duration_s >= settling_for_s(a.warmup_s)
        || a.slope_per_s * a.duration_s >= SETTLE_SHARE * rise
    {
        return;
    }
    untold_as(a, Note::Settling { rise });
}

/// What a level rose during its start-up: its first reading at or after
/// `cut` (the start-up's end, on `t`'s clock) less its first reading.
/// `None` where either is missing.
pub fn start_up_rise(t: &[f64], v: &[f64], cut: f64) -> Option<f64> {
    let first = v.iter().copied().find(|x| x.is_finite())?;
    let from = t.partition_point(|&ti| ti < cut);
    let at = v.get(from..)?.iter().copied().find(|x| x.is_finite())?;
    Some(at - first)
}

fn growing_level(a: &ChannelAnalysis, copied: bool) -> bool {
    a.kind == Kind::Level && a.verdict.is_growth() && a.slope_per_s > 0.0 && !copied
}

/// Growth re-read as not yet told (`note` says why): nothing projected;
/// what it rose stays in `drift`, its trend in `slope_per_s`.
fn untold_as(a: &mut ChannelAnalysis, note: Note) {
    a.verdict = Verdict::Insufficient;
    a.note = Some(note);
    a.confidence = 0.0;
    a.severity = None;
    a.time_to_limit_s = None;
    a.projection_24h = Some(0.0);
    a.rate_per_s = None;
    a.pct_per_hour = None;
    a.onset_s = None;
}

/// A PSS channel's growth stands only where its USS (read with it, from
/// the same `smaps_rollup`) grows too: `PSS = USS + Σ shared / sharers`,
/// and the second term rises whenever a process that shares those pages
/// exits, with nothing allocated. A copy-on-write or copy-on-access leak
/// makes pages private, so its USS grows with its PSS. `pss` is the PSS's
/// analysis, `uss` its sibling's; a PSS called growth whose USS is not is
/// re-read as flat (or noisy, if it moved by more than a flat level may),
/// with [`Note::SharedPages`].
pub fn reconcile_pss(pss: &mut ChannelAnalysis, uss: &ChannelAnalysis) {
    let grows = |a: &ChannelAnalysis| a.verdict.is_growth() && a.slope_per_s > 0.0;
    if !grows(pss) || grows(uss) || uss.verdict == Verdict::Insufficient {
        return;
    }
    let level = pss.baseline.abs().max(pss.final_value.abs());
    let band = (0.01 * level).max(rules::EVIDENCE_PAGES * 4096.0);
    pss.verdict = if pss.drift.abs() <= band {
        Verdict::Flat
    } else {
        Verdict::Noisy
    };
    pss.confidence = 0.5;
    pss.note = Some(Note::SharedPages);
    pss.severity = None;
    pss.time_to_limit_s = None;
    pss.projection_24h = Some(0.0);
    pss.slope_per_step = None;
    pss.onset_s = None;
}

/// A tree's sum (`tree.rss`, `tree.pss`, `tree.uss`) called growth (or
/// whose readings cannot tell, where every process's can) while none of
/// the processes it sums (`parts`: their channels of the same kind) grows
/// at the end, each flat, risen and held, or untold, and while
/// it rose by less than a flat level's band (1 % of its level): their own
/// small rises, each of which held, added together at their own times (a
/// DataLoader's workers copying a few pages of their parent once, each at
/// its own moment) are no trend of the job's. A leak spread thinly over
/// many processes is called once their sum passes that band. Re-read as
/// flat with [`Note::PartsFlat`].
pub fn sum_of_parts(sum: &mut ChannelAnalysis, parts: &[&ChannelAnalysis]) {
    let grows = |a: &ChannelAnalysis| a.verdict.is_growth() && a.slope_per_s > 0.0;
    let untold = |a: &ChannelAnalysis| a.verdict == Verdict::Insufficient;
    // A sum its readings cannot tell (a big tree's are few) is told by its
    // parts where every one of them is told.
    let told_by_parts = untold(sum) && !parts.iter().any(|p| untold(p));
    if !(grows(sum) || told_by_parts) || parts.is_empty() || parts.iter().any(|p| grows(p)) {
        return;
    }
    let level = sum.baseline.abs().max(sum.final_value.abs());
    if sum.drift.abs() > 0.01 * level {
        return;
    }
    sum.verdict = Verdict::Flat;
    sum.confidence = 0.5;
    sum.note = Some(Note::PartsFlat);
    sum.severity = None;
    sum.time_to_limit_s = None;
    sum.projection_24h = Some(0.0);
    sum.slope_per_step = None;
    sum.onset_s = None;
}

/// The process channels a tree's sum adds up (`tree.uss` → every
/// `pid<N>.uss` among `names`), by position; `None` for any other channel.
pub fn parts_of<'a>(sum: &str, names: impl Iterator<Item = &'a str>) -> Option<Vec<usize>> {
    let leaf = sum.strip_prefix("tree.")?;
    if !matches!(leaf, "rss" | "pss" | "uss") {
        return None;
    }
    Some(
        names
            .enumerate()
            .filter(|(_, n)| {
                n.strip_prefix("pid")
                    .and_then(|r| r.split_once('.'))
                    .is_some_and(|(pid, l)| {
                        l == leaf && !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())
                    })
            })
            .map(|(i, _)| i)
            .collect(),
    )
}

/// A level that grows while the RSS it is part of holds still is copying
/// pages it shares (copy-on-access: a process's PSS or USS, the tree's):
/// it cannot outgrow that RSS, so it reaches it when every page it shares
/// is copied. Where that comes before the limit it had, it is its limit;
/// growth that stops there is still growth, but it reaches no limit: a
/// warning. True when the bound applies.
pub fn bound_copy(own: &mut ChannelAnalysis, rss: &ChannelAnalysis) -> bool {
    let r = own.projection_24h.unwrap_or(0.0) / DAY_S;
    // Growth within the band its RSS is still in could be the RSS's own: a
    // copy is told by rising past it.
    if !(own.verdict.is_growth() && r > 0.0)
        || own.drift < tree::STILL_SHARE * rss.final_value.abs()
        || rss.verdict.is_growth()
        || rss.verdict == Verdict::Insufficient
        || !rss.final_value.is_finite()
    {
        return false;
    }
    let ceiling = rss.final_value.max(own.final_value);
    if own.limit.is_some_and(|l| l <= ceiling) {
        return false;
    }
    own.limit = Some(ceiling);
    own.time_to_limit_s = Some((ceiling - own.final_value) / r);
    own.severity = Some(Severity::Warning);
    true
}

/// The RSS channel a PSS or USS channel is part of (`pid42.uss` →
/// `pid42.rss`, `tree.pss` → `tree.rss`), if `name` is one.
pub fn rss_of(name: &str) -> Option<String> {
    let stem = name
        .strip_suffix(".pss")
        .or_else(|| name.strip_suffix(".uss"))?;
    (stem == "tree" || stem.starts_with("pid")).then(|| format!("{stem}.rss"))
}

/// The USS channel read with a PSS channel (`tree.pss` → `tree.uss`,
/// `pid42.pss` → `pid42.uss`), if `name` is one.
pub fn uss_of(name: &str) -> Option<String> {
    let stem = name.strip_suffix(".pss")?;
    (stem == "tree" || stem.starts_with("pid")).then(|| format!("{stem}.uss"))
}
