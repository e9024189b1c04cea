//! [`RecordingSetup`]: the one way a recording is set up, whatever makes it.
//!
//! `soak`, `live --record`, `watch` (window and headless), `bench
//! --telemetry-hz` and `import` all describe their run here, so their headers
//! carry the same fields for the same facts: the workload's settings
//! ([`RecordingSetup::workload`]), a watch's target ([`RecordingSetup::watch`]),
//! the sampling rate, the host (collected once, redacted on request).

use std::collections::BTreeMap;
use std::path::Path;

use crate::gpu::GpuFacts;
use crate::recording::{Header, HostFacts, RecordingError, RecordingWriter};
use crate::{Schema, Unavailable};
use flatline_arena::workload::driver::{DriverConfig, Workload};

/// What a recording's header says about its run, before the run starts.
#[derive(Debug, Clone)]
pub struct RecordingSetup {
    /// What makes it: `soak`, `live`, `watch`, `bench`, `import`.
    pub source: String,
    /// The run's configuration, as `key = value` text.
    pub config: BTreeMap<String, String>,
    /// The host facts, once collected ([`RecordingSetup::collect_host`]);
    /// unknown until then (an imported log's host stays unknown).
    pub host: HostFacts,
    /// Leave the hostname out of the host facts.
    pub redact_host: bool,
    /// Free-form notes for the header.
    pub notes: Vec<String>,
    /// The run's place in a job (see [`Header::labels`]).
    pub labels: BTreeMap<String, String>,
}

impl RecordingSetup {
    /// A recording made by `source`; its host is unknown until collected.
    pub fn new(source: &str) -> Self {
        Self {
            source: source.into(),
            config: BTreeMap::new(),
            host: HostFacts::default(),
            redact_host: false,
            notes: Vec::new(),
            labels: BTreeMap::new(),
        }
    }

    /// Collects this machine's facts, with the GPUs NVML found (known once
    /// telemetry has started), without the hostname if asked.
    pub fn collect_host(&mut self, gpu: Option<GpuFacts>) -> &mut Self {
        let host = super::host::collect(gpu);
        self.host = if self.redact_host {
            host.redacted()
        } else {
            host
        };
        self
    }

    /// Sets one configuration field.
    pub fn set(&mut self, key: &str, value: impl ToString) -> &mut Self {
        self.config.insert(key.into(), value.to_string());
        self
    }

    /// The sampling rate.
    pub fn hz(&mut self, hz: f64) -> &mut Self {
        self.set("hz", hz)
    }

    /// A built-in workload's settings: the workload, its pacing, and for
    /// ingest its batch, block and corpus size.
    pub fn workload(&mut self, cfg: &DriverConfig) -> &mut Self {
        self.set("workload", cfg.workload.name());
        if matches!(cfg.workload, Workload::Ops1b | Workload::Both) {
            self.set("layout", cfg.layout.name());
        }
        if let Some(step) = cfg.step {
            self.set("step_ms", step.as_nanos() as f64 / 1e6);
        }
        if cfg.workload.ingests() {
            self.set("batch", cfg.batch);
            self.set("block", cfg.block);
            self.set("corpus_tokens", cfg.corpus_tokens);
        }
        self
    }

    /// A watched process: its PID, the command flatline started (if it did)
    /// and the step log it tails (if any).
    pub fn watch(&mut self, pid: u32, command: &[String], log: Option<&Path>) -> &mut Self {
        self.set("pid", pid);
        if !command.is_empty() {
            self.set("command", command.join(" "));
        }
        if let Some(log) = log {
            self.set("log", log.display());
        }
        self
    }

    /// The header of a recording of `schema` that starts now.
    pub fn header(&self, schema: Schema, unavailable: Vec<Unavailable>) -> Header {
        let mut h = Header::new(
            &self.source,
            schema,
            self.host.clone(),
            self.config.clone(),
            unavailable,
        );
        h.notes = self.notes.clone();
        h.labels = self.labels.clone();
        h
    }

    /// Creates the recording at `path` (never over an existing file unless
    /// `force`) with the header of a run that starts now.
    pub fn create(
        &self,
        path: &Path,
        force: bool,
        schema: &Schema,
        unavailable: &[Unavailable],
    ) -> Result<RecordingWriter, RecordingError> {
        RecordingWriter::create(
            path,
            &self.header(schema.clone(), unavailable.to_vec()),
            force,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_facts_make_the_same_fields() {
        let mut a = RecordingSetup::new("soak");
        a.hz(100.0).workload(&DriverConfig {
            step: Some(std::time::Duration::from_millis(150)),
            ..DriverConfig::default()
        });
        let keys: Vec<&str> = a.config.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "batch",
                "block",
                "corpus_tokens",
                "hz",
                "layout",
                "step_ms",
                "workload"
            ]
        );
        assert_eq!(a.config["layout"], "aos");
        assert_eq!(a.config["step_ms"], "150");
        let mut w = RecordingSetup::new("watch");
        w.hz(10.0).watch(
            42,
            &["python".into(), "train.py".into()],
            Some(Path::new("s.csv")),
        );
        assert_eq!(w.config["command"], "python train.py");
        assert_eq!(w.config["log"], "s.csv");
        let h = w.header(Schema::default(), vec![]);
        assert_eq!(
            (h.source.as_str(), h.config["pid"].as_str()),
            ("watch", "42")
        );
    }
}
