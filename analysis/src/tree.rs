//! What a recording says about a watched process tree: who was in it, who
//! grew, and the one finding per-process RSS cannot show (PSS grows while
//! every RSS stays flat: workers copying pages they only read).
//!
//! Receipts and the dashboard both ask here; the per-channel verdicts come
//! from [`super::analyze`] and are passed in.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{ChannelAnalysis, Verdict};
use flatline_catalog::names;
use flatline_format::Schema;
use flatline_format::{Event, EventKind};

/// One process that was part of the tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessSeen {
    pub pid: u32,
    pub name: String,
    pub role: String,
    /// Its parent, where the recording says.
    pub ppid: Option<u32>,
    /// When it joined the tree and left it, seconds since the start.
    pub started_s: Option<f64>,
    pub exited_s: Option<f64>,
    /// The stem of its channels (`pid4242`), where it had channels.
    pub channels: Option<String>,
    /// Its PSS verdict (after the start-up), and how much its PSS grew from
    /// the start of the tree's last worker (or its own start, if later) to
    /// its last reading, where it had channels.
    pub pss_verdict: Option<Verdict>,
    pub pss_growth: Option<f64>,
    /// Where its memory grew over the part analysed, by class, where its
    /// `smaps` was read twice in it and moved (see [`super::places`]).
    #[serde(rename = "where", skip_serializing_if = "Option::is_none")]
    pub where_: Option<super::places::Where>,
}

/// The process tree of a recording.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TreeSummary {
    pub processes: Vec<ProcessSeen>,
    /// Most processes in the tree at once (`tree.procs`).
    pub peak: usize,
    /// Processes seen at one reading only, gone before they could be named
    /// (`tree.brief`): in the sums for that reading, not in `processes`.
    pub brief: u64,
    /// Processes whose own memory (USS) is called growth by its readings and
    /// grew by at least [`MATERIAL_SHARE`] of its PSS since the tree took its
    /// shape, by pid.
    pub grew: Vec<u32>,
    /// One line for a person, where the tree shows something a single
    /// process's RSS would hide.
    pub finding: Option<String>,
    /// The copy-on-access finding's figures, where there is one.
    pub copy: Option<CopyOnAccess>,
    /// How old the page-table walks the tree's sums stood on were
    /// (`tree.age`), median and most, seconds; `None` in older recordings.
    pub sums_age_s: Option<[f64; 2]>,
}

/// Workers copying pages they share with their parent, in figures: what
/// the headline says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CopyOnAccess {
    /// The processes whose own memory grew by copying (in `grew`).
    pub copiers: Vec<u32>,
    /// Who copies, for a person: "worker 16151 and worker 16152 of main
    /// 16150", or "its 2 workers" where no one process's growth is told.
    pub who: String,
    /// How much the tree's PSS grew after its last worker started, and as
    /// a share of where it was.
    pub grew: f64,
    pub share: f64,
    /// Whether the copying stopped and what was copied stayed.
    pub held: bool,
    /// The copying began and ended inside the job's start-up (the part the
    /// analysis leaves out as its start-up), then held: a fact of the
    /// start-up, measured on the readings, not a trend. Left out of the
    /// JSON when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub in_start_up: bool,
    /// What the copiers can still copy: the pages they share (their RSS
    /// less their USS) at their last readings. A copy cannot outgrow it.
    pub room: Option<f64>,
}

/// Growth below this share of a channel's level is no finding about the
/// tree: a worker's interpreter copies a few pages once after the fork.
pub const MATERIAL_SHARE: f64 = 0.05;

/// An RSS that moves by less than this share of its level held still (the
/// band the analysis calls flat).
pub const STILL_SHARE: f64 = 0.01;

/// First and last reading of a column from index `from` on.
fn ends(col: &[f64], from: usize) -> Option<(f64, f64)> {
    let col = col.get(from..)?;
    let first = col.iter().copied().find(|v| !v.is_nan())?;
    let last = col.iter().rev().copied().find(|v| !v.is_nan())?;
    Some((first, last))
}

/// The medians of the first and last [`END_READINGS`] readings of a column
/// from index `from` on: where a level stood, unmoved by one reading (a
/// process freeing its memory as it begins to exit).
fn ends_held(col: &[f64], from: usize) -> Option<(f64, f64)> {
    let v: Vec<f64> = col
        .get(from..)?
        .iter()
        .copied()
        .filter(|v| !v.is_nan())
        .collect();
    let k = END_READINGS.min(v.len());
    if k == 0 {
        return None;
    }
    let median = |w: &[f64]| {
        let mut w = w.to_vec();
        w.sort_by(f64::total_cmp);
        w[w.len() / 2]
    };
    Some((median(&v[..k]), median(&v[v.len() - k..])))
}

/// Readings at each end whose median says where a still level stood.
const END_READINGS: usize = 5;

/// When the tree took its shape: the start of its last worker.
fn settled(seen: &BTreeMap<u32, ProcessSeen>) -> Option<f64> {
    seen.values()
        .filter(|p| p.role == "worker")
        .filter_map(|p| p.started_s)
        .fold(None, |a: Option<f64>, t| Some(a.map_or(t, |a| a.max(t))))
}

