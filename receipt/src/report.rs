//! A recording's receipt: what it says (verdicts, headline, findings), as text, Markdown or JSON.

use std::path::Path;

use flatline_analysis::rules::{self, ChannelStats, LimitSource, channel_stats};
use flatline_analysis::sites;
use flatline_analysis::summary;
use flatline_analysis::{self as analysis, ChannelAnalysis, Note, Verdict, reading};
use flatline_catalog::MAX_STEP;
use flatline_format::{ChannelSpec, TOKEN_CHANNELS, Unit};
use flatline_format::{EventKind, Recording, TailProblem, TailProblemKind};
use serde_json::{Map, Value, json};

use crate::fmt::{duration, value};

use crate::render::{num, opt};
/// The findings' kinds that tell how a job died (the analysis's list).
pub use flatline_analysis::summary::DEATH_KINDS;

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
pub(crate) fn event_notes(rec: &Recording) -> impl Iterator<Item = (f64, &str)> {
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
pub(crate) fn facts_json(rec: &Recording) -> Vec<Value> {
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
pub(crate) fn lines_read(rec: &Recording) -> Vec<(&str, u64, u64)> {
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
pub(crate) fn memory_limit(rows: &[Row<'_>]) -> Option<(f64, LimitSource)> {
    rows.iter()
        .filter(|r| {
            r.limit
                .is_some_and(|l| !matches!(l, LimitSource::GpuTotal | LimitSource::Shared))
        })
        .find_map(|r| Some((r.analysis.limit?, r.limit?)))
}

pub use flatline_analysis::reading::WarmupChoice;

/// How the start-up of a receipt was chosen, in words.
pub(crate) fn describe_warmup(w: &WarmupChoice) -> String {
    match w {
        WarmupChoice::Given(s) => format!("a start-up of {s:.1} s (--warmup-s)"),
        WarmupChoice::Found { s, channel } => {
            format!("a start-up of {s:.1} s (found: where {channel} settles)")
        }
        WarmupChoice::None => "no start-up found: every reading counts".into(),
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
    /// The process tree, how the job ended, the allocation sites and the
    /// rank, as every surface reads them ([`reading::Facts`]).
    pub facts: reading::Facts,
    /// The one answer, made once ([`reading::Run`]).
    pub answer: summary::Answer,
    /// What the file lost to damage, where it did.
    pub damage: Option<crate::damage::Damage>,
    /// The gaps write faults (a full disk) left in the part analysed.
    pub gaps: Option<crate::damage::Gaps>,
}

impl Receipt<'_> {
    /// The one answer: headline, growing channels, growths, findings, made
    /// once when the receipt was.
    pub fn assessment(&self) -> &summary::Answer {
        &self.answer
    }

    /// The allocation sites (`watch --sites`), largest growth first.
    pub fn sites(&self) -> &[sites::Site] {
        &self.facts.sites
    }

    /// The one sentence a receipt starts with.
    pub fn headline(&self) -> &str {
        &self.answer.headline
    }

    /// Which layer of a PyTorch job's GPU memory grows, where it logs
    /// its allocator's statistics.
    pub fn gpu_layers(&self) -> Option<&summary::LayerFinding> {
        self.answer.gpu_layers.as_ref()
    }

    /// The level channels called growth, most urgent first.
    pub fn growing(&self) -> Vec<&str> {
        self.answer.growing.iter().map(String::as_str).collect()
    }
}

/// Analyses every channel of a recording, each as its kind, after one
/// start-up: `warmup_s`, else the one found in its memory channels.
pub fn analyse(rec: &Recording, warmup_s: Option<f64>) -> Receipt<'_> {
    analyse_range(rec, warmup_s, None)
}

/// [`analyse`] on the samples from `range[0]` to `range[1]` seconds after
/// the start only: the same analysis on a part of the run. The start-up is
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
/// had the run ended there: its start-up found on those seconds alone (as a
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
    let damage = crate::damage::Damage::of(rec);
    let mut gaps = None;
    let run = reading::Run::read(
        rec,
        warmup_s,
        range,
        prefix,
        |within| {
            gaps = crate::damage::Gaps::of(&rec.events).and_then(|g| match within {
                Some([from, to]) => g.within(from, to),
                None => Some(g),
            });
            reading::Lost {
                damage: damage.as_ref().map(crate::damage::Damage::note),
                gap: gaps.as_ref().map(crate::damage::Gaps::note),
            }
        },
        crate::fmt::WORDS,
    );
    let read = run.reading;
    let (a, b) = (read.samples.start, read.samples.end);
    let schema = &rec.header.schema;
    let rows: Vec<Row<'_>> = read
        .channels
        .into_iter()
        .map(|r| Row {
            index: r.index,
            spec: &schema.channels[r.index],
            stats: match range {
                None => rec.column_stats(r.index),
                Some(_) => channel_stats(&rec.columns[r.index][a..b]),
            },
            analysis: r.analysis,
            limit: r.limit,
        })
        .collect();
    let t0 = rec.t_ns.first().map_or(0.0, |&t| t as f64 / 1e9);
    let at = |i: usize| rec.t_ns[i] as f64 / 1e9 - t0;
    let range = range.map(|_| {
        if a < b {
            [at(a), at(b - 1)]
        } else {
            [0.0, 0.0]
        }
    });
    Receipt {
        rows,
        warmup: read.warmup,
        range,
        teardown_s: read.teardown_s,
        facts: run.facts,
        answer: run.answer,
        damage,
        gaps,
    }
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
        (v, Some(Note::PartsFlat)) => format!("{} (its processes flat)", v.as_str()),
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
pub(crate) fn sensitivity(receipt: &Receipt<'_>) -> Option<String> {
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
pub(crate) fn untold(receipt: &Receipt<'_>) -> Vec<String> {
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
        "growing": assessment.growing,
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
            "out_of_memory": receipt.facts.ending.out_of_memory,
            "facts": facts_json(rec),
        },
        "deaths": receipt.facts.ending.deaths,
        "exit": json!({"code": receipt.facts.ending.exit_code, "signal": receipt.facts.ending.exit_signal}),
        "process_tree": receipt.facts.tree,
        "sites": receipt.sites(),
        "findings": findings_json(assessment),
        "unavailable": unavailable,
    })
}

/// The findings, typed: damage first, then each growth (`kind: growth`, its channels,
/// process, rate, time to its limit, `where`, `sites`, `try` and its
/// sentence as `text`), then the others as `{kind, text}`.
fn findings_json(a: &summary::Answer) -> Vec<Value> {
    let growths = a.growths.iter().map(|g| {
        let mut v = serde_json::to_value(g).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut v {
            m.insert("kind".into(), json!("growth"));
            m.insert(
                "text".into(),
                json!(flatline_analysis::answer::sentence(g, &value, &duration)),
            );
        }
        v
    });
    // A damaged file's loss stays first, as its headline says it first.
    let (damage, rest): (Vec<_>, Vec<_>) = a.findings.iter().partition(|f| f.kind == "damage");
    let plain = |f: &summary::Finding| json!({"kind": f.kind, "text": f.text});
    damage
        .into_iter()
        .map(plain)
        .chain(growths)
        .chain(rest.into_iter().map(plain))
        .collect()
}

pub fn started(rec: &Recording) -> String {
    humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(rec.header.started_unix_ms),
    )
    .to_string()
}

