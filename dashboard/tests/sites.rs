//! `watch --sites` (issue 53): a job started with the allocation-site
//! library preloaded; its sampled allocations name the code whose live
//! bytes grow, in the JSON receipt's `sites` and a finding joined to the
//! verdict. The jobs are `tests/data/sites_leak.c` (built here, `-O2 -g`)
//! and `tests/data/sites_job.py`; the PyTorch ones, which CI cannot run,
//! are shipped recordings.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::{flatline, library, report};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// `tests/data/sites_leak.c` built `-O2 -g` (and `-static` where asked).
fn leak_program(dir: &Path, extra: &[&str]) -> PathBuf {
    let out = dir.join("sites_leak");
    let status = Command::new("cc")
        .args(["-O2", "-g"])
        .args(extra)
        .arg(data("sites_leak.c"))
        .arg("-o")
        .arg(&out)
        .status()
        .expect("a C compiler (cc) runs");
    assert!(status.success(), "cc {extra:?} sites_leak.c");
    out
}

/// `watch --headless --sites` of `command`; the receipt and stderr.
fn watched(dir: &Path, command: &[&str]) -> (serde_json::Value, String) {
    watched_with(dir, &[], command)
}

/// [`watched`] with more of `watch`'s flags.
fn watched_with(dir: &Path, flags: &[&str], command: &[&str]) -> (serde_json::Value, String) {
    library();
    let out = dir.join("sites.flr");
    let mut args = vec!["watch", "--headless", "--sites", "--hz", "10"];
    args.extend(flags);
    args.push("--out");
    args.push(out.to_str().unwrap());
    args.push("--");
    args.extend(command);
    let run = flatline(&args);
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "{:?}: {stderr}", run.status);
    (report(&out), stderr)
}

fn sites(v: &serde_json::Value) -> &Vec<serde_json::Value> {
    v["sites"].as_array().expect("a sites list")
}

fn finding(v: &serde_json::Value, kind: &str) -> Option<String> {
    v["findings"]
        .as_array()?
        .iter()
        .find(|f| f["kind"] == kind)
        .map(|f| f["text"].as_str().unwrap().to_owned())
}

/// The C case of the issue: `leak_here()` keeps 64 KiB every 50 ms
/// (1.25 MiB/s) while two other functions allocate and free about
/// 400 MiB/s. The top site is `leak_here`, its growth within 30 % of the
/// truth; no churning function is a growing site. Sampled one per 128 KiB:
/// at the default 512 KiB this run's 600 blocks give about 70 samples, and
/// their count alone strays by 12 % (one sigma): 22 runs at the default
/// found −28 % to +48 % (docs/watching.md); at 128 KiB, about 240 samples,
/// 6 %, so a miss here is the estimate's fault, not chance's.
#[test]
fn a_c_leak_is_named_by_its_function_and_the_churn_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let prog = leak_program(dir.path(), &[]);
    let (v, _) = watched_with(
        dir.path(),
        &["--sites-every", "131072"],
        &[prog.to_str().unwrap(), "30"],
    );
    let s = sites(&v);
    let top = &s[0];
    assert_eq!(top["function"], "leak_here", "{s:#?}");
    assert!(
        top["file"].as_str().unwrap().ends_with("sites_leak.c"),
        "{top}"
    );
    assert_eq!(top["line"], 16, "the malloc's line: {top}");
    let truth = 64.0 * 1024.0 / 0.05;
    let growth = top["growth_per_s"].as_f64().unwrap();
    assert!(
        (growth - truth).abs() / truth < 0.3,
        "{growth} B/s against {truth}"
    );
    assert!(
        s.iter()
            .skip(1)
            .all(|x| x["growth_per_s"].as_f64() == Some(0.0)),
        "only the leak grows: {s:#?}"
    );
    assert!(
        !s.iter()
            .any(|x| x["function"].as_str().unwrap().starts_with("churn")),
        "a churning function never holds 1 MiB: {s:#?}"
    );
    let f = finding(&v, "site").expect("a site finding");
    assert!(
        f.contains("was allocated at") && f.contains("leak_here"),
        "{f}"
    );
    // The exact count of what the program holds grows with it.
    let held = v["channels"]
        .as_object()
        .unwrap()
        .iter()
        .find(|(k, _)| k.ends_with(".alloc_live"))
        .map(|(_, c)| c.clone())
        .expect("an alloc_live channel");
    let slope = held["slope_per_s"].as_f64().unwrap();
    assert!(
        (slope - truth).abs() / truth < 0.1,
        "{slope} against {truth}"
    );
    let r = finding(&v, "retention").expect("a retention finding");
    assert!(r.contains("the program holds more"), "{r}");
}

