//! A recording whose disk fills: said once, the file kept whole up to that
//! point, the receipt of what was kept printed, and a non-zero exit, under
//! both `--on-write-error` policies. The disk is a small tmpfs mounted for
//! the test (which needs root, as CI runs; elsewhere the tests say why they
//! did not run).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use support::{PATIENCE, flatline, report, wait_for};

/// A tmpfs of `kib` KiB, unmounted when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(kib: u32) -> Option<Self> {
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
            eprintln!("not run: mounting a tmpfs needs root");
            return None;
        }
        Some(Self { dir })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

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
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let mut err = String::new();
    let until = |needle: &str, err: &mut String| {
        wait_for(Duration::from_millis(50), || {
            while let Ok(l) = rx.try_recv() {
                err.push_str(&l);
                err.push('\n');
            }
            err.contains(needle).then_some(())
        })
        .is_some()
    };
    assert!(
        until("cannot write", &mut err),
        "no fault within {PATIENCE:?}: {err}"
    );
    // Space returns: the writes go on, with a note of the gap.
    std::fs::remove_file(&filler).unwrap();
    assert!(until("written again", &mut err), "no resume: {err}");
    // Ctrl-C ends the soak; a footer is written.
    flatline_runtime::sys::terminate(child.id()).ok();
    let run: Output = child.wait_with_output().unwrap();
    assert_eq!(run.status.code(), Some(1), "a run that lost samples fails");
    assert!(until("were not recorded", &mut err), "{err}");
    said_once(&err, &out);
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
