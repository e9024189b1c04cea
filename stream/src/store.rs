//! The dashboard's data store: every channel's values with a min/max pyramid
//! for drawing, a bounded memory for long live sessions, and a live analysis
//! per channel.

use std::time::Duration;

use flatline_analysis::summary::Answer;
use flatline_analysis::{ChannelAnalysis, LiveAnalysis, rules};
use flatline_receipt::fmt::WORDS;
use flatline_telemetry::recording::Slots;
use flatline_telemetry::recording::{Event, HostFacts, Recording};
use flatline_telemetry::{STEP_CHANNELS, Sample, Schema, TOKEN_CHANNELS};

pub use flatline_analysis::compare::Align;

/// Points per bucket from one pyramid level to the next.
const FAN: usize = 8;

/// One channel's values and its min/max pyramid: level `k` holds the min and
/// max of each run of `FAN^(k+1)` raw values, so drawing any range costs
/// about as many buckets as the plot has pixel columns, however long the run.
#[derive(Debug, Clone, Default)]
pub struct Series {
    raw: Vec<f64>,
    levels: Vec<Vec<[f64; 2]>>,
}

fn merge(a: [f64; 2], b: [f64; 2]) -> [f64; 2] {
    // f64::min/max ignore NaN, so missing readings never hide real ones.
    [a[0].min(b[0]), a[1].max(b[1])]
}

impl Series {
    pub fn from_values(values: Vec<f64>) -> Self {
        let mut s = Series {
            raw: values,
            levels: Vec::new(),
        };
        s.rebuild();
        s
    }

    /// Every value held, `NaN` where there was no reading.
    pub fn values(&self) -> &[f64] {
        &self.raw
    }

    /// Recomputes the pyramid from the raw values.
    pub fn rebuild(&mut self) {
        self.levels.clear();
        let mut below: Vec<[f64; 2]> = self.raw.iter().map(|&v| [v, v]).collect();
        while below.len() > FAN {
            let level: Vec<[f64; 2]> = below
                .chunks(FAN)
                .map(|c| c.iter().copied().fold([f64::NAN, f64::NAN], merge))
                .collect();
            self.levels.push(level.clone());
            below = level;
        }
    }

    /// Appends a value, updating the pyramid in place.
    pub fn push(&mut self, v: f64) {
        self.raw.push(v);
        let mut idx = self.raw.len() - 1;
        let mut val = [v, v];
        for k in 0.. {
            idx /= FAN;
            if self.levels.len() == k {
                if self.raw.len() <= FAN.pow(k as u32 + 1) {
                    break;
                }
                self.levels.push(Vec::new());
            }
            let level = &mut self.levels[k];
            if idx < level.len() {
                level[idx] = merge(level[idx], val);
                val = level[idx];
            } else {
                level.push(val);
            }
        }
        // Levels created late start partway: fill them from scratch once.
        if self
            .levels
            .iter()
            .enumerate()
            .any(|(k, l)| l.len() != self.raw.len().div_ceil(FAN.pow(k as u32 + 1)))
        {
            self.rebuild();
        }
    }

    /// Min/max buckets over raw indices `[i0, i1)`, at the coarsest level that
    /// still gives at least `want` buckets: `(first raw index, [min, max])`.
    pub fn buckets(&self, i0: usize, i1: usize, want: usize) -> Vec<(usize, [f64; 2])> {
        let i1 = i1.min(self.raw.len());
        if i0 >= i1 {
            return Vec::new();
        }
        let n = i1 - i0;
        let mut level: Option<usize> = None;
        for k in 0..self.levels.len() {
            if n / FAN.pow(k as u32 + 1) >= want.max(1) {
                level = Some(k);
            }
        }
        let buckets: Vec<(usize, [f64; 2])> = match level {
            None => (i0..i1).map(|i| (i, [self.raw[i], self.raw[i]])).collect(),
            Some(k) => {
                let size = FAN.pow(k as u32 + 1);
                (i0 / size..i1.div_ceil(size))
                    .filter_map(|b| self.levels[k].get(b).map(|mm| (b * size, *mm)))
                    .collect()
            }
        };
        // A level can hold up to FAN times more buckets than asked for: merge
        // neighbours so that about `want` remain (never fewer), min with min
        // and max with max, so the envelope is the same.
        let group = (buckets.len() / want.max(1)).max(1);
        if group == 1 {
            return buckets;
        }
        buckets
            .chunks(group)
            .map(|c| {
                let mm = c.iter().fold([f64::NAN, f64::NAN], |a, b| merge(a, b.1));
                (c[0].0, mm)
            })
            .collect()
    }

