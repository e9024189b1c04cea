//! Where a process's memory grew: the first and last `classes` facts of a
//! process over a span (see [`flatline_format::classes`]), class by
//! class, said as what to do about it. The fixes are opposite: objects
//! that accumulate (a leak in the program), an allocator keeping freed
//! memory (glibc's arenas), tensors piling up in `/dev/shm`, a mapped file
//! read further (page cache the kernel reclaims: no leak at all), threads
//! never ended.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use flatline_catalog::classes::{CLASSES, CLASSES_MOVED};
use flatline_format::{Event, EventKind};

/// The least growth told, as a share of what the process held at first.
pub const MATERIAL: f64 = 0.05;

/// Where one process's memory grew over a span.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Where {
    /// Growth by class (PSS, bytes): `heap`, `anon`, `shmem`, `file`,
    /// `stack`, `gpu`, `other`.
    pub classes: BTreeMap<String, f64>,
    /// The class that grew most, and its share of all that grew.
    pub largest: String,
    pub share: f64,
    /// The two readings compared, seconds since the start.
    pub from_s: f64,
    pub to_s: f64,
    /// Anonymous memory's shape: regions added, the most common size at
    /// the end and how many more of it, glibc arenas added.
    pub regions: f64,
    pub region_size: Option<f64>,
    pub of_size: f64,
    pub arenas: f64,
    /// glibc arenas at the last reading, and how much of the growth is in
    /// them (bytes).
    pub arenas_held: f64,
    pub in_arenas: f64,
    /// Shared-memory segments that grew, by name, bytes (of the few
    /// largest each reading names), and how many more there are.
    pub segments: BTreeMap<String, f64>,
    pub new_segments: f64,
    /// For a person: "97 % in anonymous memory: 212 new regions of 256 KiB".
    pub text: String,
}

/// Where process `pid` grew between its first and last `classes` readings
/// within `[from_s, to_s]` (seconds on the events' clock); `None` where it
/// has fewer than two, or they grew by less than 4 MiB or [`MATERIAL`] of
/// what it held at the first.
pub fn where_grew(events: &[Event], pid: u32, from_s: f64, to_s: f64) -> Option<Where> {
    where_each(events, from_s, to_s).remove(&pid)
}

/// [`where_grew`] for every process at once, in one pass over the events
/// (the window asks once a second, of a tree that may have had thousands
/// of processes).
pub fn where_each(events: &[Event], from_s: f64, to_s: f64) -> HashMap<u32, Where> {
    type Reading<'e> = (f64, &'e BTreeMap<String, f64>);
    let mut ends: HashMap<u32, (Reading<'_>, Option<Reading<'_>>)> = HashMap::new();
    for e in events {
        let t = e.t_ns as f64 / 1e9;
        if !(t >= from_s && t <= to_s) {
            continue;
        }
        let EventKind::Fact {
            kind,
            pid: Some(pid),
            figures,
            ..
        } = &e.kind
        else {
            continue;
        };
        if kind != "classes" {
            continue;
        }
        ends.entry(*pid)
            .and_modify(|(_, last)| *last = Some((t, figures)))
            .or_insert(((t, figures), None));
    }
    ends.into_iter()
        .filter_map(|(pid, (first, last))| Some((pid, between(first, last?)?)))
        .collect()
}

/// Where a process grew between two of its readings: (seconds, figures).
fn between(
    (t0, first): (f64, &BTreeMap<String, f64>),
    (t1, last): (f64, &BTreeMap<String, f64>),
) -> Option<Where> {
    let fig = |m: &BTreeMap<String, f64>, k: &str| m.get(k).copied().unwrap_or(0.0);
    let classes: BTreeMap<String, f64> = CLASSES
        .iter()
        .map(|&c| (c.to_owned(), fig(last, c) - fig(first, c)))
        .collect();
    // Growth that matters: 4 MiB and a twentieth of what it held (an
    // interpreter touching its libraries' pages is no finding).
    let grew: f64 = classes.values().filter(|v| **v > 0.0).sum();
    let held: f64 = CLASSES.iter().map(|c| fig(first, c)).sum();
    if grew < (4.0 * CLASSES_MOVED).max(MATERIAL * held) {
        return None;
    }
    let (largest, top) = classes
        .iter()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(k, v)| (k.clone(), *v))?;
    let share = top / grew;
    let segments: BTreeMap<String, f64> = last
        .iter()
        .filter_map(|(k, v)| {
            let name = k.strip_prefix("shm:")?;
            let d = v - first.get(k).copied().unwrap_or(0.0);
            (d > 0.0).then(|| (name.to_owned(), d))
        })
        .collect();
    let size = fig(last, "mode_size");
    let of_size = if size > 0.0 && size == fig(first, "mode_size") {
        fig(last, "mode_count") - fig(first, "mode_count")
    } else {
        fig(last, "mode_count")
    };
    let mut w = Where {
        classes,
        largest,
        share,
        from_s: t0,
        to_s: t1,
        regions: fig(last, "regions") - fig(first, "regions"),
        region_size: (size > 0.0).then_some(size),
        of_size,
        arenas: fig(last, "arenas") - fig(first, "arenas"),
        arenas_held: fig(last, "arenas"),
        in_arenas: fig(last, "in_arenas") - fig(first, "in_arenas"),
        segments,
        new_segments: fig(last, "shm_segments") - fig(first, "shm_segments"),
        text: String::new(),
    };
    w.text = w.words();
    Some(w)
}

