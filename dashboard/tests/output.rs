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
/// the watch's JSON receipt. A printer that writes files gets a folder of
/// its own for each run (`DIR` in its arguments): `alone/` and `watched/`.
fn watched(dir: &Path, mode: &str, n: &str, extra: &[&str]) -> (Output, Output, serde_json::Value) {
    watched_with(dir, &[mode, n], extra)
}

fn watched_with(
    dir: &Path,
    printer: &[&str],
    extra: &[&str],
) -> (Output, Output, serde_json::Value) {
    let script = printers();
    let run_args = |sub: &str| -> Vec<String> {
        let folder = dir.join(sub);
        std::fs::create_dir_all(&folder).unwrap();
        printer
            .iter()
            .map(|a| a.replace("DIR", folder.to_str().unwrap()))
            .collect()
    };
    let alone = Command::new("python3")
        .arg(&script)
        .args(run_args("alone"))
        .output()
        .unwrap();
    assert!(alone.status.success());
    let out = dir.join(format!("{}.flr", printer[0]));
    let mut args: Vec<String> = ["watch", "--headless", "--hz", "20", "--out"]
        .map(String::from)
        .to_vec();
    args.push(out.to_str().unwrap().into());
    args.extend(
        extra
            .iter()
            .map(|a| a.replace("DIR", dir.join("watched").to_str().unwrap())),
    );
    args.extend([
        "--".into(),
        "python3".into(),
        script.to_str().unwrap().into(),
    ]);
    args.extend(run_args("watched"));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let seen = flatline(&args);
    assert!(
        seen.status.success(),
        "exit {:?}: {}",
        seen.status.code(),
        String::from_utf8_lossy(&seen.stderr)
    );
    (alone, seen, report(&out))
}

/// A reader's line counts in a receipt: (lines, parsed, ignored).
fn lines_read(v: &serde_json::Value, source: &str) -> (u64, u64, u64) {
    let r = v["events"]["lines_read"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["source"] == source)
        .unwrap_or_else(|| panic!("no {source} in {}", v["events"]));
    let n = |k: &str| r[k].as_u64().unwrap();
    (n("lines"), n("parsed"), n("ignored"))
}

/// The watch printed the command's bytes unchanged, then its own receipt.
fn passed_through(alone: &Output, seen: &Output) {
    assert!(
        seen.stdout.starts_with(&alone.stdout),
        "stdout changed: {} bytes alone, {} watched",
        alone.stdout.len(),
        seen.stdout.len()
    );
    // flatline's own notes (waiting for a log) come first, on lines of their own.
    let mut err = &seen.stderr[..];
    while err.starts_with(b"flatline: ") {
        let end = err
            .iter()
            .position(|&b| b == b'\n')
            .map_or(err.len(), |i| i + 1);
        err = &err[end..];
    }
    assert!(
        err == alone.stderr,
        "stderr changed:\n{:?}\nalone:\n{:?}",
        String::from_utf8_lossy(err),
        String::from_utf8_lossy(&alone.stderr)
    );
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
        text.contains("output: 37 lines read, 36 with steps, metrics or markers, 1 ignored"),
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
    // The dicts carry no step: the bar's count is the step, drawn 30 times.
    assert_eq!(v["events"]["steps"], 30);
    assert_eq!(v["channels"]["log.step"]["last"], 30.0);
    assert_eq!(v["channels"]["progress.it_per_s"]["last"], 30.0);
    assert_eq!(v["channels"]["log.loss"]["samples"], 6);
    // The eval dict is marked, as nanoGPT's eval line is.
    assert_eq!(
        markers(&v),
        ["eval", "Saving model checkpoint to out/checkpoint-30"]
    );
}

