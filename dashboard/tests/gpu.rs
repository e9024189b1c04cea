//! The GPU path read through to the receipt without a GPU: a stand-in NVML
//! (`tests/data/nvml_stub.c`, built here with `cc`) answers from a script,
//! and flatline loads it through `FLATLINE_NVML_LIB`.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds the stand-in NVML into `dir`.
fn stub(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/nvml_stub.c");
    let lib = dir.join("libnvml_stub.so");
    let cc = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&lib)
        .arg(&src)
        .output()
        .expect("a C compiler (the Rust toolchain's linker)");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    lib
}

/// `flatline watch --headless` of `pid` for `seconds` into `out`, reading
/// the stand-in NVML `lib` scripted by `dir/nvml.txt`.
fn watch_command(
    dir: &Path,
    lib: &Path,
    pid: u32,
    seconds: &str,
    out: &Path,
    extra: &[&str],
) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_flatline"));
    c.args([
        "watch",
        "--headless",
        "--hz",
        "10",
        "--seconds",
        seconds,
        "--pid",
    ])
    .arg(pid.to_string())
    .arg("--out")
    .arg(out)
    .args(extra)
    .env("FLATLINE_NVML_LIB", lib)
    .env("FLATLINE_NVML_STUB", dir.join("nvml.txt"))
    .env("XDG_RUNTIME_DIR", dir);
    c
}

/// Runs [`watch_command`] into `dir/name` to its end.
fn watch_with_stub(
    dir: &Path,
    lib: &Path,
    pid: u32,
    seconds: &str,
    name: &str,
    extra: &[&str],
) -> (std::process::Output, PathBuf) {
    let out = dir.join(name);
    let run = watch_command(dir, lib, pid, seconds, &out, extra)
        .output()
        .unwrap();
    (run, out)
}

const MIB: f64 = 1_048_576.0;

#[test]
fn nvml_readings_reach_the_receipt_and_a_lost_gpu_leaves_the_others_reading() {
    let dir = tempfile::tempdir().unwrap();
    let lib = stub(dir.path());
    let mut job = Command::new("sleep").arg("30").spawn().unwrap();
    let script = dir.path().join("nvml.txt");
    // gpu0 leaks 10 MiB/s, the watched process 1 MiB/s of it; another
    // process holds 700 MB there; gpu1 falls off the bus after 3 s.
    std::fs::write(
        &script,
        format!(
            "driver 550.54.15\n\
             device 0 NVIDIA_H200 150000000000 2000000000 {} 87 41 -1\n\
             device 1 NVIDIA_H200 150000000000 1000000000 0 5 35 3\n\
             proc 0 {} 500000000 {}\n\
             proc 0 999999 700000000 0\n",
            10.0 * MIB,
            job.id(),
            MIB
        ),
    )
    .unwrap();
    let (run, out) = watch_with_stub(dir.path(), &lib, job.id(), "8", "g.flr", &[]);
    let _ = job.kill();
    let _ = job.wait();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let v = support::report(&out);
    let ch = |n: &str| v["channels"][n].clone();
    assert_eq!(ch("gpu0.total")["last"], 150e9, "exact");
    assert_eq!(ch("gpu0.util")["last"], 87.0);
    assert_eq!(ch("gpu0.temp_c")["last"], 41.0);
    let used = ch("gpu0.used");
    assert_eq!(used["verdict"], "linear", "{used}");
    let slope = used["slope_per_s"].as_f64().unwrap();
    assert!((slope / (10.0 * MIB) - 1.0).abs() < 0.05, "{slope}");
    assert_eq!(used["limit_source"], "gpu_total");
    // Only the watched process's own memory, not the other process's.
    let mine = ch("gpu0.proc_used");
    let first = mine["first"].as_f64().unwrap();
    assert!((500e6..510e6).contains(&first), "{mine}");
    let slope = mine["slope_per_s"].as_f64().unwrap();
    assert!((slope / MIB - 1.0).abs() < 0.05, "{mine}");
    // gpu1 read until it was lost (3 s after the library was opened, which
    // a busy machine can delay); gpu0 went on reading after it, to the end.
    let lost = ch("gpu1.used")["samples"].as_u64().unwrap();
    let kept = used["samples"].as_u64().unwrap();
    assert!(
        lost >= 1 && kept > lost,
        "gpu1 {lost} readings, gpu0 {kept}"
    );
    // Its channels ended there; gpu0's did not.
    let ended = ch("gpu1.used")["ended_s"]
        .as_f64()
        .expect("gpu1.used ended");
    let duration = v["recording"]["duration_s"].as_f64().unwrap();
    assert!(
        ended >= 3.0 && ended + 1.0 < duration,
        "gpu1 ended at {ended} s of {duration} s"
    );
    assert_eq!(ch("gpu1.total")["ended_s"], ended);
    assert!(used["ended_s"].is_null(), "{used}");
    assert_eq!(v["host"]["gpu"]["driver"], "550.54.15", "{}", v["host"]);
    // The receipt says which GPU was lost, and when.
    let notes = v["events"]["notes"].as_array().unwrap();
    let lost_at = notes
        .iter()
        .find(|n| {
            n["text"]
                .as_str()
                .unwrap()
                .starts_with("gpu1 stopped answering")
        })
        .unwrap_or_else(|| panic!("{notes:?}"))["t_s"]
        .as_f64()
        .unwrap();
    assert!(
        lost_at >= 3.0 && (lost_at - ended).abs() <= 1.0,
        "lost at {lost_at} s, ended at {ended} s"
    );
    assert!(
        !notes
            .iter()
            .any(|n| n["text"].as_str().unwrap().starts_with("gpu0"))
    );
    assert!(String::from_utf8_lossy(&run.stdout).contains("gpu1 stopped answering"));
}