    /// The index of the last reading (not `NaN`) before `end`, found
    /// through the pyramid (a bucket's min is `NaN` only when it holds no
    /// reading): about `FAN` steps a level, however far back it lies.
    pub fn last_reading_before(&self, end: usize) -> Option<usize> {
        let end = end.min(self.raw.len());
        let last_in =
            |lo: usize, hi: usize, at: &dyn Fn(usize) -> bool| (lo..hi).rev().find(|&i| at(i));
        if self.levels.is_empty() {
            return last_in(0, end, &|i| !self.raw[i].is_nan());
        }
        // Raw values back to a bucket boundary.
        let edge = end - end % FAN;
        if let Some(i) = last_in(edge, end, &|i| !self.raw[i].is_nan()) {
            return Some(i);
        }
        // Whole buckets: climb while at a boundary of the level above.
        let (mut k, mut b) = (0, edge / FAN);
        loop {
            let level = self.levels.get(k)?;
            if b % FAN == 0 && b > 0 && k + 1 < self.levels.len() {
                b /= FAN;
                k += 1;
                continue;
            }
            let b0 = b - b % FAN;
            let b0 = if b == b0 { b.saturating_sub(FAN) } else { b0 };
            if let Some(hit) = last_in(b0, b, &|j| !level[j][0].is_nan()) {
                // Descend to the last bucket with a reading, then the value.
                let (mut k, mut b) = (k, hit);
                while k > 0 {
                    let below = &self.levels[k - 1];
                    b = last_in(b * FAN, ((b + 1) * FAN).min(below.len()), &|j| {
                        !below[j][0].is_nan()
                    })?;
                    k -= 1;
                }
                return last_in(b * FAN, ((b + 1) * FAN).min(self.raw.len()), &|i| {
                    !self.raw[i].is_nan()
                });
            }
            if b0 == 0 {
                return None;
            }
            b = b0;
        }
    }

    /// Keeps the values `keep` marks (a decimated history for long live
    /// sessions).
    fn thin(&mut self, keep: &[bool]) {
        let mut i = 0;
        self.raw.retain(|_| {
            i += 1;
            keep.get(i - 1).copied().unwrap_or(true)
        });
    }
}

/// The positions of the per-process PSS channels of a schema.
fn process_pss(schema: &Schema) -> Vec<usize> {
    schema
        .channels
        .iter()
        .enumerate()
        .filter(|(_, c)| c.labels.contains_key("pid") && c.name.ends_with(".pss"))
        .map(|(i, _)| i)
        .collect()
}

/// For each of [`process_pss`]'s channels, the same process's `rss` and
/// `uss` channels.
fn process_leaves(schema: &Schema) -> Vec<[Option<usize>; 2]> {
    let by_name: std::collections::HashMap<&str, usize> = schema
        .channels
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name.as_str(), i))
        .collect();
    process_pss(schema)
        .into_iter()
        .map(|i| {
            let stem = schema.channels[i].name.trim_end_matches(".pss");
            let leaf = |l: &str| by_name.get(format!("{stem}.{l}").as_str()).copied();
            [leaf("rss"), leaf("uss")]
        })
        .collect()
}

/// Everything a view draws, whatever the source.
#[derive(Debug)]
pub struct Store {
    schema: Schema,
    /// Sample times, seconds since the start.
    t: Vec<f64>,
    /// Each held sample's number among all samples pushed (0, 1, …): the
    /// history keeps those that are multiples of `stride`.
    n: Vec<u64>,
    pushed: u64,
    /// The history's spacing, in samples pushed (a power of two).
    stride: u64,
    series: Vec<Series>,
    events: Vec<Event>,
    /// Each channel's tracker and analysis, and the start-up.
    live: LiveAnalysis,
    steps_idx: Option<usize>,
    tokens_idx: Option<usize>,
    /// Most samples kept in memory; beyond it the older part is thinned.
    cap: usize,
    /// Whether the step channel has advanced yet (only then is it an axis),
    /// and its first reading.
    steps_advance: bool,
    steps_first: Option<f64>,
    /// Which sample slot each live channel's value is in (ended: none).
    slots: Slots,
    /// The `pid<N>.pss` channels of a watched tree, and the samples in which
    /// they were read (they arrive together, at the slow probes' rate).
    process_pss: Vec<usize>,
    /// For each of those, its `rss` and `uss` channels.
    process_leaves: Vec<[Option<usize>; 2]>,
    process_rows: Vec<usize>,
    /// What the recording it was loaded from lost to damage: said before
    /// any verdict, as the receipt says it.
    damage: Option<flatline_receipt::damage::Damage>,
    /// The gaps write faults (a full disk) left in the stream, as its
    /// notes say: said first too.
    gaps: Option<flatline_receipt::damage::Gaps>,
    /// The job's rank, where the recording's labels say.
    rank: Option<String>,
    /// The watched process, where the setup says ([`Store::set_launched`]).
    root: Option<u32>,
}

