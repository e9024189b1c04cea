//! A recorded telemetry session: sampler → channel → recorder → file.
//! Shared by `soak`, `bench --telemetry-hz` and (later) `live` and `watch`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use flatline_runtime::recording::{
    Event, EventKind, Header, Recorder, RecorderSummary, RecordingWriter,
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
    /// Starts telemetry with `cfg` and records it to `out`.
    pub fn start(
        source: &str,
        cfg: SamplerConfig,
        config: BTreeMap<String, String>,
        out: &Path,
        force: bool,
        redact_host: bool,
    ) -> Result<Self> {
        Self::start_with(source, cfg, Vec::new(), config, out, force, redact_host)
    }

    /// As [`Session::start`], with extra probes (a watched job's step log).
    pub fn start_with(
        source: &str,
        cfg: SamplerConfig,
        extra: Vec<Box<dyn Probe>>,
        config: BTreeMap<String, String>,
        out: &Path,
        force: bool,
        redact_host: bool,
    ) -> Result<Self> {
        let tel = telemetry::start_with(cfg, extra).context("starting telemetry")?;
        let host = flatline_runtime::recording::host::collect(tel.gpu.clone());
        let host = if redact_host { host.redacted() } else { host };
        let header = Header::new(
            source,
            tel.schema.clone(),
            host,
            config,
            tel.unavailable.clone(),
        );
        let writer = RecordingWriter::create(out, &header, force)?;
        let recorder = Recorder::spawn(writer, tel.samples).context("starting the recorder")?;
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
