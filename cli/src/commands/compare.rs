//! `flatline compare A B`: two recordings side by side, as a receipt (text,
//! Markdown, JSON) or in the dashboard.
//!
//! Each side is analysed on its own, exactly as `report` analyses it (its own
//! start-up, limits and kinds); the comparison then lines the channels up by
//! name. Recordings of different format versions, channel sets or lengths
//! compare without error: a channel on one side only is listed as such.
//! Where both were watched with `--sites`, their allocation sites are
//! lined up by line of code ([`site_changes`]): which stopped growing,
//! which started.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use flatline_analysis::sites::Site;
use flatline_analysis::{ChannelAnalysis, Kind, Verdict, rules};
use flatline_telemetry::recording::Recording;
use flatline_telemetry::{Group, TOKEN_CHANNELS, Unit};
use serde_json::{Map, Value, json};

use crate::cli::{AlignArg, CompareArgs, ReportFormat};
use crate::commands::report::{self, Receipt, Row, change, verdict_text};
use crate::viewer::{Show, Shown};
use flatline_receipt::fmt::{bytes, value};
use flatline_receipt::render::{Block, Col, Doc, Table, num, opt};
use flatline_stream::source::{ReplaySource, Source};
use flatline_stream::store::Align;

/// One recording of a comparison, analysed.
#[derive(Debug)]
pub struct Side<'a> {
    /// "A" or "B".
    pub letter: &'static str,
    pub rec: &'a Recording,
    pub receipt: Receipt<'a>,
}

impl Side<'_> {
    fn row(&self, name: &str) -> Option<&Row<'_>> {
        self.receipt.rows.iter().find(|r| r.spec.name == name)
    }

    fn file_name(&self) -> String {
        file_name(&self.rec.path)
    }

    fn has_steps(&self) -> bool {
        let column = |i: usize| self.rec.columns[i].as_slice();
        rules::step_axis(&self.rec.header.schema, column).is_some()
    }

    fn has_tokens(&self) -> bool {
        TOKEN_CHANNELS
            .iter()
            .find_map(|n| self.rec.channel(n))
            .is_some_and(rules::advances)
    }
}

fn file_name(p: &Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// A channel as the two sides have it.
#[derive(Debug)]
pub struct Pair<'s> {
    pub name: &'s str,
    pub unit: Unit,
    pub kind: Kind,
    pub a: Option<&'s Row<'s>>,
    pub b: Option<&'s Row<'s>>,
}

impl Pair<'_> {
    /// Whether the two sides say something different of this channel: its
    /// verdict, or any of baseline, final, drift and slope (a recording
    /// against itself differs nowhere).
    pub fn differs(&self) -> bool {
        let (Some(a), Some(b)) = (self.a, self.b) else {
            return true;
        };
        let (a, b) = (&a.analysis, &b.analysis);
        let same = |x: f64, y: f64| x == y || (x.is_nan() && y.is_nan());
        a.kind != b.kind
            || a.verdict != b.verdict
            || !same(a.baseline, b.baseline)
            || !same(a.final_value, b.final_value)
            || !same(a.drift, b.drift)
            || !same(a.slope_per_s, b.slope_per_s)
    }

    /// Both analyses, where both sides have the channel as the same kind.
    fn both(&self) -> Option<(&ChannelAnalysis, &ChannelAnalysis)> {
        let (a, b) = (&self.a?.analysis, &self.b?.analysis);
        (a.kind == b.kind).then_some((a, b))
    }
}

/// Two recordings, each analysed as `report` would, lined up on one axis.
#[derive(Debug)]
pub struct Comparison<'a> {
    pub a: Side<'a>,
    pub b: Side<'a>,
    pub align: Align,
    /// Why the alignment asked for could not be had, where it could not.
    pub align_note: Option<String>,
    /// The lines of code whose sites grow on either side (both sampled
    /// with `watch --sites`), the largest change first.
    pub sites: Vec<SiteChange>,
    /// Why lines cannot be compared, where one side has sites and the
    /// other none.
    pub sites_note: Option<String>,
}

impl<'a> Comparison<'a> {
    /// Analyses both recordings (each with `warmup_s`, else its own found
    /// start-up) and chooses the axis: `align`, else step when both sides
    /// have steps, else time. An axis one side lacks falls back to time,
    /// with a note saying so.
    pub fn new(
        a: &'a Recording,
        b: &'a Recording,
        align: Option<Align>,
        warmup_s: Option<f64>,
    ) -> Self {
        let a = Side {
            letter: "A",
            rec: a,
            receipt: report::analyse(a, warmup_s),
        };
        let b = Side {
            letter: "B",
            rec: b,
            receipt: report::analyse(b, warmup_s),
        };
        let (align, align_note) = choose_axis(&a, &b, align);
        let sampled = |s: &Side<'_>| s.receipt.facts.sites_sampled;
        let (sites, sites_note) = match (sampled(&a), sampled(&b)) {
            (true, true) => (site_changes(a.receipt.sites(), b.receipt.sites()), None),
            (false, false) => (Vec::new(), None),
            (has, _) => {
                let (with, without) = if has { ("A", "B") } else { ("B", "A") };
                (
                    Vec::new(),
                    Some(format!(
                        "{without} has no allocation sites (record it with `flatline watch --sites -- COMMAND`): lines are compared only where both sides have them; {with}'s are in its own receipt"
                    )),
                )
            }
        };
        Self {
            a,
            b,
            align,
            align_note,
            sites,
            sites_note,
        }
    }

