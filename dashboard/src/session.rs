//! A recorded telemetry session: sampler → channel → recorder → file.
//! Shared by `soak`, headless `watch` and `bench --telemetry-hz`; the header
//! comes from the one [`RecordingSetup`] every recording is made with.

use std::path::Path;

use anyhow::{Context, Result};
use crossbeam_channel::{Receiver, Sender};
use flatline_runtime::recording::{
    Event, EventKind, Recorder, RecorderSummary, RecordingSetup, event_channel,
};
use flatline_runtime::telemetry::{self, Probe, SamplerConfig, SamplerExit, Schema, Unavailable};

#[derive(Debug)]
pub struct Session {
    pub schema: Schema,
    pub unavailable: Vec<Unavailable>,
    sampler: telemetry::Sampler,
    recorder: Recorder,
}

/// How a session ended.
#[derive(Debug)]
pub struct SessionEnd {
    pub recorder: RecorderSummary,
    pub exit: SamplerExit,
    pub dropped: u64,
}

impl Session {
    /// Starts telemetry with `cfg` and records it to `out` as `setup` says.
    pub fn start(
        setup: RecordingSetup,
        cfg: SamplerConfig,
        out: &Path,
        force: bool,
    ) -> Result<Self> {
        Self::start_with(setup, cfg, Vec::new(), event_channel(), out, force)
    }

    /// As [`Session::start`], with extra probes (a watched job's step log)
    /// and the event queue they already send to (see [`event_channel`]).
    pub fn start_with(
        mut setup: RecordingSetup,
        cfg: SamplerConfig,
        extra: Vec<Box<dyn Probe>>,
        events: (Sender<Event>, Receiver<Event>),
        out: &Path,
        force: bool,
    ) -> Result<Self> {
        let tel = telemetry::start_with(cfg, extra).context("starting telemetry")?;
        setup.collect_host(tel.gpu.clone());
        let writer = setup.create(out, force, &tel.schema, &tel.unavailable)?;
        let recorder = Recorder::spawn_with_events(writer, tel.samples, tel.changes, events)
            .context("starting the recorder")?;
        Ok(Self {
            schema: tel.schema,
            unavailable: tel.unavailable,
            sampler: tel.sampler,
            recorder,
        })
    }

    /// Records an event, stamped now on the samples' clock.
    pub fn event(&self, kind: EventKind) {
        self.recorder.event(Event {
            t_ns: self.sampler.elapsed_ns(),
            kind,
        });
    }

    pub fn samples_written(&self) -> u64 {
        self.recorder
            .stats()
            .samples
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn bytes_written(&self) -> u64 {
        self.recorder
            .stats()
            .bytes
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn dropped(&self) -> u64 {
        self.sampler.dropped()
    }

    /// A handle to grow the stream's schema from another thread.
    pub fn grow(&self) -> telemetry::GrowHandle {
        self.sampler.grow()
    }

    /// True once the sampler has ended on its own (the watched process exited).
    pub fn sampler_finished(&self) -> bool {
        self.sampler.is_finished()
    }

    /// Stops the sampler, then writes the rest and the footer.
    pub fn finish(self, end: &str) -> Result<SessionEnd> {
        let dropped = self.sampler.dropped();
        let exit = self.sampler.stop();
        let end = match exit {
            SamplerExit::TargetExited { .. } => "target exited",
            SamplerExit::Panicked => "sampler failed",
            _ => end,
        };
        let recorder = self
            .recorder
            .finish(end)
            .context("finishing the recording")?;
        Ok(SessionEnd {
            recorder,
            exit,
            dropped,
        })
    }
}
