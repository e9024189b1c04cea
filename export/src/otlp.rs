//! `--otlp URL`: every channel, its verdict, slope and time to limit pushed
//! to an OpenTelemetry collector over OTLP/HTTP (protobuf), for a fleet
//! that runs the Collector beside or instead of Prometheus.
//!
//! The exporter's thread (`prom`'s [`super::prom::Exporter`], which keeps
//! the stream's analysis) builds an export every `--otlp-every` seconds
//! ([`request`]) and hands it to a [`Pusher`] without waiting: a bounded
//! queue ([`QUEUE`] exports; when full the oldest goes, counted) and one
//! thread that posts them in order. A collector that is down or slow is
//! said once on stderr, retried with back-off (1 s doubling to 30 s), and
//! said again once it takes them; sampling never waits for it.
//!
//! Names follow OpenTelemetry's semantic conventions where one exists
//! (`process.memory.usage` for a process's RSS, `process.memory.virtual`,
//! `hw.gpu.memory.usage`/`.limit`, `hw.gpu.utilization`,
//! `system.memory.limit`); every other channel is `flatline.channel.value`
//! with the attribute `flatline.channel`. Each data point carries
//! `flatline.channel`, and `process.pid`, `flatline.role` and
//! `flatline.site` where the channel has them. The resource: `service.name`
//! `flatline`, `host.name`, `process.pid` (the watched process) and the
//! run's labels (`rank`, `node_rank`, `slurm_job_id`, `--label`s) as they
//! are named in Prometheus.

pub(crate) mod proto;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use crossbeam_channel::{Receiver, Sender, TrySendError};
use flatline_telemetry::{ChannelSpec, Unit};
use prost::Message;

/// Exports the queue holds while the collector does not take them: at the
/// default 10 s, about ten minutes.
pub const QUEUE: usize = 64;
/// The longest wait between two tries.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The longest a post may take.
pub const POST_TIMEOUT: Duration = Duration::from_secs(5);
/// What the pusher still tries at the end of a run, at most.
pub const FLUSH: Duration = Duration::from_secs(5);

/// Where to post: an `http://` URL, its path `/v1/metrics` (added to a
/// URL that does not end in it, as an OTLP endpoint is given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The whole URL posted to.
    pub url: String,
    host: String,
    port: u16,
    path: String,
}

/// `--otlp URL`: an endpoint, or why not.
pub fn parse_endpoint(s: &str) -> Result<Endpoint, String> {
    let rest = match s.split_once("://") {
        Some(("http", rest)) => rest,
        Some(("https", _)) => {
            return Err(
                "https is not supported yet: give the collector's (or a local agent's) http:// endpoint, e.g. http://127.0.0.1:4318"
                    .into(),
            );
        }
        _ => return Err("an http:// URL, e.g. http://127.0.0.1:4318".into()),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if authority.contains('@') {
        return Err("no user or password in the URL: flatline sends none".into());
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => {
            let port = p
                .parse::<u16>()
                .map_err(|_| format!("{p:?} is not a port"))?;
            (h, port)
        }
        _ => (authority, 80),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err("no host in the URL".into());
    }
    let path = path.trim_end_matches('/');
    let path = if path.ends_with("/v1/metrics") {
        path.to_owned()
    } else {
        format!("{path}/v1/metrics")
    };
    let shown = if authority.starts_with('[') || !host.contains(':') {
        authority.to_owned()
    } else {
        format!("[{host}]:{port}")
    };
    Ok(Endpoint {
        url: format!("http://{shown}{path}"),
        host: host.to_owned(),
        port,
        path,
    })
}

/// `--otlp` and `--otlp-every`, as plain values.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpConfig {
    pub endpoint: Endpoint,
    pub every: Duration,
}

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Attr {
    Str(String),
    Int(i64),
}

/// One data point, before encoding.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub metric: &'static str,
    /// UCUM.
    pub unit: &'static str,
    pub attributes: Vec<(&'static str, Attr)>,
    pub value: f64,
}

