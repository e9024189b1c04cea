//! The allocation sites of a `watch --sites` recording (`site<N>.live` and
//! its siblings, labelled with the site's pid and frames) as heap dumps at
//! intervals, the way heapprofd reports a process's heap: per call stack,
//! bytes (and blocks) allocated and freed since the start, totals that only
//! grow, whose difference is what the stack holds. Perfetto draws each dump
//! as a flame graph of the process; the Chrome export draws the held bytes
//! as counters.

use std::collections::BTreeMap;

use flatline_telemetry::recording::Recording;

use super::model::{Dump, HeapTotals, Model, SiteFrame, TraceRange, is_site};

/// At most about this many dumps, however long the recording.
const MAX_DUMPS: f64 = 60.0;

/// The intervals a dump interval is chosen from, in seconds: round ones.
const EVERY_S: [f64; 18] = [
    1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0,
    10800.0, 21600.0, 43200.0, 86400.0,
];

/// One site's channels and its totals at the last dump.
#[derive(Debug)]
struct Site {
    pid: u32,
    stack: usize,
    live: usize,
    alloc_bytes: Option<usize>,
    objects: Option<usize>,
    allocs: Option<usize>,
    last: HeapTotals,
}

/// The shortest round interval that gives at most [`MAX_DUMPS`] dumps over
/// `span_s` seconds (a day past a long week's 60).
pub fn every_s(span_s: f64) -> f64 {
    EVERY_S
        .iter()
        .copied()
        .find(|e| span_s / e <= MAX_DUMPS)
        .unwrap_or(86400.0)
}

/// Adds the sites' frames, stacks and dumps to `m`.
pub fn add_dumps(m: &mut Model, rec: &Recording, range: TraceRange) {
    let mut sites = find_sites(m, rec, range);
    if sites.is_empty() {
        return;
    }
    let kept: Vec<usize> = (0..rec.t_ns.len())
        .filter(|&i| range.holds(rec.t_ns[i]))
        .collect();
    let (Some(&first), Some(&last)) = (kept.first(), kept.last()) else {
        return;
    };
    let (t0, t1) = (rec.t_ns[first], rec.t_ns[last]);
    let every_ns = (every_s((t1 - t0) as f64 / 1e9) * 1e9) as u64;
    // From the range's first sample on, so a part's first dump is where
    // it starts.
    let mut times: Vec<u64> = (0..)
        .map(|k| t0 + k * every_ns)
        .take_while(|&t| t < t1)
        .collect();
    times.push(t1);
    for t in times {
        let j = kept[kept.partition_point(|&i| rec.t_ns[i] <= t) - 1];
        let mut by_pid: BTreeMap<u32, BTreeMap<usize, HeapTotals>> = BTreeMap::new();
        let mut read: Vec<u32> = Vec::new();
        for s in &mut sites {
            // A site seen before and read no more (its process ended) has
            // freed all it held: its totals stay, so a stack two sites
            // share never falls.
            let now = reading(rec, s.live, j, &kept);
            if now.is_none() && s.last == HeapTotals::default() {
                continue;
            }
            if now.is_some() {
                read.push(s.pid);
            }
            let live = now.unwrap_or(0.0);
            let at = |k: Option<usize>| k.and_then(|k| reading(rec, k, j, &kept));
            s.last = advance(s.last, live, at(s.alloc_bytes), at(s.objects), at(s.allocs));
            let sum = by_pid.entry(s.pid).or_default().entry(s.stack).or_default();
            sum.stack = s.stack;
            sum.allocated += s.last.allocated;
            sum.freed += s.last.freed;
            sum.allocs += s.last.allocs;
            sum.frees += s.last.frees;
        }
        for (pid, stacks) in by_pid.into_iter().filter(|(p, _)| read.contains(p)) {
            m.dumps.push(Dump {
                t_ns: m.wall(rec.t_ns[j]),
                pid,
                samples: stacks.into_values().collect(),
            });
        }
    }
}

