//! `--prometheus ADDR`: a headless watch of a process whose growth is known
//! serves what /proc says and what the analysis finds, and its server stands
//! up to clients that misbehave.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::{get, metrics, series, served_at, wait_for};

const GROWER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/grower.py");

/// Kills and reaps a child when dropped, pass or fail.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the grower (`rate` MiB/s for `secs` s over a 64 MiB base) and
/// waits until its base is resident.
fn grower(rate: &str, secs: &str) -> Reaped {
    let mut child = Command::new("python3")
        .args([GROWER, rate, secs])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    Reaped(child)
}

/// Starts `flatline watch --headless` of `pid` serving on a free port, and
/// returns it with the address it says it serves at.
fn watch(pid: u32, dir: &Path, extra: &[&str]) -> (Reaped, SocketAddr) {
    let (w, addr, _) = watch_saying(pid, dir, extra);
    (w, addr)
}

/// [`watch`], and the line that says where (and how) it serves.
fn watch_saying(pid: u32, dir: &Path, extra: &[&str]) -> (Reaped, SocketAddr, String) {
    let out = dir.join("w.flr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_flatline"))
        .args(["watch", "--headless", "--hz", "20", "--pid"])
        .arg(pid.to_string())
        .args(["--prometheus", "127.0.0.1:0", "--out"])
        .arg(&out)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("flatline runs");
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let mut found = None;
    for line in stderr.lines() {
        let line = line.unwrap();
        if let Some(addr) = served_at(&line) {
            found = Some((addr, line));
            break;
        }
    }
    let (addr, line) = found.expect("the watch says where it serves");
    (Reaped(child), addr, line)
}

fn vm_rss(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib * 1024.0
}

