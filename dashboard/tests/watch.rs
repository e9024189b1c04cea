//! `flatline watch` against small helper processes whose memory behaviour is
//! known: the numbers must be right.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use support::{flatline, ok, report};

const HELPER: &str = r#"
import sys, time
mode, secs = sys.argv[1], float(sys.argv[2])
log = open(sys.argv[3], "w") if len(sys.argv) > 3 else None
if log:
    log.write("step,tokens,loss\n"); log.flush()
keep, t0, step = [], time.time(), 0
while time.time() - t0 < secs:
    if mode == "linear":  # 10 MiB/s by the clock, however late the sleeps wake
        while len(keep) < int((time.time() - t0) / 0.025) + 1:
            keep.append(b"\x01" * (256 << 10))
        time.sleep(0.025)
    elif mode == "startup":  # 96 MiB in its first second, then 1 MiB every half second
        keep.append(b"\x01" * (1 << 20)); time.sleep(0.01 if len(keep) < 96 else 0.5)
    elif mode == "steps":
        keep.append(b"\x01" * (4 << 20)); time.sleep(1.0)    # 4 MiB, then flat
    else:
        time.sleep(0.1)
    if log:
        step += 1; log.write("%d,%d,%.3f\n" % (step, step * 16384, 3.0 / step)); log.flush()
"#;

/// Watches the helper in `mode` for `secs` at 20 Hz and returns the JSON
/// receipt, reported with `extra` (a job of a few seconds ends during its
/// start-up unless `--warmup-s` says where that ended).
fn watch(dir: &Path, mode: &str, secs: &str, log: bool, extra: &[&str]) -> serde_json::Value {
    let out = dir.join(format!("{mode}.flr"));
    let log_path = dir.join(format!("{mode}.csv"));
    let mut args = vec![
        "watch",
        "--headless",
        "--hz",
        "20",
        "--out",
        out.to_str().unwrap(),
    ];
    if log {
        args.extend(["--log", log_path.to_str().unwrap()]);
    }
    args.extend(["--", "python3", "-c", HELPER, mode, secs]);
    if log {
        args.push(log_path.to_str().unwrap());
    }
    let o = flatline(&args);
    assert!(
        o.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("exited"),
        "the receipt notes the exit: {text}"
    );
    let mut args = vec!["report", out.to_str().unwrap(), "--format", "json"];
    args.extend(extra);
    let r = flatline(&args);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    serde_json::from_slice(&r.stdout).unwrap()
}

/// The helper's start-up (the interpreter's) ends well within this: the
/// user's word, as `--warmup-s`, that what follows is the run.
const STARTED: [&str; 2] = ["--warmup-s", "0.5"];

#[test]
fn steady_growth_is_linear_with_the_true_slope() {
    let dir = tempfile::tempdir().unwrap();
    let v = watch(dir.path(), "linear", "4", false, &STARTED);
    let rss = &v["channels"]["mem.rss"];
    assert_eq!(rss["verdict"], "linear", "{rss}");
    let slope = rss["slope_per_s"].as_f64().unwrap();
    let truth = 10.0 * 1048576.0;
    assert!(
        (slope / truth - 1.0).abs() < 0.10,
        "slope {slope:.0} B/s against {truth:.0}"
    );
    assert_eq!(v["recording"]["end"], "target exited");
}

#[test]
fn equal_steps_are_a_staircase_with_their_quantum() {
    let dir = tempfile::tempdir().unwrap();
    let v = watch(dir.path(), "steps", "5.5", false, &STARTED);
    let rss = &v["channels"]["mem.rss"];
    assert_eq!(rss["verdict"], "staircase", "{rss}");
    let q = rss["quantum"].as_f64().unwrap();
    assert!((q / (4.0 * 1048576.0) - 1.0).abs() < 0.05, "quantum {q}");
    assert!(rss["jumps"].as_u64().unwrap() >= 3, "{rss}");
}

#[test]
fn a_process_that_does_not_grow_is_flat_and_its_log_is_tailed() {
    let dir = tempfile::tempdir().unwrap();
    let v = watch(dir.path(), "flat", "3", true, &[]);
    assert_eq!(
        v["channels"]["mem.rss"]["verdict"], "flat",
        "{}",
        v["channels"]["mem.rss"]
    );
    let step = &v["channels"]["log.step"];
    // ~30 rows in 3 s unloaded; 10 shows the log was followed as it grew.
    assert!(step["max"].as_f64().unwrap() >= 10.0, "{step}");
    assert_eq!(v["channels"]["log.tokens"]["unit"], "count");
    assert!(
        v["recording"]["events"].as_u64().unwrap() >= 10,
        "a step event per row, and the exit"
    );
    assert_eq!(v["recording"]["source"], "watch");
}