/// The finding no single process's RSS shows: the tree's PSS is called
/// growth, and from the moment the last
/// worker started, it grew by at least [`MATERIAL_SHARE`] while
/// every process's RSS moved by less than [`STILL_SHARE`]. Measured on the
/// readings, whatever shape the growth had (a DataLoader's workers copy the
/// pages they touch in their first epoch, then hold them). `grew` names the
/// copiers.
fn copy_on_access<'c, F: Fn(&str) -> Option<&'c [f64]>>(
    seen: &BTreeMap<u32, ProcessSeen>,
    data: &Columns<'c, F>,
    grew_pids: &[u32],
    pss_rose: bool,
    held: bool,
) -> Option<CopyOnAccess> {
    // A finding stands on the same evidence as any channel: the tree's PSS
    // (or a process's own USS) rose by its own readings, to the end or then
    // held (workers that copy what they touch in a first epoch keep it).
    if !pss_rose {
        return None;
    }
    let workers = seen.values().filter(|p| p.role == "worker").count();
    let since = settled(seen)?;
    let from = data.t.partition_point(|&t| t < since);
    let (before, after) = ends((data.column)(names::TREE_PSS)?, from)?;
    let grew = after - before;
    if !(grew > 0.0 && grew >= MATERIAL_SHARE * before) {
        return None;
    }
    let rss_still = |name: &str| {
        (data.column)(name)
            .and_then(|c| ends_held(c, from))
            .is_none_or(|(a, b)| (b - a).abs() <= STILL_SHARE * a.abs())
    };
    let every = rss_still(names::MEM_RSS)
        && seen
            .values()
            .filter_map(|p| p.channels.as_deref())
            .all(|stem| rss_still(&format!("{stem}.rss")));
    if !every {
        return None;
    }
    let copiers: Vec<&ProcessSeen> = grew_pids.iter().filter_map(|p| seen.get(p)).collect();
    let last = |stem: &str, leaf: &str| {
        (data.column)(&format!("{stem}.{leaf}")).and_then(|c| ends(c, from).map(|e| e.1))
    };
    let room = copiers
        .iter()
        .map(|p| {
            let stem = p.channels.as_deref()?;
            Some((last(stem, "rss")? - last(stem, "uss")?).max(0.0))
        })
        .sum::<Option<f64>>()
        .filter(|_| !copiers.is_empty());
    let who = if copiers.is_empty() {
        format!(
            "its {workers} worker{}",
            if workers == 1 { "" } else { "s" }
        )
    } else {
        who_copies(seen, &copiers)
    };
    Some(CopyOnAccess {
        copiers: copiers.iter().map(|p| p.pid).collect(),
        who,
        grew,
        share: grew / before,
        held,
        in_start_up: false,
        room,
    })
}

/// Workers that copied their parent's pages in a burst no trend test can
/// weigh: a rise of a few page-table walks that then held (a small dataset,
/// copied in seconds), or one the analysis left out as the job's start-up.
/// What happened is said on the figures [`copy_on_access`] stands on (the
/// tree's PSS from its shape to its last reading up by [`MATERIAL_SHARE`],
/// every process's RSS still), where some child's own memory (USS) rose by
/// a material share of its PSS too and the tree's PSS is not growth (growth
/// is the trend's to say). It held where the tree's PSS reads flat; it was
/// in the start-up where, besides, the tree took its shape before the
/// start-up ended.
fn copied_by_its_figures<'c, F: Fn(&str) -> Option<&'c [f64]>>(
    seen: &BTreeMap<u32, ProcessSeen>,
    data: &Columns<'c, F>,
    pss: Option<&ChannelAnalysis>,
    warmup_end: f64,
    copiers: &[u32],
) -> Option<CopyOnAccess> {
    let pss = pss?;
    if copiers.is_empty() || pss.verdict.is_growth() {
        return None;
    }
    let held = pss.verdict == Verdict::Flat;
    let mut c = copy_on_access(seen, data, copiers, true, held)?;
    c.in_start_up = held && settled(seen).is_some_and(|s| s < warmup_end);
    Some(c)
}

/// Those of `pids` whose parent is in the tree.
/// The copiers a copy-on-access finding names: the children whose growth
/// is told; where none's is (its own memory walked too seldom to weigh a
/// trend, or its copying read as the start-up), the children whose own
/// memory rose by a material share, as `copied_by_its_figures` names them,
/// rather than "its 2 workers".
fn named_copiers(seen: &BTreeMap<u32, ProcessSeen>, copiers: &[u32], own_rose: &[u32]) -> Vec<u32> {
    if copiers.is_empty() {
        children(seen, own_rose)
    } else {
        copiers.to_vec()
    }
}

fn children(seen: &BTreeMap<u32, ProcessSeen>, pids: &[u32]) -> Vec<u32> {
    pids.iter()
        .copied()
        .filter(|p| {
            seen.get(p)
                .and_then(|p| p.ppid)
                .is_some_and(|pp| seen.contains_key(&pp))
        })
        .collect()
}

/// The copiers by role and parent: "worker 11 and worker 12 of main 10",
/// "worker 21 of rank 20 and worker 31 of rank 30".
fn who_copies(seen: &BTreeMap<u32, ProcessSeen>, copiers: &[&ProcessSeen]) -> String {
    let mut groups: Vec<(Option<u32>, Vec<String>)> = Vec::new();
    for p in copiers {
        let me = format!("{} {}", p.role, p.pid);
        match groups.iter_mut().find(|g| g.0 == p.ppid) {
            Some(g) => g.1.push(me),
            None => groups.push((p.ppid, vec![me])),
        }
    }
    let and = |v: &[String]| match v {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    };
    let parts: Vec<String> = groups
        .iter()
        .map(|(ppid, names)| {
            let of = ppid
                .and_then(|pp| seen.get(&pp))
                .map_or(String::new(), |pp| format!(" of {} {}", pp.role, pp.pid));
            format!("{}{of}", and(names))
        })
        .collect();
    and(&parts)
}

