//! `watch --pid PID --sites` (issue 77): the allocation-site library loaded
//! into a process started without flatline, through ptrace and the
//! process's own `dlopen`. The jobs are built here from `tests/data/`
//! (`sites_leak.c`, `attach_stress.c`) or are `sites_job.py`; each must
//! run to its own end with its own output and exit code.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::{flatline, library, report};

/// One attach test at a time: the stress test's threads and forks take
/// both cores of a CI machine, and a 15 s attach beside it read too few
/// samples to call its site's growth (a first sentence without its line).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// How many of `pid`'s mappings are a flatline ring (`<pid>.<n>.ring`).
fn rings_mapped(pid: u32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.ends_with(".ring") || l.ends_with(".ring (deleted)"))
        .count()
}

/// Asserts that `pid`, still running, maps no ring within 5 s (its next
/// sample sees the watch over, at most a second after it ended).
fn assert_rings_unmapped(pid: u32) {
    let t0 = Instant::now();
    loop {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        assert!(
            !maps.is_empty(),
            "process {pid} ended before its rings were looked at"
        );
        let n = rings_mapped(pid);
        if n == 0 {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "{n} rings still mapped in process {pid} 5 s after its watch ended"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn build(dir: &Path, source: &str, extra: &[&str]) -> PathBuf {
    let out = dir.join(source.trim_end_matches(".c"));
    let status = Command::new("cc")
        .args(["-O2", "-g", "-pthread"])
        .args(extra)
        .arg(data(source))
        .arg("-o")
        .arg(&out)
        .status()
        .expect("a C compiler (cc) runs");
    assert!(status.success(), "cc {source}");
    out
}

fn spawn(cmd: &[&str]) -> Child {
    Command::new(cmd[0])
        .args(&cmd[1..])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the job starts")
}

/// The job's exit code and stdout, once it has ended.
fn finish(child: Child) -> (Option<i32>, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// `watch --pid PID --sites --headless` for `seconds`; the receipt and
/// stderr.
fn attach_watch(dir: &Path, pid: u32, seconds: u32) -> (serde_json::Value, String) {
    library();
    let out = dir.join("attach.flr");
    let run = flatline(&[
        "watch",
        "--headless",
        "--sites",
        "--sites-every",
        "131072",
        "--hz",
        "10",
        "--pid",
        &pid.to_string(),
        "--seconds",
        &seconds.to_string(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "{:?}: {stderr}", run.status);
    (report(&out), stderr)
}

/// The first line of `flatline report` on a recording.
fn first_sentence(recording: &Path) -> String {
    let text = flatline(&["report", recording.to_str().unwrap()]);
    String::from_utf8_lossy(&text.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// What a container's job (its `/dev/shm/sites_leak`) has in its
/// `/dev/shm` beside itself.
fn left_in_shm(job: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{job}/root/dev/shm"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "sites_leak")
        .collect()
}

/// The C case: `leak_here` keeps 64 KiB every 50 ms among 400 MiB/s of
/// churn, started without flatline, attached 3 s in for 15 s. The first
/// sentence names its line; the program ends with its own output, code 0.
#[test]
fn a_running_c_job_attached_names_its_leaking_line_and_ends_as_it_would() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path(), "sites_leak.c", &[]);
    let job = spawn(&[prog.to_str().unwrap(), "22"]);
    std::thread::sleep(Duration::from_secs(3));
    let (v, stderr) = attach_watch(dir.path(), job.id(), 15);
    assert!(stderr.contains("attached to process"), "{stderr}");
    let s = v["sites"].as_array().expect("sites");
    assert_eq!(s[0]["function"], "leak_here", "{s:#?}");
    let first = first_sentence(&dir.path().join("attach.flr"));
    assert!(
        first.contains("sites_leak.c:16") && first.contains("grows"),
        "{first}"
    );
    let notes = v["events"]["notes"].to_string();
    assert!(notes.contains("attached to process"), "{notes}");
    assert!(
        !v["channels"]
            .as_object()
            .unwrap()
            .keys()
            .any(|k| k.ends_with(".alloc_live")),
        "an attach keeps no exact count"
    );
    let (code, out) = finish(job);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("kept "), "{out}");
}

/// The Python case (this machine's python3, CPython 3.10 to 3.13): a line
/// that keeps 64 KiB bytearrays, attached 4 s in.
#[test]
fn a_running_python_job_attached_names_its_line() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let script = data("sites_job.py");
    let job = spawn(&["python3", script.to_str().unwrap(), "bytes", "24"]);
    std::thread::sleep(Duration::from_secs(4));
    let (v, _) = attach_watch(dir.path(), job.id(), 15);
    let s = v["sites"].as_array().expect("sites");
    assert_eq!(s[0]["line"], 23, "{s:#?}");
    assert!(
        s[0]["file"].as_str().unwrap().ends_with("sites_job.py"),
        "{s:#?}"
    );
    assert!(s[0]["growth_per_s"].as_f64().unwrap() > 0.0, "{s:#?}");
    let (code, _) = finish(job);
    assert_eq!(code, Some(0));
}

/// The ring file of `pid`'s attach, wherever its watch made its folder.
fn ring_of(pid: u32) -> Option<PathBuf> {
    let shm = Path::new("/dev/shm");
    let roots = [shm, &std::env::temp_dir()];
    roots.iter().find_map(|root| {
        std::fs::read_dir(root).ok()?.flatten().find_map(|d| {
            let name = d.file_name();
            if !name.to_string_lossy().starts_with("flatline-sites-") {
                return None;
            }
            let ring = d.path().join(format!("{pid}.0.ring"));
            ring.is_file().then_some(ring)
        })
    })
}

/// The ring header's count of samples (H_SAMPLED).
fn sampled(ring: &Path) -> u64 {
    let b = std::fs::read(ring).unwrap();
    let at = flatline_telemetry::sites::layout::H_SAMPLED;
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// A watch killed with SIGKILL cannot detach: the library sees its
/// watcher gone within a second or two, stops sampling and removes its
/// ring's file; the job goes on to its own end.
#[test]
fn a_watch_killed_mid_attach_stops_the_sampling_and_the_job_goes_on() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path(), "sites_leak.c", &[]);
    let job = spawn(&[prog.to_str().unwrap(), "12"]);
    let pid = job.id();
    std::thread::sleep(Duration::from_secs(1));
    library();
    let mut watch = Command::new(env!("CARGO_BIN_EXE_flatline"))
        .args(["watch", "--headless", "--sites", "--sites-every", "65536"])
        .args(["--pid", &pid.to_string(), "--seconds", "60", "--out"])
        .arg(dir.path().join("killed.flr"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ring = support::wait_for(Duration::from_millis(50), || {
        ring_of(pid).filter(|r| sampled(r) > 0)
    })
    .expect("the attached job samples into its ring");
    watch.kill().unwrap();
    watch.wait().unwrap();
    let t0 = Instant::now();
    let gone = support::wait_for(Duration::from_millis(50), || (!ring.exists()).then_some(()));
    assert!(gone.is_some(), "the ring's file is still there");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert_rings_unmapped(pid);
    let (code, out) = finish(job);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("kept"), "{out}");
}

/// 50 attaches and detaches to a program whose four threads allocate,
/// hand blocks to each other, reallocate and free, and whose main thread
/// forks a child every 50 ms: each attach samples, and the program's own
/// checks of every byte and of every child's exit code pass.
#[test]
fn fifty_attaches_and_detaches_leave_a_threaded_forking_program_right() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path(), "attach_stress.c", &[]);
    let job = spawn(&[prog.to_str().unwrap(), "30"]);
    let pid = job.id();
    std::thread::sleep(Duration::from_millis(300));
    let lib = library();
    let mut sampled_runs = 0;
    for round in 0..50 {
        let rings = tempfile::tempdir().unwrap();
        let done = flatline_telemetry::attach::attach(pid, &lib, rings.path(), 4096)
            .unwrap_or_else(|e| panic!("attach {round}: {e}"));
        assert!(done.loaded_before == (round > 0), "round {round}: {done:?}");
        std::thread::sleep(Duration::from_millis(100));
        let ring = std::fs::read_dir(rings.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&format!("{pid}."))
            });
        if ring.as_deref().is_some_and(|r| sampled(r) > 0) {
            sampled_runs += 1;
        }
        // Dropped: the folder goes, and the library stops at its next
        // sample (or at the next attach).
    }
    assert!(sampled_runs >= 45, "{sampled_runs} of 50 attaches sampled");
    // Each ring goes once its watch is over: none of the 50 (2 MiB each,
    // resident) stays in the program.
    assert_rings_unmapped(pid);
    let mut job = job;
    // Its end: 30 s from its start.
    let status = job.wait().unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(job.stdout.as_mut().unwrap(), &mut out).unwrap();
    assert_eq!(status.code(), Some(0), "{out}");
    assert!(out.starts_with("ok "), "{out}");
}