/// A channel's value metric: its semantic-convention name where one
/// exists (with the attributes that name asks for, and the factor from
/// the channel's base unit into the metric's), else
/// `flatline.channel.value`.
pub fn value_metric(
    spec: &ChannelSpec,
    watched_pid: u32,
) -> (&'static str, Vec<(&'static str, Attr)>, f64) {
    let name = spec.name.as_str();
    let pid = |p: u32| vec![("process.pid", Attr::Int(i64::from(p)))];
    if name == "mem.rss" {
        return ("process.memory.usage", pid(watched_pid), 1.0);
    }
    if name == "mem.vm_size" {
        return ("process.memory.virtual", pid(watched_pid), 1.0);
    }
    if name == "sys.mem_total" {
        return ("system.memory.limit", Vec::new(), 1.0);
    }
    if let Some(n) = name
        .strip_prefix("pid")
        .and_then(|r| r.strip_suffix(".rss"))
        && let Ok(p) = n.parse::<u32>()
    {
        return ("process.memory.usage", pid(p), 1.0);
    }
    if let Some((gpu, leaf)) = name.split_once('.')
        && gpu.len() > 3
        && gpu.starts_with("gpu")
        && gpu[3..].bytes().all(|b| b.is_ascii_digit())
    {
        let id = vec![("hw.id", Attr::Str(gpu.to_owned()))];
        match leaf {
            "used" => return ("hw.gpu.memory.usage", id, 1.0),
            "total" => return ("hw.gpu.memory.limit", id, 1.0),
            // A ratio, 0 to 1.
            "util" => return ("hw.gpu.utilization", id, 0.01),
            _ => {}
        }
    }
    ("flatline.channel.value", Vec::new(), 1.0)
}

/// A unit as UCUM writes it (OpenTelemetry's units), after conversion to
/// the base unit.
pub fn ucum(u: Unit) -> &'static str {
    match u {
        Unit::Bytes | Unit::Mebibytes => "By",
        Unit::Nanoseconds | Unit::Microseconds | Unit::Milliseconds | Unit::Seconds => "s",
        Unit::Percent => "%",
        Unit::Celsius => "Cel",
        Unit::PerSecond => "1/s",
        Unit::Count | Unit::Number => "1",
    }
}

/// What each metric is, for its `description`.
fn description(metric: &str) -> &'static str {
    match metric {
        "process.memory.usage" => "The amount of physical memory in use (resident set size)",
        "process.memory.virtual" => "The amount of committed virtual memory",
        "system.memory.limit" => "Total memory available in the system",
        "hw.gpu.memory.usage" => "GPU memory used",
        "hw.gpu.memory.limit" => "Size of the GPU memory",
        "hw.gpu.utilization" => "Fraction of time the GPU was busy",
        "flatline.channel.value" => "Latest reading of a flatline channel, in its base unit",
        "flatline.channel.slope" => "Trend of a level channel, base units per second",
        "flatline.channel.verdict" => {
            "1 for the channel's current verdict (flatline.verdict: flat, linear, staircase, …)"
        }
        "flatline.channel.time_to_limit" => {
            "Seconds until a growing level reaches its limit at its trend"
        }
        "flatline.samples" => "Samples the exporter has taken from the stream",
        "flatline.dropped_samples" => "Samples lost by the sampler or on the way to the exporter",
        "flatline.otlp.dropped_exports" => "Exports the OTLP queue could not hold",
        _ => "",
    }
}