impl Store {
    /// An empty store for a live stream, holding at most `cap` samples.
    pub fn new(schema: Schema, cap: usize) -> Self {
        let n = schema.len();
        let steps_idx = schema.index_of_first(&STEP_CHANNELS);
        let tokens_idx = schema.index_of_first(&TOKEN_CHANNELS);
        Self {
            t: Vec::new(),
            n: Vec::new(),
            pushed: 0,
            stride: 1,
            series: vec![Series::default(); n],
            events: Vec::new(),
            live: LiveAnalysis::new(&schema.channels),
            steps_idx,
            tokens_idx,
            cap: cap.max(1024),
            slots: Slots::new(n),
            process_leaves: process_leaves(&schema),
            process_pss: process_pss(&schema),
            process_rows: Vec::new(),
            steps_advance: false,
            steps_first: None,
            damage: None,
            gaps: None,
            rank: None,
            root: None,
            schema,
        }
    }

    /// What the recording it holds lost to damage, if anything.
    pub fn damage(&self) -> Option<&flatline_receipt::damage::Damage> {
        self.damage.as_ref()
    }

    /// The gaps write faults left in the stream, if any.
    pub fn gaps(&self) -> Option<&flatline_receipt::damage::Gaps> {
        self.gaps.as_ref()
    }

    /// The stretches of the run that were lost (damage in the file, gaps a
    /// full disk left), each from the last reading before it to the first
    /// after, in seconds on the store's clock: what a plot draws no line
    /// across.
    pub fn lost_stretches(&self) -> Vec<[f64; 2]> {
        let mut out = Vec::new();
        if let Some(d) = &self.damage {
            out.extend(d.losses.iter().map(|l| {
                [
                    l.after_ns.map_or(f64::NEG_INFINITY, |t| t as f64 / 1e9),
                    l.before_ns.map_or(f64::INFINITY, |t| t as f64 / 1e9),
                ]
            }));
        }
        if let Some(g) = &self.gaps {
            out.extend(g.gaps.iter().map(|g| [g.from_s, g.to_s]));
        }
        out
    }

    /// The watched process, where the setup says.
    pub fn root(&self) -> Option<u32> {
        self.root
    }

    /// The host the stream comes from.
    pub fn host(&self) -> &HostFacts {
        self.live.host()
    }

    /// The job's rank, where the recording's labels say.
    pub fn rank(&self) -> Option<&str> {
        self.rank.as_deref()
    }