    /// Every channel of either side: A's in the order its receipt reads
    /// them (growing levels first), then those only B has.
    pub fn pairs(&self) -> Vec<Pair<'_>> {
        let mut out: Vec<Pair<'_>> = Vec::new();
        for r in &self.a.receipt.rows {
            out.push(Pair {
                name: &r.spec.name,
                unit: r.spec.unit,
                kind: r.analysis.kind,
                a: Some(r),
                b: self.b.row(&r.spec.name),
            });
        }
        for r in &self.b.receipt.rows {
            if self.a.row(&r.spec.name).is_none() {
                out.push(Pair {
                    name: &r.spec.name,
                    unit: r.spec.unit,
                    kind: r.analysis.kind,
                    a: None,
                    b: Some(r),
                });
            }
        }
        out
    }

    /// How many channels differ between the sides (see [`Pair::differs`]).
    pub fn differences(&self) -> usize {
        self.pairs().iter().filter(|p| p.differs()).count()
    }

    /// The sentence a comparison starts with: which side's memory grows,
    /// the line of code whose growth changed most (`watch --sites` on both
    /// sides), then the rate that differs most (allocation calls, faults).
    pub fn headline(&self) -> String {
        let mut s = self.memory_sentence();
        if let Some(line) = self.sites.first().and_then(SiteChange::sentence) {
            s.push(' ');
            s.push_str(&line);
            s.push('.');
        }
        if let Some(rates) = self.rate_sentence() {
            s.push(' ');
            s.push_str(&rates);
        }
        s
    }

    fn memory_sentence(&self) -> String {
        let first = |side: &Side<'_>| side.receipt.growing().first().map(|n| n.to_string());
        // A side whose program holds flat while its memory grows: the
        // allocator keeps it, as that side's own receipt says first.
        let keeps = |side: &Side<'_>| {
            side.receipt
                .assessment()
                .growths
                .first()
                .is_some_and(|g| g.allocator_keeps())
        };
        let grows = |side: &Side<'_>, name: &str| {
            let r = side.row(name)?;
            let a = &r.analysis;
            let rate = value(a.slope_per_s * 60.0, r.spec.unit);
            Some(if keeps(side) {
                format!(
                    "{}'s program holds flat while its {name} grows {rate}/min (the allocator keeps memory that was freed)",
                    side.letter
                )
            } else {
                format!(
                    "{}'s {name} grows {rate}/min ({})",
                    side.letter,
                    a.verdict.as_str()
                )
            })
        };
        let other = |side: &Side<'_>, name: &str| match side.row(name) {
            Some(r) if r.analysis.verdict.is_growth() => {
                format!(
                    "{}'s {} too",
                    side.letter,
                    verdict_text(&r.analysis, r.spec.unit)
                )
            }
            Some(_) => format!("{}'s is flat", side.letter),
            None => format!("{} has no {name}", side.letter),
        };
        match (first(&self.a), first(&self.b)) {
            (None, None) => "Memory is flat in both A and B.".into(),
            (None, Some(n)) => format!(
                "{}; {}.",
                grows(&self.b, &n).unwrap_or_default(),
                other(&self.a, &n)
            ),
            (Some(n), None) => format!(
                "{}; {}.",
                grows(&self.a, &n).unwrap_or_default(),
                other(&self.b, &n)
            ),
            (Some(x), Some(y)) => format!(
                "{}{}, {}.",
                if keeps(&self.a) || keeps(&self.b) {
                    ""
                } else {
                    "Both grow: "
                },
                grows(&self.a, &x).unwrap_or_default(),
                grows(&self.b, &y).unwrap_or_default()
            ),
        }
    }

    /// The counter whose rate differs most between the sides, relatively,
    /// where one side runs at 1/s or more and they differ by half or more.
    fn rate_sentence(&self) -> Option<String> {
        let pairs = self.pairs();
        let best = pairs
            .iter()
            .filter(|p| p.kind == Kind::Counter)
            .filter(|p| {
                let r = p.a.or(p.b).expect("one side");
                r.spec.group != Group::Telemetry
            })
            .filter_map(|p| {
                let (a, b) = p.both()?;
                let (ra, rb) = (a.rate_per_s?, b.rate_per_s?);
                let top = ra.abs().max(rb.abs());
                let rel = (rb - ra).abs() / top;
                (top >= 1.0 && rel >= 0.5).then_some((p, ra, rb, rel, top))
            })
            .max_by(|x, y| x.3.total_cmp(&y.3).then(x.4.total_cmp(&y.4)))?;
        let (p, ra, rb, ..) = best;
        Some(format!(
            "{} runs at {}/s in A and {}/s in B.",
            p.name,
            value(ra, p.unit),
            value(rb, p.unit)
        ))
    }

    /// Drift per step or per token of a side's channel, as aligned.
    fn per_axis(&self, a: &ChannelAnalysis) -> Option<f64> {
        match self.align {
            Align::Time => None,
            Align::Step => a.drift_per_step,
            Align::Tokens => a.drift_per_token,
        }
    }
}

