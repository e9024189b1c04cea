//! What the integration tests share: running the `flatline` binary, reading its
//! output, and waiting for what a test needs.
//!
//! # How tests wait
//!
//! The suite runs on whatever machine CI lands on: a loaded 2-core box or one
//! whose CPU does ten times the work in the same time. So no test assumes how
//! long work takes or how much work fits in a time:
//!
//! - A test that needs N samples, steps or rows *waits for them* ([`wait_for`],
//!   capped at [`PATIENCE`]) and then asserts; it never sleeps a fixed time and
//!   then counts.
//! - A test that needs a workload to last long enough for the sampler to see it
//!   grows the work until it has ([`ops1b_with_telemetry`]), rather than
//!   picking an op count that "takes about a second".
//! - Counts that follow the clock (samples of a soak of `--seconds S` at `--hz
//!   H`) are bounded by what the clock allows, measured in the same run (the
//!   recording's own duration), never by a fixed figure for an idle machine:
//!   a late sampler skips ticks, it never adds any.
//!
//! The caps only turn a hang into a failure; a run that passes never waits
//! for them.
#![allow(dead_code)] // each test binary uses its own share of these helpers

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// How long a test waits for something that takes a fraction of a second on
/// an idle machine before it calls it missing.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// A shipped recording, by its path under `recordings/`.
pub fn recording(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../recordings")
        .join(rel)
}

/// The format-v1 golden file.
pub fn golden_v1() -> PathBuf {
    recording("golden/v1.flr")
}

/// Runs the `flatline` binary built for these tests.
pub fn flatline(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flatline"))
        .args(args)
        .output()
        .expect("the flatline binary runs")
}

/// `flatline import LOG --out OUT`.
pub fn import(log: &Path, out: &Path) -> Output {
    flatline(&[
        "import",
        log.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
}

/// Its stdout, after asserting that it succeeded.
pub fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}, stderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

/// Its stdout as one JSON object, after asserting that it succeeded.
pub fn json(out: &Output) -> serde_json::Value {
    serde_json::from_str(&ok(out)).expect("stdout is one JSON object")
}

/// `flatline report PATH --format json`.
pub fn report(path: &Path) -> serde_json::Value {
    json(&flatline(&[
        "report",
        path.to_str().unwrap(),
        "--format",
        "json",
    ]))
}

/// Asserts exit 1 with one line on stderr that contains `needle`.
/// The processes of a receipt's `process_tree` that have this role.
pub fn with_role<'a>(tree: &'a serde_json::Value, role: &str) -> Vec<&'a serde_json::Value> {
    tree["processes"]
        .as_array()
        .expect("a process tree's processes")
        .iter()
        .filter(|p| p["role"] == role)
        .collect()
}

/// A JSON array of pids, sorted (a process tree's `grew`).
pub fn pids(v: &serde_json::Value) -> Vec<u64> {
    let mut p: Vec<u64> = v
        .as_array()
        .expect("an array of pids")
        .iter()
        .map(|p| p.as_u64().expect("a pid"))
        .collect();
    p.sort_unstable();
    p
}

pub fn fails(out: &Output, needle: &str) {
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(needle), "{needle:?} not in {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
}

/// Polls `check` every `every` until it returns `Some` or [`PATIENCE`] runs
/// out (then `None`). The caller asserts on what it got, so a failure names
/// what was missing.
pub fn wait_for<T>(every: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let t0 = Instant::now();
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        if t0.elapsed() >= PATIENCE {
            return None;
        }
        std::thread::sleep(every);
    }
}

