//! The command line as a user meets it: exit codes, JSON shapes, error lines.

mod support;

use support::{flatline, json, ops1b_with_telemetry};

#[test]
fn ops1b_json_has_the_documented_fields() {
    let v = json(&flatline(&[
        "bench",
        "ops1b",
        "--ops",
        "300000000",
        "--json",
    ]));
    assert_eq!(v["workload"], "ops1b");
    assert_eq!(v["ops"], 300_000_000u64);
    assert_eq!(v["checksum"], 7_851_891_676u64);
    assert_eq!(
        v["heap_allocs"], 0,
        "the binary installs the counting allocator"
    );
    for key in ["elapsed_ns", "ns_per_op", "mops_per_s"] {
        assert!(
            v[key].as_f64().is_some_and(|x| x > 0.0),
            "{key}: {}",
            v[key]
        );
    }
}

/// The hot-field layout runs the same operations: the same checksum, no
/// allocation, and the JSON says which layout ran.
#[test]
fn ops1b_runs_either_layout_with_the_same_answer() {
    for layout in ["aos", "soa"] {
        let v = json(&flatline(&[
            "bench",
            "ops1b",
            "--ops",
            "300000000",
            "--layout",
            layout,
            "--json",
        ]));
        assert_eq!(v["layout"], layout);
        assert_eq!(v["checksum"], 7_851_891_676u64, "{layout}");
        assert_eq!(v["heap_allocs"], 0, "{layout}");
    }
    let out = flatline(&["bench", "ops1b", "--layout", "columns"]);
    assert_eq!(out.status.code(), Some(2), "a bad layout is a usage error");
}

#[test]
fn ingest_json_has_the_documented_fields() {
    let v = json(&flatline(&[
        "bench",
        "ingest",
        "--batch",
        "8",
        "--block",
        "32",
        "--corpus-tokens",
        "10000",
        "--iters",
        "300",
        "--warmup",
        "10",
        "--json",
    ]));
    assert_eq!(v["workload"], "ingest");
    assert_eq!(
        (v["batch"].as_u64(), v["block"].as_u64()),
        (Some(8), Some(32))
    );
    assert_eq!(
        (v["corpus_tokens"].as_u64(), v["iters"].as_u64()),
        (Some(10_000), Some(300))
    );
    assert_eq!(v["allocs_per_batch"], 0.0);
    let p = |o: &serde_json::Value, k: &str| o[k].as_u64().unwrap_or_else(|| panic!("{k} in {o}"));
    assert!(p(&v, "fill_ns_p50") <= p(&v, "fill_ns_p95"));
    assert!(p(&v, "fill_ns_p95") <= p(&v, "fill_ns_p99"));
    // The write-only floor is measured in the same run, beside the fill.
    assert!(p(&v, "floor_ns_p50") <= p(&v, "floor_ns_p99"));
    let base = &v["baseline"];
    assert!(p(base, "fill_ns_p50") > 0);
    assert!(base["allocs_per_batch"].as_f64().unwrap() >= 18.0, "{base}");

    let v = json(&flatline(&[
        "bench",
        "ingest",
        "--batch",
        "4",
        "--block",
        "16",
        "--corpus-tokens",
        "1000",
        "--iters",
        "10",
        "--no-baseline",
        "--json",
    ]));
    assert!(v["baseline"].is_null());
    assert!(v["pipelined"].is_null() && v["huge_page_bytes"].is_null());
    let plain = &v["plain"];
    assert!(p(plain, "fill_ns_p50") <= p(plain, "fill_ns_p99"));
    assert_eq!(plain["allocs_per_batch"], 0.0);

    // Pipelined, over a corpus asked for huge pages.
    let v = json(&flatline(&[
        "bench",
        "ingest",
        "--batch",
        "4",
        "--block",
        "16",
        "--corpus-tokens",
        "100000",
        "--iters",
        "200",
        "--warmup",
        "10",
        "--no-baseline",
        "--pipelined",
        "--step-us",
        "5",
        "--huge-pages",
        "--json",
    ]));
    let pl = &v["pipelined"];
    assert_eq!(pl["step_ns"], 5000);
    assert!(p(pl, "handoff_ns_p50") <= p(pl, "handoff_ns_p95"));
    assert!(p(pl, "handoff_ns_p95") <= p(pl, "handoff_ns_p99"));
    assert!(p(pl, "fill_ns_p50") > 0);
    assert_eq!(pl["consumer_allocs_per_batch"], 0.0);
    assert_eq!(pl["producer_allocs_per_batch"], 0.0);
    assert!(v["huge_page_bytes"].is_u64(), "{v}");
    // --step-us belongs to --pipelined; --huge-pages to a generated corpus.
    for bad in [
        &["bench", "ingest", "--step-us", "5"][..],
        &["bench", "ingest", "--huge-pages", "--corpus", "x.bin"][..],
    ] {
        assert_eq!(flatline(bad).status.code(), Some(2), "{bad:?}");
    }
}

