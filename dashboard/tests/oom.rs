//! When memory runs out: who died, of what, as a user watches a job.
//!
//! The fixture `tests/data/oom_job.py` (Python, no torch) forks two
//! DataLoader-style workers; one grows 20 MiB/s and is killed by SIGKILL,
//! and the main process says so in PyTorch's words and exits 1. With a
//! cgroup folder the test writes itself, the fixture counts the kill in its
//! `memory.events` first, as the kernel does; in a real child cgroup with a
//! limit, the kernel's OOM killer does the killing.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::json;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/oom_job.py")
}

/// The victim's pid, from the fixture's "workers A B" line.
fn victim(stdout: &str) -> u32 {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("workers "))
        .unwrap_or_else(|| panic!("no workers line in {stdout}"));
    line.split(' ').nth(1).unwrap().parse().unwrap()
}

fn report_json(path: &Path) -> serde_json::Value {
    json(&support::flatline(&[
        "report",
        path.to_str().unwrap(),
        "--format",
        "json",
    ]))
}

#[test]
fn a_worker_killed_as_the_cgroup_counts_an_oom_kill_is_the_headline() {
    let dir = tempfile::tempdir().unwrap();
    let cg = dir.path().join("pod");
    std::fs::create_dir(&cg).unwrap();
    std::fs::write(cg.join("memory.max"), "2147483648\n").unwrap();
    std::fs::write(cg.join("memory.current"), "104857600\n").unwrap();
    let out = dir.path().join("oom.flr");
    let o = support::flatline(&[
        "watch",
        "--headless",
        "--hz",
        "10",
        "--cgroup",
        cg.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--",
        "python3",
        fixture().to_str().unwrap(),
        cg.to_str().unwrap(),
        "4",
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "the job's own code: {stdout}");
    let pid = victim(&stdout);
    let headline = stdout
        .lines()
        .find(|l| l.contains("was killed by"))
        .unwrap_or_else(|| panic!("no death told: {stdout}"));
    assert!(
        headline.starts_with(&format!("Worker {pid} ")) && headline.contains("OOM killer"),
        "{headline}"
    );
    assert!(headline.contains("of the cgroup's 2.00 GiB"), "{headline}");
    assert!(
        headline.contains("the job exited with code 1"),
        "{headline}"
    );
    let v = report_json(&out);
    assert_eq!(v["headline"].as_str().unwrap(), headline);
    let deaths = v["deaths"].as_array().unwrap();
    assert_eq!(
        deaths.len(),
        1,
        "the worker stopped by SIGTERM is no death: {deaths:?}"
    );
    let d = &deaths[0];
    assert_eq!(d["pid"], pid);
    assert_eq!(d["role"], "worker");
    assert_eq!(d["signal"], 9);
    let last = d["last_reading_before_s"].as_f64().unwrap();
    assert!(
        last <= 1.0,
        "its readings reach within 1 s of its death: {last}"
    );
    let evidence = d["evidence"].to_string();
    assert!(evidence.contains("OOM kill count rose"), "{evidence}");
    assert_eq!(v["exit"]["code"], 1);
    // The growth before it is the worker's.
    let before = &d["before"];
    assert!(
        before["grew"].as_f64().unwrap() > 20.0 * 1048576.0,
        "{before}"
    );
    assert!(
        before["own"].as_f64().unwrap() >= 0.8 * before["grew"].as_f64().unwrap(),
        "{before}"
    );
    // What the job printed is an event and a marker.
    let printed = v["events"]["out_of_memory"].as_array().unwrap();
    assert!(
        printed
            .iter()
            .any(|p| p["kind"] == "dataloader_killed" && p["pid"] == pid),
        "{printed:?}"
    );
    assert!(
        v["events"]["markers"]
            .to_string()
            .contains(&format!("DataLoader worker {pid} was killed")),
        "{}",
        v["events"]["markers"]
    );
}

/// A folder that is no memory cgroup is a bad flag, said before anything
/// starts.
#[test]
fn a_folder_that_is_no_memory_cgroup_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let o = support::flatline(&[
        "watch",
        "--headless",
        "--cgroup",
        dir.path().to_str().unwrap(),
        "--",
        "true",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not a memory cgroup"), "{err}");
}

/// A job that ends with PyTorch's CUDA out-of-memory error, in either
/// wording, is read for its figures; the run's headline says it, with the
/// memory PyTorch reserved but did not use.
#[test]
fn a_job_that_ends_with_cuda_out_of_memory_is_told_with_its_figures() {
    let two = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 12.31 GiB is free. Including non-PyTorch memory, this process has 66.83 GiB memory in use. Of the allocated memory 40.12 GiB is allocated by PyTorch, and 26.10 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.";
    let one = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.78 GiB total capacity; 10.50 GiB already allocated; 1.75 GiB free; 13.62 GiB reserved in total by PyTorch)";
    for (line, unallocated, fragmented) in [(two, "26.10 GiB", true), (one, "3.12 GiB", true)] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("cuda.flr");
        let script = format!(
            "import sys, time\ntime.sleep(1.5)\nprint('Traceback (most recent call last):', file=sys.stderr)\nprint({line:?}, file=sys.stderr, flush=True)\nsys.exit(1)\n"
        );
        let o = support::flatline(&[
            "watch",
            "--headless",
            "--hz",
            "10",
            "--out",
            out.to_str().unwrap(),
            "--",
            "python3",
            "-c",
            &script,
        ]);
        assert_eq!(o.status.code(), Some(1));
        let v = report_json(&out);
        let h = v["headline"].as_str().unwrap();
        assert!(
            h.starts_with("The job ran out of CUDA memory: tried to allocate 2"),
            "{h}"
        );
        assert!(
            h.contains(&format!(
                "{unallocated} reserved by PyTorch but unallocated"
            )),
            "{h}"
        );
        assert_eq!(h.contains("fragmentation"), fragmented, "{h}");
        assert!(h.ends_with("the job exited with code 1."), "{h}");
        let p = &v["events"]["out_of_memory"][0];
        assert_eq!(p["kind"], "cuda_oom");
        assert!(
            p["figures"]["tried"].as_f64().unwrap() >= 2.0 * 1073741824.0,
            "{p}"
        );
        // The trend is still told, after it.
        assert!(
            v["findings"].to_string().contains("\"trend\""),
            "{}",
            v["findings"]
        );
    }
}

