//! Judgments of two runs side by side (`flatline compare A B`, the
//! window's compare mode): which axis lines them up, which lines of code
//! changed, which of their counters' rates differs most and which side's
//! memory grows. Data only: the receipt crate words them
//! (`flatline_receipt::compare`).

use crate::sites::Site;
use crate::{ChannelAnalysis, Verdict};

/// What two runs are lined up by: time since each one's start, training
/// step, or tokens consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Align {
    Time,
    Step,
    Tokens,
}

impl Align {
    /// The name a receipt and the command line give it.
    pub fn name(self) -> &'static str {
        match self {
            Align::Time => "time",
            Align::Step => "step",
            Align::Tokens => "tokens",
        }
    }
}

/// One of the two sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Letter {
    A,
    B,
}

impl Letter {
    pub fn as_str(self) -> &'static str {
        match self {
            Letter::A => "A",
            Letter::B => "B",
        }
    }

    /// The other side.
    pub fn other(self) -> Letter {
        match self {
            Letter::A => Letter::B,
            Letter::B => Letter::A,
        }
    }
}

/// The axis a comparison is drawn and told on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Axis {
    pub align: Align,
    /// The axis asked for and the sides that lack it, where it could not
    /// be had (the comparison fell back to time).
    pub lacking: Option<(Align, Vec<Letter>)>,
}

/// The axis two runs are lined up on: `asked`, else step when both have
/// steps, else time. An axis a side lacks falls back to time, saying which.
/// `steps` and `tokens` say whether A and B have them.
pub fn choose_axis(steps: [bool; 2], tokens: [bool; 2], asked: Option<Align>) -> Axis {
    let lacking = |have: [bool; 2]| -> Vec<Letter> {
        [(have[0], Letter::A), (have[1], Letter::B)]
            .into_iter()
            .filter(|(h, _)| !h)
            .map(|(_, l)| l)
            .collect()
    };
    let both = |have: [bool; 2]| have == [true, true];
    let (align, lacking) = match asked {
        None if both(steps) => (Align::Step, None),
        None | Some(Align::Time) => (Align::Time, None),
        Some(Align::Step) if both(steps) => (Align::Step, None),
        Some(Align::Step) => (Align::Time, Some((Align::Step, lacking(steps)))),
        Some(Align::Tokens) if both(tokens) => (Align::Tokens, None),
        Some(Align::Tokens) => (Align::Time, Some((Align::Tokens, lacking(tokens)))),
    };
    Axis { align, lacking }
}

/// Whether the two sides say something different of a channel: its kind,
/// verdict, or any of baseline, final, drift and slope (a recording
/// against itself differs nowhere).
pub fn differs(a: &ChannelAnalysis, b: &ChannelAnalysis) -> bool {
    let same = |x: f64, y: f64| x == y || (x.is_nan() && y.is_nan());
    a.kind != b.kind
        || a.verdict != b.verdict
        || !same(a.baseline, b.baseline)
        || !same(a.final_value, b.final_value)
        || !same(a.drift, b.drift)
        || !same(a.slope_per_s, b.slope_per_s)
}

/// A counter both sides have, with its rate a second on each.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    pub a: f64,
    pub b: f64,
}

/// Of the counters both sides have (`rates`), the one whose rate differs
/// most, relatively, where one side runs at 1/s or more and they differ by
/// half or more: its position in `rates`.
pub fn widest_rate(rates: &[Rates]) -> Option<usize> {
    rates
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let top = r.a.abs().max(r.b.abs());
            let rel = (r.b - r.a).abs() / top;
            (top >= 1.0 && rel >= 0.5).then_some((i, rel, top))
        })
        .max_by(|x, y| x.1.total_cmp(&y.1).then(x.2.total_cmp(&y.2)))
        .map(|(i, ..)| i)
}

/// One side's memory as its answer has it: the level channel it tells
/// first as growing, and whether its program holds flat while it grows
/// (the allocator keeps what was freed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grower {
    pub channel: String,
    pub allocator_keeps: bool,
}

/// Which sides' memory grows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Memory {
    /// Neither grows.
    Flat,
    /// One side grows; the other side's same channel is told beside it.
    One(Letter, Grower),
    Both(Grower, Grower),
}

/// Which sides' memory grows, from each side's first growth (`None`: flat).
pub fn memory(a: Option<Grower>, b: Option<Grower>) -> Memory {
    match (a, b) {
        (None, None) => Memory::Flat,
        (Some(g), None) => Memory::One(Letter::A, g),
        (None, Some(g)) => Memory::One(Letter::B, g),
        (Some(x), Some(y)) => Memory::Both(x, y),
    }
}

/// What the two sides' allocation sites (`watch --sites`) allow.
#[derive(Debug, Clone, PartialEq)]
pub enum Sites {
    /// Neither side sampled sites.
    Neither,
    /// Only this side sampled them: lines cannot be compared.
    Only(Letter),
    /// Both did: the lines whose sites grow on either side, the largest
    /// change of rate first.
    Both(Vec<SiteChange>),
}

impl Sites {
    /// Lines up the sides' sites, where both sampled them.
    pub fn of(a: Option<&[Site]>, b: Option<&[Site]>) -> Sites {
        match (a, b) {
            (Some(a), Some(b)) => Sites::Both(site_changes(a, b)),
            (None, None) => Sites::Neither,
            (Some(_), None) => Sites::Only(Letter::A),
            (None, Some(_)) => Sites::Only(Letter::B),
        }
    }

    /// The changed lines (none unless both sides sampled sites).
    pub fn changes(&self) -> &[SiteChange] {
        match self {
            Sites::Both(v) => v,
            _ => &[],
        }
    }
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
    fn grows_on(s: Option<SiteSide>) -> bool {
        s.is_some_and(|s| s.verdict.is_growth())
    }

    fn untold(s: Option<SiteSide>) -> bool {
        s.is_some_and(|s| s.verdict == Verdict::Insufficient)
    }

    /// Whether it grows on this side.
    pub fn grows(&self, side: Letter) -> bool {
        Self::grows_on(self.side(side))
    }

    /// The line on one side.
    pub fn side(&self, side: Letter) -> Option<SiteSide> {
        match side {
            Letter::A => self.a,
            Letter::B => self.b,
        }
    }

    /// `None` where it grows on neither side.
    pub fn kind(&self) -> Option<SiteChangeKind> {
        let (a, b) = (Self::grows_on(self.a), Self::grows_on(self.b));
        Some(match (a, b) {
            (true, true) => SiteChangeKind::Grows,
            (true, false) if Self::untold(self.b) => SiteChangeKind::Untold,
            (false, true) if Self::untold(self.a) => SiteChangeKind::Untold,
            (true, false) => SiteChangeKind::Stopped,
            (false, true) => SiteChangeKind::Started,
            (false, false) => return None,
        })
    }

    /// Bytes a second its live bytes grow on one side (0 where it is not a
    /// site there).
    pub fn rate(&self, side: Letter) -> f64 {
        self.side(side).map_or(0.0, |s| s.growth_per_s)
    }

    /// How much its growth changed, for the order of a list.
    fn change(&self) -> f64 {
        (self.rate(Letter::B) - self.rate(Letter::A)).abs()
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