fn choose_axis(a: &Side<'_>, b: &Side<'_>, asked: Option<Align>) -> (Align, Option<String>) {
    let steps = (a.has_steps(), b.has_steps());
    let tokens = (a.has_tokens(), b.has_tokens());
    let lacking = |have: (bool, bool), what: &str| {
        let who: Vec<&str> = [(have.0, "A"), (have.1, "B")]
            .into_iter()
            .filter(|(h, _)| !h)
            .map(|(_, l)| l)
            .collect();
        format!("{} has no {what}: aligned by time", who.join(" and "))
    };
    match asked {
        None if steps == (true, true) => (Align::Step, None),
        None | Some(Align::Time) => (Align::Time, None),
        Some(Align::Step) if steps == (true, true) => (Align::Step, None),
        Some(Align::Step) => (Align::Time, Some(lacking(steps, "steps"))),
        Some(Align::Tokens) if tokens == (true, true) => (Align::Tokens, None),
        Some(Align::Tokens) => (Align::Time, Some(lacking(tokens, "tokens"))),
    }
}

/// B's rate against A's: `×2.50`, `=` when both are zero, `0 → 14.0k/s`
/// when A's is zero.
fn ratio(a: f64, b: f64, u: Unit) -> String {
    if a.is_nan() || b.is_nan() {
        "–".into()
    } else if a == b {
        "=".into()
    } else if a == 0.0 {
        format!("0 → {}", value(b, u))
    } else {
        let r = b / a;
        match r.abs() {
            x if x < 10.0 => format!("×{r:.2}"),
            x if x < 100.0 => format!("×{r:.1}"),
            _ => format!("×{r:.0}"),
        }
    }
}

/// [`ratio`] of two rates of a counter (a count a second).
fn rate_ratio(a: f64, b: f64, u: Unit) -> String {
    let r = ratio(a, b, u);
    if r.starts_with("0 →") {
        format!("{r}/s")
    } else {
        r
    }
}

/// Cells of one side's line: verdict, baseline, final, drift, slope (or
/// rate, or trend), jumps × quantum, drift per aligned unit.
fn side_cells(c: &Comparison<'_>, r: &Row<'_>) -> [String; 7] {
    let (a, u) = (&r.analysis, r.spec.unit);
    let rate = |v: f64| {
        if v.is_nan() {
            "–".to_string()
        } else {
            format!("{}/s", value(v, u))
        }
    };
    let (b, f, d, trend) = match a.kind {
        Kind::Level => (
            value(a.baseline, u),
            value(a.final_value, u),
            change(a.drift, u),
            format!("{}/s", change(a.slope_per_s, u)),
        ),
        Kind::Counter => (
            rate(a.baseline),
            rate(a.final_value),
            rate(a.drift),
            rate(a.rate_per_s.unwrap_or(f64::NAN)),
        ),
        Kind::Gauge | Kind::Peak => (
            value(a.baseline, u),
            value(a.final_value, u),
            change(a.drift, u),
            report::trend_text(a).unwrap_or_else(|| "–".into()),
        ),
    };
    let jumps = match (a.kind, a.jumps, a.quantum) {
        (Kind::Counter | Kind::Gauge, ..) => "–".into(),
        (_, 0, _) => "0".into(),
        (Kind::Level, n, Some(q)) => format!("{n} × {}", value(q, u)),
        (_, n, _) => n.to_string(),
    };
    let per = c.per_axis(a).map_or("–".into(), |v| change(v, u));
    [verdict_text(a, u), b, f, d, trend, jumps, per]
}

/// Cells of the difference line (B − A, or B's rate against A's for
/// counters), where both sides have the channel as the same kind.
fn diff_cells(c: &Comparison<'_>, p: &Pair<'_>) -> Option<[String; 7]> {
    let (a, b) = p.both()?;
    let u = p.unit;
    let delta = |x: f64, y: f64| change(y - x, u);
    let verdict = if a.verdict == b.verdict {
        "same".into()
    } else {
        format!("{} → {}", a.verdict.as_str(), b.verdict.as_str())
    };
    let per = match (c.per_axis(a), c.per_axis(b)) {
        (Some(x), Some(y)) => delta(x, y),
        _ => "–".into(),
    };
    let cells = match a.kind {
        Kind::Level => [
            verdict,
            delta(a.baseline, b.baseline),
            delta(a.final_value, b.final_value),
            delta(a.drift, b.drift),
            format!("{}/s", delta(a.slope_per_s, b.slope_per_s)),
            String::new(),
            per,
        ],
        Kind::Counter => [
            verdict,
            rate_ratio(a.baseline, b.baseline, u),
            rate_ratio(a.final_value, b.final_value, u),
            "–".into(),
            rate_ratio(
                a.rate_per_s.unwrap_or(f64::NAN),
                b.rate_per_s.unwrap_or(f64::NAN),
                u,
            ),
            String::new(),
            per,
        ],
        Kind::Gauge | Kind::Peak => {
            // Latencies and rates compare as ratios; %, °C and losses as differences.
            let as_ratio = matches!(
                u,
                Unit::Nanoseconds | Unit::Microseconds | Unit::Milliseconds | Unit::PerSecond
            ) && a.final_value > 0.0
                && b.final_value > 0.0;
            [
                verdict,
                delta(a.baseline, b.baseline),
                delta(a.final_value, b.final_value),
                delta(a.drift, b.drift),
                if as_ratio {
                    ratio(a.final_value, b.final_value, u)
                } else {
                    "–".into()
                },
                String::new(),
                per,
            ]
        }
    };
    Some(cells)
}