#[test]
fn ingest_reads_a_token_file() {
    let dir = std::env::temp_dir().join(format!("flatline-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("train.bin");
    let bytes: Vec<u8> = (0..5_000u16).flat_map(|t| t.to_le_bytes()).collect();
    std::fs::write(&path, bytes).unwrap();
    let v = json(&flatline(&[
        "bench",
        "ingest",
        "--corpus",
        path.to_str().unwrap(),
        "--batch",
        "4",
        "--block",
        "64",
        "--iters",
        "50",
        "--json",
    ]));
    assert_eq!(v["corpus_tokens"], 5_000);
    assert_eq!(v["corpus"]["file"]["path"], path.to_str().unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn human_output_names_the_ratio_and_the_known_answer() {
    let out = flatline(&["bench", "ops1b", "--ops", "300000000"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success());
    assert!(
        text.contains("checksum 7,851,891,676 (the known answer)"),
        "{text}"
    );
    let out = flatline(&[
        "bench",
        "ingest",
        "--corpus-tokens",
        "20000",
        "--iters",
        "100",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("baseline / arena at p50:"), "{text}");
}

#[test]
fn bad_input_is_one_clear_line_and_a_non_zero_exit() {
    let out = flatline(&["bench", "ingest", "--corpus", "/nonexistent/train.bin"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("/nonexistent/train.bin") && err.contains("No such file"),
        "{err}"
    );
    assert!(out.stdout.is_empty());

    let out = flatline(&[
        "bench",
        "ingest",
        "--corpus-tokens",
        "100",
        "--block",
        "256",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("the corpus has 100 tokens"), "{err}");

    let out = flatline(&["bench", "ops1b", "--ops", "lots"]);
    assert_eq!(out.status.code(), Some(2), "clap's usage error");
    assert!(
        String::from_utf8(out.stderr)
            .unwrap()
            .contains("invalid value 'lots'")
    );
}

#[test]
fn bench_with_telemetry_reports_what_the_sampler_saw() {
    // Enough ticks for the sampler's steady state (it is judged after its 5th),
    // however fast the machine gets through the operations.
    let (v, ops) = ops1b_with_telemetry(200.0, 20);
    let plain = json(&flatline(&[
        "bench",
        "ops1b",
        "--ops",
        &ops.to_string(),
        "--json",
    ]));
    assert_eq!(
        v["checksum"], plain["checksum"],
        "telemetry does not change the work"
    );
    assert_eq!(v["heap_allocs"], 0);
    let t = &v["telemetry"];
    assert_eq!(t["hz"], 200.0);
    assert!(t["samples"].as_u64().unwrap() >= 20, "{t}");
    assert!(t["channels"].as_u64().unwrap() >= 20, "{t}");
    assert_eq!(t["dropped"], 0, "a draining sink loses nothing");
    assert_eq!(t["sampler_steady_allocs"], 0.0, "{t}");
    if let Some(reason) = t["unavailable"]["gpu"].as_str() {
        assert!(reason.starts_with("NVML"), "{reason}");
    }
    assert!(plain["telemetry"].is_null(), "off by default");
}

/// `report --fail-on` is a CI gate: exit 3 when a level channel has a named
/// verdict (growth only, for linear), 0 otherwise, 2 for a verdict a level
/// channel cannot have; the receipt is printed either way.
#[test]
fn report_fail_on_gates_on_growth() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("steps.csv");
    // 2 MiB a step for 300 steps in rss_mb; cache_mb flat; freed_mb shrinks.
    let mut text = String::from("step,elapsed_s,rss_mb,cache_mb,freed_mb\n");
    for i in 0..300 {
        let wobble = [0.0, 0.3, -0.2, 0.1][i % 4];
        text += &format!(
            "{i},{}.0,{},{},{}\n",
            i,
            1000.0 + 2.0 * i as f64 + wobble,
            500.0 + wobble,
            5000.0 - 3.0 * i as f64
        );
    }
    std::fs::write(&csv, text).unwrap();
    let rec = dir.path().join("steps.flr");
    let imported = support::import(&csv, &rec);
    assert!(imported.status.success(), "{imported:?}");
    let rec = rec.to_str().unwrap();

    let gate = |extra: &[&str]| {
        let mut args = vec!["report", rec, "--format", "json"];
        args.extend_from_slice(extra);
        flatline(&args)
    };
    let failed = gate(&["--fail-on", "linear,staircase"]);
    assert_eq!(failed.status.code(), Some(3), "{failed:?}");
    let err = String::from_utf8_lossy(&failed.stderr);
    assert!(err.contains("log.rss_mb (linear)"), "{err}");
    let matched = err.split("(checked").next().unwrap();
    assert!(
        !matched.contains("freed_mb"),
        "shrinking memory fails nothing: {err}"
    );
    // The receipt is still printed in full.
    let v: serde_json::Value = serde_json::from_slice(&failed.stdout).unwrap();
    assert_eq!(v["channels"]["log.rss_mb"]["verdict"], "linear");
    assert_eq!(v["channels"]["log.freed_mb"]["verdict"], "linear");

    let only_cache = gate(&["--fail-on", "linear", "--channels", "log.cache*"]);
    assert_eq!(only_cache.status.code(), Some(0), "{only_cache:?}");
    let flat = gate(&["--fail-on", "flat", "--channels", "log.cache*,mem.*"]);
    assert_eq!(flat.status.code(), Some(3), "{flat:?}");
    assert!(String::from_utf8_lossy(&flat.stderr).contains("log.cache_mb (flat)"));

    let bad = gate(&["--fail-on", "rising"]);
    assert_eq!(bad.status.code(), Some(2), "a counter's verdict: {bad:?}");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a level channel's verdict"));
    let orphan = gate(&["--channels", "mem.*"]);
    assert_eq!(orphan.status.code(), Some(2), "--channels needs --fail-on");

    // The gate names what it checked, and what matched.
    assert!(
        err.contains(
            "--fail-on linear,staircase: 1 of 3 level channels matched: log.rss_mb (linear)"
        ),
        "{err}"
    );
    assert!(
        err.contains("(checked: log.rss_mb, log.cache_mb, log.freed_mb)"),
        "{err}"
    );
    let passed = String::from_utf8_lossy(&only_cache.stderr);
    assert!(
        passed
            .contains("--fail-on linear: none of 1 level channel matched (checked: log.cache_mb)"),
        "{passed}"
    );
}

/// A gate that selects nothing fails closed: a typo'd `--channels` on a
/// recording with a leak exits 2, naming the channels there are, before the
/// receipt is printed; so does a glob that selects no level channel (the
/// only kind `--fail-on` judges). A glob of a list that selects nothing
/// while the others select something is warned of.
#[test]
fn a_gate_that_selects_nothing_is_a_bad_flag() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("leak.csv");
    let mut text = String::from("step,elapsed_s,rss_mb,cache_mb\n");
    for i in 0..300 {
        let wobble = [0.0, 0.3, -0.2, 0.1][i % 4];
        text += &format!(
            "{i},{i}.0,{},{}\n",
            1000.0 + 8.0 * i as f64 + wobble,
            500.0 + wobble
        );
    }
    std::fs::write(&csv, text).unwrap();
    let rec = dir.path().join("leak.flr");
    assert!(support::import(&csv, &rec).status.success());
    let rec = rec.to_str().unwrap();
    let gate =
        |channels: &str| flatline(&["report", rec, "--fail-on", "linear", "--channels", channels]);
    // Without the typo the gate fails on the leak.
    assert_eq!(gate("log.rss*").status.code(), Some(3));
    for (channels, says) in [
        (
            "log.rss",
            "--channels 'log.rss' selects no channel; the recording has 3: log.rss_mb, log.step, log.cache_mb",
        ),
        (
            "mem.rs,tree.*",
            "--channels 'mem.rs','tree.*' selects no channel; the recording has 3: log.rss_mb, log.step, log.cache_mb",
        ),
        (
            "log.step",
            "--channels 'log.step' selects no level channel (--fail-on judges levels only); the recording's levels are 2: log.rss_mb, log.cache_mb",
        ),
    ] {
        let o = gate(channels);
        assert_eq!(o.status.code(), Some(2), "{channels}: {o:?}");
        assert!(o.stdout.is_empty(), "{channels}: a receipt was printed");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("flatline: error: "), "{err}");
        assert!(err.contains(says), "{channels}: {err}");
    }
    // A list shared by recordings of several kinds gates on what it
    // selects, and says what selected nothing.
    let o = gate("log.rss_mb,gpu*.used");
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("warning: --channels 'gpu*.used' selects no channel of this recording"),
        "{err}"
    );
}

/// An `--alert` whose channel no stream can ever have (`mem.rs` for
/// `mem.rss`) is refused as a bad flag before anything starts, naming the
/// channels there can be, nearest first; a per-process or printed channel
/// that joins later is taken.
#[test]
fn an_alert_on_no_channel_is_refused_before_the_command_starts() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    let out = dir.path().join("w.flr");
    let o = flatline(&[
        "watch",
        "--headless",
        "--out",
        out.to_str().unwrap(),
        "--alert",
        "mem.rs > 1GiB",
        "--",
        "touch",
        marker.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("'mem.rs' names no channel a stream can have"),
        "{err}"
    );
    assert!(err.contains(": mem.rss, mem.rss_anon, "), "{err}");
    assert!(!marker.exists(), "the command was started");
    assert!(!out.exists(), "a recording was made");
    // Names that join later parse: a process's, a GPU's, a printed key's.
    for ok in ["pid*.pss > 1GiB", "gpu1.used > 1GiB", "log.loss > 3"] {
        let o = flatline(&[
            "watch",
            "--headless",
            "--alert",
            ok,
            "--pid",
            "0",
            "--seconds",
            "x",
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("names no channel"), "{ok}: {err}");
    }
}

/// `report --from/--to` analyses a part of the run: the receipt says which,
/// counts only its samples, and a part that is not there is an error.
#[test]
fn report_analyses_a_part_of_the_run() {
    let g = support::golden_v1();
    let g = g.to_str().unwrap();
    let whole = json(&flatline(&["report", g, "--format", "json"]));
    assert!(whole["range"].is_null());
    let part = json(&flatline(&[
        "report", g, "--format", "json", "--from", "1", "--to", "2",
    ]));
    let (from, to) = (
        part["range"]["from_s"].as_f64().unwrap(),
        part["range"]["to_s"].as_f64().unwrap(),
    );
    assert!(
        (1.0..1.1).contains(&from) && (1.9..=2.0).contains(&to),
        "{from}..{to}"
    );
    let n = |v: &serde_json::Value| v["channels"]["mem.rss"]["samples"].as_u64().unwrap();
    // 20 Hz: about 20 samples in the second, out of 61.
    assert!((18..=22).contains(&n(&part)), "{}", n(&part));
    assert_eq!(n(&whole), 61);
    let text = support::ok(&flatline(&["report", g, "--from", "1.5"]));
    assert!(text.contains("part analysed: 1.5 s to 3.0 s"), "{text}");
    for (args, needle) in [
        (&["--from", "2", "--to", "1"][..], "is not before --to"),
        (&["--from", "99"][..], "past the end"),
    ] {
        let mut all = vec!["report", g];
        all.extend_from_slice(args);
        support::fails(&flatline(&all), needle);
    }
}

/// A job's step counter that wrapped (`-1` printed unsigned) is not the
/// number of steps it took: the receipt counts the steps that are counts.
#[test]
fn a_wrapped_step_counter_is_not_counted() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("wrapped.csv");
    std::fs::write(
        &csv,
        "step,rss_mb\n0,10\n1,11\n2,12\n18446744073709551615,13\n",
    )
    .unwrap();
    let rec = dir.path().join("wrapped.flr");
    assert!(support::import(&csv, &rec).status.success());
    let text = support::ok(&flatline(&["report", rec.to_str().unwrap()]));
    assert!(!text.contains("18,446,744"), "{text}");
    assert!(text.contains("training 2 steps"), "{text}");
    let v = support::report(&rec);
    assert_eq!(v["events"]["steps"], 3, "{}", v["events"]);
}

/// `export --csv -` writes the CSV to standard output (its summary to
/// stderr), not to a file named `-`.
#[test]
fn export_to_dash_writes_standard_output() {
    let dir = tempfile::tempdir().unwrap();
    let g = support::golden_v1();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_flatline"))
        .args(["export", g.to_str().unwrap(), "--csv", "-"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let csv = support::ok(&o);
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("t_s,"), "{}", lines[0]);
    assert_eq!(lines.len(), 62, "a header and the 61 samples");
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("wrote 61 rows of 34 channels to standard output")
    );
    assert!(!dir.path().join("-").exists(), "a file named - was written");
}

/// A sampling rate too slow to sample (`1e-9` Hz: one sample in 32 years)
/// is a bad flag, as one too fast is.
#[test]
fn a_rate_too_slow_to_sample_is_a_bad_flag() {
    for args in [
        &["watch", "--pid", "1", "--hz", "1e-9"][..],
        &["soak", "--seconds", "1", "--hz", "0.001"],
        &["soak", "--seconds", "1", "--hz", "10001"],
        &["bench", "ops1b", "--telemetry-hz", "1e-9"],
    ] {
        let o = flatline(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("0.01 to 10000 a second"), "{args:?}: {err}");
    }
}

/// An error about a number given on the command line says it back short:
/// `--from 1e308`, not its 309 digits.
#[test]
fn a_huge_number_is_said_back_short() {
    let g = support::golden_v1();
    let g = g.to_str().unwrap();
    for (args, says) in [
        (
            &["report", g, "--from", "1e308"][..],
            "--from 1e308 is past the end",
        ),
        (
            &["report", g, "--from", "1e308", "--to", "5"],
            "--from 1e308 is not before --to 5",
        ),
        (
            &["export", g, "--csv", "-", "--from", "1e308", "--to", "1"],
            "--from 1e308 is after --to 1",
        ),
    ] {
        let o = flatline(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(err.len() < 200, "{args:?}: {err}");
    }
}