#[test]
fn a_missing_nvml_library_is_a_reason_not_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("n.flr");
    let run = Command::new(env!("CARGO_BIN_EXE_flatline"))
        .args(["soak", "--workload", "idle", "--seconds", "1", "--out"])
        .arg(&out)
        .env("FLATLINE_NVML_LIB", dir.path().join("no-such-libnvml.so"))
        .env("XDG_RUNTIME_DIR", dir.path())
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let v = support::report(&out);
    let reason = v["unavailable"]["gpu"].as_str().unwrap();
    assert!(reason.contains("no-such-libnvml.so"), "{reason}");
}

/// torchrun's ranks hold the VRAM, not the agent that was started: the
/// watched tree's processes are summed.
#[test]
fn a_trees_gpu_memory_is_the_sum_over_its_processes() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let lib = stub(dir.path());
    // A launcher with one child, which says its pid.
    let mut job = Command::new("python3")
        .args([
            "-c",
            "import subprocess, time; p = subprocess.Popen(['sleep', '30']); \
             print(p.pid, flush=True); time.sleep(30)",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(job.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let child: u32 = line.trim().parse().unwrap();
    let script = dir.path().join("nvml.txt");
    std::fs::write(
        &script,
        format!(
            "driver 550.54.15\n\
             device 0 NVIDIA_H200 150000000000 9000000000 0 50 40 -1\n\
             proc 0 {} 300000000 0\n\
             proc 0 {child} 4000000000 0\n\
             proc 0 999999 700000000 0\n",
            job.id()
        ),
    )
    .unwrap();
    let (run, out) = watch_with_stub(dir.path(), &lib, job.id(), "4", "t.flr", &[]);
    let _ = Command::new("kill").arg(child.to_string()).status();
    let _ = job.kill();
    let _ = job.wait();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let v = support::report(&out);
    // The child ran before the watch began: both count in every reading,
    // the stranger in none.
    let used = &v["channels"]["gpu0.proc_used"];
    assert_eq!(
        (used["min"].as_f64(), used["max"].as_f64()),
        (Some(4.3e9), Some(4.3e9)),
        "{used}"
    );
    // Each of them has its own, the stranger none.
    let vram = |pid: u32| v["channels"][format!("pid{pid}.vram")]["last"].as_f64();
    assert_eq!(vram(child), Some(4e9), "{}", v["channels"]);
    assert_eq!(vram(job.id()), Some(3e8));
    assert_eq!(vram(999_999), None);
}

/// A pid no process has here.
fn unused_pid() -> u32 {
    (4_000_000..4_194_304)
        .find(|p| !Path::new(&format!("/proc/{p}")).exists())
        .unwrap()
}

/// In a container with a PID namespace of its own, NVML lists host pids no
/// process here has: the process's GPU memory is unknown, not 0.
#[test]
fn gpu_memory_of_processes_out_of_sight_is_absent_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let lib = stub(dir.path());
    let mut job = Command::new("sleep").arg("30").spawn().unwrap();
    std::fs::write(
        dir.path().join("nvml.txt"),
        format!(
            "driver 550.54.15\n\
             device 0 NVIDIA_H200 150000000000 9000000000 0 50 40 -1\n\
             proc 0 {} 4000000000 0\n",
            unused_pid()
        ),
    )
    .unwrap();
    let (run, out) = watch_with_stub(dir.path(), &lib, job.id(), "3", "c.flr", &[]);
    let _ = job.kill();
    let _ = job.wait();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let v = support::report(&out);
    assert_eq!(v["channels"]["gpu0.used"]["last"], 9e9);
    assert_eq!(
        v["channels"]["gpu0.proc_used"]["samples"], 0,
        "{}",
        v["channels"]["gpu0.proc_used"]
    );
    let notes = v["events"]["notes"].to_string();
    assert!(
        notes.contains("none of them visible in this PID namespace"),
        "{notes}"
    );
}

/// A job that logs PyTorch's statistics: the cache and the memory outside
/// PyTorch are derived, and the layer that grows is named.
#[test]
fn memory_outside_pytorch_is_told_from_its_allocator() {
    let dir = tempfile::tempdir().unwrap();
    let lib = stub(dir.path());
    let log = dir.path().join("train.jsonl");
    // Allocated and reserved stay flat; the driver's count of the process
    // grows 1 MiB/s (a library allocating outside PyTorch).
    let mut job = Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import json, time\n\
             f = open({log:?}, 'a')\n\
             for i in range(300):\n\
             \x20   f.write(json.dumps({{'step': i, 'loss': 2.0, \
             'torch.cuda.memory_allocated': 1000000000, \
             'torch.cuda.memory_reserved': 2000000000}}) + '\\n')\n\
             \x20   f.flush()\n\
             \x20   time.sleep(0.1)\n",
            log = log.display().to_string()
        ))
        .spawn()
        .unwrap();
    std::fs::write(
        dir.path().join("nvml.txt"),
        format!(
            "driver 550.54.15\n\
             device 0 NVIDIA_H200 150000000000 9000000000 0 50 40 -1\n\
             proc 0 {} 2500000000 {MIB}\n",
            job.id()
        ),
    )
    .unwrap();
    let (run, out) = watch_with_stub(
        dir.path(),
        &lib,
        job.id(),
        "8",
        "p.flr",
        &["--log", log.to_str().unwrap()],
    );
    let _ = job.kill();
    let _ = job.wait();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let v = support::report(&out);
    let ch = |n: &str| v["channels"][n].clone();
    assert_eq!(ch("torch.allocated")["last"], 1e9, "{}", v["channels"]);
    assert_eq!(ch("torch.cache")["last"], 1e9);
    assert!(ch("log.torch_cuda_memory_allocated").is_null(), "not twice");
    let other = ch("gpu.other");
    let first = other["first"].as_f64().unwrap();
    assert!((5e8..5.2e8).contains(&first), "{other}");
    let slope = other["slope_per_s"].as_f64().unwrap();
    assert!((slope / MIB - 1.0).abs() < 0.05, "{other}");
    assert_eq!(
        v["gpu_layers"]["layer"], "outside_pytorch",
        "{}",
        v["gpu_layers"]
    );
    let text = support::ok(&support::flatline(&["report", out.to_str().unwrap()]));
    assert!(
        text.contains("GPU: outside PyTorch. gpu.other grows"),
        "{text}"
    );
}

