//! `flatline watch` of process trees whose memory is known: the DataLoader
//! copy-on-access pattern and its fix, and a tree of short-lived children.
//! The fixture is `tests/data/cow_workers.py` (Python, no torch).

mod support;

use std::path::{Path, PathBuf};

use flatline_telemetry::recording::{EventKind, Recording};
use support::{flatline, ok};

/// Channels each process gets: rss, pss, uss, cow.
const PER_PROCESS: usize = flatline_telemetry::tree::PROCESS_CHANNELS.len();

/// The Python interpreter itself, not a launcher in front of it: a pyenv
/// shim is a shell script whose short-lived subshells would be in the
/// watched tree (and counted as brief processes).
fn python() -> String {
    static PYTHON: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let out = std::process::Command::new("python3")
                .args(["-c", "import sys; print(sys.executable)"])
                .output()
                .expect("python3 runs");
            String::from_utf8(out.stdout).unwrap().trim().to_owned()
        })
        .clone()
}

/// Held by every test here: each runs real processes and most read a
/// copy's slope or size against /proc's, so on two cores none runs beside
/// another. The real-size test's slope was skewed by a storm beside it
/// (1.157x against its 15 % bound), and again (1.162x) while only the
/// tests without this lock (the bytes, fifty-children, no-tree and
/// fast-estimate ones) ran beside it; the copy test once saw nothing
/// growing the same way.
fn heavy() -> std::sync::MutexGuard<'static, ()> {
    static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());
    HEAVY.lock().unwrap_or_else(|e| e.into_inner())
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/cow_workers.py")
}

/// Watches the fixture with `args` headless at 10 Hz; returns the recording's
/// path and the fixture's own last line (its JSON truth).
///
/// The receipts below skip what comes before the workers start reading (the
/// data being built, the one-off copy each worker's interpreter makes after
/// the fork) with `--warmup-s`: the fixture says when that is.
fn watch_fixture(dir: &Path, name: &str, args: &[&str]) -> (PathBuf, serde_json::Value) {
    let out = dir.join(format!("{name}.flr"));
    let fixture = fixture();
    let python = python();
    let mut argv = vec![
        "watch",
        "--headless",
        "--hz",
        "10",
        "--out",
        out.to_str().unwrap(),
        "--",
        &python,
        fixture.to_str().unwrap(),
    ];
    argv.extend(args);
    let text = ok(&flatline(&argv));
    let truth = text
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("the fixture's line is passed through: {text}"));
    (out, serde_json::from_str(truth).unwrap())
}

/// The JSON receipt from when the fixture's workers started reading: the
/// fixture says when that was on the wall clock, the recording when it began.
fn after_warmup(out: &Path, truth: &serde_json::Value) -> serde_json::Value {
    let began = support::report(out)["recording"]["started_unix_ms"]
        .as_f64()
        .unwrap()
        / 1e3;
    let warm = format!("{:.2}", truth["start_unix"].as_f64().unwrap() - began + 0.3);
    support::json(&flatline(&[
        "report",
        out.to_str().unwrap(),
        "--format",
        "json",
        "--warmup-s",
        &warm,
    ]))
}

fn verdict(v: &serde_json::Value, channel: &str) -> String {
    v["channels"][channel]["verdict"]
        .as_str()
        .unwrap_or_else(|| panic!("no {channel} in {}", v["channels"]))
        .to_owned()
}

/// `report --fail-on linear,staircase`'s exit code: 3 when growth is found.
fn gate_on_growth(out: &Path) -> Option<i32> {
    flatline(&[
        "report",
        out.to_str().unwrap(),
        "--fail-on",
        "linear,staircase",
    ])
    .status
    .code()
}

fn is_growth(verdict: &str) -> bool {
    matches!(verdict, "linear" | "staircase")
}

