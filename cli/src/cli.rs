//! Command-line grammar. The names here are the user-facing contract of
//! DESIGN.md: keep them stable, add freely.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use flatline_arena::workload::driver::Workload;
use flatline_arena::workload::ingest::DEFAULT_CORPUS_TOKENS;
pub use flatline_stream::session::OnWriteError;

#[derive(Debug, Parser)]
#[command(
    name = "flatline",
    version,
    about = "Measure memory drift of ML workloads: zero-allocation reference workloads, \
             allocator/page-table/VRAM telemetry, recordings and receipts.",
    long_about = None
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Open the dashboard on the built-in workloads (what bare `flatline` does).
    Live(LiveArgs),
    /// Open a recording in the dashboard; with --screenshot, save a PNG and exit.
    Replay(ReplayArgs),
    /// Time a reference workload and print its figures beside its baseline.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Run the built-in workloads headless for a while with telemetry, write a
    /// recording and print its receipt.
    Soak(SoakArgs),
    /// Watch a running process (a training job) by PID, or start one after `--`.
    Watch(WatchArgs),
    /// Print the receipt of a recording.
    Report(ReportArgs),
    /// Two recordings side by side: open them in one window, or with
    /// --format print what differs (before and after a fix, arena and loader).
    Compare(CompareArgs),
    /// Many recordings of one job (a rank or node each): which one is
    /// different? A row per recording, and the ranks whose memory grows
    /// when the others' does not.
    Fleet(FleetArgs),
    /// Turn a training job's log (CSV, JSON lines, trainer_state.json, saved
    /// console output) into a recording.
    Import(ImportArgs),
    /// Add a marker to a running watch, soak or live ("here I changed X").
    Mark(MarkArgs),
    /// Write a recording in the field's formats: its samples as CSV, its
    /// allocation sites as a pprof heap profile, the run as a Perfetto or
    /// Chrome trace (beside a torch.profiler trace with --merge).
    Export(ExportArgs),
    /// Write a synthetic recording with the shapes real runs have (flat,
    /// slow and late leaks, staircases, sawtooth, counters, gauges, workers
    /// that come and go), for tests, demos and long-recording benchmarks.
    Synth(SynthArgs),
    /// Read a password on standard input and print its bcrypt hash, for
    /// `basic_auth_users` in a --web-config file.
    HashPassword(HashPasswordArgs),
    /// (Internal) the built-in workloads with telemetry, recorded into FILE
    /// until standard input closes: what a live window runs in a child process.
    #[command(hide = true)]
    Serve(ServeArgs),
}

/// How the window draws: what it costs the machine it runs on.
#[derive(Debug, Clone, Default, Args)]
pub struct WindowArgs {
    /// Most frames a second the window draws while new data arrives or a
    /// replay plays (default: the sample rate, at most 5 for a live or watched
    /// stream, 30 for a replay). With nothing new to show it draws nothing.
    #[arg(long, value_name = "N", value_parser = positive_rate)]
    pub fps: Option<f64>,
    /// Which renderer draws the window: glow (OpenGL; the default: cheaper
    /// under a software rasteriser) or wgpu.
    #[arg(long, value_enum, value_name = "WHICH")]
    pub renderer: Option<RendererArg>,
}

/// How `bench ops1b` lays out the ring (see `ops1b::Layout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum LayoutArg {
    /// 64-byte records, one cache line an operation (the seed's).
    #[default]
    Aos,
    /// The two hot fields in u32 arrays of their own, beside the records.
    Soa,
}

