//! `flatline watch -- COMMAND` reads what a job prints: steps, metrics and
//! markers from nanoGPT-, Hugging Face- and torchrun-style output, passed
//! through byte for byte. The printers are `tests/data/printers.py`.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::{flatline, report};

fn printers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/printers.py")
}

/// The printer run alone, and run under a headless watch: both outputs, and
/// the watch's JSON receipt.
fn watched(dir: &Path, mode: &str, n: &str, extra: &[&str]) -> (Output, Output, serde_json::Value) {
    let script = printers();
    let alone = Command::new("python3")
        .arg(&script)
        .args([mode, n])
        .output()
        .unwrap();
    assert!(alone.status.success());
    let out = dir.join(format!("{mode}.flr"));
    let mut args = vec![
        "watch",
        "--headless",
        "--hz",
        "20",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    args.extend(["--", "python3", script.to_str().unwrap(), mode, n]);
    let seen = flatline(&args);
    assert!(
        seen.status.success(),
        "exit {:?}: {}",
        seen.status.code(),
        String::from_utf8_lossy(&seen.stderr)
    );
    (alone, seen, report(&out))
}

/// The watch printed the command's bytes unchanged, then its own receipt.
fn passed_through(alone: &Output, seen: &Output) {
    assert!(
        seen.stdout.starts_with(&alone.stdout),
        "stdout changed: {} bytes alone, {} watched",
        alone.stdout.len(),
        seen.stdout.len()
    );
    assert_eq!(seen.stderr, alone.stderr, "stderr passes through unchanged");
}

fn channels(v: &serde_json::Value) -> Vec<String> {
    v["channels"].as_object().unwrap().keys().cloned().collect()
}

fn markers(v: &serde_json::Value) -> Vec<String> {
    v["events"]["markers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn nanogpt_output_gives_steps_metrics_and_markers() {
    let dir = tempfile::tempdir().unwrap();
    let (alone, seen, v) = watched(dir.path(), "nanogpt", "30", &[]);
    passed_through(&alone, &seen);
    let names = channels(&v);
    for c in [
        "log.loss",
        "log.time_ms",
        "log.mfu_pct",
        "log.step",
        "log.train_loss",
        "log.val_loss",
    ] {
        assert!(names.iter().any(|n| n == c), "{c} in {names:?}");
    }
    assert_eq!(v["channels"]["log.time_ms"]["unit"], "milliseconds");
    assert_eq!(v["channels"]["log.loss"]["last"], 0.1333, "4/30 as printed");
    // 30 iterations; an eval line repeats its iteration's step.
    assert_eq!(v["events"]["steps"], 30);
    assert_eq!(markers(&v), ["eval", "saving checkpoint to out"].repeat(3),);
    let text = String::from_utf8_lossy(&seen.stdout);
    assert!(
        text.contains("output: 37 lines, 36 with steps, metrics or markers"),
        "{text}"
    );
}

#[test]
fn hugging_face_output_and_a_tqdm_bar() {
    let dir = tempfile::tempdir().unwrap();
    let (alone, seen, v) = watched(dir.path(), "hf", "30", &[]);
    passed_through(&alone, &seen);
    assert!(alone.stderr.contains(&b'\r'), "the bar redraws with \\r");
    let names = channels(&v);
    for c in [
        "log.loss",
        "log.grad_norm",
        "log.learning_rate",
        "log.epoch",
        "log.eval_loss",
    ] {
        assert!(names.iter().any(|n| n == c), "{c} in {names:?}");
    }
    // The dicts carry no step, and the bar's redraws are not steps.
    assert_eq!(v["events"]["steps"], 0);
    assert!(!names.iter().any(|n| n == "log.step"));
    assert_eq!(v["channels"]["log.loss"]["samples"], 6);
    assert_eq!(
        markers(&v),
        ["Saving model checkpoint to out/checkpoint-30"]
    );
}

#[test]
fn torchrun_ranks_keep_their_own_channels() {
    let dir = tempfile::tempdir().unwrap();
    let (alone, seen, v) = watched(dir.path(), "torchrun", "20", &[]);
    passed_through(&alone, &seen);
    assert_eq!(v["channels"]["log.loss"]["last"], 3.0);
    assert_eq!(v["channels"]["log.rank1.loss"]["last"], 4.0);
    // Steps from rank 0 only.
    assert_eq!(v["events"]["steps"], 20);
}

#[test]
fn steps_from_none_reads_nothing_and_still_passes_through() {
    let dir = tempfile::tempdir().unwrap();
    let (alone, seen, v) = watched(dir.path(), "nanogpt", "10", &["--steps-from", "none"]);
    passed_through(&alone, &seen);
    assert!(!channels(&v).iter().any(|n| n.starts_with("log.")));
    assert_eq!(v["events"]["steps"], 0);
    let err = flatline(&[
        "watch",
        "--headless",
        "--pid",
        "1",
        "--steps-from",
        "stdout",
    ]);
    support::fails(
        &err,
        "read a started command's output: give the command after",
    );
}

#[test]
fn a_step_pattern_reads_a_format_nothing_else_does() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, plain) = watched(dir.path(), "custom", "20", &[]);
    assert_eq!(plain["events"]["steps"], 0, "not read without a pattern");
    let pattern = r"^\[(?P<step>\d+)/\d+\] L=(?P<loss>[0-9.]+) dt=(?P<dt>\S+)";
    let (alone, seen, v) = watched(
        dir.path(),
        "custom",
        "20",
        &["--force", "--step-pattern", pattern],
    );
    passed_through(&alone, &seen);
    assert_eq!(v["events"]["steps"], 20);
    assert_eq!(v["channels"]["log.loss"]["last"], 0.15);
    assert_eq!(v["channels"]["log.dt_ms"]["unit"], "milliseconds");
    let bad = flatline(&[
        "watch",
        "--headless",
        "--step-pattern",
        "(?P<step>",
        "--",
        "true",
    ]);
    assert_eq!(bad.status.code(), Some(2), "a bad pattern is a bad flag");
    let unnamed = flatline(&[
        "watch",
        "--headless",
        "--step-pattern",
        r"step (\d+)",
        "--",
        "true",
    ]);
    assert!(String::from_utf8_lossy(&unnamed.stderr).contains("no named group"));
}
