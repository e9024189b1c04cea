//! A recording's receipt: what it says (verdicts, headline, findings), as text, Markdown or JSON.

use std::fmt::Write as _;
use std::path::Path;

use flatline_runtime::analysis::death::{self, Ending};
use flatline_runtime::analysis::rules::{self, ChannelStats, LimitSource, channel_stats, latest};
use flatline_runtime::analysis::sites;
use flatline_runtime::analysis::summary::{self, Assessed};
use flatline_runtime::analysis::tree::{self as tree_analysis, TreeSummary};
use flatline_runtime::analysis::{self, ChannelAnalysis, Context, Note, Verdict};
use flatline_runtime::recording::{EventKind, Recording, TailProblem, TailProblemKind};
use flatline_runtime::telemetry::{ChannelSpec, MAX_STEP, TOKEN_CHANNELS, Unit};
use serde_json::{Map, Value, json};

use crate::fmt::{bytes, duration, value};
use crate::render::{Block, Col, Doc, Table, num, opt};

/// One channel of a receipt.
#[derive(Debug)]
pub struct Row<'a> {
    /// Its position in the recording's schema.
    pub index: usize,
    pub spec: &'a ChannelSpec,
    pub stats: ChannelStats,
    pub analysis: ChannelAnalysis,
    /// What bounds the channel, where something does.
    pub limit: Option<LimitSource>,
}

/// The ceiling a channel cannot pass, where the recording knows it, and
/// where it comes from.
fn limit_of(rec: &Recording, name: &str, unit: Unit) -> Option<(f64, LimitSource)> {
    rules::limit_for(name, unit, &rec.header.host, |c| latest(rec.channel(c)?))
}

/// The process tree of a watched job, where the recording has one, over
/// the samples `a..b` (the part analysed).
fn tree_summary(rec: &Recording, rows: &[Row<'_>], a: usize, b: usize) -> Option<TreeSummary> {
    let by_name = |n: &str| rows.iter().find(|r| r.spec.name == n).map(|r| &r.analysis);
    let t: Vec<f64> = rec.t_ns[a..b].iter().map(|&t| t as f64 / 1e9).collect();
    let data = tree_analysis::Columns {
        t: &t,
        column: |n: &str| rec.channel(n).map(|c| &c[a..b]),
    };
    tree_analysis::summarize(&rec.header.schema, &rec.events, by_name, &data)
}

/// The markers of a recording (a job's evals and checkpoints, a person's
/// marks), as (seconds, text).
pub fn markers(rec: &Recording) -> impl Iterator<Item = (f64, &str)> {
    rec.events.iter().filter_map(|e| match &e.kind {
        EventKind::Marker(text) => Some((e.t_ns as f64 / 1e9, text.as_str())),
        _ => None,
    })
}

/// What probes said during the run (a GPU that stopped answering, the
/// tree's per-process channels running out), as (seconds, text).
/// Facts read from outside the samples (an exit by a signal, a kernel log
/// line, an out-of-memory error printed) are among them; a process that
/// exited with code 0 is not, nor the readings of where each process's
/// memory lives (`classes`: its `where` in the process tree says them).
fn event_notes(rec: &Recording) -> impl Iterator<Item = (f64, &str)> {
    rec.events.iter().filter_map(|e| match &e.kind {
        EventKind::Note(text) => Some((e.t_ns as f64 / 1e9, text.as_str())),
        EventKind::Fact {
            kind,
            text,
            figures,
            ..
        } if !(kind == "exit" && figures.get("code") == Some(&0.0)) && kind != "classes" => {
            Some((e.t_ns as f64 / 1e9, text.as_str()))
        }
        _ => None,
    })
}

/// Every fact of a recording, for the JSON receipt, but the readings of
/// where each process's memory lives (`classes`), which its `where` says.
fn facts_json(rec: &Recording) -> Vec<Value> {
    rec.events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Fact {
                kind,
                pid,
                text,
                figures,
            } if kind != "classes" => Some(json!({
                "t_s": e.t_ns as f64 / 1e9,
                "kind": kind,
                "pid": pid,
                "text": text,
                "figures": figures,
            })),
            _ => None,
        })
        .collect()
}

/// Each reader's last line counts (what the job printed, its log): source,
/// lines read, lines that said something.
fn lines_read(rec: &Recording) -> Vec<(&str, u64, u64)> {
    let mut out: Vec<(&str, u64, u64)> = Vec::new();
    for e in &rec.events {
        if let EventKind::LinesRead {
            source,
            lines,
            parsed,
        } = &e.kind
        {
            match out.iter_mut().find(|(s, ..)| s == source) {
                Some(seen) => *seen = (source, *lines, *parsed),
                None => out.push((source, *lines, *parsed)),
            }
        }
    }
    out
}

/// The limit the memory channels' time to limit was computed against.
fn memory_limit(rows: &[Row<'_>]) -> Option<(f64, LimitSource)> {
    rows.iter()
        .filter(|r| {
            r.limit
                .is_some_and(|l| !matches!(l, LimitSource::GpuTotal | LimitSource::Shared))
        })
        .find_map(|r| Some((r.analysis.limit?, r.limit?)))
}

/// How the warm-up of a receipt was chosen.
#[derive(Debug, Clone, PartialEq)]
pub enum WarmupChoice {
    /// `--warmup-s`.
    Given(f64),
    /// Found where start-up ends in a memory channel.
    Found { s: f64, channel: String },
    /// No start-up found: every reading is analysed.
    None,
}

impl WarmupChoice {
    pub fn seconds(&self) -> f64 {
        match self {
            WarmupChoice::Given(s) | WarmupChoice::Found { s, .. } => *s,
            WarmupChoice::None => 0.0,
        }
    }

    fn describe(&self) -> String {
        match self {
            WarmupChoice::Given(s) => format!("a warm-up of {s:.1} s (--warmup-s)"),
            WarmupChoice::Found { s, channel } => {
                format!("a warm-up of {s:.1} s (found: where {channel}'s start-up ends)")
            }
            WarmupChoice::None => "no warm-up (no start-up found: every reading counts)".into(),
        }
    }
}

/// A recording's channels, analysed, in the order a person reads them:
/// growing levels by severity first.
#[derive(Debug)]
pub struct Receipt<'a> {
    pub rows: Vec<Row<'a>>,
    pub warmup: WarmupChoice,
    /// The part analysed, in seconds since the start, when not all of it
    /// (`report --from/--to`, a selection in the dashboard).
    pub range: Option<[f64; 2]>,
    /// Where the job's teardown began (seconds since the start): the
    /// analysis stops there (see [`tree_analysis::teardown_s`]).
    pub teardown_s: Option<f64>,
    /// The watched process tree over the part analysed, where there is one.
    pub tree: Option<TreeSummary>,
    /// How the job ended (deaths, printed out-of-memory errors), over the
    /// whole recording.
    pub ending: Ending,
    /// The job's rank, where its labels say.
    pub rank: Option<String>,
    /// What the file lost to damage, where it did.
    pub damage: Option<crate::damage::Damage>,
}

