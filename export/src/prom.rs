//! `--prometheus ADDR`: the live stream's values and their analysis served
//! at `/metrics` in Prometheus's text format, so that a cluster's own
//! Prometheus gathers one flatline per node.
//!
//! Three parts, none of which can slow the sampler:
//! - the stream arrives through a [`Tap`] of the recorder (bounded, never
//!   blocking; what it drops is counted and exported);
//! - the `flatline-export` thread keeps a [`LiveAnalysis`] of it and, once a
//!   second, encodes the whole exposition into one text that it publishes;
//! - the `flatline-http` thread ([`crate::http`]) answers scrapes with
//!   that text, event-driven, behind the door of a `--web-config`.

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use flatline_analysis::death;
use flatline_analysis::run::LiveRun;
use flatline_analysis::{Severity, Verdict};
use flatline_receipt::fmt::WORDS;
use flatline_telemetry::recording::{Event, EventKind, HostFacts, Item, Slots, TapStats};
use flatline_telemetry::{ChannelSpec, Kind, STEP_CHANNELS, Schema, TOKEN_CHANNELS, Unit};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::alert::{Alert, Alerts, Firing, Reading};
use crate::http::{Pages, Published, Server};
use crate::web::Door;
use crate::{otlp, pprof};
use bytes::Bytes;

/// How often the analysis and the exposition are refreshed.
pub const REFRESH: Duration = Duration::from_secs(1);

/// What the exporter says about the stream besides its channels.
#[derive(Debug, Clone)]
pub struct ExportSetup {
    /// The `host` label: the machine's name.
    pub host: String,
    /// The `pid` label of channels that are not one process's: the watched
    /// process, or flatline's own for a built-in workload.
    pub pid: u32,
    /// The run's place in a job (`rank`, `node_rank`, `--label`s): labels
    /// of every series, so PromQL can tell the ranks of one job apart.
    pub labels: Vec<(String, String)>,
    /// The host's facts (its RAM bounds host memory's time to limit).
    pub facts: HostFacts,
    /// `--alert`s, checked at each refresh.
    pub alerts: Vec<Alert>,
    /// `--on-alert`: run with `sh -c` once per firing.
    pub on_alert: Option<String>,
    /// Where a firing's marker goes (the recording's event queue).
    pub events: Option<Sender<Event>>,
    /// `--sites-every`: the heap profile's `period` (0: not sampling sites).
    pub sites_every: u64,
    /// The watched program, named in the heap profile ("": none).
    pub program: String,
    /// `--otlp`: where the metrics are pushed, and how often.
    pub otlp: Option<otlp::OtlpConfig>,
}

/// The sampler's own figures, read at each refresh.
pub type DroppedCount = Box<dyn Fn() -> u64 + Send>;

/// A running exporter; dropping it stops serving.
pub struct Exporter {
    server: Option<Server>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter")
            .field("addr", &self.addr())
            .finish()
    }
}

