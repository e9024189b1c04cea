//! The preloaded library tested like the allocator it wraps (issue 65):
//! `tests/data/preload_stress.c`, built here, run plain, then with
//! `libflatline_preload.so` preloaded and sampling about every allocation,
//! then under `watch --sites`, whose reader drains the ring as the job
//! writes it (so that every sampled free takes its record out again, the
//! path that deadlocked in a signal handler). Each run must pass every
//! check of the program, print what the plain run printed, and (so that a
//! run in which the hooks were not loaded cannot pass) the ring must have
//! taken thousands of samples.

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::{library, report};

/// The ring's header fields this test reads (`flatline_format::sites`, which
/// this crate does not depend on).
mod ring {
    pub const MAGIC: u64 = u64::from_le_bytes(*b"FLSITES1");
    pub const H_MAGIC: usize = 0;
    pub const H_SAMPLED: usize = 272;
}
use ring as L;

/// The program's arguments: threads, operations a thread, forks, handled
/// signals. Small enough for a debug build on two cores; every allocation
/// is a sample (`SAMPLE_EVERY`), so each phase takes thousands.
const ARGS: [&str; 4] = ["8", "20000", "24", "20000"];
/// Bytes between samples on average: nearly every allocation.
const SAMPLE_EVERY: &str = "64";
/// Only a hang's bound (a deadlock is the failure this test looks for): a
/// run that passes takes seconds.
const HANG: Duration = Duration::from_secs(600);

fn program(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/preload_stress.c");
    let out = dir.join("preload_stress");
    let status = Command::new("cc")
        .args(["-O2", "-g", "-fno-builtin", "-pthread"])
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .status()
        .expect("a C compiler (cc) runs");
    assert!(status.success(), "cc preload_stress.c");
    out
}

/// Runs `cmd` to its end, or kills it after [`HANG`] and fails saying so.
fn bounded(mut cmd: Command, what: &str) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > HANG {
            let _ = child.kill();
            let _ = child.wait();
            let stdout = String::from_utf8_lossy(&reader.join().unwrap()).into_owned();
            panic!(
                "{what} had not ended after {} s (a deadlock?); its output so far:\n{stdout}",
                HANG.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
    }
}

fn passed(run: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success() && stdout.contains("all checks passed"),
        "{what}: {:?}\n{stdout}\n{stderr}",
        run.status
    );
    stdout
}

fn header_u64(ring: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(ring[at..at + 8].try_into().unwrap())
}

#[test]
fn the_preload_passes_an_allocator_stress_test_plain_preloaded_and_watched() {
    let dir = tempfile::tempdir().unwrap();
    let prog = program(dir.path());
    let lib = library();

    // Without the library: the program itself is sound on this C library
    // (its signal phase avoids glibc's own locks), and what it prints is
    // the C library's choices.
    let mut plain = Command::new(&prog);
    plain.args(ARGS);
    let alone = passed(&bounded(plain, "the program alone"), "alone");

    // Preloaded, its rings in a folder of ours: no reader, so the rings
    // fill and drop, the path of a full ring.
    let rings = dir.path().join("rings");
    std::fs::create_dir(&rings).unwrap();
    let mut pre = Command::new(&prog);
    pre.args(ARGS)
        .env("LD_PRELOAD", &lib)
        .env("FLATLINE_SITES_DIR", &rings)
        .env("FLATLINE_SITES_EVERY", SAMPLE_EVERY);
    let run = bounded(pre, "the program preloaded");
    let preloaded = passed(&run, "preloaded");
    assert_eq!(preloaded, alone, "the same outcomes preloaded and not");
    // Its rings: the program's, each forked child's and each exec'd shell's.
    let names: Vec<String> = std::fs::read_dir(&rings)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let forks: usize = ARGS[2].parse().unwrap();
    assert!(names.len() > forks, "{} rings: {names:?}", names.len());
    let sampled: u64 = names
        .iter()
        .map(|n| {
            let ring = std::fs::read(rings.join(n)).unwrap();
            assert_eq!(header_u64(&ring, L::H_MAGIC), L::MAGIC, "{n}");
            header_u64(&ring, L::H_SAMPLED)
        })
        .sum();
    assert!(
        sampled >= 100_000,
        "only {sampled} samples: were the hooks live?"
    );

    // Under `watch --sites`: a reader drains each ring, so sampled blocks'
    // frees find their entries and take them out while signal handlers
    // allocate. The command's output passes through.
    let out = dir.path().join("stress.flr");
    let mut watch = Command::new(env!("CARGO_BIN_EXE_flatline"));
    watch
        .args(["watch", "--headless", "--sites", "--sites-every"])
        .arg(SAMPLE_EVERY)
        .args(["--hz", "10", "--out"])
        .arg(&out)
        .arg("--")
        .arg(&prog)
        .args(ARGS)
        .env("FLATLINE_PRELOAD", &lib);
    let run = bounded(watch, "the program under watch --sites");
    let watched = passed(&run, "watched");
    let mut lines = watched.lines();
    for line in alone.lines() {
        assert!(
            lines.any(|l| l == line),
            "{line:?} missing from the watched run's output:\n{watched}"
        );
    }
    // The recording counted what the program held from its ring: the hooks
    // were live under the watch too.
    let v = report(&out);
    let held = v["channels"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.ends_with(".alloc_live"))
        .count();
    assert!(held >= 1, "no alloc_live channel: {:#?}", v["channels"]);
}