/// What a comparison says of one side, decided once: [`text_report`]
/// and [`md_report`] lay it out, each taking it apart whole.
struct SideContent<'r> {
    letter: &'static str,
    path: String,
    size: String,
    format_version: u32,
    source: &'r str,
    tool_version: &'r str,
    started: String,
    duration_s: f64,
    samples: usize,
    digest: &'r str,
    host: String,
    config: Vec<(&'r str, &'r str)>,
    training: Option<String>,
    headline: String,
    /// Its markers as "12.0 s text; …", if it has any.
    markers: Option<String>,
}

fn side_content<'r>(side: &'r Side<'_>) -> SideContent<'r> {
    let rec = side.rec;
    let h = &rec.header;
    SideContent {
        letter: side.letter,
        path: rec.path.display().to_string(),
        size: bytes(rec.bytes as f64),
        format_version: h.format_version,
        source: &h.source,
        tool_version: &h.tool_version,
        started: report::started(rec),
        duration_s: rec.duration_s(),
        samples: rec.samples_total(),
        digest: &rec.digest,
        host: h.host_line(),
        config: h
            .config
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect(),
        training: report::training_axes(rec),
        headline: side.receipt.headline().to_owned(),
        markers: marker_list(side),
    }
}

fn identity_line(side: &SideContent<'_>) -> String {
    let SideContent {
        letter,
        path,
        size,
        format_version,
        source,
        tool_version,
        started,
        duration_s,
        samples,
        digest,
        host,
        config,
        training,
        headline,
        // Said after the table.
        markers: _,
    } = side;
    let letter = *letter;
    let mut s = format!(
        "{letter}  {path}\n     {source} from {started}, flatline {tool_version}, format v{format_version}; {duration_s:.1} s, {samples} samples, {size}; sha256:{digest}\n",
    );
    let _ = writeln!(s, "     host {host}");
    if !config.is_empty() {
        let cfg: Vec<String> = config.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(s, "     config {}", cfg.join(" "));
    }
    if let Some(axes) = training {
        let _ = writeln!(s, "     training {axes}");
    }
    let _ = writeln!(s, "     {headline}");
    s
}

/// "aligned by step; 25 of 37 channels differ", with why an axis asked for
/// was not used.
fn alignment(c: &Comparison<'_>) -> String {
    format!(
        "aligned by {}{}; {} of {} channels differ",
        c.align.name(),
        c.align_note
            .as_ref()
            .map_or(String::new(), |n| format!(" ({n})")),
        c.differences(),
        c.pairs().len()
    )
}

/// A side's markers as "12.0 s text; …", if it has any.
fn marker_list(side: &Side<'_>) -> Option<String> {
    let marks: Vec<String> = report::markers(side.rec)
        .map(|(t, text)| format!("{t:.1} s {text}"))
        .collect();
    (!marks.is_empty()).then(|| marks.join("; "))
}

