//! [`LiveAnalysis`]: every channel of a live stream analysed as it grows,
//! at most once a second each, within a time budget. The dashboard's store
//! reads it every frame; a headless consumer (an exporter, alerts) can drive
//! it the same way without a window.

use std::time::{Duration, Instant};

use super::{ChannelAnalysis, Tracker, find_warmup, rules};
use flatline_format::ChannelSpec;
use flatline_format::HostFacts;

/// How often each channel's analysis and the start-up are refreshed.
const REFRESH: Duration = Duration::from_secs(1);

/// One tracker and one analysis per channel, and the stream's start-up.
#[derive(Debug, Clone, Default)]
pub struct LiveAnalysis {
    channels: Vec<ChannelSpec>,
    host: HostFacts,
    trackers: Vec<Tracker>,
    analyses: Vec<Option<ChannelAnalysis>>,
    /// When each analysis was made, and how many readings it had seen.
    analysed: Vec<Option<(Instant, u64)>>,
    /// Where start-up ended (stream time) and in which channel, found in
    /// the memory channels' trackers at most once a second.
    warmup: Option<(f64, String)>,
    warmup_at: Option<Instant>,
    /// Where the next refresh starts (round-robin).
    next: usize,
    /// The job ended during its start-up ([`Self::ended_during_start_up`]).
    start_up_only: bool,
    /// The watch launched the job ([`Self::set_launched`]).
    launched: bool,
    /// Where the analysis stops (stream seconds), once the job has ended
    /// ([`Self::ends_at`]).
    until: Option<f64>,
}

impl LiveAnalysis {
    pub fn new(channels: &[ChannelSpec]) -> Self {
        let mut a = Self::default();
        a.add_channels(channels);
        a
    }

    /// Channels that join the stream.
    pub fn add_channels(&mut self, specs: &[ChannelSpec]) {
        for spec in specs {
            self.channels.push(spec.clone());
            self.trackers.push(Tracker::default());
            self.analyses.push(None);
            self.analysed.push(None);
        }
    }

    /// The host the stream comes from (its RAM bounds host memory).
    pub fn set_host(&mut self, host: &HostFacts) {
        self.host = host.clone();
    }

    /// The stream is of a job the watch launched (its `command`): one
    /// that exits within [`super::START_UP_ONLY_S`] of its first reading
    /// ended during its start-up, as its receipt says.
    pub fn set_launched(&mut self, launched: bool) {
        self.launched = launched;
    }

    /// Whether the watch launched the job ([`Self::set_launched`]).
    pub fn launched(&self) -> bool {
        self.launched
    }

    /// An event of the stream, whose first reading was at `first_s`: the
    /// launched job's exit in its start-up is read as
    /// [`Self::ended_during_start_up`].
    pub fn take_event(&mut self, e: &flatline_format::Event, first_s: f64) {
        if self.launched && super::exit_in_start_up(e, first_s) {
            self.ended_during_start_up();
        }
    }

