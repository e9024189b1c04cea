//! A damaged recording says so before any verdict, and a gate fails on it
//! unless told to judge what could be read.

mod support;

use std::path::Path;

use support::{flatline, recording};

/// Start and length of every stored frame of a v4 file.
fn v4_frames(bytes: &[u8]) -> Vec<(usize, usize)> {
    let (mut at, mut out) = (12, Vec::new());
    while at + 8 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        out.push((at, 8 + len));
        at += 8 + len;
    }
    out
}

fn report_of(path: &Path, format: &str) -> String {
    let o = flatline(&["report", path.to_str().unwrap(), "--format", format]);
    assert!(o.status.success(), "{o:?}");
    String::from_utf8(o.stdout).unwrap()
}

fn gate(path: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let mut args = vec![
        "report",
        path.to_str().unwrap(),
        "--fail-on",
        "linear,staircase",
    ];
    args.extend_from_slice(extra);
    let o = flatline(&args);
    (o.status.code(), String::from_utf8_lossy(&o.stderr).into())
}

#[test]
fn one_flipped_bit_costs_one_frame_and_the_gate_says_damaged() {
    let src = recording("watch-torch-leak-45s.flr");
    let mut bytes = std::fs::read(&src).unwrap();
    let frames = v4_frames(&bytes);
    let (start, len) = frames[frames.len() / 2];
    bytes[start + len / 2] ^= 0x08;
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("leak-flipped.flr");
    std::fs::write(&bad, &bytes).unwrap();

    let whole: serde_json::Value = serde_json::from_str(&report_of(&src, "json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&report_of(&bad, "json")).unwrap();
    let r = &v["recording"];
    assert_eq!(r["damaged"], true, "{r:#}");
    let losses = r["losses"].as_array().unwrap();
    assert_eq!(losses.len(), 1, "{losses:?}");
    assert_eq!(losses[0]["offset"], start as u64);
    assert_eq!(losses[0]["bytes"], len as u64);
    // The footer counts the samples: the loss knows what it took, and the
    // rest of the file was read.
    let lost = losses[0]["samples"].as_u64().unwrap();
    assert_eq!(
        r["samples"].as_u64().unwrap() + lost,
        whole["recording"]["samples"].as_u64().unwrap()
    );
    assert!(v["findings"][0]["kind"] == "damage", "{:#}", v["findings"]);
    // Samples were lost: said before any verdict.
    let headline = v["headline"].as_str().unwrap();
    assert!(
        headline.starts_with("Read ")
            && headline.contains("6 samples lost. python 11315 (main) grows"),
        "{headline}"
    );
    // The leak is still found in what was read.
    assert_eq!(v["growing"], whole["growing"]);

    let (code, err) = gate(&bad, &[]);
    assert_eq!(code, Some(4), "{err}");
    assert!(
        err.contains("damaged") && err.contains("--allow-damaged"),
        "{err}"
    );
    let (code, err) = gate(&bad, &["--allow-damaged"]);
    assert_eq!(code, Some(3), "the leak, judged on what was read: {err}");
    // The whole file: the leak, exit 3, as before.
    assert_eq!(gate(&src, &[]).0, Some(3));
    // A flat recording, damaged, fails closed too.
    let flat = recording("watch-torch-flat-45s.flr");
    let mut b = std::fs::read(&flat).unwrap();
    let (s, l) = v4_frames(&b)[3];
    b[s + l - 1] ^= 1;
    let bad_flat = dir.path().join("flat-flipped.flr");
    std::fs::write(&bad_flat, &b).unwrap();
    assert_eq!(gate(&flat, &[]).0, Some(0));
    assert_eq!(gate(&bad_flat, &[]).0, Some(4));
    assert_eq!(gate(&bad_flat, &["--allow-damaged"]).0, Some(0));
}

/// Overwrites the stored frames from a third to two thirds of the file.
fn hole(bytes: &mut [u8], frames: &[(usize, usize)]) {
    let n = frames.len();
    let (from, _) = frames[n / 3];
    let (to, _) = frames[2 * n / 3];
    for b in &mut bytes[from..to] {
        *b = 0x5a;
    }
}

/// Start and length of every stored frame of a v5 file.
fn v5_frames(bytes: &[u8]) -> Vec<(usize, usize)> {
    let (mut at, mut out) = (12, Vec::new());
    while at + 20 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        out.push((at, 20 + len));
        at += 20 + len;
    }
    out
}

#[test]
fn damage_that_costs_seconds_is_the_first_words_of_every_receipt() {
    let dir = tempfile::tempdir().unwrap();
    // A v5 file: the hole costs what it covered, and the end is read.
    let src = dir.path().join("synth.flr");
    let o = flatline(&[
        "synth",
        "--hours",
        "0.05",
        "--hz",
        "10",
        "--channels",
        "6",
        "--out",
        src.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{o:?}");
    let mut bytes = std::fs::read(&src).unwrap();
    let frames = v5_frames(&bytes);
    // The samples written before a frame, from its head.
    let at = |k: usize| {
        let s = frames[k].0;
        u64::from_le_bytes(bytes[s + 12..s + 20].try_into().unwrap())
    };
    let held = at(2 * frames.len() / 3) - at(frames.len() / 3);
    hole(&mut bytes, &frames);
    let bad = dir.path().join("synth-holed.flr");
    std::fs::write(&bad, &bytes).unwrap();
    let v: serde_json::Value = serde_json::from_str(&report_of(&bad, "json")).unwrap();
    let headline = v["headline"].as_str().unwrap();
    assert!(headline.starts_with("Read "), "{headline}");
    assert!(
        headline.contains("of a 180.0 s recording: damaged at byte"),
        "{headline}"
    );
    let text = report_of(&bad, "text");
    let first = text.lines().next().unwrap();
    assert!(first.contains(headline), "{first}");
    assert!(report_of(&bad, "md").contains(headline));
    let r = &v["recording"];
    let losses = r["losses"].as_array().unwrap();
    assert_eq!(losses.len(), 1, "{r:#}");
    let lost = losses[0]["samples"].as_u64().unwrap();
    assert_eq!(lost, held, "the samples the overwritten frames held");
    assert!(lost > 300, "{lost}");
    assert!(r["end"].is_string(), "the footer was read: {r:#}");

    // A v3 file: a damaged length ends an old file there, and the
    // headline says how much was read.
    let old = recording("watch-torch-flat-45s.flr");
    let mut bytes = std::fs::read(&old).unwrap();
    let frames = v4_frames(&bytes);
    hole(&mut bytes, &frames);
    let bad = dir.path().join("flat-holed.flr");
    std::fs::write(&bad, &bytes).unwrap();
    let v: serde_json::Value = serde_json::from_str(&report_of(&bad, "json")).unwrap();
    let headline = v["headline"].as_str().unwrap();
    assert!(headline.starts_with("Read "), "{headline}");
    assert_eq!(v["recording"]["damaged"], true);
}

#[test]
fn a_damaged_v5_file_reads_on_and_keeps_every_channel() {
    let src = recording("golden/v5.flr");
    let bytes = std::fs::read(&src).unwrap();
    let whole: serde_json::Value = serde_json::from_str(&report_of(&src, "json")).unwrap();
    // Every 97th byte damaged, one at a time: never an error, never a
    // channel lost, never more than a frame's samples.
    for i in (12..bytes.len()).step_by(97) {
        let mut b = bytes.clone();
        b[i] ^= 0x21;
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("v5.flr");
        std::fs::write(&bad, &b).unwrap();
        let v: serde_json::Value = serde_json::from_str(&report_of(&bad, "json")).unwrap();
        assert_eq!(
            v["channels"].as_object().unwrap().len(),
            whole["channels"].as_object().unwrap().len(),
            "byte {i}"
        );
        let lost = whole["recording"]["samples"].as_u64().unwrap()
            - v["recording"]["samples"].as_u64().unwrap();
        assert!(lost <= 40, "byte {i}: {lost} samples lost");
    }
}