/// The finding's line in the receipt.
fn copy_text(c: &CopyOnAccess) -> String {
    let one = c.copiers.len() == 1;
    let (copies, when) = match (c.in_start_up, one) {
        (true, _) => ("copied", " in the job's start-up"),
        (false, true) => ("copies", ""),
        (false, false) => ("copy", ""),
    };
    format!(
        "copy-on-access{when}: {} {copies} pages {} share{} with {} parent: the tree's PSS grew \
         {:+.1} MiB ({:+.0} %){}{} while every process's RSS stayed within {:.0} %{}: reading a \
         Python list of objects writes their reference counts (DataLoader workers); keep \
         such data in one numpy array, Arrow table or bytes object",
        c.who,
        if one { "it" } else { "they" },
        if one { "s" } else { "" },
        if one { "its" } else { "their" },
        c.grew / 1_048_576.0,
        c.share * 100.0,
        if c.in_start_up {
            " from their start"
        } else {
            ""
        },
        if c.held { ", then held," } else { "" },
        STILL_SHARE * 100.0,
        c.room
            .filter(|_| !c.held)
            .map_or(String::new(), |r| format!(
                "; at most {:.1} MiB more can be copied (the pages {} still share{})",
                r / 1_048_576.0,
                if one { "it" } else { "they" },
                if one { "s" } else { "" },
            )),
    )
}

/// A recording's samples as the tree summary reads them: times (seconds)
/// and each channel's column by name.
pub struct Columns<'a, F: Fn(&str) -> Option<&'a [f64]>> {
    pub t: &'a [f64],
    pub column: F,
}

impl<'a, F: Fn(&str) -> Option<&'a [f64]>> std::fmt::Debug for Columns<'a, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Columns")
            .field("samples", &self.t.len())
            .finish_non_exhaustive()
    }
}

/// Every process the recording names, by pid: from its start and exit
/// events, and from the labels of its channels (a process seen only by its
/// channels, started before the watch), with its PSS verdict.
fn processes_seen<'a>(
    schema: &Schema,
    events: &[Event],
    analysis: &impl Fn(&str) -> Option<&'a ChannelAnalysis>,
) -> BTreeMap<u32, ProcessSeen> {
    let mut seen: BTreeMap<u32, ProcessSeen> = BTreeMap::new();
    let t = |e: &Event| e.t_ns as f64 / 1e9;
    for e in events {
        match &e.kind {
            EventKind::ProcessStarted {
                pid,
                ppid,
                name,
                role,
            } => {
                // A reused pid is a new process: keep the latest under its pid.
                seen.insert(
                    *pid,
                    ProcessSeen {
                        pid: *pid,
                        name: name.clone(),
                        role: role.clone(),
                        ppid: Some(*ppid),
                        started_s: Some(t(e)),
                        exited_s: None,
                        channels: None,
                        pss_verdict: None,
                        pss_growth: None,
                        where_: None,
                    },
                );
            }
            EventKind::ProcessExited { pid, .. } => {
                if let Some(p) = seen.get_mut(pid) {
                    p.exited_s = Some(t(e));
                }
            }
            _ => {}
        }
    }
    // A process's channels carry its pid as a label; the last ones win, as above.
    for c in &schema.channels {
        let (Some(pid), Some(stem)) = (
            c.labels.get("pid").and_then(|p| p.parse::<u32>().ok()),
            c.name.strip_suffix(".pss"),
        ) else {
            continue;
        };
        let p = seen.entry(pid).or_insert_with(|| ProcessSeen {
            pid,
            name: c.labels.get("name").cloned().unwrap_or_default(),
            role: c.labels.get("role").cloned().unwrap_or_default(),
            ppid: c.labels.get("ppid").and_then(|p| p.parse().ok()),
            started_s: None,
            exited_s: None,
            channels: None,
            pss_verdict: None,
            pss_growth: None,
            where_: None,
        });
        p.channels = Some(stem.to_owned());
        p.pss_verdict = analysis(&c.name).map(|a| a.verdict);
    }
    seen
}

