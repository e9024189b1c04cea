//! Two recordings side by side (`flatline compare A B`), in words: the
//! receipt of a comparison as text, Markdown or JSON.
//!
//! Each side is analysed on its own, exactly as `report` analyses it (its own
//! start-up, limits and kinds); the comparison then lines the channels up by
//! name. Recordings of different format versions, channel sets or lengths
//! compare without error: a channel on one side only is listed as such.
//! What the comparison judges (the axis, which lines of code changed, which
//! rate differs most, which side grows) is decided in
//! [`flatline_analysis::compare`]; this module only words it.

use std::fmt::Write as _;
use std::path::Path;

use flatline_analysis::compare::{
    self as judge, Align, Axis, Grower, Letter, Memory, Rates, SiteChange, SiteChangeKind,
    SiteSide, Sites,
};
use flatline_analysis::{ChannelAnalysis, Kind, rules};
use flatline_format::{Group, Recording, TOKEN_CHANNELS, Unit};
use serde_json::{Map, Value, json};

use crate::fmt::{bytes, value};
use crate::render::{Block, Col, Doc, Table, num, opt};
use crate::report::{self, Receipt, Row, change, verdict_text};

/// One recording of a comparison, analysed.
#[derive(Debug)]
pub struct Side<'a> {
    pub letter: Letter,
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

    /// The channel its answer tells first as growing, if any.
    fn grower(&self) -> Option<Grower> {
        let answer = self.receipt.assessment();
        Some(Grower {
            channel: answer.growing.first()?.clone(),
            allocator_keeps: answer.growths.first().is_some_and(|g| g.allocator_keeps()),
        })
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
    /// Whether the two sides say something different of this channel
    /// ([`judge::differs`]); a channel one side lacks differs.
    pub fn differs(&self) -> bool {
        match (self.a, self.b) {
            (Some(a), Some(b)) => judge::differs(&a.analysis, &b.analysis),
            _ => true,
        }
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
    /// The axis, and the one asked for where a side lacks it.
    pub axis: Axis,
    /// The lines of code whose sites grow on either side (both sampled
    /// with `watch --sites`), the largest change first; or which side has
    /// none.
    pub sites: Sites,
}

impl<'a> Comparison<'a> {
    /// Analyses both recordings (each with `warmup_s`, else its own found
    /// start-up) and chooses the axis ([`judge::choose_axis`]).
    pub fn new(
        a: &'a Recording,
        b: &'a Recording,
        align: Option<Align>,
        warmup_s: Option<f64>,
    ) -> Self {
        let side = |letter, rec| Side {
            letter,
            rec,
            receipt: report::analyse(rec, warmup_s),
        };
        let (a, b) = (side(Letter::A, a), side(Letter::B, b));
        let axis = judge::choose_axis(
            [a.has_steps(), b.has_steps()],
            [a.has_tokens(), b.has_tokens()],
            align,
        );
        fn sampled<'r>(s: &'r Side<'_>) -> Option<&'r [flatline_analysis::sites::Site]> {
            s.receipt.facts.sites_sampled.then(|| s.receipt.sites())
        }
        let sites = Sites::of(sampled(&a), sampled(&b));
        Self { a, b, axis, sites }
    }

    fn side(&self, l: Letter) -> &Side<'a> {
        match l {
            Letter::A => &self.a,
            Letter::B => &self.b,
        }
    }

    /// The axis the sides are lined up on.
    pub fn align(&self) -> Align {
        self.axis.align
    }

    /// Why the axis asked for could not be had, where it could not:
    /// "B has no steps: aligned by time".
    pub fn align_note(&self) -> Option<String> {
        let (asked, who) = self.axis.lacking.as_ref()?;
        let what = match asked {
            Align::Tokens => "tokens",
            _ => "steps",
        };
        let who: Vec<&str> = who.iter().map(|l| l.as_str()).collect();
        Some(format!(
            "{} has no {what}: aligned by time",
            who.join(" and ")
        ))
    }

    /// Why lines cannot be compared, where one side has sites and the
    /// other none.
    pub fn sites_note(&self) -> Option<String> {
        let Sites::Only(with) = self.sites else {
            return None;
        };
        let without = with.other().as_str();
        let with = with.as_str();
        Some(format!(
            "{without} has no allocation sites (record it with `flatline watch --sites -- COMMAND`): lines are compared only where both sides have them; {with}'s are in its own receipt"
        ))
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
        if let Some(line) = self.sites.changes().first().and_then(site_sentence) {
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
        let grows = |l: Letter, g: &Grower| {
            let side = self.side(l);
            let name = &g.channel;
            let Some(r) = side.row(name) else {
                return String::new();
            };
            let a = &r.analysis;
            let rate = value(a.slope_per_s * 60.0, r.spec.unit);
            if g.allocator_keeps {
                format!(
                    "{}'s program holds flat while its {name} grows {rate}/min (the allocator keeps memory that was freed)",
                    l.as_str()
                )
            } else {
                format!(
                    "{}'s {name} grows {rate}/min ({})",
                    l.as_str(),
                    a.verdict.as_str()
                )
            }
        };
        let other = |l: Letter, name: &str| match self.side(l).row(name) {
            Some(r) if r.analysis.verdict.is_growth() => {
                format!(
                    "{}'s {} too",
                    l.as_str(),
                    verdict_text(&r.analysis, r.spec.unit)
                )
            }
            Some(_) => format!("{}'s is flat", l.as_str()),
            None => format!("{} has no {name}", l.as_str()),
        };
        match judge::memory(self.a.grower(), self.b.grower()) {
            Memory::Flat => "Memory is flat in both A and B.".into(),
            Memory::One(l, g) => format!("{}; {}.", grows(l, &g), other(l.other(), &g.channel)),
            Memory::Both(x, y) => format!(
                "{}{}, {}.",
                if x.allocator_keeps || y.allocator_keeps {
                    ""
                } else {
                    "Both grow: "
                },
                grows(Letter::A, &x),
                grows(Letter::B, &y)
            ),
        }
    }

    /// The counter whose rate differs most between the sides
    /// ([`judge::widest_rate`]).
    fn rate_sentence(&self) -> Option<String> {
        let pairs = self.pairs();
        let counters: Vec<(&Pair<'_>, Rates)> = pairs
            .iter()
            .filter(|p| p.kind == Kind::Counter)
            .filter(|p| {
                let r = p.a.or(p.b).expect("one side");
                r.spec.group != Group::Telemetry
            })
            .filter_map(|p| {
                let (a, b) = p.both()?;
                Some((
                    p,
                    Rates {
                        a: a.rate_per_s?,
                        b: b.rate_per_s?,
                    },
                ))
            })
            .collect();
        let rates: Vec<Rates> = counters.iter().map(|(_, r)| *r).collect();
        let (p, r) = counters[judge::widest_rate(&rates)?];
        Some(format!(
            "{} runs at {}/s in A and {}/s in B.",
            p.name,
            value(r.a, p.unit),
            value(r.b, p.unit)
        ))
    }

    /// Drift per step or per token of a side's channel, as aligned.
    fn per_axis(&self, a: &ChannelAnalysis) -> Option<f64> {
        match self.align() {
            Align::Time => None,
            Align::Step => a.drift_per_step,
            Align::Tokens => a.drift_per_token,
        }
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
        letter: side.letter.as_str(),
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
        c.align().name(),
        c.align_note().map_or(String::new(), |n| format!(" ({n})")),
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
    match c.align() {
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
        .changes()
        .iter()
        .map(|l| {
            json!({
                "place": l.place,
                "function": l.function,
                "file": l.file,
                "line": l.line,
                "code": l.code,
                "change": l.kind(),
                "text": site_sentence(l),
                "a": side_site(l.a),
                "b": side_site(l.b),
            })
        })
        .collect();
    json!({
        "headline": c.headline(),
        "sites": sites,
        "sites_note": c.sites_note(),
        "align": c.align(),
        "align_note": c.align_note(),
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
    if let Some(note) = c.sites_note() {
        return vec![format!("By line of code: {note}.")];
    }
    if !c.a.receipt.facts.sites_sampled {
        return Vec::new();
    }
    if c.sites.changes().is_empty() {
        return vec!["By line of code: no allocation site grows in A or B.".into()];
    }
    c.sites
        .changes()
        .iter()
        .filter_map(|l| {
            let code = l.code.as_ref().map_or(String::new(), |c| format!(" `{c}`"));
            site_sentence(l).map(|t| format!("By line of code: {t}{code}."))
        })
        .collect()
}

/// A line's rate on one side, "1.25 MiB/s" (0 where it is no site there).
fn site_rate(l: &SiteChange, side: Letter) -> String {
    format!("{}/s", bytes(l.rate(side)))
}

/// "sites_pair.py:14 no longer grows in B (1.25 MiB/s in A)"; `None` where
/// it grows on neither side.
pub fn site_sentence(l: &SiteChange) -> Option<String> {
    let (p, a, b) = (&l.place, site_rate(l, Letter::A), site_rate(l, Letter::B));
    Some(match l.kind()? {
        SiteChangeKind::Stopped => format!("{p} no longer grows in B ({a} in A)"),
        SiteChangeKind::Started => format!("{p} grows {b} in B (not in A)"),
        SiteChangeKind::Grows => format!("{p} grows in both: {a} in A, {b} in B"),
        SiteChangeKind::Untold if l.grows(Letter::A) => {
            format!("{p} grows {a} in A; B is too short to tell")
        }
        SiteChangeKind::Untold => format!("{p} grows {b} in B; A is too short to tell"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use flatline_analysis::Verdict;
    use flatline_analysis::compare::site_changes;
    use flatline_analysis::sites::Site;

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
        let said: Vec<String> = c.iter().filter_map(site_sentence).collect();
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
            site_sentence(&c[0]).unwrap(),
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
            site_sentence(&c[0]).unwrap(),
            "ds.py:31 grows 512.0 KiB/s in A; B is too short to tell"
        );
        // Growing nowhere: not listed.
        let flat = [site(1, "/w/ds.py", 31, Verdict::Flat, 0.0, MIB)];
        assert!(site_changes(&flat, &flat).is_empty());
    }
}
