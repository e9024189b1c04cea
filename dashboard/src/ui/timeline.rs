//! Play position through a recording: dashboard state, not a source's.

use std::time::Instant;

/// Play position through a recording.
#[derive(Debug, Clone)]
pub struct Timeline {
    pub playhead_s: f64,
    pub start_s: f64,
    pub end_s: f64,
    pub playing: bool,
    pub speed: f64,
    last_tick: Option<Instant>,
}

impl Timeline {
    pub fn new(start_s: f64, end_s: f64) -> Self {
        Self {
            playhead_s: end_s,
            start_s,
            end_s,
            playing: false,
            speed: 1.0,
            last_tick: None,
        }
    }

    /// Advances the playhead by the wall time since the last call × speed.
    pub fn tick(&mut self) {
        let now = Instant::now();
        if self.playing {
            if let Some(last) = self.last_tick {
                let dt = now.duration_since(last).as_secs_f64() * self.speed;
                self.playhead_s = (self.playhead_s + dt).min(self.end_s);
            }
            if self.playhead_s >= self.end_s {
                self.playing = false;
            }
        }
        self.last_tick = Some(now);
    }

    /// Starts playing; from the start if the playhead is at the end.
    pub fn play(&mut self) {
        if self.playhead_s >= self.end_s {
            self.playhead_s = self.start_s;
        }
        self.playing = true;
        self.last_tick = None;
    }

    pub fn pause(&mut self) {
        self.playing = false;
    }

    pub fn seek(&mut self, t_s: f64) {
        self.playhead_s = t_s.clamp(self.start_s, self.end_s);
    }

    /// Follows data that keeps arriving: the range grows to `[start_s,
    /// end_s]`, and a playhead that sat at the end stays at the end.
    pub fn follow(&mut self, start_s: f64, end_s: f64) {
        let at_end = self.playhead_s >= self.end_s;
        self.start_s = start_s;
        self.end_s = end_s;
        if at_end {
            self.playhead_s = end_s;
        }
    }
}