impl Receipt<'_> {
    /// The one assessment: headline, growing channels, findings.
    pub fn assessment(&self) -> summary::Assessment<'_> {
        let mut a = summary::assess(&self.assessed(), self.tree.as_ref(), &value, &duration);
        let rank = self.rank.as_deref();
        let e = &self.ending;
        for d in &e.deaths {
            a.findings.push(summary::Finding {
                kind: match d.cause {
                    death::Cause::Signal => "killed_by_signal",
                    _ => "oom_kill",
                },
                text: d.sentence(rank, &value, &duration),
            });
        }
        for p in &e.out_of_memory {
            a.findings.push(summary::Finding {
                kind: "out_of_memory",
                text: format!("at {:.1} s the job printed: {}", p.t_s, p.text),
            });
        }
        // Which code holds the growth, and whether the program holds it.
        let top = a.growing.first().map(|g| (g.name, g.analysis.slope_per_s));
        let in_bytes = |v: f64| value(v, Unit::Bytes);
        a.findings
            .extend(sites::finding(&self.sites(), top, &in_bytes));
        a.findings.extend(self.retention());
        if let Some(h) = e.headline(rank, &value, &duration) {
            // The trend is still told, after the death.
            let trend = std::mem::replace(&mut a.headline, h);
            a.findings.push(summary::Finding {
                kind: "trend",
                text: trend,
            });
        }
        // A damaged file says so first: what was read of what, then what
        // the part read says.
        if let Some(d) = &self.damage {
            a.findings.insert(
                0,
                summary::Finding {
                    kind: "damage",
                    text: format!("{} Lost: {}.", d.sentence(), d.lines().join("; ")),
                },
            );
            if d.in_headline() {
                a.headline = format!("{} {}", d.sentence(), a.headline);
            }
        }
        a
    }

    fn assessed(&self) -> Vec<Assessed<'_>> {
        self.rows
            .iter()
            .map(|r| Assessed {
                name: &r.spec.name,
                unit: r.spec.unit,
                analysis: &r.analysis,
                limit: r.limit,
            })
            .collect()
    }

    /// The allocation sites (`watch --sites`), largest growth first.
    pub fn sites(&self) -> Vec<sites::Site> {
        let channels: Vec<sites::SiteChannel<'_>> = self
            .rows
            .iter()
            .filter(|r| rules::is_site_channel(&r.spec.name))
            .map(|r| sites::SiteChannel {
                name: &r.spec.name,
                labels: &r.spec.labels,
                analysis: &r.analysis,
                last: r.stats.last,
            })
            .collect();
        sites::sites(&channels)
    }

    /// Each process's resident memory against the bytes it holds by the
    /// allocation-site library's count.
    fn retention(&self) -> Vec<summary::Finding> {
        self.rows
            .iter()
            .filter_map(|r| {
                let stem = r.spec.name.strip_suffix(".alloc_live")?;
                let pid: u32 = r.spec.labels.get("pid")?.parse().ok()?;
                let resident = self
                    .rows
                    .iter()
                    .find(|x| x.spec.name == format!("{stem}.rss"))?;
                sites::retention(
                    &sites::Held {
                        pid,
                        resident: (&resident.spec.name, &resident.analysis),
                        alloc_live: &r.analysis,
                    },
                    &|v| value(v, Unit::Bytes),
                )
            })
            .collect()
    }

    /// The one sentence a receipt starts with.
    pub fn headline(&self) -> String {
        self.assessment().headline
    }

    /// Which layer of a PyTorch job's GPU memory grows, where it logs
    /// its allocator's statistics.
    pub fn gpu_layers(&self) -> Option<summary::LayerFinding> {
        summary::gpu_layers(&self.assessed(), &value)
    }

    /// The level channels called growth, most urgent first.
    pub fn growing(&self) -> Vec<&str> {
        self.assessment()
            .growing
            .into_iter()
            .map(|a| a.name)
            .collect()
    }
}

/// Analyses every channel of a recording, each as its kind, after one
/// warm-up: `warmup_s`, else the one found in its memory channels.
pub fn analyse(rec: &Recording, warmup_s: Option<f64>) -> Receipt<'_> {
    analyse_range(rec, warmup_s, None)
}

/// [`analyse`] on the samples from `range[0]` to `range[1]` seconds after
/// the start only: the same analysis on a part of the run. The warm-up is
/// still the recording's (found on all of it): a part that starts after it
/// is analysed whole.
pub fn analyse_range(
    rec: &Recording,
    warmup_s: Option<f64>,
    range: Option<[f64; 2]>,
) -> Receipt<'_> {
    analyse_part(rec, warmup_s, range, false)
}

/// The receipt the first `end_s` seconds of a recording would have had,
/// had the run ended there: its warm-up found on those seconds alone (as a
/// live analysis finds it), its teardown ignored. `bench analysis --delay`
/// replays recordings so.
pub fn analyse_prefix(rec: &Recording, end_s: f64) -> Receipt<'_> {
    analyse_part(rec, None, Some([0.0, end_s]), true)
}