/// One export: the resource, and the points grouped by metric (in the
/// order each first appears), stamped `time_ns` since the Unix epoch (the
/// latest sample's wall-clock time) from `start_ns` (the run's start).
pub fn request(
    resource: &[(String, Attr)],
    points: &[Point],
    start_ns: u64,
    time_ns: u64,
) -> proto::ExportMetricsServiceRequest {
    let kv = |k: &str, v: &Attr| proto::KeyValue {
        key: k.to_owned(),
        value: Some(match v {
            Attr::Str(s) => proto::AnyValue {
                string_value: Some(s.clone()),
                int_value: None,
            },
            Attr::Int(i) => proto::AnyValue {
                string_value: None,
                int_value: Some(*i),
            },
        }),
    };
    let mut metrics: Vec<proto::Metric> = Vec::new();
    for p in points {
        let at = match metrics.iter().position(|m| m.name == p.metric) {
            Some(i) => i,
            None => {
                metrics.push(proto::Metric {
                    name: p.metric.to_owned(),
                    description: description(p.metric).to_owned(),
                    unit: p.unit.to_owned(),
                    gauge: Some(proto::Gauge::default()),
                });
                metrics.len() - 1
            }
        };
        if let Some(g) = metrics[at].gauge.as_mut() {
            g.data_points.push(proto::NumberDataPoint {
                attributes: p.attributes.iter().map(|(k, v)| kv(k, v)).collect(),
                start_time_unix_nano: start_ns,
                time_unix_nano: time_ns,
                as_double: Some(p.value),
            });
        }
    }
    proto::ExportMetricsServiceRequest {
        resource_metrics: vec![proto::ResourceMetrics {
            resource: Some(proto::Resource {
                attributes: resource.iter().map(|(k, v)| kv(k, v)).collect(),
            }),
            scope_metrics: vec![proto::ScopeMetrics {
                scope: Some(proto::InstrumentationScope {
                    name: "flatline".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                }),
                metrics,
            }],
            schema_url: String::new(),
        }],
    }
}

/// The exports on their way: a bounded queue and the thread that posts
/// them. Dropping it sends what is queued (for at most [`FLUSH`]), then
/// joins the thread.
pub struct Pusher {
    tx: Option<Sender<Bytes>>,
    /// The queue's other end, to let the oldest go when it is full.
    oldest: Receiver<Bytes>,
    dropped: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Pusher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pusher")
            .field("dropped", &self.dropped())
            .finish()
    }
}

impl Pusher {
    /// Starts the thread that posts to `endpoint`; `queue` exports wait at
    /// most.
    pub fn start(endpoint: Endpoint, queue: usize) -> Result<Self> {
        let (tx, rx) = crossbeam_channel::bounded::<Bytes>(queue.max(1));
        let dropped = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .context("starting the OTLP pusher")?;
        let thread = {
            let (rx, dropped, stop) = (rx.clone(), dropped.clone(), stop.clone());
            std::thread::Builder::new()
                .name("flatline-otlp".into())
                .spawn(move || {
                    flatline_telemetry::alloc::mark_observer_thread();
                    send_all(&runtime, &endpoint, &rx, &dropped, &stop, queue);
                })
                .context("starting the OTLP pusher")?
        };
        Ok(Self {
            tx: Some(tx),
            oldest: rx,
            dropped,
            stop,
            thread: Some(thread),
        })
    }

    /// Queues `body` without waiting: when the queue is full its oldest
    /// export goes (counted).
    pub fn push(&self, body: Bytes) {
        let Some(tx) = &self.tx else { return };
        let mut body = body;
        loop {
            match tx.try_send(body) {
                Ok(()) => return,
                Err(TrySendError::Full(b)) => {
                    if self.oldest.try_recv().is_ok() {
                        self.dropped.fetch_add(1, Relaxed);
                    }
                    body = b;
                }
                Err(TrySendError::Disconnected(_)) => {
                    self.dropped.fetch_add(1, Relaxed);
                    return;
                }
            }
        }
    }

    /// Exports lost: the queue full, a collector refusing one, or the run
    /// ending before it took them.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Relaxed)
    }
}

