//! `flatline compare A B`: the receipts of two recordings side by side, on
//! the recordings shipped in `recordings/`.

mod support;

use std::path::Path;

use serde_json::Value;
use support::{fails, flatline, golden_v1, json, ok, recording};

fn compare(a: &Path, b: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["compare", a.to_str().unwrap(), b.to_str().unwrap()];
    args.extend_from_slice(extra);
    flatline(&args)
}

fn compare_json(a: &Path, b: &Path) -> Value {
    json(&compare(a, b, &["--format", "json"]))
}

#[test]
fn a_recording_against_itself_differs_nowhere() {
    let soak = recording("sample-soak-both-60s.flr");
    let v = compare_json(&soak, &soak);
    assert_eq!(v["differences"], 0, "{}", v["headline"]);
    let channels = v["channels"].as_object().unwrap();
    assert!(channels.len() > 20);
    for (name, c) in channels {
        assert_eq!(c["in"], "both", "{name}");
        assert_eq!(c["differs"], false, "{name}");
        assert_eq!(c["diff"]["verdict_changed"], false, "{name}");
        for field in ["baseline", "final", "drift", "slope_per_s"] {
            let d = &c["diff"][field];
            assert!(
                d.is_null() || d.as_f64() == Some(0.0),
                "{name}.{field} = {d}"
            );
        }
    }
    assert_eq!(v["a"]["digest"], v["b"]["digest"]);
    // Both sides paced ingest, so they line up by step.
    assert_eq!(v["align"], "step");
}

/// The arena's loader against the allocating one it replaces: the shipped
/// 60 s soaks of `--workload ingest` and `--workload ingest-baseline`.
#[test]
fn the_arena_allocates_nothing_where_the_baseline_allocates_thousands_a_second() {
    let arena = recording("ingest-arena-60s.flr");
    let baseline = recording("ingest-baseline-60s.flr");
    let v = compare_json(&arena, &baseline);
    let rate = &v["channels"]["alloc.rate"];
    let (a, b) = (
        rate["a"]["final"].as_f64().unwrap(),
        rate["b"]["final"].as_f64().unwrap(),
    );
    assert!(a < 1.0, "the arena makes {a} allocation calls a second");
    assert!(b >= 1000.0, "the baseline makes only {b} a second");
    // Per step (one batch of 64 samples), the baseline's ~140 calls.
    let per_step = v["channels"]["alloc.count"]["b"]["drift_per_step"]
        .as_f64()
        .unwrap();
    assert!(
        (100.0..200.0).contains(&per_step),
        "{per_step} calls a step"
    );
    assert_eq!(v["channels"]["alloc.count"]["a"]["drift_per_step"], 0.0);
    // The headline names the difference, and which side is flat.
    let headline = v["headline"].as_str().unwrap();
    assert!(headline.contains("in A and"), "{headline}");
    assert!(headline.starts_with("Memory is flat in both"), "{headline}");
    assert_eq!(v["a"]["config"]["workload"], "ingest");
    assert_eq!(v["b"]["config"]["workload"], "ingest-baseline");
}

#[test]
fn different_versions_and_channel_sets_compare_without_error() {
    // Format v1 against v2, and a soak against an imported step log: the
    // channels one side lacks are listed as such.
    let v = compare_json(&golden_v1(), &recording("golden/v2.flr"));
    assert_eq!(v["a"]["format_version"], 1);
    assert_eq!(v["b"]["format_version"], 2);
    let v = json(&compare(
        &golden_v1(),
        &recording("golden/v2.flr"),
        &["--format", "json", "--align", "tokens"],
    ));
    assert_eq!(v["align"], "tokens");
    assert!(v["align_note"].is_null());
    assert!(v["channels"]["mem.rss"]["a"]["drift_per_token"].is_number());
    let v = compare_json(
        &recording("sample-soak-both-60s.flr"),
        &recording("seed-linux-10min.flr"),
    );
    let channels = v["channels"].as_object().unwrap();
    assert_eq!(channels["mem.rss"]["in"], "a");
    assert!(channels["mem.rss"]["b"].is_null());
    let b_only: Vec<&String> = channels
        .iter()
        .filter(|(_, c)| c["in"] == "b")
        .map(|(n, _)| n)
        .collect();
    assert!(b_only.iter().all(|n| n.starts_with("log.")), "{b_only:?}");
    assert!(!b_only.is_empty());
    // One counts tokens, the other not: asked for tokens, it says why it
    // used time.
    let o = compare(
        &recording("sample-soak-both-60s.flr"),
        &recording("seed-linux-10min.flr"),
        &["--format", "json", "--align", "tokens"],
    );
    let v = json(&o);
    assert_eq!(v["align"], "time");
    assert_eq!(v["align_note"], "B has no tokens: aligned by time");
    let v = compare_json(&golden_v1(), &recording("golden/v2.flr"));
    assert_eq!(v["align"], "step");
}

