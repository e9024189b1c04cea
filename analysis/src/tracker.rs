//! [`Tracker`]: a bounded history of one live channel, analysed on demand.

use super::{ChannelAnalysis, Context, Kind, analyze};

/// Keeps every point until `capacity`, then thins evenly: each time it fills,
/// every other kept point goes and the stride doubles, so the history always
/// spans the whole run with at most `capacity` points. The latest point is
/// always kept. [`Tracker::analyze`] runs the same [`analyze`] as `report`
/// does, over what is kept: cost bounded by `capacity`, whatever the run's
/// length.
#[derive(Debug, Clone)]
pub struct Tracker {
    capacity: usize,
    stride: u64,
    seen: u64,
    t: Vec<f64>,
    v: Vec<f64>,
    steps: Vec<f64>,
    tokens: Vec<f64>,
    last: Option<[f64; 4]>,
}

impl Default for Tracker {
    fn default() -> Self {
        Self::new(4096)
    }
}

impl Tracker {
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(16);
        Self {
            capacity,
            stride: 1,
            seen: 0,
            t: Vec::with_capacity(capacity),
            v: Vec::with_capacity(capacity),
            steps: Vec::with_capacity(capacity),
            tokens: Vec::with_capacity(capacity),
            last: None,
        }
    }

    /// Adds a reading (`NaN` values are ignored); `steps` and `tokens` are the
    /// training axes at that moment, `NaN` when unknown.
    pub fn push(&mut self, t_s: f64, v: f64, steps: f64, tokens: f64) {
        if v.is_nan() {
            return;
        }
        self.last = Some([t_s, v, steps, tokens]);
        let keep = self.seen.is_multiple_of(self.stride);
        self.seen += 1;
        if !keep {
            return;
        }
        if self.t.len() == self.capacity {
            for col in [&mut self.t, &mut self.v, &mut self.steps, &mut self.tokens] {
                let mut i = 0;
                col.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
            }
            self.stride *= 2;
            if !(self.seen - 1).is_multiple_of(self.stride) {
                return;
            }
        }
        self.t.push(t_s);
        self.v.push(v);
        self.steps.push(steps);
        self.tokens.push(tokens);
    }

    /// Points kept now.
    pub fn len(&self) -> usize {
        self.t.len()
    }

    pub fn is_empty(&self) -> bool {
        self.t.is_empty()
    }

    /// The kept points (times and values), without the latest reading.
    pub fn points(&self) -> (&[f64], &[f64]) {
        (&self.t, &self.v)
    }

    /// The latest reading.
    pub fn latest(&self) -> Option<f64> {
        self.last.map(|[_, v, ..]| v)
    }

    /// Readings pushed so far.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// Analyses what is kept (plus the latest reading) as `kind`.
    pub fn analyze(
        &self,
        kind: Kind,
        warmup_s: Option<f64>,
        limit: Option<f64>,
        min_growth: f64,
    ) -> ChannelAnalysis {
        self.analyze_until(kind, warmup_s, limit, min_growth, None)
    }

    /// As [`Tracker::analyze`], of the readings before `until` (stream
    /// seconds) only, where given: a job's teardown is no part of how it ran.
    pub fn analyze_until(
        &self,
        kind: Kind,
        warmup_s: Option<f64>,
        limit: Option<f64>,
        min_growth: f64,
        until: Option<f64>,
    ) -> ChannelAnalysis {
        let (mut t, mut v, mut steps, mut tokens) = (
            self.t.clone(),
            self.v.clone(),
            self.steps.clone(),
            self.tokens.clone(),
        );
        if let Some([lt, lv, ls, lk]) = self.last
            && t.last() != Some(&lt)
        {
            t.push(lt);
            v.push(lv);
            steps.push(ls);
            tokens.push(lk);
        }
        if let Some(end) = until {
            let keep = t.partition_point(|&x| x < end).max(1.min(t.len()));
            t.truncate(keep);
            v.truncate(keep);
            steps.truncate(keep);
            tokens.truncate(keep);
        }
        let axis = |a: &[f64]| a.iter().any(|x| !x.is_nan());
        let ctx = Context {
            kind,
            warmup_s,
            steps: axis(&steps).then_some(&steps[..]),
            tokens: axis(&tokens).then_some(&tokens[..]),
            limit,
            min_growth,
        };
        analyze(&t, &v, &ctx)
    }
}
