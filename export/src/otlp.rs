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

pub mod config;
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
/// What the pusher still tries at the end of a run, at most.
pub const FLUSH: Duration = Duration::from_secs(5);

pub use config::{Endpoint, parse_endpoint, parse_exact};

/// `--otlp` and `--otlp-every`, as plain values.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpConfig {
    pub transport: config::Transport,
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

/// What an export carries, and so where it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Metrics,
    Logs,
}

/// The exports on their way: a bounded queue and the thread that posts
/// them. Dropping it sends what is queued (for at most [`FLUSH`]), then
/// joins the thread.
pub struct Pusher {
    tx: Option<Sender<(Signal, Bytes)>>,
    /// The queue's other end, to let the oldest go when it is full.
    oldest: Receiver<(Signal, Bytes)>,
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

/// How a pusher reaches its collector: the transport and, for
/// `https://`, the TLS connector (made once, from its roots).
struct Link {
    transport: config::Transport,
    tls: Option<tokio_rustls::TlsConnector>,
}

impl Link {
    fn new(transport: config::Transport) -> Result<Self> {
        let tls = match transport.metrics.tls || transport.logs.tls {
            false => None,
            true => Some(connector(&transport.roots)?),
        };
        Ok(Link { transport, tls })
    }

    fn endpoint(&self, signal: Signal) -> &Endpoint {
        match signal {
            Signal::Metrics => &self.transport.metrics,
            Signal::Logs => &self.transport.logs,
        }
    }
}

/// A TLS connector that checks the collector's certificate against
/// `roots`: the system's, or those of a PEM file.
fn connector(roots: &config::Roots) -> Result<tokio_rustls::TlsConnector> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let mut store = rustls::RootCertStore::empty();
    match roots {
        config::Roots::File(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| anyhow::anyhow!("{e}"))
                .with_context(|| format!("OTEL_EXPORTER_OTLP_CERTIFICATE {}", path.display()))?;
            for c in certs {
                store.add(c).with_context(|| {
                    format!("OTEL_EXPORTER_OTLP_CERTIFICATE {}", path.display())
                })?;
            }
            if store.is_empty() {
                anyhow::bail!(
                    "OTEL_EXPORTER_OTLP_CERTIFICATE {}: no certificate in it",
                    path.display()
                );
            }
        }
        config::Roots::System => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                anyhow::bail!(
                    "no system root certificates were found for the OTLP collector's https:// (install ca-certificates, or give OTEL_EXPORTER_OTLP_CERTIFICATE)"
                );
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .with_root_certificates(store)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

impl Pusher {
    /// Starts the thread that posts by `transport`; `queue` exports wait
    /// at most. Fails where its roots cannot be read.
    pub fn start(transport: config::Transport, queue: usize) -> Result<Self> {
        let link = Link::new(transport)?;
        let (tx, rx) = crossbeam_channel::bounded::<(Signal, Bytes)>(queue.max(1));
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
                    send_all(&runtime, &link, &rx, &dropped, &stop, queue);
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

    /// Queues a metrics export without waiting: when the queue is full its
    /// oldest export goes (counted).
    pub fn push(&self, body: Bytes) {
        self.push_signal(Signal::Metrics, body);
    }

    /// Queues an export of `signal` as [`Pusher::push`] does.
    pub fn push_signal(&self, signal: Signal, body: Bytes) {
        let Some(tx) = &self.tx else { return };
        let mut item = (signal, body);
        loop {
            match tx.try_send(item) {
                Ok(()) => return,
                Err(TrySendError::Full(b)) => {
                    if self.oldest.try_recv().is_ok() {
                        self.dropped.fetch_add(1, Relaxed);
                    }
                    item = b;
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
    /// The collector refused flatline's credentials (401, 403).
    Credentials(String),
}

/// The pusher's loop: each export in order, retried until it is taken,
/// refused, or the run ends.
fn send_all(
    runtime: &tokio::runtime::Runtime,
    link: &Link,
    rx: &Receiver<(Signal, Bytes)>,
    dropped: &AtomicU64,
    stop: &AtomicBool,
    queue: usize,
) {
    let mut down = false;
    let mut refused_said = false;
    let mut dropped_when_down = 0;
    let url = &link.transport.metrics.url;
    while let Ok((signal, body)) = rx.recv() {
        let mut backoff = Duration::from_secs(1);
        loop {
            if stop.load(Relaxed) {
                let unsent = 1 + rx.len() as u64;
                dropped.fetch_add(unsent, Relaxed);
                eprintln!(
                    "flatline: OTLP: the run ended with {unsent} export{} unsent: {url} did not take them",
                    if unsent == 1 { "" } else { "s" },
                );
                return;
            }
            match runtime.block_on(post(link, signal, body.clone())) {
                Ok(()) => {
                    if down {
                        down = false;
                        let lost = dropped.load(Relaxed) - dropped_when_down;
                        eprintln!(
                            "flatline: OTLP: {url} takes the metrics again ({lost} export{} lost while it did not)",
                            if lost == 1 { "" } else { "s" }
                        );
                    }
                    break;
                }
                Err(Failed::Refused(why) | Failed::Credentials(why)) if refused_said => {
                    let _ = why;
                    dropped.fetch_add(1, Relaxed);
                    break;
                }
                Err(Failed::Credentials(why)) => {
                    dropped.fetch_add(1, Relaxed);
                    refused_said = true;
                    eprintln!(
                        "flatline: OTLP: {} refused flatline's credentials ({why}): check the authorization header (--otlp-header, OTEL_EXPORTER_OTLP_HEADERS); sampling goes on, and each refused export is dropped and counted (flatline.otlp.dropped_exports)",
                        link.endpoint(signal).url
                    );
                    break;
                }
                Err(Failed::Refused(why)) => {
                    dropped.fetch_add(1, Relaxed);
                    refused_said = true;
                    eprintln!(
                        "flatline: OTLP: {} refused an export ({why}); each refused export is dropped and counted (flatline.otlp.dropped_exports)",
                        link.endpoint(signal).url
                    );
                    break;
                }
                Err(Failed::Retry(why)) => {
                    if !down {
                        down = true;
                        dropped_when_down = dropped.load(Relaxed);
                        eprintln!(
                            "flatline: OTLP: {url} does not take the metrics ({why}); sampling goes on, and up to {queue} exports wait and are retried with back-off",
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

/// One POST of `body` to `signal`'s endpoint, over a connection of its
/// own (an export every few seconds needs no pool), within the
/// transport's timeout.
async fn post(link: &Link, signal: Signal, body: Bytes) -> Result<(), Failed> {
    let endpoint = link.endpoint(signal);
    let retry = |what: &str, e: &dyn std::fmt::Display| Failed::Retry(format!("{what}: {e}"));
    let timeout = link.transport.timeout;
    let exchange = async {
        let stream = tokio::net::TcpStream::connect((endpoint.host.as_str(), endpoint.port))
            .await
            .map_err(|e| retry("connecting", &e))?;
        match (&link.tls, endpoint.tls) {
            (Some(tls), true) => {
                let name = rustls_pki_types::ServerName::try_from(endpoint.host.clone())
                    .map_err(|e| Failed::Refused(format!("{}: {e}", endpoint.host)))?;
                let stream = tls
                    .connect(name, stream)
                    .await
                    .map_err(|e| retry("TLS", &e))?;
                exchange(link, endpoint, stream, body).await
            }
            _ => exchange(link, endpoint, stream, body).await,
        }
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(r) => r,
        Err(_) => Err(Failed::Retry(format!(
            "no answer within {:.1} s",
            timeout.as_secs_f64()
        ))),
    }
}

/// The request and its answer, on a connection made.
async fn exchange<S>(link: &Link, endpoint: &Endpoint, stream: S, body: Bytes) -> Result<(), Failed>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use http_body_util::{BodyExt, Full};
    use hyper::header::{CONTENT_ENCODING, CONTENT_TYPE, HOST};
    let retry = |what: &str, e: &dyn std::fmt::Display| Failed::Retry(format!("{what}: {e}"));
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
    let mut req = hyper::Request::post(endpoint.path.as_str())
        .header(HOST, authority)
        .header(CONTENT_TYPE, "application/x-protobuf");
    for (k, v) in &link.transport.headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let body = if link.transport.gzip {
        req = req.header(CONTENT_ENCODING, "gzip");
        gzip(&body)
    } else {
        body
    };
    let req = req
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
    match status.as_u16() {
        429 | 502 | 503 | 504 => Err(Failed::Retry(why)),
        401 | 403 => Err(Failed::Credentials(why)),
        _ => Err(Failed::Refused(why)),
    }
}

/// `body` gzipped (`OTEL_EXPORTER_OTLP_COMPRESSION=gzip`).
fn gzip(body: &[u8]) -> Bytes {
    use std::io::Write;
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    // Writing into a Vec cannot fail.
    let _ = z.write_all(body);
    Bytes::from(z.finish().unwrap_or_default())
}

/// How grave a log record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Info,
    Warn,
    Error,
}

/// One log record, before encoding: a death, a growth or a finding.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub severity: Severity,
    /// The sentence, as the receipt says it.
    pub body: String,
    /// The finding's fields (`flatline.kind`, `process.pid`, …).
    pub attributes: Vec<(&'static str, Attr)>,
}

/// The records of one export, stamped `time_ns` since the Unix epoch.
pub fn logs_request(
    resource: &[(String, Attr)],
    records: &[Record],
    time_ns: u64,
) -> proto::ExportLogsServiceRequest {
    let log_records = records
        .iter()
        .map(|r| proto::LogRecord {
            time_unix_nano: time_ns,
            observed_time_unix_nano: time_ns,
            severity_number: match r.severity {
                Severity::Info => 9,
                Severity::Warn => 13,
                Severity::Error => 17,
            },
            severity_text: match r.severity {
                Severity::Info => "INFO",
                Severity::Warn => "WARN",
                Severity::Error => "ERROR",
            }
            .into(),
            body: Some(any(&Attr::Str(r.body.clone()))),
            attributes: r.attributes.iter().map(|(k, v)| kv(k, v)).collect(),
        })
        .collect();
    proto::ExportLogsServiceRequest {
        resource_logs: vec![proto::ResourceLogs {
            resource: Some(proto::Resource {
                attributes: resource.iter().map(|(k, v)| kv(k, v)).collect(),
            }),
            scope_logs: vec![proto::ScopeLogs {
                scope: Some(proto::InstrumentationScope {
                    name: "flatline".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                }),
                log_records,
            }],
            schema_url: String::new(),
        }],
    }
}

fn any(v: &Attr) -> proto::AnyValue {
    match v {
        Attr::Str(s) => proto::AnyValue {
            string_value: Some(s.clone()),
            int_value: None,
        },
        Attr::Int(i) => proto::AnyValue {
            string_value: None,
            int_value: Some(*i),
        },
    }
}

fn kv(k: &str, v: &Attr) -> proto::KeyValue {
    proto::KeyValue {
        key: k.to_owned(),
        value: Some(any(v)),
    }
}

/// `logs_request` encoded as it is posted.
pub fn encode_logs(req: &proto::ExportLogsServiceRequest) -> Bytes {
    Bytes::from(req.encode_to_vec())
}

/// `request` encoded as it is posted.
pub fn encode(req: &proto::ExportMetricsServiceRequest) -> Bytes {
    Bytes::from(req.encode_to_vec())
}
