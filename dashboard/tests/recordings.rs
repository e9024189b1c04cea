//! soak, report, import and export, as a user runs them.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use support::{fails, flatline, golden_v1, ok, ops1b_with_telemetry, report, wait_for};

#[test]
fn a_soak_writes_a_recording_and_prints_its_receipt() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("soak.flr");
    let o = out.to_str().unwrap();
    let text = ok(&flatline(&[
        "soak",
        "--seconds",
        "1.5",
        "--workload",
        "idle",
        "--hz",
        "50",
        "--out",
        o,
    ]));
    assert!(
        text.contains("digest sha256:") && text.contains("mem.rss"),
        "{text}"
    );
    assert!(text.contains("per hour at 50 Hz"), "{text}");
    let v = report(&out);
    let r = &v["recording"];
    assert_eq!(
        r["format_version"],
        flatline_telemetry::recording::FORMAT_VERSION
    );
    assert_eq!(r["truncated"], false);
    assert_eq!(r["end"], "completed");
    assert_eq!(r["digest"].as_str().unwrap().len(), 64);
    let samples = r["samples"].as_u64().unwrap();
    // The sampler runs through the whole 1.5 s (and while the file is set up and
    // finished); its count follows its own clock: never more ticks than the
    // recording's span allows at 50 Hz, and at most half skipped even when the
    // machine is busy enough to make it late.
    let span = r["duration_s"].as_f64().unwrap();
    assert!(span >= 1.45, "a soak of 1.5 s spans {span} s");
    let ticks = span * 50.0 + 1.0;
    assert!(
        samples as f64 <= ticks + 0.5 && samples as f64 >= ticks / 2.0,
        "{samples} samples over {span} s at 50 Hz"
    );
    let rss = &v["channels"]["mem.rss"];
    assert_eq!(rss["unit"], "bytes");
    assert_eq!(rss["samples"].as_u64(), Some(samples));
    assert!(rss["min"].as_f64().unwrap() > 1e6 && rss["max"].as_f64() >= rss["min"].as_f64());
    assert!(v["host"]["cores"].as_u64().unwrap() >= 1);
    assert!(v["unavailable"].is_object());

    // Never a silent overwrite; --force overwrites.
    fails(
        &flatline(&["soak", "--seconds", "1", "--out", o]),
        "already exists",
    );
    ok(&flatline(&[
        "soak",
        "--seconds",
        "0.5",
        "--workload",
        "idle",
        "--out",
        o,
        "--force",
    ]));
    let missing = dir.path().join("nope/soak.flr");
    fails(
        &flatline(&["soak", "--seconds", "1", "--out", missing.to_str().unwrap()]),
        "does not exist",
    );
}

#[test]
fn paced_ingest_records_steps_and_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("paced.flr");
    ok(&flatline(&[
        "soak",
        "--seconds",
        "1",
        "--workload",
        "ingest",
        "--step-ms",
        "100",
        "--hz",
        "50",
        "--out",
        out.to_str().unwrap(),
    ]));
    let v = report(&out);
    let steps = v["channels"]["work.steps"]["last"].as_f64().unwrap();
    // Paced by the clock: one step per 100 ms in the 1 s run (11 at most, from
    // 0 to 1000 ms), fewer only when the machine makes the loop late.
    assert!(
        (3.0..=11.0).contains(&steps),
        "{steps} steps of 100 ms in 1 s"
    );
    assert_eq!(
        v["channels"]["work.tokens"]["last"].as_f64().unwrap(),
        steps * 64.0 * 256.0
    );
    assert!(
        v["recording"]["events"].as_u64().unwrap() >= 8,
        "a step event per step, and the phase"
    );
}

/// Two real watches of a small PyTorch loop (shipped in `recordings/`): the
/// flat one is not called growth anywhere, start-up included; the leaking
/// one is linear growth, critical, at about the 256 KiB a step it keeps.
#[test]
fn watched_pytorch_loops_read_flat_and_leaking() {
    let flat = report(&support::recording("watch-torch-flat-45s.flr"));
    assert_eq!(
        flat["growing"],
        serde_json::json!([]),
        "{}",
        flat["headline"]
    );
    let leak = report(&support::recording("watch-torch-leak-45s.flr"));
    let rss = &leak["channels"]["mem.rss"];
    assert_eq!(
        (rss["verdict"].as_str(), rss["severity"].as_str()),
        (Some("linear"), Some("critical"))
    );
    assert!(
        leak["growing"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g == "tree.rss")
    );
    let per_step = rss["drift_per_step"].as_f64().unwrap();
    assert!(
        (256.0 * 1024.0..=320.0 * 1024.0).contains(&per_step),
        "{per_step} B a step"
    );
}