/// A Python whose frames flatline cannot read (a version it has no layout
/// for, a free-threaded build), faked: the C leak linked with a
/// `Py_GetVersion` of its own. Its site is native, and the first sentence
/// says the line is not known before it names the native site, never
/// "allocated at" as if it were the line.
fn unreadable_python(version: &str, said: &str) {
    let dir = tempfile::tempdir().unwrap();
    let define = format!("-DFAKE_VERSION=\"{version}\"");
    let fake = data("fake_python.c");
    let prog = leak_program(dir.path(), &["-rdynamic", &define, fake.to_str().unwrap()]);
    let (v, stderr) = watched_with(
        dir.path(),
        &["--sites-every", "131072"],
        // The leak alone: two churning programs beside the suite's other
        // watches left a 2-core machine too busy to call the site growth.
        &[prog.to_str().unwrap(), "30", "quiet"],
    );
    let headline = v["headline"].as_str().unwrap();
    let want = format!(
        "Python {said}'s frames cannot be read, so the line is not known; the native site is \
         sites_leak.c:16 `void *p = malloc(64 << 10);`"
    );
    assert!(headline.contains(&want), "{headline}\n{stderr}");
    assert!(!headline.contains("allocated at"), "{headline}");
    let top = &sites(&v)[0];
    assert_eq!(top["function"], "leak_here", "{top}");
    assert_eq!(top["python_unread"], said, "{top}");
    let notes = v["events"]["notes"].to_string();
    assert!(
        notes.contains("whose frames flatline cannot read"),
        "the recording's note: {notes}"
    );
}

#[test]
fn a_python_version_without_a_known_layout_gets_native_sites_said_as_such() {
    unreadable_python("3.14.0 (main, Oct  7 2025, 00:00:00) [GCC 12.2.0]", "3.14");
}

#[test]
fn a_free_threaded_python_gets_native_sites_said_as_such() {
    unreadable_python(
        "3.13.0 experimental free-threading build (main, Oct  7 2024, 00:00:00)",
        "3.13t",
    );
}