fn per_label(c: &Comparison<'_>) -> Option<&'static str> {
    match c.align {
        Align::Time => None,
        Align::Step => Some("drift/step"),
        Align::Tokens => Some("drift/token"),
    }
}

/// The columns of the comparison's table: the channel, its kind (text
/// only), the side, then the cells of [`side_cells`].
fn compare_table(per: Option<&str>, text: bool) -> Table {
    let mut cols = vec![Col::left("channel", 26)];
    if text {
        cols.push(Col::right("kind", 8));
        cols.push(Col::left("", 4).after(1));
    } else {
        cols.push(Col::left("side", 0));
    }
    cols.extend([
        if text {
            Col::right("verdict", 26)
        } else {
            Col::left("verdict", 0)
        },
        Col::right("baseline", 14),
        Col::right("final", 14),
        Col::right("drift", 14),
        Col::right("slope or rate", 20),
        Col::right("jumps × quantum", 18),
    ]);
    if let Some(p) = per {
        cols.push(Col::right(p, 16));
    }
    Table::new(cols)
}

/// The table's rows: three lines a channel (A, B, and B against A).
fn compare_rows(c: &Comparison<'_>, table: &mut Table, text: bool) {
    let per = per_label(c).is_some();
    let row = |table: &mut Table, name: String, kind: &str, side: &str, cells: [String; 7]| {
        let [v, b, f, d, t, j, p] = cells;
        let mut r = vec![name];
        if text {
            r.push(kind.into());
        }
        r.extend([side.into(), v, b, f, d, t, j]);
        if per {
            r.push(p);
        }
        table.row(r);
    };
    // A site's counts (its blocks, what it allocated) are for heap
    // profiles (`export --pprof`); its bytes held are the row.
    let counts = |name: &str| rules::site_leaf(name).is_some_and(|l| l != "live");
    for p in c.pairs().into_iter().filter(|p| !counts(p.name)) {
        let kind = p.kind.name();
        let name = if text {
            p.name.to_owned()
        } else {
            format!("`{}` ({kind})", p.name)
        };
        let mut first = true;
        for (side, r) in [("A", p.a), ("B", p.b)] {
            let (n, k) = if first {
                (name.clone(), kind)
            } else {
                (String::new(), "")
            };
            match r {
                Some(r) => row(table, n, k, side, side_cells(c, r)),
                None => {
                    let mut cells: [String; 7] = Default::default();
                    cells[0] = if text {
                        "(not recorded)"
                    } else {
                        "not recorded"
                    }
                    .into();
                    row(table, n, k, side, cells);
                }
            }
            first = false;
        }
        if let Some(d) = diff_cells(c, &p) {
            row(
                table,
                String::new(),
                "",
                if text { "B−A" } else { "B − A" },
                d,
            );
        }
    }
}

/// The terminal comparison: identities, then three lines a channel (A, B,
/// and B against A).
pub fn text_report(c: &Comparison<'_>) -> String {
    let mut d = Doc::default();
    d.push(Block::Headline(c.headline()));
    d.push(Block::Gap);
    let sides = [side_content(&c.a), side_content(&c.b)];
    for side in &sides {
        d.push(Block::Pre(identity_line(side)));
    }
    d.push(Block::Gap);
    for line in site_lines(c) {
        d.push(Block::Para(format!("  {line}")));
    }
    d.push(Block::Para(format!("  {}", alignment(c))));
    let mut table = compare_table(per_label(c), true);
    compare_rows(c, &mut table, true);
    d.push(Block::Gap);
    d.push(Block::Table {
        indent: "  ".into(),
        table,
    });
    for side in &sides {
        if let Some(marks) = &side.markers {
            d.push(Block::Para(format!("  markers {}: {marks}", side.letter)));
        }
    }
    d.text()
}

/// The Markdown comparison, ready to paste into an RFC.
pub fn md_report(c: &Comparison<'_>) -> String {
    let mut d = Doc::default();
    d.push(Block::Title(format!(
        "Comparison: `{}` (A) and `{}` (B)",
        c.a.file_name(),
        c.b.file_name()
    )));
    d.push(Block::Headline(c.headline()));
    let mut sides = Table::new(vec![Col::left("", 0), Col::left("A", 0), Col::left("B", 0)]);
    let mut rows: Vec<[String; 2]> = vec![Default::default(); 9];
    let mut marks = Vec::new();
    for (i, side) in [&c.a, &c.b].into_iter().enumerate() {
        let SideContent {
            letter,
            path,
            size,
            format_version,
            source,
            tool_version,
            started,
            duration_s,
            samples,
            digest,
            host,
            config,
            training,
            headline,
            markers,
        } = side_content(side);
        let cfg: Vec<String> = config.iter().map(|(k, v)| format!("`{k}={v}`")).collect();
        for (row, cell) in rows.iter_mut().zip([
            format!("`{path}` ({size}, format v{format_version})"),
            format!("`sha256:{digest}`"),
            format!("{source} with flatline {tool_version}"),
            started,
            format!("{duration_s:.1} s, {samples} samples"),
            host,
            cfg.join(" "),
            training.unwrap_or_else(|| "–".into()),
            headline,
        ]) {
            row[i] = cell;
        }
        if let Some(m) = markers {
            marks.push(format!("Markers in {letter}: {m}."));
        }
    }
    for (what, [a, b]) in [
        "recording",
        "digest",
        "source",
        "started",
        "duration",
        "host",
        "configuration",
        "training",
        "its own headline",
    ]
    .into_iter()
    .zip(rows)
    {
        sides.row(vec![what.into(), a, b]);
    }
    d.push(Block::Table {
        indent: String::new(),
        table: sides,
    });
    for line in site_lines(c) {
        d.push(Block::Para(line));
    }
    d.push(Block::Para(format!(
        "Each side is analysed on its own as `flatline report` would (its own start-up); channels are lined up by name and {}. Each channel has a line for A, one for B, and one for B against A: differences for levels and gauges, ratios (×) for counters' rates and for latencies.",
        alignment(c)
    )));
    let mut table = compare_table(per_label(c), false);
    compare_rows(c, &mut table, false);
    d.push(Block::Table {
        indent: String::new(),
        table,
    });
    for m in marks {
        d.push(Block::Para(m));
    }
    d.markdown()
}

fn side_json(r: &Row<'_>) -> Value {
    let a = &r.analysis;
    json!({
        "verdict": a.verdict,
        "severity": a.severity,
        "baseline": num(a.baseline),
        "final": num(a.final_value),
        "drift": num(a.drift),
        "slope_per_s": num(a.slope_per_s),
        "rate_per_s": opt(a.rate_per_s),
        "drift_per_step": opt(a.drift_per_step),
        "drift_per_token": opt(a.drift_per_token),
        "jumps": a.jumps,
        "quantum": opt(a.quantum),
        "projection_24h": opt(a.projection_24h),
        "time_to_limit_s": opt(a.time_to_limit_s),
    })
}

fn identity_json(side: &Side<'_>) -> Value {
    let rec = side.rec;
    let h = &rec.header;
    json!({
        "path": rec.path.display().to_string(),
        "digest": rec.digest,
        "format_version": h.format_version,
        "source": h.source,
        "started_unix_ms": h.started_unix_ms,
        "duration_s": rec.duration_s(),
        "samples": rec.samples_total(),
        "truncated": rec.is_truncated(),
        "host": h.host,
        "config": h.config,
        "command_line": h.command_line,
        "headline": side.receipt.headline(),
        "growing": side.receipt.growing(),
        "markers": report::markers(rec)
            .map(|(t_s, text)| json!({"t_s": t_s, "text": text}))
            .collect::<Vec<_>>(),
    })
}

/// The JSON comparison: `a` and `b` (identities), `align`, `headline`,
/// `differences`, and per channel `kind`, `unit`, `in` (both, a, b), `a`,
/// `b` and `diff`.
pub fn json_report(c: &Comparison<'_>) -> Value {
    let mut channels = Map::new();
    for p in c.pairs() {
        let diff = p.both().map(|(a, b)| {
            let ratio = |x: Option<f64>, y: Option<f64>| match (x, y) {
                (Some(x), Some(y)) if x != 0.0 => num(y / x),
                _ => Value::Null,
            };
            json!({
                "verdict_changed": a.verdict != b.verdict,
                "baseline": num(b.baseline - a.baseline),
                "final": num(b.final_value - a.final_value),
                "drift": num(b.drift - a.drift),
                "slope_per_s": num(b.slope_per_s - a.slope_per_s),
                "rate_ratio": ratio(a.rate_per_s, b.rate_per_s),
                "final_ratio": ratio(Some(a.final_value), Some(b.final_value)),
            })
        });
        channels.insert(
            p.name.to_string(),
            json!({
                "kind": p.kind,
                "unit": p.unit,
                "in": match (p.a.is_some(), p.b.is_some()) {
                    (true, true) => "both",
                    (true, false) => "a",
                    _ => "b",
                },
                "differs": p.differs(),
                "a": p.a.map_or(Value::Null, side_json),
                "b": p.b.map_or(Value::Null, side_json),
                "diff": diff.unwrap_or(Value::Null),
            }),
        );
    }
    let side_site = |s: Option<SiteSide>| {
        s.map_or(Value::Null, |s| {
            json!({
                "verdict": s.verdict,
                "growth_per_s": num(s.growth_per_s),
                "live_bytes": num(s.live_bytes),
            })
        })
    };
    let sites: Vec<Value> = c
        .sites
        .iter()
        .map(|l| {
            json!({
                "place": l.place,
                "function": l.function,
                "file": l.file,
                "line": l.line,
                "code": l.code,
                "change": l.kind(),
                "text": l.sentence(),
                "a": side_site(l.a),
                "b": side_site(l.b),
            })
        })
        .collect();
    json!({
        "headline": c.headline(),
        "sites": sites,
        "sites_note": c.sites_note,
        "align": c.align,
        "align_note": c.align_note,
        "differences": c.differences(),
        "a": identity_json(&c.a),
        "b": identity_json(&c.b),
        "channels": channels,
    })
}

/// The lines of a comparison's allocation sites, for the text and
/// Markdown receipts: each line of code whose growth changed, or why
/// there are none.
fn site_lines(c: &Comparison<'_>) -> Vec<String> {
    if let Some(note) = &c.sites_note {
        return vec![format!("By line of code: {note}.")];
    }
    if !c.a.receipt.facts.sites_sampled {
        return Vec::new();
    }
    if c.sites.is_empty() {
        return vec!["By line of code: no allocation site grows in A or B.".into()];
    }
    c.sites
        .iter()
        .filter_map(|l| {
            let code = l.code.as_ref().map_or(String::new(), |c| format!(" `{c}`"));
            l.sentence().map(|t| format!("By line of code: {t}{code}."))
        })
        .collect()
}

/// One line of code on one side: its sites in every process together (a
/// DataLoader's workers run the same line).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SiteSide {
    /// Growth if any of its sites grows; else too short to tell if any is;
    /// else the first's.
    pub verdict: Verdict,
    /// Bytes a second its live bytes grow (0 unless it grows).
    pub growth_per_s: f64,
    /// Bytes held at the end of what was analysed.
    pub live_bytes: f64,
}

