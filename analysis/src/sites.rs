//! Which code holds the growth (`watch --sites`): each site channel
//! (`site<N>.live`, labelled with its code) judged by the evidence rule as
//! any channel is, the growing ones joined to the memory verdict, and each
//! process's exact count of the bytes it holds (`pid<N>.alloc_live`) set
//! beside its resident memory, to tell "the program holds more" from "the
//! allocator keeps what was freed".

use std::collections::BTreeMap;

use serde::Serialize;

use super::finding::Finding;
use super::{ChannelAnalysis, Verdict};

/// A site channel as the receipt has it.
#[derive(Debug, Clone, Copy)]
pub struct SiteChannel<'a> {
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    pub analysis: &'a ChannelAnalysis,
    /// Its last reading (bytes), for a channel with no analysed one.
    pub last: f64,
}

/// One entry of the JSON receipt's `sites`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Site {
    pub channel: String,
    pub pid: Option<u32>,
    pub function: String,
    pub file: String,
    pub line: Option<u32>,
    pub frames: Vec<String>,
    /// The source line, where flatline could read it.
    pub code: Option<String>,
    /// "3.14", "3.13t": a native site in a Python whose frames flatline
    /// could not read, so its line is not known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub python_unread: Option<String>,
    pub verdict: Verdict,
    /// Bytes a second its live bytes grow, 0 unless its verdict is growth.
    pub growth_per_s: f64,
    pub live_bytes: f64,
}

impl Site {
    /// `train.py:88 (history.append(…))`, or `leak_here (leak.c:16)`; a
    /// native site whose Python line could not be read says so first.
    pub fn place(&self) -> String {
        match &self.python_unread {
            Some(v) => format!(
                "the native site {} (Python {v}'s frames cannot be read, so its line is not known)",
                self.native_place()
            ),
            None => self.native_place(),
        }
    }

    fn native_place(&self) -> String {
        let at = match (self.file.is_empty(), self.line) {
            (false, Some(l)) if l > 0 => format!("{}:{l}", short(&self.file)),
            (false, _) => short(&self.file).to_owned(),
            (true, _) => String::new(),
        };
        match (&self.code, at.is_empty()) {
            (Some(code), false) => format!("{at} (`{code}`, in {})", self.function),
            (None, false) => format!("{at} ({})", self.function),
            (_, true) => self.function.clone(),
        }
    }
}

/// The last two parts of a path: enough to find it, short enough to read.
fn short(path: &str) -> &str {
    let mut cut = path.len();
    for _ in 0..2 {
        match path[..cut].rfind('/') {
            Some(i) => cut = i,
            None => return path,
        }
    }
    &path[cut + 1..]
}

/// Whether a site channel names an allocator's own frame: a recording
/// made before flatline passed over all of them (`_PyObject_Malloc`,
/// `c10::alloc_cpu`) may have one. Such a site is not where memory was
/// allocated, and is left out. A Python frame is never one.
fn names_an_allocator(labels: &BTreeMap<String, String>) -> bool {
    let file = labels.get("file").map_or("", String::as_str);
    let function = labels.get("function").map_or("", String::as_str);
    let python = file.ends_with(".py") || file.starts_with('<');
    !python && flatline_catalog::allocators::is_allocator("", file, function)
}