/// A job that prints as a Hugging Face Trainer does, replayed from real
/// tqdm bytes (`scripts/capture-bars.py`): the training bar on stderr, an
/// evaluation bar nested under it every 30 steps, dicts on stdout.
#[test]
fn a_real_tqdm_bar_counts_the_trainer_s_60_steps_with_its_rate() {
    let dir = tempfile::tempdir().unwrap();
    let (alone, seen, v) = watched_with(dir.path(), &["replay", "hf"], &[]);
    passed_through(&alone, &seen);
    assert_eq!(v["channels"]["log.step"]["last"], 60.0, "{}", v["channels"]);
    let text = String::from_utf8_lossy(&seen.stdout);
    assert!(text.contains("60 steps"), "{text}");
    // The JSON says the same: the bar drew fewer times than its 60 steps
    // (before, events.steps counted the draws).
    assert_eq!(v["events"]["steps"], 60);
    // tqdm said 16.91–19.9 it/s; its first draw (`?it/s`) says nothing.
    let rate = &v["channels"]["progress.it_per_s"];
    assert_eq!(rate["unit"], "per_second");
    let last = rate["last"].as_f64().unwrap();
    assert!((16.0..21.0).contains(&last), "{rate}");
    // The evaluation bars are progress, never steps; the eval dicts marked.
    assert_eq!(v["channels"]["log.progress"]["last"], 8.0);
    assert_eq!(markers(&v), ["eval", "eval"]);
    let notes = v["events"]["notes"].to_string();
    assert!(notes.contains("steps from the progress bar"), "{notes}");
    // Each bar draw is a line read (tqdm drew 36 times) besides the 9 dicts.
    let (lines, parsed, _) = lines_read(&v, "output");
    assert!(lines >= 45 && parsed >= 45, "{lines} {parsed}");
}

/// A saved console (`python train.py 2> train.log`) keeps every state its
/// bars drew: `import` reads them as `watch` does, and a first line that
/// sets no channel (the bar's 0/60) makes no empty sample.
#[test]
fn an_imported_console_log_counts_its_bar_s_steps() {
    let dir = tempfile::tempdir().unwrap();
    let bars = Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime/telemetry/tests/data/bars");
    let v = import(&bars.join("hf.stderr"), &dir.path().join("hf.flr"));
    assert_eq!(v["recording"]["truncated"], false, "{}", v["recording"]);
    assert_eq!(v["channels"]["log.step"]["last"], 60.0);
    assert_eq!(v["events"]["steps"], 60);
    assert!(v["channels"]["progress.it_per_s"]["last"].as_f64().unwrap() > 10.0);
    let v = import(&bars.join("lightning.stdout"), &dir.path().join("pl.flr"));
    assert_eq!(v["channels"]["log.step"]["last"], 60.0);
    assert_eq!(markers(&v), ["Validation DataLoader 0"; 3]);
}

/// Lightning's bar (reset each epoch, a validation bar nested under it)
/// counts every epoch's batches as steps, one after another.
#[test]
fn a_lightning_bar_adds_up_its_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let (alone, seen, v) = watched_with(dir.path(), &["replay", "lightning"], &[]);
    passed_through(&alone, &seen);
    assert_eq!(v["channels"]["log.step"]["last"], 60.0);
    assert_eq!(v["channels"]["log.loss"]["last"], 0.05);
    assert_eq!(markers(&v), ["Validation DataLoader 0"; 3]);
}

/// A watched command whose output is read is asked to draw as to a
/// terminal (rich reads these; tqdm already draws through a pipe), and a
/// value the user set is left alone.
#[test]
fn a_started_command_is_told_it_may_draw_as_to_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let said = |env: &[(&str, &str)]| -> String {
        let out = dir.path().join("env.flr");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_flatline"));
        cmd.args([
            "watch",
            "--headless",
            "--force",
            "--out",
            out.to_str().unwrap(),
            "--",
        ])
        .args([
            "sh",
            "-c",
            "echo \"tty=$TTY_COMPATIBLE,$TTY_INTERACTIVE\"; sleep 0.5",
        ])
        .env_remove("TTY_COMPATIBLE")
        .env_remove("TTY_INTERACTIVE");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let seen = cmd.output().unwrap();
        assert!(seen.status.success(), "{seen:?}");
        let text = String::from_utf8_lossy(&seen.stdout).into_owned();
        text.lines().next().unwrap_or_default().to_owned()
    };
    assert_eq!(said(&[]), "tty=1,1");
    assert_eq!(said(&[("TTY_INTERACTIVE", "0")]), "tty=1,0");
}