pub(crate) fn ending(rec: &Recording) -> String {
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
pub(crate) fn last_step(rec: &Recording) -> Option<f64> {
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

pub(crate) fn jumps_cell(a: &ChannelAnalysis, unit: Unit) -> String {
    match (a.jumps, a.quantum) {
        (0, _) => "0".into(),
        (n, Some(q)) => format!("{n} × {}", value(q, unit)),
        (n, None) => n.to_string(),
    }
}

/// A channel's baseline, final, drift, trend, jumps, 24 h and time-to-limit
/// cells, as its kind is read: counters as rates, gauges by % an hour, peaks
/// by their rises; only levels are projected.
pub(crate) fn cells(a: &ChannelAnalysis, u: Unit) -> [String; 7] {
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

pub(crate) fn eta(a: &ChannelAnalysis) -> String {
    match a.time_to_limit_s {
        Some(s) => duration(s),
        None => "–".into(),
    }
}

/// Bytes of values a receipt holds at most by default (`report
/// --memory-mib`): a longer recording is analysed on every 2nd, 4th, …
/// sample (its counts and min/max stay exact), so a week reports in
/// bounded memory.
pub const ANALYSIS_BUDGET: usize = 64 << 20;

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
    use crate::text::tree_text;

    /// A process without channels of its own is named as such, with why.
    #[test]
    fn the_tree_says_which_processes_had_no_channels_of_their_own() {
        use flatline_analysis::tree::{ProcessSeen, TreeSummary};
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
