//! `flatline mark TEXT` reaches a running soak and watch over their marker
//! sockets, lands in their recordings at the moment it was sent, and asks
//! which one when several run.

mod support;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use support::report;

/// `flatline ARGS` with its sockets in `runtime` (as `$XDG_RUNTIME_DIR`).
fn flatline_in(runtime: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_flatline"));
    c.env("XDG_RUNTIME_DIR", runtime);
    c
}

fn mark(runtime: &Path, args: &[&str]) -> Output {
    flatline_in(runtime)
        .arg("mark")
        .args(args)
        .output()
        .unwrap()
}

fn start(runtime: &Path, args: &[&str]) -> Child {
    flatline_in(runtime)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until `n` sessions listen in `runtime`.
fn listening(runtime: &Path, n: usize) {
    let dir = runtime.join("flatline");
    let seen = support::wait_for(Duration::from_millis(20), || {
        let count = std::fs::read_dir(&dir)
            .map(|d| {
                d.flatten()
                    .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                    .count()
            })
            .unwrap_or(0);
        (count == n).then_some(())
    });
    assert!(
        seen.is_some(),
        "{n} sessions never listened in {}",
        dir.display()
    );
}

fn unix_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1e3
}

fn markers(v: &serde_json::Value) -> Vec<(f64, String)> {
    v["events"]["markers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["t_s"].as_f64().unwrap(),
                m["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn marks_reach_a_running_soak_and_watch_at_the_moment_they_are_sent() {
    let runtime = tempfile::tempdir().unwrap();
    let rt = runtime.path();
    let dir = tempfile::tempdir().unwrap();
    let none = mark(rt, &["anything"]);
    assert_eq!(none.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&none.stderr)
            .contains("no flatline watch, soak or live is running for this user"),
        "{}",
        String::from_utf8_lossy(&none.stderr)
    );

    let soak_out = dir.path().join("soak.flr");
    let mut soak = start(
        rt,
        &[
            "soak",
            "--workload",
            "idle",
            "--seconds",
            "6",
            "--hz",
            "20",
            "--out",
            soak_out.to_str().unwrap(),
        ],
    );
    listening(rt, 1);
    // The only session: no --to needed.
    let before = unix_ms();
    let o = mark(rt, &["lr to 3e-4"]);
    let after = unix_ms();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("marked \"lr to 3e-4\" in soak"));

    let watch_out = dir.path().join("watch.flr");
    let mut watch = start(
        rt,
        &[
            "watch",
            "--headless",
            "--seconds",
            "2",
            "--hz",
            "20",
            "--out",
            watch_out.to_str().unwrap(),
            "--",
            "sleep",
            "10",
        ],
    );
    listening(rt, 2);
    let two = mark(rt, &["which?"]);
    assert_eq!(two.status.code(), Some(1));
    let err = String::from_utf8_lossy(&two.stderr);
    assert!(
        err.contains("2 flatline sessions are running; say which with --to")
            && err.contains("soak ")
            && err.contains("watch "),
        "{err}"
    );
    let o = mark(rt, &["in the watch", "--to", watch_out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bad = mark(rt, &["x", "--to", "/no/such.flr"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("none of the running sessions is"));
    let long = mark(rt, &[&"x".repeat(5000), "--to", soak_out.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&long.stderr).contains("over 4096 bytes"));

    assert!(watch.wait().unwrap().success());
    assert!(soak.wait().unwrap().success());
    let v = report(&soak_out);
    let started = v["recording"]["started_unix_ms"].as_f64().unwrap();
    let m = markers(&v);
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(m[0].1, "lr to 3e-4");
    // Stamped when it arrived: between sending and the answer (the clock's
    // zero and the header's wall-clock start differ by a few ms at most).
    let at_ms = started + m[0].0 * 1e3;
    assert!(
        at_ms >= before - 100.0 && at_ms <= after + 100.0,
        "marker at {at_ms:.0}, sent between {before:.0} and {after:.0}"
    );
    assert_eq!(
        markers(&report(&watch_out))
            .into_iter()
            .map(|m| m.1)
            .collect::<Vec<_>>(),
        ["in the watch"]
    );
    // Both sessions cleaned up after themselves.
    assert_eq!(
        std::fs::read_dir(rt.join("flatline")).unwrap().count(),
        0,
        "sockets and their notes are removed"
    );
}

#[test]
fn a_socket_folder_open_to_others_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let runtime = tempfile::tempdir().unwrap();
    let dir = runtime.path().join("flatline");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = mark(runtime.path(), &["x"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("is open to other users (mode 777)"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A session whose marker socket was removed under it (a cleaner emptied
/// its folder) still ends when its time is up: it used to wait forever for
/// the socket's thread.
#[test]
fn a_session_whose_socket_was_removed_still_ends() {
    let runtime = tempfile::tempdir().unwrap();
    let out = runtime.path().join("soak.flr");
    let mut soak = start(
        runtime.path(),
        &[
            "soak",
            "--seconds",
            "2",
            "--workload",
            "idle",
            "--hz",
            "20",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    listening(runtime.path(), 1);
    std::fs::remove_dir_all(runtime.path().join("flatline")).unwrap();
    let ended = support::wait_for(Duration::from_millis(50), || soak.try_wait().unwrap());
    if ended.is_none() {
        let _ = soak.kill();
    }
    assert!(
        ended.is_some_and(|s| s.success()),
        "the soak did not end: {ended:?}"
    );
}