impl Drop for Pusher {
    fn drop(&mut self) {
        // The thread sends what is queued, then sees the queue closed.
        drop(self.tx.take());
        let deadline = std::time::Instant::now() + FLUSH;
        while self.thread.as_ref().is_some_and(|t| !t.is_finished())
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Why a post did not go through.
#[derive(Debug)]
enum Failed {
    /// Worth another try (no connection, a timeout, 429, 502–504).
    Retry(String),
    /// The collector refused this export (a 4xx): trying again would not help.
    Refused(String),
}

/// The pusher's loop: each export in order, retried until it is taken,
/// refused, or the run ends.
fn send_all(
    runtime: &tokio::runtime::Runtime,
    endpoint: &Endpoint,
    rx: &Receiver<Bytes>,
    dropped: &AtomicU64,
    stop: &AtomicBool,
    queue: usize,
) {
    let mut down = false;
    let mut refused_said = false;
    let mut dropped_when_down = 0;
    while let Ok(body) = rx.recv() {
        let mut backoff = Duration::from_secs(1);
        loop {
            if stop.load(Relaxed) {
                let unsent = 1 + rx.len() as u64;
                dropped.fetch_add(unsent, Relaxed);
                eprintln!(
                    "flatline: OTLP: the run ended with {unsent} export{} unsent: {} did not take them",
                    if unsent == 1 { "" } else { "s" },
                    endpoint.url
                );
                return;
            }
            match runtime.block_on(post(endpoint, body.clone())) {
                Ok(()) => {
                    if down {
                        down = false;
                        let lost = dropped.load(Relaxed) - dropped_when_down;
                        eprintln!(
                            "flatline: OTLP: {} takes the metrics again ({lost} export{} lost while it did not)",
                            endpoint.url,
                            if lost == 1 { "" } else { "s" }
                        );
                    }
                    break;
                }
                Err(Failed::Refused(why)) => {
                    dropped.fetch_add(1, Relaxed);
                    if !refused_said {
                        refused_said = true;
                        eprintln!(
                            "flatline: OTLP: {} refused an export ({why}); each refused export is dropped and counted (flatline.otlp.dropped_exports)",
                            endpoint.url
                        );
                    }
                    break;
                }
                Err(Failed::Retry(why)) => {
                    if !down {
                        down = true;
                        dropped_when_down = dropped.load(Relaxed);
                        eprintln!(
                            "flatline: OTLP: {} does not take the metrics ({why}); sampling goes on, and up to {queue} exports wait and are retried with back-off",
                            endpoint.url
                        );
                    }
                    // Wait, in steps, so that the end of the run is not held up.
                    let until = std::time::Instant::now() + backoff;
                    while std::time::Instant::now() < until && !stop.load(Relaxed) {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }
}

/// One POST of `body`, over a connection of its own (an export every few
/// seconds needs no pool).
async fn post(endpoint: &Endpoint, body: Bytes) -> Result<(), Failed> {
    use http_body_util::{BodyExt, Full};
    use hyper::header::{CONTENT_TYPE, HOST};
    let retry = |what: &str, e: &dyn std::fmt::Display| Failed::Retry(format!("{what}: {e}"));
    let exchange = async {
        let stream = tokio::net::TcpStream::connect((endpoint.host.as_str(), endpoint.port))
            .await
            .map_err(|e| retry("connecting", &e))?;
        let (mut send, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .map_err(|e| retry("connecting", &e))?;
        let driver = tokio::spawn(conn);
        let authority = if endpoint.host.contains(':') {
            format!("[{}]:{}", endpoint.host, endpoint.port)
        } else {
            format!("{}:{}", endpoint.host, endpoint.port)
        };
        let req = hyper::Request::post(endpoint.path.as_str())
            .header(HOST, authority)
            .header(CONTENT_TYPE, "application/x-protobuf")
            .body(Full::new(body))
            .map_err(|e| Failed::Refused(e.to_string()))?;
        let res = send
            .send_request(req)
            .await
            .map_err(|e| retry("sending", &e))?;
        let status = res.status();
        // The answer's body (a status message, at most a few KiB kept).
        let text = res
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        driver.abort();
        if status.is_success() {
            return Ok(());
        }
        let said = String::from_utf8_lossy(&text[..text.len().min(200)]).into_owned();
        let why = format!(
            "HTTP {status}{}",
            if said.is_empty() {
                String::new()
            } else {
                format!(": {said}")
            }
        );
        // OTLP/HTTP: 429, 502, 503 and 504 may be retried; others not.
        if matches!(status.as_u16(), 429 | 502 | 503 | 504) {
            Err(Failed::Retry(why))
        } else {
            Err(Failed::Refused(why))
        }
    };
    match tokio::time::timeout(POST_TIMEOUT, exchange).await {
        Ok(r) => r,
        Err(_) => Err(Failed::Retry(format!(
            "no answer within {} s",
            POST_TIMEOUT.as_secs()
        ))),
    }
}

/// `request` encoded as it is posted.
pub fn encode(req: &proto::ExportMetricsServiceRequest) -> Bytes {
    Bytes::from(req.encode_to_vec())
}
