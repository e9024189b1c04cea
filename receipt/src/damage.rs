//! What a recording lost, said before any verdict: a person told "flat"
//! about half a file stops looking. Two ways to lose part of a run: damage
//! in the file ([`Damage`]) and a gap a write fault left while the run went
//! on (a full disk: [`Gaps`]).

use flatline_analysis::summary::DamageNote;
use flatline_format::{Event, EventKind, Gap, Loss, Recording, TailProblemKind};

use crate::fmt::{bytes, thousands};

/// A recording that could not be read whole: what of how much was read.
#[derive(Debug, Clone)]
pub struct Damage {
    /// Seconds of the run the file covers (its footer's, else the last
    /// time it shows); `None` where the end of the file could not be read
    /// ([`Self::unread`]), so its span is not known.
    pub total_s: Option<f64>,
    /// Seconds read: from the start to the last reading, less the losses.
    pub read_s: f64,
    /// Seconds the losses between readings took (the unread rest's are
    /// not known).
    pub lost_s: f64,
    /// Samples lost, where the file says (`None`: not known).
    pub lost_samples: Option<u64>,
    /// The rest of the file from a damaged place on, where no frame after
    /// it could be read (no footer either): its offset and size.
    pub unread: Option<(u64, u64)>,
    pub losses: Vec<Loss>,
}

/// A loss of no samples that still costs more than this (a gap in time)
/// is said first.
pub const HEADLINE_LOSS_S: f64 = 1.0;

impl Damage {
    /// What `rec` lost, if anything (a file that only stops early, as a
    /// killed run's does, lost nothing it had written whole).
    pub fn of(rec: &Recording) -> Option<Self> {
        if !rec.is_damaged() {
            return None;
        }
        let mut losses = rec.losses.clone();
        if losses.is_empty()
            && let Some(t) = rec
                .tail
                .as_ref()
                .filter(|t| t.kind == TailProblemKind::Damaged)
        {
            // A footer that does not match its frames: nothing known lost
            // but the file's integrity.
            losses.push(Loss {
                offset: t.offset,
                bytes: 0,
                samples: None,
                after_ns: rec.t_ns.last().copied(),
                before_ns: None,
                reason: t.reason.clone(),
            });
        }
        let last_t = rec.t_ns.last().copied().unwrap_or(0);
        // The rest of the file, read past by nothing: its span is unknown.
        let unread = losses
            .last()
            .filter(|l| l.before_ns.is_none() && l.bytes > 0 && rec.footer.is_none())
            .map(|l| (l.offset, l.bytes));
        let end_ns = rec
            .footer
            .as_ref()
            .map_or(last_t, |f| f.duration_ns.max(last_t));
        // The time between the readings each loss falls between, counted
        // once where losses fall between the same two.
        let mut spans: Vec<(u64, u64)> = losses
            .iter()
            .filter(|l| l.before_ns.is_some() || unread.is_none())
            .map(|l| (l.after_ns.unwrap_or(0), l.before_ns.unwrap_or(end_ns)))
            .collect();
        spans.sort_unstable();
        let mut lost_ns = 0u64;
        let mut reached = 0u64;
        for (from, to) in spans {
            let from = from.max(reached);
            lost_ns += to.saturating_sub(from);
            reached = reached.max(to);
        }
        let read_samples = rec.thinned.as_ref().map_or(rec.t_ns.len(), |t| t.samples) as u64;
        // Each loss's count where the file says; else the footer's count of
        // every sample written, less those read, where it was read.
        let lost_samples = losses.iter().map(|l| l.samples).sum::<Option<u64>>().or(rec
            .footer
            .as_ref()
            .filter(|_| unread.is_none())
            .map(|f| f.samples.saturating_sub(read_samples)));
        let total_s = unread.is_none().then_some(end_ns as f64 / 1e9);
        let read_s = match total_s {
            Some(t) => (t - lost_ns as f64 / 1e9).max(0.0),
            None => (last_t.saturating_sub(lost_ns)) as f64 / 1e9,
        };
        Some(Self {
            total_s,
            read_s,
            lost_s: lost_ns as f64 / 1e9,
            lost_samples,
            unread,
            losses,
        })
    }