/// A real Lightning Trainer (`scripts/trainers/lightning_trainer.py`, 3
/// epochs of 20 batches, rich installed), captured with the environment a
/// watch gives it: rich then draws its bar through the pipe as to a
/// terminal (before, it drew once, at the end: 1 step, no validation).
#[test]
fn a_real_lightning_trainer_s_rich_bar_gives_its_60_steps_and_validations() {
    let dir = tempfile::tempdir().unwrap();
    let (alone, seen, v) = watched_with(dir.path(), &["replay", "lightning-real"], &[]);
    passed_through(&alone, &seen);
    assert_eq!(v["events"]["steps"], 60, "{}", v["events"]);
    assert_eq!(v["channels"]["log.step"]["last"], 60.0);
    assert!(v["channels"]["log.loss"]["samples"].as_u64().unwrap() >= 30);
    let rate = v["channels"]["progress.it_per_s"]["last"].as_f64().unwrap();
    assert!((15.0..20.0).contains(&rate), "rich said ~18.7 it/s: {rate}");
    // The sanity check's two batches, then a validation after each epoch.
    assert_eq!(
        markers(&v),
        ["Sanity Checking", "Validation", "Validation", "Validation"]
    );
}

/// A real Hugging Face Trainer (`scripts/trainers/hf_trainer.py`): its
/// tqdm bar on stderr, its dicts (values printed as strings) on stdout.
#[test]
fn a_real_hugging_face_trainer_gives_its_60_steps_losses_and_evaluations() {
    let dir = tempfile::tempdir().unwrap();
    let (alone, seen, v) = watched_with(dir.path(), &["replay", "hf-real"], &[]);
    passed_through(&alone, &seen);
    assert_eq!(v["events"]["steps"], 60, "{}", v["events"]);
    assert_eq!(v["channels"]["log.loss"]["samples"], 6);
    assert_eq!(v["channels"]["log.loss"]["last"], 6.707);
    assert_eq!(v["channels"]["log.eval_loss"]["samples"], 3);
    assert_eq!(markers(&v), ["eval"; 3]);
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
        "reads a started command's output: give the command after",
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

/// Lightning's CSVLogger rewrites metrics.csv in place with a wider header
/// twice during the run; every row is read once, none lost.
#[test]
fn a_lightning_csv_rewritten_mid_run_is_read_row_by_row_once() {
    let dir = tempfile::tempdir().unwrap();
    let (alone, seen, v) = watched_with(
        dir.path(),
        &["lightning", "40", "DIR"],
        &["--log", "DIR/metrics.csv"],
    );
    passed_through(&alone, &seen);
    let file = std::fs::read_to_string(dir.path().join("watched/metrics.csv")).unwrap();
    // Written by Python's csv module, as Lightning's is: CRLF line ends.
    assert!(file.starts_with("epoch,step,train_loss,val_loss,lr-AdamW\r\n"));
    let rows = file.lines().count() as u64 - 1;
    assert_eq!(rows, 44, "40 steps and 4 validations");
    assert_eq!(lines_read(&v, "log"), (rows, rows, 0), "each row once");
    let names = channels(&v);
    for c in [
        "log.epoch",
        "log.step",
        "log.train_loss",
        "log.val_loss",
        "log.lr_adamw",
    ] {
        assert!(names.iter().any(|n| n == c), "{c} in {names:?}");
    }
    assert_eq!(v["channels"]["log.val_loss"]["last"], 0.0625, "2.5/40");
    // A validation row repeats its step: 40 steps, from the log.
    assert_eq!(v["events"]["steps"], 40);
    let text = String::from_utf8_lossy(&seen.stdout);
    assert!(text.contains("log: 44 lines read, 44 with steps"), "{text}");
    assert!(text.contains("log: read as CSV, rewritten"), "{text}");
}

/// A Hugging Face Trainer's trainer_state.json, rewritten whole at each
/// checkpoint, beside its printed output.
#[test]
fn a_trainer_state_gives_the_steps_and_evals_once() {
    let dir = tempfile::tempdir().unwrap();
    let (alone, seen, v) = watched_with(
        dir.path(),
        &["hf", "30", "DIR"],
        &["--log", "DIR/trainer_state.json"],
    );
    passed_through(&alone, &seen);
    // 6 loss entries and 3 evals; an eval repeats its step.
    assert_eq!(lines_read(&v, "log"), (9, 9, 0));
    // Its 6 loss entries are steps 5 to 30: the job took 30 steps.
    assert_eq!(
        v["events"]["steps"], 30,
        "steps from the log's step axis, not the prints"
    );
    let m = markers(&v);
    assert_eq!(m.iter().filter(|t| *t == "eval").count(), 3, "{m:?}");
    assert!(m.contains(&"Saving model checkpoint to out/checkpoint-30".to_owned()));
    assert_eq!(v["channels"]["log.eval_loss"]["last"], 1.9);
    assert_eq!(v["channels"]["log.step"]["last"], 30.0);
    // What it printed on stdout: 6 metric dicts, the eval dict and the
    // checkpoint line, all read; on stderr, the bar (its own reader).
    let (lines, parsed, _) = lines_read(&v, "output");
    assert!(
        parsed >= 8 && lines >= parsed,
        "{lines} lines, {parsed} parsed"
    );
}

fn import(file: &Path, out: &Path) -> serde_json::Value {
    let done = support::import(file, out);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    report(out)
}

/// `flatline import` reads what `watch --log` follows, and saved console
/// output, after the run.
#[test]
fn import_reads_trainer_states_lightning_csvs_and_saved_console_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let run = |args: &[&str]| {
        let o = Command::new("python3")
            .arg(printers())
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success());
        o
    };
    let dir_s = d.to_str().unwrap();
    run(&["hf", "30", dir_s]);
    let v = import(&d.join("trainer_state.json"), &d.join("hf.flr"));
    assert_eq!(v["events"]["steps"], 30, "6 entries, up to step 30");
    assert_eq!(markers(&v), ["eval"; 3]);
    assert_eq!(v["channels"]["log.loss"]["last"], 0.1);
    assert_eq!(v["channels"]["log.eval_loss"]["samples"], 3);

    run(&["lightning", "30", dir_s]);
    let v = import(&d.join("metrics.csv"), &d.join("pl.flr"));
    assert_eq!(v["events"]["steps"], 30);
    assert_eq!(v["channels"]["log.lr_adamw"]["samples"], 10);
    assert_eq!(v["channels"]["log.val_loss"]["samples"], 3);

    let nanogpt = run(&["nanogpt", "30"]);
    let log = d.join("train.log");
    std::fs::write(&log, &nanogpt.stdout).unwrap();
    let v = import(&log, &d.join("nanogpt.flr"));
    assert_eq!(v["events"]["steps"], 30);
    assert_eq!(markers(&v), ["eval", "saving checkpoint to out"].repeat(3));
    assert_eq!(v["channels"]["log.mfu_pct"]["unit"], "percent");
    assert_eq!(lines_read(&v, "log"), (37, 36, 1), "the binary junk line");
    assert!(
        v["recording"]["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("one row per second")),
        "{}",
        v["recording"]["notes"]
    );

    let torchrun = run(&["torchrun", "10"]);
    std::fs::write(&log, &torchrun.stdout).unwrap();
    let v = import(&log, &d.join("torchrun.flr"));
    assert_eq!(v["channels"]["log.rank1.loss"]["last"], 4.0);
    assert_eq!(v["events"]["steps"], 10);

    // JSON lines whose keys grow: the new key joins where it first appears.
    let jl = d.join("log.jsonl");
    std::fs::write(
        &jl,
        "{\"step\": 1, \"loss\": 2.0}\n{\"step\": 2, \"loss\": 1.9}\n{\"step\": 3, \"loss\": 1.8, \"grad_norm\": 0.5}\n",
    )
    .unwrap();
    let v = import(&jl, &d.join("jl.flr"));
    assert_eq!(v["channels"]["log.grad_norm"]["samples"], 1);
    assert_eq!(v["channels"]["log.loss"]["samples"], 3);

    // Text that says nothing is an error, and no file is left.
    std::fs::write(&log, "hello\nworld\n").unwrap();
    let out = d.join("nothing.flr");
    let e = support::import(&log, &out);
    support::fails(&e, "none of its 2 lines has a step, a metric or a marker");
    assert!(!out.exists());
}