/// The sites, largest growth first (then most bytes held); none that
/// names an allocator's own frame.
pub fn sites(channels: &[SiteChannel<'_>]) -> Vec<Site> {
    let mut out: Vec<Site> = channels
        .iter()
        .filter(|c| !names_an_allocator(c.labels))
        .map(|c| {
            let label = |k: &str| c.labels.get(k).cloned().unwrap_or_default();
            let grows = c.analysis.verdict.is_growth();
            Site {
                channel: c.name.to_owned(),
                pid: label("pid").parse().ok(),
                function: label("function"),
                file: label("file"),
                line: label("line").parse().ok(),
                frames: c
                    .labels
                    .get("frames")
                    .map(|f| f.lines().map(str::to_owned).collect())
                    .unwrap_or_default(),
                code: c.labels.get("code").cloned(),
                python_unread: c.labels.get("python_unread").cloned(),
                verdict: c.analysis.verdict,
                growth_per_s: if grows {
                    c.analysis.slope_per_s.max(0.0)
                } else {
                    0.0
                },
                // At the end of what was analysed: a job frees what it
                // holds as it exits, after which a site holds nothing.
                live_bytes: if c.analysis.final_value.is_finite() {
                    c.analysis.final_value
                } else {
                    c.last
                },
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.growth_per_s
            .total_cmp(&a.growth_per_s)
            .then(b.live_bytes.total_cmp(&a.live_bytes))
    });
    out
}

/// The finding that joins the top growing site to the memory verdict:
/// "tree.uss grows 2.2 MiB/s; 96 % of it was allocated at train.py:88
/// (…)". `top`: the growing memory channel the headline names and its
/// slope, if one grows.
pub fn finding(
    sites: &[Site],
    top: Option<(&str, f64)>,
    value: &dyn Fn(f64) -> String,
) -> Option<Finding> {
    let site = sites.iter().find(|s| s.growth_per_s > 0.0)?;
    let rate = |r: f64| format!("{}/s", value(r));
    let text = match top.filter(|(_, slope)| *slope > 0.0) {
        Some((channel, slope)) => {
            let share = site.growth_per_s / slope;
            let part = if share >= 0.9 {
                "about all of it".to_owned()
            } else {
                format!("{:.0} % of it", share * 100.0)
            };
            format!(
                "{channel} grows {}; {part} was allocated at {} (its sampled live bytes grow {}, {} held now)",
                rate(slope),
                site.place(),
                rate(site.growth_per_s),
                value(site.live_bytes)
            )
        }
        None => format!(
            "the bytes allocated at {} grow {} ({} held now), though no memory channel grows beyond its noise",
            site.place(),
            rate(site.growth_per_s),
            value(site.live_bytes)
        ),
    };
    let text = match sites.iter().filter(|s| s.growth_per_s > 0.0).count() {
        0 | 1 => text,
        n => format!("{text}; {} more sites grow", n - 1),
    };
    Some(Finding { kind: "site", text })
}

/// Below this share of a process's growth, what its program holds is
/// not what grows: the allocator keeps memory that was freed.
pub const PROGRAM_SHARE: f64 = 0.25;

/// A process's resident memory and the bytes it holds by the library's
/// exact count, both judged.
#[derive(Debug, Clone, Copy)]
pub struct Held<'a> {
    pub pid: u32,
    /// `pid<N>.rss` (or `.uss`): its verdict and slope.
    pub resident: (&'a str, &'a ChannelAnalysis),
    pub alloc_live: &'a ChannelAnalysis,
}

/// "The program holds more" or "the allocator keeps freed memory", for a
/// process whose resident memory grows.
pub fn retention(held: &Held<'_>, value: &dyn Fn(f64) -> String) -> Option<Finding> {
    let (name, res) = held.resident;
    if !res.verdict.is_growth() || res.slope_per_s <= 0.0 {
        return None;
    }
    let live = held.alloc_live;
    let rate = |r: f64| format!("{}/s", value(r));
    // What the program holds rose by a share of what its memory did
    // ([`PROGRAM_SHARE`], the answer's measure too).
    let share = if res.drift > 0.0 {
        live.drift.max(0.0) / res.drift
    } else {
        0.0
    };
    let (kind, text) = if live.verdict.is_growth()
        && live.slope_per_s > 0.0
        && share >= PROGRAM_SHARE
    {
        let share = (live.slope_per_s / res.slope_per_s * 100.0).min(100.0);
        (
            "retention",
            format!(
                "process {}: the program holds more: the bytes it has allocated and not freed grow {} \
                 ({share:.0} % of {name}'s {})",
                held.pid,
                rate(live.slope_per_s),
                rate(res.slope_per_s)
            ),
        )
    } else if live.verdict == Verdict::Flat
        || live.verdict.is_growth()
        || (live.verdict != Verdict::Insufficient && share < PROGRAM_SHARE)
    {
        (
            "allocator_keeps",
            format!(
                "process {}: {name} grows {} while the bytes the program holds (allocated less freed) \
                 do not: the allocator keeps memory that was freed (glibc's arenas and \
                 fragmentation, CPython's pymalloc arenas); try MALLOC_ARENA_MAX=2, a lower \
                 MALLOC_TRIM_THRESHOLD_, or jemalloc (LD_PRELOAD)",
                held.pid,
                rate(res.slope_per_s)
            ),
        )
    } else {
        return None;
    };
    Some(Finding { kind, text })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Context, analyze};

    fn analysed(slope: f64) -> ChannelAnalysis {
        let t: Vec<f64> = (0..300).map(|i| f64::from(i) * 0.1).collect();
        let v: Vec<f64> = t
            .iter()
            .enumerate()
            .map(|(i, t)| 1e8 + slope * t + if i % 2 == 0 { 3e4 } else { -3e4 })
            .collect();
        analyze(
            &t,
            &v,
            &Context {
                warmup_s: Some(0.0),
                min_growth: 65536.0,
                ..Context::default()
            },
        )
    }

    fn mib(v: f64) -> String {
        format!("{:.2} MiB", v / 1_048_576.0)
    }

    fn labels(
        function: &str,
        file: &str,
        line: u32,
        code: Option<&str>,
    ) -> BTreeMap<String, String> {
        let mut l = BTreeMap::from([
            ("pid".to_owned(), "42".to_owned()),
            ("function".to_owned(), function.to_owned()),
            ("file".to_owned(), file.to_owned()),
            ("line".to_owned(), line.to_string()),
            (
                "frames".to_owned(),
                format!("{file}:{line} {function}\nmain.c:50 main"),
            ),
        ]);
        if let Some(c) = code {
            l.insert("code".into(), c.into());
        }
        l
    }

    /// An older recording's site named by the interpreter's allocator is
    /// not a site: the growth is not said to be allocated there.
    #[test]
    fn a_site_named_by_an_allocator_s_frame_is_left_out() {
        let leak = analysed(1.3e6);
        let pymalloc = labels(
            "_PyObject_Malloc",
            "/build/Python-3.12.1/Objects/obmalloc.c",
            1569,
            None,
        );
        let mut torch = labels("c10::alloc_cpu(unsigned long)", "", 0, None);
        torch.insert("file".into(), String::new());
        // A Python function of that name is the program's.
        let python = labels("malloc", "/job/pool.py", 7, None);
        let s = sites(&[
            SiteChannel {
                name: "site0.live",
                labels: &pymalloc,
                analysis: &leak,
                last: 4e7,
            },
            SiteChannel {
                name: "site1.live",
                labels: &torch,
                analysis: &leak,
                last: 4e7,
            },
            SiteChannel {
                name: "site2.live",
                labels: &python,
                analysis: &leak,
                last: 4e7,
            },
        ]);
        let names: Vec<&str> = s.iter().map(|s| s.channel.as_str()).collect();
        assert_eq!(names, ["site2.live"]);
        assert!(
            finding(&s, Some(("tree.uss", 1.3e6)), &mib)
                .unwrap()
                .text
                .contains("pool.py:7")
        );
    }

    #[test]
    fn the_growing_site_comes_first_and_is_joined_to_the_verdict() {
        let (leak, flat) = (analysed(1.3e6), analysed(0.0));
        assert!(leak.verdict.is_growth(), "{:?}", leak.verdict);
        assert!(!flat.verdict.is_growth(), "{:?}", flat.verdict);
        let (l1, l2) = (
            labels("churn", "/src/app/churn.c", 30, None),
            labels(
                "run",
                "/home/u/job/train.py",
                88,
                Some("history.append(out.detach().clone())"),
            ),
        );
        let s = sites(&[
            SiteChannel {
                name: "site0.live",
                labels: &l1,
                analysis: &flat,
                last: 9e7,
            },
            SiteChannel {
                name: "site1.live",
                labels: &l2,
                analysis: &leak,
                last: 4e7,
            },
        ]);
        assert_eq!(s[0].channel, "site1.live");
        assert_eq!(s[0].pid, Some(42));
        assert_eq!(s[0].line, Some(88));
        assert_eq!(s[0].frames.len(), 2);
        assert!(s[0].growth_per_s > 1e6);
        assert_eq!(s[1].growth_per_s, 0.0, "a flat site grows at 0");
        let f = finding(&s, Some(("tree.uss", 1.35e6)), &mib).unwrap();
        assert_eq!(f.kind, "site");
        assert!(
            f.text.starts_with(
                "tree.uss grows 1.29 MiB/s; about all of it was allocated at job/train.py:88 \
                 (`history.append(out.detach().clone())`, in run)"
            ),
            "{}",
            f.text
        );
        let half = finding(&s, Some(("tree.uss", 2.6e6)), &mib).unwrap();
        assert!(
            half.text.contains("; 50 % of it was allocated"),
            "{}",
            half.text
        );
        // Nothing grows: no finding.
        assert!(finding(&s[1..], Some(("tree.uss", 1e6)), &mib).is_none());
    }

    #[test]
    fn a_noisy_site_is_no_part_of_the_headline() {
        use crate::summary::{Assessed, headline};
        use flatline_format::Unit;
        assert!(
            crate::rules::is_site_channel("site12.live")
                && crate::rules::is_site_channel("site0-2.live")
        );
        assert!(!crate::rules::is_site_channel("site.live"));
        assert!(!crate::rules::is_site_channel("pid7.alloc_live"));
        assert!(!crate::rules::is_site_channel("site3.objects"));
        assert_eq!(crate::rules::site_leaf("site3-2.allocs"), Some("allocs"));
        assert_eq!(crate::rules::site_leaf("site3.rss"), None);
        assert_eq!(crate::rules::site_leaf("sites.dropped"), None);
        let flat = analysed(0.0);
        let t: Vec<f64> = (0..300).map(|i| f64::from(i) * 0.1).collect();
        let v: Vec<f64> = (0..t.len())
            .map(|i| 1e6 + [3e5, -2e5, 1e5, -3e5, 2e5][i % 5])
            .collect();
        let noisy = analyze(
            &t,
            &v,
            &Context {
                warmup_s: Some(0.0),
                ..Context::default()
            },
        );
        assert_eq!(noisy.verdict, Verdict::Noisy, "{noisy:?}");
        let row = |name, analysis| Assessed {
            name,
            unit: Unit::Bytes,
            analysis,
            limit: None,
        };
        let h = headline(
            &[row("mem.rss", &flat), row("site2.live", &noisy)],
            &|v, _| mib(v),
            &|s| format!("{s} s"),
        );
        assert_eq!(h, "Memory is flat.");
        // A growing site explains growth; it is never itself the growth.
        let grows = analysed(1.3e6);
        assert!(grows.severity.is_some());
        let rows = [row("mem.rss", &flat), row("site0.live", &grows)];
        assert!(crate::summary::growing(&rows).is_empty());
    }

    #[test]
    fn retention_tells_holding_from_keeping() {
        let (grows, flat) = (analysed(1.3e6), analysed(0.0));
        let holds = retention(
            &Held {
                pid: 7,
                resident: ("pid7.rss", &grows),
                alloc_live: &grows,
            },
            &mib,
        )
        .unwrap();
        assert!(
            holds.text.contains("the program holds more"),
            "{}",
            holds.text
        );
        let keeps = retention(
            &Held {
                pid: 7,
                resident: ("pid7.rss", &grows),
                alloc_live: &flat,
            },
            &mib,
        )
        .unwrap();
        assert!(
            keeps.text.contains("the allocator keeps memory"),
            "{}",
            keeps.text
        );
        assert_eq!((holds.kind, keeps.kind), ("retention", "allocator_keeps"));
        assert!(
            retention(
                &Held {
                    pid: 7,
                    resident: ("pid7.rss", &flat),
                    alloc_live: &flat,
                },
                &mib,
            )
            .is_none()
        );
    }
}