/// A line of code as the two sides have it (`watch --sites`).
#[derive(Debug, Clone, PartialEq)]
pub struct SiteChange {
    /// `sites_pair.py:14`, or the function where no line is known.
    pub place: String,
    pub function: String,
    pub file: String,
    pub line: Option<u32>,
    /// The source line, where flatline could read it.
    pub code: Option<String>,
    /// `None`: not a site on that side (it never held 1 MiB there).
    pub a: Option<SiteSide>,
    pub b: Option<SiteSide>,
}

/// What changed of a line between the sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SiteChangeKind {
    /// It grows in A, not in B.
    Stopped,
    /// It grows in B, not in A.
    Started,
    /// It grows in both.
    Grows,
    /// It grows on one side; the other is too short to tell.
    Untold,
}

impl SiteChange {
    fn grows(s: Option<SiteSide>) -> bool {
        s.is_some_and(|s| s.verdict.is_growth())
    }

    fn untold(s: Option<SiteSide>) -> bool {
        s.is_some_and(|s| s.verdict == Verdict::Insufficient)
    }

    /// `None` where it grows on neither side.
    pub fn kind(&self) -> Option<SiteChangeKind> {
        let (a, b) = (Self::grows(self.a), Self::grows(self.b));
        Some(match (a, b) {
            (true, true) => SiteChangeKind::Grows,
            (true, false) if Self::untold(self.b) => SiteChangeKind::Untold,
            (false, true) if Self::untold(self.a) => SiteChangeKind::Untold,
            (true, false) => SiteChangeKind::Stopped,
            (false, true) => SiteChangeKind::Started,
            (false, false) => return None,
        })
    }