/// Refused before the process is touched, with why and a non-zero exit:
/// a static program (nothing can be loaded into it), and, run as another
/// user, a process of root's. The targets run on to their own ends.
#[test]
fn an_attach_that_cannot_work_is_refused_and_the_target_is_untouched() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path(), "sites_leak.c", &["-static"]);
    let job = spawn(&[prog.to_str().unwrap(), "3"]);
    library();
    let run = flatline(&[
        "watch",
        "--headless",
        "--sites",
        "--pid",
        &job.id().to_string(),
        "--seconds",
        "1",
        "--out",
        dir.path().join("static.flr").to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_ne!(run.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("linked statically"), "{stderr}");
    assert!(!dir.path().join("static.flr").exists());
    let (code, out) = finish(job);
    assert_eq!(code, Some(0), "{out}");

    // Only root can run flatline as another user here.
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
    let setpriv = Path::new("/usr/bin/setpriv").is_file();
    if !root || !setpriv {
        support::cannot_run("attaching as another user needs root and setpriv");
        return;
    }
    let mut sleeper = Command::new("sleep").arg("5").spawn().unwrap();
    let bin = env!("CARGO_BIN_EXE_flatline");
    // A folder user 65534 may write its recording in, were it to start.
    let out = std::env::temp_dir().join(format!("flatline-attach-nobody-{}.flr", sleeper.id()));
    let run = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", bin])
        .args(["watch", "--headless", "--sites", "--seconds", "1", "--pid"])
        .arg(sleeper.id().to_string())
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&out);
    let stderr = String::from_utf8_lossy(&run.stderr);
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    if stderr.contains("Permission denied") && stderr.contains("setpriv") {
        support::cannot_run("user 65534 cannot run the test's flatline binary");
        return;
    }
    assert_ne!(run.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("belongs to another user") || stderr.contains("ptrace"),
        "{stderr}"
    );
}