#[test]
fn rss_agrees_with_ps_within_one_percent() {
    use flatline_telemetry::Probe;
    use flatline_telemetry::procfs::{ProcProbe, ProcTarget};
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import time; a = b'\\x01' * (64 << 20); print('ready', flush=True); time.sleep(30)",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the 64 MiB are resident, however slowly python starts.
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut ready,
    )
    .unwrap();
    assert_eq!(ready.trim(), "ready");
    let mut probe = ProcProbe::new(ProcTarget::Pid(child.id())).unwrap();
    let rss_idx = probe
        .channels()
        .iter()
        .position(|c| c.name == "mem.rss")
        .unwrap();
    let mut out = vec![f64::NAN; probe.channels().len()];
    probe.read(&mut out).unwrap();
    let ps = Command::new("ps")
        .args(["-o", "rss=", "-p", &child.id().to_string()])
        .output()
        .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let ps_kib: f64 = String::from_utf8_lossy(&ps.stdout).trim().parse().unwrap();
    let ours_kib = out[rss_idx] / 1024.0;
    assert!(ps_kib > 64.0 * 1024.0, "{ps_kib}");
    assert!(
        (ours_kib / ps_kib - 1.0).abs() < 0.01,
        "flatline {ours_kib} KiB, ps {ps_kib} KiB"
    );
}