/// The real trainers of issue 54 watched with no flags (shipped in
/// `recordings/`, made by `scripts/trainers/`): each job's 60 steps, its
/// loss and evaluations are read from what it printed, and a job that
/// lived 7–10 s, its imports and model build included, is not a leak.
#[test]
fn real_trainers_watched_with_no_flags_give_steps_losses_and_evaluations() {
    for (file, marks) in [
        ("watch-hf-trainer.flr", vec!["eval"; 3]),
        (
            "watch-lightning-trainer.flr",
            vec!["Sanity Checking", "Validation", "Validation", "Validation"],
        ),
    ] {
        let r = report(&support::recording(file));
        assert_eq!(r["events"]["steps"], 60, "{file}");
        assert_eq!(r["channels"]["log.step"]["last"], 60.0, "{file}");
        assert!(r["channels"]["log.loss"]["samples"].as_u64().unwrap() >= 6);
        let seen: Vec<&str> = r["events"]["markers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["text"].as_str().unwrap())
            .collect();
        assert_eq!(seen, marks, "{file}");
        assert_eq!(r["growing"], serde_json::json!([]), "{}", r["headline"]);
        let headline = r["headline"].as_str().unwrap();
        assert!(!headline.contains("RAM is reached"), "{file}: {headline}");
    }
}

/// `scripts/dataloader-leak.py list` on 4 real DataLoader workers, whose
/// copying of the list is a burst (+1.2 GiB of PSS in 30 s, then held) that
/// no trend can weigh: the trees' channels after the start-up read noisy or
/// cannot be told. It is told by its figures, naming the four workers and
/// not their parent, whose own memory rose by the pages they left to it.
#[test]
fn a_dataloaders_burst_of_copying_is_told_by_its_figures() {
    let r = report(&support::recording("watch-loader-list-burst-60s.flr"));
    let headline = r["headline"].as_str().unwrap();
    assert!(
        headline.starts_with("Copy-on-access: worker")
            && headline.contains("copy pages they share with their parent")
            && !headline.contains("held"),
        "{headline}"
    );
    let tree = &r["process_tree"];
    let copy = &tree["copy"];
    let copiers = support::pids(&copy["copiers"]);
    assert_eq!(copiers.len(), 4, "{copy}");
    for p in tree["processes"].as_array().unwrap() {
        let named = copiers.contains(&p["pid"].as_u64().unwrap());
        assert_eq!(named, p["role"] == "worker", "{p}");
    }
    assert!(copy.get("in_start_up").is_none(), "{copy}");
    assert!(copy["grew"].as_f64().unwrap() > 1e9, "{copy}");
}

/// The same job where the copying ended inside the start-up the analysis
/// leaves out (before: "No memory channel grows beyond its noise, but
/// pid898.pss (and 2 more) cannot be told"): told as the start-up's, held.
#[test]
fn copying_done_in_a_dataloaders_start_up_is_told_as_the_start_ups() {
    let r = report(&support::recording("watch-loader-list-startup-60s.flr"));
    let headline = r["headline"].as_str().unwrap();
    assert!(
        headline.starts_with(
            "Copy-on-access in the start-up: worker 917, worker 918, worker 919 and worker 920 \
             of main 898 copied pages they share with their parent"
        ) && headline.contains("from their start and held"),
        "{headline}"
    );
    let copy = &r["process_tree"]["copy"];
    assert_eq!(copy["in_start_up"], true, "{copy}");
    assert_eq!(copy["held"], true, "{copy}");
    assert!(r["warmup"]["s"].as_f64().unwrap() > 10.0, "{}", r["warmup"]);
}

/// A node's 65 processes watched (shipped in `recordings/`): two workers
/// copy their rank's pages for 60 s and then stop. The headline is the
/// copy-on-access finding, saying the growth held; `grew` names exactly the
/// processes whose fast copy estimate moved (by more than 10 MB), and so
/// no flat one; every process is counted.
#[test]
fn a_node_s_copying_workers_are_named_and_no_flat_one() {
    let r = report(&support::recording("watch-node-65-120s.flr"));
    let headline = r["headline"].as_str().unwrap();
    assert!(
        headline.starts_with("Copy-on-access: worker") && headline.contains("and held"),
        "{headline}"
    );
    let tree = &r["process_tree"];
    assert_eq!(tree["processes"].as_array().map(Vec::len), Some(65));
    let grew = support::pids(&tree["grew"]);
    let mut copied: Vec<u64> = r["channels"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(name, c)| name.ends_with(".cow") && c["last"].as_f64().unwrap_or(0.0) > 10e6)
        .filter_map(|(name, _)| name.strip_prefix("pid")?.strip_suffix(".cow")?.parse().ok())
        .collect();
    copied.sort_unstable();
    assert_eq!(copied.len(), 2, "{copied:?}");
    assert_eq!(grew, copied);
}

#[test]
fn a_soak_runs_either_ring_layout_and_records_which() {
    let dir = tempfile::tempdir().unwrap();
    for layout in ["aos", "soa"] {
        let out = dir.path().join(format!("{layout}.flr"));
        ok(&flatline(&[
            "soak",
            "--seconds",
            "1",
            "--workload",
            "ops1b",
            "--layout",
            layout,
            "--hz",
            "20",
            "--out",
            out.to_str().unwrap(),
        ]));
        let v = report(&out);
        assert_eq!(v["recording"]["config"]["layout"], layout);
        // It ran and was counted (how fast is `flatline bench`'s to say).
        assert!(v["channels"]["work.ops_per_s"]["max"].as_f64().unwrap() > 0.0);
    }
    let bad = flatline(&["soak", "--seconds", "1", "--layout", "hot"]);
    assert_eq!(bad.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("invalid value 'hot'"));
}

#[test]
fn a_killed_soak_keeps_all_but_the_last_second() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("killed.flr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_flatline"))
        .args([
            "soak",
            "--seconds",
            "60",
            "--workload",
            "idle",
            "--hz",
            "100",
            "--out",
            out.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Until a second of samples is on disk (however long the start takes), then
    // a little more, so the kill lands between two of the recorder's writes.
    let on_disk = || {
        let o = flatline(&["report", out.to_str().unwrap(), "--format", "json"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).ok()?;
        v["recording"]["samples"].as_u64().filter(|&n| n >= 100)
    };
    let first = wait_for(Duration::from_millis(100), on_disk);
    assert!(first.is_some(), "the soak wrote no second of samples");
    // Then the next write, so the kill lands between two of the recorder's
    // writes, whatever the machine's speed.
    // The wall clock when the read that saw it began: what was on disk
    // then stands on samples taken before it.
    let now_ms = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as f64
    };
    let mut looked_ms = 0.0;
    let grew = wait_for(Duration::from_millis(20), || {
        looked_ms = now_ms();
        on_disk().filter(|&n| Some(n) > first)
    });
    let seen = grew.expect("the soak stopped writing");
    child.kill().unwrap(); // SIGKILL: no chance to write a footer
    child.wait().unwrap();

    let o = flatline(&["report", out.to_str().unwrap(), "--format", "json"]);
    assert!(o.status.success(), "a truncated recording still reports");
    assert!(String::from_utf8_lossy(&o.stderr).contains("truncated"));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = &v["recording"];
    assert_eq!(r["truncated"], true);
    let started = r["started_unix_ms"].as_f64().unwrap();
    // Nothing that was on disk is lost, and what was there reached within
    // the recorder's second of the read that saw it (however long the
    // reads and the kill took on a busy machine).
    assert!(
        r["samples"].as_u64().unwrap() >= seen,
        "{r}: {seen} were on disk"
    );
    let kept_until = started + r["duration_s"].as_f64().unwrap() * 1e3;
    let behind_ms = looked_ms - kept_until;
    assert!(
        behind_ms <= 1000.0,
        "the file was {behind_ms:.0} ms behind the read that saw it"
    );
}

#[test]
fn bad_recordings_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.flr");
    std::fs::write(&junk, b"this is not a recording at all").unwrap();
    fails(
        &flatline(&["report", junk.to_str().unwrap()]),
        "not a flatline recording",
    );
    fails(&flatline(&["report", "/nonexistent/x.flr"]), "No such file");
    let empty = dir.path().join("empty.flr");
    std::fs::write(&empty, b"").unwrap();
    fails(
        &flatline(&["report", empty.to_str().unwrap()]),
        "not a flatline recording",
    );
}

