//! [`LiveRun`]: a live stream held where it is read, for a consumer with no
//! window of its own (the exporter, its Prometheus, OTLP and alerts): the
//! stream's schema, its live analyses, a bounded window of its readings and
//! of the events that tell its process tree and deaths, and the one answer
//! made from them once per refresh that changed something. Surfaces read
//! [`LiveRun::answer`] and [`LiveRun::facts`]; none of them calls a step.

use std::collections::VecDeque;
use std::time::Duration;

use super::reading::{self, Facts, Input, Lost, Words};
use super::summary::Answer;
use super::{ChannelAnalysis, LiveAnalysis};
use flatline_format::{ChannelSpec, Event, EventKind, HostFacts, Schema};

/// The most readings kept per channel: past it, neighbouring readings are
/// merged two into one (the first and the latest are always kept), so the
/// window covers the whole stream at a coarser grain.
pub const WINDOW: usize = 2048;

/// The most events kept: the tree's starts and exits, the facts and the
/// notes that tell why sites were refused; the oldest go first.
pub const EVENTS: usize = 4096;

/// A live stream and its answer (see the module's documentation).
#[derive(Debug, Clone, Default)]
pub struct LiveRun {
    schema: Schema,
    live: LiveAnalysis,
    root: Option<u32>,
    rank: Option<String>,
    /// Kept readings' times (stream seconds) and each channel's readings,
    /// aligned with them (`NaN`: none).
    t: Vec<f64>,
    columns: Vec<Vec<f64>>,
    /// Readings merged into each kept one, and how many the last has.
    stride: u64,
    in_last: u64,
    events: VecDeque<Event>,
    first_s: Option<f64>,
    /// What changed since the answer was made.
    changed: bool,
    answer: Option<(Facts, Answer)>,
}

impl LiveRun {
    /// A stream of the host `host`, whose watched process is `root` and
    /// rank `rank`, where they are known.
    pub fn new(host: &HostFacts, root: Option<u32>, rank: Option<String>) -> Self {
        let mut live = LiveAnalysis::new(&[]);
        live.set_host(host);
        LiveRun {
            live,
            root,
            rank,
            stride: 1,
            ..Self::default()
        }
    }