/// A process tree running before the attach (two forked workers, as a
/// DataLoader's, each keeping 64 KiB a tick at one line while the parent
/// waits): the workers are attached too, and the top site is theirs.
#[test]
fn the_workers_that_run_at_the_attach_are_attached_too() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("workers.py");
    std::fs::write(
        &job,
        "import os, time\n\
         kids = []\n\
         for _ in range(2):\n\
         \x20   pid = os.fork()\n\
         \x20   if pid == 0:\n\
         \x20       kept = []\n\
         \x20       for _ in range(500):\n\
         \x20           kept.append(bytearray(64 << 10)); time.sleep(0.04)\n\
         \x20       os._exit(0)\n\
         \x20   kids.append(pid)\n\
         print(sum(os.waitpid(k, 0)[1] for k in kids))\n",
    )
    .unwrap();
    let parent = spawn(&["python3", job.to_str().unwrap()]);
    std::thread::sleep(Duration::from_secs(2));
    let (v, stderr) = attach_watch(dir.path(), parent.id(), 14);
    assert!(
        stderr.contains("attached to 2 of its processes too"),
        "{stderr}"
    );
    let s = v["sites"].as_array().expect("sites");
    let top = &s[0];
    assert_eq!(top["line"], 8, "{s:#?}");
    assert_ne!(top["pid"].as_u64(), Some(u64::from(parent.id())), "{s:#?}");
    let (code, out) = finish(parent);
    assert_eq!(code, Some(0));
    assert_eq!(out.trim(), "0", "both workers exited 0");
}