/// A job's logged PyTorch statistics become `torch.*` in bytes, whatever
/// the format and scale, and the receipt names the layer that grows.
#[test]
fn pytorch_statistics_name_the_layer_that_grows() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    const MIB: f64 = 1_048_576.0;
    // memory_stats() keys in JSON lines: tensors pile up, 1 MiB a step.
    let mut leak = String::new();
    for i in 0..400 {
        leak.push_str(&format!(
            "{{\"step\": {i}, \"elapsed_s\": {}, \"allocated_bytes.all.current\": {}, \
             \"reserved_bytes.all.current\": {}}}\n",
            f64::from(i) * 0.5,
            1e9 + f64::from(i) * MIB,
            2e9 + f64::from(i) * MIB
        ));
    }
    std::fs::write(d.join("leak.jsonl"), leak).unwrap();
    let v = import(&d.join("leak.jsonl"), &d.join("leak.flr"));
    assert_eq!(v["gpu_layers"]["layer"], "tensors", "{}", v["gpu_layers"]);
    assert_eq!(v["channels"]["torch.cache"]["last"], 1e9);
    assert_eq!(v["channels"]["torch.allocated"]["unit"], "bytes");
    // Logged in MiB on console lines: the cache grows, the tensors do not.
    let mut frag = String::new();
    for i in 0..400 {
        frag.push_str(&format!(
            "step {i} loss=2.0 mem_allocated_mb=1000 mem_reserved_mb={} elapsed_s={}\n",
            2000 + i,
            f64::from(i) * 0.5
        ));
    }
    std::fs::write(d.join("frag.log"), frag).unwrap();
    let v = import(&d.join("frag.log"), &d.join("frag.flr"));
    assert_eq!(
        v["gpu_layers"]["layer"], "caching_allocator",
        "{}",
        v["gpu_layers"]
    );
    assert_eq!(v["channels"]["torch.allocated"]["last"], 1000.0 * MIB);
    assert!(
        v["gpu_layers"]["text"]
            .as_str()
            .unwrap()
            .contains("expandable_segments")
    );
    // Without PyTorch's statistics there is no layer to name.
    std::fs::write(d.join("plain.log"), "step 1 loss=2.0\nstep 2 loss=1.9\n").unwrap();
    let v = import(&d.join("plain.log"), &d.join("plain.flr"));
    assert!(v["gpu_layers"].is_null());
}