fn analyse_part(
    rec: &Recording,
    warmup_s: Option<f64>,
    range: Option<[f64; 2]>,
    prefix: bool,
) -> Receipt<'_> {
    let t_all: Vec<f64> = rec.t_ns.iter().map(|&t| t as f64 / 1e9).collect();
    let t0 = t_all.first().copied().unwrap_or(0.0);
    let (a, b) = match range {
        Some([from, to]) => (
            t_all.partition_point(|&t| t - t0 < from),
            t_all.partition_point(|&t| t - t0 <= to),
        ),
        None => (0, t_all.len()),
    };
    // A job's teardown (its processes exiting at the end) is no part of how
    // it ran: the analysis ends where it began.
    let names = rec.header.schema.channels.iter().map(|c| c.name.as_str());
    let teardown = tree_analysis::analysis_end(&rec.events, &t_all, names, |n| rec.channel(n))
        .filter(|&td| td > t0 && !prefix);
    let b = match teardown {
        Some(td) => b.min(t_all.partition_point(|&t| t < td)),
        None => b,
    };
    let b = b.max(a);
    let t = &t_all[a..b];
    let column = |i: usize| &rec.columns[i][a..b];
    // What the warm-up and the step axis are found on: the whole recording,
    // or (a prefix) only what was there by its end.
    let seen = if prefix { b } else { t_all.len() };
    let whole = |i: usize| &rec.columns[i][..seen];
    let steps = rules::step_axis(&rec.header.schema, whole).map(column);
    // Tokens follow the same rule: a count that never moves is no axis.
    let tokens = TOKEN_CHANNELS
        .iter()
        .find_map(|n| rec.channel(n))
        .filter(|c| rules::advances(c))
        .map(|c| &c[a..b]);
    let warmup = match warmup_s {
        Some(s) => WarmupChoice::Given(s),
        None => match analysis::recording_warmup(&rec.header.schema, &t_all[..seen], whole) {
            Some(w) => WarmupChoice::Found {
                s: w.at_s - t0,
                channel: w.channel.unwrap_or_default(),
            },
            None => WarmupChoice::None,
        },
    };
    // The warm-up's end, on the part's own clock (0: the part starts after it).
    let part_warmup = t
        .first()
        .map_or(0.0, |&first| (t0 + warmup.seconds() - first).max(0.0));
    let rows: Vec<Row<'_>> = rec
        .header
        .schema
        .channels
        .iter()
        .enumerate()
        .map(|(index, spec)| {
            let col = column(index);
            let limit = limit_of(rec, &spec.name, spec.unit);
            let ctx = Context {
                kind: spec.kind,
                warmup_s: Some(part_warmup),
                steps,
                tokens,
                limit: limit.map(|l| l.0),
                min_growth: rules::evidence_floor(&spec.name, spec.unit),
            };
            Row {
                index,
                spec,
                stats: match range {
                    None => rec.column_stats(index),
                    Some(_) => rules::channel_stats(col),
                },
                analysis: analysis::analyze(t, col, &ctx),
                limit: limit.map(|l| l.1),
            }
        })
        .collect();
    // A PSS or USS that grows while its RSS holds still copies pages it
    // shares: it cannot outgrow that RSS.
    let mut rows = rows;
    for i in 0..rows.len() {
        let Some(rss) = analysis::rss_of(&rows[i].spec.name) else {
            continue;
        };
        if let Some(r) = rows.iter().find(|r| r.spec.name == rss) {
            let r = r.analysis.clone();
            if analysis::bound_copy(&mut rows[i].analysis, &r) {
                rows[i].limit = Some(LimitSource::Shared);
            }
        }
    }
    // A job watched from its launch that ended in less time than a start-up
    // can take: its whole life may be its start-up, and no leak can be told
    // from one. Its growth is said as that, not projected. A prefix (a live
    // window, a replay's playhead) knows of the exit only once its readings
    // reach it.
    let seen_until = prefix.then(|| t_all[..b].last().copied()).flatten();
    if range.is_none() && ended_in_start_up(rec, &t_all[..b], &warmup, seen_until) {
        for r in rows.iter_mut() {
            analysis::in_start_up(&mut r.analysis, r.limit == Some(LimitSource::Shared));
        }
    }
    // Growth soon after a found start-up, still small beside what the
    // start-up rose, may be its tail (see [`analysis::settling`]); a
    // warm-up given by hand is the user's word that the start-up ended.
    if let WarmupChoice::Found { s, .. } = &warmup {
        for r in rows.iter_mut() {
            if let Some(rise) = analysis::start_up_rise(&t_all[..seen], whole(r.index), t0 + s) {
                analysis::settling(&mut r.analysis, rise, r.limit == Some(LimitSource::Shared));
            }
        }
    }
    let order = summary::order(
        &rows
            .iter()
            .map(|r| Assessed {
                name: &r.spec.name,
                unit: r.spec.unit,
                analysis: &r.analysis,
                limit: r.limit,
            })
            .collect::<Vec<_>>(),
    );
    // A PSS that rose while its USS did not is shared pages changing hands.
    for i in 0..rows.len() {
        let Some(uss) = analysis::uss_of(&rows[i].spec.name) else {
            continue;
        };
        if let Some(u) = rows.iter().find(|r| r.spec.name == uss) {
            let u = u.analysis.clone();
            analysis::reconcile_pss(&mut rows[i].analysis, &u);
        }
    }
    let tree = tree_summary(rec, &rows, a, b);
    let mut slots: Vec<Option<Row<'_>>> = rows.into_iter().map(Some).collect();
    let rows = order.into_iter().filter_map(|i| slots[i].take()).collect();
    let range = range.map(|_| match (t.first(), t.last()) {
        (Some(&f), Some(&l)) => [f - t0, l - t0],
        _ => [0.0, 0.0],
    });
    let ending = death::read(
        &rec.header.schema,
        &rec.events,
        &rec.header.host,
        &tree_analysis::Columns {
            t: &t_all,
            column: |n: &str| rec.channel(n),
        },
        rec.header.config.get("pid").and_then(|p| p.parse().ok()),
    );
    Receipt {
        rows,
        warmup,
        range,
        teardown_s: teardown.map(|td| td - t0),
        tree,
        ending,
        rank: rec.header.labels.get("rank").cloned(),
        damage: crate::damage::Damage::of(rec),
    }
}

/// The job was launched by the watch (its `command`) and exited by itself
/// within [`analysis::START_UP_ONLY_S`] of its first reading (`t`: the readings'
/// times). Nothing in so short a life tells a leak from a start-up: an
/// import slows as it ends, and then building the model and its first
/// steps climb steeply again just before the exit (a real PyTorch job
/// under load: 480 to 675 MiB over 17 s of imports, flat, then 675 to
/// 763 MiB in its last 1.3 s); a dataset read into memory climbs at a
/// steady pace like a leak. A found warm-up is no proof the start-up ended
/// (that import settled for a second at 5 s), so only a warm-up given by
/// hand (`--warmup-s`, the user's word that it ended there) keeps the
/// verdicts as they are.
///
/// `seen_until`: for a prefix, the time of its last reading; an exit more
/// than a second after it (the sampler's grace after an exit) is still to
/// come.
fn ended_in_start_up(
    rec: &Recording,
    t: &[f64],
    warmup: &WarmupChoice,
    seen_until: Option<f64>,
) -> bool {
    let Some(&t0) = t.first() else {
        return false;
    };
    // Its exit within the bound of its first reading (the live window's
    // store reads it the same way).
    let ended = rec.events.iter().any(|e| {
        analysis::exit_in_start_up(e, t0)
            && seen_until.is_none_or(|s| e.t_ns as f64 / 1e9 <= s + 1.0)
    });
    rec.header.config.contains_key("command") && ended && !matches!(warmup, WarmupChoice::Given(_))
}

/// A verdict as a person reads it: a flat channel that moved says by how
/// much; one whose growth stopped says so.
pub fn verdict_text(a: &ChannelAnalysis, u: Unit) -> String {
    match (a.verdict, a.note) {
        (Verdict::Flat, Some(Note::Within { .. })) => {
            format!("flat (within {})", change(a.drift, u))
        }
        (v, Some(Note::NotSustained)) => format!("{} (settled)", v.as_str()),
        (v, Some(Note::SharedPages)) => format!("{} (USS flat)", v.as_str()),
        (v, Some(Note::StartUp)) => format!("{} (start-up)", v.as_str()),
        (v, Some(Note::Settling { .. })) => format!("{} (settling)", v.as_str()),
        (v, _) => match a.onset_s {
            Some(t) => format!("{} since {}", v.as_str(), duration(t)),
            None => v.as_str().into(),
        },
    }
}

/// The sensitivity of the run, said of its main memory channel: how long a
/// reference leak takes to show at this run's noise.
fn sensitivity(receipt: &Receipt<'_>) -> Option<String> {
    // A job that ended during its start-up had no run to be sensitive in.
    if receipt
        .rows
        .iter()
        .any(|r| r.analysis.note == Some(Note::StartUp))
    {
        return None;
    }
    let r = receipt.rows.iter().find(|r| {
        r.analysis.kind == analysis::Kind::Level
            && rules::is_host_memory(&r.spec.name, r.spec.unit)
            && r.analysis.verdict != Verdict::Insufficient
    })?;
    let after = r.analysis.detectable_after_s?;
    let enough = if after <= r.analysis.duration_s {
        "this run was long enough"
    } else {
        "this run was too short to rule one out"
    };
    let smallest =
        r.analysis
            .evidence
            .and_then(|e| e.detectable_per_s)
            .map_or(String::new(), |d| {
                format!(
                    "; growth of {} or more was detectable in this run",
                    summary::rate_text(d, r.spec.unit, &value)
                )
            });
    Some(format!(
        "a {}/h leak in {} would show after {} at this run's noise ({} points over {}: {enough}){smallest}",
        value(analysis::REFERENCE_LEAK_BYTES_PER_H, Unit::Bytes),
        r.spec.name,
        duration(after),
        r.analysis.points,
        duration(r.analysis.duration_s)
    ))
}

