//! The first sentence judged against the truth (`flatline bench
//! headlines`): what a receipt's first sentence claims (that something
//! grows, who, in what memory, at which line; that it rose and held; that
//! the allocator keeps it; that the file was damaged or lost a stretch),
//! read back from its words, set beside what is known of the job by how it
//! was made (`recordings/headlines/manifest.json`, and the corpus's
//! labels), and beside what the receipt's own body says.
//!
//! The sentence is read as a person reads it, from its words, not from the
//! typed answer it was made from: a wording that says more than the answer
//! holds is what this is here to catch.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use flatline_telemetry::recording::Recording;
use serde::{Deserialize, Serialize};

use crate::commands::corpus;
use crate::commands::report;

/// What a first sentence says, read from its words.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Claims {
    /// `Some(true)`: something grows now; `Some(false)`: nothing does
    /// (flat, does not grow, nothing grows at the end, what the program
    /// holds is flat); `None`: it says neither (it cannot be told).
    pub grows: Option<bool>,
    /// The processes it names: role and pid (`python3 18333 (main)`,
    /// `worker 24601`, `2 workers (python3 8948 and 8949)`).
    pub who: Vec<(String, u32)>,
    /// The kind of memory it names (`heap`, `anon`, `file`, `shmem`,
    /// `stack`, `gpu`).
    pub class: Option<&'static str>,
    /// The line it names (`jobs.py:93`), or a function where no file is.
    pub line: Option<String>,
    /// It says memory rose and then held.
    pub settled: bool,
    /// It says the allocator keeps memory that was freed.
    pub allocator: bool,
    /// It says workers copy (or copied) pages they share with a parent.
    pub copy: bool,
    /// It says a process died (killed, out of memory).
    pub death: bool,
    /// It says what it cannot tell.
    pub untold: bool,
    /// It says the file was damaged: how much it read, of how long a
    /// recording (`None`: "of this recording", the span not known).
    pub damage: Option<DamageClaim>,
    /// It says a stretch was lost while writes failed.
    pub gap: Option<GapClaim>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DamageClaim {
    pub read_s: f64,
    pub total_s: Option<f64>,
    /// It says the rest of the file could not be read.
    pub unread: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GapClaim {
    pub lost_s: f64,
    pub samples: Option<u64>,
}

/// Frames no one's code allocates from: naming one as the line is wrong.
pub const ALLOCATOR_FRAMES: &[&str] = &[
    "obmalloc.c",
    "_PyObject_Malloc",
    "PyObject_Malloc",
    "PyMem_Malloc",
    "PyMem_RawMalloc",
    "malloc.c",
    "c10::alloc_cpu",
    "alloc_cpu.cpp",
];

/// The roles a process has in a watched tree.
const ROLES: [&str; 4] = ["main", "worker", "rank", "other"];

/// Reads what `headline` claims.
pub fn claims(headline: &str) -> Claims {
    let mut c = Claims::default();
    let mut rest = headline.trim();
    // What was lost is said first: "Read … lost." (or "… could not be
    // read (…).") then "Lost … while the disk was full.".
    if rest.starts_with("Read ") {
        let end = ["could not be read", " lost"]
            .iter()
            .find_map(|k| rest.find(k))
            .unwrap_or(0);
        let (first, after) = sentence_from(rest, end);
        c.damage = damage_claim(first);
        rest = after;
    }
    if rest.starts_with("Lost ") {
        let (first, after) = sentence_from(rest, rest.find(" while ").unwrap_or(0));
        c.gap = gap_claim(first);
        rest = after;
    }
    let answer = rest;
    let has = |s: &str| answer.contains(s);
    c.death = has(" was killed") || has("killed by") || has("out of memory") || has(" died");
    c.copy = has("Copy-on-access") || has("copy-on-access");
    c.settled = has("then held") || has(" and held");
    c.allocator = has("the allocator keeps");
    c.untold = has("cannot be told")
        || answer.starts_with("Still starting")
        || has("cannot tell")
        || answer.starts_with("Too few readings")
        || has("No memory channel to judge")
        || has("beyond its noise");
    // "grows" of something, never of nothing ("nothing grows at the end",
    // "No memory channel grows beyond its noise").
    let said_grows = answer
        .replace("nothing grows", "")
        .replace("No memory channel grows", "")
        .replace("do not grow", "");
    let grows_now = said_grows.contains(" grows ")
        || said_grows.contains(" grows.")
        || said_grows.contains(" grow together")
        || answer.starts_with("Growth found");
    let flat = answer.starts_with("Memory is flat")
        || answer.starts_with("Memory does not grow")
        || has("nothing grows at the end")
        || (c.allocator && has(" holds is flat"));
    c.grows = match (grows_now, flat) {
        (true, _) => Some(true),
        (false, true) => Some(false),
        (false, false) => None,
    };
    c.who = named(answer);
    c.class = class_of(answer);
    c.line = ["allocated at ", "held most at "]
        .iter()
        .find_map(|k| answer.split_once(k))
        .map(|(_, after)| {
            after
                .split(|ch: char| ch.is_whitespace() || ch == ',' || ch == '(')
                .next()
                .unwrap_or_default()
                .trim_end_matches(['.', ')', ';'])
                .to_owned()
        })
        .filter(|l| !l.is_empty());
    c
}

/// The sentence of `text` that ends at the first full stop and space at or
/// after byte `from` (a figure's point, "2.0 s", is followed by a digit,
/// and the words before `from`, a reason quoted, may hold any), and what
/// follows it.
fn sentence_from(text: &str, from: usize) -> (&str, &str) {
    match text[from..].find(". ") {
        Some(i) => (&text[..=from + i], text[from + i + 2..].trim_start()),
        None => (text, ""),
    }
}

/// The figure that ends `s` (`"24.0"` of `"Read 24.0"`).
fn number_before(s: &str, unit: &str) -> Option<f64> {
    let i = s.find(unit)?;
    s[..i]
        .rsplit(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
        .next()?
        .replace(',', "")
        .parse()
        .ok()
}

fn damage_claim(s: &str) -> Option<DamageClaim> {
    let after = s.strip_prefix("Read ")?;
    let read_s = number_before(after, " s ")?;
    let total_s = after
        .split_once(" s of a ")
        .and_then(|(_, rest)| number_before(rest, " s recording"));
    Some(DamageClaim {
        read_s,
        total_s,
        unread: s.contains("could not be read"),
    })
}

fn gap_claim(s: &str) -> Option<GapClaim> {
    let after = s.strip_prefix("Lost ")?;
    let lost_s = number_before(after, " s ")?;
    let samples = after
        .split_once('(')
        .and_then(|(_, rest)| number_before(rest, " samples"))
        .map(|n| n as u64);
    Some(GapClaim { lost_s, samples })
}

/// The processes a sentence names: `NAME PID (ROLE…)`, `ROLE PID` (but
/// not `of ROLE PID`, a parent named as such), and the pids listed after
/// `N ROLEs (NAME …)`.
fn named(text: &str) -> Vec<(String, u32)> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let clean = |w: &str| {
        w.trim_matches(|c: char| matches!(c, ',' | '.' | ';' | ':' | ')' | '('))
            .to_ascii_lowercase()
    };
    let pid = |w: &str| -> Option<u32> {
        let w = w.trim_end_matches([',', ')', ';', ':', '.']);
        (!w.is_empty() && w.bytes().all(|b| b.is_ascii_digit()))
            .then(|| w.parse().ok())
            .flatten()
    };
    let mut out: Vec<(String, u32)> = Vec::new();
    let mut push = |role: &str, p: u32| {
        if !out.iter().any(|(r, q)| r == role && *q == p) {
            out.push((role.to_owned(), p));
        }
    };
    let mut i = 0;
    while i < words.len() {
        let w = clean(words[i]);
        // `python3 18333 (main)`, `python 7831 (worker, rank 2)`.
        if let (Some(p), Some(next)) = (pid(words[i]), words.get(i + 1)) {
            let role = clean(next);
            if next.starts_with('(') && ROLES.contains(&role.as_str()) {
                push(&role, p);
                i += 2;
                continue;
            }
        }
        // `worker 24601`, but not `of main 24589`.
        if ROLES.contains(&w.as_str())
            && let Some(p) = words.get(i + 1).and_then(|n| pid(n))
            && (i == 0 || clean(words[i - 1]) != "of")
        {
            push(&w, p);
            i += 2;
            continue;
        }
        // `4 workers (python3 8948, 8946, 8947 and 8949)`.
        if let Some(role) = w.strip_suffix('s').filter(|r| ROLES.contains(r))
            && words.get(i + 1).is_some_and(|n| n.starts_with('('))
        {
            let mut j = i + 1;
            while j < words.len() {
                if let Some(p) = pid(words[j]) {
                    push(role, p);
                }
                if words[j].ends_with(')') {
                    break;
                }
                j += 1;
            }
            i = j + 1;
            continue;
        }
        i += 1;
    }
    out
}

fn class_of(text: &str) -> Option<&'static str> {
    [
        ("in the heap", "heap"),
        ("in anonymous memory", "anon"),
        ("page cache", "file"),
        ("in shared memory", "shmem"),
        ("stack", "stack"),
        ("GPU", "gpu"),
    ]
    .iter()
    .find(|(k, _)| text.contains(k))
    .map(|(_, c)| *c)
}

