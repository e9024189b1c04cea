//! What a person reads first: the growing level channels, most urgent
//! first, and one sentence about them. Receipts and the dashboard both ask
//! here, so they never disagree.

pub use super::finding::{Assessed, Finding, rate_text};
use super::{ChannelAnalysis, Kind, Note, Severity, Verdict};
use flatline_catalog::names;
use flatline_format::Unit;

/// The level channels called growth (rising, not shrinking), most urgent
/// first: by severity, then by time to the limit, then by rate.
pub(crate) fn growing<'a>(rows: &[Assessed<'a>]) -> Vec<Assessed<'a>> {
    let mut g: Vec<Assessed<'a>> = rows
        .iter()
        .filter(|r| r.analysis.kind == Kind::Level && r.analysis.severity.is_some())
        .filter(|r| !super::rules::is_site_channel(r.name))
        .copied()
        .collect();
    g.sort_by(|a, b| {
        let (x, y) = (a.analysis, b.analysis);
        x.severity
            .cmp(&y.severity)
            .then(
                x.time_to_limit_s
                    .unwrap_or(f64::INFINITY)
                    .total_cmp(&y.time_to_limit_s.unwrap_or(f64::INFINITY)),
            )
            .then(
                y.projection_24h
                    .unwrap_or(0.0)
                    .total_cmp(&x.projection_24h.unwrap_or(0.0)),
            )
    });
    g
}

/// The order channels are listed in: growing levels by severity first,
/// then the rest as they came.
pub fn order(rows: &[Assessed<'_>]) -> Vec<usize> {
    let rank = |a: &ChannelAnalysis| match a.severity {
        Some(Severity::Critical) => 0,
        Some(Severity::Warning) => 1,
        Some(Severity::Info) => 2,
        None => 3,
    };
    let mut idx: Vec<usize> = (0..rows.len()).collect();
    idx.sort_by_key(|&i| rank(rows[i].analysis));
    idx
}

/// Everything a recording (or a live stream) says, in one place: the
/// headline, the growing level channels, and the findings. Receipts,
/// `--fail-on`, `--alert`, the exporter's series, the window's banner and
/// `compare` all read this, so none of them disagrees with another.
#[derive(Debug, Clone)]
pub struct Assessment<'a> {
    pub headline: String,
    /// Level channels called growth (upwards), most urgent first.
    pub growing: Vec<Assessed<'a>>,
    /// The same growth, grouped: one per process (its RSS, PSS and USS, and
    /// the tree's and `mem.*` sums it carries), with who, what memory and
    /// which code, most urgent first.
    pub growths: Vec<super::answer::Growth>,
    pub findings: Vec<Finding>,
    /// Memory level channels that moved but whose readings cannot tell
    /// growth from noise (`insufficient`): nothing is called flat while
    /// there are any.
    pub untold: Vec<&'a str>,
}

impl Assessment<'_> {
    /// The names of the growing channels, most urgent first.
    pub fn growing_names(&self) -> Vec<&str> {
        self.growing.iter().map(|a| a.name).collect()
    }

    /// The most urgent severity, where something grows.
    pub fn severity(&self) -> Option<super::Severity> {
        self.growing.first().and_then(|g| g.analysis.severity)
    }
}

/// The one answer of a stream, owned and made once per change of what it
/// reads: what the receipt, the window, the exporter and the notebook lay
/// out. [`super::reading::Run`] (a recording, a window's readings) and
/// [`super::run::LiveRun`] (a live stream) hold it; no surface makes it.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    /// The first sentence.
    pub headline: String,
    /// The level channels called growth (upwards), most urgent first.
    pub growing: Vec<String>,
    /// The most urgent severity, where something grows.
    pub severity: Option<super::Severity>,
    /// The growth, grouped: one per process, with who, what memory and
    /// which code, most urgent first.
    pub growths: Vec<super::answer::Growth>,
    pub findings: Vec<Finding>,
    /// Memory levels whose readings cannot tell growth from noise.
    pub untold: Vec<String>,
    /// Which layer of a PyTorch job's GPU memory grows, where it logs them.
    pub gpu_layers: Option<LayerFinding>,
    /// Someone died of memory running out (the headline says so first).
    pub died: bool,
    /// What the first sentence tells first.
    pub kind: HeadlineKind,
}

/// What a first sentence tells first, as a gauge, an alert or a router
/// reads it: one of these for every answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HeadlineKind {
    /// The file was damaged, or a full disk left a gap, and the sentence
    /// starts with it.
    Damage,
    /// A process of the job died of memory running out (or by a signal).
    Death,
    /// Memory grows as siblings copy pages they share (copy-on-access).
    CopyOnAccess,
    /// Memory grows.
    Growth,
    /// Memory rose, then held (a file read in, a cache warmed).
    Held,
    /// The readings cannot tell growth from noise (or from a start-up).
    Untold,
    /// Memory is flat.
    #[default]
    Flat,
}

impl HeadlineKind {
    pub const ALL: [HeadlineKind; 7] = [
        HeadlineKind::Damage,
        HeadlineKind::Death,
        HeadlineKind::CopyOnAccess,
        HeadlineKind::Growth,
        HeadlineKind::Held,
        HeadlineKind::Untold,
        HeadlineKind::Flat,
    ];

    /// `damage`, `death`, `copy_on_access`, `growth`, `held`, `untold`, `flat`.
    pub fn as_str(self) -> &'static str {
        match self {
            HeadlineKind::Damage => "damage",
            HeadlineKind::Death => "death",
            HeadlineKind::CopyOnAccess => "copy_on_access",
            HeadlineKind::Growth => "growth",
            HeadlineKind::Held => "held",
            HeadlineKind::Untold => "untold",
            HeadlineKind::Flat => "flat",
        }
    }
}