    fn rate(s: Option<SiteSide>) -> String {
        format!("{}/s", bytes(s.map_or(0.0, |s| s.growth_per_s)))
    }

    /// "sites_pair.py:14 no longer grows in B (1.25 MiB/s in A)".
    pub fn sentence(&self) -> Option<String> {
        let (p, a, b) = (&self.place, Self::rate(self.a), Self::rate(self.b));
        Some(match self.kind()? {
            SiteChangeKind::Stopped => format!("{p} no longer grows in B ({a} in A)"),
            SiteChangeKind::Started => format!("{p} grows {b} in B (not in A)"),
            SiteChangeKind::Grows => format!("{p} grows in both: {a} in A, {b} in B"),
            SiteChangeKind::Untold if Self::grows(self.a) => {
                format!("{p} grows {a} in A; B is too short to tell")
            }
            SiteChangeKind::Untold => format!("{p} grows {b} in B; A is too short to tell"),
        })
    }

    /// How much its growth changed, for the order of a list.
    fn change(&self) -> f64 {
        let r = |s: Option<SiteSide>| s.map_or(0.0, |s| s.growth_per_s);
        (r(self.b) - r(self.a)).abs()
    }
}

/// The lines whose sites grow on either side, the largest change of rate
/// first.
pub fn site_changes(a: &[Site], b: &[Site]) -> Vec<SiteChange> {
    let mut lines: Vec<SiteChange> = Vec::new();
    for (in_b, sites) in [(false, a), (true, b)] {
        for s in sites {
            let at = lines
                .iter()
                .position(|c| c.file == s.file && c.line == s.line && c.function == s.function)
                .unwrap_or_else(|| {
                    lines.push(SiteChange {
                        place: short_place(s),
                        function: s.function.clone(),
                        file: s.file.clone(),
                        line: s.line,
                        code: s.code.clone(),
                        a: None,
                        b: None,
                    });
                    lines.len() - 1
                });
            let side = if in_b {
                &mut lines[at].b
            } else {
                &mut lines[at].a
            };
            let live = if s.live_bytes.is_finite() {
                s.live_bytes
            } else {
                0.0
            };
            *side = Some(match *side {
                None => SiteSide {
                    verdict: s.verdict,
                    growth_per_s: s.growth_per_s,
                    live_bytes: live,
                },
                Some(t) => SiteSide {
                    verdict: if t.verdict.is_growth()
                        || (t.verdict == Verdict::Insufficient && !s.verdict.is_growth())
                    {
                        t.verdict
                    } else {
                        s.verdict
                    },
                    growth_per_s: t.growth_per_s + s.growth_per_s,
                    live_bytes: t.live_bytes + live,
                },
            });
        }
    }
    lines.retain(|c| c.kind().is_some());
    lines.sort_by(|x, y| {
        y.change()
            .total_cmp(&x.change())
            .then_with(|| x.place.cmp(&y.place))
    });
    lines
}

/// `file:line` by the file's name (as the receipt's headline names it),
/// else the function.
fn short_place(s: &Site) -> String {
    let name = s.file.rsplit('/').next().unwrap_or(&s.file);
    match s.line {
        Some(l) if l > 0 && !name.is_empty() => format!("{name}:{l}"),
        _ => s.function.clone(),
    }
}