/// What is known of a job by how it was made: what its first sentence
/// must say, and what it must not.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Truth {
    /// Its memory grows at the end (a leak, or copies still being made).
    pub grows: bool,
    /// The roles of the processes that may be named.
    #[serde(default)]
    pub who: Vec<String>,
    /// The pids that may be named (where known).
    #[serde(default)]
    pub pids: Vec<u32>,
    /// The kind of memory the growth (or the rise that held) is in.
    #[serde(default)]
    pub class: Option<String>,
    /// The line that holds it (`file.py:13`), where sites were sampled.
    #[serde(default)]
    pub line: Option<String>,
    /// It rose, then held.
    #[serde(default)]
    pub settled: bool,
    /// The allocator keeps what the program freed; the program's own bytes
    /// do not grow.
    #[serde(default)]
    pub allocator: bool,
    /// Workers copy a parent's pages.
    #[serde(default)]
    pub copy: bool,
    /// A process was killed.
    #[serde(default)]
    pub death: bool,
    /// The file was damaged; the run it covers is this long.
    #[serde(default)]
    pub damaged: Option<DamagedTruth>,
    /// A stretch was lost while the disk was full.
    #[serde(default)]
    pub gap: Option<GapTruth>,
    /// Claims not judged for this job, where its construction does not
    /// settle them (`copy` for workers that may copy a few pages once).
    #[serde(default)]
    pub unjudged: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DamagedTruth {
    pub total_s: f64,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GapTruth {
    pub lost_s: f64,
    pub samples: u64,
}

/// One claim judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judged {
    /// `grows`, `who`, `class`, `line`, `settled`, `allocator`, `copy`,
    /// `death`, `damaged`, `gap`.
    pub claim: &'static str,
    /// Said and so; said and not so (`wrong`); not said (`missing`).
    pub outcome: Outcome,
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Right,
    Wrong,
    Missing,
}