    /// The store's readings as the analysis reads a stream's.
    fn input<'s>(&'s self) -> flatline_analysis::reading::Input<'s, impl Fn(usize) -> &'s [f64]> {
        flatline_analysis::reading::Input {
            schema: &self.schema,
            events: &self.events,
            host: self.live.host(),
            launched: self.live.launched(),
            root: self.root,
            rank: self.rank.as_deref(),
            t: &self.t,
            column: |i: usize| self.series[i].values(),
        }
    }

    /// What the store lost: the file's damage and the gaps write faults
    /// left, as the receipt words them.
    fn lost(&self) -> flatline_analysis::reading::Lost {
        flatline_analysis::reading::Lost {
            damage: self.damage.as_ref().map(|d| d.note()),
            gap: self.gaps.as_ref().map(|g| g.note()),
        }
    }

    /// The live answer and the facts beside it (the process tree up to
    /// where the analyses stop, who died over the whole stream, the
    /// allocation sites), from the live analyses, as a receipt reads them.
    pub fn answer(&self) -> (flatline_analysis::reading::Facts, Answer) {
        let end = self
            .analysis_end()
            .map_or(self.t.len(), |end| self.t.partition_point(|&t| t < end));
        flatline_analysis::reading::answer_live(
            &self.input(),
            end,
            |i| Some((self.analysis(i)?, self.limit(i).map(|l| l.1))),
            &self.lost(),
            WORDS,
        )
    }

    /// The whole store read and answered as a receipt reads a recording
    /// ([`flatline_analysis::reading::Run`]), on every reading it holds
    /// rather than the live analyses' kept points: a replay's banner then
    /// says the receipt's sentence, figure for figure.
    pub fn read_whole(&self) -> flatline_analysis::reading::Run {
        self.read_part(None)
    }

    /// [`Store::read_whole`] of the part from `range[0]` to `range[1]`
    /// seconds after the first reading (`report --from/--to`).
    pub fn read_part(&self, range: Option<[f64; 2]>) -> flatline_analysis::reading::Run {
        let lost = self.lost();
        flatline_analysis::reading::Run::read_input(
            &self.input(),
            None,
            range,
            false,
            |within| match (within, &self.gaps) {
                (Some([from, to]), Some(g)) => flatline_analysis::reading::Lost {
                    gap: g.clone().within(from, to).map(|g| g.note()),
                    ..lost
                },
                _ => lost,
            },
            WORDS,
        )
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Sample times, seconds since the start.
    pub fn times(&self) -> &[f64] {
        &self.t
    }

    /// First and last sample time (0 when empty).
    pub fn time_range(&self) -> (f64, f64) {
        (
            self.t.first().copied().unwrap_or(0.0),
            self.t.last().copied().unwrap_or(0.0),
        )
    }

    /// Channel `i`'s values.
    pub fn series(&self, i: usize) -> &Series {
        &self.series[i]
    }

    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Adds an event (a live source's step, phase or exit).
    pub fn push_event(&mut self, e: Event) {
        self.live
            .take_event(&e, self.t.first().copied().unwrap_or(0.0));
        // The watched process's exit ends the job (a worker's does not).
        let exit = matches!(
            e.kind,
            flatline_telemetry::recording::EventKind::TargetExited { .. }
        );
        match &mut self.gaps {
            Some(g) => g.take(&e),
            None => self.gaps = flatline_receipt::damage::Gaps::of(std::slice::from_ref(&e)),
        }
        self.events.push(e);
        if exit {
            self.check_end();
        }
    }

    /// Where the job's teardown began, once it has ended, as its receipt
    /// finds it ([`flatline_analysis::tree::analysis_end`]): the window's analyses
    /// stop there.
    pub fn check_end(&mut self) {
        let column = |n: &str| {
            let i = self.schema.channels.iter().position(|c| c.name == n)?;
            Some(self.series[i].values())
        };
        let names = self.schema.channels.iter().map(|c| c.name.as_str());
        self.live.find_end(&self.events, &self.t, names, column);
    }

    /// Where the analyses stop (stream seconds): the job's teardown, once
    /// [`Store::check_end`] found one.
    pub fn analysis_end(&self) -> Option<f64> {
        self.live.until()
    }

    /// The stream is of a job the watch launched (its `command` in the
    /// setup): one that exits within [`flatline_analysis::START_UP_ONLY_S`] of its
    /// first reading ended during its start-up, as its receipt says.
    pub fn set_launched(&mut self, config: &std::collections::BTreeMap<String, String>) {
        self.live.set_launched(config.contains_key("command"));
        self.root = config.get("pid").and_then(|p| p.parse().ok());
        let first = self.t.first().copied().unwrap_or(0.0);
        for e in &self.events {
            self.live.take_event(e, first);
        }
        self.check_end();
    }

    /// The ceiling of channel `i` where one is known, and what it is (see
    /// [`rules::limit_for`]: the cgroup's limit, else the host's RAM, for host
    /// memory; a GPU's total for its memory).
    pub fn limit(&self, i: usize) -> Option<(f64, rules::LimitSource)> {
        self.live.limit(i)
    }

    /// The step axis, once the step channel has advanced
    /// (see [`rules::step_axis`]): a step count that stays put is no axis.
    pub fn step_axis(&self) -> Option<usize> {
        self.steps_idx.filter(|_| self.steps_advance)
    }

    /// The token count, where it advances: an axis to line two runs up by.
    pub fn token_axis(&self) -> Option<usize> {
        self.tokens_idx
            .filter(|&i| rules::advances(self.series[i].values()))
    }

    /// The channel this store's x axis follows when lined up by `align`:
    /// none for time, or where the store has no such axis.
    pub fn axis(&self, align: Align) -> Option<usize> {
        match align {
            Align::Time => None,
            Align::Step => self.step_axis(),
            Align::Tokens => self.token_axis(),
        }
    }

    /// Takes one item of a stream (the road every source's data travels).
    pub fn push_item(&mut self, item: &flatline_telemetry::recording::Item) {
        use flatline_telemetry::recording::Item;
        match item {
            Item::Add(specs) => self.add_channels(specs),
            Item::End(positions) => self.end_channels(positions),
            Item::Sample(s) => self.push(s),
            Item::Event(e) => self.push_event(e.clone()),
        }
    }

    /// Channels that join from the next sample on (format v2); the samples so
    /// far have no value for them.
    pub fn add_channels(&mut self, specs: &[flatline_telemetry::ChannelSpec]) {
        let n = self.t.len();
        for spec in specs {
            self.schema.channels.push(spec.clone());
            self.series.push(Series::from_values(vec![f64::NAN; n]));
        }
        self.live.add_channels(specs);
        self.slots.add(specs.len());
        self.process_pss = process_pss(&self.schema);
        self.process_leaves = process_leaves(&self.schema);
        self.steps_idx = self.schema.index_of_first(&STEP_CHANNELS);
        self.tokens_idx = self.schema.index_of_first(&TOKEN_CHANNELS);
    }

    /// Channels (by position) that carry no more values.
    pub fn end_channels(&mut self, positions: &[usize]) {
        self.slots.end(positions);
    }

    /// Whether channel `i` still carries values (a process's channels end
    /// when it exits).
    pub fn is_live(&self, i: usize) -> bool {
        self.slots.slot(i).is_some()
    }

    /// A store holding a whole recording. Its columns move into the store
    /// rather than being copied, so a long recording is held once, not twice,
    /// while it opens.
    pub fn from_recording(rec: &mut Recording) -> Self {
        let mut s = Self::new(rec.header.schema.clone(), usize::MAX);
        s.damage = flatline_receipt::damage::Damage::of(rec);
        s.gaps = flatline_receipt::damage::Gaps::of(&rec.events);
        s.rank = rec.header.labels.get("rank").cloned();
        s.t = rec.t_ns.iter().map(|&t| t as f64 / 1e9).collect();
        s.n = (0..s.t.len() as u64).collect();
        s.pushed = s.t.len() as u64;
        s.series = std::mem::take(&mut rec.columns)
            .into_iter()
            .map(Series::from_values)
            .collect();
        s.events = std::mem::take(&mut rec.events);
        s.steps_idx = rules::step_axis(&s.schema, |i| s.series[i].values());
        s.steps_advance = s.steps_idx.is_some();
        s.set_host(&rec.header.host);
        s.set_launched(&rec.header.config);
        s.find_process_rows();
        s.feed_trackers(0);
        s
    }

    /// The `pid<N>.pss` channels (positions) of the watched tree's processes.
    pub fn process_pss(&self) -> &[usize] {
        &self.process_pss
    }

    /// For each of [`Self::process_pss`], its `rss` and `uss` channels.
    pub fn process_leaves(&self) -> &[[Option<usize>; 2]] {
        &self.process_leaves
    }

    /// The samples that carry the processes' readings, in order.
    pub fn process_rows(&self) -> &[usize] {
        &self.process_rows
    }

    fn has_process_reading(&self, row: usize) -> bool {
        self.process_pss
            .iter()
            .any(|&c| self.series[c].raw.get(row).is_some_and(|v| !v.is_nan()))
    }

    fn find_process_rows(&mut self) {
        self.process_rows = (0..self.t.len())
            .filter(|&r| self.has_process_reading(r))
            .collect();
    }

    /// The host the stream comes from (its RAM bounds host memory).
    pub fn set_host(&mut self, host: &HostFacts) {
        self.live.set_host(host);
    }

    fn feed_trackers(&mut self, from: usize) {
        for i in from..self.t.len() {
            let at = |c: Option<usize>| c.map_or(f64::NAN, |c| self.series[c].raw[i]);
            let (step, tok) = (at(self.steps_idx), at(self.tokens_idx));
            let series = &self.series;
            self.live.push(self.t[i], |c| series[c].raw[i], step, tok);
        }
    }

    /// Appends a live sample (values by slot, as a sampler makes them).
    pub fn push(&mut self, sample: &Sample) {
        let slots = std::mem::take(&mut self.slots);
        self.push_values(sample.t_s(), |i| slots.value(sample, i));
        self.slots = slots;
    }

    /// Appends a row of a file: one value per channel position (`NaN`: no
    /// reading, or an ended channel), as a recording holds it.
    pub fn push_row(&mut self, t_ns: u64, row: &[f64]) {
        self.push_values(t_ns as f64 / 1e9, |i| {
            row.get(i).copied().unwrap_or(f64::NAN)
        });
    }

    fn push_values(&mut self, t: f64, value: impl Fn(usize) -> f64) {
        if self.t.last().is_some_and(|&last| t < last) {
            return; // out of order: never happens with one sampler, but never corrupt the axis
        }
        // Thin before the arrays would grow past the cap, so their capacity stays at it.
        if self.t.len() >= self.cap {
            self.thin();
        }
        self.t.push(t);
        self.n.push(self.pushed);
        self.pushed += 1;
        for (i, s) in self.series.iter_mut().enumerate() {
            s.push(value(i));
        }
        let from = self.t.len() - 1;
        if self.has_process_reading(from) {
            self.process_rows.push(from);
        }
        // The rules' test (readings not all equal), kept up per sample.
        if !self.steps_advance
            && let Some(c) = self.steps_idx
            && let Some(v) = self.series[c].raw.last().copied().filter(|v| !v.is_nan())
        {
            match self.steps_first {
                None => self.steps_first = Some(v),
                Some(first) => self.steps_advance = v != first,
            }
        }
        self.feed_trackers(from);
    }

    /// Halves the resolution of the older three quarters of the history.
    /// Makes room: the newest quarter stays at full resolution; the rest
    /// keeps the samples whose number is a multiple of the history's
    /// stride, doubled until at most 5/8 of the cap remain. The history is
    /// evenly spaced however long the session: a week at 10 Hz keeps one
    /// sample in 64 from its first hour as from its last day, never a few
    /// far-apart points that a line would join into a ramp.
    fn thin(&mut self) {
        let len = self.t.len();
        let keep_from = len * 3 / 4;
        let target = self.cap * 5 / 8;
        let kept = |stride: u64| {
            self.n[..keep_from]
                .iter()
                .filter(|&&g| g.is_multiple_of(stride))
                .count()
        };
        while kept(self.stride) + (len - keep_from) > target && self.stride < 1 << 62 {
            self.stride *= 2;
        }
        let stride = self.stride;
        let keep: Vec<bool> = self
            .n
            .iter()
            .enumerate()
            .map(|(i, g)| i >= keep_from || g.is_multiple_of(stride))
            .collect();
        let mut i = 0;
        self.t.retain(|_| {
            i += 1;
            keep[i - 1]
        });
        let mut i = 0;
        self.n.retain(|_| {
            i += 1;
            keep[i - 1]
        });
        for s in &mut self.series {
            s.thin(&keep);
            s.rebuild();
        }
        self.find_process_rows();
    }

    pub fn len(&self) -> usize {
        self.t.len()
    }

    pub fn is_empty(&self) -> bool {
        self.t.is_empty()
    }

    /// Samples at or before `t_s`.
    pub fn len_until(&self, t_s: f64) -> usize {
        self.t.partition_point(|&t| t <= t_s)
    }

    /// Starts a frame: refreshes the analyses within `budget` (see
    /// [`LiveAnalysis::refresh`]).
    pub fn begin_frame(&mut self, budget: Option<Duration>) {
        self.live.refresh(budget);
    }

    /// Whether a frame now would analyse something (a channel never
    /// analysed, or new data a second after its last analysis).
    pub fn analyses_due(&self) -> bool {
        self.live.due()
    }

    /// Whether some channel has data its analysis has not seen yet (it will
    /// be due within a second).
    pub fn analyses_pending(&self) -> bool {
        self.live.pending()
    }

    /// Where start-up ended (stream seconds) and the channel it was found in.
    pub fn warmup(&self) -> Option<(f64, &str)> {
        self.live.warmup()
    }

    /// Channels with readings that have no analysis yet.
    pub fn unanalysed(&self) -> usize {
        self.live.unanalysed()
    }

    /// The latest analysis of channel `i` (see [`Store::begin_frame`]).
    pub fn analysis(&self, i: usize) -> Option<&ChannelAnalysis> {
        self.live.analysis(i)
    }

    /// Bytes held by the store's arrays (for the memory figure of long sessions).
    pub fn heap_bytes(&self) -> usize {
        let series: usize = self
            .series
            .iter()
            .map(|s| {
                s.raw.capacity() * 8 + s.levels.iter().map(|l| l.capacity() * 16).sum::<usize>()
            })
            .sum();
        (self.t.capacity() + self.n.capacity()) * 8 + series
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute(raw: &[f64], i0: usize, i1: usize) -> [f64; 2] {
        raw[i0..i1]
            .iter()
            .fold([f64::NAN, f64::NAN], |a, &v| merge(a, [v, v]))
    }

    #[test]
    fn the_last_reading_is_found_through_the_pyramid_as_by_walking_back() {
        // Readings in sparse runs (a process that comes and goes, a slow
        // probe), gaps of every length, lengths around powers of FAN.
        for (n, seed) in [
            (0usize, 1u64),
            (1, 2),
            (7, 3),
            (8, 4),
            (9, 4),
            (65, 5),
            (4097, 6),
            (40_000, 7),
        ] {
            let mut x = seed;
            let mut on = false;
            let raw: Vec<f64> = (0..n)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if x % 997 == 0 {
                        on = !on;
                    }
                    if on || x % 4001 == 0 || (n < 10 && x % 3 == 0) {
                        i as f64
                    } else {
                        f64::NAN
                    }
                })
                .collect();
            let s = Series::from_values(raw.clone());
            for end in (0..=n + 2)
                .step_by((n / 300).max(1))
                .chain([n, n.saturating_sub(1)])
            {
                let want = (0..end.min(n)).rev().find(|&i| !raw[i].is_nan());
                assert_eq!(s.last_reading_before(end), want, "n {n}, end {end}");
            }
        }
    }

    #[test]
    fn the_pyramid_matches_brute_force_min_max() {
        let raw: Vec<f64> = (0..10_000)
            .map(|i| ((i * 7919) % 1000) as f64 - if i % 97 == 0 { 5000.0 } else { 0.0 })
            .collect();
        let built = Series::from_values(raw.clone());
        let mut pushed = Series::default();
        for &v in &raw {
            pushed.push(v);
        }
        assert_eq!(
            built.levels, pushed.levels,
            "incremental and batch pyramids agree"
        );
        for (i0, i1, want) in [
            (0, 10_000, 100),
            (123, 9_876, 50),
            (5000, 5100, 500),
            (0, 10_000, 1),
        ] {
            let b = built.buckets(i0, i1, want);
            assert!(
                b.len() >= want.min(i1 - i0) && b.len() <= (i1 - i0),
                "{} buckets",
                b.len()
            );
            // About as many buckets as asked for, never many more (a plot
            // draws two points per bucket).
            if i1 - i0 > 2 * want {
                assert!(b.len() < 2 * want, "{} buckets for {want}", b.len());
            }
            // Every bucket's min/max is the true min/max over its raw span.
            for w in b.windows(2) {
                let (a, next) = (w[0].0.max(i0), w[1].0);
                let span = brute(&raw, a, next);
                assert!(w[0].1[0] <= span[0] && w[0].1[1] >= span[1]);
            }
            // And the envelope keeps the extremes of the whole range.
            let lo = b.iter().map(|x| x.1[0]).fold(f64::INFINITY, f64::min);
            let hi = b.iter().map(|x| x.1[1]).fold(f64::NEG_INFINITY, f64::max);
            let all = brute(&raw, i0, i1);
            assert!(lo <= all[0] && hi >= all[1]);
        }
    }

    #[test]
    fn a_long_live_session_stays_bounded() {
        let schema = Schema {
            channels: vec![flatline_telemetry::ChannelSpec::new(
                "mem.rss",
                flatline_telemetry::Unit::Bytes,
                flatline_telemetry::Group::Memory,
            )],
        };
        let mut store = Store::new(schema, 10_000);
        for i in 0..200_000u64 {
            store.push(&Sample::from_values(
                i,
                i * 10_000_000,
                &[1e9 + (i / 1000) as f64 * 4096.0],
            ));
        }
        assert!(store.len() <= 10_000, "{}", store.len());
        assert!(store.len() >= 5_000);
        assert_eq!(store.t.last().copied(), Some(1999.99));
        assert!(store.t.windows(2).all(|w| w[0] < w[1]));
        store.begin_frame(None);
        let a = store.analysis(0).unwrap();
        assert_eq!(a.verdict, flatline_analysis::Verdict::Staircase);
        assert!(store.heap_bytes() < 2 << 20, "{}", store.heap_bytes());
        // The history is evenly spaced: the oldest hour as dense as the
        // rest of the history, not thinned away by every later thinning.
        // Its first gap holds for at least an eighth of what is kept, and
        // nothing later is sparser.
        let gaps: Vec<f64> = store.t.windows(2).map(|w| w[1] - w[0]).collect();
        let first = gaps[0];
        let even = gaps
            .iter()
            .take_while(|&&g| (g - first).abs() < 1e-6)
            .count();
        assert!(even >= store.len() / 8, "{even} of {}", store.len());
        assert!(
            gaps.iter().all(|&g| g <= first * 1.001),
            "a gap wider than {first} s"
        );
        assert!(store.t[0] == 0.0 && first < 1.0, "{:?}", &store.t[..3]);
    }

    /// The case a person saw: a job builds its dataset for 14 s, then stays
    /// flat; 40 s in, the live card must not call its RSS a leak.
    #[test]
    fn a_live_start_up_is_found_and_not_called_a_leak() {
        use flatline_analysis::Verdict;
        use flatline_telemetry::{ChannelSpec, Group, Unit};
        let schema = Schema {
            channels: vec![ChannelSpec::new("mem.rss", Unit::Bytes, Group::Memory)],
        };
        let mut store = Store::new(schema, 10_000);
        const MIB: f64 = 1_048_576.0;
        for i in 0..400u64 {
            let t = i as f64 / 10.0;
            // +930 MiB over 14 s, then a page or two of jitter.
            let rss = 200.0 * MIB + 930.0 * MIB * (t / 14.0).min(1.0) + 4096.0 * (i % 3) as f64;
            store.push(&Sample::from_values(i, i * 100_000_000, &[rss]));
        }
        store.begin_frame(None);
        let (at, channel) = store.warmup().expect("the start-up is found");
        assert!(
            (at - 14.0).abs() < 1.0 && channel == "mem.rss",
            "{at} {channel}"
        );
        let a = store.analysis(0).unwrap();
        assert_eq!(a.verdict, Verdict::Flat, "{a:?}");
        assert!(a.drift.abs() < 65536.0, "drift and verdict agree: {a:?}");
        assert_eq!(a.severity, None);
    }

    /// A launched job that exits 8 s after its first reading ended during
    /// its start-up: its climb stops being projected once the exit is seen,
    /// as its receipt reads it. Not launched (`--pid`), the climb stays a
    /// leak.
    #[test]
    fn a_launched_job_that_exits_early_ended_during_its_start_up() {
        use flatline_analysis::{Note, Verdict};
        use flatline_telemetry::recording::EventKind;
        use flatline_telemetry::{ChannelSpec, Group, Unit};
        let verdicts = |launched: bool| {
            // A process's PSS before its USS: the USS, analysed first for
            // the PSS's sake (after the exit, the round-robin comes to the
            // PSS first with four channels), is read as the receipt reads
            // it too.
            let schema = Schema {
                channels: ["mem.rss", "pid7.pss", "pid7.uss", "pid7.rss"]
                    .map(|n| ChannelSpec::new(n, Unit::Bytes, Group::Memory))
                    .to_vec(),
            };
            let mut store = Store::new(schema, 10_000);
            let config: std::collections::BTreeMap<String, String> = if launched {
                [("command".to_string(), "python3 train.py".to_string())].into()
            } else {
                [("pid".to_string(), "4242".to_string())].into()
            };
            store.set_launched(&config);
            for i in 0..80u64 {
                let rss = 200e6 + 10e6 * i as f64 / 10.0 + 4096.0 * (i % 3) as f64;
                store.push(&Sample::from_values(
                    i,
                    i * 100_000_000,
                    &[rss, rss - 50e6, rss - 60e6, rss - 40e6],
                ));
            }
            store.begin_frame(None);
            let before: Vec<_> = (0..4).map(|c| store.analysis(c).unwrap().clone()).collect();
            store.push_event(Event {
                t_ns: 8_000_000_000,
                kind: EventKind::TargetExited { pid: 4242 },
            });
            store.begin_frame(None);
            let after: Vec<_> = (0..4).map(|c| store.analysis(c).unwrap().clone()).collect();
            (before, after)
        };
        let (before, after) = verdicts(true);
        for (b, a) in before.iter().zip(&after) {
            assert_eq!(b.verdict, Verdict::Linear, "{b:?}");
            assert_eq!(
                (a.verdict, a.note, a.time_to_limit_s),
                (Verdict::Insufficient, Some(Note::StartUp), None),
                "{a:?}"
            );
        }
        let (_, watched) = verdicts(false);
        for w in &watched {
            assert_eq!(w.verdict, Verdict::Linear, "{w:?}");
        }
    }

    /// A start-up's tail: after a 700 MiB start-up, two pages a second for
    /// 10 s is still starting, not a leak; the same two pages a second
    /// kept up past the settling time is growth, and so is a leak of
    /// 2 MiB/s at once (it outgrows the tail in seconds).
    #[test]
    fn growth_just_after_a_start_up_is_its_tail_until_it_outgrows_it() {
        use flatline_analysis::{Note, Verdict};
        use flatline_telemetry::{ChannelSpec, Group, Unit};
        const MIB: f64 = 1_048_576.0;
        let read = |seconds: u64, after: f64| {
            let schema = Schema {
                channels: vec![ChannelSpec::new("mem.rss", Unit::Bytes, Group::Memory)],
            };
            let mut store = Store::new(schema, 10_000);
            for i in 0..seconds * 10 {
                let t = i as f64 / 10.0;
                let rss =
                    100.0 * MIB + 700.0 * MIB * (t / 12.0).min(1.0) + after * (t - 12.0).max(0.0);
                let rss = (rss / 4096.0).floor() * 4096.0;
                store.push(&Sample::from_values(i, i * 100_000_000, &[rss]));
            }
            store.begin_frame(None);
            (
                store.warmup().map(|w| w.0),
                store.analysis(0).unwrap().clone(),
            )
        };
        let (at, tail) = read(24, 8192.0);
        assert!(at.is_some_and(|at| (at - 12.0).abs() < 1.0), "{at:?}");
        assert_eq!(tail.verdict, Verdict::Insufficient, "{tail:?}");
        assert!(
            matches!(tail.note, Some(Note::Settling { rise }) if (rise / (700.0 * MIB) - 1.0).abs() < 0.05),
            "{tail:?}"
        );
        assert!(tail.slope_per_s > 4096.0, "its trend is kept: {tail:?}");
        let (_, kept_up) = read(60, 8192.0);
        assert!(
            kept_up.verdict.is_growth() && kept_up.note.is_none(),
            "{kept_up:?}"
        );
        let (_, leak) = read(24, 2.0 * MIB);
        assert_eq!(leak.verdict, Verdict::Linear, "{leak:?}");
    }

    #[test]
    fn gpu_memory_is_bounded_by_the_gpus_latest_total() {
        use flatline_telemetry::{ChannelSpec, Group, Unit};
        let ch = |name: &str| ChannelSpec::new(name, Unit::Bytes, Group::Gpu);
        let schema = Schema {
            channels: vec![ch("gpu0.used"), ch("gpu0.total"), ch("gpu1.used")],
        };
        let mut store = Store::new(schema, 10_000);
        const GIB: f64 = (1u64 << 30) as f64;
        // gpu0 fills at 1 GiB/s towards its 80 GiB; its total is read only now and
        // then (NaN between); gpu1 has no total channel, so no limit.
        for i in 0..100u64 {
            let total = if i % 10 == 0 { 80.0 * GIB } else { f64::NAN };
            let used = 10.0 * GIB + i as f64 * GIB / 10.0;
            store.push(&Sample::from_values(
                i,
                i * 100_000_000,
                &[used, total, used],
            ));
        }
        store.begin_frame(None);
        let a = store.analysis(0).unwrap();
        let left = a.time_to_limit_s.expect("gpu0.used has a limit");
        let want = (80.0 * GIB - a.final_value) / GIB;
        assert!((left / want - 1.0).abs() < 0.05, "{left} s, want {want} s");
        assert_eq!(store.analysis(2).unwrap().time_to_limit_s, None);
    }
}