/// `flatline watch --headless --out OUT OPTIONS -- COMMAND…`, run to its end.
fn watch_headless(out: &Path, options: &[&str], command: &[&str]) -> Output {
    let mut args = vec!["watch", "--headless", "--out", out.to_str().unwrap()];
    args.extend(options);
    args.push("--");
    args.extend(command);
    flatline(&args)
}

/// A job that prints its one step line and exits at once: the line's step
/// and metric are in the recording, though the process was gone before the
/// sampler's next tick.
#[test]
fn a_line_printed_just_before_the_exit_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("quick.flr");
    let seen = watch_headless(
        &out,
        &["--hz", "5"],
        &["sh", "-c", "sleep 0.5; echo 'step 7 loss=1.25'"],
    );
    assert!(
        seen.status.success(),
        "{}",
        String::from_utf8_lossy(&seen.stderr)
    );
    let v = report(&out);
    assert_eq!(v["channels"]["log.loss"]["last"], 1.25, "{v:#}");
}

/// A job stopped by `--seconds` while it prints: the last line it printed
/// (it prints one more as SIGTERM stops it) is in the recording.
#[test]
fn a_job_stopped_by_seconds_keeps_its_last_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("stopped.flr");
    let job = "import signal, sys, time\n\
               def bye(*_):\n    print('step 999 loss=0.5', flush=True); sys.exit(0)\n\
               signal.signal(signal.SIGTERM, bye)\n\
               i = 0\n\
               while True:\n    i += 1; print(f'step {i} loss={1.0 + i / 1000}', flush=True); time.sleep(0.01)\n";
    let seen = watch_headless(
        &out,
        &["--hz", "10", "--seconds", "2"],
        &["python3", "-c", job],
    );
    let stdout = String::from_utf8_lossy(&seen.stdout);
    assert!(
        stdout.contains("step 999 loss=0.5"),
        "the last line passed through"
    );
    let v = report(&out);
    assert_eq!(v["channels"]["log.loss"]["last"], 0.5, "{v:#}");
    assert_eq!(v["recording"]["end"], "completed", "{v:#}");
}