/// `claims` judged against `truth`, claim by claim.
pub fn judge(c: &Claims, truth: &Truth) -> Vec<Judged> {
    let mut out = Vec::new();
    let mut put = |claim, outcome, detail: String| {
        out.push(Judged {
            claim,
            outcome,
            detail,
        })
    };
    use Outcome::{Missing, Right, Wrong};
    // A death is the answer: who died, of what, and what it grew by
    // before; whether anything grows after it is not what it says.
    let told_by_death = truth.death && c.death && c.grows.is_none();
    match c.grows {
        Some(g) if g == truth.grows => put("grows", Right, String::new()),
        Some(true) => put("grows", Wrong, "says it grows; it does not".into()),
        Some(false) => put("grows", Wrong, "says it does not grow; it does".into()),
        None if told_by_death => {}
        None => put(
            "grows",
            Missing,
            "says neither that it grows nor that it does not".into(),
        ),
    }
    for (role, pid) in &c.who {
        let role_ok = truth.who.is_empty() || truth.who.contains(role);
        let pid_ok = truth.pids.is_empty() || truth.pids.contains(pid);
        if role_ok && pid_ok {
            put("who", Right, format!("{role} {pid}"));
        } else {
            put("who", Wrong, format!("names {role} {pid}"));
        }
    }
    let whose = !truth.who.is_empty() || !truth.pids.is_empty();
    if c.who.is_empty() && whose && (truth.grows || truth.settled) && !truth.copy {
        put("who", Missing, "names no process".into());
    }
    match (c.class, &truth.class) {
        (Some(said), Some(t)) if said == t => put("class", Right, said.into()),
        (Some(said), Some(t)) => put("class", Wrong, format!("says {said}; it is {t}")),
        (None, Some(t)) if truth.grows || truth.settled => {
            put("class", Missing, format!("does not say {t}"))
        }
        _ => {}
    }
    if let Some(l) = &c.line {
        let file = |s: &str| s.rsplit('/').next().unwrap_or(s).to_owned();
        if ALLOCATOR_FRAMES.iter().any(|f| l.contains(f)) {
            put(
                "line",
                Wrong,
                format!("names an allocator's own frame, {l}"),
            );
        } else {
            match &truth.line {
                Some(t) if file(l) == file(t) => put("line", Right, l.clone()),
                Some(t) => put("line", Wrong, format!("names {l}; it is {t}")),
                None => put("line", Wrong, format!("names {l}; no line grows")),
            }
        }
    } else if let Some(t) = &truth.line {
        put("line", Missing, format!("does not name {t}"));
    }
    let flag = |said: bool, truly: bool| match (said, truly) {
        (true, true) => Some((Right, String::new())),
        (true, false) => Some((Wrong, "says so; it is not".into())),
        (false, true) => Some((Missing, "does not say so".into())),
        (false, false) => None,
    };
    for (claim, said, truly) in [
        ("settled", c.settled, truth.settled),
        ("allocator", c.allocator, truth.allocator),
        ("copy", c.copy, truth.copy),
        ("death", c.death, truth.death),
    ] {
        // Copies that rose and held are said as held; a copy's truth is
        // what was copied, whether it stopped or not.
        if claim == "settled" && c.settled && !truth.settled && (truth.copy || !truth.grows) {
            continue;
        }
        if truth.unjudged.iter().any(|u| u == claim) {
            continue;
        }
        if let Some((o, d)) = flag(said, truly) {
            put(claim, o, d);
        }
    }
    match (&c.damage, &truth.damaged) {
        (Some(d), Some(t)) => {
            let short = d.total_s.is_some_and(|s| s < t.total_s - 1.0);
            if short || d.read_s > t.total_s + 1.0 {
                put(
                    "damaged",
                    Wrong,
                    format!(
                        "says {:.1} s read of {}; the file covers {:.1} s",
                        d.read_s,
                        d.total_s
                            .map_or("an unknown span".into(), |s| format!("{s:.1} s")),
                        t.total_s
                    ),
                );
            } else {
                put("damaged", Right, String::new());
            }
        }
        (Some(_), None) => put("damaged", Wrong, "says it was damaged; it was not".into()),
        (None, Some(_)) => put("damaged", Missing, "does not say it was damaged".into()),
        (None, None) => {}
    }
    match (&c.gap, &truth.gap) {
        (Some(g), Some(t)) => {
            let off_s = (g.lost_s - t.lost_s).abs() > (0.25 * t.lost_s).max(1.5);
            let off_n = g
                .samples
                .is_some_and(|n| (n as f64 - t.samples as f64).abs() > 0.25 * t.samples as f64);
            if off_s || off_n {
                put(
                    "gap",
                    Wrong,
                    format!(
                        "says {:.1} s ({:?} samples) lost; about {:.1} s ({}) were",
                        g.lost_s, g.samples, t.lost_s, t.samples
                    ),
                );
            } else {
                put("gap", Right, String::new());
            }
        }
        (Some(_), None) => put("gap", Wrong, "says a stretch was lost; none was".into()),
        (None, Some(_)) => put("gap", Missing, "does not say first what was lost".into()),
        (None, None) => {}
    }
    out
}