    /// Channels that join the stream.
    pub fn add_channels(&mut self, specs: &[ChannelSpec]) {
        self.live.add_channels(specs);
        for spec in specs {
            self.schema.channels.push(spec.clone());
            self.columns.push(vec![f64::NAN; self.t.len()]);
        }
        self.changed = true;
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The live analyses (each channel's, its latest value and limit).
    pub fn live(&self) -> &LiveAnalysis {
        &self.live
    }

    /// One sample: `value(i)` is channel `i`'s reading (`NaN`: none),
    /// `steps` and `tokens` the training axes at that moment.
    pub fn push(&mut self, t_s: f64, value: impl Fn(usize) -> f64, steps: f64, tokens: f64) {
        self.live.push(t_s, &value, steps, tokens);
        self.first_s.get_or_insert(t_s);
        if self.t.is_empty() || self.in_last >= self.stride {
            if self.t.len() == WINDOW {
                self.halve();
            }
            self.t.push(t_s);
            for (i, c) in self.columns.iter_mut().enumerate() {
                c.push(value(i));
            }
            self.in_last = 1;
        } else {
            // Merged into the last kept reading: its time, and each
            // channel's latest reading (a slow probe's channel reads only
            // now and then, so a merge never hides what it last read).
            *self.t.last_mut().expect("kept") = t_s;
            for (i, c) in self.columns.iter_mut().enumerate() {
                let v = value(i);
                if v.is_finite() {
                    *c.last_mut().expect("kept") = v;
                }
            }
            self.in_last += 1;
        }
        self.changed = true;
    }

    /// Merges each two neighbouring kept readings into one but the first,
    /// which stays as it was read.
    fn halve(&mut self) {
        let merge = |v: &mut Vec<f64>, latest: fn(f64, f64) -> f64| {
            let mut out = Vec::with_capacity(WINDOW / 2 + 1);
            out.push(v[0]);
            for pair in v[1..].chunks(2) {
                out.push(match pair {
                    [a, b] => latest(*a, *b),
                    [a] => *a,
                    _ => unreachable!("chunks of two"),
                });
            }
            *v = out;
        };
        merge(&mut self.t, |_, b| b);
        for c in &mut self.columns {
            merge(c, |a, b| if b.is_finite() { b } else { a });
        }
        self.stride *= 2;
        self.in_last = self.stride;
    }

    /// An event of the stream: the tree's starts and exits, the facts
    /// (exits by signal, the kernel's OOM kills) and the notes a surface
    /// reads are kept, at most [`EVENTS`].
    pub fn take_event(&mut self, e: &Event) {
        self.live.take_event(e, self.first_s.unwrap_or(0.0));
        let kept = match &e.kind {
            EventKind::ProcessStarted { .. }
            | EventKind::ProcessExited { .. }
            | EventKind::TargetExited { .. }
            | EventKind::Fact { .. } => true,
            EventKind::Note(n) => n.starts_with(reading::SITES_REFUSED),
            _ => false,
        };
        if kept {
            if self.events.len() == EVENTS {
                self.events.pop_front();
            }
            self.events.push_back(e.clone());
            self.changed = true;
        }
    }

    /// Refreshes the analyses (within `budget`; all with `None`) and, where
    /// anything changed, the answer: at most once per call.
    pub fn refresh(&mut self, budget: Option<Duration>, words: Words<'_>) {
        self.events.make_contiguous();
        let (events, _) = self.events.as_slices();
        let names = self.schema.channels.iter().map(|c| c.name.as_str());
        let (schema, columns) = (&self.schema, &self.columns);
        let column = |n: &str| schema.index_of(n).map(|i| columns[i].as_slice());
        let ended = events
            .iter()
            .any(|e| matches!(e.kind, EventKind::TargetExited { .. }));
        if ended {
            self.live.find_end(events, &self.t, names, column);
        }
        self.live.refresh(budget);
        if !self.changed && self.answer.is_some() {
            return;
        }
        self.changed = false;
        let (events, _) = self.events.as_slices();
        let input = Input {
            schema: &self.schema,
            events,
            host: self.live.host(),
            launched: self.live.launched(),
            root: self.root,
            rank: self.rank.as_deref(),
            t: &self.t,
            column: |i: usize| self.columns[i].as_slice(),
        };
        let end = self
            .live
            .until()
            .map_or(self.t.len(), |u| self.t.partition_point(|&t| t < u));
        let live = &self.live;
        let analysis = |i: usize| -> Option<(&ChannelAnalysis, _)> {
            Some((live.analysis(i)?, live.limit(i).map(|l| l.1)))
        };
        let answer = reading::answer_live(&input, end, analysis, &Lost::default(), words);
        self.answer = Some(answer);
    }

    /// The one answer, as of the last refresh (`None` before it).
    pub fn answer(&self) -> Option<&Answer> {
        self.answer.as_ref().map(|a| &a.1)
    }

    /// The tree, the deaths and the sites the answer was made with.
    pub fn facts(&self) -> Option<&Facts> {
        self.answer.as_ref().map(|a| &a.0)
    }

    /// Readings kept, for a test of the window's bound.
    #[cfg(test)]
    fn kept(&self) -> usize {
        self.t.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flatline_format::{Group, Kind, Unit};

    fn words() -> Words<'static> {
        Words {
            value: &|v, _| format!("{v:.0}"),
            duration: &|s| format!("{s:.0} s"),
        }
    }

    fn spec(name: &str) -> ChannelSpec {
        ChannelSpec::new(name, Unit::Bytes, Group::Memory).with_kind(Kind::Level)
    }

    /// The window stays within its bound over a long stream and keeps its
    /// first reading and the latest of a channel read only now and then.
    #[test]
    fn the_window_is_bounded_and_keeps_the_ends() {
        let mut run = LiveRun::new(&HostFacts::default(), None, None);
        run.add_channels(&[spec("mem.rss"), spec("slow")]);
        let n = 20 * WINDOW;
        for k in 0..n {
            let t = k as f64 * 0.1;
            // `slow` reads once every 7 samples, and last at the very end.
            let slow = if k % 7 == 0 || k == n - 1 {
                k as f64
            } else {
                f64::NAN
            };
            run.push(t, |i| [1e6, slow][i], f64::NAN, f64::NAN);
        }
        assert!(run.kept() <= WINDOW, "{}", run.kept());
        assert!(run.kept() > WINDOW / 4, "{}", run.kept());
        assert_eq!(run.t[0], 0.0);
        assert_eq!(*run.t.last().unwrap(), (n - 1) as f64 * 0.1);
        assert_eq!(*run.columns[1].last().unwrap(), (n - 1) as f64);
        // Every merged reading of `slow` holds one it read.
        assert!(run.columns[1][1..].iter().all(|v| v.is_finite()));
    }

    /// A growing channel's answer is made by the refresh and says so;
    /// a refresh with nothing new keeps it.
    #[test]
    fn the_answer_is_made_once_per_change() {
        let mut run = LiveRun::new(&HostFacts::default(), None, None);
        run.add_channels(&[spec("mem.rss")]);
        assert!(run.answer().is_none());
        for k in 0..600 {
            let t = k as f64 * 0.1;
            let wobble = [0.0, 4096.0, -4096.0, 0.0][k % 4];
            run.push(t, |_| 100e6 + t * 1048576.0 + wobble, f64::NAN, f64::NAN);
        }
        run.refresh(None, words());
        let a = run.answer().expect("answered");
        assert_eq!(a.growing, ["mem.rss"], "{}", a.headline);
        assert!(a.headline.contains("mem.rss"), "{}", a.headline);
        assert!(!run.changed);
        run.refresh(None, words());
        assert!(!run.changed);
    }
}