#[test]
fn workers_copying_a_shared_list_grow_pss_while_every_rss_is_flat() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    // 48 steps of 0.4 s: the copying goes on for 19 s, so that a start-up
    // found late under load (8 s of a 10.6 s run, once with 24 steps, when
    // the other tree tests ran beside it) still leaves the copying seconds
    // of readings to be read as growth.
    let (out, truth) = watch_fixture(dir.path(), "list", &["list", "96", "48", "0.4"]);
    let v = after_warmup(&out, &truth);
    let tree = &v["process_tree"];
    let workers = support::with_role(tree, "worker");
    assert_eq!(workers.len(), 2, "{tree}");
    let rss: Vec<String> = v["channels"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.ends_with(".rss") || *k == "mem.rss")
        .cloned()
        .collect();
    assert!(
        rss.len() >= 5,
        "mem.rss, tree.rss and three pid<N>.rss: {rss:?}"
    );
    for c in &rss {
        assert!(!is_growth(&verdict(&v, c)), "{c}: {}", v["channels"][c]);
    }
    assert_eq!(
        verdict(&v, "tree.pss"),
        "linear",
        "{}",
        v["channels"]["tree.pss"]
    );
    let slope = v["channels"]["tree.pss"]["slope_per_s"].as_f64().unwrap();
    let want = truth["slope_per_s"].as_f64().unwrap();
    assert!(
        (slope / want - 1.0).abs() < 0.10,
        "tree.pss grows {slope:.0} B/s; /proc says {want:.0} B/s"
    );
    // The finding also wants every RSS within 1 % from the last worker's
    // start to the end: when it is missing, say each RSS's readings (CI saw
    // it missing once in about ten runs, under load, and never here).
    assert!(
        tree["finding"]
            .as_str()
            .is_some_and(|f| f.starts_with("copy-on-access")),
        "{tree}\n{}",
        rss.iter()
            .map(|c| format!("{c}: {}", v["channels"][c]))
            .collect::<Vec<_>>()
            .join("\n")
    );
    for w in &workers {
        let stem = w["channels"].as_str().unwrap();
        let pss = format!("{stem}.pss");
        assert!(
            is_growth(&verdict(&v, &pss)),
            "{pss}: {}",
            v["channels"][&pss]
        );
    }
    let text = ok(&flatline(&["report", out.to_str().unwrap()]));
    assert!(text.contains("process tree: 3 processes seen"), "{text}");
    assert!(text.contains("finding: copy-on-access"), "{text}");
    // One truth: the finding is the headline, growing lists the tree's PSS,
    // and a CI gate on growth fails, on the receipt as a user runs it (its
    // start-up found, not given).
    let whole = support::report(&out);
    let headline = whole["headline"].as_str().unwrap();
    copy_headline_names(headline, &workers);
    let growing = whole["growing"].as_array().unwrap();
    // CI once saw nothing growing here (1 run in several, under load; 3
    // runs side by side passed here): say what tree.pss read and where the
    // start-up was found, so the next one tells why.
    assert!(
        growing.iter().any(|g| g == "tree.pss"),
        "{growing:?}\n{headline}\ntree.pss: {}\nstart-up: {}",
        whole["channels"]["tree.pss"],
        whole["warmup"]
    );
    assert!(
        whole["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "copy_on_access"),
        "{}",
        whole["findings"]
    );
    assert_eq!(gate_on_growth(&out), Some(3));
}

/// The copy-on-access headline: it leads, names each copying worker by
/// role and pid, and bounds the copy by what the workers share, not by the
/// host's RAM. Copying the analysis reads as the start-up (it found the
/// start-up late, on a loaded machine) is told as that: "Copy-on-access
/// in the start-up: worker …".
fn copy_headline_names(headline: &str, workers: &[&serde_json::Value]) {
    assert!(
        headline.starts_with("Copy-on-access: worker ")
            || headline.starts_with("Copy-on-access in the start-up: worker "),
        "{headline}"
    );
    for w in workers {
        let named = format!("worker {}", w["pid"]);
        assert!(headline.contains(&named), "{named} in {headline}");
    }
    assert!(!headline.contains("host's RAM"), "{headline}");
}