/// A job that closes its standard output and goes on printing to stderr:
/// the watch reads on from stderr and ends with the job.
#[test]
fn a_job_that_closes_its_stdout_is_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("closed.flr");
    let job = "import os, sys, time\n\
               print('step 1 loss=2.0', flush=True)\n\
               os.close(1)\n\
               for i in range(2, 6):\n    print(f'step {i} loss={2.0 - i / 10}', file=sys.stderr, flush=True); time.sleep(0.1)\n";
    let seen = watch_headless(&out, &["--hz", "10"], &["python3", "-c", job]);
    assert!(
        seen.status.success(),
        "{}",
        String::from_utf8_lossy(&seen.stderr)
    );
    let v = report(&out);
    assert_eq!(v["channels"]["log.loss"]["last"], 1.5, "{v:#}");
}

/// A 5 MB line without a newline, then binary bytes: every byte passes
/// through, nothing panics, and the lines after it are read again.
#[test]
fn a_huge_line_and_binary_bytes_pass_through_and_reading_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("huge.flr");
    let job = "import sys, time\n\
               w = sys.stdout.buffer\n\
               w.write(b'x' * 5_000_000); w.write(bytes(range(256)) * 64); w.write(b'\\n'); w.flush()\n\
               time.sleep(0.3)\n\
               w.write(b'step 3 loss=0.5\\n'); w.flush()\n\
               time.sleep(0.3)\n";
    let seen = watch_headless(&out, &["--hz", "10"], &["python3", "-c", job]);
    assert!(
        seen.status.success(),
        "{}",
        String::from_utf8_lossy(&seen.stderr)
    );
    // Passed through byte for byte (the receipt follows the job's output).
    let passed = &seen.stdout[..5_000_000 + 256 * 64 + 1];
    assert!(passed[..5_000_000].iter().all(|&b| b == b'x'));
    assert_eq!(
        &passed[5_000_000..5_000_256],
        &(0..=255u8).collect::<Vec<_>>()[..]
    );
    let v = report(&out);
    assert_eq!(v["channels"]["log.loss"]["last"], 0.5, "{v:#}");
}

/// A job stopped with SIGSTOP for 30 s, then continued: sampling goes on
/// through the stop (its memory is still there to read), every step it
/// printed before and after is passed through and recorded, and the watch
/// ends with it.
#[test]
fn a_job_stopped_for_half_a_minute_is_watched_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("stopped.flr");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/cow_workers.py");
    let run = flatline(&[
        "watch",
        "--headless",
        "--hz",
        "10",
        "--out",
        out.to_str().unwrap(),
        "--",
        "python3",
        fixture.to_str().unwrap(),
        "stop",
        "30",
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    let truth: serde_json::Value = serde_json::from_str(
        stdout
            .lines()
            .find(|l| l.starts_with('{'))
            .expect("the fixture's line"),
    )
    .unwrap();
    let steps = truth["steps"].as_u64().unwrap();
    let printed = stdout.lines().filter(|l| l.starts_with("step ")).count() as u64;
    assert_eq!(printed, steps, "every step line passed through");
    let v = report(&out);
    assert_eq!(lines_read(&v, "output").1, steps + 1, "{v:#}");
    // Samples all through the stop: no gap longer than a few periods (a
    // late sampler skips ticks; it does not stop).
    let rec = flatline_telemetry::recording::Recording::open(&out).unwrap();
    let (stopped, continued) = (
        truth["stopped_s"].as_f64().unwrap(),
        truth["continued_s"].as_f64().unwrap(),
    );
    assert!(continued - stopped >= 29.0, "{truth}");
    let during = rec
        .t_ns
        .iter()
        .map(|&t| t as f64 / 1e9)
        .filter(|t| (stopped + 1.0..continued - 1.0).contains(t))
        .collect::<Vec<_>>();
    assert!(during.len() >= 20, "{} samples while stopped", during.len());
    let gap = during.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max);
    assert!(gap < 5.0, "a {gap:.1} s gap while the job was stopped");
}