/// What the readings of a level could and could not tell, for every level
/// whose verdict is `insufficient`: how many readings over what span, and
/// why no growth rate was detectable (too few effective readings).
fn untold(receipt: &Receipt<'_>) -> Vec<String> {
    receipt
        .rows
        .iter()
        .filter(|r| r.analysis.kind == analysis::Kind::Level)
        .filter(|r| r.analysis.verdict == Verdict::Insufficient)
        .map(|r| {
            let a = &r.analysis;
            if a.note == Some(Note::StartUp) {
                return format!(
                    "{} grew {} until the job ended, during its start-up: a leak cannot be told from a start-up",
                    r.spec.name,
                    change(a.final_value - a.baseline, r.spec.unit)
                );
            }
            if let Some(Note::Settling { rise }) = a.note {
                return format!(
                    "{} grows {} since its start-up ended, under {:.0} % of the {} its start-up rose: a leak cannot be told from a start-up settling until {} after it",
                    r.spec.name,
                    analysis::summary::rate_text(a.slope_per_s, r.spec.unit, &|v, u| value(v, u)),
                    100.0 * analysis::SETTLE_SHARE,
                    value(rise, r.spec.unit),
                    duration(analysis::settling_for_s(a.warmup_s))
                );
            }
            let why = match a.evidence {
                Some(e) if e.readings >= 2 => format!(
                    "{} readings over {} (worth {:.1} independent ones, {} needed to show any trend at {} %)",
                    e.readings,
                    duration(e.span_s),
                    e.effective_readings,
                    analysis::evidence::MIN_READINGS,
                    e.confidence * 100.0
                ),
                _ => format!("{} readings", a.points),
            };
            format!(
                "{} moved {} but cannot be told from noise: {why}",
                r.spec.name,
                change(a.final_value - a.baseline, r.spec.unit)
            )
        })
        .collect()
}

/// A level's trend test, as the JSON receipt gives it.
fn evidence_json(e: &analysis::TrendEvidence) -> Value {
    json!({
        "readings": e.readings,
        "span_s": num(e.span_s),
        "z": num(e.z),
        "z_steps": num(e.z_steps),
        "z_crit": num(e.z_crit),
        "confidence": num(e.confidence),
        "inflation": num(e.inflation),
        "effective_readings": num(e.effective_readings),
        "scatter": num(e.scatter),
        "detectable_per_s": opt(e.detectable_per_s),
    })
}

/// The JSON receipt.
pub fn json_report(rec: &Recording, receipt: &Receipt<'_>) -> Value {
    let assessment = receipt.assessment();
    let rows = &receipt.rows;
    let h = &rec.header;
    let mut channels = Map::new();
    for r in rows {
        let (st, a) = (&r.stats, &r.analysis);
        // When a channel added mid-run began, and when one ended (a process
        // exited, a GPU was lost).
        let at = |i: usize| {
            rec.t_ns
                .get(i)
                .map_or(Value::Null, |&t| num(t as f64 / 1e9))
        };
        let life = rec.lifetimes.get(r.index);
        channels.insert(
            r.spec.name.clone(),
            json!({
                "unit": r.spec.unit,
                "kind": r.spec.kind,
                "group": r.spec.group,
                "samples": st.samples,
                "started_s": life.map_or(Value::Null, |l| at(l.from)),
                "ended_s": life.and_then(|l| l.until).map_or(Value::Null, at),
                "first": num(st.first),
                "last": num(st.last),
                "min": num(st.min),
                "max": num(st.max),
                "verdict": a.verdict,
                "confidence": num(a.confidence),
                "baseline": num(a.baseline),
                "final": num(a.final_value),
                "drift": num(a.drift),
                "drift_per_step": opt(a.drift_per_step),
                "drift_per_token": opt(a.drift_per_token),
                "slope_per_s": num(a.slope_per_s),
                "slope_per_step": opt(a.slope_per_step),
                "noise": num(a.noise),
                "jumps": a.jumps,
                "quantum": opt(a.quantum),
                "longest_flat_s": num(a.longest_flat_s),
                "projection_24h": opt(a.projection_24h),
                "limit": opt(a.limit),
                "limit_source": r.limit,
                "time_to_limit_s": opt(a.time_to_limit_s),
                "severity": a.severity,
                "rate_per_s": opt(a.rate_per_s),
                "pct_per_hour": opt(a.pct_per_hour),
                "last_rise_s": opt(a.last_rise_s),
                "detectable_after_s": opt(a.detectable_after_s),
                "note": a.note,
                "onset_s": opt(a.onset_s),
                "evidence": a.evidence.as_ref().map_or(Value::Null, evidence_json),
                "warmup_s": num(a.warmup_s),
                "analysed_points": a.points,
                "analysed_s": num(a.duration_s),
            }),
        );
    }
    let unavailable: Map<String, Value> = h
        .unavailable
        .iter()
        .map(|u| (u.probe.clone(), json!(u.reason)))
        .collect();
    json!({
        "headline": assessment.headline,
        "growing": assessment.growing.iter().map(|a| a.name).collect::<Vec<_>>(),
        "gpu_layers": receipt.gpu_layers(),
        "range": receipt.range.map(|[from, to]| json!({"from_s": from, "to_s": to})),
        "teardown_s": opt(receipt.teardown_s),
        "warmup": match &receipt.warmup {
            WarmupChoice::Given(s) => json!({"s": s, "how": "given"}),
            WarmupChoice::Found { s, channel } => json!({"s": s, "how": "found", "channel": channel}),
            WarmupChoice::None => json!({"s": 0.0, "how": "none"}),
        },
        "recording": {
            "path": rec.path.display().to_string(),
            "format_version": h.format_version,
            "tool_version": h.tool_version,
            "source": h.source,
            "started_unix_ms": h.started_unix_ms,
            "duration_s": rec.duration_s(),
            "samples": rec.samples_total(),
            "events": rec.events_total(),
            "analysed_every": rec.thinned.as_ref().map_or(1, |t| t.stride),
            "bytes": rec.bytes,
            "truncated": rec.is_truncated(),
            "damaged": rec.is_damaged(),
            "losses": receipt.damage.as_ref().map_or(json!([]), |d| d.json()),
            "tail": rec.tail,
            "digest": rec.digest,
            "end": rec.footer.as_ref().map(|f| f.end.clone()),
            "command_line": h.command_line,
            "config": h.config,
            "notes": h.notes,
        },
        "host": h.host,
        "labels": h.labels,
        "channels": channels,
        "memory_limit": memory_limit(rows).map(|(v, src)| json!({"bytes": v, "source": src})),
        "events": {
            "steps": steps_taken(rec),
            "markers": markers(rec)
                .map(|(t_s, text)| json!({"t_s": t_s, "text": text}))
                .collect::<Vec<_>>(),
            "notes": event_notes(rec)
                .map(|(t_s, text)| json!({"t_s": t_s, "text": text}))
                .collect::<Vec<_>>(),
            "lines_read": lines_read(rec)
                .into_iter()
                .map(|(source, lines, parsed)| json!({
                    "source": source,
                    "lines": lines,
                    "parsed": parsed,
                    "ignored": lines.saturating_sub(parsed),
                }))
                .collect::<Vec<_>>(),
            "out_of_memory": receipt.ending.out_of_memory,
            "facts": facts_json(rec),
        },
        "deaths": receipt.ending.deaths,
        "exit": json!({"code": receipt.ending.exit_code, "signal": receipt.ending.exit_signal}),
        "process_tree": receipt.tree,
        "sites": receipt.sites(),
        "findings": assessment.findings,
        "unavailable": unavailable,
    })
}