#[test]
fn bad_targets_are_one_line_errors_and_exit_codes_pass_through() {
    let o = flatline(&["watch", "--headless", "--pid", "4999999"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cannot watch process 4999999") && err.lines().count() == 1,
        "{err}"
    );
    let o = flatline(&["watch", "--headless"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--pid PID, or a command after `--`"));
    let o = flatline(&["watch", "--headless", "--", "/nonexistent/trainer"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("starting /nonexistent/trainer"));

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("exit.flr");
    let o = flatline(&[
        "watch",
        "--headless",
        "--out",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "sleep 0.5; exit 3",
    ]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.exists());
}

/// `watch --seconds N -- COMMAND`: the command lives as long as its watch.
fn watch_for_a_second(dir: &Path, name: &str, script: &str) -> (Output, serde_json::Value) {
    let out = dir.join(format!("{name}.flr"));
    let t0 = std::time::Instant::now();
    let o = flatline(&[
        "watch",
        "--headless",
        "--seconds",
        "1",
        "--out",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        script,
    ]);
    // The command would sleep 30 s: ending well before shows flatline stopped it.
    assert!(t0.elapsed().as_secs() < 25, "waited for the command");
    let r = flatline(&["report", out.to_str().unwrap(), "--format", "json"]);
    (o, serde_json::from_slice(&r.stdout).unwrap())
}

#[test]
fn a_started_command_is_stopped_when_the_time_is_up() {
    let dir = tempfile::tempdir().unwrap();
    let (o, v) = watch_for_a_second(dir.path(), "term", "exec sleep 30");
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(
        text.contains("--seconds reached: stopped process"),
        "{text}"
    );
    assert!(text.contains("with SIGTERM"), "{text}");
    assert_eq!(v["recording"]["end"], "completed");

    // One that ignores SIGTERM gets SIGKILL after the grace period.
    let (o, _) = watch_for_a_second(dir.path(), "kill", "trap '' TERM; exec sleep 30");
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.contains("with SIGKILL"), "{text}");
}

/// A rank's place in its job: a command started with torchrun's variables
/// in its environment, and one watched by pid whose own environment has
/// them, are labelled by them; `--label` adds to and wins over them; the
/// labels are in the header (JSON receipt) and the text receipt; a bad
/// label is a flag error.
#[test]
fn a_rank_is_labelled_from_its_environment_and_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let started = dir.path().join("started.flr");
    let bin = env!("CARGO_BIN_EXE_flatline");
    let o = std::process::Command::new(bin)
        .args(["watch", "--headless", "--hz", "20", "--label", "run=llama"])
        .args([
            "--label",
            "local_rank=9",
            "--out",
            started.to_str().unwrap(),
        ])
        .args(["--", "sleep", "0.5"])
        .env("RANK", "5")
        .env("LOCAL_RANK", "1")
        .env("WORLD_SIZE", "16")
        .env("SLURM_JOB_ID", "81234")
        .output()
        .unwrap();
    let text = ok(&o);
    assert!(
        text.contains("labels local_rank=9 rank=5 run=llama slurm_job_id=81234 world_size=16"),
        "{text}"
    );
    let want = serde_json::json!({
        "rank": "5", "local_rank": "9", "world_size": "16",
        "slurm_job_id": "81234", "run": "llama"
    });
    assert_eq!(report(&started)["labels"], want);

    // By pid: the watched process's environment, not the watcher's.
    let mut job = std::process::Command::new("sleep")
        .arg("30")
        .env("RANK", "7")
        .env("NODE_RANK", "1")
        .spawn()
        .unwrap();
    let by_pid = dir.path().join("by-pid.flr");
    let pid = job.id().to_string();
    let o = flatline(&[
        "watch",
        "--headless",
        "--hz",
        "20",
        "--seconds",
        "0.5",
        "--pid",
        &pid,
        "--out",
        by_pid.to_str().unwrap(),
    ]);
    let _ = job.kill();
    let _ = job.wait();
    ok(&o);
    assert_eq!(
        report(&by_pid)["labels"],
        serde_json::json!({"rank": "7", "node_rank": "1"})
    );

    let bad = flatline(&["watch", "--headless", "--label", "job=x", "--", "true"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("\"job\" is taken"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

/// A job that lives a few seconds, climbing fast and then ever more slowly
/// until it exits (an import, a model's build, a second of training): its
/// whole life is its start-up. The receipt says so instead of projecting
/// it, `--fail-on linear,staircase` passes and `--fail-on insufficient`
/// fails; a leak of the same length that keeps its pace stays growth
/// (`steady_growth_is_linear_with_the_true_slope`).
#[test]
fn a_job_that_ends_during_its_start_up_is_not_projected() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("startup.flr");
    let v = watch(dir.path(), "startup", "4", false, &[]);
    let headline = v["headline"].as_str().unwrap();
    assert!(
        headline.starts_with("The job ended during its start-up: "),
        "{headline}"
    );
    assert!(!headline.contains("reached in"), "{headline}");
    assert!(
        v["growing"].as_array().unwrap().is_empty(),
        "{}",
        v["growing"]
    );
    let rss = &v["channels"]["mem.rss"];
    assert_eq!(rss["verdict"], "insufficient", "{rss}");
    assert_eq!(rss["note"]["why"], "start_up", "{rss}");
    let gate = |verdicts: &str| {
        flatline(&["report", out.to_str().unwrap(), "--fail-on", verdicts])
            .status
            .code()
    };
    assert_eq!(gate("linear,staircase"), Some(0));
    assert_eq!(gate("insufficient"), Some(3));
    // Told where the start-up ended, the report judges what follows.
    let told = support::json(&flatline(&[
        "report",
        out.to_str().unwrap(),
        "--format",
        "json",
        "--warmup-s",
        "1.5",
    ]));
    let rss = &told["channels"]["mem.rss"];
    assert!(
        matches!(rss["verdict"].as_str(), Some("linear" | "staircase")),
        "{rss}"
    );
}

/// A watch that cannot run says so before it starts the command: an
/// `--out` that exists (without `--force`), a folder that is missing or
/// takes no files, a `--prometheus` port in use and a `--web-config` that
/// does not parse each end the run with one error line, and the command
/// (`touch MARKER`) never ran. The file that existed is untouched.
#[test]
fn a_watch_that_cannot_run_never_starts_its_command() {
    let dir = tempfile::tempdir().unwrap();
    let path = |n: &str| dir.path().join(n).to_str().unwrap().to_owned();
    let marker = path("started");
    std::fs::write(path("exists.flr"), b"kept").unwrap();
    std::fs::write(path("bad.yml"), "tls_server_config: {cert_file: x}\n").unwrap();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = busy.local_addr().unwrap().to_string();
    let new = path("new.flr");
    let cases: [(&[&str], &str); 5] = [
        (&["--out", &path("exists.flr")], "already exists"),
        (&["--out", &path("no/such.flr")], "does not exist"),
        (
            &["--out", "/proc/flatline-test.flr"],
            "/proc/flatline-test.flr",
        ),
        (
            &["--out", &new, "--prometheus", &busy],
            "Address already in use",
        ),
        (
            &[
                "--out",
                &new,
                "--prometheus",
                "127.0.0.1:0",
                "--web-config",
                &path("bad.yml"),
            ],
            "cert_file and key_file",
        ),
    ];
    for (flags, says) in cases {
        let mut args = vec!["watch", "--headless"];
        args.extend_from_slice(flags);
        args.extend(["--", "touch", &marker]);
        let o = flatline(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{flags:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{flags:?}: {err}");
        assert!(err.contains(says), "{flags:?}: {err}");
        assert!(!Path::new(&marker).exists(), "{flags:?}: the command ran");
        assert!(!Path::new(&new).exists(), "{flags:?}: a recording was made");
    }
    assert_eq!(std::fs::read(path("exists.flr")).unwrap(), b"kept");
}

/// A command that ends before flatline's first reading of it (`sh -c
/// 'exit 7'` ends within a millisecond) ends the watch with its own exit
/// code, every time, and the receipt says it ended unread.
#[test]
fn a_command_that_ends_at_once_gives_its_own_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    for run in 0..10 {
        let out = dir.path().join(format!("quick{run}.flr"));
        let o = flatline(&[
            "watch",
            "--headless",
            "--out",
            out.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "exit 7",
        ]);
        let text = String::from_utf8_lossy(&o.stdout);
        assert_eq!(
            o.status.code(),
            Some(7),
            "run {run}: {text}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        // Read before it ended or not, the receipt says how it ended.
        assert!(
            text.contains("ended before flatline could read it")
                && text.contains("exited with code 7")
                || text.contains("(sh) exited with code 7"),
            "run {run}: {text}"
        );
    }
}