/// The same at a real job's sizes: a 1.5 GiB parent, whose page tables
/// take about 25 ms to walk, and two workers copying it. The walks of the
/// copiers must not starve the rest (the tree's sums come at every
/// reading), and the finding, the headline and `grew` stand.
///
/// The sums stand on walks a 1 % CPU budget spreads over the readings
/// (`tree.age`: seconds behind the copying, more beside busy jobs), so the
/// test waits for what it asserts: the fixture holds its tree after the
/// copying until the recording shows a reading whose every walk came after
/// it, and that reading is held to /proc's, not a line through readings
/// still catching up.
#[test]
fn a_real_size_parent_and_two_copying_workers() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("big.flr");
    let hold = dir.path().join("hold");
    std::fs::write(&hold, b"").unwrap();
    let fixture = fixture();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_flatline"))
        .args(["watch", "--headless", "--hz", "10", "--out"])
        .arg(&out)
        .arg("--")
        .arg(python())
        .arg(&fixture)
        .args(["list", "1536", "96", "0.3"])
        .arg(&hold)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The fixture's truth, passed through as it prints it.
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<serde_json::Value>();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if line.starts_with('{') {
                let _ = tx.send(serde_json::from_str(&line).unwrap());
            }
        }
    });
    let truth = rx
        .recv_timeout(support::PATIENCE * 2)
        .expect("the fixture's truth");
    let began = |rec: &Recording| rec.header.started_unix_ms as f64 / 1e3;
    let copying = |rec: &Recording| {
        let from = truth["start_unix"].as_f64().unwrap() - began(rec);
        let span = truth["end_s"].as_f64().unwrap() - truth["start_s"].as_f64().unwrap();
        (from, from + span)
    };
    // A reading of the sums whose oldest walk came after the copying.
    let caught_up = |rec: &Recording| -> Option<(f64, f64)> {
        let (_, to) = copying(rec);
        let (pss, age) = (rec.channel("tree.pss")?, rec.channel("tree.age")?);
        rec.t_ns
            .iter()
            .zip(pss.iter().zip(age))
            .map(|(&t, (&v, &a))| (t as f64 / 1e9, v, a))
            .find(|&(t, v, a)| v.is_finite() && a.is_finite() && t - a > to)
            .map(|(t, v, _)| (t, v))
    };
    let t0 = std::time::Instant::now();
    let mut after = None;
    while after.is_none() && t0.elapsed() < support::PATIENCE * 2 {
        std::thread::sleep(std::time::Duration::from_millis(500));
        after = Recording::open(&out).ok().as_ref().and_then(caught_up);
    }
    std::fs::remove_file(&hold).unwrap();
    assert!(child.wait().unwrap().success());
    reader.join().unwrap();
    let after = after.expect("the sums caught up with the copying");
    let whole = support::report(&out);
    let tree = &whole["process_tree"];
    let workers = support::with_role(tree, "worker");
    assert_eq!(workers.len(), 2, "{tree}");
    copy_headline_names(whole["headline"].as_str().unwrap(), &workers);
    let mut pids: Vec<u64> = workers.iter().map(|w| w["pid"].as_u64().unwrap()).collect();
    pids.sort_unstable();
    // Both are the copiers (the tree held what they copied before it ended,
    // so the copying may be read as its start-up: `grew` is then empty).
    assert_eq!(support::pids(&tree["copy"]["copiers"]), pids, "{tree}");
    // tree.pss read throughout the copying: at least one reading a second
    // on average, no gap over 5 s (the probe reads at 2 Hz).
    let rec = Recording::open(&out).unwrap();
    let (from, to) = copying(&rec);
    let pss = rec.channel("tree.pss").unwrap();
    let read: Vec<(f64, f64)> = rec
        .t_ns
        .iter()
        .zip(pss)
        .map(|(&t, &v)| (t as f64 / 1e9, v))
        .filter(|&(_, v)| v.is_finite())
        .collect();
    let during: Vec<f64> = read
        .iter()
        .filter(|&&(t, _)| t >= from && t <= to)
        .map(|p| p.0)
        .collect();
    let gap = during.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max);
    assert!(
        during.len() as f64 >= to - from && gap <= 5.0,
        "{} readings over {:.1} s, gaps up to {gap:.1} s",
        during.len(),
        to - from
    );
    // What the sums say the tree holds once every walk they stand on came
    // after the copying, against the fixture's own rollups at its end (the
    // tree holds still from then on). A line through readings still
    // catching up would steepen with the machine's load (1.16x idle, up to
    // 1.47x beside two busy loops, measured); a reading before the copying
    // may stand on walks from before the fork.
    let want = truth["pss_end"].as_f64().unwrap();
    eprintln!(
        "tree.pss read {:.3}x what /proc says after the copying; the sums caught up {:.1} s after it",
        after.1 / want,
        after.0 - to
    );
    assert!(
        (after.1 / want - 1.0).abs() < 0.05,
        "tree.pss read {:.0} B after the copying; /proc says {want:.0} B",
        after.1
    );
}