#[test]
fn a_step_log_imports_reports_and_exports() {
    let dir = tempfile::tempdir().unwrap();
    let csv = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/step_log.csv");
    let out = dir.path().join("log.flr");
    let o = support::import(&csv, &out);
    let text = ok(&o);
    assert!(text.contains("(CSV): 20 rows of 11 channels"), "{text}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("fnv1a_hash is text"));
    let v = report(&out);
    assert_eq!(v["recording"]["source"], "import");
    let rss = &v["channels"]["log.vm_rss_mb"];
    assert_eq!(rss["unit"], "mebibytes");
    assert_eq!(rss["first"], 1296.2);
    assert!((v["recording"]["duration_s"].as_f64().unwrap() - 3.0).abs() < 0.5);

    let back = dir.path().join("back.csv");
    let text = ok(&flatline(&[
        "export",
        out.to_str().unwrap(),
        "--csv",
        back.to_str().unwrap(),
    ]));
    assert!(text.contains("wrote 20 rows"), "{text}");
    let exported = std::fs::read_to_string(&back).unwrap();
    assert!(exported.starts_with("t_s,log.step,log.loss,"), "{exported}");
    assert!(
        exported
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("0.000000,0,2.8973,52.28,")
    );
    fails(
        &flatline(&[
            "export",
            out.to_str().unwrap(),
            "--csv",
            back.to_str().unwrap(),
        ]),
        "already exists",
    );

    let ragged = dir.path().join("ragged.csv");
    std::fs::write(&ragged, "step,loss\n0,1.0\n1\n").unwrap();
    let o = support::import(&ragged, &dir.path().join("r.flr"));
    fails(&o, "line 3");
}

#[test]
fn bench_telemetry_goes_into_a_recording() {
    // What is checked is the path (sampler -> recorder -> file -> reader), not
    // how many samples some number of operations makes: the bench grows its
    // work until 20 samples were taken, however fast the CPU.
    let (v, _) = ops1b_with_telemetry(100.0, 20);
    let t = &v["telemetry"];
    assert!(t["recording_bytes"].as_u64().unwrap() > 1000, "{t}");
    let samples = t["samples"].as_u64().unwrap();
    assert!(samples >= 20, "{t}");
    assert_eq!(
        t["samples_read_back"].as_u64(),
        Some(samples),
        "every sample written is read back: {t}"
    );
}

#[test]
fn receipts_carry_the_analysis_in_every_format() {
    let golden = golden_v1();
    let g = golden.to_str().unwrap();
    let md = ok(&flatline(&["report", g, "--format", "md"]));
    assert!(md.starts_with("# Drift receipt: `v1.flr`"), "{md}");
    assert!(md.contains("sha256:5c54b06eac4f42418ee5f37394ebdfea1791e3660bf9411281b8e16f8b9afe09"));
    assert!(
        md.contains("| `mem.rss` |") && md.contains("24 h projection"),
        "{md}"
    );
    assert!(
        md.contains("| training | 15 steps, 245,760 tokens |"),
        "{md}"
    );

    let v = report(&golden);
    assert_eq!(v["headline"], "Memory is flat.");
    assert_eq!(v["growing"], serde_json::json!([]));
    for (name, c) in v["channels"].as_object().unwrap() {
        let verdict = c["verdict"].as_str().unwrap();
        // Each kind has its own verdicts.
        let allowed: &[&str] = match c["kind"].as_str().unwrap() {
            "level" => &["flat", "staircase", "linear", "noisy", "insufficient"],
            "counter" => &["steady", "rising", "falling", "bursty", "insufficient"],
            "gauge" => &[
                "stable",
                "drifting_up",
                "drifting_down",
                "noisy",
                "insufficient",
            ],
            "peak" => &["held", "rose", "insufficient"],
            other => panic!("{name}: kind {other}"),
        };
        assert!(allowed.contains(&verdict), "{name}: {verdict}");
        if c["kind"] != "level" {
            assert!(c["projection_24h"].is_null(), "{name} is not projected");
        }
        for key in [
            "confidence",
            "baseline",
            "final",
            "drift",
            "slope_per_s",
            "longest_flat_s",
            "projection_24h",
        ] {
            assert!(c.get(key).is_some(), "{name} lacks {key}");
        }
        assert!(c["jumps"].is_u64(), "{name}");
    }
    // A counter is read as a rate: one step every 200 ms is steady, not a leak.
    assert_eq!(v["channels"]["work.steps"]["verdict"], "steady");
    assert!((v["channels"]["work.steps"]["rate_per_s"].as_f64().unwrap() - 5.0).abs() < 0.5);
    assert_eq!(v["channels"]["mem.swap"]["verdict"], "flat");
    assert!(
        v["channels"]["mem.rss"]["limit"].as_f64().unwrap() > 1e9,
        "RAM is the limit"
    );

    let text = ok(&flatline(&["report", g]));
    assert!(
        text.starts_with("Memory is flat.\n")
            && text.contains("jumps × quantum")
            && text.contains("analysis after a start-up of 0.3 s (found: where"),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_str(&ok(&flatline(&[
        "report",
        g,
        "--format",
        "json",
        "--warmup-s",
        "1",
    ])))
    .unwrap();
    assert_eq!(v["channels"]["mem.rss"]["warmup_s"], 1.0);
}

#[test]
fn the_window_needs_a_display_and_says_how_to_get_one() {
    let golden = golden_v1();
    for args in [
        vec!["replay", golden.to_str().unwrap()],
        vec!["live"],
        vec![],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_flatline"))
            .args(&args)
            .env_remove("DISPLAY")
            .env_remove("WAYLAND_DISPLAY")
            .output()
            .unwrap();
        fails(&out, "xvfb-run");
    }
}

/// A build without native Wayland says so, and how to open the window,
/// where only WAYLAND_DISPLAY is set (instead of winit's own error).
#[cfg(not(feature = "wayland"))]
#[test]
fn a_build_without_wayland_says_so_on_a_wayland_only_display() {
    let golden = golden_v1();
    let out = Command::new(env!("CARGO_BIN_EXE_flatline"))
        .args(["replay", golden.to_str().unwrap()])
        .env_remove("DISPLAY")
        .env("WAYLAND_DISPLAY", "wayland-0")
        .output()
        .unwrap();
    fails(&out, "--features wayland");
}

/// A receipt's facts are decided once: whatever the JSON holds of markers,
/// event notes, lines read, the command, the teardown and the growing
/// levels, the terminal receipt and the Markdown one both say.
#[test]
fn text_and_markdown_receipts_say_the_same_facts() {
    for name in [
        "recordings/corpus/torch-leak-16k-5hz.flr",
        "recordings/watch-nanogpt-cpu-90s.flr",
    ] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name);
        let p = path.to_str().unwrap();
        let v = report(&path);
        let text = ok(&flatline(&["report", p, "--format", "text"]));
        let md = ok(&flatline(&["report", p, "--format", "md"]));
        let mut facts: Vec<String> = Vec::new();
        let ev = &v["events"];
        for m in ev["markers"].as_array().unwrap() {
            facts.push(m["text"].as_str().unwrap().to_owned());
        }
        for n in ev["notes"].as_array().unwrap() {
            facts.push(n["text"].as_str().unwrap().to_owned());
        }
        for l in ev["lines_read"].as_array().unwrap() {
            facts.push(format!("{} lines read", l["lines"]));
        }
        let cmd: Vec<&str> = v["recording"]["command_line"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        if !cmd.is_empty() {
            facts.push(cmd.join(" "));
        }
        if let Some(td) = v["teardown_s"].as_f64() {
            facts.push(format!("analysis up to {td:.1} s"));
        }
        let growing: Vec<&str> = v["growing"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g.as_str().unwrap())
            .collect();
        if !growing.is_empty() {
            facts.push(growing.join(", "));
        }
        assert!(
            facts.len() >= 4,
            "{name}: too few facts to compare: {facts:?}"
        );
        for f in &facts {
            assert!(
                text.contains(f.as_str()),
                "{name}: the text receipt lacks {f:?}:\n{text}"
            );
            assert!(
                md.contains(f.as_str()),
                "{name}: the Markdown receipt lacks {f:?}:\n{md}"
            );
        }
    }
}