impl From<LayoutArg> for flatline_arena::workload::ops1b::Layout {
    fn from(l: LayoutArg) -> Self {
        match l {
            LayoutArg::Aos => Self::Aos,
            LayoutArg::Soa => Self::Soa,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RendererArg {
    Glow,
    Wgpu,
}

/// Where to serve the stream's metrics to Prometheus, and what to alert on.
#[derive(Debug, Clone, Default, Args)]
pub struct PrometheusArgs {
    /// Serve /metrics in Prometheus's text format at ADDR (e.g.
    /// 127.0.0.1:9464; every interface, 0.0.0.0:9464, only when you ask): the
    /// latest value, slope, drift, verdict, time to limit and severity of
    /// every channel, refreshed once a second.
    #[arg(long, value_name = "ADDR")]
    pub prometheus: Option<std::net::SocketAddr>,
    /// TLS and basic auth for --prometheus, in the web-config YAML the
    /// Prometheus exporters read (`tls_server_config` with `cert_file`,
    /// `key_file`, optional `client_ca_file`; `basic_auth_users` with
    /// bcrypt hashes, which `flatline hash-password` makes).
    #[arg(long, value_name = "FILE", requires = "prometheus")]
    pub web_config: Option<std::path::PathBuf>,
    /// Alert when EXPR begins to hold (checked once a second; repeatable):
    /// `CHANNEL [value|drift|slope|time_to_limit|severity] OP THRESHOLD`,
    /// e.g. `tree.pss > 20GiB`, `mem.rss slope > 10MiB/min`,
    /// `gpu0.used time_to_limit < 2h`, `any severity >= warning`. A firing
    /// prints a line on stderr and marks the recording. A CHANNEL no stream
    /// can have (no declared channel, nor a job's `log.`, `torch.` or
    /// `progress.` key) is refused before anything starts.
    #[arg(long, value_name = "EXPR", value_parser = flatline_export::alert::parse)]
    pub alert: Vec<flatline_export::alert::Alert>,
    /// Run CMD (with `sh -c`) once per firing, the alert in its environment:
    /// FLATLINE_ALERT, FLATLINE_ALERT_CHANNEL, FLATLINE_ALERT_MEASURE,
    /// FLATLINE_ALERT_VALUE, FLATLINE_ALERT_HOST, FLATLINE_ALERT_PID.
    #[arg(long, value_name = "CMD", requires = "alert")]
    pub on_alert: Option<String>,
    /// Push every channel, its verdict, slope and time to limit, and each
    /// growth (who, what memory, which line), to an OpenTelemetry
    /// collector over OTLP/HTTP (protobuf), e.g. http://127.0.0.1:4318 or
    /// https://… (`/v1/metrics` is added unless the URL ends in it), with
    /// deaths and findings as log records (`/v1/logs`). Without a URL,
    /// OTEL_EXPORTER_OTLP_ENDPOINT (or …_METRICS_ENDPOINT) says where;
    /// OTEL_EXPORTER_OTLP_HEADERS, …_CERTIFICATE, …_COMPRESSION (gzip) and
    /// …_TIMEOUT are read too. A collector that is down is said once and
    /// retried; sampling never waits for it.
    #[arg(long, value_name = "URL", num_args = 0..=1, default_missing_value = "", value_parser = otlp_transport)]
    pub otlp: Option<flatline_export::otlp::config::Transport>,
    /// A header sent with every OTLP request (repeatable), e.g.
    /// `authorization=Bearer …`; over one of the same name from
    /// OTEL_EXPORTER_OTLP_HEADERS.
    #[arg(long, value_name = "KEY=VALUE", value_parser = flatline_export::otlp::config::parse_header, requires = "otlp")]
    pub otlp_header: Vec<(String, String)>,
    /// Seconds between two OTLP exports.
    #[arg(long, value_name = "S", default_value_t = 10.0, value_parser = seconds, requires = "otlp")]
    pub otlp_every: f64,
}

/// `--otlp [URL]`: where and how to send, the URL (if given) over
/// OpenTelemetry's `OTEL_EXPORTER_OTLP_*` variables, read once here.
fn otlp_transport(s: &str) -> Result<flatline_export::otlp::config::Transport, String> {
    let given = match s.trim() {
        "" => None,
        url => Some(flatline_export::otlp::parse_endpoint(url)?),
    };
    flatline_export::otlp::config::transport(Some(given), &[], |k| std::env::var(k).ok())?
        .ok_or_else(|| "OTLP was asked for".to_owned())
}

/// Where and how a run's recording is written: `watch`'s and `soak`'s.
#[derive(Debug, Clone, Args)]
pub struct RecordArgs {
    /// Where to write the recording (default: recordings/soak-<UTC time>.flr
    /// for soak, recordings/watch-<pid>-<UTC time>.flr for a headless watch;
    /// a watch with a window keeps one only when asked).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Overwrite FILE if it exists.
    #[arg(long)]
    pub force: bool,
    /// Record "redacted" instead of this machine's host name (for recordings
    /// you will share).
    #[arg(long)]
    pub redact_host: bool,
    /// When the recording cannot be written (a full disk): stop, or keep
    /// sampling and retry.
    #[arg(long, value_name = "WHAT", value_parser = OnWriteErrorParser, default_value = "keep-sampling")]
    pub on_write_error: OnWriteError,
}

/// A run's place in a job of many ranks and nodes.
#[derive(Debug, Clone, Default, Args)]
pub struct LabelArgs {
    /// Label the run (repeatable): in the recording's header, its receipts
    /// and caption, and on every Prometheus series. `rank`, `local_rank`,
    /// `world_size`, `node_rank`, `slurm_procid`, `slurm_job_id` and
    /// `torchelastic_run_id` are also read from the watched process's
    /// environment (RANK, LOCAL_RANK, …); a label given here wins.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = flatline_telemetry::recording::labels::parse)]
    pub labels: Vec<(String, String)>,
}

impl LabelArgs {
    /// The labels of a run whose job environment is `env`'s, with the ones
    /// given by hand over them.
    pub fn over(&self, env: BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut out = env;
        out.extend(self.labels.iter().cloned());
        out
    }
}

impl PrometheusArgs {
    /// The flags as plain values.
    pub fn config(&self) -> flatline_stream::session::ExportConfig {
        flatline_stream::session::ExportConfig {
            addr: self.prometheus,
            web_config: self.web_config.clone(),
            alerts: self.alert.clone(),
            on_alert: self.on_alert.clone(),
            otlp: self.otlp.clone().map(|mut transport| {
                for (k, v) in &self.otlp_header {
                    transport
                        .headers
                        .retain(|(h, _)| !h.eq_ignore_ascii_case(k));
                    transport.headers.push((k.clone(), v.clone()));
                }
                flatline_export::otlp::OtlpConfig {
                    transport,
                    every: std::time::Duration::from_secs_f64(self.otlp_every),
                }
            }),
        }
    }

    /// What to follow the stream of `pid` for, if anything.
    pub fn export(&self, pid: u32) -> Option<flatline_stream::session::Export> {
        self.config().for_pid(pid)
    }
}

#[derive(Debug, Clone, Args)]
pub struct HashPasswordArgs {
    /// bcrypt's cost: each step doubles the time a check takes (10 is what
    /// the Prometheus exporters' docs use).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(4..=31))]
    pub cost: u32,
}

#[derive(Debug, Clone, Args)]
pub struct LiveArgs {
    #[command(flatten)]
    pub window: WindowArgs,
    /// Which workload to run.
    #[arg(long, value_enum, default_value_t = WorkloadArg::Both)]
    pub workload: WorkloadArg,
    /// Telemetry samples per second.
    #[arg(long, default_value_t = 100.0, value_parser = positive_rate)]
    pub hz: f64,
    /// The ops1b ring's layout: 64-byte records (aos) or the two hot fields
    /// in arrays of their own (soa).
    #[arg(long, value_enum, default_value_t = LayoutArg::Aos)]
    pub layout: LayoutArg,
    /// Record from the start into FILE (recording can also be switched on in the window).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// When the recording cannot be written (a full disk): stop recording,
    /// or keep sampling and retry; the window says it in red either way.
    #[arg(long, value_name = "WHAT", value_parser = OnWriteErrorParser, default_value = "keep-sampling")]
    pub on_write_error: OnWriteError,
    #[command(flatten)]
    pub export: PrometheusArgs,
    #[command(flatten)]
    pub labels: LabelArgs,
}

impl LiveArgs {
    /// What its workload process (`serve`) runs: the one way from `live`'s
    /// flags to the child's.
    pub fn serve_config(&self) -> flatline_stream::source::ServeConfig {
        flatline_stream::source::ServeConfig {
            workload: self.workload.into(),
            hz: self.hz,
            layout: self.layout.into(),
            on_write_error: self.on_write_error,
            export: self.export.config(),
            labels: self.labels.labels.clone(),
        }
    }
}

impl Default for LiveArgs {
    fn default() -> Self {
        Self {
            workload: WorkloadArg::Both,
            hz: 100.0,
            layout: LayoutArg::Aos,
            record: None,
            on_write_error: OnWriteError::KeepSampling,
            export: PrometheusArgs::default(),
            labels: LabelArgs::default(),
            window: WindowArgs::default(),
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub window: WindowArgs,
    /// The recording.
    pub file: PathBuf,
    /// Keep reading the file as another process writes it.
    #[arg(long, conflicts_with = "screenshot")]
    pub follow: bool,
    /// Render the whole recording, save this PNG and exit.
    #[arg(long, value_name = "PNG")]
    pub screenshot: Option<PathBuf>,
    /// Window size, WIDTHxHEIGHT.
    #[arg(long, value_name = "WxH", default_value = "1600x1000", value_parser = size)]
    pub size: [f32; 2],
}

fn size(s: &str) -> Result<[f32; 2], String> {
    let (w, h) = s
        .split_once(['x', 'X'])
        .ok_or("expected WIDTHxHEIGHT, e.g. 1600x1000")?;
    let p = |v: &str| {
        v.trim()
            .parse::<u32>()
            .ok()
            .filter(|v| (200..=8192).contains(v))
    };
    match (p(w), p(h)) {
        (Some(w), Some(h)) => Ok([w as f32, h as f32]),
        _ => Err("each side must be a whole number of pixels from 200 to 8192".into()),
    }
}

#[derive(Debug, Clone, Args)]
pub struct WatchArgs {
    #[command(flatten)]
    pub window: WindowArgs,
    /// The process to watch.
    #[arg(long, conflicts_with = "command")]
    pub pid: Option<u32>,
    /// The job's step log, tailed as it grows: CSV with a header row, or JSON
    /// lines. Waited for if it does not exist yet.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// How long to wait for the step log's first line.
    #[arg(long, value_name = "S", default_value_t = 120.0, value_parser = seconds)]
    pub log_wait_s: f64,
    /// Samples per second.
    #[arg(long, default_value_t = 10.0, value_parser = positive_rate)]
    pub hz: f64,
    /// Stop after this many seconds (default: when the process exits). A
    /// command started here is stopped too: SIGTERM, then SIGKILL 5 s later.
    #[arg(long, value_parser = seconds)]
    pub seconds: Option<f64>,
    /// No window: record, then print the receipt.
    #[arg(long)]
    pub headless: bool,
    #[command(flatten)]
    pub export: PrometheusArgs,
    #[command(flatten)]
    pub labels: LabelArgs,
    #[command(flatten)]
    pub recording: RecordArgs,
    /// Read the memory limit, use and OOM evidence from this memory cgroup
    /// folder (v1 or v2, by the files it holds): a container's or a
    /// Kubernetes pod's, watched from the host. Default: the watched
    /// process's own cgroup.
    #[arg(long, value_name = "DIR", value_parser = cgroup_dir)]
    pub cgroup: Option<PathBuf>,
    /// Watch the process alone, not its descendants (by default every child,
    /// DataLoader worker and rank is followed: `tree.*` and `pid<N>.*`).
    #[arg(long)]
    pub no_tree: bool,
    /// Follow the tree's sums (`tree.*`) but give processes no channels of
    /// their own.
    #[arg(long, conflicts_with = "no_tree")]
    pub no_per_process: bool,
    /// Which of a started command's outputs to read steps, metrics and
    /// markers from (nanoGPT, Hugging Face, torchrun, key=value lines). Both
    /// are passed through unchanged either way. Default: both.
    #[arg(long, value_enum, value_name = "WHICH")]
    pub steps_from: Option<StepsFrom>,
    /// For output nothing built in reads: a regular expression whose named
    /// groups are the step (`step`) and the metrics (any other name, e.g.
    /// `^\[(?P<step>\d+)/\d+\] L=(?P<loss>[0-9.]+)`). Lines it does not match
    /// are read as usual.
    #[arg(long, value_name = "REGEX", value_parser = step_pattern)]
    pub step_pattern: Option<flatline_telemetry::output::StepPattern>,
    /// Which code holds the memory: start the command with flatline's
    /// allocation-site library preloaded (sampled allocations, their stacks
    /// and Python lines; `site<N>.live` and `pid<N>.alloc_live`, the
    /// receipt's `sites`). With --pid the library is loaded into the running
    /// process instead (ptrace and its own dlopen; its sites count from the
    /// attach, and it stops sampling when the watch ends).
    #[arg(long)]
    pub sites: bool,
    /// Sample one allocation per this many bytes allocated, on average
    /// (with --sites).
    #[arg(long, value_name = "BYTES", default_value_t = 512 * 1024, requires = "sites",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub sites_every: u64,
    /// A command to start and watch; flatline exits with its exit code (0 if
    /// flatline stopped it at --seconds or when the window closed).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `--cgroup DIR`: a folder that reads as a memory cgroup, checked before
/// anything starts.
fn cgroup_dir(s: &str) -> Result<PathBuf, String> {
    let dir = PathBuf::from(s);
    flatline_telemetry::cgroup::CgroupProbe::at(&dir, None).map_err(|e| e.to_string())?;
    Ok(dir)
}

fn step_pattern(s: &str) -> Result<flatline_telemetry::output::StepPattern, String> {
    flatline_telemetry::output::StepPattern::new(s).map_err(|e| e.to_string())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StepsFrom {
    Stdout,
    Stderr,
    Both,
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WorkloadArg {
    Ops1b,
    Ingest,
    Both,
    Idle,
    /// The allocating per-sample loader ingest replaces, paced like ingest.
    IngestBaseline,
}

impl From<WorkloadArg> for Workload {
    fn from(w: WorkloadArg) -> Self {
        match w {
            WorkloadArg::Ops1b => Workload::Ops1b,
            WorkloadArg::Ingest => Workload::Ingest,
            WorkloadArg::Both => Workload::Both,
            WorkloadArg::Idle => Workload::Idle,
            WorkloadArg::IngestBaseline => Workload::IngestBaseline,
        }
    }
}

/// The built-in workloads as `soak` and the live window's `serve` run them.
#[derive(Debug, Clone, Args)]
pub struct WorkloadOpts {
    /// Which workload to run.
    #[arg(long, value_enum, default_value_t = WorkloadArg::Both)]
    pub workload: WorkloadArg,
    /// Telemetry samples per second.
    #[arg(long, default_value_t = 100.0, value_parser = positive_rate)]
    pub hz: f64,
    /// Pace ingest like a training loop: one batch per step of MS milliseconds,
    /// recording a step event each time.
    #[arg(long, value_name = "MS", value_parser = seconds)]
    pub step_ms: Option<f64>,
    /// The ops1b ring's layout: 64-byte records (aos) or the two hot fields
    /// in arrays of their own (soa); `work.ops_per_s` shows the difference.
    #[arg(long, value_enum, default_value_t = LayoutArg::Aos)]
    pub layout: LayoutArg,
}

#[derive(Debug, Clone, Args)]
pub struct SoakArgs {
    /// How long to run, in seconds.
    #[arg(long, value_parser = seconds)]
    pub seconds: f64,
    #[command(flatten)]
    pub run: WorkloadOpts,
    #[command(flatten)]
    pub recording: RecordArgs,
    #[command(flatten)]
    pub export: PrometheusArgs,
    #[command(flatten)]
    pub labels: LabelArgs,
    /// Read the memory limit, use and OOM evidence from this memory cgroup
    /// folder (v1 or v2, by the files it holds): a container's or a
    /// Kubernetes pod's, watched from the host. Default: the watched
    /// process's own cgroup.
    #[arg(long, value_name = "DIR", value_parser = cgroup_dir)]
    pub cgroup: Option<PathBuf>,
}

/// `--on-write-error`'s parser: its values and their help from the plain
/// type below the CLI (a type of another crate, so not clap's `ValueEnum`).
#[derive(Debug, Clone, Copy)]
pub struct OnWriteErrorParser;

impl clap::builder::TypedValueParser for OnWriteErrorParser {
    type Value = OnWriteError;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<OnWriteError, clap::Error> {
        let names: Vec<&str> = ON_WRITE_ERROR.iter().map(|v| v.name()).collect();
        clap::builder::PossibleValuesParser::new(names)
            .parse_ref(cmd, arg, value)
            .map(|v| {
                *ON_WRITE_ERROR
                    .iter()
                    .find(|w| w.name() == v)
                    .expect("one of the possible values")
            })
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(ON_WRITE_ERROR.iter().map(|v| {
            clap::builder::PossibleValue::new(v.name()).help(v.help())
        })))
    }
}

const ON_WRITE_ERROR: [OnWriteError; 2] = [OnWriteError::Stop, OnWriteError::KeepSampling];

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub run: WorkloadOpts,
    /// The stream's file (overwritten).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// What to do when the window's recording (`record PATH`) cannot be
    /// written; the stream's own file always keeps sampling and retries.
    #[arg(long, value_name = "WHAT", value_parser = OnWriteErrorParser, default_value = "keep-sampling")]
    pub on_write_error: OnWriteError,
    #[command(flatten)]
    pub export: PrometheusArgs,
    #[command(flatten)]
    pub labels: LabelArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Text,
    Md,
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// The recording.
    pub file: PathBuf,
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    pub format: ReportFormat,
    /// Seconds at the start left out of the analysis (default: found where
    /// the memory channels' start-up ends; none if they have none).
    #[arg(long, value_name = "S", value_parser = non_negative)]
    pub warmup_s: Option<f64>,
    /// Analyse only the samples from S seconds after the start on (the
    /// recording's start-up still applies where the part begins inside it).
    #[arg(long, value_name = "S", value_parser = non_negative)]
    pub from: Option<f64>,
    /// Analyse only the samples up to S seconds after the start.
    #[arg(long, value_name = "S", value_parser = non_negative)]
    pub to: Option<f64>,
    /// A gate for CI: exit 3 when a level channel has one of these verdicts
    /// (comma-separated: linear, staircase, noisy, flat, insufficient).
    /// `linear` and `staircase` count only growth, as the receipt's
    /// "growing" list does: memory that shrinks fails nothing.
    #[arg(long, value_name = "VERDICTS", value_delimiter = ',', value_parser = level_verdict)]
    pub fail_on: Vec<flatline_analysis::Verdict>,
    /// With `--fail-on`: only the channels whose names match one of these
    /// globs (comma-separated, e.g. `mem.rss,tree.*,gpu*.used`). A list that
    /// selects no level channel of the recording exits 2, naming those it
    /// has; a glob of it that selects nothing is warned of.
    #[arg(long, value_name = "GLOBS", value_delimiter = ',', value_parser = channel_glob, requires = "fail_on")]
    pub channels: Vec<glob::Pattern>,
    /// With `--fail-on`: judge a damaged recording on what could be read
    /// of it, instead of failing it with exit 4.
    #[arg(long, requires = "fail_on")]
    pub allow_damaged: bool,
    /// Most MiB of samples the analysis holds: a longer recording is
    /// analysed on every 2nd, 4th, 8th… sample (counts, first, last, min
    /// and max still cover every sample), so a week reports in bounded memory.
    #[arg(long, value_name = "MIB", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub memory_mib: u32,
}

#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    #[command(flatten)]
    pub window: WindowArgs,
    /// The first recording (A: the reference, "before").
    pub a: PathBuf,
    /// The second recording (B: "after"), compared with A.
    pub b: PathBuf,
    /// Print the comparison in this format instead of opening the window.
    #[arg(long, value_enum)]
    pub format: Option<ReportFormat>,
    /// What the two runs are aligned on: elapsed time, training step or
    /// tokens (default: step when both have steps, else time).
    #[arg(long, value_enum)]
    pub align: Option<AlignArg>,
    /// Render the compare view, save this PNG and exit.
    #[arg(long, value_name = "PNG")]
    pub screenshot: Option<PathBuf>,
    /// Window size, WIDTHxHEIGHT.
    #[arg(long, value_name = "WxH", default_value = "1600x1000", value_parser = size)]
    pub size: [f32; 2],
    /// Seconds at the start of each run left out of the analysis (default:
    /// found in each run on its own).
    #[arg(long, value_name = "S", value_parser = non_negative)]
    pub warmup_s: Option<f64>,
}

/// What two runs are lined up by (`--align`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AlignArg {
    Time,
    Step,
    Tokens,
}

impl From<AlignArg> for flatline_stream::store::Align {
    fn from(a: AlignArg) -> Self {
        match a {
            AlignArg::Time => Self::Time,
            AlignArg::Step => Self::Step,
            AlignArg::Tokens => Self::Tokens,
        }
    }
}

/// A verdict a level channel can have, by its receipt name.
fn level_verdict(s: &str) -> Result<flatline_analysis::Verdict, String> {
    use flatline_analysis::Verdict;
    const LEVEL: [Verdict; 5] = [
        Verdict::Linear,
        Verdict::Staircase,
        Verdict::Noisy,
        Verdict::Flat,
        Verdict::Insufficient,
    ];
    LEVEL
        .into_iter()
        .find(|v| v.as_str() == s.trim())
        .ok_or_else(|| {
            let names: Vec<&str> = LEVEL.iter().map(|v| v.as_str()).collect();
            format!("not a level channel's verdict; one of {}", names.join(", "))
        })
}

fn channel_glob(s: &str) -> Result<glob::Pattern, String> {
    glob::Pattern::new(s.trim()).map_err(|e| e.to_string())
}

#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// The job's log: a CSV step log (a header row of column names; a
    /// Lightning metrics.csv), JSON lines, a Hugging Face trainer_state.json,
    /// or saved console output (nanoGPT, Hugging Face, torchrun).
    #[arg(value_name = "LOG")]
    pub log: PathBuf,
    /// The recording to write.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Overwrite FILE if it exists.
    #[arg(long)]
    pub force: bool,
    /// For console output: a regular expression whose named groups are the
    /// step and the metrics (as for `watch --step-pattern`).
    #[arg(long, value_name = "REGEX", value_parser = step_pattern)]
    pub step_pattern: Option<flatline_telemetry::output::StepPattern>,
}

#[derive(Debug, Clone, Args)]
pub struct SynthArgs {
    /// How many hours the recording covers.
    #[arg(long, value_parser = seconds)]
    pub hours: f64,
    /// Samples per second.
    #[arg(long, default_value_t = 10.0, value_parser = positive_rate)]
    pub hz: f64,
    /// Channels, besides the process tree's workers (which come and go).
    #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u16).range(1..=400))]
    pub channels: u16,
    /// The random seed: the same seed writes the same samples.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write N recordings instead, one per rank of one job (RSS, the tree's
    /// PSS, a GPU's memory, steps and loss; labelled rank, local_rank,
    /// node_rank, world_size; 8 ranks a node), into the folder --out.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(2..=1024))]
    pub fleet: Option<u16>,
    /// With --fleet: this rank's tree.pss leaks 41 MiB an hour (repeatable).
    #[arg(long, value_name = "RANK", requires = "fleet")]
    pub leak: Vec<usize>,
    /// The recording to write (with --fleet: the folder).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Overwrite FILE if it exists.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Clone, Args)]
pub struct FleetArgs {
    /// The recordings (one per rank or node), or folders of them.
    #[arg(required = true, value_name = "FILES|DIR")]
    pub files: Vec<PathBuf>,
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    pub format: ReportFormat,
    /// Most MiB of samples held while one recording is analysed (they are
    /// read one after another, so this bounds the whole fleet's).
    #[arg(long, value_name = "MIB", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub memory_mib: u32,
    /// Open the fleet in a window: a plot per channel with every rank a
    /// faint line and the outliers strong, the table beside them (a click
    /// opens that rank's replay).
    #[arg(long, conflicts_with = "format")]
    pub window: bool,
    /// Render the window, save this PNG and exit.
    #[arg(long, value_name = "PNG", conflicts_with = "format")]
    pub screenshot: Option<PathBuf>,
    /// Window size, WIDTHxHEIGHT.
    #[arg(long, value_name = "WxH", default_value = "1600x1000", value_parser = size)]
    pub size: [f32; 2],
    /// Which renderer draws the window: glow (the default) or wgpu.
    #[arg(long, value_enum, value_name = "WHICH")]
    pub renderer: Option<RendererArg>,
}

#[derive(Debug, Clone, Args)]
pub struct MarkArgs {
    /// The marker's text (at most 4096 bytes).
    pub text: String,
    /// Which session: a flatline PID, the PID a watch watches, or the
    /// recording it writes. Needed only when several are running.
    #[arg(long, value_name = "PID|FILE")]
    pub to: Option<String>,
}

#[derive(Debug, Clone, Args)]
// Exactly one output; the flags of one output conflict with the others
// (clap does not check `requires` against a member of a required group).
#[command(group(clap::ArgGroup::new("output").required(true).multiple(false)
    .args(["csv", "pprof", "perfetto", "chrome"])))]
pub struct ExportArgs {
    /// The recording.
    pub file: PathBuf,
    /// The CSV to write (`-`: standard output; `./-` is a file named `-`).
    #[arg(long, value_name = "OUT")]
    pub csv: Option<PathBuf>,
    /// The allocation sites (`watch --sites`) as a gzipped pprof heap
    /// profile: held at --to (or the end), allocated since --from.
    #[arg(long, value_name = "OUT")]
    pub pprof: Option<PathBuf>,
    /// The run as a Perfetto trace: a counter per channel under each
    /// process, steps, markers, deaths, findings and the sites' heap.
    #[arg(long, value_name = "OUT")]
    pub perfetto: Option<PathBuf>,
    /// The same as Chrome's trace-event JSON.
    #[arg(long, value_name = "OUT")]
    pub chrome: Option<PathBuf>,
    /// With --chrome: a torch.profiler (Kineto) trace of the same run, to
    /// write into one file with it, on its time base.
    #[arg(long, value_name = "TRACE.json", conflicts_with_all = ["csv", "pprof", "perfetto"])]
    pub merge: Option<PathBuf>,
    /// With --pprof: what the held bytes gained from --from to --to, by
    /// stack, instead of what was held at --to.
    #[arg(long, conflicts_with_all = ["csv", "perfetto", "chrome"])]
    pub growth: bool,
    /// With --pprof, --perfetto or --chrome: one process only.
    #[arg(long, value_name = "N", conflicts_with = "csv")]
    pub pid: Option<u32>,
    /// Overwrite OUT if it exists.
    #[arg(long)]
    pub force: bool,
    /// Only samples from S seconds after the start on.
    #[arg(long, value_name = "S", value_parser = non_negative)]
    pub from: Option<f64>,
    /// Only samples up to S seconds after the start.
    #[arg(long, value_name = "S", value_parser = non_negative)]
    pub to: Option<f64>,
    /// With --csv: at most one row every S seconds (the first sample at or
    /// after each multiple of S): a week at 10 Hz with --every 60 is 10,080
    /// rows.
    #[arg(long, value_name = "S", value_parser = seconds, conflicts_with_all = ["pprof", "perfetto", "chrome"])]
    pub every: Option<f64>,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// The 1-billion-operation ring arena (65,536 × 64-byte orders).
    Ops1b(Ops1bArgs),
    /// nanoGPT-style batch token ingestion: the zero-allocation arena beside an
    /// allocating per-sample loader.
    Ingest(IngestArgs),
    /// Drift analysis of one synthetic channel (a noisy staircase at 100 Hz).
    Analysis(AnalysisBenchArgs),
    /// First sentences judged against the truth: every claim a receipt's
    /// first sentence makes (grows or not; whose; what memory; which line;
    /// settled; the allocator; damage; a lost stretch), on recordings of
    /// jobs whose truth is known by construction. Exits 1 on a wrong claim.
    Headlines(HeadlinesBenchArgs),
    /// The dashboard's CPU cost per frame (egui pass and tessellation, headless)
    /// on a synthetic recording, the time to open one, and the live store's memory.
    Ui(UiBenchArgs),
    /// What an open window costs: frames drawn and CPU a second, live on a
    /// synthetic stream and on a paused replay, under the current display.
    Window(WindowBenchArgs),
}

#[derive(Debug, Clone, Args)]
pub struct WindowBenchArgs {
    /// Seconds each case is measured.
    #[arg(long, default_value_t = 20.0, value_parser = seconds)]
    pub seconds: f64,
    /// The synthetic stream's samples a second (a watch's default).
    #[arg(long, default_value_t = 10.0, value_parser = positive_rate)]
    pub hz: f64,
    #[command(flatten)]
    pub window: WindowArgs,
    /// Fail (exit 1) when a case passes these % of one core: `LIVE,PAUSED`.
    #[arg(long, value_name = "LIVE,PAUSED", value_parser = limits)]
    pub fail_above: Option<(f64, f64)>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// (Internal) run one case in this process: `live` or `paused`.
    #[arg(long, hide = true)]
    pub case: Option<String>,
}

fn limits(s: &str) -> Result<(f64, f64), String> {
    let (a, b) = s.split_once(',').ok_or("two numbers: LIVE,PAUSED")?;
    let p = |x: &str| {
        x.trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v > 0.0)
            .ok_or_else(|| format!("{x:?} is not a positive number"))
    };
    Ok((p(a)?, p(b)?))
}

