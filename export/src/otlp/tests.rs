//! The endpoint, the names, the encoding (decoded back with the same
//! messages) and the pusher against a small collector on loopback that
//! goes away and comes back. (CI's `scripts/otlp-check.py` decodes real
//! exports with `opentelemetry-proto`.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use flatline_telemetry::{ChannelSpec, Group, Unit};
use prost::Message;

use super::proto::ExportMetricsServiceRequest;
use super::{Attr, Point, Pusher, config, encode, parse_endpoint, request, value_metric};

#[test]
fn an_endpoint_is_an_http_url_to_v1_metrics() {
    let e = parse_endpoint("http://127.0.0.1:4318").unwrap();
    assert_eq!(e.url, "http://127.0.0.1:4318/v1/metrics");
    assert_eq!(
        (e.host.as_str(), e.port, e.path.as_str()),
        ("127.0.0.1", 4318, "/v1/metrics")
    );
    let e = parse_endpoint("http://collector:4318/v1/metrics").unwrap();
    assert_eq!(e.path, "/v1/metrics");
    let e = parse_endpoint("http://gateway/otlp/").unwrap();
    assert_eq!((e.port, e.path.as_str()), (80, "/otlp/v1/metrics"));
    let e = parse_endpoint("http://[::1]:4318").unwrap();
    assert_eq!((e.host.as_str(), e.port), ("::1", 4318));
    assert_eq!(e.url, "http://[::1]:4318/v1/metrics");
    // https, on 443 unless a port is given; a signal's sibling path.
    let e = parse_endpoint("https://c").unwrap();
    assert_eq!(
        (e.tls, e.port, e.url.as_str()),
        (true, 443, "https://c/v1/metrics")
    );
    assert_eq!(e.sibling("/v1/logs").url, "https://c/v1/logs");
    let e = super::parse_exact("https://c:4318/custom").unwrap();
    assert_eq!((e.port, e.path.as_str()), (4318, "/custom"));
    for bad in [
        "c:4318",
        "ftp://c",
        "http://:4318",
        "http://c:x",
        "http://u:p@c:1",
    ] {
        assert!(parse_endpoint(bad).is_err(), "{bad} was accepted");
    }
    assert!(parse_endpoint("ftp://c").unwrap_err().contains("https://"));
}

#[test]
fn channels_take_the_semantic_conventions_names_where_one_exists() {
    let spec = |n: &str| ChannelSpec::new(n, Unit::Bytes, Group::Memory);
    let name = |n: &str| value_metric(&spec(n), 42);
    assert_eq!(name("mem.rss").0, "process.memory.usage");
    assert_eq!(name("mem.rss").1, [("process.pid", Attr::Int(42))]);
    assert_eq!(name("pid7.rss").1, [("process.pid", Attr::Int(7))]);
    assert_eq!(name("pid7.pss").0, "flatline.channel.value");
    assert_eq!(name("mem.vm_size").0, "process.memory.virtual");
    assert_eq!(name("gpu1.used").0, "hw.gpu.memory.usage");
    assert_eq!(name("gpu1.used").1, [("hw.id", Attr::Str("gpu1".into()))]);
    assert_eq!(name("gpu1.total").0, "hw.gpu.memory.limit");
    let util = name("gpu0.util");
    assert_eq!((util.0, util.2), ("hw.gpu.utilization", 0.01));
    assert_eq!(name("gpu.other").0, "flatline.channel.value");
    assert_eq!(name("tree.pss").0, "flatline.channel.value");
}

#[test]
fn an_export_groups_points_by_metric_under_one_resource() {
    let p = |metric, ch: &str, value| Point {
        metric,
        unit: "By",
        attributes: vec![("flatline.channel", Attr::Str(ch.into()))],
        value,
    };
    let points = [
        p("process.memory.usage", "mem.rss", 1e8),
        p("flatline.channel.value", "tree.pss", 2e8),
        p("process.memory.usage", "pid9.rss", 3e8),
    ];
    let resource = [
        ("service.name".to_owned(), Attr::Str("flatline".into())),
        ("rank".to_owned(), Attr::Str("3".into())),
    ];
    let body = encode(&request(&resource, &points, 10, 20));
    let r = ExportMetricsServiceRequest::decode(body.as_ref()).unwrap();
    let rm = &r.resource_metrics[0];
    let attrs = &rm.resource.as_ref().unwrap().attributes;
    assert_eq!(attrs[1].key, "rank");
    assert_eq!(
        attrs[1].value.as_ref().unwrap().string_value.as_deref(),
        Some("3")
    );
    let metrics = &rm.scope_metrics[0].metrics;
    let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["process.memory.usage", "flatline.channel.value"]);
    let usage = &metrics[0].gauge.as_ref().unwrap().data_points;
    assert_eq!(usage.len(), 2);
    assert_eq!(usage[1].as_double, Some(3e8));
    assert_eq!(
        (usage[1].start_time_unix_nano, usage[1].time_unix_nano),
        (10, 20)
    );
    assert_eq!(metrics[0].unit, "By");
    assert!(!metrics[0].description.is_empty());
}