#[test]
fn text_and_markdown_name_both_sides() {
    let a = recording("ingest-arena-60s.flr");
    let b = recording("ingest-baseline-60s.flr");
    let digest = |p: &Path| {
        support::report(p)["recording"]["digest"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (da, db) = (digest(&a), digest(&b));
    for format in ["text", "md"] {
        let out = ok(&compare(&a, &b, &["--format", format]));
        assert!(out.contains(&da) && out.contains(&db), "{format}: digests");
        assert!(out.contains("alloc.count"), "{format}");
        // Three lines a channel: A, B, and B against A.
        let b_minus_a = out
            .lines()
            .filter(|l| l.contains("B−A") || l.contains("B − A"));
        assert!(b_minus_a.count() > 10, "{format}");
    }
    let md = ok(&compare(&a, &b, &["--format", "md"]));
    assert!(md.starts_with("# Comparison: `ingest-arena-60s.flr` (A)"));
    assert!(md.contains("| `alloc.count` (counter) | A |"), "{md}");
}

#[test]
fn a_damaged_side_compares_what_it_has_with_report_s_warning() {
    let dir = tempfile::tempdir().unwrap();
    let src = recording("sample-soak-both-60s.flr");
    let bytes = std::fs::read(&src).unwrap();
    let cut = dir.path().join("cut.flr");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let o = compare(&src, &cut, &["--format", "json"]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let report = flatline(&["report", cut.to_str().unwrap(), "--format", "json"]);
    assert_eq!(
        err,
        String::from_utf8_lossy(&report.stderr),
        "the same warning"
    );
    assert!(err.contains("truncated"), "{err}");
    let v = json(&o);
    assert_eq!(v["b"]["truncated"], true);
    assert!(v["b"]["duration_s"].as_f64().unwrap() < v["a"]["duration_s"].as_f64().unwrap());
}

#[test]
fn a_missing_side_is_one_error() {
    fails(
        &compare(
            &golden_v1(),
            Path::new("/nonexistent/b.flr"),
            &["--format", "text"],
        ),
        "No such file",
    );
}

/// A leak and its fix (`recordings/watch-sites-pair-*.flr`, watched with
/// `--sites`): every surface names the line that stopped growing, in its
/// first sentence; the other way round, the line that started; a side
/// without sites says why lines are not compared.
#[test]
fn compare_by_site_names_the_line_that_stopped_growing() {
    let leak = recording("watch-sites-pair-leak.flr");
    let fixed = recording("watch-sites-pair-fixed.flr");
    let v = compare_json(&leak, &fixed);
    let line = &v["sites"][0];
    assert_eq!(line["change"], "stopped", "{line}");
    assert_eq!(line["code"], "cache.append(bytearray(64 << 10))");
    let place = format!("sites_pair.py:{}", line["line"]);
    let rate = line["a"]["growth_per_s"].as_f64().unwrap();
    assert!((rate / 1_310_720.0 - 1.0).abs() < 0.3, "{rate}");
    assert!(!line["b"]["verdict"].as_str().unwrap().is_empty());
    let said = format!("{place} no longer grows in B (");
    let headline = v["headline"].as_str().unwrap();
    assert!(headline.contains(&said), "{headline}");
    for format in ["text", "md"] {
        let out = ok(&compare(&leak, &fixed, &["--format", format]));
        let first = out.lines().find(|l| !l.starts_with('#') && !l.is_empty());
        assert!(first.unwrap().contains(&said), "{format}: {out:.400}");
        assert!(out.contains("By line of code:"), "{format}");
        // The site's counts are for heap profiles, not rows here.
        assert!(!out.contains("site0.allocs"), "{format}");
    }
    let back = compare_json(&fixed, &leak);
    assert_eq!(back["sites"][0]["change"], "started");
    let started = format!("{place} grows ");
    assert!(back["headline"].as_str().unwrap().contains(&started));
    // One side without sites: no line is called fixed.
    let plain = recording("watch-torch-leak-45s.flr");
    let v = compare_json(&leak, &plain);
    assert_eq!(v["sites"].as_array().unwrap().len(), 0);
    let note = v["sites_note"].as_str().unwrap();
    assert!(note.starts_with("B has no allocation sites"), "{note}");
    assert!(!v["headline"].as_str().unwrap().contains("no longer grows"));
}