/// Where a first sentence and its own receipt's body disagree: it says
/// something grows that no verdict calls growing at the end, that nothing
/// grows while a verdict does, or names a process none of whose channels
/// the body calls so.
pub fn disagreements(c: &Claims, a: &flatline_analysis::summary::Answer) -> Vec<String> {
    let mut out = Vec::new();
    let growing = &a.growing;
    match c.grows {
        Some(true) if growing.is_empty() => {
            out.push("says something grows; no level's verdict is growth at the end".into())
        }
        Some(false) if !growing.is_empty() && !c.allocator => out.push(format!(
            "says nothing grows; the body calls {} growing",
            growing.join(", ")
        )),
        _ => {}
    }
    if c.grows == Some(true) {
        for (role, pid) in &c.who {
            let stem = format!("pid{pid}.");
            let in_growth = a.growths.iter().any(|g| {
                g.who.as_ref().is_some_and(|w| w.pid == *pid)
                    || g.among.iter().any(|w| w.pid == *pid)
            });
            let own = growing.iter().any(|n| n.starts_with(&stem));
            if !(in_growth || own || c.copy || c.death) {
                out.push(format!(
                    "names {role} {pid} as growing; none of its channels grows"
                ));
            }
        }
    }
    if c.settled && !c.copy {
        for (role, pid) in &c.who {
            let stem = format!("pid{pid}.");
            if growing.iter().any(|n| n.starts_with(&stem)) {
                out.push(format!("says {role} {pid} held; its channels grow"));
            }
        }
    }
    out
}

