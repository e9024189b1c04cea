//! The corpus of real recordings (`recordings/corpus/`): processes written
//! to behave a known way, watched by flatline, each labelled channel with
//! its true class and rate (`manifest.json`). The receipts' verdicts are
//! scored against that truth here, for the test that holds them in CI and
//! for `flatline bench analysis --real` and `--delay`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use flatline_analysis::{Kind, MATERIAL_SHARE, evidence, rules};
use flatline_corpus as corpus;
use flatline_telemetry::recording::Recording;
use serde::Deserialize;

use crate::commands::report;

/// What a channel truly does, as its job was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    Growth,
    Flat,
    Falling,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Label {
    pub class: Class,
    /// Growth: the true rate, in the channel's unit a second.
    pub rate_per_s: Option<f64>,
    /// How the truth is known.
    pub how: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Entry {
    pub file: String,
    pub family: String,
    pub command: Vec<String>,
    pub channels: BTreeMap<String, Label>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Manifest {
    pub recordings: Vec<Entry>,
}

impl Manifest {
    pub fn load(dir: &Path) -> Result<Self> {
        let path = dir.join("manifest.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }
}

/// One labelled channel, judged.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub file: String,
    pub family: String,
    pub channel: String,
    pub kind: Kind,
    pub class: Class,
    pub rate_per_s: Option<f64>,
    pub verdict: &'static str,
    /// Listed under `growing` by the receipt.
    pub called_growth: bool,
    /// The smallest rate the receipt says this channel could show.
    pub detectable_per_s: Option<f64>,
    pub slope_per_s: f64,
    /// Growth: how clearly its true rate stands out of its own noise over
    /// the analysed span, from the recording's construction
    /// ([`corpus::truth_z`]), not from any rule of the analysis.
    pub truth_z: Option<f64>,
}

impl Outcome {
    /// A flat or falling channel called growth.
    pub fn false_alarm(&self) -> bool {
        self.class != Class::Growth && self.called_growth
    }

    /// Growth the receipt says it could have seen.
    pub fn detectable(&self) -> bool {
        self.class == Class::Growth
            && matches!((self.rate_per_s, self.detectable_per_s), (Some(r), Some(d)) if r >= d)
    }

    /// Detectable growth not called growth.
    pub fn missed(&self) -> bool {
        self.detectable() && !self.called_growth
    }

    /// Growth its truth makes clear (`truth_z ≥ CLEAR_Z`), whatever the
    /// analysis says it could see.
    pub fn clear(&self) -> bool {
        self.class == Class::Growth && self.truth_z.is_some_and(|z| z >= corpus::CLEAR_Z)
    }
}

/// Every labelled channel of the corpus in `dir`, judged by its receipt.
pub fn evaluate(dir: &Path) -> Result<Vec<Outcome>> {
    let manifest = Manifest::load(dir)?;
    let mut out = Vec::new();
    for e in &manifest.recordings {
        let path: PathBuf = dir.join(&e.file);
        let rec = Recording::open(&path)?;
        let receipt = report::analyse(&rec, None);
        let growing = receipt.growing();
        let t0 = rec.t_ns.first().copied().unwrap_or(0);
        let t: Vec<f64> = rec.t_ns.iter().map(|&t| (t - t0) as f64 / 1e9).collect();
        let end = receipt.teardown_s.unwrap_or(f64::INFINITY);
        for (name, label) in &e.channels {
            let row = receipt
                .rows
                .iter()
                .find(|r| &r.spec.name == name)
                .with_context(|| format!("{}: no channel {name}", e.file))?;
            let a = &row.analysis;
            // The analysed span: after this channel's start-up, before the
            // job's teardown.
            let truth_z = label
                .rate_per_s
                .filter(|_| label.class == Class::Growth)
                .map(|rate| {
                    let (a0, b0) = (
                        t.partition_point(|&x| x < a.warmup_s),
                        t.partition_point(|&x| x < end),
                    );
                    let b0 = b0.max(a0);
                    corpus::truth_z(&t[a0..b0], &rec.columns[row.index][a0..b0], rate)
                });
            out.push(Outcome {
                file: e.file.clone(),
                family: e.family.clone(),
                channel: name.clone(),
                kind: a.kind,
                class: label.class,
                rate_per_s: label.rate_per_s,
                verdict: a.verdict.as_str(),
                called_growth: growing.contains(&name.as_str()),
                detectable_per_s: a.evidence.and_then(|ev| ev.detectable_per_s),
                slope_per_s: a.slope_per_s,
                truth_z,
            });
        }
    }
    Ok(out)
}

/// The score of one family (and kind of channel).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Score {
    pub channels: usize,
    /// Flat or falling channels, and those of them called growth.
    pub not_growing: usize,
    pub false_alarms: usize,
    /// Growing channels; those the receipt says it could see; those of
    /// them it called growth; those it missed.
    pub growing: usize,
    pub detectable: usize,
    pub found: usize,
    pub missed: usize,
    /// Growing channels whose truth makes them clear (`truth_z ≥ CLEAR_Z`),
    /// and those of them called growth.
    pub clear: usize,
    pub clear_found: usize,
}

impl Score {
    /// Adds another score's counts to this one.
    pub fn add(&mut self, o: &Score) {
        self.channels += o.channels;
        self.not_growing += o.not_growing;
        self.false_alarms += o.false_alarms;
        self.growing += o.growing;
        self.detectable += o.detectable;
        self.found += o.found;
        self.missed += o.missed;
        self.clear += o.clear;
        self.clear_found += o.clear_found;
    }

    /// Recall among the channels the truth makes clear (1 when none).
    pub fn clear_recall(&self) -> f64 {
        if self.clear == 0 {
            1.0
        } else {
            self.clear_found as f64 / self.clear as f64
        }
    }
}

/// Scores by (family, kind).
pub fn score(outcomes: &[Outcome]) -> BTreeMap<(String, &'static str), Score> {
    let mut out: BTreeMap<(String, &'static str), Score> = BTreeMap::new();
    for o in outcomes {
        let s = out.entry((o.family.clone(), o.kind.name())).or_default();
        s.channels += 1;
        if o.class == Class::Growth {
            s.growing += 1;
            s.detectable += usize::from(o.detectable());
            s.found += usize::from(o.called_growth);
            s.missed += usize::from(o.missed());
            s.clear += usize::from(o.clear());
            s.clear_found += usize::from(o.clear() && o.called_growth);
        } else {
            s.not_growing += 1;
            s.false_alarms += usize::from(o.false_alarm());
        }
    }
    out
}

/// How soon growth was called, replaying a recording as it was made.
#[derive(Debug, Clone)]
pub struct Delay {
    pub file: String,
    pub family: String,
    pub channel: String,
    pub rate_per_s: f64,
    /// Seconds of analysed data (after the start-up) at the first replay
    /// point whose receipt called the channel growth; `None`: never.
    pub found_after_s: Option<f64>,
    /// The statistical limit for this rate at this channel's noise and
    /// reading rate ([`evidence::limit_s`]), and the time the rate takes
    /// to pass the evidence floor ([`evidence::floor_time`]).
    pub limit_s: f64,
    pub floor_s: f64,
}

/// A flat or falling channel called growth at some point of a replay (the
/// first time, after its job's start-up if it was called so then).
#[derive(Debug, Clone)]
pub struct ReplayAlarm {
    pub file: String,
    pub family: String,
    pub channel: String,
    pub at_s: f64,
    /// Called growth only while the job was still starting up (before the
    /// whole recording's start-up ended): true of those seconds.
    pub start_up: bool,
}

/// Replays every recording of the corpus cumulatively, a receipt every
/// `step_s` seconds of it ([`report::analyse_prefix`]): when each growing
/// channel is first called growth, against its limit, and every flat or
/// falling channel called growth at any point.
pub fn replay(dir: &Path, step_s: f64) -> Result<(Vec<Delay>, Vec<ReplayAlarm>)> {
    let manifest = Manifest::load(dir)?;
    let mut delays = Vec::new();
    let mut alarms = Vec::new();
    for e in &manifest.recordings {
        let path = dir.join(&e.file);
        let rec = Recording::open(&path)?;
        // The channel's noise, autocorrelation and reading rate, from the
        // whole recording's receipt.
        let whole = report::analyse(&rec, None);
        let end = whole
            .teardown_s
            .unwrap_or_else(|| rec.duration_s())
            .min(rec.duration_s());
        // A flat job's start-up is growth while it lasts: a receipt of its
        // first seconds that says so is true of them. Flat channels are
        // held to their truth from where the whole recording's start-up
        // ended.
        let settled = whole.warmup.seconds();
        let mut first: BTreeMap<&str, f64> = BTreeMap::new();
        let mut alarmed: BTreeMap<&str, f64> = BTreeMap::new();
        let mut in_start_up: BTreeMap<&str, f64> = BTreeMap::new();
        let mut at = step_s;
        while at <= end + 1e-9 {
            let receipt = report::analyse_prefix(&rec, at);
            let growing = receipt.growing();
            for (name, label) in &e.channels {
                let called = growing.contains(&name.as_str());
                if !called {
                    continue;
                }
                let warm = receipt
                    .rows
                    .iter()
                    .find(|r| &r.spec.name == name)
                    .map_or(0.0, |r| r.analysis.warmup_s);
                if label.class == Class::Growth {
                    first.entry(name.as_str()).or_insert(at - warm);
                } else if at > settled + step_s {
                    alarmed.entry(name.as_str()).or_insert(at);
                } else {
                    in_start_up.entry(name.as_str()).or_insert(at);
                }
            }
            at += step_s;
        }
        for (name, label) in &e.channels {
            if let Some(&at_s) = alarmed.get(name.as_str()) {
                alarms.push(ReplayAlarm {
                    file: e.file.clone(),
                    family: e.family.clone(),
                    channel: name.clone(),
                    at_s,
                    start_up: false,
                });
            } else if let Some(&at_s) = in_start_up.get(name.as_str()) {
                alarms.push(ReplayAlarm {
                    file: e.file.clone(),
                    family: e.family.clone(),
                    channel: name.clone(),
                    at_s,
                    start_up: true,
                });
            }
            let (Class::Growth, Some(rate)) = (label.class, label.rate_per_s) else {
                continue;
            };
            let Some(row) = whole.rows.iter().find(|r| &r.spec.name == name) else {
                continue;
            };
            let Some(ev) = row.analysis.evidence else {
                continue;
            };
            let per_s = if ev.span_s > 0.0 {
                (ev.readings.max(2) - 1) as f64 / ev.span_s
            } else {
                continue;
            };
            // The noise of the channel: its scatter around its line, per
            // reading (bin means of long series scatter less by √binning).
            let per_bin = (ev.readings as f64 / evidence::MAX_BINS as f64).max(1.0);
            let sigma = ev.scatter * per_bin.sqrt();
            delays.push(Delay {
                file: e.file.clone(),
                family: e.family.clone(),
                channel: name.clone(),
                rate_per_s: rate,
                found_after_s: first.get(name.as_str()).copied(),
                limit_s: evidence::limit_s(rate, sigma, ev.inflation, per_s),
                floor_s: evidence::floor_time(rate, {
                    // The evidence the analysis asks of this channel: its
                    // resolution, else a material share of its level.
                    let floor = rules::evidence_floor(name, row.spec.unit);
                    if floor > 0.0 {
                        floor
                    } else {
                        MATERIAL_SHARE * row.analysis.baseline.abs()
                    }
                }),
            });
        }
    }
    Ok((delays, alarms))
}