/// A job in a container (its own mount and pid namespaces, its own /tmp
/// and /dev/shm, so none of this process's paths is its): the library is
/// copied into its /dev/shm and the rings made there, its pid inside is
/// read as the one outside, and the watch's lock tells it when the watch
/// is over. The first sentence names its line and the pid this machine
/// knows it by; the copy goes and the ring is unmapped as the watch ends.
/// Attached again, by a watch then killed with SIGKILL (the lock is all
/// the job has to tell by): its ring is unmapped and its folder goes. The
/// job runs to its own end.
#[test]
fn a_job_in_a_container_is_attached_through_its_own_root() {
    let _alone = alone();
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
    if !root || !Path::new("/usr/bin/unshare").is_file() {
        support::cannot_run("a container needs root and unshare");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path(), "sites_leak.c", &[]);
    // The program is copied into the container's own /dev/shm before its
    // own /tmp hides this one's (the checkout itself may be under /tmp).
    let script = format!(
        "mount -t tmpfs none /dev/shm && cp {} /dev/shm/sites_leak && mount -t tmpfs none /tmp \
         && exec /dev/shm/sites_leak 40",
        prog.display()
    );
    let container = spawn(&[
        "unshare",
        "--mount",
        "--pid",
        "--fork",
        "--mount-proc",
        "--propagation",
        "private",
        "sh",
        "-c",
        &script,
    ]);
    let unshare = container.id();
    let job = support::wait_for(Duration::from_millis(50), || {
        std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let (comm, rest) = stat.split_once(") ")?;
            let ppid: u32 = rest.split_whitespace().nth(1)?.parse().ok()?;
            (comm.ends_with("(sites_leak") && ppid == unshare).then_some(pid)
        })
    });
    let Some(job) = job else {
        let (code, out) = finish(container);
        support::cannot_run(&format!("no container started here ({code:?}): {out}"));
        return;
    };
    assert_ne!(
        std::fs::read_link(format!("/proc/{job}/ns/mnt")).unwrap(),
        std::fs::read_link("/proc/self/ns/mnt").unwrap()
    );
    std::thread::sleep(Duration::from_secs(2));
    let (v, stderr) = attach_watch(dir.path(), job, 12);
    assert!(stderr.contains("attached to process"), "{stderr}");
    let first = first_sentence(&dir.path().join("attach.flr"));
    assert!(
        first.contains(&format!("sites_leak {job} (main) grows"))
            && first.contains("sites_leak.c:16"),
        "{first}"
    );
    let s = v["sites"].as_array().expect("sites");
    assert_eq!(s[0]["function"], "leak_here", "{s:#?}");
    // Nothing left in the container's /dev/shm but the job: the rings'
    // folder and the library's copy are gone (its mapping stays).
    let left = left_in_shm(job);
    assert!(left.is_empty(), "{left:?}");
    assert_rings_unmapped(job);

    let mut watch = Command::new(env!("CARGO_BIN_EXE_flatline"))
        .args(["watch", "--headless", "--sites", "--sites-every", "65536"])
        .args(["--pid", &job.to_string(), "--seconds", "60", "--out"])
        .arg(dir.path().join("killed.flr"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mapped = support::wait_for(Duration::from_millis(50), || {
        (rings_mapped(job) > 0).then_some(())
    });
    assert!(mapped.is_some(), "the second attach made no ring");
    std::thread::sleep(Duration::from_millis(500));
    watch.kill().unwrap();
    watch.wait().unwrap();
    assert_rings_unmapped(job);
    // The killed watch's folder: its ring and lock files removed by the
    // job, the folder with them; the library's copy stays (the watch that
    // would have removed it is gone), and is all that does.
    let left = left_in_shm(job);
    assert!(
        left.iter().all(|n| n.starts_with("libflatline_preload-")),
        "{left:?}"
    );
    let (code, out) = finish(container);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("kept "), "{out}");
}

/// A library the job loads after the attach (`dlopen`, lazily bound): its
/// allocations are sampled once the loader has relocated it (found within
/// a second, from a sample), so the line it leaks at is named first.
#[test]
fn a_library_loaded_after_the_attach_is_sampled_too() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path(), "dlopen_later.c", &["-ldl"]);
    let lib = dir.path().join("libleak_later.so");
    let status = Command::new("cc")
        .args(["-O2", "-g", "-fPIC", "-shared"])
        .arg(data("leak_later.c"))
        .arg("-o")
        .arg(&lib)
        .status()
        .unwrap();
    assert!(status.success());
    let job = spawn(&[prog.to_str().unwrap(), lib.to_str().unwrap(), "4", "22"]);
    std::thread::sleep(Duration::from_secs(1));
    let (v, stderr) = attach_watch(dir.path(), job.id(), 15);
    assert!(stderr.contains("attached to process"), "{stderr}");
    let s = v["sites"].as_array().expect("sites");
    assert!(
        s.first().is_some_and(|x| x["function"] == "leak_later"),
        "no site in the library loaded after the attach: {s:#?}"
    );
    let first = first_sentence(&dir.path().join("attach.flr"));
    assert!(
        first.contains("leak_later.c:10") && first.contains("grows"),
        "{first}"
    );
    let (code, out) = finish(job);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("kept "), "{out}");
}

/// The library's looks at the watch (once a second, from a sample) make
/// system calls that fail while the watch runs (the lock it holds): the
/// program's `errno` after a successful `malloc` is what it was before.
#[test]
fn an_attach_leaves_the_program_s_errno_alone() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path(), "errno_keep.c", &[]);
    let job = spawn(&[prog.to_str().unwrap(), "12"]);
    std::thread::sleep(Duration::from_millis(500));
    let (_, stderr) = attach_watch(dir.path(), job.id(), 6);
    assert!(stderr.contains("attached to process"), "{stderr}");
    let (code, out) = finish(job);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("errno changed by 0 of "), "{out}");
}