/// A collector on `listener`: answers each POST with `status`, keeping the
/// bodies, until `stop`.
fn collector(listener: TcpListener, status: u16, got: Arc<Mutex<Vec<Vec<u8>>>>) {
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut len = 0;
            let mut path = String::new();
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                if path.is_empty() {
                    path = line.clone();
                }
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
                if line == "\r\n" {
                    break;
                }
            }
            assert!(path.starts_with("POST /v1/metrics "), "{path}");
            let mut body = vec![0; len];
            r.read_exact(&mut body).unwrap();
            got.lock().unwrap().push(body);
            let _ = write!(
                s,
                "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
        }
    });
}

fn wait_for(n: usize, got: &Mutex<Vec<Vec<u8>>>) -> Vec<Vec<u8>> {
    let end = Instant::now() + Duration::from_secs(20);
    while Instant::now() < end {
        if got.lock().unwrap().len() >= n {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    got.lock().unwrap().clone()
}

/// Plain HTTP to a port on loopback, as `--otlp http://127.0.0.1:PORT`
/// with no OTEL_EXPORTER_OTLP_* variables set.
fn plain(port: u16) -> config::Transport {
    let e = parse_endpoint(&format!("http://127.0.0.1:{port}")).unwrap();
    config::transport(Some(Some(e)), &[], |_| None)
        .unwrap()
        .unwrap()
}

#[test]
fn exports_wait_while_the_collector_is_away_and_arrive_in_order() {
    // A port with nothing on it yet.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let pusher = Pusher::start(plain(port), 3).unwrap();
    // Five exports while no one listens: the queue keeps the newest three
    // (the first is being tried, so one more may be held).
    for k in 0..5u8 {
        pusher.push(Bytes::from(vec![k]));
        std::thread::sleep(Duration::from_millis(100));
    }
    let got = Arc::new(Mutex::new(Vec::new()));
    collector(
        TcpListener::bind(("127.0.0.1", port)).unwrap(),
        200,
        got.clone(),
    );
    // Every export either arrives or is counted as dropped: wait until all
    // five are accounted for (however slowly the retries run), then look.
    let end = Instant::now() + Duration::from_secs(60);
    while got.lock().unwrap().len() as u64 + pusher.dropped() < 5 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    let arrived = got.lock().unwrap().clone();
    let firsts: Vec<u8> = arrived.iter().map(|b| b[0]).collect();
    // In order, the last one among them, and nothing lost uncounted.
    assert!(firsts.windows(2).all(|w| w[0] < w[1]), "{firsts:?}");
    assert_eq!(firsts.last(), Some(&4), "{firsts:?}");
    assert_eq!(firsts.len() as u64 + pusher.dropped(), 5, "{firsts:?}");
    // Once it is back, a new export goes at once.
    pusher.push(Bytes::from_static(&[9]));
    let arrived = wait_for(firsts.len() + 1, &got);
    assert_eq!(arrived.last().unwrap(), &[9]);
}

#[test]
fn a_refused_export_is_dropped_and_counted_not_retried() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(Vec::new()));
    collector(listener, 400, got.clone());
    let pusher = Pusher::start(plain(port), 8).unwrap();
    pusher.push(Bytes::from_static(&[1]));
    pusher.push(Bytes::from_static(&[2]));
    let arrived = wait_for(2, &got);
    assert_eq!(arrived, [vec![1], vec![2]]);
    let end = Instant::now() + Duration::from_secs(5);
    while pusher.dropped() < 2 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(pusher.dropped(), 2);
}