/// `bench ops1b --telemetry-hz HZ --json`, with four times the operations each
/// time until the sampler recorded at least `min_samples` (a fast CPU can
/// finish 3×10⁸ operations in a handful of ticks). Returns the last report and
/// its op count.
pub fn ops1b_with_telemetry(hz: f64, min_samples: u64) -> (serde_json::Value, u64) {
    let mut ops: u64 = 300_000_000;
    loop {
        let v = json(&flatline(&[
            "bench",
            "ops1b",
            "--ops",
            &ops.to_string(),
            "--telemetry-hz",
            &hz.to_string(),
            "--json",
        ]));
        let samples = v["telemetry"]["samples"]
            .as_u64()
            .unwrap_or_else(|| panic!("telemetry.samples in {v}"));
        // 3×10⁸ · 4⁴ ≈ 7.7×10¹⁰: minutes even at 0.1 ns/op; give up there.
        if samples >= min_samples || ops >= 70_000_000_000 {
            return (v, ops);
        }
        ops *= 4;
    }
}

/// A tmpfs of `kib` KiB, unmounted when dropped.
pub struct SmallDisk {
    dir: tempfile::TempDir,
}

/// A check that cannot run on this machine: under CI (`CI=true`, which
/// `.ci/run` sets) that fails the test, for a check that did not run must
/// never read as one that passed; elsewhere it says so on stderr.
pub fn cannot_run(why: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "under CI every check runs, and this one cannot: {why}"
    );
    eprintln!("not run: {why}");
}

impl SmallDisk {
    pub fn mount(kib: u32) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::read_to_string("/proc/self/status")
            .unwrap_or_default()
            .lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Root can mount one wherever these tests run (CI does).
            assert!(!root, "root could not mount a tmpfs");
            cannot_run("mounting a tmpfs needs root");
            return None;
        }
        Some(Self { dir })
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// One HTTP request; the whole answer (empty when the server closed the
/// connection unanswered, as it does while it is full).
pub fn get(addr: SocketAddr, request: &str) -> String {
    let mut body = String::new();
    let Ok(mut s) = TcpStream::connect(addr) else {
        return body;
    };
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    if s.write_all(request.as_bytes()).is_ok() && s.read_to_string(&mut body).is_err() {
        body.clear();
    }
    body
}

pub fn metrics(addr: SocketAddr) -> String {
    get(
        addr,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
}

/// The value of the first series of `name` whose labels include every one
/// of `labels` (`key="value"`).
pub fn series(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| labels.iter().all(|want| l.contains(want)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// The address a run says it serves `/metrics` at, from its stderr line
/// `flatline: serving Prometheus metrics at http://ADDR/metrics (…)`.
pub fn served_at(stderr: &str) -> Option<SocketAddr> {
    let rest = stderr
        .lines()
        .find_map(|l| l.strip_prefix("flatline: serving Prometheus metrics at "))?;
    let (_, rest) = rest.split_once("://")?;
    let (addr, _) = rest.split_once("/metrics")?;
    addr.parse().ok()
}

/// A new recording at `path` of a watch with `channels` (no host facts),
/// for a test to write samples and events into.
pub fn watch_recording(
    path: &Path,
    channels: Vec<flatline_telemetry::ChannelSpec>,
) -> flatline_telemetry::recording::RecordingWriter {
    use flatline_telemetry::recording::{Header, HostFacts, RecordingWriter};
    let schema = flatline_telemetry::Schema { channels };
    let header = Header::new(
        "watch",
        schema,
        HostFacts::default(),
        Default::default(),
        vec![],
    );
    RecordingWriter::create(path, &header, false).unwrap()
}

/// The library, built beside the binary under test (`cargo test` builds no
/// cdylib a test does not link); built every time, once per test binary, so
/// that a library left from older sources is never the one tested.
pub fn library() -> PathBuf {
    static BUILD: std::sync::Once = std::sync::Once::new();
    let bin = Path::new(env!("CARGO_BIN_EXE_flatline"));
    let lib = bin.with_file_name("libflatline_preload.so");
    BUILD.call_once(|| {
        let release = bin.parent().and_then(|d| d.file_name()) == Some("release".as_ref());
        let mut cargo = Command::new(env!("CARGO"));
        cargo.args(["build", "-p", "flatline-preload"]);
        if release {
            cargo.arg("--release");
        }
        let status = cargo.status().expect("cargo runs");
        assert!(status.success(), "building flatline-preload");
    });
    assert!(lib.is_file(), "{} is missing", lib.display());
    lib
}