    /// Whether the loss is the headline's first words: it took samples
    /// (or an unknown number of them), more than a second, or the rest of
    /// the file. A lost copy of a frame written twice costs nothing, and is
    /// only listed.
    pub fn in_headline(&self) -> bool {
        self.lost_s > HEADLINE_LOSS_S
            || self.unread.is_some()
            || self.losses.iter().any(|l| l.samples != Some(0))
    }

    /// "Read 0.5 s of a 14.2 s recording: damaged at byte 3568 (a block
    /// of 42 channels in a recording of 38), 13.7 s and 271 samples lost."
    /// Where the rest of the file could not be read, its span is not
    /// known and is never guessed: "Read 24.0 s of this recording: …; the
    /// rest of the file, 15.0 KiB from byte 23049, could not be read."
    pub fn sentence(&self) -> String {
        let samples = match self.lost_samples {
            Some(n) => format!("{} samples", thousands(n)),
            None => "an unknown number of samples".into(),
        };
        // The losses between readings, apart from an unread rest.
        let between = match self.unread {
            Some(_) => &self.losses[..self.losses.len() - 1],
            None => &self.losses[..],
        };
        let damaged = between.first().map(|first| {
            let more = match between.len() {
                1 => String::new(),
                n => format!(" and {} more places", n - 1),
            };
            format!(
                "damaged at byte {}{more} ({}), {:.1} s and {samples} lost",
                first.offset, first.reason, self.lost_s
            )
        });
        let of = match self.total_s {
            Some(t) => format!("of a {t:.1} s recording"),
            None => "of this recording".into(),
        };
        let rest = self.unread.map(|(at, n)| {
            let reason = &self.losses[self.losses.len() - 1].reason;
            format!(
                "the rest of the file, {} from byte {at}, could not be read ({reason})",
                bytes(n as f64)
            )
        });
        let read = self.read_s;
        match (damaged, rest) {
            (Some(d), Some(r)) => format!("Read {read:.1} s {of}: {d}; {r}."),
            (Some(d), None) => format!("Read {read:.1} s {of}: {d}."),
            (None, Some(r)) => format!("Read {read:.1} s {of}; {r}."),
            (None, None) => format!("Read {read:.1} s {of}."),
        }
    }

    /// Each loss, one line each: "1,204 bytes at byte 3568, 10 samples
    /// between 4.0 s and 4.5 s: frame checksum mismatch".
    pub fn lines(&self) -> Vec<String> {
        self.losses.iter().map(|l| l.to_string()).collect()
    }

    /// What the assessment is told of it.
    pub fn note(&self) -> DamageNote {
        DamageNote {
            sentence: self.sentence(),
            lost: self.lines(),
            in_headline: self.in_headline(),
        }
    }

    /// The JSON `recording.losses`.
    pub fn json(&self) -> serde_json::Value {
        serde_json::Value::Array(
            self.losses
                .iter()
                .map(|l| {
                    serde_json::json!({
                        "offset": l.offset,
                        "bytes": l.bytes,
                        "samples": l.samples,
                        "from_s": l.after_ns.map(|t| t as f64 / 1e9),
                        "to_s": l.before_ns.map(|t| t as f64 / 1e9),
                        "reason": l.reason,
                    })
                })
                .collect(),
        )
    }
}

/// The gaps write faults left in a recording while its run went on: the
/// writer notes each in the file once writes work again ([`Gap`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Gaps {
    pub gaps: Vec<Gap>,
}

impl Gaps {
    /// The gaps `events` note, if any; one that begins where the last
    /// ended (a retry that wrote a little, then failed again) is one gap.
    pub fn of(events: &[Event]) -> Option<Self> {
        let mut gaps = Self { gaps: Vec::new() };
        for e in events {
            gaps.take(e);
        }
        (!gaps.gaps.is_empty()).then_some(gaps)
    }