#[test]
fn the_same_data_in_one_bytes_object_reads_flat() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    let (out, truth) = watch_fixture(dir.path(), "bytes", &["bytes", "96", "24", "0.4"]);
    let v = after_warmup(&out, &truth);
    // The workers' reads copy nothing: the tree's PSS moves by at most what
    // the interpreters copy of their own (about 1 % on a loaded machine; one
    // CI run saw a single 2.7 MiB step, 2.5 %), under the finding's 5 % (the
    // list's moved by more than half).
    let pss = &v["channels"]["tree.pss"];
    let share = pss["drift"].as_f64().unwrap() / pss["baseline"].as_f64().unwrap();
    assert!(share.abs() < 0.04, "{pss}");
    assert_eq!(v["process_tree"]["finding"], serde_json::Value::Null);
    assert_eq!(v["process_tree"]["grew"], serde_json::json!([]));
    // The receipt a user gets (its start-up found) calls nothing growth, its
    // headline says no memory grows, and a CI gate on growth passes.
    let whole = support::report(&out);
    assert_eq!(
        whole["growing"],
        serde_json::json!([]),
        "{}",
        whole["headline"]
    );
    let headline = whole["headline"].as_str().unwrap();
    assert!(
        ["Memory is flat", "No memory channel grows"]
            .iter()
            .any(|h| headline.starts_with(h)),
        "{headline}"
    );
    assert_eq!(whole["findings"], serde_json::json!([]));
    assert_eq!(gate_on_growth(&out), Some(0));
}

#[test]
fn fifty_short_lived_children_come_and_go_without_leaving_channels() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    let (out, truth) = watch_fixture(dir.path(), "churn", &["churn", "50", "1.2", "0.2"]);
    assert_eq!(truth["children"], 50);
    let rec = Recording::open(&out).unwrap();
    assert_eq!(rec.tail, None);
    let started: Vec<u32> = rec
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ProcessStarted { pid, role, .. } if role == "worker" => Some(*pid),
            _ => None,
        })
        .collect();
    let exited = rec
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::ProcessExited { .. }))
        .count();
    // Each child lives 1.2 s, more than two listings at 2 Hz: each is seen
    // and named, or (on a machine that delays the probe) listed once and
    // counted as too brief to name. None is lost without a count.
    let brief = rec
        .channel("tree.brief")
        .and_then(|c| c.iter().rev().copied().find(|v| v.is_finite()))
        .unwrap_or(0.0) as usize;
    assert_eq!(
        started.len() + brief,
        50,
        "{} named, {brief} brief",
        started.len()
    );
    // The fixture stays alone for 1.5 s at the end: each named child's exit
    // is recorded.
    assert_eq!(exited, started.len(), "{exited} exits recorded");
    // Every child's channels end when it does; at most a few are live at once.
    let mut most_live = 0;
    for i in 0..rec.len() {
        let live = (0..rec.header.schema.len())
            .filter(|&c| rec.header.schema.channels[c].name.starts_with("pid") && rec.is_live(c, i))
            .count();
        most_live = most_live.max(live);
    }
    assert!(
        most_live <= PER_PROCESS * 10,
        "{most_live} per-process channels live at once"
    );
    let ended = rec
        .header
        .schema
        .channels
        .iter()
        .zip(&rec.lifetimes)
        .filter(|(c, l)| c.name.starts_with("pid") && l.until.is_some())
        .count();
    assert_eq!(
        ended,
        PER_PROCESS * started.len(),
        "{ended} per-process channels ended"
    );
    // The tree's count comes back down: nothing of the children is kept.
    let procs = rec.channel("tree.procs").unwrap();
    let last = procs.iter().rev().find(|v| !v.is_nan()).unwrap();
    assert_eq!(*last, 1.0, "{last} processes at the end");
}