    /// Finds where the job's teardown began, as its receipt finds it
    /// ([`super::tree::analysis_end`]), from the stream's `events`, its
    /// readings' times `t` and its columns by name, and stops the analyses
    /// there ([`Self::ends_at`]).
    pub fn find_end<'a>(
        &mut self,
        events: &[flatline_format::Event],
        t: &[f64],
        names: impl IntoIterator<Item = &'a str>,
        column: impl Fn(&str) -> Option<&'a [f64]>,
    ) {
        self.ends_at(super::tree::analysis_end(events, t, names, column));
    }

    /// The host the stream comes from.
    pub fn host(&self) -> &HostFacts {
        &self.host
    }

    /// The job ended during its start-up (a launched job that exited
    /// within the receipt's bound, as its receipt reads it): growth is read
    /// as [`super::in_start_up`] from now on, every channel analysed again.
    pub fn ended_during_start_up(&mut self) {
        if !self.start_up_only {
            self.start_up_only = true;
            self.analysed.iter_mut().for_each(|a| *a = None);
        }
    }

    /// The job ended, and its teardown began at `t` (stream seconds, see
    /// [`super::tree::analysis_end`]): what follows is analysed no more, as
    /// its receipt reads it; every channel analysed again.
    pub fn ends_at(&mut self, t: Option<f64>) {
        if self.until != t {
            self.until = t;
            self.analysed.iter_mut().for_each(|a| *a = None);
        }
    }

    /// Where the analyses stop ([`Self::ends_at`]), if the job ended.
    pub fn until(&self) -> Option<f64> {
        self.until
    }

    /// One sample: `value(i)` is channel `i`'s reading (`NaN`: none), `steps`
    /// and `tokens` the training axes at that moment (`NaN`: unknown).
    pub fn push(&mut self, t_s: f64, value: impl Fn(usize) -> f64, steps: f64, tokens: f64) {
        for (i, tr) in self.trackers.iter_mut().enumerate() {
            tr.push(t_s, value(i), steps, tokens);
        }
    }

    /// Recomputes the analyses that are over a second old and have new
    /// readings, round-robin, until `budget` is spent (at least one; all of
    /// them with `None`), so that dozens of channels going stale together
    /// never stall the caller. One analysis of a full tracker takes a few
    /// milliseconds.
    pub fn refresh(&mut self, budget: Option<Duration>) {
        let start = Instant::now();
        if self.warmup_at.is_none_or(|at| at.elapsed() >= REFRESH) {
            self.warmup_at = Some(start);
            self.warmup = self.find_warmup();
        }
        let (n, first) = (self.trackers.len(), self.next);
        for k in 0..n {
            if budget.is_some_and(|b| k > 0 && start.elapsed() >= b) {
                break;
            }
            let i = (first + k) % n;
            let tr = &self.trackers[i];
            let stale = match self.analysed[i] {
                None => true,
                Some((at, seen)) => seen != tr.seen() && at.elapsed() >= REFRESH,
            };
            if stale && !tr.is_empty() {
                // A PSS is read beside its USS (see [`super::reconcile_pss`]),
                // so its USS is brought up to date first: a replay's data
                // never changes again, and a PSS analysed before its USS
                // would otherwise keep a growth its USS does not show.
                let uss = super::uss_of(&self.channels[i].name)
                    .and_then(|u| self.channels.iter().position(|c| c.name == u));
                if let Some(j) = uss
                    && !self.trackers[j].is_empty()
                    && self.analysed[j].is_none_or(|(_, seen)| seen != self.trackers[j].seen())
                {
                    self.analyses[j] = Some(self.read_as_the_receipt(j));
                    self.analysed[j] = Some((Instant::now(), self.trackers[j].seen()));
                }
                let mut a = self.read_as_the_receipt(i);
                if let Some(u) = uss.and_then(|j| self.analyses[j].as_ref()) {
                    super::reconcile_pss(&mut a, u);
                }
                // A tree's sum beside the processes it adds up, as last
                // analysed.
                let names = self.channels.iter().map(|c| c.name.as_str());
                if let Some(parts) = super::parts_of(&self.channels[i].name, names) {
                    let parts: Vec<&ChannelAnalysis> = parts
                        .iter()
                        .filter_map(|&j| self.analyses[j].as_ref())
                        .collect();
                    super::sum_of_parts(&mut a, &parts);
                }
                self.analyses[i] = Some(a);
                self.analysed[i] = Some((Instant::now(), self.trackers[i].seen()));
                self.next = (i + 1) % n;
            }
        }
    }

    /// Channel `i`'s analysis, re-read as the receipt re-reads it: a PSS or
    /// USS copying under a still RSS bounded by it, growth in a start-up
    /// (or its tail) not told. A USS analysed ahead of its PSS goes through
    /// here too, so the two are read alike.
    fn read_as_the_receipt(&self, i: usize) -> ChannelAnalysis {
        // The RSS a PSS or USS is part of, as analysed: re-read, where
        // the receipt bounds by it as first analysed, but the copy bound
        // reads a growing RSS and one re-read as not yet told alike.
        let rss = super::rss_of(&self.channels[i].name)
            .and_then(|r| self.channels.iter().position(|c| c.name == r))
            .and_then(|j| self.analyses[j].as_ref());
        let rise = self.start_up_rise(i);
        super::reading::reread(self.analyse(i), rss, self.start_up_only, rise).0
    }

    /// What channel `i` rose during the stream's start-up, where one was
    /// found (see [`super::start_up_rise`]).
    fn start_up_rise(&self, i: usize) -> Option<f64> {
        let (at, _) = self.warmup.as_ref()?;
        let (t, v) = self.trackers[i].points();
        super::start_up_rise(t, v, *at)
    }

    /// Channel `i`'s analysis from its tracker now (no PSS reconciling).
    fn analyse(&self, i: usize) -> ChannelAnalysis {
        let tr = &self.trackers[i];
        let limit = self.base_limit(i).map(|l| l.0);
        let spec = &self.channels[i];
        let floor = rules::evidence_floor(&spec.name, spec.unit);
        let t0 = tr.points().0.first().copied().unwrap_or(0.0);
        let warmup = self.warmup.as_ref().map_or(0.0, |w| (w.0 - t0).max(0.0));
        tr.analyze_until(spec.kind, Some(warmup), limit, floor, self.until)
    }

    /// Whether some channel has data its analysis has not seen yet (more
    /// refreshes are needed, at most once a second each).
    pub fn pending(&self) -> bool {
        self.trackers
            .iter()
            .zip(&self.analysed)
            .any(|(tr, a)| !tr.is_empty() && a.is_none_or(|(_, seen)| seen != tr.seen()))
    }

    /// Whether a refresh now would analyse something: a channel never
    /// analysed, or one with new data whose analysis is a second old.
    pub fn due(&self) -> bool {
        self.trackers.iter().zip(&self.analysed).any(|(tr, a)| {
            !tr.is_empty()
                && a.is_none_or(|(at, seen)| seen != tr.seen() && at.elapsed() >= REFRESH)
        })
    }

    /// Channels with readings that have no analysis yet.
    pub fn unanalysed(&self) -> usize {
        self.trackers
            .iter()
            .zip(&self.analysed)
            .filter(|(tr, a)| !tr.is_empty() && a.is_none())
            .count()
    }

    /// The latest analysis of channel `i` (see [`LiveAnalysis::refresh`]).
    pub fn analysis(&self, i: usize) -> Option<&ChannelAnalysis> {
        self.analyses.get(i).and_then(Option::as_ref)
    }

    /// Channel `i`'s latest reading.
    pub fn latest(&self, i: usize) -> Option<f64> {
        self.trackers.get(i).and_then(Tracker::latest)
    }

    /// The ceiling of channel `i` where one is known, and what it is (see
    /// [`rules::limit_for`]).
    pub fn limit(&self, i: usize) -> Option<(f64, rules::LimitSource)> {
        let base = self.base_limit(i);
        match self.analyses.get(i).and_then(Option::as_ref) {
            // Bounded by the RSS it is part of, nearer than its base limit.
            Some(a) if a.limit.is_some() && a.limit != base.map(|b| b.0) => {
                a.limit.map(|l| (l, rules::LimitSource::Shared))
            }
            _ => base,
        }
    }

    /// Channel `i`'s ceiling before its own readings are known: its limit
    /// channel's latest reading, or the host's RAM.
    fn base_limit(&self, i: usize) -> Option<(f64, rules::LimitSource)> {
        let spec = self.channels.get(i)?;
        rules::limit_for(&spec.name, spec.unit, &self.host, |name| {
            let j = self.channels.iter().position(|c| c.name == name)?;
            self.latest(j)
        })
    }

    /// Where start-up ended (stream seconds) and the channel it was found in.
    pub fn warmup(&self) -> Option<(f64, &str)> {
        self.warmup.as_ref().map(|(t, c)| (*t, c.as_str()))
    }

    /// The latest start-up end found among the memory channels (as a
    /// receipt finds it), on their kept points.
    fn find_warmup(&self) -> Option<(f64, String)> {
        self.channels
            .iter()
            .zip(&self.trackers)
            .filter(|(c, _)| super::warmup::is_warmup_source(c))
            .filter_map(|(c, tr)| {
                let (t, v) = tr.points();
                let floor = rules::evidence_floor(&c.name, c.unit);
                find_warmup(t, v, floor).map(|w| (w.at_s, c.name.clone()))
            })
            .max_by(|a, b| a.0.total_cmp(&b.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Verdict;
    use flatline_format::{Group, Kind, Unit};

    fn spec(name: &str, kind: Kind) -> ChannelSpec {
        ChannelSpec::new(name, Unit::Bytes, Group::Memory).with_kind(kind)
    }

    #[test]
    fn a_growing_channel_is_called_linear_and_a_flat_one_flat() {
        let mut live = LiveAnalysis::new(&[spec("mem.rss", Kind::Level)]);
        live.add_channels(&[spec("gpu0.used", Kind::Level)]);
        for k in 0..600 {
            let t = k as f64 * 0.1;
            let wobble = [0.0, 4096.0, -4096.0, 0.0][k % 4];
            // 1 MiB/s in mem.rss; gpu0.used flat at 2 GiB.
            live.push(
                t,
                |i| match i {
                    0 => 100e6 + t * 1048576.0 + wobble,
                    _ => 2.0 * 1073741824.0 + wobble,
                },
                f64::NAN,
                f64::NAN,
            );
        }
        assert!(live.pending() && live.due());
        assert_eq!(live.unanalysed(), 2);
        live.refresh(None);
        assert!(!live.pending() && !live.due());
        let rss = live.analysis(0).unwrap();
        assert_eq!(rss.verdict, Verdict::Linear);
        let slope = rss.slope_per_s;
        assert!((slope / 1048576.0 - 1.0).abs() < 0.02, "{slope}");
        assert_eq!(live.analysis(1).unwrap().verdict, Verdict::Flat);
        assert_eq!(live.latest(1), Some(2.0 * 1073741824.0));
        // Nothing new: a refresh keeps what it has.
        live.refresh(None);
        assert!(!live.pending());
        // New data waits for its analysis's second: pending, not due.
        live.push(601.0, |_| 2.0 * 1073741824.0, f64::NAN, f64::NAN);
        assert!(live.pending() && !live.due());
    }

    /// A sharer's PSS rises while its USS does not (a sibling copies the
    /// pages they share): in one pass, with the PSS listed before its USS,
    /// the PSS is still read beside its USS and is not called growth. (A
    /// replay's data never changes again, so there is no second pass.)
    #[test]
    fn a_pss_is_read_beside_its_uss_in_the_same_pass() {
        use crate::Note;
        let mut live =
            LiveAnalysis::new(&[spec("pid7.pss", Kind::Level), spec("pid7.uss", Kind::Level)]);
        for k in 0..600 {
            let t = k as f64 * 0.1;
            let wobble = [0.0, 4096.0, -4096.0, 0.0][k % 4];
            live.push(
                t,
                |i| match i {
                    0 => 4e6 + t * 4096.0 + wobble,
                    _ => 5e5 + wobble,
                },
                f64::NAN,
                f64::NAN,
            );
        }
        live.refresh(None);
        let pss = live.analysis(0).unwrap();
        assert!(!pss.verdict.is_growth(), "{pss:?}");
        assert_eq!(pss.note, Some(Note::SharedPages));
        assert!(!live.pending());
    }

    #[test]
    fn a_budget_spreads_the_analyses_round_robin() {
        let specs: Vec<ChannelSpec> = (0..8)
            .map(|i| spec(&format!("pid{i}.rss"), Kind::Level))
            .collect();
        let mut live = LiveAnalysis::new(&specs);
        for k in 0..100 {
            live.push(k as f64, |i| 1e6 * (i + 1) as f64, f64::NAN, f64::NAN);
        }
        // A zero budget still analyses one channel a refresh, the next one
        // each time.
        for done in 1..=8 {
            live.refresh(Some(Duration::ZERO));
            assert_eq!(live.unanalysed(), 8 - done);
        }
        assert!(!live.pending());
    }
}
