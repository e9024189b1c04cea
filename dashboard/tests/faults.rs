//! A recording whose disk fills: said once, the file kept whole up to that
//! point, the receipt of what was kept printed, and a non-zero exit, under
//! both `--on-write-error` policies. The disk is a small tmpfs mounted for
//! the test (which needs root, as CI runs; elsewhere the tests say why they
//! did not run).

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use support::{PATIENCE, SmallDisk, flatline, metrics, report, series, served_at, wait_for};

/// The one line that says the fault, checked: the file, the cause once, the
/// last moment on disk.
fn said_once(err: &str, file: &Path) {
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("cannot write")).collect();
    assert!(!lines.is_empty(), "no fault line:\n{err}");
    let l = lines[0];
    assert!(l.contains(file.to_str().unwrap()), "{l}");
    assert_eq!(l.matches("No space left on device").count(), 1, "{l}");
    assert!(l.contains("on disk up to"), "{l}");
}

/// The file reads back: whole frames only, with samples.
fn readable(file: &Path) -> serde_json::Value {
    let v = report(file);
    assert!(v["recording"]["samples"].as_u64().unwrap() > 0, "{v:#}");
    v
}

/// The lines of a child's output, read on a thread of their own.
fn lines_of(out: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    lines
}

/// A child's standard error, read on a thread, gathered as it comes.
struct Stderr {
    lines: std::sync::mpsc::Receiver<String>,
    text: String,
}

impl Stderr {
    fn of(child: &mut std::process::Child) -> Self {
        Self {
            lines: lines_of(child.stderr.take().unwrap()),
            text: String::new(),
        }
    }

    /// True once `needle` has been said (waiting at most PATIENCE).
    fn until(&mut self, needle: &str) -> bool {
        wait_for(Duration::from_millis(50), || {
            while let Ok(l) = self.lines.try_recv() {
                self.text.push_str(&l);
                self.text.push('\n');
            }
            self.text.contains(needle).then_some(())
        })
        .is_some()
    }
}

fn soak(out: &Path, policy: &str, seconds: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_flatline"));
    c.args([
        "soak",
        "--workload",
        "idle",
        "--hz",
        "1000",
        "--seconds",
        seconds,
        "--on-write-error",
        policy,
        "--out",
        out.to_str().unwrap(),
    ]);
    c
}

#[test]
fn a_soak_whose_disk_fills_stops_and_keeps_what_it_wrote() {
    let Some(disk) = SmallDisk::mount(20) else {
        return;
    };
    let out = disk.path("x.flr");
    // 1000 Hz fills 20 KiB in a few seconds; a minute is only an upper bound.
    let run = soak(&out, "stop", "60").output().unwrap();
    assert_eq!(run.status.code(), Some(1));
    let err = String::from_utf8_lossy(&run.stderr);
    said_once(&err, &out);
    assert!(err.contains("stopping"), "{err}");
    assert!(
        String::from_utf8_lossy(&run.stdout).contains("wrote "),
        "the receipt"
    );
    let v = readable(&out);
    assert_ne!(v["recording"]["end"], "completed", "{v:#}");
}