/// A device that was lost and answers again (a reset GPU) reads on under
/// channels of its own: an ended channel is never reused.
#[test]
fn a_lost_gpu_that_answers_again_reads_under_new_channels() {
    let dir = tempfile::tempdir().unwrap();
    let lib = stub(dir.path());
    let mut job = Command::new("sleep").arg("600").spawn().unwrap();
    let script = |lost_after: &str| {
        format!(
            "driver 550.54.15\n\
             device 0 NVIDIA_H200 150000000000 1000000000 0 5 35 -1\n\
             device 1 NVIDIA_H200 150000000000 2000000000 0 5 35 {lost_after}\n"
        )
    };
    std::fs::write(dir.path().join("nvml.txt"), script("1.5")).unwrap();
    let out = dir.path().join("r.flr");
    // A long --seconds only bounds a hang: the watch ends when the job does.
    let watch = watch_command(dir.path(), &lib, job.id(), "120", &out, &[])
        .spawn()
        .unwrap();
    // The recording so far, once the watch has made it.
    let so_far = || {
        let o = support::flatline(&["report", out.to_str().unwrap(), "--format", "json"]);
        serde_json::from_slice::<serde_json::Value>(&o.stdout).ok()
    };
    let on_disk = |name: &str, field: &str| so_far()?["channels"][name][field].as_f64();
    // Wait for the loss to be recorded, however long the start took; then
    // the device answers again, and the watch must see it come back.
    let ended = support::wait_for(std::time::Duration::from_millis(100), || {
        on_disk("gpu1.used", "ended_s")
    })
    .expect("gpu1 was lost in the recording");
    // What is on disk lags the stream, so its length is a lower bound on
    // the stream's time when the stub is told to answer again.
    let flipped = so_far()
        .and_then(|v| v["recording"]["duration_s"].as_f64())
        .expect("the recording's length");
    std::fs::write(dir.path().join("nvml.txt"), script("-1")).unwrap();
    support::wait_for(std::time::Duration::from_millis(100), || {
        on_disk("gpu1-2.used", "last")
    })
    .expect("gpu1 answers again under new channels");
    let _ = job.kill();
    let _ = job.wait();
    let run = watch.wait_with_output().unwrap();
    assert!(run.status.success());
    let v = support::report(&out);
    let ch = |n: &str| v["channels"][n].clone();
    let again = ch("gpu1-2.used");
    let started = again["started_s"].as_f64().expect("gpu1-2.used");
    // It came back after it was lost and after the stub was told to answer
    // (the recording was `flipped` s long then): never under the old name.
    assert!(
        ended > 1.0 && started > ended && started >= flipped,
        "lost at {ended} s, answered at {started} s, told at {flipped} s"
    );
    assert!(ch("gpu1.used")["ended_s"].as_f64() == Some(ended));
    assert_eq!(again["last"], 2e9);
    assert_eq!(again["limit_source"], "gpu_total");
    let notes = v["events"]["notes"].to_string();
    assert!(notes.contains("gpu1 answers again"), "{notes}");
}