impl Exporter {
    /// Serves `listener`, if given (bound by the caller, so that a port in
    /// use is an error before anything starts), behind `door`, and starts
    /// following the stream that `rx` taps: its exposition and its alerts.
    pub fn start(
        listener: Option<TcpListener>,
        door: Option<Door>,
        schema: &Schema,
        setup: ExportSetup,
        rx: Receiver<Item>,
        tap: Arc<TapStats>,
        sampler_dropped: DroppedCount,
    ) -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let pusher = match &setup.otlp {
            Some(o) => Some(otlp::Pusher::start(o.transport.clone(), otlp::QUEUE)?),
            None => None,
        };
        let mut state = ExportState::new(schema, setup, tap, sampler_dropped);
        state.pusher = pusher;
        let published: Published = Arc::new(Mutex::new(state.pages()));
        let server = match listener {
            Some(l) => Some(Server::start(l, door, published.clone())?),
            None => None,
        };
        let consumer = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("flatline-export".into())
                .spawn(move || {
                    flatline_telemetry::alloc::mark_observer_thread();
                    state.run(&rx, &stop, &published);
                })
                .context("starting the exporter")?
        };
        Ok(Self {
            server,
            stop,
            threads: vec![consumer],
        })
    }

    /// Where `/metrics` is served, if it is (the port is known when 0 was
    /// asked).
    pub fn addr(&self) -> Option<SocketAddr> {
        self.server.as_ref().map(Server::addr)
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        drop(self.server.take());
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ChannelLabels {
    channel: String,
    unit: String,
    kind: String,
    host: String,
    pid: String,
    role: Option<String>,
    /// An allocation site's code (`site<N>.live`, `watch --sites`):
    /// `file:line function`.
    site: Option<String>,
    #[prometheus(flatten)]
    job: Vec<(String, String)>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerdictLabels {
    #[prometheus(flatten)]
    channel: ChannelLabels,
    verdict: String,
}

/// A severity as its gauge says it: 0 info (or none), 1 warning, 2 critical.
fn severity_value(s: Option<Severity>) -> f64 {
    match s {
        Some(Severity::Critical) => 2.0,
        Some(Severity::Warning) => 1.0,
        _ => 0.0,
    }
}

/// One growth of the answer: who grows, in what memory, at which line.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GrowthLabels {
    host: String,
    /// The growing process (the watched one where the growth is a sum of
    /// several: `process` then names them).
    pid: String,
    /// Its command's name (`python3`), or the processes of a sum.
    process: String,
    /// `main`, `worker`, … (empty where unknown).
    role: String,
    /// The growth's lead channel (`pid7830.rss`, `tree.pss`).
    channel: String,
    /// The class of memory most of it lives in: `heap`, `anon`, `file`,
    /// `shmem`, `stack`, `gpu`, `other` (empty where not read).
    memory_class: String,
    /// Its top allocation site (`file:line function`, `watch --sites`),
    /// as the sites' channels name it; empty where none was sampled.
    site: String,
    /// `linear`, `staircase`, …
    verdict: String,
    #[prometheus(flatten)]
    job: Vec<(String, String)>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HeadlineLabels {
    #[prometheus(flatten)]
    host: HostLabels,
    kind: String,
}

/// A process of the tree that died by the OOM killer or a signal.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeathLabels {
    #[prometheus(flatten)]
    host: HostLabels,
    victim_pid: String,
    victim_name: String,
    victim_role: String,
    /// `kernel_oom_killer`, `oom_killer` or `signal`.
    cause: String,
    signal: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HostLabels {
    host: String,
    pid: String,
    #[prometheus(flatten)]
    job: Vec<(String, String)>,
}

/// The exporter's side of the stream: the channels, their latest values,
/// their analysis, and the watcher's health.
struct ExportState {
    /// The stream's schema, live analyses, kept readings and events, and
    /// its one answer, made at each refresh.
    run: LiveRun,
    labels: Vec<ChannelLabels>,
    slots: Slots,
    setup: ExportSetup,
    steps: Option<usize>,
    tokens: Option<usize>,
    samples: u64,
    probe_errors: u64,
    tap: Arc<TapStats>,
    sampler_dropped: DroppedCount,
    alerts: Alerts,
    /// The latest sample's time, to stamp an alert's marker.
    last_t_ns: u64,
    /// The allocation sites (`watch --sites`), for `/debug/pprof/heap`,
    /// and the latest value of each of their channels by position.
    sites: pprof::Sites,
    site_positions: Vec<usize>,
    site_values: Vec<f64>,
    started: std::time::SystemTime,
    /// `--otlp`: the pusher, when the next export is due, and the wall
    /// clock's nanoseconds at the stream's zero (set by the first sample).
    pusher: Option<otlp::Pusher>,
    next_otlp: Instant,
    /// What was sent as OTLP log records already (a death by its pid, a
    /// growth by its channel, a finding by its kind and subject): each once.
    logged: std::collections::HashSet<String>,
    /// The recording's write faults and their ends, as the recorder noted
    /// them in the stream (`recording fault: …`, `recording resumed: …`),
    /// with their times: each an OTLP log record.
    write_notes: Vec<(u64, String)>,
    origin_ns: Option<u64>,
    first_t_ns: Option<u64>,
}

impl ExportState {
    fn new(
        schema: &Schema,
        setup: ExportSetup,
        tap: Arc<TapStats>,
        sampler_dropped: DroppedCount,
    ) -> Self {
        let rank = setup
            .labels
            .iter()
            .find(|(k, _)| k == "rank")
            .map(|(_, v)| v.clone());
        let run = LiveRun::new(&setup.facts, Some(setup.pid), rank);
        let alerts = Alerts::new(setup.alerts.clone());
        let mut s = Self {
            run,
            labels: Vec::new(),
            slots: Slots::new(schema.len()),
            setup,
            steps: None,
            tokens: None,
            samples: 0,
            probe_errors: 0,
            tap,
            sampler_dropped,
            alerts,
            last_t_ns: 0,
            sites: pprof::Sites::default(),
            site_positions: Vec::new(),
            site_values: Vec::new(),
            started: std::time::SystemTime::now(),
            pusher: None,
            next_otlp: Instant::now(),
            logged: Default::default(),
            write_notes: Vec::new(),
            origin_ns: None,
            first_t_ns: None,
        };
        s.sites = pprof::Sites::of(
            &Schema {
                channels: Vec::new(),
            },
            &s.setup.labels.iter().cloned().collect(),
        );
        s.add(&schema.channels);
        s
    }

    fn add(&mut self, specs: &[ChannelSpec]) {
        let from = self.run.schema().len();
        self.run.add_channels(specs);
        for spec in specs {
            self.labels.push(ChannelLabels {
                channel: spec.name.clone(),
                unit: base_unit(spec.unit).0.to_owned(),
                kind: spec.kind.name().to_owned(),
                host: self.setup.host.clone(),
                pid: spec
                    .labels
                    .get("pid")
                    .cloned()
                    .unwrap_or_else(|| self.setup.pid.to_string()),
                role: spec.labels.get("role").cloned(),
                site: spec.labels.get("function").map(|f| {
                    let at = |k: &str| spec.labels.get(k).map_or("", String::as_str);
                    format!("{}:{} {f}", at("file"), at("line"))
                }),
                job: self.setup.labels.clone(),
            });
        }
        let schema = self.run.schema();
        self.steps = schema.index_of_first(&STEP_CHANNELS);
        self.tokens = schema.index_of_first(&TOKEN_CHANNELS);
        self.sites.add(schema, from);
        self.site_positions = self.sites.positions();
        self.site_values.resize(schema.len(), f64::NAN);
    }

    fn take(&mut self, item: Item) {
        self.slots.apply(&item);
        match item {
            Item::Add(specs) => self.add(&specs),
            // A site whose process has ended holds nothing.
            Item::End(ended) => {
                for i in ended {
                    if let Some(v) = self.site_values.get_mut(i) {
                        *v = f64::NAN;
                    }
                }
            }
            Item::Sample(s) => {
                self.samples += 1;
                self.last_t_ns = s.t_ns;
                if self.origin_ns.is_none() {
                    self.origin_ns = Some(unix_ns().saturating_sub(s.t_ns));
                    self.first_t_ns = Some(s.t_ns);
                }
                let slots = &self.slots;
                let value = |i: usize| slots.value(&s, i);
                let at = |c: Option<usize>| c.map_or(f64::NAN, value);
                let (steps, tokens) = (at(self.steps), at(self.tokens));
                // The slow probe's channels have a value only in the
                // samples it read them for: the last one holds.
                for &i in &self.site_positions {
                    let v = value(i);
                    if v.is_finite() {
                        self.site_values[i] = v;
                    }
                }
                self.run.push(s.t_s(), value, steps, tokens);
            }
            Item::Event(e) => {
                self.run.take_event(&e);
                if let EventKind::Note(text) = &e.kind {
                    use flatline_telemetry::recording::{FAULT_NOTE, RESUMED_NOTE};
                    if text.starts_with(FAULT_NOTE) || text.starts_with(RESUMED_NOTE) {
                        // What the recording lost while the run went on:
                        // an OTLP log record each (a fault is rare; a few
                        // are kept).
                        if self.write_notes.len() < 64 {
                            self.write_notes.push((e.t_ns, text.clone()));
                        }
                    } else if !flatline_telemetry::recording::is_recording_note(text) {
                        self.probe_errors += 1;
                    }
                }
            }
        }
    }

    /// Takes what arrives, refreshing the exposition once a second, until
    /// the stream ends (then once more) or the exporter is stopped.
    fn run(&mut self, rx: &Receiver<Item>, stop: &AtomicBool, published: &Published) {
        let mut next = Instant::now() + REFRESH;
        while !stop.load(Relaxed) {
            match rx.recv_timeout(next.saturating_duration_since(Instant::now())) {
                Ok(item) => self.take(item),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.publish(published);
                    // The last values, whenever the last export was.
                    self.push_otlp();
                    return;
                }
            }
            if Instant::now() >= next {
                self.publish(published);
                next = Instant::now() + REFRESH;
            }
        }
    }

    fn publish(&mut self, published: &Published) {
        self.run.refresh(None, WORDS);
        let pages = self.pages();
        *published.lock().unwrap_or_else(|p| p.into_inner()) = pages;
        if let Some(o) = &self.setup.otlp
            && Instant::now() >= self.next_otlp
        {
            self.next_otlp = Instant::now() + o.every;
            self.push_otlp();
        }
        for f in self.check_alerts() {
            self.fire(&f);
        }
    }

    /// An OTLP export of the latest values and analysis, handed to the
    /// pusher (never waiting for it).
    fn push_otlp(&mut self) {
        let (Some(pusher), Some(origin)) = (&self.pusher, self.origin_ns) else {
            return;
        };
        let start = origin + self.first_t_ns.unwrap_or(0);
        let resource = self.otlp_resource();
        let req = otlp::request(
            &resource,
            &self.otlp_points(pusher.dropped()),
            start,
            origin + self.last_t_ns,
        );
        pusher.push(otlp::encode(&req));
        let records = self.new_records();
        if let (false, Some(pusher)) = (records.is_empty(), &self.pusher) {
            let req = otlp::logs_request(&resource, &records, origin + self.last_t_ns);
            pusher.push_signal(otlp::Signal::Logs, otlp::encode_logs(&req));
        }
    }

    /// The deaths, growths and findings of the answer not sent yet, as
    /// OTLP log records with their fields as attributes.
    fn new_records(&mut self) -> Vec<otlp::Record> {
        use otlp::{Attr, Record, Severity as S};
        let Some(answer) = self.run.answer() else {
            return Vec::new();
        };
        let mut out: Vec<(String, Record)> = Vec::new();
        for d in self.deaths() {
            let cause = serde_json::to_value(d.cause)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            let mut attributes = vec![
                ("flatline.kind", Attr::Str("death".into())),
                ("flatline.cause", Attr::Str(cause.clone())),
                ("process.pid", Attr::Int(i64::from(d.pid))),
                ("process.executable.name", Attr::Str(d.name.clone())),
                ("flatline.role", Attr::Str(d.role.clone())),
            ];
            if let Some(sig) = d.signal {
                attributes.push(("flatline.signal", Attr::Int(i64::from(sig))));
            }
            let rank = self.run.facts().and_then(|f| f.rank.as_deref());
            out.push((
                format!("death:{}:{cause}", d.pid),
                Record {
                    severity: S::Error,
                    body: d.sentence(rank, WORDS.value, WORDS.duration),
                    attributes,
                },
            ));
        }
        for g in self.live_growths() {
            let mut attributes = vec![("flatline.kind", Attr::Str("growth".into()))];
            attributes.extend(self.growth_attrs(g));
            attributes.push((
                "flatline.rate_bytes_per_second",
                Attr::Int(g.rate_per_s as i64),
            ));
            if let Some(t) = g.time_to_limit_s {
                attributes.push(("flatline.time_to_limit_seconds", Attr::Int(t as i64)));
            }
            out.push((
                format!("growth:{}", g.channel),
                Record {
                    severity: S::Warn,
                    // The first sentence, as it was when the growth was found.
                    body: answer.headline.clone(),
                    attributes,
                },
            ));
        }
        for f in &answer.findings {
            // Deaths are told above with their fields; a trend is the
            // growth's own sentence.
            use flatline_analysis::summary::{KILLED_BY_SIGNAL, OOM_KILL};
            if f.kind == OOM_KILL || f.kind == KILLED_BY_SIGNAL || f.kind == "trend" {
                continue;
            }
            let subject = f.text.split(':').next().unwrap_or("");
            out.push((
                format!("finding:{}:{subject}", f.kind),
                Record {
                    severity: match f.kind {
                        "where" | "rose_and_held" | "process_held" => S::Info,
                        "out_of_memory" => S::Error,
                        _ => S::Warn,
                    },
                    body: f.text.clone(),
                    attributes: vec![("flatline.kind", Attr::Str(f.kind.to_owned()))],
                },
            ));
        }
        // The recording's write faults (a full disk): what is on disk is no
        // longer all of the run, whatever the answer says.
        for (t_ns, text) in &self.write_notes {
            let fault = text.starts_with(flatline_telemetry::recording::FAULT_NOTE);
            out.push((
                format!("write:{t_ns}:{fault}"),
                Record {
                    severity: if fault { S::Error } else { S::Info },
                    body: text.clone(),
                    attributes: vec![(
                        "flatline.kind",
                        Attr::Str(
                            if fault {
                                "recording_fault"
                            } else {
                                "recording_resumed"
                            }
                            .into(),
                        ),
                    )],
                },
            ));
        }
        let kind = answer.kind.as_str();
        out.push((
            format!("headline:{kind}"),
            Record {
                severity: S::Info,
                body: answer.headline.clone(),
                attributes: vec![
                    ("flatline.kind", Attr::Str("headline".into())),
                    ("flatline.headline_kind", Attr::Str(kind.to_owned())),
                ],
            },
        ));
        out.into_iter()
            .filter(|(key, _)| self.logged.insert(key.clone()))
            .map(|(_, r)| r)
            .collect()
    }

    /// The run as OTLP's resource: flatline, the host, the watched
    /// process, and the run's labels as Prometheus names them.
    fn otlp_resource(&self) -> Vec<(String, otlp::Attr)> {
        use otlp::Attr;
        let mut r = vec![
            ("service.name".to_owned(), Attr::Str("flatline".into())),
            (
                "service.version".to_owned(),
                Attr::Str(env!("CARGO_PKG_VERSION").into()),
            ),
            ("host.name".to_owned(), Attr::Str(self.setup.host.clone())),
            (
                "process.pid".to_owned(),
                Attr::Int(i64::from(self.setup.pid)),
            ),
        ];
        for (k, v) in &self.setup.labels {
            r.push((k.clone(), Attr::Str(v.clone())));
        }
        r
    }

    /// Every channel's latest value (under its semantic-convention name
    /// where one exists), verdict, slope and time to limit, and the
    /// watcher's own counts.
    fn otlp_points(&self, dropped_exports: u64) -> Vec<otlp::Point> {
        use otlp::{Attr, Point};
        let mut out = Vec::new();
        for (i, spec) in self.run.schema().channels.iter().enumerate() {
            if self.slots.slot(i).is_none() {
                continue; // ended
            }
            let scale = base_unit(spec.unit).1;
            let unit = otlp::ucum(spec.unit);
            let l = &self.labels[i];
            let mut attrs = vec![("flatline.channel", Attr::Str(spec.name.clone()))];
            if let Some(p) = spec.labels.get("pid").and_then(|p| p.parse::<i64>().ok()) {
                attrs.push(("process.pid", Attr::Int(p)));
            }
            if let Some(role) = &l.role {
                attrs.push(("flatline.role", Attr::Str(role.clone())));
            }
            if let Some(site) = &l.site {
                attrs.push(("flatline.site", Attr::Str(site.clone())));
            }
            if let Some(v) = self.run.live().latest(i) {
                let (metric, mut extra, factor) = otlp::value_metric(spec, self.setup.pid);
                extra.retain(|(k, _)| !attrs.iter().any(|(a, _)| a == k));
                let mut a = attrs.clone();
                a.extend(extra);
                out.push(Point {
                    metric,
                    unit: if factor == 1.0 { unit } else { "1" },
                    attributes: a,
                    value: v * scale * factor,
                });
            }
            let Some(a) = self.run.live().analysis(i) else {
                continue;
            };
            let mut va = attrs.clone();
            va.push(("flatline.verdict", Attr::Str(a.verdict.as_str().to_owned())));
            out.push(Point {
                metric: "flatline.channel.verdict",
                unit: "1",
                attributes: va,
                value: 1.0,
            });
            if a.verdict == Verdict::Insufficient || spec.kind != Kind::Level {
                continue;
            }
            out.push(Point {
                metric: "flatline.channel.slope",
                unit: if unit == "By" { "By/s" } else { "1/s" },
                attributes: attrs.clone(),
                value: a.slope_per_s * scale,
            });
            if let Some(s) = a.time_to_limit_s {
                out.push(Point {
                    metric: "flatline.channel.time_to_limit",
                    unit: "s",
                    attributes: attrs.clone(),
                    value: s,
                });
            }
        }
        for g in self.live_growths() {
            let mut attrs = self.growth_attrs(g);
            if let Some(s) = g.sites.first() {
                attrs.push(("code.filepath", Attr::Str(s.file.clone())));
                attrs.push(("code.function", Attr::Str(s.function.clone())));
                if let Some(line) = s.line {
                    attrs.push(("code.lineno", Attr::Int(i64::from(line))));
                }
            }
            let scale = base_unit(g.unit).1;
            out.push(Point {
                metric: "flatline.growth.rate",
                unit: "By/s",
                attributes: attrs.clone(),
                value: g.rate_per_s * scale,
            });
            if let Some(t) = g.time_to_limit_s {
                out.push(Point {
                    metric: "flatline.growth.time_to_limit",
                    unit: "s",
                    attributes: attrs,
                    value: t,
                });
            }
        }
        let count = |metric, value: u64| Point {
            metric,
            unit: "1",
            attributes: Vec::new(),
            value: value as f64,
        };
        out.push(count("flatline.growths", self.live_growths().len() as u64));
        out.push(count("flatline.samples", self.samples));
        out.push(count(
            "flatline.dropped_samples",
            (self.sampler_dropped)() + self.tap.dropped.load(Relaxed),
        ));
        out.push(count("flatline.otlp.dropped_exports", dropped_exports));
        out
    }

    /// The exposition and, while sites are sampled (or once there are
    /// any), the heap profile: empty until a site holds 1 MiB, so that a
    /// scraper started with the job reads "nothing yet", not an error.
    fn pages(&self) -> Pages {
        let sampling = self.setup.sites_every > 0 || !self.sites.is_empty();
        let heap = sampling.then(|| {
            let values = &self.site_values;
            let now = std::time::SystemTime::now();
            let since = |t: std::time::SystemTime| {
                t.duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as i64)
            };
            let profile = self.sites.profile(
                &|i| values.get(i).copied().unwrap_or(f64::NAN),
                since(now),
                since(now) - since(self.started),
                self.setup.sites_every as i64,
                &self.setup.program,
            );
            Bytes::from(pprof::encode(&profile))
        });
        Pages {
            metrics: Bytes::from(self.encode()),
            heap,
        }
    }

    /// Who died so far, as the answer reads it.
    fn deaths(&self) -> &[death::Death] {
        self.run.facts().map_or(&[], |f| &f.ending.deaths)
    }

    /// The alerts that have just begun to hold.
    fn check_alerts(&mut self) -> Vec<Firing> {
        if self.alerts.is_empty() {
            return Vec::new();
        }
        let (live, slots, channels) = (self.run.live(), &self.slots, &self.run.schema().channels);
        let readings = channels
            .iter()
            .enumerate()
            .filter(|(i, _)| slots.slot(*i).is_some())
            .map(|(i, c)| Reading {
                name: &c.name,
                latest: live.latest(i),
                analysis: live.analysis(i),
                scale: base_unit(c.unit).1,
                is_level: c.kind == Kind::Level,
            })
            .collect::<Vec<_>>();
        self.alerts.check(&readings)
    }

    /// A firing: a line on stderr, a marker in the recording, the command.
    fn fire(&self, f: &Firing) {
        eprintln!("flatline: {f}");
        if let Some(events) = &self.setup.events {
            let _ = events.try_send(Event {
                t_ns: self.last_t_ns,
                kind: EventKind::Marker(format!("{f}")),
            });
        }
        if let Some(cmd) = &self.setup.on_alert {
            let spawned = std::process::Command::new("sh")
                .args(["-c", cmd])
                .env("FLATLINE_ALERT", &f.alert)
                .env("FLATLINE_ALERT_CHANNEL", &f.channel)
                .env("FLATLINE_ALERT_MEASURE", f.measure)
                .env("FLATLINE_ALERT_VALUE", f.value.to_string())
                .env("FLATLINE_ALERT_HOST", &self.setup.host)
                .env("FLATLINE_ALERT_PID", self.setup.pid.to_string())
                .stdin(std::process::Stdio::null())
                .spawn();
            match spawned {
                // Reaped on a thread of its own: a slow command delays nothing.
                Ok(mut child) => {
                    let _ = std::thread::Builder::new()
                        .name("flatline-on-alert".into())
                        .spawn(move || child.wait());
                }
                Err(e) => eprintln!("flatline: --on-alert could not start: {e}"),
            }
        }
    }

    /// The whole exposition, from the latest analysis.
    fn encode(&self) -> String {
        let mut reg = Registry::default();
        let gauge = |reg: &mut Registry, name: &str, help: &str| {
            let f = Family::<ChannelLabels, Gauge<f64, AtomicU64>>::default();
            reg.register(name, help, f.clone());
            f
        };
        let value = gauge(
            &mut reg,
            "flatline_channel_value",
            "Latest reading of the channel, in its base unit",
        );
        let slope = gauge(
            &mut reg,
            "flatline_channel_slope_per_second",
            "Trend of a level channel, base units per second",
        );
        let drift = gauge(
            &mut reg,
            "flatline_channel_drift",
            "Change of the channel since its baseline (after the start-up), in its base unit",
        );
        let ttl = gauge(
            &mut reg,
            "flatline_channel_time_to_limit_seconds",
            "Seconds until a growing level reaches its limit at its trend",
        );
        let severity = gauge(
            &mut reg,
            "flatline_channel_severity",
            "How soon a growing level reaches its limit: 0 info, 1 warning (within 7 days), 2 critical (within 24 h)",
        );
        let verdict = Family::<VerdictLabels, Gauge<f64, AtomicU64>>::default();
        reg.register(
            "flatline_channel_verdict",
            "1 for the channel's current verdict, 0 for the others",
            verdict.clone(),
        );
        for (i, l) in self.labels.iter().enumerate() {
            if self.slots.slot(i).is_none() {
                continue; // ended: its series go away
            }
            let scale = base_unit(self.run.schema().channels[i].unit).1;
            if let Some(v) = self.run.live().latest(i) {
                value.get_or_create(l).set(v * scale);
            }
            let Some(a) = self.run.live().analysis(i) else {
                continue;
            };
            for v in Verdict::ALL {
                let one = VerdictLabels {
                    channel: l.clone(),
                    verdict: v.as_str().to_owned(),
                };
                verdict
                    .get_or_create(&one)
                    .set(if v == a.verdict { 1.0 } else { 0.0 });
            }
            if a.verdict == Verdict::Insufficient {
                continue;
            }
            drift.get_or_create(l).set(a.drift * scale);
            if self.run.schema().channels[i].kind == Kind::Level {
                slope.get_or_create(l).set(a.slope_per_s * scale);
                if a.verdict.is_growth() {
                    severity.get_or_create(l).set(severity_value(a.severity));
                }
                if let Some(s) = a.time_to_limit_s {
                    ttl.get_or_create(l).set(s);
                }
            }
        }
        let host = HostLabels {
            host: self.setup.host.clone(),
            pid: self.setup.pid.to_string(),
            job: self.setup.labels.clone(),
        };
        let counter = |reg: &mut Registry, name: &str, help: &str, n: u64| {
            let f = Family::<HostLabels, Counter>::default();
            f.get_or_create(&host).inc_by(n);
            reg.register(name, help, f);
        };
        counter(
            &mut reg,
            "flatline_samples",
            "Samples the exporter has taken from the stream",
            self.samples,
        );
        counter(
            &mut reg,
            "flatline_dropped_samples",
            "Samples lost: by the sampler (its queue full) or on the way to the exporter",
            (self.sampler_dropped)() + self.tap.dropped.load(Relaxed),
        );
        counter(
            &mut reg,
            "flatline_probe_errors",
            "Notes from probes that failed or stopped answering",
            self.probe_errors,
        );
        self.register_deaths(&mut reg, &host);
        self.register_growths(&mut reg, &host);
        let own = Family::<HostLabels, Gauge<f64, AtomicU64>>::default();
        if let Some(rss) = flatline_telemetry::procfs::own_rss() {
            own.get_or_create(&host).set(rss as f64);
        }
        reg.register(
            "flatline_resident_memory_bytes",
            "The watcher's own resident memory",
            own,
        );
        let broken = Family::<HostLabels, Gauge>::default();
        broken
            .get_or_create(&host)
            .set(i64::from(self.tap.broken.load(Relaxed)));
        reg.register(
            "flatline_export_broken",
            "1 when the exporter lost a schema change and stopped following the stream",
            broken,
        );
        let fault = Family::<HostLabels, Gauge>::default();
        fault
            .get_or_create(&host)
            .set(i64::from(self.tap.write_fault.load(Relaxed)));
        reg.register(
            "flatline_recording_write_fault",
            "1 while the recording's writes fail (a full disk) or after the recording stopped on such a fault",
            fault,
        );
        counter(
            &mut reg,
            "flatline_recording_lost_samples",
            "Samples of the stream that write faults kept out of the recording",
            self.tap.lost_samples.load(Relaxed),
        );
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut text, &reg);
        text
    }

    /// `flatline_growth_*`: one series each per growth of the answer, with
    /// who, what memory and which line; how many there are; and what the
    /// first sentence tells first. Made anew at each refresh, so a growth
    /// that ends takes its series with it.
    fn register_growths(&self, reg: &mut Registry, host: &HostLabels) {
        let family = || Family::<GrowthLabels, Gauge<f64, AtomicU64>>::default();
        let (rate, ttl, severity) = (family(), family(), family());
        let count = Family::<HostLabels, Gauge>::default();
        let kind = Family::<HeadlineLabels, Gauge>::default();
        if let Some(answer) = self.run.answer() {
            let growths = self.live_growths();
            for g in &growths {
                let l = self.growth_labels(g);
                let scale = base_unit(g.unit).1;
                rate.get_or_create(&l).set(g.rate_per_s * scale);
                if let Some(t) = g.time_to_limit_s {
                    ttl.get_or_create(&l).set(t);
                }
                severity.get_or_create(&l).set(severity_value(g.severity));
            }
            count.get_or_create(host).set(growths.len() as i64);
            for k in flatline_analysis::summary::HeadlineKind::ALL {
                kind.get_or_create(&HeadlineLabels {
                    host: host.clone(),
                    kind: k.as_str().to_owned(),
                })
                .set(i64::from(k == answer.kind));
            }
        }
        reg.register(
            "flatline_growth_bytes_per_second",
            "How fast each growth of the answer grows (its lead channel's trend), bytes per second, with who grows (pid, process, role), the class of memory it lives in and its top allocation site",
            rate,
        );
        reg.register(
            "flatline_growth_time_to_limit_seconds",
            "Seconds until each growth reaches its limit at its trend, where a limit is known",
            ttl,
        );
        reg.register(
            "flatline_growth_severity",
            "How soon each growth reaches its limit: 0 info, 1 warning (within 7 days), 2 critical (within 24 h)",
            severity,
        );
        reg.register(
            "flatline_growths",
            "How many growths the answer holds (one per process whose memory grows, sums of processes as one)",
            count,
        );
        reg.register(
            "flatline_headline_kind",
            "1 for what the first sentence tells first (damage, death, copy_on_access, growth, held, untold, flat), 0 for the others",
            kind,
        );
    }

    /// The answer's growths whose channel is still live: one whose channel
    /// ended (its process exited) is no longer served, as that channel's
    /// own series are not.
    fn live_growths(&self) -> Vec<&flatline_analysis::answer::Growth> {
        let schema = self.run.schema();
        self.run.answer().map_or_else(Vec::new, |a| {
            a.growths
                .iter()
                .filter(|g| {
                    schema
                        .index_of(&g.channel)
                        .is_none_or(|i| self.slots.slot(i).is_some())
                })
                .collect()
        })
    }

    /// A growth's OTLP attributes: its channel, verdict and who grows, in
    /// what memory and at which site (as its Prometheus labels say them).
    fn growth_attrs(
        &self,
        g: &flatline_analysis::answer::Growth,
    ) -> Vec<(&'static str, otlp::Attr)> {
        use otlp::Attr;
        let l = self.growth_labels(g);
        let mut attrs = vec![
            ("flatline.channel", Attr::Str(l.channel)),
            ("flatline.verdict", Attr::Str(l.verdict)),
            ("flatline.role", Attr::Str(l.role)),
            ("process.executable.name", Attr::Str(l.process)),
            ("flatline.memory_class", Attr::Str(l.memory_class)),
            ("flatline.site", Attr::Str(l.site)),
        ];
        if let Ok(pid) = l.pid.parse::<i64>() {
            attrs.push(("process.pid", Attr::Int(pid)));
        }
        attrs
    }

    /// A growth's labels.
    fn growth_labels(&self, g: &flatline_analysis::answer::Growth) -> GrowthLabels {
        let (pid, process, role) = match (&g.who, g.among.as_slice()) {
            (Some(w), _) => (w.pid.to_string(), w.name.clone(), w.role.clone()),
            (None, []) => (self.setup.pid.to_string(), String::new(), String::new()),
            (None, among) => (
                self.setup.pid.to_string(),
                among
                    .iter()
                    .map(|w| format!("{} {}", w.name, w.pid))
                    .collect::<Vec<_>>()
                    .join(", "),
                "tree".to_owned(),
            ),
        };
        GrowthLabels {
            host: self.setup.host.clone(),
            pid,
            process,
            role,
            channel: g.channel.clone(),
            memory_class: g.memory.as_ref().map_or(String::new(), |m| m.class.clone()),
            site: g.sites.first().map_or(String::new(), |s| match s.line {
                Some(line) => format!("{}:{line} {}", s.file, s.function),
                None => format!("{}: {}", s.file, s.function),
            }),
            verdict: g.verdict.as_str().to_owned(),
            job: self.setup.labels.clone(),
        }
    }

    /// `flatline_process_killed`: one series per process of the tree that
    /// was killed, as the analysis reads how the job ended.
    fn register_deaths(&self, reg: &mut Registry, host: &HostLabels) {
        let deaths = Family::<DeathLabels, Gauge>::default();
        for d in self.deaths() {
            deaths
                .get_or_create(&DeathLabels {
                    host: host.clone(),
                    victim_pid: d.pid.to_string(),
                    victim_name: d.name.clone(),
                    victim_role: d.role.clone(),
                    cause: serde_json::to_value(d.cause)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default(),
                    signal: d.signal.map_or(String::new(), |s| s.to_string()),
                })
                .set(1);
        }
        reg.register(
            "flatline_process_killed",
            "1 for each process of the watched tree killed by the OOM killer (cause kernel_oom_killer or oom_killer) or by a signal, with the victim's pid, name and role",
            deaths,
        );
    }
}