/// Where this test may make a memory cgroup of its own (root, under the
/// cgroup it runs in), a real kernel OOM kill inside it is named the same
/// way, from the kernel's log where readable; the cgroup is removed after.
#[test]
fn a_real_kernel_oom_kill_in_a_cgroup_of_our_own_is_named() {
    let Some(cg) = OwnCgroup::make(300 << 20) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("koom.flr");
    let bin = env!("CARGO_BIN_EXE_flatline");
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > '{}/cgroup.procs' && exec '{bin}' watch --headless --hz 10 --seconds 100 --out '{}' -- python3 '{}' -",
            cg.0.display(),
            out.display(),
            fixture().display()
        ))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    let pid = victim(&stdout);
    let v = report_json(&out);
    let h = v["headline"].as_str().unwrap();
    assert!(
        h.starts_with(&format!("Worker {pid} ")) && h.contains("killed by the kernel's OOM killer"),
        "{h}"
    );
    assert!(h.contains("of the cgroup's 300.00 MiB"), "{h}");
    assert_eq!(
        v["recording"]["end"], "target exited",
        "the footer is written"
    );
    let d = &v["deaths"][0];
    assert_eq!(d["pid"], pid);
    // Near the limit the watch read five times faster, and said so first.
    let facts = v["events"]["facts"].as_array().unwrap();
    let faster = facts
        .iter()
        .find(|f| f["kind"] == "sampling" && f["figures"]["factor"] == 5.0)
        .unwrap_or_else(|| panic!("no faster sampling near the limit: {facts:?}"));
    assert!(
        faster["t_s"].as_f64().unwrap() < d["t_s"].as_f64().unwrap(),
        "{faster}"
    );
    let readable = std::fs::File::open("/dev/kmsg").is_ok();
    assert_eq!(
        d["cause"],
        if readable {
            "kernel_oom_killer"
        } else {
            "oom_killer"
        },
        "{d}"
    );
}

/// A memory cgroup this test made, removed when dropped.
struct OwnCgroup(PathBuf);

impl OwnCgroup {
    /// A child of this process's own memory cgroup with `limit` bytes, on
    /// cgroup v1 (`memory.limit_in_bytes`) or v2 (`memory.max`, where the
    /// parent lets the memory controller down). `None`, saying why (and
    /// failing under CI: [`support::cannot_run`]), where it cannot; as root,
    /// a failure to make one fails the test.
    fn make(limit: u64) -> Option<Self> {
        let uid = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Uid:"))
                    .and_then(|l| l.split_whitespace().next().map(str::to_owned))
            });
        if uid.as_deref() != Some("0") {
            support::cannot_run("a memory cgroup of our own needs root");
            return None;
        }
        let text = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let v1 = text
            .lines()
            .find_map(|l| l.split_once(":memory:").map(|(_, p)| p.to_owned()));
        let name = format!("flatline-oomtest-{}", std::process::id());
        let (dir, file) = match v1 {
            Some(p) => (
                Path::new("/sys/fs/cgroup/memory")
                    .join(p.trim_start_matches('/'))
                    .join(name),
                "memory.limit_in_bytes",
            ),
            None => {
                let p = text
                    .lines()
                    .find_map(|l| l.strip_prefix("0::"))
                    .expect("a cgroup v2 line");
                let parent = Path::new("/sys/fs/cgroup").join(p.trim_start_matches('/'));
                let controllers = std::fs::read_to_string(parent.join("cgroup.subtree_control"))
                    .unwrap_or_default();
                if !controllers.split_whitespace().any(|c| c == "memory") {
                    // A v2 cgroup with processes in it cannot hand the memory
                    // controller down (the no-internal-processes rule).
                    support::cannot_run(&format!(
                        "{} does not delegate the memory controller",
                        parent.display()
                    ));
                    return None;
                }
                (parent.join(name), "memory.max")
            }
        };
        std::fs::create_dir(&dir)
            .unwrap_or_else(|e| panic!("as root, making {}: {e}", dir.display()));
        let cg = OwnCgroup(dir);
        std::fs::write(cg.0.join(file), limit.to_string()).unwrap();
        // No swap to spill into: the limit is the limit.
        let _ = std::fs::write(cg.0.join("memory.swappiness"), "0");
        Some(cg)
    }
}

impl Drop for OwnCgroup {
    fn drop(&mut self) {
        // Its processes have ended; an emptied cgroup is removed by rmdir.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        eprintln!("could not remove {}", self.0.display());
    }
}