/// The Python case: a 64 KiB bytearray kept every tick on one line, small
/// objects churned elsewhere, under the system's `python3` (CI's is Debian
/// 12's 3.11, a static build: the interpreter is the executable, not a
/// `libpython`).
#[test]
fn a_python_line_that_keeps_bytearrays_is_the_top_site() {
    let version = Command::new("python3")
        .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        .output()
        .expect("python3 runs");
    let version = String::from_utf8_lossy(&version.stdout).trim().to_owned();
    assert!(
        ["3.10", "3.11", "3.12", "3.13"].contains(&version.as_str()),
        "the library reads CPython 3.10 to 3.13's frames; this python3 is {version}"
    );
    let dir = tempfile::tempdir().unwrap();
    let job = data("sites_job.py");
    let (v, _) = watched(
        dir.path(),
        &["python3", job.to_str().unwrap(), "bytes", "35"],
    );
    let s = sites(&v);
    let top = &s[0];
    assert_eq!(top["line"], 23, "{s:#?}");
    assert_eq!(top["function"], "keep");
    assert!(top["file"].as_str().unwrap().ends_with("sites_job.py"));
    assert!(top["growth_per_s"].as_f64().unwrap() > 0.0, "{top}");
    let frames: Vec<&str> = top["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(frames[1].ends_with("bytes_job"), "{frames:?}");
    let f = finding(&v, "site").expect("a site finding");
    assert!(f.contains("kept.append(bytearray(64 << 10))"), "{f}");
}

/// The same leak on every CPython 3.10 to 3.13 pyenv has here
/// (`~/.pyenv/versions`), each a shared `libpython` build: the first
/// sentence names the leaking line on each, never an allocator's frame.
/// Under CI at least one must be found.
#[test]
fn every_pyenv_python_names_the_leaking_line_first() {
    let root = PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".pyenv/versions");
    let mut found: Vec<(String, PathBuf)> = std::fs::read_dir(&root)
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let minor = name
                        .strip_prefix("3.")?
                        .split('.')
                        .next()?
                        .parse::<u32>()
                        .ok()?;
                    let exe = e.path().join(format!("bin/python3.{minor}"));
                    ((10..=13).contains(&minor) && exe.exists()).then_some((name, exe))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    if std::env::var("CI").as_deref() == Ok("true") {
        assert!(
            !found.is_empty(),
            "no pyenv CPython 3.10-3.13 under {}",
            root.display()
        );
    }
    if found.is_empty() {
        eprintln!(
            "not run: no pyenv CPython 3.10-3.13 under {}",
            root.display()
        );
        return;
    }
    let job = data("sites_job.py");
    // In parallel: each job mostly sleeps.
    let runs: Vec<_> = found
        .into_iter()
        .map(|(name, exe)| {
            let job = job.clone();
            std::thread::spawn(move || {
                let dir = tempfile::tempdir().unwrap();
                // A sample per 128 KiB: at the default 512 KiB the line's
                // estimate over 30 s is too few samples to call it growth
                // every time (seen once in a dozen runs on 3.13).
                let (v, stderr) = watched_with(
                    dir.path(),
                    &["--sites-every", "131072"],
                    &[exe.to_str().unwrap(), job.to_str().unwrap(), "bytes", "30"],
                );
                (name, v, stderr)
            })
        })
        .collect();
    for run in runs {
        let (name, v, stderr) = run.join().expect("a watch");
        let headline = v["headline"].as_str().unwrap_or_default();
        assert!(
            headline.contains("allocated at sites_job.py:23 `kept.append(bytearray(64 << 10))`"),
            "{name}: {headline}\n{stderr}"
        );
        let top = &sites(&v)[0];
        assert_eq!(top["line"], 23, "{name}: {top}");
        assert_eq!(top["function"], "keep", "{name}: {top}");
        for s in sites(&v) {
            let f = s["function"].as_str().unwrap_or_default();
            assert!(
                !(f.contains("Malloc") || f.contains("Arena") || f.starts_with("PyMem")),
                "{name}: an allocator's frame named as a site: {s}"
            );
        }
        eprintln!("{name}: {headline}");
    }
}

/// A job that first runs 40 short Python commands, each holding 3 MiB
/// when it exits (a test's children, a job's helper commands), then keeps
/// 64 KiB a tick at one line. The commands are gone by the time their
/// rings are read: they get no channels, so the 32 sites a recording
/// keeps are not spent on them, and the job's own line is still the top
/// site (when they took channels, it was not named at all).
#[test]
fn short_lived_children_take_no_site_channels_from_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("spawns.py");
    std::fs::write(
        &job,
        "import subprocess, sys, time\n\
         for _ in range(40):\n\
         \x20   subprocess.run([sys.executable, '-c', 'k = [bytearray(100000) for _ in range(30)]'], check=True)\n\
         kept = []\n\
         for _ in range(400):\n\
         \x20   kept.append(bytearray(64 << 10))\n\
         \x20   time.sleep(0.03)\n",
    )
    .unwrap();
    let (v, _) = watched_with(
        dir.path(),
        &["--sites-every", "16384"],
        &["python3", job.to_str().unwrap()],
    );
    let s = sites(&v);
    let top = &s[0];
    assert!(
        top["file"].as_str().unwrap().ends_with("spawns.py"),
        "{s:#?}"
    );
    assert_eq!(top["line"], 6, "{s:#?}");
    // A command still running when a reading comes (each holds its 3 MiB
    // for the few ms before it exits) gets its channel: a few of the 40,
    // more under load, never all of them.
    let children = s.iter().filter(|x| x["pid"] != top["pid"]).count();
    assert!(
        children <= 20,
        "{children} of the sites are the commands': {s:#?}"
    );
    let held = v["channels"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.ends_with(".alloc_live"))
        .count();
    assert!(held <= 21, "{held} processes' exact counts");
}