#[derive(Debug, Clone, Args)]
pub struct UiBenchArgs {
    /// Length of the synthetic recording, in hours at 100 Hz.
    #[arg(long, default_value_t = 1.0, value_parser = seconds)]
    pub hours: f64,
    /// Open this recording instead of writing a synthetic one (a week made
    /// by `flatline synth`, say): frames are timed on it at every zoom.
    #[arg(long)]
    pub file: Option<std::path::PathBuf>,
    /// Timed frames (after the warm-up frames that fill the analysis cache).
    #[arg(long, default_value_t = 30, value_parser = positive)]
    pub frames: usize,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct HeadlinesBenchArgs {
    /// The headline set (recordings of real jobs and the shipped ones,
    /// with a manifest of what each first sentence must and must not say).
    #[arg(long, value_name = "DIR", default_value = "recordings/headlines")]
    pub dir: PathBuf,
    /// The corpus of real recordings, judged by its labels.
    #[arg(long, value_name = "DIR", default_value = "recordings/corpus")]
    pub corpus: PathBuf,
    /// Print every recording's first sentence and its judged claims.
    #[arg(long)]
    pub verbose: bool,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct AnalysisBenchArgs {
    /// Points in the channel (360,000: one hour at 100 Hz).
    #[arg(long, default_value_t = 360_000, value_parser = positive)]
    pub points: usize,
    /// Timed runs; the median is reported.
    #[arg(long, default_value_t = 9, value_parser = positive)]
    pub runs: usize,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Measure the analysis instead: run it over the labelled corpus
    /// (synthetic series of known shape, and labelled channels of the
    /// shipped recordings) and print the confusion matrix and slope errors.
    #[arg(long)]
    pub corpus: bool,
    /// Score the receipts of the corpus of real recordings (its
    /// manifest's truth, per family and kind of channel): false alarms,
    /// growth found, and misses among growth the receipt says it could see.
    #[arg(long, conflicts_with_all = ["corpus", "delay"])]
    pub real: bool,
    /// Replay the corpus of real recordings cumulatively and print, per
    /// family, the time to the first growth verdict against the
    /// statistical limit, and any false alarm on the way.
    #[arg(long, conflicts_with = "corpus")]
    pub delay: bool,
    /// Seconds between two receipts of a `--delay` replay.
    #[arg(long, default_value_t = 2.0, value_parser = seconds)]
    pub step_s: f64,
    /// The corpus of real recordings (with its manifest.json).
    #[arg(long, value_name = "DIR", default_value = "recordings/corpus")]
    pub dir: PathBuf,
}

#[derive(Debug, Clone, Args)]
pub struct Ops1bArgs {
    /// Operations to run.
    #[arg(long, default_value_t = 1_000_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub ops: u64,
    /// The ring's layout: 64-byte records (aos) or the two hot fields in
    /// arrays of their own (soa).
    #[arg(long, value_enum, default_value_t = LayoutArg::Aos)]
    pub layout: LayoutArg,
    /// Sample telemetry at this rate while the bench runs (0: off).
    #[arg(long, value_name = "HZ", default_value_t = 0.0, value_parser = rate)]
    pub telemetry_hz: f64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct IngestArgs {
    /// Rows per batch (B).
    #[arg(long, default_value_t = 64, value_parser = positive)]
    pub batch: usize,
    /// Tokens per row (T).
    #[arg(long, default_value_t = 256, value_parser = positive)]
    pub block: usize,
    /// Token file to memory-map: little-endian u16s, nanoGPT's train.bin layout.
    #[arg(long, value_name = "FILE", conflicts_with = "corpus_tokens")]
    pub corpus: Option<PathBuf>,
    /// Size of the generated corpus, in tokens (values below 168), when no --corpus is given.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_CORPUS_TOKENS, value_parser = positive)]
    pub corpus_tokens: usize,
    /// Timed batches per loader.
    #[arg(long, default_value_t = 20_000, value_parser = positive)]
    pub iters: usize,
    /// Untimed warm-up batches per loader.
    #[arg(long, default_value_t = 1_000)]
    pub warmup: usize,
    /// Seed of the batch offsets; a generated corpus is drawn from SEED+1.
    #[arg(long, default_value_t = 1337)]
    pub seed: u64,
    /// Skip the allocating baseline loader.
    #[arg(long)]
    pub no_baseline: bool,
    /// Put the generated corpus in memory the kernel is asked to back with
    /// huge pages (transparent huge pages): shows what TLB misses cost the
    /// fill. Prints how much it got.
    #[arg(long, conflicts_with = "corpus")]
    pub huge_pages: bool,
    /// Also run the pipelined loader: a producer thread fills the next batch
    /// into a second slot while the consumer holds this one; prints the
    /// hand-off time (asking for the next batch to holding it).
    #[arg(long)]
    pub pipelined: bool,
    /// How long the pipelined consumer holds each batch, in microseconds: a
    /// stand-in for the training step (it reads the batch, then spins).
    #[arg(long, value_name = "US", default_value_t = 100.0, value_parser = non_negative, requires = "pipelined")]
    pub step_us: f64,
    /// Sample telemetry at this rate while the bench runs (0: off).
    #[arg(long, value_name = "HZ", default_value_t = 0.0, value_parser = rate)]
    pub telemetry_hz: f64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// A positive duration or count of seconds (milliseconds for --step-ms).
fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        Ok(_) => Err("must be a positive number".into()),
        Err(e) => Err(e.to_string()),
    }
}

fn non_negative(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(v),
        Ok(_) => Err("must be zero or more".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// The slowest sampling rate: one sample every 100 s. Slower, a watch
/// would wait longer than most jobs live for its first reading (`1e-9` Hz
/// is one sample in 32 years).
pub const MIN_HZ: f64 = 0.01;
/// The fastest sampling rate.
pub const MAX_HZ: f64 = 10_000.0;

/// A sampling rate from [`MIN_HZ`] to [`MAX_HZ`].
fn positive_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(hz) if (MIN_HZ..=MAX_HZ).contains(&hz) => Ok(hz),
        Ok(_) => Err(format!("must be from {MIN_HZ} to {MAX_HZ} a second")),
        Err(e) => Err(e.to_string()),
    }
}

/// A sampling rate: 0 (off), or from [`MIN_HZ`] to [`MAX_HZ`].
fn rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(hz) if hz == 0.0 || (MIN_HZ..=MAX_HZ).contains(&hz) => Ok(hz),
        Ok(_) => Err(format!(
            "must be 0 (off) or from {MIN_HZ} to {MAX_HZ} a second"
        )),
        Err(e) => Err(e.to_string()),
    }
}