/// A size for a person: KiB under 1 MiB, else MiB.
fn size(b: f64) -> String {
    if b.abs() < 1_048_576.0 {
        format!("{:.0} KiB", b / 1024.0)
    } else {
        format!("{:.1} MiB", b / 1_048_576.0)
    }
}

impl Where {
    /// Whether what grew is mostly a mapped file's page cache: memory the
    /// kernel takes back under pressure, no leak of the program.
    pub fn is_page_cache(&self) -> bool {
        self.largest == "file" && self.share >= 0.5
    }

    /// Whether what grew is mostly shared memory.
    pub fn is_shared_memory(&self) -> bool {
        self.largest == "shmem" && self.share >= 0.5
    }

    fn words(&self) -> String {
        let pct = format!(
            "{:.0} % of its growth ({})",
            100.0 * self.share,
            size(self.classes[&self.largest])
        );
        match self.largest.as_str() {
            "anon" => {
                let mut s = format!("{pct} in anonymous memory");
                let mut shape = Vec::new();
                if self.regions >= 1.0 {
                    match self.region_size.filter(|_| self.of_size >= 1.0) {
                        Some(r) if self.of_size >= 0.5 * self.regions => shape.push(format!(
                            "{:.0} new regions, {:.0} of them of {}",
                            self.regions,
                            self.of_size,
                            size(r)
                        )),
                        _ => shape.push(format!("{:.0} new regions", self.regions)),
                    }
                } else {
                    shape.push(
                        "in the regions it already had (copies of pages it shared, or new \
                         mappings the kernel joined to one beside them)"
                            .to_owned(),
                    );
                }
                // glibc's per-thread arenas: growth in them is either
                // objects the threads keep or freed memory the allocator
                // keeps per thread.
                if self.in_arenas >= 0.5 * self.classes["anon"] && self.arenas_held >= 1.0 {
                    let more = if self.arenas >= 1.0 {
                        format!(", {:.0} more than at first", self.arenas)
                    } else {
                        String::new()
                    };
                    shape.push(format!(
                        "{} of it in glibc's {:.0} per-thread arenas (64 MiB reserved each{more}): \
                         objects its threads keep, or freed memory the allocator keeps per \
                         thread; MALLOC_ARENA_MAX=2 or malloc_trim(0) tells which",
                        size(self.in_arenas),
                        self.arenas_held
                    ));
                } else if self.arenas >= 1.0 {
                    shape.push(format!(
                        "{:.0} more glibc arenas (64 MiB reserved each, one per thread that \
                         allocates)",
                        self.arenas
                    ));
                }
                s.push_str(": ");
                s.push_str(&shape.join("; "));
                s
            }
            "heap" => format!(
                "{pct} in the heap (brk): small allocations malloc keeps in its main arena, \
                 objects the program holds, or freed ones glibc has not returned (malloc_trim)"
            ),
            "shmem" => {
                let mut segs: Vec<(&String, &f64)> = self.segments.iter().collect();
                segs.sort_by(|a, b| b.1.total_cmp(a.1));
                let named: Vec<String> = segs
                    .iter()
                    .take(3)
                    .map(|(n, v)| format!("{n} {}", size(**v)))
                    .collect();
                let named = match named.first() {
                    None => String::new(),
                    Some(one) if self.new_segments > named.len() as f64 => {
                        format!(" ({:.0} more segments, such as {one})", self.new_segments)
                    }
                    Some(_) => format!(" ({})", named.join(", ")),
                };
                format!(
                    "{pct} in shared memory{named}: segments mapped and kept (DataLoader \
                     tensors passed through /dev/shm, a segment never unmapped)"
                )
            }
            "file" => format!(
                "{pct} in mapped files: their page cache, which the kernel takes back under \
                 pressure; not a leak of the program"
            ),
            "stack" => format!(
                "{pct} in the main thread's stack (deep recursion; other threads' stacks are \
                 anonymous mappings)"
            ),
            "gpu" => format!("{pct} in GPU driver mappings (/dev/nvidia*, /dev/dri)"),
            _ => format!("{pct} in other mappings"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classes(t_s: f64, pid: u32, f: &[(&str, f64)]) -> Event {
        Event {
            t_ns: (t_s * 1e9) as u64,
            kind: EventKind::fact("classes", "", f).of_pid(pid),
        }
    }

    /// The first and last readings in the span are compared, class by
    /// class; another process's readings and those outside the span are
    /// not; the words say the largest class and its shape.
    #[test]
    fn growth_is_told_by_its_largest_class_and_shape() {
        const MIB: f64 = 1_048_576.0;
        let ev = vec![
            classes(0.5, 7, &[("anon", 999.0 * MIB)]),
            classes(
                1.0,
                7,
                &[
                    ("heap", MIB),
                    ("anon", 10.0 * MIB),
                    ("regions", 5.0),
                    ("mode_size", 262144.0),
                    ("mode_count", 4.0),
                ],
            ),
            classes(5.0, 8, &[("file", 500.0 * MIB)]),
            classes(
                9.0,
                7,
                &[
                    ("heap", 2.0 * MIB),
                    ("anon", 60.0 * MIB),
                    ("regions", 205.0),
                    ("mode_size", 262144.0),
                    ("mode_count", 204.0),
                ],
            ),
            classes(20.0, 7, &[("anon", 0.0)]),
        ];
        let w = where_grew(&ev, 7, 1.0, 10.0).unwrap();
        assert_eq!(w.largest, "anon");
        assert_eq!(w.classes["anon"], 50.0 * MIB);
        assert!((w.share - 50.0 / 51.0).abs() < 1e-9, "{}", w.share);
        assert_eq!((w.from_s, w.to_s), (1.0, 9.0));
        assert!(
            w.text
                .starts_with("98 % of its growth (50.0 MiB) in anonymous memory: 200 new regions, 200 of them of 256 KiB"),
            "{}",
            w.text
        );
        assert!(!w.is_page_cache());
        assert!(!w.text.contains("arenas"), "{}", w.text);
        assert_eq!(where_grew(&ev, 8, 0.0, 30.0), None, "one reading");

        // Growth inside glibc's per-thread arenas is said as that.
        let ev = vec![
            classes(
                0.0,
                9,
                &[
                    ("anon", 20.0 * MIB),
                    ("arenas", 4.0),
                    ("in_arenas", 4.0 * MIB),
                ],
            ),
            classes(
                9.0,
                9,
                &[
                    ("anon", 170.0 * MIB),
                    ("arenas", 4.0),
                    ("in_arenas", 150.0 * MIB),
                ],
            ),
        ];
        let w = where_grew(&ev, 9, 0.0, 10.0).unwrap();
        assert!(
            w.text
                .contains("146.0 MiB of it in glibc's 4 per-thread arenas (64 MiB reserved each)"),
            "{}",
            w.text
        );

        let ev = vec![
            classes(0.0, 3, &[("file", MIB), ("shm:/dev/shm/x", 0.0)]),
            classes(5.0, 3, &[("file", 200.0 * MIB), ("anon", 4.0 * MIB)]),
        ];
        let w = where_grew(&ev, 3, 0.0, 5.0).unwrap();
        assert!(w.is_page_cache(), "{w:?}");
        assert!(w.text.contains("not a leak of the program"), "{}", w.text);

        let ev = vec![
            classes(0.0, 4, &[("shmem", 0.0)]),
            classes(
                5.0,
                4,
                &[
                    ("shmem", 64.0 * MIB),
                    ("shm:/dev/shm/torch_1_2", 64.0 * MIB),
                ],
            ),
        ];
        let w = where_grew(&ev, 4, 0.0, 5.0).unwrap();
        assert!(w.is_shared_memory());
        assert_eq!(w.segments["/dev/shm/torch_1_2"], 64.0 * MIB);
        assert!(
            w.text.contains("(/dev/shm/torch_1_2 64.0 MiB)"),
            "{}",
            w.text
        );
        // Many segments: how many more, and the largest.
        let ev = vec![
            classes(0.0, 4, &[("shmem", 0.0), ("shm_segments", 0.0)]),
            classes(
                5.0,
                4,
                &[
                    ("shmem", 300.0 * MIB),
                    ("shm_segments", 150.0),
                    ("shm:/dev/shm/torch_9_1", 2.0 * MIB),
                ],
            ),
        ];
        let w = where_grew(&ev, 4, 0.0, 5.0).unwrap();
        assert!(
            w.text
                .contains("(150 more segments, such as /dev/shm/torch_9_1 2.0 MiB)"),
            "{}",
            w.text
        );

        let still = vec![
            classes(0.0, 5, &[("anon", MIB)]),
            classes(5.0, 5, &[("anon", 4.5 * MIB)]),
            classes(0.0, 6, &[("anon", 200.0 * MIB)]),
            classes(5.0, 6, &[("anon", 209.0 * MIB)]),
        ];
        assert_eq!(where_grew(&still, 5, 0.0, 5.0), None, "under 4 MiB");
        assert_eq!(where_grew(&still, 6, 0.0, 5.0), None, "under 5 %");
    }
}