#[test]
fn a_soak_that_keeps_sampling_resumes_when_space_returns() {
    let Some(disk) = SmallDisk::mount(64) else {
        return;
    };
    let filler = disk.path("filler");
    std::fs::write(&filler, vec![0u8; 40_000]).unwrap();
    let out = disk.path("x.flr");
    let mut child = soak(&out, "keep-sampling", "600")
        .args(["--prometheus", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = Stderr::of(&mut child);
    assert!(err.until("/metrics"), "not served: {}", err.text);
    let addr = served_at(&err.text).unwrap();
    // The exporter follows the stream: the fault shows as a gauge, and the
    // note of it is not a probe's error.
    let scraped = |want: fn(f64) -> bool, name: &str| {
        wait_for(Duration::from_millis(100), || {
            let text = metrics(addr);
            series(&text, name, &[]).filter(|v| want(*v)).map(|_| text)
        })
    };
    assert!(
        err.until("cannot write"),
        "no fault within {PATIENCE:?}: {}",
        err.text
    );
    let text =
        scraped(|v| v == 1.0, "flatline_recording_write_fault").expect("the fault is served");
    assert_eq!(series(&text, "flatline_probe_errors_total", &[]), Some(0.0));
    // Space returns: the writes go on, with a note of the gap.
    std::fs::remove_file(&filler).unwrap();
    assert!(err.until("written again"), "no resume: {}", err.text);
    let text =
        scraped(|v| v == 0.0, "flatline_recording_write_fault").expect("the resumption is served");
    let lost = series(&text, "flatline_recording_lost_samples_total", &[]).unwrap();
    assert!(lost > 0.0, "{text}");
    assert_eq!(series(&text, "flatline_probe_errors_total", &[]), Some(0.0));
    // Ctrl-C ends the soak; a footer is written.
    flatline_arena::sys::terminate(child.id()).ok();
    let run: Output = child.wait_with_output().unwrap();
    assert_eq!(run.status.code(), Some(1), "a run that lost samples fails");
    assert!(err.until("were not recorded"), "{}", err.text);
    said_once(&err.text, &out);
    let v = readable(&out);
    let notes = v["events"]["notes"].to_string();
    assert!(notes.contains("recording gap"), "{notes}");
}

#[test]
fn a_watch_whose_disk_fills_leaves_its_command_running() {
    let Some(disk) = SmallDisk::mount(20) else {
        return;
    };
    let out = disk.path("w.flr");
    // The command prints 40 lines over a few seconds, longer than the disk
    // lasts at 1000 Hz: every line must still pass through, and it must
    // end on its own.
    let run = flatline(&[
        "watch",
        "--headless",
        "--hz",
        "1000",
        "--on-write-error",
        "stop",
        "--out",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "for i in $(seq 40); do echo step $i loss=1; sleep 0.25; done",
    ]);
    assert_eq!(run.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("step ")).count(),
        40
    );
    assert!(stdout.contains("the command runs on"), "{stdout}");
    said_once(&String::from_utf8_lossy(&run.stderr), &out);
    readable(&out);
}

/// `flatline serve`, what `live` runs for its window: its answers and fault
/// reports, a line each on standard output, read on a thread.
struct Serve {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Serve {
    fn start(stream: &Path, policy: &str) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_flatline"))
            .args(["serve", "--workload", "idle", "--hz", "1000", "--out"])
            .arg(stream)
            .args(["--on-write-error", policy])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = lines_of(child.stdout.take().unwrap());
        let started = wait_for(Duration::from_millis(20), || {
            std::fs::metadata(stream)
                .is_ok_and(|m| m.len() > 0)
                .then_some(())
        });
        assert!(started.is_some(), "the stream starts");
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    fn say(&mut self, line: &str) {
        use std::io::Write;
        writeln!(self.child.stdin.as_mut().unwrap(), "{line}").unwrap();
    }

    /// The first line (after those already taken) that starts with `prefix`.
    fn until(&mut self, prefix: &str) -> String {
        let got = wait_for(Duration::from_millis(20), || {
            while let Ok(l) = self.lines.try_recv() {
                self.seen.push(l);
            }
            let i = self.seen.iter().position(|l| l.starts_with(prefix))?;
            Some(self.seen.drain(..=i).next_back().unwrap())
        });
        got.unwrap_or_else(|| panic!("no `{prefix}` line: {:?}", self.seen))
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_live_windows_recording_whose_disk_fills_is_told_to_the_window_and_resumes() {
    let Some(disk) = SmallDisk::mount(64) else {
        return;
    };
    let stream = tempfile::tempdir().unwrap();
    let mut serve = Serve::start(&stream.path().join("stream.flr"), "keep-sampling");
    let filler = disk.path("filler");
    std::fs::write(&filler, vec![0u8; 40_000]).unwrap();
    let out = disk.path("rec.flr");
    serve.say(&format!("record {}", out.display()));
    assert_eq!(serve.until("ok"), "ok");
    // The window is told, in a line it shows in red: the file, the cause
    // once, what is on disk, and the policy.
    let fault = serve.until("fault copy ");
    said_once(&fault, &out);
    assert!(fault.ends_with("retrying every 3 s"), "{fault}");
    std::fs::remove_file(&filler).unwrap();
    let resumed = serve.until("resumed copy ");
    assert!(resumed.contains("samples lost from"), "{resumed}");
    serve.say("stop-recording");
    assert_eq!(
        serve.until("recorded "),
        format!("recorded {}", out.display())
    );
    let v = readable(&out);
    assert!(
        v["events"]["notes"].to_string().contains("recording gap"),
        "{v:#}"
    );
    assert_eq!(v["recording"]["end"], "stopped");
}

#[test]
fn a_live_windows_recording_stops_on_a_full_disk_and_the_workload_goes_on() {
    let Some(disk) = SmallDisk::mount(20) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let stream = dir.path().join("stream.flr");
    let mut serve = Serve::start(&stream, "stop");
    let out = disk.path("rec.flr");
    serve.say(&format!("record {}", out.display()));
    assert_eq!(serve.until("ok"), "ok");
    let fault = serve.until("fault copy ");
    said_once(&fault, &out);
    let stopped = serve.until("stopped copy ");
    assert!(stopped.contains("samples kept"), "{stopped}");
    readable(&out);
    // The window's own stream goes on.
    let size = std::fs::metadata(&stream).unwrap().len();
    let grows = wait_for(Duration::from_millis(50), || {
        (std::fs::metadata(&stream).unwrap().len() > size).then_some(())
    });
    assert!(grows.is_some(), "the workload's stream goes on");
    // And nothing is recording: a stop answers plainly.
    serve.say("stop-recording");
    assert_eq!(serve.until("ok"), "ok");
}

#[test]
fn a_watch_that_keeps_sampling_resumes_when_space_returns() {
    let Some(disk) = SmallDisk::mount(64) else {
        return;
    };
    let filler = disk.path("filler");
    std::fs::write(&filler, vec![0u8; 40_000]).unwrap();
    let out = disk.path("w.flr");
    // The command runs until the test removes its flag file.
    let flag = tempfile::NamedTempFile::new().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_flatline"))
        .args(["watch", "--headless", "--hz", "1000", "--on-write-error"])
        .args(["keep-sampling", "--out"])
        .arg(&out)
        .args(["--", "sh", "-c"])
        .arg(format!(
            "while [ -e {} ]; do sleep 0.1; done; echo done",
            flag.path().display()
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = Stderr::of(&mut child);
    assert!(err.until("cannot write"), "no fault within {PATIENCE:?}");
    std::fs::remove_file(&filler).unwrap();
    assert!(err.until("written again"), "no resume");
    // The command ends on its own; the watch ends with it, non-zero.
    drop(flag);
    let run: Output = child.wait_with_output().unwrap();
    assert_eq!(run.status.code(), Some(1), "a run that lost samples fails");
    assert!(String::from_utf8_lossy(&run.stdout).contains("done"));
    assert!(err.until("were not recorded"));
    said_once(&err.text, &out);
    let v = readable(&out);
    assert!(
        v["events"]["notes"].to_string().contains("recording gap"),
        "{v:#}"
    );
    // The receipt says the gap first, with what it cost, then the answer.
    let headline = v["headline"].as_str().unwrap();
    assert!(
        headline.starts_with("Lost ") && headline.contains(" while the disk was full. "),
        "{headline}"
    );
    let gap = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "recording_gap")
        .expect("a recording_gap finding");
    assert!(gap["text"].as_str().unwrap().contains("samples"), "{gap}");
}

/// A watch refused at its start because the disk is full leaves no file
/// behind: the same command, run again once there is room, is not refused
/// for a file it never wrote.
#[test]
fn a_start_refused_on_a_full_disk_leaves_nothing_behind() {
    let Some(disk) = SmallDisk::mount(64) else {
        return;
    };
    // Fill it to the last byte.
    let filler = disk.path("filler");
    {
        let mut f = std::fs::File::create(&filler).unwrap();
        let block = vec![0u8; 4096];
        while std::io::Write::write_all(&mut f, &block).is_ok() {}
    }
    let out = disk.path("w.flr");
    // A command that outlives the first reading (one that ends before it
    // records nothing, and is no start refused).
    let args = [
        "watch",
        "--headless",
        "--hz",
        "10",
        "--out",
        out.to_str().unwrap(),
        "--",
        "sleep",
        "3",
    ];
    for _ in 0..2 {
        let run = flatline(&args);
        assert_ne!(
            run.status.code(),
            Some(0),
            "a start on a full disk is refused"
        );
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(err.contains("No space left"), "{err}");
        assert!(!err.contains("exists"), "{err}");
        assert!(!out.exists(), "a refused start left {}", out.display());
    }
    std::fs::remove_file(&filler).unwrap();
    let run = flatline(&args);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    readable(&out);
}

/// The case that lost 13.5 s of 14 s: a disk full while a watch's channels
/// join (its command's process channels arrive with the slow probes), freed
/// 8 s in. The file reads to its end, whole: no frame orphaned by the
/// roll-back, every sample after the gap there.
#[test]
fn a_watch_whose_disk_fills_while_channels_join_reads_to_its_end() {
    let Some(disk) = SmallDisk::mount(200) else {
        return;
    };
    // 8 KiB left: the header (written twice) fits, the first seconds do
    // not.
    let filler = disk.path("filler");
    std::fs::write(&filler, vec![0u8; 192 << 10]).unwrap();
    let out = disk.path("d.flr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_flatline"))
        .args(["watch", "--headless", "--hz", "20", "--out"])
        .arg(&out)
        .args([
            "--",
            "python3",
            "-c",
            "import time; [time.sleep(0.1) for _ in range(130)]",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = Stderr::of(&mut child);
    assert!(err.until("cannot write"), "no fault within {PATIENCE:?}");
    std::thread::sleep(Duration::from_secs(3));
    std::fs::remove_file(&filler).unwrap();
    assert!(err.until("written again"), "no resume:\n{}", err.text);
    let run: Output = child.wait_with_output().unwrap();
    assert!(run.status.code().is_some(), "{run:?}");
    assert!(err.until("the file is whole"), "{}", err.text);
    let v = readable(&out);
    let r = &v["recording"];
    assert_eq!(r["damaged"], false, "{r:#}");
    assert_eq!(r["losses"], serde_json::json!([]), "{r:#}");
    assert!(r["tail"].is_null(), "the footer was read: {r:#}");
    // The command ran 13 s: the samples after the gap are there.
    assert!(r["duration_s"].as_f64().unwrap() > 12.0, "{r:#}");
    assert!(
        v["events"]["notes"].to_string().contains("recording gap"),
        "{v:#}"
    );
    let headline = v["headline"].as_str().unwrap();
    assert!(!headline.starts_with("Read "), "{headline}");
}