/// Nanoseconds since the Unix epoch, now.
fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A unit's base unit in the exposition, and the factor into it: memory in
/// bytes, durations in seconds.
fn base_unit(u: Unit) -> (&'static str, f64) {
    match u {
        Unit::Bytes => ("bytes", 1.0),
        Unit::Mebibytes => ("bytes", 1_048_576.0),
        Unit::Count => ("count", 1.0),
        Unit::Percent => ("percent", 1.0),
        Unit::Nanoseconds => ("seconds", 1e-9),
        Unit::Microseconds => ("seconds", 1e-6),
        Unit::Milliseconds => ("seconds", 1e-3),
        Unit::Seconds => ("seconds", 1.0),
        Unit::Celsius => ("celsius", 1.0),
        Unit::PerSecond => ("per_second", 1.0),
        Unit::Number => ("number", 1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flatline_telemetry::recording::Tap;
    use flatline_telemetry::{Group, Sample};

    fn state(channels: Vec<ChannelSpec>) -> (ExportState, Tap, Receiver<Item>) {
        let (tap, rx, stats) = Tap::new();
        let setup = ExportSetup {
            host: "node-a".into(),
            pid: 42,
            labels: vec![("rank".into(), "5".into())],
            facts: HostFacts::default(),
            alerts: Vec::new(),
            on_alert: None,
            events: None,
            sites_every: 0,
            program: String::new(),
            otlp: None,
        };
        let st = ExportState::new(&Schema { channels }, setup, stats, Box::new(|| 3));
        (st, tap, rx)
    }

    fn sample(seq: u64, values: &[f64]) -> Sample {
        let mut s = Sample::new(seq, seq * 100_000_000, values.len());
        s.values_mut().copy_from_slice(values);
        s
    }

    /// The line of `name` for `channel` (and `extra` label text), its value.
    fn line(text: &str, name: &str, channel: &str, extra: &str) -> Option<f64> {
        text.lines()
            .filter(|l| l.starts_with(&format!("{name}{{")))
            .find(|l| l.contains(&format!("channel=\"{channel}\"")) && l.contains(extra))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    }

    #[test]
    fn channels_are_served_in_base_units_with_one_verdict_each() {
        let rss = ChannelSpec::new("mem.rss", Unit::Bytes, Group::Memory);
        let log = ChannelSpec::new("log.mem", Unit::Mebibytes, Group::Memory);
        let (mut st, tap, rx) = state(vec![rss, log]);
        // mem.rss grows 1 MiB/s; log.mem holds 2 MiB: 60 s at 10 Hz.
        for k in 0..600u64 {
            let t = k as f64 * 0.1;
            tap.send(Item::Sample(sample(k, &[1e8 + t * 1048576.0, 2.0])));
        }
        tap.send(Item::Event(Event {
            t_ns: 0,
            kind: EventKind::Note("gpu0 stopped answering".into()),
        }));
        for item in rx.try_iter() {
            st.take(item);
        }
        st.run.refresh(None, WORDS);
        let text = st.encode();
        let v = |name, ch, extra| line(&text, name, ch, extra);
        assert_eq!(
            v("flatline_channel_verdict", "mem.rss", "verdict=\"linear\""),
            Some(1.0)
        );
        assert_eq!(
            v("flatline_channel_verdict", "mem.rss", "verdict=\"flat\""),
            Some(0.0)
        );
        assert_eq!(
            v("flatline_channel_verdict", "log.mem", "verdict=\"flat\""),
            Some(1.0)
        );
        let slope = v("flatline_channel_slope_per_second", "mem.rss", "").unwrap();
        assert!((slope / 1048576.0 - 1.0).abs() < 0.02, "{slope}");
        // MiB are served as bytes.
        assert_eq!(
            v("flatline_channel_value", "log.mem", "unit=\"bytes\""),
            Some(2.0 * 1048576.0)
        );
        assert!(text.contains("host=\"node-a\""), "{text}");
        assert!(text.contains("pid=\"42\""), "{text}");
        // The run's labels are on every series, a channel's too.
        assert!(
            text.contains("flatline_channel_value{channel=\"mem.rss\",unit=\"bytes\",kind=\"level\",host=\"node-a\",pid=\"42\",role=\"\",site=\"\",rank=\"5\"}"),
            "{text}"
        );
        assert!(
            text.contains("flatline_samples_total{host=\"node-a\",pid=\"42\",rank=\"5\"} 600"),
            "{text}"
        );
        assert!(
            text.contains(
                "flatline_dropped_samples_total{host=\"node-a\",pid=\"42\",rank=\"5\"} 3"
            ),
            "{text}"
        );
        assert!(
            text.contains("flatline_probe_errors_total{host=\"node-a\",pid=\"42\",rank=\"5\"} 1"),
            "{text}"
        );
        // No limit is known (no host RAM given): no time to limit.
        assert!(
            !text.contains("flatline_channel_time_to_limit_seconds{"),
            "{text}"
        );
    }

    /// A recording that cannot be written (a full disk) is an OTLP log
    /// record when it begins and when it ends, each once; a probe's note is
    /// neither, and counts as a probe error as before.
    #[test]
    fn a_write_fault_and_its_end_are_log_records_once_each() {
        use flatline_telemetry::recording::{FAULT_NOTE, RESUMED_NOTE};
        let rss = ChannelSpec::new("mem.rss", Unit::Bytes, Group::Memory);
        let (mut st, tap, rx) = state(vec![rss]);
        for k in 0..50u64 {
            tap.send(Item::Sample(sample(k, &[1e8])));
        }
        let note = |t_ns: u64, text: String| {
            Item::Event(Event {
                t_ns,
                kind: EventKind::Note(text),
            })
        };
        tap.send(note(
            2_000_000_000,
            format!("{FAULT_NOTE}No space left on device (os error 28)"),
        ));
        tap.send(note(3_000_000_000, "gpu0 stopped answering".into()));
        for item in rx.try_iter() {
            st.take(item);
        }
        st.run.refresh(None, WORDS);
        let kinds = |records: &[otlp::Record]| -> Vec<(String, String)> {
            records
                .iter()
                .filter_map(|r| {
                    r.attributes.iter().find_map(|(k, v)| match (k, v) {
                        (&"flatline.kind", otlp::Attr::Str(s)) if s.starts_with("recording_") => {
                            Some((s.clone(), r.body.clone()))
                        }
                        _ => None,
                    })
                })
                .collect()
        };
        let first = kinds(&st.new_records());
        assert_eq!(
            first,
            [(
                "recording_fault".to_owned(),
                format!("{FAULT_NOTE}No space left on device (os error 28)")
            )]
        );
        // Said once; its end is said when it comes.
        assert!(kinds(&st.new_records()).is_empty());
        tap.send(note(
            4_000_000_000,
            format!("{RESUMED_NOTE}12 samples lost from 2.0 s"),
        ));
        for item in rx.try_iter() {
            st.take(item);
        }
        let then = kinds(&st.new_records());
        assert_eq!(then.len(), 1, "{then:?}");
        assert_eq!(then[0].0, "recording_resumed");
        assert_eq!(st.probe_errors, 1);
    }

    /// `/debug/pprof/heap`: none until a site joins, then each site's
    /// latest four values under its stack, with its process and the run's
    /// rank; a site whose process ended holds nothing and is left out.
    #[test]
    fn the_heap_page_holds_the_sites_latest_values_once_there_are_any() {
        let proc_ = |pid: &str, name: &str| {
            ChannelSpec::new(format!("pid{pid}.rss"), Unit::Bytes, Group::Memory)
                .with_label("pid", pid)
                .with_label("name", name)
                .with_label("role", "main")
        };
        let (mut st, tap, rx) = state(vec![proc_("7", "python3"), proc_("8", "helper")]);
        tap.send(Item::Sample(sample(0, &[1e8, 1e7])));
        for item in rx.try_iter() {
            st.take(item);
        }
        assert!(st.pages().heap.is_none());
        let site = |n: u32, pid: &str, frames: &str| {
            let spec = |leaf: &str, unit| {
                ChannelSpec::new(format!("site{n}.{leaf}"), unit, Group::Memory)
                    .with_label("pid", pid)
                    .with_label("role", "site")
            };
            vec![
                spec("live", Unit::Bytes).with_label("frames", frames),
                spec("objects", Unit::Count),
                spec("alloc_bytes", Unit::Bytes),
                spec("allocs", Unit::Count),
            ]
        };
        let mut specs = site(0, "7", "/job.py:5 keep\n/job.py:9 main");
        specs.extend(site(1, "8", "helper_alloc (libh.so)"));
        tap.send(Item::Add(specs));
        let row = |k: u64, held: f64| {
            let mut v = vec![1e8, 1e7, held, 10.0, 2.0 * held, 30.0];
            v.extend([5e6, 5.0, 5e6, 5.0]);
            sample(k, &v)
        };
        tap.send(Item::Sample(row(1, 2e6)));
        tap.send(Item::Sample(row(2, 3e6)));
        // A sample the slow probe did not read the sites for: they hold.
        let mut unread = vec![1e8, 1e7];
        unread.extend([f64::NAN; 8]);
        tap.send(Item::Sample(sample(3, &unread)));
        for item in rx.try_iter() {
            st.take(item);
        }
        let p = pprof::decode(&st.pages().heap.expect("a heap page"));
        let s = |i: i64| p.string_table[i as usize].as_str();
        assert_eq!(p.sample.len(), 2);
        // Go's order: allocations, bytes allocated, blocks held, bytes
        // held; the most held first.
        assert_eq!(p.sample[0].value, [5, 5_000_000, 5, 5_000_000]);
        assert_eq!(p.sample[1].value, [30, 6_000_000, 10, 3_000_000]);
        let leaf = &p.location[p.sample[1].location_id[0] as usize - 1].line[0];
        assert_eq!(leaf.line, 5);
        assert_eq!(s(p.function[leaf.function_id as usize - 1].name), "keep");
        let labels: Vec<String> = p.sample[1]
            .label
            .iter()
            .map(|l| {
                format!(
                    "{}={}{}",
                    s(l.key),
                    s(l.str),
                    if l.str == 0 {
                        l.num.to_string()
                    } else {
                        String::new()
                    }
                )
            })
            .collect();
        assert_eq!(labels, ["pid=7", "process=python3", "role=main", "rank=5"]);
        // pid 8 ends (its four site channels and its own): out of the profile.
        tap.send(Item::End(vec![1, 6, 7, 8, 9]));
        let mut last = vec![1e8, f64::NAN, 3e6, 10.0, 6e6, 30.0];
        last.extend([f64::NAN; 4]);
        tap.send(Item::Sample(sample(4, &last)));
        for item in rx.try_iter() {
            st.take(item);
        }
        let p = pprof::decode(&st.pages().heap.expect("a heap page"));
        assert_eq!(p.sample.len(), 1);
        assert_eq!(p.sample[0].value[3], 3_000_000);
    }

    #[test]
    fn processes_carry_their_pid_and_role_and_ended_channels_go_away() {
        let (mut st, tap, rx) = state(vec![ChannelSpec::new(
            "mem.rss",
            Unit::Bytes,
            Group::Memory,
        )]);
        let mut worker = ChannelSpec::new("pid7.pss", Unit::Bytes, Group::Memory);
        worker.labels.insert("pid".into(), "7".into());
        worker.labels.insert("role".into(), "worker".into());
        tap.send(Item::Sample(sample(0, &[1e8])));
        tap.send(Item::Add(vec![worker]));
        tap.send(Item::Sample(sample(1, &[1e8, 5e6])));
        for item in rx.try_iter() {
            st.take(item);
        }
        st.run.refresh(None, WORDS);
        let text = st.encode();
        let worker_line = text
            .lines()
            .find(|l| l.starts_with("flatline_channel_value{") && l.contains("pid7.pss"))
            .expect("the worker's channel");
        assert!(worker_line.contains("pid=\"7\""), "{worker_line}");
        assert!(worker_line.contains("role=\"worker\""), "{worker_line}");
        assert!(
            worker_line.ends_with(" 5000000.0") || worker_line.ends_with(" 5000000"),
            "{worker_line}"
        );
        // The worker exits: its channel ends, and so do its series.
        tap.send(Item::End(vec![1]));
        tap.send(Item::Sample(sample(2, &[1e8])));
        for item in rx.try_iter() {
            st.take(item);
        }
        st.run.refresh(None, WORDS);
        let text = st.encode();
        assert!(!text.contains("pid7.pss"), "{text}");
        assert!(text.contains("channel=\"mem.rss\""), "{text}");
    }

    /// The answer's growths are series of their own, with who grows, and
    /// what the first sentence tells first; a growth whose channel ends
    /// takes its series with it.
    #[test]
    fn each_growth_is_a_series_that_goes_when_it_ends() {
        let proc_ = |pid: &str| {
            ChannelSpec::new(format!("pid{pid}.rss"), Unit::Bytes, Group::Memory)
                .with_label("pid", pid)
                .with_label("name", "python3")
                .with_label("role", "main")
        };
        let (mut st, tap, rx) = state(vec![proc_("7"), proc_("8")]);
        // pid 7 grows 1 MiB/s, pid 8 holds: 60 s at 10 Hz.
        for k in 0..600u64 {
            let t = k as f64 * 0.1;
            let wobble = [0.0, 4096.0, -4096.0, 0.0][k as usize % 4];
            tap.send(Item::Sample(sample(
                k,
                &[1e8 + t * 1048576.0 + wobble, 5e7 + wobble],
            )));
        }
        for item in rx.try_iter() {
            st.take(item);
        }
        st.run.refresh(None, WORDS);
        let text = st.encode();
        let growth: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("flatline_growth_bytes_per_second{"))
            .collect();
        assert_eq!(growth.len(), 1, "{text}");
        assert!(growth[0].contains("channel=\"pid7.rss\""), "{}", growth[0]);
        assert!(growth[0].contains("host=\"node-a\""), "{}", growth[0]);
        assert!(growth[0].contains("rank=\"5\""), "{}", growth[0]);
        let rate: f64 = growth[0].rsplit(' ').next().unwrap().parse().unwrap();
        assert!((rate / 1048576.0 - 1.0).abs() < 0.05, "{rate}");
        assert!(
            text.contains("flatline_growths{host=\"node-a\",pid=\"42\",rank=\"5\"} 1"),
            "{text}"
        );
        assert!(
            text.contains(
                "flatline_headline_kind{host=\"node-a\",pid=\"42\",rank=\"5\",kind=\"growth\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "flatline_headline_kind{host=\"node-a\",pid=\"42\",rank=\"5\",kind=\"flat\"} 0"
            ),
            "{text}"
        );
        // pid 7 exits: its channel ends, and its growth's series with it.
        tap.send(Item::End(vec![0]));
        tap.send(Item::Sample(sample(600, &[f64::NAN, 5e7])));
        for item in rx.try_iter() {
            st.take(item);
        }
        st.run.refresh(None, WORDS);
        let text = st.encode();
        assert!(
            !text.contains("flatline_growth_bytes_per_second{"),
            "{text}"
        );
        assert!(
            text.contains("flatline_growths{host=\"node-a\",pid=\"42\",rank=\"5\"} 0"),
            "{text}"
        );
    }

    #[test]
    fn a_tap_that_loses_a_schema_change_says_it_is_broken() {
        let (tap, rx, stats) = Tap::new();
        for k in 0..flatline_telemetry::recording::TAP_CAPACITY as u64 {
            tap.send(Item::Sample(sample(k, &[1.0])));
        }
        tap.send(Item::Sample(sample(9999, &[1.0])));
        assert_eq!(stats.dropped.load(Relaxed), 1);
        assert!(
            !stats.broken.load(Relaxed),
            "a lost sample does not break it"
        );
        tap.send(Item::End(vec![0]));
        assert!(stats.broken.load(Relaxed));
        drop(rx);
    }
}
