//! The receipt laid out for a person: terminal text and Markdown. What
//! they say is decided in [`crate::report`] (and the answer in the
//! analysis's summary); this file only orders and words it.

use std::fmt::Write as _;

use flatline_analysis::rules;
use flatline_analysis::summary::Answer;
use flatline_analysis::tree::TreeSummary;
use flatline_format::Recording;
use flatline_format::Unit;

use crate::fmt::{bytes, duration, value};
use crate::render::{Block, Col, Doc, Table};
use crate::report::*;

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
    /// What a person reads next: the answer's figures, what to try, what
    /// could not be told.
    story: Vec<String>,
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
    let assessment = receipt.assessment();
    let h = &rec.header;
    let pairs = |m: &'r std::collections::BTreeMap<String, String>| {
        m.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
    };
    Content {
        headline: assessment.headline.clone(),
        story: story(assessment),
        gpu_layers: receipt.gpu_layers().map(|f| f.text.clone()),
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
        warmup: crate::report::describe_warmup(&receipt.warmup),
        teardown_s: receipt.teardown_s,
        thinned: thinned_note(rec),
        sensitivity: sensitivity(receipt),
        insufficient: untold(receipt),
        // The sites are in their own section and in the JSON: a site's row
        // beside the process's channels is one more line to read past.
        channels: receipt
            .rows
            .iter()
            .filter(|r| rules::site_leaf(&r.spec.name).is_none())
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
        tree: receipt.facts.tree.as_ref(),
        unavailable: h
            .unavailable
            .iter()
            .map(|u| (u.probe.as_str(), u.reason.as_str()))
            .collect(),
        growing: assessment.growing.iter().map(String::as_str).collect(),
        deaths: receipt
            .facts
            .ending
            .deaths
            .iter()
            .map(|d| {
                (
                    d.sentence(receipt.facts.rank.as_deref(), &value, &duration),
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
        story,
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
    for l in &story {
        line(&mut d, format!("  {l}"));
    }
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
    let table = text_table(channels);
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

/// The channels' table as a terminal shows it.
fn text_table(channels: Vec<ChannelLine>) -> Table {
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
    table
}

/// The channels' table in Markdown, every column.
fn md_table(channels: Vec<ChannelLine>) -> Table {
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
    table
}

/// `key=value` pairs as Markdown code, one after another.
fn code_pairs(pairs: &[(&str, &str)]) -> String {
    let v: Vec<String> = pairs.iter().map(|(k, v)| format!("`{k}={v}`")).collect();
    v.join(" ")
}

/// What the Markdown receipt says of how the channels were read, a
/// paragraph each: the teardown cut, the sensitivity, the channels too
/// short to tell, the thinning.
fn md_notes(
    teardown_s: Option<f64>,
    sensitivity: Option<String>,
    insufficient: Vec<String>,
    thinned: Option<String>,
) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(td) = teardown_s {
        out.push(format!("The {}.", teardown_text(td)));
    }
    if let Some(line) = sensitivity {
        out.push(format!("Sensitivity: {line}."));
    }
    out.extend(
        insufficient
            .into_iter()
            .map(|l| format!("Insufficient: {l}.")),
    );
    if let Some(note) = thinned {
        out.push(format!("Note: {note}."));
    }
    out
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
        .filter(|f| matches!(f.kind, "site" | "retention" | "allocator_keeps"))
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
            // A site with no reading in the part analysed holds what is
            // not known, not "NaN B".
            if site.live_bytes.is_finite() {
                bytes(site.live_bytes)
            } else {
                "–".into()
            },
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
pub(crate) fn tree_text(t: &TreeSummary, indent: &str) -> String {
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
            "since the start-up"
        };
        let pss = match (p.pss_verdict, p.pss_growth) {
            (Some(v), Some(d)) => format!(
                "PSS {} after the start-up, {} {since}",
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
                flatline_format::MAX_CHANNELS
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
        story,
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
    let mut d = Doc::default();
    d.push(Block::Title(format!("Drift receipt: `{file_name}`")));
    d.push(Block::Headline(headline));
    d.push(Block::List {
        indent: "- ".into(),
        items: story,
    });
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
        facts.push(("labels".into(), code_pairs(&labels)));
    }
    if !config.is_empty() {
        facts.push(("configuration".into(), code_pairs(&config)));
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
    for para in md_notes(teardown_s, sensitivity, insufficient, thinned) {
        d.push(Block::Para(para));
    }
    let table = md_table(channels);
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

/// The lines under the headline, at most [`STORY_LINES`]: the growth's
/// channels, its kind of memory, the code that holds it, whether the
/// program holds it, what to try; the other growths; what else was found;
/// what could not be told. Each from the typed answer, none found here.
fn story(a: &Answer) -> Vec<String> {
    let mut out = Vec::new();
    let in_bytes = |v: f64| value(v, Unit::Bytes);
    if let Some(g) = a.growths.first() {
        if g.channels.len() > 1 {
            let named: Vec<&str> = g.channels.iter().take(4).map(String::as_str).collect();
            let more = g.channels.len() - named.len();
            out.push(format!(
                "one growth in {} channels: {}{}",
                g.channels.len(),
                named.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            ));
        }
        if let Some(m) = &g.memory {
            out.push(format!(
                "memory, {:.1}–{:.1} s: {}",
                m.from_s, m.to_s, m.detail
            ));
        }
        for site in g.sites.iter().take(2) {
            out.push(format!(
                "code: {} in {}: its sampled live bytes grow {}/s, {} held ({:.0} % of the growth)",
                site.words(),
                site.function,
                in_bytes(site.growth_per_s),
                in_bytes(site.live_bytes),
                site.share * 100.0
            ));
        }
        let pid = g.who.as_ref().map(|w| format!("process {}:", w.pid));
        for f in a
            .findings
            .iter()
            .filter(|f| matches!(f.kind, "retention" | "allocator_keeps"))
        {
            if pid.as_deref().is_none_or(|p| f.text.starts_with(p)) {
                out.push(format!("held: {}", f.text));
            }
        }
        if let Some(t) = &g.advice {
            out.push(format!("try: {t}"));
        }
    }
    for g in a.growths.iter().skip(1).take(2) {
        out.push(format!(
            "also: {}",
            flatline_analysis::answer::sentence(g, &value, &duration)
        ));
    }
    // Findings the headline and the growths above do not already say.
    for f in &a.findings {
        let told = match f.kind {
            "site" | "retention" | "allocator_keeps" | "where" | "process_grew"
            | "rose_and_held" | "recording_gap" => true,
            // The copies are the headline's subject where they lead it.
            "copy_on_access" => a.headline.starts_with("Copy-on-access"),
            "damage" => true,
            _ => false,
        };
        if !told {
            out.push(format!("{}: {}", f.kind.replace('_', " "), f.text));
        }
    }
    if !a.untold.is_empty() {
        let named: Vec<&str> = a.untold.iter().take(4).map(String::as_str).collect();
        out.push(format!(
            "could not tell: {}{} (too few readings, or readings that cannot tell growth from noise)",
            named.join(", "),
            match a.untold.len() - named.len() {
                0 => String::new(),
                n => format!(" and {n} more"),
            }
        ));
    }
    if out.len() > STORY_LINES {
        let cut = out.len() - STORY_LINES + 1;
        out.truncate(STORY_LINES - 1);
        out.push(format!(
            "and {cut} more findings below and in the JSON receipt"
        ));
    }
    out
}

/// The most lines under a receipt's headline.
pub const STORY_LINES: usize = 11;