/// Where nothing can be preloaded the watch says so plainly and goes on
/// without sites: a statically linked program started by the watch.
#[test]
fn no_preload_is_said_plainly_and_the_watch_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let prog = leak_program(dir.path(), &["-static"]);
    let (v, stderr) = watched(dir.path(), &[prog.to_str().unwrap(), "2"]);
    assert!(
        stderr.contains("is linked statically")
            && stderr.contains("watching without allocation sites"),
        "{stderr}"
    );
    assert_eq!(sites(&v).len(), 0);
    let notes = v["events"]["notes"].to_string();
    assert!(notes.contains("linked statically"), "{notes}");
    // `--pid` with `--sites` attaches instead: tests/attach.rs.
}

/// The PyTorch cases, watched here with `--sites` and shipped in
/// `recordings/` (CI has no torch): a loop that keeps each step's
/// `out.detach().clone()`, and a DataLoader whose two workers keep 64 KiB
/// an item, run to its end.
#[test]
fn the_shipped_pytorch_recordings_name_their_sites() {
    let v = report(&support::recording("watch-sites-torch.flr"));
    let top = &sites(&v)[0];
    assert_eq!(top["line"], 52, "{top}");
    assert_eq!(top["code"], "history.append(out.detach().clone())");
    assert!(top["growth_per_s"].as_f64().unwrap() > 0.0);
    let v = report(&support::recording("watch-sites-loader.flr"));
    assert_eq!(v["exit"]["code"], 0);
    let main = support::with_role(&v["process_tree"], "main")
        .first()
        .and_then(|p| p["pid"].as_u64());
    assert!(main.is_some(), "{}", v["process_tree"]);
    let workers: Vec<&serde_json::Value> = sites(&v)
        .iter()
        .filter(|s| s["function"] == "Growing.__getitem__")
        .collect();
    assert!(!workers.is_empty(), "{:#?}", sites(&v));
    assert!(
        workers.iter().all(|s| s["pid"].as_u64() != main),
        "the dataset's sites are the workers'"
    );
}

/// `export --pprof` of the shipped PyTorch recording: a gzipped profile
/// (made before a site's counts were kept: bytes only, which it says);
/// the file is not overwritten without --force, and a recording without
/// sites is refused with how to make one, writing nothing. (CI reads real
/// profiles with `go tool pprof` in scripts/pprof-check.py.)
#[test]
fn export_pprof_writes_a_profile_and_refuses_what_it_cannot_make() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("torch.pb.gz");
    let rec = support::recording("watch-sites-torch.flr");
    let said = support::ok(&flatline(&[
        "export",
        rec.to_str().unwrap(),
        "--pprof",
        out.to_str().unwrap(),
    ]));
    assert!(said.contains("allocation site"), "{said}");
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(bytes[..2], [0x1f, 0x8b], "gzip's magic");
    let again = flatline(&[
        "export",
        rec.to_str().unwrap(),
        "--pprof",
        out.to_str().unwrap(),
    ]);
    support::fails(&again, "--force");
    assert_eq!(std::fs::read(&out).unwrap(), bytes, "the profile is kept");
    // One process only: a pid with no site is refused by name.
    let other = dir.path().join("other.pb.gz");
    let nobody = flatline(&[
        "export",
        rec.to_str().unwrap(),
        "--pprof",
        other.to_str().unwrap(),
        "--pid",
        "1",
    ]);
    support::fails(&nobody, "no allocation site of process 1");
    assert!(!other.exists());
    let plain = support::recording("watch-torch-leak-45s.flr");
    let none = flatline(&[
        "export",
        plain.to_str().unwrap(),
        "--pprof",
        other.to_str().unwrap(),
    ]);
    support::fails(&none, "watch --sites");
    assert!(!other.exists(), "nothing is written for a refusal");
}