pub fn started(rec: &Recording) -> String {
    humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(rec.header.started_unix_ms),
    )
    .to_string()
}

fn ending(rec: &Recording) -> String {
    match (&rec.footer, &rec.tail) {
        (_, Some(t)) => format!("{t}"),
        (Some(f), None) => format!("ended: {}", f.end),
        (None, None) => "no footer".into(),
    }
}

/// Steps and tokens over the run, where the recording has them.
/// How many steps the job took: its step events, or the highest step its
/// step axis reached where that is more. A progress bar read through a
/// pipe redraws a few times a second, so a fast job's 60 steps can be 15
/// step events (a Hugging Face Trainer's), while its bar says 60.
pub fn steps_taken(rec: &Recording) -> u64 {
    let axis = last_step(rec).map_or(0, |v| v as u64);
    (rec.step_events() as u64).max(axis)
}

/// The highest step number of the recording's step axis that is a count
/// (at most [`MAX_STEP`]: a job's counter that wrapped, 18446744073709551615,
/// is not the number of steps it took).
fn last_step(rec: &Recording) -> Option<f64> {
    let column = |i: usize| rec.columns[i].as_slice();
    let values = rules::step_axis(&rec.header.schema, column)
        .and_then(|i| rec.channel(&rec.header.schema.channels[i].name))?;
    let counts = |v: &f64| v.is_finite() && *v >= 0.0 && *v <= MAX_STEP as f64;
    // The format's max covers every sample, a bounded load's too; only
    // when it is no count are the readings held searched for the last one.
    Some(channel_stats(values).max)
        .filter(counts)
        .or_else(|| values.iter().copied().filter(counts).reduce(f64::max))
}

pub fn training_axes(rec: &Recording) -> Option<String> {
    let steps = last_step(rec);
    // A count that never moved (a workload without steps or tokens) says
    // nothing: only what advanced is told.
    let tokens_seen = TOKEN_CHANNELS
        .iter()
        .filter_map(|n| rec.channel(n))
        .find(|c| rules::advances(c))
        .map(channel_stats)
        .map(|s| s.max)
        .filter(|v| v.is_finite());
    let tokens = |t: f64| format!("{} tokens", crate::fmt::thousands(t as u64));
    match (steps, tokens_seen) {
        (None, None) => None,
        (Some(s), None) => Some(format!("{} steps", crate::fmt::thousands(s as u64))),
        (None, Some(t)) => Some(tokens(t)),
        (Some(s), Some(t)) => Some(format!(
            "{} steps, {}",
            crate::fmt::thousands(s as u64),
            tokens(t)
        )),
    }
}

/// `+1.25 MiB` / `-3` / `0`: a change, signed, in the channel's unit.
pub fn change(v: f64, unit: Unit) -> String {
    if v.is_nan() {
        return "–".into();
    }
    if v == 0.0 {
        return "0".into();
    }
    let s = value(v.abs(), unit);
    if v > 0.0 {
        format!("+{s}")
    } else {
        format!("-{s}")
    }
}

fn jumps_cell(a: &ChannelAnalysis, unit: Unit) -> String {
    match (a.jumps, a.quantum) {
        (0, _) => "0".into(),
        (n, Some(q)) => format!("{n} × {}", value(q, unit)),
        (n, None) => n.to_string(),
    }
}

/// A channel's baseline, final, drift, trend, jumps, 24 h and time-to-limit
/// cells, as its kind is read: counters as rates, gauges by % an hour, peaks
/// by their rises; only levels are projected.
fn cells(a: &ChannelAnalysis, u: Unit) -> [String; 7] {
    let dash = || "–".to_string();
    let rate = |v: f64| {
        if v.is_nan() {
            dash()
        } else {
            format!("{}/s", value(v, u))
        }
    };
    let pct = || trend_text(a).unwrap_or_else(dash);
    match a.kind {
        analysis::Kind::Level => [
            value(a.baseline, u),
            value(a.final_value, u),
            change(a.drift, u),
            change(a.slope_per_s, u),
            jumps_cell(a, u),
            a.projection_24h.map_or(dash(), |p| change(p, u)),
            eta(a),
        ],
        analysis::Kind::Counter => [
            rate(a.baseline),
            rate(a.final_value),
            rate(a.drift),
            pct(),
            dash(),
            dash(),
            dash(),
        ],
        analysis::Kind::Gauge => [
            value(a.baseline, u),
            value(a.final_value, u),
            change(a.drift, u),
            pct(),
            dash(),
            dash(),
            dash(),
        ],
        analysis::Kind::Peak => [
            value(a.baseline, u),
            value(a.final_value, u),
            change(a.drift, u),
            dash(),
            format!("{} rises", a.jumps),
            dash(),
            dash(),
        ],
    }
}

/// A trend in %: per hour of the level over a run of an hour or more; over a
/// shorter run, how far it moved from where it started (an hour's
/// extrapolation of 44 seconds says nothing a person can use).
pub fn trend_text(a: &ChannelAnalysis) -> Option<String> {
    let p = a.pct_per_hour?;
    Some(if a.duration_s >= 3600.0 || a.baseline == 0.0 {
        format!("{p:+.1} %/h")
    } else {
        format!(
            "{:+.1} % in {}",
            a.drift / a.baseline.abs() * 100.0,
            duration(a.duration_s)
        )
    })
}

fn eta(a: &ChannelAnalysis) -> String {
    match a.time_to_limit_s {
        Some(s) => duration(s),
        None => "–".into(),
    }
}

/// One channel's line of a receipt: every cell a layout may show.
struct ChannelLine {
    name: String,
    kind: &'static str,
    verdict: String,
    /// How sure the verdict is, 0–1.
    confidence: f64,
    severity: Option<&'static str>,
    /// Baseline, final, drift, trend, jumps, 24 h and time-to-limit.
    cells: [String; 7],
    per_step: String,
    longest_flat: String,
}

