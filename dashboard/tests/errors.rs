//! Every bad input ends with one error line that says each thing once: the
//! file it was about, and the cause (`No such file or directory`), never
//! "opening x: x: No such file (os error 2): No such file (os error 2)".

mod support;

use std::process::Output;

use support::{flatline, golden_v1};

/// The error line of a failed run, checked: a non-zero exit, one line on
/// stderr, `flatline: error: ` (or clap's `error: ` for a flag), and no part
/// of the chain (the pieces between ": ") said twice.
fn one_error(case: &str, out: &Output) -> String {
    assert!(!out.status.success(), "{case}: exit 0");
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(lines.len(), 1, "{case}: not one error line:\n{err}");
    let line = lines[0];
    let body = line
        .strip_prefix("flatline: error: ")
        .or_else(|| line.strip_prefix("error: "))
        .unwrap_or_else(|| panic!("{case}: not an error line: {line}"));
    let parts: Vec<&str> = body.split(": ").map(str::trim).collect();
    for (i, a) in parts.iter().enumerate() {
        for b in &parts[i + 1..] {
            assert!(
                a != b && !(b.len() > 12 && a.contains(b)),
                "{case}: `{b}` is said twice in: {line}"
            );
        }
    }
    assert!(
        line.matches("(os error").count() <= 1,
        "{case}: an OS error twice in: {line}"
    );
    line.to_owned()
}

/// `needle` occurs exactly once in `line`.
fn once(case: &str, line: &str, needle: &str) {
    assert_eq!(
        line.matches(needle).count(),
        1,
        "{case}: `{needle}` is not said exactly once in: {line}"
    );
}

#[test]
fn each_bad_input_says_its_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let golden = golden_v1();
    let golden = golden.to_str().unwrap();

    // A missing file.
    let l = one_error("missing file", &flatline(&["report", "/nonexistent.flr"]));
    once("missing file", &l, "/nonexistent.flr");
    once("missing file", &l, "No such file or directory");

    // A folder where a file belongs.
    let l = one_error("directory", &flatline(&["report", "/tmp"]));
    once("directory", &l, "/tmp");

    // A file that cannot be read (a read of /proc/self/mem at 0 fails with
    // EIO, for root too).
    let l = one_error("unreadable", &flatline(&["report", "/proc/self/mem"]));
    once("unreadable", &l, "/proc/self/mem");

    // Not a recording, and a recording cut inside its header.
    let junk = tmp("junk.flr");
    std::fs::write(&junk, b"not a recording at all, just text\n").unwrap();
    let l = one_error("not a recording", &flatline(&["report", &junk]));
    once("not a recording", &l, &junk);
    let cut = tmp("cut.flr");
    let bytes = std::fs::read(golden).unwrap();
    std::fs::write(&cut, &bytes[..20]).unwrap();
    let l = one_error("cut header", &flatline(&["report", &cut]));
    once("cut header", &l, &cut);

    // A full disk: /dev/full refuses every write with ENOSPC.
    if std::path::Path::new("/dev/full").exists() {
        let l = one_error(
            "full disk",
            &flatline(&["export", golden, "--csv", "/dev/full", "--force"]),
        );
        once("full disk", &l, "No space left on device");
    } else {
        support::cannot_run("the full-disk case needs /dev/full");
    }

    // An output folder that does not exist.
    let l = one_error(
        "missing folder",
        &flatline(&[
            "synth",
            "--hours",
            "0.01",
            "--out",
            "/nonexistent/dir/x.flr",
        ]),
    );
    once("missing folder", &l, "/nonexistent/dir/x.flr");

    // A log that does not exist.
    let l = one_error(
        "missing log",
        &flatline(&["import", "/nonexistent.csv", "--out", &tmp("imported.flr")]),
    );
    once("missing log", &l, "/nonexistent.csv");

    // A flag that does not parse, and a bad alert expression: clap's line.
    let out = flatline(&["report", golden, "--bogus"]);
    assert_eq!(out.status.code(), Some(2));
    one_error("bad flag", &out);
    let out = flatline(&[
        "soak",
        "--seconds",
        "1",
        "--workload",
        "idle",
        "--alert",
        "frobnicate",
        "--out",
        &tmp("alert.flr"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    one_error("bad alert", &out);

    // A port that is taken.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let l = one_error(
        "busy port",
        &flatline(&[
            "soak",
            "--seconds",
            "1",
            "--workload",
            "idle",
            "--prometheus",
            &addr,
            "--out",
            &tmp("busy.flr"),
        ]),
    );
    once("busy port", &l, &addr);
    once("busy port", &l, "Address already in use");

    // A web config that names a missing certificate, and one whose user's
    // hash is not bcrypt: refused before anything starts.
    let web = |case: &str, yaml: &str, needle: &str| {
        let file = tmp(&format!("{case}.yml"));
        std::fs::write(&file, yaml).unwrap();
        let out_file = tmp(&format!("{case}.flr"));
        let l = one_error(
            case,
            &flatline(&[
                "soak",
                "--seconds",
                "1",
                "--workload",
                "idle",
                "--prometheus",
                "127.0.0.1:0",
                "--web-config",
                &file,
                "--out",
                &out_file,
            ]),
        );
        once(case, &l, &file);
        once(case, &l, needle);
        assert!(
            !std::path::Path::new(&out_file).exists(),
            "{case}: a file was left"
        );
    };
    web(
        "missing certificate",
        "tls_server_config:\n  cert_file: /nonexistent/c.pem\n  key_file: /nonexistent/k.pem\n",
        "/nonexistent/c.pem",
    );
    web(
        "not bcrypt",
        "basic_auth_users:\n  prom: hunter2\n",
        "prom: not a bcrypt hash",
    );
    web(
        "unknown key",
        "http_server_config: {}\n",
        "http_server_config",
    );
}
