//! Full resolution where a thinned replay is zoomed in.
//!
//! A replay of a long recording holds every n-th sample (the budget in
//! `source.rs`); zoomed in far enough that the held samples are fewer than
//! the plot's pixel columns, the samples of the view (and half a view each
//! side, for panning) are read from the file through its seek index on a
//! thread of their own, and drawn instead. The window never waits on the
//! disk: until they arrive it draws what it holds.

use std::sync::mpsc::{Receiver, TryRecvError, channel};

use flatline_telemetry::recording::SampleIndex;

use crate::store::Series;

/// Most samples one detail read holds (a minute of 40 channels at 100 Hz
/// is 6,000): past that the view is wide enough for the held samples.
pub const DETAIL_MOST: usize = 200_000;

/// Samples of a time range at full resolution.
#[derive(Debug)]
pub struct Loaded {
    /// The range asked for, in seconds since the start.
    pub span: [f64; 2],
    pub times: Vec<f64>,
    /// One per channel of the store, with its pyramid.
    pub series: Vec<Series>,
}

/// A read in flight: the span asked for and where its result arrives.
type Loading = ([f64; 2], Receiver<Result<Loaded, String>>);

/// The detail of a thinned replay: what is loaded and what is loading.
#[derive(Debug)]
pub struct Detail {
    index: SampleIndex,
    /// Samples per second in the file, on average.
    rate: f64,
    loading: Option<Loading>,
    pub loaded: Option<Loaded>,
    /// The last read that failed (the file changed or went away), shown in
    /// the status line rather than retried every frame.
    pub failed: Option<String>,
}

impl Detail {
    pub fn new(index: SampleIndex, duration_s: f64) -> Self {
        let rate = index.samples as f64 / duration_s.max(1e-9);
        Self {
            index,
            rate,
            loading: None,
            loaded: None,
            failed: None,
        }
    }

    /// The loaded samples, if they cover `view` (seconds).
    pub fn covering(&self, view: [f64; 2]) -> Option<&Loaded> {
        self.loaded
            .as_ref()
            .filter(|l| l.span[0] <= view[0] && view[1] <= l.span[1])
    }

    /// Asks for the samples of `view` when the store holds fewer than
    /// `columns` there (`held`) and the file holds more; `repaint` is
    /// called when they arrive. Returns whether a read started.
    pub fn want(
        &mut self,
        view: [f64; 2],
        held: usize,
        columns: usize,
        repaint: impl Fn() + Send + 'static,
    ) -> bool {
        let width = view[1] - view[0];
        let in_file = width * self.rate;
        if held >= columns
            || in_file <= held as f64 * 1.5
            || 2.0 * in_file > DETAIL_MOST as f64
            || self.covering(view).is_some()
            || self.failed.is_some()
            || self
                .loading
                .as_ref()
                .is_some_and(|(s, _)| s[0] <= view[0] && view[1] <= s[1])
        {
            return false;
        }
        let span = [(view[0] - width / 2.0).max(0.0), view[1] + width / 2.0];
        let (tx, rx) = channel();
        let index = self.index.clone();
        let spawned = std::thread::Builder::new()
            .name("flatline-detail".into())
            .spawn(move || {
                let ns = |s: f64| (s * 1e9) as u64;
                let read = index
                    .read_time(ns(span[0]), ns(span[1]), DETAIL_MOST)
                    .map(|got| Loaded {
                        span,
                        times: got.t_ns.iter().map(|&t| t as f64 / 1e9).collect(),
                        series: got.columns.into_iter().map(Series::from_values).collect(),
                    })
                    .map_err(|e| e.to_string());
                let _ = tx.send(read);
                repaint();
            });
        match spawned {
            Ok(_) => {
                self.loading = Some((span, rx));
                true
            }
            Err(e) => {
                self.failed = Some(format!("cannot start a reader: {e}"));
                false
            }
        }
    }

    /// Takes a finished read, if one finished.
    pub fn poll(&mut self) {
        let Some((_, rx)) = &self.loading else {
            return;
        };
        match rx.try_recv() {
            Ok(Ok(l)) => {
                self.loaded = Some(l);
                self.loading = None;
            }
            Ok(Err(e)) => {
                self.failed = Some(e);
                self.loading = None;
            }
            Err(TryRecvError::Empty) => {}
            Err(TryRecvError::Disconnected) => {
                self.failed = Some("the reader stopped".into());
                self.loading = None;
            }
        }
    }

    pub fn is_loading(&self) -> bool {
        self.loading.is_some()
    }
}