pub fn run(args: &CompareArgs, viewer: &dyn crate::Viewer) -> Result<()> {
    // Each file is opened once, warning once if its tail is bad; a damaged
    // side compares what it has.
    let a = report::open(&args.a)?;
    let b = report::open(&args.b)?;
    if let Some(format) = args.format {
        let c = Comparison::new(&a, &b, args.align.map(Align::from), args.warmup_s);
        match format {
            ReportFormat::Json => println!("{}", serde_json::to_string_pretty(&json_report(&c))?),
            ReportFormat::Md => print!("{}", md_report(&c)),
            ReportFormat::Text => print!("{}", text_report(&c)),
        }
        if args.screenshot.is_none() {
            return Ok(());
        }
    }
    // A as the source, B beside it; by step when both runs have steps (the
    // dashboard falls back to time where one has none), unless asked.
    viewer.check_display()?;
    let title = format!("flatline — {} and {}", args.a.display(), args.b.display());
    let (a, a_store) = ReplaySource::from_recording(a);
    let (b, b_store) = ReplaySource::from_recording(b);
    let shown = Shown::Compare {
        a,
        a_store,
        b: b.meta(),
        b_store,
        align: args.align.unwrap_or(AlignArg::Step).into(),
    };
    viewer.show(Show {
        title,
        size: args.size,
        window: args.window.clone(),
        screenshot: args.screenshot.clone(),
        shown,
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(pid: u32, file: &str, line: u32, verdict: Verdict, growth: f64, live: f64) -> Site {
        Site {
            channel: format!("site{line}.live"),
            pid: Some(pid),
            function: "f".into(),
            file: file.into(),
            line: Some(line),
            frames: Vec::new(),
            code: Some("keep(x)".into()),
            python_unread: None,
            verdict,
            growth_per_s: growth,
            live_bytes: live,
        }
    }

    const MIB: f64 = 1_048_576.0;

    #[test]
    fn a_line_that_stops_or_starts_growing_is_named_with_its_rates() {
        let a = [
            site(1, "/w/job.py", 52, Verdict::Linear, 1.32 * MIB, 50.0 * MIB),
            site(1, "/w/job.py", 60, Verdict::Flat, 0.0, 4.0 * MIB),
            site(1, "/w/old.py", 9, Verdict::Linear, 0.1 * MIB, 3.0 * MIB),
        ];
        // 52 held flat; 60 grows now; old.py:9 is no site in B at all.
        let b = [
            site(2, "/w/job.py", 52, Verdict::Flat, 0.0, 2.0 * MIB),
            site(2, "/w/job.py", 60, Verdict::Staircase, 0.4 * MIB, 9.0 * MIB),
        ];
        let c = site_changes(&a, &b);
        let said: Vec<String> = c.iter().filter_map(SiteChange::sentence).collect();
        assert_eq!(
            said,
            [
                "job.py:52 no longer grows in B (1.32 MiB/s in A)",
                "job.py:60 grows 409.6 KiB/s in B (not in A)",
                "old.py:9 no longer grows in B (102.4 KiB/s in A)",
            ]
        );
        assert_eq!(c[0].kind(), Some(SiteChangeKind::Stopped));
        assert_eq!(c[1].kind(), Some(SiteChangeKind::Started));
        assert_eq!(c[2].b, None);
        assert_eq!(c[0].code.as_deref(), Some("keep(x)"));
    }

    #[test]
    fn a_line_in_several_processes_is_one_and_a_short_side_tells_nothing() {
        // Two workers run the same line: their growths add up.
        let a = [
            site(7, "/w/ds.py", 31, Verdict::Linear, 0.25 * MIB, 8.0 * MIB),
            site(8, "/w/ds.py", 31, Verdict::Flat, 0.0, 1.0 * MIB),
            site(9, "/w/ds.py", 31, Verdict::Linear, 0.25 * MIB, 8.0 * MIB),
        ];
        let b = [site(
            3,
            "/w/ds.py",
            31,
            Verdict::Linear,
            0.1 * MIB,
            2.0 * MIB,
        )];
        let c = site_changes(&a, &b);
        assert_eq!(c.len(), 1);
        let sa = c[0].a.unwrap();
        assert_eq!(sa.growth_per_s, 0.5 * MIB);
        assert_eq!(sa.live_bytes, 17.0 * MIB);
        assert!(sa.verdict.is_growth());
        assert_eq!(
            c[0].sentence().unwrap(),
            "ds.py:31 grows in both: 512.0 KiB/s in A, 102.4 KiB/s in B"
        );
        // Too short to judge in B: no "no longer grows".
        let b = [site(
            3,
            "/w/ds.py",
            31,
            Verdict::Insufficient,
            0.0,
            2.0 * MIB,
        )];
        let c = site_changes(&a, &b);
        assert_eq!(c[0].kind(), Some(SiteChangeKind::Untold));
        assert_eq!(
            c[0].sentence().unwrap(),
            "ds.py:31 grows 512.0 KiB/s in A; B is too short to tell"
        );
        // Growing nowhere: not listed.
        let flat = [site(1, "/w/ds.py", 31, Verdict::Flat, 0.0, MIB)];
        assert!(site_changes(&flat, &flat).is_empty());
    }
}