impl Answer {
    /// The answer of `rows` (most urgent first, or in any order) given
    /// what else is `known`.
    pub(crate) fn of(
        rows: &[Assessed<'_>],
        known: &Known<'_>,
        value: &dyn Fn(f64, Unit) -> String,
        duration: &dyn Fn(f64) -> String,
    ) -> Self {
        let a = assess(rows, known, value, duration);
        let died = known
            .ending
            .and_then(|e| e.headline(None, value, duration))
            .is_some();
        let lost_first = [known.damage, known.gap]
            .iter()
            .any(|n| n.is_some_and(|n| n.in_headline));
        let kind = if lost_first {
            HeadlineKind::Damage
        } else if died {
            HeadlineKind::Death
        } else if known.tree.is_some_and(|t| t.copy.is_some()) {
            HeadlineKind::CopyOnAccess
        } else if !a.growing.is_empty() || a.growth_found() {
            HeadlineKind::Growth
        } else if a
            .findings
            .iter()
            .any(|f| matches!(f.kind, "rose_and_held" | "process_held"))
        {
            HeadlineKind::Held
        } else if !a.untold.is_empty() {
            HeadlineKind::Untold
        } else {
            HeadlineKind::Flat
        };
        Answer {
            kind,
            died,
            growing: a.growing_names().into_iter().map(str::to_owned).collect(),
            severity: a.severity(),
            untold: a.untold.iter().map(|&u| u.to_owned()).collect(),
            gpu_layers: gpu_layers(rows, value),
            headline: a.headline,
            growths: a.growths,
            findings: a.findings,
        }
    }

    /// Whether a finding says growth was found ([`Assessment::growth_found`]).
    pub fn growth_found(&self) -> bool {
        growth_found(&self.findings)
    }
}

/// The one assessment of a set of analysed channels, with the process
/// tree's findings where there is a tree and the GPU layers' where the job
/// logs them.
pub(crate) fn assess<'a>(
    rows: &[Assessed<'a>],
    known: &Known<'_>,
    value: &dyn Fn(f64, Unit) -> String,
    duration: &dyn Fn(f64) -> String,
) -> Assessment<'a> {
    let tree = known.tree;
    let growing = growing(rows);
    let mut growths =
        super::answer::growths(&growing, tree, known.sites, known.sites_sampled, known.rank);
    if let Some(why) = known.sites_refused {
        for g in &mut growths {
            g.sites_refused = Some(why.to_owned());
        }
    }
    super::answer::with_program(&mut growths, rows);
    let mut findings = Vec::new();
    if let Some(f) = tree.and_then(|t| t.finding.as_ref()) {
        findings.push(Finding {
            kind: "copy_on_access",
            text: f.clone(),
        });
    }
    findings.extend(processes_grew(rows, tree));
    if let Some(l) = gpu_layers(rows, value).filter(|l| l.layer != GpuLayer::None) {
        findings.push(Finding {
            kind: "gpu_layer",
            text: l.text,
        });
    }
    let untold_rows = untold(rows);
    let mut headline = match tree.and_then(|t| t.copy.as_ref()) {
        Some(c) => copy_headline(c, &growing, value, duration),
        None => {
            let h = headline_of(
                rows,
                &growths,
                &findings,
                &untold_rows,
                tree,
                value,
                duration,
            );
            // Memory that rose and held, said first: a finding of its own
            // kind, beside the processes that did.
            if h.held {
                findings.push(Finding {
                    kind: "rose_and_held",
                    text: h.text.clone(),
                });
            }
            h.text
        }
    };
    // Where each process grew: a finding, never a headline of its own
    // (a process's memory moves while the job is flat, or starting).
    for p in tree.iter().flat_map(|t| &t.processes) {
        if let Some(w) = &p.where_ {
            findings.push(Finding {
                kind: "where",
                text: format!("{} {} ({}): {}", p.role, p.pid, p.name, w.text),
            });
        }
    }
    if let Some(e) = known.ending {
        let rank = known.rank;
        for d in &e.deaths {
            findings.push(Finding {
                kind: match d.cause {
                    super::death::Cause::Signal => KILLED_BY_SIGNAL,
                    _ => OOM_KILL,
                },
                text: d.sentence(rank, value, duration),
            });
        }
        for p in &e.out_of_memory {
            findings.push(Finding {
                kind: OUT_OF_MEMORY,
                text: format!("at {:.1} s the job printed: {}", p.t_s, p.text),
            });
        }
    }
    // Which code holds the growth, and whether the program holds it.
    let top = growing.first().map(|g| (g.name, g.analysis.slope_per_s));
    let in_bytes = |v: f64| value(v, Unit::Bytes);
    findings.extend(super::sites::finding(known.sites, top, &in_bytes));
    findings.extend(retention(rows, tree, &in_bytes));
    // Who died comes first; the trend is still told, after the death.
    if let Some(h) = death_headline(known, value, duration) {
        let trend = std::mem::replace(&mut headline, h);
        findings.push(Finding {
            kind: "trend",
            text: trend,
        });
    }
    say_losses_first(known, &mut headline, &mut findings);
    let untold = untold_rows.into_iter().map(|r| r.name).collect();
    Assessment {
        headline,
        growing,
        growths,
        findings,
        untold,
    }
}

