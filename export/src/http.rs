//! The `/metrics` (and `/debug/pprof/heap`) server: one thread, event-driven (hyper's HTTP/1 on a
//! single-threaded tokio runtime), behind the [`Door`] of a web config.
//!
//! A connection costs a socket and a few KiB, not a thread, so hundreds of
//! idle or slow clients cannot keep a scrape out: each must send its request
//! head within [`REQUEST_DEADLINE`] (TLS handshake included) and within
//! [`MAX_REQUEST_BYTES`], and at most [`MAX_CONNECTIONS`] are held at once
//! (one past that is closed at once). A scrape copies nothing: the published
//! exposition is one shared buffer. bcrypt checks of passwords not seen
//! before run on one blocking thread beside it, never on the thread that
//! answers scrapes. The heap profile is behind the same door.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::{Semaphore, oneshot};

use crate::web::{Check, Door};

/// A client must have sent its whole request head by then (and finished
/// its TLS handshake), or it is closed; also the longest a kept-alive
/// connection waits idle for its next request.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(2);
/// The longest request head read; a longer one is answered 431.
pub const MAX_REQUEST_BYTES: usize = 8 * 1024;
/// Connections held at once, idle, slow or busy; one past that is closed
/// unanswered. A scrape takes one for a few milliseconds.
pub const MAX_CONNECTIONS: usize = 512;

/// What is served, swapped whole once a second.
pub type Published = Arc<Mutex<Pages>>;

/// The pages served: each one shared buffer.
#[derive(Debug, Clone, Default)]
pub struct Pages {
    /// `/metrics`: the exposition.
    pub metrics: Bytes,
    /// `/debug/pprof/heap`: the allocation sites as a gzipped pprof profile
    /// (`watch --sites`); `None` while there are none.
    pub heap: Option<Bytes>,
}

/// A running server; dropping it stops serving and joins its thread.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Serves `published` on `listener` (already bound) behind `door`.
    pub fn start(
        listener: std::net::TcpListener,
        door: Option<Door>,
        published: Published,
    ) -> Result<Self> {
        let addr = listener.local_addr().context("reading the bound address")?;
        listener
            .set_nonblocking(true)
            .context("setting up the /metrics socket")?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .max_blocking_threads(1)
            .thread_name("flatline-auth")
            .on_thread_start(flatline_telemetry::alloc::mark_observer_thread)
            .build()
            .context("starting the /metrics server")?;
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("flatline-http".into())
            .spawn(move || {
                flatline_telemetry::alloc::mark_observer_thread();
                runtime.block_on(async move {
                    match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => accept(l, door.map(Arc::new), published, stopped).await,
                        Err(e) => eprintln!("flatline: the /metrics server stopped: {e}"),
                    }
                });
            })
            .context("starting the /metrics server")?;
        Ok(Self {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The address served (the port chosen when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Accepts until stopped; each connection is a task of its own.
async fn accept(
    listener: tokio::net::TcpListener,
    door: Option<Arc<Door>>,
    published: Published,
    mut stopped: oneshot::Receiver<()>,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let stream = tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of file descriptors and the like: wait, then go on.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            drop(stream); // full: closed unanswered, the others come first
            continue;
        };
        let (door, published) = (door.clone(), published.clone());
        tokio::spawn(async move {
            let _ = stream.set_nodelay(true);
            connection(stream, door, published).await;
            drop(slot);
        });
    }
}

/// One connection: its TLS handshake, if any, then HTTP/1 requests.
async fn connection(stream: tokio::net::TcpStream, door: Option<Arc<Door>>, published: Published) {
    let tls = door.as_ref().and_then(|d| d.tls.clone());
    match tls {
        Some(config) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(config);
            // Plain HTTP, a stalled or a failed handshake: closed, no answer.
            let Ok(Ok(stream)) =
                tokio::time::timeout(REQUEST_DEADLINE, acceptor.accept(stream)).await
            else {
                return;
            };
            http(TokioIo::new(stream), door, published).await;
        }
        None => http(TokioIo::new(stream), door, published).await,
    }
}

async fn http<I>(io: I, door: Option<Arc<Door>>, published: Published)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| {
        let (door, published) = (door.clone(), published.clone());
        async move { Ok::<_, Infallible>(respond(&req, door.as_deref(), &published).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(REQUEST_DEADLINE)
        .max_buf_size(MAX_REQUEST_BYTES)
        .serve_connection(io, service)
        .await;
}

async fn respond(
    req: &Request<Incoming>,
    door: Option<&Door>,
    published: &Published,
) -> Response<Full<Bytes>> {
    if let Some(auth) = door.and_then(|d| d.auth.clone()) {
        let header = req.headers().get(AUTHORIZATION).map(HeaderValue::as_bytes);
        let pass = match auth.check(header) {
            Check::Pass => true,
            Check::Refuse => false,
            Check::Hash(user, password, hash) => {
                tokio::task::spawn_blocking(move || auth.verify(&user, &password, &hash))
                    .await
                    .unwrap_or(false)
            }
        };
        if !pass {
            let mut r = text(StatusCode::UNAUTHORIZED, "Unauthorized\n");
            r.headers_mut().insert(
                WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"flatline\""),
            );
            return r;
        }
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "");
    }
    let (body, content_type) = match req.uri().path() {
        "/metrics" => {
            let body = published
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .metrics
                .clone();
            (
                body,
                prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
            )
        }
        HEAP => {
            let heap = published
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .heap
                .clone();
            let Some(body) = heap else {
                return text(StatusCode::NOT_FOUND, NO_HEAP);
            };
            // What Go's net/http/pprof sends a profile as.
            (body, "application/octet-stream")
        }
        _ => {
            return text(
                StatusCode::NOT_FOUND,
                "flatline serves /metrics and /debug/pprof/heap\n",
            );
        }
    };
    let mut r = Response::new(Full::new(body));
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// Where the heap profile is served: Go's `net/http/pprof` path, which
/// `go tool pprof`, Pyroscope's and Parca's scrapers ask for.
pub const HEAP: &str = "/debug/pprof/heap";

/// The answer at [`HEAP`] while no site is known.
const NO_HEAP: &str = "no allocation sites: a heap profile needs `flatline watch --sites -- COMMAND` \
(or `--sites --pid PID`, attached to a running process), and a site that holds 1 MiB\n";

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    r
}
