//! Progress bars read as they are drawn: tqdm's (and so a Hugging Face
//! Trainer's, Accelerate's and Lightning's default bar) and rich's (and so
//! Lightning's `RichProgressBar`).
//!
//! [`parse_bar`] reads one drawn state of a bar (the text between two `\r`,
//! or a whole line where a bar is printed a line at a time, as through a
//! logger) and [`Bars`] turns a job's bars into steps and channels:
//!
//! - **The step bar** is the first bar that counts iterations (its unit is
//!   `it`, `step`, `batch` or `iter`), is not an evaluation bar and is not
//!   an outer epoch loop, once its count passes 0. Its count is the step;
//!   when its count falls (Lightning resets its bar each epoch, a loop makes
//!   a new bar per epoch), the counts add up, so steps keep rising. Its rate
//!   is `progress.it_per_s` (`s/it` is turned over; another unit `u` gives
//!   `progress.u_per_s`), its postfix's numbers (`loss=0.150`) `log.<key>`,
//!   and a note says which bar gave the steps and its total.
//! - **Evaluation bars** are told by their description (`eval`, `valid`,
//!   `test`, `predict`, `sanity`, `infer` in it, any case: Lightning's
//!   "Validation DataLoader 0", "Sanity Checking"): their count is
//!   `log.progress`, and each pass is marked with the description.
//! - **Any other bar** while a step bar exists (a Hugging Face Trainer's
//!   evaluation bar has no description; it is drawn beside the training bar)
//!   is `log.progress` too: a second bar never moves the steps.
//! - **An outer epoch loop**, a bar described as exactly `Epoch` or
//!   `Epochs`, counts epochs: `log.epoch`. (`Epoch 3`, Lightning's, names
//!   the epoch its batches belong to: a step bar.)
//! - **A bar of other things** (tqdm's `unit="tok"`, bytes) gives its count
//!   as `progress.<unit>` and its rate as `progress.<unit>_per_s`, never
//!   steps.
//!
//! A bar without a count (rich's default columns show a percentage only)
//! says nothing.

use std::sync::LazyLock;

use flatline_format::Unit;
use regex::Regex;

use super::keys::{leaf, unit_of};

/// One drawn state of a progress bar.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// Its description, as printed (`Epoch 0`, `Validation DataLoader 0`;
    /// empty for a bare `tqdm(total=…)`).
    pub desc: String,
    /// Its count.
    pub n: f64,
    /// Its total, where it has one.
    pub total: Option<f64>,
    /// What it counts: `it` unless told otherwise.
    pub unit: String,
    /// Units a second, where it says (`?it/s` on the first draw does not).
    pub rate: Option<f64>,
    /// Numbers from its postfix (`loss=0.150`, rich's `loss: 0.15`).
    pub postfix: Vec<(String, f64)>,
}

/// tqdm's default layout: `{desc}: {pct}%|{bar}| {n}/{total} [{meta}]`
/// (the percentage is missing while the total is unknown).
static TQDM: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?P<desc>.*?):?\s*(?:\d{1,3}%)?\|[^|]*\|\s*(?P<n>[0-9.]+[kMGTPEZY]?)/(?P<total>[0-9.]+[kMGTPEZY]?|\?)(?P<unit>[A-Za-z]*)\s*\[(?P<meta>[^\]]*)\]",
    )
    .expect("a valid pattern")
});

/// tqdm without a total: `{desc}: {n}{unit} [{elapsed}, {rate}]`.
static TQDM_OPEN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?P<desc>.*?):?\s*(?P<n>[0-9.]+[kMGTPEZY]?)(?P<unit>[A-Za-z]+) \[(?P<meta>\d+:\d\d(?::\d\d)?,[^\]]*)\]",
    )
    .expect("a valid pattern")
});

/// rich: `{desc} ━━━━╺━━━ {n}/{total} …` (a count column after the bar).
static RICH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<desc>.*?)\s*[━╸╺╾╼]+\s+(?P<n>[0-9.]+)/(?P<total>[0-9.]+|\?)\b(?P<rest>.*)$")
        .expect("a valid pattern")
});

/// A rate: `19.93it/s`, `1.67ktok/s`, `?it/s`, or its inverse `1.20s/it`.
static RATE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?:(?P<n>[0-9.]+|\?)(?P<prefix>[kMGTPEZY]?)(?P<unit>[A-Za-z_]+)/s\b)|(?:(?P<inv>[0-9.]+)s/(?P<iunit>[A-Za-z_]+))",
    )
    .expect("a valid pattern")
});