/// One recording of a set, with what is known of it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Its path, from the manifest's folder.
    pub file: String,
    /// How it was made (the command watched).
    #[serde(default)]
    pub command: Vec<String>,
    /// How the truth is known.
    pub how: String,
    pub truth: Truth,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub recordings: Vec<Entry>,
}

/// A recording's first sentence, judged.
#[derive(Debug, Clone, Serialize)]
pub struct Case {
    /// Which set it is of: `headlines`, `corpus`, `damaged`.
    pub set: &'static str,
    pub file: String,
    pub headline: String,
    pub claims: Claims,
    pub judged: Vec<Judged>,
    /// Where the sentence and its own body disagree.
    pub disagrees: Vec<String>,
}

impl Case {
    pub fn count(&self, o: Outcome) -> usize {
        self.judged.iter().filter(|j| j.outcome == o).count()
    }
}

/// Judges the first sentence of the recording at `path`.
pub fn case(set: &'static str, path: &Path, file: &str, truth: &Truth) -> Result<Case> {
    let rec = Recording::open(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(case_of(set, &rec, file, truth))
}

fn case_of(set: &'static str, rec: &Recording, file: &str, truth: &Truth) -> Case {
    let receipt = report::analyse(rec, None);
    let a = receipt.assessment();
    let c = claims(&a.headline);
    Case {
        set,
        file: file.to_owned(),
        judged: judge(&c, truth),
        disagrees: disagreements(&c, a),
        headline: a.headline.clone(),
        claims: c,
    }
}

/// Every recording of a headline manifest in `dir`, judged.
pub fn evaluate_manifest(dir: &Path) -> Result<Vec<(Case, Entry)>> {
    let path = dir.join("manifest.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let m: Manifest =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    m.recordings
        .into_iter()
        .map(|e| Ok((case("headlines", &dir.join(&e.file), &e.file, &e.truth)?, e)))
        .collect()
}

/// The corpus's truth of a recording, as its first sentence can be held
/// to it: whether it grows (a channel labelled growth), and who (the pids
/// of the processes whose channels are).
pub fn corpus_truth(e: &corpus::Entry) -> Truth {
    let growth: Vec<&String> = e
        .channels
        .iter()
        .filter(|(_, l)| l.class == corpus::Class::Growth)
        .map(|(n, _)| n)
        .collect();
    let mut pids: Vec<u32> = growth
        .iter()
        .filter_map(|n| n.strip_prefix("pid")?.split('.').next()?.parse().ok())
        .collect();
    pids.sort_unstable();
    pids.dedup();
    let gpu = growth.iter().any(|n| n.starts_with("gpu"));
    Truth {
        grows: !growth.is_empty(),
        // The GPU stand-in's channels are the watched process's.
        who: if gpu { vec!["main".into()] } else { Vec::new() },
        pids,
        copy: e.family.contains("copy-on-access") && !e.family.contains("fixed"),
        class: gpu.then(|| "gpu".into()),
        ..Truth::default()
    }
}

/// Every recording of the corpus in `dir`, judged by what its labels say.
pub fn evaluate_corpus(dir: &Path) -> Result<Vec<Case>> {
    let m = corpus::Manifest::load(dir)?;
    m.recordings
        .iter()
        .map(|e| case("corpus", &dir.join(&e.file), &e.file, &corpus_truth(e)))
        .collect()
}

/// Copies of `entries`' recordings with damage of each kind an older or
/// newer format meets (a frame's length gone bad, payloads flipped), each
/// judged with its own truth and the file's whole span: the sentence must
/// say it was damaged and never call it shorter than it is.
pub fn evaluate_damaged(dir: &Path, entries: &[Entry], out: &Path) -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    for e in entries.iter().filter(|e| e.truth.damaged.is_none()) {
        let path = dir.join(&e.file);
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let whole = Recording::open(&path)?;
        let Some(damaged) = damage(&bytes) else {
            continue;
        };
        let total_s = whole
            .footer
            .as_ref()
            .map_or(whole.duration_s(), |f| f.duration_ns as f64 / 1e9);
        let name = format!(
            "damaged-{}",
            Path::new(&e.file)
                .file_name()
                .map_or_else(|| e.file.clone(), |f| f.to_string_lossy().into_owned())
        );
        let copy: PathBuf = out.join(&name);
        std::fs::write(&copy, damaged)?;
        let truth = Truth {
            damaged: Some(DamagedTruth { total_s }),
            ..e.truth.clone()
        };
        cases.push(case("damaged", &copy, &name, &truth)?);
    }
    Ok(cases)
}

/// A copy of a recording's bytes with up to four payloads flipped and,
/// halfway, one frame's length made absurd: what a bad disk does. `None`
/// for a file too short to damage so.
pub fn damage(bytes: &[u8]) -> Option<Vec<u8>> {
    if bytes.len() < 12 {
        return None;
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().ok()?);
    let head = flatline_telemetry::recording::head_len(version);
    let mut frames = Vec::new();
    let mut at = 12;
    while at + head <= bytes.len() {
        let len_at = if version >= 5 { at + 4 } else { at };
        let len = u32::from_le_bytes(bytes[len_at..len_at + 4].try_into().ok()?) as usize;
        if at + head + len > bytes.len() {
            break;
        }
        frames.push((at, len_at, len));
        at += head + len;
    }
    let n = frames.len();
    if n < 8 {
        return None;
    }
    let mut b = bytes.to_vec();
    let mut hit = vec![2 * n / 10, 3 * n / 10, 4 * n / 10, 45 * n / 100];
    hit.dedup();
    for k in hit {
        let (s, _, len) = frames[k];
        b[s + head + len / 2] ^= 0x5A;
    }
    let (_, len_at, _) = frames[n / 2];
    b[len_at + 3] = 0xFF;
    Some(b)
}

/// Every case of the three sets: the headline manifest in `dir` (with a
/// damaged copy of each of its recordings, written in `scratch`) and the
/// corpus in `corpus`, in that order.
pub fn evaluate_all(dir: &Path, corpus: &Path, scratch: &Path) -> Result<Vec<Case>> {
    let set = evaluate_manifest(dir)?;
    let entries: Vec<Entry> = set.iter().map(|(_, e)| e.clone()).collect();
    let damaged = evaluate_damaged(dir, &entries, scratch)?;
    let mut out: Vec<Case> = set.into_iter().map(|(c, _)| c).collect();
    out.extend(damaged);
    out.extend(evaluate_corpus(corpus)?);
    Ok(out)
}

/// Counts of a set of cases.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Tally {
    pub recordings: usize,
    pub claims: usize,
    pub right: usize,
    pub wrong: usize,
    pub missing: usize,
    pub disagree: usize,
}