/// What a receipt says, decided once from a recording and its analysis.
/// [`text_report`] and [`md_report`] only lay it out; each takes it apart
/// whole (no `..`), so a fact added here does not compile until both
/// media say it, or say in their code why not.
struct Content<'r> {
    headline: String,
    gpu_layers: Option<String>,
    path: String,
    file_name: String,
    size: String,
    format_version: u32,
    source: &'r str,
    tool_version: &'r str,
    started: String,
    duration_s: f64,
    samples: usize,
    events: usize,
    ending: String,
    digest: &'r str,
    host: String,
    labels: Vec<(&'r str, &'r str)>,
    config: Vec<(&'r str, &'r str)>,
    training: Option<String>,
    command: Option<String>,
    notes: &'r [String],
    range: Option<[f64; 2]>,
    warmup: String,
    teardown_s: Option<f64>,
    thinned: Option<String>,
    sensitivity: Option<String>,
    insufficient: Vec<String>,
    channels: Vec<ChannelLine>,
    /// What the time to a limit is computed against, and its size.
    limit: Option<(String, String)>,
    /// `"12.0 s text"`, in time order.
    markers: Vec<String>,
    /// What happened at a moment, as `(seconds, text)`.
    event_notes: Vec<(f64, &'r str)>,
    /// `(source, lines, lines parsed)` of each output read.
    lines_read: Vec<(&'r str, u64, u64)>,
    tree: Option<&'r TreeSummary>,
    unavailable: Vec<(&'r str, &'r str)>,
    /// The level channels called growth, most urgent first.
    growing: Vec<&'r str>,
    /// Who died, each as its sentence and what said so.
    deaths: Vec<(String, String)>,
}

fn content<'r>(rec: &'r Recording, receipt: &'r Receipt<'_>) -> Content<'r> {
    let h = &rec.header;
    let pairs = |m: &'r std::collections::BTreeMap<String, String>| {
        m.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
    };
    Content {
        headline: receipt.headline(),
        gpu_layers: receipt.gpu_layers().map(|f| f.text),
        path: rec.path.display().to_string(),
        file_name: rec.path.file_name().map_or_else(
            || rec.path.display().to_string(),
            |n| n.to_string_lossy().into(),
        ),
        size: bytes(rec.bytes as f64),
        format_version: h.format_version,
        source: &h.source,
        tool_version: &h.tool_version,
        started: started(rec),
        duration_s: rec.duration_s(),
        samples: rec.samples_total(),
        events: rec.events_total(),
        ending: ending(rec),
        digest: &rec.digest,
        host: h.host_line(),
        labels: pairs(&h.labels),
        config: pairs(&h.config),
        training: training_axes(rec),
        command: (!h.command_line.is_empty()).then(|| h.command_line.join(" ")),
        notes: &h.notes,
        range: receipt.range,
        warmup: receipt.warmup.describe(),
        teardown_s: receipt.teardown_s,
        thinned: thinned_note(rec),
        sensitivity: sensitivity(receipt),
        insufficient: untold(receipt),
        channels: receipt
            .rows
            .iter()
            .map(|r| {
                let (a, u) = (&r.analysis, r.spec.unit);
                ChannelLine {
                    name: r.spec.name.clone(),
                    kind: a.kind.name(),
                    verdict: verdict_text(a, u),
                    confidence: a.confidence,
                    severity: a.severity.map(|s| s.as_str()),
                    cells: cells(a, u),
                    per_step: a.drift_per_step.map_or("–".into(), |dv| change(dv, u)),
                    longest_flat: duration(a.longest_flat_s),
                }
            })
            .collect(),
        limit: memory_limit(&receipt.rows)
            .map(|(v, src)| (src.describe().to_owned(), value(v, Unit::Bytes))),
        markers: markers(rec)
            .map(|(t, text)| format!("{t:.1} s {text}"))
            .collect(),
        event_notes: event_notes(rec).collect(),
        lines_read: lines_read(rec),
        tree: receipt.tree.as_ref(),
        unavailable: h
            .unavailable
            .iter()
            .map(|u| (u.probe.as_str(), u.reason.as_str()))
            .collect(),
        growing: receipt.growing(),
        deaths: receipt
            .ending
            .deaths
            .iter()
            .map(|d| {
                (
                    d.sentence(receipt.rank.as_deref(), &value, &duration),
                    d.evidence.join("; "),
                )
            })
            .collect(),
    }
}

/// `"{source}: N lines read, …"`: what reading one output found.
fn lines_read_text((source, lines, parsed): (&str, u64, u64)) -> String {
    format!(
        "{source}: {lines} lines read, {parsed} with steps, metrics or markers, {} ignored",
        lines.saturating_sub(parsed)
    )
}

fn teardown_text(td: f64) -> String {
    format!(
        "analysis up to {td:.1} s, where the job began to exit (its memory given back, its processes ending)"
    )
}

/// The terminal receipt: a headline, then `key value` lines and the table,
/// narrow enough for a terminal.
pub fn text_report(rec: &Recording, receipt: &Receipt<'_>) -> String {
    let Content {
        headline,
        gpu_layers,
        path,
        // The path says it.
        file_name: _,
        size,
        format_version,
        source,
        tool_version,
        started,
        duration_s,
        samples,
        events,
        ending,
        digest,
        host,
        labels,
        config,
        training,
        command,
        notes,
        range,
        warmup,
        teardown_s,
        thinned,
        sensitivity,
        insufficient,
        channels,
        limit,
        markers,
        event_notes,
        lines_read,
        tree,
        unavailable,
        growing,
        deaths,
    } = content(rec, receipt);
    let kv = |pairs: &[(&str, &str)]| {
        let v: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        v.join(" ")
    };
    let mut d = Doc::default();
    let line = |d: &mut Doc, l: String| {
        d.push(Block::Para(l));
    };
    d.push(Block::Headline(headline));
    if let Some(f) = gpu_layers {
        line(&mut d, f);
    }
    d.push(Block::Gap);
    line(&mut d, format!("recording  {path}"));
    line(
        &mut d,
        format!(
            "  {source} from {started}, flatline {tool_version}, format v{format_version}; {duration_s:.1} s, {samples} samples, {events} events, {size}; {ending}",
        ),
    );
    line(&mut d, format!("  digest sha256:{digest}"));
    line(&mut d, format!("  host {host}"));
    if !labels.is_empty() {
        line(&mut d, format!("  labels {}", kv(&labels)));
    }
    if !config.is_empty() {
        line(&mut d, format!("  config {}", kv(&config)));
    }
    if let Some(c) = command {
        line(&mut d, format!("  command {c}"));
    }
    if let Some(axes) = training {
        line(&mut d, format!("  training {axes}"));
    }
    for n in notes {
        line(&mut d, format!("  note: {n}"));
    }
    if let Some([from, to]) = range {
        line(
            &mut d,
            format!(
                "  part analysed: {from:.1} s to {to:.1} s after the start (of {duration_s:.1} s)"
            ),
        );
    }
    line(&mut d, format!("  analysis after {warmup}"));
    if let Some(td) = teardown_s {
        line(&mut d, format!("  {}", teardown_text(td)));
    }
    if let Some(note) = thinned {
        line(&mut d, format!("  {note}"));
    }
    if let Some(l) = sensitivity {
        line(&mut d, format!("  sensitivity: {l}"));
    }
    for l in insufficient {
        line(&mut d, format!("  insufficient: {l}"));
    }
    let mut table = Table::new(vec![
        Col::left("channel", 26),
        Col::right("kind", 8),
        Col::right("verdict", 26),
        Col::right("baseline", 14).after(1),
        Col::right("final", 14),
        Col::right("drift", 14),
        Col::right("slope/s", 20),
        Col::right("jumps × quantum", 18),
        Col::right("24 h", 16),
        Col::right("to limit", 12),
        Col::left("", 0).after(1),
    ]);
    for c in channels {
        // A terminal's width leaves out the confidence, the drift per step
        // and the longest flat run: `--format md` and `json` carry them.
        let ChannelLine {
            name,
            kind,
            verdict,
            confidence: _,
            severity,
            cells: [b, f, dr, sl, j, p, e],
            per_step: _,
            longest_flat: _,
        } = c;
        table.row(vec![
            name,
            kind.into(),
            verdict,
            b,
            f,
            dr,
            sl,
            j,
            p,
            e,
            severity.unwrap_or_default().into(),
        ]);
    }
    d.push(Block::Gap);
    d.push(Block::Table {
        indent: "  ".into(),
        table,
    });
    if let Some((src, v)) = limit {
        line(&mut d, format!("  time to limit against {src} ({v})"));
    }
    for (said, why) in deaths {
        line(&mut d, format!("  died: {said} ({why})"));
    }
    if !growing.is_empty() {
        line(
            &mut d,
            format!(
                "  levels that grow, most urgent first: {}",
                growing.join(", ")
            ),
        );
    }
    if !markers.is_empty() {
        line(&mut d, format!("  markers: {}", markers.join("; ")));
    }
    for (t, text) in event_notes {
        line(&mut d, format!("  at {t:.1} s: {text}"));
    }
    for l in lines_read {
        line(&mut d, format!("  {}", lines_read_text(l)));
    }
    if let Some(t) = tree {
        d.push(Block::Pre(tree_text(t, "  ")));
    }
    if let Some(t) = sites_text(receipt, "  ") {
        d.push(Block::Pre(t));
    }
    d.push(Block::List {
        indent: "  unavailable: ".into(),
        items: unavailable
            .iter()
            .map(|(probe, reason)| format!("{probe}: {reason}"))
            .collect(),
    });
    d.text()
}