/// The tree of a recording, or `None` when it watched no tree. `analysis(name)`
/// gives a channel's analysis.
pub fn summarize<'a, 'c, F: Fn(&str) -> Option<&'c [f64]>>(
    schema: &Schema,
    events: &[Event],
    analysis: impl Fn(&str) -> Option<&'a ChannelAnalysis>,
    data: &Columns<'c, F>,
) -> Option<TreeSummary> {
    // Without workers, growth is counted from where start-up ended.
    let warmup_end = data.t.first().copied().unwrap_or(0.0) + analysis(names::TREE_PSS)?.warmup_s;
    let mut seen = processes_seen(schema, events, &analysis);
    // Growth since the tree took its shape (the last worker started; with no
    // workers, the start-up's end), or since the process started if later;
    // grew: by MATERIAL_SHARE or more.
    let from = data
        .t
        .partition_point(|&t| t < settled(&seen).unwrap_or(warmup_end));
    let mut grew = Vec::new();
    let mut grew_held = Vec::new();
    let mut untold_rose = Vec::new();
    // The tree's PSS called growth (or risen and held) by its own readings,
    // which come at every reading.
    let tree_rose = analysis(names::TREE_PSS).is_some_and(ChannelAnalysis::rose);
    // Whose own memory rose by a material share, whatever its readings'
    // trend says (see `copied_by_its_figures`).
    let mut own_rose = Vec::new();
    for p in seen.values_mut() {
        let column = |leaf: &str| {
            p.channels
                .as_deref()
                .and_then(|s| (data.column)(&format!("{s}.{leaf}")))
                .and_then(|c| ends(c, from))
        };
        let (pss, uss) = (column("pss"), column("uss"));
        p.pss_growth = pss.map(|(a, b)| b - a);
        // Grew: its own memory, its USS, is called growth by its readings
        // (the evidence rule of every channel), upwards, by a material share
        // of its PSS since the tree took its shape. Not its PSS: when one
        // worker copies the pages it shares with fifteen others, each of
        // the others' PSS rises too (a shared page's cost is split among
        // fewer), though none of them allocated anything.
        let own = p
            .channels
            .as_deref()
            .and_then(|s| analysis(&format!("{s}.uss")));
        // A big process's own memory is walked a few times a run (the
        // walks' CPU budget): where those few readings cannot weigh a trend
        // but rose by a material share, while the tree's PSS (read at every
        // reading) or another of its processes is called growth, the
        // process grew with them (a second worker copying as the first
        // does, walked half as often).
        let untold = own.is_some_and(|a| a.verdict == Verdict::Insufficient);
        let called = own.is_some_and(ChannelAnalysis::rose);
        let material = match (uss, pss) {
            (Some((a, b)), Some((level, _))) => b - a > 0.0 && b - a >= MATERIAL_SHARE * level,
            _ => false,
        };
        // A USS that rose under a still RSS with no copies of its own (its
        // fast signal, where recorded, says too few) is pages its sharers
        // left to it by copying them: a parent whose workers both copied a
        // page has it to itself now. It allocated nothing.
        let held_rss = p
            .channels
            .as_deref()
            .and_then(|s| (data.column)(&format!("{s}.rss")))
            .and_then(|c| ends_held(c, from))
            .is_some_and(|(a, b)| (b - a).abs() <= STILL_SHARE * a.abs());
        let own_copies = p
            .channels
            .as_deref()
            .and_then(|s| (data.column)(&format!("{s}.cow")))
            .and_then(|c| ends(c, from))
            .map(|(a, b)| b - a);
        let left_to_it = match (uss, own_copies) {
            (Some((a, b)), Some(copied)) => held_rss && copied < 0.5 * (b - a),
            _ => false,
        };
        if called && material && !left_to_it {
            grew.push(p.pid);
            grew_held.push((p.pid, own.is_some_and(ChannelAnalysis::rose_and_held)));
        } else if untold && material && !left_to_it {
            untold_rose.push(p.pid);
        }
        if material && !left_to_it {
            own_rose.push(p.pid);
        }
    }
    if tree_rose || !grew.is_empty() {
        grew_with(&mut grew, &mut grew_held, untold_rose);
    }
    // The tree's PSS rose by its own readings; or, where those are too
    // sparse to weigh (a big tree's full rounds come every several seconds),
    // processes' own USS did, read at every second while they copy.
    // Copies of a parent's pages are a child's: a parent whose USS rose
    // was left pages its children copied (its fault counts, which would
    // tell, also count faults that copy nothing), so only children of the
    // tree are named as copying, or stand for the tree's PSS.
    let copiers = children(&seen, &grew);
    let pss = analysis(names::TREE_PSS);
    let (rose, held) = if pss.is_some_and(ChannelAnalysis::rose) {
        (true, pss.is_some_and(ChannelAnalysis::rose_and_held))
    } else {
        let held = grew_held
            .iter()
            .filter(|(pid, _)| copiers.contains(pid))
            .all(|&(_, held)| held);
        (!copiers.is_empty(), held)
    };
    // Where each process grew, from the same moment on: what a start-up
    // (an import) or the workers' start took is not the growth.
    if let (Some(&a), Some(&b)) = (data.t.get(from).or(data.t.first()), data.t.last()) {
        let mut each = super::places::where_each(events, a, b);
        for p in seen.values_mut() {
            p.where_ = each.remove(&p.pid);
        }
    }
    let named = named_copiers(&seen, &copiers, &own_rose);
    let copy = copy_on_access(&seen, data, &named, rose, held).or_else(|| {
        copied_by_its_figures(&seen, data, pss, warmup_end, &children(&seen, &own_rose))
    });
    let finding = copy.as_ref().map(copy_text);
    let peak = (data.column)(names::TREE_PROCS)
        .map(|c| {
            c.iter()
                .copied()
                .filter(|v| v.is_finite())
                .fold(0.0, f64::max)
        })
        .filter(|&v| v > 0.0)
        .map_or(seen.len(), |v| v as usize);
    let sums_age_s = (data.column)(names::TREE_AGE).and_then(|c| {
        let mut v: Vec<f64> = c.iter().copied().filter(|v| v.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        Some([*v.get(v.len() / 2)?, *v.last()?])
    });
    let brief = (data.column)(names::TREE_BRIEF)
        .and_then(|c| c.iter().rev().copied().find(|v| v.is_finite()))
        .map_or(0, |v| v as u64);
    Some(TreeSummary {
        processes: seen.into_values().collect(),
        peak,
        brief,
        grew,
        finding,
        copy,
        sums_age_s,
    })
}

/// Processes whose own readings could not weigh a trend but rose by a
/// material share (`untold`) join those that grew (`grew`, with whether
/// each held): their readings say nothing of whether they held, so as the
/// others did.
fn grew_with(grew: &mut Vec<u32>, grew_held: &mut Vec<(u32, bool)>, untold: Vec<u32>) {
    let held = grew_held.iter().all(|&(_, h)| h);
    for pid in untold {
        grew.push(pid);
        grew_held.push((pid, held));
    }
    grew.sort_unstable();
}

/// Processes of a job that exit within this much of each other are one
/// teardown.
pub const TEARDOWN_GAP_S: f64 = 3.0;

/// Where a watched job's teardown began, in seconds on the events' clock:
/// the run of process exits (and the watched process's own) that ends the
/// recording, each within [`TEARDOWN_GAP_S`] of the next and the last one
/// within it of `end_s`. A job's memory while its processes exit (a rank
/// freeing its tensors, a launcher's PSS rising as the pages it shared are
/// left to it alone) is no part of how the job ran: receipts analyse up to
/// here. `None` when the recording did not end with its processes exiting.
pub fn teardown_s(events: &[Event], end_s: f64) -> Option<f64> {
    let t = |e: &Event| e.t_ns as f64 / 1e9;
    let mut exits: Vec<f64> = events
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::ProcessExited { .. } | EventKind::TargetExited { .. }
            )
        })
        .map(t)
        .collect();
    let last_start = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::ProcessStarted { .. }))
        .map(t)
        .fold(f64::NEG_INFINITY, f64::max);
    exits.sort_by(f64::total_cmp);
    let mut from = *exits.last()?;
    if end_s - from > TEARDOWN_GAP_S {
        return None;
    }
    for &x in exits.iter().rev().skip(1) {
        if from - x > TEARDOWN_GAP_S || x <= last_start {
            break;
        }
        from = x;
    }
    (from > last_start).then_some(from)
}