pub fn tally<'a>(cases: impl IntoIterator<Item = &'a Case>) -> BTreeMap<&'static str, Tally> {
    let mut out: BTreeMap<&'static str, Tally> = BTreeMap::new();
    for c in cases {
        for key in [c.set, "all"] {
            let t = out.entry(key).or_default();
            t.recordings += 1;
            t.claims += c.judged.len();
            t.right += c.count(Outcome::Right);
            t.wrong += c.count(Outcome::Wrong);
            t.missing += c.count(Outcome::Missing);
            t.disagree += c.disagrees.len();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_growth_is_read_with_who_what_memory_and_which_line() {
        let c = claims(
            "python 7830 (main) grows 1.65 MiB/s (the host's RAM in 3.9 h): 99 % of it in the heap, 80 % allocated at sites_job.py:52 `history.append(out.detach().clone())`.",
        );
        assert_eq!(c.grows, Some(true));
        assert_eq!(c.who, [("main".to_owned(), 7830)]);
        assert_eq!(c.class, Some("heap"));
        assert_eq!(c.line.as_deref(), Some("sites_job.py:52"));
        assert!(!c.settled && !c.allocator && !c.copy && c.damage.is_none());
        let c = claims(
            "4 workers (python3 8948, 8946, 8947 and 8949) grow together 10.18 MiB/s (the host's RAM in 36.8 min): 100 % of it in anonymous memory, 50 % allocated at many.py:4 (hold).",
        );
        assert_eq!(c.grows, Some(true));
        let pids: Vec<u32> = c.who.iter().map(|w| w.1).collect();
        assert_eq!(pids, [8948, 8946, 8947, 8949]);
        assert!(c.who.iter().all(|w| w.0 == "worker"));
        assert_eq!(c.line.as_deref(), Some("many.py:4"));
        assert_eq!(c.class, Some("anon"));
    }

    #[test]
    fn flat_held_and_untold_sentences_are_read_as_such() {
        assert_eq!(claims("Memory is flat.").grows, Some(false));
        let c = claims(
            "python3 18333 (main) grew 765.0 MiB in the page cache of a file it maps from 6.5 s to 16.5 s, then held; nothing grows at the end.",
        );
        assert_eq!(
            (c.grows, c.settled, c.class),
            (Some(false), true, Some("file"))
        );
        assert_eq!(c.who, [("main".to_owned(), 18333)]);
        let c = claims(
            "No memory channel grows beyond its noise, but tree.pss (and 1 more) cannot be told: 180 readings over 89.6 s.",
        );
        assert_eq!((c.grows, c.untold), (None, true));
        let c = claims("Growth found: processes whose PSS grows: main 18333 (python3).");
        assert_eq!(c.grows, Some(true));
        assert_eq!(c.who, [("main".to_owned(), 18333)]);
        let c = claims(
            "Copy-on-access: worker 24601, worker 24602 of main 24589 copy pages they share with their parent: the tree's PSS rose 1.22 GiB (+192 %) while every process's RSS stayed flat.",
        );
        assert!(c.copy);
        assert_eq!(
            c.who,
            [("worker".to_owned(), 24601), ("worker".to_owned(), 24602)],
            "the parent is named as such, not as growing"
        );
        let c = claims(
            "What python3 28236 (main) holds is flat (10.4 MiB allocated and not freed, +222.0 KiB over the run), but its RSS grew 3.09 MiB in 47.0 s: the allocator keeps memory that was freed.",
        );
        assert_eq!((c.grows, c.allocator), (Some(false), true));
    }

    #[test]
    fn losses_said_first_are_read_apart_from_the_answer() {
        let c = claims(
            "Read 44.0 s of a 46.0 s recording: damaged at byte 11516 and 4 more places (frame checksum mismatch), 2.0 s and 20 samples lost. python 11315 (main) grows 10.70 MiB/s (the host's RAM in 36.2 min).",
        );
        let d = c.damage.clone().unwrap();
        assert_eq!((d.read_s, d.total_s, d.unread), (44.0, Some(46.0), false));
        assert_eq!(c.grows, Some(true));
        assert_eq!(c.who, [("main".to_owned(), 11315)]);
        let c = claims(
            "Read 24.0 s of this recording; the rest of the file, 15.0 KiB from byte 23049, could not be read (frame length 4278190532 is over the limit of 16777216). Memory is flat.",
        );
        assert_eq!(c.damage.unwrap().total_s, None);
        assert_eq!(c.grows, Some(false));
        let c = claims(
            "Lost 6.6 s (132 samples, from 2.3 s to 8.9 s) while the disk was full. Memory is flat.",
        );
        let g = c.gap.unwrap();
        assert_eq!((g.lost_s, g.samples), (6.6, Some(132)));
        assert_eq!(c.grows, Some(false));
    }

    #[test]
    fn claims_are_judged_right_wrong_or_missing() {
        let truth = Truth {
            grows: false,
            who: vec!["main".into()],
            class: Some("file".into()),
            settled: true,
            ..Truth::default()
        };
        let wrong = judge(
            &claims("Growth found: processes whose PSS grows: main 18333 (python3)."),
            &truth,
        );
        let outcome = |j: &[Judged], claim| j.iter().find(|x| x.claim == claim).map(|x| x.outcome);
        assert_eq!(outcome(&wrong, "grows"), Some(Outcome::Wrong));
        assert_eq!(outcome(&wrong, "settled"), Some(Outcome::Missing));
        assert_eq!(outcome(&wrong, "class"), Some(Outcome::Missing));
        let right = judge(
            &claims(
                "python3 18333 (main) grew 765.0 MiB in the page cache of a file it maps from 6.5 s to 16.5 s, then held; nothing grows at the end.",
            ),
            &truth,
        );
        assert!(
            right.iter().all(|j| j.outcome == Outcome::Right),
            "{right:?}"
        );
        // An allocator's frame is never the line.
        let j = judge(
            &claims(
                "python3 1 (main) grows 1.2 MiB/s (x): 82 % allocated at obmalloc.c:1966 (_PyObject_Malloc).",
            ),
            &Truth {
                grows: true,
                line: Some("py_leak.py:6".into()),
                ..Truth::default()
            },
        );
        assert_eq!(outcome(&j, "line"), Some(Outcome::Wrong));
        // A damaged file called shorter than it is.
        let j = judge(
            &claims(
                "Read 24.0 s of a 26.0 s recording: damaged at byte 11516 and 3 more places (frame checksum mismatch), 2.0 s and samples lost. Memory is flat.",
            ),
            &Truth {
                damaged: Some(DamagedTruth { total_s: 46.0 }),
                ..Truth::default()
            },
        );
        assert_eq!(outcome(&j, "damaged"), Some(Outcome::Wrong));
    }

    #[test]
    fn damage_of_a_file_hits_payloads_and_one_length() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../recordings/watch-torch-leak-45s.flr");
        let bytes = std::fs::read(path).unwrap();
        let d = damage(&bytes).unwrap();
        assert_eq!(d.len(), bytes.len());
        let differ = d.iter().zip(&bytes).filter(|(a, b)| a != b).count();
        assert_eq!(differ, 5);
    }
}