/// The site channels the range keeps, their stacks interned into `m`.
fn find_sites(m: &mut Model, rec: &Recording, range: TraceRange) -> Vec<Site> {
    let schema = &rec.header.schema;
    let mut frames: BTreeMap<SiteFrame, usize> = BTreeMap::new();
    let mut stacks: BTreeMap<Vec<usize>, usize> = BTreeMap::new();
    let mut sites = Vec::new();
    for (k, spec) in schema.channels.iter().enumerate() {
        let Some(stem) = spec.name.strip_suffix(".live") else {
            continue;
        };
        let Some(pid) = spec.labels.get("pid").and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !is_site(spec) || range.pid.is_some_and(|want| want != pid) {
            continue;
        }
        let mut stack: Vec<SiteFrame> = crate::pprof::frames(&spec.labels);
        // Innermost first in the label; the flame graph's root first here.
        stack.reverse();
        let ids: Vec<usize> = stack
            .into_iter()
            .map(|f| {
                let n = frames.len();
                *frames.entry(f).or_insert(n)
            })
            .collect();
        let n = stacks.len();
        let stack = *stacks.entry(ids).or_insert(n);
        let sibling = |leaf: &str| schema.index_of(&format!("{stem}.{leaf}"));
        sites.push(Site {
            pid,
            stack,
            live: k,
            alloc_bytes: sibling("alloc_bytes"),
            objects: sibling("objects"),
            allocs: sibling("allocs"),
            last: HeapTotals::default(),
        });
    }
    m.frames = vec![SiteFrame::default(); frames.len()];
    for (f, i) in frames {
        m.frames[i] = f;
    }
    m.stacks = vec![Vec::new(); stacks.len()];
    for (s, i) in stacks {
        m.stacks[i] = s;
    }
    sites
}

/// Channel `k`'s latest reading at or before sample `j` (of the samples
/// `kept`), while the channel lives; `None` before it joined or once it
/// ended (its process is gone).
fn reading(rec: &Recording, k: usize, j: usize, kept: &[usize]) -> Option<f64> {
    let life = rec.lifetimes.get(k)?;
    if j < life.from || life.until.is_some_and(|u| j >= u) {
        return None;
    }
    let column = rec.columns.get(k)?;
    let upto = kept.partition_point(|&i| i <= j);
    kept[..upto]
        .iter()
        .rev()
        .take_while(|&&i| i >= life.from)
        .map(|&i| column[i])
        .find(|v| v.is_finite())
}

/// The totals after `last` given a site's estimates now: `live` bytes held,
/// bytes ever allocated, blocks held and blocks ever allocated. The
/// estimates are noisy; the totals never fall (trace processor refuses a
/// dump whose totals do) and their difference is `live` exactly.
fn advance(
    last: HeapTotals,
    live: f64,
    alloc_bytes: Option<f64>,
    objects: Option<f64>,
    allocs: Option<f64>,
) -> HeapTotals {
    let held = live.max(0.0).round() as u64;
    let allocated = (alloc_bytes.unwrap_or(0.0).max(0.0).round() as u64)
        .max(last.allocated)
        .max(held + last.freed);
    let blocks = objects.unwrap_or(0.0).max(0.0).round() as u64;
    let count = (allocs.unwrap_or(0.0).max(0.0).round() as u64)
        .max(last.allocs)
        .max(blocks + last.frees);
    HeapTotals {
        stack: last.stack,
        allocated,
        freed: allocated - held,
        allocs: count,
        frees: count - blocks,
    }
}

#[cfg(test)]
mod tests {
    use super::{HeapTotals, advance, every_s};

    #[test]
    fn a_long_recording_gets_at_most_sixty_dumps() {
        assert_eq!(every_s(30.0), 1.0);
        assert_eq!(every_s(61.0), 2.0);
        assert_eq!(every_s(3600.0), 60.0);
        assert_eq!(every_s(7.0 * 86400.0), 10800.0);
        for span in [1.0, 59.0, 600.0, 5000.0, 86400.0, 30.0 * 86400.0] {
            let every = every_s(span);
            assert!(span / every <= 60.0 || every == 86400.0, "{span}");
        }
    }

    #[test]
    fn noisy_estimates_give_totals_that_never_fall() {
        let mut t = HeapTotals::default();
        // live, allocated (lagging, then ahead), blocks, blocks allocated.
        for (live, alloc) in [(100.0, 50.0), (300.0, 900.0), (200.0, 850.0), (0.0, 0.0)] {
            let next = advance(t, live, Some(alloc), Some(1.0), None);
            assert!(next.allocated >= t.allocated && next.freed >= t.freed);
            assert_eq!(next.allocated - next.freed, live as u64);
            t = next;
        }
    }
}