/// Where the analysis of a recording (or a stream that has ended) stops:
/// the job's teardown ([`teardown_s`]), moved back to where what it held
/// began its last fall ([`freed_before`]) in its resident memory (`tree.rss`,
/// else `mem.rss`) or, where the job counted its allocations (`watch
/// --sites`), in what each process held (`pid<N>.alloc_live`): an
/// interpreter frees its objects on the way out though glibc keeps the
/// pages. `t` is every sample's time (seconds); `column` a channel's
/// readings by name, aligned with `t`. None: the job did not end with its
/// processes exiting.
pub fn analysis_end<'a>(
    events: &[Event],
    t: &[f64],
    names: impl IntoIterator<Item = &'a str>,
    column: impl Fn(&str) -> Option<&'a [f64]>,
) -> Option<f64> {
    let td = teardown_s(events, t.last().copied().unwrap_or(0.0))?;
    let t0 = t.first().copied().unwrap_or(0.0);
    let rss = [names::TREE_RSS, names::MEM_RSS]
        .into_iter()
        .find_map(&column);
    let held: Vec<&[f64]> = names
        .into_iter()
        .filter(|n| n.ends_with(".alloc_live"))
        .filter_map(&column)
        .collect();
    Some(
        rss.into_iter()
            .chain(held)
            .filter_map(|v| freed_before(t, v, td))
            .filter(|&at| at > t0)
            .fold(td, f64::min),
    )
}

/// A job frees what it holds as it exits (an interpreter's finalisation,
/// a mapping closed) before the exit is seen: where its memory's last fall
/// began, within [`FREED_WINDOW_S`] before `teardown` (seconds, on the
/// clock of `t`), when a reading there falls more than 1 % (and 16 pages)
/// below an earlier one (the deepest such fall). `rss` is the tree's (or the process's) resident
/// size; `NaN` is no reading. The analysis then stops at that highest
/// reading's successor: a leak's receipt is not read "noisy" because its
/// process gave everything back in its last second.
pub fn freed_before(t: &[f64], rss: &[f64], teardown: f64) -> Option<f64> {
    let from = t.partition_point(|&x| x < teardown - FREED_WINDOW_S);
    let to = t.partition_point(|&x| x < teardown);
    let window: Vec<(usize, f64)> = (from..to)
        .filter(|&i| rss[i].is_finite())
        .map(|i| (i, rss[i]))
        .collect();
    // The deepest fall from a reading to a later one (a finalising
    // interpreter can allocate again on its way out, after the fall).
    let (mut top, mut peak_i, mut peak, mut fell) = (window.first()?.1, 0, 0.0, 0.0);
    let mut top_i = window.first()?.0;
    for &(i, v) in &window {
        if v > top {
            (top, top_i) = (v, i);
        }
        if top - v > fell {
            (fell, peak, peak_i) = (top - v, top, top_i);
        }
    }
    (fell > (0.01 * peak).max(16.0 * 4096.0) && peak_i + 1 < to).then(|| t[peak_i + 1])
}