    /// Takes the gap `e` notes, if it is a gap's note (a live stream's, as
    /// it comes).
    pub fn take(&mut self, e: &Event) {
        let EventKind::Note(n) = &e.kind else {
            return;
        };
        let Some(g) = Gap::parse(n) else {
            return;
        };
        match self.gaps.last_mut() {
            Some(last) if g.from_s <= last.to_s + 0.05 && g.cause == last.cause => {
                last.to_s = last.to_s.max(g.to_s);
                last.samples += g.samples;
                last.events += g.events;
            }
            _ => self.gaps.push(g),
        }
    }

    /// Those that meet the part from `from_s` to `to_s` (seconds since the
    /// start), if any.
    pub fn within(mut self, from_s: f64, to_s: f64) -> Option<Self> {
        self.gaps.retain(|g| g.to_s >= from_s && g.from_s <= to_s);
        (!self.gaps.is_empty()).then_some(self)
    }

    /// Seconds and samples lost in all of them.
    pub fn lost(&self) -> (f64, u64) {
        let s = self.gaps.iter().map(|g| (g.to_s - g.from_s).max(0.0)).sum();
        (s, self.gaps.iter().map(|g| g.samples).sum())
    }

    /// "Lost 6.6 s (132 samples, from 2.3 s to 8.9 s) while the disk was
    /// full."
    pub fn sentence(&self) -> String {
        let (s, n) = self.lost();
        let when = match self.gaps.as_slice() {
            [g] => format!(", from {:.1} s to {:.1} s", g.from_s, g.to_s),
            many => format!(", in {} gaps", many.len()),
        };
        let why = while_(&self.gaps[0].cause);
        format!("Lost {s:.1} s ({} samples{when}) {why}.", thousands(n))
    }

    /// What the assessment is told of them: said first where they cost a
    /// sample.
    pub fn note(&self) -> DamageNote {
        DamageNote {
            sentence: self.sentence(),
            lost: self
                .gaps
                .iter()
                .map(|g| {
                    format!(
                        "{} samples and {} events between {:.1} s and {:.1} s: {}",
                        thousands(g.samples),
                        thousands(g.events),
                        g.from_s,
                        g.to_s,
                        g.cause
                    )
                })
                .collect(),
            in_headline: self.lost().1 > 0,
        }
    }
}

/// What a write error was, as a person says it: "while the disk was full".
fn while_(cause: &str) -> String {
    let c = cause.to_ascii_lowercase();
    if c.contains("no space left") {
        "while the disk was full".into()
    } else if c.contains("quota") {
        "while the disk quota was used up".into()
    } else if c.contains("read-only") {
        "while the file system was read-only".into()
    } else {
        format!("while writes failed ({cause})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_is_said_as_what_it_was() {
        let note = |text: &str| Event {
            t_ns: 9_000_000_000,
            kind: EventKind::Note(text.into()),
        };
        let events = [
            note("recording fault: No space left on device (os error 28)"),
            note(
                "recording gap: 132 samples and 0 events lost between 2.3 s and 8.9 s (No space left on device (os error 28))",
            ),
        ];
        let g = Gaps::of(&events).unwrap();
        assert_eq!(
            g.sentence(),
            "Lost 6.6 s (132 samples, from 2.3 s to 8.9 s) while the disk was full."
        );
        assert!(g.note().in_headline);
        assert_eq!(Gaps::of(&events[..1]), None);
        let two = [
            events[1].clone(),
            note(
                "recording gap: 1 samples and 2 events lost between 10.0 s and 10.5 s (Read-only file system (os error 30))",
            ),
        ];
        assert_eq!(
            Gaps::of(&two).unwrap().sentence(),
            "Lost 7.1 s (133 samples, in 2 gaps) while the disk was full."
        );
        // A retry that wrote, then met the full disk again: one gap.
        let again = [
            events[1].clone(),
            note(
                "recording gap: 72 samples and 0 events lost between 8.9 s and 12.5 s (No space left on device (os error 28))",
            ),
        ];
        assert_eq!(
            Gaps::of(&again).unwrap().sentence(),
            "Lost 10.2 s (204 samples, from 2.3 s to 12.5 s) while the disk was full."
        );
        assert_eq!(
            while_("Read-only file system (os error 30)"),
            "while the file system was read-only"
        );
    }
}