/// rich's `key: number` columns (Lightning's metrics after the speed).
static COLON_PAIRS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?P<k>[A-Za-z_][A-Za-z0-9_/]*): (?P<v>-?[0-9.]+(?:e-?[0-9]+)?)\b")
        .expect("a valid pattern")
});

/// Removes terminal escape sequences (colours, cursor moves, line erases).
pub fn strip_escapes(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains('\u{1b}') {
        return text.into();
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.next() {
            // CSI: parameters, then one final byte in @..~.
            Some('[') => {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            // OSC: up to BEL or ESC \.
            Some(']') => {
                while let Some(c) = chars.next() {
                    if c == '\u{7}' || c == '\u{1b}' && chars.next_if_eq(&'\\').is_some() {
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out.into()
}

/// `1.20k` → 1200.
fn scaled(s: &str) -> Option<f64> {
    let (digits, factor) = match s.chars().last()? {
        'k' => (&s[..s.len() - 1], 1e3),
        'M' => (&s[..s.len() - 1], 1e6),
        'G' => (&s[..s.len() - 1], 1e9),
        'T' => (&s[..s.len() - 1], 1e12),
        'P' => (&s[..s.len() - 1], 1e15),
        'E' => (&s[..s.len() - 1], 1e18),
        'Z' => (&s[..s.len() - 1], 1e21),
        'Y' => (&s[..s.len() - 1], 1e24),
        _ => (s, 1.0),
    };
    let v: f64 = digits.parse().ok()?;
    v.is_finite().then_some(v * factor)
}

/// The rate in a bar's text, as units a second, and its unit.
fn rate(text: &str) -> Option<(Option<f64>, String)> {
    let c = RATE.captures(text)?;
    if let Some(inv) = c.name("inv") {
        let secs: f64 = inv.as_str().parse().ok()?;
        return Some(((secs > 0.0).then(|| 1.0 / secs), c["iunit"].to_owned()));
    }
    let v = match &c["n"] {
        "?" => None,
        n => scaled(&format!("{n}{}", &c["prefix"])),
    };
    Some((v, c["unit"].to_owned()))
}

/// One drawn state of a bar, or None where the text is not one. Escape
/// sequences are ignored; the text may end with `\r` or `\n`.
pub fn parse_bar(raw: &str) -> Option<Bar> {
    // Cheap refusals first: every line a job prints passes here.
    if !raw.contains('/') {
        return None;
    }
    let text = strip_escapes(raw);
    let text = text.trim_matches(|c: char| c.is_whitespace());
    if let Some(c) = TQDM.captures(text).or_else(|| TQDM_OPEN.captures(text)) {
        let meta = &c["meta"];
        let mut parts = meta.split(',').map(str::trim);
        parts.next(); // elapsed<remaining
        let (rate, rate_unit) = parts.next().and_then(rate).unwrap_or((None, String::new()));
        let postfix = parts
            .filter_map(|p| p.split_once('='))
            .filter_map(|(k, v)| Some((leaf(k), v.trim().parse::<f64>().ok()?)))
            .filter(|(k, v)| !k.is_empty() && v.is_finite())
            .collect();
        let unit = match c.name("unit").map(|u| u.as_str()) {
            Some(u) if !u.is_empty() => u.to_owned(),
            _ if !rate_unit.is_empty() => rate_unit,
            _ => "it".to_owned(),
        };
        return Some(Bar {
            desc: c["desc"].trim().to_owned(),
            n: scaled(&c["n"])?,
            total: c.name("total").and_then(|t| scaled(t.as_str())),
            unit,
            rate,
            postfix,
        });
    }
    let c = RICH.captures(text)?;
    let rest = &c["rest"];
    let (rate, unit) = rate(rest).unwrap_or((None, "it".to_owned()));
    let postfix = COLON_PAIRS
        .captures_iter(rest)
        .filter_map(|p| Some((leaf(&p["k"]), p["v"].parse::<f64>().ok()?)))
        .filter(|(k, v)| !k.is_empty() && v.is_finite())
        .collect();
    Some(Bar {
        desc: c["desc"].trim().to_owned(),
        n: c["n"].parse().ok()?,
        total: c["total"].parse().ok(),
        unit,
        rate,
        postfix,
    })
}

/// Words in a description that make a bar an evaluation's.
pub const EVAL_WORDS: [&str; 6] = ["eval", "valid", "test", "predict", "sanity", "infer"];

/// Units whose count is a training step.
pub const STEP_UNITS: [&str; 8] = [
    "it", "its", "step", "steps", "batch", "batches", "iter", "iters",
];

/// Postfix keys that are not metrics (Lightning's logger version).
const NOT_METRICS: [&str; 1] = ["v_num"];

/// What a bar's draw gives.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    /// The step, where this is the step bar's draw.
    pub step: Option<u64>,
    /// `log.<key>` metrics (the postfix, `log.progress`, `log.epoch`).
    pub values: Vec<(String, f64, Unit)>,
    /// Channels of their own (`progress.it_per_s`).
    pub progress: Vec<(String, f64, Unit)>,
    /// An evaluation bar's first draw of a pass: its description.
    pub marker: Option<String>,
    /// Which bar gives the steps, told once when it is chosen.
    pub note: Option<String>,
}

/// A bar seen before: by its description without digits and its total.
#[derive(Debug)]
struct Seen {
    key: (String, Option<u64>),
    last_n: f64,
    /// Counts of the passes before this one (the step bar's restarts).
    offset: u64,
    /// This pass has been marked (an evaluation bar's).
    marked: bool,
}

/// The job's bars so far: which one gives the steps, and where each was.
#[derive(Debug, Default)]
pub struct Bars {
    seen: Vec<Seen>,
    step_bar: Option<usize>,
}

/// Most bars remembered; past it the oldest others are forgotten.
const SEEN: usize = 64;

impl Bars {
    /// What one draw of a bar gives.
    pub fn read(&mut self, bar: &Bar) -> Reading {
        let mut out = Reading::default();
        let desc = bar.desc.to_ascii_lowercase();
        let key = (
            desc.chars()
                .filter(|c| !c.is_ascii_digit())
                .collect::<String>()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
            bar.total.map(|t| t.round() as u64),
        );
        let at = match self.seen.iter().position(|s| s.key == key) {
            Some(at) => at,
            None => {
                if self.seen.len() >= SEEN
                    && let Some(old) = (0..self.seen.len()).find(|&i| Some(i) != self.step_bar)
                {
                    self.seen.remove(old);
                    if let Some(s) = self.step_bar.as_mut()
                        && *s > old
                    {
                        *s -= 1;
                    }
                }
                self.seen.push(Seen {
                    key,
                    last_n: f64::NAN,
                    offset: 0,
                    marked: false,
                });
                self.seen.len() - 1
            }
        };
        let seen = &mut self.seen[at];
        // A count that falls is a new pass of the same bar.
        if bar.n < seen.last_n {
            seen.offset += seen.last_n.max(0.0) as u64;
            seen.marked = false;
        }
        seen.last_n = bar.n;
        // An evaluation is marked once a pass, when it first moves (its
        // bar is often drawn at 0 under two or three names first).
        let mark = bar.n > 0.0 && !std::mem::replace(&mut seen.marked, bar.n > 0.0);
        let unit = bar.unit.to_ascii_lowercase();
        let eval = EVAL_WORDS.iter().any(|w| desc.contains(w));
        let epochs = matches!(desc.trim(), "epoch" | "epochs");
        if !STEP_UNITS.contains(&unit.as_str()) {
            let u = leaf(&bar.unit);
            out.progress
                .push((format!("progress.{u}"), bar.n, Unit::Count));
            if let Some(r) = bar.rate {
                out.progress
                    .push((format!("progress.{u}_per_s"), r, Unit::PerSecond));
            }
        } else if eval {
            out.values.push(("progress".into(), bar.n, Unit::Count));
            if mark {
                out.marker = Some(bar.desc.clone());
            }
        } else if epochs {
            out.values.push(("epoch".into(), bar.n, Unit::Number));
        } else if self.step_bar.is_none() && bar.n > 0.0 || self.step_bar == Some(at) {
            if self.step_bar.is_none() {
                self.step_bar = Some(at);
                let which = match bar.desc.as_str() {
                    "" => "the progress bar with no description".to_owned(),
                    d => format!("the progress bar {d:?}"),
                };
                out.note = Some(match bar.total {
                    Some(t) => format!("steps from {which} (total {t}; a restarted bar adds on)"),
                    None => format!("steps from {which} (no total; a restarted bar adds on)"),
                });
            }
            let seen = &self.seen[at];
            out.step = Some(seen.offset + bar.n.max(0.0) as u64);
            if let Some(r) = bar.rate {
                let u = if unit == "its" {
                    "it".into()
                } else {
                    leaf(&unit)
                };
                out.progress
                    .push((format!("progress.{u}_per_s"), r, Unit::PerSecond));
            }
            for (k, v) in &bar.postfix {
                if !NOT_METRICS.contains(&k.as_str()) {
                    out.values.push((k.clone(), *v, unit_of(k)));
                }
            }
        } else if self.step_bar.is_some() {
            out.values.push(("progress".into(), bar.n, Unit::Count));
        }
        // (A bar at 0 before any has moved may yet be the step bar: nothing.)
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixtures: real bars' bytes, captured by `scripts/capture-bars.py`.
    fn fixture(name: &str) -> Vec<u8> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/bars")
            .join(name);
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// Every drawn state in a stream: the text between `\r`s and `\n`s.
    fn draws(bytes: &[u8]) -> Vec<Bar> {
        String::from_utf8_lossy(bytes)
            .split(['\r', '\n'])
            .filter_map(parse_bar)
            .collect()
    }

    /// Each draw's reading, through one Bars.
    fn readings(bytes: &[u8]) -> Vec<Reading> {
        let mut bars = Bars::default();
        draws(bytes).iter().map(|b| bars.read(b)).collect()
    }

    fn steps(r: &[Reading]) -> Vec<u64> {
        let mut out: Vec<u64> = r.iter().filter_map(|r| r.step).collect();
        out.dedup();
        out
    }

    fn value(r: &Reading, name: &str) -> Option<f64> {
        r.values
            .iter()
            .chain(&r.progress)
            .find(|(k, _, _)| k == name)
            .map(|(_, v, _)| *v)
    }

    #[test]
    fn tqdm_states_are_read_whole() {
        let b = parse_bar(" 17%|█▋        | 10/60 [00:00<00:02, 19.61it/s]").unwrap();
        assert_eq!(
            (b.desc.as_str(), b.n, b.total, b.unit.as_str(), b.rate),
            ("", 10.0, Some(60.0), "it", Some(19.61))
        );
        let b = parse_bar(
            "Epoch 0:  15%|█▌        | 3/20 [00:00<00:00, 24.76it/s, v_num=0, loss=1.500]",
        )
        .unwrap();
        assert_eq!(b.desc, "Epoch 0");
        assert_eq!(b.postfix, [("v_num".into(), 0.0), ("loss".into(), 1.5)]);
        let b = parse_bar("train:  33%|███▎      | 1.00k/3.00k [00:00<00:01, 1.66ktok/s]").unwrap();
        assert_eq!(
            (b.n, b.total, b.unit.as_str(), b.rate),
            (1000.0, Some(3000.0), "tok", Some(1660.0))
        );
        let b = parse_bar("train:  33%|███▎      | 1/3 [00:01<00:02,  1.20s/it]").unwrap();
        assert!((b.rate.unwrap() - 1.0 / 1.2).abs() < 1e-12);
        let b = parse_bar("Training: |          | 0/? [00:00<?, ?it/s]").unwrap();
        assert_eq!((b.total, b.rate), (None, None));
        let b = parse_bar("Training: 17it [00:02,  8.50it/s]").unwrap();
        assert_eq!(
            (b.desc.as_str(), b.n, b.total, b.rate),
            ("Training", 17.0, None, Some(8.5))
        );
        // Escapes (a nested bar's cursor move, rich's colours) are not text.
        let b = parse_bar("\u{1b}[2KEpoch 0 \u{1b}[91m━━━━\u{1b}[0m\u{1b}[90m╺━━━\u{1b}[0m \u{1b}[32m 5/30\u{1b}[0m  \u{1b}[36m0:00:02\u{1b}[0m").unwrap();
        assert_eq!(
            (b.desc.as_str(), b.n, b.total),
            ("Epoch 0", 5.0, Some(30.0))
        );
        let b = parse_bar(
            "Epoch 0/9 ━━━━━━━━╺━━━ 12/50 0:00:03 • 0:00:10 5.12it/s v_num: 0 loss: 1.23",
        )
        .unwrap();
        assert_eq!(
            (b.desc.as_str(), b.n, b.total, b.rate),
            ("Epoch 0/9", 12.0, Some(50.0), Some(5.12))
        );
        assert_eq!(b.postfix, [("v_num".into(), 0.0), ("loss".into(), 1.23)]);
        // Lines that are not bars.
        for text in [
            "iter 100: loss 2.3456, time 30.12ms, mfu 5.00%",
            "{'loss': 1.5, 'epoch': 1.0}",
            "Downloading shards: 3/8",
            "step 3/100 loss=2.1",
            "                                             \u{1b}[A",
            "",
        ] {
            assert_eq!(parse_bar(text), None, "{text:?}");
        }
    }

    #[test]
    fn a_hugging_face_trainer_s_bar_gives_60_steps_and_its_evaluations_do_not() {
        let r = readings(&fixture("hf.stderr"));
        let s = steps(&r);
        assert_eq!(s.last(), Some(&60));
        assert!(s.windows(2).all(|w| w[0] < w[1]), "steps rise: {s:?}");
        // The evaluation bars (no description, 8 long, drawn beside the
        // training bar) are progress, not steps.
        let eval: Vec<f64> = r.iter().filter_map(|r| value(r, "progress")).collect();
        assert_eq!(eval, [0.0, 4.0, 8.0, 0.0, 4.0, 8.0]);
        let rates: Vec<f64> = r
            .iter()
            .filter_map(|r| value(r, "progress.it_per_s"))
            .collect();
        assert!(
            rates.len() >= 28 && rates.iter().all(|&x| (10.0..25.0).contains(&x)),
            "{rates:?}"
        );
        let notes: Vec<&String> = r.iter().filter_map(|r| r.note.as_ref()).collect();
        assert_eq!(
            notes,
            ["steps from the progress bar with no description (total 60; a restarted bar adds on)"]
        );
    }

    #[test]
    fn nested_bars_count_the_inner_loop_and_the_outer_epochs() {
        let r = readings(&fixture("nested.stderr"));
        let s = steps(&r);
        assert_eq!(s.last(), Some(&60), "3 epochs of 20: {s:?}");
        assert!(s.windows(2).all(|w| w[0] < w[1]), "{s:?}");
        let epochs: Vec<f64> = r.iter().filter_map(|r| value(r, "epoch")).collect();
        assert_eq!(epochs.first(), Some(&0.0));
        assert_eq!(epochs.last(), Some(&3.0));
    }

    #[test]
    fn lightning_s_bar_adds_its_epochs_and_marks_its_validations() {
        let r = readings(&fixture("lightning.stdout"));
        let s = steps(&r);
        assert_eq!(s.last(), Some(&60), "{s:?}");
        assert!(s.windows(2).all(|w| w[0] < w[1]), "{s:?}");
        let marks: Vec<&str> = r.iter().filter_map(|r| r.marker.as_deref()).collect();
        // Each validation once, though its bar is drawn under three names
        // (the sanity check's bar never moved before it was closed).
        assert_eq!(marks, ["Validation DataLoader 0"; 3]);
        // The postfix's loss is a metric; the logger's version is not.
        let losses: Vec<f64> = r.iter().filter_map(|r| value(r, "loss")).collect();
        assert_eq!(losses.last(), Some(&0.05));
        assert!(r.iter().all(|r| value(r, "v_num").is_none()));
        assert!(
            r.iter()
                .filter_map(|r| r.note.as_ref())
                .any(|n| n.contains("\"Epoch 0\" (total 20;"))
        );
    }

    #[test]
    fn a_bar_printed_a_line_at_a_time_through_a_logger_still_counts() {
        let r = readings(&fixture("lines.stderr"));
        assert_eq!(steps(&r), [13, 26, 39, 40]);
    }

    #[test]
    fn a_bar_of_tokens_is_not_steps_and_seconds_per_step_turn_over() {
        let r = readings(&fixture("units.stderr"));
        assert_eq!(steps(&r), [1, 2, 3], "the tok bar gives no steps");
        let toks: Vec<f64> = r.iter().filter_map(|r| value(r, "progress.tok")).collect();
        assert_eq!(toks.last(), Some(&3000.0));
        assert!(
            r.iter()
                .any(|r| value(r, "progress.tok_per_s") == Some(1660.0))
        );
        let slow: Vec<f64> = r
            .iter()
            .filter_map(|r| value(r, "progress.it_per_s"))
            .collect();
        assert!(
            slow.iter().all(|&x| (x - 1.0 / 1.2).abs() < 1e-9),
            "{slow:?}"
        );
    }

    #[test]
    fn rich_bars_in_a_pipe_and_in_a_terminal() {
        // Through a pipe rich draws once, at the end.
        assert_eq!(steps(&readings(&fixture("rich.stdout"))), [30]);
        let s = steps(&readings(&fixture("rich-terminal.stdout")));
        assert_eq!(s.last(), Some(&30));
        assert!(s.len() > 5 && s.windows(2).all(|w| w[0] < w[1]), "{s:?}");
    }
}