/// Processes whose own memory grew: those that grow still
/// (`process_grew`), and apart from them those that rose and then held (a
/// file read in, a cache warmed: `process_held`), no growth at the end.
fn processes_grew(rows: &[Assessed<'_>], tree: Option<&super::tree::TreeSummary>) -> Vec<Finding> {
    let Some(t) = tree.filter(|t| !t.grew.is_empty()) else {
        return Vec::new();
    };
    let (held, still): (Vec<&super::tree::ProcessSeen>, Vec<_>) = t
        .processes
        .iter()
        .filter(|p| t.grew.contains(&p.pid))
        .partition(|p| rose_and_held(rows, p));
    let names = |ps: &[&super::tree::ProcessSeen]| {
        ps.iter()
            .map(|p| format!("{} {} ({})", p.role, p.pid, p.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = Vec::new();
    if !still.is_empty() {
        out.push(Finding {
            kind: "process_grew",
            text: format!("processes whose PSS grows: {}", names(&still)),
        });
    }
    if !held.is_empty() {
        out.push(Finding {
            kind: "process_held",
            text: format!(
                "processes whose own memory rose, then held: {}",
                names(&held)
            ),
        });
    }
    out
}

/// Who died of memory running out, where someone did, and the line the
/// one killed held most with, where its sites were sampled: what it grew
/// with.
fn death_headline(
    known: &Known<'_>,
    value: &dyn Fn(f64, Unit) -> String,
    duration: &dyn Fn(f64) -> String,
) -> Option<String> {
    let e = known.ending?;
    let h = e.headline(known.rank, value, duration)?;
    let killed = e
        .deaths
        .iter()
        .find(|d| d.cause != super::death::Cause::Signal);
    let held = killed.and_then(|d| {
        known
            .sites
            .iter()
            .filter(|s| s.pid == Some(d.pid) && s.live_bytes > 0.0)
            .max_by(|a, b| a.live_bytes.total_cmp(&b.live_bytes))
    });
    Some(match held {
        Some(site) => format!(
            "{h} It held most at {} ({} when last read).",
            super::answer::site_words(site),
            value(site.live_bytes, Unit::Bytes)
        ),
        None => h,
    })
}

/// A gap a full disk left, and before it a damaged file, said first: what
/// was lost or read of what, then what the part read says.
fn say_losses_first(known: &Known<'_>, headline: &mut String, findings: &mut Vec<Finding>) {
    for (kind, note) in [("recording_gap", known.gap), ("damage", known.damage)] {
        let Some(n) = note else {
            continue;
        };
        findings.insert(
            0,
            Finding {
                kind,
                text: format!("{} Lost: {}.", n.sentence, n.lost.join("; ")),
            },
        );
        if n.in_headline {
            *headline = format!("{} {headline}", n.sentence);
        }
    }
}

/// A finding's kind for a process the kernel's OOM killer killed.
pub const OOM_KILL: &str = "oom_kill";
/// A finding's kind for a process killed by a signal (not the OOM killer).
pub const KILLED_BY_SIGNAL: &str = "killed_by_signal";
/// A finding's kind for an out-of-memory error the job printed.
pub const OUT_OF_MEMORY: &str = "out_of_memory";
/// The findings' kinds that tell how a job died: every surface that lists
/// deaths (the notebook's `%flatline last`) reads them from here.
pub const DEATH_KINDS: [&str; 3] = [OOM_KILL, KILLED_BY_SIGNAL, OUT_OF_MEMORY];

/// What is known beside the channels' analyses, for [`assess`]: each
/// surface reads it from what it holds (a recording, the window's store)
/// and hands it here.
#[derive(Debug, Default, Clone, Copy)]
pub struct Known<'a> {
    /// The watched process tree over the part analysed.
    pub tree: Option<&'a super::tree::TreeSummary>,
    /// How the job ended (deaths, printed out-of-memory errors).
    pub ending: Option<&'a super::death::Ending>,
    /// The allocation sites (`watch --sites`), largest growth first.
    pub sites: &'a [super::sites::Site],
    /// Whether the recording has allocation-site channels at all.
    pub sites_sampled: bool,
    /// Why sites asked for were not sampled, where they were refused.
    pub sites_refused: Option<&'a str>,
    /// The job's rank, where its labels say.
    pub rank: Option<&'a str>,
    /// What the file lost to damage, where it did.
    pub damage: Option<&'a DamageNote>,
    /// What a write fault (a full disk) left out of the file while the
    /// run went on, where one did.
    pub gap: Option<&'a DamageNote>,
}

impl<'a> Known<'a> {
    /// Only a process tree known (or none).
    pub fn tree(tree: Option<&'a super::tree::TreeSummary>) -> Self {
        Self {
            tree,
            ..Self::default()
        }
    }
}

/// A damaged file's loss, or a gap a write fault left, as its surface
/// words it (see the receipt's `damage` module).
#[derive(Debug, Clone, PartialEq)]
pub struct DamageNote {
    /// "Read 12.0 s of a 60.0 s recording: …".
    pub sentence: String,
    /// Each loss, one line each.
    pub lost: Vec<String>,
    /// Whether the headline starts with it.
    pub in_headline: bool,
}

/// Whether a process's own memory (its USS, else its PSS or RSS) rose and
/// then held: growth that stopped, not growth at the end.
fn rose_and_held(rows: &[Assessed<'_>], p: &super::tree::ProcessSeen) -> bool {
    let Some(stem) = p.channels.as_deref() else {
        return false;
    };
    ["uss", "pss", "rss"]
        .iter()
        .find_map(|leaf| {
            let name = format!("{stem}.{leaf}");
            rows.iter().find(|r| r.name == name)
        })
        .is_some_and(|r| r.analysis.rose_and_held())
}

/// Each process's resident memory against the bytes it holds by the
/// allocation-site library's count (`pid<N>.alloc_live`).
fn retention(
    rows: &[Assessed<'_>],
    tree: Option<&super::tree::TreeSummary>,
    value: &dyn Fn(f64) -> String,
) -> Vec<Finding> {
    // A process whose growth is mostly a file's page cache or shared memory
    // did not grow through its allocator: what malloc holds says nothing of
    // it (a job reading a file it maps would be told to tune its arenas).
    let not_the_allocator = |pid: u32| {
        tree.and_then(|t| t.processes.iter().find(|p| p.pid == pid))
            .and_then(|p| p.where_.as_ref())
            .is_some_and(|w| w.share >= 0.5 && matches!(w.largest.as_str(), "file" | "shmem"))
    };
    rows.iter()
        .filter_map(|r| {
            let stem = r.name.strip_suffix(".alloc_live")?;
            let pid: u32 = stem.strip_prefix("pid")?.parse().ok()?;
            if not_the_allocator(pid) {
                return None;
            }
            let rss = format!("{stem}.rss");
            let resident = rows.iter().find(|x| x.name == rss)?;
            super::sites::retention(
                &super::sites::Held {
                    pid,
                    resident: (resident.name, resident.analysis),
                    alloc_live: r.analysis,
                },
                value,
            )
        })
        .collect()
}

impl Assessment<'_> {
    /// Whether a finding says growth was found (copies that rose and
    /// held, processes that grew, a GPU layer, a death): every finding but
    /// where a process's memory moved (`where`), which says what memory it
    /// is, not that it is growth, and memory that rose and held
    /// (`process_held`, `rose_and_held`: a file read in, a cache warmed).
    pub fn growth_found(&self) -> bool {
        growth_found(&self.findings)
    }
}

/// Whether any of `findings` says growth was found: every one but where a
/// process's memory moved (`where`) and memory that rose and held.
fn growth_found(findings: &[Finding]) -> bool {
    findings
        .iter()
        .any(|f| !matches!(f.kind, "where" | "process_held" | "rose_and_held"))
}

/// One sentence a person can act on: "Memory is flat." / "tree.pss grows
/// 13.1 MiB/s: the cgroup's memory limit is reached in 1 h 12 min."
/// `value` and `duration` format numbers the way the caller shows them.
/// The headline of [`assess`] without a process tree.
#[cfg(test)]
pub(crate) fn headline(
    rows: &[Assessed<'_>],
    value: &dyn Fn(f64, Unit) -> String,
    duration: &dyn Fn(f64) -> String,
) -> String {
    assess(rows, &Known::default(), value, duration).headline
}

/// A level in bytes the headline judges: not an allocation site's
/// estimate, which explains memory rather than measures it.
fn judged_memory(r: &Assessed<'_>) -> bool {
    r.analysis.kind == Kind::Level && r.unit.is_bytes() && !super::rules::is_site_channel(r.name)
}

/// Memory levels whose readings cannot tell growth from noise, among those
/// read over at least half of the longest span any memory level covers: a
/// worker that lived half a second is in the process tree, not the
/// headline.
fn untold<'r, 'a>(rows: &'r [Assessed<'a>]) -> Vec<&'r Assessed<'a>> {
    let memory = || rows.iter().filter(|r| judged_memory(r));
    let longest = memory().map(|r| r.analysis.duration_s).fold(0.0, f64::max);
    memory()
        .filter(|r| r.analysis.verdict == Verdict::Insufficient && r.analysis.points >= 2)
        .filter(|r| r.analysis.duration_s >= 0.5 * longest)
        .collect()
}

/// The headline of growth that cannot be told from a start-up ([`Note::StartUp`],
/// [`Note::Settling`]), said of the resident memory that rose most: the job's
/// or tree's before one process's, then by how much.
fn start_up_headline(
    untold: &[&Assessed<'_>],
    value: &dyn Fn(f64, Unit) -> String,
    duration: &dyn Fn(f64) -> String,
) -> Option<String> {
    // A job that ended during its start-up: whatever rose, whether its
    // readings were too few or it was re-read as start-up. Else a
    // start-up's tail: what was re-read as one.
    let ended = untold
        .iter()
        .any(|u| u.analysis.note == Some(Note::StartUp));
    let noted = |u: &&&Assessed<'_>| {
        u.unit.is_bytes()
            && if ended {
                u.analysis.drift > 0.0
            } else {
                matches!(u.analysis.note, Some(Note::Settling { .. }))
            }
    };
    // Resident memory before address space (a `vm_size` of reserved,
    // untouched pages), the job's or tree's before one process's, then by
    // how much it rose.
    let u = untold.iter().filter(noted).max_by(|a, b| {
        (resident(a), a.analysis.drift)
            .partial_cmp(&(resident(b), b.analysis.drift))
            .unwrap_or(std::cmp::Ordering::Equal)
    })?;
    let a = u.analysis;
    Some(match a.note {
        Some(Note::Settling { rise }) if !ended => format!(
            "Still starting: {} has grown {} in the {} since its start-up ended, under {:.0} % of the {} its start-up rose; a leak cannot be told from a start-up settling until {} after it.",
            u.name,
            rate_text(a.slope_per_s, u.unit, value),
            duration(a.duration_s),
            100.0 * super::SETTLE_SHARE,
            value(rise, u.unit),
            duration(super::settling_for_s(a.warmup_s))
        ),
        _ => format!(
            "The job ended during its start-up: {} grew {} over its last {}, and so short a run cannot tell a leak from a start-up; watch a longer one to judge it.",
            u.name,
            value(a.drift, u.unit),
            duration(a.duration_s)
        ),
    })
}

/// The least rise, as a share of its level, that "grew, then held" names in
/// a headline: a flat level's band.
pub const HELD_SHARE: f64 = 0.01;

/// A headline, and whether it tells memory that rose and then held.
struct Said {
    text: String,
    held: bool,
}

impl From<String> for Said {
    fn from(text: String) -> Self {
        Self { text, held: false }
    }
}

fn headline_of(
    rows: &[Assessed<'_>],
    growths: &[super::answer::Growth],
    findings: &[Finding],
    untold: &[&Assessed<'_>],
    tree: Option<&super::tree::TreeSummary>,
    value: &dyn Fn(f64, Unit) -> String,
    duration: &dyn Fn(f64) -> String,
) -> Said {
    let memory: Vec<&Assessed<'_>> = rows.iter().filter(|r| judged_memory(r)).collect();
    let Some(top) = growths.first() else {
        // Findings stand on growth verdicts; should one come without them,
        // it is still never hidden behind "flat". (A process whose own
        // memory rose and held is no growth: it is told below, as such.)
        if let Some(f) = findings.iter().find(|f| f.kind != "process_held") {
            return format!("Growth found: {}.", f.text).into();
        }
        // Growth that cannot be told from a start-up, whatever else held:
        // the job ended during its start-up, or its start-up's tail is
        // still small beside it (see [`super::settling`]). What rose most
        // says so.
        if let Some(h) = start_up_headline(untold, value, duration) {
            return h.into();
        }
        let told: Vec<&&Assessed<'_>> = memory
            .iter()
            .filter(|r| r.analysis.verdict != Verdict::Insufficient)
            .collect();
        if told.is_empty() {
            let text = if memory.is_empty() {
                "No memory channel to judge."
            } else {
                "Too few readings after the start-up to judge memory."
            };
            return text.to_owned().into();
        }
        // Memory that grew beyond its noise and then held is not growth at
        // the end, but neither is it flat: say what was gained and kept,
        // where it matters. A rise that stopped adds up to nothing more, so
        // it is a headline only at a size that matters: beyond a flat
        // level's band, 1 % of its level (80 KiB of a 260 MB tree's USS,
        // "+0 %", is noise to a person, and a false alarm).
        let material = |r: &&&&Assessed<'_>| {
            let a = r.analysis;
            a.rose_and_held() && a.drift > HELD_SHARE * a.baseline.abs()
        };
        // Resident memory before address space (a mapping reserved at
        // once is no rise of what is held), then by how much it rose.
        let held = told.iter().filter(material).max_by(|a, b| {
            (resident(a), a.analysis.drift)
                .partial_cmp(&(resident(b), b.analysis.drift))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        if let Some(h) = held {
            let more = told.iter().filter(material).count() - 1;
            return Said {
                text: held_headline(h, more, tree, value, duration),
                held: true,
            };
        }
        // A channel that moved but whose readings cannot tell growth from
        // noise is not flat: say so, with what it had.
        if let Some(u) = untold.first() {
            let a = u.analysis;
            let more = match untold.len() {
                1 => String::new(),
                n => format!(" (and {} more)", n - 1),
            };
            return format!(
                "No memory channel grows beyond its noise, but {}{more} cannot be told: {} readings over {}.",
                u.name,
                a.points,
                duration(a.duration_s)
            )
            .into();
        }
        let noisy: Vec<&str> = told
            .iter()
            .filter(|r| r.analysis.verdict == Verdict::Noisy)
            .map(|r| r.name)
            .collect();
        // Memory that wanders hides a leak slower than its noise lets show:
        // never "does not grow", but what this run could have seen.
        let seen = told
            .iter()
            .filter(|r| resident(r).0)
            .filter_map(|r| r.analysis.evidence.as_ref()?.detectable_per_s)
            .fold(f64::INFINITY, f64::min);
        let under = if seen.is_finite() {
            format!(
                ", and growth under {} would not show in this run",
                rate_text(seen, Unit::Bytes, value)
            )
        } else {
            String::new()
        };
        let text = match noisy.as_slice() {
            [] => "Memory is flat.".into(),
            [one] => format!(
                "No memory channel grows beyond its noise: {one} varies more than 1 % of its level{under}."
            ),
            many => format!(
                "No memory channel grows beyond its noise: {} channels vary more than 1 % of their level{under}.",
                many.len()
            ),
        };
        return text.into();
    };
    let mut s = super::answer::sentence(top, value, duration);
    if findings.iter().any(|f| f.kind == "copy_on_access") {
        s.push_str(" Copy-on-access: workers touch pages they share with their parent.");
    }
    if let Some(also) = super::answer::also_growing(&growths[1..]) {
        s.push(' ');
        s.push_str(&also);
    }
    s.into()
}

/// Whether a channel is resident memory (not address space), and the
/// job's or tree's rather than one process's: the order in which a
/// headline about a rise picks what to name.
fn resident(u: &&Assessed<'_>) -> (bool, bool) {
    let leaf = u.name.rsplit('.').next().unwrap_or_default();
    let whole = !u.name.starts_with("pid");
    (
        matches!(leaf, "rss" | "pss" | "uss" | "current" | "used"),
        whole,
    )
}

/// The headline of memory that rose and then held (`h`, and `more` other
/// channels that did): who grew, by how much, in what memory, from when to
/// when; and that nothing grows at the end. "python3 18333 (main) grew
/// 765.0 MiB in the page cache of a file it maps from 6.5 s to 16.5 s, then
/// held; nothing grows at the end."
fn held_headline(
    h: &Assessed<'_>,
    more: usize,
    tree: Option<&super::tree::TreeSummary>,
    value: &dyn Fn(f64, Unit) -> String,
    duration: &dyn Fn(f64) -> String,
) -> String {
    let a = h.analysis;
    let when = match a.rise_s {
        Some([from, to]) if to > from => {
            format!(" from {} to {}", duration(from), duration(to))
        }
        Some([at, _]) => format!(" at {}", duration(at)),
        None => String::new(),
    };
    let process = tree.and_then(|t| super::answer::process_of(t, h.name));
    if let Some(p) = process {
        let what = p
            .where_
            .as_ref()
            .filter(|w| w.share >= 0.5)
            .map_or(String::new(), |w| format!(" {}", held_phrase(&w.largest)));
        return format!(
            "{} {} ({}) grew {}{what}{when}, then held; nothing grows at the end.",
            p.name,
            p.pid,
            p.role,
            value(a.drift, h.unit)
        );
    }
    let more = match more {
        0 => String::new(),
        n => format!(" (and {n} more)"),
    };
    let pct = if a.baseline.abs() > 0.0 {
        format!(" ({:+.0} %)", 100.0 * a.drift / a.baseline.abs())
    } else {
        String::new()
    };
    format!(
        "Memory grew, then held: {} rose {}{pct}{more}{when} and did not grow after; nothing grows at the end.",
        h.name,
        value(a.drift, h.unit)
    )
}

/// What memory a rise that held is in, short.
fn held_phrase(class: &str) -> &'static str {
    match class {
        "heap" => "in the heap",
        "anon" => "in anonymous memory",
        "file" => "in the page cache of a file it maps",
        "shmem" => "in shared memory",
        "stack" => "in its main thread's stack",
        "gpu" => "in GPU driver mappings",
        _ => "in other mappings",
    }
}

/// The headline of workers copying their parent's pages: who copies, how
/// fast the tree's PSS grows (or what was copied, where it held), and what
/// bounds it: the pages they still share, not the host's RAM.
fn copy_headline(
    c: &super::tree::CopyOnAccess,
    growing: &[Assessed<'_>],
    value: &dyn Fn(f64, Unit) -> String,
    duration: &dyn Fn(f64) -> String,
) -> String {
    let one = c.copiers.len() == 1;
    let (verb, they, share) = if one {
        ("copies", "it", "shares")
    } else {
        ("copy", "they", "share")
    };
    let whose = if one { "its" } else { "their" };
    if c.in_start_up {
        return format!(
            "Copy-on-access in the start-up: {} copied pages {they} {share} with {whose} parent: \
             the tree's PSS rose {} ({:+.0} %) from their start and held while every process's \
             RSS stayed flat. Keep such data in one numpy array, Arrow table or bytes object.",
            c.who,
            value(c.grew, Unit::Bytes),
            c.share * 100.0,
        );
    }
    let mut s = format!(
        "Copy-on-access: {} {verb} pages {they} {share} with {whose} parent",
        c.who
    );
    let rate = [names::TREE_PSS, names::TREE_USS]
        .iter()
        .find_map(|n| growing.iter().find(|g| g.name == *n))
        .map(|g| (g.name, g.analysis.projection_24h.unwrap_or(0.0) / 86_400.0))
        .filter(|(_, r)| *r > 0.0);
    match rate {
        Some((name, r)) if !c.held => {
            s.push_str(&format!(
                ": {name} grows {} while every process's RSS stays flat",
                rate_text(r, Unit::Bytes, value)
            ));
            if let Some(room) = c.room {
                s.push_str(&format!(
                    "; at most {} more can be copied (the pages {they} still {share}), in {}",
                    value(room, Unit::Bytes),
                    duration(room / r)
                ));
            }
        }
        _ => s.push_str(&format!(
            ": the tree's PSS rose {} ({:+.0} %){} while every process's RSS stayed flat",
            value(c.grew, Unit::Bytes),
            c.share * 100.0,
            if c.held { " and held" } else { "" }
        )),
    }
    s.push_str(". Keep such data in one numpy array, Arrow table or bytes object.");
    s
}

/// Which layer of a PyTorch job's GPU memory grows (see
/// [`flatline_catalog::torch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuLayer {
    /// `torch.allocated` grows: live tensors are kept (a tensor leak).
    Tensors,
    /// `torch.reserved` grows while allocated is flat: the caching
    /// allocator holds ever more blocks (fragmentation).
    CachingAllocator,
    /// The driver's count of the process grows while reserved is flat:
    /// memory outside PyTorch's allocator.
    OutsidePytorch,
    /// Nothing grows.
    None,
}

/// What the layers of GPU memory say, in one sentence.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LayerFinding {
    pub layer: GpuLayer,
    pub text: String,
}

/// Which layer grows, where the job logs PyTorch's allocated and reserved
/// memory (`torch.allocated`, `torch.reserved`): the tensors, the caching
/// allocator, or what lies outside it (`gpu.other`, else the driver's count
/// of the watched processes, `gpu<i>.proc_used`). `None` without those
/// channels, or while too few readings are in to judge them.
pub(crate) fn gpu_layers(
    rows: &[Assessed<'_>],
    value: &dyn Fn(f64, Unit) -> String,
) -> Option<LayerFinding> {
    let find = |pred: &dyn Fn(&str) -> bool| {
        rows.iter()
            .find(|r| pred(r.name) && r.analysis.verdict != Verdict::Insufficient)
    };
    use flatline_catalog::{gpu, torch};
    let allocated = find(&|n| torch::Stat::Allocated.is_channel(n))?;
    let reserved = find(&|n| torch::Stat::Reserved.is_channel(n))?;
    let driver = find(&|n| n == torch::OTHER).or_else(|| find(&gpu::is_proc_used));
    let grows = |r: &Assessed<'_>| r.analysis.kind == Kind::Level && r.analysis.severity.is_some();
    let rate = |r: &Assessed<'_>| {
        let per_s = r.analysis.projection_24h.unwrap_or(0.0) / 86_400.0;
        format!("{} grows {}", r.name, rate_text(per_s, r.unit, value))
    };
    let (layer, text) = if grows(allocated) {
        (
            GpuLayer::Tensors,
            format!(
                "GPU: a tensor leak. {}: live tensors are kept from step to step \
                 (losses kept with their graphs, outputs cached in a list).",
                rate(allocated)
            ),
        )
    } else if grows(reserved) {
        (
            GpuLayer::CachingAllocator,
            format!(
                "GPU: PyTorch's caching allocator. {} while torch.allocated is flat: it holds \
                 ever more blocks it cannot reuse (fragmentation); try \
                 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",
                rate(reserved)
            ),
        )
    } else if let Some(d) = driver.filter(|d| grows(d)) {
        (
            GpuLayer::OutsidePytorch,
            format!(
                "GPU: outside PyTorch. {} while torch.reserved is flat: the CUDA context, NCCL \
                 buffers, cuBLAS/cuDNN workspaces or another library allocate it.",
                rate(d)
            ),
        )
    } else {
        (
            GpuLayer::None,
            format!(
                "GPU: PyTorch's allocated and reserved memory{} do not grow.",
                driver.map_or(String::new(), |d| format!(" and {}", d.name))
            ),
        )
    };
    Some(LayerFinding { layer, text })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::LimitSource;

    /// A channel in bytes with no limit known.
    fn bytes_row<'a>(name: &'a str, analysis: &'a ChannelAnalysis) -> Assessed<'a> {
        Assessed {
            name,
            unit: Unit::Bytes,
            analysis,
            limit: None,
        }
    }
    use crate::{Context, analyze};

    fn value(v: f64, u: Unit) -> String {
        match u {
            Unit::Bytes => format!("{:.1} MiB", v / 1_048_576.0),
            _ => format!("{v}"),
        }
    }

    fn duration(s: f64) -> String {
        format!("{:.0} h", s / 3600.0)
    }

    #[test]
    fn the_most_urgent_growth_comes_first_and_flat_memory_says_so() {
        let t: Vec<f64> = (0..600).map(f64::from).collect();
        let leak: Vec<f64> = t.iter().map(|t| 1e9 + 13.1 * 1_048_576.0 * t).collect();
        let slow: Vec<f64> = t.iter().map(|t| 1e9 + 2e4 * t).collect();
        let flat: Vec<f64> = t.iter().map(|_| 5e8).collect();
        let with_limit = |limit| Context {
            limit,
            min_growth: 65536.0,
            ..Context::default()
        };
        let a_leak = analyze(&t, &leak, &with_limit(Some(1e11)));
        let a_slow = analyze(&t, &slow, &with_limit(None));
        let a_flat = analyze(&t, &flat, &with_limit(Some(1e11)));
        assert_eq!(a_leak.severity, Some(Severity::Critical));
        assert_eq!(a_slow.severity, Some(Severity::Info));
        let row = |name, analysis, limit| Assessed {
            name,
            unit: Unit::Bytes,
            analysis,
            limit,
        };
        let rows = [
            row("mem.rss", &a_slow, None),
            row("tree.pss", &a_leak, Some(LimitSource::Cgroup)),
            row("alloc.live", &a_flat, None),
        ];
        let g = growing(&rows);
        assert_eq!(
            g.iter().map(|r| r.name).collect::<Vec<_>>(),
            ["tree.pss", "mem.rss"]
        );
        assert_eq!(order(&rows), [1, 0, 2]);
        let h = headline(&rows, &value, &duration);
        assert!(
            h.starts_with("tree.pss grows 13.1 MiB/s (the cgroup's memory limit in 2 h)."),
            "{h}"
        );
        assert!(h.ends_with("Also growing: mem.rss."), "{h}");
        let flat_rows = [row("alloc.live", &a_flat, None)];
        assert_eq!(headline(&flat_rows, &value, &duration), "Memory is flat.");
        assert_eq!(
            headline(&[], &value, &duration),
            "No memory channel to judge."
        );
        assert_eq!(rate_text(100.0, Unit::Bytes, &value), "0.3 MiB/h");
        assert_eq!(rate_text(2048.0, Unit::Bytes, &value), "0.0 MiB/s");
    }

    #[test]
    fn a_finding_or_an_untold_channel_is_never_called_flat() {
        let t: Vec<f64> = (0..600).map(f64::from).collect();
        let ctx = Context {
            min_growth: 65536.0,
            ..Context::default()
        };
        let flat = analyze(&t, &vec![5e8; t.len()], &ctx);
        // Six readings over the same ten minutes that rise by a third:
        // cannot be told.
        let few = analyze(
            &[0.0, 120.0, 240.0, 360.0, 480.0, 599.0],
            &[3e8, 3.2e8, 3.4e8, 3.6e8, 3.8e8, 4e8],
            &Context {
                warmup_s: Some(0.0),
                ..ctx.clone()
            },
        );
        assert_eq!(few.verdict, Verdict::Insufficient);
        let row = bytes_row;
        let a = assess(
            &[row("mem.rss", &flat), row("tree.pss", &few)],
            &Known::default(),
            &value,
            &duration,
        );
        assert!(
            a.headline.starts_with(
                "No memory channel grows beyond its noise, but tree.pss cannot be told"
            ),
            "{}",
            a.headline
        );
        assert_eq!(a.untold, ["tree.pss"]);
        // A finding with no growing channel (never made so, but guarded).
        let tree = crate::tree::TreeSummary {
            processes: Vec::new(),
            peak: 1,
            brief: 0,
            grew: Vec::new(),
            finding: Some("copy-on-access: something".into()),
            copy: None,
            sums_age_s: None,
        };
        let a = assess(
            &[row("mem.rss", &flat)],
            &Known::tree(Some(&tree)),
            &value,
            &duration,
        );
        assert!(a.headline.starts_with("Growth found:"), "{}", a.headline);
        assert_eq!(a.findings.len(), 1);
        let a = assess(
            &[row("mem.rss", &flat)],
            &Known::default(),
            &value,
            &duration,
        );
        assert_eq!(a.headline, "Memory is flat.");
        assert!(a.findings.is_empty() && a.growing.is_empty() && a.untold.is_empty());
        // Workers that copied in the start-up, then held: flat after it,
        // and the headline says what the start-up held, not "flat".
        let copied = crate::tree::TreeSummary {
            finding: Some("copy-on-access in the job's start-up: …".into()),
            copy: Some(crate::tree::CopyOnAccess {
                copiers: vec![11, 12],
                who: "its 2 workers".into(),
                grew: 200.0 * 1_048_576.0,
                share: 0.4,
                held: true,
                in_start_up: true,
                room: None,
            }),
            ..tree
        };
        let a = assess(
            &[row("mem.rss", &flat)],
            &Known::tree(Some(&copied)),
            &value,
            &duration,
        );
        assert!(
            a.headline.starts_with(
                "Copy-on-access in the start-up: its 2 workers copied pages they share with their \
                 parent: the tree's PSS rose 200"
            ) && a.headline.contains("(+40 %) from their start and held"),
            "{}",
            a.headline
        );
        assert!(a.growing.is_empty());
    }

    /// Where a process grew is a finding but never a headline of its own
    /// nor growth found (a flat job stays flat); where the headline names
    /// a process whose growth is page cache, it says so.
    #[test]
    fn where_a_process_grew_is_said_with_its_growth_never_instead() {
        use crate::places::where_grew;
        use crate::tree::{ProcessSeen, TreeSummary};
        use flatline_format::{Event, EventKind};
        let t: Vec<f64> = (0..600).map(f64::from).collect();
        let ctx = Context {
            min_growth: 65536.0,
            ..Context::default()
        };
        let flat = analyze(&t, &vec![5e8; t.len()], &ctx);
        let leak = analyze(
            &t,
            &t.iter()
                .map(|t| 1e9 + 8.0 * 1_048_576.0 * t)
                .collect::<Vec<_>>(),
            &ctx,
        );
        let reading = |t_s: f64, file: f64| Event {
            t_ns: (t_s * 1e9) as u64,
            kind: EventKind::fact("classes", "", &[("file", file)]).of_pid(42),
        };
        let events = [reading(0.0, 0.0), reading(590.0, 4e9)];
        let tree = TreeSummary {
            processes: vec![ProcessSeen {
                pid: 42,
                name: "python3".into(),
                role: "main".into(),
                ppid: None,
                started_s: Some(0.0),
                exited_s: None,
                channels: Some("pid42".into()),
                pss_verdict: None,
                pss_growth: None,
                where_: where_grew(&events, 42, 0.0, 600.0),
            }],
            peak: 1,
            brief: 0,
            grew: Vec::new(),
            finding: None,
            copy: None,
            sums_age_s: None,
        };
        let a = assess(
            &[bytes_row("mem.rss", &flat)],
            &Known::tree(Some(&tree)),
            &value,
            &duration,
        );
        assert_eq!(a.headline, "Memory is flat.");
        assert_eq!(a.findings.len(), 1);
        assert_eq!(a.findings[0].kind, "where");
        assert!(!a.growth_found());
        let a = assess(
            &[bytes_row("pid42.rss", &leak)],
            &Known::tree(Some(&tree)),
            &value,
            &duration,
        );
        assert!(
            a.headline.starts_with("python3 42 (main) grows 8.0 MiB/s (no limit known): ")
                && a.headline.ends_with(
                    ": 100 % of it in the page cache of files it maps, which the kernel takes back under pressure."
                ),
            "{}",
            a.headline
        );
    }

    /// Memory that rose beyond its noise and then held (workers copying a
    /// dataset in their first epoch) is neither growth at the end nor flat.
    #[test]
    fn memory_that_rose_then_held_is_said_so() {
        let t: Vec<f64> = (0..600).map(f64::from).collect();
        let x: Vec<f64> = t
            .iter()
            .map(|&s| 3e8 + 1e8 * ((s - 100.0) / 200.0).clamp(0.0, 1.0) + 5e4 * (s * 1.3).sin())
            .collect();
        // The start-up as a recording's start-up gives it (the ramp is the
        // job's, not a start-up the start-up should swallow).
        let ctx = Context {
            min_growth: 65536.0,
            warmup_s: Some(5.0),
            ..Context::default()
        };
        let rose = analyze(&t, &x, &ctx);
        assert!(rose.rose_and_held(), "{rose:?}");
        assert!(!rose.verdict.is_growth(), "{rose:?}");
        let flat = analyze(&t, &vec![5e8; t.len()], &ctx);
        assert!(!flat.rose() && !flat.rose_and_held());
        let row = bytes_row;
        let a = assess(
            &[row("mem.rss", &flat), row("tree.pss", &rose)],
            &Known::default(),
            &value,
            &duration,
        );
        assert!(
            a.headline
                .starts_with("Memory grew, then held: tree.pss rose ")
                && a.headline.contains("(+33 %)")
                && a.headline.ends_with("nothing grows at the end."),
            "{}",
            a.headline
        );
        // The same shape, +0.25 % of its level: it rose beyond its noise
        // and held, and is too small to be a headline.
        let small: Vec<f64> = t
            .iter()
            .map(|&s| 4e8 + 1e6 * ((s - 100.0) / 200.0).clamp(0.0, 1.0) + 5e2 * (s * 1.3).sin())
            .collect();
        let small = analyze(&t, &small, &ctx);
        assert!(small.rose_and_held(), "{small:?}");
        let a = assess(
            &[row("mem.rss", &flat), row("tree.uss", &small)],
            &Known::default(),
            &value,
            &duration,
        );
        assert_eq!(a.headline, "Memory is flat.");
    }

    /// A process whose own memory rose and held (a file read in, then
    /// held) is no "Growth found": the first sentence says who grew, by how
    /// much, in what memory and when, and that nothing grows at the end.
    #[test]
    fn a_process_that_rose_and_held_is_said_so_never_as_growth() {
        use crate::places::where_grew;
        use crate::tree::{ProcessSeen, TreeSummary};
        use flatline_format::{Event, EventKind};
        let t: Vec<f64> = (0..470).map(|i| f64::from(i) * 0.1).collect();
        // 10 MiB, read in to 778 MiB from 6.5 s to 16.5 s, then held.
        let x: Vec<f64> = t
            .iter()
            .map(|&s| 1e7 + 768.0 * 1_048_576.0 * ((s - 6.5) / 10.0).clamp(0.0, 1.0))
            .collect();
        let ctx = Context {
            min_growth: 16384.0,
            warmup_s: Some(4.6),
            ..Context::default()
        };
        let rose = analyze(&t, &x, &ctx);
        assert!(rose.rose_and_held(), "{rose:?}");
        let [from, to] = rose.rise_s.unwrap();
        assert!(
            (from - 7.0).abs() < 0.2 && (to - 16.0).abs() < 0.2,
            "{from} {to}"
        );
        let reading = |t_s: f64, file: f64| Event {
            t_ns: (t_s * 1e9) as u64,
            kind: EventKind::fact("classes", "", &[("file", file)]).of_pid(42),
        };
        let events = [reading(5.0, 0.0), reading(40.0, 768.0 * 1_048_576.0)];
        let tree = TreeSummary {
            processes: vec![ProcessSeen {
                pid: 42,
                name: "python3".into(),
                role: "main".into(),
                ppid: None,
                started_s: Some(0.0),
                exited_s: None,
                channels: Some("pid42".into()),
                pss_verdict: None,
                pss_growth: None,
                where_: where_grew(&events, 42, 4.6, 47.0),
            }],
            peak: 1,
            brief: 0,
            grew: vec![42],
            finding: None,
            copy: None,
            sums_age_s: None,
        };
        let rows = [bytes_row("pid42.uss", &rose), bytes_row("pid42.rss", &rose)];
        let a = assess(&rows, &Known::tree(Some(&tree)), &value, &|s| {
            format!("{s:.1} s")
        });
        assert_eq!(
            a.headline,
            "python3 42 (main) grew 768.0 MiB in the page cache of a file it maps from 7.0 s \
             to 16.0 s, then held; nothing grows at the end."
        );
        let kinds: Vec<&str> = a.findings.iter().map(|f| f.kind).collect();
        assert!(
            kinds.contains(&"process_held") && kinds.contains(&"rose_and_held"),
            "{kinds:?}"
        );
        assert!(!kinds.contains(&"process_grew"), "{kinds:?}");
        assert!(!a.growth_found() && a.growing.is_empty());
    }

    /// What a full disk left out is said first, then the answer.
    #[test]
    fn a_gap_is_said_before_the_answer() {
        let t: Vec<f64> = (0..600).map(f64::from).collect();
        let flat = analyze(&t, &vec![5e8; t.len()], &Context::default());
        let gap = DamageNote {
            sentence: "Lost 6.6 s (132 samples, from 2.3 s to 8.9 s) while the disk was full."
                .into(),
            lost: vec!["132 samples".into()],
            in_headline: true,
        };
        let known = Known {
            gap: Some(&gap),
            ..Known::default()
        };
        let a = assess(&[bytes_row("mem.rss", &flat)], &known, &value, &duration);
        assert_eq!(
            a.headline,
            "Lost 6.6 s (132 samples, from 2.3 s to 8.9 s) while the disk was full. Memory is flat."
        );
        assert_eq!(a.findings[0].kind, "recording_gap");
    }

    #[test]
    fn the_growing_layer_of_gpu_memory_is_named() {
        let t: Vec<f64> = (0..600).map(f64::from).collect();
        let ctx = Context::default();
        let leak = analyze(
            &t,
            &t.iter().map(|t| 2e9 + 1_048_576.0 * t).collect::<Vec<_>>(),
            &ctx,
        );
        let flat = analyze(&t, &vec![3e9; t.len()], &ctx);
        let short = analyze(&t[..3], &[1.0, 2.0, 3.0], &ctx);
        let row = bytes_row;
        let layer = |a, r, d| {
            gpu_layers(
                &[
                    row("torch.allocated", a),
                    row("torch.reserved", r),
                    row("gpu.other", d),
                ],
                &value,
            )
            .map(|f| f.layer)
        };
        assert_eq!(layer(&leak, &leak, &flat), Some(GpuLayer::Tensors));
        assert_eq!(layer(&flat, &leak, &flat), Some(GpuLayer::CachingAllocator));
        assert_eq!(layer(&flat, &flat, &leak), Some(GpuLayer::OutsidePytorch));
        assert_eq!(layer(&flat, &flat, &flat), Some(GpuLayer::None));
        assert_eq!(layer(&short, &flat, &flat), None, "too few readings");
        let f = gpu_layers(
            &[row("torch.allocated", &flat), row("torch.reserved", &leak)],
            &value,
        )
        .unwrap();
        assert!(f.text.contains("expandable_segments"), "{}", f.text);
        assert!(
            f.text.contains("torch.reserved grows 1.0 MiB/s"),
            "{}",
            f.text
        );
        assert_eq!(gpu_layers(&[row("gpu0.used", &leak)], &value), None);
        // Without `gpu.other`, the driver's count of the job's processes;
        // another rank's allocator is not the main one's.
        let driver = |name| {
            gpu_layers(
                &[
                    row("torch.allocated", &flat),
                    row("torch.reserved", &flat),
                    row(name, &leak),
                ],
                &value,
            )
            .map(|f| f.layer)
        };
        assert_eq!(driver("gpu1.proc_used"), Some(GpuLayer::OutsidePytorch));
        assert_eq!(driver("gpu1.used"), Some(GpuLayer::None));
        let ranks = gpu_layers(
            &[
                row("torch.rank1.allocated", &leak),
                row("torch.reserved", &flat),
            ],
            &value,
        );
        assert_eq!(ranks, None, "rank 1's allocated is not the main rank's");
    }
}