#[test]
fn a_growing_process_is_served_as_linear_with_its_value_and_slope() {
    let dir = tempfile::tempdir().unwrap();
    // 2 MiB/s over 64 MiB: a second of lag is about 2 % of the level.
    let g = grower("2", "60");
    let pid = g.0.id();
    let (_w, addr) = watch(pid, dir.path(), &["--seconds", "30"]);
    let rss = [r#"channel="mem.rss""#, r#"unit="bytes""#, r#"kind="level""#];
    let linear = wait_for(Duration::from_millis(500), || {
        let text = metrics(addr);
        let mut labels = rss.to_vec();
        labels.push(r#"verdict="linear""#);
        (series(&text, "flatline_channel_verdict", &labels) == Some(1.0)).then_some(text)
    })
    .expect("mem.rss is called linear within the wait");
    assert!(linear.starts_with("HTTP/1.1 200 OK"), "{linear}");
    assert!(linear.contains("text/plain; version=0.0.4"), "{linear}");
    // Exactly one verdict holds.
    let ones = linear
        .lines()
        .filter(|l| {
            l.starts_with("flatline_channel_verdict{") && l.contains(r#"channel="mem.rss""#)
        })
        .filter(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) == Some(1.0))
        .count();
    assert_eq!(ones, 1, "{linear}");
    assert!(linear.contains(&format!(r#"pid="{pid}""#)), "{linear}");
    // The value against /proc, read at about the same moment: the growth
    // between the exporter's refresh and now is at most ~1.2 s of 2 MiB/s.
    let text = metrics(addr);
    let truth = vm_rss(pid);
    let served = series(&text, "flatline_channel_value", &rss).unwrap();
    assert!(
        (served / truth - 1.0).abs() < 0.05,
        "served {served:.0} against /proc {truth:.0}"
    );
    let slope = series(&text, "flatline_channel_slope_per_second", &rss).unwrap();
    let want = 2.0 * 1048576.0;
    assert!(
        (slope / want - 1.0).abs() < 0.15,
        "slope {slope:.0} B/s against {want:.0}"
    );
    // The watcher's own health is there.
    for name in [
        "flatline_samples_total",
        "flatline_dropped_samples_total",
        "flatline_probe_errors_total",
        "flatline_resident_memory_bytes",
    ] {
        assert!(text.contains(&format!("\n{name}{{")), "{name} in {text}");
    }
}

#[test]
fn slow_huge_and_stray_requests_do_not_stall_the_scrape() {
    let dir = tempfile::tempdir().unwrap();
    let g = grower("0", "0");
    let (_w, addr) = watch(g.0.id(), dir.path(), &["--seconds", "30"]);
    // Hundreds of clients that connect and say nothing or never finish
    // their request: held open, they cost the server a socket each and keep
    // no scrape out.
    let slow: Vec<TcpStream> = (0..300)
        .map(|i| {
            let mut s = TcpStream::connect(addr).unwrap();
            if i % 2 == 0 {
                let _ = s.write_all(b"GET /metr");
            }
            s
        })
        .collect();
    let answered = (0..50)
        .filter(|_| metrics(addr).starts_with("HTTP/1.1 200 OK"))
        .count();
    assert_eq!(answered, 50, "every scrape is answered while 300 wait");
    // And the slow ones are closed once their deadline passes.
    let mut first = slow.into_iter().next().unwrap();
    first.set_read_timeout(Some(support::PATIENCE)).unwrap();
    let mut rest = Vec::new();
    assert_eq!(
        first.read_to_end(&mut rest).ok(),
        Some(0),
        "closed unanswered"
    );
    // A request larger than any real one is refused, not read on.
    let huge = format!(
        "GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n",
        "a".repeat(64 << 10)
    );
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(huge.as_bytes());
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer:.80}");
    // Other paths and methods.
    assert!(get(addr, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n").starts_with("HTTP/1.1 404"));
    assert!(
        get(addr, "POST /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")
            .starts_with("HTTP/1.1 405")
    );
}

#[test]
fn a_bad_or_busy_address_is_a_clear_error_at_start() {
    let bad = support::flatline(&[
        "watch",
        "--headless",
        "--pid",
        "1",
        "--prometheus",
        "nowhere",
    ]);
    assert_eq!(bad.status.code(), Some(2), "a bad flag");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.flr");
    let o = support::flatline(&[
        "soak",
        "--seconds",
        "1",
        "--out",
        out.to_str().unwrap(),
        "--prometheus",
        &addr,
    ]);
    support::fails(&o, &format!("serving /metrics on {addr}"));
    assert!(!out.exists(), "no empty recording is left behind");
}

#[test]
fn an_alert_fires_once_with_a_line_a_marker_and_its_command() {
    let dir = tempfile::tempdir().unwrap();
    let fired = dir.path().join("fired.txt");
    let out = dir.path().join("a.flr");
    let g = grower("2", "60");
    let o = support::flatline(&[
        "watch",
        "--headless",
        "--hz",
        "20",
        // Alerts on the analysis wait for 10 s of analysed readings.
        "--seconds",
        "16",
        "--pid",
        &g.0.id().to_string(),
        "--out",
        out.to_str().unwrap(),
        // The grower's RSS grows 2 MiB/s; its swap does not grow at all.
        "--alert",
        "mem.rss slope > 1MiB/s",
        "--alert",
        "mem.swap > 1GiB",
        "--on-alert",
        &format!(
            "echo \"$FLATLINE_ALERT_CHANNEL $FLATLINE_ALERT_MEASURE $FLATLINE_ALERT_VALUE\" >> {}",
            fired.display()
        ),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("alert `")).collect();
    assert_eq!(lines.len(), 1, "one firing: {err}");
    assert!(
        lines[0].starts_with("flatline: alert `mem.rss slope > 1MiB/s`: mem.rss slope is"),
        "{}",
        lines[0]
    );
    // The command ran once, with the alert in its environment.
    let ran = wait_for(Duration::from_millis(100), || {
        std::fs::read_to_string(&fired).ok()
    })
    .unwrap();
    let ran: Vec<&str> = ran.lines().collect();
    assert_eq!(ran.len(), 1, "{ran:?}");
    let value: f64 = ran[0]
        .strip_prefix("mem.rss slope ")
        .unwrap()
        .parse()
        .unwrap();
    assert!((value / 2097152.0 - 1.0).abs() < 0.25, "{value}");
    // And the recording has its marker.
    let report = support::report(&out);
    let markers = report["events"]["markers"].as_array().unwrap();
    assert!(
        markers.iter().any(|m| m["text"]
            .as_str()
            .unwrap()
            .contains("mem.rss slope > 1MiB/s")),
        "{markers:?}"
    );
}

#[test]
fn a_bad_alert_is_refused_before_anything_starts() {
    let o = support::flatline(&[
        "watch",
        "--headless",
        "--pid",
        "1",
        "--alert",
        "mem.rss slope > 1MiB/week",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no time unit \"week\""), "{err}");
}

/// The copy-on-access job (workers reading a parent's list of objects)
/// served live: in the last seconds of its reading the exporter's verdict
/// for `tree.pss` is growth; for its fix (the same data in one bytes
/// object) it is not. The same assessment as the receipt's, live.
#[test]
fn the_exporter_calls_copy_on_access_growth_and_not_its_fix() {
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/cow_workers.py");
    for (mode, grows) in [("list", true), ("bytes", false)] {
        let dir = tempfile::tempdir().unwrap();
        // 96 MB read in 50 steps of 0.4 s: 20 s of copying.
        let mut job = Reaped(
            Command::new("python3")
                .args([fixture, mode, "96", "50", "0.4"])
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let (_watch, addr) = watch(job.0.id(), dir.path(), &[]);
        // (seconds since the watch began, verdict of tree.pss is growth)
        let start = Instant::now();
        let mut scrapes: Vec<(f64, bool)> = Vec::new();
        while job.0.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(120) {
            let text = metrics(addr);
            if text.contains("flatline_channel_verdict{") {
                let growth = ["linear", "staircase"].iter().any(|v| {
                    series(
                        &text,
                        "flatline_channel_verdict",
                        &["channel=\"tree.pss\"", &format!("verdict=\"{v}\"")],
                    ) == Some(1.0)
                });
                scrapes.push((start.elapsed().as_secs_f64(), growth));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        let end = scrapes.last().map_or(0.0, |s| s.0);
        let late: Vec<bool> = scrapes
            .iter()
            .filter(|s| s.0 >= end - 8.0 && s.0 < end - 1.0)
            .map(|s| s.1)
            .collect();
        assert!(late.len() >= 5, "{mode}: scrapes {scrapes:?}");
        if grows {
            assert!(late.iter().any(|&g| g), "{mode}: {scrapes:?}");
        } else {
            assert!(!late.iter().any(|&g| g), "{mode}: {scrapes:?}");
        }
    }
}

/// A worker killed as its cgroup counts an OOM kill is served as
/// `flatline_process_killed`, with the victim's pid, name and role, while
/// the job lives on.
#[test]
fn an_oom_kill_is_served_with_the_victims_labels() {
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/oom_job.py");
    let dir = tempfile::tempdir().unwrap();
    let cg = dir.path().join("pod");
    std::fs::create_dir(&cg).unwrap();
    std::fs::write(cg.join("memory.max"), "2147483648\n").unwrap();
    std::fs::write(cg.join("memory.current"), "104857600\n").unwrap();
    let mut child = Command::new("python3")
        .arg(fixture)
        .arg(&cg)
        .args(["3", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let job = Reaped(child);
    let victim: u32 = line.split_whitespace().nth(2).unwrap().parse().unwrap();
    let (_watch, addr) = watch(job.0.id(), dir.path(), &["--cgroup", cg.to_str().unwrap()]);
    let start = Instant::now();
    let mut text = String::new();
    // Each piece of evidence arrives at its own reading: the worker may be
    // seen gone (killed by a signal) a reading before the cgroup's count.
    while start.elapsed() < Duration::from_secs(60) {
        text = metrics(addr);
        if text.contains("cause=\"oom_killer\"") {
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let killed = series(
        &text,
        "flatline_process_killed",
        &[
            &format!("victim_pid=\"{victim}\""),
            "victim_role=\"worker\"",
            "victim_name=\"python3\"",
            "cause=\"oom_killer\"",
        ],
    );
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("flatline_process_killed"))
        .collect();
    assert_eq!(killed, Some(1.0), "victim {victim}: {lines:?}");
}

/// The test certificates (made by scripts/make-test-certs.sh).
fn tls_file(name: &str) -> String {
    format!("{}/tests/data/tls/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// One request over TLS, trusting the test CA (with the test client's
/// certificate when `client_cert`): the whole answer, or why none came.
fn tls_get(addr: SocketAddr, request: &str, client_cert: bool) -> Result<String, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(tls_file("ca.pem")).unwrap())
        .unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = if client_cert {
        let chain = vec![CertificateDer::from_pem_file(tls_file("client.pem")).unwrap()];
        let key = PrivateKeyDer::from_pem_file(tls_file("client-key.pem")).unwrap();
        builder.with_client_auth_cert(chain, key).unwrap()
    } else {
        builder.with_no_client_auth()
    };
    let conn =
        rustls::ClientConnection::new(std::sync::Arc::new(config), "127.0.0.1".try_into().unwrap())
            .unwrap();
    let sock = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut tls = rustls::StreamOwned::new(conn, sock);
    tls.write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    match tls.read_to_end(&mut answer) {
        Ok(_) => {}
        // Closed without TLS's goodbye after a whole answer: still an answer.
        Err(_) if !answer.is_empty() => {}
        Err(e) => return Err(e.to_string()),
    }
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

fn scrape_as(user: Option<(&str, &str)>) -> String {
    let auth = user.map_or_else(String::new, |(u, p)| {
        format!("Authorization: Basic {}\r\n", base64(&format!("{u}:{p}")))
    });
    format!("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{auth}\r\n")
}

/// Standard base64 (for a Basic header), without a crate for six lines.
fn base64(s: &str) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in s.as_bytes().chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[test]
fn the_door_lets_in_tls_with_the_password_and_no_one_else() {
    let dir = tempfile::tempdir().unwrap();
    // The hash is made as the docs say: `flatline hash-password`.
    let mut hasher = Command::new(env!("CARGO_BIN_EXE_flatline"))
        .args(["hash-password", "--cost", "4"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    hasher.stdin.take().unwrap().write_all(b"s3cret\n").unwrap();
    let hashed = hasher.wait_with_output().unwrap();
    assert!(hashed.status.success());
    let hash = String::from_utf8(hashed.stdout).unwrap();
    assert!(hash.starts_with("$2"), "{hash}");
    let config = dir.path().join("web.yml");
    std::fs::write(
        &config,
        format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\nbasic_auth_users:\n  prom: '{}'\n",
            tls_file("server.pem"),
            tls_file("server-key.pem"),
            hash.trim()
        ),
    )
    .unwrap();
    let g = grower("0", "0");
    let (_w, addr, line) = watch_saying(
        g.0.id(),
        dir.path(),
        &["--seconds", "60", "--web-config", config.to_str().unwrap()],
    );
    assert!(line.contains("https://"), "{line}");
    assert!(line.contains("(TLS, basic auth (1 user))"), "{line}");
    // The right password over TLS: the metrics (once the first samples
    // are in).
    let ok = tls_get(addr, &scrape_as(Some(("prom", "s3cret"))), false).unwrap();
    assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok:.200}");
    let served = wait_for(Duration::from_millis(200), || {
        let t = tls_get(addr, &scrape_as(Some(("prom", "s3cret"))), false).unwrap();
        t.contains("flatline_channel_value{").then_some(())
    });
    assert!(served.is_some(), "channels are served over TLS");
    // Again (from the server's memory of it, not a second bcrypt).
    let again = tls_get(addr, &scrape_as(Some(("prom", "s3cret"))), false).unwrap();
    assert!(again.starts_with("HTTP/1.1 200 OK"), "{again:.200}");
    // A wrong password, an unknown user, none at all: 401, nothing else.
    for who in [Some(("prom", "wrong")), Some(("eve", "s3cret")), None] {
        let no = tls_get(addr, &scrape_as(who), false).unwrap();
        assert!(no.starts_with("HTTP/1.1 401"), "{who:?}: {no:.200}");
        assert!(no.to_ascii_lowercase().contains("www-authenticate: basic"));
        assert!(!no.contains("flatline_channel"), "{who:?}");
    }
    // The heap profile is behind the same door: 401 without the password;
    // with it, a watch by pid samples no sites, which the 404 says.
    let heap = |who: Option<(&str, &str)>| {
        let req = scrape_as(who).replacen("/metrics", "/debug/pprof/heap", 1);
        tls_get(addr, &req, false).unwrap()
    };
    let no = heap(None);
    assert!(no.starts_with("HTTP/1.1 401"), "{no:.200}");
    let none = heap(Some(("prom", "s3cret")));
    assert!(none.starts_with("HTTP/1.1 404"), "{none:.200}");
    assert!(none.contains("watch --sites"), "{none:.300}");
    // Plain HTTP to the TLS port gets no HTTP answer and no metrics.
    let plain = get(addr, &scrape_as(Some(("prom", "s3cret"))));
    assert!(!plain.contains("HTTP/1.1"), "{plain:.200}");
    assert!(!plain.contains("flatline_channel"));
}

#[test]
fn a_client_ca_lets_in_only_clients_it_signed() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("web.yml");
    std::fs::write(
        &config,
        format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\n  client_ca_file: {}\n  client_auth_type: RequireAndVerifyClientCert\n",
            tls_file("server.pem"),
            tls_file("server-key.pem"),
            tls_file("ca.pem"),
        ),
    )
    .unwrap();
    let g = grower("0", "0");
    let (_w, addr, line) = watch_saying(
        g.0.id(),
        dir.path(),
        &["--seconds", "60", "--web-config", config.to_str().unwrap()],
    );
    assert!(
        line.contains("client certificates: RequireAndVerifyClientCert"),
        "{line}"
    );
    let ok = tls_get(addr, &scrape_as(None), true).unwrap();
    assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok:.200}");
    // The handshake is refused (an error), or at least nothing is served.
    if let Ok(text) = tls_get(addr, &scrape_as(None), false) {
        assert!(!text.contains("flatline_channel"), "{text:.200}");
    }
}

#[test]
fn serving_beyond_loopback_without_a_door_says_so_once() {
    let dir = tempfile::tempdir().unwrap();
    let soak = |addr: &str, name: &str| {
        let out = dir.path().join(name);
        support::flatline(&[
            "soak",
            "--seconds",
            "1",
            "--workload",
            "idle",
            "--prometheus",
            addr,
            "--out",
            out.to_str().unwrap(),
        ])
    };
    let out = soak("0.0.0.0:0", "x.flr");
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(warnings[0].contains("without TLS or a password"), "{err}");
    // On loopback, no warning.
    let out = soak("127.0.0.1:0", "y.flr");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("warning"));
}