/// The allocation sites of a `watch --sites` recording: each site, the
/// growing ones first, with where it was called from; then what they say
/// of the verdict. None without sites.
fn sites_text(receipt: &Receipt<'_>, indent: &str) -> Option<String> {
    let sites = receipt.sites();
    let a = receipt.assessment();
    let said: Vec<&str> = a
        .findings
        .iter()
        .filter(|f| matches!(f.kind, "site" | "retention"))
        .map(|f| f.text.as_str())
        .collect();
    if sites.is_empty() && said.is_empty() {
        return None;
    }
    let mut s = String::new();
    // Every growing site, and the three that hold most of the others.
    let growing = sites.iter().filter(|x| x.growth_per_s > 0.0).count();
    let shown = growing + 3.min(sites.len() - growing);
    let _ = writeln!(
        s,
        "\n{indent}allocation sites: {} holding 1 MiB or more ({growing} growing), largest growth first{}",
        sites.len(),
        if shown < sites.len() {
            format!("; {} more in the JSON receipt", sites.len() - shown)
        } else {
            String::new()
        }
    );
    for site in sites.iter().take(shown) {
        let growth = if site.growth_per_s > 0.0 {
            format!("+{}/s", bytes(site.growth_per_s))
        } else {
            site.verdict.as_str().to_owned()
        };
        let _ = writeln!(
            s,
            "{indent}  {:<12} {:>14} {:>12} held  pid {}  {}",
            site.channel,
            growth,
            bytes(site.live_bytes),
            site.pid.map_or_else(|| "?".into(), |p| p.to_string()),
            site.place()
        );
        for f in site.frames.iter().skip(1).take(3) {
            let _ = writeln!(
                s,
                "{indent}  {:<12} {:>14} {:>12}       called from {f}",
                "", "", ""
            );
        }
    }
    for t in said {
        let _ = writeln!(s, "{indent}  {t}");
    }
    Some(s)
}

/// The "process tree" section of a receipt, each line after `indent`.
fn tree_text(t: &TreeSummary, indent: &str) -> String {
    let mut s = String::new();
    let brief = match t.brief {
        0 => String::new(),
        1 => "; 1 more came and went between two readings, too brief to name".to_owned(),
        n => format!("; {n} more came and went between two readings, too brief to name"),
    };
    let seen = match t.processes.len() {
        1 => "1 process".to_owned(),
        n => format!("{n} processes"),
    };
    let _ = writeln!(
        s,
        "\n{indent}process tree: {seen} seen, at most {} at once{brief}",
        t.peak
    );
    let workers = t.processes.iter().any(|p| p.role == "worker");
    for p in &t.processes {
        let life = match (p.started_s, p.exited_s) {
            (Some(a), Some(b)) => format!("{a:.1}–{b:.1} s"),
            (Some(a), None) => format!("from {a:.1} s"),
            (None, Some(b)) => format!("until {b:.1} s"),
            (None, None) => String::new(),
        };
        let since = if workers {
            "since the workers started"
        } else {
            "since the warm-up"
        };
        let pss = match (p.pss_verdict, p.pss_growth) {
            (Some(v), Some(d)) => format!(
                "PSS {} after the warm-up, {} {since}",
                v.as_str(),
                change(d, Unit::Bytes)
            ),
            _ if p.channels.is_none() => "no channels of its own".to_owned(),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "{indent}  {:>8}  {:<7} {:<16} {:<16} {pss}",
            p.pid, p.role, p.name, life
        );
        if let Some(w) = &p.where_ {
            let _ = writeln!(
                s,
                "{indent}            where, {:.1}–{:.1} s: {}",
                w.from_s, w.to_s, w.text
            );
        }
    }
    // A process without channels of its own is still in the tree's sums;
    // say so, and why where the recording says.
    let unwatched = t.processes.iter().filter(|p| p.channels.is_none()).count();
    if unwatched > 0 {
        let why = if unwatched == t.processes.len() {
            "none had channels of its own (the watch was asked for none, or an older recording)"
                .to_owned()
        } else {
            format!(
                "a sample holds {} channels at a time, so flat processes wait and room is kept \
                 for those whose pages are being copied (the recording's notes say which, and when)",
                flatline_runtime::telemetry::MAX_CHANNELS
            )
        };
        let _ = writeln!(
            s,
            "{indent}  {unwatched} of {} had no channels of their own: {why}; all are in the tree.* sums",
            t.processes.len()
        );
    }
    if !t.grew.is_empty() {
        let pids: Vec<String> = t.grew.iter().map(u32::to_string).collect();
        let _ = writeln!(s, "{indent}  grew: {}", pids.join(", "));
    }
    if let Some([median, most]) = t.sums_age_s {
        let _ = writeln!(
            s,
            "{indent}  the tree's sums stood on page-table walks up to {most:.1} s old (median \
             {median:.1} s), carried forward between walks by each process's fault and resident counts"
        );
    }
    if let Some(f) = &t.finding {
        let _ = writeln!(s, "{indent}  finding: {f}");
    }
    s
}