#[test]
fn no_tree_watches_the_process_alone() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("alone.flr");
    let fixture = fixture();
    let python = python();
    ok(&flatline(&[
        "watch",
        "--headless",
        "--no-tree",
        "--out",
        out.to_str().unwrap(),
        "--",
        &python,
        fixture.to_str().unwrap(),
        "churn",
        "3",
        "0.6",
        "0.1",
    ]));
    let rec = Recording::open(&out).unwrap();
    assert!(rec.channel("tree.pss").is_none());
    assert!(rec.channel("mem.rss").is_some());
    assert!(
        !rec.events
            .iter()
            .any(|e| matches!(e.kind, EventKind::ProcessStarted { .. }))
    );
}

/// The watcher itself while 50 children come and go: no thread per process,
/// and its memory does not climb with the processes it has seen.
#[test]
fn the_watcher_keeps_its_threads_and_memory_through_a_churning_tree() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("churn.flr");
    let fixture = fixture();
    let mut watcher = std::process::Command::new(env!("CARGO_BIN_EXE_flatline"))
        .args(["watch", "--headless", "--hz", "20", "--out"])
        .arg(&out)
        .args(["--", &python()])
        .arg(&fixture)
        .args(["churn", "50", "1.2", "0.2"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", watcher.id());
    let field = |text: &str, key: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(key))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    let mut readings = Vec::new(); // (threads, VmRSS kB), every 250 ms
    // Settled once the recording on disk has seen 10 children come: the
    // sampler, slow probes and recorder all run by then, however long the
    // start took on this machine.
    let mut settled_at = None;
    let workers_seen = || {
        Recording::open(&out).ok().map_or(0, |rec| {
            rec.events
                .iter()
                .filter(|e| matches!(e.kind, EventKind::ProcessStarted { .. }))
                .count()
        })
    };
    while watcher.try_wait().unwrap().is_none() {
        if let Ok(text) = std::fs::read_to_string(&status)
            && let (Some(t), Some(r)) = (field(&text, "Threads:"), field(&text, "VmRSS:"))
        {
            readings.push((t, r));
        }
        if settled_at.is_none() && workers_seen() >= 10 {
            settled_at = Some(readings.len());
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    let from = settled_at.expect("the recording saw 10 children");
    assert!(
        readings.len() > from + 8,
        "{} readings, settled at {from}",
        readings.len()
    );
    let settled = &readings[from..readings.len() - 1];
    // No thread per process: never more than once settled (fewer at the end,
    // when the command's output readers have finished).
    let threads: Vec<u64> = settled.iter().map(|r| r.0).collect();
    assert!(
        threads.iter().all(|&t| t <= threads[0]),
        "threads {threads:?}"
    );
    let rss0 = settled[0].1;
    let rss_max = settled.iter().map(|r| r.1).max().unwrap();
    // 35 more processes, each with three channels and two events: a leak of a
    // process's worth of buffers (a probe, a thread stack) would pass 4 MiB.
    assert!(
        rss_max <= rss0 + 4096,
        "watcher RSS rose from {rss0} kB to {rss_max} kB"
    );
}

/// A job that forks 200 short-lived processes a second (each lives 20 ms):
/// the watcher neither falls over nor grows, and the recording is whole.
/// (The figures for a minute of it are in the note: about 1 % of a
/// core, as for an idle `sleep`, and 14.7 MiB resident.)
#[test]
fn a_fork_storm_is_watched_without_panic_or_growth() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("storm.flr");
    let fixture = fixture();
    let mut watcher = std::process::Command::new(env!("CARGO_BIN_EXE_flatline"))
        .args(["watch", "--headless", "--hz", "10", "--out"])
        .arg(&out)
        .args(["--", &python()])
        .arg(&fixture)
        .args(["storm", "200", "10"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", watcher.id());
    let (mut most_rss, mut most_threads) = (0u64, 0u64);
    while watcher.try_wait().unwrap().is_none() {
        if let Ok(text) = std::fs::read_to_string(&status) {
            let field = |key: &str| -> u64 {
                text.lines()
                    .find(|l| l.starts_with(key))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
                    .unwrap_or(0)
            };
            most_rss = most_rss.max(field("VmRSS:"));
            most_threads = most_threads.max(field("Threads:"));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let run = watcher.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let truth: serde_json::Value = serde_json::from_str(
        stdout
            .lines()
            .find(|l| l.starts_with('{'))
            .expect("the fixture's line"),
    )
    .unwrap();
    assert!(truth["children"].as_u64().unwrap() >= 1000, "{truth}");
    assert!(stdout.contains("wrote "), "the receipt: {stdout}");
    // Most children live between two listings; those listed once are
    // counted, and the receipt says so.
    assert!(
        stdout.contains("too brief to name"),
        "the receipt counts the brief ones: {stdout}"
    );
    // No thread or buffer per process seen: bounded whatever the churn.
    assert!(most_threads <= 16, "{most_threads} threads");
    assert!(most_rss < 64 * 1024, "{most_rss} kB resident");
    let rec = Recording::open(&out).unwrap();
    assert_eq!(rec.tail, None, "a whole file");
    assert!(rec.channel("tree.procs").is_some());
}

/// The last reading of `channel` in a recording.
fn last(rec: &Recording, channel: &str) -> f64 {
    rec.channel(channel)
        .and_then(|c| c.iter().rev().copied().find(|v| v.is_finite()))
        .unwrap_or_else(|| panic!("no reading of {channel}"))
}

/// The fast copy-on-write estimate (`tree.cow`: minor faults that added no
/// resident page) against the truth its page-table walks would give: three
/// workers copying their parent's list add to the tree's PSS exactly what
/// they copy. Faults of new memory (first touch) and of page-cache pages
/// mapped again do not read as copies.
#[test]
fn the_fast_copy_estimate_matches_pss_and_ignores_first_touch_and_refaults() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    let (out, truth) = watch_fixture(dir.path(), "copy", &["copy", "64"]);
    let copied = truth["copied"].as_f64().unwrap();
    assert!(copied > 100e6, "the fixture copied {copied} bytes");
    let rec = Recording::open(&out).unwrap();
    let estimate = last(&rec, "tree.cow");
    let off = estimate / copied - 1.0;
    assert!(
        off.abs() <= 0.25,
        "tree.cow {estimate:.0} against {copied:.0} copied (PSS): {:+.0} %",
        off * 100.0
    );
    // Each copying worker's own estimate is a third of it.
    let workers: Vec<f64> = rec
        .header
        .schema
        .channels
        .iter()
        .filter(|c| c.name.starts_with("pid") && c.name.ends_with(".cow"))
        .map(|c| last(&rec, &c.name))
        .filter(|&v| v > 0.1 * copied / 3.0)
        .collect();
    assert_eq!(workers.len(), 3, "{workers:?}");

    for mode in ["touch", "refault"] {
        let (out, _) = watch_fixture(dir.path(), mode, &[mode, "64"]);
        let rec = Recording::open(&out).unwrap();
        let faulted = 3.0 * 64.0 * 1048576.0 * if mode == "refault" { 2.0 } else { 1.0 };
        let estimate = last(&rec, "tree.cow");
        assert!(
            estimate < 0.05 * faulted,
            "{mode}: tree.cow {estimate:.0} for {faulted:.0} bytes faulted in"
        );
    }
}