fn positive(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_grammar_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn a_live_windows_child_parses_back_to_the_settings_it_was_given() {
        let cli = Cli::try_parse_from([
            "flatline",
            "live",
            "--workload=ingest",
            "--hz=37.5",
            "--layout=soa",
            "--on-write-error=stop",
            "--prometheus=127.0.0.1:9184",
            "--web-config=/etc/flatline/web config.yml",
            "--alert=mem.rss > 1GiB",
            "--on-alert=echo fired",
            "--otlp=http://collector:4318",
            "--otlp-every=2.5",
            "--label=rank=3",
            "--label=node_rank=1",
        ])
        .unwrap();
        let Some(Command::Live(live)) = cli.command else {
            panic!("parsed as {cli:?}")
        };
        let out = std::path::Path::new("/tmp/a stream.flr");
        let mut argv = vec![std::ffi::OsString::from("flatline")];
        argv.extend(live.serve_config().argv(out));
        let cli = Cli::try_parse_from(argv).unwrap();
        let Some(Command::Serve(s)) = cli.command else {
            panic!("parsed as {cli:?}")
        };
        assert_eq!(s.run.workload, live.workload);
        assert_eq!(s.run.hz, 37.5);
        assert_eq!(s.run.layout, LayoutArg::Soa);
        assert_eq!(s.on_write_error, OnWriteError::Stop);
        assert_eq!(s.out, out);
        assert_eq!(s.export.prometheus, live.export.prometheus);
        assert_eq!(
            s.export.web_config.as_deref(),
            Some(std::path::Path::new("/etc/flatline/web config.yml"))
        );
        assert_eq!(
            s.export.alert.iter().map(|a| &a.text).collect::<Vec<_>>(),
            ["mem.rss > 1GiB"]
        );
        assert_eq!(s.export.on_alert.as_deref(), Some("echo fired"));
        assert_eq!(
            s.export.otlp.as_ref().map(|e| e.metrics.url.as_str()),
            Some("http://collector:4318/v1/metrics")
        );
        assert_eq!(s.export.otlp_every, 2.5);
        assert_eq!(s.labels.labels, live.labels.labels);
        assert_eq!(s.labels.labels.len(), 2);
        // The defaults travel as defaults.
        let plain = flatline_stream::source::ServeConfig::new(Workload::Idle, 10.0);
        let mut argv = vec![std::ffi::OsString::from("flatline")];
        argv.extend(plain.argv(out));
        let Some(Command::Serve(s)) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("not serve")
        };
        assert_eq!((s.run.workload, s.run.hz), (WorkloadArg::Idle, 10.0));
        assert_eq!(
            (s.run.layout, s.on_write_error),
            (LayoutArg::Aos, OnWriteError::KeepSampling)
        );
    }

    #[test]
    fn defaults_follow_the_seed_workloads() {
        let cli = Cli::try_parse_from(["flatline", "bench", "ingest"]).unwrap();
        let Some(Command::Bench(BenchCommand::Ingest(a))) = cli.command else {
            panic!("parsed as {cli:?}")
        };
        assert_eq!((a.batch, a.block, a.iters), (64, 256, 20_000));
        assert_eq!(a.corpus_tokens, 16_671_459);
        assert!(a.corpus.is_none() && !a.no_baseline && !a.json);
        let cli = Cli::try_parse_from(["flatline", "bench", "ops1b", "--json"]).unwrap();
        let Some(Command::Bench(BenchCommand::Ops1b(a))) = cli.command else {
            panic!("parsed as {cli:?}")
        };
        assert_eq!(a.ops, 1_000_000_000);
        assert!(a.json);
        assert!(Cli::try_parse_from(["flatline"]).unwrap().command.is_none());
    }

    #[test]
    fn bad_flags_are_rejected() {
        for args in [
            &["flatline", "bench", "ops1b", "--ops", "0"][..],
            &["flatline", "bench", "ops1b", "--ops", "many"],
            &["flatline", "bench", "ingest", "--batch", "0"],
            &["flatline", "bench", "ingest", "--block", "-3"],
            &[
                "flatline",
                "bench",
                "ingest",
                "--corpus",
                "a.bin",
                "--corpus-tokens",
                "9",
            ],
            &["flatline", "bench", "fastest"],
            &["flatline", "bench", "ops1b", "--telemetry-hz", "-1"],
            &["flatline", "bench", "ops1b", "--telemetry-hz", "1e9"],
            &["flatline", "bench", "ingest", "--telemetry-hz", "fast"],
            &["flatline", "soak"],
            &["flatline", "soak", "--seconds", "0"],
            &[
                "flatline",
                "soak",
                "--seconds",
                "5",
                "--workload",
                "everything",
            ],
            &["flatline", "soak", "--seconds", "5", "--hz", "0"],
            &["flatline", "soak", "--seconds", "5", "--step-ms", "-1"],
            &["flatline", "report"],
            &["flatline", "report", "x.flr", "--format", "pdf"],
            &["flatline", "report", "x.flr", "--warmup-s", "-5"],
            &["flatline", "import", "a.csv"],
            &["flatline", "export", "a.flr"],
            &["flatline", "export", "a.flr", "--csv", "a", "--pprof", "b"],
            &["flatline", "watch", "--otlp", "ftp://c:4318", "--", "true"],
            &["flatline", "watch", "--otlp-every", "5", "--", "true"],
            &["flatline", "watch", "--otlp-header", "a=b", "--", "true"],
            &[
                "flatline",
                "watch",
                "--otlp",
                "http://c:4318",
                "--otlp-header",
                "no equals",
                "--",
                "true",
            ],
            &["flatline", "soak", "--seconds", "5", "--otlp", "c:4318"],
            &[
                "flatline",
                "export",
                "a.flr",
                "--perfetto",
                "a",
                "--merge",
                "k",
            ],
            &["flatline", "export", "a.flr", "--csv", "a", "--growth"],
            &["flatline", "export", "a.flr", "--csv", "a", "--pid", "3"],
            &[
                "flatline", "export", "a.flr", "--pprof", "a", "--every", "3",
            ],
            &["flatline", "replay"],
            &["flatline", "replay", "a.flr", "--size", "big"],
            &["flatline", "replay", "a.flr", "--size", "10x10"],
            &[
                "flatline",
                "replay",
                "a.flr",
                "--follow",
                "--screenshot",
                "a.png",
            ],
            &["flatline", "live", "--hz", "0"],
            &["flatline", "watch", "--pid", "12", "--", "sleep", "1"],
            &["flatline", "watch", "--pid", "x"],
            &["flatline", "watch", "--pid", "1", "--hz", "0"],
            &["flatline", "watch", "--pid", "1", "--hz", "1e-9"],
            &["flatline", "watch", "--pid", "1", "--hz", "0.001"],
            &["flatline", "soak", "--seconds", "5", "--hz", "10001"],
            &["flatline", "bench", "ops1b", "--telemetry-hz", "1e-9"],
            &["flatline", "--frobnicate"],
        ] {
            assert!(Cli::try_parse_from(args).is_err(), "{args:?} was accepted");
        }
    }
}