/// How long before its exit is seen a job may give its memory back: an
/// interpreter with a framework loaded finalises for seconds on a busy
/// machine (a PyTorch job's fall came 4.8 s before its exit was seen).
pub const FREED_WINDOW_S: f64 = 10.0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_freed_just_before_the_exit_is_teardown() {
        let t: Vec<f64> = (0..100).map(|i| i as f64 * 0.5).collect();
        // Grows 1 MiB a reading, then gives 100 MiB back in its last second.
        let mut rss: Vec<f64> = (0..100).map(|i| 1e9 + i as f64 * 1048576.0).collect();
        rss[98] = 1e9;
        rss[99] = 1e9;
        assert_eq!(freed_before(&t, &rss, 50.0), Some(49.0));
        // Given back 5 s before the exit was seen, then a burst of
        // allocation on the way out above where it had been (measured on
        // a real PyTorch job): the fall still ends the analysis.
        let mut late: Vec<f64> = (0..100).map(|i| 1e9 + i as f64 * 1048576.0).collect();
        for v in &mut late[90..99] {
            *v = 1e9;
        }
        late[99] = 1.2e9;
        assert_eq!(freed_before(&t, &late, 50.0), Some(45.0));
        // Nothing given back, or less than 1 %: the teardown stays where it was.
        let flat: Vec<f64> = (0..100).map(|i| 1e9 + i as f64 * 1048576.0).collect();
        assert_eq!(freed_before(&t, &flat, 50.0), None);
        let mut small = flat.clone();
        small[99] = small[98] - 4.0 * 1048576.0;
        assert_eq!(freed_before(&t, &small, 50.0), None);
        // A fall long before the exit is no part of it.
        let mut early = flat;
        early[10] = 1e8;
        assert_eq!(freed_before(&t, &early, 50.0), None);
    }

    fn ev(t_s: f64, kind: EventKind) -> Event {
        Event {
            t_ns: (t_s * 1e9) as u64,
            kind,
        }
    }

    /// The analysis the copy-on-access tests read their channels with.
    fn copy_context() -> super::super::Context<'static> {
        super::super::Context {
            warmup_s: Some(0.0),
            min_growth: 4096.0,
            ..Default::default()
        }
    }

    /// The tree's summary of readings given as named columns.
    fn summarize_columns(
        schema: &Schema,
        events: &[Event],
        analyses: &std::collections::HashMap<String, ChannelAnalysis>,
        t: &[f64],
        cols: &std::collections::HashMap<String, Vec<f64>>,
    ) -> TreeSummary {
        let data = Columns {
            t,
            column: |n: &str| cols.get(n).map(Vec::as_slice),
        };
        summarize(schema, events, |n| analyses.get(n), &data).unwrap()
    }

    fn exited(t_s: f64, pid: u32) -> Event {
        ev(
            t_s,
            EventKind::ProcessExited {
                pid,
                name: "python".into(),
                role: "rank".into(),
            },
        )
    }

    fn started(t_s: f64, pid: u32) -> Event {
        ev(
            t_s,
            EventKind::ProcessStarted {
                pid,
                ppid: 1,
                name: "python".into(),
                role: "rank".into(),
            },
        )
    }

    #[test]
    fn the_teardown_is_the_run_of_exits_that_ends_the_recording() {
        // Two ranks exit, then the launcher: the teardown begins at the first.
        let events = [
            started(2.0, 11),
            started(2.1, 12),
            exited(5.0, 99), // a helper that left early
            exited(99.0, 11),
            exited(99.2, 12),
            ev(99.6, EventKind::TargetExited { pid: 10 }),
        ];
        assert_eq!(teardown_s(&events, 99.7), Some(99.0));
        // A recording that goes on long after the last exit has none.
        assert_eq!(teardown_s(&events, 120.0), None);
        // Exits before the last start are the job's own churn, not its end.
        let churn = [exited(50.0, 11), started(51.0, 13), exited(52.0, 12)];
        assert_eq!(teardown_s(&churn, 52.5), Some(52.0));
        assert_eq!(teardown_s(&[], 10.0), None);
    }

    /// `tree.pss` and the rss, pss and uss of processes 10, 11 and 12.
    fn three_processes() -> Schema {
        use flatline_format::{ChannelSpec, Group, Unit};
        let mut channels = vec![ChannelSpec::new("tree.pss", Unit::Bytes, Group::Memory)];
        for pid in [10, 11, 12] {
            for leaf in ["rss", "pss", "uss"] {
                channels.push(
                    ChannelSpec::new(format!("pid{pid}.{leaf}"), Unit::Bytes, Group::Memory)
                        .with_label("pid", pid.to_string()),
                );
            }
        }
        Schema { channels }
    }

    /// One worker of a rank copies the pages it shares with its parent and a
    /// sibling: its own memory (USS) grows, and the sibling's PSS rises too,
    /// because each shared page's cost is split among fewer. Only the worker
    /// that copies is named.
    #[test]
    fn grew_names_the_process_whose_own_memory_grows_not_its_sharers() {
        const MIB: f64 = 1_048_576.0;
        let schema = three_processes();
        let events = [started(0.0, 10), started(1.0, 11), started(1.0, 12)];
        let t: Vec<f64> = (0..=120).map(f64::from).collect();
        let wobble = |i: usize| [0.0, 4096.0, -4096.0, 0.0][i % 4];
        // From 10 s on, worker 11 copies 0.5 MiB/s of a 100 MiB list it
        // shared three ways: its USS and PSS climb; the parent's and worker
        // 12's PSS climb by a quarter of it each (their share of the
        // copied pages went from a third to a half); their USS stays put.
        let copied = |i: usize| (t[i] - 10.0).max(0.0) * 0.5 * MIB;
        let col = |f: &dyn Fn(usize) -> f64| (0..t.len()).map(|i| f(i) + wobble(i)).collect();
        let mut cols: std::collections::HashMap<String, Vec<f64>> = Default::default();
        for pid in [10, 11, 12] {
            let own = |i: usize| if pid == 11 { copied(i) } else { 0.0 };
            let share = |i: usize| if pid == 11 { 0.0 } else { copied(i) / 4.0 };
            cols.insert(format!("pid{pid}.rss"), col(&|_| 110.0 * MIB));
            cols.insert(
                format!("pid{pid}.pss"),
                col(&|i| 40.0 * MIB + own(i) * 2.0 / 3.0 + share(i)),
            );
            cols.insert(format!("pid{pid}.uss"), col(&|i| 5.0 * MIB + own(i)));
        }
        cols.insert("tree.pss".into(), col(&|i| 120.0 * MIB + copied(i)));
        let ctx = copy_context();
        let analyses: std::collections::HashMap<String, ChannelAnalysis> = cols
            .iter()
            .map(|(name, v)| (name.clone(), super::super::analyze(&t, v, &ctx)))
            .collect();
        // The sibling's PSS alone would call it growing: the old rule.
        assert!(
            analyses["pid12.pss"].verdict.is_growth(),
            "{:?}",
            analyses["pid12.pss"]
        );
        let tree = summarize_columns(&schema, &events, &analyses, &t, &cols);
        assert_eq!(tree.grew, [11]);
    }

    /// A big tree's full PSS rounds are too sparse to weigh (here five in
    /// two minutes: `insufficient`), but the copying worker's own USS, read
    /// every second while it copies, rose: the copy-on-access finding
    /// stands on that, and says the copies then held.
    #[test]
    fn copy_on_access_stands_on_a_copiers_own_memory_when_the_sums_are_sparse() {
        const MIB: f64 = 1_048_576.0;
        let schema = three_processes();
        let worker = |t_s: f64, pid: u32| {
            ev(
                t_s,
                EventKind::ProcessStarted {
                    pid,
                    ppid: 10,
                    name: "python".into(),
                    role: "worker".into(),
                },
            )
        };
        let events = [started(0.0, 10), worker(1.0, 11), worker(1.0, 12)];
        let t: Vec<f64> = (0..=120).map(f64::from).collect();
        let wobble = |i: usize| [0.0, 4096.0, -4096.0, 0.0][i % 4];
        // Worker 11 copies 1 MiB/s from 10 s to 60 s, then holds it.
        let copied = |i: usize| (t[i] - 10.0).clamp(0.0, 50.0) * MIB;
        let col = |f: &dyn Fn(usize) -> f64| (0..t.len()).map(|i| f(i) + wobble(i)).collect();
        let mut cols: std::collections::HashMap<String, Vec<f64>> = Default::default();
        for pid in [10, 11, 12] {
            let own = |i: usize| if pid == 11 { copied(i) } else { 0.0 };
            cols.insert(format!("pid{pid}.rss"), col(&|_| 110.0 * MIB));
            cols.insert(format!("pid{pid}.pss"), col(&|i| 40.0 * MIB + own(i)));
            cols.insert(format!("pid{pid}.uss"), col(&|i| 5.0 * MIB + own(i)));
        }
        let sparse: Vec<f64> = (0..t.len())
            .map(|i| {
                if i % 30 == 0 {
                    120.0 * MIB + copied(i)
                } else {
                    f64::NAN
                }
            })
            .collect();
        cols.insert("tree.pss".into(), sparse);
        let analyses = analysed(&t, &cols, &copy_context());
        assert!(!analyses["tree.pss"].rose(), "{:?}", analyses["tree.pss"]);
        assert!(
            analyses["pid11.uss"].rose_and_held(),
            "{:?}",
            analyses["pid11.uss"]
        );
        let tree = summarize_columns(&schema, &events, &analyses, &t, &cols);
        assert_eq!(tree.grew, [11]);
        let finding = tree.finding.expect("a copy-on-access finding");
        assert!(
            finding.starts_with("copy-on-access: worker 11 of rank 10 copies pages it shares")
                && finding.contains(", then held,"),
            "{finding}"
        );
    }

    /// Rank 10 from the start; its DataLoader workers 11 and 12 from 4 s.
    fn loader_events() -> [Event; 3] {
        let worker = |pid: u32| {
            ev(
                4.0,
                EventKind::ProcessStarted {
                    pid,
                    ppid: 10,
                    name: "pt_data_worker".into(),
                    role: "worker".into(),
                },
            )
        };
        [started(0.0, 10), worker(11), worker(12)]
    }

    /// Each column analysed on its readings (its `NaN`s left out).
    fn analysed(
        t: &[f64],
        cols: &std::collections::HashMap<String, Vec<f64>>,
        ctx: &super::super::Context<'_>,
    ) -> std::collections::HashMap<String, ChannelAnalysis> {
        cols.iter()
            .map(|(name, v)| {
                let (tt, vv): (Vec<f64>, Vec<f64>) = t
                    .iter()
                    .zip(v)
                    .filter(|(_, x)| x.is_finite())
                    .map(|(a, b)| (*a, *b))
                    .unzip();
                (name.clone(), super::super::analyze(&tt, &vv, ctx))
            })
            .collect()
    }

    /// Two DataLoader workers copy 100 MiB each of their parent's pages in
    /// their first ten seconds and are done before the start-up the
    /// analysis leaves out has ended: after it the tree reads flat, yet the
    /// copying is told, as a fact of the start-up, naming the workers and
    /// not their parent (whose USS rose by the pages left to it). Workers
    /// whose RSS rose with their USS (their own imports), or whose own
    /// memory barely moved (an array they only read), are no copying.
    #[test]
    fn copying_done_inside_the_start_up_is_told_and_nothing_else_is() {
        const MIB: f64 = 1_048_576.0;
        let schema = three_processes();
        let events = loader_events();
        let t: Vec<f64> = (0..=60).map(f64::from).collect();
        let wobble = |i: usize| [0.0, 4096.0, -4096.0, 0.0][i % 4];
        let tree = |copy_mib: f64, rss_follows: bool| {
            // Each worker copies from 4 s to 14 s, then holds it.
            let copied = |i: usize| (t[i] - 4.0).clamp(0.0, 10.0) / 10.0 * copy_mib * MIB;
            let col = |f: &dyn Fn(usize) -> f64| -> Vec<f64> {
                (0..t.len()).map(|i| f(i) + wobble(i)).collect()
            };
            let mut cols: std::collections::HashMap<String, Vec<f64>> = Default::default();
            for pid in [10, 11, 12] {
                let own = move |i: usize| {
                    if pid == 10 {
                        0.5 * copied(i)
                    } else {
                        copied(i)
                    }
                };
                let rss = move |i: usize| {
                    400.0 * MIB
                        + if rss_follows && pid != 10 {
                            copied(i)
                        } else {
                            0.0
                        }
                };
                cols.insert(format!("pid{pid}.rss"), col(&rss));
                cols.insert(format!("pid{pid}.pss"), col(&|i| 150.0 * MIB + own(i)));
                cols.insert(format!("pid{pid}.uss"), col(&|i| 5.0 * MIB + own(i)));
            }
            // The sums, read at a page-table walk every 3 s.
            let sums: Vec<f64> = (0..t.len())
                .map(|i| {
                    if i % 3 == 0 {
                        450.0 * MIB + 2.5 * copied(i) + wobble(i)
                    } else {
                        f64::NAN
                    }
                })
                .collect();
            cols.insert("tree.pss".into(), sums);
            // The receipt's analysis, after the start-up it found at 20 s.
            let ctx = super::super::Context {
                warmup_s: Some(20.0),
                min_growth: 4096.0,
                ..Default::default()
            };
            let analyses = analysed(&t, &cols, &ctx);
            assert_eq!(analyses["tree.pss"].verdict, Verdict::Flat);
            (analyses, cols)
        };
        let tree = |copy_mib: f64, rss_follows: bool| {
            let (analyses, cols) = tree(copy_mib, rss_follows);
            summarize_columns(&schema, &events, &analyses, &t, &cols)
        };
        let copied = tree(100.0, false);
        let c = copied.copy.as_ref().expect("the copying in the start-up");
        assert!(c.in_start_up && c.held, "{c:?}");
        assert_eq!(c.copiers, [11, 12]);
        // From the first walk after the workers started (6 s, 50 MiB in).
        assert!((c.grew / MIB - 200.0).abs() < 1.0, "{}", c.grew / MIB);
        let finding = copied.finding.unwrap();
        assert!(
            finding.starts_with(
                "copy-on-access in the job's start-up: worker 11 and worker 12 of rank 10 \
                 copied pages they share with their parent: the tree's PSS grew +200.0 MiB"
            ) && finding.contains("from their start, then held,"),
            "{finding}"
        );
        let imports = tree(100.0, true);
        assert_eq!(imports.copy, None, "{:?}", imports.finding);
        let read_only = tree(1.0, false);
        assert_eq!(read_only.copy, None, "{:?}", read_only.finding);
    }

    /// Copying that a trend cannot weigh and that did not hold (the tree's
    /// PSS reads noisy after the start-up) is still told by its figures, but
    /// neither as held nor as the start-up's; a tree's PSS called growth is
    /// the trend's finding, not this one.
    #[test]
    fn copying_told_by_its_figures_says_held_only_where_the_tree_reads_flat() {
        const MIB: f64 = 1_048_576.0;
        let schema = three_processes();
        let events = loader_events();
        let t: Vec<f64> = (0..=60).map(f64::from).collect();
        let copied = |i: usize| (t[i] - 4.0).clamp(0.0, 10.0) * 10.0 * MIB;
        let mut cols: std::collections::HashMap<String, Vec<f64>> = Default::default();
        for pid in [10, 11, 12] {
            let own = |i: usize| if pid == 10 { 0.0 } else { copied(i) };
            cols.insert(format!("pid{pid}.rss"), vec![400.0 * MIB; t.len()]);
            cols.insert(
                format!("pid{pid}.pss"),
                (0..t.len()).map(|i| 150.0 * MIB + own(i)).collect(),
            );
            cols.insert(
                format!("pid{pid}.uss"),
                (0..t.len()).map(|i| 5.0 * MIB + own(i)).collect(),
            );
        }
        cols.insert(
            "tree.pss".into(),
            (0..t.len())
                .map(|i| 450.0 * MIB + 2.0 * copied(i))
                .collect(),
        );
        let ctx = super::super::Context {
            warmup_s: Some(20.0),
            min_growth: 4096.0,
            ..Default::default()
        };
        let mut analyses = analysed(&t, &cols, &ctx);
        // The tree's PSS as a level that varies by ±10 % after the start-up.
        let swings: Vec<f64> = (0..t.len())
            .map(|i| 650.0 * MIB * if i % 2 == 0 { 1.1 } else { 0.9 })
            .collect();
        let noisy = super::super::analyze(&t, &swings, &ctx);
        assert_eq!(noisy.verdict, Verdict::Noisy);
        analyses.insert("tree.pss".into(), noisy);
        let tree = summarize_columns(&schema, &events, &analyses, &t, &cols);
        let c = tree.copy.expect("copying told by its figures");
        assert!(!c.held && !c.in_start_up, "{c:?}");
        assert_eq!(c.copiers, [11, 12]);
        let finding = tree.finding.unwrap();
        assert!(
            finding.starts_with("copy-on-access: worker 11 and worker 12 of rank 10 copy pages")
                && !finding.contains("held"),
            "{finding}"
        );
        // Called growth: the trend's finding, which says it grows.
        let rising: Vec<f64> = t.iter().map(|&s| 650.0 * MIB + s * MIB).collect();
        let growth = super::super::analyze(&t, &rising, &ctx);
        assert!(growth.verdict.is_growth());
        analyses.insert("tree.pss".into(), growth);
        let tree = summarize_columns(&schema, &events, &analyses, &t, &cols);
        let c = tree.copy.expect("the trend's finding");
        assert!(!c.held && !c.in_start_up, "{c:?}");
    }
}