/// The Markdown receipt, for an RFC or an issue: a title, a table of facts,
/// the channels' full table and a legend of the verdicts.
pub fn md_report(rec: &Recording, receipt: &Receipt<'_>) -> String {
    let Content {
        headline,
        gpu_layers,
        path,
        file_name,
        size,
        format_version,
        source,
        tool_version,
        started,
        duration_s,
        samples,
        events,
        ending,
        digest,
        host,
        labels,
        config,
        training,
        command,
        notes,
        range,
        warmup,
        teardown_s,
        thinned,
        sensitivity,
        insufficient,
        channels,
        limit,
        markers,
        event_notes,
        lines_read,
        tree,
        unavailable,
        growing,
        deaths,
    } = content(rec, receipt);
    let code = |pairs: &[(&str, &str)]| {
        let v: Vec<String> = pairs.iter().map(|(k, v)| format!("`{k}={v}`")).collect();
        v.join(" ")
    };
    let mut d = Doc::default();
    d.push(Block::Title(format!("Drift receipt: `{file_name}`")));
    d.push(Block::Headline(headline));
    if let Some(f) = gpu_layers {
        d.push(Block::Para(f));
    }
    let mut facts: Vec<(String, String)> = vec![
        (
            "recording".into(),
            format!("`{path}` ({size}, format v{format_version})"),
        ),
        ("digest".into(), format!("`sha256:{digest}`")),
        (
            "source".into(),
            format!("{source} with flatline {tool_version}"),
        ),
        ("started".into(), started),
        (
            "duration".into(),
            format!("{duration_s:.1} s, {samples} samples, {events} events"),
        ),
        ("end".into(), ending),
    ];
    if let Some(axes) = training {
        facts.push(("training".into(), axes));
    }
    facts.push(("host".into(), host));
    if !labels.is_empty() {
        facts.push(("labels".into(), code(&labels)));
    }
    if !config.is_empty() {
        facts.push(("configuration".into(), code(&config)));
    }
    if let Some(c) = command {
        facts.push(("command".into(), format!("`{c}`")));
    }
    d.push(Block::Facts {
        indent: String::new(),
        rows: facts,
    });
    if let Some([from, to]) = range {
        d.push(Block::Para(format!(
            "Part analysed: {from:.1} s to {to:.1} s after the start (of {duration_s:.1} s)."
        )));
    }
    d.push(Block::Para(format!(
        "Analysis after {warmup}. Each channel is read as its kind: levels (memory in use) `flat` (within 1 % of its level, or under the evidence it needs), `staircase` (discrete jumps with flat runs between), `linear` (steady growth), `noisy`; only levels are projected to 24 hours, staircases included, and get a severity from their time to the limit. Counters are read as rates (`steady`, `rising`, `falling`, `bursty`), gauges by their trend (`stable`, `drifting up/down` in % an hour, `noisy`), peaks by their rises (`held`, `rose`)."
    )));
    if let Some(td) = teardown_s {
        d.push(Block::Para(format!("The {}.", teardown_text(td))));
    }
    if let Some(line) = sensitivity {
        d.push(Block::Para(format!("Sensitivity: {line}.")));
    }
    for l in insufficient {
        d.push(Block::Para(format!("Insufficient: {l}.")));
    }
    if let Some(note) = thinned {
        d.push(Block::Para(format!("Note: {note}.")));
    }
    let mut table = Table::new(
        ["channel", "kind", "verdict", "severity"]
            .iter()
            .map(|n| Col::left(n, 0))
            .chain(
                [
                    "baseline",
                    "final",
                    "drift",
                    "drift/step",
                    "trend",
                    "jumps × quantum",
                    "longest flat",
                    "24 h projection",
                    "time to limit",
                ]
                .iter()
                .map(|n| Col::right(n, 0)),
            )
            .collect(),
    );
    for c in channels {
        let ChannelLine {
            name,
            kind,
            verdict,
            confidence,
            severity,
            cells: [b, f, dr, sl, j, p, e],
            per_step,
            longest_flat,
        } = c;
        table.row(vec![
            format!("`{name}`"),
            kind.into(),
            format!("{verdict} ({:.0} %)", confidence * 100.0),
            severity.unwrap_or("–").into(),
            b,
            f,
            dr,
            per_step,
            sl,
            j,
            longest_flat,
            p,
            e,
        ]);
    }
    d.push(Block::Table {
        indent: String::new(),
        table,
    });
    if let Some((src, v)) = limit {
        d.push(Block::Para(format!(
            "Time to limit is computed against {src} ({v})."
        )));
    }
    for (said, why) in deaths {
        d.push(Block::Para(format!("Died: {said} ({why}).")));
    }
    if !markers.is_empty() {
        d.push(Block::Para(format!("Markers: {}.", markers.join("; "))));
    }
    for (t, text) in event_notes {
        d.push(Block::Para(format!("At {t:.1} s: {text}")));
    }
    for l in lines_read {
        d.push(Block::Para(format!("Output read: {}.", lines_read_text(l))));
    }
    if let Some(t) = tree {
        d.push(Block::Heading("Process tree".into()));
        d.push(Block::Pre(tree_text(t, "")));
    }
    if let Some(t) = sites_text(receipt, "") {
        d.push(Block::Heading("Allocation sites".into()));
        d.push(Block::Pre(t));
    }
    if !unavailable.is_empty() {
        d.push(Block::Para("Unavailable probes:".into()));
        d.push(Block::List {
            indent: String::new(),
            items: unavailable
                .iter()
                .map(|(probe, reason)| format!("`{probe}`: {reason}"))
                .collect(),
        });
    }
    for n in notes {
        d.push(Block::Para(format!("Note: {n}")));
    }
    if !growing.is_empty() {
        d.push(Block::Para(format!(
            "Levels that grow, most urgent first: {}.",
            growing.join(", ")
        )));
    }
    d.markdown()
}

/// Bytes of values a receipt holds at most by default (`report
/// --memory-mib`): a longer recording is analysed on every 2nd, 4th, …
/// sample (its counts and min/max stay exact), so a week reports in
/// bounded memory.
pub const ANALYSIS_BUDGET: usize = 64 << 20;

/// What a receipt says of a recording analysed in part.
fn thinned_note(rec: &Recording) -> Option<String> {
    let t = rec.thinned.as_ref()?;
    Some(format!(
        "analysed on every {} sample ({} of {}), to stay within its memory budget; counts, first, last, min and max cover every sample",
        crate::fmt::ordinal(t.stride),
        crate::fmt::thousands(rec.len() as u64),
        crate::fmt::thousands(t.samples as u64),
    ))
}

/// What a bad tail means for a reader: "FILE is truncated at byte N
/// (why); using the K samples before it" (the CLI's warning, the Python
/// module's `TruncatedWarning`).
pub fn tail_text(path: &Path, t: &TailProblem, samples: usize) -> String {
    let what = match t.kind {
        TailProblemKind::Truncated => "is truncated",
        TailProblemKind::Damaged => "is damaged",
    };
    format!(
        "{} {what} at byte {} ({}); using the {samples} samples before it",
        path.display(),
        t.offset,
        t.reason,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process without channels of its own is named as such, with why.
    #[test]
    fn the_tree_says_which_processes_had_no_channels_of_their_own() {
        use flatline_runtime::analysis::tree::ProcessSeen;
        let proc_ = |pid: u32, channels: Option<&str>| ProcessSeen {
            pid,
            name: "python".into(),
            role: "worker".into(),
            ppid: None,
            started_s: Some(1.0),
            exited_s: None,
            channels: channels.map(str::to_owned),
            pss_verdict: None,
            pss_growth: None,
            where_: None,
        };
        let mut t = TreeSummary {
            processes: vec![proc_(10, Some("pid10")), proc_(11, None), proc_(12, None)],
            peak: 3,
            brief: 0,
            grew: Vec::new(),
            finding: None,
            copy: None,
            sums_age_s: None,
        };
        let text = tree_text(&t, "");
        let lines: Vec<&str> = text.lines().filter(|l| l.contains("no channels")).collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(
            lines[2].contains("2 of 3 had no channels of their own"),
            "{text}"
        );
        assert!(
            lines[2].contains("room is kept for those whose pages"),
            "{text}"
        );
        t.processes[0].channels = None;
        assert!(tree_text(&t, "").contains("3 of 3 had no channels of their own: none had"));
        t.processes
            .iter_mut()
            .for_each(|p| p.channels = Some("pid".into()));
        assert!(!tree_text(&t, "").contains("no channels"));
    }

    #[test]
    fn stats_skip_missing_readings() {
        let st = channel_stats(&[f64::NAN, 3.0, 1.0, f64::NAN, 2.0, f64::NAN]);
        assert_eq!(
            st,
            ChannelStats {
                samples: 3,
                first: 3.0,
                last: 2.0,
                min: 1.0,
                max: 3.0
            }
        );
        let none = channel_stats(&[f64::NAN]);
        assert_eq!(none.samples, 0);
        assert!(none.first.is_nan());
    }

    #[test]
    fn changes_are_signed_in_their_unit() {
        assert_eq!(change(1.5 * 1048576.0, Unit::Bytes), "+1.50 MiB");
        assert_eq!(change(-0.25, Unit::Mebibytes), "-256.0 KiB");
        assert_eq!(change(0.0, Unit::Bytes), "0");
    }
}
