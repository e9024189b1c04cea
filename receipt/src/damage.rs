//! What a damaged recording lost, said before any verdict: a person told
//! "flat" about half a file stops looking.

use flatline_telemetry::recording::{Loss, Recording, TailProblemKind};

/// A recording that could not be read whole: what of how much was read.
#[derive(Debug, Clone)]
pub struct Damage {
    /// Seconds of the run the file covers (its footer's, else the last
    /// time it shows), and the seconds its losses took.
    pub total_s: f64,
    pub lost_s: f64,
    /// Samples lost, where the file says (`None`: some loss's count is
    /// unknown).
    pub lost_samples: Option<u64>,
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
        let end_ns = rec
            .footer
            .as_ref()
            .map_or(last_t, |f| f.duration_ns.max(last_t));
        let lost_ns: u64 = losses
            .iter()
            .map(|l| {
                let to = l.before_ns.unwrap_or(end_ns);
                to.saturating_sub(l.after_ns.unwrap_or(0))
            })
            .sum();
        let lost_samples = losses.iter().map(|l| l.samples).sum();
        Some(Self {
            total_s: end_ns as f64 / 1e9,
            lost_s: lost_ns as f64 / 1e9,
            lost_samples,
            losses,
        })
    }

    /// Whether the loss is the headline's first words: it took samples
    /// (or an unknown number of them), or more than a second. A lost copy
    /// of a frame written twice costs nothing, and is only listed.
    pub fn in_headline(&self) -> bool {
        self.lost_s > HEADLINE_LOSS_S || self.losses.iter().any(|l| l.samples != Some(0))
    }

    /// "Read 0.5 s of a 14.2 s recording: damaged at byte 3568 (a block
    /// of 42 channels in a recording of 38), 13.7 s and 271 samples lost."
    pub fn sentence(&self) -> String {
        let first = &self.losses[0];
        let read = (self.total_s - self.lost_s).max(0.0);
        let samples = match self.lost_samples {
            Some(n) => format!("{} samples", crate::fmt::thousands(n)),
            None => "samples".into(),
        };
        let more = match self.losses.len() {
            1 => String::new(),
            n => format!(" and {} more places", n - 1),
        };
        format!(
            "Read {read:.1} s of a {:.1} s recording: damaged at byte {}{more} ({}), {:.1} s and {samples} lost.",
            self.total_s, first.offset, first.reason, self.lost_s
        )
    }

    /// Each loss, one line each: "1,204 bytes at byte 3568, 10 samples
    /// between 4.0 s and 4.5 s: frame checksum mismatch".
    pub fn lines(&self) -> Vec<String> {
        self.losses.iter().map(|l| l.to_string()).collect()
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
